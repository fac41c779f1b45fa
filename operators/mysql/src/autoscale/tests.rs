//! Read-replica auto-scaling over hand-built observations (the fake data plane of
//! `clustering::fixtures`): the decision comes from the real `decide()`, so what is
//! measured and what blocks a resize follow the clustering task's own verdicts.

use std::time::Duration;

use statecraft_shared::autoscale::{Pressure, Thresholds};
use statecraft_shared::reason::Catalogue;

use super::*;
use crate::api::{AutoScalingStatus, MySQLClusterSpec, MySQLClusterStatus};
use crate::clustering::decide::decide;
use crate::clustering::fixtures::{cluster, g, primary, replica, server};

// --- Hand-built observations -------------------------------------------------------------

/// A healthy cluster of `n` servers, ordinal 0 the primary.
fn healthy(n: u32) -> Observed {
    let mut members = vec![primary(0, "0-100-10")];
    members.extend((1..n).map(|i| replica(i, 0, "0-100-10")));
    cluster(members)
}

/// Sets each member's client connections, by ordinal.
fn connections(o: &mut Observed, counts: &[Option<u64>]) {
    assert_eq!(counts.len(), o.members.len());
    for (m, c) in o.members.iter_mut().zip(counts) {
        server(m).client_connections = *c;
    }
}

/// Member `i` has a transaction of its own (errant) and no label, as the pass before left it.
fn errant(o: &mut Observed, i: usize) {
    server(&mut o.members[i]).executed = g(&format!("0-10{i}-11"));
    o.members[i].role_label = None;
}

/// Member `i` does not replicate (no channel) and has no label.
fn not_replicating(o: &mut Observed, i: usize) {
    server(&mut o.members[i]).replication = None;
    o.members[i].role_label = None;
}

fn lag(o: &mut Observed, i: usize, seconds: Option<i64>) {
    server(&mut o.members[i]).replication.as_mut().expect("a replica").lag_seconds = seconds;
}

// --- replicas() ----------------------------------------------------------------------------

fn scaling(min: i32, max: i32) -> AutoScaling {
    AutoScaling {
        min_replicas: min,
        max_replicas: max,
        metric: ScalingMetric::ClientConnections,
        scale_out_above: 100,
        scale_in_below: 10,
        scale_out_after_seconds: 60,
        scale_in_after_seconds: 600,
    }
}

fn mysql_cluster(replicas: i32, auto_scaling: Option<AutoScaling>, decided: Option<i32>) -> MySQLCluster {
    let spec = MySQLClusterSpec { replicas, auto_scaling, ..crate::validate::tests::spec() };
    let mut c = MySQLCluster::new("db", spec);
    c.status = decided.map(|n| MySQLClusterStatus {
        auto_scaling: Some(AutoScalingStatus { replicas: n, ..Default::default() }),
        ..Default::default()
    });
    c
}

#[test]
fn without_auto_scaling_the_count_is_spec_replicas_whatever_status_says() {
    assert_eq!(replicas(&mysql_cluster(3, None, None)), 3);
    assert_eq!(replicas(&mysql_cluster(3, None, Some(5))), 3, "a leftover decision is ignored");
    assert_eq!(replicas(&mysql_cluster(1, None, Some(5))), 1);
}

#[test]
fn with_auto_scaling_the_decided_count_is_followed_within_the_bounds() {
    // Nothing decided yet: the starting count.
    assert_eq!(replicas(&mysql_cluster(3, Some(scaling(1, 5)), None)), 3);
    // A status without an auto-scaling part is nothing decided either.
    let mut c = mysql_cluster(3, Some(scaling(1, 5)), None);
    c.status = Some(MySQLClusterStatus::default());
    assert_eq!(replicas(&c), 3);
    // Decided.
    assert_eq!(replicas(&mysql_cluster(3, Some(scaling(1, 5)), Some(5))), 5);
    assert_eq!(replicas(&mysql_cluster(3, Some(scaling(1, 5)), Some(1))), 1);
}

