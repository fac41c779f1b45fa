//! The MySQL fault suite: faults injected into a 3-server cluster while four clients insert
//! through the read-write Service, each scenario repeated `FAULT_RUNS` times; after each run
//! no acknowledged write may be lost and every replica's tables must equal the primary's.
//! Figures go to `results/e2e/mysql-faults.jsonl`. Each scenario runs on two worker
//! threads: the faults are injected with blocking calls (`kubectl`, `kill`), which on a
//! single-threaded runtime froze the writers too, and a slow `kubectl` then counted as
//! writes unavailable (4.5 s once, for an eviction). The faults themselves (pauses,
//! partitions, crashes, the API server stopped) are `statecraft_e2e::faults`; the pause and
//! the operator partition also run porcupine-checked register clients
//! ([`Registers`](super::registers::Registers)).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use serde_json::json;
use statecraft_e2e::faults::{Fault, Partition, Pause, PodInfo, crash, fault_runs};
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::writes::{Attempt, longest_gap, lost};
use statecraft_e2e::{events, operator, outage, wait_until};
use statecraft_mysql::MysqlOperator;
use statecraft_shared::runner::Operator;

use super::registers::Registers;
use super::{Db, TestResult, Writer};

impl Db {
    /// The pod of member `name`, for fault injection.
    pub(super) fn pod(&self, name: &str) -> Result<PodInfo, statecraft_e2e::E2eError> {
        PodInfo::get(&self.cluster, &self.ns.name, name)
    }

    /// The IPs of the operator's pods.
    fn operator_ips(&self) -> Result<Vec<String>, statecraft_e2e::E2eError> {
        let selector = format!("app.kubernetes.io/name={}", MysqlOperator::NAME);
        let ips = self.kubectl(&["get", "pods", "-l", &selector, "-o", "jsonpath={.items[*].status.podIP}"])?;
        Ok(ips.split_whitespace().map(str::to_owned).collect())
    }

    /// Waits until the recorded primary is not `old`; returns the new one.
    async fn primary_moved_from(&self, old: &str, timeout: Duration) -> Result<String, statecraft_e2e::E2eError> {
        wait_until(timeout, &format!("a primary other than {old}"), || async {
            self.status().await.ok()?.current_primary.filter(|p| p != old)
        })
        .await
    }

    /// How to reach each replica (by status) at its own address, not through a Service:
    /// `(member, options)`.
    pub(super) async fn replica_opts(&self) -> Result<Vec<(String, Opts)>, Box<dyn std::error::Error + Send + Sync>> {
        let opts = self.opts().await?;
        let mut out = Vec::new();
        for m in self.status().await?.members.into_iter().filter(|m| m.role == "replica") {
            let ip = self.pod(&m.name)?.ip;
            out.push((m.name, OptsBuilder::from_opts(opts.clone()).ip_or_hostname(ip).into()));
        }
        Ok(out)
    }

    /// After a fault: Ready again, every acknowledged write of `attempts` on the primary,
    /// and every replica's tables of `app` (the writers' and any a [`Workload`] made)
    /// identical to the primary's (`CHECKSUM TABLE`, once the replicas have caught up).
    /// Returns (acknowledged, lost, replicas compared).
    async fn verify_after_fault(
        &self,
        attempts: &[Attempt],
    ) -> Result<(usize, Vec<u64>, usize), Box<dyn std::error::Error + Send + Sync>> {
        self.ready().await?;
        let lost = lost(attempts, &self.rows().await?);
        let acked = attempts.iter().filter(|a| a.acked).count();
        let mut primary = self.connect().await?;
        let tables: Vec<String> = primary
            .query("SELECT CONCAT('app.', table_name) FROM information_schema.tables WHERE table_schema = 'app' ORDER BY 1")
            .await?;
        let checksum = format!("CHECKSUM TABLE {}", tables.join(", "));
        let want: Vec<(String, Option<i64>)> = primary.query(checksum.as_str()).await?;
        let position: Option<String> = primary.query_first("SELECT @@GLOBAL.gtid_binlog_pos").await?;
        let mut compared = 0;
        for (name, replica) in self.replica_opts().await? {
            // A re-seeded replica copies everything again through replication, which takes
            // longer with every run: first wait until it has applied what the primary has,
            // then compare (a mismatch is then a difference, not a replica behind).
            let what = format!("{name} to apply everything the primary has ({position:?})");
            wait_until(Duration::from_secs(300), &what, || async {
                let mut c = Conn::new(replica.clone()).await.ok()?;
                let reached: Option<i64> =
                    c.exec_first("SELECT MASTER_GTID_WAIT(?, 1)", (position.clone(),)).await.ok()?;
                let _ = c.disconnect().await;
                (reached == Some(0)).then_some(())
            })
            .await?;
            let what = format!("{name}'s table to match the primary's");
            wait_until(Duration::from_secs(30), &what, || async {
                let mut c = Conn::new(replica.clone()).await.ok()?;
                let got: Vec<(String, Option<i64>)> = c.query(checksum.as_str()).await.ok()?;
                let _ = c.disconnect().await;
                (got == want).then_some(())
            })
            .await?;
            compared += 1;
        }
        Ok((acked, lost, compared))
    }
}

