//! Faults that stop a part every test shares (the API server) must not hit the tests
//! running beside them (`make e2e` runs two at a time). Every test namespace counts as one
//! running test ([`Entered`]); such a fault first takes the cluster for its own test
//! ([`alone`]): no new test starts, and it waits until the others have ended.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How many tests run, and whether one has the cluster to itself.
struct Gate {
    running: usize,
    closed: bool,
}

static GATE: Mutex<Gate> = Mutex::new(Gate { running: 0, closed: false });

fn gate() -> std::sync::MutexGuard<'static, Gate> {
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How often a waiting test looks again.
const POLL: Duration = Duration::from_millis(500);

/// One running test; held by its [`TestNamespace`](crate::TestNamespace).
pub struct Entered(());

/// Counts one more running test, once no test has the cluster to itself.
pub async fn enter() -> Entered {
    loop {
        {
            let mut g = gate();
            if !g.closed {
                g.running += 1;
                return Entered(());
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let mut g = gate();
        g.running = g.running.saturating_sub(1);
    }
}

/// The cluster held for one test, which must itself have [`Entered`]; released on drop.
pub struct Alone(());

/// Stops new tests from starting and waits until the calling test is the only one.
pub async fn alone() -> Alone {
    gate().closed = true;
    while gate().running > 1 {
        tokio::time::sleep(POLL).await;
    }
    Alone(())
}

impl Drop for Alone {
    fn drop(&mut self) {
        gate().closed = false;
    }
}
