//! Read-replica auto-scaling (`spec.autoScaling`): the cluster runs 1, 3 or 5 servers
//! between the user's bounds, two replicas added when a metric of the read path has stayed
//! high and two removed when it has stayed low. Everything here is pure; the clustering task
//! feeds it each pass and carries out its verdict by writing `status.autoScaling.replicas`,
//! which the StatefulSet and the clustering decision follow from then on, exactly as they
//! follow a change of `spec.replicas` (new replicas are configured from the primary; a
//! primary on a removed ordinal is switched over first; removed servers keep their volumes).
//!
//! Why the count lives in status: the spec belongs to the user (and to whatever applies it
//! from Git); an operator that rewrote `spec.replicas` would fight both.
//!
//! Safety: a resize happens only while the cluster is healthy, nothing else is under way
//! (no clustering operation, rolling restart or re-seed) and, for a scale-in, no backup is
//! being taken (backups read the highest replica, the first one removed). A scale-in is
//! also refused when the replicas left would carry more than `scaleOutAbove` connections
//! each, so that the cluster does not flap between two sizes.

use std::time::Duration;

use statecraft_shared::autoscale::{Pressure, Thresholds, next_size};
use statecraft_shared::reason::Reason;

use crate::api::{AutoScaling, MySQLCluster, ScalingMetric};
use crate::clustering::decide::{Decision, Health, Operation, Role};
use crate::clustering::observed::Observed;
use crate::reason::MySql;

/// Type of the cluster's condition that says whether auto-scaling can act (present only
/// while `spec.autoScaling` is set).
pub const CONDITION: &str = "AutoScaling";

/// The sizes a cluster can have: a primary with an even number of replicas, so that a
/// majority of the servers always holds every acknowledged write.
const SIZES: [u32; 3] = [1, 3, 5];

/// The number of servers the cluster runs: with auto-scaling, the count it decided (the
/// starting `spec.replicas` until it decides one), kept within the bounds the user may
/// have changed since; without, `spec.replicas`.
pub fn replicas(cluster: &MySQLCluster) -> i32 {
    let spec = &cluster.spec;
    let Some(a) = &spec.auto_scaling else { return spec.replicas };
    let decided = cluster.status.as_ref().and_then(|s| s.auto_scaling.as_ref()).map(|s| s.replicas);
    let count = decided.filter(|n| SIZES.contains(&(*n as u32))).unwrap_or(spec.replicas);
    if a.min_replicas <= a.max_replicas { count.clamp(a.min_replicas, a.max_replicas) } else { spec.replicas }
}

/// `spec.autoScaling` in the terms of the shared auto-scaler.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// Fewest servers.
    pub min: u32,
    /// Most servers.
    pub max: u32,
    /// What is measured.
    pub metric: ScalingMetric,
    /// When it asks for a resize.
    pub thresholds: Thresholds,
}

impl From<&AutoScaling> for Policy {
    fn from(a: &AutoScaling) -> Self {
        let seconds = |s: i64| Duration::from_secs(s.max(0) as u64);
        Policy {
            min: a.min_replicas.max(1) as u32,
            max: a.max_replicas.max(1) as u32,
            metric: a.metric,
            thresholds: Thresholds {
                scale_out_above: a.scale_out_above as f64,
                scale_in_below: a.scale_in_below as f64,
                scale_out_after: seconds(a.scale_out_after_seconds),
                scale_in_after: seconds(a.scale_in_after_seconds),
            },
        }
    }
}

/// What the metric is called in messages.
pub fn metric_name(metric: ScalingMetric) -> &'static str {
    match metric {
        ScalingMetric::ClientConnections => "client connections per replica",
        ScalingMetric::ReplicationLag => "replication lag (seconds)",
    }
}

/// The `metric` label of `statecraft_mysql_autoscaling_metric`.
pub fn metric_label(metric: ScalingMetric) -> &'static str {
    match metric {
        ScalingMetric::ClientConnections => "client_connections_per_replica",
        ScalingMetric::ReplicationLag => "replication_lag_seconds",
    }
}

/// The metric in one pass, and over how many servers the read load was spread (for the
/// projection of a scale-in); `None` when it cannot be told (a serving replica that did
/// not say, or no replica serving while the cluster should have some).
pub fn measure(metric: ScalingMetric, o: &Observed, d: &Decision) -> Option<(f64, u32)> {
    let replicas = || {
        o.members.iter().zip(&d.verdicts).filter(|(_, v)| v.role == Some(Role::Replica)).map(|(m, v)| (m, v.healthy))
    };
    match metric {
        ScalingMetric::ClientConnections => {
            let serving: Vec<Option<u64>> = replicas()
                .filter(|(_, healthy)| *healthy)
                .map(|(m, _)| m.server.up().and_then(|s| s.client_connections))
                .collect();
            if serving.is_empty() {
                // A single server takes the reads itself.
                if o.replicas != 1 {
                    return None;
                }
                let primary = o.recorded_primary.and_then(|p| o.members.iter().find(|m| m.ordinal == p))?;
                return Some((primary.server.up()?.client_connections? as f64, 1));
            }
            let total = serving.iter().copied().sum::<Option<u64>>()?;
            Some((total as f64 / serving.len() as f64, serving.len() as u32))
        }
        ScalingMetric::ReplicationLag => {
            let lags: Vec<i64> =
                replicas().filter_map(|(m, _)| m.server.up()?.replication.as_ref()?.lag_seconds).collect();
            let readers = lags.len() as u32;
            lags.into_iter().max().map(|lag| (lag.max(0) as f64, readers))
        }
    }
}

