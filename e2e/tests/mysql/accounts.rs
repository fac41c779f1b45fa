//! Declared accounts and databases on a real cluster: a MySQLDatabase and a MySQLUser are
//! applied on the primary and reach every server through replication, judged by the real
//! `mariadb` client logging in as the account on each pod; grants and passwords follow the
//! resources, also after a switchover; deletion follows each policy; a Secret without the
//! owner's opt-in is refused with the reason.

use std::time::{Duration, Instant};

use kube::Api;
use mysql_async::prelude::Queryable;
use serde_json::json;
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::wait_until;
use statecraft_mysql::api::{MySQLDatabase, MySQLUser};

use super::{Db, TestResult};

/// Runs `sql` with the `mariadb` client in pod `pod`, as `user` over TCP to the pod's own
/// server (127.0.0.1 matches the account's `%`); its output, or the client's error.
pub(super) fn client_in(db: &Db, pod: &str, user: &str, password: &str, sql: &str) -> Result<String, String> {
    db.kubectl(&[
        "exec",
        pod,
        "-c",
        "mysql",
        "--",
        "env",
        &format!("MYSQL_PWD={password}"),
        "mariadb",
        "--no-defaults",
        "--protocol=TCP",
        "-h127.0.0.1",
        &format!("-u{user}"),
        "-N",
        "-e",
        sql,
    ])
    .map_err(|e| e.to_string())
}

pub(super) fn apply(db: &Db, object: serde_json::Value) -> TestResult {
    db.cluster.kubectl_with_input(&["apply", "-n", &db.ns.name, "-f", "-"], Some(&object.to_string()))?;
    Ok(())
}

pub(super) fn password_secret(name: &str, password: &str, opted_in: bool) -> serde_json::Value {
    let labels = if opted_in { json!({"mysql.statecraft.io/user-password": "true"}) } else { json!({}) };
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "labels": labels},
        "stringData": {"password": password},
    })
}

pub(super) fn user(name: &str, secret: &str, grants: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLUser",
        "metadata": {"name": name},
        "spec": {"clusterName": "db", "passwordSecretRef": {"name": secret}, "grants": grants, "limits": {"maxUserConnections": 10}},
    })
}

/// Replaces MySQLUser `name`'s grants.
fn regrant(db: &Db, name: &str, grants: serde_json::Value) -> TestResult {
    let patch = json!({"spec": {"grants": grants}}).to_string();
    db.kubectl(&["patch", "mysqluser", name, "--type=merge", "-p", &patch])?;
    Ok(())
}

/// The Ready condition's (status, reason) of a MySQLUser or MySQLDatabase.
pub(super) fn ready_of(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<(String, String)> {
    conditions.iter().find(|c| c.type_ == "Ready").map(|c| (c.status.clone(), c.reason.clone()))
}

/// Waits until `check` holds for the client in every pod of the cluster; how long it took.
async fn on_every_server(
    db: &Db,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Db, &str) -> bool,
) -> Result<Duration, statecraft_e2e::E2eError> {
    let started = Instant::now();
    wait_until(timeout, what, || async { (0..3).all(|k| check(db, &format!("db-{k}"))).then_some(()) }).await?;
    Ok(started.elapsed())
}

