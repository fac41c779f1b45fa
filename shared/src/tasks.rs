//! One background task per custom resource: the loops that watch a cluster's data plane
//! every second or so (MySQL clustering, etcd membership) run beside the declarative
//! reconcile, which only makes sure the task of each live resource is running.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A running task.
struct TaskHandle {
    /// The resource's UID: a resource deleted and created again under the same name gets a
    /// new task.
    uid: String,
    /// Wakes the task for an immediate pass (capacity 1: extra wakes are dropped).
    wake: mpsc::Sender<()>,
    /// Stops it.
    cancel: CancellationToken,
}

/// The tasks of one controller, by resource name.
pub struct Tasks {
    /// Parent of every task's token: cancelled at shutdown.
    shutdown: CancellationToken,
    tasks: Mutex<HashMap<String, TaskHandle>>,
}

impl Tasks {
    /// An empty registry whose tasks stop with `shutdown`.
    pub fn new(shutdown: CancellationToken) -> Self {
        Tasks { shutdown, tasks: Mutex::new(HashMap::new()) }
    }

    /// Wakes the task of `name` if it runs for `uid`; otherwise stops any older one and
    /// spawns `start(wake, cancel)`: the task must pass again when `wake` receives and stop
    /// when `cancel` is cancelled.
    pub fn ensure<F, Fut>(&self, name: &str, uid: &str, start: F)
    where
        F: FnOnce(mpsc::Receiver<()>, CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tasks.get(name).filter(|t| t.uid == uid && !t.cancel.is_cancelled()) {
            let _ = t.wake.try_send(());
            return;
        }
        if let Some(old) = tasks.remove(name) {
            old.cancel.cancel();
        }
        let (wake, rx) = mpsc::channel(1);
        let cancel = self.shutdown.child_token();
        tokio::spawn(start(rx, cancel.clone()));
        tasks.insert(name.to_string(), TaskHandle { uid: uid.to_string(), wake, cancel });
    }

    /// Stops the task of `name` (its resource is being deleted).
    pub fn stop(&self, name: &str) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tasks.remove(name) {
            t.cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn one_task_per_uid_woken_and_stopped() {
        let tasks = Tasks::new(CancellationToken::new());
        let started = Arc::new(AtomicUsize::new(0));
        let passes = Arc::new(AtomicUsize::new(0));
        let spawn = |started: Arc<AtomicUsize>, passes: Arc<AtomicUsize>| {
            move |mut wake: mpsc::Receiver<()>, cancel: CancellationToken| async move {
                started.fetch_add(1, Ordering::SeqCst);
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => break,
                        _ = wake.recv() => { passes.fetch_add(1, Ordering::SeqCst); }
                    }
                }
            }
        };
        tasks.ensure("a", "u1", spawn(started.clone(), passes.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        tasks.ensure("a", "u1", spawn(started.clone(), passes.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(started.load(Ordering::SeqCst), 1, "same uid: woken, not started again");
        assert_eq!(passes.load(Ordering::SeqCst), 1);
        tasks.ensure("a", "u2", spawn(started.clone(), passes.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(started.load(Ordering::SeqCst), 2, "a new uid is a new resource");
        tasks.stop("a");
        assert!(tasks.tasks.lock().unwrap().is_empty());
    }
}
