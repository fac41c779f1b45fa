//! Who may connect to a cluster's members (`spec.networkPolicy`): one NetworkPolicy per
//! cluster, selecting its member pods, that lets in the members themselves on every port
//! they use among themselves, the operator on the client and metrics ports (it reads the
//! members' metrics), the cluster's own Jobs on the client ports, the clients the user names
//! on the client ports and the metrics scrapers the user names on the metrics ports — and
//! nothing else. It is opt-in: a cluster without
//! `spec.networkPolicy` gets no policy (and loses it when the field is removed), so turning
//! it on never cuts off clients of an existing cluster by surprise.
//!
//! Traffic from the node itself (the kubelet's probes) is not what NetworkPolicies govern on
//! most network plugins and is not restricted here.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::statefulset::Names;

/// Who may reach the members, beyond the members themselves, the operator and the cluster's
/// Jobs.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAccess {
    /// Who may connect on the client ports, as NetworkPolicy peers (pod and namespace
    /// selectors, IP blocks). Unset: every pod of the cluster's namespace. An empty list:
    /// no client beyond the operator and the cluster's Jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<Vec<NetworkPolicyPeer>>,

    /// Who may scrape the metrics ports (Prometheus), as NetworkPolicy peers. Unset: every
    /// pod of the cluster's namespace. An empty list: no scraper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<NetworkPolicyPeer>>,
}

/// The ports of one system and the pods that act for the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Ports<'a> {
    /// Ports clients connect to (the client Services' target ports).
    pub client: &'a [i32],
    /// Ports only members use among themselves (peer traffic that is not on a client port).
    pub member: &'a [i32],
    /// Ports metrics are scraped on.
    pub metrics: &'a [i32],
    /// Labels of the operator's pods (in the cluster's namespace).
    pub operator: BTreeMap<String, String>,
    /// Labels of the cluster's Job pods (backups, restores), which connect as clients.
    pub jobs: BTreeMap<String, String>,
}

/// Every pod of the namespace: the default clients and scrapers.
fn namespace_pods() -> Vec<NetworkPolicyPeer> {
    vec![NetworkPolicyPeer { pod_selector: Some(LabelSelector::default()), ..Default::default() }]
}

fn pods(labels: BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector { match_labels: Some(labels), ..Default::default() }),
        ..Default::default()
    }
}

fn tcp(ports: &[&[i32]]) -> Vec<NetworkPolicyPort> {
    ports
        .iter()
        .flat_map(|ps| ps.iter())
        .map(|p| NetworkPolicyPort {
            port: Some(IntOrString::Int(*p)),
            protocol: Some("TCP".into()),
            ..Default::default()
        })
        .collect()
}

/// The cluster's NetworkPolicy (named after the cluster), letting in what `access` and
/// `ports` say. A rule is left out when it names no peer or no port: a rule without peers
/// would let every source in.
pub fn network_policy(names: &Names<'_>, access: &NetworkAccess, ports: &Ports<'_>) -> NetworkPolicy {
    let clients = access.clients.clone().unwrap_or_else(namespace_pods);
    let scrapers = access.metrics.clone().unwrap_or_else(namespace_pods);
    let rules = [
        (vec![pods(names.selector())], tcp(&[ports.client, ports.member, ports.metrics])),
        (vec![pods(ports.operator.clone())], tcp(&[ports.client, ports.metrics])),
        (vec![pods(ports.jobs.clone())], tcp(&[ports.client])),
        (clients, tcp(&[ports.client])),
        (scrapers, tcp(&[ports.metrics])),
    ];
    let ingress = rules
        .into_iter()
        .filter(|(from, ports)| !from.is_empty() && !ports.is_empty())
        .map(|(from, ports)| NetworkPolicyIngressRule { from: Some(from), ports: Some(ports) })
        .collect();
    NetworkPolicy {
        metadata: names.meta(names.cluster.to_string()),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector { match_labels: Some(names.selector()), ..Default::default() }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names<'static> {
        Names { cluster: "db", namespace: "ns", app: "mysql", headless_suffix: "-headless" }
    }

    fn ports() -> Ports<'static> {
        Ports {
            client: &[3306],
            member: &[],
            metrics: &[9104],
            operator: BTreeMap::from([("app.kubernetes.io/name".into(), "statecraft-mysql".into())]),
            jobs: BTreeMap::from([("mysql.statecraft.io/cluster".into(), "db".into())]),
        }
    }

    fn rules(p: &NetworkPolicy) -> Vec<(Vec<NetworkPolicyPeer>, Vec<i32>)> {
        let ingress = p.spec.as_ref().and_then(|s| s.ingress.clone()).unwrap_or_default();
        ingress
            .into_iter()
            .map(|r| {
                let ports = r.ports.unwrap_or_default().into_iter().filter_map(|p| match p.port {
                    Some(IntOrString::Int(n)) => Some(n),
                    _ => None,
                });
                (r.from.unwrap_or_default(), ports.collect())
            })
            .collect()
    }

    #[test]
    fn by_default_the_namespace_connects_and_scrapes_and_members_reach_each_other() {
        let p = network_policy(&names(), &NetworkAccess::default(), &ports());
        assert_eq!(p.metadata.name.as_deref(), Some("db"));
        let spec = p.spec.as_ref().expect("a spec");
        assert_eq!(spec.pod_selector.as_ref().and_then(|s| s.match_labels.clone()), Some(names().selector()));
        assert_eq!(spec.policy_types.as_deref(), Some(&["Ingress".to_string()][..]));
        let r = rules(&p);
        assert_eq!(r.len(), 5);
        assert_eq!(r[0], (vec![pods(names().selector())], vec![3306, 9104]), "members among themselves");
        assert_eq!(r[1], (vec![pods(ports().operator)], vec![3306, 9104]), "the operator reads the metrics too");
        assert_eq!(r[2], (vec![pods(ports().jobs)], vec![3306]), "the Jobs: the client port only");
        assert_eq!(r[3], (namespace_pods(), vec![3306]));
        assert_eq!(r[4], (namespace_pods(), vec![9104]));
    }

    /// An empty peer list would let every source in: the rule is left out instead.
    #[test]
    fn no_clients_and_no_scrapers_leave_their_rules_out() {
        let none = NetworkAccess { clients: Some(vec![]), metrics: Some(vec![]) };
        let r = rules(&network_policy(&names(), &none, &ports()));
        assert_eq!(r.len(), 3, "members, the operator, the Jobs");
        assert!(r.iter().all(|(from, _)| !from.is_empty()));
        let no_metrics = Ports { metrics: &[], ..ports() };
        let r = rules(&network_policy(&names(), &NetworkAccess::default(), &no_metrics));
        assert_eq!(r.len(), 4, "no metrics port: no scraper rule");
    }

    #[test]
    fn named_clients_replace_the_namespace() {
        let app = pods(BTreeMap::from([("app".into(), "shop".into())]));
        let access = NetworkAccess { clients: Some(vec![app.clone()]), metrics: None };
        let r = rules(&network_policy(&names(), &access, &ports()));
        assert_eq!(r[3], (vec![app], vec![3306]));
    }
}
