//! The KafkaTopic controller: read → validate (pure) → observe the topic in Kafka → plan
//! (pure, [`crate::topic`]) → act → status. One reconcile per topic, through the cluster's
//! bootstrap Service (`status.bootstrap` of its KafkaCluster): any broker answers Metadata
//! and DescribeConfigs for a topic and forwards CreateTopics, CreatePartitions and
//! IncrementalAlterConfigs to the active controller.
//!
//! Several KafkaTopics may name one topic: only the oldest acts on it (the others wait,
//! `TopicClaimed`), and deleting one leaves the topic while another still names it
//! ([`crate::topic::claimant`], read from the controller's cache of KafkaTopics).
//!
//! Every topic carries a finalizer, so that a `Delete` policy is carried out before the
//! resource goes; with `Retain` (the default), or when the cluster itself is gone, the
//! finalizer is simply removed and the data stays.
//!
//! Steady state is reads only: a topic as its spec says is observed every [`RESYNC`], and
//! its status is written only when it changed ([`patch_status`]).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use statecraft_shared::backup::controller::cluster_not_found;
use statecraft_shared::finalizer::{FinalizerEvent, with_finalizer};
use statecraft_shared::reason::Reason;
use statecraft_shared::runner::Runtime;
use statecraft_shared::status::{
    ConditionType, patch_status, report_invalid_spec, set_condition, set_custom_condition,
};
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

use crate::admin::{Admin, AdminError};
use crate::api::{DeletionPolicy, KafkaCluster, KafkaTopic, KafkaTopicStatus};
use crate::observed::ConfigResource;
use crate::reason::Kafka;
use crate::topic::{Found, Plan, also_named_by, claimant, differences, kafka_name, plan};
use crate::validate::{ValidTopic, validate_topic};

/// The finalizer every KafkaTopic carries.
pub const FINALIZER: &str = "kafka.statecraft.io/topic";
/// The condition saying whether the topic differs from the spec (`status.differences`).
pub const IN_SYNC: &str = "InSync";
/// How often a topic is looked at without any change: drift made outside the operator is
/// seen (and, when owned, corrected) within this.
pub const RESYNC: Duration = Duration::from_secs(120);
/// How soon a topic whose cluster does not serve yet is looked at again.
const CLUSTER_WAIT: Duration = Duration::from_secs(10);
/// How soon a topic just changed is looked at again, to report what Kafka made of it.
const AFTER_CHANGE: Duration = Duration::from_secs(2);
/// How long one admin call may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What every reconcile gets: the runtime, and the controller's cache of the namespace's
/// KafkaTopics (to see which other resources name the same topic, without an API call).
pub struct Context {
    rt: Arc<Runtime>,
    topics: Store<KafkaTopic>,
}

/// Runs the topic controller until `shutdown`.
pub async fn run(rt: Arc<Runtime>, shutdown: CancellationToken) {
    let controller =
        Controller::new(Api::<KafkaTopic>::namespaced(rt.client.clone(), &rt.namespace), watcher::Config::default());
    let ctx = Arc::new(Context { rt: rt.clone(), topics: controller.store() });
    rt.run_controller("kafkatopic", controller, ctx, reconcile, shutdown).await;
}

/// Reconciles one KafkaTopic.
pub async fn reconcile(topic: Arc<KafkaTopic>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<KafkaTopic> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    let others = ctx.topics.state();
    let others: Vec<&KafkaTopic> = others.iter().map(AsRef::as_ref).collect();
    let rt = &ctx.rt;
    with_finalizer(&api, FINALIZER, topic, |event| async move {
        match event {
            FinalizerEvent::Apply(topic) => apply(rt, &topic, &others).await,
            FinalizerEvent::Cleanup(topic) => cleanup(rt, &topic, &others).await,
        }
    })
    .await
}

/// The cluster's bootstrap address, or why the topic waits: the cluster is missing, or it
/// has not served yet (no cluster id and bootstrap address in its status).
async fn bootstrap(rt: &Runtime, cluster_name: &str) -> Result<Result<String, (Reason, String)>> {
    let clusters: Api<KafkaCluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let cluster = clusters.get_opt(cluster_name).await.map_err(|e| Error::kube("reading a KafkaCluster", e))?;
    let Some(cluster) = cluster else {
        return Ok(Err(cluster_not_found("KafkaCluster", cluster_name)));
    };
    let status = cluster.status.as_ref();
    match status.and_then(|s| s.bootstrap.clone()).filter(|_| status.is_some_and(|s| s.cluster_id.is_some())) {
        Some(address) => Ok(Ok(address)),
        None => Ok(Err((
            Kafka::ClusterNotServing.into(),
            format!("KafkaCluster {cluster_name} has not served yet (no cluster id in its status)"),
        ))),
    }
}

