//! Reading accounts and databases from a server and applying plans to it, over
//! `mysql_async`; and the accounts section a backup carries. Every call has a deadline.

use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use super::{Account, GrantMap, ObservedDatabase, ObservedUser, Scope, identifier};
use crate::clustering::dataplane::{ClientTls, DataPlaneError, Endpoint, connect_as};
use crate::flavor::SecretSql;

/// Deadline of one observation or one plan's statements.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to one server as one account, for a few statements.
pub struct Session {
    conn: Conn,
    endpoint: String,
}

impl Session {
    /// Connects to `ep` as `user`, over TLS when `tls` says how.
    pub async fn connect(
        ep: &Endpoint,
        user: &str,
        password: &str,
        tls: Option<&ClientTls>,
    ) -> Result<Self, DataPlaneError> {
        Ok(Session { conn: connect_as(ep, user, password, tls).await?, endpoint: ep.to_string() })
    }

    async fn within<T>(
        &mut self,
        work: impl AsyncFnOnce(&mut Conn) -> Result<T, mysql_async::Error>,
    ) -> Result<T, DataPlaneError> {
        let endpoint = self.endpoint.clone();
        match tokio::time::timeout(TIMEOUT, work(&mut self.conn)).await {
            Ok(r) => r.map_err(|source| DataPlaneError::Sql { endpoint, source }),
            Err(_) => Err(DataPlaneError::Timeout { endpoint, timeout: TIMEOUT }),
        }
    }

    /// The account's limits and privileges; `None` if it does not exist.
    pub async fn observe_user(&mut self, account: &Account) -> Result<Option<ObservedUser>, DataPlaneError> {
        let grantee = account.to_string();
        let (user, host) = (account.user.clone(), account.host.clone());
        self.within(async move |conn| {
            let limits: Option<(u64, u64, u64, u64)> = conn
                .exec_first(
                    "SELECT max_user_connections, max_questions, max_updates, max_connections \
                     FROM mysql.user WHERE User = ? AND Host = ?",
                    (user, host),
                )
                .await?;
            let Some((a, b, c, d)) = limits else { return Ok(None) };
            let rows: Vec<(String, String, String, String, String)> = conn
                .exec(
                    "SELECT 'global', '', '', PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES \
                     WHERE GRANTEE = ? \
                     UNION ALL SELECT 'database', TABLE_SCHEMA, '', PRIVILEGE_TYPE, IS_GRANTABLE \
                     FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? \
                     UNION ALL SELECT 'table', TABLE_SCHEMA, TABLE_NAME, PRIVILEGE_TYPE, IS_GRANTABLE \
                     FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ?",
                    (&grantee, &grantee, &grantee),
                )
                .await?;
            Ok(Some(ObservedUser { limits: [a, b, c, d], grants: grant_map(rows) }))
        })
        .await
    }

    /// The database's defaults; `None` if it does not exist.
    pub async fn observe_database(&mut self, name: &str) -> Result<Option<ObservedDatabase>, DataPlaneError> {
        let name = name.to_string();
        let row: Option<(String, String)> = self
            .within(async move |conn| {
                conn.exec_first(
                    "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA \
                     WHERE SCHEMA_NAME = ?",
                    (name,),
                )
                .await
            })
            .await?;
        Ok(row.map(|(character_set, collation)| ObservedDatabase { character_set, collation }))
    }

    /// Runs `statements` in order; the first failure stops them (each is idempotent, so the
    /// next pass plans the rest again).
    pub async fn apply(&mut self, statements: &[SecretSql]) -> Result<(), DataPlaneError> {
        let statements = statements.to_vec();
        self.within(async move |conn| {
            for s in &statements {
                conn.query_drop(s.expose()).await?;
            }
            Ok(())
        })
        .await
    }

    /// Runs one statement without a secret in it (a database's plan).
    pub async fn execute(&mut self, statement: &str) -> Result<(), DataPlaneError> {
        let statement = statement.to_string();
        self.within(async move |conn| conn.query_drop(statement).await).await
    }

    /// Drops the account, if it exists.
    pub async fn drop_user(&mut self, account: &Account) -> Result<(), DataPlaneError> {
        self.execute(&format!("DROP USER IF EXISTS {account}")).await
    }

    /// Drops the database and every table in it, if it exists.
    pub async fn drop_database(&mut self, name: &str) -> Result<(), DataPlaneError> {
        self.execute(&format!("DROP DATABASE IF EXISTS {}", identifier(name))).await
    }

    /// The accounts section of a backup: SQL that recreates every role and account on the
    /// server but the reserved ones ([`Account::is_reserved`]) with their password hashes,
    /// limits and grants. Roles first, then accounts, then every grant (an account's grants
    /// may name roles). An account that exists where this runs is dropped and created again,
    /// so that it ends exactly as it was here. Runs after the dump, where every table a
    /// grant names exists.
    pub async fn accounts_sql(&mut self) -> Result<String, DataPlaneError> {
        let rows: Vec<(String, String, String)> = self
            .within(async |conn| conn.query("SELECT User, Host, is_role FROM mysql.user ORDER BY User, Host").await)
            .await?;
        let mut roles = Vec::new();
        let mut users = Vec::new();
        for (user, host, is_role) in rows {
            let account = Account::new(user, host);
            if account.is_reserved() {
                continue;
            }
            if is_role == "Y" { roles.push(account) } else { users.push(account) }
        }
        let mut out = String::from("\n-- Accounts (statecraft): roles and accounts with their grants.\n");
        for role in &roles {
            let name = crate::flavor::quote(&role.user);
            out.push_str(&format!("DROP ROLE IF EXISTS {name};\nCREATE ROLE {name};\n"));
        }
        let mut grantees: Vec<String> = roles.iter().map(|r| crate::flavor::quote(&r.user)).collect();
        for user in &users {
            let create: Option<String> =
                self.within(async |conn| conn.query_first(format!("SHOW CREATE USER {user}")).await).await?;
            let Some(create) = create else { continue };
            out.push_str(&format!("DROP USER IF EXISTS {user};\n{create};\n"));
            grantees.push(user.to_string());
        }
        for grantee in grantees {
            let grants: Vec<String> =
                self.within(async |conn| conn.query(format!("SHOW GRANTS FOR {grantee}")).await).await?;
            for g in grants {
                out.push_str(&g);
                out.push_str(";\n");
            }
        }
        out.push_str("-- Accounts completed.\n");
        Ok(out)
    }
}

/// Privileges by scope from `information_schema` rows (kind, schema, table, privilege,
/// grantable); `USAGE` (no privilege) is left out.
fn grant_map(rows: Vec<(String, String, String, String, String)>) -> GrantMap {
    let mut map = GrantMap::new();
    for (kind, schema, table, privilege, grantable) in rows {
        let scope = match kind.as_str() {
            "global" => Scope::Global,
            "database" => Scope::Database(schema),
            _ => Scope::Table(schema, table),
        };
        let entry = map.entry(scope).or_default();
        entry.grant_option |= grantable == "YES";
        if privilege != "USAGE" {
            entry.names.insert(privilege);
        }
    }
    map.retain(|_, p| !p.names.is_empty() || p.grant_option);
    map
}
