//! Growing volumes on a real cluster: a larger `spec.storage.size` grows every server's
//! volume while the servers run and a client writes (the local cluster's `expandable`
//! StorageClass: the real CSI external-provisioner and external-resizer, and the kubelet
//! growing the mounted file system), judged by `df` inside each pod; a smaller size is
//! refused with the reason; on a StorageClass without `allowVolumeExpansion`, Kubernetes'
//! refusal is reported and nothing changes.

use std::time::{Duration, Instant};

use serde_json::json;
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::wait_until;
use statecraft_e2e::writes::lost;

use super::{Db, TestResult, Writer, mariadb_cluster, pod_identities, wait_ready};

const GI: u64 = 1 << 30;

/// The `VolumesSized` condition of cluster `name`: (status, reason, message), once it is
/// about the cluster's current generation.
async fn sized(db: &Db, name: &str) -> Option<(String, String, String)> {
    let c = db.api.get(name).await.ok()?;
    let generation = c.metadata.generation;
    let condition = c.status?.conditions.into_iter().find(|c| c.type_ == "VolumesSized")?;
    (condition.observed_generation == generation).then_some((condition.status, condition.reason, condition.message))
}

/// Waits until cluster `name`'s `VolumesSized` reason is `reason`; returns its message.
async fn wait_sized(db: &Db, name: &str, reason: &str, timeout: Duration) -> Result<String, statecraft_e2e::E2eError> {
    wait_until(timeout, &format!("{name}: VolumesSized {reason}"), || async {
        let (_, r, message) = sized(db, name).await?;
        (r == reason).then_some(message)
    })
    .await
}

fn resize(db: &Db, name: &str, size: &str) -> TestResult {
    let patch = json!({"spec": {"storage": {"size": size}}}).to_string();
    db.kubectl(&["patch", "mysqlcluster", name, "--type=merge", "-p", &patch])?;
    Ok(())
}

/// Bytes of the file system mounted on the data directory of pod `pod`, as its kernel says.
fn data_fs_bytes(db: &Db, pod: &str) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let out = db.kubectl(&["exec", pod, "-c", "mysql", "--", "df", "-B1", "--output=size", "/var/lib/mysql"])?;
    let size = out.lines().last().ok_or("no df output")?.trim();
    Ok(size.parse()?)
}

