//! Property tests of the roll over generated observations.
//!
//! One step over any snapshot (layouts, readiness, revisions, quorum lags, leaders or none,
//! partitions with any ISR and min ISR, reassignments, recovering brokers) must keep Kafka's
//! safety rules; a simulated cluster rolled step by step with the real gates must converge,
//! one node in flight at a time, each restarted once, controllers before brokers and the
//! active controller last of them.

use std::collections::BTreeSet;

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use statecraft_shared::upgrade::{Action, Step, UpgradeProgress, next_step_at};

use super::*;
use crate::api::NodeRole;
use crate::observed::{Partition, Quorum, QuorumReplica};

const NOW_MS: i64 = 1_700_000_000_000;

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0).single().unwrap_or_default()
}

fn pod(role: NodeRole, id: i32) -> String {
    match role {
        NodeRole::Controller => format!("k-controller-{id}"),
        NodeRole::Broker => format!("k-broker-{}", id - crate::nodes::BROKER_ID_BASE),
        NodeRole::Combined => format!("k-combined-{id}"),
    }
}

/// The node ids of a layout: controller-capable ids, broker-capable ids, and every node with
/// its role.
fn layout(combined: bool, controllers: usize, brokers: usize) -> Vec<(i32, NodeRole)> {
    let controllers = (0..controllers).filter_map(|i| i32::try_from(i).ok());
    if combined {
        controllers.map(|id| (id, NodeRole::Combined)).collect()
    } else {
        let brokers = (0..brokers).filter_map(|i| i32::try_from(i).ok()).map(|i| crate::nodes::BROKER_ID_BASE + i);
        controllers.map(|id| (id, NodeRole::Controller)).chain(brokers.map(|id| (id, NodeRole::Broker))).collect()
    }
}

fn broker_ids(nodes: &[(i32, NodeRole)]) -> Vec<i32> {
    nodes.iter().filter(|(_, r)| *r != NodeRole::Controller).map(|(id, _)| *id).collect()
}

/// `picks` mapped onto `ids`, distinct, at most `rf` of them: a partition's replicas.
fn replicas(ids: &[i32], picks: &[usize], rf: usize) -> Vec<i32> {
    let mut out = Vec::new();
    for pick in picks {
        let Some(id) = ids.get(pick % ids.len().max(1)) else { continue };
        if !out.contains(id) && out.len() < rf {
            out.push(*id);
        }
    }
    out
}

// ---- one step over any snapshot ----

#[derive(Clone, Debug)]
struct GenNode {
    ready: bool,
    /// 0: old revision, 1: target, 2: unknown.
    revision: u8,
    target_unknown: bool,
    running: bool,
    recovering: Option<bool>,
    done: bool,
}

#[derive(Clone, Debug)]
struct GenPartition {
    picks: Vec<usize>,
    rf: usize,
    isr_mask: Vec<bool>,
    min_isr: i32,
}

#[derive(Clone, Debug)]
struct Situation {
    combined: bool,
    controllers: usize,
    brokers: usize,
    nodes: Vec<GenNode>,
    /// Per controller: missing from the voters, and its lag behind the leader (None: unknown).
    voters: Vec<(bool, Option<i64>)>,
    leader: Option<usize>,
    fetch_timeout_ms: i64,
    partitions: Vec<GenPartition>,
    reassignments: usize,
}

fn gen_node() -> impl Strategy<Value = GenNode> {
    (
        prop::bool::weighted(0.8),
        prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8)],
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.85),
        prop_oneof![6 => Just(Some(false)), 1 => Just(Some(true)), 2 => Just(None)],
        prop::bool::weighted(0.3),
    )
        .prop_map(|(ready, revision, target_unknown, running, recovering, done)| GenNode {
            ready,
            revision,
            target_unknown,
            running,
            recovering,
            done,
        })
}

fn gen_partition() -> impl Strategy<Value = GenPartition> {
    (prop::collection::vec(0..10usize, 3), 1..=3usize, prop::collection::vec(prop::bool::weighted(0.8), 3), 1..=3i32)
        .prop_map(|(picks, rf, isr_mask, min_isr)| GenPartition { picks, rf, isr_mask, min_isr })
}

