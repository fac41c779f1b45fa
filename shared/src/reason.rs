//! Reasons: the one CamelCase word that an Event or a condition gives for what happened.
//!
//! Users match on reasons (`kubectl get events --field-selector reason=Failover`, alerts,
//! `kubectl wait`), so a reason is an API: it must not be misspelt in one place or renamed
//! in passing. Each operator therefore lists every reason it gives in one enum, its
//! **catalogue** (`operators/<op>/src/reason.rs`), and the reasons given by the shared code
//! are in [`Common`]. Every Event and every condition takes a [`Reason`], which only a
//! catalogue entry converts into: a string literal does not compile. Each operator's tests
//! check that its documentation names every entry ([`undocumented`]).
//!
//! A catalogue is an enum whose variant names are the reasons, deriving strum's
//! `IntoStaticStr` and `VariantArray`:
//!
//! ```
//! use statecraft_shared::reason::{Catalogue, Reason};
//!
//! /// Reasons of the example operator.
//! #[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
//! pub enum Example {
//!     /// The primary moved to another server.
//!     Failover,
//! }
//! impl Catalogue for Example {}
//!
//! assert_eq!(Reason::from(Example::Failover).as_str(), "Failover");
//! ```

use std::fmt;

use strum::VariantArray;

/// An enum listing the reasons one part of the project gives: its variant names are the
/// reasons (strum's `IntoStaticStr`), and [`VariantArray`] lists them for the docs check.
pub trait Catalogue: Copy + Into<&'static str> + VariantArray + 'static {
    /// The entry's word, e.g. as a metric label value.
    fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A reason taken from a catalogue, whichever it is: what Events, conditions and waits
/// hold. It cannot be made from a string, only from a [`Catalogue`] entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reason(&'static str);

impl Reason {
    /// The word as Events and conditions show it.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl<C: Catalogue> From<C> for Reason {
    fn from(entry: C) -> Self {
        Reason(entry.into())
    }
}

impl<C: Catalogue> PartialEq<C> for Reason {
    fn eq(&self, entry: &C) -> bool {
        self.0 == Into::<&'static str>::into(*entry)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The reasons the shared code gives, in every operator: errors, task supervision, the pod
/// problems that explain a wait, the backup and restore controllers, and the rolling
/// upgrade engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
pub enum Common {
    /// The spec is invalid; the message names the field.
    InvalidSpec,
    /// A request to the Kubernetes API failed.
    KubernetesApiError,
    /// An object could not be (de)serialized.
    SerializationError,
    /// A request to the managed servers failed.
    DataPlaneError,
    /// The backup store (S3) refused or failed a request.
    BackupStoreError,
    /// This replica may have lost its Lease; another one acts.
    NotLeading,
    /// A failure that retrying will not fix.
    PermanentError,
    /// A supervised task panicked and was restarted with fresh memory.
    TaskRestarted,
    /// Every member serves in its role (phase, Ready condition).
    Healthy,
    /// Some member is missing, broken or behind (phase, Degraded condition).
    Degraded,
    /// The Degraded condition is `False`: the cluster is as it should be.
    AsExpected,
    /// `spec.paused`: the operator observes and reports, and changes nothing.
    Paused,
    /// The Progressing condition is `False`: no operation or roll is under way.
    Idle,
    /// A new cluster was bootstrapped from its first member.
    Bootstrap,
    /// An owned object that is no longer desired was deleted (never a data volume).
    Deleted,
    /// The roll restarts a member on the new revision (Event).
    RestartMember,
    /// A restart (or a scale-in) waits: a backup Job reads from the cluster.
    BackupRunning,
    /// A restart waits: another member does not serve.
    OtherMembersNotHealthy,
    /// The roll waits for a restarted member to catch up and serve in its role again.
    MemberNotCaughtUp,
    /// Kubernetes refuses to create a member's pod (a PriorityClass that does not exist, a
    /// quota, an admission webhook): the StatefulSet's `FailedCreate` Event says why.
    PodNotCreated,
    /// No node can take a member's pod.
    PodUnschedulable,
    /// A member's image cannot be pulled.
    ImagePullFailed,
    /// A member's container cannot be created (a missing Secret, ConfigMap or key).
    PodConfigError,
    /// A member's container was killed for using more memory than its limit.
    #[strum(serialize = "PodOOMKilled")]
    PodOomKilled,
    /// A member's container exits and is restarted over and over.
    PodCrashLooping,
    /// A member's pod failed as a whole (evicted, for instance).
    PodFailed,
    /// The cluster a backup, a restore, a topic, an account or a database names does not exist.
    ClusterNotFound,
    /// The backup or restore Job started.
    JobStarted,
    /// A backup Job started (Event).
    BackupStarted,
    /// The backup is stored, with its size and checksum (condition).
    BackupStored,
    /// The backup is stored (Event).
    BackupSucceeded,
    /// The backup failed; the message says where.
    BackupFailed,
    /// The backup or restore Job failed.
    JobFailed,
    /// The Job ran past its deadline (`activeDeadlineSeconds`) and was stopped.
    DeadlineExceeded,
    /// A scheduled backup was created.
    BackupScheduled,
    /// Backups past the retention were deleted.
    BackupsExpired,
    /// The restore waits for its backup to succeed.
    WaitingForBackup,
    /// The restore created its target cluster.
    TargetCreated,
    /// The target holds the data (condition).
    Restored,
    /// The target holds the data (Event).
    RestoreSucceeded,
    /// The restore failed; the message says where.
    RestoreFailed,
    /// The roll restarts a member.
    RestartingMember,
    /// The roll prepared the leader (primary) for its restart.
    LeaderPrepared,
    /// Every member runs the target revision.
    UpgradeComplete,
    /// A member's target revision is not known yet.
    TargetRevisionUnknown,
    /// The roll waits for a restarted member to become ready.
    MemberNotReady,
    /// The roll waits for a restart it issued to be seen.
    RestartPending,
}

impl Catalogue for Common {}

/// The entries of catalogue `C` that `doc` does not name in backticks (`` `Failover` ``):
/// what a user reading the operator's documentation could not look up.
pub fn undocumented<C: Catalogue>(doc: &str) -> Vec<&'static str> {
    C::VARIANTS.iter().map(|&entry| entry.into()).filter(|name| !doc.contains(&format!("`{name}`"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_its_entry_name_and_equals_its_entry() {
        let reason = Reason::from(Common::TaskRestarted);
        assert_eq!(Reason::from(Common::PodOomKilled).as_str(), "PodOOMKilled");
        assert_eq!(reason.as_str(), "TaskRestarted");
        assert_eq!(reason.to_string(), "TaskRestarted");
        assert!(reason == Common::TaskRestarted);
        assert!(reason != Common::InvalidSpec);
    }

    #[test]
    fn undocumented_lists_the_entries_a_doc_does_not_name() {
        let doc = "phase Failed with reason `ClusterNotFound`; InvalidSpec without backticks";
        let missing = undocumented::<Common>(doc);
        assert!(!missing.contains(&"ClusterNotFound"));
        assert!(missing.contains(&"InvalidSpec"));
        assert_eq!(missing.len(), Common::VARIANTS.len() - 1);
    }
}
