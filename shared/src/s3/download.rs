//! Streaming download that verifies size and SHA-256 against what the upload recorded.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tracing::{debug, warn};

use super::{META_SHA256, META_SIZE, S3Error, S3Store};

/// What a download received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownloadReceipt {
    /// Key relative to the store's prefix.
    pub key: String,
    /// Bytes received.
    pub size: u64,
    /// Lowercase hex SHA-256 of the bytes received.
    pub sha256: String,
    /// Whether the SHA-256 was compared with a recorded or expected value. False only for
    /// objects without `sha256` metadata (not written by this store) when the caller
    /// gave no expected value; then only the size was checked.
    pub sha256_verified: bool,
}

/// An object's body as an [`AsyncRead`] that verifies while it is read: instead of a
/// clean end of stream, the last read fails with [`io::ErrorKind::InvalidData`] wrapping
/// an [`S3Error::Corrupt`] if the size or SHA-256 differ. Suits piping into a restore
/// process, which then sees a failed read rather than a truncated but "successful" input.
pub struct ObjectReader {
    body: Pin<Box<dyn AsyncBufRead + Send>>,
    verifier: Verifier,
    receipt: Option<DownloadReceipt>,
}

impl std::fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectReader")
            .field("key", &self.verifier.key)
            .field("received", &self.verifier.received)
            .finish()
    }
}

impl ObjectReader {
    /// The receipt, once the whole object has been read and verified.
    pub fn receipt(&self) -> Option<&DownloadReceipt> {
        self.receipt.as_ref()
    }

    /// The size the object should have, if known (recorded size or Content-Length).
    pub fn expected_size(&self) -> Option<u64> {
        self.verifier.expected_size
    }
}

impl AsyncRead for ObjectReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.receipt.is_some() || buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let chunk = match ready!(this.body.as_mut().poll_fill_buf(cx)) {
            Ok(chunk) => chunk,
            Err(e) => return Poll::Ready(Err(this.verifier.transfer_error(e).into_io())),
        };
        if chunk.is_empty() {
            return Poll::Ready(match this.verifier.finish() {
                Ok(receipt) => {
                    this.receipt = Some(receipt);
                    Ok(())
                }
                Err(e) => Err(e.into_io()),
            });
        }
        let n = chunk.len().min(buf.remaining());
        if let Err(e) = this.verifier.update(&chunk[..n]) {
            return Poll::Ready(Err(e.into_io()));
        }
        buf.put_slice(&chunk[..n]);
        this.body.as_mut().consume(n);
        Poll::Ready(Ok(()))
    }
}

