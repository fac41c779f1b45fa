//! Abnormality detection: judges each member's recent behaviour against its own past,
//! from samples the per-cluster task scrapes every ~10 s. Two abnormalities precede most
//! etcd outages and are invisible in a single status call:
//!
//! - frequent leader changes: each one stalls writes for an election, and a series of them
//!   means heartbeats are missed (slow disk or network, CPU starvation);
//! - a slow disk: every write waits for a WAL fsync and a backend commit, so a disk whose
//!   latency jumps slows the whole cluster and, past the election timeout, costs the
//!   leadership.
//!
//! Latency is judged against the member's own baseline, not only a fixed limit, so that a
//! member on slow-but-steady storage is not flagged forever, while one that suddenly gets
//! several times slower is flagged before it crosses the limits of the Prometheus alerts.
//! The judgement itself (baselines, spikes, windows) is the shared
//! [`statecraft_shared::insight`]; what is etcd's here is what is measured.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use statecraft_shared::insight::{Finding, Raised, SpikeJudge, SpikeRule, Window, counter_increase};

use super::sample::{Histogram, Sample};
use crate::reason::Etcd;

/// The kinds of abnormality, each a reason for Events and a metric label value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// More leader changes than [`Thresholds::max_leader_changes`] within
    /// [`Thresholds::leader_change_window`].
    FrequentLeaderChanges,
    /// The p99 of WAL fsync or backend commit latency jumped above its baseline.
    SlowDisk,
}

impl Kind {
    /// Every kind, e.g. to clear the metrics of those not raised.
    pub const ALL: [Kind; 2] = [Kind::FrequentLeaderChanges, Kind::SlowDisk];

    /// The reason: Event reason and metric label value.
    pub fn reason(self) -> Etcd {
        match self {
            Kind::FrequentLeaderChanges => Etcd::FrequentLeaderChanges,
            Kind::SlowDisk => Etcd::SlowDisk,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason().into())
    }
}

/// An abnormality of one member, raised by [`Detector::observe`].
pub type Abnormality = Finding<Kind>;

/// When a member is abnormal. The defaults follow etcd's own tuning guidance: a healthy
/// disk has a WAL fsync p99 under 10 ms and a backend commit p99 under 25 ms.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// How far back leader changes are counted.
    pub leader_change_window: Duration,
    /// More leader changes than this within the window is abnormal.
    pub max_leader_changes: u32,
    /// The recent period whose latency is judged.
    pub latency_window: Duration,
    /// The period before it whose latency is the member's baseline.
    pub baseline_window: Duration,
    /// The recent p99 is abnormal above this multiple of the baseline p99 ...
    pub latency_factor: f64,
    /// ... and above this p99 of WAL fsync, seconds (a quiet member's few fsyncs are noise).
    pub wal_fsync_floor: f64,
    /// ... or above this p99 of backend commit, seconds.
    pub backend_commit_floor: f64,
    /// A period with fewer observations than this says nothing about latency: the p99 of a
    /// few dozen observations is merely their maximum.
    pub min_observations: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            leader_change_window: Duration::from_secs(10 * 60),
            max_leader_changes: 3,
            latency_window: Duration::from_secs(2 * 60),
            baseline_window: Duration::from_secs(30 * 60),
            latency_factor: 3.0,
            wal_fsync_floor: 0.010,
            backend_commit_floor: 0.025,
            min_observations: 50.0,
        }
    }
}

/// The latency histograms judged, with their floor.
const LATENCIES: [Latency; 2] = [
    Latency { what: "WAL fsync", histogram: |s| &s.wal_fsync, floor: |t| t.wal_fsync_floor },
    Latency { what: "backend commit", histogram: |s| &s.backend_commit, floor: |t| t.backend_commit_floor },
];

struct Latency {
    what: &'static str,
    histogram: fn(&Sample) -> &Histogram,
    floor: fn(&Thresholds) -> f64,
}

/// What the detector remembers of one member.
struct History {
    /// Samples, oldest first, spanning the longest window plus one older sample.
    samples: VecDeque<Sample>,
    /// Leader changes between consecutive samples, over the leader-change window.
    leader_changes: Window,
    /// The judgement of each of [`LATENCIES`], which freezes its baseline while that
    /// latency is abnormal.
    latencies: [SpikeJudge; 2],
    /// Kinds raised by the last sample.
    raised: Raised<Kind>,
}

