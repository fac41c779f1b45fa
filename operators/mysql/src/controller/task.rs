//! The clustering task of one cluster: every second, and at once when woken or after an
//! operation, it gathers the pods and the servers, decides (pure), performs at most one
//! operation, and writes the status. It is the only writer of the status of a valid cluster
//! and of the pods' role labels, so those never race.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use statecraft_shared::pods::{explain_wait, pod_problems};
use statecraft_shared::status::{ConditionType, patch_status, set_condition};
use statecraft_shared::tasks::Wake;
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::upgrade::{Action, next_step};
use statecraft_shared::{Error, Result};
use tracing::{info, warn};

use super::reconcile::recorded_primary;
use super::upgrade::{self, Gates};
use super::{Context, SWITCHOVER_ANNOTATION};
use super::{acks, backup, reseed, scaling, scheduled};
use crate::api::{MemberStatus, MySQLCluster, MySQLClusterStatus, UpgradeStrategyType};
use crate::build::secret::Passwords;
use crate::build::{MYSQL_PORT, Names, ROLE_LABEL, ordinal_of};
use crate::clustering::acks::{Acknowledgements, judge};
use crate::clustering::dataplane::{DataPlane, Endpoint};
use crate::clustering::decide::{Decision, Health, Operation, Role, decide};
use crate::clustering::heal::BrokenClock;
use crate::clustering::observed::{Member, Observed, PodState};
use crate::clustering::pass::{Effect, Streaks, Target, gather, perform};
use crate::clustering::restarts::Restarts;
use crate::clustering::routes::Routes;
use crate::flavor::sql;
use crate::validate::{check_version_change, validate};

/// Time between passes when nothing happened.
pub const PASS_INTERVAL: Duration = Duration::from_secs(1);

/// What a pass asks of the loop.
enum Next {
    /// Run again at once (an operation was performed).
    Now,
    /// Run after the interval.
    Later,
    /// The cluster is gone: stop.
    Stop,
}

/// What the task remembers between passes.
#[derive(Default)]
struct Memory {
    streaks: Streaks,
    /// Since when each replica's replication has been broken (for `spec.autoHeal`).
    broken: BrokenClock,
    /// The last backup slot handled by the schedule.
    backup_slot: Option<chrono::DateTime<Utc>>,
    /// The last wait reason published as an Event, so a long wait is one Event, not one a
    /// second.
    last_wait: Option<&'static str>,
    /// Each member's recent behaviour, for abnormality detection.
    insight: crate::insight::Monitor,
    /// When each `(replica, source)` pair was last configured (for [`RECONFIGURE_BACKOFF`]).
    configured: BTreeMap<(u32, u32), Instant>,
    /// Read-replica auto-scaling's running case.
    scaler: scaling::Scaler,
    /// The primary's acknowledgements as last reported (Events only on a change).
    acks: Option<Acknowledgements>,
    /// Replicas that restarted and have not caught up since (a failover does not count them).
    restarts: Restarts,
    /// When each member was last listed by the read-write Service's EndpointSlices.
    routes: Routes,
}

/// How long a replica just configured is given before it is configured again, if it still
/// does not replicate: long enough for a connection attempt, short next to a failover.
const RECONFIGURE_BACKOFF: Duration = Duration::from_secs(5);

/// Waits for servers that do not answer, which their pods' own status explains when
/// Kubernetes cannot run them (unschedulable, crash-looping, image not pulled): the wait
/// then carries the pod's reason (and so does its Event and the Ready condition).
const EXPLAINED_BY_PODS: &[&str] = &["WaitingForServers", "PrimaryDown", "NotEnoughReplicasForSafeFailover"];

/// Runs the task of cluster `name` (with `uid`) until cancelled or the cluster is gone (then
/// it returns and the registry forgets it). A panic is restarted by the supervisor of
/// `statecraft_shared::tasks`, with fresh memory, as after an operator restart.
pub async fn run(ctx: Arc<Context>, name: String, uid: String, wake: Wake, cancel: CancellationToken) {
    info!(cluster = %name, "clustering task started");
    let mut memory = Memory::default();
    loop {
        let delay = match pass(&ctx, &name, &uid, &mut memory).await {
            Ok(Next::Now) => Duration::ZERO,
            Ok(Next::Later) => PASS_INTERVAL,
            Ok(Next::Stop) => break,
            Err(e) => {
                warn!(cluster = %name, error = %e, "clustering pass failed");
                PASS_INTERVAL
            }
        };
        tokio::select! {
            () = cancel.cancelled() => break,
            () = wake.woken() => {}
            () = tokio::time::sleep(delay) => {}
        }
    }
    info!(cluster = %name, "clustering task stopped");
}

