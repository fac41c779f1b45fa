//! The shared per-cluster loop against a real kube-apiserver, with a loop over the test
//! `Echo` resource whose act stage writes a ConfigMap and whose report stage writes the
//! status: a pass runs all four stages and writes the status; a wake makes the next pass at
//! once; a deleted resource stops the loop and forgets its metrics; a replica that does not
//! lead observes but neither acts nor writes the status.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client, CustomResourceExt, ResourceExt};
use statecraft_shared::Result;
use statecraft_shared::cluster_loop::{Acted, ClusterLoop, Loops, Next};
use statecraft_shared::leader::Leadership;
use statecraft_shared::reason::Catalogue;
use statecraft_shared::runner::Runtime;
use statecraft_shared::status::{ConditionType, set_condition};
use statecraft_shared::testing::apiserver::ApiServer;
use statecraft_shared::testing::echo::{Echo, EchoSpec, EchoStatus};
use statecraft_shared::testing::eventually;
use statecraft_shared::tokio_util::sync::CancellationToken;

/// The test loop's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
enum Copying {
    /// The ConfigMap holds the copy.
    Copied,
}

impl Catalogue for Copying {}

type TestResult<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What the test loop's stages were called with, for the test to read.
#[derive(Default)]
struct Seen {
    observed: usize,
    acted: usize,
    forgotten: Vec<String>,
}

/// A loop that copies the Echo's message into `<name>-seen` (act) and reports the pass
/// count in the status (report).
struct Copier {
    client: Client,
    namespace: String,
    seen: Arc<Mutex<Seen>>,
}

impl ClusterLoop for Copier {
    type Cluster = Echo;
    type Status = EchoStatus;
    type Observation = String;
    type Decision = String;
    type Done = usize;

    const NAME: &'static str = "copier";
    // Long enough that a prompt second pass can only come from a wake.
    const INTERVAL: Duration = Duration::from_secs(30);

    fn paused(echo: &Echo) -> bool {
        echo.spec.paused
    }

    async fn observe(&mut self, echo: &Echo) -> Result<Option<String>> {
        self.seen.lock().expect("seen").observed += 1;
        Ok(Some(echo.spec.message.clone()))
    }

    fn decide(&self, _echo: &Echo, message: &String) -> String {
        message.to_uppercase()
    }

    async fn act(&mut self, echo: &Echo, _: &String, copy: &String, _: &mut EchoStatus) -> Result<Acted<usize>> {
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some(format!("{}-seen", echo.name_any())), ..Default::default() },
            data: Some([("message".to_string(), copy.clone())].into()),
            ..Default::default()
        };
        let params = kube::api::PatchParams::apply("copier").force();
        cms.patch(&cm.name_any(), &params, &kube::api::Patch::Apply(&cm))
            .await
            .map_err(|e| statecraft_shared::Error::kube("applying the copy", e))?;
        let mut seen = self.seen.lock().expect("seen");
        seen.acted += 1;
        Ok(Acted { next: Next::Later, done: seen.acted })
    }

    async fn report(
        &mut self,
        echo: &Echo,
        _: &String,
        copy: &String,
        passes: &usize,
        status: &mut EchoStatus,
    ) -> Result<()> {
        let message = format!("copied {copy} in pass {passes}");
        set_condition(
            &mut status.conditions,
            ConditionType::Ready,
            true,
            Copying::Copied,
            &message,
            echo.metadata.generation,
        );
        Ok(())
    }

    fn forget(&self, cluster: &str) {
        self.seen.lock().expect("seen").forgotten.push(cluster.to_string());
    }
}

async fn setup(ns: &str) -> TestResult<(ApiServer, Client)> {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(ns.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Echo::crd()).await?;
    eventually(Duration::from_secs(30), "the CRD to be established", || async {
        let crd = crds.get_opt(&Echo::crd().name_any()).await.ok()??;
        crd.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    })
    .await?;
    Ok((server, client))
}

async fn create_echo(client: &Client, ns: &str, name: &str, message: &str) -> TestResult<Echo> {
    let echo = Echo::new(name, EchoSpec { message: message.into(), extra: false, paused: false });
    Ok(Api::<Echo>::namespaced(client.clone(), ns).create(&PostParams::default(), &echo).await?)
}

fn ready_message(echo: &Echo) -> Option<String> {
    let status = echo.status.as_ref()?;
    status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.message.clone())
}

