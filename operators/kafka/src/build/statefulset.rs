//! A pool's StatefulSet (on the shared skeleton: pods created in parallel, replaced only
//! when the operator deletes them) and its PodDisruptionBudget.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, PodReadinessGate,
    PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::deploy::{field_env, restricted_container, spread_over_nodes};
use statecraft_shared::quantity;
use statecraft_shared::statefulset::{self as set, Budget};

use crate::api::NodeRole;
use crate::names::Names;
use crate::validate::ValidCluster;

use super::script::{EXTERNAL_PORT_ENV, INTERNAL_PORT_ENV};
use super::services::ports;
use super::{
    BROKER_LABEL, CLUSTER_LABEL, CONFIG_DIR, CONFIG_HASH_ANNOTATION, DATA_MOUNT, KAFKA_UID, Pool, ROLE_LABEL, RUN_DIR,
    RUNNING_CONDITION, config, is_broker, role_name,
};

/// Name of the Kafka container.
pub const CONTAINER: &str = "kafka";

/// The heap is half the memory limit: brokers serve reads from the page cache, and the JVM
/// needs memory beyond the heap (metaspace, threads, direct buffers of the network layer).
const HEAP_FRACTION: u64 = 2;
/// At most 6 GiB of heap: more only lengthens collections (Kafka's own operations guide
/// runs brokers with 6 GB).
const MAX_HEAP_MIB: u64 = 6 * 1024;

/// How long a node may take to stop. A broker's controlled shutdown moves the leadership of
/// its partitions away, then it flushes and closes every log and writes the clean-shutdown
/// marker; killed before that, it recovers every unflushed segment at its next start, which
/// on a large broker takes far longer than waiting here. Controllers only close the
/// metadata log.
fn termination_grace_seconds(role: NodeRole) -> i64 {
    match role {
        NodeRole::Controller => 60,
        NodeRole::Broker | NodeRole::Combined => 300,
    }
}

