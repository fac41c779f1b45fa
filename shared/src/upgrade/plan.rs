//! The pure planner: classifies observed members and orders the restarts. No I/O, no clock,
//! so every ordering rule is testable without async.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::progress::{InFlightMember, UpgradeProgress};
use crate::{Error, Result};

/// What a member is to its cluster, which decides when it is restarted.
///
/// The variants are declared in restart order (the derived `Ord` is that order): losing a
/// learner costs nothing, losing a follower costs redundancy, losing the leader costs an
/// election. See the [module documentation](super) for the mapping per system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A non-voting member (etcd learner, Kafka broker): restarted first among ready members.
    Learner,
    /// A voting or serving member that is not the leader (MySQL replica, etcd follower,
    /// Kafka standby controller).
    #[default]
    Follower,
    /// The single member whose restart interrupts writes (MySQL primary, etcd leader, Kafka
    /// active controller): restarted last, after [`UpgradeGates::before_restart`].
    ///
    /// [`UpgradeGates::before_restart`]: super::UpgradeGates::before_restart
    Leader,
}

/// One observed member of the cluster, as the operator sees it right now.
///
/// Build it from observed state only (pod labels, readiness, the data plane's view of who
/// leads), never from the progress in status: the plan must be level-triggered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Member {
    /// Unique name, usually the pod name; [`Action`](super::Action)s refer to members by it.
    pub name: String,
    /// The member's current role; it may change between reconciles (leader transfer).
    pub role: Role,
    /// The stage of the roll the member belongs to: every member of a lower phase is
    /// restarted before any member of a higher one, ready or not (Kafka rolls all its
    /// controllers before its first broker, the active controller after every other one).
    /// Leave at 0 for a system that rolls in one stage: then unready members go first.
    pub phase: u32,
    /// Tie-breaker within a role: lower values restart first. Leave at 0 unless the system
    /// needs a finer order than [`Role`] gives.
    pub order: u32,
    /// Whether the member is ready (pod Ready condition, or the system's own health check).
    pub ready: bool,
    /// The revision the member runs, e.g. the pod's `controller-revision-hash` label or its
    /// image. Empty when unknown, which counts as needing a restart.
    pub current_revision: String,
    /// The revision the member should run, e.g. the StatefulSet's `status.updateRevision`.
    /// Empty when unknown, which holds the roll until it is known.
    pub target_revision: String,
}

impl Member {
    /// Whether the member provably runs its target revision.
    pub fn is_on_target(&self) -> bool {
        !self.target_revision.is_empty() && self.current_revision == self.target_revision
    }

    /// Whether the member must be restarted to reach its target revision. An unknown (empty)
    /// current revision counts: see the [module documentation](super#revisions).
    pub fn needs_restart(&self) -> bool {
        !self.target_revision.is_empty() && self.current_revision != self.target_revision
    }

    /// The key that orders restarts: by phase, then unready first, then by role, then
    /// `order`, then name.
    fn restart_key(&self) -> (u32, bool, Role, u32) {
        (self.phase, self.ready, self.role, self.order)
    }
}

/// Restart order between two members; see [`Member::restart_key`] and [`natural_cmp`].
fn restart_cmp(a: &Member, b: &Member) -> Ordering {
    a.restart_key().cmp(&b.restart_key()).then_with(|| natural_cmp(&a.name, &b.name))
}

/// Compares names with a trailing ordinal numerically (`db-2` < `db-10`), so that
/// StatefulSet pods are ordered as people read them.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    fn split(name: &str) -> (&str, Option<u64>) {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        (stem, name[stem.len()..].parse().ok())
    }
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
}

/// A member whose restart was issued (according to the progress) but which is not yet
/// observed on its target revision, e.g. a pod still terminating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRestart<'a> {
    /// The member.
    pub member: &'a Member,
    /// When the restart was issued; `None` if the progress does not say or cannot be parsed,
    /// which [`next_step`](super::next_step) treats as long ago.
    pub since: Option<DateTime<Utc>>,
}

