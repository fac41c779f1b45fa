//! Checks of the operator's RBAC: present, namespaced, no wildcards.
//!
//! Only the rights of the operator count: the Roles and ClusterRoles OLM grants from a
//! CSV's `permissions` / `clusterPermissions`, and those a shipped binding gives one of the
//! operator's service accounts (its Deployments'). Bundles also carry ClusterRoles that
//! nothing binds to the operator — a metrics reader, editor and viewer roles for users, roles
//! the operator hands to its operand's pods — and those are not its rights. A ClusterRole
//! bound through a RoleBinding grants rights in one namespace only.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{CheckResult, GRANTED_BY_OLM, Hint, cap, csvs, plural, str_list};
use crate::manifests::Object;

pub(super) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Verbs that only read.
const READ_VERBS: &[&str] = &["get", "list", "watch"];

/// ClusterRoles that extend the built-in user roles (`view`, `edit`, `admin`) are for the
/// cluster's users, not for the operator: they are not counted against it.
fn is_aggregated(o: &Object) -> bool {
    o.value["aggregationRule"].is_object()
        || o.value["metadata"]["labels"]
            .as_object()
            .is_some_and(|l| l.keys().any(|k| k.starts_with("rbac.authorization.k8s.io/aggregate-to-")))
}

fn granted_by_olm(o: &Object) -> bool {
    !o.value["metadata"]["annotations"][GRANTED_BY_OLM].is_null()
}

/// The service accounts the operator runs as: its Deployments' (`default` when unset) and
/// those a CSV grants permissions to.
fn operator_accounts(install: &[Object]) -> BTreeSet<&str> {
    let mut out: BTreeSet<&str> = install
        .iter()
        .filter(|o| o.is("apps", "Deployment"))
        .map(|d| {
            let spec = &d.value["spec"]["template"]["spec"];
            spec["serviceAccountName"].as_str().or(spec["serviceAccount"].as_str()).unwrap_or("default")
        })
        .collect();
    out.extend(install.iter().filter(|o| granted_by_olm(o)).map(|o| o.name()));
    out
}

/// How a role reaches the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// In the namespaces it is bound in (a Role, or a ClusterRole through a RoleBinding).
    Namespaced,
    /// Everywhere (a ClusterRole through a ClusterRoleBinding or a CSV's clusterPermissions).
    Cluster,
}

/// The operator's own Roles and ClusterRoles, with their scope. Without any binding or CSV
/// among the manifests (plain RBAC files), every non-aggregated role counts as the
/// operator's: there is nothing to tell them apart by.
fn bound_roles(install: &[Object]) -> Vec<(&Object, Scope)> {
    let roles: Vec<&Object> = install
        .iter()
        .filter(|o| (o.is(RBAC_GROUP, "Role") || o.is(RBAC_GROUP, "ClusterRole")) && !is_aggregated(o))
        .collect();
    let bindings: Vec<&Object> =
        install.iter().filter(|o| o.is(RBAC_GROUP, "RoleBinding") || o.is(RBAC_GROUP, "ClusterRoleBinding")).collect();
    let has_csv = csvs(install).next().is_some();
    let natural = |r: &Object| if r.kind() == "Role" { Scope::Namespaced } else { Scope::Cluster };
    if bindings.is_empty() && !has_csv {
        return roles.into_iter().map(|r| (r, natural(r))).collect();
    }
    let accounts = operator_accounts(install);
    let to_operator = |b: &Object| {
        b.value["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"].as_str().is_some_and(|n| accounts.contains(n)))
    };
    roles
        .into_iter()
        .filter_map(|r| {
            if granted_by_olm(r) {
                return Some((r, natural(r)));
            }
            let all: Vec<Scope> = bindings
                .iter()
                .filter(|b| {
                    b.value["roleRef"]["kind"] == r.kind() && b.value["roleRef"]["name"] == r.name() && to_operator(b)
                })
                .map(|b| if b.kind() == "ClusterRoleBinding" { Scope::Cluster } else { Scope::Namespaced })
                .collect();
            if all.is_empty() {
                None
            } else if all.contains(&Scope::Cluster) {
                Some((r, Scope::Cluster))
            } else {
                Some((r, Scope::Namespaced))
            }
        })
        .collect()
}

/// The operator's own Roles and ClusterRoles.
pub(super) fn operator_roles(install: &[Object]) -> Vec<&Object> {
    bound_roles(install).into_iter().map(|(r, _)| r).collect()
}

