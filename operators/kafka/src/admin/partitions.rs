//! Partition leadership and movement: preferred leader elections (ElectLeaders) and the
//! reassignments under way (ListPartitionReassignments).

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ListPartitionReassignmentsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, Result};

/// ElectLeaders' election type "preferred" (the first replica leads again).
const PREFERRED: i8 = 0;

impl Admin {
    /// Moves leadership of `partitions` (topic, index) back to their preferred replica; `None`
    /// asks it for every partition. A partition already led by its preferred replica
    /// (`ELECTION_NOT_NEEDED`) is a success; the first other failure is the error.
    pub async fn elect_preferred_leaders(&self, partitions: Option<&[(String, i32)]>) -> Result<()> {
        let timeout_ms = self.connection.timeout_ms();
        let response = self
            .connection
            .call(|_| {
                let mut request = ElectLeadersRequest::default();
                request.election_type = PREFERRED;
                request.timeout_ms = timeout_ms;
                request.topic_partitions = partitions.map(|partitions| {
                    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    for (topic, index) in partitions {
                        by_topic.entry(topic).or_default().push(*index);
                    }
                    by_topic
                        .into_iter()
                        .map(|(topic, indexes)| {
                            let mut t = TopicPartitions::default();
                            t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
                            t.partitions = indexes;
                            t
                        })
                        .collect()
                });
                request
            })
            .await?;
        self.check(ApiKey::ElectLeaders, || "preferred leaders".into(), response.error_code, None)?;
        for topic in &response.replica_election_results {
            for p in &topic.partition_result {
                if p.error_code == ResponseError::ElectionNotNeeded.code() {
                    continue;
                }
                let subject = || format!("partition {}-{}", topic.topic.as_str(), p.partition_id);
                self.check(ApiKey::ElectLeaders, subject, p.error_code, p.error_message.as_ref())?;
            }
        }
        Ok(())
    }

    /// How many partitions are being reassigned now (a roll waits for none).
    pub async fn ongoing_reassignments(&self) -> Result<usize> {
        let timeout_ms = self.connection.timeout_ms();
        let response = self
            .connection
            .call(|_| {
                let mut request = ListPartitionReassignmentsRequest::default();
                request.timeout_ms = timeout_ms;
                // None: every topic.
                request.topics = None;
                request
            })
            .await?;
        self.check(
            ApiKey::ListPartitionReassignments,
            || "all topics".into(),
            response.error_code,
            response.error_message.as_ref(),
        )?;
        Ok(response.topics.iter().map(|t| t.partitions.len()).sum())
    }
}
