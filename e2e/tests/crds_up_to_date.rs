//! `crds/<operator>.yaml` must be exactly what the operator's `crd` subcommand prints, so
//! that what users install from the repository is what the code serves.

use statecraft_shared::runner::{Operator, crd_yaml};

fn check<O: Operator>(file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds").join(file);
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}; run `make crds`", path.display()));
    let generated = crd_yaml(&O::crds()).unwrap_or_else(|e| panic!("rendering {}: {e}", O::NAME));
    assert!(committed == generated, "{} is stale: run `make crds` and commit the result", path.display());
}

#[test]
fn mysql_crds_are_up_to_date() {
    check::<statecraft_mysql::MysqlOperator>("mysql.yaml");
}

#[test]
fn kafka_crds_are_up_to_date() {
    check::<statecraft_kafka::KafkaOperator>("kafka.yaml");
}

#[test]
fn etcd_crds_are_up_to_date() {
    check::<statecraft_etcd::EtcdOperator>("etcd.yaml");
}
