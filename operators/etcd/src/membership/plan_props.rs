//! Property tests of [`plan`] over generated observations: voters and learners (some
//! foreign), members that answer or not, leaders reported by some, raft indexes from zero
//! to `u64::MAX`, pods in every state, stale volumes, alarms and remembered unhealthy
//! times. Whatever the observation, the step taken must keep etcd's safety rules; the
//! unit tests in `plan_tests.rs` show which step each situation gets.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

use super::observed::{Alarm, Member, MemberState, Observed, PodState};
use super::plan::{DefragPolicy, Desired, Memory, Step, caught_up, leader, member_healthy, plan, quorum, remember};
use crate::build::Names;
use crate::reason::Etcd;
use statecraft_shared::reason::Common;

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0).single().unwrap_or_default()
}

fn id(k: u32) -> u64 {
    0x100 + u64::from(k)
}

/// A foreign member's id (one this operator did not add).
const FOREIGN: u64 = 0x900;

/// One generated member slot: whether it exists and how it behaves.
#[derive(Clone, Debug)]
struct Slot {
    exists: bool,
    learner: bool,
    started: bool,
    answers: bool,
    /// Entries its applied index trails the leader's log by.
    lag: u64,
    pod: Option<PodState>,
    claim: bool,
    alarm: Option<Alarm>,
    /// Seconds before now it was first seen unhealthy (remembered).
    unhealthy_for: Option<i64>,
}

fn pod_state() -> impl Strategy<Value = PodState> {
    let flags =
        (prop::bool::weighted(0.1), prop::bool::weighted(0.85), prop::bool::weighted(0.1), prop::bool::weighted(0.1));
    (flags, 0..1000i64).prop_map(|((terminating, running, crash_looping, unplaced), created)| PodState {
        name: String::new(),
        terminating,
        running,
        ready: running,
        crash_looping,
        restarts: i32::from(crash_looping),
        // A pod the scheduler cannot place never runs.
        unplaceable: unplaced && !running,
        created: Some(t(created)),
        image: None,
        revision: None,
    })
}

fn slot() -> impl Strategy<Value = Slot> {
    let lag = prop_oneof![6 => Just(0u64), 2 => 0..700u64, 1 => Just(u64::MAX)];
    let alarm = prop_oneof![12 => Just(None), 1 => Just(Some(Alarm::Corrupt)), 1 => Just(Some(Alarm::NoSpace))];
    (
        (prop::bool::weighted(0.8), prop::bool::weighted(0.2), prop::bool::weighted(0.9), prop::bool::weighted(0.85)),
        lag,
        prop::option::weighted(0.9, pod_state()),
        prop::bool::weighted(0.9),
        alarm,
        prop::option::weighted(0.3, 0..200i64),
    )
        .prop_map(|((exists, learner, started, answers), lag, pod, claim, alarm, unhealthy_for)| Slot {
            exists,
            learner,
            started,
            answers,
            lag,
            pod,
            claim,
            alarm,
            unhealthy_for,
        })
}

/// A generated situation: up to seven ordinals, possibly a foreign voter and learner, the
/// spec, and the memory of the passes before.
#[derive(Clone, Debug)]
struct Situation {
    slots: Vec<Slot>,
    /// A foreign voter / learner exists (and whether it answers).
    foreign: (Option<bool>, Option<bool>),
    /// Every member answers and runs (the common case, so that later steps are reached).
    all_well: bool,
    /// Which voter leads (index into the voters), or none reported.
    leader: Option<usize>,
    /// The leader's last raft index.
    index: u64,
    /// Some members report a stale leader with an older term.
    stale_leader: bool,
    /// No member list at all (nothing answered).
    no_list: bool,
    desired: Desired,
    statefulset_replicas: u32,
}

fn situation() -> impl Strategy<Value = Situation> {
    let desired = (
        0..7u32,
        prop::option::of(0..120u64),
        prop::option::weighted(0.3, (0..60u32, 0..(4i64 << 20))),
        prop::option::weighted(0.3, 0..7u32),
    )
        .prop_map(|(replicas, after, defrag, leader)| Desired {
            replicas,
            replace_after: after.map(Duration::from_secs),
            defrag: defrag.map(|(threshold_percent, min_db_size)| DefragPolicy { threshold_percent, min_db_size }),
            leader,
        });
    (
        prop::collection::vec(slot(), 1..7),
        (prop::option::weighted(0.1, any::<bool>()), prop::option::weighted(0.1, any::<bool>())),
        prop::bool::weighted(0.4),
        prop::option::weighted(0.95, any::<usize>()),
        prop_oneof![4 => 0..5000u64, 1 => Just(u64::MAX)],
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.08),
        desired,
        0..8u32,
    )
        .prop_map(
            |(slots, foreign, all_well, leader, index, stale_leader, no_list, desired, statefulset_replicas)| {
                Situation {
                    slots,
                    foreign,
                    all_well,
                    leader,
                    index,
                    stale_leader,
                    no_list,
                    desired,
                    statefulset_replicas,
                }
            },
        )
}

