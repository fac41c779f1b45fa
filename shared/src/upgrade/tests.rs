//! Scenario tests of the whole engine against a fake data plane: a cluster whose members
//! restart, become ready, catch up and hand over leadership, and gates that record every
//! call and can be closed.

use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::Result;

/// The reasons the fake gates give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
enum Gates {
    ReplicaLagging,
    QuorumAtRisk,
    SwitchoverFailed,
}
impl crate::reason::Catalogue for Gates {}

const OLD: &str = "rev-1";
const NEW: &str = "rev-2";

/// A gate call or a restart, in the order they happened.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    MayRestart(String),
    BeforeRestart(String),
    CaughtUp(String),
    Restarted(String),
}

/// One fake member: what the operator observes, plus how far behind it is.
#[derive(Debug, Clone)]
struct Node {
    member: Member,
    /// Reconciles until it has caught up after becoming ready.
    lag: u32,
}

#[derive(Debug, Default)]
struct World {
    nodes: Vec<Node>,
    events: Vec<Event>,
    may_restart: Option<Gate>,
    before_restart: Option<Gate>,
    caught_up: Option<Gate>,
    /// Where `before_restart` hands leadership; by default to a ready member on target, as a
    /// sensible system would, else to any other ready member.
    transfer_to: Option<String>,
    /// Whether `before_restart` hands leadership over at all.
    no_transfer: bool,
    /// Invariant violations seen inside the gates.
    violations: Vec<String>,
}

/// The fake data plane; also the gates, as an operator's gates would query the data plane.
#[derive(Debug, Default)]
struct Fake(Mutex<World>);

impl Fake {
    fn new(nodes: Vec<Member>) -> Self {
        Fake(Mutex::new(World {
            nodes: nodes.into_iter().map(|member| Node { member, lag: 0 }).collect(),
            ..World::default()
        }))
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn members(&self) -> Vec<Member> {
        self.world().nodes.iter().map(|n| n.member.clone()).collect()
    }

    fn events(&self) -> Vec<Event> {
        self.world().events.clone()
    }

    fn restarts(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Restarted(name) => Some(name),
                _ => None,
            })
            .collect()
    }

    fn gate_calls(&self) -> Vec<Event> {
        self.events().into_iter().filter(|e| !matches!(e, Event::Restarted(_))).collect()
    }

    fn clear_events(&self) {
        self.world().events.clear();
    }

    fn node(&self, name: &str) -> Member {
        self.members().into_iter().find(|m| m.name == name).expect("known member")
    }

    fn edit(&self, name: &str, f: impl FnOnce(&mut Node)) {
        let mut world = self.world();
        let node = world.nodes.iter_mut().find(|n| n.member.name == name).expect("known member");
        f(node);
    }

    fn leader(&self) -> Option<String> {
        self.members().into_iter().find(|m| m.role == Role::Leader).map(|m| m.name)
    }

    /// Moves leadership to `to`; the old leader becomes a follower.
    fn move_leader(&self, to: &str) {
        move_leader(&mut self.world(), to);
    }

    /// The operator's restart: the pod comes back on the target revision, not yet ready,
    /// and behind the others.
    fn restart(&self, name: &str) {
        self.edit(name, |n| {
            n.member.current_revision = n.member.target_revision.clone();
            n.member.ready = false;
            n.lag = 2;
        });
        self.world().events.push(Event::Restarted(name.to_owned()));
    }

    /// Time passes: restarted members become ready, then catch up.
    fn tick(&self) {
        for node in &mut self.world().nodes {
            if !node.member.is_on_target() {
                continue;
            } else if !node.member.ready {
                node.member.ready = true;
            } else {
                node.lag = node.lag.saturating_sub(1);
            }
        }
    }

    /// Whether a member is in flight: restarted but not yet ready and caught up.
    fn in_flight(&self) -> Vec<String> {
        let world = self.world();
        world
            .nodes
            .iter()
            .filter(|n| n.member.is_on_target() && (!n.member.ready || n.lag > 0))
            .map(|n| n.member.name.clone())
            .collect()
    }
}

fn move_leader(world: &mut World, to: &str) {
    for node in &mut world.nodes {
        if node.member.role == Role::Leader {
            node.member.role = Role::Follower;
        }
        if node.member.name == to {
            node.member.role = Role::Leader;
        }
    }
}

