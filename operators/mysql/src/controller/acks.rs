//! Reports the primary's acknowledgements (see [`crate::clustering::acks`]) every pass:
//! the `SemiSync` condition, the `primary_semi_sync_active` metric (which the critical
//! `MySQLSemiSyncFellBack` alert reads), and an Event when it changes.

use kube::ResourceExt;
use statecraft_shared::status::{remove_condition, set_custom_condition};
use tracing::{info, warn};

use super::Context;
use crate::api::{MySQLCluster, MySQLClusterStatus};
use crate::build::Names;
use crate::clustering::acks::Acknowledgements;
use crate::reason::MySql;

/// The condition's type.
pub const CONDITION: &str = "SemiSync";

/// Publishes `now`; `last` is what the previous pass published (Events only on a change).
pub async fn report(
    ctx: &Context,
    cluster: &MySQLCluster,
    now: Acknowledgements,
    last: &mut Option<Acknowledgements>,
    status: &mut MySQLClusterStatus,
) {
    let name = cluster.name_any();
    let names = Names::new(&name, &ctx.rt.namespace);
    let generation = cluster.metadata.generation;
    ctx.servers.acknowledgements(&name, now);
    match now {
        Acknowledgements::NotExpected => {
            remove_condition(&mut status.conditions, CONDITION);
        }
        Acknowledgements::Starting => {}
        Acknowledgements::Waiting { primary } => {
            let message = format!("primary {} acknowledges a commit only once a replica has it", names.pod(primary));
            set_custom_condition(&mut status.conditions, CONDITION, true, MySql::Acknowledging, &message, generation);
            if matches!(last, Some(Acknowledgements::FellBack { .. })) {
                info!(cluster = %name, "semi-sync acknowledgements are back");
                ctx.rt.events.normal(cluster, MySql::Acknowledging, "Replication", message).await;
            }
        }
        Acknowledgements::FellBack { primary } => {
            let message = format!(
                "primary {} fell back to asynchronous replication (no replica acknowledged within \
                 spec.semiSync.timeoutSeconds): commits it acknowledges now may be lost in a failover \
                 until a replica catches up",
                names.pod(primary)
            );
            set_custom_condition(
                &mut status.conditions,
                CONDITION,
                false,
                MySql::FellBackToAsync,
                &message,
                generation,
            );
            if !matches!(last, Some(Acknowledgements::FellBack { .. })) {
                warn!(cluster = %name, "{message}");
                ctx.rt.events.warning(cluster, MySql::FellBackToAsync, "Replication", message).await;
            }
        }
    }
    if now != Acknowledgements::Starting {
        *last = Some(now);
    }
}
