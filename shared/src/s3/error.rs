//! [`S3Error`] and the translation of SDK errors into it.
//!
//! Users meet these messages in conditions and Events, usually because of a typo in a
//! bucket name, endpoint or Secret. So every error about the store names the bucket and the
//! endpoint, and the common misconfigurations (wrong keys, missing bucket) get their own
//! variants with plain-language messages instead of an SDK debug dump.

use std::error::Error as StdError;
use std::io;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

/// Errors from the S3 backup store.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    /// The server refused the credentials or the permission (HTTP 403).
    #[error("bucket {bucket:?} at {endpoint}: access denied ({}); check the access key id, the secret access key and the bucket policy", detail(.code, .message))]
    AccessDenied { bucket: String, endpoint: String, code: String, message: String },

    /// The bucket does not exist at this endpoint.
    #[error("bucket {bucket:?} at {endpoint}: no such bucket")]
    NoSuchBucket { bucket: String, endpoint: String },

    /// The object does not exist.
    #[error("bucket {bucket:?} at {endpoint}: no such object {key:?}")]
    NotFound { bucket: String, endpoint: String, key: String },

    /// The server answered with another error.
    #[error("bucket {bucket:?} at {endpoint}: {operation} failed: HTTP {status} ({})", detail(.code, .message))]
    Service { bucket: String, endpoint: String, operation: &'static str, status: u16, code: String, message: String },

    /// The request did not get an answer: timeout, connection refused, TLS failure, or a
    /// response that could not be read.
    #[error("bucket {bucket:?} at {endpoint}: {operation} failed: {kind}: {source}")]
    Request {
        bucket: String,
        endpoint: String,
        operation: &'static str,
        kind: RequestFailure,
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },

    /// The object's content does not match the size or SHA-256 recorded at upload.
    /// (`Box<str>` keeps the error within 128 bytes, so that `Result`s stay small.)
    #[error("bucket {bucket:?} at {endpoint}: object {key:?} is corrupt: {what} is {actual}, expected {expected}")]
    Corrupt { bucket: String, endpoint: String, key: String, what: &'static str, expected: Box<str>, actual: Box<str> },

    /// Reading the stream to upload failed. The upload was aborted.
    #[error("bucket {bucket:?} at {endpoint}: reading the data to upload as {key:?}: {source}")]
    Source {
        bucket: String,
        endpoint: String,
        key: String,
        #[source]
        source: io::Error,
    },

    /// Writing downloaded data to its destination failed.
    #[error("bucket {bucket:?} at {endpoint}: writing object {key:?} to its destination: {source}")]
    Sink {
        bucket: String,
        endpoint: String,
        key: String,
        #[source]
        source: io::Error,
    },

    /// The connection broke while an object's body was being received.
    #[error("bucket {bucket:?} at {endpoint}: receiving object {key:?}: {source}")]
    Transfer {
        bucket: String,
        endpoint: String,
        key: String,
        #[source]
        source: io::Error,
    },

    /// The stream is longer than a multipart upload with this part size can hold.
    #[error(
        "bucket {bucket:?} at {endpoint}: object {key:?} exceeds {limit} bytes (10000 parts of {part_size} bytes); raise the part size"
    )]
    TooLarge { bucket: String, endpoint: String, key: String, limit: u64, part_size: usize },

    /// A setting is invalid; `field` names it (relative to the location or transfer config).
    #[error("invalid S3 configuration: {field}: {message}")]
    InvalidConfig { field: String, message: String },

    /// The Secret with the credentials could not be read or lacks a key.
    #[error("S3 credentials Secret {namespace}/{name}: {message}")]
    Secret { namespace: String, name: String, message: String, transient: bool },
}

/// "Code: message", or just the code when the server gave no message.
fn detail(code: &str, message: &str) -> String {
    if message.is_empty() { code.to_owned() } else { format!("{code}: {message}") }
}

/// Why a request got no answer from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFailure {
    /// The request could not be built (bad endpoint URL, invalid input). Not retryable.
    Construction,
    /// No answer in time.
    Timeout,
    /// Connecting or sending failed (refused, reset, DNS, TLS).
    Dispatch,
    /// An answer came but could not be read or parsed.
    Response,
}

impl std::fmt::Display for RequestFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RequestFailure::Construction => "invalid request",
            RequestFailure::Timeout => "timed out",
            RequestFailure::Dispatch => "could not reach the server",
            RequestFailure::Response => "unreadable response",
        })
    }
}

impl S3Error {
    /// Whether retrying may help: true for timeouts, connection failures, throttling and
    /// server errors (5xx); false for wrong credentials, a missing bucket or object,
    /// corrupt data and invalid configuration, which need a human.
    pub fn is_transient(&self) -> bool {
        match self {
            S3Error::Service { status, code, .. } => {
                *status >= 500
                    || *status == 429
                    || matches!(code.as_str(), "SlowDown" | "InternalError" | "ServiceUnavailable" | "RequestTimeout")
            }
            S3Error::Request { kind, .. } => *kind != RequestFailure::Construction,
            S3Error::Transfer { .. } => true,
            S3Error::Source { source, .. } | S3Error::Sink { source, .. } => io_is_transient(source),
            S3Error::Secret { transient, .. } => *transient,
            S3Error::AccessDenied { .. }
            | S3Error::NoSuchBucket { .. }
            | S3Error::NotFound { .. }
            | S3Error::Corrupt { .. }
            | S3Error::TooLarge { .. }
            | S3Error::InvalidConfig { .. } => false,
        }
    }
}

