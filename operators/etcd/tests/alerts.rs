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
//! - `deploy/etcd/podmonitor.yaml` scrapes the ports and adds the labels the rules assume;
//! - the scraper and the abnormality detector work against that real etcd.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use prometheus::{Encoder, TextEncoder};
use statecraft_etcd::build::{APP_NAME, INSTANCE_LABEL, METRICS_PORT, NAME_LABEL, Names};
use statecraft_etcd::controller::metrics::{EtcdMetrics, PHASES};
use statecraft_etcd::insight::exposition::{self, Series};
use statecraft_etcd::insight::{Abnormality, Detector, Kind, ScrapeError, fetch, scrape};
use statecraft_etcd::membership::{Alarm, Member, MemberState, Observed, Step};
use statecraft_shared::metrics::Metrics;
use statecraft_shared::testing::{binary, free_port, log_tail};

const OPERATOR_PREFIX: &str = "statecraft_etcd_";
const ETCD_PREFIX: &str = "etcd_";
const RULES: &str = "deploy/etcd/prometheus-rules.yaml";
const DASHBOARD: &str = "deploy/etcd/grafana-dashboard.json";
const MONITORS: &str = "deploy/etcd/podmonitor.yaml";
const RUNBOOKS: &str = "docs/runbooks/etcd";
/// Labels every scrape adds (Prometheus, Prometheus Operator).
const TARGET_LABELS: [&str; 7] = ["job", "instance", "namespace", "pod", "container", "service", "endpoint"];
/// Labels the members' PodMonitor adds to etcd's own series (checked against the file).
const MEMBER_LABELS: [&str; 2] = ["cluster", "member"];
/// Labels whose values form a closed set the test fully exercises, so that a matcher on
/// them must name values that exist (`phase="Healty"` would match nothing, forever).
const CLOSED_LABELS: [&str; 4] = ["phase", "result", "alarm", "reason"];
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

/// Where a metric comes from, which decides the labels its scrape adds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Source {
    Operator,
    Etcd,
}

/// One metric name (a histogram's `_bucket`, `_sum`, `_count` are names of their own, as
/// in the exposition) with its labels and the values seen.
struct Family {
    source: Source,
    labels: BTreeMap<String, BTreeSet<String>>,
}

impl Family {
    /// Its labels plus those the scrape adds.
    fn known_labels(&self) -> BTreeSet<String> {
        let mut all: BTreeSet<String> = self.labels.keys().cloned().collect();
        all.extend(TARGET_LABELS.iter().map(|l| l.to_string()));
        if self.source == Source::Etcd {
            all.extend(MEMBER_LABELS.iter().map(|l| l.to_string()));
        }
        all
    }
}

struct Known(BTreeMap<String, Family>);

impl Known {
    fn add(&mut self, source: Source, series: &[Series]) {
        for s in series {
            let family = self.0.entry(s.name.clone()).or_insert_with(|| Family { source, labels: BTreeMap::new() });
            for (k, v) in &s.labels {
                family.labels.entry(k.clone()).or_default().insert(v.clone());
            }
        }
    }
}

fn member(names: &Names, id: u64, ordinal: u32, learner: bool) -> Member {
    Member {
        id,
        ordinal: Some(ordinal),
        name: names.member(ordinal),
        peer_urls: vec![names.peer_url(ordinal)],
        is_learner: learner,
    }
}

/// The operator's `/metrics` after one of everything: a cluster with a leader, a member
/// with each alarm, a learner, every step and phase, both backup results, every
/// abnormality, a good and a failed reconcile, leadership.
fn operator_series() -> Vec<Series> {
    let metrics = Metrics::new("statecraft-etcd").expect("shared metrics");
    let etcd = EtcdMetrics::register(&metrics.registry).expect("etcd metrics");
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
    metrics.watch_task("main");
    metrics.task_restarted("main");

    let mut text = Vec::new();
    TextEncoder::new().encode(&metrics.registry.gather(), &mut text).expect("encoding");
    exposition::parse(&String::from_utf8(text).expect("UTF-8")).expect("the operator's own exposition")
}

fn known() -> Known {
    let mut known = Known(BTreeMap::new());
    known.add(Source::Operator, &operator_series());
    known.add(Source::Etcd, etcd_series());
    known
}

// ---------------------------------------------------------------------------------------
// Reading PromQL, just enough to find metrics, matchers and grouping labels.

