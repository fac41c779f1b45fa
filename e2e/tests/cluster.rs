//! Cluster checks: the local cluster (or kind) does what the operators rely on. Each test
//! uses its own namespace. Run with `make e2e` or, on a running cluster,
//! `cargo test -p statecraft-e2e --test cluster -- --ignored`.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, Service};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use statecraft_e2e::images::image;
use statecraft_e2e::{Cluster, TestNamespace, wait_until};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const TIMEOUT: Duration = Duration::from_secs(120);

fn tools() -> Result<&'static str, String> {
    image("TOOLS_IMAGE").ok_or_else(|| "TOOLS_IMAGE missing from images.env".to_string())
}

/// A pod spec of the tools image running `script` with `sh -c`.
fn tools_pod(name: &str, labels: serde_json::Value, script: &str) -> Result<serde_json::Value, String> {
    Ok(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": tools()?, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", script]}]
        }
    }))
}

async fn create<K>(api: &Api<K>, value: serde_json::Value) -> Result<K, Box<dyn std::error::Error>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value)?;
    Ok(api.create(&PostParams::default(), &obj).await?)
}

async fn pod_phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.ok()??.status?.phase
}

async fn pod_ready(pods: &Api<Pod>, name: &str) -> Option<Pod> {
    let pod = pods.get_opt(name).await.ok()??;
    let ready = pod.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Ready" && c.status == "True");
    ready.then_some(pod)
}

/// `kubectl exec` in `pod` of `ns`, returning standard output.
fn exec(cluster: &Cluster, ns: &str, pod: &str, script: &str) -> Result<String, statecraft_e2e::E2eError> {
    cluster.kubectl(&["exec", "-n", ns, pod, "--", "sh", "-c", script])
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_node_is_ready() -> TestResult {
    let cluster = Cluster::connect().await?;
    let nodes = Api::<Node>::all(cluster.client.clone()).list(&Default::default()).await?;
    assert!(!nodes.items.is_empty(), "the cluster has a node");
    for node in nodes {
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        assert!(ready, "node {} is Ready", node.name_any());
    }
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_statefulset_pods_resolve_each_other_by_dns() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "dns").await?;
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), &ns.name);
    create(&services, json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "peers"},
        "spec": {"clusterIP": "None", "selector": {"app": "peers"}, "ports": [{"port": 80}], "publishNotReadyAddresses": true}
    }))
    .await?;
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), &ns.name);
    create(&sets, json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "peer"},
        "spec": {
            "serviceName": "peers", "replicas": 2, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "peers"}},
            "template": {"metadata": {"labels": {"app": "peers"}}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": tools()?, "imagePullPolicy": "IfNotPresent", "command": ["sleep", "infinity"]}]
            }}
        }
    }))
    .await?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    let peer1 = wait_until(TIMEOUT, "peer-1 ready", || pod_ready(&pods, "peer-1")).await?;
    wait_until(TIMEOUT, "peer-0 ready", || pod_ready(&pods, "peer-0")).await?;
    let peer1_ip = peer1.status.and_then(|s| s.pod_ip).ok_or("peer-1 has no IP")?;
    let fqdn = format!("peer-1.peers.{}.svc.cluster.local", ns.name);
    let answer = wait_until(Duration::from_secs(30), "DNS answer for peer-1", || {
        let out = exec(&cluster, &ns.name, "peer-0", &format!("getent hosts {fqdn}")).ok();
        async move { out.filter(|o| !o.trim().is_empty()) }
    })
    .await?;
    assert!(answer.starts_with(&peer1_ip), "{fqdn} resolves to peer-1's IP {peer1_ip}: {answer}");
    ns.pass();
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_clusterip_service_routes_only_to_ready_endpoints() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "svc").await?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    // Two servers behind one Service; only `ready` passes its readiness probe.
    for (name, probe) in [("ready", "true"), ("unready", "false")] {
        let mut pod =
            tools_pod(name, json!({"app": "echo"}), &format!("while true; do echo {name} | nc -l -q 0 -p 8080; done"))?;
        pod["spec"]["containers"][0]["readinessProbe"] =
            json!({"exec": {"command": ["sh", "-c", probe]}, "periodSeconds": 1});
        create(&pods, pod).await?;
    }
    create(&pods, tools_pod("client", json!({"app": "client"}), "sleep infinity")?).await?;
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), &ns.name);
    let svc = create(
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
            "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]}
        }),
    )
    .await?;
    let ip = svc.spec.and_then(|s| s.cluster_ip).ok_or("service has no ClusterIP")?;
    wait_until(TIMEOUT, "server ready", || pod_ready(&pods, "ready")).await?;
    wait_until(TIMEOUT, "client ready", || pod_ready(&pods, "client")).await?;
    // By ClusterIP and by name, ten times: every answer comes from the ready server.
    let answers = wait_until(Duration::from_secs(30), "answers through the Service", || {
        // The server answers one connection at a time, so each request retries until answered.
        let script = format!(
            "ask() {{ for t in 1 2 3 4 5 6 7 8 9 10; do a=$(nc -w 2 $1 80 </dev/null); [ -n \"$a\" ] && {{ echo $a; return; }}; sleep 0.2; done; }}; \
             for i in 1 2 3 4 5; do ask {ip}; ask echo; done"
        );
        let out = exec(&cluster, &ns.name, "client", &script).ok();
        async move { out.filter(|o| o.lines().count() == 10) }
    })
    .await?;
    assert!(answers.lines().all(|l| l == "ready"), "only the ready endpoint answers: {answers:?}");
    ns.pass();
    Ok(())
}

