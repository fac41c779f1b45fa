//! The library half of `statecraft-kafka`: the Statecraft Kafka operator.
//!
//! The shared scaffolding (`run`, `crd`, `rbac`, leader election, endpoints) is in
//! place; the Kafka resources and controllers are not written yet, so `crd` prints nothing
//! and `run` stops with an error saying so rather than pretending to manage anything.
// No panics on what a user or the network controls: `make check` (clippy) refuses
// unwrap, expect and panic outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::sync::Arc;

use statecraft_shared::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use statecraft_shared::rbac::Rule;
use statecraft_shared::runner::{Operator, Runtime};
use statecraft_shared::tokio_util::sync::CancellationToken;
use statecraft_shared::{Error, Result};

/// The operator, as the shared runner sees it.
pub struct KafkaOperator;

impl Operator for KafkaOperator {
    const NAME: &'static str = "statecraft-kafka";

    fn crds() -> Vec<CustomResourceDefinition> {
        Vec::new()
    }

    fn rbac_rules() -> Vec<Rule> {
        Vec::new()
    }

    async fn run_controllers(_runtime: Arc<Runtime>, _shutdown: CancellationToken) -> Result<()> {
        Err(Error::Permanent("the Kafka controllers are not implemented yet".into()))
    }
}