/// Words that are not metric names when not followed by `(`.
const KEYWORDS: [&str; 26] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
    "limitk",
];
/// Keywords followed by a list of labels.
const GROUPING: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];

/// A metric named in a query, with its matchers `(label, operator, value)`.
#[derive(Debug)]
struct Selector {
    name: String,
    matchers: Vec<(String, String, String)>,
}

#[derive(Debug, Default)]
struct Query {
    selectors: Vec<Selector>,
    grouping: Vec<String>,
}

/// The end (exclusive) of the quoted string starting at `start`, and its unescaped value.
fn quoted(expr: &str, start: usize) -> Result<(usize, String), String> {
    let quote = expr[start..].chars().next().ok_or("expected a quote")?;
    let mut value = String::new();
    let mut chars = expr[start + quote.len_utf8()..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if quote != '`' => value.extend(chars.next().map(|(_, c)| c)),
            c if c == quote => return Ok((start + quote.len_utf8() + i + c.len_utf8(), value)),
            c => value.push(c),
        }
    }
    Err(format!("unterminated string at {:?}", &expr[start..]))
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Reads `label op "value", ...}` starting after the `{`; returns the end after `}`.
fn matchers(expr: &str, mut i: usize, out: &mut Vec<(String, String, String)>) -> Result<usize, String> {
    loop {
        i += expr[i..].len() - expr[i..].trim_start().len();
        if expr[i..].starts_with('}') {
            return Ok(i + 1);
        }
        let end = expr[i..].find(|c: char| !is_ident(c)).map_or(expr.len(), |e| i + e);
        let label = expr[i..end].to_string();
        if label.is_empty() {
            return Err(format!("expected a label at {:?}", &expr[i..]));
        }
        i = end + expr[end..].len() - expr[end..].trim_start().len();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| expr[i..].starts_with(op))
            .ok_or_else(|| format!("no matcher operator after label {label:?}"))?;
        i += op.len();
        i += expr[i..].len() - expr[i..].trim_start().len();
        let (end, value) = quoted(expr, i)?;
        out.push((label, op.to_string(), value));
        i = end + expr[end..].len() - expr[end..].trim_start().len();
        if expr[i..].starts_with(',') {
            i += 1;
        } else if !expr[i..].starts_with('}') {
            return Err(format!("expected ',' or '}}' at {:?}", &expr[i..]));
        }
    }
}

/// The metrics, matchers and grouping labels of a query; an identifier that is neither a
/// keyword nor a function must be a metric of the operator or of etcd.
fn scan(expr: &str) -> Result<Query, String> {
    let mut q = Query::default();
    let mut i = 0;
    while let Some(c) = expr[i..].chars().next() {
        match c {
            '"' | '\'' | '`' => i = quoted(expr, i)?.0,
            '[' => i += expr[i..].find(']').ok_or("unclosed [")? + 1,
            '#' => i += expr[i..].find('\n').unwrap_or(expr.len() - i),
            '$' => i += 1 + expr[i + 1..].find(|c: char| !is_ident(c)).unwrap_or(expr.len() - i - 1),
            '{' => return Err(format!("a selector without a metric name at {:?}", &expr[i..])),
            c if c.is_ascii_digit() || c == '.' => {
                i += expr[i..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '.')).unwrap_or(expr.len() - i)
            }
            c if is_ident_start(c) => {
                let end = expr[i..].find(|c: char| !is_ident(c)).map_or(expr.len(), |e| i + e);
                let word = &expr[i..end];
                let next = end + expr[end..].len() - expr[end..].trim_start().len();
                let called = expr[next..].starts_with('(');
                i = end;
                if GROUPING.contains(&word) && called {
                    let close = expr[next..].find(')').ok_or("unclosed label list")? + next;
                    q.grouping.extend(
                        expr[next + 1..close].split(',').map(str::trim).filter(|l| !l.is_empty()).map(String::from),
                    );
                    i = close + 1;
                } else if !called && !KEYWORDS.contains(&word) {
                    if !word.starts_with(OPERATOR_PREFIX) && !word.starts_with(ETCD_PREFIX) {
                        return Err(format!("{word:?} is neither a keyword nor a metric of the operator or etcd"));
                    }
                    let mut selector = Selector { name: word.to_string(), matchers: Vec::new() };
                    if expr[end..].starts_with('{') {
                        i = matchers(expr, end + 1, &mut selector.matchers)?;
                    }
                    q.selectors.push(selector);
                }
            }
            c => i += c.len_utf8(),
        }
    }
    Ok(q)
}

