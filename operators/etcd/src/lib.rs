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
pub mod membership;

use std::sync::Arc;

use kube::CustomResourceExt;
use statecraft_shared::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use statecraft_shared::rbac::Rule;
use statecraft_shared::runner::{Operator, Runtime};
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

use api::{EtcdBackup, EtcdCluster, EtcdRestore};

/// The operator, as the shared runner sees it.
pub struct EtcdOperator;

impl Operator for EtcdOperator {
    const NAME: &'static str = "statecraft-etcd";

    fn crds() -> Vec<CustomResourceDefinition> {
        vec![EtcdCluster::crd(), EtcdBackup::crd(), EtcdRestore::crd()]
    }

    fn rbac_rules() -> Vec<Rule> {
        Vec::new()
    }

    async fn run_controllers(_runtime: Arc<Runtime>, _shutdown: CancellationToken) -> Result<()> {
        Err(Error::Permanent("the etcd controllers are not implemented yet".into()))
    }
}
