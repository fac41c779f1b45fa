//! A dump process's stdout as an [`AsyncRead`] for [`S3Store::upload`]: counts bytes, reads
//! the position comments on the way, and turns a failed dump into a read error at the end
//! of the stream, which makes the upload abort instead of storing a broken backup.
//!
//! [`S3Store::upload`]: statecraft_shared::s3::S3Store::upload

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::process::ExitStatus;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStdout};
use tokio::task::JoinHandle;

use super::position::{DumpPosition, DumpScanner};

/// Bytes of a client's stderr kept for error messages (the end is what explains a failure).
pub(crate) const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// Why a dump that ran to the end of its output is not a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DumpFailure {
    /// The process failed.
    Exit(String),
    /// Its exit status could not be read.
    Wait(String),
    /// It exited successfully, but its output lacks the completion line.
    Incomplete,
    /// It exited successfully, but its output has no GTID position.
    NoGtid,
}

impl fmt::Display for DumpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DumpFailure::Exit(status) => write!(f, "it exited with {status}"),
            DumpFailure::Wait(e) => write!(f, "its exit status could not be read: {e}"),
            DumpFailure::Incomplete => {
                f.write_str("it exited successfully but its output does not end with '-- Dump completed'")
            }
            DumpFailure::NoGtid => f.write_str("its output has no GTID position ('-- SET GLOBAL gtid_slave_pos=')"),
        }
    }
}

impl std::error::Error for DumpFailure {}

/// The dump process and its stdout. The process is killed when this is dropped (the
/// command is built with `kill_on_drop`), so a cancelled upload stops the dump.
pub(crate) struct DumpReader {
    child: Child,
    stdout: ChildStdout,
    scanner: DumpScanner,
    bytes: u64,
    end: Option<Result<DumpPosition, DumpFailure>>,
}

impl DumpReader {
    pub(crate) fn new(child: Child, stdout: ChildStdout) -> Self {
        DumpReader { child, stdout, scanner: DumpScanner::new(), bytes: 0, end: None }
    }

    /// Bytes read so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// How the dump ended, once its stdout reached its end.
    pub(crate) fn end(&self) -> Option<&Result<DumpPosition, DumpFailure>> {
        self.end.as_ref()
    }

    /// Stops the process (if it still runs) and reaps it.
    pub(crate) async fn kill(&mut self) {
        if let Err(e) = self.child.kill().await {
            tracing::debug!(error = %e, "killing the dump process");
        }
    }

    /// What the end of stdout means, once the process has exited.
    fn conclude(&self, status: io::Result<ExitStatus>) -> Result<DumpPosition, DumpFailure> {
        let status = status.map_err(|e| DumpFailure::Wait(e.to_string()))?;
        if !status.success() {
            return Err(DumpFailure::Exit(status.to_string()));
        }
        if !self.scanner.completed() {
            return Err(DumpFailure::Incomplete);
        }
        let position = self.scanner.position();
        if position.gtid.is_none() {
            return Err(DumpFailure::NoGtid);
        }
        Ok(position)
    }
}

fn end_result(end: &Result<DumpPosition, DumpFailure>) -> io::Result<()> {
    match end {
        Ok(_) => Ok(()),
        Err(failure) => Err(io::Error::other(failure.clone())),
    }
}

impl AsyncRead for DumpReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(end) = &this.end {
            return Poll::Ready(end_result(end));
        }
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.stdout).poll_read(cx, buf))?;
        let read = &buf.filled()[before..];
        if !read.is_empty() {
            this.scanner.feed(read);
            this.bytes += read.len() as u64;
            return Poll::Ready(Ok(()));
        }
        // End of stdout: the process has finished writing; its exit status decides whether
        // this is the end of a backup or an error. (`Child::wait` is cancel safe, so a new
        // future per poll is fine.)
        let status = ready!(pin!(this.child.wait()).poll(cx));
        let end = this.conclude(status);
        let result = end_result(&end);
        this.end = Some(end);
        Poll::Ready(result)
    }
}

/// Reads `stream` to its end in a task, keeping its last [`STDERR_TAIL_BYTES`]. Draining
/// is necessary: a client blocked on a full stderr pipe would stop writing its output.
pub(crate) fn spawn_tail<R>(mut stream: R) -> JoinHandle<String>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut kept: Vec<u8> = Vec::with_capacity(STDERR_TAIL_BYTES);
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => {
                    kept.extend_from_slice(&chunk[..n]);
                    if kept.len() > STDERR_TAIL_BYTES {
                        let excess = kept.len() - STDERR_TAIL_BYTES;
                        kept.drain(..excess);
                    }
                }
                Err(e) => {
                    kept.extend_from_slice(format!("\n(reading stderr failed: {e})").as_bytes());
                    break;
                }
            }
        }
        String::from_utf8_lossy(&kept).trim().to_string()
    })
}

/// The tail collected by [`spawn_tail`]; a panicked or cancelled task gives a note instead.
pub(crate) async fn join_tail(handle: JoinHandle<String>) -> String {
    handle.await.unwrap_or_else(|e| format!("(stderr unavailable: {e})"))
}
