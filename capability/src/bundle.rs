//! OLM bundles (registry+v1) of Statecraft's operators whose `capabilities` annotation is
//! the level the workspace report *earned* from evidence, never a word someone typed.
//!
//! OperatorHub takes the annotation on trust; this crate exists because a self-chosen level
//! says little. So the only way a level gets into a bundle here is through an
//! [`OperatorReport`]: [`build`] copies its `earned_capabilities` and nothing else, and leaves
//! the annotation out when the report confirmed no level.
//!
//! Everything else comes from the files users install, read at run time like the rest of
//! this crate does (no operator crate is linked): the CRDs (`crds/<op>.yaml`, copied byte for
//! byte, one per file, because OLM reads only the first document of a manifest), the RBAC
//! and Deployment (`deploy/<op>/operator.yaml`, turned into the CSV's install strategy) and
//! the sample resource (`operators/<op>/src/sample.yaml`, the CSV's `alm-examples`). The
//! output is deterministic — no timestamp (`createdAt` is left out), keys in a fixed order
//! — so that a bundle changes only when what it describes does.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::manifests::{self, Object};
use crate::operators;
use crate::report::OperatorReport;
use crate::{Error, Result};

/// The oldest Kubernetes the operators are built and tested against (k8s-openapi's
/// feature, the e2e clusters).
pub const MIN_KUBE_VERSION: &str = "1.34.0";
/// The one channel, until a release process promises more than alpha.
pub const CHANNEL: &str = "alpha";
/// All crates share the workspace version; the bundle is the operators' release.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The workspace's `repository` (capability/Cargo.toml inherits it).
pub const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// One file of a bundle, relative to its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFile {
    /// `manifests/…` or `metadata/annotations.yaml`.
    pub path: PathBuf,
    /// Its content.
    pub text: String,
}

/// A bundle, built in memory (see [`build`]) before anything is written.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The OLM package: `statecraft-<operator>`.
    pub package: String,
    /// The ClusterServiceVersion's name: `statecraft-<operator>.v<version>`.
    pub csv_name: String,
    /// The `capabilities` annotation: the report's earned value, `None` when nothing is
    /// earned (then the CSV has no such annotation).
    pub capabilities: Option<&'static str>,
    /// The files, in the order they are written.
    pub files: Vec<BundleFile>,
}

/// What a bundle says about each operator that its manifests do not: OLM wants prose, a
/// category and keywords.
struct About {
    display_name: &'static str,
    summary: &'static str,
    /// Kinds start with this (`MySQLCluster`), which a humanizer would split badly.
    kind_prefix: &'static str,
    product: &'static str,
    category: &'static str,
    keywords: &'static [&'static str],
}

fn about(operator: &str) -> Option<About> {
    Some(match operator {
        "mysql" => About {
            display_name: "Statecraft MySQL",
            summary: "Runs MySQL and MariaDB clusters on Kubernetes: a primary and its replicas, backups and restores.",
            kind_prefix: "MySQL",
            product: "MySQL",
            category: "Database",
            keywords: &["mysql", "mariadb", "database", "replication", "statecraft"],
        },
        "etcd" => About {
            display_name: "Statecraft etcd",
            summary: "Runs etcd clusters on Kubernetes: voting members, snapshots and restores, rolling upgrades.",
            kind_prefix: "Etcd",
            product: "etcd",
            category: "Database",
            keywords: &["etcd", "key-value", "database", "raft", "statecraft"],
        },
        "kafka" => About {
            display_name: "Statecraft Kafka",
            summary: "Runs Apache Kafka clusters in KRaft mode on Kubernetes, and their topics.",
            kind_prefix: "Kafka",
            product: "Kafka",
            category: "Streaming & Messaging",
            keywords: &["kafka", "kraft", "streaming", "messaging", "statecraft"],
        },
        _ => return None,
    })
}

