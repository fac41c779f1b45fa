//! Whether the primary's commits are acknowledged by a replica right now: what the
//! no-loss claim rests on. A primary whose semi-sync wait timed out falls back to
//! asynchronous replication on its own and keeps acknowledging commits that may exist
//! nowhere else, so a failover would lose them. Neither the server's `enabled` variable
//! nor the decision shows that; only its status counter does, which every observation
//! reads (`Server::semi_sync_active`).

use super::decide::{Decision, Role};
use super::observed::Observed;

/// The primary's acknowledgements, as one pass saw them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acknowledgements {
    /// None are expected: a single server, semi-sync disabled in the spec, or no primary
    /// answering (the decision reports that).
    NotExpected,
    /// The operator has not turned the primary's semi-sync on yet (the decision does that
    /// next): nothing to judge.
    Starting,
    /// Primary `ordinal` waits for acknowledgements.
    Waiting { primary: u32 },
    /// Primary `ordinal` has semi-sync on but fell back to asynchronous replication.
    FellBack { primary: u32 },
}

/// Judges the primary of `d` in `o`.
pub fn judge(o: &Observed, d: &Decision) -> Acknowledgements {
    if !o.semi_sync || o.replicas < 2 {
        return Acknowledgements::NotExpected;
    }
    let primary = d.verdicts.iter().find(|v| v.role == Some(Role::Primary)).map(|v| v.ordinal);
    let server = primary.and_then(|p| o.members.iter().find(|m| m.ordinal == p)).and_then(|m| m.server.up());
    match (primary, server) {
        (Some(primary), Some(s)) if s.semi_sync_source && s.semi_sync_active => Acknowledgements::Waiting { primary },
        (Some(primary), Some(s)) if s.semi_sync_source => Acknowledgements::FellBack { primary },
        (Some(_), Some(_)) => Acknowledgements::Starting,
        _ => Acknowledgements::NotExpected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clustering::decide::decide;
    use crate::clustering::fixtures::{cluster, primary, replica, server};

    fn three() -> Observed {
        cluster(vec![primary(0, "0-1-5"), replica(1, 0, "0-1-5"), replica(2, 0, "0-1-5")])
    }

    #[test]
    fn a_primary_waiting_for_acknowledgements_is_judged_so() {
        let o = three();
        assert_eq!(judge(&o, &decide(&o)), Acknowledgements::Waiting { primary: 0 });
    }

    #[test]
    fn a_primary_that_fell_back_to_async_is_seen() {
        let mut o = three();
        server(&mut o.members[0]).semi_sync_active = false;
        assert_eq!(judge(&o, &decide(&o)), Acknowledgements::FellBack { primary: 0 });
    }

    #[test]
    fn nothing_is_expected_of_a_single_server_or_with_semi_sync_disabled() {
        let single = cluster(vec![primary(0, "0-1-5")]);
        assert_eq!(judge(&single, &decide(&single)), Acknowledgements::NotExpected);
        let mut off = three();
        off.semi_sync = false;
        server(&mut off.members[0]).semi_sync_active = false;
        assert_eq!(judge(&off, &decide(&off)), Acknowledgements::NotExpected);
    }

    #[test]
    fn a_primary_whose_semi_sync_is_still_to_be_turned_on_is_not_a_fallback() {
        let mut o = three();
        server(&mut o.members[0]).semi_sync_source = false;
        server(&mut o.members[0]).semi_sync_active = false;
        assert_eq!(judge(&o, &decide(&o)), Acknowledgements::Starting);
    }
}
