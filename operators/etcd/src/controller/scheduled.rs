//! Scheduled snapshots and their retention, through the shared
//! [`statecraft_shared::backup::scheduled`] (the same code as MySQL's): when a slot of
//! `spec.backup.schedule` is due, an EtcdBackup named `<cluster>-<yyyymmdd-hhmm>` is
//! created, then retention deletes expired snapshots from S3 and their EtcdBackups. The
//! newest snapshot is never deleted.

use chrono::{DateTime, Utc};
use statecraft_shared::Result;
use statecraft_shared::backup::scheduled::{self, ScheduledBackup};

use super::Context;
use crate::api::{EtcdBackup, EtcdCluster};
use crate::build::jobs::CLUSTER_LABEL;

/// Label on the EtcdBackups the schedule creates.
pub const SCHEDULED_LABEL: &str = "etcd.statecraft.io/scheduled";

impl ScheduledBackup for EtcdBackup {
    const CLUSTER_LABEL: &'static str = CLUSTER_LABEL;
    const SCHEDULED_LABEL: &'static str = SCHEDULED_LABEL;

    /// The key the controller chose when it started the Job (none before).
    fn object_key(&self) -> Option<String> {
        self.status.as_ref()?.common.key.clone()
    }
}

/// Creates the EtcdBackup of the due slot, if any and not yet done (`last` remembers the
/// slot handled by the caller's task), then applies retention. Clusters without a backup
/// policy have nothing to do.
pub async fn run(ctx: &Context, cluster: &EtcdCluster, last: &mut Option<DateTime<Utc>>) -> Result<()> {
    let Some(policy) = &cluster.spec.backup else { return Ok(()) };
    scheduled::run::<EtcdBackup, _>(&ctx.rt, cluster, policy, last).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::EtcdBackupStatus;
    use statecraft_shared::backup::{BackupSpec, BackupStatus, HasBackupSpec};

    #[test]
    fn a_backup_is_known_by_the_key_its_status_records() {
        let mut b = EtcdBackup::from_backup_spec(BackupSpec::of_cluster("main"));
        assert_eq!(b.spec.backup.cluster_name, "main");
        assert_eq!(b.object_key(), None, "not started");
        b.status = Some(EtcdBackupStatus {
            common: BackupStatus { key: Some("main/k.db".into()), ..Default::default() },
            ..Default::default()
        });
        assert_eq!(b.object_key().as_deref(), Some("main/k.db"));
        assert_eq!(b.spec.backup.location, None);
    }
}
