//! The membership task of one cluster, on the shared per-cluster loop
//! ([`statecraft_shared::cluster_loop`]): every couple of seconds, and at once when woken or
//! after a step, it observes the member pods and claims (Kubernetes) and the members (etcd)
//! ([`observe`]), asks the pure planner for the one next step ([`plan::plan`]), carries it
//! out, keeps the StatefulSet and the membership ConfigMap in line with the member list and
//! rolls new pod revisions (shared upgrade engine) when membership is settled
//! ([`plan::rolls`], [`act`]), and writes the status ([`report`]). It is the only writer of those objects and of the status
//! of a valid cluster, so they never race.

mod act;
mod observe;
mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use statecraft_shared::Result;
use statecraft_shared::cluster_loop::{Acted, ClusterLoop, Waits};
use statecraft_shared::pods::explain_wait;
use statecraft_shared::upgrade::Action;

use super::Context;
use crate::api::{EtcdCluster, EtcdClusterStatus};
use crate::insight::Detector;
use crate::membership::plan::{self, DefragPolicy, Desired, Memory as PlanMemory, Step};
use crate::reason::Etcd;
use crate::validate::ValidSpec;

use observe::Observation;

/// Time between passes when nothing happened.
pub const PASS_INTERVAL: Duration = Duration::from_secs(2);

/// Waits for members that do not start or answer, which their pods' own status explains
/// when Kubernetes cannot run them (unschedulable, crash-looping, image not pulled): the
/// wait then carries the pod's reason (and so do its Event and the conditions). Not
/// `QuorumLost`: that reason (and phase) says the operator changes nothing, which stands.
const EXPLAINED_BY_PODS: [Etcd; 3] = [Etcd::MemberStarting, Etcd::MemberUnhealthy, Etcd::WaitingForHealthyMembers];

/// What a pass decided: the planner's step, its wait explained by the pods.
pub struct Decision {
    step: Step,
    /// Whether a new pod revision may be rolled ([`plan::rolls`], asked before the wait
    /// was explained).
    rolls: bool,
}

/// The membership task of one cluster and what it remembers between passes.
pub struct Membership {
    ctx: Arc<Context>,
    memory: Memory,
}

impl Membership {
    /// A task with empty memory, as after an operator restart.
    pub fn new(ctx: Arc<Context>) -> Self {
        Membership { ctx, memory: Memory::default() }
    }
}

/// What the task remembers between passes.
#[derive(Default)]
struct Memory {
    /// The planner's memory (since when members are unhealthy).
    plan: PlanMemory,
    /// The wait last published as an Event.
    waits: Waits,
    /// The last backup slot handled by the schedule.
    backup_slot: Option<chrono::DateTime<Utc>>,
    /// The members' recent history of leader changes and latencies.
    detector: Detector,
    /// When the members' metrics were last scraped.
    last_scrape: Option<Instant>,
}

impl ClusterLoop for Membership {
    type Cluster = EtcdCluster;
    type Status = EtcdClusterStatus;
    type Observation = Observation;
    type Decision = Decision;
    /// The rolling upgrade's step, if one was taken.
    type Done = Option<Action>;

    const NAME: &'static str = "membership";
    const INTERVAL: Duration = PASS_INTERVAL;

    fn paused(cluster: &EtcdCluster) -> bool {
        cluster.spec.paused
    }

    async fn observe(&mut self, cluster: &EtcdCluster) -> Result<Option<Observation>> {
        let observation = observe::observe(&self.ctx, cluster).await?;
        plan::remember(&mut self.memory.plan, &observation.observed);
        Ok(Some(observation))
    }

    /// The planner's step; none for an invalid spec (the reconciler reports it: the members
    /// are still observed and reported, but nothing is changed) or a paused cluster.
    fn decide(&self, cluster: &EtcdCluster, o: &Observation) -> Decision {
        let Some(valid) = o.valid.as_ref().filter(|_| !cluster.spec.paused) else {
            return Decision { step: Step::Idle, rolls: true };
        };
        let wanted = Desired { leader: o.leader_request.as_ref().and_then(|(_, k)| *k), ..desired(valid) };
        let mut step = plan::plan(&wanted, &o.observed, &self.memory.plan);
        let rolls = plan::rolls(&step, &o.observed);
        if let Step::Wait { reason, message } = &mut step
            && EXPLAINED_BY_PODS.iter().any(|&entry| *reason == entry)
        {
            explain_wait(reason, message, &o.kube.problems);
        }
        Decision { step, rolls }
    }

    async fn act(
        &mut self,
        cluster: &EtcdCluster,
        o: &Observation,
        decision: &Decision,
        status: &mut EtcdClusterStatus,
    ) -> Result<Acted<Option<Action>>> {
        act::act(&self.ctx, cluster, o, decision, &mut self.memory, status).await
    }

    async fn report(
        &mut self,
        cluster: &EtcdCluster,
        o: &Observation,
        decision: &Decision,
        roll: &Option<Action>,
        status: &mut EtcdClusterStatus,
    ) -> Result<()> {
        report::report(&self.ctx, cluster, o, &decision.step, roll.as_ref(), &mut self.memory, status).await
    }

    fn forget(&self, cluster: &str) {
        self.ctx.metrics.forget(cluster);
    }
}

/// The planner's inputs from a valid spec.
fn desired(valid: &ValidSpec) -> Desired {
    let spec = &valid.spec;
    Desired {
        replicas: spec.replicas.max(1) as u32,
        replace_after: spec.auto_heal.enabled.then(|| Duration::from_secs(spec.auto_heal.replace_after_seconds as u64)),
        defrag: spec.defragmentation.enabled.then(|| DefragPolicy {
            threshold_percent: spec.defragmentation.threshold_percent.clamp(1, 99) as u32,
            min_db_size: valid.defrag_min_bytes,
        }),
        leader: None,
    }
}
