//! What the integration tests share: an evidence record of the shape the e2e suite writes.

use serde_json::Value;
use statecraft_capability::evidence::{FORMAT, Outcome, Record};

/// A record of `test` about `operator`'s code with `fingerprint`, proving `criteria` with
/// `result`, written by the local provider at a fixed commit and time, without figures.
pub fn record(operator: &str, test: &str, criteria: &[&str], result: Outcome, fingerprint: &str) -> Record {
    Record {
        format: FORMAT,
        operator: operator.into(),
        test: test.into(),
        criteria: criteria.iter().map(|s| s.to_string()).collect(),
        result,
        provider: "local".into(),
        kubernetes_version: "v1.34.4".into(),
        commit: "5e1f00d".into(),
        dirty: false,
        code_fingerprint: Some(fingerprint.into()),
        time: "2026-11-29T23:47:10Z".into(),
        figures: Value::Null,
        note: None,
        duration_seconds: None,
    }
}
