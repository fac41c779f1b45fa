//! Scheduled backups and their retention, the same for every operator: when a slot of the
//! cluster's `spec.backup.schedule` is due, a backup resource named after the slot is
//! created (creating it twice is harmless: the second create finds it), then retention
//! deletes the expired objects from S3 and the backup resources that described them. The
//! newest object is never deleted (see [`select_for_deletion`](crate::s3::select_for_deletion)),
//! so a cluster always keeps its latest successful backup: only successful backups leave
//! an object, since uploads are all or nothing.

use std::fmt::Debug;

use chrono::{DateTime, Utc};
use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::info;

use super::{BackupPolicy, BackupSpec, HasBackupSpec};
use crate::reason::Common;
use crate::runner::Runtime;
use crate::s3::{S3Location, S3Store};
use crate::{Error, Result};

/// A backup resource (`MySQLBackup`, `EtcdBackup`) as the schedule sees it: it creates
/// them from [`BackupSpec::of_cluster`] and reads their location through their
/// [`HasBackupSpec`].
pub trait ScheduledBackup:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + HasBackupSpec
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
{
    /// Label naming the cluster on the backups of a cluster.
    const CLUSTER_LABEL: &'static str;
    /// Label (value `true`) on the backups the schedule created.
    const SCHEDULED_LABEL: &'static str;

    /// The key, relative to the location's prefix, of the object this backup stored (or
    /// will store), if it can be known.
    fn object_key(&self) -> Option<String>;

    /// A prefix, relative to the location's prefix, of further objects that belong to the
    /// backup stored under `key` and expire with it (MySQL: its archived binary logs).
    /// They must live outside the cluster's prefix, which retention counts backups under.
    fn companion_prefix(_key: &str) -> Option<String> {
        None
    }
}

/// The name of the scheduled backup of `cluster` for `slot`.
pub fn backup_name(cluster: &str, slot: DateTime<Utc>) -> String {
    format!("{cluster}-{}", slot.format("%Y%m%d-%H%M"))
}

/// Creates the backup of the due slot, if any and not yet handled (`last` remembers the
/// slot handled by the caller's task), then applies retention. `cluster` is the cluster
/// resource (for its name and for Events), `policy` its backup policy.
pub async fn run<B, C>(rt: &Runtime, cluster: &C, policy: &BackupPolicy, last: &mut Option<DateTime<Utc>>) -> Result<()>
where
    B: ScheduledBackup,
    C: Resource<DynamicType = ()>,
{
    let schedule = policy.parsed_schedule("spec.backup")?;
    let Some(slot) = schedule.due(Utc::now()) else { return Ok(()) };
    if *last == Some(slot) {
        return Ok(());
    }
    let name = cluster.name_any();
    let mut backup = B::from_backup_spec(BackupSpec::of_cluster(&name));
    let meta = backup.meta_mut();
    meta.name = Some(backup_name(&name, slot));
    meta.namespace = Some(rt.namespace.clone());
    meta.labels =
        Some([(B::CLUSTER_LABEL.to_string(), name.clone()), (B::SCHEDULED_LABEL.to_string(), "true".into())].into());
    let backups: Api<B> = Api::namespaced(rt.client.clone(), &rt.namespace);
    match backups.create(&PostParams::default(), &backup).await {
        Ok(_) => {
            let note = format!("created {} {} for the slot {slot}", B::kind(&()), backup.name_any());
            rt.events.normal(cluster, Common::BackupScheduled, "Schedule", note).await;
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(Error::kube(format!("creating the scheduled {}", B::kind(&())), e)),
    }
    *last = Some(slot);
    expire::<B, C>(rt, cluster, policy).await
}

/// Deletes the expired objects of `cluster` from its policy's store, then the backup
/// resources whose objects they were.
async fn expire<B, C>(rt: &Runtime, cluster: &C, policy: &BackupPolicy) -> Result<()>
where
    B: ScheduledBackup,
    C: Resource<DynamicType = ()>,
{
    let retention = policy.retention_policy();
    if retention.is_empty() {
        return Ok(());
    }
    let name = cluster.name_any();
    let store = S3Store::from_secret(rt.client.clone(), &rt.namespace, &policy.location).await?;
    let doomed = store.apply_retention(&format!("{name}/"), &retention, Utc::now()).await?;
    if doomed.is_empty() {
        return Ok(());
    }
    let keys: Vec<String> = doomed.into_iter().map(|o| o.key).collect();
    for prefix in keys.iter().filter_map(|k| B::companion_prefix(k)) {
        for o in store.list(&prefix).await? {
            store.delete(&o.key).await?;
        }
    }
    let backups: Api<B> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let listed = backups
        .list(&ListParams::default().labels(&format!("{}={name}", B::CLUSTER_LABEL)))
        .await
        .map_err(|e| Error::kube(format!("listing the cluster's {}s", B::kind(&())), e))?;
    for b in expired(&listed.items, &keys, &policy.location) {
        match backups.delete(&b.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("deleting expired {} {}", B::kind(&()), b.name_any()), e)),
        }
    }
    info!(cluster = %name, deleted = keys.len(), "retention applied");
    let note = format!("deleted {} expired backup(s): {}", keys.len(), keys.join(", "));
    rt.events.normal(cluster, Common::BackupsExpired, "Retention", note).await;
    Ok(())
}

