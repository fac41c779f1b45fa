//! What a clustering pass reports: the servers' metrics, the status (members, phase,
//! conditions), abnormalities found and the primary's acknowledgements, and the
//! reconciler's verdict on the spec.

use statecraft_shared::reason::Common;
use statecraft_shared::status::{ConditionType, set_condition};
use statecraft_shared::upgrade::Action;

use super::super::{Context, acks, reseed};
use super::Memory;
use super::act::describe;
use super::observe::{Observation, Services};
use crate::api::{MemberStatus, MySQLCluster, MySQLClusterStatus};
use crate::build::Names;
use crate::clustering::acks::judge;
use crate::clustering::decide::{Decision, Health, Operation, Role};
use crate::clustering::observed::{Member, Observed};
use crate::reason::MySql;

/// Reports the pass (see the module doc) into `status`.
pub async fn report(
    ctx: &Context,
    cluster: &MySQLCluster,
    o: &Observation,
    decision: &Decision,
    roll: Option<&Action>,
    memory: &mut Memory,
    status: &mut MySQLClusterStatus,
) {
    let name = &o.names.cluster;
    ctx.servers.observe(name, &o.observed, decision);
    let version = o.valid.as_ref().map(|v| v.version.to_string());
    fill_status(status, cluster, &o.names, &o.observed, &o.services, decision, version.as_deref(), roll);
    memory.insight.observe(ctx, cluster, &o.observed, status).await;
    acks::report(ctx, cluster, judge(&o.observed, decision), &mut memory.acks, status).await;
    // The reconciler's verdict on the spec stands: Ready stays False until it is fixed.
    if let Some((reason, message)) = &o.spec_problem {
        set_condition(
            &mut status.conditions,
            ConditionType::Ready,
            false,
            *reason,
            message,
            cluster.metadata.generation,
        );
    }
}

/// Why the client Services do not serve the cluster yet, if they do not: the read-write
/// Service must list the primary, and the read-only one some server once there are
/// replicas (`servers` in force).
fn unserved(names: &Names, services: &Services, primary: Option<u32>, servers: i32) -> Option<String> {
    let Some(primary) = primary else {
        return Some(format!("no primary for Service {} to lead to yet", names.read_write_service()));
    };
    if !services.read_write.iter().any(|(k, _)| *k == primary) {
        return Some(format!(
            "Service {} does not list primary {} yet",
            names.read_write_service(),
            names.pod(primary)
        ));
    }
    (servers > 1 && services.read_only.is_empty())
        .then(|| format!("Service {} lists no replica yet", names.read_only_service()))
}

