//! Streaming upload with bounded memory, checksum, and abort on failure or cancellation.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, MetadataDirective};
use bytes::{BufMut, Bytes, BytesMut};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::{JoinError, JoinSet};
use tracing::{debug, error, info, warn};

use super::error::{RequestFailure, Target};
use super::{MAX_PARTS, META_SHA256, META_SIZE, S3Error, S3Store, encode_copy_source};

/// What an upload stored: enough to find the object again and to verify a later download
/// independently of the object's own metadata (operators record it in a backup's status).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadReceipt {
    /// Bucket the object is in.
    pub bucket: String,
    /// Key relative to the store's prefix.
    pub key: String,
    /// Full object key in the bucket (prefix included).
    pub object_key: String,
    /// Size in bytes.
    pub size: u64,
    /// Lowercase hex SHA-256 of the whole object.
    pub sha256: String,
    /// Number of multipart parts; 0 when stored with a single PutObject.
    pub parts: u32,
    /// The object's ETag as returned by the server, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_tag: Option<String>,
}

/// A finished part, with its buffer back for reuse when the SDK no longer holds it.
struct PartDone {
    part: CompletedPart,
    buffer: Option<BytesMut>,
}

type PartResult = Result<PartDone, S3Error>;

impl S3Store {
    /// Streams `reader` to the object `key` (relative to the store prefix) and returns
    /// its size and SHA-256, which are also stored as user metadata (`sha256`, `size`).
    ///
    /// The length need not be known. Streams shorter than one part are stored with one
    /// PutObject; longer ones with a multipart upload whose parts are uploaded while the
    /// next is read. At most [`TransferConfig::concurrency`](super::TransferConfig) part
    /// buffers exist at any time, so memory stays near `part_size * concurrency` however
    /// large the object.
    ///
    /// All or nothing: if the reader fails, S3 fails, or this future is dropped, the
    /// multipart upload is aborted and no object becomes visible. (On drop, the abort runs
    /// in a spawned task, so it needs a live Tokio runtime; if the process dies, the parts
    /// stay invisible but use storage until the bucket's `AbortIncompleteMultipartUpload`
    /// lifecycle rule removes them, so buckets should have one.)
    ///
    /// Cost of the checksum metadata: S3 takes metadata only when a multipart upload
    /// starts, before the SHA-256 is known; so after completing, the object is copied onto
    /// itself with the metadata replaced (conditional on its ETag, so a concurrent writer's
    /// object is never stamped with our checksum). That copy is server-side, but on AWS it
    /// rewrites the data (objects over [`max_single_copy`](super::TransferConfig) use a
    /// multipart copy), and in a versioned bucket it leaves the unstamped version as a
    /// noncurrent version. If the copy fails, the object is deleted and an error returned.
    pub async fn upload<R>(&self, key: &str, mut reader: R) -> Result<UploadReceipt, S3Error>
    where
        R: AsyncRead + Unpin,
    {
        let object_key = self.checked_key(key)?;
        let started = Instant::now();
        let part_size = self.transfer.part_size;
        let mut hasher = Sha256::new();
        let first =
            read_part(&mut reader, part_size, &mut hasher, None).await.map_err(|e| self.source_error(key, e))?;
        let receipt = if first.len() < part_size {
            self.put_single(key, &object_key, first.freeze(), hasher).await?
        } else {
            self.put_multipart(key, &object_key, first, &mut reader, hasher).await?
        };
        let secs = started.elapsed().as_secs_f64();
        info!(
            bucket = %self.bucket, key = %object_key, size = receipt.size, parts = receipt.parts,
            sha256 = %receipt.sha256, seconds = secs,
            mib_per_second = receipt.size as f64 / (1024.0 * 1024.0) / secs.max(1e-9),
            "uploaded object"
        );
        Ok(receipt)
    }

