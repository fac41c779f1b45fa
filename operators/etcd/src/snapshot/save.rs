//! Streams one member's snapshot into S3: the `Maintenance.Snapshot` stream goes straight
//! into the shared store's multipart upload (no temporary file, memory bounded by the
//! store's part buffers), and is checked on the way: the database must have the size the
//! member announced and the SHA-256 the member appends, else the upload is aborted and no
//! object appears.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use chrono::Utc;
use etcd_client::{Client, ConnectOptions, SnapshotResponse};
use futures::Stream;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use statecraft_shared::backup::job::ObjectReport;
use statecraft_shared::s3::S3Store;
use tokio::io::{AsyncRead, ReadBuf};
use tracing::info;

use super::SnapshotError;

/// Length of the SHA-256 etcd appends to the database in a snapshot stream.
const DIGEST_LEN: usize = 32;

/// What a backup Job reports (its termination message), copied into the EtcdBackup status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotReport {
    /// Where the object is and what it holds.
    #[serde(flatten)]
    pub object: ObjectReport,
    /// The member's store revision when the snapshot started: every write up to this
    /// revision is in the snapshot.
    pub revision: i64,
    /// The member the snapshot was taken from.
    pub member: String,
    /// etcd storage version of the snapshot (which etcd can restore it), when the member
    /// reports one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub etcd_version: String,
}

/// Connects to one member only (its client URL): a snapshot is one member's database.
async fn connect(endpoint: &str) -> Result<Client, SnapshotError> {
    // Keep-alive pings notice a member that vanished mid-stream; no request timeout,
    // since streaming a large database legitimately takes minutes.
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(10))
        .with_keep_alive(Duration::from_secs(30), Duration::from_secs(10));
    Client::connect([endpoint], Some(options)).await.map_err(|source| SnapshotError::Etcd {
        endpoint: endpoint.to_owned(),
        operation: "connecting",
        source,
    })
}

/// Takes a snapshot of the member at `endpoint` (named `member` in the report) and
/// stores it as `key` in `store`.
pub async fn save_to_s3(
    endpoint: &str,
    member: &str,
    store: &S3Store,
    key: &str,
) -> Result<SnapshotReport, SnapshotError> {
    let started_at = Utc::now();
    let started = Instant::now();
    let etcd = |operation, source| SnapshotError::Etcd { endpoint: endpoint.to_owned(), operation, source };
    let mut client = connect(endpoint).await?;
    // The snapshot is taken when the member handles the request, so its revision is at
    // least the one the member reports just before.
    let status = client.status().await.map_err(|e| etcd("reading the member's status", e))?;
    let revision = status.header().map(|h| h.revision()).unwrap_or_default();
    let stream = client.snapshot().await.map_err(|e| etcd("starting the snapshot", e))?;
    let mut reader = SnapshotReader::new(endpoint, stream);
    let receipt = match store.upload(key, &mut reader).await {
        Ok(receipt) => receipt,
        // The store only saw an I/O error; the reader knows what went wrong.
        Err(e) => return Err(reader.error.take().unwrap_or(e.into())),
    };
    let report = SnapshotReport {
        object: ObjectReport::new(&receipt, started_at, Utc::now()),
        revision,
        member: member.to_owned(),
        etcd_version: reader.version,
    };
    let secs = started.elapsed().as_secs_f64();
    info!(
        endpoint, member, key, revision, bytes = receipt.size, sha256 = %receipt.sha256, seconds = secs,
        mib_per_second = receipt.size as f64 / (1024.0 * 1024.0) / secs.max(1e-9),
        "snapshot stored"
    );
    Ok(report)
}

type Messages = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, etcd_client::Error>> + Send>>;

/// The snapshot stream as an [`AsyncRead`] for the store's upload. Its last read fails
/// instead of ending cleanly if the stream broke or does not check out, so the upload is
/// aborted rather than completed with a partial snapshot; the cause is kept in `error`.
struct SnapshotReader {
    endpoint: String,
    messages: Messages,
    /// The message being copied out, and how much of its blob has been.
    current: Option<(SnapshotResponse, usize)>,
    check: StreamCheck,
    /// Storage version the member reports.
    version: String,
    done: bool,
    error: Option<SnapshotError>,
}

impl SnapshotReader {
    fn new(endpoint: &str, stream: etcd_client::SnapshotStreaming) -> Self {
        let messages = futures::stream::unfold(stream, |mut s| async move {
            match s.message().await {
                Ok(Some(m)) => Some((Ok(m), s)),
                Ok(None) => None,
                Err(e) => Some((Err(e), s)),
            }
        });
        SnapshotReader {
            endpoint: endpoint.to_owned(),
            messages: Box::pin(messages),
            current: None,
            check: StreamCheck::default(),
            version: String::new(),
            done: false,
            error: None,
        }
    }

    fn fail(&mut self, e: SnapshotError) -> io::Error {
        let err = io::Error::other(e.to_string());
        self.error = Some(e);
        self.done = true;
        err
    }
}