/// The topic as Kafka has it, if it does.
async fn observe(admin: &Admin, name: &str) -> Result<Option<Found>, AdminError> {
    let Some(topic) = admin.topic(name).await? else {
        return Ok(None);
    };
    let resource = ConfigResource::Topic(name.to_owned());
    let config = admin.describe_configs(std::slice::from_ref(&resource)).await?.remove(&resource).unwrap_or_default();
    Ok(Some(Found { topic, config }))
}

async fn apply(rt: &Runtime, topic: &KafkaTopic, others: &[&KafkaTopic]) -> Result<Action> {
    let valid = match validate_topic(&topic.name_any(), &topic.spec) {
        Ok(valid) => valid,
        Err(err) => {
            report_invalid_spec(rt, topic, |s| &mut s.conditions, &err).await?;
            return Err(err);
        }
    };
    let mut status = topic.status.clone().unwrap_or_default();
    status.observed_generation = topic.metadata.generation;
    status.topic_name = Some(valid.topic_name.clone());
    let first = claimant(topic, others.iter().copied());
    let outcome = if first.uid() == topic.uid() {
        converge(rt, topic, &valid, &mut status).await
    } else {
        claimed(rt, topic, first, &mut status).await
    };
    if let Err(err) = &outcome {
        set_condition(
            &mut status.conditions,
            ConditionType::Ready,
            false,
            err.reason(),
            &err.to_string(),
            status.observed_generation,
        );
    }
    let api: Api<KafkaTopic> = Api::namespaced(rt.client.clone(), &rt.namespace);
    patch_status(&api, topic, topic.status.as_ref(), &status, rt.field_manager).await?;
    outcome
}

/// Observes the topic, carries out the plan and fills `status` from what Kafka has then.
async fn converge(
    rt: &Runtime,
    topic: &KafkaTopic,
    valid: &ValidTopic,
    status: &mut KafkaTopicStatus,
) -> Result<Action> {
    let generation = status.observed_generation;
    let address = match bootstrap(rt, &valid.spec.cluster_name).await? {
        Ok(address) => address,
        Err((reason, message)) => {
            set_condition(&mut status.conditions, ConditionType::Ready, false, reason, &message, generation);
            return Ok(Action::requeue(CLUSTER_WAIT));
        }
    };
    let name = valid.topic_name.as_str();
    let admin = Admin::connect(&address, ADMIN_TIMEOUT).await?;
    let before = observe(&admin, name).await?;
    let plan = plan(&valid.spec, before.as_ref());
    let changed = !plan.is_empty();
    act(rt, topic, &admin, name, &plan).await?;
    let after = if changed { observe(&admin, name).await? } else { before };
    let Some(found) = after else {
        // Created, and the answering broker has not learnt it yet.
        set_condition(
            &mut status.conditions,
            ConditionType::Ready,
            false,
            Kafka::TopicCreated,
            "the topic was created; waiting for its metadata",
            generation,
        );
        return Ok(Action::requeue(AFTER_CHANGE));
    };
    if let Some(previous) = status.topic_id.as_deref().filter(|id| **id != found.topic.id) {
        let note = format!(
            "topic {name} has id {} now, not {previous}: it was deleted and created again, and its records are gone",
            found.topic.id
        );
        rt.events.warning(topic, Kafka::TopicRecreated, "Observe", note).await;
    }
    status.topic_id = Some(found.topic.id.clone()).filter(|id| !id.is_empty());
    status.partitions = Some(found.partitions());
    status.replication_factor = found.replication_factor();
    status.differences = differences(&valid.spec, &found);
    let in_sync = status.differences.is_empty();
    let (reason, message) = if in_sync {
        (Kafka::TopicInSync, "the topic is as the spec says".to_owned())
    } else {
        let fields: Vec<&str> = status.differences.iter().map(|d| d.field.as_str()).collect();
        (Kafka::TopicDiffers, format!("Kafka differs from {} (see status.differences)", fields.join(", ")))
    };
    set_custom_condition(&mut status.conditions, IN_SYNC, in_sync, reason, &message, generation);
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        true,
        Kafka::TopicReady,
        &format!("topic {name} exists"),
        generation,
    );
    Ok(Action::requeue(if changed { AFTER_CHANGE } else { RESYNC }))
}

