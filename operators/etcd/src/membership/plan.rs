//! The membership planner: from one observation, the one next step that moves a cluster's
//! membership towards the spec, never one that would lose quorum.
//!
//! Members only ever join as learners and are promoted once caught up, one at a time. The
//! checks run in a fixed order of priority, so that a pass that starts from any state —
//! including one left behind by an operator killed between two steps — moves forward:
//!
//! 1. quorum: without it (or without a leader) nothing is done, only reported;
//! 2. finishing a half-done change: a learner no longer wanted is removed, an alarm of a
//!    member that is gone is cleared, the volume of a removed member deleted, the pod of a
//!    learner that started too early restarted, a caught-up learner promoted;
//! 3. replacing a member that stayed unhealthy or reports corruption;
//! 4. recovering from a NOSPACE alarm;
//! 5. scaling in or out by one member;
//! 6. defragmenting one member;
//! 7. idle.
//!
//! A wait of step 2 (a learner still starting or catching up) does not block steps 3 and 4,
//! which repair the cluster; it blocks scaling and defragmentation.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use statecraft_shared::reason::{Common, Reason};

use super::observed::{Alarm, Member, MemberState, Observed, PodState};
use crate::build::Names;
use crate::reason::Etcd;

/// How many raft entries a learner's applied index may trail the leader's last index and
/// still be promoted (or a voter be chosen as the new leader). etcd applies its own check
/// on promotion (the learner's match index within 90% of the leader's); this one keeps the
/// operator from asking while the learner is still far behind.
pub const CATCH_UP_MARGIN: u64 = 500;

/// How a cluster's members are named and reached: member `k` is pod `<cluster>-k`. Behind
/// a trait so that tests can run members on loopback ports.
pub trait Addressing {
    /// etcd member name (and pod name) of `ordinal`.
    fn member_name(&self, ordinal: u32) -> String;
    /// Peer URL of `ordinal`, as registered in the membership.
    fn peer_url(&self, ordinal: u32) -> String;
    /// Client URL of `ordinal`.
    fn client_url(&self, ordinal: u32) -> String;
    /// The ordinal of a member name of this cluster.
    fn ordinal_of_name(&self, name: &str) -> Option<u32>;
    /// The ordinal of a peer URL of this cluster.
    fn ordinal_of_peer_url(&self, url: &str) -> Option<u32>;
}

impl Addressing for Names {
    fn member_name(&self, ordinal: u32) -> String {
        self.member(ordinal)
    }
    fn peer_url(&self, ordinal: u32) -> String {
        Names::peer_url(self, ordinal)
    }
    fn client_url(&self, ordinal: u32) -> String {
        Names::client_url(self, ordinal)
    }
    fn ordinal_of_name(&self, name: &str) -> Option<u32> {
        self.ordinal_of(name)
    }
    fn ordinal_of_peer_url(&self, url: &str) -> Option<u32> {
        Names::ordinal_of_peer_url(self, url)
    }
}

/// When a member is worth defragmenting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefragPolicy {
    /// Minimum free share of the database file, percent.
    pub threshold_percent: u32,
    /// Minimum database file size, bytes.
    pub min_db_size: i64,
}

/// What the spec asks of the membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Voting members (`spec.replicas`).
    pub replicas: u32,
    /// How long a member must stay unhealthy before it is replaced; `None`: never replace.
    pub replace_after: Option<Duration>,
    /// Automatic defragmentation; `None`: off.
    pub defrag: Option<DefragPolicy>,
    /// The member (ordinal) a pending request asks to lead (the leader annotation): the
    /// planner moves leadership there once nothing else is to be done.
    pub leader: Option<u32>,
}

/// What the planner needs to remember between passes: time cannot be read from a single
/// observation. Losing it (operator restart) only delays a replacement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Since when each member (by ordinal) has been seen unhealthy, without a healthy
    /// observation in between.
    pub unhealthy_since: BTreeMap<u32, DateTime<Utc>>,
    /// When Kubernetes was last seen unable to run each unhealthy member's pod ([`cannot_run`]):
    /// its replacement delay counts from then, so a pod placed at last (its template put
    /// right) has the whole delay to start before its member is replaced.
    pub cannot_run_at: BTreeMap<u32, DateTime<Utc>>,
}

