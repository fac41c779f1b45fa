//! A real S3 server for tests: [`S3Server`] runs `s3s-fs` (installed into the cache by
//! `scripts/install-s3-server.sh`, part of `make deps`) on a free loopback port, storing
//! objects as plain files in a temporary directory, so that tests can also inspect and
//! damage them. Plus deterministic data for streaming tests: [`PatternReader`] generates
//! any amount of reproducible bytes without holding them, [`HashingWriter`] consumes and
//! hashes them.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::process::{Child, Command};

use crate::s3::{S3Credentials, S3CredentialsSecretRef, S3Error, S3Location, S3Store};

/// The log line s3s-fs prints once it listens; it carries the bound address.
const READY_MARKER: &str = "server is running at ";

/// A running s3s-fs, killed when dropped (and its directory removed).
#[derive(Debug)]
pub struct S3Server {
    // Declared first so that it is dropped (killed) before the directory is removed.
    child: Child,
    root: tempfile::TempDir,
    endpoint: String,
    access_key: String,
    secret_key: String,
    errors: ErrorLog,
}

/// The server's ERROR log lines, kept so that a failing test can show why the server
/// answered 500 (s3s-fs logs the I/O error and its source location; the response carries
/// no message).
type ErrorLog = Arc<Mutex<Vec<String>>>;

impl S3Server {
    /// The s3s-fs binary: `$STATECRAFT_CACHE/bin/s3s-fs`, else
    /// `~/.cache/statecraft/bin/s3s-fs` (where `scripts/install-s3-server.sh` puts it).
    pub fn binary() -> PathBuf {
        let cache = std::env::var_os("STATECRAFT_CACHE").map(PathBuf::from).unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache/statecraft")
        });
        cache.join("bin/s3s-fs")
    }

    /// Starts a server with fresh credentials and an empty root, and waits until it
    /// listens. It picks its own port (`--port 0`) and reports it in its log, so parallel
    /// tests never race for a port.
    pub async fn start() -> io::Result<Self> {
        Self::start_on("127.0.0.1").await
    }

    /// [`S3Server::start`] listening on `host` instead of loopback: e2e tests bind the
    /// node's address so that backup Jobs in pods can reach it.
    pub async fn start_on(host: &str) -> io::Result<Self> {
        let binary = Self::binary();
        if !binary.exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "S3 test server not found at {}: run `make deps` (or scripts/install-s3-server.sh) first",
                    binary.display()
                ),
            ));
        }
        let root = tempfile::Builder::new().prefix("statecraft-s3-").tempdir()?;
        let access_key = format!("AK{}", random_hex(9).to_uppercase());
        let secret_key = random_hex(20);
        let mut child = Command::new(&binary)
            .args(["--host", host, "--port", "0", "--access-key", &access_key, "--secret-key", &secret_key])
            .arg(root.path())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("starting {}: {e}", binary.display())))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(io::Error::other("s3s-fs: no stdout/stderr pipe"));
        };
        let errors = ErrorLog::default();
        // Drain stderr for good so that the server never blocks on a full pipe.
        tokio::spawn(forward_log(BufReader::new(stderr).lines(), errors.clone()));
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        let wait = async {
            while let Some(line) = lines.next_line().await? {
                if let Some(at) = line.find(READY_MARKER) {
                    let url = line[at + READY_MARKER.len()..].split_whitespace().next().unwrap_or_default();
                    return Ok(Some(url.trim_end_matches('/').to_owned()));
                }
                seen.push(line);
            }
            Ok::<_, io::Error>(None)
        };
        let endpoint = match tokio::time::timeout(Duration::from_secs(20), wait).await {
            Ok(Ok(Some(url))) if url.starts_with("http://") => url,
            outcome => {
                let status = child.try_wait().ok().flatten();
                return Err(io::Error::other(format!(
                    "s3s-fs did not report its address ({}; exit status {status:?}); its output:\n{}",
                    match outcome {
                        Err(_) => "timed out after 20 s".to_owned(),
                        Ok(Err(e)) => format!("reading its output: {e}"),
                        Ok(_) => "output ended".to_owned(),
                    },
                    seen.join("\n")
                )));
            }
        };
        tokio::spawn(forward_log(lines, errors.clone()));
        tracing::debug!(%endpoint, root = %root.path().display(), "s3s-fs started");
        Ok(S3Server { child, root, endpoint, access_key, secret_key, errors })
    }

    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The access key the server accepts.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key the server accepts.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// The server's data directory: one directory per bucket, one file per object.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The ERROR events the server has logged so far: for a 500, the I/O error and where
    /// in s3s-fs it happened (the response itself carries no message).
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Creates a bucket (a top-level directory of the root). Names must be 3 to 63
    /// characters, as in S3.
    pub fn create_bucket(&self, name: &str) -> io::Result<()> {
        if !(3..=63).contains(&name.len()) || name.contains('/') || name.starts_with('.') {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid bucket name {name:?}")));
        }
        std::fs::create_dir(self.root().join(name))
    }

    /// The credentials the server accepts.
    pub fn credentials(&self) -> S3Credentials {
        S3Credentials::new(&self.access_key, &self.secret_key)
    }

    /// A location for `bucket`/`prefix` on this server (path-style addressing).
    pub fn location(&self, bucket: &str, prefix: &str) -> S3Location {
        S3Location {
            endpoint: Some(self.endpoint.clone()),
            force_path_style: true,
            ..S3Location::new(bucket, prefix, S3CredentialsSecretRef::new("s3-credentials"))
        }
    }

    /// A store for `bucket`/`prefix` on this server.
    pub fn store(&self, bucket: &str, prefix: &str) -> Result<S3Store, S3Error> {
        S3Store::new(&self.location(bucket, prefix), self.credentials())
    }

    /// The file holding an object (`object_key` is the full key, prefix included).
    pub fn object_path(&self, bucket: &str, object_key: &str) -> PathBuf {
        self.root().join(bucket).join(object_key)
    }

    /// Files of multipart uploads that were neither completed nor aborted (s3s-fs keeps
    /// them as `.upload_id-*` in the root; it does not implement ListMultipartUploads).
    pub fn incomplete_upload_files(&self) -> io::Result<Vec<PathBuf>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(self.root())? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".upload_id-") || name.contains(".upload-") {
                found.push(entry.path());
            }
        }
        Ok(found)
    }
}