async fn pass(ctx: &Context, name: &str, uid: &str, memory: &mut Memory) -> Result<Next> {
    let rt = &ctx.rt;
    let api: Api<MySQLCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(cluster) = api.get_opt(name).await.map_err(|e| Error::kube("reading the cluster", e))? else {
        ctx.servers.forget(name);
        return Ok(Next::Stop);
    };
    if cluster.metadata.uid.as_deref() != Some(uid) || cluster.metadata.deletion_timestamp.is_some() {
        return Ok(Next::Stop);
    }
    // An invalid spec or a refused version change is the reconciler's to report, and it
    // applies nothing new; the servers are still looked after (a failover cannot wait for a
    // typo to be fixed), but nothing is rolled.
    let observed_version = cluster.status.as_ref().and_then(|s| s.observed_version.clone());
    let checked = validate(&cluster.spec).and_then(|v| match &observed_version {
        Some(observed) => check_version_change(v.spec.flavor, observed, &v.version).map(|()| v),
        None => Ok(v),
    });
    let (valid, spec_problem) = match checked {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some((e.reason(), e.to_string()))),
    };
    let names = Names::new(name, &rt.namespace);
    let flavor = sql(cluster.spec.flavor);

    let secrets: Api<Secret> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(passwords) = secrets
        .get_opt(&names.secret())
        .await
        .map_err(|e| Error::kube("reading the password Secret", e))?
        .as_ref()
        .and_then(Passwords::from_secret)
    else {
        return Ok(Next::Later); // the reconciler creates it
    };
    let dp = DataPlane::new(flavor, passwords.operator.clone(), passwords.replication.clone());

    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let selector = names.selector_labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let pod_list =
        pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| Error::kube("listing pods", e))?;

    let replicas = if cluster.spec.stopped { 0 } else { crate::autoscale::replicas(&cluster).max(0) as u32 };
    let highest = pod_list.items.iter().filter_map(|p| ordinal_of(name, &p.name_any())).max().map_or(0, |o| o + 1);
    let targets: Vec<Target> = (0..replicas.max(highest))
        .map(|i| target(&names, i, pod_list.items.iter().find(|p| p.name_any() == names.pod(i))))
        .collect();

    let status = cluster.status.clone().unwrap_or_default();
    let recorded = recorded_primary(&cluster);
    let request = cluster.annotations().get(SWITCHOVER_ANNOTATION).cloned();
    let switchover_to =
        request.as_ref().filter(|r| status.handled_switchover.as_ref() != Some(*r)).and_then(|r| ordinal_of(name, r));

    let listed = routed(&rt.client, &rt.namespace, &names, name).await?;
    let read_started = Instant::now();
    let members = gather(&dp, &targets, recorded, &mut memory.streaks).await;
    let restarted = memory.restarts.observe(&members, recorded, read_started..Instant::now());
    let broken_for = memory.broken.observe(&members, recorded, Instant::now());
    let observed = Observed {
        replicas,
        paused: cluster.spec.paused,
        semi_sync: cluster.spec.semi_sync.enabled,
        ack_count: dp.ack_count(replicas),
        recorded_primary: recorded,
        switchover_to,
        members,
        heal: reseed::healing(&cluster.spec, broken_for),
        recently_configured: {
            memory.configured.retain(|_, at| at.elapsed() < RECONFIGURE_BACKOFF);
            memory.configured.keys().copied().collect()
        },
        restarted,
        deposed: status.deposed_primary.as_deref().and_then(|p| ordinal_of(name, p)),
        routed: memory.routes.observe(&listed, Instant::now()),
    };
    let mut decision = decide(&observed);
    if let Operation::Wait { reason, message } = &mut decision.operation
        && EXPLAINED_BY_PODS.contains(reason)
    {
        explain_wait(reason, message, &pod_problems(&pod_list.items));
    }
    ctx.servers.observe(name, &observed, &decision);

    let mut new_status = status.clone();
    let mut next = Next::Later;
    let op = &decision.operation;
    match op {
        Operation::Nothing => memory.last_wait = None,
        Operation::Wait { reason, message } => {
            if memory.last_wait != Some(*reason) {
                rt.events.warning(&cluster, reason, "Wait", message.clone()).await;
                memory.last_wait = Some(reason);
            }
        }
        _ => {
            memory.last_wait = None;
            let (reason, note) = describe(op, &names);
            info!(cluster = %name, operation = ?op, "clustering operation");
            // Data-plane operations are the leader's alone: not after a pause past the Lease.
            rt.leadership.check()?;
            let started = Instant::now();
            let result = perform(&dp, op, &observed, &targets, observed.ack_count).await;
            info!(cluster = %name, ms = started.elapsed().as_millis() as u64, ok = result.is_ok(), "clustering operation performed");
            ctx.servers.operation(name, op, result.is_ok());
            match result {
                Ok(effect) => {
                    match member_of(op) {
                        Some(m) => {
                            rt.events.normal_about_pod(&cluster, &names.pod(m), reason, "Clustering", note).await
                        }
                        None => rt.events.normal(&cluster, reason, "Clustering", note).await,
                    }
                    // A pause may have fallen in the middle of the operation.
                    rt.leadership.check()?;
                    apply_effect(&pods, &names, effect, &mut new_status).await?;
                    if let (Operation::Switchover { .. }, Some(r)) = (op, &request) {
                        new_status.handled_switchover = Some(r.clone());
                    }
                    if let Operation::ConfigureReplica { ordinal, source } = op {
                        memory.configured.insert((*ordinal, *source), Instant::now());
                    }
                    if let Operation::Reseed { ordinal, why } = op {
                        reseed::started(&mut new_status, &names, *ordinal, why);
                    }
                    next = Next::Now;
                }
                Err(e) => {
                    rt.events.warning(&cluster, reason, "Clustering", format!("{note} failed: {e}")).await;
                    warn!(cluster = %name, error = %e, "clustering operation failed");
                }
            }
        }
    }
    // A switchover request naming the current primary, or nothing valid, is done at once.
    if let Some(r) = &request
        && switchover_to.is_none()
        && new_status.handled_switchover.as_ref() != Some(r)
    {
        new_status.handled_switchover = Some(r.clone());
    }
    if let Some(done) = reseed::finished(&mut new_status, &names, &decision) {
        let note = format!("{} was re-seeded ({}) and serves again", done.member, done.reason);
        rt.events.normal(&cluster, reseed::RESEEDED, "Clustering", note).await;
    }

    // A new revision of the StatefulSet is rolled only when the clustering has nothing to do.
    let mut roll = None;
    if decision.operation == Operation::Nothing
        && valid.is_some()
        && !cluster.spec.paused
        && replicas > 0
        && cluster.spec.upgrade_strategy.type_ == UpgradeStrategyType::ReplicasFirst
    {
        let mut gates = Gates {
            decision: &decision,
            observed: &observed,
            targets: &targets,
            dp: &dp,
            cluster: name,
            backup_running: None,
            new_primary: Mutex::new(None),
        };
        match roll_step(ctx, &cluster, &pod_list.items, &mut gates, recorded, &mut new_status).await {
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

    // Scheduled backups need a valid spec and a cluster that can serve a dump.
    if valid.is_some()
        && !cluster.spec.paused
        && matches!(decision.health, Health::Healthy | Health::Degraded)
        && let Err(e) = scheduled::run(ctx, &cluster, &mut memory.backup_slot).await
    {
        warn!(cluster = %name, error = %e, "scheduled backup or retention failed");
        rt.events.warning(&cluster, e.reason(), "Schedule", format!("scheduled backup or retention failed: {e}")).await;
    }

    // Auto-scaling judges a valid spec only (the bounds come from it).
    if valid.is_some() {
        let rolling = roll.as_ref().is_some_and(|a| *a != Action::Done);
        if memory.scaler.pass(ctx, &cluster, &observed, &decision, rolling, &mut new_status).await {
            next = Next::Now;
        }
    }

    let version = valid.as_ref().map(|v| v.version.to_string());
    fill_status(&mut new_status, &cluster, &names, &observed, &decision, version.as_deref(), roll.as_ref());
    memory.insight.observe(ctx, &cluster, &observed, &mut new_status).await;
    acks::report(ctx, &cluster, judge(&observed, &decision), &mut memory.acks, &mut new_status).await;
    // The reconciler's verdict on the spec stands: Ready stays False until it is fixed.
    if let Some((reason, message)) = spec_problem {
        set_condition(
            &mut new_status.conditions,
            ConditionType::Ready,
            false,
            reason,
            &message,
            cluster.metadata.generation,
        );
    }
    // What this pass saw is written only by a replica that still leads.
    rt.leadership.check()?;
    patch_status(&api, &cluster, cluster.status.as_ref(), &new_status, rt.field_manager).await?;
    Ok(next)
}

/// One step of the rolling upgrade: returns the engine's action (for the Progressing
/// condition) and whether to run the next pass at once.
async fn roll_step(
    ctx: &Context,
    cluster: &MySQLCluster,
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
    let names = Names::new(&name, &rt.namespace);
    let moved = gates.new_primary.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = moved {
        status.current_primary = Some(names.pod(p));
        rt.events
            .normal(cluster, "Switchover", "Upgrade", format!("primary moved to {} before its restart", names.pod(p)))
            .await;
    }
    if let Action::Restart { member } = &step.action {
        rt.leadership.check()?;
        let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
        pods.delete(member, &Default::default()).await.map_err(|e| Error::kube(format!("deleting pod {member}"), e))?;
        let note = format!("restarting {member} on the new revision");
        rt.events.normal_about_pod(cluster, member, "RestartMember", "Upgrade", note).await;
    }
    let again = matches!(step.action, Action::Replan { .. } | Action::Restart { .. }) || moved.is_some();
    progress.advance(&step, Utc::now());
    status.upgrade = Some(progress);
    Ok(Some((step.action, again)))
}

fn target(names: &Names, ordinal: u32, pod: Option<&Pod>) -> Target {
    let state = match pod {
        None => PodState::Missing,
        Some(p) if p.metadata.deletion_timestamp.is_some() => PodState::Terminating,
        Some(p) => {
            let st = p.status.as_ref();
            let running =
                st.and_then(|s| s.phase.as_deref()) == Some("Running") && st.and_then(|s| s.pod_ip.as_ref()).is_some();
            let ready = st
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if running { PodState::Running { ready } } else { PodState::Pending }
        }
    };
    let ip = pod.and_then(|p| p.status.as_ref()).and_then(|s| s.pod_ip.clone()).filter(|ip| !ip.is_empty());
    // Replicas are pointed at the source's pod IP, not its DNS name: when a server restarts
    // with a new IP, a replica resolving the name in the seconds DNS still holds the old
    // address hangs in one connect attempt for up to slave_net_timeout (60 s; seen in e2e
    // as writes stalled behind semi-sync). With IPs the changed address is observed and the
    // replicas are re-pointed in the next pass.
    let address = (ip.clone().unwrap_or_else(|| names.pod_host(ordinal)), MYSQL_PORT as u16);
    Target {
        ordinal,
        pod: state,
        role_label: pod.and_then(|p| p.labels().get(ROLE_LABEL).cloned()),
        endpoint: Endpoint { host: ip.unwrap_or_default(), port: MYSQL_PORT as u16 },
        address,
    }
}

/// Event reason and note of an operation.
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

fn describe(op: &Operation, names: &Names) -> (&'static str, String) {
    match op {
        Operation::Bootstrap { primary } => ("Bootstrap", format!("{} is the first primary", names.pod(*primary))),
        Operation::MakeWritable { ordinal } => {
            ("PrimaryWritable", format!("{} now accepts writes", names.pod(*ordinal)))
        }
        Operation::Demote { ordinal } => {
            ("Demote", format!("{} was writable but is not the primary: made read-only", names.pod(*ordinal)))
        }
        Operation::ConfigureReplica { ordinal, source } => {
            ("ConfigureReplica", format!("{} replicates from {}", names.pod(*ordinal), names.pod(*source)))
        }
        Operation::Fence { ordinals } => (
            "Fence",
            format!(
                "stopped the receivers of {} so the unreachable primary gets no acknowledgement",
                ordinals.iter().map(|i| names.pod(*i)).collect::<Vec<_>>().join(", ")
            ),
        ),
        Operation::Promote { ordinal, from, received } => (
            "Failover",
            format!("{} replaces {} as primary (applied {received})", names.pod(*ordinal), names.pod(*from)),
        ),
        Operation::Switchover { from, to } => {
            ("Switchover", format!("primary moves from {} to {}", names.pod(*from), names.pod(*to)))
        }
        Operation::Reseed { ordinal, why } => (
            "Reseed",
            format!(
                "re-seeding {}: {}; its volume {} and pod are deleted and the new, empty server copies the primary's data through replication",
                names.pod(*ordinal),
                why.describe(),
                names.data_claim(*ordinal)
            ),
        ),
        Operation::Relabel { changes } => (
            "Relabel",
            changes
                .iter()
                .map(|(i, r)| format!("{}={}", names.pod(*i), r.map_or("none", Role::label)))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Operation::Nothing | Operation::Wait { .. } => ("Nothing", String::new()),
    }
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
        Effect::Relabel(changes) => {
            for (i, role) in changes {
                let body = serde_json::json!({"metadata": {"labels": {ROLE_LABEL: role.map(Role::label)}}});
                pods.patch(&names.pod(i), &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map_err(|e| Error::kube(format!("labelling pod {}", names.pod(i)), e))?;
            }
        }
    }
    Ok(())
}

fn fill_status(
    status: &mut MySQLClusterStatus,
    cluster: &MySQLCluster,
    names: &Names,
    o: &Observed,
    d: &Decision,
    version: Option<&str>,
    roll: Option<&Action>,
) {
    let generation = cluster.metadata.generation;
    let primary_ok = d.verdicts.iter().any(|v| v.role == Some(Role::Primary) && v.healthy);
    status.phase = Some(d.health.as_str().to_string());
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
    let reason = wait_reason.unwrap_or(d.health.as_str());
    let message = if wait_message.is_empty() { format!("cluster is {}", d.health.as_str()) } else { wait_message };
    set_condition(c, ConditionType::Ready, healthy, reason, &message, generation);
    set_condition(
        c,
        ConditionType::Available,
        primary_ok,
        if primary_ok { "PrimaryWritable" } else { "NoWritablePrimary" },
        &message,
        generation,
    );
    let degraded = matches!(d.health, Health::Degraded | Health::Failed | Health::Lost);
    set_condition(
        c,
        ConditionType::Degraded,
        degraded,
        if degraded { reason } else { "AsExpected" },
        &message,
        generation,
    );
    let operating = !matches!(d.operation, Operation::Nothing | Operation::Wait { .. });
    match roll.filter(|_| !operating) {
        Some(action) if rolling => {
            set_condition(c, ConditionType::Progressing, true, action.reason(), &action.message(), generation);
        }
        // A re-seeded replica rebuilding: no operation of its own, but progress all the same.
        _ if !operating && let Some(r) = &status.reseeding => {
            set_condition(c, ConditionType::Progressing, true, reseed::RESEEDING, &reseed::message(r), generation);
        }
        _ => {
            set_condition(
                c,
                ConditionType::Progressing,
                operating,
                if operating { describe(&d.operation, names).0 } else { "Idle" },
                &message,
                generation,
            );
        }
    }
}

/// The members the read-write Service's EndpointSlices list as serving (ready, or
/// terminating but still serving: kube-proxy falls back to those), read before the servers
/// so that a server seen after its endpoint is not missed.
async fn routed(client: &kube::Client, namespace: &str, names: &Names, name: &str) -> Result<BTreeSet<u32>> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let selector = format!("kubernetes.io/service-name={}", names.read_write_service());
    let list = slices
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::kube("listing the read-write Service's EndpointSlices", e))?;
    Ok(list
        .items
        .iter()
        .flat_map(|slice| &slice.endpoints)
        .filter(|e| e.conditions.as_ref().is_none_or(|c| c.serving.or(c.ready) != Some(false)))
        .filter_map(|e| ordinal_of(name, e.target_ref.as_ref()?.name.as_deref()?))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clustering::fixtures::{cluster, primary, replica};

    fn filled(o: &Observed, status: &mut MySQLClusterStatus) {
        let mysql = MySQLCluster::new("db", crate::validate::tests::spec());
        fill_status(status, &mysql, &Names::new("db", "ns"), o, &decide(o), None, None);
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
