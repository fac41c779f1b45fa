//! Pure builders of the objects an EtcdCluster owns, from its spec and names. The
//! controller applies them with the shared `Applier`, which adds the managed-by and
//! instance labels and the owner reference.

pub mod config;
pub mod jobs;
pub mod network_policy;
pub mod pdb;
pub mod restore;
pub mod services;
pub mod statefulset;

use std::collections::BTreeMap;

use statecraft_shared::statefulset as set;

/// Port of the client API.
pub const CLIENT_PORT: i32 = 2379;
/// Port of peer (raft) traffic.
pub const PEER_PORT: i32 = 2380;
/// Port of `/metrics`, `/health`, `/livez` and `/readyz` (plain HTTP, no client auth).
pub const METRICS_PORT: i32 = 2381;

pub use set::{INSTANCE_LABEL, NAME_LABEL};

/// Value of [`NAME_LABEL`].
pub const APP_NAME: &str = "etcd";

/// Where a member keeps its data inside the pod (the volume's mount point).
pub const DATA_MOUNT: &str = "/var/lib/etcd";
/// etcd's data directory, below [`DATA_MOUNT`] so that a restore can stage its snapshot
/// on the same volume.
pub const DATA_DIR: &str = "/var/lib/etcd/data";

/// Suffix of the peer Service's name.
const PEER_SUFFIX: &str = "-peer";
/// Suffix of the client Service's name.
const CLIENT_SUFFIX: &str = "-client";

/// The longest cluster name whose StatefulSet (the cluster's name) gets pods and whose
/// Services (`<name>-client` the longest) are valid names.
pub const MAX_CLUSTER_NAME: usize = statecraft_shared::names::max_cluster_name(&[PEER_SUFFIX, CLIENT_SUFFIX]);

/// Names and addresses of a cluster's objects and members. Member `k` is pod `<cluster>-k`
/// of the StatefulSet, and its etcd member name is the same string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The cluster's name: also the StatefulSet's and PodDisruptionBudget's.
    pub cluster: String,
    /// Its namespace.
    pub namespace: String,
}

impl Names {
    /// The names of cluster `name` in `namespace`.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        Names { cluster: name.into(), namespace: namespace.into() }
    }
    /// The names every StatefulSet cluster has; its headless Service is the peer Service.
    pub fn set(&self) -> set::Names<'_> {
        set::Names { cluster: &self.cluster, namespace: &self.namespace, app: APP_NAME, headless_suffix: PEER_SUFFIX }
    }
    /// The StatefulSet.
    pub fn statefulset(&self) -> String {
        self.set().statefulset()
    }
    /// The headless Service that gives each member a stable DNS name (peer URLs use it).
    pub fn peer_service(&self) -> String {
        self.set().headless_service()
    }
    /// The client Service (every ready member).
    pub fn client_service(&self) -> String {
        format!("{}{CLIENT_SUFFIX}", self.cluster)
    }
    /// The ConfigMap with the membership a starting member joins (`initial-cluster`).
    pub fn config_map(&self) -> String {
        format!("{}-members", self.cluster)
    }
    /// Member (and pod) name of `ordinal`.
    pub fn member(&self, ordinal: u32) -> String {
        self.set().pod(ordinal)
    }
    /// The data PersistentVolumeClaim of `ordinal`.
    pub fn data_claim(&self, ordinal: u32) -> String {
        self.set().data_claim(ordinal)
    }
    /// Stable DNS name of member `ordinal`.
    pub fn host(&self, ordinal: u32) -> String {
        self.set().host(ordinal)
    }
    /// Peer URL of member `ordinal`, as registered in the membership.
    pub fn peer_url(&self, ordinal: u32) -> String {
        format!("http://{}:{PEER_PORT}", self.host(ordinal))
    }
    /// Client URL of member `ordinal`.
    pub fn client_url(&self, ordinal: u32) -> String {
        format!("http://{}:{CLIENT_PORT}", self.host(ordinal))
    }
    /// Client URL of the client Service.
    pub fn service_url(&self) -> String {
        format!("http://{}.{}.svc:{CLIENT_PORT}", self.client_service(), self.namespace)
    }
    /// The ordinal of a member name or pod name of this cluster (`<cluster>-<k>`).
    pub fn ordinal_of(&self, name: &str) -> Option<u32> {
        set::ordinal_of(&self.cluster, name)
    }
    /// The ordinal a peer URL of this cluster belongs to: how a learner that has not
    /// started yet (etcd reports no name for it) is recognised.
    pub fn ordinal_of_peer_url(&self, url: &str) -> Option<u32> {
        let host = url.strip_prefix("http://")?.split(':').next()?;
        let member = host.strip_suffix(&format!(".{}.{}.svc", self.peer_service(), self.namespace))?;
        self.ordinal_of(member)
    }
    /// Labels that select the cluster's pods.
    pub fn selector(&self) -> BTreeMap<String, String> {
        self.set().selector()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_round_trip_through_names_and_peer_urls() {
        let n = Names::new("main", "prod");
        assert_eq!(n.member(2), "main-2");
        assert_eq!(n.peer_url(2), "http://main-2.main-peer.prod.svc:2380");
        assert_eq!(n.ordinal_of("main-2"), Some(2));
        assert_eq!(n.ordinal_of("main-x"), None);
        assert_eq!(n.ordinal_of("mainly-2"), None);
        assert_eq!(n.ordinal_of_peer_url(&n.peer_url(4)), Some(4));
        assert_eq!(n.ordinal_of_peer_url("http://main-4.other-peer.prod.svc:2380"), None);
        assert_eq!(Names::new("main-1", "p").ordinal_of("main-1-0"), Some(0));
    }
}
