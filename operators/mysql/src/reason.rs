//! The MySQL operator's catalogue: every reason its Events and conditions give that the
//! shared code does not ([`statecraft_shared::reason::Common`]). Users, alerts, the e2e
//! tests and `docs/mysql.md` match on these words, so an entry is never renamed; the test
//! below keeps the documentation naming each one.

use statecraft_shared::reason::Catalogue;

/// Reasons of the MySQL operator (see the module doc). The variant name is the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
pub enum MySql {
    // Cluster health: the Ready and Degraded conditions' reason when nothing is waited for.
    /// `spec.stopped`: the cluster runs no servers.
    Stopped,
    /// No primary has been chosen yet.
    Initializing,
    /// The primary is down and a failover is under way.
    Failed,
    /// The primary is down and no failover is safe: its return (or a human) is needed.
    Lost,
    /// Available condition: some member is the writable primary.
    PrimaryWritable,
    /// Available condition: no member takes writes.
    NoWritablePrimary,
    /// Ready condition: the servers are healthy but a client Service does not list them yet
    /// (the read-write one its primary, or the read-only one any replica).
    ServicesWithoutEndpoints,

    // Clustering and failover: waits (Ready condition and Warning Event) and operations
    // (Event and Progressing condition).
    /// Some servers do not answer yet, so no primary can be chosen.
    WaitingForServers,
    /// The servers' histories diverge: no first primary can be chosen safely.
    ConflictingHistories,
    /// The recorded primary lacks transactions a replica has: it is not made writable.
    PrimaryBehindReplica,
    /// The primary's pod runs but its server did not answer; it is failed over if it stays so.
    PrimaryUnreachable,
    /// The only server is down; the operator waits for it to restart.
    PrimaryDown,
    /// The primary is down and too few replicas answer to be sure one has every
    /// acknowledged write: no failover.
    NotEnoughReplicasForSafeFailover,
    /// The primary is down and a replica restarted without catching up since, so it may
    /// lack an acknowledged write: no failover.
    ReplicaRestartedBeforeFailover,
    /// The replicas' histories diverge: none can be promoted safely.
    ConflictingReplicaHistories,
    /// The read-write Service still leads new connections to a former primary: the new one
    /// takes no writes (and the former is not demoted) until it no longer does.
    FormerPrimaryStillRouted,
    /// A writable server that is not the primary was made read-only.
    Demote,
    /// A replica was pointed at the primary.
    ConfigureReplica,
    /// The replicas' receivers were stopped so that an unreachable primary gets no more
    /// acknowledgements.
    Fence,
    /// A replica replaced the failed primary.
    Failover,
    /// Members' role labels were changed to match their roles.
    Relabel,

    // Switchover (requested, or before the primary's restart in a roll).
    /// The primary moved to another member.
    Switchover,
    /// The member a switchover request names cannot take the primary now.
    SwitchoverTargetNotReady,

    // Acknowledgements (semi-sync): the SemiSync condition and its Events.
    /// The primary acknowledges a commit only once a replica has it.
    Acknowledging,
    /// The primary fell back to asynchronous replication: acknowledged commits may be lost
    /// in a failover.
    FellBackToAsync,

    // Re-seeding (`spec.autoHeal`).
    /// A replica's volume and pod are deleted so that it is rebuilt from the primary.
    Reseed,
    /// A re-seeded replica is being rebuilt (Progressing condition); also holds a resize.
    Reseeding,
    /// A re-seeded replica serves again.
    Reseeded,
    /// A re-seed waits: too few other replicas are healthy to keep acknowledging commits.
    ReseedWaitsForHealthyReplicas,
    /// A re-seed waits: another member is not serving yet (one member at a time).
    ReseedWaitsForMember,

    // Read-replica auto-scaling: the AutoScaling condition and its Events.
    /// Servers were added.
    ScaleOut,
    /// Servers were removed.
    ScaleIn,
    /// The metric is within the thresholds.
    WithinThresholds,
    /// The metric asks for more servers but the cluster is at its maximum.
    AtMaximum,
    /// The metric asks for fewer servers but the cluster is at its minimum.
    AtMinimum,
    /// No serving replica reported the metric.
    MetricUnavailable,
    /// Removing servers would push those left above the scale-out threshold.
    ScaleInWouldOverload,
    /// A scale-out is due but something blocks it (the message says what).
    ScaleOutHeld,
    /// A scale-in is due but something blocks it (the message says what).
    ScaleInHeld,
    /// Blocks a resize: the cluster is not healthy.
    ClusterNotHealthy,
    /// Blocks a resize: a clustering operation is under way.
    ClusteringBusy,
    /// Blocks a resize: a rolling restart is under way.
    UpgradeInProgress,
    /// Blocks a resize: whether a backup runs cannot be told.
    BackupUnknown,

