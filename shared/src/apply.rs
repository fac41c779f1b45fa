//! Server-side apply of the objects a reconcile wants, and clean-up of the ones it no
//! longer wants.
//!
//! An [`Applier`] is made per reconcile of one owner object (a `MySQLCluster`, say). Every
//! child applied through it gets
//! - the operator's field manager (`PatchParams::apply(..).force()`): the operator owns
//!   exactly the fields it sets and leaves everyone else's alone;
//! - labels that say which operator and which owner it belongs to (used for clean-up);
//! - a controller owner reference, so Kubernetes garbage-collects children when the owner
//!   is deleted.
//!
//! After applying everything, [`Applier::delete_orphans`] deletes children that carry the
//! owner's labels but were not applied this time (a Service switched off in the spec, say);
//! [`Applier::delete_orphans_with_events`] also tells the user, with an Event on the owner.
//! PersistentVolumeClaims and backups are never deleted unless the caller passes
//! [`OrphanPolicy::DeleteData`]: losing data must be something the user asked for.
//!
//! Steady state sends no writes: an apply whose desired object is unchanged since the last
//! successful apply, and whose live object has not changed since then either, is skipped
//! (one read instead of a write). A live object changed by someone else is re-applied,
//! which corrects drift in fields the operator owns.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Mutex;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use tracing::{debug, info};

use crate::events::EventPublisher;
use crate::reason::Common;
use crate::{Error, Result};

/// Label naming the operator that manages an object.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label naming the owner object (the custom resource) a child belongs to.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Label grouping every Statecraft object.
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";

/// What [`Applier::delete_orphans`] may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphanPolicy {
    /// Delete orphans except PersistentVolumeClaims and backups (the default).
    KeepData,
    /// Also delete orphaned PersistentVolumeClaims and backups; only when the spec asks.
    DeleteData,
}

/// Remembers, per child, what was last applied and what the live object looked like right
/// after, so that unchanged applies can be skipped. Shared by all reconciles of a controller.
#[derive(Default)]
pub struct ApplyCache {
    entries: Mutex<HashMap<String, CacheEntry>>,
}

#[derive(Clone, PartialEq)]
struct CacheEntry {
    desired: String,
    live_marker: String,
}

impl ApplyCache {
    fn get(&self, key: &str) -> Option<CacheEntry> {
        self.entries.lock().ok().and_then(|m| m.get(key).cloned())
    }

    fn put(&self, key: String, entry: CacheEntry) {
        if let Ok(mut m) = self.entries.lock() {
            m.insert(key, entry);
        }
    }

    fn forget(&self, key: &str) {
        if let Ok(mut m) = self.entries.lock() {
            m.remove(key);
        }
    }
}

/// Applies the children of one owner object; see the module documentation.
pub struct Applier<'a> {
    client: Client,
    namespace: String,
    field_manager: String,
    owner: OwnerReference,
    /// The owner as the Events about its children name it.
    regarding: ObjectReference,
    labels: BTreeMap<String, String>,
    cache: &'a ApplyCache,
    applied: HashSet<(String, String)>,
}