impl S3Error {
    /// Wraps the error for an `AsyncRead`; recover it with `io::Error::into_inner` and
    /// `downcast::<S3Error>()`.
    fn into_io(self) -> io::Error {
        let kind = match &self {
            S3Error::Corrupt { .. } => io::ErrorKind::InvalidData,
            S3Error::Transfer { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}

impl S3Store {
    /// Opens the object `key` for reading. Fails at once if the object is missing or its
    /// recorded size disagrees with its Content-Length; the content is verified as it is
    /// read (see [`ObjectReader`]). `expected_sha256` (hex, e.g. from an
    /// [`UploadReceipt`](super::UploadReceipt) kept elsewhere) is checked in addition to the
    /// recorded one, so that a backup is verified even if its metadata was lost.
    pub async fn open(&self, key: &str, expected_sha256: Option<&str>) -> Result<ObjectReader, S3Error> {
        let object_key = self.checked_key(key)?;
        let expected = match expected_sha256 {
            Some(s) => Some(parse_sha256(s).ok_or_else(|| S3Error::InvalidConfig {
                field: "expectedSha256".to_owned(),
                message: format!("{s:?} is not a hex SHA-256"),
            })?),
            None => None,
        };
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
            .map_err(|e| self.target("GetObject", Some(key)).error(e))?;
        let mut verifier = Verifier {
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
            key: key.to_owned(),
            hasher: Sha256::new(),
            received: 0,
            expected_size: None,
            expected_sha256: expected,
            recorded_sha256: None,
        };
        let metadata = out.metadata();
        let meta = |name: &str| metadata.and_then(|m| m.get(name)).map(String::as_str);
        if let Some(recorded) = meta(META_SHA256) {
            let parsed = parse_sha256(recorded);
            if parsed.is_none() {
                return Err(verifier.corrupt("recorded sha256 metadata", "64 hex digits", recorded));
            }
            verifier.recorded_sha256 = parsed;
        }
        let content_length = out.content_length().and_then(|n| u64::try_from(n).ok());
        if let Some(recorded) = meta(META_SIZE) {
            let Ok(size) = recorded.parse::<u64>() else {
                return Err(verifier.corrupt("recorded size metadata", "a number", recorded));
            };
            if let Some(length) = content_length
                && length != size
            {
                return Err(verifier.corrupt("size", &size.to_string(), &length.to_string()));
            }
            verifier.expected_size = Some(size);
        } else {
            verifier.expected_size = content_length;
        }
        if verifier.recorded_sha256.is_none() && verifier.expected_sha256.is_none() {
            warn!(bucket = %self.bucket, key = %object_key, "object has no recorded SHA-256; only its size is checked");
        }
        debug!(bucket = %self.bucket, key = %object_key, size = ?verifier.expected_size, "downloading object");
        Ok(ObjectReader { body: Box::pin(out.body.into_async_read()), verifier, receipt: None })
    }

    /// Streams the object `key` into `writer` and verifies it (see [`open`](Self::open)).
    ///
    /// The bytes reach `writer` before the end of the object proves them right, so on an
    /// error the caller must discard what was written (download to a temporary file and
    /// rename, or abort the restore that reads it).
    pub async fn download<W>(
        &self,
        key: &str,
        mut writer: W,
        expected_sha256: Option<&str>,
    ) -> Result<DownloadReceipt, S3Error>
    where
        W: AsyncWrite + Unpin,
    {
        let mut reader = self.open(key, expected_sha256).await?;
        let ObjectReader { body, verifier, .. } = &mut reader;
        loop {
            // Write straight from the body's buffers: no intermediate copy.
            let chunk = body.fill_buf().await.map_err(|e| verifier.transfer_error(e))?;
            if chunk.is_empty() {
                break;
            }
            verifier.update(chunk)?;
            writer.write_all(chunk).await.map_err(|e| verifier.sink_error(e))?;
            let n = chunk.len();
            body.as_mut().consume(n);
        }
        writer.flush().await.map_err(|e| verifier.sink_error(e))?;
        let receipt = verifier.finish()?;
        debug!(bucket = %self.bucket, key, size = receipt.size, sha256 = %receipt.sha256, "downloaded object");
        Ok(receipt)
    }
}

fn parse_sha256(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s.trim(), &mut out).ok()?;
    Some(out)
}

/// Hashes and counts what is received and compares at the end.
struct Verifier {
    bucket: String,
    endpoint: String,
    key: String,
    hasher: Sha256,
    received: u64,
    expected_size: Option<u64>,
    expected_sha256: Option<[u8; 32]>,
    recorded_sha256: Option<[u8; 32]>,
}

impl Verifier {
    fn update(&mut self, chunk: &[u8]) -> Result<(), S3Error> {
        self.received += chunk.len() as u64;
        if let Some(expected) = self.expected_size
            && self.received > expected
        {
            return Err(self.corrupt("size", &expected.to_string(), &format!("more than {expected}")));
        }
        self.hasher.update(chunk);
        Ok(())
    }

    fn finish(&mut self) -> Result<DownloadReceipt, S3Error> {
        if let Some(expected) = self.expected_size
            && self.received != expected
        {
            return Err(self.corrupt("size", &expected.to_string(), &self.received.to_string()));
        }
        let actual: [u8; 32] = std::mem::take(&mut self.hasher).finalize().into();
        for (what, expected) in
            [("sha256", self.recorded_sha256), ("sha256 (expected by caller)", self.expected_sha256)]
        {
            if let Some(expected) = expected
                && expected != actual
            {
                return Err(self.corrupt(what, &hex::encode(expected), &hex::encode(actual)));
            }
        }
        Ok(DownloadReceipt {
            key: self.key.clone(),
            size: self.received,
            sha256: hex::encode(actual),
            sha256_verified: self.recorded_sha256.is_some() || self.expected_sha256.is_some(),
        })
    }

    fn corrupt(&self, what: &'static str, expected: &str, actual: &str) -> S3Error {
        S3Error::Corrupt {
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
            key: self.key.clone(),
            what,
            expected: expected.into(),
            actual: actual.into(),
        }
    }

    fn transfer_error(&self, source: io::Error) -> S3Error {
        S3Error::Transfer {
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
            key: self.key.clone(),
            source,
        }
    }

    fn sink_error(&self, source: io::Error) -> S3Error {
        S3Error::Sink { bucket: self.bucket.clone(), endpoint: self.endpoint.clone(), key: self.key.clone(), source }
    }
}
