//! What differs between MariaDB and MySQL, behind one trait: binaries, data directory
//! initialisation, my.cnf settings for GTID replication and semi-sync, and the SQL the
//! operator sends. Everything here is pure (strings in, strings out) and unit-tested; the
//! MySQL side has not been run against a real MySQL server in this project.

use std::fmt;

use crate::api::Flavor;

/// A SQL statement that embeds a secret (a password). Its `Debug` and `Display` redact the
/// statement, so it can be passed around and logged by mistake without leaking; only
/// [`SecretSql::expose`] gives the text to send.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretSql(String);

impl SecretSql {
    /// A statement that embeds a secret.
    pub(crate) fn new(statement: String) -> Self {
        SecretSql(statement)
    }

    /// The statement to send to the server. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretSql {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretSql(<redacted>)")
    }
}

impl fmt::Display for SecretSql {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<statement with a secret, redacted>")
    }
}

/// Quotes `s` as a SQL string literal (single quotes; backslashes and quotes escaped), valid
/// in both flavors' default SQL mode.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Where a replica replicates from.
#[derive(Clone, PartialEq, Eq)]
pub struct ReplicationSource<'a> {
    /// Host name of the primary (its stable DNS name in the headless Service).
    pub host: &'a str,
    /// Port of the primary.
    pub port: u16,
    /// Replication user.
    pub user: &'a str,
    /// Its password.
    pub password: &'a str,
    /// Replicate over TLS, checking the source's certificate against the cluster's
    /// authority (`spec.tls`). Not its name: replicas dial the source's pod address.
    pub tls: bool,
}

/// Where a replica finds the authority it checks its source's certificate against.
fn authority_path() -> String {
    crate::build::tls::tls_path(statecraft_shared::tls::CA_CERT)
}

/// The column names of the flavor's replica status row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaStatusColumns {
    /// The IO (receiver) thread state, `Yes` when running.
    pub io_running: &'static str,
    /// The SQL (applier) thread state, `Yes` when running.
    pub sql_running: &'static str,
    /// Seconds behind the source, NULL when not replicating.
    pub lag_seconds: &'static str,
    /// Host replicated from.
    pub source_host: &'static str,
    /// Port replicated from.
    pub source_port: &'static str,
    /// Last receiver error.
    pub last_io_error: &'static str,
    /// Number of the last receiver error.
    pub last_io_errno: &'static str,
    /// Last applier error.
    pub last_sql_error: &'static str,
    /// GTIDs received but maybe not applied (MySQL `Retrieved_Gtid_Set`, MariaDB
    /// `Gtid_IO_Pos`).
    pub retrieved_gtids: &'static str,
}

