//! What the CRD schema and its CEL rules cannot check, or check only for objects created
//! since the rules exist, as pure functions: the supported Kafka versions, the node pools,
//! the storage sizes, the replication settings against the broker count, the broker
//! configuration keys the operator owns, topic names. Every error names the field
//! (`Error::InvalidSpec`).

use std::collections::BTreeMap;

use statecraft_shared::deploy::operand_image;
use statecraft_shared::names::check_cluster_name;
use statecraft_shared::quantity;
pub use statecraft_shared::version::Version;
use statecraft_shared::version::check_supported;
use statecraft_shared::{Error, Result};

use crate::api::cluster::MAX_BROKERS;
use crate::api::{KafkaClusterSpec, KafkaTopicSpec, Storage};
use crate::names::MAX_CLUSTER_NAME;

/// Release series the operator supports, oldest first. Add a series here (and build its
/// image) to support it. 4.3 is the series the upgrade e2e starts from (`KAFKA_PREVIOUS_IMAGE`).
pub const SUPPORTED_SERIES: &[(u32, u32)] = &[(4, 3), (4, 4)];

/// The repository of the official Kafka image.
const REPOSITORY: &str = "docker.io/apache/kafka";

/// Kafka's longest topic name: 249 characters, so that a partition's directory name
/// (`<topic>-<partition>`) and its `-delete` and `-future` renames fit a 255-byte file name.
pub const MAX_TOPIC_NAME: usize = 249;

/// Replication factor when the spec leaves it unset (and the broker count allows it): with
/// three replicas and the default min ISR of 2, a broker down for a roll leaves every
/// partition writable.
const DEFAULT_REPLICATION_FACTOR: i32 = 3;

/// Parses a Kafka version: `MAJOR.MINOR.PATCH`, as the image tags are.
pub fn parse_version(s: &str) -> Option<Version> {
    Version::parse(s).and_then(Version::require_patch)
}

/// The default image of `version`: `KAFKA_IMAGE` of images.env when it is that version (as
/// built here), else the official repository tagged `<version>`.
pub fn default_image(version: &Version) -> String {
    operand_image("KAFKA_IMAGE", REPOSITORY, &version.to_string())
}

/// How a valid cluster's nodes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Separate pools of controllers and brokers.
    Separate {
        /// Number of controllers (voters).
        controllers: i32,
        /// Number of brokers.
        brokers: i32,
    },
    /// One pool of nodes that are both.
    Combined {
        /// Number of nodes.
        nodes: i32,
    },
}

impl Layout {
    /// Nodes that are brokers.
    pub fn brokers(&self) -> i32 {
        match *self {
            Layout::Separate { brokers, .. } => brokers,
            Layout::Combined { nodes } => nodes,
        }
    }
}

/// A cluster spec that passed validation, with what was derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidCluster {
    /// The spec as given.
    pub spec: KafkaClusterSpec,
    /// Its version.
    pub version: Version,
    /// The image the nodes run.
    pub image: String,
    /// The pools.
    pub layout: Layout,
    /// `default.replication.factor` (and of the internal topics).
    pub replication_factor: i32,
    /// `min.insync.replicas`.
    pub min_insync_replicas: i32,
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::invalid_spec(field, message)
}

