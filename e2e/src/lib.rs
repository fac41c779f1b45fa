//! The end-to-end suite: tests that run the operators on a real Kubernetes cluster.
//!
//! - [`cluster`]: which cluster (the local one from `make cluster-up`, or kind), chosen by
//!   `STATECRAFT_E2E_PROVIDER`, and a client for it;
//! - [`namespace`]: a namespace per test, deleted afterwards, with pod logs and Events
//!   dumped when the test fails;
//! - [`wait`]: waiting on conditions with a timeout that names what it waited for;
//! - [`images`]: the image names the cluster has (from `deploy/images/images.env`), and
//!   second tags of them on the local node (upgrade tests);
//! - [`operator`]: any operator installed from its manifests, its metrics, its leader killed;
//! - [`events`]: counting the Events an operator left on a resource;
//! - [`faults`]: pauses and partitions of the local cluster's pods (SIGSTOP, iptables);
//! - [`writes`]: what a client writing throughout a test saw (gaps, lost writes);
//! - [`history`]: what concurrent clients did to registers, checked for linearizability
//!   by porcupine (`statecraft-porcupine`);
//! - [`results`]: measurements appended to `results/e2e/*.jsonl`.
//!
//! Tests are `#[ignore]`d so that `cargo test` without a cluster skips them; `make e2e`
//! runs them all (`E2E_FILTER=<substring>` narrows the run) and `make test` runs the
//! cluster checks.

pub mod cluster;
pub mod events;
pub mod evidence;
pub mod faults;
pub mod history;
pub mod images;
pub mod namespace;
pub mod operator;
pub mod outage;
pub mod results;
pub mod wait;
pub mod writes;

pub use cluster::{Cluster, Provider};
pub use namespace::TestNamespace;
pub use wait::wait_until;

/// Errors of the e2e helpers.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    #[error("no cluster: {0}")]
    NoCluster(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error("{command}: {message}")]
    Command { command: String, message: String },
    #[error("{0}")]
    Other(String),
}

/// Result of the e2e helpers.
pub type Result<T, E = E2eError> = std::result::Result<T, E>;
