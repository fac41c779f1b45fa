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
//! compared. The time between two observations is taken at its shortest: from the end of
//! the pass that read the first to the start of the one that read the second. A pass that
//! waits for a server that does not answer (the observation timeout, 3 s, the very pass in
//! which a failover begins) must not make every replica look younger than it is, which
//! would hold the failover back as if they had all restarted. A new operator process starts with an empty memory, so restarts before its
//! first pass are not seen.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Instant;

use super::gtid::GtidSet;
use super::observed::Member;

/// Seconds of slack between the uptime's growth and the time between two observations
/// (an uptime is read in whole seconds, some time after the pass starts).
const SLACK_SECONDS: u64 = 2;

/// What the task remembers between passes.
#[derive(Clone, Debug, Default)]
pub struct Restarts {
    /// Each server's last uptime and connection id, and when the pass that read them ended.
    seen: BTreeMap<u32, (Option<u64>, Option<u64>, Instant)>,
    /// Replicas that restarted and have not caught up since, with what the primary had
    /// executed when it was first seen answering after the restart (`None`: not yet).
    pending: BTreeMap<u32, Option<GtidSet>>,
}

impl Restarts {
    /// Takes one pass's observation of `members` (the recorded primary `primary`), read
    /// between `read.start` and `read.end`; returns the replicas that restarted and have not caught up, each with what it
    /// must have received to be complete again (`None` when not known: the primary has not
    /// answered since).
    pub fn observe(
        &mut self,
        members: &[Member],
        primary: Option<u32>,
        read: Range<Instant>,
    ) -> BTreeMap<u32, Option<GtidSet>> {
        self.seen.retain(|o, _| members.iter().any(|m| m.ordinal == *o));
        self.pending.retain(|o, _| members.iter().any(|m| m.ordinal == *o) && Some(*o) != primary);
        for m in members {
            let Some(s) = m.server.up() else { continue };
            let (uptime, connection) = (s.uptime_seconds, s.connection_id);
            let restarted = self.seen.get(&m.ordinal).is_some_and(|(uptime_before, connection_before, ended)| {
                let fewer_connections = connection.zip(*connection_before).is_some_and(|(now, before)| now < before);
                let younger = uptime.zip(*uptime_before).is_some_and(|(now_up, before)| {
                    let expected = before.saturating_add(read.start.saturating_duration_since(*ended).as_secs());
                    now_up.saturating_add(SLACK_SECONDS) < expected
                });
                fewer_connections || younger
            });
            self.seen.insert(m.ordinal, (uptime, connection, read.end));
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

    /// A pass that read every server at `t`.
    fn at(t: Instant) -> Range<Instant> {
        t..t
    }

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
        assert!(r.observe(&first, Some(0), at(t0)).is_empty());
        // Half a second later: uptime 0 is within the slack, but the id started again.
        let t1 = t0 + std::time::Duration::from_millis(500);
        let second = [with_connection(primary(0, "0-1-3"), 9, 41), with_connection(replica(1, 0, "0-1-2"), 0, 3)];
        assert_eq!(r.observe(&second, Some(0), at(t1)), BTreeMap::from([(1, Some(g("0-1-3")))]));
        // Ids that only grow are no restart.
        let mut again = Restarts::default();
        again.observe(&first, Some(0), at(t0));
        let grown = [with_connection(primary(0, "0-1-3"), 9, 41), with_connection(replica(1, 0, "0-1-3"), 1, 13)];
        assert!(again.observe(&grown, Some(0), at(t1)).is_empty());
    }

    #[test]
    fn a_replica_whose_uptime_fell_is_pending_until_it_has_what_the_primary_had() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        let first = [with_uptime(primary(0, "0-1-10"), 1000), with_uptime(replica(1, 0, "0-1-10"), 1000)];
        assert!(r.observe(&first, Some(0), at(t0)).is_empty());
        // Five seconds later the replica's uptime is 1: it restarted, and lost its relay log.
        let t1 = t0 + Duration::from_secs(5);
        let mut back = replica(1, 0, "0-1-8");
        server(&mut back).replication = None;
        let second = [with_uptime(primary(0, "0-1-12"), 1005), with_uptime(back, 1)];
        assert_eq!(r.observe(&second, Some(0), at(t1)), BTreeMap::from([(1, Some(g("0-1-12")))]));
        // Still behind what the primary had then: still pending, with the same target.
        let third = [with_uptime(primary(0, "0-1-20"), 1006), with_uptime(replica(1, 0, "0-1-11"), 2)];
        assert_eq!(
            r.observe(&third, Some(0), at(t1 + Duration::from_secs(1))),
            BTreeMap::from([(1, Some(g("0-1-12")))])
        );
        // Received it: complete again.
        let fourth = [with_uptime(primary(0, "0-1-21"), 1007), with_uptime(replica(1, 0, "0-1-12"), 3)];
        assert!(r.observe(&fourth, Some(0), at(t1 + Duration::from_secs(2))).is_empty());
    }

