//! Tests of the builders over whole clusters of both layouts.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Container, PodSpec, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::statefulset::{INSTANCE_LABEL, NAME_LABEL};

use super::config::{self, BOOTSTRAPPED, CLUSTER_ID, INITIAL_CONTROLLERS, START_SCRIPT};
use super::*;
use crate::api::KafkaClusterSpec;
use crate::validate::validate;

pub(crate) const UID: &str = "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4b";

pub(crate) fn separate() -> KafkaClusterSpec {
    serde_json::from_value(serde_json::json!({
        "controllers": {"replicas": 3, "storage": {"size": "1Gi"}},
        "brokers": {
            "replicas": 3,
            "storage": {"size": "10Gi", "storageClassName": "fast"},
            "resources": {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        },
        "config": {"num.partitions": "6", "log.retention.ms": "3600000"},
    }))
    .unwrap()
}

pub(crate) fn combined(nodes: i32) -> KafkaClusterSpec {
    serde_json::from_value(serde_json::json!({"combined": {"replicas": nodes, "storage": {"size": "5Gi"}}})).unwrap()
}

fn with_external(mut spec: KafkaClusterSpec, kind: &str) -> KafkaClusterSpec {
    spec.listeners.external = Some(
        serde_json::from_value(serde_json::json!({
            "type": kind,
            "advertised": [{"broker": 1, "host": "kafka-1.example.com", "port": 31001}],
            "serviceAnnotations": {"lb.example.com/internal": "true"},
        }))
        .unwrap(),
    );
    spec
}

pub(crate) fn cluster(spec: KafkaClusterSpec) -> KafkaCluster {
    let mut c = KafkaCluster::new("events", spec);
    c.metadata.namespace = Some("prod".into());
    c.metadata.uid = Some(UID.into());
    c
}

pub(crate) fn inputs() -> Inputs {
    Inputs { cluster_id: ids::cluster_id(UID).unwrap(), ..Default::default() }
}

pub(crate) fn build_with(spec: KafkaClusterSpec, inputs: &Inputs) -> Objects {
    let valid = validate(&spec).unwrap();
    objects(&cluster(spec), &valid, inputs).unwrap()
}

fn build(spec: KafkaClusterSpec) -> Objects {
    build_with(spec, &inputs())
}

fn names() -> Names {
    Names::new("events", "prod")
}

fn pool(objects: &Objects, role: NodeRole) -> &PoolObjects {
    objects.pools.iter().find(|p| p.role == role).unwrap()
}

fn pod_spec(sts: &StatefulSet) -> &PodSpec {
    sts.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn kafka_container(sts: &StatefulSet) -> &Container {
    &pod_spec(sts).containers[0]
}

fn data(objects: &Objects) -> &BTreeMap<String, String> {
    objects.config_map.data.as_ref().unwrap()
}

/// The properties file of `role` as key → value.
fn props(objects: &Objects, role: NodeRole) -> BTreeMap<String, String> {
    let text = &data(objects)[&config::properties_key(role)];
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let (k, v) = line.split_once('=').unwrap();
        assert!(map.insert(k.to_string(), v.to_string()).is_none(), "{k} twice");
    }
    map
}

#[test]
fn controllers_get_the_quorum_and_no_client_listener() {
    let o = build(with_external(separate(), "NodePort"));
    let p = props(&o, NodeRole::Controller);
    assert_eq!(p["process.roles"], "controller");
    assert_eq!(
        p["controller.quorum.bootstrap.servers"],
        "events-controller-0.events-controller.prod.svc:9093,events-controller-1.events-controller.prod.svc:9093,\
         events-controller-2.events-controller.prod.svc:9093"
    );
    assert_eq!(p["listeners"], "CONTROLLER://:9093");
    assert_eq!(p["listener.security.protocol.map"], "CONTROLLER:PLAINTEXT");
    assert_eq!(p["controller.listener.names"], "CONTROLLER");
    assert_eq!(p["log.dirs"], "/var/lib/kafka/data");
    assert_eq!((p["default.replication.factor"].as_str(), p["min.insync.replicas"].as_str()), ("3", "2"));
    for absent in ["inter.broker.listener.name", "offsets.topic.replication.factor", "node.id", "advertised.listeners"]
    {
        assert!(!p.contains_key(absent), "{absent}");
    }
    assert!(!p.contains_key("controller.quorum.voters"), "dynamic quorum only");
    assert_eq!(p["num.partitions"], "6", "spec.config reaches the controllers");
}

#[test]
fn brokers_get_the_listeners_and_the_replication_settings() {
    let mut spec = with_external(separate(), "NodePort");
    spec.listeners.internal.port = 9095;
    spec.config.insert("share.coordinator.state.topic.min.isr".into(), "1".into());
    let o = build(spec);
    let p = props(&o, NodeRole::Broker);
    assert_eq!(p["process.roles"], "broker");
    assert_eq!(p["listeners"], "INTERNAL://:9095,EXTERNAL://:9094");
    assert_eq!(p["listener.security.protocol.map"], "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT");
    assert_eq!(p["inter.broker.listener.name"], "INTERNAL");
    assert!(
        p["controller.quorum.bootstrap.servers"].starts_with("events-controller-0.events-controller.prod.svc:9093,")
    );
    for (key, value) in [
        ("default.replication.factor", "3"),
        ("min.insync.replicas", "2"),
        ("offsets.topic.replication.factor", "3"),
        ("transaction.state.log.replication.factor", "3"),
        ("transaction.state.log.min.isr", "2"),
        ("share.coordinator.state.topic.replication.factor", "3"),
        ("share.coordinator.state.topic.min.isr", "1"),
        ("num.partitions", "6"),
    ] {
        assert_eq!(p[key], value, "{key}");
    }
    // The operator's keys first, spec.config after them.
    let text = &data(&o)[&config::properties_key(NodeRole::Broker)];
    assert!(text.starts_with("process.roles=broker\n"));
    assert!(text.find("log.dirs=").unwrap() < text.find("num.partitions=").unwrap());
}

#[test]
fn combined_nodes_are_both_and_a_single_node_is_a_quorum_of_one() {
    let o = build(combined(1));
    assert_eq!(o.pools.len(), 1);
    let p = props(&o, NodeRole::Combined);
    assert_eq!(p["process.roles"], "broker,controller");
    assert_eq!(p["controller.quorum.bootstrap.servers"], "events-combined-0.events-combined.prod.svc:9093");
    assert_eq!(p["listeners"], "INTERNAL://:9092,CONTROLLER://:9093");
    assert_eq!(p["inter.broker.listener.name"], "INTERNAL");
    for key in ["default.replication.factor", "min.insync.replicas", "offsets.topic.replication.factor"] {
        assert_eq!(p[key], "1", "{key}: capped by the one broker");
    }
    let d = data(&o);
    assert_eq!(
        d[INITIAL_CONTROLLERS],
        format!("0@events-combined-0.events-combined.prod.svc:9093:{}", ids::directory_id(UID, 0))
    );
    assert!(!d.contains_key("controller.properties") && !d.contains_key("broker.properties"));
    let three = build(combined(3));
    assert_eq!(three.pools.len(), 1);
    assert_eq!(props(&three, NodeRole::Combined)["default.replication.factor"], "3");
    assert_eq!(pool(&three, NodeRole::Combined).statefulset.metadata.name.as_deref(), Some("events-combined"));
}

#[test]
fn one_controller_serves_separate_brokers() {
    let mut spec = separate();
    spec.controllers.as_mut().unwrap().replicas = 1;
    let o = build(spec);
    let host = "events-controller-0.events-controller.prod.svc:9093";
    for role in [NodeRole::Controller, NodeRole::Broker] {
        assert_eq!(props(&o, role)["controller.quorum.bootstrap.servers"], host, "{role:?}");
    }
    assert_eq!(data(&o)[INITIAL_CONTROLLERS], format!("0@{host}:{}", ids::directory_id(UID, 0)));
    assert_eq!(pool(&o, NodeRole::Controller).statefulset.spec.as_ref().unwrap().replicas, Some(1));
    assert_eq!(props(&o, NodeRole::Broker)["default.replication.factor"], "3", "the brokers decide it");
}

#[test]
fn the_config_map_holds_the_ids_the_script_and_the_flag() {
    let mut with = inputs();
    with.bootstrapped = true;
    with.external_addresses = BTreeMap::from([(0, ":31000".to_string()), (7, "ignored:1".to_string())]);
    let o = build_with(with_external(separate(), "NodePort"), &with);
    assert_eq!(o.config_map.metadata.name.as_deref(), Some("events-config"));
    assert_eq!(o.config_map.metadata.namespace.as_deref(), Some("prod"));
    let d = data(&o);
    let keys: Vec<&str> = d.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            BOOTSTRAPPED,
            "broker.properties",
            CLUSTER_ID,
            "controller.properties",
            "external-0",
            INITIAL_CONTROLLERS,
            START_SCRIPT
        ],
        "no address for a broker that does not exist"
    );
    assert_eq!(d[BOOTSTRAPPED], "true");
    assert_eq!(d[CLUSTER_ID], "XxwqOw1OT2CKe5wNHi86Sw");
    let voters: Vec<String> = (0..3)
        .map(|k| format!("{k}@events-controller-{k}.events-controller.prod.svc:9093:{}", ids::directory_id(UID, k)))
        .collect();
    assert_eq!(d[INITIAL_CONTROLLERS], voters.join(","));
    let script = &d[START_SCRIPT];
    assert!(script.starts_with("#!/bin/sh\nset -eu\nCONTROLLER_PORT=9093\nBROKER_ID_BASE=100\n"));
    assert_eq!(script, &data(&build(combined(1)))[START_SCRIPT], "one script for every cluster");
    assert_eq!(build(separate()).config_map.data.unwrap()[BOOTSTRAPPED], "false");
    assert!(!data(&build(separate())).contains_key("external-0"), "no external listener");
}

