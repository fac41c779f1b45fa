//! Abnormality detection that every operator shares: a member's figures judged against its
//! own recent past rather than only against fixed limits. A member on slow-but-steady
//! hardware, or with a workload that always lags a little, is not flagged forever, while one
//! that suddenly gets several times worse is flagged before it crosses the limits of the
//! Prometheus alerts. What is measured (a latency histogram, a replication lag, an error
//! counter) is the operator's; how it is judged is here:
//!
//! - [`SpikeRule`] and [`SpikeJudge`]: a value is a spike above `factor` × its baseline *and*
//!   above an absolute floor (a quiet member's noise is not an incident), for a few samples
//!   in a row; the baseline is frozen while a spike lasts so that it never becomes its own
//!   baseline and clears itself.
//! - [`Series`]: a rolling baseline (a quantile of the recent normal values) with its judge,
//!   for figures that are a plain number per sample.
//! - [`Window`] and [`counter_increase`]: sums of events in a sliding window, from
//!   cumulative counters that restart from zero when a process does.
//! - [`Finding`] and [`Raised`]: what was found on a member, and whether it is new (worth an
//!   Event) or lasting (only the metric stays up).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The increase of a cumulative counter from `earlier` to `later`. A counter that went down
/// was reset (the process restarted and counts again from zero), so its whole value is the
/// increase: a restart never hides what happened after it.
pub fn counter_increase(earlier: f64, later: f64) -> f64 {
    if later >= earlier { later - earlier } else { later }
}

/// Timestamped values over a sliding span of time, oldest first. Only values taken within
/// `span` before the newest are kept, so a window costs what its span holds, however long
/// it lives.
#[derive(Clone, Debug)]
pub struct Window {
    span: Duration,
    values: VecDeque<(Instant, f64)>,
}

impl Window {
    /// An empty window keeping values taken within `span` before the newest.
    pub fn new(span: Duration) -> Self {
        Window { span, values: VecDeque::new() }
    }

    /// Adds `value` taken at `at` and drops the values that left the span. A value older
    /// than the newest is refused (returns false): a late sample must not reorder the window.
    pub fn push(&mut self, at: Instant, value: f64) -> bool {
        if self.values.back().is_some_and(|(last, _)| at < *last) {
            return false;
        }
        self.values.push_back((at, value));
        if let Some(start) = at.checked_sub(self.span) {
            while self.values.front().is_some_and(|(t, _)| *t <= start) {
                self.values.pop_front();
            }
        }
        true
    }

    /// The sum of the values: e.g. the events counted within the span.
    pub fn sum(&self) -> f64 {
        self.values.iter().map(|(_, v)| v).sum()
    }

    /// How many values the window holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the window holds no value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The `q` quantile (0 to 1, nearest rank) of the values; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let mut sorted: Vec<f64> = self.values.iter().map(|(_, v)| *v).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
        sorted.get(rank.saturating_sub(1)).copied()
    }
}

/// When a value is a spike: above `factor` × its baseline and above `floor`, for `sustain`
/// samples in a row (and it clears after as many samples back under the limit), so that
/// one slow sample neither raises nor clears anything.
#[derive(Clone, Debug, PartialEq)]
pub struct SpikeRule {
    /// The multiple of the baseline above which a value is abnormal.
    pub factor: f64,
    /// The value at or under which nothing is abnormal, whatever the baseline.
    pub floor: f64,
    /// Samples in a row above the limit that raise a spike, and at or under it that clear
    /// it (0 counts as 1).
    pub sustain: u32,
}

impl SpikeRule {
    /// The limit a value is judged against: `floor`, or `factor` × `baseline` if higher.
    /// Without a baseline (too little history) the floor stands in for it, so that a fresh
    /// member is judged from its first samples, but only a value `factor` times the floor
    /// is a spike.
    pub fn limit(&self, baseline: Option<f64>) -> f64 {
        self.floor.max(self.factor * self.baseline(baseline))
    }

    fn baseline(&self, baseline: Option<f64>) -> f64 {
        baseline.unwrap_or(self.floor)
    }
}

