//! The Kafka operator on a real cluster: its image, the manifests users install, a KRaft
//! cluster of 3 controllers and 3 brokers on the previous Kafka release, and its upgrade to
//! the release built here, judged by Kafka's own clients: **VerifiableProducer** (acks=all,
//! idempotent) writes while the operator rolls the new version through the cluster and then
//! finalizes metadata.version, **VerifiableConsumer** reads everything back afterwards, and the
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
use statecraft_e2e::faults::{PodInfo, crash};
use statecraft_e2e::images::{image, previous_commit, retagged};
use statecraft_e2e::operator;
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::{Cluster, E2eError, Provider, TestNamespace, wait_until};
use statecraft_kafka::KafkaOperator;
use statecraft_kafka::admin::Admin;
use statecraft_kafka::api::{KafkaCluster, KafkaClusterStatus, KafkaTopic, NodeRole};
use statecraft_kafka::build::CLUSTER_LABEL;
use statecraft_kafka::build::statefulset::{CONTAINER, METRICS_PORT};
use statecraft_kafka::metadata_version;
use statecraft_kafka::nodes::node_id;
use statecraft_kafka::observed::ConfigResource;
use statecraft_shared::runner::Operator;

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
/// The topic of `kafka-producer-perf-test`, apart from the verifiable clients' (whose
/// consumer must read back only what their producer wrote), and its rate.
const PERF_TOPIC: &str = "perf";
const PERF_THROUGHPUT: u64 = 100;
/// Records of the baseline latency run, before the roll (30 s), and of the run during it
/// (about as long as the roll: 18 s a node in earlier runs).
const PERF_BEFORE: u64 = 3_000;
const PERF_DURING: u64 = 12_000;
/// A cluster-wide dynamic key the test gives a value Kafka refuses.
const REFUSED_KEY: &str = "log.retention.bytes";

fn kafka_image() -> Result<&'static str, Error> {
    Ok(image("KAFKA_IMAGE").ok_or("KAFKA_IMAGE missing from images.env")?)
}

/// The Kafka version of image `key` of images.env (its tag): the release built here
/// (`KAFKA_IMAGE`) or the one the upgrade starts from (`KAFKA_PREVIOUS_IMAGE`).
fn version_of(key: &str) -> Result<&'static str, Error> {
    let name = image(key).ok_or_else(|| format!("{key} missing from images.env"))?;
    Ok(name.rsplit_once(':').ok_or_else(|| format!("{key} has no tag: {name}"))?.1)
}

/// The name of the metadata.version a fresh cluster of `version` is formatted with, and a
/// roll to it finalizes: the newest level of its release series.
fn newest_metadata_of(version: &str) -> Result<&'static str, Error> {
    let v = statecraft_kafka::validate::parse_version(version).ok_or_else(|| format!("not a version: {version}"))?;
    let level = metadata_version::latest_of(v.series()).ok_or_else(|| format!("no metadata.version of {version}"))?;
    Ok(metadata_version::name(level).ok_or("a level without a name")?)
}

