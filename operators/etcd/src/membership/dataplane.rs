//! The etcd data plane of the membership task: what a pass reads from the members
//! ([`gather`]) and the etcd side of a planned step ([`perform`]), over `etcd-client`.
//!
//! Every call has a deadline (a hung member must never hang a pass), and every step is
//! safe to repeat after a crash or a timeout: adding a peer URL that is already a member,
//! removing a member that is gone, promoting a voter or compacting a compacted revision
//! count as done.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use etcd_client::{
    AlarmAction, AlarmOptions, AlarmType, Client, CompactionOptions, ConnectOptions, GetOptions, MemberAddOptions,
};
use futures::future::join_all;
use thiserror::Error;
use tracing::{debug, info, warn};

use super::observed::{Alarm, Member, MemberState};
use super::plan::{Addressing, Step};
use crate::reason::Etcd;

/// Deadline to open a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Deadline of one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Deadline of one defragmentation, which rewrites the member's whole database file and
/// blocks it meanwhile (seconds per GiB).
pub const DEFRAG_TIMEOUT: Duration = Duration::from_secs(120);

/// gRPC status codes after which another member may answer (the spec's numbers).
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
const GRPC_UNAVAILABLE: i32 = 14;

/// etcd's answer to a promotion of a learner that is not in sync yet.
const LEARNER_NOT_READY: &str = "can only promote a learner member which is in sync with leader";
/// etcd's answer to a promotion of a voter.
const NOT_A_LEARNER: &str = "can only promote a learner member";
/// etcd's strict reconfiguration check: a membership change is refused until every voter
/// has been connected to the leader for 5 s (so right after a promotion or a restart), or
/// when the change would leave too few started members.
const UNSETTLED: [&str; 2] = ["unhealthy cluster", "not enough started members"];
const PEER_URL_EXISTS: &str = "Peer URLs already exists";
const MEMBER_NOT_FOUND: &str = "member not found";
const COMPACTED: &str = "required revision has been compacted";

/// A failed data-plane call. Every one is worth retrying on a later pass.
#[derive(Debug, Error)]
pub enum DataPlaneError {
    /// No connection or no answer within the deadline.
    #[error("{endpoint}: no answer within {timeout:?}")]
    Timeout {
        /// Client URL.
        endpoint: String,
        /// The deadline.
        timeout: Duration,
    },
    /// etcd (or the connection to it) failed the request.
    #[error("{endpoint}: {source}")]
    Etcd {
        /// Client URL.
        endpoint: String,
        /// The client error.
        #[source]
        source: etcd_client::Error,
    },
    /// Nothing listens at the member's address (or it cannot be reached).
    #[error("{endpoint}: {source}")]
    Connect {
        /// Client URL.
        endpoint: String,
        /// The connection error.
        #[source]
        source: std::io::Error,
    },
    /// No member could be asked.
    #[error("no member to send the request to")]
    NoEndpoint,
    /// The step names a member whose client URL is not known.
    #[error("no client URL for member {ordinal}")]
    UnknownOrdinal {
        /// Ordinal.
        ordinal: u32,
    },
    /// etcd refused to promote a learner that is not in sync with the leader yet: wait.
    #[error("learner {id:x} is not in sync with the leader yet")]
    LearnerNotReady {
        /// Learner id.
        id: u64,
    },
    /// etcd refused a membership change because the cluster has not settled since the
    /// last one (or a member is down): wait and plan again.
    #[error("etcd refused the membership change for now: {message}")]
    Unsettled {
        /// etcd's message.
        message: String,
    },
    /// The member the step was planned for no longer leads: plan again.
    #[error("member {expected:x} no longer leads (leader: {actual:x})")]
    LeaderChanged {
        /// The planned leader.
        expected: u64,
        /// The leader the member reports.
        actual: u64,
    },
    /// The endpoint of an ordinal answers as another member than planned (replaced since):
    /// plan again.
    #[error("{endpoint} is member {actual:x}, not {expected:x}")]
    MemberChanged {
        /// Client URL.
        endpoint: String,
        /// The planned member.
        expected: u64,
        /// The member that answered.
        actual: u64,
    },
}

