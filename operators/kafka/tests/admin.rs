//! The admin client against a real Kafka 4.4 cluster (3 controllers, 3 brokers; see
//! `support`). One cluster for the whole file, started once: each JVM takes seconds to
//! start on 2 cores, so the scenarios run in sequence in one test, each in its own function
//! and in an order where each leaves the cluster as the next expects it.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use statecraft_kafka::admin::Admin;
use statecraft_kafka::observed::{ConfigChange, ConfigResource, ConfigSource, Topic};
use support::{BROKERS, CONTROLLERS, KafkaCluster};

const TOPIC: &str = "orders";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_client_against_a_real_cluster() {
    let started = Instant::now();
    let mut cluster = KafkaCluster::start().await;
    let broker = cluster.admin(BROKERS[0]).await;
    let mut step = Instant::now();
    let mut timed = |what: &str| {
        eprintln!("{what}: {:?}", step.elapsed());
        step = Instant::now();
    };
    timed("cluster started");

    negotiated_versions_and_features(&broker).await;
    quorum_through_a_broker(&cluster, &broker).await;
    cluster_lists_the_brokers(&cluster, &broker).await;
    timed("versions, quorum, cluster");
    topic_created_with_its_isr(&cluster, &broker).await;
    timed("topic");
    cluster_wide_and_topic_configs(&cluster, &broker).await;
    timed("configs");
    errors_name_the_api_and_the_code(&cluster, &broker).await;
    timed("errors");
    killed_broker_fenced_then_preferred_leaders_back(&mut cluster, &broker).await;
    timed("fencing and preferred leaders");
    features_and_reassignments(&broker).await;
    partitions_grown_and_topic_deleted(&cluster, &broker).await;
    timed("features, partitions, deletion");
    quorum_on_a_controller_with_every_broker_stopped(&mut cluster).await;
    timed("quorum without brokers");
    eprintln!("whole test: {:?}", started.elapsed());
}

async fn negotiated_versions_and_features(admin: &Admin) {
    let mut versions = BTreeMap::new();
    for api in [
        ApiKey::ApiVersions,
        ApiKey::DescribeQuorum,
        ApiKey::DescribeCluster,
        ApiKey::Metadata,
        ApiKey::DescribeConfigs,
        ApiKey::IncrementalAlterConfigs,
        ApiKey::ElectLeaders,
        ApiKey::UpdateFeatures,
        ApiKey::ListPartitionReassignments,
        ApiKey::CreateTopics,
        ApiKey::CreatePartitions,
        ApiKey::DeleteTopics,
    ] {
        versions.insert(format!("{api:?}"), admin.api_version(api).await.unwrap());
    }
    eprintln!("negotiated with Kafka 4.4.0: {versions:?}");
    // The versions whose fields the client relies on, and Kafka 4.4 has the newest ones.
    assert!(versions["ApiVersions"] >= 3, "features need ApiVersions v3+");
    assert_eq!(versions["DescribeCluster"], 2, "fenced brokers");
    assert_eq!(versions["DescribeQuorum"], 2, "directory ids");
    assert!(versions["Metadata"] >= 10, "topic ids");
    // The client never sends an API it has no use for.
    let e = admin.api_version(ApiKey::Produce).await.unwrap_err();
    assert!(e.to_string().contains("Produce"), "{e}");

    let features = admin.features().await.unwrap();
    eprintln!("features: {features:?}");
    let metadata = features.finalized["metadata.version"];
    let (min, max) = features.supported["metadata.version"];
    assert!(min <= metadata && metadata <= max, "{features:?}");
    // Formatted with --initial-controllers: a dynamic quorum, kraft.version 1.
    assert_eq!(features.finalized.get("kraft.version"), Some(&1), "{features:?}");
}

