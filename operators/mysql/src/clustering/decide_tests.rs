//! `decide()` over hand-built observations: the fake data plane. Each test is one state of
//! the research notes or one complaint users filed against other operators.

use std::time::Duration;

use statecraft_shared::reason::Reason;

use super::decide::{Decision, FAILOVER_AFTER_PASSES, Health, Operation, ReseedReason, Role, decide};
use super::fixtures::{addr, cluster, g, primary, replica, server};
use super::observed::{Member, Observed, PodState, ServerState};
use crate::reason::MySql;

fn down(mut m: Member, passes: u32) -> Member {
    m.server = ServerState::Unreachable("connection refused".into());
    m.unreachable_passes = passes;
    m
}

fn healthy3() -> Observed {
    cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-100-10"), replica(2, 0, "0-100-9")])
}

fn op(o: &Observed) -> Operation {
    decide(o).operation
}

#[test]
fn healthy_cluster_does_nothing() {
    let d: Decision = decide(&healthy3());
    assert_eq!(d.health, Health::Healthy);
    assert_eq!(d.operation, Operation::Nothing);
    assert!(d.verdicts.iter().all(|v| v.healthy && v.errant.is_none()));
    assert_eq!(d.verdicts[0].role, Some(Role::Primary));
}

#[test]
fn new_cluster_waits_for_every_server_then_picks_ordinal_zero() {
    let mut o = cluster(vec![primary(0, ""), replica(1, 0, ""), down(replica(2, 0, ""), 1)]);
    o.recorded_primary = None;
    let d = decide(&o);
    assert_eq!(d.health, Health::Initializing);
    assert!(matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::WaitingForServers), "{d:?}");
    o.members[2] = replica(2, 0, "");
    assert_eq!(op(&o), Operation::Bootstrap { primary: 0 });
}

#[test]
fn adopting_servers_with_data_picks_the_one_with_every_transaction() {
    let mut o = cluster(vec![replica(0, 1, "0-100-5"), replica(1, 0, "0-100-9"), replica(2, 0, "0-100-7")]);
    o.recorded_primary = None;
    assert_eq!(op(&o), Operation::Bootstrap { primary: 1 });
    // Conflicting histories: refuse to choose.
    server(&mut o.members[2]).executed = g("0-102-9");
    assert!(matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::ConflictingHistories));
}

#[test]
fn a_read_only_primary_is_made_writable_only_when_it_has_everything() {
    let mut o = healthy3();
    server(&mut o.members[0]).read_only = true;
    assert_eq!(op(&o), Operation::MakeWritable { ordinal: 0 });
    server(&mut o.members[1]).executed = g("0-100-11");
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.retrieved = g("0-100-11");
    }
    // A replica ahead of a read-only primary: the primary may have lost data, so wait.
    let d = decide(&o);
    assert!(matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::PrimaryBehindReplica), "{d:?}");
}

#[test]
fn a_new_primary_takes_writes_only_once_the_former_one_lost_the_label() {
    // Promoted 1, read-only still; 0 (paused or cut off) still carries the label.
    let mut o = cluster(vec![down(primary(0, "0-100-10"), 2), primary(1, "0-100-10"), replica(2, 1, "0-100-10")]);
    o.recorded_primary = Some(1);
    o.members[0].role_label = Some("primary".into());
    o.members[1].role_label = None;
    o.members[1].reads_label = false;
    server(&mut o.members[1]).read_only = true;
    assert_eq!(op(&o), Operation::Relabel { changes: vec![(0, None), (1, Some(Role::Primary))], reads: vec![] });
    o.members[0].role_label = None;
    o.members[0].reads_label = false;
    o.members[1].role_label = Some("primary".into());
    assert_eq!(op(&o), Operation::MakeWritable { ordinal: 1 });
}

