//! Checks of what makes an operator observable: metrics endpoint, alert rules with
//! severities and runbooks, the right to emit Events, dashboards.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::crd::spec_fields;
use super::rbac::{grants, operator_roles};
use super::{CheckResult, cap, plural, str_list};
use crate::manifests::{self, Manifests, Object};

const SEVERITIES: &[&str] = &["critical", "warning", "info"];

/// CRD fields through which users ask the operator for monitors of the operand.
const METRICS_FIELDS: &[&str] = &[
    "metrics",
    "metricsConfig",
    "monitoring",
    "serviceMonitor",
    "podMonitor",
    "prometheus",
    "exporter",
    "metricsExporter",
    "kafkaExporter",
];

/// The operator's right to create `resource` of `group` (objects it makes at run time), as a
/// form for a finding: `the operator may create prometheusrules`.
fn may_create(install: &[Object], group: &str, resources: &[&str]) -> Option<String> {
    let roles = operator_roles(install);
    let found: Vec<&str> = resources.iter().copied().filter(|r| grants(&roles, &[group], r, &["create"])).collect();
    (!found.is_empty()).then(|| format!("the operator may create {}", found.join(" and ")))
}
/// CRD fields through which users ask the operator for alert rules.
const ALERT_FIELDS: &[&str] = &["prometheusRule", "prometheusRules", "alerts", "alertRules", "alerting"];
/// CRD fields through which users ask the operator for dashboards.
const DASHBOARD_FIELDS: &[&str] = &["grafanaDashboard", "grafanaDashboards", "dashboard", "dashboards"];

pub(super) fn checks(install: &[Object], shipped: &Manifests, runbook_root: Option<&Path>) -> Vec<CheckResult> {
    let mut out = vec![metrics(install)];
    out.extend(alerts(install, runbook_root));
    out.push(events(install));
    out.push(dashboards(install, shipped));
    out
}

/// Events: the operator's RBAC is complete in a bundle, so no right to create Events is
/// positive evidence that it emits none.
fn events(install: &[Object]) -> CheckResult {
    let roles = operator_roles(install);
    if roles.is_empty() {
        CheckResult::not_assessable("events.rbac", "no Role or ClusterRole ships for the operator")
    } else if grants(&roles, &["", "events.k8s.io"], "events", &["create"]) {
        CheckResult::new("events.rbac", "create on events is granted", Vec::new())
    } else {
        CheckResult::fail("events.rbac", "no Role of the operator grants create on events (core or events.k8s.io)")
    }
}

fn dashboards(install: &[Object], shipped: &Manifests) -> CheckResult {
    // Dashboards among the CSV's examples are in the install objects only.
    let from_examples = install.iter().skip(shipped.objects.len()).flat_map(manifests::dashboards_in);
    let dashboards: Vec<_> =
        shipped.dashboards.iter().cloned().chain(from_examples).filter(|d| d.panels > 0 || !d.embedded).collect();
    let mut forms: Vec<String> = dashboards
        .iter()
        .map(|d| {
            if d.embedded {
                format!("\"{}\" ({} panels, {})", d.title, d.panels, d.source)
            } else {
                format!("GrafanaDashboard {} ({}, referenced)", d.title, d.source)
            }
        })
        .collect();
    forms.extend(spec_fields(install, DASHBOARD_FIELDS));
    forms.extend(may_create(install, "grafana.integreatly.org", &["grafanadashboards"]));
    if forms.is_empty() {
        CheckResult::not_assessable(
            "dashboard.present",
            "no Grafana dashboard among the manifests or examples, and no CRD field for one",
        )
    } else {
        CheckResult::new("dashboard.present", forms.join("; "), Vec::new())
    }
}

/// Whether a command-line argument or variable turns on a metrics endpoint
/// (`--metrics-bind-address=:8080`, `--metrics-addr`, `METRICS_PORT`, not `=0`).
fn metrics_switch(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    lower.contains("metrics") && !lower.ends_with("=0") && !lower.ends_with("=false")
}

