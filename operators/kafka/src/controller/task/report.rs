//! What a pass reports: the status (cluster id, whether the quorum is bootstrapped, quorum,
//! nodes, partition health, bootstrap address, phase, conditions), the same as metrics, an
//! Event when a wait begins, and a Warning Event when a node comes back with new storage.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use statecraft_shared::reason::{Common, Reason};
use statecraft_shared::status::{ConditionType, set_condition};
use statecraft_shared::upgrade::Action;

use super::super::Context;
use super::decide::{caught_up_voter, min_isr, next_bootstrapped, serving};
use super::observe::{Kafka, Observation, Pool};
use super::{Memory, Rolled};
use crate::api::{KafkaCluster, KafkaClusterStatus, NodeStatus, QuorumReplica, QuorumStatus};
use crate::names::Names;
use crate::reason::Kafka as Reasons;

/// Fills `status` from the pass (see the module doc).
pub async fn report(
    ctx: &Context,
    cluster: &KafkaCluster,
    o: &Observation,
    roll: Option<&Rolled>,
    memory: &mut Memory,
    status: &mut KafkaClusterStatus,
) {
    // The directory ids known before this pass: remembered, else the status's (after an
    // operator restart).
    for node in &status.nodes {
        if let Some(id) = &node.directory_id {
            memory.directories.entry(node.id).or_insert_with(|| id.clone());
        }
    }
    let expected = super::super::reconcile::cluster_id(cluster).ok();
    let initial = o.valid.as_ref().map(|v| crate::build::config::initial_voters(v, &cluster.uid().unwrap_or_default()));
    let now = o.kafka.quorum.as_ref().zip(initial).map(|(quorum, initial)| quorum.bootstrapped(&initial));
    status.quorum_bootstrapped = next_bootstrapped(status.quorum_bootstrapped, status.cluster_id.is_some(), now);
    if let Some(seen) = o.kafka.cluster.as_ref().map(|c| c.cluster_id.clone()).filter(|id| !id.is_empty()) {
        if expected.as_deref().is_some_and(|e| e != seen) {
            ctx.rt
                .events
                .warning(
                    cluster,
                    Reasons::ClusterIdMismatch,
                    "Observe",
                    format!("the brokers run cluster {seen}, not {}", expected.unwrap_or_default()),
                )
                .await;
        }
        status.cluster_id.get_or_insert(seen);
    }
    fill_status(status, cluster, o, roll);
    let to_roll =
        o.pods.values().filter(|p| o.targets.get(&p.pool).is_none_or(|t| p.revision.as_ref() != Some(t))).count();
    ctx.metrics.observe(&cluster.name_any(), status, o.kafka.quorum.is_some(), to_roll);
    let now: BTreeMap<i32, String> =
        status.nodes.iter().filter_map(|n| Some((n.id, n.directory_id.clone()?))).collect();
    for (id, before, after) in storage_replaced(&memory.directories, &now) {
        let node = status.nodes.iter().find(|n| n.id == id);
        let pod = node.map_or_else(String::new, |n| n.pod.clone());
        let observer = "it formats without joining the quorum and is an observer until added back as a voter \
                        (not done by the operator yet)";
        let refill = "its replicas refill from the other brokers";
        let then = match node.map(|n| n.role) {
            Some(crate::api::NodeRole::Controller) => observer.to_owned(),
            Some(crate::api::NodeRole::Combined) => format!("{observer}, and {refill}"),
            _ => format!("it was formatted with the cluster id and {refill}"),
        };
        let message = format!(
            "node {id} ({pod}) came back with new storage (directory {before} -> {after}): its volume was lost; {then}"
        );
        ctx.rt.events.warning(cluster, Reasons::StorageReplaced, "Observe", message).await;
    }
    memory.directories.extend(now);
}

/// The metadata log directory node `id` runs now. After its storage was replaced, Kafka lists
/// the node twice for minutes (the old directory as an observer that stopped fetching, or as
/// the voter it was): the entry fetched last is the live one. Found by the e2e's lost volume,
/// whose broker the status kept showing with its old directory.
pub fn current_directory(quorum: &crate::observed::Quorum, id: i32) -> Option<String> {
    quorum
        .voters
        .iter()
        .chain(&quorum.observers)
        .filter(|r| r.id == id && r.directory_id.is_some())
        .max_by_key(|r| r.last_fetch_timestamp.unwrap_or(i64::MIN))
        .and_then(|r| r.directory_id.clone())
}

