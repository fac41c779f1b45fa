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
    /// The file (or, for built objects, a description such as `sample MySQLCluster`).
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
    /// An object that was built in-process (no file), e.g. from a sample resource.
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

/// A Grafana dashboard shipped as a JSON file.
#[derive(Debug, Clone)]
pub struct Dashboard {
    /// The file (or the ConfigMap it is in).
    pub source: Source,
    /// Its title.
    pub title: String,
    /// Number of panels (rows' nested panels included).
    pub panels: usize,
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
}

impl Manifests {
    /// Adds what `other` holds.
    pub fn extend(&mut self, other: Manifests) {
        self.objects.extend(other.objects);
        self.dashboards.extend(other.dashboards);
        if other.bundle_annotations.is_some() {
            self.bundle_annotations = other.bundle_annotations;
        }
    }
}

/// Loads every `.yaml`, `.yml` and `.json` file below `dir` (recursively, sorted, hidden
/// entries skipped). Other files (runbooks, READMEs) are ignored.
pub fn load_dir(dir: &Path) -> Result<Manifests> {
    if !dir.is_dir() {
        return Err(Error::Missing { path: dir.to_path_buf(), what: "manifests directory" });
    }
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    let mut out = Manifests::default();
    for file in files {
        out.extend(load_file(&file)?);
    }
    Ok(out)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
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
            collect_files(&path, out)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads one file: a YAML stream or a JSON document.
pub fn load_file(path: &Path) -> Result<Manifests> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    if path.extension().and_then(|e| e.to_str()) == Some("json") {
        load_json(path, &text)
    } else {
        load_yaml(path, &text)
    }
}

fn load_json(path: &Path, text: &str) -> Result<Manifests> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let source = Source { path: path.to_path_buf(), line: 1 };
    let mut out = Manifests::default();
    if value.get("apiVersion").is_none() && value.get("panels").is_some() {
        out.dashboards.push(dashboard(&value, source));
        return Ok(out);
    }
    add_document(value, source, &mut out)?;
    Ok(out)
}

/// Splits a YAML stream at `---` lines, remembering where each document starts, so that
/// an error or a finding can name the line in the file (serde_yaml numbers lines per
/// document).
fn load_yaml(path: &Path, text: &str) -> Result<Manifests> {
    let mut out = Manifests::default();
    let mut doc = String::new();
    let mut start = 1;
    let flush = |doc: &str, start: usize, out: &mut Manifests| -> Result<()> {
        if doc.trim().is_empty() {
            return Ok(());
        }
        let value: Value = serde_yaml::from_str(doc).map_err(|e| {
            let (line, column) = e.location().map_or((start, 0), |l| (start + l.line() - 1, l.column()));
            Error::Syntax { path: path.to_path_buf(), line, column, message: shift_lines(&e.to_string(), start - 1) }
        })?;
        if value.is_null() {
            return Ok(());
        }
        let source = Source { path: path.to_path_buf(), line: first_content_line(doc, start) };
        if is_bundle_annotations(path, &value) {
            out.bundle_annotations = value["annotations"].as_object().cloned();
            return Ok(());
        }
        add_document(value, source, out)
    };
    for (i, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            flush(&doc, start, &mut out)?;
            doc.clear();
            start = i + 2;
        } else {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    flush(&doc, start, &mut out)?;
    Ok(out)
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

fn add_document(value: Value, source: Source, out: &mut Manifests) -> Result<()> {
    let not = |reason: String| Error::NotAnObject { path: source.path.clone(), line: source.line, reason };
    let Some(map) = value.as_object() else {
        return Err(not(format!("expected a mapping with apiVersion and kind, found {}", type_name(&value))));
    };
    for field in ["apiVersion", "kind"] {
        match map.get(field) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(other) => return Err(not(format!("{field} must be a non-empty string, found {}", type_name(other)))),
            None => return Err(not(format!("no {field}"))),
        }
    }
    let kind = map["kind"].as_str().unwrap_or_default();
    if kind.ends_with("List")
        && let Some(items) = map.get("items")
    {
        let Some(items) = items.as_array() else { return Err(not("a List's items must be a sequence".into())) };
        for item in items {
            add_document(item.clone(), source.clone(), out)?;
        }
        return Ok(());
    }
    if map.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(not("metadata must be a mapping".into()));
    }
    // Dashboards shipped in ConfigMaps (the Grafana sidecar convention).
    if kind == "ConfigMap"
        && let Some(data) = map.get("data").and_then(Value::as_object)
    {
        for (_, text) in data.iter().filter(|(k, _)| k.ends_with(".json")) {
            if let Some(d) = text.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok())
                && d.get("panels").is_some()
            {
                out.dashboards.push(dashboard(&d, source.clone()));
            }
        }
    }
    out.objects.push(Object { value, source });
    Ok(())
}

