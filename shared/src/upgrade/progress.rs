//! The roll's progress as persisted in the custom resource's status, so that a restarted
//! operator resumes where it stopped instead of starting over or restarting a second member.

use chrono::{DateTime, SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::execute::{Action, Step};

// The doc comments of the persisted types become CRD descriptions, so they avoid rustdoc
// links and speak to the user reading `kubectl explain`. For Rust callers: update the
// progress with `UpgradeProgress::advance` after acting on each `Step`; the observed
// revisions stay the truth and the progress only records what observation cannot tell.

/// Progress of the rolling upgrade. It records only what the observed members cannot tell:
/// the member in flight, the members already confirmed, timings and the last stall. The
/// revisions the members actually run always take precedence over it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct UpgradeProgress {
    /// Revision the members are being rolled to. When members have different targets (one
    /// StatefulSet per role), their distinct targets sorted and comma-separated. A change
    /// starts a new roll.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_revision: String,
    /// When the roll to targetRevision started (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub started_at: Option<String>,
    /// When every member was last found on targetRevision, ready and caught up (RFC 3339).
    /// Unset while the roll is under way.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub completed_at: Option<String>,
    /// Members confirmed on targetRevision, ready and caught up during this roll, in the
    /// order they were confirmed. They are not checked again, but a member listed here that
    /// is observed on another revision is still restarted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members_done: Vec<String>,
    /// The member being restarted right now; no other member is touched until it is back,
    /// ready and caught up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlightMember>,
    /// The most recent time a safety check blocked this roll. Kept after the roll moves on,
    /// so a stall can be explained afterwards; cleared when a new roll starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_block: Option<UpgradeBlock>,
}

/// The member in flight and how far its restart got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InFlightMember {
    /// Name of the member (usually the pod name).
    pub name: String,
    /// When its pre-restart hook (switchover, leader transfer) succeeded (RFC 3339). Set only
    /// for a member that was leader when its restart came due.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub prepared_at: Option<String>,
    /// When its restart was issued (RFC 3339). Unset while only prepared.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub restarted_at: Option<String>,
}

impl InFlightMember {
    /// When the restart was issued; `None` if unset or not RFC 3339 (status can be edited
    /// by hand, so it is never trusted to parse).
    pub fn restarted(&self) -> Option<DateTime<Utc>> {
        let at = self.restarted_at.as_deref()?;
        DateTime::parse_from_rfc3339(at).ok().map(|t| t.with_timezone(&Utc))
    }
}

/// A check that refused to let the roll proceed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeBlock {
    /// The member whose restart was refused.
    pub member: String,
    /// Machine-readable CamelCase reason, as in condition reasons.
    pub reason: String,
    /// Human-readable explanation.
    pub message: String,
    /// When the roll was first refused with this reason for this member (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub since: String,
}

impl UpgradeProgress {
    /// Records `step`, which the operator has just acted on, at time `now`.
    ///
    /// Idempotent: recording the same step again changes nothing (timestamps keep their
    /// first value), so steady waiting produces no status writes. The one exception is a
    /// repeated [`Action::Restart`] of the in-flight member, which the engine only issues
    /// after the restart timed out, and which restarts the timeout.
    pub fn advance(&mut self, step: &Step, now: DateTime<Utc>) {
        if self.target_revision != step.target_revision {
            self.start(&step.target_revision, now);
        }
        for name in &step.confirmed {
            self.confirm(name);
        }
        match &step.action {
            Action::Restart { member } => self.record_restart(member, now),
            Action::Replan { member } => {
                self.in_flight = Some(InFlightMember {
                    name: member.clone(),
                    prepared_at: Some(timestamp(now)),
                    restarted_at: None,
                });
            }
            Action::WaitFor { .. } => self.forget_prepared(),
            Action::Blocked { member, reason, message } => {
                self.forget_prepared();
                self.record_block(member, reason.as_str(), message, now);
            }
            Action::Done => {
                self.in_flight = None;
                self.completed_at.get_or_insert_with(|| timestamp(now));
            }
        }
    }

    /// Starts a new roll to `target`, forgetting everything about the previous one.
    fn start(&mut self, target: &str, now: DateTime<Utc>) {
        tracing::info!(target_revision = target, "new rolling-upgrade target");
        *self = UpgradeProgress {
            target_revision: target.to_owned(),
            started_at: Some(timestamp(now)),
            ..UpgradeProgress::default()
        };
    }

    /// Records that `name` is on target, ready and caught up.
    fn confirm(&mut self, name: &str) {
        if !self.members_done.iter().any(|done| done == name) {
            self.members_done.push(name.to_owned());
        }
        if self.in_flight.as_ref().is_some_and(|f| f.name == name) {
            self.in_flight = None;
        }
    }

    /// Records that `name`'s restart was issued, keeping when it was prepared.
    fn record_restart(&mut self, name: &str, now: DateTime<Utc>) {
        let prepared_at = self.in_flight.take().filter(|f| f.name == name).and_then(|f| f.prepared_at);
        self.in_flight =
            Some(InFlightMember { name: name.to_owned(), prepared_at, restarted_at: Some(timestamp(now)) });
        self.members_done.retain(|done| done != name);
    }

    /// A preparation (leader transfer) is trusted only by the step right after it: if
    /// anything else came first, the member may be leader again and must be prepared anew.
    fn forget_prepared(&mut self) {
        if self.in_flight.as_ref().is_some_and(|f| f.restarted_at.is_none()) {
            self.in_flight = None;
        }
    }

