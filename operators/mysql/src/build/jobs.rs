//! The Jobs that back up and restore a cluster. Long work never runs inside a reconcile: a
//! Job's pod runs the server image (for its `mariadb-dump` / `mariadb` clients) with this
//! operator's static binary copied in by an init container, and streams between the client
//! and S3 through the shared store. Parameters reach the task through environment variables,
//! secrets through Secret references; the outcome comes back as the container's termination
//! message.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use statecraft_shared::deploy::{restricted_container, secret_env};
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

/// Environment variables the Job tasks read.
pub mod env {
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
    /// The S3 location, as JSON (bucket, prefix, endpoint, region; no credentials).
    pub const LOCATION: &str = "STATECRAFT_JOB_S3_LOCATION";
    /// The object key, relative to the location's prefix.
    pub const KEY: &str = "STATECRAFT_JOB_S3_KEY";
    /// S3 access key id (from the location's Secret).
    pub const ACCESS_KEY_ID: &str = "STATECRAFT_JOB_S3_ACCESS_KEY_ID";
    /// S3 secret access key (from the location's Secret).
    pub const SECRET_ACCESS_KEY: &str = "STATECRAFT_JOB_S3_SECRET_ACCESS_KEY";
    /// Expected SHA-256 of the object (restore), when known.
    pub const SHA256: &str = "STATECRAFT_JOB_SHA256";
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

fn value(name: &str, v: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(v.into()), ..Default::default() }
}

/// The Job. No retries (`backoffLimit: 0`): a failed backup or restore is reported with the
/// reason from its termination message, and repeating a half-applied restore is not safe.
pub fn job(p: &JobParams<'_>) -> Job {
    let labels = BTreeMap::from([
        (CLUSTER_LABEL.to_string(), p.cluster.to_string()),
        (KIND_LABEL.to_string(), p.task.to_string()),
    ]);
    let location = serde_json::to_string(p.location).unwrap_or_default();
    let creds = &p.location.credentials_secret;
    let mut env = vec![
        value(env::FLAVOR, if p.flavor == Flavor::Mariadb { "mariadb" } else { "mysql" }),
        value(env::HOST, p.host),
        value(env::PORT, p.port.to_string()),
        value(env::USER, p.user),
        secret_env(env::PASSWORD, p.password_secret.0, p.password_secret.1),
        value(env::LOCATION, location),
        value(env::KEY, p.key),
        secret_env(env::ACCESS_KEY_ID, &creds.name, &creds.access_key_id_key),
        secret_env(env::SECRET_ACCESS_KEY, &creds.name, &creds.secret_access_key_key),
    ];
    if let Some(sha) = p.sha256 {
        env.push(value(env::SHA256, sha));
    }
    let mount =
        |name: &str, path: &str| VolumeMount { name: name.into(), mount_path: path.into(), ..Default::default() };
    let empty = |name: &str| Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let copy = Container {
        name: "copy-binary".into(),
        image: Some(p.operator_image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(vec!["copy-self".into(), BIN.into()]),
        volume_mounts: Some(vec![mount("bin", BIN_DIR)]),
        security_context: Some(restricted_container()),
        ..Default::default()
    };
    let main = Container {
        name: p.task.into(),
        image: Some(p.server_image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec![BIN.into(), "job".into(), p.task.into()]),
        env: Some(env),
        volume_mounts: Some(vec![mount("bin", BIN_DIR), mount("tmp", "/tmp")]),
        security_context: Some(restricted_container()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    };
    Job {
        metadata: ObjectMeta {
            name: Some(p.name.into()),
            namespace: Some(p.namespace.into()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    enable_service_links: Some(false),
                    automount_service_account_token: Some(false),
                    init_containers: Some(vec![copy]),
                    containers: vec![main],
                    volumes: Some(vec![empty("bin"), empty("tmp")]),
                    security_context: Some(PodSecurityContext {
                        run_as_user: Some(MYSQL_UID),
                        run_as_group: Some(MYSQL_UID),
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
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
