//! Names of a StatefulSet cluster's objects and pods, and the labels that select its pods.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Label naming the application of every object and pod.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label naming the cluster (the Applier sets the same key on the objects themselves).
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Name of the data volume claim template: the StatefulSet names each pod's claim
/// `data-<pod>`.
pub const DATA_VOLUME: &str = "data";

/// The names of one cluster's objects, borrowed from the operator's own names type, which
/// adds the names only its system has (client Services, Secrets, URLs). The StatefulSet and
/// the PodDisruptionBudget carry the cluster's name; pod `k` is `<cluster>-k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names<'a> {
    /// The cluster's name.
    pub cluster: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Value of [`NAME_LABEL`] on every object and pod: which operator's cluster it is.
    pub app: &'static str,
    /// Suffix of the headless Service's name (`<cluster><suffix>`).
    pub headless_suffix: &'static str,
}

impl Names<'_> {
    /// The StatefulSet.
    pub fn statefulset(&self) -> String {
        self.cluster.to_string()
    }
    /// The PodDisruptionBudget.
    pub fn pdb(&self) -> String {
        self.cluster.to_string()
    }
    /// The headless Service that gives each pod a stable DNS name.
    pub fn headless_service(&self) -> String {
        format!("{}{}", self.cluster, self.headless_suffix)
    }
    /// Pod of `ordinal`.
    pub fn pod(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}", self.cluster)
    }
    /// The data PersistentVolumeClaim of `ordinal` (StatefulSet naming: template-pod).
    pub fn data_claim(&self, ordinal: u32) -> String {
        format!("{DATA_VOLUME}-{}", self.pod(ordinal))
    }
    /// Stable DNS name of the pod of `ordinal` (through the headless Service).
    pub fn host(&self, ordinal: u32) -> String {
        format!("{}.{}.{}.svc", self.pod(ordinal), self.headless_service(), self.namespace)
    }
    /// Labels that select every pod of the cluster (the StatefulSet's selector), also set
    /// on every object the cluster owns.
    pub fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (NAME_LABEL.to_string(), self.app.to_string()),
            (INSTANCE_LABEL.to_string(), self.cluster.to_string()),
        ])
    }
    /// [`Names::selector`] as a label selector query (`k=v,k=v`): what a list call takes and
    /// what the scale subresource reports.
    pub fn selector_query(&self) -> String {
        label_query(&self.selector())
    }
    /// Metadata of the cluster's object `name`: its namespace and the cluster's labels. The
    /// Applier adds the owner reference and the managed-by label.
    pub fn meta(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.to_string()),
            labels: Some(self.selector()),
            ..Default::default()
        }
    }
}

/// `labels` as an equality-based label selector query, `k=v,k=v`.
pub fn label_query(labels: &BTreeMap<String, String>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The ordinal of pod (or member) `name` of cluster `cluster` (`<cluster>-<ordinal>`);
/// `None` for any other name, e.g. a pod of a cluster whose name merely starts the same.
pub fn ordinal_of(cluster: &str, name: &str) -> Option<u32> {
    name.strip_prefix(cluster)?.strip_prefix('-')?.parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn names() -> Names<'static> {
        Names { cluster: "db", namespace: "prod", app: "mysql", headless_suffix: "-hl" }
    }

    #[test]
    fn names_follow_the_cluster_name() {
        let n = names();
        assert_eq!(n.statefulset(), "db");
        assert_eq!(n.pdb(), "db");
        assert_eq!(n.headless_service(), "db-hl");
        assert_eq!(n.pod(2), "db-2");
        assert_eq!(n.data_claim(2), "data-db-2");
        assert_eq!(n.host(0), "db-0.db-hl.prod.svc");
        assert_eq!(n.selector()[NAME_LABEL], "mysql");
        assert_eq!(n.selector()[INSTANCE_LABEL], "db");
        assert_eq!(n.selector().len(), 2);
    }

    #[test]
    fn owned_metadata_carries_the_cluster_labels() {
        let m = names().meta("db-config".into());
        assert_eq!(m.name.as_deref(), Some("db-config"));
        assert_eq!(m.namespace.as_deref(), Some("prod"));
        assert_eq!(m.labels, Some(names().selector()));
        assert!(m.owner_references.is_none(), "the Applier sets it");
    }

    #[test]
    fn ordinals_come_only_from_the_clusters_own_pods() {
        assert_eq!(ordinal_of("db", "db-2"), Some(2));
        assert_eq!(ordinal_of("my-db", "my-db-10"), Some(10));
        assert_eq!(ordinal_of("db", "db-primary"), None);
        assert_eq!(ordinal_of("db", "other-db-1"), None);
        assert_eq!(ordinal_of("db", "dbx-1"), None);
        assert_eq!(ordinal_of("db", "db"), None);
        assert_eq!(ordinal_of("db-1", "db-1-0"), Some(0));
        assert_eq!(ordinal_of("db", "db-1-0"), None);
    }
}
