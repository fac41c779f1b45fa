//! The membership task of one cluster: every couple of seconds, and at once when woken or
//! after a step, it observes the member pods and claims (Kubernetes) and the members
//! (etcd), asks the pure planner for the one next step, carries it out, keeps the
//! StatefulSet and the membership ConfigMap in line with the member list, rolls new pod
//! revisions (shared upgrade engine) when membership is settled, and writes the status. It
//! is the only writer of those objects and of the status of a valid cluster, so they never
//! race.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::Applier;
use statecraft_shared::backup::job::is_running;
use statecraft_shared::pods::{PodProblem, explain_wait, pod_problems};
use statecraft_shared::rebuild::{delete_if_present, rebuild_member};
use statecraft_shared::status::{ConditionType, patch_status, set_condition};
use statecraft_shared::tasks::Wake;
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::upgrade::{Action, next_step};
use statecraft_shared::{Error, Result};
use tracing::{info, warn};

use super::reconcile::{bootstrap_credentials, check};
use super::upgrade::{self, Gates};
use super::{Context, scheduled};
use crate::api::{EtcdBackup, EtcdCluster, EtcdClusterStatus, MemberStatus};
use crate::build::config;
use crate::build::jobs::{BACKUP_TASK, CLUSTER_LABEL, KIND_LABEL};
use crate::build::restore::restore_init_containers;
use crate::build::statefulset::{self, RestoreParts};
use crate::build::{CLIENT_PORT, METRICS_PORT, Names};
use crate::insight::{self, Detector};
use crate::membership::dataplane::{self, DataPlaneError};
use crate::membership::plan::{self, DefragPolicy, Desired, Memory as PlanMemory, Step};
use crate::membership::{Observed, PodState};
use crate::validate::ValidSpec;

/// Time between passes when nothing happened.
pub const PASS_INTERVAL: Duration = Duration::from_secs(2);
/// Time between scrapes of the members' own metrics (abnormality detection).
const SCRAPE_INTERVAL: Duration = Duration::from_secs(10);

/// Waits for members that do not start or answer, which their pods' own status explains
/// when Kubernetes cannot run them (unschedulable, crash-looping, image not pulled): the
/// wait then carries the pod's reason (and so do its Event and the conditions). Not
/// `QuorumLost`: that reason (and phase) says the operator changes nothing, which stands.
const EXPLAINED_BY_PODS: &[&str] = &["MemberStarting", "MemberUnhealthy", "WaitingForHealthyMembers"];

/// What a pass asks of the loop.
enum Next {
    /// Run again at once (a step was carried out).
    Now,
    /// Run after the interval.
    Later,
    /// The cluster is gone: stop.
    Stop,
}

/// What the task remembers between passes.
#[derive(Default)]
struct Memory {
    /// The planner's memory (since when members are unhealthy).
    plan: PlanMemory,
    /// The last wait reason published as an Event, so a long wait is one Event.
    last_wait: Option<&'static str>,
    /// The last backup slot handled by the schedule.
    backup_slot: Option<chrono::DateTime<Utc>>,
    /// The members' recent history of leader changes and latencies.
    detector: Detector,
    /// When the members' metrics were last scraped.
    last_scrape: Option<Instant>,
}

/// Runs the task of cluster `name` (with `uid`) until cancelled or the cluster is gone (then
/// it returns and the registry forgets it). A panic is restarted by the supervisor of
/// `statecraft_shared::tasks`, with fresh memory, as after an operator restart.
pub async fn run(ctx: Arc<Context>, name: String, uid: String, wake: Wake, cancel: CancellationToken) {
    info!(cluster = %name, "membership task started");
    let mut memory = Memory::default();
    loop {
        let delay = match pass(&ctx, &name, &uid, &mut memory).await {
            Ok(Next::Now) => Duration::ZERO,
            Ok(Next::Later) => PASS_INTERVAL,
            Ok(Next::Stop) => break,
            Err(e) => {
                warn!(cluster = %name, error = %e, "membership pass failed");
                PASS_INTERVAL
            }
        };
        tokio::select! {
            () = cancel.cancelled() => break,
            () = wake.woken() => {}
            () = tokio::time::sleep(delay) => {}
        }
    }
    info!(cluster = %name, "membership task stopped");
}

