//! Pure builders of the objects a KafkaCluster owns, from its validated spec and what only
//! the controller knows ([`Inputs`]). The controller applies them with the shared `Applier`,
//! which adds the managed-by and instance labels and the owner reference.
//!
//! - [`config`]: the ConfigMap (per-pool properties, the start script, the ids) and the
//!   pod-template hash;
//! - [`script`]: the start script;
//! - [`ids`]: the cluster id and the initial controllers' directory ids;
//! - [`dynamic`]: which configuration keys Kafka changes at runtime;
//! - [`services`]: the headless, bootstrap and external Services;
//! - [`statefulset`]: a pool's StatefulSet and PodDisruptionBudget.
//!
//! Each pool (controllers, brokers, or combined nodes) is a StatefulSet of its own, with the
//! shared StatefulSet names of the pool ([`Names::pool`]); its pods also carry
//! [`CLUSTER_LABEL`], [`ROLE_LABEL`] and, when they are brokers, [`BROKER_LABEL`], which the
//! Services that span pools select.

pub mod config;
pub mod dynamic;
pub mod ids;
pub mod script;
pub mod services;
pub mod statefulset;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, ResourceRequirements, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use statecraft_shared::{Error, Result};

pub use crate::api::cluster::CONTROLLER_PORT;
use crate::api::{KafkaCluster, NodeRole, Storage};
use crate::names::Names;
use crate::validate::{Layout, ValidCluster};

/// Where the ConfigMap is mounted (read-only).
pub const CONFIG_DIR: &str = "/etc/statecraft/kafka";
/// The node's own files (its final server.properties): an emptyDir.
pub const RUN_DIR: &str = "/run/kafka";
/// Where the data volume is mounted. Kafka's log directory is below it, not the volume's
/// root: a new ext4 volume has `lost+found`, which Kafka refuses to find in a log directory.
pub const DATA_MOUNT: &str = "/var/lib/kafka";
/// `log.dirs`: the one log directory (metadata log and partitions), created by
/// `kafka-storage format`.
pub const DATA_DIR: &str = "/var/lib/kafka/data";
/// Kafka's scripts in the image.
pub const KAFKA_BIN: &str = "/opt/kafka/bin";
/// The image's user and group (`kafka`, as the official image's `appuser`).
pub const KAFKA_UID: i64 = 1000;

/// Label of every pod: the cluster's name (the shared instance label of a pod names its
/// pool's StatefulSet).
pub const CLUSTER_LABEL: &str = "kafka.statecraft.io/cluster";
/// Label of every pod: `controller`, `broker` or `combined`.
pub const ROLE_LABEL: &str = "kafka.statecraft.io/role";
/// Label of the pods that are brokers (`true`): brokers and combined nodes.
pub const BROKER_LABEL: &str = "kafka.statecraft.io/broker";
/// Pod-template annotation: [`config::template_hash`].
pub const CONFIG_HASH_ANNOTATION: &str = "kafka.statecraft.io/config-hash";
/// The pods' readiness gate, which the operator sets True when the node is a registered,
/// unfenced broker or a caught-up voter: not merely a port that answers.
pub const RUNNING_CONDITION: &str = "kafka.statecraft.io/running";

/// What the objects are built from besides the spec: what only the controller knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Kafka's cluster id: `status.clusterId` when set, else [`ids::cluster_id`] of the uid.
    pub cluster_id: String,
    /// Whether the quorum was formed already: controllers that find no metadata log then
    /// format without claiming to be initial voters.
    pub bootstrapped: bool,
    /// The external address of each broker (by ordinal) known so far, `host:port` with an
    /// empty host for the node's own address (see [`services::external_address`]).
    pub external_addresses: BTreeMap<i32, String>,
}

/// The objects of one pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolObjects {
    /// Which pool.
    pub role: NodeRole,
    /// The headless Service that names its pods.
    pub headless_service: Service,
    /// Its StatefulSet.
    pub statefulset: StatefulSet,
    /// Its PodDisruptionBudget.
    pub pdb: PodDisruptionBudget,
}