/// How long a scenario keeps its fault.
#[derive(Clone, Copy)]
pub(super) enum Lasting {
    /// Until another primary is recorded (at most 60 s), and at least 10 s: clients may
    /// still hold connections to the old primary.
    UntilFailover,
    /// This long: a fault the cluster must ride out without a failover (a [`Workload`]
    /// such as [`NoFailover`] checks that it did).
    For(Duration),
}

/// One fault scenario, `FAULT_RUNS` times: four writers through the read-write Service;
/// `inject` starts the fault on the primary, which ends as `lasting` says; then no
/// acknowledged write may be lost and every replica's table must equal the primary's.
/// Figures go to `results/e2e/mysql-faults.jsonl`.
async fn fault_scenario<F: Fault>(
    test: &str,
    method: &str,
    lasting: Lasting,
    inject: impl AsyncFn(&Db, &str) -> Result<F, statecraft_e2e::E2eError>,
) -> TestResult {
    fault_scenario_with(test, method, lasting, &(), inject).await
}

/// [`fault_scenario`] with `workload`'s clients running beside the writers in every run,
/// from before the fault until after the writers stop; its check must pass too, and its
/// figures join the run's record.
pub(super) async fn fault_scenario_with<F: Fault>(
    test: &str,
    method: &str,
    lasting: Lasting,
    workload: &impl Workload,
    inject: impl AsyncFn(&Db, &str) -> Result<F, statecraft_e2e::E2eError>,
) -> TestResult {
    let db = Db::create("mysqlf", "db", 3, json!({"autoHeal": {"reseedErrant": true}})).await?;
    db.create_table().await?;
    for run in 0..fault_runs() {
        let writers = Writer::start_many(&db.opts().await?, 4, run as u64 * 1_000_000_000);
        let clients = workload.start(&db, test, run).await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let before = db.status().await?.current_primary.ok_or("no primary")?;
        let started = Instant::now();
        let fault = inject(&db, &before).await?;
        let failed_over = match lasting {
            Lasting::UntilFailover => {
                db.primary_moved_from(&before, Duration::from_secs(60)).await?;
                let failed_over = started.elapsed();
                tokio::time::sleep(Duration::from_secs(10).saturating_sub(failed_over)).await;
                Some(failed_over)
            }
            Lasting::For(d) => {
                tokio::time::sleep(d).await;
                None
            }
        };
        fault.end()?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let attempts = Writer::stop_all(writers).await?;
        let checked = workload.stop(&db, clients).await?;
        let gap = longest_gap(&attempts, started);
        let (acked, lost, compared) = db.verify_after_fault(&attempts).await?;
        let after = db.status().await?.current_primary.unwrap_or_default();
        eprintln!(
            "{test} run {run}: fault on {before}; primary {after} (moved after {failed_over:?}); writes unavailable {gap:?}; {acked} acknowledged, {} lost",
            lost.len()
        );
        let mut record = json!({
            "test": test, "method": method,
            "faulted": before, "primary_after": after,
            "failover_seconds": failed_over.map(|d| d.as_secs_f64()),
            "write_unavailable_seconds": gap.as_secs_f64(),
            "acknowledged_writes": acked, "acknowledged_writes_lost": lost.len(),
            "replicas_checksummed": compared, "unix_time": unix_now(),
        });
        if let (Some(r), Some(f)) = (record.as_object_mut(), checked.figures.as_object()) {
            r.extend(f.clone());
        }
        append_result("mysql-faults.jsonl", record);
        assert!(lost.is_empty(), "run {run}: acknowledged writes lost: {lost:?}");
        assert_eq!(compared, 2, "both replicas compared");
        assert!(acked > 20, "the clients kept writing: {acked}");
        if let Some(failure) = checked.failure {
            return Err(format!("run {run}: {failure}").into());
        }
    }
    db.ns.pass();
    Ok(())
}