impl UpgradeGates for Fake {
    async fn may_restart(&self, member: &Member) -> Result<Gate> {
        let mut world = self.world();
        world.events.push(Event::MayRestart(member.name.clone()));
        Ok(world.may_restart.clone().unwrap_or(Gate::Open))
    }

    async fn before_restart(&self, member: &Member) -> Result<Gate> {
        let mut world = self.world();
        world.events.push(Event::BeforeRestart(member.name.clone()));
        let is_leader = world.nodes.iter().any(|n| n.member.name == member.name && n.member.role == Role::Leader);
        if !is_leader {
            world.violations.push(format!("before_restart called for non-leader {}", member.name));
        }
        let others_left = world.nodes.iter().any(|n| n.member.name != member.name && n.member.needs_restart());
        if member.ready && others_left {
            world.violations.push(format!("ready leader {} prepared before the others were restarted", member.name));
        }
        if let Some(gate) = world.before_restart.clone() {
            return Ok(gate);
        }
        if !world.no_transfer {
            let candidates = || world.nodes.iter().filter(|n| n.member.name != member.name && n.member.ready);
            let to = world
                .transfer_to
                .clone()
                .or_else(|| candidates().find(|n| n.member.is_on_target()).map(|n| n.member.name.clone()))
                .or_else(|| candidates().next().map(|n| n.member.name.clone()));
            if let Some(to) = to {
                move_leader(&mut world, &to);
            }
        }
        Ok(Gate::Open)
    }

    async fn caught_up(&self, member: &Member) -> Result<Gate> {
        let mut world = self.world();
        world.events.push(Event::CaughtUp(member.name.clone()));
        if let Some(gate) = world.caught_up.clone() {
            return Ok(gate);
        }
        let lag = world.nodes.iter().find(|n| n.member.name == member.name).map_or(0, |n| n.lag);
        Ok(if lag == 0 {
            Gate::Open
        } else {
            Gate::closed(Gates::ReplicaLagging, format!("{} is {lag} behind", member.name))
        })
    }
}

fn member(name: &str, role: Role, ready: bool, current: &str) -> Member {
    Member {
        name: name.into(),
        role,
        ready,
        current_revision: current.into(),
        target_revision: NEW.into(),
        ..Default::default()
    }
}

/// `n` ready members on the old revision, `db-{leader}` leading.
fn cluster(n: usize, leader: usize) -> Vec<Member> {
    (0..n)
        .map(|i| member(&format!("db-{i}"), if i == leader { Role::Leader } else { Role::Follower }, true, OLD))
        .collect()
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).expect("valid timestamp")
}

/// The operator's reconcile loop against the fake: observe, decide, act, record. Stops on
/// `Done`, on `Blocked`, or when `stop` says so; panics on a livelock or on two members in
/// flight at once. Returns the steps taken.
async fn drive(
    fake: &Fake,
    progress: &mut UpgradeProgress,
    now: &mut DateTime<Utc>,
    mut stop: impl FnMut(&Step) -> bool,
) -> Vec<Step> {
    let mut steps = Vec::new();
    let limit = 20 * fake.members().len() + 20;
    for _ in 0..limit {
        let members = fake.members();
        let step = next_step_at(&members, fake, progress, *now).await.expect("gates do not fail");
        progress.advance(&step, *now);
        steps.push(step.clone());
        match &step.action {
            Action::Restart { member } => {
                let in_flight = fake.in_flight();
                assert!(in_flight.is_empty(), "restarting {member} while {in_flight:?} in flight");
                fake.restart(member);
            }
            Action::WaitFor { .. } => fake.tick(),
            Action::Replan { .. } => {}
            Action::Blocked { .. } | Action::Done => return steps,
        }
        if stop(&step) {
            return steps;
        }
        *now += chrono::Duration::seconds(10);
    }
    panic!("no progress after {limit} steps: {steps:#?}");
}

async fn roll(fake: &Fake) -> (UpgradeProgress, Vec<Step>) {
    let mut progress = UpgradeProgress::default();
    let steps = drive(fake, &mut progress, &mut t0(), |_| false).await;
    (progress, steps)
}

#[tokio::test]
async fn rolls_unready_first_then_learners_then_followers_then_leader() {
    let fake = Fake::new(vec![
        member("db-0", Role::Leader, true, OLD),
        member("db-1", Role::Learner, true, OLD),
        member("db-2", Role::Follower, false, OLD),
        member("db-3", Role::Follower, true, OLD),
        member("db-4", Role::Follower, true, OLD),
    ]);
    let (progress, steps) = roll(&fake).await;
    assert_eq!(steps.last().map(|s| &s.action), Some(&Action::Done));
    assert_eq!(fake.restarts(), ["db-2", "db-1", "db-3", "db-4", "db-0"]);
    assert_eq!(progress.members_done.len(), 5);
    assert!(progress.completed_at.is_some());
    assert!(progress.in_flight.is_none());
}

