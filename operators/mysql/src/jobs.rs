//! The Job tasks the binary runs inside a backup or restore Job's pod (`statecraft-mysql job
//! backup|restore`): read the parameters from the environment (see
//! [`crate::build::jobs::env`]), stream between the flavor's client and S3, and report the
//! outcome as JSON in the container's termination message, where the controller reads it
//! (the shared [`run_task`]).

use std::path::Path;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use statecraft_shared::backup::job::{ObjectReport, TaskEnv, run_task};
use statecraft_shared::s3::S3Store;
use statecraft_shared::{Error, Result};
use tracing::{info, warn};

use crate::api::Flavor;
use crate::backup::{
    BinlogReplay, ClientConnection, archive_binlogs, backup_to_s3, binlog_prefix, dump_command, replay_binlogs,
    restore_command, restore_from_s3,
};
use crate::build::jobs::{BINLOG_WORKDIR, env};

/// What a backup Job reports: the stored object, and the position it is consistent with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupReport {
    /// Where the object is and what it holds.
    #[serde(flatten)]
    pub object: ObjectReport,
    /// GTID position the dump is consistent with.
    pub gtid: String,
    /// The binary logs archived after the dump, if asked for and done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlogs: Option<BinlogReport>,
    /// Why they were not, if asked for: the dump is a backup all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlog_error: Option<String>,
}

/// The binary logs a backup Job archived.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BinlogReport {
    /// Prefix of the files in the store.
    pub prefix: String,
    /// Number of files.
    pub files: u32,
    /// Bytes stored.
    pub bytes: u64,
    /// Every transaction after this position...
    pub from_gtid: String,
    /// ...and acknowledged before this time (RFC 3339) is in them.
    pub until: String,
}

/// The longest error text a report carries: the termination message holds 4 KiB in all.
const REPORT_ERROR_CHARS: usize = 1024;

/// What a restore Job reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    /// Bytes fed to the client.
    pub bytes: u64,
    /// SHA-256 of what was read, hex.
    pub sha256: String,
    /// Whether it was checked against the recorded or expected one.
    pub sha256_verified: bool,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339).
    pub finished_at: String,
    /// Binary log files replayed after the dump (point-in-time restores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlog_files: Option<usize>,
}

fn connection(vars: &TaskEnv<'_>) -> Result<(Flavor, ClientConnection)> {
    let flavor = match vars.required(env::FLAVOR)?.as_str() {
        "mariadb" => Flavor::Mariadb,
        "mysql" => Flavor::Mysql,
        other => return Err(Error::invalid_spec(env::FLAVOR, format!("unknown flavor {other:?}"))),
    };
    let port = vars.required(env::PORT)?.parse().map_err(|_| Error::invalid_spec(env::PORT, "not a port number"))?;
    let conn = ClientConnection::new(
        vars.required(env::HOST)?,
        port,
        vars.required(env::USER)?,
        vars.required(env::PASSWORD)?,
    )
    .with_ca_file(vars.optional(env::CA_FILE));
    Ok((flavor, conn))
}

/// How long a Job waits for its server to accept connections: a restore can start the
/// moment its target turns Ready, before the Service's endpoint is programmed on the node.
const SERVER_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until `host:port` accepts a TCP connection, or fails naming it.
async fn wait_for_server(conn: &ClientConnection) -> Result<()> {
    let deadline = tokio::time::Instant::now() + SERVER_WAIT;
    let addr = format!("{}:{}", conn.host, conn.port);
    loop {
        let attempt = tokio::time::timeout(std::time::Duration::from_secs(2), tokio::net::TcpStream::connect(&addr));
        match attempt.await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if tokio::time::Instant::now() >= deadline => {
                return Err(Error::DataPlane {
                    system: "mysql".into(),
                    message: format!("{addr} refused connections for {SERVER_WAIT:?}: {e}"),
                });
            }
            Err(_) if tokio::time::Instant::now() >= deadline => {
                return Err(Error::DataPlane {
                    system: "mysql".into(),
                    message: format!("{addr} did not answer for {SERVER_WAIT:?}"),
                });
            }
            _ => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    }
}

fn job_error(e: crate::backup::BackupError) -> Error {
    Error::DataPlane { system: "mysql".into(), message: e.to_string() }
}

/// Runs the task `name`, its parameters from the process environment.
pub async fn run(name: &str) -> Result<()> {
    let vars = TaskEnv::process();
    match name {
        "backup" => run_task(name, backup(vars)).await,
        "restore" => run_task(name, restore(vars)).await,
        other => Err(Error::invalid_spec("job", format!("statecraft-mysql has no job task named {other:?}"))),
    }
}