#[test]
fn a_new_primary_takes_writes_only_once_the_service_no_longer_leads_to_the_former_one() {
    // Labels moved, but the EndpointSlice (or kube-proxy, for SETTLE) still leads to 0,
    // which may wake up and serve older data beside 1's first writes.
    let mut o = cluster(vec![down(primary(0, "0-100-10"), 2), primary(1, "0-100-10"), replica(2, 1, "0-100-10")]);
    o.recorded_primary = Some(1);
    o.members[0].role_label = None;
    o.members[0].reads_label = false;
    o.members[1].role_label = Some("primary".into());
    server(&mut o.members[1]).read_only = true;
    o.routed = [0, 1].into();
    assert!(
        matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::FormerPrimaryStillRouted),
        "{:?}",
        op(&o)
    );
    // Leading to the new primary alone is no reason to wait.
    o.routed = [1].into();
    assert_eq!(op(&o), Operation::MakeWritable { ordinal: 1 });
}

#[test]
fn after_a_hand_over_the_new_primary_is_labelled_before_the_old_one_loses_its_label() {
    // 0 handed over to 1 (read-only, all applied): both serve the same data until 1 takes
    // writes, so 1 is labelled first and the read-write Service never lists nobody.
    let mut o = cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-100-10"), replica(2, 0, "0-100-10")]);
    o.members[0].pod = PodState::Terminating;
    server(&mut o.members[0]).read_only = true;
    o.members[1] = primary(1, "0-100-10");
    o.members[1].role_label = Some("replica".into());
    o.members[1].reads_label = true;
    server(&mut o.members[1]).read_only = true;
    o.recorded_primary = Some(1);
    let changes = |o: &Observed| match op(o) {
        Operation::Relabel { changes, .. } => changes,
        other => panic!("{other:?}"),
    };
    assert_eq!(changes(&o).first(), Some(&(1, Some(Role::Primary))));
    // Stopped in its pod being deleted: the same.
    o.members[0].server = ServerState::Refused("connection refused".into());
    assert_eq!(changes(&o).first(), Some(&(1, Some(Role::Primary))));
    // Unanswering (it may be paused, and wake up writable): its label goes first.
    o.members[0].server = ServerState::Unreachable("no answer".into());
    assert_eq!(changes(&o).last(), Some(&(1, Some(Role::Primary))));
    // Answering with a transaction 1 lacks: the same.
    o.members[0] = primary(0, "0-100-11");
    o.members[0].pod = PodState::Terminating;
    server(&mut o.members[0]).read_only = true;
    o.deposed = Some(0);
    assert_eq!(changes(&o).last(), Some(&(1, Some(Role::Primary))));
}

#[test]
fn a_new_primary_leaves_the_read_only_service_only_once_the_read_write_one_lists_it() {
    // 0 handed over to 1 and replicates from it; 1 still carries a replica's labels.
    let mut o = cluster(vec![replica(0, 1, "0-100-10"), primary(1, "0-100-10"), replica(2, 1, "0-100-10")]);
    o.members[1].reads_label = true;
    o.members[1].role_label = Some("replica".into());
    o.recorded_primary = Some(1);
    // The promotion changes the role label alone: the read-write Service's EndpointSlice
    // changes, the read-only one's does not.
    assert_eq!(op(&o), Operation::Relabel { changes: vec![(1, Some(Role::Primary))], reads: vec![] });
    o.members[1].role_label = Some("primary".into());
    assert_eq!(op(&o), Operation::Nothing, "not listed by the read-write Service yet");
    o.routed = [1].into();
    assert_eq!(op(&o), Operation::Relabel { changes: vec![], reads: vec![(1, false)] });
    o.members[1].reads_label = false;
    assert_eq!(op(&o), Operation::Nothing);
}

#[test]
fn replicas_without_the_read_only_label_get_it_and_nothing_else_changes() {
    // Pods labelled by a build that selected the read-only Service by role.
    let mut o = healthy3();
    o.members[1].reads_label = false;
    o.members[2].reads_label = false;
    assert_eq!(op(&o), Operation::Relabel { changes: vec![], reads: vec![(1, true), (2, true)] });
}