#[tokio::test]
async fn waits_for_the_member_in_flight_before_touching_another() {
    let fake = Fake::new(vec![
        member("a", Role::Follower, false, NEW),
        member("b", Role::Follower, true, OLD),
        member("c", Role::Leader, true, OLD),
    ]);
    let step = next_step_at(&fake.members(), &fake, &UpgradeProgress::default(), t0()).await.expect("ok");
    assert!(
        matches!(&step.action, Action::WaitFor { member, reason, .. } if member == "a" && reason.as_str() == "MemberNotReady")
    );
    assert!(fake.gate_calls().is_empty(), "no gate is asked while a member is not ready");

    fake.edit("a", |n| {
        n.member.ready = true;
        n.lag = 1;
    });
    let step = next_step_at(&fake.members(), &fake, &UpgradeProgress::default(), t0()).await.expect("ok");
    assert!(
        matches!(&step.action, Action::WaitFor { member, reason, .. } if member == "a" && reason.as_str() == "ReplicaLagging")
    );
    assert_eq!(fake.gate_calls(), [Event::CaughtUp("a".into())], "no may_restart while a lags");
}

#[tokio::test]
async fn a_closed_may_restart_gate_blocks_with_its_reason() {
    let fake = Fake::new(cluster(3, 0));
    fake.world().may_restart = Some(Gate::closed(Gates::QuorumAtRisk, "only 2 of 3 members healthy"));
    let mut progress = UpgradeProgress::default();
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(
        step.action,
        Action::Blocked {
            member: "db-1".into(),
            reason: Gates::QuorumAtRisk.into(),
            message: "only 2 of 3 members healthy".into()
        }
    );
    assert_eq!(step.action.reason().as_str(), "QuorumAtRisk");
    progress.advance(&step, t0());
    let block = progress.last_block.clone().expect("block recorded");
    assert_eq!((block.member.as_str(), block.reason.as_str()), ("db-1", "QuorumAtRisk"));
    assert!(progress.in_flight.is_none(), "a blocked member is not in flight");

    fake.world().may_restart = None;
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(step.action, Action::Restart { member: "db-1".into() });
}

#[tokio::test]
async fn before_restart_is_called_for_the_leader_only_and_before_its_restart() {
    let fake = Fake::new(cluster(3, 1));
    roll(&fake).await;
    let events = fake.events();
    let before: Vec<_> = events.iter().filter(|e| matches!(e, Event::BeforeRestart(_))).collect();
    assert_eq!(before, [&Event::BeforeRestart("db-1".into())]);
    let prepared = events.iter().position(|e| e == &Event::BeforeRestart("db-1".into()));
    let restarted = events.iter().position(|e| e == &Event::Restarted("db-1".into()));
    assert!(prepared < restarted, "{events:?}");
    assert_eq!(fake.restarts(), ["db-0", "db-2", "db-1"]);
    assert!(fake.world().violations.is_empty());
}

#[tokio::test]
async fn a_closed_before_restart_gate_blocks_the_leader() {
    let fake = Fake::new(vec![member("a", Role::Leader, true, OLD), member("b", Role::Follower, true, NEW)]);
    fake.world().before_restart = Some(Gate::closed(Gates::SwitchoverFailed, "no replica in sync"));
    let (progress, steps) = roll(&fake).await;
    let last = steps.last().map(|s| s.action.clone());
    assert!(
        matches!(last, Some(Action::Blocked { ref member, ref reason, .. }) if member == "a" && reason.as_str() == "SwitchoverFailed")
    );
    assert!(fake.restarts().is_empty());
    assert_eq!(progress.members_done, ["b"]);
}

