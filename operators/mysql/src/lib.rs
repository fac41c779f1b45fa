//! The library half of `statecraft-mysql`: the Statecraft MySQL / MariaDB operator.
//!
//! What exists (the groundwork of issue 4):
//!
//! - [`api`]: the custom resources of `mysql.statecraft.io/v1alpha1` — `MySQLCluster`,
//!   `MySQLBackup`, `MySQLRestore`, `MySQLUser`, `MySQLDatabase` — with schema and CEL
//!   validation, printer columns and a description on every field. `crd` prints them.
//! - [`accounts`]: declared accounts and databases: the plans from what a server holds to
//!   what a MySQLUser or MySQLDatabase declares, and the session that reads and applies them.
//! - [`validate`]: the pure checks the schema cannot make (supported versions per flavor,
//!   server settings the operator owns, semi-sync timeout bounds, backup schedule).
//! - [`build`]: pure builders of the owned objects — StatefulSet, headless / read-write /
//!   read-only Services, ConfigMap (my.cnf and the container's start and probe scripts),
//!   PodDisruptionBudget, and the Secret of generated passwords.
//! - [`flavor`]: what differs between MariaDB and MySQL (replication SQL, settings,
//!   binaries) behind one trait.
//! - [`image`]: the default server image per flavor and version (from
//!   `deploy/images/images.env`).
//! - [`MysqlOperator::rbac_rules`]: the namespaced rights the controllers will need.
//!
//! - [`clustering`]: the per-cluster clustering loop: GTID sets, the pure `decide()`, the
//!   `mysql_async` data plane, and one pass without Kubernetes.
//! - [`controller`]: the declarative reconcile and the clustering task that owns status
//!   and role labels.
//! - [`insight`]: abnormality detection: each server's replication lag and connection
//!   errors judged against its own recent past.
//! - [`autoscale`]: read-replica auto-scaling between bounds on client connections or
//!   replication lag (pure; the task carries out its verdict).
//! - [`backup`] and [`jobs`]: what the backup and restore Jobs run (the logical dump
//!   streamed to S3, the binary log archive, the point-in-time replay).
// No panics on what a user or the network controls: `make check` (clippy) refuses
// unwrap, expect and panic outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod accounts;
pub mod api;
pub mod autoscale;
pub mod backup;
pub mod build;
pub mod clustering;
pub mod controller;
pub mod flavor;
pub mod image;
pub mod insight;
pub mod jobs;
pub mod reason;
pub mod validate;

use std::sync::Arc;

use kube::CustomResourceExt;
use statecraft_shared::Result;
use statecraft_shared::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use statecraft_shared::names::with_name_rule;
use statecraft_shared::rbac::{CORE_GROUP, Rule};
use statecraft_shared::runner::{Operator, Runtime, parse_sample, sample_object};
use statecraft_shared::tokio_util::sync::CancellationToken;

use api::{GROUP, MySQLBackup, MySQLCluster, MySQLDatabase, MySQLRestore, MySQLUser};

/// The operator, as the shared runner sees it.
pub struct MysqlOperator;

/// Read-only verbs.
const READ: &[&str] = &["get", "list", "watch"];
/// Verbs for objects the controllers own and apply with server-side apply.
const OWN: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

impl Operator for MysqlOperator {
    const NAME: &'static str = "statecraft-mysql";

    fn crds() -> Vec<CustomResourceDefinition> {
        // A cluster's name must fit the names built from it; backups and restores name
        // only Jobs, whose names are shortened to fit (`backup::job::job_name`).
        let cluster = with_name_rule(MySQLCluster::crd(), build::MAX_CLUSTER_NAME);
        vec![cluster, MySQLBackup::crd(), MySQLRestore::crd(), MySQLUser::crd(), MySQLDatabase::crd()]
    }

