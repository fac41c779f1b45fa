//! The `statecraft-capability` binary end to end: reports from evidence (written to temp
//! directories with the current code fingerprint), `--require-level`, every format, bad
//! input, and `assess` on the fixture bundles in `tests/fixtures`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use statecraft_capability::evidence::{self, FORMAT, Outcome, Record};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel).display().to_string()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_statecraft-capability"))
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), stderr(o));
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

fn record(test: &str, criteria: &[&str], result: Outcome, fingerprint: &str) -> Record {
    Record {
        format: FORMAT,
        operator: "mysql".into(),
        test: test.into(),
        criteria: criteria.iter().map(|s| s.to_string()).collect(),
        result,
        provider: "local".into(),
        kubernetes_version: "v1.34.4".into(),
        commit: "5e1f00d".into(),
        dirty: false,
        code_fingerprint: Some(fingerprint.into()),
        time: "2026-11-29T23:47:10Z".into(),
        figures: serde_json::json!({"seconds": 2.5}),
        note: None,
    }
}

/// Evidence for the MySQL operator's level-1 criteria and some of level 3, about the
/// current code, plus a stale pass and a current failure.
fn mysql_evidence(dir: &Path) {
    let fp = evidence::fingerprint(&root(), "mysql").expect("fingerprint").hash;
    let records = [
        record(
            "mysql_cluster_becomes_ready_and_fails_over",
            &["L1.install", "L3.failover", "L4.metrics"],
            Outcome::Passed,
            &fp,
        ),
        record("mysql_invalid_specs_are_refused", &["L1.validation"], Outcome::Passed, &fp),
        record(
            "mysql_config_change_rolls",
            &["L1.config", "L2.rolling-restart", "L3.reconfiguration"],
            Outcome::Passed,
            &fp,
        ),
        record("mysql_backup_and_restore", &["L3.backup", "L3.restore"], Outcome::Failed, &fp),
        record("mysql_switchover", &["L3.switchover"], Outcome::Passed, "sha256:older-code"),
    ];
    for r in &records {
        evidence::append(dir, r).expect("append");
    }
}

fn criterion<'a>(op: &'a Value, id: &str) -> &'a Value {
    op["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("{id}"))
}

#[test]
fn the_report_confirms_from_current_evidence_and_gates_on_the_level() {
    let dir = tempfile::tempdir().unwrap();
    mysql_evidence(dir.path());
    let root = root().display().to_string();
    let ev = dir.path().display().to_string();
    let base = ["report", "--root", &root, "--evidence", &ev, "--operator", "mysql", "--color", "never"];

    let report = json(&run(&[&base[..], &["--format", "json"]].concat()));
    assert_eq!(report["format"], 1);
    assert_eq!(report["inputs"]["evidence_records"], 5);
    let ops = report["operators"].as_array().unwrap();
    assert_eq!(ops.len(), 1, "--operator narrows the report");
    let op = &ops[0];
    assert_eq!(op["binary"], "statecraft-mysql");
    assert_eq!(op["level"], 1, "{}", serde_json::to_string_pretty(&op["levels"]).unwrap());
    assert_eq!(op["earned_capabilities"], "Basic Install");
    assert_eq!(op["levels"][0]["status"], "confirmed");
    assert_eq!(op["levels"][1]["status"], "partial", "L2.adoption has no evidence here");
    assert_eq!(op["levels"][2]["status"], "failed");
    assert_eq!(criterion(op, "L1.install")["status"], "confirmed");
    assert_eq!(criterion(op, "L1.install")["evidence"][0]["test"], "mysql_cluster_becomes_ready_and_fails_over");
    assert_eq!(criterion(op, "L3.backup")["status"], "failed");
    assert_eq!(criterion(op, "L3.switchover")["status"], "claimed-unproven");
    assert_eq!(criterion(op, "L3.switchover")["evidence"][0]["current"], false);
    assert_eq!(criterion(op, "L2.adoption")["status"], "claimed-unproven");
    assert_eq!(criterion(op, "L5.auto-scaling")["status"], "claimed-unproven", "claimed, no evidence here");
    assert_eq!(criterion(op, "L5.auto-healing")["status"], "claimed-unproven", "claimed, no evidence here");
    assert_eq!(criterion(op, "L3.pdb")["status"], "confirmed", "the sample's StatefulSet has its PDB");

    let ok = run(&[&base[..], &["--require-level", "1"]].concat());
    assert!(ok.status.success(), "{}", stderr(&ok));
    let table = stdout(&ok);
    assert!(
        table.contains("■ statecraft-mysql  level 1  OperatorHub capabilities earned: \"Basic Install\""),
        "{table}"
    );
    assert!(table.contains("✓ mysql_invalid_specs_are_refused passed"), "{table}");
    assert!(table.contains("L3.backup                         ✗ Failed"), "{table}");

    let below = run(&[&base[..], &["--require-level", "2"]].concat());
    assert_eq!(below.status.code(), Some(3));
    assert!(
        stderr(&below).contains("statecraft-mysql is at level 1, below the required level 2"),
        "{}",
        stderr(&below)
    );
    assert!(!stdout(&below).is_empty(), "the report is still printed");

    let md = run(&[&base[..], &["--format", "markdown"]].concat());
    assert!(stdout(&md).contains("## statecraft-mysql — level 1"), "{}", stdout(&md));
    let html = run(&[&base[..], &["--format", "html"]].concat());
    assert!(stdout(&html).contains("Level 1 · Basic Install"));

    let out = dir.path().join("report.html");
    let written = run(&[&base[..], &["--format", "html", "--output", &out.display().to_string()]].concat());
    assert!(written.status.success() && stdout(&written).is_empty());
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("<!DOCTYPE html>"));

    let forced = run(&[&base[..7], &["--color", "always"]].concat());
    assert!(stdout(&forced).contains("\x1b[32m✓ Confirmed"), "colour on request");
}

