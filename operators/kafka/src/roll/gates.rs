//! Kafka's gates of the shared rolling engine, as pure rules over a [`Snapshot`].
//!
//! Strimzi's gates (research brief §1), plus what it lacks: the live
//! `controller.quorum.fetch.timeout.ms`, no restart during a reassignment, none of a broker in
//! log recovery. Every rule is recomputed from the snapshot on every call: nothing is
//! remembered between passes.

use statecraft_shared::upgrade::{Gate, Member, UpgradeGates};
use statecraft_shared::{Error, Result};

use super::snapshot::{Node, PartitionState, Snapshot};
use crate::reason::Kafka;

/// The gates over one pass's snapshot; hand them to [`statecraft_shared::upgrade::next_step`]
/// with [`Snapshot::members`].
#[derive(Debug, Clone, Copy)]
pub struct Gates<'a> {
    /// This pass's observation.
    pub snapshot: &'a Snapshot,
}

impl Gates<'_> {
    fn node(&self, member: &Member) -> Result<&Node> {
        self.snapshot
            .node(&member.name)
            .ok_or_else(|| Error::Permanent(format!("kafka roll: {} is not a node of the snapshot", member.name)))
    }
}

impl UpgradeGates for Gates<'_> {
    async fn may_restart(&self, member: &Member) -> Result<Gate> {
        Ok(may_restart(self.snapshot, self.node(member)?))
    }

    /// Opens at once: Kafka has no API to hand the metadata quorum's leadership over. The
    /// active controller resigns when it shuts down and the caught-up voters (the quorum gate
    /// made sure there are enough) elect a new leader within the election timeout; rolling it
    /// last keeps that to one election per roll.
    async fn before_restart(&self, _member: &Member) -> Result<Gate> {
        Ok(Gate::Open)
    }

    async fn caught_up(&self, member: &Member) -> Result<Gate> {
        Ok(caught_up(self.snapshot, self.node(member)?))
    }
}

/// Whether `node` may be restarted now. In order: no reassignment runs; a broker is not in
/// log recovery; a controller leaves a caught-up majority behind ([`quorum_gate`]); a broker
/// leaves every partition at or above its min ISR ([`min_isr_gate`]). A combined node passes
/// both of the last two.
pub fn may_restart(snapshot: &Snapshot, node: &Node) -> Gate {
    if snapshot.reassignments > 0 {
        return Gate::closed(
            Kafka::ReassignmentInProgress,
            format!(
                "not restarting {} while {} partition reassignment(s) are in progress",
                node.pod, snapshot.reassignments
            ),
        );
    }
    // An unknown state (the process does not answer) counts as not recovering, as in
    // Strimzi: a process that cannot be asked is down or stuck, restarting it is what fixes
    // it, and refusing would stall every roll behind a crash-looping pod.
    if node.is_broker() && node.recovering == Some(true) {
        return Gate::closed(
            Kafka::BrokerRecovering,
            format!("{} (node {}) is recovering its logs: it is not restarted until it is done", node.pod, node.id),
        );
    }
    if node.is_controller() {
        let gate = quorum_gate(snapshot, node);
        if !gate.is_open() {
            return gate;
        }
    }
    if node.is_broker() {
        return min_isr_gate(snapshot, node);
    }
    Gate::Open
}

/// Whether voter `id` is caught up with the quorum's leader: it is the leader, or the
/// leader's last caught-up time is less than `fetch_timeout_ms` after its own (Kafka's own
/// rule for a voter that could become leader without losing the log). A voter or leader
/// whose time Kafka does not know is not caught up.
pub fn is_caught_up_voter(snapshot: &Snapshot, id: i32) -> bool {
    let quorum = &snapshot.quorum;
    let Some(leader) = quorum.leader_id else { return false };
    if id == leader {
        return true;
    }
    let last_caught_up = |id: i32| quorum.voters.iter().find(|v| v.id == id).and_then(|v| v.last_caught_up_timestamp);
    match (last_caught_up(leader), last_caught_up(id)) {
        (Some(leader_at), Some(at)) => leader_at.saturating_sub(at) < snapshot.fetch_timeout_ms,
        _ => false,
    }
}

