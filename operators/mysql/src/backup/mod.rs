//! Streaming logical backups to S3 and restores from S3.
//!
//! A backup is one object: the output of the flavor's dump client, streamed into
//! [`S3Store::upload`] as it is produced, never held in memory or on disk (a Job has
//! neither room for a whole database). On the way, its size is counted and the replication
//! position of its snapshot is read from its comments ([`DumpScanner`]).
//!
//! All or nothing: a dump that fails (exit status, no completion line, no GTID position)
//! makes the stream fail at its end, which aborts the upload, so no object is left behind
//! that a later restore could mistake for a backup. A restore streams the object into the
//! flavor's client; the store verifies the object's size and SHA-256 as it goes, and a
//! mismatch or a failing client fails the restore.
//!
//! What is in a backup, and what is not (the `mysql` schema; the accounts other than the
//! operator's follow the dump as SQL): see [`dump_command`] and [`backup_to_s3`].

mod binlog;
mod command;
mod position;
mod process;

use std::io;
use std::process::Stdio;
use std::time::Instant;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use statecraft_shared::s3::{S3Error, S3Store, UploadReceipt};
use statecraft_shared::tokio_util::io::{ReaderStream, StreamReader};
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};

use crate::accounts::server::Session;
use crate::api::Flavor;
use crate::clustering::dataplane::Endpoint;
pub use binlog::{
    BinlogArchive, BinlogReplay, DomainPositions, ReplayOutcome, archive_binlogs, binlog_prefix, first_needed,
    is_source_gtid_line, replay_binlogs,
};
pub use command::{
    ClientCommand, ClientConnection, MAX_ALLOWED_PACKET, PASSWORD_ENV, SYSTEM_SCHEMA, binlog_fetch_command,
    binlog_replay_command, dump_command, restore_command,
};
pub use position::{DumpPosition, DumpScanner, is_gtid_list};
use process::{DumpReader, join_tail, spawn_tail};

/// Size of the buffer between the downloaded object and the restore client's stdin.
const RESTORE_BUFFER: usize = 256 * 1024;

/// Why a backup or restore failed. Every message names the key or the program involved.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The flavor has no logical backup here yet.
    #[error("logical backups of {flavor:?} are not implemented: {reason}")]
    UnsupportedFlavor {
        /// The flavor.
        flavor: Flavor,
        /// Why.
        reason: &'static str,
    },
    /// A client process could not be started (program not found, not executable).
    #[error("starting {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The dump failed; nothing was stored.
    #[error("the dump by {program} failed, nothing was stored under {key:?}: {reason}; its stderr ends with: {stderr}")]
    DumpFailed {
        /// The dump program.
        program: String,
        /// The key the backup was meant for.
        key: String,
        /// What went wrong.
        reason: String,
        /// The end of its stderr (the server's error message, for instance).
        stderr: String,
    },
    /// Storing the backup failed; nothing was stored.
    #[error("uploading the backup {key:?}: {source}")]
    Upload {
        /// The key.
        key: String,
        /// The store's error.
        #[source]
        source: Box<S3Error>,
    },
    /// The backup could not be opened (missing object, no access, unreachable store).
    #[error("opening the backup {key:?}: {source}")]
    Download {
        /// The key.
        key: String,
        /// The store's error.
        #[source]
        source: Box<S3Error>,
    },
    /// The backup could not be read to its end (corrupt, or the connection broke). The
    /// restore client was killed, but the target already holds part of the backup.
    #[error(
        "reading the backup {key:?} failed after {bytes} bytes, the restore was stopped and its target holds a partial restore that must be discarded: {source}"
    )]
    RestoreInput {
        /// The key.
        key: String,
        /// Bytes passed to the client before the failure.
        bytes: u64,
        /// The error (an [`S3Error`] inside, for a corrupt object).
        #[source]
        source: io::Error,
    },
    /// The restore client failed (a statement failed, wrong credentials, server gone). The
    /// target may hold a partial restore.
    #[error("the restore of {key:?} by {program} failed: {reason}; its stderr ends with: {stderr}")]
    RestoreFailed {
        /// The client program.
        program: String,
        /// The key.
        key: String,
        /// What went wrong.
        reason: String,
        /// The end of its stderr: the failing statement's error.
        stderr: String,
    },
    /// Archiving or replaying binary logs failed (the message names the file or program).
    #[error("binary logs: {reason}")]
    Binlog {
        /// What went wrong.
        reason: String,
    },
    /// Local I/O around a client process failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// A stored backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupOutcome {
    /// Key relative to the store's prefix.
    pub key: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the object (also in its metadata); keep it to verify a
    /// restore independently of the object's own metadata.
    pub sha256: String,
    /// The replication position of the dump's snapshot. Its `gtid` is always set.
    pub position: DumpPosition,
    /// When the dump started.
    pub started_at: DateTime<Utc>,
    /// When the object was stored.
    pub finished_at: DateTime<Utc>,
    /// The store's receipt (bucket, full object key, parts).
    pub receipt: UploadReceipt,
}

