//! The clustering loop (gather → decide → perform) against three real MariaDB servers, no
//! Kubernetes: the test stands in for the pods (a killed process is a pod whose container
//! died) and for the read-write Service (clients write to whichever server the loop has
//! recorded as primary). Proves replication setup with lossless semi-sync, failover without
//! losing an acknowledged write, switchover, errant-transaction quarantine, and re-seeding
//! an errant replica when allowed.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use statecraft_mysql::api::Flavor;
use statecraft_mysql::build::config::{CLIENT_CNF, config_path, handover_sh, ready_sh};
use statecraft_mysql::clustering::acks::{Acknowledgements, judge};
use statecraft_mysql::clustering::dataplane::{DataPlane, Endpoint};
use statecraft_mysql::clustering::decide::{Decision, Health, Operation, Role, decide};
use statecraft_mysql::clustering::heal::Healing;
use statecraft_mysql::clustering::observed::{Observed, PodState};
use statecraft_mysql::clustering::pass::{Effect, Streaks, Target, gather, perform};
use statecraft_mysql::clustering::restarts::Restarts;
use statecraft_mysql::clustering::routes::{Listing, Routes, closed};
use statecraft_mysql::flavor::{self, OPERATOR_USER, ROOT_USER, accounts_init_sql};
use statecraft_mysql::reason::MySql;
use statecraft_shared::reason::Reason;
use support::{MariaDb, client_binary, first_value as value, mariadb_settings, passwords};
use tokio::sync::Mutex;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Three servers and the loop's memory: what the controller keeps in status and labels.
struct Rig {
    servers: Vec<MariaDb>,
    dp: DataPlane,
    recorded: Option<u32>,
    /// `status.deposedPrimary`.
    deposed: Option<u32>,
    labels: Vec<Option<String>>,
    /// The read-only Service's label, per pod.
    reads: Vec<bool>,
    switchover_to: Option<u32>,
    streaks: Streaks,
    restarts: Restarts,
    /// What `spec.autoHeal` would allow.
    heal: Healing,
    /// Operations performed, in order.
    log: Vec<Operation>,
    /// The member whose pod is being deleted, if any.
    terminating: Option<u32>,
    /// The members the read-write Service's EndpointSlices list (none unless a test says
    /// so: no Service here leads clients anywhere but this harness does).
    listed: BTreeSet<u32>,
    routes: Routes,
}

impl Rig {
    async fn start(n: u32) -> Rig {
        let init = accounts_init_sql(flavor::sql(Flavor::Mariadb), &passwords());
        let mut servers = Vec::new();
        for i in 0..n {
            servers.push(MariaDb::start(i, &mariadb_settings(n as i32), init.expose()).await.expect("start mariadbd"));
        }
        let p = passwords();
        Rig {
            servers,
            dp: DataPlane::new(flavor::sql(Flavor::Mariadb), p.operator.into(), p.replication.into()),
            recorded: None,
            deposed: None,
            labels: vec![None; n as usize],
            reads: vec![false; n as usize],
            switchover_to: None,
            streaks: Streaks::default(),
            restarts: Restarts::default(),
            heal: Healing::default(),
            log: Vec::new(),
            terminating: None,
            listed: BTreeSet::new(),
            routes: Routes::default(),
        }
    }

    fn targets(&mut self) -> Vec<Target> {
        let labels = self.labels.clone();
        let reads = self.reads.clone();
        let terminating = self.terminating;
        self.servers
            .iter_mut()
            .map(|s| Target {
                ordinal: s.ordinal,
                pod: if terminating == Some(s.ordinal) {
                    PodState::Terminating
                } else {
                    PodState::Running { ready: s.is_running() }
                },
                role_label: labels[s.ordinal as usize].clone(),
                reads_label: reads[s.ordinal as usize],
                endpoint: Endpoint { host: "127.0.0.1".into(), port: s.port },
                address: ("127.0.0.1".into(), s.port),
            })
            .collect()
    }

