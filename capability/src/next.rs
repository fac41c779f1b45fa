//! What earns the rest: for each of Statecraft's operators, the e2e tests that record
//! evidence for the claimed criteria not yet confirmed, and the command that runs them.
//!
//! A fresh clone has no evidence, so its report confirms only what static checks show. The
//! tests that would prove the rest are found in their source (`e2e/tests/<operator>.rs` and
//! `e2e/tests/<operator>/`), where each starts its evidence record with
//! `evidence("<test>", &["L3.backup", ...])`: the same call that later writes the record, so
//! the list cannot drift from what the tests record.
//!
//! How long the command takes is estimated from the evidence records themselves: each
//! records its test's `duration_seconds`, and the estimate adds up the last passed run of
//! every test the command runs (a failed run may have stopped early). Tests that never
//! passed with a duration recorded are named instead of guessed.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::evidence::{Located, Outcome};
use crate::score::{CriterionScore, Status};
use crate::{Error, Result};

/// An e2e test that records evidence, as its source declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct E2eTest {
    /// The test function.
    pub name: String,
    /// The criteria it records evidence for.
    pub criteria: Vec<String>,
    /// `file:line` of the call.
    pub source: String,
}

/// A claimed criterion not yet confirmed, and the tests that would prove it.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    /// The criterion.
    pub criterion: &'static str,
    /// The tests that record evidence for it (none: no test proves it yet).
    pub tests: Vec<String>,
}

/// What earns an operator's missing criteria.
#[derive(Debug, Clone, Serialize)]
pub struct Next {
    /// The command that runs the operator's e2e tests.
    pub command: String,
    /// The claimed criteria not confirmed that a run could prove (failed ones included).
    pub pending: Vec<Pending>,
    /// About how long the command's tests take, from their recorded runs.
    pub duration: Duration,
}

/// About how long [`Next::command`] takes: the sum of the last passed run of each test it
/// runs. The command runs two tests at a time (`--test-threads=2`) after starting the
/// cluster and building, so its wall-clock time is roughly between half this and this,
/// plus the start-up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Duration {
    /// Seconds the tests with a recorded run took, added up; `None` when no test has one.
    pub recorded_seconds: Option<f64>,
    /// How many tests that sum covers.
    pub recorded_tests: usize,
    /// The tests with no passed run recorded yet (their time is unknown).
    pub unrecorded: Vec<String>,
}

impl Duration {
    /// "about 12 min of test time over 8 tests (2 more not timed yet)", or "no run with a
    /// recorded duration yet".
    pub fn describe(&self) -> String {
        let Some(seconds) = self.recorded_seconds else {
            return "no run with a recorded duration yet".to_string();
        };
        let time = if seconds < 90.0 { format!("{seconds:.0} s") } else { format!("{:.0} min", seconds / 60.0) };
        let tests = if self.recorded_tests == 1 { "test" } else { "tests" };
        let mut out = format!("about {time} of test time over {} {tests}", self.recorded_tests);
        if !self.unrecorded.is_empty() {
            out.push_str(&format!(" ({} more not timed yet)", self.unrecorded.len()));
        }
        out
    }
}

/// The [`Duration`] of running `tests`, from `records` (the operator's evidence).
pub fn duration(tests: &[E2eTest], records: &[Located]) -> Duration {
    let mut names: Vec<&str> = Vec::new();
    for t in tests {
        if !names.contains(&t.name.as_str()) {
            names.push(&t.name);
        }
    }
    let mut total = None;
    let mut recorded_tests = 0;
    let mut unrecorded = Vec::new();
    for name in names {
        // The newest passed run with a duration; times are RFC 3339 in UTC, validated on load.
        let last = records
            .iter()
            .map(|r| &r.record)
            .filter(|r| r.test == name && r.result == Outcome::Passed)
            .filter_map(|r| Some((chrono::DateTime::parse_from_rfc3339(&r.time).ok()?, r.duration_seconds?)))
            .max_by_key(|(time, _)| *time);
        match last {
            Some((_, seconds)) => {
                total = Some(total.unwrap_or(0.0) + seconds);
                recorded_tests += 1;
            }
            None => unrecorded.push(name.to_string()),
        }
    }
    Duration { recorded_seconds: total, recorded_tests, unrecorded }
}

/// The tests of `operator` that record evidence, in source order.
pub fn e2e_tests(root: &Path, operator: &str) -> Result<Vec<E2eTest>> {
    let tests = root.join("e2e").join("tests");
    let mut files = vec![tests.join(format!("{operator}.rs"))];
    let dir = tests.join(operator);
    if dir.is_dir() {
        let mut more: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut out = Vec::new();
    for file in files.iter().filter(|f| f.is_file()) {
        let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
        let shown = file.strip_prefix(root).unwrap_or(file);
        out.extend(parse(&text, &shown.display().to_string()));
    }
    Ok(out)
}

/// The `evidence(<name>, &[<ids>])` calls in a test file. `<name>` is a string literal, or a
/// variable bound to one by an earlier `let <name> = "...";`.
fn parse(text: &str, file: &str) -> Vec<E2eTest> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("evidence(") {
        let before = &text[..at];
        // The helper's own definition (`fn evidence(`) and other names ending in `evidence(`.
        if before.ends_with("fn ") || before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let call = &text[at + "evidence(".len()..];
        let call = &call[..call.find(".await").unwrap_or(call.len()).min(800)];
        let first = call.trim_start();
        let name = if let Some(rest) = first.strip_prefix('"') {
            rest.split('"').next().map(str::to_string)
        } else {
            let ident: String = first.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let binding = format!("let {ident} = \"");
            before.rfind(&binding).and_then(|i| before[i + binding.len()..].split('"').next()).map(str::to_string)
        };
        let criteria: Vec<String> = call
            .split_once("&[")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| list.split('"').skip(1).step_by(2).map(str::to_string).collect())
            .unwrap_or_default();
        if let Some(name) = name.filter(|n| !n.is_empty() && !criteria.is_empty()) {
            let line = before.matches('\n').count() + 1;
            out.push(E2eTest { name, criteria, source: format!("{file}:{line}") });
        }
    }
    out
}

