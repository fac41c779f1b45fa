//! One background task per custom resource: the loops that watch a cluster's data plane
//! every second or so (MySQL clustering, etcd membership) run beside the declarative
//! reconcile, which only makes sure the task of each live resource is running.
//!
//! Each task runs under a supervisor, because a task that dies unnoticed leaves its cluster
//! unmanaged (no failover) until the operator restarts:
//!
//! - a task that **panics** (a bug, or a panic inside a client library) is started again
//!   from its factory after a back-off of 1 s doubling to 60 s, reset once a run has lasted
//!   [`HEALTHY_RUN`]. Each restart is logged with the panic message and handed to the
//!   registry's [`OnRestart`] hook, which for an operator ([`RestartReporter`]) counts it in
//!   `task_restarts_total{cluster}` and writes a `TaskRestarted` Warning Event on the resource;
//! - a task that **returns** is done (its resource is gone or was replaced): it leaves the
//!   registry, so the next reconcile of a resource of that name starts a fresh one;
//! - a task that is **cancelled** ([`Tasks::stop`], a newer resource under the same name, or
//!   shutdown) is never restarted, even if it panics on its way out.
//!
//! A task is woken through a [`Wake`], which belongs to the supervisor and so survives
//! restarts; wakes coalesce as a capacity-1 channel's would.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::EventType;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::reason::Common;
use crate::runner::Runtime;

/// The longest wait before a task that keeps panicking is started again: long enough not to
/// spin on a bug, short next to what an unmanaged cluster risks.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A run that lasted this long counts as healthy: the next panic waits the first back-off
/// again instead of the doubled one.
pub const HEALTHY_RUN: Duration = Duration::from_secs(300);

/// The back-off before restart number `consecutive + 1` of a run of panics: 1 s, 2 s,
/// 4 s, ... up to [`MAX_BACKOFF`].
pub fn restart_backoff(consecutive: u32) -> Duration {
    crate::error::backoff(consecutive).min(MAX_BACKOFF)
}

/// Wakes a task for an immediate pass. A wake sent while the task is busy is kept, and
/// further ones are folded into it, so the task makes one extra pass however many arrive.
#[derive(Clone, Default)]
pub struct Wake(Arc<Notify>);

impl Wake {
    /// Completes when woken, at once if a wake arrived since the last one was taken.
    pub async fn woken(&self) {
        self.0.notified().await;
    }

    fn wake(&self) {
        self.0.notify_one();
    }
}

/// A task about to be started again after it panicked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// The resource's name.
    pub name: String,
    /// The resource's UID.
    pub uid: String,
    /// The panic's message (or a placeholder when the payload was not a string).
    pub panic: String,
    /// How long the supervisor waits before starting the task again.
    pub backoff: Duration,
}

/// How a registry makes its tasks' restarts known beyond the log; [`RestartReporter`] is
/// the operators' implementation.
pub trait OnRestart: Send + Sync + 'static {
    /// A task for the resource `name` is started (not restarted).
    fn watching(&self, name: &str);

    /// A task panicked and will be started again after `restart.backoff`.
    fn restarting(&self, restart: &Restart) -> impl Future<Output = ()> + Send;

    /// The resource `name` is being deleted (its task was stopped): drop what is kept about it.
    fn forget(&self, name: &str);
}

/// Reports restarts of the tasks of resources of kind `K`, in the operator's namespace,
/// the way an operator reports anything that goes wrong: a `TaskRestarted` Warning Event
/// on the resource and `task_restarts_total{cluster}` in the operator's metrics.
pub struct RestartReporter<K> {
    rt: Arc<Runtime>,
    kind: PhantomData<fn() -> K>,
}

impl<K> RestartReporter<K> {
    /// Reports through `rt`'s Event publisher and metrics.
    pub fn new(rt: Arc<Runtime>) -> Self {
        RestartReporter { rt, kind: PhantomData }
    }
}

impl<K: Resource<DynamicType = ()> + 'static> OnRestart for RestartReporter<K> {
    fn watching(&self, name: &str) {
        self.rt.namespace_metrics.watch_task(name);
    }

    async fn restarting(&self, restart: &Restart) {
        self.rt.namespace_metrics.task_restarted(&restart.name);
        // Built from what the registry knows, so reporting needs no read of the resource.
        let regarding = ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(restart.name.clone()),
            namespace: Some(self.rt.namespace.clone()),
            uid: Some(restart.uid.clone()),
            ..Default::default()
        };
        let note = format!(
            "The operator's background task for this resource panicked ({}); it is started again in {}, \
             and nothing watches the resource's servers meanwhile.",
            restart.panic,
            humantime::format_duration(restart.backoff),
        );
        self.rt.events.publish(regarding, EventType::Warning, Common::TaskRestarted, "Supervise", note).await;
    }

    fn forget(&self, name: &str) {
        self.rt.namespace_metrics.forget_task(name);
    }
}

