//! The `statecraft-capability` binary end to end: reports from evidence (written to temp
//! directories with the current code fingerprint), `--require-level`, every format, bad
//! input, and `assess` on the fixture bundles in `tests/fixtures`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use statecraft_capability::evidence::{self, Outcome, Record};

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
        figures: serde_json::json!({"seconds": 2.5}),
        duration_seconds: Some(300.0),
        ..support::record("mysql", test, criteria, result, fingerprint)
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

/// The NEXT block adds up the recorded durations of the tests its command runs, and counts
/// the ones with no run recorded.
#[test]
fn next_says_how_long_its_command_takes_from_recorded_runs() {
    let dir = tempfile::tempdir().unwrap();
    let tests = statecraft_capability::next::e2e_tests(&root(), "mysql").expect("the e2e tests");
    let mut names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    // A real test that proves a claimed criterion, passed on older code so the NEXT block
    // still lists it: its 300 s are the whole recorded time.
    let test = &tests.iter().find(|t| t.criteria.iter().any(|c| c == "L3.failover")).expect("a failover test").name;
    evidence::append(dir.path(), &record(test, &["L3.failover"], Outcome::Passed, "sha256:older-code")).unwrap();
    let root = root().display().to_string();
    let ev = dir.path().display().to_string();
    let base = ["report", "--root", &root, "--evidence", &ev, "--operator", "mysql", "--color", "never"];
    let report = json(&run(&[&base[..], &["--format", "json"]].concat()));
    let duration = &report["operators"][0]["next"]["duration"];
    assert_eq!(duration["recorded_seconds"], 300.0, "{duration}");
    assert_eq!(duration["recorded_tests"], 1);
    assert_eq!(duration["unrecorded"].as_array().unwrap().len(), names.len() - 1);
    let text = stdout(&run(&base));
    let expected = format!("about 5 min of test time over 1 test ({} more not timed yet)", names.len() - 1);
    assert!(text.contains(&expected), "{text}");

    // Without evidence: no estimate, said as such.
    let empty = tempfile::tempdir().unwrap();
    let ev = empty.path().display().to_string();
    let base = ["report", "--root", &root, "--evidence", &ev, "--operator", "mysql", "--color", "never"];
    assert!(stdout(&run(&base)).contains("how long:                 no run with a recorded duration yet"));
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
    assert_eq!(report["format"], statecraft_capability::report::REPORT_FORMAT);
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
    // etcd and Kafka claim criteria, but without evidence their e2e criteria are unproven:
    // no level.
    for op in [1, 2] {
        assert!(!report["operators"][op]["claims"].as_array().unwrap().is_empty(), "{}", report["operators"][op]);
        assert_eq!(report["operators"][op]["level"], 0);
    }
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
    assert_eq!(a["earned_from_static"], "Basic Install");
    assert_eq!(a["verdict"], "contradicted");
    // The observed operand has no probes, resources or PDB: the level-3 capability is
    // contradicted. Its missing anti-affinity is below Statecraft's bar, not the model's.
    assert_eq!(a["contradicted_by"], serde_json::json!(["L3.probes", "L3.resources", "L3.pdb"]));
    assert!(a["needs_e2e"].as_array().unwrap().iter().any(|c| c == "L2.adoption"));
    let why = a["needs_run"].as_array().unwrap().iter().find(|n| n["criterion"] == "L3.failover").unwrap();
    assert!(why["why"].as_str().unwrap().contains("the primary is killed"), "{why}");
    for id in ["L1.crds", "L1.operand-image"] {
        assert_eq!(criterion(op, id)["status"], "confirmed", "{id}");
    }
    assert_eq!(criterion(op, "L1.install")["status"], "claimed-unproven", "static alone proves no install");
    assert_eq!(criterion(op, "L3.pdb")["status"], "failed");
    assert_eq!(criterion(op, "L4.alerts")["status"], "not-claimed");
    assert_eq!(criterion(op, "L1.rbac")["status"], "not-claimed", "hygiene, not capability");
    let hygiene = &a["hygiene"];
    assert_eq!((hygiene["high"].as_u64(), hygiene["low"].as_u64()), (Some(0), Some(0)), "{hygiene}");
    // The alerts' severities and runbooks cannot be judged: no alert rule ships.
    assert_eq!(hygiene["summary"], "below Statecraft's production bar: 1 medium (operand.spread); 2 not assessable");

    let table = run(&args);
    let text = stdout(&table);
    assert!(text.contains("■ widget-operator  declares \"Full Lifecycle\""), "{text}");
    assert!(
        text.contains("capability: contradicted: declares L3 Full Lifecycle, but the bundle contradicts L3.probes"),
        "{text}"
    );
    assert!(text.contains("OperatorHub value earned from static evidence: \"Basic Install\""), "{text}");
    assert!(text.contains("StatefulSet sample container widget"), "findings name the object: {text}");
    assert!(text.contains("operand/sample.yaml:3)"), "and the file and line (of the List): {text}");
    assert!(text.contains("✗ operand.spread"), "hygiene findings are listed: {text}");
    assert!(run(&[&args[..], &["--require-level", "1"]].concat()).status.success());
    assert_eq!(run(&[&args[..], &["--require-level", "2"]].concat()).status.code(), Some(3));

    // Without the operand's objects the level-3 checks cannot be made: nothing contradicts
    // the claim, and static evidence still supports level 1 (operand hygiene is not
    // assessable, and is not capability).
    let report = json(&run(&["assess", "--manifests", &bundle, "--format", "json"]));
    let a = &report["operators"][0]["assessment"];
    assert_eq!(a["verdict"], "not-shown");
    assert_eq!(a["evidenced"], 1);
    assert!(a["summary"].as_str().unwrap().contains("operand checks need --operand"), "{a}");
    assert!(a["hygiene"]["summary"].as_str().unwrap().ends_with("4 not assessable"), "{a}");
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

/// A copy of fixture `name` with the `capabilities: …` line of `csv` (a path inside it)
/// replaced.
fn with_declaration(name: &str, csv: &str, declared: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&fixture(name)), dir.path());
    let csv = dir.path().join(csv);
    let text = std::fs::read_to_string(&csv).unwrap();
    let line = text.lines().find(|l| l.trim_start().starts_with("capabilities:")).unwrap().to_string();
    let indent = &line[..line.len() - line.trim_start().len()];
    std::fs::write(&csv, text.replace(&line, &format!("{indent}capabilities: {declared}"))).unwrap();
    dir
}

