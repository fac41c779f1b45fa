//! A harness that plays Kubernetes for the membership task, over real etcd processes on
//! loopback.
//!
//! A "pod" is an etcd process; a "volume" (claim) is its data directory. Like the
//! StatefulSet controller, the harness keeps one pod per ordinal below the replica count
//! and deletes the others; like the kubelet, it restarts a crashed process after a
//! back-off, with the ConfigMap as it is at that moment. The operator's Kubernetes side is
//! played the way the controller does it: the ConfigMap (`initial_cluster`) and the
//! StatefulSet's size (`statefulset_replicas`) are derived from each observation, and the
//! steps without an etcd side (pod restart, volume deletion, the rest of a replacement)
//! are done on the processes and directories.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use etcd_client::{Client, ConnectOptions, GetOptions};
use statecraft_etcd::membership::dataplane::{self, DataPlaneError, Gathered};
use statecraft_etcd::membership::plan::{self, Addressing, Desired, InitialCluster, Memory, Step};
use statecraft_etcd::membership::{Observed, PodState};
use statecraft_shared::reason::{Common, Reason};
use tokio::net::TcpSocket;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Ordinals the harness has addresses for.
pub const MAX_MEMBERS: u32 = 7;
/// First kubelet restart back-off (Kubernetes: 10 s, doubling to 5 min).
const BACKOFF: Duration = Duration::from_secs(4);
const MAX_BACKOFF: Duration = Duration::from_secs(16);

/// Tests run one at a time: each runs up to five etcd members on a small machine.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Loopback addresses: member `k` listens on its own two ports.
#[derive(Debug)]
pub struct Local {
    cluster: String,
    peer: Vec<u16>,
    client: Vec<u16>,
}

impl Addressing for Local {
    fn member_name(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}", self.cluster)
    }
    fn peer_url(&self, ordinal: u32) -> String {
        format!("http://127.0.0.1:{}", self.peer[ordinal as usize])
    }
    fn client_url(&self, ordinal: u32) -> String {
        format!("http://127.0.0.1:{}", self.client[ordinal as usize])
    }
    fn ordinal_of_name(&self, name: &str) -> Option<u32> {
        name.strip_prefix(&self.cluster)?.strip_prefix('-')?.parse().ok()
    }
    fn ordinal_of_peer_url(&self, url: &str) -> Option<u32> {
        let port: u16 = url.strip_prefix("http://127.0.0.1:")?.parse().ok()?;
        self.peer.iter().position(|p| *p == port).map(|k| k as u32)
    }
}

/// A port bound (not listening: connections are refused at once) until the member that
/// owns it first starts, so that nothing else takes it meanwhile.
fn reserve() -> (u16, TcpSocket) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    (socket.local_addr().unwrap().port(), socket)
}

struct Pod {
    child: Option<Child>,
    created: DateTime<Utc>,
    restarts: i32,
    restart_at: Option<Instant>,
    backoff: Duration,
}

/// One step of the loop, with what the pass saw.
#[derive(Clone, Debug)]
pub struct Logged {
    /// The step planned.
    pub step: Step,
    /// The leader when it was planned.
    pub leader: Option<u64>,
    /// When it was planned.
    pub at: Instant,
}

/// A cluster of real etcd processes and the Kubernetes objects the harness plays.
pub struct Harness {
    pub addressing: Local,
    dir: tempfile::TempDir,
    etcd: PathBuf,
    token: String,
    extra_args: Vec<String>,
    config: Option<InitialCluster>,
    replicas: u32,
    pods: BTreeMap<u32, Pod>,
    reserved: BTreeMap<u16, TcpSocket>,
    /// Every step planned, in order.
    pub log: Vec<Logged>,
}

