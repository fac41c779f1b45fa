//! What a pass reads: the spec's verdict, the node pods and the StatefulSets' target revisions
//! (Kubernetes), and the quorum, the broker registrations, the partitions and the cluster-wide
//! configuration (Kafka, through the admin client). Nothing here writes.
//!
//! The quorum is asked of a controller directly, so the roll's quorum gate works while every
//! broker is down; everything else is asked of a broker. Both are reached at a pod IP, so no
//! DNS cache stands between the operator and a restarted node.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use statecraft_shared::endpoints::ready_pods;
use statecraft_shared::pods::{PodProblem, creation_problems, pod_problems};
use statecraft_shared::statefulset::{NAME_LABEL, ordinal_of};
use statecraft_shared::{Error, Result};
use tracing::debug;

use super::super::Context;
use super::super::reconcile::check;
use crate::admin::Admin;
use crate::api::cluster::CONTROLLER_PORT;
use crate::api::{KafkaCluster, NodeRole};
use crate::build;
use crate::build::statefulset::CONTAINER;
use crate::names::{APP_NAME, Names};
use crate::nodes;
use crate::observed::{Cluster, Config, ConfigResource, Features, Quorum, Topic};
use crate::validate::{Layout, ValidCluster};

/// How long one admin call may take before the pass gives up on that node.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The pod label with the StatefulSet revision a pod was created from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// What one pass found.
pub struct Observation {
    /// The spec, when it is valid.
    pub valid: Option<ValidCluster>,
    /// The node pods, by node id.
    pub pods: BTreeMap<i32, NodePod>,
    /// Every node the spec's layout has, by node id, with its pool and pod name (none when
    /// the spec is invalid): a node whose pod is gone is still a node.
    pub expected: BTreeMap<i32, (Pool, String)>,
    /// The revision each pool's pods should run (its StatefulSet's `status.updateRevision`).
    pub targets: BTreeMap<Pool, String>,
    /// What keeps node pods from running, as Kubernetes says.
    pub problems: Vec<PodProblem>,
    /// What Kafka says.
    pub kafka: Kafka,
    /// The broker pods the bootstrap Service lists as ready (its EndpointSlices).
    pub served: BTreeSet<String>,
}

/// A pool, as an ordered key (NodeRole is not `Ord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pool {
    /// The controllers' StatefulSet.
    Controller,
    /// The brokers' StatefulSet.
    Broker,
    /// The combined nodes' StatefulSet.
    Combined,
}

impl Pool {
    /// The node role of the pool's pods.
    pub fn role(self) -> NodeRole {
        match self {
            Pool::Controller => NodeRole::Controller,
            Pool::Broker => NodeRole::Broker,
            Pool::Combined => NodeRole::Combined,
        }
    }

    /// Every pool.
    pub const ALL: [Pool; 3] = [Pool::Controller, Pool::Broker, Pool::Combined];
}

/// One node's pod as the task sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePod {
    /// Pod name.
    pub name: String,
    /// Its pool.
    pub pool: Pool,
    /// Kafka node id (from the ordinal, see `crate::nodes`).
    pub id: i32,
    /// Being deleted.
    pub terminating: bool,
    /// The Kafka container is running and its own readiness probe passes (the port answers).
    pub container_ready: bool,
    /// The pod's readiness gate (`build::RUNNING_CONDITION`) is True.
    pub gate: bool,
    /// Its pod IP, once it has one.
    pub ip: Option<String>,
    /// Its revision label.
    pub revision: Option<String>,
}