#[tokio::test]
async fn a_closed_caught_up_gate_keeps_waiting() {
    let fake = Fake::new(vec![member("a", Role::Follower, true, NEW), member("b", Role::Follower, true, OLD)]);
    fake.world().caught_up = Some(Gate::closed(Gates::ReplicaLagging, "a is 300 transactions behind"));
    let mut progress = UpgradeProgress::default();
    for _ in 0..3 {
        let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
        assert_eq!(
            step.action,
            Action::WaitFor {
                member: "a".into(),
                reason: Gates::ReplicaLagging.into(),
                message: "a is 300 transactions behind".into()
            }
        );
        progress.advance(&step, t0());
    }
    assert!(!fake.gate_calls().contains(&Event::MayRestart("b".into())));

    fake.world().caught_up = None;
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(step.confirmed, ["a"]);
    assert_eq!(step.action, Action::Restart { member: "b".into() });
}

#[tokio::test]
async fn resumes_from_persisted_progress_after_an_operator_restart() {
    let fake = Fake::new(cluster(5, 0));
    let mut progress = UpgradeProgress::default();
    let mut now = t0();
    // Roll until the third restart has been issued, then "crash".
    let third_restart = |s: &Step| matches!(&s.action, Action::Restart { member } if member == "db-3");
    drive(&fake, &mut progress, &mut now, third_restart).await;
    assert_eq!(fake.restarts(), ["db-1", "db-2", "db-3"]);
    let persisted = serde_json::to_string(&progress).expect("serializable");

    // A new operator process: fresh gates' history, progress read back from status.
    fake.clear_events();
    let mut progress: UpgradeProgress = serde_json::from_str(&persisted).expect("deserializable");
    assert_eq!(progress.members_done, ["db-1", "db-2"]);
    assert_eq!(progress.in_flight.as_ref().map(|f| f.name.as_str()), Some("db-3"));

    let step = next_step_at(&fake.members(), &fake, &progress, now).await.expect("ok");
    assert!(matches!(&step.action, Action::WaitFor { member, .. } if member == "db-3"), "{step:?}");
    drive(&fake, &mut progress, &mut now, |_| false).await;
    assert_eq!(fake.restarts(), ["db-4", "db-0"], "finished members are not restarted again");
    let asked: Vec<_> = fake
        .gate_calls()
        .into_iter()
        .filter(|e| matches!(e, Event::CaughtUp(m) if m == "db-1" || m == "db-2"))
        .collect();
    assert!(asked.is_empty(), "members already done are not asked again: {asked:?}");
}

#[tokio::test]
async fn the_new_leader_goes_last_when_leadership_moves_during_the_roll() {
    let fake = Fake::new(cluster(3, 0));
    let mut progress = UpgradeProgress::default();
    let mut now = t0();
    drive(&fake, &mut progress, &mut now, |s| matches!(s.action, Action::Restart { .. })).await;
    assert_eq!(fake.restarts(), ["db-1"]);
    // An election moves leadership to db-2, still on the old revision.
    fake.move_leader("db-2");
    drive(&fake, &mut progress, &mut now, |_| false).await;
    assert_eq!(fake.restarts(), ["db-1", "db-0", "db-2"]);
    let before: Vec<_> = fake.events().into_iter().filter(|e| matches!(e, Event::BeforeRestart(_))).collect();
    assert_eq!(before, [Event::BeforeRestart("db-2".into())], "db-0 is no longer leader");
}

#[tokio::test]
async fn after_a_transfer_the_old_leader_is_a_follower_and_the_new_leader_goes_last() {
    // The leader is broken, so it goes first, and hands leadership to db-2 (old revision).
    let mut members = cluster(3, 0);
    members[0].ready = false;
    let fake = Fake::new(members);
    fake.world().transfer_to = Some("db-2".into());
    let mut progress = UpgradeProgress::default();
    let mut now = t0();
    let steps = drive(&fake, &mut progress, &mut now, |s| matches!(s.action, Action::Replan { .. })).await;
    assert_eq!(steps.last().map(|s| &s.action), Some(&Action::Replan { member: "db-0".into() }));
    assert_eq!(fake.leader().as_deref(), Some("db-2"));
    assert_eq!(fake.node("db-0").role, Role::Follower);

    fake.world().transfer_to = None;
    drive(&fake, &mut progress, &mut now, |_| false).await;
    assert_eq!(fake.restarts(), ["db-0", "db-1", "db-2"]);
    assert!(fake.world().violations.is_empty());
}

