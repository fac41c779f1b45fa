//! The ConfigMap `<cluster>-config`, which every node reads when it starts:
//!
//! - `<role>.properties` per pool (`controller`, `broker` or `combined`): everything of the
//!   node's server.properties but `node.id` and `advertised.listeners`, which the start
//!   script adds;
//! - `start.sh`, the start script ([`super::script`]);
//! - `cluster-id`, `initial-controllers` (`<id>@<host>:9093:<directory id>,...`, what a new
//!   cluster's controllers format their storage with) and `bootstrapped`
//!   (`status.quorumBootstrapped`: `true` once every initial voter joined; a controller
//!   that finds no metadata log then formats without claiming to be an initial voter);
//! - `external-<ordinal>`: the address broker `ordinal` advertises on the external listener,
//!   `host:port` (an empty host: the node's own address), once known.
//!
//! The pods carry [`template_hash`] as an annotation, so that a change of what a node
//! reads at start changes the pod template and so the StatefulSet's revision (which the
//! operator rolls), except what must not: the cluster-wide dynamic keys (applied at runtime
//! without a restart), `bootstrapped` (a fact about the quorum, not the node's
//! configuration) and the external addresses (learnt from the Services after they exist:
//! one broker's address appearing must not roll the others; the spec's external listener
//! type and advertised addresses are hashed instead).

use std::collections::BTreeMap;
use std::fmt::Write;

use k8s_openapi::api::core::v1::ConfigMap;

use crate::api::NodeRole;
use crate::api::cluster::CONTROLLER_PORT;
use crate::names::Names;
use crate::validate::ValidCluster;

use super::dynamic::is_cluster_wide;
use super::{DATA_DIR, Inputs, is_broker, voters};

/// Key of the start script.
pub const START_SCRIPT: &str = "start.sh";
/// Key of the cluster id.
pub const CLUSTER_ID: &str = "cluster-id";
/// Key of the initial voters.
pub const INITIAL_CONTROLLERS: &str = "initial-controllers";
/// Key of the flag that the quorum was bootstrapped (`true` or `false`).
pub const BOOTSTRAPPED: &str = "bootstrapped";

/// Key of the properties of the nodes of `role`.
pub fn properties_key(role: NodeRole) -> String {
    format!("{}.properties", super::role_name(role))
}

/// Key of the external address of broker `ordinal`.
pub fn external_key(ordinal: i32) -> String {
    format!("external-{ordinal}")
}

/// The listener names the operator uses.
const INTERNAL: &str = "INTERNAL";
const CONTROLLER: &str = "CONTROLLER";
const EXTERNAL: &str = "EXTERNAL";

/// The properties of a node of `role`, in file order: the operator's, then `spec.config`
/// (which validation keeps off the operator's keys, except those it may override such as
/// `share.coordinator.state.topic.*`: an override takes the operator's line), but its
/// cluster-wide dynamic keys, which the operator applies at runtime.
///
/// Controllers get no client listener, `inter.broker.listener.name` nor the internal
/// topics' settings (Kafka refuses client listeners on a controller-only node, and only
/// brokers create those topics), but `default.replication.factor` and
/// `min.insync.replicas`, which the controller applies to topics created without a
/// replication factor and to its eligible-leader-replica election, and all of
/// `spec.config`: the controller reads many broker keys (threads, sockets, quotas,
/// authorizer, `num.partitions`) and ignores the rest, so a filter here could only lose
/// one it needs.
pub fn properties(valid: &ValidCluster, names: &Names, role: NodeRole) -> Vec<(String, String)> {
    let spec = &valid.spec;
    let internal = spec.listeners.internal.port;
    let external = spec.listeners.external.as_ref().map(|e| e.port);
    let (voter_role, voter_count) = voters(&valid.layout);
    let bootstrap: Vec<String> =
        (0..voter_count).map(|k| format!("{}:{CONTROLLER_PORT}", names.host(voter_role, k as u32))).collect();

    let mut listeners = Vec::new();
    if is_broker(role) {
        listeners.push(format!("{INTERNAL}://:{internal}"));
    }
    if role != NodeRole::Broker {
        listeners.push(format!("{CONTROLLER}://:{CONTROLLER_PORT}"));
    }
    let mut protocols = vec![format!("{CONTROLLER}:PLAINTEXT")];
    if is_broker(role) {
        protocols.push(format!("{INTERNAL}:PLAINTEXT"));
        if let Some(port) = external {
            listeners.push(format!("{EXTERNAL}://:{port}"));
            protocols.push(format!("{EXTERNAL}:PLAINTEXT"));
        }
    }
    let process_roles = match role {
        NodeRole::Controller => "controller",
        NodeRole::Broker => "broker",
        NodeRole::Combined => "broker,controller",
    };

    let rf = valid.replication_factor.to_string();
    let min_isr = valid.min_insync_replicas.to_string();
    let mut props: Vec<(String, String)> = vec![
        ("process.roles".into(), process_roles.into()),
        ("controller.quorum.bootstrap.servers".into(), bootstrap.join(",")),
        ("controller.listener.names".into(), CONTROLLER.into()),
        ("listeners".into(), listeners.join(",")),
        ("listener.security.protocol.map".into(), protocols.join(",")),
    ];
    if is_broker(role) {
        props.push(("inter.broker.listener.name".into(), INTERNAL.into()));
    }
    props.push(("log.dirs".into(), DATA_DIR.into()));
    props.push(("default.replication.factor".into(), rf.clone()));
    props.push(("min.insync.replicas".into(), min_isr.clone()));
    if is_broker(role) {
        for (key, value) in [
            ("offsets.topic.replication.factor", &rf),
            ("transaction.state.log.replication.factor", &rf),
            ("transaction.state.log.min.isr", &min_isr),
            ("share.coordinator.state.topic.replication.factor", &rf),
            ("share.coordinator.state.topic.min.isr", &min_isr),
        ] {
            props.push((key.into(), value.clone()));
        }
    }
    // Cluster-wide dynamic keys reach the nodes through the metadata log only (see
    // `crate::roll::config`): a value Kafka refuses there must not reach a node through its
    // file, where it would keep the node from starting.
    for (key, value) in spec.config.iter().filter(|(k, _)| !is_cluster_wide(k)) {
        match props.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.clone(),
            None => props.push((key.clone(), value.clone())),
        }
    }
    props
}