fn tcp_probe(port: i32, period: i32, failures: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction { port: IntOrString::Int(port), ..Default::default() }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// `KAFKA_HEAP_OPTS` for a container limited to `resources`' memory; `None` without a
/// limit (the image's default heap, 1 GiB).
pub fn heap_opts(resources: Option<&ResourceRequirements>) -> Option<String> {
    let limit = resources?.limits.as_ref()?.get("memory")?;
    let bytes = quantity::bytes(&limit.0).ok()?;
    let mib = (bytes / HEAP_FRACTION / (1024 * 1024)).clamp(1, MAX_HEAP_MIB);
    Some(format!("-Xms{mib}m -Xmx{mib}m"))
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount { name: name.into(), mount_path: path.into(), read_only: Some(read_only), ..Default::default() }
}

fn empty_dir(name: &str) -> Volume {
    Volume { name: name.into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() }
}

/// The labels of the pods of `role`: the pool's selector and the cluster-wide labels.
pub fn pod_labels(names: &Names, role: NodeRole) -> BTreeMap<String, String> {
    let mut labels = names.pool(role).selector();
    labels.insert(CLUSTER_LABEL.into(), names.cluster.clone());
    labels.insert(ROLE_LABEL.into(), role_name(role).into());
    if is_broker(role) {
        labels.insert(BROKER_LABEL.into(), "true".into());
    }
    labels
}

/// Where each node serves Kafka's JMX metrics for Prometheus (the JMX exporter's usual port).
pub const METRICS_PORT: i32 = 9404;
/// The name of that container port, which `deploy/kafka/podmonitor.yaml` scrapes.
pub const METRICS_PORT_NAME: &str = "metrics";
/// The variable that makes the image's `kafka-server-start` load the exporter on a port.
pub const METRICS_PORT_ENV: &str = "KAFKA_METRICS_PORT";

/// The StatefulSet of `pool`, its pods annotated with `hash` ([`config::template_hash`]).
pub fn statefulset(valid: &ValidCluster, names: &Names, pool: &Pool<'_>, hash: &str) -> StatefulSet {
    let role = pool.role;
    let ports = ports(valid, role);
    let main_port = ports.first().map_or(crate::api::cluster::CONTROLLER_PORT, |(_, p)| *p);
    let mut env = vec![
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        // The node's address, advertised on a NodePort listener without a configured host.
        field_env("HOST_IP", "status.hostIP"),
    ];
    let port_env = |name: &str, port: Option<i32>| {
        port.map(|p| EnvVar { name: name.into(), value: Some(p.to_string()), ..Default::default() })
    };
    let listeners = &valid.spec.listeners;
    if is_broker(role) {
        env.extend(port_env(INTERNAL_PORT_ENV, Some(listeners.internal.port)));
        env.extend(port_env(EXTERNAL_PORT_ENV, listeners.external.as_ref().map(|e| e.port)));
    }
    if let Some(heap) = heap_opts(pool.resources) {
        env.push(EnvVar { name: "KAFKA_HEAP_OPTS".into(), value: Some(heap), ..Default::default() });
    }
    // Kafka's own JMX metrics on the `metrics` port (the image's kafka-server-start loads
    // the Prometheus JMX exporter for it; an image without the agent starts without it).
    env.extend(port_env(METRICS_PORT_ENV, Some(METRICS_PORT)));
    let container_ports = ports.iter().copied().chain([(METRICS_PORT_NAME, METRICS_PORT)]);
    let container = Container {
        name: CONTAINER.into(),
        image: Some(valid.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["/bin/sh".into(), format!("{CONFIG_DIR}/{}", config::START_SCRIPT), role_name(role).into()]),
        env: Some(env),
        ports: Some(
            container_ports
                .map(|(name, number)| ContainerPort {
                    name: Some(name.into()),
                    container_port: number,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                })
                .collect(),
        ),
        // Log recovery after an unclean stop (and a broker waiting for its external
        // address) comes before the listeners: up to an hour.
        startup_probe: Some(tcp_probe(main_port, 10, 360)),
        // Two minutes without accepting a connection: a long collection or a slow controlled
        // shutdown is not a dead broker.
        liveness_probe: Some(tcp_probe(main_port, 10, 12)),
        // The port alone; the readiness gate says whether the node serves.
        readiness_probe: Some(tcp_probe(main_port, 10, 3)),
        resources: pool.resources.cloned(),
        volume_mounts: Some(vec![
            mount(set::DATA_VOLUME, DATA_MOUNT, false),
            mount("config", CONFIG_DIR, true),
            mount("run", RUN_DIR, false),
            // The JVM's and the compression libraries' native code unpack here: the root
            // filesystem is read-only.
            mount("tmp", "/tmp", false),
        ]),
        security_context: Some(restricted_container()),
        ..Default::default()
    };
    let pod = PodSpec {
        init_containers: pool
            .storage
            .fix_ownership
            .then(|| vec![set::ownership_fix(&valid.image, DATA_MOUNT, KAFKA_UID)]),
        containers: vec![container],
        readiness_gates: Some(vec![PodReadinessGate { condition_type: RUNNING_CONDITION.into() }]),
        termination_grace_period_seconds: Some(termination_grace_seconds(role)),
        enable_service_links: Some(false),
        automount_service_account_token: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_user: Some(KAFKA_UID),
            run_as_group: Some(KAFKA_UID),
            fs_group: Some(KAFKA_UID),
            // A large volume is not walked at every start once its root is Kafka's.
            fs_group_change_policy: Some("OnRootMismatch".into()),
            run_as_non_root: Some(true),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
            ..Default::default()
        }),
        affinity: Some(spread_over_nodes(&names.pool(role).selector())),
        volumes: Some(vec![
            Volume {
                name: "config".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: names.config_map(),
                    default_mode: Some(0o444),
                    ..Default::default()
                }),
                ..Default::default()
            },
            empty_dir("run"),
            empty_dir("tmp"),
        ]),
        ..Default::default()
    };
    let pool_names = names.pool(role);
    let parts = set::Parts {
        replicas: pool.replicas,
        pod,
        pod_annotations: Some(BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_string(), hash.to_string())])),
        claim: set::data_claim_template(&pool_names, &pool.storage.size, pool.storage.storage_class_name.clone()),
        // Kept when the set is deleted or scaled in: a broker's data is removed only once
        // its partitions have moved (part 2).
        claim_retention: None,
        pod_labels: pod_labels(names, role),
        pod_template: valid.spec.pod_template.clone(),
    };
    set::statefulset(&pool_names, parts)
}

/// The pool's PodDisruptionBudget: one node of a pool at a time. A quorum of 3 or 5 keeps
/// its majority and a partition replicated 3 times its min ISR of 2; a pool of one node can
/// still be drained (and is unavailable meanwhile) rather than block the node forever.
pub fn pdb(names: &Names, role: NodeRole) -> PodDisruptionBudget {
    set::pdb(&names.pool(role), Budget::MaxUnavailable(1))
}
