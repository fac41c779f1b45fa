//! `MySQLCluster`: a primary with 0, 2 or 4 replicas, GTID replication with lossless
//! semi-sync. Doc comments of these types are the `kubectl explain` descriptions, so they
//! speak to the user and avoid rustdoc links.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use statecraft_shared::backup::BackupPolicy;
use statecraft_shared::network_policy::NetworkAccess;
use statecraft_shared::pod_template::PodTemplate;
use statecraft_shared::upgrade::UpgradeProgress;

/// Desired state of a MySQL or MariaDB cluster: one primary and its replicas, replicating
/// with GTIDs and lossless semi-synchronous replication.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mysql.statecraft.io",
    version = "v1alpha1",
    kind = "MySQLCluster",
    plural = "mysqlclusters",
    singular = "mysqlcluster",
    shortname = "mysql",
    category = "statecraft",
    doc = "A MySQL or MariaDB cluster: one primary and its replicas, replicating with GTIDs and lossless semi-synchronous replication, run by statecraft-mysql.",
    namespaced,
    status = "MySQLClusterStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Primary","type":"string","jsonPath":".status.currentPrimary"}"#,
    printcolumn = r#"{"name":"Servers","type":"integer","description":"Servers in force (auto-scaling's count when it is on)","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.observedVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.flavor == oldSelf.flavor",
        "message": "spec.flavor is immutable: a cluster cannot change between MariaDB and MySQL",
        "fieldPath": ".flavor",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "!has(self.autoScaling) || (self.replicas >= self.autoScaling.minReplicas && self.replicas <= self.autoScaling.maxReplicas)",
        "message": "spec.replicas must be between spec.autoScaling.minReplicas and spec.autoScaling.maxReplicas",
        "fieldPath": ".replicas",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "(has(self.storage.storageClassName) == has(oldSelf.storage.storageClassName)) && (!has(self.storage.storageClassName) || self.storage.storageClassName == oldSelf.storage.storageClassName)",
        "message": "spec.storage.storageClassName is immutable",
        "fieldPath": ".storage.storageClassName",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct MySQLClusterSpec {
    /// Which server runs the cluster: `mariadb` or `mysql`. Immutable. Only `mariadb` has
    /// been run by this project's tests; `mysql` is implemented but untested here.
    pub flavor: Flavor,

    /// Server version, `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`, e.g. `10.11` for MariaDB or
    /// `8.4` for MySQL. Changing it starts a rolling upgrade: replicas first, then a
    /// switchover, then the old primary. Downgrades are refused.
    #[schemars(length(min = 1, max = 32), pattern(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"))]
    pub version: String,

    /// Container image to run instead of the default image of the flavor and version. It
    /// must contain the server of `version`; the operator cannot check this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,

    /// Number of servers: 1 (no replica), 3 or 5. One is the primary, the others replicate
    /// from it; a write is acknowledged only after a replica has it (semi-sync).
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 5))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self % 2 == 1", "message": "spec.replicas must be odd: 1, 3 or 5"}
    ]))]
    pub replicas: i32,

    /// Persistent volume of every server.
    pub storage: Storage,

    /// CPU and memory requests and limits of the server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Added to every pod of the cluster, its servers and its backup and restore Jobs: where the pods may run (node
    /// selector, tolerations, affinity, topology spread, priority class), the Secrets to pull
    /// their images with, extra labels and annotations. A change replaces the servers one at a
    /// time, as an upgrade does.
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub pod_template: PodTemplate,

    /// Restricts who may connect to the servers with a NetworkPolicy: the servers among
    /// themselves, the operator and the cluster's backup and restore Jobs always; `clients`
    /// on the SQL port (3306) and `metrics` on the exporter's port (9104), each every pod of
    /// the namespace when unset. Unset as a whole: no NetworkPolicy (any pod may connect).
    /// It needs a network plugin that enforces NetworkPolicies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkAccess>,

    /// Server settings added to the generated my.cnf (`[mysqld]` section), e.g.
    /// `max_connections: "500"`. Names are compared as the server does (case-insensitive,
    /// `-` equals `_`, `loose-` ignored). Refused: the settings the operator owns (server_id,
    /// GTID, binary and relay log, read_only, sync_binlog, innodb_flush_log_at_trx_commit,
    /// semi-sync) and those that break replication, re-seeding or point-in-time recovery
    /// (slave_skip_errors, replicate_* and binlog_*_db filters, binary log expiry,
    /// innodb_doublewrite off). At most 128 settings, values up to 4096 characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = crate::validate::settings::MAX_SETTINGS,
        "additionalProperties" = {"type": "string", "maxLength": crate::validate::settings::MAX_VALUE_LENGTH},
        "x-kubernetes-validations" = crate::validate::settings::cel_rules()
    ))]
    pub server_config: BTreeMap<String, String>,

    /// Semi-synchronous replication: the primary acknowledges a commit only after a replica
    /// has received it (wait point AFTER_SYNC, fixed), so a failover never loses an
    /// acknowledged write.
    #[serde(default)]
    pub semi_sync: SemiSync,

    /// Scheduled backups to S3. Unset: no scheduled backups (MySQLBackup objects still work
    /// when they name a location).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupPolicy>,

    /// How the read-write and read-only Services are exposed.
    #[serde(default)]
    pub service: ServiceOptions,

    /// Stop reconciling this cluster: the operator changes nothing (no failover either)
    /// until this is false again. Status is still reported.
    #[serde(default)]
    pub paused: bool,

    /// Stop every server (scale to zero) and keep the data volumes. Set back to false to
    /// start the cluster again with its data.
    #[serde(default)]
    pub stopped: bool,

    /// How version, image and configuration changes are rolled out.
    #[serde(default)]
    pub upgrade_strategy: UpgradeStrategy,

    /// Automatic re-seeding of replicas that cannot recover on their own. Off unless asked
    /// for: re-seeding deletes the replica's data volume and pod, and the new, empty server
    /// copies the primary's data again through replication, discarding whatever only that
    /// replica had. Never the primary, one replica at a time, and only while enough other
    /// replicas are healthy that writes keep being acknowledged.
    #[serde(default, skip_serializing_if = "AutoHeal::is_off")]
    pub auto_heal: AutoHeal,

    /// Read-replica auto-scaling: the operator runs between `minReplicas` and
    /// `maxReplicas` servers (1, 3 or 5), adding two replicas when a metric of the read
    /// path has stayed high and removing two when it has stayed low. `spec.replicas` is then
    /// only the starting count; the count in force is `status.autoScaling.replicas`. Unset:
    /// always `spec.replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling: Option<AutoScaling>,

    /// The server's own metrics (queries, connections, InnoDB, replication) for Prometheus,
    /// from the Prometheus project's mysqld_exporter in a sidecar of every server, on port
    /// 9104 named `metrics`. Off unless enabled; turning it on or off replaces the servers
    /// one at a time, as an upgrade does.
    #[serde(default, skip_serializing_if = "Exporter::is_off")]
    pub exporter: Exporter,

    /// TLS for client and replication traffic. The servers present a certificate from
    /// `secretName`, or else one the operator issues from an authority it generates for the
    /// cluster (Secret `<cluster>-ca`; the certificate in Secret `<cluster>-tls`, issued
    /// again 30 days before it expires and loaded by the servers without a restart). The
    /// operator, the replicas and the backup Jobs connect over TLS and check the
    /// certificate against its `ca.crt`. Unset: plaintext. Setting or removing it replaces
    /// the servers one at a time, as an upgrade does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

