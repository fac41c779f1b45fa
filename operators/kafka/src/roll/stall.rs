//! A wait that outlasts its deadline is reported, never failed.
//!
//! The shared engine never gives up: a closed gate is [`Action::Blocked`] and a member not
//! back yet is [`Action::WaitFor`], pass after pass, and a restart that goes unobserved is
//! issued again after [`UpgradeGates::restart_timeout`] (the default ten minutes; Kafka keeps
//! it). The progress it keeps in status says since when: `lastBlock.since` for a gate that
//! keeps refusing, `inFlight.restartedAt` for the member being waited for. [`report`] turns
//! a wait longer than the deadline into [`Kafka::RollStalled`] for the Progressing condition
//! and its Event, naming the gate and how long, while the roll goes on waiting: a broker
//! that needs twenty minutes to rejoin its ISRs gets them (Strimzi fails the reconcile after
//! about two, and its users see looping rolls).
//!
//! [`UpgradeGates::restart_timeout`]: statecraft_shared::upgrade::UpgradeGates::restart_timeout

use std::time::Duration;

use chrono::{DateTime, Utc};
use statecraft_shared::reason::Reason;
use statecraft_shared::upgrade::{Action, UpgradeProgress};

use crate::reason::Kafka;

/// How long a wait lasts before it is reported as stalled: Strimzi's operation timeout.
pub const STALL_AFTER: Duration = Duration::from_secs(5 * 60);

/// What the Progressing condition says about a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The condition's reason.
    pub reason: Reason,
    /// The condition's message.
    pub message: String,
    /// How long the wait has lasted, when it has lasted longer than the deadline.
    pub stalled_for: Option<Duration>,
}

/// The report of `action`, given the `progress` after [`UpgradeProgress::advance`] recorded
/// it: the action's own reason and message, or [`Kafka::RollStalled`] when its wait began
/// longer than `stall_after` before `now`.
pub fn report(action: &Action, progress: &UpgradeProgress, now: DateTime<Utc>, stall_after: Duration) -> Report {
    let plain = Report { reason: action.reason(), message: action.message(), stalled_for: None };
    let Some(since) = waiting_since(action, progress) else { return plain };
    let Ok(waited) = now.signed_duration_since(since).to_std() else { return plain };
    if waited < stall_after {
        return plain;
    }
    let member = match action {
        Action::Blocked { member, .. } | Action::WaitFor { member, .. } => member.as_str(),
        _ => "",
    };
    Report {
        reason: Kafka::RollStalled.into(),
        message: format!(
            "{} for {member} for {}m{:02}s, still waiting: {}",
            plain.reason,
            waited.as_secs() / 60,
            waited.as_secs() % 60,
            plain.message
        ),
        stalled_for: Some(waited),
    }
}

/// When the wait `action` reports began: the recorded block of the same member and reason,
/// or the restart of the in-flight member being waited for. `None` for any other action, or
/// when the progress does not say (a time that does not parse says nothing).
fn waiting_since(action: &Action, progress: &UpgradeProgress) -> Option<DateTime<Utc>> {
    match action {
        Action::Blocked { member, reason, .. } => {
            let block = progress.last_block.as_ref().filter(|b| &b.member == member && b.reason == reason.as_str())?;
            DateTime::parse_from_rfc3339(&block.since).ok().map(|t| t.with_timezone(&Utc))
        }
        Action::WaitFor { member, .. } => progress.in_flight.as_ref().filter(|f| &f.name == member)?.restarted(),
        Action::Restart { .. } | Action::Replan { .. } | Action::Done => None,
    }
}