    /// A stream shorter than one part: one request, atomic by nature.
    async fn put_single(
        &self,
        key: &str,
        object_key: &str,
        body: Bytes,
        hasher: Sha256,
    ) -> Result<UploadReceipt, S3Error> {
        let size = body.len() as u64;
        let sha256 = hex::encode(hasher.finalize());
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(object_key)
            .content_length(size as i64)
            .set_metadata(Some(checksum_metadata(&sha256, size)))
            .body(ByteStream::from(body));
        let sent = if self.sign_payload {
            request.send().await
        } else {
            request.customize().disable_payload_signing().send().await
        };
        let out = sent.map_err(|e| self.target("PutObject", Some(key)).error(e))?;
        Ok(UploadReceipt {
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            object_key: object_key.to_owned(),
            size,
            sha256,
            parts: 0,
            e_tag: out.e_tag().map(str::to_owned),
        })
    }

    async fn put_multipart<R>(
        &self,
        key: &str,
        object_key: &str,
        first: BytesMut,
        reader: &mut R,
        hasher: Sha256,
    ) -> Result<UploadReceipt, S3Error>
    where
        R: AsyncRead + Unpin,
    {
        let upload_id = self.create_multipart(key, object_key, None).await?;
        debug!(bucket = %self.bucket, key = %object_key, %upload_id, "started multipart upload");
        let mut cleanup = Cleanup::new(self, object_key, Some(upload_id.clone()));

        let streamed = self.stream_parts(key, object_key, &upload_id, first, reader, hasher, &mut cleanup).await;
        let (parts, size, sha256) = match streamed {
            Ok(v) => v,
            Err(e) => {
                warn!(bucket = %self.bucket, key = %object_key, error = %e, "upload failed; aborting it");
                cleanup.run().await;
                return Err(e);
            }
        };
        let part_count = parts.len() as u32;
        debug!(bucket = %self.bucket, key = %object_key, parts = part_count, size, "all parts uploaded; completing");
        let e_tag = match self.complete_multipart(key, object_key, &upload_id, parts).await {
            Ok(e_tag) => e_tag,
            Err(e) => {
                cleanup.run().await;
                return Err(e);
            }
        };
        // From here the object is visible; until its checksum is stamped, failing or
        // being dropped must delete it.
        cleanup.upload_id = None;
        cleanup.delete_object = true;
        debug!(bucket = %self.bucket, key = %object_key, "completed; recording the checksum in the metadata");

        let e_tag = match self.stamp_checksum(key, object_key, size, &sha256, e_tag.as_deref()).await {
            Ok(e_tag) => e_tag,
            Err(e) => {
                // 412: someone else replaced the object meanwhile; it is theirs, keep it.
                if matches!(e, S3Error::Service { status: 412, .. }) {
                    cleanup.delete_object = false;
                }
                warn!(bucket = %self.bucket, key = %object_key, error = %e, "recording the checksum failed; deleting the object");
                cleanup.run().await;
                return Err(e);
            }
        };
        cleanup.disarm();
        Ok(UploadReceipt {
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            object_key: object_key.to_owned(),
            size,
            sha256,
            parts: part_count,
            e_tag,
        })
    }