impl Situation {
    fn observe(&self) -> (Observed, Memory) {
        let names = Names::new("c", "ns");
        let now = t(1000);
        let mut o = Observed { now, statefulset_replicas: self.statefulset_replicas, ..Observed::default() };
        let mut memory = Memory::default();
        let mut members = Vec::new();
        for (k, s) in (0u32..).zip(&self.slots) {
            let pod = s.pod.clone().map(|p| {
                if self.all_well {
                    PodState { terminating: false, running: true, ready: true, crash_looping: false, ..p }
                } else {
                    p
                }
            });
            if let Some(p) = pod {
                o.pods.insert(k, PodState { name: names.member(k), ..p });
            }
            if s.claim || self.all_well {
                o.claims.insert(k);
            }
            if let Some(since) = s.unhealthy_for {
                memory.unhealthy_since.insert(k, now - chrono::Duration::seconds(since));
            }
            // An alarm of a member that no longer exists is a replaced member's.
            if let Some(alarm) = s.alarm.filter(|_| !self.all_well) {
                o.alarms.entry(id(k)).or_default().insert(alarm);
            }
            if !s.exists {
                continue;
            }
            members.push(Member {
                id: id(k),
                ordinal: Some(k),
                name: if s.started || self.all_well { names.member(k) } else { String::new() },
                peer_urls: vec![names.peer_url(k)],
                is_learner: s.learner,
            });
        }
        let (foreign_voter, foreign_learner) = self.foreign;
        for (i, (learner, answers)) in [(false, foreign_voter), (true, foreign_learner)].into_iter().enumerate() {
            let Some(answers) = answers else { continue };
            let fid = FOREIGN + i as u64;
            members.push(Member {
                id: fid,
                ordinal: None,
                name: "other".into(),
                peer_urls: vec![],
                is_learner: learner,
            });
            if answers {
                o.states.insert(fid, MemberState { id: fid, is_learner: learner, ..MemberState::default() });
            }
        }
        let voters: Vec<u64> = members.iter().filter(|m| !m.is_learner).map(|m| m.id).collect();
        let leader = self.leader.and_then(|i| voters.get(i % voters.len().max(1))).copied().unwrap_or(0);
        for (k, s) in (0u32..).zip(&self.slots) {
            if !s.exists || !(s.answers || self.all_well) {
                continue;
            }
            let stale = self.stale_leader && k % 2 == 1;
            o.states.insert(
                id(k),
                MemberState {
                    id: id(k),
                    // A member that missed the last election names the voter that led before
                    // (learners never lead).
                    leader: if stale { voters.last().copied().unwrap_or(0) } else { leader },
                    raft_term: if stale { 1 } else { 2 },
                    raft_index: self.index,
                    raft_applied_index: self.index.saturating_sub(s.lag),
                    db_size: 4 << 20,
                    db_size_in_use: 1 << 20,
                    is_learner: s.learner,
                    ..MemberState::default()
                },
            );
        }
        // The foreign members answer with the same leader, caught up.
        for fid in [FOREIGN, FOREIGN + 1] {
            if let Some(s) = o.states.get_mut(&fid) {
                s.leader = leader;
                s.raft_term = 2;
                s.raft_index = self.index;
                s.raft_applied_index = self.index;
            }
        }
        o.members = (!self.no_list).then_some(members);
        if self.no_list && self.all_well {
            // A cluster never started: no pod, no volume.
            o.pods.clear();
            o.claims.clear();
        }
        (o, memory)
    }
}

fn member(o: &Observed, id: u64, ordinal: u32) -> Result<&Member, TestCaseError> {
    o.members
        .iter()
        .flatten()
        .find(|m| m.id == id && m.ordinal == Some(ordinal))
        .ok_or_else(|| TestCaseError::fail(format!("no member {id:x} at ordinal {ordinal}")))
}

