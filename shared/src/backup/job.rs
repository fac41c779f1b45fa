//! The Jobs that run backup and restore tasks. Long transfers never run inside a
//! reconcile: the controller creates a Job whose pod runs the operator's binary (`job
//! <task>`), which reads its parameters from the environment ([`TaskEnv`]), streams
//! between the managed system and S3, and leaves a JSON report in its container's
//! termination message ([`run_task`]). The controller follows the Job's [`JobPhase`] and
//! copies the report ([`termination_message`], [`parse_report`]) into the resource's status.
//! Secrets reach the pod as Secret references ([`s3_env`]), never as values in its spec.

use std::collections::BTreeMap;
use std::future::Future;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, Pod, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::deploy::{restricted_container, secret_env};
use crate::pod_template::PodTemplate;
use crate::reason::{Common, Reason};
use crate::s3::{S3Credentials, S3Location, S3Store, UploadReceipt};
use crate::{Error, Result};

/// Where Kubernetes reads a container's termination message (its default
/// `terminationMessagePath`).
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The environment variables through which every operator's tasks find their S3 object.
pub mod env {
    /// The S3 location, as JSON (bucket, prefix, endpoint, region; no credentials).
    pub const LOCATION: &str = "STATECRAFT_JOB_S3_LOCATION";
    /// The object key, relative to the location's prefix.
    pub const KEY: &str = "STATECRAFT_JOB_S3_KEY";
    /// S3 access key id (from the location's Secret).
    pub const ACCESS_KEY_ID: &str = "STATECRAFT_JOB_S3_ACCESS_KEY_ID";
    /// S3 secret access key (from the location's Secret).
    pub const SECRET_ACCESS_KEY: &str = "STATECRAFT_JOB_S3_SECRET_ACCESS_KEY";
    /// Expected SHA-256 of the object (restores), when known.
    pub const SHA256: &str = "STATECRAFT_JOB_SHA256";
}

/// An environment variable with a literal value.
pub fn value_env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
}

/// The variables of [`mod@env`] for object `key` at `location`: the location as JSON, the
/// credentials by reference to the location's Secret, the expected SHA-256 if known.
pub fn s3_env(location: &S3Location, key: &str, sha256: Option<&str>) -> Vec<EnvVar> {
    // An S3Location is plain strings and booleans: serializing it cannot fail.
    let json = serde_json::to_string(location).unwrap_or_default();
    let creds = &location.credentials_secret;
    let mut vars = vec![
        value_env(env::LOCATION, json),
        value_env(env::KEY, key),
        secret_env(env::ACCESS_KEY_ID, &creds.name, &creds.access_key_id_key),
        secret_env(env::SECRET_ACCESS_KEY, &creds.name, &creds.secret_access_key_key),
    ];
    if let Some(sha) = sha256 {
        vars.push(value_env(env::SHA256, sha));
    }
    vars
}

/// Where a task reads its parameters: the process environment in a Job's pod, any lookup
/// in tests (the environment is process-global, so tests must not set it).
#[derive(Clone, Copy)]
pub struct TaskEnv<'a> {
    lookup: &'a (dyn Fn(&str) -> Option<String> + Sync),
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl TaskEnv<'static> {
    /// The process environment.
    pub fn process() -> Self {
        TaskEnv { lookup: &process_env }
    }
}

impl<'a> TaskEnv<'a> {
    /// Parameters from `lookup`.
    pub fn new(lookup: &'a (dyn Fn(&str) -> Option<String> + Sync)) -> Self {
        TaskEnv { lookup }
    }

    /// The value of `name`; unset and empty are the same.
    pub fn optional(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|v| !v.is_empty())
    }

    /// The value of `name`, or an error naming it.
    pub fn required(&self, name: &str) -> Result<String> {
        self.optional(name).ok_or_else(|| Error::invalid_spec(name, "missing from the Job's environment"))
    }

    /// The store of [`env::LOCATION`] with the credentials of [`mod@env`].
    pub fn store(&self) -> Result<S3Store> {
        let location: S3Location = serde_json::from_str(&self.required(env::LOCATION)?)
            .map_err(|e| Error::invalid_spec(env::LOCATION, format!("not an S3 location: {e}")))?;
        let credentials =
            S3Credentials::new(self.required(env::ACCESS_KEY_ID)?, self.required(env::SECRET_ACCESS_KEY)?);
        Ok(S3Store::new(&location, credentials)?)
    }
}

