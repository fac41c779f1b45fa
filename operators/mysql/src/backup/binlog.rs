//! Binary logs for point-in-time recovery: archived next to a backup, replayed after a
//! restore.
//!
//! A backup's Job archives, after its dump, the primary's binary logs from the position of
//! the *previous* backup of the cluster onward. A restore to a time `T` therefore loads the
//! dump of a backup `B` and replays, from `B`'s GTID position up to `T`, the archive of a
//! later backup that starts at `B`'s position and was taken after `T`.
//!
//! Why the primary's logs: a transaction acknowledged to a client is in the primary's binary
//! log before the acknowledgement (semi-sync waits AFTER_SYNC), so everything acknowledged
//! before the archive's [`BinlogArchive::until`] is in it. A replica's log could lag.
//!
//! Why replayed without the source's GTIDs: the restored cluster numbers its transactions
//! itself (the dump is loaded as new transactions too). Replayed with the source's
//! `server_id`, a transaction would be skipped by the target's replica whose own id it is
//! (servers ignore their own events), and with the source's sequence numbers it would break
//! `gtid_strict_mode`. [`is_source_gtid_line`] names the lines that are dropped.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::process::Stdio;

use chrono::{DateTime, Utc};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row};
use statecraft_shared::s3::S3Store;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tracing::{info, warn};

use super::process::{join_tail, spawn_tail};
use super::{BackupError, ClientCommand, ClientConnection, binlog_fetch_command, binlog_replay_command};
use crate::api::Flavor;

/// Where the binary logs archived with the backup object `backup_key` go: beside the
/// backups, under a prefix no cluster name can take (names cannot start with `_`), so that
/// the retention of a cluster's backups (everything under `<cluster>/`) never counts them.
pub fn binlog_prefix(backup_key: &str) -> String {
    format!("_binlogs/{}/", backup_key.strip_suffix(".sql").unwrap_or(backup_key))
}

/// The last sequence number of each replication domain: a MariaDB GTID position
/// (`0-101-42,1-101-7`) or a binary log's starting `Gtid_list` (`[0-101-40,0-102-42]`, one
/// entry per domain and server; sequence numbers grow within a domain, so the highest counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainPositions(BTreeMap<u32, u64>);

impl DomainPositions {
    /// Parses either form; `[]` and the empty string are the empty position.
    pub fn parse(text: &str) -> Result<Self, String> {
        let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
        let mut out = BTreeMap::new();
        for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let fields: Vec<&str> = part.split('-').collect();
            let [domain, _server, seq] = fields[..] else {
                return Err(format!("{text:?}: expected domain-server-sequence, got {part:?}"));
            };
            let domain: u32 = domain.parse().map_err(|_| format!("{text:?}: domain {domain:?} is not a number"))?;
            let seq: u64 = seq.parse().map_err(|_| format!("{text:?}: sequence {seq:?} is not a number"))?;
            let e = out.entry(domain).or_insert(0);
            *e = (*e).max(seq);
        }
        Ok(DomainPositions(out))
    }

    /// Every domain of `self` is at or before its position in `other`: a binary log that
    /// starts at `self`, with the files after it, holds every transaction after `other`.
    pub fn at_or_before(&self, other: &DomainPositions) -> bool {
        self.0.iter().all(|(d, seq)| *seq == 0 || other.0.get(d).is_some_and(|o| seq <= o))
    }
}

/// The first of `files` (in the server's order, each with the position it starts at) that
/// must be archived to have every transaction after `since`: the last one starting at or
/// before `since`. `None` when even the oldest file starts after it (the logs were purged).
pub fn first_needed(files: &[(String, DomainPositions)], since: &DomainPositions) -> Option<usize> {
    files.iter().rposition(|(_, start)| start.at_or_before(since))
}

/// Binary logs copied to S3 by [`archive_binlogs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogArchive {
    /// Prefix of the copies, relative to the store's prefix.
    pub prefix: String,
    /// The files, in order.
    pub files: Vec<String>,
    /// Bytes stored.
    pub bytes: u64,
    /// The position the archive starts after.
    pub from_gtid: String,
    /// Every transaction acknowledged before this time is in the archive: it was taken
    /// before the server's list of files was read.
    pub until: DateTime<Utc>,
}

fn binlog_error(what: impl Into<String>) -> BackupError {
    BackupError::Binlog { reason: what.into() }
}