/// Metrics in the forms operators expose them: a container port named for metrics, a
/// `--metrics-*` flag or `*METRICS*` variable, `prometheus.io/scrape`, a Service whose name
/// or ports say metrics, a PodMonitor/ServiceMonitor (shipped or among the examples), or
/// CRD fields through which the operator creates monitors for the operand. None of these is
/// "not shown", not a contradiction: an operator may serve metrics without saying so.
fn metrics(install: &[Object]) -> CheckResult {
    let mut forms: Vec<String> = install
        .iter()
        .filter(|o| o.is("monitoring.coreos.com", "PodMonitor") || o.is("monitoring.coreos.com", "ServiceMonitor"))
        .map(Object::describe)
        .collect();
    for d in install.iter().filter(|o| o.is("apps", "Deployment")) {
        let template = &d.value["spec"]["template"];
        if template["metadata"]["annotations"]["prometheus.io/scrape"] == "true" {
            forms.push(format!("{} (prometheus.io/scrape)", d.describe()));
        }
        for c in template["spec"]["containers"].as_array().into_iter().flatten() {
            for p in c["ports"].as_array().into_iter().flatten() {
                if let Some(name) = p["name"].as_str().filter(|n| n.contains("metrics") || n.contains("prom")) {
                    forms.push(format!("{} port {name}", d.describe()));
                }
            }
            let args = str_list(&c["args"]).into_iter().chain(str_list(&c["command"]));
            if let Some(flag) = args.into_iter().find(|a| a.starts_with("--") && metrics_switch(a)) {
                forms.push(format!("{} flag {flag}", d.describe()));
            }
            let env = c["env"].as_array().into_iter().flatten();
            if let Some(e) = env.into_iter().find(|e| {
                e["name"].as_str().is_some_and(|n| n.to_ascii_uppercase().contains("METRICS"))
                    && metrics_switch(&format!("metrics={}", e["value"].as_str().unwrap_or_default()))
            }) {
                forms.push(format!("{} variable {}", d.describe(), e["name"].as_str().unwrap_or_default()));
            }
        }
    }
    for svc in install.iter().filter(|o| o.is("", "Service")) {
        let port_named = svc.value["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"].as_str().is_some_and(|n| n.contains("metrics")));
        if port_named || svc.name().contains("metrics") {
            forms.push(svc.describe());
        }
    }
    forms.extend(spec_fields(install, METRICS_FIELDS));
    forms.extend(may_create(install, "monitoring.coreos.com", &["servicemonitors", "podmonitors"]));
    if forms.is_empty() {
        return CheckResult::not_assessable(
            "metrics.endpoint",
            "no metrics port, flag or variable, no prometheus.io/scrape, no metrics Service or monitor, no CRD field for monitors",
        );
    }
    CheckResult::new("metrics.endpoint", forms.join("; "), Vec::new())
}

struct Alert<'a> {
    rule_object: &'a Object,
    name: &'a str,
    rule: &'a Value,
}

