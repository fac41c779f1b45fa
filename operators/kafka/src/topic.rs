//! What a KafkaTopic asks of Kafka, pure: how the topic Kafka has differs from the spec
//! ([`differences`]) and what the operator changes about it ([`plan`]). The topic controller
//! ([`crate::controller::topic`]) observes, plans, acts and reports; nothing here does I/O.
//!
//! Only what the spec lists is compared: a config key the spec does not name keeps whatever
//! Kafka has, so a key another tool (or a person with `kafka-configs.sh`) sets is never
//! undone. Partitions only grow, and a replication factor is never changed (that needs a
//! reassignment): such differences are reported, not acted on.
//!
//! Several KafkaTopics may name one topic of one cluster; only the first ([`claimant`])
//! acts on it, and none deletes it while another still names it ([`also_named_by`]).
//! Otherwise two specs would undo each other's changes, and deleting one resource with
//! `deletionPolicy: Delete` would take the records the other one still asks for.

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::{KafkaTopic, KafkaTopicSpec, TopicDifference, TopicOwnership};
use crate::observed::{Config, ConfigChange, Topic};

/// CreateTopics' replication factor meaning "the brokers' `default.replication.factor`",
/// which the operator sets from the cluster's `defaultReplicationFactor`.
pub const DEFAULT_REPLICATION_FACTOR: i16 = -1;

/// A topic as Kafka has it: its partitions (Metadata) and its configuration
/// (DescribeConfigs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// Name, id and partitions.
    pub topic: Topic,
    /// Every key Kafka reports for the topic, defaults included.
    pub config: Config,
}

impl Found {
    /// Number of partitions.
    pub fn partitions(&self) -> i32 {
        i32::try_from(self.topic.partitions.len()).unwrap_or(i32::MAX)
    }

    /// Replicas per partition (the largest, if they differ); `None` without partitions.
    pub fn replication_factor(&self) -> Option<i32> {
        self.topic.partitions.iter().map(|p| i32::try_from(p.replicas.len()).unwrap_or(i32::MAX)).max()
    }
}

/// What the operator does to the topic this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The topic does not exist: create it as the spec says.
    Create {
        /// Partitions.
        partitions: i32,
        /// Replicas per partition, or [`DEFAULT_REPLICATION_FACTOR`].
        replication_factor: i16,
        /// The spec's topic configuration.
        config: BTreeMap<String, String>,
    },
    /// The topic exists: grow it and set config keys, or nothing (both empty).
    Update {
        /// Grow to this many partitions.
        grow_to: Option<i32>,
        /// Config keys to set.
        config: Vec<ConfigChange>,
    },
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        matches!(self, Plan::Update { grow_to: None, config } if config.is_empty())
    }
}

/// How `found` differs from `spec`, in the order of the spec's fields.
pub fn differences(spec: &KafkaTopicSpec, found: &Found) -> Vec<TopicDifference> {
    let mut out = Vec::new();
    let partitions = found.partitions();
    if partitions != spec.partitions {
        out.push(difference("spec.partitions", Some(spec.partitions.to_string()), Some(partitions.to_string())));
    }
    if let Some(desired) = spec.replication_factor {
        let actual = found.replication_factor();
        if actual != Some(desired) {
            out.push(difference("spec.replicationFactor", Some(desired.to_string()), actual.map(|a| a.to_string())));
        }
    }
    for (key, desired) in &spec.config {
        let actual = found.config.get(key).and_then(|e| e.value.clone());
        if actual.as_ref() != Some(desired) {
            out.push(difference(&format!("spec.config.{key}"), Some(desired.clone()), actual));
        }
    }
    out
}

fn difference(field: &str, desired: Option<String>, actual: Option<String>) -> TopicDifference {
    TopicDifference { field: field.to_owned(), desired, actual }
}

/// What to change this pass: create a missing topic (whatever the ownership: `Observe`
/// creates too); for an existing one owned by the operator, grow it to the spec's partitions
/// and set every listed config key that differs. Never shrinks, never deletes a key, never
/// touches the replication factor.
pub fn plan(spec: &KafkaTopicSpec, found: Option<&Found>) -> Plan {
    let Some(found) = found else {
        return Plan::Create {
            partitions: spec.partitions,
            replication_factor: spec
                .replication_factor
                .and_then(|rf| i16::try_from(rf).ok())
                .unwrap_or(DEFAULT_REPLICATION_FACTOR),
            config: spec.config.clone(),
        };
    };
    if spec.ownership == TopicOwnership::Observe {
        return Plan::Update { grow_to: None, config: Vec::new() };
    }
    let grow_to = Some(spec.partitions).filter(|&p| p > found.partitions());
    let config = spec
        .config
        .iter()
        .filter(|(key, desired)| found.config.get(*key).and_then(|e| e.value.as_ref()) != Some(*desired))
        .map(|(key, desired)| ConfigChange::Set(key.clone(), desired.clone()))
        .collect();
    Plan::Update { grow_to, config }
}