impl DataPlaneError {
    /// When the error means "not yet" rather than a failure: the condition reason of the
    /// wait the caller reports instead (and requeues after a few seconds).
    pub fn wait_reason(&self) -> Option<Etcd> {
        match self {
            DataPlaneError::LearnerNotReady { .. } => Some(Etcd::LearnerCatchingUp),
            DataPlaneError::Unsettled { .. } => Some(Etcd::MembersSettling),
            DataPlaneError::LeaderChanged { .. } | DataPlaneError::MemberChanged { .. } => Some(Etcd::Replanning),
            _ => None,
        }
    }

    /// Turns etcd's strict-reconfiguration refusals into [`DataPlaneError::Unsettled`].
    fn settle(self) -> Self {
        match self.etcd_message() {
            Some(m) if UNSETTLED.iter().any(|u| m.contains(u)) => DataPlaneError::Unsettled { message: m.to_owned() },
            _ => self,
        }
    }

    /// The member could not be reached or could not serve (no leader, timeout): another
    /// member may answer.
    fn unreachable(&self) -> bool {
        match self {
            DataPlaneError::Timeout { .. } | DataPlaneError::Connect { .. } => true,
            DataPlaneError::Etcd { source, .. } => match source {
                etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
                etcd_client::Error::GRpcStatus(s) => {
                    matches!(i32::from(s.code()), GRPC_DEADLINE_EXCEEDED | GRPC_UNAVAILABLE)
                        && !UNSETTLED.iter().any(|u| s.message().contains(u))
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// etcd's error message, when etcd answered with an error.
    fn etcd_message(&self) -> Option<&str> {
        match self {
            DataPlaneError::Etcd { source: etcd_client::Error::GRpcStatus(s), .. } => Some(s.message()),
            _ => None,
        }
    }

    fn says(&self, text: &str) -> bool {
        self.etcd_message().is_some_and(|m| m.contains(text))
    }
}

/// What one pass read from etcd: the fields of [`super::Observed`] that come from etcd.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gathered {
    /// Member list, `None` when no member answered.
    pub members: Option<Vec<Member>>,
    /// Status of each member that answered, by member id.
    pub states: BTreeMap<u64, MemberState>,
    /// Active alarms, by member id.
    pub alarms: BTreeMap<u64, BTreeSet<Alarm>>,
}

async fn deadline<T>(
    endpoint: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, DataPlaneError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(DataPlaneError::Etcd { endpoint: endpoint.to_owned(), source }),
        Err(_) => Err(DataPlaneError::Timeout { endpoint: endpoint.to_owned(), timeout }),
    }
}

/// A client of one member only: status, defragmentation and leadership transfer are
/// about the member that answers.
///
/// The client connects lazily and, when nothing listens, retries until the request's
/// deadline; a plain TCP connection first makes a member that is down (a crash-looping
/// pod) cost a refused connection instead of a whole request timeout per pass.
async fn connect(endpoint: &str, request_timeout: Duration) -> Result<Client, DataPlaneError> {
    let authority = endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest);
    let authority = authority.split('/').next().unwrap_or(authority);
    let probe = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(authority)).await;
    match probe {
        Ok(Ok(_)) => {}
        Ok(Err(source)) => return Err(DataPlaneError::Connect { endpoint: endpoint.to_owned(), source }),
        Err(_) => return Err(DataPlaneError::Timeout { endpoint: endpoint.to_owned(), timeout: CONNECT_TIMEOUT }),
    }
    let options = ConnectOptions::new().with_connect_timeout(CONNECT_TIMEOUT).with_timeout(request_timeout);
    deadline(endpoint, CONNECT_TIMEOUT, Client::connect([endpoint], Some(options))).await
}

