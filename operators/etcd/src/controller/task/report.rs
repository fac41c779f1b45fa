//! What a membership pass reports: the members' metrics, abnormalities found in their own
//! metrics, the newest backup, and the status (members, leader, phase, conditions).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::{Api, ResourceExt};
use statecraft_shared::reason::{Common, Reason};
use statecraft_shared::status::{ConditionType, set_condition};
use statecraft_shared::upgrade::Action;
use statecraft_shared::{Error, Result};
use tracing::warn;

use super::super::Context;
use super::Memory;
use super::observe::{Kube, Observation};
use crate::api::{EtcdBackup, EtcdCluster, EtcdClusterStatus, MemberStatus};
use crate::build::{METRICS_PORT, Names};
use crate::insight::{self, Detector};
use crate::membership::Observed;
use crate::membership::plan::{self, Step};
use crate::reason::Etcd;
use crate::validate::ValidSpec;

/// Time between scrapes of the members' own metrics (abnormality detection).
const SCRAPE_INTERVAL: Duration = Duration::from_secs(10);

/// Reports the pass (see the module doc) into `status`.
pub async fn report(
    ctx: &Context,
    cluster: &EtcdCluster,
    o: &Observation,
    step: &Step,
    roll: Option<&Action>,
    memory: &mut Memory,
    status: &mut EtcdClusterStatus,
) -> Result<()> {
    let names = &o.names;
    let name = &names.cluster;
    ctx.metrics.observe(name, names, &o.observed, o.leader);
    if memory.last_scrape.is_none_or(|t| t.elapsed() >= SCRAPE_INTERVAL) {
        memory.last_scrape = Some(Instant::now());
        detect_abnormalities(ctx, cluster, names, &o.kube, &mut memory.detector).await;
    }
    if let Some((backup, completed)) = last_backup(ctx, name).await? {
        ctx.metrics.backup_seen(name, completed);
        status.last_backup = Some(backup);
    }
    fill_status(status, cluster, names, &o.observed, &o.kube.served, step, o.valid.as_ref(), roll);
    if let Some(phase) = &status.phase {
        ctx.metrics.set_phase(name, phase);
    }
    Ok(())
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

/// The newest succeeded EtcdBackup of the cluster and its completion (Unix seconds).
async fn last_backup(ctx: &Context, cluster: &str) -> Result<Option<(String, i64)>> {
    let rt = &ctx.rt;
    let backups: Api<EtcdBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let list = backups.list(&ListParams::default()).await.map_err(|e| Error::kube("listing EtcdBackups", e))?;
    Ok(list
        .items
        .iter()
        .filter(|b| b.spec.backup.cluster_name == cluster)
        .filter_map(|b| {
            let status = b.status.as_ref().map(|s| &s.common).filter(|s| s.succeeded())?;
            let completed = chrono::DateTime::parse_from_rfc3339(status.completion_time.as_deref()?).ok()?;
            Some((b.name_any(), completed.timestamp()))
        })
        .max_by_key(|(_, t)| *t))
}

// What one pass saw, each part as the status needs it: bundling them would only rename them.
#[allow(clippy::too_many_arguments)]
fn fill_status(
    status: &mut EtcdClusterStatus,
    cluster: &EtcdCluster,
    names: &Names,
    o: &Observed,
    served: &BTreeSet<String>,
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
    status.replicas = Some(i32::try_from(voters.len()).unwrap_or(i32::MAX));
    status.selector = Some(names.set().selector_query());
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
    // The phase is also the Ready and Degraded reason of an idle pass.
    let phase: Reason = if cluster.spec.paused {
        Common::Paused.into()
    } else if matches!(step, Step::Wait { reason, .. } if *reason == Etcd::QuorumLost) {
        Etcd::QuorumLost.into()
    } else if members.is_empty() && status.cluster_id.is_none() {
        Etcd::Bootstrapping.into()
    } else if members.is_empty() {
        // No member answers a cluster that ran before (it has a cluster id): it has lost its
        // quorum, whatever the planner waits for (a lone member's pod starting again), and
        // alerts that spare a bootstrapping cluster must not spare it.
        Etcd::QuorumLost.into()
    } else if rolling {
        Etcd::Upgrading.into()
    } else if voters.len() != desired || status.members.len() != voters.len() {
        Etcd::Scaling.into()
    } else if all_healthy {
        Common::Healthy.into()
    } else {
        Common::Degraded.into()
    };
    status.phase = Some(phase.to_string());
    let (reason, message) = match step {
        Step::Wait { reason, message } => (*reason, message.clone()),
        Step::Idle if all_healthy => (Common::Healthy.into(), format!("{} voting members, all healthy", voters.len())),
        Step::Idle => (phase, format!("{healthy_voters} of {} voting members healthy", voters.len())),
        other => (other.reason(), other.message()),
    };
    let c = &mut status.conditions;
    // Ready promises clients the client Service: healthy members it does not list yet (the
    // first seconds after creation) are not ready for them.
    let unserved = all_healthy && served.is_empty();
    if valid.is_some() && unserved {
        let why = format!("Service {} lists no member yet", names.client_service());
        set_condition(c, ConditionType::Ready, false, Etcd::ServiceWithoutEndpoints, &why, generation);
    } else if valid.is_some() {
        set_condition(
            c,
            ConditionType::Ready,
            all_healthy,
            if all_healthy { Common::Healthy.into() } else { reason },
            &message,
            generation,
        );
    }
    set_condition(
        c,
        ConditionType::Available,
        has_quorum,
        if has_quorum { Etcd::QuorumHealthy } else { Etcd::NoQuorum },
        &format!("{healthy_voters} of {} voting members healthy, quorum {quorum}", voters.len()),
        generation,
    );
    let degraded = !all_healthy && !members.is_empty();
    set_condition(
        c,
        ConditionType::Degraded,
        degraded,
        if degraded { reason } else { Common::AsExpected.into() },
        &message,
        generation,
    );
    let operating = !matches!(step, Step::Idle | Step::Wait { .. });
    match roll.filter(|_| !operating) {
        Some(action) if rolling => {
            set_condition(c, ConditionType::Progressing, true, action.reason(), &action.message(), generation);
        }
        _ => {
            let reason = if operating { step.reason() } else { Common::Idle.into() };
            set_condition(c, ConditionType::Progressing, operating, reason, &message, generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No member answering is a new cluster only if none ever answered: a cluster with a
    /// cluster id whose members are all down (one member whose pod restarts, say) has lost
    /// its quorum (seen with promtool: EtcdClusterQuorumLost and EtcdMemberDown stayed quiet
    /// for a one-member cluster whose member was down).
    #[test]
    fn no_member_answering_is_bootstrapping_only_for_a_cluster_that_never_ran() {
        let mut spec = crate::validate::tests::spec();
        spec.replicas = 1;
        let cluster = EtcdCluster::new("e", spec);
        let names = Names::new("e", "ns");
        let nobody = Observed::default();
        let step = Step::Wait { reason: Etcd::MemberStarting.into(), message: "e-0 is starting".into() };
        let mut fresh = EtcdClusterStatus::default();
        fill_status(&mut fresh, &cluster, &names, &nobody, &BTreeSet::new(), &step, None, None);
        assert_eq!(fresh.phase.as_deref(), Some("Bootstrapping"));
        let mut ran = EtcdClusterStatus { cluster_id: Some("5f1c2a3b".into()), ..EtcdClusterStatus::default() };
        fill_status(&mut ran, &cluster, &names, &nobody, &BTreeSet::new(), &step, None, None);
        assert_eq!(ran.phase.as_deref(), Some("QuorumLost"));
    }

    /// Ready means a client of the Service reaches a member: a healthy one-member cluster
    /// is not Ready until the client Service lists its pod.
    #[test]
    fn a_healthy_cluster_is_ready_only_once_its_client_service_lists_a_member() {
        use crate::membership::{Member, MemberState};
        let mut spec = crate::validate::tests::spec();
        spec.replicas = 1;
        let cluster = EtcdCluster::new("e", spec.clone());
        let names = Names::new("e", "ns");
        let valid = crate::validate::validate(&spec).expect("a valid spec");
        let member = Member { id: 7, ordinal: Some(0), name: "e-0".into(), peer_urls: vec![], is_learner: false };
        let mut o = Observed { members: Some(vec![member]), ..Observed::default() };
        o.states.insert(7, MemberState { id: 7, leader: 7, version: "3.6.16".into(), ..MemberState::default() });
        let ready = |served: &[&str]| {
            let mut status = EtcdClusterStatus::default();
            let served = served.iter().map(|s| s.to_string()).collect();
            fill_status(&mut status, &cluster, &names, &o, &served, &Step::Idle, Some(&valid), None);
            let c = status.conditions.iter().find(|c| c.type_ == "Ready").cloned().expect("a Ready condition");
            (status.phase, c.status, c.reason)
        };
        let healthy = Some("Healthy".to_string());
        assert_eq!(ready(&[]), (healthy.clone(), "False".into(), "ServiceWithoutEndpoints".into()));
        assert_eq!(ready(&["e-0"]), (healthy, "True".into(), "Healthy".into()));
    }
}