/// Clients that [`fault_scenario_with`] runs beside its writers in every run, and checks
/// afterwards: `()` runs none; [`Registers`] runs register clients whose history porcupine
/// checks; [`HandOver`] and [`NoFailover`] check how the primary moved (or did not).
pub(super) trait Workload {
    /// The clients of one run, while they run.
    type Running;
    /// Starts the clients of run `run` of `test`, before the fault.
    async fn start(
        &self,
        db: &Db,
        test: &str,
        run: usize,
    ) -> Result<Self::Running, Box<dyn std::error::Error + Send + Sync>>;
    /// Stops them, once the fault has ended, and checks what they saw.
    async fn stop(&self, db: &Db, running: Self::Running) -> Result<Checked, Box<dyn std::error::Error + Send + Sync>>;
}

/// What a [`Workload`]'s check found in one run.
pub(super) struct Checked {
    /// Figures for the run's record in `mysql-faults.jsonl` (an object).
    pub(super) figures: serde_json::Value,
    /// Why the check failed, if it did: the run fails once its record is written.
    pub(super) failure: Option<String>,
}

impl Workload for () {
    type Running = ();

    async fn start(&self, _: &Db, _: &str, _: usize) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(())
    }

    async fn stop(&self, _: &Db, (): ()) -> Result<Checked, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Checked { figures: json!({}), failure: None })
    }
}

/// What the [`Registers`] beside the writers of the pause and the operator-partition
/// scenarios do, for their records' method.
const REGISTERS: &str = "4 register clients read (SELECT), write (INSERT ... ON DUPLICATE KEY UPDATE) and compare-and-swap (UPDATE ... WHERE v = expected, CLIENT_FOUND_ROWS) 3 single-row registers, a new connection per operation, through the read-write Service (1 s connect, 2 s statement timeout: refused = failed, no answer = unknown); the registers' history checked with porcupine (statecraft-porcupine)";

/// Fault: the primary's processes are paused (SIGSTOP) for longer than a failover takes,
/// while four clients write, then resumed (SIGCONT). The paused server cannot answer, so a
/// replica is promoted; when it wakes it is a zombie that still believes it is writable:
/// it must not acknowledge a write that is then lost (its replicas were fenced and moved,
/// so its commits wait for acknowledgements that never come, and it is demoted).
/// Checked: no acknowledged write lost, replicas identical to the primary, and porcupine
/// finds the [`Registers`]' history linearizable: the resumed zombie neither acknowledged a
/// write the new primary lacks nor answered a read with a value the new primary had
/// already replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (faults act on host processes): make cluster-up"]
async fn mysql_fault_primary_paused_past_failover_then_resumed() -> TestResult {
    fault_scenario_with(
        "mysql_fault_primary_paused_past_failover_then_resumed",
        &format!("SIGSTOP of every process of the primary's mysql container until another primary is recorded (and at least 10 s), then SIGCONT, while 4 clients insert rows one at a time through the read-write Service and {REGISTERS}; write unavailability is the longest time between two acknowledgements of inserts after the pause; replicas' CHECKSUM TABLE compared with the primary's"),
        Lasting::UntilFailover,
        &Registers,
        async |db, primary| Pause::start(&db.pod(primary)?, "mysql"),
    )
    .await
}