async fn backup(vars: TaskEnv<'_>) -> Result<BackupReport> {
    let store = vars.store()?;
    let (flavor, conn) = connection(&vars)?;
    let key = vars.required(env::KEY)?;
    let dump = dump_command(flavor, &conn).map_err(job_error)?;
    wait_for_server(&conn).await?;
    let outcome = backup_to_s3(&dump, Some(&conn), &store, &key).await.map_err(job_error)?;
    let mut report = BackupReport {
        object: ObjectReport::new(&outcome.receipt, outcome.started_at, outcome.finished_at),
        gtid: outcome.gtid().to_string(),
        binlogs: None,
        binlog_error: None,
    };
    info!(url = %report.object.url, bytes = report.object.bytes, gtid = %report.gtid, "backup stored");
    if let Some(host) = vars.optional(env::BINLOG_HOST) {
        // The dump is stored: whatever goes wrong now leaves it a good backup, only without
        // the binary logs that roll the previous one forward.
        match archive(&vars, flavor, host, conn.port, &store, &key).await {
            Ok(a) => report.binlogs = Some(a),
            Err(e) => {
                warn!(error = %e, "archiving the binary logs failed; the dump is stored");
                report.binlog_error = Some(e.chars().take(REPORT_ERROR_CHARS).collect());
            }
        }
    }
    Ok(report)
}

/// Archives the binary logs of `host` after the previous backup's position (empty: from the
/// start of a cluster that had written nothing yet) beside the backup `key`.
async fn archive(
    vars: &TaskEnv<'_>,
    flavor: Flavor,
    host: String,
    port: u16,
    store: &S3Store,
    key: &str,
) -> std::result::Result<BinlogReport, String> {
    let since = vars.optional(env::BINLOG_SINCE).unwrap_or_default();
    let user = vars.required(env::BINLOG_USER).map_err(|e| e.to_string())?;
    let password = vars.required(env::BINLOG_PASSWORD).map_err(|e| e.to_string())?;
    let source = ClientConnection::new(host, port, user, password).with_ca_file(vars.optional(env::CA_FILE));
    let a = archive_binlogs(flavor, &source, &since, store, &binlog_prefix(key), Path::new(BINLOG_WORKDIR))
        .await
        .map_err(|e| e.to_string())?;
    Ok(BinlogReport {
        prefix: a.prefix,
        files: u32::try_from(a.files.len()).unwrap_or(u32::MAX),
        bytes: a.bytes,
        from_gtid: a.from_gtid,
        until: a.until.to_rfc3339_opts(SecondsFormat::Secs, true),
    })
}

async fn restore(vars: TaskEnv<'_>) -> Result<RestoreReport> {
    let store = vars.store()?;
    let (flavor, conn) = connection(&vars)?;
    let key = vars.required(env::KEY)?;
    let expected = vars.optional(env::SHA256);
    let client = restore_command(flavor, &conn).map_err(job_error)?;
    wait_for_server(&conn).await?;
    let outcome = restore_from_s3(&store, &key, expected.as_deref(), &client).await.map_err(job_error)?;
    info!(key, bytes = outcome.bytes, "restore applied");
    let binlog_files = match vars.optional(env::BINLOG_PREFIX) {
        None => None,
        Some(prefix) => {
            let files = vars
                .required(env::BINLOG_FILES)?
                .parse()
                .map_err(|_| Error::invalid_spec(env::BINLOG_FILES, "not a number"))?;
            let stop = vars.required(env::BINLOG_STOP)?;
            let stop = DateTime::parse_from_rfc3339(&stop)
                .map_err(|e| Error::invalid_spec(env::BINLOG_STOP, format!("{stop:?}: {e}")))?
                .with_timezone(&Utc);
            let start = vars.required(env::BINLOG_START)?;
            let archive = BinlogReplay { prefix: &prefix, files, start: &start, stop };
            let replayed = replay_binlogs(flavor, &store, &archive, &client, Path::new(BINLOG_WORKDIR))
                .await
                .map_err(job_error)?;
            Some(replayed.files)
        }
    };
    Ok(RestoreReport {
        bytes: outcome.bytes,
        sha256: outcome.sha256,
        sha256_verified: outcome.sha256_verified,
        started_at: outcome.started_at.to_rfc3339(),
        finished_at: Utc::now().to_rfc3339(),
        binlog_files,
    })
}