/// Where the servers' certificate comes from and whether plaintext is refused.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tls {
    /// A Secret of this namespace with `tls.crt`, `tls.key` and `ca.crt`, as cert-manager
    /// writes for a Certificate: name that Certificate's `secretName` here. It is used only
    /// when labelled `statecraft.io/tls: "true"` by its owner. Its names must include
    /// `<cluster>-primary.<namespace>.svc` (the operator checks it) and
    /// `*.<cluster>-hl.<namespace>.svc` (the backup Jobs connect to a server by name). The
    /// operator only reads it; a renewed one is loaded by the servers without a restart.
    /// Unset: the operator's own authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"))]
    pub secret_name: Option<String>,

    /// Refuse every connection that is not over TLS (`require_secure_transport`), except
    /// through the Unix socket inside the server's pod (the probes). Off: clients choose,
    /// and a replica replicates in plaintext from a source that serves no TLS yet (while
    /// turning TLS on replaces the servers).
    #[serde(default)]
    pub require_secure_transport: bool,
}

/// The metrics sidecar of every server.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Exporter {
    /// Run mysqld_exporter beside every server. It logs in over 127.0.0.1 as the account
    /// `exporter`, which may only read status (PROCESS, replication and binary log
    /// monitoring, performance_schema) and holds at most 3 connections; the password is
    /// generated into the cluster's Secret.
    #[serde(default)]
    pub enabled: bool,

    /// Container image to run instead of the default (mysqld_exporter v0.16.0). It must take
    /// that version's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), pattern(r"^\S+$"))]
    pub image: Option<String>,

    /// CPU and memory requests and limits of the exporter container. Default: requests of
    /// 10m CPU and 32Mi memory, a memory limit of 128Mi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

