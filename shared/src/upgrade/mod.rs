//! The ordered rolling-upgrade engine shared by the MySQL, Kafka and etcd operators.
//!
//! Every Statecraft system rolls its members one at a time, in the same order within each
//! phase (see [Roles](#roles)):
//!
//! 1. **unready members first**: restarting a member that is already broken cannot make the
//!    cluster worse, and often fixes it;
//! 2. then **learners**, then **followers** (members whose loss costs the least first);
//! 3. the **leader last**, after [`UpgradeGates::before_restart`] has had the chance to hand
//!    leadership over (MySQL switchover, etcd `MoveLeader`), so the cluster changes leader
//!    once per roll instead of once per restart.
//!
//! Never more than one member is in flight: while any member is on the target revision but
//! not ready or not caught up, nothing else is touched.
//!
//! The engine is split so that each part can be tested on its own:
//!
//! - [`plan()`](plan()) is pure: it classifies the observed [`Member`]s and orders the
//!   restarts. It is **level-triggered**: the observed revisions are the truth.
//! - [`UpgradeProgress`] lives in the custom resource's status. It only records what the
//!   observed state cannot tell: which member is in flight, since when, which members were
//!   already confirmed caught up, and why the roll last stalled. A stale or hand-edited
//!   progress therefore cannot cause a wrong restart: at worst it makes the engine wait for,
//!   or re-check, a member.
//! - [`next_step`] combines the plan with the application's [`UpgradeGates`] and returns one
//!   [`Step`] at a time; the operator performs it and records it with
//!   [`UpgradeProgress::advance`].
//!
//! # Roles
//!
//! [`Role`] is a small fixed enum, not a free-form rank, because the engine itself must know
//! which member gets [`UpgradeGates::before_restart`]. Mapping per system:
//!
//! | system | [`Role::Learner`] | [`Role::Follower`] | [`Role::Leader`] |
//! |--------|-------------------|--------------------|------------------|
//! | MySQL  | —                 | replica            | primary          |
//! | etcd   | learner           | follower           | leader           |
//! | Kafka  | broker (observer of the metadata quorum) | standby controller | active controller |
//!
//! [`Member::phase`] splits a roll into stages that run one after the other, whatever the
//! members' readiness: every member of phase 0 is restarted before any of phase 1. MySQL
//! and etcd leave every member at 0, so their unready members go first; Kafka puts its
//! standby controllers in phase 0, the active controller in 1 and its brokers in 2, because
//! it rolls the whole metadata quorum, the active controller last, before any broker (an
//! unready broker must not jump ahead of a ready controller).
//!
//! [`Member::order`] breaks ties within a role (lower first), for systems that want a finer
//! order. Remaining ties are broken by name, comparing a trailing ordinal numerically (`db-2`
//! before `db-10`) so that the order is deterministic and reads naturally in status and logs.
//!
//! # Revisions
//!
//! A member is on target when its non-empty `current_revision` equals its non-empty
//! `target_revision`. Each member has its own target so that a system with one StatefulSet
//! per role (Kafka controllers and brokers) can be rolled as one cluster.
//!
//! - An **empty current revision** (unknown, e.g. a pod without its revision label, or a pod
//!   that does not exist yet) counts as *needing a restart*: the engine cannot prove the
//!   member is on target, and restarting a member that is missing or unknown is harmless
//!   (deleting a missing pod is a no-op). Once restarted, the member is in flight and is
//!   waited for, so an unknown revision cannot cause a restart loop faster than
//!   [`UpgradeGates::restart_timeout`].
//! - An **empty target revision** means the operator could not tell what the member should
//!   run (e.g. a StatefulSet whose `status.updateRevision` is not yet set). Nothing is
//!   restarted until it is known: [`Action::WaitFor`] with reason `TargetRevisionUnknown`.
//!
//! # Usage in a reconcile
//!
//! The operator builds [`Member`]s from what it observes (pod name, readiness, the pod's
//! `controller-revision-hash` label, the StatefulSet's `status.updateRevision`, and the
//! data plane's idea of who leads), implements [`UpgradeGates`] once, and on each reconcile
//! takes one step:
//!
//! ```no_run
//! use std::time::Duration;
//! use statecraft_shared::Result;
//! use statecraft_shared::reason::Catalogue;
//! use statecraft_shared::upgrade::{Action, Gate, Member, UpgradeGates, UpgradeProgress, next_step};
//!
//! /// The gates' reasons: the operator's catalogue (`operators/<op>/src/reason.rs`).
//! #[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
//! enum Gates {
//!     ReplicaLagging,
//! }
//! impl Catalogue for Gates {}
//!
//! struct MysqlGates; // would hold a connection pool and the cluster's spec
//!
//! impl UpgradeGates for MysqlGates {
//!     async fn may_restart(&self, _member: &Member) -> Result<Gate> {
//!         // e.g. refuse while fewer than two replicas are in sync
//!         Ok(Gate::Open)
//!     }
//!     async fn before_restart(&self, _member: &Member) -> Result<Gate> {
//!         // switch the primary over to the most up-to-date replica, then open
//!         Ok(Gate::Open)
//!     }
//!     async fn caught_up(&self, member: &Member) -> Result<Gate> {
//!         // compare GTID sets with the primary
//!         Ok(Gate::closed(Gates::ReplicaLagging, format!("{} is 12s behind", member.name)))
//!     }
//! }
//!
//! /// The rolling part of a reconcile; returns when to look again.
//! async fn roll(members: &[Member], status_progress: Option<&UpgradeProgress>) -> Result<Option<Duration>> {
//!     let mut progress = status_progress.cloned().unwrap_or_default();
//!     let step = next_step(members, &MysqlGates, &progress).await?;
//!     if let Action::Restart { member } = &step.action {
//!         delete_pod(member).await?; // act first, then record
//!     }
//!     progress.advance(&step, chrono::Utc::now());
//!     // status.upgrade = Some(progress); set the `Progressing` condition to
//!     // `step.action != Action::Done` with `step.action.reason()` and
//!     // `step.action.message()`; then patch the status (unchanged status, no write).
//!     Ok(step.action.requeue_after())
//! }
//! # async fn delete_pod(_name: &str) -> Result<()> { Ok(()) }
//! ```
//!
//! Perform a [`Action::Restart`] *before* persisting the progress: if the operator dies in
//! between, the next reconcile observes the restarted member (or re-issues an idempotent
//! restart) instead of waiting [`UpgradeGates::restart_timeout`] for a restart that never
//! happened.

mod execute;
mod plan;
mod progress;

#[cfg(test)]
mod tests;

pub use execute::{Action, DEFAULT_RESTART_TIMEOUT, Gate, Step, UpgradeGates, next_step, next_step_at};
pub use plan::{Member, PendingRestart, Plan, Role, plan};
pub use progress::{InFlightMember, UpgradeBlock, UpgradeProgress};

/// A pass's rolling-upgrade step as the per-cluster loop takes it: the step (the engine's
/// action, for the Progressing condition, or what an operator makes of it) and whether to pass
/// again at once. A failed step is logged and counts as none: the rest of the pass goes on,
/// and the next pass tries again.
pub fn taken<S>(step: crate::Result<Option<(S, bool)>>, cluster: &str) -> (Option<S>, bool) {
    match step {
        Ok(Some((action, again))) => (Some(action), again),
        Ok(None) => (None, false),
        Err(e) => {
            tracing::warn!(cluster, error = %e, "rolling upgrade step failed");
            (None, false)
        }
    }
}