fn alerts(install: &[Object], runbook_root: Option<&Path>) -> Vec<CheckResult> {
    let rule_objects: Vec<&Object> =
        install.iter().filter(|o| o.is("monitoring.coreos.com", "PrometheusRule")).collect();
    let alerts: Vec<Alert<'_>> = rule_objects
        .iter()
        .flat_map(|o| {
            o.value["spec"]["groups"].as_array().into_iter().flatten().flat_map(move |g| {
                g["rules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(move |r| Some(Alert { rule_object: o, name: r["alert"].as_str()?, rule: r }))
            })
        })
        .collect();
    if alerts.is_empty() {
        let mut fields = spec_fields(install, ALERT_FIELDS);
        fields.extend(may_create(install, "monitoring.coreos.com", &["prometheusrules"]));
        let rules = if rule_objects.is_empty() {
            "no PrometheusRule among the manifests or examples".to_string()
        } else {
            format!("{} without alerting rules", plural(rule_objects.len(), "PrometheusRule", "PrometheusRules"))
        };
        if !fields.is_empty() {
            let why = format!("{rules}; alert rules made at run time: {}", fields.join(", "));
            let later = "the alert rules are created at run time";
            return vec![
                CheckResult::new("alerts.present", why, Vec::new()),
                CheckResult::not_assessable("alerts.severity", later),
                CheckResult::not_assessable("alerts.runbooks", later),
            ];
        }
        let why = format!("{rules}, no CRD field for alert rules, no right to create them");
        return vec![
            CheckResult::not_assessable("alerts.present", why.clone()),
            CheckResult::not_assessable("alerts.severity", why.clone()),
            CheckResult::not_assessable("alerts.runbooks", why),
        ];
    }
    let count = |sev: &str| alerts.iter().filter(|a| a.rule["labels"]["severity"] == sev).count();
    let summary = format!(
        "{} in {} ({} critical, {} warning, {} info)",
        plural(alerts.len(), "alert", "alerts"),
        plural(rule_objects.len(), "PrometheusRule", "PrometheusRules"),
        count("critical"),
        count("warning"),
        count("info")
    );
    let describe = |a: &Alert<'_>| format!("alert {} in {}", a.name, a.rule_object.describe());

    let mut severity = Vec::new();
    let mut runbooks = Vec::new();
    let mut resolved = 0;
    for a in &alerts {
        match a.rule["labels"]["severity"].as_str() {
            Some(s) if SEVERITIES.contains(&s) => {}
            Some(s) => severity.push(format!("{}: severity {s:?} is not critical, warning or info", describe(a))),
            None => severity.push(format!("{}: no severity label", describe(a))),
        }
        match a.rule["annotations"]["runbook_url"].as_str().filter(|u| !u.trim().is_empty()) {
            None => runbooks.push(format!("{}: no runbook_url annotation", describe(a))),
            Some(url) => {
                if let (Some(root), Some(path)) = (runbook_root, repository_path(url)) {
                    if root.join(&path).is_file() {
                        resolved += 1;
                    } else {
                        runbooks.push(format!("{}: runbook {} does not exist", describe(a), path.display()));
                    }
                }
            }
        }
    }
    let runbook_detail = match runbook_root {
        Some(root) => format!("{summary}; {resolved} runbooks found under {}", root.display()),
        None => format!("{summary}; links not followed"),
    };
    vec![
        CheckResult::new("alerts.present", summary.clone(), Vec::new()),
        CheckResult::new("alerts.severity", summary, cap(severity)),
        CheckResult::new("alerts.runbooks", runbook_detail, cap(runbooks)),
    ]
}

/// The repository path a runbook link points at: the part after `/blob/<ref>/` or
/// `/tree/<ref>/` of a forge URL, or a relative path. Other URLs (wikis) are not followed.
fn repository_path(url: &str) -> Option<PathBuf> {
    let url = url.split(['#', '?']).next().unwrap_or(url);
    if !url.contains("://") {
        return Some(PathBuf::from(url.trim_start_matches("./")));
    }
    for marker in ["/blob/", "/tree/"] {
        if let Some((_, rest)) = url.split_once(marker) {
            let (_, path) = rest.split_once('/')?;
            return Some(PathBuf::from(path));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::CheckStatus;
    use super::*;
    use serde_json::json;

    fn rules(rules: Value) -> Object {
        Object::built(
            json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": {"name": "r"},
                   "spec": {"groups": [{"name": "g", "rules": rules}]}}),
            "rules.yaml",
        )
    }

    fn by_id(results: &[CheckResult], id: &str) -> CheckResult {
        results.iter().find(|r| r.id == id).unwrap().clone()
    }

    #[test]
    fn runbook_links_must_resolve_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("docs/runbooks")).unwrap();
        std::fs::write(dir.path().join("docs/runbooks/Down.md"), "# Down").unwrap();
        let objects = [rules(json!([
            {"alert": "Down", "expr": "up == 0", "labels": {"severity": "critical"},
             "annotations": {"runbook_url": "https://git.example/org/repo/blob/main/docs/runbooks/Down.md"}},
            {"alert": "Slow", "expr": "x > 1", "labels": {"severity": "warning"},
             "annotations": {"runbook_url": "https://git.example/org/repo/blob/main/docs/runbooks/Slow.md#why"}},
            {"record": "job:x:sum", "expr": "sum(x)"},
        ]))];
        let results = alerts(&objects, Some(dir.path()));
        assert_eq!(
            by_id(&results, "alerts.present").detail,
            "2 alerts in 1 PrometheusRule (1 critical, 1 warning, 0 info)"
        );
        assert_eq!(by_id(&results, "alerts.severity").status, CheckStatus::Pass);
        let runbooks = by_id(&results, "alerts.runbooks");
        assert_eq!(
            runbooks.findings,
            ["alert Slow in PrometheusRule r (rules.yaml:1): runbook docs/runbooks/Slow.md does not exist"]
        );
        // Without a root only the presence of a link counts.
        assert_eq!(by_id(&alerts(&objects, None), "alerts.runbooks").status, CheckStatus::Pass);
    }

    #[test]
    fn alerts_without_severity_or_runbook_fail() {
        let objects =
            [rules(json!([{"alert": "X", "expr": "1", "labels": {"severity": "page"}}, {"alert": "Y", "expr": "1"}]))];
        let results = alerts(&objects, None);
        assert_eq!(by_id(&results, "alerts.severity").findings.len(), 2);
        assert_eq!(by_id(&results, "alerts.runbooks").findings.len(), 2);
        // No rules: not shown (the operator may create them), not failed.
        let none = alerts(&[], None);
        let present = by_id(&none, "alerts.present");
        assert_eq!(present.status, CheckStatus::NotAssessable);
        assert!(present.detail.starts_with("no PrometheusRule among the manifests or examples"), "{}", present.detail);
        assert_eq!(by_id(&none, "alerts.runbooks").status, CheckStatus::NotAssessable);
    }

    fn crd_with_spec(props: Value) -> Object {
        Object::built(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "dbs.example.com"},
                   "spec": {"group": "example.com", "versions": [{"name": "v1", "served": true, "schema": {"openAPIV3Schema": {
                       "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}}),
            "crd.yaml",
        )
    }

    #[test]
    fn alert_rules_the_operator_creates_from_its_crd_are_alerts() {
        let crd = crd_with_spec(
            json!({"monitoring": {"type": "object", "properties": {"prometheusRule": {"type": "object"}}}}),
        );
        let results = alerts(&[crd], None);
        let present = by_id(&results, "alerts.present");
        assert_eq!(present.status, CheckStatus::Pass);
        assert!(present.detail.contains("CRD dbs.example.com: .spec.monitoring.prometheusRule"), "{}", present.detail);
        assert_eq!(by_id(&results, "alerts.severity").status, CheckStatus::NotAssessable);
    }

    /// The forms real operators expose metrics in.
    #[test]
    fn metrics_are_recognised_in_every_form() {
        let deployment = |container: Value| {
            Object::built(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"},
                       "spec": {"template": {"spec": {"containers": [container]}}}}),
                "op.yaml",
            )
        };
        let status = |objects: &[Object]| metrics(objects).status;
        assert_eq!(
            status(&[deployment(json!({"name": "m", "ports": [{"name": "http", "containerPort": 80}]}))]),
            CheckStatus::NotAssessable
        );
        assert_eq!(
            status(&[deployment(json!({"name": "m", "args": ["--metrics-bind-address=:8443"]}))]),
            CheckStatus::Pass
        );
        assert_eq!(
            status(&[deployment(json!({"name": "m", "args": ["--metrics-bind-address=0"]}))]),
            CheckStatus::NotAssessable
        );
        assert_eq!(
            status(&[deployment(json!({"name": "m", "ports": [{"name": "metrics", "containerPort": 8080}]}))]),
            CheckStatus::Pass
        );
        let service = Object::built(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "controller-manager-metrics-service"},
                   "spec": {"ports": [{"name": "https", "port": 8443}]}}),
            "svc.yaml",
        );
        assert_eq!(status(&[service]), CheckStatus::Pass);
        let crd = crd_with_spec(json!({"metrics": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}}));
        assert_eq!(metrics(&[crd]).detail, "CRD dbs.example.com: .spec.metrics");
    }

    #[test]
    fn events_need_the_right_to_create_them_when_rbac_ships() {
        assert_eq!(events(&[]).status, CheckStatus::NotAssessable);
        let role = Object::built(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "op"},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            "role.yaml",
        );
        assert_eq!(events(&[role]).status, CheckStatus::Fail);
    }

    #[test]
    fn repository_paths_of_runbook_links() {
        assert_eq!(repository_path("https://h/o/r/blob/main/docs/a.md"), Some("docs/a.md".into()));
        assert_eq!(repository_path("https://h/o/r/tree/v1/docs/a.md?plain=1"), Some("docs/a.md".into()));
        assert_eq!(repository_path("./docs/a.md"), Some("docs/a.md".into()));
        assert_eq!(repository_path("https://wiki.example/Runbook"), None);
    }
}
