//! The write-path cost of the durability settings, measured with sysbench.
//!
//! Issue 13's item 1 (an acknowledged write survives a replica restarting during a
//! failover) was met by a rule of the failover decision, not by a server setting: never
//! promote past a replica that restarted and has not caught up since
//! (`operators/mysql/src/clustering/restarts.rs`). That adds nothing to the write path.
//! The alternative it was chosen over, MOCO's `sync_relay_log=1`, makes every replica
//! fsync its relay log for each event it receives, before the semi-sync acknowledgement
//! that each commit waits for. This test puts figures on that argument with a client
//! nobody here wrote, Debian's sysbench: the throughput and p99 latency of
//! `oltp_write_only` through the read-write Service under the shipped default
//! (semi-sync), with `sync_relay_log=1` on the replicas, and with asynchronous
//! replication for reference.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use serde_json::json;
use statecraft_e2e::results::{append_result, unix_now};
use statecraft_e2e::wait_until;

use super::{Db, TestResult};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// sysbench's tables and rows per table: small, so `prepare` is quick on a loaded machine.
const TABLES: u32 = 4;
const TABLE_SIZE: u32 = 10_000;
/// Client threads, each with its own connection through the read-write Service.
const THREADS: u32 = 4;
/// Seconds of one measured run.
const SECONDS: u32 = 60;

/// A configuration of the cluster whose write path is measured.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Durability {
    /// What Statecraft ships: lossless semi-sync (AFTER_SYNC), relay logs at the server's
    /// default `sync_relay_log` (an fsync every 10000 events).
    SemiSync,
    /// The alternative argued against in docs/mysql.md: semi-sync, and every replica
    /// fsyncs its relay log per received event. `spec.serverConfig` refuses
    /// `sync_relay_log`, so it is set at run time on each replica (`SET GLOBAL`, dynamic in
    /// MariaDB), which the operator leaves alone.
    SemiSyncSyncRelayLog,
    /// Reference: `spec.semiSync.enabled: false`, commits wait for no replica.
    Async,
}

impl Durability {
    fn name(self) -> &'static str {
        match self {
            Durability::SemiSync => "semi-sync (default)",
            Durability::SemiSyncSyncRelayLog => "semi-sync + sync_relay_log=1 on the replicas",
            Durability::Async => "asynchronous (semiSync.enabled=false)",
        }
    }

    fn how(self) -> &'static str {
        match self {
            Durability::SemiSync => "the MySQLCluster as Statecraft ships it",
            Durability::SemiSyncSyncRelayLog => {
                "the default cluster with SET GLOBAL sync_relay_log = 1 on both replicas (spec.serverConfig refuses \
                 the key), checked after each run"
            }
            Durability::Async => {
                "spec.semiSync.enabled patched to false, measured once every server restarted with it (the rolling \
                 restart also ends the run-time sync_relay_log of the previous configuration)"
            }
        }
    }

    /// Checks that the run measured this configuration: with semi-sync every commit got an
    /// acknowledgement (the primary's counters grew by at least sysbench's transactions and
    /// none went without), without it none waited; `sync_relay_log` was still 1 on every
    /// replica afterwards.
    async fn check(self, db: &Db, before: &SemiSyncCounters, after: &SemiSyncCounters, report: &Report) -> TestResult {
        let went_back = "the primary's semi-sync counters went back: another primary?";
        let acknowledged = after.acknowledged.checked_sub(before.acknowledged).ok_or(went_back)?;
        let not_acknowledged = after.not_acknowledged.checked_sub(before.not_acknowledged).ok_or(went_back)?;
        if self == Durability::Async {
            assert!(!after.active, "{}: the primary still waits for acknowledgements", self.name());
            assert_eq!(acknowledged, 0, "{}: commits were acknowledged by a replica", self.name());
            return Ok(());
        }
        assert!(after.active, "{}: the primary fell back to asynchronous replication", self.name());
        assert_eq!(not_acknowledged, 0, "{}: commits went without an acknowledgement", self.name());
        assert!(
            acknowledged >= report.transactions,
            "{}: {acknowledged} acknowledged commits for {} sysbench transactions",
            self.name(),
            report.transactions
        );
        if self == Durability::SemiSyncSyncRelayLog {
            for mut replica in db.replicas().await? {
                let value: Option<u64> = replica.query_first("SELECT @@GLOBAL.sync_relay_log").await?;
                replica.disconnect().await?;
                assert_eq!(value, Some(1), "{}: sync_relay_log on a replica", self.name());
            }
        }
        Ok(())
    }
}