/// I/O errors that say "the pipe broke", not "the data or the disk is wrong".
fn io_is_transient(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(e.kind(), TimedOut | ConnectionReset | ConnectionAborted | BrokenPipe | Interrupted | UnexpectedEof)
}

/// Codes S3 (and compatible servers) use for credentials or permission problems.
const ACCESS_DENIED_CODES: &[&str] = &[
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "AccountProblem",
    "AllAccessDisabled",
    "InvalidSecurity",
    "NotSignedUp",
];

/// What a request was about, for turning SDK errors into [`S3Error`]s.
pub(crate) struct Target<'a> {
    pub bucket: &'a str,
    pub endpoint: &'a str,
    pub operation: &'static str,
    /// The object key, when the operation is about one object.
    pub key: Option<&'a str>,
}

impl Target<'_> {
    /// Translates an SDK error. HEAD requests carry no error body, so the HTTP status is
    /// the fallback: 403 is access denied; 404 is a missing object when a key is involved
    /// and a missing bucket otherwise.
    pub fn error<E>(&self, err: SdkError<E, HttpResponse>) -> S3Error
    where
        E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    {
        let bucket = self.bucket.to_owned();
        let endpoint = self.endpoint.to_owned();
        let operation = self.operation;
        let request = |kind, source: Box<dyn StdError + Send + Sync>| S3Error::Request {
            bucket: self.bucket.to_owned(),
            endpoint: self.endpoint.to_owned(),
            operation,
            kind,
            source,
        };
        let status = err.raw_response().map(|r| r.status().as_u16());
        match err {
            SdkError::ServiceError(service) => {
                let e = service.err();
                let code = e.code().unwrap_or_default().to_owned();
                let message = e.message().unwrap_or_default().to_owned();
                let status = status.unwrap_or_default();
                // HEAD answers have no body; the SDK then reports a bare status, or a
                // generic code such as "NotFound".
                let generic = code.is_empty() || code == "NotFound" || code == "Forbidden";
                if ACCESS_DENIED_CODES.contains(&code.as_str()) || status == 403 {
                    let code = if code.is_empty() { format!("HTTP {status}") } else { code };
                    return S3Error::AccessDenied { bucket, endpoint, code, message };
                }
                if code == "NoSuchBucket" || (generic && status == 404 && self.key.is_none()) {
                    return S3Error::NoSuchBucket { bucket, endpoint };
                }
                if let Some(key) = self.key
                    && (code == "NoSuchKey" || (generic && status == 404))
                {
                    return S3Error::NotFound { bucket, endpoint, key: key.to_owned() };
                }
                let code = if code.is_empty() { "no error code".to_owned() } else { code };
                S3Error::Service { bucket, endpoint, operation, status, code, message }
            }
            SdkError::TimeoutError(_) => request(RequestFailure::Timeout, Box::new(err)),
            SdkError::DispatchFailure(ref d) => {
                let kind = if d.is_timeout() { RequestFailure::Timeout } else { RequestFailure::Dispatch };
                request(kind, Box::new(err))
            }
            SdkError::ResponseError(_) => request(RequestFailure::Response, Box::new(err)),
            // Future SDK variants: treat like construction failures so that a bug is not
            // retried forever.
            _ => request(RequestFailure::Construction, Box::new(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_bucket_and_endpoint() {
        let e = S3Error::NoSuchBucket { bucket: "x".into(), endpoint: "http://127.0.0.1:9000".into() };
        assert_eq!(e.to_string(), "bucket \"x\" at http://127.0.0.1:9000: no such bucket");
        assert!(!e.is_transient());
        let e = S3Error::AccessDenied {
            bucket: "x".into(),
            endpoint: "http://127.0.0.1:9000".into(),
            code: "InvalidAccessKeyId".into(),
            message: "unknown key".into(),
        };
        assert_eq!(
            e.to_string(),
            "bucket \"x\" at http://127.0.0.1:9000: access denied (InvalidAccessKeyId: unknown key); \
             check the access key id, the secret access key and the bucket policy"
        );
        assert!(!e.is_transient());
    }

    #[test]
    fn stays_small() {
        // clippy::result_large_err's threshold; every Result<_, S3Error> carries this.
        assert!(std::mem::size_of::<S3Error>() <= 128, "{}", std::mem::size_of::<S3Error>());
    }

    #[test]
    fn server_errors_and_throttling_are_transient() {
        let service = |status, code: &str| S3Error::Service {
            bucket: "b".into(),
            endpoint: "e".into(),
            operation: "PutObject",
            status,
            code: code.into(),
            message: String::new(),
        };
        assert!(service(500, "InternalError").is_transient());
        assert!(service(503, "SlowDown").is_transient());
        assert!(service(429, "").is_transient());
        assert!(!service(400, "InvalidArgument").is_transient());
        let source = |kind| S3Error::Source {
            bucket: "b".into(),
            endpoint: "e".into(),
            key: "k".into(),
            source: io::Error::from(kind),
        };
        assert!(source(io::ErrorKind::BrokenPipe).is_transient());
        assert!(!source(io::ErrorKind::InvalidData).is_transient());
    }
}
