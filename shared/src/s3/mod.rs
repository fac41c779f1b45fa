//! The S3 backup store: where operators put backups and find them again.
//!
//! An [`S3Store`] is one bucket and key prefix (from an [`S3Location`] in a CRD) with a
//! client built for it. Keys passed to and returned by the store are relative to the prefix,
//! so operators never concatenate prefixes themselves.
//!
//! - [`S3Store::upload`] streams an [`AsyncRead`](tokio::io::AsyncRead) of unknown length
//!   (a `mysqldump` pipe) with memory bounded by [`TransferConfig`], computing SHA-256 and
//!   size on the way. Failure or cancellation aborts the multipart upload, so a backup
//!   either exists completely, with its checksum, or not at all.
//! - [`S3Store::download`] / [`S3Store::open`] stream it back and fail if the size or the
//!   SHA-256 differ from what the upload recorded, so a corrupt backup is never restored
//!   silently.
//! - [`S3Store::list`], [`S3Store::delete`], and retention: [`select_for_deletion`] decides
//!   (a pure function, easy to test), [`S3Store::apply_retention`] deletes.
//!
//! The checksum is stored in the object's user metadata (`x-amz-meta-sha256`, plus
//! `x-amz-meta-size`), so every object carries its own checksum. Storing it there for a
//! multipart upload needs one extra request: metadata can only be given when an upload
//! starts, before the SHA-256 is known, so after CompleteMultipartUpload the object is
//! copied onto itself with the metadata replaced (see [`upload`](S3Store::upload) for the
//! costs).

mod config;
mod download;
mod error;
mod retention;
mod secret;
mod upload;

use std::time::Duration;

use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::primitives::DateTime as SmithyDateTime;
use chrono::{DateTime, Utc};
use tracing::{debug, info};

pub use config::{
    DEFAULT_ACCESS_KEY_ID_KEY, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY_KEY, MAX_PART_SIZE, MAX_PARTS, MIN_PART_SIZE,
    S3Credentials, S3CredentialsSecretRef, S3Location, TransferConfig,
};
pub use download::{DownloadReceipt, ObjectReader};
pub use error::{RequestFailure, S3Error};
pub use retention::{RetentionPolicy, select_for_deletion};
pub use secret::{ENDPOINTS_ANNOTATION, OPT_IN_LABEL, check_credentials, opted_in_credentials, refusal};
pub use upload::UploadReceipt;

use error::Target;

/// User-metadata name (without `x-amz-meta-`) of the hex SHA-256 of the whole object.
pub const META_SHA256: &str = "sha256";
/// User-metadata name (without `x-amz-meta-`) of the object's size in bytes.
pub const META_SIZE: &str = "size";

/// One object in a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Key relative to the store's prefix.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// When the object was last written, as reported by the server.
    pub last_modified: DateTime<Utc>,
}

/// A bucket and prefix with a client for them. Cheap to clone (the client is shared).
#[derive(Clone, Debug)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
    endpoint: String,
    transfer: TransferConfig,
    /// Whether request bodies are covered by the SigV4 signature (an extra SHA-256 pass
    /// on both sides). Only over plain HTTP, as botocore does: there it is the only
    /// in-transit integrity check the server can make; over HTTPS, TLS already
    /// guarantees integrity and the store's own SHA-256 covers the data end to end.
    sign_payload: bool,
}