/// Another KafkaTopic, `first`, acts on this one's topic: this one waits, saying so (a
/// Warning the first time), and changes nothing in Kafka.
async fn claimed(
    rt: &Runtime,
    topic: &KafkaTopic,
    first: &KafkaTopic,
    status: &mut KafkaTopicStatus,
) -> Result<Action> {
    let message = format!(
        "topic {} of KafkaCluster {} is KafkaTopic {}'s, created first: this resource changes nothing until that one is gone",
        kafka_name(topic),
        topic.spec.cluster_name,
        first.name_any()
    );
    let reason = Kafka::TopicClaimed;
    let ready = status.conditions.iter().find(|c| c.type_ == ConditionType::Ready.to_string());
    if ready.is_none_or(|c| c.reason != Reason::from(reason).as_str()) {
        rt.events.warning(topic, reason, "Claim", message.clone()).await;
    }
    set_condition(&mut status.conditions, ConditionType::Ready, false, reason, &message, status.observed_generation);
    Ok(Action::requeue(CLUSTER_WAIT))
}

/// Carries out `plan`, one Event per change.
async fn act(rt: &Runtime, topic: &KafkaTopic, admin: &Admin, name: &str, plan: &Plan) -> Result<()> {
    match plan {
        Plan::Create { partitions, replication_factor, config } => {
            match admin.create_topic(name, *partitions, *replication_factor, config).await {
                // Created by an earlier pass whose answer was lost, or by someone else.
                Err(e) if e.code() == Some(kafka_protocol::ResponseError::TopicAlreadyExists) => return Ok(()),
                other => other?,
            }
            let note = format!("created topic {name} with {partitions} partitions");
            rt.events.normal(topic, Kafka::TopicCreated, "Create", note).await;
        }
        Plan::Update { grow_to, config } => {
            if let Some(total) = grow_to {
                admin.create_partitions(name, *total).await?;
                rt.events
                    .normal(topic, Kafka::PartitionsAdded, "Grow", format!("topic {name} has {total} partitions now"))
                    .await;
            }
            if !config.is_empty() {
                admin.alter_configs(&ConfigResource::Topic(name.to_owned()), config).await?;
                let keys: Vec<String> = config.iter().map(|c| format!("{c:?}")).collect();
                rt.events
                    .normal(
                        topic,
                        Kafka::TopicReconfigured,
                        "Reconfigure",
                        format!("topic {name}: {}", keys.join(", ")),
                    )
                    .await;
            }
        }
    }
    Ok(())
}

/// The resource is being deleted: with `Delete`, the topic goes first (unless its cluster is
/// gone, and the topic with it); with `Retain`, nothing is done to Kafka.
async fn cleanup(rt: &Runtime, topic: &KafkaTopic, others: &[&KafkaTopic]) -> Result<Action> {
    let name = kafka_name(topic);
    if let Some(other) = also_named_by(topic, others.iter().copied()) {
        let note = format!("topic {name} and its records stay in Kafka: KafkaTopic {} names it too", other.name_any());
        rt.events.normal(topic, Kafka::TopicRetained, "Delete", note).await;
        return Ok(Action::await_change());
    }
    if topic.spec.deletion_policy == DeletionPolicy::Retain {
        rt.events
            .normal(
                topic,
                Kafka::TopicRetained,
                "Delete",
                format!("topic {name} and its records stay in Kafka (deletionPolicy Retain)"),
            )
            .await;
        return Ok(Action::await_change());
    }
    match bootstrap(rt, &topic.spec.cluster_name).await? {
        Ok(address) => {
            Admin::connect(&address, ADMIN_TIMEOUT).await?.delete_topic(&name).await?;
            rt.events
                .normal(topic, Kafka::TopicDeleted, "Delete", format!("deleted topic {name} (deletionPolicy Delete)"))
                .await;
        }
        // A cluster that never served has no topic; one that is gone took it along.
        Err((reason, message)) => {
            rt.events.normal(topic, reason, "Delete", format!("{message}: nothing to delete")).await;
        }
    }
    Ok(Action::await_change())
}
