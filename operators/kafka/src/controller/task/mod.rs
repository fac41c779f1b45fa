//! The per-cluster task of one KafkaCluster, on the shared per-cluster loop
//! ([`statecraft_shared::cluster_loop`]): every few seconds, and at once when woken or after a
//! step, it observes the node pods (Kubernetes) and the nodes (Kafka's admin API)
//! ([`observe`]), decides what to change ([`decide`], pure), carries it out ([`act`]: readiness
//! gates, cluster-wide dynamic configuration, one step of a roll) and writes the status
//! ([`report`]). It is the only writer of the pods and of the status of a valid cluster.

mod act;
mod decide;
mod observe;
mod report;

use std::sync::Arc;
use std::time::Duration;

use statecraft_shared::Result;
use statecraft_shared::cluster_loop::{Acted, ClusterLoop, Waits};
use statecraft_shared::upgrade::Action;

use super::Context;
use crate::api::{KafkaCluster, KafkaClusterStatus};
use crate::roll::stall;

pub use decide::Decision;
pub use observe::{NodePod, Observation, Pool, REVISION_LABEL};

/// Time between passes when nothing happened.
pub const PASS_INTERVAL: Duration = Duration::from_secs(3);

/// The task of one cluster and what it remembers between passes.
pub struct Nodes {
    ctx: Arc<Context>,
    memory: Memory,
}

impl Nodes {
    /// A task with empty memory, as after an operator restart.
    pub fn new(ctx: Arc<Context>) -> Self {
        Nodes { ctx, memory: Memory::default() }
    }
}

/// The roll's step of a pass: the engine's action and what the Progressing condition and
/// the wait's Event say of it ([`stall::report`]: a wait past its deadline is `RollStalled`).
pub struct Rolled {
    /// The engine's action.
    pub action: Action,
    /// What it is reported as.
    pub report: stall::Report,
}

/// What the task remembers between passes.
#[derive(Default)]
struct Memory {
    /// The wait last published as an Event.
    waits: Waits,
    /// The last failure to finalize metadata.version published as an Event.
    finalize_failure: Option<String>,
    /// Cluster-wide configuration changes Kafka refused, with its answer: not sent again
    /// while the spec asks for them (each pass would be refused the same), forgotten once it
    /// no longer does.
    refused_config: Vec<(crate::observed::ConfigChange, String)>,
    /// The metadata log directory id last seen for each node: another one later means its
    /// storage was replaced (a Warning Event).
    directories: std::collections::BTreeMap<i32, String>,
}

impl ClusterLoop for Nodes {
    type Cluster = KafkaCluster;
    type Status = KafkaClusterStatus;
    type Observation = Observation;
    type Decision = Decision;
    /// The roll's step, if one was taken.
    type Done = Option<Rolled>;

    const NAME: &'static str = "nodes";
    const INTERVAL: Duration = PASS_INTERVAL;

    fn paused(cluster: &KafkaCluster) -> bool {
        cluster.spec.paused
    }

    async fn observe(&mut self, cluster: &KafkaCluster) -> Result<Option<Observation>> {
        observe::observe(&self.ctx, cluster).await.map(Some)
    }

    fn decide(&self, _cluster: &KafkaCluster, o: &Observation) -> Decision {
        decide::decide(o)
    }

    async fn act(
        &mut self,
        cluster: &KafkaCluster,
        o: &Observation,
        decision: &Decision,
        status: &mut KafkaClusterStatus,
    ) -> Result<Acted<Option<Rolled>>> {
        act::act(&self.ctx, cluster, o, decision, &mut self.memory, status).await
    }

    async fn report(
        &mut self,
        cluster: &KafkaCluster,
        o: &Observation,
        _decision: &Decision,
        roll: &Option<Rolled>,
        status: &mut KafkaClusterStatus,
    ) -> Result<()> {
        report::report(&self.ctx, cluster, o, roll.as_ref(), &mut self.memory, status).await;
        Ok(())
    }

    fn forget(&self, _cluster: &str) {}
}
