//! The Job tasks the binary runs inside a backup or restore Job's pod (`statecraft-mysql job
//! backup|restore`): read the parameters from the environment (see
//! [`crate::build::jobs::env`]), stream between the flavor's client and S3, and report the
//! outcome as JSON in the container's termination message, where the controller reads it.

use serde::{Deserialize, Serialize};
use statecraft_shared::s3::{S3Credentials, S3Location, S3Store};
use statecraft_shared::{Error, Result};
use tracing::info;

use crate::api::Flavor;
use crate::backup::{ClientConnection, backup_to_s3, dump_command, restore_command, restore_from_s3};
use crate::build::jobs::env;

/// Where Kubernetes reads a container's termination message.
const TERMINATION_LOG: &str = "/dev/termination-log";

/// What a backup Job reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupReport {
    /// `s3://bucket/full-key`.
    pub url: String,
    /// Key relative to the location's prefix.
    pub key: String,
    /// Bytes stored.
    pub bytes: u64,
    /// SHA-256 of the object, hex.
    pub sha256: String,
    /// GTID position the dump is consistent with.
    pub gtid: String,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339).
    pub finished_at: String,
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

fn var(name: &str) -> Result<String> {
    std::env::var(name).map_err(|_| Error::invalid_spec(name, "missing from the Job's environment"))
}

fn store() -> Result<S3Store> {
    let location: S3Location = serde_json::from_str(&var(env::LOCATION)?)
        .map_err(|e| Error::invalid_spec(env::LOCATION, format!("not an S3 location: {e}")))?;
    let credentials = S3Credentials::new(var(env::ACCESS_KEY_ID)?, var(env::SECRET_ACCESS_KEY)?);
    Ok(S3Store::new(&location, credentials)?)
}

fn connection() -> Result<(Flavor, ClientConnection)> {
    let flavor = match var(env::FLAVOR)?.as_str() {
        "mariadb" => Flavor::Mariadb,
        "mysql" => Flavor::Mysql,
        other => return Err(Error::invalid_spec(env::FLAVOR, format!("unknown flavor {other:?}"))),
    };
    let port = var(env::PORT)?.parse().map_err(|_| Error::invalid_spec(env::PORT, "not a port number"))?;
    Ok((flavor, ClientConnection::new(var(env::HOST)?, port, var(env::USER)?, var(env::PASSWORD)?)))
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

/// Writes `report` (or, on failure, the error) where the controller reads it.
fn report(text: &str) {
    if let Err(e) = std::fs::write(TERMINATION_LOG, text) {
        tracing::warn!(error = %e, "could not write the termination message");
    }
}

/// Runs the task `name`.
pub async fn run(name: &str) -> Result<()> {
    let result = match name {
        "backup" => backup().await,
        "restore" => restore().await,
        other => Err(Error::invalid_spec("job", format!("statecraft-mysql has no job task named {other:?}"))),
    };
    match &result {
        Ok(json) => report(json),
        Err(e) => report(&format!("{name} failed: {e}")),
    }
    result.map(|_| ())
}

async fn backup() -> Result<String> {
    let store = store()?;
    let (flavor, conn) = connection()?;
    let key = var(env::KEY)?;
    let dump = dump_command(flavor, &conn).map_err(job_error)?;
    wait_for_server(&conn).await?;
    let outcome = backup_to_s3(&dump, &store, &key).await.map_err(job_error)?;
    let report = BackupReport {
        url: format!("s3://{}/{}", outcome.receipt.bucket, outcome.receipt.object_key),
        key: outcome.key.clone(),
        bytes: outcome.bytes,
        sha256: outcome.sha256.clone(),
        gtid: outcome.gtid().to_string(),
        started_at: outcome.started_at.to_rfc3339(),
        finished_at: outcome.finished_at.to_rfc3339(),
    };
    info!(url = %report.url, bytes = report.bytes, gtid = %report.gtid, "backup stored");
    serde_json::to_string(&report).map_err(|e| Error::Permanent(format!("encoding the report: {e}")))
}

async fn restore() -> Result<String> {
    let store = store()?;
    let (flavor, conn) = connection()?;
    let key = var(env::KEY)?;
    let expected = std::env::var(env::SHA256).ok().filter(|s| !s.is_empty());
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
    serde_json::to_string(&report).map_err(|e| Error::Permanent(format!("encoding the report: {e}")))
}