    /// What the future controllers need, nothing more (events and leases are in the base
    /// rules): read the custom resources and patch their status (the restore controller
    /// creates the target cluster, the backup scheduler creates backups and deletes expired
    /// ones); own the StatefulSet, Services, ConfigMap and PodDisruptionBudget; apply and
    /// read (never list) Secrets (passwords of MySQLUsers only where the Secret opted in);
    /// patch MySQLUsers and MySQLDatabases for their finalizers;
    /// read pods, label them with their role and delete them to roll an upgrade; run backup
    /// and restore Jobs; delete the data claim of a replica that is re-seeded
    /// (`spec.autoHeal`).
    fn rbac_rules() -> Vec<Rule> {
        vec![
            Rule::new(GROUP, &["mysqlclusters"], &["get", "list", "watch", "create"]),
            Rule::new(GROUP, &["mysqlbackups"], &["get", "list", "watch", "create", "delete"]),
            Rule::new(GROUP, &["mysqlrestores"], READ),
            // Patch: the finalizer that drops an account or a database per its policy.
            Rule::new(GROUP, &["mysqlusers", "mysqldatabases"], &["get", "list", "watch", "patch"]),
            Rule::new(
                GROUP,
                &[
                    "mysqlclusters/status",
                    "mysqlbackups/status",
                    "mysqlrestores/status",
                    "mysqlusers/status",
                    "mysqldatabases/status",
                ],
                &["patch"],
            ),
            Rule::new("apps", &["statefulsets"], OWN),
            Rule::new(CORE_GROUP, &["services", "configmaps"], OWN),
            // Secrets: its clusters' password Secrets (applied, read back) and S3
            // credentials Secrets that opted in (read). No list or watch, which would
            // hand it every Secret of the namespace; no delete (owner references do that).
            Rule::new(CORE_GROUP, &["secrets"], &["get", "create", "patch"]),
            Rule::new("policy", &["poddisruptionbudgets"], OWN),
            // spec.networkPolicy: the cluster's own NetworkPolicy.
            Rule::new("networking.k8s.io", &["networkpolicies"], OWN),
            Rule::new(CORE_GROUP, &["pods"], &["get", "list", "watch", "patch", "delete"]),
            // Where the read-write Service leads clients, before a new primary takes writes.
            Rule::new("discovery.k8s.io", &["endpointslices"], &["list"]),
            // `patch`: a larger spec.storage.size asks each member's claim for it.
            Rule::new(CORE_GROUP, &["persistentvolumeclaims"], &["get", "list", "watch", "patch", "delete"]),
            Rule::new("batch", &["jobs"], OWN),
        ]
    }

    async fn run_controllers(runtime: Arc<Runtime>, shutdown: CancellationToken) -> Result<()> {
        controller::run(runtime, shutdown).await
    }

    async fn run_job(name: &str) -> Result<()> {
        jobs::run(name).await
    }