// What one pass saw, each part as the status needs it: bundling them would only rename them.
#[allow(clippy::too_many_arguments)]
fn fill_status(
    status: &mut MySQLClusterStatus,
    cluster: &MySQLCluster,
    names: &Names,
    o: &Observed,
    services: &Services,
    d: &Decision,
    version: Option<&str>,
    roll: Option<&Action>,
) {
    let generation = cluster.metadata.generation;
    let primary_ok = d.verdicts.iter().any(|v| v.role == Some(Role::Primary) && v.healthy);
    status.phase = Some(d.health.as_str().to_string());
    status.replicas = Some(i32::try_from(o.replicas).unwrap_or(i32::MAX));
    status.selector = Some(names.set().selector_query());
    status.read_write_service = Some(names.read_write_service());
    status.read_only_service = Some(names.read_only_service());
    status.members = o
        .members
        .iter()
        .zip(&d.verdicts)
        .map(|(m, v): (&Member, _)| {
            let server = m.server.up();
            MemberStatus {
                name: names.pod(m.ordinal),
                role: v.role.map_or("unknown", Role::label).to_string(),
                ready: v.healthy,
                gtid_executed: server.map(|s| s.executed.to_string()),
                lag_seconds: server.and_then(|s| s.replication.as_ref()).and_then(|r| r.lag_seconds),
                errant: v.errant.is_some(),
            }
        })
        .collect();
    // A deposed primary that serves again (a replica of the new one, re-seeded or not)
    // holds nothing unacknowledged any more; nor does one that is the primary again. Judged
    // on what this pass recorded: a failover in this pass has just set it.
    let recorded_now = status.current_primary.clone();
    let unchanged = recorded_now == o.recorded_primary.map(|p| names.pod(p));
    let serves = |gone: &String| d.verdicts.iter().any(|v| v.healthy && names.pod(v.ordinal) == *gone);
    status.deposed_primary = status
        .deposed_primary
        .take()
        .filter(|gone| recorded_now.as_ref() != Some(gone) && !(unchanged && serves(gone)));
    let rolling = roll.is_some_and(|a| *a != Action::Done);
    if let Some(v) = version.filter(|_| d.health == Health::Healthy && !rolling) {
        status.observed_version = Some(v.to_string());
    }
    let (wait_reason, wait_message) = match &d.operation {
        Operation::Wait { reason, message } => (Some(*reason), message.clone()),
        _ => (None, String::new()),
    };
    let c = &mut status.conditions;
    let healthy = d.health == Health::Healthy;
    let reason = wait_reason.unwrap_or(d.health.reason());
    let message = if wait_message.is_empty() { format!("cluster is {}", d.health.as_str()) } else { wait_message };
    // Ready promises clients both Services: a healthy cluster whose Services do not list
    // its servers yet (the first seconds after creation or a promotion) waits for them.
    let unserved = unserved(names, services, o.recorded_primary, status.replicas.unwrap_or(0)).filter(|_| healthy);
    match &unserved {
        Some(why) => set_condition(c, ConditionType::Ready, false, MySql::ServicesWithoutEndpoints, why, generation),
        None => set_condition(c, ConditionType::Ready, healthy, reason, &message, generation),
    };
    set_condition(
        c,
        ConditionType::Available,
        primary_ok,
        if primary_ok { MySql::PrimaryWritable } else { MySql::NoWritablePrimary },
        &message,
        generation,
    );
    let degraded = matches!(d.health, Health::Degraded | Health::Failed | Health::Lost);
    set_condition(
        c,
        ConditionType::Degraded,
        degraded,
        if degraded { reason } else { Common::AsExpected.into() },
        &message,
        generation,
    );
    let operation = describe(&d.operation, names).map(|(reason, _)| reason);
    let operating = operation.is_some();
    match roll.filter(|_| !operating) {
        Some(action) if rolling => {
            set_condition(c, ConditionType::Progressing, true, action.reason(), &action.message(), generation);
        }
        // A re-seeded replica rebuilding: no operation of its own, but progress all the same.
        _ if !operating && let Some(r) = &status.reseeding => {
            set_condition(c, ConditionType::Progressing, true, MySql::Reseeding, &reseed::message(r), generation);
        }
        _ => {
            set_condition(
                c,
                ConditionType::Progressing,
                operating,
                operation.unwrap_or(Common::Idle.into()),
                &message,
                generation,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clustering::decide::decide;
    use crate::clustering::fixtures::{cluster, primary, replica};

    fn filled(o: &Observed, status: &mut MySQLClusterStatus) {
        let mysql = MySQLCluster::new("db", crate::validate::tests::spec());
        fill_status(status, &mysql, &Names::new("db", "ns"), o, &serving(&[0, 1, 2], &[1, 2]), &decide(o), None, None);
    }

    /// The client Services listing `read_write` and `read_only` (pod uids are their names).
    fn serving(read_write: &[u32], read_only: &[u32]) -> Services {
        let listing = |ks: &[u32]| ks.iter().map(|k| (*k, format!("db-{k}"))).collect();
        Services { read_write: listing(read_write), read_only: listing(read_only) }
    }

    fn ready(status: &MySQLClusterStatus) -> (String, String) {
        let c = status.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready is set");
        (c.status.clone(), c.reason.clone())
    }

    /// Ready promises clients both Services: a fresh cluster whose read-only Service lists
    /// no replica yet is healthy but not Ready (seen by a user: Ready while `db-replicas`
    /// had no endpoints).
    #[test]
    fn ready_waits_until_both_services_list_their_servers() {
        let mut o = cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-100-10"), replica(2, 0, "0-100-10")]);
        o.recorded_primary = Some(0);
        let d = decide(&o);
        assert_eq!(d.health, Health::Healthy);
        let mysql = MySQLCluster::new("db", crate::validate::tests::spec());
        let names = Names::new("db", "ns");
        for (services, expected) in [
            (serving(&[0], &[]), ("False", "ServicesWithoutEndpoints")),
            (serving(&[], &[1, 2]), ("False", "ServicesWithoutEndpoints")),
            (serving(&[1], &[2]), ("False", "ServicesWithoutEndpoints")),
            (serving(&[0], &[2]), ("True", "Healthy")),
        ] {
            let mut status = MySQLClusterStatus::default();
            fill_status(&mut status, &mysql, &names, &o, &services, &d, None, None);
            assert_eq!(ready(&status), (expected.0.to_string(), expected.1.to_string()), "{services:?}");
            let available = status.conditions.iter().find(|c| c.type_ == "Available").map(|c| c.status.as_str());
            assert_eq!(available, Some("True"), "the primary takes writes all the same");
        }
        let mut status = MySQLClusterStatus::default();
        fill_status(&mut status, &mysql, &names, &o, &serving(&[0], &[]), &d, None, None);
        let message = status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.message.clone());
        assert_eq!(message.as_deref(), Some("Service db-replicas lists no replica yet"));
        assert_eq!(status.replicas, Some(3), "the servers in force, as the pass observed them");
        o.replicas = 0;
        fill_status(&mut status, &mysql, &names, &o, &serving(&[0], &[]), &d, None, None);
        assert_eq!(status.replicas, Some(0), "a stopped cluster runs none");
    }

    /// `status.deposedPrimary` is set by the effect of the failover's own pass, whose
    /// observation still had the old primary recorded (and, here, serving): that pass keeps
    /// it (the first version cleared it there, and the e2e stalled in
    /// PrimaryBehindReplica); later passes keep it while the deposed member does not serve
    /// and drop it once it replicates from the new primary.
    #[test]
    fn the_deposed_primary_is_kept_until_it_serves_again() {
        let failover_pass = cluster(vec![primary(0, "0-100-10"), replica(1, 0, "0-100-10"), replica(2, 0, "0-100-10")]);
        let mut status = MySQLClusterStatus {
            current_primary: Some("db-1".into()),
            deposed_primary: Some("db-0".into()),
            ..Default::default()
        };
        filled(&failover_pass, &mut status);
        assert_eq!(status.deposed_primary.as_deref(), Some("db-0"), "kept by the pass that set it");

        let mut after = cluster(vec![replica(0, 1, "0-100-11"), primary(1, "0-100-10"), replica(2, 1, "0-100-10")]);
        after.recorded_primary = Some(1);
        after.deposed = Some(0);
        filled(&after, &mut status);
        assert_eq!(status.deposed_primary.as_deref(), Some("db-0"), "errant, not serving: kept");

        after.members[0] = replica(0, 1, "0-100-10");
        filled(&after, &mut status);
        assert_eq!(status.deposed_primary, None, "a healthy replica of the new primary: dropped");
    }
}