/// The one next step. Steps naming a member carry both its etcd id and its ordinal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do: the membership is as desired and healthy.
    Idle,
    /// Something stops progress.
    Wait {
        /// Condition reason: the planner's own ([`Etcd`]), or the problem of a member's pod
        /// that explains the wait (`pods::explain_wait`).
        reason: Reason,
        /// What is waited for, for humans.
        message: String,
    },
    /// A new cluster: start member 0 alone (`initial-cluster-state=new`).
    Bootstrap,
    /// Add `ordinal` as a learner (its pod follows from the member list).
    AddLearner {
        /// The new member's ordinal.
        ordinal: u32,
    },
    /// Delete the data volume of an ordinal that is no longer a member and has no pod, so
    /// that the member added there later does not start on stale data.
    DeleteStaleClaim {
        /// Ordinal of the volume.
        ordinal: u32,
    },
    /// Delete the pod of a learner that crash-loops because it started before it was a
    /// member: its restart back-off would delay the join by minutes.
    RestartPod {
        /// Ordinal of the learner.
        ordinal: u32,
    },
    /// Promote a caught-up learner to a voter.
    Promote {
        /// Member id.
        id: u64,
        /// Ordinal.
        ordinal: u32,
    },
    /// Transfer leadership away from a member about to be removed.
    MoveLeader {
        /// Current leader.
        from: u64,
        /// Its ordinal (its endpoint takes the request).
        from_ordinal: u32,
        /// New leader.
        to: u64,
        /// Its ordinal.
        to_ordinal: u32,
    },
    /// Remove a member (scale-in).
    Remove {
        /// Member id.
        id: u64,
        /// Ordinal.
        ordinal: u32,
    },
    /// Replace a broken member: remove it from etcd, then delete its volume and pod; the
    /// ordinal is added back as a learner by the normal path.
    Replace {
        /// Member id.
        id: u64,
        /// Ordinal.
        ordinal: u32,
    },
    /// Clear the alarms of a member that is no longer in the cluster (a replaced member
    /// that reported corruption): an active CORRUPT alarm blocks the whole cluster.
    ClearAlarm {
        /// Id of the former member.
        id: u64,
    },
    /// NOSPACE: compact to the current revision, defragment every member one at a time,
    /// disarm the alarm.
    RecoverNoSpace,
    /// Defragment one member.
    Defragment {
        /// Member id.
        id: u64,
        /// Ordinal.
        ordinal: u32,
    },
}

impl Step {
    /// The reason for conditions and Events.
    pub fn reason(&self) -> Reason {
        let entry = match self {
            Step::Wait { reason, .. } => return *reason,
            Step::Idle => return Common::Idle.into(),
            Step::Bootstrap => return Common::Bootstrap.into(),
            Step::AddLearner { .. } => Etcd::AddLearner,
            Step::DeleteStaleClaim { .. } => Etcd::DeleteStaleClaim,
            Step::RestartPod { .. } => Etcd::RestartPod,
            Step::Promote { .. } => Etcd::Promote,
            Step::MoveLeader { .. } => Etcd::MoveLeader,
            Step::Remove { .. } => Etcd::RemoveMember,
            Step::Replace { .. } => Etcd::ReplaceMember,
            Step::ClearAlarm { .. } => Etcd::ClearAlarm,
            Step::RecoverNoSpace => Etcd::RecoverNoSpace,
            Step::Defragment { .. } => Etcd::Defragment,
        };
        entry.into()
    }

    /// What the step does, for humans.
    pub fn message(&self) -> String {
        match self {
            Step::Idle => "membership is as desired".into(),
            Step::Wait { message, .. } => message.clone(),
            Step::Bootstrap => "bootstrapping a new cluster with member 0".into(),
            Step::AddLearner { ordinal } => format!("adding member {ordinal} as a learner"),
            Step::DeleteStaleClaim { ordinal } => {
                format!("deleting the data volume of former member {ordinal}")
            }
            Step::RestartPod { ordinal } => {
                format!("restarting the pod of learner {ordinal}, which started before it was a member")
            }
            Step::Promote { id, ordinal } => format!("promoting learner {ordinal} ({id:x})"),
            Step::MoveLeader { from_ordinal, to_ordinal, .. } => {
                format!("moving leadership from member {from_ordinal} to member {to_ordinal}")
            }
            Step::Remove { id, ordinal } => format!("removing member {ordinal} ({id:x})"),
            Step::Replace { id, ordinal } => format!("replacing member {ordinal} ({id:x})"),
            Step::ClearAlarm { id } => format!("clearing the alarms of former member {id:x}"),
            Step::RecoverNoSpace => "recovering from NOSPACE: compact, defragment, disarm".into(),
            Step::Defragment { id, ordinal } => format!("defragmenting member {ordinal} ({id:x})"),
        }
    }

