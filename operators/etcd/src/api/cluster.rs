//! `EtcdCluster`: 1, 3, 5 or 7 etcd members whose membership the operator changes one step
//! at a time (learners first), never past quorum. Doc comments of these types are the
//! `kubectl explain` descriptions, so they speak to the user and avoid rustdoc links.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use statecraft_shared::backup::{BackupLocation, BackupPolicy};
use statecraft_shared::network_policy::NetworkAccess;
use statecraft_shared::pod_template::PodTemplate;
use statecraft_shared::upgrade::UpgradeProgress;

/// Desired state of an etcd cluster.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "etcd.statecraft.io",
    version = "v1alpha1",
    kind = "EtcdCluster",
    plural = "etcdclusters",
    singular = "etcdcluster",
    shortname = "etcd",
    category = "statecraft",
    doc = "An etcd cluster: its voting members, their volumes, backups and upgrades, run by statecraft-etcd.",
    namespaced,
    status = "EtcdClusterStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Members","type":"integer","description":"Voting members now","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","priority":1,"jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Leader","type":"string","jsonPath":".status.leader"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.observedVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.storage.size == oldSelf.storage.size",
        "message": "spec.storage.size is immutable in v1alpha1",
        "fieldPath": ".storage.size",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "(has(self.storage.storageClassName) == has(oldSelf.storage.storageClassName)) && (!has(self.storage.storageClassName) || self.storage.storageClassName == oldSelf.storage.storageClassName)",
        "message": "spec.storage.storageClassName is immutable",
        "fieldPath": ".storage.storageClassName",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "has(self.bootstrapFrom) == has(oldSelf.bootstrapFrom) && (!has(self.bootstrapFrom) || self.bootstrapFrom == oldSelf.bootstrapFrom)",
        "message": "spec.bootstrapFrom is immutable: it only describes how the cluster was first created",
        "fieldPath": ".bootstrapFrom",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct EtcdClusterSpec {
    /// etcd version, `MAJOR.MINOR.PATCH` such as `3.6.16`. Changing it rolls the members
    /// one at a time, followers first, the leader last after a leadership transfer.
    /// Downgrades and skipping a minor version are refused.
    #[schemars(length(min = 5, max = 32), pattern(r"^[0-9]+\.[0-9]+\.[0-9]+$"))]
    pub version: String,

    /// Container image to run instead of the default image of `version`. It must contain
    /// `etcd` of that version in /usr/local/bin; the operator cannot check this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,

    /// Number of voting members: 1, 3, 5 or 7. A change adds one member at a time (as a
    /// learner, promoted once it has caught up) or removes one at a time.
    #[serde(default = "default_replicas")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self in [1, 3, 5, 7]", "message": "spec.replicas must be 1, 3, 5 or 7"}
    ]))]
    pub replicas: i32,

    /// Persistent volume of every member.
    pub storage: Storage,

    /// CPU and memory requests and limits of the etcd container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Added to every pod of the cluster, its members and its backup Jobs: where the pods may run (node
    /// selector, tolerations, affinity, topology spread, priority class), the Secrets to pull
    /// their images with, extra labels and annotations. A change replaces the members one at a
    /// time, as an upgrade does.
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub pod_template: PodTemplate,

    /// Restricts who may connect to the members with a NetworkPolicy: the members among
    /// themselves (client, peer and metrics ports), the operator (client and metrics ports)
    /// and the cluster's backup Jobs (client port) always; `clients` on the client port
    /// (2379) and `metrics` on the metrics port (2381), each every pod of the namespace when
    /// unset. Unset as a whole: no NetworkPolicy (any pod may connect). It needs a network
    /// plugin that enforces NetworkPolicies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkAccess>,

    /// Scheduled snapshots to S3. Unset: no scheduled snapshots (EtcdBackup objects still
    /// work when they name a location).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupPolicy>,

    /// When members are defragmented automatically.
    #[serde(default)]
    pub defragmentation: Defragmentation,

    /// Automatic replacement of members that stay unhealthy.
    #[serde(default)]
    pub auto_heal: AutoHeal,

    /// Create the cluster from a snapshot instead of empty. Set by EtcdRestore; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_from: Option<BackupLocation>,

    /// Stop reconciling this cluster: the operator changes nothing until this is false
    /// again. Status is still reported.
    #[serde(default)]
    pub paused: bool,
}

