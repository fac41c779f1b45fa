//! Per-cluster and per-node metrics of the Kafka clusters, from what the per-cluster task
//! reports each pass (the status it fills from the admin API: quorum, nodes, partition
//! health, phase, roll). They need no access to the nodes' own JMX metrics, so they work
//! where Prometheus cannot scrape the pods. Registered on the operator's `/metrics` with
//! the `statecraft_kafka_` prefix.

use prometheus::{IntGaugeVec, Opts, Registry};
use statecraft_shared::metrics::{ClusterFamily, PhaseGauge};
use statecraft_shared::reason::{Common, Reason};

use crate::api::{KafkaClusterStatus, NodeRole};
use crate::reason::Kafka as Reasons;

/// Every phase `status.phase` can take (see the task's report), so that exactly one
/// `cluster_phase` series is 1.
pub fn phases() -> Vec<String> {
    let reasons: [Reason; 6] = [
        Common::Bootstrap.into(),
        Reasons::NoActiveController.into(),
        Reasons::Rolling.into(),
        Common::Healthy.into(),
        Common::Degraded.into(),
        Common::Paused.into(),
    ];
    reasons.iter().map(ToString::to_string).collect()
}

/// The `role` label of a node.
fn role_label(role: NodeRole) -> &'static str {
    match role {
        NodeRole::Controller => "controller",
        NodeRole::Broker => "broker",
        NodeRole::Combined => "combined",
    }
}

/// The gauges and counters of the Kafka clusters.
pub struct KafkaMetrics {
    phase: PhaseGauge,
    node_ready: ClusterFamily<IntGaugeVec>,
    broker_fenced: ClusterFamily<IntGaugeVec>,
    nodes_to_roll: ClusterFamily<IntGaugeVec>,
    quorum_has_leader: ClusterFamily<IntGaugeVec>,
    quorum_leader_epoch: ClusterFamily<IntGaugeVec>,
    quorum_voters: ClusterFamily<IntGaugeVec>,
    quorum_caught_up_voters: ClusterFamily<IntGaugeVec>,
    voter_caught_up: ClusterFamily<IntGaugeVec>,
    quorum_lag: ClusterFamily<IntGaugeVec>,
    partitions: ClusterFamily<IntGaugeVec>,
}

/// The `state` label of `partitions`: each is a count of the status.
const PARTITION_STATES: [&str; 3] = ["under_replicated", "under_min_isr", "offline"];

