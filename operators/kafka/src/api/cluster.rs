//! `KafkaCluster`: a KRaft Kafka cluster, either separate controller and broker pools or one
//! pool of combined nodes for small clusters. Doc comments of these types are the
//! `kubectl explain` descriptions, so they speak to the user and avoid rustdoc links.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use statecraft_shared::pod_template::PodTemplate;
use statecraft_shared::upgrade::UpgradeProgress;

use crate::validate::config;

/// The Kafka version built into this repository's image (`KAFKA_IMAGE` of images.env), the
/// default of `spec.version`.
pub const DEFAULT_VERSION: &str = "4.4.0";

/// Port of the controller listener (KRaft quorum traffic), which the operator owns; no
/// client listener may use it.
pub const CONTROLLER_PORT: i32 = 9093;

/// Most brokers (or combined nodes) a cluster may have: it bounds the per-broker lists of
/// the schema (advertised addresses) and so the cost of their CEL rules.
pub const MAX_BROKERS: i32 = 100;

/// Desired state of a Kafka cluster.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.statecraft.io",
    version = "v1alpha1",
    kind = "KafkaCluster",
    plural = "kafkaclusters",
    singular = "kafkacluster",
    shortname = "kfc",
    category = "statecraft",
    doc = "A Kafka cluster in KRaft mode: its controllers and brokers (or combined nodes), listeners, configuration and upgrades, run by statecraft-kafka.",
    namespaced,
    status = "KafkaClusterStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Controllers","type":"integer","jsonPath":".spec.controllers.replicas"}"#,
    printcolumn = r#"{"name":"Brokers","type":"integer","jsonPath":".spec.brokers.replicas"}"#,
    printcolumn = r#"{"name":"Combined","type":"integer","jsonPath":".spec.combined.replicas"}"#,
    printcolumn = r#"{"name":"Active","type":"integer","jsonPath":".status.activeController"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.observedVersion"}"#,
    printcolumn = r#"{"name":"Bootstrap","type":"string","priority":1,"jsonPath":".status.bootstrap"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.combined) ? !has(self.controllers) && !has(self.brokers) : has(self.controllers) && has(self.brokers)",
        "message": "spec.combined excludes spec.controllers and spec.brokers; without spec.combined, both spec.controllers and spec.brokers are required",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "has(self.combined) == has(oldSelf.combined)",
        "message": "spec.combined cannot be added or removed: a cluster keeps the layout it was created with",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "!has(self.minInsyncReplicas) || !has(self.defaultReplicationFactor) || self.minInsyncReplicas <= self.defaultReplicationFactor",
        "message": "spec.minInsyncReplicas must not exceed spec.defaultReplicationFactor: no write could ever be acknowledged",
        "fieldPath": ".minInsyncReplicas",
        "reason": "FieldValueInvalid"
    }
]))]
pub struct KafkaClusterSpec {
    /// Kafka version, `MAJOR.MINOR.PATCH` such as `4.4.0` (the default, the version built
    /// here). Supported: the 4.3 and 4.4 series. Changing it rolls the nodes; metadata.version is
    /// then finalized as `metadataVersion` says.
    #[serde(default = "default_version")]
    #[schemars(length(min = 5, max = 32), pattern(r"^[0-9]+\.[0-9]+\.[0-9]+$"))]
    pub version: String,

    /// Container image to run instead of the default image of `version`. It must be laid out
    /// as the official apache/kafka image (/opt/kafka, uid 1000); the operator cannot check
    /// this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,

    /// The KRaft controllers: the metadata quorum. Required with `brokers`; excluded by
    /// `combined`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controllers: Option<ControllerPool>,

    /// The brokers: they hold the partitions and serve clients. Required with
    /// `controllers`; excluded by `combined`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<BrokerPool>,

    /// One pool of nodes that are controller and broker at once, for small clusters (a
    /// broker restart is then also a quorum member's restart). Excludes `controllers` and
    /// `brokers`; cannot be added or removed after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combined: Option<CombinedPool>,

