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
use statecraft_shared::pod_template::PodTemplate;
use statecraft_shared::s3::S3Location;

use super::statefulset::MYSQL_UID;
use super::tls;
use crate::api::Flavor;
use crate::flavor::REPLICATION_USER;
use statecraft_shared::tls::CA_CERT;

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
    /// Backup: the server whose binary logs are archived (the primary). Unset: none are.
    pub const BINLOG_HOST: &str = "STATECRAFT_JOB_BINLOG_HOST";
    /// Backup: the account that reads them (the replication account).
    pub const BINLOG_USER: &str = "STATECRAFT_JOB_BINLOG_USER";
    /// Backup: its password (from the cluster's Secret).
    pub const BINLOG_PASSWORD: &str = "STATECRAFT_JOB_BINLOG_PASSWORD";
    /// Backup: archive the transactions after this GTID position (the previous backup's).
    pub const BINLOG_SINCE: &str = "STATECRAFT_JOB_BINLOG_SINCE";
    /// The file with the authority the servers' certificate is checked against (the
    /// cluster's `spec.tls`). Unset: plaintext.
    pub const CA_FILE: &str = "STATECRAFT_JOB_CA_FILE";
    /// Restore: the archive to replay after the dump. Unset: none is.
    pub const BINLOG_PREFIX: &str = "STATECRAFT_JOB_BINLOG_PREFIX";
    /// Restore: how many files the archive recorded.
    pub const BINLOG_FILES: &str = "STATECRAFT_JOB_BINLOG_FILES";
    /// Restore: replay the transactions after this GTID position (the dump's).
    pub const BINLOG_START: &str = "STATECRAFT_JOB_BINLOG_START";
    /// Restore: and before this time (RFC 3339).
    pub const BINLOG_STOP: &str = "STATECRAFT_JOB_BINLOG_STOP";
}

/// Where a Job's binary log work keeps its local copies (the Job's `/tmp` volume).
pub const BINLOG_WORKDIR: &str = "/tmp/binlogs";

