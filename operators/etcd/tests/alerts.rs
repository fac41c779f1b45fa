//! The monitoring files shipped with the etcd operator agree with the operator and with
//! etcd itself:
//!
//! - `deploy/etcd/prometheus-rules.yaml`: every alert has a severity, a summary, a
//!   description and a runbook that exists under `docs/runbooks/etcd/`, and every runbook
//!   belongs to an alert;
//! - the rules and `deploy/etcd/grafana-dashboard.json` use only metrics (and, in matchers
//!   and `by`/`on` clauses, only labels) that exist: `statecraft_etcd_*` from the operator's
//!   real registries fed with an observation, `etcd_*` from a real etcd's `/metrics` read
//!   with the operator's own scraper; the dashboard shows every operator metric;
//! - Prometheus's own `promtool test rules` fires each alert as
//!   `operators/etcd/tests/alerts.test.yaml` expects;
//! - `deploy/etcd/podmonitor.yaml` scrapes the ports and adds the labels the rules assume;
//! - the scraper and the abnormality detector work against that real etcd.
//!
//! The checks of the rules and the dashboard are the shared ones
//! ([`statecraft_shared::testing::monitoring`]); this file names the files and the metrics.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use statecraft_etcd::build::{APP_NAME, INSTANCE_LABEL, METRICS_PORT, NAME_LABEL, Names};
use statecraft_etcd::controller::metrics::{EtcdMetrics, PHASES};
use statecraft_etcd::insight::{Abnormality, Detector, Kind, ScrapeError, fetch, scrape};
use statecraft_etcd::membership::{Alarm, Member, MemberState, Observed, Step};
use statecraft_shared::exposition::Series;
use statecraft_shared::metrics::Metrics;
use statecraft_shared::testing::monitoring::{self, Catalogue, Dashboard, Rules};
use statecraft_shared::testing::promtool;
use statecraft_shared::testing::{binary, free_port, log_tail};

