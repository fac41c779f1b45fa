//! Which cluster the e2e tests run on, chosen by `STATECRAFT_E2E_PROVIDER`:
//!
//! - `local` (default): the single-node cluster of `make cluster-up`, reached through its
//!   admin kubeconfig (`$STATECRAFT_CLUSTER_DIR/admin.kubeconfig`, by default
//!   `/var/lib/statecraft/cluster/admin.kubeconfig`) with the `kubectl` built beside it.
//! - `kind`: a kind cluster named `statecraft` made by `e2e/kind/up.sh` (which builds the
//!   images with docker and loads them), reached through `kind get kubeconfig`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{E2eError, Result};

/// The kind of cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// The cluster `make cluster-up` brings up on this machine.
    Local,
    /// A kind cluster named `statecraft`.
    Kind,
}

/// A cluster the tests can use.
#[derive(Clone)]
pub struct Cluster {
    /// Which provider made it.
    pub provider: Provider,
    /// Admin client.
    pub client: kube::Client,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
}

impl Cluster {
    /// Connects to the cluster `STATECRAFT_E2E_PROVIDER` names, or says how to make one.
    pub async fn connect() -> Result<Self> {
        let provider = match std::env::var("STATECRAFT_E2E_PROVIDER").as_deref() {
            Ok("local") | Err(_) => Provider::Local,
            Ok("kind") => Provider::Kind,
            Ok(other) => {
                return Err(E2eError::NoCluster(format!("STATECRAFT_E2E_PROVIDER={other}: use local or kind")));
            }
        };
        let (kubeconfig, kubectl) = match provider {
            Provider::Local => {
                let dir = std::env::var_os("STATECRAFT_CLUSTER_DIR")
                    .map_or_else(|| PathBuf::from("/var/lib/statecraft/cluster"), PathBuf::from);
                let kubeconfig = dir.join("admin.kubeconfig");
                if !kubeconfig.exists() {
                    return Err(E2eError::NoCluster(format!(
                        "{} not found: run `make cluster-up` first",
                        kubeconfig.display()
                    )));
                }
                (kubeconfig, statecraft_shared::testing::bin_dir().join("kubectl"))
            }
            Provider::Kind => {
                let out = Command::new("kind")
                    .args(["get", "kubeconfig", "--name", "statecraft"])
                    .output()
                    .map_err(|e| E2eError::NoCluster(format!("kind: {e}: install kind and run e2e/kind/up.sh")))?;
                if !out.status.success() {
                    return Err(E2eError::NoCluster(format!(
                        "kind get kubeconfig: {}",
                        String::from_utf8_lossy(&out.stderr)
                    )));
                }
                let path = std::env::temp_dir().join("statecraft-kind.kubeconfig");
                std::fs::write(&path, &out.stdout).map_err(|e| E2eError::Other(format!("{}: {e}", path.display())))?;
                (path, PathBuf::from("kubectl"))
            }
        };
        let config = Kubeconfig::read_from(&kubeconfig)
            .map_err(|e| E2eError::NoCluster(format!("{}: {e}", kubeconfig.display())))?;
        let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
            .await
            .map_err(|e| E2eError::NoCluster(format!("{}: {e}", kubeconfig.display())))?;
        let client = kube::Client::try_from(config)?;
        Ok(Cluster { provider, client, kubeconfig, kubectl })
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The address pods reach this machine at (where a test's S3 server listens): the local
    /// cluster's node address, kind's docker network gateway, or `STATECRAFT_E2E_S3_HOST`.
    pub fn host_address(&self) -> String {
        std::env::var("STATECRAFT_E2E_S3_HOST").unwrap_or_else(|_| match self.provider {
            Provider::Local => "10.199.0.1".into(),
            Provider::Kind => "172.18.0.1".into(),
        })
    }

    /// The name of one of the cluster's nodes (the local cluster has one), for tests that
    /// keep pods on a node with a node selector.
    pub async fn a_node(&self) -> Result<String> {
        let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(self.client.clone());
        let list = nodes.list(&Default::default()).await?;
        list.items
            .first()
            .and_then(|n| n.metadata.name.clone())
            .ok_or_else(|| E2eError::Other("the cluster has no node".into()))
    }

    /// Runs `kubectl` with `args` against this cluster and returns its standard output.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        self.kubectl_with_input(args, None)
    }

    /// Like [`Cluster::kubectl`], feeding `input` on standard input (`apply -f -`).
    pub fn kubectl_with_input(&self, args: &[&str], input: Option<&str>) -> Result<String> {
        let command = format!("kubectl {}", args.join(" "));
        let mut child = Command::new(&self.kubectl)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| E2eError::Command { command: command.clone(), message: e.to_string() })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            std::io::Write::write_all(&mut stdin, text.as_bytes())
                .map_err(|e| E2eError::Command { command: command.clone(), message: e.to_string() })?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| E2eError::Command { command: command.clone(), message: e.to_string() })?;
        if !out.status.success() {
            return Err(E2eError::Command {
                command,
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
