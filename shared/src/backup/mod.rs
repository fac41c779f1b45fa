//! Backups as every operator does them, so that no operator re-implements them:
//!
//! - [`BackupPolicy`]: what a cluster resource embeds (`spec.backup`): when to take a
//!   backup, which to keep, where. Doc comments of these types are `kubectl explain`
//!   descriptions.
//! - [`schedule`]: the cron schedule (validation and due slots) and retention ages.
//! - [`job`]: the Job that runs a backup or restore task in a pod — its skeleton, its S3
//!   parameters, its phase, and the JSON report it leaves in its termination message.
//! - [`scheduled`]: backups created on the policy's schedule, and their retention.
//! - [`spec`]: the spec core of every backup resource ([`BackupSpec`], read through
//!   [`HasBackupSpec`]) and what a restore loads ([`RestoreSource`]).
//! - [`status`]: the status core of every backup and restore resource, the phases'
//!   conditions, and [`BackupLocation`], an explicit backup object.
//! - [`controller`]: the backup controller (resource → Job → status), with the operator's
//!   part behind [`controller::BackupResource`].
//! - [`restore`]: the restore controller (resource → new cluster → loaded), with the
//!   operator's part behind [`restore::RestoreResource`].
//! - [`JobDeadline`]: how long a backup or restore Job may run (`activeDeadlineSeconds`).

pub mod controller;
pub mod job;
pub mod restore;
pub mod schedule;
pub mod scheduled;
pub mod spec;
pub mod status;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use schedule::{Schedule, ScheduleError, parse_age};
pub use spec::{BackupSpec, HasBackupSpec, RestoreSource};
pub use status::{BackupLocation, BackupStatus, RestoreStatus};

use crate::s3::{RetentionPolicy, S3Location};
use crate::{Error, Result};

/// Phase of a backup or restore that has not started yet.
pub const PENDING: &str = "Pending";
/// Phase of a backup whose Job runs.
pub const RUNNING: &str = "Running";
/// Phase of a restore while its target is created and loaded.
pub const RESTORING: &str = "Restoring";
/// Final phase of a backup or restore that worked.
pub const SUCCEEDED: &str = "Succeeded";
/// Final phase of a backup or restore that did not; it is never retried.
pub const FAILED: &str = "Failed";

/// Scheduled backups and their retention.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupPolicy {
    /// When to take a backup: a five-field cron expression (minute hour day-of-month
    /// month day-of-week) such as `0 3 * * *` or `30 2 * * MON-FRI`, in `timeZone`.
    #[schemars(length(min = 9, max = 128))]
    pub schedule: String,

    /// The IANA time zone the schedule's times are in, such as `Europe/Berlin`; UTC when
    /// unset. Across a change of clock no slot is lost or doubled: a slot in the skipped
    /// hour runs when the clock resumes, one in the repeated hour runs once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: Option<String>,

    /// Which backups to keep; older ones are deleted from S3.
    #[serde(default)]
    pub retention: Retention,

    /// Where backups are stored.
    pub location: S3Location,

    /// How long each scheduled backup's Job may run (see the backup resource's field).
    #[serde(flatten)]
    pub deadline: JobDeadline,
}

/// Default of [`JobDeadline`]: six hours, room for a large dump on a slow store.
pub const DEFAULT_DEADLINE_SECONDS: i64 = 6 * 3600;
/// Shortest deadline accepted: a task's pod needs time to be scheduled and pull images.
pub const MIN_DEADLINE_SECONDS: i64 = 60;
/// Longest deadline accepted: a week; anything longer is a hung Job, not a slow one.
pub const MAX_DEADLINE_SECONDS: i64 = 7 * 24 * 3600;

