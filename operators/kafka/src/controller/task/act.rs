//! What a pass does, in this order: marks pods ready or not (their readiness gate), applies
//! the cluster-wide dynamic configuration (no restart), elects preferred leaders once a
//! restarted broker is back, finalizes metadata.version once a version change has rolled,
//! and takes one step of a roll of a new pod revision behind Kafka's gates (`crate::roll`).

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use statecraft_shared::cluster_loop::{Acted, Next};
use statecraft_shared::reason::Common;
use statecraft_shared::rebuild::delete_if_present;
use statecraft_shared::status::set_custom_condition;
use statecraft_shared::upgrade::{Action, next_step};
use statecraft_shared::{Error, Result};
use tracing::{info, warn};

use super::super::Context;
use super::decide::{Decision, Finalize};
use super::observe::{Observation, Pool};
use super::{Memory, Rolled};
use crate::admin::Admin;
use crate::api::{KafkaCluster, KafkaClusterStatus};
use crate::build;
use crate::observed::{ConfigChange, ConfigResource};
use crate::reason::Kafka;
use crate::roll;
use crate::roll::stall;

/// The condition that says whether Kafka took the spec's cluster-wide configuration.
const CONFIGURATION_APPLIED: &str = "ConfigurationApplied";

/// How long an admin call of `act` may take.
const ADMIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Carries out the decision (see the module doc). Returns whether to pass again at once and
/// the roll's step.
pub async fn act(
    ctx: &Context,
    cluster: &KafkaCluster,
    o: &Observation,
    decision: &Decision,
    memory: &mut Memory,
    status: &mut KafkaClusterStatus,
) -> Result<Acted<Option<Rolled>>> {
    let mut next = Next::Later;
    for (pod, serving) in &decision.gates {
        match set_gate(ctx, pod, *serving).await {
            Ok(()) => next = Next::Now,
            Err(e) => warn!(%pod, error = %e, "setting the readiness gate failed"),
        }
    }
    if o.valid.is_none() {
        return Ok(Acted { next, done: None });
    }
    memory.refused_config.retain(|(change, _)| decision.config.contains(change));
    let changes: Vec<ConfigChange> =
        decision.config.iter().filter(|c| !memory.refused_config.iter().any(|(r, _)| r == *c)).cloned().collect();
    if !changes.is_empty() {
        match apply_config(ctx, cluster, o, &changes).await {
            Ok(refused) => {
                memory.refused_config.extend(refused);
                next = Next::Now;
            }
            Err(e) => {
                warn!(error = %e, "applying the cluster-wide configuration failed");
                ctx.rt
                    .events
                    .warning(cluster, e.reason(), "Reconfigure", format!("cluster-wide configuration not applied: {e}"))
                    .await;
            }
        }
    }
    report_refusals(&memory.refused_config, cluster, status);
    if !decision.elect.is_empty() {
        match elect_preferred(ctx, cluster, o, &decision.elect).await {
            Ok(()) => next = Next::Now,
            Err(e) => warn!(error = %e, "preferred leader election failed"),
        }
    }
    if let Some(finalize) = decision.finalize {
        match finalize_metadata(ctx, cluster, o, finalize).await {
            Ok(()) => {
                memory.finalize_failure = None;
                next = Next::Now;
            }
            Err(e) => {
                warn!(error = %e, "finalizing metadata.version failed");
                let message = format!("metadata.version not raised to {}: {e}", level_name(finalize.to));
                // One Event per failure, not one a pass.
                if memory.finalize_failure.as_ref() != Some(&message) {
                    ctx.rt.events.warning(cluster, e.reason(), "Finalize", message.clone()).await;
                    memory.finalize_failure = Some(message);
                }
            }
        }
    }
    let Some(snapshot) = &decision.snapshot else {
        // Kafka did not say enough this pass to gate a restart: no roll step.
        return Ok(Acted { next, done: None });
    };
    let (rolled, again) = statecraft_shared::upgrade::taken(
        roll_step(ctx, cluster, snapshot, memory, status).await,
        &cluster_name(cluster),
    );
    if again {
        next = Next::Now;
    }
    Ok(Acted { next, done: rolled })
}

fn cluster_name(cluster: &KafkaCluster) -> String {
    kube::ResourceExt::name_any(cluster)
}

