//! What a membership pass does: keeps the membership ConfigMap and the StatefulSet in line
//! with the member list, carries out the planner's step, rolls a new pod revision when
//! membership is settled, and takes scheduled snapshots.

use chrono::Utc;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::Applier;
use statecraft_shared::backup::job::is_running;
use statecraft_shared::cluster_loop::{Acted, Next};
use statecraft_shared::reason::Common;
use statecraft_shared::rebuild::{delete_if_present, rebuild_member};
use statecraft_shared::upgrade::{Action, next_step};
use statecraft_shared::{Error, Result};
use tracing::{info, warn};

use super::super::reconcile::bootstrap_credentials;
use super::super::upgrade::{self, Gates};
use super::super::{Context, scheduled};
use super::observe::{Kube, Observation};
use super::{Decision, Memory};
use crate::api::{EtcdCluster, EtcdClusterStatus};
use crate::build::Names;
use crate::build::config;
use crate::build::jobs::{BACKUP_TASK, CLUSTER_LABEL, KIND_LABEL};
use crate::build::restore::restore_init_containers;
use crate::build::statefulset::{self, RestoreParts};
use crate::membership::Observed;
use crate::membership::dataplane::{self, DataPlaneError};
use crate::membership::plan::{self, LeaderRequest, Step};
use crate::reason::Etcd;
use crate::validate::ValidSpec;

/// Carries out the pass's step (see the module doc). Returns whether to pass again at once
/// and the rolling upgrade's step.
pub async fn act(
    ctx: &Context,
    cluster: &EtcdCluster,
    o: &Observation,
    decision: &Decision,
    memory: &mut Memory,
    status: &mut EtcdClusterStatus,
) -> Result<Acted<Option<Action>>> {
    let step = &decision.step;
    let rt = &ctx.rt;
    let names = &o.names;
    let name = &names.cluster;
    let mut next = Next::Later;
    let mut roll = None;
    if let Some(valid) = &o.valid {
        // The ConfigMap follows the member list; while no member answers it is left as it
        // is (a cluster whose members are all down must not be bootstrapped again).
        let membership = plan::initial_cluster(names, &o.observed);
        // A refused snapshot Secret is the reconciler's to report (it runs the same check);
        // here it only stops the StatefulSet from being created with it.
        let creatable = o.kube.statefulset.is_some() || bootstrap_credentials(cluster, valid, ctx).await.is_ok();
        if creatable && (membership.is_some() || o.kube.statefulset.is_some()) {
            let replicas = plan::statefulset_replicas(&o.observed);
            let uid = cluster.uid().unwrap_or_default();
            apply_members(ctx, cluster, names, valid, membership.as_ref(), replicas, &uid).await?;
        }
        match carry_out(ctx, cluster, names, &o.kube, step, memory).await {
            Ok(true) => next = Next::Now,
            Ok(false) => {}
            Err(e) => warn!(cluster = %name, error = %e, step = ?step, "membership step failed"),
        }
        // A new pod revision is rolled only when membership is settled.
        if decision.rolls {
            let (action, again) = statecraft_shared::upgrade::taken(
                roll_step(ctx, cluster, names, &o.kube, &o.observed, status).await,
                name,
            );
            roll = action;
            if again {
                next = Next::Now;
            }
        }
    }
    // A leader request is done once the member it names leads, refused when it names no
    // voting member; until then the planner moves leadership when nothing else is to do.
    if let Some((request, ordinal)) = &o.leader_request
        && o.observed.members.is_some()
    {
        let verdict = match ordinal {
            Some(k) => plan::leader_request(&o.observed, *k),
            None => LeaderRequest::Refused(format!("{request:?} is not a member of the cluster")),
        };
        match verdict {
            LeaderRequest::Pending => {}
            LeaderRequest::Leads => {
                info!(cluster = %name, member = %request, "leader request done");
                status.handled_leader_request = Some(request.clone());
            }
            LeaderRequest::Refused(why) => {
                let note = format!("leadership not moved to {request}: {why}");
                rt.events.warning(cluster, Etcd::LeaderRequestRefused, "MoveLeader", note).await;
                status.handled_leader_request = Some(request.clone());
            }
        }
    }
    // Scheduled snapshots need a valid spec and a cluster that can serve one.
    if o.valid.is_some()
        && o.leader.is_some()
        && let Err(e) = scheduled::run(ctx, cluster, &mut memory.backup_slot).await
    {
        warn!(cluster = %name, error = %e, "scheduled snapshot or retention failed");
        rt.events
            .warning(cluster, e.reason(), "Schedule", format!("scheduled snapshot or retention failed: {e}"))
            .await;
    }
    Ok(Acted { next, done: roll })
}

/// Applies the membership ConfigMap (when known) and the StatefulSet with `replicas` pods.
async fn apply_members(
    ctx: &Context,
    cluster: &EtcdCluster,
    names: &Names,
    valid: &ValidSpec,
    membership: Option<&plan::InitialCluster>,
    replicas: u32,
    token: &str,
) -> Result<()> {
    let rt = &ctx.rt;
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, cluster, &rt.apply_cache)?;
    if let Some(m) = membership {
        applier.apply(config::config_map(names, m, token)).await?;
    }
    // A cluster restored from a snapshot keeps the restore's init containers: they do
    // nothing once member 0 has data, and dropping them would change the pod template
    // (a rolling restart for nothing).
    let parts = match &valid.spec.bootstrap_from {
        Some(source) => restore_init_containers(valid, names, source),
        None => RestoreParts::default(),
    };
    applier.apply(statefulset::statefulset(valid, names, replicas, parts)).await?;
    Ok(())
}

