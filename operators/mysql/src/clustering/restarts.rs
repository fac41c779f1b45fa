//! Replicas that restarted and may have lost acknowledged writes.
//!
//! With semi-sync, a commit is acknowledged once a replica has written it to its relay log,
//! before it applies it. MariaDB discards the relay log whenever both replication threads
//! start again in GTID mode (after any restart, whatever `relay_log_recovery` and
//! `sync_relay_log` say: measured against MariaDB 10.11, see docs/mysql.md), and MySQL's
//! `relay_log_recovery=ON` does the same. So a replica that restarts may come back without
//! a transaction that only it acknowledged. Once it has received again everything the
//! primary had when it came back, nothing is missing; until then a failover must not count
//! it among the replicas of which one surely holds every acknowledged write.
//!
//! Restarts are seen in two readings of every observation, each covering the other's blind
//! spot: the id of the observing connection (ids only grow while a server runs, and every
//! pass opens a new connection, so a smaller id is a restart, however young the server),
//! and the uptime (one that grew less than the time between two observations is a
//! restart, however many connections the restarted server has had since). No clock is
//! compared. A new operator process starts with an empty memory, so restarts before its
//! first pass are not seen.

use std::collections::BTreeMap;
use std::time::Instant;

use super::gtid::GtidSet;
use super::observed::Member;

/// Seconds of slack between the uptime's growth and the time between two observations
/// (an uptime is read in whole seconds, some time after the pass starts).
const SLACK_SECONDS: u64 = 2;

/// What the task remembers between passes.
#[derive(Clone, Debug, Default)]
pub struct Restarts {
    /// Each server's last uptime and connection id, and when they were read.
    seen: BTreeMap<u32, (Option<u64>, Option<u64>, Instant)>,
    /// Replicas that restarted and have not caught up since, with what the primary had
    /// executed when it was first seen answering after the restart (`None`: not yet).
    pending: BTreeMap<u32, Option<GtidSet>>,
}

impl Restarts {
    /// Takes one pass's observation of `members` (the recorded primary `primary`) read at
    /// `now`; returns the replicas that restarted and have not caught up, each with what it
    /// must have received to be complete again (`None` when not known: the primary has not
    /// answered since).
    pub fn observe(
        &mut self,
        members: &[Member],
        primary: Option<u32>,
        now: Instant,
    ) -> BTreeMap<u32, Option<GtidSet>> {
        self.seen.retain(|o, _| members.iter().any(|m| m.ordinal == *o));
        self.pending.retain(|o, _| members.iter().any(|m| m.ordinal == *o) && Some(*o) != primary);
        for m in members {
            let Some(s) = m.server.up() else { continue };
            let (uptime, connection) = (s.uptime_seconds, s.connection_id);
            let restarted = self.seen.get(&m.ordinal).is_some_and(|(uptime_before, connection_before, at)| {
                let fewer_connections = connection.zip(*connection_before).is_some_and(|(now, before)| now < before);
                let younger = uptime.zip(*uptime_before).is_some_and(|(now_up, before)| {
                    let expected = before.saturating_add(now.saturating_duration_since(*at).as_secs());
                    now_up.saturating_add(SLACK_SECONDS) < expected
                });
                fewer_connections || younger
            });
            self.seen.insert(m.ordinal, (uptime, connection, now));
            if restarted && Some(m.ordinal) != primary {
                self.pending.insert(m.ordinal, None);
            }
        }
        let primary_executed = primary
            .and_then(|p| members.iter().find(|m| m.ordinal == p))
            .and_then(|m| m.server.up())
            .filter(|s| !s.read_only)
            .map(|s| s.executed.clone());
        let mut caught_up = Vec::new();
        for (ordinal, needed) in &mut self.pending {
            if needed.is_none() {
                needed.clone_from(&primary_executed);
            }
            let received =
                members.iter().find(|m| m.ordinal == *ordinal).and_then(|m| m.server.up()).map(|s| s.received());
            if let (Some(needed), Some(received)) = (needed.as_ref(), received)
                && received.contains(needed)
            {
                caught_up.push(*ordinal);
            }
        }
        for o in caught_up {
            self.pending.remove(&o);
        }
        self.pending.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clustering::fixtures::{g, primary, replica, server};

    fn with_uptime(mut m: Member, uptime: u64) -> Member {
        server(&mut m).uptime_seconds = Some(uptime);
        m
    }

    fn with_connection(mut m: Member, uptime: u64, connection: u64) -> Member {
        server(&mut m).uptime_seconds = Some(uptime);
        server(&mut m).connection_id = Some(connection);
        m
    }

    #[test]
    fn a_young_server_restarted_within_the_slack_is_seen_by_its_connection_ids() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        let first = [with_connection(primary(0, "0-1-3"), 9, 40), with_connection(replica(1, 0, "0-1-3"), 1, 12)];
        assert!(r.observe(&first, Some(0), t0).is_empty());
        // Half a second later: uptime 0 is within the slack, but the id started again.
        let t1 = t0 + std::time::Duration::from_millis(500);
        let second = [with_connection(primary(0, "0-1-3"), 9, 41), with_connection(replica(1, 0, "0-1-2"), 0, 3)];
        assert_eq!(r.observe(&second, Some(0), t1), BTreeMap::from([(1, Some(g("0-1-3")))]));
        // Ids that only grow are no restart.
        let mut again = Restarts::default();
        again.observe(&first, Some(0), t0);
        let grown = [with_connection(primary(0, "0-1-3"), 9, 41), with_connection(replica(1, 0, "0-1-3"), 1, 13)];
        assert!(again.observe(&grown, Some(0), t1).is_empty());
    }

