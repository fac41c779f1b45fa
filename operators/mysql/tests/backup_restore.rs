//! Logical backups to a real S3 server (s3s-fs) and restores from it, between real MariaDB
//! servers started with the operator's settings and init file (see `support`).
//!
//! `measure_backup_throughput` is a measurement, not a test: run it on its own with
//! `cargo test -p statecraft-mysql --test backup_restore -- --ignored --nocapture`
//! (`STATECRAFT_MEASURE_MIB` sets the table size, default 200).

mod support;

use std::time::Instant;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error as MyError};
use statecraft_mysql::api::Flavor;
use statecraft_mysql::backup::{
    BackupError, ClientCommand, ClientConnection, backup_to_s3, dump_command, restore_command, restore_from_s3,
};
use statecraft_mysql::flavor::{self, BACKUP_USER, OPERATOR_USER};
use statecraft_shared::s3::{S3Store, TransferConfig};
use statecraft_shared::testing::s3::S3Server;
use support::{MariaDb, first_value as value, operator_conn as operator, passwords, start_server as start};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

const BUCKET: &str = "backups";
const MIB: usize = 1024 * 1024;

async fn s3() -> S3Server {
    let server = S3Server::start().await.expect("start s3s-fs");
    server.create_bucket(BUCKET).expect("create bucket");
    server
}

fn store(s3: &S3Server) -> S3Store {
    s3.store(BUCKET, "mysql/test").expect("store")
}

fn connection(server: &MariaDb, password: &str) -> ClientConnection {
    ClientConnection::new("127.0.0.1", server.port, OPERATOR_USER, password)
}

/// Dumps as the backup account the Jobs use: it reads everything and writes nothing.
fn dump_of(server: &MariaDb) -> ClientCommand {
    let conn = ClientConnection::new("127.0.0.1", server.port, BACKUP_USER, passwords().backup);
    dump_command(Flavor::Mariadb, &conn).expect("MariaDB dump command")
}

fn restore_into(server: &MariaDb) -> ClientCommand {
    restore_command(Flavor::Mariadb, &connection(server, passwords().operator)).expect("MariaDB restore command")
}

/// Opens `server` for writes as the operator promotes a primary: its own account over TCP,
/// the flavor's statements (semi-sync off: there is no replica to acknowledge).
async fn make_writable(server: &MariaDb) -> TestResult {
    let mut conn = operator(server).await?;
    for sql in flavor::sql(Flavor::Mariadb).make_writable(false, 0) {
        conn.query_drop(&sql).await.map_err(|e| format!("{sql}: {e}"))?;
    }
    assert_eq!(value(&mut conn, "SELECT @@GLOBAL.read_only").await?, "0");
    conn.disconnect().await?;
    Ok(())
}

/// A schema with what a logical backup must carry: InnoDB rows with a BLOB of every byte
/// value, 4-byte UTF-8, NULLs, decimals and dates; a view, a trigger, a procedure and an
/// event.
async fn fill_shop(conn: &mut Conn) -> TestResult {
    conn.query_drop("CREATE DATABASE shop CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci").await?;
    conn.query_drop(
        "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(200), data BLOB, price DECIMAL(10,2), \
         created DATETIME(6), counter INT NOT NULL DEFAULT 0) ENGINE=InnoDB",
    )
    .await?;
    let every_byte: Vec<u8> = (0..=255u8).collect();
    conn.exec_drop(
        "INSERT INTO shop.items (id, name, data, price, created) VALUES (?, ?, ?, ?, '2026-01-31 12:34:56.789012')",
        (1, "日本語 Ünïcödé 🐬 'quote' \"dq\" back\\slash\nnewline", every_byte, "12.34"),
    )
    .await?;
    conn.query_drop("INSERT INTO shop.items (id, name, data, price) VALUES (2, NULL, NULL, NULL)").await?;
    conn.query_drop(
        "INSERT INTO shop.items (id, name, data, price, created) \
         SELECT seq + 2, CONCAT('item-', seq), UNHEX(SHA2(seq, 512)), seq / 100, NOW(6) FROM shop.seq_1_to_5000",
    )
    .await?;
    conn.query_drop("CREATE VIEW shop.cheap AS SELECT id, name FROM shop.items WHERE price < 1").await?;
    conn.query_drop(
        "CREATE TRIGGER shop.count_updates BEFORE UPDATE ON shop.items FOR EACH ROW SET NEW.counter = OLD.counter + 1",
    )
    .await?;
    conn.query_drop("CREATE PROCEDURE shop.total(OUT t DECIMAL(20,2)) SELECT SUM(price) INTO t FROM shop.items")
        .await?;
    conn.query_drop("CREATE EVENT shop.nightly ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM shop.items WHERE id < 0")
        .await?;
    Ok(())
}

