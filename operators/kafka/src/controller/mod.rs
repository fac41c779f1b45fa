//! The Kafka operator's controllers:
//!
//! - [`reconcile`]: the declarative loop (read → validate → build → apply) over each
//!   KafkaCluster's ConfigMap, Services, StatefulSets and PodDisruptionBudgets; it starts one
//!   per-cluster task.
//! - [`task`]: the per-cluster task (observe → decide, pure → act → report) that looks at the
//!   nodes through the admin client, marks pods ready once their node serves, applies the
//!   cluster-wide dynamic configuration, rolls new pod revisions behind Kafka's gates and writes
//!   the status.
//! - [`topic`]: the KafkaTopic controller (create, grow, configure, report drift, delete per
//!   the deletion policy).
//! - [`metrics`]: what the tasks observe, as `statecraft_kafka_*` series.

pub mod metrics;
pub mod reconcile;
pub mod task;
pub mod topic;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use statecraft_shared::cluster_loop::Loops;
use statecraft_shared::runner::Runtime;
use statecraft_shared::statefulset::NAME_LABEL;
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

use crate::api::KafkaCluster;
use crate::names::APP_NAME;

/// Shared by the controllers and the per-cluster tasks.
pub struct Context {
    /// The runner's runtime (client, namespace, events, metrics).
    pub rt: Arc<Runtime>,
    /// The clusters' metrics, fed by the tasks.
    pub metrics: metrics::KafkaMetrics,
    /// The per-cluster tasks, supervised: a panic restarts the task with a Warning Event.
    loops: Loops<KafkaCluster>,
}

impl Context {
    /// A context whose tasks stop with `shutdown`.
    pub fn new(rt: Arc<Runtime>, shutdown: CancellationToken) -> Result<Self> {
        let metrics = metrics::KafkaMetrics::register(&rt.namespace_metrics.registry)
            .map_err(|e| Error::Permanent(format!("registering the Kafka metrics: {e}")))?;
        let loops = Loops::new(rt.clone(), shutdown);
        Ok(Context { rt, metrics, loops })
    }

    /// Starts the task of `name` (if it is not running for this `uid`) and wakes it.
    pub fn ensure_task(self: &Arc<Self>, name: &str, uid: &str) {
        let ctx = self.clone();
        self.loops.ensure(name, uid, move || task::Nodes::new(ctx.clone()));
    }

    /// Stops the task of `name` (the cluster is being deleted).
    pub fn stop_task(&self, name: &str) {
        self.loops.stop(name);
        self.metrics.forget(name);
    }
}

/// Runs the Kafka controllers until `shutdown`.
pub async fn run(rt: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
    let client = rt.client.clone();
    let ns = rt.namespace.clone();
    let owned = watcher::Config::default().labels(&format!("{NAME_LABEL}={APP_NAME}"));
    let clusters = Controller::new(Api::<KafkaCluster>::namespaced(client.clone(), &ns), watcher::Config::default())
        .owns(Api::<StatefulSet>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<Service>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<ConfigMap>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<PodDisruptionBudget>::namespaced(client, &ns), owned);
    let ctx = Arc::new(Context::new(rt.clone(), shutdown.clone())?);
    tokio::join!(
        rt.run_controller("kafkacluster", clusters, ctx, reconcile::reconcile, shutdown.clone()),
        topic::run(rt.clone(), shutdown),
    );
    Ok(())
}