/// What Kafka said this pass; each part is `None` when no node answered for it.
#[derive(Debug, Clone, Default)]
pub struct Kafka {
    /// DescribeQuorum, from a controller.
    pub quorum: Option<Quorum>,
    /// The controller's `controller.quorum.fetch.timeout.ms`, read live.
    pub fetch_timeout_ms: Option<i64>,
    /// DescribeCluster (fenced brokers included), from a broker.
    pub cluster: Option<Cluster>,
    /// Every topic and its partitions, from a broker.
    pub topics: Option<Vec<Topic>>,
    /// Effective min.insync.replicas per topic.
    pub min_isr: BTreeMap<String, i32>,
    /// The cluster-wide dynamic configuration (`BROKER ""`), from a broker.
    pub cluster_default: Option<Config>,
    /// Partition reassignments in progress.
    pub reassignments: Option<usize>,
    /// Finalized features (metadata.version) and what the answering broker supports.
    pub features: Option<Features>,
    /// Why a part is missing (a node that did not answer), for the log and status.
    pub errors: Vec<String>,
}

/// Reads cluster `cluster`'s pods and nodes.
pub async fn observe(ctx: &Context, cluster: &KafkaCluster) -> Result<Observation> {
    let valid = check(cluster).ok();
    let name = cluster.name_any();
    let rt = &ctx.rt;
    let names = Names::new(name.clone(), rt.namespace.clone());
    let selector = format!("{NAME_LABEL}={APP_NAME},{}={name}", build::CLUSTER_LABEL);
    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let pod_list =
        pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| Error::kube("listing pods", e))?;
    let statefulsets: Api<StatefulSet> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let mut targets = BTreeMap::new();
    // Pods Kubernetes refuses to create come first: they have no status to explain them.
    let mut problems = Vec::new();
    for pool in Pool::ALL {
        let sts_name = names.pool_name(pool.role());
        let sts = statefulsets.get_opt(sts_name).await.map_err(|e| Error::kube("reading a StatefulSet", e))?;
        let replicas = sts.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas).unwrap_or(0);
        problems.extend(creation_problems(&rt.client, &rt.namespace, sts_name, replicas, &pod_list.items).await);
        if let Some(revision) = sts.and_then(|s| s.status).and_then(|s| s.update_revision) {
            targets.insert(pool, revision);
        }
    }
    let mut nodes = BTreeMap::new();
    for pod in &pod_list.items {
        if let Some(node) = node_pod(&names, pod) {
            nodes.insert(node.id, node);
        }
    }
    let served = ready_pods(&rt.client, &rt.namespace, &names.bootstrap_service()).await?;
    let kafka = ask_kafka(cluster, valid.as_ref(), &nodes).await;
    let expected = valid.as_ref().map(|v| expected_nodes(v, &names)).unwrap_or_default();
    problems.extend(pod_problems(&pod_list.items));
    Ok(Observation { valid, pods: nodes, expected, targets, problems, kafka, served })
}

/// Every node of `valid`'s layout: its id, pool and pod name.
pub fn expected_nodes(valid: &ValidCluster, names: &Names) -> BTreeMap<i32, (Pool, String)> {
    let pools = match valid.layout {
        Layout::Separate { controllers, brokers } => vec![(Pool::Controller, controllers), (Pool::Broker, brokers)],
        Layout::Combined { nodes } => vec![(Pool::Combined, nodes)],
    };
    pools
        .into_iter()
        .flat_map(|(pool, count)| {
            (0..u32::try_from(count).unwrap_or_default()).map(move |ordinal| {
                let id = nodes::node_id(pool.role(), i32::try_from(ordinal).unwrap_or_default());
                (id, (pool, names.pod(pool.role(), ordinal)))
            })
        })
        .collect()
}

/// The node a pod of cluster `cluster` is, if it is one.
fn node_pod(names: &Names, pod: &Pod) -> Option<NodePod> {
    let name = pod.name_any();
    let (pool, ordinal) =
        Pool::ALL.into_iter().find_map(|pool| ordinal_of(names.pool_name(pool.role()), &name).map(|o| (pool, o)))?;
    let status = pod.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let is_true = |type_: &str| conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
    let container_ready = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == CONTAINER))
        .is_some_and(|c| c.ready);
    Some(NodePod {
        id: nodes::node_id(pool.role(), i32::try_from(ordinal).ok()?),
        name,
        pool,
        terminating: pod.metadata.deletion_timestamp.is_some(),
        container_ready,
        gate: is_true(build::RUNNING_CONDITION),
        ip: status.and_then(|s| s.pod_ip.clone()).filter(|ip| !ip.is_empty()),
        revision: pod.labels().get(REVISION_LABEL).cloned(),
    })
}

