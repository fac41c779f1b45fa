//! The NetworkPolicy of a cluster that asks for one (`spec.networkPolicy`): the members
//! among themselves (client, peer and metrics ports), the operator on the client and metrics
//! ports (it reads each member's metrics), the cluster's backup Jobs on the client port, the
//! clients the spec names on the client port and the scrapers it names on the metrics port.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use statecraft_shared::deploy::operator_labels;
use statecraft_shared::network_policy::{self as shared, NetworkAccess, Ports};
use statecraft_shared::runner::Operator;

use super::jobs::CLUSTER_LABEL;
use super::{CLIENT_PORT, METRICS_PORT, Names, PEER_PORT};
use crate::EtcdOperator;

/// The cluster's NetworkPolicy; `None` when the spec asks for none.
pub fn network_policy(access: Option<&NetworkAccess>, names: &Names) -> Option<NetworkPolicy> {
    let ports = Ports {
        client: &[CLIENT_PORT],
        member: &[PEER_PORT],
        metrics: &[METRICS_PORT],
        operator: operator_labels(EtcdOperator::NAME),
        jobs: BTreeMap::from([(CLUSTER_LABEL.to_string(), names.cluster.clone())]),
    };
    Some(shared::network_policy(&names.set(), access?, &ports))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;

    #[test]
    fn members_reach_each_other_on_the_peer_port_and_nobody_else_does() {
        let names = Names::new("main", "ns");
        assert_eq!(network_policy(None, &names), None);
        let p = network_policy(Some(&NetworkAccess::default()), &names).expect("asked for");
        let ingress = p.spec.and_then(|s| s.ingress).unwrap_or_default();
        let with_peer: Vec<_> = ingress
            .iter()
            .filter(|r| r.ports.iter().flatten().any(|p| p.port == Some(IntOrString::Int(PEER_PORT))))
            .collect();
        assert_eq!(with_peer.len(), 1, "one rule opens the peer port");
        let from = with_peer[0].from.clone().unwrap_or_default();
        assert_eq!(from.len(), 1);
        assert_eq!(from[0].pod_selector.as_ref().and_then(|s| s.match_labels.clone()), Some(names.set().selector()));
    }
}