/// What Kubernetes shows of the members: pods by ordinal, claims, and the client URL the
/// operator reaches each running member at (its pod IP: no DNS cache between the operator
/// and a restarted member).
struct Kube {
    pods: BTreeMap<u32, PodState>,
    claims: BTreeSet<u32>,
    endpoints: BTreeMap<u32, String>,
    pod_ips: BTreeMap<u32, String>,
    statefulset: Option<StatefulSet>,
    /// What keeps member pods from running, as Kubernetes says.
    problems: Vec<PodProblem>,
}

async fn observe_kube(ctx: &Context, names: &Names) -> Result<Kube> {
    let rt = &ctx.rt;
    let selector = names.selector().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let params = ListParams::default().labels(&selector);
    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let pod_list = pods.list(&params).await.map_err(|e| Error::kube("listing pods", e))?.items;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let claim_list = claims.list(&params).await.map_err(|e| Error::kube("listing claims", e))?.items;
    let statefulsets: Api<StatefulSet> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let statefulset =
        statefulsets.get_opt(&names.statefulset()).await.map_err(|e| Error::kube("reading the StatefulSet", e))?;
    let mut out = Kube {
        pods: BTreeMap::new(),
        claims: BTreeSet::new(),
        endpoints: BTreeMap::new(),
        pod_ips: BTreeMap::new(),
        statefulset,
        problems: pod_problems(&pod_list),
    };
    for claim in &claim_list {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(o) = claim.name_any().strip_prefix("data-").and_then(|pod| names.ordinal_of(pod)) {
            out.claims.insert(o);
        }
    }
    for pod in &pod_list {
        let name = pod.name_any();
        let Some(ordinal) = names.ordinal_of(&name) else { continue };
        if let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()).filter(|ip| !ip.is_empty())
            && pod.metadata.deletion_timestamp.is_none()
        {
            out.endpoints.insert(ordinal, format!("http://{ip}:{CLIENT_PORT}"));
            out.pod_ips.insert(ordinal, ip.to_string());
        }
        out.pods.insert(ordinal, pod_state(pod));
    }
    Ok(out)
}

/// A pod as the planner sees it.
fn pod_state(pod: &Pod) -> PodState {
    let status = pod.status.as_ref();
    let container = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == statefulset::CONTAINER));
    let waiting = container.and_then(|c| c.state.as_ref()).and_then(|s| s.waiting.as_ref());
    let restarts = container.map_or(0, |c| c.restart_count);
    PodState {
        name: pod.name_any(),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        running: container.and_then(|c| c.state.as_ref()).is_some_and(|s| s.running.is_some()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        crash_looping: waiting.is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff")),
        restarts,
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)),
        image: pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == statefulset::CONTAINER))
            .and_then(|c| c.image.clone()),
        revision: pod.labels().get(upgrade::REVISION_LABEL).cloned(),
    }
}

/// The planner's inputs from a valid spec.
fn desired(valid: &ValidSpec) -> Desired {
    let spec = &valid.spec;
    Desired {
        replicas: spec.replicas.max(1) as u32,
        replace_after: spec.auto_heal.enabled.then(|| Duration::from_secs(spec.auto_heal.replace_after_seconds as u64)),
        defrag: spec.defragmentation.enabled.then(|| DefragPolicy {
            threshold_percent: spec.defragmentation.threshold_percent.clamp(1, 99) as u32,
            min_db_size: valid.defrag_min_bytes,
        }),
    }
}