#[test]
fn values_are_escaped_for_java_properties() {
    let mut spec = separate();
    spec.config.insert("ssl.principal.mapping.rules".into(), " RULE:a\\b\nc\tü€😀".into());
    let o = build(spec);
    let text = &data(&o)[&config::properties_key(NodeRole::Broker)];
    let line = text.lines().find(|l| l.starts_with("ssl.principal.mapping.rules=")).unwrap();
    assert_eq!(line, "ssl.principal.mapping.rules=\\ RULE:a\\\\b\\nc\\t\\u00fc\\u20ac\\ud83d\\ude00");
    assert!(text.is_ascii());
}

fn template(o: &Objects, role: NodeRole) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    pool(o, role).statefulset.spec.clone().unwrap().template
}

fn hash(o: &Objects, role: NodeRole) -> String {
    template(o, role).metadata.unwrap().annotations.unwrap()[CONFIG_HASH_ANNOTATION].clone()
}

#[test]
fn dynamic_keys_the_flag_and_learnt_addresses_leave_the_pod_templates_alone() {
    let base = build(with_external(separate(), "LoadBalancer"));
    let mut dynamic = with_external(separate(), "LoadBalancer");
    dynamic.config.insert("log.retention.ms".into(), "7200000".into());
    dynamic.config.insert("num.io.threads".into(), "16".into());
    let mut later = inputs();
    later.bootstrapped = true;
    later.external_addresses.insert(0, "lb-0.example.com:9094".into());
    let changed = build_with(dynamic, &later);
    assert_ne!(data(&base), data(&changed), "the flag and the address are in the ConfigMap");
    for role in [NodeRole::Controller, NodeRole::Broker] {
        assert_eq!(template(&base, role), template(&changed, role), "{role:?}");
    }
}

