//! TLS on a real cluster (`spec.tls` with `requireSecureTransport`): the operator issues the
//! servers' certificate from the cluster's own authority; the `mariadb` client checking the
//! certificate against that authority and the Service's name connects over TLS, a
//! plaintext client is refused; the replicas replicate over TLS; a certificate issued
//! again is loaded by every server without a restart while a client writes over TLS; a
//! backup Job and a restore Job work against servers that refuse plaintext, the restore
//! into a cluster presenting a certificate of the user's own authority (a Secret of
//! cert-manager's shape).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};
use serde_json::json;
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::wait_until;
use statecraft_e2e::writes::lost;

use statecraft_shared::testing::s3::S3Server;
use statecraft_shared::tls::{Authority, Certificate};

use super::{Db, TestResult, Writer, mariadb_cluster, pod_identities, s3_host, wait_ready};

/// Key `key` of Secret `name`, as text.
async fn secret_text(db: &Db, name: &str, key: &str) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let secrets: Api<Secret> = Api::namespaced(db.cluster.client.clone(), &db.ns.name);
    let secret = secrets.get(name).await?;
    let bytes = secret.data.and_then(|d| d.get(key).map(|v| v.0.clone())).ok_or(format!("{name} has no {key}"))?;
    Ok(String::from_utf8(bytes)?)
}

/// The root connection through the read-write Service over TLS, checking the certificate
/// against the authority `ca` for the Service's name.
async fn tls_opts(db: &Db, ca: &str) -> Result<Opts, Box<dyn std::error::Error + Send + Sync>> {
    let service = format!("db-primary.{}.svc", db.ns.name);
    let ssl = SslOpts::default()
        .with_root_certs(vec![ca.as_bytes().to_vec().into()])
        .with_disable_built_in_roots(true)
        .with_danger_tls_hostname_override(Some(service));
    Ok(OptsBuilder::from_opts(db.opts().await?).ssl_opts(ssl).into())
}

/// The end of validity of the certificate server `member` presents, as it says.
fn served_until(db: &Db, member: &str) -> Result<String, statecraft_e2e::E2eError> {
    Ok(db
        .sql_on(
            member,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'SSL_SERVER_NOT_AFTER'",
        )?
        .trim()
        .to_string())
}

/// The `mariadb` client in the tools pod `app` as root (password `root`) against `host`
/// with `args`; its output or error.
fn client(db: &Db, host: &str, root: &str, args: &[&str]) -> Result<String, statecraft_e2e::E2eError> {
    let host = format!("--host={host}");
    let password = format!("--password={root}");
    let mut all = vec!["exec", "app", "--", "mariadb", "--no-defaults", &host, "--user=root", &password, "-N"];
    all.extend(args);
    db.kubectl(&all)
}