impl Harness {
    /// An empty "namespace": no pod, no volume, no ConfigMap. `extra_args` go to every
    /// etcd process.
    pub fn new(cluster: &str, extra_args: &[&str]) -> Harness {
        let etcd = statecraft_shared::testing::binary("etcd").unwrap();
        let dir = tempfile::Builder::new().prefix("statecraft-etcd-membership-").tempdir().unwrap();
        let mut reserved = BTreeMap::new();
        let mut ports = || {
            (0..MAX_MEMBERS)
                .map(|_| {
                    let (port, socket) = reserve();
                    reserved.insert(port, socket);
                    port
                })
                .collect::<Vec<u16>>()
        };
        let (peer, client) = (ports(), ports());
        Harness {
            addressing: Local { cluster: cluster.into(), peer, client },
            token: format!("{cluster}-{}", std::process::id()),
            dir,
            etcd,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            config: None,
            replicas: 0,
            pods: BTreeMap::new(),
            reserved,
            log: Vec::new(),
        }
    }

    fn data_dir(&self, k: u32) -> PathBuf {
        self.dir.path().join(format!("data-{k}"))
    }

    fn log_file(&self, k: u32) -> PathBuf {
        self.dir.path().join(format!("etcd-{k}.log"))
    }

    /// The last lines of member `k`'s log.
    pub fn log_tail(&self, k: u32) -> String {
        statecraft_shared::testing::log_tail(&self.log_file(k), 15)
    }

    /// Client URLs of every ordinal that has a pod (the controller asks its pods).
    pub fn endpoints(&self) -> BTreeMap<u32, String> {
        self.pods.keys().map(|&k| (k, self.addressing.client_url(k))).collect()
    }

