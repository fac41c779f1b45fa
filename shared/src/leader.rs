//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Operators run with two or more replicas for availability, but only one may act on the
//! data plane at a time: two operators promoting two different replicas is split brain.
//! The elector follows client-go's protocol so that it can share a Lease with tools that
//! know it:
//!
//! - The holder renews `renewTime` every `retry_period`. If it cannot renew for
//!   `renew_deadline` it gives up leadership *before* the lease expires for others
//!   (`renew_deadline < lease_duration`), so two leaders never overlap.
//! - A candidate takes the Lease over when it has seen no change to it for
//!   `lease_duration`. Expiry is judged by the candidate's own monotonic clock from when
//!   it last saw the record change, never by comparing timestamps written by another
//!   machine, so clock skew between nodes cannot cause two leaders. A standby watches the
//!   Lease between its attempts, so it sees each renewal as it is written (not up to a
//!   retry period later, which would make a dead leader's Lease last that much longer), and
//!   tries again the moment the Lease expires or is given up.
//! - Every write uses the Lease's `resourceVersion`, so of two candidates racing for an
//!   expired Lease exactly one succeeds.
//! - On a clean shutdown the holder releases the Lease, so a standby takes over within one
//!   retry period instead of waiting for expiry.
//! - The holder's actions are fenced on the Lease ([`Leadership`]): a process that was
//!   paused (SIGSTOP, a frozen VM, a long GC-like stall) past its Lease wakes up with its
//!   tasks mid-way and would act before its elector has run again to learn that another
//!   replica leads. Every data-plane operation and status write first checks that the last
//!   successful renewal *began* less than `renew_deadline` ago; others take over no sooner
//!   than `lease_duration` after they saw that renewal, so the difference is the margin for
//!   an operation already under way.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{Error, Result};

/// Timing and identity of one elector.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Name of the Lease object, one per operator (e.g. `statecraft-mysql`).
    pub name: String,
    /// Namespace of the Lease: the namespace the operator watches.
    pub namespace: String,
    /// This process's identity, unique among candidates (the pod name).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Checks the timing rules that keep two leaders from overlapping.
    pub fn validate(&self) -> Result<()> {
        if self.renew_deadline >= self.lease_duration {
            return Err(Error::invalid_spec(
                "--leader-renew-deadline",
                "must be shorter than --leader-lease-duration, or two leaders could overlap",
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(Error::invalid_spec(
                "--leader-retry-period",
                "must be shorter than --leader-renew-deadline, or a single slow renewal loses the lease",
            ));
        }
        if self.identity.is_empty() {
            return Err(Error::invalid_spec("--leader-identity", "must not be empty"));
        }
        Ok(())
    }
}

/// Whether this process may act as the leader now: the fence every data-plane operation
/// and status write of a leader-elected operator passes first (see the module docs).
/// Cheap to clone; all clones share one state.
#[derive(Clone, Debug)]
pub struct Leadership(Arc<Mutex<Fence>>);

#[derive(Debug)]
enum Fence {
    /// No leader election (`--leader-election=false`): exactly one replica runs.
    Always,
    /// Leader election: may act until this instant (none: not leading).
    Until(Option<Instant>),
}

impl Leadership {
    /// For an operator run without leader election: always holds.
    pub fn unelected() -> Self {
        Leadership(Arc::new(Mutex::new(Fence::Always)))
    }

    /// For an elector: holds nothing until its first renewal.
    pub fn elected() -> Self {
        Leadership(Arc::new(Mutex::new(Fence::Until(None))))
    }

    fn fence(&self) -> std::sync::MutexGuard<'_, Fence> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this process may act at `now`.
    pub fn holds_at(&self, now: Instant) -> bool {
        match *self.fence() {
            Fence::Always => true,
            Fence::Until(until) => until.is_some_and(|u| now < u),
        }
    }

    /// `Ok` when this process may act now, else [`Error::NotLeading`]: call it right before
    /// anything only the leader may do.
    pub fn check(&self) -> Result<()> {
        if self.holds_at(Instant::now()) { Ok(()) } else { Err(Error::NotLeading) }
    }

    /// A renewal that began at `began` succeeded: acting is allowed for `renew_deadline` from
    /// then.
    fn renewed(&self, began: Instant, renew_deadline: Duration) {
        if let Fence::Until(until) = &mut *self.fence() {
            *until = Some(began + renew_deadline);
        }
    }

    /// Leadership ended (lost or released).
    fn ended(&self) {
        if let Fence::Until(until) = &mut *self.fence() {
            *until = None;
        }
    }
}

/// What the elector last saw of the Lease, and when it saw it change.
struct Observed {
    record: (Option<String>, Option<String>), // (holder, renewTime) as written
    at: Instant,
    /// The Lease's own duration (its holder's setting).
    lease_duration: Duration,
}

impl Observed {
    /// When the Lease expires for this process, unless it sees a change first.
    fn expiry(&self) -> Instant {
        self.at + self.lease_duration
    }
}

/// The events of a watch on the Lease.
type LeaseEvents = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<Lease>>> + Send>>;

/// Competes for the Lease and publishes whether this process leads.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
    leadership: Leadership,
    /// The Lease's `resourceVersion` when last read: where a standby's watch starts.
    version: Option<String>,
    /// A standby's watch on the Lease, while open.
    watch: Option<LeaseEvents>,
    /// Whether opening a watch failed with a refusal (an older Role without `watch` on
    /// leases): then the standby polls every retry period, as it did before.
    watch_refused: bool,
}

