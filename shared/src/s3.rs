//! The S3 backup store. (Being written: placeholder so the crate compiles.)

/// Errors from the S3 backup store.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    /// Placeholder.
    #[error("s3: {0}")]
    Other(String),
}

impl S3Error {
    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        false
    }
}