#[test]
fn a_decided_count_outside_bounds_the_user_narrowed_is_clamped() {
    // Scaled out to 5, then the user lowered maxReplicas to 3.
    assert_eq!(replicas(&mysql_cluster(3, Some(scaling(1, 3)), Some(5))), 3);
    // Scaled in to 1, then the user raised minReplicas to 3.
    assert_eq!(replicas(&mysql_cluster(3, Some(scaling(3, 5)), Some(1))), 3);
    // Both bounds on 5.
    assert_eq!(replicas(&mysql_cluster(5, Some(scaling(5, 5)), Some(3))), 5);
}

#[test]
fn a_decided_count_that_is_not_a_cluster_size_falls_back_to_spec_replicas_clamped() {
    for bad in [4, 2, 0, -1, 7] {
        assert_eq!(replicas(&mysql_cluster(3, Some(scaling(1, 5)), Some(bad))), 3, "status {bad}");
    }
    // spec.replicas itself outside the bounds (the API server refuses it, a restore target
    // might not): clamped too.
    assert_eq!(replicas(&mysql_cluster(1, Some(scaling(3, 5)), Some(4))), 3);
    assert_eq!(replicas(&mysql_cluster(5, Some(scaling(1, 3)), Some(4))), 3);
}

#[test]
fn inverted_bounds_fall_back_to_spec_replicas() {
    assert_eq!(replicas(&mysql_cluster(3, Some(scaling(5, 1)), Some(5))), 3);
}

// --- Policy --------------------------------------------------------------------------------

#[test]
fn the_policy_carries_the_spec_in_the_shared_auto_scalers_terms() {
    let a = AutoScaling { metric: ScalingMetric::ReplicationLag, ..scaling(3, 5) };
    assert_eq!(
        Policy::from(&a),
        Policy {
            min: 3,
            max: 5,
            metric: ScalingMetric::ReplicationLag,
            thresholds: Thresholds {
                scale_out_above: 100.0,
                scale_in_below: 10.0,
                scale_out_after: Duration::from_secs(60),
                scale_in_after: Duration::from_secs(600),
            },
        }
    );
    // Nonsense that escaped validation does not wrap around.
    let p = Policy::from(&AutoScaling { min_replicas: 0, scale_out_after_seconds: -5, ..scaling(1, 5) });
    assert_eq!(p.min, 1);
    assert_eq!(p.thresholds.scale_out_after, Duration::ZERO);
}

// --- measure() -----------------------------------------------------------------------------

fn measured(metric: ScalingMetric, o: &Observed) -> Option<(f64, u32)> {
    measure(metric, o, &decide(o))
}

#[test]
fn connections_are_averaged_over_the_serving_replicas_only() {
    let mut o = healthy(5);
    // The primary's connections are writes: never counted while replicas serve reads.
    connections(&mut o, &[Some(100), Some(3), Some(6), Some(900), Some(1000)]);
    not_replicating(&mut o, 3);
    errant(&mut o, 4);
    let d = decide(&o);
    assert!(d.verdicts[1].healthy && d.verdicts[2].healthy, "{d:?}");
    assert!(!d.verdicts[3].healthy && d.verdicts[3].errant.is_none(), "{d:?}");
    assert!(!d.verdicts[4].healthy && d.verdicts[4].errant.is_some(), "{d:?}");
    assert_eq!(measure(ScalingMetric::ClientConnections, &o, &d), Some((4.5, 2)));

    // All four serving: (3 + 6 + 9 + 12) / 4.
    let mut o = healthy(5);
    connections(&mut o, &[Some(100), Some(3), Some(6), Some(9), Some(12)]);
    assert_eq!(measured(ScalingMetric::ClientConnections, &o), Some((7.5, 4)));
}

#[test]
fn a_serving_replica_that_did_not_say_makes_the_connections_unknown() {
    let mut o = healthy(3);
    connections(&mut o, &[Some(100), Some(5), None]);
    assert_eq!(measured(ScalingMetric::ClientConnections, &o), None);
    // A replica that does not serve may keep silent.
    let mut o = healthy(3);
    connections(&mut o, &[Some(100), Some(5), None]);
    not_replicating(&mut o, 2);
    assert_eq!(measured(ScalingMetric::ClientConnections, &o), Some((5.0, 1)));
}

#[test]
fn a_single_server_measures_its_primary() {
    let mut o = healthy(1);
    connections(&mut o, &[Some(7)]);
    assert_eq!(decide(&o).health, Health::Healthy);
    assert_eq!(measured(ScalingMetric::ClientConnections, &o), Some((7.0, 1)));
    connections(&mut o, &[None]);
    assert_eq!(measured(ScalingMetric::ClientConnections, &o), None);
}