/// Runs `work` as task `task` and leaves its outcome where the controller reads it: the
/// report as JSON on success, `<task> failed: <error>` otherwise.
pub async fn run_task<T, F>(task: &str, work: F) -> Result<()>
where
    T: Serialize,
    F: Future<Output = Result<T>>,
{
    let result = work.await.and_then(|report| {
        serde_json::to_string(&report).map_err(|source| Error::Serde { context: format!("{task} report"), source })
    });
    let message = match &result {
        Ok(json) => json.clone(),
        Err(e) => format!("{task} failed: {e}"),
    };
    if let Err(e) = std::fs::write(TERMINATION_LOG, message) {
        warn!(error = %e, "could not write the termination message");
    }
    result.map(|_| ())
}

/// Where a stored object is and what it holds: the part of a backup task's report that
/// is the same for every operator (each adds what its system knows, e.g. a position).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    /// `s3://bucket/full-key`.
    pub url: String,
    /// Key relative to the location's prefix.
    pub key: String,
    /// Bytes stored.
    pub bytes: u64,
    /// SHA-256 of the object, hex.
    pub sha256: String,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339).
    pub finished_at: String,
}

impl ObjectReport {
    /// The report of an upload that ran from `started` to `finished`.
    pub fn new(receipt: &UploadReceipt, started: DateTime<Utc>, finished: DateTime<Utc>) -> Self {
        ObjectReport {
            url: format!("s3://{}/{}", receipt.bucket, receipt.object_key),
            key: receipt.key.clone(),
            bytes: receipt.size,
            sha256: receipt.sha256.clone(),
            started_at: started.to_rfc3339_opts(SecondsFormat::Secs, true),
            finished_at: finished.to_rfc3339_opts(SecondsFormat::Secs, true),
        }
    }

    /// The size as the `int64` Kubernetes schemas use.
    pub fn size(&self) -> i64 {
        i64::try_from(self.bytes).unwrap_or(i64::MAX)
    }
}

/// Where a Job is, from its status. Task Jobs never retry (`backoffLimit: 0`), so one
/// failed pod is the Job's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    /// Not finished (or not started).
    Running,
    /// Its pod succeeded.
    Succeeded,
    /// Its pod failed: its termination message says why.
    Failed,
    /// It ran past its `activeDeadlineSeconds` and Kubernetes stopped it.
    DeadlineExceeded,
}

/// The condition reason Kubernetes gives a Job stopped at its deadline.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";

impl JobPhase {
    /// The phase of `job`. The Job controller's conditions come first: `FailureTarget`
    /// (the Job has failed, its pods are being stopped) and `Failed` say so before, or
    /// without, a failed pod being counted (a pod stopped at the deadline, or one that was
    /// never scheduled).
    pub fn of(job: &Job) -> Self {
        let status = job.status.as_ref();
        let condition = |types: &[&str]| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| types.contains(&c.type_.as_str()) && c.status == "True"))
        };
        if condition(&["Complete", "SuccessCriteriaMet"]).is_some() {
            return JobPhase::Succeeded;
        }
        if let Some(failed) = condition(&["FailureTarget", "Failed"]) {
            return match failed.reason.as_deref() {
                Some(DEADLINE_EXCEEDED) => JobPhase::DeadlineExceeded,
                _ => JobPhase::Failed,
            };
        }
        if status.and_then(|s| s.succeeded).unwrap_or(0) > 0 {
            JobPhase::Succeeded
        } else if status.and_then(|s| s.failed).unwrap_or(0) > 0 {
            JobPhase::Failed
        } else {
            JobPhase::Running
        }
    }
}

/// Whether `job` is running a task now: unfinished and with a pod running (or about to).
/// This is what holds a roll or a scale-in, so a Job that failed, at its deadline or
/// otherwise, stops counting the moment Kubernetes says so, even while its pod is still
/// being stopped.
pub fn is_running(job: &Job) -> bool {
    JobPhase::of(job) == JobPhase::Running && job.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
}

/// Why a task Job failed, for the condition and the Warning Event of its resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    /// Condition reason: `DeadlineExceeded` or `JobFailed`.
    pub reason: Reason,
    /// What happened, after "<task> Job <name> ".
    pub message: String,
}