/// Fault: the operator is cut off from the primary (both operator pods' traffic dropped
/// in the primary's network namespace) while clients still reach it. The operator cannot
/// tell this from a dead primary, so it fails over: the replicas are fenced before a new
/// primary is chosen, so the old one can no longer get a commit acknowledged, and once the
/// partition heals it is demoted (its unacknowledged transactions make it errant, and it
/// is re-seeded). Checked: no acknowledged write lost, replicas identical to the primary,
/// and porcupine finds the [`Registers`]' history linearizable: the old primary, still
/// reachable by clients, neither acknowledged a write after the failover nor answered a
/// read with a value the new primary had already replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (faults act on host network namespaces): make cluster-up"]
async fn mysql_fault_operator_cut_off_from_the_primary() -> TestResult {
    fault_scenario_with(
        "mysql_fault_operator_cut_off_from_the_primary",
        &format!("iptables DROP of the operator pods' addresses in the primary's network namespace (both directions) until another primary is recorded (and at least 10 s), while 4 clients insert rows one at a time through the read-write Service and {REGISTERS}; write unavailability is the longest time between two acknowledgements of inserts after the cut; replicas' CHECKSUM TABLE compared with the primary's"),
        Lasting::UntilFailover,
        &Registers,
        async |db, primary| Partition::start(&db.pod(primary)?, &db.operator_ips()?),
    )
    .await
}

impl Db {
    /// Evicts pod `name` through the Eviction API, as a node drain does (a graceful
    /// deletion the PodDisruptionBudget allows).
    fn evict(&self, name: &str) -> Result<Gone, statecraft_e2e::E2eError> {
        let eviction = json!({
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": self.ns.name},
        });
        let path = format!("/api/v1/namespaces/{}/pods/{name}/eviction", self.ns.name);
        self.cluster.kubectl_with_input(&["create", "--raw", &path, "-f", "-"], Some(&eviction.to_string()))?;
        Ok(Gone)
    }

    /// Deletes the operator's leader pod and then pod `primary`, both gracefully.
    fn delete_leader_and(&self, primary: &str) -> Result<Gone, statecraft_e2e::E2eError> {
        let leader = operator::leader_pod(&self.cluster, &self.ns.name, MysqlOperator::NAME)?;
        for pod in [leader.as_str(), primary] {
            self.kubectl(&["delete", "pod", pod, "--wait=false"])?;
        }
        Ok(Gone)
    }
}

/// A fault that is over once injected: a pod deleted (the StatefulSet makes it again).
struct Gone;

impl Fault for Gone {
    fn end(self) -> Result<(), statecraft_e2e::E2eError> {
        Ok(())
    }
}

/// Checks, beside a scenario's writers, that the primary moved by a switchover (its
/// server kept serving until the operator moved it): per run one `Switchover` Event more,
/// no `Failover`, and no `FailedPreStopHook` (the kubelet's Event when the hand-over hook
/// gave up after its 30 s).
struct HandOver;

/// What [`HandOver`] counts in a cluster: (`Switchover` Events, `Failover` Events,
/// `FailedPreStopHook` Events of its pods).
async fn moves(db: &Db) -> Result<(u32, u32, u32), statecraft_e2e::E2eError> {
    let mut hooks = 0;
    for i in 0..3 {
        hooks += events::count(&db.cluster, &db.ns.name, &format!("{}-{i}", db.name), "FailedPreStopHook").await?;
    }
    Ok((db.events("Switchover").await?, db.events("Failover").await?, hooks))
}

impl Workload for HandOver {
    type Running = (u32, u32, u32);

    async fn start(
        &self,
        db: &Db,
        _: &str,
        _: usize,
    ) -> Result<(u32, u32, u32), Box<dyn std::error::Error + Send + Sync>> {
        Ok(moves(db).await?)
    }

