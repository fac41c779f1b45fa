//! Histories of operations on registers (an etcd key, a database row), recorded by
//! concurrent test clients and checked for linearizability by `statecraft-porcupine`
//! (`e2e/porcupine`, a CLI over the porcupine checker, built into the cache's bin by
//! `make deps`).
//!
//! A test makes one [`History`], clones it into each client task, and records every call
//! with when it was made ([`History::start`]) and what came of it ([`Outcome`]): `Ok` with
//! the answer, `Failed` when the operation definitely did not take effect, `Unknown` when
//! it may have (a timeout, a connection lost mid-call). An unknown outcome is what keeps
//! the check honest under failures: porcupine lets such a write take effect at any time
//! after its call, or never.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::results::results_dir;
use crate::{E2eError, Result};

/// The checker's binary in the cache's bin (`scripts/build-go-tools.sh`).
pub const CHECKER: &str = "statecraft-porcupine";

/// What came of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The server answered.
    Ok,
    /// The operation definitely did not take effect (refused before it was sent).
    Failed,
    /// It may or may not have taken effect.
    Unknown,
}

/// The kind of an operation, in the checker's key-value words (`put`, `get`, `cas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A write of `value`.
    Put,
    /// A read that returned `value` (None: the key was absent).
    Get,
    /// Compare-and-swap: if the key holds `expected`, write `value`; `swapped` says which.
    Cas,
}

