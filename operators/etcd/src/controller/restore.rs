//! The EtcdRestore controller: creates the target EtcdCluster with `spec.bootstrapFrom`
//! naming the snapshot (it never touches an existing cluster), then waits for it to be
//! Ready. The data gets in at bootstrap: the first member's pod restores the snapshot
//! before etcd starts (see [`crate::build::restore`]), and the other members join it.
//! Phases: Pending → Restoring → Succeeded | Failed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::backup::{FAILED, PENDING, SUCCEEDED};
use statecraft_shared::error::ErrorCategory;
use statecraft_shared::names::check_cluster_name;
use statecraft_shared::s3::check_credentials;
use statecraft_shared::status::{ConditionType, is_true, patch_status, set_condition};
use statecraft_shared::{Error, Result};

use super::Context;
use crate::api::{EtcdBackup, EtcdCluster, EtcdRestore, EtcdRestoreStatus, SnapshotSource};
use crate::build::restore::RESTORE_CONTAINER;
use crate::build::{MAX_CLUSTER_NAME, Names};

/// Phase while the target is created and bootstrapped.
pub const RESTORING: &str = "Restoring";
/// Annotation on a cluster created by a restore, naming the restore.
pub const RESTORED_BY_ANNOTATION: &str = "etcd.statecraft.io/restored-by";

const POLL: Duration = Duration::from_secs(5);

/// Reconciles one restore.
pub async fn reconcile(restore: Arc<EtcdRestore>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let api: Api<EtcdRestore> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let old = restore.status.clone();
    let mut status = old.clone().unwrap_or_default();
    if matches!(status.phase.as_deref(), Some(SUCCEEDED | FAILED)) {
        return Ok(Action::await_change());
    }
    let action = match step(&restore, &ctx, &mut status).await {
        Ok(action) => action,
        Err(e) if e.category() == ErrorCategory::InvalidSpec => {
            set_phase(&mut status, &restore, FAILED, e.reason(), &e.to_string());
            rt.events.warning(&*restore, e.reason(), "Restore", e.to_string()).await;
            Action::await_change()
        }
        Err(e) => {
            patch_status(&api, &*restore, old.as_ref(), &status, rt.field_manager).await?;
            return Err(e);
        }
    };
    patch_status(&api, &*restore, old.as_ref(), &status, rt.field_manager).await?;
    Ok(action)
}

/// Sets the phase and its conditions: Ready once the target is, Progressing meanwhile.
fn set_phase(status: &mut EtcdRestoreStatus, restore: &EtcdRestore, phase: &str, reason: &str, message: &str) {
    status.phase = Some(phase.to_string());
    let generation = restore.metadata.generation;
    let conditions = &mut status.conditions;
    set_condition(conditions, ConditionType::Ready, phase == SUCCEEDED, reason, message, generation);
    set_condition(conditions, ConditionType::Progressing, phase == RESTORING, reason, message, generation);
}

/// Where the snapshot is: `spec.source`, or the named backup's object. `Ok(Err(why))`
/// while the backup is still being taken.
async fn source(restore: &EtcdRestore, ctx: &Context) -> Result<std::result::Result<SnapshotSource, String>> {
    if let Some(source) = &restore.spec.source {
        return Ok(Ok(source.clone()));
    }
    let Some(name) = restore.spec.backup_name.as_deref() else {
        return Err(Error::invalid_spec("spec.backupName", "exactly one of backupName and source must be set"));
    };
    let backups: Api<EtcdBackup> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let Some(backup) = backups.get_opt(name).await.map_err(|e| Error::kube("reading the backup", e))? else {
        return Err(Error::invalid_spec("spec.backupName", format!("EtcdBackup {name} does not exist")));
    };
    let status = backup.status.clone().unwrap_or_default();
    match status.phase.as_deref() {
        Some(SUCCEEDED) => {}
        Some(FAILED) => {
            return Err(Error::invalid_spec(
                "spec.backupName",
                format!("EtcdBackup {name} failed: nothing to restore"),
            ));
        }
        _ => return Ok(Err(format!("EtcdBackup {name} has not succeeded yet"))),
    }
    let Some(key) = status.key else {
        return Err(Error::invalid_spec("spec.backupName", format!("EtcdBackup {name} records no object key")));
    };
    let store = match backup.spec.location {
        Some(location) => location,
        None => {
            let clusters: Api<EtcdCluster> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
            let cluster = clusters
                .get_opt(&backup.spec.cluster_name)
                .await
                .map_err(|e| Error::kube("reading the backed-up cluster", e))?;
            match cluster.and_then(|c| c.spec.backup.map(|b| b.location)) {
                Some(location) => location,
                None => {
                    return Err(Error::invalid_spec(
                        "spec.backupName",
                        format!("EtcdBackup {name} names no location and its cluster's backup policy is gone"),
                    ));
                }
            }
        }
    };
    Ok(Ok(SnapshotSource { store, key }))
}

