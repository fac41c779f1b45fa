//! The etcd part of the shared restore controller
//! ([`statecraft_shared::backup::restore`], which finds the snapshot, creates the target
//! and writes the phases): the target EtcdCluster is created with `spec.bootstrapFrom`
//! naming the snapshot, and the data gets in at bootstrap: the first member's pod restores
//! the snapshot before etcd starts (see [`crate::build::restore`]), and the other members
//! join it. No Job runs, so an EtcdRestore has no Job deadline: a restore that cannot
//! proceed shows as its first member's failing init container, retried as the pod restarts.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::controller::Action;
use statecraft_shared::backup::controller::POLL;
use statecraft_shared::backup::restore::{self, Progress, RestoreResource, Source, Wait};
use statecraft_shared::backup::{BackupLocation, RestoreSource};
use statecraft_shared::names::check_cluster_name;
use statecraft_shared::status::{ConditionType, is_true};
use statecraft_shared::{Error, Result};

use super::Context;
use crate::api::{EtcdBackup, EtcdCluster, EtcdRestore, EtcdRestoreStatus};
use crate::build::restore::RESTORE_CONTAINER;
use crate::build::{MAX_CLUSTER_NAME, Names};
use crate::reason::Etcd;

/// Annotation on a cluster created by a restore, naming the restore.
pub const RESTORED_BY_ANNOTATION: &str = "etcd.statecraft.io/restored-by";

/// Reconciles one restore (the shared controller with [`EtcdRestore`]'s part).
pub async fn reconcile(restore: Arc<EtcdRestore>, ctx: Arc<Context>) -> Result<Action> {
    restore::reconcile(restore, ctx).await
}

impl RestoreResource for EtcdRestore {
    type Backup = EtcdBackup;
    type Plan = ();

    const RESTORED_BY_ANNOTATION: &'static str = RESTORED_BY_ANNOTATION;
    const BACKUP_KIND: &'static str = "EtcdBackup";

    fn restore_source(&self) -> &RestoreSource {
        &self.spec.source
    }

    fn target_name(&self) -> &str {
        &self.spec.target.name
    }

    fn common(status: &EtcdRestoreStatus) -> &EtcdRestoreStatus {
        status
    }

    fn common_mut(status: &mut EtcdRestoreStatus) -> &mut EtcdRestoreStatus {
        status
    }

    /// The API server would refuse a bad target name too (the CRD's rule), but less clearly.
    fn validate(&self) -> Result<()> {
        check_cluster_name("spec.target.name", &self.spec.target.name, MAX_CLUSTER_NAME)
    }

    async fn prepare(
        &self,
        _ctx: &Context,
        _source: &Source<EtcdBackup>,
        _status: &mut EtcdRestoreStatus,
    ) -> Result<std::result::Result<(), Wait>> {
        Ok(Ok(()))
    }

    fn target(&self, source: &Source<EtcdBackup>) -> EtcdCluster {
        target(self, source.location.clone())
    }

    async fn load(
        &self,
        ctx: &Context,
        cluster: &EtcdCluster,
        _source: &Source<EtcdBackup>,
        _plan: (),
    ) -> Result<Progress> {
        let target_name = &self.spec.target.name;
        if cluster.status.as_ref().is_some_and(|s| is_true(&s.conditions, ConditionType::Ready)) {
            return Ok(Progress::Succeeded(format!("EtcdCluster {target_name} is Ready with the restored data")));
        }
        // Still bootstrapping: say why if the first member cannot restore (a missing object,
        // refused credentials...); it retries on its own as its pod restarts.
        let names = Names::new(target_name.clone(), &ctx.rt.namespace);
        let message = match restore_failure(ctx, &names).await? {
            Some(failure) => {
                let message = format!("{} cannot restore the snapshot: {failure}", names.member(0));
                ctx.rt.events.warning(self, Etcd::RestoreFailing, "Restore", message.clone()).await;
                message
            }
            None => format!("waiting for EtcdCluster {target_name} to be Ready"),
        };
        Ok(Progress::Restoring(Wait { reason: Etcd::Bootstrapping.into(), message, after: POLL }))
    }
}

/// The target cluster a restore creates: the given spec, bootstrapped from `source`
/// (the shared controller names it and annotates it with the restore).
pub fn target(restore: &EtcdRestore, source: BackupLocation) -> EtcdCluster {
    let mut spec = restore.spec.target.spec.clone();
    spec.bootstrap_from = Some(source);
    EtcdCluster::new(&restore.spec.target.name, spec)
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
    use kube::ResourceExt;
    use statecraft_shared::s3::{S3CredentialsSecretRef, S3Location};

    #[test]
    fn the_target_bootstraps_from_the_snapshot() {
        let restore = EtcdRestore::new(
            "r1",
            EtcdRestoreSpec {
                source: RestoreSource { backup_name: Some("nightly".into()), location: None },
                target: RestoreTarget { name: "restored".into(), spec: spec() },
            },
        );
        let source = BackupLocation {
            store: S3Location::new("backups", "", S3CredentialsSecretRef::new("s3")),
            key: "main/k.db".into(),
        };
        let cluster = target(&restore, source.clone());
        assert_eq!(cluster.name_any(), "restored");
        assert_eq!(cluster.spec.bootstrap_from, Some(source));
        assert_eq!(cluster.spec.replicas, spec().replicas);
    }
}
