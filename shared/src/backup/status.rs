//! What every backup and restore resource records, the same way in every operator: the
//! status core each operator flattens (`#[serde(flatten)]`) into its own status beside the
//! fields only its system knows (MySQL's GTID position, etcd's revision), and the one way
//! the phase sets the conditions. An explicit backup object to restore from is a
//! [`BackupLocation`], also what etcd's `spec.bootstrapFrom` names.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::job::ObjectReport;
use super::{FAILED, RESTORING, RUNNING, SUCCEEDED};
use crate::reason::Reason;
use crate::s3::S3Location;
use crate::status::{ConditionType, set_condition};

/// A backup object in S3.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupLocation {
    /// Bucket, prefix, endpoint and credentials of the store holding the backup.
    pub store: S3Location,

    /// Key of the backup object, relative to the store's prefix.
    #[schemars(length(min = 1, max = 1024))]
    pub key: String,
}

/// Observed state every backup resource reports.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Pending, Running, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// URL of the backup object, `s3://bucket/key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,

    /// Key of the backup object, relative to the store's prefix; known once the Job starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,

    /// Size of the stored backup in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,

    /// The same size for people, e.g. `12.3 MiB`: the printer column of `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_size: Option<String>,

    /// SHA-256 of the stored backup, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,

    /// When the backup started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub start_time: Option<String>,

    /// When the backup completed or failed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub completion_time: Option<String>,

    /// Standard conditions: Ready once stored, Progressing while the Job runs.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl BackupStatus {
    /// Whether the phase is final (Succeeded or Failed): a backup is never retried.
    pub fn is_finished(&self) -> bool {
        is_final(self.phase.as_deref())
    }

    /// Whether the backup succeeded.
    pub fn succeeded(&self) -> bool {
        self.phase.as_deref() == Some(SUCCEEDED)
    }

    /// Sets the phase and the conditions that go with it (see [`set_phase`]).
    pub fn set_phase(&mut self, phase: &str, reason: impl Into<Reason>, message: &str, generation: Option<i64>) {
        set_phase(&mut self.phase, &mut self.conditions, phase, reason, message, generation);
    }

    /// Copies what the Job reported about the stored object.
    pub fn record(&mut self, object: &ObjectReport) {
        self.location = Some(object.url.clone());
        self.key = Some(object.key.clone());
        self.size = Some(object.size());
        self.stored_size = Some(human_size(object.size()));
        self.sha256 = Some(object.sha256.clone());
        self.start_time = Some(object.started_at.clone());
        self.completion_time = Some(object.finished_at.clone());
    }

    /// When the backup completed, if it did.
    pub fn completed_at(&self) -> Option<DateTime<Utc>> {
        let time = self.completion_time.as_deref()?;
        DateTime::parse_from_rfc3339(time).ok().map(|t| t.with_timezone(&Utc))
    }
}

/// `bytes` in binary units with one decimal, as `kubectl get` shows sizes (`12.3 MiB`).
pub fn human_size(bytes: i64) -> String {
    bytesize::ByteSize::b(bytes.max(0).unsigned_abs()).display().iec().to_string()
}

/// Observed state every restore resource reports.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    /// Pending, Restoring, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// Standard conditions: Ready once the target holds the data, Progressing while it is
    /// created and loaded.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl RestoreStatus {
    /// Whether the phase is final (Succeeded or Failed): a restore is never retried.
    pub fn is_finished(&self) -> bool {
        is_final(self.phase.as_deref())
    }

    /// Sets the phase and the conditions that go with it (see [`set_phase`]).
    pub fn set_phase(&mut self, phase: &str, reason: impl Into<Reason>, message: &str, generation: Option<i64>) {
        set_phase(&mut self.phase, &mut self.conditions, phase, reason, message, generation);
    }
}

fn is_final(phase: Option<&str>) -> bool {
    matches!(phase, Some(SUCCEEDED | FAILED))
}