/// The target cluster a restore creates: the given spec, bootstrapped from `source`.
pub fn target(restore: &EtcdRestore, namespace: &str, source: SnapshotSource) -> EtcdCluster {
    let mut spec = restore.spec.target.spec.clone();
    spec.bootstrap_from = Some(source);
    EtcdCluster {
        metadata: ObjectMeta {
            name: Some(restore.spec.target.name.clone()),
            namespace: Some(namespace.to_string()),
            annotations: Some([(RESTORED_BY_ANNOTATION.to_string(), restore.name_any())].into()),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

async fn step(restore: &EtcdRestore, ctx: &Context, status: &mut EtcdRestoreStatus) -> Result<Action> {
    let rt = &ctx.rt;
    let name = restore.name_any();
    let target_name = &restore.spec.target.name;
    let clusters: Api<EtcdCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let existing = clusters.get_opt(target_name).await.map_err(|e| Error::kube("reading the target cluster", e))?;
    let cluster = match existing {
        Some(c) if c.annotations().get(RESTORED_BY_ANNOTATION) == Some(&name) => c,
        Some(_) => {
            return Err(Error::invalid_spec(
                "spec.target.name",
                format!("EtcdCluster {target_name} already exists; a restore never overwrites a cluster"),
            ));
        }
        None => {
            // The API server would refuse it too (the CRD's rule), but less clearly.
            check_cluster_name("spec.target.name", target_name, MAX_CLUSTER_NAME)?;
            let source = match source(restore, ctx).await? {
                Ok(source) => source,
                Err(waiting) => {
                    set_phase(status, restore, PENDING, "WaitingForBackup", &waiting);
                    return Ok(Action::requeue(POLL));
                }
            };
            // The new cluster's first pod will be given the store's Secret.
            let field =
                if restore.spec.source.is_some() { "spec.source.store.credentialsSecret" } else { "spec.backupName" };
            check_credentials(rt.client.clone(), &rt.namespace, &source.store, field).await?;
            let key = source.key.clone();
            let created = clusters
                .create(&PostParams::default(), &target(restore, &rt.namespace, source))
                .await
                .map_err(|e| Error::kube(format!("creating EtcdCluster {target_name}"), e))?;
            let message = format!("created EtcdCluster {target_name} from snapshot {key}");
            rt.events.normal(restore, "TargetCreated", "Restore", message).await;
            created
        }
    };

    if cluster.status.as_ref().is_some_and(|s| is_true(&s.conditions, ConditionType::Ready)) {
        let message = format!("EtcdCluster {target_name} is Ready with the restored data");
        set_phase(status, restore, SUCCEEDED, "Restored", &message);
        rt.events.normal(restore, "RestoreSucceeded", "Restore", message).await;
        return Ok(Action::await_change());
    }
    // Still bootstrapping: say why if the first member cannot restore (a missing object,
    // refused credentials...); it retries on its own as its pod restarts.
    let names = Names::new(target_name.clone(), &rt.namespace);
    let message = match restore_failure(ctx, &names).await? {
        Some(failure) => {
            let message = format!("{} cannot restore the snapshot: {failure}", names.member(0));
            rt.events.warning(restore, "RestoreFailing", "Restore", message.clone()).await;
            message
        }
        None => format!("waiting for EtcdCluster {target_name} to be Ready"),
    };
    set_phase(status, restore, RESTORING, "Bootstrapping", &message);
    Ok(Action::requeue(POLL))
}

/// The error of the last failed restore attempt in the first member's pod, if any.
async fn restore_failure(ctx: &Context, names: &Names) -> Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let pod = pods.get_opt(&names.member(0)).await.map_err(|e| Error::kube("reading the first member's pod", e))?;
    Ok(pod.and_then(|p| {
        let statuses = p.status?.init_container_statuses?;
        let status = statuses.into_iter().find(|s| s.name == RESTORE_CONTAINER)?;
        [status.state, status.last_state]
            .into_iter()
            .flatten()
            .filter_map(|s| s.terminated)
            .find(|t| t.exit_code != 0)
            .map(|t| t.message.unwrap_or_else(|| format!("exit code {}", t.exit_code)).trim().to_string())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{EtcdRestoreSpec, RestoreTarget};
    use crate::validate::tests::spec;
    use statecraft_shared::s3::{S3CredentialsSecretRef, S3Location};

    #[test]
    fn the_target_bootstraps_from_the_snapshot_and_names_its_restore() {
        let restore = EtcdRestore::new(
            "r1",
            EtcdRestoreSpec {
                backup_name: Some("nightly".into()),
                source: None,
                target: RestoreTarget { name: "restored".into(), spec: spec() },
            },
        );
        let source = SnapshotSource {
            store: S3Location::new("backups", "", S3CredentialsSecretRef::new("s3")),
            key: "main/k.db".into(),
        };
        let cluster = target(&restore, "ns", source.clone());
        assert_eq!(cluster.name_any(), "restored");
        assert_eq!(cluster.spec.bootstrap_from, Some(source));
        assert_eq!(cluster.annotations().get(RESTORED_BY_ANNOTATION).map(String::as_str), Some("r1"));
        assert_eq!(cluster.spec.replicas, spec().replicas);
    }
}
