//! Loading what an operator ships: Kubernetes objects from YAML / JSON files (multi-document
//! streams and `List`s included), Grafana dashboards, and an OLM bundle's
//! `metadata/annotations.yaml`. Every object remembers the file and line it came from, so
//! that a finding or an error points at the place to fix.
//!
//! The checks work on these generic objects rather than on typed Rust values, so that the
//! same checks assess Statecraft's operators (their shipped files plus the serialized
//! objects they build for a sample resource) and any third-party bundle alike.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Error, Result};

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The file (or, for objects made in-process, a description of where they came from).
    pub path: PathBuf,
    /// 1-based line where the object's document starts.
    pub line: usize,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.line)
    }
}

/// A Kubernetes object and where it came from.
#[derive(Debug, Clone)]
pub struct Object {
    /// The object as JSON.
    pub value: Value,
    /// Its origin.
    pub source: Source,
}

impl Object {
    /// An object made in-process (no file), e.g. by a test; `origin` stands for the file.
    pub fn built(value: Value, origin: &str) -> Object {
        Object { value, source: Source { path: PathBuf::from(origin), line: 1 } }
    }
    /// `kind`.
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        let api_version = self.value["apiVersion"].as_str().unwrap_or_default();
        api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("<unnamed>")
    }
    /// Whether this is a `kind` of `group`.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.kind() == kind && self.group() == group
    }
    /// `Kind/name (file:line)`, for findings.
    pub fn describe(&self) -> String {
        format!("{} {} ({})", self.kind(), self.name(), self.source)
    }
}

/// A Grafana dashboard: a JSON file (the plain model or the HTTP API's `{"dashboard": …}`
/// wrapper), a ConfigMap entry (the Grafana sidecar convention) or a grafana-operator
/// `GrafanaDashboard` resource.
#[derive(Debug, Clone)]
pub struct Dashboard {
    /// The file (or the object it is in).
    pub source: Source,
    /// Its title.
    pub title: String,
    /// Number of panels (rows' nested panels included).
    pub panels: usize,
    /// Whether the dashboard's model is here; `false` for a `GrafanaDashboard` that points at
    /// a URL, a grafana.com id or a ConfigMap (its panels are not known).
    pub embedded: bool,
}

/// A file or document that was not loaded as a Kubernetes object, and why. Bundle
/// catalogs carry such files beside the manifests (`metadata/dependencies.yaml`, CI and
/// release configuration, kustomize configuration): they are listed, not fatal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// `file:line`.
    pub source: String,
    /// The file (or directory).
    #[serde(skip)]
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: String,
    /// Whether the file is broken (not valid YAML/JSON, not UTF-8) rather than merely not a
    /// Kubernetes object: an error of the bundle, which `assess` reports as such.
    pub error: bool,
}

/// Everything found in a directory of manifests.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    /// The Kubernetes objects, in file order (files sorted by path).
    pub objects: Vec<Object>,
    /// The Grafana dashboards.
    pub dashboards: Vec<Dashboard>,
    /// An OLM bundle's `metadata/annotations.yaml` annotations, if present.
    pub bundle_annotations: Option<serde_json::Map<String, Value>>,
    /// What was not loaded, in file order.
    pub skipped: Vec<Skipped>,
}

impl Manifests {
    /// Adds what `other` holds.
    pub fn extend(&mut self, other: Manifests) {
        self.objects.extend(other.objects);
        self.dashboards.extend(other.dashboards);
        if other.bundle_annotations.is_some() {
            self.bundle_annotations = other.bundle_annotations;
        }
        self.skipped.extend(other.skipped);
    }

    /// `self`, or an error naming the first skipped file or document: for inputs that must
    /// consist of Kubernetes objects only (Statecraft's own shipped files).
    pub fn strict(self) -> Result<Manifests> {
        match self.skipped.first() {
            None => Ok(self),
            Some(s) => Err(Error::Skipped { at: s.source.clone(), reason: s.reason.clone() }),
        }
    }

    /// Notes that `path` (at `line`; 0 for a whole file or directory) was not loaded.
    pub fn skip(&mut self, path: &Path, line: usize, reason: impl Into<String>, error: bool) {
        self.skipped.push(Skipped {
            source: format!("{}:{line}", path.display()),
            path: path.to_path_buf(),
            reason: reason.into(),
            error,
        });
    }
}