/// A cluster-wide dynamic key reaches the nodes through the metadata log only: a value
/// Kafka refuses there must not be in a file a node reads when it starts. A static key is
/// in the files; min.insync.replicas, which the operator validates, is in both.
#[test]
fn cluster_wide_dynamic_keys_stay_out_of_the_properties_files() {
    let mut spec = separate();
    spec.config.insert("log.retention.ms".into(), "soon".into());
    spec.config.insert("log.retention.hours".into(), "72".into());
    let o = build(spec);
    for role in [NodeRole::Controller, NodeRole::Broker] {
        let p = props(&o, role);
        assert!(!p.contains_key("log.retention.ms"), "{role:?}: {p:?}");
        assert_eq!(p.get("log.retention.hours").map(String::as_str), Some("72"), "{role:?}");
        assert!(p.contains_key("min.insync.replicas"), "{role:?}");
    }
}

#[test]
fn what_a_node_reads_at_start_changes_its_pools_template() {
    let base = build(separate());
    let mut static_key = separate();
    static_key.config.insert("num.replica.alter.log.dirs.threads".into(), "2".into());
    let o = build(static_key);
    for role in [NodeRole::Controller, NodeRole::Broker] {
        assert_ne!(hash(&base, role), hash(&o, role), "{role:?}");
    }
    let rf = build(KafkaClusterSpec { default_replication_factor: Some(2), ..separate() });
    assert_ne!(hash(&base, NodeRole::Broker), hash(&rf, NodeRole::Broker));
    // min.insync.replicas is dynamic, but the internal topics' min ISR, which follows it, is
    // not: brokers roll, controllers (which have only the former) do not.
    let min_isr = build(KafkaClusterSpec { min_insync_replicas: Some(1), ..separate() });
    assert_ne!(hash(&base, NodeRole::Broker), hash(&min_isr, NodeRole::Broker));
    assert_eq!(template(&base, NodeRole::Controller), template(&min_isr, NodeRole::Controller));
    // Only brokers have the external listener.
    let external = build(with_external(separate(), "NodePort"));
    assert_ne!(hash(&base, NodeRole::Broker), hash(&external, NodeRole::Broker));
    let mut moved = with_external(separate(), "NodePort");
    moved.listeners.external.as_mut().unwrap().advertised[0].host = "kafka-1.example.org".into();
    assert_ne!(hash(&external, NodeRole::Broker), hash(&build(moved), NodeRole::Broker));
    let mut annotated = with_external(separate(), "NodePort");
    annotated.listeners.external.as_mut().unwrap().service_annotations.insert("a".into(), "b".into());
    assert_eq!(template(&external, NodeRole::Broker), template(&build(annotated), NodeRole::Broker));
    assert_eq!(template(&base, NodeRole::Controller), template(&external, NodeRole::Controller));
    let other_id = build_with(separate(), &Inputs { cluster_id: "AAAAAAAAAAAAAAAAAAAAAQ".into(), ..inputs() });
    assert_ne!(hash(&base, NodeRole::Controller), hash(&other_id, NodeRole::Controller));
    assert_eq!(hash(&base, NodeRole::Broker), hash(&build(separate()), NodeRole::Broker), "stable");
    assert_eq!(hash(&base, NodeRole::Broker).len(), 16);
}