    /// Uploads `first` and the rest of `reader` as parts; returns the parts, the size and
    /// the hex SHA-256. Part tasks live in `cleanup.tasks` so that a failed or cancelled
    /// upload waits for them before it is aborted.
    #[allow(clippy::too_many_arguments)]
    async fn stream_parts<R>(
        &self,
        key: &str,
        object_key: &str,
        upload_id: &str,
        first: BytesMut,
        reader: &mut R,
        mut hasher: Sha256,
        cleanup: &mut Cleanup,
    ) -> Result<(Vec<CompletedPart>, u64, String), S3Error>
    where
        R: AsyncRead + Unpin,
    {
        let part_size = self.transfer.part_size;
        let concurrency = self.transfer.concurrency;
        let ctx = Arc::new(PartContext {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
            key: key.to_owned(),
            object_key: object_key.to_owned(),
            upload_id: upload_id.to_owned(),
            sign_payload: self.sign_payload,
        });
        let mut parts = Vec::new();
        // Buffers of finished parts, reused for the next ones: the allocator is not asked
        // for a new 16 MiB block per part, which with per-thread arenas would leave
        // freed blocks resident in several arenas and raise the peak beyond the bound.
        let mut spare: Vec<BytesMut> = Vec::new();
        let mut collect = |done: PartDone, spare: &mut Vec<BytesMut>| {
            spare.extend(done.buffer);
            parts.push(done.part);
        };
        let mut size = first.len() as u64;
        let mut part_number: i32 = 1;
        let mut buf = first;
        loop {
            let last = buf.len() < part_size;
            debug!(key = %object_key, part_number, bytes = buf.len(), "uploading part");
            cleanup.tasks.spawn(upload_part(ctx.clone(), part_number, buf.freeze()));
            if last {
                break;
            }
            // The bound on memory: a new buffer is started only when fewer than
            // `concurrency` parts are in flight (each holds its buffer until it is sent).
            while cleanup.tasks.len() >= concurrency {
                if let Some(joined) = cleanup.tasks.join_next().await {
                    collect(part_result(joined)?, &mut spare);
                }
            }
            // Notice failed parts early instead of reading on for nothing.
            while let Some(joined) = cleanup.tasks.try_join_next() {
                collect(part_result(joined)?, &mut spare);
            }
            let next =
                read_part(reader, part_size, &mut hasher, spare.pop()).await.map_err(|e| self.source_error(key, e))?;
            if next.is_empty() {
                break;
            }
            if part_number as u64 >= MAX_PARTS {
                return Err(S3Error::TooLarge {
                    bucket: self.bucket.clone(),
                    endpoint: self.endpoint.clone(),
                    key: key.to_owned(),
                    limit: part_size as u64 * MAX_PARTS,
                    part_size,
                });
            }
            part_number += 1;
            size += next.len() as u64;
            buf = next;
        }
        while let Some(joined) = cleanup.tasks.join_next().await {
            collect(part_result(joined)?, &mut spare);
        }
        parts.sort_by_key(|p| p.part_number());
        Ok((parts, size, hex::encode(hasher.finalize())))
    }

    async fn create_multipart(
        &self,
        key: &str,
        object_key: &str,
        metadata: Option<HashMap<String, String>>,
    ) -> Result<String, S3Error> {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(object_key)
            .set_metadata(metadata)
            .send()
            .await
            .map_err(|e| self.target("CreateMultipartUpload", Some(key)).error(e))?;
        created
            .upload_id()
            .map(str::to_owned)
            .ok_or_else(|| self.bad_response("CreateMultipartUpload", "the response has no UploadId"))
    }

    /// Completes a multipart upload; returns the new object's ETag.
    async fn complete_multipart(
        &self,
        key: &str,
        object_key: &str,
        upload_id: &str,
        parts: Vec<CompletedPart>,
    ) -> Result<Option<String>, S3Error> {
        let out = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(object_key)
            .upload_id(upload_id)
            .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
            .send()
            .await
            .map_err(|e| self.target("CompleteMultipartUpload", Some(key)).error(e))?;
        Ok(out.e_tag().map(str::to_owned))
    }

    /// Replaces the object's metadata with its checksum by copying it onto itself, if it
    /// still has `e_tag`. Returns the new ETag.
    async fn stamp_checksum(
        &self,
        key: &str,
        object_key: &str,
        size: u64,
        sha256: &str,
        e_tag: Option<&str>,
    ) -> Result<Option<String>, S3Error> {
        let metadata = checksum_metadata(sha256, size);
        if size > self.transfer.max_single_copy {
            return self.multipart_copy(key, object_key, size, metadata, e_tag).await;
        }
        let out = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(object_key)
            .copy_source(encode_copy_source(&self.bucket, object_key))
            .set_copy_source_if_match(e_tag.map(str::to_owned))
            .metadata_directive(MetadataDirective::Replace)
            .set_metadata(Some(metadata))
            .send()
            .await
            .map_err(|e| self.target("CopyObject", Some(key)).error(e))?;
        Ok(out.copy_object_result().and_then(|r| r.e_tag()).map(str::to_owned))
    }