/// Whether a cluster of `current` servers can shrink within the policy's bounds: only then
/// is a scale-in worth looking into (an idle cluster at its minimum asks for one every pass).
pub fn can_shrink(p: &Policy, current: u32) -> bool {
    next_size(&SIZES, p.min, p.max, current, Pressure::In).is_some()
}

/// Why the cluster cannot be resized now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocker {
    /// Why (the condition says the message).
    pub reason: Reason,
    /// For the condition and the Event.
    pub message: String,
}

/// What keeps this pass from resizing the cluster, if anything: a cluster that is not
/// healthy, an operation or a rolling restart under way, a replica being re-seeded.
/// (A running backup is looked up by the task, only when a scale-in is due.)
pub fn blocker(d: &Decision, rolling: bool, reseeding: bool) -> Option<Blocker> {
    let block = |reason: MySql, message: String| Some(Blocker { reason: reason.into(), message });
    if d.health != Health::Healthy {
        return block(
            MySql::ClusterNotHealthy,
            format!("the cluster is {}: it is resized only while every member serves", d.health.as_str()),
        );
    }
    if !matches!(d.operation, Operation::Nothing) {
        return block(MySql::ClusteringBusy, "a clustering operation is under way".into());
    }
    if rolling {
        return block(MySql::UpgradeInProgress, "a rolling restart is under way".into());
    }
    if reseeding {
        return block(MySql::Reseeding, "a replica is being re-seeded".into());
    }
    None
}

/// What auto-scaling does in this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Nothing to do; auto-scaling can act when the metric asks.
    Steady {
        /// Condition reason.
        reason: MySql,
        /// Condition message.
        message: String,
    },
    /// The metric asks for a resize (or cannot be read) but the cluster cannot take it now.
    Held {
        /// Condition and Event reason.
        reason: MySql,
        /// Condition and Event message.
        message: String,
    },
    /// Resize to `to` servers.
    Scale {
        /// The new count.
        to: u32,
        /// [`MySql::ScaleOut`] or [`MySql::ScaleIn`].
        reason: MySql,
        /// For the Event and `status.autoScaling.lastScale`.
        message: String,
    },
}

/// What one pass observed, for [`judge`].
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    /// The metric and the servers it was spread over ([`measure`]).
    pub value: Option<(f64, u32)>,
    /// Whether the metric has asked for long enough.
    pub pressure: Pressure,
    /// For how long it has asked.
    pub lasted: Duration,
}

/// Decides what auto-scaling does with a cluster of `current` servers. `blocker` is what
/// keeps the cluster from being resized now, if anything.
pub fn judge(p: &Policy, current: u32, reading: &Reading, blocker: Option<Blocker>) -> Verdict {
    let name = metric_name(p.metric);
    let t = &p.thresholds;
    let Some((value, readers)) = reading.value else {
        return Verdict::Held {
            reason: MySql::MetricUnavailable,
            message: format!("the {name} cannot be measured now: no serving replica reported it"),
        };
    };
    let lasted = reading.lasted.as_secs();
    let to = next_size(&SIZES, p.min, p.max, current, reading.pressure);
    let (to, reason, message) = match (reading.pressure, to) {
        (Pressure::None, _) => {
            return Verdict::Steady {
                reason: MySql::WithinThresholds,
                message: format!(
                    "{current} servers between {} and {}; scaling out above {} {name}, in below {}",
                    p.min, p.max, t.scale_out_above, t.scale_in_below
                ),
            };
        }
        (Pressure::Out, None) => {
            return Verdict::Steady {
                reason: MySql::AtMaximum,
                message: format!(
                    "{value:.1} {name} for {lasted} s, above {}, but {current} servers is the maximum",
                    t.scale_out_above
                ),
            };
        }
        (Pressure::In, None) => {
            return Verdict::Steady {
                reason: MySql::AtMinimum,
                message: format!(
                    "{value:.1} {name} for {lasted} s, below {}, but {current} servers is the minimum",
                    t.scale_in_below
                ),
            };
        }
        (Pressure::Out, Some(to)) => (
            to,
            MySql::ScaleOut,
            format!("{value:.1} {name} for {lasted} s, above {}: from {current} to {to} servers", t.scale_out_above),
        ),
        (Pressure::In, Some(to)) => {
            // The connections of the replicas removed move to those left (lag does not
            // spread that way, so it is not projected).
            if p.metric == ScalingMetric::ClientConnections {
                let left = to.saturating_sub(1).max(1);
                let projected = value * f64::from(readers) / f64::from(left);
                if projected > t.scale_out_above {
                    return Verdict::Held {
                        reason: MySql::ScaleInWouldOverload,
                        message: format!(
                            "{value:.1} {name} for {lasted} s, below {}, but {} would carry {projected:.1} each, \
                             above {}: staying at {current} servers",
                            t.scale_in_below,
                            if to == 1 { "the primary alone".to_string() } else { format!("{left} replicas") },
                            t.scale_out_above
                        ),
                    };
                }
            }
            (
                to,
                MySql::ScaleIn,
                format!("{value:.1} {name} for {lasted} s, below {}: from {current} to {to} servers", t.scale_in_below),
            )
        }
    };
    match blocker {
        Some(b) => Verdict::Held {
            reason: if reason == MySql::ScaleOut { MySql::ScaleOutHeld } else { MySql::ScaleInHeld },
            message: format!("{message} is held: {}", b.message),
        },
        None => Verdict::Scale { to, reason, message },
    }
}

#[cfg(test)]
mod tests;