/// An operation with its answer, as a client records it.
#[derive(Clone, Copy, Debug)]
pub enum Action<'a> {
    /// A write of `value`.
    Put { value: &'a str },
    /// A read that returned `read` (None: the key was absent).
    Get { read: Option<&'a str> },
    /// If the key holds `expected`, write `value`; `swapped` is the answer (None unless
    /// the outcome is Ok).
    Cas { expected: &'a str, value: &'a str, swapped: Option<bool> },
}

/// One recorded operation: a line of the history the checker reads.
#[derive(Clone, Debug, Serialize)]
pub struct Op {
    /// The client (task) that made the call.
    pub client: usize,
    pub kind: Kind,
    pub key: String,
    /// Written (put, cas) or read (get; None: absent).
    pub value: Option<String>,
    /// The value a cas compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// Whether an answered cas swapped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swapped: Option<bool>,
    /// Nanoseconds since the history's origin.
    pub call: u64,
    #[serde(rename = "return")]
    pub ret: u64,
    pub outcome: Outcome,
}

/// A history shared by the clients of a test: cheap to clone, every clone records into
/// the same list, with times measured from the same origin.
#[derive(Clone)]
pub struct History {
    origin: Instant,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// An empty history whose times count from now.
    pub fn new() -> History {
        History { origin: Instant::now(), ops: Arc::default() }
    }

    /// The time of a call about to be made.
    pub fn start(&self) -> Instant {
        Instant::now()
    }

    /// Nanoseconds from the origin to `at`, as the history records times.
    pub fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records `action` on `key` by `client`, called at `call` and returned at `ret`.
    pub fn record(&self, client: usize, key: &str, action: Action<'_>, outcome: Outcome, call: Instant, ret: Instant) {
        let (kind, value, expected, swapped) = match action {
            Action::Put { value } => (Kind::Put, Some(value), None, None),
            Action::Get { read } => (Kind::Get, read, None, None),
            Action::Cas { expected, value, swapped } => {
                (Kind::Cas, Some(value), Some(expected), swapped.filter(|_| outcome == Outcome::Ok))
            }
        };
        let op = Op {
            client,
            kind,
            key: key.to_string(),
            value: value.map(str::to_string),
            expected: expected.map(str::to_string),
            swapped,
            call: self.nanos(call),
            ret: self.nanos(ret),
            outcome,
        };
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).push(op);
    }

    /// [`History::record`] of a call that returned now.
    pub fn finish(&self, client: usize, key: &str, action: Action<'_>, call: Instant, outcome: Outcome) {
        self.record(client, key, action, outcome, call, Instant::now());
    }

    /// A put of `value` to `key`, called at `call`, returned now.
    pub fn put(&self, client: usize, key: &str, value: &str, call: Instant, outcome: Outcome) {
        self.finish(client, key, Action::Put { value }, call, outcome);
    }

    /// A get of `key` that read `read` (None: absent; ignored unless the outcome is Ok),
    /// called at `call`, returned now.
    pub fn get(&self, client: usize, key: &str, read: Option<&str>, call: Instant, outcome: Outcome) {
        self.finish(client, key, Action::Get { read }, call, outcome);
    }

    /// Every operation recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many operations of each outcome were recorded: (ok, failed, unknown).
    pub fn counts(&self) -> (usize, usize, usize) {
        let ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        let n = |o: Outcome| ops.iter().filter(|op| op.outcome == o).count();
        (n(Outcome::Ok), n(Outcome::Failed), n(Outcome::Unknown))
    }

    /// Writes the history to `results/e2e/histories/<name>.jsonl` and checks it with
    /// `statecraft-porcupine`. On a violation the checker runs again to write porcupine's
    /// visualization beside it (`<name>.html`). Blocks while the checker runs.
    pub fn check(&self, name: &str) -> Result<Verdict> {
        let checker = statecraft_shared::testing::binary(CHECKER).map_err(|e| E2eError::Other(e.to_string()))?;
        let dir = results_dir().join("histories");
        std::fs::create_dir_all(&dir).map_err(|e| E2eError::Other(format!("{}: {e}", dir.display())))?;
        let path = dir.join(format!("{name}.jsonl"));
        let mut text = String::new();
        for op in self.ops() {
            let line = serde_json::to_string(&op).map_err(|e| E2eError::Other(format!("history of {name}: {e}")))?;
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(&path, text).map_err(|e| E2eError::Other(format!("{}: {e}", path.display())))?;
        let mut verdict = run_checker(&checker, &path, None)?;
        if verdict.verdict == Decision::Violation {
            let html = dir.join(format!("{name}.html"));
            verdict = run_checker(&checker, &path, Some(&html))?;
        }
        verdict.history = path;
        Ok(verdict)
    }
}

/// Runs the checker on the history at `path`, with `-json` (and `-html` if asked).
fn run_checker(checker: &std::path::Path, path: &std::path::Path, html: Option<&std::path::Path>) -> Result<Verdict> {
    let mut command = Command::new(checker);
    command.arg("-json");
    if let Some(html) = html {
        command.arg("-html").arg(html);
    }
    let shown = format!("{CHECKER} {}", path.display());
    let out =
        command.arg(path).output().map_err(|e| E2eError::Command { command: shown.clone(), message: e.to_string() })?;
    match out.status.code() {
        Some(0 | 1 | 3) => serde_json::from_slice(&out.stdout).map_err(|e| E2eError::Command {
            command: shown,
            message: format!("verdict {:?}: {e}", String::from_utf8_lossy(&out.stdout)),
        }),
        _ => Err(E2eError::Command {
            command: shown,
            message: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        }),
    }
}

/// What the checker decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Linearizable,
    Violation,
    /// The checker ran out of time before deciding.
    Unknown,
}

/// The checker's verdict on a history, with its figures.
#[derive(Clone, Debug, Deserialize)]
pub struct Verdict {
    pub verdict: Decision,
    /// Lines recorded; operations checked (failed ones and unanswered reads are dropped);
    /// writes among them of unknown outcome; keys.
    pub recorded: usize,
    pub operations: usize,
    pub unknown: usize,
    pub dropped: usize,
    pub keys: usize,
    pub check_seconds: f64,
    #[serde(default)]
    pub violations: Vec<Violation>,
    /// Porcupine's visualization, written on a violation.
    #[serde(default)]
    pub html: Option<PathBuf>,
    /// Where the history was written.
    #[serde(skip)]
    pub history: PathBuf,
}

/// A key whose operations admit no linearization.
#[derive(Clone, Debug, Deserialize)]
pub struct Violation {
    pub key: String,
    pub operations: usize,
    /// The longest linearizable prefix porcupine found.
    pub linearized: usize,
    /// Up to 20 operations outside it, by call time.
    pub unplaced: Vec<String>,
}

impl Verdict {
    /// Whether the history is linearizable.
    pub fn is_linearizable(&self) -> bool {
        self.verdict == Decision::Linearizable
    }

    /// How long the check took.
    pub fn check_time(&self) -> Duration {
        Duration::from_secs_f64(self.check_seconds.max(0.0))
    }
}