fn default_replicas() -> i32 {
    3
}

/// The persistent volume every member gets.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Size of each member's volume, a Kubernetes quantity such as `8Gi`. Immutable in
    /// v1alpha1. etcd's own quota (`--quota-backend-bytes`) is set to 80% of it.
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))", "message": "spec.storage.size must be a positive quantity such as 8Gi"}
    ]))]
    pub size: String,

    /// StorageClass of the volumes. Unset: the cluster's default StorageClass. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// Automatic defragmentation: one member at a time, followers before the leader, only
/// while every member is healthy.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Defragmentation {
    /// Defragment members automatically.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// Defragment a member when this percentage of its database file is free space
    /// (1 - in use / size), between 10 and 90.
    #[serde(default = "default_defrag_percent")]
    #[schemars(range(min = 10, max = 90))]
    pub threshold_percent: i32,

    /// Never defragment a member whose database file is smaller than this quantity: the
    /// space won back is not worth the pause.
    #[serde(default = "default_defrag_min_size")]
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self)", "message": "spec.defragmentation.minDbSize must be a quantity such as 64Mi"}
    ]))]
    pub min_db_size: String,
}

fn default_true() -> bool {
    true
}

fn default_defrag_percent() -> i32 {
    50
}

fn default_defrag_min_size() -> String {
    "64Mi".into()
}

impl Default for Defragmentation {
    fn default() -> Self {
        Defragmentation {
            enabled: true,
            threshold_percent: default_defrag_percent(),
            min_db_size: default_defrag_min_size(),
        }
    }
}

/// Automatic replacement of a member that stays unhealthy (its data lost, crash-looping,
/// or its database corrupt), only while the other members keep quorum: the member is
/// removed, its volume deleted, and a new member added as a learner.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoHeal {
    /// Replace members automatically.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// How long, in seconds, a member must stay unhealthy before it is replaced
    /// (30 to 86400).
    #[serde(default = "default_replace_after")]
    #[schemars(range(min = 30, max = 86400))]
    pub replace_after_seconds: i64,
}

fn default_replace_after() -> i64 {
    120
}

impl Default for AutoHeal {
    fn default() -> Self {
        AutoHeal { enabled: true, replace_after_seconds: default_replace_after() }
    }
}

/// Observed state of an EtcdCluster.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterStatus {
    /// Summary: Bootstrapping, Healthy, Scaling, Upgrading, Degraded,
    /// QuorumLost or Paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// Voting members, as last observed (what `kubectl scale` reads back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Label selector of the cluster's member pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Standard conditions: Ready, Available, Progressing, Degraded.
    #[serde(default)]
    pub conditions: Vec<Condition>,

    /// etcd's cluster id, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,

    /// Name of the member that leads, as last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,

    /// Every member, as last observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberStatus>,

    /// Client URL of the cluster (its client Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_endpoint: Option<String>,

    /// Name of the most recent successful EtcdBackup of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<String>,

    /// etcd version every member runs, once the cluster has converged on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,

    /// The last value of the `etcd.statecraft.io/leader` annotation that was carried out
    /// (the member it names leads) or refused, so that one request moves leadership once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_leader_request: Option<String>,

    /// Progress of the current or last rolling upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeProgress>,
}

/// One member as last observed.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// Member (and pod) name.
    pub name: String,

    /// etcd's member id, hex.
    pub id: String,

    /// A learner: it receives the log but does not vote until it is promoted.
    #[serde(default)]
    pub learner: bool,

    /// This member leads.
    #[serde(default)]
    pub leader: bool,

    /// The member answered its status request and reports no alarm.
    #[serde(default)]
    pub healthy: bool,

    /// etcd version the member runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// Size of the member's database file in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size: Option<i64>,

    /// Bytes of the database file in use; the rest is free space defragmentation returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_in_use: Option<i64>,

    /// Active alarms (NOSPACE, CORRUPT) of this member.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<String>,
}
