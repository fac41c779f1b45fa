//! What every backup and restore resource asks for, the same way in every operator: the
//! spec core each operator flattens (`#[serde(flatten)]`) into its own spec beside what
//! only its system needs (MySQL's point in time), so that `kubectl explain` reads the same
//! for every kind and the shared controllers read these fields without an accessor per
//! field and operator: a backup resource is [`HasBackupSpec`], a restore resource hands
//! out its [`RestoreSource`] through
//! [`RestoreResource::restore_source`](super::restore::RestoreResource::restore_source).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JobDeadline;
use super::status::BackupLocation;
use crate::s3::S3Location;

/// What to back up, where to, and for how long at most.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// Name of the cluster, in the same namespace, to back up.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,

    /// Where to store the backup. Unset: the location of the cluster's backup policy
    /// (spec.backup.location of the cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<S3Location>,

    /// How long the backup Job may run.
    #[serde(flatten)]
    pub deadline: JobDeadline,
}

impl BackupSpec {
    /// A backup of `cluster` to its policy's location, with the policy's deadline: what a
    /// schedule creates.
    pub fn of_cluster(cluster: &str) -> Self {
        BackupSpec { cluster_name: cluster.to_string(), location: None, deadline: JobDeadline::default() }
    }
}

/// A backup resource (`MySQLBackup`, `EtcdBackup`) by the [`BackupSpec`] its spec
/// flattens: what the backup controller, the restore controller (of the backup a restore
/// names) and the schedule read of every backup, and how the schedule makes one. One
/// implementation serves all three, so that an operator writes no accessor per field.
pub trait HasBackupSpec: Sized {
    /// The spec core.
    fn backup_spec(&self) -> &BackupSpec;

    /// A backup resource with this spec and empty metadata (the caller names it).
    fn from_backup_spec(spec: BackupSpec) -> Self;
}

/// The backup a restore loads: a backup resource by name, or an explicit object. Exactly
/// one is set (the operator's CRD has the CEL rule; the controller checks it too).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSource {
    /// Name of a succeeded backup, in the same namespace, to restore from. Exactly one of
    /// backupName and location is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_name: Option<String>,

    /// An explicit backup object to restore from, when no backup resource describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<BackupLocation>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fields_are_the_embedding_specs_own() {
        let spec: BackupSpec =
            serde_json::from_value(json!({"clusterName": "db", "activeDeadlineSeconds": 600})).expect("parses");
        let deadline = JobDeadline { active_deadline_seconds: Some(600) };
        assert_eq!(spec, BackupSpec { deadline, ..BackupSpec::of_cluster("db") });
        assert_eq!(
            serde_json::to_value(&spec).expect("serializes"),
            json!({"clusterName": "db", "activeDeadlineSeconds": 600})
        );
        let schema = serde_json::to_value(schemars::schema_for!(BackupSpec)).expect("schema");
        let mut fields: Vec<&String> = schema["properties"].as_object().expect("properties").keys().collect();
        fields.sort();
        assert_eq!(fields, ["activeDeadlineSeconds", "clusterName", "location"], "{schema}");
        assert_eq!(schema["required"], json!(["clusterName"]));
        assert_eq!(serde_json::to_value(RestoreSource::default()).expect("serializes"), json!({}));
    }
}
