//! A real Kafka cluster for tests: 3 controllers (node ids 0-2) and 3 brokers (100-102),
//! separate JVMs started from the jars `scripts/install-kafka-jars.sh` resolves, on free
//! loopback ports in a temporary directory, with a dynamic quorum
//! (`controller.quorum.bootstrap.servers`, KIP-853): the controllers are formatted with
//! `--initial-controllers`, the brokers with the cluster id only, as the operator's start
//! script does. Each node logs to `<dir>/<id>/node.log`; the tails are printed when a test
//! panics. Every process is killed when the cluster is dropped.
//!
//! Settings are the defaults except what a test on a 2-core machine needs: small heaps, few
//! threads, a short broker session (a killed broker is fenced after 4 s, not 9 s) and no
//! automatic leader rebalancing (tests elect preferred leaders themselves).

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use statecraft_kafka::admin::Admin;

/// Controllers' node ids.
pub const CONTROLLERS: [i32; 3] = [0, 1, 2];
/// Brokers' node ids (`crate::nodes`: 100 + ordinal).
pub const BROKERS: [i32; 3] = [100, 101, 102];
/// How long a node may take to start on a loaded 2-core machine.
const START: Duration = Duration::from_secs(120);
/// Admin calls of the harness itself.
const CALL: Duration = Duration::from_secs(10);
/// Longest wait of [`KafkaCluster::until`] for the cluster, or a controller acting on it,
/// to converge after a change (metadata propagation, fencing after the 4 s broker session,
/// a restarted broker catching up).
pub const CONVERGE: Duration = Duration::from_secs(60);

/// The directory `scripts/install-kafka-jars.sh` puts the jars in: like the project's
/// binaries, under `$STATECRAFT_CACHE` (default `~/.cache/statecraft`).
pub fn kafka_libs() -> PathBuf {
    let bin = statecraft_shared::testing::bin_dir();
    bin.parent().map(Path::to_path_buf).unwrap_or(bin).join("kafka/current/libs")
}

