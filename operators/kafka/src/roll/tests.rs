//! Unit tests of the roll's order and each gate rule over hand-built snapshots.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use statecraft_shared::reason::Common;
use statecraft_shared::upgrade::{Action, Gate, UpgradeBlock, UpgradeProgress, next_step_at, plan};

use super::*;
use crate::api::NodeRole;
use crate::observed::{Partition, Quorum, QuorumReplica};
use crate::reason::Kafka;

const NOW_MS: i64 = 1_700_000_000_000;

fn node(id: i32, role: NodeRole) -> Node {
    let pod = match role {
        NodeRole::Controller => format!("k-controller-{id}"),
        NodeRole::Broker => format!("k-broker-{}", id - crate::nodes::BROKER_ID_BASE),
        NodeRole::Combined => format!("k-combined-{id}"),
    };
    Node {
        id,
        role,
        pod,
        ready: true,
        current_revision: "old".into(),
        target_revision: "new".into(),
        broker_running: role != NodeRole::Controller,
        recovering: Some(false),
    }
}

fn voter(id: i32, lag_ms: Option<i64>) -> QuorumReplica {
    QuorumReplica { id, last_caught_up_timestamp: lag_ms.map(|lag| NOW_MS - lag), ..QuorumReplica::default() }
}

fn partition(topic: &str, replicas: &[i32], isr: &[i32], min_isr: i32) -> PartitionState {
    PartitionState {
        partition: Partition {
            topic: topic.into(),
            index: 0,
            leader: isr.first().copied(),
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
        },
        min_isr,
    }
}

/// Three controllers (node 0 leading, all caught up) and three brokers, one RF=3 minISR=2
/// partition on the brokers with a full ISR.
fn cluster() -> Snapshot {
    let mut nodes: Vec<Node> = (0..3).map(|i| node(i, NodeRole::Controller)).collect();
    nodes.extend((100..103).map(|i| node(i, NodeRole::Broker)));
    Snapshot {
        nodes,
        quorum: Quorum {
            leader_id: Some(0),
            voters: vec![voter(0, Some(0)), voter(1, Some(10)), voter(2, Some(500))],
            ..Quorum::default()
        },
        partitions: vec![partition("orders", &[100, 101, 102], &[100, 101, 102], 2)],
        ..Snapshot::default()
    }
}

fn combined(n: i32) -> Snapshot {
    Snapshot {
        nodes: (0..n).map(|i| node(i, NodeRole::Combined)).collect(),
        quorum: Quorum { leader_id: Some(0), voters: (0..n).map(|i| voter(i, Some(0))).collect(), ..Quorum::default() },
        ..Snapshot::default()
    }
}

fn gate_of(s: &Snapshot, pod: &str) -> Gate {
    may_restart(s, s.node(pod).expect("node in snapshot"))
}

fn reason(gate: &Gate) -> Option<&'static str> {
    match gate {
        Gate::Open => None,
        Gate::Closed { reason, .. } => Some(reason.as_str()),
    }
}

fn message(gate: &Gate) -> &str {
    match gate {
        Gate::Open => "",
        Gate::Closed { message, .. } => message,
    }
}

fn order(s: &Snapshot) -> Vec<String> {
    let members = s.members();
    let plan = plan(&members, &UpgradeProgress::default()).expect("valid members");
    plan.restart_order().into_iter().map(str::to_owned).collect()
}

// ---- order ----

#[test]
fn controllers_then_the_active_one_then_brokers_each_unready_first() {
    let mut s = cluster();
    s.nodes[0].ready = false; // the active controller, unready: still last of the controllers
    s.nodes[2].ready = false;
    s.nodes[5].ready = false; // an unready broker: after every controller
    assert_eq!(
        order(&s),
        ["k-controller-2", "k-controller-1", "k-controller-0", "k-broker-2", "k-broker-0", "k-broker-1"]
    );
}