/// Criteria: none yet (TLS is not a criterion of the capability model).
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_tls_checked_by_the_real_client_replicated_and_renewed_without_a_restart() -> TestResult {
    let db = Db::create("mysql-tls", "db", 3, json!({"tls": {"requireSecureTransport": true}})).await?;
    let ca = secret_text(&db, "db-ca", "ca.crt").await?;
    assert_eq!(secret_text(&db, "db-tls", "ca.crt").await?, ca, "the serving Secret carries the authority");
    let root = secret_text(&db, "db-passwords", "root-password").await?;

    // The real client, checking the certificate against the cluster's authority and the
    // Service's name, gets TLS; without TLS it is refused.
    super::accounts::apply(&db, super::network::tools_pod("app", "app"))?;
    db.kubectl(&["wait", "--for=condition=Ready", "pod/app", "--timeout=120s"])?;
    db.cluster.kubectl_with_input(
        &["exec", "-i", "-n", &db.ns.name, "app", "--", "sh", "-c", "cat > /tmp/ca.crt"],
        Some(&ca),
    )?;
    let service = format!("db-primary.{}.svc", db.ns.name);
    let version = client(
        &db,
        &service,
        &root,
        &["--ssl-ca=/tmp/ca.crt", "--ssl-verify-server-cert", "-e", "SHOW SESSION STATUS LIKE 'Ssl_version'"],
    )?;
    assert!(version.contains("TLSv1."), "a TLS session: {version}");
    let plain = client(&db, &service, &root, &["--skip-ssl", "-e", "SELECT 1"]);
    assert!(plain.is_err(), "plaintext is refused: {plain:?}");
    // The pod's address is no name the certificate carries: the client refuses the server.
    let ip = db.kubectl(&["get", "pod", "db-0", "-o", "jsonpath={.status.podIP}"])?;
    let by_address = client(&db, &ip, &root, &["--ssl-ca=/tmp/ca.crt", "--ssl-verify-server-cert", "-e", "SELECT 1"]);
    assert!(by_address.is_err(), "a name the certificate lacks is refused by the client: {by_address:?}");

    // The replicas replicate over TLS (the primary refuses anything else).
    let opts = tls_opts(&db, &ca).await?;
    let mut conn = Conn::new(opts.clone()).await?;
    conn.query_drop("CREATE DATABASE IF NOT EXISTS app").await?;
    conn.query_drop("CREATE TABLE IF NOT EXISTS app.w (id BIGINT PRIMARY KEY)").await?;
    drop(conn);
    let primary = db.status().await?.current_primary.ok_or("no primary")?;
    for member in ["db-0", "db-1", "db-2"].into_iter().filter(|m| *m != primary) {
        let status = db.client_on(member, &["-e", "SHOW SLAVE STATUS\\G"])?;
        assert!(status.contains("Master_SSL_Allowed: Yes"), "{member} replicates over TLS: {status}");
        assert!(status.contains("Slave_IO_Running: Yes"), "{member} replicates: {status}");
        wait_until(Duration::from_secs(30), &format!("{member} has the table"), || async {
            db.sql_on(member, "SHOW TABLES IN app").ok().filter(|t| t.contains('w'))
        })
        .await?;
    }

    // A certificate issued again (the Secret deleted, a reconcile asked for) is loaded by
    // every server without a restart while a client writes over TLS.
    let before: Vec<String> = (0..3).map(|k| served_until(&db, &format!("db-{k}"))).collect::<Result<_, _>>()?;
    let pods_before = pod_identities(&db)?;
    let writer = Writer::start(opts.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let asked = Instant::now();
    db.kubectl(&["delete", "secret", "db-tls"])?;
    db.kubectl(&["annotate", "--overwrite", "mysqlcluster", "db", "e2e.statecraft.io/renew=1"])?;
    let renewed = wait_until(Duration::from_secs(60), "the certificate issued again", || async {
        let cert = secret_text(&db, "db-tls", "tls.crt").await.ok()?;
        Certificate::parse(&cert).ok()
    })
    .await?;
    let issued_after = asked.elapsed();
    let wanted = renewed.not_after.format("%b %e %H:%M:%S %Y GMT").to_string();
    let served = wait_until(Duration::from_secs(240), "every server presenting the new certificate", || async {
        let now: Vec<String> = (0..3).filter_map(|k| served_until(&db, &format!("db-{k}")).ok()).collect();
        now.iter().all(|s| *s == wanted).then_some(now)
    })
    .await?;
    let loaded_after = asked.elapsed();
    assert_ne!(before, served, "the servers present another certificate");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = writer.stop().await?;
    let failed = attempts.iter().filter(|a| !a.acked).count();
    let mut conn = Conn::new(opts).await?;
    let rows: Vec<u64> = conn.query("SELECT id FROM app.w ORDER BY id").await?;
    let lost = lost(&attempts, &rows);
    assert_eq!(pod_identities(&db)?, pods_before, "no pod was replaced or restarted");
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert_eq!(failed, 0, "no write failed while the certificate was renewed");
    assert!(db.events("CertificateIssued").await? >= 2, "issued at creation and again");
    assert!(db.events("CertificateReloaded").await? >= 3, "each server reloaded it");

    // A backup Job dumps a server that refuses plaintext (checking its certificate by
    // name), and a restore Job loads it into a new cluster presenting a certificate of the
    // user's own authority, which the real client then checks.
    let s3 = S3Server::start_on(&s3_host(&db.cluster)).await?;
    s3.create_bucket("backups")?;
    db.s3_credentials(&s3)?;
    let backup = json!({
        "apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLBackup", "metadata": {"name": "over-tls"},
        "spec": {"clusterName": "db", "location": serde_json::to_value(s3.location("backups", "e2e"))?}
    });
    db.cluster.kubectl_with_input(&["apply", "-n", &db.ns.name, "-f", "-"], Some(&backup.to_string()))?;
    let phase = |kind: &'static str, name: &'static str| {
        let db = &db;
        async move {
            db.kubectl(&["get", kind, name, "-o", "jsonpath={.status.phase}"])
                .ok()
                .filter(|p| p == "Succeeded" || p == "Failed")
        }
    };
    let backed_up =
        wait_until(Duration::from_secs(300), "the backup finished", || phase("mysqlbackup", "over-tls")).await?;
    assert_eq!(backed_up, "Succeeded", "the backup Job dumped over TLS");

    let ns = db.ns.name.clone();
    let user_ca = Authority::generate("the user's authority", chrono::Utc::now())?;
    let names = [format!("copy-primary.{ns}.svc"), format!("*.copy-hl.{ns}.svc")];
    let mine = user_ca.issue(&names, chrono::Utc::now())?;
    let secrets: Api<Secret> = Api::namespaced(db.cluster.client.clone(), &ns);
    secrets.create(&Default::default(), &mine.secret("copy-cert")).await?;
    let mut copy = mariadb_cluster(&db.cluster, "copy", 1)["spec"].clone();
    copy["tls"] = json!({"secretName": "copy-cert", "requireSecureTransport": true});
    let restore = json!({
        "apiVersion": "mysql.statecraft.io/v1alpha1", "kind": "MySQLRestore", "metadata": {"name": "over-tls"},
        "spec": {"backupName": "over-tls", "target": {"name": "copy", "spec": copy}}
    });
    db.cluster.kubectl_with_input(&["apply", "-n", &ns, "-f", "-"], Some(&restore.to_string()))?;
    // Not labelled by its owner: refused, naming the field, and no pod made.
    let refusal = wait_until(Duration::from_secs(60), "the unlabelled Secret refused", || async {
        let ready = db
            .kubectl(&[
                "get",
                "mysqlcluster",
                "copy",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].message}",
            ])
            .ok()?;
        ready.contains("spec.tls.secretName").then_some(ready)
    })
    .await?;
    assert!(refusal.contains("statecraft.io/tls=true"), "the message says what to do: {refusal}");
    assert!(db.kubectl(&["get", "pod", "copy-0"]).is_err(), "no server mounts it");
    db.kubectl(&["label", "secret", "copy-cert", "statecraft.io/tls=true"])?;
    db.kubectl(&["annotate", "--overwrite", "mysqlcluster", "copy", "e2e.statecraft.io/labelled=1"])?;
    let restored =
        wait_until(Duration::from_secs(600), "the restore finished", || phase("mysqlrestore", "over-tls")).await?;
    assert_eq!(restored, "Succeeded", "the restore Job loaded over TLS");
    wait_ready(&db.api, "copy", Duration::from_secs(120)).await?;
    assert!(db.kubectl(&["get", "secret", "copy-ca"]).is_err(), "no authority of the operator's beside the user's");
    db.cluster.kubectl_with_input(
        &["exec", "-i", "-n", &ns, "app", "--", "sh", "-c", "cat > /tmp/user-ca.crt"],
        Some(&user_ca.cert_pem),
    )?;
    let copy = format!("copy-primary.{ns}.svc");
    let copy_root = secret_text(&db, "copy-passwords", "root-password").await?;
    let count = client(
        &db,
        &copy,
        &copy_root,
        &["--ssl-ca=/tmp/user-ca.crt", "--ssl-verify-server-cert", "-e", "SELECT COUNT(*) FROM app.w"],
    )?;
    let backed: usize = count.trim().parse()?;
    assert_eq!(backed, rows.len(), "every row restored, read over TLS checked against the user's authority");
    let wrong_ca =
        client(&db, &copy, &copy_root, &["--ssl-ca=/tmp/ca.crt", "--ssl-verify-server-cert", "-e", "SELECT 1"]);
    assert!(wrong_ca.is_err(), "another cluster's authority does not vouch for it: {wrong_ca:?}");

    append_result(
        "mysql-tls.jsonl",
        json!({
            "test": "mysql_tls_checked_by_the_real_client_replicated_and_renewed_without_a_restart",
            "method": "3 MariaDB 10.11 servers with spec.tls.requireSecureTransport and the operator's own authority; one client inserting over TLS (rustls, checking the authority and the Service's name) through the read-write Service; the serving Secret deleted and a reconcile asked for by an annotation; timed until the Secret held a new certificate and until every server's Ssl_server_not_after was the new one's",
            "seconds_until_issued_again": issued_after.as_secs_f64(),
            "seconds_until_every_server_presented_it": loaded_after.as_secs_f64(),
            "write_attempts": attempts.len(),
            "failed_writes": failed,
            "acknowledged_writes_lost": lost.len(),
            "at": unix_now(),
        }),
    );
    db.ns.pass();
    Ok(())
}
