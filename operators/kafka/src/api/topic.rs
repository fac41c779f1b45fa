//! `KafkaTopic`: a topic of a KafkaCluster in the same namespace. Doc comments of these types
//! are the `kubectl explain` descriptions, so they speak to the user and avoid rustdoc
//! links.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::MAX_CLUSTER_NAME;
use crate::validate::{MAX_TOPIC_NAME, config};

/// Desired state of a Kafka topic.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.statecraft.io",
    version = "v1alpha1",
    kind = "KafkaTopic",
    plural = "kafkatopics",
    singular = "kafkatopic",
    shortname = "kft",
    category = "statecraft",
    doc = "A Kafka topic of a KafkaCluster: partitions, replication factor and configuration, kept as declared by statecraft-kafka.",
    namespaced,
    status = "KafkaTopicStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Topic","type":"string","jsonPath":".status.topicName"}"#,
    printcolumn = r#"{"name":"Partitions","type":"integer","jsonPath":".spec.partitions"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicationFactor"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.clusterName == oldSelf.clusterName",
        "message": "spec.clusterName is immutable: create a KafkaTopic for the other cluster instead",
        "fieldPath": ".clusterName",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "has(self.topicName) == has(oldSelf.topicName) && (!has(self.topicName) || self.topicName == oldSelf.topicName)",
        "message": "spec.topicName is immutable: Kafka cannot rename a topic",
        "fieldPath": ".topicName",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "self.partitions >= oldSelf.partitions",
        "message": "spec.partitions may only grow: Kafka cannot remove partitions",
        "fieldPath": ".partitions",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "has(self.replicationFactor) == has(oldSelf.replicationFactor) && (!has(self.replicationFactor) || self.replicationFactor == oldSelf.replicationFactor)",
        "message": "spec.replicationFactor cannot change yet: it needs a partition reassignment, which is not implemented",
        "fieldPath": ".replicationFactor",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct KafkaTopicSpec {
    /// Name of the KafkaCluster, in this namespace, that has the topic. Immutable.
    #[schemars(length(min = 1, max = MAX_CLUSTER_NAME), pattern(r"^[a-z]([-a-z0-9]*[a-z0-9])?$"))]
    pub cluster_name: String,

    /// Name of the topic in Kafka, when it differs from this resource's name (Kafka allows
    /// letters, digits, `.`, `_`, `-` and capitals, which resource names do not). At most
    /// 249 characters, not `.` or `..`. Unset: the resource's name. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_TOPIC_NAME), pattern(r"^[a-zA-Z0-9._-]+$"))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self != '.' && self != '..'", "message": "spec.topicName must not be '.' or '..'"}
    ]))]
    pub topic_name: Option<String>,

    /// Number of partitions, 1 to 10000. It may grow (keyed records then map to other
    /// partitions) but never shrink.
    #[schemars(range(min = 1, max = 10000))]
    pub partitions: i32,

    /// Replicas of every partition, at most the number of brokers. Unset: the cluster's
    /// `defaultReplicationFactor`. Immutable for now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub replication_factor: Option<i32>,

    /// Topic configuration (Kafka's topic-level keys such as `retention.ms` or
    /// `cleanup.policy`). Keys not listed keep the value Kafka has. At most 256 keys, values
    /// up to 4096 characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = config::MAX_ENTRIES,
        "additionalProperties" = {"type": "string", "maxLength": config::MAX_VALUE_LENGTH},
        "x-kubernetes-validations" = config::key_rules("spec.config")
    ))]
    pub config: BTreeMap<String, String>,

    /// Who owns the topic once it exists: `Operator` (the default) applies the spec and
    /// corrects changes made outside it (fewer partitions than the spec, a listed config key
    /// changed); `Observe` creates the topic when it is missing and afterwards changes
    /// nothing, only reporting in `status.differences` how Kafka differs from the spec (for
    /// topics another tool manages, or while adopting one). Either way keys not listed in
    /// `config` are left alone.
    #[serde(default)]
    pub ownership: TopicOwnership,

    /// What deleting this resource does to the topic: `Retain` (the default) leaves it and
    /// its data in Kafka; `Delete` deletes it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// Who owns a topic once it exists.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum TopicOwnership {
    /// The operator applies the spec and corrects drift.
    #[default]
    Operator,
    /// The operator only reports differences.
    Observe,
}

/// What deleting a KafkaTopic does to the topic.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Keep the topic and its data.
    #[default]
    Retain,
    /// Delete the topic.
    Delete,
}

/// Observed state of a KafkaTopic.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KafkaTopicStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Standard conditions: Ready (the topic exists as the spec says), and InSync (false
    /// while `differences` is not empty).
    #[serde(default)]
    pub conditions: Vec<Condition>,

    /// The topic's name in Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,

    /// Kafka's topic id (a UUID, base64): a new id under the same name means the topic was
    /// deleted and created again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,

    /// Partitions the topic has in Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<i32>,

    /// Replicas per partition in Kafka (the largest, if they differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<i32>,

    /// How the topic in Kafka differs from the spec, as last observed. Empty: it does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<TopicDifference>,
}

/// One way a topic differs from its spec.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicDifference {
    /// The spec field, such as `spec.partitions` or `spec.config.retention.ms`.
    pub field: String,

    /// What the spec says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,

    /// What Kafka has (unset: the key is not set in Kafka).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
}
