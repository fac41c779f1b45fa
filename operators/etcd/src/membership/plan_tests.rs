//! Every step and every safety rule of the planner, over hand-built observations.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::membership::observed::{Alarm, Member, MemberState, Observed, PodState};

fn names() -> Names {
    Names::new("c", "ns")
}

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0).unwrap()
}

fn id(k: u32) -> u64 {
    0x100 + u64::from(k)
}

fn desired(replicas: u32) -> Desired {
    Desired { replicas, replace_after: Some(Duration::from_secs(60)), defrag: None, leader: None }
}

fn member(k: u32, learner: bool) -> Member {
    Member {
        id: id(k),
        ordinal: Some(k),
        name: names().member(k),
        peer_urls: vec![names().peer_url(k)],
        is_learner: learner,
    }
}

fn pod(k: u32, created: i64) -> PodState {
    PodState {
        name: names().member(k),
        terminating: false,
        running: true,
        ready: true,
        crash_looping: false,
        restarts: 0,
        unplaceable: false,
        created: Some(t(created)),
        image: None,
        revision: None,
    }
}

fn state(k: u32, leader: u32, index: u64) -> MemberState {
    MemberState {
        id: id(k),
        leader: id(leader),
        raft_term: 2,
        raft_index: index,
        raft_applied_index: index,
        db_size: 1 << 20,
        db_size_in_use: 1 << 20,
        version: "3.6.16".into(),
        ..MemberState::default()
    }
}

/// A healthy cluster of `voters` and `learners` (caught up), led by member 0, at t(100).
fn cluster(voters: &[u32], learners: &[u32]) -> Observed {
    let mut o = Observed { members: Some(Vec::new()), now: t(100), ..Observed::default() };
    let leader = voters.first().copied().unwrap_or(0);
    for (&k, learner) in voters.iter().map(|k| (k, false)).chain(learners.iter().map(|k| (k, true))) {
        o.members.as_mut().unwrap().push(member(k, learner));
        o.states.insert(id(k), MemberState { is_learner: learner, ..state(k, leader, 1000) });
        o.pods.insert(k, pod(k, 0));
        o.claims.insert(k);
    }
    o.statefulset_replicas = statefulset_replicas(&o);
    o
}

/// Member `k` stops answering; its pod crash-loops.
fn down(o: &mut Observed, k: u32) {
    o.states.remove(&id(k));
    let p = o.pods.get_mut(&k).unwrap();
    p.running = false;
    p.crash_looping = true;
    p.restarts += 1;
}

fn lead(o: &mut Observed, k: u32) {
    for s in o.states.values_mut() {
        s.leader = id(k);
        s.raft_term = 3;
    }
}

fn members(o: &mut Observed) -> &mut Vec<Member> {
    o.members.as_mut().unwrap()
}

/// One pass: remember, then plan.
fn pass(d: &Desired, o: &Observed, m: &mut Memory) -> Step {
    remember(m, o);
    plan(d, o, m)
}

fn once(d: &Desired, o: &Observed) -> Step {
    pass(d, o, &mut Memory::default())
}

fn reason(step: &Step) -> Reason {
    step.reason()
}

// ---- bootstrap ----

#[test]
fn bootstraps_only_when_nothing_exists() {
    let empty = Observed { now: t(0), ..Observed::default() };
    assert_eq!(once(&desired(3), &empty), Step::Bootstrap);
    assert_eq!(statefulset_replicas(&empty), 1);
    let ic = initial_cluster(&names(), &empty).unwrap();
    assert_eq!(ic.members, format!("c-0={}", names().peer_url(0)));
    assert_eq!(ic.state, "new");

    // The first member's pod exists but does not answer yet.
    let mut starting = empty.clone();
    starting.pods.insert(0, pod(0, 0));
    starting.claims.insert(0);
    starting.statefulset_replicas = 1;
    assert_eq!(reason(&once(&desired(3), &starting)), Etcd::MemberStarting);
    assert_eq!(initial_cluster(&names(), &starting), None, "the bootstrap configuration is kept");

    // Volumes of an earlier cluster, no pod: never a new cluster over them.
    let mut leftovers = empty.clone();
    leftovers.claims.extend([0, 1, 2]);
    assert_eq!(reason(&once(&desired(3), &leftovers)), Etcd::QuorumLost);
    assert_eq!(initial_cluster(&names(), &leftovers), None);

    // Every member of a grown cluster down: quorum lost, nothing done, StatefulSet kept.
    let mut all_down = cluster(&[0, 1, 2], &[]);
    all_down.members = None;
    all_down.states.clear();
    assert_eq!(reason(&once(&desired(3), &all_down)), Etcd::QuorumLost);
    assert_eq!(statefulset_replicas(&all_down), 3);
    assert_eq!(initial_cluster(&names(), &all_down), None, "never `new` for a cluster that exists");
}

