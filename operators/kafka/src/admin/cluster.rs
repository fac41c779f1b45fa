//! The cluster as a whole: the metadata quorum (DescribeQuorum), the registered brokers
//! (DescribeCluster) and feature levels (UpdateFeatures).

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiKey, DescribeClusterRequest, DescribeQuorumRequest, TopicName, UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, AdminError, Result, kafka_uuid};
use crate::observed::{Broker, Cluster, Quorum, QuorumReplica};

/// The metadata log's topic: DescribeQuorum asks about its only partition.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// DescribeCluster's endpoint type for brokers (2 would list controllers).
const BROKER_ENDPOINTS: i8 = 1;
/// UpdateFeatures' upgrade type "upgrade" (never a downgrade, safe or unsafe).
const UPGRADE: i8 = 1;

impl Admin {
    /// The metadata quorum: leader, voters, observers, their log offsets and timestamps.
    /// Answered by the quorum leader (a broker forwards it there); a follower controller
    /// answers `NOT_LEADER_OR_FOLLOWER`.
    pub async fn describe_quorum(&self) -> Result<Quorum> {
        let response = self
            .connection
            .call(|_| {
                let mut partition = PartitionData::default();
                partition.partition_index = 0;
                let mut topic = TopicData::default();
                topic.topic_name = TopicName(StrBytes::from_static_str(METADATA_TOPIC));
                topic.partitions = vec![partition];
                let mut request = DescribeQuorumRequest::default();
                request.topics = vec![topic];
                request
            })
            .await?;
        let subject = || format!("{METADATA_TOPIC}-0");
        self.check(ApiKey::DescribeQuorum, subject, response.error_code, response.error_message.as_ref())?;
        let partition = response
            .topics
            .iter()
            .filter(|t| t.topic_name.as_str() == METADATA_TOPIC)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == 0)
            .ok_or_else(|| AdminError::Protocol {
                address: self.address().to_owned(),
                api: ApiKey::DescribeQuorum,
                detail: format!("no {METADATA_TOPIC}-0 in the answer"),
            })?;
        self.check(ApiKey::DescribeQuorum, subject, partition.error_code, partition.error_message.as_ref())?;
        Ok(Quorum {
            leader_id: Some(partition.leader_id.0).filter(|id| *id >= 0),
            leader_epoch: partition.leader_epoch,
            high_watermark: partition.high_watermark,
            voters: partition.current_voters.iter().map(replica).collect(),
            observers: partition.observers.iter().map(replica).collect(),
        })
    }

    /// Every registered broker, fenced ones included (DescribeCluster v2+), with the
    /// endpoint of the listener this client used. Ask a broker: controllers list controllers.
    pub async fn describe_cluster(&self) -> Result<Cluster> {
        let response = self
            .connection
            .call(|_| {
                let mut request = DescribeClusterRequest::default();
                request.endpoint_type = BROKER_ENDPOINTS;
                request.include_fenced_brokers = true;
                request
            })
            .await?;
        self.check(ApiKey::DescribeCluster, || "brokers".into(), response.error_code, response.error_message.as_ref())?;
        Ok(Cluster {
            cluster_id: response.cluster_id.to_string(),
            controller_id: Some(response.controller_id.0).filter(|id| *id >= 0),
            brokers: response
                .brokers
                .iter()
                .map(|b| Broker {
                    id: b.broker_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(ToString::to_string),
                    fenced: b.is_fenced,
                })
                .collect(),
        })
    }

    /// Raises the finalized level of feature `name` (`metadata.version`, ...) to `level`.
    /// Kafka accepts the current level as a no-op, and refuses a downgrade: this client never
    /// asks for one.
    pub async fn update_feature(&self, name: &str, level: i16) -> Result<()> {
        let timeout_ms = self.connection.timeout_ms();
        let response = self
            .connection
            .call(|_| {
                let mut update = FeatureUpdateKey::default();
                update.feature = StrBytes::from_string(name.to_owned());
                update.max_version_level = level;
                update.upgrade_type = UPGRADE;
                let mut request = UpdateFeaturesRequest::default();
                request.timeout_ms = timeout_ms;
                request.feature_updates = vec![update];
                request
            })
            .await?;
        let subject = || format!("{name}={level}");
        self.check(ApiKey::UpdateFeatures, subject, response.error_code, response.error_message.as_ref())?;
        for result in &response.results {
            self.check(ApiKey::UpdateFeatures, subject, result.error_code, result.error_message.as_ref())?;
        }
        Ok(())
    }
}

fn replica(state: &ReplicaState) -> QuorumReplica {
    QuorumReplica {
        id: state.replica_id.0,
        directory_id: kafka_uuid(state.replica_directory_id.as_bytes()),
        log_end_offset: state.log_end_offset,
        last_fetch_timestamp: Some(state.last_fetch_timestamp).filter(|t| *t >= 0),
        last_caught_up_timestamp: Some(state.last_caught_up_timestamp).filter(|t| *t >= 0),
    }
}