    /// What this operator claims against the capability model (`statecraft-capability
    /// criteria` lists the ids); the capability report confirms each claim from static
    /// checks and e2e evidence.
    fn capabilities() -> Vec<&'static str> {
        vec![
            // Level 1: the CRDs (schema, CEL, printer columns, descriptions), the objects
            // built from a cluster (Services, Secret, PDB, probes, resources), the operator's
            // locked-down Deployment with leader election and its namespaced Role.
            "L1.install",
            "L1.crds",
            "L1.validation",
            "L1.operand-image",
            "L1.config",
            "L1.rbac",
            "L1.operator-deployment",
            "L1.operand-security",
            // Level 2: the shared upgrade engine rolls replicas first, switches over, restarts
            // the old primary last; downgrades are refused in status.
            "L2.operand-upgrade",
            "L2.rolling-restart",
            "L2.version-checks",
            // A newer build takes over the clusters of the previous one (deploy/images/
            // previous-operator.ref) without restarting a pod.
            "L2.adoption",
            "L2.operator-upgrade",
            // Level 3: failover, switchover, scaling 1/3/5, backup to S3 in a Job, restore
            // into a new cluster, configuration changes that need a restart.
            "L3.backup",
            "L3.restore",
            "L3.failover",
            "L3.switchover",
            "L3.scaling",
            "L3.reconfiguration",
            "L3.probes",
            "L3.resources",
            "L3.pdb",
            "L3.spread",
            "L3.scheduled-backup",
            // Point-in-time recovery: each backup archives the primary's binary logs from
            // the previous backup's position; a restore replays them up to a second.
            "L3.pitr",
            // A larger spec.storage.size grows every member's claim (the servers keep
            // running); a shrink or a StorageClass that cannot grow is refused with the reason.
            "L3.volume-expansion",
            // Level 4: operator and per-member metrics, alerts with runbooks
            // (deploy/mysql/prometheus-rules.yaml, docs/runbooks/mysql/), the Grafana
            // dashboard, Events for every operation.
            "L4.metrics",
            "L4.alerts",
            "L4.events",
            "L4.dashboard",
            // Level 5: the buffer pool and connection limit follow the memory given; a
            // replication lag or connection error spike against a member's own recent past
            // is raised as a condition, an Event and a metric; replicas with errant
            // transactions or replication broken for long are re-seeded when the cluster
            // opts in (spec.autoHeal), and a lost member is rebuilt by the StatefulSet and
            // configured as a replica.
            "L5.auto-healing",
            "L5.auto-tuning",
            "L5.abnormality-detection",
            // Read-replica auto-scaling (spec.autoScaling): two replicas added when client
            // connections per replica (or replication lag) stay above a threshold, removed
            // when they stay below one, between the user's bounds.
            "L5.auto-scaling",
        ]
    }

    /// What the controllers apply for [`SAMPLE`]: the StatefulSet, the three Services, the
    /// ConfigMap and the PodDisruptionBudget (the Secret of generated passwords is left
    /// out: nothing is checked on it, and its values are random).
    fn sample_objects() -> Result<Vec<serde_json::Value>> {
        use build::{Names, config, pdb, services, statefulset};
        let cluster: MySQLCluster = parse_sample("operators/mysql/src/sample.yaml", SAMPLE)?;
        let valid = validate::validate(&cluster.spec)?;
        let names = Names::new(
            cluster.metadata.name.clone().unwrap_or_else(|| "sample".into()),
            cluster.metadata.namespace.clone().unwrap_or_else(|| "sample".into()),
        );
        Ok(vec![
            sample_object(&statefulset::statefulset(&valid, &names))?,
            sample_object(&services::headless_service(&names))?,
            sample_object(&services::read_write_service(&valid, &names))?,
            sample_object(&services::read_only_service(&valid, &names))?,
            sample_object(&config::config_map(&valid, &names))?,
            sample_object(&pdb::pdb(&names))?,
        ])
    }
}

