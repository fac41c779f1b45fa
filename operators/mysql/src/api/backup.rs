//! `MySQLBackup`: one logical backup of a cluster, streamed to S3 by a Job.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use statecraft_shared::backup::{BackupSpec, BackupStatus, HasBackupSpec};

/// One backup of a MySQLCluster: a logical dump taken from a replica (or the primary of a
/// one-server cluster) and streamed to S3.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mysql.statecraft.io",
    version = "v1alpha1",
    kind = "MySQLBackup",
    plural = "mysqlbackups",
    singular = "mysqlbackup",
    shortname = "mysqlbk",
    category = "statecraft",
    doc = "One backup of a MySQLCluster: a logical dump taken from a replica (or the primary of a one-server cluster) and streamed to S3.",
    namespaced,
    status = "MySQLBackupStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Size","type":"string","jsonPath":".status.storedSize"}"#,
    printcolumn = r#"{"name":"Completed","type":"date","jsonPath":".status.completionTime"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "spec of a MySQLBackup is immutable: create a new backup instead"}
]))]
pub struct MySQLBackupSpec {
    /// The cluster, the location and the Job deadline, as every backup resource has them.
    #[serde(flatten)]
    pub backup: BackupSpec,
}

/// The shared controllers' view of the spec: the core it flattens, and a backup made of
/// one (a scheduled backup).
impl HasBackupSpec for MySQLBackup {
    fn backup_spec(&self) -> &BackupSpec {
        &self.spec.backup
    }

    fn from_backup_spec(backup: BackupSpec) -> Self {
        MySQLBackup::new("", MySQLBackupSpec { backup })
    }
}

/// Observed state of a MySQLBackup: the status every backup reports, and what only a
/// MySQL backup knows.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLBackupStatus {
    /// Phase, object, size, checksum, times and conditions, as every backup reports them.
    #[serde(flatten)]
    pub common: BackupStatus,

    /// GTID position the backup is consistent with; point-in-time recovery replays binary
    /// logs from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid_position: Option<String>,

    /// The primary's binary logs archived with this backup, from the previous backup's
    /// position onward: they let a restore of the previous backup roll forward to any time
    /// before `binlogs.until`. Unset for a cluster's first backup, or when archiving failed
    /// (the Ready condition's message and a Warning Event say why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlogs: Option<BinlogArchiveStatus>,
}

/// Binary logs archived next to a backup.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BinlogArchiveStatus {
    /// Prefix of the archived files, relative to the store's prefix.
    pub prefix: String,
    /// Number of files.
    pub files: i64,
    /// Bytes stored.
    pub size: i64,
    /// The archive holds every transaction after this GTID position (the previous backup's).
    pub from_gtid_position: String,
    /// ...and every transaction acknowledged before this time (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub until: String,
}