/// The name of the topic in Kafka: `spec.topicName`, or the resource's name.
pub fn kafka_name(topic: &KafkaTopic) -> String {
    topic.spec.topic_name.clone().unwrap_or_else(|| topic.name_any())
}

/// Whether `a` and `b` name the same topic of the same cluster.
fn same_topic(a: &KafkaTopic, b: &KafkaTopic) -> bool {
    a.spec.cluster_name == b.spec.cluster_name && kafka_name(a) == kafka_name(b)
}

/// Of the KafkaTopics in `topics` (those of `topic`'s namespace) that name the same topic
/// of the same cluster as `topic`, the one that acts on it: the oldest, then the first by
/// resource name (creation times are whole seconds). `topic` itself when it is the only
/// one, or when `topics` does not hold it yet. Being deleted does not give up a claim:
/// the next one takes over once the resource is gone.
pub fn claimant<'a>(topic: &'a KafkaTopic, topics: impl IntoIterator<Item = &'a KafkaTopic>) -> &'a KafkaTopic {
    let order = |t: &KafkaTopic| (t.metadata.creation_timestamp.as_ref().map(|c| c.0), t.name_any());
    topics.into_iter().filter(|t| same_topic(t, topic)).chain([topic]).min_by_key(|t| order(t)).unwrap_or(topic)
}

