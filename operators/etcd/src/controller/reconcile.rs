//! The declarative reconcile of one EtcdCluster: read → validate (pure) → build (pure) →
//! apply the Services and the PodDisruptionBudget → make sure the membership task runs.
//! The StatefulSet and the membership ConfigMap are the task's: their content follows
//! etcd's member list, which only the task observes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::ApiResource;
use kube::runtime::controller::Action;
use statecraft_shared::Result;
use statecraft_shared::apply::{Applier, OrphanPolicy};
use statecraft_shared::s3::check_credentials;
use statecraft_shared::status::report_invalid_spec;

use super::Context;
use crate::api::EtcdCluster;
use crate::build::{Names, network_policy, pdb, services};
use crate::validate::{ValidSpec, check_version_change, parse_version, validate, validate_name};

/// How often a cluster is reconciled without any change (drift correction).
const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);

/// Validates the name and the spec, and the version change against the version the
/// members last converged on (`status.observedVersion`).
pub fn check(cluster: &EtcdCluster) -> Result<ValidSpec> {
    validate_name(&cluster.name_any())?;
    let valid = validate(&cluster.spec)?;
    let observed = cluster.status.as_ref().and_then(|s| s.observed_version.as_deref()).and_then(parse_version);
    if let Some(running) = observed {
        check_version_change(&running, &valid.version)?;
    }
    Ok(valid)
}

/// A cluster still to be bootstrapped from a snapshot gives its first pod the snapshot
/// store's Secret: only one that opted in (see `statecraft_shared::s3::refusal`). The
/// membership task makes the same check before it creates the StatefulSet.
pub async fn bootstrap_credentials(cluster: &EtcdCluster, valid: &ValidSpec, ctx: &Context) -> Result<()> {
    let bootstrapped = cluster.status.as_ref().is_some_and(|s| s.observed_version.is_some());
    match &valid.spec.bootstrap_from {
        Some(source) if !bootstrapped => {
            let rt = &ctx.rt;
            check_credentials(
                rt.client.clone(),
                &rt.namespace,
                &source.store,
                "spec.bootstrapFrom.store.credentialsSecret",
            )
            .await
        }
        _ => Ok(()),
    }
}

/// Reconciles one cluster.
pub async fn reconcile(cluster: Arc<EtcdCluster>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let name = cluster.name_any();
    if cluster.metadata.deletion_timestamp.is_some() {
        // Children go with their owner references; the data claims are retained
        // (whenDeleted: Retain), so deleting a cluster never deletes data.
        ctx.stop_task(&name);
        return Ok(Action::await_change());
    }
    let checked = match check(&cluster) {
        Ok(v) => bootstrap_credentials(&cluster, &v, &ctx).await.map(|()| v),
        Err(e) => Err(e),
    };
    let valid = match checked {
        Ok(v) => v,
        Err(err) => {
            report_invalid_spec(rt, &*cluster, |s| &mut s.conditions, &err).await?;
            // The task keeps watching the members (quorum, alarms) but changes nothing.
            if let Some(uid) = cluster.metadata.uid.as_deref() {
                ctx.ensure_task(&name, uid);
            }
            return Err(err);
        }
    };
    let names = Names::new(&name, &rt.namespace);
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, &*cluster, &rt.apply_cache)?;
    applier.apply(services::peer_service(&names)).await?;
    applier.apply(services::client_service(&names)).await?;
    applier.apply(pdb::pdb(&names, valid.spec.replicas as u32)).await?;
    // Without spec.networkPolicy, none: an earlier one goes with the orphans below.
    if let Some(policy) = network_policy::network_policy(valid.spec.network_policy.as_ref(), &names) {
        applier.apply(policy).await?;
    }
    let kinds = [
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
    ];
    applier.delete_orphans_with_events(&kinds, OrphanPolicy::KeepData, &rt.events).await?;
    if let Some(uid) = cluster.metadata.uid.as_deref() {
        ctx.ensure_task(&name, uid);
    }
    Ok(Action::requeue(RESYNC))
}
