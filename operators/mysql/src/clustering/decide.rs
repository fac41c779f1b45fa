//! The clustering decision: a pure function from what one pass observed to the cluster's
//! health, the role each member should be labelled with, and at most one operation.
//!
//! Checks run in order of safety: a second writable server is demoted before anything
//! else; a primary that does not answer is failed over only when enough replicas answer
//! that one of them must hold every acknowledged write, only after every replica is fenced
//! (receiver stopped, so the old primary gets no more acknowledgements), and only to a
//! replica whose received transactions contain every other's. Neither a new primary's
//! first writes nor the demotion of a former one that nobody acknowledges happen while the
//! read-write Service may still lead new connections to another member
//! ([`super::routes`]). Anything else waits, with a reason that reaches a condition and an
//! Event.
//!
//! Re-seeding (opt-in, `spec.autoHeal`) comes after every repair of the primary and before
//! replicas are (re)configured: one replica at a time, never the primary, and only while
//! enough other replicas are healthy that the primary's commits keep being acknowledged.

use std::collections::BTreeSet;

use statecraft_shared::reason::{Common, Reason};

use super::gtid::GtidSet;
use super::observed::{Member, Observed, PodState, Replication, Server, ServerState};
use crate::reason::MySql;

/// Passes in a row a primary whose pod still runs must fail to answer before a failover
/// (a pod that is gone, terminating or not started is failed over at once: no server runs
/// in it).
pub const FAILOVER_AFTER_PASSES: u32 = 2;
/// A replica lagging more than this is not chosen as a switchover target.
pub const SWITCHOVER_MAX_LAG_SECONDS: i64 = 10;

/// The cluster's health, shown as `status.phase` and behind the conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// `spec.stopped`: no servers.
    Stopped,
    /// `spec.paused`: nothing is changed.
    Paused,
    /// No primary has been chosen yet.
    Initializing,
    /// Primary writable, every replica replicating from it.
    Healthy,
    /// Primary writable, some replica missing, broken or errant.
    Degraded,
    /// The primary is down and a failover is under way.
    Failed,
    /// The primary is down and no failover is safe: a human (or the primary's return) is
    /// needed.
    Lost,
}

impl Health {
    /// The `status.phase` text: the same word as the reason.
    pub fn as_str(self) -> &'static str {
        self.reason().as_str()
    }

    /// The Ready (and Degraded) condition's reason when no wait gives one: the phase.
    pub fn reason(self) -> Reason {
        match self {
            Health::Stopped => MySql::Stopped.into(),
            Health::Paused => Common::Paused.into(),
            Health::Initializing => MySql::Initializing.into(),
            Health::Healthy => Common::Healthy.into(),
            Health::Degraded => Common::Degraded.into(),
            Health::Failed => MySql::Failed.into(),
            Health::Lost => MySql::Lost.into(),
        }
    }
}

/// The role label a member should carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Receives read-write traffic.
    Primary,
    /// Receives read-only traffic.
    Replica,
}

impl Role {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Role::Primary => crate::build::ROLE_PRIMARY,
            Role::Replica => crate::build::ROLE_REPLICA,
        }
    }
}