/// A KafkaCluster of 3 controllers and 3 brokers of Kafka `version`, sized for this machine. On the local
/// cluster, whose host-path provisioner ignores fsGroup, the volumes are handed to Kafka's
/// user by the opt-in init container (kind's provisioner needs none).
fn kafka_cluster(cluster: &Cluster, name: &str, version: &str) -> Value {
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
            "version": version,
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
                let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
                let pod = NodePod {
                    uid: p.uid().unwrap_or_default(),
                    terminating: p.metadata.deletion_timestamp.is_some(),
                    ready: conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
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

    /// Creates topic `name` as a KafkaTopic and waits until the operator's topic controller
    /// reports it Ready and in sync; returns the seconds that took. (Kafka's own tool, used
    /// here before, once hung for its whole 60 s deadline on the first CreateTopics right
    /// after Ready; the controller retries with its own time-out.)
    async fn create_topic(&self, name: &str) -> Result<f64, Error> {
        let created = Instant::now();
        self.apply(&json!({
            "apiVersion": "kafka.statecraft.io/v1alpha1",
            "kind": "KafkaTopic",
            "metadata": { "name": name },
            "spec": {
                "clusterName": self.name, "partitions": 6, "replicationFactor": 3,
                "config": { "min.insync.replicas": "2" },
            },
        }))?;
        let topics: Api<KafkaTopic> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let topic = wait_until(Duration::from_secs(300), &format!("KafkaTopic {name} Ready and in sync"), || async {
            let status = topics.get(name).await.ok()?.status?;
            let is_true = |type_: &str| status.conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
            (is_true("Ready") && is_true("InSync")).then_some(status)
        })
        .await?;
        assert_eq!((topic.partitions, topic.replication_factor), (Some(6), Some(3)), "{topic:?}");
        assert!(topic.topic_id.is_some(), "{topic:?}");
        Ok(created.elapsed().as_secs_f64())
    }

    /// Deletes the clients' KafkaTopics while the operator still runs to remove their
    /// finalizer: deleted with the namespace, after the operator, it would hold the
    /// namespace in Terminating for good.
    fn delete_topic(&self) -> Result<(), E2eError> {
        self.kubectl(&["delete", "kafkatopic", "--all", "--timeout=120s"]).map(|_| ())
    }

    /// Starts VerifiableProducer (acks=all, idempotent) on the topic, [`RECORDS`] records at
    /// [`THROUGHPUT`] a second, and waits for its first acknowledgement.
    async fn produce(&self, bootstrap: &str) -> Result<(), Error> {
        // VerifiableProducer sets retries=0 unless a config file says otherwise, which also
        // turns idempotence off without a word: the file asks for both, as a real client
        // would run (found by reading the tool's bytecode after 105 failed sends in a roll).
        let command = format!(
            "printf 'enable.idempotence=true\\nretries=2147483647\\n' > /tmp/producer.properties && \
             exec kafka-verifiable-producer --bootstrap-server {bootstrap} --topic {TOPIC} --acks -1 \
             --max-messages {RECORDS} --throughput {THROUGHPUT} --command-config /tmp/producer.properties"
        );
        self.job("producer", &["sh", "-c", &command])?;
        wait_until(Duration::from_secs(180), "the producer's first acknowledgement", || async {
            self.logs("producer").ok().filter(|l| l.contains("producer_send_success"))
        })
        .await?;
        Ok(())
    }

    /// Starts Kafka's own `kafka-producer-perf-test` in Job `job` on [`PERF_TOPIC`]: `records`
    /// records of 100 bytes at [`PERF_THROUGHPUT`] a second, acks=all and idempotent, as the
    /// verifiable producer writes. Its summary gives the latency percentiles
    /// ([`Self::latency`]).
    fn perf(&self, job: &str, bootstrap: &str, records: u64) -> Result<(), E2eError> {
        let command = format!(
            "exec kafka-producer-perf-test --topic {PERF_TOPIC} --num-records {records} --record-size 100 \
             --throughput {PERF_THROUGHPUT} --producer-props bootstrap.servers={bootstrap} acks=all \
             enable.idempotence=true retries=2147483647"
        );
        self.job(job, &["sh", "-c", &command])
    }

    /// Waits for perf Job `job` and reads its summary.
    fn latency(&self, job: &str) -> Result<Latency, Error> {
        self.wait_job(job, Duration::from_secs(600))?;
        let out = self.logs(job)?;
        Ok(Latency::parse(&out).ok_or_else(|| format!("no summary in the output of {job}:\n{out}"))?)
    }

    /// Waits for the producer to finish, reads the topic back with VerifiableConsumer and
    /// checks that every acknowledged record is there, once, where it was acknowledged.
    async fn check_records(&self, bootstrap: &str) -> Result<Records, Error> {
        self.wait_job("producer", Duration::from_secs(900))?;
        let produced = self.logs("producer")?;
        let acked_events = events(&produced, "producer_send_success");
        let acked: Vec<Record> = acked_events.iter().filter_map(record).collect();
        let errors = events(&produced, "producer_send_error");
        let failed = errors.len();
        let mut failures: BTreeMap<String, usize> = BTreeMap::new();
        for e in &errors {
            *failures.entry(e["exception"].as_str().unwrap_or("unknown").to_owned()).or_default() += 1;
        }
        assert!(acked.len() as u64 >= RECORDS / 2, "{} acknowledged of {RECORDS}", acked.len());
        let max_messages = (acked.len() + failed).to_string();
        self.job(
            "consumer",
            &[
                "kafka-verifiable-consumer",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                TOPIC,
                "--group-id",
                "verify",
                "--reset-policy",
                "earliest",
                "--verbose",
                "--max-messages",
                &max_messages,
            ],
        )?;
        let wanted: BTreeSet<&str> = acked.iter().map(|r| r.value.as_str()).collect();
        let consumed: Vec<Record> =
            wait_until(Duration::from_secs(600), "the consumer to read every acknowledged record", || async {
                let out = self.logs("consumer").ok()?;
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
            assert!(
                by_value[r.value.as_str()].contains(&(r.partition, r.offset)),
                "{r:?} read where it was acknowledged"
            );
        }
        let times: Vec<i64> = acked_events.iter().filter_map(|e| e["timestamp"].as_i64()).collect();
        assert_eq!(times.len(), acked.len(), "every acknowledgement has its time");
        Ok(Records { acked: acked.len(), failed, failures, longest_gap_seconds: longest_gap_ms(times) as f64 / 1000.0 })
    }

    /// Waits until each of the 3 brokers reports `key` = `value` (DescribeConfigs).
    async fn wait_broker_config(&self, key: &str, value: &str) -> Result<(), E2eError> {
        wait_until(Duration::from_secs(120), &format!("{key}={value} on every broker"), || async {
            let brokers = self.brokers().await.ok()?;
            for (id, ip) in &brokers {
                let admin = Admin::connect(&format!("{ip}:9092"), Duration::from_secs(2)).await.ok()?;
                let resource = ConfigResource::Broker(*id);
                let mut configs = admin.describe_configs(std::slice::from_ref(&resource)).await.ok()?;
                if configs.remove(&resource)?.remove(key)?.value.as_deref() != Some(value) {
                    return None;
                }
            }
            (brokers.len() == 3).then_some(())
        })
        .await
    }

    /// The generations of the two StatefulSets: a change of pod template raises them.
    fn statefulset_generations(&self) -> Result<String, E2eError> {
        let sets = [format!("{}-controller", self.name), format!("{}-broker", self.name)];
        let path = "jsonpath={range .items[*]}{.metadata.name}={.metadata.generation} {end}";
        self.kubectl(&["get", "statefulsets", &sets[0], &sets[1], "-o", path])
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
    /// Its Ready condition is true (for a node pod: the operator saw its node serve).
    ready: bool,
    /// How often its containers restarted.
    restarts: i32,
}

/// What [`KafkaRef::check_records`] found (besides nothing lost and nothing twice).
struct Records {
    /// Records acknowledged.
    acked: usize,
    /// Sends that failed (not acknowledged, so they may or may not be there).
    failed: usize,
    /// The failed sends by the exception the producer reported.
    failures: BTreeMap<String, usize>,
    /// The longest time between two acknowledgements: how long writes stopped altogether.
    /// (Per partition it would say little: the producer's sticky partitioner fills one
    /// partition at a time and avoids a slow one for a while.)
    longest_gap_seconds: f64,
}

/// The longest time between two consecutive of `times` (ms, in any order); 0 for fewer than two.
fn longest_gap_ms(mut times: Vec<i64>) -> i64 {
    times.sort_unstable();
    times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
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

/// The summary `kafka-producer-perf-test` prints last: `N records sent, R records/sec (M
/// MB/sec), A ms avg latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999
/// ms 99.9th.`, each latency from send to acknowledgement.
#[derive(Debug, PartialEq)]
struct Latency {
    records: u64,
    avg_ms: f64,
    max_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
}

impl Latency {
    fn parse(output: &str) -> Option<Latency> {
        let line = output.lines().rev().find(|l| l.contains(" ms 99th"))?;
        let before = |label: &str| -> Option<f64> {
            let end = line.find(label)?;
            line[..end].rsplit([' ', ',', '(']).find(|w| !w.is_empty())?.parse().ok()
        };
        Some(Latency {
            records: before(" records sent")? as u64,
            avg_ms: before(" ms avg latency")?,
            max_ms: before(" ms max latency")?,
            p50_ms: before(" ms 50th")?,
            p99_ms: before(" ms 99th")?,
            p999_ms: before(" ms 99.9th")?,
        })
    }

    fn figures(&self) -> Value {
        json!({
            "records": self.records, "avg_ms": self.avg_ms, "max_ms": self.max_ms,
            "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "p999_ms": self.p999_ms,
        })
    }
}

#[test]
fn the_perf_tools_summary_is_read() {
    let out = "1000 records sent, 99.9 records/sec (0.01 MB/sec), 12.3 ms avg latency, 4506.0 ms max latency.\n\
               12000 records sent, 99.8 records/sec (0.01 MB/sec), 8.52 ms avg latency, 4506.00 ms max latency, 3 ms 50th, 11 ms 95th, 2203 ms 99th, 4401 ms 99.9th.\n";
    let l = Latency::parse(out).expect("a summary");
    assert_eq!(
        l,
        Latency { records: 12000, avg_ms: 8.52, max_ms: 4506.0, p50_ms: 3.0, p99_ms: 2203.0, p999_ms: 4401.0 }
    );
    assert_eq!(Latency::parse("1000 records sent, 99.9 records/sec"), None);
}

impl KafkaRef {
    /// The operator replica holding the Lease exports what its task observed of this
    /// cluster: every node serving, a quorum of 3 caught-up voters with a leader, no offline
    /// partition (waited for: the task exports after its pass). The shared RED metrics are
    /// there too. And every broker exports Kafka's own metrics on its `metrics` port (the
    /// image's JMX exporter).
    async fn metrics_show_the_cluster_serving(&self) -> Result<(), Error> {
        for ip in self.broker_ips().await? {
            let addr = format!("{ip}:{METRICS_PORT}");
            let text = operator::http_get(&addr, "/metrics").await.ok_or_else(|| format!("no /metrics on {addr}"))?;
            for name in ["kafka_server_replicamanager_underminisrpartitioncount ", "jvm_memory_used_bytes{"] {
                if !text.lines().any(|l| l.starts_with(name)) {
                    return Err(format!("{addr}/metrics has no {name}").into());
                }
            }
        }
        // Labels in the exposition's order: the metric's own, then the namespace.
        let (cluster, ns) = (format!("cluster=\"{}\"", self.name), format!("namespace=\"{}\"", self.namespace));
        let want: Vec<(String, &str)> = [0, 1, 2, 100, 101, 102]
            .iter()
            .map(|id| (format!("statecraft_kafka_node_ready{{{cluster},node=\"{id}\","), "1"))
            .chain([
                (format!("statecraft_kafka_quorum_has_leader{{{cluster},{ns}}}"), "1"),
                (format!("statecraft_kafka_quorum_voters{{{cluster},{ns}}}"), "3"),
                (format!("statecraft_kafka_quorum_caught_up_voters{{{cluster},{ns}}}"), "3"),
                (format!("statecraft_kafka_partitions{{{cluster},state=\"offline\",{ns}}}"), "0"),
                (format!("statecraft_kafka_cluster_phase{{{cluster},phase=\"Healthy\",{ns}}}"), "1"),
                ("statecraft_kafka_reconciles_total{controller=\"kafkacluster\",result=\"success\"}".to_owned(), ""),
            ])
            .collect();
        let missing = |text: &str| -> Vec<String> {
            want.iter()
                .filter(|(series, value)| {
                    !text.lines().any(|l| {
                        l.starts_with(series.as_str()) && (value.is_empty() || l.ends_with(&format!(" {value}")))
                    })
                })
                .map(|(series, value)| format!("{series} {value}"))
                .collect()
        };
        wait_until(Duration::from_secs(60), "the operator's metrics to show the cluster serving", || async {
            let pods = operator::metrics(&self.cluster, &self.namespace, KafkaOperator::NAME).await.ok()?;
            let leader = pods.iter().find(|(_, text)| text.lines().any(|l| l == "statecraft_kafka_leader 1"))?;
            missing(&leader.1).is_empty().then_some(())
        })
        .await
        .map_err(|e| -> Error {
            format!("{e}; the series expected: {:?}", want.iter().map(|(s, v)| format!("{s} {v}")).collect::<Vec<_>>())
                .into()
        })
    }
}

async fn evidence(test: &str, criteria: &[&str]) -> Result<Evidence, Error> {
    Ok(Evidence::start(&Cluster::connect().await?, "kafka", test, criteria).await?)
}

/// Criteria: L1.install (the operator installed from its manifests; a KafkaCluster of 3
/// controllers and 3 brokers of the previous Kafka release formatted once with the dynamic
/// quorum, Ready with 3 caught-up voters, the quorum bootstrapped, 6 serving nodes and the
/// cluster id in status), L2.operand-upgrade and L2.rolling-restart (the release built here
/// rolled through every node, controllers first and the active controller last, then the
/// brokers, behind the quorum and min-ISR gates, while VerifiableProducer writes with
/// acks=all: every acknowledged record is read back by VerifiableConsumer, none twice, and no
/// partition is ever below min.insync.replicas; then metadata.version finalized to the new
/// release's level), L2.version-checks (the downgrade back is refused in status with a
/// Warning Event, no pod touched), L1.config (a cluster-wide dynamic key of the spec set on
/// every broker, no pod restarted, the new generation observed), L4.metrics (the operator's
/// leader exports every node serving, the quorum and the partition health it observed; each
/// broker exports Kafka's own metrics).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn kafka_cluster_becomes_ready_and_rolls_without_losing_acknowledged_records() -> TestResult {
    let test = "kafka_cluster_becomes_ready_and_rolls_without_losing_acknowledged_records";
    let ev = evidence(
        test,
        &["L1.install", "L1.config", "L2.operand-upgrade", "L2.rolling-restart", "L2.version-checks", "L4.metrics"],
    )
    .await?;
    let (previous, built) = (version_of("KAFKA_PREVIOUS_IMAGE")?, version_of("KAFKA_IMAGE")?);
    let new_image = kafka_image()?;
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "kafka").await?;
    operator::install::<KafkaOperator>(&cluster, &ns.name, "STATECRAFT_KAFKA_IMAGE").await?;
    let kafka = KafkaRef { cluster: cluster.clone(), namespace: ns.name.clone(), name: "kafka".into() };
    let created = Instant::now();
    kafka.apply(&kafka_cluster(&cluster, "kafka", previous))?;
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
    // Formatted with the newest metadata.version of its release, which Auto leaves alone.
    assert_eq!(s.observed_version.as_deref(), Some(previous), "{s:?}");
    assert_eq!(s.finalized_metadata_version.as_deref(), Some(newest_metadata_of(previous)?), "{s:?}");
    kafka.metrics_show_the_cluster_serving().await?;

    let topic_seconds = kafka.create_topic(TOPIC).await?;
    // Produce latency before the roll, as the baseline of the one during it.
    kafka.create_topic(PERF_TOPIC).await?;
    kafka.perf("perf-before", &bootstrap, PERF_BEFORE)?;
    let latency_before = kafka.latency("perf-before")?;
    eprintln!("kafka: produce latency before the roll {latency_before:?}");

    // Produce, and upgrade every node to the release built here meanwhile.
    kafka.produce(&bootstrap).await?;
    kafka.perf("perf-roll", &bootstrap, PERF_DURING)?;
    let node_uids: BTreeMap<String, String> =
        kafka.node_pods().await?.into_iter().map(|(name, pod)| (name, pod.uid)).collect();
    assert_eq!(node_uids.len(), 6, "{node_uids:?}");
    let roll_started = Instant::now();
    kafka.apply(&kafka_cluster(&cluster, "kafka", built))?;
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
        image_now.split_whitespace().filter(|i| *i == new_image).count() >= 6,
        "every node on the new release's image: {image_now}"
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
    // Then metadata.version is raised to the new release's level (policy Auto), with an Event.
    let newest = newest_metadata_of(built)?;
    wait_until(Duration::from_secs(120), &format!("metadata.version {newest} finalized"), || async {
        let s = kafka.status().await.ok()?;
        let done =
            s.finalized_metadata_version.as_deref() == Some(newest) && s.observed_version.as_deref() == Some(built);
        done.then_some(())
    })
    .await?;
    let finalize_seconds = roll_started.elapsed().as_secs_f64() - roll_seconds;
    eprintln!("kafka: metadata.version {newest} finalized {finalize_seconds:.1}s after the roll");
    let finalized =
        kafka.kubectl(&["get", "events", "--field-selector", "reason=MetadataVersionFinalized", "-o", "name"])?;
    assert!(!finalized.trim().is_empty(), "a MetadataVersionFinalized Event");

    // Every acknowledged record read back, none twice.
    let records = kafka.check_records(&bootstrap).await?;
    let latency_roll = kafka.latency("perf-roll")?;
    eprintln!("kafka: produce latency during the roll {latency_roll:?}");

    // The downgrade back is refused once metadata.version is the new release's: in status
    // and as a Warning Event, with no pod touched and the StatefulSets left on the new image.
    let revisions: Vec<Option<String>> = converged.nodes.iter().map(|n| n.revision.clone()).collect();
    let pods_before = kafka.node_pods().await?;
    assert_eq!(pods_before.len(), 6, "{pods_before:?}");
    kafka.apply(&kafka_cluster(&cluster, "kafka", previous))?;
    let refusal = wait_until(Duration::from_secs(60), &format!("the downgrade to {previous} refused"), || async {
        let s = kafka.status().await.ok()?;
        let c = s.conditions.iter().find(|c| c.type_ == "Ready")?;
        let refused = c.status == "False" && c.reason == "InvalidSpec" && c.message.contains("spec.version");
        refused.then(|| c.message.clone())
    })
    .await?;
    assert!(refusal.contains(newest), "the refusal names the finalized metadata.version: {refusal}");
    let warnings =
        kafka.kubectl(&["get", "events", "--field-selector", "reason=InvalidSpec,type=Warning", "-o", "name"])?;
    assert!(!warnings.trim().is_empty(), "a Warning Event for the refused downgrade");
    for pool in ["controller", "broker"] {
        let path = "jsonpath={.spec.template.spec.containers[0].image}";
        let image = kafka.kubectl(&["get", "statefulset", &format!("kafka-{pool}"), "-o", path])?;
        assert_eq!(image, new_image, "the {pool}s' StatefulSet is left on the new release");
    }
    assert_eq!(kafka.node_pods().await?, pods_before, "no node pod replaced or restarted by the refusal");
    kafka.apply(&kafka_cluster(&cluster, "kafka", built))?;
    kafka.wait_converged(6, Duration::from_secs(120)).await?;

    // A cluster-wide dynamic key: set on every broker with IncrementalAlterConfigs, no pod
    // restarted, no new revision.
    let config_started = Instant::now();
    let mut with_config = kafka_cluster(&cluster, "kafka", built);
    with_config["spec"]["config"] = json!({ RETENTION_KEY: RETENTION });
    kafka.apply(&with_config)?;
    kafka.wait_broker_config(RETENTION_KEY, RETENTION).await?;
    let config_seconds = config_started.elapsed().as_secs_f64();
    eprintln!("kafka: {RETENTION_KEY} on every broker {config_seconds:.1}s after the apply");
    assert_eq!(kafka.node_pods().await?, pods_before, "no node pod replaced or restarted");
    let after = kafka.wait_converged(6, Duration::from_secs(120)).await?;
    let revisions_now: Vec<Option<String>> = after.nodes.iter().map(|n| n.revision.clone()).collect();
    assert_eq!(revisions_now, revisions, "no new revision for a dynamic key");

    // A cluster-wide value Kafka refuses: reported with the key, never in a node's file, so
    // a broker that restarts meanwhile starts and serves.
    let mut refused = with_config.clone();
    refused["spec"]["config"][REFUSED_KEY] = json!("lots");
    kafka.apply(&refused)?;
    let message = wait_until(Duration::from_secs(60), "ConfigurationApplied False naming the key", || async {
        let s = kafka.status().await.ok()?;
        let c = s.conditions.iter().find(|c| c.type_ == "ConfigurationApplied")?;
        let named = c.status == "False" && c.reason == "ConfigurationRefused" && c.message.contains(REFUSED_KEY);
        named.then(|| c.message.clone())
    })
    .await?;
    eprintln!("kafka: refused value reported: {message}");
    let warnings = kafka.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "reason=ConfigurationRefused,type=Warning",
        "-o",
        "name",
    ])?;
    assert!(!warnings.trim().is_empty(), "a Warning Event for the refused value");
    kafka.kubectl(&["delete", "pod", &format!("{}-broker-1", kafka.name), "--wait=true"])?;
    kafka.wait_converged(6, Duration::from_secs(180)).await?;
    kafka.wait_broker_config(RETENTION_KEY, RETENTION).await?;
    kafka.apply(&with_config)?;
    wait_until(Duration::from_secs(60), "ConfigurationApplied True once the value is gone", || async {
        let s = kafka.status().await.ok()?;
        s.conditions.iter().any(|c| c.type_ == "ConfigurationApplied" && c.status == "True").then_some(())
    })
    .await?;

    let figures = json!({
        "ready_seconds": ready_after.as_secs_f64(), "topic_ready_seconds": topic_seconds, "roll_seconds": roll_seconds,
        "dynamic_config_seconds": config_seconds, "upgrade": format!("{previous} -> {built}"),
        "finalize_seconds": finalize_seconds,
        "nodes_rolled": restarts_seen.len(), "seconds_per_node": roll_seconds / restarts_seen.len().max(1) as f64,
        "acknowledged": records.acked, "send_errors": records.failed, "lost": 0, "duplicates": 0,
        "longest_ack_gap_seconds": records.longest_gap_seconds, "send_failures": records.failures,
        "under_min_isr_max": worst_under_min_isr, "under_min_isr_samples": samples,
        "produce_latency_before_roll": latency_before.figures(), "produce_latency_during_roll": latency_roll.figures(),
    });
    append_result(
        "kafka-roll.jsonl",
        json!({
            "test": test,
            "method": "3 controllers + 3 brokers on the local cluster; VerifiableProducer (acks=all, idempotent) at 150 records/s while the upgrade from the previous Kafka release rolls every node; VerifiableConsumer reads the topic back; partitions below min ISR sampled every second with the admin client; produce latency from kafka-producer-perf-test (100-byte records at 100/s, acks=all, idempotent, on a topic of 6 partitions x 3 replicas, min ISR 2): 3,000 records before the roll, 12,000 from its start",
            "figures": figures, "unix_time": unix_now(),
        }),
    );
    kafka.delete_topic()?;
    ev.pass(figures);
    ns.pass();
    Ok(())
}

