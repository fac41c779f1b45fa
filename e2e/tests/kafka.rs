//! The Kafka operator on a real cluster: its image, the manifests users install, a KRaft
//! cluster of 3 controllers and 3 brokers, and a roll of every node judged by Kafka's own
//! clients: **VerifiableProducer** (acks=all, idempotent) writes while the operator rolls a new
//! image through the cluster, **VerifiableConsumer** reads everything back afterwards, and the
//! test diffs what was acknowledged against what was consumed (0 lost, 0 duplicates) while it
//! samples the partitions below min.insync.replicas every second (must stay 0). Each test
//! names the capability criteria it proves.
//!
//! Measurements are appended to `results/e2e/kafka-*.jsonl`. The host is the client of the
//! admin API: on the local cluster the node routes pod IPs, so the test asks a broker's pod IP
//! for the partitions' ISR with the operator's own admin client (the numbers are Kafka's).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use statecraft_e2e::evidence::Evidence;
use statecraft_e2e::images::{image, retagged, tag_on_node};
use statecraft_e2e::operator;
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::{Cluster, E2eError, Provider, TestNamespace, wait_until};
use statecraft_kafka::KafkaOperator;
use statecraft_kafka::admin::Admin;
use statecraft_kafka::api::{KafkaCluster, KafkaClusterStatus, KafkaTopic, NodeRole};
use statecraft_kafka::build::CLUSTER_LABEL;
use statecraft_kafka::nodes::node_id;
use statecraft_kafka::observed::ConfigResource;

type Error = Box<dyn std::error::Error + Send + Sync>;
type TestResult = Result<(), Error>;

/// How long a new or changed cluster may take to converge (six JVMs on two cores).
const CONVERGE: Duration = Duration::from_secs(600);
/// The topic the verifiable clients use: 6 partitions, 3 replicas, min ISR 2.
const TOPIC: &str = "verify";
/// Records the producer sends, at [`THROUGHPUT`] a second: long enough to cover the roll.
const RECORDS: u64 = 60_000;
const THROUGHPUT: u64 = 150;
/// The cluster-wide dynamic key the test changes, and the value it sets (one day).
const RETENTION_KEY: &str = "log.retention.ms";
const RETENTION: &str = "86400000";

fn kafka_image() -> Result<&'static str, Error> {
    Ok(image("KAFKA_IMAGE").ok_or("KAFKA_IMAGE missing from images.env")?)
}

/// A KafkaCluster of 3 controllers and 3 brokers, sized for this machine. On the local
/// cluster, whose host-path provisioner ignores fsGroup, the volumes are handed to Kafka's
/// user by the opt-in init container (kind's provisioner needs none).
fn kafka_cluster(cluster: &Cluster, name: &str) -> Value {
    let fix_ownership = cluster.provider == Provider::Local;
    let pool = |replicas: i32, size: &str, memory: &str| {
        json!({
            "replicas": replicas,
            "storage": { "size": size, "fixOwnership": fix_ownership },
            "resources": { "requests": { "cpu": "100m", "memory": memory }, "limits": { "memory": memory } },
        })
    };
    json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": { "name": name },
        "spec": {
            "controllers": pool(3, "1Gi", "640Mi"),
            "brokers": pool(3, "2Gi", "896Mi"),
        },
    })
}

/// One KafkaCluster of a test namespace.
struct KafkaRef {
    cluster: Cluster,
    namespace: String,
    name: String,
}

impl KafkaRef {
    fn kubectl(&self, args: &[&str]) -> Result<String, E2eError> {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        self.cluster.kubectl(&all)
    }

    fn apply(&self, object: &Value) -> Result<String, E2eError> {
        self.cluster.kubectl_with_input(&["apply", "-n", &self.namespace, "-f", "-"], Some(&object.to_string()))
    }

    async fn status(&self) -> Result<KafkaClusterStatus, kube::Error> {
        let api: Api<KafkaCluster> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        Ok(api.get(&self.name).await?.status.unwrap_or_default())
    }

    /// The status once the cluster is Ready for its current generation with `nodes` nodes
    /// serving, or `None`.
    async fn converged_now(&self, nodes: usize) -> Option<KafkaClusterStatus> {
        let api: Api<KafkaCluster> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let c = api.get(&self.name).await.ok()?;
        let s = c.status?;
        let ready = s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        let current = s.observed_generation == c.metadata.generation;
        let serving = s.nodes.iter().filter(|n| n.ready).count() == nodes;
        (ready && current && serving).then_some(s)
    }