/// Loads every `.yaml`, `.yml` and `.json` file below `dir` (recursively, sorted, hidden
/// entries skipped, each directory once however many symbolic links lead to it). Other
/// files (runbooks, READMEs, Dockerfiles) are ignored; documents that are not Kubernetes
/// objects, and files that do not parse, are listed in [`Manifests::skipped`].
pub fn load_dir(dir: &Path) -> Result<Manifests> {
    if !dir.is_dir() {
        return Err(Error::Missing { path: dir.to_path_buf(), what: "manifests directory" });
    }
    let mut out = Manifests::default();
    let mut files = Vec::new();
    let mut visited = std::collections::HashSet::new();
    collect_files(dir, &mut files, &mut visited, &mut out)?;
    for file in files {
        out.extend(load_file(&file));
    }
    Ok(out)
}

fn collect_files(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    visited: &mut std::collections::HashSet<PathBuf>,
    manifests: &mut Manifests,
) -> Result<()> {
    // A symbolic link back to a directory already walked (a loop, or a second way to the
    // same files) is not followed again.
    let real = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    if !visited.insert(real.clone()) {
        manifests.skip(dir, 0, format!("a second path to {} (symbolic link), not followed", real.display()), false);
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|err| Error::io(dir, err)))
        .collect::<Result<_>>()?;
    entries.sort();
    for path in entries {
        let hidden = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            collect_files(&path, out, visited, manifests)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads one file: a YAML stream or a JSON document. What cannot be read is in
/// [`Manifests::skipped`] (use [`Manifests::strict`] to make that an error).
pub fn load_file(path: &Path) -> Manifests {
    let mut out = Manifests::default();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            out.skip(path, 0, format!("cannot be read: {e}"), true);
            return out;
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        out.skip(path, 0, "not UTF-8 text", true);
        return out;
    };
    // A UTF-8 byte-order mark is legal at the start of YAML and JSON files written on
    // Windows; neither parser skips it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if path.extension().and_then(|e| e.to_str()) == Some("json") {
        load_json(path, text, &mut out);
    } else {
        load_yaml(path, text, &mut out);
    }
    out
}

fn load_json(path: &Path, text: &str, out: &mut Manifests) {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            out.skip(path, e.line(), format!("not valid JSON: {e}"), true);
            return;
        }
    };
    let source = Source { path: path.to_path_buf(), line: 1 };
    if value.get("apiVersion").is_none()
        && let Some(d) = as_dashboard(&value)
    {
        out.dashboards.push(dashboard(d, source));
        return;
    }
    add_document(value, source, out);
}

/// The dashboard model in `value`: the model itself (it has `panels`) or the HTTP API's
/// `{"dashboard": {…}}` wrapper that dashboards exported for provisioning come in.
fn as_dashboard(value: &Value) -> Option<&Value> {
    if value.get("panels").is_some() {
        return Some(value);
    }
    value.get("dashboard").filter(|d| d.get("panels").is_some())
}