/// Forwards the server's log to `tracing` and keeps its ERROR events. s3s-fs logs in
/// tracing's pretty format: an event is a header line (timestamp, level, target, message)
/// followed by indented lines with its fields (the I/O error) and span trace.
async fn forward_log<R: tokio::io::AsyncBufRead + Unpin>(mut lines: tokio::io::Lines<R>, errors: ErrorLog) {
    /// Lines kept per event (the header, then the fields with the I/O error; the span
    /// trace and the request dump after them are left out), and characters per line.
    const EVENT_LINES: usize = 3;
    const LINE_CHARS: usize = 240;
    let short = |line: &str| line.trim_start().chars().take(LINE_CHARS).collect::<String>();
    let mut event: Option<Vec<String>> = None;
    let keep = |event: Option<Vec<String>>| {
        if let Some(event) = event
            && let Ok(mut errors) = errors.lock()
        {
            errors.push(event.join("\n"));
        }
    };
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::trace!(target: "s3s_fs", "{line}");
        let trimmed = line.trim_start();
        if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
            keep(event.take());
            if trimmed.split_whitespace().nth(1) == Some("ERROR") {
                event = Some(vec![short(trimmed)]);
            }
        } else if let Some(event) = event.as_mut().filter(|e| e.len() < EVENT_LINES && !trimmed.is_empty()) {
            event.push(short(trimmed));
        }
    }
    keep(event);
}

/// Hex from the standard library's randomly seeded hasher: unpredictable enough for test
/// credentials without a `rand` dependency in the library.
fn random_hex(bytes: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < bytes * 2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(out.len());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(bytes * 2);
    out
}

/// What a [`PatternReader`] does after its last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// End of stream.
    Eof,
    /// Fails with an I/O error, as a crashing dump process would.
    Error,
    /// Never returns again (pending forever), as a hung dump process would.
    Stall,
}