/// The safety rules of one step.
fn step_is_safe(d: &Desired, o: &Observed, step: &Step) -> Result<(), TestCaseError> {
    // Never panics on its way to Events and conditions either.
    let _ = (step.reason(), step.message(), step.ordinal());
    let Some(members) = &o.members else {
        // A new cluster only where nothing of an old one exists: a member that lost its data
        // and bootstrapped would found a second cluster.
        if *step == Step::Bootstrap {
            prop_assert!(o.pods.is_empty() && o.claims.is_empty(), "bootstrap over existing pods or volumes");
        }
        prop_assert!(matches!(step, Step::Bootstrap | Step::Wait { .. }), "{:?} without a member list", step);
        return Ok(());
    };
    prop_assert!(*step != Step::Bootstrap, "bootstrap of a cluster that has members");
    let voters = members.iter().filter(|m| !m.is_learner).count();
    let healthy = |m: &Member| member_healthy(o, m);
    let healthy_voters = members.iter().filter(|m| !m.is_learner && healthy(m)).count();
    let current_leader = leader(o);
    // Any change needs quorum and a leader: without them etcd cannot commit it, and the
    // operator could act on a minority's stale view.
    if !matches!(step, Step::Idle | Step::Wait { .. }) {
        prop_assert!(healthy_voters >= quorum(voters), "{:?} with {}/{} healthy voters", step, healthy_voters, voters);
        prop_assert!(current_leader.is_some(), "{:?} without a leader", step);
    }
    match step {
        // A voter goes only when the healthy voters left still make a quorum of the voters
        // left; the leader never goes (leadership is moved first).
        Step::Remove { id, ordinal } | Step::Replace { id, ordinal } => {
            let m = member(o, *id, *ordinal)?;
            if !m.is_learner {
                let left = healthy_voters - usize::from(healthy(m));
                prop_assert!(left >= quorum(voters - 1), "{:?} leaves {} healthy of {} voters", step, left, voters - 1);
            }
            prop_assert_ne!(current_leader, Some(*id), "removing the leader");
        }
        // Only a learner that has caught up with the leader is promoted (that it is also
        // healthy is `promotes_only_a_healthy_learner`, ignored: a known bug).
        Step::Promote { id, ordinal } => {
            let m = member(o, *id, *ordinal)?;
            prop_assert!(m.is_learner && caught_up(o, *id), "{:?} of {:?}", step, m);
        }
        // One membership change at a time: no learner in flight, every voter healthy, an
        // ordinal that is wanted and free.
        Step::AddLearner { ordinal } => {
            prop_assert!(members.iter().all(|m| !m.is_learner), "a second learner");
            prop_assert!(members.iter().filter(|m| !m.is_learner).all(healthy), "an unhealthy voter");
            prop_assert!(members.iter().all(|m| m.ordinal != Some(*ordinal)), "ordinal {} taken", ordinal);
            prop_assert!(*ordinal < d.replicas.max(1));
            prop_assert!(o.pods.get(ordinal).is_none_or(|p| !p.terminating));
        }
        // Leadership goes from the leader to a healthy, caught-up voter.
        Step::MoveLeader { from, from_ordinal, to, to_ordinal } => {
            prop_assert_eq!(Some(*from), current_leader);
            member(o, *from, *from_ordinal)?;
            let target = member(o, *to, *to_ordinal)?;
            prop_assert!(to != from && !target.is_learner && healthy(target) && caught_up(o, *to), "{:?}", step);
        }
        // Only the volume of an ordinal that is no member and has no pod is deleted.
        Step::DeleteStaleClaim { ordinal } => {
            prop_assert!(o.claims.contains(ordinal) && !o.pods.contains_key(ordinal));
            prop_assert!(members.iter().all(|m| m.ordinal != Some(*ordinal)), "deleting a member's volume");
        }
        // Only a learner that never started has its pod restarted.
        Step::RestartPod { ordinal } => {
            let m = members.iter().find(|m| m.ordinal == Some(*ordinal));
            prop_assert!(m.is_some_and(|m| m.is_learner && !m.started()), "{:?}", step);
        }
        // The alarm of a current member (a CORRUPT one) stays until it is replaced.
        Step::ClearAlarm { id } => prop_assert!(members.iter().all(|m| m.id != *id)),
        Step::Defragment { id, ordinal } => {
            member(o, *id, *ordinal)?;
            prop_assert!(members.iter().all(healthy) && o.alarms.is_empty());
        }
        Step::RecoverNoSpace => {
            prop_assert!(o.alarms.values().any(|a| a.contains(&Alarm::NoSpace)));
        }
        Step::Idle | Step::Wait { .. } | Step::Bootstrap => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every step keeps quorum, promotes only caught-up learners, changes one member at a
    /// time, never bootstraps over data and never panics, with the memory of the passes
    /// before (updated by this observation first, as the controller does).
    #[test]
    fn every_step_is_safe(s in situation()) {
        let (o, mut memory) = s.observe();
        remember(&mut memory, &o);
        step_is_safe(&s.desired, &o, &plan(&s.desired, &o, &memory))?;
    }

    /// The same with a memory that does not match the observation (an operator restarted
    /// or a clock that jumped): memory only delays or hastens replacements, never makes a
    /// step unsafe.
    #[test]
    fn every_step_is_safe_whatever_is_remembered(s in situation(), since in prop::collection::btree_map(0..8u32, -5000..5000i64, 0..4)) {
        let (o, _) = s.observe();
        let memory = Memory {
            unhealthy_since: since.into_iter().map(|(k, secs)| (k, t(secs))).collect::<BTreeMap<_, _>>(),
            ..Memory::default()
        };
        step_is_safe(&s.desired, &o, &plan(&s.desired, &o, &memory))?;
    }
}

/// A promoted learner is healthy (its pod runs and is not being deleted), as the planner's
/// own quorum argument assumes ("the learner is healthy, so the promotion keeps it").
///
/// (Found by this property: `learner_step` once promoted a learner that answered and had
/// caught up whatever its pod's state; see `promoting_a_learner_whose_pod_goes_minimal_case`.)
#[test]
fn promotes_only_a_healthy_learner() {
    let mut runner = TestRunner::new(ProptestConfig::with_cases(256));
    let result = runner.run(&situation(), |s| {
        let (o, mut memory) = s.observe();
        remember(&mut memory, &o);
        if let Step::Promote { id, ordinal } = plan(&s.desired, &o, &memory) {
            let m = member(&o, id, ordinal)?;
            prop_assert!(member_healthy(&o, m), "promoted unhealthy learner {:?} (pod {:?})", m, o.pods.get(&ordinal));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The smallest case `promotes_only_a_healthy_learner` finds, by hand: one voter (0,
/// healthy, leader) and learner 1, caught up and answering, whose pod is being deleted.
/// The planner used to promote 1: two voters, and once the pod is gone one healthy voter of
/// two, quorum lost until the pod is back. It waits now, as the add waits for
/// `PodTerminating`.
#[test]
fn promoting_a_learner_whose_pod_goes_minimal_case() {
    let names = Names::new("c", "ns");
    let mut o = Observed { now: t(100), statefulset_replicas: 2, ..Observed::default() };
    let mut members = Vec::new();
    for (k, learner) in [(0, false), (1, true)] {
        members.push(Member {
            id: id(k),
            ordinal: Some(k),
            name: names.member(k),
            peer_urls: vec![names.peer_url(k)],
            is_learner: learner,
        });
        let state = MemberState {
            id: id(k),
            leader: id(0),
            raft_term: 2,
            raft_index: 1000,
            raft_applied_index: 1000,
            is_learner: learner,
            ..MemberState::default()
        };
        o.states.insert(id(k), state);
        let pod = PodState {
            name: names.member(k),
            terminating: k == 1,
            running: true,
            ready: true,
            crash_looping: false,
            restarts: 0,
            unplaceable: false,
            created: Some(t(0)),
            image: None,
            revision: None,
        };
        o.pods.insert(k, pod);
        o.claims.insert(k);
    }
    o.members = Some(members);
    let d = Desired { replicas: 3, replace_after: Some(Duration::from_secs(60)), defrag: None, leader: None };
    let mut memory = Memory::default();
    remember(&mut memory, &o);
    let step = plan(&d, &o, &memory);
    assert!(!matches!(step, Step::Promote { .. }), "{step:?}");
}

/// The generator is not vacuous: it reaches each kind of step the rules above judge.
#[test]
fn the_generator_reaches_every_kind_of_step() {
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<&'static str, u32> = BTreeMap::new();
    for _ in 0..1024 {
        let s = situation().new_tree(&mut runner).map(|t| t.current()).unwrap_or_else(|e| panic!("{e}"));
        let (o, mut memory) = s.observe();
        remember(&mut memory, &o);
        *seen.entry(plan(&s.desired, &o, &memory).reason().as_str()).or_default() += 1;
    }
    let kinds = [
        Etcd::AddLearner,
        Etcd::Promote,
        Etcd::RemoveMember,
        Etcd::ReplaceMember,
        Etcd::MoveLeader,
        Etcd::DeleteStaleClaim,
        Etcd::ClearAlarm,
        Etcd::RecoverNoSpace,
        Etcd::Defragment,
        Etcd::QuorumLost,
    ]
    .map(Into::<&'static str>::into)
    .into_iter()
    .chain([Common::Bootstrap.into()]);
    for kind in kinds {
        assert!(seen.get(kind).is_some_and(|n| *n >= 3), "{kind} reached too rarely: {seen:?}");
    }
}