/// What is wrong with the metrics and labels of one query; `what` names it in messages.
fn check_expr(known: &Known, what: &str, expr: &str) -> Vec<String> {
    let q = match scan(expr) {
        Ok(q) => q,
        Err(e) => return vec![format!("{what}: cannot read the query: {e}: {expr}")],
    };
    let mut problems = Vec::new();
    if q.selectors.is_empty() {
        problems.push(format!("{what}: uses no metric: {expr}"));
    }
    let mut labels = BTreeSet::new();
    let mut all_known = true;
    for s in &q.selectors {
        let Some(family) = known.0.get(&s.name) else {
            problems.push(format!("{what}: metric {} exists neither in the operator nor in etcd", s.name));
            all_known = false;
            continue;
        };
        let family_labels = family.known_labels();
        for (label, op, value) in &s.matchers {
            if !family_labels.contains(label) {
                problems.push(format!("{what}: metric {} has no label {label:?}", s.name));
                continue;
            }
            let simple = value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|');
            if let Some(values) = family.labels.get(label)
                && CLOSED_LABELS.contains(&label.as_str())
                && (op == "=" || op == "=~")
                && simple
            {
                for v in value.split('|').filter(|v| !values.contains(*v)) {
                    problems.push(format!(
                        "{what}: {}{{{label}{op}\"{value}\"}}: no series has {label}=\"{v}\" (values: {values:?})",
                        s.name
                    ));
                }
            }
        }
        labels.extend(family_labels);
    }
    // With an unknown metric its labels are unknown too: no point judging the grouping.
    for label in q.grouping.iter().filter(|_| all_known) {
        if !labels.contains(label) {
            problems.push(format!("{what}: groups or matches on label {label:?}, which none of its metrics has"));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// The files.

fn yaml_str<'a>(v: &'a serde_yaml::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|v| v.as_str()).filter(|s| !s.trim().is_empty())
}

/// `https://.../blob/main/`: runbook URLs point into the repository.
fn runbook_prefix() -> String {
    let manifest = read("Cargo.toml");
    let repository = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("repository")?.trim_start().strip_prefix('=').map(|v| v.trim()))
        .expect("workspace repository")
        .trim_matches('"');
    format!("{repository}/blob/main/")
}

#[test]
fn every_alert_has_severity_summary_runbook_and_existing_metrics() {
    let known = known();
    let rules: serde_yaml::Value = serde_yaml::from_str(&read(RULES)).expect("valid YAML");
    let prefix = runbook_prefix();
    let mut problems = Vec::new();
    let mut alerts = BTreeSet::new();
    let mut severities = BTreeSet::new();
    let groups = rules["spec"]["groups"].as_sequence().cloned().unwrap_or_default();
    for rule in groups.iter().flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default()) {
        let Some(alert) = yaml_str(&rule, "alert") else {
            problems.push(format!("a rule without an alert name: {rule:?}"));
            continue;
        };
        let what = format!("alert {alert}");
        if !alert.starts_with("Etcd") || !alert.chars().all(|c| c.is_ascii_alphanumeric()) {
            problems.push(format!("{what}: not a CamelCase name starting with Etcd"));
        }
        if !alerts.insert(alert.to_string()) {
            problems.push(format!("{what}: defined twice"));
        }
        match rule["labels"]["severity"].as_str() {
            Some(s @ ("critical" | "warning")) => {
                severities.insert(s.to_string());
            }
            other => problems.push(format!("{what}: severity {other:?} is not critical or warning")),
        }
        let annotations = &rule["annotations"];
        for key in ["summary", "description", "runbook_url"] {
            if yaml_str(annotations, key).is_none() {
                problems.push(format!("{what}: annotations.{key} is missing or empty"));
            }
        }
        if yaml_str(annotations, "description").is_some_and(|d| !d.contains("$labels.")) {
            problems.push(format!("{what}: the description names none of the alert's labels"));
        }
        if let Some(url) = yaml_str(annotations, "runbook_url") {
            let expected = format!("{RUNBOOKS}/{alert}.md");
            match url.strip_prefix(&prefix) {
                Some(path) if path == expected => match std::fs::read_to_string(root().join(path)) {
                    Ok(text) if text.starts_with(&format!("# {alert}\n")) => {}
                    Ok(_) => problems.push(format!("{what}: {path} does not start with `# {alert}`")),
                    Err(e) => problems.push(format!("{what}: runbook {path}: {e}")),
                },
                _ => problems.push(format!("{what}: runbook_url {url} is not {prefix}{expected}")),
            }
        }
        match yaml_str(&rule, "expr") {
            Some(expr) => problems.extend(check_expr(&known, &what, expr)),
            None => problems.push(format!("{what}: no expr")),
        }
    }
    assert_eq!(severities, ["critical", "warning"].map(String::from).into(), "both severities are used");

    let dir = root().join(RUNBOOKS);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        if path.extension().is_some_and(|e| e == "md") && !alerts.contains(stem) {
            problems.push(format!("runbook {} belongs to no alert", path.display()));
        }
    }
    // The topics the alerts must cover, by the metric each needs.
    let rules_text = read(RULES);
    for metric in [
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
    ] {
        if !rules_text.contains(metric) {
            problems.push(format!("no alert uses {metric}"));
        }
    }
    assert!(problems.is_empty(), "{RULES}:\n  {}", problems.join("\n  "));
}