fn situation() -> impl Strategy<Value = Situation> {
    let lag = prop_oneof![5 => 0..1500i64, 2 => 1500..10_000i64];
    (
        (any::<bool>(), prop_oneof![Just(1usize), Just(3), Just(5)], 1..=6usize),
        prop::collection::vec(gen_node(), 11),
        prop::collection::vec((prop::bool::weighted(0.05), prop::option::weighted(0.9, lag)), 5),
        prop::option::weighted(0.9, 0..5usize),
        prop_oneof![3 => Just(DEFAULT_FETCH_TIMEOUT_MS), 1 => 100..8000i64],
        prop::collection::vec(gen_partition(), 0..10),
        prop_oneof![9 => Just(0usize), 1 => 1..4usize],
    )
        .prop_map(
            |((combined, controllers, brokers), nodes, voters, leader, fetch_timeout_ms, partitions, reassignments)| {
                Situation {
                    combined,
                    controllers,
                    brokers,
                    nodes,
                    voters,
                    leader: leader.map(|l| l % controllers),
                    fetch_timeout_ms,
                    partitions,
                    reassignments,
                }
            },
        )
}

impl Situation {
    fn snapshot(&self) -> Snapshot {
        let ids = layout(self.combined, self.controllers, self.brokers);
        let nodes = ids
            .iter()
            .zip(&self.nodes)
            .map(|(&(id, role), g)| Node {
                id,
                role,
                pod: pod(role, id),
                ready: g.ready,
                current_revision: ["old", "new", ""][usize::from(g.revision)].into(),
                target_revision: if g.target_unknown { String::new() } else { "new".into() },
                broker_running: role != NodeRole::Controller && g.running,
                recovering: g.recovering,
            })
            .collect();
        let leader = self.leader.and_then(|l| i32::try_from(l).ok());
        let voters = (0..self.controllers)
            .zip(&self.voters)
            .filter(|(_, (missing, _))| !missing)
            .filter_map(|(i, (_, lag))| {
                let id = i32::try_from(i).ok()?;
                let lag = if Some(id) == leader { Some(0) } else { *lag };
                Some(QuorumReplica {
                    id,
                    last_caught_up_timestamp: lag.map(|l| NOW_MS - l),
                    ..QuorumReplica::default()
                })
            })
            .collect();
        let hosts = broker_ids(&ids);
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let replicas = replicas(&hosts, &g.picks, g.rf);
                let isr: Vec<i32> = replicas.iter().zip(&g.isr_mask).filter(|(_, m)| **m).map(|(r, _)| *r).collect();
                PartitionState {
                    partition: Partition {
                        topic: format!("t{}", i % 3),
                        index: i32::try_from(i).unwrap_or_default(),
                        leader: isr.first().copied(),
                        replicas,
                        isr,
                    },
                    min_isr: g.min_isr,
                }
            })
            .collect();
        Snapshot {
            nodes,
            quorum: Quorum { leader_id: leader, voters, ..Quorum::default() },
            partitions,
            reassignments: self.reassignments,
            fetch_timeout_ms: self.fetch_timeout_ms,
        }
    }

    fn progress(&self, snapshot: &Snapshot) -> UpgradeProgress {
        UpgradeProgress {
            target_revision: "new".into(),
            members_done: snapshot
                .nodes
                .iter()
                .zip(&self.nodes)
                .filter(|(_, g)| g.done)
                .map(|(n, _)| n.pod.clone())
                .collect(),
            ..UpgradeProgress::default()
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => panic!("no runtime: {e}"),
    }
}

fn step(rt: &tokio::runtime::Runtime, snapshot: &Snapshot, progress: &UpgradeProgress, now: DateTime<Utc>) -> Step {
    let members = snapshot.members();
    match rt.block_on(next_step_at(&members, &Gates { snapshot }, progress, now)) {
        Ok(step) => step,
        Err(e) => panic!("step failed: {e}"),
    }
}

/// The node an action restarts (or prepares for a restart).
fn touched<'a>(snapshot: &'a Snapshot, action: &Action) -> Option<&'a Node> {
    match action {
        Action::Restart { member } | Action::Replan { member } => snapshot.node(member),
        _ => None,
    }
}