impl History {
    fn new(t: &Thresholds) -> Self {
        History {
            samples: VecDeque::new(),
            leader_changes: Window::new(t.leader_change_window),
            latencies: Default::default(),
            raised: Raised::default(),
        }
    }
}

/// Per-member windows of samples, and the judgement of each new sample. One detector
/// serves one cluster (member names are its keys).
pub struct Detector {
    thresholds: Thresholds,
    members: BTreeMap<String, History>,
}

impl Detector {
    /// A detector with no history.
    pub fn new(thresholds: Thresholds) -> Self {
        Detector { thresholds, members: BTreeMap::new() }
    }

    /// Adds `sample` of `member` to its window and returns the abnormalities active now
    /// (empty: the member is normal, and any earlier abnormality has cleared). A sample
    /// older than the member's newest is ignored.
    pub fn observe(&mut self, member: &str, sample: Sample) -> Vec<Abnormality> {
        let t = &self.thresholds;
        let history = self.members.entry(member.to_string()).or_insert_with(|| History::new(t));
        match history.samples.back() {
            Some(last) if sample.at < last.at => tracing::debug!(member, "ignoring a sample older than the newest"),
            last => {
                // The counter's increase is taken sample to sample so that a member restart
                // (the counter starting again) is not lost.
                if let Some(last) = last {
                    history
                        .leader_changes
                        .push(sample.at, counter_increase(last.leader_changes, sample.leader_changes));
                }
                history.samples.push_back(sample);
            }
        }
        prune(&mut history.samples, t.latency_window + t.baseline_window);

        let mut found = Vec::new();
        if let Some(message) = leader_changes(&history.leader_changes, t) {
            found.push((Kind::FrequentLeaderChanges, message));
        }
        let slow: Vec<String> = LATENCIES
            .iter()
            .zip(&mut history.latencies)
            .filter_map(|(latency, judge)| slow_latency(&history.samples, t, latency, judge))
            .collect();
        if !slow.is_empty() {
            found.push((Kind::SlowDisk, slow.join("; ")));
        }
        history.raised.update(member, found)
    }

    /// Drops the history of members `keep` rejects (removed from the cluster), so that a
    /// member later re-added under the same name starts afresh.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.members.retain(|m, _| keep(m));
    }
}

impl Default for Detector {
    fn default() -> Self {
        Detector::new(Thresholds::default())
    }
}

/// Drops samples no window needs: all but one older than `span` before the newest.
fn prune(samples: &mut VecDeque<Sample>, span: Duration) {
    let Some(newest) = samples.back().map(|s| s.at) else { return };
    while samples.get(1).is_some_and(|next| newest.saturating_duration_since(next.at) >= span) {
        samples.pop_front();
    }
}

/// The newest sample taken at or before `at`, else the oldest: the start of a window.
/// `at` is `None` when it would precede the clock's origin, so no sample is that old.
fn sample_at(samples: &VecDeque<Sample>, at: Option<Instant>) -> Option<&Sample> {
    at.and_then(|at| samples.iter().rev().find(|s| s.at <= at)).or_else(|| samples.front())
}

/// The message of too many leader changes, if there were.
fn leader_changes(window: &Window, t: &Thresholds) -> Option<String> {
    let changes = window.sum();
    (changes > f64::from(t.max_leader_changes)).then(|| {
        format!(
            "{changes} leader changes seen in the last {} (more than {} is abnormal)",
            minutes(t.leader_change_window),
            t.max_leader_changes
        )
    })
}