/// Asks a controller for the quorum and a broker for the rest; a node that does not answer
/// leaves its part `None`, with the error in `errors`.
async fn ask_kafka(cluster: &KafkaCluster, valid: Option<&ValidCluster>, pods: &BTreeMap<i32, NodePod>) -> Kafka {
    let mut kafka = Kafka::default();
    let port = valid.map_or(9092, |v| v.spec.listeners.internal.port);
    let running = |pool: &[Pool]| -> Vec<String> {
        pods.values()
            .filter(|p| pool.contains(&p.pool) && !p.terminating && p.container_ready)
            .filter_map(|p| p.ip.clone())
            .collect()
    };
    for ip in running(&[Pool::Controller, Pool::Combined]) {
        match quorum_of(&format!("{ip}:{CONTROLLER_PORT}")).await {
            Ok((quorum, timeout)) => {
                kafka.quorum = Some(quorum);
                kafka.fetch_timeout_ms = timeout;
                break;
            }
            Err(e) => kafka.errors.push(format!("controller {ip}: {e}")),
        }
    }
    for ip in running(&[Pool::Broker, Pool::Combined]) {
        match ask_broker(&format!("{ip}:{port}"), &mut kafka).await {
            Ok(()) => break,
            Err(e) => kafka.errors.push(format!("broker {ip}: {e}")),
        }
    }
    if !kafka.errors.is_empty() {
        debug!(cluster = %cluster.name_any(), errors = ?kafka.errors, "some nodes did not answer");
    }
    kafka
}

/// The quorum and the live fetch timeout, from the controller at `address`.
async fn quorum_of(address: &str) -> Result<(Quorum, Option<i64>)> {
    let admin = Admin::connect(address, ADMIN_TIMEOUT).await?;
    let quorum = admin.describe_quorum().await?;
    // The controller's own setting: the gate must use what Kafka uses, not a guess.
    let timeout = match quorum.leader_id {
        Some(id) => admin
            .describe_configs(&[ConfigResource::Broker(id)])
            .await
            .ok()
            .and_then(|configs| configs.into_values().next())
            .and_then(|config| config.get("controller.quorum.fetch.timeout.ms").and_then(|e| e.value.clone()))
            .and_then(|v| v.parse().ok()),
        None => None,
    };
    Ok((quorum, timeout))
}

/// Registrations, partitions, min ISR per topic, the cluster-wide configuration, ongoing
/// reassignments and features, from the broker at `address`.
async fn ask_broker(address: &str, kafka: &mut Kafka) -> Result<()> {
    let admin = Admin::connect(address, ADMIN_TIMEOUT).await?;
    kafka.features = Some(admin.features().await?);
    kafka.cluster = Some(admin.describe_cluster().await?);
    let topics = admin.topics().await?;
    let resources: Vec<ConfigResource> = topics.iter().map(|t| ConfigResource::Topic(t.name.clone())).collect();
    let mut resources_and_default = resources;
    resources_and_default.push(ConfigResource::ClusterDefault);
    let mut configs = admin.describe_configs(&resources_and_default).await?;
    kafka.cluster_default = configs.remove(&ConfigResource::ClusterDefault);
    kafka.min_isr = configs
        .into_iter()
        .filter_map(|(resource, config)| match resource {
            ConfigResource::Topic(topic) => {
                let value = config.get("min.insync.replicas")?.value.as_deref()?.parse().ok()?;
                Some((topic, value))
            }
            _ => None,
        })
        .collect();
    kafka.topics = Some(topics);
    kafka.reassignments = Some(admin.ongoing_reassignments().await?);
    Ok(())
}
