//! The Jobs that back up and restore a cluster. Long work never runs inside a reconcile: a
//! Job's pod runs the server image (for its `mariadb-dump` / `mariadb` clients) with this
//! operator's static binary copied in by an init container, and streams between the client
//! and S3 through the shared store. Parameters reach the task through environment variables,
//! secrets through Secret references; the outcome comes back as the container's termination
//! message.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
use statecraft_shared::backup::job::{
    TaskJob, copy_binary_container, mount, s3_env, task_container, task_job, value_env,
};
use statecraft_shared::deploy::secret_env;
use statecraft_shared::s3::S3Location;

use super::statefulset::MYSQL_UID;
use crate::api::Flavor;

/// Where the init container puts the operator's binary.
pub const BIN_DIR: &str = "/opt/statecraft";
/// The binary inside [`BIN_DIR`].
pub const BIN: &str = "/opt/statecraft/statecraft-mysql";
/// Label on Jobs (and their pods) naming the cluster they work on.
pub const CLUSTER_LABEL: &str = "mysql.statecraft.io/cluster";
/// Label naming the job's kind: `backup` or `restore`.
pub const KIND_LABEL: &str = "mysql.statecraft.io/job";

/// Environment variables the Job tasks read: the server's, and the S3 object's (shared by
/// every operator).
pub mod env {
    pub use statecraft_shared::backup::job::env::*;

    /// `mariadb` or `mysql`.
    pub const FLAVOR: &str = "STATECRAFT_JOB_FLAVOR";
    /// Server host name.
    pub const HOST: &str = "STATECRAFT_JOB_HOST";
    /// Server port.
    pub const PORT: &str = "STATECRAFT_JOB_PORT";
    /// Account.
    pub const USER: &str = "STATECRAFT_JOB_USER";
    /// Its password (from the cluster's Secret).
    pub const PASSWORD: &str = "STATECRAFT_JOB_PASSWORD";
}

/// What a Job works on.
#[derive(Clone, Debug, PartialEq)]
pub struct JobParams<'a> {
    /// Job name (also its pods' prefix).
    pub name: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// `backup` or `restore`: the task the binary runs.
    pub task: &'static str,
    /// The cluster the job works on (label).
    pub cluster: &'a str,
    /// Image with the flavor's clients (the cluster's server image).
    pub server_image: &'a str,
    /// The operator's image, for the binary.
    pub operator_image: &'a str,
    /// Flavor of the server.
    pub flavor: Flavor,
    /// Server to connect to: a replica's stable DNS name, or the read-write Service.
    pub host: &'a str,
    /// Its port.
    pub port: u16,
    /// Account.
    pub user: &'a str,
    /// Secret and key holding the account's password.
    pub password_secret: (&'a str, &'a str),
    /// The store.
    pub location: &'a S3Location,
    /// The object key.
    pub key: &'a str,
    /// Expected SHA-256 of the object (restores).
    pub sha256: Option<&'a str>,
}

/// The Job (the shared task Job): the server image, for its clients, running the
/// operator's binary copied in by an init container.
pub fn job(p: &JobParams<'_>) -> Job {
    let labels = BTreeMap::from([
        (CLUSTER_LABEL.to_string(), p.cluster.to_string()),
        (KIND_LABEL.to_string(), p.task.to_string()),
    ]);
    let mut env = vec![
        value_env(env::FLAVOR, if p.flavor == Flavor::Mariadb { "mariadb" } else { "mysql" }),
        value_env(env::HOST, p.host),
        value_env(env::PORT, p.port.to_string()),
        value_env(env::USER, p.user),
        secret_env(env::PASSWORD, p.password_secret.0, p.password_secret.1),
    ];
    env.extend(s3_env(p.location, p.key, p.sha256));
    let empty = |name: &str| Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let command = vec![BIN.into(), "job".into(), p.task.into()];
    task_job(TaskJob {
        name: p.name.into(),
        namespace: p.namespace.into(),
        labels,
        init_containers: vec![copy_binary_container(p.operator_image, "bin", BIN_DIR, BIN)],
        container: task_container(
            p.task,
            p.server_image,
            command,
            env,
            vec![mount("bin", BIN_DIR), mount("tmp", "/tmp")],
        ),
        volumes: vec![empty("bin"), empty("tmp")],
        run_as: MYSQL_UID,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::s3::S3CredentialsSecretRef;

    fn params(location: &S3Location) -> JobParams<'_> {
        JobParams {
            name: "nightly-backup",
            namespace: "ns",
            task: "backup",
            cluster: "db",
            server_image: "mariadb:10.11",
            operator_image: "statecraft-mysql:dev",
            flavor: Flavor::Mariadb,
            host: "db-1.db-hl.ns.svc",
            port: 3306,
            user: "backup",
            password_secret: ("db-passwords", "backup-password"),
            location,
            key: "db/nightly.sql",
            sha256: None,
        }
    }

    #[test]
    fn the_job_runs_the_copied_binary_in_the_server_image_with_secrets_by_reference() {
        let location = S3Location::new("backups", "prod", S3CredentialsSecretRef::new("s3-creds"));
        let job = job(&params(&location));
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.automount_service_account_token, Some(false), "the task needs no API access");
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.image.as_deref(), Some("statecraft-mysql:dev"));
        assert_eq!(init.args.as_ref().unwrap(), &["copy-self", BIN]);
        let main = &pod.containers[0];
        assert_eq!(main.image.as_deref(), Some("mariadb:10.11"));
        assert_eq!(main.command.as_ref().unwrap(), &[BIN, "job", "backup"]);
        let env = main.env.as_ref().unwrap();
        let get = |n: &str| env.iter().find(|e| e.name == n).unwrap();
        for n in [env::PASSWORD, env::ACCESS_KEY_ID, env::SECRET_ACCESS_KEY] {
            assert!(get(n).value.is_none() && get(n).value_from.is_some(), "{n} comes from a Secret");
        }
        assert_eq!(get(env::HOST).value.as_deref(), Some("db-1.db-hl.ns.svc"));
        let loc: S3Location = serde_json::from_str(get(env::LOCATION).value.as_deref().unwrap()).unwrap();
        assert_eq!(loc, location);
        assert_eq!(job.metadata.labels.as_ref().unwrap()[CLUSTER_LABEL], "db");
        assert_eq!(main.security_context.as_ref().unwrap().read_only_root_filesystem, Some(true));
    }
}
