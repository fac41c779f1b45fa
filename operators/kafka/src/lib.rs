//! The library half of `statecraft-kafka`: the Statecraft Kafka operator.
//!
//! - [`api`]: the custom resources of `kafka.statecraft.io/v1alpha1` — `KafkaCluster` and
//!   `KafkaTopic` — with schema and CEL validation, printer columns and a description on
//!   every field. `crd` prints them.
//! - [`validate`]: the checks the schema cannot make, naming the field.
//! - [`names`] and [`nodes`]: the names of a cluster's objects (and so the longest cluster
//!   name), and how its nodes are numbered.
//! - [`build`]: pure builders of the objects a cluster owns (ConfigMap, Services,
//!   StatefulSets, PodDisruptionBudgets) and which configuration Kafka takes at runtime.
//! - [`admin`]: the one small async admin client every call to Kafka goes through.
//! - [`observed`]: what the admin client observes, as plain data.
//! - [`roll`]: the roll planner and Kafka's gates (quorum, min ISR), pure; and the
//!   cluster-wide configuration changes that need no restart.
//! - [`topic`]: how a topic in Kafka differs from its KafkaTopic and what to change, pure.
//! - [`controller`]: the reconciler, the per-cluster task and the topic controller.
//! - [`metadata_version`]: Kafka's metadata.version levels by name.
//! - [`reason`]: the catalogue of the reasons its Events and conditions give.
// No panics on what a user or the network controls: `make check` (clippy) refuses
// unwrap, expect and panic outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod admin;
pub mod api;
pub mod build;
pub mod controller;
pub mod metadata_version;
pub mod names;
pub mod nodes;
pub mod observed;
pub mod reason;
pub mod roll;
pub mod topic;
pub mod validate;

use std::sync::Arc;

use kube::CustomResourceExt;
use statecraft_shared::Result;
use statecraft_shared::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use statecraft_shared::names::with_name_rule;
use statecraft_shared::rbac::{CORE_GROUP, Rule};
use statecraft_shared::runner::{Operator, Runtime, parse_sample, sample_object};
use statecraft_shared::tokio_util::sync::CancellationToken;

use api::{GROUP, KafkaCluster, KafkaTopic};

/// Read-only verbs.
const READ: &[&str] = &["get", "list", "watch"];
/// Verbs for objects the controllers own and apply with server-side apply.
const OWN: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// The operator, as the shared runner sees it.
pub struct KafkaOperator;

impl Operator for KafkaOperator {
    const NAME: &'static str = "statecraft-kafka";

    fn crds() -> Vec<CustomResourceDefinition> {
        // A cluster's name must fit the names built from it (see `names`); a topic names no
        // Kubernetes object.
        vec![with_name_rule(KafkaCluster::crd(), names::MAX_CLUSTER_NAME), KafkaTopic::crd()]
    }

    /// What the controllers use, nothing more (Events and Leases are in the base rules):
    /// read KafkaClusters and patch their status; read KafkaTopics, patch them (the topic
    /// controller's finalizer) and their status; own the StatefulSets, Services, ConfigMap
    /// and PodDisruptionBudgets; read pods, delete them to roll, and patch their status to set
    /// the readiness gate that says a node serves. No Secret: nothing here reads one.
    fn rbac_rules() -> Vec<Rule> {
        vec![
            Rule::new(GROUP, &["kafkaclusters"], READ),
            Rule::new(GROUP, &["kafkatopics"], &["get", "list", "watch", "patch"]),
            Rule::new(GROUP, &["kafkaclusters/status", "kafkatopics/status"], &["patch"]),
            Rule::new("apps", &["statefulsets"], OWN),
            Rule::new(CORE_GROUP, &["services", "configmaps"], OWN),
            Rule::new("policy", &["poddisruptionbudgets"], OWN),
            Rule::new(CORE_GROUP, &["pods"], &["get", "list", "watch", "delete"]),
            // Ready waits until the bootstrap Service lists a broker (`statecraft_shared::endpoints`).
            Rule::new("discovery.k8s.io", &["endpointslices"], &["list"]),
            Rule::new(CORE_GROUP, &["pods/status"], &["patch"]),
        ]
    }

