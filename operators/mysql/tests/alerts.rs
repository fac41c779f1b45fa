//! The monitoring files shipped with the operator agree with the operator:
//!
//! - `deploy/mysql/prometheus-rules.yaml`: every alert has a severity, a summary, a
//!   description and a runbook that exists under `docs/runbooks/mysql/`;
//! - that file and `deploy/mysql/grafana-dashboard.json` use only metrics (and, in label
//!   matchers and `by`/`on` clauses, only labels) that the operator really registers;
//! - Prometheus's own `promtool test rules` fires each alert as
//!   `operators/mysql/tests/alerts.test.yaml` expects.
//!
//! The checks are the shared ones ([`statecraft_shared::testing::monitoring`]); this file
//! names the files and feeds the real registries (the shared RED metrics and the servers'
//! metrics) with one observation so that every vector has series, and adds what the real
//! mysqld_exporter (the `spec.exporter` sidecar) serves for a real MariaDB primary and
//! replica, with the labels the servers' PodMonitor adds.

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use statecraft_mysql::api::Flavor;
use statecraft_mysql::build::{APP_NAME, INSTANCE_LABEL, NAME_LABEL, Names, exporter};
use statecraft_mysql::clustering::dataplane::{DataPlane, Endpoint};
use statecraft_mysql::clustering::decide::{Operation, Role, decide};
use statecraft_mysql::clustering::gtid::GtidSet;
use statecraft_mysql::clustering::observed::{Member, Observed, PodState, Replication, Server, ServerState};
use statecraft_mysql::controller::metrics::ServerMetrics;
use statecraft_mysql::insight::{Abnormality, Kind};
use statecraft_shared::exposition::Series;
use statecraft_shared::metrics::Metrics;
use statecraft_shared::testing::monitoring::{self, Catalogue, Dashboard, Rules};
use statecraft_shared::testing::promtool;

const OPERATOR: &str = "the operator";
const SERVERS: &str = "the servers' mysqld_exporter";
/// Labels the servers' PodMonitor adds to the exporter's series (checked against the file).
const SERVER_LABELS: [&str; 2] = ["cluster", "member"];
const MONITORS: &str = "deploy/mysql/podmonitor.yaml";
const RULES: Rules = Rules {
    path: "deploy/mysql/prometheus-rules.yaml",
    name: "statecraft-mysql",
    alert_prefix: "MySQL",
    runbooks: "docs/runbooks/mysql",
    required_metrics: &[],
};
const DASHBOARD: Dashboard = Dashboard {
    path: "deploy/mysql/grafana-dashboard.json",
    cluster_metric: "statecraft_mysql_cluster_phase",
    shows_every_metric_of: None,
};
/// Labels whose values form a closed set the test fully exercises, so a matcher on them must
/// name values that exist (a typo such as `phase="Healty"` matches nothing forever).
const CLOSED_LABELS: [&str; 3] = ["phase", "operation", "result"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What the real mysqld_exporter serves, with the sidecar's arguments, for a real MariaDB
/// primary and a replica of it (the replica adds the replication series). Scraped once per
/// test binary.
fn exporter_series() -> &'static [Series] {
    static SERIES: OnceLock<Vec<Series>> = OnceLock::new();
    SERIES.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let primary = support::start_server(0).await;
            let replica = support::start_server(1).await;
            let p = support::passwords();
            let dp =
                DataPlane::new(statecraft_mysql::flavor::sql(Flavor::Mariadb), p.operator.into(), p.replication.into());
            let at = |port| Endpoint { host: "127.0.0.1".into(), port };
            dp.make_writable(&at(primary.port), false, 0).await.expect("primary writable");
            dp.configure_replica(&at(replica.port), ("127.0.0.1", primary.port)).await.expect("replica configured");
            let mut series = support::exporter::Exporter::start(&primary).await.scrape().await;
            series.extend(support::exporter::Exporter::start(&replica).await.scrape().await);
            series
        })
    })
}

