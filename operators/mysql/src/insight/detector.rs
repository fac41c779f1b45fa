//! The judgement of each server's figures against its own recent past, from what the
//! clustering task observes every second. Two abnormalities are judged:
//!
//! - a replication lag spike: a replica that falls behind stops being a safe switchover
//!   target, then leaves the read-only Service, and reads served by it are stale; a lag
//!   several times what the replica usually shows (a long transaction, a stalled disk, an
//!   applier blocked by a lock, a delay someone set) is worth telling before the readiness
//!   probe and the alerts react;
//! - a connection error spike: `Aborted_connects` (failed logins, handshakes that time out)
//!   and `Aborted_clients` (connections dropped without a close) jumping above their usual
//!   rate mean a client with a wrong password, a network dropping connections, or a
//!   connection limit being hit.
//!
//! Both are judged by the shared [`statecraft_shared::insight`] rules: above a multiple of
//! the member's baseline *and* above an absolute floor, for several samples in a row.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use statecraft_shared::insight::{
    BaselineProfile, Finding, Raised, Series, Spike, SpikeRule, Window, counter_increase,
};
use statecraft_shared::reason::Catalogue;

use crate::clustering::observed::Member;
use crate::reason::MySql;

/// The kinds of abnormality, each a CamelCase reason for the condition, Events and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The replication lag jumped above its baseline and floor.
    ReplicationLagSpike,
    /// The rate of connection errors jumped above its baseline and floor.
    ConnectionErrorSpike,
}

impl Kind {
    /// Every kind, e.g. to clear the metrics of those not raised.
    pub const ALL: [Kind; 2] = [Kind::ReplicationLagSpike, Kind::ConnectionErrorSpike];

    /// The reason: condition and Event reason, metric label value.
    pub fn reason(self) -> MySql {
        match self {
            Kind::ReplicationLagSpike => MySql::ReplicationLagSpike,
            Kind::ConnectionErrorSpike => MySql::ConnectionErrorSpike,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason().as_str())
    }
}

/// An abnormality of one member, raised by [`Detector::observe`].
pub type Abnormality = Finding<Kind>;

/// When a member is abnormal.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Replication lag, seconds. The floor is the lag beyond which the operator no longer
    /// switches over to the replica (`SWITCHOVER_MAX_LAG_SECONDS`): under it the lag
    /// changes nothing the operator or a client can tell. Five samples (five seconds at
    /// one pass a second) ignore a large transaction applied at once.
    pub lag: SpikeRule,
    /// How the lag's baseline is kept.
    pub lag_baseline: BaselineProfile,
    /// How far back connection errors are counted: the rate judged is errors per window.
    pub error_window: Duration,
    /// Connection errors per [`Thresholds::error_window`]. Under the floor (one every two
    /// seconds) a few clients misbehaving now and then are noise.
    pub errors: SpikeRule,
    /// How the error rate's baseline is kept.
    pub error_baseline: BaselineProfile,
}

impl Default for Thresholds {
    fn default() -> Self {
        // Ten minutes of history, as the peak of every ten seconds (60 values a series);
        // its 90th percentile is what the member reaches regularly, not its rare worst. A
        // minute of history makes a baseline; until then the floor stands in.
        let baseline = BaselineProfile {
            span: Duration::from_secs(600),
            step: Duration::from_secs(10),
            quantile: 0.9,
            min_steps: 6,
        };
        Thresholds {
            lag: SpikeRule { factor: 3.0, floor: 10.0, sustain: 5 },
            lag_baseline: baseline.clone(),
            error_window: Duration::from_secs(60),
            errors: SpikeRule { factor: 3.0, floor: 30.0, sustain: 5 },
            error_baseline: baseline,
        }
    }
}

/// One observation of one member, as the detector needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// When it was taken.
    pub at: Instant,
    /// Seconds behind its source, when it is a replica that knows.
    pub lag_seconds: Option<f64>,
    /// Its cumulative connection error counter, when it answered.
    pub connection_errors: Option<u64>,
}