impl BackupOutcome {
    /// The GTID position of the snapshot (empty for a server that never logged a
    /// transaction).
    pub fn gtid(&self) -> &str {
        self.position.gtid.as_deref().unwrap_or_default()
    }
}

/// A finished restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// Key relative to the store's prefix.
    pub key: String,
    /// Bytes passed to the client.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of what was read.
    pub sha256: String,
    /// Whether the SHA-256 was compared with the recorded or expected one (see
    /// [`statecraft_shared::s3::DownloadReceipt::sha256_verified`]).
    pub sha256_verified: bool,
    /// When the restore started.
    pub started_at: DateTime<Utc>,
    /// When the client finished.
    pub finished_at: DateTime<Utc>,
}

/// The accounts section of the server `conn` names, read as its account.
async fn read_accounts(conn: &ClientConnection) -> Result<String, crate::clustering::dataplane::DataPlaneError> {
    let endpoint = Endpoint { host: conn.host.clone(), port: conn.port };
    let mut session = Session::connect(&endpoint, &conn.user, conn.password(), conn.tls().as_ref()).await?;
    session.accounts_sql().await
}

fn mib_per_second(bytes: u64, started: Instant) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / started.elapsed().as_secs_f64().max(1e-9)
}

/// Runs the dump `dump` (from [`dump_command`]) and streams its output to `key` in `store`,
/// followed by the accounts section ([`Session::accounts_sql`]) read through `accounts`
/// once the dump has ended (none without it).
///
/// The object exists afterwards only if the dump succeeded completely: exit status 0, the
/// completion line at the end, a GTID position, and the accounts read. Otherwise the upload
/// is aborted (no object, no multipart leftovers) and the error carries the end of the
/// dump's stderr. Cancelling the returned future kills the dump and aborts the upload.
///
/// The accounts are read after the dump, not in its snapshot (the server's account tables
/// are not transactional): an account changed during the dump is stored as it was at its
/// end, and a point-in-time replay from the snapshot repeats the change, which the
/// operator's own statements (`IF [NOT] EXISTS`) tolerate.
pub async fn backup_to_s3(
    dump: &ClientCommand,
    accounts: Option<&ClientConnection>,
    store: &S3Store,
    key: &str,
) -> Result<BackupOutcome, BackupError> {
    let started_at = Utc::now();
    let started = Instant::now();
    let mut child = dump
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BackupError::Spawn { program: dump.program().to_string(), source })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(BackupError::Io { what: "taking the dump's output pipes", source: io::Error::other("no pipe") });
    };
    let stderr = spawn_tail(stderr);
    info!(command = %dump, bucket = store.bucket(), key, "backup started");

    let mut reader = DumpReader::new(child, stdout);
    let accounts_failure: Mutex<Option<String>> = Mutex::new(None);
    // Polled only once the dump has ended well: a failed dump ends the stream with its error.
    let trailer = futures::stream::once(async {
        let Some(conn) = accounts else { return Ok(Bytes::new()) };
        match read_accounts(conn).await {
            Ok(sql) => Ok(Bytes::from(sql)),
            Err(e) => {
                let message = format!("reading the accounts from {}:{}: {e}", conn.host, conn.port);
                if let Ok(mut f) = accounts_failure.lock() {
                    *f = Some(message.clone());
                }
                Err(io::Error::other(message))
            }
        }
    });
    let uploaded = {
        let mut body = std::pin::pin!(StreamReader::new(ReaderStream::new(&mut reader).chain(trailer)));
        store.upload(key, &mut body).await
    };
    let end = reader.end().cloned();
    let accounts_failure = accounts_failure.into_inner().ok().flatten();
    let end = match (end, accounts_failure) {
        (Some(Ok(_)), Some(failure)) => Some(Err(failure)),
        (end, _) => end.map(|e| e.map_err(|f| f.to_string())),
    };
    let failed = uploaded.is_err() || !matches!(end, Some(Ok(_)));
    if failed {
        reader.kill().await;
    }
    let bytes = reader.bytes();
    drop(reader);
    let stderr = join_tail(stderr).await;
    let dump_failed = |reason: String, stderr: String| BackupError::DumpFailed {
        program: dump.program().to_string(),
        key: key.to_string(),
        reason,
        stderr,
    };

    match (uploaded, end) {
        (Ok(receipt), Some(Ok(position))) => {
            if !stderr.is_empty() {
                warn!(key, stderr = %stderr, "the dump succeeded with messages on stderr");
            }
            info!(
                key, bytes = receipt.size, sha256 = %receipt.sha256, gtid = position.gtid.as_deref().unwrap_or_default(),
                seconds = started.elapsed().as_secs_f64(), mib_per_second = mib_per_second(receipt.size, started),
                "backup stored"
            );
            debug_assert!(receipt.size >= bytes, "the object holds the dump and the accounts");
            Ok(BackupOutcome {
                key: key.to_string(),
                bytes: receipt.size,
                sha256: receipt.sha256.clone(),
                position,
                started_at,
                finished_at: Utc::now(),
                receipt,
            })
        }
        (_, Some(Err(failure))) => {
            warn!(key, reason = %failure, stderr = %stderr, "the dump failed; nothing stored");
            Err(dump_failed(failure, stderr))
        }
        (Err(e), _) => {
            warn!(key, error = %e, "uploading the backup failed; nothing stored");
            Err(BackupError::Upload { key: key.to_string(), source: Box::new(e) })
        }
        (Ok(receipt), None) => {
            // The store completed an upload without reading to the end of the stream: a
            // bug, and the object is not a complete backup.
            if let Err(e) = store.delete(key).await {
                warn!(key, error = %e, "deleting an incomplete backup failed");
            }
            Err(dump_failed(format!("the upload stopped after {} of the dump's bytes", receipt.size), stderr))
        }
    }
}

