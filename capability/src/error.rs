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
    /// A file is not valid YAML or JSON.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A document in a manifests directory is not a Kubernetes object.
    #[error("{}:{line}: not a Kubernetes object: {reason}", path.display())]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// 1-based line where the document starts.
        line: usize,
        /// What is missing or wrong.
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
    /// A manifest is a Kubernetes object but not a usable one (e.g. a CSV whose
    /// `capabilities` annotation is not one of the five level names).
    #[error("{}:{line}: {message}", path.display())]
    Manifest {
        /// The file.
        path: PathBuf,
        /// 1-based line where the object starts.
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
    /// The objects of an operator's sample custom resource could not be built.
    #[error("sample objects of {operator}: {message}")]
    Sample {
        /// The operator.
        operator: String,
        /// What failed.
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
