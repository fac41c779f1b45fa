//! Where the read-write Service leads new connections, and led them a moment ago.
//!
//! Clients follow the primary label, but not at once: the EndpointSlice controller follows
//! the label, and kube-proxy follows the EndpointSlice (applying changes at most once a
//! second by default, later on a loaded node). A former primary that lost its label while
//! it was paused or cut off can therefore still get new connections when it wakes, and
//! serve them what it had: older than what a new primary has accepted meanwhile, or, once
//! demoted, the commits it then releases that nobody acknowledged. porcupine saw the first
//! in e2e: a stale read 2 s after the label moved, on a loaded machine. So a new primary
//! takes writes, and a former one that no replica acknowledges is demoted, only once no
//! EndpointSlice has listed another member for [`SETTLE`], or once that member can serve
//! nobody: its pod is being deleted (the kubelet starts nothing in it again) and its
//! server refuses connections. A primary handed over before its pod goes (a drain) is
//! stopped right after the hand-over, so the new one need not wait out [`SETTLE`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::observed::{Member, PodState, ServerState};

/// How long a member stays counted as routed after its endpoint was last listed: time for
/// kube-proxy to apply the change (its default `--iptables-min-sync-period` is 1 s).
pub const SETTLE: Duration = Duration::from_secs(2);

/// What the task remembers between passes: when each member was last listed.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    seen: BTreeMap<u32, Instant>,
}

impl Routes {
    /// Takes the members the read-write Service's EndpointSlices list now, read at `now`,
    /// and those that can serve nobody whatever the Service says (`closed`: pod being
    /// deleted, server refusing connections); returns those listed within the last
    /// [`SETTLE`] (these included) that are not closed.
    pub fn observe(&mut self, listed: &BTreeSet<u32>, closed: &BTreeSet<u32>, now: Instant) -> BTreeSet<u32> {
        for ordinal in listed {
            self.seen.insert(*ordinal, now);
        }
        self.seen.retain(|ordinal, at| now.saturating_duration_since(*at) < SETTLE && !closed.contains(ordinal));
        self.seen.keys().copied().collect()
    }
}

/// The members that can serve no client whatever the read-write Service lists: pod being
/// deleted (the kubelet restarts nothing in it) and server refusing connections (a paused
/// or cut-off server does not refuse: it is not among them).
pub fn closed(members: &[Member]) -> BTreeSet<u32> {
    members
        .iter()
        .filter(|m| m.pod == PodState::Terminating && matches!(m.server, ServerState::Refused(_)))
        .map(|m| m.ordinal)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_counts_as_routed_until_it_has_been_unlisted_for_the_settling_time() {
        let mut routes = Routes::default();
        let t0 = Instant::now();
        let none = BTreeSet::new();
        assert_eq!(routes.observe(&[0, 1].into(), &none, t0), [0, 1].into());
        // The former primary (0) is no longer listed: still counted for SETTLE.
        assert_eq!(routes.observe(&[1].into(), &none, t0 + Duration::from_millis(500)), [0, 1].into());
        assert_eq!(routes.observe(&[1].into(), &none, t0 + SETTLE - Duration::from_millis(1)), [0, 1].into());
        assert_eq!(routes.observe(&[1].into(), &none, t0 + SETTLE), [1].into());
        // Listed again: counted again, from then on.
        assert_eq!(routes.observe(&[0, 1].into(), &none, t0 + SETTLE * 2), [0, 1].into());
        assert_eq!(routes.observe(&BTreeSet::new(), &none, t0 + SETTLE * 3), BTreeSet::new());
    }

    #[test]
    fn only_a_terminating_member_that_refuses_connections_is_closed() {
        use crate::clustering::fixtures::{primary, replica};
        let mut members = vec![primary(0, "0-100-1"), replica(1, 0, "0-100-1"), replica(2, 0, "0-100-1")];
        members[0].pod = PodState::Terminating;
        assert!(closed(&members).is_empty(), "terminating but serving");
        members[0].server = ServerState::Refused("connection refused".into());
        members[1].server = ServerState::Refused("connection refused".into());
        members[2].pod = PodState::Terminating;
        members[2].server = ServerState::Unreachable("no answer within 3s".into());
        // 1 may start again (its pod runs); 2 may be paused and wake up.
        assert_eq!(closed(&members), [0].into());
    }

    #[test]
    fn a_closed_member_stops_counting_at_once_listed_or_not() {
        let mut routes = Routes::default();
        let t0 = Instant::now();
        let none = BTreeSet::new();
        assert_eq!(routes.observe(&[0].into(), &none, t0), [0].into());
        // Handed over and stopped: still listed (the EndpointSlice lags), but nothing
        // listens, and in a terminating pod nothing starts again.
        assert_eq!(routes.observe(&[0, 1].into(), &[0].into(), t0 + Duration::from_millis(100)), [1].into());
        assert_eq!(routes.observe(&[1].into(), &none, t0 + Duration::from_millis(200)), [1].into());
    }
}
