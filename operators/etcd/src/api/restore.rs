//! `EtcdRestore`: creates a new cluster from a snapshot.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use statecraft_shared::backup::{RestoreSource, RestoreStatus};

use super::cluster::EtcdClusterSpec;

/// Creates a new EtcdCluster whose data comes from a snapshot: its first member is
/// restored with `etcdutl snapshot restore`, the others join it as learners. Existing
/// clusters are never overwritten.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "etcd.statecraft.io",
    version = "v1alpha1",
    kind = "EtcdRestore",
    plural = "etcdrestores",
    singular = "etcdrestore",
    shortname = "etcdrs",
    category = "statecraft",
    doc = "Creates a new EtcdCluster whose data comes from a snapshot. Existing clusters are never overwritten.",
    namespaced,
    status = "EtcdRestoreStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.target.name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "spec of an EtcdRestore is immutable: create a new restore instead"},
    {
        "rule": "has(self.backupName) != has(self.location)",
        "message": "exactly one of spec.backupName and spec.location must be set"
    }
]))]
pub struct EtcdRestoreSpec {
    /// The snapshot to restore (backupName or location), as every restore resource names it.
    #[serde(flatten)]
    pub source: RestoreSource,

    /// The cluster to create.
    pub target: RestoreTarget,
}

/// The new cluster a restore creates.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreTarget {
    /// Name of the EtcdCluster to create; the restore fails if it already exists.
    /// At most 52 characters, a DNS-1035 label: it names the cluster's StatefulSet and Services.
    #[schemars(
        length(min = 1, max = crate::build::MAX_CLUSTER_NAME),
        pattern(statecraft_shared::names::DNS_1035_LABEL)
    )]
    pub name: String,

    /// Spec of the EtcdCluster to create (its bootstrapFrom is set by the restore).
    pub spec: EtcdClusterSpec,
}

/// Observed state of an EtcdRestore: the status every restore reports.
pub type EtcdRestoreStatus = RestoreStatus;