/// The one thing a pass does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Everything is as it should be.
    Nothing,
    /// Something stops progress; `reason` reaches the Ready condition and an Event.
    Wait {
        /// A [`MySql`] entry, which the task may replace with the pod problem that explains
        /// it (a [`statecraft_shared::reason::Common`] one).
        reason: Reason,
        /// What is waited for, for humans.
        message: String,
    },
    /// Record `primary` as the first primary of a new cluster.
    Bootstrap {
        /// Ordinal.
        primary: u32,
    },
    /// Turn semi-sync's source side on (with the acknowledgement count) and allow writes.
    MakeWritable {
        /// Ordinal of the recorded primary.
        ordinal: u32,
    },
    /// A writable server that is not the primary: make it read-only and drop its client
    /// connections (split-brain guard).
    Demote {
        /// Ordinal.
        ordinal: u32,
    },
    /// Point a replica at the primary with GTID auto-positioning and start it.
    ConfigureReplica {
        /// Ordinal of the replica.
        ordinal: u32,
        /// Ordinal of the primary.
        source: u32,
    },
    /// Stop the receiver of these replicas so the unreachable primary gets no
    /// acknowledgement and cannot commit anything more.
    Fence {
        /// Ordinals.
        ordinals: Vec<u32>,
    },
    /// Failover: let `ordinal` apply everything it received, forget its source, record it
    /// as the primary and make it writable.
    Promote {
        /// The new primary.
        ordinal: u32,
        /// The primary it replaces.
        from: u32,
        /// What it must have applied before writes are allowed.
        received: String,
    },
    /// Planned change of primary: old one read-only, target catches up, target promoted.
    Switchover {
        /// Current primary.
        from: u32,
        /// New primary.
        to: u32,
        /// The current primary's pod is being deleted (a drain, an eviction): once the
        /// target has everything, the old server is let go, so that it stops at once and
        /// the target takes writes without waiting for the read-write Service's routes
        /// (see `super::routes`).
        terminating: bool,
    },
    /// Put role labels right (`None` removes the label: no read-write traffic), then the
    /// read-only Service's labels.
    Relabel {
        /// Ordinal and the role label it should carry, in the order to apply them.
        changes: Vec<(u32, Option<Role>)>,
        /// Ordinal and whether it should carry the read-only Service's label
        /// ([`crate::build::READS_LABEL`]); applied with its role label, if it changes too.
        reads: Vec<(u32, bool)>,
    },
    /// Re-seed a replica the user allowed to be: delete its data volume, then its pod, so
    /// that the StatefulSet makes both again and the new, empty server replicates the
    /// primary's binary log from the start.
    Reseed {
        /// Ordinal of the replica.
        ordinal: u32,
        /// Why.
        why: ReseedReason,
    },
}

/// Why a replica is re-seeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReseedReason {
    /// It has transactions the primary lacks (named as in status).
    Errant(String),
    /// Its replication stopped with an error and has not recovered for this long.
    Broken {
        /// The receiver's or applier's last error.
        error: String,
        /// Whole seconds since it broke.
        seconds: u64,
    },
}

impl ReseedReason {
    /// For Events and conditions, in words.
    pub fn describe(&self) -> String {
        match self {
            ReseedReason::Errant(gtids) => {
                format!("errant transactions {gtids} (spec.autoHeal.reseedErrant)")
            }
            ReseedReason::Broken { error, seconds } => {
                format!("replication broken for {seconds} s (spec.autoHeal.reseedBrokenAfterSeconds): {error}")
            }
        }
    }
}

/// What the pass concluded about one member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Ordinal.
    pub ordinal: u32,
    /// The role label it should carry.
    pub role: Option<Role>,
    /// Serving in its role.
    pub healthy: bool,
    /// Transactions the primary does not have (MariaDB position or MySQL set), when errant.
    pub errant: Option<String>,
}

/// The result of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The cluster's health.
    pub health: Health,
    /// The operation to perform now.
    pub operation: Operation,
    /// Per member, in ordinal order.
    pub verdicts: Vec<Verdict>,
}

fn wait(reason: MySql, message: impl Into<String>) -> Operation {
    Operation::Wait { reason: reason.into(), message: message.into() }
}

