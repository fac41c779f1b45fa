//! The PodDisruptionBudget: voluntary disruptions (drains) never take the cluster below
//! quorum.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use statecraft_shared::statefulset::{self as set, Budget};

use super::Names;
use crate::membership::plan::quorum;

/// `minAvailable` = the quorum of the desired member count.
pub fn pdb(names: &Names, replicas: u32) -> PodDisruptionBudget {
    set::pdb(&names.set(), Budget::MinAvailable(quorum(replicas as usize) as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    #[test]
    fn min_available_is_quorum() {
        let n = Names::new("main", "prod");
        for (replicas, min) in [(1, 1), (3, 2), (5, 3), (7, 4)] {
            assert_eq!(pdb(&n, replicas).spec.unwrap().min_available, Some(IntOrString::Int(min)));
        }
    }
}
