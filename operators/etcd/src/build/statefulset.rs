//! The StatefulSet of the members. Its replica count is not the spec's: the membership task
//! derives it from etcd's member list (the highest member ordinal + 1), so a pod exists
//! exactly for each member, and membership changes go member first, pod second.

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy};
use k8s_openapi::api::core::v1::{
    ConfigMapEnvSource, Container, ContainerPort, EnvFromSource, HTTPGetAction, PodSecurityContext, PodSpec, Probe,
    SeccompProfile, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::deploy::{field_env, restricted_container, spread_over_nodes};
use statecraft_shared::statefulset as set;

use super::{CLIENT_PORT, DATA_DIR, DATA_MOUNT, METRICS_PORT, Names, PEER_PORT};
use crate::validate::ValidSpec;

/// Name of the etcd container.
pub const CONTAINER: &str = "etcd";
/// Name of the data volume claim template (claims are `data-<pod>`).
pub use statecraft_shared::statefulset::DATA_VOLUME;

fn http_probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(METRICS_PORT),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(3),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// etcd's command line. The member's name and URLs come from the pod name (`$(POD_NAME)`,
/// expanded by the kubelet: the image has no shell); the membership it joins comes from the
/// ConfigMap as `ETCD_INITIAL_CLUSTER*` variables, read when the container starts, so that
/// changing the membership never changes the pod template (which would restart members).
pub fn args(valid: &ValidSpec, names: &Names) -> Vec<String> {
    let host = format!("$(POD_NAME).{}.{}.svc", names.peer_service(), names.namespace);
    vec![
        "--name=$(POD_NAME)".into(),
        format!("--data-dir={DATA_DIR}"),
        format!("--listen-peer-urls=http://0.0.0.0:{PEER_PORT}"),
        format!("--listen-client-urls=http://0.0.0.0:{CLIENT_PORT}"),
        format!("--listen-metrics-urls=http://0.0.0.0:{METRICS_PORT}"),
        format!("--advertise-client-urls=http://{host}:{CLIENT_PORT}"),
        format!("--initial-advertise-peer-urls=http://{host}:{PEER_PORT}"),
        format!("--quota-backend-bytes={}", valid.quota_bytes),
        // Keep one hour of history: without compaction the database only grows, and
        // defragmentation has nothing to give back.
        "--auto-compaction-mode=periodic".into(),
        "--auto-compaction-retention=1h".into(),
        // A member never refuses a removal or addition that would leave too few started
        // members: the operator's planner checks quorum before every change.
        "--strict-reconfig-check=true".into(),
    ]
}

/// The StatefulSet with `replicas` pods (decided by the membership task). Pods are updated
/// only when the task deletes them (`OnDelete`): the rolling upgrade goes followers first,
/// the leader last. Claims of pods removed by a scale-in are deleted with them: their
/// member is already gone from the cluster, and a stale data directory would stop a later
/// member of that ordinal from joining.
pub fn statefulset(valid: &ValidSpec, names: &Names, replicas: u32, extra: RestoreParts) -> StatefulSet {
    let spec = &valid.spec;
    let mut security = restricted_container();
    // The official image runs etcd as root (it owns /var/lib/etcd); with every capability
    // dropped and a read-only root filesystem root can write only its own volume.
    security.run_as_user = Some(0);
    security.run_as_group = Some(0);
    security.run_as_non_root = Some(false);
    let container = Container {
        name: CONTAINER.into(),
        image: Some(valid.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["/usr/local/bin/etcd".into()]),
        args: Some(args(valid, names)),
        env: Some(vec![field_env("POD_NAME", "metadata.name")]),
        env_from: Some(vec![EnvFromSource {
            config_map_ref: Some(ConfigMapEnvSource { name: names.config_map(), optional: Some(false) }),
            ..Default::default()
        }]),
        ports: Some(vec![port("client", CLIENT_PORT), port("peer", PEER_PORT), port("metrics", METRICS_PORT)]),
        // A joining member may replay a large snapshot before it answers.
        startup_probe: Some(http_probe("/livez", 5, 60)),
        liveness_probe: Some(http_probe("/livez", 10, 6)),
        // Ready means "serves linearizable reads, no corruption alarm": learners and
        // members cut off from the quorum receive no client traffic.
        readiness_probe: Some(http_probe("/readyz", 5, 2)),
        resources: spec.resources.clone(),
        volume_mounts: Some(vec![VolumeMount {
            name: DATA_VOLUME.into(),
            mount_path: DATA_MOUNT.into(),
            ..Default::default()
        }]),
        security_context: Some(security),
        ..Default::default()
    };
    let pod = PodSpec {
        init_containers: (!extra.init_containers.is_empty()).then_some(extra.init_containers),
        containers: vec![container],
        volumes: (!extra.volumes.is_empty()).then_some(extra.volumes),
        termination_grace_period_seconds: Some(30),
        enable_service_links: Some(false),
        automount_service_account_token: Some(false),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
            ..Default::default()
        }),
        affinity: Some(spread_over_nodes(&names.selector())),
        ..Default::default()
    };
    let parts = set::Parts {
        replicas: replicas as i32,
        pod,
        pod_annotations: None,
        claim: set::data_claim_template(&names.set(), &spec.storage.size, spec.storage.storage_class_name.clone()),
        claim_retention: Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
            when_scaled: Some("Delete".into()),
            when_deleted: Some("Retain".into()),
        }),
        pod_template: spec.pod_template.clone(),
        ..Default::default()
    };
    set::statefulset(&names.set(), parts)
}