/// Decides what to do with the cluster observed in `o`.
pub fn decide(o: &Observed) -> Decision {
    let mut verdicts: Vec<Verdict> =
        o.members.iter().map(|m| Verdict { ordinal: m.ordinal, role: None, healthy: false, errant: None }).collect();
    let member = |ordinal: u32| o.members.iter().find(|m| m.ordinal == ordinal);

    if o.replicas == 0 {
        return Decision { health: Health::Stopped, operation: Operation::Nothing, verdicts };
    }

    let Some(primary_ordinal) = o.recorded_primary else {
        let (health, operation) = bootstrap(o);
        return Decision { health: if o.paused { Health::Paused } else { health }, operation, verdicts };
    };

    // Split-brain guard first: a writable server that is not the recorded primary.
    let rogue = o.members.iter().find(|m| m.ordinal != primary_ordinal && m.server.up().is_some_and(|s| !s.read_only));

    let primary = member(primary_ordinal);
    let primary_server = primary.and_then(|m| m.server.up());

    // Classify replicas against the primary (when it answers).
    let mut replicas_ok = 0;
    let mut wanted_replicas = 0;
    for (m, v) in o.members.iter().zip(verdicts.iter_mut()) {
        if m.ordinal == primary_ordinal {
            let writable = primary_server.is_some_and(|s| !s.read_only);
            v.healthy = writable && !matches!(m.pod, PodState::Terminating);
            v.role = primary_server.map(|_| Role::Primary);
            continue;
        }
        if m.ordinal < o.replicas {
            wanted_replicas += 1;
        }
        let (Some(p), Some(s)) = (primary, m.server.up()) else { continue };
        let Some(ps) = p.server.up() else { continue };
        if !ps.executed.contains(&s.executed) {
            v.errant = Some(s.executed.missing_from(&ps.executed));
            continue;
        }
        // The primary itself said it does not hold this replica's last transaction.
        if s.replication.as_ref().is_some_and(|r| r.source_refused && points_at(r, p)) {
            v.errant = Some(format!("{} (not in the primary's binary log)", s.executed));
            continue;
        }
        if replicating_from(s, p) && m.ordinal < o.replicas && !matches!(m.pod, PodState::Terminating) {
            v.healthy = true;
            v.role = Some(Role::Replica);
            replicas_ok += 1;
        }
    }

    let operation = if o.paused {
        Operation::Nothing
    } else if let Some(r) = rogue {
        demote(o, r, &verdicts)
    } else if let (Some(p), Some(ps)) = (primary, primary_server) {
        primary_up(o, p, ps, &verdicts)
    } else {
        primary_down(o, primary_ordinal, primary)
    };

    let health = if o.paused {
        Health::Paused
    } else if primary_server.is_none() {
        match operation {
            Operation::Fence { .. } | Operation::Promote { .. } => Health::Failed,
            Operation::Wait { reason, .. } if reason == MySql::PrimaryUnreachable => Health::Degraded,
            _ => Health::Lost,
        }
    } else if verdicts.iter().find(|v| v.ordinal == primary_ordinal).is_some_and(|v| v.healthy)
        && replicas_ok == wanted_replicas
        && o.members.iter().filter(|m| m.ordinal < o.replicas).count() as u32 == o.replicas
    {
        Health::Healthy
    } else {
        Health::Degraded
    };
    Decision { health, operation, verdicts }
}

/// The split-brain guard: `rogue`, writable but not the recorded primary, is demoted at
/// once, unless clients may still reach it and no replica acknowledges its commits (a
/// former primary that woke up after a failover): then its commits can be acknowledged by
/// nobody and wait, and demoting it (which ends their wait, making them visible) must wait
/// until the Service no longer leads to it, its label removed first.
fn demote(o: &Observed, rogue: &Member, verdicts: &[Verdict]) -> Operation {
    let acknowledged = o.members.iter().any(|m| {
        m.server
            .up()
            .and_then(|s| s.replication.as_ref())
            .is_some_and(|r| (r.io_running || r.io_connecting) && points_at(r, rogue))
    });
    if acknowledged || !o.routed.contains(&rogue.ordinal) {
        return Operation::Demote { ordinal: rogue.ordinal };
    }
    relabel(o, verdicts, false).unwrap_or_else(|| {
        wait(
            MySql::FormerPrimaryStillRouted,
            format!(
                "member {} is writable and not the primary, and the read-write Service led new connections to it within the last {} s; no replica acknowledges its commits, so it is demoted once the Service no longer leads to it",
                rogue.ordinal,
                super::routes::SETTLE.as_secs()
            ),
        )
    })
}

/// Whether `r` is configured to replicate from `p`.
fn points_at(r: &Replication, p: &Member) -> bool {
    r.source_host == p.address.0 && r.source_port == p.address.1
}

/// Whether `s` replicates from `p` with both threads running.
fn replicating_from(s: &Server, p: &Member) -> bool {
    s.replication.as_ref().is_some_and(|r| r.io_running && r.sql_running && points_at(r, p))
}

/// Whether `s` is configured to replicate from `p`, its applier runs and its receiver is
/// connecting (not stopped): it will replicate as soon as the connection is made.
fn connecting_to(s: &Server, p: &Member) -> bool {
    s.replication.as_ref().is_some_and(|r| r.io_connecting && r.sql_running && points_at(r, p))
}

