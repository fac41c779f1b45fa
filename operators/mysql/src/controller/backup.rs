//! The MySQLBackup controller: one Job per backup, taken from a healthy replica (the primary
//! only in a one-server cluster), and the Job's report copied into the backup's status. The
//! phases go Pending → Running → Succeeded | Failed and never back: a failed backup is not
//! retried (the schedule, or a new MySQLBackup, takes the next one).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::Applier;
use statecraft_shared::backup::job::{JobFailure, JobPhase, is_running, parse_report, termination_message};
use statecraft_shared::backup::{FAILED, PENDING, RUNNING, SUCCEEDED, created_at};
use statecraft_shared::deploy::operator_image;
use statecraft_shared::s3::check_credentials;
use statecraft_shared::status::{ConditionType, patch_status, set_condition};
use statecraft_shared::{Error, Result};

use super::Context;
use super::pitr::archive_since;
use crate::MysqlOperator;
use crate::api::{BinlogArchiveStatus, MySQLBackup, MySQLBackupStatus, MySQLCluster};
use crate::build::jobs::{BinlogWork, CLUSTER_LABEL, JobParams, KIND_LABEL, job};
use crate::build::secret::{BACKUP_KEY, REPLICATION_KEY};
use crate::build::{MYSQL_PORT, Names, ordinal_of};
use crate::flavor::BACKUP_USER;
use crate::jobs::BackupReport;
use crate::validate::{validate, validate_backup};
use statecraft_shared::runner::Operator;

/// How often a pending or running backup is looked at (Job events usually come first).
const POLL: Duration = Duration::from_secs(5);

/// The Job of backup `name`.
pub fn job_name(name: &str) -> String {
    statecraft_shared::backup::job::job_name(name, "backup")
}

/// The object key of a backup (the shared scheme: under the cluster, by creation time).
pub fn object_key(cluster: &str, backup: &str, created: DateTime<Utc>) -> String {
    statecraft_shared::backup::object_key(cluster, backup, created, "sql")
}

/// Reconciles one backup.
pub async fn reconcile(backup: Arc<MySQLBackup>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let api: Api<MySQLBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let old = backup.status.clone();
    let mut status = old.clone().unwrap_or_default();
    if matches!(status.phase.as_deref(), Some(SUCCEEDED | FAILED)) {
        // After a restart every finished backup passes here once: the age metric is
        // rebuilt from the newest success.
        if let Some(done) = completed_at(&status).filter(|_| status.phase.as_deref() == Some(SUCCEEDED)) {
            ctx.servers.backup_succeeded(&backup.spec.cluster_name, done);
        }
        return Ok(Action::await_change());
    }
    let outcome = step(&backup, &ctx, &mut status).await;
    let action = match outcome {
        Ok(action) => action,
        Err(e) if e.category() == statecraft_shared::error::ErrorCategory::InvalidSpec => {
            finish(&mut status, &backup, FAILED, e.reason(), &e.to_string());
            rt.events.warning(&*backup, e.reason(), "Backup", e.to_string()).await;
            Action::await_change()
        }
        Err(e) => {
            patch_status(&api, &*backup, old.as_ref(), &status, rt.field_manager).await?;
            return Err(e);
        }
    };
    patch_status(&api, &*backup, old.as_ref(), &status, rt.field_manager).await?;
    Ok(action)
}

/// The backup Job of `cluster` that is running now, if any: restarts and scale-ins wait for
/// it, since they would take away the server it reads. A Job that failed (at its deadline
/// too) is not running, even while its pod is still being stopped.
pub async fn running_job(ctx: &Context, cluster: &str) -> Result<Option<String>> {
    let jobs: Api<Job> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let selector = format!("{CLUSTER_LABEL}={cluster},{KIND_LABEL}=backup");
    let list =
        jobs.list(&ListParams::default().labels(&selector)).await.map_err(|e| Error::kube("listing backup Jobs", e))?;
    Ok(list.items.iter().find(|j| is_running(j)).map(|j| j.name_any()))
}

/// Completion time of a backup, in Unix seconds.
fn completed_at(status: &MySQLBackupStatus) -> Option<i64> {
    status.completion_time.as_deref().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.timestamp())
}

