//! The declarative reconcile of one KafkaCluster: read → validate (pure) → build (pure) →
//! apply the ConfigMap, the Services, the StatefulSets and the PodDisruptionBudgets → make
//! sure the per-cluster task runs. Pods are the task's: the StatefulSets roll `OnDelete`, so a
//! pod changes revision only when the task's roll deletes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ApiResource;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::{Applier, OrphanPolicy};
use statecraft_shared::status::report_invalid_spec;
use statecraft_shared::{Error, Result};

use super::Context;
use crate::api::KafkaCluster;
use crate::build;
use crate::names::Names;
use crate::validate::{ValidCluster, check_version_change, parse_version, validate};

/// How often a cluster is reconciled without any change (drift correction).
const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);

/// Validates the name and the spec, and the version change against the version the nodes
/// last converged on (`status.observedVersion`).
pub fn check(cluster: &KafkaCluster) -> Result<ValidCluster> {
    crate::validate::validate_name(&cluster.name_any())?;
    let valid = validate(&cluster.spec)?;
    let status = cluster.status.as_ref();
    let observed = status.and_then(|s| s.observed_version.as_deref()).and_then(parse_version);
    if let Some(running) = observed {
        check_version_change(&running, &valid.version, status.and_then(|s| s.finalized_metadata_version.as_deref()))?;
    }
    Ok(valid)
}

/// What the builders need from outside the spec: the cluster id (kept in status once seen,
/// else derived from the resource's uid), whether the quorum was bootstrapped
/// (`status.quorumBootstrapped`; a status from before that field: a cluster id in it), and the
/// external address of each broker known so far (`external`: the external Services as the
/// API server has them, by ordinal).
pub fn inputs(
    cluster: &KafkaCluster,
    valid: &ValidCluster,
    external: &BTreeMap<i32, Service>,
) -> Result<build::Inputs> {
    let bootstrapped = cluster.status.as_ref().is_some_and(|s| s.quorum_bootstrapped.unwrap_or(s.cluster_id.is_some()));
    let cluster_id = cluster_id(cluster)?;
    let external_addresses = (0..valid.spec.listeners.external.as_ref().map_or(0, |_| valid.layout.brokers()))
        .filter_map(|ordinal| {
            build::services::external_address(valid, ordinal, external.get(&ordinal)).map(|a| (ordinal, a))
        })
        .collect();
    Ok(build::Inputs { cluster_id, bootstrapped, external_addresses })
}

/// Kafka's cluster id of `cluster`: `status.clusterId` once seen, else derived from the uid.
pub fn cluster_id(cluster: &KafkaCluster) -> Result<String> {
    match cluster.status.as_ref().and_then(|s| s.cluster_id.clone()) {
        Some(id) => Ok(id),
        None => build::ids::cluster_id(&cluster.uid().unwrap_or_default()),
    }
}

/// The external Services of `cluster` the API server has, by ordinal: their node ports
/// and load balancer addresses are what the brokers advertise.
async fn external_services(
    ctx: &Context,
    cluster: &KafkaCluster,
    valid: &ValidCluster,
) -> Result<BTreeMap<i32, Service>> {
    let mut found = BTreeMap::new();
    if valid.spec.listeners.external.is_none() {
        return Ok(found);
    }
    let names = Names::new(cluster.name_any(), ctx.rt.namespace.clone());
    let services: Api<Service> = Api::namespaced(ctx.rt.client.clone(), &ctx.rt.namespace);
    for ordinal in 0..valid.layout.brokers() {
        let name = names.external_service(u32::try_from(ordinal).unwrap_or_default());
        let service = services.get_opt(&name).await.map_err(|e| Error::kube("reading an external Service", e))?;
        if let Some(service) = service {
            found.insert(ordinal, service);
        }
    }
    Ok(found)
}

/// Reconciles one cluster.
pub async fn reconcile(cluster: Arc<KafkaCluster>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let name = cluster.name_any();
    if cluster.metadata.deletion_timestamp.is_some() {
        // Children go with their owner references; the data claims are kept (the
        // StatefulSets' claims are never deleted with them), so deleting a cluster never
        // deletes data.
        ctx.stop_task(&name);
        return Ok(Action::await_change());
    }
    let valid = match check(&cluster) {
        Ok(v) => v,
        Err(err) => {
            report_invalid_spec(rt, &*cluster, |s| &mut s.conditions, &err).await?;
            // The task keeps watching the nodes but changes nothing.
            if let Some(uid) = cluster.metadata.uid.as_deref() {
                ctx.ensure_task(&name, uid);
            }
            return Err(err);
        }
    };
    let external = external_services(&ctx, &cluster, &valid).await?;
    let objects = build::objects(&cluster, &valid, &inputs(&cluster, &valid, &external)?)?;
    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, &*cluster, &rt.apply_cache)?;
    applier.apply(objects.config_map).await?;
    for pool in objects.pools {
        applier.apply(pool.headless_service).await?;
        applier.apply(pool.statefulset).await?;
        applier.apply(pool.pdb).await?;
    }
    applier.apply(objects.bootstrap_service).await?;
    for service in objects.external_services {
        applier.apply(service).await?;
    }
    // A pool that is gone (never, as the layout cannot change) or an external Service of a
    // broker that is gone is deleted; data claims are kept.
    let kinds = [
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<StatefulSet>(&()),
    ];
    applier.delete_orphans_with_events(&kinds, OrphanPolicy::KeepData, &rt.events).await?;
    if let Some(uid) = cluster.metadata.uid.as_deref() {
        ctx.ensure_task(&name, uid);
    }
    Ok(Action::requeue(RESYNC))
}
