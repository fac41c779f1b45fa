//! Declared accounts and databases against a real MariaDB: the plans the operator makes for
//! a MySQLUser and a MySQLDatabase, applied as `root` the way the controller applies them,
//! give what was declared, judged by the real `mariadb` client logging in as the account; a
//! second observation plans nothing; a read-only server refuses them; and a backup carries
//! the accounts into a restored server while leaving the operator's own alone. No
//! Kubernetes (the e2e test runs the controller).

mod support;

use std::process::Stdio;

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use statecraft_mysql::accounts::server::Session;
use statecraft_mysql::accounts::{
    Account, DesiredDatabase, DesiredUser, ObservedUser, desired_grants, limit_values, plan_database, plan_user,
};
use statecraft_mysql::api::{Flavor, Grant, Limits, Privilege};
use statecraft_mysql::backup::{
    ClientConnection, PASSWORD_ENV, backup_to_s3, dump_command, restore_command, restore_from_s3,
};
use statecraft_mysql::clustering::dataplane::{DataPlane, Endpoint};
use statecraft_mysql::flavor::{self, BACKUP_USER, OPERATOR_USER, ROOT_USER};
use statecraft_shared::testing::s3::S3Server;
use support::{MariaDb, client_binary, first_value, operator_conn, passwords, start_server};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// MariaDB's refusal of a write on a read-only server (ER_OPTION_PREVENTS_STATEMENT).
const READ_ONLY_REFUSAL: u16 = 1290;
/// MariaDB's refusal of a connection over the account's limit (ER_USER_LIMIT_REACHED).
const USER_LIMIT_REACHED: u16 = 1226;

fn endpoint(server: &MariaDb) -> Endpoint {
    Endpoint { host: "127.0.0.1".into(), port: server.port }
}

async fn writable(server: &MariaDb) {
    let p = passwords();
    let dp = DataPlane::new(flavor::sql(Flavor::Mariadb), p.operator.into(), p.replication.into());
    dp.make_writable(&endpoint(server), false, 0).await.expect("primary writable");
}

/// A session as `root`, the account the controller applies with.
async fn as_root(server: &MariaDb) -> Session {
    Session::connect(&endpoint(server), ROOT_USER, passwords().root, None).await.expect("root session")
}

