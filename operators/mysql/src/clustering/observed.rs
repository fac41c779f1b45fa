//! What one pass of the clustering task saw: the desired shape, the pods, and each server's
//! replication state. Plain data, so that [`super::decide`] is a pure function and tests
//! build these by hand (the "fake data plane").

use std::collections::{BTreeMap, BTreeSet};

use super::gtid::GtidSet;
use super::heal::Healing;

/// The whole cluster as observed in one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Servers wanted (`spec.replicas`, or auto-scaling's count when it is on); 0 when the
    /// cluster is stopped.
    pub replicas: u32,
    /// `spec.paused`: report only, change nothing.
    pub paused: bool,
    /// Whether lossless semi-sync is on (`spec.semiSync.enabled`).
    pub semi_sync: bool,
    /// The acknowledgements the primary waits for (`rpl_semi_sync_*_wait_point` count: n/2
    /// for MySQL, always 1 for MariaDB). A failover needs `replicas - ack_count` replicas
    /// reachable so that at least one holds every acknowledged write.
    pub ack_count: u32,
    /// The primary recorded in status (an ordinal), if any.
    pub recorded_primary: Option<u32>,
    /// A switchover the user asked for that has not been carried out: the target ordinal.
    pub switchover_to: Option<u32>,
    /// Every member that exists or is wanted, by ordinal.
    pub members: Vec<Member>,
    /// Re-seeding of errant or broken replicas: allowed only when the user opted in.
    pub heal: Healing,
    /// `(replica, source)` pairs configured moments ago (see `RECONFIGURE_BACKOFF` in the
    /// task): such a replica that does not replicate yet is not configured for the same
    /// source again until the back-off ends. One whose applier keeps failing would otherwise
    /// be reconfigured in a tight loop, an Event each time, holding up every operation
    /// decided after it. A new source (after a failover) is never held back.
    pub recently_configured: BTreeSet<(u32, u32)>,
    /// Replicas that restarted and have not received since what the primary had when they
    /// came back, with that set (`None`: the primary has not answered since). A restart
    /// discards the relay log (see `super::restarts`), so such a replica may lack a
    /// transaction that only it acknowledged, unless another replica has that set.
    pub restarted: BTreeMap<u32, Option<GtidSet>>,
    /// The primary the last failover replaced (`status.deposedPrimary`), until it replicates
    /// from the new one. What it has beyond what the new primary received was never
    /// acknowledged (a failover promotes the replica with every acknowledged write), so it
    /// does not hold the new primary back from taking writes.
    pub deposed: Option<u32>,
    /// The members the read-write Service's EndpointSlices listed within the last
    /// [`super::routes::SETTLE`] and that may still serve: new connections may still reach
    /// them. A member whose pod is being deleted and whose server refuses connections is
    /// not among them (see [`super::routes::Routes::observe`]).
    pub routed: BTreeSet<u32>,
}

/// One server and its pod.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// StatefulSet ordinal.
    pub ordinal: u32,
    /// The pod as the API server reports it.
    pub pod: PodState,
    /// The role label the pod carries now.
    pub role_label: Option<String>,
    /// Whether the pod carries the label of the read-only Service
    /// ([`crate::build::READS_LABEL`]).
    pub reads_label: bool,
    /// What the server answered, or why it did not.
    pub server: ServerState,
    /// How replicas reach this server (host and port given to `CHANGE MASTER TO`).
    pub address: (String, u16),
    /// Passes in a row in which the server did not answer (kept by the task, so that one
    /// lost packet never triggers a failover).
    pub unreachable_passes: u32,
}

/// The pod of a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// No pod (not created yet, or deleted and not recreated yet).
    Missing,
    /// Created, containers not started.
    Pending,
    /// Running; `ready` is the readiness probe ("serving in its role").
    Running {
        /// The pod's Ready condition.
        ready: bool,
    },
    /// Being deleted.
    Terminating,
}

