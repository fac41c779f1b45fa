//! Measurements of the e2e tests, appended to `results/e2e/<file>.jsonl` (one JSON object
//! per line: the test, the method, the figures and the time).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// `results/e2e` of the workspace: measurements, and the histories tests check.
pub fn results_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/e2e")
}

/// Appends `record` as one line to `results/e2e/<file>` of the workspace, with the
/// operators' settings changed from their defaults for the run (`STATECRAFT_E2E_OPERATOR_ENV`,
/// see [`crate::operator::install`]) as `operator_env`, so that no figure is read as the
/// defaults' when it was not. A measurement that cannot be written is reported on standard
/// error, never fails the test.
pub fn append_result(file: &str, mut record: serde_json::Value) {
    if let (Ok(env), Some(fields)) = (std::env::var("STATECRAFT_E2E_OPERATOR_ENV"), record.as_object_mut()) {
        fields.insert("operator_env".into(), env.into());
    }
    let dir = results_dir();
    let _ = std::fs::create_dir_all(&dir);
    let line = format!("{record}\n");
    if let Err(e) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(file)).and_then(|mut f| {
        use std::io::Write;
        f.write_all(line.as_bytes())
    }) {
        eprintln!("could not record the measurement: {e}");
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}