// ---- scale out ----

#[test]
fn scales_out_one_learner_at_a_time_and_promotes_it_when_caught_up() {
    let d = desired(3);
    let mut o = cluster(&[0], &[]);
    assert_eq!(once(&d, &o), Step::AddLearner { ordinal: 1 });

    // Learner added, pod not created yet: its pod follows from the member list.
    members(&mut o).push(Member { name: String::new(), ..member(1, true) });
    assert_eq!(statefulset_replicas(&o), 2);
    let ic = initial_cluster(&names(), &o).unwrap();
    assert_eq!(ic.members, format!("c-0={},c-1={}", names().peer_url(0), names().peer_url(1)));
    assert_eq!(ic.state, "existing");
    assert_eq!(reason(&once(&d, &o)), Etcd::MemberStarting);

    // Started, behind: wait, and no second learner meanwhile.
    o.pods.insert(1, pod(1, 100));
    members(&mut o)[1].name = "c-1".into();
    o.states.insert(id(1), MemberState { is_learner: true, ..state(1, 0, 10) });
    assert_eq!(reason(&once(&d, &o)), Etcd::LearnerCatchingUp);
    assert_eq!(reason(&once(&desired(5), &o)), Etcd::LearnerCatchingUp);

    // Caught up: within the margin and within etcd's own 90% rule.
    o.states.get_mut(&id(1)).unwrap().raft_applied_index = 950;
    assert_eq!(once(&d, &o), Step::Promote { id: id(1), ordinal: 1 });
    // On a long history, 90% is not enough: the margin is absolute.
    let mut old = o.clone();
    old.states.get_mut(&id(0)).unwrap().raft_index = 100_000;
    old.states.get_mut(&id(1)).unwrap().raft_applied_index = 100_000 - CATCH_UP_MARGIN - 1;
    assert_eq!(reason(&once(&d, &old)), Etcd::LearnerCatchingUp);
    old.states.get_mut(&id(1)).unwrap().raft_applied_index = 100_000 - CATCH_UP_MARGIN;
    assert_eq!(once(&d, &old), Step::Promote { id: id(1), ordinal: 1 });
    // On a young cluster, etcd's 90% rule is kept.
    let mut young = o.clone();
    young.states.get_mut(&id(0)).unwrap().raft_index = 20;
    young.states.get_mut(&id(1)).unwrap().raft_applied_index = 15;
    assert_eq!(reason(&once(&d, &young)), Etcd::LearnerCatchingUp);

    // Promoted: the next ordinal.
    members(&mut o)[1].is_learner = false;
    o.states.insert(id(1), state(1, 0, 1000));
    assert_eq!(once(&d, &o), Step::AddLearner { ordinal: 2 });
    let full = cluster(&[0, 1, 2], &[]);
    assert_eq!(once(&d, &full), Step::Idle);
}

#[test]
fn adding_needs_every_voter_healthy() {
    let mut o = cluster(&[0, 1, 2], &[]);
    down(&mut o, 2);
    assert_eq!(reason(&once(&desired(5), &o)), Etcd::WaitingForHealthyMembers);
}

