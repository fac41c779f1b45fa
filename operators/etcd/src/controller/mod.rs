//! The etcd operator's controllers.

use std::sync::Arc;

use statecraft_shared::runner::Runtime;

/// Shared by the controllers and the per-cluster tasks.
pub struct Context {
    /// The runner's runtime (client, namespace, events, metrics).
    pub rt: Arc<Runtime>,
}
