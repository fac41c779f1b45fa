//! The StatefulSet of the servers.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, ExecAction, Lifecycle,
    LifecycleHandler, PodSecurityContext, PodSpec, Probe, SeccompProfile, Volume, VolumeMount,
};

use super::config::{
    ALIVE_SH, BACKUP_PASSWORD_ENV, CONFIG_DIR, DATA_MOUNT, EXPORTER_PASSWORD_ENV, HANDOVER_SH, OPERATOR_PASSWORD_ENV,
    READ_WRITE_SERVICE_ENV, READY_SH, REPLICATION_PASSWORD_ENV, ROOT_PASSWORD_ENV, RUN_DIR, START_SH, config_path,
    my_cnf,
};
use super::secret::{BACKUP_KEY, EXPORTER_KEY, OPERATOR_KEY, REPLICATION_KEY, ROOT_KEY};
use super::{MYSQL_PORT, Names, content_hash, exporter, tls};
use crate::validate::ValidSpec;
use statecraft_shared::deploy::{field_env, restricted_container, secret_env, spread_over_nodes};
use statecraft_shared::statefulset as set;

/// The uid and gid of `mysql` in the server images.
pub const MYSQL_UID: i64 = 999;
/// Annotation on the pod template with the hash of my.cnf: a configuration change makes a
/// new StatefulSet revision, which the controller rolls out in order.
pub const CONFIG_HASH_ANNOTATION: &str = "mysql.statecraft.io/config-hash";
/// Name of the server container.
pub const CONTAINER: &str = "mysql";
/// Name of the data volume claim template.
pub use statecraft_shared::statefulset::DATA_VOLUME;