#[tokio::test]
async fn nothing_to_do_is_done_and_asks_nothing_the_second_time() {
    let members: Vec<_> = (0..3).map(|i| member(&format!("db-{i}"), Role::Follower, true, NEW)).collect();
    let fake = Fake::new(members);
    let mut progress = UpgradeProgress::default();
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(step.action, Action::Done);
    assert_eq!(step.confirmed, ["db-0", "db-1", "db-2"]);
    progress.advance(&step, t0());
    let recorded = progress.clone();

    fake.clear_events();
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(step.action, Action::Done);
    assert!(fake.events().is_empty());
    progress.advance(&step, t0() + chrono::Duration::hours(1));
    assert_eq!(progress, recorded, "a steady state writes nothing");
}

#[tokio::test]
async fn an_unknown_current_revision_is_restarted() {
    let fake = Fake::new(vec![member("a", Role::Follower, true, ""), member("b", Role::Leader, true, NEW)]);
    let (_, steps) = roll(&fake).await;
    assert_eq!(fake.restarts(), ["a"]);
    assert_eq!(steps.last().map(|s| &s.action), Some(&Action::Done));
}

#[tokio::test]
async fn an_unknown_target_revision_holds_the_roll() {
    let mut members = vec![member("a", Role::Follower, true, OLD), member("b", Role::Follower, true, OLD)];
    members[1].target_revision.clear();
    let fake = Fake::new(members);
    let step = next_step_at(&fake.members(), &fake, &UpgradeProgress::default(), t0()).await.expect("ok");
    assert!(
        matches!(&step.action, Action::WaitFor { member, reason, .. } if member == "b" && reason.as_str() == "TargetRevisionUnknown")
    );
    assert!(fake.events().is_empty());
}

#[tokio::test]
async fn an_unobserved_restart_is_waited_for_then_issued_again_for_the_same_member() {
    let fake = Fake::new(cluster(3, 0));
    let mut progress = UpgradeProgress::default();
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(step.action, Action::Restart { member: "db-1".into() });
    progress.advance(&step, t0()); // recorded, but the operator died before deleting the pod

    let later = t0() + chrono::Duration::minutes(5);
    let step = next_step_at(&fake.members(), &fake, &progress, later).await.expect("ok");
    assert!(
        matches!(&step.action, Action::WaitFor { member, reason, .. } if member == "db-1" && reason.as_str() == "RestartPending")
    );

    let much_later = t0() + chrono::Duration::minutes(11);
    let step = next_step_at(&fake.members(), &fake, &progress, much_later).await.expect("ok");
    assert_eq!(step.action, Action::Restart { member: "db-1".into() });
    progress.advance(&step, much_later);
    let restarted = progress.in_flight.as_ref().and_then(InFlightMember::restarted);
    assert_eq!(restarted, Some(much_later), "the timeout starts again");
}

#[tokio::test]
async fn a_new_target_replaces_a_broken_in_flight_member_instead_of_waiting_for_it() {
    // db-1 crash-loops on rev-2; the user ships rev-3 to fix it.
    let mut members = cluster(3, 0);
    members[1].current_revision = NEW.into();
    members[1].ready = false;
    let fake = Fake::new(members);
    let mut progress = UpgradeProgress::default();
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert!(matches!(&step.action, Action::WaitFor { member, .. } if member == "db-1"));
    progress.advance(&step, t0());

    for node in &mut fake.world().nodes {
        node.member.target_revision = "rev-3".into();
    }
    let step = next_step_at(&fake.members(), &fake, &progress, t0()).await.expect("ok");
    assert_eq!(step.action, Action::Restart { member: "db-1".into() });
    assert_eq!(step.target_revision, "rev-3");
    progress.advance(&step, t0());
    assert_eq!(progress.target_revision, "rev-3");
}

#[tokio::test]
async fn a_single_member_is_prepared_then_restarted_once() {
    let fake = Fake::new(cluster(1, 0));
    fake.world().no_transfer = true;
    let (_, steps) = roll(&fake).await;
    let actions: Vec<_> = steps.iter().map(|s| s.action.reason().as_str()).collect();
    assert_eq!(actions[..2], ["LeaderPrepared", "RestartingMember"]);
    assert_eq!(fake.restarts(), ["db-0"]);
}

#[tokio::test]
async fn failing_gates_fail_the_step() {
    struct Down;
    impl UpgradeGates for Down {
        async fn may_restart(&self, _: &Member) -> Result<Gate> {
            Err(crate::Error::DataPlane { system: "mysql".into(), message: "connection refused".into() })
        }
        async fn caught_up(&self, _: &Member) -> Result<Gate> {
            Ok(Gate::Open)
        }
    }
    let err = next_step_at(&cluster(2, 0), &Down, &UpgradeProgress::default(), t0()).await.expect_err("gate failed");
    assert_eq!(err.category(), crate::ErrorCategory::Transient);
}

