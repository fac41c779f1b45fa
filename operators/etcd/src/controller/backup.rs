//! The etcd part of the shared backup controller
//! ([`statecraft_shared::backup::controller`], which runs the Job and writes the phases):
//! which member to snapshot (a healthy follower when there is one, so the leader keeps
//! its I/O for the log), the Job that streams its snapshot to S3, and the revision and
//! member the Job reports.

use std::sync::Arc;

use chrono::Utc;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use statecraft_shared::Result;
use statecraft_shared::backup::controller::{self, BackupResource, BackupTarget, Start, Stored};
use statecraft_shared::backup::job::ObjectReport;
use statecraft_shared::backup::{BackupPolicy, BackupStatus};
use statecraft_shared::deploy::operator_image;
use statecraft_shared::runner::{Operator, Runtime};

use super::Context;
use crate::EtcdOperator;
use crate::api::{EtcdBackup, EtcdBackupStatus, EtcdCluster, MemberStatus};
use crate::build::Names;
use crate::build::jobs::{BACKUP_TASK, BackupJob, backup_job};
use crate::reason::Etcd;
use crate::snapshot::SnapshotReport;

/// Extension of snapshot objects.
pub const EXTENSION: &str = "db";

/// The Job of backup `name`.
pub fn job_name(name: &str) -> String {
    statecraft_shared::backup::job::job_name(name, BACKUP_TASK)
}

/// Reconciles one backup (the shared controller with [`EtcdBackup`]'s part).
pub async fn reconcile(backup: Arc<EtcdBackup>, ctx: Arc<Context>) -> Result<Action> {
    controller::reconcile(backup, ctx).await
}

impl BackupResource for EtcdBackup {
    type Cluster = EtcdCluster;
    type Report = SnapshotReport;
    type Context = Context;

    const CLUSTER_KIND: &'static str = "EtcdCluster";
    const EXTENSION: &'static str = EXTENSION;

    fn runtime(ctx: &Context) -> &Runtime {
        &ctx.rt
    }

    fn policy(cluster: &EtcdCluster) -> Option<&BackupPolicy> {
        cluster.spec.backup.as_ref()
    }

    fn common(status: &EtcdBackupStatus) -> &BackupStatus {
        &status.common
    }

    fn common_mut(status: &mut EtcdBackupStatus) -> &mut BackupStatus {
        &mut status.common
    }

    fn object(report: &SnapshotReport) -> &ObjectReport {
        &report.object
    }

    async fn start(
        &self,
        ctx: &Context,
        cluster: &EtcdCluster,
        target: &BackupTarget<'_>,
        status: &mut EtcdBackupStatus,
    ) -> Result<Start> {
        let cluster_name = cluster.name_any();
        let names = Names::new(cluster_name.clone(), &ctx.rt.namespace);
        let members = cluster.status.as_ref().map(|s| s.members.as_slice()).unwrap_or_default();
        let Some((ordinal, member)) = pick_member(&names, members) else {
            let message =
                format!("waiting for a healthy member of EtcdCluster {cluster_name} to take the snapshot from");
            return Ok(Start::Wait { reason: Etcd::NoHealthyMember.into(), message });
        };
        let image = operator_image(EtcdOperator::NAME)
            .ok_or_else(|| statecraft_shared::Error::Permanent("the operator does not know its own image".into()))?;
        let endpoint = names.client_url(ordinal);
        let job = backup_job(&BackupJob {
            name: target.job_name,
            namespace: &names.namespace,
            cluster: &cluster_name,
            operator_image: &image,
            endpoint: &endpoint,
            member: &member.name,
            location: target.location,
            key: target.key,
            deadline_seconds: target.deadline_seconds,
            pod_template: &cluster.spec.pod_template,
        });
        status.member = Some(member.name.clone());
        let role = if member.leader { "the leader" } else { "a follower" };
        let message = format!(
            "streaming a snapshot of {} ({role}) to bucket {} key {}",
            member.name, target.location.bucket, target.key
        );
        Ok(Start::Job { job: Box::new(job), message })
    }

    fn record(status: &mut EtcdBackupStatus, report: &SnapshotReport) -> Stored {
        status.revision = Some(report.revision);
        status.member = Some(report.member.clone());
        let object = &report.object;
        let message = format!(
            "{} bytes of {} at revision {} stored at {}",
            object.bytes, report.member, report.revision, object.url
        );
        Stored { message, warning: None }
    }

    fn finished(&self, ctx: &Context, _status: &EtcdBackupStatus, succeeded: bool) {
        ctx.metrics.record_backup(&self.spec.backup.cluster_name, succeeded, Utc::now().timestamp());
    }
}

/// The member to snapshot: a healthy voting follower (the highest ordinal, the last to
/// become leader), else the healthy leader. Learners are never chosen: they may lag.
pub fn pick_member<'a>(names: &Names, members: &'a [MemberStatus]) -> Option<(u32, &'a MemberStatus)> {
    let candidates =
        members.iter().filter(|m| m.healthy && !m.learner).filter_map(|m| Some((names.ordinal_of(&m.name)?, m)));
    candidates.max_by_key(|(ordinal, m)| (!m.leader, *ordinal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::backup::job::ObjectReport;

    fn member(name: &str, healthy: bool, leader: bool, learner: bool) -> MemberStatus {
        MemberStatus { name: name.into(), healthy, leader, learner, ..Default::default() }
    }

    #[test]
    fn a_healthy_follower_is_preferred_then_the_leader() {
        let names = Names::new("main", "ns");
        let pick = |members: &[MemberStatus]| pick_member(&names, members).map(|(o, m)| (o, m.name.clone()));
        let all = [
            member("main-0", true, true, false),
            member("main-1", true, false, false),
            member("main-2", true, false, false),
            member("main-3", true, false, true),
        ];
        assert_eq!(pick(&all), Some((2, "main-2".into())), "the highest healthy voting follower");
        let sick_followers = [
            member("main-0", true, true, false),
            member("main-1", false, false, false),
            member("main-2", true, false, true),
        ];
        assert_eq!(pick(&sick_followers), Some((0, "main-0".into())), "else the leader");
        assert_eq!(pick(&[member("main-0", false, true, false)]), None);
        assert_eq!(pick(&[member("other-1", true, false, false)]), None, "not a member of this cluster");
        assert_eq!(pick(&[]), None);
    }

    #[test]
    fn reports_fill_the_status() {
        let report = SnapshotReport {
            object: ObjectReport {
                url: "s3://b/p/main/k.db".into(),
                key: "main/k.db".into(),
                bytes: 4096,
                sha256: "ab".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                finished_at: "2026-01-01T00:00:09Z".into(),
            },
            revision: 17,
            member: "main-2".into(),
            etcd_version: String::new(),
        };
        let mut status = EtcdBackupStatus::default();
        let stored = EtcdBackup::record(&mut status, &report);
        assert_eq!((status.revision, status.member.as_deref()), (Some(17), Some("main-2")));
        assert_eq!(stored.message, "4096 bytes of main-2 at revision 17 stored at s3://b/p/main/k.db");
        assert_eq!(job_name("nightly"), "nightly-backup");
    }
}