#[test]
fn a_new_primary_takes_writes_before_its_replicas_are_pointed_at_it() {
    // Just handed over from 0 (being deleted): 1 is the recorded primary and labelled, still
    // read-only; 2 had its receiver from 0 stopped. A replica that connected before 1's
    // semi-sync source side is on would never acknowledge: 1 takes writes first.
    let mut o = cluster(vec![down(primary(0, "0-100-10"), 1), primary(1, "0-100-10"), replica(2, 0, "0-100-10")]);
    o.members[0].pod = PodState::Terminating;
    o.members[0].role_label = None;
    o.members[0].reads_label = false;
    o.recorded_primary = Some(1);
    server(&mut o.members[1]).read_only = true;
    if let Some(r) = &mut server(&mut o.members[2]).replication {
        r.io_running = false;
    }
    o.routed = [0].into();
    assert!(matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::FormerPrimaryStillRouted));
    o.routed = [].into();
    assert_eq!(op(&o), Operation::MakeWritable { ordinal: 1 });
    server(&mut o.members[1]).read_only = false;
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 2, source: 1 });
}

#[test]
fn a_woken_former_primary_is_demoted_once_clients_can_no_longer_reach_it() {
    // 0 woke up writable after 1 was promoted; no replica replicates from it, so its
    // commits wait for acknowledgements that never come, and demoting it would release
    // them to readers while the Service still leads to it.
    let mut o = cluster(vec![primary(0, "0-100-11"), primary(1, "0-100-10"), replica(2, 1, "0-100-10")]);
    o.recorded_primary = Some(1);
    server(&mut o.members[1]).read_only = true;
    if let Some(r) = &mut server(&mut o.members[2]).replication {
        r.io_running = false;
    }
    o.routed = [0].into();
    // Still labelled: the label goes first.
    o.members[0].role_label = Some("primary".into());
    o.members[1].role_label = None;
    o.members[1].reads_label = false;
    assert_eq!(
        op(&o),
        Operation::Relabel { changes: vec![(0, None), (2, None), (1, Some(Role::Primary))], reads: vec![(2, false)] }
    );
    o.members[0].role_label = None;
    o.members[0].reads_label = false;
    o.members[1].role_label = Some("primary".into());
    o.members[2].role_label = None;
    o.members[2].reads_label = false;
    assert!(
        matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::FormerPrimaryStillRouted),
        "{:?}",
        op(&o)
    );
    // No longer routed: demoted, before the new primary takes writes.
    o.routed = [].into();
    assert_eq!(op(&o), Operation::Demote { ordinal: 0 });
    // A rogue that a replica acknowledges is demoted at once, routed or not.
    o.routed = [0].into();
    if let Some(r) = &mut server(&mut o.members[2]).replication {
        r.source_host = addr(0).0;
        r.io_running = true;
    }
    assert_eq!(op(&o), Operation::Demote { ordinal: 0 });
}

#[test]
fn the_deposed_primary_unacknowledged_tail_does_not_hold_the_new_one_back() {
    // The partition healed between the promotion of 1 and its first write: 0 is back,
    // demoted, with a commit nobody acknowledged (0-100-11).
    let mut o = cluster(vec![primary(0, "0-100-11"), primary(1, "0-100-10"), replica(2, 1, "0-100-10")]);
    o.recorded_primary = Some(1);
    o.members[0].role_label = None;
    o.members[0].reads_label = false;
    server(&mut o.members[0]).read_only = true;
    server(&mut o.members[1]).read_only = true;
    let d = decide(&o);
    assert!(matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::PrimaryBehindReplica), "{d:?}");
    o.deposed = Some(0);
    assert_eq!(op(&o), Operation::MakeWritable { ordinal: 1 });
    // Any other member ahead still holds it back.
    server(&mut o.members[2]).executed = g("0-100-12");
    assert!(matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::PrimaryBehindReplica));
}

#[test]
fn semi_sync_source_off_on_the_primary_is_repaired() {
    let mut o = healthy3();
    server(&mut o.members[0]).semi_sync_source = false;
    assert_eq!(op(&o), Operation::MakeWritable { ordinal: 0 });
    // A single server has nobody to wait for.
    let mut single = cluster(vec![primary(0, "0-100-1")]);
    server(&mut single.members[0]).semi_sync_source = false;
    assert_eq!(op(&single), Operation::Nothing);
}

