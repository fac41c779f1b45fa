//! Rebuilding a StatefulSet member from nothing: what an operator does to a member whose
//! data cannot be trusted or repaired (an etcd member that stays broken, a MySQL replica
//! with errant transactions). Its data claim and its pod are deleted; the StatefulSet makes
//! both again, and the new, empty member catches up through the system's own replication.
//!
//! Every step tolerates what is already gone, so a step retried after a partial failure
//! (claim deleted, pod not) finishes the job instead of failing on the first deletion.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::DeleteParams;

use crate::{Error, Result};

/// Deletes object `name`; already gone (404) counts as done.
pub async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("deleting {name}"), e)),
    }
}

/// Deletes the data claim `claim` of member `pod`, then the pod. The claim goes first: it
/// stays (protected, terminating) while the pod uses it and disappears with the pod, so the
/// StatefulSet can never hand the old volume to the new pod; deleting the pod first would
/// race the StatefulSet recreating it on the old claim.
pub async fn rebuild_member(
    pods: &Api<Pod>,
    claims: &Api<PersistentVolumeClaim>,
    pod: &str,
    claim: &str,
) -> Result<()> {
    delete_if_present(claims, claim).await?;
    delete_if_present(pods, pod).await
}
