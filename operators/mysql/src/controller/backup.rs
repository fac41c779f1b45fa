//! The MySQL part of the shared backup controller
//! ([`statecraft_shared::backup::controller`], which runs the Job and writes the phases):
//! the dump is taken from a healthy replica (the primary only in a one-server cluster),
//! the primary's binary logs are archived from the previous backup's position on, and the
//! GTID position and archive the Job reports are recorded.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::backup::controller::{self, BackupResource, BackupTarget, Start, Stored};
use statecraft_shared::backup::job::{ObjectReport, is_running};
use statecraft_shared::backup::{BackupPolicy, BackupStatus};
use statecraft_shared::deploy::operator_image;
use statecraft_shared::runner::{Operator, Runtime};
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
use crate::reason::MySql;
use crate::validate::{validate, validate_backup};

/// Extension of backup objects.
pub const EXTENSION: &str = "sql";

/// The Job of backup `name`.
pub fn job_name(name: &str) -> String {
    statecraft_shared::backup::job::job_name(name, "backup")
}

/// The object key of a backup (the shared scheme: under the cluster, by creation time).
pub fn object_key(cluster: &str, backup: &str, created: DateTime<Utc>) -> String {
    statecraft_shared::backup::object_key(cluster, backup, created, EXTENSION)
}

/// Reconciles one backup (the shared controller with [`MySQLBackup`]'s part).
pub async fn reconcile(backup: Arc<MySQLBackup>, ctx: Arc<Context>) -> Result<Action> {
    controller::reconcile(backup, ctx).await
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

impl BackupResource for MySQLBackup {
    type Cluster = MySQLCluster;
    type Report = BackupReport;
    type Context = Context;

    const CLUSTER_KIND: &'static str = "MySQLCluster";
    const EXTENSION: &'static str = EXTENSION;

    fn runtime(ctx: &Context) -> &Runtime {
        &ctx.rt
    }

    fn policy(cluster: &MySQLCluster) -> Option<&BackupPolicy> {
        cluster.spec.backup.as_ref()
    }

    fn common(status: &MySQLBackupStatus) -> &BackupStatus {
        &status.common
    }

    fn common_mut(status: &mut MySQLBackupStatus) -> &mut BackupStatus {
        &mut status.common
    }

    fn object(report: &BackupReport) -> &ObjectReport {
        &report.object
    }

    fn validate(&self) -> Result<()> {
        validate_backup(&self.spec.backup)
    }

    async fn start(
        &self,
        ctx: &Context,
        cluster: &MySQLCluster,
        target: &BackupTarget<'_>,
        _status: &mut MySQLBackupStatus,
    ) -> Result<Start> {
        let rt = &ctx.rt;
        let valid = validate(&cluster.spec)?;
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
            let message = "waiting for a healthy replica to take the backup from".to_string();
            return Ok(Start::Wait { reason: MySql::NoHealthySource.into(), message });
        };
        let Some(ordinal) = ordinal_of(&names.cluster, &source.name) else {
            let message = format!("member {} is not a pod of the cluster", source.name);
            return Ok(Start::Wait { reason: MySql::NoHealthySource.into(), message });
        };
        let host = names.pod_host(ordinal);
        // Binary logs for point-in-time recovery: the primary's, from the previous backup on.
        let backups: Api<MySQLBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
        let listed = backups.list(&Default::default()).await.map_err(|e| Error::kube("listing the backups", e))?;
        let policy = cluster.spec.backup.as_ref().map(|b| &b.location);
        let since = archive_since(&listed.items, &names.cluster, target.location, policy);
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
        let image = operator_image(MysqlOperator::NAME)
            .ok_or_else(|| Error::Permanent("the operator does not know its own image".into()))?;
        let tls_secret = cluster.spec.tls.as_ref().map(|t| crate::build::tls::secret_name(t, &names));
        let desired = job(&JobParams {
            name: target.job_name,
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
            location: target.location,
            key: target.key,
            sha256: None,
            binlogs,
            deadline_seconds: target.deadline_seconds,
            pod_template: &cluster.spec.pod_template,
            tls_secret: tls_secret.as_deref(),
        });
        let archive = match (since, primary_host) {
            (Some(since), Some(host)) => format!("; then archiving {host}'s binary logs after {since}"),
            (None, _) => "; no binary logs archived (no earlier backup in this store to roll forward)".into(),
            (Some(_), None) => "; no binary logs archived (no primary recorded)".into(),
        };
        let message =
            format!("dumping {} to bucket {} key {}{archive}", source.name, target.location.bucket, target.key);
        Ok(Start::Job { job: Box::new(desired), message })
    }

    fn record(status: &mut MySQLBackupStatus, report: &BackupReport) -> Stored {
        status.gtid_position = Some(report.gtid.clone());
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
        let object = &report.object;
        let message = format!("{} bytes at {}, GTID position {}{archived}", object.bytes, object.url, report.gtid);
        let warning = report.binlog_error.as_ref().map(|e| {
            let warning = format!(
                "binary logs not archived, so no point-in-time restore can reach past this backup from the previous one: {e}"
            );
            (MySql::BinlogsNotArchived.into(), warning)
        });
        Stored { message, warning }
    }

    fn finished(&self, ctx: &Context, status: &MySQLBackupStatus, succeeded: bool) {
        ctx.servers.backup_finished(&self.spec.backup.cluster_name, succeeded);
        self.seen_finished(ctx, status);
    }

    /// After a restart every finished backup passes here once: the age metric is rebuilt
    /// from the newest success.
    fn seen_finished(&self, ctx: &Context, status: &MySQLBackupStatus) {
        if let Some(done) = status.common.completed_at().filter(|_| status.common.succeeded()) {
            ctx.servers.backup_succeeded(&self.spec.backup.cluster_name, done.timestamp());
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
