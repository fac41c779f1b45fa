//! The MySQL operator's controllers:
//!
//! - [`reconcile`]: the declarative loop (read → validate → build → apply) over each
//!   MySQLCluster's owned objects; it starts one clustering task per cluster.
//! - [`task`]: the per-cluster clustering task (gather → decide → one operation), which owns
//!   the cluster's status, the pods' role labels and everything done to the servers.
//! - [`accounts`]: the MySQLUser and MySQLDatabase controllers: declared accounts and
//!   databases applied on the primary.
//! - [`acks`]: the primary's semi-sync acknowledgements (or its fallback to async) as a
//!   condition, a metric and Events, run by the task.
//! - [`backup`]: one Job per MySQLBackup, its report copied into the backup's status.
//! - [`restore`]: creates the target cluster of a MySQLRestore and loads the backup into it.
//! - [`scheduled`]: backups on the cluster's schedule, and their retention.
//! - [`metrics`]: the servers' state as Prometheus metrics, from the task's observations.
//! - [`reseed`]: re-seeding a replica (its claim and pod deleted) and the status record
//!   until it serves again.
//! - [`scaling`]: read-replica auto-scaling, run by the task: its verdict becomes
//!   `status.autoScaling.replicas`, the `AutoScaling` condition, Events and metrics.
//! - [`upgrade`]: the gates of a rolling restart (shared engine), run by the task.

pub mod accounts;
pub mod acks;
pub mod backup;
pub mod certificates;
pub mod metrics;
pub mod pitr;
pub mod reconcile;
pub mod reseed;
pub mod restore;
pub mod scaling;
pub mod scheduled;
pub mod task;
pub mod upgrade;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use statecraft_shared::cluster_loop::Loops;
use statecraft_shared::runner::Runtime;
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

use crate::api::{MySQLBackup, MySQLCluster, MySQLDatabase, MySQLRestore, MySQLUser};

/// Annotation on a MySQLCluster asking for a switchover to the named pod.
pub const SWITCHOVER_ANNOTATION: &str = "mysql.statecraft.io/switchover-to";

/// Shared by the reconciler and the tasks.
pub struct Context {
    /// The runner's runtime (client, namespace, events, metrics).
    pub rt: Arc<Runtime>,
    /// The servers' metrics, fed by the tasks.
    pub servers: metrics::ServerMetrics,
    /// The clustering tasks, one per cluster, supervised: a panic restarts the task,
    /// with a Warning Event on the cluster.
    loops: Loops<MySQLCluster>,
}

impl Context {
    /// A context whose tasks stop with `shutdown`.
    pub fn new(rt: Arc<Runtime>, shutdown: CancellationToken) -> Result<Self> {
        let servers = metrics::ServerMetrics::register(&rt.namespace_metrics.registry)
            .map_err(|e| Error::Permanent(format!("registering the server metrics: {e}")))?;
        let loops = Loops::new(rt.clone(), shutdown);
        Ok(Context { rt, servers, loops })
    }

    /// Starts the clustering task of `name` (if it is not running for this `uid`) and wakes it.
    pub fn ensure_task(self: &Arc<Self>, name: &str, uid: &str) {
        let ctx = self.clone();
        self.loops.ensure(name, uid, move || task::Clustering::new(ctx.clone()));
    }

    /// Stops the task of `name` (the cluster is being deleted).
    pub fn stop_task(&self, name: &str) {
        self.loops.stop(name);
        self.servers.forget(name);
    }
}

/// Runs the MySQLCluster controller until `shutdown`.
pub async fn run(rt: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
    let client = rt.client.clone();
    let ns = rt.namespace.clone();
    let clusters: Api<MySQLCluster> = Api::namespaced(client.clone(), &ns);
    let owned = watcher::Config::default().labels(&format!("{}={}", crate::build::NAME_LABEL, crate::build::APP_NAME));
    let controller = Controller::new(clusters, watcher::Config::default())
        .owns(Api::<StatefulSet>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<Service>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<ConfigMap>::namespaced(client.clone(), &ns), owned.clone())
        .owns(Api::<PodDisruptionBudget>::namespaced(client, &ns), owned);
    let backups = Controller::new(Api::<MySQLBackup>::namespaced(rt.client.clone(), &ns), watcher::Config::default())
        .owns(Api::<Job>::namespaced(rt.client.clone(), &ns), watcher::Config::default());
    let restores = Controller::new(Api::<MySQLRestore>::namespaced(rt.client.clone(), &ns), watcher::Config::default())
        .owns(Api::<Job>::namespaced(rt.client.clone(), &ns), watcher::Config::default());
    let users = Controller::new(Api::<MySQLUser>::namespaced(rt.client.clone(), &ns), watcher::Config::default());
    let databases =
        Controller::new(Api::<MySQLDatabase>::namespaced(rt.client.clone(), &ns), watcher::Config::default());
    let ctx = Arc::new(Context::new(rt.clone(), shutdown.clone())?);
    tokio::join!(
        rt.run_controller("mysqlcluster", controller, ctx.clone(), reconcile::reconcile, shutdown.clone()),
        rt.run_controller("mysqlbackup", backups, ctx.clone(), backup::reconcile, shutdown.clone()),
        rt.run_controller("mysqlrestore", restores, ctx.clone(), restore::reconcile, shutdown.clone()),
        rt.run_controller("mysqluser", users, ctx.clone(), accounts::reconcile_user, shutdown.clone()),
        rt.run_controller("mysqldatabase", databases, ctx, accounts::reconcile_database, shutdown),
    );
    Ok(())
}
