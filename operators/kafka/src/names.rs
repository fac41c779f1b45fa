//! The names a cluster's objects get, and so the longest cluster name that fits them.
//!
//! Every pool is a StatefulSet named `<cluster><pool suffix>` (`-controller`, `-broker`,
//! `-combined`), governed by a headless Service of the same name; the bootstrap Service is
//! `<cluster>-bootstrap` and the external listener's per-broker Services are
//! `<cluster>-external-<ordinal>`, the ordinal below 100 (`MAX_BROKERS`). A StatefulSet's
//! name leaves room for the pods' revision hash (52 characters at most, see
//! `statecraft_shared::names`), so the longest pool suffix, `-controller` (11), leaves 41;
//! the Services leave more (63 - 12 for `-external-99` = 51). Hence 41.

use statecraft_shared::names::{MAX_STATEFULSET_NAME, max_cluster_name};
use statecraft_shared::statefulset as set;

use crate::api::NodeRole;

/// Suffix of the controllers' StatefulSet and headless Service.
pub const CONTROLLER_SUFFIX: &str = "-controller";
/// Suffix of the brokers' StatefulSet and headless Service.
pub const BROKER_SUFFIX: &str = "-broker";
/// Suffix of the combined nodes' StatefulSet and headless Service.
pub const COMBINED_SUFFIX: &str = "-combined";

/// Suffixes of the Services not named after a StatefulSet, the per-broker external one with
/// the longest ordinal.
const SERVICE_SUFFIXES: &[&str] = &["-bootstrap", "-external-99"];

/// The longest name of a KafkaCluster: see the module's arithmetic.
pub const MAX_CLUSTER_NAME: usize = {
    let mut max = max_cluster_name(SERVICE_SUFFIXES);
    let pools = [CONTROLLER_SUFFIX, BROKER_SUFFIX, COMBINED_SUFFIX];
    let mut i = 0;
    while i < pools.len() {
        let room = MAX_STATEFULSET_NAME - pools[i].len();
        if room < max {
            max = room;
        }
        i += 1;
    }
    max
};

/// Value of the `app.kubernetes.io/name` label of every object and pod.
pub const APP_NAME: &str = "kafka";

/// The names of one cluster's objects. Each pool is its own StatefulSet with the shared
/// StatefulSet names ([`Names::pool`]): the pool's name (`<cluster>-broker`) takes the place
/// of the cluster's there, and its headless Service has the same name, so pod `k` of the
/// brokers is `<cluster>-broker-k`, reachable as `<cluster>-broker-k.<cluster>-broker.<ns>.svc`.
/// No two clusters share a pool name: no pool suffix ends another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The cluster's name.
    pub cluster: String,
    /// Its namespace.
    pub namespace: String,
    controllers: String,
    brokers: String,
    combined: String,
}

impl Names {
    /// The names of cluster `name` in `namespace`.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        let cluster = name.into();
        Names {
            controllers: format!("{cluster}{CONTROLLER_SUFFIX}"),
            brokers: format!("{cluster}{BROKER_SUFFIX}"),
            combined: format!("{cluster}{COMBINED_SUFFIX}"),
            cluster,
            namespace: namespace.into(),
        }
    }

    /// The StatefulSet (and headless Service and PodDisruptionBudget) of the pool of `role`.
    pub fn pool_name(&self, role: NodeRole) -> &str {
        match role {
            NodeRole::Controller => &self.controllers,
            NodeRole::Broker => &self.brokers,
            NodeRole::Combined => &self.combined,
        }
    }

    /// The shared StatefulSet names of the pool of `role`.
    pub fn pool(&self, role: NodeRole) -> set::Names<'_> {
        set::Names { cluster: self.pool_name(role), namespace: &self.namespace, app: APP_NAME, headless_suffix: "" }
    }

    /// The shared names of the cluster as a whole, for the objects no pool owns (the
    /// ConfigMap, the bootstrap and external Services): their metadata.
    pub fn cluster_set(&self) -> set::Names<'_> {
        set::Names { cluster: &self.cluster, namespace: &self.namespace, app: APP_NAME, headless_suffix: "" }
    }

    /// Pod `ordinal` of the pool of `role`.
    pub fn pod(&self, role: NodeRole, ordinal: u32) -> String {
        self.pool(role).pod(ordinal)
    }

    /// Stable DNS name of pod `ordinal` of the pool of `role` (through its headless Service).
    pub fn host(&self, role: NodeRole, ordinal: u32) -> String {
        self.pool(role).host(ordinal)
    }

    /// The ConfigMap with the nodes' properties and start script.
    pub fn config_map(&self) -> String {
        format!("{}-config", self.cluster)
    }

    /// The Service over every broker, which clients bootstrap from.
    pub fn bootstrap_service(&self) -> String {
        format!("{}-bootstrap", self.cluster)
    }

    /// `host:port` of the bootstrap Service on the internal listener `port`.
    pub fn bootstrap_address(&self, port: i32) -> String {
        format!("{}.{}.svc:{port}", self.bootstrap_service(), self.namespace)
    }

    /// The external listener's Service of broker `ordinal`.
    pub fn external_service(&self, ordinal: u32) -> String {
        format!("{}-external-{ordinal}", self.cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_statefulsets_behind_a_service_of_their_name() {
        let n = Names::new("events", "prod");
        assert_eq!(n.pool_name(NodeRole::Controller), "events-controller");
        assert_eq!(n.pod(NodeRole::Broker, 2), "events-broker-2");
        assert_eq!(n.host(NodeRole::Combined, 0), "events-combined-0.events-combined.prod.svc");
        assert_eq!(n.pool(NodeRole::Broker).headless_service(), "events-broker");
        assert_eq!(n.pool(NodeRole::Broker).statefulset(), "events-broker");
        assert_eq!(n.bootstrap_address(9092), "events-bootstrap.prod.svc:9092");
        assert_eq!(n.external_service(7), "events-external-7");
        assert_eq!(n.config_map(), "events-config");
        for (a, b) in
            [(CONTROLLER_SUFFIX, BROKER_SUFFIX), (BROKER_SUFFIX, COMBINED_SUFFIX), (CONTROLLER_SUFFIX, COMBINED_SUFFIX)]
        {
            assert!(!a.ends_with(b) && !b.ends_with(a), "{a} {b}");
        }
    }

    #[test]
    fn the_longest_name_fits_the_controllers_statefulset() {
        assert_eq!(MAX_CLUSTER_NAME, 41);
        let name = "k".repeat(MAX_CLUSTER_NAME);
        assert_eq!(format!("{name}{CONTROLLER_SUFFIX}").len(), MAX_STATEFULSET_NAME);
        assert_eq!(SERVICE_SUFFIXES[1], format!("-external-{}", crate::api::cluster::MAX_BROKERS - 1));
        assert!(format!("{name}{}", SERVICE_SUFFIXES[1]).len() <= 63);
    }
}