    /// The ordinal of the member the step acts on, if it acts on one: its Event names that
    /// member's pod, so that the same step on two members is two Events, not one folded
    /// series.
    pub fn ordinal(&self) -> Option<u32> {
        match self {
            Step::AddLearner { ordinal }
            | Step::DeleteStaleClaim { ordinal }
            | Step::RestartPod { ordinal }
            | Step::Promote { ordinal, .. }
            | Step::Remove { ordinal, .. }
            | Step::Replace { ordinal, .. }
            | Step::Defragment { ordinal, .. } => Some(*ordinal),
            Step::MoveLeader { to_ordinal, .. } => Some(*to_ordinal),
            Step::Idle | Step::Wait { .. } | Step::Bootstrap | Step::ClearAlarm { .. } | Step::RecoverNoSpace => None,
        }
    }

    /// A wait (no action).
    pub fn is_wait(&self) -> bool {
        matches!(self, Step::Wait { .. })
    }
}

fn wait(reason: Etcd, message: impl Into<String>) -> Step {
    Step::Wait { reason: reason.into(), message: message.into() }
}

/// Whether a new pod revision may be rolled after `step`: when membership is settled —
/// nothing to add, remove, replace or defragment (`Idle`) — or settled but for a member that
/// is down, as long as every member has a pod that is not being deleted. The roll's own rules
/// restart a down member first and a running one only while every other voter is healthy;
/// rolling while a member is down is how a fixed pod template reaches a pod the previous one
/// kept from running (a node selector no node matches). A restarted member's pod is gone
/// or terminating for a moment: a roll that looked then would not see that member and could
/// call itself done. Ask before the wait is explained by the pods (which renames its reason).
pub fn rolls(step: &Step, observed: &Observed) -> bool {
    match step {
        Step::Idle => true,
        Step::Wait { reason, .. } if *reason == Etcd::MemberUnhealthy => {
            let ours = observed.members.iter().flatten().filter_map(|m| m.ordinal);
            observed.pods.values().all(|p| !p.terminating) && ours.into_iter().all(|k| observed.pods.contains_key(&k))
        }
        _ => false,
    }
}

/// Votes needed among `voters`.
pub fn quorum(voters: usize) -> usize {
    voters / 2 + 1
}

/// Whether a member is healthy: it answered its status request and its pod (when it has
/// one) is running and not being deleted.
pub fn member_healthy(observed: &Observed, member: &Member) -> bool {
    let pod_ok =
        member.ordinal.and_then(|k| observed.pods.get(&k)).is_none_or(|p: &PodState| p.running && !p.terminating);
    observed.states.contains_key(&member.id) && pod_ok
}

/// Whether Kubernetes cannot run member `k`'s pod for a reason a new member would share:
/// the scheduler cannot place it, or Kubernetes refuses to create it.
fn cannot_run(observed: &Observed, k: u32) -> bool {
    observed.refused.contains(&k) || observed.pods.get(&k).is_some_and(|p| p.unplaceable && !p.terminating)
}

/// Updates what the planner remembers with one observation: a member seen unhealthy keeps
/// the time it was first seen so, a healthy one is forgotten, and so are ordinals that are
/// no longer members. Without a member list nothing is learnt.
pub fn remember(memory: &mut Memory, observed: &Observed) {
    let Some(members) = &observed.members else { return };
    let mut current = BTreeSet::new();
    for m in members {
        let Some(k) = m.ordinal else { continue };
        current.insert(k);
        if member_healthy(observed, m) {
            memory.unhealthy_since.remove(&k);
            memory.cannot_run_at.remove(&k);
        } else {
            memory.unhealthy_since.entry(k).or_insert(observed.now);
            if cannot_run(observed, k) {
                memory.cannot_run_at.insert(k, observed.now);
            }
        }
    }
    memory.unhealthy_since.retain(|k, _| current.contains(k));
    memory.cannot_run_at.retain(|k, _| current.contains(k));
}

