//! What a clustering pass does: the one operation the decision asks for, and, when the
//! clustering has nothing to do, the next step of a rolling upgrade; then scheduled
//! backups, read-replica auto-scaling and the growth of the volumes. Each is recorded in the
//! status it is given.

use std::sync::Mutex;
use std::time::Instant;

use chrono::Utc;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use statecraft_shared::cluster_loop::{Acted, Next};
use statecraft_shared::reason::{Common, Reason};
use statecraft_shared::upgrade::{Action, next_step};
use statecraft_shared::{Error, Result};
use tracing::{debug, info, warn};

use super::super::upgrade::{self, Gates};
use super::super::{Context, backup, certificates, reseed, scheduled};
use super::Memory;
use super::observe::Observation;
use crate::api::{MySQLCluster, MySQLClusterStatus, UpgradeStrategyType};
use crate::build::{Names, READS_LABEL, ROLE_LABEL};
use crate::clustering::dataplane::Endpoint;
use crate::clustering::decide::{Decision, Health, Operation, Role};
use crate::clustering::observed::ServerState;
use crate::clustering::pass::{Effect, perform};
use crate::reason::MySql;

/// How long after a primary's pod is first seen being deleted its hand-over starts. The
/// deletion itself changes the read-write Service's EndpointSlice (the endpoint turns
/// terminating), and kube-proxy applies a second change no sooner than its minimum sync
/// period after the first (`--iptables-min-sync-period`, and the same for ipvs and nftables:
/// 1 s by default); a hand-over started within that second has the new primary's route
/// wait for the rest of it while writes are stopped (measured in e2e: writes were down
/// 1.4 to 1.9 s, of which the operator's part was 0.3 s). The old primary keeps serving
/// meanwhile (its preStop hook holds it), so the wait costs the drain, not the clients.
pub(super) const HANDOVER_AFTER: std::time::Duration = std::time::Duration::from_millis(1200);

/// How long until a switchover away from a primary whose pod is being deleted may start
/// ([`HANDOVER_AFTER`] after the task first saw it so); `None` for any other operation, or
/// once it may.
fn handover_starts_in(op: &Operation, o: &Observation, memory: &Memory, now: Instant) -> Option<std::time::Duration> {
    let Operation::Switchover { from, terminating: true, .. } = op else { return None };
    let pod = o.pods.iter().find(|p| p.name_any() == o.names.pod(*from))?;
    let since = memory.terminating_since.get(&pod.uid()?)?;
    HANDOVER_AFTER.checked_sub(now.saturating_duration_since(*since)).filter(|d| !d.is_zero())
}

