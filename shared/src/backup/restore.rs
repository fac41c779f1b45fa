//! The restore controller every operator runs: a restore resource creates a new cluster
//! from a backup and never touches an existing one. Phases: Pending → Restoring →
//! Succeeded | Failed, never back. What differs between systems — how the data gets into
//! the new cluster (a Job loading a dump, an init container restoring a snapshot) — is the
//! operator's [`RestoreResource`]; finding the backup object, refusing a foreign target
//! and the phases are decided here, once.
//!
//! One reconcile: a finished restore is left alone; the source is resolved
//! ([`resolve_source`]: `spec.location`, or the object of the backup `spec.backupName`
//! names once it succeeded), the operator prepares what else it needs
//! ([`RestoreResource::prepare`]), the store's Secret is checked, the target is created (or
//! found, created by this restore), and the operator reports how loading it goes
//! ([`RestoreResource::load`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::api::PostParams;
use kube::core::object::HasStatus;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use super::controller::{BackupResource, Ending, Object, Status};
use super::status::{BackupLocation, RestoreStatus};
use super::{FAILED, HasBackupSpec, PENDING, RESTORING, RestoreSource, SUCCEEDED, created_at, object_key};
use crate::reason::{Common, Reason};
use crate::runner::Runtime;
use crate::s3::check_credentials;
use crate::status::patch_status;
use crate::{Error, Result};

/// Where a restore's data is.
#[derive(Clone, Debug, PartialEq)]
pub struct Source<B> {
    /// The store and the object's key.
    pub location: BackupLocation,
    /// The object's expected SHA-256, when a backup resource recorded it.
    pub sha256: Option<String>,
    /// The backup resource that describes it, unless the restore names an object directly.
    pub backup: Option<B>,
}

/// A step that cannot be taken yet: the phase stays as it is with this reason and message,
/// and the restore is looked at again after `after`.
#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    /// Condition reason.
    pub reason: Reason,
    /// What it waits for.
    pub message: String,
    /// When to look again.
    pub after: Duration,
}

/// How loading the target goes, as the operator sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Still restoring.
    Restoring(Wait),
    /// The target holds the data: the restore succeeded (a `RestoreSucceeded` Event).
    Succeeded(String),
    /// Loading failed for good (a `RestoreFailed` Event).
    Failed {
        /// Condition reason.
        reason: Reason,
        /// What failed, and what to do.
        message: String,
    },
}

/// A restore resource (`MySQLRestore`, `EtcdRestore`) as the shared controller drives it.
/// Its status (`HasStatus`, which the `CustomResource` derive implements) is the
/// operator's own type, which flattens a [`RestoreStatus`] (or is one).
pub trait RestoreResource: Object + HasStatus<Status: Status> {
    /// The backup resource it restores from.
    type Backup: BackupResource;
    /// What [`prepare`](Self::prepare) works out for [`load`](Self::load).
    type Plan: Send;

    /// Annotation on a cluster created by a restore, naming the restore.
    const RESTORED_BY_ANNOTATION: &'static str;
    /// The backup resource's kind, for messages.
    const BACKUP_KIND: &'static str;

    /// What to restore from (`spec.backupName` or `spec.location`): the core the
    /// operator's spec flattens.
    fn restore_source(&self) -> &RestoreSource;
    /// `spec.target.name`.
    fn target_name(&self) -> &str;
    /// The shared core of the operator's status.
    fn common(status: &Self::Status) -> &RestoreStatus;
    /// The same, to write.
    fn common_mut(status: &mut Self::Status) -> &mut RestoreStatus;

    /// Checks of the spec that the CRD schema cannot make.
    fn validate(&self) -> Result<()>;