/// What the claims ask for and what they have: `(claim, requested, capacity)`, by name.
fn claims(db: &Db, cluster: &str) -> Result<Vec<String>, statecraft_e2e::E2eError> {
    let out = db.kubectl(&[
        "get",
        "pvc",
        "-l",
        &format!("app.kubernetes.io/instance={cluster}"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.resources.requests.storage} {.status.capacity.storage}{\"\\n\"}{end}",
    ])?;
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    lines.sort();
    Ok(lines)
}

/// Criteria: L3.volume-expansion (volumes grown while the servers run and a client writes,
/// none restarted, no write failed; a shrink refused; a StorageClass that cannot grow
/// refused with Kubernetes' reason, nothing changed).
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_volumes_grow_while_the_servers_run_and_refusals_name_the_reason() -> TestResult {
    let evidence = super::evidence(
        "mysql_volumes_grow_while_the_servers_run_and_refusals_name_the_reason",
        &["L3.volume-expansion"],
    )
    .await?;
    // Three servers on the expandable StorageClass (the local cluster's; on another
    // provider, one by that name that can grow volumes must exist).
    let cluster = statecraft_e2e::Cluster::connect().await?;
    cluster.kubectl(&["get", "storageclass", "expandable"]).map_err(|e| {
        format!(
            "this test needs a StorageClass named expandable with allowVolumeExpansion (the local cluster has one): {e}"
        )
    })?;
    let fix_ownership = mariadb_cluster(&cluster, "x", 1)["spec"]["storage"]["fixOwnership"].clone();
    let storage = |class: Option<&str>| {
        let mut s = json!({"size": "1Gi", "fixOwnership": fix_ownership});
        if let Some(class) = class {
            s["storageClassName"] = json!(class);
        }
        s
    };
    let db = Db::create("mysql-volumes", "db", 3, json!({"storage": storage(Some("expandable"))})).await?;
    wait_sized(&db, "db", "VolumesAtSize", Duration::from_secs(60)).await?;
    let before: Vec<u64> = (0..3).map(|k| data_fs_bytes(&db, &format!("db-{k}"))).collect::<Result<_, _>>()?;
    assert!(before.iter().all(|b| *b < GI + (64 << 20)), "1Gi volumes: {before:?}");

    db.create_table().await?;
    let writer = Writer::start(db.opts().await?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pods_before = pod_identities(&db)?;
    let primary_before = db.status().await?.current_primary;

    // Grow: every claim is asked, the driver grows each volume, the kubelet grows the
    // mounted file system; no server restarts.
    let asked = Instant::now();
    resize(&db, "db", "2Gi")?;
    wait_sized(&db, "db", "VolumesAtSize", Duration::from_secs(240)).await?;
    let grown_after = asked.elapsed();
    let after: Vec<u64> = (0..3).map(|k| data_fs_bytes(&db, &format!("db-{k}"))).collect::<Result<_, _>>()?;
    for (k, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(*a >= b + GI - (64 << 20), "db-{k}: the file system grew by about 1 GiB: {b} → {a}");
    }
    for claim in claims(&db, "db")? {
        assert!(claim.ends_with(" 2Gi 2Gi"), "every claim asks for and has 2Gi: {claim}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = writer.stop().await?;
    let failed = attempts.iter().filter(|a| !a.acked).count();
    let lost = lost(&attempts, &db.rows().await?);
    assert_eq!(pod_identities(&db)?, pods_before, "no pod was replaced or restarted");
    assert_eq!(db.status().await?.current_primary, primary_before);
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert_eq!(failed, 0, "no write failed while the volumes grew");
    assert!(db.events("VolumesGrowing").await? >= 1);
    assert!(db.events("VolumesGrown").await? >= 1);
    db.ready().await?;

    // A smaller size is refused: volumes never shrink, nothing is asked.
    resize(&db, "db", "1Gi")?;
    let refused = wait_sized(&db, "db", "VolumeShrinkRefused", Duration::from_secs(60)).await?;
    assert!(refused.contains("data-db-0 has 2Gi"), "{refused}");
    assert!(db.events("VolumeShrinkRefused").await? >= 1);
    for claim in claims(&db, "db")? {
        assert!(claim.ends_with(" 2Gi 2Gi"), "nothing asked: {claim}");
    }
    resize(&db, "db", "2Gi")?;
    wait_sized(&db, "db", "VolumesAtSize", Duration::from_secs(60)).await?;

    // The default StorageClass cannot grow a volume: Kubernetes refuses, the operator says
    // so with Kubernetes' message, the server keeps serving.
    let mut small = mariadb_cluster(&db.cluster, "small", 1);
    small["spec"]["storage"] = storage(None);
    db.cluster.kubectl_with_input(&["apply", "-n", &db.ns.name, "-f", "-"], Some(&small.to_string()))?;
    wait_ready(&db.api, "small", Duration::from_secs(400)).await?;
    wait_sized(&db, "small", "VolumesAtSize", Duration::from_secs(60)).await?;
    resize(&db, "small", "2Gi")?;
    let refusal = wait_sized(&db, "small", "VolumeResizeRefused", Duration::from_secs(60)).await?;
    assert!(refusal.contains("data-small-0") && refusal.contains("storageclass"), "Kubernetes' reason: {refusal}");
    assert_eq!(claims(&db, "small")?, ["data-small-0 1Gi 1Gi"], "nothing changed");
    let events = statecraft_e2e::events::count(&db.cluster, &db.ns.name, "small", "VolumeResizeRefused").await?;
    assert!(events >= 1, "a Warning Event");
    wait_ready(&db.api, "small", Duration::from_secs(10)).await?;
    // Set back: at size again.
    resize(&db, "small", "1Gi")?;
    wait_sized(&db, "small", "VolumesAtSize", Duration::from_secs(60)).await?;

    let figures = json!({
        "test": "mysql_volumes_grow_while_the_servers_run_and_refusals_name_the_reason",
        "method": "3 MariaDB servers on 1Gi volumes of the local cluster's expandable StorageClass (statecraft-loop-csi: XFS on loop devices; the CSI external-provisioner v5.3.0 and external-resizer v1.14.0; the kubelet grows the mounted file system); spec.storage.size patched to 2Gi while one client inserts through the read-write Service; timed until VolumesSized is VolumesAtSize; df in each pod before and after",
        "seconds_until_every_volume_had_grown": grown_after.as_secs_f64(),
        "file_system_bytes_before": before,
        "file_system_bytes_after": after,
        "write_attempts": attempts.len(),
        "failed_writes": failed,
        "acknowledged_writes_lost": lost.len(),
        "at": unix_now(),
    });
    append_result("mysql-volume-growth.jsonl", figures.clone());
    evidence.pass(figures);
    db.ns.pass();
    Ok(())
}
