//! A real etcd + kube-apiserver for tests, with RBAC on and an admin client certificate.
//!
//! Library tests that need Kubernetes use this instead of a mocked API: a real API server
//! validates CRD schemas and CEL rules, runs server-side apply's field ownership, enforces
//! RBAC and optimistic concurrency, none of which a mock reproduces faithfully.
//!
//! The server writes an audit log of every request, so tests can count what an operator
//! sent (for example: reconciling an unchanged object must send no writes).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::pki::{CertFiles, Pki};
use super::{HarnessError, binary, free_port, log_tail, spawn_logged};

/// A running etcd + kube-apiserver pair, stopped (and its data removed) when dropped.
pub struct ApiServer {
    dir: tempfile::TempDir,
    url: String,
    kubeconfig: PathBuf,
    pki: Pki,
    // Field order matters: the API server stops before its etcd.
    _apiserver: tokio::process::Child,
    _etcd: tokio::process::Child,
}

/// The audit policy: every request at `Metadata` level (verb, user, resource, response
/// code), which is all the tests count.
const AUDIT_POLICY: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";

const READY_TIMEOUT: Duration = Duration::from_secs(90);

impl ApiServer {
    /// Starts etcd and kube-apiserver on free loopback ports and waits until `/readyz`
    /// answers. Fails with a clear message when the binaries have not been built.
    pub async fn start() -> Result<Self, HarnessError> {
        let etcd_bin = binary("etcd")?;
        let apiserver_bin = binary("kube-apiserver")?;
        let dir = tempfile::Builder::new()
            .prefix("statecraft-apiserver-")
            .tempdir()
            .map_err(|e| HarnessError::Setup(format!("temp dir: {e}")))?;
        let root = dir.path();

        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args: Vec<String> = vec![
            "--name=test".into(),
            format!("--data-dir={}", root.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=test={peer_url}"),
            // Test data is thrown away, so durability is not worth the fsync latency.
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        let etcd = spawn_logged(&etcd_bin, &etcd_args, &root.join("etcd.log"))?;

        let pki = Pki::new(root)?;
        let serving = pki.server("apiserver", &["kubernetes.default.svc", "10.0.0.1"])?;
        let admin = pki.client("admin", "statecraft-test-admin", &["system:masters"])?;
        let sa = pki.signing_key("service-account")?;
        let policy = root.join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).map_err(|e| HarnessError::io(&policy, e))?;

        let port = free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let apiserver_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // No nodes and a loopback address: there is no `kubernetes` Service endpoint to
            // keep up to date, and Endpoints refuse loopback addresses anyway.
            "--endpoint-reconciler-type=none".into(),
            format!("--cert-dir={}", root.join("certs").display()),
            format!("--tls-cert-file={}", serving.cert.display()),
            format!("--tls-private-key-file={}", serving.key.display()),
            format!("--client-ca-file={}", pki.ca_cert().display()),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", sa.cert.display()),
            format!("--service-account-signing-key-file={}", sa.key.display()),
            "--authorization-mode=RBAC".into(),
            "--allow-privileged=true".into(),
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", root.join("audit.log").display()),
            "--audit-log-mode=blocking".into(),
            "--v=1".into(),
        ];
        let apiserver = spawn_logged(&apiserver_bin, &apiserver_args, &root.join("apiserver.log"))?;

        let kubeconfig = root.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &url, &pki.ca_cert(), &admin)?;
        let server = ApiServer { dir, url, kubeconfig, pki, _apiserver: apiserver, _etcd: etcd };
        server.wait_ready().await?;
        Ok(server)
    }

    async fn wait_ready(&self) -> Result<(), HarnessError> {
        let client = self.client().await?;
        let started = Instant::now();
        loop {
            let req = http::Request::get("/readyz").body(Vec::new()).map_err(|e| HarnessError::Setup(e.to_string()))?;
            if let Ok(body) = client.request_text(req).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(HarnessError::NotReady {
                    server: format!("kube-apiserver at {}", self.url),
                    seconds: READY_TIMEOUT.as_secs(),
                    log_tail: format!(
                        "{}\n--- etcd ---\n{}",
                        log_tail(&self.dir.path().join("apiserver.log"), 20),
                        log_tail(&self.dir.path().join("etcd.log"), 10)
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A client authenticated as a cluster admin (`system:masters`).
    pub async fn client(&self) -> Result<kube::Client, HarnessError> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// A client authenticated as `user` in `groups`, holding only the rights RBAC gives it:
    /// for testing that an operator's Role is enough (and no more).
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> Result<kube::Client, HarnessError> {
        client_from_kubeconfig(&self.kubeconfig_as(user, groups)?).await
    }

    /// A kubeconfig for `user` in `groups` (see [`ApiServer::client_as`]), for child
    /// processes. A service account `sa` in namespace `ns` is user
    /// `system:serviceaccount:ns:sa` in group `system:serviceaccounts`: a certificate with
    /// that name is bound by RoleBindings to the service account exactly like its token.
    pub fn kubeconfig_as(&self, user: &str, groups: &[&str]) -> Result<PathBuf, HarnessError> {
        let file_name = format!("user-{}", user.replace([':', '/'], "-"));
        let certs = self.pki.client(&file_name, user, groups)?;
        let path = self.dir.path().join(format!("{file_name}.kubeconfig"));
        write_kubeconfig(&path, &self.url, &self.pki.ca_cert(), &certs)?;
        Ok(path)
    }

    /// The admin kubeconfig, for child processes (`KUBECONFIG=...`) and `kubectl`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The audit log: one JSON event per line.
    pub fn audit_log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// Requests in the audit log made by `user` whose verb is one of `verbs`.
    pub fn audit_count(&self, user: &str, verbs: &[&str]) -> Result<usize, HarnessError> {
        let path = self.audit_log();
        let text = std::fs::read_to_string(&path).map_err(|e| HarnessError::io(&path, e))?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|ev| ev["user"]["username"] == user)
            .filter(|ev| ev["verb"].as_str().is_some_and(|v| verbs.contains(&v)))
            .count())
    }
}

/// A client from the kubeconfig at `path` (one [`ApiServer::kubeconfig_as`] wrote), for
/// a child process that runs a controller on its own.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, HarnessError> {
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|e| HarnessError::Setup(format!("{}: {e}", path.display())))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| HarnessError::Setup(format!("{}: {e}", path.display())))?;
    kube::Client::try_from(config).map_err(|e| HarnessError::Setup(format!("client: {e}")))
}

fn write_kubeconfig(path: &Path, url: &str, ca: &Path, user: &CertFiles) -> Result<(), HarnessError> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\n\
         users:\n- name: user\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: user\n    namespace: default\ncurrent-context: test\n",
        ca = ca.display(),
        cert = user.cert.display(),
        key = user.key.display(),
    );
    std::fs::write(path, text).map_err(|e| HarnessError::io(path, e))
}
