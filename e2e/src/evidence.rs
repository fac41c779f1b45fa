//! Evidence for the capability report: each e2e test that proves capability criteria
//! appends one record per run — passed or failed — to `results/evidence/<operator>.jsonl`
//! (format: `capability/README.md`). The report confirms a criterion only from a passed
//! record about the current code, and a failed record about the current code fails it.
//!
//! Use the guard, so that a failing assertion, an error returned with `?` or a panic still
//! leaves a failed record (a test that only recorded successes would overstate the
//! operator):
//!
//! ```ignore
//! let ev = Evidence::start(&cluster, "mysql", "mysql_scales_1_to_3_to_5", &["L3.scaling"]).await?;
//! // ... the test ...
//! ev.pass(json!({"scale_up_seconds": 42.0}));
//! ```
//!
//! The records say which code they are about with a fingerprint of the operator's files
//! (`statecraft_capability::evidence::code_paths`), taken when the test starts and again when
//! it records: if the files changed during the run, or were newer than the test binary when
//! it started (so the binary may not have been built from them), the record carries no
//! fingerprint and confirms nothing. `STATECRAFT_EVIDENCE_DIR` overrides the directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use statecraft_capability::evidence::{self as capability, FORMAT, Outcome, Record};

use crate::{Cluster, E2eError, Provider, Result};

/// The workspace root (this crate is `<root>/e2e`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where records go: `STATECRAFT_EVIDENCE_DIR`, else `<root>/results/evidence`.
pub fn evidence_dir() -> PathBuf {
    std::env::var_os("STATECRAFT_EVIDENCE_DIR").map_or_else(|| root().join("results").join("evidence"), PathBuf::from)
}

/// `mysql` for `statecraft-mysql` or `mysql`.
fn short_name(operator: &str) -> &str {
    operator.strip_prefix("statecraft-").unwrap_or(operator)
}

/// The git commit of the work tree and whether it has uncommitted changes (`unknown`,
/// `false` outside a repository or without git: the fingerprint, not the commit, decides).
fn git_state(root: &Path) -> (String, bool) {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            (commit, dirty)
        }
        None => ("unknown".to_string(), false),
    }
}

fn provider_name(p: Provider) -> &'static str {
    match p {
        Provider::Local => "local",
        Provider::Kind => "kind",
    }
}

/// The fingerprint of the operator's code, or why there is none: the compiled files are
/// newer than the running test binary.
fn code_fingerprint(root: &Path, operator: &str) -> Result<(Option<String>, Option<String>)> {
    let err = |e: statecraft_capability::Error| E2eError::Other(format!("evidence fingerprint: {e}"));
    let fingerprint = capability::fingerprint(root, operator).map_err(err)?;
    let compiled = capability::newest_compiled(root, operator).map_err(err)?;
    let binary = std::env::current_exe().and_then(std::fs::metadata).and_then(|m| m.modified()).ok();
    match (compiled, binary) {
        (Some(newest), Some(built)) if newest > built => {
            Ok((None, Some("source files are newer than the test binary: the run may not be of this code".to_string())))
        }
        _ => Ok((Some(fingerprint.hash), None)),
    }
}

/// A test's evidence, recorded when the test ends: passed by [`Evidence::pass`], failed by
/// [`Evidence::fail`] or by being dropped without either (an error or a panic).
#[must_use = "call .pass(figures) when the test has proven its criteria"]
pub struct Evidence {
    operator: String,
    test: String,
    criteria: Vec<String>,
    provider: &'static str,
    kubernetes_version: String,
    fingerprint: Option<String>,
    note: Option<String>,
    root: PathBuf,
    dir: PathBuf,
    recorded: bool,
    /// When the test started: the record's `duration_seconds`.
    started: Instant,
    /// How the commit is found (`git` in the workspace; a stub in unit tests).
    commit_of: fn(&Path) -> (String, bool),
}

impl Evidence {
    /// Starts the evidence of `test` for `criteria` of `operator` (`mysql` or
    /// `statecraft-mysql`). Fails if a criterion id is not in the model (a typo would
    /// otherwise only show when the report refuses the file).
    pub async fn start(cluster: &Cluster, operator: &str, test: &str, criteria: &[&str]) -> Result<Evidence> {
        for id in criteria {
            if statecraft_capability::model::criterion(id).is_none() {
                return Err(E2eError::Other(format!("evidence of {test}: unknown criterion {id:?}")));
            }
        }
        if criteria.is_empty() {
            return Err(E2eError::Other(format!("evidence of {test}: no criterion")));
        }
        let version = cluster.client.apiserver_version().await?;
        let operator = short_name(operator).to_string();
        let root = root();
        let (fingerprint, note) = code_fingerprint(&root, &operator)?;
        Ok(Evidence {
            operator,
            test: test.into(),
            criteria: criteria.iter().map(|s| s.to_string()).collect(),
            provider: provider_name(cluster.provider),
            kubernetes_version: version.git_version,
            fingerprint,
            note,
            root,
            dir: evidence_dir(),
            recorded: false,
            started: Instant::now(),
            commit_of: git_state,
        })
    }

    /// Records that the test passed, with its measured figures (a JSON object, or null).
    pub fn pass(mut self, figures: serde_json::Value) {
        self.write(Outcome::Passed, figures);
    }

    /// Records that the test failed.
    pub fn fail(mut self, figures: serde_json::Value) {
        self.write(Outcome::Failed, figures);
    }

