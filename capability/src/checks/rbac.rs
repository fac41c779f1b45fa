//! Checks of the operator's RBAC: present, namespaced, no wildcards.

use serde_json::Value;

use super::{CheckResult, cap, plural, str_list};
use crate::manifests::Object;

pub(super) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// ClusterRoles that extend the built-in user roles (`view`, `edit`, `admin`) are for the
/// cluster's users, not for the operator: they are not counted against it.
fn is_aggregated(o: &Object) -> bool {
    o.value["aggregationRule"].is_object()
        || o.value["metadata"]["labels"]
            .as_object()
            .is_some_and(|l| l.keys().any(|k| k.starts_with("rbac.authorization.k8s.io/aggregate-to-")))
}

/// The operator's own Roles and ClusterRoles.
pub(super) fn operator_roles(install: &[Object]) -> Vec<&Object> {
    install
        .iter()
        .filter(|o| (o.is(RBAC_GROUP, "Role") || o.is(RBAC_GROUP, "ClusterRole")) && !is_aggregated(o))
        .collect()
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

pub(super) fn checks(install: &[Object]) -> Vec<CheckResult> {
    let roles = operator_roles(install);
    if roles.is_empty() {
        let none = "no Role or ClusterRole ships for the operator";
        return vec![
            CheckResult::fail("rbac.present", none),
            CheckResult::not_assessable("rbac.namespaced", none),
            CheckResult::not_assessable("rbac.no-wildcards", none),
        ];
    }
    let rule_count: usize = roles.iter().map(|r| rules(r).count()).sum();
    let looked_at = format!("{}, {}", plural(roles.len(), "role", "roles"), plural(rule_count, "rule", "rules"));

    let cluster_scoped: Vec<String> = install
        .iter()
        .filter(|o| (o.is(RBAC_GROUP, "ClusterRole") && !is_aggregated(o)) || o.is(RBAC_GROUP, "ClusterRoleBinding"))
        .map(|o| format!("{}: cluster-wide rights", o.describe()))
        .collect();

    let mut wildcards = Vec::new();
    for role in &roles {
        for (i, rule) in rules(role).enumerate() {
            let star: Vec<&str> = ["apiGroups", "resources", "verbs"]
                .into_iter()
                .filter(|f| str_list(&rule[*f]).contains(&"*"))
                .collect();
            if !star.is_empty() {
                wildcards.push(format!("{} rule {}: `*` in {}", role.describe(), i + 1, star.join(", ")));
            }
        }
    }
    vec![
        CheckResult::new("rbac.present", looked_at.clone(), Vec::new()),
        CheckResult::new("rbac.namespaced", looked_at.clone(), cap(cluster_scoped)),
        CheckResult::new("rbac.no-wildcards", looked_at, cap(wildcards)),
    ]
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

    #[test]
    fn a_namespaced_role_without_wildcards_passes() {
        let role =
            obj("Role", json!({"rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get"]}]}));
        let results = checks(&[role]);
        assert!(results.iter().all(|r| r.status == CheckStatus::Pass), "{results:?}");
    }

    #[test]
    fn cluster_roles_and_wildcards_fail_but_aggregated_user_roles_do_not() {
        let cluster =
            obj("ClusterRole", json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}]}));
        let binding = obj("ClusterRoleBinding", json!({}));
        let user_role = obj(
            "ClusterRole",
            json!({"metadata": {"name": "view-things", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                   "rules": [{"apiGroups": ["example.com"], "resources": ["*"], "verbs": ["*"]}]}),
        );
        let results = checks(&[cluster, binding, user_role]);
        let r = |id: &str| results.iter().find(|r| r.id == id).unwrap().clone();
        assert_eq!(r("rbac.namespaced").status, CheckStatus::Fail);
        assert_eq!(r("rbac.namespaced").findings.len(), 2, "{:?}", r("rbac.namespaced").findings);
        assert_eq!(
            r("rbac.no-wildcards").findings,
            ["ClusterRole op (rbac.yaml:1) rule 1: `*` in apiGroups, resources"]
        );
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