impl Exporter {
    /// Whether the exporter is off and nothing about it is set (then it is not serialised).
    pub fn is_off(&self) -> bool {
        *self == Exporter::default()
    }
}

/// Bounds, metric and thresholds of read-replica auto-scaling.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.minReplicas <= self.maxReplicas",
        "message": "spec.autoScaling.minReplicas must not be above spec.autoScaling.maxReplicas",
        "fieldPath": ".minReplicas"
    },
    {
        "rule": "self.scaleInBelow < self.scaleOutAbove",
        "message": "spec.autoScaling.scaleInBelow must be below spec.autoScaling.scaleOutAbove, or the cluster would scale in and out in turn",
        "fieldPath": ".scaleInBelow"
    },
    {
        "rule": "!has(self.metric) || self.metric != 'ReplicationLag' || self.minReplicas >= 3",
        "message": "spec.autoScaling.minReplicas must be 3 or 5 with the ReplicationLag metric: a single server has no replica to lag",
        "fieldPath": ".minReplicas"
    }
]))]
pub struct AutoScaling {
    /// Fewest servers: 1, 3 or 5.
    #[schemars(range(min = 1, max = 5))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self % 2 == 1", "message": "spec.autoScaling.minReplicas must be odd: 1, 3 or 5"}
    ]))]
    pub min_replicas: i32,

    /// Most servers: 1, 3 or 5, at least `minReplicas`.
    #[schemars(range(min = 1, max = 5))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self % 2 == 1", "message": "spec.autoScaling.maxReplicas must be odd: 1, 3 or 5"}
    ]))]
    pub max_replicas: i32,

    /// What drives the count: `ClientConnections` (client connections per serving replica,
    /// or on the primary when there is no replica; the default) or `ReplicationLag` (the
    /// largest lag of a replica, in seconds: replicas too busy serving reads to keep up).
    #[serde(default)]
    pub metric: ScalingMetric,

    /// Add replicas when the metric has stayed above this for `scaleOutAfterSeconds`:
    /// connections per replica, or seconds of lag.
    #[schemars(range(min = 1, max = 1000000))]
    pub scale_out_above: i64,

    /// Remove replicas when the metric has stayed below this for `scaleInAfterSeconds`, and
    /// the remaining replicas would not be above `scaleOutAbove` with the connections of
    /// the removed ones. Below `scaleOutAbove`.
    #[schemars(range(min = 0, max = 1000000))]
    pub scale_in_below: i64,

    /// How long the metric must stay above `scaleOutAbove` before replicas are added.
    /// Between 10 and 3600; default 60.
    #[serde(default = "default_scale_out_after")]
    #[schemars(range(min = 10, max = 3600))]
    pub scale_out_after_seconds: i64,

    /// How long the metric must stay below `scaleInBelow` before replicas are removed.
    /// Between 30 and 86400; default 600.
    #[serde(default = "default_scale_in_after")]
    #[schemars(range(min = 30, max = 86400))]
    pub scale_in_after_seconds: i64,
}

/// Bounds of `scaleOutAfterSeconds` (also in its schema): shorter would add servers for a
/// burst that is over before they serve.
pub const SCALE_OUT_AFTER_SECONDS: std::ops::RangeInclusive<i64> = 10..=3600;
/// Bounds of `scaleInAfterSeconds` (also in its schema).
pub const SCALE_IN_AFTER_SECONDS: std::ops::RangeInclusive<i64> = 30..=86400;

fn default_scale_out_after() -> i64 {
    60
}

fn default_scale_in_after() -> i64 {
    600
}

/// The metric read-replica auto-scaling follows.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ScalingMetric {
    /// Client connections per serving replica (per server when there is none).
    #[default]
    ClientConnections,
    /// The largest replication lag of a replica, in seconds.
    ReplicationLag,
}