/// The nodes seen now with another metadata log directory than the one last known for them:
/// their storage was lost and formatted anew. `(node id, directory before, directory now)`.
pub fn storage_replaced(known: &BTreeMap<i32, String>, now: &BTreeMap<i32, String>) -> Vec<(i32, String, String)> {
    now.iter()
        .filter_map(|(id, after)| {
            let before = known.get(id)?;
            (before != after).then(|| (*id, before.clone(), after.clone()))
        })
        .collect()
}

/// Partitions whose ISR is smaller than their replicas, than their min ISR, or that have no
/// leader.
fn partition_health(kafka: &Kafka) -> Option<(i32, i32, i32)> {
    let topics = kafka.topics.as_ref()?;
    let (mut under, mut under_min, mut offline) = (0, 0, 0);
    for topic in topics {
        let min_isr = min_isr(kafka, &topic.name);
        for p in &topic.partitions {
            under += i32::from(p.isr.len() < p.replicas.len());
            under_min += i32::from((p.isr.len() as i32) < min_isr.min(p.replicas.len() as i32));
            offline += i32::from(p.leader.is_none());
        }
    }
    Some((under, under_min, offline))
}

fn quorum_status(kafka: &Kafka) -> Option<QuorumStatus> {
    let quorum = kafka.quorum.as_ref()?;
    let leader_end = quorum.voters.iter().find(|v| Some(v.id) == quorum.leader_id).map(|v| v.log_end_offset);
    let replica = |r: &crate::observed::QuorumReplica, voter: bool| QuorumReplica {
        id: r.id,
        log_end_offset: Some(r.log_end_offset),
        lag: leader_end.map(|end| (end - r.log_end_offset).max(0)),
        caught_up: voter && caught_up_voter(quorum, kafka.fetch_timeout_ms, r.id),
    };
    Some(QuorumStatus {
        leader_id: quorum.leader_id,
        leader_epoch: Some(quorum.leader_epoch),
        high_watermark: Some(quorum.high_watermark),
        voters: quorum.voters.iter().map(|r| replica(r, true)).collect(),
        observers: quorum.observers.iter().map(|r| replica(r, false)).collect(),
    })
}

