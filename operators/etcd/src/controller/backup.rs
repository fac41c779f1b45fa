//! The EtcdBackup controller: one Job per backup, streaming a snapshot of one healthy
//! member (a follower when there is one, so the leader keeps its I/O for the log) to S3,
//! and the Job's report copied into the backup's status. Phases go Pending → Running →
//! Succeeded | Failed and never back: a failed backup is not retried (the schedule, or a
//! new EtcdBackup, takes the next one).

use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::Applier;
use statecraft_shared::backup::job::{JobFailure, JobPhase, parse_report, termination_message};
use statecraft_shared::backup::{FAILED, PENDING, RUNNING, SUCCEEDED, created_at};
use statecraft_shared::deploy::operator_image;
use statecraft_shared::error::ErrorCategory;
use statecraft_shared::runner::Operator;
use statecraft_shared::s3::check_credentials;
use statecraft_shared::status::{ConditionType, patch_status, set_condition};
use statecraft_shared::{Error, Result};

use super::Context;
use crate::EtcdOperator;
use crate::api::{EtcdBackup, EtcdBackupStatus, EtcdCluster, MemberStatus};
use crate::build::Names;
use crate::build::jobs::{BACKUP_TASK, BackupJob, backup_job};
use crate::snapshot::SnapshotReport;

/// How often a pending or running backup is looked at (Job events usually come first).
const POLL: Duration = Duration::from_secs(5);

/// Extension of snapshot objects.
pub const EXTENSION: &str = "db";

/// The Job of backup `name`.
pub fn job_name(name: &str) -> String {
    statecraft_shared::backup::job::job_name(name, BACKUP_TASK)
}

/// Reconciles one backup.
pub async fn reconcile(backup: Arc<EtcdBackup>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let api: Api<EtcdBackup> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let old = backup.status.clone();
    let mut status = old.clone().unwrap_or_default();
    if matches!(status.phase.as_deref(), Some(SUCCEEDED | FAILED)) {
        return Ok(Action::await_change());
    }
    let action = match step(&backup, &ctx, &mut status).await {
        Ok(action) => action,
        // What the user must fix fails the backup for good, with the reason.
        Err(e) if e.category() == ErrorCategory::InvalidSpec => {
            set_phase(&mut status, &backup, FAILED, e.reason(), &e.to_string());
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

/// Sets the phase and the conditions that go with it: Ready once stored, Progressing
/// while the Job runs.
fn set_phase(status: &mut EtcdBackupStatus, backup: &EtcdBackup, phase: &str, reason: &str, message: &str) {
    status.phase = Some(phase.to_string());
    let generation = backup.metadata.generation;
    let conditions = &mut status.conditions;
    set_condition(conditions, ConditionType::Ready, phase == SUCCEEDED, reason, message, generation);
    set_condition(conditions, ConditionType::Progressing, phase == RUNNING, reason, message, generation);
}

/// The member to snapshot: a healthy voting follower (the highest ordinal, the last to
/// become leader), else the healthy leader. Learners are never chosen: they may lag.
pub fn pick_member<'a>(names: &Names, members: &'a [MemberStatus]) -> Option<(u32, &'a MemberStatus)> {
    let candidates =
        members.iter().filter(|m| m.healthy && !m.learner).filter_map(|m| Some((names.ordinal_of(&m.name)?, m)));
    candidates.max_by_key(|(ordinal, m)| (!m.leader, *ordinal))
}

async fn step(backup: &EtcdBackup, ctx: &Context, status: &mut EtcdBackupStatus) -> Result<Action> {
    let rt = &ctx.rt;
    let name = backup.name_any();
    let job_name = job_name(&name);
    let jobs: Api<Job> = Api::namespaced(rt.client.clone(), &rt.namespace);
    if let Some(job) = jobs.get_opt(&job_name).await.map_err(|e| Error::kube("reading the backup Job", e))? {
        return observe_job(backup, ctx, &job, status).await;
    }

    let cluster_name = &backup.spec.cluster_name;
    let clusters: Api<EtcdCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(cluster) = clusters.get_opt(cluster_name).await.map_err(|e| Error::kube("reading the cluster", e))? else {
        return Err(Error::invalid_spec("spec.clusterName", format!("EtcdCluster {cluster_name} does not exist")));
    };
    let Some(location) =
        backup.spec.location.clone().or_else(|| cluster.spec.backup.as_ref().map(|b| b.location.clone()))
    else {
        return Err(Error::invalid_spec(
            "spec.location",
            format!("is required: EtcdCluster {cluster_name} has no backup policy (spec.backup)"),
        ));
    };
    location.validate().map_err(|e| Error::invalid_spec("spec.location", e.to_string()))?;
    // The Job will be given the location's Secret: only one that opted in.
    let field = if backup.spec.location.is_some() { "spec.location.credentialsSecret" } else { "spec.clusterName" };
    check_credentials(rt.client.clone(), &rt.namespace, &location, field).await?;
    let names = Names::new(cluster_name.clone(), &rt.namespace);
    let members = cluster.status.as_ref().map(|s| s.members.as_slice()).unwrap_or_default();
    let Some((ordinal, member)) = pick_member(&names, members) else {
        let message = format!("waiting for a healthy member of EtcdCluster {cluster_name} to take the snapshot from");
        set_phase(status, backup, PENDING, "NoHealthyMember", &message);
        return Ok(Action::requeue(POLL));
    };
    let created = created_at(&backup.metadata).unwrap_or_else(Utc::now);
    let key = statecraft_shared::backup::object_key(cluster_name, &name, created, EXTENSION);
    let image = operator_image(EtcdOperator::NAME)
        .ok_or_else(|| Error::Permanent("the operator does not know its own image".into()))?;
    let endpoint = names.client_url(ordinal);
    let desired = backup_job(&BackupJob {
        name: &job_name,
        namespace: &rt.namespace,
        cluster: cluster_name,
        operator_image: &image,
        endpoint: &endpoint,
        member: &member.name,
        location: &location,
        key: &key,
        deadline_seconds: backup.spec.deadline.seconds(cluster.spec.backup.as_ref().map(|b| &b.deadline)),
    });
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, backup, &rt.apply_cache)?;
    applier.apply(desired).await?;
    status.start_time = Some(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true));
    status.member = Some(member.name.clone());
    status.key = Some(key.clone());
    let role = if member.leader { "the leader" } else { "a follower" };
    let message = format!("streaming a snapshot of {} ({role}) to bucket {} key {key}", member.name, location.bucket);
    set_phase(status, backup, RUNNING, "JobStarted", &message);
    rt.events.normal(backup, "BackupStarted", "Backup", message).await;
    Ok(Action::requeue(POLL))
}