const WIDGET_CSV: &str = "bundle/manifests/widget-operator.clusterserviceversion.yaml";
const SPROCKET_CSV: &str = "manifests/sprocket-operator.clusterserviceversion.yaml";

#[test]
fn assess_finds_a_basic_install_declaration_supported() {
    let dir = with_declaration("full-lifecycle-claim", WIDGET_CSV, "Basic Install");
    let bundle = dir.path().join("bundle").display().to_string();
    let operand = dir.path().join("operand").display().to_string();
    let report = json(&run(&["assess", "--manifests", &bundle, "--operand", &operand, "--format", "json"]));
    let a = &report["operators"][0]["assessment"];
    assert_eq!(a["verdict"], "supported", "{a}");
    assert_eq!(a["contradicted_by"], serde_json::json!([]));
}

/// A bundle in the shape community catalogs keep it (metadata files, catalog configuration,
/// kustomize configuration, a dashboard in the HTTP API's wrapper, a BOM, merge keys,
/// internal CRDs, a metrics reader bound to nothing), declaring Deep Insights with its
/// metrics, alerts and dashboard in the forms real operators use.
#[test]
fn assess_reads_a_catalog_bundle_and_sees_metrics_alerts_and_dashboards() {
    let bundle = fixture("catalog-bundle");
    let out = run(&["assess", "--manifests", &bundle, "--format", "json"]);
    let report = json(&out);
    let op = &report["operators"][0];
    assert_eq!(op["name"], "sprocket-operator");
    let a = &op["assessment"];
    assert_eq!(a["bundle_errors"], serde_json::json!([]), "{a}");
    let skipped: Vec<&str> = a["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap().rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        skipped,
        ["ci.yaml:2", "kustomizeconfig.yaml:2", "dependencies.yaml:1", "properties.yaml:1", "release-config.yaml:2"]
    );
    assert_eq!(a["verdict"], "not-shown", "{}", a["summary"]);
    assert_eq!(a["evidenced"], 1);
    assert_eq!(a["earned_from_static"], "Basic Install");
    for id in ["L1.crds", "L1.operand-image", "L4.alerts", "L4.dashboard"] {
        assert_eq!(criterion(op, id)["status"], "confirmed", "{id}: {}", criterion(op, id));
    }
    let detail = |id: &str, check: &str| {
        criterion(op, id)["checks"].as_array().unwrap().iter().find(|c| c["id"] == check).unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let metrics = detail("L4.metrics", "metrics.endpoint");
    assert!(metrics.contains("flag --metrics-bind-address=:8443"), "{metrics}");
    assert!(metrics.contains("Service sprocket-operator-metrics"), "{metrics}");
    assert!(detail("L4.alerts", "alerts.present").starts_with("2 alerts in 1 PrometheusRule (1 critical, 1 warning"));
    assert!(detail("L4.dashboard", "dashboard.present").contains("\"Sprockets\" (3 panels"));
    assert!(detail("L1.operand-image", "crd.image-override").contains("1 related image"));
    assert!(
        detail("L1.crds", "crd.descriptions").contains("4 of 5 own fields described"),
        "the internal CRD and `resources` are not counted"
    );
    let hints: Vec<String> = a["needs_run"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["hints"].as_array().unwrap().iter().map(move |h| format!("{}: {}", n["criterion"], h)))
        .collect();
    assert!(hints.iter().any(|h| h.contains("L3.scaling") && h.contains("scale subresource")), "{hints:?}");
    assert!(
        hints.iter().any(|h| h.contains("L2.operator-upgrade") && h.contains("replaces sprocket-operator.v1.3.0")),
        "{hints:?}"
    );
    // Hygiene: cluster-wide rights (and AllNamespaces only) weigh medium; reading every
    // core resource through `*` low; the metrics reader bound to nothing is not counted; the
    // merge key's override leaves one writable root filesystem.
    let failed: Vec<(String, String)> = a["hygiene"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| (c["id"].as_str().unwrap().to_string(), c["severity"].as_str().unwrap().to_string()))
        .collect();
    let pairs: Vec<(&str, &str)> = failed.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("rbac.namespaced", "medium"),
            ("crd.descriptions-complete", "low"),
            ("rbac.no-read-wildcards", "low"),
            ("deploy.read-only-root-fs", "low")
        ]
    );
    let ro = a["hygiene"]["checks"].as_array().unwrap().iter().find(|c| c["id"] == "deploy.read-only-root-fs").unwrap();
    let finding = ro["findings"][0].as_str().unwrap();
    assert!(finding.contains("container config-reloader"), "{finding}");
    assert!(
        finding.contains("sprocket-operator.clusterserviceversion.yaml#deployment sprocket-operator:"),
        "{finding}"
    );
    assert!(!finding.ends_with(":1)"), "the finding points into the CSV, not at its first line: {finding}");

    let table = stdout(&run(&["assess", "--manifests", &bundle, "--color", "never"]));
    assert!(table.contains("SKIPPED (5 not Kubernetes objects)"), "{table}");
    assert!(table.contains("OLM bundle metadata, not a Kubernetes object"), "{table}");
    let md = stdout(&run(&["assess", "--manifests", &bundle, "--format", "markdown"]));
    assert!(md.contains("- **Capability: not shown.**"), "{md}");
    assert!(md.contains("### Hygiene findings"), "{md}");
}