/// No primary recorded: wait for every wanted server, then choose the one whose history
/// contains all others (ordinal 0 for a new cluster).
fn bootstrap(o: &Observed) -> (Health, Operation) {
    let wanted: Vec<&Member> = o.members.iter().filter(|m| m.ordinal < o.replicas).collect();
    let missing: Vec<String> = (0..o.replicas)
        .filter(|i| !wanted.iter().any(|m| m.ordinal == *i && m.server.up().is_some()))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return (
            Health::Initializing,
            wait(MySql::WaitingForServers, format!("waiting for servers {} to answer", missing.join(", "))),
        );
    }
    let up: Vec<(u32, &Server)> = wanted.iter().filter_map(|m| m.server.up().map(|s| (m.ordinal, s))).collect();
    match superset(up.iter().map(|(i, s)| (*i, s.executed.clone()))) {
        Ok(primary) => (Health::Initializing, Operation::Bootstrap { primary }),
        Err(msg) => (Health::Initializing, wait(MySql::ConflictingHistories, msg)),
    }
}

/// The lowest ordinal whose set contains every other set, or why there is none.
fn superset(sets: impl Iterator<Item = (u32, GtidSet)>) -> Result<u32, String> {
    let sets: Vec<(u32, GtidSet)> = sets.collect();
    sets.iter().find(|(_, a)| sets.iter().all(|(_, b)| a.contains(b))).map(|(i, _)| *i).ok_or_else(|| {
        let described: Vec<String> = sets.iter().map(|(i, s)| format!("{i}: [{s}]")).collect();
        format!("no server has every transaction of the others ({}); refusing to choose", described.join("; "))
    })
}