/// How long a backup or restore Job may run: without a bound, a task that hangs (a stuck
/// connection, an S3 endpoint that stops answering) holds its Job, and the rolls and
/// scale-ins that wait for a running backup, forever. Embedded (flattened) in the backup
/// and restore resources and in the cluster's backup policy.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobDeadline {
    /// Seconds the Job may run before Kubernetes stops it (the Job's
    /// activeDeadlineSeconds); the backup or restore then fails with reason
    /// DeadlineExceeded. Between 60 and 604800 (a week). Unset: the cluster's
    /// spec.backup.activeDeadlineSeconds for a backup, else 21600 (six hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = MIN_DEADLINE_SECONDS, max = MAX_DEADLINE_SECONDS))]
    pub active_deadline_seconds: Option<i64>,
}

impl JobDeadline {
    /// The deadline in seconds: this one, else `fallback`'s (the cluster's policy), else
    /// [`DEFAULT_DEADLINE_SECONDS`]. Kept within the accepted bounds, which the CRD schema
    /// enforces anyway, so that a Job is never created with a deadline the API refuses.
    pub fn seconds(&self, fallback: Option<&JobDeadline>) -> i64 {
        self.active_deadline_seconds
            .or_else(|| fallback.and_then(|f| f.active_deadline_seconds))
            .unwrap_or(DEFAULT_DEADLINE_SECONDS)
            .clamp(MIN_DEADLINE_SECONDS, MAX_DEADLINE_SECONDS)
    }
}

/// Which backups are kept. A backup is deleted when either limit says so; the newest
/// successful backup is never deleted.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// Keep at most this many backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub keep_last: Option<i32>,

    /// Delete backups older than this, e.g. `7d`, `36h` (units s, m, h, d).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[1-9][0-9]*[smhd]$"))]
    pub max_age: Option<String>,
}

impl BackupPolicy {
    /// Checks what the CRD schema cannot: the cron expression and its time zone, the
    /// retention age and count, the bucket. `field` is the policy's path in the resource
    /// (`spec.backup`), so that errors name the offending field.
    pub fn validate(&self, field: &str) -> Result<()> {
        self.parsed_schedule(field)?;
        if let Some(age) = &self.retention.max_age
            && parse_age(age).is_none()
        {
            return Err(Error::invalid_spec(
                format!("{field}.retention.maxAge"),
                format!("{age:?} is not a duration like 7d or 36h"),
            ));
        }
        if self.retention.keep_last.is_some_and(|n| n < 1) {
            return Err(Error::invalid_spec(format!("{field}.retention.keepLast"), "must be at least 1"));
        }
        if self.location.bucket.is_empty() {
            return Err(Error::invalid_spec(format!("{field}.location.bucket"), "must not be empty"));
        }
        Ok(())
    }

    /// The schedule in its time zone; an error names `{field}.schedule` or
    /// `{field}.timeZone`, whichever is wrong.
    pub fn parsed_schedule(&self, field: &str) -> Result<Schedule> {
        Schedule::in_zone(&self.schedule, self.time_zone.as_deref()).map_err(|e| {
            let which = if matches!(e, ScheduleError::TimeZone(_)) { "timeZone" } else { "schedule" };
            Error::invalid_spec(format!("{field}.{which}"), e.to_string())
        })
    }

    /// The S3 store's retention policy for this policy. Values that do not validate are
    /// left out rather than guessed at (a policy that keeps more, never less).
    pub fn retention_policy(&self) -> RetentionPolicy {
        RetentionPolicy {
            keep_last: self.retention.keep_last.and_then(|n| u32::try_from(n).ok()),
            max_age: self.retention.max_age.as_deref().and_then(parse_age),
        }
    }
}

/// The object key of backup `backup` of `cluster`: under the cluster's name (the prefix
/// retention works on), named after the time the backup was created and the backup, so
/// that a listing sorts by time and the key is known before the backup runs.
pub fn object_key(cluster: &str, backup: &str, created: DateTime<Utc>, extension: &str) -> String {
    format!("{cluster}/{}-{backup}.{extension}", created.format("%Y%m%dT%H%M%SZ"))
}