/// Validates a cluster spec.
pub fn validate(spec: &KafkaClusterSpec) -> Result<ValidCluster> {
    let version = parse_version(&spec.version)
        .ok_or_else(|| invalid("spec.version", format!("{:?} is not MAJOR.MINOR.PATCH", spec.version)))?;
    check_supported("spec.version", "Kafka", &version, SUPPORTED_SERIES)?;
    let layout = layout(spec)?;
    let brokers = layout.brokers();
    let replication_factor = match spec.default_replication_factor {
        Some(rf) if rf < 1 || rf > brokers => {
            return Err(invalid(
                "spec.defaultReplicationFactor",
                format!("{rf} must be between 1 and the number of brokers, {brokers}"),
            ));
        }
        Some(rf) => rf,
        None => DEFAULT_REPLICATION_FACTOR.min(brokers),
    };
    let min_insync_replicas = match spec.min_insync_replicas {
        Some(min) if min < 1 || min > replication_factor => {
            return Err(invalid(
                "spec.minInsyncReplicas",
                format!("{min} must be between 1 and the replication factor, {replication_factor}"),
            ));
        }
        Some(min) => min,
        None => (replication_factor - 1).max(1),
    };
    check_listeners(spec, brokers)?;
    check_config("spec.config", &spec.config)?;
    if let Some((key, why)) = spec.config.keys().find_map(|k| refusal(k).map(|why| (k, why))) {
        return Err(invalid(&format!("spec.config.{key}"), format!("is refused: {why}")));
    }
    let image = spec.image.clone().unwrap_or_else(|| default_image(&version));
    Ok(ValidCluster { spec: spec.clone(), version, image, layout, replication_factor, min_insync_replicas })
}

/// The pools: either `combined`, or `controllers` and `brokers`; sizes and storage checked.
fn layout(spec: &KafkaClusterSpec) -> Result<Layout> {
    match (&spec.controllers, &spec.brokers, &spec.combined) {
        (None, None, Some(combined)) => {
            check_voters("spec.combined.replicas", combined.replicas)?;
            check_storage("spec.combined.storage", &combined.storage)?;
            check_rack_label("spec.combined.rackLabel", combined.rack_label.as_deref())?;
            Ok(Layout::Combined { nodes: combined.replicas })
        }
        (Some(controllers), Some(brokers), None) => {
            check_voters("spec.controllers.replicas", controllers.replicas)?;
            check_storage("spec.controllers.storage", &controllers.storage)?;
            if !(1..=MAX_BROKERS).contains(&brokers.replicas) {
                return Err(invalid(
                    "spec.brokers.replicas",
                    format!("must be between 1 and {MAX_BROKERS}, not {}", brokers.replicas),
                ));
            }
            check_storage("spec.brokers.storage", &brokers.storage)?;
            check_rack_label("spec.brokers.rackLabel", brokers.rack_label.as_deref())?;
            Ok(Layout::Separate { controllers: controllers.replicas, brokers: brokers.replicas })
        }
        (_, _, Some(_)) => Err(invalid("spec.combined", "excludes spec.controllers and spec.brokers")),
        (None, _, None) => Err(invalid("spec.controllers", "is required without spec.combined")),
        (Some(_), None, None) => Err(invalid("spec.brokers", "is required without spec.combined")),
    }
}

/// A quorum of 1, 3 or 5 voters: an even count tolerates no more failures than one fewer,
/// and more than 5 slows every metadata commit for nothing.
fn check_voters(field: &str, replicas: i32) -> Result<()> {
    if [1, 3, 5].contains(&replicas) {
        Ok(())
    } else {
        Err(invalid(field, format!("must be 1, 3 or 5, not {replicas}")))
    }
}

