//! Statecraft's own operators: their claims, where their shipped files are, and the objects
//! they build for a sample custom resource.
//!
//! Why in-process: the claims are the operators' own `Operator::capabilities()` and the
//! sample objects come from the operators' own pure builders (`statecraft_mysql::build`),
//! so the report can never check a copy that drifted from the code. The builders' output
//! is serialized to JSON and goes through exactly the checks `assess` runs on third-party
//! manifests, so there is one implementation of each check. The CRDs, RBAC and Deployment
//! are read from the files users install (`crds/`, `deploy/<operator>/`), which the e2e
//! suite's manifest-freshness test keeps equal to what the binaries print.

use std::path::Path;

use statecraft_shared::runner::Operator;

use crate::manifests::{self, Manifests, Object};
use crate::{Error, Result};

/// One of Statecraft's operators, as the report sees it.
#[derive(Debug, Clone, Copy)]
pub struct StatecraftOperator {
    /// Short name: `mysql` (directories, evidence file).
    pub name: &'static str,
    /// The binary and `Operator::NAME`: `statecraft-mysql`.
    pub binary: &'static str,
    /// The operator's claims (`Operator::capabilities`).
    pub claims: fn() -> Vec<&'static str>,
    /// Builds the objects of the operator's sample resource; `None` while the operator
    /// defines no resources.
    pub sample: Option<fn() -> Result<Vec<Object>>>,
}

/// Every Statecraft operator, in report order.
pub fn all() -> Vec<StatecraftOperator> {
    vec![
        StatecraftOperator {
            name: "mysql",
            binary: statecraft_mysql::MysqlOperator::NAME,
            claims: statecraft_mysql::MysqlOperator::capabilities,
            sample: Some(mysql_sample),
        },
        StatecraftOperator {
            name: "etcd",
            binary: statecraft_etcd::EtcdOperator::NAME,
            claims: statecraft_etcd::EtcdOperator::capabilities,
            sample: Some(etcd_sample),
        },
        StatecraftOperator {
            name: "kafka",
            binary: statecraft_kafka::KafkaOperator::NAME,
            claims: statecraft_kafka::KafkaOperator::capabilities,
            sample: None,
        },
    ]
}

/// The short names of [`all`].
pub fn names() -> Vec<&'static str> {
    all().into_iter().map(|o| o.name).collect()
}

/// What `operator` ships, under the workspace `root`: `crds/<name>.yaml` and every YAML
/// and JSON file in `deploy/<name>/` (RBAC and Deployment, alert rules, monitors,
/// dashboards).
pub fn shipped(root: &Path, operator: &str) -> Result<Manifests> {
    let mut out = Manifests::default();
    let crds = root.join("crds").join(format!("{operator}.yaml"));
    if crds.is_file() {
        out.extend(manifests::load_file(&crds).strict()?);
    }
    let deploy = root.join("deploy").join(operator);
    if deploy.is_dir() {
        out.extend(manifests::load_dir(&deploy)?.strict()?);
    }
    // Findings name files as the repository does (`deploy/mysql/operator.yaml:156`).
    for source in out.objects.iter_mut().map(|o| &mut o.source).chain(out.dashboards.iter_mut().map(|d| &mut d.source))
    {
        if let Ok(rel) = source.path.strip_prefix(root) {
            source.path = rel.to_path_buf();
        }
    }
    Ok(out)
}

/// The sample MySQLCluster (`capability/samples/mysql-cluster.yaml`).
pub const MYSQL_SAMPLE: &str = include_str!("../samples/mysql-cluster.yaml");

