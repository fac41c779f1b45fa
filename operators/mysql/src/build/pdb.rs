//! The PodDisruptionBudget: voluntary disruptions (drains) take one server at a time.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Names;

/// At most one server of the cluster may be evicted at a time.
pub fn pdb(names: &Names) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(names.pdb()),
            namespace: Some(names.namespace.clone()),
            labels: Some(names.selector_labels()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector { match_labels: Some(names.selector_labels()), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server_at_a_time() {
        let p = pdb(&Names::new("db", "ns"));
        assert_eq!(p.metadata.name.as_deref(), Some("db"));
        let spec = p.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.min_available, None);
        assert_eq!(spec.selector.unwrap().match_labels, Some(Names::new("db", "ns").selector_labels()));
    }
}
