//! What a clustering pass reads: the spec's verdict, the passwords, the pods, the
//! read-write Service's endpoints and every server's replication state. Nothing here
//! writes.

use std::collections::BTreeSet;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use statecraft_shared::endpoints::{self as service_endpoints, endpoints};
use statecraft_shared::pods::{PodProblem, creation_problems, explain_wait, pod_problems};
use statecraft_shared::reason::Reason;
use statecraft_shared::{Error, Result};

use super::super::certificates::{self, Serving};
use super::super::reconcile::recorded_primary;
use super::super::{Context, SWITCHOVER_ANNOTATION, reseed};
use super::{Memory, RECONFIGURE_BACKOFF};
use crate::api::MySQLCluster;
use crate::build::secret::Passwords;
use crate::build::statefulset::CONTAINER;
use crate::build::{MYSQL_PORT, Names, READS_LABEL, ROLE_LABEL, ordinal_of};
use crate::clustering::dataplane::{DataPlane, Endpoint};
use crate::clustering::decide::{Decision, Operation, decide};
use crate::clustering::observed::Member;
use crate::clustering::observed::{Observed, PodState};
use crate::clustering::pass::{Target, gather};
use crate::clustering::routes::{Listing, closed};
use crate::flavor::sql;
use crate::reason::MySql;
use crate::validate::{ValidSpec, check_version_change, validate};

/// Waits for servers that do not answer, which their pods' own status explains when
/// Kubernetes cannot run them (unschedulable, crash-looping, image not pulled): the wait
/// then carries the pod's reason (and so does its Event and the Ready condition).
const EXPLAINED_BY_PODS: [MySql; 3] =
    [MySql::WaitingForServers, MySql::PrimaryDown, MySql::NotEnoughReplicasForSafeFailover];

/// What one pass found.
pub struct Observation {
    /// The spec, when it is valid and its version change allowed.
    pub valid: Option<ValidSpec>,
    /// Why it is not (reason, message): the reconciler reports it; the servers are still
    /// looked after (a failover cannot wait for a typo to be fixed), but nothing is rolled.
    pub spec_problem: Option<(Reason, String)>,
    pub names: Names,
    /// The operator's connections to the servers.
    pub dp: DataPlane,
    pub pods: Vec<Pod>,
    /// Member pods Kubernetes refuses to create, with its reason.
    pub refused: Vec<PodProblem>,
    /// Each member's pod and addresses, by ordinal.
    pub targets: Vec<Target>,
    /// The servers and the spec, as the decision sees them.
    pub observed: Observed,
    /// The switchover the annotation asks for, handled or not.
    pub request: Option<String>,
    /// The member the switchover request names, when it is new and names one.
    pub switchover_to: Option<u32>,
    /// The members each client Service lists as serving: what Ready promises clients.
    pub services: Services,
    /// What the servers present and trust, with `spec.tls`.
    pub tls: Option<Serving>,
}

/// The members the cluster's two client Services list as serving, from their
/// EndpointSlices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Services {
    /// The read-write Service's (ready, or terminating but still serving).
    pub read_write: BTreeSet<Listing>,
    /// The read-only Service's (ready).
    pub read_only: BTreeSet<Listing>,
}

impl Observation {
    /// The decision, its waits explained by the pods where they can be.
    pub fn decide(&self) -> Decision {
        let mut decision = decide(&self.observed);
        if let Operation::Wait { reason, message } = &mut decision.operation
            && EXPLAINED_BY_PODS.iter().any(|e| *reason == *e)
        {
            let mut problems = self.refused.clone();
            problems.extend(pod_problems(&self.pods));
            explain_wait(reason, message, &problems);
        }
        decision
    }
}

