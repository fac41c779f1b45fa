//! Prometheus metrics every operator exposes on `/metrics`, plus a registry on which each
//! operator registers its own (member lag, backup age, ...).
//!
//! The reconcile metrics are the RED set per controller: rate (`reconciles_total`), errors
//! (`reconcile_errors_total` by reason) and duration (`reconcile_duration_seconds`).

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

/// The shared metrics of one operator process.
pub struct Metrics {
    /// The registry served on `/metrics`; operators register their own collectors here.
    pub registry: Registry,
    reconciles: IntCounterVec,
    errors: IntCounterVec,
    duration: HistogramVec,
    leader: IntGauge,
}

impl Metrics {
    /// Creates the registry with metric names prefixed by `prefix` (e.g. `statecraft_mysql`).
    pub fn new(prefix: &str) -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some(prefix.replace('-', "_")), None)?;
        let reconciles = IntCounterVec::new(
            Opts::new("reconciles_total", "Reconciles run, by controller and result."),
            &["controller", "result"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new("reconcile_errors_total", "Failed reconciles, by controller and error reason."),
            &["controller", "reason"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new("reconcile_duration_seconds", "Time spent in one reconcile, by controller.")
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["controller"],
        )?;
        let leader = IntGauge::new("leader", "1 while this process holds the leader lease and runs the controllers.")?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        Ok(Metrics { registry, reconciles, errors, duration, leader })
    }

    /// Records one finished reconcile.
    pub fn observe_reconcile(&self, controller: &str, seconds: f64, error_reason: Option<&str>) {
        self.duration.with_label_values(&[controller]).observe(seconds);
        let result = if error_reason.is_some() { "error" } else { "success" };
        self.reconciles.with_label_values(&[controller, result]).inc();
        if let Some(reason) = error_reason {
            self.errors.with_label_values(&[controller, reason]).inc();
        }
    }

    /// Records whether this process leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The text exposition of every registered metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for the text format except on invalid metrics,
        // which registration already rejected.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_metrics_are_rendered() -> Result<(), prometheus::Error> {
        let m = Metrics::new("statecraft-test")?;
        m.observe_reconcile("widget", 0.02, None);
        m.observe_reconcile("widget", 0.5, Some("InvalidSpec"));
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains(r#"statecraft_test_reconciles_total{controller="widget",result="success"} 1"#), "{text}");
        assert!(
            text.contains(r#"statecraft_test_reconcile_errors_total{controller="widget",reason="InvalidSpec"} 1"#),
            "{text}"
        );
        assert!(text.contains("statecraft_test_leader 1"), "{text}");
        assert!(text.contains(r#"statecraft_test_reconcile_duration_seconds_count{controller="widget"} 2"#), "{text}");
        Ok(())
    }
}
