//! The cluster's NetworkPolicy on a real cluster that enforces it (the local cluster's
//! kube-network-policies): the servers replicate and the operator runs them under it; a pod
//! the policy names as a client reaches the SQL port, directly and through the Service, and
//! a pod it does not name is refused; only the named scraper reaches the exporter's port;
//! removing `spec.networkPolicy` removes the policy.

use std::time::Duration;

use serde_json::json;
use statecraft_e2e::wait_until;

use super::{Db, TestResult};

/// A tools pod labelled `role`, sleeping.
pub(super) fn tools_pod(name: &str, role: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"role": role}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": statecraft_e2e::images::image("TOOLS_IMAGE").unwrap_or_default(),
                "imagePullPolicy": "IfNotPresent", "command": ["sleep", "infinity"]}]
        }
    })
}

/// Whether pod `from` gets the server's greeting (its version) from `host`:3306 within 2 s,
/// tried three times.
fn greets(db: &Db, from: &str, host: &str) -> bool {
    let script = format!(
        "for t in 1 2 3; do nc -w 2 {host} 3306 </dev/null | tr -dc '[:print:]' | grep -q MariaDB && exit 0; sleep 0.3; done; exit 1"
    );
    db.kubectl(&["exec", from, "--", "sh", "-c", &script]).is_ok()
}

/// Whether pod `from` reads the exporter's metrics from `host`:9104 within 2 s.
fn scrapes(db: &Db, from: &str, host: &str) -> bool {
    let script = format!("curl -sf -m 2 http://{host}:9104/metrics | grep -q '^mysql_up 1'");
    db.kubectl(&["exec", from, "--", "sh", "-c", &script]).is_ok()
}

/// Criteria: none yet (NetworkPolicies are not a criterion of the capability model).
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_network_policy_lets_in_only_the_named_clients_and_scrapers() -> TestResult {
    let access = json!({
        "clients": [{"podSelector": {"matchLabels": {"role": "app"}}}],
        "metrics": [{"podSelector": {"matchLabels": {"role": "scraper"}}}],
    });
    // Ready under the policy: the servers replicate among themselves and the operator
    // reaches every one of them.
    let db =
        Db::create("mysql-netpol", "db", 3, json!({"networkPolicy": access, "exporter": {"enabled": true}})).await?;
    for (pod, role) in [("app", "app"), ("stranger", "other"), ("scraper", "scraper")] {
        super::accounts::apply(&db, tools_pod(pod, role))?;
    }
    db.kubectl(&["wait", "--for=condition=Ready", "pod/app", "pod/stranger", "pod/scraper", "--timeout=120s"])?;
    let status = db.ready().await?.status.unwrap_or_default();
    assert!(status.members.iter().all(|m| m.ready), "every server serves under the policy: {:?}", status.members);

    let primary = format!("db-primary.{}.svc", db.ns.name);
    let ip = |pod: &str| db.kubectl(&["get", "pod", pod, "-o", "jsonpath={.status.podIP}"]);
    let replica = ip("db-1")?;
    assert!(greets(&db, "app", &primary), "the named client reaches the primary through the Service");
    assert!(greets(&db, "app", &replica), "and a server directly");
    assert!(!greets(&db, "stranger", &primary), "a pod the policy does not name is refused");
    assert!(!greets(&db, "stranger", &replica), "directly too");
    assert!(!greets(&db, "scraper", &replica), "the scraper is no client");
    assert!(scrapes(&db, "scraper", &replica), "the named scraper reads the exporter");
    assert!(!scrapes(&db, "app", &replica), "a client does not");

    // Without spec.networkPolicy the policy goes, and every pod may connect again.
    let remove = json!([{"op": "remove", "path": "/spec/networkPolicy"}]).to_string();
    db.kubectl(&["patch", "mysqlcluster", "db", "--type=json", "-p", &remove])?;
    wait_until(Duration::from_secs(60), "the NetworkPolicy removed", || async {
        db.kubectl(&["get", "networkpolicy", "db"]).is_err().then_some(())
    })
    .await?;
    wait_until(Duration::from_secs(30), "the stranger let in", || async {
        greets(&db, "stranger", &primary).then_some(())
    })
    .await?;
    db.ns.pass();
    Ok(())
}
