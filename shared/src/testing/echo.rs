//! A minimal operator built only from the shared library, used by the library's own tests
//! (leader election between two processes, the steady state, SIGTERM handling), by the
//! cluster checks (in-cluster, with only its namespaced Role) and by `make demo`. It is the
//! smallest honest user of [`crate::runner`]: an `Echo` object asks for a
//! ConfigMap holding its message (and optionally a second one); the operator applies them,
//! deletes the second when no longer asked for, and reports `Ready` with the identity of
//! the replica that reconciled it.

use std::sync::Arc;

use crate::apply::{Applier, OrphanPolicy};
use crate::rbac::Rule;
use crate::reason::Catalogue;
use crate::runner::{Operator, Runtime};
use crate::status::{ConditionType, patch_status, set_condition};
use crate::{Error, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ApiResource, ObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The echo operator's own reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
pub enum Echoed {
    /// The ConfigMap holds the message.
    Applied,
}

impl Catalogue for Echoed {}

/// An object that asks for a ConfigMap holding `message`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "test.statecraft.io",
    version = "v1alpha1",
    kind = "Echo",
    plural = "echoes",
    doc = "A test resource: the echo operator copies its message into a ConfigMap.",
    namespaced,
    status = "EchoStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct EchoSpec {
    /// The message to copy into the ConfigMap; must not be empty.
    pub message: String,
    /// Also create `<name>-extra`.
    #[serde(default)]
    pub extra: bool,
    /// Read by the library's per-cluster loop tests (`ClusterLoop::paused`); the echo
    /// operator's own reconcile ignores it.
    #[serde(default)]
    pub paused: bool,
}

/// Observed state of an Echo.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EchoStatus {
    /// Standard conditions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The operator replica that last changed this status.
    #[serde(default)]
    pub reconciled_by: String,
}

/// The echo operator, as the shared runner sees it.
pub struct EchoOperator;

impl Operator for EchoOperator {
    const NAME: &'static str = "statecraft-echo";

    fn crds() -> Vec<CustomResourceDefinition> {
        vec![Echo::crd()]
    }

    fn rbac_rules() -> Vec<Rule> {
        vec![
            Rule::new("test.statecraft.io", &["echoes"], &["get", "list", "watch"]),
            Rule::new("test.statecraft.io", &["echoes/status"], &["patch"]),
            Rule::new("", &["configmaps"], &["get", "list", "watch", "create", "patch", "delete"]),
        ]
    }

    async fn run_controllers(runtime: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
        let echoes: Api<Echo> = Api::namespaced(runtime.client.clone(), &runtime.namespace);
        let configmaps: Api<ConfigMap> = Api::namespaced(runtime.client.clone(), &runtime.namespace);
        let controller =
            Controller::new(echoes, watcher::Config::default()).owns(configmaps, watcher::Config::default());
        runtime.run_controller("echo", controller, runtime.clone(), reconcile, shutdown).await;
        Ok(())
    }
}

async fn reconcile(echo: Arc<Echo>, rt: Arc<Runtime>) -> Result<Action> {
    let api: Api<Echo> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let generation = echo.metadata.generation;
    let mut status = echo.status.clone().unwrap_or_default();

    // validate (pure)
    if echo.spec.message.is_empty() {
        let err = Error::invalid_spec("spec.message", "must not be empty");
        if set_condition(
            &mut status.conditions,
            ConditionType::Ready,
            false,
            err.reason(),
            &err.to_string(),
            generation,
        ) {
            status.reconciled_by = rt.identity.clone();
        }
        patch_status(&api, &*echo, echo.status.as_ref(), &status, rt.field_manager).await?;
        return Err(err);
    }

    // build (pure)
    let name = echo.name_any();
    let mut desired = vec![config_map(format!("{name}-echo"), &echo.spec.message)];
    if echo.spec.extra {
        desired.push(config_map(format!("{name}-extra"), "extra"));
    }

    // apply, then delete what is no longer desired
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, &*echo, &rt.apply_cache)?;
    for cm in desired {
        applier.apply(cm).await?;
    }
    applier
        .delete_orphans_with_events(&[ApiResource::erase::<ConfigMap>(&())], OrphanPolicy::KeepData, &rt.events)
        .await?;

    // status
    if set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        true,
        Echoed::Applied,
        "the ConfigMap holds the message",
        generation,
    ) {
        status.reconciled_by = rt.identity.clone();
        rt.events.normal(&*echo, Echoed::Applied, "Reconcile", "the ConfigMap holds the message").await;
    }
    patch_status(&api, &*echo, echo.status.as_ref(), &status, rt.field_manager).await?;
    Ok(Action::await_change())
}

fn config_map(name: String, message: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name), ..Default::default() },
        data: Some([("message".to_string(), message.to_string())].into()),
        ..Default::default()
    }
}
