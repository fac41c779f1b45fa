//! Scheduled backups and their retention, driven by the clustering task: when a slot of
//! `spec.backup.schedule` is due, a MySQLBackup named after the slot is created (creating
//! it twice is harmless: the second create finds it), and retention then deletes the
//! expired objects from S3 and the MySQLBackups that described them. The newest backup is
//! never deleted.

use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use statecraft_shared::s3::{RetentionPolicy, S3Store};
use statecraft_shared::{Error, Result};
use tracing::info;

use super::Context;
use super::backup::object_key;
use crate::api::{BackupPolicy, MySQLBackup, MySQLBackupSpec, MySQLCluster};
use crate::build::jobs::CLUSTER_LABEL;
use crate::schedule::Schedule;
use crate::validate::parse_age;

/// Label on the MySQLBackups the schedule creates.
pub const SCHEDULED_LABEL: &str = "mysql.statecraft.io/scheduled";

/// The name of the scheduled backup of `cluster` for `slot`.
pub fn backup_name(cluster: &str, slot: DateTime<Utc>) -> String {
    format!("{cluster}-{}", slot.format("%Y%m%d-%H%M"))
}

/// The shared store's retention policy for a cluster's policy.
pub fn retention(policy: &BackupPolicy) -> RetentionPolicy {
    RetentionPolicy {
        keep_last: policy.retention.keep_last.and_then(|n| u32::try_from(n).ok()),
        max_age: policy.retention.max_age.as_deref().and_then(parse_age).map(Duration::from_secs),
    }
}

/// Creates the backup of the due slot, if any and not yet done (`last` remembers the slot
/// handled by this task), then applies retention.
pub async fn run(ctx: &Context, cluster: &MySQLCluster, last: &mut Option<DateTime<Utc>>) -> Result<()> {
    let Some(policy) = &cluster.spec.backup else { return Ok(()) };
    let Some(slot) = Schedule::parse(&policy.schedule).and_then(|s| s.due(Utc::now())) else { return Ok(()) };
    if *last == Some(slot) {
        return Ok(());
    }
    let rt = &ctx.rt;
    let name = cluster.name_any();
    let backups: Api<MySQLBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let backup = MySQLBackup {
        metadata: ObjectMeta {
            name: Some(backup_name(&name, slot)),
            namespace: Some(rt.namespace.clone()),
            labels: Some(
                [(CLUSTER_LABEL.to_string(), name.clone()), (SCHEDULED_LABEL.to_string(), "true".into())].into(),
            ),
            ..Default::default()
        },
        spec: MySQLBackupSpec { cluster_name: name.clone(), location: None },
        status: None,
    };
    match backups.create(&PostParams::default(), &backup).await {
        Ok(_) => {
            let note = format!("created MySQLBackup {} for the slot {slot}", backup.name_any());
            rt.events.normal(cluster, "BackupScheduled", "Schedule", note).await;
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(Error::kube("creating the scheduled backup", e)),
    }
    *last = Some(slot);
    expire(ctx, cluster, policy).await
}

/// Deletes expired backups of `cluster` from S3, then the MySQLBackups that named them.
async fn expire(ctx: &Context, cluster: &MySQLCluster, policy: &BackupPolicy) -> Result<()> {
    let policy_of_store = retention(policy);
    if policy_of_store.is_empty() {
        return Ok(());
    }
    let rt = &ctx.rt;
    let name = cluster.name_any();
    let store = S3Store::from_secret(rt.client.clone(), &rt.namespace, &policy.location).await?;
    let doomed = store.apply_retention(&format!("{name}/"), &policy_of_store, Utc::now()).await?;
    if doomed.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = doomed.iter().map(|o| o.key.clone()).collect();
    let backups: Api<MySQLBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let listed = backups
        .list(&ListParams::default().labels(&format!("{CLUSTER_LABEL}={name}")))
        .await
        .map_err(|e| Error::kube("listing the cluster's backups", e))?;
    for b in listed.items {
        let created = b.metadata.creation_timestamp.as_ref().and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0));
        if let Some(created) = created
            && keys.iter().any(|k| k.ends_with(&object_key(&name, &b.name_any(), created)))
        {
            backups
                .delete(&b.name_any(), &DeleteParams::default())
                .await
                .map_err(|e| Error::kube(format!("deleting expired MySQLBackup {}", b.name_any()), e))?;
        }
    }
    info!(cluster = %name, deleted = keys.len(), "retention applied");
    let note = format!("deleted {} expired backup(s): {}", keys.len(), keys.join(", "));
    rt.events.normal(cluster, "BackupsExpired", "Retention", note).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Retention;
    use chrono::TimeZone;
    use statecraft_shared::s3::{S3CredentialsSecretRef, S3Location};

    #[test]
    fn names_and_retention_follow_the_policy() {
        let slot = Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 0).unwrap();
        assert_eq!(backup_name("db", slot), "db-20261130-0300");
        let policy = BackupPolicy {
            schedule: "0 3 * * *".into(),
            retention: Retention { keep_last: Some(7), max_age: Some("36h".into()) },
            location: S3Location::new("b", "p", S3CredentialsSecretRef::new("s")),
        };
        let r = retention(&policy);
        assert_eq!(r.keep_last, Some(7));
        assert_eq!(r.max_age, Some(Duration::from_secs(36 * 3600)));
        let none = BackupPolicy { retention: Retention::default(), ..policy };
        assert!(retention(&none).is_empty());
    }
}
