//! Static checks of what an operator ships, on generic Kubernetes objects.
//!
//! The inputs are the operator's install manifests (CRDs, RBAC, its Deployment or an OLM
//! ClusterServiceVersion, PrometheusRules, monitors), its dashboards, and — when available —
//! the objects it builds for a sample custom resource (the operand: StatefulSet, Services,
//! PodDisruptionBudget ...). For Statecraft's operators the latter are built in-process by
//! [`crate::operators`]; for a third-party operator they can be captured from a test install
//! and passed to `assess --operand`. Without them the operand checks are *not assessable*
//! rather than failed: a bundle does not contain what the operator creates at run time.
//!
//! Each check has a stable id and belongs to one or more criteria of the model; a
//! criterion's static part passes when all its checks pass.

mod crd;
mod deploy;
mod observe;
mod rbac;

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::manifests::{Manifests, Object, Source};

/// A static check: stable id, the criteria it is part of, and what it checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CheckDef {
    /// Stable id (`crd.descriptions`).
    pub id: &'static str,
    /// The criteria whose static part includes it.
    pub criteria: &'static [&'static str],
    /// What passes.
    pub title: &'static str,
}

const fn def(id: &'static str, criteria: &'static [&'static str], title: &'static str) -> CheckDef {
    CheckDef { id, criteria, title }
}

/// Every static check.
pub const CHECKS: &[CheckDef] = &[
    def("crd.status-subresource", &["L1.install"], "every served CRD version has a status subresource"),
    def("deploy.present", &["L1.install", "L1.operator-deployment"], "the operator's Deployment ships"),
    def("crd.structural-schema", &["L1.crds"], "every CRD version has a structural schema (a type on every node)"),
    def("crd.descriptions", &["L1.crds"], "every field below spec and status has a description"),
    def("crd.printer-columns", &["L1.crds"], "every served CRD version has printer columns"),
    def("crd.validation-rules", &["L1.validation"], "every CRD's spec has CEL rules or value constraints"),
    def("crd.image-override", &["L1.operand-image"], "a CRD's spec has a string field `image`"),
    def("rbac.present", &["L1.rbac"], "the operator's Role ships"),
    def("rbac.namespaced", &["L1.rbac"], "no ClusterRole or ClusterRoleBinding for the operator itself"),
    def("rbac.no-wildcards", &["L1.rbac"], "no `*` in any rule's API groups, resources or verbs"),
    def(
        "deploy.leader-election",
        &["L1.operator-deployment"],
        "leader election is on (a flag or variable) and the Role grants Leases",
    ),
    def("deploy.non-root", &["L1.operator-deployment"], "the operator runs as non-root"),
    def("deploy.read-only-root-fs", &["L1.operator-deployment"], "every container has a read-only root filesystem"),
    def(
        "deploy.no-privilege-escalation",
        &["L1.operator-deployment"],
        "no privilege escalation, all capabilities dropped",
    ),
    def("deploy.probes", &["L1.operator-deployment"], "the operator's containers have liveness and readiness probes"),
    def(
        "deploy.resources",
        &["L1.operator-deployment"],
        "the operator's containers have CPU and memory requests and a memory limit",
    ),
    def(
        "operand.security-context",
        &["L1.operand-security"],
        "the operand's pods: non-root, no privilege escalation, capabilities dropped, seccomp profile",
    ),
    def("operand.probes", &["L3.probes"], "the operand's containers have liveness and readiness probes"),
    def(
        "operand.resources",
        &["L3.resources"],
        "the operand's containers have CPU and memory requests and a memory limit",
    ),
    def("operand.pdb", &["L3.pdb"], "a PodDisruptionBudget selects each workload's pods"),
    def("operand.spread", &["L3.spread"], "each workload's pods have anti-affinity or topology spread constraints"),
    def(
        "metrics.endpoint",
        &["L4.metrics"],
        "the operator exposes a metrics port, or a PodMonitor/ServiceMonitor ships",
    ),
    def("alerts.present", &["L4.alerts"], "a PrometheusRule with alerting rules ships"),
    def("alerts.severity", &["L4.alerts"], "every alert has a severity label: critical, warning or info"),
    def("alerts.runbooks", &["L4.alerts"], "every alert has a runbook_url, and runbooks in the repository exist"),
    def("events.rbac", &["L4.events"], "the operator may create Events"),
    def("dashboard.present", &["L4.dashboard"], "a Grafana dashboard with panels ships"),
];

/// The definition of check `id`.
pub fn check_def(id: &str) -> Option<&'static CheckDef> {
    CHECKS.iter().find(|c| c.id == id)
}