    async fn stop(
        &self,
        db: &Db,
        before: (u32, u32, u32),
    ) -> Result<Checked, Box<dyn std::error::Error + Send + Sync>> {
        let after = moves(db).await?;
        let (switchovers, failovers, hooks) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
        let failure = (switchovers == 0 || failovers > 0 || hooks > 0).then(|| {
            format!("{switchovers} switchover(s), {failovers} failover(s), {hooks} hand-over hook(s) timed out")
        });
        Ok(Checked {
            figures: json!({"switchovers": switchovers, "failovers": failovers, "failed_prestop_hooks": hooks}),
            failure,
        })
    }
}

/// Fault: the primary's pod is evicted, as a node drain does, while four clients write.
/// Its preStop hook keeps the server up until the read-write Service leads to another
/// writable server, so the operator moves the primary by a switchover (the old one
/// stops writes, the target applies everything, then takes writes and the label) instead
/// of failing over from a server that is shutting down. Checked: a switchover, not a
/// failover, and no hook timed out; no acknowledged write lost; replicas identical to the
/// primary. The write gap is the figure (target: at most 1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_fault_primary_evicted_hands_over_before_its_server_stops() -> TestResult {
    fault_scenario_with(
        "mysql_fault_primary_evicted_hands_over_before_its_server_stops",
        "Eviction API on the primary's pod (policy/v1, as kubectl drain does) while 4 clients insert rows one at a time through the read-write Service; write unavailability is the longest time between two acknowledgements of inserts after the eviction; Events counted: Switchover, Failover, FailedPreStopHook; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::UntilFailover,
        &HandOver,
        async |db, primary| db.evict(primary),
    )
    .await
}

/// Fault: the operator's leader pod and the primary's pod are deleted together,
/// gracefully (a rolling node replacement): the leader gives its Lease up as it stops,
/// the standby takes over, and the primary, held up by its preStop hook, is handed over.
/// Checked: a switchover, not a failover; nothing lost; replicas identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_fault_operator_leader_and_primary_deleted_together() -> TestResult {
    fault_scenario_with(
        "mysql_fault_operator_leader_and_primary_deleted_together",
        "kubectl delete pod (graceful) of the operator pod holding the Lease, then of the primary's pod, while 4 clients insert rows one at a time through the read-write Service; write unavailability is the longest time between two acknowledgements of inserts after the deletions; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::UntilFailover,
        &HandOver,
        async |db, primary| db.delete_leader_and(primary),
    )
    .await
}

/// Checks, beside a scenario's writers, that the cluster rode a fault out without moving
/// its primary: no `Failover` Event and the same primary before and after, and, when
/// `waits` names any, at least one Event of those wait reasons (the operator saw the
/// danger and refused, rather than never noticing).
struct NoFailover {
    waits: &'static [&'static str],
}

/// What [`NoFailover`] counts, before and after a run.
struct Refusals {
    primary: Option<String>,
    failovers: u32,
    waits: u32,
}

impl NoFailover {
    async fn count(&self, db: &Db) -> Result<Refusals, Box<dyn std::error::Error + Send + Sync>> {
        let mut waits = 0;
        for reason in self.waits {
            waits += db.events(reason).await?;
        }
        Ok(Refusals { primary: db.status().await?.current_primary, failovers: db.events("Failover").await?, waits })
    }
}

impl Workload for NoFailover {
    type Running = Refusals;

    async fn start(&self, db: &Db, _: &str, _: usize) -> Result<Refusals, Box<dyn std::error::Error + Send + Sync>> {
        self.count(db).await
    }

    async fn stop(&self, db: &Db, before: Refusals) -> Result<Checked, Box<dyn std::error::Error + Send + Sync>> {
        let after = self.count(db).await?;
        let (failovers, waits) = (after.failovers - before.failovers, after.waits - before.waits);
        let moved = after.primary != before.primary;
        let failure = (failovers > 0 || moved || (!self.waits.is_empty() && waits == 0)).then(|| {
            format!(
                "{failovers} failover(s), primary {:?} then {:?}, {waits} Event(s) of {:?}",
                before.primary, after.primary, self.waits
            )
        });
        Ok(Checked { figures: json!({"failovers": failovers, "wait_events": waits}), failure })
    }
}

