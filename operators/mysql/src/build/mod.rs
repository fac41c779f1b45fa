//! Pure builders of the objects a MySQLCluster owns, from a validated spec and the
//! cluster's name and namespace. The controller applies them with the shared `Applier`,
//! which adds the managed-by and instance labels and the owner reference.

pub mod config;
pub mod jobs;
pub mod pdb;
pub mod secret;
pub mod services;
pub mod statefulset;
pub mod tuning;

use std::collections::BTreeMap;

/// The port every server listens on.
pub const MYSQL_PORT: i32 = 3306;

/// Label with the role the clustering task gives each pod: `primary` or `replica`. Pods
/// without it (new, unreachable, errant) receive no client traffic.
pub const ROLE_LABEL: &str = "mysql.statecraft.io/role";
/// Value of [`ROLE_LABEL`] on the primary.
pub const ROLE_PRIMARY: &str = "primary";
/// Value of [`ROLE_LABEL`] on a healthy replica.
pub const ROLE_REPLICA: &str = "replica";

/// Label naming the application of every object and pod.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label naming the cluster (the Applier sets the same key on the objects themselves).
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Value of [`NAME_LABEL`].
pub const APP_NAME: &str = "mysql";

/// Suffix of the headless Service's name.
const HEADLESS_SUFFIX: &str = "-hl";
/// Suffix of the read-write Service's name.
const READ_WRITE_SUFFIX: &str = "-primary";
/// Suffix of the read-only Service's name.
const READ_ONLY_SUFFIX: &str = "-replicas";

/// The longest cluster name whose StatefulSet (the cluster's name) gets pods and whose
/// Services (`<name>-replicas` the longest) are valid names.
pub const MAX_CLUSTER_NAME: usize =
    statecraft_shared::names::max_cluster_name(&[HEADLESS_SUFFIX, READ_WRITE_SUFFIX, READ_ONLY_SUFFIX]);

/// Names of a cluster's objects.
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
    /// The StatefulSet.
    pub fn statefulset(&self) -> String {
        self.cluster.clone()
    }
    /// The headless Service that gives each pod a stable DNS name.
    pub fn headless_service(&self) -> String {
        format!("{}{HEADLESS_SUFFIX}", self.cluster)
    }
    /// The read-write Service (the primary).
    pub fn read_write_service(&self) -> String {
        format!("{}{READ_WRITE_SUFFIX}", self.cluster)
    }
    /// The read-only Service (ready replicas).
    pub fn read_only_service(&self) -> String {
        format!("{}{READ_ONLY_SUFFIX}", self.cluster)
    }
    /// The ConfigMap with my.cnf and the container scripts.
    pub fn config_map(&self) -> String {
        format!("{}-config", self.cluster)
    }
    /// The Secret with the generated passwords.
    pub fn secret(&self) -> String {
        format!("{}-passwords", self.cluster)
    }
    /// The PodDisruptionBudget.
    pub fn pdb(&self) -> String {
        self.cluster.clone()
    }
    /// Pod of `ordinal`.
    pub fn pod(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}", self.cluster)
    }
    /// The data PersistentVolumeClaim of `ordinal` (StatefulSet naming: template-pod).
    pub fn data_claim(&self, ordinal: u32) -> String {
        format!("{}-{}", statefulset::DATA_VOLUME, self.pod(ordinal))
    }
    /// Stable DNS name of the pod of `ordinal`.
    pub fn pod_host(&self, ordinal: u32) -> String {
        format!("{}.{}.{}.svc", self.pod(ordinal), self.headless_service(), self.namespace)
    }
    /// Labels that select every pod of the cluster (the StatefulSet's selector).
    pub fn selector_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (NAME_LABEL.to_string(), APP_NAME.to_string()),
            (INSTANCE_LABEL.to_string(), self.cluster.clone()),
        ])
    }
    /// Labels that select the pods of one role.
    pub fn role_selector(&self, role: &str) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels();
        labels.insert(ROLE_LABEL.to_string(), role.to_string());
        labels
    }
}

/// The ordinal of pod `pod` of cluster `cluster` (`<cluster>-<ordinal>`); `None` for any
/// other name, e.g. a pod of a cluster whose name merely starts the same.
pub fn ordinal_of(cluster: &str, pod: &str) -> Option<u32> {
    let (prefix, ordinal) = pod.rsplit_once('-')?;
    (prefix == cluster).then(|| ordinal.parse().ok()).flatten()
}

/// A stable 64-bit FNV-1a hash, hex, for annotations that change when content changes.
pub fn content_hash(content: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in content.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_cluster_name() {
        let n = Names::new("db", "prod");
        assert_eq!(n.statefulset(), "db");
        assert_eq!(n.headless_service(), "db-hl");
        assert_eq!(n.read_write_service(), "db-primary");
        assert_eq!(n.read_only_service(), "db-replicas");
        assert_eq!(n.config_map(), "db-config");
        assert_eq!(n.secret(), "db-passwords");
        assert_eq!(n.pod(2), "db-2");
        assert_eq!(n.data_claim(2), "data-db-2");
        assert_eq!(n.pod_host(0), "db-0.db-hl.prod.svc");
        assert_eq!(n.role_selector(ROLE_PRIMARY)[ROLE_LABEL], "primary");
        assert_eq!(n.role_selector(ROLE_PRIMARY).len(), 3);
    }

    #[test]
    fn ordinals_come_only_from_the_clusters_own_pods() {
        assert_eq!(ordinal_of("db", "db-2"), Some(2));
        assert_eq!(ordinal_of("my-db", "my-db-10"), Some(10));
        assert_eq!(ordinal_of("db", "db-primary"), None);
        assert_eq!(ordinal_of("db", "other-db-1"), None);
        assert_eq!(ordinal_of("db", "db"), None);
    }

    #[test]
    fn content_hash_is_stable_and_sensitive() {
        assert_eq!(content_hash(""), "cbf29ce484222325");
        assert_eq!(content_hash("a"), content_hash("a"));
        assert_ne!(content_hash("a"), content_hash("b"));
    }
}
