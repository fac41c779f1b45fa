//! Auto-scaling that every operator can share: a metric that has stayed above a scale-out
//! threshold (or below a scale-in threshold) for long enough asks for the next allowed size
//! within the user's bounds. What the metric is, which sizes are allowed and whether the
//! system can be resized safely right now are the operator's; how long a case must be made,
//! and in which direction, is here:
//!
//! - [`Thresholds`]: the two limits and how long each must be crossed without a break. A
//!   single sample never scales: load that comes and goes within the window is absorbed
//!   by the servers that exist.
//! - [`Sustained`]: the running case, restarted by any sample that breaks it, by a missing
//!   sample (a metric that cannot be read is no case for anything), and after every resize
//!   (the new size must make its own case).
//! - [`next_size`]: the neighbouring allowed size in the direction asked, or none at a bound.

use std::time::{Duration, Instant};

/// When the metric asks for a resize.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Scale out while the metric stays strictly above this.
    pub scale_out_above: f64,
    /// Scale in while the metric stays strictly below this.
    pub scale_in_below: f64,
    /// How long the metric must stay above `scale_out_above`.
    pub scale_out_after: Duration,
    /// How long the metric must stay below `scale_in_below` (longer than a scale-out's:
    /// removing capacity too early costs more than keeping it a little longer).
    pub scale_in_after: Duration,
}

/// Which way the metric has asked, for long enough.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressure {
    /// Above `scale_out_above` for `scale_out_after`.
    Out,
    /// Below `scale_in_below` for `scale_in_after`.
    In,
    /// Between the thresholds, or not for long enough yet.
    None,
}

/// How long the metric has been above or below its thresholds without a break.
#[derive(Clone, Debug, Default)]
pub struct Sustained {
    above_since: Option<Instant>,
    below_since: Option<Instant>,
}

impl Sustained {
    /// Adds the sample `value` taken at `at` (`None`: the metric could not be read) and
    /// says whether a case has been made.
    pub fn observe(&mut self, t: &Thresholds, at: Instant, value: Option<f64>) -> Pressure {
        let above = value.is_some_and(|v| v > t.scale_out_above);
        let below = value.is_some_and(|v| v < t.scale_in_below);
        self.above_since = if above { Some(self.above_since.unwrap_or(at)) } else { None };
        self.below_since = if below { Some(self.below_since.unwrap_or(at)) } else { None };
        let lasted = |since: Option<Instant>, needed: Duration| since.is_some_and(|s| at.duration_since(s) >= needed);
        if lasted(self.above_since, t.scale_out_after) {
            Pressure::Out
        } else if lasted(self.below_since, t.scale_in_after) {
            Pressure::In
        } else {
            Pressure::None
        }
    }

    /// How long the metric has been beyond one of its thresholds, as of `at` (zero when it
    /// is between them): for the messages that explain a resize.
    pub fn lasted(&self, at: Instant) -> Duration {
        self.above_since.or(self.below_since).map_or(Duration::ZERO, |s| at.duration_since(s))
    }

    /// Starts over, after a resize: the new size makes its own case.
    pub fn reset(&mut self) {
        *self = Sustained::default();
    }
}

/// The allowed size next to `current` in the direction of `pressure`, within `min..=max`;
/// `None` when there is none (at a bound, or no pressure). `allowed` need not be sorted. A
/// `current` outside the allowed sizes moves to the nearest allowed one in that direction.
pub fn next_size(allowed: &[u32], min: u32, max: u32, current: u32, pressure: Pressure) -> Option<u32> {
    let within = allowed.iter().copied().filter(|s| (min..=max).contains(s));
    match pressure {
        Pressure::Out => within.filter(|s| *s > current).min(),
        Pressure::In => within.filter(|s| *s < current).max(),
        Pressure::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thresholds() -> Thresholds {
        Thresholds {
            scale_out_above: 10.0,
            scale_in_below: 2.0,
            scale_out_after: Duration::from_secs(30),
            scale_in_after: Duration::from_secs(300),
        }
    }

    #[test]
    fn a_scale_out_needs_the_metric_above_its_threshold_for_the_whole_window() {
        let (t, start) = (thresholds(), Instant::now());
        let mut s = Sustained::default();
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(s.observe(&t, at(0), Some(11.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(29), Some(50.0)), Pressure::None);
        assert_eq!(s.lasted(at(29)), Duration::from_secs(29));
        assert_eq!(s.observe(&t, at(30), Some(10.5)), Pressure::Out);
        // One sample at the threshold (not above it) breaks the case.
        assert_eq!(s.observe(&t, at(31), Some(10.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(32), Some(12.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(61), Some(12.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(62), Some(12.0)), Pressure::Out);
    }

    #[test]
    fn a_scale_in_needs_the_longer_window_and_a_missing_sample_breaks_any_case() {
        let (t, start) = (thresholds(), Instant::now());
        let mut s = Sustained::default();
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(s.observe(&t, at(0), Some(1.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(100), Some(0.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(150), None), Pressure::None, "an unreadable metric is no case");
        assert_eq!(s.lasted(at(150)), Duration::ZERO);
        assert_eq!(s.observe(&t, at(151), Some(1.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(450), Some(1.0)), Pressure::None);
        assert_eq!(s.observe(&t, at(451), Some(1.9)), Pressure::In);
        s.reset();
        assert_eq!(s.observe(&t, at(452), Some(1.0)), Pressure::None, "a resize starts the case over");
    }

    #[test]
    fn between_the_thresholds_there_is_no_pressure() {
        let (t, start) = (thresholds(), Instant::now());
        let mut s = Sustained::default();
        for secs in 0..1000 {
            assert_eq!(s.observe(&t, start + Duration::from_secs(secs), Some(5.0)), Pressure::None);
        }
    }

    #[test]
    fn the_next_size_is_the_neighbouring_allowed_one_within_bounds() {
        let odd = [1, 3, 5];
        assert_eq!(next_size(&odd, 1, 5, 3, Pressure::Out), Some(5));
        assert_eq!(next_size(&odd, 1, 5, 3, Pressure::In), Some(1));
        assert_eq!(next_size(&odd, 3, 5, 3, Pressure::In), None, "at the minimum");
        assert_eq!(next_size(&odd, 3, 5, 5, Pressure::Out), None, "at the maximum");
        assert_eq!(next_size(&odd, 1, 3, 3, Pressure::Out), None, "5 is allowed but above the maximum");
        assert_eq!(next_size(&odd, 1, 5, 1, Pressure::Out), Some(3), "one step at a time");
        assert_eq!(next_size(&odd, 1, 5, 5, Pressure::None), None);
        assert_eq!(next_size(&[5, 1, 3], 1, 5, 2, Pressure::Out), Some(3), "unsorted, current not allowed");
    }
}
