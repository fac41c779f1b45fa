//! The Job tasks the binary runs inside a backup or restore Job's pod (`statecraft-mysql job
//! backup|restore`): read the parameters from the environment (see
//! [`crate::build::jobs::env`]), stream between the flavor's client and S3, and report the
//! outcome as JSON in the container's termination message, where the controller reads it
//! (the shared [`run_task`]).

use serde::{Deserialize, Serialize};
use statecraft_shared::backup::job::{ObjectReport, TaskEnv, run_task};
use statecraft_shared::{Error, Result};
use tracing::info;

use crate::api::Flavor;
use crate::backup::{ClientConnection, backup_to_s3, dump_command, restore_command, restore_from_s3};
use crate::build::jobs::env;

/// What a backup Job reports: the stored object, and the position it is consistent with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupReport {
    /// Where the object is and what it holds.
    #[serde(flatten)]
    pub object: ObjectReport,
    /// GTID position the dump is consistent with.
    pub gtid: String,
}

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
    );
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
    let outcome = backup_to_s3(&dump, &store, &key).await.map_err(job_error)?;
    let report = BackupReport {
        object: ObjectReport::new(&outcome.receipt, outcome.started_at, outcome.finished_at),
        gtid: outcome.gtid().to_string(),
    };
    info!(url = %report.object.url, bytes = report.object.bytes, gtid = %report.gtid, "backup stored");
    Ok(report)
}

async fn restore(vars: TaskEnv<'_>) -> Result<RestoreReport> {
    let store = vars.store()?;
    let (flavor, conn) = connection(&vars)?;
    let key = vars.required(env::KEY)?;
    let expected = vars.optional(env::SHA256);
    let client = restore_command(flavor, &conn).map_err(job_error)?;
    wait_for_server(&conn).await?;
    let outcome = restore_from_s3(&store, &key, expected.as_deref(), &client).await.map_err(job_error)?;
    let report = RestoreReport {
        bytes: outcome.bytes,
        sha256: outcome.sha256,
        sha256_verified: outcome.sha256_verified,
        started_at: outcome.started_at.to_rfc3339(),
        finished_at: outcome.finished_at.to_rfc3339(),
    };
    info!(key, bytes = report.bytes, "restore applied");
    Ok(report)
}