impl S3Store {
    /// Builds a store from a location and credentials given directly (tests, Jobs that
    /// get credentials from the environment). Does not contact the server; call
    /// [`check`](Self::check) for that.
    pub fn new(location: &S3Location, credentials: S3Credentials) -> Result<Self, S3Error> {
        location.validate()?;
        let creds = Credentials::new(
            credentials.access_key_id,
            credentials.secret_access_key,
            credentials.session_token,
            None,
            "statecraft",
        );
        // Timeouts: connecting should be quick; the first response byte can take long for
        // CompleteMultipartUpload and server-side copies of large objects (S3 keeps the
        // connection alive by sending whitespace meanwhile). No overall operation
        // timeout: a 16 MiB part on a slow link legitimately takes minutes.
        let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(300))
            .build();
        let mut builder = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(location.region.clone()))
            .credentials_provider(creds)
            .force_path_style(location.force_path_style)
            // The SDK's default CRC checksums on every request are rejected or mishandled
            // by some S3-compatible servers; the store verifies integrity end to end with
            // its own SHA-256 instead (and SigV4 signs each request's payload hash).
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .timeout_config(timeouts);
        if let Some(endpoint) = &location.endpoint {
            builder = builder.endpoint_url(endpoint.trim_end_matches('/'));
        }
        Ok(S3Store {
            client: aws_sdk_s3::Client::from_conf(builder.build()),
            bucket: location.bucket.clone(),
            prefix: location.normalized_prefix(),
            endpoint: location.endpoint_display(),
            transfer: TransferConfig::default(),
            sign_payload: location.endpoint.as_deref().is_some_and(|e| e.starts_with("http://")),
        })
    }

    /// Reads the credentials from the location's Secret in `namespace` (which must have
    /// opted in: see [`opted_in_credentials`]) and builds the store.
    pub async fn from_secret(client: kube::Client, namespace: &str, location: &S3Location) -> Result<Self, S3Error> {
        location.validate()?;
        let credentials = opted_in_credentials(client, namespace, location).await?;
        Self::new(location, credentials)
    }

    /// Replaces the transfer settings (part size, concurrency), after checking them.
    pub fn with_transfer_config(mut self, transfer: TransferConfig) -> Result<Self, S3Error> {
        transfer.validate()?;
        self.transfer = transfer;
        Ok(self)
    }

    /// Overrides whether upload bodies are signed (default: only for `http://`
    /// endpoints; see the field's documentation for why).
    pub fn with_payload_signing(mut self, sign: bool) -> Self {
        self.sign_payload = sign;
        self
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The endpoint as shown in messages.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The normalized key prefix (empty, or ending in `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The transfer settings in use.
    pub fn transfer_config(&self) -> &TransferConfig {
        &self.transfer
    }

    /// The underlying SDK client, for operations the store does not wrap.
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    /// The full object key for a key relative to the prefix.
    pub fn object_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Verifies that the bucket exists and the credentials are accepted (HeadBucket), so
    /// that misconfiguration is reported when a resource is created, not at the first
    /// backup hours later.
    pub async fn check(&self) -> Result<(), S3Error> {
        self.client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|e| self.target("HeadBucket", None).error(e))?;
        Ok(())
    }

    /// Lists the objects whose keys start with `prefix` (relative to the store's prefix;
    /// empty for all), in key order, following pagination.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, S3Error> {
        let full_prefix = self.object_key(prefix);
        let mut pages = self.client.list_objects_v2().bucket(&self.bucket).prefix(&full_prefix).into_paginator().send();
        let mut objects = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.target("ListObjectsV2", None).error(e))?;
            for o in page.contents() {
                let Some(key) = o.key().and_then(|k| k.strip_prefix(&self.prefix)) else {
                    continue;
                };
                let last_modified = o.last_modified().and_then(to_chrono).unwrap_or(DateTime::UNIX_EPOCH);
                objects.push(ObjectInfo {
                    key: key.to_owned(),
                    size: o.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
                    last_modified,
                });
            }
        }
        debug!(bucket = %self.bucket, prefix = %full_prefix, count = objects.len(), "listed objects");
        Ok(objects)
    }

    /// Deletes an object. Deleting a missing object succeeds, as in S3, so that retries
    /// and concurrent retention runs are harmless.
    pub async fn delete(&self, key: &str) -> Result<(), S3Error> {
        let object_key = self.checked_key(key)?;
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
            .map_err(|e| self.target("DeleteObject", Some(key)).error(e))?;
        info!(bucket = %self.bucket, key = %object_key, "deleted object");
        Ok(())
    }

    /// Deletes what [`select_for_deletion`] selects among the objects under `prefix`, and
    /// returns them. Stops at the first failed deletion; what was deleted before stays
    /// deleted, and running again continues.
    pub async fn apply_retention(
        &self,
        prefix: &str,
        policy: &RetentionPolicy,
        now: DateTime<Utc>,
    ) -> Result<Vec<ObjectInfo>, S3Error> {
        let objects = self.list(prefix).await?;
        let doomed = select_for_deletion(&objects, policy, now);
        info!(
            bucket = %self.bucket, prefix = %self.object_key(prefix), total = objects.len(),
            deleting = doomed.len(), ?policy, "applying retention"
        );
        for o in &doomed {
            self.delete(&o.key).await?;
        }
        Ok(doomed)
    }

    /// The full key, after rejecting keys S3 or the prefix scheme cannot hold.
    fn checked_key(&self, key: &str) -> Result<String, S3Error> {
        let invalid =
            |message: &str| S3Error::InvalidConfig { field: "key".to_owned(), message: format!("{key:?}: {message}") };
        if key.is_empty() {
            return Err(invalid("must not be empty"));
        }
        if key.starts_with('/') {
            return Err(invalid("must be relative to the store prefix (no leading '/')"));
        }
        let full = self.object_key(key);
        if full.len() > 1024 {
            return Err(invalid("with the prefix exceeds S3's 1024-byte key limit"));
        }
        Ok(full)
    }

    fn target<'a>(&'a self, operation: &'static str, key: Option<&'a str>) -> Target<'a> {
        Target { bucket: &self.bucket, endpoint: &self.endpoint, operation, key }
    }
}

fn to_chrono(t: &SmithyDateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// Percent-encodes a key for the `x-amz-copy-source` header, which S3 expects URL-encoded
/// (the SDK sends it verbatim). `/` stays as is.
fn encode_copy_source(bucket: &str, key: &str) -> String {
    let mut out = format!("{bucket}/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_source_is_percent_encoded() {
        assert_eq!(encode_copy_source("b", "a/2024-01-01T00:00:00Z x+y.gz"), "b/a/2024-01-01T00%3A00%3A00Z%20x%2By.gz");
        assert_eq!(encode_copy_source("b", "é"), "b/%C3%A9");
    }

    #[test]
    fn keys_are_checked_and_prefixed() {
        let location = S3Location::new("bucket", "/backups/db", S3CredentialsSecretRef::new("s"));
        let store = S3Store::new(&location, S3Credentials::new("a", "b")).expect("store");
        assert_eq!(store.checked_key("x.gz").expect("valid"), "backups/db/x.gz");
        assert!(store.checked_key("").is_err());
        assert!(store.checked_key("/x").is_err());
        assert!(store.checked_key(&"k".repeat(1020)).is_err());
        assert_eq!(store.endpoint(), "https://s3.us-east-1.amazonaws.com");
    }

    /// Operators run transfers in spawned tasks, so the futures must be `Send`.
    #[test]
    fn transfer_futures_are_send() {
        fn assert_send<T: Send>(_: &T) {}
        let location = S3Location::new("bucket", "", S3CredentialsSecretRef::new("s"));
        let store = S3Store::new(&location, S3Credentials::new("a", "b")).expect("store");
        assert_send(&store.upload("k", tokio::io::empty()));
        assert_send(&store.download("k", tokio::io::sink(), None));
        assert_send(&store.open("k", None));
        assert_send(&store.apply_retention("", &RetentionPolicy::default(), Utc::now()));
    }
}