impl JobFailure {
    /// The failure of `job` (a [`JobPhase::Failed`] or [`JobPhase::DeadlineExceeded`]
    /// one), with its task's termination message if it left one.
    pub fn of(job: &Job, termination: Option<&str>) -> Self {
        let said = termination.map(str::trim).filter(|m| !m.is_empty());
        if JobPhase::of(job) == JobPhase::DeadlineExceeded {
            let deadline = job.spec.as_ref().and_then(|s| s.active_deadline_seconds);
            let limit = deadline.map(|d| format!(" of {d}s")).unwrap_or_default();
            let last = said.map(|m| format!("; its last output: {m}")).unwrap_or_default();
            return JobFailure {
                reason: Common::DeadlineExceeded.into(),
                message: format!(
                    "ran past its deadline{limit} (activeDeadlineSeconds) and was stopped; raise spec.activeDeadlineSeconds if the task needs longer{last}"
                ),
            };
        }
        JobFailure { reason: Common::JobFailed.into(), message: format!("failed: {}", said.unwrap_or("no message")) }
    }
}

/// The termination message of Job `job`'s task container: its JSON report, or its error.
pub async fn termination_message(client: Client, namespace: &str, job: &str) -> Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .map_err(|e| Error::kube(format!("listing the pods of Job {job}"), e))?;
    Ok(list.items.iter().rev().find_map(|p| {
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .iter()
            .find_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
    }))
}

/// Reads the report of a succeeded Job `job`. An unreadable report is a bug (operator and
/// Job image disagree), not something a retry fixes.
pub fn parse_report<T: DeserializeOwned>(job: &str, message: &str) -> Result<T> {
    let report = serde_json::from_str(message).map_err(|e| {
        Error::Permanent(format!("Job {job} succeeded but its report is unreadable ({e}): {message:?}"))
    })?;
    info!(job, "read the task's report");
    Ok(report)
}

/// Longest name of an object that labels its pods with it (`job-name` is a label value).
const MAX_NAME: usize = 63;

/// The name of the Job running `task` for the resource `owner`: `<owner>-<task>`, or, when
/// that would not fit a label value, the owner's name cut short and made unique again with
/// a hash of it, so that every resource name the API accepts gets its Job.
pub fn job_name(owner: &str, task: &str) -> String {
    let name = format!("{owner}-{task}");
    if name.len() <= MAX_NAME {
        return name;
    }
    let hash = hex::encode(&Sha256::digest(owner.as_bytes())[..4]);
    let room = MAX_NAME - task.len() - hash.len() - 2;
    let cut: String = owner.chars().take(room).collect();
    format!("{}-{hash}-{task}", cut.trim_end_matches(['-', '.']))
}

/// An init container that copies the operator's (static) binary to `bin` inside volume
/// `volume` mounted at `dir`, so that a container of another image (with the managed
/// system's own tools) can run it.
pub fn copy_binary_container(operator_image: &str, volume: &str, dir: &str, bin: &str) -> Container {
    Container {
        name: "copy-binary".into(),
        image: Some(operator_image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(vec!["copy-self".into(), bin.into()]),
        volume_mounts: Some(vec![mount(volume, dir)]),
        security_context: Some(restricted_container()),
        ..Default::default()
    }
}

/// A volume mount of `volume` at `path`.
pub fn mount(volume: &str, path: &str) -> VolumeMount {
    VolumeMount { name: volume.into(), mount_path: path.into(), ..Default::default() }
}

/// A container running a task: locked down, its errors readable from the termination
/// message even when the task died before writing one (its last log lines then).
pub fn task_container(
    name: &str,
    image: &str,
    command: Vec<String>,
    env: Vec<EnvVar>,
    mounts: Vec<VolumeMount>,
) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(command),
        env: Some(env),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        security_context: Some(restricted_container()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    }
}

/// What a task Job runs.
#[derive(Clone, Debug)]
pub struct TaskJob {
    /// Job name (also its pods' prefix).
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Labels of the Job and its pods.
    pub labels: BTreeMap<String, String>,
    /// Run before the task (e.g. [`copy_binary_container`]).
    pub init_containers: Vec<Container>,
    /// The task (see [`task_container`]).
    pub container: Container,
    /// The pod's volumes.
    pub volumes: Vec<Volume>,
    /// User and group the pod runs as (non-root).
    pub run_as: i64,
    /// How long the Job may run (its `activeDeadlineSeconds`, see
    /// [`JobDeadline`](super::JobDeadline)).
    pub active_deadline_seconds: i64,
    /// The cluster's `spec.podTemplate`: its Jobs run where its members may.
    pub pod_template: PodTemplate,
}

