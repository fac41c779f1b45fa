//! `MySQLUser`: one account on a cluster's servers, with its password from a Secret, its
//! grants and its resource limits, kept as declared by the operator.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An account on a MySQLCluster's servers: created on the primary (the replicas receive it
/// through replication), its password taken from a Secret the owner labelled for it, its
/// grants and limits kept as declared, and dropped when the resource is deleted unless
/// `deletionPolicy` is `Retain`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mysql.statecraft.io",
    version = "v1alpha1",
    kind = "MySQLUser",
    plural = "mysqlusers",
    singular = "mysqluser",
    shortname = "mysqlu",
    category = "statecraft",
    doc = "An account on a MySQLCluster's servers: created on the primary (the replicas receive it through replication), its password taken from a Secret the owner labelled for it, its grants and limits kept as declared, and dropped when the resource is deleted unless deletionPolicy is Retain.",
    namespaced,
    status = "MySQLUserStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Account","type":"string","jsonPath":".status.account"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.clusterName == oldSelf.clusterName", "fieldPath": ".clusterName", "message": "spec.clusterName is immutable: create another MySQLUser for another cluster"},
    {
        "rule": "has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name) && self.host == oldSelf.host",
        "message": "spec.name and spec.host are immutable: they name the account; create another MySQLUser instead"
    },
    {
        "fieldPath": ".grants",
        "rule": "self.grants.all(g, self.grants.exists_one(h, h.database == g.database && h.table == g.table))",
        "message": "spec.grants: each database and table may appear in one grant only"
    }
]))]
pub struct MySQLUserSpec {
    /// The MySQLCluster, in this namespace, whose servers get the account.
    #[schemars(length(min = 1, max = 253))]
    pub cluster_name: String,

    /// The account's user name. Unset: the resource's name. The operator's own accounts
    /// (`statecraft`, `repl`, `root`, `backup`, `exporter`) and the server's (`mariadb.sys`,
    /// `mysql`, `PUBLIC`) are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80), pattern(r"^[A-Za-z0-9_.$-]+$"))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "!(self in ['statecraft', 'repl', 'root', 'backup', 'exporter', 'mariadb.sys', 'mysql', 'PUBLIC'])",
        "message": "spec.name: the operator and the server keep this account for themselves"
    }]))]
    pub name: Option<String>,

    /// The hosts the account may connect from, as the server matches them: `%` any host, an
    /// address, or a pattern such as `10.0.%`. The servers do not resolve names
    /// (`skip_name_resolve`), so host names never match.
    #[serde(default = "any_host")]
    #[schemars(length(min = 1, max = 255), pattern(r"^[A-Za-z0-9_.%:/-]+$"))]
    pub host: String,

    /// The Secret (in this namespace) and key holding the password. The Secret must be
    /// labelled `mysql.statecraft.io/user-password: "true"`: the operator reads only Secrets
    /// whose owner opted in. A changed password is applied at the next check (every minute).
    pub password_secret_ref: PasswordSecretRef,

    /// What the account may do: one entry per database (or table), none for an account
    /// that may only log in. Grants the account has and the list does not are revoked.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub grants: Vec<Grant>,

    /// Limits on the account's use of the servers (0: no limit).
    #[serde(default, skip_serializing_if = "Limits::is_unset")]
    pub limits: Limits,

    /// What deleting this resource does to the account: `Delete` (the default) drops it,
    /// `Retain` leaves it on the servers as it is.
    #[serde(default = "DeletionPolicy::delete")]
    pub deletion_policy: DeletionPolicy,
}

fn any_host() -> String {
    "%".into()
}

/// Where a password is read from.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordSecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key of the password in the Secret.
    #[serde(default = "password_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn password_key() -> String {
    "password".into()
}

/// Privileges on one database, one table, or every database (`*`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.database != '*' || self.table == '*'", "fieldPath": ".table", "message": "spec.grants[].table needs a database: a table of every database cannot be granted"},
    {
        "fieldPath": ".privileges",
        "rule": "self.table == '*' || self.privileges.all(p, p in ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'CREATE', 'DROP', 'REFERENCES', 'INDEX', 'ALTER', 'CREATE VIEW', 'SHOW VIEW', 'TRIGGER'])",
        "message": "spec.grants[].privileges: only SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, REFERENCES, INDEX, ALTER, CREATE VIEW, SHOW VIEW and TRIGGER can be granted on a single table"
    },
    {
        "fieldPath": ".privileges",
        "rule": "self.database == '*' || !self.privileges.exists(p, p in ['PROCESS', 'SHOW DATABASES'])",
        "message": "spec.grants[].privileges: PROCESS and SHOW DATABASES are granted on every database only (database: \"*\")"
    }
]))]
pub struct Grant {
    /// The privileges, e.g. `[SELECT, INSERT, UPDATE, DELETE]`. Those that would let an
    /// account write to a read-only replica or act on replication (SUPER, READ_ONLY ADMIN,
    /// BINLOG ADMIN, RELOAD, ...) cannot be granted here.
    #[schemars(length(min = 1, max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub privileges: Vec<Privilege>,

