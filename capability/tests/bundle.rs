//! `bundle`: the OLM bundle of each operator declares exactly the level the report earned
//! from the evidence (none without evidence, Basic Install with level-1 evidence, and so on
//! up to Auto Pilot), owns every CRD its operator ships, installs the shipped Deployment
//! with the shipped Role's rules, and `assess` finds no contradiction in what it declares.
//! Evidence is written to temp directories with the current code fingerprint, as in cli.rs.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use statecraft_capability::bundle::{self, Bundle};
use statecraft_capability::evidence::{self, Outcome, Record};
use statecraft_capability::model::{CRITERIA, Level};
use statecraft_capability::report::{self, AssessOptions, Verdict, WorkspaceOptions};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn record(operator: &str, test: &str, criteria: &[&str], fingerprint: &str) -> Record {
    support::record(operator, test, criteria, Outcome::Passed, fingerprint)
}

/// Current passed evidence for every e2e-verified criterion of `operator` up to `level`.
fn evidence_up_to(dir: &Path, operator: &str, level: u8) {
    let fp = evidence::fingerprint(&root(), operator).expect("fingerprint").hash;
    let ids: Vec<&str> =
        CRITERIA.iter().filter(|c| c.level.number() <= level && c.verification.has_e2e()).map(|c| c.id).collect();
    evidence::append(dir, &record(operator, &format!("{operator}_up_to_level_{level}"), &ids, &fp)).expect("append");
}

/// The report of `operator` from the evidence in `dir`, and the bundle built from it.
fn report_and_bundle(operator: &str, dir: &Path) -> (report::OperatorReport, Bundle) {
    let report = report::workspace(&WorkspaceOptions {
        root: root(),
        evidence: Some(dir.to_path_buf()),
        only: vec![operator.into()],
    })
    .expect("the report");
    let op = report.operators.into_iter().next().expect("one operator");
    let bundle = bundle::build(&root(), &op).expect("the bundle");
    (op, bundle)
}

fn file<'a>(bundle: &'a Bundle, path: &str) -> &'a str {
    &bundle.files.iter().find(|f| f.path == Path::new(path)).unwrap_or_else(|| panic!("no {path}")).text
}

fn csv(bundle: &Bundle) -> Value {
    let path = format!("manifests/{}.clusterserviceversion.yaml", bundle.package);
    serde_norway::from_str(file(bundle, &path)).expect("the CSV is YAML")
}

/// `assess` on the written bundle's manifests (and, when given, the operand the operator
/// builds for its sample): the verdict and what contradicts the declared level.
fn assess(bundle: &Bundle, operand: bool) -> (Verdict, Vec<&'static str>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    bundle::write(bundle, &out).expect("written");
    let operand_dir = dir.path().join("operand");
    if operand {
        std::fs::create_dir(&operand_dir).unwrap();
        let op = bundle.package.trim_start_matches("statecraft-");
        std::fs::copy(root().join("deploy").join(op).join("sample-objects.yaml"), operand_dir.join("objects.yaml"))
            .unwrap();
    }
    let report = report::assess(&AssessOptions {
        manifests: out.join("manifests"),
        operand: operand.then_some(operand_dir),
        runbooks: Some(root()),
    })
    .expect("assess");
    let a = report.operators[0].assessment.clone().expect("an assessment");
    (a.verdict, a.contradicted_by, a.bundle_errors)
}

#[test]
fn without_evidence_no_bundle_declares_a_level() {
    let empty = tempfile::tempdir().unwrap();
    for op in ["mysql", "etcd", "kafka"] {
        let (report, bundle) = report_and_bundle(op, empty.path());
        assert_eq!(report.earned_capabilities, None);
        assert_eq!(bundle.capabilities, None);
        let csv = csv(&bundle);
        assert!(csv["metadata"]["annotations"].get("capabilities").is_none(), "{op}: {}", csv["metadata"]);
        let (verdict, contradicted, errors) = assess(&bundle, false);
        assert_eq!(verdict, Verdict::NotDeclared, "{op}");
        assert!(contradicted.is_empty() && errors.is_empty(), "{op}: {contradicted:?} {errors:?}");
    }
}

/// Level by level, the annotation is the report's earned value, and `assess` on the bundle
/// (with and without the operand's objects) never finds it contradicted: at Basic Install
/// static evidence supports it, above that the rest needs a run.
#[test]
fn the_bundle_declares_exactly_the_level_the_report_earned() {
    for level in 1..=5u8 {
        let dir = tempfile::tempdir().unwrap();
        evidence_up_to(dir.path(), "mysql", level);
        let (report, bundle) = report_and_bundle("mysql", dir.path());
        let expected = Level::from_number(level).map(Level::name);
        assert_eq!(report.earned_capabilities, expected, "the report earns level {level}");
        assert_eq!(bundle.capabilities, report.earned_capabilities);
        assert_eq!(csv(&bundle)["metadata"]["annotations"]["capabilities"].as_str(), expected);
        for operand in [false, true] {
            let (verdict, contradicted, errors) = assess(&bundle, operand);
            assert!(contradicted.is_empty(), "level {level}, operand {operand}: contradicted by {contradicted:?}");
            assert!(errors.is_empty(), "level {level}: {errors:?}");
            let want = if level == 1 { Verdict::Supported } else { Verdict::NotShown };
            assert_eq!(verdict, want, "level {level}, operand {operand}");
        }
    }
}

