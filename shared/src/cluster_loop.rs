//! The per-cluster loop: every operator looks after each of its clusters' data plane in a
//! background task (MySQL's clustering, etcd's membership) that passes through the same four
//! stages, apart as MOCO's `clustering/` keeps them apart:
//!
//! 1. **observe**: read what Kubernetes and the servers show (no writes);
//! 2. **decide**: the pure decision over that observation (the operator's own planner);
//! 3. **act**: carry out at most what the decision asks (the only stage that writes to the
//!    servers or to objects other than the status);
//! 4. **report**: the status, metrics and Events that say what the pass saw and did.
//!
//! This module owns what is the same everywhere: reading the resource and stopping when it
//! is gone or replaced, the pass interval and the wake-up, cancellation, the leadership
//! check before anything is changed, the status write (only by a replica that still leads),
//! registration under the supervisor of [`crate::tasks`] (a panic restarts the loop with
//! fresh memory) and the metric clean-up when a cluster goes.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use kube::core::object::HasStatus;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::events::EventPublisher;
use crate::reason::Reason;
use crate::runner::Runtime;
use crate::status::patch_status;
use crate::tasks::{RestartReporter, Tasks, Wake};
use crate::{Error, Result};

/// When the loop passes again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// At once: something was done, and the next pass sees its effect.
    Now,
    /// After [`ClusterLoop::INTERVAL`] (or when woken).
    Later,
    /// After this long (or when woken): a wait that is about to end, and whose end the
    /// loop should see sooner than a whole interval later.
    After(Duration),
}

/// What [`ClusterLoop::act`] did: when to pass again, and what [`ClusterLoop::report`]
/// needs to know of it.
#[derive(Debug)]
pub struct Acted<D> {
    /// When the loop passes again.
    pub next: Next,
    /// What was done.
    pub done: D,
}

/// One operator's per-cluster loop, stage by stage. A value is made afresh for every start
/// of the loop (and every restart after a panic), so what it keeps between passes starts
/// empty, as after an operator restart.
pub trait ClusterLoop: Send + 'static {
    /// The cluster resource.
    type Cluster: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + HasStatus<Status = Self::Status>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static;
    /// Its status, written by [`ClusterLoop::report`] and then patched when it changed.
    type Status: Default + Clone + Serialize + PartialEq + Send + Sync;
    /// What one look at the cluster found.
    type Observation: Send + Sync;
    /// What the decision asks for.
    type Decision: Send + Sync;
    /// What `act` did that `report` needs (e.g. the step a rolling upgrade took); its
    /// default is what a pass that did not act reports.
    type Done: Default + Send + Sync;

    /// The loop's word in logs: "clustering", "membership".
    const NAME: &'static str;
    /// Time between passes when nothing happened.
    const INTERVAL: Duration;

    /// Whether the cluster is paused (`spec.paused`): it is observed, decided on and
    /// reported as always, but [`act`](Self::act) is not called, so nothing changes
    /// (no operation, no roll, no scheduled backup, no resize) until it is unpaused.
    fn paused(cluster: &Self::Cluster) -> bool;

    /// Reads what Kubernetes and the servers show. `None`: nothing to decide on yet (e.g.
    /// the reconciler has not created the objects the pass needs); the pass ends there.
    fn observe(&mut self, cluster: &Self::Cluster) -> impl Future<Output = Result<Option<Self::Observation>>> + Send;

    /// The pure decision over the observation (and what the loop remembers).
    fn decide(&self, cluster: &Self::Cluster, observation: &Self::Observation) -> Self::Decision;

    /// Carries out what the decision asks, recording in `status` what it did. Called only
    /// while this replica leads; an action that may outlast the Lease checks again before
    /// writing what followed from it. An error ends the pass without a status write.
    fn act(
        &mut self,
        cluster: &Self::Cluster,
        observation: &Self::Observation,
        decision: &Self::Decision,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Acted<Self::Done>>> + Send;

    /// Fills `status` (and metrics, and Events of what the pass found) from the pass. An
    /// error ends the pass without a status write.
    fn report(
        &mut self,
        cluster: &Self::Cluster,
        observation: &Self::Observation,
        decision: &Self::Decision,
        done: &Self::Done,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The cluster is gone: drop what is kept about it outside the loop (its metrics).
    fn forget(&self, cluster: &str);
}

/// The loops of one controller's clusters, each under the supervisor of [`crate::tasks`]
/// (a panic restarts it, counted and reported as a `TaskRestarted` Warning Event).
pub struct Loops<K> {
    rt: Arc<Runtime>,
    tasks: Tasks<RestartReporter<K>>,
}

impl<K: Resource<DynamicType = ()> + Send + Sync + 'static> Loops<K> {
    /// No loops yet; those started stop with `shutdown`.
    pub fn new(rt: Arc<Runtime>, shutdown: CancellationToken) -> Self {
        let tasks = Tasks::new(shutdown, RestartReporter::new(rt.clone()));
        Loops { rt, tasks }
    }

    /// Starts the loop of cluster `name` (if none runs for this `uid`), made by `make`, or
    /// wakes the running one for a pass at once.
    pub fn ensure<L, F>(&self, name: &str, uid: &str, make: F)
    where
        L: ClusterLoop<Cluster = K>,
        F: Fn() -> L + Send + Sync + 'static,
    {
        let (rt, owned, uid_owned) = (self.rt.clone(), name.to_string(), uid.to_string());
        let make = Arc::new(make);
        self.tasks.ensure(name, uid, move |wake, cancel| {
            run(rt.clone(), make(), owned.clone(), uid_owned.clone(), wake, cancel)
        });
    }

    /// Stops the loop of `name` (the cluster is being deleted).
    pub fn stop(&self, name: &str) {
        self.tasks.stop(name);
    }
}

