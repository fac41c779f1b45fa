//! The ways a user installs an operator, tried as a user would: the kustomize base of each
//! operator (`deploy/<operator>/kustomization.yaml`) renders exactly the one-file install
//! (`deploy/<operator>/install.yaml`), an overlay moves it to another namespace and image,
//! and (on a cluster, `--ignored`) `kubectl apply --server-side -f` of the one file installs
//! a working operator into a namespace that did not exist.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use statecraft_e2e::{Cluster, wait_until};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const OPERATORS: [&str; 3] = ["mysql", "kafka", "etcd"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kubectl kustomize DIR` with the kubectl `make deps` builds (kustomize is built in).
fn kustomize(dir: &Path) -> Result<String, String> {
    let kubectl = statecraft_shared::testing::bin_dir().join("kubectl");
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| format!("{}: {e} (run `make deps`)", kubectl.display()))?;
    if !out.status.success() {
        return Err(format!("kubectl kustomize {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr)));
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

/// `v` with every number as a float: kustomize writes a schema's `minimum: 1.0` as `1`.
fn numbers_as_floats(v: Value) -> Value {
    match v {
        Value::Number(n) => n.as_f64().and_then(serde_json::Number::from_f64).map_or(Value::Number(n), Value::Number),
        Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, numbers_as_floats(v))).collect()),
        other => other,
    }
}

/// The objects of a multi-document YAML stream, sorted by kind, namespace and name.
fn objects(yaml: &str) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let mut objects = Vec::new();
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let v: Value = serde::Deserialize::deserialize(doc)?;
        if !v.is_null() {
            objects.push(numbers_as_floats(v));
        }
    }
    let key = |v: &Value| {
        [&v["kind"], &v["metadata"]["namespace"], &v["metadata"]["name"]].map(|f| f.as_str().unwrap_or("").to_string())
    };
    objects.sort_by_key(key);
    Ok(objects)
}

#[test]
fn each_kustomize_base_renders_the_one_file_install() -> TestResult {
    for op in OPERATORS {
        let file = std::fs::read_to_string(root().join(format!("deploy/{op}/install.yaml")))?;
        let base = kustomize(&root().join(format!("deploy/{op}")))?;
        let (file, base) = (objects(&file)?, objects(&base)?);
        let kinds: Vec<_> = file.iter().filter_map(|o| o["kind"].as_str()).collect();
        for kind in ["Namespace", "CustomResourceDefinition", "ServiceAccount", "Role", "RoleBinding", "Deployment"] {
            assert!(kinds.contains(&kind), "deploy/{op}/install.yaml has no {kind}: {kinds:?}");
        }
        assert_eq!(
            file.len(),
            base.len(),
            "kubectl kustomize deploy/{op}: as many objects as deploy/{op}/install.yaml"
        );
        for (f, b) in file.iter().zip(&base) {
            assert!(f == b, "kubectl kustomize deploy/{op} differs from deploy/{op}/install.yaml:\n{f}\n{b}");
        }
    }
    Ok(())
}

#[test]
fn an_overlay_moves_an_operator_to_another_namespace_and_image() -> TestResult {
    let dir = tempfile::tempdir()?;
    // kustomize takes only relative paths to a base.
    let up = "../".repeat(dir.path().canonicalize()?.components().count().saturating_sub(1));
    let base = format!("{up}{}", root().join("deploy/etcd").canonicalize()?.to_string_lossy().trim_start_matches('/'));
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shop\nresources:\n- {}\n\
             images:\n- name: docker.io/statecraft/statecraft-etcd\n  newName: registry.example.com/statecraft-etcd\n  newTag: \"1.2.3\"\n",
            base
        ),
    )?;
    let objects = objects(&kustomize(dir.path())?)?;
    for o in &objects {
        let (kind, name) = (o["kind"].as_str().unwrap_or(""), o["metadata"]["name"].as_str().unwrap_or(""));
        match kind {
            "Namespace" => assert_eq!(name, "shop", "the Namespace follows the overlay"),
            "CustomResourceDefinition" => assert!(o["metadata"]["namespace"].is_null(), "{name} is cluster-scoped"),
            _ => assert_eq!(o["metadata"]["namespace"], "shop", "{kind} {name} moved"),
        }
        if kind == "RoleBinding" {
            assert_eq!(o["subjects"][0]["namespace"], "shop", "the binding names the moved ServiceAccount");
        }
        if kind == "Deployment" {
            let pod = &o["spec"]["template"]["spec"];
            assert_eq!(pod["containers"][0]["image"], "registry.example.com/statecraft-etcd:1.2.3");
            let text = serde_json::to_string(pod)?;
            assert!(!text.contains("docker.io/statecraft"), "no copy of the old image is left behind: {text}");
        }
    }
    Ok(())
}

/// A minimal EtcdCluster in the namespace the one-file install created.
const ETCD: &str = r#"{"apiVersion": "etcd.statecraft.io/v1alpha1", "kind": "EtcdCluster",
  "metadata": {"name": "first", "namespace": "statecraft-system"},
  "spec": {"version": "3.6.16", "replicas": 1, "storage": {"size": "256Mi"},
           "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}}}"#;

/// `kubectl apply --server-side -f deploy/<operator>/install.yaml` for every operator, as the
/// README tells a user, on a cluster without `statecraft-system`: each operator rolls out,
/// and the etcd operator then builds a cluster there. Everything is removed afterwards
/// (the cluster first, while its operator can still release its finalizer).
#[tokio::test]
#[ignore = "needs a cluster: make e2e"]
async fn the_one_file_install_works_in_a_namespace_that_did_not_exist() -> TestResult {
    let cluster = Cluster::connect().await?;
    cluster.kubectl(&["delete", "namespace", "statecraft-system", "--ignore-not-found", "--timeout=180s"])?;
    for op in OPERATORS {
        let file = root().join(format!("deploy/{op}/install.yaml"));
        cluster.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &file.to_string_lossy()])?;
    }
    for op in OPERATORS {
        let deployment = format!("deployment/statecraft-{op}");
        cluster.kubectl(&["rollout", "status", "-n", "statecraft-system", &deployment, "--timeout=180s"])?;
    }
    cluster.kubectl_with_input(&["apply", "-f", "-"], Some(ETCD))?;
    let ready = wait_until(Duration::from_secs(240), "EtcdCluster first Ready", || async {
        let status = cluster
            .kubectl(&[
                "get",
                "etcdcluster",
                "first",
                "-n",
                "statecraft-system",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ])
            .ok()?;
        (status == "True").then_some(())
    })
    .await;
    cluster.kubectl(&["delete", "etcdcluster", "first", "-n", "statecraft-system", "--timeout=120s"])?;
    cluster.kubectl(&["delete", "namespace", "statecraft-system", "--timeout=180s"])?;
    ready?;
    Ok(())
}
