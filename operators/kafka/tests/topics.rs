//! The topic controller against a real kube-apiserver and a real Kafka 4.4 cluster (3
//! controllers, 3 brokers on loopback; see `support`), running as the operator's service
//! account with exactly the Role its `rbac` rules render. The KafkaCluster is a resource
//! whose status names the loopback broker as its bootstrap address, as the per-cluster
//! task would write it (no task runs here: there are no pods).
//!
//! One test, in steps that build on each other (each JVM takes seconds to start on 2
//! cores): a topic waits for a missing cluster; is created as the spec says; a config key
//! changed outside the operator is set back, and an unlisted one is left; partitions grow;
//! a second resource naming the same topic waits and its deletion keeps the topic; an
//! observed topic is reported and left alone; reconciles of unchanged topics write
//! nothing; deletion deletes the topic or keeps it, as the policy says.

#[path = "support/apiserver.rs"]
mod apiserver;
#[allow(
    dead_code,
    reason = "the harness is shared with tests/admin.rs, which stops and restarts nodes; this file does not"
)]
mod support;

use std::time::Duration;

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use statecraft_kafka::KafkaOperator;
use statecraft_kafka::admin::Admin;
use statecraft_kafka::api::{KafkaCluster, KafkaTopic, KafkaTopicStatus};
use statecraft_kafka::controller::topic;
use statecraft_kafka::observed::{ConfigChange, ConfigResource};
use statecraft_shared::runner::{Operator, Runtime};
use statecraft_shared::testing::apiserver::ApiServer;
use statecraft_shared::tokio_util::sync::CancellationToken;
use support::BROKERS;

const NS: &str = "topics";
/// The status of KafkaTopic `name` once `check` accepts it.
async fn status_until(
    kafka: &support::KafkaCluster,
    topics: &Api<KafkaTopic>,
    name: &str,
    what: &str,
    check: impl Fn(&KafkaTopicStatus) -> bool,
) -> KafkaTopicStatus {
    kafka
        .until(what, || async {
            let status = topics.get(name).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
            if check(&status) { Ok(status) } else { Err(format!("{status:?}")) }
        })
        .await
}

/// Condition `type_` of `status`: (status, reason).
fn condition(status: &KafkaTopicStatus, type_: &str) -> Option<(String, String)> {
    status.conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status.clone(), c.reason.clone()))
}

fn is(status: &KafkaTopicStatus, type_: &str, value: &str, reason: &str) -> bool {
    condition(status, type_) == Some((value.to_owned(), reason.to_owned()))
}

fn topic_object(name: &str, spec: serde_json::Value) -> KafkaTopic {
    serde_json::from_value(json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaTopic",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// Deletes KafkaTopic `name` and waits until it is gone (its finalizer removed).
async fn delete_and_wait(kafka: &support::KafkaCluster, topics: &Api<KafkaTopic>, name: &str) {
    topics.delete(name, &DeleteParams::default()).await.unwrap();
    kafka
        .until(&format!("{name} gone"), || async {
            match topics.get_opt(name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(t) => Err(format!("{:?}", t.metadata.finalizers)),
            }
        })
        .await;
}

/// Touches KafkaTopic `name` (an annotation: no new generation), which makes the
/// controller reconcile it at once.
async fn touch(topics: &Api<KafkaTopic>, name: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {"test/touch": value}}});
    topics.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Topic `topic`'s value of `key`, as the broker `admin` asks has it.
async fn topic_config(admin: &Admin, topic: &str, key: &str) -> Option<String> {
    let resource = ConfigResource::Topic(topic.to_owned());
    let mut configs = admin.describe_configs(std::slice::from_ref(&resource)).await.unwrap();
    configs.remove(&resource)?.get(key)?.value.clone()
}