/// The replication SQL and server settings of one flavor.
pub trait FlavorSql: Send + Sync {
    /// The flavor this describes.
    fn flavor(&self) -> Flavor;
    /// Server binary (the container runs it after initialisation).
    fn server_binary(&self) -> &'static str;
    /// Command-line client binary.
    fn client_binary(&self) -> &'static str;
    /// Administration client (`ping`).
    fn admin_binary(&self) -> &'static str;
    /// The local account the probes use through the server's Unix socket.
    fn local_probe_user(&self) -> &'static str;
    /// Shell command that initialises the new, empty data directory `$INITDIR` as the
    /// current user (uid 999), reading options from the generated my.cnf `$CNF`.
    fn init_data_dir_command(&self) -> &'static str;
    /// `[mysqld]` settings for GTID replication with a binary log on every server.
    fn gtid_settings(&self) -> Vec<(&'static str, String)>;
    /// `[mysqld]` settings for lossless semi-sync: wait point AFTER_SYNC and `timeout_ms`
    /// (huge, so no silent fallback to async); the replica side on when `enabled`. The
    /// source side starts OFF on every server: each one starts read-only, and the operator
    /// turns the source side on (with the acknowledgement count, n/2) at the moment it makes
    /// a server the writable primary. So nothing in the file depends on the replica count,
    /// and scaling never restarts a server.
    fn semi_sync_settings(&self, enabled: bool, timeout_ms: u64) -> Vec<(&'static str, String)>;
    /// Variable that makes the server refuse writes, including from administrators where the
    /// flavor can (MySQL `super_read_only`).
    fn read_only_variable(&self) -> &'static str;
    /// Variable of the source side of semi-sync.
    fn semi_sync_source_enabled_variable(&self) -> &'static str;
    /// Variable of the replica side of semi-sync.
    fn semi_sync_replica_enabled_variable(&self) -> &'static str;
    /// Variable of the acknowledgement count, when the flavor has one (MariaDB waits for one).
    fn semi_sync_wait_count_variable(&self) -> Option<&'static str>;
    /// A scalar subquery: `ON` while the source side of semi-sync waits for
    /// acknowledgements, `OFF` once it fell back to asynchronous replication (or is off).
    fn semi_sync_source_status_query(&self) -> &'static str;
    /// A scalar subquery: seconds since the server started.
    fn uptime_query(&self) -> &'static str;
    /// Query returning the server's GTID position as one string column.
    fn gtid_executed_query(&self) -> &'static str;
    /// Statements to run on a stopped replica, before pointing it at a source, so that a
    /// former primary continues from its own position.
    fn prepare_replica(&self) -> Vec<String>;
    /// Points the replica at `source` with GTID auto-positioning. Contains the password.
    /// Heartbeats every second (the default is 30 s): a source's dump thread notices a
    /// replica that went away at its next heartbeat, and a terminating primary's preStop
    /// hook waits for its replicas to be gone (`handover_sh`).
    fn change_source(&self, source: &ReplicationSource<'_>) -> SecretSql;
    /// Makes the server read its certificate files again (new connections get the new
    /// certificate; open ones keep theirs), writing nothing to the binary log.
    fn reload_tls(&self) -> &'static str;
    /// Starts both replication threads.
    fn start_replica(&self) -> &'static str;
    /// A statement to run before stopping a replica's receiver, so that the stop does not
    /// wait long on a source that no longer answers. MariaDB's semi-sync receiver, as it
    /// stops, opens a new connection to its source to kill its binary log dump there, and
    /// the stop waits for it up to `rpl_semi_sync_slave_kill_conn_timeout` (default 5 s).
    /// Measured in e2e and by hand in a pod (source frozen or its address gone): every
    /// `STOP SLAVE` took 2.0 s (also with the timeout at 20 s: it seems the stop, which
    /// re-signals its thread every 2 s, cuts the wait short), 1.0 s with the
    /// timeout at 1; a failover and a reinstated primary's first commits waited for it.
    /// Turning semi-sync's replica side off first does not help on MariaDB 10.11 (the
    /// receiver still makes the connection). A live source answers that connection in
    /// milliseconds, so 1 s (the variable counts whole seconds) costs nothing there.
    /// Dynamic, and set before each stop rather than in the configuration, so a running
    /// cluster gets it without a roll and a restarted server cannot miss it.
    fn before_stopping_replica(&self) -> Option<&'static str>;
    /// Stops both replication threads.
    fn stop_replica(&self) -> &'static str;
    /// Stops only the receiver: fences a replica so the old primary gets no more
    /// semi-sync acknowledgements.
    fn stop_replica_io_thread(&self) -> &'static str;
    /// Forgets the replication configuration (on promotion).
    fn reset_replica_all(&self) -> &'static str;
    /// Shows the replica status row.
    fn show_replica_status(&self) -> &'static str;
    /// The column names of that row.
    fn replica_status_columns(&self) -> ReplicaStatusColumns;
    /// Waits up to `timeout_seconds` until `gtids` are applied. Returns one column: 0 on
    /// success; on timeout -1 (MariaDB) or 1 (MySQL).
    fn wait_for_gtids(&self, gtids: &str, timeout_seconds: u32) -> String;

    /// Statements that make a server the writable primary, in order: first the source side
    /// of semi-sync (with the acknowledgement count where the flavor has one), so that no
    /// write is ever committed without it; then writes allowed. With `wait_count` 0 (no
    /// replica) or semi-sync disabled the source side is turned off.
    fn make_writable(&self, semi_sync: bool, wait_count: u32) -> Vec<String> {
        let mut out = Vec::new();
        if semi_sync && wait_count > 0 {
            if let Some(var) = self.semi_sync_wait_count_variable() {
                out.push(format!("SET GLOBAL {var} = {wait_count}"));
            }
            out.push(format!("SET GLOBAL {} = ON", self.semi_sync_source_enabled_variable()));
        } else {
            out.push(format!("SET GLOBAL {} = OFF", self.semi_sync_source_enabled_variable()));
        }
        if self.read_only_variable() != "read_only" {
            out.push(format!("SET GLOBAL {} = OFF", self.read_only_variable()));
        }
        out.push("SET GLOBAL read_only = OFF".into());
        out
    }

    /// Statement that stops a server accepting writes (demotion, fencing). It leaves the
    /// source side of semi-sync alone: turning it off would release commits still waiting
    /// for an acknowledgement, which is exactly the silent fallback to avoid.
    fn make_read_only(&self) -> String {
        format!("SET GLOBAL {} = ON", self.read_only_variable())
    }

    /// Statement taking from `account` (quoted `'user'@'host'`) every right that writes to a
    /// read-only server's binary log, where the flavor grants it with ALL PRIVILEGES:
    /// MariaDB's READ_ONLY ADMIN (writes despite `read_only`), RELOAD (`FLUSH PRIVILEGES`
    /// and `FLUSH TABLES` log a GTID even on a read-only server) and BINLOG ADMIN (`RESET
    /// MASTER`, `PURGE BINARY LOGS`). MySQL's `super_read_only` stops every account.
    fn revoke_read_only_bypass(&self, _account: &str) -> Option<String> {
        None
    }

    /// The global privileges that let an account read the server's status, the process
    /// list, InnoDB's status, and the replication and binary log status, and nothing else.
    fn monitor_privileges(&self) -> &'static str;
}

/// The account the operator uses (all privileges, from any host).
pub const OPERATOR_USER: &str = "statecraft";
/// The account replicas use to connect to their source.
pub const REPLICATION_USER: &str = "repl";
/// The administrator account offered to users through the Services.
pub const ROOT_USER: &str = "root";
/// The account backup Jobs dump with: reads everything, writes nothing.
pub const BACKUP_USER: &str = "backup";
/// The account of the metrics sidecar (mysqld_exporter): reads status, no data.
pub const EXPORTER_USER: &str = "exporter";
/// Where the metrics sidecar connects from: the server's own pod, over TCP to 127.0.0.1
/// (the servers run with `skip_name_resolve`, so `localhost` would match only the socket).
pub const EXPORTER_HOST: &str = "127.0.0.1";
/// Connections the exporter's account may hold at once: a scrape uses one, a slow scrape
/// overlapping the next a second; more means something is wrong, and a cap keeps a
/// misbehaving scraper from taking the server's connections.
pub const EXPORTER_MAX_CONNECTIONS: u32 = 3;

/// Passwords of the accounts every server has. `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct AccountPasswords<'a> {
    /// [`OPERATOR_USER`].
    pub operator: &'a str,
    /// [`REPLICATION_USER`].
    pub replication: &'a str,
    /// [`ROOT_USER`] from any host.
    pub root: &'a str,
    /// [`BACKUP_USER`].
    pub backup: &'a str,
    /// [`EXPORTER_USER`], created only when the cluster runs the metrics sidecar.
    pub exporter: Option<&'a str>,
}

impl fmt::Debug for AccountPasswords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccountPasswords(<redacted>)")
    }
}