    /// The record this guard would write now.
    fn record(&self, result: Outcome, figures: serde_json::Value) -> Record {
        let (commit, dirty) = (self.commit_of)(&self.root);
        let mut fingerprint = self.fingerprint.clone();
        let mut note = self.note.clone();
        // The same fingerprint at the end as at the start, or the code changed under the run.
        if fingerprint.is_some() {
            let now = capability::fingerprint(&self.root, &self.operator).ok().map(|f| f.hash);
            if now != fingerprint {
                fingerprint = None;
                note = Some("the operator's files changed during the run".into());
            }
        }
        Record {
            format: FORMAT,
            operator: self.operator.clone(),
            test: self.test.clone(),
            criteria: self.criteria.clone(),
            result,
            provider: self.provider.to_string(),
            kubernetes_version: self.kubernetes_version.clone(),
            commit,
            dirty,
            code_fingerprint: fingerprint,
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            figures,
            note,
            // Tenths of a second: enough for an estimate, and stable to read.
            duration_seconds: Some((self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        }
    }

    fn write(&mut self, result: Outcome, figures: serde_json::Value) {
        self.recorded = true;
        let record = self.record(result, figures);
        // Losing a record must not fail (or double-panic) the test; say so loudly instead.
        match capability::append(&self.dir, &record) {
            Ok(path) => {
                eprintln!("evidence: {} {:?} {} -> {}", self.test, result, self.criteria.join(","), path.display())
            }
            Err(e) => eprintln!("evidence: could not record {} ({:?}): {e}", self.test, result),
        }
    }
}

impl Drop for Evidence {
    fn drop(&mut self) {
        if !self.recorded {
            let figures = serde_json::json!({"panicked": std::thread::panicking()});
            self.write(Outcome::Failed, figures);
        }
    }
}

/// Records one finished test in one call (for tests that decide pass or fail themselves).
pub async fn record(
    cluster: &Cluster,
    operator: &str,
    test: &str,
    criteria: &[&str],
    passed: bool,
    figures: serde_json::Value,
) -> Result<()> {
    let ev = Evidence::start(cluster, operator, test, criteria).await?;
    if passed {
        ev.pass(figures)
    } else {
        ev.fail(figures)
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(dir: &Path, fingerprint: Option<&str>) -> Evidence {
        Evidence {
            operator: "mysql".into(),
            test: "t".into(),
            criteria: vec!["L3.failover".into()],
            provider: "local",
            kubernetes_version: "v1.34.4".into(),
            fingerprint: fingerprint.map(str::to_string),
            note: None,
            root: dir.to_path_buf(),
            dir: dir.join("evidence"),
            recorded: false,
            started: Instant::now(),
            commit_of: |_| ("0123abc".into(), true),
        }
    }

    fn records(dir: &Path) -> Vec<Record> {
        capability::load_file(&dir.join("evidence/mysql.jsonl"), "mysql")
            .unwrap()
            .into_iter()
            .map(|l| l.record)
            .collect()
    }

    #[test]
    fn pass_writes_a_passed_record_and_drop_a_failed_one() {
        let dir = tempfile::tempdir().unwrap();
        let fp = capability::fingerprint(dir.path(), "mysql").unwrap().hash;
        guard(dir.path(), Some(&fp)).pass(serde_json::json!({"seconds": 1.5}));
        drop(guard(dir.path(), Some(&fp)));
        let rs = records(dir.path());
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].result, Outcome::Passed);
        assert_eq!(rs[0].figures["seconds"], 1.5);
        assert_eq!(rs[0].code_fingerprint.as_deref(), Some(fp.as_str()));
        assert_eq!((rs[0].commit.as_str(), rs[0].dirty), ("0123abc", true));
        assert_eq!(rs[1].result, Outcome::Failed);
        assert_eq!(rs[1].figures["panicked"], false);
    }

    #[test]
    fn the_record_says_how_long_the_test_ran() {
        let dir = tempfile::tempdir().unwrap();
        let mut ev = guard(dir.path(), None);
        ev.started -= std::time::Duration::from_secs(90);
        ev.pass(serde_json::Value::Null);
        let seconds = records(dir.path())[0].duration_seconds.expect("a duration");
        assert!((90.0..120.0).contains(&seconds), "{seconds}");
    }

    #[test]
    fn a_panicking_test_records_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let joined = std::thread::spawn(move || {
            let _ev = guard(&path, None);
            panic!("assertion failed");
        })
        .join();
        assert!(joined.is_err());
        let rs = records(dir.path());
        assert_eq!(rs[0].result, Outcome::Failed);
        assert_eq!(rs[0].figures["panicked"], true);
    }

    #[test]
    fn code_changed_during_the_run_drops_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let fp = capability::fingerprint(dir.path(), "mysql").unwrap().hash;
        let ev = guard(dir.path(), Some(&fp));
        std::fs::create_dir_all(dir.path().join("operators/mysql/src")).unwrap();
        std::fs::write(dir.path().join("operators/mysql/src/lib.rs"), "changed").unwrap();
        ev.pass(serde_json::Value::Null);
        let rs = records(dir.path());
        assert_eq!(rs[0].code_fingerprint, None);
        assert_eq!(rs[0].note.as_deref(), Some("the operator's files changed during the run"));
    }

    #[test]
    fn operator_names_are_short() {
        assert_eq!(short_name("statecraft-mysql"), "mysql");
        assert_eq!(short_name("etcd"), "etcd");
    }
}
