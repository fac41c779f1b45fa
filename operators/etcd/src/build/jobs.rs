//! The backup Job of an EtcdBackup, and the parameters of the Job tasks. A snapshot needs
//! only the etcd client API, so the backup Job runs the operator's own image (`job backup`)
//! as the shared task Job; the restore task runs in the members' pods instead (see
//! [`super::restore`]).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use statecraft_shared::backup::job::{TaskJob, s3_env, task_container, task_job, value_env};
use statecraft_shared::pod_template::PodTemplate;
use statecraft_shared::s3::S3Location;

use crate::EtcdOperator;
use statecraft_shared::runner::Operator;

/// Label on Jobs (and their pods) and on scheduled EtcdBackups naming the cluster.
pub const CLUSTER_LABEL: &str = "etcd.statecraft.io/cluster";
/// Label naming the Job's task.
pub const KIND_LABEL: &str = "etcd.statecraft.io/job";
/// The task that streams a snapshot to S3.
pub const BACKUP_TASK: &str = "backup";
/// The task that restores a snapshot into the first member of a new cluster.
pub const RESTORE_MEMBER_TASK: &str = "restore-member";
/// User and group of the operator image.
pub const OPERATOR_UID: i64 = 65532;

/// Where the operator image has the operator's binary.
pub fn operator_binary() -> String {
    format!("/usr/local/bin/{}", EtcdOperator::NAME)
}

/// Environment variables the Job tasks read: the S3 object's (shared by every operator),
/// the member's, and the bootstrap configuration of the cluster (its ConfigMap's keys).
pub mod env {
    pub use statecraft_shared::backup::job::env::*;

    /// Client URL of the member to snapshot.
    pub const ENDPOINT: &str = "STATECRAFT_JOB_ETCD_ENDPOINT";
    /// Name of that member (for the report).
    pub const MEMBER: &str = "STATECRAFT_JOB_ETCD_MEMBER";
    /// The pod's name (downward API): `<cluster>-<ordinal>`.
    pub const POD_NAME: &str = "POD_NAME";
    /// The membership, its state and the token, from the cluster's ConfigMap.
    pub use crate::build::config::{INITIAL_CLUSTER, INITIAL_CLUSTER_STATE, INITIAL_CLUSTER_TOKEN};
    /// etcd's data directory; default [`crate::build::DATA_DIR`].
    pub const DATA_DIR: &str = "STATECRAFT_JOB_ETCD_DATA_DIR";
    /// The etcdutl binary; default [`super::ETCDUTL`].
    pub const ETCDUTL: &str = "STATECRAFT_JOB_ETCDUTL";
}

/// Where the etcd image has etcdutl.
pub const ETCDUTL: &str = "/usr/local/bin/etcdutl";

/// What a backup Job works on.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupJob<'a> {
    /// Job name.
    pub name: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// The cluster (label).
    pub cluster: &'a str,
    /// The operator's image.
    pub operator_image: &'a str,
    /// Client URL of the member to snapshot.
    pub endpoint: &'a str,
    /// Its name.
    pub member: &'a str,
    /// The store.
    pub location: &'a S3Location,
    /// The object key.
    pub key: &'a str,
    /// How long the Job may run (see [`statecraft_shared::backup::JobDeadline`]).
    pub deadline_seconds: i64,
    /// The cluster's `spec.podTemplate`.
    pub pod_template: &'a PodTemplate,
}

/// The backup Job.
pub fn backup_job(p: &BackupJob<'_>) -> Job {
    let labels = BTreeMap::from([
        (CLUSTER_LABEL.to_string(), p.cluster.to_string()),
        (KIND_LABEL.to_string(), BACKUP_TASK.to_string()),
    ]);
    let mut vars = vec![value_env(env::ENDPOINT, p.endpoint), value_env(env::MEMBER, p.member)];
    vars.extend(s3_env(p.location, p.key, None));
    let command = vec![operator_binary(), "job".into(), BACKUP_TASK.into()];
    task_job(TaskJob {
        name: p.name.into(),
        namespace: p.namespace.into(),
        labels,
        init_containers: Vec::new(),
        container: task_container(BACKUP_TASK, p.operator_image, command, vars, Vec::new()),
        volumes: Vec::new(),
        run_as: OPERATOR_UID,
        active_deadline_seconds: p.deadline_seconds,
        pod_template: p.pod_template.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::s3::S3CredentialsSecretRef;

    #[test]
    fn the_backup_job_runs_the_operator_against_one_member_with_secrets_by_reference() {
        let location = S3Location::new("backups", "etcd", S3CredentialsSecretRef::new("s3-creds"));
        let job = backup_job(&BackupJob {
            name: "nightly-backup",
            namespace: "ns",
            cluster: "main",
            operator_image: "statecraft-etcd:dev",
            endpoint: "http://main-1.main-peer.ns.svc:2379",
            member: "main-1",
            location: &location,
            key: "main/20260101T000000Z-nightly.db",
            deadline_seconds: 1800,
            pod_template: &PodTemplate::default(),
        });
        assert_eq!(job.spec.as_ref().and_then(|s| s.active_deadline_seconds), Some(1800));
        assert_eq!(job.metadata.labels.as_ref().map(|l| l[CLUSTER_LABEL].as_str()), Some("main"));
        let pod = job.spec.and_then(|s| s.template.spec).expect("pod spec");
        assert_eq!(pod.init_containers, None, "the operator image needs nothing copied in");
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("statecraft-etcd:dev"));
        assert_eq!(
            c.command.as_deref(),
            Some(&["/usr/local/bin/statecraft-etcd".to_string(), "job".into(), "backup".into()][..])
        );
        let vars = c.env.as_deref().unwrap_or_default();
        let get = |n: &str| vars.iter().find(|e| e.name == n).unwrap_or_else(|| panic!("{n} is set"));
        assert_eq!(get(env::ENDPOINT).value.as_deref(), Some("http://main-1.main-peer.ns.svc:2379"));
        assert_eq!(get(env::MEMBER).value.as_deref(), Some("main-1"));
        assert_eq!(get(env::KEY).value.as_deref(), Some("main/20260101T000000Z-nightly.db"));
        assert!(get(env::SECRET_ACCESS_KEY).value_from.is_some(), "credentials come from the Secret");
        assert_eq!(pod.security_context.and_then(|s| s.run_as_user), Some(OPERATOR_UID));
    }
}
