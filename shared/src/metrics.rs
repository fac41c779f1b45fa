//! Prometheus metrics every operator exposes on `/metrics`, plus a registry per watched
//! namespace on which each operator registers its own (member lag, backup age, ...).
//!
//! Every series of a namespace's registry carries `namespace="<ns>"`: two clusters of the
//! same name in two watched namespaces are two series, and an alert names the namespace
//! the cluster lives in, not the one the operator runs in. The operator's own series
//! (reconciles, leader) carry none, so a scrape's `namespace` label (the operator's pod)
//! stays on them; a scrape must honour the exported labels (`honorLabels: true` in the
//! PodMonitor) for the clusters' to win.
//!
//! The reconcile metrics are the RED set per controller: rate (`reconciles_total`), errors
//! (`reconcile_errors_total` by reason) and duration (`reconcile_duration_seconds`).
//! `task_restarts_total{cluster}` counts the restarts of the per-cluster background tasks
//! after a panic (see [`crate::tasks`]): a task that keeps restarting leaves its cluster
//! unmanaged for the back-off each time.
//!
//! The building blocks below serve the operators' per-cluster metrics: [`ClusterFamily`]
//! remembers the series it created so a deleted cluster or a departed member stops being
//! exported (and alerting), [`PhaseGauge`] is the one-series-per-phase gauge, and
//! [`BackupMetrics`] the backup age and outcome every operator with backups exports.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The shared metrics of one operator process, served on `/metrics` with those of every
/// watched namespace ([`Metrics::namespace`]).
pub struct Metrics {
    /// The operator's own series (reconciles, leader).
    pub registry: Registry,
    /// The metric name prefix, for the namespaces' registries.
    prefix: String,
    /// The registry of each watched namespace, in the order they were created.
    namespaces: Mutex<Vec<Registry>>,
    reconciles: IntCounterVec,
    errors: IntCounterVec,
    duration: HistogramVec,
    leader: IntGauge,
}

/// The metrics of the resources in one watched namespace: each series carries its
/// `namespace` label.
pub struct NamespaceMetrics {
    /// The namespace's registry; operators register their per-cluster collectors here.
    pub registry: Registry,
    task_restarts: ClusterFamily<IntCounterVec>,
}

impl Metrics {
    /// Creates the registry with metric names prefixed by `prefix` (e.g. `statecraft_mysql`).
    pub fn new(prefix: &str) -> Result<Self, prometheus::Error> {
        let prefix = prefix.replace('-', "_");
        let registry = Registry::new_custom(Some(prefix.clone()), None)?;
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
        Ok(Metrics { registry, prefix, namespaces: Mutex::new(Vec::new()), reconciles, errors, duration, leader })
    }

    /// Creates the registry of watched namespace `namespace`, served with the others.
    pub fn namespace(&self, namespace: &str) -> Result<NamespaceMetrics, prometheus::Error> {
        let labels = [("namespace".to_string(), namespace.to_string())].into_iter().collect();
        let registry = Registry::new_custom(Some(self.prefix.clone()), Some(labels))?;
        let task_restarts = ClusterFamily::register(
            &registry,
            IntCounterVec::new(
                Opts::new("task_restarts_total", "Restarts of a cluster's background task after it panicked."),
                &["cluster"],
            )?,
        )?;
        self.namespaces.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(registry.clone());
        Ok(NamespaceMetrics { registry, task_restarts })
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

    /// The text exposition of every series (see [`Metrics::gather`]).
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for the text format except on invalid metrics,
        // which registration already rejected.
        if let Err(e) = TextEncoder::new().encode(&self.gather(), &mut buf) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Every series: the operator's and every namespace's, one family per metric name (each
    /// namespace's registry has its own), sorted by name.
    pub fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        let mut families: BTreeMap<String, prometheus::proto::MetricFamily> = BTreeMap::new();
        let namespaces = self.namespaces.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        for family in std::iter::once(&self.registry).chain(&namespaces).flat_map(Registry::gather) {
            match families.entry(family.name().to_string()) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(family);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => {
                    e.get_mut().mut_metric().extend(family.get_metric().iter().cloned());
                }
            }
        }
        families.into_values().collect()
    }
}

