//! The data volume claim template: each pod's own volume, kept across restarts.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{DATA_VOLUME, Names};

/// The claim template [`DATA_VOLUME`]: `size` (a quantity) of `storage_class` (the
/// cluster's default without one), mounted by one pod at a time.
pub fn data_claim_template(names: &Names<'_>, size: &str, storage_class: Option<String>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(DATA_VOLUME.into()), labels: Some(names.selector()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: storage_class,
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(size.to_string()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statefulset::names::tests::names;

    #[test]
    fn the_claim_asks_for_the_size_in_the_class() {
        let c = data_claim_template(&names(), "20Gi", Some("fast".into()));
        assert_eq!(c.metadata.name.as_deref(), Some("data"));
        assert_eq!(c.metadata.namespace, None, "a template: the StatefulSet's namespace");
        assert_eq!(c.metadata.labels, Some(names().selector()));
        let spec = c.spec.unwrap();
        assert_eq!(spec.access_modes.as_deref(), Some(&["ReadWriteOnce".to_string()][..]));
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(spec.resources.unwrap().requests.unwrap()["storage"].0, "20Gi");
        assert_eq!(data_claim_template(&names(), "1Gi", None).spec.unwrap().storage_class_name, None);
    }
}
