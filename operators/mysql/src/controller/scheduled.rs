//! Scheduled backups and their retention, driven by the clustering task through the shared
//! [`statecraft_shared::backup::scheduled`]: when a slot of `spec.backup.schedule` is due,
//! a MySQLBackup named after the slot is created, and retention then deletes the expired
//! objects from S3 and the MySQLBackups that described them. The newest backup is never
//! deleted.

use chrono::{DateTime, Utc};
use statecraft_shared::Result;
use statecraft_shared::backup::created_at;
use statecraft_shared::backup::scheduled::{self, ScheduledBackup};

use super::Context;
use super::backup::object_key;
use crate::api::{MySQLBackup, MySQLCluster};
use crate::backup::binlog_prefix;
use crate::build::jobs::CLUSTER_LABEL;

/// Label on the MySQLBackups the schedule creates.
pub const SCHEDULED_LABEL: &str = "mysql.statecraft.io/scheduled";

impl ScheduledBackup for MySQLBackup {
    const CLUSTER_LABEL: &'static str = CLUSTER_LABEL;
    const SCHEDULED_LABEL: &'static str = SCHEDULED_LABEL;

    /// Known from the creation time alone: the key is fixed before the dump runs.
    fn object_key(&self) -> Option<String> {
        let created = created_at(&self.metadata)?;
        Some(object_key(&self.spec.backup.cluster_name, self.metadata.name.as_deref()?, created))
    }

    /// The binary logs archived with the backup: they roll the previous backup forward,
    /// which expired before this one.
    fn companion_prefix(key: &str) -> Option<String> {
        Some(binlog_prefix(key))
    }
}

/// Creates the backup of the due slot, if any and not yet done (`last` remembers the slot
/// handled by this task), then applies retention.
pub async fn run(ctx: &Context, cluster: &MySQLCluster, last: &mut Option<DateTime<Utc>>) -> Result<()> {
    let Some(policy) = &cluster.spec.backup else { return Ok(()) };
    scheduled::run::<MySQLBackup, _>(&ctx.rt, cluster, policy, last).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use statecraft_shared::backup::{BackupSpec, HasBackupSpec};

    #[test]
    fn a_backup_knows_its_object_key_from_its_creation_time() {
        let mut b = MySQLBackup::from_backup_spec(BackupSpec::of_cluster("db"));
        assert_eq!(b.object_key(), None, "not created yet");
        let t = Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 1).unwrap();
        b.metadata.name = Some("db-20261130-0300".into());
        b.metadata.creation_timestamp = Some(Time(Timestamp::from_second(t.timestamp()).unwrap()));
        assert_eq!(b.object_key().as_deref(), Some("db/20261130T030001Z-db-20261130-0300.sql"));
        assert_eq!(b.spec.backup.location, None);
        let key = b.object_key().unwrap();
        assert_eq!(
            MySQLBackup::companion_prefix(&key).as_deref(),
            Some("_binlogs/db/20261130T030001Z-db-20261130-0300/")
        );
    }
}