impl NamespaceMetrics {
    /// Exports the task restarts of `cluster` from 0 when its task starts, so that the first
    /// restart is an increase an alert's `increase()` sees, not the birth of a series.
    pub fn watch_task(&self, cluster: &str) {
        self.task_restarts.with(&[cluster]);
    }

    /// Counts one restart of the background task of `cluster`.
    pub fn task_restarted(&self, cluster: &str) {
        self.task_restarts.with(&[cluster]).inc();
    }

    /// Stops exporting the task restarts of a deleted cluster.
    pub fn forget_task(&self, cluster: &str) {
        self.task_restarts.forget(cluster);
    }
}

/// A metric family whose first label is `cluster`, remembering every series it created.
///
/// Prometheus exports a series until it is removed, and a vector can only remove a series
/// whose every label value is known; without this memory a deleted cluster, or a member
/// scaled away, would keep its last values (and keep alerting) until the process restarts.
pub struct ClusterFamily<V> {
    vec: V,
    /// Label values of every live series, by cluster (the first label value).
    series: Mutex<BTreeMap<String, BTreeSet<Vec<String>>>>,
}

impl<T: MetricVecBuilder + 'static> ClusterFamily<MetricVec<T>> {
    /// Registers `vec` on `registry`. Its first label must be `cluster`, which is what
    /// [`ClusterFamily::forget`] and [`ClusterFamily::retain`] key on.
    pub fn register(registry: &Registry, vec: MetricVec<T>) -> Result<Self, prometheus::Error> {
        let first = vec.desc().first().and_then(|d| d.variable_labels.first().cloned());
        if first.as_deref() != Some("cluster") {
            let name = vec.desc().first().map(|d| d.fq_name.clone()).unwrap_or_default();
            return Err(prometheus::Error::Msg(format!("{name}: the first label must be \"cluster\", not {first:?}")));
        }
        registry.register(Box::new(vec.clone()))?;
        Ok(ClusterFamily { vec, series: Mutex::default() })
    }

    /// The series with these label values (`cluster` first), created if new.
    pub fn with(&self, labels: &[&str]) -> T::M {
        if let Some(cluster) = labels.first() {
            self.lock()
                .entry((*cluster).to_string())
                .or_default()
                .insert(labels.iter().map(|l| (*l).to_string()).collect());
        }
        self.vec.with_label_values(labels)
    }

    /// Stops exporting one series, e.g. a figure that is unknown this time.
    pub fn remove(&self, labels: &[&str]) {
        let Some(cluster) = labels.first() else { return };
        let owned: Vec<String> = labels.iter().map(|l| (*l).to_string()).collect();
        let known = self.lock().get_mut(*cluster).is_some_and(|s| s.remove(&owned));
        if known {
            let _ = self.vec.remove_label_values(labels);
        }
    }

    /// Stops exporting the series of `cluster` whose label values `keep` rejects, e.g. those
    /// of members that are no longer part of it.
    pub fn retain(&self, cluster: &str, keep: impl FnMut(&Vec<String>) -> bool) {
        let gone: BTreeSet<Vec<String>> = {
            let mut series = self.lock();
            let Some(known) = series.get_mut(cluster) else { return };
            let (kept, gone) = std::mem::take(known).into_iter().partition(keep);
            *known = kept;
            gone
        };
        for labels in gone {
            let _ = self.vec.remove_label_values(&labels);
        }
    }

    /// Stops exporting every series of `cluster` (it was deleted).
    pub fn forget(&self, cluster: &str) {
        let gone = self.lock().remove(cluster).unwrap_or_default();
        for labels in gone {
            let _ = self.vec.remove_label_values(&labels);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeSet<Vec<String>>>> {
        // The map is consistent after every statement, so a panic elsewhere cannot leave
        // it half-updated: recover from poisoning instead of propagating it.
        self.series.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A `(cluster, phase)` gauge that is 1 for the cluster's current phase and 0 for every
/// other known phase, so that `phase="X"` selects a series (0 or 1) for every cluster
/// whatever its phase, and a phase change shows as one series dropping and another rising.
pub struct PhaseGauge {
    family: ClusterFamily<IntGaugeVec>,
    phases: Vec<String>,
}

impl PhaseGauge {
    /// Registers gauge `name` with the closed set of `phases`.
    pub fn register(registry: &Registry, name: &str, help: &str, phases: &[&str]) -> Result<Self, prometheus::Error> {
        let family =
            ClusterFamily::register(registry, IntGaugeVec::new(Opts::new(name, help), &["cluster", "phase"])?)?;
        Ok(PhaseGauge { family, phases: phases.iter().map(|p| (*p).to_string()).collect() })
    }

    /// Records the current phase of `cluster`. A phase outside the known set is exported
    /// too (rather than lost), and logged, since alerts and dashboards do not know it.
    pub fn set(&self, cluster: &str, phase: &str) {
        for p in &self.phases {
            self.family.with(&[cluster, p]).set(i64::from(p == phase));
        }
        if !self.phases.iter().any(|p| p == phase) {
            tracing::warn!(cluster, phase, "exporting a phase outside the known set");
            self.family.with(&[cluster, phase]).set(1);
        }
    }

    /// Stops exporting the phases of a deleted cluster.
    pub fn forget(&self, cluster: &str) {
        self.family.forget(cluster);
    }
}

/// Backup outcome and age per cluster: `backups_total{cluster, result}` (`success` or
/// `failure`) and `backup_last_success_timestamp_seconds{cluster}`, from which alerts
/// compute the age of the newest good backup.
pub struct BackupMetrics {
    last_success: ClusterFamily<IntGaugeVec>,
    finished: ClusterFamily<IntCounterVec>,
}

impl BackupMetrics {
    /// Creates the metrics and registers them on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let last_success = IntGaugeVec::new(
            Opts::new("backup_last_success_timestamp_seconds", "Completion time of the newest successful backup."),
            &["cluster"],
        )?;
        let finished = IntCounterVec::new(
            Opts::new("backups_total", "Backups finished while this operator process watched, by result."),
            &["cluster", "result"],
        )?;
        Ok(BackupMetrics {
            last_success: ClusterFamily::register(registry, last_success)?,
            finished: ClusterFamily::register(registry, finished)?,
        })
    }

    /// Records a successful backup of `cluster` completed at `unix_seconds`, kept only if
    /// newer than the one known: after a restart every succeeded backup may be seen again,
    /// in any order.
    pub fn succeeded(&self, cluster: &str, unix_seconds: i64) {
        let g = self.last_success.with(&[cluster]);
        if unix_seconds > g.get() {
            g.set(unix_seconds);
        }
    }

    /// Exports both results of `cluster` at 0 until its first backup finishes. An alert on
    /// `increase(backups_total{result="failure"}[…])` never counts a series that appears
    /// already at 1, so without this the first failure after an operator replica starts
    /// (or takes over) would go unseen. Called on every pass of the cluster's task.
    pub fn watch(&self, cluster: &str) {
        for result in ["success", "failure"] {
            let _ = self.finished.with(&[cluster, result]);
        }
    }

    /// Counts a backup that finished while this process watched, by result.
    pub fn finished(&self, cluster: &str, ok: bool) {
        self.finished.with(&[cluster, if ok { "success" } else { "failure" }]).inc();
    }

    /// Stops exporting the backups of a deleted cluster.
    pub fn forget(&self, cluster: &str) {
        self.last_success.forget(cluster);
        self.finished.forget(cluster);
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

    #[test]
    fn each_namespace_labels_its_series_and_one_family_holds_them_all() -> Result<(), prometheus::Error> {
        let m = Metrics::new("statecraft-test")?;
        let shop = m.namespace("shop")?;
        let billing = m.namespace("billing")?;
        shop.watch_task("db");
        shop.watch_task("idle");
        shop.task_restarted("db");
        shop.task_restarted("db");
        billing.task_restarted("db");
        let text = m.render();
        assert!(text.contains(r#"statecraft_test_task_restarts_total{cluster="db",namespace="shop"} 2"#), "{text}");
        assert!(text.contains(r#"statecraft_test_task_restarts_total{cluster="idle",namespace="shop"} 0"#), "{text}");
        assert!(text.contains(r#"statecraft_test_task_restarts_total{cluster="db",namespace="billing"} 1"#), "{text}");
        assert_eq!(text.matches("# TYPE statecraft_test_task_restarts_total").count(), 1, "{text}");
        shop.forget_task("db");
        shop.forget_task("idle");
        billing.forget_task("db");
        assert!(!m.render().contains("task_restarts_total{"), "a deleted cluster's restarts are not exported");
        Ok(())
    }

    fn render(registry: &Registry) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut buf).expect("encodable");
        String::from_utf8(buf).expect("UTF-8")
    }

    #[test]
    fn a_cluster_family_drops_departed_members_one_series_and_deleted_clusters() -> Result<(), prometheus::Error> {
        let registry = Registry::new();
        let up = ClusterFamily::register(
            &registry,
            IntGaugeVec::new(Opts::new("member_up", "test"), &["cluster", "member", "kind"])?,
        )?;
        for (cluster, member) in [("a", "a-0"), ("a", "a-1"), ("b", "b-0")] {
            up.with(&[cluster, member, "x"]).set(1);
            up.with(&[cluster, member, "y"]).set(0);
        }
        up.retain("a", |labels| labels[1] != "a-1");
        up.remove(&["a", "a-0", "y"]);
        up.remove(&["a", "a-9", "y"]); // never created: nothing happens
        let text = render(&registry);
        assert!(text.contains(r#"member_up{cluster="a",kind="x",member="a-0"} 1"#), "{text}");
        assert!(!text.contains(r#"kind="y",member="a-0""#), "{text}");
        assert!(!text.contains(r#"member="a-1""#), "{text}");
        up.forget("a");
        let text = render(&registry);
        assert!(!text.contains(r#"cluster="a""#), "{text}");
        assert!(text.contains(r#"member_up{cluster="b",kind="x",member="b-0"} 1"#), "{text}");
        // Series re-created after forget are tracked again.
        up.with(&["a", "a-0", "x"]).set(1);
        up.forget("a");
        assert!(!render(&registry).contains(r#"cluster="a""#));
        Ok(())
    }

    #[test]
    fn a_cluster_family_needs_cluster_as_first_label() -> Result<(), prometheus::Error> {
        let vec = IntGaugeVec::new(Opts::new("g", "test"), &["member", "cluster"])?;
        let err = ClusterFamily::register(&Registry::new(), vec).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("first label must be"), "{err}");
        Ok(())
    }

    #[test]
    fn exactly_one_phase_is_one_and_backups_keep_the_newest_success() -> Result<(), prometheus::Error> {
        let registry = Registry::new();
        let phase = PhaseGauge::register(&registry, "cluster_phase", "test", &["Healthy", "Degraded"])?;
        let backups = BackupMetrics::register(&registry)?;
        phase.set("a", "Degraded");
        phase.set("b", "Exploded");
        // Watched before any backup finished: both results at 0, so that the first
        // failure is an increase.
        backups.watch("a");
        let text = render(&registry);
        for line in
            [r#"backups_total{cluster="a",result="failure"} 0"#, r#"backups_total{cluster="a",result="success"} 0"#]
        {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        backups.succeeded("a", 200);
        backups.succeeded("a", 100);
        backups.finished("a", false);
        backups.watch("a");
        let text = render(&registry);
        for line in [
            r#"cluster_phase{cluster="a",phase="Degraded"} 1"#,
            r#"cluster_phase{cluster="a",phase="Healthy"} 0"#,
            r#"cluster_phase{cluster="b",phase="Exploded"} 1"#,
            r#"cluster_phase{cluster="b",phase="Healthy"} 0"#,
            r#"backup_last_success_timestamp_seconds{cluster="a"} 200"#,
            r#"backups_total{cluster="a",result="failure"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        phase.forget("a");
        phase.forget("b");
        backups.forget("a");
        let text = render(&registry);
        assert!(!text.contains("cluster="), "{text}");
        Ok(())
    }
}
