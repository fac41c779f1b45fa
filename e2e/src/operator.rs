//! An operator in a test namespace, for any [`Operator`]: installed from the manifests
//! users install (CRDs, RBAC, a Deployment of two replicas electing a leader), its
//! `/metrics` read from each pod, and the pod holding its leader Lease killed.

use std::time::Duration;

use statecraft_shared::runner::{Operator, crd_yaml, manifests_yaml};

use crate::images::image;
use crate::{Cluster, E2eError, Result, wait_until};

/// Port of the operator's `/metrics` (and of nothing else on the pod's IP that the tests use).
pub const METRICS_PORT: u16 = 8080;

fn shared_err(e: statecraft_shared::Error) -> E2eError {
    E2eError::Other(e.to_string())
}

/// Installs the CRDs of `O` (cluster-scoped, shared by every run: applied server-side so
/// concurrent tests do not conflict) and its manifests (ServiceAccount, namespaced Role,
/// Deployment with two replicas) into `ns`, with the image `image_key` names in
/// `images.env`; waits until the CRDs are established and the Deployment has rolled out.
pub async fn install<O: Operator>(cluster: &Cluster, ns: &str, image_key: &str) -> Result<()> {
    let image = image(image_key).ok_or_else(|| E2eError::Other(format!("{image_key} missing from images.env")))?;
    install_image::<O>(cluster, ns, image).await
}

/// [`install`] with an explicit operator image (an older build, for upgrade tests).
pub async fn install_image<O: Operator>(cluster: &Cluster, ns: &str, image: &str) -> Result<()> {
    let crds = O::crds();
    cluster.kubectl_with_input(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&crd_yaml(&crds).map_err(shared_err)?),
    )?;
    for crd in &crds {
        let name = crd.metadata.name.as_deref().unwrap_or_default();
        cluster.kubectl(&["wait", "--for=condition=Established", &format!("crd/{name}"), "--timeout=30s"])?;
    }
    cluster.kubectl_with_input(
        &["apply", "-n", ns, "-f", "-"],
        Some(&manifests_yaml::<O>(ns, &[ns.to_string()], Some(image)).map_err(shared_err)?),
    )?;
    let deployment = format!("deployment/{}", O::NAME);
    // Settings to measure against the defaults (e.g. a shorter leader Lease in the fault
    // scenarios): `STATECRAFT_E2E_OPERATOR_ENV="NAME=VALUE NAME=VALUE"`, set on the
    // Deployment as a user would with `kubectl set env`.
    if let Ok(vars) = std::env::var("STATECRAFT_E2E_OPERATOR_ENV") {
        let mut args = vec!["set", "env", "-n", ns, deployment.as_str()];
        args.extend(vars.split_whitespace());
        cluster.kubectl(&args)?;
    }
    cluster.kubectl(&["rollout", "status", "-n", ns, &deployment, "--timeout=180s"])?;
    Ok(())
}

/// Replaces the image of `O`'s Deployment in `ns` with `image`, as a user upgrading the
/// operator does, and waits until only pods of that image are left: `rollout status`
/// returns once the new replicas are available, while the old ones may still be
/// terminating (and, until they are gone, may hold the Lease).
pub async fn upgrade_to<O: Operator>(cluster: &Cluster, ns: &str, image: &str) -> Result<()> {
    let deployment = format!("deployment/{}", O::NAME);
    cluster.kubectl(&["set", "image", "-n", ns, &deployment, &format!("operator={image}")])?;
    cluster.kubectl(&["rollout", "status", "-n", ns, &deployment, "--timeout=180s"])?;
    let selector = format!("app.kubernetes.io/name={}", O::NAME);
    let path = "jsonpath={.items[*].spec.containers[0].image}";
    wait_until(Duration::from_secs(120), "only the new build's operator pods left", || async {
        let images = cluster.kubectl(&["get", "pods", "-n", ns, "-l", &selector, "-o", path]).ok()?;
        (!images.is_empty() && images.split_whitespace().all(|i| i == image)).then_some(())
    })
    .await?;
    Ok(())
}

/// The pod holding the leader Lease of `operator` (its `Operator::NAME`) in `ns`.
pub fn leader_pod(cluster: &Cluster, ns: &str, operator: &str) -> Result<String> {
    let leader = cluster.kubectl(&["get", "lease", "-n", ns, operator, "-o", "jsonpath={.spec.holderIdentity}"])?;
    if leader.is_empty() {
        return Err(E2eError::Other(format!("no {operator} pod holds the Lease")));
    }
    Ok(leader)
}

/// Force-deletes the pod holding the leader Lease of `operator` in `ns` (no graceful
/// shutdown, so the Lease is not released: the standby takes it once it expires); returns
/// the pod's name.
pub fn kill_leader(cluster: &Cluster, ns: &str, operator: &str) -> Result<String> {
    let leader = leader_pod(cluster, ns, operator)?;
    cluster.kubectl(&["delete", "pod", "-n", ns, &leader, "--grace-period=0", "--force", "--wait=false"])?;
    Ok(leader)
}

/// The `/metrics` text of every pod of `operator` in `ns`, with the pod's IP, each waited
/// for up to 30 s.
pub async fn metrics(cluster: &Cluster, ns: &str, operator: &str) -> Result<Vec<(String, String)>> {
    let ips = cluster.kubectl(&[
        "get",
        "pods",
        "-n",
        ns,
        "-l",
        &format!("app.kubernetes.io/name={operator}"),
        "-o",
        "jsonpath={.items[*].status.podIP}",
    ])?;
    let mut out = Vec::new();
    for ip in ips.split_whitespace() {
        let text = wait_until(Duration::from_secs(30), &format!("the {operator} /metrics on {ip}"), || async {
            http_get(&format!("{ip}:{METRICS_PORT}"), "/metrics").await
        })
        .await?;
        out.push((ip.to_string(), text));
    }
    Ok(out)
}

/// A plain HTTP/1.0 GET (the e2e crate has no HTTP client): the body, or None.
pub async fn http_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// Who holds a leader Lease, as the API server has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `spec.holderIdentity` (the pod name); None while nobody holds it.
    pub holder: Option<String>,
    /// `spec.leaseTransitions`: how many times it changed hands.
    pub transitions: i32,
    /// `spec.leaseDurationSeconds`: how long it stays valid after a renewal.
    pub duration_seconds: Option<i32>,
    /// `spec.renewTime`: the holder's last renewal, in microseconds.
    pub renewed: Option<k8s_openapi::jiff::Timestamp>,
}

/// The leader Lease of `operator` in `ns`, read through the API (not kubectl: a test may
/// sample it every few hundred milliseconds from a task while its clients run).
pub async fn lease(cluster: &Cluster, ns: &str, operator: &str) -> Result<LeaseRecord> {
    let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> = kube::Api::namespaced(cluster.client.clone(), ns);
    let spec = api.get(operator).await?.spec.unwrap_or_default();
    Ok(LeaseRecord {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        transitions: spec.lease_transitions.unwrap_or(0),
        duration_seconds: spec.lease_duration_seconds,
        renewed: spec.renew_time.map(|t| t.0),
    })
}
