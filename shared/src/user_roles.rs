//! ClusterRoles for the people who use an operator's resources, not for the operator:
//! `statecraft-<operator>-view` and `statecraft-<operator>-edit`, aggregated into
//! Kubernetes's built-in `view`, `edit` and `admin` roles. Custom resources are in none of
//! those by default, so without these a namespace's editor could not create a cluster. They
//! grant nothing by themselves: they reach a user only through a binding of a built-in role,
//! in the namespaces that binding covers. The operator's own rights stay its namespaced Role.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ObjectMeta;

/// The label that aggregates a ClusterRole into the built-in role `role`.
fn aggregate_to(role: &str) -> (String, String) {
    (format!("rbac.authorization.k8s.io/aggregate-to-{role}"), "true".into())
}

/// The `(group, plural, has a scale subresource)` of each CRD.
fn resources(crds: &[CustomResourceDefinition]) -> Vec<(String, String, bool)> {
    crds.iter()
        .map(|c| {
            let scale = c.spec.versions.iter().any(|v| v.subresources.as_ref().is_some_and(|s| s.scale.is_some()));
            (c.spec.group.clone(), c.spec.names.plural.clone(), scale)
        })
        .collect()
}

fn rule(group: &str, resources: Vec<String>, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

fn role(name: String, operator: &str, aggregate: &[&str], rules: Vec<PolicyRule>) -> ClusterRole {
    let mut labels: std::collections::BTreeMap<String, String> = aggregate.iter().map(|r| aggregate_to(r)).collect();
    labels.insert("app.kubernetes.io/name".into(), operator.into());
    labels.insert("app.kubernetes.io/part-of".into(), "statecraft".into());
    ClusterRole {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
        rules: Some(rules),
        ..Default::default()
    }
}

/// The view and edit ClusterRoles of `operator`'s resources `crds`: view reads them and
/// their status (aggregated into view, edit and admin); edit also creates, changes and
/// deletes them and scales those with a scale subresource (`kubectl scale`; into edit and
/// admin). Status is left to the operator: no user writes it.
pub fn user_roles(operator: &str, crds: &[CustomResourceDefinition]) -> Vec<ClusterRole> {
    let mut by_group: Vec<(String, Vec<(String, bool)>)> = Vec::new();
    for (group, plural, scale) in resources(crds) {
        match by_group.iter_mut().find(|(g, _)| *g == group) {
            Some((_, plurals)) => plurals.push((plural, scale)),
            None => by_group.push((group, vec![(plural, scale)])),
        }
    }
    let mut view = Vec::new();
    let mut edit = Vec::new();
    for (group, plurals) in &by_group {
        let names = |suffix: &str| plurals.iter().map(|(p, _)| format!("{p}{suffix}")).collect::<Vec<_>>();
        let mut read = names("");
        read.extend(names("/status"));
        view.push(rule(group, read, &["get", "list", "watch"]));
        edit.push(rule(group, names(""), &["create", "update", "patch", "delete", "deletecollection"]));
        let scaled: Vec<String> = plurals.iter().filter(|(_, s)| *s).map(|(p, _)| format!("{p}/scale")).collect();
        if !scaled.is_empty() {
            edit.push(rule(group, scaled, &["get", "update", "patch"]));
        }
    }
    vec![
        role(format!("{operator}-view"), operator, &["view", "edit", "admin"], view),
        role(format!("{operator}-edit"), operator, &["edit", "admin"], edit),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
        CustomResourceSubresourceScale, CustomResourceSubresources,
    };

    fn crd(plural: &str, scale: bool) -> CustomResourceDefinition {
        let subresources = scale.then(|| CustomResourceSubresources {
            scale: Some(CustomResourceSubresourceScale {
                spec_replicas_path: ".spec.replicas".into(),
                status_replicas_path: ".status.replicas".into(),
                label_selector_path: None,
            }),
            ..Default::default()
        });
        CustomResourceDefinition {
            spec: CustomResourceDefinitionSpec {
                group: "db.statecraft.io".into(),
                names: CustomResourceDefinitionNames { plural: plural.into(), ..Default::default() },
                versions: vec![CustomResourceDefinitionVersion { subresources, ..Default::default() }],
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn view_reads_edit_writes_and_scales_and_both_aggregate() {
        let roles = user_roles("statecraft-db", &[crd("dbclusters", true), crd("dbbackups", false)]);
        let [view, edit] = &roles[..] else { panic!("two roles: {roles:?}") };
        assert_eq!(view.metadata.name.as_deref(), Some("statecraft-db-view"));
        let labels = |r: &ClusterRole| r.metadata.labels.clone().unwrap_or_default();
        for built_in in ["view", "edit", "admin"] {
            assert_eq!(
                labels(view).get(&format!("rbac.authorization.k8s.io/aggregate-to-{built_in}")).map(String::as_str),
                Some("true")
            );
        }
        assert!(!labels(edit).contains_key("rbac.authorization.k8s.io/aggregate-to-view"), "viewers do not write");
        let rules = |r: &ClusterRole| r.rules.clone().unwrap_or_default();
        assert_eq!(rules(view)[0].verbs, ["get", "list", "watch"]);
        assert_eq!(
            rules(view)[0].resources.as_deref(),
            Some(&["dbclusters", "dbbackups", "dbclusters/status", "dbbackups/status"].map(String::from)[..])
        );
        let edit_rules = rules(edit);
        assert!(
            edit_rules[0].verbs.contains(&"create".to_string())
                && !edit_rules.iter().any(|r| r.verbs.contains(&"*".to_string()))
        );
        assert_eq!(edit_rules[1].resources.as_deref(), Some(&["dbclusters/scale".to_string()][..]), "only what scales");
        assert!(
            !edit_rules.iter().flat_map(|r| r.resources.clone().unwrap_or_default()).any(|r| r.ends_with("/status"))
        );
    }
}
