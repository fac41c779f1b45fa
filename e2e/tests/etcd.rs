//! The etcd operator on a real cluster: its image, the manifests users install, EtcdClusters
//! of 3 and 5 members, a client doing linearizable writes through the client Service while
//! members are added, removed, restarted and replaced, the operator's leader killed between
//! membership steps, snapshots to a real S3 server and restores from them, and concurrent
//! clients whose history porcupine checks for linearizability while members are deleted
//! and under injected faults (`etcd_fault_*`: the leader partitioned from its peers, a
//! follower or the leader paused, the operator's leader paused past its Lease; each
//! `FAULT_RUNS` times, figures in `results/e2e/etcd-faults.jsonl`).
//! Each test names the capability criteria it proves.
//!
//! Measurements are appended to `results/e2e/etcd-*.jsonl` (one JSON object per run: the
//! test, the method, the figures, and the count of acknowledged writes lost, which must be
//! 0). Each test's doc comment names the capability criteria it proves (`Criteria:`), for
//! the capability report.
//!
//! The client is the host itself: on the local cluster the node routes Service cluster IPs
//! and pod IPs, so the tests talk to `<cluster>-client`'s cluster IP on 2379 (as a pod
//! would) and read pods' metrics on their IPs. The tests run on two worker threads so that
//! the writer task keeps writing while the test body waits on a blocking `kubectl`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{
    Client, CompactionOptions, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Txn, TxnOp,
};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use statecraft_e2e::evidence::Evidence;
use statecraft_e2e::faults::{self, Fault, Partition, Pause, fault_runs};
use statecraft_e2e::history::{Action, History, Kind, Op, Outcome, client_rng};
use statecraft_e2e::images::{image, retagged, tag_on_node};
use statecraft_e2e::operator::{self, http_get};
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::writes::{Attempt, StopFlag, acknowledged, longest_gap, longest_gap_between, lost};
use statecraft_e2e::{Cluster, E2eError, Provider, TestNamespace, events, wait_until};
use statecraft_etcd::EtcdOperator;
use statecraft_etcd::api::{EtcdBackup, EtcdBackupStatus, EtcdCluster, EtcdClusterStatus, EtcdRestore, MemberStatus};
use statecraft_etcd::build::statefulset::CONTAINER;
use statecraft_etcd::build::{APP_NAME, INSTANCE_LABEL, METRICS_PORT, NAME_LABEL, Names};
use statecraft_shared::runner::Operator;
use statecraft_shared::testing::s3::{HashingWriter, S3Server};

type Error = Box<dyn std::error::Error + Send + Sync>;
type TestResult = Result<(), Error>;

/// The operator's series the smoke test requires of the pod that leads (prefix
/// `statecraft_etcd`, from `Operator::NAME`): the shared leader gauge, the shared RED
/// counter, and one series per member of each cluster whose name starts with
/// [`MEMBER_SERIES`] and that carries `cluster` and `member` labels.
const LEADER_SERIES: &str = "statecraft_etcd_leader 1";
const RECONCILES_SERIES: &str = "statecraft_etcd_reconciles_total{";
const MEMBER_SERIES: &str = "statecraft_etcd_member_";

/// How long a new or changed cluster may take to converge.
const CONVERGE: Duration = Duration::from_secs(600);

/// The etcd image of the cluster (`ETCD_IMAGE`, the only etcd build here).
fn etcd_image() -> Result<&'static str, Error> {
    Ok(image("ETCD_IMAGE").ok_or("ETCD_IMAGE missing from images.env")?)
}

/// The etcd version of [`etcd_image`]: its tag without the `v` (`3.6.16`).
fn etcd_version() -> Result<String, Error> {
    let image = etcd_image()?;
    let tag = image.rsplit_once(':').map(|(_, t)| t).ok_or("ETCD_IMAGE has no tag")?;
    Ok(tag.strip_prefix('v').unwrap_or(tag).to_string())
}

/// An EtcdCluster of `replicas` members running the cluster's etcd build, with small
/// requests so that several fit on the one node.
fn etcd_cluster(name: &str, replicas: i32) -> Result<serde_json::Value, Error> {
    Ok(json!({
        "apiVersion": "etcd.statecraft.io/v1alpha1", "kind": "EtcdCluster",
        "metadata": {"name": name},
        "spec": {
            "version": etcd_version()?, "replicas": replicas,
            "storage": {"size": "1Gi"},
            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
        }
    }))
}

/// The Secret holding the S3 test server's keys, named as `S3Server::location` refers to it.
fn s3_credentials(s3: &S3Server) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-credentials", "labels": {"statecraft.io/s3-credentials": "true"}},
        "stringData": {"AWS_ACCESS_KEY_ID": s3.access_key(), "AWS_SECRET_ACCESS_KEY": s3.secret_key()}
    })
}

/// An etcd member id as status writes it (hex, with or without `0x`).
fn hex_id(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// Whether the cluster's Ready condition is True for its current generation (a condition
/// without observedGeneration is taken as current).
fn ready_for_generation(c: &EtcdCluster) -> bool {
    let generation = c.metadata.generation;
    c.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|k| {
            k.type_ == "Ready"
                && k.status == "True"
                && k.observed_generation.zip(generation).is_none_or(|(seen, current)| seen >= current)
        })
    })
}

/// Whether status shows exactly `n` members, all healthy voters, one of them leading.
fn healthy_voters(s: &EtcdClusterStatus, n: usize) -> bool {
    s.members.len() == n
        && s.members.iter().all(|m| m.healthy && !m.learner)
        && s.members.iter().filter(|m| m.leader).count() == 1
}

fn member<'a>(s: &'a EtcdClusterStatus, name: &str) -> Option<&'a MemberStatus> {
    s.members.iter().find(|m| m.name == name)
}

/// Connection options of every test client: a request that takes longer than 2 s counts as
/// failed, and so does a connection not made within 1 s.
fn connect_options() -> ConnectOptions {
    ConnectOptions::new().with_timeout(Duration::from_secs(2)).with_connect_timeout(Duration::from_secs(1))
}

/// A client of `endpoint` (`http://ip:2379`), or None.
async fn connect(endpoint: &str) -> Option<Client> {
    tokio::time::timeout(Duration::from_secs(3), Client::connect([endpoint], Some(connect_options()))).await.ok()?.ok()
}