    // Rolling upgrade: its Events and the gates that hold a restart.
    /// Holds a restart: the primary is down.
    ClusterFailed,
    /// Holds the primary's restart: no healthy, caught-up replica to move the primary to.
    NoSwitchoverTarget,

    // Backups and restores, besides the shared controllers' reasons.
    /// A backup waits for a healthy replica to read from.
    NoHealthySource,
    /// A backup is stored but its binary logs are not archived: no point-in-time restore
    /// reaches past it.
    BinlogsNotArchived,
    /// A point-in-time restore waits for the binary logs reaching its time to be archived.
    WaitingForBinlogs,
    /// A restore waits for its target cluster to be Ready.
    WaitingForTarget,
    /// The restore Job was created.
    RestoreStarted,
    /// The restore Job is loading the backup.
    Loading,

    // Abnormality detection: the Abnormal condition, its Events and the
    // `member_abnormal` metric's `kind` label.
    /// A member's replication lag jumped above its recent baseline.
    ReplicationLagSpike,
    /// A member's rate of connection errors jumped above its recent baseline.
    ConnectionErrorSpike,
    /// An abnormality ended.
    AbnormalityCleared,
    /// Abnormal condition `False`: every member behaves as in its recent past.
    Normal,

    // Declared accounts and databases (MySQLUser, MySQLDatabase): their Ready condition
    // and Events.
    /// Ready: the account or database is on the primary as declared.
    Declared,
    /// The cluster has no writable primary to apply to (yet).
    WaitingForPrimary,
    /// An older resource declares the same account or database on the same cluster.
    Conflict,
    /// The password Secret is missing, not labelled for this use, or lacks the key.
    PasswordSecretRefused,
    /// Statements were applied to bring an account to its declaration (Event).
    AccountApplied,
    /// An account was dropped with its resource (Event).
    AccountDropped,
    /// A database was created or its defaults changed (Event).
    DatabaseApplied,
    /// A database was dropped with its resource (Event).
    DatabaseDropped,
    // TLS (`spec.tls`).
    /// The operator issued the servers' certificate from the cluster's authority: the first,
    /// or again because it would expire, lacked a name or came from a replaced authority
    /// (Event).
    CertificateIssued,
    /// A server now presents the certificate in the Secret, loaded without a restart
    /// (Event).
    CertificateReloaded,
    // Cleanup.
}

impl Catalogue for MySql {}

#[cfg(test)]
mod tests {
    use statecraft_shared::reason::{Common, Reason, undocumented};
    use strum::VariantArray;

    use super::*;

    const DOC: &str = include_str!("../../../docs/mysql.md");

    #[test]
    fn every_reason_is_in_the_docs() {
        assert_eq!(undocumented::<MySql>(DOC), Vec::<&str>::new(), "add them to docs/mysql.md § Reasons");
        assert_eq!(undocumented::<Common>(DOC), Vec::<&str>::new(), "add them to docs/mysql.md § Reasons");
        let sizing = undocumented::<statecraft_shared::statefulset::growth::Sizing>(DOC);
        assert_eq!(sizing, Vec::<&str>::new(), "add them to docs/mysql.md § Reasons");
    }

    /// A word in both catalogues would be documented twice and mean two things.
    #[test]
    fn no_entry_is_also_a_common_one() {
        let common: Vec<&str> = Common::VARIANTS.iter().map(|&c| c.into()).collect();
        let sizing = statecraft_shared::statefulset::growth::Sizing::VARIANTS.iter().map(|&s| s.into());
        let common: Vec<&str> = common.into_iter().chain(sizing).collect();
        let both: Vec<&str> = MySql::VARIANTS.iter().map(|&m| m.into()).filter(|m| common.contains(m)).collect();
        assert_eq!(both, Vec::<&str>::new());
    }

    #[test]
    fn a_reason_is_its_entry_name() {
        assert_eq!(Reason::from(MySql::NotEnoughReplicasForSafeFailover).as_str(), "NotEnoughReplicasForSafeFailover");
        assert_eq!(Reason::from(MySql::FellBackToAsync).as_str(), "FellBackToAsync");
        assert_eq!(MySql::ReseedWaitsForHealthyReplicas.as_str(), "ReseedWaitsForHealthyReplicas");
    }
}
