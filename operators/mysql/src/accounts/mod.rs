//! Declared accounts and databases (`MySQLUser`, `MySQLDatabase`): what the server should
//! hold, what it holds, and the statements between the two.
//!
//! Pure: [`plan_user`] and [`plan_database`] compare a declaration with an observation
//! ([`server`] reads it) and return only the statements that change something. A resource
//! that is already as declared sends nothing, so a periodic check writes nothing to the
//! binary log (no GTID, nothing to replicate).
//!
//! Everything is applied on the primary as `root`, an account without the right to write
//! to a read-only server: if the primary moved between finding it and applying, the old
//! one refuses every statement (`--read-only`) instead of taking a transaction the others
//! lack.

pub mod server;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::user::{Grant, Limits};
use crate::flavor::{BACKUP_USER, EXPORTER_USER, OPERATOR_USER, REPLICATION_USER, ROOT_USER, SecretSql, quote};

/// The accounts the operator and the server keep for themselves: never declared, dropped
/// or carried by a backup.
/// (The CRD's CEL rule on `spec.name` lists the same names; a test compares them.)
pub const RESERVED_USERS: [&str; 9] =
    [OPERATOR_USER, REPLICATION_USER, ROOT_USER, BACKUP_USER, EXPORTER_USER, "mariadb.sys", "mysql", "PUBLIC", ""];

/// The server's own schemas, never declared or dropped.
pub const RESERVED_DATABASES: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

/// An account: user name and host pattern.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Account {
    /// User name.
    pub user: String,
    /// Host pattern.
    pub host: String,
}

impl Account {
    /// `user@host`.
    pub fn new(user: impl Into<String>, host: impl Into<String>) -> Self {
        Account { user: user.into(), host: host.into() }
    }

    /// Whether the operator or the server keeps this account for itself.
    pub fn is_reserved(&self) -> bool {
        RESERVED_USERS.contains(&self.user.as_str())
    }
}

/// As the server writes it in SQL and in `information_schema` (`'user'@'host'`).
impl fmt::Display for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", quote(&self.user), quote(&self.host))
    }
}

/// Quotes an identifier (database, table) with backticks.
pub fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// What a grant applies to, as the server stores it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `*.*`: the whole server.
    Global,
    /// `db.*`, by the pattern the server matches database names with (`_` and `%` are
    /// wildcards there, so a declared name is escaped: see [`Scope::database`]).
    Database(String),
    /// `db.table` (no wildcards).
    Table(String, String),
}

impl Scope {
    /// The scope of exactly database `name`: its `_` escaped, so that `my_app` does not
    /// also grant on `myXapp`.
    pub fn database(name: &str) -> Self {
        Scope::Database(name.replace('\\', "\\\\").replace('_', "\\_").replace('%', "\\%"))
    }

    /// The scope of a declared grant.
    pub fn of(grant: &Grant) -> Self {
        match (grant.database.as_str(), grant.table.as_str()) {
            ("*", _) => Scope::Global,
            (db, "*") => Scope::database(db),
            (db, table) => Scope::Table(db.to_string(), table.to_string()),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Global => f.write_str("*.*"),
            Scope::Database(pattern) => write!(f, "{}.*", identifier(pattern)),
            Scope::Table(db, table) => write!(f, "{}.{}", identifier(db), identifier(table)),
        }
    }
}

/// The privileges on one scope, and whether they may be passed on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Privileges {
    /// Privilege names as the server writes them (`SELECT`, `LOCK TABLES`).
    pub names: BTreeSet<String>,
    /// WITH GRANT OPTION.
    pub grant_option: bool,
}

/// Privileges by scope.
pub type GrantMap = BTreeMap<Scope, Privileges>;

/// The grants a list of declared grants asks for.
pub fn desired_grants(grants: &[Grant]) -> GrantMap {
    let mut map = GrantMap::new();
    for g in grants {
        let entry = map.entry(Scope::of(g)).or_default();
        entry.names.extend(g.privileges.iter().map(|p| p.as_sql().to_string()));
        entry.grant_option |= g.grant_option;
    }
    map
}

/// The four limits, 0 meaning none, in the order of [`limits_clause`].
pub fn limit_values(limits: &Limits) -> [u64; 4] {
    [
        limits.max_user_connections,
        limits.max_queries_per_hour,
        limits.max_updates_per_hour,
        limits.max_connections_per_hour,
    ]
    .map(|v| u64::from(v.unwrap_or(0)))
}

/// `WITH MAX_USER_CONNECTIONS .. MAX_QUERIES_PER_HOUR .. ...`.
fn limits_clause(values: [u64; 4]) -> String {
    let [conns, queries, updates, conns_per_hour] = values;
    format!(
        "WITH MAX_USER_CONNECTIONS {conns} MAX_QUERIES_PER_HOUR {queries} MAX_UPDATES_PER_HOUR {updates} \
         MAX_CONNECTIONS_PER_HOUR {conns_per_hour}"
    )
}

/// What the server holds of one account.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedUser {
    /// The limits, in the order of [`limit_values`].
    pub limits: [u64; 4],
    /// Its privileges (not `USAGE`, which every account has).
    pub grants: GrantMap,
}

/// What a MySQLUser asks for.
#[derive(Clone, PartialEq, Eq)]
pub struct DesiredUser {
    /// The account.
    pub account: Account,
    /// Its password.
    pub password: String,
    /// Whether the password must be set even on an existing account (its Secret changed
    /// since it was last set).
    pub password_changed: bool,
    /// Limits, as [`limit_values`].
    pub limits: [u64; 4],
    /// Grants, as [`desired_grants`].
    pub grants: GrantMap,
}