    /// One pass: gather, decide, perform; returns the decision.
    async fn pass(&mut self) -> Decision {
        let targets = self.targets();
        let read_started = Instant::now();
        let members = gather(&self.dp, &targets, self.recorded, &mut self.streaks).await;
        let restarted = self.restarts.observe(&members, self.recorded, read_started..Instant::now());
        let n = self.servers.len() as u32;
        // One pod per member for the whole test: its uid is its name.
        let pod = |i: u32| -> Listing { (i, format!("db-{i}")) };
        let listed = self.listed.iter().map(|i| pod(*i)).collect();
        let closed = members.iter().filter(|m| closed(&m.pod, false, &m.server)).map(|m| pod(m.ordinal)).collect();
        let routed = self.routes.observe(&listed, &closed, Instant::now());
        let o = Observed {
            replicas: n,
            paused: false,
            semi_sync: true,
            ack_count: self.dp.ack_count(n),
            recorded_primary: self.recorded,
            switchover_to: self.switchover_to,
            members,
            heal: self.heal.clone(),
            recently_configured: Default::default(),
            restarted,
            deposed: self.deposed,
            routed,
        };
        let d = decide(&o);
        // As the task does: a deposed primary serving again is no longer one.
        self.deposed = self.deposed.filter(|g| !d.verdicts.iter().any(|v| v.ordinal == *g && v.healthy));
        if !matches!(d.operation, Operation::Nothing | Operation::Wait { .. }) {
            match perform(&self.dp, &d.operation, &o, &targets, o.ack_count).await {
                Ok(Effect::RecordPrimary(i)) => {
                    self.recorded = Some(i);
                    if matches!(d.operation, Operation::Switchover { .. }) {
                        self.switchover_to = None;
                    }
                }
                Ok(Effect::RecordFailover { primary, deposed }) => {
                    self.recorded = Some(primary);
                    self.deposed = Some(deposed);
                }
                Ok(Effect::Relabel { changes, reads }) => {
                    for (i, role) in changes {
                        self.labels[i as usize] = role.map(|r| r.label().to_string());
                    }
                    for (i, serves) in reads {
                        self.reads[i as usize] = serves;
                    }
                }
                Ok(Effect::None) => {}
                // The pod and its volume deleted and made again: an empty server.
                Ok(Effect::Rebuild(i)) => {
                    if let Err(e) = self.servers[i as usize].wipe().await {
                        panic!("re-seeding server {i}: {e}");
                    }
                }
                Err(e) => eprintln!("operation {:?} failed (retried next pass): {e}", d.operation),
            }
            self.log.push(d.operation.clone());
        }
        d
    }

    /// One observation, without deciding or performing anything.
    async fn observed(&mut self) -> Observed {
        let targets = self.targets();
        let members = gather(&self.dp, &targets, self.recorded, &mut self.streaks).await;
        let n = self.servers.len() as u32;
        Observed {
            replicas: n,
            semi_sync: true,
            ack_count: self.dp.ack_count(n),
            recorded_primary: self.recorded,
            members,
            ..Default::default()
        }
    }

