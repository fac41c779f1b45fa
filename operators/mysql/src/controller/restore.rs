//! The MySQL part of the shared restore controller
//! ([`statecraft_shared::backup::restore`], which finds the backup, creates the target and
//! writes the phases): a point-in-time restore first finds the backup whose archived
//! binary logs reach the time; once the target is Ready, one restore Job streams the dump
//! from S3 through the target's read-write Service, then replays those binary logs.
//! Replicas receive the data by replication, so every server of the new cluster holds it.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::runtime::controller::Action;
use statecraft_shared::backup::RestoreSource;
use statecraft_shared::backup::controller::{JobOutcome, POLL, observe_job};
use statecraft_shared::backup::restore::{self, Progress, RestoreResource, Source, Wait};
use statecraft_shared::deploy::operator_image;
use statecraft_shared::reason::Common;
use statecraft_shared::runner::Operator;
use statecraft_shared::s3::S3Location;
use statecraft_shared::status::{ConditionType, is_true};
use statecraft_shared::{Error, Result};

use super::Context;
use super::pitr::{NoReplay, Replay, covering_archive};
use crate::MysqlOperator;
use crate::api::{MySQLBackup, MySQLCluster, MySQLRestore, MySQLRestoreStatus};
use crate::build::jobs::{BinlogWork, JobParams, job};
use crate::build::secret::ROOT_KEY;
use crate::build::{MYSQL_PORT, Names};
use crate::flavor::ROOT_USER;
use crate::reason::MySql;
use crate::validate::validate_restore;

/// Annotation on a cluster created by a restore, naming the restore.
pub const RESTORED_BY_ANNOTATION: &str = "mysql.statecraft.io/restored-by";

/// How often a point-in-time restore looks for a backup that archived far enough.
const BINLOG_POLL: Duration = Duration::from_secs(30);

/// The restore Job of restore `name`.
pub fn job_name(name: &str) -> String {
    statecraft_shared::backup::job::job_name(name, "restore")
}

/// Reconciles one restore (the shared controller with [`MySQLRestore`]'s part).
pub async fn reconcile(restore: Arc<MySQLRestore>, ctx: Arc<Context>) -> Result<Action> {
    restore::reconcile(restore, ctx).await
}

impl RestoreResource for MySQLRestore {
    type Backup = MySQLBackup;
    /// The binary logs to replay after the dump, for a point-in-time restore.
    type Plan = Option<Replay>;

    const RESTORED_BY_ANNOTATION: &'static str = RESTORED_BY_ANNOTATION;
    const BACKUP_KIND: &'static str = "MySQLBackup";

    fn restore_source(&self) -> &RestoreSource {
        &self.spec.source
    }

    fn target_name(&self) -> &str {
        &self.spec.target.name
    }

    fn common(status: &MySQLRestoreStatus) -> &statecraft_shared::backup::RestoreStatus {
        &status.common
    }

    fn common_mut(status: &mut MySQLRestoreStatus) -> &mut statecraft_shared::backup::RestoreStatus {
        &mut status.common
    }

    fn validate(&self) -> Result<()> {
        validate_restore(&self.spec).map(drop)
    }

    async fn prepare(
        &self,
        ctx: &Context,
        source: &Source<MySQLBackup>,
        status: &mut MySQLRestoreStatus,
    ) -> Result<std::result::Result<Option<Replay>, Wait>> {
        let replay = match (&self.spec.point_in_time, &source.backup) {
            (None, _) => None,
            // Validation requires backupName with pointInTime, so an explicit object has none.
            (Some(_), None) => return Err(Error::invalid_spec("spec.pointInTime", "needs spec.backupName")),
            (Some(at), Some(base)) => match point_in_time(base, ctx, at, &source.location.store).await? {
                Ok(r) => Some(r),
                Err(message) => {
                    return Ok(Err(Wait { reason: MySql::WaitingForBinlogs.into(), message, after: BINLOG_POLL }));
                }
            },
        };
        status.binlogs_from = replay.as_ref().map(|r| r.backup.clone());
        Ok(Ok(replay))
    }

    fn target(&self, _source: &Source<MySQLBackup>) -> MySQLCluster {
        MySQLCluster::new(&self.spec.target.name, self.spec.target.spec.clone())
    }