/// A running (or restarting) task, as the registry knows it.
struct TaskHandle {
    /// The resource's UID: a resource deleted and created again under the same name gets a
    /// new task.
    uid: String,
    /// Tells this task's supervisor from a later one under the same name.
    generation: u64,
    wake: Wake,
    /// Stops the task and its supervisor.
    cancel: CancellationToken,
}

#[derive(Default)]
struct Registry {
    tasks: HashMap<String, TaskHandle>,
    next_generation: u64,
}

type Shared = Arc<Mutex<Registry>>;

fn lock(registry: &Shared) -> MutexGuard<'_, Registry> {
    // Every change to the map is one statement, so a panic elsewhere cannot leave it
    // half-updated: recover from poisoning instead of propagating it.
    registry.lock().unwrap_or_else(|p| p.into_inner())
}

/// The tasks of one controller, by resource name, with `H` told of every restart.
pub struct Tasks<H> {
    /// Parent of every task's token: cancelled at shutdown.
    shutdown: CancellationToken,
    hook: Arc<H>,
    registry: Shared,
}

impl<H: OnRestart> Tasks<H> {
    /// An empty registry whose tasks stop with `shutdown` and whose restarts go to `hook`.
    pub fn new(shutdown: CancellationToken, hook: H) -> Self {
        Tasks { shutdown, hook: Arc::new(hook), registry: Shared::default() }
    }

    /// Wakes the task of `name` if it runs (or waits to restart) for `uid`; otherwise stops
    /// any older one and starts `start(wake, cancel)` under a supervisor. The task must pass
    /// again when `wake` fires, stop when `cancel` is cancelled, and return once its
    /// resource is gone; `start` is called again for each restart after a panic.
    pub fn ensure<F, Fut>(&self, name: &str, uid: &str, start: F)
    where
        F: Fn(Wake, CancellationToken) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Shutting down (leadership lost, SIGTERM): a reconcile still finishing must not
        // start a task that would make a pass before it saw the cancellation (seen in e2e:
        // an etcd operator woken past its Lease started a task after losing it).
        if self.shutdown.is_cancelled() {
            return;
        }
        let mut registry = lock(&self.registry);
        if let Some(t) = registry.tasks.get(name).filter(|t| t.uid == uid && !t.cancel.is_cancelled()) {
            t.wake.wake();
            return;
        }
        if let Some(old) = registry.tasks.remove(name) {
            old.cancel.cancel();
        }
        registry.next_generation += 1;
        let handle = TaskHandle {
            uid: uid.to_string(),
            generation: registry.next_generation,
            wake: Wake::default(),
            cancel: self.shutdown.child_token(),
        };
        let supervisor = Supervisor {
            name: name.to_string(),
            uid: uid.to_string(),
            generation: handle.generation,
            wake: handle.wake.clone(),
            cancel: handle.cancel.clone(),
            hook: self.hook.clone(),
            registry: self.registry.clone(),
        };
        registry.tasks.insert(name.to_string(), handle);
        self.hook.watching(name);
        tokio::spawn(supervisor.run(start));
    }

    /// Stops the task of `name` (its resource is being deleted) and forgets its restarts.
    pub fn stop(&self, name: &str) {
        if let Some(t) = lock(&self.registry).tasks.remove(name) {
            t.cancel.cancel();
        }
        self.hook.forget(name);
    }
}

/// Runs one resource's task until it returns or is cancelled, restarting it after panics.
struct Supervisor<H> {
    name: String,
    uid: String,
    generation: u64,
    wake: Wake,
    cancel: CancellationToken,
    hook: Arc<H>,
    registry: Shared,
}

impl<H: OnRestart> Supervisor<H> {
    async fn run<F, Fut>(self, start: F)
    where
        F: Fn(Wake, CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut consecutive = 0;
        loop {
            let started = Instant::now();
            // Its own tokio task, so that a panic ends only the task and reaches us here.
            let result = tokio::spawn(start(self.wake.clone(), self.cancel.clone())).await;
            let panic = match result {
                Ok(()) => break,
                Err(e) if e.is_panic() => panic_message(e.into_panic()),
                // Aborted: only the runtime does that, when it shuts down.
                Err(_) => break,
            };
            if self.cancel.is_cancelled() {
                info!(resource = %self.name, panic = %panic, "task panicked while stopping; not restarted");
                break;
            }
            if started.elapsed() >= HEALTHY_RUN {
                consecutive = 0;
            }
            let backoff = restart_backoff(consecutive);
            consecutive = consecutive.saturating_add(1);
            error!(resource = %self.name, uid = %self.uid, panic = %panic, ?backoff, "task panicked; restarting it after the back-off");
            let restart = Restart { name: self.name.clone(), uid: self.uid.clone(), panic, backoff };
            self.hook.restarting(&restart).await;
            tokio::select! {
                () = self.cancel.cancelled() => break,
                () = tokio::time::sleep(backoff) => {}
            }
        }
    }
}