fn primary_up(o: &Observed, p: &Member, ps: &Server, verdicts: &[Verdict]) -> Operation {
    let verdict = |ordinal: u32| verdicts.iter().find(|v| v.ordinal == ordinal);
    // The primary must have everything the replicas have before it takes writes. A
    // read-only primary (restarted, or restored) cannot tell an errant replica from its own
    // lost data, so any replica ahead of it stops this: safety over availability.
    if ps.read_only {
        for m in o.members.iter().filter(|m| m.ordinal != p.ordinal && Some(m.ordinal) != o.deposed) {
            if let Some(s) = m.server.up()
                && !ps.executed.contains(&s.received())
            {
                return wait(
                    MySql::PrimaryBehindReplica,
                    format!(
                        "primary {} lacks transactions member {} has ({}); not making it writable",
                        p.ordinal,
                        m.ordinal,
                        s.received().missing_from(&ps.executed)
                    ),
                );
            }
        }
        // Clients leave a former primary before this one takes writes: one that wakes up
        // (paused, cut off) still labelled would serve, through the same Service, reads
        // older than what the new one accepts, and, once demoted, reads of commits it
        // released that nobody acknowledged (seen by porcupine in e2e).
        let labelled_elsewhere: Vec<&Member> = o
            .members
            .iter()
            .filter(|m| {
                m.ordinal != p.ordinal
                    && m.pod != PodState::Missing
                    && m.role_label.as_deref() == Some(Role::Primary.label())
            })
            .collect();
        // A former primary that was handed over (read-only, with nothing this one lacks) or
        // that stopped in a pod being deleted serves what this one has until this one takes
        // writes, which waits until it serves no more (below): this one is labelled first,
        // so that the read-write Service never lists nobody. kube-proxy applies a second
        // change only its minimum sync period (1 s) after the first, and clients found no
        // route for that second when the old label went first (seen in e2e).
        let handed_over = labelled_elsewhere.iter().all(|m| match &m.server {
            ServerState::Up(s) => s.read_only && ps.executed.contains(&s.executed),
            ServerState::Refused(_) => m.pod == PodState::Terminating,
            ServerState::Unreachable(_) => false,
        });
        if !labelled_elsewhere.is_empty()
            && let Some(op) = relabel(o, verdicts, handed_over)
        {
            return op;
        }
        // The label has moved, but the Service's routes follow it a moment later.
        let routed: Vec<u32> = o.routed.iter().copied().filter(|k| *k != p.ordinal).collect();
        if !routed.is_empty() {
            return wait(
                MySql::FormerPrimaryStillRouted,
                format!(
                    "the read-write Service led new connections to member(s) {routed:?} within the last {} s; primary {} takes writes once it leads only to it",
                    super::routes::SETTLE.as_secs(),
                    p.ordinal
                ),
            );
        }
        return Operation::MakeWritable { ordinal: p.ordinal };
    }
    // A planned move away from the primary: its pod is being deleted, it is beyond the
    // wanted count (scale-down), or the user asked.
    let target = o.switchover_to.filter(|t| *t != p.ordinal);
    let leaving = matches!(p.pod, PodState::Terminating) || p.ordinal >= o.replicas;
    if target.is_some() || leaving {
        let eligible = |m: &&Member| {
            m.ordinal < o.replicas
                && verdict(m.ordinal).is_some_and(|v| v.healthy && v.role == Some(Role::Replica))
                && m.server
                    .up()
                    .and_then(|s| s.replication.as_ref())
                    .is_some_and(|r| r.lag_seconds.is_some_and(|l| l <= SWITCHOVER_MAX_LAG_SECONDS))
        };
        let chosen = match target {
            Some(t) => o.members.iter().find(|m| m.ordinal == t).filter(eligible),
            None => o.members.iter().filter(eligible).min_by_key(|m| m.ordinal),
        };
        return match chosen {
            Some(to) => Operation::Switchover {
                from: p.ordinal,
                to: to.ordinal,
                terminating: matches!(p.pod, PodState::Terminating),
            },
            None => wait(
                MySql::SwitchoverTargetNotReady,
                match target {
                    Some(t) => format!(
                        "switchover target {t} is not a healthy replica within {SWITCHOVER_MAX_LAG_SECONDS} s of the primary"
                    ),
                    None => format!("primary {} must move but no replica is healthy and caught up", p.ordinal),
                },
            ),
        };
    }

    // The acknowledgement setting follows the wanted size (after any move above, so a
    // scale-down switches over before it changes what commits wait for).
    let want_semi_sync = o.semi_sync && o.replicas > 1;
    if ps.semi_sync_source != want_semi_sync {
        return Operation::MakeWritable { ordinal: p.ordinal };
    }

    // Clients follow the primary label: a new primary gets it (and a former one loses it)
    // before any replica is seen to, so a replica that keeps failing cannot hold writes up.
    let primary_label = Some(Role::Primary.label());
    let misplaced = o.members.iter().zip(verdicts).any(|(m, v)| {
        m.pod != PodState::Missing
            && (m.ordinal == p.ordinal || m.role_label.as_deref() == primary_label)
            && m.role_label.as_deref() != v.role.map(Role::label)
    });
    if misplaced && let Some(op) = relabel(o, verdicts, false) {
        return op;
    }

    // A re-seed the user allowed, when it is safe; a refusal waits until nothing else is to
    // be done (reconfiguring a broken replica may still mend it meanwhile).
    // Labels first, so that clients leave the member before its pod goes.
    let refused = match reseed(o, p, verdicts) {
        Some(Ok(op)) => return relabel(o, verdicts, false).unwrap_or(op),
        Some(Err(wait)) => Some(wait),
        None => None,
    };

    // Replicas that are up, not errant and not replicating from the primary. One whose
    // receiver is (re)connecting to the right source is given time: reconfiguring it would
    // only restart the connection attempt.
    for m in o.members.iter().filter(|m| m.ordinal != p.ordinal && m.ordinal < o.replicas) {
        let (Some(v), Some(s)) = (verdict(m.ordinal), m.server.up()) else { continue };
        if v.errant.is_none()
            && !v.healthy
            && !matches!(m.pod, PodState::Terminating)
            && !connecting_to(s, p)
            && !o.recently_configured.contains(&(m.ordinal, p.ordinal))
        {
            return Operation::ConfigureReplica { ordinal: m.ordinal, source: p.ordinal };
        }
    }

    relabel(o, verdicts, false).or(refused).unwrap_or(Operation::Nothing)
}