/// A spike that is raised: the value judged, the baseline it was judged against (the floor
/// if there was none) and the limit that made it a spike.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spike {
    /// The value of the latest sample.
    pub value: f64,
    /// The baseline, frozen since the spike began.
    pub baseline: f64,
    /// The limit: see [`SpikeRule::limit`].
    pub limit: f64,
}

impl Spike {
    /// How many times its baseline the value is (a zero baseline counts as tiny, not as a
    /// division by zero).
    pub fn ratio(&self) -> f64 {
        self.value / self.baseline.max(f64::MIN_POSITIVE)
    }
}

/// The judgement of one series of one member over time, by a [`SpikeRule`].
#[derive(Clone, Debug, Default)]
pub struct SpikeJudge {
    /// The baseline since the first sample above the limit, until the series is normal
    /// again: a lasting spike must not become its own baseline.
    frozen: Option<f64>,
    /// Samples in a row above the limit.
    above: u32,
    /// Samples in a row at or under the limit while raised.
    under: u32,
    raised: bool,
}

impl SpikeJudge {
    /// Judges `value` (`None`: nothing to judge, e.g. the member is not replicating: the
    /// judgement starts afresh) against the baseline, which `baseline` computes when none is
    /// frozen (`None`: too little history). Returns the spike while it is raised.
    pub fn judge(
        &mut self,
        rule: &SpikeRule,
        value: Option<f64>,
        baseline: impl FnOnce() -> Option<f64>,
    ) -> Option<Spike> {
        let Some(value) = value else {
            *self = SpikeJudge::default();
            return None;
        };
        let baseline = self.frozen.unwrap_or_else(|| rule.baseline(baseline()));
        let limit = rule.limit(Some(baseline));
        let sustain = rule.sustain.max(1);
        if value > limit {
            self.frozen = Some(baseline);
            self.above = self.above.saturating_add(1);
            self.under = 0;
            self.raised |= self.above >= sustain;
        } else if self.raised {
            self.above = 0;
            self.under += 1;
            if self.under >= sustain {
                *self = SpikeJudge::default();
            }
        } else {
            *self = SpikeJudge::default();
        }
        self.raised.then_some(Spike { value, baseline, limit })
    }

    /// Whether the series is normal: no sample above the limit since it last was. Only
    /// normal values belong in a baseline.
    pub fn is_normal(&self) -> bool {
        self.frozen.is_none()
    }
}

/// How a [`Series`] keeps its baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineProfile {
    /// How far back normal values count.
    pub span: Duration,
    /// Values are kept as the peak of each step: a member's history costs `span / step`
    /// values however often it is sampled, and a peak errs towards a higher baseline, i.e.
    /// towards fewer false alarms.
    pub step: Duration,
    /// The quantile of the kept values that is the baseline (e.g. 0.9: what the member
    /// reaches regularly, not its rare worst).
    pub quantile: f64,
    /// Fewer kept steps than this is too little history for a baseline.
    pub min_steps: usize,
}

/// One numeric series of one member: a rolling baseline of its normal values and the
/// judgement of each new value against it.
#[derive(Clone, Debug)]
pub struct Series {
    profile: BaselineProfile,
    steps: Window,
    /// The step being filled: its start and peak.
    current: Option<(Instant, f64)>,
    judge: SpikeJudge,
}

impl Series {
    /// A series with no history.
    pub fn new(profile: BaselineProfile) -> Self {
        Series { steps: Window::new(profile.span), profile, current: None, judge: SpikeJudge::default() }
    }

    /// Judges `value` taken at `at` against the baseline of the values before it, then adds
    /// it to the baseline if it was normal. Returns the spike while it is raised.
    pub fn observe(&mut self, rule: &SpikeRule, at: Instant, value: Option<f64>) -> Option<Spike> {
        let (steps, profile) = (&self.steps, &self.profile);
        let spike = self.judge.judge(rule, value, || baseline_of(steps, profile));
        if let Some(v) = value.filter(|_| self.judge.is_normal()) {
            match &mut self.current {
                Some((start, peak)) if at.saturating_duration_since(*start) < self.profile.step => {
                    *peak = peak.max(v);
                }
                current => {
                    if let Some((start, peak)) = current.replace((at, v)) {
                        self.steps.push(start, peak);
                    }
                }
            }
        }
        spike
    }

