//! The PodDisruptionBudget: how many pods voluntary disruptions (drains) may take at once.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Names;

/// What the budget keeps: a system decides it from what it can lose (one server of a
/// primary-replica cluster, anything above quorum of a consensus cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// At most this many pods unavailable (`maxUnavailable`).
    MaxUnavailable(i32),
    /// At least this many pods available (`minAvailable`).
    MinAvailable(i32),
}

/// The cluster's PodDisruptionBudget over all its pods.
pub fn pdb(names: &Names<'_>, budget: Budget) -> PodDisruptionBudget {
    let (max_unavailable, min_available) = match budget {
        Budget::MaxUnavailable(n) => (Some(IntOrString::Int(n)), None),
        Budget::MinAvailable(n) => (None, Some(IntOrString::Int(n))),
    };
    PodDisruptionBudget {
        metadata: names.meta(names.pdb()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable,
            min_available,
            selector: Some(LabelSelector { match_labels: Some(names.selector()), ..Default::default() }),
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
    fn the_budget_selects_every_pod_and_sets_one_bound() {
        let p = pdb(&names(), Budget::MaxUnavailable(1));
        assert_eq!(p.metadata.name.as_deref(), Some("db"));
        let spec = p.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.min_available, None);
        assert_eq!(spec.selector.unwrap().match_labels, Some(names().selector()));
        let spec = pdb(&names(), Budget::MinAvailable(2)).spec.unwrap();
        assert_eq!((spec.min_available, spec.max_unavailable), (Some(IntOrString::Int(2)), None));
    }
}