/// Splits a YAML stream at `---` lines, remembering where each document starts, so that
/// a skipped document or a finding can name the line in the file (serde_norway numbers
/// lines per document).
fn load_yaml(path: &Path, text: &str, out: &mut Manifests) {
    let mut doc = String::new();
    let mut start = 1;
    let flush = |doc: &str, start: usize, out: &mut Manifests| {
        if doc.trim().is_empty() {
            return;
        }
        let value = match parse_yaml(doc) {
            Ok(v) => v,
            Err(e) => {
                let (line, column) = e.location().map_or((start, 0), |l| (start + l.line() - 1, l.column()));
                let message = shift_lines(&e.to_string(), start - 1);
                out.skip(path, line, format!("not valid YAML (column {column}): {message}"), true);
                return;
            }
        };
        if value.is_null() {
            return;
        }
        let source = Source { path: path.to_path_buf(), line: first_content_line(doc, start) };
        if is_bundle_annotations(path, &value) {
            out.bundle_annotations = value["annotations"].as_object().cloned();
            return;
        }
        add_document(value, source, out);
    };
    for (i, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            flush(&doc, start, out);
            doc.clear();
            start = i + 2;
        } else {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    flush(&doc, start, out);
}

/// One YAML document as JSON, with merge keys (`<<: *defaults`) applied, as the API server's
/// YAML decoder does.
fn parse_yaml(doc: &str) -> std::result::Result<Value, serde_norway::Error> {
    let mut yaml: serde_norway::Value = serde_norway::from_str(doc)?;
    yaml.apply_merge()?;
    serde_json::to_value(yaml).map_err(serde::de::Error::custom)
}

/// Adds `offset` to every `line N` in a parser message, which numbers lines from the start
/// of the document, so that the message agrees with the file.
fn shift_lines(message: &str, offset: usize) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("line ") {
        out.push_str(&rest[..i + 5]);
        rest = &rest[i + 5..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// The first line of a document that is neither blank nor a comment.
fn first_content_line(doc: &str, start: usize) -> usize {
    doc.lines().position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')).map_or(start, |i| start + i)
}

/// OLM's `metadata/annotations.yaml`: one `annotations:` map, not an object.
fn is_bundle_annotations(path: &Path, value: &Value) -> bool {
    path.file_name().and_then(|n| n.to_str()) == Some("annotations.yaml")
        && value.as_object().is_some_and(|m| m.len() == 1 && m.get("annotations").is_some_and(Value::is_object))
}

/// Files of an OLM bundle's `metadata/` directory other than `annotations.yaml`, and
/// the operator catalogs' own configuration, named in the skip note so that a reader
/// knows they were recognised rather than misread.
fn known_non_object(path: &Path) -> Option<&'static str> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let in_metadata = path.parent().and_then(Path::file_name).is_some_and(|d| d == "metadata");
    match name {
        "dependencies.yaml" | "properties.yaml" if in_metadata => Some("OLM bundle metadata"),
        "ci.yaml" | "release-config.yaml" => Some("operator catalog configuration"),
        "kustomizeconfig.yaml" => Some("kustomize configuration"),
        _ => None,
    }
}

fn add_document(value: Value, source: Source, out: &mut Manifests) {
    let not = |reason: String, out: &mut Manifests| {
        let reason = match known_non_object(&source.path) {
            Some(what) => format!("{what}, not a Kubernetes object"),
            None => format!("not a Kubernetes object: {reason}"),
        };
        out.skip(&source.path, source.line, reason, false);
    };
    let Some(map) = value.as_object() else {
        return not(format!("expected a mapping with apiVersion and kind, found {}", type_name(&value)), out);
    };
    for field in ["apiVersion", "kind"] {
        match map.get(field) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(other) => return not(format!("{field} must be a non-empty string, found {}", type_name(other)), out),
            None => return not(format!("no {field}"), out),
        }
    }
    let kind = map["kind"].as_str().unwrap_or_default();
    if kind.ends_with("List")
        && let Some(items) = map.get("items")
    {
        let Some(items) = items.as_array() else { return not("a List's items must be a sequence".into(), out) };
        for item in items {
            add_document(item.clone(), source.clone(), out);
        }
        return;
    }
    if map.get("metadata").is_some_and(|m| !m.is_object()) {
        return not("metadata must be a mapping".into(), out);
    }
    let object = Object { value, source };
    out.dashboards.extend(dashboards_in(&object));
    out.objects.push(object);
}

/// The dashboards an object carries: ConfigMap entries (the Grafana sidecar convention)
/// and grafana-operator `GrafanaDashboard` resources (embedded JSON, or a reference to a
/// URL, a grafana.com id or a ConfigMap).
pub fn dashboards_in(object: &Object) -> Vec<Dashboard> {
    let v = &object.value;
    let mut out = Vec::new();
    if object.is("", "ConfigMap")
        && let Some(data) = v["data"].as_object()
    {
        for (_, text) in data.iter().filter(|(k, _)| k.ends_with(".json")) {
            if let Some(d) = text.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok())
                && let Some(d) = as_dashboard(&d)
            {
                out.push(dashboard(d, object.source.clone()));
            }
        }
    }
    if object.kind() == "GrafanaDashboard" && object.group().starts_with("grafana.integreatly.org") {
        let spec = &v["spec"];
        let embedded = spec["json"].as_str().and_then(|t| serde_json::from_str::<Value>(t).ok());
        match embedded.as_ref().and_then(as_dashboard) {
            Some(d) => out.push(dashboard(d, object.source.clone())),
            None => {
                let referenced = ["url", "grafanaCom", "configMapRef", "gzipJson", "jsonnet", "jsonnetLib"]
                    .iter()
                    .any(|k| !spec[*k].is_null());
                if referenced {
                    out.push(Dashboard {
                        source: object.source.clone(),
                        title: object.name().to_string(),
                        panels: 0,
                        embedded: false,
                    });
                }
            }
        }
    }
    out
}

