//! The metrics sidecar against real servers: the Prometheus project's mysqld_exporter, with
//! the arguments the operator gives it, logs in as the account the operator's init file
//! creates and reads every collector it is given on a primary and on a replica; the account
//! reads status and nothing else and holds at most three connections. No Kubernetes (the
//! e2e test runs the sidecar in the cluster's pods).

mod support;

use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use statecraft_mysql::api::Flavor;
use statecraft_mysql::build::exporter::EXTRA_COLLECTORS;
use statecraft_mysql::clustering::dataplane::{DataPlane, Endpoint};
use statecraft_mysql::flavor::{self, EXPORTER_MAX_CONNECTIONS, EXPORTER_USER};
use statecraft_shared::exposition::value;
use support::exporter::Exporter;
use support::{operator_conn, passwords, start_server};

/// The collectors mysqld_exporter v0.16.0 runs by default (its
/// `mysql_exporter_collector_success` series name them `collect.<name>`).
const DEFAULT_COLLECTORS: [&str; 6] = [
    "global_status",
    "global_variables",
    "slave_status",
    "info_schema.innodb_cmp",
    "info_schema.innodb_cmpmem",
    "info_schema.query_response_time",
];

fn endpoint(port: u16) -> Endpoint {
    Endpoint { host: "127.0.0.1".into(), port }
}

/// MariaDB's error for an account over its connection limit (ER_USER_LIMIT_REACHED).
const USER_LIMIT_REACHED: u16 = 1226;
/// MariaDB's error for a table the account may not read (ER_TABLEACCESS_DENIED_ERROR).
const TABLE_ACCESS_DENIED: u16 = 1142;

#[tokio::test]
async fn the_exporter_reads_every_collector_of_a_primary_and_a_replica_and_nothing_else() {
    let primary = start_server(0).await;
    let replica = start_server(1).await;
    let p = passwords();
    let dp = DataPlane::new(flavor::sql(Flavor::Mariadb), p.operator.into(), p.replication.into());
    dp.make_writable(&endpoint(primary.port), false, 0).await.expect("primary writable");
    dp.configure_replica(&endpoint(replica.port), ("127.0.0.1", primary.port)).await.expect("replica configured");

    let mut conn = operator_conn(&primary).await.expect("operator connection");
    conn.query_drop("CREATE DATABASE shop").await.expect("create database");
    conn.query_drop("CREATE TABLE shop.orders (id INT PRIMARY KEY, note TEXT)").await.expect("create table");
    for id in 0..50 {
        conn.exec_drop("INSERT INTO shop.orders VALUES (?, 'x')", (id,)).await.expect("insert");
    }

    let on_primary = Exporter::start(&primary).await;
    let on_replica = Exporter::start(&replica).await;
    // The replica has caught up before its figures are read.
    let deadline = Instant::now() + Duration::from_secs(30);
    let replica_series = loop {
        let s = on_replica.scrape().await;
        if value(&s, "mysql_slave_status_slave_sql_running", &[]) == Some(1.0)
            && value(&s, "mysql_slave_status_slave_io_running", &[]) == Some(1.0)
            && value(&s, "mysql_slave_status_seconds_behind_master", &[]) == Some(0.0)
        {
            break s;
        }
        assert!(Instant::now() < deadline, "the replica's exporter never saw replication running: {s:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let primary_series = on_primary.scrape().await;

    for (who, series) in [("primary", &primary_series), ("replica", &replica_series)] {
        assert_eq!(value(series, "mysql_up", &[]), Some(1.0), "{who}: the exporter logs in");
        let collectors: Vec<(&str, f64)> = series
            .iter()
            .filter(|s| s.name == "mysql_exporter_collector_success")
            .filter_map(|s| Some((s.label("collector")?, s.value)))
            .collect();
        for wanted in DEFAULT_COLLECTORS.iter().chain(EXTRA_COLLECTORS.iter()) {
            let wanted = format!("collect.{wanted}");
            assert_eq!(
                collectors.iter().find(|(c, _)| *c == wanted).map(|(_, v)| *v),
                Some(1.0),
                "{who}: collector {wanted} must run and succeed with the account's privileges: {collectors:?}"
            );
        }
        // A figure of each extra collector is there.
        for name in [
            "mysql_info_schema_innodb_metrics_buffer_buffer_pool_reads_total",
            "mysql_info_schema_innodb_metrics_transaction_trx_rseg_history_len",
            "mysql_info_schema_processlist_threads",
            "mysql_binlog_files",
        ] {
            assert!(series.iter().any(|s| s.name == name), "{who}: no {name}");
        }
    }
    // The writes show in the primary's figures, and its role in the variables.
    let inserts = value(&primary_series, "mysql_global_status_commands_total", &[("command", "insert")]);
    assert!(inserts.is_some_and(|n| n >= 50.0), "inserts counted: {inserts:?}");
    assert_eq!(value(&primary_series, "mysql_global_variables_read_only", &[]), Some(0.0));
    assert_eq!(value(&replica_series, "mysql_global_variables_read_only", &[]), Some(1.0));

    // The account reads status, not data, and holds at most three connections.
    let exporter_password = p.exporter.expect("the harness has an exporter password");
    let mut conns: Vec<Conn> = Vec::new();
    for _ in 0..EXPORTER_MAX_CONNECTIONS {
        conns.push(Conn::new(primary.opts(EXPORTER_USER, exporter_password)).await.expect("exporter connection"));
    }
    let denied = conns[0].query_drop("SELECT * FROM shop.orders").await.expect_err("reading data must be refused");
    assert!(
        matches!(&denied, mysql_async::Error::Server(e) if e.code == TABLE_ACCESS_DENIED),
        "reading data: {denied:?}"
    );
    let denied = conns[0].query_drop("INSERT INTO shop.orders VALUES (99, 'y')").await.expect_err("writes refused");
    assert!(matches!(&denied, mysql_async::Error::Server(e) if e.code == TABLE_ACCESS_DENIED), "writing: {denied:?}");
    // The exporters themselves may hold connections only while scraping; stop them first.
    drop(on_primary);
    drop(on_replica);
    let deadline = Instant::now() + Duration::from_secs(10);
    let over = loop {
        match Conn::new(primary.opts(EXPORTER_USER, exporter_password)).await {
            Err(e) => break e,
            Ok(extra) => {
                // An exporter connection had not closed yet: this one took its place.
                drop(extra);
                assert!(Instant::now() < deadline, "a fourth connection was accepted");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(
        matches!(&over, mysql_async::Error::Server(e) if e.code == USER_LIMIT_REACHED),
        "a fourth connection: {over:?}"
    );
}
