//! The topic controller at scale: 1,000 KafkaTopics (`STATECRAFT_BENCH_TOPICS` sets the
//! count) of one KafkaCluster, against a real kube-apiserver and a real Kafka 4.4 cluster
//! (3 controllers, 3 brokers on loopback; see `tests/support`).
//!
//! `cargo bench -p statecraft-kafka --bench topics`. Prints a table and writes
//! `<workspace>/results/bench/kafka_topics.json`.
//!
//! Method: the controller runs alone in a child process (this executable again, told its
//! role by `STATECRAFT_BENCH_ROLE`) as the operator's service account with exactly its
//! rendered Role, so that its memory is read apart from the benchmark's own
//! (`VmRSS` and `VmHWM` of `/proc/<pid>/status`): idle, once every topic is Ready, and at
//! the end. The first pass is timed from the first create until every KafkaTopic is Ready
//! and InSync (the resources are created one after the other, as fast as the API server
//! takes them). Then, with nothing changed, the controller's requests are counted in the API
//! server's audit log over one resync period and a margin, so every topic is looked at
//! again once: there must be no write. (Only the topic controller runs: the cluster
//! controller would manage StatefulSets no kubelet runs here.)

#[path = "../tests/support/apiserver.rs"]
mod apiserver;
#[allow(
    dead_code,
    reason = "the harness is shared with tests/admin.rs, which stops and restarts nodes; this file does not"
)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use statecraft_kafka::KafkaOperator;
use statecraft_kafka::api::{KafkaCluster, KafkaTopic};
use statecraft_kafka::controller::topic;
use statecraft_shared::runner::{Operator, Runtime};
use statecraft_shared::testing::apiserver::{ApiServer, client_from_kubeconfig};
use statecraft_shared::tokio_util::sync::CancellationToken;
use support::BROKERS;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

const NS: &str = "bench";
const CLUSTER: &str = "events";
/// Longest wait for the first pass.
const FIRST_PASS: Duration = Duration::from_secs(900);
const WRITES: [&str; 4] = ["create", "update", "patch", "delete"];
const READS: [&str; 3] = ["get", "list", "watch"];

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("topics bench: runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = match std::env::var("STATECRAFT_BENCH_ROLE").as_deref() {
        Ok("controller") => runtime.block_on(controller()),
        _ => runtime.block_on(parent()),
    };
    if let Err(e) = result {
        eprintln!("topics bench failed: {e}");
        std::process::exit(1);
    }
}

/// The child: the topic controller, with the kubeconfig it is given, until killed.
async fn controller() -> BenchResult<()> {
    let kubeconfig = PathBuf::from(std::env::var("STATECRAFT_BENCH_KUBECONFIG")?);
    let client = client_from_kubeconfig(&kubeconfig).await?;
    let rt = Arc::new(Runtime::new(client, NS.into(), KafkaOperator::NAME, "bench".into())?);
    topic::run(rt, CancellationToken::new()).await;
    Ok(())
}

/// Kills the controller when the benchmark ends, however it ends.
struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `VmRSS` and `VmHWM` of process `pid`, in MiB.
fn memory(pid: u32) -> BenchResult<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> BenchResult<f64> {
        let line = status.lines().find(|l| l.starts_with(name)).ok_or(format!("no {name} in /proc/{pid}/status"))?;
        let kib: f64 = line.trim_start_matches(name).trim().trim_end_matches("kB").trim().parse()?;
        Ok(kib / 1024.0)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

fn topic_object(name: &str) -> BenchResult<KafkaTopic> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaTopic",
        "metadata": {"name": name},
        "spec": {"clusterName": CLUSTER, "partitions": 1, "replicationFactor": 3},
    }))?)
}

/// How many KafkaTopics are Ready and InSync.
async fn converged(topics: &Api<KafkaTopic>) -> BenchResult<usize> {
    let list = topics.list(&Default::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|t| {
            let conditions = t.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
            ["Ready", "InSync"].iter().all(|type_| conditions.iter().any(|c| c.type_ == *type_ && c.status == "True"))
        })
        .count())
}

