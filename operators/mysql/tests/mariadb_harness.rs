//! The MariaDB test harness against real servers, and what the operator's generated settings
//! and init file do on a real MariaDB 10.11: every server starts read-only, the init file
//! leaves the binary log empty, the network administrator cannot write while read-only, and
//! a crash plus restart keeps committed data and re-applies the accounts.

mod support;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error as MyError};
use statecraft_mysql::api::Flavor;
use statecraft_mysql::flavor::{self, OPERATOR_USER, REPLICATION_USER, ROOT_USER};
use support::{
    MariaDb, first_value as value, mariadb_settings, operator_conn as operator, passwords, start_server as start,
};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// MariaDB's ER_OPTION_PREVENTS_STATEMENT: "running with the --read-only option".
const ER_OPTION_PREVENTS_STATEMENT: u16 = 1290;

fn server_code(err: &MyError) -> Option<u16> {
    match err {
        MyError::Server(e) => Some(e.code),
        _ => None,
    }
}

#[tokio::test]
async fn a_fresh_server_is_read_only_and_the_init_file_logs_nothing() -> TestResult {
    let server = start(2).await;
    let mut conn = operator(&server).await?;

    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.read_only").await?, "1", "every server starts read-only");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.server_id").await?, "102");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.report_host").await?, "127.0.0.1");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.log_bin").await?, "1");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_strict_mode").await?, "1");

    // The init file created three accounts and granted privileges, all with sql_log_bin=0:
    // no GTID, and no event at all beyond the binary log's own bookkeeping.
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?, "", "init file wrote to the binlog");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_state").await?, "");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_current_pos").await?, "");
    let kinds: Vec<String> = conn
        .query_map("SHOW BINLOG EVENTS", |(_log, _pos, kind, ..): (String, u64, String, u32, u64, String)| kind)
        .await?;
    assert!(
        kinds.iter().all(|k| matches!(k.as_str(), "Format_desc" | "Gtid_list" | "Binlog_checkpoint")),
        "unexpected binlog events: {kinds:?}"
    );

    // The other accounts exist with the given passwords.
    let mut repl = Conn::new(server.opts(REPLICATION_USER, passwords().replication)).await?;
    assert_eq!(value(&mut repl, "SELECT CURRENT_USER()").await?, "repl@%");
    repl.disconnect().await?;
    let mut root = Conn::new(server.opts(ROOT_USER, passwords().root)).await?;
    assert_eq!(value(&mut root, "SELECT CURRENT_USER()").await?, "root@%");
    root.disconnect().await?;
    let wrong = Conn::new(server.opts(OPERATOR_USER, "not the password")).await;
    assert!(matches!(wrong.as_ref().map_err(server_code), Err(Some(1045))), "{wrong:?}");

    conn.disconnect().await?;
    Ok(())
}

#[tokio::test]
async fn root_from_the_network_cannot_write_while_read_only() -> TestResult {
    let server = start(0).await;
    let mut root = Conn::new(server.opts(ROOT_USER, passwords().root)).await?;
    let grants: Vec<String> = root.query("SHOW GRANTS").await?;
    assert!(!grants.iter().any(|g| g.contains("READ_ONLY ADMIN")), "{grants:?}");
    assert!(grants.iter().any(|g| g.contains("SUPER")), "SUPER no longer bypasses read_only in 10.11: {grants:?}");

    for sql in ["CREATE DATABASE errant", "SET GLOBAL read_only = OFF"] {
        let err = root.query_drop(sql).await.expect_err(sql);
        // 1290 for the write; 1227 (access denied, READ_ONLY ADMIN needed) for the toggle.
        assert!(matches!(server_code(&err), Some(ER_OPTION_PREVENTS_STATEMENT | 1227)), "{sql}: {err}");
    }
    let err = root.query_drop("CREATE DATABASE errant").await.expect_err("write refused");
    assert_eq!(server_code(&err), Some(ER_OPTION_PREVENTS_STATEMENT), "{err}");
    assert!(err.to_string().contains("read-only"), "{err}");
    root.disconnect().await?;

    let mut conn = operator(&server).await?;
    assert_eq!(
        value(&mut conn, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'errant'").await?,
        "0"
    );
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?, "");
    conn.disconnect().await?;
    Ok(())
}

