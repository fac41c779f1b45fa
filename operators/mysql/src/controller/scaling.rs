//! Read-replica auto-scaling in the clustering task: each pass measures the metric, lets
//! the pure [`crate::autoscale::judge`] decide, and carries out a resize by writing
//! `status.autoScaling.replicas` (the reconciler sizes the StatefulSet from it, the next
//! pass's decision configures or retires the servers). What it decided is also the
//! `AutoScaling` condition, an Event for each resize and each new reason to hold one, and
//! the `statecraft_mysql_autoscaling_*` metrics.

use std::time::Instant;

use chrono::{SecondsFormat, Utc};
use kube::ResourceExt;
use statecraft_shared::autoscale::{Pressure, Sustained};
use statecraft_shared::reason::{Catalogue, Common};
use statecraft_shared::status::{remove_condition, set_custom_condition};
use tracing::info;

use super::{Context, backup};
use crate::api::{AutoScalingStatus, MySQLCluster, MySQLClusterStatus};
use crate::autoscale::{self, Blocker, CONDITION, Policy, Reading, Verdict};
use crate::clustering::decide::{Decision, Health};
use crate::clustering::observed::Observed;
use crate::reason::MySql;

/// What a cluster's task keeps for auto-scaling between passes. Lost when the operator
/// restarts, which only delays a resize: the metric makes its case again.
#[derive(Default)]
pub struct Scaler {
    sustained: Sustained,
    /// The reason of the hold last published as an Event, so a long hold is one Event.
    last_held: Option<MySql>,
}

impl Scaler {
    /// Runs auto-scaling for one pass of `cluster`; `rolling` says a rolling restart is
    /// under way. Returns whether the count changed (the next pass should run at once).
    pub async fn pass(
        &mut self,
        ctx: &Context,
        cluster: &MySQLCluster,
        observed: &Observed,
        decision: &Decision,
        rolling: bool,
        status: &mut MySQLClusterStatus,
    ) -> bool {
        let name = cluster.name_any();
        let Some(spec) = &cluster.spec.auto_scaling else {
            status.auto_scaling = None;
            remove_condition(&mut status.conditions, CONDITION);
            ctx.servers.autoscaling(&name, None);
            *self = Scaler::default();
            return false;
        };
        let policy = Policy::from(spec);
        let current = autoscale::replicas(cluster).max(1) as u32;
        let value = autoscale::measure(policy.metric, observed, decision);
        let now = Instant::now();
        let pressure = self.sustained.observe(&policy.thresholds, now, value.map(|(v, _)| v));
        let reading = Reading { value, pressure, lasted: self.sustained.lasted(now) };
        let mut blocked = autoscale::blocker(decision, rolling, status.reseeding.is_some());
        // Backups read the highest replica, the first a scale-in removes: looked up only when
        // a scale-in is due and possible, so that a steady cluster, or an idle one at its
        // minimum, costs no request.
        if blocked.is_none() && pressure == Pressure::In && autoscale::can_shrink(&policy, current) {
            blocked = match backup::running_job(ctx, &name).await {
                Ok(None) => None,
                Ok(Some(job)) => Some(Blocker {
                    reason: Common::BackupRunning.into(),
                    message: format!("backup Job {job} reads the replica a scale-in removes"),
                }),
                Err(e) => Some(Blocker {
                    reason: MySql::BackupUnknown.into(),
                    message: format!("cannot tell if a backup runs: {e}"),
                }),
            };
        }
        let verdict = autoscale::judge(&policy, current, &reading, blocked);
        let metric = autoscale::metric_label(policy.metric);

        let state = status.auto_scaling.get_or_insert_with(Default::default);
        state.replicas = current as i32;
        let scaled = match &verdict {
            Verdict::Scale { to, reason, message } => {
                info!(cluster = %name, from = current, to, "{message}");
                ctx.rt.events.normal(cluster, *reason, "AutoScaling", message.clone()).await;
                *state = AutoScalingStatus {
                    replicas: *to as i32,
                    last_scale_time: Some(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)),
                    last_scale: Some(message.clone()),
                };
                self.sustained.reset();
                self.last_held = None;
                true
            }
            Verdict::Held { reason, message } => {
                // An Event when a resize is wanted and held, or when a healthy cluster cannot
                // be measured; not for the metric missing while a cluster starts or heals
                // (the condition says it, an Event each creation would be noise).
                let notable = pressure != Pressure::None || decision.health == Health::Healthy;
                if notable && self.last_held != Some(*reason) {
                    ctx.rt.events.warning(cluster, *reason, "AutoScaling", message.clone()).await;
                    self.last_held = Some(*reason);
                }
                false
            }
            Verdict::Steady { .. } => {
                self.last_held = None;
                false
            }
        };
        let replicas = status.auto_scaling.as_ref().map_or(current, |s| s.replicas as u32);
        ctx.servers.autoscaling(&name, Some((metric, value.map(|(v, _)| v), replicas)));
        set_condition(&mut status.conditions, &verdict, cluster.metadata.generation);
        scaled
    }
}

/// Sets the `AutoScaling` condition: `True` while auto-scaling can act (steady, or just
/// resized), `False` while a resize it wants is held. The message is the verdict's, with
/// the metric's value; it is updated only when the reason changes, so that a value moving
/// each second does not cost a status write each second (the metric has the live value).
fn set_condition(
    conditions: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    verdict: &Verdict,
    generation: Option<i64>,
) {
    let (status, reason, message) = match verdict {
        Verdict::Steady { reason, message } => (true, *reason, message),
        Verdict::Scale { reason, message, .. } => (true, *reason, message),
        Verdict::Held { reason, message } => (false, *reason, message),
    };
    let same_reason = conditions.iter().any(|c| {
        c.type_ == CONDITION
            && c.reason == reason.as_str()
            && c.status == if status { "True" } else { "False" }
            && c.observed_generation == generation
    });
    if !same_reason {
        set_custom_condition(conditions, CONDITION, status, reason, message, generation);
    }
}