#[test]
fn old_pod_still_terminating_delays_the_add() {
    let mut o = cluster(&[0, 1], &[]);
    o.pods.insert(2, PodState { terminating: true, ..pod(2, 0) });
    assert_eq!(reason(&once(&desired(3), &o)), Etcd::PodTerminating);
}

// ---- half-done changes ----

#[test]
fn stale_volume_of_a_removed_member_is_deleted_before_the_ordinal_returns() {
    let mut o = cluster(&[0, 1, 2], &[]);
    o.claims.insert(3);
    o.claims.insert(4);
    assert_eq!(once(&desired(5), &o), Step::DeleteStaleClaim { ordinal: 3 });
    // A volume whose pod still runs is not touched (a pod being recreated, or going).
    o.pods.insert(3, pod(3, 0));
    o.pods.insert(4, pod(4, 0));
    assert_eq!(once(&desired(5), &o), Step::AddLearner { ordinal: 3 });
}

#[test]
fn learner_pod_started_before_its_membership_is_restarted_once() {
    let d = desired(3);
    let mut o = cluster(&[0, 1], &[]);
    // The pod of 2 was recreated before 2 was added (a replacement below the highest
    // ordinal): it crash-loops, not a member yet.
    o.pods.insert(2, PodState { running: false, crash_looping: true, restarts: 3, ..pod(2, 50) });
    assert_eq!(once(&d, &o), Step::AddLearner { ordinal: 2 });
    members(&mut o).push(Member { name: String::new(), ..member(2, true) });
    let mut memory = Memory::default();
    assert_eq!(pass(&d, &o, &mut memory), Step::RestartPod { ordinal: 2 });
    // The new pod, created after the learner was seen, is not restarted again.
    o.now = t(110);
    o.pods.insert(2, PodState { running: false, crash_looping: true, restarts: 1, ..pod(2, 105) });
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberStarting);
    // A pod that is merely pending is waited for.
    o.pods.insert(2, PodState { running: false, ..pod(2, 50) });
    assert_eq!(reason(&once(&d, &o)), Etcd::MemberStarting);
}

#[test]
fn operator_killed_after_adding_a_learner_that_is_no_longer_wanted_removes_it_first() {
    // Learner 3 added for a scale-out to 5, then spec went back to 3, a voter is down and
    // NOSPACE is raised: the unwanted learner goes first, it cannot affect quorum.
    let mut o = cluster(&[0, 1, 2], &[]);
    members(&mut o).push(Member { name: String::new(), ..member(3, true) });
    down(&mut o, 2);
    o.alarms.insert(id(0), BTreeSet::from([Alarm::NoSpace]));
    assert_eq!(once(&desired(3), &o), Step::Remove { id: id(3), ordinal: 3 });
    // Still wanted: it just waits for its pod (which the StatefulSet size brings).
    o.alarms.clear();
    assert_eq!(statefulset_replicas(&o), 4);
    let mut wanted = cluster(&[0, 1, 2], &[]);
    members(&mut wanted).push(Member { name: String::new(), ..member(3, true) });
    assert_eq!(reason(&once(&desired(5), &wanted)), Etcd::MemberStarting);
}

#[test]
fn alarm_of_a_member_that_is_gone_is_cleared() {
    let mut o = cluster(&[0, 1, 2], &[]);
    o.alarms.insert(0x999, BTreeSet::from([Alarm::Corrupt]));
    assert_eq!(once(&desired(3), &o), Step::ClearAlarm { id: 0x999 });
}

// ---- quorum ----

#[test]
fn without_quorum_nothing_is_done() {
    let mut o = cluster(&[0, 1, 2], &[3]);
    down(&mut o, 1);
    down(&mut o, 2);
    o.claims.insert(5);
    o.alarms.insert(id(0), BTreeSet::from([Alarm::NoSpace]));
    let d = desired(1);
    let mut memory = Memory::default();
    remember(&mut memory, &o);
    o.now = t(10_000);
    let step = plan(&d, &o, &memory);
    assert_eq!(reason(&step), Etcd::QuorumLost, "{step:?}");
    // A learner does not count: 1 of 2 voters is not a majority either.
    let mut two = cluster(&[0, 1], &[2]);
    down(&mut two, 1);
    assert_eq!(reason(&once(&desired(3), &two)), Etcd::QuorumLost);
}