impl LeaderElector {
    /// An elector for `config` (call [`LeaseConfig::validate`] first) that keeps
    /// `leadership` (made with [`Leadership::elected`]) up to date.
    pub fn new(client: Client, config: LeaseConfig, leadership: Leadership) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        LeaderElector { api, config, observed: None, leadership, version: None, watch: None, watch_refused: false }
    }

    /// Runs until `shutdown` is cancelled or leadership is lost, publishing `true` while
    /// this process holds the Lease. After losing it the task ends with `false` published:
    /// the caller must stop acting, because another process may already lead.
    pub fn spawn(self, shutdown: CancellationToken) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let handle = tokio::spawn(self.run(tx, shutdown));
        (rx, handle)
    }

    async fn run(mut self, tx: watch::Sender<bool>, shutdown: CancellationToken) {
        let mut last_renewal: Option<Instant> = None;
        loop {
            let began = Instant::now();
            let attempt = tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()).await;
            let leading = *tx.borrow();
            match attempt {
                Ok(Ok(true)) => {
                    self.leadership.renewed(began, self.config.renew_deadline);
                    last_renewal = Some(began);
                    if !leading {
                        info!(lease = %self.config.name, identity = %self.config.identity, "acquired leadership");
                        tx.send_replace(true);
                    }
                }
                Ok(Ok(false)) if leading => {
                    warn!(lease = %self.config.name, "another process holds the lease: leadership lost");
                    self.leadership.ended();
                    tx.send_replace(false);
                    return;
                }
                Ok(Ok(false)) => debug!(lease = %self.config.name, "standing by"),
                Ok(Err(e)) => warn!(lease = %self.config.name, error = %e, "lease update failed"),
                Err(_) => warn!(lease = %self.config.name, "lease update timed out"),
            }
            if leading && last_renewal.is_none_or(|t| t.elapsed() >= self.config.renew_deadline) {
                warn!(lease = %self.config.name, "could not renew within the renew deadline: leadership lost");
                self.leadership.ended();
                tx.send_replace(false);
                return;
            }
            let leading = *tx.borrow();
            tokio::select! {
                _ = shutdown.cancelled() => break,
                () = self.pause(leading) => {}
            }
        }
        if *tx.borrow() {
            self.leadership.ended();
            tx.send_replace(false);
            if let Err(e) = self.release().await {
                warn!(lease = %self.config.name, error = %e, "could not release the lease; a standby takes over when it expires");
            }
        }
    }

    /// The wait between two rounds. The holder renews every retry period. A standby tries
    /// again after a retry period or the moment the Lease expires, whichever comes first,
    /// and meanwhile watches the Lease so that a renewal resets its expiry when it is
    /// written.
    async fn pause(&mut self, leading: bool) {
        let now = tokio::time::Instant::now();
        let retry = now + self.config.retry_period;
        if leading {
            self.watch = None;
            tokio::time::sleep_until(retry).await;
            return;
        }
        if self.watch.is_none() {
            self.watch = self.open_watch().await;
        }
        loop {
            // An expiry already past when this wait began (the last round could not take
            // the Lease) waits the retry period, like any other failed round.
            let wake = self
                .observed
                .as_ref()
                .map(|o| tokio::time::Instant::from_std(o.expiry()))
                .filter(|expiry| *expiry > now)
                .map_or(retry, |expiry| expiry.min(retry));
            let Some(events) = self.watch.as_mut() else {
                tokio::time::sleep_until(wake).await;
                return;
            };
            tokio::select! {
                () = tokio::time::sleep_until(wake) => return,
                event = events.next() => match event {
                    Some(Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease))) => {
                        self.see(&lease);
                        // Given up (its holder shut down): take it now, not at the next retry.
                        if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).is_none_or(str::is_empty) {
                            return;
                        }
                    }
                    Some(Ok(WatchEvent::Bookmark(_))) => {}
                    // Closed, deleted or failed: the next round reads the Lease and opens
                    // the watch again from there.
                    other => {
                        debug!(lease = %self.config.name, event = ?other.map(|e| e.map(|_| ())), "lease watch ended");
                        self.watch = None;
                    }
                },
            }
        }
    }

    /// A watch on the Lease from the version last read; `None` when there is none to start
    /// from or the API server refuses (the standby then polls).
    async fn open_watch(&mut self) -> Option<LeaseEvents> {
        if self.watch_refused {
            return None;
        }
        let version = self.version.clone()?;
        let params = WatchParams::default().fields(&format!("metadata.name={}", self.config.name)).timeout(290);
        match self.api.watch(&params, &version).await {
            Ok(events) => Some(Box::pin(events)),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                warn!(lease = %self.config.name, "may not watch the lease; standing by with polls every retry period");
                self.watch_refused = true;
                None
            }
            Err(e) => {
                debug!(lease = %self.config.name, error = %e, "could not watch the lease");
                None
            }
        }
    }

    /// Notes what the Lease says: a changed record starts its expiry clock again.
    fn see(&mut self, lease: &Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.filter(|h| !h.is_empty());
        let record = (holder, spec.renew_time.as_ref().map(|t| t.0.to_string()));
        let lease_duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.config.lease_duration, Duration::from_secs);
        if self.observed.as_ref().is_none_or(|o| o.record != record) {
            self.observed = Some(Observed { record, at: Instant::now(), lease_duration });
        }
        self.version = lease.metadata.resource_version.clone();
    }

    /// One round of the protocol: returns whether this process holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool> {
        let now = MicroTime(Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.config.name).await.map_err(|e| Error::kube("reading lease", e))?
        else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.config.name.clone()), ..Default::default() },
                spec: Some(self.spec(now.clone(), now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false), // another candidate was faster
                Err(e) => Err(Error::kube("creating lease", e)),
            };
        };

        self.see(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let i_hold = holder.as_deref() == Some(self.config.identity.as_str());
        let expired = self.observed.as_ref().is_some_and(|o| Instant::now() >= o.expiry());
        if holder.is_some() && !i_hold && !expired {
            return Ok(false);
        }

        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(if i_hold {
            self.spec(spec.acquire_time.unwrap_or_else(|| now.clone()), now, transitions)
        } else {
            self.spec(now.clone(), now, transitions + 1)
        });
        // `replace` carries the resourceVersion we read: if anyone wrote in between, the API
        // server answers 409 and we lose this round instead of stealing the Lease.
        match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
            Ok(written) => {
                self.see(&written);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(Error::kube("updating lease", e)),
        }
    }

    fn spec(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: i32::try_from(self.config.lease_duration.as_secs()).ok(),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// Gives the Lease up so a standby need not wait for it to expire.
    async fn release(&mut self) -> Result<()> {
        let mut lease = self.api.get(&self.config.name).await.map_err(|e| Error::kube("reading lease", e))?;
        let Some(spec) = lease.spec.as_mut() else { return Ok(()) };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map_err(|e| Error::kube("releasing lease", e))?;
        info!(lease = %self.config.name, "released leadership");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elected_fence_holds_only_within_the_renew_deadline_of_the_last_renewal() {
        let fence = Leadership::elected();
        let t0 = Instant::now();
        assert!(!fence.holds_at(t0), "nothing before the first renewal");
        fence.renewed(t0, Duration::from_secs(3));
        assert!(fence.holds_at(t0 + Duration::from_millis(2999)));
        // A process paused past its Lease wakes up after the deadline: it may not act,
        // whatever its elector has not noticed yet.
        assert!(!fence.holds_at(t0 + Duration::from_secs(3)));
        fence.ended();
        assert!(!fence.holds_at(t0), "lost or released: never again");
        assert!(matches!(fence.check(), Err(Error::NotLeading)));
    }

    #[test]
    fn an_unelected_fence_always_holds() {
        let fence = Leadership::unelected();
        fence.ended();
        assert!(fence.holds_at(Instant::now() + Duration::from_secs(3600)));
        assert!(fence.check().is_ok());
    }
}