#[tokio::test]
async fn kill_and_restart_keep_committed_data_and_reapply_the_accounts() -> TestResult {
    let mut server = start(1).await;
    let mut conn = operator(&server).await?;
    conn.query_drop("SET GLOBAL read_only = OFF").await?;
    conn.query_drop("CREATE DATABASE app").await?;
    conn.query_drop("CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB").await?;
    conn.query_drop("INSERT INTO app.t VALUES (1, 'one'), (2, 'two'), (3, 'three')").await?;
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?, "0-101-3", "three transactions");
    // Someone changes the operator's password (logged: a fourth GTID); the init file resets
    // it at the next start.
    server.local_admin("ALTER USER 'statecraft'@'%' IDENTIFIED BY 'changed'").await?;
    let gtid = value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?;
    assert_eq!(gtid, "0-101-4");
    drop(conn);

    assert!(server.is_running());
    server.kill();
    assert!(!server.is_running());
    assert!(Conn::new(server.opts(OPERATOR_USER, passwords().operator)).await.is_err(), "killed");

    server.restart().await?;
    assert!(server.is_running());
    let mut conn = operator(&server).await?;
    assert_eq!(value(&mut conn, "SELECT GROUP_CONCAT(v ORDER BY id) FROM app.t").await?, "one,two,three");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.read_only").await?, "1", "read-only again after a restart");
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?, gtid, "the init file ran again unlogged");
    conn.disconnect().await?;
    Ok(())
}

#[tokio::test]
async fn an_init_file_error_fails_the_start_with_the_log() {
    // mariadbd logs the error, skips the rest of the file and starts anyway; the harness
    // must not report such a server as started.
    let init = "SET SESSION sql_log_bin = 0;\nCREATE USER this is not sql;\n";
    let err = MariaDb::start(4, &mariadb_settings(1), init).await.expect_err("a broken init file fails the start");
    let text = err.to_string();
    assert!(text.contains("init file"), "{text}");
    assert!(text.contains("1064"), "the log's tail is quoted: {text}");
}

/// What the operator must be able to do with its own account over TCP: promote (make
/// writable), demote (make read-only), and prepare a read-only server to replicate.
///
/// On MariaDB 10.11 this needs READ_ONLY ADMIN, both to set `read_only` (error 1227
/// without it) and to set `gtid_slave_pos` on a read-only server (error 1290: it writes
/// mysql.gtid_slave_pos), so the init file must leave that privilege to the operator.
#[tokio::test]
async fn operator_account_can_switch_read_only() -> TestResult {
    let server = start(3).await;
    let maria = flavor::sql(Flavor::Mariadb);
    let mut conn = operator(&server).await?;
    for sql in maria.prepare_replica() {
        conn.query_drop(&sql).await.map_err(|e| format!("{sql}: {e}"))?;
    }
    for sql in maria.make_writable(false, 0) {
        conn.query_drop(&sql).await.map_err(|e| format!("{sql}: {e}"))?;
    }
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.read_only").await?, "0");
    let demote = maria.make_read_only();
    conn.query_drop(&demote).await.map_err(|e| format!("{demote}: {e}"))?;
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.read_only").await?, "1");
    conn.disconnect().await?;
    Ok(())
}

/// A client of the read-only Service must not create a transaction of its own on a replica
/// (an errant GTID). MariaDB writes FLUSH statements (without LOCAL) to the binary log even
/// on a read-only server, and RELOAD lets root@'%' run them; RESET MASTER (also RELOAD)
/// even erases a replica's binary log.
#[tokio::test]
async fn root_from_the_network_cannot_log_a_transaction_while_read_only() -> TestResult {
    let server = start(5).await;
    let mut root = Conn::new(server.opts(ROOT_USER, passwords().root)).await?;
    for sql in ["FLUSH PRIVILEGES", "FLUSH TABLES", "FLUSH STATUS"] {
        let _ = root.query_drop(sql).await;
        let gtid = value(&mut root, "SELECT @@GLOBAL.gtid_binlog_pos").await?;
        assert_eq!(gtid, "", "{sql} on a read-only server logged a transaction");
    }
    root.disconnect().await?;
    Ok(())
}