#[test]
fn a_second_writable_server_is_demoted_before_anything_else() {
    let mut o = healthy3();
    server(&mut o.members[2]).read_only = false;
    assert_eq!(op(&o), Operation::Demote { ordinal: 2 });
    // Even while the primary is down.
    o.members[0] = down(primary(0, "0-100-10"), 5);
    assert_eq!(op(&o), Operation::Demote { ordinal: 2 });
}

#[test]
fn a_replica_not_replicating_is_configured() {
    let mut o = healthy3();
    server(&mut o.members[2]).replication = None;
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 2, source: 0 });
    let mut o = healthy3();
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.io_running = false;
    }
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
    let mut o = healthy3();
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.source_host = addr(2).0;
    }
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
    assert_eq!(decide(&o).health, Health::Degraded);
}

#[test]
fn a_replica_connecting_to_the_primary_is_given_time_not_reconfigured() {
    let mut o = healthy3();
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.io_running = false;
        r.io_connecting = true;
    }
    let d = decide(&o);
    assert_eq!(d.verdicts[1].role, None, "not serving until connected");
    assert_eq!(d.operation, Operation::Relabel { changes: vec![(1, None)], reads: vec![(1, false)] });
    // Connecting to a former primary is another matter: repoint it.
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.source_host = addr(2).0;
    }
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
}

#[test]
fn an_errant_replica_is_quarantined_not_repointed() {
    let mut o = healthy3();
    server(&mut o.members[2]).executed = g("0-102-11");
    server(&mut o.members[2]).replication = None;
    let d = decide(&o);
    assert_eq!(d.verdicts[2].errant.as_deref(), Some("0-102-11"));
    assert_eq!(d.verdicts[2].role, None, "no client traffic");
    assert_eq!(d.operation, Operation::Relabel { changes: vec![(2, None)], reads: vec![(2, false)] });
    assert_eq!(d.health, Health::Degraded);
}

#[test]
fn a_replica_the_primary_refuses_to_serve_is_errant_not_reconfigured_again_and_again() {
    // e2e: a killed primary had written 0-101-9 to its binary log, unacknowledged; the new
    // primary went on to 0-100-10. MariaDB positions keep only the last GTID, so the sets
    // look contained; the new primary refuses the position (1236) and says so.
    let mut o = cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-101-9"), replica(2, 0, "0-100-10")]);
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.io_running = false;
        r.source_refused = true;
        r.last_error = Some("Got fatal error 1236 from master when reading data from binary log".into());
    }
    let d = decide(&o);
    assert_eq!(d.verdicts[1].errant.as_deref(), Some("0-101-9 (not in the primary's binary log)"));
    assert_eq!(
        d.operation,
        Operation::Relabel { changes: vec![(1, None)], reads: vec![(1, false)] },
        "quarantined, not reconfigured"
    );
    // The refusal of a former source says nothing about the current one: repoint it.
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.source_host = addr(2).0;
    }
    assert_eq!(decide(&o).verdicts[1].errant, None);
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
}

#[test]
fn a_new_primary_is_labelled_before_replicas_are_configured() {
    // After a failover to 0, the former primary 1 is back but not replicating yet: clients
    // must reach 0 before 1 is dealt with.
    let mut o = cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-100-10"), replica(2, 0, "0-100-10")]);
    o.members[0].role_label = None;
    o.members[0].reads_label = false;
    o.members[1].role_label = Some("primary".into());
    server(&mut o.members[1]).replication = None;
    // The old label goes first: no moment with two pods behind the read-write Service.
    assert_eq!(
        op(&o),
        Operation::Relabel { changes: vec![(1, None), (0, Some(Role::Primary))], reads: vec![(1, false)] }
    );
    o.members[0].role_label = Some("primary".into());
    o.members[1].role_label = None;
    o.members[1].reads_label = false;
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 }, "then the replica");
}

#[test]
fn a_replica_configured_moments_ago_is_not_configured_again_yet() {
    let mut o = healthy3();
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.sql_running = false;
        r.last_error = Some("Duplicate entry '7' for key 'PRIMARY'".into());
    }
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
    o.recently_configured.insert((1, 0));
    o.members[2].role_label = None;
    o.members[2].reads_label = false;
    assert_eq!(
        op(&o),
        Operation::Relabel { changes: vec![(1, None), (2, Some(Role::Replica))], reads: vec![(1, false), (2, true)] },
        "the rest goes on meanwhile"
    );
    // Configured for another source before (a failover since): at once.
    o.recently_configured = [(1, 2)].into();
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
}