    /// The baseline: the profile's quantile of the completed steps, if there are enough.
    pub fn baseline(&self) -> Option<f64> {
        baseline_of(&self.steps, &self.profile)
    }
}

fn baseline_of(steps: &Window, profile: &BaselineProfile) -> Option<f64> {
    (steps.len() >= profile.min_steps).then(|| steps.quantile(profile.quantile)).flatten()
}

/// An abnormality of one member, as a detector returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding<K> {
    /// The member.
    pub member: String,
    /// What is abnormal.
    pub kind: K,
    /// The figures that raised it, for an Event or a log line (starts with the member).
    pub message: String,
    /// First raised by this sample (it was not before): the moment to record an Event,
    /// while later samples only keep the metric up.
    pub new: bool,
}

/// The kinds raised on one member by its previous sample, to tell new findings from
/// lasting ones.
#[derive(Clone, Debug)]
pub struct Raised<K>(Vec<K>);

impl<K> Default for Raised<K> {
    fn default() -> Self {
        Raised(Vec::new())
    }
}

impl<K: Copy + PartialEq> Raised<K> {
    /// Records the kinds `found` now on `member` (each with its message) and returns them
    /// as findings, new unless the previous sample raised them too.
    pub fn update(&mut self, member: &str, found: Vec<(K, String)>) -> Vec<Finding<K>> {
        let previously = std::mem::replace(&mut self.0, found.iter().map(|(k, _)| *k).collect());
        found
            .into_iter()
            .map(|(kind, message)| Finding {
                member: member.to_string(),
                kind,
                message: format!("member {member}: {message}"),
                new: !previously.contains(&kind),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_counter_that_went_down_was_reset() {
        assert_eq!(counter_increase(5.0, 8.0), 3.0);
        assert_eq!(counter_increase(8.0, 8.0), 0.0);
        assert_eq!(counter_increase(8.0, 2.0), 2.0);
    }

    #[test]
    fn a_window_keeps_its_span_refuses_late_values_and_sums_and_ranks() {
        let t0 = Instant::now();
        let mut w = Window::new(secs(10));
        assert_eq!(w.quantile(0.5), None);
        for i in 0..20u32 {
            assert!(w.push(t0 + secs(u64::from(i)), f64::from(i)));
        }
        // 10..=19: the values taken less than 10 s before the newest.
        assert_eq!(w.len(), 10);
        assert_eq!(w.sum(), (10..20).sum::<u32>() as f64);
        assert!(!w.push(t0 + secs(5), 100.0), "a late value is refused");
        assert_eq!(w.len(), 10);
        assert_eq!(w.quantile(0.0), Some(10.0));
        assert_eq!(w.quantile(0.5), Some(14.0));
        assert_eq!(w.quantile(0.9), Some(18.0));
        assert_eq!(w.quantile(1.0), Some(19.0));
    }

    #[test]
    fn the_limit_is_the_floor_or_a_multiple_of_the_baseline() {
        let rule = SpikeRule { factor: 3.0, floor: 10.0, sustain: 1 };
        assert_eq!(rule.limit(Some(1.0)), 10.0);
        assert_eq!(rule.limit(Some(5.0)), 15.0);
        // No history: the floor stands in for the baseline.
        assert_eq!(rule.limit(None), 30.0);
    }

    #[test]
    fn a_spike_is_raised_after_sustain_samples_and_cleared_after_as_many_under() {
        let rule = SpikeRule { factor: 3.0, floor: 10.0, sustain: 3 };
        let mut j = SpikeJudge::default();
        let base = || Some(2.0);
        // A blip of two samples raises nothing, and the baseline is free again after it.
        assert_eq!(j.judge(&rule, Some(50.0), base), None);
        assert!(!j.is_normal());
        assert_eq!(j.judge(&rule, Some(50.0), base), None);
        assert_eq!(j.judge(&rule, Some(1.0), base), None);
        assert!(j.is_normal());
        // Three in a row raise it; the baseline stays frozen whatever is offered later.
        j.judge(&rule, Some(50.0), base);
        j.judge(&rule, Some(50.0), base);
        let spike = j.judge(&rule, Some(60.0), base).expect("raised");
        assert_eq!(spike, Spike { value: 60.0, baseline: 2.0, limit: 10.0 });
        assert_eq!(spike.ratio(), 30.0);
        let later = j.judge(&rule, Some(70.0), || Some(100.0)).expect("still raised");
        assert_eq!(later.limit, 10.0);
        // Two samples under the limit do not clear it, a third does.
        assert!(j.judge(&rule, Some(5.0), base).is_some());
        assert!(j.judge(&rule, Some(5.0), base).is_some());
        assert_eq!(j.judge(&rule, Some(5.0), base), None);
        assert!(j.is_normal());
    }

    #[test]
    fn nothing_to_judge_clears_the_judgement() {
        let rule = SpikeRule { factor: 3.0, floor: 10.0, sustain: 1 };
        let mut j = SpikeJudge::default();
        assert!(j.judge(&rule, Some(40.0), || None).is_some(), "40 is above 3 × the floor");
        assert_eq!(j.judge(&rule, None, || None), None);
        assert!(j.is_normal());
        assert_eq!(j.judge(&rule, Some(20.0), || None), None);
    }

    #[test]
    fn a_series_learns_its_baseline_from_normal_values_only() {
        let profile = BaselineProfile { span: secs(600), step: secs(10), quantile: 0.9, min_steps: 6 };
        let rule = SpikeRule { factor: 3.0, floor: 10.0, sustain: 5 };
        let t0 = Instant::now();
        let mut s = Series::new(profile);
        let mut t = 0u64;
        let mut observe = |s: &mut Series, v: f64| {
            t += 1;
            s.observe(&rule, t0 + secs(t), Some(v))
        };
        // Five minutes that peak at 8 every ten seconds: the baseline is 8, the limit 24.
        for i in 0..300 {
            assert_eq!(observe(&mut s, if i % 10 == 0 { 8.0 } else { 1.0 }), None);
        }
        assert_eq!(s.baseline(), Some(8.0));
        // 20 stays under 3 × 8, even when it lasts.
        for _ in 0..60 {
            assert_eq!(observe(&mut s, 20.0), None);
        }
        // The steps at 20 became part of the baseline, which now allows 60.
        assert_eq!(s.baseline(), Some(20.0));
        let raised: Vec<_> = (0..600).map(|_| observe(&mut s, 100.0)).collect();
        assert!(raised[..4].iter().all(Option::is_none), "raised before 5 samples");
        let last = raised.last().copied().flatten().expect("still raised after ten minutes");
        assert_eq!((last.value, last.baseline, last.limit), (100.0, 20.0, 60.0));
        // Ten minutes of spike never entered the baseline.
        assert_eq!(s.baseline(), Some(20.0));
        let after: Vec<_> = (0..5).map(|_| observe(&mut s, 1.0)).collect();
        assert!(after[..4].iter().all(Option::is_some) && after[4].is_none(), "{after:?}");
        // Without enough history (a fresh member) the floor stands in: only 3 × 10 counts.
        let mut fresh = Series::new(s.profile.clone());
        for i in 0..5 {
            assert_eq!(fresh.observe(&rule, t0 + secs(i), Some(25.0)), None);
        }
        assert_eq!(fresh.baseline(), None);
    }

    #[test]
    fn findings_are_new_only_when_first_raised() {
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum K {
            A,
            B,
        }
        let mut r = Raised::default();
        let found = r.update("m-1", vec![(K::A, "a".into())]);
        assert_eq!(
            found,
            vec![Finding { member: "m-1".into(), kind: K::A, message: "member m-1: a".into(), new: true }]
        );
        let found = r.update("m-1", vec![(K::A, "a".into()), (K::B, "b".into())]);
        assert_eq!(found.iter().map(|f| (f.kind, f.new)).collect::<Vec<_>>(), vec![(K::A, false), (K::B, true)]);
        assert_eq!(r.update("m-1", vec![]), vec![]);
        assert!(r.update("m-1", vec![(K::A, "a".into())])[0].new, "raised again after clearing");
    }
}
