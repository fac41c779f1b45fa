//! Point-in-time recovery between real MariaDB servers and a real S3 server (s3s-fs): a
//! backup's dump, the binary logs archived by the next backup, and a restore rolled forward
//! to a time between them, into a target whose replica has the source's server id (the
//! replayed transactions must reach it).

mod support;

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use statecraft_mysql::api::Flavor;
use statecraft_mysql::backup::{
    BackupError, BinlogReplay, ClientConnection, archive_binlogs, backup_to_s3, binlog_prefix, dump_command,
    replay_binlogs, restore_command, restore_from_s3,
};
use statecraft_mysql::clustering::dataplane::{DataPlane, Endpoint};
use statecraft_mysql::flavor::{self, BACKUP_USER, OPERATOR_USER, REPLICATION_USER};
use statecraft_shared::s3::S3Store;
use statecraft_shared::testing::s3::S3Server;
use support::{MariaDb, first_value as value, operator_conn as operator, passwords, start_server as start};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

const BUCKET: &str = "backups";

fn data_plane() -> DataPlane {
    let p = passwords();
    DataPlane::new(flavor::sql(Flavor::Mariadb), p.operator.into(), p.replication.into())
}

fn endpoint(server: &MariaDb) -> Endpoint {
    Endpoint { host: "127.0.0.1".into(), port: server.port }
}

/// The replication account, as the backup Job reads the primary's binary logs.
fn replication(server: &MariaDb) -> ClientConnection {
    ClientConnection::new("127.0.0.1", server.port, REPLICATION_USER, passwords().replication)
}

/// The first whole second after now, once it has passed: a time no event of before it
/// and no event of after it shares (binary log times have whole seconds).
async fn second_boundary() -> DateTime<Utc> {
    let at = Utc::now().trunc_subsecs(0) + chrono::Duration::seconds(1);
    let wait = (at - Utc::now()).to_std().unwrap_or_default() + Duration::from_millis(1100);
    tokio::time::sleep(wait).await;
    at
}

