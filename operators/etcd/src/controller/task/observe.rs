//! What a membership pass reads: the spec's verdict, the member pods, claims and
//! StatefulSet (Kubernetes), and the members' status and alarms (etcd). Nothing here
//! writes.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use statecraft_shared::endpoints::ready_pods;
use statecraft_shared::pods::{PodProblem, ProblemKind, creation_problems, pod_problems, unplaceable};
use statecraft_shared::{Error, Result};

use super::super::reconcile::check;
use super::super::{Context, LEADER_ANNOTATION, upgrade};
use crate::api::EtcdCluster;
use crate::build::statefulset;
use crate::build::{CLIENT_PORT, Names};
use crate::membership::dataplane;
use crate::membership::plan;
use crate::membership::{Observed, PodState};
use crate::validate::ValidSpec;

/// What one pass found.
pub struct Observation {
    pub names: Names,
    /// The spec, when it is valid.
    pub valid: Option<ValidSpec>,
    pub kube: Kube,
    /// The members, as the planner sees them.
    pub observed: Observed,
    /// The leader's member id, if a member leads.
    pub leader: Option<u64>,
    /// A request that a member lead (the leader annotation) not handled yet: its value,
    /// and the ordinal it names (none when it names no member's pod).
    pub leader_request: Option<(String, Option<u32>)>,
}

/// Reads cluster `cluster`'s pods, claims and members.
pub async fn observe(ctx: &Context, cluster: &EtcdCluster) -> Result<Observation> {
    let names = Names::new(cluster.name_any(), &ctx.rt.namespace);
    let valid = check(cluster).ok();
    let kube = observe_kube(ctx, &names).await?;
    let etcd = dataplane::gather(&names, &kube.endpoints).await;
    let observed = Observed {
        members: etcd.members,
        states: etcd.states,
        alarms: etcd.alarms,
        pods: kube.pods.clone(),
        claims: kube.claims.clone(),
        refused: kube
            .problems
            .iter()
            .filter(|p| p.kind == ProblemKind::NotCreated)
            .filter_map(|p| names.ordinal_of(&p.pod))
            .collect(),
        statefulset_replicas: kube
            .statefulset
            .as_ref()
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.replicas)
            .unwrap_or(0)
            .max(0) as u32,
        now: Utc::now(),
    };
    let leader = plan::leader(&observed);
    let handled = cluster.status.as_ref().and_then(|s| s.handled_leader_request.as_deref());
    let leader_request = cluster
        .annotations()
        .get(LEADER_ANNOTATION)
        .filter(|r| Some(r.as_str()) != handled)
        .map(|r| (r.clone(), names.ordinal_of(r)));
    Ok(Observation { names, valid, kube, observed, leader, leader_request })
}

/// What Kubernetes shows of the members: pods by ordinal, claims, and the client URL the
/// operator reaches each running member at (its pod IP: no DNS cache between the operator
/// and a restarted member).
pub struct Kube {
    pub pods: BTreeMap<u32, PodState>,
    pub claims: BTreeSet<u32>,
    pub endpoints: BTreeMap<u32, String>,
    pub pod_ips: BTreeMap<u32, String>,
    pub statefulset: Option<StatefulSet>,
    /// What keeps member pods from running, as Kubernetes says.
    pub problems: Vec<PodProblem>,
    /// The member pods the client Service lists as ready (its EndpointSlices).
    pub served: BTreeSet<String>,
}

async fn observe_kube(ctx: &Context, names: &Names) -> Result<Kube> {
    let rt = &ctx.rt;
    let selector = names.set().selector_query();
    let params = ListParams::default().labels(&selector);
    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let pod_list = pods.list(&params).await.map_err(|e| Error::kube("listing pods", e))?.items;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let claim_list = claims.list(&params).await.map_err(|e| Error::kube("listing claims", e))?.items;
    let statefulsets: Api<StatefulSet> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let statefulset =
        statefulsets.get_opt(&names.statefulset()).await.map_err(|e| Error::kube("reading the StatefulSet", e))?;
    let served = ready_pods(&rt.client, &rt.namespace, &names.client_service()).await?;
    // Pods Kubernetes refuses to create come first: they have no status to explain them.
    let replicas = statefulset.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas).unwrap_or(0);
    let mut problems = creation_problems(&rt.client, &rt.namespace, &names.statefulset(), replicas, &pod_list).await;
    problems.extend(pod_problems(&pod_list));
    let mut out = Kube {
        pods: BTreeMap::new(),
        claims: BTreeSet::new(),
        endpoints: BTreeMap::new(),
        pod_ips: BTreeMap::new(),
        statefulset,
        problems,
        served,
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
        unplaceable: unplaceable(pod),
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
