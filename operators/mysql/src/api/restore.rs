//! `MySQLRestore`: bootstraps a new cluster from a backup, optionally up to a point in time.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use statecraft_shared::backup::{JobDeadline, RestoreSource, RestoreStatus};

use super::cluster::MySQLClusterSpec;

/// Creates a new MySQLCluster whose data comes from a backup, optionally rolled forward
/// with archived binary logs up to a point in time. Existing clusters are never
/// overwritten.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mysql.statecraft.io",
    version = "v1alpha1",
    kind = "MySQLRestore",
    plural = "mysqlrestores",
    singular = "mysqlrestore",
    shortname = "mysqlrs",
    category = "statecraft",
    doc = "Creates a new MySQLCluster whose data comes from a backup, optionally rolled forward with archived binary logs up to a point in time. Existing clusters are never overwritten.",
    namespaced,
    status = "MySQLRestoreStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.target.name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "spec of a MySQLRestore is immutable: create a new restore instead"},
    {
        "rule": "has(self.backupName) != has(self.location)",
        "message": "exactly one of spec.backupName and spec.location must be set"
    },
    {
        "rule": "!has(self.pointInTime) || has(self.backupName)",
        "message": "spec.pointInTime needs spec.backupName: the binary logs are found through the cluster's MySQLBackups"
    }
]))]
pub struct MySQLRestoreSpec {
    /// The backup to restore (backupName or location), as every restore resource names it.
    #[serde(flatten)]
    pub source: RestoreSource,

    /// Roll forward with archived binary logs up to this time (RFC 3339, e.g.
    /// `2026-01-31T12:00:00Z`): transactions committed before it are restored, later ones
    /// not. It must be after the backup completed; the binary logs come from a later backup
    /// of the same cluster (each backup archives them from the previous backup's position),
    /// so the restore waits until one taken after this time exists. Needs backupName. Unset:
    /// restore the backup as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub point_in_time: Option<String>,

    /// The cluster to create.
    pub target: RestoreTarget,

    /// How long the restore Job (loading the dump, replaying binary logs) may run.
    #[serde(flatten)]
    pub deadline: JobDeadline,
}

/// The new cluster a restore creates.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreTarget {
    /// Name of the MySQLCluster to create; the restore fails if it already exists.
    /// At most 52 characters, a DNS-1035 label: it names the cluster's StatefulSet and Services.
    #[schemars(
        length(min = 1, max = crate::build::MAX_CLUSTER_NAME),
        pattern(statecraft_shared::names::DNS_1035_LABEL)
    )]
    pub name: String,

    /// Spec of the MySQLCluster to create. Its flavor must match the backup's.
    pub spec: MySQLClusterSpec,
}

/// Observed state of a MySQLRestore.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLRestoreStatus {
    /// Phase and conditions, as every restore reports them.
    #[serde(flatten)]
    pub common: RestoreStatus,

    /// Point-in-time restores: the MySQLBackup whose archived binary logs are replayed
    /// after the backup's dump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlogs_from: Option<String>,
}