impl AsyncRead for SnapshotReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some((message, pos)) = &mut this.current {
                let blob = message.blob();
                if *pos < blob.len() {
                    let n = (blob.len() - *pos).min(buf.remaining());
                    buf.put_slice(&blob[*pos..*pos + n]);
                    *pos += n;
                    return Poll::Ready(Ok(()));
                }
                this.current = None;
            }
            if this.done || buf.remaining() == 0 {
                return match this.error.as_ref() {
                    Some(e) => Poll::Ready(Err(io::Error::other(e.to_string()))),
                    None => Poll::Ready(Ok(())),
                };
            }
            match ready!(this.messages.as_mut().poll_next(cx)) {
                Some(Ok(message)) => {
                    if this.version.is_empty() {
                        this.version = message.version().to_owned();
                    }
                    this.check.update(message.remaining_bytes(), message.blob());
                    this.current = Some((message, 0));
                }
                Some(Err(source)) => {
                    let e = SnapshotError::Etcd {
                        endpoint: this.endpoint.clone(),
                        operation: "streaming the snapshot",
                        source,
                    };
                    return Poll::Ready(Err(this.fail(e)));
                }
                None => {
                    if let Err(message) = this.check.finish() {
                        let e = SnapshotError::Damaged { endpoint: this.endpoint.clone(), message };
                        return Poll::Ready(Err(this.fail(e)));
                    }
                    this.done = true;
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

/// Checks a snapshot stream: the first message announces the database's size (its blob
/// plus the bytes remaining); the database must be followed by exactly its SHA-256.
#[derive(Default)]
struct StreamCheck {
    /// Size of the database, from the first message.
    total: Option<u64>,
    received: u64,
    hasher: Sha256,
    /// What came after the database: the digest.
    trailer: Vec<u8>,
}

impl StreamCheck {
    fn update(&mut self, remaining: u64, blob: &[u8]) {
        // Saturating: both numbers come from the member.
        let total = *self.total.get_or_insert(remaining.saturating_add(blob.len() as u64));
        let in_db = total.saturating_sub(self.received).min(blob.len() as u64) as usize;
        self.hasher.update(&blob[..in_db]);
        // Bounded: a misbehaving member cannot make the trailer grow without limit.
        let room = (DIGEST_LEN + 1).saturating_sub(self.trailer.len());
        self.trailer.extend(blob[in_db..].iter().take(room));
        self.received = self.received.saturating_add(blob.len() as u64);
    }

    fn finish(&mut self) -> Result<(), String> {
        let Some(total) = self.total else { return Err("the member sent nothing".into()) };
        let expected = total + DIGEST_LEN as u64;
        if self.received != expected {
            return Err(format!(
                "received {} bytes, expected {expected} (a {total}-byte database and its SHA-256)",
                self.received
            ));
        }
        let digest = std::mem::take(&mut self.hasher).finalize();
        if digest.as_slice() != self.trailer.as_slice() {
            return Err(format!(
                "the database's SHA-256 is {} but the member sent {}",
                hex(&digest),
                hex(&self.trailer)
            ));
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `db` in chunks of `chunk` bytes, each announcing what remains after it
    /// (as etcd does), then `trailer`.
    fn feed(check: &mut StreamCheck, db: &[u8], chunk: usize, trailer: &[u8]) {
        let mut sent = 0;
        for c in db.chunks(chunk) {
            sent += c.len();
            check.update((db.len() - sent) as u64, c);
        }
        check.update(0, trailer);
    }

    #[test]
    fn a_whole_stream_checks_out_whatever_the_chunking() {
        let db: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let digest = Sha256::digest(&db);
        for chunk in [1, 7, 4096, 10_000] {
            let mut check = StreamCheck::default();
            feed(&mut check, &db, chunk, &digest);
            check.finish().unwrap_or_else(|e| panic!("chunk {chunk}: {e}"));
        }
        // The digest may also arrive glued to the last chunk.
        let mut check = StreamCheck::default();
        let mut all = db.clone();
        all.extend_from_slice(&digest);
        check.update(5000, &all[..5000]);
        check.update(0, &all[5000..]);
        check.finish().expect("checks out");
    }

    #[test]
    fn truncated_or_altered_streams_are_refused() {
        let db = vec![7u8; 5000];
        let digest = Sha256::digest(&db);
        // The first chunk announced 3000 more bytes than arrived before the end.
        let mut truncated = StreamCheck::default();
        truncated.update(4000, &db[..1000]);
        truncated.update(0, &digest);
        let e = truncated.finish().expect_err("truncated");
        assert!(e.contains("received 1032 bytes, expected 5032"), "{e}");

        let mut altered = StreamCheck::default();
        let mut bad = db.clone();
        bad[10] = 8;
        feed(&mut altered, &bad, 1000, &digest);
        assert!(altered.finish().expect_err("altered").contains("SHA-256"));

        let mut long_trailer = StreamCheck::default();
        feed(&mut long_trailer, &db, 1000, &[0u8; 1000]);
        assert!(long_trailer.finish().is_err());
        assert!(StreamCheck::default().finish().is_err(), "an empty stream is no snapshot");
    }

    #[test]
    fn reports_flatten_the_object() {
        let report = SnapshotReport {
            object: ObjectReport {
                url: "s3://b/p/c/k.db".into(),
                key: "c/k.db".into(),
                bytes: 10,
                sha256: "ab".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                finished_at: "2026-01-01T00:00:01Z".into(),
            },
            revision: 42,
            member: "c-1".into(),
            etcd_version: "3.6.0".into(),
        };
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["revision"], 42);
        assert_eq!(json["key"], "c/k.db");
        assert_eq!(json["etcdVersion"], "3.6.0");
        assert_eq!(serde_json::from_value::<SnapshotReport>(json).expect("round trip"), report);
    }
}