/// The controller gate: restart `node` only if the voters other than it that are caught up
/// ([`is_caught_up_voter`]) and whose node is ready are at least `(N + 2) / 2` of the N
/// voters, a majority of the whole quorum, so that the quorum keeps committing while the
/// node is down. Kafka's view lags: a voter whose pod was deleted a second ago still looks
/// caught up until its fetch timeout passes, so a node the snapshot has as not ready does
/// not count (a voter the snapshot has no node for is judged by Kafka alone).
///
/// A single-voter quorum always restarts, even without a leader: there is no other voter to
/// protect, and its only controller having no leader means it is the one not working. With
/// more voters, a quorum without a leader refuses: nobody can tell who is caught up. When
/// the quorum could not be described (no voters), N is the number of controller nodes.
pub fn quorum_gate(snapshot: &Snapshot, node: &Node) -> Gate {
    let quorum = &snapshot.quorum;
    let voters = match quorum.voters.len() {
        0 => snapshot.nodes.iter().filter(|n| n.is_controller()).count(),
        n => n,
    };
    if voters <= 1 {
        return Gate::Open;
    }
    if quorum.leader_id.is_none() {
        return Gate::closed(
            Kafka::NoActiveController,
            format!("not restarting {} (node {}): the metadata quorum has no leader", node.pod, node.id),
        );
    }
    let (caught_up, lagging): (Vec<i32>, Vec<i32>) = quorum
        .voters
        .iter()
        .map(|v| v.id)
        .filter(|&id| id != node.id)
        .partition(|&id| is_caught_up_voter(snapshot, id) && snapshot.node_by_id(id).is_none_or(|n| n.ready));
    let needed = (voters + 2) / 2;
    if caught_up.len() >= needed {
        return Gate::Open;
    }
    let lagging = lagging.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
    Gate::closed(
        Kafka::QuorumNotCaughtUp,
        format!(
            "restarting {} (node {}) would leave {} caught-up voters of {voters}, {needed} needed \
             (not caught up within {} ms: [{lagging}])",
            node.pod,
            node.id,
            caught_up.len(),
            snapshot.fetch_timeout_ms
        ),
    )
}

/// Why one partition refuses a broker's restart.
enum MinIsrRefusal {
    /// Its ISR is below its min ISR already.
    Under,
    /// The broker is in an ISR exactly at min ISR.
    WouldDrop,
}

/// Strimzi's rule for one partition hosted by `broker`.
///
/// A partition whose replication factor is at most its min ISR is skipped: with one replica
/// down it can never keep min ISR in-sync replicas, so the rule could only refuse, and would
/// block every roll of such a topic forever. Whoever set RF ≤ min ISR chose no redundancy:
/// producers with `acks=all` see `NotEnoughReplicas` while the broker restarts, which is
/// what that setting means.
fn min_isr_refusal(p: &PartitionState, broker: i32) -> Option<MinIsrRefusal> {
    let replication_factor = i64::try_from(p.partition.replicas.len()).unwrap_or(i64::MAX);
    let min_isr = i64::from(p.min_isr);
    if replication_factor <= min_isr {
        return None;
    }
    let isr = i64::try_from(p.partition.isr.len()).unwrap_or(i64::MAX);
    if isr < min_isr {
        Some(MinIsrRefusal::Under)
    } else if isr == min_isr && p.partition.isr.contains(&broker) {
        Some(MinIsrRefusal::WouldDrop)
    } else {
        None
    }
}