/// What earns `operator`'s claimed criteria that are not confirmed and need a run, and about
/// how long the command takes (it runs all of `tests`), from `records`.
pub fn next(operator: &str, criteria: &[CriterionScore], tests: &[E2eTest], records: &[Located]) -> Next {
    let pending = criteria
        .iter()
        .filter(|c| c.claimed && c.status != Status::Confirmed && c.criterion.verification.has_e2e())
        .map(|c| Pending {
            criterion: c.criterion.id,
            tests: tests
                .iter()
                .filter(|t| t.criteria.iter().any(|id| id == c.criterion.id))
                .map(|t| t.name.clone())
                .collect(),
        })
        .collect();
    Next { command: format!("make e2e E2E_FILTER={operator}_"), pending, duration: duration(tests, records) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_calls_are_found_with_literal_or_bound_names() {
        let text = r#"
async fn evidence(test: &str, criteria: &[&str]) -> Result<Evidence, Error> { todo!() }

async fn a() {
    let ev = evidence(
        "etcd_scales",
        &["L3.scaling", "L4.events"],
    )
    .await?;
}
async fn b() {
    let test = "etcd_auto_scales";
    let ev = evidence(test, &["L5.auto-scaling"]).await?;
    let x = Evidence::start(&c, "etcd", "other", &["L1.install"]).await?;
}
"#;
        let found = parse(text, "e2e/tests/etcd.rs");
        assert_eq!(
            found,
            [
                E2eTest {
                    name: "etcd_scales".into(),
                    criteria: vec!["L3.scaling".into(), "L4.events".into()],
                    source: "e2e/tests/etcd.rs:5".into()
                },
                E2eTest {
                    name: "etcd_auto_scales".into(),
                    criteria: vec!["L5.auto-scaling".into()],
                    source: "e2e/tests/etcd.rs:13".into()
                },
            ]
        );
    }

    fn test(name: &str) -> E2eTest {
        E2eTest { name: name.into(), criteria: vec!["L3.failover".into()], source: "e2e/tests/mysql.rs:1".into() }
    }

    fn run(name: &str, result: Outcome, time: &str, seconds: Option<f64>) -> Located {
        let mut record = crate::evidence::tests::record(&["L3.failover"], result, None);
        record.test = name.into();
        record.time = time.into();
        record.duration_seconds = seconds;
        Located { record, path: "mysql.jsonl".into(), line: 1 }
    }

    #[test]
    fn the_duration_adds_up_the_last_passed_run_of_each_test() {
        let tests = [test("mysql_a"), test("mysql_b"), test("mysql_c"), test("mysql_d")];
        let records = [
            run("mysql_a", Outcome::Passed, "2026-11-29T10:00:00Z", Some(100.0)),
            run("mysql_a", Outcome::Passed, "2026-11-30T10:00:00Z", Some(120.0)),
            run("mysql_a", Outcome::Passed, "2026-11-28T10:00:00Z", Some(999.0)),
            run("mysql_b", Outcome::Passed, "2026-11-29T10:00:00Z", Some(60.0)),
            run("mysql_b", Outcome::Failed, "2026-11-30T10:00:00Z", Some(5.0)),
            // A record from before durations were recorded, and a failed run only.
            run("mysql_c", Outcome::Passed, "2026-11-29T10:00:00Z", None),
            run("mysql_d", Outcome::Failed, "2026-11-29T10:00:00Z", Some(30.0)),
        ];
        let d = duration(&tests, &records);
        assert_eq!(d.recorded_seconds, Some(180.0));
        assert_eq!(d.recorded_tests, 2);
        assert_eq!(d.unrecorded, ["mysql_c", "mysql_d"]);
        assert_eq!(d.describe(), "about 3 min of test time over 2 tests (2 more not timed yet)");
        let short = duration(&tests[1..2], &records);
        assert_eq!(short.describe(), "about 60 s of test time over 1 test");
    }

    #[test]
    fn without_records_the_duration_says_so() {
        let d = duration(&[test("mysql_a")], &[]);
        assert_eq!(d, Duration { recorded_seconds: None, recorded_tests: 0, unrecorded: vec!["mysql_a".into()] });
        assert_eq!(d.describe(), "no run with a recorded duration yet");
    }

    /// The real test files: every operator with e2e tests has some, and each names criteria
    /// of the model.
    #[test]
    fn the_workspace_tests_are_found() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for operator in ["mysql", "etcd"] {
            let tests = e2e_tests(&root, operator).unwrap();
            assert!(tests.len() >= 5, "{operator}: {tests:?}");
            for t in &tests {
                assert!(t.name.starts_with(operator), "{t:?}");
                for id in &t.criteria {
                    assert!(crate::model::criterion(id).is_some(), "{t:?}");
                }
            }
        }
    }
}
