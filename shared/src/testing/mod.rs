//! Real servers for tests (feature `testing`): [`apiserver`] starts etcd and
//! kube-apiserver built from their Go modules by `scripts/build-kube.sh`; [`s3`] starts a
//! real S3 server. Each is started on free loopback ports in its own temporary directory
//! and stopped when dropped, so tests never share state. [`echo`] is the smallest operator
//! built from the library, which its tests and the cluster checks run. [`monitoring`]
//! checks an operator's alerts and dashboard against the metrics that really exist,
//! [`promtool`] has Prometheus's own rule engine evaluate the alerts over test series, and
//! [`crd`] its CRDs' field descriptions.

pub mod apiserver;
pub mod crd;
pub mod echo;
pub mod monitoring;
pub mod pki;
pub mod promtool;
pub mod s3;

use std::path::{Path, PathBuf};

/// Why a test server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A binary the harness needs is not installed.
    #[error(
        "{binary} not found in {dir}: run `make deps` (scripts/build-kube.sh, scripts/build-go-tools.sh, scripts/install-s3-server.sh) first"
    )]
    MissingBinary { binary: String, dir: PathBuf },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Setting up the server failed.
    #[error("{0}")]
    Setup(String),
    /// The server did not become ready in time; the log tail says why.
    #[error("{server} not ready after {seconds}s; last log lines:\n{log_tail}")]
    NotReady { server: String, seconds: u64, log_tail: String },
}

impl HarnessError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        HarnessError::Io { path: path.to_path_buf(), source }
    }
}

/// The directory with the binaries built by the project's scripts:
/// `$STATECRAFT_CACHE/bin`, by default `~/.cache/statecraft/bin`.
pub fn bin_dir() -> PathBuf {
    let cache = std::env::var_os("STATECRAFT_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
        home.join(".cache/statecraft")
    });
    cache.join("bin")
}

/// The path of binary `name` in [`bin_dir`], or an error that says how to build it.
pub fn binary(name: &str) -> Result<PathBuf, HarnessError> {
    let dir = bin_dir();
    let path = dir.join(name);
    if path.exists() { Ok(path) } else { Err(HarnessError::MissingBinary { binary: name.into(), dir }) }
}

/// Where [`free_port`] looks: below Linux's ephemeral range (32768-60999), so no outgoing
/// connection and no `bind(0)` of another process is ever given one of these ports while a
/// server is still starting, and below Kubernetes' NodePort range (30000-32767), which the
/// local cluster's kube-proxy intercepts.
const PORTS: std::ops::Range<u16> = 20000..30000;

/// The next port [`free_port`] tries; each process starts at its own offset.
static NEXT_PORT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

/// A free TCP port on loopback, never the same twice in one process. The port is checked
/// by binding it and released before returning, so a server started right away gets it.
/// `bind(0)` would give a port of the ephemeral range instead, which any process's next
/// outgoing connection may take before the server binds it (suspected when two Kafka
/// brokers of the admin tests never registered in a CI run).
pub fn free_port() -> Result<u16, HarnessError> {
    use std::sync::atomic::Ordering;
    let span = u32::from(PORTS.end - PORTS.start);
    // Spread the processes that run tests at the same time over the range.
    let _ = NEXT_PORT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(97) % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let offset = NEXT_PORT.fetch_add(1, Ordering::Relaxed) % span;
        let port = PORTS.start + offset as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(HarnessError::Setup(format!("no free port in {PORTS:?} on 127.0.0.1")))
}

/// Polls `check` every 100 ms until it returns `Some`, or fails after `timeout` with an
/// error naming `what` it waited for.
pub async fn eventually<T, F, Fut>(timeout: std::time::Duration, what: &str, mut check: F) -> Result<T, HarnessError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if started.elapsed() > timeout {
            return Err(HarnessError::Setup(format!("timed out after {timeout:?} waiting for {what}")));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Spawns `program` with `args`, its output appended to `log`, killed when dropped.
pub(crate) fn spawn_logged(program: &Path, args: &[String], log: &Path) -> Result<tokio::process::Child, HarnessError> {
    let out = std::fs::File::create(log).map_err(|e| HarnessError::io(log, e))?;
    let err = out.try_clone().map_err(|e| HarnessError::io(log, e))?;
    tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| HarnessError::io(program, e))
}