/// The sample MySQLCluster of [`MysqlOperator::sample_objects`] (3 MariaDB members with
/// resources set, as in production).
pub const SAMPLE: &str = include_str!("sample.yaml");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use statecraft_shared::testing::crd::undescribed;

    fn crd_json<K: CustomResourceExt>() -> Value {
        serde_json::to_value(K::crd()).unwrap()
    }

    fn schema(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    }

    fn rules(node: &Value) -> Vec<String> {
        node["x-kubernetes-validations"]
            .as_array()
            .map(|a| a.iter().map(|r| r["rule"].as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn every_field_has_a_description() {
        for crd in [MySQLCluster::crd(), MySQLBackup::crd(), MySQLRestore::crd()] {
            let missing = undescribed(&crd);
            assert!(missing.is_empty(), "{}: no description: {missing:#?}", crd.metadata.name.unwrap_or_default());
        }
    }

    #[test]
    fn cluster_crd_identity_and_printer_columns() {
        let crd = crd_json::<MySQLCluster>();
        assert_eq!(crd["metadata"]["name"], "mysqlclusters.mysql.statecraft.io");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(crd["spec"]["names"]["kind"], "MySQLCluster");
        assert_eq!(crd["spec"]["names"]["shortNames"], serde_json::json!(["mysql"]));
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert!(version["subresources"]["status"].is_object());
        let columns: Vec<_> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Ready", "Phase", "Primary", "Servers", "Version", "Age", "Message"]);
        // `kubectl scale mysqlcluster db --replicas 3`, and a selector for autoscalers.
        assert_eq!(
            version["subresources"]["scale"],
            serde_json::json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"})
        );
        for (crd, short) in [(crd_json::<MySQLBackup>(), "mysqlbk"), (crd_json::<MySQLRestore>(), "mysqlrs")] {
            assert!(crd["spec"]["versions"][0]["subresources"]["status"].is_object());
            assert_eq!(crd["spec"]["names"]["shortNames"], serde_json::json!([short]));
        }
        // `kubectl get statecraft` lists every resource of every Statecraft operator.
        for crd in [crd_json::<MySQLCluster>(), crd_json::<MySQLBackup>(), crd_json::<MySQLRestore>()] {
            assert_eq!(crd["spec"]["names"]["categories"], serde_json::json!(["statecraft"]));
        }
    }

    #[test]
    fn cel_rules_are_present() {
        let crd = crd_json::<MySQLCluster>();
        let spec = &schema(&crd)["properties"]["spec"];
        let spec_rules = rules(spec);
        assert!(spec_rules.contains(&"self.flavor == oldSelf.flavor".to_string()), "{spec_rules:?}");
        assert!(!spec_rules.iter().any(|r| r.contains("storage.size")), "a size may change: {spec_rules:?}");
        assert!(spec_rules.iter().any(|r| r.contains("storageClassName")));
        let replicas = &spec["properties"]["replicas"];
        assert_eq!(rules(replicas), ["self % 2 == 1"]);
        assert_eq!(replicas["maximum"].as_f64(), Some(5.0));
        assert_eq!(replicas["minimum"].as_f64(), Some(1.0));
        assert_eq!(spec["properties"]["flavor"]["enum"], serde_json::json!(["mariadb", "mysql"]));
        assert!(spec["properties"]["version"]["pattern"].is_string());
        let retention = &spec["properties"]["backup"]["properties"]["retention"]["properties"];
        assert!(retention["maxAge"]["pattern"].is_string(), "{retention}");
        assert!(rules(&spec["properties"]["storage"]["properties"]["size"])[0].contains("isQuantity"));
        // Every message names the field it is about.
        for rule in spec["x-kubernetes-validations"].as_array().unwrap() {
            assert!(rule["message"].as_str().unwrap().contains("spec."), "{rule}");
        }

        let restore = crd_json::<MySQLRestore>();
        let restore_rules = rules(&schema(&restore)["properties"]["spec"]);
        assert!(restore_rules.contains(&"has(self.backupName) != has(self.location)".to_string()));
        let backup = crd_json::<MySQLBackup>();
        assert_eq!(rules(&schema(&backup)["properties"]["spec"]), ["self == oldSelf"]);
    }

    /// The rule of `node` whose expression contains `needle`: exactly one.
    fn rule_containing<'a>(node: &'a Value, needle: &str) -> &'a Value {
        let found: Vec<&Value> = node["x-kubernetes-validations"]
            .as_array()
            .map(|a| a.iter().filter(|r| r["rule"].as_str().is_some_and(|s| s.contains(needle))).collect())
            .unwrap_or_default();
        assert_eq!(found.len(), 1, "one rule containing {needle:?}: {node}");
        found[0]
    }

    #[test]
    fn auto_scaling_cel_rules_are_present() {
        let crd = crd_json::<MySQLCluster>();
        let spec = &schema(&crd)["properties"]["spec"];

        // spec.replicas within the bounds: a spec-level rule (it reads two fields), reported on
        // spec.replicas, and satisfied when auto-scaling is off.
        let within = rule_containing(spec, "self.autoScaling.minReplicas");
        let rule = within["rule"].as_str().unwrap();
        assert!(rule.starts_with("!has(self.autoScaling) ||"), "{rule}");
        assert!(rule.contains("self.replicas >= self.autoScaling.minReplicas"), "{rule}");
        assert!(rule.contains("self.replicas <= self.autoScaling.maxReplicas"), "{rule}");
        assert_eq!(within["fieldPath"], ".replicas");
        assert!(within["message"].as_str().unwrap().contains("spec.replicas"), "{within}");

        let scaling = &spec["properties"]["autoScaling"];
        let all = rules(scaling);
        assert_eq!(all.len(), 3, "{all:?}");
        let min_max = rule_containing(scaling, "self.minReplicas <= self.maxReplicas");
        assert_eq!(min_max["fieldPath"], ".minReplicas");
        let thresholds = rule_containing(scaling, "self.scaleInBelow < self.scaleOutAbove");
        assert_eq!(thresholds["fieldPath"], ".scaleInBelow");
        let lag = rule_containing(scaling, "ReplicationLag");
        assert!(lag["rule"].as_str().unwrap().contains("self.minReplicas >= 3"), "{lag}");
        assert_eq!(lag["fieldPath"], ".minReplicas");
        for rule in [min_max, thresholds, lag] {
            assert!(rule["message"].as_str().unwrap().contains("spec.autoScaling"), "{rule}");
        }

        // The bounds themselves: 1 to 5 and odd; the windows within their ranges.
        let props = &scaling["properties"];
        for bound in ["minReplicas", "maxReplicas"] {
            assert_eq!(rules(&props[bound]), ["self % 2 == 1"], "{bound}");
            assert_eq!(props[bound]["minimum"].as_f64(), Some(1.0), "{bound}");
            assert_eq!(props[bound]["maximum"].as_f64(), Some(5.0), "{bound}");
            let message = props[bound]["x-kubernetes-validations"][0]["message"].as_str().unwrap();
            assert!(message.contains(&format!("spec.autoScaling.{bound}")), "{message}");
        }
        assert_eq!(props["scaleOutAfterSeconds"]["minimum"].as_f64(), Some(10.0));
        assert_eq!(props["scaleOutAfterSeconds"]["maximum"].as_f64(), Some(3600.0));
        assert_eq!(props["scaleInAfterSeconds"]["minimum"].as_f64(), Some(30.0));
        assert_eq!(props["scaleInAfterSeconds"]["maximum"].as_f64(), Some(86400.0));
        assert_eq!(props["metric"]["enum"], serde_json::json!(["ClientConnections", "ReplicationLag"]));
    }

    #[test]
    fn rbac_rules_are_valid_and_least_privilege() {
        let rules = MysqlOperator::rbac_rules();
        statecraft_shared::rbac::validate(&rules).expect("valid rules");
        for r in &rules {
            assert!(!r.verbs.contains(&"*") && !r.resources.contains(&"*"), "no wildcards: {r}");
            assert!(!r.verbs.contains(&"update"), "server-side apply uses patch: {r}");
        }
        let grants = |group: &str, resource: &str, verb: &str| {
            rules.iter().any(|r| r.api_group == group && r.resources.contains(&resource) && r.verbs.contains(&verb))
        };
        assert!(grants(GROUP, "mysqlclusters/status", "patch"));
        assert!(grants("", "pods", "delete"));
        assert!(grants("batch", "jobs", "create"));
        assert!(grants("policy", "poddisruptionbudgets", "patch"));
        assert!(!grants(GROUP, "mysqlclusters", "delete"), "the operator never deletes a cluster");
        assert!(!grants(GROUP, "mysqlclusters", "patch"), "the spec belongs to the user");
        assert!(!grants("", "pods", "create"));
    }
}
