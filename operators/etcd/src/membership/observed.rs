//! What one pass observed of a cluster: etcd's membership and each member's status (from
//! the etcd API), and the member pods and data volumes (from Kubernetes). Plain data, so
//! that the planner is a pure function tested over hand-built observations.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

/// A member as etcd's membership lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// etcd's member id.
    pub id: u64,
    /// The ordinal of the pod it belongs to, from its name or (for a learner that has not
    /// started, which has no name yet) its peer URL. `None`: a member this operator did not
    /// add (its peer URL is not one of this cluster's).
    pub ordinal: Option<u32>,
    /// The member's name; empty until it has started once.
    pub name: String,
    /// Peer URLs as registered.
    pub peer_urls: Vec<String>,
    /// A learner (non-voting).
    pub is_learner: bool,
}

impl Member {
    /// Whether the member has ever started (etcd learns its name when it does).
    pub fn started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// The answer of one member to a status request (etcd's Maintenance.Status).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberState {
    /// Which member it is, as it says itself.
    pub id: u64,
    /// The cluster it belongs to, as it says itself.
    pub cluster_id: u64,
    /// The member it believes leads (0: none).
    pub leader: u64,
    /// Its raft term.
    pub raft_term: u64,
    /// Its raft index (last log entry).
    pub raft_index: u64,
    /// Its applied index.
    pub raft_applied_index: u64,
    /// Its database file size, bytes.
    pub db_size: i64,
    /// Bytes of the file in use.
    pub db_size_in_use: i64,
    /// The etcd version it runs, e.g. `3.6.16`.
    pub version: String,
    /// Whether it is a learner.
    pub is_learner: bool,
    /// Errors it reports (etcd's `errors` field, e.g. alarms).
    pub errors: Vec<String>,
}

/// An alarm raised on a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Alarm {
    /// The database has reached its quota: the cluster only accepts reads and deletes.
    NoSpace,
    /// The member's data differs from the others' (hash check).
    Corrupt,
}

/// A member pod as Kubernetes reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodState {
    /// Pod name.
    pub name: String,
    /// The pod is being deleted.
    pub terminating: bool,
    /// Its etcd container is running.
    pub running: bool,
    /// It passes its readiness probe.
    pub ready: bool,
    /// Its etcd container waits to be restarted after crashing (`CrashLoopBackOff`), or
    /// has restarted since the pod was created.
    pub crash_looping: bool,
    /// How often the etcd container restarted.
    pub restarts: i32,
    /// The scheduler cannot place it for a reason a new volume would not change
    /// (`statecraft_shared::pods::unplaceable`): its member is not replaced.
    pub unplaceable: bool,
    /// When the pod was created.
    pub created: Option<DateTime<Utc>>,
    /// The image its etcd container runs (`spec`), for the rolling upgrade.
    pub image: Option<String>,
    /// The StatefulSet revision it was created from (`controller-revision-hash` label).
    pub revision: Option<String>,
}

/// Everything one pass observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// etcd's member list, `None` when no member answered (not bootstrapped yet, or every
    /// member down). A list can be had from a minority member, so it does not prove quorum.
    pub members: Option<Vec<Member>>,
    /// Status of every member that answered, by member id.
    pub states: BTreeMap<u64, MemberState>,
    /// Active alarms, by member id.
    pub alarms: BTreeMap<u64, BTreeSet<Alarm>>,
    /// Member pods by ordinal.
    pub pods: BTreeMap<u32, PodState>,
    /// Ordinals that have a data PersistentVolumeClaim.
    pub claims: BTreeSet<u32>,
    /// Ordinals whose pods Kubernetes refuses to create (the StatefulSet's `FailedCreate`:
    /// a PriorityClass that does not exist, a quota): like an unplaceable pod, a new member
    /// would fare no better, so theirs are not replaced.
    pub refused: BTreeSet<u32>,
    /// `spec.replicas` of the StatefulSet (0 when it does not exist yet).
    pub statefulset_replicas: u32,
    /// Time of the observation.
    pub now: DateTime<Utc>,
}