/// The ids of the keys `<prefix><id>`, read with linearizable range requests (the default
/// consistency) a page at a time, every page at the revision of the first. Sorted.
async fn ids_under(client: &mut Client, prefix: &str) -> Result<Vec<u64>, etcd_client::Error> {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let mut from = prefix.as_bytes().to_vec();
    let mut revision = 0;
    let mut ids = Vec::new();
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_keys_only().with_limit(5000);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let page = client.get(from.clone(), Some(options)).await?;
        if revision == 0 {
            revision = page.header().map_or(0, |h| h.revision());
        }
        ids.extend(
            page.kvs()
                .iter()
                .filter_map(|kv| std::str::from_utf8(kv.key()).ok()?.strip_prefix(prefix)?.parse::<u64>().ok()),
        );
        match page.kvs().last() {
            Some(last) if page.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// A member as etcd's own member list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EtcdMember {
    id: u64,
    /// Empty for a member added but never started.
    name: String,
    learner: bool,
}

async fn member_list(client: &mut Client) -> Result<Vec<EtcdMember>, etcd_client::Error> {
    let list = client.member_list().await?;
    Ok(list
        .members()
        .iter()
        .map(|m| EtcdMember { id: m.id(), name: m.name().to_string(), learner: m.is_learner() })
        .collect())
}

/// A pod of a cluster, as last listed.
#[derive(Debug, Clone)]
struct PodInfo {
    uid: String,
    image: String,
    ip: Option<String>,
    ready: bool,
    terminating: bool,
}

/// One EtcdCluster of a test namespace.
#[derive(Clone)]
struct EtcdRef {
    cluster: Cluster,
    namespace: String,
    api: Api<EtcdCluster>,
    names: Names,
}

impl EtcdRef {
    fn new(cluster: &Cluster, namespace: &str, name: &str) -> EtcdRef {
        EtcdRef {
            cluster: cluster.clone(),
            namespace: namespace.to_string(),
            api: Api::namespaced(cluster.client.clone(), namespace),
            names: Names::new(name, namespace),
        }
    }

    fn name(&self) -> &str {
        &self.names.cluster
    }

    fn kubectl(&self, args: &[&str]) -> Result<String, E2eError> {
        let mut all = vec!["-n", self.namespace.as_str()];
        all.extend_from_slice(args);
        self.cluster.kubectl(&all)
    }

    fn apply(&self, object: &serde_json::Value) -> Result<String, E2eError> {
        self.cluster.kubectl_with_input(&["apply", "-n", &self.namespace, "-f", "-"], Some(&object.to_string()))
    }

    fn patch(&self, patch: serde_json::Value) -> Result<String, E2eError> {
        self.kubectl(&["patch", "etcdcluster", self.name(), "--type=merge", "-p", &patch.to_string()])
    }

    async fn status(&self) -> Result<EtcdClusterStatus, kube::Error> {
        Ok(self.api.get(self.name()).await?.status.unwrap_or_default())
    }

    /// The message of the Ready condition once it is False for `reason` (within 3 minutes).
    async fn not_ready_for(&self, reason: &str) -> Result<String, E2eError> {
        let message = wait_until(Duration::from_secs(180), &format!("Ready=False for {reason}"), || async {
            let c = self.api.get(self.name()).await.ok()?;
            let ready = c.status?.conditions.into_iter().find(|k| k.type_ == "Ready")?;
            (ready.status == "False" && ready.reason == reason).then_some(ready.message)
        })
        .await?;
        eprintln!("Ready: {message}");
        Ok(message)
    }

    /// How many times an Event with `reason` was recorded on the cluster.
    async fn events(&self, reason: &str) -> Result<u32, E2eError> {
        events::count(&self.cluster, &self.namespace, self.name(), reason).await
    }

    /// The cluster's pods by name (terminating ones included).
    async fn pods(&self) -> Result<BTreeMap<String, PodInfo>, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let selector = format!("{NAME_LABEL}={APP_NAME},{INSTANCE_LABEL}={}", self.name());
        let list = api.list(&ListParams::default().labels(&selector)).await?;
        Ok(list
            .items
            .into_iter()
            .map(|p| {
                let status = p.status.clone().unwrap_or_default();
                let ready =
                    status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
                let image = p.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone());
                let info = PodInfo {
                    uid: p.uid().unwrap_or_default(),
                    image: image.unwrap_or_default(),
                    ip: status.pod_ip,
                    ready,
                    terminating: p.metadata.deletion_timestamp.is_some(),
                };
                (p.name_any(), info)
            })
            .collect())
    }

    /// Names of the cluster's data claims.
    async fn claims(&self) -> Result<BTreeSet<String>, kube::Error> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let prefix = format!("data-{}-", self.name());
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|c| c.name_any())
            .filter(|n| n.strip_prefix(&prefix).is_some_and(|k| k.parse::<u32>().is_ok()))
            .collect())
    }

    /// `http://<cluster IP of the client Service>:2379`.
    async fn endpoint(&self) -> Result<String, Error> {
        let services: Api<Service> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let svc = services.get(&self.names.client_service()).await?;
        let ip =
            svc.spec.and_then(|s| s.cluster_ip).filter(|ip| ip != "None").ok_or("client Service has no cluster IP")?;
        Ok(format!("http://{ip}:2379"))
    }

    /// A client of the client Service that has answered a request, retried for a minute.
    async fn client(&self) -> Result<Client, Error> {
        let endpoint = self.endpoint().await?;
        Ok(wait_until(Duration::from_secs(60), "an etcd client through the client Service", || async {
            let mut c = connect(&endpoint).await?;
            c.status().await.ok()?;
            Some(c)
        })
        .await?)
    }

    /// The ids of the keys under `prefix`, read linearizably through the client Service
    /// (retried for a minute).
    async fn read_ids(&self, prefix: &str) -> Result<Vec<u64>, Error> {
        let endpoint = self.endpoint().await?;
        Ok(wait_until(Duration::from_secs(60), &format!("a linearizable read of {prefix}*"), || async {
            let mut c = connect(&endpoint).await?;
            ids_under(&mut c, prefix).await.ok()
        })
        .await?)
    }

    /// etcd's member list, through the client Service (retried for a minute).
    async fn members(&self) -> Result<Vec<EtcdMember>, Error> {
        let endpoint = self.endpoint().await?;
        Ok(wait_until(Duration::from_secs(60), "etcd's member list", || async {
            member_list(&mut connect(&endpoint).await?).await.ok()
        })
        .await?)
    }

    /// The raft term a member of the client Service reports (each election increments it).
    async fn raft_term(&self) -> Result<u64, Error> {
        let endpoint = self.endpoint().await?;
        Ok(wait_until(Duration::from_secs(60), "the raft term", || async {
            Some(connect(&endpoint).await?.status().await.ok()?.raft_term())
        })
        .await?)
    }

    /// The status if the cluster has converged on `replicas` members now: Ready for its
    /// generation, that many healthy voters in status with one leader, and exactly the pods
    /// `<name>-0..replicas`, ready and not terminating.
    async fn converged_now(&self, replicas: usize) -> Option<EtcdClusterStatus> {
        let c = self.api.get_opt(self.name()).await.ok()??;
        if !ready_for_generation(&c) {
            return None;
        }
        let s = c.status?;
        if !healthy_voters(&s, replicas) {
            return None;
        }
        let pods = self.pods().await.ok()?;
        let expected: BTreeSet<String> = (0..replicas as u32).map(|k| self.names.member(k)).collect();
        let all_ready = pods.values().all(|p| p.ready && !p.terminating);
        (pods.keys().cloned().collect::<BTreeSet<_>>() == expected && all_ready).then_some(s)
    }

    async fn wait_converged(&self, replicas: usize, timeout: Duration) -> Result<EtcdClusterStatus, E2eError> {
        let what = format!("EtcdCluster {} Ready with {replicas} healthy voting members", self.name());
        wait_until(timeout, &what, || self.converged_now(replicas)).await
    }

    /// Watches a membership change until the cluster has converged on `replicas` members
    /// and etcd's own member list agrees (that many members, all started, no learner),
    /// recording what the membership went through.
    async fn watch_membership(&self, replicas: usize, timeout: Duration) -> Result<MembershipLog, Error> {
        let started = Instant::now();
        let endpoint = self.endpoint().await?;
        let mut log = MembershipLog::default();
        let mut client: Option<Client> = None;
        loop {
            // Pods first, then the membership: a member still listed after its pod was seen
            // gone had its pod deleted before it was removed from etcd.
            let pods = self.pods().await?;
            if client.is_none() {
                client = connect(&endpoint).await;
            }
            let mut listed = None;
            if let Some(c) = client.as_mut() {
                match tokio::time::timeout(Duration::from_secs(3), member_list(c)).await {
                    Ok(Ok(list)) => listed = Some(list),
                    _ => client = None,
                }
            }
            if let Some(list) = &listed {
                log.observe(list, &pods);
            }
            if let Ok(s) = self.status().await
                && s.members.iter().any(|m| m.learner)
            {
                log.learner_in_status = true;
            }
            let agrees = listed.as_ref().is_some_and(|l| {
                l.len() == replicas && l.iter().all(|m| !m.learner && !m.name.is_empty() && pods.contains_key(&m.name))
            });
            if agrees && let Some(s) = self.converged_now(replicas).await {
                log.status = s;
                log.members = listed.unwrap_or_default();
                return Ok(log);
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "{} did not converge on {replicas} members in {timeout:?}; last member list {listed:?}; {log:?}",
                    self.name()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// What a membership change went through, as sampled every 250 ms.
#[derive(Debug, Default)]
struct MembershipLog {
    /// A learner was in etcd's member list.
    learner_in_members: bool,
    /// A member was shown as a learner in status.
    learner_in_status: bool,
    /// Most learners at once in the member list.
    max_learners: usize,
    /// Most members at once in the member list.
    max_members: usize,
    /// Started members whose pod was gone (or terminating) while they were still members.
    removed_after_pod: BTreeSet<String>,
    /// The converged status.
    status: EtcdClusterStatus,
    /// The converged member list.
    members: Vec<EtcdMember>,
}

impl MembershipLog {
    fn observe(&mut self, list: &[EtcdMember], pods: &BTreeMap<String, PodInfo>) {
        let learners = list.iter().filter(|m| m.learner).count();
        self.learner_in_members |= learners > 0;
        self.max_learners = self.max_learners.max(learners);
        self.max_members = self.max_members.max(list.len());
        for m in list.iter().filter(|m| !m.name.is_empty()) {
            if pods.get(&m.name).is_none_or(|p| p.terminating) {
                self.removed_after_pod.insert(m.name.clone());
            }
        }
    }
}

/// A test's cluster: the operator installed in a fresh namespace and one EtcdCluster.
struct Etcd {
    ns: TestNamespace,
    db: EtcdRef,
    /// From creating the EtcdCluster to its convergence.
    ready_after: Duration,
}

impl Deref for Etcd {
    type Target = EtcdRef;
    fn deref(&self) -> &EtcdRef {
        &self.db
    }
}

impl Etcd {
    /// Installs the operator in a new namespace `<prefix>-…`, applies `before` (Secrets),
    /// creates EtcdCluster `name` with `replicas` members and `extra` merged into its spec,
    /// and waits until it has converged.
    async fn create(
        prefix: &str,
        name: &str,
        replicas: i32,
        extra: serde_json::Value,
        before: &[serde_json::Value],
    ) -> Result<Etcd, Error> {
        let cluster = Cluster::connect().await?;
        let ns = TestNamespace::create(&cluster, prefix).await?;
        operator::install::<EtcdOperator>(&cluster, &ns.name, "STATECRAFT_ETCD_IMAGE").await?;
        let db = EtcdRef::new(&cluster, &ns.name, name);
        for object in before {
            db.apply(object)?;
        }
        let mut object = etcd_cluster(name, replicas)?;
        if let (Some(spec), Some(extra)) = (object["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        let created = Instant::now();
        db.apply(&object)?;
        db.wait_converged(replicas as usize, CONVERGE).await?;
        let ready_after = created.elapsed();
        eprintln!("{name}: {replicas} members Ready {ready_after:?} after creation");
        Ok(Etcd { ns, db, ready_after })
    }

    /// Another EtcdCluster of the test's namespace.
    fn sibling(&self, name: &str) -> EtcdRef {
        EtcdRef::new(&self.cluster, &self.namespace, name)
    }
}

/// A client writing one key at a time (`w/<id>`, value `<id>`) through the client Service
/// until stopped, recording every attempt. A put is acknowledged when etcd answered it
/// within 2 s (etcd acknowledges a put once a quorum has it: every put is linearizable);
/// after any error the client is dropped and a new connection made, which kube-proxy may
/// send to another member.
struct EtcdWriter {
    log: Arc<Mutex<Vec<Attempt>>>,
    stop: StopFlag,
    handle: tokio::task::JoinHandle<()>,
}

impl EtcdWriter {
    /// The key of write `id`.
    const PREFIX: &'static str = "w/";

    fn start(endpoint: String) -> EtcdWriter {
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = StopFlag::default();
        let (l, s) = (log.clone(), stop.clone());
        let handle = tokio::spawn(async move {
            let mut next = 1u64;
            let mut client: Option<Client> = None;
            while !s.is_set() {
                if client.is_none() {
                    client = connect(&endpoint).await;
                    if client.is_none() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
                let Some(c) = client.as_mut() else { continue };
                let (id, at) = (next, Instant::now());
                next += 1;
                let put = c.put(format!("{}{id}", Self::PREFIX), id.to_string(), None);
                let acked = matches!(tokio::time::timeout(Duration::from_secs(2), put).await, Ok(Ok(_)));
                l.lock().unwrap_or_else(|e| e.into_inner()).push(Attempt { id, at, done: Instant::now(), acked });
                if !acked {
                    client = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
        EtcdWriter { log, stop, handle }
    }

    fn attempts(&self) -> Vec<Attempt> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops writing; returns every attempt.
    async fn stop(self) -> Result<Vec<Attempt>, tokio::task::JoinError> {
        self.stop.set();
        self.handle.await?;
        Ok(self.log.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// Starts the evidence record of `test` for `criteria`: written as passed by `.pass()`,
/// as failed if the test returns an error or panics first.
async fn evidence(test: &str, criteria: &[&str]) -> Result<Evidence, Error> {
    Ok(Evidence::start(&Cluster::connect().await?, "etcd", test, criteria).await?)
}

/// Criteria: L1.install (the operator installed from its manifests, two replicas and one
/// leader; a 3-member EtcdCluster → Ready, bootstrapped by member 0 with the others added
/// as learners and promoted; status with 3 healthy voters, one leader, the cluster id,
/// version and client endpoint; its Services, PodDisruptionBudget, ConfigMap and claims;
/// a linearizable client puts and gets through the client Service), L4.metrics (the
/// operator's leader exports its reconcile metrics and every member's state; each member
/// serves etcd's own metrics).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_cluster_of_three_becomes_ready_and_serves_linearizable_clients() -> TestResult {
    let ev =
        evidence("etcd_cluster_of_three_becomes_ready_and_serves_linearizable_clients", &["L1.install", "L4.metrics"])
            .await?;
    let version = etcd_version()?;
    let db = Etcd::create("etcd", "etcd", 3, json!({}), &[]).await?;
    let s = db.status().await?;

    // Status: three healthy voters, one leader, what clients need.
    let names: Vec<&str> = s.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names.iter().copied().collect::<BTreeSet<_>>(), ["etcd-0", "etcd-1", "etcd-2"].into(), "{s:?}");
    for m in &s.members {
        assert!(m.healthy && !m.learner && m.alarms.is_empty(), "{m:?}");
        assert_eq!(m.version.as_deref(), Some(version.as_str()), "{m:?}");
        assert!(hex_id(&m.id).is_some(), "member id in hex: {m:?}");
        assert!(m.db_size.is_some_and(|size| size > 0), "{m:?}");
    }
    let leaders: Vec<&MemberStatus> = s.members.iter().filter(|m| m.leader).collect();
    assert_eq!(leaders.len(), 1, "one leader: {:?}", s.members);
    assert_eq!(s.leader.as_deref(), Some(leaders[0].name.as_str()));
    assert!(s.cluster_id.as_deref().and_then(hex_id).is_some(), "{s:?}");
    assert_eq!(s.client_endpoint.as_deref(), Some(db.names.service_url().as_str()));
    assert_eq!(s.observed_version.as_deref(), Some(version.as_str()));
    assert_eq!(s.phase.as_deref(), Some("Healthy"));
    let condition = |t: &str| s.conditions.iter().find(|c| c.type_ == t).map(|c| c.status.as_str());
    assert_eq!(condition("Available"), Some("True"), "{:?}", s.conditions);
    assert_ne!(condition("Degraded"), Some("True"), "{:?}", s.conditions);
    // Bootstrapped by member 0 alone, the others joined as learners and were promoted.
    let (added, promoted) = (db.events("AddLearner").await?, db.events("Promote").await?);
    assert!(added >= 2 && promoted >= 2, "AddLearner {added}, Promote {promoted}: members 1 and 2 joined as learners");

    // The objects it owns.
    let services: Api<Service> = Api::namespaced(db.cluster.client.clone(), &db.namespace);
    let peer = services.get(&db.names.peer_service()).await?.spec.unwrap_or_default();
    assert_eq!(peer.cluster_ip.as_deref(), Some("None"), "headless peer Service");
    assert_eq!(peer.publish_not_ready_addresses, Some(true));
    let client_svc = services.get(&db.names.client_service()).await?.spec.unwrap_or_default();
    assert!(client_svc.ports.unwrap_or_default().iter().any(|p| p.port == 2379));
    let min_available = db.kubectl(&["get", "pdb", &db.names.set().pdb(), "-o", "jsonpath={.spec.minAvailable}"])?;
    assert_eq!(min_available, "2", "the PodDisruptionBudget keeps quorum");
    let config: Api<ConfigMap> = Api::namespaced(db.cluster.client.clone(), &db.namespace);
    let data = config.get(&db.names.config_map()).await?.data.unwrap_or_default();
    assert_eq!(data.get("ETCD_INITIAL_CLUSTER_STATE").map(String::as_str), Some("existing"), "{data:?}");
    let initial = data.get("ETCD_INITIAL_CLUSTER").cloned().unwrap_or_default();
    for k in 0..3 {
        let entry = format!("{}={}", db.names.member(k), db.names.peer_url(k));
        assert!(initial.split(',').any(|e| e == entry), "{entry} in {initial}");
    }
    let claims = db.claims().await?;
    let expected: BTreeSet<String> = (0..3).map(|k| db.names.data_claim(k)).collect();
    assert_eq!(claims, expected);

    // A linearizable client through the client Service.
    let mut c = db.client().await?;
    let put = c.put("smoke/key", "value-1", None).await?;
    let got = c.get("smoke/key", None).await?;
    assert_eq!(got.kvs().first().map(|kv| kv.value()), Some(&b"value-1"[..]));
    let (put_rev, got_rev) = (put.header().map(|h| h.revision()), got.header().map(|h| h.revision()));
    assert!(got_rev >= put_rev, "the read sees the write: {got_rev:?} < {put_rev:?}");
    let listed = member_list(&mut c).await?;
    let listed_ids: BTreeSet<u64> = listed.iter().map(|m| m.id).collect();
    let status_ids: BTreeSet<u64> = s.members.iter().filter_map(|m| hex_id(&m.id)).collect();
    assert_eq!(listed_ids, status_ids, "status names etcd's members: {listed:?}");
    assert!(listed.iter().all(|m| !m.learner));
    let etcd_status = c.status().await?;
    assert_eq!(Some(etcd_status.leader()), hex_id(&leaders[0].id), "status names etcd's leader");

    // Each member serves etcd's metrics; the operator's leader exports its own.
    for (name, pod) in db.pods().await? {
        let ip = pod.ip.ok_or(format!("{name} has no IP"))?;
        let text = wait_until(Duration::from_secs(30), &format!("{name}'s /metrics"), || async {
            http_get(&format!("{ip}:{METRICS_PORT}"), "/metrics").await
        })
        .await?;
        assert!(text.lines().any(|l| l == "etcd_server_has_leader 1"), "{name} has a leader");
    }
    check_operator_metrics(&db).await?;

    append_result(
        "etcd-bootstrap.jsonl",
        json!({
            "test": "etcd_cluster_of_three_becomes_ready_and_serves_linearizable_clients",
            "method": "create a 3-member EtcdCluster (operator already installed); time until Ready for its generation with 3 healthy voters in status and 3 ready pods",
            "members": 3, "ready_seconds": db.ready_after.as_secs_f64(), "unix_time": unix_now(),
        }),
    );
    ev.pass(json!({"ready_seconds": db.ready_after.as_secs_f64()}));
    db.ns.pass();
    Ok(())
}

/// The keys the linearizability clients share under `prefix`: few, so that their
/// operations contend. Each history gets keys of its own, so that it starts from absent
/// keys, as the checker assumes.
fn lin_keys(prefix: &str) -> Vec<String> {
    ["a", "b", "c"].iter().map(|k| format!("{prefix}{k}")).collect()
}

/// How many clients run at once in the linearizability test.
const LIN_CLIENTS: usize = 4;

/// One client of the linearizability test, until `stop`: random puts, linearizable gets
/// and compare-and-swaps (a txn: if the value is the one this client last saw, put) on
/// `keys` (from [`lin_keys`]) through the client Service, every one recorded in `history`. Values are
/// unique (`<client>-<n>`), so a read names the write it saw. An answer is Ok; an error or
/// no answer within the client's 2 s is Unknown (a write may have been applied all the
/// same); after one the connection is dropped and remade, as [`EtcdWriter`] does.
async fn lin_client(id: usize, endpoint: String, keys: Vec<String>, history: History, stop: StopFlag) {
    let mut next = client_rng(id);
    // What this client last saw in each key: what its cas expects.
    let mut seen: BTreeMap<&str, String> = BTreeMap::new();
    let mut client: Option<Client> = None;
    let mut n = 0u64;
    while !stop.is_set() {
        let Some(c) = client.as_mut() else {
            client = connect(&endpoint).await;
            if client.is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            continue;
        };
        let r = next();
        let key = keys[(r % keys.len() as u64) as usize].as_str();
        n += 1;
        let value = format!("{id}-{n}");
        let call = history.start();
        let answered = match ((r >> 16) % 3, seen.get(key).cloned()) {
            (0, _) => {
                let put = tokio::time::timeout(Duration::from_secs(3), c.put(key, value.as_str(), None)).await;
                let ok = matches!(put, Ok(Ok(_)));
                history.put(id, key, &value, call, if ok { Outcome::Ok } else { Outcome::Unknown });
                if ok {
                    seen.insert(key, value);
                } else {
                    seen.remove(key);
                }
                ok
            }
            (2, Some(expected)) => {
                let txn = Txn::new()
                    .when([Compare::value(key, CompareOp::Equal, expected.as_str())])
                    .and_then([TxnOp::put(key, value.as_str(), None)]);
                let answer = tokio::time::timeout(Duration::from_secs(3), c.txn(txn)).await;
                let swapped = match answer {
                    Ok(Ok(r)) => Some(r.succeeded()),
                    _ => None,
                };
                let action = Action::Cas { expected: &expected, value: &value, swapped };
                history.finish(id, key, action, call, if swapped.is_some() { Outcome::Ok } else { Outcome::Unknown });
                match swapped {
                    Some(true) => {
                        seen.insert(key, value);
                    }
                    _ => {
                        seen.remove(key);
                    }
                }
                swapped.is_some()
            }
            // A get, also in place of a cas that has nothing to expect yet.
            _ => {
                let got = tokio::time::timeout(Duration::from_secs(3), c.get(key, None)).await;
                match got {
                    Ok(Ok(r)) => {
                        let read = r.kvs().first().map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
                        history.get(id, key, read.as_deref(), call, Outcome::Ok);
                        match read {
                            Some(v) => seen.insert(key, v),
                            None => seen.remove(key),
                        };
                        true
                    }
                    _ => {
                        history.get(id, key, None, call, Outcome::Unknown);
                        false
                    }
                }
            }
        };
        if !answered {
            client = None;
        }
        tokio::time::sleep(Duration::from_millis(if answered { 10 } else { 50 })).await;
    }
}

impl EtcdRef {
    /// The member etcd reports as leader (asked through the client Service), by name.
    async fn leader_name(&self) -> Result<String, Error> {
        let id = self.client().await?.status().await?.leader();
        let s = self.status().await?;
        Ok(s.members
            .iter()
            .find(|m| hex_id(&m.id) == Some(id))
            .map(|m| m.name.clone())
            .ok_or(format!("leader {id:x} not in status: {:?}", s.members))?)
    }

    /// Deletes pod `name` and waits until its replacement is ready and the cluster has
    /// converged on `replicas` healthy voters again; returns how long that took.
    async fn delete_member_pod(&self, name: &str, replicas: usize) -> Result<Duration, Error> {
        let uid = self.pods().await?.get(name).map(|p| p.uid.clone()).ok_or(format!("no pod {name}"))?;
        let deleted = Instant::now();
        self.kubectl(&["delete", "pod", name, "--wait=false"])?;
        wait_until(CONVERGE, &format!("{name} replaced by a ready pod"), || async {
            let pods = self.pods().await.ok()?;
            pods.get(name).filter(|p| p.uid != uid && p.ready && !p.terminating).map(|_| ())
        })
        .await?;
        self.wait_converged(replicas, CONVERGE).await?;
        Ok(deleted.elapsed())
    }
}

/// Criteria: L3.failover (the leader's pod deleted: etcd elects a new leader, the operator
/// brings the member back, and clients' writes resume). What it shows: 4 clients doing
/// random puts, linearizable gets and compare-and-swaps on 3 shared keys through the client
/// Service, while a follower's pod and then the leader's are deleted (each waited back to
/// a converged cluster), leave a history that porcupine (`statecraft-porcupine`, a checker
/// written outside this project) finds linearizable; calls that timed out count as of
/// unknown outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_clients_stay_linearizable_while_a_follower_then_the_leader_is_deleted() -> TestResult {
    const TEST: &str = "etcd_clients_stay_linearizable_while_a_follower_then_the_leader_is_deleted";
    let ev = evidence(TEST, &["L3.failover"]).await?;
    let db = Etcd::create("etcd-lin", "etcd", 3, json!({}), &[]).await?;
    let endpoint = db.endpoint().await?;
    let history = History::new();
    let stop = StopFlag::default();
    let clients: Vec<_> = (0..LIN_CLIENTS)
        .map(|id| tokio::spawn(lin_client(id, endpoint.clone(), lin_keys("lin/"), history.clone(), stop.clone())))
        .collect();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;

    let leader = db.leader_name().await?;
    let follower = (0..3u32).map(|k| db.names.member(k)).find(|m| *m != leader).ok_or("no follower")?;
    let follower_back = db.delete_member_pod(&follower, 3).await?;
    eprintln!("{follower} (follower) deleted; cluster converged again after {follower_back:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let leader = db.leader_name().await?;
    let leader_killed = Instant::now();
    let leader_back = db.delete_member_pod(&leader, 3).await?;
    eprintln!("{leader} (leader) deleted; cluster converged again after {leader_back:?}");
    let new_leader = db.leader_name().await?;
    // At least 20 s of clients in all, and a few after the last convergence.
    tokio::time::sleep(Duration::from_secs(5).max(Duration::from_secs(20).saturating_sub(started.elapsed()))).await;
    stop.set();
    for c in clients {
        c.await?;
    }
    let ran = started.elapsed();

    let ops = history.ops();
    let (ok, _, unknown) = history.counts();
    let ok_of = |kind: Kind| ops.iter().filter(|op| op.kind == kind && op.outcome == Outcome::Ok).count();
    let swapped = ops.iter().filter(|op| op.kind == Kind::Cas && op.swapped == Some(true)).count();
    let (puts, gets, cas) = (ok_of(Kind::Put), ok_of(Kind::Get), ok_of(Kind::Cas));
    // The first write acknowledged that was called after the leader's pod was deleted.
    let killed_at = history.nanos(leader_killed);
    let first_write_after = ops
        .iter()
        .filter(|op| op.call >= killed_at && op.outcome == Outcome::Ok)
        .filter(|op| op.kind == Kind::Put || op.swapped == Some(true))
        .map(|op| op.ret)
        .min()
        .map(|ret| Duration::from_nanos(ret - killed_at));
    let verdict = history.check(TEST)?;
    eprintln!(
        "{} ops in {ran:?} ({ok} answered: {puts} puts, {gets} gets, {cas} cas of which {swapped} swapped; {unknown} unknown); leader {leader} -> {new_leader}; first write after the leader's deletion {first_write_after:?}; {verdict}",
        ops.len()
    );
    append_result(
        "etcd-linearizability.jsonl",
        json!({
            "test": TEST,
            "method": "4 clients on the node, each a loop of random put / get (linearizable) / cas (txn: value == last seen -> put) on 3 shared keys through the client Service, 10 ms apart, 2 s client timeout (then outcome unknown and a new connection); a follower's pod deleted, cluster converged, then the leader's; the whole history checked with porcupine's per-key register model (statecraft-porcupine)",
            "operations": ops.len(), "answered": ok, "unknown": unknown, "puts": puts, "gets": gets,
            "cas": cas, "cas_swapped": swapped, "clients_seconds": ran.as_secs_f64(),
            "follower_back_seconds": follower_back.as_secs_f64(), "leader_back_seconds": leader_back.as_secs_f64(),
            "first_write_after_leader_deleted_seconds": first_write_after.map(|d| d.as_secs_f64()),
            "verdict": format!("{:?}", verdict.verdict), "check_seconds": verdict.check_seconds,
            "unix_time": unix_now(),
        }),
    );
    assert!(verdict.is_linearizable(), "{verdict}");
    assert!(
        puts > 50 && gets > 50 && swapped > 10,
        "the clients kept working: {puts} puts, {gets} gets, {swapped} swaps"
    );
    assert!(first_write_after.is_some(), "a write was acknowledged after the leader's pod was deleted");
    assert_ne!(new_leader, leader, "another member leads after the leader's pod was deleted");
    ev.pass(json!({
        "operations": ops.len(), "verdict": format!("{:?}", verdict.verdict),
        "leader_back_seconds": leader_back.as_secs_f64(),
        "first_write_after_leader_deleted_seconds": first_write_after.map(|d| d.as_secs_f64()),
    }));
    db.ns.pass();
    Ok(())
}

/// Criteria: L3.switchover (leadership moved to the member an annotation names, under
/// clients, one planned election). Four linearizable clients (porcupine) run while the
/// leader annotation names a follower: it leads, the request is recorded as handled, the
/// longest gap between acknowledged writes is measured; a name that is no member is refused
/// with an Event and moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_leadership_moves_to_the_member_a_request_names_under_linearizable_clients() -> TestResult {
    const TEST: &str = "etcd_leadership_moves_to_the_member_a_request_names_under_linearizable_clients";
    let ev = evidence(TEST, &["L3.switchover"]).await?;
    let db = Etcd::create("etcd-leader", "etcd", 3, json!({}), &[]).await?;
    let endpoint = db.endpoint().await?;
    let history = History::new();
    let stop = StopFlag::default();
    let clients: Vec<_> = (0..LIN_CLIENTS)
        .map(|id| tokio::spawn(lin_client(id, endpoint.clone(), lin_keys("leader/"), history.clone(), stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;

    let leader = db.leader_name().await?;
    let target = (0..3u32).map(|k| db.names.member(k)).find(|m| *m != leader).ok_or("no follower")?;
    let asked = Instant::now();
    let asked_at = history.nanos(asked);
    db.kubectl(&["annotate", "--overwrite", "etcdcluster", "etcd", &format!("etcd.statecraft.io/leader={target}")])?;
    wait_until(Duration::from_secs(60), &format!("{target} leading, the request handled"), || async {
        let s = db.status().await.ok()?;
        let led = db.leader_name().await.ok()? == target;
        (led && s.handled_leader_request.as_deref() == Some(target.as_str())).then_some(())
    })
    .await?;
    let moved_after = asked.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;

    // A name that is no member: refused, recorded, nothing moved.
    db.kubectl(&["annotate", "--overwrite", "etcdcluster", "etcd", "etcd.statecraft.io/leader=etcd-9"])?;
    wait_until(Duration::from_secs(30), "the request for etcd-9 handled", || async {
        let s = db.status().await.ok()?;
        (s.handled_leader_request.as_deref() == Some("etcd-9")).then_some(())
    })
    .await?;
    assert!(events::count(&db.cluster, &db.namespace, "etcd", "LeaderRequestRefused").await? >= 1);
    assert_eq!(db.leader_name().await?, target, "a refused request moves nothing");
    stop.set();
    for c in clients {
        c.await?;
    }
    let ops = history.ops();
    let gap = write_gap(&ops, asked_at);
    let verdict = history.check(TEST)?;
    eprintln!("leader {leader} -> {target} in {moved_after:?}; longest write gap since the request {gap:?}; {verdict}");
    let figures = json!({
        "test": TEST,
        "method": "3 members; 4 clients of random put / linearizable get / cas on 3 shared keys through the client Service, 10 ms apart; the leader annotation set to a follower; timed until that member led and status.handledLeaderRequest named it; the longest gap between two acknowledged writes from the request on; the history checked by porcupine",
        "seconds_until_it_led": moved_after.as_secs_f64(),
        "longest_write_gap_seconds": gap.as_secs_f64(),
        "operations": ops.len(),
        "verdict": format!("{:?}", verdict.verdict),
        "unix_time": unix_now(),
    });
    append_result("etcd-leader-request.jsonl", figures.clone());
    assert!(verdict.is_linearizable(), "{verdict}");
    ev.pass(figures);
    db.ns.pass();
    Ok(())
}

/// Exactly one of the two operator pods leads, and it exports its reconcile metrics and a
/// series for every member of the cluster (waited for: the first observation may lag).
async fn check_operator_metrics(db: &Etcd) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let pods = operator::metrics(&db.cluster, &db.namespace, EtcdOperator::NAME).await?;
        let leaders: Vec<&(String, String)> =
            pods.iter().filter(|(_, text)| text.lines().any(|l| l == LEADER_SERIES)).collect();
        let missing: Vec<String> = match leaders.as_slice() {
            [(_, text)] => {
                let mut missing: Vec<String> = (0..3u32)
                    .map(|k| db.names.member(k))
                    .filter(|m| {
                        let (cluster, member) = (format!("cluster=\"{}\"", db.name()), format!("member=\"{m}\""));
                        !text
                            .lines()
                            .any(|l| l.starts_with(MEMBER_SERIES) && l.contains(&cluster) && l.contains(&member))
                    })
                    .collect();
                if !text.contains(RECONCILES_SERIES) {
                    missing.push(RECONCILES_SERIES.to_string());
                }
                missing
            }
            _ => vec![format!("one leader among {} pods, found {}", pods.len(), leaders.len())],
        };
        if missing.is_empty() && pods.len() == 2 {
            return Ok(());
        }
        if Instant::now() > deadline {
            let texts: Vec<String> = pods.iter().map(|(ip, t)| format!("--- {ip}\n{t}")).collect();
            return Err(format!("operator metrics: missing {missing:?}\n{}", texts.join("\n")).into());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Criteria: L3.scaling (3 → 5 → 3 members while a client writes: new members join as
/// learners and are promoted, one at a time; removed members leave etcd's membership
/// before their pods go, and their volumes are deleted; every acknowledged write is read
/// back linearizably after each step), L4.events (AddLearner, Promote and Remove Events).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_scales_3_to_5_to_3_under_writes_without_losing_any() -> TestResult {
    let ev = evidence("etcd_scales_3_to_5_to_3_under_writes_without_losing_any", &["L3.scaling", "L4.events"]).await?;
    let db = Etcd::create("etcd-scale", "etcd", 3, json!({}), &[]).await?;
    let writer = EtcdWriter::start(db.endpoint().await?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut figures = serde_json::Map::new();
    for replicas in [5usize, 3] {
        let reasons = ["AddLearner", "Promote", "RemoveMember"];
        let mut before = Vec::new();
        for r in reasons {
            before.push(db.events(r).await?);
        }
        let started = Instant::now();
        db.patch(json!({"spec": {"replicas": replicas}}))?;
        let log = db.watch_membership(replicas, CONVERGE).await?;
        let took = started.elapsed();
        let mut delta = BTreeMap::new();
        for (r, b) in reasons.iter().zip(&before) {
            delta.insert(*r, db.events(r).await?.saturating_sub(*b));
        }
        let attempts = writer.attempts();
        let present = db.read_ids(EtcdWriter::PREFIX).await?;
        let lost = lost(&attempts, &present);
        let gap = longest_gap_between(&attempts, started, Some(started + took));
        let step = if replicas == 5 { "3_to_5" } else { "5_to_3" };
        eprintln!("{step}: {took:?}; longest write gap {gap:?}; events {delta:?}; {log:?}");
        assert!(lost.is_empty(), "{step}: acknowledged writes lost: {} of {}", lost.len(), acknowledged(&attempts));
        assert!(log.removed_after_pod.is_empty(), "{step}: pods gone before their member: {:?}", log.removed_after_pod);
        if replicas == 5 {
            assert!(delta["AddLearner"] >= 2 && delta["Promote"] >= 2, "two learners added and promoted: {delta:?}");
            assert!(log.learner_in_members || log.learner_in_status, "a new member was seen as a learner: {log:?}");
            assert!(log.max_members <= 5, "never more members than asked: {log:?}");
        } else {
            assert!(delta["RemoveMember"] >= 2, "two members removed: {delta:?}");
            let gone = [db.names.data_claim(3), db.names.data_claim(4)];
            wait_until(Duration::from_secs(120), "the removed members' claims deleted", || async {
                let claims = db.claims().await.ok()?;
                gone.iter().all(|c| !claims.contains(c)).then_some(())
            })
            .await?;
        }
        figures.insert(format!("scale_{step}_seconds"), json!(took.as_secs_f64()));
        figures.insert(format!("write_gap_{step}_seconds"), json!(gap.as_secs_f64()));
        figures.insert(format!("learner_seen_{step}"), json!(log.learner_in_members || log.learner_in_status));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = writer.stop().await?;
    let lost = lost(&attempts, &db.read_ids(EtcdWriter::PREFIX).await?);
    figures.insert("acknowledged_writes".into(), json!(acknowledged(&attempts)));
    figures.insert("acknowledged_writes_lost".into(), json!(lost.len()));
    let mut record = json!({
        "test": "etcd_scales_3_to_5_to_3_under_writes_without_losing_any",
        "method": "patch spec.replicas 3 -> 5, then 5 -> 3, while one client puts one key at a time through the client Service (ClusterIP) from the node; time from the patch until Ready for the generation with that many healthy voters, etcd's member list agreeing (all started, no learner) and exactly those pods; longest time between two acknowledgements of puts during each step; every acknowledged key read back with a linearizable range after each step",
        "unix_time": unix_now(),
    });
    if let Some(r) = record.as_object_mut() {
        r.extend(figures.clone());
    }
    append_result("etcd-scaling.jsonl", record);
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert!(acknowledged(&attempts) > 50, "the client kept writing");
    ev.pass(serde_json::Value::Object(figures));
    db.ns.pass();
    Ok(())
}

/// What a roll did to the pods, sampled every 250 ms.
#[derive(Debug, Default)]
struct RollLog {
    /// Every uid each pod had, in order, starting with the one before the roll.
    uids: BTreeMap<String, Vec<String>>,
    /// When each pod's restart was first seen (terminating, gone or replaced).
    began: BTreeMap<String, Instant>,
    /// When each pod's replacement was first seen ready.
    back: BTreeMap<String, Instant>,
    /// Leaders named by status, without repeats.
    leaders: Vec<String>,
    /// Members status showed in flight, without repeats.
    in_flight: Vec<String>,
    /// The leader's member id as etcd reports it, when it was first seen, without repeats.
    etcd_leaders: Vec<(Instant, u64)>,
}

impl RollLog {
    /// Pods in the order their restarts began.
    fn order(&self) -> Vec<String> {
        let mut order: Vec<(&Instant, &String)> = self.began.iter().map(|(p, t)| (t, p)).collect();
        order.sort();
        order.into_iter().map(|(_, p)| p.clone()).collect()
    }
}

impl EtcdRef {
    /// Watches a roll to `image` until every pod of `before` has been replaced by a ready pod
    /// of that image, the cluster is Ready with healthy voters and status records a
    /// completed roll other than `upgrade_before`.
    async fn watch_roll(
        &self,
        before: &BTreeMap<String, PodInfo>,
        image: &str,
        upgrade_before: Option<statecraft_shared::upgrade::UpgradeProgress>,
        timeout: Duration,
    ) -> Result<(RollLog, EtcdClusterStatus), Error> {
        let started = Instant::now();
        // Clients of each member by pod IP: the leader is asked of the members directly, so
        // that a member going away never hides a leadership change behind the Service.
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        let mut log = RollLog::default();
        for (name, p) in before {
            log.uids.insert(name.clone(), vec![p.uid.clone()]);
        }
        loop {
            let now = Instant::now();
            let pods = self.pods().await?;
            for ip in pods.values().filter(|p| p.ready && !p.terminating).filter_map(|p| p.ip.clone()) {
                if !clients.contains_key(&ip)
                    && let Some(c) = connect(&format!("http://{ip}:2379")).await
                {
                    clients.insert(ip.clone(), c);
                }
                let Some(c) = clients.get_mut(&ip) else { continue };
                match tokio::time::timeout(Duration::from_secs(1), c.status()).await {
                    Ok(Ok(st)) if st.leader() != 0 => {
                        if log.etcd_leaders.last().map(|l| l.1) != Some(st.leader()) {
                            log.etcd_leaders.push((now, st.leader()));
                        }
                        break;
                    }
                    Ok(Ok(_)) => {}
                    _ => {
                        clients.remove(&ip);
                    }
                }
            }
            for (name, p0) in before {
                let seen = log.uids.entry(name.clone()).or_default();
                match pods.get(name) {
                    None => {
                        log.began.entry(name.clone()).or_insert(now);
                    }
                    Some(p) => {
                        if seen.last() != Some(&p.uid) {
                            seen.push(p.uid.clone());
                        }
                        if p.terminating || p.uid != p0.uid {
                            log.began.entry(name.clone()).or_insert(now);
                        }
                        if p.uid != p0.uid && p.ready && !p.terminating {
                            log.back.entry(name.clone()).or_insert(now);
                        }
                    }
                }
            }
            let status = self.status().await?;
            if let Some(l) = &status.leader
                && log.leaders.last() != Some(l)
            {
                log.leaders.push(l.clone());
            }
            if let Some(m) = status.upgrade.as_ref().and_then(|u| u.in_flight.as_ref())
                && log.in_flight.last() != Some(&m.name)
            {
                log.in_flight.push(m.name.clone());
            }
            let replaced = before.iter().all(|(name, p0)| {
                pods.get(name).is_some_and(|p| p.uid != p0.uid && p.image == image && p.ready && !p.terminating)
            });
            let recorded = status.upgrade.as_ref().is_some_and(|u| {
                Some(u) != upgrade_before.as_ref() && u.completed_at.is_some() && u.in_flight.is_none()
            });
            if replaced
                && recorded
                && let Some(s) = self.converged_now(before.len()).await
            {
                return Ok((log, s));
            }
            if started.elapsed() > timeout {
                return Err(format!("the roll did not complete in {timeout:?}: {:?}; {log:?}", status.upgrade).into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Criteria: L2.rolling-restart (a change of spec.image restarts the members one at a time,
/// each back and ready before the next, followers first, then leadership is moved
/// (MoveLeader) and the old leader restarts last; one election in all; status records the
/// roll; no acknowledged write is lost; the longest write gap is measured against the 2 s
/// target), L1.config (the spec change reaches every member and status shows it observed).
///
/// Only one etcd build exists offline, so the new image is the same build under a second
/// tag (`…:v3.6.16-e2e`) added to the local node's containerd: the pods change image and
/// restart exactly as in an upgrade, but the version does not change, so this does not
/// prove L2.operand-upgrade. Local cluster only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_image_change_rolls_followers_first_then_moves_the_leader() -> TestResult {
    let cluster = Cluster::connect().await?;
    if cluster.provider != Provider::Local {
        eprintln!("skipped: tags an image in the local node's containerd");
        return Ok(());
    }
    let version = etcd_version()?;
    let old = etcd_image()?;
    let new = retagged(old, &format!("v{version}-e2e"));
    tag_on_node(old, &new)?;
    let ev =
        evidence("etcd_image_change_rolls_followers_first_then_moves_the_leader", &["L2.rolling-restart", "L1.config"])
            .await?;
    let db = Etcd::create("etcd-roll", "etcd", 3, json!({}), &[]).await?;
    let writer = EtcdWriter::start(db.endpoint().await?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let term_before = db.raft_term().await?;
    let moves_before = db.events("MoveLeader").await?;
    let status = db.status().await?;
    // The leader as etcd reports it (status may lag by a pass).
    let old_id = db.client().await?.status().await?.leader();
    let leader = status.members.iter().find(|m| hex_id(&m.id) == Some(old_id)).map(|m| m.name.clone());
    let leader = leader.ok_or(format!("leader {old_id:x} not in status: {:?}", status.members))?;
    let pods = db.pods().await?;
    assert!(pods.values().all(|p| p.image == old), "{pods:?}");

    let started = Instant::now();
    db.patch(json!({"spec": {"image": new}}))?;
    let (log, after) = db.watch_roll(&pods, &new, status.upgrade.clone(), Duration::from_secs(900)).await?;
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = writer.stop().await?;
    let gap = longest_gap(&attempts, started);
    let lost = lost(&attempts, &db.read_ids(EtcdWriter::PREFIX).await?);
    let elections = db.raft_term().await?.saturating_sub(term_before);
    let moves = db.events("MoveLeader").await?.saturating_sub(moves_before);
    let order = log.order();
    eprintln!(
        "roll: {took:?}; order {order:?} (leader was {leader}); leaders {:?}; in flight {:?}; {elections} election(s); longest write gap {gap:?}; {} lost",
        log.leaders,
        log.in_flight,
        lost.len()
    );
    append_result(
        "etcd-rolling-upgrade.jsonl",
        json!({
            "test": "etcd_image_change_rolls_followers_first_then_moves_the_leader",
            "method": "patch spec.image of a 3-member cluster to a second tag of the same etcd build while one client puts one key at a time through the client Service (ClusterIP) from the node; total time from the patch until every pod is replaced and ready, status records the roll complete and the cluster is Ready; longest time between two acknowledgements of puts; elections = raft term after - before",
            "roll_seconds": took.as_secs_f64(), "write_gap_seconds": gap.as_secs_f64(),
            "write_gap_target_seconds": 2.0, "write_gap_target_met": gap <= Duration::from_secs(2),
            "elections": elections, "restart_order": order, "old_leader": leader,
            "acknowledged_writes": acknowledged(&attempts), "acknowledged_writes_lost": lost.len(),
            "unix_time": unix_now(),
        }),
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    for (name, uids) in &log.uids {
        assert_eq!(uids.len(), 2, "{name} restarted exactly once: {uids:?}");
    }
    assert_eq!(order.len(), 3, "{order:?}");
    assert_eq!(order.last(), Some(&leader), "the leader restarts last: {order:?}");
    for pair in order.windows(2) {
        let (first, next) = (&pair[0], &pair[1]);
        let back = log.back.get(first).ok_or(format!("{first} never came back ready"))?;
        assert!(log.began[next] >= *back, "{next} restarted before {first} was back: one member at a time");
    }
    assert!(moves >= 1, "a MoveLeader Event");
    // etcd itself saw the leadership leave the old leader before its pod was restarted
    // (without a transfer, the leader would change only after its pod went away).
    let moved = log.etcd_leaders.iter().find(|(_, id)| *id != old_id).map(|(at, _)| *at);
    let moved = moved.ok_or(format!("etcd never reported another leader: {:?}", log.etcd_leaders))?;
    assert!(moved <= log.began[&leader], "leadership moved before {leader} restarted");
    assert_eq!(elections, 1, "one leader change, the transfer: {elections} elections; leaders {:?}", log.leaders);
    let upgrade = after.upgrade.clone().unwrap_or_default();
    for name in pods.keys() {
        assert!(upgrade.members_done.contains(name), "status records {name} done: {upgrade:?}");
    }
    assert_eq!(after.observed_version.as_deref(), Some(version.as_str()));
    ev.pass(json!({
        "roll_seconds": took.as_secs_f64(), "write_gap_seconds": gap.as_secs_f64(),
        "write_gap_target_met": gap <= Duration::from_secs(2), "elections": elections,
        "acknowledged_writes_lost": lost.len(),
    }));
    db.ns.pass();
    Ok(())
}

/// Criteria: L5.auto-healing (a follower loses its data — claim and pod deleted together;
/// its new pod cannot rejoin under the old member id — and after
/// spec.autoHeal.replaceAfterSeconds the operator replaces it: the cluster is back to 3
/// healthy voters with a new member id for that ordinal and a new volume, without a human;
/// no acknowledged write is lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_member_with_lost_data_is_replaced_automatically() -> TestResult {
    let ev = evidence("etcd_member_with_lost_data_is_replaced_automatically", &["L5.auto-healing"]).await?;
    let db = Etcd::create("etcd-heal", "etcd", 3, json!({"autoHeal": {"replaceAfterSeconds": 30}}), &[]).await?;
    let writer = EtcdWriter::start(db.endpoint().await?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = db.status().await?;
    let (ordinal, victim) = [1u32, 2]
        .into_iter()
        .map(|k| (k, db.names.member(k)))
        .find(|(_, m)| member(&s, m).is_some_and(|m| !m.leader))
        .ok_or("no follower among members 1 and 2")?;
    let old_id = member(&s, &victim).and_then(|m| hex_id(&m.id)).ok_or("no member id")?;
    let claim = db.names.data_claim(ordinal);
    let old_claim = db.kubectl(&["get", "pvc", &claim, "-o", "jsonpath={.metadata.uid}"])?;
    let replaced_before = db.events("ReplaceMember").await?;

    let killed = Instant::now();
    db.kubectl(&["delete", "pvc", &claim, "--wait=false"])?;
    db.kubectl(&["delete", "pod", &victim, "--wait=false"])?;
    let what = format!("{victim} replaced by a new member");
    let after = wait_until(CONVERGE, &what, || async {
        let s = db.converged_now(3).await?;
        let id = member(&s, &victim).and_then(|m| hex_id(&m.id))?;
        (id != old_id).then_some(s)
    })
    .await?;
    let replace_seconds = killed.elapsed();
    let members = db.members().await?;
    let new_claim = db.kubectl(&["get", "pvc", &claim, "-o", "jsonpath={.metadata.uid}"])?;
    let replaced = db.events("ReplaceMember").await?.saturating_sub(replaced_before);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = writer.stop().await?;
    let gap = longest_gap(&attempts, killed);
    let lost = lost(&attempts, &db.read_ids(EtcdWriter::PREFIX).await?);
    eprintln!("{victim} replaced after {replace_seconds:?}; members {members:?}; longest write gap {gap:?}");
    append_result(
        "etcd-replace.jsonl",
        json!({
            "test": "etcd_member_with_lost_data_is_replaced_automatically",
            "method": "kubectl delete pvc data-<follower> --wait=false, then kubectl delete pod <follower>, with spec.autoHeal.replaceAfterSeconds 30, while one client puts through the client Service; time from the deletion until the cluster is Ready with 3 healthy voters and a new member id for that ordinal",
            "member": victim, "replace_seconds": replace_seconds.as_secs_f64(),
            "replace_after_seconds": 30, "write_gap_seconds": gap.as_secs_f64(),
            "acknowledged_writes": acknowledged(&attempts), "acknowledged_writes_lost": lost.len(),
            "unix_time": unix_now(),
        }),
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(members.iter().all(|m| !m.learner && m.id != old_id && !m.name.is_empty()), "{members:?}");
    assert!(members.iter().any(|m| m.name == victim), "{members:?}");
    assert_ne!(new_claim, old_claim, "{victim} got a new volume");
    assert!(replaced >= 1, "a Replace Event");
    assert!(after.members.iter().all(|m| m.healthy), "{:?}", after.members);
    ev.pass(json!({"replace_seconds": replace_seconds.as_secs_f64(), "acknowledged_writes_lost": lost.len()}));
    db.ns.pass();
    Ok(())
}

/// Criteria: L3.scaling (a scale-out 3 → 5 survives the operator's leader being killed
/// twice between membership steps — right after a learner was added, and right after a
/// learner was promoted: the standby resumes from etcd's membership, and the cluster
/// converges on 5 started voting members, each with its pod and volume, no learner and no
/// half-added member left; no acknowledged write is lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_operator_killed_between_membership_steps_converges() -> TestResult {
    let ev = evidence("etcd_operator_killed_between_membership_steps_converges", &["L3.scaling"]).await?;
    let db = Etcd::create("etcd-resume", "etcd", 3, json!({}), &[]).await?;
    let writer = EtcdWriter::start(db.endpoint().await?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let added_before = db.events("AddLearner").await?;
    let started = Instant::now();
    db.patch(json!({"spec": {"replicas": 5}}))?;

    wait_until(Duration::from_secs(300), "an AddLearner Event of the scale-out", || async {
        (db.events("AddLearner").await.ok()? > added_before).then_some(())
    })
    .await?;
    let first = operator::kill_leader(&db.cluster, &db.namespace, EtcdOperator::NAME)?;
    let members_at_first = db.members().await.ok();
    let promoted_before = db.events("Promote").await?;
    eprintln!("killed the operator leader {first} after AddLearner; members {members_at_first:?}");
    // The standby takes the Lease once it expires and promotes the learner: kill it then.
    wait_until(Duration::from_secs(300), "a Promote Event after the first kill", || async {
        (db.events("Promote").await.ok()? > promoted_before).then_some(())
    })
    .await?;
    let second = operator::kill_leader(&db.cluster, &db.namespace, EtcdOperator::NAME)?;
    let members_at_second = db.members().await.ok();
    eprintln!("killed the operator leader {second} after Promote; members {members_at_second:?}");

    let log = db.watch_membership(5, CONVERGE).await?;
    let took = started.elapsed();
    let claims = db.claims().await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempts = writer.stop().await?;
    let lost = lost(&attempts, &db.read_ids(EtcdWriter::PREFIX).await?);
    eprintln!("converged after {took:?}: {log:?}");
    append_result(
        "etcd-operator-killed.jsonl",
        json!({
            "test": "etcd_operator_killed_between_membership_steps_converges",
            "method": "patch spec.replicas 3 -> 5; force-delete the operator pod holding the Lease when the first AddLearner Event appears, and the next holder when the next Promote Event appears; time from the patch until 5 started voters, no learner, one pod per member",
            "converge_seconds": took.as_secs_f64(), "killed": [first, second],
            "acknowledged_writes": acknowledged(&attempts), "acknowledged_writes_lost": lost.len(),
            "unix_time": unix_now(),
        }),
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    let names: BTreeSet<String> = log.members.iter().map(|m| m.name.clone()).collect();
    let expected: BTreeSet<String> = (0..5).map(|k| db.names.member(k)).collect();
    assert_eq!(names, expected, "5 started members, one per pod: {:?}", log.members);
    assert!(log.members.iter().all(|m| !m.learner), "no learner left: {:?}", log.members);
    assert!(log.max_members <= 5, "never a sixth member: {log:?}");
    assert!(log.removed_after_pod.is_empty(), "no member without its pod: {:?}", log.removed_after_pod);
    let expected_claims: BTreeSet<String> = (0..5).map(|k| db.names.data_claim(k)).collect();
    assert_eq!(claims, expected_claims);
    ev.pass(json!({"converge_seconds": took.as_secs_f64(), "acknowledged_writes_lost": lost.len()}));
    db.ns.pass();
    Ok(())
}

/// etcd's backend quota as a member's own metrics give it (`etcd_server_quota_backend_bytes`).
async fn member_quota_metric(pod: &PodInfo) -> Option<i64> {
    let text = http_get(&format!("{}:{METRICS_PORT}", pod.ip.as_deref()?), "/metrics").await?;
    let line = text.lines().find(|l| l.starts_with("etcd_server_quota_backend_bytes "))?;
    Some(line.split_whitespace().nth(1)?.parse::<f64>().ok()? as i64)
}

/// The value of small key `i` of the backup test: text, or every byte value.
fn small_value(i: u64) -> Vec<u8> {
    if i.is_multiple_of(7) {
        (0..=255u8).cycle().skip(i as usize % 256).take(300).collect()
    } else {
        format!("value {i} naïve 🦀 ✓").into_bytes()
    }
}

/// The value of big key `i` of the backup test: 256 KiB of a pattern of `i`.
fn big_value(i: u64) -> Vec<u8> {
    (0..256 * 1024u64).map(|j| ((j * 31 + i * 7) % 251) as u8).collect()
}

/// Seconds between two RFC 3339 times.
fn seconds_between(start: Option<&str>, end: Option<&str>) -> Option<f64> {
    let parse = |t: Option<&str>| chrono::DateTime::parse_from_rfc3339(t?).ok();
    Some((parse(end)? - parse(start)?).num_milliseconds() as f64 / 1000.0)
}

/// SHA-256 (hex) of a file.
async fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut hash = HashingWriter::new();
    tokio::io::copy(&mut file, &mut hash).await?;
    Ok(hash.sha256())
}

/// Criteria: L3.backup (an EtcdBackup streams a snapshot of a 3-member cluster to a real
/// S3 server, with location, key, size, SHA-256, revision, member and times in status; the
/// object has that size and checksum), L3.restore (an EtcdRestore creates a new 3-member
/// cluster from it with exactly the data of the snapshot: every key with its value, nothing
/// written later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_backup_to_s3_and_restore_into_a_new_cluster() -> TestResult {
    let ev = evidence("etcd_backup_to_s3_and_restore_into_a_new_cluster", &["L3.backup", "L3.restore"]).await?;
    let cluster = Cluster::connect().await?;
    let s3 = S3Server::start_on(&cluster.host_address()).await?;
    s3.create_bucket("backups")?;
    let db = Etcd::create("etcd-backup", "etcd", 3, json!({}), &[s3_credentials(&s3)]).await?;

    // 1000 small keys (text and binary) and 128 keys of 256 KiB: 32 MiB of values.
    let mut c = db.client().await?;
    let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for i in 0..1000u64 {
        expected.insert(format!("k/{i}"), small_value(i));
    }
    for i in 0..128u64 {
        expected.insert(format!("big/{i}"), big_value(i));
    }
    let mut last_revision = 0;
    for (key, value) in &expected {
        let put = c.put(key.clone(), value.clone(), None).await?;
        last_revision = put.header().map_or(0, |h| h.revision());
    }

    let location = serde_json::to_value(s3.location("backups", "e2e"))?;
    let backup = json!({
        "apiVersion": "etcd.statecraft.io/v1alpha1", "kind": "EtcdBackup",
        "metadata": {"name": "first"}, "spec": {"clusterName": db.name(), "location": location}
    });
    let asked = Instant::now();
    db.apply(&backup)?;
    let backups: Api<EtcdBackup> = Api::namespaced(db.cluster.client.clone(), &db.namespace);
    let status: EtcdBackupStatus =
        wait_until(Duration::from_secs(300), "EtcdBackup first Succeeded or Failed", || async {
            let s = backups.get("first").await.ok()?.status?;
            matches!(s.common.phase.as_deref(), Some("Succeeded" | "Failed")).then_some(s)
        })
        .await?;
    let backup_wall = asked.elapsed();
    // Written after the snapshot: the restored cluster must not have these.
    let later = c.put("after/backup", "x", None).await?.header().map_or(0, |h| h.revision());
    c.put("k/1", "changed after the backup", None).await?;
    eprintln!("backup: {status:?} in {backup_wall:?}");
    assert_eq!(status.common.phase.as_deref(), Some("Succeeded"), "{status:?}");
    let size = status.common.size.unwrap_or_default();
    assert!(size > 32 << 20, "the snapshot holds the values: {size} bytes");
    let revision = status.revision.unwrap_or_default();
    assert!(revision >= last_revision && revision < later, "revision {revision} in [{last_revision}, {later})");
    let sha = status.common.sha256.clone().unwrap_or_default();
    assert!(sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()), "{status:?}");
    assert!(status.common.key.as_deref().is_some_and(|k| !k.is_empty()), "{status:?}");
    let from = status.member.clone().unwrap_or_default();
    assert!(db.status().await?.members.iter().any(|m| m.name == from), "taken from a member: {from:?}");
    let url = status.common.location.clone().unwrap_or_default();
    let object = url.strip_prefix("s3://backups/").ok_or(format!("location {url} is in the bucket"))?;
    let path = s3.object_path("backups", object);
    assert_eq!(std::fs::metadata(&path)?.len(), size as u64, "the object has the recorded size");
    assert_eq!(file_sha256(&path).await?, sha, "the object has the recorded checksum");
    let snapshot_seconds =
        seconds_between(status.common.start_time.as_deref(), status.common.completion_time.as_deref())
            .ok_or(format!("start and completion times: {status:?}"))?;
    let mib_per_second = (snapshot_seconds > 0.0).then(|| size as f64 / (1 << 20) as f64 / snapshot_seconds);

    // Restore into a new cluster.
    let restore = json!({
        "apiVersion": "etcd.statecraft.io/v1alpha1", "kind": "EtcdRestore",
        "metadata": {"name": "again"},
        "spec": {"backupName": "first", "target": {"name": "copy", "spec": etcd_cluster("copy", 3)?["spec"]}}
    });
    let restoring = Instant::now();
    db.apply(&restore)?;
    let restores: Api<EtcdRestore> = Api::namespaced(db.cluster.client.clone(), &db.namespace);
    let rs = wait_until(CONVERGE, "EtcdRestore again Succeeded or Failed", || async {
        let s = restores.get("again").await.ok()?.status?;
        matches!(s.phase.as_deref(), Some("Succeeded" | "Failed")).then_some(s)
    })
    .await?;
    assert_eq!(rs.phase.as_deref(), Some("Succeeded"), "{rs:?}");
    let copy = db.sibling("copy");
    let copy_status = copy.wait_converged(3, CONVERGE).await?;
    let restore_seconds = restoring.elapsed();
    let copy_cluster = copy.api.get("copy").await?;
    let from_backup = copy_cluster.spec.bootstrap_from.as_ref().ok_or("the copy has spec.bootstrapFrom")?;
    assert_eq!(Some(from_backup.key.as_str()), status.common.key.as_deref());
    assert_ne!(copy_status.cluster_id, db.status().await?.cluster_id, "a new cluster, not a member of the old one");
    let mut r = copy.client().await?;
    for (key, value) in &expected {
        let got = r.get(key.clone(), None).await?;
        assert_eq!(got.kvs().first().map(|kv| kv.value()), Some(value.as_slice()), "{key} restored");
    }
    assert!(r.get("after/backup", None).await?.kvs().is_empty(), "nothing written after the snapshot");
    for (prefix, n) in [("k/", 1000), ("big/", 128)] {
        let count = r.get(prefix, Some(GetOptions::new().with_prefix().with_count_only())).await?.count();
        assert_eq!(count, n, "exactly the snapshot's keys under {prefix}");
    }

    append_result(
        "etcd-backup.jsonl",
        json!({
            "test": "etcd_backup_to_s3_and_restore_into_a_new_cluster",
            "method": "EtcdBackup of a 3-member cluster holding 1000 small keys and 128 x 256 KiB values, streamed by the backup Job to an s3s-fs server on the node; throughput = status.size / (status.completionTime - status.startTime) (times have the precision status gives them); wall = EtcdBackup created to Succeeded seen; restore = EtcdRestore created to the new 3-member cluster converged",
            "snapshot_bytes": size, "snapshot_seconds": snapshot_seconds, "snapshot_mib_per_second": mib_per_second,
            "backup_wall_seconds": backup_wall.as_secs_f64(), "restore_seconds": restore_seconds.as_secs_f64(),
            "revision": revision, "unix_time": unix_now(),
        }),
    );
    ev.pass(json!({
        "snapshot_bytes": size, "snapshot_mib_per_second": mib_per_second,
        "backup_wall_seconds": backup_wall.as_secs_f64(), "restore_seconds": restore_seconds.as_secs_f64(),
    }));
    db.ns.pass();
    Ok(())
}

/// Every object file below `dir` (s3s-fs keeps one file per object; its own bookkeeping
/// files start with a dot).
fn object_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            out.extend(object_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Criteria: L3.scheduled-backup (spec.backup's cron schedule creates EtcdBackups that
/// succeed, and retention keepLast 2 deletes the older ones from S3 with their
/// EtcdBackups; the cluster's status names the latest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_scheduled_backups_run_on_time_and_expire() -> TestResult {
    let ev = evidence("etcd_scheduled_backups_run_on_time_and_expire", &["L3.scheduled-backup"]).await?;
    let cluster = Cluster::connect().await?;
    let s3 = S3Server::start_on(&cluster.host_address()).await?;
    s3.create_bucket("scheduled")?;
    let policy = json!({
        "schedule": "* * * * *",
        "retention": {"keepLast": 2},
        "location": serde_json::to_value(s3.location("scheduled", "e2e"))?,
    });
    let db = Etcd::create("etcd-sched", "etcd", 1, json!({"backup": policy}), &[s3_credentials(&s3)]).await?;
    let backups: Api<EtcdBackup> = Api::namespaced(db.cluster.client.clone(), &db.namespace);
    let succeeded = || async {
        let list = backups.list(&Default::default()).await.ok()?;
        let names: BTreeSet<String> = list
            .items
            .iter()
            .filter(|b| b.status.as_ref().and_then(|s| s.common.phase.as_deref()) == Some("Succeeded"))
            .map(|b| b.name_any())
            .collect();
        Some((names, list.items.len()))
    };
    let started = Instant::now();
    let (first_two, _) = wait_until(Duration::from_secs(200), "two scheduled backups succeeded", || async {
        succeeded().await.filter(|(names, _)| names.len() >= 2)
    })
    .await?;
    let two_after = started.elapsed();
    // A third slot makes the oldest expire: keepLast 2.
    let (kept, total) = wait_until(Duration::from_secs(200), "the oldest backup expired after a newer one", || async {
        let (names, total) = succeeded().await?;
        let objects = object_files(&s3.root().join("scheduled")).len();
        let expired = first_two.iter().any(|n| !names.contains(n));
        (expired && names.len() <= 2 && objects <= 2 && total <= 3).then_some((names, total))
    })
    .await?;
    let objects = object_files(&s3.root().join("scheduled"));
    eprintln!("scheduled: first two {first_two:?} after {two_after:?}; kept {kept:?} of {total}; objects {objects:?}");
    assert!(!objects.is_empty() && objects.len() <= 2, "keepLast 2: {objects:?}");
    // Read before the list: retention never deletes the newest successful backup.
    let last = db.status().await?.last_backup.unwrap_or_default();
    let (now_kept, _) = succeeded().await.ok_or("listing EtcdBackups")?;
    assert!(now_kept.contains(&last), "status.lastBackup {last:?} is a kept backup: {now_kept:?}");
    assert!(db.events("BackupScheduled").await? >= 3, "one BackupScheduled Event per slot");
    assert!(db.events("BackupsExpired").await? >= 1, "a BackupsExpired Event");
    ev.pass(json!({"two_backups_seconds": two_after.as_secs_f64()}));
    db.ns.pass();
    Ok(())
}

/// Criteria: L1.validation (invalid specs are refused by the API server with the field
/// named: replicas 4, version "3.6", a storage size change, autoHeal and defragmentation
/// bounds; or refused in status with reason InvalidSpec naming spec.version and a Warning
/// Event, while the running members are left alone and keep serving), L2.version-checks
/// (an unsupported version and downgrades are refused in status; nothing restarts),
/// L4.events (the refusal leaves a Warning Event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_invalid_specs_are_refused_with_the_field_named() -> TestResult {
    let ev = evidence(
        "etcd_invalid_specs_are_refused_with_the_field_named",
        &["L1.validation", "L2.version-checks", "L4.events"],
    )
    .await?;
    let version = etcd_version()?;
    let db = Etcd::create("etcd-invalid", "etcd", 1, json!({}), &[]).await?;
    // Refused by the API server (schema and CEL), naming the field.
    for (patch, field) in [
        (json!({"spec": {"replicas": 4}}), "spec.replicas"),
        (json!({"spec": {"version": "3.6"}}), "spec.version"),
        (json!({"spec": {"storage": {"size": "2Gi"}}}), "spec.storage.size"),
        (json!({"spec": {"autoHeal": {"replaceAfterSeconds": 10}}}), "spec.autoHeal.replaceAfterSeconds"),
        (json!({"spec": {"defragmentation": {"thresholdPercent": 5}}}), "spec.defragmentation.thresholdPercent"),
    ] {
        let refused = db.patch(patch.clone()).err().ok_or(format!("{patch} accepted"))?;
        assert!(refused.to_string().contains(field), "{patch}: {refused}");
    }

    // Accepted by the schema, refused by the operator: status and a Warning Event; the
    // member is not restarted and keeps serving.
    let pods = db.pods().await?;
    let sts_image =
        || db.kubectl(&["get", "statefulset", db.name(), "-o", "jsonpath={.spec.template.spec.containers[0].image}"]);
    let image_before = sts_image()?;
    let mut c = db.client().await?;
    for (bad, words) in [("3.4.30", "not supported"), ("3.6.15", "downgrade"), ("3.5.21", "downgrade")] {
        db.patch(json!({"spec": {"version": bad}}))?;
        let message = wait_until(Duration::from_secs(60), &format!("version {bad} refused in status"), || async {
            let c = db.api.get(db.name()).await.ok()?;
            let k = c.status.as_ref()?.conditions.iter().find(|k| k.type_ == "Ready")?.clone();
            let current = k.observed_generation.zip(c.metadata.generation).is_none_or(|(seen, now)| seen >= now);
            let about_it = k.message.contains("spec.version") && k.message.contains(bad);
            (k.status == "False" && k.reason == "InvalidSpec" && about_it && current).then_some(k.message)
        })
        .await?;
        assert!(message.contains(words), "{bad}: {message}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(sts_image()?, image_before, "{bad}: the members' image is left alone");
        let now = db.pods().await?;
        for (name, p) in &pods {
            assert_eq!(now.get(name).map(|n| &n.uid), Some(&p.uid), "{bad}: {name} not restarted");
        }
        c.put(format!("still/{bad}"), "serving", None).await?;
    }
    assert!(db.events("InvalidSpec").await? >= 1, "a Warning Event");
    db.patch(json!({"spec": {"version": version}}))?;
    db.wait_converged(1, Duration::from_secs(120)).await?;
    ev.pass(json!(null));
    db.ns.pass();
    Ok(())
}

/// A PriorityClass for the placement test's members (cluster-scoped, so one fixed name;
/// applying it again is a no-op).
const PRIORITY_CLASS: &str = "statecraft-e2e-databases";
/// A node label no node has.
const NOWHERE: &str = "example.com/nowhere";

/// Whether `pod` carries everything the placement test's `spec.podTemplate` asks for, on
/// `node`, and the operator's own labels as well: the problem, if not.
fn placement_problem(pod: &Pod, node: &str, instance: &str) -> Option<String> {
    let spec = pod.spec.clone().unwrap_or_default();
    let labels = pod.labels();
    let name = pod.name_any();
    let spread = spec.topology_spread_constraints.unwrap_or_default();
    let spread_selects_the_cluster = spread.iter().any(|c| {
        c.topology_key == "kubernetes.io/hostname"
            && c.label_selector
                .as_ref()
                .and_then(|s| s.match_labels.as_ref())
                .is_some_and(|m| m.get(INSTANCE_LABEL).map(String::as_str) == Some(instance))
    });
    let checks = [
        (
            spec.node_selector.unwrap_or_default().get("kubernetes.io/hostname").map(String::as_str) == Some(node),
            "the node selector",
        ),
        (
            spec.tolerations.unwrap_or_default().iter().any(|t| t.key.as_deref() == Some("example.com/dedicated")),
            "the toleration",
        ),
        (spec.priority_class_name.as_deref() == Some(PRIORITY_CLASS), "the priority class"),
        // Set by the API server's Priority admission from the class: the name was resolved.
        (spec.priority == Some(1000), "the priority of the class"),
        (spec.image_pull_secrets.unwrap_or_default().iter().any(|s| s.name == "registry"), "the pull Secret"),
        (labels.get("team").map(String::as_str) == Some("storage"), "the extra label"),
        (labels.get(INSTANCE_LABEL).map(String::as_str) == Some(instance), "the operator's own label"),
        (pod.annotations().get("example.com/owner").map(String::as_str) == Some("e2e"), "the extra annotation"),
        (spread_selects_the_cluster, "the spread constraint, selecting the cluster's pods"),
    ];
    checks.iter().find(|(ok, _)| !ok).map(|(_, what)| format!("pod {name} lacks {what}"))
}

/// Criteria: L4.events (a member whose pod cannot be placed is named, with the scheduler's
/// words, in a PodUnschedulable Event on the EtcdCluster and in its Ready condition; one
/// whose pod Kubernetes refuses to create — a PriorityClass that does not exist — in a
/// PodNotCreated Event and condition, with the StatefulSet's words).
/// What `spec.podTemplate` asks reaches every member's pod (node selector, toleration,
/// priority class — resolved by the API server —, pull Secret, extra label and annotation,
/// a topology spread constraint given the cluster's selector), a reserved label is refused
/// naming the field, and a node selector no node matches stops the roll at its first member:
/// one pod pending, quorum and writes kept, that member not replaced (its claim kept) even
/// past the auto-heal delay; putting the selector right rolls the rest and converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_members_follow_the_pod_template_and_an_unplaceable_one_stops_the_roll() -> TestResult {
    let ev =
        evidence("etcd_members_follow_the_pod_template_and_an_unplaceable_one_stops_the_roll", &["L4.events"]).await?;
    let k8s = Cluster::connect().await?;
    let node = k8s.a_node().await?;
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS}, "value": 1000, "description": "statecraft e2e: databases"});
    k8s.kubectl_with_input(&["apply", "-f", "-"], Some(&class.to_string()))?;
    let pull_secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "registry"},
        "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{\"auths\":{}}"}});
    // The shortest auto-heal delay: a member whose pod cannot run must not be replaced
    // however long it waits (a new member would be placed no better, and lose its data).
    let template = json!({
        "autoHeal": {"replaceAfterSeconds": 30},
        "podTemplate": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": "example.com/dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
            ],
            "priorityClassName": PRIORITY_CLASS,
            "imagePullSecrets": [{"name": "registry"}],
            "labels": {"team": "storage"},
            "annotations": {"example.com/owner": "e2e"},
        },
    });
    let db = Etcd::create("etcd-placed", "etcd", 3, template, &[pull_secret]).await?;
    let pods: Api<Pod> = Api::namespaced(k8s.client.clone(), &db.namespace);
    for name in db.pods().await?.keys() {
        let pod = pods.get(name).await?;
        assert_eq!(placement_problem(&pod, &node, db.name()), None);
    }

    let refused = db
        .patch(json!({"spec": {"podTemplate": {"labels": {"app.kubernetes.io/instance": "other"}}}}))
        .err()
        .ok_or("a reserved label was accepted")?;
    assert!(refused.to_string().contains("spec.podTemplate.labels.app.kubernetes.io/instance"), "{refused}");

    // A node selector no node matches: the roll replaces one member's pod, which stays
    // pending; the others keep serving.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(k8s.client.clone(), &db.namespace);
    let claim_uids = |list: Vec<PersistentVolumeClaim>| -> BTreeMap<String, String> {
        list.into_iter().map(|c| (c.name_any(), c.uid().unwrap_or_default())).collect()
    };
    let claims_before = claim_uids(claims.list(&ListParams::default()).await?.items);
    db.patch(json!({"spec": {"podTemplate": {"nodeSelector": {NOWHERE: "true"}}}}))?;
    let stuck = db.not_ready_for("PodUnschedulable").await?;
    assert!(stuck.contains("cannot be scheduled") && stuck.contains("node"), "{stuck}");
    assert!(db.events("PodUnschedulable").await? >= 1, "a PodUnschedulable Event");
    // Past the auto-heal delay: still one member down, not replaced, quorum kept.
    let mut c = db.client().await?;
    for i in 0..45 {
        c.put(format!("placed/{i}"), "kept", None).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let now = db.pods().await?;
    let unready: Vec<&String> = now.iter().filter(|(_, p)| !p.ready).map(|(n, _)| n).collect();
    assert_eq!(unready.len(), 1, "the roll stops at the first unplaceable member: {now:?}");
    assert!(stuck.contains(unready[0].as_str()), "{stuck} names {}", unready[0]);
    assert_eq!(db.events("ReplaceMember").await?, 0, "an unplaceable member is not replaced");
    assert_eq!(db.members().await?.len(), 3, "etcd still has three members");

    // Put right: the pending member starts, the others roll, and every claim is the one the
    // cluster began with.
    db.patch(json!({"spec": {"podTemplate": {"nodeSelector": {NOWHERE: null}}}}))?;
    db.wait_converged(3, CONVERGE).await?;
    for name in db.pods().await?.keys() {
        let pod = pods.get(name).await?;
        assert_eq!(placement_problem(&pod, &node, db.name()), None);
        let selector = pod.spec.and_then(|s| s.node_selector).unwrap_or_default();
        assert!(!selector.contains_key(NOWHERE), "{name} still has {selector:?}");
    }
    assert_eq!(claim_uids(claims.list(&ListParams::default()).await?.items), claims_before, "no claim replaced");
    let kept = db.read_ids("placed/").await?;
    assert_eq!(kept, (0..45).collect::<Vec<u64>>(), "every write made while a member was pending is there");

    // A PriorityClass that does not exist: Kubernetes refuses to create the first pod the
    // roll replaces, so there is no pod status to read; the StatefulSet's FailedCreate
    // Event says why, and the cluster's conditions carry it.
    let missing_class = "statecraft-e2e-missing";
    db.patch(json!({"spec": {"podTemplate": {"priorityClassName": missing_class}}}))?;
    let refused = db.not_ready_for("PodNotCreated").await?;
    assert!(refused.contains(&format!("no PriorityClass with name {missing_class}")), "{refused}");
    assert!(db.events("PodNotCreated").await? >= 1, "a PodNotCreated Event");
    assert_eq!(db.members().await?.len(), 3, "etcd still has three members");
    db.patch(json!({"spec": {"podTemplate": {"priorityClassName": PRIORITY_CLASS}}}))?;
    db.wait_converged(3, CONVERGE).await?;
    assert_eq!(claim_uids(claims.list(&ListParams::default()).await?.items), claims_before, "no claim replaced");
    // The class is cluster-wide: leave the user's cluster as it was (a failed run keeps it,
    // with the namespace, for a look).
    k8s.kubectl(&["delete", "priorityclass", PRIORITY_CLASS, "--ignore-not-found"])?;
    ev.pass(json!({"node": node}));
    db.ns.pass();
    Ok(())
}

/// Criteria: L5.auto-tuning (etcd's backend quota follows the volume it is given — 80% of
/// spec.storage.size; and when the workload leaves most of the database free — 32 MiB
/// written, deleted and compacted — the operator defragments every member on its own
/// (Defragment Events) and the database shrinks back to what is in use (at least 90%, the
/// threshold asked for), measured).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_defragments_members_once_space_is_freed() -> TestResult {
    let ev = evidence("etcd_defragments_members_once_space_is_freed", &["L5.auto-tuning"]).await?;
    let defrag = json!({"defragmentation": {"thresholdPercent": 10, "minDbSize": "1Mi"}});
    let db = Etcd::create("etcd-defrag", "etcd", 3, defrag, &[]).await?;
    let pods = db.pods().await?;
    let member_endpoints: Vec<(String, String)> = pods
        .iter()
        .map(|(name, p)| {
            Ok((name.clone(), format!("http://{}:2379", p.ip.clone().ok_or(format!("{name} has no IP"))?)))
        })
        .collect::<Result<_, Error>>()?;
    // Each member's own status (not the operator's): database size, bytes in use, quota.
    let member_sizes = || async {
        let mut sizes = BTreeMap::new();
        for (name, endpoint) in &member_endpoints {
            let st = connect(endpoint).await?.status().await.ok()?;
            sizes.insert(name.clone(), (st.db_size(), st.raft_used_db_size(), st.db_size_quota()));
        }
        Some(sizes)
    };
    let sizes = wait_until(Duration::from_secs(60), "every member's status", member_sizes).await?;
    for (name, (_, _, quota)) in &sizes {
        let quota = match *quota {
            0 => member_quota_metric(&pods[name]).await.ok_or(format!("{name}: no quota in status or metrics"))?,
            q => q,
        };
        assert_eq!(quota, 1024 * 1024 * 1024 / 10 * 8, "{name}: quota 80% of the 1Gi volume");
    }

    // 4 MiB that stay, so that the defragmented files are mostly data (a nearly empty
    // bbolt file is mostly bookkeeping), and 32 MiB that go.
    let mut c = db.client().await?;
    let blob: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    for i in 0..4 {
        c.put(format!("keep/{i}"), blob.clone(), None).await?;
    }
    for i in 0..32 {
        c.put(format!("blob/{i}"), blob.clone(), None).await?;
    }
    c.delete("blob/", Some(DeleteOptions::new().with_prefix())).await?;
    let revision = c.get("blob/", None).await?.header().map_or(0, |h| h.revision());
    // Before the compaction every member's file holds the history of the 32 MiB: a
    // defragmentation the filling may have caused cannot have shrunk it.
    let peak = wait_until(Duration::from_secs(60), "every member's database holding the values", || async {
        member_sizes().await.filter(|sizes| sizes.values().all(|(size, _, _)| *size > 16 << 20))
    })
    .await?;
    let defrags_before = db.events("Defragment").await?;
    c.compact(revision, Some(CompactionOptions::new().with_physical())).await?;
    let compacted = Instant::now();
    // A member reports the space a compaction freed only after its next write, so the
    // client keeps writing a small key, as any live workload does.
    let after = wait_until(Duration::from_secs(300), "every member defragmented", || async {
        c.clone().put("tick", unix_now().to_string(), None).await.ok()?;
        let sizes = member_sizes().await?;
        let shrunk = sizes.iter().all(|(name, (size, used, _))| {
            let before = peak.get(name).map_or(0, |p| p.0);
            *size < before / 2 && (*used as f64) >= 0.9 * *size as f64
        });
        let events = db.events("Defragment").await.ok()?;
        (shrunk && events > defrags_before).then_some((sizes, events - defrags_before))
    })
    .await?;
    let took = compacted.elapsed();
    let (sizes, events) = after;
    // The operator's status shows it too.
    let s = wait_until(Duration::from_secs(60), "status shows the smaller databases", || async {
        let s = db.status().await.ok()?;
        s.members
            .iter()
            .all(|m| match (m.db_size, m.db_size_in_use, peak.get(&m.name)) {
                (Some(size), Some(used), Some(before)) => size < before.0 / 2 && used as f64 >= 0.9 * size as f64,
                _ => false,
            })
            .then_some(s)
    })
    .await?;
    assert!(c.get("keep/3", None).await?.kvs().first().is_some_and(|kv| kv.value() == blob), "data kept");
    eprintln!("defragmented {events} time(s) in {took:?}: before {peak:?}, after {sizes:?}; status {:?}", s.members);
    let before_total: i64 = peak.values().map(|v| v.0).sum();
    let after_total: i64 = sizes.values().map(|v| v.0).sum();
    append_result(
        "etcd-defragmentation.jsonl",
        json!({
            "test": "etcd_defragments_members_once_space_is_freed",
            "method": "spec.defragmentation {thresholdPercent: 10, minDbSize: 1Mi} on 3 members; put 4 x 1 MiB values that stay and 32 x 1 MiB values, delete the 32, compact physically, then put one small key every poll (about every 500 ms); time from the compaction until every member's own status (Maintenance.Status: dbSize, dbSizeInUse) shows a database under half its size before and at least 90% in use, with a new Defragment Event",
            "defragment_seconds": took.as_secs_f64(), "defragment_events": events,
            "db_bytes_before": before_total, "db_bytes_after": after_total, "unix_time": unix_now(),
        }),
    );
    ev.pass(json!({"defragment_seconds": took.as_secs_f64(), "db_bytes_before": before_total, "db_bytes_after": after_total}));
    db.ns.pass();
    Ok(())
}

/// What a fault scenario strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// The member etcd reports as its leader.
    Leader,
    /// A member that is not the leader.
    Follower,
    /// The operator pod holding the operator's leader Lease.
    OperatorLeader,
}

/// How long a fault on a member lasts: ten times etcd's election timeout (1 s, the default
/// the operator keeps).
const MEMBER_FAULT: Duration = Duration::from_secs(10);

/// How long the paused operator leader stays paused once the standby holds its Lease (which
/// takes the Lease's duration and a retry period or two): long enough for the standby to
/// have made a pass over the cluster, and short: the paused pod's liveness probe (every
/// 10 s, killed after 3 failures) must not kill it before it is resumed. Whether it did is
/// recorded (`liveness_killed`).
const AFTER_TAKEOVER: Duration = Duration::from_secs(2);

/// The operator's container in its pod, as `statecraft_shared::deploy::deployment` names it.
const OPERATOR_CONTAINER: &str = "operator";

/// What a run samples in the background from its start: each member's answer to "who is
/// your leader" (its own Maintenance.Status, asked by pod IP every 100 ms, so that a member
/// that is cut off or paused cannot hide behind the client Service), and every 500 ms the
/// holder of the operator's Lease and whether the EtcdCluster is Ready. Only changes are
/// kept, each with when it was first seen.
#[derive(Debug, Default)]
struct Observations {
    /// (when, member, its leader's id: `Some(0)` when it knows none, None when it did not
    /// answer within 1 s).
    leaders: Vec<(Instant, String, Option<u64>)>,
    /// (when, holder of the operator's Lease).
    holders: Vec<(Instant, Option<String>)>,
    /// (when, Ready for its generation).
    ready: Vec<(Instant, bool)>,
}

impl Observations {
    /// When a member other than `faulted` first named a leader other than `old` after
    /// `from`, and which.
    fn new_leader_after(&self, from: Instant, old: u64, faulted: &str) -> Option<(Instant, u64)> {
        self.leaders
            .iter()
            .filter(|(at, member, _)| *at >= from && member != faulted)
            .find_map(|(at, _, leader)| leader.filter(|id| *id != 0 && *id != old).map(|id| (*at, id)))
    }

    /// The Lease's holders in the order they held it (repeats and gaps left out).
    fn holder_sequence(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for holder in self.holders.iter().filter_map(|(_, h)| h.clone()) {
            if out.last() != Some(&holder) {
                out.push(holder);
            }
        }
        out
    }
}

/// The background sampler of [`Observations`].
struct Watch {
    seen: Arc<Mutex<Observations>>,
    stop: StopFlag,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watch {
    /// Starts sampling `db`, whose member pods are `pods`.
    fn start(db: &EtcdRef, pods: &BTreeMap<String, PodInfo>) -> Watch {
        let seen = Arc::new(Mutex::new(Observations::default()));
        let stop = StopFlag::default();
        let mut tasks = Vec::new();
        for (name, ip) in pods.iter().filter_map(|(name, p)| Some((name.clone(), p.ip.clone()?))) {
            let (seen, stop, endpoint) = (seen.clone(), stop.clone(), format!("http://{ip}:2379"));
            tasks.push(tokio::spawn(async move {
                let mut client: Option<Client> = None;
                let mut last = None;
                while !stop.is_set() {
                    if client.is_none() {
                        client = connect(&endpoint).await;
                    }
                    let leader = match client.as_mut() {
                        Some(c) => match tokio::time::timeout(Duration::from_secs(1), c.status()).await {
                            Ok(Ok(s)) => Some(s.leader()),
                            _ => None,
                        },
                        None => None,
                    };
                    if leader.is_none() {
                        client = None;
                    }
                    if last != Some(leader) {
                        last = Some(leader);
                        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                        seen.leaders.push((Instant::now(), name.clone(), leader));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }));
        }
        let (db, seen_kube, stop_kube) = (db.clone(), seen.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let (mut holder, mut ready) = (None, None);
            while !stop_kube.is_set() {
                let now = Instant::now();
                if let Ok(lease) = operator::lease(&db.cluster, &db.namespace, EtcdOperator::NAME).await
                    && holder.as_ref() != Some(&lease.holder)
                {
                    holder = Some(lease.holder.clone());
                    seen_kube.lock().unwrap_or_else(|e| e.into_inner()).holders.push((now, lease.holder));
                }
                if let Ok(c) = db.api.get(db.name()).await
                    && ready != Some(ready_for_generation(&c))
                {
                    ready = Some(ready_for_generation(&c));
                    seen_kube.lock().unwrap_or_else(|e| e.into_inner()).ready.push((now, ready_for_generation(&c)));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }));
        Watch { seen, stop, tasks }
    }

    /// Stops sampling; returns what was seen.
    async fn stop(self) -> Result<Observations, tokio::task::JoinError> {
        self.stop.set();
        for task in self.tasks {
            task.await?;
        }
        Ok(std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner())))
    }
}

/// The longest time between two acknowledgements of writes (an answered put, a cas that swapped)
/// that ends after `from` (nanoseconds of the history), by when they were acknowledged.
fn write_gap(ops: &[Op], from: u64) -> Duration {
    let mut acked: Vec<u64> = ops.iter().filter(|op| acknowledged_write(op)).map(|op| op.ret).collect();
    acked.sort_unstable();
    acked.windows(2).filter(|w| w[1] > from).map(|w| Duration::from_nanos(w[1] - w[0])).max().unwrap_or_default()
}

/// Whether `op` is a write etcd acknowledged.
fn acknowledged_write(op: &Op) -> bool {
    op.outcome == Outcome::Ok && (op.kind == Kind::Put || op.swapped == Some(true))
}

impl EtcdRef {
    /// Every member's HashKV (etcd's hash of its key-value history, and the compaction
    /// revision it starts from) at one revision: the cluster's current one, read
    /// linearizably through the client Service; each member is asked by pod IP, retried for
    /// a minute until it has applied that revision. Equal hashes mean the members hold the
    /// same keys, values and history. Returns the revision and the hashes by member.
    async fn member_hashes(&self) -> Result<(i64, BTreeMap<String, (u32, i64)>), Error> {
        let revision = self.client().await?.get("lin/", None).await?.header().map_or(0, |h| h.revision());
        let mut hashes = BTreeMap::new();
        for (name, pod) in self.pods().await? {
            let endpoint = format!("http://{}:2379", pod.ip.ok_or(format!("{name} has no IP"))?);
            let what = format!("{name}'s HashKV at revision {revision}");
            let hash = wait_until(Duration::from_secs(60), &what, || async {
                let r = connect(&endpoint).await?.hash_kv(revision).await.ok()?;
                Some((r.hash(), r.compact_version()))
            })
            .await?;
            hashes.insert(name, hash);
        }
        Ok((revision, hashes))
    }

    /// How many times container `container` of pod `pod` has restarted.
    async fn restarts(&self, pod: &str, container: &str) -> Result<i32, kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.namespace);
        let status = api.get(pod).await?.status.unwrap_or_default();
        Ok(status
            .container_statuses
            .unwrap_or_default()
            .iter()
            .find(|c| c.name == container)
            .map_or(0, |c| c.restart_count))
    }
}

/// What the operator leader paused past its Lease did once resumed.
#[derive(Debug)]
struct Resumed {
    /// From the resume until its container was seen restarted (the runner exits when the
    /// Lease is lost, so that only one replica acts; the kubelet restarts it).
    restarted_after: Duration,
    /// From the resume until it logged the loss of leadership (by the log's timestamps).
    lost_after: Option<Duration>,
    /// What its process logged after the resume (`kubectl logs --previous`): time, level
    /// and message of each line.
    messages: Vec<String>,
    /// Events it reported (`reportingInstance`) after the resume: reason and note.
    events: Vec<String>,
    /// Whether the kubelet killed the paused container for a failed liveness probe.
    liveness_killed: bool,
}

/// Follows the operator pod `pod`, paused past its Lease and resumed at `resumed` (and
/// `resumed_at` by the API server's clock), until its container has restarted (up to the
/// kubelet's longest restart back-off); reads what its process logged after the resume and the Events it reported.
async fn follow_resumed_operator(
    db: &EtcdRef,
    pod: &str,
    restarts_before: i32,
    resumed: Instant,
    resumed_at: k8s_openapi::jiff::Timestamp,
) -> Result<Resumed, Error> {
    let what = format!("the resumed operator {pod} stepping down (its container restarting)");
    // The kubelet restarts a container that exits again and again after a growing back-off
    // (10 s, doubling, at most 5 min): each run of a scenario makes one of the two operator
    // pods exit, so later runs wait longer for the restart.
    wait_until(Duration::from_secs(330), &what, || async {
        (db.restarts(pod, OPERATOR_CONTAINER).await.ok()? > restarts_before).then_some(())
    })
    .await?;
    let restarted_after = resumed.elapsed();
    // JSON lines (`--log-format json`, the default): a timestamp and fields.message.
    let log = db.kubectl(&["logs", pod, "-c", OPERATOR_CONTAINER, "--previous"])?;
    let lines: Vec<(k8s_openapi::jiff::Timestamp, String)> = log
        .lines()
        .filter_map(|line| {
            let l: serde_json::Value = serde_json::from_str(line).ok()?;
            let at: k8s_openapi::jiff::Timestamp = l["timestamp"].as_str()?.parse().ok()?;
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            Some((at, format!("{at} {} {}", text(&l["level"]), text(&l["fields"]["message"]))))
        })
        .filter(|(at, _)| *at >= resumed_at)
        .collect();
    let lost_after = lines
        .iter()
        .find(|(_, m)| m.contains("leadership lost"))
        .and_then(|(at, _)| Duration::try_from(at.duration_since(resumed_at)).ok());
    let messages = lines.into_iter().map(|(_, m)| m).collect();
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(db.cluster.client.clone(), &db.namespace);
    let all = api.list(&ListParams::default()).await?.items;
    let events = all
        .iter()
        .filter(|e| e.reporting_instance.as_deref() == Some(pod))
        .filter(|e| {
            let last = e.series.as_ref().map(|s| s.last_observed_time.0).or(e.event_time.as_ref().map(|t| t.0));
            last.is_some_and(|t| t >= resumed_at)
        })
        .map(|e| format!("{}: {}", e.reason.clone().unwrap_or_default(), e.note.clone().unwrap_or_default()))
        .collect();
    let liveness_killed = all.iter().any(|e| {
        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
            && e.reason.as_deref() == Some("Killing")
            && e.note.as_deref().is_some_and(|n| n.contains("liveness"))
    });
    Ok(Resumed { restarted_after, lost_after, messages, events, liveness_killed })
}

/// One fault scenario, [`fault_runs`] times on one 3-member cluster. Each run has
/// [`LIN_CLIENTS`] clients ([`lin_client`], on keys of their own) through the client
/// Service and a [`Watch`]; after 5 s `inject` strikes `target`, given its pod and the other
/// members' pod IPs; the fault lasts [`MEMBER_FAULT`] (for the operator: until the standby
/// holds the Lease, then [`AFTER_TAKEOVER`]) and ends; once the cluster has converged
/// again, the clients run 5 s more. Checked every run: porcupine finds the history
/// linearizable; writes were acknowledged while the fault lasted (the members left keep
/// quorum) and after it; etcd's membership (member ids) is the one before; every member
/// has the same HashKV at a common revision; when the leader was struck, another member
/// was elected; when the operator was, see [`check_resumed_operator`]. Figures go to
/// `results/e2e/etcd-faults.jsonl`.
async fn fault_scenario<F: Fault>(
    test: &str,
    method: &str,
    target: Target,
    inject: impl Fn(&faults::PodInfo, &[String]) -> Result<F, E2eError>,
) -> TestResult {
    let db = Etcd::create("etcd-fault", "etcd", 3, json!({}), &[]).await?;
    let endpoint = db.endpoint().await?;
    for run in 0..fault_runs() {
        let history = History::new();
        let stop = StopFlag::default();
        let keys = lin_keys(&format!("lin/{run}/"));
        let clients: Vec<_> = (0..LIN_CLIENTS)
            .map(|id| tokio::spawn(lin_client(id, endpoint.clone(), keys.clone(), history.clone(), stop.clone())))
            .collect();
        let pods = db.pods().await?;
        let watch = Watch::start(&db, &pods);
        tokio::time::sleep(Duration::from_secs(5)).await;

        let leader = db.leader_name().await?;
        let ids: BTreeMap<u64, String> =
            db.status().await?.members.iter().filter_map(|m| Some((hex_id(&m.id)?, m.name.clone()))).collect();
        let leader_id = ids.iter().find(|(_, name)| **name == leader).map(|(id, _)| *id).ok_or("no leader id")?;
        let members_before: BTreeSet<u64> = db.members().await?.iter().map(|m| m.id).collect();
        let lease_before = operator::lease(&db.cluster, &db.namespace, EtcdOperator::NAME).await?;
        let faulted = match target {
            Target::Leader => leader.clone(),
            Target::Follower => pods.keys().find(|m| **m != leader).cloned().ok_or("no follower")?,
            Target::OperatorLeader => lease_before.holder.clone().ok_or("no operator pod holds the Lease")?,
        };
        let peers: Vec<String> =
            pods.iter().filter(|(name, _)| **name != faulted).filter_map(|(_, p)| p.ip.clone()).collect();
        let pod = faults::PodInfo::get(&db.cluster, &db.namespace, &faulted)?;
        let operator_restarts = match target {
            Target::OperatorLeader => db.restarts(&faulted, OPERATOR_CONTAINER).await?,
            _ => 0,
        };

        let started = Instant::now();
        let fault = inject(&pod, &peers)?;
        let takeover = match target {
            Target::OperatorLeader => {
                let standby =
                    wait_until(Duration::from_secs(60), "the standby holding the operator's Lease", || async {
                        operator::lease(&db.cluster, &db.namespace, EtcdOperator::NAME)
                            .await
                            .ok()?
                            .holder
                            .filter(|h| *h != faulted)
                    })
                    .await?;
                let took = started.elapsed();
                tokio::time::sleep(AFTER_TAKEOVER).await;
                Some((standby, took))
            }
            _ => {
                tokio::time::sleep(MEMBER_FAULT).await;
                None
            }
        };
        let (ended, ended_at) = (Instant::now(), k8s_openapi::jiff::Timestamp::now());
        fault.end()?;
        db.wait_converged(3, CONVERGE).await?;
        let converged = ended.elapsed();
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop.set();
        for c in clients {
            c.await?;
        }
        let seen = watch.stop().await?;

        let resumed = match target {
            Target::OperatorLeader => {
                Some(follow_resumed_operator(&db, &faulted, operator_restarts, ended, ended_at).await?)
            }
            _ => None,
        };
        let leader_after = db.leader_name().await?;
        let members_after: BTreeSet<u64> = db.members().await?.iter().map(|m| m.id).collect();
        let lease_after = operator::lease(&db.cluster, &db.namespace, EtcdOperator::NAME).await?;
        let (revision, hashes) = db.member_hashes().await?;
        let hashes_agree = hashes.values().collect::<BTreeSet<_>>().len() == 1;
        let ops = history.ops();
        let (ok, _, unknown) = history.counts();
        let (from, until) = (history.nanos(started), history.nanos(ended));
        let written =
            |lo: u64, hi: u64| ops.iter().filter(|op| acknowledged_write(op) && op.call >= lo && op.ret <= hi).count();
        let (during, after) = (written(from, until), written(until, u64::MAX));
        let gap = write_gap(&ops, from);
        let election = seen.new_leader_after(started, leader_id, &faulted);
        let election_seconds = election.map(|(at, _)| at.duration_since(started).as_secs_f64());
        let elected = election.and_then(|(_, id)| ids.get(&id).cloned());
        let ready_throughout = seen.ready.iter().all(|(_, ready)| *ready);
        let holders = seen.holder_sequence();
        let verdict = history.check(&format!("{test}-run{run}"))?;
        eprintln!(
            "{test} run {run}: {faulted} struck; elected {elected:?} after {election_seconds:?} s; leader after {leader_after}; converged {converged:?} after the fault; writes unavailable {gap:?}; {during} writes acknowledged during the fault, {after} after; Lease holders {holders:?}; Ready throughout {ready_throughout}; hashes at {revision}: {hashes:?}; resumed operator {resumed:?}; {verdict}"
        );
        let mut record = json!({
            "test": test, "method": method, "run": run,
            "faulted": faulted, "leader_before": leader, "leader_elected": elected, "leader_after": leader_after,
            "election_seconds": election_seconds,
            "write_unavailable_seconds": gap.as_secs_f64(),
            "converged_after_fault_seconds": converged.as_secs_f64(),
            "acknowledged_writes_during_fault": during, "acknowledged_writes_after_fault": after,
            "operations": ops.len(), "answered": ok, "unknown": unknown,
            "linearizable": verdict.is_linearizable(), "verdict": format!("{:?}", verdict.verdict),
            "check_seconds": verdict.check_seconds, "history": verdict.history.display().to_string(),
            "members_compared": hashes.len(), "members_equal": hashes_agree, "hash_revision": revision,
            "membership_unchanged": members_after == members_before,
            "ready_throughout": ready_throughout, "lease_holders": holders,
            "lease_transitions": lease_after.transitions - lease_before.transitions,
            "unix_time": unix_now(),
        });
        if let (Some(r), Some((standby, took)), Some(z)) = (record.as_object_mut(), &takeover, &resumed) {
            r.extend([
                ("operator_leader_after".to_string(), json!(standby)),
                ("lease_takeover_seconds".to_string(), json!(took.as_secs_f64())),
                ("paused_seconds".to_string(), json!(ended.duration_since(started).as_secs_f64())),
                ("lease_duration_seconds".to_string(), json!(lease_before.duration_seconds)),
                ("lost_leadership_after_resume_seconds".to_string(), json!(z.lost_after.map(|d| d.as_secs_f64()))),
                ("restarted_after_resume_seconds".to_string(), json!(z.restarted_after.as_secs_f64())),
                ("resumed_log".to_string(), json!(z.messages)),
                ("resumed_events".to_string(), json!(z.events)),
                ("liveness_killed".to_string(), json!(z.liveness_killed)),
            ]);
        }
        append_result("etcd-faults.jsonl", record);

        assert!(verdict.is_linearizable(), "run {run}: {verdict}");
        assert!(hashes_agree && hashes.len() == 3, "run {run}: members differ at revision {revision}: {hashes:?}");
        assert_eq!(members_after, members_before, "run {run}: etcd's membership changed");
        assert!(during > 0, "run {run}: no write acknowledged while {faulted} was struck (a quorum was left)");
        assert!(after > 0, "run {run}: no write acknowledged after the fault ended");
        if target == Target::Leader {
            let elected = elected.ok_or(format!("run {run}: no new leader elected while {faulted} was struck"))?;
            assert_ne!(elected, faulted, "run {run}");
        }
        if let (Some((standby, _)), Some(resumed)) = (takeover, resumed) {
            check_resumed_operator(run, &faulted, &standby, &seen, &resumed, lease_after.holder.as_deref());
        }
    }
    db.ns.pass();
    Ok(())
}

/// The checks of an operator leader paused past its Lease, then resumed: the standby took
/// the Lease and kept it (the holders were exactly the old leader, then the standby); the
/// cluster stayed Ready; the resumed process stepped down — its log says it lost
/// leadership — and did nothing else after the resume: it logged no membership step and
/// started no membership task (a reconcile that reaches `ensure_task` has applied the
/// cluster's objects and written its status first), and reported no Event.
fn check_resumed_operator(
    run: usize,
    old: &str,
    standby: &str,
    seen: &Observations,
    resumed: &Resumed,
    holder_after: Option<&str>,
) {
    assert_eq!(seen.holder_sequence(), [old, standby], "run {run}: Lease holders");
    assert_eq!(holder_after, Some(standby), "run {run}: the standby still holds the Lease");
    assert!(seen.ready.iter().all(|(_, ready)| *ready), "run {run}: Ready throughout: {:?}", seen.ready);
    let lost = resumed.messages.iter().any(|m| m.contains("leadership lost"));
    assert!(lost, "run {run}: {old} logged no loss of leadership after the resume: {:?}", resumed.messages);
    let acted: Vec<&String> = resumed
        .messages
        .iter()
        .filter(|m| m.contains("membership step") || m.contains("membership task started"))
        .collect();
    assert!(
        acted.is_empty(),
        "run {run}: {old} acted after the resume: {acted:?}; its log since: {:?}",
        resumed.messages
    );
    assert!(resumed.events.is_empty(), "run {run}: {old} reported Events after the resume: {:?}", resumed.events);
}

/// Fault: the etcd leader's pod is cut off from the other two members (iptables DROP of
/// their pod IPs, both ways, in the leader's network namespace) for 10 s, then healed,
/// while 4 clients do puts, linearizable gets and compare-and-swaps through the client
/// Service (which may still send them to the cut-off leader: only the members are
/// partitioned). The two others elect a leader among themselves and keep serving; the old
/// leader, without a quorum, steps down (etcd's check-quorum) and rejoins as a follower
/// once healed. Checked: the history is linearizable (porcupine), a new leader was
/// elected, writes were acknowledged during and after the partition, membership
/// unchanged, every member's HashKV equal at a common revision. Measured: time to the new
/// leader, longest write gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local cluster (faults act on host network namespaces): make cluster-up"]
async fn etcd_fault_leader_partitioned_from_its_peers() -> TestResult {
    fault_scenario(
        "etcd_fault_leader_partitioned_from_its_peers",
        "iptables DROP of the two other members' pod IPs (INPUT and OUTPUT) in the leader's network namespace for 10 s, then removed, while 4 clients (random put / linearizable get / cas on 3 keys, 3 s timeout, then unknown outcome and a new connection) run through the client Service; election_seconds: from the cut until a member other than the old leader names another leader (each member's Maintenance.Status by pod IP, every 100 ms); write_unavailable_seconds: longest time between two acknowledgements of writes (put answered, cas swapped) ending after the cut; history checked with porcupine; every member's HashKV compared at the current revision",
        Target::Leader,
        Partition::start,
    )
    .await
}

/// Fault: a follower's etcd processes are paused (SIGSTOP) for 10 s, then resumed
/// (SIGCONT), while 4 clients run through the client Service (clients connected to it
/// time out and reconnect). The leader and the other follower keep a quorum; no election
/// is needed; the resumed follower catches up. Checked: the history is linearizable,
/// writes were acknowledged during and after the pause, membership unchanged, every
/// member's HashKV equal at a common revision. Measured: longest write gap, any election.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local cluster (faults act on host processes): make cluster-up"]
async fn etcd_fault_follower_paused_then_resumed() -> TestResult {
    fault_scenario(
        "etcd_fault_follower_paused_then_resumed",
        "SIGSTOP of every process of a follower's etcd container for 10 s, then SIGCONT, while 4 clients (random put / linearizable get / cas on 3 keys, 3 s timeout) run through the client Service; election_seconds: from the pause until a member names a leader other than the one before (none expected); write_unavailable_seconds: longest time between two acknowledgements of writes ending after the pause; history checked with porcupine; every member's HashKV compared at the current revision",
        Target::Follower,
        |pod, _| Pause::start(pod, CONTAINER),
    )
    .await
}

/// Fault: the etcd leader's processes are paused (SIGSTOP) for 10 s, then resumed
/// (SIGCONT), while 4 clients run through the client Service. The followers stop hearing
/// from it and elect a new leader; the resumed old leader, still believing it leads, hears
/// of the higher term and becomes a follower: nothing it had not committed before the pause
/// is acknowledged. Checked: the history is linearizable, a new leader was elected, writes
/// were acknowledged during and after the pause, membership unchanged, every member's
/// HashKV equal at a common revision. Measured: time to the new leader, longest write gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local cluster (faults act on host processes): make cluster-up"]
async fn etcd_fault_leader_paused_then_resumed() -> TestResult {
    fault_scenario(
        "etcd_fault_leader_paused_then_resumed",
        "SIGSTOP of every process of the leader's etcd container for 10 s, then SIGCONT, while 4 clients (random put / linearizable get / cas on 3 keys, 3 s timeout) run through the client Service; election_seconds: from the pause until a member other than the old leader names another leader (Maintenance.Status by pod IP, every 100 ms); write_unavailable_seconds: longest time between two acknowledgements of writes ending after the pause; history checked with porcupine; every member's HashKV compared at the current revision",
        Target::Leader,
        |pod, _| Pause::start(pod, CONTAINER),
    )
    .await
}

/// Fault: the operator pod holding the Lease is paused (SIGSTOP) until the standby holds
/// the Lease (once it has expired) and 2 s more, then resumed (SIGCONT), while 4 clients
/// run through the client Service. The resumed process wakes with its tasks mid-way and a
/// Lease it no longer holds: it must not act on the cluster. Checked: the history is
/// linearizable; the cluster stayed Ready; the Lease went from the old leader to the
/// standby and stayed there (holders sampled every 500 ms); the resumed process logged the
/// loss of leadership and exited (its container restarted), with no membership step and no
/// membership task started in its log and no Event reported by it after the resume (a
/// cluster at rest gives it nothing else to do: a pass cut in two by the pause, acting on
/// what it saw before, is not forced); etcd's membership unchanged; every
/// member's HashKV equal at a common revision. Measured: Lease takeover time, the time the
/// resumed process took to step down, the write gap (the operator is not on the data path).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local cluster (faults act on host processes): make cluster-up"]
async fn etcd_fault_operator_leader_paused_past_its_lease() -> TestResult {
    fault_scenario(
        "etcd_fault_operator_leader_paused_past_its_lease",
        "SIGSTOP of the operator pod holding the Lease statecraft-etcd (the operator's default timing; lease_duration_seconds as the Lease gives it) until the standby holds it, then 2 s more, then SIGCONT, while 4 clients (random put / linearizable get / cas on 3 keys, 3 s timeout) run through the client Service; Lease holder and the EtcdCluster's Ready sampled every 500 ms through the API; the resumed pod followed until its container restarts, its previous log and the Events it reported read for anything after the resume; history checked with porcupine; every member's HashKV compared at the current revision",
        Target::OperatorLeader,
        |pod, _| Pause::start(pod, OPERATOR_CONTAINER),
    )
    .await
}

/// `spec.networkPolicy` on a cluster that enforces it (the local cluster): the members form
/// the cluster and the operator runs it under the policy; a pod the policy names writes
/// through the client Service with `etcdctl`, a pod it does not name is refused, and neither
/// reads the metrics port when the policy names no scraper.
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn etcd_network_policy_lets_in_only_the_named_clients() -> TestResult {
    let access =
        json!({"networkPolicy": {"clients": [{"podSelector": {"matchLabels": {"role": "app"}}}], "metrics": []}});
    let db = Etcd::create("etcd-netpol", "etcd", 3, access, &[]).await?;
    let tools = statecraft_e2e::images::image("TOOLS_IMAGE").ok_or("TOOLS_IMAGE missing from images.env")?;
    for (pod, role) in [("app", "app"), ("stranger", "other")] {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "labels": {"role": role}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "main", "image": tools,
                "imagePullPolicy": "IfNotPresent", "command": ["sleep", "infinity"]}]}
        });
        db.apply(&pod)?;
    }
    db.kubectl(&["wait", "--for=condition=Ready", "pod/app", "pod/stranger", "--timeout=120s"])?;
    let service = format!("http://{}.{}.svc:2379", db.names.client_service(), db.namespace);
    let put = |pod: &str| {
        let script =
            format!("etcdctl --endpoints={service} --dial-timeout=2s --command-timeout=3s put netpol/{pod} ok");
        db.kubectl(&["exec", pod, "--", "sh", "-c", &script]).is_ok()
    };
    let member = db.kubectl(&["get", "pod", "etcd-1", "-o", "jsonpath={.status.podIP}"])?;
    let metrics = |pod: &str| {
        let script = format!("curl -sf -m 2 http://{member}:2381/metrics | grep -q '^etcd_server_has_leader 1'");
        db.kubectl(&["exec", pod, "--", "sh", "-c", &script]).is_ok()
    };
    assert!(put("app"), "the named client writes through the client Service");
    assert!(!put("stranger"), "a pod the policy does not name is refused");
    assert!(!metrics("app") && !metrics("stranger"), "no scraper named: nobody but the operator reads the metrics");
    let status = db.status().await?;
    assert!(healthy_voters(&status, 3), "the members and the operator work under the policy: {status:?}");
    let mut client = db.client().await?;
    let stored = client.get("netpol/app", None).await?;
    assert_eq!(stored.kvs().first().map(|kv| kv.value().to_vec()), Some(b"ok".to_vec()));
    assert!(client.get("netpol/stranger", None).await?.kvs().is_empty());
    db.ns.pass();
    Ok(())
}
