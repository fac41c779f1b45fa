//! Re-seeding in the controller: what `Operation::Reseed` means for Kubernetes, and the
//! record in `status.reseeding` that says a replica is being rebuilt until it serves again
//! (the Progressing condition shows it; it survives a change of operator leader).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{Api, Client};
use statecraft_shared::Result;
use statecraft_shared::rebuild::rebuild_member;

use crate::api::{MySQLClusterSpec, MySQLClusterStatus, Reseeding};
use crate::build::Names;
use crate::clustering::decide::{Decision, ReseedReason};
use crate::clustering::heal::Healing;

/// The user's opt-ins of `spec`, with the broken streaks the task measured.
pub fn healing(spec: &MySQLClusterSpec, broken_for: BTreeMap<u32, Duration>) -> Healing {
    Healing {
        reseed_errant: spec.auto_heal.reseed_errant,
        reseed_broken_after: spec
            .auto_heal
            .reseed_broken_after_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
        broken_for,
    }
}

/// Deletes the data claim of member `ordinal`, then its pod; retried as a whole when a step
/// fails (each deletion tolerates what is already gone).
pub async fn rebuild(client: Client, names: &Names, ordinal: u32) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &names.namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, &names.namespace);
    rebuild_member(&pods, &claims, &names.pod(ordinal), &names.data_claim(ordinal)).await
}

/// Records that member `ordinal` is being re-seeded.
pub fn started(status: &mut MySQLClusterStatus, names: &Names, ordinal: u32, why: &ReseedReason) {
    status.reseeding =
        Some(Reseeding { member: names.pod(ordinal), reason: why.describe(), started_at: Utc::now().to_rfc3339() });
}

/// Clears the record once the member serves again, or is no longer a member; returns the
/// finished record for the caller's Event.
pub fn finished(status: &mut MySQLClusterStatus, names: &Names, decision: &Decision) -> Option<Reseeding> {
    let member = &status.reseeding.as_ref()?.member;
    let verdict = decision.verdicts.iter().find(|v| names.pod(v.ordinal) == *member);
    if verdict.is_some_and(|v| !v.healthy) {
        return None;
    }
    status.reseeding.take()
}

/// The Progressing condition's message while `r` rebuilds.
pub fn message(r: &Reseeding) -> String {
    format!(
        "{} is being re-seeded since {} ({}): it replicates the primary's binary log from the start",
        r.member, r.started_at, r.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clustering::decide::{Health, Operation, Verdict};

    fn decision(healthy: bool) -> Decision {
        Decision {
            health: Health::Degraded,
            operation: Operation::Nothing,
            verdicts: vec![Verdict { ordinal: 2, role: None, healthy, errant: None }],
        }
    }

    #[test]
    fn the_record_stays_until_the_member_serves_again() {
        let names = Names::new("db", "ns");
        let mut status = MySQLClusterStatus::default();
        started(&mut status, &names, 2, &ReseedReason::Errant("99-102-1".into()));
        let r = status.reseeding.clone().expect("recorded");
        assert_eq!(r.member, "db-2");
        assert!(r.reason.contains("99-102-1"), "{r:?}");
        assert!(message(&r).starts_with("db-2 is being re-seeded"));
        assert_eq!(finished(&mut status, &names, &decision(false)), None);
        assert_eq!(finished(&mut status, &names, &decision(true)), Some(r));
        assert_eq!(status.reseeding, None);
    }

    #[test]
    fn a_member_removed_meanwhile_ends_the_record() {
        let names = Names::new("db", "ns");
        let mut status = MySQLClusterStatus::default();
        started(&mut status, &names, 4, &ReseedReason::Broken { error: "boom".into(), seconds: 60 });
        assert!(finished(&mut status, &names, &decision(false)).is_some());
    }

    #[test]
    fn opt_ins_follow_the_spec() {
        let mut spec = crate::validate::tests::spec();
        assert_eq!(healing(&spec, Default::default()), Healing::default());
        spec.auto_heal.reseed_errant = true;
        spec.auto_heal.reseed_broken_after_seconds = Some(90);
        let h = healing(&spec, Default::default());
        assert!(h.reseed_errant);
        assert_eq!(h.reseed_broken_after, Some(Duration::from_secs(90)));
    }
}
