//! Server settings derived from the container's memory, so a cluster sized with
//! `spec.resources` is tuned without anyone computing buffer sizes: the InnoDB buffer pool
//! gets most of the memory, and the connection limit follows what is left. A setting the
//! user gives in `spec.serverConfig` always wins.

use k8s_openapi::api::core::v1::ResourceRequirements;

/// Share of the container's memory given to the InnoDB buffer pool: the rest holds
/// per-connection buffers, the binary log cache and the server's own overhead.
const BUFFER_POOL_SHARE: f64 = 0.6;
/// The buffer pool grows in chunks of this size (MariaDB's default chunk); smaller values
/// are rounded up by the server anyway.
const CHUNK: u64 = 128 * 1024 * 1024;
/// Memory budgeted per connection beyond the buffer pool.
const PER_CONNECTION: u64 = 12 * 1024 * 1024;
/// Bounds of the derived connection limit.
const CONNECTIONS: (u64, u64) = (50, 4000);

/// The memory the server may use: its limit, else its request.
fn memory(resources: Option<&ResourceRequirements>) -> Option<u64> {
    let r = resources?;
    let pick = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { m.as_ref()?.get("memory").and_then(|q| statecraft_shared::quantity::bytes(&q.0).ok()) };
    pick(&r.limits).or_else(|| pick(&r.requests))
}

/// The derived settings (`innodb_buffer_pool_size`, `max_connections`); none without a
/// memory request or limit.
pub fn tuned_settings(resources: Option<&ResourceRequirements>) -> Vec<(String, String)> {
    let Some(memory) = memory(resources) else { return Vec::new() };
    let pool = ((memory as f64 * BUFFER_POOL_SHARE) as u64 / CHUNK).max(1) * CHUNK;
    let rest = memory.saturating_sub(pool);
    let connections = (rest / PER_CONNECTION).clamp(CONNECTIONS.0, CONNECTIONS.1);
    vec![("innodb_buffer_pool_size".into(), pool.to_string()), ("max_connections".into(), connections.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn limits(mem: &str) -> ResourceRequirements {
        ResourceRequirements { limits: Some([("memory".into(), Quantity(mem.into()))].into()), ..Default::default() }
    }

    #[test]
    fn the_buffer_pool_takes_most_memory_in_whole_chunks() {
        let s: std::collections::BTreeMap<_, _> = tuned_settings(Some(&limits("4Gi"))).into_iter().collect();
        let pool: u64 = s["innodb_buffer_pool_size"].parse().unwrap();
        assert_eq!(pool % CHUNK, 0);
        let sixty_percent = (4u64 << 30) * 6 / 10;
        assert!((sixty_percent - CHUNK..=sixty_percent).contains(&pool), "{pool}");
        let conns: u64 = s["max_connections"].parse().unwrap();
        assert!((50..=4000).contains(&conns), "{conns}");
        // A small container still gets one chunk and the minimum connection limit.
        let small: std::collections::BTreeMap<_, _> = tuned_settings(Some(&limits("256Mi"))).into_iter().collect();
        assert_eq!(small["innodb_buffer_pool_size"], CHUNK.to_string());
        assert_eq!(small["max_connections"], "50");
        // The request is used when there is no limit; nothing without either.
        let req = ResourceRequirements { requests: limits("1Gi").limits, ..Default::default() };
        assert_eq!(tuned_settings(Some(&req)).len(), 2);
        assert!(tuned_settings(None).is_empty());
        assert!(tuned_settings(Some(&ResourceRequirements::default())).is_empty());
    }
}