#[test]
fn no_leader_waits() {
    let mut o = cluster(&[0, 1, 2], &[]);
    for s in o.states.values_mut() {
        s.leader = 0;
    }
    assert_eq!(reason(&once(&desired(5), &o)), Etcd::NoLeader);
}

// ---- leadership on request ----

#[test]
fn leadership_moves_to_the_requested_voter_once_nothing_else_is_to_be_done() {
    let d = Desired { leader: Some(2), ..desired(3) };
    let mut o = cluster(&[0, 1, 2], &[]);
    assert_eq!(leader_request(&o, 2), LeaderRequest::Pending);
    assert_eq!(once(&d, &o), Step::MoveLeader { from: id(0), from_ordinal: 0, to: id(2), to_ordinal: 2 });
    // Done: it leads, nothing more is asked.
    lead(&mut o, 2);
    assert_eq!(leader_request(&o, 2), LeaderRequest::Leads);
    assert_eq!(once(&d, &o), Step::Idle);
    // Membership work comes first: a missing member is added before leadership moves.
    lead(&mut o, 0);
    assert_eq!(once(&Desired { replicas: 5, ..d.clone() }, &o), Step::AddLearner { ordinal: 3 });
    // A target that is down or behind waits, saying so.
    down(&mut o, 2);
    let waits = once(&d, &o);
    assert!(waits.message().contains("member 2 must be healthy and caught up"), "{waits:?}");
}

#[test]
fn a_request_naming_no_voter_is_refused_and_moves_nothing() {
    let o = cluster(&[0, 1, 2], &[3]);
    assert!(matches!(leader_request(&o, 7), LeaderRequest::Refused(m) if m.contains("not a member")));
    assert!(matches!(leader_request(&o, 3), LeaderRequest::Refused(m) if m.contains("learner")));
    let d = Desired { leader: Some(7), ..desired(3) };
    assert!(!matches!(once(&d, &cluster(&[0, 1, 2], &[])), Step::MoveLeader { .. }));
}

// ---- scale in ----

#[test]
fn scales_in_from_the_highest_ordinal_moving_leadership_first() {
    let d = desired(3);
    let mut o = cluster(&[0, 1, 2, 3, 4], &[]);
    assert_eq!(once(&d, &o), Step::Remove { id: id(4), ordinal: 4 });

    lead(&mut o, 4);
    assert_eq!(once(&d, &o), Step::MoveLeader { from: id(4), from_ordinal: 4, to: id(0), to_ordinal: 0 });
    // Operator killed after the transfer: the next pass removes the former leader.
    lead(&mut o, 0);
    assert_eq!(once(&d, &o), Step::Remove { id: id(4), ordinal: 4 });

    // The target must be healthy and caught up.
    lead(&mut o, 4);
    down(&mut o, 0);
    o.states.get_mut(&id(1)).unwrap().raft_applied_index = 10;
    assert_eq!(once(&d, &o), Step::MoveLeader { from: id(4), from_ordinal: 4, to: id(2), to_ordinal: 2 });
}

#[test]
fn scale_in_to_one_member() {
    let d = desired(1);
    let o = cluster(&[0, 1], &[]);
    assert_eq!(once(&d, &o), Step::Remove { id: id(1), ordinal: 1 });
    // Removal leaves the StatefulSet one pod; not idle until the other is gone, and then
    // the volume of 1 is cleaned up.
    let mut after = cluster(&[0], &[]);
    after.claims.insert(1);
    after.pods.insert(1, PodState { running: false, crash_looping: true, ..pod(1, 0) });
    after.statefulset_replicas = 2;
    assert_eq!(statefulset_replicas(&after), 1);
    assert_eq!(reason(&once(&d, &after)), Etcd::PodTerminating);
    after.pods.remove(&1);
    assert_eq!(once(&d, &after), Step::DeleteStaleClaim { ordinal: 1 });
}