/// Another KafkaTopic in `topics`, not being deleted, that names the same topic of the
/// same cluster as `topic`: while there is one, deleting `topic` leaves the topic in Kafka.
pub fn also_named_by<'a>(
    topic: &KafkaTopic,
    topics: impl IntoIterator<Item = &'a KafkaTopic>,
) -> Option<&'a KafkaTopic> {
    topics
        .into_iter()
        .find(|t| t.uid() != topic.uid() && t.metadata.deletion_timestamp.is_none() && same_topic(t, topic))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::api::DeletionPolicy;
    use crate::observed::{ConfigEntry, ConfigSource, Partition};

    fn spec(partitions: i32, config: &[(&str, &str)]) -> KafkaTopicSpec {
        KafkaTopicSpec {
            cluster_name: "events".into(),
            topic_name: None,
            partitions,
            replication_factor: None,
            config: config.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ownership: TopicOwnership::Operator,
            deletion_policy: DeletionPolicy::Retain,
        }
    }

    fn found(partitions: usize, replicas: usize, config: &[(&str, &str)]) -> Found {
        Found {
            topic: Topic {
                name: "orders".into(),
                id: "id".into(),
                internal: false,
                partitions: (0..partitions)
                    .map(|i| Partition {
                        topic: "orders".into(),
                        index: i32::try_from(i).unwrap(),
                        leader: Some(100),
                        replicas: (100..).take(replicas).collect(),
                        isr: (100..).take(replicas).collect(),
                    })
                    .collect(),
            },
            config: config
                .iter()
                .map(|(k, v)| {
                    let entry =
                        ConfigEntry { value: Some((*v).to_owned()), source: ConfigSource::Topic, read_only: false };
                    ((*k).to_owned(), entry)
                })
                .collect(),
        }
    }

    #[test]
    fn a_missing_topic_is_created_as_the_spec_says_even_when_only_observed() {
        let mut s = spec(6, &[("retention.ms", "60000")]);
        let expected =
            Plan::Create { partitions: 6, replication_factor: DEFAULT_REPLICATION_FACTOR, config: s.config.clone() };
        assert_eq!(plan(&s, None), expected);
        s.ownership = TopicOwnership::Observe;
        assert_eq!(plan(&s, None), expected);
        s.replication_factor = Some(3);
        assert!(matches!(plan(&s, None), Plan::Create { replication_factor: 3, .. }));
    }

    #[test]
    fn an_owned_topic_grows_and_gets_its_listed_keys_back_and_nothing_else() {
        let s = spec(6, &[("retention.ms", "60000"), ("cleanup.policy", "delete")]);
        // Changed outside: retention.ms; a key the spec does not list (segment.ms) is left.
        let f = found(3, 3, &[("retention.ms", "1000"), ("cleanup.policy", "delete"), ("segment.ms", "5")]);
        assert_eq!(
            plan(&s, Some(&f)),
            Plan::Update { grow_to: Some(6), config: vec![ConfigChange::Set("retention.ms".into(), "60000".into())] }
        );
        assert_eq!(
            differences(&s, &f),
            vec![
                difference("spec.partitions", Some("6".into()), Some("3".into())),
                difference("spec.config.retention.ms", Some("60000".into()), Some("1000".into())),
            ]
        );
    }

    #[test]
    fn an_observed_topic_is_reported_and_left_alone() {
        let mut s = spec(6, &[("retention.ms", "60000")]);
        s.ownership = TopicOwnership::Observe;
        let f = found(3, 3, &[("retention.ms", "1000")]);
        assert!(plan(&s, Some(&f)).is_empty());
        assert_eq!(differences(&s, &f).len(), 2);
    }

    #[test]
    fn more_partitions_than_the_spec_and_another_replication_factor_are_reported_not_fixed() {
        let mut s = spec(3, &[]);
        s.replication_factor = Some(3);
        let f = found(6, 2, &[]);
        assert!(plan(&s, Some(&f)).is_empty());
        assert_eq!(
            differences(&s, &f),
            vec![
                difference("spec.partitions", Some("3".into()), Some("6".into())),
                difference("spec.replicationFactor", Some("3".into()), Some("2".into())),
            ]
        );
    }

    #[test]
    fn a_key_kafka_does_not_report_differs_as_unset() {
        let s = spec(1, &[("no.such.key", "1")]);
        let f = found(1, 1, &[]);
        assert_eq!(differences(&s, &f), vec![difference("spec.config.no.such.key", Some("1".into()), None)]);
        assert_eq!(
            plan(&s, Some(&f)),
            Plan::Update { grow_to: None, config: vec![ConfigChange::Set("no.such.key".into(), "1".into())] }
        );
    }

    /// KafkaTopic `name` of `cluster`, created at second `created`, naming `topic_name`.
    fn resource(name: &str, cluster: &str, topic_name: Option<&str>, created: u32, deleting: bool) -> KafkaTopic {
        let mut metadata = serde_json::json!({
            "name": name, "uid": format!("uid-{name}"),
            "creationTimestamp": format!("2026-12-04T10:00:{created:02}Z"),
        });
        if deleting {
            metadata["deletionTimestamp"] = "2026-12-04T11:00:00Z".into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kafka.statecraft.io/v1alpha1", "kind": "KafkaTopic", "metadata": metadata,
            "spec": {"clusterName": cluster, "topicName": topic_name, "partitions": 1},
        }))
        .unwrap()
    }

    #[test]
    fn the_oldest_of_the_resources_naming_a_topic_acts_on_it_then_the_first_by_name() {
        let orders = resource("orders", "events", None, 5, false);
        let again = resource("orders-again", "events", Some("orders"), 3, false);
        let tie = resource("a-orders", "events", Some("orders"), 3, false);
        let other_cluster = resource("orders-other", "audit", Some("orders"), 1, false);
        let other_topic = resource("payments", "events", None, 0, false);
        let all = [&orders, &again, &tie, &other_cluster, &other_topic];
        assert_eq!(claimant(&orders, all).name_any(), "a-orders");
        assert_eq!(claimant(&again, all).name_any(), "a-orders");
        assert_eq!(claimant(&other_cluster, all).name_any(), "orders-other", "another cluster's topic");
        assert_eq!(claimant(&other_topic, all).name_any(), "payments");
        assert_eq!(claimant(&orders, [&orders, &other_topic]).name_any(), "orders", "alone");
        assert_eq!(claimant(&orders, []).name_any(), "orders", "not in the cache yet");
        // A claim holds while its resource is being deleted.
        let deleting = resource("first", "events", Some("orders"), 0, true);
        assert_eq!(claimant(&orders, [&orders, &deleting]).name_any(), "first");
    }

    #[test]
    fn a_topic_another_resource_still_names_is_not_deleted_with_this_one() {
        let orders = resource("orders", "events", None, 5, true);
        let again = resource("orders-again", "events", Some("orders"), 7, false);
        let gone_too = resource("orders-gone", "events", Some("orders"), 8, true);
        let other_cluster = resource("orders-other", "audit", Some("orders"), 1, false);
        assert_eq!(also_named_by(&orders, [&orders, &again]).map(|t| t.name_any()).as_deref(), Some("orders-again"));
        assert!(also_named_by(&orders, [&orders, &gone_too, &other_cluster]).is_none());
        assert!(also_named_by(&orders, [&orders]).is_none(), "itself does not count");
    }

    proptest! {
        /// Whatever Kafka has: an owned topic's plan is empty exactly when nothing it may
        /// fix differs, it never shrinks, and every key it sets is a listed one that differs.
        #[test]
        fn the_plan_fixes_exactly_the_fixable_differences(
            desired in 1i32..8,
            actual in 1usize..8,
            keys in proptest::collection::btree_map("[a-c]", "[0-2]", 0..3),
            have in proptest::collection::btree_map("[a-d]", "[0-2]", 0..4),
        ) {
            let mut s = spec(desired, &[]);
            s.config = keys;
            let pairs: Vec<(&str, &str)> = have.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let f = found(actual, 1, &pairs);
            let diffs = differences(&s, &f);
            let Plan::Update { grow_to, config } = plan(&s, Some(&f)) else { panic!("an existing topic is not created") };
            prop_assert!(grow_to.is_none_or(|p| p == desired && p > f.partitions()));
            let fixable = diffs.iter().filter(|d| d.field != "spec.partitions" || desired > f.partitions()).count();
            prop_assert_eq!(fixable, config.len() + usize::from(grow_to.is_some()));
            for change in &config {
                let ConfigChange::Set(key, value) = change else { panic!("a key is deleted") };
                prop_assert_eq!(s.config.get(key), Some(value));
                let field = format!("spec.config.{key}");
                prop_assert!(diffs.iter().any(|d| d.field == field), "{} is set but does not differ", field);
            }
        }
    }
}
