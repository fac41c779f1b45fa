//! The data plane: what the clustering task reads from and does to the servers, over
//! `mysql_async`. Every call has a deadline (a hung server must never hang a pass), and every
//! operation is a sequence of idempotent statements, so a retry after a crash or a timeout is
//! safe.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::join_all;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row, SslOpts};
use thiserror::Error;
use tracing::debug;

use super::gtid::{GtidParseError, GtidSet};
use super::observed::{Replication, Server, ServerState};
use crate::flavor::{BACKUP_USER, EXPORTER_USER, FlavorSql, OPERATOR_USER, REPLICATION_USER, ReplicationSource, quote};

/// Deadline to open a connection: short, because failover speed depends on noticing fast.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Deadline of one observation of a server.
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(3);
/// What the optional readings of an observation (connection errors, client connections)
/// leave of [`OBSERVE_TIMEOUT`]: one that is slow is given up with this much time left, so
/// the server is still reported up and the clustering never waits on them.
const OPTIONAL_READINGS_MARGIN: Duration = Duration::from_millis(250);
/// How long each best-effort step after a switchover (the other replicas following the new
/// primary, letting the old one go) may hold it up: writes are down meanwhile.
const LET_GO_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a failover candidate may take to apply the transactions it received.
pub const APPLY_TIMEOUT_SECONDS: u32 = 60;

/// The counters of connection errors (same names in both flavors; no privilege needed).
const CONNECTION_ERRORS_QUERY: &str =
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Aborted_connects', 'Aborted_clients')";

/// The receiver's error when the source cannot send from the replica's position
/// (`ER_SOURCE_FATAL_ERROR_READING_BINLOG`): not in its binary log, diverged or purged.
const SOURCE_REFUSED_POSITION: &str = "1236";

/// Accounts that are not clients: their connections survive a demotion.
const NOT_CLIENTS: [&str; 4] = [OPERATOR_USER, REPLICATION_USER, "system user", "event_scheduler"];

/// The `information_schema.PROCESSLIST` condition of the client connections: not the
/// querying connection itself, no account of `not_clients`, and no binary log dump (a
/// replica's connection, whatever its account). Shared by what disconnects clients and
/// what counts them, so that both agree on what a client is.
fn clients_condition(not_clients: &[&str]) -> String {
    let users = not_clients.iter().map(|u| quote(u)).collect::<Vec<_>>().join(", ");
    format!("ID <> CONNECTION_ID() AND USER NOT IN ({users}) AND COMMAND NOT LIKE 'Binlog Dump%'")
}

/// Counts the client connections for auto-scaling. Beyond [`NOT_CLIENTS`], the backup
/// account is not a client (a backup Job is the operator's, not load a replica would take),
/// nor is the metrics sidecar's, nor are the probes: they connect every few seconds and would make the count jitter. The
/// probes' account is only excluded through the Unix socket (`HOST` `localhost`), where they
/// connect: MySQL's is `root`, the name of the administrator account offered to clients
/// over the network, whose connections are clients.
fn client_connections_query(flavor: &dyn FlavorSql) -> String {
    let mut not_clients = NOT_CLIENTS.to_vec();
    not_clients.extend([BACKUP_USER, EXPORTER_USER]);
    format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE {} AND NOT (USER = {} AND HOST = 'localhost')",
        clients_condition(&not_clients),
        quote(flavor.local_probe_user())
    )
}

/// A failed data-plane call. Every one is worth retrying on the next pass.
#[derive(Debug, Error)]
pub enum DataPlaneError {
    /// No connection or no answer within the deadline.
    #[error("{endpoint}: no answer within {0:?}", .timeout)]
    Timeout {
        /// host:port.
        endpoint: String,
        /// The deadline.
        timeout: Duration,
    },
    /// The server refused or failed a statement.
    #[error("{endpoint}: {source}")]
    Sql {
        /// host:port.
        endpoint: String,
        /// The client error.
        #[source]
        source: mysql_async::Error,
    },
    /// The server answered something the operator does not understand.
    #[error("{endpoint}: {source}")]
    Gtid {
        /// host:port.
        endpoint: String,
        /// The parse error.
        #[source]
        source: GtidParseError,
    },
    /// A wait for transactions to be applied ran out.
    #[error("{endpoint}: did not apply {gtids} within {seconds} s")]
    NotCaughtUp {
        /// host:port.
        endpoint: String,
        /// The transactions waited for.
        gtids: String,
        /// The wait.
        seconds: u32,
    },
}