/// Deterministic pseudo-random bytes, generated on the fly: byte `i` depends only on the
/// seed and `i`, so the same stream can be regenerated to compare, in any read sizes, and
/// a gigabyte costs no memory. Incompressible, like real compressed backups.
#[derive(Debug)]
pub struct PatternReader {
    seed: u64,
    pos: u64,
    len: u64,
    end: StreamEnd,
    block: Box<[u8; BLOCK]>,
    block_index: u64,
}

const BLOCK: usize = 64 * 1024;

impl PatternReader {
    /// `len` bytes, then end of stream.
    pub fn new(seed: u64, len: u64) -> Self {
        Self::with_end(seed, len, StreamEnd::Eof)
    }

    /// `len` bytes, then `end`.
    pub fn with_end(seed: u64, len: u64, end: StreamEnd) -> Self {
        PatternReader { seed, pos: 0, len, end, block: Box::new([0; BLOCK]), block_index: u64::MAX }
    }

    /// Bytes produced so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// SHA-256 (hex) of the `len` bytes of `seed`'s stream, computed by generating them.
    pub fn sha256_of(seed: u64, len: u64) -> String {
        let mut r = PatternReader::new(seed, len);
        let mut h = Sha256::new();
        while r.pos < r.len {
            let n = r.fill_block();
            h.update(&r.block[..n]);
            r.pos += n as u64;
        }
        hex::encode(h.finalize())
    }

    /// Makes sure the block containing `pos` is generated; returns how many bytes from
    /// `pos` on are available in it (bounded by `len`).
    fn fill_block(&mut self) -> usize {
        let index = self.pos / BLOCK as u64;
        if index != self.block_index {
            let base = index * (BLOCK / 8) as u64;
            for (i, word) in self.block.chunks_exact_mut(8).enumerate() {
                word.copy_from_slice(
                    &splitmix64(self.seed ^ (base + i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes(),
                );
            }
            self.block_index = index;
        }
        let offset = (self.pos % BLOCK as u64) as usize;
        let left = self.len - self.pos;
        (BLOCK - offset).min(usize::try_from(left).unwrap_or(usize::MAX))
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl AsyncRead for PatternReader {
    fn poll_read(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pos >= this.len {
            return match this.end {
                StreamEnd::Eof => Poll::Ready(Ok(())),
                StreamEnd::Error => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    format!("simulated reader failure after {} bytes", this.pos),
                ))),
                StreamEnd::Stall => Poll::Pending,
            };
        }
        while buf.remaining() > 0 && this.pos < this.len {
            let available = this.fill_block();
            let offset = (this.pos % BLOCK as u64) as usize;
            let n = available.min(buf.remaining());
            buf.put_slice(&this.block[offset..offset + n]);
            this.pos += n as u64;
        }
        Poll::Ready(Ok(()))
    }
}

/// An [`AsyncWrite`] that keeps nothing but the count and SHA-256 of what it was given.
#[derive(Debug, Default)]
pub struct HashingWriter {
    hasher: Sha256,
    written: u64,
}

impl HashingWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Hex SHA-256 of everything written.
    pub fn sha256(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
    }
}

impl AsyncWrite for HashingWriter {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.hasher.update(buf);
        this.written += buf.len() as u64;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn pattern_is_deterministic_across_read_sizes() {
        let len = 3 * BLOCK as u64 + 12_345;
        let mut a = Vec::new();
        PatternReader::new(7, len).read_to_end(&mut a).await.expect("read");
        let mut b = Vec::new();
        let mut r = PatternReader::new(7, len);
        let mut small = [0u8; 1000];
        loop {
            let n = r.read(&mut small).await.expect("read");
            if n == 0 {
                break;
            }
            b.extend_from_slice(&small[..n]);
        }
        assert_eq!(a.len() as u64, len);
        assert_eq!(a, b);
        assert_eq!(PatternReader::sha256_of(7, len), hex::encode(Sha256::digest(&a)));
        let mut other = Vec::new();
        PatternReader::new(8, len).read_to_end(&mut other).await.expect("read");
        assert_ne!(a, other);
    }

    #[tokio::test]
    async fn failing_reader_fails_after_its_length() {
        let mut r = PatternReader::with_end(1, 100, StreamEnd::Error);
        let mut v = Vec::new();
        assert!(r.read_to_end(&mut v).await.is_err());
        assert_eq!(v.len(), 100);
    }
}