    /// Rewrites an object larger than one CopyObject allows onto itself with new metadata,
    /// copying ranges server-side in parallel.
    async fn multipart_copy(
        &self,
        key: &str,
        object_key: &str,
        size: u64,
        metadata: HashMap<String, String>,
        e_tag: Option<&str>,
    ) -> Result<Option<String>, S3Error> {
        let upload_id = self.create_multipart(key, object_key, Some(metadata)).await?;
        let mut cleanup = Cleanup::new(self, object_key, Some(upload_id.clone()));
        let ctx = Arc::new(PartContext {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
            key: key.to_owned(),
            object_key: object_key.to_owned(),
            upload_id: upload_id.clone(),
            sign_payload: self.sign_payload,
        });
        let part_size = self.transfer.copy_part_size.max(size.div_ceil(MAX_PARTS));
        let copied: Result<Vec<CompletedPart>, S3Error> = async {
            let mut parts = Vec::new();
            let mut start = 0u64;
            let mut part_number = 1;
            while start < size {
                let end = (start + part_size).min(size) - 1;
                while cleanup.tasks.len() >= self.transfer.concurrency {
                    if let Some(joined) = cleanup.tasks.join_next().await {
                        parts.push(part_result(joined)?.part);
                    }
                }
                cleanup.tasks.spawn(copy_part(ctx.clone(), part_number, start, end, e_tag.map(str::to_owned)));
                part_number += 1;
                start = end + 1;
            }
            while let Some(joined) = cleanup.tasks.join_next().await {
                parts.push(part_result(joined)?.part);
            }
            parts.sort_by_key(|p| p.part_number());
            Ok(parts)
        }
        .await;
        let result = match copied {
            Ok(parts) => self.complete_multipart(key, object_key, &upload_id, parts).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(e_tag) => {
                cleanup.disarm();
                Ok(e_tag)
            }
            Err(e) => {
                cleanup.run().await;
                Err(e)
            }
        }
    }

    fn source_error(&self, key: &str, source: io::Error) -> S3Error {
        S3Error::Source { bucket: self.bucket.clone(), endpoint: self.endpoint.clone(), key: key.to_owned(), source }
    }

    fn bad_response(&self, operation: &'static str, what: &str) -> S3Error {
        S3Error::Request {
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
            operation,
            kind: RequestFailure::Response,
            source: what.into(),
        }
    }
}

fn checksum_metadata(sha256: &str, size: u64) -> HashMap<String, String> {
    HashMap::from([(META_SHA256.to_owned(), sha256.to_owned()), (META_SIZE.to_owned(), size.to_string())])
}

/// Reads up to `part_size` bytes (less only at end of stream), hashing them. Reads go
/// straight into the part buffer: no intermediate copy.
/// `reuse` is a buffer of a finished part to fill instead of allocating.
async fn read_part<R: AsyncRead + Unpin>(
    reader: &mut R,
    part_size: usize,
    hasher: &mut Sha256,
    reuse: Option<BytesMut>,
) -> io::Result<BytesMut> {
    let mut buf = match reuse {
        Some(mut b) => {
            b.clear();
            b.reserve(part_size);
            b
        }
        None => BytesMut::with_capacity(part_size),
    };
    while buf.len() < part_size {
        let before = buf.len();
        let room = part_size - before;
        let n = reader.read_buf(&mut (&mut buf).limit(room)).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[before..]);
    }
    Ok(buf)
}

/// What a part task needs; shared by all parts of one upload.
struct PartContext {
    client: aws_sdk_s3::Client,
    bucket: String,
    endpoint: String,
    key: String,
    object_key: String,
    upload_id: String,
    sign_payload: bool,
}