    #[test]
    fn a_restart_while_the_primary_is_down_has_no_known_target() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        let mut dead = primary(0, "0-1-10");
        dead.server = crate::clustering::observed::ServerState::Unreachable("killed".into());
        let first = [with_uptime(primary(0, "0-1-10"), 500), with_uptime(replica(1, 0, "0-1-10"), 500)];
        r.observe(&first, Some(0), at(t0));
        let second = [dead, with_uptime(replica(1, 0, "0-1-9"), 0)];
        assert_eq!(r.observe(&second, Some(0), at(t0 + Duration::from_secs(30))), BTreeMap::from([(1, None)]));
    }

    #[test]
    fn uptime_that_kept_pace_is_no_restart_even_across_missed_observations() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        r.observe(&[with_uptime(primary(0, "0-1-1"), 100), with_uptime(replica(1, 0, "0-1-1"), 100)], Some(0), at(t0));
        // Unreachable for a minute, then answering with an uptime a minute later.
        let later = [with_uptime(primary(0, "0-1-1"), 160), with_uptime(replica(1, 0, "0-1-1"), 159)];
        assert!(r.observe(&later, Some(0), at(t0 + Duration::from_secs(60))).is_empty());
    }

    #[test]
    fn a_pass_slowed_by_a_server_that_does_not_answer_is_no_restart() {
        // The first pass is quick; the second waits 3 s for the primary, which stopped
        // answering: the replica's uptime was read at its start, 1.2 s after the first.
        let mut r = Restarts::default();
        let t0 = Instant::now();
        let first = [with_uptime(primary(0, "0-1-1"), 100), with_uptime(replica(1, 0, "0-1-1"), 100)];
        r.observe(&first, Some(0), t0..t0 + Duration::from_millis(100));
        let mut dead = primary(0, "0-1-1");
        dead.server = crate::clustering::observed::ServerState::Unreachable("timed out".into());
        let second = [dead, with_uptime(replica(1, 0, "0-1-1"), 101)];
        let read = t0 + Duration::from_millis(1200)..t0 + Duration::from_millis(4200);
        assert!(r.observe(&second, Some(0), read).is_empty(), "the replica did not restart");
        // A real restart in the same pass is still seen.
        let mut r = Restarts::default();
        r.observe(&first, Some(0), t0..t0 + Duration::from_millis(100));
        let mut dead = primary(0, "0-1-1");
        dead.server = crate::clustering::observed::ServerState::Unreachable("timed out".into());
        let back = [dead, with_uptime(replica(1, 0, "0-1-1"), 0)];
        let read = t0 + Duration::from_secs(5)..t0 + Duration::from_secs(8);
        assert_eq!(r.observe(&back, Some(0), read), BTreeMap::from([(1, None)]));
    }

    #[test]
    fn the_primary_is_never_pending() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        r.observe(&[with_uptime(primary(0, "0-1-1"), 100)], Some(0), at(t0));
        assert!(r.observe(&[with_uptime(primary(0, "0-1-1"), 1)], Some(0), at(t0 + Duration::from_secs(9))).is_empty());
    }
}