async fn quorum_through_a_broker(cluster: &KafkaCluster, admin: &Admin) {
    let quorum = cluster
        .until("3 caught-up voters and the brokers as observers", || async {
            let quorum = admin.describe_quorum().await.map_err(|e| e.to_string())?;
            let voters: BTreeSet<i32> = quorum.voters.iter().map(|v| v.id).collect();
            let observers: BTreeSet<i32> = quorum.observers.iter().map(|o| o.id).collect();
            let caught_up = quorum.voters.iter().all(|v| v.last_caught_up_timestamp.is_some());
            let ok =
                voters == BTreeSet::from(CONTROLLERS) && BROKERS.iter().all(|b| observers.contains(b)) && caught_up;
            if ok { Ok(quorum) } else { Err(format!("{quorum:?}")) }
        })
        .await;
    let leader = quorum.leader_id.expect("a leader");
    assert!(CONTROLLERS.contains(&leader), "{quorum:?}");
    assert!(quorum.leader_epoch > 0 && quorum.high_watermark > 0, "{quorum:?}");
    for voter in &quorum.voters {
        assert_eq!(voter.directory_id.as_ref(), Some(&cluster.directory_ids[&voter.id]), "{voter:?}");
        assert!(voter.log_end_offset > 0, "{voter:?}");
    }
    // What the operator's `quorumBootstrapped` rests on, as real Kafka reports it: every
    // initial voter listed with its directory id and heard from; another directory is not.
    let initial: Vec<(i32, String)> = cluster.directory_ids.iter().map(|(id, d)| (*id, d.clone())).collect();
    assert!(quorum.bootstrapped(&initial), "{quorum:?}");
    let mut other = initial.clone();
    other[0].1 = "AAAAAAAAAAAAAAAAAAAAAA".into();
    assert!(!quorum.bootstrapped(&other), "{quorum:?}");
    for observer in quorum.observers.iter().filter(|o| BROKERS.contains(&o.id)) {
        assert!(observer.last_fetch_timestamp.is_some(), "{observer:?}");
        assert!(observer.directory_id.is_some(), "brokers have directory ids too: {observer:?}");
    }
}

async fn cluster_lists_the_brokers(cluster: &KafkaCluster, admin: &Admin) {
    let described = admin.describe_cluster().await.unwrap();
    assert_eq!(described.cluster_id, cluster.cluster_id);
    let ids: Vec<i32> = described.brokers.iter().map(|b| b.id).collect();
    assert_eq!(ids, BROKERS, "{described:?}");
    for broker in &described.brokers {
        assert!(!broker.fenced, "{broker:?}");
        assert_eq!(format!("{}:{}", broker.host, broker.port), cluster.address(broker.id));
        assert_eq!(broker.rack, None);
    }
    assert!(described.controller_id.is_some(), "{described:?}");
}

/// The topic once every partition has a leader and 3 replicas in sync.
async fn fully_replicated(cluster: &KafkaCluster, admin: &Admin, partitions: usize) -> Topic {
    cluster
        .until("every partition of the topic with 3 in-sync replicas", || async {
            let topics = admin.topics().await.map_err(|e| e.to_string())?;
            let topic = topics.into_iter().find(|t| t.name == TOPIC).ok_or("no topic yet")?;
            let ok = topic.partitions.len() == partitions
                && topic.partitions.iter().all(|p| p.leader.is_some() && p.isr.len() == 3 && p.replicas.len() == 3);
            if ok { Ok(topic) } else { Err(format!("{topic:?}")) }
        })
        .await
}