/// Builds the bundle of the operator `report` is about, under the workspace `root`. The
/// report must be a workspace report (scored from evidence): an assessment's level is only
/// what a bundle shows, which is no ground for declaring one.
pub fn build(root: &Path, report: &OperatorReport) -> Result<Bundle> {
    let operator = report.name.as_str();
    let about = about(operator).filter(|_| report.assessment.is_none()).ok_or_else(|| {
        Error::Usage(format!(
            "no bundle for {operator:?}: bundles are made from the workspace report of {}",
            operators::names().join(", ")
        ))
    })?;
    let package = format!("statecraft-{operator}");
    let csv_name = format!("{package}.v{VERSION}");

    let crds_path = root.join("crds").join(format!("{operator}.yaml"));
    let crds = crd_documents(&crds_path)?;
    let install = install_strategy(&root.join("deploy").join(operator).join("operator.yaml"))?;
    let example = sample(&root.join("operators").join(operator).join("src").join("sample.yaml"))?;

    let owned: Vec<Value> = crds.iter().map(|c| owned_crd(&c.value, &about, &crds_path)).collect::<Result<_>>()?;
    let mut description = format!("{}\n\nCustom resources:\n", about.summary);
    for c in &owned {
        description.push_str(&format!("\n- **{}**: {}", str_at(c, "kind"), str_at(c, "description")));
    }
    description.push_str(
        "\n\nThe operator watches its own namespace (install mode OwnNamespace).\n\n\
         The `capabilities` annotation of this bundle is the level statecraft-capability \
         confirmed from end-to-end evidence about this operator's code; a bundle without it \
         has no confirmed level yet.",
    );

    // The examples are a JSON string inside YAML: pretty-printed, it stays readable there.
    let examples = serde_json::to_string_pretty(&json!([example]))
        .map_err(|e| Error::Usage(format!("cannot serialize the sample of {operator}: {e}")))?;
    let mut annotations = Map::new();
    for (k, v) in [
        ("alm-examples", examples.as_str()),
        ("categories", about.category),
        ("containerImage", install.image.as_str()),
        ("description", about.summary),
        ("operators.operatorframework.io/builder", "statecraft-capability"),
        ("repository", REPOSITORY),
        ("support", "Statecraft"),
    ] {
        annotations.insert(k.into(), v.into());
    }
    if let Some(level) = report.earned_capabilities {
        annotations.insert("capabilities".into(), level.into());
    }

    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": csv_name, "annotations": annotations},
        "spec": {
            "displayName": about.display_name,
            "description": description,
            "version": VERSION,
            "minKubeVersion": MIN_KUBE_VERSION,
            "maturity": "alpha",
            "provider": {"name": "Statecraft", "url": REPOSITORY},
            "links": [{"name": "Repository", "url": REPOSITORY}],
            "keywords": about.keywords,
            "maintainers": [{"name": "Statecraft", "email": "statecraft@statecraft.invalid"}],
            // The operator watches the namespaces OLM's OperatorGroup targets (see
            // `watch_targets`), with a Role in each, which OLM creates from `permissions`;
            // never all namespaces: that takes a ClusterRole, which it never gets.
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": true},
                {"type": "AllNamespaces", "supported": false},
            ],
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [install.deployment],
                    "permissions": [{"serviceAccountName": install.service_account, "rules": install.rules}],
                },
            },
            "customresourcedefinitions": {"owned": owned},
        },
    });

    let mut files = vec![BundleFile {
        path: Path::new("manifests").join(format!("{package}.clusterserviceversion.yaml")),
        text: to_yaml(&csv)?,
    }];
    for c in &crds {
        files.push(BundleFile { path: Path::new("manifests").join(format!("{}.yaml", c.name)), text: c.text.clone() });
    }
    let metadata = json!({"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": package,
        "operators.operatorframework.io.bundle.channels.v1": CHANNEL,
        "operators.operatorframework.io.bundle.channel.default.v1": CHANNEL,
    }});
    files.push(BundleFile { path: Path::new("metadata").join("annotations.yaml"), text: to_yaml(&metadata)? });
    Ok(Bundle { package, csv_name, capabilities: report.earned_capabilities, files })
}

fn to_yaml(value: &Value) -> Result<String> {
    serde_norway::to_string(value).map_err(|e| Error::Usage(format!("cannot serialize the bundle: {e}")))
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// One CRD of `crds/<op>.yaml`: its text as written there, and what the CSV needs of it.
struct Crd {
    name: String,
    text: String,
    value: Value,
}

/// Splits `crds/<op>.yaml` at its `---` lines, keeping each document's text: users install
/// exactly that file, so the bundle carries the same bytes rather than a re-serialization.
fn crd_documents(path: &Path) -> Result<Vec<Crd>> {
    let artifact = |message: String| Error::Artifact { path: path.to_path_buf(), message };
    let text = std::fs::read_to_string(path).map_err(|e| artifact(format!("the CRDs cannot be read: {e}")))?;
    let mut docs: Vec<(usize, String)> = vec![(1, String::new())];
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" {
            docs.push((i + 2, String::new()));
        } else if let Some((_, doc)) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    let mut out = Vec::new();
    for (line, doc) in docs {
        if doc.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
            continue;
        }
        let value: Value =
            serde_norway::from_str(&doc).map_err(|e| artifact(format!("the document at line {line}: {e}")))?;
        if value["kind"] != "CustomResourceDefinition" || value["apiVersion"] != "apiextensions.k8s.io/v1" {
            return Err(artifact(format!("the document at line {line} is not an apiextensions.k8s.io/v1 CRD")));
        }
        let name = str_at(&value["metadata"], "name").to_string();
        if name.is_empty() || name.contains('/') {
            return Err(artifact(format!("the CRD at line {line} has no usable name")));
        }
        out.push(Crd { name, text: doc, value });
    }
    if out.is_empty() {
        return Err(artifact("no CRD: an operator without resources has nothing to bundle".into()));
    }
    Ok(out)
}

