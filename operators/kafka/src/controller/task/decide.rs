//! The pure decision of a pass: which pods' readiness gates change, which cluster-wide
//! dynamic configuration to apply, which partitions get their preferred leader back, whether
//! metadata.version is finalized ([`finalize`]), and the roll's view of the pass
//! ([`snapshot`]). The roll's step is the shared engine's, taken
//! in `act` over that snapshot (its gates are pure too, see `crate::roll`).

use std::collections::BTreeMap;

use crate::api::MetadataVersionPolicy;
use crate::build::dynamic::is_cluster_wide;
use crate::metadata_version;
use crate::observed::{ConfigChange, Quorum};
use crate::roll::{self, Node, PartitionState, Snapshot};
use crate::validate::ValidCluster;

use super::observe::{Kafka, NodePod, Observation, Pool};

/// What a pass asks `act` to change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Pods whose readiness gate changes, with its new value.
    pub gates: Vec<(String, bool)>,
    /// Changes of the cluster-wide dynamic configuration (`BROKER ""`).
    pub config: Vec<ConfigChange>,
    /// Partitions whose preferred leader is back in their ISR but does not lead them
    /// ([`roll::preferred_elections`]), elected only while every broker serves.
    pub elect: Vec<(String, i32)>,
    /// The metadata.version to finalize, once a version change has rolled.
    pub finalize: Option<Finalize>,
    /// The roll's view of this pass; `None` when Kafka did not say enough to gate a restart.
    pub snapshot: Option<Snapshot>,
}

/// Decides the pass (see the module doc). A paused cluster still gets its readiness gates,
/// which only say what is observed; the loop does not act on a paused cluster at all.
pub fn decide(o: &Observation) -> Decision {
    let gates = o
        .pods
        .values()
        .filter_map(|pod| serving(pod, &o.kafka).filter(|&serving| serving != pod.gate).map(|s| (pod.name.clone(), s)))
        .collect();
    let config = match (&o.valid, &o.kafka.cluster_default) {
        (Some(valid), Some(observed)) => roll::config::dynamic_changes(&desired_dynamic(valid), observed),
        _ => Vec::new(),
    };
    let snapshot = snapshot(o);
    let every_broker_serves =
        |s: &Snapshot| s.nodes.iter().filter(|n| n.is_broker()).all(|n| n.ready && n.broker_running);
    let elect = match &snapshot {
        Some(s) if every_broker_serves(s) => roll::preferred_elections(s),
        _ => Vec::new(),
    };
    let finalize = snapshot.as_ref().and_then(|s| finalize(o, s));
    Decision { gates, config, elect, finalize, snapshot }
}

/// A raise of the finalized metadata.version (feature levels, see [`metadata_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finalize {
    /// The level finalized now.
    pub from: i16,
    /// The newest level of the spec's release series.
    pub to: i16,
}

/// Whether to finalize metadata.version this pass: the policy is `Auto`, every node serves on
/// its target revision (the roll is over), the finalized level is older than the newest level
/// of the spec's release, and the answering node supports that level. The last check keeps
/// the raise from racing the roll: between a version change and its new StatefulSets, every
/// node is still on its (old) target revision, and old binaries do not support the new level.
/// Kafka's controller refuses a level that any registered node does not support as well.
pub fn finalize(o: &Observation, snapshot: &Snapshot) -> Option<Finalize> {
    let valid = o.valid.as_ref()?;
    if valid.spec.metadata_version != MetadataVersionPolicy::Auto {
        return None;
    }
    let rolled = !snapshot.nodes.is_empty()
        && snapshot.nodes.iter().all(|n| {
            n.ready
                && (n.broker_running || !n.is_broker())
                && !n.target_revision.is_empty()
                && n.current_revision == n.target_revision
        });
    if !rolled {
        return None;
    }
    let features = o.kafka.features.as_ref()?;
    let from = *features.finalized.get(metadata_version::FEATURE)?;
    let to = metadata_version::latest_of(valid.version.series())?;
    let supported = features.supported.get(metadata_version::FEATURE).is_some_and(|&(_, max)| max >= to);
    (to > from && supported).then_some(Finalize { from, to })
}