/// Runs `sql` with the real `mariadb` client as `user` over TCP; its output, or its error.
async fn client(server: &MariaDb, user: &str, password: &str, sql: &str) -> Result<String, String> {
    let out = tokio::process::Command::new(client_binary())
        .args(["--no-defaults", "--host=127.0.0.1", "--protocol=TCP", "--batch", "--skip-column-names"])
        .arg(format!("--port={}", server.port))
        .arg(format!("--user={user}"))
        .args(["--execute", sql])
        .env(PASSWORD_ENV, password)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn grant(privileges: &[Privilege], database: &str, table: &str, grant_option: bool) -> Grant {
    Grant { privileges: privileges.to_vec(), database: database.into(), table: table.into(), grant_option }
}

fn app(password: &str, grants: &[Grant], limits: &Limits) -> DesiredUser {
    DesiredUser {
        account: Account::new("app", "%"),
        password: password.into(),
        password_changed: false,
        limits: limit_values(limits),
        grants: desired_grants(grants),
    }
}

/// Applies the plan for `desired` and checks that the server then holds it: observing
/// again plans nothing.
async fn converge(root: &mut Session, desired: &DesiredUser) -> TestResult<ObservedUser> {
    let observed = root.observe_user(&desired.account).await?;
    root.apply(&plan_user(desired, observed.as_ref())).await?;
    let after = root.observe_user(&desired.account).await?.ok_or("the account does not exist after its plan")?;
    let again = plan_user(&DesiredUser { password_changed: false, ..desired.clone() }, Some(&after));
    assert!(again.is_empty(), "as declared, yet planned {} statements: {after:?}", again.len());
    Ok(after)
}

async fn binlog_position(server: &MariaDb) -> TestResult<String> {
    let mut conn = operator_conn(server).await?;
    Ok(first_value(&mut conn, "SELECT @@GLOBAL.gtid_binlog_pos").await?)
}

#[tokio::test]
async fn a_declared_account_gets_exactly_its_grants_limits_and_password() -> TestResult {
    let server = start_server(0).await;
    writable(&server).await;
    let mut root = as_root(&server).await;

    let shop = DesiredDatabase { name: "shop".into(), character_set: "utf8mb4".into(), collation: None };
    let observed = root.observe_database("shop").await?;
    assert_eq!(observed, None);
    let create = plan_database(&shop, None).ok_or("a missing database is created")?;
    root.execute(&create).await?;
    let observed = root.observe_database("shop").await?.ok_or("created")?;
    assert_eq!(observed.character_set, "utf8mb4");
    assert_eq!(plan_database(&shop, Some(&observed)), None, "as declared: nothing to do");
    let mut admin = operator_conn(&server).await?;
    admin.query_drop("CREATE TABLE shop.orders (id INT PRIMARY KEY, note TEXT)").await?;
    admin.query_drop("CREATE DATABASE other").await?;

    let limits = Limits { max_user_connections: Some(2), ..Limits::default() };
    let first = app(
        "app pass'1\\",
        &[
            grant(&[Privilege::Select, Privilege::Insert], "shop", "*", false),
            grant(&[Privilege::Process], "*", "*", false),
            // An underscore is a wildcard in a database grant: declared names are escaped,
            // and the observation must match them.
            grant(&[Privilege::Select], "my_shop", "*", false),
        ],
        &limits,
    );
    converge(&mut root, &first).await?;

    // Judged by the real client, logging in with the declared password.
    let pw = "app pass'1\\";
    client(&server, "app", pw, "INSERT INTO shop.orders VALUES (1, 'a')").await?;
    assert_eq!(client(&server, "app", pw, "SELECT note FROM shop.orders").await?, "a");
    let refused = client(&server, "app", pw, "DELETE FROM shop.orders").await.expect_err("no DELETE");
    assert!(refused.contains("DELETE command denied"), "{refused}");
    let refused = client(&server, "app", pw, "CREATE TABLE other.t (i INT)").await.expect_err("no other database");
    assert!(refused.contains("denied"), "{refused}");
    client(&server, "app", "wrong", "SELECT 1").await.expect_err("a wrong password is refused");
    // At most two connections at once.
    let opts = server.opts("app", pw);
    let (one, two) = (Conn::new(opts.clone()).await?, Conn::new(opts.clone()).await?);
    match Conn::new(opts).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, USER_LIMIT_REACHED, "{e}"),
        other => panic!("a third connection must be refused: {:?}", other.map(|_| ())),
    }
    drop((one, two));

    // A second pass over an account as declared writes nothing to the binary log.
    let before = binlog_position(&server).await?;
    converge(&mut root, &first).await?;
    assert_eq!(binlog_position(&server).await?, before, "an account as declared sends no write");

    // Changed grants: INSERT and PROCESS revoked, UPDATE on one table with the grant option.
    let second = app(
        pw,
        &[grant(&[Privilege::Select], "shop", "*", false), grant(&[Privilege::Update], "shop", "orders", true)],
        &Limits::default(),
    );
    converge(&mut root, &second).await?;
    let refused = client(&server, "app", pw, "INSERT INTO shop.orders VALUES (2, 'b')").await.expect_err("revoked");
    assert!(refused.contains("INSERT command denied"), "{refused}");
    client(&server, "app", pw, "UPDATE shop.orders SET note = 'c' WHERE id = 1").await?;
    let grants = client(&server, "app", pw, "SHOW GRANTS").await?;
    assert!(grants.contains("GRANT UPDATE ON `shop`.`orders` TO `app`@`%` WITH GRANT OPTION"), "{grants}");
    assert!(!grants.contains("PROCESS") && !grants.contains("INSERT") && !grants.contains("my"), "{grants}");

    // A new password from the Secret: the old one stops working.
    let third = DesiredUser { password: "new-pass".into(), password_changed: true, ..second.clone() };
    converge(&mut root, &third).await?;
    client(&server, "app", "new-pass", "SELECT 1").await?;
    client(&server, "app", pw, "SELECT 1").await.expect_err("the old password is refused");

    // On a read-only server (a former primary) root's statements are refused: nothing lands.
    server.local_admin("SET GLOBAL read_only = 1").await?;
    let before = binlog_position(&server).await?;
    let mut stale = as_root(&server).await;
    let fourth = app("new-pass", &[grant(&[Privilege::Select, Privilege::Delete], "shop", "*", false)], &limits);
    let observed = stale.observe_user(&fourth.account).await?;
    match stale.apply(&plan_user(&fourth, observed.as_ref())).await {
        Err(statecraft_mysql::clustering::dataplane::DataPlaneError::Sql {
            source: mysql_async::Error::Server(e),
            ..
        }) => assert_eq!(e.code, READ_ONLY_REFUSAL, "{e}"),
        other => panic!("a read-only server must refuse: {other:?}"),
    }
    assert_eq!(binlog_position(&server).await?, before);
    assert_eq!(stale.observe_user(&fourth.account).await?, observed, "unchanged");
    server.local_admin("SET GLOBAL read_only = 0").await?;

    // Deletion per policy: the account and the database go.
    root.drop_user(&first.account).await?;
    assert_eq!(root.observe_user(&first.account).await?, None);
    root.drop_user(&first.account).await?; // idempotent
    root.drop_database("shop").await?;
    assert_eq!(root.observe_database("shop").await?, None);
    Ok(())
}