/// The CSV's `owned` entry of a CRD, from the version clients use (the storage version,
/// else the first served one): OLM matches owned entries to the bundle's CRDs by group,
/// version and kind.
fn owned_crd(crd: &Value, about: &About, path: &Path) -> Result<Value> {
    let name = str_at(&crd["metadata"], "name");
    let versions = crd["spec"]["versions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let served = |v: &&Value| v["served"] == true;
    let version = versions
        .iter()
        .filter(served)
        .find(|v| v["storage"] == true)
        .or_else(|| versions.iter().find(served))
        .ok_or_else(|| Error::Artifact {
            path: path.to_path_buf(),
            message: format!("CRD {name} serves no version"),
        })?;
    let kind = str_at(&crd["spec"]["names"], "kind");
    let schema = &version["schema"]["openAPIV3Schema"];
    let display = match kind.strip_prefix(about.kind_prefix) {
        Some(rest) if !rest.is_empty() => format!("{} {}", about.product, humanize(rest)),
        _ => humanize(kind),
    };
    let mut owned = json!({
        "name": name,
        "version": version["name"],
        "kind": kind,
        "displayName": display,
        "description": one_line(str_at(schema, "description")),
        "specDescriptors": descriptors(&schema["properties"]["spec"], true),
        "statusDescriptors": descriptors(&schema["properties"]["status"], false),
    });
    // OLM's types leave out empty lists; so does the bundle, for a CRD without spec or status.
    if let Some(o) = owned.as_object_mut() {
        o.retain(|_, v| !v.as_array().is_some_and(Vec::is_empty) && *v != "");
    }
    Ok(owned)
}

/// Descriptors of the top-level properties of `spec` or `status` (the console's form and
/// details view), with the x-descriptors whose meaning is plain from the name and type.
fn descriptors(part: &Value, spec: bool) -> Vec<Value> {
    let Some(properties) = part["properties"].as_object() else { return Vec::new() };
    properties
        .iter()
        .map(|(name, schema)| {
            let ty = str_at(schema, "type");
            let x = match (name.as_str(), ty, spec) {
                ("conditions", "array", false) => Some("urn:alm:descriptor:io.kubernetes.conditions"),
                ("phase", "string", false) => Some("urn:alm:descriptor:io.kubernetes.phase"),
                ("replicas", "integer", true) => Some("urn:alm:descriptor:com.tectonic.ui:podCount"),
                ("resources", "object", true) => Some("urn:alm:descriptor:com.tectonic.ui:resourceRequirements"),
                (_, "boolean", true) => Some("urn:alm:descriptor:com.tectonic.ui:booleanSwitch"),
                // An object or a list shown as text would be a useless "[object Object]" or a
                // form field nothing can be typed into: those get none.
                (_, "string" | "integer" | "number" | "boolean", _) => Some("urn:alm:descriptor:text"),
                _ => None,
            };
            let mut d = json!({"path": name, "displayName": humanize(name)});
            let description = one_line(str_at(schema, "description"));
            if !description.is_empty() {
                d["description"] = description.into();
            }
            if let Some(x) = x {
                d["x-descriptors"] = json!([x]);
            }
            d
        })
        .collect()
}

/// Schema descriptions are wrapped for `kubectl explain`; a CSV shows them as one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `storageClassName` → `Storage Class Name`, `topicId` → `Topic ID`.
fn humanize(name: &str) -> String {
    const ACRONYMS: &[&str] = &["api", "cpu", "gtid", "id", "ip", "isr", "pitr", "s3", "sha256", "tls", "uri", "url"];
    let chars: Vec<char> = name.chars().collect();
    let mut words: Vec<String> = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1);
        let boundary = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase() || p.is_ascii_digit() || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
            });
        match words.last_mut() {
            Some(w) if !boundary && c != '_' && c != '-' => w.push(c),
            _ if c == '_' || c == '-' => words.push(String::new()),
            _ => words.push(c.to_string()),
        }
    }
    words
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| {
            if ACRONYMS.contains(&w.to_lowercase().as_str()) {
                w.to_uppercase()
            } else {
                let mut cs = w.chars();
                cs.next().map(|f| f.to_uppercase().chain(cs).collect()).unwrap_or_default()
            }
        })
        .collect::<Vec<String>>()
        .join(" ")
}

