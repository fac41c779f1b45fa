//! Evidence: what e2e tests on a real cluster proved, one JSON record per line in
//! `results/evidence/<operator>.jsonl` (format documented in `capability/README.md`).
//!
//! A record is *current* when the code it tested is the code in the tree now. That is
//! decided by a fingerprint of the files that make up the operator (see [`code_paths`]),
//! taken by the test when it records and again when the report is made: equal
//! fingerprints mean the same operator, shared library, test and image recipes, whatever
//! else changed in the repository, and whether or not the tree was committed. The git
//! commit and dirty flag are recorded too, for people tracing a record back.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::criterion;
use crate::{Error, Result};

/// The version of the record format this crate reads and writes.
pub const FORMAT: u32 = 1;

/// Whether the test passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every assertion held.
    Passed,
    /// An assertion failed, the test returned an error, or it panicked.
    Failed,
}

/// One evidence record (format 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Always [`FORMAT`].
    pub format: u32,
    /// The operator's short name (`mysql`), also the file's name.
    pub operator: String,
    /// The test's name (its function name).
    pub test: String,
    /// The criteria the test proves when it passes.
    pub criteria: Vec<String>,
    /// Passed or failed.
    pub result: Outcome,
    /// The cluster provider (`local`, `kind`).
    pub provider: String,
    /// The API server's version (`v1.34.4`).
    pub kubernetes_version: String,
    /// `git rev-parse HEAD` when the test ran (`unknown` outside a repository).
    pub commit: String,
    /// Whether the work tree had uncommitted changes.
    pub dirty: bool,
    /// The fingerprint of the operator's code when the test ran; `null` when the code
    /// changed during the run or the test binary was older than the code (then the record
    /// never confirms anything).
    pub code_fingerprint: Option<String>,
    /// When the test finished, RFC 3339 in UTC.
    pub time: String,
    /// Measured figures (`{"first_write_seconds": 1.5}`), free-form.
    #[serde(default)]
    pub figures: serde_json::Value,
    /// Why `code_fingerprint` is null, or anything else the recorder wants a reader to know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How long the test ran, from the e2e guard's `Evidence::start` to its record, in
    /// seconds: what the report's NEXT block adds up to say about how long a run takes.
    ///
    /// Optional, and no format bump: a record written before the field existed still loads
    /// (its test counts as not timed yet), and nothing else changed meaning. A bump would
    /// make this build refuse all the format-1 evidence already recorded. The cost: an
    /// older build of this crate refuses records that carry the field (`unknown field
    /// duration_seconds`, with file and line), loudly rather than misreading them, which
    /// only happens when an older checkout's report reads newer local `results/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
}

/// A record and where it was read from.
#[derive(Debug, Clone)]
pub struct Located {
    /// The record.
    pub record: Record,
    /// The file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
}

/// The evidence file of `operator` in `dir`.
pub fn file_of(dir: &Path, operator: &str) -> PathBuf {
    dir.join(format!("{operator}.jsonl"))
}

/// Appends `record` to `<dir>/<operator>.jsonl` as one line, in one write (tests running in
/// parallel append to the same file).
pub fn append(dir: &Path, record: &Record) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = file_of(dir, &record.operator);
    let mut line = serde_json::to_string(record).map_err(|e| Error::Evidence {
        path: path.clone(),
        line: 0,
        message: format!("cannot serialize the record: {e}"),
    })?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// Reads every `*.jsonl` file in `dir`. Each must be named after one of `operators`, and
/// every line must be a valid record of that operator naming known criteria: any error
/// stops the load (no report is better than one silently missing evidence).
pub fn load_dir(dir: &Path, operators: &[&str]) -> Result<Vec<Located>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|err| Error::io(dir, err)))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if !operators.contains(&stem.as_str()) {
            return Err(Error::Evidence {
                path,
                line: 1,
                message: format!("evidence for unknown operator {stem:?} (known: {})", operators.join(", ")),
            });
        }
        out.extend(load_file(&path, &stem)?);
    }
    Ok(out)
}

