//! The backup controller every operator runs: one Job per backup resource, its report
//! copied into the status. Phases go Pending → Running → Succeeded | Failed and never
//! back: a failed backup is not retried (the schedule, or a new backup resource, takes the
//! next one). What differs between systems — which member to read, the Job's pod, the
//! fields only the system knows — is the operator's [`BackupResource`]; what a backup of a
//! missing cluster, a missing location or a failed Job becomes is decided here, once.
//!
//! One reconcile: a finished backup is left alone; a backup whose Job exists follows it
//! ([`observe_job`]); otherwise the cluster is read (missing: Failed, `ClusterNotFound`),
//! the location resolved (the backup's, else the cluster's policy's) and its Secret
//! checked, and the operator builds the Job ([`BackupResource::start`]), which is applied.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::batch::v1::Job;
use kube::core::object::HasStatus;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::job::{JobFailure, JobPhase, ObjectReport, parse_report, termination_message};
use super::status::BackupStatus;
use super::{BackupPolicy, FAILED, HasBackupSpec, PENDING, RUNNING, SUCCEEDED, created_at, object_key};
use crate::apply::Applier;
use crate::error::ErrorCategory;
use crate::reason::{Common, Reason};
use crate::runner::Runtime;
use crate::s3::{S3Location, check_credentials};
use crate::status::patch_status;
use crate::{Error, Result};

/// How often a pending or running backup or restore is looked at (Job events usually
/// come first).
pub const POLL: Duration = Duration::from_secs(5);

/// Kubernetes objects the controllers read and write: namespaced, typed, serializable.
pub trait Object:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<T> Object for T where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A status the controllers patch: the operator's own type.
pub trait Status: Serialize + Clone + Default + PartialEq + Debug + Send + Sync + 'static {}

impl<T> Status for T where T: Serialize + Clone + Default + PartialEq + Debug + Send + Sync + 'static {}

/// Where a backup's Job is to store its object, worked out by the shared controller.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupTarget<'a> {
    /// The Job's name ([`job_name`](super::job::job_name) of the backup and `backup`).
    pub job_name: &'a str,
    /// The store: the backup's location, else the cluster's policy's.
    pub location: &'a S3Location,
    /// The object key ([`object_key`]).
    pub key: &'a str,
    /// The Job's `activeDeadlineSeconds`: the backup's, else the policy's, else six hours.
    pub deadline_seconds: i64,
}

/// What the operator makes of a backup ready to start.
#[derive(Clone, Debug)]
pub enum Start {
    /// Not yet (no healthy member to read, say): the backup stays Pending with this
    /// condition reason and message, and is looked at again soon.
    Wait {
        /// Condition reason.
        reason: Reason,
        /// What it waits for.
        message: String,
    },
    /// Run this Job; `message` (what it does) goes into the condition and the
    /// `BackupStarted` Event.
    Job {
        /// The Job (see [`super::job::task_job`]).
        job: Box<Job>,
        /// What it does.
        message: String,
    },
}

/// What the operator made of a succeeded Job's report.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    /// The condition and `BackupSucceeded` Event message.
    pub message: String,
    /// A Warning Event (reason, message) about a part that did not work although the
    /// backup did.
    pub warning: Option<(Reason, String)>,
}

/// A backup resource (`MySQLBackup`, `EtcdBackup`) as the shared controller drives it:
/// what is specific to the operator's system. Its spec is read through its
/// [`HasBackupSpec`]; its status (`HasStatus`, which the `CustomResource` derive
/// implements) is the operator's own type, which flattens a [`BackupStatus`].
pub trait BackupResource: Object + HasBackupSpec + HasStatus<Status: Status> {
    /// The cluster resource the backup names.
    type Cluster: Object;
    /// What the Job reports in its termination message.
    type Report: DeserializeOwned + Send;
    /// The operator's controller context.
    type Context: Send + Sync + 'static;

    /// The cluster's kind, for messages.
    const CLUSTER_KIND: &'static str;
    /// The extension of the stored objects (`sql`, `db`).
    const EXTENSION: &'static str;

    /// The runner's runtime in the operator's context.
    fn runtime(ctx: &Self::Context) -> &Runtime;
    /// The cluster's backup policy, if it has one.
    fn policy(cluster: &Self::Cluster) -> Option<&BackupPolicy>;
    /// The shared core of the operator's status.
    fn common(status: &Self::Status) -> &BackupStatus;
    /// The same, to write.
    fn common_mut(status: &mut Self::Status) -> &mut BackupStatus;
    /// The stored object, as the report describes it.
    fn object(report: &Self::Report) -> &ObjectReport;

