//! Backup policy types every operator's cluster resource embeds (`spec.backup`): when to take
//! a backup and which to keep. Doc comments are `kubectl explain` descriptions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::s3::S3Location;

/// Scheduled backups and their retention.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupPolicy {
    /// When to take a backup, a five-field cron expression in UTC such as `0 3 * * *`.
    #[schemars(length(min = 9, max = 128))]
    pub schedule: String,

    /// Which backups to keep; older ones are deleted from S3.
    #[serde(default)]
    pub retention: Retention,

    /// Where backups are stored.
    pub location: S3Location,
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
