//! The CRDs installed into a real kube-apiserver refuse cluster names that cannot name the
//! objects built from them, naming the field, and accept the longest name that fits
//! together with the objects built for it. Only a real API server shows that the CEL rule
//! on `metadata.name` compiles, can read the name, and is held to its cost limit.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use statecraft_etcd::EtcdOperator;
use statecraft_etcd::api::{EtcdCluster, EtcdRestore};
use statecraft_etcd::build::statefulset::{RestoreParts, statefulset};
use statecraft_etcd::build::{MAX_CLUSTER_NAME, Names, services};
use statecraft_etcd::validate::validate;
use statecraft_shared::runner::Operator;
use statecraft_shared::testing::apiserver::ApiServer;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

const NS: &str = "crd";

async fn install(client: &Client) -> TestResult {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in EtcdOperator::crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let ns = Namespace { metadata: ObjectMeta { name: Some(NS.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    let started = Instant::now();
    loop {
        let ok = Api::<EtcdCluster>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok()
            && Api::<EtcdRestore>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok();
        if ok {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err("the CRDs were not served within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn spec() -> Value {
    json!({"version": "3.6.16", "replicas": 3, "storage": {"size": "1Gi"}})
}

fn cluster(name: &str) -> Value {
    json!({"apiVersion": "etcd.statecraft.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": name}, "spec": spec()})
}

/// Creates `object` as raw JSON (invalid objects must reach the server); returns the API
/// server's error text, or None when accepted.
async fn create<K: kube::Resource<DynamicType = ()> + Clone>(api: &Api<K>, object: Value) -> Option<String> {
    let resource = ApiResource::erase::<K>(&());
    let dynamic: Api<DynamicObject> = Api::namespaced_with(api.clone().into_client(), NS, &resource);
    let object: DynamicObject = serde_json::from_value(object).expect("test objects are objects");
    dynamic.create(&PostParams::default(), &object).await.err().map(|e| e.to_string())
}

fn assert_rejected(result: Option<String>, field: &str) {
    let message = result.unwrap_or_else(|| panic!("accepted, but should be rejected naming {field}"));
    assert!(message.contains(field), "the rejection should name {field}: {message}");
}

#[tokio::test]
async fn cluster_names_that_cannot_name_the_built_objects_are_refused() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    install(&client).await?;
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);

    // The longest name that fits is accepted, and so are the StatefulSet and Services built
    // for it.
    let longest = "e".repeat(MAX_CLUSTER_NAME);
    assert_eq!(create(&clusters, cluster("main")).await, None);
    assert_eq!(create(&clusters, cluster(&longest)).await, None);
    let stored = clusters.get(&longest).await?;
    let valid = validate(&stored.spec)?;
    let names = Names::new(longest.as_str(), NS);
    let pp = PostParams::default();
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    for svc in [services::peer_service(&names), services::client_service(&names)] {
        services.create(&pp, &svc).await?;
    }
    let sts = statefulset(&valid, &names, 3, RestoreParts::default());
    Api::<StatefulSet>::namespaced(client.clone(), NS).create(&pp, &sts).await?;

    // One character more (56 would still make valid Services, but a StatefulSet whose
    // pods never come), a dot, a leading digit: refused, naming metadata.name.
    for bad in ["e".repeat(MAX_CLUSTER_NAME + 1), "e".repeat(56), "my.etcd".into(), "3etcd".into()] {
        assert_rejected(create(&clusters, cluster(&bad)).await, "metadata.name");
    }

    // The rule runs on create only: an existing cluster's spec and status are still written.
    let patch = json!({"spec": {"replicas": 5}});
    clusters.patch(&longest, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let status = json!({"status": {"phase": "Bootstrapping"}});
    clusters.patch_status(&longest, &PatchParams::default(), &Patch::Merge(&status)).await?;

    // A restore's target must fit the same names.
    let restores: Api<EtcdRestore> = Api::namespaced(client.clone(), NS);
    let restore = |name: &str, target: &str| {
        json!({
            "apiVersion": "etcd.statecraft.io/v1alpha1", "kind": "EtcdRestore", "metadata": {"name": name},
            "spec": {"backupName": "nightly", "target": {"name": target, "spec": spec()}},
        })
    };
    assert_eq!(create(&restores, restore("r1", "copy")).await, None);
    for (i, bad) in ["copy.1".to_string(), "e".repeat(MAX_CLUSTER_NAME + 1)].iter().enumerate() {
        assert_rejected(create(&restores, restore(&format!("r{}", i + 2), bad)).await, "spec.target.name");
    }
    Ok(())
}
