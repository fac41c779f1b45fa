//! The library half of `statecraft-etcd`: the Statecraft etcd operator.
//!
//! - [`api`]: the custom resources of `etcd.statecraft.io/v1alpha1` — `EtcdCluster`,
//!   `EtcdBackup`, `EtcdRestore` — with schema and CEL validation, printer columns and a
//!   description on every field.
//! - [`build`]: names and addresses of a cluster's members, and pure builders of the
//!   objects it owns.
//! - [`membership`]: what a pass observed, and the pure planner of the next membership step.

pub mod api;
pub mod build;
pub mod controller;
pub mod insight;
pub mod jobs;
pub mod membership;
pub mod snapshot;
pub mod validate;

use std::sync::Arc;

use kube::CustomResourceExt;
use statecraft_shared::Result;
use statecraft_shared::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use statecraft_shared::rbac::{CORE_GROUP, Rule};
use statecraft_shared::runner::{Operator, Runtime};
use statecraft_shared::tokio_util::sync::CancellationToken;

use api::{EtcdBackup, EtcdCluster, EtcdRestore, GROUP};

/// Read-only verbs.
const READ: &[&str] = &["get", "list", "watch"];
/// Verbs for objects the controllers own and apply with server-side apply.
const OWN: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// The operator, as the shared runner sees it.
pub struct EtcdOperator;

impl Operator for EtcdOperator {
    const NAME: &'static str = "statecraft-etcd";

    fn crds() -> Vec<CustomResourceDefinition> {
        vec![EtcdCluster::crd(), EtcdBackup::crd(), EtcdRestore::crd()]
    }

    /// What the controllers use, nothing more (Events and Leases are in the base rules):
    /// read the custom resources and patch their status (the restore controller creates
    /// the target cluster, the schedule creates snapshots and deletes expired ones); own the
    /// StatefulSet, Services, membership ConfigMap and PodDisruptionBudget; read pods and
    /// delete them to roll an upgrade or replace a member; delete the data claims of
    /// replaced members; run snapshot Jobs; read the S3 credentials Secret for retention.
    fn rbac_rules() -> Vec<Rule> {
        vec![
            Rule::new(GROUP, &["etcdclusters"], &["get", "list", "watch", "create"]),
            Rule::new(GROUP, &["etcdbackups"], &["get", "list", "watch", "create", "delete"]),
            Rule::new(GROUP, &["etcdrestores"], READ),
            Rule::new(GROUP, &["etcdclusters/status", "etcdbackups/status", "etcdrestores/status"], &["patch"]),
            Rule::new("apps", &["statefulsets"], OWN),
            Rule::new(CORE_GROUP, &["services", "configmaps"], OWN),
            Rule::new(CORE_GROUP, &["secrets"], &["get"]),
            Rule::new("policy", &["poddisruptionbudgets"], OWN),
            Rule::new(CORE_GROUP, &["pods"], &["get", "list", "watch", "delete"]),
            Rule::new(CORE_GROUP, &["persistentvolumeclaims"], &["get", "list", "watch", "delete"]),
            Rule::new("batch", &["jobs"], OWN),
        ]
    }

    async fn run_controllers(runtime: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
        controller::run(runtime, shutdown).await
    }

    /// `backup` (an EtcdBackup's Job) and `restore-member` (the init container of a
    /// restored cluster's pods); see [`jobs`].
    async fn run_job(name: &str) -> Result<()> {
        jobs::run(name).await
    }
}
