//! The PodDisruptionBudget: voluntary disruptions (drains) never take the cluster below
//! quorum.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Names;
use crate::membership::plan::quorum;

/// `minAvailable` = the quorum of the desired member count.
pub fn pdb(names: &Names, replicas: u32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(names.pdb()),
            namespace: Some(names.namespace.clone()),
            labels: Some(names.selector()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(quorum(replicas as usize) as i32)),
            selector: Some(LabelSelector { match_labels: Some(names.selector()), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_available_is_quorum() {
        let n = Names::new("main", "prod");
        for (replicas, min) in [(1, 1), (3, 2), (5, 3), (7, 4)] {
            assert_eq!(pdb(&n, replicas).spec.unwrap().min_available, Some(IntOrString::Int(min)));
        }
    }
}
