//! What the operator observes of a Kafka cluster through the admin client, as plain data: the
//! admin client ([`crate::admin`]) fills these in, the roll planner ([`crate::roll`]) and the
//! status read them. No I/O here, so the planner's tests build them by hand or generate them.

use std::collections::BTreeMap;

/// The metadata quorum, as DescribeQuorum answers it (asked of a controller directly, so it
/// is known while brokers are down).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quorum {
    /// The leader's node id (the active controller); `None` while there is none (Kafka
    /// answers -1 during an election).
    pub leader_id: Option<i32>,
    /// The leader's epoch.
    pub leader_epoch: i32,
    /// The high watermark of the metadata log.
    pub high_watermark: i64,
    /// The voters.
    pub voters: Vec<QuorumReplica>,
    /// The observers (brokers, controllers that are not voters).
    pub observers: Vec<QuorumReplica>,
}

/// One replica of the metadata log, as DescribeQuorum reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuorumReplica {
    /// Node id.
    pub id: i32,
    /// The replica's directory id (KIP-853), `None` when Kafka reports the zero uuid.
    pub directory_id: Option<String>,
    /// End offset of the replica's metadata log.
    pub log_end_offset: i64,
    /// When the leader last heard from it (ms since the epoch), `None` when unknown (-1).
    pub last_fetch_timestamp: Option<i64>,
    /// When it was last caught up with the leader (ms since the epoch), `None` when unknown.
    pub last_caught_up_timestamp: Option<i64>,
}

/// One broker registration, as DescribeCluster (with fenced brokers) reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Broker {
    /// Node id.
    pub id: i32,
    /// Advertised host of the listener the admin client used.
    pub host: String,
    /// Its port.
    pub port: i32,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
    /// Fenced: registered but not (yet, or no longer) serving.
    pub fenced: bool,
}

/// The cluster as DescribeCluster reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cluster {
    /// Kafka's cluster id.
    pub cluster_id: String,
    /// The controller id the answering node reports (in KRaft a random broker when asked of a
    /// broker, the active controller when asked of a controller).
    pub controller_id: Option<i32>,
    /// Every registered broker, fenced ones included.
    pub brokers: Vec<Broker>,
}

/// One partition, as Metadata reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub index: i32,
    /// Leader's node id, `None` when offline.
    pub leader: Option<i32>,
    /// Replicas' node ids, the preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas' node ids.
    pub isr: Vec<i32>,
}

/// One topic, as Metadata reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topic {
    /// Name.
    pub name: String,
    /// Kafka's topic id (base64 uuid, as Kafka prints it).
    pub id: String,
    /// Internal (`__consumer_offsets`, ...).
    pub internal: bool,
    /// Its partitions, by index.
    pub partitions: Vec<Partition>,
}

/// One configuration entry, as DescribeConfigs reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Value; `None` for a sensitive or unset one.
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Kafka refuses to change it at runtime.
    pub read_only: bool,
}

/// Where a configuration value comes from (Kafka's `ConfigSource`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConfigSource {
    /// A topic's own override.
    Topic,
    /// A per-broker dynamic override.
    DynamicBroker,
    /// The cluster-wide dynamic default (`BROKER ""`).
    DynamicDefaultBroker,
    /// The broker's server.properties.
    StaticBroker,
    /// Kafka's default.
    #[default]
    Default,
    /// Anything else Kafka reports (client metrics, groups, ...).
    Other,
}

/// A resource whose configuration is described or altered.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigResource {
    /// A topic, by name.
    Topic(String),
    /// One broker, by node id.
    Broker(i32),
    /// The cluster-wide default of every broker (`BROKER ""`).
    ClusterDefault,
}

/// Configuration of one resource, by key.
pub type Config = BTreeMap<String, ConfigEntry>;

/// One change of an IncrementalAlterConfigs call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Set `key` to the value.
    Set(String, String),
    /// Remove the override of `key` (back to the next source down).
    Delete(String),
}

/// The finalized feature levels and what the answering node supports (ApiVersions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// Finalized level per feature (`metadata.version`, `kraft.version`, ...).
    pub finalized: BTreeMap<String, i16>,
    /// Supported (min, max) per feature of the answering node.
    pub supported: BTreeMap<String, (i16, i16)>,
}