/// Declared accounts and databases, applied on the primary, on every server, through a
/// switchover and deletion.
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_declared_accounts_and_databases_reach_every_server_and_follow_their_resources() -> TestResult {
    let db = Db::create("mysql-accounts", "db", 3, json!({})).await?;
    let users: Api<MySQLUser> = Api::namespaced(db.cluster.client.clone(), &db.ns.name);
    let databases: Api<MySQLDatabase> = Api::namespaced(db.cluster.client.clone(), &db.ns.name);

    let started = Instant::now();
    apply(&db, password_secret("app-password", "first pass'1", true))?;
    apply(
        &db,
        json!({"apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLDatabase", "metadata": {"name": "shop"}, "spec": {"clusterName": "db"}}),
    )?;
    apply(
        &db,
        user("app", "app-password", json!([{"database": "shop", "privileges": ["SELECT", "INSERT", "CREATE"]}])),
    )?;
    // Not opted in: refused with the reason, nothing created.
    apply(&db, password_secret("stolen", "whatever", false))?;
    apply(&db, user("thief", "stolen", json!([])))?;

    wait_until(Duration::from_secs(120), "MySQLUser app and MySQLDatabase shop Ready", || async {
        let u = users.get("app").await.ok()?.status?;
        let d = databases.get("shop").await.ok()?.status?;
        let declared = Some(("True".to_string(), "Declared".to_string()));
        (ready_of(&u.conditions) == declared && ready_of(&d.conditions) == declared).then_some(())
    })
    .await?;
    let declared_after = started.elapsed();
    // Each resource is reconciled on its own: the refusal is waited for, not assumed.
    let thief = wait_until(Duration::from_secs(60), "MySQLUser thief refused", || async {
        let s = users.get("thief").await.ok()?.status?;
        ready_of(&s.conditions).is_some().then_some(s)
    })
    .await?;
    assert_eq!(ready_of(&thief.conditions), Some(("False".into(), "PasswordSecretRefused".into())), "{thief:?}");
    assert_eq!(thief.account, None);

    // The account, its grants and the database reach every server through replication.
    let pw = "first pass'1";
    let primary = db.status().await?.current_primary.ok_or("no primary")?;
    client_in(&db, &primary, "app", pw, "CREATE TABLE shop.orders (id INT PRIMARY KEY)")?;
    client_in(&db, &primary, "app", pw, "INSERT INTO shop.orders VALUES (1), (2)")?;
    let replicated = on_every_server(&db, "app reads 2 orders on every server", Duration::from_secs(60), |db, pod| {
        client_in(db, pod, "app", pw, "SELECT COUNT(*) FROM shop.orders").is_ok_and(|o| o.trim() == "2")
    })
    .await?;
    let refused = client_in(&db, &primary, "app", pw, "DELETE FROM shop.orders").expect_err("no DELETE granted");
    assert!(refused.contains("DELETE command denied"), "{refused}");
    for k in 0..3 {
        let thief = client_in(&db, &format!("db-{k}"), "thief", "whatever", "SELECT 1");
        assert!(thief.is_err(), "db-{k}: no account from a Secret that did not opt in");
    }

    // Grants follow the resource: INSERT revoked on every server.
    regrant(&db, "app", json!([{"database": "shop", "privileges": ["SELECT"]}]))?;
    let revoked = on_every_server(&db, "INSERT revoked on every server", Duration::from_secs(60), |db, pod| {
        client_in(db, pod, "app", pw, "SHOW GRANTS")
            .is_ok_and(|g| g.contains("GRANT SELECT ON `shop`.*") && !g.contains("INSERT"))
    })
    .await?;

    // A new password in the Secret: picked up by the periodic check (the operator cannot
    // watch Secrets), the old one refused everywhere.
    let rotated_at = Instant::now();
    apply(&db, password_secret("app-password", "second-pass", true))?;
    let rotated = on_every_server(&db, "the new password on every server", Duration::from_secs(150), |db, pod| {
        client_in(db, pod, "app", "second-pass", "SELECT 1").is_ok()
            && client_in(db, pod, "app", pw, "SELECT 1").is_err()
    })
    .await?;
    let rotated = rotated.max(rotated_at.elapsed());

    // After a switchover, a change is applied on the new primary, and no server holds a
    // transaction the primary lacks.
    let target = if primary == "db-2" { "db-1" } else { "db-2" };
    db.kubectl(&[
        "annotate",
        "mysqlcluster",
        "db",
        &format!("mysql.statecraft.io/switchover-to={target}"),
        "--overwrite",
    ])?;
    wait_until(Duration::from_secs(120), "the switchover", || async {
        (db.status().await.ok()?.current_primary.as_deref() == Some(target)).then_some(())
    })
    .await?;
    db.ready().await?;
    regrant(&db, "app", json!([{"database": "shop", "privileges": ["SELECT", "DELETE"]}]))?;
    on_every_server(&db, "DELETE granted after the switchover", Duration::from_secs(90), |db, pod| {
        client_in(db, pod, "app", "second-pass", "SHOW GRANTS").is_ok_and(|g| g.contains("DELETE"))
    })
    .await?;
    client_in(&db, target, "app", "second-pass", "DELETE FROM shop.orders WHERE id = 2")?;
    let status = db.ready().await?.status.unwrap_or_default();
    assert!(status.members.iter().all(|m| !m.errant && m.ready), "no errant transaction: {:?}", status.members);

    // Deletion: the account goes (policy Delete, the default); the database stays (Retain,
    // the default) until a resource with policy Delete goes.
    db.kubectl(&["delete", "mysqluser", "app", "--wait=true", "--timeout=120s"])?;
    on_every_server(&db, "app dropped on every server", Duration::from_secs(60), |db, pod| {
        client_in(db, pod, "app", "second-pass", "SELECT 1").is_err()
    })
    .await?;
    db.kubectl(&["delete", "mysqldatabase", "shop", "--wait=true", "--timeout=120s"])?;
    let mut root = db.connect().await?;
    let kept: Option<u64> = root.query_first("SELECT COUNT(*) FROM shop.orders").await?;
    assert_eq!(kept, Some(1), "a retained database keeps its data");
    apply(
        &db,
        json!({"apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLDatabase", "metadata": {"name": "shop-again"}, "spec": {"clusterName": "db", "name": "shop", "deletionPolicy": "Delete"}}),
    )?;
    wait_until(Duration::from_secs(60), "MySQLDatabase shop-again Ready", || async {
        let d = databases.get("shop-again").await.ok()?.status?;
        (ready_of(&d.conditions)?.0 == "True").then_some(())
    })
    .await?;
    db.kubectl(&["delete", "mysqldatabase", "shop-again", "--wait=true", "--timeout=120s"])?;
    let gone: Option<String> =
        root.query_first("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'shop'").await?;
    assert_eq!(gone, None, "deletionPolicy Delete drops the database");
    assert!(db.events("Switchover").await? >= 1);

    let figures = json!({
        "declared_seconds": declared_after.as_secs_f64(),
        "replicated_to_every_server_seconds": replicated.as_secs_f64(),
        "grant_change_on_every_server_seconds": revoked.as_secs_f64(),
        "password_rotation_on_every_server_seconds": rotated.as_secs_f64(),
    });
    eprintln!("accounts: {figures}");
    append_result(
        "mysql-accounts.jsonl",
        json!({
            "test": "mysql_declared_accounts_and_databases_reach_every_server_and_follow_their_resources",
            "method": "apply a MySQLDatabase, a labelled password Secret and a MySQLUser to a Ready 3-server cluster; time until Ready, then until the real mariadb client in every pod (as the account, over TCP to its own server) sees each change",
            "figures": figures,
            "unix_time": unix_now(),
        }),
    );
    db.ns.pass();
    Ok(())
}
