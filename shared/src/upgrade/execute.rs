//! Combines the pure [`plan`] with the application's gates into one next step.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::plan::{Member, PendingRestart, Plan, Role, plan};
use super::progress::UpgradeProgress;
use crate::Result;
use crate::reason::{Common, Reason};

/// How long a restart may stay unobserved before [`next_step`] issues it again; see
/// [`UpgradeGates::restart_timeout`].
pub const DEFAULT_RESTART_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A gate's answer: may the roll go on?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Go on.
    Open,
    /// Not now. Both fields end up in the custom resource's status.
    Closed {
        /// The condition reason (e.g. `ReplicaLagging`, `QuorumAtRisk`).
        reason: Reason,
        /// Human-readable explanation for `kubectl describe`.
        message: String,
    },
}

impl Gate {
    /// A closed gate with a `reason` and a human `message`.
    pub fn closed(reason: impl Into<Reason>, message: impl Into<String>) -> Self {
        Gate::Closed { reason: reason.into(), message: message.into() }
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        matches!(self, Gate::Open)
    }
}

/// What the application knows and the engine does not: when a member may go down, how to
/// prepare the leader, and when a restarted member has caught up.
///
/// Implement the methods with `async fn`; the trait spells them as `impl Future + Send` only
/// so that [`next_step`]'s future stays `Send`, as controllers require. A gate that cannot
/// reach the data plane should return an error (usually [`Error::DataPlane`], retried with
/// back-off) rather than a closed gate, so that outages are not reported as policy.
///
/// Gates must not change the cluster except in [`before_restart`](Self::before_restart).
///
/// [`Error::DataPlane`]: crate::Error::DataPlane
pub trait UpgradeGates {
    /// Whether the cluster can afford to lose `member` now: e.g. the etcd quorum stays
    /// healthy without it, the MySQL replicas are in sync, no Kafka partition would go
    /// under its minimum in-sync replicas. Called before every restart, including repeated
    /// ones, because the answer changes with the cluster.
    fn may_restart(&self, member: &Member) -> impl Future<Output = Result<Gate>> + Send;

    /// Prepares the leader for its restart (MySQL switchover, etcd `MoveLeader`). Called only
    /// for a member whose role is [`Role::Leader`], after [`may_restart`](Self::may_restart)
    /// opened. When it opens, the engine returns [`Action::Replan`] rather than restarting,
    /// because the member may no longer be leader: the operator observes the members again
    /// and the next call restarts the member without preparing it a second time.
    ///
    /// The member may be unready (unready members go first): restarting a broken leader
    /// cannot make things worse, so an implementation may open without a transfer then.
    /// The default opens without doing anything, for systems that elect a new leader on
    /// their own (a Kafka active controller).
    fn before_restart(&self, member: &Member) -> impl Future<Output = Result<Gate>> + Send {
        let _ = member;
        async { Ok(Gate::Open) }
    }

    /// Whether `member`, on its target revision and ready, has caught up with the cluster
    /// (replication lag, raft index, under-replicated partitions). Closed keeps the roll
    /// waiting for this member: that wait is what makes the roll one member at a time.
    fn caught_up(&self, member: &Member) -> impl Future<Output = Result<Gate>> + Send;

    /// How long a restart may go unobserved (the member not on its target revision) before
    /// it is issued again. Covers a restart that was recorded but never carried out, e.g.
    /// because the operator died in between. Keep it above the longest graceful shutdown.
    fn restart_timeout(&self) -> Duration {
        DEFAULT_RESTART_TIMEOUT
    }
}

/// The one thing the operator must do now, plus what the engine learned on the way, to be
/// recorded with [`UpgradeProgress::advance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The action to carry out.
    pub action: Action,
    /// The roll's identity; see [`Plan::target_revision`].
    pub target_revision: String,
    /// Members whose [`caught_up`](UpgradeGates::caught_up) gate opened while computing
    /// this step; `advance` records them as done so they are not asked again.
    pub confirmed: Vec<String>,
}