/// The one rule for the conditions of a backup or restore: Ready exactly when it
/// succeeded, Progressing exactly while its work runs (Running, Restoring), both with the
/// phase's reason and message.
fn set_phase(
    slot: &mut Option<String>,
    conditions: &mut Vec<Condition>,
    phase: &str,
    reason: impl Into<Reason>,
    message: &str,
    generation: Option<i64>,
) {
    let reason = reason.into();
    *slot = Some(phase.to_string());
    set_condition(conditions, ConditionType::Ready, phase == SUCCEEDED, reason, message, generation);
    let working = phase == RUNNING || phase == RESTORING;
    set_condition(conditions, ConditionType::Progressing, working, reason, message, generation);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::PENDING;
    use crate::reason::Common;

    fn condition<'a>(conditions: &'a [Condition], type_: &str) -> (&'a str, &'a str) {
        let c = conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("{type_} is set"));
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn the_phase_sets_ready_and_progressing_the_same_way_for_backups_and_restores() {
        let mut backup = BackupStatus::default();
        backup.set_phase(RUNNING, Common::JobStarted, "m", Some(1));
        assert_eq!(condition(&backup.conditions, "Progressing"), ("True", "JobStarted"));
        assert_eq!(condition(&backup.conditions, "Ready"), ("False", "JobStarted"));
        assert!(!backup.is_finished());
        backup.set_phase(SUCCEEDED, Common::BackupStored, "m", Some(1));
        assert_eq!(condition(&backup.conditions, "Progressing"), ("False", "BackupStored"));
        assert_eq!(condition(&backup.conditions, "Ready"), ("True", "BackupStored"));
        assert!(backup.is_finished() && backup.succeeded());

        let mut restore = RestoreStatus::default();
        restore.set_phase(PENDING, Common::WaitingForBackup, "m", None);
        assert_eq!(condition(&restore.conditions, "Progressing"), ("False", "WaitingForBackup"));
        restore.set_phase(RESTORING, Common::TargetCreated, "m", None);
        assert_eq!(condition(&restore.conditions, "Progressing"), ("True", "TargetCreated"));
        restore.set_phase(FAILED, Common::JobFailed, "m", None);
        assert_eq!(condition(&restore.conditions, "Ready"), ("False", "JobFailed"));
        assert!(restore.is_finished());
    }

    #[test]
    fn reports_fill_the_status() {
        let mut status = BackupStatus::default();
        status.record(&ObjectReport {
            url: "s3://b/p/main/k.db".into(),
            key: "main/k.db".into(),
            bytes: 4096,
            sha256: "ab".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:09Z".into(),
        });
        assert_eq!(status.location.as_deref(), Some("s3://b/p/main/k.db"));
        assert_eq!((status.key.as_deref(), status.size), (Some("main/k.db"), Some(4096)));
        assert_eq!(status.stored_size.as_deref(), Some("4.0 KiB"));
        assert_eq!(status.completed_at().map(|t| t.timestamp()), Some(1_767_225_609));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(12_900_000), "12.3 MiB");
        assert_eq!(human_size(5 << 30), "5.0 GiB");
        assert_eq!(human_size(-1), "0 B", "a negative size never reaches the status, and never panics");
    }

    #[test]
    fn the_core_flattens_into_an_operator_status() {
        #[derive(Deserialize, Serialize, Default, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        struct Status {
            #[serde(flatten)]
            common: BackupStatus,
            revision: Option<i64>,
        }
        let json = serde_json::json!({"phase": "Succeeded", "key": "k", "revision": 3, "conditions": []});
        let status: Status = serde_json::from_value(json.clone()).expect("parses");
        assert_eq!((status.common.key.as_deref(), status.revision), (Some("k"), Some(3)));
        assert_eq!(serde_json::to_value(&status).expect("json"), json);
        let schema = serde_json::to_value(schemars::schema_for!(Status)).expect("schema");
        for field in ["phase", "location", "key", "size", "sha256", "startTime", "completionTime", "revision"] {
            assert!(schema["properties"][field].is_object(), "{field} in {schema}");
        }
    }
}
