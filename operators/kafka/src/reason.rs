//! The Kafka operator's reasons: every Event and condition reason it gives that the shared
//! code does not ([`statecraft_shared::reason::Common`]). Each entry is the reason string
//! itself, which users and alerts match on: never rename one. `docs/kafka.md` (section
//! Reasons) explains each of them, and a test below keeps it complete.

use statecraft_shared::reason::Catalogue;

/// The reasons of the Kafka operator (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
pub enum Kafka {
    // ---- the roll's gates (a wait: Progressing condition, Warning Event) ----
    /// A controller's restart would leave fewer than a majority of the other voters caught
    /// up with the leader.
    QuorumNotCaughtUp,
    /// The metadata quorum has no leader: no controller restarts until it has one.
    NoActiveController,
    /// A broker's restart would drop a partition below its min.insync.replicas.
    WouldDropBelowMinIsr,
    /// A partition is below its min.insync.replicas already and the broker holds one of its
    /// replicas: restarting it would make things worse.
    PartitionUnderMinIsr,
    /// A broker is recovering its logs after an unclean stop: never restarted then.
    BrokerRecovering,
    /// Partitions are being reassigned: no roll starts or goes on during one.
    ReassignmentInProgress,
    /// A restarted broker is not registered and unfenced yet.
    BrokerNotRunning,
    /// A restarted broker runs but is not back in the ISR of every partition it hosts.
    BrokerNotInSync,
    /// A restarted controller is not a caught-up voter yet.
    ControllerNotCaughtUp,
    /// The roll waited longer than its deadline for a gate; it keeps waiting and says so.
    RollStalled,
    /// Preferred leaders are elected after a broker came back.
    ElectLeaders,

    // ---- the cluster (phase, conditions, Events) ----
    /// A new pod revision is being rolled out, one node at a time behind the gates above.
    Rolling,
    /// The cluster-wide dynamic configuration was changed on every broker, no restart.
    Reconfigured,
    /// Kafka refused a cluster-wide value of `spec.config` (a bad value): the others are
    /// applied, this one is not sent again until the spec changes it, and no node reads it
    /// (ConfigurationApplied False, Warning Event).
    ConfigurationRefused,
    /// metadata.version was raised to the newest level of the spec's release after a
    /// version change rolled (`metadataVersion: Auto`).
    MetadataVersionFinalized,
    /// A node came back with another metadata log directory id than before: its volume was
    /// lost and formatted anew (a broker refills by replication; a controller is an observer
    /// until added back to the quorum).
    StorageReplaced,
    /// The brokers run another cluster id than this resource's: its volumes hold another
    /// cluster's data.
    ClusterIdMismatch,
    /// Ready condition: every node serves but the bootstrap Service lists no broker yet
    /// (the first seconds after creation).
    ServiceWithoutEndpoints,

    // ---- topics (KafkaTopic conditions and Events) ----
    /// The topic's KafkaCluster has not served yet: no broker has registered, so there is
    /// nowhere to create the topic.
    ClusterNotServing,
    /// The topic was created as the spec says.
    TopicCreated,
    /// The topic was grown to the spec's partitions.
    PartitionsAdded,
    /// Listed topic config keys that differed were set to the spec's values.
    TopicReconfigured,
    /// The topic exists (Ready).
    TopicReady,
    /// The topic is as the spec says (InSync).
    TopicInSync,
    /// The topic differs from the spec (InSync False; see `status.differences`).
    TopicDiffers,
    /// The topic has another id than before: it was deleted and created again outside the
    /// operator, and its records are gone.
    TopicRecreated,
    /// The resource was deleted with `deletionPolicy: Delete`, and the topic with it.
    TopicDeleted,
    /// The resource was deleted with `deletionPolicy: Retain`, or while another KafkaTopic
    /// still names the topic: the topic stays.
    TopicRetained,
    /// An older KafkaTopic names the same topic of the same cluster and acts on it: this one
    /// changes nothing (Ready False) until that one is gone.
    TopicClaimed,
}

impl Catalogue for Kafka {}

#[cfg(test)]
mod tests {
    use statecraft_shared::reason::{Common, Reason, undocumented};
    use strum::VariantArray;

    use super::*;

    const DOC: &str = include_str!("../../../docs/kafka.md");

    #[test]
    fn every_reason_is_in_the_docs() {
        assert_eq!(undocumented::<Kafka>(DOC), Vec::<&str>::new(), "docs/kafka.md, section Reasons");
    }

    #[test]
    fn no_reason_is_also_a_common_one() {
        let common: Vec<&str> = Common::VARIANTS.iter().map(|&c| c.into()).collect();
        for &entry in Kafka::VARIANTS {
            let reason = Reason::from(entry).as_str();
            assert!(!common.contains(&reason), "{reason} is in Common already");
            assert!(reason.chars().all(|c| c.is_ascii_alphanumeric()), "{reason} is not CamelCase");
        }
    }
}