fn fill_status(status: &mut KafkaClusterStatus, cluster: &KafkaCluster, o: &Observation, roll: Option<&Rolled>) {
    let generation = cluster.metadata.generation;
    let kafka = &o.kafka;
    let name = cluster.name_any();
    status.observed_generation = generation;
    let names = Names::new(name, cluster.namespace().unwrap_or_default());
    status.bootstrap = o.valid.as_ref().map(|v| names.bootstrap_address(v.spec.listeners.internal.port));
    if let Some(quorum) = quorum_status(kafka) {
        status.active_controller = quorum.leader_id;
        status.quorum = Some(quorum);
    }
    if let Some((under, under_min, offline)) = partition_health(kafka) {
        status.under_replicated_partitions = Some(under);
        status.under_min_isr_partitions = Some(under_min);
        status.offline_partitions = Some(offline);
    }
    if let Some(level) = kafka.features.as_ref().and_then(|f| f.finalized.get(crate::metadata_version::FEATURE)) {
        status.finalized_metadata_version = crate::metadata_version::name(*level).map(str::to_owned);
    }
    let directory = |id: i32| kafka.quorum.as_ref().and_then(|q| current_directory(q, id));
    status.nodes = o
        .pods
        .values()
        .map(|pod| NodeStatus {
            id: pod.id,
            pod: pod.name.clone(),
            role: pod.pool.role(),
            ready: serving(pod, kafka).unwrap_or(pod.gate),
            revision: pod.revision.clone(),
            broker_state: match pod.pool {
                Pool::Controller => None,
                _ => kafka.cluster.as_ref().map(|c| match c.brokers.iter().find(|b| b.id == pod.id) {
                    Some(b) if b.fenced => "FENCED".to_owned(),
                    Some(_) => "RUNNING".to_owned(),
                    None => "NOT_REGISTERED".to_owned(),
                }),
            },
            directory_id: directory(pod.id),
        })
        .collect();

    let desired = o.valid.as_ref().map_or(0, |v| match v.layout {
        crate::validate::Layout::Separate { controllers, brokers } => controllers + brokers,
        crate::validate::Layout::Combined { nodes } => nodes,
    });
    let ready_nodes = status.nodes.iter().filter(|n| n.ready).count() as i32;
    let quorum_ok = status.quorum.as_ref().is_some_and(|q| q.leader_id.is_some());
    let offline = status.offline_partitions.unwrap_or(0);
    let rolling = roll.is_some_and(|r| r.action != Action::Done);
    let all_ready = quorum_ok && ready_nodes == desired && status.nodes.len() as i32 == desired && offline == 0;
    let on_target = o.pods.values().all(|p| o.targets.get(&p.pool).is_some_and(|t| p.revision.as_ref() == Some(t)));
    let versions: BTreeSet<&str> = o.valid.iter().map(|v| v.spec.version.as_str()).collect();
    if all_ready && !rolling && on_target {
        status.observed_version = versions.first().map(|v| v.to_string());
    }
    let serving_brokers = status.nodes.iter().filter(|n| n.ready && n.role != crate::api::NodeRole::Controller).count();
    let available = quorum_ok && serving_brokers > 0;
    let phase: Reason = if cluster.spec.paused {
        Common::Paused.into()
    } else if status.nodes.is_empty() || status.cluster_id.is_none() {
        Common::Bootstrap.into()
    } else if !quorum_ok {
        Reasons::NoActiveController.into()
    } else if rolling {
        Reasons::Rolling.into()
    } else if all_ready {
        Common::Healthy.into()
    } else {
        Common::Degraded.into()
    };
    status.phase = Some(phase.to_string());
    let message = format!(
        "{ready_nodes} of {desired} nodes serving; quorum leader {}; {offline} offline partitions",
        status.active_controller.map_or_else(|| "none".to_owned(), |l| l.to_string())
    );
    let c = &mut status.conditions;
    // Ready promises clients the bootstrap Service: serving brokers it does not list yet
    // (the first seconds after creation) are not ready for them.
    let unserved = all_ready && o.served.is_empty();
    if o.valid.is_some() && unserved {
        let why = format!("Service {} lists no broker yet", names.bootstrap_service());
        set_condition(c, ConditionType::Ready, false, Reasons::ServiceWithoutEndpoints, &why, generation);
    } else if o.valid.is_some() {
        set_condition(
            c,
            ConditionType::Ready,
            all_ready,
            if all_ready { Common::Healthy.into() } else { phase },
            &message,
            generation,
        );
    }
    set_condition(
        c,
        ConditionType::Available,
        available,
        if available { Common::Healthy.into() } else { phase },
        &message,
        generation,
    );
    let degraded = !all_ready && !status.nodes.is_empty();
    set_condition(
        c,
        ConditionType::Degraded,
        degraded,
        if degraded { phase } else { Common::AsExpected.into() },
        &message,
        generation,
    );
    match roll.filter(|_| rolling) {
        Some(Rolled { report, .. }) => {
            set_condition(c, ConditionType::Progressing, true, report.reason, &report.message, generation)
        }
        None => set_condition(c, ConditionType::Progressing, false, Common::Idle, &message, generation),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_listed_twice_runs_the_directory_fetched_last() {
        use crate::observed::{Quorum, QuorumReplica};
        let replica = |id: i32, directory: &str, fetched: Option<i64>| QuorumReplica {
            id,
            directory_id: Some(directory.to_owned()),
            log_end_offset: 1,
            last_fetch_timestamp: fetched,
            last_caught_up_timestamp: fetched,
        };
        let quorum = Quorum {
            voters: vec![replica(0, "v0", Some(10))],
            observers: vec![replica(100, "old", Some(5)), replica(100, "new", Some(9)), replica(101, "b", None)],
            ..Quorum::default()
        };
        assert_eq!(current_directory(&quorum, 100).as_deref(), Some("new"));
        assert_eq!(current_directory(&quorum, 101).as_deref(), Some("b"));
        assert_eq!(current_directory(&quorum, 0).as_deref(), Some("v0"));
        assert_eq!(current_directory(&quorum, 102), None);
        // A controller formatted anew: its old voter entry stays, the new one observes.
        let quorum = Quorum { observers: vec![replica(0, "v0-new", Some(11))], ..quorum };
        assert_eq!(current_directory(&quorum, 0).as_deref(), Some("v0-new"));
    }

    /// A node is reported once, when it is first seen with a new directory id; a node not
    /// seen this pass, or seen for the first time, is not.
    #[test]
    fn a_node_with_a_new_directory_id_had_its_storage_replaced() {
        let ids = |pairs: &[(i32, &str)]| -> BTreeMap<i32, String> {
            pairs.iter().map(|(id, d)| (*id, (*d).to_owned())).collect()
        };
        let known = ids(&[(0, "a"), (100, "b"), (101, "c")]);
        let now = ids(&[(0, "a"), (100, "B"), (102, "d")]);
        assert_eq!(storage_replaced(&known, &now), vec![(100, "b".to_owned(), "B".to_owned())]);
        let mut remembered = known.clone();
        remembered.extend(now.clone());
        assert!(storage_replaced(&remembered, &now).is_empty(), "reported once");
        assert!(storage_replaced(&BTreeMap::new(), &now).is_empty(), "nothing known yet");
    }

    /// Ready promises clients the bootstrap Service: a one-node cluster whose node serves is
    /// not Ready until the Service lists the node's pod.
    #[test]
    fn a_serving_cluster_is_ready_only_once_its_bootstrap_service_lists_a_broker() {
        use super::super::observe::NodePod;
        use crate::observed::{Broker, Cluster, Quorum, QuorumReplica};
        let spec: crate::api::KafkaClusterSpec =
            serde_json::from_value(serde_json::json!({"combined": {"replicas": 1, "storage": {"size": "1Gi"}}}))
                .expect("a spec");
        let valid = crate::validate::validate(&spec).expect("a valid spec");
        let mut cluster = KafkaCluster::new("k", spec);
        cluster.metadata.namespace = Some("ns".into());
        let pod = NodePod {
            name: "k-0".into(),
            pool: Pool::Combined,
            id: 0,
            terminating: false,
            container_ready: true,
            gate: true,
            ip: Some("10.0.0.1".into()),
            revision: Some("r1".into()),
        };
        let voter = QuorumReplica {
            id: 0,
            directory_id: None,
            log_end_offset: 10,
            last_fetch_timestamp: Some(1),
            last_caught_up_timestamp: Some(1),
        };
        let kafka = Kafka {
            cluster: Some(Cluster {
                cluster_id: "id".into(),
                controller_id: Some(0),
                brokers: vec![Broker { id: 0, host: "k-0".into(), port: 9092, rack: None, fenced: false }],
            }),
            quorum: Some(Quorum {
                leader_id: Some(0),
                leader_epoch: 1,
                high_watermark: 10,
                voters: vec![voter],
                observers: Vec::new(),
            }),
            topics: Some(Vec::new()),
            ..Kafka::default()
        };
        let ready = |served: &[&str]| {
            let o = Observation {
                valid: Some(valid.clone()),
                pods: [(0, pod.clone())].into(),
                expected: BTreeMap::new(),
                targets: [(Pool::Combined, "r1".to_string())].into(),
                problems: Vec::new(),
                kafka: kafka.clone(),
                served: served.iter().map(|s| s.to_string()).collect(),
            };
            let mut status = KafkaClusterStatus { cluster_id: Some("id".into()), ..KafkaClusterStatus::default() };
            fill_status(&mut status, &cluster, &o, None);
            let c = status.conditions.iter().find(|c| c.type_ == "Ready").cloned().expect("a Ready condition");
            (status.phase, c.status, c.reason)
        };
        let healthy = Some("Healthy".to_string());
        assert_eq!(ready(&[]), (healthy.clone(), "False".into(), "ServiceWithoutEndpoints".into()));
        assert_eq!(ready(&["k-0"]), (healthy, "True".into(), "Healthy".into()));
    }
}
