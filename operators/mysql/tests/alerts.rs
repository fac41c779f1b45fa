//! The monitoring files shipped with the operator agree with the operator:
//!
//! - `deploy/mysql/prometheus-rules.yaml`: every alert has a severity, a summary, a
//!   description and a runbook that exists under `docs/runbooks/mysql/`;
//! - that file and `deploy/mysql/grafana-dashboard.json` use only metrics (and, in label
//!   matchers and `by`/`on` clauses, only labels) that the operator really registers.
//!
//! The registered metrics come from the real registries (the shared RED metrics and the
//! servers' metrics), fed with one observation so that every vector has series. No network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prometheus::proto::MetricType;
use statecraft_mysql::api::Flavor;
use statecraft_mysql::clustering::decide::{Operation, Role, decide};
use statecraft_mysql::clustering::gtid::GtidSet;
use statecraft_mysql::clustering::observed::{Member, Observed, PodState, Replication, Server, ServerState};
use statecraft_mysql::controller::metrics::ServerMetrics;
use statecraft_mysql::insight::{Abnormality, Kind};
use statecraft_shared::metrics::Metrics;

const PREFIX: &str = "statecraft_mysql_";
const RULES: &str = "deploy/mysql/prometheus-rules.yaml";
const DASHBOARD: &str = "deploy/mysql/grafana-dashboard.json";
const RUNBOOKS: &str = "docs/runbooks/mysql";
/// Labels the scrape adds to every series (Prometheus, Prometheus Operator).
const TARGET_LABELS: [&str; 7] = ["job", "instance", "namespace", "pod", "container", "service", "endpoint"];
/// Labels whose values form a closed set the test fully exercises, so a matcher on them must
/// name values that exist (a typo such as `phase="Healty"` matches nothing forever).
const CLOSED_LABELS: [&str; 3] = ["phase", "operation", "result"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// One registered metric family: whether it is a histogram, and its labels with the values
/// seen in the test's observation.
#[derive(Default)]
struct Family {
    histogram: bool,
    labels: BTreeMap<String, BTreeSet<String>>,
}

/// Every metric family of the operator's `/metrics`, by full name.
struct Registered(BTreeMap<String, Family>);

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
        address: (format!("db-{ordinal}"), 3306),
        server,
        unreachable_passes: 0,
    }
}

/// Builds the real registries and feeds them: a three-server cluster with a primary, a
/// lagging replica and an errant one; every clustering operation, succeeded and failed; a
/// good and a failed reconcile; leadership.
fn registered() -> Registered {
    let metrics = Metrics::new("statecraft-mysql").expect("shared metrics");
    let servers = ServerMetrics::register(&metrics.registry).expect("server metrics");

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

    let operations = [
        Operation::Bootstrap { primary: 0 },
        Operation::MakeWritable { ordinal: 0 },
        Operation::Demote { ordinal: 1 },
        Operation::ConfigureReplica { ordinal: 1, source: 0 },
        Operation::Fence { ordinals: vec![1, 2] },
        Operation::Promote { ordinal: 1, from: 0, received: String::new() },
        Operation::Switchover { from: 0, to: 1 },
        Operation::Relabel { changes: vec![(2, None)] },
    ];
    for op in &operations {
        servers.operation("db", op, true);
        servers.operation("db", op, false);
    }
    metrics.observe_reconcile("mysqlcluster", 0.05, None);
    metrics.observe_reconcile("mysqlcluster", 0.5, Some("KubernetesApiError"));
    metrics.set_leader(true);
    metrics.watch_task("db");
    metrics.task_restarted("db");

    let mut families = BTreeMap::new();
    for mf in metrics.registry.gather() {
        let mut family = Family { histogram: mf.get_field_type() == MetricType::HISTOGRAM, ..Default::default() };
        for m in mf.get_metric() {
            for pair in m.get_label() {
                family.labels.entry(pair.name().to_string()).or_default().insert(pair.value().to_string());
            }
        }
        if family.histogram {
            family.labels.entry("le".into()).or_default();
        }
        families.insert(mf.name().to_string(), family);
    }
    Registered(families)
}