impl PartContext {
    fn target(&self, operation: &'static str) -> Target<'_> {
        Target { bucket: &self.bucket, endpoint: &self.endpoint, operation, key: Some(&self.key) }
    }
}

async fn upload_part(ctx: Arc<PartContext>, part_number: i32, body: Bytes) -> PartResult {
    let len = body.len() as i64;
    // A second handle on the buffer (not a copy), to reuse it once the SDK is done.
    let buffer = body.clone();
    // The body is `Bytes`, so the SDK's retries resend it without copying.
    let request = ctx
        .client
        .upload_part()
        .bucket(&ctx.bucket)
        .key(&ctx.object_key)
        .upload_id(&ctx.upload_id)
        .part_number(part_number)
        .content_length(len)
        .body(ByteStream::from(body));
    let sent = if ctx.sign_payload {
        request.send().await
    } else {
        request.customize().disable_payload_signing().send().await
    };
    let out = sent.map_err(|e| ctx.target("UploadPart").error(e))?;
    Ok(PartDone {
        part: CompletedPart::builder().part_number(part_number).set_e_tag(out.e_tag().map(str::to_owned)).build(),
        buffer: buffer.try_into_mut().ok(),
    })
}

async fn copy_part(
    ctx: Arc<PartContext>,
    part_number: i32,
    start: u64,
    end: u64,
    if_match: Option<String>,
) -> PartResult {
    let out = ctx
        .client
        .upload_part_copy()
        .bucket(&ctx.bucket)
        .key(&ctx.object_key)
        .upload_id(&ctx.upload_id)
        .part_number(part_number)
        .copy_source(encode_copy_source(&ctx.bucket, &ctx.object_key))
        .copy_source_range(format!("bytes={start}-{end}"))
        .set_copy_source_if_match(if_match)
        .send()
        .await
        .map_err(|e| ctx.target("UploadPartCopy").error(e))?;
    let e_tag = out.copy_part_result().and_then(|r| r.e_tag()).map(str::to_owned);
    Ok(PartDone { part: CompletedPart::builder().part_number(part_number).set_e_tag(e_tag).build(), buffer: None })
}

fn part_result(joined: Result<PartResult, JoinError>) -> PartResult {
    match joined {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Part tasks are never cancelled (Cleanup lets them finish); but do not panic.
        Err(e) => Err(S3Error::Request {
            bucket: String::new(),
            endpoint: String::new(),
            operation: "UploadPart",
            kind: RequestFailure::Dispatch,
            source: Box::new(e),
        }),
    }
}

/// Undoes a failed or cancelled upload: waits for part tasks, aborts the multipart upload,
/// and deletes the object if it was completed but not yet stamped with its checksum.
/// Runs when [`run`](Cleanup::run) is awaited, or, if the upload future is dropped, in a
/// spawned task from `Drop`, so that cancellation also leaves nothing visible.
struct Cleanup {
    client: aws_sdk_s3::Client,
    bucket: String,
    object_key: String,
    upload_id: Option<String>,
    delete_object: bool,
    tasks: JoinSet<PartResult>,
}

impl Cleanup {
    fn new(store: &S3Store, object_key: &str, upload_id: Option<String>) -> Self {
        Cleanup {
            client: store.client.clone(),
            bucket: store.bucket.clone(),
            object_key: object_key.to_owned(),
            upload_id,
            delete_object: false,
            tasks: JoinSet::new(),
        }
    }

    /// Success: nothing to undo.
    fn disarm(mut self) {
        self.upload_id = None;
        self.delete_object = false;
    }

    /// Failure: undo now, and wait for it (in-flight parts first, then the abort).
    async fn run(mut self) {
        self.take().execute().await;
    }

    fn take(&mut self) -> CleanupWork {
        CleanupWork {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            object_key: self.object_key.clone(),
            upload_id: self.upload_id.take(),
            delete_object: std::mem::take(&mut self.delete_object),
            tasks: std::mem::take(&mut self.tasks),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let work = self.take();
        if work.upload_id.is_none() && !work.delete_object && work.tasks.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                warn!(bucket = %work.bucket, key = %work.object_key, "upload cancelled; cleaning up in the background");
                runtime.spawn(work.execute());
            }
            Err(_) => error!(
                bucket = %work.bucket, key = %work.object_key, upload_id = ?work.upload_id,
                "upload cancelled outside a Tokio runtime; cannot abort it (a lifecycle rule must clean up)"
            ),
        }
    }
}