impl DataPlaneError {
    /// Whether the connection was refused: nothing listens at the endpoint.
    pub fn refused(&self) -> bool {
        matches!(
            self,
            DataPlaneError::Sql { source: mysql_async::Error::Io(mysql_async::IoError::Io(e)), .. }
                if e.kind() == std::io::ErrorKind::ConnectionRefused
        )
    }
}

/// Where the operator reaches a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// How a connection checks the server's certificate (`spec.tls`): against one authority
/// only (never the system's roots), for one name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTls {
    /// The authority's certificate, PEM bytes, or the path of a file with it.
    authority: Authority,
    /// The name the certificate must carry; `None`: the host dialled.
    server_name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Authority {
    Pem(Vec<u8>),
    File(std::path::PathBuf),
}

impl ClientTls {
    /// Servers checked against the authority `ca_pem` for `server_name`, whatever address
    /// is dialled: the operator dials pod addresses, which no certificate carries, and the
    /// servers of a cluster share one certificate, so the name proves the same thing.
    pub fn with_name(ca_pem: &str, server_name: String) -> Self {
        ClientTls { authority: Authority::Pem(ca_pem.as_bytes().to_vec()), server_name: Some(server_name) }
    }

    /// Servers checked against the authority in the file at `path`, for the host dialled.
    pub fn from_file(path: impl Into<std::path::PathBuf>) -> Self {
        ClientTls { authority: Authority::File(path.into()), server_name: None }
    }

    /// The client's TLS options.
    pub(crate) fn ssl_opts(&self) -> SslOpts {
        let root = match &self.authority {
            Authority::Pem(pem) => pem.clone().into(),
            Authority::File(path) => path.clone().into(),
        };
        let opts = SslOpts::default().with_root_certs(vec![root]).with_disable_built_in_roots(true);
        match &self.server_name {
            Some(name) => opts.with_danger_tls_hostname_override(Some(name.clone())),
            None => opts,
        }
    }
}

/// A time as OpenSSL prints it (`Dec  8 01:05:12 2026 GMT`), as servers report their
/// certificate's validity.
pub fn openssl_time(text: &str) -> Option<DateTime<Utc>> {
    let bare = text.trim().strip_suffix("GMT")?.trim();
    let words: Vec<&str> = bare.split_whitespace().collect();
    chrono::NaiveDateTime::parse_from_str(&words.join(" "), "%b %d %H:%M:%S %Y").ok().map(|t| t.and_utc())
}

/// Credentials, flavor and TLS of one cluster's data plane.
#[derive(Clone)]
pub struct DataPlane {
    flavor: &'static dyn FlavorSql,
    operator_password: String,
    replication_password: String,
    tls: Option<ClientTls>,
}

/// A failed request to a server, as the controllers report it (`DataPlaneError` reason,
/// retried with back-off).
impl From<DataPlaneError> for statecraft_shared::Error {
    fn from(e: DataPlaneError) -> Self {
        statecraft_shared::Error::DataPlane { system: "mysql".into(), message: e.to_string() }
    }
}

/// A TCP connection to `ep` as `user`, over TLS when `tls` says how, within
/// [`CONNECT_TIMEOUT`].
pub async fn connect_as(
    ep: &Endpoint,
    user: &str,
    password: &str,
    tls: Option<&ClientTls>,
) -> Result<Conn, DataPlaneError> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(ep.host.clone())
        .tcp_port(ep.port)
        .user(Some(user))
        .pass(Some(password))
        .prefer_socket(false)
        .ssl_opts(tls.map(ClientTls::ssl_opts));
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let timeout = || DataPlaneError::Timeout { endpoint: ep.to_string(), timeout: CONNECT_TIMEOUT };
    match tokio::time::timeout_at(deadline, Conn::new(opts.clone())).await {
        Ok(Ok(c)) => Ok(c),
        // A server that serves no TLS yet (the roll turning TLS on has not replaced it):
        // plaintext, as MariaDB's replicas do, so that the operator keeps seeing it. A
        // server that requires TLS always offers it.
        Ok(Err(mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer))) => {
            debug!(endpoint = %ep, "the server offers no TLS: plaintext");
            match tokio::time::timeout_at(deadline, Conn::new(opts.ssl_opts(None::<SslOpts>))).await {
                Ok(r) => r.map_err(|e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e }),
                Err(_) => Err(timeout()),
            }
        }
        Ok(Err(e)) => Err(DataPlaneError::Sql { endpoint: ep.to_string(), source: e }),
        Err(_) => Err(timeout()),
    }
}

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPlane").field("flavor", &self.flavor.flavor()).finish_non_exhaustive()
    }
}