/// The primary's semi-sync state (MariaDB's `Rpl_semi_sync_master_*` status).
struct SemiSyncCounters {
    /// Its commits wait for an acknowledgement (`Rpl_semi_sync_master_status`).
    active: bool,
    /// Commits acknowledged by a replica (`Rpl_semi_sync_master_yes_tx`).
    acknowledged: u64,
    /// Commits that returned without one (`Rpl_semi_sync_master_no_tx`).
    not_acknowledged: u64,
}

/// What sysbench's report says of one run.
#[derive(Debug, serde::Serialize)]
struct Report {
    transactions: u64,
    transactions_per_second: f64,
    queries_per_second: f64,
    /// Of a whole transaction (BEGIN, two UPDATEs, a DELETE, an INSERT, COMMIT); the
    /// commit is where semi-sync waits.
    p99_latency_ms: f64,
    /// Transactions sysbench retried after a deadlock or a lock wait timeout (errors 1213,
    /// 1205, 1020: its default `--mysql-ignore-errors`), which its default random
    /// distribution (a few hot rows) makes happen now and then without any fault. Any
    /// other error ends the run with a failure.
    retried_after_errors: u64,
    reconnects: u64,
}

impl Report {
    /// Reads sysbench 1.0's report: `transactions: 1234 (20.55 per sec.)`,
    /// `99th percentile: 45.79`, ...
    fn parse(out: &str) -> Result<Report, Error> {
        let words = |label: &str| -> Result<Vec<&str>, Error> {
            let line = out
                .lines()
                .find_map(|l| l.trim().strip_prefix(label))
                .ok_or_else(|| format!("no `{label}` in sysbench's report:\n{out}"))?;
            Ok(line.split_whitespace().map(|w| w.trim_start_matches('(')).collect())
        };
        fn number<T: std::str::FromStr>(words: &[&str], i: usize, label: &str) -> Result<T, Error> {
            let word = words.get(i).ok_or_else(|| format!("`{label}` has no value {i} in sysbench's report"))?;
            Ok(word.parse().map_err(|_| format!("`{label}`: `{word}` is not a number"))?)
        }
        let (transactions, queries) = (words("transactions:")?, words("queries:")?);
        Ok(Report {
            transactions: number(&transactions, 0, "transactions")?,
            transactions_per_second: number(&transactions, 1, "transactions")?,
            queries_per_second: number(&queries, 1, "queries")?,
            p99_latency_ms: number(&words("99th percentile:")?, 0, "99th percentile")?,
            retried_after_errors: number(&words("ignored errors:")?, 0, "ignored errors")?,
            reconnects: number(&words("reconnects:")?, 0, "reconnects")?,
        })
    }
}

/// Debian's sysbench, as root of one server address.
struct Sysbench {
    host: String,
    password: String,
    threads: u32,
    seconds: u32,
}

impl Sysbench {
    /// sysbench against the address and root password of `opts`, with [`THREADS`] threads
    /// for [`SECONDS`] per run.
    fn with(opts: &Opts) -> Result<Sysbench, Error> {
        let password = opts.pass().ok_or("no root password")?.to_string();
        Ok(Sysbench { host: opts.ip_or_hostname().to_string(), password, threads: THREADS, seconds: SECONDS })
    }

    /// The arguments of `oltp_write_only <command>`. Errors other than sysbench's default
    /// retried ones (deadlocks, lock wait timeouts) end it with a failure.
    fn args(&self, command: &str, password: &str) -> Vec<String> {
        let options = [
            "--db-driver=mysql".to_string(),
            format!("--mysql-host={}", self.host),
            "--mysql-port=3306".into(),
            "--mysql-user=root".into(),
            format!("--mysql-password={password}"),
            "--mysql-db=sbtest".into(),
            format!("--tables={TABLES}"),
            format!("--table-size={TABLE_SIZE}"),
            format!("--threads={}", self.threads),
            format!("--time={}", self.seconds),
            "--report-interval=0".into(),
            "--percentile=99".into(),
        ];
        std::iter::once("oltp_write_only".to_string()).chain(options).chain([command.to_string()]).collect()
    }

