//! The MySQLRestore controller: creates the target cluster (never touching an existing one),
//! waits until it is Ready, then runs one restore Job that streams the backup from S3
//! through the target's read-write Service. Replicas receive the data by replication, so
//! every server of the new cluster holds it. Phases: Pending → Restoring → Succeeded | Failed.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::Applier;
use statecraft_shared::backup::job::{JobFailure, JobPhase, termination_message};
use statecraft_shared::backup::{FAILED, PENDING, SUCCEEDED, created_at};
use statecraft_shared::deploy::operator_image;
use statecraft_shared::error::ErrorCategory;
use statecraft_shared::runner::Operator;
use statecraft_shared::s3::{S3Location, check_credentials};
use statecraft_shared::status::{ConditionType, patch_status, set_condition};
use statecraft_shared::{Error, Result};

use super::Context;
use super::backup::object_key;
use super::pitr::{NoReplay, Replay, covering_archive};
use crate::MysqlOperator;
use crate::api::{MySQLBackup, MySQLCluster, MySQLRestore, MySQLRestoreStatus};
use crate::build::jobs::{BinlogWork, JobParams, job};
use crate::build::secret::ROOT_KEY;
use crate::build::{MYSQL_PORT, Names};
use crate::flavor::ROOT_USER;
use crate::validate::validate_restore;

/// Phase while the target is created and loaded.
pub const RESTORING: &str = "Restoring";
/// Annotation on a cluster created by a restore, naming the restore.
pub const RESTORED_BY_ANNOTATION: &str = "mysql.statecraft.io/restored-by";

const POLL: Duration = Duration::from_secs(5);
/// How often a point-in-time restore looks for a backup that archived far enough.
const BINLOG_POLL: Duration = Duration::from_secs(30);

/// The restore Job of restore `name`.
pub fn job_name(name: &str) -> String {
    statecraft_shared::backup::job::job_name(name, "restore")
}

