//! Events the operators leave on their custom resources. The operators publish through
//! kube-runtime's recorder, which folds repeats of one reason (from one operator pod, for
//! a few minutes) into a single Event object with a series count, whatever the note says:
//! so occurrences are counted, not objects.

use k8s_openapi::api::events::v1::Event;
use kube::Api;

use crate::{Cluster, Result};

/// One Event object about an object.
#[derive(Debug, Clone)]
pub struct Occurrences {
    /// Its reason (`AddLearner`).
    pub reason: String,
    /// Its note (of the last occurrence).
    pub note: String,
    /// How many times it was recorded.
    pub count: u32,
}

/// The Events of `ns` whose subject (`regarding`) is named `object`.
pub async fn about(cluster: &Cluster, ns: &str, object: &str) -> Result<Vec<Occurrences>> {
    let api: Api<Event> = Api::namespaced(cluster.client.clone(), ns);
    let list = api.list(&Default::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
        .map(|e| Occurrences {
            reason: e.reason.unwrap_or_default(),
            note: e.note.unwrap_or_default(),
            count: e
                .series
                .map(|s| s.count)
                .or(e.deprecated_count)
                .and_then(|c| u32::try_from(c).ok())
                .unwrap_or(1)
                .max(1),
        })
        .collect())
}

/// How many times an Event with `reason` was recorded about `object` in `ns`.
pub async fn count(cluster: &Cluster, ns: &str, object: &str, reason: &str) -> Result<u32> {
    Ok(about(cluster, ns, object).await?.iter().filter(|e| e.reason == reason).map(|e| e.count).sum())
}