#[test]
fn scale_in_removes_an_unhealthy_member_first_and_never_below_quorum() {
    // 5 -> 3 with member 3 dead: 3 goes first (no fault tolerance lost).
    let mut o = cluster(&[0, 1, 2, 3, 4], &[]);
    down(&mut o, 3);
    assert_eq!(once(&desired(3), &o), Step::Remove { id: id(3), ordinal: 3 });

    // 5 -> 3 with 0 and 1 dead: removing healthy 4 would leave 2 healthy of 4 voters.
    let mut o = cluster(&[0, 1, 2, 3, 4], &[]);
    lead(&mut o, 2);
    down(&mut o, 0);
    down(&mut o, 1);
    assert_eq!(reason(&once(&desired(3), &o)), Etcd::WaitingForHealthyMembers);
}

#[test]
fn five_to_three_with_a_dead_member_below_the_size() {
    let d = desired(3);
    let mut memory = Memory::default();
    let mut o = cluster(&[0, 1, 2, 3, 4], &[]);
    down(&mut o, 1);
    // Dead only briefly: scale-in proceeds, from the top, each removal quorum-safe.
    assert_eq!(pass(&d, &o, &mut memory), Step::Remove { id: id(4), ordinal: 4 });
    members(&mut o).retain(|m| m.id != id(4));
    o.pods.remove(&4);
    o.claims.remove(&4);
    o.now = t(110);
    assert_eq!(pass(&d, &o, &mut memory), Step::Remove { id: id(3), ordinal: 3 });
    members(&mut o).retain(|m| m.id != id(3));
    o.pods.remove(&3);
    o.claims.remove(&3);
    o.now = t(120);
    // 0, 2 healthy of {0, 1, 2}: wait until 1 has been down long enough.
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(161);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(1), ordinal: 1 });
}

#[test]
fn gaps_are_filled_before_members_beyond_the_size_are_removed() {
    // {0, 2, 3} for 3 replicas (1 was replaced): 1 is added, then 3 removed.
    let d = desired(3);
    let o = cluster(&[0, 2, 3], &[]);
    assert_eq!(once(&d, &o), Step::AddLearner { ordinal: 1 });
    let o = cluster(&[0, 1, 2, 3], &[]);
    assert_eq!(once(&d, &o), Step::Remove { id: id(3), ordinal: 3 });
    // {0, 2, 3, 4} for 3: one too many, so remove first (never above the size + 1).
    let o = cluster(&[0, 2, 3, 4], &[]);
    assert_eq!(once(&d, &o), Step::Remove { id: id(4), ordinal: 4 });
}

// ---- replace ----

#[test]
fn member_that_lost_its_data_is_replaced_after_the_delay() {
    let d = desired(3);
    let mut memory = Memory::default();
    let mut o = cluster(&[0, 1, 2], &[]);
    down(&mut o, 2);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(159);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(160);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(2), ordinal: 2 });

    // Auto-heal off: reported only.
    let off = Desired { replace_after: None, ..d.clone() };
    let step = pass(&off, &o, &mut memory);
    assert_eq!(reason(&step), Etcd::MemberUnhealthy);
    assert!(step.message().contains("off"), "{}", step.message());
}

#[test]
fn member_whose_pod_cannot_be_placed_is_not_replaced_and_then_has_the_whole_delay_to_start() {
    let d = desired(3);
    let mut memory = Memory::default();
    let mut o = cluster(&[0, 1, 2], &[]);
    down(&mut o, 2);
    // Recreated by a roll with a node selector no node matches: pending for long.
    let p = o.pods.get_mut(&2).unwrap();
    (p.crash_looping, p.unplaceable) = (false, true);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(1000);
    let step = pass(&d, &o, &mut memory);
    assert_eq!(reason(&step), Etcd::MemberUnhealthy);
    assert!(step.message().contains("cannot run its pod"), "{}", step.message());
    // Membership is settled: a fixed pod template may roll, restarting the stuck pod.
    assert!(rolls(&step, &o));
    // Placed at last: the new pod has the whole delay to start before a replacement.
    o.pods.get_mut(&2).unwrap().unplaceable = false;
    o.now = t(1001);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(1059);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(1060);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(2), ordinal: 2 });
    // A pod Kubernetes refuses to create (a PriorityClass that does not exist): the same.
    let mut memory = Memory::default();
    o.pods.remove(&2);
    o.refused.insert(2);
    o.now = t(1100);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(1500);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.refused.clear();
    o.pods.insert(2, PodState { running: false, ..pod(2, 1500) });
    // Its volume's node gone from the start: a new volume is the cure, after the delay.
    let mut memory = Memory::default();
    o.now = t(2000);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberUnhealthy);
    o.now = t(2060);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(2), ordinal: 2 });
}