/// The message of a latency that jumped, if it did; updates its judgement.
fn slow_latency(samples: &VecDeque<Sample>, t: &Thresholds, l: &Latency, judge: &mut SpikeJudge) -> Option<String> {
    let newest = samples.back()?;
    let recent_start = sample_at(samples, newest.at.checked_sub(t.latency_window))?;
    let baseline_start = sample_at(samples, recent_start.at.checked_sub(t.baseline_window))?;
    let p99 = |later: &Sample, earlier: &Sample| {
        let delta = (l.histogram)(later).since((l.histogram)(earlier))?;
        (later.at > earlier.at && delta.count() >= t.min_observations).then(|| delta.quantile(0.99)).flatten()
    };
    let floor = (l.floor)(t);
    // The recent window already spans minutes: one sample above the limit is enough.
    let rule = SpikeRule { factor: t.latency_factor, floor, sustain: 1 };
    // Without enough history (just started, or a quiet past) the floor stands in.
    let spike = judge.judge(&rule, p99(newest, recent_start), || p99(recent_start, baseline_start))?;
    Some(format!(
        "{} p99 {} over the last {}, {:.1}× its baseline p99 of {} (abnormal above {}× and above {})",
        l.what,
        millis(spike.value),
        minutes(t.latency_window),
        spike.ratio(),
        millis(spike.baseline),
        t.latency_factor,
        millis(floor),
    ))
}