#[test]
fn a_replica_behind_is_not_errant_a_transient_blip_marks_nobody() {
    // MOCO #419: replicas read before the primary may be behind, never ahead (the gatherer
    // reads the primary's position last), so nobody is marked errant.
    let o = cluster(vec![primary(0, "0-100-20"), replica(1, 0, "0-100-3"), replica(2, 0, "")]);
    let d = decide(&o);
    assert!(d.verdicts.iter().all(|v| v.errant.is_none()));
}

#[test]
fn labels_follow_verdicts() {
    let mut o = healthy3();
    o.members[1].role_label = None;
    o.members[1].reads_label = false;
    o.members[2].role_label = Some("primary".into());
    assert_eq!(
        op(&o),
        Operation::Relabel {
            changes: vec![(1, Some(Role::Replica)), (2, Some(Role::Replica))],
            reads: vec![(1, true)]
        }
    );
}

#[test]
fn a_transient_blip_of_the_primary_does_not_fail_over() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), FAILOVER_AFTER_PASSES - 1);
    let d = decide(&o);
    assert!(matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::PrimaryUnreachable), "{d:?}");
    assert_eq!(d.health, Health::Degraded);
}

#[test]
fn failover_fences_every_replica_first_then_promotes_the_superset() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), FAILOVER_AFTER_PASSES);
    // Replica 1's receiver lost the primary and retries: it must be fenced too.
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.io_running = false;
        r.io_connecting = true;
    }
    // Replica 2 received more than replica 1 but has not applied it yet.
    if let Some(r) = &mut server(&mut o.members[2]).replication {
        r.retrieved = g("0-100-12");
    }
    let d = decide(&o);
    assert_eq!(d.health, Health::Failed);
    assert_eq!(d.operation, Operation::Fence { ordinals: vec![1, 2] });
    for i in [1, 2] {
        if let Some(r) = &mut server(&mut o.members[i]).replication {
            r.io_running = false;
            r.io_connecting = false;
        }
    }
    assert_eq!(op(&o), Operation::Promote { ordinal: 2, from: 0, received: "0-100-12".into() });
}

#[test]
fn a_deleted_primary_pod_fails_over_at_once() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), 0);
    o.members[0].pod = PodState::Missing;
    assert_eq!(op(&o), Operation::Fence { ordinals: vec![1, 2] });
    // Recreated but not started (the StatefulSet replaced a killed pod): no server runs in
    // it, nothing to wait for, even for an operator that has just started counting.
    o.members[0].pod = PodState::Pending;
    assert_eq!(op(&o), Operation::Fence { ordinals: vec![1, 2] });
}

#[test]
fn no_failover_without_enough_replicas_to_hold_every_acknowledged_write() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), 9);
    o.members[2] = down(replica(2, 0, "0-100-10"), 9);
    let d = decide(&o);
    assert_eq!(d.health, Health::Lost);
    assert!(
        matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::NotEnoughReplicasForSafeFailover),
        "{d:?}"
    );
    // Five servers waiting for two acknowledgements: three of four replicas suffice.
    let mut five = cluster(vec![
        down(primary(0, "0-100-10"), 9),
        replica(1, 0, "0-100-10"),
        replica(2, 0, "0-100-10"),
        replica(3, 0, "0-100-10"),
        down(replica(4, 0, "0-100-10"), 9),
    ]);
    five.ack_count = 2;
    assert_eq!(op(&five), Operation::Fence { ordinals: vec![1, 2, 3] });
    five.ack_count = 1; // MariaDB waits for one: every replica is needed.
    assert!(matches!(op(&five), Operation::Wait { reason, .. } if reason == MySql::NotEnoughReplicasForSafeFailover));
}