    /// Checks of the spec that the CRD schema cannot make.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// The Job that takes this backup of `cluster` into `target`, or why not yet. May
    /// record what only the system knows into `status` (the member read, say).
    fn start(
        &self,
        ctx: &Self::Context,
        cluster: &Self::Cluster,
        target: &BackupTarget<'_>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Start>> + Send;

    /// Copies the rest of a succeeded Job's report (what [`BackupStatus::record`] does not)
    /// into `status`, and says what was stored.
    fn record(status: &mut Self::Status, report: &Self::Report) -> Stored;

    /// The Job ended (`succeeded` or not): metrics. `status` is the final one.
    fn finished(&self, _ctx: &Self::Context, _status: &Self::Status, _succeeded: bool) {}

    /// A backup already finished is reconciled again (after a restart, every one is, once):
    /// metrics rebuilt from it.
    fn seen_finished(&self, _ctx: &Self::Context, _status: &Self::Status) {}
}

/// What becomes of a reconcile that ended in an error: an invalid spec fails the resource
/// for good, with the error's reason as condition and Warning Event; anything else is
/// retried by the runner. Shared by the backup and restore controllers.
pub(crate) enum Ending {
    /// Finished this pass: requeue as said.
    Done(Action),
    /// Failed for good: phase Failed, with this reason and message.
    Failed(Reason, String),
    /// Retry: the runner backs off.
    Retry(Error),
}

impl Ending {
    pub(crate) fn of(result: Result<Action>) -> Self {
        match result {
            Ok(action) => Ending::Done(action),
            Err(e) if e.category() == ErrorCategory::InvalidSpec => Ending::Failed(e.reason(), e.to_string()),
            Err(e) => Ending::Retry(e),
        }
    }
}

/// Reconciles one backup.
pub async fn reconcile<B: BackupResource>(backup: Arc<B>, ctx: Arc<B::Context>) -> Result<Action> {
    let rt = B::runtime(&ctx);
    let old = backup.status().cloned();
    let mut status = old.clone().unwrap_or_default();
    if B::common(&status).is_finished() {
        backup.seen_finished(&ctx, &status);
        return Ok(Action::await_change());
    }
    let generation = backup.meta().generation;
    let result = match Ending::of(step(&*backup, &ctx, &mut status).await) {
        Ending::Done(action) => Ok(action),
        Ending::Failed(reason, message) => {
            fail::<B>(rt, &*backup, &mut status, generation, reason, message).await;
            Ok(Action::await_change())
        }
        Ending::Retry(e) => Err(e),
    };
    let api: Api<B> = Api::namespaced(rt.client.clone(), &rt.namespace);
    patch_status(&api, &*backup, old.as_ref(), &status, rt.field_manager).await?;
    result
}

/// Fails the backup for good: phase Failed, Ready false with `reason`, a Warning Event.
async fn fail<B: BackupResource>(
    rt: &Runtime,
    backup: &B,
    status: &mut B::Status,
    generation: Option<i64>,
    reason: Reason,
    message: String,
) {
    missing_or_invalid(B::common_mut(status), generation, reason, &message);
    rt.events.warning(backup, reason, "Backup", message).await;
}

/// The status of a backup that cannot be taken as specified.
fn missing_or_invalid(status: &mut BackupStatus, generation: Option<i64>, reason: Reason, message: &str) {
    status.set_phase(FAILED, reason, message, generation);
}

/// Why a backup of `cluster` (of kind `kind`) cannot be taken: the cluster does not exist.
/// The backup fails rather than waits: a backup names a cluster that exists when it is
/// made (scheduled ones are made by their cluster), and one that waits for a cluster that
/// never comes holds its Pending phase forever with nobody told.
pub fn cluster_not_found(kind: &str, cluster: &str) -> (Reason, String) {
    (Reason::from(Common::ClusterNotFound), format!("spec.clusterName: {kind} {cluster} does not exist"))
}

async fn step<B: BackupResource>(backup: &B, ctx: &B::Context, status: &mut B::Status) -> Result<Action> {
    let rt = B::runtime(ctx);
    let generation = backup.meta().generation;
    backup.validate()?;
    let name = backup.name_any();
    let job_name = super::job::job_name(&name, "backup");
    let jobs: Api<Job> = Api::namespaced(rt.client.clone(), &rt.namespace);
    if let Some(job) = jobs.get_opt(&job_name).await.map_err(|e| Error::kube("reading the backup Job", e))? {
        return observe_backup_job(backup, ctx, &job, status).await;
    }

    let spec = backup.backup_spec();
    let cluster_name = &spec.cluster_name;
    let clusters: Api<B::Cluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(cluster) = clusters.get_opt(cluster_name).await.map_err(|e| Error::kube("reading the cluster", e))? else {
        let (reason, message) = cluster_not_found(B::CLUSTER_KIND, cluster_name);
        fail::<B>(rt, backup, status, generation, reason, message).await;
        return Ok(Action::await_change());
    };
    let policy = B::policy(&cluster);
    let Some(location) = spec.location.as_ref().or(policy.map(|p| &p.location)) else {
        return Err(Error::invalid_spec(
            "spec.location",
            format!("is required: {} {cluster_name} has no backup policy (spec.backup)", B::CLUSTER_KIND),
        ));
    };
    location.validate().map_err(|e| Error::invalid_spec("spec.location", e.to_string()))?;
    // The Job will be given the location's Secret: only one that opted in.
    let field = if spec.location.is_some() { "spec.location.credentialsSecret" } else { "spec.clusterName" };
    check_credentials(rt.client.clone(), &rt.namespace, location, field).await?;
    let created = created_at(backup.meta()).unwrap_or_else(Utc::now);
    let key = object_key(cluster_name, &name, created, B::EXTENSION);
    let target = BackupTarget {
        job_name: &job_name,
        location,
        key: &key,
        deadline_seconds: spec.deadline.seconds(policy.map(|p| &p.deadline)),
    };
    let (job, message) = match backup.start(ctx, &cluster, &target, status).await? {
        Start::Wait { reason, message } => {
            B::common_mut(status).set_phase(PENDING, reason, &message, generation);
            return Ok(Action::requeue(POLL));
        }
        Start::Job { job, message } => (job, message),
    };
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, backup, &rt.apply_cache)?;
    applier.apply(*job).await?;
    let common = B::common_mut(status);
    common.start_time = Some(now());
    common.key = Some(key.clone());
    common.set_phase(RUNNING, Common::JobStarted, &message, generation);
    rt.events.normal(backup, Common::BackupStarted, "Backup", message).await;
    Ok(Action::requeue(POLL))
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// How a task Job ended, or that it has not.
#[derive(Clone, Debug, PartialEq)]
pub enum JobOutcome {
    /// Still running.
    Running,
    /// Succeeded, with its termination message (its report).
    Succeeded(String),
    /// Failed or stopped at its deadline.
    Failed(JobFailure),
}

/// How task Job `job` ended: its phase, with its termination message read when it ended.
pub async fn observe_job(rt: &Runtime, job: &Job) -> Result<JobOutcome> {
    let name = job.name_any();
    Ok(match JobPhase::of(job) {
        JobPhase::Running => JobOutcome::Running,
        JobPhase::Succeeded => JobOutcome::Succeeded(
            termination_message(rt.client.clone(), &rt.namespace, &name).await?.unwrap_or_default(),
        ),
        JobPhase::Failed | JobPhase::DeadlineExceeded => {
            let message = termination_message(rt.client.clone(), &rt.namespace, &name).await?;
            JobOutcome::Failed(JobFailure::of(job, message.as_deref()))
        }
    })
}

async fn observe_backup_job<B: BackupResource>(
    backup: &B,
    ctx: &B::Context,
    job: &Job,
    status: &mut B::Status,
) -> Result<Action> {
    let rt = B::runtime(ctx);
    let name = job.name_any();
    let generation = backup.meta().generation;
    match observe_job(rt, job).await? {
        JobOutcome::Running => Ok(Action::requeue(POLL)),
        JobOutcome::Succeeded(message) => {
            let report: B::Report = parse_report(&name, &message)?;
            B::common_mut(status).record(B::object(&report));
            let stored = B::record(status, &report);
            B::common_mut(status).set_phase(SUCCEEDED, Common::BackupStored, &stored.message, generation);
            if let Some((reason, warning)) = stored.warning {
                rt.events.warning(backup, reason, "Backup", warning).await;
            }
            backup.finished(ctx, status, true);
            rt.events.normal(backup, Common::BackupSucceeded, "Backup", stored.message).await;
            Ok(Action::await_change())
        }
        JobOutcome::Failed(failure) => {
            let message = format!("backup Job {name} {}", failure.message);
            let common = B::common_mut(status);
            common.completion_time = Some(now());
            common.set_phase(FAILED, failure.reason, &message, generation);
            backup.finished(ctx, status, false);
            rt.events.warning(backup, Common::BackupFailed, "Backup", message).await;
            Ok(Action::await_change())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed_for(kind: &str) -> BackupStatus {
        let mut status = BackupStatus::default();
        status.set_phase(PENDING, Common::MemberNotReady, "waiting", Some(1));
        let (reason, message) = cluster_not_found(kind, "gone");
        missing_or_invalid(&mut status, Some(1), reason, &message);
        status
    }

    #[test]
    fn a_backup_of_a_missing_cluster_fails_with_the_reason_in_every_operator() {
        for kind in ["MySQLCluster", "EtcdCluster"] {
            let status = failed_for(kind);
            assert_eq!(status.phase.as_deref(), Some(FAILED), "{kind}: fails, not pending");
            assert!(status.is_finished(), "{kind}: never retried");
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
            assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "ClusterNotFound"), "{kind}");
            assert_eq!(ready.message, format!("spec.clusterName: {kind} gone does not exist"));
            let progressing = status.conditions.iter().find(|c| c.type_ == "Progressing").expect("Progressing");
            assert_eq!(progressing.status, "False", "{kind}: nothing runs");
        }
    }

    #[test]
    fn only_invalid_specs_fail_for_good() {
        let invalid = Ending::of(Err(Error::invalid_spec("spec.location", "is required")));
        assert!(
            matches!(&invalid, Ending::Failed(r, m) if *r == Common::InvalidSpec && m == "invalid spec: spec.location: is required")
        );
        assert!(matches!(Ending::of(Err(Error::Permanent("bug".into()))), Ending::Retry(_)));
        assert!(matches!(Ending::of(Ok(Action::await_change())), Ending::Done(_)));
    }
}
