//! Finalizers: clean-up that must happen before an object disappears (for example,
//! removing a member from a cluster, or refusing deletion while a backup runs).
//!
//! A thin layer over kube-runtime's finalizer helper that keeps the caller's error
//! category: a clean-up that fails for a transient reason is retried with back-off, an
//! invalid spec waits for a change, exactly as in a normal reconcile.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Error as FinalizerError, Event, finalizer};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

pub use kube::runtime::finalizer::Event as FinalizerEvent;

/// Runs `reconcile` with finalizer `name` on `obj`: the finalizer is added before the first
/// `Apply`, and removed only after `Cleanup` succeeded.
pub async fn with_finalizer<K, F, Fut>(api: &Api<K>, name: &str, obj: Arc<K>, reconcile: F) -> Result<Action>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    F: FnOnce(Event<K>) -> Fut,
    Fut: Future<Output = Result<Action>>,
{
    let object = obj.name_any();
    finalizer(api, name, obj, reconcile).await.map_err(|e| match e {
        FinalizerError::ApplyFailed(inner) | FinalizerError::CleanupFailed(inner) => inner,
        FinalizerError::AddFinalizer(source) => Error::kube(format!("adding finalizer {name} to {object}"), source),
        FinalizerError::RemoveFinalizer(source) => {
            Error::kube(format!("removing finalizer {name} from {object}"), source)
        }
        other => Error::Permanent(format!("finalizer {name} on {object}: {other}")),
    })
}