    /// Added to every pod of the cluster, its controllers and brokers: where the pods may run (node
    /// selector, tolerations, affinity, topology spread, priority class), the Secrets to pull
    /// their images with, extra labels and annotations. A change replaces the nodes one at a
    /// time, as an upgrade does.
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub pod_template: PodTemplate,

    /// The client listeners.
    #[serde(default)]
    pub listeners: Listeners,

    /// Broker configuration overrides (server.properties keys and values), applied without a
    /// restart when Kafka accepts the key dynamically, else by a roll. Refused: the keys the
    /// operator sets itself (node identity, roles, quorum, listeners, log directories, rack,
    /// replication defaults, which have their own fields) and those that break its safety
    /// guarantees (unclean leader election, uncontrolled shutdown); see "Configuration the
    /// operator owns" in the Kafka operator docs. At most 256 keys, values up to 4096
    /// characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = config::MAX_ENTRIES,
        "additionalProperties" = {"type": "string", "maxLength": config::MAX_VALUE_LENGTH},
        "x-kubernetes-validations" = config::cel_rules("spec.config")
    ))]
    pub config: BTreeMap<String, String>,

    /// Replication factor of topics created without one, and of Kafka's internal topics
    /// (consumer offsets, transaction state). At most the number of brokers. Unset: 3, or
    /// the number of brokers when fewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub default_replication_factor: Option<i32>,

    /// Kafka's `min.insync.replicas`: how many replicas must have a write before it is
    /// acknowledged to a producer with acks=all. Rolls never restart a broker that would
    /// take a partition below it. At most `defaultReplicationFactor`. Unset: one less than
    /// the replication factor, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub min_insync_replicas: Option<i32>,

    /// Stop reconciling this cluster: the operator changes nothing until this is false
    /// again. Status is still reported.
    #[serde(default)]
    pub paused: bool,

    /// When metadata.version is raised to the new version's level after a version change:
    /// `Auto` once every node runs the new version and the roll is done, `Manual` never (run
    /// `kafka-features.sh upgrade` yourself; until then a downgrade stays possible).
    #[serde(default)]
    pub metadata_version: MetadataVersionPolicy,
}

fn default_version() -> String {
    DEFAULT_VERSION.into()
}

/// The KRaft controllers.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.storage == oldSelf.storage",
        "message": "spec.controllers.storage is immutable in v1alpha1",
        "fieldPath": ".storage",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "self.replicas == oldSelf.replicas",
        "message": "spec.controllers.replicas cannot change yet: changing the quorum's voters is not implemented",
        "fieldPath": ".replicas",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct ControllerPool {
    /// Number of controllers, the quorum's voters: 1, 3 or 5 (a majority must be up).
    #[serde(default = "default_voters")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self in [1, 3, 5]", "message": "spec.controllers.replicas must be 1, 3 or 5"}
    ]))]
    pub replicas: i32,

    /// Persistent volume of every controller (the metadata log). Immutable in v1alpha1.
    pub storage: Storage,

    /// CPU and memory requests and limits of the Kafka container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// The brokers.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.storage == oldSelf.storage",
        "message": "spec.brokers.storage is immutable in v1alpha1",
        "fieldPath": ".storage",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "self.replicas >= oldSelf.replicas",
        "message": "spec.brokers.replicas cannot shrink yet: removing a broker needs its partitions moved first, which is not implemented",
        "fieldPath": ".replicas",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct BrokerPool {
    /// Number of brokers, 1 to 100. It may grow (new brokers get new partitions; existing
    /// ones are not moved) but not shrink yet.
    #[serde(default = "default_brokers")]
    #[schemars(range(min = 1, max = MAX_BROKERS))]
    pub replicas: i32,

    /// Persistent volume of every broker (its partitions). Immutable in v1alpha1.
    pub storage: Storage,

    /// CPU and memory requests and limits of the Kafka container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// A node label whose value is the broker's rack (`broker.rack`), such as
    /// `topology.kubernetes.io/zone`: Kafka then spreads a partition's replicas over racks.
    /// Unset: no rack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub rack_label: Option<String>,
}