#[test]
fn a_cluster_that_should_have_replicas_but_none_serves_has_no_measure() {
    let mut o = healthy(3);
    connections(&mut o, &[Some(50), Some(1), Some(2)]);
    not_replicating(&mut o, 1);
    not_replicating(&mut o, 2);
    assert_eq!(measured(ScalingMetric::ClientConnections, &o), None, "not the primary's 50");
}

#[test]
fn replication_lag_is_the_largest_lag_of_a_replica() {
    let mut o = healthy(5);
    lag(&mut o, 1, Some(2));
    lag(&mut o, 2, Some(12));
    lag(&mut o, 3, Some(0));
    lag(&mut o, 4, None);
    // Connections do not matter to this metric, even when unknown.
    connections(&mut o, &[None, None, None, None, None]);
    assert_eq!(measured(ScalingMetric::ReplicationLag, &o), Some((12.0, 3)));
    // No replica: nothing to lag.
    assert_eq!(measured(ScalingMetric::ReplicationLag, &healthy(1)), None);
}

// --- blocker() -----------------------------------------------------------------------------

#[test]
fn a_healthy_idle_cluster_can_be_resized() {
    assert_eq!(blocker(&decide(&healthy(3)), false, false), None);
}

#[test]
fn an_unhealthy_or_busy_cluster_cannot_be_resized() {
    let mut degraded = healthy(3);
    not_replicating(&mut degraded, 2);
    let d = decide(&degraded);
    assert_eq!(d.health, Health::Degraded);
    assert_eq!(
        blocker(&d, false, false),
        Some(Blocker {
            reason: MySql::ClusterNotHealthy.into(),
            message: "the cluster is Degraded: it is resized only while every member serves".into(),
        })
    );
    // Health comes first.
    assert_eq!(blocker(&d, true, true).unwrap().reason, MySql::ClusterNotHealthy);

    // Healthy, but a switchover is under way.
    let mut switching = healthy(3);
    switching.switchover_to = Some(1);
    let d = decide(&switching);
    assert_eq!(d.health, Health::Healthy);
    assert_eq!(blocker(&d, false, false).unwrap().reason, MySql::ClusteringBusy);

    let d = decide(&healthy(3));
    assert_eq!(
        blocker(&d, true, false),
        Some(Blocker { reason: MySql::UpgradeInProgress.into(), message: "a rolling restart is under way".into() })
    );
    assert_eq!(
        blocker(&d, false, true),
        Some(Blocker { reason: MySql::Reseeding.into(), message: "a replica is being re-seeded".into() })
    );
    assert_eq!(blocker(&d, true, true).unwrap().reason, MySql::UpgradeInProgress);
}

// --- judge() -------------------------------------------------------------------------------

fn policy(min: i32, max: i32, metric: ScalingMetric, out: i64, below: i64) -> Policy {
    Policy::from(&AutoScaling {
        min_replicas: min,
        max_replicas: max,
        metric,
        scale_out_above: out,
        scale_in_below: below,
        scale_out_after_seconds: 60,
        scale_in_after_seconds: 600,
    })
}

fn connections_policy(min: i32, max: i32, out: i64, below: i64) -> Policy {
    policy(min, max, ScalingMetric::ClientConnections, out, below)
}

fn reading(value: Option<(f64, u32)>, pressure: Pressure, seconds: u64) -> Reading {
    Reading { value, pressure, lasted: Duration::from_secs(seconds) }
}

fn degraded_blocker() -> Blocker {
    let mut o = healthy(3);
    not_replicating(&mut o, 2);
    blocker(&decide(&o), false, false).expect("a degraded cluster is blocked")
}

fn reason(v: &Verdict) -> MySql {
    match v {
        Verdict::Steady { reason, .. } | Verdict::Held { reason, .. } | Verdict::Scale { reason, .. } => *reason,
    }
}