/// A Kafka uuid string (URL-safe base64, no padding) of 16 bytes.
fn kafka_uuid(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

struct Node {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// A running cluster; see the module documentation.
pub struct KafkaCluster {
    dir: tempfile::TempDir,
    libs: PathBuf,
    /// The cluster id the nodes were formatted with.
    pub cluster_id: String,
    /// Each controller's directory id, as formatted.
    pub directory_ids: BTreeMap<i32, String>,
    nodes: BTreeMap<i32, Node>,
    /// Set when [`KafkaCluster::fail`] has printed the logs, so a drop while panicking does
    /// not print them twice.
    reported: std::sync::atomic::AtomicBool,
}

impl KafkaCluster {
    /// Formats and starts every node, and returns once the three brokers are registered and
    /// unfenced.
    pub async fn start() -> KafkaCluster {
        let libs = kafka_libs();
        let has_kafka = std::fs::read_dir(&libs)
            .is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-")));
        assert!(
            has_kafka,
            "no Kafka jars in {}: run scripts/install-kafka-jars.sh (part of `make deps`) first",
            libs.display()
        );
        let dir = tempfile::Builder::new().prefix("statecraft-kafka-").tempdir().unwrap();
        let started = Instant::now();
        let seed = std::process::id().to_be_bytes();
        let mut cluster_bytes = [0x5c; 16];
        cluster_bytes[..4].copy_from_slice(&seed);
        let cluster_id = kafka_uuid(cluster_bytes);
        let directory_ids: BTreeMap<i32, String> =
            CONTROLLERS.iter().map(|id| (*id, kafka_uuid([0x10 + *id as u8; 16]))).collect();
        let mut nodes = BTreeMap::new();
        for id in CONTROLLERS.iter().chain(&BROKERS) {
            let node_dir = dir.path().join(id.to_string());
            std::fs::create_dir_all(node_dir.join("data")).unwrap();
            let port = statecraft_shared::testing::free_port().unwrap();
            nodes.insert(*id, Node { port, dir: node_dir, child: None });
        }
        let mut cluster = KafkaCluster { dir, libs, cluster_id, directory_ids, nodes, reported: Default::default() };
        cluster.write_configs();
        cluster.format();
        // Controllers first, brokers once the quorum has a leader: a broker started while no
        // controller listens yet was seen (once in a clean-clone `make test`) never to find
        // the leader through controller.quorum.bootstrap.servers, and to exit after its 60 s
        // registration timeout, though the quorum formed two seconds later.
        for id in CONTROLLERS {
            cluster.spawn(id);
        }
        cluster.wait_quorum_leader().await;
        for id in BROKERS {
            cluster.spawn(id);
        }
        cluster.wait_brokers_unfenced(&BROKERS).await;
        eprintln!(
            "kafka: 3 controllers and 3 brokers up after {:?} in {}",
            started.elapsed(),
            cluster.dir.path().display()
        );
        cluster
    }

    /// `127.0.0.1:<port>` of node `id` (the CONTROLLER listener of a controller, PLAINTEXT
    /// of a broker).
    pub fn address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.nodes[&id].port)
    }

    /// An admin client of node `id`, retried until the node accepts it.
    pub async fn admin(&self, id: i32) -> Admin {
        let address = self.address(id);
        let deadline = Instant::now() + START;
        loop {
            match Admin::connect(&address, CALL).await {
                Ok(admin) => return admin,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("node {id} not answering yet: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => self.fail(&format!("node {id} never accepted an admin client: {e}")),
            }
        }
    }

    /// Stops node `id` as Kubernetes does (SIGTERM: a broker shuts down in a controlled way)
    /// and waits for it to exit.
    pub fn stop(&mut self, id: i32) {
        self.stop_all(&[id]);
    }

    /// Stops several nodes at once (SIGTERM each, then waits for all).
    pub fn stop_all(&mut self, ids: &[i32]) {
        for id in ids {
            if let Some(child) = &self.nodes[id].child {
                let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
                assert!(status.success(), "kill -TERM node {id}");
            }
        }
        for id in ids {
            if let Some(mut child) = self.node_mut(*id).child.take() {
                child.wait().unwrap();
            }
        }
    }

    /// Kills node `id` (SIGKILL: a crash, no controlled shutdown).
    pub fn kill(&mut self, id: i32) {
        if let Some(mut child) = self.node_mut(id).child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Starts node `id` again on its data directory and port (it must be stopped).
    pub fn restart(&mut self, id: i32) {
        assert!(self.nodes[&id].child.is_none(), "node {id} is running");
        self.spawn(id);
    }

    /// Polls DescribeQuorum on every controller (only the leader answers it) until one says
    /// the quorum has a leader; fails at once, with its log, when a node's JVM has exited.
    pub async fn wait_quorum_leader(&mut self) {
        let mut admins = Vec::new();
        for id in CONTROLLERS {
            admins.push(self.admin(id).await);
        }
        let deadline = Instant::now() + START;
        loop {
            self.fail_if_exited();
            let mut last = Vec::new();
            for admin in &admins {
                match admin.describe_quorum().await {
                    Ok(q) if q.leader_id.is_some() => return,
                    answer => last.push(answer),
                }
            }
            if Instant::now() > deadline {
                self.fail(&format!("the quorum has no leader after {START:?}: {last:?}"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Polls describe_cluster on `via` until every broker of `ids` is registered and unfenced;
    /// fails at once, with its log, when a node's JVM has exited.
    pub async fn wait_brokers_unfenced(&mut self, ids: &[i32]) {
        let via = ids[0];
        let admin = self.admin(via).await;
        let deadline = Instant::now() + START;
        loop {
            self.fail_if_exited();
            let last = admin.describe_cluster().await;
            if let Ok(cluster) = &last
                && ids.iter().all(|id| cluster.brokers.iter().any(|b| b.id == *id && !b.fenced))
            {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!("brokers {ids:?} not all unfenced after {START:?}: {last:?}"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Panics, with the logs, when a node that should be running has exited.
    fn fail_if_exited(&mut self) {
        let exited: Vec<String> = self
            .nodes
            .iter_mut()
            .filter_map(|(id, node)| {
                let status = node.child.as_mut()?.try_wait().ok()??;
                node.child = None;
                Some(format!("node {id} exited: {status}"))
            })
            .collect();
        if !exited.is_empty() {
            self.fail(&exited.join("; "));
        }
    }

    /// Polls `check` until it returns `Ok`, failing with the last answer and every node's
    /// log after [`CONVERGE`].
    pub async fn until<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + CONVERGE;
        loop {
            match check().await {
                Ok(value) => return value,
                Err(last) if Instant::now() > deadline => {
                    self.fail(&format!("{what}: still not after {CONVERGE:?}: {last}"))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// Panics with `message` and the end of every node's log.
    pub fn fail(&self, message: &str) -> ! {
        self.reported.store(true, std::sync::atomic::Ordering::Relaxed);
        panic!("{message}\n{}", self.log_tails(20));
    }

    /// Per node: its last warnings and errors, then its last `lines` lines. Warnings first
    /// because a node's last lines are often routine (fetches, heartbeats) while the cause
    /// (a bind failure, a fencing, an exception) is further up.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for (id, node) in &self.nodes {
            let log = node.dir.join("node.log");
            let running = if node.child.is_some() { "running" } else { "stopped" };
            out.push_str(&format!(
                "--- node {id}, {running} ({}):\n[warnings]\n{}\n[last lines]\n{}\n",
                log.display(),
                warnings(&log, lines),
                tail(&log, lines)
            ));
        }
        out
    }

    fn node_mut(&mut self, id: i32) -> &mut Node {
        self.nodes.get_mut(&id).unwrap()
    }

    fn bootstrap_servers(&self) -> String {
        CONTROLLERS.iter().map(|id| self.address(*id)).collect::<Vec<_>>().join(",")
    }

    fn write_configs(&self) {
        let common = format!(
            "controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             controller.quorum.bootstrap.servers={}\n\
             num.network.threads=2\nnum.io.threads=2\nbackground.threads=2\nlog.cleaner.threads=1\n\
             broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=4000\n",
            self.bootstrap_servers()
        );
        for (id, node) in &self.nodes {
            let role = if CONTROLLERS.contains(id) {
                format!(
                    "process.roles=controller\n\
                     listeners=CONTROLLER://127.0.0.1:{port}\n\
                     advertised.listeners=CONTROLLER://127.0.0.1:{port}\n\
                     auto.leader.rebalance.enable=false\n",
                    port = node.port
                )
            } else {
                format!(
                    "process.roles=broker\n\
                     listeners=PLAINTEXT://127.0.0.1:{port}\n\
                     advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                     inter.broker.listener.name=PLAINTEXT\n\
                     offsets.topic.replication.factor=3\n\
                     transaction.state.log.replication.factor=3\ntransaction.state.log.min.isr=2\n\
                     share.coordinator.state.topic.replication.factor=3\nshare.coordinator.state.topic.min.isr=2\n\
                     group.initial.rebalance.delay.ms=0\n",
                    port = node.port
                )
            };
            let properties = format!("node.id={id}\nlog.dirs={}\n{role}{common}", node.dir.join("data").display());
            std::fs::write(node.dir.join("server.properties"), properties).unwrap();
            std::fs::write(
                node.dir.join("log4j2.properties"),
                "status = warn\n\
                 appender.out.type = Console\nappender.out.name = OUT\n\
                 appender.out.layout.type = PatternLayout\nappender.out.layout.pattern = [%d] %p %m (%c)%n\n\
                 rootLogger.level = info\nrootLogger.appenderRef.out.ref = OUT\n\
                 logger.request.name = kafka.request.logger\nlogger.request.level = warn\n",
            )
            .unwrap();
        }
    }

    /// A JVM running `class` with the jars, a small heap and the node's log4j 2 config,
    /// output appended to the node's log.
    fn java(&self, id: i32, class: &str) -> Command {
        let node = &self.nodes[&id];
        let log = std::fs::OpenOptions::new().create(true).append(true).open(node.dir.join("node.log")).unwrap();
        let mut command = Command::new("java");
        command
            .args(["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg(format!("-Dlog4j2.configurationFile={}", node.dir.join("log4j2.properties").display()))
            .arg(format!("-Dkafka.logs.dir={}", node.dir.join("logs").display()))
            .arg("-cp")
            .arg(format!("{}/*", self.libs.display()))
            .arg(class)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        command
    }

    /// `kafka-storage format` of every node, in parallel: the controllers with the initial
    /// voters (id@host:port:directory-id), the brokers with the cluster id only.
    fn format(&self) {
        let voters = CONTROLLERS
            .iter()
            .map(|id| format!("{id}@127.0.0.1:{}:{}", self.nodes[id].port, self.directory_ids[id]))
            .collect::<Vec<_>>()
            .join(",");
        let children: Vec<(i32, Child)> = self
            .nodes
            .iter()
            .map(|(id, node)| {
                let mut command = self.java(*id, "kafka.tools.StorageTool");
                command
                    .args(["format", "--cluster-id", &self.cluster_id, "--config"])
                    .arg(node.dir.join("server.properties"));
                if CONTROLLERS.contains(id) {
                    command.args(["--initial-controllers", &voters]);
                }
                (*id, command.spawn().unwrap())
            })
            .collect();
        for (id, mut child) in children {
            let status = child.wait().unwrap();
            if !status.success() {
                self.fail(&format!("formatting node {id}: {status}"));
            }
        }
    }

    fn spawn(&mut self, id: i32) {
        let properties = self.nodes[&id].dir.join("server.properties");
        let mut command = self.java(id, "kafka.Kafka");
        command.arg(properties);
        let child = command.spawn().unwrap();
        self.node_mut(id).child = Some(child);
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.reported.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("kafka cluster in {} at the failure:\n{}", self.dir.path().display(), self.log_tails(20));
        }
        for node in self.nodes.values_mut() {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The last `lines` lines of a file (at most its last 64 KiB read).
fn tail(path: &Path, lines: usize) -> String {
    let text = read_end(path, 64 << 10);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last `lines` WARN, ERROR and exception lines of a log (at most its last 1 MiB read).
fn warnings(path: &Path, lines: usize) -> String {
    let text = read_end(path, 1 << 20);
    let found: Vec<&str> =
        text.lines().filter(|l| l.contains("] WARN ") || l.contains("] ERROR ") || l.contains("Exception")).collect();
    found[found.len().saturating_sub(lines)..].join("\n")
}

/// The last `bytes` bytes of a file as text, or a note that it has none.
fn read_end(path: &Path, bytes: u64) -> String {
    let Ok(mut file) = std::fs::File::open(path) else { return "(no log)".into() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(bytes)));
    let mut raw = Vec::new();
    let _ = file.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}