#[test]
fn statefulsets_are_the_shared_skeleton_per_pool() {
    let o = build(separate());
    assert_eq!(o.pools.iter().map(|p| p.role).collect::<Vec<_>>(), [NodeRole::Controller, NodeRole::Broker]);
    let brokers = &pool(&o, NodeRole::Broker).statefulset;
    assert_eq!(brokers.metadata.name.as_deref(), Some("events-broker"));
    let spec = brokers.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.service_name.as_deref(), Some("events-broker"));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    assert_eq!(spec.update_strategy.as_ref().unwrap().type_.as_deref(), Some("OnDelete"));
    let selector = spec.selector.match_labels.clone().unwrap();
    assert_eq!(selector[INSTANCE_LABEL], "events-broker");
    assert_eq!(selector[NAME_LABEL], "kafka");
    let labels = spec.template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)), "the template matches the selector");
    assert_eq!(labels[CLUSTER_LABEL], "events");
    assert_eq!(labels[ROLE_LABEL], "broker");
    assert_eq!(labels[BROKER_LABEL], "true");
    let controller_labels = template(&o, NodeRole::Controller).metadata.unwrap().labels.unwrap();
    assert_eq!(controller_labels[ROLE_LABEL], "controller");
    assert!(!controller_labels.contains_key(BROKER_LABEL));
    let claim = &spec.volume_claim_templates.as_ref().unwrap()[0];
    let claim_spec = claim.spec.as_ref().unwrap();
    assert_eq!(claim_spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(claim_spec.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0, "10Gi");
    let controllers = pool(&o, NodeRole::Controller).statefulset.spec.clone().unwrap();
    assert_eq!(controllers.replicas, Some(3));
    let claim = &controllers.volume_claim_templates.unwrap()[0];
    assert_eq!(claim.spec.as_ref().unwrap().resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0, "1Gi");
}