/// Nodes that are controller and broker at once.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.storage == oldSelf.storage",
        "message": "spec.combined.storage is immutable in v1alpha1",
        "fieldPath": ".storage",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "self.replicas == oldSelf.replicas",
        "message": "spec.combined.replicas cannot change yet: changing the quorum's voters is not implemented",
        "fieldPath": ".replicas",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct CombinedPool {
    /// Number of nodes, every one a quorum voter and a broker: 1, 3 or 5.
    #[serde(default = "default_voters")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self in [1, 3, 5]", "message": "spec.combined.replicas must be 1, 3 or 5"}
    ]))]
    pub replicas: i32,

    /// Persistent volume of every node (metadata log and partitions). Immutable in v1alpha1.
    pub storage: Storage,

    /// CPU and memory requests and limits of the Kafka container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// A node label whose value is the node's rack (`broker.rack`), such as
    /// `topology.kubernetes.io/zone`. Unset: no rack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub rack_label: Option<String>,
}

fn default_voters() -> i32 {
    3
}

fn default_brokers() -> i32 {
    3
}

/// The persistent volume every node of a pool gets.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Size of each node's volume, a Kubernetes quantity such as `10Gi`.
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))", "message": "storage.size must be a positive quantity such as 10Gi"}
    ]))]
    pub size: String,

    /// StorageClass of the volumes. Unset: the cluster's default StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,

    /// Give each new volume to Kafka's user (uid 1000) with an init container that runs as
    /// root with only the CHOWN capability. Only for storage that ignores the pod's fsGroup
    /// (hostPath-style provisioners, such as the one of this project's local cluster); leave
    /// it off elsewhere.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fix_ownership: bool,
}

/// The client listeners. The controller listener (port 9093) is the operator's.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.external) || self.external.port != self.internal.port",
        "message": "spec.listeners.external.port must differ from spec.listeners.internal.port",
        "fieldPath": ".external.port",
        "reason": "FieldValueInvalid"
    }
]))]
pub struct Listeners {
    /// The listener inside the Kubernetes cluster, always present: brokers advertise their
    /// pod's DNS name in the headless Service, and the bootstrap Service reaches them all.
    #[serde(default)]
    pub internal: InternalListener,

    /// A listener for clients outside the Kubernetes cluster, through a NodePort or
    /// LoadBalancer Service per broker. Unset: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalListener>,
}

/// The listener inside the Kubernetes cluster (plaintext).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InternalListener {
    /// Port of the listener, 1024 to 65535 but not 9093 (the controller listener).
    #[serde(default = "default_internal_port")]
    #[schemars(range(min = 1024, max = 65535))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self != 9093", "message": "spec.listeners.internal.port must not be 9093, the controller listener's"}
    ]))]
    pub port: i32,
}

fn default_internal_port() -> i32 {
    9092
}

impl Default for InternalListener {
    fn default() -> Self {
        InternalListener { port: default_internal_port() }
    }
}

/// A listener for clients outside the Kubernetes cluster (plaintext).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalListener {
    /// How clients reach each broker: `NodePort` (a node's address and the Service's node
    /// port) or `LoadBalancer` (the Service's load-balancer address).
    #[serde(rename = "type")]
    pub type_: ExternalListenerType,

    /// Port the brokers listen on for this listener, 1024 to 65535 but not 9093 (the
    /// controller listener) nor the internal listener's port.
    #[serde(default = "default_external_port")]
    #[schemars(range(min = 1024, max = 65535))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self != 9093", "message": "spec.listeners.external.port must not be 9093, the controller listener's"}
    ]))]
    pub port: i32,

    /// Addresses to advertise instead of the ones the Services get, per broker: for a DNS
    /// name or a proxy in front of the nodes. Brokers not listed advertise their Service's
    /// address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = MAX_BROKERS, "x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["broker"]))]
    pub advertised: Vec<AdvertisedAddress>,

    /// Annotations of the per-broker Services (a cloud's load-balancer settings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
}

fn default_external_port() -> i32 {
    9094
}

/// The kind of Service that exposes the external listener.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ExternalListenerType {
    /// A NodePort Service per broker; the broker advertises its node's address.
    NodePort,
    /// A LoadBalancer Service per broker; the broker advertises the load balancer's address.
    LoadBalancer,
}