/// The next action of a roll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Restart this member now (delete its pod, or bump its revision), then record the step.
    /// Restarting must be idempotent: it is re-issued if it goes unobserved too long.
    Restart {
        /// The member's name.
        member: String,
    },
    /// The leader was prepared ([`UpgradeGates::before_restart`] opened). Record the step,
    /// observe the members again and call [`next_step`] again right away.
    Replan {
        /// The prepared member's name.
        member: String,
    },
    /// Wait for this member: it is restarting, not ready, or not caught up. Nothing else is
    /// touched meanwhile.
    WaitFor {
        /// The member's name.
        member: String,
        /// `MemberNotReady`, `RestartPending`, `TargetRevisionUnknown`, or the reason of a
        /// closed `caught_up` gate.
        reason: Reason,
        /// Human-readable explanation.
        message: String,
    },
    /// A gate refused to let `member` be restarted; report the reason in status and retry
    /// later.
    Blocked {
        /// The member whose restart was refused.
        member: String,
        /// The gate's reason.
        reason: Reason,
        /// The gate's message.
        message: String,
    },
    /// Every member is on target, ready and caught up.
    Done,
}

impl Action {
    /// The reason for the `Progressing` condition.
    pub fn reason(&self) -> Reason {
        match self {
            Action::Restart { .. } => Common::RestartingMember.into(),
            Action::Replan { .. } => Common::LeaderPrepared.into(),
            Action::WaitFor { reason, .. } | Action::Blocked { reason, .. } => *reason,
            Action::Done => Common::UpgradeComplete.into(),
        }
    }

    /// A human-readable message for the `Progressing` condition.
    pub fn message(&self) -> String {
        match self {
            Action::Restart { member } => format!("restarting {member}"),
            Action::Replan { member } => format!("{member} prepared for restart"),
            Action::WaitFor { message, .. } | Action::Blocked { message, .. } => message.clone(),
            Action::Done => "all members run their target revision".to_owned(),
        }
    }

    /// A suggested requeue delay; `None` means wait for the next watch event. Pod events
    /// usually wake the controller earlier; the delay bounds how long a missed event costs.
    pub fn requeue_after(&self) -> Option<Duration> {
        match self {
            Action::Replan { .. } => Some(Duration::ZERO),
            Action::Restart { .. } | Action::WaitFor { .. } => Some(Duration::from_secs(10)),
            Action::Blocked { .. } => Some(Duration::from_secs(30)),
            Action::Done => None,
        }
    }
}

/// Decides the next step of the roll from the observed `members`, the application's
/// `gates` and the persisted `progress`. See [`next_step_at`].
pub async fn next_step<G>(members: &[Member], gates: &G, progress: &UpgradeProgress) -> Result<Step>
where
    G: UpgradeGates + Sync,
{
    next_step_at(members, gates, progress, Utc::now()).await
}

/// [`next_step`] with an explicit clock, for tests and simulations.
///
/// In order, the first that applies wins:
/// 1. a member with an unknown target revision: wait;
/// 2. a member on target but not ready: wait for it;
/// 3. members on target and ready but not yet confirmed: ask [`UpgradeGates::caught_up`]
///    for each (the in-flight member first), wait for the first that is not;
/// 4. a restart issued but not yet observed: wait, or issue it again after
///    [`UpgradeGates::restart_timeout`];
/// 5. the first member in restart order: [`UpgradeGates::may_restart`], then for a leader
///    [`UpgradeGates::before_restart`] and [`Action::Replan`], else [`Action::Restart`];
/// 6. otherwise [`Action::Done`].
///
/// Fails if the member list is invalid (see [`plan()`](super::plan())) or a gate fails.
pub async fn next_step_at<G>(
    members: &[Member],
    gates: &G,
    progress: &UpgradeProgress,
    now: DateTime<Utc>,
) -> Result<Step>
where
    G: UpgradeGates + Sync,
{
    let plan = plan(members, progress)?;
    let mut confirmed = Vec::new();
    let action = decide(&plan, gates, now, &mut confirmed).await?;
    let step = Step { action, target_revision: plan.target_revision, confirmed };
    log_step(&step);
    Ok(step)
}

