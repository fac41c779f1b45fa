//! The Deployment an operator runs as, rendered by the library so that every operator is
//! installed the same way: two replicas with leader election (a standby takes over within
//! one lease duration), non-root with a read-only root filesystem and no capabilities,
//! probes on the health endpoints, resource requests and limits, and replicas spread over
//! nodes. `deploy/<operator>.yaml` is this plus the RBAC, printed by `manifests`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector,
    PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SeccompProfile, SecretKeySelector, SecurityContext, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The image names of every Statecraft image, from `deploy/images/images.env`.
const IMAGES_ENV: &str = include_str!("../../deploy/images/images.env");

/// The default image of operator `name` (e.g. `statecraft-mysql`): the `..._IMAGE` entry of
/// `images.env` whose key is the name in upper case with `_` for `-`.
pub fn default_image(name: &str) -> Option<&'static str> {
    images_env(&format!("{}_IMAGE", name.to_uppercase().replace('-', "_")))
}

/// The value of `key` in `images.env` (e.g. `ETCD_IMAGE`): the operand images an operator
/// defaults to, so that it runs exactly what the local cluster has imported.
pub fn images_env(key: &str) -> Option<&'static str> {
    IMAGES_ENV.lines().filter_map(|l| l.trim().split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v.trim())
}

/// The default operand image tagged `tag`: the `key` entry of `images.env` (what the local
/// cluster has imported) when it has that tag, else the same repository, or `repository`
/// where `images.env` has no such entry, tagged `tag`.
pub fn operand_image(key: &str, repository: &str, tag: &str) -> String {
    let Some(built) = images_env(key) else { return format!("{repository}:{tag}") };
    match built.rsplit_once(':') {
        Some((_, built_tag)) if built_tag == tag => built.to_string(),
        Some((built_repository, _)) => format!("{built_repository}:{tag}"),
        None => format!("{built}:{tag}"),
    }
}

const METRICS_PORT: i32 = 8080;
const HEALTH_PORT: i32 = 8081;

/// An environment variable set from a field of the pod (the downward API), such as
/// `metadata.name` or `metadata.namespace`.
pub fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: path.into(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An environment variable set from `key` of Secret `secret` (which must have it), so a
/// password reaches a container without appearing in the pod spec.
pub fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector { name: secret.into(), key: key.into(), optional: Some(false) }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(HEALTH_PORT),
            ..Default::default()
        }),
        period_seconds: Some(10),
        ..Default::default()
    }
}

/// The container security context every Statecraft workload runs with: no privilege
/// escalation, a read-only root filesystem, non-root, no capabilities.
pub fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Default::default() }),
        ..Default::default()
    }
}

/// Prefers to put the pods selected by `labels` on different nodes, so that losing one
/// node loses one replica. Preferred rather than required, so that a single-node cluster
/// still runs every replica.
pub fn spread_over_nodes(labels: &BTreeMap<String, String>) -> Affinity {
    let term = WeightedPodAffinityTerm {
        weight: 100,
        pod_affinity_term: PodAffinityTerm {
            label_selector: Some(LabelSelector { match_labels: Some(labels.clone()), ..Default::default() }),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        },
    };
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Environment variable that overrides the operator's own image where it cannot read its
/// pod (run outside a cluster).
pub const OPERATOR_IMAGE_ENV: &str = "STATECRAFT_OPERATOR_IMAGE";

/// The name of the operator's container in its Deployment.
pub const OPERATOR_CONTAINER: &str = "operator";

/// The image the operator's own pod runs, read from the pod when `run` starts.
static OWN_IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records the image of the operator's own container (see [`operator_image`]); only the
/// first call counts.
pub fn set_operator_image(image: String) {
    let _ = OWN_IMAGE.set(image);
}

/// The operator's own image, which its Jobs run: the one its pod runs, else
/// [`OPERATOR_IMAGE_ENV`], else the default image of `name` from `images.env`. Read from the
/// pod rather than from a copy in the Deployment, because whoever installs the operator
/// (kustomize's `images:`, Helm values, OLM mirroring) rewrites the container's image and
/// nothing else: a copy would go stale and Jobs would pull an image that is not there.
pub fn operator_image(name: &str) -> Option<String> {
    OWN_IMAGE
        .get()
        .cloned()
        .or_else(|| std::env::var(OPERATOR_IMAGE_ENV).ok().filter(|i| !i.is_empty()))
        .or_else(|| default_image(name).map(str::to_string))
}

/// The labels of operator `name`'s pods (the Helm chart sets the same): what a cluster's
/// NetworkPolicy lets in.
pub fn operator_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), name.to_string()),
        ("app.kubernetes.io/part-of".to_string(), "statecraft".to_string()),
    ])
}

