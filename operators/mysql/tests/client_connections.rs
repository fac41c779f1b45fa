//! The client connections the data plane reports per server (for read-replica auto-scaling),
//! against a real MariaDB primary and replica: only clients count, not the operator, the
//! replication threads, the replica's binary log dump, the backup account or the probes'
//! local account, all of which a pod's server has open next to its clients.

mod support;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use statecraft_mysql::api::Flavor;
use statecraft_mysql::clustering::dataplane::{DataPlane, Endpoint};
use statecraft_mysql::clustering::observed::ServerState;
use statecraft_mysql::flavor::{self, BACKUP_USER, REPLICATION_USER, ROOT_USER};
use support::{MariaDb, first_value as value, operator_conn as operator, passwords, start_server as start};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How long a change of connections or replication state may take to show.
const SETTLE: Duration = Duration::from_secs(20);

fn endpoint(server: &MariaDb) -> Endpoint {
    Endpoint { host: "127.0.0.1".into(), port: server.port }
}

/// The client connections `DataPlane::observe` reports for `server`.
async fn observed_clients(dp: &DataPlane, server: &MariaDb) -> Option<u64> {
    match dp.observe(&endpoint(server)).await {
        ServerState::Up(s) => s.client_connections,
        ServerState::Unreachable(why) | ServerState::Refused(why) => {
            panic!("server {} unreachable: {why}", server.ordinal)
        }
    }
}

/// Observes `server` until it reports `want` client connections or [`SETTLE`] passes; the
/// last report. A closed connection leaves the server's process list a moment later.
async fn clients_settling_at(dp: &DataPlane, server: &MariaDb, want: u64) -> Option<u64> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let seen = observed_clients(dp, server).await;
        if seen == Some(want) || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A connection to `server` over TCP as `user`.
async fn connect(server: &MariaDb, user: &str, password: &str) -> TestResult<Conn> {
    Ok(Conn::new(server.opts(user, password)).await?)
}

#[tokio::test]
async fn observe_counts_only_the_client_connections_of_each_server() -> TestResult {
    let primary = start(0).await;
    let replica = start(1).await;
    let p = passwords();
    let mariadb = flavor::sql(Flavor::Mariadb);
    let dp = DataPlane::new(mariadb, p.operator.into(), p.replication.into());

    // A replicating pair as the operator sets it up: a writable semi-sync primary, and a
    // replica whose receiver is served by a binary log dump thread on the primary.
    dp.make_writable(&endpoint(&primary), true, 1).await?;
    dp.configure_replica(&endpoint(&replica), ("127.0.0.1", primary.port)).await?;
    let mut op = operator(&primary).await?;
    let deadline = Instant::now() + SETTLE;
    loop {
        let dumps =
            value(&mut op, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                .await?;
        let receiving = match dp.observe(&endpoint(&replica)).await {
            ServerState::Up(s) => s.replication.is_some_and(|r| r.io_running && r.sql_running),
            ServerState::Unreachable(_) | ServerState::Refused(_) => false,
        };
        if dumps == "1" && receiving {
            break;
        }
        assert!(Instant::now() < deadline, "replication did not start: {dumps} dump threads; receiving {receiving}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Connections that are not clients, on the primary: the operator's (`op`, and the
    // observing one), a replication login, a backup Job's, and the probes' local account
    // through the Unix socket (the harness's data directory has no `mysql@localhost`, so
    // it is made here, with a password instead of the pods' socket authentication).
    let probe_user = mariadb.local_probe_user();
    op.query_drop("SET SESSION sql_log_bin = 0").await?;
    op.query_drop(format!("CREATE OR REPLACE USER '{probe_user}'@'localhost' IDENTIFIED BY 'probe-pass'")).await?;
    let _repl = connect(&primary, REPLICATION_USER, p.replication).await?;
    let _backup = connect(&primary, BACKUP_USER, p.backup).await?;
    let probe_opts = OptsBuilder::default()
        .socket(Some(primary.socket().display().to_string()))
        .user(Some(probe_user))
        .pass(Some("probe-pass"));
    let mut probe = Conn::new(probe_opts).await?;
    assert_eq!(value(&mut probe, "SELECT CURRENT_USER()").await?, format!("{probe_user}@localhost"));
    assert_eq!(observed_clients(&dp, &primary).await, Some(0), "no client yet on the primary");
    assert_eq!(observed_clients(&dp, &replica).await, Some(0), "the replica's own threads are no clients");

    // Three clients of the primary.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(connect(&primary, ROOT_USER, p.root).await?);
    }
    assert_eq!(observed_clients(&dp, &primary).await, Some(3));
    assert_eq!(observed_clients(&dp, &replica).await, Some(0), "clients of the primary are not the replica's");

    // One leaves.
    clients.pop().expect("three clients").disconnect().await?;
    assert_eq!(clients_settling_at(&dp, &primary, 2).await, Some(2));

    // The count is of connections, not of accounts: a client of the replica counts there.
    let _reader = connect(&replica, ROOT_USER, p.root).await?;
    assert_eq!(observed_clients(&dp, &replica).await, Some(1));
    assert_eq!(observed_clients(&dp, &primary).await, Some(2));
    Ok(())
}
