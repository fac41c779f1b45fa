//! The shared library against a real kube-apiserver: server-side apply and orphan
//! clean-up, status conditions, Events, and the controller runner with leader election,
//! driven through `statecraft-echo` (a minimal operator built from the library).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, PersistentVolumeClaimSpec, ServiceAccount, VolumeResourceRequirements,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use statecraft_shared::apply::{Applier, ApplyCache, OrphanPolicy};
use statecraft_shared::events::EventPublisher;
use statecraft_shared::testing::apiserver::ApiServer;
use statecraft_shared::testing::eventually;
use tokio::process::{Child, Command};

const OPERATOR: &str = env!("CARGO_BIN_EXE_statecraft-echo");
const ADMIN: &str = "statecraft-test-admin";
const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

async fn namespace(client: &Client, name: &str) -> TestResult {
    let ns = Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    Ok(())
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some([("k".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

fn data(cm: ConfigMap, key: &str) -> Option<String> {
    cm.data.and_then(|d| d.get(key).cloned())
}

#[tokio::test]
async fn apply_sets_labels_and_owner_then_cleans_up_orphans_but_never_data() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    namespace(&client, "apply").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "apply");
    let owner = cms.create(&PostParams::default(), &config_map("owner", "x")).await?;
    let cache = ApplyCache::default();

    // A PVC that belongs to the owner, as a StatefulSet's volume claim would.
    let mut applier = Applier::new(client.clone(), "statecraft-test", &owner, &cache)?;
    let pvc = PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some("data-0".into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".into(), Quantity("1Gi".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    applier.apply(pvc).await?;
    let a = applier.apply(config_map("child-a", "1")).await?;
    applier.apply(config_map("child-b", "2")).await?;
    assert_eq!(a.labels().get("app.kubernetes.io/managed-by").map(String::as_str), Some("statecraft-test"));
    assert_eq!(a.labels().get("app.kubernetes.io/instance").map(String::as_str), Some("owner"));
    let refs = a.owner_references();
    assert_eq!(refs.len(), 1);
    assert_eq!(Some(refs[0].uid.clone()), owner.uid());
    assert_eq!(refs[0].controller, Some(true));
    let manager = a.metadata.managed_fields.as_ref().and_then(|m| m.first()).and_then(|m| m.manager.clone());
    assert_eq!(manager.as_deref(), Some("statecraft-test"));

    // The next reconcile wants only child-a: child-b goes, the PVC stays.
    let kinds = [ApiResource::erase::<ConfigMap>(&()), ApiResource::erase::<PersistentVolumeClaim>(&())];
    let mut applier = Applier::new(client.clone(), "statecraft-test", &owner, &cache)?;
    applier.apply(config_map("child-a", "1")).await?;
    let events = EventPublisher::new(client.clone(), "statecraft-test", "test-0");
    applier.delete_orphans_with_events(&kinds, OrphanPolicy::KeepData, &events).await?;
    assert!(cms.get_opt("child-b").await?.is_none());
    // ... and says so on the owner, where `kubectl describe` shows it.
    let said: Api<Event> = Api::namespaced(client.clone(), "apply");
    let deleted = eventually(Duration::from_secs(10), "a Deleted Event", || async {
        let list = said.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| e.reason.as_deref() == Some("Deleted"))
    })
    .await?;
    assert_eq!(deleted.note.as_deref(), Some("deleted ConfigMap/child-b: no longer desired"));
    assert_eq!(deleted.regarding.and_then(|r| r.name).as_deref(), Some("owner"));
    assert_eq!(deleted.action.as_deref(), Some("Cleanup"));
    assert!(cms.get_opt("child-a").await?.is_some());
    assert!(cms.get_opt("owner").await?.is_some(), "objects without the owner's labels are never touched");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "apply");
    assert!(pvcs.get_opt("data-0").await?.is_some(), "PVCs survive clean-up unless asked");

    // Only an explicit opt-in deletes data.
    let deleted = applier.delete_orphans(&kinds, OrphanPolicy::DeleteData).await?;
    assert_eq!(deleted, vec!["PersistentVolumeClaim/data-0".to_string()]);
    Ok(())
}

#[tokio::test]
async fn unchanged_apply_sends_no_writes_and_drift_is_corrected() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    namespace(&client, "steady").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "steady");
    let owner = cms.create(&PostParams::default(), &config_map("owner", "x")).await?;
    let cache = ApplyCache::default();
    Applier::new(client.clone(), "statecraft-test", &owner, &cache)?.apply(config_map("child", "1")).await?;

    let writes_before = server.audit_count(ADMIN, WRITE_VERBS)?;
    for _ in 0..5 {
        Applier::new(client.clone(), "statecraft-test", &owner, &cache)?.apply(config_map("child", "1")).await?;
    }
    assert_eq!(server.audit_count(ADMIN, WRITE_VERBS)?, writes_before, "unchanged applies must not write");

    // Someone edits the child: the next apply restores the operator's fields.
    let drift = json!({"data": {"k": "tampered"}});
    cms.patch("child", &PatchParams::default(), &Patch::Merge(&drift)).await?;
    Applier::new(client.clone(), "statecraft-test", &owner, &cache)?.apply(config_map("child", "1")).await?;
    assert_eq!(data(cms.get("child").await?, "k").as_deref(), Some("1"));

    // A changed desired object is applied.
    Applier::new(client.clone(), "statecraft-test", &owner, &cache)?.apply(config_map("child", "2")).await?;
    assert_eq!(data(cms.get("child").await?, "k").as_deref(), Some("2"));
    Ok(())
}