#[test]
fn combined_nodes_roll_as_controllers_with_the_active_one_last() {
    let mut s = combined(3);
    s.quorum.leader_id = Some(1);
    assert_eq!(order(&s), ["k-combined-0", "k-combined-2", "k-combined-1"]);
}

#[test]
fn members_carry_revisions_readiness_and_roles() {
    let s = cluster();
    let members = s.members();
    let active = members.iter().find(|m| m.name == "k-controller-0").expect("member");
    assert_eq!(active.role, statecraft_shared::upgrade::Role::Leader);
    let broker = members.iter().find(|m| m.name == "k-broker-1").expect("member");
    assert_eq!(broker.role, statecraft_shared::upgrade::Role::Learner);
    assert_eq!((broker.current_revision.as_str(), broker.target_revision.as_str()), ("old", "new"));
    assert!(broker.phase > active.phase);
}

// ---- the controller gate ----

#[test]
fn a_controller_restarts_when_the_others_are_caught_up() {
    assert_eq!(gate_of(&cluster(), "k-controller-1"), Gate::Open);
}

#[test]
fn a_lagging_other_voter_blocks_a_controller() {
    let mut s = cluster();
    s.quorum.voters[2] = voter(2, Some(2000)); // exactly the timeout: not caught up
    let gate = gate_of(&s, "k-controller-1");
    assert_eq!(reason(&gate), Some("QuorumNotCaughtUp"));
    assert!(message(&gate).contains("k-controller-1") && message(&gate).contains("[2]"), "{gate:?}");
    // The lagging voter itself may restart: the two others are caught up.
    assert_eq!(gate_of(&s, "k-controller-2"), Gate::Open);
}

#[test]
fn the_live_fetch_timeout_decides_who_is_caught_up() {
    let mut s = cluster();
    s.quorum.voters[2] = voter(2, Some(3000));
    assert!(!is_caught_up_voter(&s, 2));
    s.fetch_timeout_ms = 5000;
    assert!(is_caught_up_voter(&s, 2));
    assert_eq!(gate_of(&s, "k-controller-1"), Gate::Open);
}

#[test]
fn unknown_catch_up_times_count_as_lagging() {
    let mut s = cluster();
    s.quorum.voters[2] = voter(2, None);
    assert_eq!(reason(&gate_of(&s, "k-controller-1")), Some("QuorumNotCaughtUp"));
    let mut s = cluster();
    s.quorum.voters[0] = voter(0, None); // the leader's own time unknown
    assert!(is_caught_up_voter(&s, 0), "the leader is caught up by definition");
    assert!(!is_caught_up_voter(&s, 1));
}

#[test]
fn no_leader_blocks_every_controller() {
    let mut s = cluster();
    s.quorum.leader_id = None;
    for pod in ["k-controller-0", "k-controller-1"] {
        assert_eq!(reason(&gate_of(&s, pod)), Some("NoActiveController"));
    }
}

#[test]
fn a_single_controller_always_restarts() {
    let mut s = combined(1);
    assert_eq!(gate_of(&s, "k-combined-0"), Gate::Open);
    s.quorum = Quorum::default(); // not even described: one controller node
    assert_eq!(gate_of(&s, "k-combined-0"), Gate::Open);
}

#[test]
fn five_voters_tolerate_one_lagging_other_but_not_two() {
    let mut s = combined(5);
    s.quorum.voters[3] = voter(3, Some(60_000));
    assert_eq!(gate_of(&s, "k-combined-1"), Gate::Open, "3 of the 4 others are caught up, 3 needed");
    s.quorum.voters[4] = voter(4, Some(60_000));
    assert_eq!(reason(&gate_of(&s, "k-combined-1")), Some("QuorumNotCaughtUp"));
}

#[test]
fn two_voters_never_restart_one() {
    let s = combined(2);
    assert_eq!(reason(&gate_of(&s, "k-combined-1")), Some("QuorumNotCaughtUp"), "one voter is no majority of two");
}

#[test]
fn an_undescribed_quorum_of_three_blocks() {
    let mut s = cluster();
    s.quorum = Quorum::default();
    assert_eq!(reason(&gate_of(&s, "k-controller-1")), Some("NoActiveController"));
}

