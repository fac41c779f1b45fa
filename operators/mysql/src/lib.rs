//! The library half of `statecraft-mysql`: the Statecraft MySQL operator.
//!
//! The shared scaffolding (`run`, `crd`, `rbac`, leader election, endpoints) is in
//! place; the MySQL resources and controllers are not written yet, so `crd` prints nothing
//! and `run` stops with an error saying so rather than pretending to manage anything.

use std::sync::Arc;

use statecraft_shared::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use statecraft_shared::rbac::Rule;
use statecraft_shared::runner::{Operator, Runtime};
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

/// The operator, as the shared runner sees it.
pub struct MysqlOperator;

impl Operator for MysqlOperator {
    const NAME: &'static str = "statecraft-mysql";

    fn crds() -> Vec<CustomResourceDefinition> {
        Vec::new()
    }

    fn rbac_rules() -> Vec<Rule> {
        Vec::new()
    }

    async fn run_controllers(_runtime: Arc<Runtime>, _shutdown: CancellationToken) -> Result<()> {
        Err(Error::Permanent("the MySQL controllers are not implemented yet".into()))
    }
}