#[tokio::test]
async fn a_backup_carries_the_accounts_and_the_restore_keeps_the_operators_own() -> TestResult {
    let s3 = S3Server::start().await?;
    s3.create_bucket("backups")?;
    let store = s3.store("backups", "mysql/accounts")?;
    let (source, target) = tokio::join!(start_server(0), start_server(1));
    writable(&source).await;
    writable(&target).await;

    let mut admin = operator_conn(&source).await?;
    admin.query_drop("CREATE DATABASE shop").await?;
    admin.query_drop("CREATE TABLE shop.orders (id INT PRIMARY KEY)").await?;
    admin.query_drop("INSERT INTO shop.orders VALUES (1), (2)").await?;
    let mut root = as_root(&source).await;
    let declared = app(
        "app-secret",
        &[grant(&[Privilege::Select], "shop", "*", false), grant(&[Privilege::Update], "shop", "orders", true)],
        &Limits { max_user_connections: Some(4), ..Limits::default() },
    );
    converge(&mut root, &declared).await?;
    // Made by hand, not declared: a role with a grant, given to a second account.
    admin.query_drop("CREATE ROLE reader").await?;
    admin.query_drop("GRANT SELECT ON shop.* TO reader").await?;
    admin.query_drop("CREATE USER 'report'@'10.%' IDENTIFIED BY 'report-secret'").await?;
    admin.query_drop("GRANT reader TO 'report'@'10.%'").await?;

    let backup_conn = ClientConnection::new("127.0.0.1", source.port, BACKUP_USER, passwords().backup);
    let dump = dump_command(Flavor::Mariadb, &backup_conn)?;
    let backup = backup_to_s3(&dump, Some(&backup_conn), &store, "with-accounts.sql").await?;
    let text = std::fs::read_to_string(s3.object_path("backups", &backup.receipt.object_key))?;
    let section = text.split("-- Accounts (statecraft)").nth(1).ok_or("the backup has an accounts section")?;
    assert!(section.trim_end().ends_with("-- Accounts completed."), "{section}");
    assert!(text.find("-- Dump completed") < text.find("-- Accounts (statecraft)"), "accounts after the data");
    for own in [OPERATOR_USER, ROOT_USER, BACKUP_USER, "repl", "exporter", "mariadb.sys"] {
        assert!(!section.contains(&format!("`{own}`@")), "the backup carries the operator's {own}: {section}");
    }

    // Restored as the Job restores: the target's root, the object through its checksum.
    let root_conn = ClientConnection::new("127.0.0.1", target.port, ROOT_USER, passwords().root);
    restore_from_s3(&store, "with-accounts.sql", Some(&backup.sha256), &restore_command(Flavor::Mariadb, &root_conn)?)
        .await?;

    assert_eq!(client(&target, "app", "app-secret", "SELECT COUNT(*) FROM shop.orders").await?, "2");
    let source_grants = client(&source, "app", "app-secret", "SHOW GRANTS").await?;
    assert_eq!(client(&target, "app", "app-secret", "SHOW GRANTS").await?, source_grants);
    let mut on_target = as_root(&target).await;
    let restored = on_target.observe_user(&declared.account).await?.ok_or("app restored")?;
    assert_eq!(restored.limits, declared.limits);
    assert_eq!(restored.grants, declared.grants, "grants restored exactly");
    let report = target.local_admin("SHOW GRANTS FOR 'report'@'10.%'").await?;
    assert!(report.contains("GRANT `reader` TO `report`@`10.%`"), "{report}");
    let role = target.local_admin("SHOW GRANTS FOR reader").await?;
    assert!(role.contains("GRANT SELECT ON `shop`.* TO `reader`"), "{role}");
    // The operator's accounts on the target still work with the target's passwords.
    for (user, password) in [(OPERATOR_USER, passwords().operator), (BACKUP_USER, passwords().backup)] {
        client(&target, user, password, "SELECT 1").await.map_err(|e| format!("{user} after the restore: {e}"))?;
    }
    Ok(())
}