/// A positive size by the API server's quantity rules.
fn check_storage(field: &str, storage: &Storage) -> Result<()> {
    let field = format!("{field}.size");
    match quantity::bytes(&storage.size) {
        Ok(0) => Err(invalid(&field, format!("{:?} is not a positive size", storage.size))),
        Ok(_) => Ok(()),
        Err(e) => Err(invalid(&field, e.to_string())),
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
fn check_rack_label(field: &str, label: Option<&str>) -> Result<()> {
    let Some(label) = label else { return Ok(()) };
    let (prefix, name) = label.rsplit_once('/').map_or((None, label), |(p, n)| (Some(p), n));
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let name_ok = name.len() <= 63
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && !part.starts_with('-')
                    && !part.ends_with('-')
                    && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(invalid(field, format!("{label:?} is not a label key such as topology.kubernetes.io/zone")))
    }
}

/// Ports distinct and clear of the controller listener; advertised addresses only for
/// brokers that exist.
fn check_listeners(spec: &KafkaClusterSpec, brokers: i32) -> Result<()> {
    use crate::api::cluster::CONTROLLER_PORT;
    let internal = spec.listeners.internal.port;
    if internal == CONTROLLER_PORT {
        return Err(invalid("spec.listeners.internal.port", "must not be 9093, the controller listener's"));
    }
    let Some(external) = &spec.listeners.external else { return Ok(()) };
    if external.port == CONTROLLER_PORT || external.port == internal {
        return Err(invalid(
            "spec.listeners.external.port",
            format!("must differ from 9093 (the controller listener) and {internal} (the internal listener)"),
        ));
    }
    for (i, address) in external.advertised.iter().enumerate() {
        if !(0..brokers).contains(&address.broker) {
            return Err(invalid(
                &format!("spec.listeners.external.advertised[{i}].broker"),
                format!("{} is not the ordinal of a broker (0 to {})", address.broker, brokers - 1),
            ));
        }
    }
    Ok(())
}

/// Limits of a configuration map (`spec.config` of clusters and topics).
pub mod config {
    use serde_json::{Value, json};

    /// Most keys of a configuration map: bounds the CEL rules' cost.
    pub const MAX_ENTRIES: usize = 256;
    /// Longest value of a configuration map.
    pub const MAX_VALUE_LENGTH: usize = 4096;
    /// What a configuration key is: Kafka's keys are dotted lower-case words; capitals, `_`
    /// and `-` appear in per-listener and per-mechanism keys.
    pub const KEY_PATTERN: &str = "^[a-zA-Z0-9._-]{1,255}$";

    /// The rule that every key of the map at `field` is a configuration key.
    fn key_rule(field: &str) -> Value {
        json!({
            "rule": format!("self.all(k, k.matches('{KEY_PATTERN}'))"),
            "messageExpression": format!(
                "'{field}.' + self.filter(k, !k.matches('{KEY_PATTERN}'))[0] + ' is not a configuration key: \
                 letters, digits, dots, dashes and underscores, at most 255'"
            ),
            "reason": "FieldValueInvalid",
        })
    }

    /// The CEL rules of a topic's configuration map at `field`.
    pub fn key_rules(field: &str) -> Value {
        json!([key_rule(field)])
    }

    /// The CEL rules of a cluster's broker configuration at `field`: keys as
    /// [`key_rules`], and none that [`super::refusal`] refuses, naming the first.
    pub fn cel_rules(field: &str) -> Value {
        let mut conditions = Vec::new();
        for owned in super::OWNED {
            if !owned.keys.is_empty() {
                let keys: Vec<String> = owned.keys.iter().map(|k| format!("'{k}'")).collect();
                conditions.push(format!("k in [{}]", keys.join(", ")));
            }
            conditions.extend(owned.prefixes.iter().map(|p| format!("k.startsWith('{p}')")));
        }
        let owned = conditions.join(" || ");
        json!([
            key_rule(field),
            {
                "rule": format!("!self.exists(k, {owned})"),
                "messageExpression": format!(
                    "'{field}.' + self.filter(k, {owned})[0] + ' is set by the operator or breaks its safety \
                     guarantees (see \"Configuration the operator owns\" in the Kafka operator docs)'"
                ),
                "reason": "FieldValueForbidden",
            }
        ])
    }
}

/// Broker configuration keys the operator refuses in `spec.config`, with why.
struct Owned {
    keys: &'static [&'static str],
    prefixes: &'static [&'static str],
    why: &'static str,
}