/// Kafka's view lags a deleted pod by up to the fetch timeout: the gate trusts the
/// snapshot's readiness first (found on the first real roll, which restarted every
/// controller within two seconds).
#[test]
fn a_voter_whose_node_is_down_does_not_count_though_kafka_still_has_it_caught_up() {
    let mut s = cluster();
    assert_eq!(gate_of(&s, "k-controller-1"), Gate::Open);
    s.nodes[2].ready = false;
    assert_eq!(reason(&gate_of(&s, "k-controller-1")), Some("QuorumNotCaughtUp"));
}

// ---- the broker gate ----

/// Kafka keeps a stopped replica in the ISR for up to replica.lag.time.max.ms: a broker
/// that is down counts as out of every ISR at once.
#[test]
fn a_replica_on_a_broker_that_is_down_is_out_of_the_isr_whatever_kafka_says() {
    let mut s = cluster();
    s.nodes[3].ready = false;
    s.nodes[3].broker_running = false;
    let gate = gate_of(&s, "k-broker-1");
    assert_eq!(reason(&gate), Some("WouldDropBelowMinIsr"), "{gate:?}");
}

#[test]
fn a_broker_restarts_when_every_partition_keeps_min_isr() {
    assert_eq!(gate_of(&cluster(), "k-broker-0"), Gate::Open);
}

#[test]
fn a_partition_at_min_isr_blocks_the_brokers_in_its_isr_only() {
    let mut s = cluster();
    s.partitions = vec![partition("orders", &[100, 101, 102], &[100, 101], 2)];
    let gate = gate_of(&s, "k-broker-0");
    assert_eq!(reason(&gate), Some("WouldDropBelowMinIsr"));
    assert!(message(&gate).contains("orders-0") && message(&gate).contains("k-broker-0"), "{gate:?}");
    assert_eq!(gate_of(&s, "k-broker-2"), Gate::Open, "not in the ISR: its restart changes nothing");
}

#[test]
fn a_partition_under_min_isr_blocks_every_broker_hosting_it() {
    let mut s = cluster();
    s.partitions = vec![
        partition("a", &[100, 101, 102], &[100, 101], 2),
        partition("b", &[100, 101, 102], &[100], 2),
        partition("c", &[100, 101, 102], &[101], 2),
    ];
    let gate = gate_of(&s, "k-broker-2");
    assert_eq!(reason(&gate), Some("PartitionUnderMinIsr"));
    assert!(message(&gate).contains("b-0") && message(&gate).contains("1 more"), "{gate:?}");
    assert_eq!(reason(&gate_of(&s, "k-broker-0")), Some("PartitionUnderMinIsr"), "under min ISR is worse news");
}

#[test]
fn partitions_without_redundancy_are_skipped() {
    let mut s = cluster();
    s.partitions = vec![
        partition("rf2", &[100, 101], &[100, 101], 2),
        partition("rf1", &[100], &[], 1),
        partition("rf3-min3", &[100, 101, 102], &[100], 3),
    ];
    assert_eq!(gate_of(&s, "k-broker-0"), Gate::Open);
}

#[test]
fn partitions_elsewhere_do_not_matter() {
    let mut s = cluster();
    s.partitions = vec![partition("elsewhere", &[101, 102, 0], &[101], 2)];
    assert_eq!(gate_of(&s, "k-broker-0"), Gate::Open);
}

#[test]
fn a_combined_node_passes_both_gates() {
    let mut s = combined(3);
    s.partitions = vec![partition("t", &[0, 1, 2], &[1, 2], 2)];
    assert_eq!(reason(&gate_of(&s, "k-combined-1")), Some("WouldDropBelowMinIsr"));
    s.partitions.clear();
    s.quorum.voters[2] = voter(2, Some(9000));
    assert_eq!(reason(&gate_of(&s, "k-combined-1")), Some("QuorumNotCaughtUp"));
}