#[test]
fn the_pod_template_reaches_each_pool_and_spreads_each_role_on_its_own() {
    let mut spec = separate();
    spec.pod_template = serde_json::from_value(serde_json::json!({
        "nodeSelector": {"disk": "ssd"},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        "labels": {"team": "events", "app.kubernetes.io/name": "not-kafka"},
    }))
    .unwrap();
    let o = build(spec);
    for role in [NodeRole::Controller, NodeRole::Broker] {
        let t = template(&o, role);
        let labels = t.metadata.unwrap().labels.unwrap();
        assert_eq!(labels["team"], "events");
        assert_eq!(labels[NAME_LABEL], "kafka", "the operator's own label wins");
        let pod = t.spec.unwrap();
        assert_eq!(pod.node_selector.unwrap()["disk"], "ssd");
        let spread = &pod.topology_spread_constraints.unwrap()[0];
        let selected = spread.label_selector.clone().unwrap().match_labels.unwrap();
        // Counted per role: controllers do not crowd brokers out of a zone.
        assert_eq!(selected[ROLE_LABEL], if role == NodeRole::Broker { "broker" } else { "controller" });
        assert_eq!(selected[INSTANCE_LABEL], format!("events-{}", selected[ROLE_LABEL]));
    }
}

#[test]
fn pods_run_kafka_unprivileged_with_the_readiness_gate() {
    let o = build(separate());
    let sts = &pool(&o, NodeRole::Broker).statefulset;
    let pod = pod_spec(sts);
    let sc = pod.security_context.as_ref().unwrap();
    assert_eq!((sc.run_as_user, sc.run_as_group, sc.fs_group), (Some(1000), Some(1000), Some(1000)));
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.seccomp_profile.as_ref().unwrap().type_, "RuntimeDefault");
    let gates = pod.readiness_gates.as_ref().unwrap();
    assert_eq!(gates[0].condition_type, "kafka.statecraft.io/running");
    assert_eq!(pod.termination_grace_period_seconds, Some(300));
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert!(pod.init_containers.is_none(), "no ownership fix unless asked");
    let c = kafka_container(sts);
    assert_eq!(c.image.as_deref(), Some("docker.io/apache/kafka:4.4.0"));
    assert_eq!(c.command.as_deref().unwrap(), ["/bin/sh", "/etc/statecraft/kafka/start.sh", "broker"]);
    let csc = c.security_context.as_ref().unwrap();
    assert_eq!((csc.allow_privilege_escalation, csc.run_as_non_root), (Some(false), Some(true)));
    assert_eq!(csc.read_only_root_filesystem, Some(true));
    assert_eq!(csc.capabilities.as_ref().unwrap().drop.as_deref(), Some(&["ALL".to_string()][..]));
    let env: BTreeMap<&str, &k8s_openapi::api::core::v1::EnvVar> =
        c.env.as_ref().unwrap().iter().map(|e| (e.name.as_str(), e)).collect();
    let field = |name: &str| env[name].value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path.clone();
    assert_eq!(field("POD_NAME"), "metadata.name");
    assert_eq!(field("POD_NAMESPACE"), "metadata.namespace");
    assert_eq!(field("HOST_IP"), "status.hostIP");
    assert_eq!(env["INTERNAL_PORT"].value.as_deref(), Some("9092"));
    assert!(!env.contains_key("EXTERNAL_PORT"), "no external listener");
    assert_eq!(env["KAFKA_HEAP_OPTS"].value.as_deref(), Some("-Xms2048m -Xmx2048m"), "half the 4Gi limit");
    assert_eq!(c.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0, "4Gi");
    let mounts: BTreeMap<&str, (&str, Option<bool>)> = c
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| (m.name.as_str(), (m.mount_path.as_str(), m.read_only)))
        .collect();
    assert_eq!(mounts["data"], ("/var/lib/kafka", Some(false)));
    assert_eq!(mounts["config"], ("/etc/statecraft/kafka", Some(true)));
    assert_eq!(mounts["run"].0, "/run/kafka");
    assert_eq!(mounts["tmp"].0, "/tmp");
    let config = pod.volumes.as_ref().unwrap().iter().find(|v| v.name == "config").unwrap();
    assert_eq!(config.config_map.as_ref().unwrap().name, "events-config");

    let controller = &pool(&o, NodeRole::Controller).statefulset;
    let env = kafka_container(controller).env.as_ref().unwrap();
    assert!(!env.iter().any(|e| e.name == "KAFKA_HEAP_OPTS"), "no limit: the image's heap");
    let ports: Vec<&str> = env.iter().filter(|e| e.name.ends_with("_PORT")).map(|e| e.name.as_str()).collect();
    assert_eq!(ports, ["KAFKA_METRICS_PORT"], "controllers listen on 9093 alone, and serve their metrics");
    assert_eq!(pod_spec(controller).termination_grace_period_seconds, Some(60));
}