/// How soon a pass looks again while a new primary waits for the read-write Service's
/// routes (`FormerPrimaryStillRouted`): writes are down for that wait, and each pass is a
/// few reads.
const ROUTES_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// How often the servers are asked which certificate they present (`spec.tls`): a renewed
/// one is loaded within this of the kubelet replacing the files, without a query a second.
const TLS_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Carries out the pass's decision (see the module doc). Returns whether to pass again at
/// once and the rolling upgrade's step.
pub async fn act(
    ctx: &Context,
    cluster: &MySQLCluster,
    o: &Observation,
    decision: &Decision,
    memory: &mut Memory,
    status: &mut MySQLClusterStatus,
) -> Result<Acted<Option<Action>>> {
    let rt = &ctx.rt;
    let name = cluster.name_any();
    let names = &o.names;
    let mut next = Next::Later;
    let op = &decision.operation;
    if let Operation::Wait { reason, message } = op {
        memory.waits.publish(&rt.events, cluster, *reason, message, true).await;
        // A new primary waiting for the routes to leave another member takes writes the
        // moment they have: look again soon, not a whole interval later.
        if *reason == MySql::FormerPrimaryStillRouted {
            next = Next::After(ROUTES_RECHECK);
        }
    } else if let Some(wait) = handover_starts_in(op, o, memory, Instant::now()) {
        debug!(cluster = %name, ms = wait.as_millis() as u64, "the primary's pod is being deleted: the hand-over starts once the Service's routes have settled from the deletion");
        next = Next::After(wait);
    } else if let Some((reason, note)) = describe(op, names) {
        memory.waits.clear();
        info!(cluster = %name, operation = ?op, "clustering operation");
        let started = Instant::now();
        let result = perform(&o.dp, op, &o.observed, &o.targets, o.observed.ack_count).await;
        info!(cluster = %name, ms = started.elapsed().as_millis() as u64, ok = result.is_ok(), "clustering operation performed");
        ctx.servers.operation(&name, op, result.is_ok());
        match result {
            Ok(effect) => {
                match member_of(op) {
                    Some(m) => rt.events.normal_about_pod(cluster, &names.pod(m), reason, "Clustering", note).await,
                    None => rt.events.normal(cluster, reason, "Clustering", note).await,
                }
                // A pause may have fallen in the middle of the operation.
                rt.leadership.check()?;
                let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
                apply_effect(&pods, names, effect, status).await?;
                if let (Operation::Switchover { .. }, Some(r)) = (op, &o.request) {
                    status.handled_switchover = Some(r.clone());
                }
                if let Operation::ConfigureReplica { ordinal, source } = op {
                    memory.configured.insert((*ordinal, *source), Instant::now());
                }
                if let Operation::Reseed { ordinal, why } = op {
                    reseed::started(status, names, *ordinal, why);
                }
                next = Next::Now;
            }
            Err(e) => {
                rt.events.warning(cluster, reason, "Clustering", format!("{note} failed: {e}")).await;
                warn!(cluster = %name, error = %e, "clustering operation failed");
            }
        }
    } else {
        memory.waits.clear();
    }
    // A switchover request naming the current primary, or nothing valid, is done at once.
    if let Some(r) = &o.request
        && o.switchover_to.is_none()
        && status.handled_switchover.as_ref() != Some(r)
    {
        status.handled_switchover = Some(r.clone());
    }
    if let Some(done) = reseed::finished(status, names, decision) {
        let note = format!("{} was re-seeded ({}) and serves again", done.member, done.reason);
        rt.events.normal(cluster, MySql::Reseeded, "Clustering", note).await;
    }

    // A new revision of the StatefulSet is rolled only when the clustering has nothing to do.
    let mut roll = None;
    if decision.operation == Operation::Nothing
        && o.valid.is_some()
        && o.observed.replicas > 0
        && cluster.spec.upgrade_strategy.type_ == UpgradeStrategyType::ReplicasFirst
    {
        let mut gates = Gates {
            decision,
            observed: &o.observed,
            targets: &o.targets,
            dp: &o.dp,
            cluster: &name,
            backup_running: None,
            new_primary: Mutex::new(None),
        };
        let (action, again) = statecraft_shared::upgrade::taken(
            roll_step(ctx, cluster, names, &o.pods, &mut gates, o.observed.recorded_primary, status).await,
            &name,
        );
        roll = action;
        if again {
            next = Next::Now;
        }
    }

    // Scheduled backups need a valid spec and a cluster that can serve a dump.
    if o.valid.is_some()
        && matches!(decision.health, Health::Healthy | Health::Degraded)
        && let Err(e) = scheduled::run(ctx, cluster, &mut memory.backup_slot).await
    {
        warn!(cluster = %name, error = %e, "scheduled backup or retention failed");
        rt.events.warning(cluster, e.reason(), "Schedule", format!("scheduled backup or retention failed: {e}")).await;
    }

    // Auto-scaling judges a valid spec only (the bounds come from it).
    if o.valid.is_some() {
        let rolling = roll.as_ref().is_some_and(|a| *a != Action::Done);
        if memory.scaler.pass(ctx, cluster, &o.observed, decision, rolling, status).await {
            next = Next::Now;
        }
    }

    // The volumes follow a valid spec's size; the servers are not involved.
    if let Some(valid) = &o.valid {
        let members = u32::try_from(crate::autoscale::replicas(cluster)).unwrap_or(0);
        let size = &valid.spec.storage.size;
        if let Err(e) = memory
            .growth
            .pass(&rt.client, &names.set(), members, size, cluster, &rt.events, &mut status.conditions)
            .await
        {
            warn!(cluster = %name, error = %e, "growing the volumes failed");
        }
    }
    // A renewed certificate is loaded by each server that presents another.
    if let Some(serving) = &o.tls
        && memory.tls_checked.is_none_or(|at| at.elapsed() >= TLS_CHECK_INTERVAL)
    {
        memory.tls_checked = Some(Instant::now());
        let up: Vec<(String, Endpoint)> = o
            .observed
            .members
            .iter()
            .filter(|m| matches!(m.server, ServerState::Up(_)))
            .filter_map(|m| {
                Some((names.pod(m.ordinal), o.targets.iter().find(|t| t.ordinal == m.ordinal)?.endpoint.clone()))
            })
            .collect();
        certificates::reload(rt, cluster, &o.dp, serving, &up).await;
    }
    Ok(Acted { next, done: roll })
}