fn server(executed: &str, read_only: bool, semi_sync_source: bool, replication: Option<Replication>) -> ServerState {
    ServerState::Up(Server {
        read_only,
        executed: GtidSet::parse(Flavor::Mariadb, executed).expect("valid GTID position"),
        semi_sync_source,
        semi_sync_active: semi_sync_source,
        uptime_seconds: Some(3600),
        connection_id: Some(42),
        replication,
        connection_errors: Some(0),
        client_connections: Some(2),
    })
}

fn member(ordinal: u32, role: Option<&str>, server: ServerState) -> Member {
    Member {
        ordinal,
        pod: PodState::Running { ready: true },
        role_label: role.map(str::to_string),
        reads_label: role == Some("replica"),
        address: (format!("db-{ordinal}"), 3306),
        server,
        unreachable_passes: 0,
    }
}

/// Builds the real registries and feeds them: a three-server cluster with a primary, a
/// lagging replica and an errant one; every clustering operation, succeeded and failed; a
/// good and a failed reconcile; leadership.
fn registered() -> Catalogue {
    let metrics = Metrics::new("statecraft-mysql").expect("shared metrics");
    let namespace = metrics.namespace("shop").expect("namespace metrics");
    let servers = ServerMetrics::register(&namespace.registry).expect("server metrics");

    let replication = Replication {
        source_host: "db-0".into(),
        source_port: 3306,
        io_running: true,
        sql_running: true,
        retrieved: GtidSet::parse(Flavor::Mariadb, "0-100-42").expect("valid GTID position"),
        lag_seconds: Some(3),
        ..Default::default()
    };
    let o = Observed {
        replicas: 3,
        semi_sync: true,
        ack_count: 1,
        recorded_primary: Some(0),
        members: vec![
            member(0, Some("primary"), server("0-100-42", false, true, None)),
            member(1, Some("replica"), server("0-100-40", true, false, Some(replication))),
            // Sequence 43 of domain 0, written by server 102: the primary lacks it.
            member(2, None, server("0-102-43", true, false, None)),
        ],
        ..Default::default()
    };
    let d = decide(&o);
    assert_eq!(d.verdicts[0].role, Some(Role::Primary), "test data: member 0 should be the primary: {d:?}");
    assert!(d.verdicts[2].errant.is_some(), "test data: member 2 should be errant: {d:?}");
    servers.observe("db", &o, &d);
    // The lagging replica is abnormal: every kind of abnormality gets a series.
    let lag = Abnormality { member: "db-1".into(), kind: Kind::ReplicationLagSpike, message: String::new(), new: true };
    servers.abnormalities("db", "db-1", &[lag]);
    servers.autoscaling("db", Some(("client_connections_per_replica", Some(2.0), 3)));
    servers.acknowledgements("db", statecraft_mysql::clustering::acks::Acknowledgements::Waiting { primary: 0 });
    servers.backup_succeeded("db", 1_700_000_000);
    servers.backup_finished("db", true);
    servers.backup_finished("db", false);

    let operations = [
        Operation::Bootstrap { primary: 0 },
        Operation::MakeWritable { ordinal: 0 },
        Operation::Demote { ordinal: 1 },
        Operation::ConfigureReplica { ordinal: 1, source: 0 },
        Operation::Fence { ordinals: vec![1, 2] },
        Operation::Promote { ordinal: 1, from: 0, received: String::new() },
        Operation::Switchover { from: 0, to: 1, terminating: false },
        Operation::Relabel { changes: vec![(2, None)], reads: vec![(2, false)] },
    ];
    for op in &operations {
        servers.operation("db", op, true);
        servers.operation("db", op, false);
    }
    metrics.observe_reconcile("mysqlcluster", 0.05, None);
    metrics.observe_reconcile("mysqlcluster", 0.5, Some("KubernetesApiError"));
    metrics.set_leader(true);
    namespace.watch_task("db");
    namespace.task_restarted("db");

    let mut catalogue = Catalogue::new(&CLOSED_LABELS);
    catalogue.add_metrics(OPERATOR, &metrics);
    catalogue.scrape_adds(SERVERS, &SERVER_LABELS);
    for series in exporter_series() {
        catalogue.add_series(SERVERS, &series.name, series.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    catalogue
}

#[test]
fn every_alert_is_labelled_annotated_has_a_runbook_and_uses_registered_metrics() {
    let problems = registered().check_rules(&root(), &RULES);
    assert!(problems.is_empty(), "{}:\n  {}", RULES.path, problems.join("\n  "));
}

/// Prometheus's own rule engine fires each alert when it should, with the labels it routes
/// on (`promtool test rules` on `operators/mysql/tests/alerts.test.yaml`).
#[test]
fn every_alert_fires_under_promtool_as_its_unit_tests_expect() {
    let tests = "operators/mysql/tests/alerts.test.yaml";
    let problems = promtool::test_rules(&root(), RULES.path, tests);
    assert!(problems.is_empty(), "{tests}:\n  {}", problems.join("\n  "));
}

#[test]
fn every_dashboard_panel_has_a_title_and_uses_registered_metrics() {
    let problems = registered().check_dashboard(&root(), &DASHBOARD);
    assert!(problems.is_empty(), "{}:\n  {}", DASHBOARD.path, problems.join("\n  "));
}

/// The checks themselves catch what they are for, so a green run means something.
#[test]
fn the_checks_reject_unknown_metrics_labels_and_values() {
    let registered = registered();
    for ok in [
        r#"max by (cluster, member) (statecraft_mysql_member_up{cluster=~"$cluster", namespace="n"}) and on (cluster, member) statecraft_mysql_member_errant"#,
        r#"histogram_quantile(0.9, sum by (controller, le) (rate(statecraft_mysql_reconcile_duration_seconds_bucket[5m])))"#,
        r#"sum by (operation) (rate(statecraft_mysql_operations_total{result="error", operation=~"fence|failover"}[5m]))"#,
        r#"statecraft_mysql_cluster_phase{phase=~"Stopped|Paused|Initializing|Healthy|Degraded|Failed|Lost"} == 1"#,
    ] {
        assert_eq!(registered.check_expr("q", ok), Vec::<String>::new(), "{ok}");
    }
    for (expr, needle) in [
        ("statecraft_mysql_member_upp == 0", "statecraft_mysql_member_upp is not registered"),
        ("statecraft_mysql_member_up_count", "statecraft_mysql_member_up_count is not registered"),
        (r#"statecraft_mysql_member_up{membr="x"}"#, "has no label \"membr\""),
        (r#"statecraft_mysql_member_up{phase="Healthy"}"#, "has no label \"phase\""),
        (r#"statecraft_mysql_cluster_phase{phase=~"Healthy|Healty"}"#, "phase=\"Healty\""),
        (r#"statecraft_mysql_operations_total{result="failed"}"#, "result=\"failed\""),
        ("max by (clustr) (statecraft_mysql_member_up)", "label \"clustr\""),
        ("up == 0", "metric up is not registered"),
        ("vector(1)", "uses no metric"),
    ] {
        let problems = registered.check_expr("q", expr);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{expr}: expected a problem with {needle:?}, got {problems:?}"
        );
    }
    // The dashboard's variable lists the clusters of the phase metric.
    let metric = DASHBOARD.cluster_metric;
    assert_eq!(
        registered.check_label_values("v", &format!("label_values({metric}, cluster)"), metric),
        Vec::<String>::new()
    );
    for bad in [
        "label_values(statecraft_mysql_cluster_phase, clustr)",
        "label_values(statecraft_mysql_member_up, cluster)",
        "statecraft_mysql_cluster_phase",
    ] {
        assert!(!registered.check_label_values("v", bad, metric).is_empty(), "{bad}");
    }
}

#[test]
fn the_pod_monitors_scrape_the_operator_and_the_servers_exporters() {
    let problems = monitoring::pod_monitor_problems(&root(), MONITORS, "statecraft-mysql", APP_NAME, INSTANCE_LABEL);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(SERVER_LABELS, monitoring::MEMBER_LABELS);
    assert_eq!(exporter::PORT_NAME, "metrics", "the sidecar's port is the one the monitor scrapes");
    let selector = Names::new("main", "prod").selector_labels();
    assert_eq!(selector.get(NAME_LABEL).map(String::as_str), Some(APP_NAME));
}
