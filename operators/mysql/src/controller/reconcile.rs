//! The declarative reconcile of one MySQLCluster: read → validate (pure) → build (pure) →
//! apply, the clustering task started first. It never talks to the servers and never
//! writes the status except to report an invalid spec: the clustering task owns the status.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ApiResource;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use statecraft_shared::apply::{Applier, OrphanPolicy};
use statecraft_shared::statefulset::growth::keep_claim_size;
use statecraft_shared::status::report_invalid_spec;
use statecraft_shared::{Error, Result};
use tracing::info;

use super::{Context, certificates};
use crate::api::MySQLCluster;
use crate::build::secret::{Passwords, secret};
use crate::build::{Names, config, network_policy, ordinal_of, pdb, services, statefulset};
use crate::validate::{check_version_change, validate, validate_name};

/// How often a cluster is reconciled without any change (drift correction).
const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);

/// Reconciles one cluster.
pub async fn reconcile(cluster: Arc<MySQLCluster>, ctx: Arc<Context>) -> Result<Action> {
    let rt = &ctx.rt;
    let name = cluster.name_any();
    if cluster.metadata.deletion_timestamp.is_some() {
        // Children go with their owner references; the data volumes stay (StatefulSet claims
        // have no owner), so deleting a cluster never deletes data.
        ctx.stop_task(&name);
        return Ok(Action::await_change());
    }
    // The clustering task first: it needs nothing applied here once the cluster exists (it
    // waits for the password Secret of a new one), and an operator that has just taken the
    // Lease over from a dead leader must not spend its first second on applies while the
    // primary may be down. It also looks after the servers of a cluster whose spec became
    // invalid: a failover cannot wait for a typo to be fixed.
    if let Some(uid) = cluster.metadata.uid.as_deref() {
        ctx.ensure_task(&name, uid);
    }
    // Downgrades are refused against the version the servers last converged on.
    let observed_version = cluster.status.as_ref().and_then(|s| s.observed_version.clone());
    let checked = validate_name(&name).and_then(|()| validate(&cluster.spec)).and_then(|v| match &observed_version {
        Some(observed) => check_version_change(v.spec.flavor, observed, &v.version).map(|()| v),
        None => Ok(v),
    });
    let valid = match checked {
        Ok(v) => v,
        Err(err) => {
            report_invalid_spec(rt, &*cluster, |s| &mut s.conditions, &err).await?;
            return Err(err);
        }
    };
    let names = Names::new(&name, &rt.namespace);

    // The passwords are generated once and then read back: the servers hold them.
    let secrets: Api<Secret> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let existing = secrets.get_opt(&names.secret()).await.map_err(|e| Error::kube("reading the password Secret", e))?;
    let passwords = match existing.as_ref() {
        Some(s) => Passwords::from_secret(s)
            .ok_or_else(|| {
                Error::Permanent(format!(
                    "Secret {} lacks a password key; restore it from a backup (the servers hold these passwords)",
                    names.secret()
                ))
            })?
            .complete(&mut rand::rng()),
        None => {
            info!(cluster = %name, "generating passwords");
            Passwords::generate(&mut rand::rng())
        }
    };

    let mut applier = Applier::new(rt.client.clone(), rt.field_manager, &*cluster, &rt.apply_cache)?;
    applier.apply(secret(&names, &passwords)).await?;
    applier.apply(config::config_map(&valid, &names)).await?;
    applier.apply(services::headless_service(&names)).await?;
    applier.apply(services::read_write_service(&valid, &names)).await?;
    applier.apply(services::read_only_service(&valid, &names)).await?;
    applier.apply(pdb::pdb(&names)).await?;
    // Without spec.networkPolicy, none: an earlier one goes with the orphans below.
    if let Some(policy) = network_policy::network_policy(&valid, &names) {
        applier.apply(policy).await?;
    }
    // The certificate before the pods that mount it.
    if let Some(tls) = &valid.spec.tls
        && let Err(err) = certificates::ensure(rt, &cluster, tls, &names, &mut applier).await
    {
        if matches!(err, Error::InvalidSpec { .. }) {
            report_invalid_spec(rt, &*cluster, |s| &mut s.conditions, &err).await?;
        }
        return Err(err);
    }
    let mut sts = statefulset::statefulset(&valid, &names);
    if let Some(spec) = sts.spec.as_mut()
        && !cluster.spec.stopped
    {
        // With auto-scaling, the count it decided (in status), not `spec.replicas`. Never
        // remove the primary's pod by scaling down: the clustering task first moves the
        // primary to a lower ordinal, then the StatefulSet shrinks.
        let wanted = crate::autoscale::replicas(&cluster);
        spec.replicas = Some(recorded_primary(&cluster).map_or(wanted, |p| wanted.max(p as i32 + 1)));
    }
    // Kubernetes refuses a change to the claim template: a larger size grows the claims
    // (the clustering task), the template keeps the size the cluster was created with.
    let statefulsets: Api<StatefulSet> = Api::namespaced(rt.client.clone(), &rt.namespace);
    if let Some(existing) =
        statefulsets.get_opt(&names.set().statefulset()).await.map_err(|e| Error::kube("reading the StatefulSet", e))?
    {
        keep_claim_size(&mut sts, existing);
    }
    applier.apply(sts).await?;
    // The password Secret is always desired while the cluster exists (and the Role has no
    // list on Secrets): it is not looked for among the orphans.
    let kinds = [
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
        ApiResource::erase::<StatefulSet>(&()),
    ];
    applier.delete_orphans_with_events(&kinds, OrphanPolicy::KeepData, &rt.events).await?;

    // Woken again: what was applied (a new StatefulSet revision, a new pod count) is its
    // to act on.
    if let Some(uid) = cluster.metadata.uid.as_deref() {
        ctx.ensure_task(&name, uid);
    }
    Ok(Action::requeue(RESYNC))
}

/// The ordinal of the primary recorded in status.
pub fn recorded_primary(cluster: &MySQLCluster) -> Option<u32> {
    ordinal_of(&cluster.name_any(), cluster.status.as_ref()?.current_primary.as_deref()?)
}