/// The server's init file (`--init-file`), run at every start before clients are accepted:
/// creates the accounts or resets their passwords to the given ones. It writes nothing to the
/// binary log (`sql_log_bin = 0`), so no server gets a transaction of its own that the others
/// lack (an errant GTID). One statement a line, as the server reads it. The accounts
/// offered to clients lose the right to write on a read-only server, so a client of the
/// read-only Service cannot create errant transactions; the operator's account keeps it,
/// because MariaDB asks for it to change `read_only` itself. The cost: network users
/// cannot FLUSH, RESET MASTER or PURGE BINARY LOGS (the operator's account can).
pub fn accounts_init_sql(flavor: &dyn FlavorSql, p: &AccountPasswords<'_>) -> SecretSql {
    let mut lines = vec!["SET SESSION sql_log_bin = 0;".to_string()];
    // The operator keeps the bypass: MariaDB requires it to change `read_only` at all.
    for (user, password, grants, bypass) in [
        (OPERATOR_USER, p.operator, "ALL PRIVILEGES ON *.* TO {u} WITH GRANT OPTION", true),
        (REPLICATION_USER, p.replication, "REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {u}", false),
        (ROOT_USER, p.root, "ALL PRIVILEGES ON *.* TO {u} WITH GRANT OPTION", false),
        (
            BACKUP_USER,
            p.backup,
            "SELECT, SHOW VIEW, TRIGGER, EVENT, LOCK TABLES, REPLICATION CLIENT ON *.* TO {u}",
            false,
        ),
    ] {
        let u = format!("{}@'%'", quote(user));
        lines.push(format!("CREATE USER IF NOT EXISTS {u} IDENTIFIED BY {};", quote(password)));
        lines.push(format!("ALTER USER {u} IDENTIFIED BY {};", quote(password)));
        lines.push(format!("GRANT {};", grants.replace("{u}", &u)));
        if let Some(revoke) = flavor.revoke_read_only_bypass(&u).filter(|_| !bypass) {
            lines.push(format!("{revoke};"));
        }
    }
    // Status only: the exporter's collectors read global status and variables, the
    // process list, InnoDB's metrics and status, replication and binary log status, and
    // performance_schema; none of them needs to read a table of data. A sidecar turned off
    // takes its account with it.
    let u = format!("{}@{}", quote(EXPORTER_USER), quote(EXPORTER_HOST));
    if let Some(password) = p.exporter {
        lines.push(format!("CREATE USER IF NOT EXISTS {u} IDENTIFIED BY {};", quote(password)));
        lines.push(format!(
            "ALTER USER {u} IDENTIFIED BY {} WITH MAX_USER_CONNECTIONS {EXPORTER_MAX_CONNECTIONS};",
            quote(password)
        ));
        lines.push(format!("GRANT {} ON *.* TO {u};", flavor.monitor_privileges()));
        lines.push(format!("GRANT SELECT ON performance_schema.* TO {u};"));
    } else {
        lines.push(format!("DROP USER IF EXISTS {u};"));
    }
    lines.push("FLUSH PRIVILEGES;".into());
    SecretSql(lines.join("\n") + "\n")
}