#[tokio::test]
async fn a_backup_whose_accounts_cannot_be_read_stores_nothing() -> TestResult {
    let s3 = S3Server::start().await?;
    s3.create_bucket("backups")?;
    let store = s3.store("backups", "mysql/accounts")?;
    let source = start_server(0).await;
    writable(&source).await;
    let dump = dump_command(
        Flavor::Mariadb,
        &ClientConnection::new("127.0.0.1", source.port, BACKUP_USER, passwords().backup),
    )?;
    let refused = ClientConnection::new("127.0.0.1", source.port, BACKUP_USER, "not the password");
    let err =
        backup_to_s3(&dump, Some(&refused), &store, "no-accounts.sql").await.expect_err("the accounts are part of it");
    assert!(err.to_string().contains("reading the accounts"), "{err}");
    assert!(store.list("").await?.is_empty(), "nothing stored");
    assert!(s3.incomplete_upload_files()?.is_empty(), "no multipart leftovers");
    Ok(())
}

/// The operator may stop after any statement of a plan (killed, its connection cut): the
/// next pass observes what took and plans the rest, whichever statement it stopped after.
#[tokio::test]
async fn a_plan_cut_after_any_statement_is_finished_by_the_next_pass() -> TestResult {
    let server = start_server(0).await;
    writable(&server).await;
    let mut root = as_root(&server).await;
    root.execute("CREATE DATABASE shop").await?;
    root.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY)").await?;
    let before =
        app("before", &[grant(&[Privilege::Select, Privilege::Insert], "shop", "*", true)], &Limits::default());
    let after = DesiredUser {
        password: "after".into(),
        password_changed: true,
        ..app(
            "after",
            &[grant(&[Privilege::Select], "shop", "*", false), grant(&[Privilege::Update], "shop", "orders", false)],
            &Limits { max_queries_per_hour: Some(1000), ..Limits::default() },
        )
    };
    let full = {
        converge(&mut root, &before).await?;
        let observed = root.observe_user(&after.account).await?;
        plan_user(&after, observed.as_ref()).len()
    };
    assert!(full >= 5, "the change takes several statements: {full}");
    for cut in 0..full {
        root.drop_user(&before.account).await?;
        converge(&mut root, &before).await?;
        let observed = root.observe_user(&after.account).await?;
        let plan = plan_user(&after, observed.as_ref());
        root.apply(&plan[..cut]).await?;
        // The next pass: the password Secret's version is still not recorded.
        converge(&mut root, &after).await.map_err(|e| format!("cut after {cut} statements: {e}"))?;
        client(&server, "app", "after", "SELECT COUNT(*) FROM shop.orders")
            .await
            .map_err(|e| format!("cut after {cut} statements: {e}"))?;
    }
    Ok(())
}