impl DataPlane {
    /// A data plane for a cluster of `flavor` with the passwords of the operator's and the
    /// replication account, in plaintext.
    pub fn new(flavor: &'static dyn FlavorSql, operator_password: String, replication_password: String) -> Self {
        DataPlane { flavor, operator_password, replication_password, tls: None }
    }

    /// This data plane over TLS (`spec.tls`): the operator's connections check the servers'
    /// certificate, and replicas replicate over TLS.
    pub fn with_tls(self, tls: Option<ClientTls>) -> Self {
        DataPlane { tls, ..self }
    }

    /// The flavor's SQL.
    pub fn flavor(&self) -> &'static dyn FlavorSql {
        self.flavor
    }

    /// Acknowledgements the primary of `replicas` servers waits for: n/2 where the flavor
    /// can be told (MySQL), one otherwise (MariaDB); none without replicas.
    pub fn ack_count(&self, replicas: u32) -> u32 {
        match (replicas, self.flavor.semi_sync_wait_count_variable()) {
            (0 | 1, _) => 0,
            (n, Some(_)) => n / 2,
            (_, None) => 1,
        }
    }

    async fn connect(&self, ep: &Endpoint) -> Result<Conn, DataPlaneError> {
        connect_as(ep, OPERATOR_USER, &self.operator_password, self.tls.as_ref()).await
    }

    /// Runs `statements` in order on one connection, within `timeout`.
    async fn run(&self, ep: &Endpoint, statements: &[String], timeout: Duration) -> Result<(), DataPlaneError> {
        let work = async {
            let mut conn = self.connect(ep).await?;
            for s in statements {
                debug!(endpoint = %ep, statement = %s, "sql");
                conn.query_drop(s).await.map_err(|e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e })?;
            }
            let _ = conn.disconnect().await;
            Ok(())
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| DataPlaneError::Timeout { endpoint: ep.to_string(), timeout })?
    }

    /// Reads what the decision needs from one server; an error becomes `Unreachable`.
    pub async fn observe(&self, ep: &Endpoint) -> ServerState {
        self.observe_within(ep, OBSERVE_TIMEOUT).await
    }

    /// [`Self::observe`] with a deadline of `timeout` instead of [`OBSERVE_TIMEOUT`].
    pub async fn observe_within(&self, ep: &Endpoint, timeout: Duration) -> ServerState {
        let deadline = tokio::time::Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.observe_inner(ep, deadline)).await {
            Ok(Ok(s)) => ServerState::Up(s),
            Ok(Err(e)) if e.refused() => ServerState::Refused(e.to_string()),
            Ok(Err(e)) => ServerState::Unreachable(e.to_string()),
            Err(_) => ServerState::Unreachable(format!("{ep}: no answer within {timeout:?}")),
        }
    }

    async fn observe_inner(&self, ep: &Endpoint, deadline: tokio::time::Instant) -> Result<Server, DataPlaneError> {
        let f = self.flavor;
        let sql_err = |e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e };
        let gtid_err = |e| DataPlaneError::Gtid { endpoint: ep.to_string(), source: e };
        let mut conn = self.connect(ep).await?;
        let query = format!(
            "SELECT @@GLOBAL.{}, @@GLOBAL.{}, ({}), ({}), ({}), CONNECTION_ID()",
            f.read_only_variable(),
            f.semi_sync_source_enabled_variable(),
            f.gtid_executed_query(),
            f.semi_sync_source_status_query(),
            f.uptime_query()
        );
        type Row6 = (i64, i64, Option<String>, Option<String>, Option<String>, Option<u64>);
        let (read_only, semi, executed, semi_status, uptime, connection_id): Row6 =
            conn.query_first(query).await.map_err(sql_err)?.unwrap_or((1, 0, None, None, None, None));
        let executed = GtidSet::parse(f.flavor(), executed.as_deref().unwrap_or_default()).map_err(gtid_err)?;
        let row: Option<Row> = conn.query_first(f.show_replica_status()).await.map_err(sql_err)?;
        let replication = match row {
            Some(row) => Some(self.replication_of(&row).map_err(gtid_err)?),
            None => None,
        };
        let optional = async { (connection_errors(&mut conn, ep).await, client_connections(&mut conn, ep, f).await) };
        let (connection_errors, client_connections) =
            match tokio::time::timeout_at(deadline - OPTIONAL_READINGS_MARGIN, optional).await {
                Ok(readings) => {
                    let _ = conn.disconnect().await;
                    readings
                }
                // The connection is dropped in the middle of a statement, not closed politely.
                Err(_) => {
                    debug!(endpoint = %ep, "the optional readings ran out of time");
                    (None, None)
                }
            };
        Ok(Server {
            read_only: read_only != 0,
            executed,
            semi_sync_source: semi != 0,
            semi_sync_active: semi != 0 && semi_status.is_some_and(|v| v.eq_ignore_ascii_case("ON")),
            uptime_seconds: uptime.and_then(|u| u.trim().parse().ok()),
            connection_id,
            replication,
            connection_errors,
            client_connections,
        })
    }

    fn replication_of(&self, row: &Row) -> Result<Replication, GtidParseError> {
        let c = self.flavor.replica_status_columns();
        let text =
            |name: &str| -> Option<String> { row.get_opt::<Option<String>, _>(name).and_then(Result::ok).flatten() };
        let error = [text(c.last_io_error), text(c.last_sql_error)].into_iter().flatten().find(|e| !e.is_empty());
        Ok(Replication {
            source_host: text(c.source_host).unwrap_or_default(),
            source_port: text(c.source_port).and_then(|p| p.parse().ok()).unwrap_or_default(),
            io_running: text(c.io_running).as_deref() == Some("Yes"),
            // MariaDB also reports "Preparing" while the receiver starts: not stopped either.
            io_connecting: matches!(text(c.io_running).as_deref(), Some("Connecting" | "Preparing")),
            sql_running: text(c.sql_running).as_deref() == Some("Yes"),
            retrieved: GtidSet::parse(self.flavor.flavor(), text(c.retrieved_gtids).as_deref().unwrap_or_default())?,
            lag_seconds: text(c.lag_seconds).and_then(|l| l.parse().ok()),
            last_error: error,
            source_refused: text(c.last_io_errno).as_deref() == Some(SOURCE_REFUSED_POSITION),
        })
    }

    /// Makes the server the writable primary: semi-sync's source side first (waiting for
    /// `wait_count` acknowledgements), then writes allowed.
    pub async fn make_writable(&self, ep: &Endpoint, semi_sync: bool, wait_count: u32) -> Result<(), DataPlaneError> {
        self.run(ep, &self.flavor.make_writable(semi_sync, wait_count), OBSERVE_TIMEOUT).await
    }

    /// Stops writes and disconnects every client, so that none keeps writing to a server
    /// that is no longer the primary. Clients go first: a commit waiting for an
    /// acknowledgement (a primary whose replicas were fenced or moved away) holds off
    /// `read_only` for as long as it waits, which with semi-sync's timeout is for ever;
    /// killed, it ends with an error for its client (it was never acknowledged). Then writes
    /// stop, any client that connected meanwhile goes too, and only then is semi-sync's
    /// source side turned off, so nothing waiting is released as if acknowledged.
    pub async fn demote(&self, ep: &Endpoint) -> Result<(), DataPlaneError> {
        self.kill_clients(ep).await?;
        self.run(ep, &[self.flavor.make_read_only()], OBSERVE_TIMEOUT).await?;
        self.kill_clients(ep).await?;
        let off = format!("SET GLOBAL {} = OFF", self.flavor.semi_sync_source_enabled_variable());
        self.run(ep, &[off], OBSERVE_TIMEOUT).await
    }

    /// Disconnects every client connection (not replication, not the operator).
    pub async fn kill_clients(&self, ep: &Endpoint) -> Result<(), DataPlaneError> {
        let work = async {
            let mut conn = self.connect(ep).await?;
            let ids: Vec<u64> = conn
                .query(format!(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE {}",
                    clients_condition(&NOT_CLIENTS)
                ))
                .await
                .map_err(|e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e })?;
            for id in ids {
                // The connection may have ended meanwhile: not an error.
                let _ = conn.query_drop(format!("KILL CONNECTION {id}")).await;
            }
            let _ = conn.disconnect().await;
            Ok(())
        };
        tokio::time::timeout(OBSERVE_TIMEOUT, work)
            .await
            .map_err(|_| DataPlaneError::Timeout { endpoint: ep.to_string(), timeout: OBSERVE_TIMEOUT })?
    }

    /// Makes the server a read-only replica of `source` (host and port as replicas reach
    /// it) and starts replication.
    pub async fn configure_replica(&self, ep: &Endpoint, source: (&str, u16)) -> Result<(), DataPlaneError> {
        self.demote(ep).await?;
        let f = self.flavor;
        let mut statements = self.stopping(f.stop_replica());
        statements.extend(f.prepare_replica());
        let change = f.change_source(&ReplicationSource {
            host: source.0,
            port: source.1,
            user: REPLICATION_USER,
            password: &self.replication_password,
            tls: self.tls.is_some(),
        });
        // The statement with the password goes alone, never through `run`'s debug log.
        self.run(ep, &statements, OBSERVE_TIMEOUT).await?;
        let work = async {
            let mut conn = self.connect(ep).await?;
            let sql_err = |e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e };
            conn.query_drop(change.expose()).await.map_err(sql_err)?;
            conn.query_drop(f.start_replica()).await.map_err(sql_err)?;
            let _ = conn.disconnect().await;
            Ok(())
        };
        tokio::time::timeout(OBSERVE_TIMEOUT, work)
            .await
            .map_err(|_| DataPlaneError::Timeout { endpoint: ep.to_string(), timeout: OBSERVE_TIMEOUT })?
    }

    /// Until when the certificate the server presents to new connections is valid
    /// (`Ssl_server_not_after`); `None` when it serves no TLS or says something else.
    pub async fn served_until(&self, ep: &Endpoint) -> Result<Option<DateTime<Utc>>, DataPlaneError> {
        let work = async {
            let mut conn = self.connect(ep).await?;
            let row: Option<(String, String)> = conn
                .query_first("SHOW GLOBAL STATUS LIKE 'Ssl_server_not_after'")
                .await
                .map_err(|e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e })?;
            let _ = conn.disconnect().await;
            Ok(row.and_then(|(_, v)| openssl_time(&v)))
        };
        tokio::time::timeout(OBSERVE_TIMEOUT, work)
            .await
            .map_err(|_| DataPlaneError::Timeout { endpoint: ep.to_string(), timeout: OBSERVE_TIMEOUT })?
    }

    /// Makes the server read its certificate files again.
    pub async fn reload_tls(&self, ep: &Endpoint) -> Result<(), DataPlaneError> {
        self.run(ep, &[self.flavor.reload_tls().to_string()], OBSERVE_TIMEOUT).await
    }

    /// Stops the receiver: the server acknowledges nothing more to its source.
    pub async fn fence(&self, ep: &Endpoint) -> Result<(), DataPlaneError> {
        self.run(ep, &self.stopping(self.flavor.stop_replica_io_thread()), OBSERVE_TIMEOUT).await
    }

    /// `stop` (of the receiver, or of both threads), after what the flavor needs so that
    /// the stop does not wait on a source that no longer answers
    /// ([`FlavorSql::before_stopping_replica`]).
    fn stopping(&self, stop: &str) -> Vec<String> {
        self.flavor.before_stopping_replica().into_iter().chain([stop]).map(str::to_string).collect()
    }

    /// Waits until the server has applied `gtids`, up to `seconds`.
    pub async fn wait_applied(&self, ep: &Endpoint, gtids: &str, seconds: u32) -> Result<(), DataPlaneError> {
        let deadline = Duration::from_secs(u64::from(seconds) + 5);
        let work = async {
            let mut conn = self.connect(ep).await?;
            let r: Option<Option<i64>> = conn
                .query_first(self.flavor.wait_for_gtids(gtids, seconds))
                .await
                .map_err(|e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e })?;
            let _ = conn.disconnect().await;
            match r.flatten() {
                Some(0) => Ok(()),
                _ => Err(DataPlaneError::NotCaughtUp { endpoint: ep.to_string(), gtids: gtids.to_string(), seconds }),
            }
        };
        tokio::time::timeout(deadline, work)
            .await
            .map_err(|_| DataPlaneError::Timeout { endpoint: ep.to_string(), timeout: deadline })?
    }

    /// Detaches a replica that has applied `received` from its source, ready to be made
    /// writable (which the next pass does, once the new primary is recorded).
    pub async fn detach(&self, ep: &Endpoint, received: &str) -> Result<(), DataPlaneError> {
        if !received.is_empty() {
            self.wait_applied(ep, received, APPLY_TIMEOUT_SECONDS).await?;
        }
        let f = self.flavor;
        let mut statements = self.stopping(f.stop_replica());
        statements.push(f.reset_replica_all().to_string());
        self.run(ep, &statements, OBSERVE_TIMEOUT).await
    }

    /// The server's executed GTID set, as text.
    pub async fn executed(&self, ep: &Endpoint) -> Result<String, DataPlaneError> {
        let work = async {
            let mut conn = self.connect(ep).await?;
            let v: Option<Option<String>> = conn
                .query_first(self.flavor.gtid_executed_query())
                .await
                .map_err(|e| DataPlaneError::Sql { endpoint: ep.to_string(), source: e })?;
            let _ = conn.disconnect().await;
            Ok(v.flatten().unwrap_or_default())
        };
        tokio::time::timeout(OBSERVE_TIMEOUT, work)
            .await
            .map_err(|_| DataPlaneError::Timeout { endpoint: ep.to_string(), timeout: OBSERVE_TIMEOUT })?
    }

    /// A planned change of primary, up to the point where the new primary is recorded: the
    /// old primary stops writes and loses its clients, the target applies everything the
    /// old primary has and forgets its source. The next pass makes the target writable and
    /// points the old primary at it. If the target does not catch up in time the old primary
    /// is made writable again, so a failed switchover costs only a short pause.
    ///
    /// The caller then points the other replicas at the target ([`Self::follow`], or
    /// [`Self::let_go`] when the old primary's pod is being deleted).
    pub async fn switchover(
        &self,
        from: &Endpoint,
        to: &Endpoint,
        semi_sync: bool,
        wait_count: u32,
    ) -> Result<(), DataPlaneError> {
        self.demote(from).await?;
        let position = self.executed(from).await?;
        if let Err(e) = self.detach(to, &position).await {
            // Roll back: the old primary has every transaction, it can take writes again.
            let _ = self.make_writable(from, semi_sync, wait_count).await;
            return Err(e);
        }
        Ok(())
    }

    /// Points `replicas` at a new primary at `source` that has every transaction of the old
    /// one, before it takes writes: its first commits wait for a replica's semi-sync
    /// acknowledgement, and a replica already connected gives it at once instead of a pass
    /// or two later (seen in e2e: the slowest hand-overs of an evicted primary were the new
    /// primary waiting for the replica the next passes pointed at it). A replica registers
    /// for semi-sync when it connects, whether or not the source side is on yet. Best
    /// effort, within [`LET_GO_TIMEOUT`]: a replica left behind is pointed by a later pass.
    pub async fn follow(&self, replicas: &[&Endpoint], source: (&str, u16)) {
        let all = join_all(replicas.iter().map(|ep| self.configure_replica(ep, source)));
        match tokio::time::timeout(LET_GO_TIMEOUT, all).await {
            Ok(results) => {
                for (ep, r) in replicas.iter().zip(results) {
                    if let Err(e) = r {
                        debug!(endpoint = %ep, error = %e, "pointing a replica at the new primary failed");
                    }
                }
            }
            Err(_) => debug!("pointing the replicas at the new primary timed out"),
        }
    }

    /// Lets a handed-over primary whose pod is being deleted stop at once: the other
    /// replicas follow the new primary at `source` ([`Self::follow`]; the old one has
    /// nothing more to send: it is read-only and the new primary has all it has) and its
    /// binary log dumps are ended, so that its preStop hook (`handover.sh`, which holds the
    /// server while any replica replicates from it) returns on its next look and the kubelet
    /// stops the server. Once it refuses connections, the new primary can take writes
    /// without waiting for the read-write Service's routes to settle (see `super::routes`):
    /// nobody can read from the old one. Best effort: what fails here only leaves the server
    /// to stop later, and the new primary to wait for the routes.
    ///
    /// The connection to the old primary is opened first: once the replicas have left, the
    /// hook may return and the server begin to stop at any moment, and a connection attempt
    /// then would hang until its deadline (seen in e2e: 3.7 s).
    pub async fn let_go(&self, from: &Endpoint, replicas: &[&Endpoint], source: (&str, u16)) {
        let conn = tokio::time::timeout(LET_GO_TIMEOUT, self.connect(from))
            .await
            .unwrap_or_else(|_| Err(DataPlaneError::Timeout { endpoint: from.to_string(), timeout: LET_GO_TIMEOUT }));
        self.follow(replicas, source).await;
        let work = async {
            let mut conn = conn?;
            let dumps: Vec<u64> = conn
                .query("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                .await
                .map_err(|e| DataPlaneError::Sql { endpoint: from.to_string(), source: e })?;
            for id in dumps {
                let _ = conn.query_drop(format!("KILL CONNECTION {id}")).await;
            }
            let _ = conn.disconnect().await;
            Ok::<(), DataPlaneError>(())
        };
        match tokio::time::timeout(LET_GO_TIMEOUT, work).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => debug!(error = %e, "letting the handed-over primary go failed"),
            Err(_) => debug!(endpoint = %from, "letting the handed-over primary go timed out"),
        }
    }
}

