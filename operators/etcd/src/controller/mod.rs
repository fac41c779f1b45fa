//! The etcd operator's controllers:
//!
//! - [`reconcile`]: the declarative loop (read → validate → build → apply) over each
//!   EtcdCluster's Services and PodDisruptionBudget; it starts one membership task per
//!   cluster.
//! - [`task`]: the per-cluster membership task (observe → plan, pure → one step), which owns
//!   the StatefulSet, the membership ConfigMap, the status, and everything done to etcd.
//! - [`upgrade`]: the etcd gates of a rolling restart (shared engine), run by the task.
//! - [`backup`]: one Job per EtcdBackup streaming a snapshot to S3, its report in status.
//! - [`restore`]: creates the target cluster of an EtcdRestore (bootstrapped from the
//!   snapshot) and waits for it.
//! - [`scheduled`]: snapshots on the cluster's schedule, and their retention.
//! - [`metrics`]: the members' state as Prometheus metrics, from the task's observations.

pub mod backup;
pub mod metrics;
pub mod reconcile;
pub mod restore;
pub mod scheduled;
pub mod task;
pub mod upgrade;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use statecraft_shared::cluster_loop::Loops;
use statecraft_shared::runner::Runtime;
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

use crate::api::{EtcdBackup, EtcdCluster, EtcdRestore};

/// Annotation on an EtcdCluster naming the member (pod) that should lead: the operator
/// moves leadership there (MoveLeader) once membership is settled and the member is a
/// healthy, caught-up voter, and records the request in `status.handledLeaderRequest`.
pub const LEADER_ANNOTATION: &str = "etcd.statecraft.io/leader";

/// Shared by the controllers and the per-cluster tasks.
pub struct Context {
    /// The runner's runtime (client, namespace, events, metrics).
    pub rt: Arc<Runtime>,
    /// The members' metrics, fed by the tasks.
    pub metrics: metrics::EtcdMetrics,
    /// The membership tasks, one per cluster, supervised: a panic restarts the task,
    /// with a Warning Event on the cluster.
    loops: Loops<EtcdCluster>,
}

impl Context {
    /// A context whose tasks stop with `shutdown`.
    pub fn new(rt: Arc<Runtime>, shutdown: CancellationToken) -> Result<Self> {
        let metrics = metrics::EtcdMetrics::register(&rt.namespace_metrics.registry)
            .map_err(|e| Error::Permanent(format!("registering the etcd metrics: {e}")))?;
        let loops = Loops::new(rt.clone(), shutdown);
        Ok(Context { rt, metrics, loops })
    }

    /// Starts the membership task of `name` (if it is not running for this `uid`) and wakes it.
    pub fn ensure_task(self: &Arc<Self>, name: &str, uid: &str) {
        let ctx = self.clone();
        self.loops.ensure(name, uid, move || task::Membership::new(ctx.clone()));
    }

    /// Stops the task of `name` (the cluster is being deleted).
    pub fn stop_task(&self, name: &str) {
        self.loops.stop(name);
        self.metrics.forget(name);
    }
}

/// Runs the etcd controllers until `shutdown`.
pub async fn run(rt: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
    let client = rt.client.clone();
    let ns = rt.namespace.clone();
    let owned = watcher::Config::default().labels(&format!("{}={}", crate::build::NAME_LABEL, crate::build::APP_NAME));
    let clusters = Controller::new(Api::<EtcdCluster>::namespaced(client.clone(), &ns), watcher::Config::default())
        .owns(Api::<Service>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<PodDisruptionBudget>::namespaced(client, &ns), owned);
    let backups = Controller::new(Api::<EtcdBackup>::namespaced(rt.client.clone(), &ns), watcher::Config::default())
        .owns(Api::<Job>::namespaced(rt.client.clone(), &ns), watcher::Config::default());
    let restores = Controller::new(Api::<EtcdRestore>::namespaced(rt.client.clone(), &ns), watcher::Config::default());
    let ctx = Arc::new(Context::new(rt.clone(), shutdown.clone())?);
    tokio::join!(
        rt.run_controller("etcdcluster", clusters, ctx.clone(), reconcile::reconcile, shutdown.clone()),
        rt.run_controller("etcdbackup", backups, ctx.clone(), backup::reconcile, shutdown.clone()),
        rt.run_controller("etcdrestore", restores, ctx, restore::reconcile, shutdown),
    );
    Ok(())
}
