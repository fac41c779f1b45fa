//! The monitoring files an operator ships (a `PrometheusRule` of alerts with their
//! runbooks, a Grafana dashboard) agree with the metrics that really exist.
//!
//! A [`Catalogue`] holds every metric that exists, by the name a query uses (a histogram's
//! `_bucket`, `_sum` and `_count` are names of their own, as in the exposition), with its
//! labels and the values the test's observation gave them. Queries are read with a real
//! PromQL parser (`promql-parser`), and the checks walk its syntax tree:
//!
//! - every vector selector names a metric of the catalogue, and matches only on its labels
//!   (or those its scrape adds); on a *closed* label, whose values the test exercises in
//!   full, an `=`/`=~` matcher names only values that exist (`phase="Healty"` would match
//!   nothing, forever);
//! - every label of `by`/`without`, `on`/`ignoring` and `group_left`/`group_right` is a
//!   label of a metric under that aggregation or operation;
//! - [`Catalogue::check_rules`] and [`Catalogue::check_dashboard`] add the checks of the
//!   files themselves: severities, annotations, runbooks, titles, descriptions, ids and
//!   the dashboard's variables.
//!
//! Each operator's `tests/alerts.rs` feeds the catalogue (its real registries, and for etcd
//! a real etcd's `/metrics`) and names its files; the checks are the same for all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prometheus::proto::MetricType;
use promql_parser::label::{METRIC_NAME, MatchOp, Matcher};
use promql_parser::parser::{self, Expr, VectorSelector};

use crate::statefulset::NAME_LABEL;

/// Labels every scrape adds (Prometheus, Prometheus Operator), whatever the source.
pub const TARGET_LABELS: [&str; 7] = ["job", "instance", "namespace", "pod", "container", "service", "endpoint"];

/// Grafana's interval variables, which stand where PromQL wants a duration; they are read
/// as one before parsing a dashboard's query. Any other `$variable` must be inside a string.
const GRAFANA_DURATIONS: [&str; 4] = ["$__rate_interval", "$__interval", "$__range", "$__auto"];

/// One metric name, where it comes from and its labels with the values seen.
struct Metric {
    source: String,
    labels: BTreeMap<String, BTreeSet<String>>,
}

/// Every metric that exists, and what the checks need to know about labels.
pub struct Catalogue {
    metrics: BTreeMap<String, Metric>,
    /// By source: the labels its scrape adds beyond [`TARGET_LABELS`] (relabelling).
    added: BTreeMap<String, BTreeSet<String>>,
    closed: BTreeSet<String>,
}

/// The alert file to check with [`Catalogue::check_rules`], relative to the root.
pub struct Rules<'a> {
    /// The `PrometheusRule` file.
    pub path: &'a str,
    /// Its `metadata.name`.
    pub name: &'a str,
    /// Every alert's name is CamelCase and starts with this.
    pub alert_prefix: &'a str,
    /// The directory of the runbooks, one `<alert>.md` per alert, none other.
    pub runbooks: &'a str,
    /// The metrics some alert must use (the topics the alerts must cover).
    pub required_metrics: &'a [&'a str],
}

/// The dashboard to check with [`Catalogue::check_dashboard`], relative to the root.
pub struct Dashboard<'a> {
    /// The Grafana dashboard JSON.
    pub path: &'a str,
    /// The metric whose `cluster` label the `cluster` variable lists.
    pub cluster_metric: &'a str,
    /// A source every metric of which must be on some panel.
    pub shows_every_metric_of: Option<&'a str>,
}

impl Catalogue {
    /// An empty catalogue; `closed_labels` are those whose values the test's observation
    /// exercises in full.
    pub fn new(closed_labels: &[&str]) -> Self {
        Catalogue {
            metrics: BTreeMap::new(),
            added: BTreeMap::new(),
            closed: closed_labels.iter().map(|l| l.to_string()).collect(),
        }
    }