fn rules(role: &Object) -> impl Iterator<Item = &Value> {
    role.value["rules"].as_array().into_iter().flatten()
}

/// Whether some rule of `roles` allows one of `verbs` on `resource` of one of `groups`.
pub(super) fn grants(roles: &[&Object], groups: &[&str], resource: &str, verbs: &[&str]) -> bool {
    roles.iter().flat_map(|r| rules(r)).any(|rule| {
        let g = str_list(&rule["apiGroups"]);
        let res = str_list(&rule["resources"]);
        let v = str_list(&rule["verbs"]);
        (g.contains(&"*") || groups.iter().any(|x| g.contains(x)))
            && (res.contains(&"*") || res.contains(&resource))
            && (v.contains(&"*") || verbs.iter().any(|x| v.contains(x)))
    })
}

/// What a CSV's install modes say about the reach of its namespaced `permissions`: when it
/// can only be installed for all namespaces, OLM grants them in every namespace.
fn install_modes(install: &[Object]) -> Option<(String, bool)> {
    let csv = csvs(install).next()?;
    let modes: Vec<&str> = csv.value["spec"]["installModes"]
        .as_array()?
        .iter()
        .filter(|m| m["supported"] == true)
        .filter_map(|m| m["type"].as_str())
        .collect();
    let only_all = !modes.is_empty() && modes.iter().all(|m| *m == "AllNamespaces");
    Some((format!("install modes {}", if modes.is_empty() { "none".to_string() } else { modes.join(", ") }), only_all))
}

pub(super) fn checks(install: &[Object]) -> Vec<CheckResult> {
    let roles = bound_roles(install);
    if roles.is_empty() {
        let none = "no Role or ClusterRole ships for the operator";
        return vec![
            CheckResult::fail("rbac.present", none),
            CheckResult::not_assessable("rbac.namespaced", none),
            CheckResult::not_assessable("rbac.no-wildcards", none),
            CheckResult::not_assessable("rbac.no-read-wildcards", none),
        ];
    }
    let rule_count: usize = roles.iter().map(|(r, _)| rules(r).count()).sum();
    let mut looked_at = format!("{}, {}", plural(roles.len(), "role", "roles"), plural(rule_count, "rule", "rules"));
    let modes = install_modes(install);
    if let Some((text, _)) = &modes {
        looked_at.push_str(&format!("; {text}"));
    }

    let mut cluster_scoped: Vec<String> = roles
        .iter()
        .filter(|(_, scope)| *scope == Scope::Cluster)
        .map(|(o, _)| format!("{}: cluster-wide rights", o.describe()))
        .collect();
    if let Some((_, true)) = modes {
        cluster_scoped.push(
            "the CSV supports only the AllNamespaces install mode: its permissions are granted in every namespace"
                .into(),
        );
    }

    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for (role, _) in &roles {
        for (i, rule) in rules(role).enumerate() {
            let star: Vec<&str> = ["apiGroups", "resources", "verbs"]
                .into_iter()
                .filter(|f| str_list(&rule[*f]).contains(&"*"))
                .collect();
            if star.is_empty() {
                continue;
            }
            let verbs = str_list(&rule["verbs"]);
            let finding = format!("{} rule {}: `*` in {}", role.describe(), i + 1, star.join(", "));
            if verbs.iter().all(|v| READ_VERBS.contains(v)) {
                reads.push(finding);
            } else {
                writes.push(format!("{finding} (verbs: {})", verbs.join(", ")));
            }
        }
    }
    vec![
        CheckResult::new("rbac.present", looked_at.clone(), Vec::new()),
        CheckResult::new("rbac.namespaced", looked_at.clone(), cap(cluster_scoped)),
        CheckResult::new("rbac.no-wildcards", looked_at.clone(), cap(writes)),
        CheckResult::new("rbac.no-read-wildcards", looked_at, cap(reads)),
    ]
}

