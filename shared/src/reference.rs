//! The API reference of an operator's resources, rendered from its CRDs as Markdown: every
//! field of `spec` and `status` with its type, constraints and description, and the rules
//! the API server enforces. What `kubectl explain` shows one field at a time, on one page;
//! written to `docs/api/<operator>.md` by `make manifests` and kept fresh by a test, so it
//! never says anything the CRDs do not.

use std::fmt::Write;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// The reference page of `crds`, titled after `operator`.
pub fn api_reference(operator: &str, crds: &[CustomResourceDefinition]) -> String {
    let mut out = format!(
        "# {operator} API reference\n\n\
         Generated from the CRDs by `{operator} api-reference` (`make manifests`); do not edit.\n\
         `kubectl explain <kind>.<field>` shows the same descriptions.\n"
    );
    for crd in crds {
        resource(&mut out, crd);
    }
    out
}

/// One resource: its names, its description, then its fields and rules.
fn resource(out: &mut String, crd: &CustomResourceDefinition) {
    let crd = serde_json::to_value(crd).unwrap_or_default();
    let spec = &crd["spec"];
    let names = &spec["names"];
    let kind = names["kind"].as_str().unwrap_or_default();
    let version = &spec["versions"][0];
    let schema = &version["schema"]["openAPIV3Schema"];
    let _ = write!(out, "\n## {kind}\n\n");
    let _ = writeln!(out, "{}\n", one_line(schema["description"].as_str().unwrap_or_default()));
    let short = strings(&names["shortNames"]);
    let categories = strings(&names["categories"]);
    let _ = writeln!(
        out,
        "`{}/{}`, {}; plural `{}`{}{}.",
        spec["group"].as_str().unwrap_or_default(),
        version["name"].as_str().unwrap_or_default(),
        spec["scope"].as_str().unwrap_or_default().to_lowercase(),
        names["plural"].as_str().unwrap_or_default(),
        if short.is_empty() { String::new() } else { format!(", short names {}", code_list(&short)) },
        if categories.is_empty() { String::new() } else { format!(", categories {}", code_list(&categories)) },
    );
    for part in ["spec", "status"] {
        let node = &schema["properties"][part];
        if node.is_null() {
            continue;
        }
        let _ = write!(out, "\n### {kind}.{part}\n\n| Field | Type | Description |\n|---|---|---|\n");
        let mut rules = Vec::new();
        fields(out, part, node, &mut rules);
        if !rules.is_empty() {
            let _ = write!(out, "\nRules the API server enforces on `{part}`:\n\n");
            for (path, rule) in rules {
                let _ = writeln!(out, "- `{path}`: {}", one_line(&rule));
            }
        }
    }
}

/// A row for each property below `node` (at `path`), depth first; the CEL rules met on the
/// way are collected into `rules` with their path.
fn fields(out: &mut String, path: &str, node: &Value, rules: &mut Vec<(String, String)>) {
    collect_rules(path, node, rules);
    if let Some(props) = node["properties"].as_object() {
        let required = strings(&node["required"]);
        for (name, prop) in props {
            let p = format!("{path}.{name}");
            row(out, &p, prop, required.contains(name));
            fields(out, &p, prop, rules);
        }
    }
    if node["items"].is_object() {
        fields(out, &format!("{path}[]"), &node["items"], rules);
    }
    if node["additionalProperties"].is_object() {
        fields(out, &format!("{path}{{}}"), &node["additionalProperties"], rules);
    }
}

fn row(out: &mut String, path: &str, prop: &Value, required: bool) {
    let mut description = one_line(prop["description"].as_str().unwrap_or_default());
    let constraints = constraints(prop);
    if !constraints.is_empty() {
        let _ = write!(description, " ({})", constraints.join("; "));
    }
    let _ = writeln!(
        out,
        "| `{path}`{} | {} | {} |",
        if required { " (required)" } else { "" },
        type_of(prop),
        cell(&description)
    );
}