/// Streams the backup `key` from `store` into the restore client `client` (from
/// [`restore_command`]), verifying the object's size and SHA-256 (the recorded one, and
/// `expected_sha256` if given) as it goes.
///
/// A missing object fails before the client starts. A client error (a failing statement,
/// wrong credentials) fails with the end of its stderr. A corrupt or truncated object kills
/// the client before it can execute a partial last statement; statements before that point
/// have run, so a failed restore's target must be discarded. Cancelling the returned
/// future kills the client.
pub async fn restore_from_s3(
    store: &S3Store,
    key: &str,
    expected_sha256: Option<&str>,
    client: &ClientCommand,
) -> Result<RestoreOutcome, BackupError> {
    let started_at = Utc::now();
    let started = Instant::now();
    let mut object = store
        .open(key, expected_sha256)
        .await
        .map_err(|e| BackupError::Download { key: key.to_string(), source: Box::new(e) })?;
    let mut child = client
        .command()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BackupError::Spawn { program: client.program().to_string(), source })?;
    let (Some(mut stdin), Some(stderr)) = (child.stdin.take(), child.stderr.take()) else {
        return Err(BackupError::Io { what: "taking the client's pipes", source: io::Error::other("no pipe") });
    };
    let stderr = spawn_tail(stderr);
    info!(command = %client, bucket = store.bucket(), key, size = ?object.expected_size(), "restore started");

    let failed = |reason: String, stderr: String| BackupError::RestoreFailed {
        program: client.program().to_string(),
        key: key.to_string(),
        reason,
        stderr,
    };
    let mut buf = vec![0u8; RESTORE_BUFFER];
    let mut bytes = 0u64;
    loop {
        let n = match object.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(source) => {
                // Kill, not close stdin: closing would let the client execute the partial
                // statement it holds.
                if let Err(e) = child.kill().await {
                    warn!(key, error = %e, "killing the restore client");
                }
                let stderr = join_tail(stderr).await;
                warn!(key, bytes, error = %source, stderr = %stderr, "reading the backup failed; restore stopped");
                return Err(BackupError::RestoreInput { key: key.to_string(), bytes, source });
            }
        };
        if let Err(e) = stdin.write_all(&buf[..n]).await {
            // The client stopped reading: it exited, normally because a statement failed.
            drop(stdin);
            let status = child.wait().await;
            let stderr = join_tail(stderr).await;
            let reason = match status {
                Ok(s) if !s.success() => format!("it exited with {s} after reading at most {bytes} bytes"),
                Ok(s) => format!("it stopped reading its input after {bytes} bytes ({e}) and exited with {s}"),
                Err(w) => format!("it stopped reading its input after {bytes} bytes ({e}); its status: {w}"),
            };
            return Err(failed(reason, stderr));
        }
        bytes += n as u64;
    }
    // End of input: the client executes what remains and exits.
    drop(stdin);
    let status =
        child.wait().await.map_err(|source| BackupError::Io { what: "waiting for the restore client", source })?;
    let stderr = join_tail(stderr).await;
    if !status.success() {
        return Err(failed(format!("it exited with {status}"), stderr));
    }
    if !stderr.is_empty() {
        warn!(key, stderr = %stderr, "the restore succeeded with messages on stderr");
    }
    let Some(receipt) = object.receipt().cloned() else {
        // The reader reports the end of a verified object only with a receipt.
        return Err(BackupError::RestoreInput {
            key: key.to_string(),
            bytes,
            source: io::Error::other("the object ended without being verified"),
        });
    };
    info!(
        key, bytes, sha256 = %receipt.sha256, seconds = started.elapsed().as_secs_f64(),
        mib_per_second = mib_per_second(bytes, started), "restore finished"
    );
    Ok(RestoreOutcome {
        key: key.to_string(),
        bytes,
        sha256: receipt.sha256,
        sha256_verified: receipt.sha256_verified,
        started_at,
        finished_at: Utc::now(),
    })
}
