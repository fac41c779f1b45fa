//! The clustering task of one cluster, on the shared per-cluster loop
//! ([`statecraft_shared::cluster_loop`]): every second, and at once when woken or after an
//! operation, it gathers the pods and the servers ([`observe`]), decides (pure,
//! [`crate::clustering::decide`]), performs at most one operation and the steps around it
//! ([`act`]), and writes the status ([`report`]). It is the only writer of the status of a
//! valid cluster and of the pods' role labels, so those never race.

mod act;
mod observe;
mod report;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use statecraft_shared::Result;
use statecraft_shared::cluster_loop::{Acted, ClusterLoop, Waits};
use statecraft_shared::upgrade::Action;

use super::{Context, scaling};
use crate::api::{MySQLCluster, MySQLClusterStatus};
use crate::clustering::acks::Acknowledgements;
use crate::clustering::decide::Decision;
use crate::clustering::heal::BrokenClock;
use crate::clustering::pass::Streaks;
use crate::clustering::restarts::Restarts;
use crate::clustering::routes::Routes;

use observe::Observation;

/// Time between passes when nothing happened.
pub const PASS_INTERVAL: Duration = Duration::from_secs(1);

/// How long a replica just configured is given before it is configured again, if it still
/// does not replicate: long enough for a connection attempt, short next to a failover.
const RECONFIGURE_BACKOFF: Duration = Duration::from_secs(5);

/// The clustering task of one cluster and what it remembers between passes.
pub struct Clustering {
    ctx: Arc<Context>,
    memory: Memory,
}

impl Clustering {
    /// A task with empty memory, as after an operator restart.
    pub fn new(ctx: Arc<Context>) -> Self {
        Clustering { ctx, memory: Memory::default() }
    }
}

/// What the task remembers between passes.
#[derive(Default)]
struct Memory {
    streaks: Streaks,
    /// Since when each replica's replication has been broken (for `spec.autoHeal`).
    broken: BrokenClock,
    /// The last backup slot handled by the schedule.
    backup_slot: Option<chrono::DateTime<Utc>>,
    /// The wait last published as an Event.
    waits: Waits,
    /// Each member's recent behaviour, for abnormality detection.
    insight: crate::insight::Monitor,
    /// When each `(replica, source)` pair was last configured (for [`RECONFIGURE_BACKOFF`]).
    configured: BTreeMap<(u32, u32), Instant>,
    /// Read-replica auto-scaling's running case.
    scaler: scaling::Scaler,
    /// The primary's acknowledgements as last reported (Events only on a change).
    acks: Option<Acknowledgements>,
    /// Replicas that restarted and have not caught up since (a failover does not count them).
    restarts: Restarts,
    /// When each member was last listed by the read-write Service's EndpointSlices.
    routes: Routes,
    /// When each pod being deleted was first seen so (by uid), for the hand-over's start.
    terminating_since: BTreeMap<String, Instant>,
    /// The growth of the data volumes to `spec.storage.size`.
    growth: statecraft_shared::statefulset::growth::Growth,
    /// When the servers' certificates were last compared with the Secret's.
    tls_checked: Option<Instant>,
}

impl ClusterLoop for Clustering {
    type Cluster = MySQLCluster;
    type Status = MySQLClusterStatus;
    type Observation = Observation;
    type Decision = Decision;
    /// The rolling upgrade's step, if one was taken.
    type Done = Option<Action>;

    const NAME: &'static str = "clustering";
    const INTERVAL: Duration = PASS_INTERVAL;

    fn paused(cluster: &MySQLCluster) -> bool {
        cluster.spec.paused
    }

    async fn observe(&mut self, cluster: &MySQLCluster) -> Result<Option<Observation>> {
        observe::observe(&self.ctx, cluster, &mut self.memory).await
    }

    fn decide(&self, _cluster: &MySQLCluster, observation: &Observation) -> Decision {
        observation.decide()
    }

    async fn act(
        &mut self,
        cluster: &MySQLCluster,
        observation: &Observation,
        decision: &Decision,
        status: &mut MySQLClusterStatus,
    ) -> Result<Acted<Option<Action>>> {
        act::act(&self.ctx, cluster, observation, decision, &mut self.memory, status).await
    }

    async fn report(
        &mut self,
        cluster: &MySQLCluster,
        observation: &Observation,
        decision: &Decision,
        roll: &Option<Action>,
        status: &mut MySQLClusterStatus,
    ) -> Result<()> {
        report::report(&self.ctx, cluster, observation, decision, roll.as_ref(), &mut self.memory, status).await;
        Ok(())
    }

    fn forget(&self, cluster: &str) {
        self.ctx.servers.forget(cluster);
    }
}