async fn pass(ctx: &Context, name: &str, uid: &str, memory: &mut Memory) -> Result<Next> {
    let rt = &ctx.rt;
    let api: Api<EtcdCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(cluster) = api.get_opt(name).await.map_err(|e| Error::kube("reading the cluster", e))? else {
        return Ok(Next::Stop);
    };
    if cluster.metadata.uid.as_deref() != Some(uid) || cluster.metadata.deletion_timestamp.is_some() {
        return Ok(Next::Stop);
    }
    let names = Names::new(name, &rt.namespace);
    // An invalid spec is the reconciler's to report; the members are still observed and
    // reported, but nothing is changed.
    let valid = check(&cluster).ok();
    let kube = observe_kube(ctx, &names).await?;
    let etcd = dataplane::gather(&names, &kube.endpoints).await;
    let observed = Observed {
        members: etcd.members,
        states: etcd.states,
        alarms: etcd.alarms,
        pods: kube.pods.clone(),
        claims: kube.claims.clone(),
        statefulset_replicas: kube
            .statefulset
            .as_ref()
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.replicas)
            .unwrap_or(0)
            .max(0) as u32,
        now: Utc::now(),
    };
    plan::remember(&mut memory.plan, &observed);
    let leader = plan::leader(&observed);
    ctx.metrics.observe(name, &names, &observed, leader);

    let mut status = cluster.status.clone().unwrap_or_default();
    let mut next = Next::Later;
    let mut step = Step::Idle;
    let mut roll = None;
    if let Some(valid) = valid.as_ref().filter(|_| !cluster.spec.paused) {
        step = plan::plan(&desired(valid), &observed, &memory.plan);
        if let Step::Wait { reason, message } = &mut step
            && EXPLAINED_BY_PODS.contains(reason)
        {
            explain_wait(reason, message, &kube.problems);
        }
        // The ConfigMap follows the member list; while no member answers it is left as it
        // is (a cluster whose members are all down must not be bootstrapped again).
        let membership = plan::initial_cluster(&names, &observed);
        // A refused snapshot Secret is the reconciler's to report (it runs the same check);
        // here it only stops the StatefulSet from being created with it.
        let creatable = kube.statefulset.is_some() || bootstrap_credentials(&cluster, valid, ctx).await.is_ok();
        if creatable && (membership.is_some() || kube.statefulset.is_some()) {
            let replicas = plan::statefulset_replicas(&observed);
            apply_members(ctx, &cluster, &names, valid, membership.as_ref(), replicas, uid).await?;
        }
        match carry_out(ctx, &cluster, &names, &kube, &step, memory).await {
            Ok(true) => next = Next::Now,
            Ok(false) => {}
            Err(e) => warn!(cluster = %name, error = %e, step = ?step, "membership step failed"),
        }
        // A new pod revision is rolled only when membership is settled.
        if step == Step::Idle {
            match roll_step(ctx, &cluster, &names, &kube, &observed, &mut status).await {
                Ok(Some((action, again))) => {
                    roll = Some(action);
                    if again {
                        next = Next::Now;
                    }
                }
                Ok(None) => {}
                Err(e) => warn!(cluster = %name, error = %e, "rolling upgrade step failed"),
            }
        }
    }
    if memory.last_scrape.is_none_or(|t| t.elapsed() >= SCRAPE_INTERVAL) {
        memory.last_scrape = Some(Instant::now());
        detect_abnormalities(ctx, &cluster, &names, &kube, &mut memory.detector).await;
    }
    // Scheduled snapshots need a valid spec and a cluster that can serve one.
    if valid.is_some()
        && !cluster.spec.paused
        && leader.is_some()
        && let Err(e) = scheduled::run(ctx, &cluster, &mut memory.backup_slot).await
    {
        warn!(cluster = %name, error = %e, "scheduled snapshot or retention failed");
        rt.events
            .warning(&cluster, e.reason(), "Schedule", format!("scheduled snapshot or retention failed: {e}"))
            .await;
    }
    if let Some((backup, completed)) = last_backup(ctx, name).await? {
        ctx.metrics.backup_seen(name, completed);
        status.last_backup = Some(backup);
    }
    fill_status(&mut status, &cluster, &names, &observed, &step, valid.as_ref(), roll.as_ref());
    if let Some(phase) = &status.phase {
        ctx.metrics.set_phase(name, phase);
    }
    // What this pass saw is written only by a replica that still leads.
    rt.leadership.check()?;
    patch_status(&api, &cluster, cluster.status.as_ref(), &status, rt.field_manager).await?;
    Ok(next)
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
            memory.last_wait = None;
            return Ok(false);
        }
        Step::Wait { reason, message } => {
            if memory.last_wait != Some(*reason) {
                rt.events.warning(cluster, reason, "Wait", message.clone()).await;
                memory.last_wait = Some(reason);
            }
            return Ok(false);
        }
        _ => memory.last_wait = None,
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
            if memory.last_wait != Some(reason) {
                rt.events.normal(cluster, reason, "Wait", message).await;
                memory.last_wait = Some(reason);
            }
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
    Wait(&'static str, String),
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
        rt.events.normal_about_pod(cluster, member, "RestartMember", "Upgrade", note).await;
    }
    if let Action::Replan { member } = &step.action {
        rt.events
            .normal(cluster, "MoveLeader", "Upgrade", format!("leadership moved away from {member} before its restart"))
            .await;
    }
    let again = matches!(step.action, Action::Replan { .. } | Action::Restart { .. });
    progress.advance(&step, Utc::now());
    status.upgrade = Some(progress);
    Ok(Some((step.action, again)))
}

