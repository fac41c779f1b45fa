//! Checks of what makes an operator observable: metrics endpoint, alert rules with
//! severities and runbooks, the right to emit Events, dashboards.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::rbac::{grants, operator_roles};
use super::{CheckResult, cap, plural};
use crate::manifests::{Manifests, Object};

const SEVERITIES: &[&str] = &["critical", "warning", "info"];

pub(super) fn checks(install: &[Object], shipped: &Manifests, runbook_root: Option<&Path>) -> Vec<CheckResult> {
    let mut out = vec![metrics(install)];
    out.extend(alerts(install, runbook_root));
    let roles = operator_roles(install);
    out.push(if grants(&roles, &["", "events.k8s.io"], "events", &["create"]) {
        CheckResult::new("events.rbac", "create on events is granted", Vec::new())
    } else {
        CheckResult::fail("events.rbac", "no Role grants create on events (core or events.k8s.io)")
    });
    let dashboards: Vec<_> = shipped.dashboards.iter().filter(|d| d.panels > 0).collect();
    out.push(if dashboards.is_empty() {
        CheckResult::fail("dashboard.present", "no Grafana dashboard (JSON with panels) ships")
    } else {
        let names: Vec<String> =
            dashboards.iter().map(|d| format!("\"{}\" ({} panels, {})", d.title, d.panels, d.source)).collect();
        CheckResult::new("dashboard.present", names.join("; "), Vec::new())
    });
    out
}

fn metrics(install: &[Object]) -> CheckResult {
    let monitors: Vec<String> = install
        .iter()
        .filter(|o| o.is("monitoring.coreos.com", "PodMonitor") || o.is("monitoring.coreos.com", "ServiceMonitor"))
        .map(Object::describe)
        .collect();
    let mut ports = Vec::new();
    for d in install.iter().filter(|o| o.is("apps", "Deployment")) {
        let template = &d.value["spec"]["template"];
        if template["metadata"]["annotations"]["prometheus.io/scrape"] == "true" {
            ports.push(format!("{} (prometheus.io/scrape)", d.describe()));
        }
        for c in template["spec"]["containers"].as_array().into_iter().flatten() {
            for p in c["ports"].as_array().into_iter().flatten() {
                if p["name"].as_str().is_some_and(|n| n.contains("metrics")) {
                    ports.push(format!("{} port {}", d.describe(), p["name"].as_str().unwrap_or_default()));
                }
            }
        }
    }
    if monitors.is_empty() && ports.is_empty() {
        return CheckResult::fail(
            "metrics.endpoint",
            "no container port named *metrics*, no prometheus.io/scrape annotation, no PodMonitor or ServiceMonitor",
        );
    }
    CheckResult::new("metrics.endpoint", [ports, monitors].concat().join("; "), Vec::new())
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
        let why = if rule_objects.is_empty() {
            "no PrometheusRule ships".to_string()
        } else {
            format!("{} without alerting rules", plural(rule_objects.len(), "PrometheusRule", "PrometheusRules"))
        };
        return vec![
            CheckResult::fail("alerts.present", why.clone()),
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
        let none = alerts(&[], None);
        assert_eq!(by_id(&none, "alerts.present").findings, ["no PrometheusRule ships"]);
        assert_eq!(by_id(&none, "alerts.runbooks").status, CheckStatus::NotAssessable);
    }

    #[test]
    fn repository_paths_of_runbook_links() {
        assert_eq!(repository_path("https://h/o/r/blob/main/docs/a.md"), Some("docs/a.md".into()));
        assert_eq!(repository_path("https://h/o/r/tree/v1/docs/a.md?plain=1"), Some("docs/a.md".into()));
        assert_eq!(repository_path("./docs/a.md"), Some("docs/a.md".into()));
        assert_eq!(repository_path("https://wiki.example/Runbook"), None);
    }
}