#[tokio::test]
async fn a_pass_acts_and_reports_a_wake_passes_at_once_and_a_deleted_resource_stops_the_loop() -> TestResult {
    let ns = "loops";
    let (_server, client) = setup(ns).await?;
    let echo = create_echo(&client, ns, "one", "hello").await?;
    let uid = echo.uid().ok_or("no uid")?;
    let rt = Arc::new(Runtime::new(client.clone(), ns.into(), "statecraft-echo", "op-a".into())?);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let loops = Loops::<Echo>::new(rt.clone(), CancellationToken::new());
    let make = {
        let (client, seen) = (client.clone(), seen.clone());
        move || Copier { client: client.clone(), namespace: ns.into(), seen: seen.clone() }
    };
    loops.ensure("one", &uid, make.clone());

    let echoes: Api<Echo> = Api::namespaced(client.clone(), ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let message = eventually(Duration::from_secs(10), "the first pass's status", || async {
        ready_message(&echoes.get("one").await.ok()?)
    })
    .await?;
    assert_eq!(message, "copied HELLO in pass 1", "decide's output reached act and report");
    let copy = cms.get("one-seen").await?;
    assert_eq!(copy.data.and_then(|d| d.get("message").cloned()).as_deref(), Some("HELLO"));

    // A changed spec and a wake (what the reconciler does on every change): the next pass
    // comes at once, not after the 30 s interval.
    let patch = serde_json::json!({"spec": {"message": "again"}});
    echoes.patch("one", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    loops.ensure("one", &uid, make.clone());
    let message = eventually(Duration::from_secs(10), "the woken pass's status", || async {
        ready_message(&echoes.get("one").await.ok()?).filter(|m| m.contains("AGAIN"))
    })
    .await?;
    assert_eq!(message, "copied AGAIN in pass 2");

    // Deleted: the next pass finds it gone, forgets it and stops.
    echoes.delete("one", &Default::default()).await?;
    loops.ensure("one", &uid, make);
    eventually(Duration::from_secs(10), "the loop to forget the deleted resource", || async {
        (seen.lock().ok()?.forgotten == ["one"]).then_some(())
    })
    .await?;
    let observed = seen.lock().map_err(|_| "poisoned")?.observed;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen.lock().map_err(|_| "poisoned")?.observed, observed, "a stopped loop passes no more");
    Ok(())
}

#[tokio::test]
async fn a_replica_that_does_not_lead_observes_but_neither_acts_nor_writes_the_status() -> TestResult {
    let ns = "standby";
    let (_server, client) = setup(ns).await?;
    let echo = create_echo(&client, ns, "two", "hello").await?;
    let uid = echo.uid().ok_or("no uid")?;
    let rt = Runtime::new(client.clone(), ns.into(), "statecraft-echo", "op-b".into())?;
    // An elector that has not (or no longer) renewed a Lease: it holds nothing.
    let rt = Arc::new(rt.with_leadership(Leadership::elected()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let loops = Loops::<Echo>::new(rt, CancellationToken::new());
    let (c, s) = (client.clone(), seen.clone());
    loops.ensure("two", &uid, move || Copier { client: c.clone(), namespace: ns.into(), seen: s.clone() });

    eventually(Duration::from_secs(10), "a pass to observe", || async {
        (seen.lock().ok()?.observed >= 1).then_some(())
    })
    .await?;
    // Give a wrongly written status or copy time to land.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen.lock().map_err(|_| "poisoned")?.acted, 0, "act is the leader's alone");
    let echo = Api::<Echo>::namespaced(client.clone(), ns).get("two").await?;
    assert_eq!(ready_message(&echo), None, "no status from a replica that does not lead");
    assert!(Api::<ConfigMap>::namespaced(client, ns).get_opt("two-seen").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn a_paused_cluster_is_observed_and_reported_but_not_acted_on_until_unpaused() -> TestResult {
    let ns = "paused";
    let (_server, client) = setup(ns).await?;
    let echoes: Api<Echo> = Api::namespaced(client.clone(), ns);
    let spec = EchoSpec { message: "hello".into(), extra: false, paused: true };
    let echo = echoes.create(&PostParams::default(), &Echo::new("three", spec)).await?;
    let uid = echo.uid().ok_or("no uid")?;
    let rt = Arc::new(Runtime::new(client.clone(), ns.into(), "statecraft-echo", "op-c".into())?);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let loops = Loops::<Echo>::new(rt, CancellationToken::new());
    let make = {
        let (client, seen) = (client.clone(), seen.clone());
        move || Copier { client: client.clone(), namespace: ns.into(), seen: seen.clone() }
    };
    loops.ensure("three", &uid, make.clone());

    // Reported (what a pass that did not act reports), but not acted on.
    let message = eventually(Duration::from_secs(10), "the paused pass's status", || async {
        ready_message(&echoes.get("three").await.ok()?)
    })
    .await?;
    assert_eq!(message, "copied HELLO in pass 0");
    assert_eq!(seen.lock().map_err(|_| "poisoned")?.acted, 0, "a paused cluster is not acted on");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    assert!(cms.get_opt("three-seen").await?.is_none());

    // Unpaused (and woken, as the reconciler does on every change): the next pass acts.
    let patch = serde_json::json!({"spec": {"paused": false}});
    echoes.patch("three", &Default::default(), &kube::api::Patch::Merge(&patch)).await?;
    loops.ensure("three", &uid, make);
    let message = eventually(Duration::from_secs(10), "the unpaused pass's status", || async {
        ready_message(&echoes.get("three").await.ok()?).filter(|m| m.ends_with("pass 1"))
    })
    .await?;
    assert_eq!(message, "copied HELLO in pass 1");
    assert!(cms.get_opt("three-seen").await?.is_some(), "acted once unpaused");
    Ok(())
}