impl Db {
    /// The IPs of the pods of every member but `primary`.
    fn replica_ips(&self, primary: &str) -> Result<Vec<String>, statecraft_e2e::E2eError> {
        (0..3).map(|i| format!("{}-{i}", self.name)).filter(|m| m != primary).map(|m| Ok(self.pod(&m)?.ip)).collect()
    }
}

/// Fault: the primary is cut off from both replicas while the operator and the clients
/// still reach it. Nothing is wrong that a failover would mend without risk: the primary
/// answers, and no replica can be known to hold its latest commits. So the operator keeps
/// it; its commits wait for a replica's acknowledgement (semi-sync, no asynchronous
/// fallback within the day-long timeout), so no write is acknowledged that only the
/// primary holds, and writes resume once the partition heals. Checked: no failover, no
/// acknowledged write lost, replicas identical; the write gap is the partition's length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (faults act on host network namespaces): make cluster-up"]
async fn mysql_fault_primary_cut_off_from_its_replicas() -> TestResult {
    fault_scenario_with(
        "mysql_fault_primary_cut_off_from_its_replicas",
        "iptables DROP of both replicas' addresses in the primary's network namespace (both directions) for 20 s, while 4 clients insert rows one at a time through the read-write Service; write unavailability is the longest time between two acknowledgements of inserts after the cut; Failover Events counted; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::For(Duration::from_secs(20)),
        &NoFailover { waits: &[] },
        async |db, primary| Partition::start(&db.pod(primary)?, &db.replica_ips(primary)?),
    )
    .await
}

/// Fault: the primary is isolated from everything (its pod's traffic dropped but for
/// loopback): the operator, the replicas and the clients all lose it. The operator fences
/// the replicas, promotes the one that received the most, and moves the read-write
/// Service; the isolated server's last commits were never acknowledged (no replica
/// received them), and once it is back it is demoted (errant, then re-seeded). Checked:
/// no acknowledged write lost, replicas identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (faults act on host network namespaces): make cluster-up"]
async fn mysql_fault_primary_isolated_from_everything() -> TestResult {
    fault_scenario(
        "mysql_fault_primary_isolated_from_everything",
        "iptables DROP of all traffic but loopback in the primary's network namespace until another primary is recorded (and at least 10 s), while 4 clients insert rows one at a time through the read-write Service; write unavailability is the longest time between two acknowledgements of inserts after the isolation; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::UntilFailover,
        async |db, primary| Partition::isolate(&db.pod(primary)?),
    )
    .await
}

/// Fault: the case of durable acknowledgements. One replica is cut off from the primary
/// for 2 s, so the other is the only one acknowledging: the most advanced, with commits
/// nobody else has. Then the primary is paused and that replica's server is killed at
/// once (SIGKILL; the kubelet restarts it), and MariaDB discards its relay log as it
/// comes back. The lagging replica lacks the latest acknowledged commits and the restarted
/// one may have lost them: promoting either could lose them, so the operator must refuse
/// (`ReplicaRestartedBeforeFailover`, or `NotEnoughReplicasForSafeFailover` while the
/// restarted server is still down, `PodCrashLooping` once the kubelet backs its restarts
/// off) and keep the primary until it answers again, 20 s later. Checked: no failover and
/// at least one such refusal Event; no acknowledged write lost; replicas identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (faults act on host processes): make cluster-up"]
async fn mysql_fault_most_advanced_replica_restarts_while_the_primary_is_down() -> TestResult {
    fault_scenario_with(
        "mysql_fault_most_advanced_replica_restarts_while_the_primary_is_down",
        "iptables DROP between the primary and one replica (both directions) for 2 s while 4 clients insert rows one at a time through the read-write Service, so the other replica alone acknowledges; then SIGSTOP of the primary's mysql container and SIGKILL of that replica's, for 20 s; then SIGCONT and the partition healed; write unavailability is the longest time between two acknowledgements of inserts after the partition started; Failover and refusal Events counted; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::For(Duration::from_secs(20)),
        // While the killed server is down, the refusal is NotEnoughReplicasForSafeFailover,
        // named after the pod's own problem once the kubelet backs off its restarts (a
        // second kill within 10 min): PodCrashLooping.
        &NoFailover { waits: &["ReplicaRestartedBeforeFailover", "NotEnoughReplicasForSafeFailover", "PodCrashLooping"] },
        async |db, primary| {
            let replicas: Vec<String> = (0..3).map(|i| format!("{}-{i}", db.name)).filter(|m| m != primary).collect();
            let (lagging, advanced) = (db.pod(&replicas[0])?, db.pod(&replicas[1])?);
            let primary = db.pod(primary)?;
            let partition = Partition::start(&primary, std::slice::from_ref(&lagging.ip))?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let pause = Pause::start(&primary, "mysql")?;
            crash(&advanced, "mysql")?;
            Ok((pause, partition))
        },
    )
    .await
}