#[test]
fn only_an_idle_plan_or_a_member_down_with_every_pod_there_lets_a_roll_run() {
    let mut o = cluster(&[0, 1, 2], &[]);
    let down_wait = wait(Etcd::MemberUnhealthy, "member 2 unhealthy");
    assert!(rolls(&Step::Idle, &o));
    assert!(rolls(&down_wait, &o));
    for unsettled in [
        wait(Etcd::MemberStarting, "learner 2 starting"),
        wait(Etcd::QuorumLost, "1 of 3"),
        wait(Etcd::MemberCorrupt, "member 1 corrupt"),
        Step::AddLearner { ordinal: 2 },
        Step::Replace { id: id(2), ordinal: 2 },
    ] {
        assert!(!rolls(&unsettled, &o), "{unsettled:?}");
    }
    // The pod of a member just restarted, terminating and then gone: the roll must not look
    // (it would not see that member and could call itself done).
    o.pods.get_mut(&0).unwrap().terminating = true;
    assert!(!rolls(&down_wait, &o));
    o.pods.remove(&0);
    assert!(!rolls(&down_wait, &o));
}

#[test]
fn transient_blips_do_not_add_up() {
    let d = desired(3);
    let mut memory = Memory::default();
    let healthy = cluster(&[0, 1, 2], &[]);
    let mut blip = healthy.clone();
    down(&mut blip, 1);
    for (now, o) in [(100, &blip), (140, &healthy), (150, &blip), (200, &blip)] {
        let mut o = o.clone();
        o.now = t(now);
        let step = pass(&d, &o, &mut memory);
        assert!(!matches!(step, Step::Replace { .. }), "at {now}: {step:?}");
    }
    let mut o = blip.clone();
    o.now = t(210);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(1), ordinal: 1 });
    // Once it answers again, it is forgotten.
    let mut ok = healthy.clone();
    ok.now = t(211);
    remember(&mut memory, &ok);
    assert!(memory.unhealthy_since.is_empty());
}

#[test]
fn replacing_needs_a_quorum_of_the_other_voters() {
    let d = desired(3);
    let mut memory = Memory::default();
    let mut o = cluster(&[0, 1, 2], &[]);
    lead(&mut o, 0);
    // 1 corrupt but answering; 2 recently down: replacing 1 would leave 0 alone of 2.
    o.alarms.insert(id(1), BTreeSet::from([Alarm::Corrupt]));
    down(&mut o, 2);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberCorrupt);
    // Once 2 has been down long enough, it is replaced (1 stays: 0 and 1 are the quorum).
    o.now = t(200);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(2), ordinal: 2 });
}

#[test]
fn corrupt_member_is_replaced_at_once_and_a_corrupt_leader_hands_over_first() {
    let d = desired(3);
    let mut o = cluster(&[0, 1, 2], &[]);
    o.alarms.insert(id(1), BTreeSet::from([Alarm::Corrupt]));
    assert_eq!(once(&d, &o), Step::Replace { id: id(1), ordinal: 1 });
    lead(&mut o, 1);
    assert_eq!(once(&d, &o), Step::MoveLeader { from: id(1), from_ordinal: 1, to: id(0), to_ordinal: 0 });
    // Corruption outranks NOSPACE and scaling.
    o.alarms.insert(id(0), BTreeSet::from([Alarm::NoSpace]));
    lead(&mut o, 0);
    assert_eq!(once(&desired(5), &o), Step::Replace { id: id(1), ordinal: 1 });
    // Auto-heal off: reported only.
    let off = Desired { replace_after: None, ..d };
    o.alarms.remove(&id(0));
    assert_eq!(reason(&once(&off, &o)), Etcd::MemberCorrupt);
}

