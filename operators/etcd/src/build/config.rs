//! The ConfigMap a starting member reads its membership from, as `ETCD_INITIAL_*`
//! environment variables (etcd reads its flags from `ETCD_<FLAG>`). It only matters to a
//! member without data: one that has data ignores it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::Names;
use crate::membership::plan::InitialCluster;

/// Key: every member as `name=peerURL`, comma-separated.
pub const INITIAL_CLUSTER: &str = "ETCD_INITIAL_CLUSTER";
/// Key: `new` while member 0 bootstraps the cluster alone, `existing` ever after.
pub const INITIAL_CLUSTER_STATE: &str = "ETCD_INITIAL_CLUSTER_STATE";
/// Key: the cluster's UID, so that members of two clusters can never join each other.
pub const INITIAL_CLUSTER_TOKEN: &str = "ETCD_INITIAL_CLUSTER_TOKEN";

/// The ConfigMap of `initial` (what the planner derived from the member list), with the
/// cluster's `token`.
pub fn config_map(names: &Names, initial: &InitialCluster, token: &str) -> ConfigMap {
    ConfigMap {
        metadata: names.set().meta(names.config_map()),
        data: Some(BTreeMap::from([
            (INITIAL_CLUSTER.to_string(), initial.members.clone()),
            (INITIAL_CLUSTER_STATE.to_string(), initial.state.to_string()),
            (INITIAL_CLUSTER_TOKEN.to_string(), token.to_string()),
        ])),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_etcd_environment_variables() {
        let n = Names::new("main", "prod");
        let initial = InitialCluster { members: "main-0=http://main-0.main-peer.prod.svc:2380".into(), state: "new" };
        let cm = config_map(&n, &initial, "uid-1");
        let data = cm.data.unwrap();
        assert_eq!(data[INITIAL_CLUSTER], "main-0=http://main-0.main-peer.prod.svc:2380");
        assert_eq!(data[INITIAL_CLUSTER_STATE], "new");
        assert_eq!(data[INITIAL_CLUSTER_TOKEN], "uid-1");
    }
}
