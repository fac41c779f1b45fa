//! One pass of the clustering loop without Kubernetes in it: gather every server's state
//! (the primary's position last), and perform the decided operation on the servers. The
//! controller adds pods, labels and status around it; the integration tests drive it
//! against real servers directly.

use std::collections::BTreeMap;

use futures::future::join_all;

use super::dataplane::{DataPlane, DataPlaneError, Endpoint};
use super::decide::{Operation, Role};
use super::gtid::GtidSet;
use super::observed::{Member, Observed, PodState, ServerState};

/// What the caller knows of a member before asking its server.
#[derive(Clone, Debug)]
pub struct Target {
    /// StatefulSet ordinal.
    pub ordinal: u32,
    /// Its pod.
    pub pod: PodState,
    /// Its current role label.
    pub role_label: Option<String>,
    /// Whether it carries the read-only Service's label.
    pub reads_label: bool,
    /// Where the operator reaches it.
    pub endpoint: Endpoint,
    /// Where replicas reach it (stable DNS name and port).
    pub address: (String, u16),
}

/// How long a pass waits for a leaving member that is not the primary (see [`gather`]).
const LEAVING_OBSERVE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(300);

/// Remembers, per ordinal, how many passes in a row a server did not answer.
#[derive(Clone, Debug, Default)]
pub struct Streaks(BTreeMap<u32, u32>);

/// Asks every server in parallel, then reads the recorded primary's position once more:
/// a replica read before the primary can only be behind it, never ahead, so a busy primary
/// never makes its replicas look errant.
pub async fn gather(dp: &DataPlane, targets: &[Target], primary: Option<u32>, streaks: &mut Streaks) -> Vec<Member> {
    let states = join_all(targets.iter().map(|t| async {
        if matches!(t.pod, PodState::Missing | PodState::Pending) {
            return ServerState::Unreachable("no running pod".into());
        }
        // A member leaving that is no longer the primary (a primary just handed over, a
        // replica being deleted) is given little time: a server shutting down can hold a
        // connection attempt for its whole deadline, and every pass waits for its slowest
        // member (seen in e2e: a pass right after a hand-over took 1.6 s, and the replica
        // that acknowledges the new primary's commits was pointed at it that much later).
        if t.pod == PodState::Terminating && Some(t.ordinal) != primary {
            return dp.observe_within(&t.endpoint, LEAVING_OBSERVE_TIMEOUT).await;
        }
        dp.observe(&t.endpoint).await
    }))
    .await;
    let mut members: Vec<Member> = targets
        .iter()
        .zip(states)
        .map(|(t, server)| {
            let streak = streaks.0.entry(t.ordinal).or_default();
            *streak = if server.up().is_some() { 0 } else { streak.saturating_add(1) };
            Member {
                ordinal: t.ordinal,
                pod: t.pod.clone(),
                role_label: t.role_label.clone(),
                reads_label: t.reads_label,
                address: t.address.clone(),
                server,
                unreachable_passes: *streak,
            }
        })
        .collect();
    if let Some(p) = primary
        && let Some(m) = members.iter_mut().find(|m| m.ordinal == p)
        && let ServerState::Up(s) = &mut m.server
        && let Some(t) = targets.iter().find(|t| t.ordinal == p)
        && let Ok(text) = dp.executed(&t.endpoint).await
        && let Ok(set) = GtidSet::parse(dp.flavor().flavor(), &text)
    {
        s.executed = set;
    }
    members
}

/// What the caller must do after an operation, besides the servers' changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing more.
    None,
    /// Record this ordinal as the primary (status), before anything else.
    RecordPrimary(u32),
    /// A failover: record `primary` as the primary and `deposed` as the one it replaced.
    RecordFailover {
        /// The new primary.
        primary: u32,
        /// The primary it replaced.
        deposed: u32,
    },
    /// Change these pods' role labels, then their read-only Service labels (see
    /// [`Operation::Relabel`]).
    Relabel {
        /// Ordinal and role label.
        changes: Vec<(u32, Option<Role>)>,
        /// Ordinal and whether it serves reads.
        reads: Vec<(u32, bool)>,
    },
    /// Delete this member's data volume, then its pod (a re-seed: Kubernetes work only).
    Rebuild(u32),
}

/// Performs `op` on the servers of `targets`.
pub async fn perform(
    dp: &DataPlane,
    op: &Operation,
    o: &Observed,
    targets: &[Target],
    wait_count: u32,
) -> Result<Effect, DataPlaneError> {
    let ep = |ordinal: u32| targets.iter().find(|t| t.ordinal == ordinal).map(|t| &t.endpoint);
    let missing = |ordinal: u32| DataPlaneError::Timeout {
        endpoint: format!("member {ordinal} (no endpoint)"),
        timeout: std::time::Duration::ZERO,
    };
    let semi_sync = o.semi_sync && o.replicas > 1;
    match op {
        Operation::Nothing | Operation::Wait { .. } => Ok(Effect::None),
        Operation::Bootstrap { primary } => Ok(Effect::RecordPrimary(*primary)),
        Operation::MakeWritable { ordinal } => {
            dp.make_writable(ep(*ordinal).ok_or_else(|| missing(*ordinal))?, semi_sync, wait_count).await?;
            Ok(Effect::None)
        }
        Operation::Demote { ordinal } => {
            dp.demote(ep(*ordinal).ok_or_else(|| missing(*ordinal))?).await?;
            Ok(Effect::None)
        }
        Operation::ConfigureReplica { ordinal, source } => {
            let src = targets.iter().find(|t| t.ordinal == *source).ok_or_else(|| missing(*source))?;
            dp.configure_replica(ep(*ordinal).ok_or_else(|| missing(*ordinal))?, (&src.address.0, src.address.1))
                .await?;
            Ok(Effect::None)
        }
        Operation::Fence { ordinals } => {
            for r in
                join_all(ordinals.iter().map(|i| async move { dp.fence(ep(*i).ok_or_else(|| missing(*i))?).await }))
                    .await
            {
                r?;
            }
            Ok(Effect::None)
        }
        Operation::Promote { ordinal, from, received } => {
            dp.detach(ep(*ordinal).ok_or_else(|| missing(*ordinal))?, received).await?;
            Ok(Effect::RecordFailover { primary: *ordinal, deposed: *from })
        }
        Operation::Switchover { from, to, terminating } => {
            // The replicas to follow the new primary: those that answer (one that does not
            // cannot receive either, and would only hold the hand-over up).
            let others: Vec<&Endpoint> = o
                .members
                .iter()
                .filter(|m| m.ordinal != *from && m.ordinal != *to && m.server.up().is_some())
                .filter_map(|m| ep(m.ordinal))
                .collect();
            let target = targets.iter().find(|t| t.ordinal == *to).ok_or_else(|| missing(*to))?;
            let old = ep(*from).ok_or_else(|| missing(*from))?;
            dp.switchover(old, &target.endpoint, semi_sync, wait_count).await?;
            let source = (target.address.0.as_str(), target.address.1);
            if *terminating {
                dp.let_go(old, &others, source).await;
            } else {
                dp.follow(&others, source).await;
            }
            Ok(Effect::RecordPrimary(*to))
        }
        Operation::Relabel { changes, reads } => Ok(Effect::Relabel { changes: changes.clone(), reads: reads.clone() }),
        Operation::Reseed { ordinal, .. } => Ok(Effect::Rebuild(*ordinal)),
    }
}