/// What a cluster bootstrapped from a snapshot adds to its pods (see `build::restore`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreParts {
    /// Init containers that restore member 0's data before etcd starts.
    pub init_containers: Vec<Container>,
    /// The volumes they need.
    pub volumes: Vec<Volume>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::tests::spec;
    use crate::validate::validate;

    fn build(replicas: u32) -> StatefulSet {
        statefulset(&validate(&spec()).unwrap(), &Names::new("main", "prod"), replicas, RestoreParts::default())
    }

    #[test]
    fn statefulset_shape() {
        let sts = build(2);
        let spec = sts.spec.unwrap();
        assert_eq!(spec.replicas, Some(2), "the task's count, not the spec's");
        assert_eq!(spec.service_name.as_deref(), Some("main-peer"));
        assert_eq!(spec.update_strategy.unwrap().type_.as_deref(), Some("OnDelete"));
        let retention = spec.persistent_volume_claim_retention_policy.unwrap();
        assert_eq!(retention.when_scaled.as_deref(), Some("Delete"));
        assert_eq!(retention.when_deleted.as_deref(), Some("Retain"), "deleting a cluster keeps its data");
        let pod = spec.template.spec.unwrap();
        assert!(pod.init_containers.is_none());
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("gcr.io/etcd-development/etcd:v3.6.16"));
        let args = c.args.clone().unwrap();
        assert!(args.contains(&"--initial-advertise-peer-urls=http://$(POD_NAME).main-peer.prod.svc:2380".into()));
        assert!(args.contains(&"--quota-backend-bytes=858993456".into()));
        assert!(!args.iter().any(|a| a.starts_with("--initial-cluster")), "membership comes from the ConfigMap");
        let env_from = &c.env_from.as_ref().unwrap()[0];
        assert_eq!(env_from.config_map_ref.as_ref().unwrap().name, "main-members");
        let path = |p: &Option<Probe>| p.as_ref().unwrap().http_get.as_ref().unwrap().path.clone().unwrap();
        assert_eq!(path(&c.readiness_probe), "/readyz");
        assert_eq!(path(&c.liveness_probe), "/livez");
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.capabilities.as_ref().unwrap().drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert_eq!(pod.automount_service_account_token, Some(false));
    }

    #[test]
    fn membership_changes_do_not_change_the_template() {
        let a = build(1).spec.unwrap().template;
        let b = build(5).spec.unwrap().template;
        assert_eq!(a, b);
    }
}
