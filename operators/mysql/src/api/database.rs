//! `MySQLDatabase`: one database (schema) on a cluster's servers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::user::DeletionPolicy;

/// A database on a MySQLCluster's servers: created on the primary with its character set
/// and collation (the replicas receive it through replication) and kept so. Deleting the
/// resource leaves the database and its data in place unless `deletionPolicy` is `Delete`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mysql.statecraft.io",
    version = "v1alpha1",
    kind = "MySQLDatabase",
    plural = "mysqldatabases",
    singular = "mysqldatabase",
    shortname = "mysqldb",
    category = "statecraft",
    doc = "A database on a MySQLCluster's servers: created on the primary with its character set and collation (the replicas receive it through replication) and kept so. Deleting the resource leaves the database and its data in place unless deletionPolicy is Delete.",
    namespaced,
    status = "MySQLDatabaseStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Database","type":"string","jsonPath":".status.database"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.clusterName == oldSelf.clusterName", "fieldPath": ".clusterName", "message": "spec.clusterName is immutable: create another MySQLDatabase for another cluster"},
    {
        "rule": "has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)",
        "message": "spec.name is immutable: a database cannot be renamed; create another MySQLDatabase instead"
    }
]))]
pub struct MySQLDatabaseSpec {
    /// The MySQLCluster, in this namespace, whose servers get the database.
    #[schemars(length(min = 1, max = 253))]
    pub cluster_name: String,

    /// The database's name. Unset: the resource's name. The server's own schemas (`mysql`,
    /// `information_schema`, `performance_schema`, `sys`) are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z0-9_$-]+$"))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "!(self.lowerAscii() in ['mysql', 'information_schema', 'performance_schema', 'sys'])",
        "message": "spec.name: the server keeps this schema for itself"
    }]))]
    pub name: Option<String>,

    /// The database's default character set, for tables created without one.
    #[serde(default = "utf8mb4")]
    #[schemars(length(min = 1, max = 32), pattern(r"^[a-z0-9_]+$"))]
    pub character_set: String,

    /// The database's default collation. Unset: the character set's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), pattern(r"^[a-z0-9_]+$"))]
    pub collation: Option<String>,

    /// What deleting this resource does to the database: `Retain` (the default) keeps it
    /// and its data; `Delete` drops it with every table in it.
    #[serde(default = "DeletionPolicy::retain")]
    pub deletion_policy: DeletionPolicy,
}

fn utf8mb4() -> String {
    "utf8mb4".into()
}

/// Observed state of a MySQLDatabase.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLDatabaseStatus {
    /// The database's name on the servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The generation of the spec last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the database is on the primary as declared; otherwise the reason says what
    /// is waited for or refused.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