fn finish(status: &mut MySQLBackupStatus, backup: &MySQLBackup, phase: &str, reason: &str, message: &str) {
    status.phase = Some(phase.to_string());
    let ok = phase == SUCCEEDED;
    set_condition(&mut status.conditions, ConditionType::Ready, ok, reason, message, backup.metadata.generation);
}

fn pending(status: &mut MySQLBackupStatus, backup: &MySQLBackup, reason: &str, message: &str) -> Action {
    finish(status, backup, PENDING, reason, message);
    Action::requeue(POLL)
}

async fn step(backup: &MySQLBackup, ctx: &Context, status: &mut MySQLBackupStatus) -> Result<Action> {
    let rt = &ctx.rt;
    validate_backup(&backup.spec)?;
    let name = backup.name_any();
    let jobs: Api<Job> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let job_name = job_name(&name);
    if let Some(job) = jobs.get_opt(&job_name).await.map_err(|e| Error::kube("reading the backup Job", e))? {
        return observe_job(backup, ctx, &job, status).await;
    }

    let clusters: Api<MySQLCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(cluster) =
        clusters.get_opt(&backup.spec.cluster_name).await.map_err(|e| Error::kube("reading the cluster", e))?
    else {
        let msg = format!("MySQLCluster {} does not exist (yet)", backup.spec.cluster_name);
        return Ok(pending(status, backup, "ClusterNotFound", &msg));
    };
    let Some(location) =
        backup.spec.location.clone().or_else(|| cluster.spec.backup.as_ref().map(|b| b.location.clone()))
    else {
        return Err(Error::invalid_spec(
            "spec.location",
            format!("is required: MySQLCluster {} has no spec.backup.location", backup.spec.cluster_name),
        ));
    };
    let valid = validate(&cluster.spec)?;
    // The Job will be given the location's Secret: only one that opted in.
    let field = if backup.spec.location.is_some() { "spec.location.credentialsSecret" } else { "spec.clusterName" };
    check_credentials(rt.client.clone(), &rt.namespace, &location, field).await?;
    let names = Names::new(cluster.name_any(), &rt.namespace);
    let cluster_status = cluster.status.clone().unwrap_or_default();
    // A healthy replica (the highest ordinal, the last to become primary); the primary
    // only when there is no replica.
    let source = cluster_status
        .members
        .iter()
        .filter(|m| m.role == "replica" && m.ready && !m.errant)
        .max_by(|a, b| a.name.cmp(&b.name))
        .or_else(|| {
            (cluster.spec.replicas == 1)
                .then(|| cluster_status.members.iter().find(|m| m.role == "primary" && m.ready))
                .flatten()
        });
    let Some(source) = source else {
        return Ok(pending(status, backup, "NoHealthySource", "waiting for a healthy replica to take the backup from"));
    };
    let Some(ordinal) = ordinal_of(&names.cluster, &source.name) else {
        return Ok(pending(
            status,
            backup,
            "NoHealthySource",
            &format!("member {} is not a pod of the cluster", source.name),
        ));
    };
    let host = names.pod_host(ordinal);
    // Binary logs for point-in-time recovery: the primary's, from the previous backup on.
    let backups: Api<MySQLBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let listed = backups.list(&Default::default()).await.map_err(|e| Error::kube("listing the backups", e))?;
    let policy = cluster.spec.backup.as_ref().map(|b| &b.location);
    let since = archive_since(&listed.items, &names.cluster, &location, policy);
    let primary_host = cluster_status
        .current_primary
        .as_deref()
        .and_then(|p| ordinal_of(&names.cluster, p))
        .map(|o| names.pod_host(o));
    let secret = names.secret();
    let binlogs = match (&since, &primary_host) {
        (Some(since), Some(host)) => {
            Some(BinlogWork::Archive { host, since, password_secret: (&secret, REPLICATION_KEY) })
        }
        _ => None,
    };
    let created = created_at(&backup.metadata).unwrap_or_else(Utc::now);
    let key = object_key(&names.cluster, &name, created);
    let image = operator_image(MysqlOperator::NAME)
        .ok_or_else(|| Error::Permanent("the operator does not know its own image".into()))?;
    let desired = job(&JobParams {
        name: &job_name,
        namespace: &rt.namespace,
        task: "backup",
        cluster: &names.cluster,
        server_image: &valid.image,
        operator_image: &image,
        flavor: cluster.spec.flavor,
        host: &host,
        port: MYSQL_PORT as u16,
        user: BACKUP_USER,
        password_secret: (&secret, BACKUP_KEY),
        location: &location,
        key: &key,
        sha256: None,
        binlogs,
        deadline_seconds: backup.spec.deadline.seconds(cluster.spec.backup.as_ref().map(|b| &b.deadline)),
    });
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, backup, &rt.apply_cache)?;
    applier.apply(desired).await?;
    status.start_time = Some(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true));
    let archive = match (since, primary_host) {
        (Some(since), Some(host)) => format!("; then archiving {host}'s binary logs after {since}"),
        (None, _) => "; no binary logs archived (no earlier backup in this store to roll forward)".into(),
        (Some(_), None) => "; no binary logs archived (no primary recorded)".into(),
    };
    let msg = format!("dumping {} to bucket {} key {key}{archive}", source.name, location.bucket);
    finish(status, backup, RUNNING, "JobStarted", &msg);
    rt.events.normal(backup, "BackupStarted", "Backup", msg).await;
    Ok(Action::requeue(POLL))
}

