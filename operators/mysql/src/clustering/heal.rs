//! Auto-healing inputs for [`super::decide`]: what the user allowed (`spec.autoHeal`) and
//! how long each replica's replication has been broken.
//!
//! A re-seeded replica loses its data volume and starts empty; replicas replicate from the
//! start of the primary's binary log (never purged), so the new server catches up on its
//! own. That discards whatever only that replica had, which is why re-seeding is opt-in.
//!
//! "Broken" needs memory across passes, and the memory must not be fooled by the clustering
//! task itself: reconfiguring a broken replica restarts its threads, which clears the
//! server's last error for a moment. So a broken run ends only when the replica is seen
//! replicating without error *and making progress* (its executed transactions moved, or it
//! has everything the primary has), never merely because the error text went away.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::gtid::GtidSet;
use super::observed::{Member, ServerState};

/// What the decision needs to re-seed replicas: the user's opt-ins and the broken streaks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Healing {
    /// Re-seed a replica with errant transactions (`spec.autoHeal.reseedErrant`).
    pub reseed_errant: bool,
    /// Re-seed a replica whose replication has been broken this long
    /// (`spec.autoHeal.reseedBrokenAfterSeconds`); `None`: never.
    pub reseed_broken_after: Option<Duration>,
    /// Per ordinal, how long its replication has been broken (see [`BrokenClock`]). Members
    /// absent are not broken.
    pub broken_for: BTreeMap<u32, Duration>,
}

/// When a member's current broken run started, and what it had executed then.
#[derive(Clone, Debug)]
struct Run {
    since: Instant,
    executed: GtidSet,
}

/// Remembers, per ordinal, since when its replication has been broken. Kept by the
/// clustering task between passes; pure (the caller passes the time), so tests drive it.
#[derive(Clone, Debug, Default)]
pub struct BrokenClock(BTreeMap<u32, Run>);