fn on_target(n: &Node) -> bool {
    !n.target_revision.is_empty() && n.current_revision == n.target_revision
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// No step ever restarts a broker that hosts a partition (RF > min ISR) which would be
    /// below its min ISR with that broker out of its ISR.
    #[test]
    fn no_restart_takes_a_partition_below_min_isr(s in situation()) {
        let snapshot = s.snapshot();
        let step = step(&runtime(), &snapshot, &s.progress(&snapshot), t(0));
        if let Some(node) = touched(&snapshot, &step.action).filter(|n| n.is_broker()) {
            for p in snapshot.hosted_by(node.id) {
                let rf = p.partition.replicas.len();
                let left = p.partition.isr.iter().filter(|&&r| r != node.id).count();
                prop_assert!(
                    i64::try_from(rf).unwrap_or(0) <= i64::from(p.min_isr)
                        || i64::try_from(left).unwrap_or(0) >= i64::from(p.min_isr),
                    "{:?} restarts node {} with {:?}", step.action, node.id, p
                );
            }
        }
    }

    /// A controller goes down only with a caught-up majority of the voters left behind, and
    /// never without a leader (unless it is the only one).
    #[test]
    fn no_restart_costs_the_quorum_its_majority(s in situation()) {
        let snapshot = s.snapshot();
        let step = step(&runtime(), &snapshot, &s.progress(&snapshot), t(0));
        if let Some(node) = touched(&snapshot, &step.action).filter(|n| n.is_controller()) {
            let voters = match snapshot.quorum.voters.len() {
                0 => snapshot.nodes.iter().filter(|n| n.is_controller()).count(),
                n => n,
            };
            if voters > 1 {
                prop_assert!(snapshot.quorum.leader_id.is_some());
                let caught_up = snapshot
                    .quorum
                    .voters
                    .iter()
                    .filter(|v| v.id != node.id && is_caught_up_voter(&snapshot, v.id))
                    .count();
                prop_assert!(2 * caught_up > voters, "{:?}: {caught_up} caught up", step.action);
            }
        }
    }

    /// Nothing restarts during a reassignment, nor a broker in log recovery.
    #[test]
    fn no_restart_during_a_reassignment_or_of_a_recovering_broker(s in situation()) {
        let snapshot = s.snapshot();
        let step = step(&runtime(), &snapshot, &s.progress(&snapshot), t(0));
        if let Some(node) = touched(&snapshot, &step.action) {
            prop_assert_eq!(snapshot.reassignments, 0);
            prop_assert!(!(node.is_broker() && node.recovering == Some(true)));
        }
    }

    /// The active controller goes only once every other controller is on target; a broker
    /// only once every controller is on target and ready.
    #[test]
    fn controllers_first_the_active_one_last(s in situation()) {
        let snapshot = s.snapshot();
        let step = step(&runtime(), &snapshot, &s.progress(&snapshot), t(0));
        let Some(node) = touched(&snapshot, &step.action) else { return Ok(()) };
        let controllers = || snapshot.nodes.iter().filter(|n| n.is_controller() && n.id != node.id);
        if snapshot.is_active_controller(node) {
            prop_assert!(controllers().all(on_target), "{:?} while a controller is off target", step.action);
        }
        if !node.is_controller() {
            prop_assert!(controllers().all(|n| on_target(n) && n.ready), "{:?} before the controllers", step.action);
        }
    }
}

// ---- a simulated roll ----

/// One simulated node.
#[derive(Clone, Debug)]
struct SimNode {
    id: i32,
    role: NodeRole,
    new: bool,
    /// Passes until its process is back; 0 when up.
    down: u32,
    /// Passes after it is back until it rejoins its ISRs.
    syncing: u32,
    /// When it was last caught up (ms), frozen while down.
    caught_up_ms: i64,
    /// How long a restart keeps it down / out of sync, in passes.
    restart_down: u32,
    restart_sync: u32,
    /// Restarts by the roll.
    restarts: u32,
}

#[derive(Clone, Debug)]
struct World {
    nodes: Vec<SimNode>,
    leader: Option<i32>,
    /// (replicas, leader, min ISR)
    partitions: Vec<(Vec<i32>, Option<i32>, i32)>,
    now_ms: i64,
}

impl World {
    fn up(&self, id: i32) -> bool {
        self.nodes.iter().any(|n| n.id == id && n.down == 0)
    }

    fn in_sync(&self, id: i32) -> bool {
        self.nodes.iter().any(|n| n.id == id && n.down == 0 && n.syncing == 0)
    }

    /// Whether the node of `pod_name` is up and in the ISR of every partition it hosts.
    fn back(&self, pod_name: &str) -> bool {
        self.nodes.iter().filter(|n| pod(n.role, n.id) == pod_name).any(|n| {
            let hosts = self.partitions.iter().any(|(replicas, _, _)| replicas.contains(&n.id));
            n.down == 0 && (n.syncing == 0 || !hosts)
        })
    }