/// Every panel, including those nested in collapsed rows.
fn panels(dashboard: &serde_json::Value) -> Vec<&serde_json::Value> {
    fn walk<'a>(list: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

#[test]
fn every_dashboard_panel_has_a_title_and_existing_metrics_and_every_operator_metric_is_shown() {
    let known = known();
    let text = read(DASHBOARD);
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut problems = Vec::new();
    if dashboard["schemaVersion"] != 39 {
        problems.push(format!("schemaVersion is {}, expected 39", dashboard["schemaVersion"]));
    }
    let variables = dashboard["templating"]["list"].as_array().cloned().unwrap_or_default();
    let variable = |name: &str| variables.iter().find(|v| v["name"] == name);
    match variable("datasource") {
        Some(v) if v["type"] == "datasource" && v["query"] == "prometheus" => {}
        other => problems.push(format!("no Prometheus datasource variable named datasource: {other:?}")),
    }
    match variable("cluster").and_then(|v| v["query"].as_str().or_else(|| v["query"]["query"].as_str())) {
        Some(q) if q.replace(' ', "") == "label_values(statecraft_etcd_cluster_phase,cluster)" => {}
        other => problems
            .push(format!("variable cluster: {other:?} is not label_values(statecraft_etcd_cluster_phase, cluster)")),
    }

    let panels = panels(&dashboard);
    let mut ids = BTreeSet::new();
    let mut used = BTreeSet::new();
    for (i, panel) in panels.iter().enumerate() {
        let title = panel["title"].as_str().unwrap_or_default();
        let what = format!("panel {title:?} (#{i})");
        if title.trim().is_empty() {
            problems.push(format!("{what}: no title"));
        }
        if !ids.insert(panel["id"].to_string()) {
            problems.push(format!("{what}: id {} used twice", panel["id"]));
        }
        if panel["type"] == "row" {
            continue;
        }
        if panel["description"].as_str().is_none_or(|d| d.trim().is_empty()) {
            problems.push(format!("{what}: no description"));
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        let exprs: Vec<&str> = targets.iter().filter_map(|t| t["expr"].as_str()).collect();
        if exprs.is_empty() {
            problems.push(format!("{what}: no query"));
        }
        for expr in exprs {
            problems.extend(check_expr(&known, &what, expr));
            used.extend(scan(expr).map(|q| q.selectors.into_iter().map(|s| s.name)).into_iter().flatten());
        }
    }
    // Every operator metric is on the dashboard (a histogram by its buckets).
    for (name, family) in &known.0 {
        let shown_as_histogram = name
            .strip_suffix("_sum")
            .or_else(|| name.strip_suffix("_count"))
            .is_some_and(|base| used.contains(&format!("{base}_bucket")));
        if family.source == Source::Operator && !used.contains(name) && !shown_as_histogram {
            problems.push(format!("metric {name} is on no panel"));
        }
    }
    assert!(problems.is_empty(), "{DASHBOARD}:\n  {}", problems.join("\n  "));
}

/// The checks themselves catch what they are for, so that a green run means something.
#[test]
fn the_checks_reject_unknown_metrics_labels_and_values() {
    let known = known();
    for ok in [
        r#"max by (cluster, member) (statecraft_etcd_member_up{cluster=~"$cluster", namespace="n"}) and on (cluster, member) statecraft_etcd_member_learner"#,
        r#"histogram_quantile(0.99, sum by (cluster, member, le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{cluster=~"$cluster"}[$__rate_interval])))"#,
        r#"sum by (step) (rate(statecraft_etcd_operations_total{result="error", step=~".+"}[5m]))"#,
        r#"statecraft_etcd_cluster_phase{phase=~"Pending|Healthy|QuorumLost"} == 1"#,
        r#"statecraft_etcd_member_alarm{alarm="NOSPACE"} == 1 or statecraft_etcd_member_abnormal{reason="SlowDisk"} == 1"#,
        "time() - max by (namespace, cluster) (statecraft_etcd_backup_last_success_timestamp_seconds) > 9e4",
    ] {
        assert_eq!(check_expr(&known, "q", ok), Vec::<String>::new(), "{ok}");
    }
    for (expr, needle) in [
        ("statecraft_etcd_member_upp == 0", "statecraft_etcd_member_upp exists neither"),
        ("etcd_disk_wal_fsync_seconds_bucket", "exists neither"),
        ("up == 0", "\"up\" is neither a keyword nor a metric"),
        (r#"statecraft_etcd_member_up{membr="x"}"#, "has no label \"membr\""),
        (r#"etcd_server_has_leader{phase="Healthy"}"#, "has no label \"phase\""),
        (r#"statecraft_etcd_cluster_phase{phase=~"Healthy|Healty"}"#, "phase=\"Healty\""),
        (r#"statecraft_etcd_member_alarm{alarm="NOSPC"}"#, "alarm=\"NOSPC\""),
        (r#"statecraft_etcd_member_abnormal{reason="Slow"}"#, "reason=\"Slow\""),
        ("max by (clustr) (statecraft_etcd_member_up)", "label \"clustr\""),
        ("max by (le) (statecraft_etcd_member_up)", "label \"le\""),
        ("vector(1)", "uses no metric"),
        (r#"statecraft_etcd_member_up{cluster="x}"#, "unterminated"),
    ] {
        let problems = check_expr(&known, "q", expr);
        assert!(problems.iter().any(|p| p.contains(needle)), "{expr}: expected {needle:?}, got {problems:?}");
    }
    // etcd's own series get cluster and member from the PodMonitor, the operator's do not
    // need them from the scrape.
    assert!(check_expr(&known, "q", "max by (cluster, member) (etcd_server_has_leader)").is_empty());
}

#[test]
fn the_pod_monitors_scrape_the_operator_and_the_members_metrics_ports() {
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&read(MONITORS))
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .collect();
    let by_app = |app: &str| {
        docs.iter()
            .find(|d| {
                d["kind"] == "PodMonitor" && d["spec"]["selector"]["matchLabels"][NAME_LABEL].as_str() == Some(app)
            })
            .unwrap_or_else(|| panic!("{MONITORS}: no PodMonitor selects {NAME_LABEL}={app}"))
    };
    for app in ["statecraft-etcd", APP_NAME] {
        let endpoint = &by_app(app)["spec"]["podMetricsEndpoints"][0];
        assert_eq!(endpoint["port"], "metrics", "{app}");
        assert_eq!(endpoint["path"], "/metrics", "{app}");
    }
    // The members' series are relabelled with the labels the rules join on.
    let relabelings =
        by_app(APP_NAME)["spec"]["podMetricsEndpoints"][0]["relabelings"].as_sequence().cloned().unwrap_or_default();
    let source_of = |target: &str| {
        relabelings
            .iter()
            .find(|r| r["targetLabel"] == target)
            .and_then(|r| r["sourceLabels"][0].as_str().map(str::to_string))
    };
    let pod_label = |label: &str| {
        format!("__meta_kubernetes_pod_label_{}", label.replace(|c: char| !c.is_ascii_alphanumeric(), "_"))
    };
    assert_eq!(source_of("cluster"), Some(pod_label(INSTANCE_LABEL)));
    assert_eq!(source_of("member"), Some("__meta_kubernetes_pod_name".to_string()));
    assert_eq!(MEMBER_LABELS, ["cluster", "member"]);
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