/// The checks that make up `criterion`'s static part.
pub fn checks_of(criterion: &str) -> impl Iterator<Item = &'static CheckDef> + '_ {
    CHECKS.iter().filter(move |c| c.criteria.contains(&criterion))
}

/// Outcome of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckStatus {
    /// It holds.
    Pass,
    /// It does not; the findings say where.
    Fail,
    /// What it needs is not among the inputs (e.g. no objects built from a sample CR).
    NotAssessable,
}

/// Result of one check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// The check's id.
    pub id: &'static str,
    /// Outcome.
    pub status: CheckStatus,
    /// What was looked at (`3 CRDs, 3 versions`), or why it could not be assessed.
    pub detail: String,
    /// What is wrong, each naming the object and its file and line.
    pub findings: Vec<String>,
}

impl CheckResult {
    fn new(id: &'static str, detail: impl Into<String>, findings: Vec<String>) -> CheckResult {
        debug_assert!(check_def(id).is_some(), "unknown check {id}");
        let status = if findings.is_empty() { CheckStatus::Pass } else { CheckStatus::Fail };
        CheckResult { id, status, detail: detail.into(), findings }
    }
    fn fail(id: &'static str, finding: impl Into<String>) -> CheckResult {
        CheckResult::new(id, String::new(), vec![finding.into()])
    }
    fn not_assessable(id: &'static str, why: impl Into<String>) -> CheckResult {
        CheckResult { id, status: CheckStatus::NotAssessable, detail: why.into(), findings: Vec::new() }
    }
}

/// What the checks look at.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The install manifests and dashboards.
    pub shipped: &'a Manifests,
    /// Objects built for a sample custom resource, if available.
    pub operand: Option<&'a [Object]>,
    /// Where runbook links of the form `.../blob/<ref>/<path>` (or relative paths) must
    /// resolve to existing files; `None` only checks that each alert has a link.
    pub runbook_root: Option<&'a Path>,
}

/// Runs every check, in [`CHECKS`] order.
pub fn run(inputs: &Inputs<'_>) -> Vec<CheckResult> {
    let install = install_objects(inputs.shipped);
    let mut results = Vec::new();
    results.extend(crd::checks(&install));
    results.extend(rbac::checks(&install));
    results.extend(deploy::operator_checks(&install));
    results.extend(deploy::operand_checks(inputs.operand));
    results.extend(observe::checks(&install, inputs.shipped, inputs.runbook_root));
    results.sort_by_key(|r| CHECKS.iter().position(|c| c.id == r.id));
    results
}

/// The install objects, with an OLM ClusterServiceVersion's embedded Deployments and
/// permissions turned into the Deployments, Roles and ClusterRoles OLM would create.
pub fn install_objects(shipped: &Manifests) -> Vec<Object> {
    let mut out = shipped.objects.clone();
    for csv in shipped.objects.iter().filter(|o| o.is("operators.coreos.com", "ClusterServiceVersion")) {
        let install = &csv.value["spec"]["install"]["spec"];
        // Findings name the CSV file and the part of it: `x.clusterserviceversion.yaml#deployment x:1`.
        let file = csv.source.path.file_name().and_then(|n| n.to_str()).unwrap_or("csv").to_string();
        let origin = |what: &str| Source {
            path: csv.source.path.with_file_name(format!("{file}#{what}")),
            line: csv.source.line,
        };
        for d in install["deployments"].as_array().into_iter().flatten() {
            let name = d["name"].as_str().unwrap_or("<unnamed>");
            let value = serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name},
                "spec": d["spec"],
            });
            out.push(Object { value, source: origin(&format!("deployment {name}")) });
        }
        for (field, kind) in [("permissions", "Role"), ("clusterPermissions", "ClusterRole")] {
            for p in install[field].as_array().into_iter().flatten() {
                let name = p["serviceAccountName"].as_str().unwrap_or("<unnamed>");
                let value = serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                    "metadata": {"name": name},
                    "rules": p["rules"],
                });
                out.push(Object { value, source: origin(&format!("{field} {name}")) });
            }
        }
    }
    out
}