/// Criteria: L2.operator-upgrade, L2.adoption (the operator built from an earlier commit,
/// `deploy/images/previous-operator.ref`, makes a cluster of 3 controllers and 3 brokers and
/// a KafkaTopic; replacing it with the current build keeps every node pod and both
/// StatefulSets' pod templates untouched, and the new build runs the cluster: it exports
/// every node serving, keeps the topic in sync, and applies a dynamic configuration change to
/// every broker without a restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster and the previous build: make cluster-up && scripts/build-previous-operator.sh"]
async fn kafka_operator_upgrade_adopts_clusters_of_the_previous_build_without_restarts() -> TestResult {
    let test = "kafka_operator_upgrade_adopts_clusters_of_the_previous_build_without_restarts";
    let ev = evidence(test, &["L2.operator-upgrade", "L2.adoption"]).await?;
    let current = image("STATECRAFT_KAFKA_IMAGE").ok_or("STATECRAFT_KAFKA_IMAGE missing from images.env")?;
    let previous = retagged(current, "previous");
    let previous_commit = previous_commit("statecraft-kafka").ok_or("no statecraft-kafka in previous-operator.ref")?;
    let built = version_of("KAFKA_IMAGE")?;
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "kafka-adopt").await?;
    operator::install_image::<KafkaOperator>(&cluster, &ns.name, &previous)
        .await
        .map_err(|e| format!("installing {previous} (built by scripts/build-previous-operator.sh): {e}"))?;
    let kafka = KafkaRef { cluster: cluster.clone(), namespace: ns.name.clone(), name: "kafka".into() };
    kafka.apply(&kafka_cluster(&cluster, "kafka", built))?;
    kafka.wait_converged(6, CONVERGE).await?;
    kafka.create_topic(TOPIC).await?;
    let pods_before = kafka.node_pods().await?;
    assert_eq!(pods_before.len(), 6, "{pods_before:?}");
    let generations_before = kafka.statefulset_generations()?;

    let switched = Instant::now();
    operator::upgrade_to::<KafkaOperator>(&cluster, &ns.name, current).await?;
    // The new build leads and has observed the cluster: its metrics show every node serving.
    kafka.metrics_show_the_cluster_serving().await?;
    let adoption_seconds = switched.elapsed().as_secs_f64();
    // Time for the new build to act on anything it would change.
    tokio::time::sleep(Duration::from_secs(15)).await;
    kafka.wait_converged(6, Duration::from_secs(60)).await?;
    assert_eq!(kafka.node_pods().await?, pods_before, "no node pod replaced or restarted");
    assert_eq!(kafka.statefulset_generations()?, generations_before, "the StatefulSets' pod templates are untouched");

    // And it is in charge: the topic stays in sync, and a dynamic key reaches every broker.
    let topics: Api<KafkaTopic> = Api::namespaced(cluster.client.clone(), &ns.name);
    let topic = topics.get(TOPIC).await?.status.unwrap_or_default();
    assert!(topic.conditions.iter().any(|c| c.type_ == "InSync" && c.status == "True"), "{topic:?}");
    let mut with_config = kafka_cluster(&cluster, "kafka", built);
    with_config["spec"]["config"] = json!({ RETENTION_KEY: RETENTION });
    kafka.apply(&with_config)?;
    kafka.wait_broker_config(RETENTION_KEY, RETENTION).await?;
    kafka.wait_converged(6, Duration::from_secs(120)).await?;
    assert_eq!(kafka.node_pods().await?, pods_before, "no node pod replaced or restarted by the change");

    let figures = json!({
        "previous_commit": previous_commit,
        "seconds_until_the_new_build_exports_the_cluster_serving": adoption_seconds,
        "node_pods_restarted": 0,
    });
    append_result(
        "kafka-operator-upgrade.jsonl",
        json!({
            "test": test,
            "method": "operator built from deploy/images/previous-operator.ref makes 3 controllers + 3 brokers and a KafkaTopic; kubectl set image to the current build; node pods' UIDs and restart counts and the StatefulSets' generations compared; then a dynamic key applied by the new build",
            "figures": figures, "unix_time": unix_now(),
        }),
    );
    kafka.delete_topic()?;
    ev.pass(figures);
    ns.pass();
    Ok(())
}