/// The broker gate: refuse if a partition with a replica on `node` is below its min ISR
/// already ([`Kafka::PartitionUnderMinIsr`]), or is exactly at min ISR with `node` in the
/// ISR and min ISR below its replication factor ([`Kafka::WouldDropBelowMinIsr`]). A
/// partition already under min ISR refuses first: it is the worse news.
///
/// The ISR counted is Kafka's without the replicas on brokers the snapshot has as not
/// running: Kafka keeps a stopped replica in the ISR for up to `replica.lag.time.max.ms`
/// (30 s), and a gate that trusted it would restart a second broker while the first is
/// still down.
pub fn min_isr_gate(snapshot: &Snapshot, node: &Node) -> Gate {
    let mut under = Vec::new();
    let mut would_drop = Vec::new();
    let running = |id: &i32| snapshot.node_by_id(*id).is_none_or(|n| !n.is_broker() || n.broker_running);
    for hosted in snapshot.hosted_by(node.id) {
        let mut p = hosted.clone();
        p.partition.isr.retain(running);
        match min_isr_refusal(&p, node.id) {
            Some(MinIsrRefusal::Under) => under.push(p),
            Some(MinIsrRefusal::WouldDrop) => would_drop.push(p),
            None => {}
        }
    }
    if let Some(first) = under.first() {
        return Gate::closed(
            Kafka::PartitionUnderMinIsr,
            format!(
                "not restarting {} (node {}): {} has {} in-sync replicas, below its min.insync.replicas {}{}",
                node.pod,
                node.id,
                partition_name(first),
                first.partition.isr.len(),
                first.min_isr,
                more(under.len())
            ),
        );
    }
    if let Some(first) = would_drop.first() {
        return Gate::closed(
            Kafka::WouldDropBelowMinIsr,
            format!(
                "restarting {} (node {}) would drop {} below its min.insync.replicas {}{}",
                node.pod,
                node.id,
                partition_name(first),
                first.min_isr,
                more(would_drop.len())
            ),
        );
    }
    Gate::Open
}

/// Whether `node`, back on its target revision and ready, has caught up: a controller is a
/// caught-up voter ([`Kafka::ControllerNotCaughtUp`]); a broker is registered and unfenced
/// ([`Kafka::BrokerNotRunning`]) and back in the ISR of every partition it hosts
/// ([`Kafka::BrokerNotInSync`]). A combined node must be both.
pub fn caught_up(snapshot: &Snapshot, node: &Node) -> Gate {
    if node.is_controller() && !is_caught_up_voter(snapshot, node.id) {
        return Gate::closed(
            Kafka::ControllerNotCaughtUp,
            format!("{} (node {}) is not a caught-up voter of the metadata quorum yet", node.pod, node.id),
        );
    }
    if !node.is_broker() {
        return Gate::Open;
    }
    if !node.broker_running {
        return Gate::closed(
            Kafka::BrokerNotRunning,
            format!("{} (node {}) is not registered and unfenced yet", node.pod, node.id),
        );
    }
    let out_of_sync: Vec<&PartitionState> =
        snapshot.hosted_by(node.id).filter(|p| !p.partition.isr.contains(&node.id)).collect();
    match out_of_sync.first() {
        None => Gate::Open,
        Some(first) => Gate::closed(
            Kafka::BrokerNotInSync,
            format!(
                "{} (node {}) is not back in the ISR of {}{}",
                node.pod,
                node.id,
                partition_name(first),
                more(out_of_sync.len())
            ),
        ),
    }
}

/// The partitions whose preferred leader (first replica) is a running broker in their ISR
/// but does not lead them, as `(topic, partition)`: what the loop asks ElectLeaders
/// (PREFERRED) for after a broker is back, so that leadership returns to where the
/// assignment put it instead of piling up on the brokers restarted earlier (Kafka's own
/// `auto.leader.rebalance.enable` would take up to five minutes and an imbalance threshold).
/// Empty when there is nothing to elect, so calling it every pass writes nothing in steady
/// state.
pub fn preferred_elections(snapshot: &Snapshot) -> Vec<(String, i32)> {
    snapshot
        .partitions
        .iter()
        .map(|p| &p.partition)
        .filter(|p| {
            p.replicas.first().is_some_and(|&preferred| {
                p.leader != Some(preferred)
                    && p.isr.contains(&preferred)
                    && snapshot.node_by_id(preferred).is_some_and(|n| n.is_broker() && n.broker_running)
            })
        })
        .map(|p| (p.topic.clone(), p.index))
        .collect()
}

fn partition_name(p: &PartitionState) -> String {
    format!("partition {}-{}", p.partition.topic, p.partition.index)
}

/// " and N more partitions" for a message that names the first of `count`.
fn more(count: usize) -> String {
    match count {
        0 | 1 => String::new(),
        n => format!(" (and {} more partitions)", n - 1),
    }
}