impl<H> Drop for Supervisor<H> {
    /// However the supervisor ends, its entry leaves the registry (unless a newer task of
    /// the same name replaced it): a registered task is always one that runs or will run
    /// again, so waking it is never lost on a task that is gone.
    fn drop(&mut self) {
        let mut registry = lock(&self.registry);
        if registry.tasks.get(&self.name).is_some_and(|t| t.generation == self.generation) {
            registry.tasks.remove(&self.name);
        }
    }
}

/// The message of a panic payload: `panic!` makes a `&str` or a `String`.
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_string(),
            Err(_) => "a panic without a message".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Records what the registry reports.
    #[derive(Clone, Default)]
    struct Recorded {
        watching: Arc<Mutex<Vec<String>>>,
        restarts: Arc<Mutex<Vec<Restart>>>,
        forgotten: Arc<Mutex<Vec<String>>>,
    }

    impl OnRestart for Recorded {
        fn watching(&self, name: &str) {
            self.watching.lock().unwrap().push(name.to_string());
        }

        async fn restarting(&self, restart: &Restart) {
            self.restarts.lock().unwrap().push(restart.clone());
        }

        fn forget(&self, name: &str) {
            self.forgotten.lock().unwrap().push(name.to_string());
        }
    }

    impl Recorded {
        fn backoffs(&self) -> Vec<u64> {
            self.restarts.lock().unwrap().iter().map(|r| r.backoff.as_secs()).collect()
        }
    }

    fn registered(tasks: &Tasks<Recorded>) -> Vec<(String, String)> {
        lock(&tasks.registry).tasks.iter().map(|(n, t)| (n.clone(), t.uid.clone())).collect()
    }

    fn count(n: &AtomicUsize) -> usize {
        n.load(Ordering::SeqCst)
    }

    /// A task that counts its passes until cancelled.
    async fn passing(wake: Wake, cancel: CancellationToken, passes: Arc<AtomicUsize>) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = wake.woken() => { passes.fetch_add(1, Ordering::SeqCst); }
            }
        }
    }

    async fn panics_when_cancelled(cancel: CancellationToken) {
        cancel.cancelled().await;
        panic!("panicked while stopping");
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn one_task_per_uid_woken_and_stopped() {
        let hook = Recorded::default();
        let tasks = Tasks::new(CancellationToken::new(), hook.clone());
        let started = Arc::new(AtomicUsize::new(0));
        let passes = Arc::new(AtomicUsize::new(0));
        let spawn = |started: Arc<AtomicUsize>, passes: Arc<AtomicUsize>| {
            move |wake: Wake, cancel: CancellationToken| {
                started.fetch_add(1, Ordering::SeqCst);
                passing(wake, cancel, passes.clone())
            }
        };
        tasks.ensure("a", "u1", spawn(started.clone(), passes.clone()));
        settle().await;
        tasks.ensure("a", "u1", spawn(started.clone(), passes.clone()));
        settle().await;
        assert_eq!(count(&started), 1, "same uid: woken, not started again");
        assert_eq!(count(&passes), 1);
        tasks.ensure("a", "u2", spawn(started.clone(), passes.clone()));
        settle().await;
        assert_eq!(count(&started), 2, "a new uid is a new resource");
        assert_eq!(registered(&tasks), [("a".to_string(), "u2".to_string())], "the old supervisor left the new task");
        tasks.stop("a");
        settle().await;
        assert!(registered(&tasks).is_empty());
        assert_eq!(*hook.watching.lock().unwrap(), ["a", "a"], "told of each new task");
        assert_eq!(*hook.forgotten.lock().unwrap(), ["a"]);
        assert!(hook.restarts.lock().unwrap().is_empty(), "nothing panicked");
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_task_is_restarted_after_the_back_off_and_then_passes_when_woken() {
        let hook = Recorded::default();
        let tasks = Tasks::new(CancellationToken::new(), hook.clone());
        let runs = Arc::new(AtomicUsize::new(0));
        let passes = Arc::new(AtomicUsize::new(0));
        let (r, p) = (runs.clone(), passes.clone());
        tasks.ensure("a", "u1", move |wake, cancel| {
            let first = r.fetch_add(1, Ordering::SeqCst) == 0;
            let passes = p.clone();
            async move {
                if first {
                    panic!("boom");
                }
                passing(wake, cancel, passes).await;
            }
        });
        settle().await;
        assert_eq!(count(&runs), 1);
        let expected =
            Restart { name: "a".into(), uid: "u1".into(), panic: "boom".into(), backoff: Duration::from_secs(1) };
        assert_eq!(*hook.restarts.lock().unwrap(), [expected]);
        assert_eq!(registered(&tasks).len(), 1, "a task waiting to restart stays registered");

        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(count(&runs), 1, "not restarted before the back-off");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(count(&runs), 2, "restarted after the back-off");

        // The next reconcile wakes the restarted task instead of starting another.
        let r = runs.clone();
        tasks.ensure("a", "u1", move |_, _| {
            r.fetch_add(1, Ordering::SeqCst);
            async {}
        });
        settle().await;
        assert_eq!(count(&passes), 1);
        assert_eq!(count(&runs), 2);
        assert_eq!(hook.restarts.lock().unwrap().len(), 1);
        assert_eq!(*hook.watching.lock().unwrap(), ["a"], "a restart is not a new task");
    }

    #[tokio::test(start_paused = true)]
    async fn restarts_back_off_doubling_to_a_minute_and_start_over_after_a_healthy_run() {
        assert_eq!(restart_backoff(0), Duration::from_secs(1));
        assert_eq!(restart_backoff(5), Duration::from_secs(32));
        assert_eq!(restart_backoff(6), MAX_BACKOFF);
        assert_eq!(restart_backoff(u32::MAX), MAX_BACKOFF);

        let hook = Recorded::default();
        let tasks = Tasks::new(CancellationToken::new(), hook.clone());
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        // Runs 0..8 panic at once, run 8 runs healthily before panicking, run 9 panics at
        // once, and later runs stay up.
        tasks.ensure("a", "u1", move |_, cancel| {
            let run = r.fetch_add(1, Ordering::SeqCst);
            async move {
                if run == 8 {
                    tokio::time::sleep(HEALTHY_RUN).await;
                }
                if run <= 9 {
                    panic!("run {run} failed");
                }
                cancel.cancelled().await;
            }
        });
        tokio::time::sleep(Duration::from_secs(1000)).await;
        assert_eq!(hook.backoffs(), [1, 2, 4, 8, 16, 32, 60, 60, 1, 2]);
        assert_eq!(count(&runs), 11);
        let last = hook.restarts.lock().unwrap().last().map(|r| r.panic.clone());
        assert_eq!(last.as_deref(), Some("run 9 failed"), "a formatted panic message is reported too");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_task_is_not_restarted() {
        let hook = Recorded::default();
        let shutdown = CancellationToken::new();
        let tasks = Tasks::new(shutdown.clone(), hook.clone());
        let runs = Arc::new(AtomicUsize::new(0));
        // Panics on its way out.
        let task = |runs: Arc<AtomicUsize>| {
            move |_: Wake, cancel: CancellationToken| {
                runs.fetch_add(1, Ordering::SeqCst);
                panics_when_cancelled(cancel)
            }
        };
        tasks.ensure("stopped", "u1", task(runs.clone()));
        tasks.ensure("shut-down", "u2", task(runs.clone()));
        settle().await;
        tasks.stop("stopped");
        settle().await;
        assert_eq!(registered(&tasks), [("shut-down".to_string(), "u2".to_string())]);
        shutdown.cancel();
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(count(&runs), 2, "neither was started again");
        assert!(hook.restarts.lock().unwrap().is_empty());
        assert!(registered(&tasks).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_ends_by_itself_is_deregistered_and_started_again_by_the_next_ensure() {
        let hook = Recorded::default();
        let tasks = Tasks::new(CancellationToken::new(), hook.clone());
        let runs = Arc::new(AtomicUsize::new(0));
        // Returns at once, as a task whose resource is gone does.
        let task = |runs: Arc<AtomicUsize>| {
            move |_: Wake, _: CancellationToken| {
                runs.fetch_add(1, Ordering::SeqCst);
                async {}
            }
        };
        tasks.ensure("a", "u1", task(runs.clone()));
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(count(&runs), 1, "a task that returned is not restarted");
        assert!(registered(&tasks).is_empty(), "a task that returned leaves the registry");
        tasks.ensure("a", "u1", task(runs.clone()));
        settle().await;
        assert_eq!(count(&runs), 2, "the next ensure starts it again rather than waking nothing");
        assert!(hook.restarts.lock().unwrap().is_empty());
    }

    #[test]
    fn panic_messages_are_read_from_str_and_string_payloads() {
        assert_eq!(panic_message(Box::new("static")), "static");
        assert_eq!(panic_message(Box::new(String::from("formatted"))), "formatted");
        assert_eq!(panic_message(Box::new(42)), "a panic without a message");
    }
}