/// What a server answered.
// One per member per pass, mostly `Up`: boxing the server would cost an allocation for
// nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ServerState {
    /// No answer; the text says why (for status and Events).
    Unreachable(String),
    /// The connection was refused: nothing listens where the server should (stopped, or
    /// not started yet). A paused or cut-off server is [`ServerState::Unreachable`]
    /// instead (its kernel still accepts, or nothing answers at all), so in a pod that is
    /// being deleted, where nothing starts again, this one can serve no client any more.
    Refused(String),
    /// Answered.
    Up(Server),
}

impl ServerState {
    /// The server, when it answered.
    pub fn up(&self) -> Option<&Server> {
        match self {
            ServerState::Up(s) => Some(s),
            ServerState::Unreachable(_) | ServerState::Refused(_) => None,
        }
    }
}

/// The replication-relevant state of one answering server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Server {
    /// Refuses writes (`read_only` / `super_read_only`).
    pub read_only: bool,
    /// Transactions it has executed (MariaDB `gtid_current_pos`, MySQL `gtid_executed`).
    pub executed: GtidSet,
    /// The source side of semi-sync is on.
    pub semi_sync_source: bool,
    /// The source side of semi-sync is on *and* waiting for acknowledgements
    /// (`Rpl_semi_sync_master_status` / `Rpl_semi_sync_source_status`). On with this off, the
    /// primary has fallen back to asynchronous replication (its timeout ran out): commits it
    /// acknowledges now may exist nowhere else.
    pub semi_sync_active: bool,
    /// Seconds since the server started (`Uptime`), when it said: a restart shows as an
    /// uptime that grew less than the time between two observations.
    pub uptime_seconds: Option<u64>,
    /// The id of the connection that observed it (`CONNECTION_ID()`): ids grow for as long
    /// as the server runs (every pass opens a new connection) and start again from 1 after
    /// a restart, so a smaller id than last time is a restart however young the server.
    pub connection_id: Option<u64>,
    /// Its replication channel, if one is configured.
    pub replication: Option<Replication>,
    /// Connection attempts that failed and connections dropped without a proper close since
    /// the server started (`Aborted_connects` + `Aborted_clients`), when it said: a jump is
    /// a client or network problem the abnormality detection reports. Nothing decides on it.
    pub connection_errors: Option<u64>,
    /// Client connections open on the server when observed: every connection except the
    /// operator's own accounts, replication (a replica's threads and the binlog dump serving
    /// it), the probes' local account, the backup account and the server's own threads,
    /// because only clients are load that another read replica would take. `None` when it
    /// could not be read. Read-replica auto-scaling reads it; the clustering decision never
    /// does, so a server whose count cannot be read is clustered all the same.
    pub client_connections: Option<u64>,
}

/// A configured replication channel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replication {
    /// Host it replicates from.
    pub source_host: String,
    /// Port it replicates from.
    pub source_port: u16,
    /// The receiver thread runs and is connected.
    pub io_running: bool,
    /// The receiver thread runs but is starting or (re)connecting: it would take transactions
    /// from the source as soon as it answers, so it still has to be fenced, and a replica in
    /// this state is given time rather than reconfigured.
    pub io_connecting: bool,
    /// The applier thread runs.
    pub sql_running: bool,
    /// Transactions received (possibly not applied yet).
    pub retrieved: GtidSet,
    /// Seconds behind the source, when known.
    pub lag_seconds: Option<i64>,
    /// The last receiver or applier error, if any.
    pub last_error: Option<String>,
    /// The source refused to send from this replica's position (error 1236): its binary log
    /// does not hold the replica's last transaction. The replica has a transaction no one
    /// else has (a primary that died before a replica received its last commit, which was
    /// never acknowledged) or needs logs that were purged; either way, reconfiguring it
    /// cannot help. MariaDB's positions only keep each domain's last GTID, so this is how a
    /// replica that diverged *behind* the primary's sequence numbers is recognised.
    pub source_refused: bool,
}

impl Server {
    /// Everything this server has or has received: what it would have once its relay log
    /// is applied. The failover candidate must contain every other replica's.
    pub fn received(&self) -> GtidSet {
        let mut all = self.executed.clone();
        if let Some(r) = &self.replication {
            // Executed and retrieved are both prefixes of the primary's history; the larger
            // is what the server will have.
            if r.retrieved.contains(&all) {
                all = r.retrieved.clone();
            }
        }
        all
    }
}