/// Evidence does not make a level: etcd claims no L1.operand-security, so a pass of every
/// e2e criterion still earns nothing, and the bundle declares nothing.
#[test]
fn evidence_for_an_unclaimed_level_declares_nothing() {
    let dir = tempfile::tempdir().unwrap();
    evidence_up_to(dir.path(), "etcd", 5);
    let (report, bundle) = report_and_bundle("etcd", dir.path());
    assert_eq!(report.level, 0, "{:?}", report.levels);
    assert_eq!(bundle.capabilities, None);
}

/// The CSV owns every CRD of crds/<op>.yaml (each copied byte for byte to its own file),
/// installs the Deployment of deploy/<op>/operator.yaml and grants its ServiceAccount the
/// rules of both its Roles (its own rights and those over its resources), in its own
/// namespace only.
#[test]
fn the_csv_owns_every_crd_and_installs_the_shipped_deployment_and_rbac() {
    let empty = tempfile::tempdir().unwrap();
    for op in ["mysql", "etcd", "kafka"] {
        let (_, bundle) = report_and_bundle(op, empty.path());
        let csv = csv(&bundle);
        assert_eq!(csv["apiVersion"], "operators.coreos.com/v1alpha1");
        assert_eq!(csv["metadata"]["name"], format!("statecraft-{op}.v{}", env!("CARGO_PKG_VERSION")));
        assert_eq!(csv["spec"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(csv["spec"]["minKubeVersion"], "1.34.0");

        let crds_text = std::fs::read_to_string(root().join("crds").join(format!("{op}.yaml"))).unwrap();
        let docs: Vec<&str> = crds_text.split("---\n").filter(|d| !d.trim().is_empty()).collect();
        let owned = csv["spec"]["customresourcedefinitions"]["owned"].as_array().unwrap();
        assert_eq!(owned.len(), docs.len(), "{op}");
        for (doc, owned) in docs.iter().zip(owned) {
            let crd: Value = serde_norway::from_str(doc).unwrap();
            let name = crd["metadata"]["name"].as_str().unwrap();
            assert_eq!(owned["name"], name);
            assert_eq!(owned["kind"], crd["spec"]["names"]["kind"]);
            assert_eq!(owned["version"], crd["spec"]["versions"][0]["name"]);
            let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
            assert!(owned["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}");
            let paths = |key: &str| -> Vec<String> {
                owned[key].as_array().unwrap().iter().map(|d| d["path"].as_str().unwrap().to_string()).collect()
            };
            let props = |part: &str| -> Vec<String> {
                schema["properties"][part]["properties"].as_object().unwrap().keys().cloned().collect()
            };
            assert_eq!(paths("specDescriptors"), props("spec"), "{name}");
            assert_eq!(paths("statusDescriptors"), props("status"), "{name}");
            let conditions = owned["statusDescriptors"].as_array().unwrap().iter().find(|d| d["path"] == "conditions");
            assert_eq!(conditions.unwrap()["x-descriptors"][0], "urn:alm:descriptor:io.kubernetes.conditions");
            assert_eq!(file(&bundle, &format!("manifests/{name}.yaml")), *doc, "copied as written");
        }

        let shipped =
            statecraft_capability::manifests::load_file(&root().join("deploy").join(op).join("operator.yaml")).objects;
        let of = |kind: &str| shipped.iter().find(|o| o.kind() == kind).unwrap().value.clone();
        let (deployment, account) = (of("Deployment"), of("ServiceAccount"));
        let rules: Vec<Value> = shipped
            .iter()
            .filter(|o| o.kind() == "Role")
            .flat_map(|o| o.value["rules"].as_array().unwrap().clone())
            .collect();
        assert!(rules.iter().any(|r| r["resources"][0] == "leases"), "{op}: its Lease is among the rules");
        let install = &csv["spec"]["install"];
        assert_eq!(install["strategy"], "deployment");
        let deployments = install["spec"]["deployments"].as_array().unwrap();
        assert_eq!(deployments.len(), 1);
        assert_eq!(deployments[0]["name"], deployment["metadata"]["name"]);
        // The shipped Deployment, its container told the namespaces OLM targets.
        let mut spec = deployments[0]["spec"].clone();
        let env = spec["template"]["spec"]["containers"][0]["env"].as_array_mut().unwrap();
        let targets = env.pop().unwrap();
        assert_eq!(targets["name"], "STATECRAFT_NAMESPACES");
        assert_eq!(targets["valueFrom"]["fieldRef"]["fieldPath"], "metadata.annotations['olm.targetNamespaces']");
        assert_eq!(spec, deployment["spec"]);
        let permissions = install["spec"]["permissions"].as_array().unwrap();
        assert_eq!(permissions.len(), 1);
        assert_eq!(permissions[0]["serviceAccountName"], account["metadata"]["name"]);
        assert_eq!(permissions[0]["rules"], Value::Array(rules));
        assert!(install["spec"].get("clusterPermissions").is_none());
        let supported: Vec<&str> = csv["spec"]["installModes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["supported"] == true)
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert_eq!(supported, ["OwnNamespace", "SingleNamespace", "MultiNamespace"]);
        let annotations = &csv["metadata"]["annotations"];
        assert_eq!(annotations["containerImage"], deployment["spec"]["template"]["spec"]["containers"][0]["image"]);
        assert!(annotations.get("createdAt").is_none(), "no timestamp: the output is reproducible");

        let examples: Vec<Value> = serde_json::from_str(annotations["alm-examples"].as_str().unwrap()).unwrap();
        assert_eq!(examples.len(), 1);
        assert_eq!(examples[0]["kind"], owned[0]["kind"]);
        assert!(examples[0]["metadata"].get("namespace").is_none(), "{}", examples[0]);

        let metadata: Value = serde_norway::from_str(file(&bundle, "metadata/annotations.yaml")).unwrap();
        let a = &metadata["annotations"];
        assert_eq!(a["operators.operatorframework.io.bundle.mediatype.v1"], "registry+v1");
        assert_eq!(a["operators.operatorframework.io.bundle.package.v1"], format!("statecraft-{op}"));
        assert_eq!(a["operators.operatorframework.io.bundle.channel.default.v1"], "alpha");
    }
}

fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(tree(&path));
        } else {
            out.push((path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// Same inputs, same bytes; a second run replaces the first run's bundle whole (a file it
/// no longer writes is gone), and a directory that is not a bundle is never replaced.
#[test]
fn the_output_is_reproducible_and_replaces_only_a_bundle() {
    let empty = tempfile::tempdir().unwrap();
    let (_, first) = report_and_bundle("kafka", empty.path());
    let (_, second) = report_and_bundle("kafka", empty.path());
    assert_eq!(first.files, second.files);

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results/bundles/kafka");
    bundle::write(&first, &out).unwrap();
    let written = tree(&out);
    std::fs::write(out.join("manifests/stale.yaml"), "kind: ConfigMap\n").unwrap();
    bundle::write(&second, &out).unwrap();
    assert_eq!(tree(&out), written);
    let siblings: Vec<_> = std::fs::read_dir(out.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(siblings, ["kafka"], "no temporary directory is left behind");

    std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\n").unwrap();
    let err = bundle::write(&first, dir.path()).unwrap_err().to_string();
    assert!(err.contains("which is not part of a bundle; not replacing it"), "{err}");
    assert!(dir.path().join("Cargo.toml").is_file());
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_statecraft-capability")).args(args).output().expect("the binary runs")
}

/// The command line: no level without evidence, said on standard error; Basic Install with
/// the level-1 evidence; an unknown operator is refused.
#[test]
fn the_command_writes_the_bundle_and_says_when_it_declares_no_level() {
    let dir = tempfile::tempdir().unwrap();
    let (empty, l1) = (dir.path().join("empty"), dir.path().join("l1"));
    std::fs::create_dir(&empty).unwrap();
    evidence_up_to(&l1, "mysql", 1);
    let root = root().display().to_string();
    let out = dir.path().join("bundle");
    let args = |ev: &Path| {
        ["bundle", "--operator", "mysql", "--root", &root, "--output", &out.display().to_string(), "--evidence"]
            .iter()
            .map(|s| s.to_string())
            .chain([ev.display().to_string()])
            .collect::<Vec<_>>()
    };
    let csv_file = out.join("manifests/statecraft-mysql.clusterserviceversion.yaml");

    let o = run(&args(&empty).iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(o.stdout.is_empty());
    assert!(stderr.contains("the bundle declares no capability level"), "{stderr}");
    assert!(stderr.contains("run `make e2e`"), "{stderr}");
    let declared = || -> Value {
        let csv: Value = serde_norway::from_str(&std::fs::read_to_string(&csv_file).unwrap()).unwrap();
        csv["metadata"]["annotations"]["capabilities"].clone()
    };
    assert_eq!(declared(), Value::Null);

    let o = run(&args(&l1).iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("capabilities \"Basic Install\""), "{stderr}");
    assert_eq!(declared(), "Basic Install");

    let o = run(&["bundle", "--operator", "postgres", "--root", &root, "--output", &out.display().to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown operator \"postgres\""));
}