    /// The database, or `*` for every database (privileges on the whole server).
    #[schemars(length(min = 1, max = 64), pattern(r"^(\*|[A-Za-z0-9_$-]+)$"))]
    pub database: String,

    /// A table of the database, or `*` (the default) for every table in it.
    #[serde(default = "every_table")]
    #[schemars(length(min = 1, max = 64), pattern(r"^(\*|[A-Za-z0-9_$-]+)$"))]
    pub table: String,

    /// Whether the account may pass these privileges on to other accounts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grant_option: bool,
}

fn every_table() -> String {
    "*".into()
}

/// A privilege a MySQLUser may hold, as the server names it.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
pub enum Privilege {
    #[serde(rename = "SELECT")]
    Select,
    #[serde(rename = "INSERT")]
    Insert,
    #[serde(rename = "UPDATE")]
    Update,
    #[serde(rename = "DELETE")]
    Delete,
    #[serde(rename = "CREATE")]
    Create,
    #[serde(rename = "DROP")]
    Drop,
    #[serde(rename = "REFERENCES")]
    References,
    #[serde(rename = "INDEX")]
    Index,
    #[serde(rename = "ALTER")]
    Alter,
    #[serde(rename = "CREATE TEMPORARY TABLES")]
    CreateTemporaryTables,
    #[serde(rename = "LOCK TABLES")]
    LockTables,
    #[serde(rename = "EXECUTE")]
    Execute,
    #[serde(rename = "CREATE VIEW")]
    CreateView,
    #[serde(rename = "SHOW VIEW")]
    ShowView,
    #[serde(rename = "CREATE ROUTINE")]
    CreateRoutine,
    #[serde(rename = "ALTER ROUTINE")]
    AlterRoutine,
    #[serde(rename = "EVENT")]
    Event,
    #[serde(rename = "TRIGGER")]
    Trigger,
    #[serde(rename = "PROCESS")]
    Process,
    #[serde(rename = "SHOW DATABASES")]
    ShowDatabases,
}

impl Privilege {
    /// The name the server uses (in GRANT and in `information_schema`).
    pub fn as_sql(self) -> &'static str {
        use Privilege::*;
        match self {
            Select => "SELECT",
            Insert => "INSERT",
            Update => "UPDATE",
            Delete => "DELETE",
            Create => "CREATE",
            Drop => "DROP",
            References => "REFERENCES",
            Index => "INDEX",
            Alter => "ALTER",
            CreateTemporaryTables => "CREATE TEMPORARY TABLES",
            LockTables => "LOCK TABLES",
            Execute => "EXECUTE",
            CreateView => "CREATE VIEW",
            ShowView => "SHOW VIEW",
            CreateRoutine => "CREATE ROUTINE",
            AlterRoutine => "ALTER ROUTINE",
            Event => "EVENT",
            Trigger => "TRIGGER",
            Process => "PROCESS",
            ShowDatabases => "SHOW DATABASES",
        }
    }
}

/// Limits on an account (the server's `WITH MAX_...` options; 0 or unset: no limit).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Connections the account may hold at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100000))]
    pub max_user_connections: Option<u32>,
    /// Statements the account may run per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000000))]
    pub max_queries_per_hour: Option<u32>,
    /// Statements that change data the account may run per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000000))]
    pub max_updates_per_hour: Option<u32>,
    /// Connections the account may open per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000000))]
    pub max_connections_per_hour: Option<u32>,
}

impl Limits {
    fn is_unset(&self) -> bool {
        *self == Limits::default()
    }
}

/// What deleting a MySQLUser or MySQLDatabase does on the servers.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Drop the account (or database).
    Delete,
    /// Leave it on the servers.
    Retain,
}

impl DeletionPolicy {
    fn delete() -> Self {
        DeletionPolicy::Delete
    }

    pub(crate) fn retain() -> Self {
        DeletionPolicy::Retain
    }
}

/// Observed state of a MySQLUser.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MySQLUserStatus {
    /// The account, as the server names it (`'name'@'host'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The `resourceVersion` of the password Secret whose password the account was last
    /// given: a Secret with another version is applied again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_version: Option<String>,
    /// The generation of the spec last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the account is on the primary as declared; otherwise the reason says what
    /// is waited for or refused.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
