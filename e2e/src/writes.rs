//! What a test client writing one record at a time saw: every attempt, acknowledged or
//! not, from which the write unavailability of an event and the acknowledged writes lost
//! are computed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One write attempt: its id (the record written), when it started and ended, and whether
/// it was acknowledged.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    /// The id of the record (row, key) it wrote.
    pub id: u64,
    /// When the attempt started.
    pub at: Instant,
    /// When its answer (or its failure) came.
    pub done: Instant,
    /// Whether the server acknowledged it.
    pub acked: bool,
}

/// A stop flag shared with a writer task.
#[derive(Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Asks the writer to stop.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    /// Whether the writer was asked to stop.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The longest time between two acknowledgements that ends after `from`: the write
/// unavailability an event caused, as a client sees it (no write acknowledged). Measured
/// between the answers, not the starts: a write sent just before an outage and answered
/// only after it (a commit waiting for a replica's acknowledgement) does not hide the
/// outage.
pub fn longest_gap(attempts: &[Attempt], from: Instant) -> Duration {
    longest_gap_between(attempts, from, None)
}

/// [`longest_gap`] counting only gaps that end after `from` and (if set) start before
/// `until`: the unavailability during one step of a test.
pub fn longest_gap_between(attempts: &[Attempt], from: Instant, until: Option<Instant>) -> Duration {
    let mut acked: Vec<Instant> = attempts.iter().filter(|a| a.acked).map(|a| a.done).collect();
    acked.sort();
    acked
        .windows(2)
        .filter(|w| w[1] > from && until.is_none_or(|u| w[0] < u))
        .map(|w| w[1].duration_since(w[0]))
        .max()
        .unwrap_or_default()
}

/// Acknowledged ids missing from `present` (which must be sorted).
pub fn lost(attempts: &[Attempt], present: &[u64]) -> Vec<u64> {
    attempts.iter().filter(|a| a.acked && present.binary_search(&a.id).is_err()).map(|a| a.id).collect()
}

/// How many attempts were acknowledged.
pub fn acknowledged(attempts: &[Attempt]) -> usize {
    attempts.iter().filter(|a| a.acked).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_and_losses() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        let quick = |id: u64, ms: u64, acked: bool| Attempt { id, at: at(ms), done: at(ms + 10), acked };
        let attempts =
            [quick(1, 0, true), quick(2, 100, false), quick(3, 900, true), quick(4, 1000, true), quick(5, 3000, true)];
        assert_eq!(longest_gap(&attempts, t), Duration::from_millis(2000));
        assert_eq!(longest_gap_between(&attempts, t, Some(at(950))), Duration::from_millis(900));
        assert_eq!(longest_gap(&attempts, at(3011)), Duration::ZERO);
        assert_eq!(lost(&attempts, &[1, 3, 5]), vec![4]);
        assert_eq!(acknowledged(&attempts), 4);
    }

    /// A write started before an outage and answered after it (a commit waiting for a
    /// replica) does not hide the outage: gaps are between answers.
    #[test]
    fn a_write_answered_late_counts_when_it_was_answered() {
        let t = Instant::now();
        let at = |ms: u64| t + Duration::from_millis(ms);
        let attempts = [
            Attempt { id: 1, at: at(0), done: at(10), acked: true },
            Attempt { id: 2, at: at(20), done: at(2500), acked: true },
            Attempt { id: 3, at: at(2510), done: at(2520), acked: true },
        ];
        assert_eq!(longest_gap(&attempts, t), Duration::from_millis(2490));
    }
}