/// Which replicas the operator may re-seed on its own.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoHeal {
    /// Re-seed a replica that has transactions the primary lacks (errant transactions,
    /// written on the replica directly or left by a crashed primary and never
    /// acknowledged). Those transactions are discarded. False: the replica is only kept out
    /// of the read-only Service and flagged in `status.members[].errant`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reseed_errant: bool,

    /// Re-seed a replica whose replication has stopped with an error (receiver or applier)
    /// and has not recovered for this many seconds, while the primary serves. Unset: never.
    /// Between 30 and 604800 (a week).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 604800))]
    pub reseed_broken_after_seconds: Option<i64>,
}

/// The smallest `reseedBrokenAfterSeconds`: shorter would re-seed replicas for errors that
/// a retry mends.
pub const MIN_RESEED_BROKEN_AFTER_SECONDS: i64 = 30;
/// The largest `reseedBrokenAfterSeconds` (a week).
pub const MAX_RESEED_BROKEN_AFTER_SECONDS: i64 = 604_800;

impl AutoHeal {
    /// Nothing is re-seeded (the default, left out of serialized specs).
    pub fn is_off(&self) -> bool {
        *self == AutoHeal::default()
    }
}

fn default_replicas() -> i32 {
    3
}

/// The database server family.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// MariaDB (domain-server-sequence GTIDs, `CHANGE MASTER TO ... MASTER_USE_GTID`).
    Mariadb,
    /// Oracle MySQL 8 (UUID GTID sets, `CHANGE REPLICATION SOURCE TO ... SOURCE_AUTO_POSITION`).
    Mysql,
}

/// The persistent volume every server gets.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Size of each server's volume, a Kubernetes quantity such as `10Gi`. A larger size
    /// grows the volumes, without a restart where the storage grows them online, if the
    /// StorageClass allows it (`allowVolumeExpansion`); otherwise Kubernetes' refusal is
    /// reported in the `VolumesSized` condition. Volumes never shrink: a size below what
    /// they have is refused there too.
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))", "message": "spec.storage.size must be a positive quantity such as 10Gi"}
    ]))]
    pub size: String,

    /// StorageClass of the volumes. Unset: the cluster's default StorageClass. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,

    /// Give each new volume to the server's user (uid 999) with an init container that runs
    /// as root with only the CHOWN capability. Only for storage that ignores the pod's
    /// fsGroup (hostPath-style provisioners, such as the one of this project's local
    /// cluster); leave it off elsewhere.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fix_ownership: bool,
}

/// Semi-synchronous replication settings.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.timeoutSeconds) || self.timeoutSeconds >= 86400 || (has(self.acceptAsyncFallback) && self.acceptAsyncFallback)",
     "message": "spec.semiSync.timeoutSeconds below 86400 lets an isolated primary acknowledge writes a failover then discards; set spec.semiSync.acceptAsyncFallback: true to accept that"}
]))]
pub struct SemiSync {
    /// Wait for a replica's acknowledgement before a commit returns (wait point
    /// AFTER_SYNC). Turning it off allows losing acknowledged writes on failover.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// How long, in seconds, the primary waits for an acknowledgement before it falls back
    /// to asynchronous replication. Deliberately huge (the default is the largest the
    /// servers accept, about 49 days) so it never falls back silently: the operator fails
    /// over instead. An isolated primary that the operator cannot reach to demote keeps
    /// waiting this long; after that it acknowledges writes that a failover has already
    /// discarded. Between 60 and 4294967; below 86400 (a day) only with
    /// `acceptAsyncFallback: true`.
    #[serde(default = "default_semi_sync_timeout")]
    pub timeout_seconds: i64,

    /// Accept a `timeoutSeconds` below a day, and with it that acknowledged writes may be
    /// lost after a fallback to asynchronous replication (the `SemiSync` condition and the
    /// `MySQLSemiSyncFellBack` alert report it). An explicit opt-out of the no-loss claim.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_async_fallback: bool,
}

fn default_true() -> bool {
    true
}

/// The largest `rpl_semi_sync_*_timeout` (milliseconds, 32-bit) expressed in whole seconds.
pub const MAX_SEMI_SYNC_TIMEOUT_SECONDS: i64 = 4_294_967;
/// The smallest timeout accepted: less lets a short blip fall back to async replication.
pub const MIN_SEMI_SYNC_TIMEOUT_SECONDS: i64 = 60;
/// The smallest timeout that keeps the no-loss claim without `acceptAsyncFallback`: an
/// isolation of the primary this long is one a human has noticed.
pub const SAFE_SEMI_SYNC_TIMEOUT_SECONDS: i64 = 86_400;