async fn parent() -> BenchResult<()> {
    let count: usize = match std::env::var("STATECRAFT_BENCH_TOPICS") {
        Ok(n) => n.parse()?,
        Err(_) => 1000,
    };
    let (server, kafka) = tokio::join!(ApiServer::start(), support::KafkaCluster::start());
    let server = server?;
    let client = server.client().await?;
    apiserver::install(&client, NS).await;
    let user = apiserver::operator_user(NS);
    let audit = |verbs: &[&str]| server.audit_count(&user, verbs);

    // The cluster, as the per-cluster task reports it once a broker registered.
    let cluster: KafkaCluster = serde_json::from_value(json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": CLUSTER},
        "spec": {"combined": {"replicas": 3, "storage": {"size": "1Gi"}}},
    }))?;
    let clusters: Api<KafkaCluster> = Api::namespaced(client.clone(), NS);
    clusters.create(&PostParams::default(), &cluster).await?;
    let status = json!({"status": {"clusterId": kafka.cluster_id, "bootstrap": kafka.address(BROKERS[0])}});
    clusters.patch_status(CLUSTER, &PatchParams::default(), &Patch::Merge(&status)).await?;

    let kubeconfig = server.kubeconfig_as(&user, &["system:serviceaccounts"])?;
    let child = Command::new(std::env::current_exe()?)
        .env("STATECRAFT_BENCH_ROLE", "controller")
        .env("STATECRAFT_BENCH_KUBECONFIG", &kubeconfig)
        .spawn()?;
    let controller = Controller(child);
    let pid = controller.0.id();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (idle_rss, _) = memory(pid)?;

    let topics: Api<KafkaTopic> = Api::namespaced(client.clone(), NS);
    let writes_before = audit(&WRITES)?;
    let started = Instant::now();
    for i in 0..count {
        topics.create(&PostParams::default(), &topic_object(&format!("t-{i:04}"))?).await?;
    }
    let created = started.elapsed();
    let mut ready = 0;
    while ready < count {
        if started.elapsed() > FIRST_PASS {
            return Err(format!("{ready} of {count} topics Ready and InSync after {FIRST_PASS:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        ready = converged(&topics).await?;
    }
    let first_pass = started.elapsed();
    let first_pass_writes = audit(&WRITES)? - writes_before;
    let (ready_rss, _) = memory(pid)?;
    let in_kafka = kafka.admin(BROKERS[0]).await.topics().await?.iter().filter(|t| t.name.starts_with("t-")).count();
    if in_kafka != count {
        return Err(format!("Kafka has {in_kafka} of the {count} topics").into());
    }

    // Steady state: the reconcile that follows each change (two seconds later) is over, then
    // one resync period and a margin.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (reads_before, writes_before) = (audit(&READS)?, audit(&WRITES)?);
    let window = topic::RESYNC + Duration::from_secs(20);
    tokio::time::sleep(window).await;
    let steady_reads = audit(&READS)? - reads_before;
    let steady_writes = audit(&WRITES)? - writes_before;
    let (steady_rss, peak_rss) = memory(pid)?;
    drop(controller);

    let result = json!({
        "topics": count,
        "create_seconds": created.as_secs_f64(),
        "first_pass_seconds": first_pass.as_secs_f64(),
        "first_pass_writes": first_pass_writes,
        "steady_window_seconds": window.as_secs_f64(),
        "steady_reads": steady_reads,
        "steady_writes": steady_writes,
        "rss_mib": {"idle": idle_rss, "ready": ready_rss, "steady": steady_rss, "peak": peak_rss},
    });
    println!("KafkaTopics                      {count}");
    println!("created in                       {:.1} s", created.as_secs_f64());
    println!("all Ready and InSync after       {:.1} s", first_pass.as_secs_f64());
    println!("operator writes, first pass      {first_pass_writes}");
    println!("steady state over {:.0} s         {steady_reads} reads, {steady_writes} writes", window.as_secs_f64());
    println!(
        "controller RSS MiB               idle {idle_rss:.1}, ready {ready_rss:.1}, steady {steady_rss:.1}, peak {peak_rss:.1}"
    );
    write_result(&result)?;
    if steady_writes != 0 {
        return Err(format!("{steady_writes} writes in steady state").into());
    }
    Ok(())
}

fn write_result(result: &Value) -> BenchResult<()> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/bench"));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("kafka_topics.json");
    std::fs::write(&path, serde_json::to_string_pretty(result)? + "\n")?;
    println!("written to {}", path.display());
    Ok(())
}