/// A value as `java.util.Properties.load` reads it back: Kafka loads the file as ISO 8859-1,
/// so anything outside printable ASCII is a `\uXXXX` escape (UTF-16 units), and a leading
/// space, `\` and line breaks are escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            ' ' if i == 0 => out.push_str("\\ "),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out
}

/// `props` as a properties file.
pub fn render(props: &[(String, String)]) -> String {
    props.iter().map(|(k, v)| format!("{k}={}\n", escape(v))).collect()
}

/// The voters a new cluster's controllers format with: `<id>@<host>:9093:<directory id>`.
pub fn initial_controllers(valid: &ValidCluster, names: &Names, uid: &str) -> String {
    let (role, _) = voters(&valid.layout);
    initial_voters(valid, uid)
        .into_iter()
        .enumerate()
        .map(|(k, (id, directory))| format!("{id}@{}:{CONTROLLER_PORT}:{directory}", names.host(role, k as u32)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The initial voters of the cluster with `uid`: node id and directory id, by ordinal.
pub fn initial_voters(valid: &ValidCluster, uid: &str) -> Vec<(i32, String)> {
    let (role, count) = voters(&valid.layout);
    (0..count)
        .map(|k| {
            let id = crate::nodes::node_id(role, k);
            (id, super::ids::directory_id(uid, id))
        })
        .collect()
}

/// A stable 64-bit FNV-1a hash, hex.
fn fnv1a_64(content: &str) -> String {
    let hash =
        content.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// The hash of what a node of `role` reads at start, but the cluster-wide dynamic keys, the
/// `bootstrapped` flag and the external addresses (see the module).
pub fn template_hash(valid: &ValidCluster, names: &Names, role: NodeRole, data: &BTreeMap<String, String>) -> String {
    let mut content = String::new();
    let props = properties(valid, names, role);
    let fixed: Vec<(String, String)> = props.into_iter().filter(|(k, _)| !is_cluster_wide(k)).collect();
    let mut section = |name: &str, text: &str| {
        let _ = write!(content, "{name}\0{}\0{text}\0", text.len());
    };
    section("properties", &render(&fixed));
    for key in [START_SCRIPT, CLUSTER_ID] {
        section(key, data.get(key).map_or("", String::as_str));
    }
    if role != NodeRole::Broker {
        section(INITIAL_CONTROLLERS, data.get(INITIAL_CONTROLLERS).map_or("", String::as_str));
    }
    if is_broker(role) {
        // What decides the address a broker advertises; not the Services' annotations.
        let external = valid.spec.listeners.external.as_ref().map(|e| serde_json::to_string(&(e.type_, &e.advertised)));
        section("external", &external.and_then(|r| r.ok()).unwrap_or_default());
    }
    fnv1a_64(&content)
}

/// The ConfigMap's data.
pub fn data(valid: &ValidCluster, names: &Names, uid: &str, inputs: &Inputs) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    for pool in super::roles(&valid.layout) {
        data.insert(properties_key(pool), render(&properties(valid, names, pool)));
    }
    data.insert(START_SCRIPT.into(), super::script::start_script());
    data.insert(CLUSTER_ID.into(), inputs.cluster_id.clone());
    data.insert(INITIAL_CONTROLLERS.into(), initial_controllers(valid, names, uid));
    data.insert(BOOTSTRAPPED.into(), inputs.bootstrapped.to_string());
    if valid.spec.listeners.external.is_some() {
        for (ordinal, address) in
            inputs.external_addresses.iter().filter(|(k, _)| (0..valid.layout.brokers()).contains(k))
        {
            data.insert(external_key(*ordinal), address.clone());
        }
    }
    data
}

/// The ConfigMap of `data`.
pub fn config_map(names: &Names, data: BTreeMap<String, String>) -> ConfigMap {
    ConfigMap { metadata: names.cluster_set().meta(names.config_map()), data: Some(data), ..Default::default() }
}