/// Reads one evidence file of `operator`.
pub fn load_file(path: &Path, operator: &str) -> Result<Vec<Located>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| Error::Evidence { path: path.to_path_buf(), line: n, message };
        let record: Record = serde_json::from_str(line).map_err(|e| {
            // A record with another format version gets that said, not a field error.
            match serde_json::from_str::<serde_json::Value>(line).ok().and_then(|v| v["format"].as_u64()) {
                Some(f) if f != u64::from(FORMAT) => {
                    err(format!("evidence format {f} is not supported (this build reads format {FORMAT})"))
                }
                _ => err(format!("malformed record: {e}")),
            }
        })?;
        validate(&record, operator).map_err(err)?;
        out.push(Located { record, path: path.to_path_buf(), line: n });
    }
    Ok(out)
}

/// What makes a parsed record invalid.
fn validate(record: &Record, operator: &str) -> std::result::Result<(), String> {
    if record.format != FORMAT {
        return Err(format!("evidence format {} is not supported (this build reads format {FORMAT})", record.format));
    }
    if record.operator != operator {
        return Err(format!("record of operator {:?} in the file of {operator:?}", record.operator));
    }
    if record.test.trim().is_empty() {
        return Err("the test name is empty".into());
    }
    if record.criteria.is_empty() {
        return Err("the record names no criterion".into());
    }
    for id in &record.criteria {
        if criterion(id).is_none() {
            return Err(format!("unknown criterion {id:?} (see `statecraft-capability criteria`)"));
        }
    }
    chrono::DateTime::parse_from_rfc3339(&record.time)
        .map_err(|e| format!("time {:?} is not RFC 3339: {e}", record.time))?;
    if !record.figures.is_null() && !record.figures.is_object() {
        return Err("figures must be a JSON object".into());
    }
    Ok(())
}

/// The files, relative to the workspace root, whose content decides whether evidence about
/// `operator` is still about the current code: the operator, the shared library, the e2e
/// harness and the operator's e2e test, the manifests and CRDs it installs, the image
/// recipes and the dependency lock. Not included: other operators, this crate, docs.
pub fn code_paths(operator: &str) -> Vec<String> {
    vec![
        format!("operators/{operator}/src"),
        format!("operators/{operator}/Cargo.toml"),
        "shared/src".into(),
        "shared/Cargo.toml".into(),
        "e2e/src".into(),
        "e2e/Cargo.toml".into(),
        format!("e2e/tests/{operator}.rs"),
        format!("crds/{operator}.yaml"),
        format!("deploy/{operator}"),
        "deploy/images".into(),
        "Cargo.toml".into(),
        "Cargo.lock".into(),
    ]
}

/// The newest modification time among the files of [`code_paths`] that are compiled into
/// the operator's e2e test binary (sources of libraries and of the test; not `main.rs` or
/// `src/bin/`, which only binaries use, nor manifests read at run time). When one of them
/// is newer than the running test binary, the binary may not have been built from them.
pub fn newest_compiled(root: &Path, operator: &str) -> Result<Option<SystemTime>> {
    let mut newest = None;
    for rel in code_paths(operator) {
        let path = root.join(&rel);
        let compiled = rel.starts_with("operators/") || rel.starts_with("shared/") || rel.starts_with("e2e/");
        if !compiled || !path.exists() {
            continue;
        }
        let mut files = Vec::new();
        walk(&path, &mut files)?;
        for file in files {
            let binary_only = file.file_name().is_some_and(|n| n == "main.rs")
                || file.strip_prefix(root).unwrap_or(&file).components().any(|c| c.as_os_str() == "bin");
            if binary_only {
                continue;
            }
            let modified = std::fs::metadata(&file).and_then(|m| m.modified()).map_err(|e| Error::io(&file, e))?;
            newest = newest.max(Some(modified));
        }
    }
    Ok(newest)
}