async fn observe_job(backup: &EtcdBackup, ctx: &Context, job: &Job, status: &mut EtcdBackupStatus) -> Result<Action> {
    let rt = &ctx.rt;
    let name = job.name_any();
    match JobPhase::of(job) {
        JobPhase::Running => Ok(Action::requeue(POLL)),
        JobPhase::Succeeded => {
            let message = termination_message(rt.client.clone(), &rt.namespace, &name).await?.unwrap_or_default();
            let report: SnapshotReport = parse_report(&name, &message)?;
            apply_report(status, &report);
            let object = &report.object;
            let message = format!(
                "{} bytes of {} at revision {} stored at {}",
                object.bytes, report.member, report.revision, object.url
            );
            set_phase(status, backup, SUCCEEDED, "SnapshotStored", &message);
            ctx.metrics.record_backup(&backup.spec.cluster_name, true, Utc::now().timestamp());
            rt.events.normal(backup, "BackupSucceeded", "Backup", message).await;
            Ok(Action::await_change())
        }
        JobPhase::Failed | JobPhase::DeadlineExceeded => {
            let message = termination_message(rt.client.clone(), &rt.namespace, &name).await?;
            let failure = JobFailure::of(job, message.as_deref());
            let message = format!("backup Job {name} {}", failure.message);
            status.completion_time = Some(Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true));
            set_phase(status, backup, FAILED, failure.reason, &message);
            ctx.metrics.record_backup(&backup.spec.cluster_name, false, Utc::now().timestamp());
            rt.events.warning(backup, "BackupFailed", "Backup", message).await;
            Ok(Action::await_change())
        }
    }
}

/// Copies a Job's report into the status.
fn apply_report(status: &mut EtcdBackupStatus, report: &SnapshotReport) {
    let object = &report.object;
    status.location = Some(object.url.clone());
    status.key = Some(object.key.clone());
    status.size = Some(object.size());
    status.sha256 = Some(object.sha256.clone());
    status.revision = Some(report.revision);
    status.member = Some(report.member.clone());
    status.start_time = Some(object.started_at.clone());
    status.completion_time = Some(object.finished_at.clone());
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
        apply_report(&mut status, &report);
        assert_eq!(status.location.as_deref(), Some("s3://b/p/main/k.db"));
        assert_eq!((status.size, status.revision), (Some(4096), Some(17)));
        assert_eq!(status.completion_time.as_deref(), Some("2026-01-01T00:00:09Z"));
        assert_eq!(job_name("nightly"), "nightly-backup");
    }
}