/// The objects the MySQL operator builds for [`MYSQL_SAMPLE`]: StatefulSet, the three
/// Services, the ConfigMap and the PodDisruptionBudget (the Secret of generated passwords
/// is left out: nothing is checked on it).
fn mysql_sample() -> Result<Vec<Object>> {
    use statecraft_mysql::api::MySQLCluster;
    use statecraft_mysql::build::{Names, config, pdb, services, statefulset};
    let err = |message: String| Error::Sample { operator: "mysql".into(), message };
    let cluster: MySQLCluster =
        serde_yaml::from_str(MYSQL_SAMPLE).map_err(|e| err(format!("samples/mysql-cluster.yaml: {e}")))?;
    let valid = statecraft_mysql::validate::validate(&cluster.spec)
        .map_err(|e| err(format!("samples/mysql-cluster.yaml is not valid: {e}")))?;
    let names = Names::new(
        cluster.metadata.name.clone().unwrap_or_else(|| "sample".into()),
        cluster.metadata.namespace.clone().unwrap_or_else(|| "sample".into()),
    );
    let origin = "sample MySQLCluster (capability/samples/mysql-cluster.yaml)";
    let values = [
        serde_json::to_value(statefulset::statefulset(&valid, &names)),
        serde_json::to_value(services::headless_service(&names)),
        serde_json::to_value(services::read_write_service(&valid, &names)),
        serde_json::to_value(services::read_only_service(&valid, &names)),
        serde_json::to_value(config::config_map(&valid, &names)),
        serde_json::to_value(pdb::pdb(&names)),
    ];
    values
        .into_iter()
        .map(|v| v.map(|v| Object::built(v, origin)).map_err(|e| err(format!("serializing: {e}"))))
        .collect()
}

/// The sample EtcdCluster (`capability/samples/etcd-cluster.yaml`).
pub const ETCD_SAMPLE: &str = include_str!("../samples/etcd-cluster.yaml");

/// The objects the etcd operator builds for [`ETCD_SAMPLE`] with all its members started:
/// the StatefulSet at the spec's size, the Services and the PodDisruptionBudget.
fn etcd_sample() -> Result<Vec<Object>> {
    use statecraft_etcd::api::EtcdCluster;
    use statecraft_etcd::build::statefulset::{RestoreParts, statefulset};
    use statecraft_etcd::build::{Names, pdb, services};
    let err = |message: String| Error::Sample { operator: "etcd".into(), message };
    let cluster: EtcdCluster =
        serde_yaml::from_str(ETCD_SAMPLE).map_err(|e| err(format!("samples/etcd-cluster.yaml: {e}")))?;
    let valid = statecraft_etcd::validate::validate(&cluster.spec)
        .map_err(|e| err(format!("samples/etcd-cluster.yaml is not valid: {e}")))?;
    let names = Names::new(
        cluster.metadata.name.clone().unwrap_or_else(|| "sample".into()),
        cluster.metadata.namespace.clone().unwrap_or_else(|| "sample".into()),
    );
    let replicas = valid.spec.replicas.max(1) as u32;
    let origin = "sample EtcdCluster (capability/samples/etcd-cluster.yaml)";
    let values = [
        serde_json::to_value(statefulset(&valid, &names, replicas, RestoreParts::default())),
        serde_json::to_value(services::peer_service(&names)),
        serde_json::to_value(services::client_service(&names)),
        serde_json::to_value(pdb::pdb(&names, replicas)),
    ];
    values
        .into_iter()
        .map(|v| v.map(|v| Object::built(v, origin)).map_err(|e| err(format!("serializing: {e}"))))
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_etcd_sample_builds_a_statefulset_and_its_pdb() {
        let objects = etcd_sample().expect("the sample is valid");
        let kinds: Vec<_> = objects.iter().map(|o| (o.kind().to_string(), o.group().to_string())).collect();
        assert!(kinds.contains(&("StatefulSet".into(), "apps".into())), "{kinds:?}");
        assert!(kinds.contains(&("PodDisruptionBudget".into(), "policy".into())), "{kinds:?}");
        assert_eq!(objects[0].name(), "sample");
    }
    use super::*;

    #[test]
    fn the_mysql_sample_builds_a_statefulset_and_its_pdb() {
        let objects = mysql_sample().expect("the sample is valid");
        let kinds: Vec<_> = objects.iter().map(|o| (o.kind().to_string(), o.group().to_string())).collect();
        assert!(kinds.contains(&("StatefulSet".into(), "apps".into())), "{kinds:?}");
        assert!(kinds.contains(&("PodDisruptionBudget".into(), "policy".into())), "{kinds:?}");
        assert_eq!(objects[0].name(), "sample");
    }

    #[test]
    fn every_claim_of_every_operator_is_in_the_model() {
        for op in all() {
            for id in (op.claims)() {
                assert!(crate::model::criterion(id).is_some(), "{} claims unknown {id}", op.name);
            }
        }
    }

    #[test]
    fn names_and_binaries_agree() {
        for op in all() {
            assert_eq!(op.binary, format!("statecraft-{}", op.name));
        }
    }
}