/// Runs `task` for cluster `name` (with `uid`) until cancelled or the cluster is gone or
/// replaced (then it returns, and the supervisor forgets it).
pub async fn run<L: ClusterLoop>(
    rt: Arc<Runtime>,
    mut task: L,
    name: String,
    uid: String,
    wake: Wake,
    cancel: CancellationToken,
) {
    info!(cluster = %name, "{} task started", L::NAME);
    loop {
        let delay = match pass(&rt, &mut task, &name, &uid).await {
            Ok(Some(Next::Now)) => Duration::ZERO,
            Ok(Some(Next::Later)) => L::INTERVAL,
            Ok(Some(Next::After(delay))) => delay,
            Ok(None) => break,
            Err(e) => {
                warn!(cluster = %name, error = %e, "{} pass failed", L::NAME);
                L::INTERVAL
            }
        };
        tokio::select! {
            () = cancel.cancelled() => break,
            () = wake.woken() => {}
            () = tokio::time::sleep(delay) => {}
        }
    }
    info!(cluster = %name, "{} task stopped", L::NAME);
}

/// One pass; `None` when the cluster is gone or replaced and the loop must stop.
async fn pass<L: ClusterLoop>(rt: &Runtime, task: &mut L, name: &str, uid: &str) -> Result<Option<Next>> {
    let api: Api<L::Cluster> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let Some(cluster) = api.get_opt(name).await.map_err(|e| Error::kube("reading the cluster", e))? else {
        task.forget(name);
        return Ok(None);
    };
    if cluster.uid().as_deref() != Some(uid) || cluster.meta().deletion_timestamp.is_some() {
        return Ok(None);
    }
    let Some(observation) = task.observe(&cluster).await? else { return Ok(Some(Next::Later)) };
    let decision = task.decide(&cluster, &observation);
    let current = cluster.status();
    let mut status = current.cloned().unwrap_or_default();
    let acted = if L::paused(&cluster) {
        Acted { next: Next::Later, done: L::Done::default() }
    } else {
        // Everything `act` does is the leader's alone: not after a pause past the Lease.
        rt.leadership.check()?;
        task.act(&cluster, &observation, &decision, &mut status).await?
    };
    task.report(&cluster, &observation, &decision, &acted.done, &mut status).await?;
    // What this pass saw is written only by a replica that still leads.
    rt.leadership.check()?;
    patch_status(&api, &cluster, current, &status, rt.field_manager).await?;
    Ok(Some(acted.next))
}

/// The wait last published as an Event, so that a long wait is one Event, not one a pass.
#[derive(Debug, Default)]
pub struct Waits(Option<Reason>);

impl Waits {
    /// Publishes a `Wait` Event for `reason` on `cluster` unless the last one was for the
    /// same reason. `warning`: the wait is a problem (e.g. no primary), not etcd saying
    /// "not yet".
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &mut self,
        events: &EventPublisher,
        cluster: &K,
        reason: impl Into<Reason>,
        message: &str,
        warning: bool,
    ) {
        let reason = reason.into();
        if !self.begins(reason) {
            return;
        }
        match warning {
            true => events.warning(cluster, reason, "Wait", message).await,
            false => events.normal(cluster, reason, "Wait", message).await,
        }
    }

    /// The wait is over: the next one, whatever its reason, is published.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// Whether a wait for `reason` is a new one (and remembers it).
    fn begins(&mut self, reason: Reason) -> bool {
        self.0.replace(reason) != Some(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::Common;

    #[test]
    fn a_wait_is_published_once_until_its_reason_changes_or_it_ends() {
        let (down, waiting) = (Reason::from(Common::MemberNotReady), Reason::from(Common::RestartPending));
        let mut waits = Waits::default();
        assert!(waits.begins(down));
        assert!(!waits.begins(down), "the same wait, a pass later");
        assert!(waits.begins(waiting), "another reason");
        assert!(waits.begins(down), "back to the first: a new wait");
        waits.clear();
        assert!(waits.begins(down), "after the wait ended");
    }
}