impl Sample {
    /// What the detector needs of `member` as observed at `at`.
    pub fn of(member: &Member, at: Instant) -> Sample {
        let server = member.server.up();
        Sample {
            at,
            lag_seconds: server.and_then(|s| s.replication.as_ref()).and_then(|r| r.lag_seconds).map(|l| l as f64),
            connection_errors: server.and_then(|s| s.connection_errors),
        }
    }
}

/// What the detector remembers of one member.
struct History {
    lag: Series,
    /// The last value of the connection error counter.
    last_errors: Option<u64>,
    /// Connection errors between consecutive samples, over the error window.
    errors: Window,
    error_rate: Series,
    raised: Raised<Kind>,
}

impl History {
    fn new(t: &Thresholds) -> Self {
        History {
            lag: Series::new(t.lag_baseline.clone()),
            last_errors: None,
            errors: Window::new(t.error_window),
            error_rate: Series::new(t.error_baseline.clone()),
            raised: Raised::default(),
        }
    }
}

/// Per-member baselines and the judgement of each new sample. One detector serves one
/// cluster (member names are its keys).
pub struct Detector {
    thresholds: Thresholds,
    members: BTreeMap<String, History>,
}

impl Default for Detector {
    fn default() -> Self {
        Detector::new(Thresholds::default())
    }
}

impl Detector {
    /// A detector with no history.
    pub fn new(thresholds: Thresholds) -> Self {
        Detector { thresholds, members: BTreeMap::new() }
    }

    /// Judges `sample` of `member` against the member's past, then adds it to that past;
    /// returns the abnormalities raised now (empty: the member is normal, and any earlier
    /// abnormality has cleared).
    pub fn observe(&mut self, member: &str, sample: Sample) -> Vec<Abnormality> {
        let t = &self.thresholds;
        let h = self.members.entry(member.to_string()).or_insert_with(|| History::new(t));
        let mut found = Vec::new();
        if let Some(spike) = h.lag.observe(&t.lag, sample.at, sample.lag_seconds) {
            found.push((Kind::ReplicationLagSpike, lag_message(&spike, t)));
        }
        // The rate is judged once there is an increase to count, i.e. from the second
        // answer on; an unanswered sample has no rate.
        let rate = sample.connection_errors.and_then(|now| {
            let last = h.last_errors.replace(now)?;
            h.errors.push(sample.at, counter_increase(last as f64, now as f64));
            Some(h.errors.sum())
        });
        if let Some(spike) = h.error_rate.observe(&t.errors, sample.at, rate) {
            found.push((Kind::ConnectionErrorSpike, error_message(&spike, t)));
        }
        h.raised.update(member, found)
    }

    /// Drops the history of members `keep` rejects (removed from the cluster), so that a
    /// member later re-added under the same name starts afresh.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.members.retain(|m, _| keep(m));
    }
}

fn lag_message(s: &Spike, t: &Thresholds) -> String {
    format!(
        "replication lag {:.0} s, {:.1}× its baseline of {:.0} s (p{:.0} of the last {}); abnormal above {:.0} s \
         ({}× the baseline, at least {:.0} s)",
        s.value,
        s.ratio(),
        s.baseline,
        t.lag_baseline.quantile * 100.0,
        minutes(t.lag_baseline.span),
        s.limit,
        t.lag.factor,
        t.lag.floor,
    )
}