/// The double failure of the reliability review (H3): the primary dies and a replica that
/// may have held the only acknowledgement restarted, losing its relay log.
#[test]
fn no_failover_past_a_replica_that_restarted_without_catching_up() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-12"), 9);
    // Replica 1 restarted while the primary was down: what it lost is unknown.
    o.restarted.insert(1, None);
    let d = decide(&o);
    assert!(
        matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::ReplicaRestartedBeforeFailover),
        "{d:?}"
    );

    // It restarted earlier, when the primary had executed up to 12; replica 2 has 12, so
    // everything replica 1 could have acknowledged before its restart is on replica 2.
    for i in [1, 2] {
        let s = server(&mut o.members[i]);
        s.executed = g("0-100-12");
        if let Some(r) = &mut s.replication {
            r.retrieved = g("0-100-12");
        }
    }
    o.restarted.insert(1, Some(g("0-100-12")));
    assert_eq!(op(&o), Operation::Fence { ordinals: vec![1, 2] });

    // Replica 2 has only 11: transaction 12 may have been acknowledged by replica 1 alone.
    let s = server(&mut o.members[2]);
    s.executed = g("0-100-11");
    if let Some(r) = &mut s.replication {
        r.retrieved = g("0-100-11");
    }
    assert!(matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::ReplicaRestartedBeforeFailover));

    // MySQL waiting for two acknowledgements of four replicas: one doubtful replica still
    // leaves three intact, enough to hold every acknowledged write.
    let mut five = cluster(vec![
        down(primary(0, "0-100-10"), 9),
        replica(1, 0, "0-100-10"),
        replica(2, 0, "0-100-10"),
        replica(3, 0, "0-100-10"),
        replica(4, 0, "0-100-10"),
    ]);
    five.ack_count = 2;
    five.restarted.insert(4, None);
    assert_eq!(op(&five), Operation::Fence { ordinals: vec![1, 2, 3, 4] });
    five.restarted.insert(3, None);
    assert!(matches!(op(&five), Operation::Wait { reason, .. } if reason == MySql::ReplicaRestartedBeforeFailover));
}

#[test]
fn conflicting_replica_histories_abort_the_failover() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), 9);
    for (i, pos) in [(1, "0-100-10"), (2, "0-101-10")] {
        let s = server(&mut o.members[i]);
        s.executed = g(pos);
        if let Some(r) = &mut s.replication {
            r.io_running = false;
            r.retrieved = g(pos);
        }
    }
    assert!(matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::ConflictingReplicaHistories));
}

#[test]
fn hung_semi_sync_commit_on_an_unreachable_primary_still_fails_over() {
    // MOCO #813/#846: the primary's process hangs in a semi-sync wait and stops answering
    // while its pod still runs. After the grace passes, the failover goes ahead.
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), FAILOVER_AFTER_PASSES + 10);
    assert!(matches!(op(&o), Operation::Fence { .. }));
}

#[test]
fn a_single_server_cluster_waits_for_its_server() {
    let o = cluster(vec![down(primary(0, "0-100-1"), 50)]);
    let d = decide(&o);
    assert!(matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::PrimaryDown));
    assert_eq!(d.health, Health::Lost);
}

#[test]
fn an_empty_primary_after_data_loss_is_not_made_writable() {
    // The primary's volume was lost: it restarts empty and read-only while replicas hold
    // the data. Making it writable would fork history; the operator waits instead.
    let mut o = healthy3();
    o.members[0] = primary(0, "");
    server(&mut o.members[0]).read_only = true;
    let d = decide(&o);
    assert!(matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::PrimaryBehindReplica), "{d:?}");
}

#[test]
fn switchover_on_request_and_when_the_primary_pod_terminates() {
    let mut o = healthy3();
    o.switchover_to = Some(1);
    assert_eq!(op(&o), Operation::Switchover { from: 0, to: 1, terminating: false });
    if let Some(r) = &mut server(&mut o.members[1]).replication {
        r.lag_seconds = Some(100);
    }
    assert!(matches!(op(&o), Operation::Wait { reason, .. } if reason == MySql::SwitchoverTargetNotReady));
    let mut o = healthy3();
    o.members[0].pod = PodState::Terminating;
    assert_eq!(op(&o), Operation::Switchover { from: 0, to: 1, terminating: true }, "let go once handed over");
    let mut o = healthy3();
    o.switchover_to = Some(0);
    assert_eq!(op(&o), Operation::Nothing, "already the primary");
}