/// The StatefulSet's replica count: one past the highest member ordinal, so that every
/// member (including a learner not started yet) has its pod and removed members lose
/// theirs. Without a member list it is kept (at least 1, for the bootstrap).
pub fn statefulset_replicas(observed: &Observed) -> u32 {
    match &observed.members {
        None => observed.statefulset_replicas.max(1),
        Some(members) => {
            members.iter().filter_map(|m| m.ordinal).max().map_or(observed.statefulset_replicas, |k| k + 1)
        }
    }
}

/// What a starting member reads to join (`ETCD_INITIAL_CLUSTER`,
/// `ETCD_INITIAL_CLUSTER_STATE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialCluster {
    /// `name=peerURL,...`.
    pub members: String,
    /// `new` or `existing`.
    pub state: &'static str,
}

/// The membership a starting member must be told, or `None` when it must be left as it is.
///
/// With a member list: every member (a learner not started yet under its ordinal's name)
/// and `existing` — etcd refuses to join unless the list matches the cluster's exactly.
/// Without one: member 0 alone and `new` only for a cluster that was never started (no pod,
/// no volume). Otherwise (every member down) it must not change: a member that lost its
/// data and read `new` would found a second cluster.
pub fn initial_cluster(addressing: &impl Addressing, observed: &Observed) -> Option<InitialCluster> {
    let Some(members) = &observed.members else {
        if !observed.pods.is_empty() || !observed.claims.is_empty() {
            return None;
        }
        let members = format!("{}={}", addressing.member_name(0), addressing.peer_url(0));
        return Some(InitialCluster { members, state: "new" });
    };
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| (m.ordinal.is_none(), m.ordinal, m.id));
    let mut entries = Vec::new();
    for m in sorted {
        let name = match m.ordinal {
            Some(k) => addressing.member_name(k),
            None if m.started() => m.name.clone(),
            None => format!("{:x}", m.id),
        };
        entries.extend(m.peer_urls.iter().map(|url| format!("{name}={url}")));
    }
    Some(InitialCluster { members: entries.join(","), state: "existing" })
}

/// The member that leads, as reported by the answering member with the highest term (a
/// member that has not heard of a newer election still names the old leader); `None`
/// when no answer names a current member.
pub fn leader(observed: &Observed) -> Option<u64> {
    let members = observed.members.as_deref()?;
    members
        .iter()
        .filter_map(|m| observed.states.get(&m.id))
        .filter(|s| s.leader != 0)
        .max_by_key(|s| s.raft_term)
        .map(|s| s.leader)
        .filter(|id| members.iter().any(|m| m.id == *id))
}

/// The leader's last raft index (or the highest any member reports, when the leader did
/// not answer).
fn leader_index(observed: &Observed) -> u64 {
    let by_leader = leader(observed).and_then(|id| observed.states.get(&id)).map(|s| s.raft_index);
    by_leader.unwrap_or_else(|| observed.states.values().map(|s| s.raft_index).max().unwrap_or(0))
}

/// Whether `state` has applied the log up to `leader_index`, within [`CATCH_UP_MARGIN`]
/// and 90% (etcd's own rule for promoting a learner).
fn applied_within(state: &MemberState, leader_index: u64) -> bool {
    // Saturating: raft indexes come from the members; u64::MAX must not overflow.
    let applied = state.raft_applied_index;
    applied.saturating_add(CATCH_UP_MARGIN) >= leader_index && u128::from(applied) * 10 >= u128::from(leader_index) * 9
}

/// Whether member `id` answered and has caught up with the leader: the rule learners are
/// promoted by, and the rolling upgrade's "caught up" gate.
pub fn caught_up(observed: &Observed, id: u64) -> bool {
    observed.states.get(&id).is_some_and(|s| applied_within(s, leader_index(observed)))
}

