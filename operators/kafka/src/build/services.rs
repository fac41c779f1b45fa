//! The Services: a pool's headless Service (each node's stable DNS name, published before
//! the node is ready since the nodes must find each other to become ready), the bootstrap
//! Service over every broker that is ready (registered and unfenced: the readiness gate),
//! and for an external listener one Service per broker, of the spec's type, selecting that
//! broker's pod alone (a client must reach the very broker that leads a partition).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::statefulset as set;

use crate::api::cluster::CONTROLLER_PORT;
use crate::api::{ExternalListenerType, NodeRole};
use crate::names::{APP_NAME, Names};
use crate::validate::ValidCluster;

use super::{BROKER_LABEL, CLUSTER_LABEL, broker_role, is_broker};

/// The label the StatefulSet controller gives each pod, with the pod's name.
const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

fn port(name: &str, number: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port: number,
        target_port: Some(IntOrString::Int(number)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// The ports nodes of `role` listen on, the main one (which the probes use) first:
/// `(name, port)`.
pub fn ports(valid: &ValidCluster, role: NodeRole) -> Vec<(&'static str, i32)> {
    let listeners = &valid.spec.listeners;
    let mut ports = Vec::new();
    if is_broker(role) {
        ports.push(("internal", listeners.internal.port));
    }
    if role != NodeRole::Broker {
        ports.push(("controller", CONTROLLER_PORT));
    }
    if let Some(external) = listeners.external.as_ref().filter(|_| is_broker(role)) {
        ports.push(("external", external.port));
    }
    ports
}

/// The headless Service of the pool of `role`.
pub fn headless_service(valid: &ValidCluster, names: &Names, role: NodeRole) -> Service {
    let ports = ports(valid, role).into_iter().map(|(name, number)| port(name, number)).collect();
    set::headless_service(&names.pool(role), ports)
}

/// The Service clients bootstrap from, on the internal listener: every broker of the
/// cluster, whichever pool it is in.
pub fn bootstrap_service(valid: &ValidCluster, names: &Names) -> Service {
    let selector = BTreeMap::from([
        (set::NAME_LABEL.to_string(), APP_NAME.to_string()),
        (CLUSTER_LABEL.to_string(), names.cluster.clone()),
        (BROKER_LABEL.to_string(), "true".to_string()),
    ]);
    Service {
        metadata: names.cluster_set().meta(names.bootstrap_service()),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector),
            ports: Some(vec![port("internal", valid.spec.listeners.internal.port)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The external listener's Services, one per broker by ordinal; none without the listener.
pub fn external_services(valid: &ValidCluster, names: &Names) -> Vec<Service> {
    let Some(external) = &valid.spec.listeners.external else { return Vec::new() };
    let type_ = match external.type_ {
        ExternalListenerType::NodePort => "NodePort",
        ExternalListenerType::LoadBalancer => "LoadBalancer",
    };
    let role = broker_role(&valid.layout);
    (0..valid.layout.brokers())
        .map(|ordinal| {
            let mut metadata = names.cluster_set().meta(names.external_service(ordinal as u32));
            if !external.service_annotations.is_empty() {
                metadata.annotations = Some(external.service_annotations.clone());
            }
            Service {
                metadata,
                spec: Some(ServiceSpec {
                    type_: Some(type_.into()),
                    selector: Some(BTreeMap::from([(POD_NAME_LABEL.to_string(), names.pod(role, ordinal as u32))])),
                    ports: Some(vec![port("external", external.port)]),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect()
}

/// `host` as a listener address: an IPv6 address in brackets.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() }
}

/// The address broker `ordinal` advertises on the external listener, `host:port`, or `None`
/// while it cannot be known yet; `service` is its external Service as the API server has it.
/// The spec's `advertised` entry wins; without a port there, the Service's (the node port
/// of a NodePort Service). Without an entry: for NodePort, an empty host (the broker's node,
/// which the start script reads from the downward API) and the node port; for
/// LoadBalancer, the load balancer's first ingress address and the listener's port.
pub fn external_address(valid: &ValidCluster, ordinal: i32, service: Option<&Service>) -> Option<String> {
    let external = valid.spec.listeners.external.as_ref()?;
    let node_port = || {
        let ports = service?.spec.as_ref()?.ports.as_ref()?;
        ports.iter().find(|p| p.port == external.port).and_then(|p| p.node_port)
    };
    let service_port = || match external.type_ {
        ExternalListenerType::NodePort => node_port(),
        ExternalListenerType::LoadBalancer => Some(external.port),
    };
    if let Some(entry) = external.advertised.iter().find(|a| a.broker == ordinal) {
        let port = entry.port.or_else(service_port)?;
        return Some(format!("{}:{port}", bracketed(&entry.host)));
    }
    match external.type_ {
        ExternalListenerType::NodePort => node_port().map(|port| format!(":{port}")),
        ExternalListenerType::LoadBalancer => {
            let ingress = service?.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref()?.first()?;
            let host = ingress.hostname.as_ref().or(ingress.ip.as_ref()).filter(|h| !h.is_empty())?;
            Some(format!("{}:{}", bracketed(host), external.port))
        }
    }
}