/// When an object was created, from its metadata (whole seconds, as the API server keeps it).
pub fn created_at(meta: &ObjectMeta) -> Option<DateTime<Utc>> {
    meta.creation_timestamp.as_ref().and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::S3CredentialsSecretRef;
    use chrono::TimeZone;
    use std::time::Duration;

    fn policy(schedule: &str, keep_last: Option<i32>, max_age: Option<&str>) -> BackupPolicy {
        BackupPolicy {
            schedule: schedule.into(),
            time_zone: None,
            retention: Retention { keep_last, max_age: max_age.map(Into::into) },
            location: S3Location::new("b", "p", S3CredentialsSecretRef::new("s")),
            deadline: JobDeadline::default(),
        }
    }

    fn field_of(e: Error) -> String {
        match e {
            Error::InvalidSpec { field, .. } => field,
            other => panic!("expected InvalidSpec, got {other}"),
        }
    }

    #[test]
    fn policies_are_validated_naming_the_field() {
        policy("0 3 * * *", Some(7), Some("7d")).validate("spec.backup").expect("valid");
        let invalid = |p: BackupPolicy| field_of(p.validate("spec.backup").expect_err("invalid"));
        assert_eq!(invalid(policy("0 3 * *", None, None)), "spec.backup.schedule");
        assert_eq!(invalid(policy("0 3 * * MOON", None, None)), "spec.backup.schedule");
        let mut zoned = policy("0 3 * * *", None, None);
        zoned.time_zone = Some("Europe/Berlin".into());
        zoned.validate("spec.backup").expect("a known zone");
        zoned.time_zone = Some("Europe/Berlinn".into());
        assert_eq!(invalid(zoned), "spec.backup.timeZone");
        assert_eq!(invalid(policy("0 3 * * *", None, Some("7w"))), "spec.backup.retention.maxAge");
        assert_eq!(invalid(policy("0 3 * * *", Some(0), None)), "spec.backup.retention.keepLast");
        let mut p = policy("0 3 * * *", None, None);
        p.location.bucket.clear();
        assert_eq!(invalid(p), "spec.backup.location.bucket");
    }

    #[test]
    fn retention_follows_the_policy() {
        let r = policy("0 3 * * *", Some(7), Some("36h")).retention_policy();
        assert_eq!(r.keep_last, Some(7));
        assert_eq!(r.max_age, Some(Duration::from_secs(36 * 3600)));
        assert!(policy("0 3 * * *", None, None).retention_policy().is_empty());
    }

    #[test]
    fn deadlines_fall_back_to_the_policy_then_six_hours() {
        let set = |s| JobDeadline { active_deadline_seconds: Some(s) };
        assert_eq!(JobDeadline::default().seconds(None), 21_600);
        assert_eq!(JobDeadline::default().seconds(Some(&JobDeadline::default())), 21_600);
        assert_eq!(JobDeadline::default().seconds(Some(&set(900))), 900, "the cluster's policy");
        assert_eq!(set(120).seconds(Some(&set(900))), 120, "the resource's own wins");
        assert_eq!(set(1).seconds(None), MIN_DEADLINE_SECONDS, "never below what the schema accepts");
        assert_eq!(set(i64::MAX).seconds(None), MAX_DEADLINE_SECONDS);
    }

    #[test]
    fn the_deadline_is_a_bounded_field_of_the_embedding_resource() {
        let schema = serde_json::to_value(schemars::schema_for!(BackupPolicy)).expect("schema");
        let field = &schema["properties"]["activeDeadlineSeconds"];
        assert_eq!((field["minimum"].as_i64(), field["maximum"].as_i64()), (Some(60), Some(604_800)), "{schema}");
        let p: BackupPolicy = serde_json::from_value(serde_json::json!({
            "schedule": "0 3 * * *",
            "location": {"bucket": "b", "credentialsSecret": {"name": "s"}},
            "activeDeadlineSeconds": 600,
        }))
        .expect("parses");
        assert_eq!(p.deadline.active_deadline_seconds, Some(600));
    }

    #[test]
    fn keys_sort_by_time_under_the_cluster() {
        let t = Utc.with_ymd_and_hms(2026, 11, 29, 23, 5, 9).single().expect("valid time");
        assert_eq!(object_key("db", "nightly", t, "sql"), "db/20261129T230509Z-nightly.sql");
    }
}
