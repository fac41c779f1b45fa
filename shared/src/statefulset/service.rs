//! The headless Service the StatefulSet's pods get their stable DNS names from.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};

use super::Names;

/// The headless Service over every pod with `ports`. It publishes pods that are not ready:
/// an operator (or the other members) must reach a server before it can become ready.
pub fn headless_service(names: &Names<'_>, ports: Vec<ServicePort>) -> Service {
    Service {
        metadata: names.meta(names.headless_service()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(names.selector()),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statefulset::names::tests::names;

    #[test]
    fn headless_service_publishes_every_pod() {
        let port = ServicePort { name: Some("mysql".into()), port: 3306, ..Default::default() };
        let s = headless_service(&names(), vec![port.clone()]);
        assert_eq!(s.metadata.name.as_deref(), Some("db-hl"));
        assert_eq!(s.metadata.labels, Some(names().selector()));
        assert!(s.metadata.annotations.is_none());
        let spec = s.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert_eq!(spec.selector, Some(names().selector()));
        assert_eq!(spec.ports, Some(vec![port]));
    }
}