/// The first replica due for a re-seed (opted in, errant or broken for long enough), as
/// the operation when it is safe now, or as the wait that says why not. `None`: nothing is
/// due.
///
/// Safe means: its pod runs (a terminating or missing one is being rebuilt already), every
/// other wanted replica is settled (one member at a time), and at least as many other
/// replicas are healthy as the primary waits acknowledgements for (at least one), so
/// commits keep being acknowledged while it rebuilds.
fn reseed(o: &Observed, p: &Member, verdicts: &[Verdict]) -> Option<Result<Operation, Operation>> {
    let verdict = |ordinal: u32| verdicts.iter().find(|v| v.ordinal == ordinal);
    let replicas = || o.members.iter().filter(|m| m.ordinal != p.ordinal && m.ordinal < o.replicas);
    let running = |m: &Member| matches!(m.pod, PodState::Running { .. });
    // Serving, or stuck (errant or broken) on a running pod: not being rebuilt.
    let settled = |m: &Member| {
        verdict(m.ordinal).is_some_and(|v| v.healthy)
            || running(m)
                && m.server.up().is_some()
                && (verdict(m.ordinal).is_some_and(|v| v.errant.is_some())
                    || o.heal.broken_for.contains_key(&m.ordinal))
    };
    let due = |m: &Member| -> Option<ReseedReason> {
        let v = verdict(m.ordinal)?;
        let s = m.server.up()?;
        if let Some(gtids) = &v.errant {
            return o.heal.reseed_errant.then(|| ReseedReason::Errant(gtids.clone()));
        }
        let after = o.heal.reseed_broken_after?;
        let broken_for = *o.heal.broken_for.get(&m.ordinal)?;
        let error = s.replication.as_ref()?.last_error.clone()?;
        (!v.healthy && broken_for >= after).then_some(ReseedReason::Broken { error, seconds: broken_for.as_secs() })
    };
    let (m, why) = replicas().filter(|m| running(m)).find_map(|m| due(m).map(|why| (m, why)))?;
    let name = m.ordinal;
    // A member that is neither serving nor stuck is being rebuilt (or is down): re-seeding
    // another now could leave too few servers.
    let unsettled = replicas().find(|r| r.ordinal != m.ordinal && !settled(r));
    if let Some(r) = unsettled {
        return Some(Err(wait(
            MySql::ReseedWaitsForMember,
            format!(
                "re-seeding member {name} ({}) waits until member {} serves again: one member at a time",
                why.describe(),
                r.ordinal
            ),
        )));
    }
    let healthy = replicas()
        .filter(|r| {
            r.ordinal != m.ordinal && verdict(r.ordinal).is_some_and(|v| v.healthy && v.role == Some(Role::Replica))
        })
        .count() as u32;
    let needed = o.ack_count.max(1);
    if healthy < needed {
        return Some(Err(wait(
            MySql::ReseedWaitsForHealthyReplicas,
            format!(
                "re-seeding member {name} ({}) waits: {healthy} other replica(s) healthy, {needed} needed to keep acknowledging the primary's commits",
                why.describe()
            ),
        )));
    }
    Some(Ok(Operation::Reseed { ordinal: name, why }))
}

/// Labels that differ from the verdicts, the primary label given last unless
/// `primary_first`: applied in this order, no two pods are ever labelled primary at once
/// (applied by ordinal, a new primary 0 was labelled while the old one, 1, still was:
/// porcupine saw reads of both). `primary_first` only where the other one serves the same
/// data as the new primary and stops serving before the new one takes writes.
fn relabel(o: &Observed, verdicts: &[Verdict], primary_first: bool) -> Option<Operation> {
    let mut changes: Vec<(u32, Option<Role>)> = o
        .members
        .iter()
        .zip(verdicts)
        .filter(|(m, v)| m.pod != PodState::Missing && m.role_label.as_deref() != v.role.map(Role::label))
        .map(|(m, v)| (m.ordinal, v.role))
        .collect();
    changes.sort_by_key(|(_, role)| (*role == Some(Role::Primary)) != primary_first);
    let reads: Vec<(u32, bool)> = o
        .members
        .iter()
        .zip(verdicts)
        .filter(|(m, _)| m.pod != PodState::Missing)
        .filter_map(|(m, v)| {
            let wanted = serves_reads(o, m, v);
            (wanted != m.reads_label).then_some((m.ordinal, wanted))
        })
        .collect();
    (!changes.is_empty() || !reads.is_empty()).then_some(Operation::Relabel { changes, reads })
}

/// Whether `m` should carry the read-only Service's label: a replica should, a member with
/// no role should not, and a primary keeps the label it has until the read-write Service's
/// EndpointSlices list it as primary. A promotion thus changes the read-write Service alone,
/// and the read-only Service lets the new primary go a pass later (the read-write change
/// never waits behind the read-only one in kube-proxy: see [`crate::build::READS_LABEL`]).
/// Meanwhile the read-only Service may lead to the new primary, which has every write.
fn serves_reads(o: &Observed, m: &Member, v: &Verdict) -> bool {
    match v.role {
        Some(Role::Replica) => true,
        None => false,
        Some(Role::Primary) => {
            let listed = m.role_label.as_deref() == Some(Role::Primary.label()) && o.routed.contains(&m.ordinal);
            m.reads_label && !listed
        }
    }
}

