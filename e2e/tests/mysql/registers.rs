//! MySQL single-row registers read and written by concurrent clients through the read-write
//! Service, checked for linearizability by porcupine.
//!
//! A register is a row of `app.reg`, absent until first written (as the checker's model
//! starts: each run uses keys of its own). Every operation is one autocommit statement on a
//! connection of its own, so that each finds whichever server the Service routes to at
//! that moment, as a client of a pool that reconnects would:
//!
//! - read: `SELECT v ... WHERE k = key`, no row read as absent;
//! - write: `INSERT ... ON DUPLICATE KEY UPDATE v = value`, which sets the register
//!   whether or not the row exists yet;
//! - compare-and-swap: `UPDATE ... SET v = value WHERE k = key AND v = expected`, swapped
//!   exactly when the server reports one *matched* row. The connections ask for
//!   `CLIENT_FOUND_ROWS`, without which MariaDB reports changed rows instead; values are
//!   unique as well, so that a read names the write it saw.
//!
//! What came of a call: a connection refused or not made in time, or a server error that
//! refuses the statement before it runs (`read_only`: a server that is not the primary),
//! is `Failed`; any other error after the statement was sent (connection lost, no answer
//! within the client's timeout, connection killed) is `Unknown`: the write may have been
//! committed, or may commit later, or never. A read that failed constrains nothing, so its
//! outcome matters little. Semi-sync (AFTER_SYNC) makes a commit visible and acknowledged
//! only once a replica has it, which is what makes a linearizable history possible across
//! a failover at all.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use serde_json::json;
use statecraft_e2e::history::{Action, History, Kind, Outcome, Verdict, client_rng};
use statecraft_e2e::results::unix_now;
use statecraft_e2e::writes::StopFlag;

use super::Db;
use super::faults::{Checked, Workload};

/// The registers' table: one row per register.
const TABLE: &str = "app.reg";

/// The registers of a run (prefixed with the run): few, so that the clients contend.
const KEYS: [&str; 3] = ["a", "b", "c"];

/// How many register clients run at once.
const CLIENTS: usize = 4;

/// How long a client waits for a connection (then the call failed: nothing was sent).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a client waits for a statement's answer (then its outcome is unknown).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(2);

/// `ER_OPTION_PREVENTS_STATEMENT`: the server is read-only (a replica, a demoted primary).
/// MariaDB checks it before the statement runs and again at commit, rolling back: such a
/// write definitely did not take effect.
const READ_ONLY_ERROR: u16 = 1290;

/// Register clients, as a [`Workload`] of a fault scenario: [`CLIENTS`] clients on
/// [`KEYS`] through the read-write Service, their history checked by porcupine once they
/// stop.
pub(super) struct Registers;

