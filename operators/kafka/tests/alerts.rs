//! The monitoring files shipped with the Kafka operator agree with the operator:
//!
//! - `deploy/kafka/prometheus-rules.yaml`: every alert has a severity, a summary, a
//!   description and a runbook that exists under `docs/runbooks/kafka/`, and every runbook
//!   belongs to an alert; the alerts cover quorum, partition health, nodes and rolls;
//! - that file and `deploy/kafka/grafana-dashboard.json` use only metrics (and, in label
//!   matchers and `by`/`on` clauses, only labels and values) that the operator really
//!   registers; the dashboard shows every operator metric;
//! - `deploy/kafka/podmonitor.yaml` scrapes the port the operator's Deployment names.
//!
//! The checks are the shared ones ([`statecraft_shared::testing::monitoring`]); this file
//! names the files and feeds the real registries (the shared RED metrics and the clusters'
//! metrics) with statuses that give every vector its series. No network.

use std::path::{Path, PathBuf};

use statecraft_kafka::api::{KafkaClusterStatus, NodeRole, NodeStatus, QuorumReplica, QuorumStatus};
use statecraft_kafka::controller::metrics::{KafkaMetrics, phases};
use statecraft_shared::metrics::Metrics;
use statecraft_shared::testing::monitoring::{Catalogue, Dashboard, Rules};