fn primary_down(o: &Observed, primary_ordinal: u32, primary: Option<&Member>) -> Operation {
    // A pod not started (recreated after a kill) runs no server either: a new operator
    // leader, whose count starts at zero, fails over as soon as the old one would have.
    let gone = primary.is_none_or(|m| matches!(m.pod, PodState::Missing | PodState::Terminating | PodState::Pending));
    let passes = primary.map_or(u32::MAX, |m| m.unreachable_passes);
    if !gone && passes < FAILOVER_AFTER_PASSES {
        return wait(
            MySql::PrimaryUnreachable,
            format!(
                "primary {primary_ordinal} did not answer {passes} time(s); failing over after {FAILOVER_AFTER_PASSES}"
            ),
        );
    }
    // Every replica that may hold an acknowledged write: the wanted ones, and, during a
    // scale-down, those beyond the wanted count whose pods still exist (they acknowledged
    // commits until now, so they are fenced and may be the one promoted).
    let leaving: BTreeSet<u32> = o
        .members
        .iter()
        .filter(|m| m.ordinal >= o.replicas && m.ordinal != primary_ordinal && m.pod != PodState::Missing)
        .map(|m| m.ordinal)
        .collect();
    let holders: BTreeSet<u32> =
        (0..o.replicas).chain(leaving.iter().copied()).filter(|k| *k != primary_ordinal).collect();
    let candidates: Vec<(&Member, &Server)> = o
        .members
        .iter()
        .filter(|m| holders.contains(&m.ordinal))
        .filter_map(|m| m.server.up().map(|s| (m, s)))
        .collect();
    let replicas = holders.len() as u32;
    if replicas == 0 {
        return wait(
            MySql::PrimaryDown,
            format!("the only server ({primary_ordinal}) is down; waiting for it to restart"),
        );
    }
    // While servers are being removed the primary may still have waited for the
    // acknowledgements of another size: count on one only (every replica must answer).
    let acks = if leaving.is_empty() { o.ack_count.max(1) } else { 1 };
    let needed = if o.semi_sync { replicas.saturating_sub(acks) + 1 } else { replicas };
    if (candidates.len() as u32) < needed {
        return wait(
            MySql::NotEnoughReplicasForSafeFailover,
            format!(
                "primary {primary_ordinal} is down and {} of {replicas} replicas answer; {needed} are needed to be sure one has every acknowledged write",
                candidates.len()
            ),
        );
    }
    // A replica that restarted and has not caught up since may have lost, with its relay
    // log, a write only it acknowledged: it counts only when another candidate has what it
    // would have needed (then nothing it could have acknowledged is missing).
    let intact = |ordinal: u32| match o.restarted.get(&ordinal) {
        None => true,
        Some(None) => false,
        Some(Some(needed)) => candidates.iter().any(|(m, s)| {
            m.ordinal != ordinal && !o.restarted.contains_key(&m.ordinal) && s.received().contains(needed)
        }),
    };
    let doubtful: Vec<u32> = candidates.iter().map(|(m, _)| m.ordinal).filter(|o| !intact(*o)).collect();
    if !doubtful.is_empty() && (candidates.len() - doubtful.len()) < needed as usize {
        return wait(
            MySql::ReplicaRestartedBeforeFailover,
            format!(
                "primary {primary_ordinal} is down and replica(s) {doubtful:?} restarted without catching up since: a write only \
                 they acknowledged may have been in the relay log their restart discarded, so no replica is known to have \
                 every acknowledged write; waiting for primary {primary_ordinal} to answer again"
            ),
        );
    }
    let unfenced: Vec<u32> = candidates
        .iter()
        .filter(|(_, s)| s.replication.as_ref().is_some_and(|r| r.io_running || r.io_connecting))
        .map(|(m, _)| m.ordinal)
        .collect();
    if !unfenced.is_empty() {
        return Operation::Fence { ordinals: unfenced };
    }
    match superset(candidates.iter().map(|(m, s)| (m.ordinal, s.received()))) {
        Ok(ordinal) => {
            let received = candidates
                .iter()
                .find(|(m, _)| m.ordinal == ordinal)
                .map(|(_, s)| s.received().to_string())
                .unwrap_or_default();
            Operation::Promote { ordinal, from: primary_ordinal, received }
        }
        Err(msg) => wait(MySql::ConflictingReplicaHistories, msg),
    }
}
