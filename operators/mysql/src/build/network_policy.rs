//! The NetworkPolicy of a cluster that asks for one (`spec.networkPolicy`): the servers
//! among themselves (replication), the operator and the cluster's Jobs on the SQL port (the
//! operator on the exporter's too), the clients the spec names on the SQL port and the
//! scrapers it names on the exporter's port.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use statecraft_shared::deploy::operator_labels;
use statecraft_shared::network_policy::{self as shared, Ports};
use statecraft_shared::runner::Operator;

use super::jobs::CLUSTER_LABEL;
use super::{MYSQL_PORT, Names, exporter};
use crate::MysqlOperator;
use crate::validate::ValidSpec;

/// The cluster's NetworkPolicy; `None` when the spec asks for none.
pub fn network_policy(valid: &ValidSpec, names: &Names) -> Option<NetworkPolicy> {
    let access = valid.spec.network_policy.as_ref()?;
    let metrics: &[i32] = if valid.spec.exporter.enabled { &[exporter::PORT] } else { &[] };
    let ports = Ports {
        client: &[MYSQL_PORT],
        member: &[],
        metrics,
        operator: operator_labels(MysqlOperator::NAME),
        jobs: BTreeMap::from([(CLUSTER_LABEL.to_string(), names.cluster.clone())]),
    };
    Some(shared::network_policy(&names.set(), access, &ports))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::{tests::spec, validate};

    #[test]
    fn only_a_cluster_that_asks_gets_one_and_the_exporter_port_only_with_the_exporter() {
        let names = Names::new("db", "ns");
        assert_eq!(network_policy(&validate(&spec()).expect("valid"), &names), None);
        let mut s = spec();
        s.network_policy = Some(Default::default());
        let p = network_policy(&validate(&s).expect("valid"), &names).expect("asked for");
        let ports = |p: &NetworkPolicy| -> Vec<String> {
            let ingress = p.spec.as_ref().and_then(|s| s.ingress.clone()).unwrap_or_default();
            ingress.iter().flat_map(|r| r.ports.iter().flatten()).map(|p| format!("{:?}", p.port)).collect()
        };
        assert!(!ports(&p).iter().any(|p| p.contains("9104")), "no exporter, no metrics port: {:?}", ports(&p));
        s.exporter.enabled = true;
        let p = network_policy(&validate(&s).expect("valid"), &names).expect("asked for");
        assert!(ports(&p).iter().any(|p| p.contains("9104")));
        let ingress = p.spec.and_then(|s| s.ingress).unwrap_or_default();
        let jobs: Vec<_> = ingress.iter().flat_map(|r| r.from.clone().unwrap_or_default()).collect();
        let labels: Vec<_> = jobs.iter().filter_map(|f| f.pod_selector.as_ref()?.match_labels.clone()).collect();
        assert!(labels.iter().any(|l| l.get(CLUSTER_LABEL).map(String::as_str) == Some("db")), "{labels:?}");
        assert!(labels.iter().any(|l| l.get("app.kubernetes.io/name").map(String::as_str) == Some("statecraft-mysql")));
    }
}
