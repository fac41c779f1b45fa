//! `EtcdBackup`: one snapshot of a cluster, streamed to S3 by a Job.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use statecraft_shared::backup::{BackupSpec, BackupStatus, HasBackupSpec};

/// One snapshot of an EtcdCluster, taken from a healthy member (a follower when there is
/// one) and streamed to S3 without touching a disk.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "etcd.statecraft.io",
    version = "v1alpha1",
    kind = "EtcdBackup",
    plural = "etcdbackups",
    singular = "etcdbackup",
    shortname = "etcdbk",
    category = "statecraft",
    doc = "One snapshot of an EtcdCluster, taken from a healthy member and streamed to S3.",
    namespaced,
    status = "EtcdBackupStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Revision","type":"integer","jsonPath":".status.revision"}"#,
    printcolumn = r#"{"name":"Size","type":"string","jsonPath":".status.storedSize"}"#,
    printcolumn = r#"{"name":"Completed","type":"date","jsonPath":".status.completionTime"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "spec of an EtcdBackup is immutable: create a new backup instead"}
]))]
pub struct EtcdBackupSpec {
    /// The cluster, the location and the Job deadline, as every backup resource has them.
    #[serde(flatten)]
    pub backup: BackupSpec,
}

/// The shared controllers' view of the spec: the core it flattens, and a backup made of
/// one (a scheduled backup).
impl HasBackupSpec for EtcdBackup {
    fn backup_spec(&self) -> &BackupSpec {
        &self.spec.backup
    }

    fn from_backup_spec(backup: BackupSpec) -> Self {
        EtcdBackup::new("", EtcdBackupSpec { backup })
    }
}

/// Observed state of an EtcdBackup: the status every backup reports, and what only a
/// snapshot knows.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdBackupStatus {
    /// Phase, object, size, checksum, times and conditions, as every backup reports them.
    #[serde(flatten)]
    pub common: BackupStatus,

    /// The key-value store revision the snapshot holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,

    /// Member the snapshot was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}
