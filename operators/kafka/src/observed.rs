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

impl Quorum {
    /// Whether every initial voter (`initial`: node id and directory id) has formatted its
    /// storage and joined: it is listed as a voter with the directory id it was formatted
    /// with, and it leads or the leader has heard a fetch from it (so its metadata log
    /// exists). Until then a controller without a metadata log may be one that never
    /// started (its pod not scheduled yet), which must still format as an initial voter.
    pub fn bootstrapped(&self, initial: &[(i32, String)]) -> bool {
        self.leader_id.is_some()
            && initial.iter().all(|(id, directory)| {
                self.voters.iter().any(|v| {
                    v.id == *id
                        && v.directory_id.as_ref() == Some(directory)
                        && (self.leader_id == Some(v.id) || v.last_fetch_timestamp.is_some())
                })
            })
    }
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

impl ConfigChange {
    /// The key changed.
    pub fn key(&self) -> &str {
        match self {
            ConfigChange::Set(key, _) | ConfigChange::Delete(key) => key,
        }
    }
}

/// The finalized feature levels and what the answering node supports (ApiVersions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// Finalized level per feature (`metadata.version`, `kraft.version`, ...).
    pub finalized: BTreeMap<String, i16>,
    /// Supported (min, max) per feature of the answering node.
    pub supported: BTreeMap<String, (i16, i16)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voter(id: i32, directory: &str, fetched: bool) -> QuorumReplica {
        QuorumReplica {
            id,
            directory_id: Some(directory.to_owned()),
            log_end_offset: if fetched { 10 } else { -1 },
            last_fetch_timestamp: fetched.then_some(1_700_000_000_000),
            last_caught_up_timestamp: None,
        }
    }

    fn initial() -> Vec<(i32, String)> {
        vec![(0, "d0".into()), (1, "d1".into()), (2, "d2".into())]
    }

    #[test]
    fn the_quorum_is_bootstrapped_once_every_initial_voter_was_heard_with_its_directory() {
        let mut quorum = Quorum {
            leader_id: Some(0),
            voters: vec![voter(0, "d0", false), voter(1, "d1", true), voter(2, "d2", true)],
            ..Quorum::default()
        };
        assert!(quorum.bootstrapped(&initial()), "the leader counts without a fetch of its own");
        quorum.voters[2] = voter(2, "d2", false);
        assert!(!quorum.bootstrapped(&initial()), "voter 2 never fetched: its pod may not have started");
        quorum.voters[2] = voter(2, "other", true);
        assert!(!quorum.bootstrapped(&initial()), "another directory: not the voter formatted as initial");
        quorum.voters.pop();
        assert!(!quorum.bootstrapped(&initial()), "voter 2 not listed");
        let quorum = Quorum { leader_id: None, ..quorum };
        assert!(!quorum.bootstrapped(&[]), "no leader, no quorum");
    }
}
