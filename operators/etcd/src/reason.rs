//! The etcd operator's reasons: every Event and condition reason it gives that the shared
//! code does not ([`statecraft_shared::reason::Common`]). Each entry is the reason string
//! itself, which users and alerts match on: never rename one. `docs/etcd.md` (section
//! Reasons) explains each of them, and a test below keeps it complete.

use statecraft_shared::reason::Catalogue;

/// The reasons of the etcd operator (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
pub enum Etcd {
    // ---- membership steps (Events, and the Progressing condition while one runs) ----
    /// A member is added as a learner.
    AddLearner,
    /// The data volume of a former member is deleted, so that its ordinal starts empty.
    DeleteStaleClaim,
    /// The pod of a learner that started before it was a member is restarted.
    RestartPod,
    /// A caught-up learner is promoted to a voting member.
    Promote,
    /// Leadership is moved to another member (before a removal or a restart, or on request).
    MoveLeader,
    /// A request that a member lead (the `etcd.statecraft.io/leader` annotation) names no
    /// voting member of the cluster; nothing is moved (Warning Event).
    LeaderRequestRefused,
    /// A member beyond the desired size is removed.
    RemoveMember,
    /// A broken member (unhealthy for too long, or corrupt) is removed and rebuilt empty.
    ReplaceMember,
    /// The alarms of a former member are cleared.
    ClearAlarm,
    /// NOSPACE recovery: compact, defragment every member, disarm the alarm.
    RecoverNoSpace,
    /// One member's database file is defragmented.
    Defragment,

    // ---- membership waits (Warning Events, and the Ready and Degraded conditions) ----
    /// A member (the first one, or a new learner) has not started or does not answer yet.
    MemberStarting,
    /// A learner is still replicating the leader's log.
    LearnerCatchingUp,
    /// A caught-up learner's pod is not running or is terminating.
    LearnerNotHealthy,
    /// A change waits for the members it needs to be healthy.
    WaitingForHealthyMembers,
    /// A member the operator did not add blocks the change.
    ForeignMember,
    /// The old pod of a member must go before the member changes.
    PodTerminating,
    /// A member reports a CORRUPT alarm and auto-heal will not replace it.
    MemberCorrupt,
    /// A member is unhealthy, not yet long enough to be replaced.
    MemberUnhealthy,
    /// etcd refused a membership change while the members settle (strict reconfiguration).
    MembersSettling,
    /// The leader or a member changed under a step: it is planned again.
    Replanning,

    // ---- quorum (the Available condition, the phase, and a wait) ----
    /// Fewer than a majority of the voting members are healthy: the operator changes nothing.
    QuorumLost,
    /// No member reports a leader: an election is under way.
    NoLeader,
    /// A majority of the voting members are healthy and there is a leader.
    QuorumHealthy,
    /// No majority of healthy voting members, or no leader.
    NoQuorum,
    /// Ready condition: the members are healthy but the client Service lists none of them
    /// yet (the first seconds after creation).
    ServiceWithoutEndpoints,

    // ---- the cluster's phase, given as the Ready and Degraded reason when idle ----
    /// The number of members differs from `spec.replicas`.
    Scaling,
    /// A new pod revision is rolled out.
    Upgrading,
    /// The cluster has no member list yet; for a restore, its target is not Ready yet.
    Bootstrapping,

    // ---- rolling upgrade (gates that hold a restart, Events) ----
    /// Restarting the member would leave fewer than a quorum.
    QuorumAtRisk,

    // ---- snapshots, backup and restore ----
    /// A backup waits for a healthy member to take the snapshot from.
    NoHealthyMember,
    /// The first member of a restore's target cannot restore the snapshot (Warning Event).
    RestoreFailing,

    // ---- abnormalities in the members' own metrics (Warning Events, metric labels) ----
    /// A member saw more leader changes than the threshold within the window.
    FrequentLeaderChanges,
    /// A member's WAL fsync or backend commit latency jumped above its baseline.
    SlowDisk,
    // ---- cleanup ----
}

impl Catalogue for Etcd {}

#[cfg(test)]
mod tests {
    use statecraft_shared::reason::{Common, Reason, undocumented};
    use strum::VariantArray;

    use super::*;

    const DOC: &str = include_str!("../../../docs/etcd.md");

    #[test]
    fn every_reason_is_in_the_docs() {
        assert_eq!(undocumented::<Etcd>(DOC), Vec::<&str>::new(), "docs/etcd.md, section Reasons");
        assert_eq!(undocumented::<Common>(DOC), Vec::<&str>::new(), "docs/etcd.md, section Reasons");
    }

    #[test]
    fn no_reason_is_also_a_common_one() {
        let common: Vec<&str> = Common::VARIANTS.iter().map(|&c| c.into()).collect();
        for &entry in Etcd::VARIANTS {
            let reason = Reason::from(entry).as_str();
            assert!(!common.contains(&reason), "{reason} is in Common already");
            assert!(reason.chars().all(|c| c.is_ascii_alphanumeric()), "{reason} is not CamelCase");
        }
    }
}