    /// Passes until the decision is Healthy with nothing to do, or `max` passes.
    async fn converge(&mut self, max: usize) -> Decision {
        let mut last = None;
        for _ in 0..max {
            let d = self.pass().await;
            if d.health == Health::Healthy && d.operation == Operation::Nothing {
                return d;
            }
            last = Some(d);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("did not converge in {max} passes; last decision {last:#?}; operations {:#?}", self.log);
    }

    /// Passes until one has nothing to do (whatever the health), or `max` passes.
    async fn settle(&mut self, max: usize) -> Decision {
        let mut d = self.pass().await;
        for _ in 0..max {
            if d.operation == Operation::Nothing {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            d = self.pass().await;
        }
        d
    }

    fn opts(&self, i: u32, user: &str, password: &str) -> Opts {
        self.servers[i as usize].opts(user, password)
    }

    async fn operator(&self, i: u32) -> TestResult<Conn> {
        Ok(Conn::new(self.opts(i, OPERATOR_USER, passwords().operator)).await?)
    }
}

/// A client writing one row at a time to whichever port `primary` holds (the read-write
/// Service), recording the ids whose commit was acknowledged.
struct Writer {
    acked: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<()>,
}

impl Writer {
    fn start(primary: Arc<AtomicU16>) -> Writer {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (acked.clone(), stop.clone());
        let handle = tokio::spawn(async move {
            let mut next = 1u64;
            let mut conn: Option<(u16, Conn)> = None;
            while !s.load(Ordering::Relaxed) {
                let port = primary.load(Ordering::Relaxed);
                if conn.as_ref().is_none_or(|(p, _)| *p != port) {
                    let opts: Opts = OptsBuilder::default()
                        .ip_or_hostname("127.0.0.1")
                        .tcp_port(port)
                        .user(Some(ROOT_USER))
                        .pass(Some(passwords().root))
                        .prefer_socket(false)
                        .into();
                    match tokio::time::timeout(Duration::from_secs(1), Conn::new(opts)).await {
                        Ok(Ok(c)) => conn = Some((port, c)),
                        _ => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    }
                }
                let Some((_, c)) = conn.as_mut() else { continue };
                let id = next;
                next += 1;
                let insert = c.query_drop(format!("INSERT INTO app.w (id) VALUES ({id})"));
                match tokio::time::timeout(Duration::from_secs(2), insert).await {
                    Ok(Ok(())) => a.lock().await.push(id),
                    _ => {
                        conn = None;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        });
        Writer { acked, stop, handle }
    }

    async fn stop(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.await;
        self.acked.lock().await.clone()
    }
}

/// The ids present on server `i`.
async fn rows(rig: &Rig, i: u32) -> TestResult<Vec<u64>> {
    let mut c = rig.operator(i).await?;
    Ok(c.query("SELECT id FROM app.w ORDER BY id").await?)
}

async fn bootstrap(rig: &mut Rig) -> TestResult {
    let d = rig.converge(40).await;
    assert_eq!(rig.recorded, Some(0), "ordinal 0 is the first primary of a new cluster");
    assert_eq!(
        d.verdicts.iter().map(|v| v.role).collect::<Vec<_>>(),
        [Some(Role::Primary), Some(Role::Replica), Some(Role::Replica)]
    );
    let mut p = rig.operator(0).await?;
    p.query_drop("CREATE DATABASE app").await?;
    p.query_drop("CREATE TABLE app.w (id BIGINT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))").await?;
    // A semi-sync acknowledgement means received, not applied: wait until every replica
    // has applied the schema, so that a test using a replica directly finds the table
    // (seen once in a clean clone: "Table 'app.w' doesn't exist" on replica 1).
    let position = value(&mut p, "SELECT @@GLOBAL.gtid_binlog_pos").await?;
    for i in 1..3 {
        let mut r = rig.operator(i).await?;
        let waited = value(&mut r, &format!("SELECT MASTER_GTID_WAIT('{position}', 30)")).await?;
        assert_eq!(waited, "0", "replica {i} applied {position} within 30 s");
    }
    Ok(())
}

/// Runs the readiness script a pod gets against `server` (its client options pointed at the
/// harness's socket); returns whether the pod would be ready and what the script said.
async fn ready(server: &MariaDb) -> TestResult<(bool, String)> {
    let dir = tempfile::tempdir()?;
    let cnf = dir.path().join("client.cnf");
    std::fs::write(&cnf, format!("[client]\nsocket = {}\nuser = root\n", server.socket().display()))?;
    let script = ready_sh(flavor::sql(Flavor::Mariadb))
        .replace(&config_path(CLIENT_CNF), &cnf.display().to_string())
        .replace("mariadb --defaults-file", &format!("{} --defaults-file", client_binary().display()));
    let out = tokio::process::Command::new("sh").arg("-c").arg(&script).output().await?;
    Ok((out.status.success(), String::from_utf8_lossy(&out.stdout).trim().to_string()))
}

/// Runs the preStop hook a pod gets (`handover.sh`) against `server`, as [`ready`] runs the
/// readiness probe (the read-write Service it asks is an address where nothing listens);
/// returns whether it succeeded and how long it held the server.
async fn handover(server: &MariaDb) -> TestResult<(bool, Duration)> {
    let dir = tempfile::tempdir()?;
    let cnf = dir.path().join("client.cnf");
    std::fs::write(&cnf, format!("[client]\nsocket = {}\nuser = root\n", server.socket().display()))?;
    let script = handover_sh(flavor::sql(Flavor::Mariadb))
        .replace(&config_path(CLIENT_CNF), &cnf.display().to_string())
        .replace("timeout 3 mariadb ", &format!("timeout 3 {} ", client_binary().display()));
    let started = Instant::now();
    let out = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("READ_WRITE_SERVICE", "127.0.0.1")
        .env("REPLICATION_PASSWORD", passwords().replication)
        .output()
        .await?;
    Ok((out.status.success(), started.elapsed()))
}

#[tokio::test]
async fn the_readiness_probe_is_ready_for_the_primary_and_a_replicating_replica_only() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    assert_eq!(ready(&rig.servers[0]).await?, (true, String::new()), "the writable primary");
    let mut replica_ready = (false, String::new());
    for _ in 0..50 {
        replica_ready = ready(&rig.servers[1]).await?;
        if replica_ready.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(replica_ready.0, "a replicating replica is ready: {replica_ready:?}");
    rig.servers[1].local_admin("STOP SLAVE IO_THREAD").await?;
    let (ok, said) = ready(&rig.servers[1]).await?;
    assert!(!ok && said.starts_with("replication receiver not running"), "{said}");
    rig.servers[2].local_admin("STOP SLAVE").await?;
    rig.servers[2].local_admin("RESET SLAVE ALL").await?;
    let (ok, said) = ready(&rig.servers[2]).await?;
    assert!(!ok, "read-only and replicating from nobody: {said}");
    Ok(())
}

#[tokio::test]
async fn bootstrap_sets_up_lossless_semi_sync_replication() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let mut p = rig.operator(0).await?;
    assert_eq!(value(&mut p, "SELECT @@GLOBAL.read_only").await?, "0");
    assert_eq!(value(&mut p, "SELECT @@GLOBAL.rpl_semi_sync_master_enabled").await?, "1");
    assert_eq!(value(&mut p, "SELECT @@GLOBAL.rpl_semi_sync_master_wait_point").await?, "AFTER_SYNC");
    // The replicas are acknowledging: a commit went through semi-sync, not async.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clients: Option<(String, String)> =
            p.query_first("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'").await?;
        if clients.as_ref().is_some_and(|(_, v)| v == "2") || Instant::now() > deadline {
            assert_eq!(clients.map(|c| c.1).as_deref(), Some("2"), "both replicas acknowledge");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.query_drop("INSERT INTO app.w (id) VALUES (1)").await?;
    let yes: Option<(String, String)> = p.query_first("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_yes_tx'").await?;
    assert!(yes.is_some_and(|(_, v)| v.parse::<u64>().unwrap_or(0) >= 1), "the commit was acknowledged by a replica");
    for i in [1, 2] {
        let mut r = rig.operator(i).await?;
        assert_eq!(value(&mut r, "SELECT @@GLOBAL.read_only").await?, "1");
        rig.converge(5).await;
        // The acknowledgement means received, not applied: give the applier a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = rows(&rig, i).await?;
        while seen != [1] && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen = rows(&rig, i).await?;
        }
        assert_eq!(seen, [1], "replica {i} applied the acknowledged row");
    }
    // Nothing to do once converged: a pass of a healthy cluster performs no operation.
    let before = rig.log.len();
    rig.converge(3).await;
    assert_eq!(rig.log.len(), before);
    Ok(())
}

#[tokio::test]
async fn failover_after_a_primary_crash_keeps_every_acknowledged_write() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let primary = Arc::new(AtomicU16::new(rig.servers[0].port));
    let writer = Writer::start(primary.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Crash the primary in the middle of the writes.
    rig.servers[0].kill();
    let killed = Instant::now();
    let mut promoted = None;
    for _ in 0..60 {
        let d = rig.pass().await;
        if let Some(p) = rig.recorded.filter(|p| *p != 0) {
            primary.store(rig.servers[p as usize].port, Ordering::Relaxed);
            promoted.get_or_insert_with(|| killed.elapsed());
        }
        if d.operation == Operation::Nothing && rig.recorded != Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let new = rig.recorded.expect("a primary");
    assert_ne!(new, 0, "failed over: {:#?}", rig.log);
    assert!(rig.log.iter().any(|op| matches!(op, Operation::Fence { .. })), "fenced before promoting: {:#?}", rig.log);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let acked = writer.stop().await;
    eprintln!("failover: primary recorded {promoted:?} after the kill; {} writes acknowledged", acked.len());

    // Every acknowledged write is on the new primary and on the other replica.
    let on_new = rows(&rig, new).await?;
    let lost: Vec<u64> = acked.iter().filter(|id| on_new.binary_search(id).is_err()).copied().collect();
    assert!(lost.is_empty(), "acknowledged writes lost on the new primary: {lost:?}");
    assert!(acked.iter().any(|id| *id > 1) && acked.len() > 10, "the writer wrote before and after: {}", acked.len());
    let other = 3 - new;
    let d = rig.settle(20).await;
    assert_eq!(d.health, Health::Degraded, "one server is still down");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut c = rig.operator(other).await?;
    let executed = value(&mut c, "SELECT @@GLOBAL.gtid_current_pos").await?;
    let mut p = rig.operator(new).await?;
    assert_eq!(executed, value(&mut p, "SELECT @@GLOBAL.gtid_current_pos").await?, "the other replica caught up");

    // The old primary comes back: it rejoins as a replica, or is quarantined if the crash
    // left it a transaction nobody acknowledged (AFTER_SYNC binlogs before the ack).
    rig.servers[0].restart().await?;
    // Generous under load: every test of this file runs three servers at once.
    let d = rig.settle(150).await;
    let old = &d.verdicts[0];
    assert_eq!(rig.recorded, Some(new), "the old primary's return does not move the primary");
    match &old.errant {
        None => assert_eq!((old.role, old.healthy), (Some(Role::Replica), true), "{d:#?}"),
        Some(extra) => {
            eprintln!("old primary quarantined with unacknowledged transactions {extra}");
            assert_eq!(old.role, None, "an errant server gets no traffic");
        }
    }
    Ok(())
}

/// The double failure of the reliability review (H3), on real servers: a write whose only
/// acknowledgement came from a replica that then restarts (MariaDB discards the relay log
/// when replication starts again) while the primary is down. Promoting either replica would
/// lose it; the loop waits for the primary instead, which has it.
#[tokio::test]
async fn a_replica_restart_during_an_outage_holds_the_failover_and_loses_no_acknowledged_write() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    rig.converge(20).await;
    // Replica 2 stops replicating, replica 1 stops applying: the next commit's only copy
    // outside the primary is in replica 1's relay log.
    rig.servers[2].local_admin("STOP SLAVE").await?;
    rig.servers[1].local_admin("STOP SLAVE SQL_THREAD").await?;
    let mut p = rig.operator(0).await?;
    tokio::time::timeout(Duration::from_secs(10), p.query_drop("INSERT INTO app.w (id) VALUES (1)"))
        .await
        .map_err(|_| "the insert was not acknowledged")??;
    drop(p);
    rig.servers[0].kill();
    rig.servers[1].restart().await?;
    let mut held = None;
    for _ in 0..30 {
        let d = rig.pass().await;
        assert!(
            !rig.log.iter().any(|op| matches!(op, Operation::Promote { .. })),
            "promoted a replica that may lack the acknowledged write: {:#?}",
            rig.log
        );
        if let Operation::Wait { reason, .. } = d.operation {
            held = Some(reason);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        held,
        Some(Reason::from(MySql::ReplicaRestartedBeforeFailover)),
        "the failover is held with the reason: {:#?}",
        rig.log
    );

    // The primary answers again: it is kept, and the acknowledged write is on every server.
    rig.servers[0].restart().await?;
    rig.converge(150).await;
    assert_eq!(rig.recorded, Some(0));
    for i in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = rows(&rig, i).await?;
        while seen != [1] && Instant::now() < deadline {
            rig.pass().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            seen = rows(&rig, i).await?;
        }
        assert_eq!(seen, [1], "server {i} has the acknowledged write");
    }
    Ok(())
}

/// A primary whose semi-sync wait timed out falls back to asynchronous replication on its
/// own; the observation sees it (the `SemiSync` condition, metric and alert follow from
/// it), and sees it recover once a replica acknowledges again.
#[tokio::test]
async fn a_primary_that_fell_back_to_asynchronous_replication_is_seen() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let d = rig.converge(20).await;
    let o = rig.observed().await;
    assert_eq!(judge(&o, &d), Acknowledgements::Waiting { primary: 0 });

    // A short timeout (what `acceptAsyncFallback` allows) and no replica listening.
    rig.servers[0].local_admin("SET GLOBAL rpl_semi_sync_master_timeout = 200").await?;
    for i in [1, 2] {
        rig.servers[i].local_admin("STOP SLAVE").await?;
    }
    let mut p = rig.operator(0).await?;
    p.query_drop("INSERT INTO app.w (id) VALUES (1)").await?;
    let o = rig.observed().await;
    assert_eq!(judge(&o, &decide(&o)), Acknowledgements::FellBack { primary: 0 }, "{o:#?}");

    // Replicas back: the loop restarts them, they catch up and acknowledge again.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = rig.pass().await;
        p.query_drop(format!("INSERT INTO app.w (id) VALUES ({})", 2 + rig.log.len())).await?;
        let o = rig.observed().await;
        if judge(&o, &d) == (Acknowledgements::Waiting { primary: 0 }) {
            break;
        }
        assert!(Instant::now() < deadline, "semi-sync did not come back: {o:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// A semi-sync replica whose source no longer answers (frozen here; in e2e, a killed
/// primary whose pod came back with a new address) is fenced and re-pointed without
/// waiting for it. MariaDB's semi-sync receiver, as it stops, connects to its source to
/// kill its dump there and waits for that connection up to
/// `rpl_semi_sync_slave_kill_conn_timeout`; seen in e2e as 2 s per `STOP SLAVE` added to
/// the write gap. Set to a minute here, that wait would exceed the data plane's own
/// deadline and the fence would fail; the data plane lowers it to 1 s before each stop.
#[tokio::test]
async fn a_replica_of_a_source_that_no_longer_answers_is_fenced_and_repointed_without_waiting_for_it() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    rig.converge(20).await;
    for i in [1, 2] {
        rig.servers[i].local_admin("SET GLOBAL rpl_semi_sync_slave_kill_conn_timeout = 60").await?;
    }
    let ep = |i: usize| Endpoint { host: "127.0.0.1".into(), port: rig.servers[i].port };
    rig.servers[0].freeze(true)?;
    let fenced = rig.dp.fence(&ep(1)).await;
    let repointed = rig.dp.configure_replica(&ep(2), ("127.0.0.1", rig.servers[1].port)).await;
    rig.servers[0].freeze(false)?;
    fenced?;
    repointed?;
    let mut follower = rig.operator(2).await?;
    assert_eq!(value(&mut follower, "SELECT @@GLOBAL.rpl_semi_sync_slave_enabled").await?, "1", "it acknowledges");
    Ok(())
}

/// A zombie primary (its replicas fenced or moved away while it was paused) has commits
/// waiting for acknowledgements that never come; they hold off `read_only`, so demoting it
/// must end them first. Seen in the e2e pause fault: the demotion timed out every pass and
/// the split-brain guard, which comes first, held up everything else.
#[tokio::test]
async fn a_primary_with_commits_waiting_for_acknowledgements_is_demoted_and_acknowledges_none() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    rig.converge(20).await;
    for i in [1, 2] {
        rig.servers[i].local_admin("STOP SLAVE").await?;
    }
    // A client account: the operator's own connections are never killed.
    let mut client = Conn::new(rig.opts(0, ROOT_USER, passwords().root)).await?;
    let hung = tokio::spawn(async move { client.query_drop("INSERT INTO app.w (id) VALUES (1)").await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!hung.is_finished(), "the commit waits for an acknowledgement");
    let ep = Endpoint { host: "127.0.0.1".into(), port: rig.servers[0].port };
    tokio::time::timeout(Duration::from_secs(15), rig.dp.demote(&ep)).await.map_err(|_| "demote hung")??;
    let outcome = tokio::time::timeout(Duration::from_secs(5), hung).await.map_err(|_| "the commit still waits")??;
    assert!(outcome.is_err(), "the waiting commit was not acknowledged: {outcome:?}");
    let mut p = rig.operator(0).await?;
    assert_eq!(value(&mut p, "SELECT @@GLOBAL.read_only").await?, "1");
    Ok(())
}

#[tokio::test]
async fn switchover_moves_the_primary_with_a_short_write_pause() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let primary = Arc::new(AtomicU16::new(rig.servers[0].port));
    let writer = Writer::start(primary.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    rig.switchover_to = Some(2);
    let started = Instant::now();
    for _ in 0..40 {
        let d = rig.pass().await;
        if let Some(p) = rig.recorded {
            primary.store(rig.servers[p as usize].port, Ordering::Relaxed);
        }
        if d.health == Health::Healthy && d.operation == Operation::Nothing && rig.recorded == Some(2) {
            break;
        }
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acked = writer.stop().await;
    assert_eq!(rig.recorded, Some(2), "{:#?}", rig.log);
    let on_new = rows(&rig, 2).await?;
    assert!(acked.iter().all(|id| on_new.binary_search(id).is_ok()), "no acknowledged write lost");
    let d = rig.converge(10).await;
    assert_eq!(d.verdicts[0].role, Some(Role::Replica), "the old primary replicates from the new one");
    assert!(
        !rig.log.contains(&Operation::ConfigureReplica { ordinal: 1, source: 2 }),
        "the other replica followed the new primary in the switchover itself: {:#?}",
        rig.log
    );
    eprintln!("switchover: converged {took:?} after the request; {} writes acknowledged", acked.len());
    Ok(())
}

/// A primary whose pod is being deleted (a drain) is handed over and let go: the other
/// replica follows the new primary and the old one's binary log dumps end, so its preStop hook (which
/// holds the server while any replica replicates from it) would return at once. While its
/// server still serves, the new primary waits for the read-write Service, which still
/// lists the old one; once the server stopped (the kubelet's SIGTERM after the hook), it
/// refuses connections and the new primary takes writes at once, listed or not.
#[tokio::test]
async fn a_primary_whose_pod_is_deleted_is_handed_over_let_go_and_replaced_without_waiting_for_the_routes() -> TestResult
{
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let primary = Arc::new(AtomicU16::new(rig.servers[0].port));
    let writer = Writer::start(primary.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The pod is being deleted; the EndpointSlice still lists it (it lags behind labels).
    rig.terminating = Some(0);
    rig.listed = [0].into();
    for _ in 0..10 {
        rig.pass().await;
        if rig.recorded == Some(1) {
            break;
        }
    }
    assert_eq!(rig.recorded, Some(1), "{:#?}", rig.log);
    assert_eq!(rig.log.last(), Some(&Operation::Switchover { from: 0, to: 1, terminating: true }));
    let switched = rig.log.len();
    // Let go: handover.sh's own question finds no replica left, and 2 receives no more.
    let mut old = rig.operator(0).await?;
    let dumps = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'";
    assert_eq!(value(&mut old, dumps).await?, "0", "binary log dumps left on the old primary");
    drop(old);
    // So the preStop hook lets the kubelet stop it at once (it polls every 0.1 s).
    let (handed_over, held) = handover(&rig.servers[0]).await?;
    assert!(handed_over, "handover.sh timed out (it exits 1 after 30 s)");
    eprintln!("handover.sh returned {held:?} after the hand-over");
    // Replica 2 already follows the new primary, before it takes writes: its first
    // commits find a replica to acknowledge them.
    let mut other = rig.operator(2).await?;
    let status: Option<mysql_async::Row> = other.query_first("SHOW SLAVE STATUS").await?;
    let column = |name: &str| status.as_ref().and_then(|r| r.get_opt::<String, _>(name).and_then(Result::ok));
    assert_eq!(column("Master_Port"), Some(rig.servers[1].port.to_string()), "replica 2 follows the new primary");
    drop(other);

    // The old server still serves: the new primary is labelled, and writes wait for the
    // routes.
    let mut waited = false;
    for _ in 0..6 {
        let d = rig.pass().await;
        if matches!(d.operation, Operation::Wait { reason, .. } if reason == MySql::FormerPrimaryStillRouted) {
            waited = true;
            break;
        }
    }
    assert!(waited, "{:#?}", rig.log);
    let since = &rig.log[switched..];
    assert!(!since.iter().any(|op| matches!(op, Operation::MakeWritable { .. })), "{since:#?}");

    // The kubelet stops it: it refuses connections, and nothing starts in its pod again.
    rig.servers[0].kill();
    primary.store(rig.servers[1].port, Ordering::Relaxed);
    let before = rows(&rig, 1).await?.len();
    let d = rig.pass().await;
    assert_eq!(d.operation, Operation::MakeWritable { ordinal: 1 }, "{:#?}", rig.log);
    // 2 acknowledges its commits at once: nobody had to point it at the new primary, and
    // having connected before the primary's semi-sync source side was on, it still
    // registered as a semi-sync replica.
    rig.settle(5).await;
    assert!(!rig.log.contains(&Operation::ConfigureReplica { ordinal: 2, source: 1 }), "{:#?}", rig.log);
    let mut new = rig.operator(1).await?;
    for (variable, want) in [("Rpl_semi_sync_master_status", "ON"), ("Rpl_semi_sync_master_clients", "1")] {
        let got: Option<(String, String)> = new.query_first(format!("SHOW GLOBAL STATUS LIKE '{variable}'")).await?;
        assert_eq!(got.map(|g| g.1).as_deref(), Some(want), "{variable} on the new primary");
    }
    drop(new);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acked = writer.stop().await;
    let on_new = rows(&rig, 1).await?;
    assert!(on_new.len() > before, "writes resumed on the new primary");
    assert!(acked.iter().all(|id| on_new.binary_search(id).is_ok()), "no acknowledged write lost");
    Ok(())
}

#[tokio::test]
async fn an_errant_transaction_on_a_replica_is_detected_and_quarantined() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let before = rig.log.len();
    // Somebody with rights writes on replica 1 directly.
    let mut r = rig.operator(1).await?;
    r.query_drop("SET GLOBAL read_only = OFF").await?;
    r.query_drop("INSERT INTO app.w (id) VALUES (999)").await?;
    r.query_drop("SET GLOBAL read_only = ON").await?;
    let mut d = rig.pass().await;
    for _ in 0..5 {
        if d.verdicts[1].errant.is_some() && d.operation == Operation::Nothing {
            break;
        }
        d = rig.pass().await;
    }
    let errant = d.verdicts[1].errant.clone().expect("replica 1 is errant");
    assert!(errant.starts_with("0-101-"), "the errant GTID is replica 1's own: {errant}");
    assert_eq!(d.verdicts[1].role, None);
    assert_eq!(rig.labels[1], None, "no client traffic to the errant replica");
    assert!(!rig.reads[1], "not in the read-only Service either");
    assert_eq!(d.health, Health::Degraded);
    let after = &rig.log[before..];
    assert!(
        !after.iter().any(|op| matches!(op, Operation::ConfigureReplica { ordinal: 1, .. })),
        "repointed: {after:?}"
    );
    // The primary and the healthy replica are untouched.
    assert_eq!(d.verdicts[0].role, Some(Role::Primary));
    assert_eq!(d.verdicts[2].role, Some(Role::Replica));
    Ok(())
}

#[tokio::test]
async fn an_errant_replica_is_reseeded_when_allowed_and_catches_up_from_the_binary_log() -> TestResult {
    let mut rig = Rig::start(3).await;
    bootstrap(&mut rig).await?;
    let mut p = rig.operator(0).await?;
    for id in 1..=50u64 {
        p.query_drop(format!("INSERT INTO app.w (id) VALUES ({id})")).await?;
    }
    // An errant transaction on replica 2, in a domain of its own.
    rig.servers[2].local_admin("SET SESSION gtid_domain_id = 9; INSERT INTO app.w (id) VALUES (999)").await?;
    rig.heal.reseed_errant = true;
    let mut reseeded = false;
    for _ in 0..100 {
        let d = rig.pass().await;
        reseeded |= matches!(d.operation, Operation::Reseed { ordinal: 2, .. });
        if reseeded && d.health == Health::Healthy && d.operation == Operation::Nothing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reseeded, "re-seeded: {:#?}", rig.log);
    let d = rig.converge(50).await;
    assert!(d.verdicts.iter().all(|v| v.errant.is_none()), "{d:#?}");
    // The new server gets every row from the primary's binary log, and not the errant one.
    let all: Vec<u64> = (1..=50).collect();
    let mut ids = Vec::new();
    for _ in 0..100 {
        ids = rows(&rig, 2).await?;
        if ids == all {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ids, all, "caught up without the errant row");
    let reseeds = rig.log.iter().filter(|op| matches!(op, Operation::Reseed { .. })).count();
    assert_eq!(reseeds, 1, "one re-seed: {:#?}", rig.log);
    Ok(())
}
