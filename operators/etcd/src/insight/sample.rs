//! One scrape of a member, reduced to the figures the detector judges: the leader changes
//! it has seen and two disk latency histograms. Pure data with the arithmetic Prometheus
//! would do on it (counter increase, histogram delta, quantile), so the detector is tested
//! without a server.

use std::time::Instant;

use statecraft_shared::exposition::Series;

/// etcd's counter of leader changes this member has seen since it started.
pub const LEADER_CHANGES: &str = "etcd_server_leader_changes_seen_total";
/// etcd's histogram of write-ahead-log fsync latency: every raft entry waits for one.
pub const WAL_FSYNC: &str = "etcd_disk_wal_fsync_duration_seconds";
/// etcd's histogram of backend (bbolt) commit latency: applied writes wait for it.
pub const BACKEND_COMMIT: &str = "etcd_disk_backend_commit_duration_seconds";

/// A cumulative histogram: `(upper bound, observations at or below it)`, ascending, ending
/// with the `+Inf` bucket (whose count is the total).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    buckets: Vec<(f64, f64)>,
}

impl Histogram {
    /// A histogram from its buckets in any order; buckets of equal bound (series that differ
    /// in other labels) are summed. `None` without a `+Inf` bucket or with a bound that is
    /// not a number.
    pub fn from_buckets(buckets: impl IntoIterator<Item = (f64, f64)>) -> Option<Self> {
        let mut all: Vec<(f64, f64)> = buckets.into_iter().collect();
        if all.iter().any(|(le, _)| le.is_nan()) {
            return None;
        }
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged: Vec<(f64, f64)> = Vec::with_capacity(all.len());
        for (le, count) in all {
            match merged.last_mut() {
                Some(last) if last.0 == le => last.1 += count,
                _ => merged.push((le, count)),
            }
        }
        (merged.last()?.0 == f64::INFINITY).then_some(Histogram { buckets: merged })
    }

    /// Observations in total.
    pub fn count(&self) -> f64 {
        self.buckets.last().map_or(0.0, |b| b.1)
    }

    /// The observations made since `earlier`. When a count went down the member restarted
    /// and its histogram began again, so everything in `self` is new. `None` when the two
    /// have different buckets (a version change) and cannot be compared.
    pub fn since(&self, earlier: &Histogram) -> Option<Histogram> {
        if self.buckets.len() != earlier.buckets.len()
            || self.buckets.iter().zip(&earlier.buckets).any(|(a, b)| a.0 != b.0)
        {
            return None;
        }
        if self.buckets.iter().zip(&earlier.buckets).any(|(a, b)| a.1 < b.1) {
            return Some(self.clone());
        }
        let buckets = self.buckets.iter().zip(&earlier.buckets).map(|(a, b)| (a.0, a.1 - b.1)).collect();
        Some(Histogram { buckets })
    }

    /// The `q`-quantile (0 to 1) as Prometheus' `histogram_quantile` estimates it: linear
    /// within the bucket that holds it, and the highest finite bound when it falls in the
    /// `+Inf` bucket. `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total <= 0.0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(le, count) in &self.buckets {
            if count >= rank {
                if le == f64::INFINITY {
                    return Some(lower.0);
                }
                let width = count - lower.1;
                let within = if width > 0.0 { (rank - lower.1) / width } else { 1.0 };
                return Some(lower.0 + (le - lower.0) * within);
            }
            lower = (le, count);
        }
        Some(lower.0)
    }
}

/// A series the detector needs is not in the scrape.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no series {0} (or an unreadable one)")]
pub struct MissingSeries(pub &'static str);

/// One scrape of one member.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// When it was taken.
    pub at: Instant,
    /// [`LEADER_CHANGES`]: a counter, reset when the member restarts.
    pub leader_changes: f64,
    /// [`WAL_FSYNC`].
    pub wal_fsync: Histogram,
    /// [`BACKEND_COMMIT`].
    pub backend_commit: Histogram,
}

