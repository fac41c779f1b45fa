//! Checks of an operator's CRDs that need no API server: what `kubectl explain` would show
//! without a description.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// The properties below `spec` and `status` of `crd`'s first version that have no
/// description, as paths (`spec.storage.size`, `status.members[].name`, `spec.config{}`),
/// and `(resource)` when the resource itself has none of its own (kube-derive's default
/// "Auto-generated derived type for …" is what `kubectl explain` would show otherwise).
pub fn undescribed(crd: &CustomResourceDefinition) -> Vec<String> {
    let crd = serde_json::to_value(crd).unwrap_or_default();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let root = &schema["properties"];
    let mut missing = Vec::new();
    let own = schema["description"].as_str().filter(|d| !d.trim().is_empty() && !d.starts_with("Auto-generated"));
    if own.is_none() {
        missing.push("(resource)".to_string());
    }
    for part in ["spec", "status"] {
        walk(part, &root[part], &mut missing);
    }
    missing
}

fn walk(path: &str, node: &Value, out: &mut Vec<String>) {
    for (name, prop) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let p = format!("{path}.{name}");
        if prop.get("description").and_then(Value::as_str).is_none_or(|d| d.trim().is_empty()) {
            out.push(p.clone());
        }
        walk(&p, prop, out);
    }
    if let Some(items) = node.get("items") {
        walk(&format!("{path}[]"), items, out);
    }
    if let Some(extra) = node.get("additionalProperties").filter(|v| v.is_object()) {
        walk(&format!("{path}{{}}"), extra, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn a_property_without_a_description_is_named_by_its_path() {
        let mut crd = crate::testing::echo::Echo::crd();
        assert_eq!(undescribed(&crd), Vec::<String>::new(), "the echo resource documents every field");
        let mut json = serde_json::to_value(&crd).expect("json");
        let spec = &mut json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["properties"]["message"]["description"] = Value::String(" ".into());
        crd = serde_json::from_value(json).expect("crd");
        assert_eq!(undescribed(&crd), ["spec.message"]);

        let mut json = serde_json::to_value(&crd).expect("json");
        json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] =
            Value::String("Auto-generated derived type for EchoSpec via `CustomResource`".into());
        crd = serde_json::from_value(json).expect("crd");
        assert_eq!(undescribed(&crd), ["(resource)", "spec.message"]);
    }
}
