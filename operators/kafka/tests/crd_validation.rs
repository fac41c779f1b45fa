//! The CRDs installed into a real kube-apiserver accept a valid cluster (either layout) and
//! topic, and their schema bounds and CEL rules refuse what they should, naming the field:
//! on create, and on update for the rules that compare with the stored object (layout,
//! pool sizes, storage, a topic's partitions that may only grow). Only a real API server
//! shows that the rules compile, stay within their cost limits, and read `oldSelf` as
//! intended.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use statecraft_kafka::KafkaOperator;
use statecraft_kafka::api::{KafkaCluster, KafkaTopic};
use statecraft_kafka::names::MAX_CLUSTER_NAME;
use statecraft_kafka::validate::{validate, validate_topic};
use statecraft_shared::runner::Operator;
use statecraft_shared::testing::apiserver::ApiServer;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

const NS: &str = "crd";

async fn install(client: &Client) -> TestResult {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in KafkaOperator::crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let ns = Namespace { metadata: ObjectMeta { name: Some(NS.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    let started = Instant::now();
    loop {
        let ok = Api::<KafkaCluster>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok()
            && Api::<KafkaTopic>::namespaced(client.clone(), NS).list(&Default::default()).await.is_ok();
        if ok {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err("the CRDs were not served within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn separate() -> Value {
    json!({
        "controllers": {"replicas": 3, "storage": {"size": "1Gi"}},
        "brokers": {"replicas": 3, "storage": {"size": "10Gi"}, "rackLabel": "topology.kubernetes.io/zone"},
        "listeners": {"external": {"type": "NodePort", "advertised": [{"broker": 0, "host": "kafka-0.example.com"}]}},
        "config": {"log.retention.hours": "24", "num.io.threads": "8"},
        "defaultReplicationFactor": 3,
        "minInsyncReplicas": 2,
    })
}

fn combined() -> Value {
    json!({"combined": {"replicas": 3, "storage": {"size": "1Gi"}}})
}

fn cluster(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": name}, "spec": spec})
}

fn topic(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaTopic", "metadata": {"name": name}, "spec": spec})
}

/// `base` with `changes` merged in (JSON merge patch: null removes a key).
fn merged(mut base: Value, changes: Value) -> Value {
    fn merge(target: &mut Value, patch: Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(&k);
                    } else {
                        merge(t.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
            (t, p) => *t = p,
        }
    }
    merge(&mut base, changes);
    base
}

/// Creates `object` as raw JSON (invalid objects must reach the server); returns the API
/// server's error text, or None when accepted.
async fn create<K: kube::Resource<DynamicType = ()> + Clone>(api: &Api<K>, object: Value) -> Option<String> {
    let resource = ApiResource::erase::<K>(&());
    let dynamic: Api<DynamicObject> = Api::namespaced_with(api.clone().into_client(), NS, &resource);
    let object: DynamicObject = serde_json::from_value(object).expect("test objects are objects");
    dynamic.create(&PostParams::default(), &object).await.err().map(|e| e.to_string())
}

/// Merge-patches the spec of `name`; returns the API server's error text, or None.
async fn update<K>(api: &Api<K>, name: &str, spec: Value) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"spec": spec});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.err().map(|e| e.to_string())
}

fn assert_rejected(result: Option<String>, says: &str) {
    let message = result.unwrap_or_else(|| panic!("accepted, but should be rejected with {says:?}"));
    assert!(message.contains(says), "the rejection should say {says:?}: {message}");
}

#[tokio::test]
async fn clusters_are_validated_on_create_and_update() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    install(&client).await?;
    let clusters: Api<KafkaCluster> = Api::namespaced(client.clone(), NS);

    // Valid clusters of both layouts, and the longest name, are accepted; defaults are
    // filled in and what is stored passes the operator's own validation.
    assert_eq!(create(&clusters, cluster("main", separate())).await, None);
    assert_eq!(create(&clusters, cluster("small", combined())).await, None);
    let longest = "k".repeat(MAX_CLUSTER_NAME);
    assert_eq!(create(&clusters, cluster(&longest, combined())).await, None);
    let stored = clusters.get("main").await?;
    assert_eq!(stored.spec.version, "4.4.0");
    assert_eq!(stored.spec.listeners.internal.port, 9092);
    let valid = validate(&stored.spec)?;
    assert_eq!((valid.replication_factor, valid.min_insync_replicas), (3, 2));
    validate(&clusters.get("small").await?.spec)?;
    // Explicit nulls are absent fields, to the rules as to the operator.
    let mut nulls = combined();
    nulls["controllers"] = Value::Null;
    nulls["brokers"] = Value::Null;
    assert_eq!(create(&clusters, cluster("nulls", nulls)).await, None);

    // Refused on create, each naming the field.
    let bad = [
        (json!({"combined": {"replicas": 3, "storage": {"size": "1Gi"}}}), "spec.combined excludes"),
        (json!({"controllers": null}), "spec.combined excludes spec.controllers and spec.brokers"),
        (json!({"controllers": {"replicas": 4}}), "spec.controllers.replicas must be 1, 3 or 5"),
        (json!({"brokers": {"replicas": 0}}), "spec.brokers.replicas"),
        (json!({"brokers": {"storage": {"size": "0"}}}), "spec.brokers.storage.size"),
        (json!({"brokers": {"storage": {"size": "lots"}}}), "spec.brokers.storage.size"),
        (json!({"minInsyncReplicas": 3, "defaultReplicationFactor": 2}), "spec.minInsyncReplicas must not exceed"),
        (json!({"version": "4.4"}), "spec.version"),
        (json!({"listeners": {"internal": {"port": 9093}}}), "spec.listeners.internal.port must not be 9093"),
        (json!({"listeners": {"external": {"port": 9092}}}), "spec.listeners.external.port must differ"),
        (json!({"listeners": {"external": {"type": "Ingress"}}}), "spec.listeners.external.type"),
        (
            json!({"listeners": {"external": {"advertised": [{"broker": 1, "host": "a"}, {"broker": 1, "host": "b"}]}}}),
            "spec.listeners.external.advertised",
        ),
        (json!({"config": {"node.id": "1"}}), "spec.config.node.id is set by the operator"),
        (json!({"config": {"listener.name.internal.x": "1"}}), "spec.config.listener.name.internal.x is set by"),
        (json!({"config": {"bad key": "1"}}), "spec.config.bad key is not a configuration key"),
        (json!({"metadataVersion": "Sometimes"}), "spec.metadataVersion"),
    ];
    for (i, (changes, says)) in bad.into_iter().enumerate() {
        assert_rejected(create(&clusters, cluster(&format!("bad{i}"), merged(separate(), changes))).await, says);
    }
    let small = merged(combined(), json!({"combined": {"replicas": 2}}));
    assert_rejected(
        create(&clusters, cluster("bad-combined", small)).await,
        "spec.combined.replicas must be 1, 3 or 5",
    );
    for name in ["k".repeat(MAX_CLUSTER_NAME + 1), "my.kafka".into(), "3kafka".into()] {
        assert_rejected(create(&clusters, cluster(&name, combined())).await, "metadata.name");
    }

    // Refused on update: the layout, the quorum's size, shrinking brokers, storage.
    assert_rejected(update(&clusters, "small", json!({"combined": {"replicas": 5}})).await, "spec.combined.replicas");
    assert_rejected(
        update(&clusters, "small", merged(json!({"combined": null}), separate())).await,
        "spec.combined cannot be added or removed",
    );
    assert_rejected(
        update(&clusters, "main", json!({"controllers": {"replicas": 5}})).await,
        "spec.controllers.replicas cannot change",
    );
    assert_rejected(
        update(&clusters, "main", json!({"brokers": {"replicas": 2}})).await,
        "spec.brokers.replicas cannot shrink",
    );
    assert_rejected(
        update(&clusters, "main", json!({"brokers": {"storage": {"size": "20Gi"}}})).await,
        "spec.brokers.storage is immutable",
    );
    assert_rejected(
        update(&clusters, "main", json!({"controllers": {"storage": {"storageClassName": "fast"}}})).await,
        "spec.controllers.storage is immutable",
    );

    // Allowed on update: more brokers, configuration, pausing, the metadata.version policy.
    let allowed = json!({"brokers": {"replicas": 4}, "config": {"num.io.threads": "16"}, "paused": true, "metadataVersion": "Manual"});
    assert_eq!(update(&clusters, "main", allowed).await, None);

    // The status schema takes what the controller will write.
    let status = json!({"status": {
        "phase": "Running", "observedGeneration": 2, "clusterId": "MkU3OEVBNTcwNTJENDM2Qk", "activeController": 1,
        "quorum": {"leaderId": 1, "leaderEpoch": 3, "highWatermark": 120,
                   "voters": [{"id": 0, "logEndOffset": 120, "lag": 0, "caughtUp": true}],
                   "observers": [{"id": 100, "lag": 2, "caughtUp": true}]},
        "nodes": [{"id": 100, "pod": "main-broker-0", "role": "Broker", "ready": true, "revision": "main-broker-5d4f",
                   "brokerState": "RUNNING", "directoryId": "J8aAPcfLQt2bqs1JT_rMgQ"}],
        "finalizedMetadataVersion": "4.4-IV0", "underReplicatedPartitions": 0, "underMinIsrPartitions": 0,
        "offlinePartitions": 0, "bootstrap": "main-bootstrap.crd.svc:9092", "observedVersion": "4.4.0",
    }});
    let written = clusters.patch_status("main", &PatchParams::default(), &Patch::Merge(&status)).await?;
    let written = written.status.ok_or("no status")?;
    assert_eq!(written.nodes[0].broker_state.as_deref(), Some("RUNNING"));
    assert!(written.quorum.ok_or("no quorum")?.voters[0].caught_up);
    Ok(())
}

#[tokio::test]
async fn topics_are_validated_and_partitions_only_grow() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.client().await?;
    install(&client).await?;
    let topics: Api<KafkaTopic> = Api::namespaced(client.clone(), NS);
    let spec = || json!({"clusterName": "main", "partitions": 6, "config": {"retention.ms": "86400000"}});

    assert_eq!(create(&topics, topic("orders", spec())).await, None);
    let named = merged(spec(), json!({"topicName": "Orders_v2.eu-1", "replicationFactor": 3}));
    assert_eq!(create(&topics, topic("orders-v2", named)).await, None);
    let stored = topics.get("orders").await?;
    assert_eq!(validate_topic("orders", &stored.spec)?.topic_name, "orders");

    let long = "t".repeat(250);
    let bad = [
        (json!({"topicName": "."}), "spec.topicName must not be '.' or '..'"),
        (json!({"topicName": "a b"}), "spec.topicName"),
        (json!({"topicName": long}), "spec.topicName"),
        (json!({"partitions": 0}), "spec.partitions"),
        (json!({"partitions": null}), "spec.partitions"),
        (json!({"clusterName": "My.Cluster"}), "spec.clusterName"),
        (json!({"replicationFactor": 0}), "spec.replicationFactor"),
        (json!({"config": {"retention ms": "1"}}), "spec.config.retention ms is not a configuration key"),
        (json!({"ownership": "Nobody"}), "spec.ownership"),
        (json!({"deletionPolicy": "Orphan"}), "spec.deletionPolicy"),
    ];
    for (i, (changes, says)) in bad.into_iter().enumerate() {
        assert_rejected(create(&topics, topic(&format!("bad{i}"), merged(spec(), changes))).await, says);
    }

    // Partitions grow but never shrink; cluster, name and replication factor stay.
    assert_eq!(update(&topics, "orders", json!({"partitions": 12, "ownership": "Observe"})).await, None);
    assert_rejected(update(&topics, "orders", json!({"partitions": 11})).await, "spec.partitions may only grow");
    assert_rejected(update(&topics, "orders", json!({"clusterName": "other"})).await, "spec.clusterName is immutable");
    assert_rejected(update(&topics, "orders", json!({"topicName": "orders2"})).await, "spec.topicName is immutable");
    assert_rejected(
        update(&topics, "orders-v2", json!({"replicationFactor": 2})).await,
        "spec.replicationFactor cannot change",
    );
    assert_eq!(topics.get("orders").await?.spec.partitions, 12);
    Ok(())
}