/// Criteria: L3.failover (while VerifiableProducer writes with acks=all, the active
/// controller crashes (every process of its container killed) and the broker leading the
/// most partitions of the clients' topic is lost (its pod force-deleted) at the same moment:
/// another controller leads the quorum, the partitions get new leaders, the crashed
/// controller restarts in place and the lost broker comes back as a new pod on its own
/// volume claim, both serve again with every partition fully replicated; then another
/// broker loses its volume (claim and pod deleted): it comes back on a new claim, formatted
/// with the cluster id, reported by a `StorageReplaced` Warning Event, and refilled by
/// replication until no partition is short of a replica; every acknowledged record is read
/// back once). The longest pause in acknowledgements and the times until the cluster is
/// whole again are the measured figures. Local cluster only: the crash signals the
/// container's processes on this host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn kafka_survives_a_crashed_active_controller_a_lost_leading_broker_and_a_lost_volume() -> TestResult {
    let test = "kafka_survives_a_crashed_active_controller_a_lost_leading_broker_and_a_lost_volume";
    let cluster = Cluster::connect().await?;
    if cluster.provider != Provider::Local {
        eprintln!("skipped: the crash signals processes of the local node");
        return Ok(());
    }
    let ev = evidence(test, &["L3.failover"]).await?;
    let ns = TestNamespace::create(&cluster, "kafka-failover").await?;
    operator::install::<KafkaOperator>(&cluster, &ns.name, "STATECRAFT_KAFKA_IMAGE").await?;
    let kafka = KafkaRef { cluster: cluster.clone(), namespace: ns.name.clone(), name: "kafka".into() };
    kafka.apply(&kafka_cluster(&cluster, "kafka", version_of("KAFKA_IMAGE")?))?;
    let s = kafka.wait_converged(6, CONVERGE).await?;
    let bootstrap = s.bootstrap.clone().ok_or("no bootstrap address in status")?;
    kafka.create_topic(TOPIC).await?;
    kafka.produce(&bootstrap).await?;
    // Some seconds of steady writes before the faults, as the figures' baseline.
    tokio::time::sleep(Duration::from_secs(10)).await;

    let before = kafka.status().await?;
    let quorum = before.quorum.clone().ok_or("no quorum in status")?;
    let active = quorum.leader_id.ok_or("no quorum leader")?;
    let controller = format!("{}-controller-{active}", kafka.name);
    let leaders = topic_leaders(&kafka.broker_ips().await?).await.ok_or("no broker described the topic")?;
    let (&leading, &led) = leaders.iter().max_by_key(|(_, n)| **n).ok_or("the topic has no leader")?;
    let ordinal = leading - node_id(NodeRole::Broker, 0);
    let broker = format!("{}-broker-{ordinal}", kafka.name);
    let claim_path = "jsonpath={.spec.volumes[?(@.persistentVolumeClaim)].persistentVolumeClaim.claimName}";
    let claim = kafka.kubectl(&["get", "pod", &broker, "-o", claim_path])?;
    let claim_uid = kafka.kubectl(&["get", "pvc", &claim, "-o", "jsonpath={.metadata.uid}"])?;
    let pods = kafka.node_pods().await?;
    let (controller_before, broker_before) = (pods[&controller].clone(), pods[&broker].clone());
    eprintln!("kafka: crashing {controller} (active) and losing {broker} (leads {led} of 6 partitions)");

    let faulted = Instant::now();
    crash(&PodInfo::get(&cluster, &ns.name, &controller)?, CONTAINER)?;
    kafka.kubectl(&["delete", "pod", &broker, "--grace-period=0", "--force", "--wait=false"])?;

    // Whole again: the controller restarted in place, the broker a new pod on its old claim,
    // both Ready (their readiness gates set: the operator saw them serve), every node
    // serving in status, and no partition short of a replica.
    let whole = wait_until(CONVERGE, "both nodes back and every partition fully replicated", || async {
        let pods = kafka.node_pods().await.ok()?;
        let c = pods.get(&controller)?;
        let b = pods.get(&broker)?;
        let back = c.uid == controller_before.uid && c.restarts > controller_before.restarts && c.ready;
        let replaced = b.uid != broker_before.uid && !b.terminating && b.ready;
        let s = kafka.converged_now(6).await?;
        (back && replaced && s.under_replicated_partitions == Some(0)).then_some(s)
    })
    .await?;
    let whole_seconds = faulted.elapsed().as_secs_f64();
    eprintln!("kafka: whole again {whole_seconds:.1}s after the faults");
    let after = whole.quorum.clone().ok_or("no quorum in status")?;
    assert!(after.leader_epoch > quorum.leader_epoch, "a new quorum epoch: {quorum:?} -> {after:?}");
    assert!(after.voters.iter().all(|v| v.caught_up) && after.voters.len() == 3, "{after:?}");
    let claim_now = kafka.kubectl(&["get", "pod", &broker, "-o", claim_path])?;
    assert_eq!(claim_now, claim, "the new broker pod mounts the old claim");
    let uid_now = kafka.kubectl(&["get", "pvc", &claim, "-o", "jsonpath={.metadata.uid}"])?;
    assert_eq!(uid_now, claim_uid, "the same volume claim, not a new one");
    assert_eq!(whole.offline_partitions, Some(0), "{whole:?}");

    // Another broker's volume lost: its claim and its pod deleted. The StatefulSet makes a
    // new claim, the broker formats it with the cluster id and refills by replication.
    let other = (0..3).map(|o| format!("{}-broker-{o}", kafka.name)).find(|b| *b != broker).ok_or("one broker")?;
    let other_id = node_id(NodeRole::Broker, other.rsplit('-').next().unwrap_or_default().parse()?);
    let other_claim = kafka.kubectl(&["get", "pod", &other, "-o", claim_path])?;
    let other_uid = kafka.kubectl(&["get", "pvc", &other_claim, "-o", "jsonpath={.metadata.uid}"])?;
    let directory_before = whole.nodes.iter().find(|n| n.id == other_id).and_then(|n| n.directory_id.clone());
    assert!(directory_before.is_some(), "{other} has a directory id: {:?}", whole.nodes);
    eprintln!("kafka: losing the volume of {other}");
    let lost = Instant::now();
    kafka.kubectl(&["delete", "pvc", &other_claim, "--wait=false"])?;
    kafka.kubectl(&["delete", "pod", &other, "--wait=false"])?;
    let refilled = wait_until(CONVERGE, "the broker back on new storage and every partition refilled", || async {
        let uid = kafka.kubectl(&["get", "pvc", &other_claim, "-o", "jsonpath={.metadata.uid}"]).ok()?;
        let s = kafka.converged_now(6).await?;
        let directory = s.nodes.iter().find(|n| n.id == other_id)?.directory_id.clone();
        let new_storage = uid != other_uid && directory.is_some() && directory != directory_before;
        (new_storage && s.under_replicated_partitions == Some(0)).then_some(s)
    })
    .await?;
    let refill_seconds = lost.elapsed().as_secs_f64();
    eprintln!("kafka: {other} back on new storage and every partition refilled {refill_seconds:.1}s after");
    assert_eq!(refilled.offline_partitions, Some(0), "{refilled:?}");
    let reported = kafka.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "reason=StorageReplaced,type=Warning",
        "-o",
        "jsonpath={.items[*].message}",
    ])?;
    assert!(reported.contains(&format!("node {other_id} ")), "a StorageReplaced Event for {other}: {reported:?}");

    let records = kafka.check_records(&bootstrap).await?;
    eprintln!(
        "kafka: {} acknowledged, none lost; longest pause {:.2}s; failed sends {:?}",
        records.acked, records.longest_gap_seconds, records.failures
    );
    let figures = json!({
        "whole_again_seconds": whole_seconds, "volume_lost_refilled_seconds": refill_seconds,
        "acknowledged": records.acked, "send_errors": records.failed, "lost": 0, "duplicates": 0,
        "longest_ack_gap_seconds": records.longest_gap_seconds, "send_failures": records.failures,
        "partitions_led_by_lost_broker": led,
    });
    append_result(
        "kafka-failover.jsonl",
        json!({
            "test": test,
            "method": "3 controllers + 3 brokers (4.4.0) on the local cluster; VerifiableProducer (acks=all, idempotent) at 150 records/s on 6 partitions of 3 replicas, min ISR 2; SIGKILL of every process of the active controller's container and kubectl delete --grace-period=0 --force of the broker leading the most partitions, at once; then another broker's PVC and pod deleted; gaps are between consecutive acknowledgement times of the producer's own log",
            "figures": figures, "unix_time": unix_now(),
        }),
    );
    kafka.delete_topic()?;
    ev.pass(figures);
    ns.pass();
    Ok(())
}

/// How many partitions of the clients' topic each broker leads, by node id, as the first
/// broker of `ips` that answers says.
async fn topic_leaders(ips: &[String]) -> Option<BTreeMap<i32, usize>> {
    for ip in ips {
        let Ok(admin) = Admin::connect(&format!("{ip}:9092"), Duration::from_secs(2)).await else { continue };
        let Ok(topics) = admin.topics().await else { continue };
        let mut leaders = BTreeMap::new();
        for p in topics.iter().filter(|t| t.name == TOPIC).flat_map(|t| &t.partitions) {
            *leaders.entry(p.leader?).or_insert(0) += 1;
        }
        return Some(leaders);
    }
    None
}
