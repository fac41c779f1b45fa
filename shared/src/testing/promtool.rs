//! Alerts judged by Prometheus's own rule engine: `promtool test rules` evaluates an
//! operator's alerts over series written in its unit-test file and compares the alerts that
//! fire, with their labels and annotations, to those the file expects. The static checks of
//! [`super::monitoring`] say that an expression names real metrics; these say that it fires
//! when it should, for as long as its `for` asks, and not otherwise.
//!
//! promtool is built from the Prometheus Go module by `scripts/build-go-tools.sh`. It reads
//! plain rule files, so the `PrometheusRule`'s `spec` is written out as `rules.yaml` beside a
//! copy of the test file, which names that file in `rule_files`. The tests compare the
//! labels an alert fires with (what routes it), not its annotations (see
//! [`without_annotations`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The rule file a test file must name in `rule_files`: the `PrometheusRule`'s `spec`
/// without annotations ([`without_annotations`]).
const RULES_FILE: &str = "rules.yaml";
/// The whole `spec`, for `promtool check rules`.
const CHECKED_FILE: &str = "checked.yaml";

/// What is wrong with the alerts of the `PrometheusRule` at `rules` as judged by promtool
/// running the unit tests at `tests` (both relative to `root`): a rule promtool refuses, a
/// test that fails, an alert that no test shows firing, or a test file that does not test
/// the rules.
pub fn test_rules(root: &Path, rules: &str, tests: &str) -> Vec<String> {
    let promtool = match super::binary("promtool") {
        Ok(path) => path,
        Err(e) => return vec![format!("{e} (scripts/build-go-tools.sh builds it)")],
    };
    let read = |path: &str| -> Result<serde_norway::Value, String> {
        let text = std::fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"))?;
        serde_norway::from_str(&text).map_err(|e| format!("{path} is not valid YAML: {e}"))
    };
    let (rule_doc, test_doc) = match (read(rules), read(tests)) {
        (Ok(r), Ok(t)) => (r, t),
        (r, t) => return [r.err(), t.err()].into_iter().flatten().collect(),
    };
    let mut problems = Vec::new();
    let named: Vec<&str> =
        test_doc["rule_files"].as_sequence().into_iter().flatten().filter_map(serde_norway::Value::as_str).collect();
    if named != [RULES_FILE] {
        problems
            .push(format!("{tests}: rule_files is {named:?}, expected [{RULES_FILE:?}] (the PrometheusRule's spec)"));
    }
    let alerts = alert_names(&rule_doc["spec"]);
    let firing = firing_in_tests(&test_doc);
    for alert in alerts.difference(&firing) {
        problems.push(format!("{tests}: no test shows alert {alert} firing"));
    }
    for alert in firing.difference(&alerts) {
        problems.push(format!("{tests}: expects alert {alert}, which {rules} does not define"));
    }

    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => return vec![format!("a temporary directory: {e}")],
    };
    let spec = &rule_doc["spec"];
    let (full, bare) = match (serde_norway::to_string(spec), serde_norway::to_string(&without_annotations(spec))) {
        (Ok(full), Ok(bare)) => (full, bare),
        (Err(e), _) | (_, Err(e)) => return vec![format!("{rules}: spec: {e}")],
    };
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text);
    if let Err(e) = write(CHECKED_FILE, &full)
        .and_then(|()| write(RULES_FILE, &bare))
        .and_then(|()| std::fs::copy(root.join(tests), dir.path().join("tests.yaml")).map(|_| ()))
    {
        return vec![format!("writing the rule and test files: {e}")];
    }
    for args in [vec!["check", "rules", CHECKED_FILE], vec!["test", "rules", "tests.yaml"]] {
        match Command::new(&promtool).args(&args).current_dir(dir.path()).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => problems.push(format!(
                "promtool {} failed ({}):\n{}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => problems.push(format!("running {}: {e}", promtool.display())),
        }
    }
    problems
}

/// `spec` without the rules' annotations. promtool compares the annotations an alert fires
/// with word for word, and a test that spelled out every description would only repeat
/// them; their templates are checked by `promtool check rules` on the whole file.
fn without_annotations(spec: &serde_norway::Value) -> serde_norway::Value {
    let mut bare = spec.clone();
    for group in bare["groups"].as_sequence_mut().into_iter().flatten() {
        for rule in group["rules"].as_sequence_mut().into_iter().flatten() {
            if let Some(rule) = rule.as_mapping_mut() {
                rule.remove("annotations");
            }
        }
    }
    bare
}

/// The names of the alerts of a rule file's groups.
fn alert_names(spec: &serde_norway::Value) -> BTreeSet<String> {
    spec["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_sequence().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect()
}

/// The alerts some test case of a promtool test file expects to fire (a non-empty
/// `exp_alerts`).
fn firing_in_tests(doc: &serde_norway::Value) -> BTreeSet<String> {
    doc["tests"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|t| t["alert_rule_test"].as_sequence().into_iter().flatten())
        .filter(|case| case["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()))
        .filter_map(|case| case["alertname"].as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_counts_as_tested_only_where_a_case_expects_it_to_fire() {
        let doc: serde_norway::Value = serde_norway::from_str(
            "tests:\n- alert_rule_test:\n  - {alertname: A, eval_time: 1m, exp_alerts: [{exp_labels: {x: y}}]}\n  \
             - {alertname: B, eval_time: 1m, exp_alerts: []}\n  - {alertname: C, eval_time: 1m}\n",
        )
        .expect("yaml");
        assert_eq!(firing_in_tests(&doc), BTreeSet::from(["A".to_owned()]));
    }
}