/// One step of the rolling upgrade: returns the engine's action (for the Progressing
/// condition) and whether to run the next pass at once.
async fn roll_step(
    ctx: &Context,
    cluster: &MySQLCluster,
    names: &Names,
    pods: &[Pod],
    gates: &mut Gates<'_>,
    primary: Option<u32>,
    status: &mut MySQLClusterStatus,
) -> Result<Option<(Action, bool)>> {
    let rt = &ctx.rt;
    let name = cluster.name_any();
    let statefulsets: Api<StatefulSet> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(sts) = statefulsets.get_opt(&name).await.map_err(|e| Error::kube("reading the StatefulSet", e))? else {
        return Ok(None);
    };
    let members = upgrade::members(&sts, pods, gates.decision, primary, &name);
    // Restarts wait for a running backup (a restarted source would fail it); looked up only
    // when some member needs a restart.
    if members.iter().any(|m| m.needs_restart()) {
        gates.backup_running = backup::running_job(ctx, &name).await?;
    }
    let mut progress = status.upgrade.clone().unwrap_or_default();
    let step = next_step(&members, &*gates, &progress).await?;
    let moved = gates.new_primary.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = moved {
        status.current_primary = Some(names.pod(p));
        rt.events
            .normal(
                cluster,
                MySql::Switchover,
                "Upgrade",
                format!("primary moved to {} before its restart", names.pod(p)),
            )
            .await;
    }
    if let Action::Restart { member } = &step.action {
        rt.leadership.check()?;
        let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
        pods.delete(member, &Default::default()).await.map_err(|e| Error::kube(format!("deleting pod {member}"), e))?;
        let note = format!("restarting {member} on the new revision");
        rt.events.normal_about_pod(cluster, member, Common::RestartMember, "Upgrade", note).await;
    }
    let again = matches!(step.action, Action::Replan { .. } | Action::Restart { .. }) || moved.is_some();
    progress.advance(&step, Utc::now());
    status.upgrade = Some(progress);
    Ok(Some((step.action, again)))
}

/// The member an operation is about, named in its Event as the related object (so that the
/// same operation on two members makes two Events, not one folded series).
fn member_of(op: &Operation) -> Option<u32> {
    match op {
        Operation::Bootstrap { primary: ordinal }
        | Operation::MakeWritable { ordinal }
        | Operation::Demote { ordinal }
        | Operation::ConfigureReplica { ordinal, .. }
        | Operation::Promote { ordinal, .. }
        | Operation::Switchover { to: ordinal, .. }
        | Operation::Reseed { ordinal, .. } => Some(*ordinal),
        Operation::Nothing | Operation::Wait { .. } | Operation::Fence { .. } | Operation::Relabel { .. } => None,
    }
}

