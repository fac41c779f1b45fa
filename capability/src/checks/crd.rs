//! Checks of the CustomResourceDefinitions: structural schema, descriptions, status
//! subresource, printer columns, validation, image override.

use serde_json::Value;

use super::{CheckResult, cap, plural};
use crate::manifests::Object;

const CRD_GROUP: &str = "apiextensions.k8s.io";

/// Keywords that constrain a value (beyond its type).
const CONSTRAINTS: &[&str] = &[
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "format",
    "multipleOf",
];

struct Version<'a> {
    crd: &'a Object,
    name: &'a str,
    value: &'a Value,
}

impl Version<'_> {
    fn served(&self) -> bool {
        self.value["served"].as_bool().unwrap_or(true)
    }
    fn schema(&self) -> Option<&Value> {
        self.value["schema"]["openAPIV3Schema"].as_object().map(|_| &self.value["schema"]["openAPIV3Schema"])
    }
    fn describe(&self) -> String {
        format!("CRD {} {} ({})", self.crd.name(), self.name, self.crd.source)
    }
}

fn versions<'a>(crds: &[&'a Object]) -> Vec<Version<'a>> {
    crds.iter()
        .flat_map(|crd| {
            crd.value["spec"]["versions"].as_array().into_iter().flatten().map(move |v| Version {
                crd,
                name: v["name"].as_str().unwrap_or("<unnamed version>"),
                value: v,
            })
        })
        .collect()
}

pub(super) fn checks(install: &[Object]) -> Vec<CheckResult> {
    let crds: Vec<&Object> = install.iter().filter(|o| o.is(CRD_GROUP, "CustomResourceDefinition")).collect();
    let ids = [
        "crd.status-subresource",
        "crd.structural-schema",
        "crd.descriptions",
        "crd.printer-columns",
        "crd.validation-rules",
        "crd.image-override",
    ];
    if crds.is_empty() {
        return ids.into_iter().map(|id| CheckResult::fail(id, "no CustomResourceDefinition ships")).collect();
    }
    let versions = versions(&crds);
    let served: Vec<&Version<'_>> = versions.iter().filter(|v| v.served()).collect();
    let looked_at =
        format!("{}, {}", plural(crds.len(), "CRD", "CRDs"), plural(served.len(), "served version", "served versions"));
    let mut out = Vec::new();

    let mut findings = Vec::new();
    for crd in &crds {
        if crd.value["spec"]["versions"].as_array().is_none_or(Vec::is_empty) {
            findings.push(format!("CRD {} ({}) has no versions", crd.name(), crd.source));
        }
    }
    let no_status: Vec<String> = served
        .iter()
        .filter(|v| !v.value["subresources"]["status"].is_object())
        .map(|v| format!("{}: no status subresource", v.describe()))
        .chain(findings.iter().cloned())
        .collect();
    out.push(CheckResult::new("crd.status-subresource", looked_at.clone(), cap(no_status)));

    let mut structural = findings.clone();
    for v in &versions {
        match v.schema() {
            None => structural.push(format!("{}: no openAPIV3Schema", v.describe())),
            Some(schema) => {
                if schema["type"] != "object" {
                    structural.push(format!("{}: the root of the schema is not of type object", v.describe()));
                }
                let mut missing = Vec::new();
                untyped(schema, "", &mut missing);
                structural.extend(missing.into_iter().map(|p| format!("{}: {p} has no type", v.describe())));
            }
        }
    }
    out.push(CheckResult::new("crd.structural-schema", looked_at.clone(), cap(structural)));

    let mut undocumented = Vec::new();
    let mut fields = 0;
    for v in &versions {
        let Some(schema) = v.schema() else { continue };
        for part in ["spec", "status"] {
            let mut missing = Vec::new();
            undescribed(&format!(".{part}"), &schema["properties"][part], &mut missing, &mut fields);
            undocumented.extend(missing.into_iter().map(|p| format!("{}: {p} has no description", v.describe())));
        }
    }
    out.push(CheckResult::new(
        "crd.descriptions",
        format!("{looked_at}, {}", plural(fields, "field", "fields")),
        cap(undocumented),
    ));

    let no_columns: Vec<String> = served
        .iter()
        .filter(|v| v.value["additionalPrinterColumns"].as_array().is_none_or(Vec::is_empty))
        .map(|v| format!("{}: no additionalPrinterColumns", v.describe()))
        .collect();
    out.push(CheckResult::new("crd.printer-columns", looked_at.clone(), cap(no_columns)));

    let (mut rules, mut constraints) = (0, 0);
    let mut unvalidated = Vec::new();
    for v in &served {
        let Some(schema) = v.schema() else { continue };
        let (r, c) = validations(&schema["properties"]["spec"]);
        if r + c == 0 {
            unvalidated.push(format!("{}: the spec has no CEL rule and no value constraint", v.describe()));
        }
        rules += r;
        constraints += c;
    }
    out.push(CheckResult::new(
        "crd.validation-rules",
        format!(
            "{looked_at}: {}, {}",
            plural(rules, "CEL rule", "CEL rules"),
            plural(constraints, "constraint", "constraints")
        ),
        cap(unvalidated),
    ));

    let with_image: Vec<String> = served
        .iter()
        .filter(|v| v.schema().is_some_and(|s| has_image_field(&s["properties"]["spec"])))
        .map(|v| v.crd.name().to_string())
        .collect();
    out.push(if with_image.is_empty() {
        CheckResult::fail(
            "crd.image-override",
            format!("no CRD among {looked_at} has a string field `image` in its spec"),
        )
    } else {
        CheckResult::new("crd.image-override", format!("`image` in {}", with_image.join(", ")), Vec::new())
    });
    out
}