/// The address one broker advertises on the external listener.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdvertisedAddress {
    /// The broker, by ordinal (0 for the first broker).
    #[schemars(range(min = 0, max = MAX_BROKERS - 1))]
    pub broker: i32,

    /// Host name or IP address clients connect to.
    #[schemars(length(min = 1, max = 253))]
    pub host: String,

    /// Port clients connect to. Unset: the Service's port (the node port for NodePort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// When metadata.version is finalized after a version change.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MetadataVersionPolicy {
    /// Raise it to the new version's level once the roll is done and every node is ready.
    #[default]
    Auto,
    /// Leave it: the user runs `kafka-features.sh upgrade`.
    Manual,
}

/// Observed state of a KafkaCluster.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KafkaClusterStatus {
    /// Summary: Bootstrap, NoActiveController, Rolling, Healthy, Degraded or Paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Standard conditions: Ready, Available, Progressing, Degraded.
    #[serde(default)]
    pub conditions: Vec<Condition>,

    /// Kafka's cluster id, generated once when the storage is first formatted and kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,

    /// Node id of the active controller (the quorum's leader), as last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_controller: Option<i32>,

    /// Every initial voter has formatted its storage and been heard from by the quorum's
    /// leader. From then on a controller that starts without a metadata log (its volume
    /// was lost) formats as a new observer, never as an initial voter again (that would
    /// let it vote with an empty log). Set once, never unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum_bootstrapped: Option<bool>,

    /// The metadata quorum, as last described by a controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<QuorumStatus>,

    /// Every node, as last observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeStatus>,

    /// The finalized metadata.version, such as `4.4-IV0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized_metadata_version: Option<String>,

    /// Partitions with fewer in-sync replicas than replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_replicated_partitions: Option<i32>,

    /// Partitions with fewer in-sync replicas than their min.insync.replicas: acks=all
    /// producers cannot write to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_min_isr_partitions: Option<i32>,

    /// Partitions without a leader: nobody can read or write them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_partitions: Option<i32>,

    /// `host:port` clients inside the Kubernetes cluster bootstrap from (the bootstrap
    /// Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,

    /// Kafka version every node runs, once the cluster has converged on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,

    /// The roll of a new pod revision (image, version, resources, static configuration): the
    /// node in flight, the nodes done, and why it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeProgress>,
}

/// The metadata quorum (KRaft), as DescribeQuorum reports it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumStatus {
    /// Node id of the leader (the active controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_id: Option<i32>,

    /// The leader's epoch: it grows with every election.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<i32>,

    /// The quorum's high watermark (metadata log offset committed by a majority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_watermark: Option<i64>,

    /// The voters (controllers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub voters: Vec<QuorumReplica>,

    /// The observers (brokers, and controllers not yet voters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<QuorumReplica>,
}

/// One replica of the metadata log.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuorumReplica {
    /// Node id.
    pub id: i32,

    /// Offset of the end of this replica's metadata log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_end_offset: Option<i64>,

    /// Records this replica is behind the leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<i64>,

    /// The replica fetched up to the leader's end within controller.quorum.fetch.timeout.ms.
    #[serde(default)]
    pub caught_up: bool,
}

/// One node as last observed.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Kafka node id.
    pub id: i32,

    /// Pod name.
    pub pod: String,

    /// What the node is.
    pub role: NodeRole,

    /// Registered with the controllers and RUNNING (brokers), or a caught-up voter
    /// (controllers): not merely a port that answers.
    #[serde(default)]
    pub ready: bool,

    /// The pod's revision (its StatefulSet controller-revision-hash): a node whose revision
    /// differs from the current one is still to be rolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,

    /// The broker as the controllers have it: RUNNING (registered, unfenced), FENCED
    /// (registered, held fenced) or NOT_REGISTERED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_state: Option<String>,

    /// Id of the node's metadata log directory, from its formatted storage: a new id means
    /// the volume was lost and re-formatted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<String>,
}

/// What a node is.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NodeRole {
    /// A KRaft controller.
    Controller,
    /// A broker.
    Broker,
    /// A controller and a broker.
    Combined,
}