/// Sets the readiness gate of `pod` (a condition in its status: the pod is Ready only while
/// the operator says its node serves).
async fn set_gate(ctx: &Context, pod: &str, serving: bool) -> Result<()> {
    let rt = &ctx.rt;
    rt.leadership.check()?;
    let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let condition = json!({
        "type": build::RUNNING_CONDITION,
        "status": if serving { "True" } else { "False" },
        "reason": if serving { "NodeServing" } else { "NodeNotServing" },
        "lastTransitionTime": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    let patch = json!({ "status": { "conditions": [condition] } });
    pods.patch_status(pod, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(|e| Error::kube(format!("setting the readiness gate of pod {pod}"), e))?;
    info!(%pod, serving, "readiness gate set");
    Ok(())
}

/// A running broker's address (pod IP and the internal port).
fn broker_address(o: &Observation) -> Option<String> {
    let port = o.valid.as_ref()?.spec.listeners.internal.port;
    o.pods
        .values()
        .filter(|p| matches!(p.pool, Pool::Broker | Pool::Combined) && p.container_ready && !p.terminating)
        .find_map(|p| p.ip.as_ref().map(|ip| format!("{ip}:{port}")))
}

/// An admin connection to a running broker, for `purpose` (said in the error when none runs),
/// once this replica is still the leader.
async fn broker_admin(ctx: &Context, o: &Observation, purpose: &str) -> Result<Admin> {
    let address = broker_address(o).ok_or_else(|| Error::DataPlane {
        system: "kafka".into(),
        message: format!("no broker is running to {purpose}"),
    })?;
    ctx.rt.leadership.check()?;
    Ok(Admin::connect(&address, ADMIN_TIMEOUT).await?)
}

/// Applies the cluster-wide dynamic `changes` with IncrementalAlterConfigs: every broker
/// takes them at once, none restarts. Returns those Kafka refused, with its answer, after a
/// Warning Event naming them; the others are applied. A refused value never reaches a node
/// any other way: the nodes' properties files leave these keys out, and a node that starts
/// takes the cluster-wide values from the metadata log, where only accepted ones are.
async fn apply_config(
    ctx: &Context,
    cluster: &KafkaCluster,
    o: &Observation,
    changes: &[ConfigChange],
) -> Result<Vec<(ConfigChange, String)>> {
    let admin = broker_admin(ctx, o, "apply the configuration to").await?;
    let refused = admin.alter_each(&ConfigResource::ClusterDefault, changes).await?;
    let applied: Vec<String> =
        changes.iter().filter(|c| !refused.iter().any(|(r, _)| r == *c)).map(|c| format!("{c:?}")).collect();
    if !applied.is_empty() {
        let message = format!("cluster-wide configuration applied without a restart: {}", applied.join(", "));
        ctx.rt.events.normal(cluster, Kafka::Reconfigured, "Reconfigure", message).await;
    }
    let refused: Vec<(ConfigChange, String)> = refused.into_iter().map(|(c, e)| (c, e.to_string())).collect();
    if !refused.is_empty() {
        let message =
            format!("cluster-wide configuration refused by Kafka, not applied: {}", describe_refusals(&refused));
        warn!(%message, "configuration refused");
        ctx.rt.events.warning(cluster, Kafka::ConfigurationRefused, "Reconfigure", message).await;
    }
    Ok(refused)
}

/// Each refused change's key and Kafka's answer.
fn describe_refusals(refused: &[(ConfigChange, String)]) -> String {
    refused.iter().map(|(c, answer)| format!("spec.config.{}: {answer}", c.key())).collect::<Vec<_>>().join("; ")
}

/// The `ConfigurationApplied` condition: false while Kafka refuses a value the spec asks
/// for, naming the keys.
fn report_refusals(refused: &[(ConfigChange, String)], cluster: &KafkaCluster, status: &mut KafkaClusterStatus) {
    let generation = cluster.metadata.generation;
    let c = &mut status.conditions;
    if refused.is_empty() {
        let message = "Kafka took every cluster-wide configuration value of the spec";
        set_custom_condition(c, CONFIGURATION_APPLIED, true, Common::AsExpected, message, generation);
    } else {
        let message = describe_refusals(refused);
        set_custom_condition(c, CONFIGURATION_APPLIED, false, Kafka::ConfigurationRefused, &message, generation);
    }
}

/// Gives `partitions` their preferred leader back (ElectLeaders, PREFERRED): a broker that
/// came back takes its leadership back, else the leaders pile up on the brokers restarted
/// last.
async fn elect_preferred(
    ctx: &Context,
    cluster: &KafkaCluster,
    o: &Observation,
    partitions: &[(String, i32)],
) -> Result<()> {
    let admin = broker_admin(ctx, o, "elect leaders on").await?;
    admin.elect_preferred_leaders(Some(partitions)).await?;
    let message = format!("preferred leaders elected for {} partition(s)", partitions.len());
    ctx.rt.events.normal(cluster, Kafka::ElectLeaders, "Rebalance", message).await;
    Ok(())
}

/// Raises the finalized metadata.version (UpdateFeatures): the new release's metadata
/// records and behaviour take effect, and from then on a downgrade below that release is
/// refused (`validate::check_version_change`).
async fn finalize_metadata(ctx: &Context, cluster: &KafkaCluster, o: &Observation, finalize: Finalize) -> Result<()> {
    let admin = broker_admin(ctx, o, "finalize metadata.version on").await?;
    admin.update_feature(crate::metadata_version::FEATURE, finalize.to).await?;
    let message = format!(
        "metadata.version finalized: {} -> {}; versions older than its release are refused from now on",
        level_name(finalize.from),
        level_name(finalize.to)
    );
    info!(from = finalize.from, to = finalize.to, "metadata.version finalized");
    ctx.rt.events.normal(cluster, Kafka::MetadataVersionFinalized, "Finalize", message).await;
    Ok(())
}

/// A metadata.version level by its name, or its number when the table does not know it.
fn level_name(level: i16) -> String {
    crate::metadata_version::name(level).map_or_else(|| format!("level {level}"), str::to_owned)
}

/// Whether the roll's `action` is a wait, whose Event says what `report` says, and if so
/// whether that Event is a Warning: a closed gate, or any wait past its deadline, is; a node
/// not back yet from its restart is not.
fn wait_event(action: &Action, report: &stall::Report) -> Option<bool> {
    match action {
        Action::Blocked { .. } => Some(true),
        Action::WaitFor { .. } => Some(report.stalled_for.is_some()),
        Action::Restart { .. } | Action::Replan { .. } | Action::Done => None,
    }
}

/// One step of the roll: the shared engine over Kafka's order and gates.
async fn roll_step(
    ctx: &Context,
    cluster: &KafkaCluster,
    snapshot: &roll::Snapshot,
    memory: &mut Memory,
    status: &mut KafkaClusterStatus,
) -> Result<Option<(Rolled, bool)>> {
    let rt = &ctx.rt;
    let members = snapshot.members();
    let in_progress =
        status.upgrade.as_ref().is_some_and(|p| p.completed_at.is_none() && !p.target_revision.is_empty());
    if !in_progress && !members.iter().any(|m| m.needs_restart()) {
        return Ok(None);
    }
    let gates = roll::Gates { snapshot };
    let mut progress = status.upgrade.clone().unwrap_or_default();
    let step = next_step(&members, &gates, &progress).await?;
    if let Action::Restart { member } = &step.action {
        rt.leadership.check()?;
        let pods: Api<Pod> = Api::namespaced(rt.client.clone(), &rt.namespace);
        delete_if_present(&pods, member).await?;
        let note = format!("restarting {member} on the new revision");
        rt.events.normal_about_pod(cluster, member, Common::RestartMember, "Upgrade", note).await;
    }
    let again = matches!(step.action, Action::Replan { .. } | Action::Restart { .. });
    let now = Utc::now();
    progress.advance(&step, now);
    let report = stall::report(&step.action, &progress, now, stall::STALL_AFTER);
    // A wait is one Event when it begins, and one more if it outlasts its deadline, not one
    // a pass.
    match wait_event(&step.action, &report) {
        Some(warning) => memory.waits.publish(&rt.events, cluster, report.reason, &report.message, warning).await,
        None => memory.waits.clear(),
    }
    status.upgrade = Some(progress);
    Ok(Some((Rolled { action: step.action, report }, again)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use statecraft_shared::reason::Common;

    use super::*;

    fn report(stalled_for: Option<Duration>) -> stall::Report {
        let reason = if stalled_for.is_some() { Kafka::RollStalled.into() } else { Common::MemberNotReady.into() };
        stall::Report { reason, message: "m".into(), stalled_for }
    }

    #[test]
    fn a_closed_gate_or_a_stalled_wait_is_a_warning_a_node_coming_back_is_not() {
        let blocked = Action::Blocked {
            member: "k-broker-1".into(),
            reason: Kafka::WouldDropBelowMinIsr.into(),
            message: "m".into(),
        };
        let wait =
            Action::WaitFor { member: "k-broker-0".into(), reason: Common::MemberNotReady.into(), message: "m".into() };
        assert_eq!(wait_event(&blocked, &report(None)), Some(true));
        assert_eq!(wait_event(&wait, &report(None)), Some(false));
        assert_eq!(wait_event(&wait, &report(Some(Duration::from_secs(301)))), Some(true));
        assert_eq!(wait_event(&Action::Restart { member: "k-broker-0".into() }, &report(None)), None);
        assert_eq!(wait_event(&Action::Done, &report(None)), None);
    }
}