impl fmt::Debug for DesiredUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DesiredUser")
            .field("account", &self.account)
            .field("password", &"<redacted>")
            .field("password_changed", &self.password_changed)
            .field("limits", &self.limits)
            .field("grants", &self.grants)
            .finish()
    }
}

/// The statements that bring the account from `observed` (`None`: it does not exist) to
/// `desired`, in order: create it or set its password, its limits, new grants before
/// revoking old ones (a changed grant never leaves the account with less than both). Empty
/// when it is as declared.
pub fn plan_user(desired: &DesiredUser, observed: Option<&ObservedUser>) -> Vec<SecretSql> {
    let a = &desired.account;
    let mut out = Vec::new();
    let empty = ObservedUser::default();
    let observed = match observed {
        None => {
            out.push(SecretSql::new(format!(
                "CREATE USER IF NOT EXISTS {a} IDENTIFIED BY {} {}",
                quote(&desired.password),
                limits_clause(desired.limits)
            )));
            // IF NOT EXISTS: another client may have created it since it was observed; the
            // password and limits are then set by the ALTER below.
            out.push(SecretSql::new(format!(
                "ALTER USER {a} IDENTIFIED BY {} {}",
                quote(&desired.password),
                limits_clause(desired.limits)
            )));
            &empty
        }
        Some(o) => {
            if desired.password_changed {
                out.push(SecretSql::new(format!("ALTER USER {a} IDENTIFIED BY {}", quote(&desired.password))));
            }
            if o.limits != desired.limits {
                out.push(SecretSql::new(format!("ALTER USER {a} {}", limits_clause(desired.limits))));
            }
            o
        }
    };
    out.extend(plan_grants(&desired.grants, &observed.grants).iter().map(|c| SecretSql::new(c.sql(a))));
    out
}

/// One change to an account's privileges on one scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantChange {
    /// GRANT `names` (WITH GRANT OPTION if `grant_option`).
    Grant { scope: Scope, names: Vec<String>, grant_option: bool },
    /// REVOKE `names`.
    Revoke { scope: Scope, names: Vec<String> },
    /// REVOKE GRANT OPTION.
    RevokeGrantOption { scope: Scope },
}

impl GrantChange {
    /// The statement for `account` (no secret in it).
    pub fn sql(&self, account: &Account) -> String {
        match self {
            GrantChange::Grant { scope, names, grant_option } => {
                let option = if *grant_option { " WITH GRANT OPTION" } else { "" };
                format!("GRANT {} ON {scope} TO {account}{option}", names.join(", "))
            }
            GrantChange::Revoke { scope, names } => format!("REVOKE {} ON {scope} FROM {account}", names.join(", ")),
            GrantChange::RevokeGrantOption { scope } => format!("REVOKE GRANT OPTION ON {scope} FROM {account}"),
        }
    }
}

/// The changes from `observed` to `desired`: every GRANT before any REVOKE.
pub fn plan_grants(desired: &GrantMap, observed: &GrantMap) -> Vec<GrantChange> {
    let none = Privileges::default();
    let mut grants = Vec::new();
    let mut revokes = Vec::new();
    let scopes: BTreeSet<&Scope> = desired.keys().chain(observed.keys()).collect();
    for scope in scopes {
        let want = desired.get(scope).unwrap_or(&none);
        let have = observed.get(scope).unwrap_or(&none);
        let missing: Vec<String> = want.names.difference(&have.names).cloned().collect();
        let option_missing = want.grant_option && !have.grant_option;
        if !missing.is_empty() || option_missing {
            // Granting what it already has changes nothing: with only the option missing,
            // every wanted privilege is named again.
            let names = if missing.is_empty() { want.names.iter().cloned().collect() } else { missing };
            grants.push(GrantChange::Grant { scope: scope.clone(), names, grant_option: want.grant_option });
        }
        let extra: Vec<String> = have.names.difference(&want.names).cloned().collect();
        if !extra.is_empty() {
            revokes.push(GrantChange::Revoke { scope: scope.clone(), names: extra });
        }
        if have.grant_option && !want.grant_option {
            revokes.push(GrantChange::RevokeGrantOption { scope: scope.clone() });
        }
    }
    grants.extend(revokes);
    grants
}

/// What the server holds of one database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedDatabase {
    /// Default character set.
    pub character_set: String,
    /// Default collation.
    pub collation: String,
}

/// What a MySQLDatabase asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredDatabase {
    /// Its name.
    pub name: String,
    /// Default character set.
    pub character_set: String,
    /// Default collation; `None`: the character set's default, whichever it is.
    pub collation: Option<String>,
}

/// The statement that creates the database or changes its defaults, if any is needed.
/// Changing the defaults converts no table: existing tables keep their character set.
pub fn plan_database(desired: &DesiredDatabase, observed: Option<&ObservedDatabase>) -> Option<String> {
    let mut options = format!("CHARACTER SET {}", desired.character_set);
    if let Some(c) = &desired.collation {
        options.push_str(&format!(" COLLATE {c}"));
    }
    let name = identifier(&desired.name);
    match observed {
        None => Some(format!("CREATE DATABASE IF NOT EXISTS {name} {options}")),
        Some(o) => {
            let same_charset = o.character_set.eq_ignore_ascii_case(&desired.character_set);
            let same_collation = desired.collation.as_ref().is_none_or(|c| o.collation.eq_ignore_ascii_case(c));
            (!same_charset || !same_collation).then(|| format!("ALTER DATABASE {name} {options}"))
        }
    }
}

#[cfg(test)]
mod tests;
