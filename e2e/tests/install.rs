//! The ways a user installs an operator, tried as a user would: the kustomize base of each
//! operator (`deploy/<operator>/kustomization.yaml`) renders exactly the one-file install
//! (`deploy/<operator>/install.yaml`), an overlay moves it to another namespace and image;
//! the Helm chart (`deploy/helm/statecraft`) passes `helm lint`, renders the same objects
//! with its default values and puts every value where it belongs; and, on a cluster
//! (`--ignored`), `kubectl apply --server-side -f` of the one file installs working
//! operators into a namespace that did not exist, `helm install`, `helm upgrade` and
//! `helm uninstall` do what they say with an operator reconciling a cluster in between, and
//! an operator installed with `watchNamespaces` manages clusters in two other namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use statecraft_e2e::{Cluster, wait_until};
use statecraft_shared::testing::s3::S3Server;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const OPERATORS: [&str; 3] = ["mysql", "kafka", "etcd"];

/// Held by each cluster test here: both install cluster-scoped objects of the same names
/// (CRDs, the users' ClusterRoles), which one of them hands to a Helm release.
static CLUSTER_SCOPED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `tool` (a binary `make deps` puts in the cache's bin directory) with `args`;
/// its standard output.
fn run(tool: &str, args: &[&str]) -> Result<String, String> {
    let path = statecraft_shared::testing::bin_dir().join(tool);
    let out =
        Command::new(&path).args(args).output().map_err(|e| format!("{}: {e} (run `make deps`)", path.display()))?;
    if !out.status.success() {
        return Err(format!("{tool} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

/// `helm` with `args` against `cluster`.
fn helm_on(cluster: &Cluster, args: &[&str]) -> Result<String, String> {
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let mut all = vec!["--kubeconfig", kubeconfig.as_str()];
    all.extend(args);
    run("helm", &all)
}

/// `kubectl kustomize DIR` (kustomize is built into kubectl).
fn kustomize(dir: &Path) -> Result<String, String> {
    run("kubectl", &["kustomize", &dir.to_string_lossy()])
}

/// The chart, as a path for `helm`.
fn chart() -> String {
    root().join("deploy/helm/statecraft").to_string_lossy().into_owned()
}

/// `helm template` of the chart as release `statecraft` in namespace `statecraft-system`,
/// with `--set` values.
fn helm_template(set: &[&str]) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let chart = chart();
    let mut args = vec!["template", "statecraft", &chart, "--namespace", "statecraft-system"];
    for s in set {
        args.extend(["--set", s]);
    }
    objects(&run("helm", &args)?)
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
            "CustomResourceDefinition" | "ClusterRole" => {
                assert!(o["metadata"]["namespace"].is_null(), "{name} is cluster-scoped")
            }
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

#[test]
fn the_helm_chart_lints() -> TestResult {
    run("helm", &["lint", "--strict", &chart()])?;
    Ok(())
}

/// With its default values, the chart installs what the one-file installs hold, but the
/// Namespace (Helm's `--create-namespace`) and with its CRDs kept on uninstall.
#[test]
fn the_helm_chart_renders_the_one_file_installs_by_default() -> TestResult {
    let mut rendered = without_keep(helm_template(&[])?)?;
    let mut expected = Vec::new();
    for op in OPERATORS {
        let file = std::fs::read_to_string(root().join(format!("deploy/{op}/install.yaml")))?;
        expected.extend(objects(&file)?.into_iter().filter(|o| o["kind"] != "Namespace"));
    }
    let key = |v: &Value| [&v["kind"], &v["metadata"]["name"]].map(|f| f.as_str().unwrap_or("").to_string());
    expected.sort_by_key(key);
    rendered.sort_by_key(key);
    assert_eq!(rendered.len(), expected.len(), "as many objects as the install files");
    for (r, e) in rendered.iter().zip(&expected) {
        assert!(r == e, "helm template differs from the install files:\n{r}\n{e}");
    }
    Ok(())
}

/// `objects` with the CRDs' `helm.sh/resource-policy: keep` checked and taken off: that is
/// the one thing the chart adds to them.
fn without_keep(mut objects: Vec<Value>) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    for o in objects.iter_mut().filter(|o| o["kind"] == "CustomResourceDefinition") {
        let annotations = o["metadata"]["annotations"].as_object_mut().ok_or("a CRD without annotations")?;
        assert_eq!(
            annotations.remove("helm.sh/resource-policy"),
            Some(Value::from("keep")),
            "CRDs outlive the release"
        );
        if annotations.is_empty() {
            o["metadata"].as_object_mut().ok_or("metadata")?.remove("annotations");
        }
    }
    Ok(objects)
}

/// With `watchNamespaces`, the chart renders what `install --namespaces` does: the
/// operator's own Role (its Lease, its pod) in the release's namespace, a Role and
/// RoleBinding in each watched namespace (none in the release's, which is not watched), and
/// the Deployment told which namespaces to watch.
#[test]
fn the_helm_chart_watches_the_namespaces_install_would() -> TestResult {
    use statecraft_shared::runner::install_yaml;
    let rendered = without_keep(helm_template(&[
        "mysql.enabled=false",
        "kafka.enabled=false",
        "watchNamespaces={shop,billing}",
    ])?)?;
    let watched = ["shop".to_string(), "billing".to_string()];
    let install = install_yaml::<statecraft_etcd::EtcdOperator>("statecraft-system", &watched, None)?;
    let expected: Vec<Value> = objects(&install)?.into_iter().filter(|o| o["kind"] != "Namespace").collect();
    assert_eq!(rendered.len(), expected.len(), "as many objects as `install --namespaces shop,billing`");
    for (r, e) in rendered.iter().zip(&expected) {
        assert!(r == e, "helm template differs from `install --namespaces`:\n{r}\n{e}");
    }
    let roles: Vec<_> = rendered
        .iter()
        .filter(|o| o["kind"] == "Role")
        .map(|o| format!("{}/{}", o["metadata"]["namespace"].as_str().unwrap_or(""), o["metadata"]["name"]))
        .collect();
    assert_eq!(
        roles,
        ["billing/\"statecraft-etcd\"", "shop/\"statecraft-etcd\"", "statecraft-system/\"statecraft-etcd-self\""]
    );
    // The members' monitor looks where the clusters are; the operator's where it runs.
    let monitors = helm_template(&[
        "mysql.enabled=false",
        "kafka.enabled=false",
        "watchNamespaces={shop,billing}",
        "monitoring.podMonitor=true",
    ])?;
    let monitor = |name: &str| monitors.iter().find(|o| o["kind"] == "PodMonitor" && o["metadata"]["name"] == name);
    let members = monitor("statecraft-etcd-members").ok_or("no members' PodMonitor")?;
    assert_eq!(members["spec"]["namespaceSelector"]["matchNames"], serde_json::json!(["shop", "billing"]));
    let operator = monitor("statecraft-etcd").ok_or("no operator PodMonitor")?;
    assert!(operator["spec"].get("namespaceSelector").is_none(), "{operator}");
    assert_eq!(operator["spec"]["podMetricsEndpoints"][0]["honorLabels"], true, "clusters keep their namespace");
    Ok(())
}

/// Every value lands where it says: the image and its pull secrets, replicas, resources,
/// leader election, one operator switched off, the monitoring objects with the Prometheus
/// selector label and the runbook base URL.
#[test]
fn the_helm_chart_puts_every_value_in_place() -> TestResult {
    let objects = helm_template(&[
        "kafka.enabled=false",
        "image.registry=registry.example.com/team",
        "image.tag=1.2.3",
        "imagePullSecrets={pull}",
        "replicas=3",
        "resources.limits.memory=1Gi",
        "leaderElection.leaseDuration=3s",
        "monitoring.podMonitor=true",
        "monitoring.prometheusRule=true",
        "monitoring.grafanaDashboards=true",
        "monitoring.labels.release=kube-prometheus-stack",
        "monitoring.runbookBaseURL=https://docs.example.com/runbooks/",
    ])?;
    let named = |kind: &str, name: &str| objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name);
    assert!(named("Deployment", "statecraft-kafka").is_none(), "kafka is off");
    assert!(!objects.iter().any(|o| o["metadata"]["name"].as_str().is_some_and(|n| n.contains("kafka"))));
    for op in ["mysql", "etcd"] {
        let name = format!("statecraft-{op}");
        let d = named("Deployment", &name).ok_or(format!("no Deployment {name}"))?;
        assert_eq!(d["spec"]["replicas"], 3.0);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["imagePullSecrets"][0]["name"], "pull");
        let c = &pod["containers"][0];
        assert_eq!(c["image"], format!("registry.example.com/team/{name}:1.2.3"));
        assert_eq!(c["resources"]["limits"]["memory"], "1Gi");
        let env = c["env"].as_array().ok_or("env")?;
        assert!(env.iter().any(|e| e["name"] == "STATECRAFT_LEADER_LEASE_DURATION" && e["value"] == "3s"));
        assert!(!env.iter().any(|e| e["name"] == "STATECRAFT_LEADER_RENEW_DEADLINE"), "unset: the operator's default");
        for kind in ["PodMonitor", "PrometheusRule"] {
            let o = named(kind, &name).ok_or(format!("no {kind} {name}"))?;
            assert_eq!(o["metadata"]["namespace"], "statecraft-system");
            assert_eq!(o["metadata"]["labels"]["release"], "kube-prometheus-stack", "{kind} selected by Prometheus");
            assert_eq!(o["metadata"]["labels"]["app.kubernetes.io/name"], name.as_str(), "its own labels stay");
        }
        let rules = serde_json::to_string(named("PrometheusRule", &name).ok_or("rules")?)?;
        let links = rules.matches("\"runbook_url\":\"").count();
        let moved = rules.matches(&format!("\"runbook_url\":\"https://docs.example.com/runbooks/{op}/")).count();
        assert!(links > 0 && links == moved, "{moved} of {links} runbook links under the base URL");
        let dashboard = named("ConfigMap", &format!("{name}-dashboard")).ok_or("no dashboard ConfigMap")?;
        assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
        let json = dashboard["data"][format!("{name}.json")].as_str().ok_or("no dashboard JSON")?;
        let parsed: Value = serde_json::from_str(json)?;
        assert!(parsed["panels"].is_array(), "the dashboard JSON survives templating");
        assert!(!json.contains("statecraft.invalid"), "the dashboard's links follow the base URL");
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
    let _alone = CLUSTER_SCOPED.lock().await;
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
    // A namespace's editor may create clusters there, and its viewer may not, through the
    // aggregated user roles (the aggregation controller fills the built-in roles in).
    for (user, role) in [("editor", "edit"), ("viewer", "view")] {
        cluster.kubectl(&["create", "serviceaccount", user, "-n", "statecraft-system"])?;
        let subject = format!("--serviceaccount=statecraft-system:{user}");
        cluster.kubectl(&[
            "create",
            "rolebinding",
            user,
            "-n",
            "statecraft-system",
            &format!("--clusterrole={role}"),
            &subject,
        ])?;
    }
    let can = |user: &str, verb: &str, ns: &str| {
        let who = format!("--as=system:serviceaccount:statecraft-system:{user}");
        // `auth can-i` answers "no" with exit status 1.
        cluster
            .kubectl(&["auth", "can-i", verb, "etcdclusters.etcd.statecraft.io", "-n", ns, &who])
            .is_ok_and(|a| a.trim() == "yes")
    };
    wait_until(Duration::from_secs(60), "the editor may create EtcdClusters", || async {
        (can("editor", "create", "statecraft-system") && can("viewer", "list", "statecraft-system")).then_some(())
    })
    .await?;
    assert!(!can("viewer", "create", "statecraft-system"), "a viewer only reads");
    assert!(!can("editor", "create", "default"), "only where the built-in role is bound");
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
    // The users' ClusterRoles go too, as an uninstall would remove them; the CRDs stay,
    // other tests' clusters use them.
    cluster.kubectl(&["delete", "clusterrole", "-l", "app.kubernetes.io/part-of=statecraft"])?;
    ready?;
    Ok(())
}

/// One etcd operator, installed with Helm in its own namespace with `watchNamespaces` naming
/// two others, manages a cluster of the same name in each: both turn Ready, its Lease stays
/// in its own namespace, it has no rights over clusters there (not watched), and its
/// metrics tell the two clusters apart by namespace.
#[tokio::test]
#[ignore = "needs a cluster: make e2e"]
async fn one_operator_watches_two_namespaces() -> TestResult {
    let _alone = CLUSTER_SCOPED.lock().await;
    let cluster = Cluster::connect().await?;
    let home = "statecraft-watcher";
    let watched = ["statecraft-team-a", "statecraft-team-b"];
    let helm = |args: &[&str]| helm_on(&cluster, args);
    // What an earlier run left: the clusters first, while their operator is there.
    for ns in watched {
        let _ = cluster.kubectl(&["delete", "etcdclusters", "--all", "-n", ns, "--timeout=120s"]);
    }
    let _ = helm(&["uninstall", "statecraft", "-n", home, "--wait"]);
    for ns in [home, watched[0], watched[1]] {
        cluster.kubectl(&["delete", "namespace", ns, "--ignore-not-found", "--timeout=180s"])?;
    }
    // The CRDs may be on the cluster already, from other tests: applied, not Helm's.
    let crds = root().join("crds/etcd.yaml");
    cluster.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &crds.to_string_lossy()])?;
    for ns in watched {
        cluster.kubectl(&["create", "namespace", ns])?;
    }
    let chart = chart();
    let values = format!(
        "mysql.enabled=false,kafka.enabled=false,crds.install=false,rbac.userRoles=false,replicas=1,\
         watchNamespaces={{{}}}",
        watched.join(",")
    );
    helm(&["install", "statecraft", &chart, "-n", home, "--create-namespace", "--set", &values, "--wait"])?;

    for ns in watched {
        let etcd = ETCD.replace("\"first\"", "\"kv\"").replace("statecraft-system", ns);
        cluster.kubectl_with_input(&["apply", "-f", "-"], Some(&etcd))?;
    }
    let ready = wait_until(Duration::from_secs(240), "EtcdCluster kv Ready in both namespaces", || async {
        for ns in watched {
            let status = cluster
                .kubectl(&[
                    "get",
                    "etcdcluster",
                    "kv",
                    "-n",
                    ns,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ])
                .ok()?;
            if status != "True" {
                return None;
            }
        }
        Some(())
    })
    .await;
    let checked = async {
        ready?;
        let holder = cluster.kubectl(&["get", "lease", "statecraft-etcd", "-n", home, "-o", "name"])?;
        assert_eq!(
            holder.trim(),
            "lease.coordination.k8s.io/statecraft-etcd",
            "the Lease is in the operator's namespace"
        );
        let operator = format!("--as=system:serviceaccount:{home}:statecraft-etcd");
        let can = |ns: &str| {
            cluster
                .kubectl(&["auth", "can-i", "list", "etcdclusters.etcd.statecraft.io", "-n", ns, &operator])
                .is_ok_and(|a| a.trim() == "yes")
        };
        assert!(can(watched[0]) && can(watched[1]), "its Role in each watched namespace");
        assert!(!can(home), "no rights over clusters where it only runs");
        let scraped = statecraft_e2e::operator::metrics(&cluster, home, "statecraft-etcd").await?;
        let text: String = scraped.into_iter().map(|(_, text)| text).collect();
        for ns in watched {
            let namespace = format!("namespace=\"{ns}\"");
            let healthy = text.lines().any(|l| {
                l.starts_with("statecraft_etcd_cluster_phase{")
                    && l.contains("cluster=\"kv\"")
                    && l.contains(&namespace)
                    && l.contains("phase=\"Healthy\"")
                    && l.ends_with(" 1")
            });
            assert!(healthy, "the phase of kv in {ns}, labelled with its namespace:\n{text}");
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    }
    .await;
    for ns in watched {
        cluster.kubectl(&["delete", "etcdcluster", "kv", "-n", ns, "--timeout=120s"])?;
    }
    helm(&["uninstall", "statecraft", "-n", home, "--wait"])?;
    for ns in [home, watched[0], watched[1]] {
        cluster.kubectl(&["delete", "namespace", ns, "--timeout=180s"])?;
    }
    checked
}

/// The lines of the README's quick start: the `sh` block between its markers.
fn quick_start() -> Result<String, Box<dyn std::error::Error>> {
    let readme = std::fs::read_to_string(root().join("README.md"))?;
    let (_, rest) = readme.split_once("<!-- quick-start -->").ok_or("README.md has no quick-start marker")?;
    let (block, _) = rest.split_once("<!-- /quick-start -->").ok_or("README.md has no end of the quick start")?;
    let script = block.trim().strip_prefix("```sh").and_then(|b| b.strip_suffix("```"));
    Ok(script.ok_or("the quick start is not one sh block")?.to_string())
}

/// The README's quick start, run as written with bash on the local cluster (Helm installs
/// the MySQL operator; a 3-server cluster, the client, a backup to an S3 server of this
/// test, a restore into a new cluster read back with the client), then `helm upgrade` to
/// other values (the Deployment follows and the upgraded operator still reconciles: a
/// deleted Service comes back) and `helm uninstall` (the operator goes, the CRDs and the
/// clusters stay). The CRDs (and users' ClusterRoles) already on the cluster are adopted by
/// the release first, with Helm's own ownership marks, as when a user moves from the
/// one-file install to Helm.
#[tokio::test]
#[ignore = "needs a cluster: make e2e"]
async fn the_readme_quick_start_then_helm_upgrade_and_uninstall() -> TestResult {
    let _alone = CLUSTER_SCOPED.lock().await;
    let cluster = Cluster::connect().await?;
    let ns = "statecraft-quickstart";
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let helm = |args: &[&str]| helm_on(&cluster, args);
    // What an earlier run left (it stops where it failed, for a look): the clusters first,
    // while their operator can still release their finalizers.
    let _ =
        cluster.kubectl(&["delete", "mysqlrestores,mysqlbackups,mysqlclusters", "--all", "-n", ns, "--timeout=300s"]);
    let _ = helm(&["uninstall", "statecraft", "-n", ns, "--wait"]);
    cluster.kubectl(&["delete", "namespace", ns, "--ignore-not-found", "--timeout=300s"])?;
    let file = root().join("crds/mysql.yaml");
    cluster.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &file.to_string_lossy()])?;
    let mut adopted: Vec<String> = Vec::new();
    for crd in objects(&std::fs::read_to_string(&file)?)? {
        adopted.push(format!("crd/{}", crd["metadata"]["name"].as_str().ok_or("a CRD without a name")?));
    }
    let roles =
        cluster.kubectl(&["get", "clusterrole", "-l", "app.kubernetes.io/name=statecraft-mysql", "-o", "name"])?;
    adopted.extend(roles.lines().map(str::to_string));
    let release_namespace = format!("meta.helm.sh/release-namespace={ns}");
    for object in &adopted {
        cluster.kubectl(&["label", "--overwrite", object, "app.kubernetes.io/managed-by=Helm"])?;
        cluster.kubectl(&[
            "annotate",
            "--overwrite",
            object,
            "meta.helm.sh/release-name=statecraft",
            &release_namespace,
        ])?;
    }

    let s3 = S3Server::start_on(&cluster.host_address()).await?;
    s3.create_bucket("quick-start")?;
    let bin = statecraft_shared::testing::bin_dir();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &quick_start()?])
        .current_dir(root())
        .env("PATH", path)
        .env("KUBECONFIG", &kubeconfig)
        .env("NS", ns)
        .env("S3_ENDPOINT", s3.endpoint())
        .env("S3_BUCKET", "quick-start")
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "quick start: {:.0} s\n{stdout}{}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the quick start failed ({}); S3 errors: {:?}", out.status, s3.errors());
    assert!(
        stdout.contains("tea") && stdout.contains("cake"),
        "the restored copy has the rows written before the backup"
    );

    let chart = chart();
    let upgrade = [
        "upgrade",
        "statecraft",
        &chart,
        "-n",
        ns,
        "--reuse-values",
        "--set",
        "replicas=1,leaderElection.enabled=false",
        "--wait",
        "--timeout",
        "5m",
    ];
    helm(&upgrade)?;
    let replicas =
        cluster.kubectl(&["get", "deployment", "statecraft-mysql", "-n", ns, "-o", "jsonpath={.spec.replicas}"])?;
    assert_eq!(replicas, "1", "the upgrade's values reached the Deployment");
    cluster.kubectl(&["rollout", "status", "-n", ns, "deployment/statecraft-mysql", "--timeout=180s"])?;
    cluster.kubectl(&["delete", "service", "shop-replicas", "-n", ns])?;
    wait_until(Duration::from_secs(120), "the upgraded operator puts Service shop-replicas back", || async {
        cluster.kubectl(&["get", "service", "shop-replicas", "-n", ns, "-o", "name"]).ok()
    })
    .await?;

    helm(&["uninstall", "statecraft", "-n", ns, "--wait"])?;
    let left = cluster.kubectl(&[
        "get",
        "deployments,roles,serviceaccounts",
        "-n",
        ns,
        "-l",
        "app.kubernetes.io/part-of=statecraft",
        "-o",
        "name",
    ])?;
    assert!(left.is_empty(), "helm uninstall removes the operator: {left}");
    assert!(
        !cluster.kubectl(&["get", "crd", "mysqlclusters.mysql.statecraft.io", "-o", "name"])?.is_empty(),
        "the CRDs stay"
    );
    let clusters = cluster.kubectl(&["get", "mysqlclusters", "-n", ns, "-o", "name"])?;
    assert_eq!(clusters.lines().count(), 2, "the clusters stay: {clusters}");
    // Without their operator nothing would release the clusters' finalizers: remove them
    // with it back, then the namespace.
    helm(&["install", "statecraft", &chart, "-n", ns, "--set", "etcd.enabled=false,kafka.enabled=false", "--wait"])?;
    cluster.kubectl(&["delete", "mysqlrestores,mysqlbackups,mysqlclusters", "--all", "-n", ns, "--timeout=300s"])?;
    helm(&["uninstall", "statecraft", "-n", ns, "--wait"])?;
    cluster.kubectl(&["delete", "namespace", ns, "--timeout=300s"])?;
    Ok(())
}
