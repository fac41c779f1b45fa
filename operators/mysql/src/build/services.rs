//! The three Services: headless (stable pod DNS names, also for pods not ready yet),
//! read-write (the pod labelled primary) and read-only (ready pods labelled as serving
//! reads: the replicas, and a new primary for the moment until the read-write Service
//! lists it, see [`super::READS_LABEL`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::statefulset as set;

use super::{MYSQL_PORT, Names, ROLE_PRIMARY};
use crate::validate::ValidSpec;

fn port() -> Vec<ServicePort> {
    vec![ServicePort {
        name: Some("mysql".into()),
        port: MYSQL_PORT,
        target_port: Some(IntOrString::String("mysql".into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    }]
}

/// The headless Service the StatefulSet's pods get their DNS names from. It publishes pods
/// that are not ready: the operator must reach a server before it can make it ready.
pub fn headless_service(names: &Names) -> Service {
    set::headless_service(&names.set(), port())
}

fn client_service(
    valid: &ValidSpec,
    names: &Names,
    name: String,
    selector: BTreeMap<String, String>,
    publish_not_ready: bool,
) -> Service {
    let options = &valid.spec.service;
    Service {
        metadata: ObjectMeta {
            annotations: (!options.annotations.is_empty()).then(|| options.annotations.clone()),
            ..names.set().meta(name)
        },
        spec: Some(ServiceSpec {
            type_: Some(options.type_.as_str().into()),
            selector: Some(selector),
            ports: Some(port()),
            publish_not_ready_addresses: Some(publish_not_ready),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The read-write Service: selects the pod the operator labelled primary, ready or not.
/// The label is the operator's verdict, set only once the server accepts writes and moved
/// within a pass when it stops answering; waiting for the kubelet's readiness probe as well
/// added up to a probe period (5 s) to a failover whose new primary was not ready yet (in
/// e2e, a killed primary restarted and reinstated: writes resumed 6.5-7.8 s after the kill).
pub fn read_write_service(valid: &ValidSpec, names: &Names) -> Service {
    client_service(valid, names, names.read_write_service(), names.role_selector(ROLE_PRIMARY), true)
}

/// The read-only Service: selects ready pods labelled as serving reads (errant or lagging
/// replicas are unlabelled or not ready).
pub fn read_only_service(valid: &ValidSpec, names: &Names) -> Service {
    // Only ready endpoints: a replica with broken replication drops out.
    client_service(valid, names, names.read_only_service(), names.reads_selector(), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{MySQLClusterSpec, ServiceOptions, ServiceType};
    use crate::build::{READS_LABEL, ROLE_LABEL};
    use crate::validate::tests::{spec, valid};
    use crate::validate::validate;

    #[test]
    fn headless_service_publishes_every_pod() {
        let s = headless_service(&Names::new("db", "ns"));
        assert_eq!(s.metadata.name.as_deref(), Some("db-hl"));
        let spec = s.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert!(!spec.selector.unwrap().contains_key(ROLE_LABEL));
    }

    #[test]
    fn client_services_select_by_role() {
        let names = Names::new("db", "ns");
        let rw = read_write_service(&valid(), &names);
        assert_eq!(rw.metadata.name.as_deref(), Some("db-primary"));
        let rw = rw.spec.unwrap();
        assert_eq!(rw.selector.as_ref().unwrap()[ROLE_LABEL], "primary");
        assert_eq!(rw.selector.as_ref().unwrap()["app.kubernetes.io/instance"], "db");
        assert_eq!(rw.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(rw.ports.unwrap()[0].port, 3306);
        assert_eq!(rw.publish_not_ready_addresses, Some(true), "the operator's label decides, not the probe");
        let ro = read_only_service(&valid(), &names);
        assert_eq!(ro.metadata.name.as_deref(), Some("db-replicas"));
        let ro = ro.spec.unwrap();
        let selector = ro.selector.unwrap();
        assert_eq!(selector[READS_LABEL], "true");
        assert!(!selector.contains_key(ROLE_LABEL), "a promotion leaves it in a later pass");
        assert_eq!(ro.publish_not_ready_addresses, Some(false));
    }

    #[test]
    fn service_options_apply_to_client_services() {
        let s = MySQLClusterSpec {
            service: ServiceOptions {
                type_: ServiceType::LoadBalancer,
                annotations: [("lb.example/internal".into(), "true".into())].into(),
            },
            ..spec()
        };
        let v = validate(&s).unwrap();
        for svc in [read_write_service(&v, &Names::new("db", "ns")), read_only_service(&v, &Names::new("db", "ns"))] {
            assert_eq!(svc.metadata.annotations.unwrap()["lb.example/internal"], "true");
            assert_eq!(svc.spec.unwrap().type_.as_deref(), Some("LoadBalancer"));
        }
        assert!(headless_service(&Names::new("db", "ns")).metadata.annotations.is_none());
    }
}