/// The register clients of one run, running.
pub(super) struct Running {
    /// The history's name: its file in `results/e2e/histories/`.
    name: String,
    history: History,
    stop: StopFlag,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Workload for Registers {
    type Running = Running;

    async fn start(
        &self,
        db: &Db,
        test: &str,
        run: usize,
    ) -> Result<Running, Box<dyn std::error::Error + Send + Sync>> {
        let mut c = db.connect().await?;
        c.query_drop(format!("CREATE TABLE IF NOT EXISTS {TABLE} (k VARCHAR(64) PRIMARY KEY, v VARCHAR(64) NOT NULL)"))
            .await?;
        c.disconnect().await?;
        let opts: Opts = OptsBuilder::from_opts(db.opts().await?).client_found_rows(true).into();
        let keys: Vec<String> = KEYS.iter().map(|k| format!("run{run}/{k}")).collect();
        let (history, stop) = (History::new(), StopFlag::default());
        let clients = (0..CLIENTS)
            .map(|id| tokio::spawn(client(id, opts.clone(), keys.clone(), history.clone(), stop.clone())))
            .collect();
        Ok(Running { name: format!("{test}-run{run}"), history, stop, clients })
    }

    async fn stop(&self, _: &Db, running: Running) -> Result<Checked, Box<dyn std::error::Error + Send + Sync>> {
        running.stop.set();
        for c in running.clients {
            c.await?;
        }
        let history = &running.history;
        let ops = history.ops();
        let (ok, failed, unknown) = history.counts();
        let ok_of = |kind: Kind| ops.iter().filter(|op| op.kind == kind && op.outcome == Outcome::Ok).count();
        let (reads, writes, cas) = (ok_of(Kind::Get), ok_of(Kind::Put), ok_of(Kind::Cas));
        let swapped = ops.iter().filter(|op| op.kind == Kind::Cas && op.swapped == Some(true)).count();
        let verdict = history.check(&running.name)?;
        eprintln!(
            "{}: {} register operations ({ok} answered: {reads} reads, {writes} writes, {cas} cas of which {swapped} swapped; {failed} failed, {unknown} unknown); {verdict}",
            running.name,
            ops.len()
        );
        let kept = if verdict.is_linearizable() { verdict.history.clone() } else { keep(&verdict)? };
        let failure = if !verdict.is_linearizable() {
            Some(format!("{verdict}\n  kept as {}", kept.display()))
        } else if reads <= 20 || writes <= 20 || swapped <= 5 {
            Some(format!("the register clients kept working: {reads} reads, {writes} writes, {swapped} swaps"))
        } else {
            None
        };
        let figures = json!({
            "register_operations": ops.len(), "register_answered": ok, "register_failed": failed,
            "register_unknown": unknown, "register_reads": reads, "register_writes": writes,
            "register_cas": cas, "register_cas_swapped": swapped,
            "linearizable": verdict.is_linearizable(), "porcupine_verdict": format!("{:?}", verdict.verdict),
            "porcupine_operations_checked": verdict.operations, "porcupine_unknown_writes": verdict.unknown,
            "porcupine_check_seconds": verdict.check_seconds, "history": kept.display().to_string(),
        });
        Ok(Checked { figures, failure })
    }
}

/// Copies a history that is not linearizable, with porcupine's visualization, to names of
/// their own (`<name>-violation-<unix time>`), so that later runs of the test do not
/// overwrite the evidence. Returns the history's new path.
fn keep(verdict: &Verdict) -> std::io::Result<std::path::PathBuf> {
    let kept = |path: &std::path::Path| {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let ext = path.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default();
        path.with_file_name(format!("{stem}-violation-{}.{ext}", unix_now()))
    };
    if let Some(html) = &verdict.html {
        std::fs::copy(html, kept(html))?;
    }
    let history = kept(&verdict.history);
    std::fs::copy(&verdict.history, &history)?;
    Ok(history)
}

/// What a client asks of a register.
enum Request {
    Read,
    Write { value: String },
    Cas { expected: String, value: String },
}

/// What the server answered.
enum Answer {
    Read(Option<String>),
    Written,
    Swapped(bool),
}

/// One client, until `stop`: a random mix of reads, writes and compare-and-swaps (of the
/// value this client last saw in the key) on `keys`, 10 ms apart (50 ms after a call
/// that was not answered), each recorded in `history`. Values are `<client>-<n>`.
async fn client(id: usize, opts: Opts, keys: Vec<String>, history: History, stop: StopFlag) {
    let mut next = client_rng(id);
    // What this client last saw in each key: what its cas expects.
    let mut seen: BTreeMap<usize, String> = BTreeMap::new();
    let mut n = 0u64;
    while !stop.is_set() {
        let r = next();
        let k = (r % keys.len() as u64) as usize;
        let key = keys[k].as_str();
        n += 1;
        let value = format!("{id}-{n}");
        let request = match ((r >> 16) % 3, seen.get(&k)) {
            (0, _) => Request::Write { value },
            (2, Some(expected)) => Request::Cas { expected: expected.clone(), value },
            // A read, also in place of a cas that has nothing to expect yet.
            _ => Request::Read,
        };
        let (call, answer) = operate(&opts, key, &request).await;
        let outcome = answer.as_ref().err().copied().unwrap_or(Outcome::Ok);
        let action = match (&request, &answer) {
            (Request::Read, Ok(Answer::Read(read))) => Action::Get { read: read.as_deref() },
            (Request::Read, _) => Action::Get { read: None },
            (Request::Write { value }, _) => Action::Put { value },
            (Request::Cas { expected, value }, answer) => {
                let swapped = match answer {
                    Ok(Answer::Swapped(swapped)) => Some(*swapped),
                    _ => None,
                };
                Action::Cas { expected, value, swapped }
            }
        };
        history.finish(id, key, action, call, outcome);
        let now_holds = match (request, answer) {
            (_, Ok(Answer::Read(read))) => read,
            (Request::Write { value } | Request::Cas { value, .. }, Ok(Answer::Written | Answer::Swapped(true))) => {
                Some(value)
            }
            _ => None,
        };
        match now_holds {
            Some(v) => seen.insert(k, v),
            None => seen.remove(&k),
        };
        let answered = outcome == Outcome::Ok;
        tokio::time::sleep(Duration::from_millis(if answered { 10 } else { 50 })).await;
    }
}

/// Makes `request` on `key` on a new connection through `opts`. Returns when the call was
/// made (just before the statement was sent, or before connecting if that failed) and the
/// answer, or the outcome of a call that got none (Failed or Unknown, see the module's
/// comment).
async fn operate(opts: &Opts, key: &str, request: &Request) -> (Instant, Result<Answer, Outcome>) {
    let connecting = Instant::now();
    let mut conn = match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts.clone())).await {
        Ok(Ok(conn)) => conn,
        _ => return (connecting, Err(Outcome::Failed)),
    };
    let call = Instant::now();
    let answer = match tokio::time::timeout(STATEMENT_TIMEOUT, execute(&mut conn, key, request)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(mysql_async::Error::Server(e))) if e.code == READ_ONLY_ERROR => Err(Outcome::Failed),
        _ => Err(Outcome::Unknown),
    };
    // Dropping the connection closes it in the background (it may hang on a paused server).
    (call, answer)
}

/// `request`'s statement on `key`. Keys and values are the test's own (`run0/a`, `2-17`),
/// never quotes, so they are written into the statement as they are.
async fn execute(conn: &mut Conn, key: &str, request: &Request) -> Result<Answer, mysql_async::Error> {
    match request {
        Request::Read => {
            let read: Option<String> = conn.query_first(format!("SELECT v FROM {TABLE} WHERE k = '{key}'")).await?;
            Ok(Answer::Read(read))
        }
        Request::Write { value } => {
            conn.query_drop(format!(
                "INSERT INTO {TABLE} (k, v) VALUES ('{key}', '{value}') ON DUPLICATE KEY UPDATE v = VALUES(v)"
            ))
            .await?;
            Ok(Answer::Written)
        }
        Request::Cas { expected, value } => {
            conn.query_drop(format!("UPDATE {TABLE} SET v = '{value}' WHERE k = '{key}' AND v = '{expected}'")).await?;
            Ok(Answer::Swapped(conn.affected_rows() == 1))
        }
    }
}