/// The keys of [`Owned`], in the order docs/kafka.md lists them.
const OWNED: &[Owned] = &[
    Owned {
        keys: &["node.id", "broker.id"],
        prefixes: &[],
        why: "the operator numbers the nodes and formats each one's storage with its id",
    },
    Owned { keys: &["process.roles"], prefixes: &[], why: "it follows from the pool the node is in" },
    Owned {
        keys: &["controller.quorum.voters", "controller.quorum.bootstrap.servers", "controller.listener.names"],
        prefixes: &[],
        why: "the operator builds the quorum from spec.controllers (the controller.quorum.*.ms timeouts stay \
              yours)",
    },
    Owned {
        keys: &[
            "listeners",
            "advertised.listeners",
            "listener.security.protocol.map",
            "inter.broker.listener.name",
            "security.inter.broker.protocol",
            "early.start.listeners",
        ],
        prefixes: &["listener.name."],
        why: "the operator builds the listeners from spec.listeners",
    },
    Owned {
        keys: &["log.dirs", "log.dir", "metadata.log.dir"],
        prefixes: &[],
        why: "the data volume is mounted where the operator formats it",
    },
    Owned { keys: &["broker.rack"], prefixes: &[], why: "it is read from the node label spec.brokers.rackLabel names" },
    Owned {
        keys: &[
            "default.replication.factor",
            "min.insync.replicas",
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
        ],
        prefixes: &[],
        why: "set from spec.defaultReplicationFactor and spec.minInsyncReplicas, which the rolls' min-ISR gate reads",
    },
    Owned {
        keys: &["unclean.leader.election.enable"],
        prefixes: &[],
        why: "it lets a replica that is not in sync lead, losing acknowledged records",
    },
    Owned {
        keys: &["controlled.shutdown.enable"],
        prefixes: &[],
        why: "rolls rely on a controlled shutdown moving leadership away before the broker stops",
    },
    Owned { keys: &[], prefixes: &["zookeeper."], why: "Kafka 4 has no ZooKeeper" },
];

/// Why broker configuration key `key` is refused, if it is.
pub fn refusal(key: &str) -> Option<&'static str> {
    OWNED.iter().find(|o| o.keys.contains(&key) || o.prefixes.iter().any(|p| key.starts_with(p))).map(|o| o.why)
}

/// The limits of a configuration map at `field`.
fn check_config(field: &str, map: &BTreeMap<String, String>) -> Result<()> {
    if map.len() > config::MAX_ENTRIES {
        return Err(invalid(field, format!("has {} keys; at most {}", map.len(), config::MAX_ENTRIES)));
    }
    for (key, value) in map {
        let key_ok =
            (1..=255).contains(&key.len()) && key.chars().all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c));
        if !key_ok {
            return Err(invalid(&format!("{field}.{key}"), "is not a configuration key"));
        }
        if value.len() > config::MAX_VALUE_LENGTH {
            return Err(invalid(
                &format!("{field}.{key}"),
                format!("is longer than {} characters", config::MAX_VALUE_LENGTH),
            ));
        }
    }
    Ok(())
}

/// Checks the cluster's name: it names the StatefulSets, pods and Services (the CRD's CEL
/// rule makes the same check for clusters created since it exists).
pub fn validate_name(name: &str) -> Result<()> {
    check_cluster_name("metadata.name", name, MAX_CLUSTER_NAME)
}