async fn rows(conn: &mut Conn) -> TestResult<(String, String)> {
    Ok((
        value(conn, "SELECT COUNT(*) FROM shop.orders").await?,
        value(conn, "SELECT COALESCE(MAX(id), 0) FROM shop.orders").await?,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_rolls_forward_to_a_point_in_time_with_the_next_backups_archive() -> TestResult {
    let s3 = S3Server::start().await?;
    s3.create_bucket(BUCKET)?;
    let store: S3Store = s3.store(BUCKET, "mysql")?;
    // The target's replica has the source's server id (ordinal 0, like the source).
    let (source, target, target_replica) = tokio::join!(start(0), start(1), start(0));
    let dp = data_plane();
    dp.make_writable(&endpoint(&source), false, 0).await?;
    let mut src = operator(&source).await?;
    src.query_drop("CREATE DATABASE shop").await?;
    src.query_drop("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(100))").await?;
    src.query_drop("INSERT INTO shop.orders SELECT seq, 'before the backup' FROM shop.seq_1_to_100").await?;
    // The backup's position is at the start of the second file: the first holds nothing
    // the restore needs.
    src.query_drop("FLUSH BINARY LOGS").await?;

    let dump = dump_command(
        Flavor::Mariadb,
        &ClientConnection::new("127.0.0.1", source.port, BACKUP_USER, passwords().backup),
    )?;
    let backup = backup_to_s3(&dump, None, &store, "db/20261130T010000Z-first.sql").await?;
    let since = backup.gtid().to_string();

    src.query_drop("INSERT INTO shop.orders SELECT seq, 'after the backup' FROM shop.seq_101_to_200").await?;
    src.query_drop("UPDATE shop.orders SET note = 'updated in time' WHERE id = 1").await?;
    src.query_drop("FLUSH BINARY LOGS").await?;
    src.query_drop("INSERT INTO shop.orders SELECT seq, 'still in time' FROM shop.seq_201_to_250").await?;
    let point = second_boundary().await;
    src.query_drop("INSERT INTO shop.orders SELECT seq, 'too late' FROM shop.seq_251_to_300").await?;
    src.query_drop("DELETE FROM shop.orders WHERE id <= 50").await?;
    src.query_drop("UPDATE shop.orders SET note = 'too late' WHERE id = 60").await?;

    let work = tempfile::tempdir()?;
    let prefix = binlog_prefix("db/20261130T020000Z-second.sql");
    let archive = archive_binlogs(Flavor::Mariadb, &replication(&source), &since, &store, &prefix, work.path()).await?;
    assert_eq!(archive.files, ["mysql-bin.000002", "mysql-bin.000003"], "from the file holding {since} on");
    assert_eq!(archive.from_gtid, since);
    assert!(archive.until > point, "taken after the point in time");
    let listed = store.list(&prefix).await?;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed.iter().map(|o| o.size).sum::<u64>(), archive.bytes);
    assert!(std::fs::read_dir(work.path())?.next().is_none(), "local copies are removed once stored");

    // The target: a primary with a replica, as a restore finds a new cluster.
    dp.make_writable(&endpoint(&target), false, 0).await?;
    dp.configure_replica(&endpoint(&target_replica), ("127.0.0.1", target.port)).await?;
    let client = restore_command(
        Flavor::Mariadb,
        &ClientConnection::new("127.0.0.1", target.port, OPERATOR_USER, passwords().operator),
    )?;
    restore_from_s3(&store, &backup.key, Some(&backup.sha256), &client).await?;
    let work = tempfile::tempdir()?;
    let replay = BinlogReplay { prefix: &prefix, files: archive.files.len(), start: &since, stop: point };
    let replayed = replay_binlogs(Flavor::Mariadb, &store, &replay, &client, work.path()).await?;
    assert_eq!(replayed.files, 2);

    let mut dst = operator(&target).await?;
    assert_eq!(rows(&mut dst).await?, ("250".to_string(), "250".to_string()), "every row committed before the point");
    assert_eq!(value(&mut dst, "SELECT note FROM shop.orders WHERE id = 1").await?, "updated in time");
    assert_eq!(value(&mut dst, "SELECT note FROM shop.orders WHERE id = 60").await?, "before the backup");
    // The replayed transactions are the target's own: its server id, its sequence.
    let gtid = value(&mut dst, "SELECT @@GLOBAL.gtid_binlog_pos").await?;
    assert!(gtid.starts_with("0-101-"), "numbered by the target, not the source: {gtid}");

    // They reach the replica whose server id is the source's.
    let mut replica = operator(&target_replica).await?;
    let mut last = (String::new(), String::new());
    for _ in 0..100 {
        last = rows(&mut replica).await.unwrap_or_default();
        if last.0 == "250" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, ("250".to_string(), "250".to_string()), "the replica has every replayed row");

    // Purged logs are reported, not silently skipped.
    src.query_drop("PURGE BINARY LOGS TO 'mysql-bin.000003'").await?;
    let gone = archive_binlogs(
        Flavor::Mariadb,
        &replication(&source),
        &since,
        &store,
        &binlog_prefix("db/x.sql"),
        tempfile::tempdir()?.path(),
    )
    .await
    .expect_err("the logs after the backup were purged");
    assert!(matches!(&gone, BackupError::Binlog { reason } if reason.contains("no longer has")), "{gone}");
    assert!(store.list(&binlog_prefix("db/x.sql")).await?.is_empty(), "nothing stored");

    // An archive with a file missing is refused before anything is replayed.
    store.delete(&format!("{prefix}mysql-bin.000003")).await?;
    let short = replay_binlogs(Flavor::Mariadb, &store, &replay, &client, work.path()).await;
    assert!(matches!(&short, Err(BackupError::Binlog { reason }) if reason.contains("holds 1 file")), "{short:?}");
    for c in [src, dst, replica] {
        c.disconnect().await?;
    }
    Ok(())
}