impl<'a> Applier<'a> {
    /// An applier for the children of `owner`, writing as `field_manager` (the operator's
    /// name, which is also the value of the `managed-by` label).
    pub fn new<K>(client: Client, field_manager: &str, owner: &K, cache: &'a ApplyCache) -> Result<Self>
    where
        K: Resource<DynamicType = ()>,
    {
        let owner_ref = owner
            .controller_owner_ref(&())
            .ok_or_else(|| Error::Permanent(format!("{} has no name or uid to own children with", K::kind(&()))))?;
        let namespace = owner
            .namespace()
            .ok_or_else(|| Error::Permanent(format!("{} {} is not namespaced", K::kind(&()), owner.name_any())))?;
        let labels = BTreeMap::from([
            (MANAGED_BY_LABEL.to_string(), field_manager.to_string()),
            (INSTANCE_LABEL.to_string(), owner.name_any()),
            (PART_OF_LABEL.to_string(), "statecraft".to_string()),
        ]);
        Ok(Applier {
            client,
            namespace,
            field_manager: field_manager.into(),
            owner: owner_ref,
            regarding: owner.object_ref(&()),
            labels,
            cache,
            applied: HashSet::new(),
        })
    }

    /// The labels stamped on every child; selectors for the owner's children use them.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// Server-side applies `obj` (in the owner's namespace, with the owner's labels and
    /// reference) and returns the live object.
    pub async fn apply<T>(&mut self, mut obj: T) -> Result<T>
    where
        T: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Serialize + DeserializeOwned + Debug,
    {
        let name = obj.name_any();
        let kind = T::kind(&()).to_string();
        let meta = obj.meta_mut();
        meta.namespace = Some(self.namespace.clone());
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        meta.owner_references = Some(vec![self.owner.clone()]);

        let api: Api<T> = Api::namespaced(self.client.clone(), &self.namespace);
        let key = format!("{}/{}/{}/{}", self.namespace, T::api_version(&()), kind, name);
        let desired = digest(&obj)?;
        self.applied.insert((kind.clone(), name.clone()));

        if let Some(entry) = self.cache.get(&key)
            && entry.desired == desired
        {
            let live = api.get_opt(&name).await.map_err(|e| Error::kube(format!("reading {kind} {name}"), e))?;
            if let Some(live) = live
                && live_marker(&live) == entry.live_marker
            {
                debug!(%kind, %name, "unchanged; not applying");
                return Ok(live);
            }
        }

        let params = PatchParams::apply(&self.field_manager).force();
        let live = api
            .patch(&name, &params, &Patch::Apply(&obj))
            .await
            .map_err(|e| Error::kube(format!("applying {kind} {name}"), e))?;
        self.cache.put(key, CacheEntry { desired, live_marker: live_marker(&live) });
        Ok(live)
    }

    /// Deletes children of the owner, of the given kinds, that were not applied through
    /// this applier. Returns `kind/name` of each object deleted.
    pub async fn delete_orphans(&self, kinds: &[ApiResource], policy: OrphanPolicy) -> Result<Vec<String>> {
        let selector = crate::statefulset::label_query(&self.labels);
        let mut deleted = Vec::new();
        for resource in kinds {
            if policy == OrphanPolicy::KeepData && holds_data(resource) {
                debug!(kind = %resource.kind, "keeping orphaned data objects");
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.namespace, resource);
            let list = api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| Error::kube(format!("listing {}", resource.plural), e))?;
            for obj in list {
                let name = obj.name_any();
                let owned = obj.owner_references().iter().any(|o| o.uid == self.owner.uid);
                if !owned || self.applied.contains(&(resource.kind.clone(), name.clone())) {
                    continue;
                }
                info!(kind = %resource.kind, %name, "deleting object no longer desired");
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(Error::kube(format!("deleting {} {name}", resource.kind), e)),
                }
                self.cache.forget(&format!("{}/{}/{}/{}", self.namespace, resource.api_version, resource.kind, name));
                deleted.push(format!("{}/{name}", resource.kind));
            }
        }
        Ok(deleted)
    }

    /// [`Applier::delete_orphans`], then a Normal `Deleted` Event (action `Cleanup`) on the
    /// owner for each object deleted: a child that disappears because the spec no longer
    /// asks for it is something the user should be able to see in `kubectl describe`.
    pub async fn delete_orphans_with_events(
        &self,
        kinds: &[ApiResource],
        policy: OrphanPolicy,
        events: &EventPublisher,
    ) -> Result<()> {
        for gone in self.delete_orphans(kinds, policy).await? {
            let note = format!("deleted {gone}: no longer desired");
            events.publish(self.regarding.clone(), EventType::Normal, Common::Deleted, "Cleanup", note).await;
        }
        Ok(())
    }
}

/// Kinds whose deletion loses data: kept unless the user asked for deletion.
fn holds_data(resource: &ApiResource) -> bool {
    resource.kind == "PersistentVolumeClaim" || resource.kind.ends_with("Backup")
}

/// What identifies the state of a live object: its generation where the API server keeps
/// one (it moves only when the spec changes, not on status updates), else its
/// resourceVersion.
fn live_marker<T: Resource>(obj: &T) -> String {
    let meta = obj.meta();
    match meta.generation {
        Some(g) => format!("g{g}"),
        None => format!("rv{}", meta.resource_version.as_deref().unwrap_or_default()),
    }
}

fn digest<T: Serialize>(obj: &T) -> Result<String> {
    let bytes =
        serde_json::to_vec(obj).map_err(|source| Error::Serde { context: "hashing desired object".into(), source })?;
    Ok(hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};

    #[test]
    fn data_kinds_are_protected() {
        assert!(holds_data(&ApiResource::erase::<PersistentVolumeClaim>(&())));
        assert!(!holds_data(&ApiResource::erase::<ConfigMap>(&())));
        let backup = ApiResource { kind: "MySQLBackup".into(), ..ApiResource::erase::<ConfigMap>(&()) };
        assert!(holds_data(&backup));
    }

    #[test]
    fn generation_beats_resource_version() {
        let mut cm = ConfigMap::default();
        cm.metadata.resource_version = Some("42".into());
        assert_eq!(live_marker(&cm), "rv42");
        cm.metadata.generation = Some(3);
        assert_eq!(live_marker(&cm), "g3");
    }
}