const OPERATOR: &str = "the operator";
const RULES: Rules = Rules {
    path: "deploy/kafka/prometheus-rules.yaml",
    name: "statecraft-kafka",
    alert_prefix: "Kafka",
    runbooks: "docs/runbooks/kafka",
    // The topics the alerts must cover, by the metric each needs.
    required_metrics: &[
        "statecraft_kafka_quorum_has_leader",
        "statecraft_kafka_quorum_caught_up_voters",
        "statecraft_kafka_quorum_voter_caught_up",
        "statecraft_kafka_quorum_leader_epoch",
        "statecraft_kafka_partitions",
        "statecraft_kafka_node_ready",
        "statecraft_kafka_broker_fenced",
        "statecraft_kafka_nodes_to_roll",
        "statecraft_kafka_cluster_phase",
        "statecraft_kafka_leader",
        "statecraft_kafka_task_restarts_total",
        "statecraft_kafka_reconcile_errors_total",
    ],
};
const DASHBOARD: Dashboard = Dashboard {
    path: "deploy/kafka/grafana-dashboard.json",
    cluster_metric: "statecraft_kafka_cluster_phase",
    shows_every_metric_of: Some(OPERATOR),
};
/// Labels whose values form a closed set the test fully exercises, so that a matcher on
/// them must name values that exist (`state="offlne"` would match nothing, forever).
const CLOSED_LABELS: [&str; 5] = ["phase", "state", "role", "voter", "result"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn node(id: i32, role: NodeRole, ready: bool, broker_state: Option<&str>) -> NodeStatus {
    NodeStatus {
        id,
        pod: format!("k-{id}"),
        role,
        ready,
        revision: None,
        broker_state: broker_state.map(str::to_owned),
        directory_id: None,
    }
}

fn replica(id: i32, lag: i64, caught_up: bool) -> QuorumReplica {
    QuorumReplica { id, log_end_offset: Some(500 - lag), lag: Some(lag), caught_up }
}

/// Builds the real registries and feeds them: a cluster of separate controllers and
/// brokers (one fenced, one controller lagging) whose active controller moves, one of
/// combined nodes, every phase; a good and a failed reconcile; leadership; a task restart.
fn registered() -> Catalogue {
    let metrics = Metrics::new("statecraft-kafka").expect("shared metrics");
    let kafka = KafkaMetrics::register(&metrics.registry).expect("kafka metrics");
    let separate = |leader: i32, epoch: i32| KafkaClusterStatus {
        phase: Some("Degraded".into()),
        quorum: Some(QuorumStatus {
            leader_id: Some(leader),
            leader_epoch: Some(epoch),
            voters: vec![replica(0, 0, true), replica(1, 0, true), replica(2, 2000, false)],
            observers: vec![replica(100, 0, false), replica(101, 12, false)],
            ..Default::default()
        }),
        nodes: vec![
            node(0, NodeRole::Controller, true, None),
            node(1, NodeRole::Controller, true, None),
            node(2, NodeRole::Controller, false, None),
            node(100, NodeRole::Broker, true, Some("RUNNING")),
            node(101, NodeRole::Broker, false, Some("FENCED")),
        ],
        under_replicated_partitions: Some(6),
        under_min_isr_partitions: Some(2),
        offline_partitions: Some(1),
        ..Default::default()
    };
    kafka.observe("events", &separate(0, 4), true, 1);
    kafka.observe("events", &separate(1, 5), true, 1);
    let combined = KafkaClusterStatus {
        phase: Some("Healthy".into()),
        quorum: Some(QuorumStatus { leader_id: Some(0), voters: vec![replica(0, 0, true)], ..Default::default() }),
        nodes: vec![node(0, NodeRole::Combined, true, Some("RUNNING"))],
        under_replicated_partitions: Some(0),
        under_min_isr_partitions: Some(0),
        offline_partitions: Some(0),
        ..Default::default()
    };
    kafka.observe("small", &combined, true, 0);
    // No controller answered as the leader this pass.
    kafka.observe("lost", &KafkaClusterStatus { phase: Some("NoActiveController".into()), ..combined }, false, 0);
    metrics.observe_reconcile("kafkacluster", 0.05, None);
    metrics.observe_reconcile("kafkacluster", 0.5, Some("KubernetesApiError"));
    metrics.set_leader(true);
    metrics.watch_task("events");
    metrics.task_restarted("events");

    let mut catalogue = Catalogue::new(&CLOSED_LABELS);
    catalogue.add_registry(OPERATOR, &metrics.registry);
    catalogue
}

#[test]
fn every_alert_is_labelled_annotated_has_a_runbook_and_uses_registered_metrics() {
    let problems = registered().check_rules(&root(), &RULES);
    assert!(problems.is_empty(), "{}:\n  {}", RULES.path, problems.join("\n  "));
}

#[test]
fn every_dashboard_panel_has_a_title_and_uses_registered_metrics() {
    let problems = registered().check_dashboard(&root(), &DASHBOARD);
    assert!(problems.is_empty(), "{}:\n  {}", DASHBOARD.path, problems.join("\n  "));
}

/// Every phase the status can take has its series, so `phase="..."` in the rules and the
/// dashboard is checked against the phases the task really reports.
#[test]
fn every_reported_phase_is_a_series() {
    let registered = registered();
    for phase in phases() {
        let expr = format!(r#"statecraft_kafka_cluster_phase{{phase="{phase}"}} == 1"#);
        assert_eq!(registered.check_expr("q", &expr), Vec::<String>::new(), "{expr}");
    }
}

/// The checks themselves catch what they are for, so a green run means something.
#[test]
fn the_checks_reject_unknown_metrics_labels_and_values() {
    let registered = registered();
    for (expr, needle) in [
        ("statecraft_kafka_node_readyy == 0", "statecraft_kafka_node_readyy is not registered"),
        (r#"statecraft_kafka_partitions{state="offlne"}"#, "state=\"offlne\""),
        (r#"statecraft_kafka_node_ready{role="voter"}"#, "role=\"voter\""),
        (r#"statecraft_kafka_broker_fenced{member="1"}"#, "has no label \"member\""),
        ("max by (broker) (statecraft_kafka_broker_fenced)", "label \"broker\""),
    ] {
        let problems = registered.check_expr("q", expr);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{expr}: expected a problem with {needle:?}, got {problems:?}"
        );
    }
}

/// The PodMonitor selects the operator's pods by the label its Deployment gives them and
/// scrapes the port the Deployment names `metrics`.
#[test]
fn the_pod_monitor_scrapes_the_operators_metrics_port() {
    let read = |rel: &str| std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
    let monitor: serde_json::Value =
        serde_norway::from_str(&read("deploy/kafka/podmonitor.yaml")).expect("podmonitor.yaml is YAML");
    let selector = &monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"];
    assert_eq!(selector, "statecraft-kafka");
    let endpoints = monitor["spec"]["podMetricsEndpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.iter().map(|e| &e["port"]).collect::<Vec<_>>(), ["metrics"]);

    let deployment = read("deploy/kafka/operator.yaml")
        .split("\n---")
        .map(|doc| serde_norway::from_str::<serde_json::Value>(doc).expect("operator.yaml is YAML"))
        .find(|doc| doc["kind"] == "Deployment")
        .expect("a Deployment in operator.yaml");
    let pod = &deployment["spec"]["template"];
    assert_eq!(pod["metadata"]["labels"]["app.kubernetes.io/name"], "statecraft-kafka");
    let ports: Vec<&serde_json::Value> = pod["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .map(|p| &p["name"])
        .collect();
    assert!(ports.iter().any(|p| *p == "metrics"), "ports: {ports:?}");
}
