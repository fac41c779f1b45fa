//! `/healthz`, `/readyz` and `/metrics`.
//!
//! Liveness means the process serves requests; readiness means the operator's CRDs are
//! installed and it can do its work (a standby waiting for the Lease is ready: it can take
//! over at any moment). Metrics live on their own address so that they can be exposed to
//! Prometheus without exposing health probes, and vice versa.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::{Error, Result};

/// Binds both addresses (so a port clash fails start-up, not later) and serves them until
/// `stop` is cancelled. When both addresses are equal, one listener serves all paths.
pub async fn serve(
    health: SocketAddr,
    metrics: SocketAddr,
    ready: Arc<AtomicBool>,
    registry: Arc<Metrics>,
    stop: CancellationToken,
) -> Result<()> {
    let health_routes = Router::new().route("/healthz", get(|| async { "ok" })).route(
        "/readyz",
        get(move || {
            let ready = ready.clone();
            async move {
                if ready.load(Ordering::SeqCst) {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "waiting for CRDs")
                }
            }
        }),
    );
    let metric_routes = Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move { registry.render() }
        }),
    );
    if health == metrics {
        spawn(health, health_routes.merge(metric_routes), stop).await
    } else {
        spawn(health, health_routes, stop.clone()).await?;
        spawn(metrics, metric_routes, stop).await
    }
}

async fn spawn(addr: SocketAddr, router: Router, stop: CancellationToken) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Permanent(format!("cannot listen on {addr}: {e}")))?;
    info!(%addr, "serving endpoints");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await {
            warn!(%addr, error = %e, "endpoint server stopped");
        }
    });
    Ok(())
}