/// Event (and Progressing condition) reason and note of an operation; `None` for no
/// operation (nothing to do, or a wait, which has its own reason).
pub(super) fn describe(op: &Operation, names: &Names) -> Option<(Reason, String)> {
    Some(match op {
        Operation::Bootstrap { primary } => {
            (Common::Bootstrap.into(), format!("{} is the first primary", names.pod(*primary)))
        }
        Operation::MakeWritable { ordinal } => {
            (MySql::PrimaryWritable.into(), format!("{} now accepts writes", names.pod(*ordinal)))
        }
        Operation::Demote { ordinal } => (
            MySql::Demote.into(),
            format!("{} was writable but is not the primary: made read-only", names.pod(*ordinal)),
        ),
        Operation::ConfigureReplica { ordinal, source } => {
            (MySql::ConfigureReplica.into(), format!("{} replicates from {}", names.pod(*ordinal), names.pod(*source)))
        }
        Operation::Fence { ordinals } => (
            MySql::Fence.into(),
            format!(
                "stopped the receivers of {} so the unreachable primary gets no acknowledgement",
                ordinals.iter().map(|i| names.pod(*i)).collect::<Vec<_>>().join(", ")
            ),
        ),
        Operation::Promote { ordinal, from, received } => (
            MySql::Failover.into(),
            format!("{} replaces {} as primary (applied {received})", names.pod(*ordinal), names.pod(*from)),
        ),
        Operation::Switchover { from, to, terminating } => (
            MySql::Switchover.into(),
            format!(
                "primary moves from {} to {}{}",
                names.pod(*from),
                names.pod(*to),
                if *terminating { " (its pod is being deleted: the old server stops once handed over)" } else { "" }
            ),
        ),
        Operation::Reseed { ordinal, why } => (
            MySql::Reseed.into(),
            format!(
                "re-seeding {}: {}; its volume {} and pod are deleted and the new, empty server copies the primary's data through replication",
                names.pod(*ordinal),
                why.describe(),
                names.data_claim(*ordinal)
            ),
        ),
        Operation::Relabel { changes, reads } => (
            MySql::Relabel.into(),
            changes
                .iter()
                .map(|(i, r)| format!("{}={}", names.pod(*i), r.map_or("none", Role::label)))
                .chain(reads.iter().map(|(i, r)| {
                    format!("{} {} reads", names.pod(*i), if *r { "serves" } else { "no longer serves" })
                }))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Operation::Nothing | Operation::Wait { .. } => return None,
    })
}

/// The label patches of a relabel, one per pod, in order: each role change (with the pod's
/// read-only Service label when that changes too), then the pods whose read-only Service
/// label alone changes. `null` removes a label.
fn label_patches(changes: &[(u32, Option<Role>)], reads: &[(u32, bool)]) -> Vec<(u32, serde_json::Value)> {
    let reads_value = |serves: bool| serves.then_some("true");
    let mut patches: Vec<(u32, serde_json::Value)> = changes
        .iter()
        .map(|(i, role)| {
            let mut labels = serde_json::json!({ ROLE_LABEL: role.map(Role::label) });
            if let Some((_, serves)) = reads.iter().find(|(k, _)| k == i) {
                labels[READS_LABEL] = serde_json::json!(reads_value(*serves));
            }
            (*i, labels)
        })
        .collect();
    patches.extend(
        reads
            .iter()
            .filter(|(i, _)| !changes.iter().any(|(k, _)| k == i))
            .map(|(i, serves)| (*i, serde_json::json!({ READS_LABEL: reads_value(*serves) }))),
    );
    patches
}

async fn apply_effect(pods: &Api<Pod>, names: &Names, effect: Effect, status: &mut MySQLClusterStatus) -> Result<()> {
    match effect {
        Effect::None => {}
        Effect::RecordPrimary(i) => status.current_primary = Some(names.pod(i)),
        Effect::RecordFailover { primary, deposed } => {
            status.current_primary = Some(names.pod(primary));
            status.deposed_primary = Some(names.pod(deposed));
        }
        Effect::Rebuild(i) => reseed::rebuild(pods.clone().into_client(), names, i).await?,
        Effect::Relabel { changes, reads } => {
            for (i, labels) in label_patches(&changes, &reads) {
                let body = serde_json::json!({"metadata": {"labels": labels}});
                pods.patch(&names.pod(i), &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map_err(|e| Error::kube(format!("labelling pod {}", names.pod(i)), e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_whose_role_and_reads_change_gets_one_patch_and_reads_alone_come_last() {
        let changes = [(1, Some(Role::Primary)), (0, Some(Role::Replica)), (2, None)];
        let reads = [(2, false), (0, true), (1, false)];
        assert_eq!(
            label_patches(&changes, &reads),
            vec![
                (1, json!({ ROLE_LABEL: "primary", READS_LABEL: null })),
                (0, json!({ ROLE_LABEL: "replica", READS_LABEL: "true" })),
                (2, json!({ ROLE_LABEL: null, READS_LABEL: null })),
            ]
        );
        let promoted = [(1, Some(Role::Primary))];
        assert_eq!(label_patches(&promoted, &[]), vec![(1, json!({ ROLE_LABEL: "primary" }))], "reads untouched");
        assert_eq!(label_patches(&[], &[(1, false)]), vec![(1, json!({ READS_LABEL: null }))]);
    }
}