    /// Declares that the scrape of `source` adds `labels` (beyond [`TARGET_LABELS`]).
    pub fn scrape_adds(&mut self, source: &str, labels: &[&str]) -> &mut Self {
        self.added.entry(source.to_string()).or_default().extend(labels.iter().map(|l| l.to_string()));
        self
    }

    /// Adds one series of `source` (a name as in the exposition, and its labels).
    pub fn add_series<'a>(&mut self, source: &str, name: &str, labels: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let metric = self
            .metrics
            .entry(name.to_string())
            .or_insert_with(|| Metric { source: source.to_string(), labels: BTreeMap::new() });
        for (k, v) in labels {
            metric.labels.entry(k.to_string()).or_default().insert(v.to_string());
        }
    }

    /// Adds every series an operator's metrics export (its own and every namespace's), by
    /// the names its exposition has.
    pub fn add_metrics(&mut self, source: &str, metrics: &crate::metrics::Metrics) {
        for mf in metrics.gather() {
            let name = mf.name();
            let suffixed = |suffix: &str| format!("{name}{suffix}");
            let names = match mf.get_field_type() {
                MetricType::HISTOGRAM => {
                    vec![(suffixed("_bucket"), Some("le")), (suffixed("_sum"), None), (suffixed("_count"), None)]
                }
                MetricType::SUMMARY => {
                    vec![(name.to_string(), Some("quantile")), (suffixed("_sum"), None), (suffixed("_count"), None)]
                }
                _ => vec![(name.to_string(), None)],
            };
            for (series, extra) in names {
                self.add_series(source, &series, []);
                for m in mf.get_metric() {
                    let labels = m.get_label().iter().map(|p| (p.name(), p.value()));
                    self.add_series(source, &series, labels.chain(extra.map(|l| (l, ""))));
                }
            }
        }
    }

    /// The labels a selector of `metric` may match on: its own and those its scrape adds.
    fn known_labels(&self, metric: &Metric) -> BTreeSet<String> {
        let mut all: BTreeSet<String> = metric.labels.keys().cloned().collect();
        all.extend(TARGET_LABELS.iter().map(|l| l.to_string()));
        all.extend(self.added.get(&metric.source).into_iter().flatten().cloned());
        all
    }

    fn sources(&self) -> String {
        let sources: BTreeSet<&str> = self.metrics.values().map(|m| m.source.as_str()).collect();
        sources.into_iter().collect::<Vec<_>>().join(" or ")
    }

    /// What is wrong with the metrics and labels of one query; `what` names it in messages.
    pub fn check_expr(&self, what: &str, expr: &str) -> Vec<String> {
        let ast = match parser::parse(expr) {
            Ok(ast) => ast,
            Err(e) => return vec![format!("{what}: cannot read the query: {e}: {expr}")],
        };
        let mut problems = Vec::new();
        let selectors = self.walk(what, &ast, &mut problems);
        if selectors.is_empty() {
            problems.push(format!("{what}: uses no metric: {expr}"));
        }
        for s in selectors {
            problems.extend(self.check_selector(what, s));
        }
        problems
    }

    /// The metric names a query uses.
    pub fn metrics_used(expr: &str) -> Result<BTreeSet<String>, String> {
        let ast = parser::parse(expr)?;
        let mut used = BTreeSet::new();
        collect(&ast, &mut |s| used.extend(selector_name(s).map(str::to_string)));
        Ok(used)
    }

    /// The selectors under `expr`; judges the grouping labels of every aggregation and
    /// binary operation against the metrics under it.
    fn walk<'e>(&self, what: &str, expr: &'e Expr, problems: &mut Vec<String>) -> Vec<&'e VectorSelector> {
        let mut selectors = Vec::new();
        let mut grouping: Vec<&str> = Vec::new();
        match expr {
            Expr::Aggregate(a) => {
                selectors = self.walk(what, &a.expr, problems);
                if let Some(param) = &a.param {
                    selectors.extend(self.walk(what, param, problems));
                }
                grouping.extend(a.modifier.iter().flat_map(|m| m.labels().labels.iter().map(String::as_str)));
            }
            Expr::Binary(b) => {
                selectors = self.walk(what, &b.lhs, problems);
                selectors.extend(self.walk(what, &b.rhs, problems));
                if let Some(m) = &b.modifier {
                    grouping.extend(m.matching.iter().flat_map(|m| m.labels().labels.iter().map(String::as_str)));
                    grouping.extend(m.card.labels().into_iter().flat_map(|l| l.labels.iter().map(String::as_str)));
                }
            }
            Expr::Unary(u) => selectors = self.walk(what, &u.expr, problems),
            Expr::Paren(p) => selectors = self.walk(what, &p.expr, problems),
            Expr::Subquery(s) => selectors = self.walk(what, &s.expr, problems),
            Expr::Call(c) => {
                for arg in &c.args.args {
                    selectors.extend(self.walk(what, arg, problems));
                }
            }
            Expr::VectorSelector(vs) => selectors.push(vs),
            Expr::MatrixSelector(ms) => selectors.push(&ms.vs),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
        }
        if grouping.is_empty() {
            return selectors;
        }
        // With an unknown metric its labels are unknown too: no point judging the grouping.
        let metrics: Option<Vec<&Metric>> =
            selectors.iter().map(|s| selector_name(s).and_then(|n| self.metrics.get(n))).collect();
        if let Some(metrics) = metrics {
            let known: BTreeSet<String> = metrics.iter().flat_map(|m| self.known_labels(m)).collect();
            for label in grouping.into_iter().filter(|l| !known.contains(*l)) {
                problems.push(format!("{what}: groups or matches on label {label:?}, which none of its metrics has"));
            }
        }
        selectors
    }

    fn check_selector(&self, what: &str, s: &VectorSelector) -> Vec<String> {
        let Some(name) = selector_name(s) else {
            return vec![format!("{what}: a selector without a metric name: {s}")];
        };
        let Some(metric) = self.metrics.get(name) else {
            return vec![format!("{what}: metric {name} is not registered by {}", self.sources())];
        };
        let known = self.known_labels(metric);
        let mut problems = Vec::new();
        let matchers = s.matchers.matchers.iter().chain(s.matchers.or_matchers.iter().flatten());
        for m in matchers.filter(|m| m.name != METRIC_NAME) {
            let label = &m.name;
            if !known.contains(label) {
                problems.push(format!(
                    "{what}: metric {name} has no label {label:?} (its labels: {})",
                    metric.labels.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
                continue;
            }
            let Some(values) = metric.labels.get(label).filter(|_| self.closed.contains(label)) else { continue };
            let positive = matches!(m.op, MatchOp::Equal | MatchOp::Re(_));
            let simple = m.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|');
            if positive && simple {
                for v in m.value.split('|').filter(|v| !values.contains(*v)) {
                    problems.push(format!(
                        "{what}: {name}{{{}}}: no series has {label}=\"{v}\" (values: {})",
                        matcher_text(m),
                        values.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
        problems
    }

    /// The metrics of `source` that no query in `used` shows (a histogram's `_sum` and
    /// `_count` are shown by its `_bucket`).
    pub fn not_shown(&self, source: &str, used: &BTreeSet<String>) -> Vec<String> {
        let shown_as_histogram = |name: &str| {
            name.strip_suffix("_sum")
                .or_else(|| name.strip_suffix("_count"))
                .is_some_and(|base| used.contains(&format!("{base}_bucket")))
        };
        self.metrics
            .iter()
            .filter(|(name, m)| m.source == source && !used.contains(*name) && !shown_as_histogram(name))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// What is wrong with a `PrometheusRule` of alerts and their runbooks.
    pub fn check_rules(&self, root: &Path, rules: &Rules) -> Vec<String> {
        let Rules { path, name, alert_prefix, runbooks, required_metrics } = *rules;
        let doc: serde_norway::Value =
            serde_norway::from_str(&read(root, path)).unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}"));
        let mut problems = Vec::new();
        for (key, value, expected) in [
            ("apiVersion", yaml_str(&doc, "apiVersion"), "monitoring.coreos.com/v1"),
            ("kind", yaml_str(&doc, "kind"), "PrometheusRule"),
            ("metadata.name", yaml_str(&doc["metadata"], "name"), name),
        ] {
            if value != Some(expected) {
                problems.push(format!("{key} is {value:?}, expected {expected}"));
            }
        }
        let runbook_prefix = format!("{}/blob/main/", workspace_repository(root));
        let mut alerts = BTreeSet::new();
        let mut severities = BTreeSet::new();
        let mut used = BTreeSet::new();
        let groups = doc["spec"]["groups"].as_sequence().cloned().unwrap_or_default();
        if groups.is_empty() {
            problems.push("spec.groups is empty or not a list".into());
        }
        for group in &groups {
            for rule in group["rules"].as_sequence().into_iter().flatten() {
                let Some(alert) = yaml_str(rule, "alert") else {
                    problems.push(format!("a rule in group {:?} is not an alert", group["name"]));
                    continue;
                };
                let what = format!("alert {alert}");
                if !alert.starts_with(alert_prefix) || !alert.chars().all(|c| c.is_ascii_alphanumeric()) {
                    problems.push(format!("{what}: not a CamelCase name starting with {alert_prefix}"));
                }
                if !alerts.insert(alert.to_string()) {
                    problems.push(format!("{what}: defined twice"));
                }
                match rule["labels"]["severity"].as_str() {
                    Some(s @ ("critical" | "warning")) => {
                        severities.insert(s);
                    }
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
                    problems.extend(check_runbook(root, &what, alert, url, &runbook_prefix, runbooks));
                }
                match yaml_str(rule, "expr") {
                    Some(expr) => {
                        problems.extend(self.check_expr(&what, expr));
                        used.extend(Self::metrics_used(expr).unwrap_or_default());
                    }
                    None => problems.push(format!("{what}: no expr")),
                }
            }
        }
        if alerts.is_empty() {
            problems.push("no alert is defined".into());
        }
        if severities != BTreeSet::from(["critical", "warning"]) {
            problems.push(format!("severities used: {severities:?}; both critical and warning should be"));
        }
        let dir = root.join(runbooks);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let file = entry.expect("directory entry").path();
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            if file.extension().is_some_and(|e| e == "md") && !alerts.contains(stem) {
                problems.push(format!("runbook {} belongs to no alert", file.display()));
            }
        }
        for metric in required_metrics.iter().filter(|m| !used.contains(**m)) {
            problems.push(format!("no alert uses {metric}"));
        }
        problems
    }

    /// What is wrong with a Grafana dashboard.
    pub fn check_dashboard(&self, root: &Path, spec: &Dashboard) -> Vec<String> {
        let path = spec.path;
        let dashboard: serde_json::Value =
            serde_json::from_str(&read(root, path)).unwrap_or_else(|e| panic!("{path} is not valid JSON: {e}"));
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
            Some(query) => problems.extend(self.check_label_values("variable cluster", query, spec.cluster_metric)),
            None => problems.push("no template variable named cluster with a query".into()),
        }

        let panels = panels(&dashboard);
        if panels.is_empty() {
            problems.push("no panels".into());
        }
        let mut ids = BTreeSet::new();
        let mut used = BTreeSet::new();
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
            if panel["description"].as_str().is_none_or(|d| d.trim().is_empty()) {
                problems.push(format!("{what}: no description"));
            }
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            let exprs: Vec<String> = targets.iter().filter_map(|t| t["expr"].as_str()).map(grafana_to_promql).collect();
            if exprs.is_empty() {
                problems.push(format!("{what}: no query"));
            }
            for expr in exprs {
                problems.extend(self.check_expr(&what, &expr));
                used.extend(Self::metrics_used(&expr).unwrap_or_default());
            }
        }
        if let Some(source) = spec.shows_every_metric_of {
            problems.extend(self.not_shown(source, &used).into_iter().map(|m| format!("metric {m} is on no panel")));
        }
        problems
    }

    /// A Grafana variable's `label_values(<selector>, <label>)`: the selector is a query
    /// of `metric`, and the label one of its labels.
    pub fn check_label_values(&self, what: &str, query: &str, metric: &str) -> Vec<String> {
        let args = query.trim().strip_prefix("label_values(").and_then(|q| q.strip_suffix(')'));
        let Some((selector, label)) = args.and_then(|a| a.rsplit_once(',')) else {
            return vec![format!("{what}: {query:?} is not label_values(<selector>, <label>)")];
        };
        let (selector, label) = (selector.trim(), label.trim());
        let mut problems = self.check_expr(what, selector);
        match Self::metrics_used(selector) {
            Ok(used) if used == BTreeSet::from([metric.to_string()]) => {}
            Ok(used) => problems.push(format!("{what}: lists the values of {used:?}, expected {metric}")),
            Err(_) => {} // reported by check_expr
        }
        let known = self.metrics.get(metric).map(|m| self.known_labels(m)).unwrap_or_default();
        if label != "cluster" || !known.contains(label) {
            problems.push(format!("{what}: lists label {label:?}, expected cluster, a label of {metric}"));
        }
        problems
    }
}

/// A dashboard query as PromQL: Grafana's interval variables read as a duration.
fn grafana_to_promql(expr: &str) -> String {
    GRAFANA_DURATIONS.iter().fold(expr.to_string(), |e, v| e.replace(v, "5m"))
}

/// Calls `f` on every selector under `expr`.
fn collect<'e>(expr: &'e Expr, f: &mut impl FnMut(&'e VectorSelector)) {
    match expr {
        Expr::Aggregate(a) => {
            collect(&a.expr, f);
            if let Some(p) = &a.param {
                collect(p, f);
            }
        }
        Expr::Binary(b) => {
            collect(&b.lhs, f);
            collect(&b.rhs, f);
        }
        Expr::Unary(u) => collect(&u.expr, f),
        Expr::Paren(p) => collect(&p.expr, f),
        Expr::Subquery(s) => collect(&s.expr, f),
        Expr::Call(c) => c.args.args.iter().for_each(|a| collect(a, f)),
        Expr::VectorSelector(vs) => f(vs),
        Expr::MatrixSelector(ms) => f(&ms.vs),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The metric a selector names, as `name{…}` or `{__name__="name"}`.
fn selector_name(s: &VectorSelector) -> Option<&str> {
    s.name.as_deref().or_else(|| {
        s.matchers.matchers.iter().find(|m| m.name == METRIC_NAME && m.op == MatchOp::Equal).map(|m| m.value.as_str())
    })
}

fn matcher_text(m: &Matcher) -> String {
    format!("{}{}\"{}\"", m.name, m.op, m.value)
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Labels a members' PodMonitor must add to the operand's own series, so that the alerts
/// and the dashboard can join them to the operator's.
pub const MEMBER_LABELS: [&str; 2] = ["cluster", "member"];

/// What is wrong with the PodMonitors of `path` (relative to `root`): there must be one
/// selecting the operator's pods (`app.kubernetes.io/name` = `operator`) and one selecting
/// the operand's (= `operand`), each scraping port `metrics` at `/metrics`, and the
/// operand's must set [`MEMBER_LABELS`]: `cluster` from the pod label `instance_label`,
/// `member` from the pod's name.
pub fn pod_monitor_problems(
    root: &Path,
    path: &str,
    operator: &str,
    operand: &str,
    instance_label: &str,
) -> Vec<String> {
    let text = read(root, path);
    let mut docs = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        match <serde_norway::Value as serde::Deserialize>::deserialize(doc) {
            Ok(v) => docs.push(v),
            Err(e) => return vec![format!("{path} is not valid YAML: {e}")],
        }
    }
    let by_app = |app: &str| {
        docs.iter().find(|d| {
            d["kind"] == "PodMonitor" && d["spec"]["selector"]["matchLabels"][NAME_LABEL].as_str() == Some(app)
        })
    };
    let mut problems = Vec::new();
    for app in [operator, operand] {
        let Some(monitor) = by_app(app) else {
            problems.push(format!("{path}: no PodMonitor selects {NAME_LABEL}={app}"));
            continue;
        };
        let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
        if endpoint["port"] != "metrics" || endpoint["path"] != "/metrics" {
            problems.push(format!("{path}: the PodMonitor of {app} does not scrape port metrics at /metrics"));
        }
    }
    let Some(members) = by_app(operand) else { return problems };
    let relabelings =
        members["spec"]["podMetricsEndpoints"][0]["relabelings"].as_sequence().cloned().unwrap_or_default();
    let source_of = |target: &str| {
        relabelings
            .iter()
            .find(|r| r["targetLabel"] == target)
            .and_then(|r| r["sourceLabels"][0].as_str().map(str::to_string))
    };
    let pod_label =
        format!("__meta_kubernetes_pod_label_{}", instance_label.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    for (label, source) in [(MEMBER_LABELS[0], pod_label), (MEMBER_LABELS[1], "__meta_kubernetes_pod_name".to_string())]
    {
        if source_of(label) != Some(source.clone()) {
            problems.push(format!("{path}: the PodMonitor of {operand} does not set {label} from {source}"));
        }
    }
    problems
}

fn yaml_str<'a>(v: &'a serde_norway::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(serde_norway::Value::as_str).filter(|s| !s.trim().is_empty())
}

/// `workspace.package.repository` of the root's Cargo.toml: runbook URLs point into it.
fn workspace_repository(root: &Path) -> String {
    read(root, "Cargo.toml")
        .lines()
        .find_map(|l| {
            let v = l.trim().strip_prefix("repository")?.trim_start().strip_prefix('=')?.trim();
            Some(v.trim_matches('"').to_string())
        })
        .expect("workspace.package.repository in Cargo.toml")
}

/// An alert's runbook is `<runbooks>/<alert>.md` in the repository, headed `# <alert>`.
fn check_runbook(root: &Path, what: &str, alert: &str, url: &str, prefix: &str, runbooks: &str) -> Option<String> {
    let expected = format!("{runbooks}/{alert}.md");
    let Some(path) = url.strip_prefix(prefix) else {
        return Some(format!("{what}: runbook_url {url} does not start with {prefix}"));
    };
    if path != expected {
        return Some(format!("{what}: runbook_url points to {path}, expected {expected}"));
    }
    let file: PathBuf = root.join(path);
    match std::fs::read_to_string(&file) {
        Ok(text) if text.starts_with(&format!("# {alert}\n")) => None,
        Ok(_) => Some(format!("{what}: runbook {path} does not start with the heading `# {alert}`")),
        Err(e) => Some(format!("{what}: runbook {path}: {e}")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const MONITORS: &str = r#"
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: op}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: op}}
  podMetricsEndpoints: [{port: metrics, path: /metrics}]
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: op-members}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: db}}
  podMetricsEndpoints:
    - port: metrics
      path: /metrics
      relabelings:
        - {sourceLabels: [__meta_kubernetes_pod_label_app_kubernetes_io_instance], targetLabel: cluster}
        - {sourceLabels: [__meta_kubernetes_pod_name], targetLabel: member}
"#;

    fn problems(text: &str) -> Vec<String> {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("m.yaml"), text).expect("written");
        pod_monitor_problems(dir.path(), "m.yaml", "op", "db", "app.kubernetes.io/instance")
    }

    #[test]
    fn pod_monitors_must_scrape_both_and_label_the_members() {
        assert_eq!(problems(MONITORS), Vec::<String>::new());
        let no_member = MONITORS.replace("targetLabel: member", "targetLabel: pod_name");
        assert!(problems(&no_member).iter().any(|p| p.contains("does not set member")), "{:?}", problems(&no_member));
        let other_port = MONITORS.replacen("port: metrics", "port: http", 1);
        assert!(problems(&other_port).iter().any(|p| p.contains("PodMonitor of op does not scrape")));
        let no_operand = MONITORS.replace("app.kubernetes.io/name: db", "app.kubernetes.io/name: other");
        assert!(problems(&no_operand).iter().any(|p| p.contains("no PodMonitor selects app.kubernetes.io/name=db")));
    }
}