async fn observe_job(backup: &MySQLBackup, ctx: &Context, job: &Job, status: &mut MySQLBackupStatus) -> Result<Action> {
    let rt = &ctx.rt;
    let name = job.name_any();
    match JobPhase::of(job) {
        JobPhase::Running => Ok(Action::requeue(POLL)),
        JobPhase::Succeeded => {
            let message = termination_message(rt.client.clone(), &rt.namespace, &name).await?.unwrap_or_default();
            let report: BackupReport = parse_report(&name, &message)?;
            let object = &report.object;
            status.location = Some(object.url.clone());
            status.size = Some(object.size());
            status.sha256 = Some(object.sha256.clone());
            status.gtid_position = Some(report.gtid.clone());
            status.start_time = Some(object.started_at.clone());
            status.completion_time = Some(object.finished_at.clone());
            status.binlogs = report.binlogs.as_ref().map(|b| BinlogArchiveStatus {
                prefix: b.prefix.clone(),
                files: i64::from(b.files),
                size: i64::try_from(b.bytes).unwrap_or(i64::MAX),
                from_gtid_position: b.from_gtid.clone(),
                until: b.until.clone(),
            });
            let archived = match (&report.binlogs, &report.binlog_error) {
                (Some(b), _) => {
                    format!("; {} binary log file(s) ({} bytes) archived from {}", b.files, b.bytes, b.from_gtid)
                }
                (None, Some(e)) => format!("; binary logs NOT archived: {e}"),
                (None, None) => String::new(),
            };
            let msg = format!("{} bytes at {}, GTID position {}{archived}", object.bytes, object.url, report.gtid);
            finish(status, backup, SUCCEEDED, "BackupStored", &msg);
            if let Some(e) = &report.binlog_error {
                let warning = format!(
                    "binary logs not archived, so no point-in-time restore can reach past this backup from the previous one: {e}"
                );
                rt.events.warning(backup, "BinlogsNotArchived", "Backup", warning).await;
            }
            ctx.servers.backup_finished(&backup.spec.cluster_name, true);
            if let Some(done) = completed_at(status) {
                ctx.servers.backup_succeeded(&backup.spec.cluster_name, done);
            }
            rt.events.normal(backup, "BackupSucceeded", "Backup", msg).await;
            Ok(Action::await_change())
        }
        JobPhase::Failed | JobPhase::DeadlineExceeded => {
            let message = termination_message(rt.client.clone(), &rt.namespace, &name).await?;
            let failure = JobFailure::of(job, message.as_deref());
            let msg = format!("backup Job {name} {}", failure.message);
            status.completion_time = Some(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true));
            finish(status, backup, FAILED, failure.reason, &msg);
            ctx.servers.backup_finished(&backup.spec.cluster_name, false);
            rt.events.warning(backup, "BackupFailed", "Backup", msg).await;
            Ok(Action::await_change())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn keys_sort_by_time_under_the_cluster() {
        let t = Utc.with_ymd_and_hms(2026, 11, 29, 23, 5, 9).unwrap();
        assert_eq!(object_key("db", "nightly", t), "db/20261129T230509Z-nightly.sql");
        assert_eq!(job_name("nightly"), "nightly-backup");
    }
}