fn dashboard(value: &Value, source: Source) -> Dashboard {
    fn count(panels: &Value) -> usize {
        panels.as_array().map_or(0, |ps| ps.iter().map(|p| 1 + count(&p["panels"])).sum())
    }
    Dashboard {
        source,
        title: value["title"].as_str().unwrap_or("<untitled>").to_string(),
        panels: count(&value["panels"]),
    }
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
        let m = load_file(&path).unwrap();
        let found: Vec<_> = m.objects.iter().map(|o| (o.kind().to_string(), o.source.line)).collect();
        assert_eq!(found, [("ServiceAccount".to_string(), 3), ("Service".to_string(), 9)]);
        assert_eq!(m.objects[0].group(), "");
    }

    #[test]
    fn a_document_without_kind_is_an_error_naming_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "bad.yaml", "apiVersion: v1\nkind: Secret\n---\nfoo: bar\n");
        let err = load_file(&path).unwrap_err().to_string();
        assert!(err.contains("bad.yaml:4: not a Kubernetes object: no apiVersion"), "{err}");
        let path = write(dir.path(), "scalar.yaml", "just text\n");
        let err = load_file(&path).unwrap_err().to_string();
        assert!(err.contains("scalar.yaml:1: not a Kubernetes object: expected a mapping"), "{err}");
        let path = write(dir.path(), "num.yaml", "apiVersion: v1\nkind: 3\n");
        assert!(load_file(&path).unwrap_err().to_string().contains("kind must be a non-empty string"));
    }

    #[test]
    fn yaml_syntax_errors_name_the_line_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "broken.yaml", "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: [unclosed\n");
        let err = load_file(&path).unwrap_err();
        let Error::Syntax { line, .. } = &err else { panic!("{err}") };
        // The parser notices the unclosed sequence at the end of the document (line 6), and
        // says where it started (line 5) in the file's numbering.
        assert_eq!(*line, 6, "{err}");
        assert!(err.to_string().contains("while parsing a flow sequence at line 5 column 7"), "{err}");
    }

    #[test]
    fn json_dashboards_and_bundle_annotations_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "dash.json", r#"{"title": "T", "panels": [{"type": "row", "panels": [{}]}, {}]}"#);
        write(
            dir.path(),
            "metadata/annotations.yaml",
            "annotations:\n  operators.operatorframework.io.bundle.package.v1: x\n",
        );
        write(dir.path(), "README.md", "not yaml: [");
        write(dir.path(), ".hidden.yaml", "not: an object");
        let m = load_dir(dir.path()).unwrap();
        assert_eq!(m.dashboards.len(), 1);
        assert_eq!(m.dashboards[0].panels, 3);
        assert_eq!(m.dashboards[0].title, "T");
        assert!(m.bundle_annotations.unwrap().contains_key("operators.operatorframework.io.bundle.package.v1"));
        assert!(m.objects.is_empty());
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let err = load_dir(Path::new("/nonexistent/statecraft")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/statecraft: manifests directory not found"), "{err}");
    }
}
