//! The operator's API on a real kube-apiserver, for the topic controller's test and
//! benchmark: the CRDs, a namespace, and the Role the operator's `rbac` rules render,
//! bound to its service account, so the controller runs with exactly its own rights.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use statecraft_kafka::KafkaOperator;
use statecraft_kafka::api::{KafkaCluster, KafkaTopic};
use statecraft_shared::rbac::{OperatorRbac, render};
use statecraft_shared::runner::Operator;

/// The operator's service account in `ns`, as the API server names its user.
pub fn operator_user(ns: &str) -> String {
    format!("system:serviceaccount:{ns}:{}", KafkaOperator::NAME)
}

/// Installs the CRDs, namespace `ns` and the operator's Roles and RoleBindings in it, and
/// waits until the CRDs are served.
pub async fn install(client: &Client, ns: &str) {
    let pp = PostParams::default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in KafkaOperator::crds() {
        crds.create(&pp, &crd).await.unwrap();
    }
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(ns.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client.clone()).create(&pp, &namespace).await.unwrap();
    let rbac = render(&OperatorRbac::with_base_rules(KafkaOperator::NAME, ns, KafkaOperator::rbac_rules())).unwrap();
    for (role, binding) in &rbac.roles {
        Api::<Role>::namespaced(client.clone(), ns).create(&pp, role).await.unwrap();
        Api::<RoleBinding>::namespaced(client.clone(), ns).create(&pp, binding).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let topics = Api::<KafkaTopic>::namespaced(client.clone(), ns).list(&Default::default()).await;
        let clusters = Api::<KafkaCluster>::namespaced(client.clone(), ns).list(&Default::default()).await;
        match (topics, clusters) {
            (Ok(_), Ok(_)) => return,
            (t, c) if Instant::now() > deadline => panic!("the CRDs are not served after 60 s: {t:?} {c:?}"),
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}
