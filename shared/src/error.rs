//! One error type for every operator. Its [`ErrorCategory`] decides what the controller
//! does with a failed reconcile, so that operators never hand-roll retry policy:
//!
//! - [`ErrorCategory::InvalidSpec`]: the user must change the object. It is reported as a
//!   condition and a Warning Event, and the reconcile waits for the next change instead of
//!   hammering the API server with retries that cannot succeed.
//! - [`ErrorCategory::Transient`]: the world may fix itself (network, conflicts, a pod not
//!   yet ready). Retried with exponential back-off.
//! - [`ErrorCategory::Permanent`]: a bug or a state the operator cannot recover from on its
//!   own. Reported, retried slowly so that a fixed operator picks it up again.

use crate::reason::{Common, Reason};
use std::time::Duration;

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How a failed reconcile is handled; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCategory {
    /// The spec cannot be acted on until the user changes it.
    InvalidSpec,
    /// Worth retrying soon with back-off.
    Transient,
    /// Not expected to succeed by retrying; needs a human or a new operator version.
    Permanent,
}

/// The error type shared by the library and the operators.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object's spec is invalid; `field` names the offending field for the user.
    #[error("invalid spec: {field}: {message}")]
    InvalidSpec { field: String, message: String },

    /// A call to the Kubernetes API failed.
    #[error("kubernetes API: {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },

    /// Serializing or deserializing an object failed.
    #[error("serialization: {context}: {source}")]
    Serde {
        context: String,
        #[source]
        source: serde_json::Error,
    },

    /// A managed system (database, broker, object store) refused or failed an operation
    /// that may succeed later.
    #[error("{system}: {message}")]
    DataPlane { system: String, message: String },

    /// The S3 backup store failed. Boxed: S3 errors carry bucket, endpoint and cause, and
    /// would otherwise make every `Result` of the crate that much larger.
    #[error(transparent)]
    S3(Box<crate::s3::S3Error>),

    /// This process may no longer act: its leader Lease may have passed to another replica
    /// (see [`crate::leader::Leadership`]).
    #[error("not acting: this process's leader Lease was last renewed too long ago (another replica may lead)")]
    NotLeading,

    /// Something that retrying will not fix.
    #[error("{0}")]
    Permanent(String),
}

impl From<crate::s3::S3Error> for Error {
    fn from(e: crate::s3::S3Error) -> Self {
        Error::S3(Box::new(e))
    }
}

impl Error {
    /// An invalid-spec error naming the field.
    pub fn invalid_spec(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidSpec { field: field.into(), message: message.into() }
    }

    /// Wraps a kube error with what was being done.
    pub fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube { context: context.into(), source }
    }

    /// The category that decides retry behaviour.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Error::InvalidSpec { .. } => ErrorCategory::InvalidSpec,
            // 4xx answers other than conflicts and throttling do not fix themselves.
            Error::Kube { source: kube::Error::Api(status), .. }
                if (400..500).contains(&status.code) && ![409, 429].contains(&status.code) =>
            {
                ErrorCategory::Permanent
            }
            Error::Kube { .. } | Error::DataPlane { .. } | Error::NotLeading => ErrorCategory::Transient,
            Error::S3(e) if e.is_transient() => ErrorCategory::Transient,
            Error::S3(_) | Error::Serde { .. } | Error::Permanent(_) => ErrorCategory::Permanent,
        }
    }

    /// The reason for conditions and Events.
    pub fn reason(&self) -> Reason {
        Reason::from(match self {
            Error::InvalidSpec { .. } => Common::InvalidSpec,
            Error::Kube { .. } => Common::KubernetesApiError,
            Error::Serde { .. } => Common::SerializationError,
            Error::DataPlane { .. } => Common::DataPlaneError,
            Error::S3(_) => Common::BackupStoreError,
            Error::NotLeading => Common::NotLeading,
            Error::Permanent(_) => Common::PermanentError,
        })
    }
}

/// Back-off for transient errors: doubles from `base` per consecutive failure, capped.
pub fn backoff(consecutive_failures: u32) -> Duration {
    const BASE: Duration = Duration::from_secs(1);
    const CAP: Duration = Duration::from_secs(300);
    BASE.saturating_mul(1u32 << consecutive_failures.min(16)).min(CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> Error {
        Error::kube("test", kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed()))
    }

    #[test]
    fn categories_decide_retry() {
        assert_eq!(Error::invalid_spec("spec.replicas", "must be odd").category(), ErrorCategory::InvalidSpec);
        assert_eq!(api_error(409).category(), ErrorCategory::Transient);
        assert_eq!(api_error(429).category(), ErrorCategory::Transient);
        assert_eq!(api_error(500).category(), ErrorCategory::Transient);
        assert_eq!(api_error(403).category(), ErrorCategory::Permanent);
        assert_eq!(Error::Permanent("x".into()).category(), ErrorCategory::Permanent);
    }

    #[test]
    fn invalid_spec_message_names_the_field() {
        let e = Error::invalid_spec("spec.replicas", "must be 1, 3 or 5");
        assert_eq!(e.to_string(), "invalid spec: spec.replicas: must be 1, 3 or 5");
        assert_eq!(e.reason(), Common::InvalidSpec);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(8));
        assert_eq!(backoff(40), Duration::from_secs(300));
    }
}