async fn retention(admin: &Admin, topic: &str) -> Option<String> {
    topic_config(admin, topic, "retention.ms").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_corrected_claimed_once_observed_and_deleted_as_their_spec_says() {
    let (server, kafka) = tokio::join!(ApiServer::start(), support::KafkaCluster::start());
    let server = server.unwrap();
    let client = server.client().await.unwrap();
    apiserver::install(&client, NS).await;
    let operator_user = apiserver::operator_user(NS);
    let admin = kafka.admin(BROKERS[0]).await;
    let topics: Api<KafkaTopic> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();

    // The controller, with the operator's own rights only.
    let operator = server.client_as(&operator_user, &["system:serviceaccounts"]).await.unwrap();
    let rt = std::sync::Arc::new(Runtime::new(operator, NS.into(), KafkaOperator::NAME, "test".into()).unwrap());
    let shutdown = CancellationToken::new();
    let controller = tokio::spawn(topic::run(rt, shutdown.clone()));

    // A topic of a cluster that does not exist waits, saying so.
    topics.create(&pp, &topic_object("orphan", json!({"clusterName": "nowhere", "partitions": 1}))).await.unwrap();
    status_until(&kafka, &topics, "orphan", "the orphan to wait", |s| is(s, "Ready", "False", "ClusterNotFound")).await;
    // Deleted, it goes at once: a cluster that does not exist has no topic to delete.
    delete_and_wait(&kafka, &topics, "orphan").await;

    // The cluster, as the per-cluster task reports it once a broker registered.
    let cluster: KafkaCluster = serde_json::from_value(json!({
        "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": "events"},
        "spec": {"combined": {"replicas": 3, "storage": {"size": "1Gi"}}},
    }))
    .unwrap();
    let clusters: Api<KafkaCluster> = Api::namespaced(client.clone(), NS);
    clusters.create(&pp, &cluster).await.unwrap();
    let orders = topic_object(
        "orders",
        json!({"clusterName": "events", "partitions": 3, "replicationFactor": 3,
               "config": {"retention.ms": "60000"}, "deletionPolicy": "Delete"}),
    );
    topics.create(&pp, &orders).await.unwrap();
    status_until(&kafka, &topics, "orders", "orders to wait for the cluster to serve", |s| {
        is(s, "Ready", "False", "ClusterNotServing")
    })
    .await;
    let status = json!({"status": {"clusterId": kafka.cluster_id, "bootstrap": kafka.address(BROKERS[0])}});
    clusters.patch_status("events", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    // Created as the spec says, in sync; Kafka has it so.
    let created = status_until(&kafka, &topics, "orders", "orders to be created", |s| {
        is(s, "Ready", "True", "TopicReady") && is(s, "InSync", "True", "TopicInSync")
    })
    .await;
    let found = admin.topic("orders").await.unwrap().expect("orders exists in Kafka");
    assert_eq!(found.partitions.len(), 3);
    assert!(found.partitions.iter().all(|p| p.replicas.len() == 3), "{found:?}");
    assert_eq!(created.topic_id.as_deref(), Some(found.id.as_str()));
    assert_eq!((created.partitions, created.replication_factor), (Some(3), Some(3)));
    assert_eq!(created.topic_name.as_deref(), Some("orders"));
    assert_eq!(retention(&admin, "orders").await.as_deref(), Some("60000"));

    // Changed outside the operator: the listed key is set back, an unlisted one stays.
    let outside = [
        ConfigChange::Set("retention.ms".into(), "1000".into()),
        ConfigChange::Set("segment.ms".into(), "3600000".into()),
    ];
    admin.alter_configs(&ConfigResource::Topic("orders".into()), &outside).await.unwrap();
    // Seen by the broker the test asks (its metadata follows the controller's within
    // moments): else "set back" could pass before the change was visible at all.
    kafka
        .until("the change made outside visible", || async {
            match topic_config(&admin, "orders", "segment.ms").await.as_deref() {
                Some("3600000") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    touch(&topics, "orders", "drift").await;
    kafka
        .until("retention.ms set back", || async {
            match retention(&admin, "orders").await.as_deref() {
                Some("60000") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let segment = topic_config(&admin, "orders", "segment.ms").await;
    assert_eq!(segment.as_deref(), Some("3600000"), "an unlisted key is left alone");

    // Partitions grow with the spec.
    topics.patch("orders", &PatchParams::default(), &Patch::Merge(json!({"spec": {"partitions": 6}}))).await.unwrap();
    status_until(&kafka, &topics, "orders", "orders to have 6 partitions", |s| {
        s.partitions == Some(6) && is(s, "InSync", "True", "TopicInSync")
    })
    .await;
    assert_eq!(admin.topic("orders").await.unwrap().unwrap().partitions.len(), 6);

    // A second resource naming the same topic waits and changes nothing; deleted with
    // `Delete`, it leaves the topic to the first one.
    let again = topic_object(
        "orders-again",
        json!({"clusterName": "events", "topicName": "orders", "partitions": 8,
               "config": {"retention.ms": "5000"}, "deletionPolicy": "Delete"}),
    );
    topics.create(&pp, &again).await.unwrap();
    let claimed = status_until(&kafka, &topics, "orders-again", "orders-again to wait", |s| {
        is(s, "Ready", "False", "TopicClaimed")
    })
    .await;
    let message = &claimed.conditions.iter().find(|c| c.type_ == "Ready").unwrap().message;
    assert!(message.contains("KafkaTopic orders's"), "{message}");
    delete_and_wait(&kafka, &topics, "orders-again").await;
    let kept = admin.topic("orders").await.unwrap().expect("orders stays in Kafka");
    assert_eq!(kept.partitions.len(), 6, "the second resource did not grow it");
    assert_eq!(retention(&admin, "orders").await.as_deref(), Some("60000"), "nor reconfigure it");
    assert_eq!(Some(kept.id), created.topic_id, "nor delete it");

    // A topic made outside, adopted with Observe: reported, never changed.
    let mut keep = std::collections::BTreeMap::new();
    keep.insert("retention.ms".to_owned(), "1000".to_owned());
    admin.create_topic("Audit.log", 2, 1, &keep).await.unwrap();
    let audit = topic_object(
        "audit",
        json!({"clusterName": "events", "topicName": "Audit.log", "partitions": 4,
               "config": {"retention.ms": "60000"}, "ownership": "Observe"}),
    );
    topics.create(&pp, &audit).await.unwrap();
    let observed =
        status_until(&kafka, &topics, "audit", "audit to be reported", |s| is(s, "InSync", "False", "TopicDiffers"))
            .await;
    assert!(is(&observed, "Ready", "True", "TopicReady"), "{observed:?}");
    let fields: Vec<&str> = observed.differences.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["spec.partitions", "spec.config.retention.ms"], "{observed:?}");
    assert_eq!(observed.differences[1].actual.as_deref(), Some("1000"));
    assert_eq!(admin.topic("Audit.log").await.unwrap().unwrap().partitions.len(), 2, "an observed topic is not grown");
    assert_eq!(retention(&admin, "Audit.log").await.as_deref(), Some("1000"), "nor reconfigured");

    // Steady state: reconciles of unchanged topics read, and write nothing. (The reconcile
    // that follows each change, two seconds later, is over first.)
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = ["create", "update", "patch", "delete"];
    let reads_before = server.audit_count(&operator_user, &["get"]).unwrap();
    let writes_before = server.audit_count(&operator_user, &writes).unwrap();
    for name in ["orders", "audit"] {
        touch(&topics, name, "steady").await;
    }
    // Each reconcile reads the topic's KafkaCluster once: two more reads show both ran.
    kafka
        .until("both topics reconciled", || async {
            let reads = server.audit_count(&operator_user, &["get"]).map_err(|e| e.to_string())?;
            if reads >= reads_before + 2 { Ok(()) } else { Err(format!("{} reads", reads - reads_before)) }
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(server.audit_count(&operator_user, &writes).unwrap(), writes_before, "writes in steady state");

    // Deletion: Delete takes the topic along, Retain keeps it; both resources go.
    topics.delete("orders", &DeleteParams::default()).await.unwrap();
    topics.delete("audit", &DeleteParams::default()).await.unwrap();
    kafka
        .until("both resources gone", || async {
            let left = topics.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let names: Vec<String> = left.items.iter().filter_map(|t| t.metadata.name.clone()).collect();
            if names.is_empty() { Ok(()) } else { Err(format!("{names:?}")) }
        })
        .await;
    kafka
        .until("orders deleted in Kafka", || async {
            match admin.topic("orders").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(t) => Err(format!("{t:?}")),
            }
        })
        .await;
    assert!(admin.topic("Audit.log").await.unwrap().is_some(), "a retained topic stays");

    shutdown.cancel();
    controller.await.unwrap();
}