/// The CSV's install strategy from `deploy/<op>/operator.yaml`.
struct Install {
    deployment: Value,
    service_account: String,
    rules: Value,
    image: String,
}

/// OLM creates the operator's Deployment, ServiceAccount, Role and RoleBinding itself from
/// the CSV, in the namespace the operator is installed into: so the bundle carries the
/// Deployment's name and spec and the Roles' rules for the ServiceAccount, never those
/// objects (a ServiceAccount in the bundle with the CSV's name is even an error for OLM).
fn install_strategy(path: &Path) -> Result<Install> {
    let artifact = |message: String| Error::Artifact { path: path.to_path_buf(), message };
    if !path.is_file() {
        return Err(artifact("the operator's install manifests are missing".into()));
    }
    let objects = manifests::load_file(path).strict()?.objects;
    let one = |group: &str, kind: &str| -> Result<&Object> {
        let mut found = objects.iter().filter(|o| o.is(group, kind));
        match (found.next(), found.next()) {
            (Some(o), None) => Ok(o),
            (None, _) => Err(artifact(format!("no {kind}"))),
            (Some(_), Some(second)) => Err(artifact(format!("more than one {kind} ({})", second.describe()))),
        }
    };
    let deployment = one("apps", "Deployment")?;
    let account = one("", "ServiceAccount")?.name().to_string();
    if let Some(o) = objects.iter().find(|o| matches!(o.kind(), "ClusterRole" | "ClusterRoleBinding")) {
        return Err(artifact(format!(
            "{}: a bundle for the OwnNamespace install mode has no cluster-wide rights",
            o.describe()
        )));
    }
    // The operator's Roles (its own rights, its rights over resources) all land in the one
    // namespace OLM installs it into, as one set of rules. They are only the service
    // account's rights if a binding says so.
    let roles: Vec<&Object> = objects.iter().filter(|o| o.is("rbac.authorization.k8s.io", "Role")).collect();
    if roles.is_empty() {
        return Err(artifact("no Role".into()));
    }
    let mut rules = Vec::new();
    for role in roles {
        let bound = objects.iter().filter(|o| o.is("rbac.authorization.k8s.io", "RoleBinding")).any(|b| {
            b.value["roleRef"]["kind"] == "Role"
                && b.value["roleRef"]["name"] == role.name()
                && b.value["subjects"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|s| s["kind"] == "ServiceAccount" && s["name"] == account.as_str()))
        });
        if !bound {
            return Err(artifact(format!("no RoleBinding gives Role {} to ServiceAccount {account}", role.name())));
        }
        rules.extend(role.value["rules"].as_array().into_iter().flatten().cloned());
    }
    let spec = &deployment.value["spec"];
    if spec["template"]["spec"]["serviceAccountName"] != account.as_str() {
        return Err(artifact(format!("{} does not run as ServiceAccount {account}", deployment.describe())));
    }
    let image = spec["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .ok_or_else(|| artifact(format!("{} has no container image", deployment.describe())))?
        .to_string();
    let mut spec = spec.clone();
    watch_targets(&mut spec);
    let mut strategy = json!({"name": deployment.name(), "spec": spec});
    if let Some(labels) = deployment.value["metadata"]["labels"].as_object().filter(|l| !l.is_empty()) {
        strategy["label"] = Value::Object(labels.clone());
    }
    Ok(Install { deployment: strategy, service_account: account, rules: Value::Array(rules), image })
}

/// OLM writes the OperatorGroup's target namespaces, comma-separated, to the annotation
/// `olm.targetNamespaces` of the Deployment's pods: the operator's container reads them as
/// `STATECRAFT_NAMESPACES` (the `--namespaces` flag; empty means its own namespace).
fn watch_targets(deployment_spec: &mut Value) {
    let target = json!({
        "name": "STATECRAFT_NAMESPACES",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}},
    });
    if let Some(env) = deployment_spec["template"]["spec"]["containers"][0]["env"].as_array_mut() {
        env.retain(|e| e["name"] != "STATECRAFT_NAMESPACES");
        env.push(target);
    }
}