fn exec_probe(script: &str, period: i32, timeout: i32, failures: i32) -> Probe {
    Probe {
        exec: Some(ExecAction { command: Some(vec!["/bin/sh".into(), config_path(script)]) }),
        period_seconds: Some(period),
        timeout_seconds: Some(timeout),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount { name: name.into(), mount_path: path.into(), read_only: Some(read_only), ..Default::default() }
}

/// The StatefulSet: `spec.replicas` pods (none while stopped), each with its own volume,
/// updated only when the controller deletes a pod (`OnDelete`), so that upgrades go
/// replicas first and primary last.
pub fn statefulset(valid: &ValidSpec, names: &Names) -> StatefulSet {
    let spec = &valid.spec;
    let annotations = BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_string(), content_hash(&my_cnf(valid)))]);

    let mut env = vec![
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        EnvVar { name: "HEADLESS_SERVICE".into(), value: Some(names.set().headless_service()), ..Default::default() },
        EnvVar { name: READ_WRITE_SERVICE_ENV.into(), value: Some(names.read_write_service()), ..Default::default() },
        secret_env(OPERATOR_PASSWORD_ENV, &names.secret(), OPERATOR_KEY),
        secret_env(REPLICATION_PASSWORD_ENV, &names.secret(), REPLICATION_KEY),
        secret_env(ROOT_PASSWORD_ENV, &names.secret(), ROOT_KEY),
        secret_env(BACKUP_PASSWORD_ENV, &names.secret(), BACKUP_KEY),
    ];
    // The init file creates the exporter's account only while the sidecar runs.
    if valid.exporter_image.is_some() {
        env.push(secret_env(EXPORTER_PASSWORD_ENV, &names.secret(), EXPORTER_KEY));
    }
    let container = Container {
        name: CONTAINER.into(),
        image: Some(valid.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["/bin/sh".into(), config_path(START_SH)]),
        env: Some(env),
        ports: Some(vec![ContainerPort {
            name: Some("mysql".into()),
            container_port: MYSQL_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        // Initialisation and crash recovery may take minutes; liveness starts after this.
        startup_probe: Some(exec_probe(ALIVE_SH, 5, 5, 120)),
        liveness_probe: Some(exec_probe(ALIVE_SH, 10, 5, 6)),
        readiness_probe: Some(exec_probe(READY_SH, 5, 5, 2)),
        // A primary being deleted or evicted keeps serving until the operator has switched
        // over (see `handover_sh`), so a drain costs a switchover, not a failover.
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction { command: Some(vec!["/bin/sh".into(), config_path(HANDOVER_SH)]) }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        resources: spec.resources.clone(),
        volume_mounts: Some(
            [
                mount(DATA_VOLUME, DATA_MOUNT, false),
                mount("config", CONFIG_DIR, true),
                mount("run", RUN_DIR, false),
                mount("tmp", "/tmp", false),
            ]
            .into_iter()
            .chain(spec.tls.as_ref().map(|_| tls::mount()))
            .collect(),
        ),
        security_context: Some(restricted_container()),
        ..Default::default()
    };

    let empty_dir = |name: &str| Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let pod =
        PodSpec {
            init_containers: spec
                .storage
                .fix_ownership
                .then(|| vec![set::ownership_fix(&valid.image, DATA_MOUNT, MYSQL_UID)]),
            containers: std::iter::once(container)
                .chain(valid.exporter_image.as_deref().map(|image| {
                    exporter::container(image, spec.exporter.resources.as_ref(), spec.tls.is_some(), names)
                }))
                .collect(),
            // A clean InnoDB shutdown of a busy server takes a while.
            termination_grace_period_seconds: Some(120),
            enable_service_links: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_user: Some(MYSQL_UID),
                run_as_group: Some(MYSQL_UID),
                fs_group: Some(MYSQL_UID),
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                ..Default::default()
            }),
            affinity: Some(spread_over_nodes(&names.selector_labels())),
            volumes: Some(
                [
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
                ]
                .into_iter()
                .chain(spec.tls.as_ref().map(|t| tls::server_volume(&tls::secret_name(t, names))))
                .collect(),
            ),
            ..Default::default()
        };

    let parts = set::Parts {
        replicas: if spec.stopped { 0 } else { spec.replicas },
        pod,
        pod_annotations: Some(annotations),
        claim: set::data_claim_template(&names.set(), &spec.storage.size, spec.storage.storage_class_name.clone()),
        claim_retention: None,
        pod_template: spec.pod_template.clone(),
        ..Default::default()
    };
    set::statefulset(&names.set(), parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Exporter, MySQLClusterSpec, Storage};
    use crate::build::ROLE_LABEL;
    use crate::validate::tests::{spec, valid};
    use crate::validate::validate;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn build(s: &MySQLClusterSpec) -> StatefulSet {
        statefulset(&validate(s).unwrap(), &Names::new("db", "ns"))
    }

    #[test]
    fn statefulset_shape() {
        let sts = statefulset(&valid(), &Names::new("db", "ns"));
        assert_eq!(sts.metadata.name.as_deref(), Some("db"));
        let spec = sts.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.service_name.as_deref(), Some("db-hl"));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        assert_eq!(spec.update_strategy.unwrap().type_.as_deref(), Some("OnDelete"));
        let selector = spec.selector.match_labels.unwrap();
        assert_eq!(selector.get("app.kubernetes.io/instance").map(String::as_str), Some("db"));
        assert!(!selector.contains_key(ROLE_LABEL), "the role changes; the selector must not");
        let template = spec.template;
        let labels = template.metadata.as_ref().unwrap().labels.clone().unwrap();
        assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
        assert!(template.metadata.unwrap().annotations.unwrap().contains_key(CONFIG_HASH_ANNOTATION));

        let pod = template.spec.unwrap();
        let sc = pod.security_context.unwrap();
        assert_eq!((sc.run_as_user, sc.run_as_group, sc.fs_group), (Some(999), Some(999), Some(999)));
        assert!(pod.affinity.unwrap().pod_anti_affinity.is_some());
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("docker.io/library/mariadb:10.11"));
        assert_eq!(c.command.as_deref(), Some(&["/bin/sh".to_string(), "/etc/statecraft/start.sh".to_string()][..]));
        let exec = |p: &Option<Probe>| p.as_ref().unwrap().exec.as_ref().unwrap().command.clone().unwrap();
        assert_eq!(exec(&c.readiness_probe), ["/bin/sh", "/etc/statecraft/ready.sh"]);
        assert_eq!(exec(&c.liveness_probe), ["/bin/sh", "/etc/statecraft/alive.sh"]);
        assert_eq!(exec(&c.startup_probe), ["/bin/sh", "/etc/statecraft/alive.sh"]);
        let pre_stop = c.lifecycle.as_ref().unwrap().pre_stop.as_ref().unwrap();
        assert_eq!(
            pre_stop.exec.as_ref().unwrap().command.as_deref().unwrap(),
            ["/bin/sh", "/etc/statecraft/handover.sh"]
        );
        assert!(
            pod.termination_grace_period_seconds.unwrap()
                > i64::from(crate::build::config::HANDOVER_TIMEOUT_SECONDS) + 60,
            "the hand-over leaves time for a clean shutdown"
        );
        assert_eq!(c.ports.as_ref().unwrap()[0].container_port, 3306);
        let env: Vec<_> = c.env.as_ref().unwrap().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            env,
            [
                "POD_NAME",
                "POD_NAMESPACE",
                "HEADLESS_SERVICE",
                "READ_WRITE_SERVICE",
                "OPERATOR_PASSWORD",
                "REPLICATION_PASSWORD",
                "ROOT_PASSWORD",
                "BACKUP_PASSWORD"
            ]
        );
        let mounts: Vec<_> = c.volume_mounts.as_ref().unwrap().iter().map(|m| m.mount_path.as_str()).collect();
        assert_eq!(mounts, ["/var/lib/mysql", "/etc/statecraft", "/run/mysqld", "/tmp"]);
        assert_eq!(c.security_context.as_ref().unwrap().read_only_root_filesystem, Some(true));

        let claim = &spec.volume_claim_templates.unwrap()[0];
        assert_eq!(claim.metadata.name.as_deref(), Some("data"));
        let claim = claim.spec.as_ref().unwrap();
        assert_eq!(claim.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0, "1Gi");
        assert_eq!(claim.storage_class_name, None);
    }

    #[test]
    fn tls_mounts_the_certificate_secret_into_the_server_and_changes_nothing_without_it() {
        let plain = build(&spec());
        let mut s = spec();
        s.tls = Some(crate::api::Tls::default());
        let issued = build(&s);
        s.tls = Some(crate::api::Tls { secret_name: Some("mine".into()), require_secure_transport: true });
        let users = build(&s);
        let pod = |sts: &StatefulSet| sts.spec.clone().unwrap().template.spec.unwrap();
        let secret_of = |sts: &StatefulSet| {
            pod(sts).volumes.unwrap().into_iter().find(|v| v.name == tls::VOLUME).and_then(|v| v.secret?.secret_name)
        };
        assert_eq!(secret_of(&plain), None);
        assert_eq!(secret_of(&issued).as_deref(), Some("db-tls"));
        assert_eq!(secret_of(&users).as_deref(), Some("mine"));
        let mounts = pod(&issued).containers[0].volume_mounts.clone().unwrap();
        assert!(mounts.iter().any(|m| m.mount_path == tls::TLS_DIR && m.read_only == Some(true)));
        // my.cnf changes with it, so turning TLS on rolls the servers.
        let hash = |sts: &StatefulSet| {
            sts.spec.clone().unwrap().template.metadata.unwrap().annotations.unwrap()[CONFIG_HASH_ANNOTATION].clone()
        };
        assert_ne!(hash(&plain), hash(&issued));
        assert_ne!(hash(&issued), hash(&users));
    }

    #[test]
    fn volume_ownership_fix_is_opt_in_and_holds_only_chown() {
        let plain = build(&spec());
        assert!(plain.spec.as_ref().unwrap().template.spec.as_ref().unwrap().init_containers.is_none());
        let mut s = spec();
        s.storage.fix_ownership = true;
        let sts = build(&s);
        let init = &sts.spec.as_ref().unwrap().template.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0];
        let sec = init.security_context.as_ref().unwrap();
        assert_eq!(sec.run_as_user, Some(0));
        let caps = sec.capabilities.as_ref().unwrap();
        assert_eq!(caps.add.as_deref(), Some(&["CHOWN".to_string()][..]));
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert_eq!(sec.allow_privilege_escalation, Some(false));
        assert!(init.command.as_ref().unwrap()[2].contains("chown 999:999 /var/lib/mysql"));
    }

    #[test]
    fn stopped_cluster_has_no_pods_but_keeps_its_claims() {
        let sts = build(&MySQLClusterSpec { stopped: true, ..spec() });
        assert_eq!(sts.spec.as_ref().unwrap().replicas, Some(0));
        assert!(sts.spec.unwrap().volume_claim_templates.is_some());
    }

    #[test]
    fn storage_class_resources_and_image_override_are_used() {
        let resources = ResourceRequirements {
            requests: Some([("memory".to_string(), Quantity("1Gi".into()))].into()),
            ..Default::default()
        };
        let sts = build(&MySQLClusterSpec {
            storage: Storage { size: "20Gi".into(), storage_class_name: Some("fast".into()), fix_ownership: false },
            resources: Some(resources.clone()),
            image: Some("my/mariadb:10.11.9".into()),
            ..spec()
        });
        let spec = sts.spec.unwrap();
        let claim = spec.volume_claim_templates.unwrap()[0].spec.clone().unwrap();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
        let c = &spec.template.spec.unwrap().containers[0];
        assert_eq!(c.resources.as_ref(), Some(&resources));
        assert_eq!(c.image.as_deref(), Some("my/mariadb:10.11.9"));
    }

    #[test]
    fn config_changes_change_the_template() {
        let hash = |s: &MySQLClusterSpec| {
            build(s).spec.unwrap().template.metadata.unwrap().annotations.unwrap()[CONFIG_HASH_ANNOTATION].clone()
        };
        let changed = MySQLClusterSpec { server_config: [("max_connections".into(), "9".into())].into(), ..spec() };
        assert_ne!(hash(&spec()), hash(&changed));
        assert_eq!(hash(&spec()), hash(&spec()));
    }

    #[test]
    fn the_exporter_sidecar_runs_only_when_enabled() {
        let containers = |s: &MySQLClusterSpec| build(s).spec.unwrap().template.spec.unwrap().containers;
        let off = containers(&spec());
        assert_eq!(off.len(), 1, "an operator upgrade must not change the servers' pods of a cluster without it");
        assert!(!off[0].env.as_ref().unwrap().iter().any(|e| e.name == EXPORTER_PASSWORD_ENV));

        let on = containers(&MySQLClusterSpec { exporter: Exporter { enabled: true, ..Default::default() }, ..spec() });
        let names: Vec<_> = on.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, [CONTAINER, exporter::CONTAINER]);
        assert_eq!(on[1].image.as_deref(), Some("docker.io/prom/mysqld-exporter:v0.16.0"));
        assert!(on[0].env.as_ref().unwrap().iter().any(|e| e.name == EXPORTER_PASSWORD_ENV), "the init file needs it");

        let mine = Exporter { enabled: true, image: Some("registry.local/exporter:1".into()), resources: None };
        let on = containers(&MySQLClusterSpec { exporter: mine, ..spec() });
        assert_eq!(on[1].image.as_deref(), Some("registry.local/exporter:1"));
        let set_but_off = Exporter { enabled: false, image: Some("registry.local/exporter:1".into()), resources: None };
        assert_eq!(containers(&MySQLClusterSpec { exporter: set_but_off, ..spec() }).len(), 1);
    }
}
