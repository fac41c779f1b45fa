//! etcd snapshots to and from S3, with no Kubernetes in sight: what the backup Job
//! ([`save`]) and a restored cluster's first member's init container ([`restore`]) run, so
//! that tests run exactly this code against a real etcd and a real S3 server.
//!
//! A snapshot object is the `Maintenance.Snapshot` stream as etcd sends it: the bbolt
//! database followed by its 32-byte SHA-256, the layout `etcdctl snapshot save` writes and
//! `etcdutl snapshot restore` verifies. The S3 object additionally carries the SHA-256 of
//! the whole object (the shared store's metadata), checked on download.

pub mod restore;
pub mod save;

use std::path::PathBuf;

use statecraft_shared::Error;
use statecraft_shared::s3::S3Error;

pub use restore::{RestoreMember, RestoreReport, restore_member, skip_check};
pub use save::{SnapshotReport, save_to_s3};

/// Why a snapshot could not be saved or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The member refused or failed a request, or the connection broke.
    #[error("member {endpoint}: {operation}: {source}")]
    Etcd {
        endpoint: String,
        operation: &'static str,
        #[source]
        source: etcd_client::Error,
    },
    /// The member's stream is not a whole snapshot (truncated, or its checksum differs).
    #[error("snapshot from {endpoint} is damaged: {message}")]
    Damaged { endpoint: String, message: String },
    /// The store failed (missing object, credentials, corrupt object, network).
    #[error(transparent)]
    S3(#[from] S3Error),
    /// A local file operation of the restore failed.
    #[error("{operation} {path}: {source}")]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `etcdutl snapshot restore` failed; `output` is the end of what it printed.
    #[error("etcdutl snapshot restore failed ({status}): {output}")]
    Etcdutl { status: String, output: String },
    /// A parameter cannot be acted on.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl SnapshotError {
    fn io(operation: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SnapshotError::Io { operation, path: path.into(), source }
    }
}

impl From<SnapshotError> for Error {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::S3(e) => e.into(),
            SnapshotError::Invalid { field, message } => Error::invalid_spec(field, message),
            SnapshotError::Io { .. } => Error::Permanent(e.to_string()),
            other => Error::DataPlane { system: "etcd".into(), message: other.to_string() },
        }
    }
}