fn dashboard(value: &Value, source: Source) -> Dashboard {
    fn count(panels: &Value) -> usize {
        panels.as_array().map_or(0, |ps| ps.iter().map(|p| 1 + count(&p["panels"])).sum())
    }
    Dashboard {
        source,
        title: value["title"].as_str().unwrap_or("<untitled>").to_string(),
        panels: count(&value["panels"]),
        embedded: true,
    }
}

/// The line, at or after `from`, of the last of `needles` found one after the other (each
/// matched against a line with its indentation and a list dash removed), or `from`. Used to
/// point findings about a part of a ClusterServiceVersion (an embedded Deployment) at that
/// part rather than at the CSV's first line.
pub fn locate(path: &Path, from: usize, needles: &[&str]) -> usize {
    let Ok(text) = std::fs::read_to_string(path) else { return from };
    let mut line = from;
    let mut lines = text.lines().enumerate().skip(from.saturating_sub(1));
    for needle in needles {
        match lines.find(|(_, l)| l.trim_start().trim_start_matches("- ").starts_with(needle)) {
            Some((i, _)) => line = i + 1,
            None => return line,
        }
    }
    line
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn multi_document_yaml_keeps_each_documents_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "a.yaml",
            "# header\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n\n# c\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: s}}\n---\n",
        );
        let m = load_file(&path).strict().unwrap();
        let found: Vec<_> = m.objects.iter().map(|o| (o.kind().to_string(), o.source.line)).collect();
        assert_eq!(found, [("ServiceAccount".to_string(), 3), ("Service".to_string(), 9)]);
        assert_eq!(m.objects[0].group(), "");
    }

    #[test]
    fn a_document_without_kind_is_skipped_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "bad.yaml", "apiVersion: v1\nkind: Secret\n---\nfoo: bar\n");
        let m = load_file(&path);
        assert_eq!(m.objects.len(), 1, "the object beside it is loaded");
        assert_eq!(m.skipped.len(), 1);
        assert!(m.skipped[0].source.ends_with("bad.yaml:4") && !m.skipped[0].error, "{:?}", m.skipped);
        let err = load_file(&path).strict().unwrap_err().to_string();
        assert!(err.contains("bad.yaml:4: not a Kubernetes object: no apiVersion"), "{err}");
        let path = write(dir.path(), "scalar.yaml", "just text\n");
        let err = load_file(&path).strict().unwrap_err().to_string();
        assert!(err.contains("scalar.yaml:1: not a Kubernetes object: expected a mapping"), "{err}");
        let path = write(dir.path(), "num.yaml", "apiVersion: v1\nkind: 3\n");
        assert!(load_file(&path).strict().unwrap_err().to_string().contains("kind must be a non-empty string"));
    }

    #[test]
    fn yaml_syntax_errors_name_the_line_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "broken.yaml", "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: [unclosed\n");
        let m = load_file(&path);
        assert_eq!(m.objects.len(), 1);
        let skipped = &m.skipped[0];
        // The parser notices the unclosed sequence at the end of the document (line 6), and
        // says where it started (line 5) in the file's numbering.
        assert!(skipped.source.ends_with("broken.yaml:6") && skipped.error, "{skipped:?}");
        assert!(skipped.reason.contains("while parsing a flow sequence at line 5 column 7"), "{skipped:?}");
    }

    #[test]
    fn json_dashboards_and_bundle_annotations_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "dash.json", r#"{"title": "T", "panels": [{"type": "row", "panels": [{}]}, {}]}"#);
        write(dir.path(), "wrapped.json", r#"{"dashboard": {"title": "W", "panels": [{}]}, "overwrite": true}"#);
        write(
            dir.path(),
            "metadata/annotations.yaml",
            "annotations:\n  operators.operatorframework.io.bundle.package.v1: x\n",
        );
        write(dir.path(), "README.md", "not yaml: [");
        write(dir.path(), ".hidden.yaml", "not: an object");
        let m = load_dir(dir.path()).unwrap();
        let found: Vec<_> = m.dashboards.iter().map(|d| (d.title.as_str(), d.panels)).collect();
        assert_eq!(found, [("T", 3), ("W", 1)]);
        assert!(m.bundle_annotations.unwrap().contains_key("operators.operatorframework.io.bundle.package.v1"));
        assert!(m.objects.is_empty() && m.skipped.is_empty(), "{:?}", m.skipped);
    }

    /// What OLM bundle catalogs carry beside the manifests is skipped with a note that says
    /// what it is; a broken file is skipped as an error; the run goes on.
    #[test]
    fn catalog_files_are_skipped_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "metadata/dependencies.yaml", "dependencies:\n- type: olm.package\n");
        write(dir.path(), "metadata/properties.yaml", "properties:\n- type: olm.maxOpenShiftVersion\n");
        write(dir.path(), "release-config.yaml", "catalog_templates:\n- template_name: basic.yaml\n");
        write(dir.path(), "config/kustomizeconfig.yaml", "nameReference:\n- kind: Service\n");
        write(dir.path(), "latin1.yaml", "");
        std::fs::write(dir.path().join("latin1.yaml"), b"kind: \xe9t\xe9\n").unwrap();
        write(dir.path(), "manifests/sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n");
        let m = load_dir(dir.path()).unwrap();
        assert_eq!(m.objects.len(), 1);
        let notes: Vec<(String, &str, bool)> = m
            .skipped
            .iter()
            .map(|s| {
                let file = s.source.rsplit('/').next().unwrap_or_default().to_string();
                (file, s.reason.split(',').next().unwrap_or_default(), s.error)
            })
            .collect();
        assert_eq!(
            notes,
            [
                ("kustomizeconfig.yaml:1".to_string(), "kustomize configuration", false),
                ("latin1.yaml:0".to_string(), "not UTF-8 text", true),
                ("dependencies.yaml:1".to_string(), "OLM bundle metadata", false),
                ("properties.yaml:1".to_string(), "OLM bundle metadata", false),
                ("release-config.yaml:1".to_string(), "operator catalog configuration", false),
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_and_merge_keys_are_understood() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "bom.yaml",
            "\u{feff}apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n      - &base {name: a, image: x, securityContext: {runAsNonRoot: true}}\n      - <<: *base\n        name: b\n",
        );
        let m = load_file(&path).strict().unwrap();
        let containers = &m.objects[0].value["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[1]["name"], "b");
        assert_eq!(containers[1]["securityContext"]["runAsNonRoot"], true, "the merge key is applied");
        assert!(containers[1].get("<<").is_none());
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_link_loops_are_walked_once() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "manifests/sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n");
        std::os::unix::fs::symlink(dir.path(), dir.path().join("manifests/loop")).unwrap();
        let m = load_dir(dir.path()).unwrap();
        assert_eq!(m.objects.len(), 1);
        assert_eq!(m.skipped.len(), 1, "{:?}", m.skipped);
        assert!(m.skipped[0].reason.contains("symbolic link"), "{:?}", m.skipped);
    }

    #[test]
    fn grafana_operator_dashboards_are_dashboards() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "dash.yaml",
            "apiVersion: grafana.integreatly.org/v1beta1\nkind: GrafanaDashboard\nmetadata: {name: embedded}\nspec:\n  json: '{\"title\": \"E\", \"panels\": [{}, {}]}'\n---\napiVersion: grafana.integreatly.org/v1beta1\nkind: GrafanaDashboard\nmetadata: {name: remote}\nspec: {url: 'https://example.com/d.json'}\n",
        );
        let m = load_file(&path).strict().unwrap();
        let found: Vec<_> =
            m.dashboards.iter().map(|d| (d.title.as_str(), d.panels, d.embedded, d.source.line)).collect();
        assert_eq!(found, [("E", 2, true, 1), ("remote", 0, false, 7)]);
    }

    #[test]
    fn locate_finds_a_part_of_a_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "csv.yaml", "kind: X\nspec:\n  deployments:\n  - name: a\n  - name: b\n");
        assert_eq!(locate(&path, 1, &["deployments:", "name: b"]), 5);
        assert_eq!(locate(&path, 1, &["deployments:", "name: c"]), 3, "as far as found");
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let err = load_dir(Path::new("/nonexistent/statecraft")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/statecraft: manifests directory not found"), "{err}");
    }
}