    async fn wait_converged(&self, nodes: usize, timeout: Duration) -> Result<KafkaClusterStatus, E2eError> {
        wait_until(timeout, &format!("KafkaCluster {} Ready with {nodes} nodes", self.name), || {
            self.converged_now(nodes)
        })
        .await
    }

    /// The node pods (controllers and brokers) by name.
    async fn node_pods(&self) -> Result<BTreeMap<String, NodePod>, kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let params = ListParams::default().labels(&format!("{CLUSTER_LABEL}={}", self.name));
        Ok(pods
            .list(&params)
            .await?
            .items
            .into_iter()
            .map(|p| {
                let statuses = p.status.as_ref().and_then(|s| s.container_statuses.as_ref());
                let pod = NodePod {
                    uid: p.uid().unwrap_or_default(),
                    terminating: p.metadata.deletion_timestamp.is_some(),
                    restarts: statuses.map_or(0, |c| c.iter().map(|c| c.restart_count).sum()),
                };
                (p.name_any(), pod)
            })
            .collect())
    }

    /// The broker pods' IPs.
    async fn broker_ips(&self) -> Result<Vec<String>, kube::Error> {
        Ok(self.brokers().await?.into_values().collect())
    }

    /// The IP of each broker pod that has one and is not terminating, by node id.
    async fn brokers(&self) -> Result<BTreeMap<i32, String>, kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let prefix = format!("{}-broker-", self.name);
        Ok(pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                let ordinal: i32 = p.name_any().strip_prefix(&prefix)?.parse().ok()?;
                Some((node_id(NodeRole::Broker, ordinal), p.status?.pod_ip?))
            })
            .collect())
    }

    /// Runs `command` once in a Job of the Kafka image (the tools live there): a verifiable
    /// client that failed must not run again and write or read twice.
    fn job(&self, name: &str, command: &[&str]) -> Result<(), E2eError> {
        let job = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": { "name": name },
            "spec": {
                "backoffLimit": 0,
                "template": { "spec": {
                    "restartPolicy": "Never",
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [{
                        "name": "tool",
                        "image": kafka_image().map_err(|e| E2eError::Other(e.to_string()))?,
                        "imagePullPolicy": "IfNotPresent",
                        "command": command,
                        "env": [{ "name": "KAFKA_HEAP_OPTS", "value": "-Xmx256m" }],
                        "securityContext": { "allowPrivilegeEscalation": false, "capabilities": { "drop": ["ALL"] } },
                    }],
                }},
            },
        });
        self.apply(&job).map(|_| ())
    }

    fn logs(&self, job: &str) -> Result<String, E2eError> {
        self.kubectl(&["logs", &format!("job/{job}")])
    }

    fn wait_job(&self, job: &str, timeout: Duration) -> Result<(), E2eError> {
        self.kubectl(&[
            "wait",
            "--for=condition=complete",
            &format!("job/{job}"),
            &format!("--timeout={}s", timeout.as_secs()),
        ])
        .map(|_| ())
    }
}

/// What one sample of the partitions found: how many are below their min ISR.
async fn under_min_isr(ips: &[String], min_isr: usize) -> Option<usize> {
    for ip in ips {
        let Ok(admin) = Admin::connect(&format!("{ip}:9092"), Duration::from_secs(2)).await else { continue };
        let Ok(topics) = admin.topics().await else { continue };
        let count = topics
            .iter()
            .filter(|t| t.name == TOPIC)
            .flat_map(|t| &t.partitions)
            .filter(|p| p.isr.len() < min_isr.min(p.replicas.len()))
            .count();
        return Some(count);
    }
    None
}

/// A node pod as a sample of the test sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodePod {
    uid: String,
    terminating: bool,
    /// How often its containers restarted.
    restarts: i32,
}

/// One record as VerifiableProducer acknowledged it, or VerifiableConsumer read it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Record {
    value: String,
    partition: i64,
    offset: i64,
}

/// The JSON events of a verifiable client's output named `event`.
fn events(output: &str, event: &str) -> Vec<Value> {
    output.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|v| v["name"] == event).collect()
}

fn record(v: &Value) -> Option<Record> {
    Some(Record {
        value: v["value"].as_str()?.to_owned(),
        partition: v["partition"].as_i64()?,
        offset: v["offset"].as_i64()?,
    })
}

async fn evidence(test: &str, criteria: &[&str]) -> Result<Evidence, Error> {
    Ok(Evidence::start(&Cluster::connect().await?, "kafka", test, criteria).await?)
}