/// Every object of a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Objects {
    /// The ConfigMap every node reads at start.
    pub config_map: ConfigMap,
    /// The pools: controllers then brokers, or the combined nodes.
    pub pools: Vec<PoolObjects>,
    /// The Service clients bootstrap from.
    pub bootstrap_service: Service,
    /// The external listener's Service per broker, by ordinal (none without one).
    pub external_services: Vec<Service>,
}

/// One pool of a valid spec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pool<'a> {
    /// What its nodes are.
    pub role: NodeRole,
    /// How many.
    pub replicas: i32,
    /// Each node's volume.
    pub storage: &'a Storage,
    /// The Kafka container's resources.
    pub resources: Option<&'a ResourceRequirements>,
}

/// The pools of `valid`, controllers first.
pub fn pools(valid: &ValidCluster) -> Vec<Pool<'_>> {
    let spec = &valid.spec;
    let mut pools = Vec::new();
    if let Some(c) = &spec.combined {
        pools.push(Pool {
            role: NodeRole::Combined,
            replicas: c.replicas,
            storage: &c.storage,
            resources: c.resources.as_ref(),
        });
    }
    if let Some(c) = &spec.controllers {
        pools.push(Pool {
            role: NodeRole::Controller,
            replicas: c.replicas,
            storage: &c.storage,
            resources: c.resources.as_ref(),
        });
    }
    if let Some(b) = &spec.brokers {
        pools.push(Pool {
            role: NodeRole::Broker,
            replicas: b.replicas,
            storage: &b.storage,
            resources: b.resources.as_ref(),
        });
    }
    pools
}

/// The roles of `layout`'s pools, controllers first.
pub fn roles(layout: &Layout) -> Vec<NodeRole> {
    match layout {
        Layout::Separate { .. } => vec![NodeRole::Controller, NodeRole::Broker],
        Layout::Combined { .. } => vec![NodeRole::Combined],
    }
}

/// The pool of the voters and their number.
pub fn voters(layout: &Layout) -> (NodeRole, i32) {
    match *layout {
        Layout::Separate { controllers, .. } => (NodeRole::Controller, controllers),
        Layout::Combined { nodes } => (NodeRole::Combined, nodes),
    }
}

/// The pool of the brokers.
pub fn broker_role(layout: &Layout) -> NodeRole {
    match layout {
        Layout::Separate { .. } => NodeRole::Broker,
        Layout::Combined { .. } => NodeRole::Combined,
    }
}

/// Whether nodes of `role` are brokers.
pub fn is_broker(role: NodeRole) -> bool {
    role != NodeRole::Controller
}

/// `role` as the script, the labels and the file names spell it.
pub fn role_name(role: NodeRole) -> &'static str {
    match role {
        NodeRole::Controller => "controller",
        NodeRole::Broker => "broker",
        NodeRole::Combined => "combined",
    }
}

/// Every object of `cluster`, whose spec is `valid`.
pub fn objects(cluster: &KafkaCluster, valid: &ValidCluster, inputs: &Inputs) -> Result<Objects> {
    let namespace = cluster
        .namespace()
        .ok_or_else(|| Error::Permanent(format!("KafkaCluster {} has no namespace", cluster.name_any())))?;
    let uid =
        cluster.uid().ok_or_else(|| Error::Permanent(format!("KafkaCluster {} has no uid yet", cluster.name_any())))?;
    let names = Names::new(cluster.name_any(), namespace);
    let data = config::data(valid, &names, &uid, inputs);
    let pools = pools(valid)
        .into_iter()
        .map(|pool| {
            let hash = config::template_hash(valid, &names, pool.role, &data);
            PoolObjects {
                role: pool.role,
                headless_service: services::headless_service(valid, &names, pool.role),
                statefulset: statefulset::statefulset(valid, &names, &pool, &hash),
                pdb: statefulset::pdb(&names, pool.role),
            }
        })
        .collect();
    Ok(Objects {
        config_map: config::config_map(&names, data),
        pools,
        bootstrap_service: services::bootstrap_service(valid, &names),
        external_services: services::external_services(valid, &names),
    })
}

#[cfg(test)]
pub(crate) mod tests;
