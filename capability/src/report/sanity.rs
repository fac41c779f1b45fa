//! Validator-grade sanity checks of a bundle: what `operator-sdk bundle validate` and the
//! API server would refuse. They are errors of the bundle, reported in the assessment (and
//! by exit status 4), not errors of the tool: the rest of the assessment still stands.

use crate::manifests::{Manifests, Object};

/// API versions removed from Kubernetes: `(apiVersion, removed in, use instead)`. Objects in
/// these versions cannot be installed on a current cluster.
const REMOVED: &[(&str, &str, &str)] = &[
    ("apiextensions.k8s.io/v1beta1", "1.22", "apiextensions.k8s.io/v1"),
    ("admissionregistration.k8s.io/v1beta1", "1.22", "admissionregistration.k8s.io/v1"),
    ("apiregistration.k8s.io/v1beta1", "1.22", "apiregistration.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", "1.22", "rbac.authorization.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1alpha1", "1.22", "rbac.authorization.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", "1.22", "networking.k8s.io/v1"),
    ("extensions/v1beta1", "1.22", "apps/v1 or networking.k8s.io/v1"),
    ("apps/v1beta1", "1.16", "apps/v1"),
    ("apps/v1beta2", "1.16", "apps/v1"),
    ("scheduling.k8s.io/v1beta1", "1.22", "scheduling.k8s.io/v1"),
    ("certificates.k8s.io/v1beta1", "1.22", "certificates.k8s.io/v1"),
    ("coordination.k8s.io/v1beta1", "1.22", "coordination.k8s.io/v1"),
    ("policy/v1beta1", "1.25", "policy/v1"),
    ("batch/v1beta1", "1.25", "batch/v1"),
    ("discovery.k8s.io/v1beta1", "1.25", "discovery.k8s.io/v1"),
    ("events.k8s.io/v1beta1", "1.25", "events.k8s.io/v1"),
    ("node.k8s.io/v1beta1", "1.25", "node.k8s.io/v1"),
    ("autoscaling/v2beta1", "1.25", "autoscaling/v2"),
    ("autoscaling/v2beta2", "1.26", "autoscaling/v2"),
    ("storage.k8s.io/v1beta1", "1.27", "storage.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta1", "1.26", "flowcontrol.apiserver.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta2", "1.29", "flowcontrol.apiserver.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta3", "1.32", "flowcontrol.apiserver.k8s.io/v1"),
];

/// The ClusterServiceVersion API version OLM serves.
const CSV_API_VERSION: &str = "operators.coreos.com/v1alpha1";

/// The bundle's errors (the capabilities annotation is checked where it is read).
pub(super) fn errors(shipped: &Manifests, csv: Option<&Object>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(c) = csv {
        let api = c.value["apiVersion"].as_str().unwrap_or_default();
        if api != CSV_API_VERSION {
            out.push(format!("{}: apiVersion {api} is not {CSV_API_VERSION}", c.describe()));
        }
        if let Some(examples) = c.value["metadata"]["annotations"]["alm-examples"].as_str()
            && let Err(e) = serde_json::from_str::<Vec<serde_json::Value>>(examples)
        {
            out.push(format!("{}: alm-examples is not a JSON array of objects: {e}", c.describe()));
        }
    }
    for o in &shipped.objects {
        let api = o.value["apiVersion"].as_str().unwrap_or_default();
        if let Some((_, removed, instead)) = REMOVED.iter().find(|(v, _, _)| *v == api) {
            out.push(format!("{}: apiVersion {api} was removed in Kubernetes {removed} (use {instead})", o.describe()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_wrong_csv_version_and_removed_apis_are_errors() {
        let csv = Object::built(
            json!({"apiVersion": "operators.coreos.com/v1", "kind": "ClusterServiceVersion", "metadata": {"name": "x",
                   "annotations": {"alm-examples": "{not json"}}}),
            "csv.yaml",
        );
        let crd = Object::built(
            json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}),
            "crd.yaml",
        );
        let shipped = Manifests { objects: vec![csv.clone(), crd], ..Default::default() };
        let errors = errors(&shipped, Some(&csv));
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("apiVersion operators.coreos.com/v1 is not operators.coreos.com/v1alpha1"));
        assert!(errors[1].contains("alm-examples is not a JSON array"));
        assert_eq!(
            errors[2],
            "CustomResourceDefinition a.b (crd.yaml:1): apiVersion apiextensions.k8s.io/v1beta1 was removed in Kubernetes 1.22 (use apiextensions.k8s.io/v1)"
        );
    }
}