    /// Starts the etcd process of pod `k` with the ConfigMap as it is now.
    fn spawn(&mut self, k: u32) -> Option<Child> {
        let config = self.config.clone()?;
        let (peer, client) = (self.addressing.peer_url(k), self.addressing.client_url(k));
        for url in [&peer, &client] {
            let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
            self.reserved.remove(&port);
        }
        let data = self.data_dir(k);
        std::fs::DirBuilder::new().recursive(true).create(&data).unwrap();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_file(k)).unwrap();
        let name = self.addressing.member_name(k);
        let mut args: Vec<String> = [
            "--name",
            &name,
            "--data-dir",
            &data.to_string_lossy(),
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
            "--initial-cluster",
            &config.members,
            "--initial-cluster-state",
            config.state,
            "--initial-cluster-token",
            &self.token,
            // The tests are about membership, not durability: fsync only slows them down.
            "--unsafe-no-fsync",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.extra_args.iter().cloned());
        let child = Command::new(&self.etcd)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Some(child)
    }

    /// The StatefulSet controller and the kubelet: one pod per ordinal below the replica
    /// count (created with a volume), no other; crashed processes restarted after a
    /// back-off.
    async fn sync(&mut self) {
        let now = Instant::now();
        let gone: Vec<u32> = self.pods.keys().copied().filter(|k| *k >= self.replicas).collect();
        for k in gone {
            self.delete_pod(k).await;
        }
        for k in 0..self.replicas {
            if !self.pods.contains_key(&k) {
                let child = self.spawn(k);
                let restart_at = child.is_none().then_some(now);
                self.pods.insert(k, Pod { child, created: Utc::now(), restarts: 0, restart_at, backoff: BACKOFF });
            }
        }
        let ordinals: Vec<u32> = self.pods.keys().copied().collect();
        for k in ordinals {
            let pod = self.pods.get_mut(&k).unwrap();
            if let Some(child) = &mut pod.child
                && child.try_wait().unwrap().is_some()
            {
                pod.child = None;
                pod.restarts += 1;
                pod.restart_at = Some(now + pod.backoff);
                pod.backoff = (pod.backoff * 2).min(MAX_BACKOFF);
            }
            if pod.child.is_none() && pod.restart_at.is_some_and(|at| at <= now) {
                let child = self.spawn(k);
                let pod = self.pods.get_mut(&k).unwrap();
                pod.restart_at = child.is_none().then_some(now);
                pod.child = child;
            }
        }
    }

    /// Deletes the pod of `k`, waiting for its process to end (the StatefulSet creates
    /// it again while `k` is below the replica count).
    pub async fn delete_pod(&mut self, k: u32) {
        if let Some(mut pod) = self.pods.remove(&k) {
            stop(&mut pod.child).await;
        }
    }

    /// The volume of `k` is lost: kill its process, empty its data directory, and let the
    /// container restart at once (its pod and ConfigMap unchanged).
    pub async fn wipe(&mut self, k: u32) {
        let pod = self.pods.get_mut(&k).unwrap();
        stop(&mut pod.child).await;
        pod.restarts += 1;
        pod.restart_at = Some(Instant::now());
        std::fs::remove_dir_all(self.data_dir(k)).unwrap();
        self.sync().await;
    }

    /// What a pass observes: etcd (through `gather`) and the pods and volumes.
    pub async fn observe(&mut self) -> Observed {
        let gathered = dataplane::gather(&self.addressing, &self.endpoints()).await;
        self.observed(gathered)
    }

    fn observed(&mut self, g: Gathered) -> Observed {
        let pods = self
            .pods
            .iter_mut()
            .map(|(k, p)| {
                let running = p.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none());
                let state = PodState {
                    name: format!("{}-{k}", self.addressing.cluster),
                    terminating: false,
                    running,
                    ready: running,
                    crash_looping: p.restarts > 0,
                    restarts: p.restarts,
                    // Local processes: nothing to schedule.
                    unplaceable: false,
                    created: Some(p.created),
                    image: None,
                    revision: None,
                };
                (*k, state)
            })
            .collect();
        let claims = (0..MAX_MEMBERS).filter(|k| self.data_dir(*k).exists()).collect();
        Observed {
            members: g.members,
            states: g.states,
            alarms: g.alarms,
            pods,
            claims,
            refused: BTreeSet::new(),
            statefulset_replicas: self.replicas,
            now: Utc::now(),
        }
    }

    /// One pass of the membership task: observe, remember, plan; derive the ConfigMap
    /// and the StatefulSet size from the observation; perform the step. The kubelet and
    /// StatefulSet controller act before and after. A step the data plane refuses or fails
    /// comes back as the wait the controller would report.
    pub async fn pass(&mut self, desired: &Desired, memory: &mut Memory) -> Step {
        self.sync().await;
        let observed = self.observe().await;
        plan::remember(memory, &observed);
        let step = plan::plan(desired, &observed, memory);
        if let Some(config) = plan::initial_cluster(&self.addressing, &observed) {
            self.config = Some(config);
        }
        self.replicas = plan::statefulset_replicas(&observed);
        let outcome = match self.apply(&step).await {
            Ok(()) => step.clone(),
            // A failure is the controller's `Error::DataPlane`, whose reason the Event gives.
            Err(e) => Step::Wait {
                reason: e.wait_reason().map_or(Common::DataPlaneError.into(), Reason::from),
                message: e.to_string(),
            },
        };
        self.log.push(Logged { step, leader: leader(&observed), at: Instant::now() });
        self.sync().await;
        outcome
    }

    /// The etcd side through `perform`, the rest on processes and directories.
    async fn apply(&mut self, step: &Step) -> Result<(), DataPlaneError> {
        dataplane::perform(&self.addressing, &self.endpoints(), step).await?;
        match step {
            Step::RestartPod { ordinal } => self.delete_pod(*ordinal).await,
            Step::DeleteStaleClaim { ordinal } => {
                assert!(!self.pods.contains_key(ordinal), "the volume of a pod is never deleted");
                std::fs::remove_dir_all(self.data_dir(*ordinal)).unwrap();
            }
            Step::Replace { ordinal, .. } => {
                self.delete_pod(*ordinal).await;
                std::fs::remove_dir_all(self.data_dir(*ordinal)).unwrap();
            }
            _ => {}
        }
        Ok(())
    }

    /// Passes until `Idle`, at most `limit`; the steps taken (waits included).
    pub async fn converge(&mut self, desired: &Desired, memory: &mut Memory, limit: Duration) -> Vec<Step> {
        let start = Instant::now();
        let mut steps = Vec::new();
        loop {
            let step = self.pass(desired, memory).await;
            if !step.is_wait() || steps.last() != Some(&step) {
                eprintln!("  [{:>5.1}s] {}: {}", start.elapsed().as_secs_f64(), step.reason(), step.message());
            }
            if step == Step::Idle {
                return steps;
            }
            steps.push(step.clone());
            if start.elapsed() > limit {
                let logs: Vec<String> =
                    self.pods.keys().map(|k| format!("--- member {k}:\n{}", self.log_tail(*k))).collect();
                panic!("no convergence within {limit:?}; last step {step:?}\n{}", logs.join("\n"));
            }
            let pause = if step.is_wait() { 300 } else { 100 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// A client of member `k` only.
    pub async fn client(&self, k: u32) -> Client {
        let options =
            ConnectOptions::new().with_connect_timeout(Duration::from_secs(2)).with_timeout(Duration::from_secs(5));
        Client::connect([self.addressing.client_url(k)], Some(options)).await.unwrap()
    }

    /// Asserts the membership is exactly `ordinals`, all voters, all answering, one leader.
    pub async fn assert_voters(&mut self, ordinals: &[u32]) -> Observed {
        let o = self.observe().await;
        let members = o.members.clone().expect("a member list");
        let mut got: Vec<u32> = members.iter().map(|m| m.ordinal.expect("only our members")).collect();
        got.sort();
        assert_eq!(got, ordinals, "{members:?}");
        for m in &members {
            assert!(!m.is_learner, "{m:?} is still a learner");
            assert!(o.states.contains_key(&m.id), "{m:?} does not answer");
        }
        assert!(leader(&o).is_some(), "no leader");
        o
    }
}

/// Kills a process and waits for it to end, so that its ports and data are free.
async fn stop(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.start_kill();
        let _ = c.wait().await;
    }
}

/// The leader, as the answering members report it.
pub fn leader(o: &Observed) -> Option<u64> {
    o.states.values().filter(|s| s.leader != 0).max_by_key(|s| s.raft_term).map(|s| s.leader)
}

/// The member id of ordinal `k` in an observation.
pub fn id_of(o: &Observed, k: u32) -> u64 {
    o.members.as_ref().unwrap().iter().find(|m| m.ordinal == Some(k)).unwrap().id
}

/// Desired state with auto-heal after `replace_after` and no defragmentation.
pub fn desired(replicas: u32, replace_after: Duration) -> Desired {
    Desired { replicas, replace_after: Some(replace_after), defrag: None, leader: None }
}

/// A client doing linearizable puts of `w/<n>` in a loop, recording each acknowledged one.
pub struct Writer {
    stop: Arc<AtomicBool>,
    task: JoinHandle<(Vec<String>, usize)>,
}

impl Writer {
    /// Starts writing through `endpoint`.
    pub async fn start(endpoint: String) -> Writer {
        let options =
            ConnectOptions::new().with_connect_timeout(Duration::from_secs(1)).with_timeout(Duration::from_secs(2));
        let mut client = Client::connect([endpoint], Some(options)).await.unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let (mut acked, mut attempts) = (Vec::new(), 0);
            while !flag.load(Ordering::Relaxed) {
                let key = format!("w/{attempts:07}");
                attempts += 1;
                if client.put(key.clone(), key.clone(), None).await.is_ok() {
                    acked.push(key);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (acked, attempts)
        });
        Writer { stop, task }
    }

    /// Stops; the acknowledged keys and the number of attempts.
    pub async fn stop(self) -> (Vec<String>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// Every key under `prefix`, read linearizably.
pub async fn keys(client: &mut Client, prefix: &str) -> Vec<String> {
    let r = client.get(prefix, Some(GetOptions::new().with_prefix().with_keys_only())).await.unwrap();
    r.kvs().iter().map(|kv| kv.key_str().unwrap().to_owned()).collect()
}