#[test]
fn no_pressure_is_steady() {
    let p = connections_policy(1, 5, 4, 1);
    assert_eq!(
        judge(&p, 3, &reading(Some((2.0, 2)), Pressure::None, 0), None),
        Verdict::Steady {
            reason: MySql::WithinThresholds,
            message: "3 servers between 1 and 5; scaling out above 4 client connections per replica, in below 1".into(),
        }
    );
    // A blocker does not matter while nothing is asked.
    assert_eq!(
        reason(&judge(&p, 3, &reading(Some((2.0, 2)), Pressure::None, 0), Some(degraded_blocker()))),
        MySql::WithinThresholds
    );
}

#[test]
fn scaling_out_at_the_maximum_is_steady() {
    assert_eq!(
        judge(&connections_policy(1, 5, 4, 1), 5, &reading(Some((10.0, 4)), Pressure::Out, 60), None),
        Verdict::Steady {
            reason: MySql::AtMaximum,
            message: "10.0 client connections per replica for 60 s, above 4, but 5 servers is the maximum".into(),
        }
    );
    // A maximum of 3 below the largest size.
    let v = judge(&connections_policy(1, 3, 4, 1), 3, &reading(Some((10.0, 2)), Pressure::Out, 60), None);
    assert_eq!(reason(&v), MySql::AtMaximum);
}

#[test]
fn scaling_out_adds_two_replicas() {
    assert_eq!(
        judge(&connections_policy(1, 5, 4, 1), 3, &reading(Some((10.0, 2)), Pressure::Out, 75), None),
        Verdict::Scale {
            to: 5,
            reason: MySql::ScaleOut,
            message: "10.0 client connections per replica for 75 s, above 4: from 3 to 5 servers".into(),
        }
    );
    assert_eq!(MySql::ScaleOut.as_str(), "ScaleOut");
    // From a single server.
    let v = judge(&connections_policy(1, 5, 4, 1), 1, &reading(Some((4.5, 1)), Pressure::Out, 60), None);
    assert!(matches!(v, Verdict::Scale { to: 3, reason: MySql::ScaleOut, .. }), "{v:?}");
}

#[test]
fn a_scale_out_is_held_by_a_blocker_that_it_names() {
    let b = degraded_blocker();
    assert_eq!(
        judge(&connections_policy(1, 5, 4, 1), 3, &reading(Some((10.0, 2)), Pressure::Out, 75), Some(b.clone())),
        Verdict::Held {
            reason: MySql::ScaleOutHeld,
            message: format!(
                "10.0 client connections per replica for 75 s, above 4: from 3 to 5 servers is held: {}",
                b.message
            ),
        }
    );
}

#[test]
fn scaling_in_removes_two_replicas() {
    // 4 readers at 0.5 leave 2 at 1.0: well below 4.
    assert_eq!(
        judge(&connections_policy(1, 5, 4, 1), 5, &reading(Some((0.5, 4)), Pressure::In, 600), None),
        Verdict::Scale {
            to: 3,
            reason: MySql::ScaleIn,
            message: "0.5 client connections per replica for 600 s, below 1: from 5 to 3 servers".into(),
        }
    );
    assert_eq!(MySql::ScaleIn.as_str(), "ScaleIn");
}

#[test]
fn scaling_in_at_the_minimum_is_steady() {
    assert_eq!(
        judge(&connections_policy(3, 5, 4, 1), 3, &reading(Some((0.5, 2)), Pressure::In, 600), None),
        Verdict::Steady {
            reason: MySql::AtMinimum,
            message: "0.5 client connections per replica for 600 s, below 1, but 3 servers is the minimum".into(),
        }
    );
}

#[test]
fn a_scale_in_is_held_by_a_blocker() {
    let v = judge(
        &connections_policy(1, 5, 4, 1),
        5,
        &reading(Some((0.5, 4)), Pressure::In, 600),
        Some(degraded_blocker()),
    );
    match v {
        Verdict::Held { reason, message } => {
            assert_eq!(reason, MySql::ScaleInHeld);
            assert!(message.starts_with("0.5 client connections per replica for 600 s, below 1: from 5 to 3 servers is held: the cluster is Degraded"), "{message}");
        }
        other => panic!("expected Held, got {other:?}"),
    }
}