impl Sample {
    /// The sample in the series of one scrape taken at `at`.
    pub fn from_series(at: Instant, series: &[Series]) -> Result<Self, MissingSeries> {
        let leader_changes = series
            .iter()
            .filter(|s| s.name == LEADER_CHANGES)
            .map(|s| s.value)
            .reduce(|a, b| a + b)
            .ok_or(MissingSeries(LEADER_CHANGES))?;
        Ok(Sample {
            at,
            leader_changes,
            wal_fsync: histogram(series, WAL_FSYNC)?,
            backend_commit: histogram(series, BACKEND_COMMIT)?,
        })
    }
}

fn histogram(series: &[Series], name: &'static str) -> Result<Histogram, MissingSeries> {
    let bucket = format!("{name}_bucket");
    let mut buckets = Vec::new();
    for s in series.iter().filter(|s| s.name == bucket) {
        let le = s.label("le").and_then(|le| le.parse::<f64>().ok()).ok_or(MissingSeries(name))?;
        buckets.push((le, s.value));
    }
    Histogram::from_buckets(buckets).ok_or(MissingSeries(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::exposition::parse;

    fn h(buckets: &[(f64, f64)]) -> Histogram {
        Histogram::from_buckets(buckets.iter().copied()).expect("valid histogram")
    }

    #[test]
    fn quantiles_interpolate_like_prometheus() {
        let x = h(&[(0.001, 0.0), (0.002, 50.0), (0.004, 100.0), (f64::INFINITY, 100.0)]);
        assert_eq!(x.count(), 100.0);
        // Rank 25 is halfway through the (0.001, 0.002] bucket.
        assert!((x.quantile(0.25).expect("observations") - 0.0015).abs() < 1e-12);
        // Rank 99 is 49/50 of the way through (0.002, 0.004].
        assert!((x.quantile(0.99).expect("observations") - 0.00396).abs() < 1e-12);
        // In the +Inf bucket: the highest finite bound.
        let slow = h(&[(0.5, 1.0), (f64::INFINITY, 10.0)]);
        assert_eq!(slow.quantile(0.99), Some(0.5));
        // The first bucket starts at 0.
        assert_eq!(h(&[(1.0, 4.0), (f64::INFINITY, 4.0)]).quantile(0.5), Some(0.5));
        assert_eq!(h(&[(1.0, 0.0), (f64::INFINITY, 0.0)]).quantile(0.99), None);
    }

    #[test]
    fn deltas_handle_restarts_and_refuse_other_buckets() {
        let before = h(&[(0.01, 10.0), (f64::INFINITY, 12.0)]);
        let after = h(&[(0.01, 15.0), (f64::INFINITY, 30.0)]);
        assert_eq!(after.since(&before), Some(h(&[(0.01, 5.0), (f64::INFINITY, 18.0)])));
        let restarted = h(&[(0.01, 2.0), (f64::INFINITY, 2.0)]);
        assert_eq!(restarted.since(&before), Some(restarted.clone()));
        assert_eq!(h(&[(0.02, 15.0), (f64::INFINITY, 30.0)]).since(&before), None);
        assert_eq!(Histogram::from_buckets([(0.1, 1.0)]), None, "no +Inf bucket");
        // Equal bounds from series with other labels are summed.
        assert_eq!(
            Histogram::from_buckets([(f64::INFINITY, 2.0), (0.1, 1.0), (0.1, 1.0), (f64::INFINITY, 3.0)]),
            Some(h(&[(0.1, 2.0), (f64::INFINITY, 5.0)]))
        );
    }

    #[test]
    fn a_sample_needs_every_series() {
        let text = "etcd_server_leader_changes_seen_total 2\n\
            etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 3\n\
            etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 4\n\
            etcd_disk_backend_commit_duration_seconds_bucket{le=\"+Inf\"} 5\n";
        let series = parse(text).expect("valid exposition");
        let at = Instant::now();
        let s = Sample::from_series(at, &series).expect("complete sample");
        assert_eq!(s.leader_changes, 2.0);
        assert_eq!(s.wal_fsync.count(), 4.0);
        assert_eq!(s.backend_commit.count(), 5.0);
        assert_eq!(Sample::from_series(at, &series[1..]), Err(MissingSeries(LEADER_CHANGES)));
        assert_eq!(Sample::from_series(at, &series[..3]), Err(MissingSeries(BACKEND_COMMIT)));
    }
}
