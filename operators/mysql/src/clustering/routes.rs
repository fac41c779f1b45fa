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
//! EndpointSlice has listed another member for [`SETTLE`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How long a member stays counted as routed after its endpoint was last listed: time for
/// kube-proxy to apply the change (its default `--iptables-min-sync-period` is 1 s).
pub const SETTLE: Duration = Duration::from_secs(2);

/// What the task remembers between passes: when each member was last listed.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    seen: BTreeMap<u32, Instant>,
}

impl Routes {
    /// Takes the members the read-write Service's EndpointSlices list now, read at `now`;
    /// returns those listed within the last [`SETTLE`] (these included).
    pub fn observe(&mut self, listed: &BTreeSet<u32>, now: Instant) -> BTreeSet<u32> {
        for ordinal in listed {
            self.seen.insert(*ordinal, now);
        }
        self.seen.retain(|_, at| now.saturating_duration_since(*at) < SETTLE);
        self.seen.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_counts_as_routed_until_it_has_been_unlisted_for_the_settling_time() {
        let mut routes = Routes::default();
        let t0 = Instant::now();
        assert_eq!(routes.observe(&[0, 1].into(), t0), [0, 1].into());
        // The former primary (0) is no longer listed: still counted for SETTLE.
        assert_eq!(routes.observe(&[1].into(), t0 + Duration::from_millis(500)), [0, 1].into());
        assert_eq!(routes.observe(&[1].into(), t0 + SETTLE - Duration::from_millis(1)), [0, 1].into());
        assert_eq!(routes.observe(&[1].into(), t0 + SETTLE), [1].into());
        // Listed again: counted again, from then on.
        assert_eq!(routes.observe(&[0, 1].into(), t0 + SETTLE * 2), [0, 1].into());
        assert_eq!(routes.observe(&BTreeSet::new(), t0 + SETTLE * 3), BTreeSet::new());
    }
}
