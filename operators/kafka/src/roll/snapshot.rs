//! One pass's observation of a cluster, as the roll reads it, and the engine's members built
//! from it. Plain data: the per-cluster loop fills it from Kubernetes and the admin client.

use statecraft_shared::upgrade::{Member, Role};

use crate::api::NodeRole;
use crate::observed::{Partition, Quorum};

/// `controller.quorum.fetch.timeout.ms` when the cluster does not set it (Kafka's default).
pub const DEFAULT_FETCH_TIMEOUT_MS: i64 = 2000;

/// The phases of a Kafka roll (see [`Member::phase`]): the standby controllers, then the
/// active controller, then the brokers.
const PHASE_STANDBY_CONTROLLERS: u32 = 0;
const PHASE_ACTIVE_CONTROLLER: u32 = 1;
const PHASE_BROKERS: u32 = 2;

/// One node (pod) of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its node id ([`crate::nodes`]).
    pub id: i32,
    /// Its pool's role.
    pub role: NodeRole,
    /// Its pod's name: the engine's member name.
    pub pod: String,
    /// Its pod is Ready (for Kafka pods: the operator's readiness gate is set).
    pub ready: bool,
    /// The pod's `controller-revision-hash`; empty when unknown.
    pub current_revision: String,
    /// Its StatefulSet's `status.updateRevision`; empty when unknown.
    pub target_revision: String,
    /// Registered with the controllers and unfenced (DescribeCluster with fenced brokers).
    /// Always false for a pure controller.
    pub broker_running: bool,
    /// In log recovery (broker state RECOVERY); `None` when its state could not be read.
    pub recovering: Option<bool>,
}

impl Node {
    /// Whether the node is a voter candidate of the metadata quorum (controller or combined).
    pub fn is_controller(&self) -> bool {
        matches!(self.role, NodeRole::Controller | NodeRole::Combined)
    }

    /// Whether the node serves partitions (broker or combined).
    pub fn is_broker(&self) -> bool {
        matches!(self.role, NodeRole::Broker | NodeRole::Combined)
    }
}

/// A partition with its topic's effective `min.insync.replicas`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionState {
    /// The partition as Metadata reports it.
    pub partition: Partition,
    /// The effective `min.insync.replicas` of its topic (topic override, else the cluster's).
    pub min_isr: i32,
}

/// Everything one pass observed that the roll decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Every node with a pod that is not terminating.
    pub nodes: Vec<Node>,
    /// The metadata quorum, as a controller describes it.
    pub quorum: Quorum,
    /// Every partition of the cluster.
    pub partitions: Vec<PartitionState>,
    /// Partition reassignments under way (ListPartitionReassignments).
    pub reassignments: usize,
    /// `controller.quorum.fetch.timeout.ms` as the controllers run it (read live, not from
    /// the spec: a value the spec does not set is still the one Kafka uses).
    pub fetch_timeout_ms: i64,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            nodes: Vec::new(),
            quorum: Quorum::default(),
            partitions: Vec::new(),
            reassignments: 0,
            fetch_timeout_ms: DEFAULT_FETCH_TIMEOUT_MS,
        }
    }
}

impl Snapshot {
    /// The node whose pod is `pod`.
    pub fn node(&self, pod: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.pod == pod)
    }

    /// The node with id `id`.
    pub fn node_by_id(&self, id: i32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Whether `node` is the active controller (the quorum's leader).
    pub fn is_active_controller(&self, node: &Node) -> bool {
        node.is_controller() && self.quorum.leader_id == Some(node.id)
    }

    /// The shared engine's members, in Kafka's phases: standby controllers (phase 0, unready
    /// first), the active controller (phase 1, the engine's leader), brokers (phase 2,
    /// unready first, as the engine's learners: observers of the metadata quorum).
    pub fn members(&self) -> Vec<Member> {
        self.nodes
            .iter()
            .map(|node| {
                let (phase, role) = if self.is_active_controller(node) {
                    (PHASE_ACTIVE_CONTROLLER, Role::Leader)
                } else if node.is_controller() {
                    (PHASE_STANDBY_CONTROLLERS, Role::Follower)
                } else {
                    (PHASE_BROKERS, Role::Learner)
                };
                Member {
                    name: node.pod.clone(),
                    role,
                    phase,
                    order: u32::try_from(node.id).unwrap_or(u32::MAX),
                    ready: node.ready,
                    current_revision: node.current_revision.clone(),
                    target_revision: node.target_revision.clone(),
                }
            })
            .collect()
    }

    /// The partitions that have a replica on node `id`.
    pub fn hosted_by(&self, id: i32) -> impl Iterator<Item = &PartitionState> {
        self.partitions.iter().filter(move |p| p.partition.replicas.contains(&id))
    }
}