/// The roll's view of the pass: every node of the layout, the quorum, the partitions with
/// their min ISR, the reassignments and the live fetch timeout.
///
/// A node whose pod is terminating or gone is in the snapshot, not ready and not running
/// (with its old revision, or none): the node restarted last stays the roll's member in
/// flight until its new pod serves, and the gates do not count it. Leaving it out would let
/// the engine restart the next node while this one is still down.
///
/// `None` when a gate would be judged on a missing answer: a serving broker while no broker
/// described the partitions (an empty partition list would open the min-ISR gate), or a
/// serving controller while none described the quorum. When no node of a kind serves, its
/// missing answer is the truth: nothing of that kind is available, and restarting one onto
/// the new revision is what may fix it.
pub fn snapshot(o: &Observation) -> Option<Snapshot> {
    let kafka = &o.kafka;
    let mut nodes: Vec<Node> = o
        .pods
        .values()
        .map(|pod| {
            let up = !pod.terminating;
            Node {
                id: pod.id,
                role: pod.pool.role(),
                pod: pod.name.clone(),
                ready: up && pod.gate && pod.container_ready,
                current_revision: pod.revision.clone().unwrap_or_default(),
                target_revision: o.targets.get(&pod.pool).cloned().unwrap_or_default(),
                broker_running: up
                    && pod.pool != Pool::Controller
                    && kafka.cluster.as_ref().is_some_and(|c| c.brokers.iter().any(|b| b.id == pod.id && !b.fenced)),
                // DescribeCluster does not say whether a fenced broker is recovering its
                // logs: unknown, which the gate treats as not recovering.
                recovering: None,
            }
        })
        .collect();
    for (&id, (pool, pod)) in o.expected.iter().filter(|(id, _)| !o.pods.contains_key(id)) {
        nodes.push(Node {
            id,
            role: pool.role(),
            pod: pod.clone(),
            ready: false,
            current_revision: String::new(),
            target_revision: o.targets.get(pool).cloned().unwrap_or_default(),
            broker_running: false,
            recovering: None,
        });
    }
    let serving_broker = nodes.iter().any(|n| n.is_broker() && n.ready);
    let serving_controller = nodes.iter().any(|n| n.is_controller() && n.ready);
    if serving_broker && (kafka.topics.is_none() || kafka.reassignments.is_none()) {
        return None;
    }
    if serving_controller && kafka.quorum.is_none() {
        return None;
    }
    let partitions = kafka
        .topics
        .iter()
        .flatten()
        .flat_map(|topic| {
            let min_isr = min_isr(kafka, &topic.name);
            topic.partitions.iter().map(move |p| PartitionState { partition: p.clone(), min_isr })
        })
        .collect();
    Some(Snapshot {
        nodes,
        quorum: kafka.quorum.clone().unwrap_or_default(),
        partitions,
        reassignments: kafka.reassignments.unwrap_or(0),
        fetch_timeout_ms: kafka.fetch_timeout_ms.unwrap_or(roll::DEFAULT_FETCH_TIMEOUT_MS),
    })
}

/// The effective min.insync.replicas of `topic`: its own, else the cluster's, else Kafka's
/// default of 1.
pub fn min_isr(kafka: &Kafka, topic: &str) -> i32 {
    kafka.min_isr.get(topic).copied().unwrap_or(1)
}

/// Whether `pod`'s node serves: a broker registered and unfenced, a controller a caught-up
/// voter, a combined node both. `None` when this pass cannot tell (Kafka did not answer):
/// the gate then stays as it is, so one failed look does not mark every pod unready.
pub fn serving(pod: &NodePod, kafka: &Kafka) -> Option<bool> {
    if pod.terminating || !pod.container_ready {
        return Some(false);
    }
    let broker = || -> Option<bool> {
        let cluster = kafka.cluster.as_ref()?;
        Some(cluster.brokers.iter().any(|b| b.id == pod.id && !b.fenced))
    };
    let controller = || -> Option<bool> {
        let quorum = kafka.quorum.as_ref()?;
        Some(caught_up_voter(quorum, kafka.fetch_timeout_ms, pod.id))
    };
    match pod.pool {
        Pool::Broker => broker(),
        Pool::Controller => controller(),
        Pool::Combined => Some(broker()? && controller()?),
    }
}

/// Whether voter `id` is caught up with `quorum`'s leader ([`roll::is_caught_up_voter`]).
pub fn caught_up_voter(quorum: &Quorum, fetch_timeout_ms: Option<i64>, id: i32) -> bool {
    let snapshot = Snapshot {
        quorum: quorum.clone(),
        fetch_timeout_ms: fetch_timeout_ms.unwrap_or(roll::DEFAULT_FETCH_TIMEOUT_MS),
        ..Snapshot::default()
    };
    roll::is_caught_up_voter(&snapshot, id)
}