/// The trait object of `flavor`.
pub fn sql(flavor: Flavor) -> &'static dyn FlavorSql {
    match flavor {
        Flavor::Mariadb => &MariaDb,
        Flavor::Mysql => &MySql,
    }
}

/// MariaDB 10.6 and later.
pub struct MariaDb;

/// MySQL 8.0.26 and later (the `SOURCE` / `REPLICA` vocabulary and semi-sync plugin names).
pub struct MySql;

fn on_off(b: bool) -> String {
    if b { "ON" } else { "OFF" }.to_string()
}

impl FlavorSql for MariaDb {
    fn flavor(&self) -> Flavor {
        Flavor::Mariadb
    }
    fn server_binary(&self) -> &'static str {
        "mariadbd"
    }
    fn client_binary(&self) -> &'static str {
        "mariadb"
    }
    fn admin_binary(&self) -> &'static str {
        "mariadb-admin"
    }
    fn local_probe_user(&self) -> &'static str {
        // mariadb-install-db --user=mysql creates mysql@localhost with unix_socket
        // authentication: the container's uid 999 logs in without a password.
        "mysql"
    }
    fn init_data_dir_command(&self) -> &'static str {
        "mariadb-install-db --defaults-file=\"$CNF\" --datadir=\"$INITDIR\" --user=mysql --skip-test-db --auth-root-authentication-method=socket"
    }
    fn gtid_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("log_bin", "mysql-bin".into()),
            ("log_slave_updates", "ON".into()),
            ("binlog_format", "ROW".into()),
            ("gtid_strict_mode", "ON".into()),
            ("skip_slave_start", "ON".into()),
            ("relay_log", "relay-bin".into()),
            ("relay_log_recovery", "ON".into()),
            ("sync_binlog", "1".into()),
            ("innodb_flush_log_at_trx_commit", "1".into()),
        ]
    }
    fn semi_sync_settings(&self, enabled: bool, timeout_ms: u64) -> Vec<(&'static str, String)> {
        vec![
            ("rpl_semi_sync_master_enabled", on_off(false)),
            ("rpl_semi_sync_slave_enabled", on_off(enabled)),
            ("rpl_semi_sync_master_wait_point", "AFTER_SYNC".into()),
            ("rpl_semi_sync_master_timeout", timeout_ms.to_string()),
            ("rpl_semi_sync_master_wait_no_slave", "ON".into()),
        ]
    }
    fn read_only_variable(&self) -> &'static str {
        "read_only"
    }
    fn semi_sync_source_enabled_variable(&self) -> &'static str {
        "rpl_semi_sync_master_enabled"
    }
    fn semi_sync_replica_enabled_variable(&self) -> &'static str {
        "rpl_semi_sync_slave_enabled"
    }
    fn semi_sync_wait_count_variable(&self) -> Option<&'static str> {
        None
    }
    fn semi_sync_source_status_query(&self) -> &'static str {
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS'"
    }
    fn uptime_query(&self) -> &'static str {
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'"
    }
    fn gtid_executed_query(&self) -> &'static str {
        "SELECT @@GLOBAL.gtid_current_pos"
    }
    fn prepare_replica(&self) -> Vec<String> {
        vec!["SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_current_pos".into()]
    }
    fn change_source(&self, s: &ReplicationSource<'_>) -> SecretSql {
        // MASTER_SSL=1 in MariaDB lets the replica fall back to plaintext from a source that
        // serves no TLS (one not yet replaced while TLS is turned on); a source requiring
        // secure transport refuses that fallback.
        let tls = if s.tls {
            format!(", MASTER_SSL=1, MASTER_SSL_CA={}, MASTER_SSL_VERIFY_SERVER_CERT=0", quote(&authority_path()))
        } else {
            String::new()
        };
        SecretSql(format!(
            "CHANGE MASTER TO MASTER_HOST={}, MASTER_PORT={}, MASTER_USER={}, MASTER_PASSWORD={}, \
             MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1{tls}",
            quote(s.host),
            s.port,
            quote(s.user),
            quote(s.password)
        ))
    }
    fn reload_tls(&self) -> &'static str {
        // LOCAL: a plain FLUSH is written to the binary log, and on a replica that is a
        // transaction of its own, which breaks its replication (found by the TLS e2e).
        "FLUSH LOCAL SSL"
    }
    fn start_replica(&self) -> &'static str {
        "START SLAVE"
    }
    fn before_stopping_replica(&self) -> Option<&'static str> {
        Some("SET GLOBAL rpl_semi_sync_slave_kill_conn_timeout = 1")
    }
    fn stop_replica(&self) -> &'static str {
        "STOP SLAVE"
    }
    fn stop_replica_io_thread(&self) -> &'static str {
        "STOP SLAVE IO_THREAD"
    }
    fn reset_replica_all(&self) -> &'static str {
        "RESET SLAVE ALL"
    }
    fn show_replica_status(&self) -> &'static str {
        "SHOW SLAVE STATUS"
    }
    fn monitor_privileges(&self) -> &'static str {
        // Since 10.5 REPLICATION CLIENT is only BINLOG MONITOR, and SHOW SLAVE STATUS
        // needs SLAVE MONITOR.
        "PROCESS, BINLOG MONITOR, SLAVE MONITOR"
    }
    fn replica_status_columns(&self) -> ReplicaStatusColumns {
        ReplicaStatusColumns {
            io_running: "Slave_IO_Running",
            sql_running: "Slave_SQL_Running",
            lag_seconds: "Seconds_Behind_Master",
            source_host: "Master_Host",
            source_port: "Master_Port",
            last_io_error: "Last_IO_Error",
            last_io_errno: "Last_IO_Errno",
            last_sql_error: "Last_SQL_Error",
            retrieved_gtids: "Gtid_IO_Pos",
        }
    }
    fn wait_for_gtids(&self, gtids: &str, timeout_seconds: u32) -> String {
        format!("SELECT MASTER_GTID_WAIT({}, {timeout_seconds})", quote(gtids))
    }
    fn revoke_read_only_bypass(&self, account: &str) -> Option<String> {
        Some(format!("REVOKE READ_ONLY ADMIN, RELOAD, BINLOG ADMIN ON *.* FROM {account}"))
    }
}