#[test]
fn scaling_down_below_the_primary_moves_it_first() {
    let mut o = cluster(vec![replica(0, 2, "0-100-5"), replica(1, 2, "0-100-5"), primary(2, "0-100-5")]);
    o.recorded_primary = Some(2);
    o.replicas = 1;
    assert_eq!(op(&o), Operation::Switchover { from: 2, to: 0, terminating: false });
}

#[test]
fn paused_and_stopped_change_nothing() {
    let mut o = healthy3();
    o.members[0] = down(primary(0, "0-100-10"), 9);
    o.paused = true;
    let d = decide(&o);
    assert_eq!((d.health, d.operation), (Health::Paused, Operation::Nothing));
    o.paused = false;
    o.replicas = 0;
    assert_eq!(decide(&o).health, Health::Stopped);
}

// Auto-healing (spec.autoHeal): re-seeding errant and broken replicas.

/// Makes member `i` errant (a transaction of its own in domain 0) and takes its label off,
/// as the pass before would have.
fn errant(o: &mut Observed, i: usize) {
    server(&mut o.members[i]).executed = g(&format!("0-10{i}-11"));
    o.members[i].role_label = None;
    o.members[i].reads_label = false;
}

/// Makes member `i`'s applier stop with an error, broken for `seconds`.
fn broken(o: &mut Observed, i: usize, seconds: u64) {
    if let Some(r) = &mut server(&mut o.members[i]).replication {
        r.sql_running = false;
        r.last_error = Some("Could not execute Write_rows_v1 event: Duplicate entry '7'".into());
    }
    o.members[i].role_label = None;
    o.members[i].reads_label = false;
    o.heal.broken_for.insert(o.members[i].ordinal, Duration::from_secs(seconds));
}

fn allow_errant(o: &mut Observed) {
    o.heal.reseed_errant = true;
}

fn wait_reason(o: &Observed) -> Reason {
    match op(o) {
        Operation::Wait { reason, .. } => reason,
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[test]
fn an_errant_replica_is_reseeded_only_when_the_user_opted_in() {
    let mut o = healthy3();
    errant(&mut o, 2);
    assert_eq!(op(&o), Operation::Nothing, "without the opt-in: flagged and left alone");
    assert_eq!(decide(&o).health, Health::Degraded);
    allow_errant(&mut o);
    assert_eq!(op(&o), Operation::Reseed { ordinal: 2, why: ReseedReason::Errant("0-102-11".into()) });
    // Still labelled (the first pass that sees it): clients leave it first.
    o.members[2].role_label = Some("replica".into());
    o.members[2].reads_label = true;
    assert_eq!(op(&o), Operation::Relabel { changes: vec![(2, None)], reads: vec![(2, false)] });
}

#[test]
fn a_broken_replica_is_reconfigured_until_its_time_is_up_then_reseeded() {
    let mut o = healthy3();
    broken(&mut o, 1, 600);
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 }, "without the opt-in: retried");
    o.heal.reseed_broken_after = Some(Duration::from_secs(601));
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 }, "not long enough");
    o.heal.reseed_broken_after = Some(Duration::from_secs(600));
    let error = "Could not execute Write_rows_v1 event: Duplicate entry '7'".to_string();
    assert_eq!(op(&o), Operation::Reseed { ordinal: 1, why: ReseedReason::Broken { error, seconds: 600 } });
    // Errant re-seeding alone does not cover broken replicas.
    o.heal.reseed_broken_after = None;
    allow_errant(&mut o);
    assert_eq!(op(&o), Operation::ConfigureReplica { ordinal: 1, source: 0 });
}

#[test]
fn the_primary_is_never_reseeded_nor_anything_while_paused() {
    let mut o = healthy3();
    allow_errant(&mut o);
    o.heal.reseed_broken_after = Some(Duration::from_secs(30));
    // A primary still showing the channel it had as a replica, with an old error.
    server(&mut o.members[0]).replication = replica(0, 1, "0-100-10").server.up().and_then(|s| s.replication.clone());
    if let Some(r) = &mut server(&mut o.members[0]).replication {
        r.sql_running = false;
        r.last_error = Some("old".into());
    }
    o.heal.broken_for.insert(0, Duration::from_secs(3600));
    assert_eq!(op(&o), Operation::Nothing);
    errant(&mut o, 2);
    o.paused = true;
    assert_eq!(op(&o), Operation::Nothing);
}