#[test]
fn the_heap_is_half_the_memory_limit_within_bounds() {
    let limit = |memory: &str| {
        let r: k8s_openapi::api::core::v1::ResourceRequirements =
            serde_json::from_value(serde_json::json!({"limits": {"memory": memory}})).unwrap();
        statefulset::heap_opts(Some(&r))
    };
    assert_eq!(limit("1Gi").as_deref(), Some("-Xms512m -Xmx512m"));
    assert_eq!(limit("1500M").as_deref(), Some("-Xms715m -Xmx715m"));
    assert_eq!(limit("64Gi").as_deref(), Some("-Xms6144m -Xmx6144m"));
    assert_eq!(limit("lots"), None);
    assert_eq!(statefulset::heap_opts(None), None);
    let requests_only: k8s_openapi::api::core::v1::ResourceRequirements =
        serde_json::from_value(serde_json::json!({"requests": {"memory": "1Gi"}})).unwrap();
    assert_eq!(statefulset::heap_opts(Some(&requests_only)), None);
}

#[test]
fn probes_use_the_pools_main_port_and_allow_for_recovery() {
    let mut spec = separate();
    spec.listeners.internal.port = 9095;
    let o = build(spec);
    for (role, port) in [(NodeRole::Controller, 9093), (NodeRole::Broker, 9095)] {
        let c = kafka_container(&pool(&o, role).statefulset);
        for probe in [&c.readiness_probe, &c.liveness_probe, &c.startup_probe] {
            let probe = probe.as_ref().unwrap();
            assert_eq!(probe.tcp_socket.as_ref().unwrap().port, IntOrString::Int(port), "{role:?}");
        }
        let budget = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
            let p = p.as_ref().unwrap();
            p.period_seconds.unwrap() * p.failure_threshold.unwrap()
        };
        assert_eq!(budget(&c.startup_probe), 3600, "an hour of log recovery");
        assert_eq!(budget(&c.liveness_probe), 120);
        assert!(budget(&c.readiness_probe) <= 30);
        let ports: Vec<i32> = c.ports.as_ref().unwrap().iter().map(|p| p.container_port).collect();
        assert_eq!(ports[0], port);
    }
    let combined = build(combined(3));
    let c = kafka_container(&pool(&combined, NodeRole::Combined).statefulset);
    assert_eq!(c.readiness_probe.as_ref().unwrap().tcp_socket.as_ref().unwrap().port, IntOrString::Int(9092));
    let ports: Vec<(&str, i32)> =
        c.ports.as_ref().unwrap().iter().map(|p| (p.name.as_deref().unwrap(), p.container_port)).collect();
    assert_eq!(ports, [("internal", 9092), ("controller", 9093), ("metrics", 9404)]);
    let env = c.env.as_ref().unwrap();
    assert!(env.iter().any(|e| e.name == "KAFKA_METRICS_PORT" && e.value.as_deref() == Some("9404")), "{env:?}");
}