/// Fault: the API server stops for 60 s (SIGSTOP), once no other test runs (see
/// `statecraft_e2e::outage`). The operator cannot renew its Lease, so it stops acting
/// within the lease (fenced), and nothing in the data plane needs it:
/// the servers replicate and the Services' rules stay in kube-proxy, so clients keep
/// writing. When the API returns, the operator takes its Lease again and finds the
/// cluster as it left it. Checked: no failover; no acknowledged write lost; replicas
/// identical; the write gap is the figure (expected: none beyond ordinary latency).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (stops its kube-apiserver process): make cluster-up"]
async fn mysql_fault_api_server_stopped_for_a_minute() -> TestResult {
    fault_scenario_with(
        "mysql_fault_api_server_stopped_for_a_minute",
        "SIGSTOP of the local cluster's kube-apiserver for 60 s, then SIGCONT, while 4 clients insert rows one at a time through the read-write Service (connection options read before); write unavailability is the longest time between two acknowledgements of inserts after the stop; Failover Events counted; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::For(Duration::from_secs(60)),
        &NoFailover { waits: &[] },
        async |_, _| {
            // Every other test would lose the API too: start when this one runs alone.
            let alone = outage::alone().await;
            Ok((Pause::api_server()?, alone))
        },
    )
    .await
}

impl Db {
    /// Kills the operator's leader and the primary's server at once (SIGKILL: the leader
    /// cannot give its Lease up, the server cannot shut down cleanly), then force-deletes
    /// both pods, as the loss of their node would.
    fn kill_leader_and(&self, primary: &str) -> Result<Gone, statecraft_e2e::E2eError> {
        let leader = operator::leader_pod(&self.cluster, &self.ns.name, MysqlOperator::NAME)?;
        crash(&self.pod(&leader)?, "operator")?;
        crash(&self.pod(primary)?, "mysql")?;
        for pod in [primary, leader.as_str()] {
            self.kubectl(&["delete", "pod", pod, "--grace-period=0", "--force", "--wait=false"])?;
        }
        Ok(Gone)
    }
}

/// Fault: the operator's leader and the primary die together (their processes killed,
/// their pods force-deleted). The standby operator takes the Lease once it expires (3 s by default),
/// finds the primary's pod gone or not started, and fails over at once; or the old
/// primary is back first and made writable again. Either way writes resume with nothing
/// lost. The write gap is the figure (target: at most 5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local cluster (faults act on host processes): make cluster-up"]
async fn mysql_fault_operator_leader_and_primary_killed_together() -> TestResult {
    fault_scenario(
        "mysql_fault_operator_leader_and_primary_killed_together",
        "SIGKILL of the processes of the operator pod holding the Lease (the operator's Lease timing: 3 s, renew deadline 2 s, retries every 0.5 s, unless operator_env says otherwise) and of the primary's mysql container, then both pods force-deleted, while 4 clients insert rows one at a time through the read-write Service; 15 s later the writers stop; write unavailability is the longest time between two acknowledgements of inserts after the kill; replicas' CHECKSUM TABLE compared with the primary's",
        Lasting::For(Duration::from_secs(15)),
        async |db, primary| db.kill_leader_and(primary),
    )
    .await
}