/// The backups among `backups` whose objects are among the deleted `keys` of the policy's
/// `location`. A backup stored elsewhere keeps its resource, even under the same key.
fn expired<'a, B: ScheduledBackup>(backups: &'a [B], keys: &[String], location: &S3Location) -> Vec<&'a B> {
    backups
        .iter()
        .filter(|b| b.backup_spec().location.as_ref().is_none_or(|l| l == location))
        .filter(|b| b.object_key().is_some_and(|k| keys.contains(&k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::S3CredentialsSecretRef;
    use chrono::TimeZone;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    /// A stand-in backup resource: a ConfigMap whose data holds the key, and a spec.
    #[derive(Clone, Debug, Serialize, serde::Deserialize)]
    struct Fake(ConfigMap, BackupSpec);

    impl Resource for Fake {
        type DynamicType = ();
        type Scope = NamespaceResourceScope;
        fn kind(_: &()) -> std::borrow::Cow<'_, str> {
            "FakeBackup".into()
        }
        fn group(_: &()) -> std::borrow::Cow<'_, str> {
            "test".into()
        }
        fn version(_: &()) -> std::borrow::Cow<'_, str> {
            "v1".into()
        }
        fn plural(_: &()) -> std::borrow::Cow<'_, str> {
            "fakebackups".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.0.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.0.metadata
        }
    }

    impl HasBackupSpec for Fake {
        fn backup_spec(&self) -> &BackupSpec {
            &self.1
        }
        fn from_backup_spec(spec: BackupSpec) -> Self {
            Fake(ConfigMap::default(), spec)
        }
    }

    impl ScheduledBackup for Fake {
        const CLUSTER_LABEL: &'static str = "test/cluster";
        const SCHEDULED_LABEL: &'static str = "test/scheduled";
        fn object_key(&self) -> Option<String> {
            self.0.data.as_ref()?.get("key").cloned()
        }
    }

    fn fake(name: &str, key: Option<&str>, location: Option<S3Location>) -> Fake {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.data = key.map(|k| [("key".to_string(), k.to_string())].into());
        Fake(cm, BackupSpec { location, ..BackupSpec::of_cluster("c") })
    }

    #[test]
    fn names_follow_the_slot() {
        let slot = Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 0).single().expect("valid time");
        assert_eq!(backup_name("db", slot), "db-20261130-0300");
    }

    #[test]
    fn only_backups_of_deleted_objects_in_the_policy_store_expire() {
        let policy_store = S3Location::new("bucket", "p", S3CredentialsSecretRef::new("s"));
        let elsewhere = S3Location::new("other", "p", S3CredentialsSecretRef::new("s"));
        let backups = vec![
            fake("old", Some("c/1-old.db"), None),
            fake("explicit", Some("c/2-explicit.db"), Some(policy_store.clone())),
            fake("elsewhere", Some("c/1-old.db"), Some(elsewhere)),
            fake("failed", None, None),
            fake("kept", Some("c/3-kept.db"), None),
        ];
        let keys = vec!["c/1-old.db".to_string(), "c/2-explicit.db".to_string()];
        let names: Vec<String> = expired(&backups, &keys, &policy_store).iter().map(|b| b.name_any()).collect();
        assert_eq!(names, ["old", "explicit"]);
    }
}