/// `status.quorumBootstrapped` after a pass: once true, true for good; else whether the
/// quorum is bootstrapped now ([`Quorum::bootstrapped`], `None` when no controller
/// answered). A status written before the field existed (`previous` `None`) had the
/// quorum bootstrapped once it had a cluster id (`had_cluster_id`), the rule then.
pub fn next_bootstrapped(previous: Option<bool>, had_cluster_id: bool, now: Option<bool>) -> Option<bool> {
    match (previous, now) {
        (None, _) if had_cluster_id => Some(true),
        (Some(true), _) => Some(true),
        (previous, None) => previous,
        (_, Some(now)) => Some(now),
    }
}

/// The cluster-wide dynamic configuration the spec asks for: its dynamic keys, and
/// min.insync.replicas (which the operator sets from `spec.minInsyncReplicas`).
pub fn desired_dynamic(valid: &ValidCluster) -> BTreeMap<String, String> {
    let mut desired: BTreeMap<String, String> =
        valid.spec.config.iter().filter(|(k, _)| is_cluster_wide(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    desired.insert("min.insync.replicas".into(), valid.min_insync_replicas.to_string());
    desired
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{Broker, Cluster, Partition, QuorumReplica, Topic};

    fn pod(pool: Pool, id: i32, serving_container: bool, gate: bool) -> NodePod {
        NodePod {
            name: format!("k-{pool:?}-{id}").to_lowercase(),
            pool,
            id,
            terminating: false,
            container_ready: serving_container,
            gate,
            ip: Some(format!("10.0.0.{id}")),
            revision: Some("r1".into()),
        }
    }

    fn observation(pods: Vec<NodePod>, kafka: Kafka) -> Observation {
        Observation {
            valid: None,
            pods: pods.into_iter().map(|p| (p.id, p)).collect(),
            expected: BTreeMap::new(),
            targets: [(Pool::Controller, "r1".to_string()), (Pool::Broker, "r1".to_string())].into(),
            problems: Vec::new(),
            kafka,
            served: Default::default(),
        }
    }

    fn brokers(unfenced: &[i32], fenced: &[i32]) -> Cluster {
        let broker = |id: i32, fenced: bool| Broker { id, host: String::new(), port: 9092, rack: None, fenced };
        Cluster {
            cluster_id: "id".into(),
            controller_id: None,
            brokers: unfenced
                .iter()
                .map(|&id| broker(id, false))
                .chain(fenced.iter().map(|&id| broker(id, true)))
                .collect(),
        }
    }

    fn quorum(now_ms: i64, voters: &[(i32, i64)]) -> Quorum {
        Quorum {
            leader_id: voters.first().map(|v| v.0),
            leader_epoch: 1,
            high_watermark: 10,
            voters: voters
                .iter()
                .map(|&(id, caught_up)| QuorumReplica {
                    id,
                    directory_id: None,
                    log_end_offset: 10,
                    last_fetch_timestamp: Some(now_ms),
                    last_caught_up_timestamp: Some(caught_up),
                })
                .collect(),
            observers: Vec::new(),
        }
    }

    /// The leader's last caught-up time in these tests (the gate compares times Kafka
    /// reports, never the clock).
    const NOW: i64 = 1_700_000_000_000;

    fn topic(leader: i32, replicas: &[i32], isr: &[i32]) -> Topic {
        Topic {
            name: "t".into(),
            id: "tid".into(),
            internal: false,
            partitions: vec![Partition {
                topic: "t".into(),
                index: 0,
                leader: Some(leader),
                replicas: replicas.to_vec(),
                isr: isr.to_vec(),
            }],
        }
    }

    /// An empty partition list would open the min-ISR gate: a serving broker whose
    /// partitions nobody described gives no snapshot, so the roll does not step.
    #[test]
    fn a_serving_broker_without_a_partition_answer_gives_no_snapshot() {
        let pods = vec![pod(Pool::Broker, 100, true, true)];
        let kafka = Kafka { cluster: Some(brokers(&[100], &[])), reassignments: Some(0), ..Kafka::default() };
        assert_eq!(snapshot(&observation(pods.clone(), kafka.clone())), None);
        let kafka = Kafka { topics: Some(Vec::new()), reassignments: None, ..kafka };
        assert_eq!(snapshot(&observation(pods.clone(), kafka.clone())), None, "no reassignment answer");
        let kafka = Kafka { reassignments: Some(0), ..kafka };
        let s = snapshot(&observation(pods, kafka)).expect("every answer there");
        assert!(s.nodes[0].ready && s.nodes[0].broker_running, "{s:?}");
    }

    #[test]
    fn a_serving_controller_without_a_quorum_answer_gives_no_snapshot() {
        let pods = vec![pod(Pool::Controller, 0, true, true)];
        assert_eq!(snapshot(&observation(pods.clone(), Kafka::default())), None);
        let kafka = Kafka { quorum: Some(quorum(NOW, &[(0, NOW)])), ..Kafka::default() };
        assert!(snapshot(&observation(pods, kafka)).is_some());
    }

    /// When nothing of a kind serves, no answer is the truth, and restarting a node onto the
    /// new revision is what may bring it back: the snapshot is there, with no partitions.
    #[test]
    fn when_nothing_serves_missing_answers_do_not_hold_the_roll() {
        let pods = vec![pod(Pool::Controller, 0, false, false), pod(Pool::Broker, 100, true, false)];
        let s = snapshot(&observation(pods, Kafka::default())).expect("a snapshot");
        assert_eq!(s.nodes.len(), 2);
        assert!(s.partitions.is_empty() && s.nodes.iter().all(|n| !n.ready), "{s:?}");
        assert_eq!(s.fetch_timeout_ms, roll::DEFAULT_FETCH_TIMEOUT_MS);
    }

    /// Found on the first real roll: with terminating pods left out, the engine lost its
    /// member in flight and restarted all three controllers within two seconds. A node
    /// whose pod is terminating or gone stays in the snapshot, not ready, not running.
    #[test]
    fn terminating_and_missing_pods_stay_in_the_snapshot_as_down() {
        let mut leaving = pod(Pool::Broker, 101, true, true);
        leaving.terminating = true;
        let kafka = Kafka { cluster: Some(brokers(&[101], &[])), ..Kafka::default() };
        assert_eq!(serving(&leaving, &kafka), Some(false));
        let mut o = observation(vec![leaving], kafka);
        o.expected =
            [(101, (Pool::Broker, "k-broker-101".to_string())), (102, (Pool::Broker, "k-broker-102".to_string()))]
                .into();
        let s = snapshot(&o).expect("a snapshot");
        let ids: Vec<i32> = s.nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, [101, 102]);
        assert!(s.nodes.iter().all(|n| !n.ready && !n.broker_running), "{s:?}");
        assert_eq!(s.nodes[0].current_revision, "r1", "the terminating pod's old revision");
        assert_eq!(s.nodes[1].current_revision, "", "no pod, no revision");
        assert_eq!(s.nodes[1].target_revision, "r1");
    }

    #[test]
    fn a_node_serves_as_kafka_says_and_unknown_keeps_the_gate() {
        let now = NOW;
        let kafka = Kafka {
            cluster: Some(brokers(&[100], &[101])),
            quorum: Some(quorum(now, &[(0, now), (1, now - 3_600_000)])),
            ..Kafka::default()
        };
        assert_eq!(serving(&pod(Pool::Broker, 100, true, false), &kafka), Some(true));
        assert_eq!(serving(&pod(Pool::Broker, 101, true, true), &kafka), Some(false), "fenced");
        assert_eq!(serving(&pod(Pool::Broker, 102, true, true), &kafka), Some(false), "not registered");
        assert_eq!(serving(&pod(Pool::Broker, 100, false, true), &kafka), Some(false), "container not ready");
        assert_eq!(serving(&pod(Pool::Controller, 0, true, false), &kafka), Some(true));
        assert_eq!(serving(&pod(Pool::Controller, 1, true, true), &kafka), Some(false), "an hour behind");
        // Combined nodes need both answers.
        assert_eq!(serving(&pod(Pool::Combined, 0, true, false), &Kafka { cluster: None, ..kafka.clone() }), None);
        assert_eq!(serving(&pod(Pool::Broker, 100, true, true), &Kafka::default()), None);

        // One failed look changes no gate.
        let o = observation(
            vec![pod(Pool::Broker, 100, true, true), pod(Pool::Controller, 0, true, true)],
            Kafka::default(),
        );
        assert!(decide(&o).gates.is_empty());
        let o = observation(vec![pod(Pool::Broker, 100, true, false), pod(Pool::Broker, 101, true, true)], kafka);
        assert_eq!(decide(&o).gates, vec![("k-broker-100".to_string(), true), ("k-broker-101".to_string(), false)]);
    }

    #[test]
    fn the_bootstrapped_flag_is_set_once_and_kept() {
        assert_eq!(next_bootstrapped(None, false, None), None, "nothing seen yet");
        assert_eq!(next_bootstrapped(None, false, Some(false)), Some(false), "a new cluster says so");
        assert_eq!(next_bootstrapped(Some(false), true, Some(false)), Some(false), "a cluster id is not enough");
        assert_eq!(next_bootstrapped(Some(false), true, None), Some(false));
        assert_eq!(next_bootstrapped(Some(false), true, Some(true)), Some(true));
        assert_eq!(next_bootstrapped(Some(true), true, Some(false)), Some(true), "a voter lost since stays lost");
        assert_eq!(next_bootstrapped(Some(true), true, None), Some(true));
        assert_eq!(next_bootstrapped(None, true, Some(false)), Some(true), "a status from before the field");
    }

    /// metadata.version is raised once, after the roll, to the newest level of the spec's
    /// release, and only while the nodes support it: not while old binaries still run, not
    /// with a node down or on its old revision, not under `Manual`.
    #[test]
    fn metadata_version_is_finalized_only_after_the_roll_and_under_auto() {
        use crate::observed::Features;
        let spec = |policy: &str| -> crate::api::KafkaClusterSpec {
            serde_json::from_value(serde_json::json!({
                "version": "4.4.0",
                "controllers": {"replicas": 1, "storage": {"size": "1Gi"}},
                "brokers": {"replicas": 1, "storage": {"size": "1Gi"}},
                "defaultReplicationFactor": 1, "minInsyncReplicas": 1,
                "metadataVersion": policy,
            }))
            .unwrap()
        };
        let features = |finalized: i16, max: i16| Features {
            finalized: [(metadata_version::FEATURE.to_string(), finalized)].into(),
            supported: [(metadata_version::FEATURE.to_string(), (7, max))].into(),
        };
        let kafka = |f: Features| Kafka {
            cluster: Some(brokers(&[100], &[])),
            quorum: Some(quorum(NOW, &[(0, NOW)])),
            topics: Some(Vec::new()),
            reassignments: Some(0),
            features: Some(f),
            ..Kafka::default()
        };
        let at = |policy: &str, f: Features, pods: Vec<NodePod>| {
            let mut o = observation(pods, kafka(f));
            o.valid = Some(crate::validate::validate(&spec(policy)).unwrap());
            decide(&o).finalize
        };
        let serving = || vec![pod(Pool::Controller, 0, true, true), pod(Pool::Broker, 100, true, true)];
        assert_eq!(at("Auto", features(30, 33), serving()), Some(Finalize { from: 30, to: 33 }));
        assert_eq!(at("Auto", features(33, 33), serving()), None, "finalized already");
        assert_eq!(at("Auto", features(30, 30), serving()), None, "the answering node runs 4.3 still");
        assert_eq!(at("Manual", features(30, 33), serving()), None);
        let mut old = serving();
        old[1].revision = Some("r0".into());
        assert_eq!(at("Auto", features(30, 33), old), None, "a broker is on its old revision");
        let mut down = serving();
        down[0].container_ready = false;
        assert_eq!(at("Auto", features(30, 33), down), None, "a controller is down");
        let mut o = observation(serving(), Kafka { cluster: Some(brokers(&[], &[100])), ..kafka(features(30, 33)) });
        o.valid = Some(crate::validate::validate(&spec("Auto")).unwrap());
        assert_eq!(decide(&o).finalize, None, "a broker is fenced");
    }

    /// Preferred leaders are elected back only while every broker serves: during a roll the
    /// election would move leadership onto a broker about to restart.
    #[test]
    fn preferred_leaders_are_elected_only_while_every_broker_serves() {
        let now = NOW;
        let kafka = Kafka {
            cluster: Some(brokers(&[100, 101], &[])),
            quorum: Some(quorum(now, &[(0, now)])),
            topics: Some(vec![topic(101, &[100, 101], &[100, 101])]),
            reassignments: Some(0),
            ..Kafka::default()
        };
        let all = vec![
            pod(Pool::Controller, 0, true, true),
            pod(Pool::Broker, 100, true, true),
            pod(Pool::Broker, 101, true, true),
        ];
        assert_eq!(decide(&observation(all.clone(), kafka.clone())).elect, vec![("t".to_string(), 0)]);
        let mut one_down = all;
        one_down[2].container_ready = false;
        assert!(decide(&observation(one_down, kafka)).elect.is_empty());
    }
}
