//! The StatefulSet around an operator's pod template.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::Names;

/// What a system puts into its StatefulSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    /// How many pods.
    pub replicas: i32,
    /// The pod.
    pub pod: PodSpec,
    /// Annotations of the pod template (a change makes a new revision).
    pub pod_annotations: Option<BTreeMap<String, String>>,
    /// The data volume claim template (see [`super::data_claim_template`]).
    pub claim: PersistentVolumeClaim,
    /// What happens to claims when pods are scaled away or the set is deleted; `None`:
    /// the API server's default (both kept).
    pub claim_retention: Option<StatefulSetPersistentVolumeClaimRetentionPolicy>,
}

/// The StatefulSet of `parts`, behind the headless Service. The operator, not the
/// StatefulSet controller, decides roles and order: pods are created in parallel (members
/// that need each other to become ready start together after a full outage, where
/// `OrderedReady` would deadlock) and replaced only when the operator deletes them
/// (`OnDelete`), so that an upgrade goes in the order the operator plans.
pub fn statefulset(names: &Names<'_>, parts: Parts) -> StatefulSet {
    let selector = names.selector();
    StatefulSet {
        metadata: names.meta(names.statefulset()),
        spec: Some(StatefulSetSpec {
            replicas: Some(parts.replicas),
            service_name: Some(names.headless_service()),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy { type_: Some("OnDelete".into()), ..Default::default() }),
            persistent_volume_claim_retention_policy: parts.claim_retention,
            selector: LabelSelector { match_labels: Some(selector.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector),
                    annotations: parts.pod_annotations,
                    ..Default::default()
                }),
                spec: Some(parts.pod),
            },
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
}