fn error_message(s: &Spike, t: &Thresholds) -> String {
    let per = minutes(t.error_window);
    format!(
        "{:.0} connection errors (Aborted_connects + Aborted_clients) in the last {per}, {:.1}× its baseline of \
         {:.0} (p{:.0} of the last {}); abnormal above {:.0} ({}× the baseline, at least {:.0})",
        s.value,
        s.ratio(),
        s.baseline,
        t.error_baseline.quantile * 100.0,
        minutes(t.error_baseline.span),
        s.limit,
        t.errors.factor,
        t.errors.floor,
    )
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(60) { format!("{} min", s / 60) } else { format!("{s} s") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Flavor;
    use crate::clustering::gtid::GtidSet;
    use crate::clustering::observed::{PodState, Replication, Server, ServerState};

    /// A member observed once a second, like the clustering task does.
    struct Clock {
        start: Instant,
        seconds: u64,
    }

    impl Clock {
        fn new() -> Self {
            Clock { start: Instant::now(), seconds: 0 }
        }

        fn sample(&mut self, lag: Option<f64>, errors: Option<u64>) -> Sample {
            self.seconds += 1;
            Sample { at: self.start + Duration::from_secs(self.seconds), lag_seconds: lag, connection_errors: errors }
        }
    }

    fn kinds(found: &[Abnormality]) -> Vec<Kind> {
        found.iter().map(|a| a.kind).collect()
    }

    #[test]
    fn a_lag_spike_is_raised_after_five_seconds_and_clears_when_caught_up() {
        let mut d = Detector::default();
        let mut c = Clock::new();
        // Five minutes of a replica that lags up to 2 s now and then.
        for i in 0..300 {
            let lag = if i % 30 == 0 { 2.0 } else { 0.0 };
            assert_eq!(d.observe("db-1", c.sample(Some(lag), Some(0))), vec![]);
        }
        // Blips over the limit for a few seconds are ignored.
        for _ in 0..4 {
            assert_eq!(d.observe("db-1", c.sample(Some(40.0), Some(0))), vec![]);
        }
        assert_eq!(d.observe("db-1", c.sample(Some(0.0), Some(0))), vec![]);
        // Under the 10 s floor, 8 s (4× the baseline) is not abnormal.
        for _ in 0..60 {
            assert_eq!(d.observe("db-1", c.sample(Some(8.0), Some(0))), vec![]);
        }
        for _ in 0..60 {
            assert_eq!(d.observe("db-1", c.sample(Some(0.0), Some(0))), vec![]);
        }
        // A delay that grows a second a second.
        let raised: Vec<_> = (1..=120).map(|s| d.observe("db-1", c.sample(Some(s as f64), Some(0)))).collect();
        let first = raised.iter().position(|f| !f.is_empty()).expect("lag spike raised");
        // The baseline is 8 (the p90 of the last ten minutes, which the 8 s minute is in):
        // 24 s is the limit, and five samples above it raise the spike.
        assert_eq!(first + 1, 29, "raised at {} s of lag", first + 1);
        let a = &raised[first][0];
        assert_eq!(a.kind, Kind::ReplicationLagSpike);
        assert!(a.new);
        assert_eq!(
            a.message,
            "member db-1: replication lag 29 s, 3.6× its baseline of 8 s (p90 of the last 10 min); abnormal above \
             24 s (3× the baseline, at least 10 s)"
        );
        let last = raised.last().expect("samples");
        assert_eq!(kinds(last), vec![Kind::ReplicationLagSpike]);
        assert!(!last[0].new);
        assert!(last[0].message.contains("lag 120 s, 15.0× its baseline of 8 s"), "{}", last[0].message);
        // Caught up: cleared after five samples under the limit.
        let after: Vec<_> = (0..5).map(|_| d.observe("db-1", c.sample(Some(0.0), Some(0)))).collect();
        assert!(after[..4].iter().all(|f| kinds(f) == vec![Kind::ReplicationLagSpike]), "{after:?}");
        assert_eq!(after[4], vec![]);
    }

    #[test]
    fn a_fresh_member_is_judged_against_three_times_the_floor() {
        let mut d = Detector::default();
        let mut c = Clock::new();
        for _ in 0..20 {
            assert_eq!(d.observe("db-1", c.sample(Some(25.0), None)), vec![]);
        }
        let mut d = Detector::default();
        let found: Vec<_> = (0..5).map(|_| d.observe("db-1", c.sample(Some(31.0), None))).collect();
        assert_eq!(kinds(&found[4]), vec![Kind::ReplicationLagSpike]);
    }

    #[test]
    fn a_member_that_stops_replicating_is_not_judged_on_lag() {
        let mut d = Detector::default();
        let mut c = Clock::new();
        for _ in 0..5 {
            d.observe("db-1", c.sample(Some(100.0), None));
        }
        assert_eq!(kinds(&d.observe("db-1", c.sample(Some(100.0), None))), vec![Kind::ReplicationLagSpike]);
        // Promoted (no replication any more), or its applier stopped: the lag is unknown.
        assert_eq!(d.observe("db-1", c.sample(None, None)), vec![]);
    }

    #[test]
    fn a_jump_in_connection_errors_is_raised_and_a_server_restart_is_not_one() {
        let mut d = Detector::default();
        let mut c = Clock::new();
        let mut errors = 1000;
        // Ten minutes at one error every five seconds: 12 a minute.
        for i in 0..600 {
            if i % 5 == 0 {
                errors += 1;
            }
            assert_eq!(d.observe("db-0", c.sample(None, Some(errors))), vec![]);
        }
        // The server restarts: its counter starts again from 0.
        errors = 0;
        for i in 0..120 {
            if i % 5 == 0 {
                errors += 1;
            }
            assert_eq!(d.observe("db-0", c.sample(None, Some(errors))), vec![], "after the restart");
        }
        // A client with a wrong password retrying twice a second: 120 a minute.
        let raised: Vec<_> = (0..90)
            .map(|_| {
                errors += 2;
                d.observe("db-0", c.sample(None, Some(errors)))
            })
            .collect();
        let first = raised.iter().position(|f| !f.is_empty()).expect("raised");
        // The limit is 3 × 12 = 36 a minute: reached after 12 s, raised five samples on.
        assert!((14..=18).contains(&first), "raised after {first} s");
        assert_eq!(kinds(&raised[first]), vec![Kind::ConnectionErrorSpike]);
        assert!(raised[first][0].message.starts_with("member db-0: "), "{}", raised[first][0].message);
        assert!(raised[first][0].message.contains("abnormal above 36 (3× the baseline, at least 30)"));
        // The client is fixed: once the minute has passed the rate is back to normal.
        let after: Vec<_> = (0..70).map(|_| d.observe("db-0", c.sample(None, Some(errors)))).collect();
        assert_eq!(after.last(), Some(&vec![]));
    }

    #[test]
    fn members_are_judged_apart_and_removed_members_forgotten() {
        let mut d = Detector::default();
        let mut c = Clock::new();
        for _ in 0..5 {
            d.observe("db-1", c.sample(Some(100.0), None));
            assert_eq!(d.observe("db-2", c.sample(Some(0.0), None)), vec![]);
        }
        assert_eq!(kinds(&d.observe("db-1", c.sample(Some(100.0), None))), vec![Kind::ReplicationLagSpike]);
        d.retain(|m| m != "db-1");
        assert!(!d.members.contains_key("db-1"));
        assert_eq!(d.observe("db-1", c.sample(Some(100.0), None)), vec![], "a re-added member starts afresh");
    }

    #[test]
    fn a_sample_takes_the_lag_and_the_error_counter_of_the_server() {
        let at = Instant::now();
        let mut m = Member {
            ordinal: 1,
            pod: PodState::Running { ready: true },
            role_label: Some("replica".into()),
            reads_label: true,
            address: ("db-1".into(), 3306),
            server: ServerState::Up(Server {
                read_only: true,
                executed: GtidSet::parse(Flavor::Mariadb, "0-100-42").expect("valid GTID position"),
                semi_sync_source: false,
                semi_sync_active: false,
                uptime_seconds: None,
                connection_id: None,
                replication: Some(Replication { lag_seconds: Some(7), ..Default::default() }),
                connection_errors: Some(3),
                client_connections: None,
            }),
            unreachable_passes: 0,
        };
        assert_eq!(Sample::of(&m, at), Sample { at, lag_seconds: Some(7.0), connection_errors: Some(3) });
        m.server = ServerState::Unreachable("connection refused".into());
        assert_eq!(Sample::of(&m, at), Sample { at, lag_seconds: None, connection_errors: None });
    }
}
