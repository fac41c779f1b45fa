//! The monitoring files shipped with the Kafka operator agree with the operator:
//!
//! - `deploy/kafka/prometheus-rules.yaml`: every alert has a severity, a summary, a
//!   description and a runbook that exists under `docs/runbooks/kafka/`, and every runbook
//!   belongs to an alert; the alerts cover quorum, partition health, nodes and rolls;
//! - that file and `deploy/kafka/grafana-dashboard.json` use only metrics (and, in label
//!   matchers and `by`/`on` clauses, only labels and values) that the operator really
//!   registers; the dashboard shows every operator metric;
//! - the rules and the dashboard use only `kafka_*` and `jvm_*` metrics that a real Kafka
//!   node exports through the JMX exporter with the image's `jmx-exporter.yaml` (a
//!   combined node from the Maven jars, the agent as the image loads it);
//! - Prometheus's own `promtool test rules` fires each alert as
//!   `operators/kafka/tests/alerts.test.yaml` expects;
//! - `deploy/kafka/podmonitor.yaml` scrapes the port the operator's Deployment names, and
//!   the nodes' `metrics` port with the labels the rules assume.
//!
//! The checks are the shared ones ([`statecraft_shared::testing::monitoring`]); this file
//! names the files and feeds the real registries (the shared RED metrics and the clusters'
//! metrics) with statuses that give every vector its series.

#[allow(dead_code, reason = "the harness is shared with tests/admin.rs and tests/topics.rs; this file needs its jars")]
mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use statecraft_kafka::api::{KafkaClusterStatus, NodeRole, NodeStatus, QuorumReplica, QuorumStatus};
use statecraft_kafka::build::statefulset::{METRICS_PORT_ENV, METRICS_PORT_NAME};
use statecraft_kafka::build::{CLUSTER_LABEL, ROLE_LABEL};
use statecraft_kafka::controller::metrics::{KafkaMetrics, phases};
use statecraft_shared::exposition::{Series, parse};
use statecraft_shared::metrics::Metrics;
use statecraft_shared::testing::monitoring::{Catalogue, Dashboard, Rules};
use statecraft_shared::testing::promtool;
use statecraft_shared::testing::{free_port, log_tail};

const OPERATOR: &str = "the operator";
const KAFKA: &str = "Kafka";
/// Labels the nodes' PodMonitor adds to Kafka's own series (checked against the file).
const NODE_LABELS: [&str; 2] = ["cluster", "role"];
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
        "kafka_network_requestmetrics_totaltimems",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
        "jvm_memory_pool_collection_used_bytes",
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
    let namespace = metrics.namespace("shop").expect("namespace metrics");
    let kafka = KafkaMetrics::register(&namespace.registry).expect("kafka metrics");
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
    namespace.watch_task("events");
    namespace.task_restarted("events");

    let mut catalogue = Catalogue::new(&CLOSED_LABELS);
    catalogue.add_metrics(OPERATOR, &metrics);
    catalogue.scrape_adds(KAFKA, &NODE_LABELS);
    for s in kafka_series() {
        catalogue.add_series(KAFKA, &s.name, s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    catalogue
}

// ---------------------------------------------------------------------------------------
// A real Kafka node with the JMX exporter.

/// What the image's `kafka-server-start` adds for `KAFKA_METRICS_PORT`: the exporter's
/// javaagent on that port with the image's rules.
fn agent_option(port: u16) -> String {
    let agent = support::kafka_libs().join("../agent/jmx_prometheus_javaagent.jar");
    assert!(agent.exists(), "no {}: run scripts/install-kafka-jars.sh (part of `make deps`) first", agent.display());
    let rules = root().join("deploy/images/kafka/jmx-exporter.yaml");
    format!("-javaagent:{}={port}:{}", agent.display(), rules.display())
}

/// Every series a combined Kafka node (broker and controller, one JVM) exports through the
/// JMX exporter once it leads its quorum and has produced to a topic, read once for all
/// tests. The process is killed when read.
fn kafka_series() -> &'static [Series] {
    static SERIES: OnceLock<Vec<Series>> = OnceLock::new();
    SERIES.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("statecraft-kafka-jmx-").tempdir().expect("temporary directory");
        let port = || free_port().expect("a free port");
        let (broker, controller, metrics) = (port(), port(), port());
        let properties = dir.path().join("server.properties");
        std::fs::write(
            &properties,
            format!(
                "process.roles=broker,controller\nnode.id=0\n\
                 controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{broker}\n\
                 controller.listener.names=CONTROLLER\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
                 log.dirs={}\noffsets.topic.replication.factor=1\n\
                 num.network.threads=2\nnum.io.threads=2\nbackground.threads=2\nlog.cleaner.threads=1\n",
                dir.path().join("data").display()
            ),
        )
        .expect("writing server.properties");
        let classpath = format!("{}/*", support::kafka_libs().display());
        let java = |args: &[&str], log: &Path| {
            let out = std::fs::File::create(log).expect("log file");
            std::process::Command::new("java")
                .args(["-Xmx384m", "-cp", &classpath])
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(out.try_clone().expect("log file"))
                .stderr(out)
                .spawn()
                .expect("starting java")
        };
        let config = properties.display().to_string();
        let format = java(
            &["kafka.tools.StorageTool", "format", "--standalone", "-t", "AAAAAAAAAAAAAAAAAAAAAA", "-c", &config],
            &dir.path().join("format.log"),
        )
        .wait_with_output()
        .expect("formatting");
        assert!(format.status.success(), "format: {}", log_tail(&dir.path().join("format.log"), 20));
        let log = dir.path().join("node.log");
        let mut node = java(&[&agent_option(metrics), "kafka.Kafka", &config], &log);
        let url = format!("127.0.0.1:{metrics}");
        let deadline = Instant::now() + Duration::from_secs(120);
        let series = loop {
            let leads = |series: &[Series]| {
                series
                    .iter()
                    .any(|s| s.name == "kafka_controller_kafkacontroller_activecontrollercount" && s.value == 1.0)
                    && series.iter().any(|s| s.name == "kafka_server_replicamanager_underminisrpartitioncount")
            };
            if let Some(series) = get(&url, "/metrics").and_then(|text| parse(&text).ok())
                && leads(&series)
            {
                break series;
            }
            if Instant::now() > deadline || node.try_wait().ok().flatten().is_some() {
                let _ = node.kill();
                panic!("Kafka with the JMX exporter did not export its metrics on {url}:\n{}", log_tail(&log, 30));
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        let _ = node.kill();
        let _ = node.wait();
        series
    })
}