#[test]
fn a_scale_in_that_would_overload_the_replicas_left_is_held() {
    // 4 readers at 3.0 would leave 2 at 6.0, above 5: the next pass would scale out again.
    assert_eq!(
        judge(&connections_policy(1, 5, 5, 4), 5, &reading(Some((3.0, 4)), Pressure::In, 600), None),
        Verdict::Held {
            reason: MySql::ScaleInWouldOverload,
            message: "3.0 client connections per replica for 600 s, below 4, but 2 replicas would carry 6.0 each, \
                      above 5: staying at 5 servers"
                .into(),
        }
    );
    // Exactly at scaleOutAbove is not above it: the scale-in goes ahead.
    let v = judge(&connections_policy(1, 5, 6, 4), 5, &reading(Some((3.0, 4)), Pressure::In, 600), None);
    assert!(matches!(v, Verdict::Scale { to: 3, reason: MySql::ScaleIn, .. }), "{v:?}");
    // The overload is said even when a blocker would also hold the scale-in.
    let v = judge(
        &connections_policy(1, 5, 5, 4),
        5,
        &reading(Some((3.0, 4)), Pressure::In, 600),
        Some(degraded_blocker()),
    );
    assert_eq!(reason(&v), MySql::ScaleInWouldOverload);
}

#[test]
fn replication_lag_is_not_projected_onto_the_replicas_left() {
    let p = policy(3, 5, ScalingMetric::ReplicationLag, 5, 4);
    assert_eq!(
        judge(&p, 5, &reading(Some((3.0, 4)), Pressure::In, 600), None),
        Verdict::Scale {
            to: 3,
            reason: MySql::ScaleIn,
            message: "3.0 replication lag (seconds) for 600 s, below 4: from 5 to 3 servers".into(),
        }
    );
}

#[test]
fn scaling_in_to_one_server_projects_onto_the_primary() {
    // 3 → 1: the 2 readers' load moves to the single server left.
    let p = connections_policy(1, 5, 5, 3);
    let v = judge(&p, 3, &reading(Some((2.0, 2)), Pressure::In, 600), None);
    assert!(matches!(v, Verdict::Scale { to: 1, reason: MySql::ScaleIn, .. }), "2 × 2.0 = 4.0 fits: {v:?}");
    match judge(&p, 3, &reading(Some((2.6, 2)), Pressure::In, 600), None) {
        Verdict::Held { reason, message } => {
            assert_eq!(reason, MySql::ScaleInWouldOverload);
            assert!(
                message.contains("but the primary alone would carry 5.2 each, above 5: staying at 3 servers"),
                "{message}"
            );
        }
        other => panic!("2 × 2.6 = 5.2 is above 5: {other:?}"),
    }
}

#[test]
fn a_metric_that_cannot_be_measured_holds_whatever_the_pressure() {
    for pressure in [Pressure::Out, Pressure::In, Pressure::None] {
        assert_eq!(
            judge(&connections_policy(1, 5, 4, 1), 3, &reading(None, pressure, 0), None),
            Verdict::Held {
                reason: MySql::MetricUnavailable,
                message: "the client connections per replica cannot be measured now: no serving replica reported it"
                    .into(),
            },
            "{pressure:?}"
        );
    }
    let v = judge(&policy(3, 5, ScalingMetric::ReplicationLag, 5, 4), 3, &reading(None, Pressure::Out, 0), None);
    assert!(matches!(&v, Verdict::Held { message, .. } if message.contains("replication lag (seconds)")), "{v:?}");
}

#[test]
fn measured_then_judged_a_busy_cluster_scales_out() {
    // End to end over the pure parts: 3 healthy servers, replicas at 30 and 50 connections.
    let mut o = healthy(3);
    connections(&mut o, &[Some(500), Some(30), Some(50)]);
    let d = decide(&o);
    let p = connections_policy(1, 5, 20, 5);
    let value = measure(p.metric, &o, &d);
    assert_eq!(value, Some((40.0, 2)));
    let v = judge(&p, 3, &reading(value, Pressure::Out, 60), blocker(&d, false, false));
    assert!(matches!(v, Verdict::Scale { to: 5, reason: MySql::ScaleOut, .. }), "{v:?}");
}

#[test]
fn only_a_cluster_above_its_minimum_can_shrink() {
    let p = Policy::from(&scaling(3, 5));
    assert!(can_shrink(&p, 5));
    assert!(!can_shrink(&p, 3), "at the minimum");
    let one = Policy::from(&scaling(1, 5));
    assert!(can_shrink(&one, 3));
    assert!(!can_shrink(&one, 1));
}