    async fn load(
        &self,
        ctx: &Context,
        cluster: &MySQLCluster,
        source: &Source<MySQLBackup>,
        replay: Option<Replay>,
    ) -> Result<Progress> {
        let rt = &ctx.rt;
        let name = self.metadata.name.clone().unwrap_or_default();
        let target = &self.spec.target.name;
        let key = &source.location.key;
        let jobs: Api<Job> = Api::namespaced(rt.client.clone(), &rt.namespace);
        let job_name = job_name(&name);
        if let Some(job) = jobs.get_opt(&job_name).await.map_err(|e| Error::kube("reading the restore Job", e))? {
            return Ok(match observe_job(rt, &job).await? {
                JobOutcome::Succeeded(_) => Progress::Succeeded(format!("{key} restored into {target}")),
                JobOutcome::Failed(failure) => Progress::Failed {
                    reason: failure.reason,
                    message: format!(
                        "restore Job {job_name} {}; MySQLCluster {target} holds a partial restore: delete it and its volumes before retrying",
                        failure.message
                    ),
                },
                JobOutcome::Running => {
                    let message = format!("loading {key} into {target}");
                    Progress::Restoring(Wait { reason: MySql::Loading.into(), message, after: POLL })
                }
            });
        }

        if !cluster.status.as_ref().is_some_and(|s| is_true(&s.conditions, ConditionType::Ready)) {
            let message = format!("waiting for MySQLCluster {target} to be Ready");
            return Ok(Progress::Restoring(Wait { reason: MySql::WaitingForTarget.into(), message, after: POLL }));
        }
        let valid = validate_restore(&self.spec)?;
        let names = Names::new(target.clone(), &rt.namespace);
        let host = format!("{}.{}.svc", names.read_write_service(), rt.namespace);
        let image = operator_image(MysqlOperator::NAME)
            .ok_or_else(|| Error::Permanent("the operator does not know its own image".into()))?;
        let secret = names.secret();
        let tls_secret = cluster.spec.tls.as_ref().map(|t| crate::build::tls::secret_name(t, &names));
        let desired = job(&JobParams {
            name: &job_name,
            namespace: &rt.namespace,
            task: "restore",
            cluster: target,
            server_image: &valid.image,
            operator_image: &image,
            flavor: valid.spec.flavor,
            host: &host,
            port: MYSQL_PORT as u16,
            user: ROOT_USER,
            password_secret: (&secret, ROOT_KEY),
            location: &source.location.store,
            key,
            sha256: source.sha256.as_deref(),
            binlogs: replay.as_ref().map(|r| BinlogWork::Replay {
                prefix: &r.archive.prefix,
                files: u32::try_from(r.archive.files).unwrap_or(0),
                start: &r.start,
                stop: self.spec.point_in_time.as_deref().unwrap_or_default(),
            }),
            deadline_seconds: self.spec.deadline.seconds(None),
            pod_template: &cluster.spec.pod_template,
            tls_secret: tls_secret.as_deref(),
        });
        let mut applier =
            statecraft_shared::apply::Applier::new(rt.client.clone(), rt.field_manager, self, &rt.apply_cache)?;
        applier.apply(desired).await?;
        let rolled = match (&replay, &self.spec.point_in_time) {
            (Some(r), Some(at)) => format!(", then replaying MySQLBackup {}'s binary logs until {at}", r.backup),
            _ => String::new(),
        };
        let message = format!("loading {key} into {target} through {}{rolled}", names.read_write_service());
        rt.events.normal(self, MySql::RestoreStarted, "Restore", message.clone()).await;
        Ok(Progress::Restoring(Wait { reason: Common::JobStarted.into(), message, after: POLL }))
    }
}

/// The archive that rolls `base` (stored in `location`) forward to `at`; `Ok(Err(why))`
/// while no backup has archived that far yet.
async fn point_in_time(
    base: &MySQLBackup,
    ctx: &Context,
    at: &str,
    location: &S3Location,
) -> Result<std::result::Result<Replay, String>> {
    let at = DateTime::parse_from_rfc3339(at)
        .map_err(|e| Error::invalid_spec("spec.pointInTime", format!("{at:?}: {e}")))?
        .with_timezone(&Utc);
    let backups: Api<MySQLBackup> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let listed = backups.list(&Default::default()).await.map_err(|e| Error::kube("listing the backups", e))?;
    // Backups without a location of their own are in the store the base's was resolved to
    // (its cluster's policy) when the base has none either.
    let policy = if base.spec.backup.location.is_none() {
        Some(location.clone())
    } else {
        let clusters: Api<MySQLCluster> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
        clusters
            .get_opt(&base.spec.backup.cluster_name)
            .await
            .map_err(|e| Error::kube("reading the backed-up cluster", e))?
            .and_then(|c| c.spec.backup.map(|b| b.location))
    };
    match covering_archive(&listed.items, base, at, policy.as_ref()) {
        Ok(r) => Ok(Ok(r)),
        Err(NoReplay::Wait(why)) => Ok(Err(why)),
        Err(NoReplay::Invalid(why)) => Err(Error::invalid_spec("spec.pointInTime", why)),
    }
}