#[test]
fn the_ownership_fix_is_opt_in_per_pool() {
    let mut spec = separate();
    spec.brokers.as_mut().unwrap().storage.fix_ownership = true;
    let o = build_with(spec, &inputs());
    assert_eq!(pod_spec(&pool(&o, NodeRole::Controller).statefulset).init_containers, None);
    let init = pod_spec(&pool(&o, NodeRole::Broker).statefulset).init_containers.clone().unwrap();
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].volume_mounts.as_ref().unwrap()[0].mount_path, "/var/lib/kafka");
    assert!(init[0].command.as_ref().unwrap()[2].contains("chown 1000:1000 /var/lib/kafka"));
}

fn service_ports(s: &Service) -> Vec<(String, i32)> {
    s.spec.as_ref().unwrap().ports.as_ref().unwrap().iter().map(|p| (p.name.clone().unwrap(), p.port)).collect()
}

#[test]
fn headless_services_publish_each_pools_ports() {
    let o = build(with_external(separate(), "NodePort"));
    let controllers = &pool(&o, NodeRole::Controller).headless_service;
    assert_eq!(controllers.metadata.name.as_deref(), Some("events-controller"));
    let spec = controllers.spec.as_ref().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    assert_eq!(spec.selector, Some(names().pool(NodeRole::Controller).selector()));
    assert_eq!(service_ports(controllers), [("controller".to_string(), 9093)]);
    let brokers = &pool(&o, NodeRole::Broker).headless_service;
    assert_eq!(service_ports(brokers), [("internal".to_string(), 9092), ("external".to_string(), 9094)]);
    let combined = build(combined(3));
    let ports = service_ports(&pool(&combined, NodeRole::Combined).headless_service);
    assert_eq!(ports, [("internal".to_string(), 9092), ("controller".to_string(), 9093)]);
}

#[test]
fn the_bootstrap_service_selects_every_broker_of_the_cluster() {
    for (spec, role) in [(separate(), NodeRole::Broker), (combined(3), NodeRole::Combined)] {
        let o = build(spec);
        let s = &o.bootstrap_service;
        assert_eq!(s.metadata.name.as_deref(), Some("events-bootstrap"));
        let spec = s.spec.as_ref().unwrap();
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.publish_not_ready_addresses, None, "ready brokers only");
        assert_eq!(service_ports(s), [("internal".to_string(), 9092)]);
        let selector = spec.selector.as_ref().unwrap();
        let selects = |labels: &BTreeMap<String, String>| selector.iter().all(|(k, v)| labels.get(k) == Some(v));
        for p in &o.pools {
            let labels =
                p.statefulset.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
            assert_eq!(selects(&labels), p.role == role, "{:?}", p.role);
        }
        let mut other = statefulset::pod_labels(&Names::new("other", "prod"), role);
        assert!(!selects(&other), "another cluster's brokers");
        other.insert(CLUSTER_LABEL.into(), "events".into());
        assert!(selects(&other));
    }
}

#[test]
fn external_services_expose_each_broker_alone() {
    assert!(build(separate()).external_services.is_empty());
    for kind in ["NodePort", "LoadBalancer"] {
        let o = build(with_external(separate(), kind));
        assert_eq!(o.external_services.len(), 3);
        for (k, s) in o.external_services.iter().enumerate() {
            assert_eq!(s.metadata.name.as_deref(), Some(format!("events-external-{k}").as_str()));
            assert_eq!(s.metadata.annotations.as_ref().unwrap()["lb.example.com/internal"], "true");
            let spec = s.spec.as_ref().unwrap();
            assert_eq!(spec.type_.as_deref(), Some(kind));
            let selector = spec.selector.clone().unwrap();
            assert_eq!(
                selector,
                BTreeMap::from([("statefulset.kubernetes.io/pod-name".into(), format!("events-broker-{k}"))])
            );
            assert_eq!(service_ports(s), [("external".to_string(), 9094)]);
        }
    }
    let o = build(with_external(combined(3), "NodePort"));
    let selector = o.external_services[2].spec.as_ref().unwrap().selector.clone().unwrap();
    assert_eq!(selector["statefulset.kubernetes.io/pod-name"], "events-combined-2");
}