/// The classified, ordered view of a cluster that [`next_step`](super::next_step) acts on.
///
/// Every member of the input appears in exactly one list (or as `restart_pending`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan<'a> {
    /// The identity of this roll: the members' distinct non-empty target revisions, sorted
    /// and comma-separated (usually just one). A progress recorded for another target is
    /// ignored, so a new target starts a new roll.
    pub target_revision: String,
    /// Members whose target revision is unknown. Nothing is restarted while any exists,
    /// because the planner cannot tell whether they are part of the roll.
    pub unknown_target: Vec<&'a Member>,
    /// Members on target but not ready: restarted (by us or by the world) and not yet
    /// back. The in-flight member comes first. Nothing else is touched until they settle.
    pub settling: Vec<&'a Member>,
    /// Members on target and ready that this roll has not yet confirmed caught up. The
    /// in-flight member comes first. Each needs an open
    /// [`caught_up`](super::UpgradeGates::caught_up) gate before anything else is restarted.
    pub unconfirmed: Vec<&'a Member>,
    /// The in-flight member, if its restart was issued but it is not yet on target.
    pub restart_pending: Option<PendingRestart<'a>>,
    /// Members to restart, in restart order. A member prepared by
    /// [`before_restart`](super::UpgradeGates::before_restart) comes first, because it is
    /// in flight.
    pub restarts: Vec<&'a Member>,
    /// The member whose `before_restart` gate already opened in the previous step, if it
    /// still needs a restart. Its restart does not call `before_restart` again.
    pub prepared: Option<&'a Member>,
    /// Members on target, ready, and confirmed caught up in this roll.
    pub done: Vec<&'a Member>,
}

impl Plan<'_> {
    /// Whether every member is on target, ready and confirmed: nothing left to do.
    pub fn is_complete(&self) -> bool {
        self.unknown_target.is_empty()
            && self.settling.is_empty()
            && self.unconfirmed.is_empty()
            && self.restart_pending.is_none()
            && self.restarts.is_empty()
    }

    /// The names in `restarts`, in order; handy in logs and tests.
    pub fn restart_order(&self) -> Vec<&str> {
        self.restarts.iter().map(|m| m.name.as_str()).collect()
    }
}

impl<'a> Plan<'a> {
    fn empty(target_revision: String) -> Self {
        Plan {
            target_revision,
            unknown_target: Vec::new(),
            settling: Vec::new(),
            unconfirmed: Vec::new(),
            restart_pending: None,
            restarts: Vec::new(),
            prepared: None,
            done: Vec::new(),
        }
    }

    /// Puts `member` in the list its observed state (and, for the in-flight member, its
    /// recorded restart) calls for. Members arrive in restart order.
    fn place(&mut self, member: &'a Member, in_flight: Option<&InFlightMember>, done: &BTreeSet<&str>) {
        let in_flight = in_flight.filter(|f| f.name == member.name);
        if member.target_revision.is_empty() {
            self.unknown_target.push(member);
        } else if member.needs_restart() {
            match in_flight {
                Some(f) if f.restarted_at.is_some() => {
                    self.restart_pending = Some(PendingRestart { member, since: f.restarted() });
                }
                Some(f) if f.prepared_at.is_some() => self.prepared = Some(member),
                _ => self.restarts.push(member),
            }
        } else if !member.ready {
            self.settling.push(member);
        } else if done.contains(member.name.as_str()) {
            self.done.push(member);
        } else {
            self.unconfirmed.push(member);
        }
    }
}

/// Classifies `members` and orders their restarts, using `progress` only for what the
/// observed state cannot tell (see [`Plan`]).
///
/// Fails with [`Error::Permanent`] if a member name is empty or listed twice: that is a bug
/// in the operator, and planning on it could restart the wrong member.
pub fn plan<'a>(members: &'a [Member], progress: &UpgradeProgress) -> Result<Plan<'a>> {
    validate(members)?;
    let target_revision = target_key(members);
    // A progress from another roll says nothing about this one.
    let fresh = UpgradeProgress::default();
    let progress = if progress.target_revision == target_revision { progress } else { &fresh };
    let done: BTreeSet<&str> = progress.members_done.iter().map(String::as_str).collect();
    let in_flight = progress.in_flight.as_ref();
    let is_in_flight = |m: &Member| in_flight.is_some_and(|f| f.name == m.name);

    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by(|a, b| restart_cmp(a, b));

    let mut plan = Plan::empty(target_revision);
    for member in sorted {
        plan.place(member, in_flight, &done);
    }
    if let Some(prepared) = plan.prepared {
        plan.restarts.insert(0, prepared);
    }
    move_to_front(&mut plan.settling, is_in_flight);
    move_to_front(&mut plan.unconfirmed, is_in_flight);
    Ok(plan)
}

