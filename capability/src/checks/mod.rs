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

use crate::manifests::{self, Manifests, Object, Source};

/// How much a hygiene finding weighs. Ordered: `High` is the most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth fixing; little risk meanwhile (printer columns, a writable root filesystem).
    Low,
    /// A real operational or security gap (cluster-wide rights, no probes, no leader election).
    Medium,
    /// A direct risk to the cluster (root, writes through `*` rules, privileged operand pods).
    High,
}

impl Severity {
    /// `high`, `medium`, `low`.
    pub fn label(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }
}

/// A static check: stable id, the criteria it is part of, and what it checks.
///
/// A check is either about the **capability** the model describes (the Operator SDK's text:
/// "every CR has a status block", "operand images can be overridden", metrics, alerts,
/// Events...) or about **hygiene**: the production bar Statecraft holds its own operators to
/// (namespaced least-privilege RBAC, a locked-down Deployment, ...), which the model does not
/// require. Statecraft's own report counts both; `assess` keeps them apart, so that a
/// third-party bundle below Statecraft's bar is not called a false claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CheckDef {
    /// Stable id (`crd.descriptions`).
    pub id: &'static str,
    /// The criteria whose static part includes it.
    pub criteria: &'static [&'static str],
    /// `None` for a capability check; the weight of a failure for a hygiene check.
    pub hygiene: Option<Severity>,
    /// What passes.
    pub title: &'static str,
}

