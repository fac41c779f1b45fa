//! What a user adds to every pod an operator creates for a cluster (`spec.podTemplate`):
//! where the pods may run (node selector, tolerations, affinity, topology spread, priority
//! class), the Secrets to pull their images with, and extra labels and annotations. The same
//! settings reach the members' StatefulSet pods and the cluster's backup and restore Jobs,
//! so a cluster confined to some nodes never has a Job scheduled elsewhere.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, PodTemplateSpec, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most extra labels or annotations: far beyond what a user writes, and a bound that keeps
/// the CEL rules' cost within the API server's budget.
const MAX_ENTRIES: u32 = 64;

/// A label or annotation key the operators set themselves: their own prefixes
/// (`<group>.statecraft.io/`, `statecraft.io/`), the recommended `app.kubernetes.io/` labels
/// they select pods by, and what the StatefulSet controller sets.
const RESERVED_KEY: &str =
    r"^(app\.kubernetes\.io/|([a-z0-9.-]*\.)?statecraft\.io/|statefulset\.kubernetes\.io/|controller-revision-hash$)";

/// What is added to every pod of the cluster (its members and its backup and restore Jobs).
/// Changing it replaces the members one at a time, in the same order as an upgrade.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    /// Nodes the pods may run on: only nodes with all these labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_ENTRIES))]
    pub node_selector: BTreeMap<String, String>,

    /// Taints the pods tolerate, e.g. nodes set aside for databases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Node affinity, pod affinity and pod anti-affinity. Without `podAntiAffinity` the
    /// operator prefers to put each member of the cluster on a different node; a
    /// `podAntiAffinity` given here replaces that preference (e.g. to require it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// How the pods spread over zones or nodes. A constraint without `labelSelector` counts
    /// the pods of this cluster (of the same role, where the system has roles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,

    /// PriorityClass of the pods; it must exist, or the pods are not created (the
    /// StatefulSet's and Job's Events say so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,

    /// Secrets in the cluster's namespace to pull the images with (private registries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// Labels added to the pods. Keys the operator sets itself (`app.kubernetes.io/…`,
    /// `…statecraft.io/…`, `statefulset.kubernetes.io/…`, `controller-revision-hash`) are
    /// refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = MAX_ENTRIES,
        "x-kubernetes-validations" = reserved_keys_rule("labels")
    ))]
    pub labels: BTreeMap<String, String>,

    /// Annotations added to the pods. The same keys as for labels are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = MAX_ENTRIES,
        "x-kubernetes-validations" = reserved_keys_rule("annotations")
    ))]
    pub annotations: BTreeMap<String, String>,
}

/// The CEL rule refusing reserved keys in `spec.podTemplate.<field>`, naming the first one.
fn reserved_keys_rule(field: &str) -> serde_json::Value {
    // A CEL string literal: each backslash of the regular expression escaped.
    let reserved = format!("k.matches('{}')", RESERVED_KEY.replace('\\', "\\\\"));
    serde_json::json!([{
        "rule": format!("!self.exists(k, {reserved})"),
        "messageExpression": format!(
            "'spec.podTemplate.{field}.' + self.filter(k, {reserved})[0] + ' is set by the operator and cannot be overridden'"
        ),
        "reason": "FieldValueForbidden",
    }])
}

impl PodTemplate {
    /// Nothing asked (the field is then left out when a spec is written back).
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Adds these settings to `template`, an operator-built pod template. The operator's
    /// own labels and annotations win over the user's (the schema refuses the clashes
    /// anyway); a topology spread constraint without a selector gets the template's labels.
    pub fn apply_to(&self, template: &mut PodTemplateSpec) {
        let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
        merge_missing(&mut meta.labels, &self.labels);
        merge_missing(&mut meta.annotations, &self.annotations);
        let own_labels = meta.labels.clone();
        let Some(pod) = template.spec.as_mut() else { return };

        merge_missing(&mut pod.node_selector, &self.node_selector);
        extend(&mut pod.tolerations, &self.tolerations);
        extend(&mut pod.image_pull_secrets, &self.image_pull_secrets);
        if self.priority_class_name.is_some() {
            pod.priority_class_name.clone_from(&self.priority_class_name);
        }
        if let Some(user) = &self.affinity {
            let affinity = pod.affinity.get_or_insert_with(Affinity::default);
            if user.node_affinity.is_some() {
                affinity.node_affinity.clone_from(&user.node_affinity);
            }
            if user.pod_affinity.is_some() {
                affinity.pod_affinity.clone_from(&user.pod_affinity);
            }
            if user.pod_anti_affinity.is_some() {
                affinity.pod_anti_affinity.clone_from(&user.pod_anti_affinity);
            }
        }
        let spread = self.topology_spread_constraints.iter().cloned().map(|mut c| {
            if c.label_selector.is_none() {
                c.label_selector = Some(LabelSelector { match_labels: own_labels.clone(), ..Default::default() });
            }
            c
        });
        extend(&mut pod.topology_spread_constraints, &spread.collect::<Vec<_>>());
    }
}

