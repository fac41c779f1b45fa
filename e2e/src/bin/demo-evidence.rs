//! `statecraft-demo-evidence <mysql|etcd|kafka> <namespace> <cluster> <event reason>...`: what
//! `make demo` just did to a cluster, judged and recorded as capability evidence like an e2e
//! test's (`results/evidence/<operator>.jsonl`), so that a fresh clone's report confirms
//! what the demo showed instead of saying "no level confirmed".
//!
//! The demo's steps prove two criteria, and only those are claimed: **L1.install** (the
//! custom resource created from the installed manifests is Ready, with every member in its
//! status ready) and **L4.events** (the operations the demo asked for, a switchover, a
//! scale-out or a configuration change, left their Events on the resource). A failed check records a failed run,
//! which the report shows against the current code.

use std::process::ExitCode;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
use statecraft_e2e::{Cluster, E2eError, Result, events};

const CRITERIA: &[&str] = &["L1.install", "L4.events"];

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [operator, namespace, name, reasons @ ..] = args.as_slice() else {
        eprintln!("usage: statecraft-demo-evidence <mysql|etcd|kafka> <namespace> <cluster> <event reason>...");
        return ExitCode::from(2);
    };
    match run(operator, namespace, name, reasons).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo evidence of {operator}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Judges cluster `name` and records the verdict; whether it passed.
async fn run(operator: &str, ns: &str, name: &str, reasons: &[String]) -> Result<bool> {
    let kind = match operator {
        "mysql" => ("mysql.statecraft.io", "MySQLCluster"),
        "etcd" => ("etcd.statecraft.io", "EtcdCluster"),
        "kafka" => ("kafka.statecraft.io", "KafkaCluster"),
        other => return Err(E2eError::Other(format!("{other}: not an operator the demo installs"))),
    };
    let cluster = Cluster::connect().await?;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(kind.0, "v1alpha1", kind.1));
    let object = Api::<DynamicObject>::namespaced_with(cluster.client.clone(), ns, &resource).get(name).await?;
    let status = object.data.get("status").cloned().unwrap_or(Value::Null);
    let seen = events::about(&cluster, ns, name).await?;
    let mut problems = install_problems(&status);
    for reason in reasons {
        if !seen.iter().any(|e| &e.reason == reason) {
            problems.push(format!("no {reason} Event on {} {name}", kind.1));
        }
    }
    let passed = problems.is_empty();
    let figures = json!({
        "cluster": name,
        "members": members(&status).len(),
        "events": reasons,
        "problems": problems,
    });
    let test = format!("make demo ({operator})");
    statecraft_e2e::evidence::record(&cluster, operator, &test, CRITERIA, passed, figures).await?;
    for p in &problems {
        eprintln!("demo evidence of {operator}: {p}");
    }
    Ok(passed)
}

/// The members in `status`: `members` (MySQL, etcd) or `nodes` (Kafka).
fn members(status: &Value) -> Vec<Value> {
    ["members", "nodes"].iter().find_map(|k| status.get(*k).and_then(Value::as_array).cloned()).unwrap_or_default()
}

/// What keeps a cluster's status from showing a finished install: Ready not True, no
/// members, or a member not ready (`ready` in MySQL's and Kafka's status, `healthy` in etcd's).
fn install_problems(status: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let conditions = status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let ready = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
    if ready.and_then(|c| c.get("status")).and_then(Value::as_str) != Some("True") {
        problems.push(format!("Ready is not True: {}", ready.map_or("no Ready condition".into(), Value::to_string)));
    }
    let members = members(status);
    if members.is_empty() {
        problems.push("no member in status.members (status.nodes)".into());
    }
    for m in &members {
        let serves = ["ready", "healthy"].iter().any(|k| m.get(*k).and_then(Value::as_bool) == Some(true));
        if !serves {
            problems.push(format!("member not ready: {m}"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_cluster_whose_members_all_serve_has_no_install_problem() {
        let status = json!({
            "conditions": [{"type": "Ready", "status": "True"}],
            "members": [{"name": "kv-0", "healthy": true}, {"name": "kv-1", "healthy": true}],
        });
        assert!(install_problems(&status).is_empty());
        let mysql = json!({"conditions": [{"type": "Ready", "status": "True"}], "members": [{"ready": true}]});
        assert!(install_problems(&mysql).is_empty());
        let kafka = json!({"conditions": [{"type": "Ready", "status": "True"}], "nodes": [{"id": 0, "ready": true}]});
        assert!(install_problems(&kafka).is_empty());
        let kafka_down =
            json!({"conditions": [{"type": "Ready", "status": "True"}], "nodes": [{"id": 0, "ready": false}]});
        assert_eq!(install_problems(&kafka_down).len(), 1);
    }

    #[test]
    fn not_ready_no_members_or_a_member_down_are_each_a_problem() {
        let status = json!({"conditions": [{"type": "Ready", "status": "False"}], "members": []});
        assert_eq!(install_problems(&status).len(), 2, "{:?}", install_problems(&status));
        let down = json!({
            "conditions": [{"type": "Ready", "status": "True"}],
            "members": [{"name": "db-0", "ready": true}, {"name": "db-1", "ready": false}],
        });
        let problems = install_problems(&down);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("db-1"), "{problems:?}");
        assert!(!install_problems(&Value::Null).is_empty(), "no status at all");
    }
}
