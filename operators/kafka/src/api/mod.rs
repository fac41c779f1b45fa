//! The custom resources of `kafka.statecraft.io/v1alpha1`.

pub mod cluster;
pub mod topic;

pub use cluster::{
    AdvertisedAddress, BrokerPool, CombinedPool, ControllerPool, ExternalListener, ExternalListenerType,
    InternalListener, KafkaCluster, KafkaClusterSpec, KafkaClusterStatus, Listeners, MetadataVersionPolicy, NodeRole,
    NodeStatus, QuorumReplica, QuorumStatus, Storage,
};
pub use topic::{DeletionPolicy, KafkaTopic, KafkaTopicSpec, KafkaTopicStatus, TopicDifference, TopicOwnership};

/// API group of every resource.
pub const GROUP: &str = "kafka.statecraft.io";