async fn connect(conn: &ClientConnection) -> Result<Conn, BackupError> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(conn.host.clone())
        .tcp_port(conn.port)
        .user(Some(conn.user.clone()))
        .pass(Some(conn.password().to_string()))
        .prefer_socket(false)
        .ssl_opts(conn.tls().map(|t| t.ssl_opts()));
    Conn::new(opts).await.map_err(|e| binlog_error(format!("connecting to {}:{}: {e}", conn.host, conn.port)))
}

/// The server's binary logs, oldest first, each with the position it starts at (its
/// `Gtid_list` event, the second event of every file).
async fn list_binlogs(c: &mut Conn) -> Result<Vec<(String, DomainPositions)>, BackupError> {
    let rows: Vec<Row> =
        c.query("SHOW BINARY LOGS").await.map_err(|e| binlog_error(format!("SHOW BINARY LOGS: {e}")))?;
    let mut files = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(Ok(name)) = row.get_opt::<String, _>(0) else { continue };
        let events: Vec<Row> = c
            .query(format!("SHOW BINLOG EVENTS IN '{}' LIMIT 3", name.replace('\'', "")))
            .await
            .map_err(|e| binlog_error(format!("SHOW BINLOG EVENTS IN {name}: {e}")))?;
        let list = events.iter().find_map(|e| {
            let kind: Option<String> = e.get_opt("Event_type").and_then(Result::ok);
            (kind.as_deref() == Some("Gtid_list")).then(|| e.get_opt::<String, _>("Info").and_then(Result::ok))?
        });
        let Some(list) = list else {
            return Err(binlog_error(format!("binary log {name} has no Gtid_list event")));
        };
        files.push((name, DomainPositions::parse(&list).map_err(binlog_error)?));
    }
    Ok(files)
}

/// Copies to `store`, under `prefix`, the binary logs of the server behind `conn` that hold
/// the transactions after GTID position `since`: from the last file that starts at or
/// before it to the active one (up to its current end). Local copies go through `workdir`,
/// one file at a time. On failure, what was stored under `prefix` is deleted.
pub async fn archive_binlogs(
    flavor: Flavor,
    conn: &ClientConnection,
    since: &str,
    store: &S3Store,
    prefix: &str,
    workdir: &Path,
) -> Result<BinlogArchive, BackupError> {
    let since_pos = DomainPositions::parse(since).map_err(binlog_error)?;
    let until = Utc::now();
    let mut c = connect(conn).await?;
    let files = list_binlogs(&mut c).await;
    if let Err(e) = c.disconnect().await {
        warn!(error = %e, "closing the connection that listed the binary logs");
    }
    let files = files?;
    let Some(first) = first_needed(&files, &since_pos) else {
        let oldest = files.first().map(|(n, p)| format!("{n} starts after {p:?}")).unwrap_or_else(|| "none".into());
        return Err(binlog_error(format!(
            "{} no longer has the binary logs from GTID position {since} (oldest: {oldest})",
            conn.host
        )));
    };
    tokio::fs::create_dir_all(workdir)
        .await
        .map_err(|source| BackupError::Io { what: "creating the binary log work directory", source })?;
    let dir = workdir.to_string_lossy().to_string();
    let mut archive =
        BinlogArchive { prefix: prefix.to_string(), files: Vec::new(), bytes: 0, from_gtid: since.to_string(), until };
    for (name, _) in &files[first..] {
        match archive_one(flavor, conn, store, prefix, &dir, name).await {
            Ok(bytes) => {
                archive.files.push(name.clone());
                archive.bytes += bytes;
            }
            Err(e) => {
                for stored in &archive.files {
                    if let Err(d) = store.delete(&format!("{prefix}{stored}")).await {
                        warn!(key = %format!("{prefix}{stored}"), error = %d, "deleting a partial binary log archive");
                    }
                }
                return Err(e);
            }
        }
    }
    info!(prefix, files = archive.files.len(), bytes = archive.bytes, since, "binary logs archived");
    Ok(archive)
}

async fn archive_one(
    flavor: Flavor,
    conn: &ClientConnection,
    store: &S3Store,
    prefix: &str,
    dir: &str,
    name: &str,
) -> Result<u64, BackupError> {
    let fetch = binlog_fetch_command(flavor, conn, dir, name)?;
    run_to_end(&fetch).await?;
    let local = Path::new(dir).join(name);
    let file = tokio::fs::File::open(&local)
        .await
        .map_err(|source| BackupError::Io { what: "opening a fetched binary log", source })?;
    let key = format!("{prefix}{name}");
    let receipt =
        store.upload(&key, file).await.map_err(|e| BackupError::Upload { key: key.clone(), source: Box::new(e) })?;
    if let Err(e) = tokio::fs::remove_file(&local).await {
        warn!(file = %local.display(), error = %e, "removing a fetched binary log");
    }
    Ok(receipt.size)
}