#[test]
fn learner_that_never_starts_is_replaced_but_a_pending_one_is_not() {
    let d = desired(3);
    let mut memory = Memory::default();
    let mut o = cluster(&[0, 1], &[]);
    members(&mut o).push(Member { name: String::new(), ..member(2, true) });
    // Pod pending (image pull, scheduling) for long: slow, not broken.
    o.pods.insert(2, PodState { running: false, ..pod(2, 99) });
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberStarting);
    o.now = t(1000);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::MemberStarting);
    // Crash-looping (stale data) for long, after its one restart: replaced.
    o.pods.insert(2, PodState { running: false, crash_looping: true, restarts: 9, ..pod(2, 500) });
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(2), ordinal: 2 });
}

#[test]
fn replacement_is_not_blocked_by_a_learner_catching_up() {
    // Learner 3 catching up while voter 1 has been dead for long: the dead voter is
    // replaced (its removal keeps quorum), the learner keeps catching up.
    let d = desired(5);
    let mut memory = Memory::default();
    let mut o = cluster(&[0, 1, 2], &[3]);
    o.states.get_mut(&id(3)).unwrap().raft_applied_index = 1;
    down(&mut o, 1);
    assert_eq!(reason(&pass(&d, &o, &mut memory)), Etcd::LearnerCatchingUp);
    o.now = t(200);
    assert_eq!(pass(&d, &o, &mut memory), Step::Replace { id: id(1), ordinal: 1 });
}

// ---- NOSPACE and defragmentation ----

#[test]
fn nospace_is_recovered_before_scaling() {
    let mut o = cluster(&[0, 1, 2], &[]);
    o.alarms.insert(id(2), BTreeSet::from([Alarm::NoSpace]));
    assert_eq!(once(&desired(5), &o), Step::RecoverNoSpace);
    assert_eq!(once(&desired(1), &o), Step::RecoverNoSpace);
}

#[test]
fn defragments_followers_before_the_leader_only_when_all_is_well() {
    let policy = DefragPolicy { threshold_percent: 50, min_db_size: 1 << 20 };
    let d = Desired { defrag: Some(policy), ..desired(3) };
    let mut o = cluster(&[0, 1, 2], &[]);
    lead(&mut o, 1);
    let fragmented = |o: &mut Observed, k: u32, size: i64, in_use: i64| {
        let s = o.states.get_mut(&id(k)).unwrap();
        s.db_size = size;
        s.db_size_in_use = in_use;
    };
    fragmented(&mut o, 1, 8 << 20, 1 << 20);
    fragmented(&mut o, 2, 8 << 20, 1 << 20);
    assert_eq!(once(&d, &o), Step::Defragment { id: id(2), ordinal: 2 });
    fragmented(&mut o, 2, 1 << 20, 1 << 20);
    assert_eq!(once(&d, &o), Step::Defragment { id: id(1), ordinal: 1 });

    // Below the free share, below the minimum size: left alone.
    let mut below = o.clone();
    fragmented(&mut below, 1, 8 << 20, 5 << 20);
    assert_eq!(once(&d, &below), Step::Idle);
    let mut small = o.clone();
    fragmented(&mut small, 1, 512 << 10, 1 << 10);
    assert_eq!(once(&d, &small), Step::Idle);
    // Off, or a member unhealthy, or something else to do: not now.
    assert_eq!(once(&desired(3), &o), Step::Idle);
    let mut sick = o.clone();
    down(&mut sick, 0);
    assert_eq!(reason(&once(&d, &sick)), Etcd::MemberUnhealthy);
    assert_eq!(once(&Desired { replicas: 5, ..d.clone() }, &o), Step::AddLearner { ordinal: 3 });
}

