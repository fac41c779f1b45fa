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

use super::observed::{PodState, ServerState};

/// How long a member stays counted as routed after its endpoint was last listed: time for
/// kube-proxy to apply the change (its default `--iptables-min-sync-period` is 1 s).
pub const SETTLE: Duration = Duration::from_secs(2);

/// A member's pod as the EndpointSlices name it: its ordinal and its pod's uid (a pod made
/// again under the same name is another pod).
pub type Listing = (u32, String);

/// What the task remembers between passes: when each pod was last listed, and the pods
/// that can serve nobody any more.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    seen: BTreeMap<String, (u32, Instant)>,
    closed: BTreeSet<String>,
}

impl Routes {
    /// Takes the pods the read-write Service's EndpointSlices list now, read at `now`, and
    /// those that can serve nobody whatever the Service says (`closed`: see [`Closed`]);
    /// returns the members whose pods were listed within the last [`SETTLE`] (these
    /// included) and were never seen closed. A closed pod stays closed: nothing starts in
    /// a pod being deleted, so an EndpointSlice that still lists it a moment later (they
    /// lag) leads nowhere.
    pub fn observe(&mut self, listed: &BTreeSet<Listing>, closed: &BTreeSet<Listing>, now: Instant) -> BTreeSet<u32> {
        self.closed.extend(closed.iter().map(|(_, uid)| uid.clone()));
        for (ordinal, uid) in listed {
            if !self.closed.contains(uid) {
                self.seen.insert(uid.clone(), (*ordinal, now));
            }
        }
        let closed_pods = &self.closed;
        self.seen.retain(|uid, (_, at)| now.saturating_duration_since(*at) < SETTLE && !closed_pods.contains(uid));
        // A closed pod no longer listed is gone for good (no EndpointSlice lists a deleted
        // pod again): forgotten, so the memory stays as small as the cluster.
        self.closed.retain(|uid| listed.iter().chain(closed).any(|(_, u)| u == uid));
        self.seen.values().map(|(ordinal, _)| *ordinal).collect()
    }
}

/// Whether a member's pod can serve no client whatever the read-write Service lists: it is
/// being deleted (the kubelet starts nothing in it again) and its server is stopped, as
/// the kubelet reports (`container_terminated`) or as a refused connection shows. A paused
/// or cut-off server does not refuse connections, so it is never taken for a stopped one.
pub fn closed(pod: &PodState, container_terminated: bool, server: &ServerState) -> bool {
    *pod == PodState::Terminating && (container_terminated || matches!(server, ServerState::Refused(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Member `i`'s pod, generation `g` (a pod made again under the same name is another).
    fn pod(i: u32, g: u32) -> Listing {
        (i, format!("uid-{i}-{g}"))
    }

    fn set(pods: &[Listing]) -> BTreeSet<Listing> {
        pods.iter().cloned().collect()
    }

    #[test]
    fn a_member_counts_as_routed_until_it_has_been_unlisted_for_the_settling_time() {
        let mut routes = Routes::default();
        let t0 = Instant::now();
        let none = BTreeSet::new();
        assert_eq!(routes.observe(&set(&[pod(0, 0), pod(1, 0)]), &none, t0), [0, 1].into());
        // The former primary (0) is no longer listed: still counted for SETTLE.
        let later = |d: Duration| t0 + d;
        assert_eq!(routes.observe(&set(&[pod(1, 0)]), &none, later(Duration::from_millis(500))), [0, 1].into());
        assert_eq!(routes.observe(&set(&[pod(1, 0)]), &none, later(SETTLE - Duration::from_millis(1))), [0, 1].into());
        assert_eq!(routes.observe(&set(&[pod(1, 0)]), &none, later(SETTLE)), [1].into());
        // Listed again: counted again, from then on.
        assert_eq!(routes.observe(&set(&[pod(0, 0), pod(1, 0)]), &none, later(SETTLE * 2)), [0, 1].into());
        assert_eq!(routes.observe(&none, &none, later(SETTLE * 3)), BTreeSet::new());
    }

    #[test]
    fn a_closed_pod_stops_counting_at_once_and_for_good_but_its_successor_counts() {
        let mut routes = Routes::default();
        let t0 = Instant::now();
        let none = BTreeSet::new();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(routes.observe(&set(&[pod(0, 0)]), &none, t0), [0].into());
        // Handed over and stopped: still listed (the EndpointSlice lags), but nothing
        // listens, and in a pod being deleted nothing starts again.
        assert_eq!(routes.observe(&set(&[pod(0, 0), pod(1, 0)]), &set(&[pod(0, 0)]), at(100)), [1].into());
        // Its sandbox gone, the server no longer even refuses: still closed.
        assert_eq!(routes.observe(&set(&[pod(0, 0), pod(1, 0)]), &none, at(200)), [1].into());
        // The pod made again under the same name serves again, and counts.
        assert_eq!(routes.observe(&set(&[pod(0, 1), pod(1, 0)]), &none, at(300)), [0, 1].into());
    }

    #[test]
    fn only_a_pod_being_deleted_whose_server_stopped_is_closed() {
        let refused = ServerState::Refused("connection refused".into());
        let silent = ServerState::Unreachable("no answer within 3s".into());
        let terminating = PodState::Terminating;
        let running = PodState::Running { ready: false };
        assert!(closed(&terminating, false, &refused));
        assert!(closed(&terminating, true, &silent), "the kubelet says its container ended");
        assert!(!closed(&terminating, false, &silent), "a paused server may wake up and serve");
        assert!(!closed(&running, false, &refused), "a running pod starts its server again");
        assert!(!closed(&running, true, &refused), "nor a terminated container in a running pod");
    }
}