/// The field's type as a reader names it: `string`, `integer`, `[]object`, `map[string]string`.
fn type_of(prop: &Value) -> String {
    if prop["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        return "int-or-string".into();
    }
    match prop["type"].as_str().unwrap_or("any") {
        "array" => format!("[]{}", type_of(&prop["items"])),
        "object" if prop["additionalProperties"].is_object() => {
            format!("map[string]{}", type_of(&prop["additionalProperties"]))
        }
        other => other.to_string(),
    }
}

/// What the schema itself constrains: default, enum, bounds, lengths, pattern, format.
fn constraints(prop: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if !prop["default"].is_null() {
        out.push(format!("default `{}`", prop["default"]));
    }
    if let Some(values) = prop["enum"].as_array() {
        let values: Vec<String> =
            values.iter().map(|v| format!("`{}`", v.as_str().map_or(v.to_string(), str::to_string))).collect();
        out.push(format!("one of {}", values.join(", ")));
    }
    for (key, words) in [
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("minLength", "at least this many characters:"),
        ("maxLength", "at most this many characters:"),
        ("minItems", "at least this many items:"),
        ("maxItems", "at most this many items:"),
    ] {
        if let Some(n) = prop[key].as_f64() {
            out.push(format!("{words} {n}"));
        }
    }
    if let Some(p) = prop["pattern"].as_str() {
        out.push(format!("matches `{p}`"));
    }
    if let Some(f) = prop["format"].as_str() {
        out.push(format!("format {f}"));
    }
    out
}

fn collect_rules(path: &str, node: &Value, rules: &mut Vec<(String, String)>) {
    for rule in node["x-kubernetes-validations"].as_array().into_iter().flatten() {
        let text = rule["message"].as_str().or_else(|| rule["messageExpression"].as_str());
        let rule_text = rule["rule"].as_str().unwrap_or_default();
        rules.push((path.to_string(), format!("{} (`{rule_text}`)", text.unwrap_or(rule_text))));
    }
}

/// A description on one line: paragraphs joined, Kubernetes' long upstream texts (e.g.
/// Quantity's) cut after their first paragraph.
fn one_line(text: &str) -> String {
    let first = text.split("\n\n").next().unwrap_or_default();
    first.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_string)).collect()
}

fn code_list(items: &[String]) -> String {
    items.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn every_field_of_the_resource_gets_a_row_with_its_type_and_description() {
        let page = api_reference("statecraft-echo", &[crate::testing::echo::Echo::crd()]);
        assert!(page.starts_with("# statecraft-echo API reference\n"), "{page}");
        assert!(
            page.contains("\n## Echo\n\nA test resource: the echo operator copies its message into a ConfigMap.\n"),
            "{page}"
        );
        assert!(page.contains("`test.statecraft.io/v1alpha1`, namespaced; plural `echoes`."), "{page}");
        assert!(page.contains("### Echo.spec"), "{page}");
        assert!(
            page.contains(
                "| `spec.message` (required) | string | The message to copy into the ConfigMap; must not be empty. |"
            ),
            "{page}"
        );
    }

    #[test]
    fn types_constraints_and_rules_read_as_people_write_them() {
        let prop = serde_json::json!({
            "type": "integer", "minimum": 1.0, "maximum": 5.0, "default": 3,
            "description": "How many.\n\nA second paragraph | with a pipe."
        });
        let mut out = String::new();
        row(&mut out, "spec.replicas", &prop, false);
        assert_eq!(out, "| `spec.replicas` | integer | How many. (default `3`; at least 1; at most 5) |\n");
        assert_eq!(type_of(&serde_json::json!({"type": "array", "items": {"type": "object"}})), "[]object");
        assert_eq!(
            type_of(&serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}})),
            "map[string]string"
        );
        assert_eq!(cell("a | b"), "a \\| b");
        let mut rules = Vec::new();
        collect_rules(
            "spec",
            &serde_json::json!({"x-kubernetes-validations": [{"rule": "self.a == oldSelf.a", "message": "spec.a is immutable"}]}),
            &mut rules,
        );
        assert_eq!(rules, [("spec".to_string(), "spec.a is immutable (`self.a == oldSelf.a`)".to_string())]);
    }
}
