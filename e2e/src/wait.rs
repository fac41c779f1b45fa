//! Waiting with a deadline. Every wait names what it waits for, so a timeout says which
//! step of a test got stuck.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::{E2eError, Result};

/// Polls `check` every 250 ms until it returns `Some`, or fails after `timeout`.
pub async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if started.elapsed() > timeout {
            return Err(E2eError::Timeout { what: what.into(), seconds: timeout.as_secs() });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