    fn snapshot(&self) -> Snapshot {
        let nodes = self
            .nodes
            .iter()
            .map(|n| Node {
                id: n.id,
                role: n.role,
                pod: pod(n.role, n.id),
                ready: n.down == 0,
                current_revision: if n.new { "new".into() } else { "old".into() },
                target_revision: "new".into(),
                broker_running: n.role != NodeRole::Controller && n.down == 0,
                recovering: if n.down == 0 { Some(false) } else { None },
            })
            .collect();
        let voters = self
            .nodes
            .iter()
            .filter(|n| n.role != NodeRole::Broker)
            .map(|n| QuorumReplica {
                id: n.id,
                last_caught_up_timestamp: Some(if n.down == 0 { self.now_ms } else { n.caught_up_ms }),
                ..QuorumReplica::default()
            })
            .collect();
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, (replicas, leader, min_isr))| PartitionState {
                partition: Partition {
                    topic: "t".into(),
                    index: i32::try_from(i).unwrap_or_default(),
                    leader: *leader,
                    replicas: replicas.clone(),
                    isr: replicas.iter().copied().filter(|&r| self.in_sync(r)).collect(),
                },
                min_isr: *min_isr,
            })
            .collect();
        Snapshot {
            nodes,
            quorum: Quorum { leader_id: self.leader, voters, ..Quorum::default() },
            partitions,
            ..Snapshot::default()
        }
    }

    fn restart(&mut self, pod_name: &str) {
        let now = self.now_ms;
        let Some(n) = self.nodes.iter_mut().find(|n| pod(n.role, n.id) == pod_name) else { return };
        n.new = true;
        n.down = n.restart_down;
        // A controller hosts no partition: it is back once it is up.
        n.syncing = if n.role == NodeRole::Controller { 0 } else { n.restart_sync };
        n.caught_up_ms = now;
        n.restarts += 1;
        let id = n.id;
        if self.leader == Some(id) {
            self.leader = self.nodes.iter().find(|m| m.role != NodeRole::Broker && m.down == 0).map(|m| m.id);
        }
        self.elect();
    }

    /// Partition leaders: kept while in sync, else the first in-sync replica.
    fn elect(&mut self) {
        let partitions = std::mem::take(&mut self.partitions);
        self.partitions = partitions
            .into_iter()
            .map(|(replicas, leader, min)| {
                let leader =
                    leader.filter(|&l| self.in_sync(l)).or_else(|| replicas.iter().copied().find(|&r| self.in_sync(r)));
                (replicas, leader, min)
            })
            .collect();
    }

    /// One pass later (10 s).
    fn tick(&mut self) {
        self.now_ms += 10_000;
        for n in &mut self.nodes {
            if n.down > 0 {
                n.down -= 1;
            } else if n.syncing > 0 {
                n.syncing -= 1;
            }
        }
        if self.leader.is_none() {
            self.leader = self.nodes.iter().find(|m| m.role != NodeRole::Broker && m.down == 0).map(|m| m.id);
        }
        self.elect();
        // The loop's preferred-leader election.
        for (topic_index, preferred) in preferred_elections(&self.snapshot())
            .into_iter()
            .filter_map(|(_, i)| usize::try_from(i).ok())
            .filter_map(|i| Some((i, self.partitions.get(i)?.0.first().copied()?)))
            .collect::<Vec<_>>()
        {
            if let Some(p) = self.partitions.get_mut(topic_index) {
                p.1 = Some(preferred);
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Cluster {
    combined: bool,
    controllers: usize,
    brokers: usize,
    leader: usize,
    timings: Vec<(u32, u32)>,
    partitions: Vec<(Vec<usize>, usize, i32)>,
    /// A broker (index among the broker-capable) crashed before the roll: down, old revision.
    crashed: Option<usize>,
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (
        (any::<bool>(), prop_oneof![Just(1usize), Just(3), Just(5)], 1..=6usize, 0..5usize),
        prop::collection::vec((1..4u32, 0..3u32), 11),
        prop::collection::vec((prop::collection::vec(0..10usize, 3), 1..=3usize, 1..=3i32), 0..12),
        prop::option::weighted(0.3, 0..6usize),
    )
        .prop_map(|((combined, controllers, brokers, leader), timings, partitions, crashed)| Cluster {
            combined,
            controllers,
            brokers,
            leader: leader % controllers,
            timings,
            partitions,
            crashed,
        })
}

impl Cluster {
    fn world(&self) -> World {
        let ids = layout(self.combined, self.controllers, self.brokers);
        let hosts = broker_ids(&ids);
        let crashed = self.crashed.and_then(|c| hosts.get(c % hosts.len().max(1)).copied());
        let nodes = ids
            .iter()
            .zip(&self.timings)
            .map(|(&(id, role), &(down, sync))| SimNode {
                id,
                role,
                new: false,
                // A crashed broker stays down until the roll restarts it.
                down: if Some(id) == crashed { u32::MAX } else { 0 },
                syncing: 0,
                caught_up_ms: NOW_MS,
                restart_down: down,
                restart_sync: sync,
                restarts: 0,
            })
            .collect();
        let partitions = self
            .partitions
            .iter()
            .map(|(picks, rf, min)| {
                let replicas = replicas(&hosts, picks, *rf);
                let leader = replicas.first().copied();
                (replicas, leader, *min)
            })
            .collect();
        let mut world = World { nodes, leader: None, partitions, now_ms: NOW_MS };
        // The active controller is an up one: the generated one, else the first.
        let wanted = i32::try_from(self.leader).ok().filter(|&id| world.up(id));
        world.leader =
            wanted.or_else(|| world.nodes.iter().find(|n| n.role != NodeRole::Broker && n.down == 0).map(|n| n.id));
        world.elect();
        world
    }
}

/// Rolls the world to the end; returns the restarts in order, checking on the way that
/// nothing else is in flight when a node is restarted.
fn roll(world: &mut World) -> Result<Vec<(String, bool)>, TestCaseError> {
    let mut progress = UpgradeProgress::default();
    let mut restarted: Vec<(String, bool)> = Vec::new();
    let mut done = false;
    let rt = runtime();
    for pass in 0..400i64 {
        let snapshot = world.snapshot();
        let now = t(pass * 10);
        let step = step(&rt, &snapshot, &progress, now);
        if let Action::Restart { member } = &step.action {
            let node = snapshot.node(member).cloned();
            let node = node.ok_or_else(|| TestCaseError::fail(format!("unknown {member}")))?;
            for earlier in &restarted {
                prop_assert!(world.back(&earlier.0), "{member} restarted while {} is not back", earlier.0);
            }
            restarted.push((member.clone(), snapshot.is_active_controller(&node)));
            world.restart(member);
        }
        let finished = step.action == Action::Done;
        progress.advance(&step, now);
        if finished {
            done = true;
            break;
        }
        world.tick();
    }
    prop_assert!(done, "the roll did not finish: {progress:?}");
    Ok(restarted)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With every gate able to open, the roll converges: each node restarted exactly once,
    /// one at a time, every controller before any broker, the active controller last of them,
    /// a crashed broker first of the brokers.
    #[test]
    fn a_roll_converges_in_kafkas_order(c in cluster()) {
        let mut world = c.world();
        let crashed: Option<String> = world.nodes.iter().find(|n| n.down > 0).map(|n| pod(n.role, n.id));
        let restarted = roll(&mut world)?;
        let names: Vec<&str> = restarted.iter().map(|(n, _)| n.as_str()).collect();
        let distinct: BTreeSet<&str> = names.iter().copied().collect();
        prop_assert_eq!(distinct.len(), names.len(), "a node restarted twice: {:?}", names);
        prop_assert_eq!(names.len(), world.nodes.len());
        prop_assert!(world.nodes.iter().all(|n| n.new && n.restarts == 1));

        let controllers = world.nodes.iter().filter(|n| n.role != NodeRole::Broker).count();
        let (first, rest) = names.split_at(controllers);
        prop_assert!(first.iter().all(|n| !n.contains("broker")), "controllers first: {:?}", names);
        prop_assert!(rest.iter().all(|n| n.contains("broker")));
        // The controller that was active when it was restarted is the last controller.
        let active: Vec<usize> = restarted.iter().enumerate().filter(|(_, (_, a))| *a).map(|(i, _)| i).collect();
        prop_assert!(active.iter().all(|&i| i + 1 == controllers), "active controller not last: {:?}", restarted);
        if let Some(crashed) = crashed.filter(|c| c.contains("broker")) {
            prop_assert_eq!(rest.first().copied(), Some(crashed.as_str()), "unready broker first");
        }
    }
}