// ---- members not added by the operator ----

#[test]
fn foreign_members_are_never_touched() {
    let foreign = Member {
        id: 0xf00,
        ordinal: None,
        name: "other".into(),
        peer_urls: vec!["http://10.0.0.9:2380".into()],
        is_learner: false,
    };
    // A foreign voter counts for quorum, is never removed, and blocks adding when down.
    let mut o = cluster(&[0, 1, 2], &[]);
    members(&mut o).push(foreign.clone());
    o.states.insert(0xf00, MemberState { id: 0xf00, leader: id(0), ..MemberState::default() });
    assert_eq!(once(&desired(3), &o), Step::Idle);
    assert_eq!(once(&desired(1), &o), Step::Remove { id: id(2), ordinal: 2 });
    o.states.remove(&0xf00);
    assert_eq!(reason(&once(&desired(5), &o)), Etcd::ForeignMember);
    assert_eq!(once(&desired(3), &o), Step::Idle, "it blocks nothing else");
    let ic = initial_cluster(&names(), &o).unwrap();
    assert!(ic.members.ends_with(",other=http://10.0.0.9:2380"), "{}", ic.members);

    // A foreign learner blocks adding (one learner at a time) and is never promoted.
    let mut o = cluster(&[0, 1, 2], &[]);
    members(&mut o).push(Member { is_learner: true, ..foreign });
    o.states
        .insert(0xf00, MemberState { id: 0xf00, leader: id(0), raft_applied_index: 1000, ..MemberState::default() });
    assert_eq!(reason(&once(&desired(5), &o)), Etcd::ForeignMember);
    assert_eq!(statefulset_replicas(&o), 3);
}

#[test]
fn names_address_members() {
    let n = names();
    assert_eq!(Addressing::member_name(&n, 3), "c-3");
    assert_eq!(Addressing::ordinal_of_peer_url(&n, &Addressing::peer_url(&n, 3)), Some(3));
    assert_eq!(Addressing::ordinal_of_name(&n, "c-4"), Some(4));
    assert_eq!(Addressing::client_url(&n, 1), "http://c-1.c-peer.ns.svc:2379");
    assert_eq!(quorum(1), 1);
    assert_eq!(quorum(2), 2);
    assert_eq!(quorum(4), 3);
    assert_eq!(quorum(5), 3);
}

#[test]
fn every_step_has_a_reason_and_a_message() {
    let steps = [
        Step::Idle,
        Step::Bootstrap,
        Step::AddLearner { ordinal: 1 },
        Step::DeleteStaleClaim { ordinal: 1 },
        Step::RestartPod { ordinal: 1 },
        Step::Promote { id: 1, ordinal: 1 },
        Step::MoveLeader { from: 1, from_ordinal: 1, to: 2, to_ordinal: 2 },
        Step::Remove { id: 1, ordinal: 1 },
        Step::Replace { id: 1, ordinal: 1 },
        Step::ClearAlarm { id: 1 },
        Step::RecoverNoSpace,
        Step::Defragment { id: 1, ordinal: 1 },
    ];
    let reasons: BTreeSet<&str> = steps.iter().map(|s| s.reason().as_str()).collect();
    assert_eq!(reasons.len(), steps.len());
    for s in &steps {
        assert!(s.reason().as_str().chars().all(char::is_alphanumeric), "{s:?}");
        assert!(!s.message().is_empty());
    }
}

#[test]
fn a_step_on_one_member_names_it_for_its_event() {
    assert_eq!(Step::AddLearner { ordinal: 3 }.ordinal(), Some(3));
    assert_eq!(Step::Remove { id: 7, ordinal: 4 }.ordinal(), Some(4));
    let moved = Step::MoveLeader { from: 1, from_ordinal: 0, to: 2, to_ordinal: 1 };
    assert_eq!(moved.ordinal(), Some(1), "the new leader");
    assert_eq!(Step::Bootstrap.ordinal(), None);
    assert_eq!(Step::RecoverNoSpace.ordinal(), None);
}