impl std::fmt::Display for Verdict {
    /// One paragraph a failed assertion can show: the verdict, its figures, the offending
    /// keys with the operations that could not be placed, and where to look further.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}: {} operations checked ({} of unknown outcome, {} of {} dropped) on {} keys in {:.3} s; history {}",
            self.verdict,
            self.operations,
            self.unknown,
            self.dropped,
            self.recorded,
            self.keys,
            self.check_seconds,
            self.history.display()
        )?;
        for v in &self.violations {
            write!(
                f,
                "\n  key {:?}: {} operations, longest linearizable prefix {}; not placed:",
                v.key, v.operations, v.linearized
            )?;
            for op in &v.unplaced {
                write!(f, "\n    {op}")?;
            }
        }
        if let Some(html) = &self.html {
            write!(f, "\n  visualization: {}", html.display())?;
        }
        Ok(())
    }
}

/// The random numbers of test client `id`: xorshift64, seeded per client, so that
/// clients differ and a run can be told apart from another only by timing (varied
/// enough for picking operations and keys; no dependency for it).
pub fn client_rng(id: usize) -> impl FnMut() -> u64 {
    let mut state = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(id as u64 + 1);
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through the real checker (installed by `make deps`; the test fails without it): a
    /// history with an overlapping put and get and a timed-out write is linearizable; the
    /// same with a read that misses an acknowledged write is not.
    #[test]
    fn the_checker_accepts_a_linearizable_history_and_finds_a_stale_read() {
        let ms = Duration::from_millis;
        let linearizable = History::new();
        let t = linearizable.origin;
        let h = &linearizable;
        h.record(0, "a", Action::Put { value: "1" }, Outcome::Ok, t, t + ms(10));
        h.record(1, "a", Action::Get { read: None }, Outcome::Ok, t + ms(5), t + ms(15));
        let cas = Action::Cas { expected: "1", value: "2", swapped: Some(true) };
        h.record(1, "a", cas, Outcome::Ok, t + ms(20), t + ms(30));
        h.record(0, "a", Action::Put { value: "3" }, Outcome::Unknown, t + ms(40), t + ms(2040));
        h.record(2, "a", Action::Get { read: Some("2") }, Outcome::Ok, t + ms(50), t + ms(60));
        h.record(2, "b", Action::Put { value: "x" }, Outcome::Failed, t + ms(50), t + ms(60));
        let verdict = linearizable.check("unit-linearizable").unwrap_or_else(|e| panic!("{e}"));
        assert!(verdict.is_linearizable(), "{verdict}");
        assert_eq!((verdict.recorded, verdict.operations, verdict.unknown, verdict.dropped), (6, 5, 1, 1), "{verdict}");
        assert!(verdict.history.exists());

        let stale = History::new();
        let t = stale.origin;
        stale.record(0, "a", Action::Put { value: "1" }, Outcome::Ok, t, t + ms(10));
        stale.record(0, "a", Action::Put { value: "2" }, Outcome::Ok, t + ms(20), t + ms(30));
        stale.record(1, "a", Action::Get { read: Some("1") }, Outcome::Ok, t + ms(40), t + ms(50));
        let verdict = stale.check("unit-stale-read").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(verdict.verdict, Decision::Violation, "{verdict}");
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].key, "a");
        assert!(verdict.html.as_ref().is_some_and(|h| h.exists()), "{verdict}");
    }

    #[test]
    fn ops_serialize_as_the_checker_reads_them() {
        let h = History::new();
        let t = h.origin;
        h.record(3, "k", Action::Cas { expected: "old", value: "new", swapped: Some(true) }, Outcome::Unknown, t, t);
        h.get(1, "k", None, t, Outcome::Ok);
        let lines: Vec<String> = h.ops().iter().map(|op| serde_json::to_string(op).unwrap_or_default()).collect();
        assert_eq!(
            lines[0],
            r#"{"client":3,"kind":"cas","key":"k","value":"new","expected":"old","call":0,"return":0,"outcome":"unknown"}"#
        );
        assert!(
            lines[1].starts_with(r#"{"client":1,"kind":"get","key":"k","value":null,"call":0,"return":"#),
            "{}",
            lines[1]
        );
        assert_eq!(h.counts(), (1, 0, 1));
    }
}
