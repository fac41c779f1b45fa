//! Topics: list them, or look one up, with their partitions (Metadata); create, grow and
//! delete them.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, Result, kafka_uuid};
use crate::observed::{Partition, Topic};

/// DeleteTopics names topics in `topics` (by name or id) from this version on, before in
/// `topic_names`.
const DELETE_BY_STATE: i16 = 6;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn ids(nodes: &[BrokerId]) -> Vec<i32> {
    nodes.iter().map(|n| n.0).collect()
}

impl Admin {
    /// Every topic, internal ones included, with its id and partitions (Metadata v10+).
    /// A topic Kafka reports with an error (say `LEADER_NOT_AVAILABLE` right after its
    /// creation) is listed with what it reported: offline leaders are `None`.
    pub async fn topics(&self) -> Result<Vec<Topic>> {
        // None: all topics.
        self.metadata(None).await
    }

    /// Topic `name` with its id and partitions, `None` when Kafka does not have it (the
    /// answering broker's metadata, which follows a creation within milliseconds).
    pub async fn topic(&self, name: &str) -> Result<Option<Topic>> {
        let mut request = MetadataRequestTopic::default();
        request.name = Some(topic_name(name));
        Ok(self.metadata(Some(vec![request])).await?.into_iter().next())
    }

    /// Metadata of `topics` (`None`: all), sorted by name, leaving out the topics Kafka
    /// reports unknown.
    async fn metadata(&self, topics: Option<Vec<MetadataRequestTopic>>) -> Result<Vec<Topic>> {
        let response = self
            .connection
            .call(|_| {
                let mut request = MetadataRequest::default();
                request.topics = topics;
                request.allow_auto_topic_creation = false;
                request
            })
            .await?;
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let mut topics: Vec<Topic> = response
            .topics
            .iter()
            .filter(|t| t.error_code != unknown)
            .filter_map(|t| {
                let name = t.name.as_ref()?.to_string();
                let mut partitions: Vec<Partition> = t
                    .partitions
                    .iter()
                    .map(|p| Partition {
                        topic: name.clone(),
                        index: p.partition_index,
                        leader: Some(p.leader_id.0).filter(|id| *id >= 0),
                        replicas: ids(&p.replica_nodes),
                        isr: ids(&p.isr_nodes),
                    })
                    .collect();
                partitions.sort_by_key(|p| p.index);
                Some(Topic {
                    id: kafka_uuid(t.topic_id.as_bytes()).unwrap_or_default(),
                    name,
                    internal: t.is_internal,
                    partitions,
                })
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// Creates topic `name` with `partitions` partitions of `replication_factor` replicas each
    /// and the topic configuration `configs`. An existing topic is `TOPIC_ALREADY_EXISTS`
    /// (see [`super::AdminError::code`]).
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<()> {
        let timeout_ms = self.connection.timeout_ms();
        let response = self
            .connection
            .call(|_| {
                let mut topic = CreatableTopic::default();
                topic.name = topic_name(name);
                topic.num_partitions = partitions;
                topic.replication_factor = replication_factor;
                topic.configs = configs
                    .iter()
                    .map(|(key, value)| {
                        let mut config = CreatableTopicConfig::default();
                        config.name = StrBytes::from_string(key.clone());
                        config.value = Some(StrBytes::from_string(value.clone()));
                        config
                    })
                    .collect();
                let mut request = CreateTopicsRequest::default();
                request.topics = vec![topic];
                request.timeout_ms = timeout_ms;
                request
            })
            .await?;
        for result in &response.topics {
            self.check(
                ApiKey::CreateTopics,
                || format!("topic {name}"),
                result.error_code,
                result.error_message.as_ref(),
            )?;
        }
        Ok(())
    }

    /// Grows topic `name` to `total` partitions (Kafka never shrinks one: a smaller count
    /// is `INVALID_PARTITIONS`).
    pub async fn create_partitions(&self, name: &str, total: i32) -> Result<()> {
        let timeout_ms = self.connection.timeout_ms();
        let response = self
            .connection
            .call(|_| {
                let mut topic = CreatePartitionsTopic::default();
                topic.name = topic_name(name);
                topic.count = total;
                topic.assignments = None;
                let mut request = CreatePartitionsRequest::default();
                request.topics = vec![topic];
                request.timeout_ms = timeout_ms;
                request
            })
            .await?;
        for result in &response.results {
            let subject = || format!("topic {name} to {total} partitions");
            self.check(ApiKey::CreatePartitions, subject, result.error_code, result.error_message.as_ref())?;
        }
        Ok(())
    }

    /// Deletes topic `name`. A topic that does not exist is already deleted: `Ok`, so that
    /// a retried deletion converges.
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        let timeout_ms = self.connection.timeout_ms();
        let response = self
            .connection
            .call(|version| {
                let mut request = DeleteTopicsRequest::default();
                if version >= DELETE_BY_STATE {
                    let mut topic = DeleteTopicState::default();
                    topic.name = Some(topic_name(name));
                    request.topics = vec![topic];
                } else {
                    request.topic_names = vec![topic_name(name)];
                }
                request.timeout_ms = timeout_ms;
                request
            })
            .await?;
        for result in &response.responses {
            if result.error_code == ResponseError::UnknownTopicOrPartition.code() {
                continue;
            }
            self.check(
                ApiKey::DeleteTopics,
                || format!("topic {name}"),
                result.error_code,
                result.error_message.as_ref(),
            )?;
        }
        Ok(())
    }
}