#[test]
fn every_operator_is_reported_and_unproven_claims_earn_no_level() {
    let dir = tempfile::tempdir().unwrap();
    let root = root().display().to_string();
    let report =
        json(&run(&["report", "--root", &root, "--evidence", &dir.path().display().to_string(), "--format", "json"]));
    let names: Vec<&str> =
        report["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mysql", "etcd", "kafka"]);
    // etcd claims criteria, but without evidence its e2e criteria are unproven: no level.
    assert!(!report["operators"][1]["claims"].as_array().unwrap().is_empty());
    assert_eq!(report["operators"][1]["level"], 0);
    // Kafka claims nothing yet.
    assert_eq!(report["operators"][2]["claims"], serde_json::json!([]));
    assert_eq!(report["operators"][2]["level"], 0);
    let below =
        run(&["report", "--root", &root, "--evidence", &dir.path().display().to_string(), "--require-level", "1"]);
    assert_eq!(below.status.code(), Some(3));
}

#[test]
fn bad_evidence_stops_the_report_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    mysql_evidence(dir.path());
    let file = dir.path().join("mysql.jsonl");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&text.lines().next().unwrap().replace("L3.failover", "L3.time-travel"));
    text.push('\n');
    std::fs::write(&file, text).unwrap();
    let root = root().display().to_string();
    let o = run(&["report", "--root", &root, "--evidence", &dir.path().display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty(), "no partial report: {}", stdout(&o));
    assert!(stderr(&o).contains("mysql.jsonl:6: unknown criterion \"L3.time-travel\""), "{}", stderr(&o));

    std::fs::write(&file, "{\"format\": 1, \"operator\": \"mysql\"\n").unwrap();
    let o = run(&["report", "--root", &root, "--evidence", &dir.path().display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("mysql.jsonl:1: malformed record"), "{}", stderr(&o));

    let o = run(&["report", "--root", &root, "--evidence", "/nonexistent/evidence"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/evidence: evidence directory not found"), "{}", stderr(&o));

    let o = run(&["report", "--root", &root, "--operator", "postgres"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown operator \"postgres\""), "{}", stderr(&o));
}

#[test]
fn assess_finds_a_full_lifecycle_claim_contradicted_and_only_basic_install_evidenced() {
    let bundle = fixture("full-lifecycle-claim/bundle");
    let operand = fixture("full-lifecycle-claim/operand");
    let args = ["assess", "--manifests", &bundle, "--operand", &operand, "--color", "never"];
    let report = json(&run(&[&args[..], &["--format", "json"]].concat()));
    assert_eq!(report["kind"], "assessment");
    let op = &report["operators"][0];
    assert_eq!(op["name"], "widget-operator", "the bundle's package");
    let a = &op["assessment"];
    assert_eq!(a["declared_annotation"], "Full Lifecycle");
    assert_eq!(a["declared"], 3);
    assert_eq!(a["evidenced"], 1);
    assert_eq!(a["verdict"], "contradicted");
    assert_eq!(a["contradicted_by"], serde_json::json!(["L3.probes", "L3.resources", "L3.pdb", "L3.spread"]));
    assert!(a["needs_e2e"].as_array().unwrap().iter().any(|c| c == "L2.adoption"));
    for id in ["L1.crds", "L1.rbac", "L1.operator-deployment", "L1.operand-security", "L1.operand-image"] {
        assert_eq!(criterion(op, id)["status"], "confirmed", "{id}");
    }
    assert_eq!(criterion(op, "L1.install")["status"], "claimed-unproven", "static alone proves no install");
    assert_eq!(criterion(op, "L3.pdb")["status"], "failed");
    assert_eq!(criterion(op, "L4.alerts")["status"], "not-claimed");

    let table = run(&args);
    let text = stdout(&table);
    assert!(text.contains("declares \"Full Lifecycle\"; manifests evidence level 1: contradicted"), "{text}");
    assert!(text.contains("StatefulSet sample container widget"), "findings name the object: {text}");
    assert!(text.contains("operand/sample.yaml:3)"), "and the file and line (of the List): {text}");
    assert!(run(&[&args[..], &["--require-level", "1"]].concat()).status.success());
    assert_eq!(run(&[&args[..], &["--require-level", "2"]].concat()).status.code(), Some(3));

    // Without the operand's objects the level-3 checks cannot be made: nothing contradicts
    // the claim, and level 1 is not evidenced either.
    let report = json(&run(&["assess", "--manifests", &bundle, "--format", "json"]));
    let a = &report["operators"][0]["assessment"];
    assert_eq!(a["verdict"], "unproven");
    assert_eq!(a["evidenced"], 0);
    assert!(a["summary"].as_str().unwrap().contains("operand checks need --operand"), "{a}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The full-lifecycle fixture with its CSV's annotation replaced.
fn with_declaration(declared: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&fixture("full-lifecycle-claim")), dir.path());
    let csv = dir.path().join("bundle/manifests/widget-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&csv)
        .unwrap()
        .replace("capabilities: Full Lifecycle", &format!("capabilities: {declared}"));
    std::fs::write(csv, text).unwrap();
    dir
}

#[test]
fn assess_finds_a_basic_install_declaration_consistent() {
    let dir = with_declaration("Basic Install");
    let bundle = dir.path().join("bundle").display().to_string();
    let operand = dir.path().join("operand").display().to_string();
    let report = json(&run(&["assess", "--manifests", &bundle, "--operand", &operand, "--format", "json"]));
    let a = &report["operators"][0]["assessment"];
    assert_eq!(a["verdict"], "consistent", "{a}");
    assert_eq!(a["contradicted_by"], serde_json::json!([]));
}

#[test]
fn assess_refuses_a_capabilities_value_that_is_not_a_level() {
    let dir = with_declaration("Level 3");
    let o = run(&["assess", "--manifests", &dir.path().join("bundle").display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    assert!(
        stderr(&o).contains("widget-operator.clusterserviceversion.yaml:1: capabilities annotation \"Level 3\" is not one of \"Basic Install\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn assess_finds_wildcard_rbac_and_an_undocumented_crd_contradict_level_1() {
    let report = json(&run(&["assess", "--manifests", &fixture("wildcard-rbac/manifests"), "--format", "json"]));
    let op = &report["operators"][0];
    assert_eq!(op["name"], "gadget-operator.v1.0.0", "no bundle metadata: the CSV's name");
    let a = &op["assessment"];
    assert_eq!(a["declared"], 2);
    assert_eq!(a["evidenced"], 0);
    assert_eq!(a["verdict"], "contradicted");
    assert_eq!(
        a["contradicted_by"],
        serde_json::json!([
            "L1.install",
            "L1.crds",
            "L1.validation",
            "L1.operand-image",
            "L1.rbac",
            "L1.operator-deployment"
        ])
    );
    let rbac = criterion(op, "L1.rbac");
    let findings: Vec<&str> = rbac["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()))
        .collect();
    assert!(
        findings.iter().any(|f| f.contains("ClusterRole gadget-operator") && f.contains("operator.yaml:1")),
        "{findings:?}"
    );
    assert!(
        findings.iter().any(|f| f.contains("ClusterRoleBinding gadget-operator") && f.contains("operator.yaml:10")),
        "{findings:?}"
    );
    assert!(findings.iter().any(|f| f.contains("`*` in apiGroups, resources, verbs")), "{findings:?}");
    let md = run(&["assess", "--manifests", &fixture("wildcard-rbac/manifests"), "--format", "markdown"]);
    assert!(stdout(&md).contains("verdict: **contradicted**"), "{}", stdout(&md));
}

#[test]
fn assess_stops_at_a_document_that_is_not_a_kubernetes_object() {
    let o = run(&["assess", "--manifests", &fixture("not-kubernetes/manifests")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty(), "no partial report");
    assert!(stderr(&o).contains("values.yaml:2: not a Kubernetes object: no apiVersion"), "{}", stderr(&o));
    let o = run(&["assess", "--manifests", "/nonexistent/bundle"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("manifests directory not found"), "{}", stderr(&o));
}

#[test]
fn criteria_prints_the_model_and_fingerprint_the_current_code() {
    let model = json(&run(&["criteria", "--format", "json"]));
    let ids: Vec<&str> = model["criteria"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"L3.backup") && ids.contains(&"L5.auto-healing"), "{ids:?}");
    assert_eq!(model["levels"][2]["name"], "Full Lifecycle");
    let l4 = model["criteria"].as_array().unwrap().iter().find(|c| c["id"] == "L4.alerts").unwrap();
    assert_eq!(l4["checks"], serde_json::json!(["alerts.present", "alerts.severity", "alerts.runbooks"]));
    let table = stdout(&run(&["criteria"]));
    assert!(table.contains("L3 Full Lifecycle\n"), "{table}");

    let root_arg = root().display().to_string();
    let fp = run(&["fingerprint", "mysql", "--root", &root_arg]);
    assert_eq!(stdout(&fp).trim(), evidence::fingerprint(&root(), "mysql").unwrap().hash);
    assert_eq!(run(&["fingerprint", "postgres"]).status.code(), Some(1));
}