/// Checks a change of `spec.version` against the version the nodes run and the finalized
/// `metadata.version` (`4.4-IV0`): an upgrade may go to any newer release of the same major
/// version (Kafka upgrades across minors directly); a downgrade is refused once the finalized
/// metadata.version is newer than the target release can read, because its brokers would not
/// start on that metadata log. A downgrade within what the metadata allows (before
/// finalizing) is a roll like any other.
pub fn check_version_change(running: &Version, desired: &Version, finalized: Option<&str>) -> Result<()> {
    if desired.major != running.major {
        return Err(invalid(
            "spec.version",
            format!("{desired} changes the major version of {running}, which the nodes run: not supported"),
        ));
    }
    if desired < running
        && let Some(level) = finalized.and_then(metadata_series)
        && level > desired.series()
    {
        return Err(invalid(
            "spec.version",
            format!(
                "{desired} is older than {running} and cannot read metadata.version {}: downgrades across a \
                 finalized metadata.version are refused",
                finalized.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// The release series of a metadata.version name (`4.4-IV0` is 4.4).
pub fn metadata_series(level: &str) -> Option<(u32, u32)> {
    let (series, _) = level.split_once('-')?;
    let (major, minor) = series.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// A topic spec that passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidTopic {
    /// The spec as given.
    pub spec: KafkaTopicSpec,
    /// The topic's name in Kafka.
    pub topic_name: String,
}

/// Validates the spec of KafkaTopic `resource_name`.
pub fn validate_topic(resource_name: &str, spec: &KafkaTopicSpec) -> Result<ValidTopic> {
    check_cluster_name("spec.clusterName", &spec.cluster_name, MAX_CLUSTER_NAME)?;
    // A resource name can be 253 characters long: the default is checked like a given name,
    // naming the field that would fix it.
    let topic_name = spec.topic_name.clone().unwrap_or_else(|| resource_name.to_owned());
    check_topic_name(&topic_name)?;
    if !(1..=10_000).contains(&spec.partitions) {
        return Err(invalid("spec.partitions", format!("must be between 1 and 10000, not {}", spec.partitions)));
    }
    if let Some(rf) = spec.replication_factor.filter(|rf| !(1..=MAX_BROKERS).contains(rf)) {
        return Err(invalid("spec.replicationFactor", format!("must be between 1 and {MAX_BROKERS}, not {rf}")));
    }
    check_config("spec.config", &spec.config)?;
    Ok(ValidTopic { spec: spec.clone(), topic_name })
}

/// Kafka's rules for a topic name (`org.apache.kafka.common.internals.Topic.validate`).
fn check_topic_name(name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        Some("is empty".to_owned())
    } else if name == "." || name == ".." {
        Some("must not be '.' or '..'".to_owned())
    } else if name.len() > MAX_TOPIC_NAME {
        Some(format!("is {} characters; Kafka allows at most {MAX_TOPIC_NAME}", name.len()))
    } else if !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        Some("may only have letters, digits, '.', '_' and '-'".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(invalid("spec.topicName", format!("{name:?} {problem}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_changes_within_a_major_go_and_downgrades_stop_at_the_finalized_metadata() {
        let v = |s: &str| super::parse_version(s).unwrap();
        assert!(super::check_version_change(&v("4.3.1"), &v("4.4.0"), Some("4.3-IV0")).is_ok());
        assert!(super::check_version_change(&v("4.4.0"), &v("4.3.1"), Some("4.3-IV0")).is_ok());
        let refused = super::check_version_change(&v("4.4.0"), &v("4.3.1"), Some("4.4-IV0")).unwrap_err();
        assert!(refused.to_string().contains("spec.version") && refused.to_string().contains("4.4-IV0"), "{refused}");
        assert!(super::check_version_change(&v("4.4.0"), &v("5.0.0"), None).is_err());
        assert_eq!(super::metadata_series("4.4-IV0"), Some((4, 4)));
        assert_eq!(super::metadata_series("garbage"), None);
    }

    use super::*;
    use crate::api::{AdvertisedAddress, TopicOwnership};
    use crate::api::{BrokerPool, CombinedPool, ControllerPool, ExternalListener, ExternalListenerType};

    fn storage(size: &str) -> Storage {
        Storage { size: size.into(), storage_class_name: None, fix_ownership: false }
    }

    fn spec() -> KafkaClusterSpec {
        serde_json::from_value(serde_json::json!({
            "controllers": {"replicas": 3, "storage": {"size": "1Gi"}},
            "brokers": {"replicas": 3, "storage": {"size": "10Gi"}},
        }))
        .unwrap()
    }

    fn combined(nodes: i32) -> KafkaClusterSpec {
        KafkaClusterSpec {
            controllers: None,
            brokers: None,
            combined: Some(CombinedPool {
                replicas: nodes,
                storage: storage("1Gi"),
                resources: None,
                rack_label: None,
            }),
            ..spec()
        }
    }

    fn brokers(replicas: i32) -> Option<BrokerPool> {
        Some(BrokerPool { replicas, storage: storage("1Gi"), resources: None, rack_label: None })
    }

    /// The field an invalid spec is refused for, and its message.
    fn refused<T: std::fmt::Debug>(r: Result<T>) -> (String, String) {
        match r {
            Err(Error::InvalidSpec { field, message }) => (field, message),
            other => panic!("expected an invalid spec, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_spec_gets_the_built_image_and_replication_defaults() {
        let v = validate(&spec()).unwrap();
        assert_eq!(v.version, parse_version("4.4.0").unwrap());
        assert_eq!(v.image, "docker.io/apache/kafka:4.4.0");
        assert_eq!(v.layout, Layout::Separate { controllers: 3, brokers: 3 });
        assert_eq!((v.replication_factor, v.min_insync_replicas), (3, 2));
        let one = validate(&combined(1)).unwrap();
        assert_eq!(one.layout, Layout::Combined { nodes: 1 });
        assert_eq!((one.replication_factor, one.min_insync_replicas), (1, 1));
        let custom = validate(&KafkaClusterSpec { image: Some("my/kafka:x".into()), ..spec() }).unwrap();
        assert_eq!(custom.image, "my/kafka:x");
        let five = KafkaClusterSpec { brokers: brokers(5), default_replication_factor: Some(5), ..spec() };
        assert_eq!(validate(&five).unwrap().min_insync_replicas, 4);
    }

    #[test]
    fn the_default_version_is_the_built_one() {
        let built = statecraft_shared::deploy::images_env("KAFKA_IMAGE").unwrap();
        assert_eq!(built.rsplit_once(':').unwrap().1, crate::api::cluster::DEFAULT_VERSION);
        assert_eq!(spec().version, crate::api::cluster::DEFAULT_VERSION);
    }

    #[test]
    fn only_supported_versions_are_accepted() {
        for bad in ["4.4", "v4.4.0", "4.4.0.1"] {
            assert_eq!(refused(validate(&KafkaClusterSpec { version: bad.into(), ..spec() })).0, "spec.version");
        }
        let (field, message) = refused(validate(&KafkaClusterSpec { version: "3.9.1".into(), ..spec() }));
        assert_eq!(field, "spec.version");
        assert!(message.contains("4.3, 4.4"), "{message}");
        let previous = statecraft_shared::deploy::images_env("KAFKA_PREVIOUS_IMAGE").unwrap();
        let (_, tag) = previous.rsplit_once(':').unwrap();
        let valid = validate(&KafkaClusterSpec { version: tag.into(), ..spec() }).unwrap();
        assert_eq!(valid.image, previous, "the previous release runs the image built for it");
    }

    #[test]
    fn the_pools_are_either_combined_or_separate_and_sized_for_a_quorum() {
        let both = KafkaClusterSpec { combined: combined(3).combined, ..spec() };
        assert_eq!(refused(validate(&both)).0, "spec.combined");
        assert_eq!(refused(validate(&KafkaClusterSpec { controllers: None, ..spec() })).0, "spec.controllers");
        assert_eq!(refused(validate(&KafkaClusterSpec { brokers: None, ..spec() })).0, "spec.brokers");
        let four = ControllerPool { replicas: 4, storage: storage("1Gi"), resources: None };
        let four = KafkaClusterSpec { controllers: Some(four), ..spec() };
        assert_eq!(refused(validate(&four)), ("spec.controllers.replicas".into(), "must be 1, 3 or 5, not 4".into()));
        assert_eq!(refused(validate(&combined(2))).0, "spec.combined.replicas");
        assert_eq!(refused(validate(&KafkaClusterSpec { brokers: brokers(0), ..spec() })).0, "spec.brokers.replicas");
        assert_eq!(refused(validate(&KafkaClusterSpec { brokers: brokers(101), ..spec() })).0, "spec.brokers.replicas");
    }

    #[test]
    fn storage_sizes_are_positive_quantities() {
        for bad in ["0", "lots", "-1Gi"] {
            let pool = BrokerPool { storage: storage(bad), ..brokers(3).unwrap() };
            let (field, _) = refused(validate(&KafkaClusterSpec { brokers: Some(pool), ..spec() }));
            assert_eq!(field, "spec.brokers.storage.size", "{bad}");
        }
        let mut small = combined(1);
        small.combined.as_mut().unwrap().storage = storage("0Mi");
        assert_eq!(refused(validate(&small)).0, "spec.combined.storage.size");
    }

    #[test]
    fn rack_labels_are_label_keys() {
        for ok in ["topology.kubernetes.io/zone", "rack", "example.com/rack_1"] {
            let pool = BrokerPool { rack_label: Some(ok.into()), ..brokers(3).unwrap() };
            assert!(validate(&KafkaClusterSpec { brokers: Some(pool), ..spec() }).is_ok(), "{ok}");
        }
        for bad in ["-rack", "zone/", "Example.com/rack", "a b", "x/y/z"] {
            let pool = BrokerPool { rack_label: Some(bad.into()), ..brokers(3).unwrap() };
            assert_eq!(
                refused(validate(&KafkaClusterSpec { brokers: Some(pool), ..spec() })).0,
                "spec.brokers.rackLabel"
            );
        }
    }

    #[test]
    fn replication_settings_fit_the_brokers() {
        let rf = |rf, min| KafkaClusterSpec { default_replication_factor: rf, min_insync_replicas: min, ..spec() };
        assert_eq!(refused(validate(&rf(Some(4), None))).0, "spec.defaultReplicationFactor");
        assert_eq!(refused(validate(&rf(Some(2), Some(3)))).0, "spec.minInsyncReplicas");
        // Unset, the replication factor is 3 here: a min ISR of 3 would stop every write
        // during a roll, but it is allowed; 4 can never be met.
        assert!(validate(&rf(None, Some(3))).is_ok());
        assert_eq!(refused(validate(&rf(None, Some(4)))).0, "spec.minInsyncReplicas");
        let single = KafkaClusterSpec { min_insync_replicas: Some(2), ..combined(1) };
        assert_eq!(refused(validate(&single)).0, "spec.minInsyncReplicas");
    }

    #[test]
    fn listener_ports_and_advertised_brokers_are_checked() {
        let external = |port, broker| ExternalListener {
            type_: ExternalListenerType::NodePort,
            port,
            advertised: vec![AdvertisedAddress { broker, host: "kafka.example.com".into(), port: None }],
            service_annotations: Default::default(),
        };
        let with = |port, broker| {
            let mut s = spec();
            s.listeners.external = Some(external(port, broker));
            s
        };
        assert!(validate(&with(9094, 2)).is_ok());
        assert_eq!(refused(validate(&with(9092, 0))).0, "spec.listeners.external.port");
        assert_eq!(refused(validate(&with(9093, 0))).0, "spec.listeners.external.port");
        assert_eq!(refused(validate(&with(9094, 3))).0, "spec.listeners.external.advertised[0].broker");
        let mut internal = spec();
        internal.listeners.internal.port = 9093;
        assert_eq!(refused(validate(&internal)).0, "spec.listeners.internal.port");
    }

    #[test]
    fn configuration_keys_the_operator_owns_are_refused_by_name() {
        let with = |key: &str| {
            let mut s = spec();
            s.config.insert(key.into(), "x".into());
            validate(&s)
        };
        for ok in ["log.retention.ms", "num.io.threads", "controller.quorum.fetch.timeout.ms", "message.max.bytes"] {
            assert!(with(ok).is_ok(), "{ok}");
        }
        for owned in [
            "node.id",
            "process.roles",
            "controller.quorum.voters",
            "listeners",
            "advertised.listeners",
            "listener.name.internal.ssl.keystore.location",
            "log.dirs",
            "broker.rack",
            "min.insync.replicas",
            "unclean.leader.election.enable",
            "zookeeper.connect",
        ] {
            let (field, message) = refused(with(owned));
            assert_eq!(field, format!("spec.config.{owned}"));
            assert!(message.contains(refusal(owned).unwrap()), "{message}");
        }
        assert_eq!(refused(with("bad key")).0, "spec.config.bad key");
        let mut long = spec();
        long.config.insert("log.retention.ms".into(), "1".repeat(config::MAX_VALUE_LENGTH + 1));
        assert_eq!(refused(validate(&long)).0, "spec.config.log.retention.ms");
    }

    #[test]
    fn the_cel_rule_lists_every_owned_key() {
        let rules = config::cel_rules("spec.config").to_string();
        for owned in OWNED {
            for key in owned.keys.iter().chain(owned.prefixes) {
                assert!(rules.contains(&format!("'{key}'")), "{key}");
            }
        }
    }

    #[test]
    fn cluster_names_fit_the_objects_built_from_them() {
        assert!(validate_name(&"k".repeat(MAX_CLUSTER_NAME)).is_ok());
        for bad in ["k".repeat(MAX_CLUSTER_NAME + 1), "my.kafka".into(), "3kafka".into()] {
            assert_eq!(refused(validate_name(&bad)).0, "metadata.name", "{bad}");
        }
    }

    fn topic() -> KafkaTopicSpec {
        serde_json::from_value(serde_json::json!({"clusterName": "main", "partitions": 6})).unwrap()
    }

    #[test]
    fn topics_default_to_the_resource_name_and_follow_kafkas_name_rules() {
        let t = topic();
        assert_eq!(t.ownership, TopicOwnership::Operator);
        assert_eq!(validate_topic("orders", &t).unwrap().topic_name, "orders");
        let named = KafkaTopicSpec { topic_name: Some("Orders_v2.eu-1".into()), ..topic() };
        assert_eq!(validate_topic("orders", &named).unwrap().topic_name, "Orders_v2.eu-1");
        let long_resource = "t".repeat(MAX_TOPIC_NAME + 1);
        assert_eq!(refused(validate_topic(&long_resource, &t)).0, "spec.topicName");
        assert!(validate_topic(&"t".repeat(MAX_TOPIC_NAME), &t).is_ok());
        for bad in [".", "..", "a b", "ü", ""] {
            let named = KafkaTopicSpec { topic_name: Some(bad.into()), ..topic() };
            assert_eq!(refused(validate_topic("x", &named)).0, "spec.topicName", "{bad:?}");
        }
    }

    #[test]
    fn topic_fields_are_bounded() {
        let bad_cluster = KafkaTopicSpec { cluster_name: "My.Cluster".into(), ..topic() };
        assert_eq!(refused(validate_topic("t", &bad_cluster)).0, "spec.clusterName");
        assert_eq!(refused(validate_topic("t", &KafkaTopicSpec { partitions: 0, ..topic() })).0, "spec.partitions");
        let rf = KafkaTopicSpec { replication_factor: Some(0), ..topic() };
        assert_eq!(refused(validate_topic("t", &rf)).0, "spec.replicationFactor");
        let mut config = topic();
        config.config.insert("retention ms".into(), "1".into());
        assert_eq!(refused(validate_topic("t", &config)).0, "spec.config.retention ms");
        // Topic configuration may set min.insync.replicas: only the broker's is owned.
        let mut min_isr = topic();
        min_isr.config.insert("min.insync.replicas".into(), "2".into());
        assert!(validate_topic("t", &min_isr).is_ok());
    }
}