impl FlavorSql for MySql {
    fn flavor(&self) -> Flavor {
        Flavor::Mysql
    }
    fn server_binary(&self) -> &'static str {
        "mysqld"
    }
    fn client_binary(&self) -> &'static str {
        "mysql"
    }
    fn admin_binary(&self) -> &'static str {
        "mysqladmin"
    }
    fn local_probe_user(&self) -> &'static str {
        // --initialize-insecure leaves root@localhost without a password; the controller
        // must give the probes an account before it sets one (open: MySQL is untested here).
        "root"
    }
    fn init_data_dir_command(&self) -> &'static str {
        "mysqld --defaults-file=\"$CNF\" --datadir=\"$INITDIR\" --initialize-insecure --user=mysql"
    }
    fn gtid_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("gtid_mode", "ON".into()),
            ("enforce_gtid_consistency", "ON".into()),
            ("log_bin", "mysql-bin".into()),
            ("log_replica_updates", "ON".into()),
            ("binlog_format", "ROW".into()),
            ("relay_log", "relay-bin".into()),
            ("relay_log_recovery", "ON".into()),
            ("skip_replica_start", "ON".into()),
            ("sync_binlog", "1".into()),
            ("innodb_flush_log_at_trx_commit", "1".into()),
        ]
    }
    fn semi_sync_settings(&self, enabled: bool, timeout_ms: u64) -> Vec<(&'static str, String)> {
        vec![
            ("plugin_load_add", "semisync_source.so;semisync_replica.so".into()),
            ("loose_rpl_semi_sync_source_enabled", on_off(false)),
            ("loose_rpl_semi_sync_replica_enabled", on_off(enabled)),
            ("loose_rpl_semi_sync_source_wait_point", "AFTER_SYNC".into()),
            ("loose_rpl_semi_sync_source_timeout", timeout_ms.to_string()),
            ("loose_rpl_semi_sync_source_wait_no_replica", "ON".into()),
        ]
    }
    fn read_only_variable(&self) -> &'static str {
        "super_read_only"
    }
    fn semi_sync_source_enabled_variable(&self) -> &'static str {
        "rpl_semi_sync_source_enabled"
    }
    fn semi_sync_replica_enabled_variable(&self) -> &'static str {
        "rpl_semi_sync_replica_enabled"
    }
    fn semi_sync_wait_count_variable(&self) -> Option<&'static str> {
        Some("rpl_semi_sync_source_wait_for_replica_count")
    }
    fn semi_sync_source_status_query(&self) -> &'static str {
        "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Rpl_semi_sync_source_status'"
    }
    fn uptime_query(&self) -> &'static str {
        "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Uptime'"
    }
    fn gtid_executed_query(&self) -> &'static str {
        "SELECT @@GLOBAL.gtid_executed"
    }
    fn prepare_replica(&self) -> Vec<String> {
        Vec::new()
    }
    fn change_source(&self, s: &ReplicationSource<'_>) -> SecretSql {
        let tls = if s.tls {
            format!(", SOURCE_SSL=1, SOURCE_SSL_CA={}, SOURCE_SSL_VERIFY_SERVER_CERT=0", quote(&authority_path()))
        } else {
            String::new()
        };
        SecretSql(format!(
            "CHANGE REPLICATION SOURCE TO SOURCE_HOST={}, SOURCE_PORT={}, SOURCE_USER={}, SOURCE_PASSWORD={}, \
             SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, SOURCE_HEARTBEAT_PERIOD=1, GET_SOURCE_PUBLIC_KEY=1{tls}",
            quote(s.host),
            s.port,
            quote(s.user),
            quote(s.password)
        ))
    }
    fn reload_tls(&self) -> &'static str {
        "ALTER INSTANCE RELOAD TLS"
    }
    fn start_replica(&self) -> &'static str {
        "START REPLICA"
    }
    fn before_stopping_replica(&self) -> Option<&'static str> {
        // MySQL has no variable for it (and nothing measured here says it waits).
        None
    }
    fn stop_replica(&self) -> &'static str {
        "STOP REPLICA"
    }
    fn stop_replica_io_thread(&self) -> &'static str {
        "STOP REPLICA IO_THREAD"
    }
    fn reset_replica_all(&self) -> &'static str {
        "RESET REPLICA ALL"
    }
    fn show_replica_status(&self) -> &'static str {
        "SHOW REPLICA STATUS"
    }
    fn monitor_privileges(&self) -> &'static str {
        "PROCESS, REPLICATION CLIENT"
    }
    fn replica_status_columns(&self) -> ReplicaStatusColumns {
        ReplicaStatusColumns {
            io_running: "Replica_IO_Running",
            sql_running: "Replica_SQL_Running",
            lag_seconds: "Seconds_Behind_Source",
            source_host: "Source_Host",
            source_port: "Source_Port",
            last_io_error: "Last_IO_Error",
            last_io_errno: "Last_IO_Errno",
            last_sql_error: "Last_SQL_Error",
            retrieved_gtids: "Retrieved_Gtid_Set",
        }
    }
    fn wait_for_gtids(&self, gtids: &str, timeout_seconds: u32) -> String {
        format!("SELECT WAIT_FOR_EXECUTED_GTID_SET({}, {timeout_seconds})", quote(gtids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: ReplicationSource<'static> =
        ReplicationSource { host: "db-0.db-hl.ns.svc", port: 3306, user: "repl", password: "s3cr'et", tls: false };

    #[test]
    fn replicas_replicate_over_tls_checking_the_cluster_authority_when_asked() {
        let over_tls = ReplicationSource { tls: true, ..SOURCE };
        let mariadb = sql(Flavor::Mariadb).change_source(&over_tls);
        assert!(
            mariadb.expose().ends_with(
                ", MASTER_SSL=1, MASTER_SSL_CA='/etc/statecraft-tls/ca.crt', MASTER_SSL_VERIFY_SERVER_CERT=0"
            ),
            "{}",
            mariadb.expose()
        );
        let mysql = sql(Flavor::Mysql).change_source(&over_tls);
        assert!(mysql.expose().contains(", SOURCE_SSL=1, SOURCE_SSL_CA='/etc/statecraft-tls/ca.crt'"));
        assert!(!sql(Flavor::Mariadb).change_source(&SOURCE).expose().contains("SSL"));
        // Reloading the certificate is no transaction: nothing reaches the binary log.
        assert_eq!(sql(Flavor::Mariadb).reload_tls(), "FLUSH LOCAL SSL");
    }

    #[test]
    fn quoting_escapes_quotes_and_backslashes() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), "'it''s'");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
        assert_eq!(quote("nul\0"), "'nul\\0'");
    }

    #[test]
    fn mariadb_change_master_uses_gtid_slave_pos() {
        let sql = sql(Flavor::Mariadb).change_source(&SOURCE);
        assert_eq!(
            sql.expose(),
            "CHANGE MASTER TO MASTER_HOST='db-0.db-hl.ns.svc', MASTER_PORT=3306, MASTER_USER='repl', \
             MASTER_PASSWORD='s3cr''et', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1"
        );
    }

    #[test]
    fn mysql_change_source_uses_auto_position() {
        let sql = sql(Flavor::Mysql).change_source(&SOURCE);
        assert!(
            sql.expose().starts_with("CHANGE REPLICATION SOURCE TO SOURCE_HOST='db-0.db-hl.ns.svc', SOURCE_PORT=3306")
        );
        assert!(sql.expose().contains("SOURCE_AUTO_POSITION=1"));
        assert!(sql.expose().contains("SOURCE_PASSWORD='s3cr''et'"));
        assert!(!sql.expose().contains("MASTER"));
    }

    #[test]
    fn statements_with_passwords_are_redacted_when_printed() {
        for flavor in [Flavor::Mariadb, Flavor::Mysql] {
            let s = sql(flavor).change_source(&SOURCE);
            assert!(!format!("{s:?}").contains("s3cr"));
            assert!(!format!("{s}").contains("s3cr"));
        }
    }

    #[test]
    fn replica_control_statements_per_flavor() {
        let m = sql(Flavor::Mariadb);
        assert_eq!(
            [m.start_replica(), m.stop_replica(), m.stop_replica_io_thread(), m.reset_replica_all()],
            ["START SLAVE", "STOP SLAVE", "STOP SLAVE IO_THREAD", "RESET SLAVE ALL"]
        );
        assert_eq!(m.before_stopping_replica(), Some("SET GLOBAL rpl_semi_sync_slave_kill_conn_timeout = 1"));
        assert_eq!(m.show_replica_status(), "SHOW SLAVE STATUS");
        assert_eq!(m.replica_status_columns().io_running, "Slave_IO_Running");
        assert_eq!(m.replica_status_columns().lag_seconds, "Seconds_Behind_Master");
        assert_eq!(m.gtid_executed_query(), "SELECT @@GLOBAL.gtid_current_pos");
        assert_eq!(m.prepare_replica(), ["SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_current_pos"]);
        assert_eq!(m.wait_for_gtids("0-100-5", 30), "SELECT MASTER_GTID_WAIT('0-100-5', 30)");

        let y = sql(Flavor::Mysql);
        assert_eq!(
            [y.start_replica(), y.stop_replica(), y.stop_replica_io_thread(), y.reset_replica_all()],
            ["START REPLICA", "STOP REPLICA", "STOP REPLICA IO_THREAD", "RESET REPLICA ALL"]
        );
        assert_eq!(y.show_replica_status(), "SHOW REPLICA STATUS");
        assert_eq!(y.replica_status_columns().io_running, "Replica_IO_Running");
        assert_eq!(y.replica_status_columns().retrieved_gtids, "Retrieved_Gtid_Set");
        assert_eq!(y.gtid_executed_query(), "SELECT @@GLOBAL.gtid_executed");
        assert!(y.prepare_replica().is_empty());
        assert_eq!(y.wait_for_gtids("u:1-5", 30), "SELECT WAIT_FOR_EXECUTED_GTID_SET('u:1-5', 30)");
    }

    #[test]
    fn semi_sync_variable_names_per_flavor() {
        let m = sql(Flavor::Mariadb);
        assert_eq!(m.semi_sync_source_enabled_variable(), "rpl_semi_sync_master_enabled");
        assert_eq!(m.semi_sync_replica_enabled_variable(), "rpl_semi_sync_slave_enabled");
        assert_eq!(m.semi_sync_wait_count_variable(), None);
        assert_eq!(m.read_only_variable(), "read_only");
        let y = sql(Flavor::Mysql);
        assert_eq!(y.semi_sync_source_enabled_variable(), "rpl_semi_sync_source_enabled");
        assert_eq!(y.semi_sync_replica_enabled_variable(), "rpl_semi_sync_replica_enabled");
        assert_eq!(y.semi_sync_wait_count_variable(), Some("rpl_semi_sync_source_wait_for_replica_count"));
        assert_eq!(y.read_only_variable(), "super_read_only");
    }

    #[test]
    fn semi_sync_settings_are_lossless_in_both_flavors() {
        let m: std::collections::BTreeMap<_, _> =
            sql(Flavor::Mariadb).semi_sync_settings(true, 4_294_967_000).into_iter().collect();
        assert_eq!(m["rpl_semi_sync_master_wait_point"], "AFTER_SYNC");
        assert_eq!(m["rpl_semi_sync_master_enabled"], "OFF", "turned on by the operator with writability");
        assert_eq!(m["rpl_semi_sync_slave_enabled"], "ON");
        assert_eq!(m["rpl_semi_sync_master_timeout"], "4294967000");
        assert_eq!(m["rpl_semi_sync_master_wait_no_slave"], "ON");
        let y: std::collections::BTreeMap<_, _> =
            sql(Flavor::Mysql).semi_sync_settings(true, 60_000).into_iter().collect();
        assert_eq!(y["loose_rpl_semi_sync_source_wait_point"], "AFTER_SYNC");
        assert_eq!(y["loose_rpl_semi_sync_source_enabled"], "OFF");
        assert_eq!(y["loose_rpl_semi_sync_replica_enabled"], "ON");
        assert_eq!(y["loose_rpl_semi_sync_source_timeout"], "60000");
        let off: std::collections::BTreeMap<_, _> =
            sql(Flavor::Mariadb).semi_sync_settings(false, 60_000).into_iter().collect();
        assert_eq!(off["rpl_semi_sync_slave_enabled"], "OFF");
    }

    #[test]
    fn promotion_enables_semi_sync_before_writes() {
        assert_eq!(
            sql(Flavor::Mariadb).make_writable(true, 1),
            ["SET GLOBAL rpl_semi_sync_master_enabled = ON", "SET GLOBAL read_only = OFF"]
        );
        assert_eq!(
            sql(Flavor::Mysql).make_writable(true, 2),
            [
                "SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 2",
                "SET GLOBAL rpl_semi_sync_source_enabled = ON",
                "SET GLOBAL super_read_only = OFF",
                "SET GLOBAL read_only = OFF",
            ]
        );
        assert_eq!(
            sql(Flavor::Mariadb).make_writable(true, 0),
            ["SET GLOBAL rpl_semi_sync_master_enabled = OFF", "SET GLOBAL read_only = OFF"]
        );
        assert_eq!(sql(Flavor::Mariadb).make_writable(false, 2)[0], "SET GLOBAL rpl_semi_sync_master_enabled = OFF");
        assert_eq!(sql(Flavor::Mariadb).make_read_only(), "SET GLOBAL read_only = ON");
        assert_eq!(sql(Flavor::Mysql).make_read_only(), "SET GLOBAL super_read_only = ON");
    }

    #[test]
    fn accounts_are_created_idempotently_and_redacted() {
        let p = AccountPasswords { operator: "op", replication: "pw'x", root: "rt", backup: "bk", exporter: None };
        let maria = accounts_init_sql(sql(Flavor::Mariadb), &p);
        let lines: Vec<&str> = maria.expose().lines().collect();
        assert_eq!(lines[0], "SET SESSION sql_log_bin = 0;", "nothing reaches the binary log");
        assert!(lines.contains(&"CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'pw''x';"));
        assert!(lines.contains(&"ALTER USER 'repl'@'%' IDENTIFIED BY 'pw''x';"));
        assert!(lines.contains(&"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%';"));
        assert!(lines.contains(&"REVOKE READ_ONLY ADMIN, RELOAD, BINLOG ADMIN ON *.* FROM 'root'@'%';"));
        assert!(
            !lines.iter().any(|l| l.starts_with("REVOKE") && l.contains("'statecraft'")),
            "it promotes and demotes"
        );
        let backup = lines.iter().find(|l| l.starts_with("GRANT") && l.contains("'backup'")).unwrap();
        assert!(!backup.contains("ALL") && !backup.contains("INSERT"), "the backup account writes nothing: {backup}");
        assert!(lines.iter().all(|l| l.ends_with(';')), "one statement a line");
        assert!(!format!("{maria:?} {maria} {p:?}").contains("pw"));
        let mysql = accounts_init_sql(sql(Flavor::Mysql), &p);
        assert!(!mysql.expose().contains("READ_ONLY ADMIN"), "super_read_only stops every account");
        let exporter: Vec<&str> = lines.iter().copied().filter(|l| l.contains("'exporter'")).collect();
        assert_eq!(
            exporter,
            ["DROP USER IF EXISTS 'exporter'@'127.0.0.1';"],
            "no exporter account unless the sidecar runs"
        );
    }

    #[test]
    fn the_exporter_account_reads_status_from_its_own_pod_only() {
        let p =
            AccountPasswords { operator: "op", replication: "rp", root: "rt", backup: "bk", exporter: Some("ex'p") };
        for (flavor, privileges) in [
            (Flavor::Mariadb, "PROCESS, BINLOG MONITOR, SLAVE MONITOR"),
            (Flavor::Mysql, "PROCESS, REPLICATION CLIENT"),
        ] {
            let init = accounts_init_sql(sql(flavor), &p);
            let lines: Vec<&str> = init.expose().lines().collect();
            let exporter: Vec<&str> = lines.iter().copied().filter(|l| l.contains("'exporter'")).collect();
            assert_eq!(
                exporter,
                [
                    "CREATE USER IF NOT EXISTS 'exporter'@'127.0.0.1' IDENTIFIED BY 'ex''p';",
                    "ALTER USER 'exporter'@'127.0.0.1' IDENTIFIED BY 'ex''p' WITH MAX_USER_CONNECTIONS 3;",
                    &format!("GRANT {privileges} ON *.* TO 'exporter'@'127.0.0.1';"),
                    "GRANT SELECT ON performance_schema.* TO 'exporter'@'127.0.0.1';",
                ],
                "{flavor:?}"
            );
            assert_eq!(lines.last(), Some(&"FLUSH PRIVILEGES;"));
            assert_eq!(lines[0], "SET SESSION sql_log_bin = 0;");
        }
    }

    #[test]
    fn binaries_and_initialisation_per_flavor() {
        assert_eq!(sql(Flavor::Mariadb).server_binary(), "mariadbd");
        assert!(sql(Flavor::Mariadb).init_data_dir_command().starts_with("mariadb-install-db "));
        assert!(sql(Flavor::Mariadb).init_data_dir_command().contains("--user=mysql"));
        assert_eq!(sql(Flavor::Mysql).server_binary(), "mysqld");
        assert!(sql(Flavor::Mysql).init_data_dir_command().contains("--initialize-insecure"));
    }
}