const fn cap_def(id: &'static str, criteria: &'static [&'static str], title: &'static str) -> CheckDef {
    CheckDef { id, criteria, hygiene: None, title }
}

const fn hyg(id: &'static str, criteria: &'static [&'static str], severity: Severity, title: &'static str) -> CheckDef {
    CheckDef { id, criteria, hygiene: Some(severity), title }
}

use Severity::{High, Low, Medium};

/// Every static check.
pub const CHECKS: &[CheckDef] = &[
    cap_def(
        "crd.status",
        &["L1.install"],
        "the custom resources report status (a status in the schema or subresource)",
    ),
    hyg("crd.status-subresource", &["L1.install"], Low, "every CRD version with a status has a status subresource"),
    cap_def("deploy.present", &["L1.install", "L1.operator-deployment"], "the operator's Deployment ships"),
    hyg("crd.structural-schema", &["L1.crds"], Low, "every CRD version has a structural schema (a type on every node)"),
    cap_def(
        "crd.descriptions",
        &["L1.crds"],
        "the CRDs are documented: at least a quarter of their own fields have a description",
    ),
    hyg(
        "crd.descriptions-complete",
        &["L1.crds"],
        Low,
        "every own field below spec and status has a description (embedded Kubernetes types excepted)",
    ),
    hyg("crd.printer-columns", &["L1.crds"], Low, "every served CRD version has printer columns"),
    hyg(
        "crd.validation-rules",
        &["L1.validation"],
        Medium,
        "every CRD's spec is validated: CEL rules, value constraints, required fields, or an admission webhook or policy",
    ),
    cap_def(
        "crd.image-override",
        &["L1.operand-image"],
        "the operand's image can be set: an image field in a CRD's spec, or OLM's relatedImages / RELATED_IMAGE_*",
    ),
    hyg("rbac.present", &["L1.rbac"], Medium, "the operator's Role ships"),
    hyg("rbac.namespaced", &["L1.rbac"], Medium, "the operator's rights are namespaced (no ClusterRole bound to it)"),
    hyg(
        "rbac.no-wildcards",
        &["L1.rbac"],
        High,
        "no rule grants every verb, or writes on every resource or group, through `*`",
    ),
    hyg("rbac.no-read-wildcards", &["L1.rbac"], Low, "no rule reads every resource or group through `*`"),
    hyg(
        "deploy.leader-election",
        &["L1.operator-deployment"],
        Medium,
        "leader election: Lease rights, and no flag or variable turning it off",
    ),
    hyg("deploy.non-root", &["L1.operator-deployment"], High, "the operator runs as non-root"),
    hyg(
        "deploy.read-only-root-fs",
        &["L1.operator-deployment"],
        Low,
        "every container has a read-only root filesystem",
    ),
    hyg(
        "deploy.no-privilege-escalation",
        &["L1.operator-deployment"],
        Medium,
        "no privilege escalation, all capabilities dropped",
    ),
    hyg(
        "deploy.probes",
        &["L1.operator-deployment"],
        Medium,
        "the operator's containers have liveness and readiness probes",
    ),
    hyg(
        "deploy.resources",
        &["L1.operator-deployment"],
        Low,
        "the operator's containers have CPU and memory requests and a memory limit",
    ),
    hyg(
        "operand.security-context",
        &["L1.operand-security"],
        High,
        "the operand's pods: non-root, no privilege escalation, capabilities dropped, seccomp profile",
    ),
    cap_def("operand.probes", &["L3.probes"], "the operand's containers have liveness and readiness probes"),
    cap_def(
        "operand.resources",
        &["L3.resources"],
        "the operand's containers have CPU and memory requests and a memory limit",
    ),
    cap_def("operand.pdb", &["L3.pdb"], "a PodDisruptionBudget selects each workload's pods"),
    hyg(
        "operand.spread",
        &["L3.spread"],
        Medium,
        "each workload's pods have anti-affinity or topology spread constraints",
    ),
    cap_def(
        "metrics.endpoint",
        &["L4.metrics"],
        "metrics are exposed: a metrics port, flag, Service or monitor, or CRD fields that create monitors",
    ),
    cap_def(
        "alerts.present",
        &["L4.alerts"],
        "alert rules ship: a PrometheusRule (among the manifests or the CSV's examples), or CRD fields for them",
    ),
    hyg("alerts.severity", &["L4.alerts"], Low, "every alert has a severity label: critical, warning or info"),
    hyg("alerts.runbooks", &["L4.alerts"], Low, "every alert has a runbook_url, and runbooks in the repository exist"),
    cap_def("events.rbac", &["L4.events"], "the operator may create Events"),
    cap_def("dashboard.present", &["L4.dashboard"], "a Grafana dashboard ships (file, ConfigMap or GrafanaDashboard)"),
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
    /// A result whose status is not decided by whether there are findings (a capability
    /// check that passes with gaps named, or that cannot judge what it found).
    fn with_status(
        id: &'static str,
        status: CheckStatus,
        detail: impl Into<String>,
        findings: Vec<String>,
    ) -> CheckResult {
        debug_assert!(check_def(id).is_some(), "unknown check {id}");
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

/// A fact in the manifests that points towards a criterion only a run can prove (a backup
/// CRD for `L3.backup`, a scale subresource for `L3.scaling`): shown beside what needs e2e,
/// never counted as proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hint {
    /// The criterion it points to.
    pub criterion: &'static str,
    /// What was found, naming the object.
    pub text: String,
}

/// The static hints of the install manifests.
pub fn hints(shipped: &Manifests) -> Vec<Hint> {
    let install = install_objects(shipped);
    let mut out = crd::hints(&install);
    out.extend(rbac::hints(&install));
    for csv in csvs(&install) {
        let spec = &csv.value["spec"];
        let mut upgrades = Vec::new();
        if let Some(r) = spec["replaces"].as_str() {
            upgrades.push(format!("replaces {r}"));
        }
        if let Some(r) = csv.value["metadata"]["annotations"]["olm.skipRange"].as_str() {
            upgrades.push(format!("skipRange {r}"));
        }
        if !upgrades.is_empty() {
            out.push(Hint {
                criterion: "L2.operator-upgrade",
                text: format!("{}: an OLM upgrade path ({})", csv.describe(), upgrades.join(", ")),
            });
        }
        let examples = examples(csv);
        if !examples.is_empty() {
            let kinds: Vec<String> = examples.iter().map(|o| o.kind().to_string()).collect();
            out.push(Hint {
                criterion: "L1.install",
                text: format!(
                    "{}: {} in alm-examples ({})",
                    csv.describe(),
                    plural(examples.len(), "sample resource", "sample resources"),
                    dedup(kinds).join(", ")
                ),
            });
        }
    }
    out
}

/// The ClusterServiceVersions among `objects`.
fn csvs(objects: &[Object]) -> impl Iterator<Item = &Object> {
    objects.iter().filter(|o| o.is("operators.coreos.com", "ClusterServiceVersion"))
}

/// The sample resources of a CSV's `alm-examples` annotation (a JSON array as a string).
fn examples(csv: &Object) -> Vec<Object> {
    let file = csv.source.path.file_name().and_then(|n| n.to_str()).unwrap_or("csv").to_string();
    let line = manifests::locate(&csv.source.path, csv.source.line, &["alm-examples:"]);
    let source = Source { path: csv.source.path.with_file_name(format!("{file}#alm-examples")), line };
    csv.value["metadata"]["annotations"]["alm-examples"]
        .as_str()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|v| v.as_array().cloned())
        .into_iter()
        .flatten()
        .filter(|v| v["kind"].is_string() && v["apiVersion"].is_string())
        .map(|value| Object { value, source: source.clone() })
        .collect()
}

/// Marks the Roles and ClusterRoles made from a CSV's permissions: OLM binds them to the
/// operator's service account itself.
pub(crate) const GRANTED_BY_OLM: &str = "capability.statecraft.io/granted-by-olm";

/// The install objects, with an OLM ClusterServiceVersion's embedded Deployments and
/// permissions turned into the Deployments, Roles and ClusterRoles OLM would create, and its
/// `alm-examples` added (alert rules, monitors and dashboards are often shipped that way).
pub fn install_objects(shipped: &Manifests) -> Vec<Object> {
    let mut out = shipped.objects.clone();
    for csv in csvs(&shipped.objects) {
        let install = &csv.value["spec"]["install"]["spec"];
        // Findings name the CSV file, the part of it and its line:
        // `x.clusterserviceversion.yaml#deployment x:120`.
        let file = csv.source.path.file_name().and_then(|n| n.to_str()).unwrap_or("csv").to_string();
        let origin = |what: &str, needles: &[&str]| Source {
            path: csv.source.path.with_file_name(format!("{file}#{what}")),
            line: manifests::locate(&csv.source.path, csv.source.line, needles),
        };
        for d in install["deployments"].as_array().into_iter().flatten() {
            let name = d["name"].as_str().unwrap_or("<unnamed>");
            let value = serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": d["label"]},
                "spec": d["spec"],
            });
            out.push(Object {
                value,
                source: origin(&format!("deployment {name}"), &["deployments:", &format!("name: {name}")]),
            });
        }
        for (field, kind) in [("permissions", "Role"), ("clusterPermissions", "ClusterRole")] {
            for p in install[field].as_array().into_iter().flatten() {
                let name = p["serviceAccountName"].as_str().unwrap_or("<unnamed>");
                let value = serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                    "metadata": {"name": name, "annotations": {GRANTED_BY_OLM: name}},
                    "rules": p["rules"],
                });
                let needles = [format!("{field}:"), format!("serviceAccountName: {name}")];
                out.push(Object { value, source: origin(&format!("{field} {name}"), &[&needles[0], &needles[1]]) });
            }
        }
        out.extend(examples(csv));
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

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
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
        assert_eq!(status("crd.descriptions"), CheckStatus::NotAssessable, "no CRD: nothing to judge");
        assert_eq!(status("deploy.present"), CheckStatus::Fail);
        assert_eq!(status("deploy.non-root"), CheckStatus::NotAssessable);
        assert_eq!(status("operand.pdb"), CheckStatus::NotAssessable);
        // Alert rules may be created at run time: not shown, rather than failed.
        assert_eq!(status("alerts.present"), CheckStatus::NotAssessable);
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