/// Name, data, creation time (as text) and update counter of a row of `shop.items`.
type ItemRow = (Option<String>, Option<Vec<u8>>, String, i32);

/// Row count, `CHECKSUM TABLE`, and the stored programs of `shop`.
async fn fingerprint(conn: &mut Conn) -> TestResult<(String, String, String)> {
    let count = value(conn, "SELECT COUNT(*) FROM shop.items").await?;
    let checksum: Option<(String, Option<u64>)> = conn.query_first("CHECKSUM TABLE shop.items").await?;
    let checksum = format!("{:?}", checksum.and_then(|(_, c)| c));
    let programs = value(
        conn,
        "SELECT CONCAT_WS(',', \
           (SELECT GROUP_CONCAT(ROUTINE_NAME) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'shop'), \
           (SELECT GROUP_CONCAT(TRIGGER_NAME) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'shop'), \
           (SELECT GROUP_CONCAT(TABLE_NAME) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = 'shop'), \
           (SELECT GROUP_CONCAT(EVENT_NAME) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'shop'))",
    )
    .await?;
    Ok((count, checksum, programs))
}

fn objects(s3: &S3Server) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![s3.root().join(BUCKET)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read bucket dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restores_into_a_fresh_server_with_identical_data() -> TestResult {
    let (s3, source, target) = tokio::join!(s3(), start(0), start(1));
    let store = store(&s3);
    make_writable(&source).await?;
    let mut src = operator(&source).await?;
    fill_shop(&mut src).await?;
    // Updated once through the trigger, so the restored counter shows the row, not the
    // trigger, was copied.
    src.query_drop("UPDATE shop.items SET price = price + 1 WHERE id = 3").await?;
    let gtid_at_dump = value(&mut src, "SELECT @@GLOBAL.gtid_binlog_pos").await?;
    assert!(gtid_at_dump.starts_with("0-100-"), "{gtid_at_dump}");
    let source_print = fingerprint(&mut src).await?;

    let backup = backup_to_s3(&dump_of(&source), None, &store, "shop/full.sql").await?;
    assert_eq!(backup.gtid(), gtid_at_dump, "the recorded position is the source's at the dump");
    assert_eq!(backup.position.binlog_file.as_deref(), Some("mysql-bin.000001"));
    assert!(backup.position.binlog_position.is_some_and(|p| p > 4));
    assert_eq!(backup.receipt.object_key, "mysql/test/shop/full.sql");
    let on_disk = std::fs::metadata(s3.object_path(BUCKET, &backup.receipt.object_key))?.len();
    assert_eq!((backup.bytes, backup.receipt.size), (on_disk, on_disk));
    assert!(backup.started_at <= backup.finished_at);
    // Nothing the dump should leave out, and nothing it should not contain.
    let text = std::fs::read_to_string(s3.object_path(BUCKET, &backup.receipt.object_key))?;
    assert!(text.contains("CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop`"));
    assert!(!text.contains("Current Database: `mysql`"), "the mysql schema is not dumped");
    assert!(!text.contains("IDENTIFIED BY"), "no account or password hash is dumped");

    make_writable(&target).await?;
    let restored = restore_from_s3(&store, "shop/full.sql", Some(&backup.sha256), &restore_into(&target)).await?;
    assert_eq!((restored.bytes, restored.sha256.as_str()), (backup.bytes, backup.sha256.as_str()));
    assert!(restored.sha256_verified);

    let mut dst = operator(&target).await?;
    assert_eq!(fingerprint(&mut dst).await?, source_print, "rows, checksum and stored programs are equal");
    for conn in [&mut src, &mut dst] {
        let row: Option<ItemRow> =
            conn.query_first("SELECT name, data, CAST(created AS CHAR), counter FROM shop.items WHERE id = 1").await?;
        let (name, data, created, counter) = row.ok_or("row 1 missing")?;
        assert_eq!(name.as_deref(), Some("日本語 Ünïcödé 🐬 'quote' \"dq\" back\\slash\nnewline"));
        assert_eq!(data, Some((0..=255u8).collect::<Vec<u8>>()));
        assert_eq!(created, "2026-01-31 12:34:56.789012");
        assert_eq!(counter, 0);
    }
    assert_eq!(value(&mut dst, "SELECT counter FROM shop.items WHERE id = 3").await?, "1");
    let mut total: Option<String> = None;
    dst.query_drop("CALL shop.total(@t)").await?;
    if let Some(t) = dst.query_first::<Option<String>, _>("SELECT @t").await? {
        total = t;
    }
    assert!(total.is_some(), "the restored procedure runs");

    // The target kept its own accounts and history: the restore is an ordinary, logged
    // write of its own server (its replicas receive it), and carries no source position.
    let target_gtid = value(&mut dst, "SELECT @@GLOBAL.gtid_binlog_pos").await?;
    assert!(target_gtid.starts_with("0-101-"), "{target_gtid}");
    assert_eq!(value(&mut dst, "SELECT @@GLOBAL.gtid_slave_pos").await?, "");
    src.disconnect().await?;
    dst.disconnect().await?;
    Ok(())
}

/// The sequence number of a single-domain GTID position such as `0-100-42`.
fn seq_no(gtid: &str) -> u64 {
    gtid.rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("not one GTID: {gtid:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorded_position_is_the_snapshots_under_concurrent_writes() -> TestResult {
    let (s3, source, target) = tokio::join!(s3(), start(0), start(1));
    let store = store(&s3);
    make_writable(&source).await?;
    let mut conn = operator(&source).await?;
    conn.query_drop("CREATE DATABASE ticks").await?;
    conn.query_drop("CREATE TABLE ticks.t (id INT AUTO_INCREMENT PRIMARY KEY, at DATETIME(6)) ENGINE=InnoDB").await?;
    // Some bulk, so that the dump takes a while.
    conn.query_drop("CREATE TABLE ticks.bulk (id INT PRIMARY KEY, v CHAR(200)) ENGINE=InnoDB").await?;
    conn.query_drop("INSERT INTO ticks.bulk SELECT seq, REPEAT('x', 200) FROM ticks.seq_1_to_100000").await?;
    let before = seq_no(&value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?);

    // One transaction (one GTID) per row, as fast as the server commits them.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut writer_conn = operator(&source).await?;
    let writer = tokio::spawn(async move {
        let mut rows = 0u64;
        while stop_rx.try_recv().is_err() {
            writer_conn.query_drop("INSERT INTO ticks.t (at) VALUES (NOW(6))").await?;
            rows += 1;
        }
        writer_conn.disconnect().await?;
        Ok::<u64, MyError>(rows)
    });
    while value(&mut conn, "SELECT COUNT(*) FROM ticks.t").await?.parse::<u64>()? < 20 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let backup = backup_to_s3(&dump_of(&source), None, &store, "ticks.sql").await?;
    let _ = stop_tx.send(());
    let written = writer.await??;

    make_writable(&target).await?;
    restore_from_s3(&store, "ticks.sql", Some(&backup.sha256), &restore_into(&target)).await?;
    let mut dst = operator(&target).await?;
    let restored: u64 = value(&mut dst, "SELECT COUNT(*) FROM ticks.t").await?.parse()?;
    let at_snapshot = seq_no(backup.gtid()) - before;
    assert_eq!(restored, at_snapshot, "the dump holds exactly the transactions up to its recorded GTID");
    assert!(restored >= 20 && restored < written, "writes went on during the dump: {restored} of {written}");
    let max_id: u64 = value(&mut dst, "SELECT MAX(id) FROM ticks.t").await?.parse()?;
    assert_eq!(max_id, restored, "a prefix of the history, without gaps");
    conn.disconnect().await?;
    dst.disconnect().await?;
    Ok(())
}

#[tokio::test]
async fn a_dump_with_a_wrong_password_fails_and_stores_nothing() -> TestResult {
    let (s3, source) = tokio::join!(s3(), start(0));
    let store = store(&s3);
    let dump = dump_command(Flavor::Mariadb, &connection(&source, "wrong password"))?;
    let err = backup_to_s3(&dump, None, &store, "denied.sql").await.expect_err("wrong password");
    let BackupError::DumpFailed { ref stderr, ref key, .. } = err else { panic!("expected DumpFailed, got {err}") };
    assert_eq!(key, "denied.sql");
    assert!(stderr.contains("Access denied"), "the client's error is quoted: {err}");
    assert!(!err.to_string().contains("wrong password"));
    assert!(store.list("").await?.is_empty(), "no object: {:?}", objects(&s3));
    assert!(s3.incomplete_upload_files()?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_dump_failing_after_several_parts_aborts_the_multipart_upload() -> TestResult {
    let s3 = s3().await;
    let store = store(&s3).with_transfer_config(TransferConfig { part_size: 5 * MIB, ..Default::default() })?;

    // 12 MiB written, then a failure: two parts were uploaded before the end was seen.
    let crash =
        ClientCommand::new("sh", vec!["-c".into(), "head -c 12582912 /dev/zero; echo boom >&2; exit 3".into()], "");
    let err = backup_to_s3(&crash, None, &store, "crash.sql").await.expect_err("exit status 3");
    assert!(
        matches!(&err, BackupError::DumpFailed { reason, stderr, .. } if reason.contains('3') && stderr == "boom"),
        "{err}"
    );

    // Exit status 0 is not enough: a dump without its completion line was cut short.
    let cut = ClientCommand::new(
        "sh",
        vec!["-c".into(), "echo '-- MariaDB dump'; echo 'CREATE TABLE t (a INT);'".into()],
        "",
    );
    let err = backup_to_s3(&cut, None, &store, "cut.sql").await.expect_err("no completion line");
    assert!(err.to_string().contains("Dump completed"), "{err}");

    // Nor is a complete dump without a position.
    let no_gtid = ClientCommand::new("sh", vec!["-c".into(), "echo '-- Dump completed on now'".into()], "");
    let err = backup_to_s3(&no_gtid, None, &store, "nogtid.sql").await.expect_err("no GTID");
    assert!(err.to_string().contains("GTID"), "{err}");

    assert!(store.list("").await?.is_empty(), "no object: {:?}", objects(&s3));
    assert!(s3.incomplete_upload_files()?.is_empty(), "aborted: {:?}", s3.incomplete_upload_files()?);

    let missing = ClientCommand::new("/nonexistent/mariadb-dump", Vec::new(), "");
    assert!(matches!(backup_to_s3(&missing, None, &store, "x.sql").await, Err(BackupError::Spawn { .. })));
    Ok(())
}

#[tokio::test]
async fn restoring_a_missing_key_fails_naming_the_key() -> TestResult {
    let s3 = s3().await;
    let store = store(&s3);
    // The object is looked up before the client starts, so no server is needed.
    let client = restore_command(Flavor::Mariadb, &ClientConnection::new("127.0.0.1", 1, OPERATOR_USER, "x"))?;
    let err = restore_from_s3(&store, "shop/2026-01-31.sql", None, &client).await.expect_err("missing");
    assert!(matches!(err, BackupError::Download { .. }), "{err}");
    assert!(err.to_string().contains("\"shop/2026-01-31.sql\""), "{err}");
    assert!(err.to_string().contains("no such object"), "{err}");
    Ok(())
}

#[tokio::test]
async fn a_failing_statement_fails_the_restore_with_the_clients_error() -> TestResult {
    let (s3, target) = tokio::join!(s3(), start(2));
    let store = store(&s3);
    make_writable(&target).await?;
    let sql = "CREATE DATABASE before_error;\nCREATE TABLE no_such_db.t (a INT);\nCREATE DATABASE after_error;\n";
    store.upload("bad.sql", sql.as_bytes()).await?;

    let err = restore_from_s3(&store, "bad.sql", None, &restore_into(&target)).await.expect_err("unknown database");
    let BackupError::RestoreFailed { ref stderr, ref key, .. } = err else {
        panic!("expected RestoreFailed, got {err}")
    };
    assert_eq!(key, "bad.sql");
    assert!(stderr.contains("1049") && stderr.contains("no_such_db"), "the client's error is quoted: {err}");
    let mut conn = operator(&target).await?;
    let schemas = "SELECT GROUP_CONCAT(SCHEMA_NAME ORDER BY SCHEMA_NAME) FROM information_schema.SCHEMATA \
                   WHERE SCHEMA_NAME LIKE '%_error'";
    assert_eq!(value(&mut conn, schemas).await?, "before_error", "the client stops at the first error");

    // A wrong expected checksum fails the restore. The bytes reach the client before the
    // end of the object proves them wrong, so what was already executed stays (here the
    // whole small object): the error says the target must be discarded.
    store.upload("good.sql", "CREATE DATABASE checked;\n".as_bytes()).await?;
    let err = restore_from_s3(&store, "good.sql", Some(&"0".repeat(64)), &restore_into(&target))
        .await
        .expect_err("checksum mismatch");
    assert!(matches!(err, BackupError::RestoreInput { .. }), "{err}");
    assert!(err.to_string().contains("corrupt") && err.to_string().contains("discarded"), "{err}");

    conn.query_drop("DROP DATABASE IF EXISTS checked").await?;
    restore_from_s3(&store, "good.sql", None, &restore_into(&target)).await?;
    assert_eq!(
        value(&mut conn, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'checked'").await?,
        "1"
    );
    conn.disconnect().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run alone with --ignored --nocapture"]
async fn measure_backup_throughput() -> TestResult {
    let mib: usize = std::env::var("STATECRAFT_MEASURE_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let (s3, source, target) = tokio::join!(s3(), start(0), start(1));
    let store = store(&s3);
    make_writable(&source).await?;
    let mut conn = operator(&source).await?;
    conn.query_drop("CREATE DATABASE big").await?;
    conn.query_drop("CREATE TABLE big.rows (id INT PRIMARY KEY, payload VARCHAR(2048), data BLOB) ENGINE=InnoDB")
        .await?;
    // Rows of about 2 KiB: 1920 bytes of hex text and 64 bytes of binary (hex in the dump).
    let rows = mib * MIB / 2048;
    let batch = 10_000;
    let filled = Instant::now();
    for start in (0..rows).step_by(batch) {
        let end = (start + batch).min(rows);
        conn.query_drop(format!(
            "INSERT INTO big.rows SELECT seq, REPEAT(SHA2(seq, 256), 30), UNHEX(SHA2(seq, 512)) \
             FROM big.seq_{}_to_{}",
            start + 1,
            end
        ))
        .await?;
    }
    conn.query_drop("ANALYZE TABLE big.rows").await?;
    let table_mib: Option<(u64, u64)> = conn
        .query_first(
            "SELECT DATA_LENGTH DIV 1048576, (SELECT SUM(LENGTH(payload) + LENGTH(data)) FROM big.rows) DIV 1048576 \
             FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'big' AND TABLE_NAME = 'rows'",
        )
        .await?;
    println!("table: {rows} rows, (InnoDB data MiB, raw column MiB) = {table_mib:?}, filled in {:?}", filled.elapsed());

    // The dump alone, to /dev/null: what the client and server can do without S3.
    let dump = dump_of(&source);
    let alone = Instant::now();
    let status = std::process::Command::new(dump.program())
        .args(dump.args())
        .env("MYSQL_PWD", passwords().operator)
        .stdout(std::process::Stdio::null())
        .status()?;
    assert!(status.success());
    let alone = alone.elapsed();

    let started = Instant::now();
    let backup = backup_to_s3(&dump, None, &store, "big.sql").await?;
    let secs = started.elapsed().as_secs_f64();
    let dump_mib = backup.bytes as f64 / MIB as f64;
    println!(
        "backup: {dump_mib:.1} MiB of dump in {secs:.2} s = {:.1} MiB/s ({} parts); the dump alone to /dev/null: {:.2} s = {:.1} MiB/s",
        dump_mib / secs,
        backup.receipt.parts,
        alone.as_secs_f64(),
        dump_mib / alone.as_secs_f64()
    );

    make_writable(&target).await?;
    let started = Instant::now();
    restore_from_s3(&store, "big.sql", Some(&backup.sha256), &restore_into(&target)).await?;
    let secs = started.elapsed().as_secs_f64();
    println!("restore: {dump_mib:.1} MiB in {secs:.2} s = {:.1} MiB/s", dump_mib / secs);
    conn.disconnect().await?;
    Ok(())
}