/// Criteria: L1.install (the operator installed from its manifests; a KafkaCluster of 3
/// controllers and 3 brokers formatted once with the dynamic quorum, Ready with 3 caught-up
/// voters, the quorum bootstrapped, 6 serving nodes and the cluster id in status), L1.config
/// (a cluster-wide dynamic key of the spec set on every broker, no pod restarted, the new
/// generation observed), L2.rolling-restart (a new image rolled through every node,
/// controllers first and the active controller last, then the brokers, behind the quorum
/// and min-ISR gates, while VerifiableProducer writes with acks=all: every acknowledged
/// record is read back by VerifiableConsumer, none twice, and no partition is ever below
/// min.insync.replicas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn kafka_cluster_becomes_ready_and_rolls_without_losing_acknowledged_records() -> TestResult {
    let test = "kafka_cluster_becomes_ready_and_rolls_without_losing_acknowledged_records";
    let ev = evidence(test, &["L1.install", "L1.config", "L2.rolling-restart"]).await?;
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "kafka").await?;
    operator::install::<KafkaOperator>(&cluster, &ns.name, "STATECRAFT_KAFKA_IMAGE").await?;
    let kafka = KafkaRef { cluster: cluster.clone(), namespace: ns.name.clone(), name: "kafka".into() };
    let created = Instant::now();
    kafka.apply(&kafka_cluster(&cluster, "kafka"))?;
    let s = kafka.wait_converged(6, CONVERGE).await?;
    let ready_after = created.elapsed();
    eprintln!("kafka: 6 nodes Ready {ready_after:?} after creation");

    // Status: the cluster id, a quorum of three caught-up voters led by a controller, every
    // node serving, where clients bootstrap.
    assert!(s.cluster_id.as_deref().is_some_and(|id| id.len() == 22), "{s:?}");
    let quorum = s.quorum.clone().ok_or("no quorum in status")?;
    assert_eq!(quorum.voters.len(), 3, "{quorum:?}");
    assert!(quorum.voters.iter().all(|v| v.caught_up), "{quorum:?}");
    assert!(quorum.leader_id.is_some_and(|l| (0..3).contains(&l)), "{quorum:?}");
    assert_eq!(s.active_controller, quorum.leader_id);
    // Every initial voter joined with the directory id it was formatted with: from now on a
    // controller with a lost volume formats as an observer.
    assert_eq!(s.quorum_bootstrapped, Some(true), "{quorum:?}");
    let ids: BTreeSet<i32> = s.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 1, 2, 100, 101, 102].into(), "{:?}", s.nodes);
    assert_eq!(s.offline_partitions, Some(0), "{s:?}");
    let bootstrap = s.bootstrap.clone().ok_or("no bootstrap address in status")?;
    assert!(bootstrap.starts_with("kafka-bootstrap."), "{bootstrap}");

    // The topic of the verifiable clients, as a KafkaTopic: the operator's topic controller
    // creates it through the bootstrap Service and reports it Ready and in sync. (Kafka's
    // own tool, used here before, once hung for its whole 60 s deadline on the first
    // CreateTopics right after Ready; the controller retries with its own time-out.)
    let topic_created = Instant::now();
    kafka.apply(&json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1",
        "kind": "KafkaTopic",
        "metadata": { "name": TOPIC },
        "spec": {
            "clusterName": "kafka", "partitions": 6, "replicationFactor": 3,
            "config": { "min.insync.replicas": "2" },
        },
    }))?;
    let topics: Api<KafkaTopic> = Api::namespaced(cluster.client.clone(), &ns.name);
    let topic = wait_until(Duration::from_secs(300), "KafkaTopic verify Ready and in sync", || async {
        let status = topics.get(TOPIC).await.ok()?.status?;
        let is_true = |type_: &str| status.conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
        (is_true("Ready") && is_true("InSync")).then_some(status)
    })
    .await?;
    let topic_seconds = topic_created.elapsed().as_secs_f64();
    assert_eq!((topic.partitions, topic.replication_factor), (Some(6), Some(3)), "{topic:?}");
    assert!(topic.topic_id.is_some(), "{topic:?}");

    // Produce, and roll every node to a new image meanwhile.
    kafka.job(
        "producer",
        &[
            "kafka-verifiable-producer",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            TOPIC,
            // acks=all, as the tool spells it.
            "--acks",
            "-1",
            "--max-messages",
            &RECORDS.to_string(),
            "--throughput",
            &THROUGHPUT.to_string(),
        ],
    )?;
    wait_until(Duration::from_secs(180), "the producer's first acknowledgement", || async {
        kafka.logs("producer").ok().filter(|l| l.contains("producer_send_success"))
    })
    .await?;
    let rolled = retagged(kafka_image()?, "rolled");
    tag_on_node(kafka_image()?, &rolled)?;
    let node_uids: BTreeMap<String, String> =
        kafka.node_pods().await?.into_iter().map(|(name, pod)| (name, pod.uid)).collect();
    assert_eq!(node_uids.len(), 6, "{node_uids:?}");
    let roll_started = Instant::now();
    kafka.apply(&json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaCluster", "metadata": { "name": "kafka" },
        "spec": { "image": rolled, "controllers": kafka_cluster(&cluster, "kafka")["spec"]["controllers"].clone(),
                  "brokers": kafka_cluster(&cluster, "kafka")["spec"]["brokers"].clone() },
    }))?;
    let mut worst_under_min_isr = 0usize;
    let mut samples = 0usize;
    // Each node pod's restart as this test sees it (the pod terminating, gone or replaced),
    // in order, with the active controller of the sample before: the operator's own
    // account (status.upgrade) is checked against it, not used for it.
    let mut restarts_seen: Vec<String> = Vec::new();
    let mut actives: Vec<(String, Option<String>)> = Vec::new();
    let mut active_before = kafka.status().await?.active_controller.map(|id| format!("{}-controller-{id}", kafka.name));
    let converged = loop {
        if roll_started.elapsed() > CONVERGE {
            return Err(format!("the roll did not finish in {CONVERGE:?}; nodes restarted: {restarts_seen:?}").into());
        }
        let pods = kafka.node_pods().await?;
        for (name, uid) in &node_uids {
            let replaced = pods.get(name).is_none_or(|now| now.uid != *uid || now.terminating);
            if replaced && !restarts_seen.contains(name) {
                actives.push((name.clone(), active_before.clone()));
                restarts_seen.push(name.clone());
            }
        }
        let ips = kafka.broker_ips().await?;
        if let Some(n) = under_min_isr(&ips, 2).await {
            samples += 1;
            worst_under_min_isr = worst_under_min_isr.max(n);
        }
        let status = kafka.status().await?;
        active_before = status.active_controller.map(|id| format!("{}-controller-{id}", kafka.name));
        if let Some(s) = kafka.converged_now(6).await
            && s.nodes.iter().all(|n| n.revision.is_some())
            && s.upgrade.as_ref().is_some_and(|u| u.completed_at.is_some())
        {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let roll_seconds = roll_started.elapsed().as_secs_f64();
    eprintln!("kafka: roll done in {roll_seconds:.0}s, order {restarts_seen:?}");
    let image_now = kafka.kubectl(&["get", "pods", "-o", "jsonpath={.items[*].spec.containers[0].image}"])?;
    assert!(
        image_now.split_whitespace().filter(|i| *i == rolled).count() >= 6,
        "every node on the new image: {image_now}"
    );
    // Controllers first, the active controller of the time last among them, then brokers.
    let first_broker = restarts_seen.iter().position(|m| m.contains("-broker-"));
    let last_controller = restarts_seen.iter().rposition(|m| m.contains("-controller-"));
    assert!(first_broker.is_some() && last_controller.is_some() && last_controller < first_broker, "{restarts_seen:?}");
    assert_eq!(restarts_seen.len(), 6, "each node restarted once: {restarts_seen:?}");
    let done = converged.upgrade.as_ref().map(|u| u.members_done.clone()).unwrap_or_default();
    assert_eq!(done, restarts_seen, "confirmed in the order restarted");
    // Only the last controller restarted was the active one when its restart began.
    for (member, active) in actives.iter().filter(|(m, _)| m.contains("-controller-")) {
        let last = Some(member) == last_controller.map(|i| &restarts_seen[i]);
        assert_eq!(active.as_ref() == Some(member), last, "{member} (active then: {active:?}) in {actives:?}");
    }
    assert_eq!(
        worst_under_min_isr, 0,
        "a partition fell below min.insync.replicas during the roll ({samples} samples)"
    );

    // Every acknowledged record read back, none twice.
    kafka.wait_job("producer", Duration::from_secs(900))?;
    let produced = kafka.logs("producer")?;
    let acked: Vec<Record> = events(&produced, "producer_send_success").iter().filter_map(record).collect();
    let failed = events(&produced, "producer_send_error").len();
    assert!(acked.len() as u64 >= RECORDS / 2, "{} acknowledged of {RECORDS}", acked.len());
    kafka.job(
        "consumer",
        &[
            "kafka-verifiable-consumer",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            TOPIC,
            "--group-id",
            "verify",
            "--reset-policy",
            "earliest",
            "--verbose",
            "--max-messages",
            &(acked.len() + failed).to_string(),
        ],
    )?;
    let wanted: BTreeSet<&str> = acked.iter().map(|r| r.value.as_str()).collect();
    let consumed: Vec<Record> =
        wait_until(Duration::from_secs(600), "the consumer to read every acknowledged record", || async {
            let out = kafka.logs("consumer").ok()?;
            let read: Vec<Record> = events(&out, "record_data").iter().filter_map(record).collect();
            let values: BTreeSet<&str> = read.iter().map(|r| r.value.as_str()).collect();
            wanted.iter().all(|v| values.contains(v)).then_some(read)
        })
        .await?;
    let mut by_value: BTreeMap<&str, BTreeSet<(i64, i64)>> = BTreeMap::new();
    for r in &consumed {
        by_value.entry(r.value.as_str()).or_default().insert((r.partition, r.offset));
    }
    let duplicates = by_value.values().filter(|at| at.len() > 1).count();
    let lost = wanted.iter().filter(|v| !by_value.contains_key(*v)).count();
    assert_eq!(lost, 0);
    assert_eq!(duplicates, 0, "records written twice");
    for r in &acked {
        assert!(by_value[r.value.as_str()].contains(&(r.partition, r.offset)), "{r:?} read where it was acknowledged");
    }

    // A cluster-wide dynamic key: set on every broker with IncrementalAlterConfigs, no pod
    // restarted, no new revision.
    let revisions: Vec<Option<String>> = converged.nodes.iter().map(|n| n.revision.clone()).collect();
    let pods_before = kafka.node_pods().await?;
    assert_eq!(pods_before.len(), 6, "{pods_before:?}");
    let config_started = Instant::now();
    let mut spec = kafka_cluster(&cluster, "kafka")["spec"].clone();
    spec["image"] = json!(rolled);
    spec["config"] = json!({ RETENTION_KEY: RETENTION });
    kafka.apply(&json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaCluster", "metadata": { "name": "kafka" },
        "spec": spec,
    }))?;
    wait_until(Duration::from_secs(120), &format!("{RETENTION_KEY}={RETENTION} on every broker"), || async {
        let brokers = kafka.brokers().await.ok()?;
        for (id, ip) in &brokers {
            let admin = Admin::connect(&format!("{ip}:9092"), Duration::from_secs(2)).await.ok()?;
            let resource = ConfigResource::Broker(*id);
            let mut configs = admin.describe_configs(std::slice::from_ref(&resource)).await.ok()?;
            let value = configs.remove(&resource)?.remove(RETENTION_KEY)?.value;
            if value.as_deref() != Some(RETENTION) {
                return None;
            }
        }
        (brokers.len() == 3).then_some(())
    })
    .await?;
    let config_seconds = config_started.elapsed().as_secs_f64();
    eprintln!("kafka: {RETENTION_KEY} on every broker {config_seconds:.1}s after the apply");
    assert_eq!(kafka.node_pods().await?, pods_before, "no node pod replaced or restarted");
    let after = kafka.wait_converged(6, Duration::from_secs(120)).await?;
    let revisions_now: Vec<Option<String>> = after.nodes.iter().map(|n| n.revision.clone()).collect();
    assert_eq!(revisions_now, revisions, "no new revision for a dynamic key");

    let figures = json!({
        "ready_seconds": ready_after.as_secs_f64(), "topic_ready_seconds": topic_seconds, "roll_seconds": roll_seconds,
        "dynamic_config_seconds": config_seconds,
        "nodes_rolled": restarts_seen.len(), "seconds_per_node": roll_seconds / restarts_seen.len().max(1) as f64,
        "acknowledged": acked.len(), "send_errors": failed, "lost": lost, "duplicates": duplicates,
        "under_min_isr_max": worst_under_min_isr, "under_min_isr_samples": samples,
    });
    append_result(
        "kafka-roll.jsonl",
        json!({
            "test": test,
            "method": "3 controllers + 3 brokers on the local cluster; VerifiableProducer (acks=all, idempotent) at 150 records/s while a new image rolls every node; VerifiableConsumer reads the topic back; partitions below min ISR sampled every second with the admin client",
            "figures": figures, "unix_time": unix_now(),
        }),
    );
    ev.pass(figures);
    ns.pass();
    Ok(())
}
