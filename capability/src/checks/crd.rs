//! Checks of the CustomResourceDefinitions: status, structural schema, descriptions,
//! printer columns, validation, image override; and the hints CRDs give about what only a run
//! can prove (backup and restore resources, scale subresources, several served versions).
//!
//! CRDs come in the forms real bundles ship: `apiextensions.k8s.io/v1` with a schema per
//! version, and the removed `v1beta1` with one schema, subresources and printer columns for
//! all versions in its `spec`. CRDs a ClusterServiceVersion lists as internal
//! (`operators.operatorframework.io/internal-objects`) are not judged as user-facing.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{CheckResult, CheckStatus, Hint, cap, csvs, plural, str_list};
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
    "required",
];

/// Fields whose schema is an upstream Kubernetes type embedded in the CRD (pod templates,
/// affinity, resources, probes ...): their descriptions are Kubernetes' own, generated or
/// not, and they are not the operator's API. They are neither counted nor searched.
const EMBEDDED: &[&str] = &[
    "affinity",
    "tolerations",
    "resources",
    "securityContext",
    "podSecurityContext",
    "containerSecurityContext",
    "volumes",
    "volumeMounts",
    "env",
    "envFrom",
    "nodeSelector",
    "topologySpreadConstraints",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "sidecars",
    "imagePullSecrets",
    "lifecycle",
    "template",
    "podTemplate",
    "jobTemplate",
    "volumeClaimTemplate",
    "volumeClaimTemplates",
    "persistentVolumeClaim",
    "selector",
    "labelSelector",
    "metadata",
    "conditions",
    "dnsConfig",
    "hostAliases",
    "configMapKeyRef",
    "secretKeyRef",
    "fieldRef",
    "resourceFieldRef",
];

/// The share of own fields with a description below which CRDs count as undocumented:
/// positive evidence against "CRDs are documented", where a few gaps are only hygiene. Many
/// bundles strip every description (`crd:maxDescLen=0`) to stay under size limits; what
/// users then get from `kubectl explain` is nothing.
const DOCUMENTED_SHARE: f64 = 0.25;

/// Whether a field's name says it sets an image (`image`, `baseImage`, `imagePullSpec`,
/// `image_name`), pull policy and pull secrets excepted.
fn image_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("image") && !lower.starts_with("imagepullpolic") && !lower.starts_with("imagepullsecret")
}

struct Version<'a> {
    crd: &'a Object,
    name: &'a str,
    /// The version entry, or for a `v1beta1` CRD without `versions` its `spec`.
    value: &'a Value,
}

impl<'a> Version<'a> {
    fn spec(&self) -> &'a Value {
        &self.crd.value["spec"]
    }
    fn served(&self) -> bool {
        self.value["served"].as_bool().unwrap_or(true)
    }
    /// The version's schema, or the CRD-wide one of `v1beta1`.
    fn schema(&self) -> Option<&'a Value> {
        [&self.value["schema"]["openAPIV3Schema"], &self.spec()["validation"]["openAPIV3Schema"]]
            .into_iter()
            .find(|s| s.is_object())
    }
    fn subresources(&self) -> &'a Value {
        if self.value["subresources"].is_object() { &self.value["subresources"] } else { &self.spec()["subresources"] }
    }
    fn printer_columns(&self) -> Option<&'a Vec<Value>> {
        [&self.value["additionalPrinterColumns"], &self.spec()["additionalPrinterColumns"]]
            .into_iter()
            .find_map(|c| c.as_array().filter(|a| !a.is_empty()))
    }
    /// Whether the schema says nothing of the spec's fields: no schema, or a spec without
    /// properties (`x-kubernetes-preserve-unknown-fields`, as Helm-based operators ship).
    fn opaque_spec(&self) -> bool {
        self.schema().is_none_or(|s| s["properties"]["spec"]["properties"].as_object().is_none_or(|p| p.is_empty()))
    }
    fn has_status(&self) -> bool {
        self.subresources()["status"].is_object()
            || self.schema().is_some_and(|s| s["properties"]["status"].is_object())
    }
    fn describe(&self) -> String {
        format!("CRD {} {} ({})", self.crd.name(), self.name, self.crd.source)
    }
}