/// Paths of schema nodes without a `type` (structural schemas need one everywhere except
/// where int-or-string or preserve-unknown-fields says otherwise).
fn untyped(node: &Value, path: &str, out: &mut Vec<String>) {
    let exempt = node["x-kubernetes-int-or-string"] == true || node["x-kubernetes-preserve-unknown-fields"] == true;
    if !exempt && !node["type"].is_string() {
        out.push(if path.is_empty() { "the root".to_string() } else { path.to_string() });
    }
    for_children(node, path, &mut |child, p| untyped(child, &p, out));
}

/// Paths of properties below `node` without a description (what `kubectl explain` shows);
/// counts the fields seen.
fn undescribed(path: &str, node: &Value, out: &mut Vec<String>, fields: &mut usize) {
    if let Some(props) = node["properties"].as_object() {
        for (name, prop) in props {
            let p = format!("{path}.{name}");
            *fields += 1;
            if prop["description"].as_str().is_none_or(|d| d.trim().is_empty()) {
                out.push(p.clone());
            }
            undescribed(&p, prop, out, fields);
        }
    }
    if node["items"].is_object() {
        undescribed(&format!("{path}[]"), &node["items"], out, fields);
    }
    if node["additionalProperties"].is_object() {
        undescribed(&format!("{path}{{}}"), &node["additionalProperties"], out, fields);
    }
}

fn for_children(node: &Value, path: &str, f: &mut dyn FnMut(&Value, String)) {
    if let Some(props) = node["properties"].as_object() {
        for (name, prop) in props {
            f(prop, format!("{path}.{name}"));
        }
    }
    if node["items"].is_object() {
        f(&node["items"], format!("{path}[]"));
    }
    if node["additionalProperties"].is_object() {
        f(&node["additionalProperties"], format!("{path}{{}}"));
    }
}

/// CEL rules and value constraints in a schema subtree.
fn validations(node: &Value) -> (usize, usize) {
    if !node.is_object() {
        return (0, 0);
    }
    let mut rules = node["x-kubernetes-validations"].as_array().map_or(0, Vec::len);
    let mut constraints = CONSTRAINTS.iter().filter(|k| node.get(**k).is_some()).count();
    for_children(node, "", &mut |child, _| {
        let (r, c) = validations(child);
        rules += r;
        constraints += c;
    });
    (rules, constraints)
}

fn has_image_field(node: &Value) -> bool {
    let direct = node["properties"]["image"]["type"] == "string";
    let mut nested = false;
    for_children(node, "", &mut |child, _| nested = nested || has_image_field(child));
    direct || nested
}

#[cfg(test)]
mod tests {
    use super::super::CheckStatus;
    use super::*;
    use serde_json::json;

    fn crd(version: Value) -> Object {
        Object::built(
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "things.example.com"},
                "spec": {"group": "example.com", "versions": [version]},
            }),
            "crds/things.yaml",
        )
    }

    fn good_version() -> Value {
        json!({
            "name": "v1", "served": true, "storage": true,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [{"name": "Ready", "type": "string", "jsonPath": ".status.ready"}],
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "description": "Desired state.",
                    "x-kubernetes-validations": [{"rule": "self.size > 0"}],
                    "properties": {
                        "image": {"type": "string", "description": "Image override."},
                        "size": {"type": "integer", "description": "Members.", "minimum": 1},
                        "port": {"x-kubernetes-int-or-string": true, "description": "Port."},
                        "labels": {"type": "object", "description": "Labels.",
                            "additionalProperties": {"type": "string"}},
                    }},
                "status": {"type": "object", "description": "Observed state.", "properties": {
                    "ready": {"type": "boolean", "description": "Ready."}}},
            }}},
        })
    }

    fn statuses(results: &[CheckResult]) -> Vec<(&'static str, CheckStatus)> {
        results.iter().map(|r| (r.id, r.status)).collect()
    }

    #[test]
    fn a_complete_crd_passes_every_check() {
        let results = checks(&[crd(good_version())]);
        for r in &results {
            assert_eq!(r.status, CheckStatus::Pass, "{}: {:?}", r.id, r.findings);
        }
        let validation = results.iter().find(|r| r.id == "crd.validation-rules").unwrap();
        assert_eq!(validation.detail, "1 CRD, 1 served version: 1 CEL rule, 1 constraint");
    }

    #[test]
    fn each_gap_fails_its_check_naming_the_field() {
        let mut v = good_version();
        v["subresources"] = json!({});
        v["additionalPrinterColumns"] = json!([]);
        let spec = &mut v["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["x-kubernetes-validations"] = json!([]);
        spec["properties"]["size"] = json!({"type": "integer"});
        spec["properties"]["image"] = json!({"type": "object", "description": "not a string"});
        spec["properties"]["free"] = json!({"description": "no type"});
        let results = checks(&[crd(v)]);
        assert!(statuses(&results).iter().all(|(_, s)| *s == CheckStatus::Fail), "{:?}", statuses(&results));
        let findings = |id: &str| results.iter().find(|r| r.id == id).unwrap().findings.join("\n");
        assert!(
            findings("crd.descriptions").contains(".spec.size has no description"),
            "{}",
            findings("crd.descriptions")
        );
        assert!(findings("crd.descriptions").contains("(crds/things.yaml:1)"));
        assert!(findings("crd.structural-schema").contains(".spec.free has no type"));
        assert!(findings("crd.status-subresource").contains("CRD things.example.com v1"));
    }

    #[test]
    fn no_crds_fails_every_crd_check() {
        let results = checks(&[]);
        assert_eq!(results.len(), 6);
        assert!(results.iter().all(|r| r.status == CheckStatus::Fail && r.findings[0].contains("no CustomResource")));
    }
}