    /// Records a block, keeping its `since` while the same gate keeps refusing.
    fn record_block(&mut self, member: &str, reason: &str, message: &str, now: DateTime<Utc>) {
        let since = match &self.last_block {
            Some(b) if b.member == member && b.reason == reason => b.since.clone(),
            _ => timestamp(now),
        };
        self.last_block = Some(UpgradeBlock {
            member: member.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            since,
        });
    }
}

/// RFC 3339 in UTC with whole seconds, as Kubernetes writes timestamps.
fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::Common;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).expect("valid timestamp")
    }

    fn step(action: Action) -> Step {
        Step { action, target_revision: "v2".into(), confirmed: Vec::new() }
    }

    fn restart(name: &str) -> Action {
        Action::Restart { member: name.into() }
    }

    #[test]
    fn a_new_target_starts_a_new_roll() {
        let mut p = UpgradeProgress {
            target_revision: "v1".into(),
            members_done: vec!["a".into()],
            completed_at: Some(timestamp(at(0))),
            ..Default::default()
        };
        p.advance(&step(restart("b")), at(10));
        assert_eq!(p.target_revision, "v2");
        assert_eq!(p.started_at.as_deref(), Some("2023-11-14T22:13:30Z"));
        assert!(p.members_done.is_empty());
        assert!(p.completed_at.is_none());
        assert_eq!(p.in_flight.as_ref().map(|f| f.name.as_str()), Some("b"));
    }

    #[test]
    fn confirming_the_in_flight_member_lands_it() {
        let mut p = UpgradeProgress::default();
        p.advance(&step(restart("a")), at(0));
        let mut next = step(restart("b"));
        next.confirmed = vec!["a".into()];
        p.advance(&next, at(60));
        assert_eq!(p.members_done, ["a"]);
        let in_flight = p.in_flight.expect("b in flight");
        assert_eq!(in_flight.name, "b");
        assert_eq!(in_flight.restarted(), Some(at(60)));
    }

    #[test]
    fn advance_is_idempotent_while_waiting_or_blocked() {
        let mut p = UpgradeProgress::default();
        p.advance(&step(restart("a")), at(0));
        let blocked =
            step(Action::Blocked { member: "b".into(), reason: Common::RestartPending.into(), message: "m".into() });
        p.advance(&blocked, at(10));
        let snapshot = p.clone();
        p.advance(&blocked, at(20));
        let wait =
            step(Action::WaitFor { member: "a".into(), reason: Common::MemberNotReady.into(), message: "m".into() });
        p.advance(&wait, at(30));
        p.advance(&blocked, at(40));
        assert_eq!(p, snapshot);
        assert_eq!(p.last_block.as_ref().map(|b| b.since.as_str()), Some("2023-11-14T22:13:30Z"));
    }

    #[test]
    fn done_clears_in_flight_and_sets_completed_once() {
        let mut p = UpgradeProgress::default();
        p.advance(&step(restart("a")), at(0));
        p.advance(&Step { confirmed: vec!["a".into()], ..step(Action::Done) }, at(5));
        p.advance(&step(Action::Done), at(9));
        assert!(p.in_flight.is_none());
        assert_eq!(p.completed_at, Some(timestamp(at(5))));
    }

    #[test]
    fn a_preparation_is_forgotten_unless_the_next_step_uses_it() {
        let mut p = UpgradeProgress::default();
        p.advance(&step(Action::Replan { member: "a".into() }), at(0));
        p.advance(&step(restart("a")), at(1));
        let f = p.in_flight.clone().expect("a in flight");
        assert_eq!((f.prepared_at.is_some(), f.restarted_at.is_some()), (true, true));

        let mut p = UpgradeProgress::default();
        p.advance(&step(Action::Replan { member: "a".into() }), at(0));
        p.advance(
            &step(Action::WaitFor { member: "b".into(), reason: Common::MemberNotReady.into(), message: "m".into() }),
            at(1),
        );
        assert!(p.in_flight.is_none());
    }

    #[test]
    fn unparsable_restart_time_is_none() {
        let f = InFlightMember { name: "a".into(), prepared_at: None, restarted_at: Some("yesterday".into()) };
        assert_eq!(f.restarted(), None);
    }

    #[test]
    fn serializes_camel_case_and_round_trips() {
        let mut p = UpgradeProgress::default();
        p.advance(&step(restart("a")), at(0));
        let json = serde_json::to_value(&p).expect("serializable");
        assert_eq!(json["targetRevision"], "v2");
        assert_eq!(json["inFlight"]["restartedAt"], "2023-11-14T22:13:20Z");
        assert!(json.get("membersDone").is_none(), "empty fields are omitted");
        let back: UpgradeProgress = serde_json::from_value(json).expect("deserializable");
        assert_eq!(back, p);
        let empty: UpgradeProgress = serde_json::from_str("{}").expect("all fields optional");
        assert_eq!(empty, UpgradeProgress::default());
    }

    /// Every field becomes a CRD field description, so every one must be documented.
    #[test]
    fn schema_describes_every_field() {
        fn check(value: &serde_json::Value, path: &str) {
            if let Some(props) = value.get("properties").and_then(|p| p.as_object()) {
                for (name, prop) in props {
                    assert!(prop.get("description").is_some(), "{path}.{name} has no description");
                    check(prop, &format!("{path}.{name}"));
                }
            }
            for defs in ["$defs", "definitions"] {
                if let Some(defs) = value.get(defs).and_then(|d| d.as_object()) {
                    for (name, def) in defs {
                        check(def, &format!("{path}#{name}"));
                    }
                }
            }
        }
        let schema = serde_json::to_value(schemars::schema_for!(UpgradeProgress)).expect("schema is JSON");
        check(&schema, "UpgradeProgress");
        assert_eq!(schema["properties"]["startedAt"]["format"], "date-time");
    }
}
