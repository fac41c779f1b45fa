//! How a cluster's nodes are numbered: one rule for the pods (which compute their own
//! `node.id` from their ordinal when they start), the roll planner and the status.
//!
//! - A controller or combined node's id is its ordinal: `<cluster>-controller-2` is node 2.
//! - A broker's id is [`BROKER_ID_BASE`] plus its ordinal: `<cluster>-broker-0` is node 100.
//!
//! Controllers and brokers never share an id, so an id alone says which pool a node is in;
//! ids stay put when a pool grows or shrinks (part 2 scales both).

use crate::api::NodeRole;
use crate::api::cluster::MAX_BROKERS;

/// Id of the first broker of a cluster with separate pools.
pub const BROKER_ID_BASE: i32 = 100;

const _: () = assert!(BROKER_ID_BASE >= 5, "controller ids (0..5) must stay below the brokers'");
const _: () = assert!(MAX_BROKERS <= BROKER_ID_BASE, "broker ids must not overlap when counted down");

/// The node id of the pod with `ordinal` in a pool of `role`.
pub fn node_id(role: NodeRole, ordinal: i32) -> i32 {
    match role {
        NodeRole::Controller | NodeRole::Combined => ordinal,
        NodeRole::Broker => BROKER_ID_BASE + ordinal,
    }
}

/// The ordinal of node `id` in a pool of `role`, if `id` belongs to such a pool.
pub fn ordinal(role: NodeRole, id: i32) -> Option<i32> {
    let ordinal = match role {
        NodeRole::Controller | NodeRole::Combined => id,
        NodeRole::Broker => id - BROKER_ID_BASE,
    };
    let max = match role {
        NodeRole::Controller => 5,
        NodeRole::Broker | NodeRole::Combined => MAX_BROKERS,
    };
    (0..max).contains(&ordinal).then_some(ordinal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_ordinals_round_trip_and_never_overlap() {
        for role in [NodeRole::Controller, NodeRole::Broker, NodeRole::Combined] {
            for ordinal in 0..5 {
                assert_eq!(super::ordinal(role, node_id(role, ordinal)), Some(ordinal));
            }
        }
        assert_eq!(node_id(NodeRole::Broker, 0), 100);
        assert_eq!(ordinal(NodeRole::Broker, 3), None);
        assert_eq!(ordinal(NodeRole::Controller, 100), None);
        assert_eq!(ordinal(NodeRole::Controller, 5), None);
    }
}
