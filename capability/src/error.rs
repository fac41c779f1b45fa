//! One error type. Every error about an input names the file (and line, where there is
//! one), because the person reading it has to go and fix that file.

use std::path::{Path, PathBuf};

/// What can go wrong while loading inputs or writing a report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file or document that must be a Kubernetes object is not one, or does not parse
    /// (see [`crate::manifests::Manifests::strict`]).
    #[error("{at}: {reason}")]
    Skipped {
        /// `file:line`.
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// An evidence record is malformed or names something unknown.
    #[error("{}:{line}: {message}", path.display())]
    Evidence {
        /// The evidence file.
        path: PathBuf,
        /// 1-based line of the record.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A claim names a criterion the model does not have.
    #[error("{operator} claims unknown criterion {id:?} (see `statecraft-capability criteria`)")]
    UnknownClaim {
        /// The operator.
        operator: String,
        /// The id it claimed.
        id: String,
    },
    /// An explicitly named input does not exist.
    #[error("{}: {what} not found", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
        /// What it should have been.
        what: &'static str,
    },
    /// A file one of Statecraft's operators writes for this crate (`make manifests`:
    /// `deploy/<operator>/capabilities.json`, `sample-objects.yaml`) is missing or wrong.
    #[error("{}: {message} (run `make manifests`)", path.display())]
    Artifact {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An input of an OLM bundle (`bundle`) lacks what the bundle needs, or the output
    /// directory is not one a bundle may replace.
    #[error("{}: {message}", path.display())]
    Bundle {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A command-line argument names something unknown.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io { path: path.to_path_buf(), source }
    }
}

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