#[test]
fn a_controller_ignores_partitions() {
    let mut s = cluster();
    s.partitions = vec![partition("odd", &[1, 100, 101], &[1], 2)];
    assert_eq!(gate_of(&s, "k-controller-1"), Gate::Open);
}

// ---- recovery and reassignments ----

#[test]
fn a_recovering_broker_never_restarts_an_unknown_state_may() {
    let mut s = cluster();
    s.nodes[3].recovering = Some(true);
    s.nodes[3].ready = false;
    let gate = gate_of(&s, "k-broker-0");
    assert_eq!(reason(&gate), Some("BrokerRecovering"));
    assert!(message(&gate).contains("k-broker-0"));
    s.nodes[3].recovering = None;
    assert_eq!(gate_of(&s, "k-broker-0"), Gate::Open);
}

#[test]
fn nothing_restarts_during_a_reassignment() {
    let mut s = cluster();
    s.reassignments = 2;
    for pod in ["k-controller-1", "k-controller-0", "k-broker-1"] {
        assert_eq!(reason(&gate_of(&s, pod)), Some("ReassignmentInProgress"), "{pod}");
    }
}

// ---- caught up after a restart ----

#[test]
fn a_restarted_controller_waits_until_it_is_a_caught_up_voter() {
    let mut s = cluster();
    s.quorum.voters[1] = voter(1, Some(4000));
    let n = s.node("k-controller-1").expect("node").clone();
    assert_eq!(reason(&caught_up(&s, &n)), Some("ControllerNotCaughtUp"));
    s.quorum.voters[1] = voter(1, Some(1));
    assert_eq!(caught_up(&s, &n), Gate::Open);
    s.quorum.voters.remove(1);
    assert_eq!(reason(&caught_up(&s, &n)), Some("ControllerNotCaughtUp"), "not a voter at all");
}

#[test]
fn a_restarted_broker_waits_until_it_runs_and_is_back_in_every_isr() {
    let mut s = cluster();
    s.partitions.push(partition("slow", &[101, 100], &[100], 1));
    let mut n = s.node("k-broker-1").expect("node").clone();
    n.broker_running = false;
    assert_eq!(reason(&caught_up(&s, &n)), Some("BrokerNotRunning"));
    n.broker_running = true;
    let gate = caught_up(&s, &n);
    assert_eq!(reason(&gate), Some("BrokerNotInSync"));
    assert!(message(&gate).contains("slow-0"), "{gate:?}");
    s.partitions[1].partition.isr.push(101);
    assert_eq!(caught_up(&s, &n), Gate::Open);
}

#[test]
fn a_restarted_combined_node_must_be_both() {
    let mut s = combined(3);
    s.partitions = vec![partition("t", &[0, 1, 2], &[0, 2], 2)];
    let n = s.node("k-combined-1").expect("node").clone();
    assert_eq!(reason(&caught_up(&s, &n)), Some("BrokerNotInSync"));
    s.quorum.voters[1] = voter(1, None);
    assert_eq!(reason(&caught_up(&s, &n)), Some("ControllerNotCaughtUp"));
}

// ---- preferred leaders ----

#[test]
fn preferred_leaders_are_elected_once_they_run_and_are_in_sync() {
    let mut s = cluster();
    let mut moved = partition("moved", &[101, 100, 102], &[100, 101, 102], 2);
    moved.partition.leader = Some(100);
    let mut behind = partition("behind", &[102, 100, 101], &[100, 101], 2);
    behind.partition.leader = Some(100);
    let mut fenced = partition("fenced", &[100, 101, 102], &[100, 101, 102], 2);
    fenced.partition.leader = Some(101);
    s.partitions = vec![partition("home", &[100, 101, 102], &[100, 101, 102], 2), moved, behind, fenced];
    s.nodes[3].broker_running = false; // node 100
    assert_eq!(preferred_elections(&s), [("moved".to_owned(), 0)]);
    s.partitions.truncate(1);
    assert!(preferred_elections(&s).is_empty(), "nothing to elect in steady state");
}