#[test]
fn external_addresses_come_from_the_spec_or_the_live_service() {
    let nodeport = validate(&with_external(separate(), "NodePort")).unwrap();
    let lb = validate(&with_external(separate(), "LoadBalancer")).unwrap();
    let live = |node_port: Option<i32>, ingress: serde_json::Value| -> Service {
        serde_json::from_value(serde_json::json!({
            "spec": {"ports": [{"port": 9094, "nodePort": node_port}]},
            "status": {"loadBalancer": {"ingress": ingress}},
        }))
        .unwrap()
    };
    let unassigned = live(None, serde_json::json!([]));
    let assigned = live(Some(31000), serde_json::json!([{"ip": "203.0.113.7"}]));
    // Broker 1 has an advertised entry with a port: known before any Service.
    assert_eq!(services::external_address(&nodeport, 1, None).as_deref(), Some("kafka-1.example.com:31001"));
    // NodePort: the node's address (empty host) and the node port, once assigned.
    assert_eq!(services::external_address(&nodeport, 0, Some(&unassigned)), None);
    assert_eq!(services::external_address(&nodeport, 0, Some(&assigned)).as_deref(), Some(":31000"));
    // LoadBalancer: the ingress address and the listener's port, once there is one.
    assert_eq!(services::external_address(&lb, 0, Some(&unassigned)), None);
    assert_eq!(services::external_address(&lb, 0, Some(&assigned)).as_deref(), Some("203.0.113.7:9094"));
    let v6 = live(None, serde_json::json!([{"ip": "2001:db8::7"}]));
    assert_eq!(services::external_address(&lb, 2, Some(&v6)).as_deref(), Some("[2001:db8::7]:9094"));
    let named = live(None, serde_json::json!([{"hostname": "abc.elb.example.com", "ip": "203.0.113.8"}]));
    assert_eq!(services::external_address(&lb, 2, Some(&named)).as_deref(), Some("abc.elb.example.com:9094"));
    // An advertised host without a port takes the Service's.
    let mut no_port = with_external(separate(), "NodePort");
    no_port.listeners.external.as_mut().unwrap().advertised[0].port = None;
    let no_port = validate(&no_port).unwrap();
    assert_eq!(services::external_address(&no_port, 1, None), None);
    assert_eq!(services::external_address(&no_port, 1, Some(&assigned)).as_deref(), Some("kafka-1.example.com:31000"));
    assert_eq!(services::external_address(&validate(&separate()).unwrap(), 0, Some(&assigned)), None);
}

#[test]
fn each_pool_may_lose_one_node_to_a_drain() {
    let o = build(separate());
    for p in &o.pools {
        let spec = p.pdb.spec.as_ref().unwrap();
        assert_eq!(p.pdb.metadata.name.as_deref(), Some(names().pool_name(p.role)));
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.selector.as_ref().unwrap().match_labels, Some(names().pool(p.role).selector()));
    }
}

#[test]
fn a_cluster_without_uid_or_namespace_is_refused() {
    let valid = validate(&separate()).unwrap();
    let mut c = cluster(separate());
    c.metadata.uid = None;
    assert!(matches!(objects(&c, &valid, &inputs()), Err(Error::Permanent(m)) if m.contains("uid")));
    let mut c = cluster(separate());
    c.metadata.namespace = None;
    assert!(matches!(objects(&c, &valid, &inputs()), Err(Error::Permanent(m)) if m.contains("namespace")));
}

#[test]
fn dynamic_keys_set_by_the_operator_are_kafkas_cluster_wide_ones() {
    // The hash leaves these out: a change of spec.minInsyncReplicas is applied at runtime.
    assert!(dynamic::is_cluster_wide("min.insync.replicas"));
    assert!(!dynamic::is_cluster_wide("default.replication.factor"));
}