/// Reconciles one restore.
pub async fn reconcile(restore: Arc<MySQLRestore>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let api: Api<MySQLRestore> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let old = restore.status.clone();
    let mut status = old.clone().unwrap_or_default();
    if matches!(status.phase.as_deref(), Some(SUCCEEDED | FAILED)) {
        return Ok(Action::await_change());
    }
    let action = match step(&restore, &ctx, &mut status).await {
        Ok(a) => a,
        Err(e) if e.category() == ErrorCategory::InvalidSpec => {
            set(&mut status, &restore, FAILED, e.reason(), &e.to_string());
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

fn set(status: &mut MySQLRestoreStatus, restore: &MySQLRestore, phase: &str, reason: &str, message: &str) {
    status.phase = Some(phase.to_string());
    let ok = phase == SUCCEEDED;
    set_condition(&mut status.conditions, ConditionType::Ready, ok, reason, message, restore.metadata.generation);
}

/// Where the backup is.
struct Source {
    /// The store.
    location: S3Location,
    /// The object's key.
    key: String,
    /// Its expected SHA-256, when a MySQLBackup recorded it.
    sha256: Option<String>,
    /// The MySQLBackup that describes it, unless the restore names an object directly.
    backup: Option<MySQLBackup>,
}

/// Where the restore's backup is; `Ok(Err(why))` while it has not succeeded yet.
async fn source(restore: &MySQLRestore, ctx: &Context) -> Result<std::result::Result<Source, String>> {
    if let Some(loc) = &restore.spec.location {
        return Ok(Ok(Source { location: loc.store.clone(), key: loc.key.clone(), sha256: None, backup: None }));
    }
    let name = restore.spec.backup_name.clone().unwrap_or_default();
    let backups: Api<MySQLBackup> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let Some(backup) = backups.get_opt(&name).await.map_err(|e| Error::kube("reading the backup", e))? else {
        return Err(Error::invalid_spec("spec.backupName", format!("MySQLBackup {name} does not exist")));
    };
    let status = backup.status.clone().unwrap_or_default();
    match status.phase.as_deref() {
        Some(SUCCEEDED) => {}
        Some(FAILED) => return Err(Error::invalid_spec("spec.backupName", format!("MySQLBackup {name} failed"))),
        _ => return Ok(Err(format!("MySQLBackup {name} has not succeeded yet"))),
    }
    let location = match &backup.spec.location {
        Some(l) => l.clone(),
        None => {
            let clusters: Api<MySQLCluster> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
            let cluster = clusters
                .get_opt(&backup.spec.cluster_name)
                .await
                .map_err(|e| Error::kube("reading the backed-up cluster", e))?;
            match cluster.and_then(|c| c.spec.backup.map(|b| b.location)) {
                Some(l) => l,
                None => {
                    return Err(Error::invalid_spec(
                        "spec.backupName",
                        format!("MySQLBackup {name} names no location and its cluster's backup policy is gone"),
                    ));
                }
            }
        }
    };
    let created = created_at(&backup.metadata)
        .ok_or_else(|| Error::Permanent(format!("MySQLBackup {name} has no creation time")))?;
    let key = object_key(&backup.spec.cluster_name, &name, created);
    Ok(Ok(Source { location, key, sha256: status.sha256, backup: Some(backup) }))
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
    let policy = if base.spec.location.is_none() {
        Some(location.clone())
    } else {
        let clusters: Api<MySQLCluster> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
        clusters
            .get_opt(&base.spec.cluster_name)
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

async fn step(restore: &MySQLRestore, ctx: &Context, status: &mut MySQLRestoreStatus) -> Result<Action> {
    let rt = &ctx.rt;
    let valid = validate_restore(&restore.spec)?;
    let name = restore.name_any();
    let target = &restore.spec.target.name;
    let Source { location, key, sha256, backup } = match source(restore, ctx).await? {
        Ok(s) => s,
        Err(waiting) => {
            set(status, restore, PENDING, "WaitingForBackup", &waiting);
            return Ok(Action::requeue(POLL));
        }
    };
    let replay = match (&restore.spec.point_in_time, &backup) {
        (None, _) => None,
        // Validation requires backupName with pointInTime, so an explicit object has none.
        (Some(_), None) => {
            return Err(Error::invalid_spec("spec.pointInTime", "needs spec.backupName"));
        }
        (Some(at), Some(base)) => match point_in_time(base, ctx, at, &location).await? {
            Ok(r) => Some(r),
            Err(waiting) => {
                set(status, restore, PENDING, "WaitingForBinlogs", &waiting);
                return Ok(Action::requeue(BINLOG_POLL));
            }
        },
    };
    status.binlogs_from = replay.as_ref().map(|r| r.backup.clone());
    // The Job will be given the location's Secret: only one that opted in.
    let field =
        if restore.spec.location.is_some() { "spec.location.store.credentialsSecret" } else { "spec.backupName" };
    check_credentials(rt.client.clone(), &rt.namespace, &location, field).await?;

    // The target: created here, or already ours; anything else is refused.
    let clusters: Api<MySQLCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let existing = clusters.get_opt(target).await.map_err(|e| Error::kube("reading the target cluster", e))?;
    let cluster = match existing {
        Some(c) if c.annotations().get(RESTORED_BY_ANNOTATION) == Some(&name) => c,
        Some(_) => {
            return Err(Error::invalid_spec(
                "spec.target.name",
                format!("MySQLCluster {target} already exists; a restore never overwrites a cluster"),
            ));
        }
        None => {
            let new = MySQLCluster {
                metadata: ObjectMeta {
                    name: Some(target.clone()),
                    namespace: Some(rt.namespace.clone()),
                    annotations: Some([(RESTORED_BY_ANNOTATION.to_string(), name.clone())].into()),
                    ..Default::default()
                },
                spec: restore.spec.target.spec.clone(),
                status: None,
            };
            let created = clusters
                .create(&PostParams::default(), &new)
                .await
                .map_err(|e| Error::kube(format!("creating MySQLCluster {target}"), e))?;
            rt.events.normal(restore, "TargetCreated", "Restore", format!("created MySQLCluster {target}")).await;
            created
        }
    };

    let jobs: Api<Job> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let job_name = job_name(&name);
    if let Some(job) = jobs.get_opt(&job_name).await.map_err(|e| Error::kube("reading the restore Job", e))? {
        match JobPhase::of(&job) {
            JobPhase::Succeeded => {
                let msg = format!("{key} restored into {target}");
                set(status, restore, SUCCEEDED, "Restored", &msg);
                rt.events.normal(restore, "RestoreSucceeded", "Restore", msg).await;
                return Ok(Action::await_change());
            }
            JobPhase::Failed | JobPhase::DeadlineExceeded => {
                let message = termination_message(rt.client.clone(), &rt.namespace, &job_name).await?;
                let failure = JobFailure::of(&job, message.as_deref());
                let msg = format!(
                    "restore Job {job_name} {}; MySQLCluster {target} holds a partial restore: delete it and its volumes before retrying",
                    failure.message
                );
                set(status, restore, FAILED, failure.reason, &msg);
                rt.events.warning(restore, "RestoreFailed", "Restore", msg).await;
                return Ok(Action::await_change());
            }
            JobPhase::Running => {
                set(status, restore, RESTORING, "Loading", &format!("loading {key} into {target}"));
                return Ok(Action::requeue(POLL));
            }
        }
    }

    let ready =
        cluster.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !ready {
        set(status, restore, RESTORING, "WaitingForTarget", &format!("waiting for MySQLCluster {target} to be Ready"));
        return Ok(Action::requeue(POLL));
    }
    let names = Names::new(target.clone(), &rt.namespace);
    let host = format!("{}.{}.svc", names.read_write_service(), rt.namespace);
    let image = operator_image(MysqlOperator::NAME)
        .ok_or_else(|| Error::Permanent("the operator does not know its own image".into()))?;
    let secret = names.secret();
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
        location: &location,
        key: &key,
        sha256: sha256.as_deref(),
        binlogs: replay.as_ref().map(|r| BinlogWork::Replay {
            prefix: &r.archive.prefix,
            files: u32::try_from(r.archive.files).unwrap_or(0),
            start: &r.start,
            stop: restore.spec.point_in_time.as_deref().unwrap_or_default(),
        }),
        deadline_seconds: restore.spec.deadline.seconds(None),
    });
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, restore, &rt.apply_cache)?;
    applier.apply(desired).await?;
    let rolled = match (&replay, &restore.spec.point_in_time) {
        (Some(r), Some(at)) => format!(", then replaying MySQLBackup {}'s binary logs until {at}", r.backup),
        _ => String::new(),
    };
    let msg = format!("loading {key} into {target} through {}{rolled}", names.read_write_service());
    set(status, restore, RESTORING, "JobStarted", &msg);
    rt.events.normal(restore, "RestoreStarted", "Restore", msg).await;
    Ok(Action::requeue(POLL))
}