#[test]
fn an_honest_basic_install_below_our_hygiene_bar_is_supported() {
    let dir = with_declaration("catalog-bundle", SPROCKET_CSV, "Basic Install");
    let out = run(&["assess", "--manifests", &dir.path().display().to_string(), "--format", "json"]);
    let a = &json(&out)["operators"][0]["assessment"];
    assert_eq!(a["verdict"], "supported", "{}", a["summary"]);
    assert_ne!(a["hygiene"]["medium"], 0, "the hygiene findings stand, separately");
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_loop_is_not_followed_a_bundle_copy_is_left_out_and_two_bundles_are_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(Path::new(&fixture("catalog-bundle")), dir.path());
    std::os::unix::fs::symlink(dir.path(), dir.path().join("manifests/again")).unwrap();
    let report = json(&run(&["assess", "--manifests", &dir.path().display().to_string(), "--format", "json"]));
    let skipped = report["operators"][0]["assessment"]["skipped"].to_string();
    assert!(skipped.contains("symbolic link"), "{skipped}");

    std::fs::remove_file(dir.path().join("manifests/again")).unwrap();
    // A second copy of the bundle in `bundle/` (as some catalog directories keep it) is left
    // out with a note.
    copy_dir(&dir.path().join("manifests"), &dir.path().join("bundle/manifests"));
    let report = json(&run(&["assess", "--manifests", &dir.path().display().to_string(), "--format", "json"]));
    let a = &report["operators"][0]["assessment"];
    let note = a["skipped"].as_array().unwrap().last().unwrap()["reason"].as_str().unwrap().to_string();
    assert!(note.starts_with("another copy of bundle sprocket-operator.v1.4.0, not assessed"), "{note}");
    assert!(a["csv"].as_str().unwrap().contains("/manifests/sprocket-operator.clusterserviceversion.yaml"), "{a}");
    assert!(!a["csv"].as_str().unwrap().contains("bundle/manifests"), "{a}");

    std::fs::remove_dir_all(dir.path().join("bundle")).unwrap();
    let csv = std::fs::read_to_string(dir.path().join(SPROCKET_CSV)).unwrap();
    std::fs::write(
        dir.path().join("manifests/copy.clusterserviceversion.yaml"),
        csv.replace("sprocket-operator.v1.4.0", "sprocket-operator.v1.5.0"),
    )
    .unwrap();
    let o = run(&["assess", "--manifests", &dir.path().display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("2 ClusterServiceVersions"), "{err}");
    assert!(
        err.contains("copy.clusterserviceversion.yaml:1")
            && err.contains("sprocket-operator.clusterserviceversion.yaml:1"),
        "{err}"
    );
}

#[test]
fn capability_names_that_are_not_exact_are_bundle_errors() {
    let dir = with_declaration("full-lifecycle-claim", WIDGET_CSV, "Level 3");
    let o = run(&["assess", "--manifests", &dir.path().join("bundle").display().to_string(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(4), "an error of the bundle, not of the tool");
    assert!(stderr(&o).contains("the bundle has 1 error"), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).expect("the report is printed");
    let a = &report["operators"][0]["assessment"];
    assert_eq!(a["verdict"], "not-declared");
    assert!(
        a["bundle_errors"][0].as_str().unwrap().contains("capabilities \"Level 3\" is not one of \"Basic Install\""),
        "{a}"
    );

    let dir = with_declaration("full-lifecycle-claim", WIDGET_CSV, "full lifecycle");
    let o = run(&["assess", "--manifests", &dir.path().join("bundle").display().to_string(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(4));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = &report["operators"][0]["assessment"];
    assert_eq!(a["declared"], 3, "read as the level it names");
    assert!(a["bundle_errors"][0].as_str().unwrap().contains("must be written exactly \"Full Lifecycle\""), "{a}");
}

#[test]
fn assess_finds_an_undocumented_statusless_crd_contradicts_level_1_and_wildcard_rbac_fails_hygiene() {
    let report = json(&run(&["assess", "--manifests", &fixture("wildcard-rbac/manifests"), "--format", "json"]));
    let op = &report["operators"][0];
    assert_eq!(op["name"], "gadget-operator.v1.0.0", "no bundle metadata: the CSV's name");
    let a = &op["assessment"];
    assert_eq!(a["declared"], 2);
    assert_eq!(a["evidenced"], 0);
    assert_eq!(a["verdict"], "contradicted");
    assert_eq!(a["contradicted_by"], serde_json::json!(["L1.install", "L1.crds", "L1.operand-image"]));
    let check = |id: &str| {
        a["hygiene"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id}"))
            .clone()
    };
    let wildcards = check("rbac.no-wildcards");
    assert_eq!(wildcards["severity"], "high");
    let finding = wildcards["findings"][0].as_str().unwrap();
    assert!(finding.contains("ClusterRole gadget-operator") && finding.contains("operator.yaml:1"), "{finding}");
    assert!(finding.contains("`*` in apiGroups, resources, verbs"), "{finding}");
    assert!(check("rbac.namespaced")["findings"][0].as_str().unwrap().contains("ClusterRole gadget-operator ("));
    assert_eq!(a["hygiene"]["high"], 2, "wildcards and root: {}", a["hygiene"]["summary"]);
    let md = run(&["assess", "--manifests", &fixture("wildcard-rbac/manifests"), "--format", "markdown"]);
    assert!(stdout(&md).contains("- **Capability: contradicted.**"), "{}", stdout(&md));
}

#[test]
fn assess_skips_a_document_that_is_not_a_kubernetes_object_with_a_note() {
    let o = run(&["assess", "--manifests", &fixture("not-kubernetes/manifests"), "--format", "json"]);
    let report = json(&o);
    let a = &report["operators"][0]["assessment"];
    let skipped = &a["skipped"][0];
    assert!(skipped["source"].as_str().unwrap().ends_with("values.yaml:2"), "{skipped}");
    assert_eq!(skipped["reason"], "not a Kubernetes object: no apiVersion");
    assert_eq!(a["verdict"], "not-declared");
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
