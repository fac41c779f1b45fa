//! Checks of pods: the operator's Deployment (leader election, locked down, probes,
//! resources) and the operand's workloads built for a sample resource (security context,
//! probes, resources, PodDisruptionBudget, spreading).

use std::collections::BTreeMap;

use serde_json::Value;

use super::rbac::{grants, operator_roles};
use super::{CheckResult, cap, plural, str_list};
use crate::manifests::Object;

/// A workload's pod template.
struct Pod<'a> {
    owner: &'a Object,
    spec: &'a Value,
    labels: BTreeMap<&'a str, &'a str>,
}

impl<'a> Pod<'a> {
    fn of(owner: &'a Object) -> Pod<'a> {
        let template = &owner.value["spec"]["template"];
        let labels = template["metadata"]["labels"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect())
            .unwrap_or_default();
        Pod { owner, spec: &template["spec"], labels }
    }

    /// `(container, is_init)` for every container.
    fn containers(&self) -> impl Iterator<Item = (&'a Value, bool)> {
        let spec = self.spec;
        let init = spec["initContainers"].as_array().into_iter().flatten().map(|c| (c, true));
        spec["containers"].as_array().into_iter().flatten().map(|c| (c, false)).chain(init)
    }

    fn describe(&self, container: &Value) -> String {
        format!(
            "{} {} container {} ({})",
            self.owner.kind(),
            self.owner.name(),
            container["name"].as_str().unwrap_or("<unnamed>"),
            self.owner.source
        )
    }

    fn whole(&self) -> String {
        self.owner.describe()
    }

    /// Non-root: `runAsNonRoot` on the pod or on every container, and no uid 0.
    fn non_root_findings(&self, out: &mut Vec<String>) {
        let pod_sc = &self.spec["securityContext"];
        let pod_non_root = pod_sc["runAsNonRoot"] == true;
        if pod_sc["runAsUser"] == 0 {
            out.push(format!("{}: the pod runs as uid 0", self.whole()));
        }
        for (c, _) in self.containers() {
            let sc = &c["securityContext"];
            if sc["runAsUser"] == 0 || sc["runAsNonRoot"] == false {
                out.push(format!("{}: runs as root", self.describe(c)));
            } else if !pod_non_root && sc["runAsNonRoot"] != true {
                out.push(format!("{}: runAsNonRoot is not set (on the pod or the container)", self.describe(c)));
            }
        }
    }

    fn no_escalation_findings(&self, out: &mut Vec<String>) {
        for (c, _) in self.containers() {
            let sc = &c["securityContext"];
            if sc["allowPrivilegeEscalation"] != false {
                out.push(format!("{}: allowPrivilegeEscalation is not false", self.describe(c)));
            }
            if !str_list(&sc["capabilities"]["drop"]).iter().any(|d| d.eq_ignore_ascii_case("ALL")) {
                out.push(format!("{}: capabilities do not drop ALL", self.describe(c)));
            }
            if sc["privileged"] == true {
                out.push(format!("{}: privileged", self.describe(c)));
            }
        }
    }

    fn probe_findings(&self, out: &mut Vec<String>) {
        for (c, init) in self.containers() {
            if init {
                continue;
            }
            for probe in ["livenessProbe", "readinessProbe"] {
                if !c[probe].is_object() {
                    out.push(format!("{}: no {probe}", self.describe(c)));
                }
            }
        }
    }

    fn resource_findings(&self, out: &mut Vec<String>) {
        for (c, init) in self.containers() {
            if init {
                continue;
            }
            let r = &c["resources"];
            let mut missing = Vec::new();
            for (section, key) in [("requests", "cpu"), ("requests", "memory"), ("limits", "memory")] {
                if r[section][key].is_null() {
                    missing.push(format!("{section}.{key}"));
                }
            }
            if !missing.is_empty() {
                out.push(format!("{}: no {}", self.describe(c), missing.join(", ")));
            }
        }
    }
}

fn workloads(objects: &[Object]) -> Vec<&Object> {
    objects
        .iter()
        .filter(|o| o.is("apps", "Deployment") || o.is("apps", "StatefulSet") || o.is("apps", "DaemonSet"))
        .collect()
}

/// What a container's arguments or environment say about leader election: `Some(true)`
/// when a flag or variable naming it is on (controller-runtime's `--leader-elect`,
/// `--enable-leader-election`, `*LEADER_ELECT*` variables such as Strimzi's), `Some(false)`
/// when one is off, `None` when none is there (many operators elect by default, or in a
/// configuration file).
fn leader_switch(container: &Value) -> Option<bool> {
    let names = |s: &str| {
        let s = s.to_ascii_lowercase().replace('_', "-");
        s.contains("leader-elect") || s.contains("leaderelect")
    };
    let off = |v: &str| v.eq_ignore_ascii_case("false") || v == "0";
    let mut seen = None;
    for a in str_list(&container["args"]).into_iter().chain(str_list(&container["command"])) {
        if names(a) {
            let on = a.split_once('=').is_none_or(|(_, v)| !off(v));
            seen = Some(seen.unwrap_or(true) && on);
        }
    }
    for e in container["env"].as_array().into_iter().flatten() {
        if e["name"].as_str().is_some_and(names) {
            let on = e["value"].as_str().is_none_or(|v| !off(v));
            seen = Some(seen.unwrap_or(true) && on);
        }
    }
    seen
}

pub(super) fn operator_checks(install: &[Object]) -> Vec<CheckResult> {
    let deployments: Vec<&Object> = install.iter().filter(|o| o.is("apps", "Deployment")).collect();
    let rest = [
        "deploy.leader-election",
        "deploy.non-root",
        "deploy.read-only-root-fs",
        "deploy.no-privilege-escalation",
        "deploy.probes",
        "deploy.resources",
    ];
    if deployments.is_empty() {
        let mut out = vec![CheckResult::fail("deploy.present", "no Deployment ships for the operator")];
        out.extend(rest.into_iter().map(|id| CheckResult::not_assessable(id, "no Deployment ships for the operator")));
        return out;
    }
    let pods: Vec<Pod<'_>> = deployments.iter().map(|d| Pod::of(d)).collect();
    let looked_at = plural(deployments.len(), "Deployment", "Deployments");
    let mut out = vec![CheckResult::new("deploy.present", looked_at.clone(), Vec::new())];

    let roles = operator_roles(install);
    let mut election = Vec::new();
    let leases = grants(&roles, &["coordination.k8s.io"], "leases", &["create"])
        && grants(&roles, &["coordination.k8s.io"], "leases", &["update", "patch"]);
    // Older operator-sdk operators elect a leader with a ConfigMap lock ("leader for life").
    let configmap_lock = grants(&roles, &[""], "configmaps", &["create"]);
    let mut switched_on = false;
    for pod in &pods {
        let switches: Vec<Option<bool>> =
            pod.containers().filter(|(_, init)| !init).map(|(c, _)| leader_switch(c)).collect();
        if switches.contains(&Some(false)) && !switches.contains(&Some(true)) {
            election.push(format!("{}: leader election is switched off by a flag or variable", pod.whole()));
        }
        switched_on |= switches.contains(&Some(true));
    }
    let elects = leases || (switched_on && configmap_lock);
    if !elects {
        election.insert(0, "no Role grants create and update on coordination.k8s.io leases".to_string());
    }
    out.push(CheckResult::new("deploy.leader-election", looked_at.clone(), cap(election)));

    let mut non_root = Vec::new();
    let mut read_only = Vec::new();
    let mut escalation = Vec::new();
    let mut probes = Vec::new();
    let mut resources = Vec::new();
    for pod in &pods {
        pod.non_root_findings(&mut non_root);
        pod.no_escalation_findings(&mut escalation);
        pod.probe_findings(&mut probes);
        pod.resource_findings(&mut resources);
        for (c, _) in pod.containers() {
            if c["securityContext"]["readOnlyRootFilesystem"] != true {
                read_only.push(format!("{}: readOnlyRootFilesystem is not true", pod.describe(c)));
            }
        }
    }
    out.push(CheckResult::new("deploy.non-root", looked_at.clone(), cap(non_root)));
    out.push(CheckResult::new("deploy.read-only-root-fs", looked_at.clone(), cap(read_only)));
    out.push(CheckResult::new("deploy.no-privilege-escalation", looked_at.clone(), cap(escalation)));
    out.push(CheckResult::new("deploy.probes", looked_at.clone(), cap(probes)));
    out.push(CheckResult::new("deploy.resources", looked_at, cap(resources)));
    out
}

/// Whether `selector` (a LabelSelector) selects pods labelled `labels`. An empty selector
/// is treated as selecting nothing: a PDB that matches every pod is not a plan.
fn selects(selector: &Value, labels: &BTreeMap<&str, &str>) -> bool {
    let match_labels = selector["matchLabels"].as_object();
    let expressions = selector["matchExpressions"].as_array();
    if match_labels.is_none_or(|m| m.is_empty()) && expressions.is_none_or(|e| e.is_empty()) {
        return false;
    }
    let labels_ok =
        match_labels.into_iter().flatten().all(|(k, v)| v.as_str().is_some_and(|v| labels.get(k.as_str()) == Some(&v)));
    let expressions_ok = expressions.into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or_default();
        let values = str_list(&e["values"]);
        let value = labels.get(key);
        match e["operator"].as_str() {
            Some("In") => value.is_some_and(|v| values.contains(v)),
            Some("NotIn") => value.is_none_or(|v| !values.contains(v)),
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

fn has_spread(pod: &Pod<'_>) -> bool {
    let anti = &pod.spec["affinity"]["podAntiAffinity"];
    let non_empty = |v: &Value| v.as_array().is_some_and(|a| !a.is_empty());
    non_empty(&anti["requiredDuringSchedulingIgnoredDuringExecution"])
        || non_empty(&anti["preferredDuringSchedulingIgnoredDuringExecution"])
        || non_empty(&pod.spec["topologySpreadConstraints"])
}

fn has_seccomp(sc: &Value) -> bool {
    matches!(sc["seccompProfile"]["type"].as_str(), Some("RuntimeDefault" | "Localhost"))
}

pub(super) fn operand_checks(operand: Option<&[Object]>) -> Vec<CheckResult> {
    let ids = ["operand.security-context", "operand.probes", "operand.resources", "operand.pdb", "operand.spread"];
    let Some(objects) = operand else {
        return ids
            .into_iter()
            .map(|id| {
                CheckResult::not_assessable(id, "no objects built from a sample custom resource (assess --operand DIR)")
            })
            .collect();
    };
    let workloads = workloads(objects);
    if workloads.is_empty() {
        return ids
            .into_iter()
            .map(|id| CheckResult::fail(id, "no Deployment, StatefulSet or DaemonSet among the sample's objects"))
            .collect();
    }
    let pods: Vec<Pod<'_>> = workloads.iter().map(|w| Pod::of(w)).collect();
    let looked_at = format!(
        "{} built for the sample: {}",
        plural(workloads.len(), "workload", "workloads"),
        workloads.iter().map(|w| format!("{} {}", w.kind(), w.name())).collect::<Vec<_>>().join(", ")
    );
    let pdbs: Vec<&Object> = objects.iter().filter(|o| o.is("policy", "PodDisruptionBudget")).collect();

    let (mut security, mut probes, mut resources, mut pdb, mut spread) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for pod in &pods {
        pod.non_root_findings(&mut security);
        pod.no_escalation_findings(&mut security);
        if !has_seccomp(&pod.spec["securityContext"]) {
            for (c, _) in pod.containers() {
                if !has_seccomp(&c["securityContext"]) {
                    security.push(format!("{}: no RuntimeDefault or Localhost seccomp profile", pod.describe(c)));
                }
            }
        }
        pod.probe_findings(&mut probes);
        pod.resource_findings(&mut resources);
        if !pdbs.iter().any(|p| selects(&p.value["spec"]["selector"], &pod.labels)) {
            pdb.push(format!("{}: no PodDisruptionBudget selects its pods", pod.whole()));
        }
        if !has_spread(pod) {
            spread.push(format!("{}: no pod anti-affinity and no topology spread constraints", pod.whole()));
        }
    }
    vec![
        CheckResult::new("operand.security-context", looked_at.clone(), cap(security)),
        CheckResult::new("operand.probes", looked_at.clone(), cap(probes)),
        CheckResult::new("operand.resources", looked_at.clone(), cap(resources)),
        CheckResult::new(
            "operand.pdb",
            format!("{looked_at}; {}", plural(pdbs.len(), "PodDisruptionBudget", "PodDisruptionBudgets")),
            cap(pdb),
        ),
        CheckResult::new("operand.spread", looked_at, cap(spread)),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::CheckStatus;
    use super::*;
    use serde_json::json;

    fn locked_down_container() -> Value {
        json!({
            "name": "main", "image": "x",
            "args": ["--leader-elect"],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081}},
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                "capabilities": {"drop": ["ALL"]}},
        })
    }

    fn workload(kind: &str, container: Value) -> Object {
        Object::built(
            json!({
                "apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "w"},
                "spec": {"template": {
                    "metadata": {"labels": {"app": "w", "extra": "x"}},
                    "spec": {
                        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]}},
                        "containers": [container],
                    },
                }},
            }),
            "w.yaml",
        )
    }

    fn lease_role() -> Object {
        Object::built(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "op"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]}),
            "role.yaml",
        )
    }

    fn pdb(selector: Value) -> Object {
        Object::built(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "w"},
                   "spec": {"maxUnavailable": 1, "selector": selector}}),
            "pdb.yaml",
        )
    }

    fn by_id(results: &[CheckResult], id: &str) -> CheckResult {
        results.iter().find(|r| r.id == id).unwrap().clone()
    }

    #[test]
    fn a_locked_down_operator_deployment_passes() {
        let results = operator_checks(&[workload("Deployment", locked_down_container()), lease_role()]);
        for r in &results {
            assert_eq!(r.status, CheckStatus::Pass, "{}: {:?}", r.id, r.findings);
        }
    }

    #[test]
    fn an_operator_deployment_with_gaps_fails_each_check() {
        let mut c = json!({"name": "manager", "image": "x", "args": ["--leader-elect=false"],
                           "securityContext": {"runAsUser": 0}});
        c["env"] = json!([{"name": "ENABLE_LEADER_ELECTION", "value": "false"}]);
        let results = operator_checks(&[workload("Deployment", c)]);
        for id in [
            "deploy.leader-election",
            "deploy.non-root",
            "deploy.read-only-root-fs",
            "deploy.no-privilege-escalation",
            "deploy.probes",
            "deploy.resources",
        ] {
            assert_eq!(by_id(&results, id).status, CheckStatus::Fail, "{id}");
        }
        let election = by_id(&results, "deploy.leader-election").findings;
        assert!(election[0].contains("no Role grants"), "{election:?}");
        assert!(election[1].contains("Deployment w (w.yaml:1)"), "{election:?}");
        assert_eq!(
            by_id(&results, "deploy.resources").findings,
            ["Deployment w container manager (w.yaml:1): no requests.cpu, requests.memory, limits.memory"]
        );
    }

    #[test]
    fn leader_election_is_recognised_by_flag_or_variable() {
        assert_eq!(leader_switch(&json!({"args": ["--leader-elect=true"]})), Some(true));
        assert_eq!(leader_switch(&json!({"args": ["--enable-leader-election"]})), Some(true));
        assert_eq!(
            leader_switch(&json!({"env": [{"name": "STRIMZI_LEADER_ELECTION_ENABLED", "value": "true"}]})),
            Some(true)
        );
        assert_eq!(
            leader_switch(&json!({"env": [{"name": "STATECRAFT_LEADER_ELECTION", "value": "false"}]})),
            Some(false)
        );
        assert_eq!(leader_switch(&json!({"args": ["--metrics-bind-address=:8080"]})), None);
    }

    /// Lease rights without a visible switch pass (controller-runtime operators often turn
    /// election on in a configuration file); a switch turned off does not.
    #[test]
    fn lease_rights_are_leader_election_unless_it_is_switched_off() {
        let mut c = locked_down_container();
        c.as_object_mut().unwrap().remove("args");
        let results = operator_checks(&[workload("Deployment", c.clone()), lease_role()]);
        assert_eq!(by_id(&results, "deploy.leader-election").status, CheckStatus::Pass);
        c["args"] = json!(["--leader-elect=false"]);
        let results = operator_checks(&[workload("Deployment", c), lease_role()]);
        assert_eq!(
            by_id(&results, "deploy.leader-election").findings,
            ["Deployment w (w.yaml:1): leader election is switched off by a flag or variable"]
        );
    }

    #[test]
    fn operand_checks_need_a_sample_and_a_matching_pdb() {
        assert!(operand_checks(None).iter().all(|r| r.status == CheckStatus::NotAssessable));
        assert!(operand_checks(Some(&[])).iter().all(|r| r.status == CheckStatus::Fail));

        let sts = workload("StatefulSet", locked_down_container());
        let good = [sts.clone(), pdb(json!({"matchLabels": {"app": "w"}}))];
        for r in operand_checks(Some(&good)) {
            assert_eq!(r.status, CheckStatus::Pass, "{}: {:?}", r.id, r.findings);
        }
        let other = [sts.clone(), pdb(json!({"matchLabels": {"app": "other"}}))];
        assert_eq!(by_id(&operand_checks(Some(&other)), "operand.pdb").status, CheckStatus::Fail);
        let everything = [sts, pdb(json!({}))];
        assert_eq!(by_id(&operand_checks(Some(&everything)), "operand.pdb").status, CheckStatus::Fail);
    }

    #[test]
    fn selectors_follow_kubernetes_semantics() {
        let labels = BTreeMap::from([("app", "w"), ("role", "db")]);
        assert!(selects(&json!({"matchLabels": {"app": "w"}}), &labels));
        assert!(selects(&json!({"matchExpressions": [{"key": "role", "operator": "In", "values": ["db"]}]}), &labels));
        assert!(selects(&json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}), &labels));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["db"]}]}),
            &labels
        ));
        assert!(!selects(&json!({"matchLabels": {"app": "w", "tier": "x"}}), &labels));
    }
}