fn versions<'a>(crds: &[&'a Object]) -> Vec<Version<'a>> {
    crds.iter()
        .flat_map(|crd| {
            let spec = &crd.value["spec"];
            let listed: Vec<Version<'a>> = spec["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| Version { crd, name: v["name"].as_str().unwrap_or("<unnamed version>"), value: v })
                .collect();
            match (listed.is_empty(), spec["version"].as_str()) {
                (true, Some(name)) => vec![Version { crd, name, value: spec }],
                _ => listed,
            }
        })
        .collect()
}

/// The CRD names a ClusterServiceVersion marks internal: not for users to create.
fn internal_crds(install: &[Object]) -> BTreeSet<String> {
    csvs(install)
        .filter_map(|c| c.value["metadata"]["annotations"]["operators.operatorframework.io/internal-objects"].as_str())
        .filter_map(|t| serde_json::from_str::<Vec<String>>(t).ok())
        .flatten()
        .collect()
}

/// The spec descriptors with a description of the CSV's owned CRDs (OLM's form of field
/// documentation, shown in the console).
fn spec_descriptors(install: &[Object]) -> usize {
    csvs(install)
        .flat_map(|c| c.value["spec"]["customresourcedefinitions"]["owned"].as_array().into_iter().flatten())
        .flat_map(|o| o["specDescriptors"].as_array().into_iter().flatten())
        .filter(|d| d["description"].as_str().is_some_and(|t| !t.trim().is_empty()))
        .count()
}