impl Registered {
    /// The registered family a name used in a query refers to (`_bucket`, `_count` and
    /// `_sum` are series of a histogram).
    fn resolve(&self, name: &str) -> Option<(&str, &Family)> {
        if let Some((k, f)) = self.0.get_key_value(name) {
            return Some((k, f));
        }
        ["_bucket", "_count", "_sum"].iter().find_map(|suffix| {
            let base = name.strip_suffix(suffix)?;
            self.0.get_key_value(base).filter(|(_, f)| f.histogram).map(|(k, f)| (k.as_str(), f))
        })
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A metric named in a query, with the label matchers of its selector (`name{...}`).
struct Selector {
    name: String,
    matchers: Vec<(String, String, String)>,
}

/// Splits `a="x", b=~"y|z"` into (label, operator, value).
fn parse_matchers(body: &str) -> Result<Vec<(String, String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let label_end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let label = rest[..label_end].to_string();
        rest = rest[label_end..].trim_start();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .ok_or_else(|| format!("no matcher operator after label {label:?} in {{{body}}}"))?;
        rest = rest[op.len()..].trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'' || *c == '`');
        let Some(quote) = quote else { return Err(format!("unquoted value for label {label:?} in {{{body}}}")) };
        let mut value = String::new();
        let mut chars = rest[1..].char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, c)| c)),
                c if c == quote => {
                    end = Some(i + 2);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.ok_or_else(|| format!("unterminated value for label {label:?} in {{{body}}}"))?;
        out.push((label, op.to_string(), value));
        rest = rest[end..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(out)
}

/// Every `statecraft_mysql_*` selector in `expr`.
fn selectors(expr: &str) -> Result<Vec<Selector>, String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = expr[from..].find(PREFIX).map(|p| p + from) {
        let end = expr[pos..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .map_or(expr.len(), |e| e + pos);
        from = end;
        if expr[..pos].chars().next_back().is_some_and(is_ident) {
            continue; // part of a longer identifier
        }
        let name = expr[pos..end].to_string();
        let mut matchers = Vec::new();
        if expr[end..].starts_with('{') {
            let close = expr[end..].find('}').ok_or_else(|| format!("unclosed selector of {name}"))? + end;
            matchers = parse_matchers(&expr[end + 1..close]).map_err(|e| format!("{name}: {e}"))?;
            from = close + 1;
        }
        out.push(Selector { name, matchers });
    }
    Ok(out)
}

/// The label lists of `by`, `without`, `on`, `ignoring`, `group_left` and `group_right`.
fn grouping_labels(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for keyword in ["by", "without", "on", "ignoring", "group_left", "group_right"] {
        let mut from = 0;
        while let Some(pos) = expr[from..].find(keyword).map(|p| p + from) {
            from = pos + keyword.len();
            if expr[..pos].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let rest = expr[from..].trim_start();
            let Some(list) = rest.strip_prefix('(') else { continue };
            let Some(close) = list.find(')') else { continue };
            out.extend(list[..close].split(',').map(str::trim).filter(|l| !l.is_empty()).map(str::to_string));
        }
    }
    out
}

/// What is wrong with the metrics and labels of one query; `what` names it in messages.
fn check_expr(registered: &Registered, what: &str, expr: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let selectors = match selectors(expr) {
        Ok(s) => s,
        Err(e) => return vec![format!("{what}: cannot read the query: {e}")],
    };
    if selectors.is_empty() {
        problems.push(format!("{what}: uses no {PREFIX}* metric: {expr}"));
    }
    let mut known_labels: BTreeSet<String> = TARGET_LABELS.iter().map(|l| l.to_string()).collect();
    for s in &selectors {
        let Some((family_name, family)) = registered.resolve(&s.name) else {
            problems.push(format!(
                "{what}: metric {} is not registered by the operator (registered: {})",
                s.name,
                registered.0.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
            continue;
        };
        known_labels.extend(family.labels.keys().cloned());
        for (label, op, value) in &s.matchers {
            let Some(values) = family.labels.get(label) else {
                if !TARGET_LABELS.contains(&label.as_str()) {
                    problems.push(format!(
                        "{what}: metric {family_name} has no label {label:?} (its labels: {})",
                        family.labels.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                continue;
            };
            let simple = value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|');
            if CLOSED_LABELS.contains(&label.as_str()) && (op == "=" || op == "=~") && simple {
                for v in value.split('|').filter(|v| !values.contains(*v)) {
                    problems.push(format!(
                        "{what}: {family_name}{{{label}{op}\"{value}\"}}: no series has {label}=\"{v}\" (values: {})",
                        values.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    // With an unknown metric its labels are unknown too: no point judging the grouping.
    let all_known = selectors.iter().all(|s| registered.resolve(&s.name).is_some());
    for label in grouping_labels(expr).into_iter().filter(|_| all_known) {
        if !known_labels.contains(&label) {
            problems.push(format!("{what}: groups or matches on label {label:?}, which none of its metrics has"));
        }
    }
    problems
}

fn workspace_repository() -> String {
    let manifest = read("Cargo.toml");
    manifest
        .lines()
        .find_map(|l| {
            let v = l.trim().strip_prefix("repository")?.trim_start().strip_prefix('=')?.trim();
            Some(v.trim_matches('"').to_string())
        })
        .expect("workspace.package.repository in Cargo.toml")
}

fn yaml_str<'a>(v: &'a serde_yaml::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(serde_yaml::Value::as_str).filter(|s| !s.trim().is_empty())
}

#[test]
fn every_alert_is_labelled_annotated_has_a_runbook_and_uses_registered_metrics() {
    let registered = registered();
    let doc: serde_yaml::Value = serde_yaml::from_str(&read(RULES)).unwrap_or_else(|e| panic!("{RULES}: {e}"));
    assert_eq!(yaml_str(&doc, "apiVersion"), Some("monitoring.coreos.com/v1"), "{RULES}: apiVersion");
    assert_eq!(yaml_str(&doc, "kind"), Some("PrometheusRule"), "{RULES}: kind");
    assert_eq!(doc["metadata"]["name"].as_str(), Some("statecraft-mysql"), "{RULES}: metadata.name");

    let runbook_prefix = format!("{}/blob/main/", workspace_repository());
    let groups = doc["spec"]["groups"].as_sequence().expect("spec.groups is a list");
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for group in groups {
        let rules = group["rules"].as_sequence().expect("every group has a list of rules");
        for rule in rules {
            let Some(alert) = yaml_str(rule, "alert") else {
                problems.push(format!("a rule in group {:?} is not an alert", group["name"]));
                continue;
            };
            let what = format!("alert {alert}");
            if !names.insert(alert.to_string()) {
                problems.push(format!("{what}: defined twice"));
            }
            match rule["labels"]["severity"].as_str() {
                Some("critical" | "warning") => {}
                other => problems.push(format!("{what}: labels.severity is {other:?}, not critical or warning")),
            }
            let annotations = &rule["annotations"];
            for key in ["summary", "description", "runbook_url"] {
                if yaml_str(annotations, key).is_none() {
                    problems.push(format!("{what}: annotations.{key} is missing or empty"));
                }
            }
            if yaml_str(annotations, "description").is_some_and(|d| !d.contains("$labels.")) {
                problems.push(format!("{what}: the description names none of the alert's labels ($labels.…)"));
            }
            if let Some(url) = yaml_str(annotations, "runbook_url") {
                match url.strip_prefix(&runbook_prefix) {
                    None => problems.push(format!("{what}: runbook_url {url} does not start with {runbook_prefix}")),
                    Some(path) => {
                        let expected = format!("{RUNBOOKS}/{alert}.md");
                        if path != expected {
                            problems.push(format!("{what}: runbook_url points to {path}, expected {expected}"));
                        } else if !root().join(path).is_file() {
                            problems.push(format!("{what}: runbook {path} does not exist"));
                        } else if !read(path).starts_with(&format!("# {alert}\n")) {
                            problems
                                .push(format!("{what}: runbook {path} does not start with the heading `# {alert}`"));
                        }
                    }
                }
            }
            match yaml_str(rule, "expr") {
                Some(expr) => problems.extend(check_expr(&registered, &what, expr)),
                None => problems.push(format!("{what}: no expr")),
            }
        }
    }
    assert!(!names.is_empty(), "{RULES} defines no alert");

    // Every runbook belongs to an alert.
    let dir = root().join(RUNBOOKS);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        if path.extension().is_some_and(|e| e == "md") && !names.contains(stem) {
            problems.push(format!("runbook {} belongs to no alert of {RULES}", path.display()));
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
fn every_dashboard_panel_has_a_title_and_uses_registered_metrics() {
    let registered = registered();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD} is not valid JSON: {e}"));
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
    match variable("cluster") {
        Some(v) => {
            let query = v["query"].as_str().or_else(|| v["query"]["query"].as_str()).unwrap_or_default();
            if query.replace(' ', "") != "label_values(statecraft_mysql_cluster_phase,cluster)" {
                problems.push(format!(
                    "variable cluster: query {query:?} is not label_values(statecraft_mysql_cluster_phase, cluster)"
                ));
            }
            problems.extend(check_expr(&registered, "variable cluster", query));
        }
        None => problems.push("no template variable named cluster".into()),
    }

    let panels = panels(&dashboard);
    assert!(!panels.is_empty(), "{DASHBOARD} has no panels");
    let mut ids = BTreeSet::new();
    for (i, panel) in panels.iter().enumerate() {
        let title = panel["title"].as_str().unwrap_or_default();
        let what = format!("panel {title:?} (#{i}, id {})", panel["id"]);
        if title.trim().is_empty() {
            problems.push(format!("{what}: no title"));
        }
        if !ids.insert(panel["id"].to_string()) {
            problems.push(format!("{what}: id used twice"));
        }
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        let exprs: Vec<&str> = targets.iter().filter_map(|t| t["expr"].as_str()).collect();
        if exprs.is_empty() {
            problems.push(format!("{what}: no query"));
        }
        for expr in exprs {
            problems.extend(check_expr(&registered, &what, expr));
        }
    }
    assert!(problems.is_empty(), "{DASHBOARD}:\n  {}", problems.join("\n  "));
}

/// The checks themselves catch what they are for, so a green run means something.
#[test]
fn the_checks_reject_unknown_metrics_labels_and_values() {
    let registered = registered();
    for ok in [
        r#"max by (cluster, member) (statecraft_mysql_member_up{cluster=~"$cluster", namespace="n"}) and on (cluster, member) statecraft_mysql_member_errant"#,
        r#"histogram_quantile(0.9, sum by (controller, le) (rate(statecraft_mysql_reconcile_duration_seconds_bucket[5m])))"#,
        r#"sum by (operation) (rate(statecraft_mysql_clustering_operations_total{result="error", operation=~"fence|failover"}[5m]))"#,
        r#"statecraft_mysql_cluster_phase{phase=~"Stopped|Paused|Initializing|Healthy|Degraded|Failed|Lost"} == 1"#,
    ] {
        assert_eq!(check_expr(&registered, "q", ok), Vec::<String>::new(), "{ok}");
    }
    for (expr, needle) in [
        ("statecraft_mysql_member_upp == 0", "statecraft_mysql_member_upp is not registered"),
        ("statecraft_mysql_member_up_count", "statecraft_mysql_member_up_count is not registered"),
        (r#"statecraft_mysql_member_up{membr="x"}"#, "has no label \"membr\""),
        (r#"statecraft_mysql_member_up{phase="Healthy"}"#, "has no label \"phase\""),
        (r#"statecraft_mysql_cluster_phase{phase=~"Healthy|Healty"}"#, "phase=\"Healty\""),
        (r#"statecraft_mysql_clustering_operations_total{result="failed"}"#, "result=\"failed\""),
        ("max by (clustr) (statecraft_mysql_member_up)", "label \"clustr\""),
        ("up == 0", "uses no statecraft_mysql_* metric"),
    ] {
        let problems = check_expr(&registered, "q", expr);
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "{expr}: expected a problem with {needle:?}, got {problems:?}"
        );
    }
}