/// A plain HTTP/1.0 GET on loopback: the body, or None.
fn get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_owned())
}

#[test]
fn every_alert_is_labelled_annotated_has_a_runbook_and_uses_registered_metrics() {
    let problems = registered().check_rules(&root(), &RULES);
    assert!(problems.is_empty(), "{}:\n  {}", RULES.path, problems.join("\n  "));
}

/// Prometheus's own rule engine fires each alert when it should, with the labels it routes
/// on (`promtool test rules` on `operators/kafka/tests/alerts.test.yaml`).
#[test]
fn every_alert_fires_under_promtool_as_its_unit_tests_expect() {
    let tests = "operators/kafka/tests/alerts.test.yaml";
    let problems = promtool::test_rules(&root(), RULES.path, tests);
    assert!(problems.is_empty(), "{tests}:\n  {}", problems.join("\n  "));
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

/// The operator's PodMonitor selects its pods by the label its Deployment gives them and
/// scrapes the port the Deployment names `metrics`; the nodes' PodMonitor selects every
/// node pod by the cluster label, scrapes the port the StatefulSets name `metrics` and adds
/// the labels the rules group Kafka's series by, from the pods' labels.
#[test]
fn the_pod_monitors_scrape_the_operator_and_the_nodes() {
    let read = |rel: &str| std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
    let docs = |rel: &str| -> Vec<serde_json::Value> {
        read(rel)
            .split("\n---")
            .map(|doc| serde_norway::from_str::<serde_json::Value>(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
            .filter(|doc| !doc.is_null())
            .collect()
    };
    let monitors = docs("deploy/kafka/podmonitor.yaml");
    assert_eq!(monitors.len(), 2, "{monitors:?}");
    let operator = &monitors[0]["spec"];
    assert_eq!(operator["selector"]["matchLabels"]["app.kubernetes.io/name"], "statecraft-kafka");
    let endpoints = operator["podMetricsEndpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.iter().map(|e| &e["port"]).collect::<Vec<_>>(), ["metrics"]);

    let deployment = docs("deploy/kafka/operator.yaml")
        .into_iter()
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

    let nodes = &monitors[1]["spec"];
    let selected = &nodes["selector"]["matchExpressions"][0];
    assert_eq!((&selected["key"], &selected["operator"]), (&CLUSTER_LABEL.into(), &"Exists".into()), "{nodes}");
    let endpoint = &nodes["podMetricsEndpoints"][0];
    assert_eq!(endpoint["port"], METRICS_PORT_NAME);
    let meta = |label: &str| format!("__meta_kubernetes_pod_label_{}", label.replace(['.', '/', '-'], "_"));
    let relabelled: Vec<(String, String)> = endpoint["relabelings"]
        .as_array()
        .expect("relabelings")
        .iter()
        .map(|r| {
            (r["sourceLabels"][0].as_str().unwrap_or("").to_owned(), r["targetLabel"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    for (label, target) in [(CLUSTER_LABEL, NODE_LABELS[0]), (ROLE_LABEL, NODE_LABELS[1])] {
        assert!(relabelled.contains(&(meta(label), target.to_owned())), "{label} -> {target}: {relabelled:?}");
    }
    // The StatefulSets name the port and set the variable the image's start script reads.
    assert_eq!(METRICS_PORT_ENV, "KAFKA_METRICS_PORT");
    let start = read("deploy/images/kafka/kafka-server-start");
    assert!(start.contains("KAFKA_METRICS_PORT") && start.contains("jmx-exporter.yaml"), "{start}");
}