fn default_semi_sync_timeout() -> i64 {
    MAX_SEMI_SYNC_TIMEOUT_SECONDS
}

impl Default for SemiSync {
    fn default() -> Self {
        SemiSync { enabled: true, timeout_seconds: default_semi_sync_timeout(), accept_async_fallback: false }
    }
}

/// How the read-write and read-only Services are exposed.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceOptions {
    /// Service type of the read-write and read-only Services.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,

    /// Annotations added to the read-write and read-only Services (for load balancers).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Kubernetes Service type.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ServiceType {
    /// Reachable inside the cluster only.
    #[default]
    ClusterIP,
    /// Also on a port of every node.
    NodePort,
    /// Also through a cloud load balancer.
    LoadBalancer,
}

impl ServiceType {
    /// The Service `spec.type` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// How changes that need a server restart are rolled out.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStrategy {
    /// `ReplicasFirst`: restart replicas one at a time, each gated on replication health,
    /// then switch over and restart the old primary (the default). `Manual`: change the
    /// StatefulSet and let a human delete the pods.
    #[serde(default, rename = "type")]
    pub type_: UpgradeStrategyType,
}

/// The rollout method.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpgradeStrategyType {
    /// Replicas one by one, then a switchover, then the old primary.
    #[default]
    ReplicasFirst,
    /// Pods are restarted only when a human deletes them.
    Manual,
}

/// Observed state of a MySQLCluster.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLClusterStatus {
    /// Summary of the cluster's state: Initializing, Healthy, Degraded, Failed, Lost,
    /// Stopped or Paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// Servers the cluster runs now: `spec.replicas`, or auto-scaling's count when it is
    /// on (what `kubectl scale` reads back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Label selector of the cluster's server pods, for the scale subresource (a
    /// HorizontalPodAutoscaler reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Standard conditions: Ready, Available, Progressing, Degraded.
    #[serde(default)]
    pub conditions: Vec<Condition>,

    /// Pod name of the current primary. Recorded here, never in the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_primary: Option<String>,

    /// Pod name of the primary the last failover replaced, until it replicates from the
    /// current one: transactions it has beyond what the current primary received were never
    /// acknowledged, so they do not keep the current one from taking writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deposed_primary: Option<String>,

    /// Every server, as last observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberStatus>,

    /// Name of the Service that reaches the primary (read-write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_write_service: Option<String>,

    /// Name of the Service that reaches healthy replicas (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_service: Option<String>,

    /// Name of the most recent successful MySQLBackup of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<String>,

    /// Server version every member runs, once the cluster has converged on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,

    /// The last value of the `mysql.statecraft.io/switchover-to` annotation that was carried
    /// out (or refused), so one request moves the primary once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_switchover: Option<String>,

    /// Progress of the current or last rolling upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeProgress>,

    /// The replica being re-seeded (`spec.autoHeal`), until it serves again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reseeding: Option<Reseeding>,

    /// What read-replica auto-scaling (`spec.autoScaling`) decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling: Option<AutoScalingStatus>,
}

/// The count of servers auto-scaling keeps, and its last change.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoScalingStatus {
    /// Servers run now; the StatefulSet follows this count, not `spec.replicas`.
    pub replicas: i32,

    /// When auto-scaling last changed the count (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_scale_time: Option<String>,

    /// The last change and why: the metric's value, its threshold and for how long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale: Option<String>,
}

/// A replica being re-seeded.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reseeding {
    /// Pod name.
    pub member: String,

    /// Why it is re-seeded.
    pub reason: String,

    /// When its volume and pod were deleted (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub started_at: String,
}

/// One server as last observed.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// Pod name.
    pub name: String,

    /// `primary`, `replica` or `unknown` (unreachable or not yet configured).
    pub role: String,

    /// Whether the server serves in its role: a writable primary, or a replica replicating
    /// without error and within the lag threshold.
    #[serde(default)]
    pub ready: bool,

    /// The server's executed GTID set (MySQL) or current GTID position (MariaDB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid_executed: Option<String>,

    /// Replication lag in seconds, for a replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<i64>,

    /// The replica has transactions the primary does not have (errant transactions); it is
    /// kept out of the read-only Service.
    #[serde(default)]
    pub errant: bool,
}