/// The Job. No retries (`backoffLimit: 0`): a failed task is reported with the reason from
/// its termination message, and repeating a half-applied restore is not safe. Bounded
/// (`activeDeadlineSeconds`): a hung task fails instead of holding its Job forever. The task
/// needs no API access, so the pod gets no service account token.
pub fn task_job(t: TaskJob) -> Job {
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(t.labels.clone()), ..Default::default() }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            enable_service_links: Some(false),
            automount_service_account_token: Some(false),
            init_containers: (!t.init_containers.is_empty()).then_some(t.init_containers),
            containers: vec![t.container],
            volumes: (!t.volumes.is_empty()).then_some(t.volumes),
            security_context: Some(PodSecurityContext {
                run_as_user: Some(t.run_as),
                run_as_group: Some(t.run_as),
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    t.pod_template.apply_to(&mut template);
    Job {
        metadata: ObjectMeta {
            name: Some(t.name),
            namespace: Some(t.namespace),
            labels: Some(t.labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(t.active_deadline_seconds),
            template,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::S3CredentialsSecretRef;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use std::collections::HashMap;

    #[test]
    fn s3_parameters_round_trip_with_secrets_by_reference() {
        let location = S3Location::new("backups", "prod", S3CredentialsSecretRef::new("s3-creds"));
        let vars = s3_env(&location, "db/x.sql", Some("ab"));
        for v in &vars {
            let secret = v.name == env::ACCESS_KEY_ID || v.name == env::SECRET_ACCESS_KEY;
            assert_eq!(v.value.is_none(), secret, "{} comes from a Secret exactly when it is a credential", v.name);
        }
        let mut map: HashMap<String, String> =
            vars.iter().filter_map(|v| Some((v.name.clone(), v.value.clone()?))).collect();
        map.insert(env::ACCESS_KEY_ID.into(), "AKID".into());
        map.insert(env::SECRET_ACCESS_KEY.into(), "secret".into());
        map.insert("EMPTY".into(), String::new());
        let lookup = move |n: &str| map.get(n).cloned();
        let task_env = TaskEnv::new(&lookup);
        assert_eq!(task_env.required(env::KEY).expect("key"), "db/x.sql");
        assert_eq!(task_env.optional(env::SHA256).as_deref(), Some("ab"));
        assert_eq!(task_env.optional("EMPTY"), None, "empty is unset");
        let e = task_env.required("NOPE").expect_err("missing");
        assert_eq!(e.to_string(), "invalid spec: NOPE: missing from the Job's environment");
        let store = task_env.store().expect("store");
        assert_eq!((store.bucket(), store.prefix()), ("backups", "prod/"));
    }

    #[test]
    fn job_phase_follows_the_pod_counts() {
        let job = |succeeded, failed| Job {
            status: Some(JobStatus { succeeded, failed, ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(JobPhase::of(&Job::default()), JobPhase::Running);
        assert_eq!(JobPhase::of(&job(None, Some(0))), JobPhase::Running);
        assert_eq!(JobPhase::of(&job(Some(1), None)), JobPhase::Succeeded);
        assert_eq!(JobPhase::of(&job(None, Some(1))), JobPhase::Failed);
    }

    fn with_condition(type_: &str, reason: &str, active: i32) -> Job {
        Job {
            spec: Some(JobSpec { active_deadline_seconds: Some(600), ..Default::default() }),
            status: Some(JobStatus {
                active: Some(active),
                conditions: Some(vec![JobCondition {
                    type_: type_.into(),
                    status: "True".into(),
                    reason: Some(reason.into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_job_stopped_at_its_deadline_failed_and_no_longer_runs() {
        // FailureTarget comes while the pod is still being stopped (still counted active),
        // Failed once it is gone; neither counts a failed pod.
        for type_ in ["FailureTarget", "Failed"] {
            let job = with_condition(type_, DEADLINE_EXCEEDED, 1);
            assert_eq!(JobPhase::of(&job), JobPhase::DeadlineExceeded, "{type_}");
            assert!(!is_running(&job), "{type_}: a failed Job holds nothing");
            let failure = JobFailure::of(&job, Some("  dumping table t\n"));
            assert_eq!(failure.reason, Common::DeadlineExceeded);
            assert!(failure.message.contains("deadline of 600s"), "{}", failure.message);
            assert!(failure.message.contains("spec.activeDeadlineSeconds"), "names the field: {}", failure.message);
            assert!(failure.message.ends_with("its last output: dumping table t"), "{}", failure.message);
        }
        let other = with_condition("Failed", "BackoffLimitExceeded", 0);
        assert_eq!(JobPhase::of(&other), JobPhase::Failed);
        assert_eq!(
            JobFailure::of(&other, Some("backup failed: access denied")),
            JobFailure { reason: Common::JobFailed.into(), message: "failed: backup failed: access denied".into() }
        );
        assert_eq!(JobFailure::of(&other, None).message, "failed: no message");
        let done = with_condition("Complete", "CompletionsReached", 0);
        assert_eq!(JobPhase::of(&done), JobPhase::Succeeded);
        assert!(!is_running(&done));
    }

    #[test]
    fn a_job_runs_while_it_has_an_active_pod_and_no_verdict() {
        let job = |active| Job {
            status: Some(JobStatus { active: Some(active), ..Default::default() }),
            ..Default::default()
        };
        assert!(is_running(&job(1)));
        assert!(!is_running(&job(0)));
        let mut unsure = with_condition("Failed", DEADLINE_EXCEEDED, 1);
        if let Some(c) = unsure.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].status = "False".into();
        }
        assert!(is_running(&unsure), "a condition that is not True is no verdict");
    }

    #[test]
    fn reports_flatten_into_operator_reports() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Report {
            #[serde(flatten)]
            object: ObjectReport,
            revision: i64,
        }
        let receipt = UploadReceipt {
            bucket: "b".into(),
            key: "c/k.db".into(),
            object_key: "p/c/k.db".into(),
            size: 42,
            sha256: "00".into(),
            parts: 0,
            e_tag: None,
        };
        let t = DateTime::from_timestamp(1_700_000_000, 0).expect("valid time");
        let report = Report { object: ObjectReport::new(&receipt, t, t), revision: 7 };
        let json = serde_json::to_string(&report).expect("json");
        assert!(json.contains(r#""url":"s3://b/p/c/k.db""#) && json.contains(r#""startedAt":"2023-11-14T22:13:20Z""#));
        assert_eq!(parse_report::<Report>("j", &json).expect("parses"), report);
        assert!(matches!(parse_report::<Report>("j", "backup failed: x"), Err(Error::Permanent(_))));
    }

    #[test]
    fn job_names_fit_a_label_value_and_stay_unique() {
        assert_eq!(job_name("nightly", "backup"), "nightly-backup");
        let long = "a".repeat(60);
        let name = job_name(&long, "backup");
        assert_eq!(name.len(), 63, "{name}");
        assert!(name.starts_with("aaaa") && name.ends_with("-backup"));
        assert_ne!(job_name(&format!("{long}x"), "backup"), job_name(&format!("{long}y"), "backup"));
        let dashed = format!("{}-{}", "b".repeat(45), "c".repeat(20));
        assert!(!job_name(&dashed, "restore").contains("--"), "no dangling separator");
    }

    #[test]
    fn task_jobs_never_retry_and_get_no_token() {
        let job = task_job(TaskJob {
            name: "n".into(),
            namespace: "ns".into(),
            labels: [("a".to_string(), "b".to_string())].into(),
            init_containers: vec![copy_binary_container("op:1", "bin", "/opt/bin", "/opt/bin/op")],
            container: task_container("backup", "op:1", vec!["op".into()], vec![], vec![]),
            volumes: vec![],
            run_as: 65532,
            active_deadline_seconds: 900,
            pod_template: PodTemplate {
                node_selector: [("disk".to_string(), "ssd".to_string())].into(),
                ..Default::default()
            },
        });
        let spec = job.spec.expect("spec");
        assert_eq!(spec.backoff_limit, Some(0));
        assert_eq!(spec.active_deadline_seconds, Some(900), "a hung task cannot hold its Job forever");
        let pod = spec.template.spec.expect("pod");
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.automount_service_account_token, Some(false));
        assert_eq!(
            pod.init_containers.expect("init")[0].args.as_deref(),
            Some(&["copy-self".into(), "/opt/bin/op".into()][..])
        );
        let c = &pod.containers[0];
        assert_eq!(c.termination_message_policy.as_deref(), Some("FallbackToLogsOnError"));
        assert_eq!(c.security_context.as_ref().and_then(|s| s.read_only_root_filesystem), Some(true));
        assert_eq!(pod.volumes, None);
        assert_eq!(pod.node_selector.expect("placed")["disk"], "ssd", "the Job runs where the cluster may");
    }
}