/// `Aborted_connects` + `Aborted_clients` of the server on `conn`, for the abnormality
/// detection. Optional: a server whose counters cannot be read is still observed, so that
/// the clustering never depends on them.
async fn connection_errors(conn: &mut Conn, ep: &Endpoint) -> Option<u64> {
    let rows: Vec<(String, String)> = match conn.query(CONNECTION_ERRORS_QUERY).await {
        Ok(rows) => rows,
        Err(e) => {
            debug!(endpoint = %ep, error = %e, "reading the connection error counters failed");
            return None;
        }
    };
    if rows.is_empty() {
        return None;
    }
    rows.iter().map(|(_, value)| value.parse::<u64>().ok()).sum()
}

/// The client connections of the server on `conn` ([`client_connections_query`]), for
/// read-replica auto-scaling. Optional like [`connection_errors`]: the clustering never
/// depends on it.
async fn client_connections(conn: &mut Conn, ep: &Endpoint, flavor: &dyn FlavorSql) -> Option<u64> {
    match conn.query_first::<u64, _>(client_connections_query(flavor)).await {
        Ok(count) => count,
        Err(e) => {
            debug!(endpoint = %ep, error = %e, "counting the client connections failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Flavor;

    #[test]
    fn servers_report_validity_as_openssl_prints_it() {
        let at = |s: &str| openssl_time(s).map(|t| t.to_rfc3339());
        assert_eq!(at("Dec  8 01:09:55 2026 GMT").as_deref(), Some("2026-12-08T01:09:55+00:00"));
        assert_eq!(at("Mar 28 23:00:01 2027 GMT").as_deref(), Some("2027-03-28T23:00:01+00:00"));
        assert_eq!(at(""), None);
        assert_eq!(at("2026-12-08"), None);
    }

    #[test]
    fn the_count_spares_backups_and_probes_beyond_what_a_demotion_spares() {
        assert_eq!(
            clients_condition(&NOT_CLIENTS),
            "ID <> CONNECTION_ID() AND USER NOT IN ('statecraft', 'repl', 'system user', 'event_scheduler') \
             AND COMMAND NOT LIKE 'Binlog Dump%'"
        );
        assert_eq!(
            client_connections_query(crate::flavor::sql(Flavor::Mariadb)),
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() \
             AND USER NOT IN ('statecraft', 'repl', 'system user', 'event_scheduler', 'backup', 'exporter') \
             AND COMMAND NOT LIKE 'Binlog Dump%' AND NOT (USER = 'mysql' AND HOST = 'localhost')"
        );
    }

    #[test]
    fn mysql_root_over_the_network_is_a_client_though_the_probes_use_root() {
        let query = client_connections_query(crate::flavor::sql(Flavor::Mysql));
        assert!(query.ends_with("AND NOT (USER = 'root' AND HOST = 'localhost')"), "{query}");
        assert!(!query.contains("'root',"), "{query}");
    }
}