    /// The command line as recorded: the password left out.
    fn command_line(&self, command: &str) -> String {
        format!("sysbench {}", self.args(command, "<root password>").join(" "))
    }

    /// Runs `sysbench oltp_write_only <command>`; its standard output, or an error if it
    /// cannot run or fails.
    async fn run(&self, command: &str) -> Result<String, Error> {
        output(tokio::process::Command::new("sysbench").args(self.args(command, &self.password))).await
    }
}

/// Standard output of `cmd`, or an error with both outputs if it cannot run or fails.
async fn output(cmd: &mut tokio::process::Command) -> Result<String, Error> {
    let out = cmd.output().await.map_err(|e| format!("cannot run sysbench (scripts/deps.sh installs it): {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(
            format!("sysbench failed ({}):\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr)).into()
        );
    }
    Ok(stdout)
}

impl Db {
    /// A connection to each replica at its own address (not through a Service).
    async fn replicas(&self) -> Result<Vec<Conn>, Error> {
        let mut out = Vec::new();
        for (_, replica) in self.replica_opts().await? {
            out.push(Conn::new(replica).await?);
        }
        Ok(out)
    }

    /// The primary's semi-sync state, read through the read-write Service.
    async fn semi_sync_counters(&self) -> Result<SemiSyncCounters, Error> {
        let mut c = self.connect().await?;
        let rows: Vec<(String, String)> = c
            .query(
                "SELECT UPPER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME \
                 IN ('RPL_SEMI_SYNC_MASTER_STATUS', 'RPL_SEMI_SYNC_MASTER_YES_TX', 'RPL_SEMI_SYNC_MASTER_NO_TX')",
            )
            .await?;
        c.disconnect().await?;
        let value = |name: &str| {
            rows.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).ok_or_else(|| format!("no status {name}"))
        };
        Ok(SemiSyncCounters {
            active: value("RPL_SEMI_SYNC_MASTER_STATUS")?.eq_ignore_ascii_case("ON"),
            acknowledged: value("RPL_SEMI_SYNC_MASTER_YES_TX")?.parse()?,
            not_acknowledged: value("RPL_SEMI_SYNC_MASTER_NO_TX")?.parse()?,
        })
    }

    /// Waits until every server restarted with semi-sync off (the replica side is read
    /// from my.cnf only, so a server reporting it off restarted since the change) and the
    /// primary's source side is off too, and the cluster is Ready.
    async fn semi_sync_off_everywhere(&self) -> TestResult {
        wait_until(Duration::from_secs(600), "every server restarted with semi-sync off", || async {
            let mut primary = self.connect().await.ok()?;
            let (source, replica): (u64, u64) = primary
                .query_first("SELECT @@GLOBAL.rpl_semi_sync_master_enabled, @@GLOBAL.rpl_semi_sync_slave_enabled")
                .await
                .ok()??;
            let _ = primary.disconnect().await;
            let servers = self.replicas().await.ok()?;
            let mut replicas_off = servers.len() == 2;
            for mut c in servers {
                let on: Option<u64> = c.query_first("SELECT @@GLOBAL.rpl_semi_sync_slave_enabled").await.ok()?;
                let _ = c.disconnect().await;
                replicas_off &= on == Some(0);
            }
            (source == 0 && replica == 0 && replicas_off).then_some(())
        })
        .await?;
        self.ready().await?;
        Ok(())
    }
}