// ---- the engine with Kafka's gates ----

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
}

#[tokio::test]
async fn the_active_controller_is_prepared_without_a_transfer_then_restarted() {
    let mut s = cluster();
    for n in &mut s.nodes {
        if n.id != 0 {
            n.current_revision = "new".into();
        }
    }
    let mut progress = UpgradeProgress::default();
    let gates = Gates { snapshot: &s };
    let step = next_step_at(&s.members(), &gates, &progress, at(0)).await.expect("step");
    assert_eq!(step.action, Action::Replan { member: "k-controller-0".into() });
    progress.advance(&step, at(0));
    let step = next_step_at(&s.members(), &gates, &progress, at(1)).await.expect("step");
    assert_eq!(step.action, Action::Restart { member: "k-controller-0".into() });
}

#[tokio::test]
async fn an_unknown_member_is_an_error_not_a_gate() {
    let s = cluster();
    let gates = Gates { snapshot: &s };
    let stranger = statecraft_shared::upgrade::Member { name: "stranger".into(), ..Default::default() };
    use statecraft_shared::upgrade::UpgradeGates;
    assert!(gates.may_restart(&stranger).await.is_err());
    assert!(gates.caught_up(&stranger).await.is_err());
}

// ---- stalls ----

#[test]
fn a_block_longer_than_the_deadline_reports_a_stall() {
    let action = Action::Blocked {
        member: "k-broker-1".into(),
        reason: Kafka::WouldDropBelowMinIsr.into(),
        message: "restarting k-broker-1 would drop orders-0".into(),
    };
    let mut progress = UpgradeProgress {
        last_block: Some(UpgradeBlock {
            member: "k-broker-1".into(),
            reason: "WouldDropBelowMinIsr".into(),
            message: String::new(),
            since: "2023-11-14T22:13:20Z".into(), // at(0)
        }),
        ..UpgradeProgress::default()
    };
    let early = stall::report(&action, &progress, at(60), stall::STALL_AFTER);
    assert_eq!((early.reason, early.stalled_for), (Kafka::WouldDropBelowMinIsr.into(), None));
    let late = stall::report(&action, &progress, at(361), stall::STALL_AFTER);
    assert_eq!(late.reason, Kafka::RollStalled);
    assert_eq!(late.stalled_for, Some(Duration::from_secs(361)));
    assert!(late.message.contains("WouldDropBelowMinIsr") && late.message.contains("6m01s"), "{}", late.message);
    // A block recorded for another reason says nothing about this one.
    if let Some(b) = progress.last_block.as_mut() {
        b.reason = "QuorumNotCaughtUp".into();
    }
    assert_eq!(stall::report(&action, &progress, at(361), stall::STALL_AFTER).stalled_for, None);
}

#[test]
fn waiting_for_the_restarted_member_too_long_reports_a_stall() {
    let mut progress = UpgradeProgress::default();
    let restart = statecraft_shared::upgrade::Step {
        action: Action::Restart { member: "k-broker-0".into() },
        target_revision: "new".into(),
        confirmed: Vec::new(),
    };
    progress.advance(&restart, at(0));
    let wait = Action::WaitFor {
        member: "k-broker-0".into(),
        reason: Kafka::BrokerNotInSync.into(),
        message: "k-broker-0 is not back in the ISR".into(),
    };
    assert_eq!(stall::report(&wait, &progress, at(299), stall::STALL_AFTER).stalled_for, None);
    let late = stall::report(&wait, &progress, at(1200), stall::STALL_AFTER);
    assert_eq!(late.reason, Kafka::RollStalled);
    let other =
        Action::WaitFor { member: "k-broker-2".into(), reason: Common::MemberNotReady.into(), message: "m".into() };
    assert_eq!(stall::report(&other, &progress, at(1200), stall::STALL_AFTER).reason, Common::MemberNotReady);
    assert_eq!(stall::report(&Action::Done, &progress, at(1200), stall::STALL_AFTER).reason, Common::UpgradeComplete);
}