/// The sample resource as an example to create in any namespace: OLM's console creates it
/// in the namespace the user is in, and fields the API server sets are not the user's.
fn sample(path: &Path) -> Result<Value> {
    if !path.is_file() {
        return Err(Error::Missing { path: path.to_path_buf(), what: "sample resource" });
    }
    let mut objects = manifests::load_file(path).strict()?.objects;
    if objects.len() != 1 {
        return Err(Error::Bundle {
            path: path.to_path_buf(),
            message: format!("{} objects, expected the one sample resource", objects.len()),
        });
    }
    let mut value = objects.remove(0).value;
    if let Some(meta) = value["metadata"].as_object_mut() {
        for server_set in ["namespace", "uid", "resourceVersion", "creationTimestamp", "generation"] {
            meta.remove(server_set);
        }
    }
    Ok(value)
}

/// Writes `bundle` to `dir`, replacing what a previous run wrote there: the files go to a
/// new sibling directory that is then renamed over `dir`, so that a reader (a validator, a
/// catalog build) never sees half a bundle, or one mixing two runs.
///
/// An existing `dir` is replaced only when it looks like a bundle (nothing but `manifests/`
/// and `metadata/`): `--output .` must not delete a checkout.
pub fn write(bundle: &Bundle, dir: &Path) -> Result<()> {
    let name =
        dir.file_name().and_then(|n| n.to_str()).filter(|n| !n.is_empty() && *n != "." && *n != "..").ok_or_else(
            || Error::Bundle { path: dir.to_path_buf(), message: "not a directory name to write to".into() },
        )?;
    if dir.exists() {
        check_replaceable(dir)?;
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let pid = std::process::id();
    let tmp = parent.join(format!("{name}.tmp-{pid}"));
    let old = parent.join(format!("{name}.old-{pid}"));
    // create_dir, not create_dir_all: a leftover of the same name is not ours to remove.
    std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
    if let Err(e) = write_and_swap(bundle, &tmp, dir, &old) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
    }
    Ok(())
}

fn write_and_swap(bundle: &Bundle, tmp: &Path, dir: &Path, old: &Path) -> Result<()> {
    for f in &bundle.files {
        let path = tmp.join(&f.path);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        std::fs::write(&path, &f.text).map_err(|e| Error::io(&path, e))?;
    }
    // Two renames: the old bundle is gone for a moment, but never half there.
    let replacing = dir.exists();
    if replacing {
        std::fs::rename(dir, old).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::rename(tmp, dir).map_err(|e| {
        if replacing {
            let _ = std::fs::rename(old, dir);
        }
        Error::io(dir, e)
    })
}

fn check_replaceable(dir: &Path) -> Result<()> {
    let refuse = |what: String| Error::Bundle {
        path: dir.to_path_buf(),
        message: format!("{what}; not replacing it with a bundle (choose another --output)"),
    };
    if !dir.is_dir() {
        return Err(refuse("exists and is not a directory".into()));
    }
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let ok = path.is_dir() && path.file_name().is_some_and(|n| n == "manifests" || n == "metadata");
        if !ok {
            return Err(refuse(format!("holds {}, which is not part of a bundle", path.display())));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_humanized_with_their_acronyms() {
        assert_eq!(humanize("storageClassName"), "Storage Class Name");
        assert_eq!(humanize("topicId"), "Topic ID");
        assert_eq!(humanize("underMinIsrPartitions"), "Under Min ISR Partitions");
        assert_eq!(humanize("replicas"), "Replicas");
        assert_eq!(humanize("Cluster"), "Cluster");
        assert_eq!(humanize("sha256"), "SHA256");
        assert_eq!(humanize("HTTPServer"), "HTTP Server");
    }

    #[test]
    fn descriptors_mark_only_what_is_plain() {
        let spec = json!({"properties": {
            "replicas": {"type": "integer", "description": "How\n  many."},
            "storage": {"type": "object"},
            "paused": {"type": "boolean"},
            "version": {"type": "string"},
        }});
        let d = descriptors(&spec, true);
        let x = |path: &str| d.iter().find(|d| d["path"] == path).map(|d| d["x-descriptors"].clone());
        assert_eq!(x("replicas"), Some(json!(["urn:alm:descriptor:com.tectonic.ui:podCount"])));
        assert_eq!(x("storage"), Some(Value::Null), "objects get none");
        assert_eq!(x("paused"), Some(json!(["urn:alm:descriptor:com.tectonic.ui:booleanSwitch"])));
        assert_eq!(x("version"), Some(json!(["urn:alm:descriptor:text"])));
        assert_eq!(
            d.iter().find(|d| d["path"] == "replicas").map(|d| d["description"].clone()),
            Some(json!("How many."))
        );
    }
}