/// Runs the echo operator binary with `args` and returns its standard output.
fn operator_output(args: &[&str]) -> TestResult<String> {
    let out = std::process::Command::new(OPERATOR).args(args).output()?;
    if !out.status.success() {
        return Err(format!("{args:?} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Installs the echo operator's CRD from its `crd` subcommand.
async fn install_crd(client: &Client) -> TestResult {
    let text = operator_output(&["crd"])?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for doc in serde_norway::Deserializer::from_str(&text) {
        let crd: CustomResourceDefinition = serde::Deserialize::deserialize(doc)?;
        let name = crd.name_any();
        crds.create(&PostParams::default(), &crd).await?;
        eventually(Duration::from_secs(30), "the CRD to be established", || async {
            let crd = crds.get_opt(&name).await.ok()??;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await?;
    }
    Ok(())
}

/// Installs the echo operator's rendered ServiceAccount, Roles and RoleBindings for an
/// operator in `ns` watching `watched` (its own namespace when empty), and returns a
/// kubeconfig that authenticates as that service account: the operator then runs with
/// exactly the rights its `rbac` subcommand declares.
async fn install_rbac(server: &ApiServer, client: &Client, ns: &str, watched: &[&str]) -> TestResult<PathBuf> {
    let namespaces = watched.join(",");
    let text = operator_output(&["rbac", "--namespace", ns, "--namespaces", &namespaces])?;
    let docs: Vec<serde_norway::Value> =
        serde_norway::Deserializer::from_str(&text).map(serde::Deserialize::deserialize).collect::<Result<_, _>>()?;
    let roles = watched.len().max(1) + 1;
    assert_eq!(docs.len(), 1 + 2 * roles, "a ServiceAccount, then a Role and its RoleBinding {roles} times");
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_norway::from_value(docs[0].clone())?;
    Api::<ServiceAccount>::namespaced(client.clone(), ns).create(&pp, &sa).await?;
    for pair in docs[1..].chunks(2) {
        let role: Role = serde_norway::from_value(pair[0].clone())?;
        let binding: RoleBinding = serde_norway::from_value(pair[1].clone())?;
        let namespace = role.metadata.namespace.clone().ok_or("a Role without a namespace")?;
        Api::<Role>::namespaced(client.clone(), &namespace).create(&pp, &role).await?;
        Api::<RoleBinding>::namespaced(client.clone(), &namespace).create(&pp, &binding).await?;
    }
    Ok(server.kubeconfig_as(&format!("system:serviceaccount:{ns}:statecraft-echo"), &["system:serviceaccounts"])?)
}

/// What the tests that run the echo operator start from: a real API server, namespace
/// `ns` with the echo CRD and the operator's rendered RBAC, a kubeconfig of the operator's
/// service account, and a directory for the operators' logs.
struct EchoSetup {
    server: ApiServer,
    admin: Client,
    kubeconfig: PathBuf,
    logs: PathBuf,
}

async fn echo_setup(ns: &str) -> TestResult<EchoSetup> {
    let server = ApiServer::start().await?;
    let admin = server.client().await?;
    namespace(&admin, ns).await?;
    install_crd(&admin).await?;
    let kubeconfig = install_rbac(&server, &admin, ns, &[]).await?;
    let logs = log_dir(ns)?;
    Ok(EchoSetup { server, admin, kubeconfig, logs })
}

/// Starts one echo operator replica, configured through environment variables as the
/// Deployment does.
fn start_operator(kubeconfig: &Path, ns: &str, identity: &str, log: &Path) -> TestResult<Child> {
    start_watching(kubeconfig, ns, &[], identity, log)
}

/// [`start_operator`] watching `watched` (`STATECRAFT_NAMESPACES`) rather than `ns`.
fn start_watching(kubeconfig: &Path, ns: &str, watched: &[&str], identity: &str, log: &Path) -> TestResult<Child> {
    let log = std::fs::File::create(log)?;
    Ok(Command::new(OPERATOR)
        .arg("run")
        .env("KUBECONFIG", kubeconfig)
        .env("STATECRAFT_NAMESPACE", ns)
        .env("STATECRAFT_NAMESPACES", watched.join(","))
        .env("POD_NAME", identity)
        .env("STATECRAFT_HEALTH_ADDR", "127.0.0.1:0")
        .env("STATECRAFT_METRICS_ADDR", "127.0.0.1:0")
        .env("STATECRAFT_LEADER_LEASE_DURATION", "4s")
        .env("STATECRAFT_LEADER_RENEW_DEADLINE", "3s")
        .env("STATECRAFT_LEADER_RETRY_PERIOD", "500ms")
        .env("STATECRAFT_LOG_FORMAT", "text")
        .env("STATECRAFT_LOG", "info,kube=warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?)
}

fn echo(name: &str, message: &str) -> TestResult<DynamicObject> {
    let value = json!({
        "apiVersion": "test.statecraft.io/v1alpha1",
        "kind": "Echo",
        "metadata": {"name": name},
        "spec": {"message": message}
    });
    Ok(serde_json::from_value(value)?)
}

fn echo_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "test.statecraft.io".into(),
        version: "v1alpha1".into(),
        api_version: "test.statecraft.io/v1alpha1".into(),
        kind: "Echo".into(),
        plural: "echoes".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The `reconciledBy` of an Echo whose Ready condition is True for its current generation.
async fn ready_by(api: &Api<DynamicObject>, name: &str) -> Option<String> {
    let obj = api.get_opt(name).await.ok()??;
    let generation = obj.metadata.generation?;
    let status = obj.data.get("status")?;
    let ready = status["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True" && c["observedGeneration"].as_i64() == Some(generation));
    ready.then(|| status["reconciledBy"].as_str().unwrap_or_default().to_string())
}

async fn lease_holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt("statecraft-echo").await.ok()??.spec?.holder_identity
}

/// Waits until `identity` holds the echo operator's Lease in `ns`; returns the Leases.
async fn holding(admin: &Client, ns: &str, identity: &str) -> TestResult<Api<Lease>> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), ns);
    eventually(Duration::from_secs(60), &format!("{identity} to hold the lease"), || async {
        (lease_holder(&leases).await? == identity).then_some(())
    })
    .await?;
    Ok(leases)
}

#[tokio::test]
async fn one_leader_reconciles_and_a_standby_takes_over_when_it_dies() -> TestResult {
    let ns = "leader";
    let EchoSetup { server, admin, kubeconfig, logs } = echo_setup(ns).await?;

    let mut first = start_operator(&kubeconfig, ns, "op-a", &logs.join("a.log"))?;
    // Let op-a take the lease before op-b starts, so the roles are known.
    let leases = holding(&admin, ns, "op-a").await?;
    let _second = start_operator(&kubeconfig, ns, "op-b", &logs.join("b.log"))?;

    let echoes = echo_api(&admin, ns);
    for i in 0..3 {
        echoes.create(&PostParams::default(), &echo(&format!("e{i}"), "hello")?).await?;
    }
    for i in 0..3 {
        let name = format!("e{i}");
        let by = eventually(Duration::from_secs(30), "echo to be Ready", || ready_by(&echoes, &name)).await?;
        assert_eq!(by, "op-a", "only the leader reconciles");
    }
    // The ConfigMap was made through the shared applier, with the service account's rights only.
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    assert_eq!(data(cms.get("e0-echo").await?, "message").as_deref(), Some("hello"));
    // `kubectl wait --for=condition=Ready` understands the conditions.
    let kubectl = statecraft_shared::testing::binary("kubectl")?;
    let wait = Command::new(kubectl)
        .args(["wait", "--for=condition=Ready", "echoes.test.statecraft.io/e0", "-n", ns, "--timeout=20s"])
        .env("KUBECONFIG", server.kubeconfig())
        .output()
        .await?;
    assert!(wait.status.success(), "kubectl wait: {}", String::from_utf8_lossy(&wait.stderr));
    // Every operation emits an Event.
    let events: Api<Event> = Api::namespaced(admin.clone(), ns);
    let applied = events.list(&Default::default()).await?.items.into_iter().filter(|e| {
        e.reason.as_deref() == Some("Applied") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("e0")
    });
    assert_eq!(applied.count(), 1);

    // Kill the leader without letting it release the lease.
    first.start_kill()?;
    first.wait().await?;
    let killed = Instant::now();
    // The dead leader's last renewal: nobody else writes the Lease until the standby does.
    let last_renewal = leases.get("statecraft-echo").await?.spec.and_then(|s| s.renew_time).ok_or("no renewTime")?;
    let patch = json!({"spec": {"message": "after failover"}});
    echoes.patch("e1", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let by = eventually(Duration::from_secs(30), "the standby to reconcile", || ready_by(&echoes, "e1")).await?;
    let takeover = killed.elapsed();
    assert_eq!(by, "op-b");
    let taken = leases.get("statecraft-echo").await?.spec.ok_or("no spec")?;
    assert_eq!(taken.holder_identity.as_deref(), Some("op-b"));
    // Safety: the standby took the Lease no sooner than its duration after the dead
    // leader's last renewal (the leader itself stops acting 3 s after a renewal began).
    // Same machine, same clock: the two timestamps compare.
    let acquired = taken.acquire_time.ok_or("no acquireTime")?;
    let held_after = acquired.0.duration_since(last_renewal.0);
    assert!(
        held_after >= k8s_openapi::jiff::SignedDuration::from_secs(4),
        "taken over {held_after:?} after the last renewal"
    );
    // Lease duration (4 s) plus one retry period (0.5 s), plus the reconcile itself.
    assert!(takeover < Duration::from_secs(6), "takeover took {takeover:?}");
    println!(
        "leader failover: killed leader -> standby reconciled in {:.2}s; lease taken {:.3}s after the last renewal",
        takeover.as_secs_f64(),
        held_after.as_secs_f64()
    );
    write_result(
        "leader_failover",
        json!({
            "seconds_from_kill_to_first_reconcile": takeover.as_secs_f64(),
            "seconds_from_last_renewal_to_takeover": held_after.as_secs_f64(),
            "lease_duration_s": 4, "retry_period_s": 0.5, "standby": "watches the Lease",
        }),
    )?;
    assert_eq!(data(cms.get("e1-echo").await?, "message").as_deref(), Some("after failover"));
    Ok(())
}

/// An operator running in `home` with `--namespaces shop,billing`, holding only the Roles
/// `rbac --namespaces` renders, serves both (an Echo of the same name in each turns Ready
/// with its own message), holds its Lease at home, and leaves home's Echo alone: home is
/// not watched and the operator has no rights over Echoes there.
#[tokio::test]
async fn one_operator_serves_every_watched_namespace_and_elects_at_home() -> TestResult {
    let (home, watched) = ("home", ["shop", "billing"]);
    let server = ApiServer::start().await?;
    let admin = server.client().await?;
    for ns in [home, watched[0], watched[1]] {
        namespace(&admin, ns).await?;
    }
    install_crd(&admin).await?;
    let kubeconfig = install_rbac(&server, &admin, home, &watched).await?;
    let logs = log_dir("watching")?;
    let _operator = start_watching(&kubeconfig, home, &watched, "op-a", &logs.join("a.log"))?;
    holding(&admin, home, "op-a").await?;

    let pp = PostParams::default();
    echo_api(&admin, home).create(&pp, &echo("same", "unwatched")?).await?;
    for ns in watched {
        echo_api(&admin, ns).create(&pp, &echo("same", &format!("hello from {ns}"))?).await?;
    }
    for ns in watched {
        let echoes = echo_api(&admin, ns);
        let by = eventually(Duration::from_secs(30), &format!("Echo same in {ns} Ready"), || ready_by(&echoes, "same"))
            .await?;
        assert_eq!(by, "op-a");
        let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
        assert_eq!(data(cms.get("same-echo").await?, "message"), Some(format!("hello from {ns}")));
    }
    let unwatched = echo_api(&admin, home).get("same").await?;
    assert!(unwatched.data.get("status").is_none(), "home is not watched: {:?}", unwatched.data);
    for ns in watched {
        let leases: Api<Lease> = Api::namespaced(admin.clone(), ns);
        assert!(lease_holder(&leases).await.is_none(), "no Lease in watched namespace {ns}");
    }
    Ok(())
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_steady_state_writes_nothing() -> TestResult {
    let ns = "graceful";
    let EchoSetup { server, admin, kubeconfig, logs } = echo_setup(ns).await?;
    let mut op = start_operator(&kubeconfig, ns, "op-a", &logs.join("a.log"))?;
    let echoes = echo_api(&admin, ns);
    echoes.create(&PostParams::default(), &echo("e", "hi")?).await?;
    eventually(Duration::from_secs(60), "echo to be Ready", || ready_by(&echoes, "e")).await?;
    let pid = op.id().ok_or("operator has no pid")?;
    let rss_kib = std::fs::read_to_string(format!("/proc/{pid}/status"))?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()))
        .ok_or("no VmRSS")?;
    println!("operator RSS after start and one reconcile: {} KiB", rss_kib);
    write_result(
        "operator_idle_rss",
        json!({"rss_kib_after_start_and_first_reconcile": rss_kib, "binary": "statecraft-echo (debug build)"}),
    )?;

    // Steady state: apart from lease renewals, the operator writes nothing.
    let user = format!("system:serviceaccount:{ns}:statecraft-echo");
    let writes = |server: &ApiServer| -> TestResult<usize> {
        let text = std::fs::read_to_string(server.audit_log())?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["user"]["username"] == user.as_str())
            .filter(|e| e["verb"].as_str().is_some_and(|v| WRITE_VERBS.contains(&v)))
            .filter(|e| e["objectRef"]["resource"] != "leases")
            .count())
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = writes(&server)?;
    let reads_before = server.audit_count(&user, &["get"])?;
    // Touch the object without changing its spec: a reconcile runs and must write nothing.
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    echoes.patch("e", &PatchParams::default(), &Patch::Merge(&touch)).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(server.audit_count(&user, &["get"])? > reads_before, "the touch triggered a reconcile");
    let after = writes(&server)?;
    assert_eq!(after, before, "reconciling an unchanged object must send no writes");
    write_result(
        "steady_state_writes",
        json!({"write_requests_other_than_lease_renewals": after - before, "window_s": 3}),
    )?;

    // SIGTERM: the operator exits 0 and releases the lease.
    std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    let status = tokio::time::timeout(Duration::from_secs(20), op.wait()).await??;
    assert!(status.success(), "operator exited with {status}");
    let leases: Api<Lease> = Api::namespaced(admin.clone(), ns);
    assert_eq!(lease_holder(&leases).await, None, "lease released on shutdown");
    Ok(())
}

#[tokio::test]
async fn invalid_spec_is_reported_in_status_and_as_a_warning_event() -> TestResult {
    let ns = "invalid";
    let EchoSetup { server: _server, admin, kubeconfig, logs } = echo_setup(ns).await?;
    let _op = start_operator(&kubeconfig, ns, "op-a", &logs.join("a.log"))?;
    let echoes = echo_api(&admin, ns);
    echoes.create(&PostParams::default(), &echo("bad", "")?).await?;
    let message = eventually(Duration::from_secs(60), "InvalidSpec condition", || async {
        let obj = echoes.get_opt("bad").await.ok()??;
        let conds = obj.data["status"]["conditions"].as_array()?.clone();
        conds
            .iter()
            .find(|c| c["type"] == "Ready" && c["status"] == "False" && c["reason"] == "InvalidSpec")
            .and_then(|c| c["message"].as_str().map(String::from))
    })
    .await?;
    assert!(message.contains("spec.message"), "the message names the field: {message}");
    let events: Api<Event> = Api::namespaced(admin.clone(), ns);
    let warning = eventually(Duration::from_secs(10), "a Warning event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("InvalidSpec"))
    })
    .await?;
    assert!(warning.note.unwrap_or_default().contains("spec.message"));

    // Fixing the spec makes it Ready.
    let fix = json!({"spec": {"message": "fixed"}});
    echoes.patch("bad", &PatchParams::default(), &Patch::Merge(&fix)).await?;
    eventually(Duration::from_secs(30), "Ready after the fix", || ready_by(&echoes, "bad")).await?;
    Ok(())
}

#[tokio::test]
async fn finalizer_runs_cleanup_before_the_object_goes() -> TestResult {
    use statecraft_shared::finalizer::{FinalizerEvent, with_finalizer};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    let server = ApiServer::start().await?;
    let client = server.client().await?;
    namespace(&client, "final").await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "final");
    cms.create(&PostParams::default(), &config_map("guarded", "x")).await?;
    let cleanups = AtomicU32::new(0);
    let reconcile = |obj: Arc<ConfigMap>| {
        with_finalizer(&cms, "statecraft.io/test", obj, |event| {
            if let FinalizerEvent::Cleanup(_) = event {
                cleanups.fetch_add(1, Ordering::SeqCst);
            }
            async { Ok(kube::runtime::controller::Action::await_change()) }
        })
    };
    // First reconcile adds the finalizer (and does not run the body yet).
    reconcile(Arc::new(cms.get("guarded").await?)).await?;
    let live = cms.get("guarded").await?;
    assert_eq!(live.finalizers(), ["statecraft.io/test".to_string()]);
    // Deleting only marks it; the object stays until clean-up ran.
    cms.delete("guarded", &Default::default()).await?;
    let marked = cms.get("guarded").await?;
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(cleanups.load(Ordering::SeqCst), 0);
    reconcile(Arc::new(marked)).await?;
    assert_eq!(cleanups.load(Ordering::SeqCst), 1);
    eventually(Duration::from_secs(10), "the object to be gone", || async {
        cms.get_opt("guarded").await.ok()?.is_none().then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn an_operator_whose_lease_is_taken_stops_at_once() -> TestResult {
    let ns = "stolen";
    let EchoSetup { server: _server, admin, kubeconfig, logs } = echo_setup(ns).await?;
    let mut op = start_operator(&kubeconfig, ns, "op-a", &logs.join("a.log"))?;
    let leases = holding(&admin, ns, "op-a").await?;
    // Another party takes the Lease (as a second operator would after a partition): op-a
    // must stop acting rather than keep reconciling next to a new leader.
    let mut lease = leases.get("statecraft-echo").await?;
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = Some("intruder".into());
        spec.renew_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()));
    }
    leases.replace("statecraft-echo", &PostParams::default(), &lease).await?;
    let status = tokio::time::timeout(Duration::from_secs(10), op.wait()).await??;
    assert!(!status.success(), "a replica that lost its lease exits non-zero so it restarts as a standby");
    assert_eq!(lease_holder(&leases).await.as_deref(), Some("intruder"), "it did not take the lease back");
    Ok(())
}

/// Sends `signal` (e.g. `-STOP`) to the operator process `child`.
async fn signal(child: &Child, signal: &str) -> TestResult {
    let pid = child.id().ok_or("the operator has exited")?;
    let status = Command::new("kill").args([signal, &pid.to_string()]).status().await?;
    assert!(status.success(), "kill {signal} {pid}");
    Ok(())
}

/// A leader paused (SIGSTOP) past its Lease wakes up with its watches full of work that
/// arrived meanwhile; before its elector has run again it must not act on any of it,
/// because the standby leads by then. Checked: whatever op-a finds on waking (a changed
/// Echo, a new one), only op-b reconciles, and op-a exits to restart as a standby.
#[tokio::test]
async fn a_leader_paused_past_its_lease_acts_on_nothing_when_it_resumes() -> TestResult {
    let ns = "paused";
    let EchoSetup { server: _server, admin, kubeconfig, logs } = echo_setup(ns).await?;
    let mut first = start_operator(&kubeconfig, ns, "op-a", &logs.join("a.log"))?;
    holding(&admin, ns, "op-a").await?;
    let _second = start_operator(&kubeconfig, ns, "op-b", &logs.join("b.log"))?;
    let echoes = echo_api(&admin, ns);
    echoes.create(&PostParams::default(), &echo("e0", "before")?).await?;
    let by = eventually(Duration::from_secs(30), "e0 to be Ready", || ready_by(&echoes, "e0")).await?;
    assert_eq!(by, "op-a");

    signal(&first, "-STOP").await?;
    // A stopped process stamps nothing: an Event of op-a stamped from here on is an act of
    // the woken replica.
    let paused_at = k8s_openapi::jiff::Timestamp::now();
    holding(&admin, ns, "op-b").await?;
    // Work for the paused leader to find when it wakes: a change and a new object.
    let patch = json!({"spec": {"message": "while paused"}});
    echoes.patch("e0", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    echoes.create(&PostParams::default(), &echo("e1", "while paused")?).await?;
    for name in ["e0", "e1"] {
        let by = eventually(Duration::from_secs(30), "the new leader to reconcile", || ready_by(&echoes, name)).await?;
        assert_eq!(by, "op-b", "{name}");
    }

    signal(&first, "-CONT").await?;
    let patch = json!({"spec": {"message": "after resume"}});
    echoes.patch("e0", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let status = tokio::time::timeout(Duration::from_secs(15), first.wait()).await??;
    assert!(!status.success(), "the woken replica exits to restart as a standby");
    for name in ["e0", "e1"] {
        let by = eventually(Duration::from_secs(30), "Ready", || ready_by(&echoes, name)).await?;
        assert_eq!(by, "op-b", "{name} was reconciled by the paused replica after it woke");
    }
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    assert_eq!(data(cms.get("e0-echo").await?, "message").as_deref(), Some("after resume"));
    // A status write can be overwritten, an Event cannot: op-a reported nothing since it
    // was paused (a report folds into its Event's series, whose last time then moves), and
    // never anything about e1. (It may report e0 twice before the pause: a reconcile that
    // read the Echo from a cache without its first status does it again.)
    let events: Api<Event> = Api::namespaced(admin.clone(), ns);
    for e in events.list(&Default::default()).await?.items {
        if e.reporting_instance.as_deref() != Some("op-a") {
            continue;
        }
        let about = e.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default();
        assert_ne!(about, "e1", "op-a acted on e1, created while it was paused: {e:?}");
        let last = e.series.as_ref().map(|s| s.last_observed_time.0).or(e.event_time.as_ref().map(|t| t.0));
        assert!(last.is_some_and(|t| t < paused_at), "op-a acted on {about} after it was paused: {e:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_panicking_task_is_restarted_with_a_warning_event_and_a_metric() -> TestResult {
    use statecraft_shared::runner::Runtime;
    use statecraft_shared::tasks::{RestartReporter, Tasks};
    use statecraft_shared::testing::echo::Echo;
    use statecraft_shared::tokio_util::sync::CancellationToken;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let ns = "tasks";
    let server = ApiServer::start().await?;
    let admin = server.client().await?;
    namespace(&admin, ns).await?;
    install_crd(&admin).await?;
    let created = echo_api(&admin, ns).create(&PostParams::default(), &echo("flaky", "hi")?).await?;
    let uid = created.uid().ok_or("the created Echo has no uid")?;

    // The registry as an operator builds it, with a task whose first run panics.
    let rt = Arc::new(Runtime::new(admin.clone(), ns.into(), "statecraft-echo", "op-a".into())?);
    let tasks = Tasks::new(CancellationToken::new(), RestartReporter::<Echo>::new(rt.clone()));
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    tasks.ensure("flaky", &uid, move |_, cancel| {
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                panic!("simulated bug in a client library");
            }
            cancel.cancelled().await;
        }
    });

    let events: Api<Event> = Api::namespaced(admin.clone(), ns);
    let event = eventually(Duration::from_secs(10), "a TaskRestarted Event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| e.reason.as_deref() == Some("TaskRestarted"))
    })
    .await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let regarding = event.regarding.ok_or("the Event regards no object")?;
    assert_eq!(regarding.kind.as_deref(), Some("Echo"));
    assert_eq!(regarding.name.as_deref(), Some("flaky"));
    assert_eq!(regarding.uid.as_deref(), Some(uid.as_str()));
    let note = event.note.unwrap_or_default();
    assert!(note.contains("simulated bug in a client library") && note.contains("1s"), "{note}");
    let restarts = r#"statecraft_echo_task_restarts_total{cluster="flaky",namespace="tasks"} 1"#;
    assert!(rt.metrics.render().contains(restarts), "{}", rt.metrics.render());

    eventually(Duration::from_secs(10), "the task to be started again", || async {
        (runs.load(Ordering::SeqCst) == 2).then_some(())
    })
    .await?;
    tasks.stop("flaky");
    assert!(!rt.metrics.render().contains("task_restarts_total{"), "a deleted resource's restarts are forgotten");
    Ok(())
}

/// A directory for the operators' logs that outlives the test, for reading after a failure.
fn log_dir(test: &str) -> TestResult<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("operator-logs-{test}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Writes a measurement to `results/bench/<name>.json` at the workspace root.
fn write_result(name: &str, value: serde_json::Value) -> TestResult {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{name}.json")), serde_json::to_string_pretty(&value)?)?;
    Ok(())
}
