//! The PodDisruptionBudget: voluntary disruptions (drains) take one server at a time.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use statecraft_shared::statefulset::{self as set, Budget};

use super::Names;

/// At most one server of the cluster may be evicted at a time.
pub fn pdb(names: &Names) -> PodDisruptionBudget {
    set::pdb(&names.set(), Budget::MaxUnavailable(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

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