    /// What loading `source` needs besides it, or what it waits for. May record into
    /// `status`.
    fn prepare(
        &self,
        ctx: &<Self::Backup as BackupResource>::Context,
        source: &Source<Self::Backup>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<std::result::Result<Self::Plan, Wait>>> + Send;

    /// The cluster to create (its metadata is set by the controller).
    fn target(&self, source: &Source<Self::Backup>) -> <Self::Backup as BackupResource>::Cluster;

    /// How loading the data into `cluster` (created by this restore) goes; starts what
    /// loads it when due.
    fn load(
        &self,
        ctx: &<Self::Backup as BackupResource>::Context,
        cluster: &<Self::Backup as BackupResource>::Cluster,
        source: &Source<Self::Backup>,
        plan: Self::Plan,
    ) -> impl Future<Output = Result<Progress>> + Send;
}

/// Reconciles one restore.
pub async fn reconcile<R: RestoreResource>(
    restore: Arc<R>,
    ctx: Arc<<R::Backup as BackupResource>::Context>,
) -> Result<Action> {
    let rt = R::Backup::runtime(&ctx);
    let old = restore.status().cloned();
    let mut status = old.clone().unwrap_or_default();
    if R::common(&status).is_finished() {
        return Ok(Action::await_change());
    }
    let generation = restore.meta().generation;
    let result = match Ending::of(step(&*restore, &ctx, &mut status).await) {
        Ending::Done(action) => Ok(action),
        Ending::Failed(reason, message) => {
            R::common_mut(&mut status).set_phase(FAILED, reason, &message, generation);
            rt.events.warning(&*restore, reason, "Restore", message).await;
            Ok(Action::await_change())
        }
        Ending::Retry(e) => Err(e),
    };
    let api: Api<R> = Api::namespaced(rt.client.clone(), &rt.namespace);
    patch_status(&api, &*restore, old.as_ref(), &status, rt.field_manager).await?;
    result
}

async fn step<R: RestoreResource>(
    restore: &R,
    ctx: &<R::Backup as BackupResource>::Context,
    status: &mut R::Status,
) -> Result<Action> {
    let rt = R::Backup::runtime(ctx);
    let generation = restore.meta().generation;
    restore.validate()?;
    let waiting = |status: &mut R::Status, wait: Wait| {
        R::common_mut(status).set_phase(PENDING, wait.reason, &wait.message, generation);
        Ok(Action::requeue(wait.after))
    };
    let source = match resolve_source(rt, restore).await? {
        Ok(source) => source,
        Err(wait) => return waiting(status, wait),
    };
    let plan = match restore.prepare(ctx, &source, status).await? {
        Ok(plan) => plan,
        Err(wait) => return waiting(status, wait),
    };
    // What loads the data will be given the store's Secret: only one that opted in.
    let explicit = restore.restore_source().location.is_some();
    let field = if explicit { "spec.location.store.credentialsSecret" } else { "spec.backupName" };
    check_credentials(rt.client.clone(), &rt.namespace, &source.location.store, field).await?;
    let cluster = create_target(rt, restore, &source).await?;
    let progress = restore.load(ctx, &cluster, &source, plan).await?;
    let common = R::common_mut(status);
    Ok(match progress {
        Progress::Restoring(wait) => {
            common.set_phase(RESTORING, wait.reason, &wait.message, generation);
            Action::requeue(wait.after)
        }
        Progress::Succeeded(message) => {
            common.set_phase(SUCCEEDED, Common::Restored, &message, generation);
            rt.events.normal(restore, Common::RestoreSucceeded, "Restore", message).await;
            Action::await_change()
        }
        Progress::Failed { reason, message } => {
            common.set_phase(FAILED, reason, &message, generation);
            rt.events.warning(restore, Common::RestoreFailed, "Restore", message).await;
            Action::await_change()
        }
    })
}

/// The target cluster: created here with the restore's annotation, or already created by
/// this restore. Any other cluster of that name is refused: a restore never overwrites one.
async fn create_target<R: RestoreResource>(
    rt: &Runtime,
    restore: &R,
    source: &Source<R::Backup>,
) -> Result<<R::Backup as BackupResource>::Cluster> {
    let kind = R::Backup::CLUSTER_KIND;
    let name = restore.name_any();
    let target = restore.target_name();
    let clusters: Api<<R::Backup as BackupResource>::Cluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    match clusters.get_opt(target).await.map_err(|e| Error::kube("reading the target cluster", e))? {
        Some(c) if created_by(&c, R::RESTORED_BY_ANNOTATION, &name) => Ok(c),
        Some(_) => Err(Error::invalid_spec(
            "spec.target.name",
            format!("{kind} {target} already exists; a restore never overwrites a cluster"),
        )),
        None => {
            let mut new = restore.target(source);
            let meta = new.meta_mut();
            meta.name = Some(target.to_string());
            meta.namespace = Some(rt.namespace.clone());
            meta.annotations = Some([(R::RESTORED_BY_ANNOTATION.to_string(), name)].into());
            let created = clusters
                .create(&PostParams::default(), &new)
                .await
                .map_err(|e| Error::kube(format!("creating {kind} {target}"), e))?;
            let message = format!("created {kind} {target} from {}", source.location.key);
            rt.events.normal(restore, Common::TargetCreated, "Restore", message).await;
            Ok(created)
        }
    }
}

/// Whether `cluster` was created by restore `restore` (its annotation names it).
fn created_by(cluster: &impl Resource, annotation: &str, restore: &str) -> bool {
    cluster.meta().annotations.as_ref().and_then(|a| a.get(annotation)).map(String::as_str) == Some(restore)
}

/// Where the restore's data is: `spec.location`, or the object the backup named by
/// `spec.backupName` stored (in its location, else its cluster's policy's). `Ok(Err(wait))`
/// while that backup has not succeeded yet; a missing or failed one is an invalid spec.
pub async fn resolve_source<R: RestoreResource>(
    rt: &Runtime,
    restore: &R,
) -> Result<std::result::Result<Source<R::Backup>, Wait>> {
    let wanted = restore.restore_source();
    if let Some(location) = &wanted.location {
        return Ok(Ok(Source { location: location.clone(), sha256: None, backup: None }));
    }
    let kind = R::BACKUP_KIND;
    let Some(name) = wanted.backup_name.as_deref().filter(|n| !n.is_empty()) else {
        return Err(Error::invalid_spec("spec.backupName", "exactly one of backupName and location must be set"));
    };
    let backups: Api<R::Backup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(backup) = backups.get_opt(name).await.map_err(|e| Error::kube("reading the backup", e))? else {
        return Err(Error::invalid_spec("spec.backupName", format!("{kind} {name} does not exist")));
    };
    let status = backup.status().map(R::Backup::common).cloned().unwrap_or_default();
    match status.phase.as_deref() {
        Some(SUCCEEDED) => {}
        Some(FAILED) => {
            return Err(Error::invalid_spec("spec.backupName", format!("{kind} {name} failed: nothing to restore")));
        }
        _ => {
            return Ok(Err(Wait {
                reason: Common::WaitingForBackup.into(),
                message: format!("{kind} {name} has not succeeded yet"),
                after: super::controller::POLL,
            }));
        }
    }
    let spec = backup.backup_spec();
    let store = match &spec.location {
        Some(location) => location.clone(),
        None => {
            let clusters: Api<<R::Backup as BackupResource>::Cluster> =
                Api::namespaced(rt.client.clone(), &rt.namespace);
            let cluster = clusters
                .get_opt(&spec.cluster_name)
                .await
                .map_err(|e| Error::kube("reading the backed-up cluster", e))?;
            match cluster.as_ref().and_then(R::Backup::policy) {
                Some(policy) => policy.location.clone(),
                None => {
                    return Err(Error::invalid_spec(
                        "spec.backupName",
                        format!("{kind} {name} names no location and its cluster's backup policy is gone"),
                    ));
                }
            }
        }
    };
    // Backups record their key; older ones did not, and stored under the key the
    // controller derives from their creation time.
    let key = match status.key.clone() {
        Some(key) => key,
        None => {
            let created = created_at(backup.meta())
                .ok_or_else(|| Error::Permanent(format!("{kind} {name} has no creation time")))?;
            object_key(&spec.cluster_name, name, created, R::Backup::EXTENSION)
        }
    };
    Ok(Ok(Source { location: BackupLocation { store, key }, sha256: status.sha256, backup: Some(backup) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    #[test]
    fn only_clusters_annotated_with_the_restore_are_its_own() {
        let cluster = |annotations: Option<(&str, &str)>| ConfigMap {
            metadata: ObjectMeta {
                annotations: annotations.map(|(k, v)| [(k.to_string(), v.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let key = "x.statecraft.io/restored-by";
        assert!(created_by(&cluster(Some((key, "r1"))), key, "r1"));
        assert!(!created_by(&cluster(Some((key, "r2"))), key, "r1"), "another restore's");
        assert!(!created_by(&cluster(None), key, "r1"), "made by someone else");
    }
}