struct CleanupWork {
    client: aws_sdk_s3::Client,
    bucket: String,
    object_key: String,
    upload_id: Option<String>,
    delete_object: bool,
    tasks: JoinSet<PartResult>,
}

impl CleanupWork {
    async fn execute(mut self) {
        // Parts still being sent are let finish, not cancelled: a request whose body the
        // server already has is stored when the server gets to it, whether or not the
        // client still waits, so a part cancelled here could land after the abort and be
        // kept (and billed) as a part of an upload nobody will complete. Each part request
        // is bounded by the client's timeouts, so this wait is too.
        while self.tasks.join_next().await.is_some() {}
        if let Some(upload_id) = self.upload_id.take() {
            self.abort(&upload_id).await;
        }
        if self.delete_object {
            match self.client.delete_object().bucket(&self.bucket).key(&self.object_key).send().await {
                Ok(_) => {
                    info!(bucket = %self.bucket, key = %self.object_key, "deleted object of failed upload")
                }
                Err(e) => error!(
                    bucket = %self.bucket, key = %self.object_key, error = %DisplayErrorContext(&e),
                    "could not delete object of failed upload; it has no checksum metadata"
                ),
            }
        }
    }

    /// Aborts the multipart upload, then asks for its parts and aborts again while some
    /// are still listed: S3 documents that a part upload in progress at the time of an
    /// abort may still succeed, and that freeing all its storage may take more than one
    /// abort. Stops after [`ABORT_ATTEMPTS`].
    async fn abort(&self, upload_id: &str) {
        for attempt in 1..=ABORT_ATTEMPTS {
            let aborted = self
                .client
                .abort_multipart_upload()
                .bucket(&self.bucket)
                .key(&self.object_key)
                .upload_id(upload_id)
                .send()
                .await;
            // A repeated abort may be refused once the upload is gone (NoSuchUpload on S3,
            // AccessDenied on some compatible servers): the listing below is the verdict.
            if let Err(e) = &aborted
                && attempt == 1
            {
                warn!(
                    bucket = %self.bucket, key = %self.object_key, %upload_id, error = %DisplayErrorContext(e),
                    "could not abort multipart upload; its parts use storage until the bucket's \
                     AbortIncompleteMultipartUpload lifecycle rule removes them"
                );
                return;
            }
            let left = self.remaining_parts(upload_id).await;
            match left {
                Some(0) | None => {
                    info!(bucket = %self.bucket, key = %self.object_key, %upload_id, attempt, "aborted multipart upload");
                    return;
                }
                Some(n) if attempt < ABORT_ATTEMPTS => {
                    warn!(
                        bucket = %self.bucket, key = %self.object_key, %upload_id, parts = n, attempt,
                        "parts of the aborted multipart upload are still stored; aborting again"
                    );
                    tokio::time::sleep(ABORT_RETRY_DELAY * attempt).await;
                }
                Some(n) => warn!(
                    bucket = %self.bucket, key = %self.object_key, %upload_id, parts = n,
                    "parts of the aborted multipart upload are still stored after {ABORT_ATTEMPTS} aborts; \
                     the bucket's AbortIncompleteMultipartUpload lifecycle rule must remove them"
                ),
            }
        }
    }

    /// How many parts the server still lists for the upload: `None` when it no longer
    /// knows the upload (the normal answer after an abort) or cannot say.
    async fn remaining_parts(&self, upload_id: &str) -> Option<usize> {
        let listed =
            self.client.list_parts().bucket(&self.bucket).key(&self.object_key).upload_id(upload_id).send().await;
        match listed {
            Ok(out) => Some(out.parts().len()),
            Err(e) => {
                debug!(bucket = %self.bucket, key = %self.object_key, %upload_id, error = %DisplayErrorContext(&e), "no parts listed after the abort");
                None
            }
        }
    }
}

/// Aborts of one multipart upload before its leftover parts are left to the bucket's
/// lifecycle rule.
const ABORT_ATTEMPTS: u32 = 3;
/// Pause before the second abort (doubled before the third): time for a straggling part
/// to land, so that the next abort removes it.
const ABORT_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(500);
