//! What the repository ships about each operator must be exactly what the code renders:
//! `crds/<operator>.yaml` (the `crd` subcommand), `deploy/<operator>/operator.yaml`
//! (`manifests`), `deploy/<operator>/install.yaml` (`install`), and the two files `statecraft-capability` reads instead of linking the
//! operator: `deploy/<operator>/capabilities.json` (`capabilities`) and
//! `deploy/<operator>/sample-objects.yaml` (`sample-objects`), and the API reference
//! `docs/api/<operator>.md` (`api-reference`). Regenerate them all with `make manifests`.

use statecraft_shared::reference::api_reference;
use statecraft_shared::runner::{
    Operator, capabilities_json, crd_yaml, install_yaml, manifests_yaml, sample_objects_yaml,
};

fn same_as_file(file: &str, generated: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let committed =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}; run `make manifests`", path.display()));
    assert!(committed == generated, "{file} is stale: run `make manifests` and commit the result");
}

fn check<O: Operator>(short: &str) {
    let crds = crd_yaml(&O::crds()).unwrap_or_else(|e| panic!("rendering CRDs of {}: {e}", O::NAME));
    same_as_file(&format!("crds/{short}.yaml"), &crds);
    let manifests = manifests_yaml::<O>("statecraft-system", &["statecraft-system".into()], None)
        .unwrap_or_else(|e| panic!("rendering manifests of {}: {e}", O::NAME));
    same_as_file(&format!("deploy/{short}/operator.yaml"), &manifests);
    let install = install_yaml::<O>("statecraft-system", &["statecraft-system".into()], None)
        .unwrap_or_else(|e| panic!("rendering the install file of {}: {e}", O::NAME));
    same_as_file(&format!("deploy/{short}/install.yaml"), &install);
    // `capabilities` prints the JSON with a newline (`println!`), and the script saves that.
    same_as_file(&format!("deploy/{short}/capabilities.json"), &format!("{}\n", capabilities_json::<O>()));
    let samples = sample_objects_yaml::<O>().unwrap_or_else(|e| panic!("building sample objects of {}: {e}", O::NAME));
    same_as_file(&format!("deploy/{short}/sample-objects.yaml"), &samples);
    same_as_file(&format!("docs/api/{short}.md"), &api_reference(O::NAME, &O::crds()));
}

#[test]
fn mysql_manifests_are_up_to_date() {
    check::<statecraft_mysql::MysqlOperator>("mysql");
}

#[test]
fn kafka_manifests_are_up_to_date() {
    check::<statecraft_kafka::KafkaOperator>("kafka");
}

#[test]
fn etcd_manifests_are_up_to_date() {
    check::<statecraft_etcd::EtcdOperator>("etcd");
}