/// NetworkPolicies are enforced: once a policy selects the server, a pod it allows still
/// connects, directly and through the Service, and a pod it does not allow is refused, on
/// the same port; a pod in another namespace is refused unless the policy names its
/// namespace.
#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_network_policy_allows_only_the_pods_it_names() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "netpol").await?;
    let other = TestNamespace::create(&cluster, "netpol-other").await?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    let server = tools_pod("server", json!({"app": "server"}), "while true; do echo hi | nc -l -q 0 -p 8080; done")?;
    create(&pods, server).await?;
    for (name, role) in [("allowed", "client"), ("refused", "stranger")] {
        create(&pods, tools_pod(name, json!({"role": role}), "sleep infinity")?).await?;
    }
    let outsider: Api<Pod> = Api::namespaced(cluster.client.clone(), &other.name);
    create(&outsider, tools_pod("outsider", json!({"role": "client"}), "sleep infinity")?).await?;
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), &ns.name);
    create(
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "server"},
            "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]}
        }),
    )
    .await?;
    let ip = wait_until(TIMEOUT, "server ready", || pod_ready(&pods, "server"))
        .await?
        .status
        .and_then(|s| s.pod_ip)
        .ok_or("the server has no address")?;
    for name in ["allowed", "refused"] {
        wait_until(TIMEOUT, &format!("{name} ready"), || pod_ready(&pods, name)).await?;
    }
    wait_until(TIMEOUT, "outsider ready", || pod_ready(&outsider, "outsider")).await?;
    // `hi` when the server answers within 2 s (it serves one connection at a time: retried).
    let reaches = |ns: &str, pod: &str, target: &str, port: u16| {
        let script = format!(
            "for t in 1 2 3; do a=$(nc -w 2 {target} {port} </dev/null); [ -n \"$a\" ] && {{ echo $a; exit 0; }}; sleep 0.3; done; exit 1"
        );
        exec(&cluster, ns, pod, &script).is_ok_and(|o| o.trim() == "hi")
    };
    let service = format!("server.{}.svc", ns.name);
    for (ns_name, pod) in [(&ns.name, "allowed"), (&ns.name, "refused"), (&other.name, "outsider")] {
        assert!(reaches(ns_name, pod, &ip, 8080), "{pod}: no policy yet, every pod reaches the server");
    }

    let policy = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "server"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}], "ports": [{"port": 8080}]}]
        }
    });
    cluster.kubectl_with_input(&["apply", "-n", &ns.name, "-f", "-"], Some(&policy.to_string()))?;
    wait_until(Duration::from_secs(30), "the stranger refused", || async {
        (!reaches(&ns.name, "refused", &ip, 8080)).then_some(())
    })
    .await?;
    assert!(reaches(&ns.name, "allowed", &ip, 8080), "the client the policy names still connects");
    assert!(reaches(&ns.name, "allowed", &service, 80), "and through the Service");
    assert!(!reaches(&ns.name, "refused", &service, 80), "the stranger is refused through the Service too");
    assert!(!reaches(&other.name, "outsider", &ip, 8080), "a matching pod of another namespace is refused");

    // Naming the other namespace lets its client in.
    let mut wider = policy.clone();
    wider["spec"]["ingress"][0]["from"] = json!([
        {"podSelector": {"matchLabels": {"role": "client"}}},
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": other.name}},
            "podSelector": {"matchLabels": {"role": "client"}}
        }
    ]);
    cluster.kubectl_with_input(&["apply", "-n", &ns.name, "-f", "-"], Some(&wider.to_string()))?;
    wait_until(Duration::from_secs(30), "the outsider let in", || async {
        reaches(&other.name, "outsider", &ip, 8080).then_some(())
    })
    .await?;
    assert!(!reaches(&ns.name, "refused", &ip, 8080), "the stranger is still refused");
    other.pass();
    ns.pass();
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_pvc_binds_and_its_data_survives_deleting_the_pod() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "pvc").await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), &ns.name);
    create(
        &claims,
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }),
    )
    .await?;
    wait_until(TIMEOUT, "the PVC to bind through the default StorageClass", || async {
        let phase = claims.get_opt("data").await.ok()??.status?.phase?;
        (phase == "Bound").then_some(())
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    let with_volume = |name: &str, script: &str| -> Result<serde_json::Value, String> {
        let mut pod = tools_pod(name, json!({}), script)?;
        pod["spec"]["restartPolicy"] = json!("Never");
        pod["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
        pod["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
        Ok(pod)
    };
    create(&pods, with_volume("writer", "echo survived > /data/marker")?).await?;
    wait_until(TIMEOUT, "writer to finish", || async {
        (pod_phase(&pods, "writer").await? == "Succeeded").then_some(())
    })
    .await?;
    pods.delete("writer", &DeleteParams::default()).await?;
    wait_until(TIMEOUT, "writer to be gone", || async { pods.get_opt("writer").await.ok()?.is_none().then_some(()) })
        .await?;
    create(&pods, with_volume("reader", "cat /data/marker")?).await?;
    wait_until(TIMEOUT, "reader to finish", || async {
        (pod_phase(&pods, "reader").await? == "Succeeded").then_some(())
    })
    .await?;
    let logs = pods.logs("reader", &Default::default()).await?;
    assert_eq!(logs.trim(), "survived");
    ns.pass();
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_deleted_statefulset_pod_comes_back_with_the_same_volume() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "sts").await?;
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), &ns.name);
    create(&sets, json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "replicas": 1,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": tools()?, "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", "[ -f /data/first-uid ] || cat /etc/hostname > /data/first-uid; sleep infinity"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
            }},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }))
    .await?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    let first = wait_until(TIMEOUT, "db-0 ready", || pod_ready(&pods, "db-0")).await?;
    exec(&cluster, &ns.name, "db-0", "echo written-before-delete > /data/marker")?;
    pods.delete("db-0", &DeleteParams::default()).await?;
    let second = wait_until(TIMEOUT, "db-0 to come back", || async {
        let pod = pod_ready(&pods, "db-0").await?;
        (pod.uid() != first.uid()).then_some(pod)
    })
    .await?;
    let claim = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .and_then(|v| v.iter().find_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone())))
    };
    assert_eq!(claim(&second), Some("data-db-0".to_string()));
    assert_eq!(claim(&first), claim(&second));
    assert_eq!(exec(&cluster, &ns.name, "db-0", "cat /data/marker")?.trim(), "written-before-delete");
    ns.pass();
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_service_account_without_rights_gets_403() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "rbac").await?;
    cluster.kubectl(&["create", "serviceaccount", "nobody", "-n", &ns.name])?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    let script = "curl -s -o /dev/null -w '%{http_code}' --cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt \
        -H \"Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)\" \
        https://kubernetes.default.svc/api/v1/namespaces/$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)/pods";
    let mut pod = tools_pod("probe", json!({}), script)?;
    pod["spec"]["serviceAccountName"] = json!("nobody");
    pod["spec"]["restartPolicy"] = json!("Never");
    create(&pods, pod).await?;
    wait_until(TIMEOUT, "probe to finish", || async {
        let phase = pod_phase(&pods, "probe").await?;
        (phase == "Succeeded" || phase == "Failed").then_some(())
    })
    .await?;
    let code = pods.logs("probe", &Default::default()).await?;
    assert_eq!(code.trim(), "403", "an authenticated service account without a Role is forbidden");
    ns.pass();
    Ok(())
}