/// Decides the next step. Call [`remember`] with the same observation first.
pub fn plan(desired: &Desired, observed: &Observed, memory: &Memory) -> Step {
    let Some(members) = &observed.members else { return unanswered(observed) };
    let view = View::new(desired, observed, memory, members);
    if let Some(stop) = view.quorum() {
        return stop;
    }
    let finishing = view.finish();
    if let Some(step) = finishing.as_ref().filter(|s| !s.is_wait()) {
        return step.clone();
    }
    if let Some(step) = view.replace().or_else(|| view.recover_no_space()) {
        return step;
    }
    if let Some(step) = finishing {
        return step;
    }
    view.scale().or_else(|| view.defragment()).or_else(|| view.transfer()).unwrap_or_else(|| view.idle())
}

/// What became of a request that member `k` lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderRequest {
    /// It leads: the request is done.
    Leads,
    /// It is no voting member of the cluster: the request is refused, with why.
    Refused(String),
    /// Not yet: the planner moves leadership once nothing else is to be done.
    Pending,
}

/// What became of a request that member `k` lead, in `observed` (with a member list).
pub fn leader_request(observed: &Observed, k: u32) -> LeaderRequest {
    let Some(members) = &observed.members else { return LeaderRequest::Pending };
    match members.iter().find(|m| m.ordinal == Some(k)) {
        None => LeaderRequest::Refused(format!("member {k} is not a member of the cluster")),
        Some(m) if m.is_learner => LeaderRequest::Refused(format!("member {k} is a learner, which cannot lead")),
        Some(m) if leader(observed) == Some(m.id) => LeaderRequest::Leads,
        Some(_) => LeaderRequest::Pending,
    }
}

/// No member answered: a new cluster is bootstrapped only when nothing of it exists.
fn unanswered(observed: &Observed) -> Step {
    if observed.pods.is_empty() && observed.claims.is_empty() {
        return Step::Bootstrap;
    }
    let only_first = observed.pods.keys().chain(observed.claims.iter()).all(|&k| k == 0);
    if only_first && observed.statefulset_replicas <= 1 {
        return wait(Etcd::MemberStarting, "waiting for the first member to answer");
    }
    wait(
        Etcd::QuorumLost,
        format!(
            "no member answers ({} pods, {} volumes); the operator changes nothing until a majority is back",
            observed.pods.len(),
            observed.claims.len()
        ),
    )
}

/// One observation with a member list, and the facts derived from it.
struct View<'a> {
    desired: &'a Desired,
    observed: &'a Observed,
    memory: &'a Memory,
    members: &'a [Member],
    /// Current leader, as reported by the answering member with the highest term.
    leader: Option<u64>,
}

impl<'a> View<'a> {
    fn new(desired: &'a Desired, observed: &'a Observed, memory: &'a Memory, members: &'a [Member]) -> Self {
        View { desired, observed, memory, members, leader: leader(observed) }
    }

    fn replicas(&self) -> u32 {
        self.desired.replicas.max(1)
    }