/// Adds the entries of `extra` whose keys `map` does not have yet.
fn merge_missing(map: &mut Option<BTreeMap<String, String>>, extra: &BTreeMap<String, String>) {
    if extra.is_empty() {
        return;
    }
    let map = map.get_or_insert_with(BTreeMap::new);
    for (k, v) in extra {
        map.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// Appends `extra` to the list, leaving an absent list absent when there is nothing to add.
fn extend<T: Clone>(list: &mut Option<Vec<T>>, extra: &[T]) {
    if !extra.is_empty() {
        list.get_or_insert_with(Vec::new).extend_from_slice(extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::spread_over_nodes;
    use k8s_openapi::api::core::v1::{NodeAffinity, NodeSelector, NodeSelectorTerm, PodAntiAffinity, PodSpec};

    fn operator_template() -> PodTemplateSpec {
        let labels = BTreeMap::from([("app.kubernetes.io/instance".to_string(), "db".to_string())]);
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.clone()),
                annotations: Some(BTreeMap::from([("x.statecraft.io/hash".into(), "1".into())])),
                ..Default::default()
            }),
            spec: Some(PodSpec { affinity: Some(spread_over_nodes(&labels)), ..Default::default() }),
        }
    }

    #[test]
    fn nothing_asked_changes_nothing() {
        let mut t = operator_template();
        PodTemplate::default().apply_to(&mut t);
        assert_eq!(t, operator_template());
    }

    #[test]
    fn every_setting_reaches_the_pod_and_the_operators_own_win() {
        let node_affinity = NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm::default()],
            }),
            ..Default::default()
        };
        let user: PodTemplate = serde_json::from_value(serde_json::json!({
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "db", "operator": "Exists", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {"team": "a"}}}
            ],
            "priorityClassName": "databases",
            "imagePullSecrets": [{"name": "registry"}],
            "labels": {"team": "a", "app.kubernetes.io/instance": "other"},
            "annotations": {"x.statecraft.io/hash": "2", "owner": "dba"},
            "affinity": {"nodeAffinity": serde_json::to_value(&node_affinity).unwrap()}
        }))
        .unwrap();
        let mut t = operator_template();
        user.apply_to(&mut t);
        let meta = t.metadata.unwrap();
        let labels = meta.labels.unwrap();
        assert_eq!(labels["team"], "a");
        assert_eq!(labels["app.kubernetes.io/instance"], "db", "the selector label is the operator's");
        let annotations = meta.annotations.unwrap();
        assert_eq!((annotations["owner"].as_str(), annotations["x.statecraft.io/hash"].as_str()), ("dba", "1"));

        let pod = t.spec.unwrap();
        assert_eq!(pod.node_selector.unwrap()["disk"], "ssd");
        assert_eq!(pod.tolerations.unwrap()[0].key.as_deref(), Some("db"));
        assert_eq!(pod.priority_class_name.as_deref(), Some("databases"));
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "registry");
        let affinity = pod.affinity.unwrap();
        assert_eq!(affinity.node_affinity, Some(node_affinity));
        assert!(affinity.pod_anti_affinity.is_some(), "the default spread stays when none is given");
        let spread = pod.topology_spread_constraints.unwrap();
        assert_eq!(
            spread[0].label_selector.as_ref().unwrap().match_labels.as_ref().unwrap()["app.kubernetes.io/instance"],
            "db",
            "a constraint without a selector counts this cluster's pods (with their final labels)"
        );
        assert_eq!(spread[1].label_selector.as_ref().unwrap().match_labels.as_ref().unwrap()["team"], "a");
    }

    #[test]
    fn a_given_pod_anti_affinity_replaces_the_default_spread() {
        let required = PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![Default::default()]),
            ..Default::default()
        };
        let user = PodTemplate {
            affinity: Some(Affinity { pod_anti_affinity: Some(required.clone()), ..Default::default() }),
            ..Default::default()
        };
        let mut t = operator_template();
        user.apply_to(&mut t);
        assert_eq!(t.spec.unwrap().affinity.unwrap().pod_anti_affinity, Some(required));
    }
}