/// How the every-image check runs each image: a command (or none: the image's own
/// entrypoint, which must keep running) and what its output must contain.
fn image_check(key: &str) -> Option<(Option<Vec<&'static str>>, &'static str)> {
    let sh = |script: &'static str| Some(vec!["sh", "-c", script]);
    Some(match key {
        "PAUSE_IMAGE" => (None, ""),
        "MARIADB_IMAGE" => (Some(vec!["mariadbd", "--version"]), "10.11"),
        "MYSQLD_EXPORTER_IMAGE" => (Some(vec!["/bin/mysqld_exporter", "--version"]), "mysqld_exporter, version 0.16.0"),
        "ETCD_IMAGE" => (Some(vec!["/usr/local/bin/etcd", "--version"]), "etcd Version: 3.6"),
        "KAFKA_IMAGE" => (Some(vec!["/opt/kafka/bin/kafka-storage", "random-uuid"]), ""),
        // The release the upgrade e2e starts from: its own metadata.version, and kafka-configs
        // on the tool's 4.3 main class.
        "KAFKA_PREVIOUS_IMAGE" => (
            sh("/opt/kafka/bin/kafka-storage version-mapping && /opt/kafka/bin/kafka-configs --version"),
            "metadata.version=30 (4.3-IV0)",
        ),
        "COREDNS_IMAGE" => (Some(vec!["/coredns", "-version"]), "CoreDNS-"),
        "TOOLS_IMAGE" => {
            (sh("mariadb --version && etcdctl version && dig -v 2>&1 && curl --version"), "etcdctl version")
        }
        k if k.starts_with("STATECRAFT_") => (None, "Usage:"),
        _ => return None,
    })
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_a_pod_of_every_image_runs() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "images").await?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &ns.name);
    let images = statecraft_e2e::images::all();
    let mut checks = Vec::new();
    for (i, (key, image)) in images.iter().enumerate() {
        let (command, expect) = image_check(key).ok_or_else(|| format!("no check for {key} in images.env: add one"))?;
        let name = format!("image-{i}");
        let mut container = json!({"name": "main", "image": image, "imagePullPolicy": "IfNotPresent"});
        if let Some(command) = &command {
            container["command"] = json!(command);
        } else if key.starts_with("STATECRAFT_") {
            container["args"] = json!(["--help"]);
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]}});
        create(&pods, pod).await?;
        checks.push((name, *key, *image, command.is_none() && !key.starts_with("STATECRAFT_"), expect));
    }
    for (name, key, image, long_running, expect) in checks {
        let wanted = if long_running { "Running" } else { "Succeeded" };
        wait_until(TIMEOUT, &format!("{key} pod {wanted}"), || async {
            (pod_phase(&pods, &name).await? == wanted).then_some(())
        })
        .await?;
        let logs = pods.logs(&name, &Default::default()).await?;
        assert!(logs.contains(expect), "{key}: expected {expect:?} in {logs:?}");
        if key == "KAFKA_PREVIOUS_IMAGE" {
            let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
            assert!(logs.lines().any(|l| l.trim() == tag), "kafka-configs --version prints {tag}: {logs:?}");
        }
        if key == "KAFKA_IMAGE" {
            assert_eq!(logs.trim().len(), 22, "kafka-storage random-uuid prints a 22-character id: {logs:?}");
        }
    }
    ns.pass();
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_operator_image_runs_in_cluster_with_only_its_namespaced_role() -> TestResult {
    use statecraft_shared::runner::{Operator, crd_yaml, manifests_yaml};
    use statecraft_shared::testing::echo::EchoOperator;

    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "operator").await?;
    // The CRD is cluster-scoped: installed once, shared by every run.
    cluster.kubectl_with_input(&["apply", "-f", "-"], Some(&crd_yaml(&EchoOperator::crds())?))?;
    cluster.kubectl(&["wait", "--for=condition=Established", "crd/echoes.test.statecraft.io", "--timeout=30s"])?;
    let image = image("STATECRAFT_ECHO_IMAGE").ok_or("STATECRAFT_ECHO_IMAGE missing from images.env")?;
    // The same manifests users install: ServiceAccount, namespaced Role and RoleBinding,
    // and a two-replica Deployment with leader election, running as non-root.
    cluster.kubectl_with_input(
        &["apply", "-n", &ns.name, "-f", "-"],
        Some(&manifests_yaml::<EchoOperator>(&ns.name, std::slice::from_ref(&ns.name), Some(image))?),
    )?;
    cluster.kubectl(&["rollout", "status", "-n", &ns.name, "deployment/statecraft-echo", "--timeout=120s"])?;

    let echo = json!({"apiVersion": "test.statecraft.io/v1alpha1", "kind": "Echo", "metadata": {"name": "hello"}, "spec": {"message": "in-cluster"}});
    cluster.kubectl_with_input(&["apply", "-n", &ns.name, "-f", "-"], Some(&echo.to_string()))?;
    cluster.kubectl(&["wait", "-n", &ns.name, "--for=condition=Ready", "echo/hello", "--timeout=60s"])?;
    let by = cluster.kubectl(&["get", "-n", &ns.name, "echo/hello", "-o", "jsonpath={.status.reconciledBy}"])?;
    let holder =
        cluster.kubectl(&["get", "-n", &ns.name, "lease/statecraft-echo", "-o", "jsonpath={.spec.holderIdentity}"])?;
    assert!(by.starts_with("statecraft-echo-"), "reconciled by a pod of the Deployment: {by}");
    assert_eq!(by, holder, "the replica holding the Lease is the one that reconciled");
    let message =
        cluster.kubectl(&["get", "-n", &ns.name, "configmap/hello-echo", "-o", "jsonpath={.data.message}"])?;
    assert_eq!(message, "in-cluster");
    ns.pass();
    Ok(())
}