impl BrokenClock {
    /// Updates the runs from one pass's members and returns how long each broken member has
    /// been broken at `now`. `primary` is the recorded primary (never broken: it has no
    /// source).
    ///
    /// - Only while the primary answers and is writable; otherwise every run is forgotten.
    /// - A replica whose receiver or applier stopped with an error starts a run (or
    ///   continues one).
    /// - A run ends when the replica replicates without error and has made progress (see
    ///   the module documentation), or when its server stops answering or its pod goes:
    ///   whatever comes back is a restarted or new server and gets a fresh start.
    /// - Anything in between (threads restarting, connecting) continues the run.
    pub fn observe(&mut self, members: &[Member], primary: Option<u32>, now: Instant) -> BTreeMap<u32, Duration> {
        let serving = primary
            .and_then(|p| members.iter().find(|m| m.ordinal == p))
            .and_then(|m| m.server.up())
            .filter(|s| !s.read_only);
        // Without a writable primary every replica's replication fails; that says nothing
        // about the replicas, so nothing is measured and every run starts again after.
        let Some(primary_executed) = serving.map(|s| &s.executed) else {
            self.0.clear();
            return BTreeMap::new();
        };
        self.0.retain(|ordinal, _| members.iter().any(|m| m.ordinal == *ordinal && Some(*ordinal) != primary));
        for m in members.iter().filter(|m| Some(m.ordinal) != primary) {
            let ServerState::Up(s) = &m.server else {
                self.0.remove(&m.ordinal);
                continue;
            };
            let Some(r) = &s.replication else {
                // Not configured (new, or detached): nothing is broken yet.
                self.0.remove(&m.ordinal);
                continue;
            };
            let running = r.io_running && r.sql_running;
            // A receiver still (re)connecting is a network or account problem that a new
            // volume would not fix: it does not start a run.
            let stopped = !r.sql_running || !(r.io_running || r.io_connecting);
            if r.last_error.is_some() && stopped {
                self.0.entry(m.ordinal).or_insert_with(|| Run { since: now, executed: s.executed.clone() });
                continue;
            }
            let progressed = self
                .0
                .get(&m.ordinal)
                .is_some_and(|run| run.executed != s.executed || s.executed.contains(primary_executed));
            if running && r.last_error.is_none() && progressed {
                self.0.remove(&m.ordinal);
            }
        }
        self.0.iter().map(|(ordinal, run)| (*ordinal, now.saturating_duration_since(run.since))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Flavor;
    use crate::clustering::observed::{PodState, Replication, Server};

    fn g(s: &str) -> GtidSet {
        GtidSet::parse(Flavor::Mariadb, s).expect("valid position")
    }

    fn member(ordinal: u32, executed: &str, replication: Option<Replication>) -> Member {
        Member {
            ordinal,
            pod: PodState::Running { ready: true },
            role_label: None,
            reads_label: false,
            address: (format!("db-{ordinal}"), 3306),
            server: ServerState::Up(Server {
                read_only: ordinal != 0,
                executed: g(executed),
                replication,
                ..Default::default()
            }),
            unreachable_passes: 0,
        }
    }

    fn replicating() -> Replication {
        Replication {
            source_host: "db-0".into(),
            source_port: 3306,
            io_running: true,
            sql_running: true,
            ..Default::default()
        }
    }

    fn failed() -> Replication {
        Replication {
            sql_running: false,
            last_error: Some("Duplicate entry '7' for key 'PRIMARY'".into()),
            ..replicating()
        }
    }

    fn restarted() -> Replication {
        // Just after STOP/START SLAVE: threads running, the error cleared, no progress yet.
        replicating()
    }

    #[test]
    fn a_broken_run_lasts_through_restarts_until_the_replica_makes_progress() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut clock = BrokenClock::default();
        let primary = member(0, "0-100-20", None);
        let pass = |clock: &mut BrokenClock, r: Replication, executed: &str, s: u64| {
            clock.observe(&[primary.clone(), member(1, executed, Some(r))], Some(0), at(s))
        };
        assert!(pass(&mut clock, replicating(), "0-100-20", 0).is_empty(), "healthy: not broken");
        assert_eq!(pass(&mut clock, failed(), "0-100-10", 1)[&1], Duration::ZERO);
        // The task reconfigured it: threads run again, error gone, still stuck at 10.
        assert_eq!(pass(&mut clock, restarted(), "0-100-10", 5)[&1], Duration::from_secs(4));
        assert_eq!(pass(&mut clock, failed(), "0-100-10", 31)[&1], Duration::from_secs(30));
        // It applies again: the run ends.
        assert!(pass(&mut clock, replicating(), "0-100-12", 32).is_empty());
    }

    #[test]
    fn a_caught_up_replica_ends_the_run_even_on_a_quiet_primary() {
        let t0 = Instant::now();
        let mut clock = BrokenClock::default();
        let primary = member(0, "0-100-10", None);
        clock.observe(&[primary.clone(), member(1, "0-100-10", Some(failed()))], Some(0), t0);
        let left = clock.observe(&[primary, member(1, "0-100-10", Some(replicating()))], Some(0), t0);
        assert!(left.is_empty());
    }

    #[test]
    fn an_unreachable_or_unconfigured_server_starts_afresh() {
        let t0 = Instant::now();
        let mut clock = BrokenClock::default();
        let primary = member(0, "0-100-10", None);
        clock.observe(&[primary.clone(), member(1, "0-100-5", Some(failed()))], Some(0), t0);
        let mut gone = member(1, "", None);
        gone.server = ServerState::Unreachable("no running pod".into());
        assert!(clock.observe(&[primary.clone(), gone], Some(0), t0).is_empty());
        clock.observe(&[primary.clone(), member(1, "0-100-5", Some(failed()))], Some(0), t0);
        assert!(clock.observe(&[primary.clone(), member(1, "", None)], Some(0), t0).is_empty(), "a new, empty server");
        // A receiver retrying its connection (wrong password, network) is not broken.
        let retrying = Replication { io_running: false, io_connecting: true, ..failed() };
        let retrying = Replication { sql_running: true, ..retrying };
        assert!(clock.observe(&[primary, member(1, "0-100-5", Some(retrying))], Some(0), t0).is_empty());
    }

    #[test]
    fn nothing_is_measured_while_the_primary_is_down() {
        let t0 = Instant::now();
        let mut clock = BrokenClock::default();
        let primary = member(0, "0-100-10", None);
        clock.observe(&[primary.clone(), member(1, "0-100-5", Some(failed()))], Some(0), t0);
        let mut down = primary.clone();
        down.server = ServerState::Unreachable("connection refused".into());
        let later = t0 + Duration::from_secs(600);
        assert!(clock.observe(&[down, member(1, "0-100-5", Some(failed()))], Some(0), later).is_empty());
        let back = clock.observe(&[primary, member(1, "0-100-5", Some(failed()))], Some(0), later);
        assert_eq!(back[&1], Duration::ZERO, "a fresh run once the primary serves again");
    }

    #[test]
    fn the_primary_and_removed_members_are_never_broken() {
        let t0 = Instant::now();
        let mut clock = BrokenClock::default();
        // A primary that still shows the channel it had as a replica, with an old error.
        let primary = member(0, "0-100-10", Some(failed()));
        let broken = clock.observe(&[primary.clone(), member(1, "0-100-5", Some(failed()))], Some(0), t0);
        assert_eq!(broken.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert!(clock.observe(&[primary], Some(0), t0).is_empty(), "member 1 is gone");
    }
}