/// The two sources of metrics, as the checks name them.
const OPERATOR: &str = "the operator";
const ETCD: &str = "etcd";
const RULES: Rules = Rules {
    path: "deploy/etcd/prometheus-rules.yaml",
    name: "statecraft-etcd",
    alert_prefix: "Etcd",
    runbooks: "docs/runbooks/etcd",
    // The topics the alerts must cover, by the metric each needs.
    required_metrics: &[
        "statecraft_etcd_quorum",
        "statecraft_etcd_has_leader",
        "statecraft_etcd_member_up",
        "statecraft_etcd_member_learner",
        "statecraft_etcd_member_alarm",
        "statecraft_etcd_member_abnormal",
        "statecraft_etcd_backup_last_success_timestamp_seconds",
        "statecraft_etcd_backups_total",
        "etcd_server_leader_changes_seen_total",
        "etcd_mvcc_db_total_size_in_bytes",
        "etcd_server_quota_backend_bytes",
        "etcd_disk_wal_fsync_duration_seconds_bucket",
        "etcd_disk_backend_commit_duration_seconds_bucket",
    ],
};
const DASHBOARD: Dashboard = Dashboard {
    path: "deploy/etcd/grafana-dashboard.json",
    cluster_metric: "statecraft_etcd_cluster_phase",
    shows_every_metric_of: Some(OPERATOR),
};
const MONITORS: &str = "deploy/etcd/podmonitor.yaml";
/// Labels the members' PodMonitor adds to etcd's own series (checked against the file).
const MEMBER_LABELS: [&str; 2] = ["cluster", "member"];
/// Labels whose values form a closed set the test fully exercises, so that a matcher on
/// them must name values that exist (`phase="Healty"` would match nothing, forever).
const CLOSED_LABELS: [&str; 5] = ["phase", "result", "alarm", "reason", "kind"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

// ---------------------------------------------------------------------------------------
// A real etcd.

/// A single-member etcd on free loopback ports, killed when dropped.
struct Etcd {
    // Field order matters: etcd is killed before its directory is removed.
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
    metrics_url: String,
}

impl Etcd {
    /// Starts etcd and waits until its `/metrics` says it leads.
    async fn start() -> Etcd {
        let bin = binary("etcd").expect("the etcd test binary");
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = || free_port().expect("a free port");
        let (client, peer, metrics) = (port(), port(), port());
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = dir.path().join("etcd.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = tokio::process::Command::new(bin)
            .args([
                "--name=m0".to_string(),
                format!("--data-dir={}", dir.path().join("data").display()),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=m0={peer_url}"),
                format!("--listen-metrics-urls=http://127.0.0.1:{metrics}"),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .expect("starting etcd");
        let etcd = Etcd { _child: child, _dir: dir, metrics_url: format!("http://127.0.0.1:{metrics}/metrics") };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(series) = fetch(&etcd.metrics_url).await
                && series.iter().any(|s| s.name == "etcd_server_has_leader" && s.value == 1.0)
            {
                return etcd;
            }
            assert!(Instant::now() < deadline, "etcd not ready in 30 s:\n{}", log_tail(&log, 20));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Every series of a real etcd's `/metrics`, read once for all tests with the scraper.
fn etcd_series() -> &'static [Series] {
    static SERIES: OnceLock<Vec<Series>> = OnceLock::new();
    SERIES.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let etcd = Etcd::start().await;
            fetch(&etcd.metrics_url).await.expect("scraping etcd")
        })
    })
}

// ---------------------------------------------------------------------------------------
// The metrics that exist.

fn member(names: &Names, id: u64, ordinal: u32, learner: bool) -> Member {
    Member {
        id,
        ordinal: Some(ordinal),
        name: names.member(ordinal),
        peer_urls: vec![names.peer_url(ordinal)],
        is_learner: learner,
    }
}

/// The operator's registries after one of everything: a cluster with a leader, a member
/// with each alarm, a learner, every step and phase, both backup results, every
/// abnormality, a good and a failed reconcile, leadership.
fn operator_metrics() -> Metrics {
    let metrics = Metrics::new("statecraft-etcd").expect("shared metrics");
    let namespace = metrics.namespace("shop").expect("namespace metrics");
    let etcd = EtcdMetrics::register(&namespace.registry).expect("etcd metrics");
    let names = Names::new("main", "prod");
    let mut o = Observed {
        members: Some(vec![member(&names, 1, 0, false), member(&names, 2, 1, false), member(&names, 3, 2, true)]),
        ..Default::default()
    };
    for id in 1..=3 {
        o.states
            .insert(id, MemberState { id, leader: 1, db_size: 1 << 20, db_size_in_use: 1 << 19, ..Default::default() });
    }
    o.alarms.insert(1, [Alarm::NoSpace, Alarm::Corrupt].into());
    etcd.observe("main", &names, &o, Some(1));
    etcd.observe("main", &names, &o, Some(2));
    for phase in PHASES {
        etcd.set_phase("main", phase);
    }
    // Every step the planner can take, by the reason the task records.
    let steps = [
        Step::Bootstrap,
        Step::AddLearner { ordinal: 3 },
        Step::DeleteStaleClaim { ordinal: 3 },
        Step::RestartPod { ordinal: 3 },
        Step::Promote { id: 3, ordinal: 2 },
        Step::MoveLeader { from: 1, from_ordinal: 0, to: 2, to_ordinal: 1 },
        Step::Remove { id: 3, ordinal: 2 },
        Step::Replace { id: 3, ordinal: 2 },
        Step::ClearAlarm { id: 9 },
        Step::RecoverNoSpace,
        Step::Defragment { id: 2, ordinal: 1 },
    ];
    for step in &steps {
        etcd.record_step("main", step.reason(), true);
        etcd.record_step("main", step.reason(), false);
    }
    etcd.record_backup("main", true, 1_700_000_000);
    etcd.record_backup("main", false, 1_700_000_100);
    let found: Vec<Abnormality> = Kind::ALL
        .into_iter()
        .map(|kind| Abnormality { member: names.member(0), kind, message: String::new(), new: true })
        .collect();
    etcd.set_abnormalities("main", &names.member(0), &found);
    metrics.observe_reconcile("etcdcluster", 0.05, None);
    metrics.observe_reconcile("etcdcluster", 0.5, Some("KubernetesApiError"));
    metrics.set_leader(true);
    namespace.watch_task("main");
    namespace.task_restarted("main");

    metrics
}

/// The operator's metrics and a real etcd's, with the labels their scrapes add.
fn known() -> Catalogue {
    let mut known = Catalogue::new(&CLOSED_LABELS);
    known.scrape_adds(ETCD, &MEMBER_LABELS);
    known.add_metrics(OPERATOR, &operator_metrics());
    for s in etcd_series() {
        known.add_series(ETCD, &s.name, s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    known
}

// ---------------------------------------------------------------------------------------
// The files.

#[test]
fn every_alert_has_severity_summary_runbook_and_existing_metrics() {
    let problems = known().check_rules(&root(), &RULES);
    assert!(problems.is_empty(), "{}:\n  {}", RULES.path, problems.join("\n  "));
}

/// Prometheus's own rule engine fires each alert when it should, with the labels it routes
/// on (`promtool test rules` on `operators/etcd/tests/alerts.test.yaml`).
#[test]
fn every_alert_fires_under_promtool_as_its_unit_tests_expect() {
    let tests = "operators/etcd/tests/alerts.test.yaml";
    let problems = promtool::test_rules(&root(), RULES.path, tests);
    assert!(problems.is_empty(), "{tests}:\n  {}", problems.join("\n  "));
}

#[test]
fn every_dashboard_panel_has_a_title_and_existing_metrics_and_every_operator_metric_is_shown() {
    let problems = known().check_dashboard(&root(), &DASHBOARD);
    assert!(problems.is_empty(), "{}:\n  {}", DASHBOARD.path, problems.join("\n  "));
}

/// The checks themselves catch what they are for, so that a green run means something.
#[test]
fn the_checks_reject_unknown_metrics_labels_and_values() {
    let known = known();
    for ok in [
        r#"max by (cluster, member) (statecraft_etcd_member_up{cluster=~"$cluster", namespace="n"}) and on (cluster, member) statecraft_etcd_member_learner"#,
        r#"histogram_quantile(0.99, sum by (cluster, member, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{cluster=~"$cluster"}[5m])))"#,
        r#"sum by (operation) (rate(statecraft_etcd_operations_total{result="error", operation=~".+"}[5m]))"#,
        r#"statecraft_etcd_cluster_phase{phase=~"Bootstrapping|Healthy|QuorumLost"} == 1"#,
        r#"statecraft_etcd_member_alarm{alarm="NOSPACE"} == 1 or statecraft_etcd_member_abnormal{kind="SlowDisk"} == 1"#,
        "time() - max by (namespace, cluster) (statecraft_etcd_backup_last_success_timestamp_seconds) > 9e4",
    ] {
        assert_eq!(known.check_expr("q", ok), Vec::<String>::new(), "{ok}");
    }
    for (expr, needle) in [
        ("statecraft_etcd_member_upp == 0", "statecraft_etcd_member_upp is not registered"),
        ("etcd_disk_wal_fsync_seconds_bucket", "is not registered"),
        ("up == 0", "metric up is not registered"),
        (r#"statecraft_etcd_member_up{membr="x"}"#, "has no label \"membr\""),
        (r#"etcd_server_has_leader{phase="Healthy"}"#, "has no label \"phase\""),
        (r#"statecraft_etcd_cluster_phase{phase=~"Healthy|Healty"}"#, "phase=\"Healty\""),
        (r#"statecraft_etcd_member_alarm{alarm="NOSPC"}"#, "alarm=\"NOSPC\""),
        (r#"statecraft_etcd_member_abnormal{kind="Slow"}"#, "kind=\"Slow\""),
        ("max by (clustr) (statecraft_etcd_member_up)", "label \"clustr\""),
        ("max by (le) (statecraft_etcd_member_up)", "label \"le\""),
        ("vector(1)", "uses no metric"),
        (r#"statecraft_etcd_member_up{cluster="x}"#, "cannot read the query"),
        // The grouping is judged against the metrics under it, not anywhere in the query.
        ("max by (member) (statecraft_etcd_quorum) and on (cluster) statecraft_etcd_member_up", "label \"member\""),
    ] {
        let problems = known.check_expr("q", expr);
        assert!(problems.iter().any(|p| p.contains(needle)), "{expr}: expected {needle:?}, got {problems:?}");
    }
    // etcd's own series get cluster and member from the PodMonitor, the operator's do not
    // need them from the scrape.
    assert!(known.check_expr("q", "max by (cluster, member) (etcd_server_has_leader)").is_empty());
}

#[test]
fn the_pod_monitors_scrape_the_operator_and_the_members_metrics_ports() {
    let problems = monitoring::pod_monitor_problems(&root(), MONITORS, "statecraft-etcd", APP_NAME, INSTANCE_LABEL);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(MEMBER_LABELS, monitoring::MEMBER_LABELS);
    assert_eq!(METRICS_PORT, 2381);
    let selector = Names::new("main", "prod").selector();
    assert_eq!(selector.get(NAME_LABEL).map(String::as_str), Some(APP_NAME));
    // The operator's Deployment names its metrics port as the monitor expects.
    assert!(read("deploy/etcd/operator.yaml").contains("name: metrics"), "the operator has no port named metrics");
}

#[tokio::test]
async fn the_scraper_and_detector_read_a_real_etcd() {
    let etcd = Etcd::start().await;
    let mut detector = Detector::default();
    let first = scrape(&etcd.metrics_url).await.expect("first scrape");
    assert!(first.leader_changes >= 1.0, "a started member has seen its leader: {first:?}");
    assert!(first.wal_fsync.count() > 0.0, "bootstrapping fsyncs the WAL: {first:?}");
    assert!(first.wal_fsync.quantile(0.99).is_some_and(|p| p > 0.0 && p.is_finite()));
    assert!(first.backend_commit.count() > 0.0, "{first:?}");
    assert_eq!(detector.observe("m0", first.clone()), vec![]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = scrape(&etcd.metrics_url).await.expect("second scrape");
    assert!(second.at > first.at);
    assert!(second.wal_fsync.since(&first.wal_fsync).is_some(), "same buckets");
    assert_eq!(second.leader_changes, first.leader_changes, "a quiet single member keeps its leader");
    assert_eq!(detector.observe("m0", second), vec![], "a quiet member is normal");

    // Errors name what went wrong.
    let missing = etcd.metrics_url.replace("/metrics", "/nothing-here");
    assert!(matches!(scrape(&missing).await, Err(ScrapeError::Status { status: 404, .. })));
    let health = etcd.metrics_url.replace("/metrics", "/health");
    let err = scrape(&health).await.expect_err("/health is JSON");
    assert!(matches!(err, ScrapeError::Parse { .. } | ScrapeError::Incomplete { .. }), "{err}");
    let closed = format!("http://127.0.0.1:{}/metrics", free_port().expect("a free port"));
    assert!(matches!(scrape(&closed).await, Err(ScrapeError::Io { .. })));
    assert!(matches!(scrape("https://127.0.0.1:2381/metrics").await, Err(ScrapeError::InvalidUrl { .. })));
}