async fn topic_created_with_its_isr(cluster: &KafkaCluster, admin: &Admin) {
    let configs = BTreeMap::from([("min.insync.replicas".to_owned(), "2".to_owned())]);
    admin.create_topic(TOPIC, 6, 3, &configs).await.unwrap();
    let topic = fully_replicated(cluster, admin, 6).await;
    assert_eq!(topic.id.len(), 22, "a Kafka uuid string: {topic:?}");
    assert!(!topic.internal);
    for (index, partition) in topic.partitions.iter().enumerate() {
        assert_eq!(partition.index, index as i32);
        assert_eq!(partition.topic, TOPIC);
        assert_eq!(partition.replicas.iter().copied().collect::<BTreeSet<_>>(), BTreeSet::from(BROKERS));
    }
    let described = admin.describe_configs(&[ConfigResource::Topic(TOPIC.into())]).await.unwrap();
    let min_isr = &described[&ConfigResource::Topic(TOPIC.into())]["min.insync.replicas"];
    assert_eq!((min_isr.value.as_deref(), min_isr.source), (Some("2"), ConfigSource::Topic));
    // Creating it again is Kafka's TOPIC_ALREADY_EXISTS, which callers can match on.
    let e = admin.create_topic(TOPIC, 6, 3, &configs).await.unwrap_err();
    assert_eq!(e.code(), Some(ResponseError::TopicAlreadyExists), "{e}");
    assert!(!e.is_transient());
}

/// `key` of `resource` as `admin` describes it: (value, source).
async fn entry(admin: &Admin, resource: &ConfigResource, key: &str) -> Result<(Option<String>, ConfigSource), String> {
    let configs = admin.describe_configs(std::slice::from_ref(resource)).await.map_err(|e| e.to_string())?;
    let entry = configs[resource].get(key).ok_or(format!("no {key}"))?;
    Ok((entry.value.clone(), entry.source))
}