/// Scrapes every running member's own metrics and feeds the abnormality detector: each
/// abnormality is a metric while it lasts and a Warning Event when it starts.
async fn detect_abnormalities(
    ctx: &Context,
    cluster: &EtcdCluster,
    names: &Names,
    kube: &Kube,
    detector: &mut Detector,
) {
    let members: Vec<(String, String)> =
        kube.pod_ips.iter().map(|(k, ip)| (names.member(*k), format!("http://{ip}:{METRICS_PORT}/metrics"))).collect();
    let samples = futures::future::join_all(members.iter().map(|(_, url)| insight::scrape(url))).await;
    for ((member, url), sample) in members.iter().zip(samples) {
        match sample {
            Ok(sample) => {
                let found = detector.observe(member, sample);
                ctx.metrics.set_abnormalities(&names.cluster, member, &found);
                for a in found.iter().filter(|a| a.new) {
                    ctx.rt.events.warning(cluster, a.kind.reason(), "Insight", a.message.clone()).await;
                }
            }
            Err(e) => {
                warn!(cluster = %names.cluster, %member, %url, error = %e, "scrape of the member's metrics failed")
            }
        }
    }
    detector.retain(|m| members.iter().any(|(name, _)| name == m));
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

/// The newest succeeded EtcdBackup of the cluster and its completion (Unix seconds).
async fn last_backup(ctx: &Context, cluster: &str) -> Result<Option<(String, i64)>> {
    let rt = &ctx.rt;
    let backups: Api<EtcdBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let list = backups.list(&ListParams::default()).await.map_err(|e| Error::kube("listing EtcdBackups", e))?;
    Ok(list
        .items
        .iter()
        .filter(|b| b.spec.cluster_name == cluster)
        .filter_map(|b| {
            let status = b.status.as_ref().map(|s| &s.common).filter(|s| s.succeeded())?;
            let completed = chrono::DateTime::parse_from_rfc3339(status.completion_time.as_deref()?).ok()?;
            Some((b.name_any(), completed.timestamp()))
        })
        .max_by_key(|(_, t)| *t))
}

fn fill_status(
    status: &mut EtcdClusterStatus,
    cluster: &EtcdCluster,
    names: &Names,
    o: &Observed,
    step: &Step,
    valid: Option<&ValidSpec>,
    roll: Option<&Action>,
) {
    let generation = cluster.metadata.generation;
    let leader = plan::leader(o);
    let members = o.members.clone().unwrap_or_default();
    status.client_endpoint = Some(names.service_url());
    status.members = members
        .iter()
        .map(|m| {
            let state = o.states.get(&m.id);
            let name =
                if m.name.is_empty() { m.ordinal.map(|k| names.member(k)).unwrap_or_default() } else { m.name.clone() };
            let alarms: Vec<String> = o
                .alarms
                .get(&m.id)
                .map(|a| a.iter().map(|a| format!("{a:?}").to_uppercase()).collect())
                .unwrap_or_default();
            MemberStatus {
                name,
                id: format!("{:x}", m.id),
                learner: m.is_learner,
                leader: leader == Some(m.id),
                // A member that answers but follows no leader (cut off from its peers: a
                // leader steps down when it cannot reach a quorum) does not serve.
                healthy: state.is_some_and(|s| s.leader != 0) && alarms.is_empty(),
                version: state.map(|s| s.version.clone()).filter(|v| !v.is_empty()),
                db_size: state.map(|s| s.db_size),
                db_size_in_use: state.map(|s| s.db_size_in_use),
                alarms,
            }
        })
        .collect();
    status.leader = status.members.iter().find(|m| m.leader).map(|m| m.name.clone());
    if let Some(id) = o.states.values().map(|s| s.cluster_id).find(|id| *id != 0) {
        status.cluster_id = Some(format!("{id:x}"));
    }
    let voters: Vec<&MemberStatus> = status.members.iter().filter(|m| !m.learner).collect();
    let healthy_voters = voters.iter().filter(|m| m.healthy).count();
    let quorum = plan::quorum(voters.len());
    let has_quorum = !voters.is_empty() && healthy_voters >= quorum && leader.is_some();
    let desired = cluster.spec.replicas.max(0) as usize;
    let rolling = roll.is_some_and(|a| *a != Action::Done);
    let all_healthy =
        has_quorum && healthy_voters == voters.len() && voters.len() == desired && voters.len() == status.members.len();
    // The version every member runs, once they agree and nothing is rolling.
    let versions: BTreeSet<&str> = status.members.iter().filter_map(|m| m.version.as_deref()).collect();
    if all_healthy && !rolling && versions.len() == 1 {
        status.observed_version = versions.first().map(|v| v.to_string());
    }
    let phase = if cluster.spec.paused {
        "Paused"
    } else if matches!(step, Step::Wait { reason: "QuorumLost", .. }) {
        "QuorumLost"
    } else if members.is_empty() {
        "Bootstrapping"
    } else if rolling {
        "Upgrading"
    } else if voters.len() != desired || status.members.len() != voters.len() {
        "Scaling"
    } else if all_healthy {
        "Healthy"
    } else {
        "Degraded"
    };
    status.phase = Some(phase.to_string());
    let (reason, message) = match step {
        Step::Wait { reason, message } => (reason.to_string(), message.clone()),
        Step::Idle if all_healthy => ("Healthy".to_string(), format!("{} voting members, all healthy", voters.len())),
        Step::Idle => (phase.to_string(), format!("{healthy_voters} of {} voting members healthy", voters.len())),
        other => (other.reason().to_string(), other.message()),
    };
    let c = &mut status.conditions;
    if valid.is_some() {
        set_condition(
            c,
            ConditionType::Ready,
            all_healthy,
            if all_healthy { "Healthy" } else { &reason },
            &message,
            generation,
        );
    }
    set_condition(
        c,
        ConditionType::Available,
        has_quorum,
        if has_quorum { "QuorumHealthy" } else { "NoQuorum" },
        &format!("{healthy_voters} of {} voting members healthy, quorum {quorum}", voters.len()),
        generation,
    );
    let degraded = !all_healthy && !members.is_empty();
    set_condition(
        c,
        ConditionType::Degraded,
        degraded,
        if degraded { &reason } else { "AsExpected" },
        &message,
        generation,
    );
    let operating = !matches!(step, Step::Idle | Step::Wait { .. });
    match roll.filter(|_| !operating) {
        Some(action) if rolling => {
            set_condition(c, ConditionType::Progressing, true, action.reason(), &action.message(), generation);
        }
        _ => {
            let reason = if operating { step.reason() } else { "Idle" };
            set_condition(c, ConditionType::Progressing, operating, reason, &message, generation);
        }
    }
}