impl KafkaMetrics {
    /// Creates the metrics and registers them on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            ClusterFamily::register(registry, IntGaugeVec::new(Opts::new(name, help), labels)?)
        };
        let cluster = ["cluster"];
        let phases = phases();
        let phases: Vec<&str> = phases.iter().map(String::as_str).collect();
        Ok(KafkaMetrics {
            phase: PhaseGauge::register(registry, "cluster_phase", "1 for the cluster's current phase.", &phases)?,
            node_ready: gauge(
                "node_ready",
                "1 when the node serves: a broker registered and RUNNING, a controller a caught-up voter.",
                &["cluster", "node", "role"],
            )?,
            broker_fenced: gauge(
                "broker_fenced",
                "1 while the controllers hold the broker fenced (registered, not serving).",
                &["cluster", "node"],
            )?,
            nodes_to_roll: gauge(
                "nodes_to_roll",
                "Nodes whose pod is not on the current revision yet (a roll in progress or waiting).",
                &cluster,
            )?,
            quorum_has_leader: gauge(
                "quorum_has_leader",
                "1 when a controller answered as the metadata quorum's leader (the active controller); 0 when none \
                 did (only the leader answers DescribeQuorum).",
                &cluster,
            )?,
            quorum_leader_epoch: gauge(
                "quorum_leader_epoch",
                "The metadata quorum's leader epoch: it grows by one with every election.",
                &cluster,
            )?,
            quorum_voters: gauge("quorum_voters", "Voters of the metadata quorum.", &cluster)?,
            quorum_caught_up_voters: gauge(
                "quorum_caught_up_voters",
                "Voters that fetched up to the leader's end within controller.quorum.fetch.timeout.ms.",
                &cluster,
            )?,
            voter_caught_up: gauge(
                "quorum_voter_caught_up",
                "1 when the voter fetched up to the leader's end within controller.quorum.fetch.timeout.ms.",
                &["cluster", "node"],
            )?,
            quorum_lag: gauge(
                "quorum_replica_lag_records",
                "Records of the metadata log a replica is behind the quorum's leader.",
                &["cluster", "node", "voter"],
            )?,
            partitions: gauge(
                "partitions",
                "Partitions by state: under_replicated (ISR smaller than the replicas), under_min_isr \
                 (acks=all producers cannot write), offline (no leader).",
                &["cluster", "state"],
            )?,
        })
    }

    /// Records what a pass reported of `cluster`: its status, whether a controller answered
    /// as the quorum's leader this pass (`status.quorum` keeps the last answer), and how many
    /// nodes are still to be rolled. A figure the pass could not observe (the quorum when no
    /// leader answered, partitions when no broker listed the topics) is removed rather than
    /// left at its last value.
    pub fn observe(&self, cluster: &str, status: &KafkaClusterStatus, leader_answered: bool, nodes_to_roll: usize) {
        if let Some(phase) = &status.phase {
            self.phase.set(cluster, phase);
        }
        let nodes: Vec<String> = status.nodes.iter().map(|n| n.id.to_string()).collect();
        for n in &status.nodes {
            let id = n.id.to_string();
            self.node_ready.with(&[cluster, &id, role_label(n.role)]).set(i64::from(n.ready));
            if n.role != NodeRole::Controller {
                let fenced = n.broker_state.as_deref() == Some("FENCED");
                self.broker_fenced.with(&[cluster, &id]).set(i64::from(fenced));
            }
        }
        let listed = |labels: &Vec<String>| labels.get(1).is_some_and(|node| nodes.contains(node));
        self.node_ready.retain(cluster, listed);
        self.broker_fenced.retain(cluster, listed);
        self.nodes_to_roll.with(&[cluster]).set(nodes_to_roll as i64);

        match status.quorum.as_ref().filter(|_| leader_answered) {
            Some(q) => {
                self.quorum_has_leader.with(&[cluster]).set(i64::from(q.leader_id.is_some()));
                match q.leader_epoch {
                    Some(epoch) => self.quorum_leader_epoch.with(&[cluster]).set(i64::from(epoch)),
                    None => self.quorum_leader_epoch.remove(&[cluster]),
                }
                self.quorum_voters.with(&[cluster]).set(q.voters.len() as i64);
                self.quorum_caught_up_voters
                    .with(&[cluster])
                    .set(q.voters.iter().filter(|v| v.caught_up).count() as i64);
                let voters: Vec<String> = q.voters.iter().map(|v| v.id.to_string()).collect();
                for (v, id) in q.voters.iter().zip(&voters) {
                    self.voter_caught_up.with(&[cluster, id]).set(i64::from(v.caught_up));
                }
                self.voter_caught_up.retain(cluster, |labels| labels.get(1).is_some_and(|id| voters.contains(id)));
                let replicas = q.voters.iter().map(|r| (r, "true")).chain(q.observers.iter().map(|r| (r, "false")));
                let mut seen = Vec::new();
                for (r, voter) in replicas {
                    let id = r.id.to_string();
                    if let Some(lag) = r.lag {
                        self.quorum_lag.with(&[cluster, &id, voter]).set(lag);
                        seen.push(vec![cluster.to_owned(), id, voter.to_owned()]);
                    }
                }
                self.quorum_lag.retain(cluster, |labels| seen.contains(labels));
            }
            None => {
                // Only the leader answers DescribeQuorum: no answer is no active controller
                // as far as anyone can tell (KafkaNoActiveController fires on it, except
                // while the cluster is created). What only the leader knows is unknown.
                self.quorum_has_leader.with(&[cluster]).set(0);
                for family in [&self.quorum_leader_epoch, &self.quorum_voters, &self.quorum_caught_up_voters] {
                    family.remove(&[cluster]);
                }
                self.voter_caught_up.forget(cluster);
                self.quorum_lag.forget(cluster);
            }
        }

        let counts = [status.under_replicated_partitions, status.under_min_isr_partitions, status.offline_partitions];
        for (state, count) in PARTITION_STATES.iter().zip(counts) {
            match count {
                Some(n) => self.partitions.with(&[cluster, state]).set(i64::from(n)),
                None => self.partitions.remove(&[cluster, state]),
            }
        }
    }

    /// Stops exporting every series of a deleted cluster.
    pub fn forget(&self, cluster: &str) {
        self.phase.forget(cluster);
        for family in [
            &self.node_ready,
            &self.broker_fenced,
            &self.nodes_to_roll,
            &self.quorum_has_leader,
            &self.quorum_leader_epoch,
            &self.quorum_voters,
            &self.quorum_caught_up_voters,
            &self.voter_caught_up,
            &self.quorum_lag,
            &self.partitions,
        ] {
            family.forget(cluster);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NodeStatus, QuorumReplica, QuorumStatus};
    use statecraft_shared::metrics::Metrics;

    fn node(id: i32, role: NodeRole, ready: bool, state: Option<&str>) -> NodeStatus {
        NodeStatus {
            id,
            pod: format!("k-{id}"),
            role,
            ready,
            revision: None,
            broker_state: state.map(str::to_owned),
            directory_id: None,
        }
    }

    fn voter(id: i32, lag: i64, caught_up: bool) -> QuorumReplica {
        QuorumReplica { id, log_end_offset: Some(100 - lag), lag: Some(lag), caught_up }
    }

    fn status(leader: Option<i32>, epoch: i32) -> KafkaClusterStatus {
        KafkaClusterStatus {
            phase: Some("Degraded".into()),
            quorum: Some(QuorumStatus {
                leader_id: leader,
                leader_epoch: Some(epoch),
                voters: vec![voter(0, 0, true), voter(1, 0, true), voter(2, 40, false)],
                observers: vec![voter(100, 3, false)],
                ..Default::default()
            }),
            nodes: vec![
                node(0, NodeRole::Controller, true, None),
                node(100, NodeRole::Broker, true, Some("RUNNING")),
                node(101, NodeRole::Broker, false, Some("FENCED")),
            ],
            under_replicated_partitions: Some(4),
            under_min_isr_partitions: Some(1),
            offline_partitions: Some(0),
            ..Default::default()
        }
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn a_pass_becomes_series() {
        let metrics = Metrics::new("statecraft-kafka").expect("registry");
        let kafka = KafkaMetrics::register(&metrics.registry).expect("register");
        kafka.observe("k", &status(Some(0), 7), true, 2);
        kafka.observe("k", &status(Some(1), 8), true, 2);
        let text = metrics.render();
        let v = |s: &str| value(&text, s);
        assert_eq!(v(r#"statecraft_kafka_cluster_phase{cluster="k",phase="Degraded"}"#), Some(1.0));
        assert_eq!(v(r#"statecraft_kafka_cluster_phase{cluster="k",phase="Healthy"}"#), Some(0.0));
        assert_eq!(v(r#"statecraft_kafka_node_ready{cluster="k",node="101",role="broker"}"#), Some(0.0));
        assert_eq!(v(r#"statecraft_kafka_broker_fenced{cluster="k",node="101"}"#), Some(1.0));
        assert_eq!(v(r#"statecraft_kafka_broker_fenced{cluster="k",node="0"}"#), None, "controllers are never fenced");
        assert_eq!(v(r#"statecraft_kafka_quorum_voters{cluster="k"}"#), Some(3.0));
        assert_eq!(v(r#"statecraft_kafka_quorum_caught_up_voters{cluster="k"}"#), Some(2.0));
        assert_eq!(v(r#"statecraft_kafka_quorum_replica_lag_records{cluster="k",node="2",voter="true"}"#), Some(40.0));
        assert_eq!(
            v(r#"statecraft_kafka_quorum_replica_lag_records{cluster="k",node="100",voter="false"}"#),
            Some(3.0)
        );
        assert_eq!(v(r#"statecraft_kafka_quorum_leader_epoch{cluster="k"}"#), Some(8.0));
        assert_eq!(v(r#"statecraft_kafka_quorum_voter_caught_up{cluster="k",node="2"}"#), Some(0.0));
        assert_eq!(v(r#"statecraft_kafka_quorum_has_leader{cluster="k"}"#), Some(1.0));
        assert_eq!(v(r#"statecraft_kafka_partitions{cluster="k",state="under_min_isr"}"#), Some(1.0));
        assert_eq!(v(r#"statecraft_kafka_nodes_to_roll{cluster="k"}"#), Some(2.0));
    }

    #[test]
    fn no_leader_answering_is_no_active_controller_and_what_a_pass_could_not_see_is_removed() {
        let metrics = Metrics::new("statecraft-kafka").expect("registry");
        let kafka = KafkaMetrics::register(&metrics.registry).expect("register");
        kafka.observe("k", &status(Some(0), 7), true, 0);
        // The status keeps the last quorum; this pass no leader answered.
        let blind = KafkaClusterStatus {
            under_min_isr_partitions: None,
            nodes: vec![node(0, NodeRole::Controller, false, None)],
            ..status(Some(0), 7)
        };
        kafka.observe("k", &blind, false, 0);
        let text = metrics.render();
        assert_eq!(value(&text, r#"statecraft_kafka_quorum_has_leader{cluster="k"}"#), Some(0.0), "{text}");
        assert!(!text.contains("statecraft_kafka_quorum_voters{"), "{text}");
        assert!(!text.contains("statecraft_kafka_quorum_leader_epoch{"), "{text}");
        assert!(!text.contains("statecraft_kafka_quorum_voter_caught_up{"), "{text}");
        assert!(!text.contains("statecraft_kafka_quorum_replica_lag_records{"), "{text}");
        assert!(!text.contains(r#"state="under_min_isr""#), "{text}");
        assert!(!text.contains(r#"node="101""#), "a node no longer listed: {text}");
        kafka.forget("k");
        assert!(!metrics.render().contains(r#"cluster="k""#));
    }
}