async fn cluster_wide_and_topic_configs(cluster: &KafkaCluster, admin: &Admin) {
    let broker = ConfigResource::Broker(BROKERS[0]);
    let topic = ConfigResource::Topic(TOPIC.into());
    let key = "log.retention.ms";
    let hour = Some("3600000".to_owned());

    admin
        .alter_configs(&ConfigResource::ClusterDefault, &[ConfigChange::Set(key.into(), "3600000".into())])
        .await
        .unwrap();
    let want = (hour.clone(), ConfigSource::DynamicDefaultBroker);
    cluster
        .until("the cluster-wide log.retention.ms on a broker", || async {
            let got = entry(admin, &broker, key).await?;
            if got == want { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;
    // The cluster default as the resource itself.
    let cluster_default = entry(admin, &ConfigResource::ClusterDefault, key).await.unwrap();
    assert_eq!(cluster_default, want);
    // A topic without its own retention.ms inherits the broker's, and says from where.
    cluster
        .until("the topic's retention.ms from the cluster default", || async {
            let got = entry(admin, &topic, "retention.ms").await?;
            if got == want { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;

    // The same setting at the topic level.
    admin.alter_configs(&topic, &[ConfigChange::Set("retention.ms".into(), "7200000".into())]).await.unwrap();
    let want_topic = (Some("7200000".to_owned()), ConfigSource::Topic);
    cluster
        .until("the topic's own retention.ms", || async {
            let got = entry(admin, &topic, "retention.ms").await?;
            if got == want_topic { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;
    // Incremental: the topic's other override is still there.
    assert_eq!(entry(admin, &topic, "min.insync.replicas").await.unwrap(), (Some("2".into()), ConfigSource::Topic));

    // Deleting the overrides: back to Kafka's default (7 days of log.retention.hours).
    admin.alter_configs(&ConfigResource::ClusterDefault, &[ConfigChange::Delete(key.into())]).await.unwrap();
    admin.alter_configs(&topic, &[ConfigChange::Delete("retention.ms".into())]).await.unwrap();
    cluster
        .until("log.retention.ms back to the default", || async {
            let got = entry(admin, &broker, key).await?;
            if got.1 == ConfigSource::Default { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;
    cluster
        .until("the topic's retention.ms back to the default", || async {
            let got = entry(admin, &topic, "retention.ms").await?;
            if got == (Some("604800000".into()), ConfigSource::Default) { Ok(()) } else { Err(format!("{got:?}")) }
        })
        .await;
}

async fn errors_name_the_api_and_the_code(cluster: &KafkaCluster, admin: &Admin) {
    let e = admin.describe_configs(&[ConfigResource::Topic("no-such-topic".into())]).await.unwrap_err();
    let message = e.to_string();
    eprintln!("unknown topic: {message}");
    assert_eq!(e.code(), Some(ResponseError::UnknownTopicOrPartition), "{message}");
    for part in ["DescribeConfigs", "topic no-such-topic", "UNKNOWN_TOPIC_OR_PARTITION", &cluster.address(BROKERS[0])] {
        assert!(message.contains(part), "{message} lacks {part}");
    }
    // A broker's own configuration is asked of that broker.
    let e = admin.describe_configs(&[ConfigResource::Broker(BROKERS[1])]).await.unwrap_err();
    eprintln!("another broker's configs: {e}");
    assert_eq!(e.code(), Some(ResponseError::InvalidRequest), "{e}");
    // A bad value is refused, naming it; nothing retries it.
    let e = admin
        .alter_configs(&ConfigResource::ClusterDefault, &[ConfigChange::Set("log.retention.ms".into(), "soon".into())])
        .await
        .unwrap_err();
    eprintln!("bad value: {e}");
    assert!(!e.is_transient(), "{e}");
    assert!(e.to_string().contains("IncrementalAlterConfigs"), "{e}");
    // With a good value in the same request, the good one takes effect and the refusal
    // names the bad one's key.
    let good = ConfigChange::Set("log.cleaner.backoff.ms".into(), "20000".into());
    let bad = ConfigChange::Set("log.retention.ms".into(), "soon".into());
    let refused = admin.alter_each(&ConfigResource::ClusterDefault, &[bad.clone(), good.clone()]).await.unwrap();
    assert_eq!(refused.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>(), [bad], "{refused:?}");
    cluster
        .until("the good value applied", || async {
            let got = entry(admin, &ConfigResource::ClusterDefault, "log.cleaner.backoff.ms").await?;
            if got == (Some("20000".into()), ConfigSource::DynamicDefaultBroker) {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
        .await;
    let back = ConfigChange::Delete("log.cleaner.backoff.ms".into());
    assert!(admin.alter_each(&ConfigResource::ClusterDefault, &[back]).await.unwrap().is_empty());
    // The connection survives errors Kafka answers with.
    admin.describe_cluster().await.unwrap();
}

async fn killed_broker_fenced_then_preferred_leaders_back(cluster: &mut KafkaCluster, admin: &Admin) {
    let victim = BROKERS[1];
    cluster.kill(victim);
    cluster
        .until("the killed broker fenced", || async {
            let described = admin.describe_cluster().await.map_err(|e| e.to_string())?;
            let fenced: Vec<i32> = described.brokers.iter().filter(|b| b.fenced).map(|b| b.id).collect();
            if fenced == [victim] && described.brokers.len() == 3 { Ok(()) } else { Err(format!("{described:?}")) }
        })
        .await;
    cluster
        .until("no partition led by the killed broker", || async {
            let topics = admin.topics().await.map_err(|e| e.to_string())?;
            let topic = topics.iter().find(|t| t.name == TOPIC).ok_or("no topic")?;
            let moved = topic.partitions.iter().all(|p| p.leader.is_some() && p.leader != Some(victim));
            if moved { Ok(()) } else { Err(format!("{topic:?}")) }
        })
        .await;

    cluster.restart(victim);
    cluster.wait_brokers_unfenced(&BROKERS).await;
    let topic = fully_replicated(cluster, admin, 6).await;
    // Automatic rebalancing is off: the partitions it prefers are still led by others.
    let displaced: Vec<(String, i32)> = topic
        .partitions
        .iter()
        .filter(|p| p.replicas[0] == victim && p.leader != Some(victim))
        .map(|p| (TOPIC.to_owned(), p.index))
        .collect();
    assert!(!displaced.is_empty(), "{topic:?}");

    admin.elect_preferred_leaders(None).await.unwrap();
    cluster
        .until("every partition led by its preferred replica", || async {
            let topics = admin.topics().await.map_err(|e| e.to_string())?;
            let topic = topics.iter().find(|t| t.name == TOPIC).ok_or("no topic")?;
            let preferred = topic.partitions.iter().all(|p| p.leader == Some(p.replicas[0]));
            if preferred { Ok(()) } else { Err(format!("{topic:?}")) }
        })
        .await;
    // Once more on the same partitions: ELECTION_NOT_NEEDED, a success.
    admin.elect_preferred_leaders(Some(&displaced)).await.unwrap();
}

async fn features_and_reassignments(admin: &Admin) {
    let features = admin.features().await.unwrap();
    let level = features.finalized["metadata.version"];
    admin.update_feature("metadata.version", level).await.unwrap();
    assert_eq!(admin.features().await.unwrap().finalized["metadata.version"], level);
    // Beyond what the nodes support: refused, naming the feature.
    let (_, max) = features.supported["metadata.version"];
    let e = admin.update_feature("metadata.version", max + 1).await.unwrap_err();
    eprintln!("unsupported level: {e}");
    assert!(e.to_string().contains(&format!("metadata.version={}", max + 1)), "{e}");
    assert_eq!(admin.ongoing_reassignments().await.unwrap(), 0);
}

async fn partitions_grown_and_topic_deleted(cluster: &KafkaCluster, admin: &Admin) {
    admin.create_partitions(TOPIC, 8).await.unwrap();
    fully_replicated(cluster, admin, 8).await;
    let e = admin.create_partitions(TOPIC, 4).await.unwrap_err();
    assert_eq!(e.code(), Some(ResponseError::InvalidPartitions), "{e}");

    admin.delete_topic(TOPIC).await.unwrap();
    cluster
        .until("the topic gone", || async {
            let topics = admin.topics().await.map_err(|e| e.to_string())?;
            if topics.iter().any(|t| t.name == TOPIC) { Err("still listed".into()) } else { Ok(()) }
        })
        .await;
    // Deleting what is gone converges.
    admin.delete_topic(TOPIC).await.unwrap();
}

async fn quorum_on_a_controller_with_every_broker_stopped(cluster: &mut KafkaCluster) {
    // One by one, as a roll would, then the other two at once.
    cluster.stop(BROKERS[0]);
    cluster.stop_all(&BROKERS[1..]);
    let mut controllers = Vec::new();
    for id in CONTROLLERS {
        controllers.push((id, cluster.admin(id).await));
    }
    // Only the quorum's leader answers DescribeQuorum; the followers say so (transient).
    let quorum = cluster
        .until("the quorum from a controller", || async {
            let mut errors = Vec::new();
            for (id, admin) in &controllers {
                match admin.describe_quorum().await {
                    Ok(quorum) => return Ok((*id, quorum)),
                    Err(e) => {
                        assert!(e.is_transient(), "{e}");
                        errors.push(e.to_string());
                    }
                }
            }
            Err(errors.join("; "))
        })
        .await;
    let (answered, quorum) = quorum;
    eprintln!("quorum from controller {answered}: {quorum:?}");
    assert_eq!(quorum.leader_id, Some(answered));
    let voters: BTreeSet<i32> = quorum.voters.iter().map(|v| v.id).collect();
    assert_eq!(voters, BTreeSet::from(CONTROLLERS));
    let follower = controllers.iter().find(|(id, _)| *id != answered).map(|(_, a)| a).unwrap();
    let e = follower.describe_quorum().await.unwrap_err();
    eprintln!("a follower controller: {e}");
    assert_eq!(e.code(), Some(ResponseError::NotLeaderOrFollower), "{e}");
    // A controller's versions were negotiated on its own listener.
    assert_eq!(follower.api_version(ApiKey::DescribeQuorum).await.unwrap(), 2);
}
