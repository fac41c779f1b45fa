//! The ConfigMap a starting member reads its membership from, as `ETCD_INITIAL_*`
//! environment variables (etcd reads its flags from `ETCD_<FLAG>`). It only matters to a
//! member without data: one that has data ignores it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Names;

/// Key: every member as `name=peerURL`, comma-separated.
pub const INITIAL_CLUSTER: &str = "ETCD_INITIAL_CLUSTER";
/// Key: `new` while member 0 bootstraps the cluster alone, `existing` ever after.
pub const INITIAL_CLUSTER_STATE: &str = "ETCD_INITIAL_CLUSTER_STATE";
/// Key: the cluster's UID, so that members of two clusters can never join each other.
pub const INITIAL_CLUSTER_TOKEN: &str = "ETCD_INITIAL_CLUSTER_TOKEN";

/// What a starting member joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// `name=peerURL,...`.
    pub initial_cluster: String,
    /// Whether the cluster is being bootstrapped (member 0 alone).
    pub bootstrapping: bool,
}

/// The ConfigMap of `membership`, with the cluster's `token`.
pub fn config_map(names: &Names, membership: &Membership, token: &str) -> ConfigMap {
    let state = if membership.bootstrapping { "new" } else { "existing" };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(names.config_map()),
            namespace: Some(names.namespace.clone()),
            labels: Some(names.selector()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (INITIAL_CLUSTER.to_string(), membership.initial_cluster.clone()),
            (INITIAL_CLUSTER_STATE.to_string(), state.to_string()),
            (INITIAL_CLUSTER_TOKEN.to_string(), token.to_string()),
        ])),
        ..Default::default()
    }
}

/// The membership of a cluster being bootstrapped: member 0 alone.
pub fn bootstrap(names: &Names) -> Membership {
    Membership { initial_cluster: format!("{}={}", names.member(0), names.peer_url(0)), bootstrapping: true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_is_member_zero_alone() {
        let n = Names::new("main", "prod");
        let cm = config_map(&n, &bootstrap(&n), "uid-1");
        let data = cm.data.unwrap();
        assert_eq!(data[INITIAL_CLUSTER], "main-0=http://main-0.main-peer.prod.svc:2380");
        assert_eq!(data[INITIAL_CLUSTER_STATE], "new");
        assert_eq!(data[INITIAL_CLUSTER_TOKEN], "uid-1");
    }
}