    /// Only what a test shows: the e2e roll and reconfiguration (`e2e/tests/kafka.rs`) and the static checks of
    /// the CRDs, the Role, the Deployment and the sample objects (`sample_objects`). Kafka's own JMX metrics
    /// and the rest of issue 15 come with their tests.
    fn capabilities() -> Vec<&'static str> {
        vec![
            // Level 1: a cluster from its resource, Ready in status; documented CRDs; the
            // image overridable; the namespaced Role; the locked-down Deployment; pods
            // without privileges.
            "L1.install",
            "L1.crds",
            "L1.operand-image",
            "L1.rbac",
            "L1.operator-deployment",
            "L1.operand-security",
            // A cluster-wide dynamic key of the spec reaches every broker, without a restart,
            // and the status observes the new generation.
            "L1.config",
            // Level 2: a version upgrade (the previous release to the one built here) rolls
            // node by node, controllers first and the active one last, behind the quorum and
            // min-ISR gates, then finalizes metadata.version; the downgrade back is refused.
            "L2.operand-upgrade",
            "L2.rolling-restart",
            "L2.version-checks",
            // The current build adopts a cluster of the previous one (deploy/images/
            // previous-operator.ref) without restarting a node.
            "L2.operator-upgrade",
            "L2.adoption",
            // Level 3, what the builders guarantee: probes, resources passed through, a PDB
            // per pool, nodes spread over hosts.
            "L3.probes",
            "L3.resources",
            "L3.pdb",
            "L3.spread",
            // Level 4: the clusters' quorum, nodes, partition health and roll as metrics
            // (exported by the leader, checked in the e2e), alerts with runbooks
            // (deploy/kafka/prometheus-rules.yaml, docs/runbooks/kafka/), the dashboard.
            "L4.metrics",
            "L4.alerts",
            "L4.dashboard",
        ]
    }

    async fn run_controllers(runtime: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
        controller::run(runtime, shutdown).await
    }

    /// What the reconciler applies for [`SAMPLE`] (3 controllers, 3 brokers, no external
    /// listener): each pool's StatefulSet, PodDisruptionBudget and headless Service, the
    /// bootstrap Service and the ConfigMap.
    fn sample_objects() -> Result<Vec<serde_json::Value>> {
        use std::collections::BTreeMap;

        let cluster: KafkaCluster = parse_sample("operators/kafka/src/sample.yaml", SAMPLE)?;
        let valid = controller::reconcile::check(&cluster)?;
        let inputs = controller::reconcile::inputs(&cluster, &valid, &BTreeMap::new())?;
        let objects = build::objects(&cluster, &valid, &inputs)?;
        let mut out = Vec::new();
        for pool in &objects.pools {
            out.push(sample_object(&pool.statefulset)?);
            out.push(sample_object(&pool.pdb)?);
            out.push(sample_object(&pool.headless_service)?);
        }
        out.push(sample_object(&objects.bootstrap_service)?);
        out.push(sample_object(&objects.config_map)?);
        Ok(out)
    }
}

/// The sample KafkaCluster of [`KafkaOperator::sample_objects`] (3 controllers and 3
/// brokers with resources set, as in production).
pub const SAMPLE: &str = include_str!("sample.yaml");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use statecraft_shared::testing::crd::undescribed;

    fn crd_json<K: CustomResourceExt>() -> Value {
        serde_json::to_value(K::crd()).unwrap()
    }

    #[test]
    fn every_field_has_a_description() {
        for crd in [KafkaCluster::crd(), KafkaTopic::crd()] {
            let missing = undescribed(&crd);
            assert!(missing.is_empty(), "{}: no description: {missing:#?}", crd.metadata.name.unwrap_or_default());
        }
    }

    #[test]
    fn crd_names_printer_columns_and_status() {
        let columns = |crd: &Value| -> Vec<String> {
            crd["spec"]["versions"][0]["additionalPrinterColumns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let cluster = crd_json::<KafkaCluster>();
        assert_eq!(cluster["metadata"]["name"], "kafkaclusters.kafka.statecraft.io");
        assert_eq!(cluster["spec"]["names"]["shortNames"], serde_json::json!(["kfc"]));
        assert_eq!(
            columns(&cluster),
            ["Ready", "Phase", "Controllers", "Brokers", "Combined", "Active", "Version", "Bootstrap", "Age"]
        );
        let topic = crd_json::<KafkaTopic>();
        assert_eq!(topic["metadata"]["name"], "kafkatopics.kafka.statecraft.io");
        assert_eq!(topic["spec"]["names"]["shortNames"], serde_json::json!(["kft"]));
        assert_eq!(columns(&topic), ["Cluster", "Topic", "Partitions", "Replicas", "Ready", "Age"]);
        for crd in [cluster, topic] {
            assert!(crd["spec"]["versions"][0]["subresources"]["status"].is_object());
            assert_eq!(crd["spec"]["scope"], "Namespaced");
            assert_eq!(crd["spec"]["names"]["categories"], serde_json::json!(["statecraft"]));
        }
    }

    #[test]
    fn every_rule_message_names_its_field() {
        fn walk(node: &Value, out: &mut Vec<String>) {
            match node {
                Value::Object(map) => {
                    for rule in map.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
                        let text = rule.get("message").or_else(|| rule.get("messageExpression"));
                        out.push(text.and_then(Value::as_str).unwrap_or_default().to_owned());
                    }
                    map.values().for_each(|v| walk(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        for crd in KafkaOperator::crds() {
            let mut messages = Vec::new();
            walk(&serde_json::to_value(&crd).unwrap(), &mut messages);
            assert!(messages.len() >= 5, "{messages:?}");
            for message in messages {
                assert!(["spec.", "metadata.name", "storage.size"].iter().any(|f| message.contains(f)), "{message}");
            }
        }
    }
}
