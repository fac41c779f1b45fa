//! The StatefulSet around an operator's pod template.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::Names;
use crate::pod_template::PodTemplate;

/// What a system puts into its StatefulSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    /// How many pods.
    pub replicas: i32,
    /// The pod.
    pub pod: PodSpec,
    /// Labels the pods carry besides the selector's (e.g. their role).
    pub pod_labels: BTreeMap<String, String>,
    /// Annotations of the pod template (a change makes a new revision).
    pub pod_annotations: Option<BTreeMap<String, String>>,
    /// The data volume claim template (see [`super::data_claim_template`]).
    pub claim: PersistentVolumeClaim,
    /// What happens to claims when pods are scaled away or the set is deleted; `None`:
    /// the API server's default (both kept).
    pub claim_retention: Option<StatefulSetPersistentVolumeClaimRetentionPolicy>,
    /// What the user adds to every pod (the cluster's `spec.podTemplate`).
    pub pod_template: PodTemplate,
}

/// The StatefulSet of `parts`, behind the headless Service. The operator, not the
/// StatefulSet controller, decides roles and order: pods are created in parallel (members
/// that need each other to become ready start together after a full outage, where
/// `OrderedReady` would deadlock) and replaced only when the operator deletes them
/// (`OnDelete`), so that an upgrade goes in the order the operator plans.
pub fn statefulset(names: &Names<'_>, parts: Parts) -> StatefulSet {
    let selector = names.selector();
    let mut labels = parts.pod_labels;
    labels.extend(selector.clone());
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(labels), annotations: parts.pod_annotations, ..Default::default() }),
        spec: Some(parts.pod),
    };
    parts.pod_template.apply_to(&mut template);
    StatefulSet {
        metadata: names.meta(names.statefulset()),
        spec: Some(StatefulSetSpec {
            replicas: Some(parts.replicas),
            service_name: Some(names.headless_service()),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy { type_: Some("OnDelete".into()), ..Default::default() }),
            persistent_volume_claim_retention_policy: parts.claim_retention,
            selector: LabelSelector { match_labels: Some(selector), ..Default::default() },
            template,
            volume_claim_templates: Some(vec![parts.claim]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statefulset::data_claim_template;
    use crate::statefulset::names::tests::names;

    #[test]
    fn the_operator_orders_pods_behind_the_headless_service() {
        let claim = data_claim_template(&names(), "1Gi", None);
        let sts = statefulset(&names(), Parts { replicas: 3, claim: claim.clone(), ..Default::default() });
        assert_eq!(sts.metadata.name.as_deref(), Some("db"));
        assert_eq!(sts.metadata.labels, Some(names().selector()));
        let spec = sts.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.service_name.as_deref(), Some("db-hl"));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        assert_eq!(spec.update_strategy.unwrap().type_.as_deref(), Some("OnDelete"));
        assert_eq!(spec.persistent_volume_claim_retention_policy, None);
        assert_eq!(spec.selector.match_labels, Some(names().selector()));
        let template = spec.template.metadata.unwrap();
        assert_eq!(template.labels, Some(names().selector()));
        assert_eq!(template.annotations, None);
        assert_eq!(spec.volume_claim_templates, Some(vec![claim]));
    }

    #[test]
    fn the_pods_get_the_operators_labels_and_the_users_template() {
        let parts = Parts {
            pod_labels: BTreeMap::from([("x.statecraft.io/role".to_string(), "broker".to_string())]),
            pod_template: PodTemplate {
                labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
                priority_class_name: Some("databases".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let template = statefulset(&names(), parts).spec.unwrap().template;
        let labels = template.metadata.unwrap().labels.unwrap();
        assert!(names().selector().iter().all(|(k, v)| labels.get(k) == Some(v)), "the selector still matches");
        assert_eq!((labels["x.statecraft.io/role"].as_str(), labels["team"].as_str()), ("broker", "a"));
        assert_eq!(template.spec.unwrap().priority_class_name.as_deref(), Some("databases"));
    }
}