/// A fingerprint of files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// `sha256:<hex>` over the sorted (path, content hash) pairs.
    pub hash: String,
}

/// Fingerprints [`code_paths`]`(operator)` under `root`. Directories are walked (hidden
/// entries and `target*` directories skipped); a missing path counts as missing, so that
/// creating it changes the fingerprint.
pub fn fingerprint(root: &Path, operator: &str) -> Result<Fingerprint> {
    fingerprint_paths(root, &code_paths(operator))
}

/// Fingerprints `paths` (relative to `root`).
pub fn fingerprint_paths(root: &Path, paths: &[String]) -> Result<Fingerprint> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for rel in paths {
        let path = root.join(rel);
        if !path.exists() {
            entries.push((rel.clone(), "missing".into()));
            continue;
        }
        let mut files = Vec::new();
        walk(&path, &mut files)?;
        for file in files {
            let content = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
            let name = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().into_owned();
            entries.push((name, hex::encode(Sha256::digest(&content))));
        }
    }
    entries.sort();
    let mut hasher = Sha256::new();
    for (name, hash) in &entries {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(hash.as_bytes());
        hasher.update([b'\n']);
    }
    Ok(Fingerprint { hash: format!("sha256:{}", hex::encode(hasher.finalize())) })
}

fn walk(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !path.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(path, e))?.path();
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || (entry.is_dir() && name.starts_with("target")) {
            continue;
        }
        walk(&entry, out)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(criteria: &[&str], result: Outcome, fingerprint: Option<&str>) -> Record {
        Record {
            format: FORMAT,
            operator: "mysql".into(),
            test: "t".into(),
            criteria: criteria.iter().map(|s| s.to_string()).collect(),
            result,
            provider: "local".into(),
            kubernetes_version: "v1.34.4".into(),
            commit: "0123456789abcdef".into(),
            dirty: false,
            code_fingerprint: fingerprint.map(str::to_string),
            time: "2026-11-29T12:00:00Z".into(),
            figures: serde_json::json!({"failover_seconds": 1.5}),
            note: None,
            duration_seconds: Some(95.5),
        }
    }

    #[test]
    fn appended_records_load_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = record(&["L3.failover"], Outcome::Passed, Some("sha256:x"));
        let b = record(&["L3.backup", "L3.restore"], Outcome::Failed, None);
        append(dir.path(), &a).unwrap();
        let path = append(dir.path(), &b).unwrap();
        assert_eq!(path, dir.path().join("mysql.jsonl"));
        let loaded = load_dir(dir.path(), &["mysql", "etcd"]).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded[0].record, a);
        assert_eq!((loaded[1].line, &loaded[1].record), (2, &b));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(
                r#"{"format":1,"operator":"mysql","test":"t","criteria":["L3.failover"],"result":"passed""#
            )
        );
    }

    fn load_error(lines: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mysql.jsonl"), lines).unwrap();
        load_dir(dir.path(), &["mysql"]).unwrap_err().to_string()
    }

    #[test]
    fn bad_records_are_errors_naming_file_and_line() {
        let good = serde_json::to_string(&record(&["L3.failover"], Outcome::Passed, None)).unwrap();
        let err = load_error(&format!("{good}\n\n{{not json\n"));
        assert!(err.contains("mysql.jsonl:3: malformed record"), "{err}");
        let err = load_error(&good.replace("L3.failover", "L3.teleport"));
        assert!(err.contains("mysql.jsonl:1: unknown criterion \"L3.teleport\""), "{err}");
        let err = load_error(&good.replace(r#""format":1"#, r#""format":2"#));
        assert!(err.contains("mysql.jsonl:1: evidence format 2 is not supported"), "{err}");
        let err = load_error(&good.replace(r#""operator":"mysql""#, r#""operator":"etcd""#));
        assert!(err.contains("record of operator \"etcd\" in the file of \"mysql\""), "{err}");
        let err = load_error(&good.replace("2026-11-29T12:00:00Z", "yesterday"));
        assert!(err.contains("time \"yesterday\" is not RFC 3339"), "{err}");
        let err = load_error(&good.replace(r#""result":"passed""#, r#""result":"maybe""#));
        assert!(err.contains("mysql.jsonl:1: malformed record: unknown variant `maybe`"), "{err}");
        let err = load_error(&good.replace(r#""dirty""#, r#""criterion":"L1.install","dirty""#));
        assert!(err.contains("unknown field `criterion`"), "{err}");
        let err = load_error(&good.replace(r#""criteria":["L3.failover"]"#, r#""criteria":[]"#));
        assert!(err.contains("names no criterion"), "{err}");
    }

    /// Records written before `duration_seconds` existed still load, without one.
    #[test]
    fn records_without_a_duration_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = record(&["L3.failover"], Outcome::Passed, None);
        old.duration_seconds = None;
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("duration"), "{line}");
        std::fs::write(dir.path().join("mysql.jsonl"), format!("{line}\n")).unwrap();
        let loaded = load_dir(dir.path(), &["mysql"]).unwrap();
        assert_eq!(loaded[0].record, old);
        let with = serde_json::to_string(&record(&["L3.failover"], Outcome::Passed, None)).unwrap();
        assert!(with.contains(r#""duration_seconds":95.5"#), "{with}");
    }

    #[test]
    fn files_of_unknown_operators_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("postgres.jsonl"), "").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let err = load_dir(dir.path(), &["mysql"]).unwrap_err().to_string();
        assert!(err.contains("postgres.jsonl:1: evidence for unknown operator \"postgres\""), "{err}");
        assert!(load_dir(&dir.path().join("nope"), &["mysql"]).is_err());
    }

    #[test]
    fn the_fingerprint_follows_the_operators_code_only() {
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("operators/mysql/src/lib.rs", "fn a() {}");
        write("operators/mysql/src/main.rs", "fn main() {}");
        write("shared/src/lib.rs", "fn s() {}");
        write("shared/src/bin/echo.rs", "fn main() {}");
        write("operators/etcd/src/lib.rs", "fn e() {}");
        let first = fingerprint(root.path(), "mysql").unwrap();
        assert!(first.hash.starts_with("sha256:"));
        assert_eq!(fingerprint(root.path(), "mysql").unwrap().hash, first.hash, "deterministic");
        let compiled = newest_compiled(root.path(), "mysql").unwrap();
        assert!(compiled.is_some());
        // Another operator, docs, build output, the library's own tests: no change.
        write("operators/etcd/src/lib.rs", "fn e2() {}");
        write("docs/x.md", "x");
        write("operators/mysql/target/debug/junk", "x");
        write("operators/mysql/src/.lib.rs.swp", "x");
        write("shared/tests/some_test.rs", "x");
        assert_eq!(fingerprint(root.path(), "mysql").unwrap().hash, first.hash);
        // Binaries' sources and manifests count for the fingerprint, not for the compiled set.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write("shared/src/bin/echo.rs", "fn main() { /* changed */ }");
        write("deploy/mysql/operator.yaml", "kind: x");
        assert_eq!(newest_compiled(root.path(), "mysql").unwrap(), compiled);
        assert_ne!(fingerprint(root.path(), "mysql").unwrap().hash, first.hash);
        let first = fingerprint(root.path(), "mysql").unwrap();
        // The operator, the shared library, its test: change.
        write("operators/mysql/src/lib.rs", "fn b() {}");
        let second = fingerprint(root.path(), "mysql").unwrap();
        assert_ne!(second.hash, first.hash);
        assert!(newest_compiled(root.path(), "mysql").unwrap() > compiled, "a library source is compiled");
        write("e2e/tests/mysql.rs", "#[test] fn t() {}");
        assert_ne!(fingerprint(root.path(), "mysql").unwrap().hash, second.hash, "a new file counts");
    }
}