/// Runs `cmd` with no input, discarding stdout, and fails with its stderr unless it exits 0.
async fn run_to_end(cmd: &ClientCommand) -> Result<(), BackupError> {
    let out = cmd
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|source| BackupError::Spawn { program: cmd.program().to_string(), source })?;
    if out.status.success() {
        return Ok(());
    }
    Err(binlog_error(format!("{cmd} exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())))
}

/// Whether a line of `mariadb-binlog` output sets the source's GTID or server id for the
/// next transaction (see the module documentation for why those are dropped). They are
/// whole lines of this form: `/*M!100001 SET @@session.gtid_seq_no=42*//*!*/;`.
pub fn is_source_gtid_line(line: &[u8]) -> bool {
    const PREFIX: &[u8] = b"/*M!100001 SET @@session.";
    let Some(rest) = line.strip_prefix(PREFIX) else { return false };
    [b"gtid_seq_no=".as_slice(), b"server_id=", b"gtid_domain_id="].iter().any(|v| rest.starts_with(v))
}

/// What [`replay_binlogs`] applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// Files replayed.
    pub files: usize,
    /// Bytes of SQL passed to the client.
    pub bytes: u64,
}

/// An archive to replay, and how far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogReplay<'a> {
    /// Prefix of the archive in the store.
    pub prefix: &'a str,
    /// How many files it must hold (what its backup recorded).
    pub files: usize,
    /// Replay the transactions after this GTID position (the restored dump's)...
    pub start: &'a str,
    /// ...and before this time.
    pub stop: DateTime<Utc>,
}

/// Downloads the archive `r` names (exactly `r.files` files, each verified against its
/// recorded SHA-256) into `workdir`, and replays its transactions from `r.start` until
/// `r.stop` through `client` (from [`super::restore_command`]). A failure leaves the target
/// partially rolled forward.
pub async fn replay_binlogs(
    flavor: Flavor,
    store: &S3Store,
    r: &BinlogReplay<'_>,
    client: &ClientCommand,
    workdir: &Path,
) -> Result<ReplayOutcome, BackupError> {
    let BinlogReplay { prefix, files: expected_files, start, stop } = *r;
    let objects =
        store.list(prefix).await.map_err(|e| BackupError::Download { key: prefix.into(), source: Box::new(e) })?;
    if objects.len() != expected_files {
        return Err(binlog_error(format!(
            "the archive {prefix} holds {} file(s), its backup recorded {expected_files}",
            objects.len()
        )));
    }
    tokio::fs::create_dir_all(workdir)
        .await
        .map_err(|source| BackupError::Io { what: "creating the binary log work directory", source })?;
    let mut local = Vec::with_capacity(objects.len());
    for o in &objects {
        let name = o.key.rsplit('/').next().unwrap_or(&o.key);
        let path = workdir.join(name);
        let file = tokio::fs::File::create(&path)
            .await
            .map_err(|source| BackupError::Io { what: "creating a local binary log", source })?;
        store
            .download(&o.key, file, None)
            .await
            .map_err(|e| BackupError::Download { key: o.key.clone(), source: Box::new(e) })?;
        local.push(path.to_string_lossy().to_string());
    }
    let replay = binlog_replay_command(flavor, start, stop, &local)?;
    let bytes = pipe_filtered(&replay, client).await?;
    info!(prefix, files = local.len(), bytes, start, stop = %stop, "binary logs replayed");
    Ok(ReplayOutcome { files: local.len(), bytes })
}