/// `SYSBENCH_RUNS` (default 1) runs of sysbench in configuration `config`, each checked
/// (sysbench succeeded, so without errors but the retried ones it counts; no reconnects;
/// the configuration was in force), and one record of them all appended to
/// `results/e2e/mysql-sysbench.jsonl`.
async fn measure(db: &Db, sysbench: &Sysbench, version: &str, config: Durability) -> TestResult {
    let runs: usize = std::env::var("SYSBENCH_RUNS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(1);
    let mut reports = Vec::new();
    for run in 0..runs {
        let before = db.semi_sync_counters().await?;
        let report = Report::parse(&sysbench.run("run").await?)?;
        let after = db.semi_sync_counters().await?;
        eprintln!("{} run {run}: {report:?}", config.name());
        assert_eq!(report.reconnects, 0, "{}: sysbench reconnected: {report:?}", config.name());
        assert!(report.transactions > 0, "{}: no transaction: {report:?}", config.name());
        config.check(db, &before, &after, &report).await?;
        reports.push(report);
    }
    let spread = |figure: fn(&Report) -> f64| {
        let mut v: Vec<f64> = reports.iter().map(figure).collect();
        v.sort_by(f64::total_cmp);
        let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
        json!({"min": v.first(), "median": median, "max": v.last()})
    };
    append_result(
        "mysql-sysbench.jsonl",
        json!({
            "test": "mysql_measure_sysbench_write_cost_of_durability_settings",
            "configuration": config.name(),
            "how": config.how(),
            "method": format!(
                "{version} oltp_write_only from the node through the read-write Service's ClusterIP (kube-proxy): \
                 {TABLES} tables x {TABLE_SIZE} rows prepared once, {runs} run(s) of {SECONDS} s with {THREADS} threads; \
                 p99 is of whole transactions; 3-server MariaDB 10.11 cluster (CPU request 50m, memory limit 512Mi, \
                 host-path volumes) on the local single-node cluster of a shared, loaded 2-core machine"
            ),
            "command": sysbench.command_line("run"),
            "runs": reports,
            "transactions_per_second": spread(|r| r.transactions_per_second),
            "queries_per_second": spread(|r| r.queries_per_second),
            "p99_latency_ms": spread(|r| r.p99_latency_ms),
            "unix_time": unix_now(),
        }),
    );
    Ok(())
}

/// Measures, with Debian's sysbench (`oltp_write_only`: per transaction two UPDATEs, a
/// DELETE and an INSERT, then COMMIT) through the read-write Service's ClusterIP, the
/// write throughput and p99 transaction latency of one 3-server MariaDB cluster in three
/// configurations, in this order: as shipped (lossless semi-sync), with
/// `sync_relay_log=1` on both replicas (the alternative to the failover rule of issue
/// 13's item 1, see docs/mysql.md), and with `spec.semiSync.enabled: false`
/// (asynchronous, for reference). `SYSBENCH_RUNS` (default 1) runs of 60 s each, with 4
/// threads on 4 tables of 10000 rows; one record per configuration (each run's figures,
/// their min / median / max, the command line) in `results/e2e/mysql-sysbench.jsonl`.
///
/// Fails if sysbench cannot run, fails (any error but the deadlocks and lock wait
/// timeouts it retries and counts) or reconnects, or if a run did not measure its
/// configuration (the primary's semi-sync counters, the replicas' `sync_relay_log`);
/// timings are recorded, never asserted.
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_measure_sysbench_write_cost_of_durability_settings() -> TestResult {
    // Fails fast, before a cluster is made, where sysbench is missing.
    let version = output(tokio::process::Command::new("sysbench").arg("--version")).await?.trim().to_string();
    let db = Db::create("mysql-sysbench", "db", 3, json!({})).await?;
    db.connect().await?.query_drop("CREATE DATABASE sbtest").await?;
    let sysbench = Sysbench::with(&db.opts().await?)?;
    sysbench.run("prepare").await?;

    measure(&db, &sysbench, &version, Durability::SemiSync).await?;

    for mut replica in db.replicas().await? {
        replica.query_drop("SET GLOBAL sync_relay_log = 1").await?;
    }
    measure(&db, &sysbench, &version, Durability::SemiSyncSyncRelayLog).await?;

    db.patch(json!({"spec": {"semiSync": {"enabled": false}}}))?;
    db.semi_sync_off_everywhere().await?;
    measure(&db, &sysbench, &version, Durability::Async).await?;

    db.ns.pass();
    Ok(())
}

/// The leader's Lease renewals while sysbench loads the machine: how far the slowest fell
/// behind, against the renew deadline after which a leader gives the Lease up (and the
/// operator restarts as a standby). What decides whether a shorter Lease (a faster takeover
/// when the leader dies with a primary, issue 13's item 7) is safe as the default.
///
/// A 3-server cluster; `oltp_write_only` with 16 threads through the read-write Service for
/// `LEASE_LOAD_SECONDS` (default 300) while the Lease is read every 100 ms; the gaps between
/// the distinct `renewTime`s seen (the leader renews every retry period, 0.5 s, so a gap of
/// g means the slowest renewal took about g - 0.5 s), the Lease's transitions and the
/// operator containers' restarts over the run. One record in
/// `results/e2e/mysql-lease-load.jsonl` (with `operator_env`: set
/// `STATECRAFT_E2E_OPERATOR_ENV` to measure other Lease settings). Recorded, not asserted.
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn mysql_measure_leader_lease_renewals_under_sysbench_load() -> TestResult {
    use statecraft_e2e::operator;
    use statecraft_mysql::MysqlOperator;
    use statecraft_shared::runner::Operator;

    let version = output(tokio::process::Command::new("sysbench").arg("--version")).await?.trim().to_string();
    let seconds: u32 = std::env::var("LEASE_LOAD_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let db = Db::create("mysql-lease-load", "db", 3, json!({})).await?;
    db.connect().await?.query_drop("CREATE DATABASE sbtest").await?;
    let mut sysbench = Sysbench::with(&db.opts().await?)?;
    sysbench.run("prepare").await?;
    (sysbench.threads, sysbench.seconds) = (16, seconds);

    let (cluster, ns) = (db.cluster.clone(), db.ns.name.clone());
    let restarts = || {
        let counts = cluster.kubectl(&[
            "get",
            "pods",
            "-n",
            &ns,
            "-l",
            &format!("app.kubernetes.io/name={}", MysqlOperator::NAME),
            "-o",
            "jsonpath={.items[*].status.containerStatuses[*].restartCount}",
        ])?;
        Ok::<u32, Error>(counts.split_whitespace().filter_map(|c| c.parse::<u32>().ok()).sum())
    };
    let before = operator::lease(&cluster, &ns, MysqlOperator::NAME).await?;
    let restarts_before = restarts()?;
    let stop = statecraft_shared::tokio_util::sync::CancellationToken::new();
    let sampler = {
        let (cluster, ns, stop) = (cluster.clone(), ns.clone(), stop.clone());
        tokio::spawn(async move {
            let mut renewals = Vec::new();
            while !stop.is_cancelled() {
                if let Ok(lease) = operator::lease(&cluster, &ns, MysqlOperator::NAME).await
                    && let Some(at) = lease.renewed
                    && renewals.last() != Some(&at)
                {
                    renewals.push(at);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            renewals
        })
    };
    let report = Report::parse(&sysbench.run("run").await?);
    stop.cancel();
    let renewals = sampler.await?;
    let report = report?;
    let after = operator::lease(&cluster, &ns, MysqlOperator::NAME).await?;
    let restarted = restarts()?.saturating_sub(restarts_before);

    let mut gaps: Vec<f64> =
        renewals.windows(2).map(|w| w[1].duration_since(w[0]).as_secs_f64()).filter(|g| *g > 0.0).collect();
    gaps.sort_by(f64::total_cmp);
    let at = |q: f64| gaps.get(((gaps.len() as f64 - 1.0) * q).round() as usize).copied();
    eprintln!(
        "{} renewals seen; gap median {:?} p99 {:?} max {:?}; transitions {} -> {}; operator restarts {restarted}",
        renewals.len(),
        at(0.5),
        at(0.99),
        gaps.last(),
        before.transitions,
        after.transitions
    );
    assert!(renewals.len() > seconds as usize, "the sampler saw {} renewals in {seconds} s", renewals.len());
    append_result(
        "mysql-lease-load.jsonl",
        json!({
            "test": "mysql_measure_leader_lease_renewals_under_sysbench_load",
            "method": format!(
                "{version} oltp_write_only, 16 threads, {seconds} s, through the read-write Service of a 3-server \
                 MariaDB 10.11 cluster on the local single-node cluster of a 2-core machine; the operator's Lease read \
                 every 100 ms through the API; gaps between distinct renewTimes (renewals every 0.5 s)"
            ),
            "renewals_seen": renewals.len(),
            "renewal_gap_seconds": {"median": at(0.5), "p99": at(0.99), "max": gaps.last()},
            "lease_transitions": after.transitions - before.transitions,
            "operator_restarts": restarted,
            "sysbench": report,
            "unix_time": unix_now(),
        }),
    );
    db.ns.pass();
    Ok(())
}