    fn state(&self, m: &Member) -> Option<&'a MemberState> {
        self.observed.states.get(&m.id)
    }

    fn pod(&self, m: &Member) -> Option<&'a PodState> {
        m.ordinal.and_then(|k| self.observed.pods.get(&k))
    }

    fn healthy(&self, m: &Member) -> bool {
        member_healthy(self.observed, m)
    }

    fn alarmed(&self, m: &Member, alarm: Alarm) -> bool {
        self.observed.alarms.get(&m.id).is_some_and(|a| a.contains(&alarm))
    }

    fn voters(&self) -> usize {
        self.members.iter().filter(|m| !m.is_learner).count()
    }

    fn healthy_voters(&self) -> usize {
        self.members.iter().filter(|m| !m.is_learner && self.healthy(m)).count()
    }

    /// Our members (ordinal known), in ordinal order.
    fn ours(&self) -> Vec<(u32, &'a Member)> {
        let mut ours: Vec<(u32, &Member)> = self.members.iter().filter_map(|m| Some((m.ordinal?, m))).collect();
        ours.sort_by_key(|(k, _)| *k);
        ours
    }

    fn unhealthy_for(&self, ordinal: u32) -> Option<Duration> {
        let since = self.memory.unhealthy_since.get(&ordinal)?;
        Some((self.observed.now - *since).to_std().unwrap_or(Duration::ZERO))
    }

    /// How long the member has been unhealthy with a pod Kubernetes could run: what the
    /// replacement delay is measured against.
    fn runnable_and_unhealthy_for(&self, ordinal: u32) -> Duration {
        let unhealthy = self.unhealthy_for(ordinal).unwrap_or(Duration::ZERO);
        match self.memory.cannot_run_at.get(&ordinal) {
            Some(at) => unhealthy.min((self.observed.now - *at).to_std().unwrap_or(Duration::ZERO)),
            None => unhealthy,
        }
    }

    fn leader_index(&self) -> u64 {
        leader_index(self.observed)
    }

    fn caught_up(&self, state: &MemberState) -> bool {
        applied_within(state, self.leader_index())
    }

    /// Quorum and a leader, or the wait that says which is missing.
    fn quorum(&self) -> Option<Step> {
        let (voters, healthy) = (self.voters(), self.healthy_voters());
        if healthy < quorum(voters) {
            return Some(wait(
                Etcd::QuorumLost,
                format!(
                    "{healthy} of {voters} voting members are healthy, {} needed; the operator changes nothing",
                    quorum(voters)
                ),
            ));
        }
        if self.leader.is_none() {
            return Some(wait(Etcd::NoLeader, "no member reports a leader: an election is under way"));
        }
        None
    }

    /// Half-done changes: each is an action, or a wait for the learner in progress.
    fn finish(&self) -> Option<Step> {
        let replicas = self.replicas();
        let ours = self.ours();
        if let Some((k, m)) = ours.iter().rev().find(|(k, m)| m.is_learner && *k >= replicas) {
            return Some(Step::Remove { id: m.id, ordinal: *k });
        }
        if let Some(id) = self.observed.alarms.keys().find(|id| !self.members.iter().any(|m| m.id == **id)) {
            return Some(Step::ClearAlarm { id: *id });
        }
        let member_ordinals: BTreeSet<u32> = ours.iter().map(|(k, _)| *k).collect();
        if let Some(k) =
            self.observed.claims.iter().find(|k| !member_ordinals.contains(k) && !self.observed.pods.contains_key(k))
        {
            return Some(Step::DeleteStaleClaim { ordinal: *k });
        }
        let (k, learner) = ours.iter().find(|(_, m)| m.is_learner)?;
        Some(self.learner_step(*k, learner))
    }

    /// A wanted learner: promote it, restart its pod, or wait for it.
    fn learner_step(&self, k: u32, learner: &Member) -> Step {
        if let Some(state) = self.state(learner) {
            if !self.caught_up(state) {
                return wait(
                    Etcd::LearnerCatchingUp,
                    format!("learner {k} applied index {} of {}", state.raft_applied_index, self.leader_index()),
                );
            }
            // A learner that answers but whose pod is terminating or not running would be
            // an unhealthy voter the moment it is promoted, and could cost quorum.
            if !self.healthy(learner) {
                return wait(
                    Etcd::LearnerNotHealthy,
                    format!("learner {k} has caught up but its pod is not running or is terminating"),
                );
            }
            // Quorum holds (checked first) and the learner is healthy, so the promotion
            // keeps it: healthy + 1 >= quorum(voters) + 1 >= quorum(voters + 1).
            return Step::Promote { id: learner.id, ordinal: k };
        }
        let Some(pod) = self.pod(learner) else {
            return wait(Etcd::MemberStarting, format!("waiting for the pod of learner {k}"));
        };
        let started_too_early = pod.created.zip(self.memory.unhealthy_since.get(&k)).is_some_and(|(c, s)| c < *s);
        if !learner.started() && pod.crash_looping && !pod.terminating && started_too_early {
            return Step::RestartPod { ordinal: k };
        }
        wait(Etcd::MemberStarting, format!("waiting for learner {k} to start and answer"))
    }

    /// A learner that never started and whose pod is not running yet (scheduling, image
    /// pull): slow, not broken, so not replaced.
    fn still_starting(&self, m: &Member) -> bool {
        m.is_learner && !m.started() && self.pod(m).is_none_or(|p| !p.running && !p.crash_looping && !p.terminating)
    }

    /// A member whose pod Kubernetes cannot run ([`cannot_run`]: a node selector no node
    /// matches, a PriorityClass that does not exist): its replacement would fare no better,
    /// so it is waited for, not replaced.
    fn cannot_run(&self, m: &Member) -> bool {
        m.ordinal.is_some_and(|k| cannot_run(self.observed, k))
    }

    /// A member to replace: corrupt, or unhealthy for longer than allowed (with a pod
    /// Kubernetes can run),
    /// and only while the others keep quorum. A corrupt leader hands leadership over first.
    fn replace(&self) -> Option<Step> {
        let after = self.desired.replace_after?;
        let mut candidates: Vec<(bool, Duration, u32, &Member)> = self
            .ours()
            .into_iter()
            .filter_map(|(k, m)| {
                let corrupt = self.alarmed(m, Alarm::Corrupt);
                let unhealthy = self.unhealthy_for(k).unwrap_or(Duration::ZERO);
                let due = !self.healthy(m)
                    && self.runnable_and_unhealthy_for(k) >= after
                    && !self.still_starting(m)
                    && !self.cannot_run(m);
                (corrupt || due).then_some((corrupt, unhealthy, k, m))
            })
            .collect();
        // Corrupt first, then the longest unhealthy.
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        for (_, _, k, m) in candidates {
            if !m.is_learner {
                let others_healthy = self.healthy_voters() - usize::from(self.healthy(m));
                if others_healthy < quorum(self.voters() - 1) {
                    continue;
                }
            }
            if self.leader == Some(m.id) {
                let Some(step) = self.move_leader_from(m, k) else { continue };
                return Some(step);
            }
            return Some(Step::Replace { id: m.id, ordinal: k });
        }
        None
    }

    /// Leadership transfer away from `from`, to a healthy, caught-up voter of ours that
    /// stays (lowest ordinal below the desired size first).
    fn move_leader_from(&self, from: &Member, from_ordinal: u32) -> Option<Step> {
        let replicas = self.replicas();
        let mut targets: Vec<(u32, &Member)> = self
            .ours()
            .into_iter()
            .filter(|(_, m)| m.id != from.id && !m.is_learner && self.healthy(m))
            .filter(|(_, m)| self.state(m).is_some_and(|s| self.caught_up(s)))
            .collect();
        targets.sort_by_key(|(k, _)| (*k >= replicas, *k));
        let (to_ordinal, to) = targets.first()?;
        Some(Step::MoveLeader { from: from.id, from_ordinal, to: to.id, to_ordinal: *to_ordinal })
    }

    /// Leadership moved to the member a request names, once it is a healthy, caught-up
    /// voter of ours and the leader is known; a request [`leader_request`] refuses, or one
    /// already met, asks nothing.
    fn transfer(&self) -> Option<Step> {
        let k = self.desired.leader?;
        let (_, to) = self.ours().into_iter().find(|(o, m)| *o == k && !m.is_learner)?;
        let leader = self.leader?;
        if leader == to.id {
            return None;
        }
        if !self.healthy(to) || !self.state(to).is_some_and(|s| self.caught_up(s)) {
            let message = format!("member {k} must be healthy and caught up before it can take the lead");
            return Some(wait(Etcd::WaitingForHealthyMembers, message));
        }
        let Some(from_ordinal) = self.members.iter().find(|m| m.id == leader).and_then(|m| m.ordinal) else {
            return Some(wait(Etcd::ForeignMember, format!("the leader {leader:x} was not added by the operator")));
        };
        Some(Step::MoveLeader { from: leader, from_ordinal, to: to.id, to_ordinal: k })
    }

    fn recover_no_space(&self) -> Option<Step> {
        self.observed.alarms.values().any(|a| a.contains(&Alarm::NoSpace)).then_some(Step::RecoverNoSpace)
    }

    /// One member more or less: more members of ours than desired → remove one beyond the
    /// desired size; else the lowest missing ordinal → add it as a learner.
    fn scale(&self) -> Option<Step> {
        let replicas = self.replicas();
        let ours = self.ours();
        if ours.len() > replicas as usize {
            return Some(self.scale_in(&ours));
        }
        let present: BTreeSet<u32> = ours.iter().map(|(k, _)| *k).collect();
        let missing = (0..replicas).find(|k| !present.contains(k))?;
        Some(self.add(missing))
    }

    /// Removes a member beyond the desired size: an unhealthy one first (removing it costs
    /// no fault tolerance), else the highest ordinal.
    fn scale_in(&self, ours: &[(u32, &Member)]) -> Step {
        let replicas = self.replicas();
        let candidate = ours.iter().filter(|(k, _)| *k >= replicas).max_by_key(|(k, m)| (!self.healthy(m), *k));
        let Some((k, m)) = candidate else {
            return wait(Etcd::WaitingForHealthyMembers, "no member beyond the desired size to remove");
        };
        // Learners were dealt with before, so `m` votes.
        let voters = self.voters();
        let remaining_healthy = self.healthy_voters().saturating_sub(usize::from(self.healthy(m)));
        let remaining = voters.saturating_sub(1);
        if remaining_healthy < quorum(remaining) {
            return wait(
                Etcd::WaitingForHealthyMembers,
                format!("removing member {k} would leave {remaining_healthy} healthy of {remaining} voters"),
            );
        }
        if self.leader == Some(m.id) {
            return self.move_leader_from(m, *k).unwrap_or_else(|| {
                wait(Etcd::WaitingForHealthyMembers, format!("member {k} leads and no caught-up voter can take over"))
            });
        }
        Step::Remove { id: m.id, ordinal: *k }
    }

    /// Adds `ordinal` as a learner: only while every voter is healthy and no other learner
    /// exists (one change at a time).
    fn add(&self, ordinal: u32) -> Step {
        if let Some(l) = self.members.iter().find(|m| m.is_learner) {
            return wait(Etcd::ForeignMember, format!("learner {:x} was not added by the operator", l.id));
        }
        if let Some(m) = self.members.iter().find(|m| !m.is_learner && !self.healthy(m)) {
            return match m.ordinal {
                None => {
                    wait(Etcd::ForeignMember, format!("voter {:x}, not managed by the operator, is unhealthy", m.id))
                }
                Some(k) => wait(Etcd::WaitingForHealthyMembers, format!("member {k} is unhealthy")),
            };
        }
        if self.observed.pods.get(&ordinal).is_some_and(|p| p.terminating) {
            return wait(Etcd::PodTerminating, format!("waiting for the old pod of member {ordinal} to go"));
        }
        Step::AddLearner { ordinal }
    }

    /// Defragments one member with enough free space, followers before the leader, only
    /// while every member is healthy and no alarm is raised.
    fn defragment(&self) -> Option<Step> {
        let policy = self.desired.defrag?;
        if !self.members.iter().all(|m| self.healthy(m)) || !self.observed.alarms.is_empty() {
            return None;
        }
        let worth = |s: &MemberState| {
            s.db_size > 0
                && s.db_size >= policy.min_db_size
                && s.db_size.saturating_sub(s.db_size_in_use).saturating_mul(100)
                    >= i64::from(policy.threshold_percent).saturating_mul(s.db_size)
        };
        let (k, m) = self
            .ours()
            .into_iter()
            .filter(|(_, m)| self.state(m).is_some_and(worth))
            .min_by_key(|(k, m)| (self.leader == Some(m.id), *k))?;
        Some(Step::Defragment { id: m.id, ordinal: k })
    }

    /// Nothing to do, unless a member is unhealthy (not replaced yet, or not at all) or the
    /// pod of a removed member is still there (its volume is deleted once it is gone).
    fn idle(&self) -> Step {
        let size = statefulset_replicas(self.observed);
        if let Some(k) = self.observed.pods.keys().find(|k| **k >= size) {
            return wait(Etcd::PodTerminating, format!("waiting for the pod of former member {k} to go"));
        }
        for (k, m) in self.ours() {
            if self.alarmed(m, Alarm::Corrupt) {
                return wait(
                    Etcd::MemberCorrupt,
                    format!("member {k} reports corruption; it is not replaced automatically"),
                );
            }
            if !self.healthy(m) {
                let since = self.unhealthy_for(k).unwrap_or(Duration::ZERO).as_secs();
                let next = match self.desired.replace_after {
                    None => "automatic replacement is off".into(),
                    Some(_) if self.cannot_run(m) => "not replaced while Kubernetes cannot run its pod".into(),
                    Some(after) => format!("replaced after {} s if quorum allows", after.as_secs()),
                };
                return wait(Etcd::MemberUnhealthy, format!("member {k} unhealthy for {since} s; {next}"));
            }
        }
        Step::Idle
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