/// What the operator's rights show of capabilities a run must prove: managing autoscalers.
pub(super) fn hints(install: &[Object]) -> Vec<Hint> {
    let roles = operator_roles(install);
    if grants(&roles, &["autoscaling"], "horizontalpodautoscalers", &["create", "update", "patch"]) {
        vec![Hint { criterion: "L5.auto-scaling", text: "the operator may create HorizontalPodAutoscalers".into() }]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::super::CheckStatus;
    use super::*;
    use serde_json::json;

    fn obj(kind: &str, extra: Value) -> Object {
        let mut v = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": "op"}});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Object::built(v, "rbac.yaml")
    }

    fn by_id(results: &[CheckResult], id: &str) -> CheckResult {
        results.iter().find(|r| r.id == id).unwrap().clone()
    }

    fn deployment(account: &str) -> Object {
        Object::built(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"},
                   "spec": {"template": {"spec": {"serviceAccountName": account, "containers": []}}}}),
            "op.yaml",
        )
    }

    fn binding(kind: &str, role_kind: &str, role: &str, account: &str) -> Object {
        obj(
            kind,
            json!({"metadata": {"name": format!("{role}-{account}")},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "ns"}]}),
        )
    }

    #[test]
    fn a_namespaced_role_without_wildcards_passes() {
        let role =
            obj("Role", json!({"rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get"]}]}));
        let results = checks(&[role]);
        assert!(results.iter().all(|r| r.status == CheckStatus::Pass), "{results:?}");
    }

    #[test]
    fn cluster_roles_and_wildcards_fail_but_aggregated_user_roles_do_not() {
        let cluster = obj(
            "ClusterRole",
            json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]},
                             {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}]}),
        );
        let user_role = obj(
            "ClusterRole",
            json!({"metadata": {"name": "view-things", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                   "rules": [{"apiGroups": ["example.com"], "resources": ["*"], "verbs": ["*"]}]}),
        );
        let results = checks(&[cluster.clone(), user_role.clone()]);
        assert_eq!(by_id(&results, "rbac.namespaced").findings, ["ClusterRole op (rbac.yaml:1): cluster-wide rights"]);
        assert_eq!(
            by_id(&results, "rbac.no-wildcards").findings,
            ["ClusterRole op (rbac.yaml:1) rule 2: `*` in resources, verbs (verbs: *)"],
            "writing through `*` weighs more"
        );
        assert_eq!(
            by_id(&results, "rbac.no-read-wildcards").findings,
            ["ClusterRole op (rbac.yaml:1) rule 1: `*` in apiGroups, resources"],
            "than reading through it"
        );
    }

    /// A ClusterRole nothing binds to the operator is not its right; one bound through a
    /// RoleBinding is namespaced.
    #[test]
    fn only_roles_bound_to_the_operator_count() {
        let wide = obj(
            "ClusterRole",
            json!({"metadata": {"name": "metrics-reader"}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        );
        let mut manager = obj(
            "ClusterRole",
            json!({"rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]}),
        );
        manager.value["metadata"]["name"] = json!("manager");
        let objects = [
            deployment("op-sa"),
            wide.clone(),
            manager.clone(),
            binding("RoleBinding", "ClusterRole", "manager", "op-sa"),
        ];
        let results = checks(&objects);
        assert_eq!(by_id(&results, "rbac.present").detail, "1 role, 1 rule");
        assert_eq!(by_id(&results, "rbac.namespaced").status, CheckStatus::Pass, "bound in one namespace");
        let objects =
            [deployment("op-sa"), wide, manager, binding("ClusterRoleBinding", "ClusterRole", "manager", "op-sa")];
        assert_eq!(by_id(&checks(&objects), "rbac.namespaced").status, CheckStatus::Fail);
    }

    #[test]
    fn an_all_namespaces_only_csv_grants_its_permissions_everywhere() {
        let csv = |modes: Value| {
            Object::built(
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "x"},
                       "spec": {"installModes": modes}}),
                "csv.yaml",
            )
        };
        let mut role =
            obj("Role", json!({"rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get"]}]}));
        role.value["metadata"]["annotations"] = json!({GRANTED_BY_OLM: "op"});
        let all_only =
            json!([{"type": "OwnNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}]);
        let results = checks(&[csv(all_only), role.clone()]);
        let namespaced = by_id(&results, "rbac.namespaced");
        assert!(namespaced.detail.contains("install modes AllNamespaces"), "{}", namespaced.detail);
        assert_eq!(namespaced.findings.len(), 1, "{:?}", namespaced.findings);
        let own = json!([{"type": "OwnNamespace", "supported": true}, {"type": "AllNamespaces", "supported": true}]);
        assert_eq!(by_id(&checks(&[csv(own), role]), "rbac.namespaced").status, CheckStatus::Pass);
    }

    #[test]
    fn grants_understands_wildcards() {
        let role = obj(
            "Role",
            json!({"rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]}),
        );
        let roles = vec![&role];
        assert!(grants(&roles, &["coordination.k8s.io"], "leases", &["update"]));
        assert!(!grants(&roles, &[""], "events", &["create"]));
    }
}