#[test]
fn no_reseed_when_too_few_other_replicas_would_acknowledge_writes() {
    // Both replicas errant: re-seeding either leaves the primary nobody to wait for.
    let mut o = healthy3();
    allow_errant(&mut o);
    errant(&mut o, 1);
    errant(&mut o, 2);
    assert_eq!(wait_reason(&o), MySql::ReseedWaitsForHealthyReplicas);
    // MySQL with five servers waits for two acknowledgements: two other healthy replicas
    // are needed besides the errant one.
    let mut five = cluster(vec![
        primary(0, "0-100-10"),
        replica(1, 0, "0-100-10"),
        replica(2, 0, "0-100-10"),
        replica(3, 0, "0-100-10"),
        replica(4, 0, "0-100-10"),
    ]);
    five.ack_count = 2;
    allow_errant(&mut five);
    errant(&mut five, 4);
    broken(&mut five, 1, 10);
    assert!(matches!(op(&five), Operation::Reseed { ordinal: 4, .. }), "replicas 2 and 3 acknowledge");
    broken(&mut five, 2, 10);
    assert!(matches!(op(&five), Operation::ConfigureReplica { ordinal: 1, .. }), "the retry goes first");
    // Once nothing else is to be done (both receivers reconnecting), the refusal is the wait.
    for i in [1, 2] {
        if let Some(r) = &mut server(&mut five.members[i]).replication {
            r.sql_running = true;
            r.io_running = false;
            r.io_connecting = true;
        }
    }
    assert_eq!(wait_reason(&five), MySql::ReseedWaitsForHealthyReplicas);
}

#[test]
fn one_member_at_a_time() {
    let mut five = cluster(vec![
        primary(0, "0-100-10"),
        replica(1, 0, "0-100-10"),
        replica(2, 0, "0-100-10"),
        replica(3, 0, "0-100-10"),
        replica(4, 0, "0-100-10"),
    ]);
    allow_errant(&mut five);
    errant(&mut five, 1);
    errant(&mut five, 3);
    assert!(
        matches!(op(&five), Operation::Reseed { ordinal: 1, .. }),
        "the lowest first; both are stuck, not rebuilding"
    );
    // Member 1 is being rebuilt: its pod terminates with the old server still answering...
    five.members[1].pod = PodState::Terminating;
    assert_eq!(wait_reason(&five), MySql::ReseedWaitsForMember);
    // ...then it is gone, then an empty server not yet configured.
    five.members[1] = down(replica(1, 0, ""), 3);
    five.members[1].pod = PodState::Missing;
    five.members[1].role_label = None;
    five.members[1].reads_label = false;
    assert_eq!(wait_reason(&five), MySql::ReseedWaitsForMember);
    five.members[1] = replica(1, 0, "");
    server(&mut five.members[1]).replication = None;
    five.members[1].role_label = None;
    five.members[1].reads_label = false;
    assert_eq!(op(&five), Operation::ConfigureReplica { ordinal: 1, source: 0 });
    // Replicating again (catching up counts): member 3's turn.
    five.members[1] = replica(1, 0, "0-100-4");
    assert!(matches!(op(&five), Operation::Reseed { ordinal: 3, .. }));
}

#[test]
fn a_down_replica_blocks_reseeding_another() {
    let mut o = cluster(vec![
        primary(0, "0-100-10"),
        replica(1, 0, "0-100-10"),
        replica(2, 0, "0-100-10"),
        down(replica(3, 0, "0-100-10"), 5),
        replica(4, 0, "0-100-10"),
    ]);
    o.members[3].role_label = None;
    o.members[3].reads_label = false;
    allow_errant(&mut o);
    errant(&mut o, 4);
    assert_eq!(wait_reason(&o), MySql::ReseedWaitsForMember);
}