/// The decision of [`next_step_at`]; pushes confirmed members into `confirmed`.
async fn decide<G>(plan: &Plan<'_>, gates: &G, now: DateTime<Utc>, confirmed: &mut Vec<String>) -> Result<Action>
where
    G: UpgradeGates + Sync,
{
    if let Some(member) = plan.unknown_target.first() {
        return Ok(wait(
            member,
            Common::TargetRevisionUnknown,
            format!("target revision of {} is not known yet", member.name),
        ));
    }
    if let Some(member) = plan.settling.first() {
        let message = format!("waiting for {} to become ready on revision {}", member.name, member.current_revision);
        return Ok(wait(member, Common::MemberNotReady, message));
    }
    for member in &plan.unconfirmed {
        match gates.caught_up(member).await? {
            Gate::Open => confirmed.push(member.name.clone()),
            Gate::Closed { reason, message } => return Ok(wait(member, reason, message)),
        }
    }
    let mut queue = plan.restarts.clone();
    if let Some(pending) = &plan.restart_pending {
        if !restart_timed_out(pending, gates.restart_timeout(), now) {
            let message = format!(
                "waiting for {} to come back on revision {}",
                pending.member.name, pending.member.target_revision
            );
            return Ok(wait(pending.member, Common::RestartPending, message));
        }
        tracing::warn!(member = %pending.member.name, "restart not observed in time, issuing it again");
        queue.insert(0, pending.member);
    }
    match queue.first() {
        Some(member) => restart(member, plan.prepared, gates).await,
        None => Ok(Action::Done),
    }
}

/// Passes `member` through the gates: restart it, prepare it (leader), or report the block.
async fn restart<G>(member: &Member, prepared: Option<&Member>, gates: &G) -> Result<Action>
where
    G: UpgradeGates + Sync,
{
    if let Gate::Closed { reason, message } = gates.may_restart(member).await? {
        return Ok(Action::Blocked { member: member.name.clone(), reason, message });
    }
    let is_prepared = prepared.is_some_and(|p| p.name == member.name);
    if member.role == Role::Leader && !is_prepared {
        return Ok(match gates.before_restart(member).await? {
            Gate::Open => Action::Replan { member: member.name.clone() },
            Gate::Closed { reason, message } => Action::Blocked { member: member.name.clone(), reason, message },
        });
    }
    Ok(Action::Restart { member: member.name.clone() })
}

fn wait(member: &Member, reason: impl Into<Reason>, message: String) -> Action {
    Action::WaitFor { member: member.name.clone(), reason: reason.into(), message }
}

/// Whether a pending restart has gone unobserved longer than `timeout`. An unknown start
/// counts as timed out: re-issuing an idempotent restart is cheaper than waiting forever.
fn restart_timed_out(pending: &PendingRestart<'_>, timeout: Duration, now: DateTime<Utc>) -> bool {
    let Some(since) = pending.since else {
        return true;
    };
    let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
    now.signed_duration_since(since) >= timeout
}

fn log_step(step: &Step) {
    let target = step.target_revision.as_str();
    match &step.action {
        Action::Restart { member } => tracing::info!(member, target, "restarting member"),
        Action::Replan { member } => tracing::info!(member, target, "leader prepared for restart"),
        Action::WaitFor { member, reason, .. } => {
            tracing::debug!(member, %reason, target, "waiting for member")
        }
        Action::Blocked { member, reason, message } => {
            tracing::info!(member, %reason, message, target, "rolling upgrade blocked")
        }
        Action::Done => tracing::debug!(target, "rolling upgrade complete"),
    }
}