/// Binary log work a Job does besides its dump or restore (point-in-time recovery).
#[derive(Clone, Debug, PartialEq)]
pub enum BinlogWork<'a> {
    /// Backup: archive the binary logs of `host` after GTID position `since`, reading them
    /// as the replication account (it has exactly the right to read binary logs).
    Archive {
        /// The primary's stable DNS name.
        host: &'a str,
        /// The previous backup's position.
        since: &'a str,
        /// Secret and key of the replication account's password.
        password_secret: (&'a str, &'a str),
    },
    /// Restore: replay the archive under `prefix` (`files` files) from `start` until `stop`.
    Replay {
        /// Prefix of the archive in the store.
        prefix: &'a str,
        /// Files it holds.
        files: u32,
        /// The restored dump's GTID position.
        start: &'a str,
        /// The point in time (RFC 3339).
        stop: &'a str,
    },
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
    /// Binary logs to archive or replay.
    pub binlogs: Option<BinlogWork<'a>>,
    /// How long the Job may run (see [`statecraft_shared::backup::JobDeadline`]).
    pub deadline_seconds: i64,
    /// The cluster's `spec.podTemplate`.
    pub pod_template: &'a PodTemplate,
    /// The Secret with the cluster's certificate when it serves TLS: the Job connects over
    /// TLS and checks the servers against its `ca.crt`.
    pub tls_secret: Option<&'a str>,
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
    if p.tls_secret.is_some() {
        env.push(value_env(env::CA_FILE, tls::tls_path(CA_CERT)));
    }
    match &p.binlogs {
        None => {}
        Some(BinlogWork::Archive { host, since, password_secret }) => env.extend([
            value_env(env::BINLOG_HOST, *host),
            value_env(env::BINLOG_USER, REPLICATION_USER),
            secret_env(env::BINLOG_PASSWORD, password_secret.0, password_secret.1),
            value_env(env::BINLOG_SINCE, *since),
        ]),
        Some(BinlogWork::Replay { prefix, files, start, stop }) => env.extend([
            value_env(env::BINLOG_PREFIX, *prefix),
            value_env(env::BINLOG_FILES, files.to_string()),
            value_env(env::BINLOG_START, *start),
            value_env(env::BINLOG_STOP, *stop),
        ]),
    }
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
            [mount("bin", BIN_DIR), mount("tmp", "/tmp")]
                .into_iter()
                .chain(p.tls_secret.map(|_| tls::mount()))
                .collect(),
        ),
        volumes: [empty("bin"), empty("tmp")].into_iter().chain(p.tls_secret.map(tls::job_volume)).collect(),
        run_as: MYSQL_UID,
        active_deadline_seconds: p.deadline_seconds,
        pod_template: p.pod_template.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::s3::S3CredentialsSecretRef;

    /// A cluster that sets no `spec.podTemplate`.
    static NO_TEMPLATE: std::sync::LazyLock<PodTemplate> = std::sync::LazyLock::new(PodTemplate::default);

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
            binlogs: None,
            deadline_seconds: 21_600,
            pod_template: &NO_TEMPLATE,
            tls_secret: None,
        }
    }

    #[test]
    fn over_tls_the_job_mounts_the_authority_and_says_where_it_is() {
        let location = S3Location::new("backups", "prod", S3CredentialsSecretRef::new("s3-creds"));
        let plain = job(&params(&location));
        let pod = |j: &Job| j.spec.clone().unwrap().template.spec.unwrap();
        let env = |j: &Job| pod(j).containers[0].env.clone().unwrap();
        assert!(!env(&plain).iter().any(|e| e.name == env::CA_FILE));
        let over_tls = job(&JobParams { tls_secret: Some("db-tls"), ..params(&location) });
        let ca = env(&over_tls).into_iter().find(|e| e.name == env::CA_FILE).unwrap();
        assert_eq!(ca.value.as_deref(), Some("/etc/statecraft-tls/ca.crt"));
        let volume = pod(&over_tls).volumes.unwrap().into_iter().find(|v| v.name == tls::VOLUME).unwrap();
        assert_eq!(volume.secret.unwrap().secret_name.as_deref(), Some("db-tls"));
        let mounts = pod(&over_tls).containers[0].volume_mounts.clone().unwrap();
        assert!(mounts.iter().any(|m| m.mount_path == tls::TLS_DIR));
    }

    #[test]
    fn the_job_runs_the_copied_binary_in_the_server_image_with_secrets_by_reference() {
        let location = S3Location::new("backups", "prod", S3CredentialsSecretRef::new("s3-creds"));
        let job = job(&params(&location));
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        assert_eq!(spec.active_deadline_seconds, Some(21_600));
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

    #[test]
    fn binlog_work_reaches_the_task_with_the_password_by_reference() {
        let location = S3Location::new("backups", "prod", S3CredentialsSecretRef::new("s3-creds"));
        let archive = JobParams {
            binlogs: Some(BinlogWork::Archive {
                host: "db-0.db-hl.ns.svc",
                since: "0-100-42",
                password_secret: ("db-passwords", "replication-password"),
            }),
            ..params(&location)
        };
        let env = job(&archive).spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
        let get = |n: &str| env.iter().find(|e| e.name == n).cloned().unwrap();
        assert_eq!(get(env::BINLOG_HOST).value.as_deref(), Some("db-0.db-hl.ns.svc"));
        assert_eq!(get(env::BINLOG_USER).value.as_deref(), Some("repl"));
        assert_eq!(get(env::BINLOG_SINCE).value.as_deref(), Some("0-100-42"));
        assert!(get(env::BINLOG_PASSWORD).value.is_none(), "from the Secret");
        assert!(!env.iter().any(|e| e.name == env::BINLOG_PREFIX));

        let replay = JobParams {
            task: "restore",
            binlogs: Some(BinlogWork::Replay {
                prefix: "_binlogs/db/x/",
                files: 2,
                start: "0-100-42",
                stop: "2026-11-30T06:00:00Z",
            }),
            ..params(&location)
        };
        let env = job(&replay).spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
        let get = |n: &str| env.iter().find(|e| e.name == n).and_then(|e| e.value.clone());
        assert_eq!(get(env::BINLOG_PREFIX).as_deref(), Some("_binlogs/db/x/"));
        assert_eq!(get(env::BINLOG_FILES).as_deref(), Some("2"));
        assert_eq!(get(env::BINLOG_STOP).as_deref(), Some("2026-11-30T06:00:00Z"));
        assert!(get(env::BINLOG_HOST).is_none());
        let bounded = job(&JobParams { deadline_seconds: 900, ..replay });
        assert_eq!(bounded.spec.and_then(|s| s.active_deadline_seconds), Some(900), "the restore's own deadline");
    }
}
