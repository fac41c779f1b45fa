//! Abnormality detection: each server's replication lag and connection errors judged
//! against its own recent past by the [`Detector`], from what the clustering task observes
//! every second (no extra connection: the error counters are read by the observation).
//!
//! A finding is reported three ways, so that it reaches whoever looks: the metric
//! `statecraft_mysql_member_abnormal{cluster,member,kind}` (1 while it lasts, for the
//! `MySQLMemberAbnormal` alert), a Warning Event when it starts (not every second), and the
//! cluster's `Abnormal` condition, which names the members and the figures that raised it.
//! The clustering task calls [`Monitor::observe`] once a pass.

pub mod detector;

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use statecraft_shared::status::set_custom_condition;
use tracing::{info, warn};

pub use detector::{Abnormality, Detector, Kind, Sample, Thresholds};

use crate::api::{MySQLCluster, MySQLClusterStatus};
use crate::build::Names;
use crate::clustering::observed::Observed;
use crate::controller::Context;
use crate::reason::MySql;

/// The type of the cluster's condition that is `True` while some member is abnormal.
pub const CONDITION: &str = "Abnormal";

/// What a cluster's task keeps for abnormality detection between passes.
#[derive(Default)]
pub struct Monitor {
    detector: Detector,
    /// The findings raised now, with their message when first raised: the condition shows
    /// the figures that raised each finding, and so changes (costing a status write) only
    /// when a finding is raised or cleared, not each second as the figures move.
    raised: BTreeMap<(String, Kind), String>,
}

impl Monitor {
    /// Judges one pass's observation of `cluster` and reports the findings: the metric of
    /// every member, an Event for each new finding and each cleared one, and the `Abnormal`
    /// condition in `status`. Members no longer observed are forgotten.
    pub async fn observe(
        &mut self,
        ctx: &Context,
        cluster: &MySQLCluster,
        observed: &Observed,
        status: &mut MySQLClusterStatus,
    ) {
        let name = cluster.name_any();
        let names = Names::new(&name, &ctx.rt.namespace);
        let at = Instant::now();
        let members: Vec<String> = observed.members.iter().map(|m| names.pod(m.ordinal)).collect();
        let mut found = Vec::new();
        for (member, m) in members.iter().zip(&observed.members) {
            let abnormalities = self.detector.observe(member, Sample::of(m, at));
            ctx.servers.abnormalities(&name, member, &abnormalities);
            found.extend(abnormalities);
        }
        self.detector.retain(|m| members.iter().any(|n| n == m));

        for a in found.iter().filter(|a| a.new) {
            warn!(cluster = %name, member = %a.member, kind = %a.kind, "{}", a.message);
            ctx.rt.events.warning(cluster, a.kind.reason(), "Insight", a.message.clone()).await;
        }
        let cleared = update(&mut self.raised, &found);
        for (member, kind) in cleared.iter().filter(|(member, _)| members.contains(member)) {
            info!(cluster = %name, %member, %kind, "abnormality cleared");
            let note = format!("member {member}: {kind} cleared, back within its recent behaviour");
            ctx.rt.events.normal(cluster, MySql::AbnormalityCleared, "Insight", note).await;
        }
        set_condition(&mut status.conditions, &self.raised, cluster.metadata.generation);
    }
}

/// Records `found` in `raised` (a new finding with its message, a lasting one keeping the
/// message it was raised with); returns the findings that cleared.
fn update(raised: &mut BTreeMap<(String, Kind), String>, found: &[Abnormality]) -> Vec<(String, Kind)> {
    let now: BTreeMap<(String, Kind), &str> =
        found.iter().map(|a| ((a.member.clone(), a.kind), a.message.as_str())).collect();
    let cleared = raised.keys().filter(|k| !now.contains_key(*k)).cloned().collect();
    raised.retain(|k, _| now.contains_key(k));
    for (key, message) in now {
        raised.entry(key).or_insert_with(|| message.to_string());
    }
    cleared
}

/// Sets the `Abnormal` condition from the findings raised: `True` with the reason of the
/// first kind found and every finding's message, or `False` (reason `Normal`). Like the
/// standard conditions, `lastTransitionTime` moves only when the status flips.
fn set_condition(conditions: &mut Vec<Condition>, raised: &BTreeMap<(String, Kind), String>, generation: Option<i64>) {
    let (status, reason, message) = match raised.keys().map(|(_, kind)| *kind).min() {
        Some(kind) => (true, kind.reason(), raised.values().cloned().collect::<Vec<_>>().join("; ")),
        None => (false, MySql::Normal, "every member behaves as in its recent past".to_string()),
    };
    set_custom_condition(conditions, CONDITION, status, reason, &message, generation);
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::reason::Catalogue;

    fn finding(member: &str, kind: Kind, message: &str, new: bool) -> Abnormality {
        Abnormality { member: member.into(), kind, message: message.into(), new }
    }

    #[test]
    fn the_condition_keeps_the_figures_a_finding_was_raised_with() {
        let mut raised = BTreeMap::new();
        let mut conditions = Vec::new();
        set_condition(&mut conditions, &raised, Some(1));
        assert_eq!((conditions[0].type_.as_str(), conditions[0].status.as_str()), ("Abnormal", "False"));
        assert_eq!(conditions[0].reason, MySql::Normal.as_str());
        let since = conditions[0].last_transition_time.clone();

        let lag = finding("db-1", Kind::ReplicationLagSpike, "member db-1: replication lag 29 s", true);
        assert_eq!(update(&mut raised, std::slice::from_ref(&lag)), vec![]);
        let later = finding("db-1", Kind::ReplicationLagSpike, "member db-1: replication lag 60 s", false);
        let errors = finding("db-0", Kind::ConnectionErrorSpike, "member db-0: 120 connection errors", true);
        assert_eq!(update(&mut raised, &[later, errors]), vec![]);
        set_condition(&mut conditions, &raised, Some(1));
        let c = &conditions[0];
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "ReplicationLagSpike"));
        assert_eq!(c.message, "member db-0: 120 connection errors; member db-1: replication lag 29 s");
        assert!(c.last_transition_time.0 >= since.0);

        let cleared = update(&mut raised, &[]);
        assert_eq!(
            cleared,
            vec![("db-0".to_string(), Kind::ConnectionErrorSpike), ("db-1".to_string(), Kind::ReplicationLagSpike)]
        );
        set_condition(&mut conditions, &raised, Some(2));
        assert_eq!(conditions.len(), 1);
        assert_eq!((conditions[0].status.as_str(), conditions[0].observed_generation), ("False", Some(2)));
    }

    #[test]
    fn an_unchanged_condition_keeps_its_transition_time() {
        let mut conditions = Vec::new();
        let raised = BTreeMap::from([(("db-2".to_string(), Kind::ReplicationLagSpike), "lag".to_string())]);
        set_condition(&mut conditions, &raised, Some(1));
        let first = conditions.clone();
        std::thread::sleep(std::time::Duration::from_millis(2));
        set_condition(&mut conditions, &raised, Some(1));
        assert_eq!(conditions, first, "an unchanged condition must not cost a status write");
    }
}