/// Runs `source | filter | client`, dropping [`is_source_gtid_line`] lines; both must exit 0.
async fn pipe_filtered(source: &ClientCommand, client: &ClientCommand) -> Result<u64, BackupError> {
    let spawn = |cmd: &ClientCommand, stdin: Stdio, stdout: Stdio| {
        cmd.command()
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| BackupError::Spawn { program: cmd.program().to_string(), source })
    };
    let mut producer = spawn(source, Stdio::null(), Stdio::piped())?;
    let mut consumer = spawn(client, Stdio::piped(), Stdio::null())?;
    let pipes = (producer.stdout.take(), producer.stderr.take(), consumer.stdin.take(), consumer.stderr.take());
    let (Some(out), Some(perr), Some(mut input), Some(cerr)) = pipes else {
        return Err(BackupError::Io { what: "taking the replay's pipes", source: io::Error::other("no pipe") });
    };
    let (perr, cerr) = (spawn_tail(perr), spawn_tail(cerr));
    let mut reader = BufReader::new(out);
    let mut line = Vec::with_capacity(8 * 1024);
    let mut bytes = 0u64;
    let mut write_error = None;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .await
            .map_err(|source| BackupError::Io { what: "reading the binary log replay", source })?;
        if n == 0 {
            break;
        }
        if is_source_gtid_line(&line) {
            continue;
        }
        if let Err(e) = input.write_all(&line).await {
            write_error = Some(e);
            break;
        }
        bytes += n as u64;
    }
    drop(input);
    let produced = producer.wait().await;
    let consumed = consumer.wait().await;
    let (perr, cerr) = (join_tail(perr).await, join_tail(cerr).await);
    let failed = |who: &ClientCommand, how: String, stderr: String| {
        binlog_error(format!("{} {how}; its stderr ends with: {stderr}", who.program()))
    };
    match produced {
        Ok(s) if s.success() => {}
        Ok(s) => return Err(failed(source, format!("exited with {s}"), perr)),
        Err(e) => return Err(failed(source, format!("could not be waited for: {e}"), perr)),
    }
    match consumed {
        Ok(s) if s.success() && write_error.is_none() => {}
        Ok(s) => return Err(failed(client, format!("exited with {s} ({write_error:?})"), cerr)),
        Err(e) => return Err(failed(client, format!("could not be waited for: {e}"), cerr)),
    }
    if !perr.is_empty() {
        warn!(stderr = %perr, "the binary log replay succeeded with messages on stderr");
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(s: &str) -> DomainPositions {
        DomainPositions::parse(s).unwrap()
    }

    #[test]
    fn positions_parse_both_forms_and_keep_the_highest_sequence_of_a_domain() {
        assert_eq!(pos("[]"), DomainPositions::default());
        assert_eq!(pos(""), DomainPositions::default());
        assert_eq!(pos("[0-101-40,0-102-42]"), pos("0-102-42"));
        assert_eq!(pos("0-101-42,1-101-7").0.len(), 2);
        assert!(DomainPositions::parse("0-101").is_err());
        assert!(DomainPositions::parse("x-1-2").is_err());
    }

    #[test]
    fn the_first_needed_file_is_the_last_starting_at_or_before_the_position() {
        let files: Vec<(String, DomainPositions)> = [("b.1", "[]"), ("b.2", "[0-101-10]"), ("b.3", "[0-101-20]")]
            .iter()
            .map(|(n, p)| (n.to_string(), pos(p)))
            .collect();
        assert_eq!(first_needed(&files, &pos("0-101-15")), Some(1), "15 is in b.2");
        assert_eq!(first_needed(&files, &pos("0-101-10")), Some(1), "b.2 starts after 10");
        assert_eq!(first_needed(&files, &pos("0-101-25")), Some(2));
        assert_eq!(first_needed(&files, &pos("0-101-3")), Some(0));
        assert_eq!(first_needed(&files, &pos("")), Some(0), "from the start");
        let purged = &files[1..];
        assert_eq!(first_needed(purged, &pos("0-101-3")), None, "3 was in a purged file");
        assert_eq!(first_needed(purged, &pos("1-101-30")), None, "a position in another domain only");
    }

    #[test]
    fn only_the_source_gtid_and_server_id_lines_are_dropped() {
        for l in [
            "/*M!100001 SET @@session.gtid_seq_no=5*//*!*/;\n",
            "/*M!100001 SET @@session.server_id=101*//*!*/;\n",
            "/*M!100001 SET @@session.gtid_domain_id=0*//*!*/;\n",
        ] {
            assert!(is_source_gtid_line(l.as_bytes()), "{l}");
        }
        for l in [
            "/*M!100101 SET @@session.skip_parallel_replication=0*//*!*/;\n",
            "/*!100001 SET @@SESSION.SERVER_ID=@@GLOBAL.SERVER_ID */;\n",
            "INSERT INTO t VALUES ('/*M!100001 SET @@session.gtid_seq_no=5*/')\n",
            "BINLOG '\n",
        ] {
            assert!(!is_source_gtid_line(l.as_bytes()), "{l}");
        }
    }

    #[test]
    fn archives_live_outside_every_cluster_prefix() {
        assert_eq!(binlog_prefix("db/20261130T030001Z-nightly.sql"), "_binlogs/db/20261130T030001Z-nightly/");
    }
}
