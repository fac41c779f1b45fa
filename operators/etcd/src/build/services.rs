//! The peer Service (headless: each member's stable DNS name, published before the member
//! is ready, since members must find each other to become ready) and the client Service
//! (ready members only).

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::statefulset as set;

use super::{CLIENT_PORT, METRICS_PORT, Names, PEER_PORT};

fn port(name: &str, number: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port: number,
        target_port: Some(IntOrString::Int(number)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// The headless peer Service.
pub fn peer_service(names: &Names) -> Service {
    set::headless_service(
        &names.set(),
        vec![port("client", CLIENT_PORT), port("peer", PEER_PORT), port("metrics", METRICS_PORT)],
    )
}

/// The client Service.
pub fn client_service(names: &Names) -> Service {
    Service {
        metadata: names.set().meta(names.client_service()),
        spec: Some(ServiceSpec {
            selector: Some(names.selector()),
            ports: Some(vec![port("client", CLIENT_PORT)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_service_is_headless_and_publishes_unready_members() {
        let n = Names::new("main", "prod");
        let s = peer_service(&n).spec.unwrap();
        assert_eq!(s.cluster_ip.as_deref(), Some("None"));
        assert_eq!(s.publish_not_ready_addresses, Some(true));
        assert_eq!(s.selector, Some(n.selector()));
        let c = client_service(&n);
        assert_eq!(c.metadata.name.as_deref(), Some("main-client"));
        assert_eq!(c.spec.unwrap().ports.unwrap()[0].port, 2379);
    }
}