/// Rejects member lists the planner cannot act on safely.
fn validate(members: &[Member]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for member in members {
        if member.name.is_empty() {
            return Err(Error::Permanent("upgrade plan: a member has an empty name".into()));
        }
        if !seen.insert(member.name.as_str()) {
            return Err(Error::Permanent(format!("upgrade plan: member {} is listed twice", member.name)));
        }
    }
    Ok(())
}

/// The identity of a roll: distinct non-empty targets, sorted, comma-separated.
fn target_key(members: &[Member]) -> String {
    let targets: BTreeSet<&str> =
        members.iter().map(|m| m.target_revision.as_str()).filter(|t| !t.is_empty()).collect();
    targets.into_iter().collect::<Vec<_>>().join(",")
}

/// Moves the first element matching `pred` to the front, keeping the others' order.
fn move_to_front<T: Copy>(items: &mut Vec<T>, pred: impl Fn(T) -> bool) {
    if let Some(i) = items.iter().position(|&item| pred(item)) {
        let item = items.remove(i);
        items.insert(0, item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, role: Role, ready: bool, current: &str) -> Member {
        Member {
            name: name.into(),
            role,
            ready,
            current_revision: current.into(),
            target_revision: "v2".into(),
            ..Default::default()
        }
    }

    fn progress(done: &[&str], in_flight: Option<InFlightMember>) -> UpgradeProgress {
        UpgradeProgress {
            target_revision: "v2".into(),
            members_done: done.iter().map(|s| s.to_string()).collect(),
            in_flight,
            ..Default::default()
        }
    }

    #[test]
    fn unready_first_then_learners_then_followers_then_leader() {
        let members = [
            member("db-0", Role::Leader, true, "v1"),
            member("db-1", Role::Follower, true, "v1"),
            member("db-2", Role::Learner, true, "v1"),
            member("db-3", Role::Follower, false, "v1"),
            member("db-4", Role::Follower, true, "v1"),
        ];
        let plan = plan(&members, &UpgradeProgress::default()).expect("valid members");
        assert_eq!(plan.restart_order(), ["db-3", "db-2", "db-1", "db-4", "db-0"]);
    }

    #[test]
    fn an_unready_leader_goes_before_ready_followers_but_after_unready_ones() {
        let members = [
            member("a", Role::Follower, true, "v1"),
            member("b", Role::Leader, false, "v1"),
            member("c", Role::Follower, false, "v1"),
        ];
        let plan = plan(&members, &UpgradeProgress::default()).expect("valid members");
        assert_eq!(plan.restart_order(), ["c", "b", "a"]);
    }

    #[test]
    fn order_breaks_ties_within_a_role_and_names_compare_ordinals_numerically() {
        let mut controller = member("ctrl-1", Role::Follower, true, "v1");
        controller.order = 0;
        let mut brokers =
            [member("broker-10", Role::Follower, true, "v1"), member("broker-2", Role::Follower, true, "v1")];
        for b in &mut brokers {
            b.order = 1;
        }
        let members = [brokers[0].clone(), brokers[1].clone(), controller];
        let plan = plan(&members, &UpgradeProgress::default()).expect("valid members");
        assert_eq!(plan.restart_order(), ["ctrl-1", "broker-2", "broker-10"]);
    }

    #[test]
    fn a_lower_phase_goes_first_even_when_a_higher_one_is_unready() {
        let mut standby = member("ctrl-1", Role::Follower, true, "v1");
        let mut active = member("ctrl-0", Role::Leader, false, "v1");
        active.phase = 1;
        let mut broken = member("broker-1", Role::Learner, false, "v1");
        broken.phase = 2;
        let mut broker = member("broker-0", Role::Learner, true, "v1");
        broker.phase = 2;
        let unready_standby = member("ctrl-2", Role::Follower, false, "v1");
        standby.order = 1;
        let members = [broker, broken, active, standby, unready_standby];
        let plan = plan(&members, &UpgradeProgress::default()).expect("valid members");
        assert_eq!(plan.restart_order(), ["ctrl-2", "ctrl-1", "ctrl-0", "broker-1", "broker-0"]);
    }

    #[test]
    fn classifies_every_member_once() {
        let mut unknown = member("u", Role::Follower, true, "v1");
        unknown.target_revision.clear();
        let members = [
            member("settling", Role::Follower, false, "v2"),
            member("unconfirmed", Role::Follower, true, "v2"),
            member("done", Role::Follower, true, "v2"),
            member("old", Role::Leader, true, "v1"),
            unknown,
        ];
        let plan = plan(&members, &progress(&["done"], None)).expect("valid members");
        let names = |v: &[&Member]| v.iter().map(|m| m.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&plan.settling), ["settling"]);
        assert_eq!(names(&plan.unconfirmed), ["unconfirmed"]);
        assert_eq!(names(&plan.done), ["done"]);
        assert_eq!(names(&plan.restarts), ["old"]);
        assert_eq!(names(&plan.unknown_target), ["u"]);
        assert!(!plan.is_complete());
    }

    #[test]
    fn an_unknown_current_revision_needs_a_restart() {
        let members = [member("a", Role::Follower, true, ""), member("b", Role::Follower, true, "v2")];
        let plan = plan(&members, &progress(&["b"], None)).expect("valid members");
        assert_eq!(plan.restart_order(), ["a"]);
    }

    #[test]
    fn the_in_flight_member_is_first_among_settling_and_unconfirmed() {
        let in_flight = |name: &str| InFlightMember {
            name: name.into(),
            prepared_at: None,
            restarted_at: Some("2024-01-01T00:00:00Z".into()),
        };
        let members = [member("a", Role::Follower, false, "v2"), member("b", Role::Follower, false, "v2")];
        let plan = plan(&members, &progress(&[], Some(in_flight("b")))).expect("valid members");
        assert_eq!(plan.settling[0].name, "b");
    }

    #[test]
    fn a_restarted_member_not_yet_on_target_is_pending_not_queued() {
        let members = [member("a", Role::Follower, false, "v1"), member("b", Role::Follower, true, "v1")];
        let in_flight =
            InFlightMember { name: "a".into(), prepared_at: None, restarted_at: Some("2024-01-01T00:00:00Z".into()) };
        let plan = plan(&members, &progress(&[], Some(in_flight))).expect("valid members");
        let pending = plan.restart_pending.clone().expect("a is pending");
        assert_eq!(pending.member.name, "a");
        assert!(pending.since.is_some());
        assert_eq!(plan.restart_order(), ["b"]);
    }

    #[test]
    fn a_prepared_member_goes_first_even_if_it_is_still_leader() {
        let members = [member("a", Role::Leader, true, "v1"), member("b", Role::Follower, true, "v1")];
        let in_flight =
            InFlightMember { name: "a".into(), prepared_at: Some("2024-01-01T00:00:00Z".into()), restarted_at: None };
        let plan = plan(&members, &progress(&[], Some(in_flight))).expect("valid members");
        assert_eq!(plan.restart_order(), ["a", "b"]);
        assert_eq!(plan.prepared.map(|m| m.name.as_str()), Some("a"));
    }

    #[test]
    fn progress_of_another_roll_is_ignored() {
        let members = [member("a", Role::Follower, true, "v2")];
        let mut stale = progress(&["a"], None);
        stale.target_revision = "v1".into();
        let plan = plan(&members, &stale).expect("valid members");
        assert_eq!(plan.unconfirmed.len(), 1, "a must be confirmed again in the new roll");
    }

    #[test]
    fn target_key_joins_distinct_targets() {
        let mut a = member("a", Role::Follower, true, "v1");
        a.target_revision = "brokers-2".into();
        let mut b = member("b", Role::Follower, true, "v1");
        b.target_revision = "ctrl-7".into();
        let c = Member { target_revision: "brokers-2".into(), ..b.clone() };
        assert_eq!(target_key(&[b, a, c]), "brokers-2,ctrl-7");
    }

    #[test]
    fn duplicate_or_empty_names_are_rejected() {
        let members = [member("a", Role::Follower, true, "v1"), member("a", Role::Leader, true, "v1")];
        let err = plan(&members, &UpgradeProgress::default()).expect_err("duplicate");
        assert_eq!(err.category(), crate::ErrorCategory::Permanent);
        let members = [member("", Role::Follower, true, "v1")];
        assert!(plan(&members, &UpgradeProgress::default()).is_err());
    }

    #[test]
    fn no_members_is_complete() {
        let plan = plan(&[], &UpgradeProgress::default()).expect("valid members");
        assert!(plan.is_complete());
        assert_eq!(plan.target_revision, "");
    }
}