/// Reads cluster `cluster`'s pods and servers; `None` until the reconciler has created the
/// password Secret.
pub async fn observe(ctx: &Context, cluster: &MySQLCluster, memory: &mut Memory) -> Result<Option<Observation>> {
    let rt = &ctx.rt;
    let name = cluster.name_any();
    let observed_version = cluster.status.as_ref().and_then(|s| s.observed_version.clone());
    let checked = validate(&cluster.spec).and_then(|v| match &observed_version {
        Some(observed) => check_version_change(v.spec.flavor, observed, &v.version).map(|()| v),
        None => Ok(v),
    });
    let (valid, spec_problem) = match checked {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some((e.reason(), e.to_string()))),
    };
    let names = Names::new(&name, &rt.namespace);
    let flavor = sql(cluster.spec.flavor);

    let secrets: Api<Secret> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(passwords) = secrets
        .get_opt(&names.secret())
        .await
        .map_err(|e| Error::kube("reading the password Secret", e))?
        .as_ref()
        .and_then(Passwords::from_secret)
    else {
        return Ok(None); // the reconciler creates it
    };
    // With spec.tls, nothing is done until the certificate exists: the reconciler issues
    // it (or reports the user's Secret) before the pods that mount it.
    let tls = match &cluster.spec.tls {
        None => None,
        Some(tls) => match certificates::serving(rt, tls, &names).await? {
            Some(serving) => Some(serving),
            None => return Ok(None),
        },
    };
    let dp = DataPlane::new(flavor, passwords.operator.clone(), passwords.replication.clone())
        .with_tls(tls.as_ref().map(|s| s.client.clone()));

    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let selector = names.set().selector_query();
    let pods =
        pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| Error::kube("listing pods", e))?.items;

    let replicas = if cluster.spec.stopped { 0 } else { crate::autoscale::replicas(cluster).max(0) as u32 };
    let highest = pods.iter().filter_map(|p| ordinal_of(&name, &p.name_any())).max().map_or(0, |o| o + 1);
    let refused =
        creation_problems(&rt.client, &rt.namespace, &names.set().statefulset(), replicas as i32, &pods).await;
    let targets: Vec<Target> = (0..replicas.max(highest))
        .map(|i| target(&names, i, pods.iter().find(|p| p.name_any() == names.pod(i))))
        .collect();

    let status = cluster.status.as_ref();
    let recorded = recorded_primary(cluster);
    let request = cluster.annotations().get(SWITCHOVER_ANNOTATION).cloned();
    let switchover_to = request
        .as_ref()
        .filter(|r| status.and_then(|s| s.handled_switchover.as_ref()) != Some(*r))
        .and_then(|r| ordinal_of(&name, r));

    let services = services(&rt.client, &rt.namespace, &names, &name).await?;
    let read_started = Instant::now();
    let members = gather(&dp, &targets, recorded, &mut memory.streaks).await;
    let restarted = memory.restarts.observe(&members, recorded, read_started..Instant::now());
    let broken_for = memory.broken.observe(&members, recorded, Instant::now());
    let routed = memory.routes.observe(&services.read_write, &closed_pods(&pods, &members, &names), Instant::now());
    let deleting: Vec<String> =
        pods.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).filter_map(|p| p.uid()).collect();
    memory.terminating_since.retain(|uid, _| deleting.contains(uid));
    for uid in deleting {
        memory.terminating_since.entry(uid).or_insert_with(Instant::now);
    }
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
        deposed: status.and_then(|s| s.deposed_primary.as_deref()).and_then(|p| ordinal_of(&name, p)),
        routed,
    };
    Ok(Some(Observation {
        valid,
        spec_problem,
        names,
        dp,
        pods,
        refused,
        targets,
        observed,
        request,
        switchover_to,
        services,
        tls,
    }))
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
        reads_label: pod.is_some_and(|p| p.labels().get(READS_LABEL).is_some_and(|v| v == "true")),
        endpoint: Endpoint { host: ip.unwrap_or_default(), port: MYSQL_PORT as u16 },
        address,
    }
}

/// The pods of members that can serve nobody any more ([`closed`]), with their uids.
fn closed_pods(pods: &[Pod], members: &[Member], names: &Names) -> BTreeSet<Listing> {
    members
        .iter()
        .filter_map(|m| {
            let pod = pods.iter().find(|p| p.name_any() == names.pod(m.ordinal))?;
            let terminated = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == CONTAINER))
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.terminated.is_some());
            closed(&m.pod, terminated, &m.server).then(|| (m.ordinal, pod.uid().unwrap_or_default()))
        })
        .collect()
}

/// The members' pods the client Services' EndpointSlices list as serving: for the
/// read-write Service, ready or terminating but still serving (kube-proxy falls back to
/// those); for the read-only one, ready. One list call for both, read before the servers
/// so that a server seen after its endpoint is not missed.
async fn services(client: &kube::Client, namespace: &str, names: &Names, name: &str) -> Result<Services> {
    let (read_write, read_only) = (names.read_write_service(), names.read_only_service());
    let mut by_service = endpoints(client, namespace, &[&read_write, &read_only]).await?;
    let mut listed = |service: &str, serving: fn(&service_endpoints::Endpoint) -> bool| -> BTreeSet<Listing> {
        by_service
            .remove(service)
            .unwrap_or_default()
            .into_iter()
            .filter(serving)
            .filter_map(|e| Some((ordinal_of(name, &e.pod)?, e.uid)))
            .collect()
    };
    let read_write = listed(&read_write, service_endpoints::Endpoint::is_serving);
    Ok(Services { read_write, read_only: listed(&read_only, service_endpoints::Endpoint::is_ready) })
}