fn millis(seconds: f64) -> String {
    format!("{:.1} ms", seconds * 1000.0)
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(60) { format!("{} min", s / 60) } else { format!("{s} s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bucket bounds like etcd's WAL fsync histogram (1 ms doubling).
    const BOUNDS: [f64; 6] = [0.001, 0.002, 0.004, 0.008, 0.016, 0.032];

    /// A member's cumulative state, advanced step by step like a real etcd.
    struct Member {
        start: Instant,
        elapsed: Duration,
        leader_changes: f64,
        fsync: [f64; 7],
        commit: [f64; 7],
    }

    impl Member {
        fn new() -> Self {
            Member {
                start: Instant::now(),
                elapsed: Duration::ZERO,
                leader_changes: 1.0,
                fsync: [0.0; 7],
                commit: [0.0; 7],
            }
        }

        /// 10 s pass with `ops` fsyncs and commits, each taking `seconds`.
        fn step(&mut self, ops: f64, seconds: f64) -> Sample {
            self.elapsed += Duration::from_secs(10);
            for h in [&mut self.fsync, &mut self.commit] {
                for (i, c) in h.iter_mut().enumerate() {
                    if BOUNDS.get(i).is_none_or(|le| seconds <= *le) {
                        *c += ops;
                    }
                }
            }
            self.sample()
        }

        fn sample(&self) -> Sample {
            let h = |counts: &[f64; 7]| {
                let bounds = BOUNDS.iter().copied().chain([f64::INFINITY]);
                Histogram::from_buckets(bounds.zip(counts.iter().copied())).expect("valid histogram")
            };
            Sample {
                at: self.start + self.elapsed,
                leader_changes: self.leader_changes,
                wal_fsync: h(&self.fsync),
                backend_commit: h(&self.commit),
            }
        }
    }

    fn kinds(found: &[Abnormality]) -> Vec<Kind> {
        found.iter().map(|a| a.kind).collect()
    }

    #[test]
    fn a_steady_member_is_normal_and_a_quiet_one_is_not_judged() {
        let mut d = Detector::default();
        let (mut steady, mut quiet) = (Member::new(), Member::new());
        for _ in 0..300 {
            assert_eq!(d.observe("m-0", steady.step(100.0, 0.0015)), vec![]);
            // A few slow fsyncs on a quiet member are noise, not a slow disk.
            assert_eq!(d.observe("m-1", quiet.step(2.0, 0.030)), vec![]);
        }
    }

    #[test]
    fn a_latency_jump_above_the_baseline_and_floor_is_a_slow_disk_until_it_recovers() {
        let mut d = Detector::default();
        let mut m = Member::new();
        for _ in 0..200 {
            assert_eq!(d.observe("m-0", m.step(100.0, 0.0015)), vec![]);
        }
        // 5 ms is 3× the baseline but under the 10 ms fsync floor: normal.
        for _ in 0..12 {
            assert_eq!(d.observe("m-0", m.step(100.0, 0.005)), vec![]);
        }
        for _ in 0..200 {
            assert_eq!(d.observe("m-0", m.step(100.0, 0.0015)), vec![]);
        }
        let mut raised = Vec::new();
        for _ in 0..60 {
            raised.push(d.observe("m-0", m.step(100.0, 0.012)));
        }
        let first = raised.iter().position(|f| !f.is_empty()).expect("slow disk raised");
        assert!(first <= 2, "raised only after {first} samples");
        assert!(raised[first][0].new);
        assert_eq!(kinds(&raised[first]), vec![Kind::SlowDisk]);
        let message = &raised[first][0].message;
        assert!(message.starts_with("member m-0: WAL fsync p99 "), "{message}");
        // 12 ms commits are under the 25 ms commit floor.
        assert!(!message.contains("backend commit"), "{message}");
        // Still raised 10 minutes on: the baseline stays frozen at the healthy figure.
        let last = raised.last().expect("samples");
        assert_eq!(kinds(last), vec![Kind::SlowDisk]);
        assert!(!last[0].new);
        assert!(
            last[0].message.contains("baseline p99 of 1.5 ms") || last[0].message.contains("baseline p99 of 2.0 ms"),
            "{}",
            last[0].message
        );
        // Recovered once the recent window is fast again.
        let after: Vec<_> = (0..13).map(|_| d.observe("m-0", m.step(100.0, 0.0015))).collect();
        assert_eq!(after.last(), Some(&vec![]));
    }

    #[test]
    fn without_a_baseline_the_floor_stands_in() {
        let mut d = Detector::default();
        let mut m = Member::new();
        // From the first samples: 20 ms fsync is under 3 × 10 ms, 50 ms is over.
        for _ in 0..20 {
            assert_eq!(d.observe("m-0", m.step(100.0, 0.016)), vec![]);
        }
        let mut m = Member::new();
        let mut d = Detector::default();
        d.observe("m-0", m.step(100.0, 0.032));
        assert_eq!(kinds(&d.observe("m-0", m.step(100.0, 0.032))), vec![Kind::SlowDisk]);
    }

    #[test]
    fn more_than_three_leader_changes_in_ten_minutes_are_frequent() {
        let mut d = Detector::default();
        let mut m = Member::new();
        d.observe("m-0", m.step(100.0, 0.001));
        for _ in 0..3 {
            m.leader_changes += 1.0;
            assert_eq!(d.observe("m-0", m.step(100.0, 0.001)), vec![]);
        }
        // A restart: the counter starts again at 1, which is one more change.
        m.leader_changes = 1.0;
        let found = d.observe("m-0", m.step(100.0, 0.001));
        assert_eq!(kinds(&found), vec![Kind::FrequentLeaderChanges]);
        assert_eq!(found[0].message, "member m-0: 4 leader changes seen in the last 10 min (more than 3 is abnormal)");
        assert!(found[0].new);
        // Ten minutes later they have left the window.
        let mut last = Vec::new();
        for _ in 0..60 {
            last = d.observe("m-0", m.step(100.0, 0.001));
        }
        assert_eq!(last, vec![]);
    }

    #[test]
    fn members_are_judged_apart_and_removed_members_forgotten() {
        let mut d = Detector::default();
        let (mut a, mut b) = (Member::new(), Member::new());
        for _ in 0..5 {
            a.leader_changes += 1.0;
            d.observe("m-0", a.step(100.0, 0.001));
            assert_eq!(d.observe("m-1", b.step(100.0, 0.001)), vec![]);
        }
        assert_eq!(kinds(&d.observe("m-0", a.step(100.0, 0.001))), vec![Kind::FrequentLeaderChanges]);
        // An old sample is ignored, not judged as a counter reset.
        let stale = Sample { at: a.start, ..a.sample() };
        assert_eq!(kinds(&d.observe("m-0", stale)), vec![Kind::FrequentLeaderChanges]);
        d.retain(|m| m != "m-0");
        assert_eq!(d.observe("m-0", a.step(100.0, 0.001)), vec![]);
    }

    #[test]
    fn the_window_keeps_only_what_it_needs() {
        let mut d = Detector::default();
        let mut m = Member::new();
        for _ in 0..1000 {
            d.observe("m-0", m.step(1.0, 0.001));
        }
        // 32 minutes at 10 s, plus the sample before.
        let kept = d.members.get("m-0").map_or(0, |h| h.samples.len());
        assert!((192..=194).contains(&kept), "{kept}");
    }
}