#[test]
fn next_step_is_send() {
    fn assert_send<T: Send>(_: T) {}
    let fake = Fake::new(cluster(3, 0));
    let members = fake.members();
    let progress = UpgradeProgress::default();
    assert_send(next_step(&members, &fake, &progress));
}

/// Whole rolls of 1, 3 and 5 members with the leader anywhere: followers in name order,
/// the leader last, everyone exactly once.
#[tokio::test]
async fn whole_rolls_restart_every_member_once_and_the_leader_last() {
    for n in [1, 3, 5] {
        for leader in 0..n {
            let fake = Fake::new(cluster(n, leader));
            let (progress, steps) = roll(&fake).await;
            let leader_name = format!("db-{leader}");
            let mut expected: Vec<_> = (0..n).filter(|&i| i != leader).map(|i| format!("db-{i}")).collect();
            expected.push(leader_name.clone());
            assert_eq!(fake.restarts(), expected, "n={n} leader={leader}");
            assert_eq!(steps.last().map(|s| &s.action), Some(&Action::Done));
            assert_eq!(progress.members_done.len(), n);
            let before: Vec<_> = fake.events().into_iter().filter(|e| matches!(e, Event::BeforeRestart(_))).collect();
            assert_eq!(before, [Event::BeforeRestart(leader_name)], "n={n} leader={leader}");
        }
    }
}

/// Random clusters (roles, readiness, some members already on target, an interrupted
/// operator): the invariants hold whatever the start.
#[tokio::test]
async fn random_clusters_keep_the_invariants() {
    let mut rng = StdRng::seed_from_u64(7);
    for case in 0..200 {
        let n = rng.random_range(1..=7);
        let leader = rng.random_range(0..n);
        let members: Vec<Member> = (0..n)
            .map(|i| {
                let role = if i == leader {
                    Role::Leader
                } else if rng.random_bool(0.2) {
                    Role::Learner
                } else {
                    Role::Follower
                };
                let on_target = rng.random_bool(0.2);
                let ready = on_target || rng.random_bool(0.8);
                member(&format!("m-{i}"), role, ready, if on_target { NEW } else { OLD })
            })
            .collect();
        let must_restart: Vec<_> = members.iter().filter(|m| m.needs_restart()).map(|m| m.name.clone()).collect();
        let unready: Vec<_> =
            members.iter().filter(|m| !m.ready && m.needs_restart()).map(|m| m.name.clone()).collect();
        let fake = Fake::new(members);

        let mut progress = UpgradeProgress::default();
        let mut now = t0();
        // Simulate an operator restart at a random step by round-tripping the progress.
        let crash_after = rng.random_range(0..10);
        let mut steps = 0;
        drive(&fake, &mut progress, &mut now, |_| {
            steps += 1;
            steps > crash_after
        })
        .await;
        progress = serde_json::from_value(serde_json::to_value(&progress).expect("ser")).expect("de");
        let last = drive(&fake, &mut progress, &mut now, |_| false).await;

        assert_eq!(last.last().map(|s| &s.action), Some(&Action::Done), "case {case}");
        let restarts = fake.restarts();
        let mut sorted = restarts.clone();
        sorted.sort();
        let mut expected = must_restart.clone();
        expected.sort();
        assert_eq!(sorted, expected, "case {case}: each member needing it restarted exactly once");
        assert!(
            restarts.iter().take(unready.len()).all(|r| unready.contains(r)),
            "case {case}: unready members first: {restarts:?}, unready {unready:?}"
        );
        assert!(fake.world().violations.is_empty(), "case {case}: {:?}", fake.world().violations);
        assert!(fake.members().iter().all(|m| m.is_on_target() && m.ready), "case {case}");
    }
}

#[test]
fn a_failed_roll_step_counts_as_none_and_a_taken_one_says_whether_to_pass_again() {
    let restart = Action::Restart { member: "db-1".into() };
    assert_eq!(super::taken(Ok(Some((restart.clone(), true))), "db"), (Some(restart), true));
    assert_eq!(super::taken(Ok(Some((Action::Done, false))), "db"), (Some(Action::Done), false));
    assert_eq!(super::taken::<Action>(Ok(None), "db"), (None, false));
    assert_eq!(super::taken::<Action>(Err(crate::Error::NotLeading), "db"), (None, false));
}