/// Runs `call` on the first member of `endpoints` that answers (etcd forwards cluster-wide
/// requests to the leader itself). An error etcd answered with is returned as is.
///
/// `call` gets its own handle of the client (a cheap clone) so that its future owns
/// everything it uses: futures of borrowing async closures cannot be proven `Send`, which
/// the controllers' futures must be.
async fn on_any<T, F, Fut>(endpoints: &[&str], mut call: F) -> Result<T, DataPlaneError>
where
    F: FnMut(Client) -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let mut last = DataPlaneError::NoEndpoint;
    for endpoint in endpoints {
        let attempt = async {
            let client = connect(endpoint, REQUEST_TIMEOUT).await?;
            deadline(endpoint, REQUEST_TIMEOUT, call(client)).await
        };
        match attempt.await {
            Ok(v) => return Ok(v),
            Err(e) if e.unreachable() => {
                debug!(%endpoint, error = %e, "member did not serve the request, trying another");
                last = e;
            }
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

async fn status(endpoint: &str) -> Result<MemberState, DataPlaneError> {
    let mut client = connect(endpoint, REQUEST_TIMEOUT).await?;
    let s = deadline(endpoint, REQUEST_TIMEOUT, client.status()).await?;
    Ok(MemberState {
        id: s.header().map_or(0, |h| h.member_id()),
        cluster_id: s.header().map_or(0, |h| h.cluster_id()),
        leader: s.leader(),
        raft_term: s.raft_term(),
        raft_index: s.raft_index(),
        raft_applied_index: s.raft_applied_index(),
        db_size: s.db_size(),
        db_size_in_use: s.raft_used_db_size(),
        version: s.version().to_owned(),
        is_learner: s.is_learner(),
        errors: s.errors().to_vec(),
    })
}

/// The ordinal of a listed member: its peer URL must be one of this cluster's, and its
/// name (once started) that of the same ordinal. Anything else is foreign.
fn ordinal_of(addressing: &impl Addressing, name: &str, peer_urls: &[String]) -> Option<u32> {
    let k = peer_urls.iter().find_map(|u| addressing.ordinal_of_peer_url(u))?;
    (name.is_empty() || addressing.ordinal_of_name(name) == Some(k)).then_some(k)
}

/// Reads the membership, each member's status (concurrently) and the alarms.
///
/// `endpoints` are the client URLs to ask, by ordinal: every ordinal that may run a member.
/// Members of the list not asked (a learner just added, a foreign member) are asked next,
/// at their ordinal's address or the client URL they advertise. The member list comes
/// from the leader when it answers (a minority member's list may be stale).
pub async fn gather(addressing: &impl Addressing, endpoints: &BTreeMap<u32, String>) -> Gathered {
    let mut gathered = Gathered::default();
    let mut answered: Vec<(String, MemberState)> = Vec::new();
    let asked = join_all(endpoints.values().map(|ep| async move { (ep.clone(), status(ep).await) })).await;
    for (endpoint, result) in asked {
        match result {
            Ok(state) => answered.push((endpoint, state)),
            Err(e) => debug!(error = %e, "member status"),
        }
    }
    let leader = answered.iter().filter(|(_, s)| s.leader != 0).max_by_key(|(_, s)| s.raft_term).map(|(_, s)| s.leader);
    answered.sort_by_key(|(_, s)| Some(s.id) != leader);
    let order: Vec<&str> = answered.iter().map(|(ep, _)| ep.as_str()).collect();
    let listed = on_any(&order, |mut c: Client| async move { c.member_list().await }).await;
    let alarms =
        on_any(&order, |mut c: Client| async move { c.alarm(AlarmAction::Get, AlarmType::None, None).await }).await;
    let anyone = !order.is_empty();
    for (_, state) in answered {
        gathered.states.insert(state.id, state);
    }
    let listed = match listed {
        Ok(list) => list,
        Err(e) => {
            if anyone {
                warn!(error = %e, "no member listed the membership");
            }
            return gathered;
        }
    };
    let members: Vec<Member> = listed
        .members()
        .iter()
        .map(|m| Member {
            id: m.id(),
            ordinal: ordinal_of(addressing, m.name(), m.peer_urls()),
            name: m.name().to_owned(),
            peer_urls: m.peer_urls().to_vec(),
            is_learner: m.is_learner(),
        })
        .collect();
    let unasked: Vec<String> = listed
        .members()
        .iter()
        .zip(&members)
        .filter(|(_, m)| !gathered.states.contains_key(&m.id))
        .filter_map(|(raw, m)| match m.ordinal {
            Some(k) if endpoints.contains_key(&k) => None,
            Some(k) => Some(addressing.client_url(k)),
            None => raw.client_urls().first().cloned(),
        })
        .collect();
    for state in join_all(unasked.iter().map(|ep| status(ep))).await.into_iter().flatten() {
        gathered.states.insert(state.id, state);
    }
    match alarms {
        Ok(list) => {
            for a in list.alarms() {
                let alarm = match a.alarm() {
                    AlarmType::Nospace => Alarm::NoSpace,
                    AlarmType::Corrupt => Alarm::Corrupt,
                    AlarmType::None => continue,
                };
                gathered.alarms.entry(a.member_id()).or_default().insert(alarm);
            }
        }
        Err(e) => warn!(error = %e, "no member listed the alarms"),
    }
    gathered.members = Some(members);
    gathered
}

/// Performs the etcd side of `step`. Steps with no etcd side (bootstrap, pod and volume
/// deletions, waits) do nothing here; for [`Step::Replace`] the caller deletes the volume
/// and the pod once this returned `Ok` (the member is then out of the cluster). An error
/// with a [`DataPlaneError::wait_reason`] is a "not yet", to report as that wait.
///
/// `endpoints` are the client URLs of the members, by ordinal.
pub async fn perform(
    addressing: &impl Addressing,
    endpoints: &BTreeMap<u32, String>,
    step: &Step,
) -> Result<(), DataPlaneError> {
    let all = |except: Option<u32>| -> Vec<&str> {
        endpoints.iter().filter(|(k, _)| Some(**k) != except).map(|(_, ep)| ep.as_str()).collect()
    };
    let endpoint_of = |ordinal: u32| endpoints.get(&ordinal).ok_or(DataPlaneError::UnknownOrdinal { ordinal });
    match step {
        Step::AddLearner { ordinal } => add_learner(&all(Some(*ordinal)), &addressing.peer_url(*ordinal)).await,
        Step::Promote { id, .. } => promote(&all(None), *id).await,
        Step::MoveLeader { from, from_ordinal, to, .. } => move_leader(endpoint_of(*from_ordinal)?, *from, *to).await,
        Step::Remove { id, ordinal } => remove(&all(Some(*ordinal)), *id).await,
        Step::Replace { id, ordinal } => {
            remove(&all(Some(*ordinal)), *id).await?;
            // The removal is what the caller's volume and pod deletion depend on; an alarm
            // left behind is cleared by a later pass (`Step::ClearAlarm`).
            if let Err(e) = clear_alarms(&all(Some(*ordinal)), *id, None).await {
                warn!(error = %e, id = format!("{id:x}"), "alarms of the replaced member not cleared yet");
            }
            Ok(())
        }
        Step::ClearAlarm { id } => clear_alarms(&all(None), *id, None).await,
        Step::Defragment { id, ordinal } => defragment(endpoint_of(*ordinal)?, Some(*id)).await,
        Step::RecoverNoSpace => recover_no_space(&all(None)).await,
        Step::Idle | Step::Wait { .. } | Step::Bootstrap | Step::DeleteStaleClaim { .. } | Step::RestartPod { .. } => {
            Ok(())
        }
    }
}

async fn add_learner(endpoints: &[&str], peer_url: &str) -> Result<(), DataPlaneError> {
    let options = MemberAddOptions::new().with_is_learner();
    match on_any(endpoints, |mut c: Client| {
        let options = options.clone();
        async move { c.member_add([peer_url], Some(options)).await }
    })
    .await
    {
        Ok(r) => {
            info!(peer_url, id = ?r.member().map(|m| format!("{:x}", m.id())), "learner added");
            Ok(())
        }
        Err(e) if e.says(PEER_URL_EXISTS) => {
            debug!(peer_url, "peer URL already a member");
            Ok(())
        }
        Err(e) => Err(e.settle()),
    }
}

async fn promote(endpoints: &[&str], id: u64) -> Result<(), DataPlaneError> {
    match on_any(endpoints, |mut c: Client| async move { c.member_promote(id).await }).await {
        Ok(_) => {
            info!(id = format!("{id:x}"), "learner promoted");
            Ok(())
        }
        Err(e) if e.says(LEARNER_NOT_READY) => Err(DataPlaneError::LearnerNotReady { id }),
        Err(e) if e.says(NOT_A_LEARNER) => Ok(()),
        Err(e) => Err(e.settle()),
    }
}

/// Sent to the leader itself (etcd only accepts it there). Done when `to` leads already.
async fn move_leader(endpoint: &str, from: u64, to: u64) -> Result<(), DataPlaneError> {
    let mut client = connect(endpoint, REQUEST_TIMEOUT).await?;
    let status = deadline(endpoint, REQUEST_TIMEOUT, client.status()).await?;
    match status.leader() {
        leader if leader == to => Ok(()),
        leader if leader != from => Err(DataPlaneError::LeaderChanged { expected: from, actual: leader }),
        _ => {
            deadline(endpoint, REQUEST_TIMEOUT, client.move_leader(to)).await?;
            info!(from = format!("{from:x}"), to = format!("{to:x}"), "leadership moved");
            Ok(())
        }
    }
}

async fn remove(endpoints: &[&str], id: u64) -> Result<(), DataPlaneError> {
    match on_any(endpoints, |mut c: Client| async move { c.member_remove(id).await }).await {
        Ok(_) => {
            info!(id = format!("{id:x}"), "member removed");
            Ok(())
        }
        Err(e) if e.says(MEMBER_NOT_FOUND) => Ok(()),
        Err(e) => Err(e.settle()),
    }
}

/// Disarms the alarms of member `id` (of one type, or all).
async fn clear_alarms(endpoints: &[&str], id: u64, only: Option<AlarmType>) -> Result<(), DataPlaneError> {
    let active =
        on_any(endpoints, |mut c: Client| async move { c.alarm(AlarmAction::Get, AlarmType::None, None).await })
            .await?;
    let targets: Vec<(u64, AlarmType)> = active
        .alarms()
        .iter()
        .filter(|a| (id == 0 || a.member_id() == id) && only.is_none_or(|t| a.alarm() == t))
        .map(|a| (a.member_id(), a.alarm()))
        .collect();
    for (member, alarm) in targets {
        let mut options = AlarmOptions::new();
        options.with_member(member);
        on_any(endpoints, |mut c: Client| {
            let options = options.clone();
            async move { c.alarm(AlarmAction::Deactivate, alarm, Some(options)).await }
        })
        .await?;
        info!(member = format!("{member:x}"), ?alarm, "alarm disarmed");
    }
    Ok(())
}

/// Defragments the member at `endpoint`, after checking it is `expected` (when given).
async fn defragment(endpoint: &str, expected: Option<u64>) -> Result<(), DataPlaneError> {
    let mut client = connect(endpoint, DEFRAG_TIMEOUT).await?;
    if let Some(expected) = expected {
        let status = deadline(endpoint, REQUEST_TIMEOUT, client.status()).await?;
        let actual = status.header().map_or(0, |h| h.member_id());
        if actual != expected {
            return Err(DataPlaneError::MemberChanged { endpoint: endpoint.to_owned(), expected, actual });
        }
    }
    deadline(endpoint, DEFRAG_TIMEOUT, client.defragment()).await?;
    info!(endpoint, "member defragmented");
    Ok(())
}

/// Compacts to the current revision (physically, so that the space is free once this
/// returns), defragments every member that answers one at a time, then disarms NOSPACE.
/// A member that does not answer is skipped: it cannot be defragmented, and keeping the
/// whole cluster read-only for it would be worse.
async fn recover_no_space(endpoints: &[&str]) -> Result<(), DataPlaneError> {
    let current =
        on_any(endpoints, |mut c: Client| async move { c.get("\0", Some(GetOptions::new().with_count_only())).await })
            .await?;
    let revision = current.header().map_or(0, |h| h.revision());
    let compaction = CompactionOptions::new().with_physical();
    match on_any(endpoints, |mut c: Client| {
        let compaction = compaction.clone();
        async move { c.compact(revision, Some(compaction)).await }
    })
    .await
    {
        Ok(_) => info!(revision, "compacted"),
        Err(e) if e.says(COMPACTED) => debug!(revision, "already compacted"),
        Err(e) => return Err(e),
    }
    for endpoint in endpoints {
        match defragment(endpoint, None).await {
            Ok(()) => {}
            Err(e) if e.unreachable() => warn!(%endpoint, error = %e, "skipping a member that does not answer"),
            Err(e) => return Err(e),
        }
    }
    clear_alarms(endpoints, 0, Some(AlarmType::Nospace)).await
}