/// Carries out a planner step. Returns whether something was done (run again at once).
async fn carry_out(
    ctx: &Context,
    cluster: &EtcdCluster,
    names: &Names,
    kube: &Kube,
    step: &Step,
    memory: &mut Memory,
) -> Result<bool> {
    let rt = &ctx.rt;
    match step {
        Step::Idle => {
            memory.waits.clear();
            return Ok(false);
        }
        Step::Wait { reason, message } => {
            memory.waits.publish(&rt.events, cluster, *reason, message, true).await;
            return Ok(false);
        }
        _ => memory.waits.clear(),
    }
    // Membership changes are the leader's alone: not after a pause past the Lease.
    rt.leadership.check()?;
    info!(cluster = %names.cluster, step = ?step, "membership step");
    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let etcd = |e: DataPlaneError| match e.wait_reason() {
        // etcd said "not yet" (a learner catching up, members settling): a wait, not a failure.
        Some(reason) => Outcome::Wait(reason, e.to_string()),
        None => Outcome::Failed(Error::DataPlane { system: "etcd".into(), message: e.to_string() }),
    };
    let result: std::result::Result<(), Outcome> = async {
        match step {
            Step::Bootstrap => Ok(()),
            Step::DeleteStaleClaim { ordinal } => {
                delete_if_present(&claims, &names.data_claim(*ordinal)).await.map_err(Outcome::Failed)
            }
            Step::RestartPod { ordinal } => {
                delete_if_present(&pods, &names.member(*ordinal)).await.map_err(Outcome::Failed)
            }
            Step::Replace { ordinal, .. } => {
                // Out of the membership first; then its volume and pod, so that the pod
                // the StatefulSet makes again starts empty and joins as a learner.
                dataplane::perform(names, &kube.endpoints, step).await.map_err(etcd)?;
                rebuild_member(&pods, &claims, &names.member(*ordinal), &names.data_claim(*ordinal))
                    .await
                    .map_err(Outcome::Failed)
            }
            _ => dataplane::perform(names, &kube.endpoints, step).await.map_err(etcd),
        }
    }
    .await;
    match result {
        Ok(()) => {
            ctx.metrics.record_step(&names.cluster, step.reason(), true);
            match step.ordinal() {
                Some(o) => {
                    let pod = names.member(o);
                    rt.events.normal_about_pod(cluster, &pod, step.reason(), "Membership", step.message()).await
                }
                None => rt.events.normal(cluster, step.reason(), "Membership", step.message()).await,
            }
            Ok(true)
        }
        Err(Outcome::Wait(reason, message)) => {
            memory.waits.publish(&rt.events, cluster, reason, &message, false).await;
            Ok(false)
        }
        Err(Outcome::Failed(e)) => {
            ctx.metrics.record_step(&names.cluster, step.reason(), false);
            rt.events.warning(cluster, step.reason(), "Membership", format!("{} failed: {e}", step.message())).await;
            Err(e)
        }
    }
}

/// Why a step did not complete.
enum Outcome {
    /// etcd asked to wait (reason, message).
    Wait(Etcd, String),
    /// It failed.
    Failed(Error),
}

/// One step of the rolling upgrade: the engine's action (for the Progressing condition)
/// and whether to pass again at once.
async fn roll_step(
    ctx: &Context,
    cluster: &EtcdCluster,
    names: &Names,
    kube: &Kube,
    observed: &Observed,
    status: &mut EtcdClusterStatus,
) -> Result<Option<(Action, bool)>> {
    let rt = &ctx.rt;
    let Some(sts) = kube.statefulset.as_ref() else { return Ok(None) };
    let members = upgrade::members(sts, names, observed);
    // Nothing to roll and no roll to finish: leave the progress alone (a new cluster's
    // pods are on the first revision already; that is not a roll).
    let in_progress =
        status.upgrade.as_ref().is_some_and(|p| p.completed_at.is_none() && !p.target_revision.is_empty());
    if !in_progress && !members.iter().any(|m| m.needs_restart()) {
        return Ok(None);
    }
    // Restarts wait for a running snapshot (a restarted source would fail it); looked up
    // only when some member needs a restart.
    let backup_running = match members.iter().any(|m| m.needs_restart()) {
        true => running_backup_job(ctx, names).await?,
        false => None,
    };
    let gates = Gates { names, observed, endpoints: &kube.endpoints, backup_running };
    let mut progress = status.upgrade.clone().unwrap_or_default();
    let step = next_step(&members, &gates, &progress).await?;
    if let Action::Restart { member } = &step.action {
        rt.leadership.check()?;
        let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
        delete_if_present(&pods, member).await?;
        let note = format!("restarting {member} on the new revision");
        rt.events.normal_about_pod(cluster, member, Common::RestartMember, "Upgrade", note).await;
    }
    if let Action::Replan { member } = &step.action {
        rt.events
            .normal(
                cluster,
                Etcd::MoveLeader,
                "Upgrade",
                format!("leadership moved away from {member} before its restart"),
            )
            .await;
    }
    let again = matches!(step.action, Action::Replan { .. } | Action::Restart { .. });
    progress.advance(&step, Utc::now());
    status.upgrade = Some(progress);
    Ok(Some((step.action, again)))
}

/// A snapshot Job of the cluster that is running, if any (one that failed, at its deadline
/// too, is not, even while its pod is still being stopped).
async fn running_backup_job(ctx: &Context, names: &Names) -> Result<Option<String>> {
    let rt = &ctx.rt;
    let jobs: Api<Job> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let selector = format!("{CLUSTER_LABEL}={},{KIND_LABEL}={BACKUP_TASK}", names.cluster);
    let list = jobs
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::kube("listing snapshot Jobs", e))?;
    Ok(list.items.iter().find(|j| is_running(j)).map(|j| j.name_any()))
}