/// `(group, plural)` pairs that a validating admission webhook or policy shipped with the
/// operator intercepts (`*` matches any).
fn admission_rules(install: &[Object]) -> Vec<(Vec<String>, Vec<String>)> {
    let pair = |r: &Value| {
        let owned = |v: &Value| str_list(v).into_iter().map(str::to_string).collect::<Vec<_>>();
        (owned(&r["apiGroups"]), owned(&r["resources"]))
    };
    let mut out = Vec::new();
    for o in install {
        let rules: Vec<&Value> = if o.is("operators.coreos.com", "ClusterServiceVersion") {
            o.value["spec"]["webhookdefinitions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|w| w["type"] == "ValidatingAdmissionWebhook")
                .flat_map(|w| w["rules"].as_array().into_iter().flatten())
                .collect()
        } else if o.is("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") {
            o.value["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|w| w["rules"].as_array().into_iter().flatten())
                .collect()
        } else if o.is("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") {
            o.value["spec"]["matchConstraints"]["resourceRules"].as_array().into_iter().flatten().collect()
        } else {
            Vec::new()
        };
        out.extend(rules.into_iter().map(pair));
    }
    out
}

fn admitted(crd: &Object, rules: &[(Vec<String>, Vec<String>)]) -> bool {
    let group = crd.value["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd.value["spec"]["names"]["plural"].as_str().unwrap_or_default();
    rules.iter().any(|(groups, resources)| {
        groups.iter().any(|g| g == "*" || g == group)
            && resources.iter().any(|r| r == "*" || r == plural || r.split('/').next() == Some(plural))
    })
}

pub(super) fn checks(install: &[Object]) -> Vec<CheckResult> {
    let internal = internal_crds(install);
    let all_crds: Vec<&Object> = install.iter().filter(|o| o.is(CRD_GROUP, "CustomResourceDefinition")).collect();
    let crds: Vec<&Object> = all_crds.iter().copied().filter(|c| !internal.contains(c.name())).collect();
    let ids = [
        "crd.status",
        "crd.status-subresource",
        "crd.structural-schema",
        "crd.descriptions",
        "crd.descriptions-complete",
        "crd.printer-columns",
        "crd.validation-rules",
        "crd.image-override",
    ];
    if crds.is_empty() {
        // An operator driven by something else than custom resources (admission, node
        // agents, a console plugin) is outside the CR-based criteria: nothing to judge.
        let why = if all_crds.is_empty() {
            "no CustomResourceDefinition ships".to_string()
        } else {
            format!("every CRD ({}) is marked internal", all_crds.len())
        };
        return ids.into_iter().map(|id| CheckResult::not_assessable(id, why.clone())).collect();
    }
    let versions = versions(&crds);
    let served: Vec<&Version<'_>> = versions.iter().filter(|v| v.served()).collect();
    let schemaless: Vec<&&Version<'_>> = served.iter().filter(|v| v.schema().is_none()).collect();
    let mut looked_at =
        format!("{}, {}", plural(crds.len(), "CRD", "CRDs"), plural(served.len(), "served version", "served versions"));
    if !internal.is_empty() {
        looked_at.push_str(&format!(" ({} internal not judged)", internal.len()));
    }
    let mut out = Vec::new();

    let mut no_versions = Vec::new();
    for crd in &crds {
        if versions.iter().all(|v| !std::ptr::eq(v.crd, *crd)) {
            no_versions.push(format!("CRD {} ({}) has no versions", crd.name(), crd.source));
        }
    }

    // Status: the model asks that every CR has a status block. A CRD without any status
    // (configuration-only, like a user or a grant) is not a contradiction; no status at all
    // among CRDs with schemas is.
    let with_status = served.iter().filter(|v| v.has_status()).count();
    out.push(if with_status > 0 {
        CheckResult::new("crd.status", format!("{looked_at}: {with_status} with a status"), Vec::new())
    } else if schemaless.len() == served.len() {
        CheckResult::not_assessable("crd.status", format!("{looked_at}: no schema says whether there is a status"))
    } else {
        CheckResult::fail(
            "crd.status",
            format!("none of {looked_at} has a status in its schema or a status subresource"),
        )
    });
    let no_subresource: Vec<String> = served
        .iter()
        .filter(|v| {
            v.schema().is_some_and(|s| s["properties"]["status"].is_object()) && !v.subresources()["status"].is_object()
        })
        .map(|v| format!("{}: a status without a status subresource (spec updates can overwrite it)", v.describe()))
        .chain(no_versions.iter().cloned())
        .collect();
    out.push(CheckResult::new("crd.status-subresource", looked_at.clone(), cap(no_subresource)));

    let mut structural = no_versions.clone();
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
    let (mut fields, mut described) = (0, 0);
    for v in &served {
        let Some(schema) = v.schema() else {
            undocumented.push(format!("{}: no schema, so `kubectl explain` shows nothing", v.describe()));
            continue;
        };
        if v.opaque_spec() {
            undocumented.push(format!(
                "{}: the spec's fields are not in the schema, so `kubectl explain` shows none",
                v.describe()
            ));
        }
        for part in ["spec", "status"] {
            let mut missing = Vec::new();
            let mut count = Count::default();
            undescribed(&format!(".{part}"), &schema["properties"][part], &mut missing, &mut count);
            fields += count.fields;
            described += count.described;
            undocumented.extend(missing.into_iter().map(|p| format!("{}: {p} has no description", v.describe())));
        }
    }
    let share = if fields == 0 { 0.0 } else { described as f64 / fields as f64 };
    let coverage = format!(
        "{looked_at}: {described} of {} described ({:.0}%), embedded Kubernetes types not counted",
        plural(fields, "own field", "own fields"),
        share * 100.0
    );
    // A spec the schema leaves open (Helm-based operators) is documented, if at all, by the
    // CSV's spec descriptors, or outside the bundle: not shown, not contradicted.
    let opaque = served.iter().filter(|v| v.opaque_spec()).count();
    let descriptors = spec_descriptors(install);
    out.push(if opaque == served.len() && descriptors > 0 {
        CheckResult::new(
            "crd.descriptions",
            format!(
                "{looked_at}: the specs are open; {} in the CSV",
                plural(descriptors, "spec descriptor with a description", "spec descriptors with a description")
            ),
            Vec::new(),
        )
    } else if opaque == served.len() {
        CheckResult::not_assessable(
            "crd.descriptions",
            format!("{looked_at}: the specs' fields are not in the schemas and the CSV has no spec descriptors"),
        )
    } else if fields > 0 && share < DOCUMENTED_SHARE {
        CheckResult::with_status(
            "crd.descriptions",
            CheckStatus::Fail,
            coverage.clone(),
            vec![format!("most fields are undocumented: {} of {fields} have no description", fields - described)],
        )
    } else {
        CheckResult::new("crd.descriptions", coverage.clone(), Vec::new())
    });
    out.push(CheckResult::new("crd.descriptions-complete", coverage, cap(undocumented)));

    let no_columns: Vec<String> = served
        .iter()
        .filter(|v| v.printer_columns().is_none())
        .map(|v| format!("{}: no additionalPrinterColumns", v.describe()))
        .collect();
    out.push(CheckResult::new("crd.printer-columns", looked_at.clone(), cap(no_columns)));

    let rules = admission_rules(install);
    let (mut cel, mut constraints, mut by_admission) = (0, 0, 0);
    let mut unvalidated = Vec::new();
    for v in &served {
        if admitted(v.crd, &rules) {
            by_admission += 1;
            continue;
        }
        let Some(schema) = v.schema() else {
            unvalidated.push(format!("{}: no schema and no validating webhook or policy", v.describe()));
            continue;
        };
        let (r, c) = validations(&schema["properties"]["spec"]);
        if r + c == 0 {
            unvalidated.push(format!(
                "{}: the spec has no CEL rule, value constraint or required field, and no validating webhook or policy covers it",
                v.describe()
            ));
        }
        cel += r;
        constraints += c;
    }
    out.push(CheckResult::new(
        "crd.validation-rules",
        format!(
            "{looked_at}: {}, {}, {} covered by a validating webhook or policy",
            plural(cel, "CEL rule", "CEL rules"),
            plural(constraints, "constraint", "constraints"),
            plural(by_admission, "version", "versions")
        ),
        cap(unvalidated),
    ));

    out.push(image_override(install, &served, &looked_at));
    out
}

/// The operand's image can be set: a field of a CRD's own spec (`image`, `*Image`, an image
/// object with a repository, or `repository` beside a version), an image set in a sample
/// resource of the CSV (specs that are opaque to the schema, as Helm-based operators ship),
/// or through the operator's environment and flags, which OLM lets a Subscription override:
/// the CSV's `relatedImages` with `RELATED_IMAGE_*` variables, `*IMAGE*` variables,
/// `--*-image` flags. An operator that may not create pods has no operand image to set.
fn image_override(install: &[Object], served: &[&Version<'_>], looked_at: &str) -> CheckResult {
    let mut forms: Vec<String> = Vec::new();
    let with_field: BTreeSet<&str> = served
        .iter()
        .filter(|v| v.schema().is_some_and(|s| has_image_field(&s["properties"]["spec"])))
        .map(|v| v.crd.name())
        .collect();
    if !with_field.is_empty() {
        forms.push(format!("an image field in {}", with_field.into_iter().collect::<Vec<_>>().join(", ")));
    }
    for csv in csvs(install) {
        let n = csv.value["spec"]["relatedImages"].as_array().map_or(0, Vec::len);
        if n > 0 {
            forms.push(format!("{} in {}", plural(n, "related image", "related images"), csv.describe()));
        }
        let samples: Vec<String> = super::examples(csv)
            .iter()
            .filter(|o| sets_image(&o.value["spec"]))
            .map(|o| format!("{} {}", o.kind(), o.name()))
            .collect();
        if !samples.is_empty() {
            forms.push(format!("an image set in the sample {}", samples.join(", ")));
        }
    }
    let containers: Vec<&Value> = install
        .iter()
        .filter(|o| o.is("apps", "Deployment"))
        .flat_map(|d| d.value["spec"]["template"]["spec"]["containers"].as_array().into_iter().flatten())
        .collect();
    let variables: BTreeSet<&str> = containers
        .iter()
        .flat_map(|c| c["env"].as_array().into_iter().flatten())
        .filter_map(|e| e["name"].as_str().filter(|n| n.to_ascii_uppercase().contains("IMAGE")))
        .collect();
    if !variables.is_empty() {
        let names: Vec<&str> = variables.into_iter().take(3).collect();
        forms.push(format!("operator variables {}", names.join(", ")));
    }
    let flags: Vec<&str> = containers
        .iter()
        .flat_map(|c| str_list(&c["args"]).into_iter().chain(str_list(&c["command"])))
        .filter(|a| a.starts_with("--") && a.split('=').next().is_some_and(|f| f.ends_with("-image")))
        .map(|a| a.split('=').next().unwrap_or(a))
        .collect();
    if !flags.is_empty() {
        forms.push(format!("operator flags {}", flags.join(", ")));
    }
    if !forms.is_empty() {
        return CheckResult::new("crd.image-override", forms.join("; "), Vec::new());
    }
    let roles = super::rbac::operator_roles(install);
    let creates_pods =
        [("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("", "pods"), ("batch", "jobs")]
            .iter()
            .any(|(g, r)| super::rbac::grants(&roles, &[g], r, &["create"]));
    if !roles.is_empty() && !creates_pods {
        // Nothing to override: the criterion does not apply (the operand is off-cluster, or is
        // configuration of something else).
        return CheckResult::new(
            "crd.image-override",
            "no operand image: the operator may not create pods (no create on deployments, statefulsets, daemonsets, pods or jobs)",
            Vec::new(),
        );
    }
    if served.iter().all(|v| v.opaque_spec()) {
        return CheckResult::not_assessable(
            "crd.image-override",
            format!("{looked_at}: the specs' fields are not in the schemas, and no sample sets an image"),
        );
    }
    CheckResult::fail(
        "crd.image-override",
        format!(
            "no image field in the spec of {looked_at}, no image in a sample, no relatedImages, no image variable or flag"
        ),
    )
}

/// Whether a sample resource's spec sets an image (see [`image_name`]), outside embedded
/// pod templates and containers.
fn sets_image(spec: &Value) -> bool {
    match spec {
        Value::Object(map) => map.iter().any(|(k, v)| {
            (image_name(k) && (v.is_string() || v.is_object())) || (!EMBEDDED.contains(&k.as_str()) && sets_image(v))
        }),
        Value::Array(items) => items.iter().any(sets_image),
        _ => false,
    }
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

#[derive(Default)]
struct Count {
    fields: usize,
    described: usize,
}

/// Paths of the operator's own properties below `node` without a description (what
/// `kubectl explain` shows); embedded Kubernetes types are skipped.
fn undescribed(path: &str, node: &Value, out: &mut Vec<String>, count: &mut Count) {
    if let Some(props) = node["properties"].as_object() {
        for (name, prop) in props.iter().filter(|(n, _)| !EMBEDDED.contains(&n.as_str())) {
            let p = format!("{path}.{name}");
            count.fields += 1;
            if prop["description"].as_str().is_none_or(|d| d.trim().is_empty()) {
                out.push(p.clone());
            } else {
                count.described += 1;
            }
            undescribed(&p, prop, out, count);
        }
    }
    if node["items"].is_object() {
        undescribed(&format!("{path}[]"), &node["items"], out, count);
    }
    if node["additionalProperties"].is_object() {
        undescribed(&format!("{path}{{}}"), &node["additionalProperties"], out, count);
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

/// CEL rules and value constraints (`required` included) in a schema subtree.
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

/// Whether the spec subtree has a field that sets the operand's image, outside embedded pod
/// templates and containers (whose `image` is the user's own container).
fn has_image_field(node: &Value) -> bool {
    let Some(props) = node["properties"].as_object() else {
        return ["items", "additionalProperties"].iter().any(|k| node[*k].is_object() && has_image_field(&node[*k]));
    };
    props.iter().any(|(name, prop)| {
        let string = prop["type"] == "string";
        let image_object = prop["type"] == "object"
            && ["repository", "name", "tag"].iter().any(|k| prop["properties"][*k].is_object());
        let named = image_name(name);
        let repository = name == "repository" && string && props.contains_key("version");
        if (named && (string || image_object)) || repository {
            return true;
        }
        !EMBEDDED.contains(&name.as_str()) && has_image_field(prop)
    })
}

/// The fields of the CRDs' specs (embedded Kubernetes types excepted) named one of
/// `names`, as `CRD name: .spec.path`: how an operator that creates monitors, alert rules or
/// dashboards at run time lets its users ask for them.
pub(super) fn spec_fields(install: &[Object], names: &[&str]) -> Vec<String> {
    fn walk(node: &Value, path: &str, names: &[&str], out: &mut Vec<String>) {
        if let Some(props) = node["properties"].as_object() {
            for (name, prop) in props.iter().filter(|(n, _)| !EMBEDDED.contains(&n.as_str())) {
                let p = format!("{path}.{name}");
                if names.contains(&name.as_str()) {
                    out.push(p.clone());
                }
                walk(prop, &p, names, out);
            }
        }
        for k in ["items", "additionalProperties"] {
            if node[k].is_object() {
                walk(&node[k], path, names, out);
            }
        }
    }
    let crds: Vec<&Object> = install.iter().filter(|o| o.is(CRD_GROUP, "CustomResourceDefinition")).collect();
    let mut out = Vec::new();
    for crd in &crds {
        let mut paths = Vec::new();
        if let Some(schema) = versions(&[crd]).iter().filter(|v| v.served()).find_map(|v| v.schema()) {
            walk(&schema["properties"]["spec"], ".spec", names, &mut paths);
        }
        out.extend(paths.into_iter().map(|p| format!("CRD {}: {p}", crd.name())));
    }
    out
}

/// What CRDs show of capabilities a run must prove.
pub(super) fn hints(install: &[Object]) -> Vec<Hint> {
    let crds: Vec<&Object> = install.iter().filter(|o| o.is(CRD_GROUP, "CustomResourceDefinition")).collect();
    let mut out = Vec::new();
    for crd in &crds {
        let kind = crd.value["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let what = format!("CRD {} ({})", crd.name(), crd.source);
        for (needle, criterion, text) in [
            ("Backup", "L3.backup", "a backup resource"),
            ("Snapshot", "L3.backup", "a snapshot resource"),
            ("Restore", "L3.restore", "a restore resource"),
            ("Recovery", "L3.pitr", "a recovery resource"),
        ] {
            if kind.contains(needle) {
                out.push(Hint { criterion, text: format!("{what}: {text} ({kind})") });
            }
        }
        let versions = versions(&[crd]);
        if versions.iter().any(|v| v.subresources()["scale"].is_object()) {
            out.push(Hint { criterion: "L3.scaling", text: format!("{what}: a scale subresource") });
        }
        let served = versions.iter().filter(|v| v.served()).count();
        if served > 1 {
            out.push(Hint { criterion: "L2.adoption", text: format!("{what}: {served} served versions") });
        }
        if crd.value["spec"]["conversion"]["strategy"] == "Webhook" {
            out.push(Hint { criterion: "L2.adoption", text: format!("{what}: a conversion webhook") });
        }
    }
    for csv in csvs(install) {
        for w in csv.value["spec"]["webhookdefinitions"].as_array().into_iter().flatten() {
            if w["type"] == "ConversionWebhook" {
                let crds = str_list(&w["conversionCRDs"]).join(", ");
                out.push(Hint {
                    criterion: "L2.adoption",
                    text: format!("{}: a conversion webhook for {crds}", csv.describe()),
                });
            }
        }
    }
    out
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
                "spec": {"group": "example.com", "names": {"plural": "things", "kind": "Thing"}, "versions": [version]},
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

    fn by_id<'a>(results: &'a [CheckResult], id: &str) -> &'a CheckResult {
        results.iter().find(|r| r.id == id).unwrap_or_else(|| panic!("{id}"))
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
        assert_eq!(
            by_id(&results, "crd.validation-rules").detail,
            "1 CRD, 1 served version: 1 CEL rule, 1 constraint, 0 versions covered by a validating webhook or policy"
        );
        assert!(by_id(&results, "crd.descriptions").detail.contains("5 of 5 own fields described (100%)"));
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
        let failed: Vec<_> =
            statuses(&results).into_iter().filter(|(_, s)| *s == CheckStatus::Fail).map(|(id, _)| id).collect();
        assert_eq!(
            failed,
            [
                "crd.status-subresource",
                "crd.structural-schema",
                "crd.descriptions-complete",
                "crd.printer-columns",
                "crd.validation-rules",
                "crd.image-override"
            ]
        );
        let findings = |id: &str| by_id(&results, id).findings.join("\n");
        assert!(
            findings("crd.descriptions-complete").contains(".spec.size has no description"),
            "{}",
            findings("crd.descriptions-complete")
        );
        assert!(findings("crd.descriptions-complete").contains("(crds/things.yaml:1)"));
        assert!(findings("crd.structural-schema").contains(".spec.free has no type"));
        assert!(
            findings("crd.status-subresource")
                .contains("CRD things.example.com v1 (crds/things.yaml:1): a status without a status subresource")
        );
        // 5 of 6 own fields are described: documented, if not completely.
        assert_eq!(by_id(&results, "crd.descriptions").status, CheckStatus::Pass);
    }

    /// 8 gaps among many fields are not "undocumented"; most fields without a description
    /// are; fields of embedded Kubernetes types do not count either way.
    #[test]
    fn descriptions_are_a_share_of_the_operators_own_fields() {
        let mut v = good_version();
        let props = &mut v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        props["affinity"] = json!({"type": "object", "properties": {"nodeAffinity": {"type": "object"}}});
        props["resources"] = json!({"type": "object", "properties": {"limits": {"type": "object"}}});
        let results = checks(&[crd(v.clone())]);
        assert_eq!(
            by_id(&results, "crd.descriptions-complete").status,
            CheckStatus::Pass,
            "embedded types are skipped"
        );
        for i in 0..20 {
            v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][format!("bare{i}")] =
                json!({"type": "string"});
        }
        let results = checks(&[crd(v)]);
        let d = by_id(&results, "crd.descriptions");
        assert_eq!(d.status, CheckStatus::Fail);
        assert!(d.findings[0].contains("20 of 25 have no description"), "{:?}", d.findings);
    }

    #[test]
    fn v1beta1_crds_keep_schema_subresources_and_columns_in_their_spec() {
        let v = good_version();
        let legacy = Object::built(
            json!({
                "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "things.example.com"},
                "spec": {"group": "example.com", "version": "v1", "names": {"plural": "things", "kind": "Thing"},
                         "subresources": v["subresources"], "additionalPrinterColumns": [{"name": "R", "JSONPath": ".status.ready"}],
                         "validation": v["schema"]},
            }),
            "crds/legacy.yaml",
        );
        let results = checks(&[legacy]);
        for r in &results {
            assert_eq!(r.status, CheckStatus::Pass, "{}: {:?}", r.id, r.findings);
        }
    }

    #[test]
    fn schemaless_crds_do_not_pass_vacuously() {
        let mut v = good_version();
        v.as_object_mut().unwrap().remove("schema");
        let results = checks(&[crd(v)]);
        assert_eq!(by_id(&results, "crd.descriptions").status, CheckStatus::NotAssessable, "not shown, and not passed");
        assert_eq!(by_id(&results, "crd.descriptions-complete").status, CheckStatus::Fail);
        assert_eq!(by_id(&results, "crd.validation-rules").status, CheckStatus::Fail);
        assert_eq!(by_id(&results, "crd.image-override").status, CheckStatus::NotAssessable);
        assert_eq!(by_id(&results, "crd.status").status, CheckStatus::Pass, "the status subresource says there is one");
    }

    #[test]
    fn required_fields_and_admission_webhooks_validate() {
        let mut v = good_version();
        let spec = &mut v["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["x-kubernetes-validations"] = json!([]);
        spec["properties"]["size"] = json!({"type": "integer", "description": "Members."});
        spec["required"] = json!(["size"]);
        assert_eq!(by_id(&checks(&[crd(v.clone())]), "crd.validation-rules").status, CheckStatus::Pass);
        v["schema"]["openAPIV3Schema"]["properties"]["spec"].as_object_mut().unwrap().remove("required");
        assert_eq!(by_id(&checks(&[crd(v.clone())]), "crd.validation-rules").status, CheckStatus::Fail);
        let csv = Object::built(
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "x"},
                   "spec": {"webhookdefinitions": [{"type": "ValidatingAdmissionWebhook",
                       "rules": [{"apiGroups": ["example.com"], "resources": ["things"], "operations": ["CREATE"]}]}]}}),
            "csv.yaml",
        );
        let results = checks(&[crd(v.clone()), csv]);
        assert_eq!(by_id(&results, "crd.validation-rules").status, CheckStatus::Pass);
        let policy = Object::built(
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"},
                   "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "resources": ["things"]}]}}}),
            "policy.yaml",
        );
        assert_eq!(by_id(&checks(&[crd(v), policy]), "crd.validation-rules").status, CheckStatus::Pass);
    }

    #[test]
    fn configuration_only_crds_need_no_status_and_internal_crds_are_not_judged() {
        let mut config = good_version();
        config["schema"]["openAPIV3Schema"]["properties"].as_object_mut().unwrap().remove("status");
        config["subresources"] = json!({});
        let mut other = crd(config);
        other.value["metadata"]["name"] = json!("grants.example.com");
        let results = checks(&[crd(good_version()), other.clone()]);
        assert_eq!(by_id(&results, "crd.status").status, CheckStatus::Pass);
        assert_eq!(by_id(&results, "crd.status-subresource").status, CheckStatus::Pass);
        assert_eq!(by_id(&checks(&[other.clone()]), "crd.status").status, CheckStatus::Fail, "no CR reports status");

        let mut undocumented = good_version();
        undocumented["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
            json!({"a": {"type": "string"}});
        let mut internal = crd(undocumented);
        internal.value["metadata"]["name"] = json!("internals.example.com");
        let csv = Object::built(
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "x",
                   "annotations": {"operators.operatorframework.io/internal-objects": "[\"internals.example.com\"]"}}}),
            "csv.yaml",
        );
        let results = checks(&[crd(good_version()), internal, csv]);
        let d = by_id(&results, "crd.descriptions-complete");
        assert_eq!(d.status, CheckStatus::Pass, "{:?}", d.findings);
        assert!(d.detail.contains("(1 internal not judged)"), "{}", d.detail);
    }

    #[test]
    fn the_image_of_a_users_pod_template_is_no_override_but_olm_related_images_are() {
        let mut v = good_version();
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = json!({
            "jobTemplate": {"type": "object", "properties": {"containers": {"type": "array",
                "items": {"type": "object", "properties": {"image": {"type": "string"}}}}}},
        });
        assert_eq!(by_id(&checks(&[crd(v.clone())]), "crd.image-override").status, CheckStatus::Fail);
        let deployment = Object::built(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"},
                   "spec": {"template": {"spec": {"containers": [{"name": "m", "env": [{"name": "RELATED_IMAGE_DB", "value": "db:1"}]}]}}}}),
            "op.yaml",
        );
        let r = checks(&[crd(v.clone()), deployment]);
        assert_eq!(by_id(&r, "crd.image-override").detail, "operator variables RELATED_IMAGE_DB");
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = json!({
            "repository": {"type": "string"}, "version": {"type": "string"},
        });
        assert_eq!(
            by_id(&checks(&[crd(v)]), "crd.image-override").status,
            CheckStatus::Pass,
            "repository beside version"
        );
    }

    #[test]
    fn hints_name_backup_scale_and_served_versions() {
        let mut v = good_version();
        v["subresources"]["scale"] = json!({"specReplicasPath": ".spec.size"});
        let mut second = good_version();
        second["name"] = json!("v2");
        let mut backup = crd(v);
        backup.value["spec"]["names"]["kind"] = json!("ThingBackup");
        backup.value["spec"]["versions"].as_array_mut().unwrap().push(second);
        let found: Vec<&str> = hints(&[backup]).iter().map(|h| h.criterion).collect();
        assert_eq!(found, ["L3.backup", "L3.scaling", "L2.adoption"]);
    }

    #[test]
    fn without_crds_there_is_nothing_to_judge() {
        let results = checks(&[]);
        assert_eq!(results.len(), 8);
        assert!(
            results.iter().all(|r| r.status == CheckStatus::NotAssessable && r.detail.contains("no CustomResource"))
        );
    }
}