#[tokio::test]
#[ignore = "needs a cluster: make cluster-up"]
async fn cluster_mariadb_statefulset_of_three_serves_queries_from_its_volumes() -> TestResult {
    let cluster = Cluster::connect().await?;
    let ns = TestNamespace::create(&cluster, "mariadb").await?;
    let image = image("MARIADB_IMAGE").ok_or("MARIADB_IMAGE missing from images.env")?;
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), &ns.name);
    create(
        &services,
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
            "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 3306}]}
        }),
    )
    .await?;
    let init = "[ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null; \
                exec mariadbd --datadir=/var/lib/mysql --socket=/var/lib/mysql/mysqld.sock";
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), &ns.name);
    let started = std::time::Instant::now();
    create(&sets, json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "replicas": 3,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                "terminationGracePeriodSeconds": 5,
                "securityContext": {"fsGroup": 999},
                // The controller-manager's host-path provisioner makes each volume a
                // root-owned 0750 directory and ignores fsGroup (kind's local-path
                // provisioner makes it 0777), so a root init container hands it to mysql.
                "initContainers": [{"name": "chown", "image": image, "imagePullPolicy": "IfNotPresent",
                    "command": ["chown", "999:999", "/var/lib/mysql"],
                    "securityContext": {"runAsUser": 0},
                    "volumeMounts": [{"name": "data", "mountPath": "/var/lib/mysql"}]}],
                "containers": [{"name": "mariadb", "image": image, "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", init],
                    "readinessProbe": {"exec": {"command": ["mariadb-admin", "--socket=/var/lib/mysql/mysqld.sock", "ping"]}, "periodSeconds": 1},
                    "volumeMounts": [{"name": "data", "mountPath": "/var/lib/mysql"}]}]
            }},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }
    }))
    .await?;
    wait_until(Duration::from_secs(300), "3 MariaDB replicas ready", || async {
        let sts = sets.get_opt("db").await.ok()??;
        (sts.status?.ready_replicas? == 3).then_some(())
    })
    .await?;
    let seconds = started.elapsed().as_secs_f64();
    // Each server answers over its socket.
    for i in 0..3 {
        let out = exec(
            &cluster,
            &ns.name,
            &format!("db-{i}"),
            "mariadb --socket=/var/lib/mysql/mysqld.sock -N -e 'select version()'",
        )?;
        assert!(out.contains("MariaDB"), "db-{i}: {out}");
    }
    println!("3-replica MariaDB StatefulSet: created -> all Ready in {seconds:.1}s");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("mariadb_statefulset_ready.json"),
        serde_json::to_string_pretty(
            &json!({"replicas": 3, "pod_management": "OrderedReady", "seconds_to_all_ready": seconds}),
        )?,
    )?;
    ns.pass();
    Ok(())
}