    #[test]
    fn a_replica_whose_uptime_fell_is_pending_until_it_has_what_the_primary_had() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        let first = [with_uptime(primary(0, "0-1-10"), 1000), with_uptime(replica(1, 0, "0-1-10"), 1000)];
        assert!(r.observe(&first, Some(0), t0).is_empty());
        // Five seconds later the replica's uptime is 1: it restarted, and lost its relay log.
        let t1 = t0 + Duration::from_secs(5);
        let mut back = replica(1, 0, "0-1-8");
        server(&mut back).replication = None;
        let second = [with_uptime(primary(0, "0-1-12"), 1005), with_uptime(back, 1)];
        assert_eq!(r.observe(&second, Some(0), t1), BTreeMap::from([(1, Some(g("0-1-12")))]));
        // Still behind what the primary had then: still pending, with the same target.
        let third = [with_uptime(primary(0, "0-1-20"), 1006), with_uptime(replica(1, 0, "0-1-11"), 2)];
        assert_eq!(r.observe(&third, Some(0), t1 + Duration::from_secs(1)), BTreeMap::from([(1, Some(g("0-1-12")))]));
        // Received it: complete again.
        let fourth = [with_uptime(primary(0, "0-1-21"), 1007), with_uptime(replica(1, 0, "0-1-12"), 3)];
        assert!(r.observe(&fourth, Some(0), t1 + Duration::from_secs(2)).is_empty());
    }

    #[test]
    fn a_restart_while_the_primary_is_down_has_no_known_target() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        let mut dead = primary(0, "0-1-10");
        dead.server = crate::clustering::observed::ServerState::Unreachable("killed".into());
        let first = [with_uptime(primary(0, "0-1-10"), 500), with_uptime(replica(1, 0, "0-1-10"), 500)];
        r.observe(&first, Some(0), t0);
        let second = [dead, with_uptime(replica(1, 0, "0-1-9"), 0)];
        assert_eq!(r.observe(&second, Some(0), t0 + Duration::from_secs(30)), BTreeMap::from([(1, None)]));
    }

    #[test]
    fn uptime_that_kept_pace_is_no_restart_even_across_missed_observations() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        r.observe(&[with_uptime(primary(0, "0-1-1"), 100), with_uptime(replica(1, 0, "0-1-1"), 100)], Some(0), t0);
        // Unreachable for a minute, then answering with an uptime a minute later.
        let later = [with_uptime(primary(0, "0-1-1"), 160), with_uptime(replica(1, 0, "0-1-1"), 159)];
        assert!(r.observe(&later, Some(0), t0 + Duration::from_secs(60)).is_empty());
    }

    #[test]
    fn the_primary_is_never_pending() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        r.observe(&[with_uptime(primary(0, "0-1-1"), 100)], Some(0), t0);
        assert!(r.observe(&[with_uptime(primary(0, "0-1-1"), 1)], Some(0), t0 + Duration::from_secs(9)).is_empty());
    }
}