/// The operator's Deployment in `namespace`, running `image` as service account `name` and
/// managing resources in `watched` (set as `STATECRAFT_NAMESPACES` unless it is just
/// `namespace`, the operator's default).
pub fn deployment(name: &str, namespace: &str, watched: &[String], image: &str) -> Deployment {
    let labels = operator_labels(name);
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([("cpu".to_string(), Quantity(cpu.into())), ("memory".to_string(), Quantity(memory.into()))])
    };
    let container = Container {
        name: OPERATOR_CONTAINER.into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(vec!["run".into()]),
        env: Some(
            [
                field_env("POD_NAME", "metadata.name"),
                field_env("STATECRAFT_NAMESPACE", "metadata.namespace"),
                EnvVar { name: "STATECRAFT_LEADER_ELECTION".into(), value: Some("true".into()), ..Default::default() },
            ]
            .into_iter()
            .chain((watched != [namespace]).then(|| EnvVar {
                name: "STATECRAFT_NAMESPACES".into(),
                value: Some(watched.join(",")),
                ..Default::default()
            }))
            .collect(),
        ),
        ports: Some(vec![
            ContainerPort { name: Some("metrics".into()), container_port: METRICS_PORT, ..Default::default() },
            ContainerPort { name: Some("health".into()), container_port: HEALTH_PORT, ..Default::default() },
        ]),
        liveness_probe: Some(probe("/healthz")),
        readiness_probe: Some(probe("/readyz")),
        resources: Some(ResourceRequirements {
            requests: Some(quantities("50m", "64Mi")),
            limits: Some(BTreeMap::from([("memory".to_string(), Quantity("256Mi".into()))])),
            ..Default::default()
        }),
        security_context: Some(restricted_container()),
        ..Default::default()
    };
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(2),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels.clone()), ..Default::default() }),
                spec: Some(PodSpec {
                    service_account_name: Some(name.into()),
                    containers: vec![container],
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(65532),
                        run_as_group: Some(65532),
                        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                        ..Default::default()
                    }),
                    affinity: Some(spread_over_nodes(&labels)),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_images_come_from_images_env() {
        assert_eq!(default_image("statecraft-mysql"), Some("docker.io/statecraft/statecraft-mysql:dev"));
        assert_eq!(default_image("no-such-operator"), None);
    }

    #[test]
    fn an_operand_image_is_the_one_built_here_when_its_tag_matches() {
        assert_eq!(operand_image("ETCD_IMAGE", "elsewhere/etcd", "v3.6.16"), "gcr.io/etcd-development/etcd:v3.6.16");
        assert_eq!(operand_image("ETCD_IMAGE", "elsewhere/etcd", "v3.5.21"), "gcr.io/etcd-development/etcd:v3.5.21");
        assert_eq!(operand_image("NO_SUCH_IMAGE", "docker.io/library/mysql", "8.4"), "docker.io/library/mysql:8.4");
    }

    #[test]
    fn deployment_is_locked_down_and_elects_a_leader() {
        let d = deployment("statecraft-mysql", "db", &["db".into()], "img:1");
        let spec = d.spec.expect("spec");
        assert_eq!(spec.replicas, Some(2), "a standby for leader election");
        let pod = spec.template.spec.expect("pod spec");
        let c = &pod.containers[0];
        let sc = c.security_context.as_ref().expect("security context");
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(pod.security_context.and_then(|s| s.run_as_non_root), Some(true));
        let env: Vec<_> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert!(env.contains(&"POD_NAME") && env.contains(&"STATECRAFT_LEADER_ELECTION"));
        assert!(!env.contains(&OPERATOR_IMAGE_ENV), "the image is read from the pod: a copy would go stale");
        assert!(c.liveness_probe.is_some() && c.readiness_probe.is_some());
        assert!(c.resources.as_ref().and_then(|r| r.limits.as_ref()).is_some());
        assert_eq!(pod.service_account_name.as_deref(), Some("statecraft-mysql"));
        assert!(!env.contains(&"STATECRAFT_NAMESPACES"), "its own namespace is the default");
    }

    #[test]
    fn other_watched_namespaces_are_passed_on() {
        let d = deployment("statecraft-mysql", "ops", &["shop".into(), "billing".into()], "img:1");
        let env = d.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].env.clone().unwrap_or_default());
        let watched = env.iter().flatten().find(|e| e.name == "STATECRAFT_NAMESPACES").and_then(|e| e.value.clone());
        assert_eq!(watched.as_deref(), Some("shop,billing"));
    }
}
