//! Per-cluster and per-member metrics of the servers, from what the clustering task observes
//! every second: no exporter sidecar is needed for the replication state. Registered on the
//! operator's `/metrics` with the `statecraft_mysql_` prefix.

use std::collections::BTreeSet;

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use statecraft_shared::metrics::{BackupMetrics, ClusterFamily, PhaseGauge};
use statecraft_shared::reason::Catalogue;

use crate::clustering::acks::Acknowledgements;
use crate::clustering::decide::{Decision, Health, Operation, Role};
use crate::clustering::observed::Observed;
use crate::insight::{Abnormality, Kind};

/// Every phase a cluster can report, so exactly one `cluster_phase` series is 1.
const PHASES: [Health; 7] = [
    Health::Stopped,
    Health::Paused,
    Health::Initializing,
    Health::Healthy,
    Health::Degraded,
    Health::Failed,
    Health::Lost,
];

/// The gauges and counters of the servers.
pub struct ServerMetrics {
    up: ClusterFamily<IntGaugeVec>,
    primary: ClusterFamily<IntGaugeVec>,
    read_only: ClusterFamily<IntGaugeVec>,
    lag: ClusterFamily<GaugeVec>,
    transactions: ClusterFamily<IntGaugeVec>,
    errant: ClusterFamily<IntGaugeVec>,
    abnormality: ClusterFamily<IntGaugeVec>,
    client_connections: ClusterFamily<IntGaugeVec>,
    autoscaling_replicas: ClusterFamily<IntGaugeVec>,
    autoscaling_metric: ClusterFamily<GaugeVec>,
    semi_sync: ClusterFamily<IntGaugeVec>,
    semi_sync_active: ClusterFamily<IntGaugeVec>,
    phase: PhaseGauge,
    operations: ClusterFamily<IntCounterVec>,
    backups: BackupMetrics,
}

