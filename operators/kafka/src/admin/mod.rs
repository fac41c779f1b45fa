//! The admin client: one small async Kafka client on the `kafka-protocol` codecs, plaintext,
//! talking to one node (a broker, or a controller's listener for what controllers serve,
//! KIP-919). It fills the plain types of [`crate::observed`].
//!
//! Why not a full Kafka client: the operator needs a dozen admin calls, no producing or
//! consuming, and must keep working when most of the cluster is down — so it asks exactly the
//! node it means to ask and never hides a routing decision. Every call takes `&self` (the
//! connection sits behind a mutex, one request in flight) and gives up after the time-out
//! given to [`Admin::connect`].
//!
//! - [`connection`]: framing, correlation ids, header versions, version negotiation.
//! - [`cluster`]: DescribeQuorum, DescribeCluster, UpdateFeatures.
//! - [`topics`]: Metadata, CreateTopics, CreatePartitions, DeleteTopics.
//! - [`configs`]: DescribeConfigs, IncrementalAlterConfigs.
//! - [`partitions`]: ElectLeaders, ListPartitionReassignments.
//! - [`error`]: [`AdminError`], what is worth retrying, Kafka's error code names.
//!
//! Where a request must go: brokers forward what the controller decides (CreateTopics,
//! IncrementalAlterConfigs, UpdateFeatures, ElectLeaders, ...), so any broker serves them.
//! DescribeQuorum is answered by the quorum's leader only: a broker forwards it there, a
//! follower controller answers `NOT_LEADER_OR_FOLLOWER` (transient; ask another controller).
//! DescribeConfigs of [`ConfigResource::Broker`] must be asked of that broker.
//!
//! [`ConfigResource::Broker`]: crate::observed::ConfigResource::Broker

mod cluster;
mod configs;
mod connection;
mod error;
mod partitions;
mod topics;

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;

pub use error::{AdminError, code_name};

use crate::observed::Features;
use connection::Connection;

/// Results of the admin client.
pub type Result<T, E = AdminError> = std::result::Result<T, E>;

/// A client of one Kafka node; see the module documentation.
pub struct Admin {
    connection: Connection,
}

impl Admin {
    /// Connects to `address` (`host:port`, plaintext) and negotiates API versions with
    /// ApiVersions. `timeout` bounds the connect and every later request.
    pub async fn connect(address: &str, timeout: Duration) -> Result<Admin> {
        Ok(Admin { connection: Connection::open(address, timeout).await? })
    }

    /// The address this client talks to.
    pub fn address(&self) -> &str {
        self.connection.address()
    }

    /// The finalized feature levels (`metadata.version`, `kraft.version`, ...) and the
    /// supported ranges of the node, asked anew (ApiVersions).
    pub async fn features(&self) -> Result<Features> {
        self.connection.features().await
    }

    /// The version of `api` this client sends to this node, or why there is none.
    pub async fn api_version(&self, api: ApiKey) -> Result<i16> {
        use kafka_protocol::messages as m;
        let c = &self.connection;
        match api {
            ApiKey::ApiVersions => c.version::<m::ApiVersionsRequest>().await,
            ApiKey::DescribeQuorum => c.version::<m::DescribeQuorumRequest>().await,
            ApiKey::DescribeCluster => c.version::<m::DescribeClusterRequest>().await,
            ApiKey::Metadata => c.version::<m::MetadataRequest>().await,
            ApiKey::DescribeConfigs => c.version::<m::DescribeConfigsRequest>().await,
            ApiKey::IncrementalAlterConfigs => c.version::<m::IncrementalAlterConfigsRequest>().await,
            ApiKey::ElectLeaders => c.version::<m::ElectLeadersRequest>().await,
            ApiKey::UpdateFeatures => c.version::<m::UpdateFeaturesRequest>().await,
            ApiKey::ListPartitionReassignments => c.version::<m::ListPartitionReassignmentsRequest>().await,
            ApiKey::CreateTopics => c.version::<m::CreateTopicsRequest>().await,
            ApiKey::CreatePartitions => c.version::<m::CreatePartitionsRequest>().await,
            ApiKey::DeleteTopics => c.version::<m::DeleteTopicsRequest>().await,
            other => Err(AdminError::Unsupported {
                address: self.address().to_owned(),
                api: other,
                detail: "this client does not send it".into(),
            }),
        }
    }

    /// `Ok` for error code 0, else the error naming `api` and `subject`.
    fn check(
        &self,
        api: ApiKey,
        subject: impl FnOnce() -> String,
        code: i16,
        message: Option<&StrBytes>,
    ) -> Result<()> {
        match ResponseError::try_from_code(code) {
            None => Ok(()),
            Some(code) => Err(self.kafka_error(api, subject(), code, message)),
        }
    }

    fn kafka_error(&self, api: ApiKey, subject: String, code: ResponseError, message: Option<&StrBytes>) -> AdminError {
        AdminError::Kafka {
            address: self.address().to_owned(),
            api,
            subject,
            code,
            message: message.map(|m| m.to_string()).filter(|m| !m.is_empty()),
        }
    }
}

/// A Kafka uuid as Kafka prints it (`Uuid.toString`): its 16 bytes in URL-safe base64
/// without padding; `None` for the zero uuid, which Kafka uses for "none".
fn kafka_uuid(bytes: &[u8; 16]) -> Option<String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    if bytes.iter().all(|b| *b == 0) {
        return None;
    }
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        // 3 bytes give 4 characters, the final single byte 2.
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_print_as_kafka_prints_them() {
        assert_eq!(kafka_uuid(&[0; 16]), None);
        // Kafka's METADATA_TOPIC_ID is Uuid(0, 1): "AAAAAAAAAAAAAAAAAAAAAQ".
        let mut one = [0; 16];
        one[15] = 1;
        assert_eq!(kafka_uuid(&one).as_deref(), Some("AAAAAAAAAAAAAAAAAAAAAQ"));
        // URL-safe alphabet, no padding.
        assert_eq!(kafka_uuid(&[0xff; 16]).as_deref(), Some("_____________________w"));
        let bytes: [u8; 16] = [0xfb, 0xef, 0xbe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
        assert_eq!(kafka_uuid(&bytes).as_deref(), Some("----AQIDBAUGBwgJCgsMDQ"));
    }
}