// ----- helpers shared by the check modules -----

/// At most this many findings per check are listed; the rest are counted.
const MAX_FINDINGS: usize = 12;

/// Caps a findings list, saying how many were left out.
fn cap(mut findings: Vec<String>) -> Vec<String> {
    if findings.len() > MAX_FINDINGS {
        let more = findings.len() - MAX_FINDINGS;
        findings.truncate(MAX_FINDINGS);
        findings.push(format!("… and {more} more"));
    }
    findings
}

fn str_list(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CRITERIA, criterion};

    #[test]
    fn every_check_belongs_to_criteria_with_a_static_part() {
        for check in CHECKS {
            assert!(!check.criteria.is_empty(), "{}", check.id);
            for id in check.criteria {
                let c = criterion(id).unwrap_or_else(|| panic!("{}: unknown criterion {id}", check.id));
                assert!(c.verification.has_static(), "{}: {id} is e2e-only", check.id);
            }
        }
        for c in CRITERIA {
            assert_eq!(checks_of(c.id).next().is_some(), c.verification.has_static(), "{}", c.id);
        }
    }

    #[test]
    fn run_returns_every_check_once_in_order() {
        let shipped = Manifests::default();
        let results = run(&Inputs { shipped: &shipped, operand: None, runbook_root: None });
        let ids: Vec<_> = results.iter().map(|r| r.id).collect();
        let all: Vec<_> = CHECKS.iter().map(|c| c.id).collect();
        assert_eq!(ids, all);
        // Nothing shipped: what needs install objects fails; what needs the operand is not
        // assessable.
        let status = |id: &str| results.iter().find(|r| r.id == id).unwrap().status;
        assert_eq!(status("crd.descriptions"), CheckStatus::Fail);
        assert_eq!(status("deploy.present"), CheckStatus::Fail);
        assert_eq!(status("deploy.non-root"), CheckStatus::NotAssessable);
        assert_eq!(status("operand.pdb"), CheckStatus::NotAssessable);
        assert_eq!(status("alerts.present"), CheckStatus::Fail);
        assert_eq!(status("alerts.runbooks"), CheckStatus::NotAssessable);
    }

    #[test]
    fn a_csv_install_spec_becomes_deployments_and_roles() {
        let csv = Object {
            value: serde_json::json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "x.v1"},
                "spec": {"install": {"strategy": "deployment", "spec": {
                    "deployments": [{"name": "x-controller", "spec": {"template": {"spec": {"containers": []}}}}],
                    "permissions": [{"serviceAccountName": "x", "rules": []}],
                    "clusterPermissions": [{"serviceAccountName": "x", "rules": []}],
                }}},
            }),
            source: Source { path: "bundle/manifests/x.clusterserviceversion.yaml".into(), line: 1 },
        };
        let objects = install_objects(&Manifests { objects: vec![csv], ..Default::default() });
        let kinds: Vec<_> = objects.iter().map(|o| (o.kind(), o.name())).collect();
        assert_eq!(
            kinds,
            [("ClusterServiceVersion", "x.v1"), ("Deployment", "x-controller"), ("Role", "x"), ("ClusterRole", "x")]
        );
        assert!(objects[1].source.to_string().contains("x.clusterserviceversion.yaml#deployment x-controller:1"));
    }
}