impl ServerMetrics {
    /// Creates the metrics and registers them on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let member = ["cluster", "member"];
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            ClusterFamily::register(registry, IntGaugeVec::new(Opts::new(name, help), labels)?)
        };
        let phases: Vec<&str> = PHASES.iter().map(|p| p.as_str()).collect();
        Ok(ServerMetrics {
            up: gauge("member_up", "1 when the server answered the last observation.", &member)?,
            primary: gauge("member_primary", "1 for the recorded primary.", &member)?,
            read_only: gauge("member_read_only", "1 when the server refuses writes.", &member)?,
            lag: ClusterFamily::register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "member_replication_lag_seconds",
                        "Seconds a replica is behind its source (absent when unknown).",
                    ),
                    &member,
                )?,
            )?,
            transactions: gauge(
                "member_gtid_transactions",
                "Transactions in the server's executed GTID set.",
                &member,
            )?,
            errant: gauge(
                "member_errant",
                "1 when the server has transactions the primary lacks (quarantined).",
                &member,
            )?,
            semi_sync: gauge(
                "primary_semi_sync_enabled",
                "1 when the primary waits for replica acknowledgements.",
                &["cluster"],
            )?,
            semi_sync_active: gauge(
                "primary_semi_sync_active",
                "1 while the primary waits for replica acknowledgements, 0 once it fell back to \
                 asynchronous replication (absent where none are expected).",
                &["cluster"],
            )?,
            phase: PhaseGauge::register(registry, "cluster_phase", "1 for the cluster's current phase.", &phases)?,
            operations: ClusterFamily::register(
                registry,
                IntCounterVec::new(
                    Opts::new("operations_total", "Clustering operations performed, by operation and result."),
                    &["cluster", "operation", "result"],
                )?,
            )?,
            abnormality: gauge(
                "member_abnormal",
                "1 while the operator's abnormality detector finds the member abnormal, by kind.",
                &["cluster", "member", "kind"],
            )?,
            client_connections: gauge(
                "member_client_connections",
                "Client connections open on the server (not the operator's, replication or probes).",
                &member,
            )?,
            autoscaling_replicas: gauge(
                "autoscaling_replicas",
                "Servers read-replica auto-scaling keeps the cluster at (absent without spec.autoScaling).",
                &["cluster"],
            )?,
            autoscaling_metric: ClusterFamily::register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "autoscaling_metric",
                        "The metric read-replica auto-scaling follows, as last measured (absent when it cannot be).",
                    ),
                    &["cluster", "metric"],
                )?,
            )?,
            backups: BackupMetrics::register(registry)?,
        })
    }

    /// The per-member gauges whose values are integers.
    fn member_gauges(&self) -> [&ClusterFamily<IntGaugeVec>; 7] {
        [
            &self.up,
            &self.primary,
            &self.read_only,
            &self.transactions,
            &self.errant,
            &self.abnormality,
            &self.client_connections,
        ]
    }

    /// Records one pass's observation and decision of `cluster` (pod names `<cluster>-<n>`).
    /// Members no longer observed (scaled away) lose their series, so they stop alerting.
    pub fn observe(&self, cluster: &str, o: &Observed, d: &Decision) {
        let current: BTreeSet<String> = o.members.iter().map(|m| format!("{cluster}-{}", m.ordinal)).collect();
        let observed = |labels: &Vec<String>| labels.get(1).is_some_and(|m| current.contains(m));
        for g in self.member_gauges() {
            g.retain(cluster, observed);
        }
        self.lag.retain(cluster, observed);
        for (m, v) in o.members.iter().zip(&d.verdicts) {
            let member = format!("{cluster}-{}", m.ordinal);
            let labels = [cluster, member.as_str()];
            let server = m.server.up();
            self.up.with(&labels).set(i64::from(server.is_some()));
            self.primary.with(&labels).set(i64::from(o.recorded_primary == Some(m.ordinal)));
            self.errant.with(&labels).set(i64::from(v.errant.is_some()));
            if let Some(s) = server {
                self.read_only.with(&labels).set(i64::from(s.read_only));
                self.transactions.with(&labels).set(i64::try_from(s.executed.len()).unwrap_or(i64::MAX));
                match s.client_connections {
                    Some(n) => self.client_connections.with(&labels).set(i64::try_from(n).unwrap_or(i64::MAX)),
                    None => self.client_connections.remove(&labels),
                }
                if v.role == Some(Role::Primary) {
                    self.semi_sync.with(&[cluster]).set(i64::from(s.semi_sync_source));
                }
            }
            match server.and_then(|s| s.replication.as_ref()).and_then(|r| r.lag_seconds) {
                Some(lag) => self.lag.with(&labels).set(lag as f64),
                None => self.lag.remove(&labels),
            }
        }
        self.phase.set(cluster, d.health.as_str());
        self.backups.watch(cluster);
    }

    /// Records the abnormalities the detector raised on `member` now: 1 for those found, 0
    /// for every other kind (so that an alert resolves when its finding clears).
    pub fn abnormalities(&self, cluster: &str, member: &str, found: &[Abnormality]) {
        for kind in Kind::ALL {
            let active = found.iter().any(|a| a.kind == kind);
            self.abnormality.with(&[cluster, member, kind.reason().as_str()]).set(i64::from(active));
        }
    }

    /// Records what auto-scaling of `cluster` keeps it at and the metric it measured
    /// (`None`: auto-scaling is off, and both series go; a metric that could not be measured
    /// loses its series only).
    pub fn autoscaling(&self, cluster: &str, state: Option<(&str, Option<f64>, u32)>) {
        self.autoscaling_metric.forget(cluster);
        match state {
            Some((metric, value, replicas)) => {
                self.autoscaling_replicas.with(&[cluster]).set(i64::from(replicas));
                if let Some(v) = value {
                    self.autoscaling_metric.with(&[cluster, metric]).set(v);
                }
            }
            None => self.autoscaling_replicas.forget(cluster),
        }
    }

    /// Records the primary's acknowledgements: 1 waiting, 0 fallen back, no series where
    /// none are expected (so the fallback alert never fires for a single server).
    pub fn acknowledgements(&self, cluster: &str, acks: Acknowledgements) {
        match acks {
            Acknowledgements::Waiting { .. } => self.semi_sync_active.with(&[cluster]).set(1),
            Acknowledgements::FellBack { .. } => self.semi_sync_active.with(&[cluster]).set(0),
            Acknowledgements::NotExpected => self.semi_sync_active.forget(cluster),
            Acknowledgements::Starting => {}
        }
    }

    /// Counts a performed operation.
    pub fn operation(&self, cluster: &str, op: &Operation, ok: bool) {
        let kind = match op {
            Operation::Bootstrap { .. } => "bootstrap",
            Operation::MakeWritable { .. } => "make_writable",
            Operation::Demote { .. } => "demote",
            Operation::ConfigureReplica { .. } => "configure_replica",
            Operation::Fence { .. } => "fence",
            Operation::Promote { .. } => "failover",
            Operation::Switchover { .. } => "switchover",
            Operation::Relabel { .. } => "relabel",
            Operation::Reseed { .. } => "reseed",
            Operation::Nothing | Operation::Wait { .. } => return,
        };
        self.operations.with(&[cluster, kind, if ok { "success" } else { "error" }]).inc();
    }

    /// Records a successful backup of `cluster` completed at `unix_seconds` (kept if newer
    /// than the one known), e.g. for every succeeded backup seen after a restart.
    pub fn backup_succeeded(&self, cluster: &str, unix_seconds: i64) {
        self.backups.succeeded(cluster, unix_seconds);
    }

    /// Counts a backup that finished while this process watched, by result.
    pub fn backup_finished(&self, cluster: &str, ok: bool) {
        self.backups.finished(cluster, ok);
    }

    /// Drops every series of a deleted cluster, so it stops alerting.
    pub fn forget(&self, cluster: &str) {
        for g in self.member_gauges() {
            g.forget(cluster);
        }
        self.lag.forget(cluster);
        self.semi_sync.forget(cluster);
        self.semi_sync_active.forget(cluster);
        self.autoscaling_replicas.forget(cluster);
        self.autoscaling_metric.forget(cluster);
        self.phase.forget(cluster);
        self.operations.forget(cluster);
        self.backups.forget(cluster);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Flavor;
    use crate::clustering::decide::decide;
    use crate::clustering::gtid::GtidSet;
    use crate::clustering::observed::{Member, PodState, Server, ServerState};
    use prometheus::{Encoder, TextEncoder};

    fn render(registry: &Registry) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn a_pass_becomes_member_and_phase_series_and_forget_drops_them() {
        let registry = Registry::new();
        let m = ServerMetrics::register(&registry).unwrap();
        let primary = Member {
            ordinal: 0,
            pod: PodState::Running { ready: true },
            role_label: Some("primary".into()),
            reads_label: false,
            address: ("db-0".into(), 3306),
            server: ServerState::Up(Server {
                read_only: false,
                executed: GtidSet::parse(Flavor::Mariadb, "0-100-42").unwrap(),
                semi_sync_source: false,
                semi_sync_active: false,
                uptime_seconds: None,
                connection_id: None,
                replication: None,
                connection_errors: None,
                client_connections: None,
            }),
            unreachable_passes: 0,
        };
        let o = Observed {
            replicas: 1,
            semi_sync: true,
            recorded_primary: Some(0),
            members: vec![primary],
            ..Default::default()
        };
        let d = decide(&o);
        m.observe("db", &o, &d);
        m.operation("db", &Operation::Promote { ordinal: 0, from: 1, received: String::new() }, true);
        m.backup_succeeded("db", 200);
        m.backup_succeeded("db", 100);
        m.backup_finished("db", false);
        let text = render(&registry);
        for line in [
            r#"member_up{cluster="db",member="db-0"} 1"#,
            r#"member_primary{cluster="db",member="db-0"} 1"#,
            r#"member_gtid_transactions{cluster="db",member="db-0"} 42"#,
            r#"cluster_phase{cluster="db",phase="Healthy"} 1"#,
            r#"cluster_phase{cluster="db",phase="Failed"} 0"#,
            r#"operations_total{cluster="db",operation="failover",result="success"} 1"#,
            r#"backup_last_success_timestamp_seconds{cluster="db"} 200"#,
            r#"backups_total{cluster="db",result="failure"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        // A member scaled away loses its series.
        let mut two = o.clone();
        let mut second = two.members[0].clone();
        second.ordinal = 1;
        two.members.push(second);
        two.replicas = 2;
        m.observe("db", &two, &decide(&two));
        let lag =
            Abnormality { member: "db-1".into(), kind: Kind::ReplicationLagSpike, message: String::new(), new: true };
        m.abnormalities("db", "db-1", &[lag]);
        let text = render(&registry);
        assert!(text.contains(r#"member_up{cluster="db",member="db-1"} 1"#));
        assert!(text.contains(r#"member_abnormal{cluster="db",kind="ReplicationLagSpike",member="db-1"} 1"#), "{text}");
        assert!(text.contains(r#"member_abnormal{cluster="db",kind="ConnectionErrorSpike",member="db-1"} 0"#));
        m.observe("db", &o, &d);
        assert!(!render(&registry).contains(r#"member="db-1""#), "scaled-away member still exported");
        m.forget("db");
        let text = render(&registry);
        assert!(!text.contains(r#"member_up{cluster="db""#), "{text}");
        assert!(!text.contains(r#"cluster_phase{cluster="db""#), "{text}");
    }

    #[test]
    fn auto_scaling_exports_its_count_and_metric_until_switched_off() {
        let registry = Registry::new();
        let m = ServerMetrics::register(&registry).unwrap();
        m.autoscaling("db", Some(("client_connections_per_replica", Some(6.5), 3)));
        let text = render(&registry);
        assert!(text.contains(r#"autoscaling_replicas{cluster="db"} 3"#), "{text}");
        assert!(text.contains(r#"autoscaling_metric{cluster="db",metric="client_connections_per_replica"} 6.5"#));
        // Unmeasurable: the count stays, the stale value goes.
        m.autoscaling("db", Some(("client_connections_per_replica", None, 5)));
        let text = render(&registry);
        assert!(text.contains(r#"autoscaling_replicas{cluster="db"} 5"#), "{text}");
        assert!(!text.contains("autoscaling_metric{"), "{text}");
        m.autoscaling("db", None);
        assert!(!render(&registry).contains("autoscaling_replicas{"), "switched off: no series");
    }
}
