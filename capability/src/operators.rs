//! Statecraft's own operators, read from what they write, never from their code.
//!
//! Each operator's binary writes, through the shared runner's subcommands and `make
//! manifests` (`scripts/gen-manifests.sh`), everything the report needs into
//! `deploy/<operator>/`: the install manifests (RBAC, Deployment), `capabilities.json` (the
//! criteria it claims: `capabilities`) and `sample-objects.yaml` (the objects its own pure
//! builders make for its sample resource: `sample-objects`); its CRDs go to `crds/`. The
//! e2e suite's freshness test (`e2e/tests/manifests_up_to_date.rs`) fails when a file
//! differs from what the code renders, so the report cannot check a copy that drifted.
//!
//! Why artifacts rather than linking the operators: this crate then depends on no operator
//! crate, so it builds (and assesses third-party operators) without compiling any of them,
//! and Statecraft's operators go through exactly the file-based path any other operator's
//! manifests take, with one implementation of each check.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::manifests::{self, Manifests, Object};
use crate::{Error, Result};

/// Every Statecraft operator's short name (directories, evidence files), in report order.
const NAMES: &[&str] = &["mysql", "etcd", "kafka"];

/// The claims file in `deploy/<operator>/`.
pub const CLAIMS_FILE: &str = "capabilities.json";
/// The sample objects file in `deploy/<operator>/`.
pub const SAMPLE_FILE: &str = "sample-objects.yaml";

/// The short names of Statecraft's operators, in report order.
pub fn names() -> Vec<&'static str> {
    NAMES.to_vec()
}

/// What an operator claims, as its `capabilities` subcommand prints it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// The binary and `Operator::NAME`: `statecraft-mysql`.
    pub operator: String,
    /// The criterion ids it claims.
    pub claims: Vec<String>,
}

fn deploy_dir(root: &Path, operator: &str) -> PathBuf {
    root.join("deploy").join(operator)
}

/// Reads `deploy/<operator>/capabilities.json`. It must name the operator
/// (`statecraft-<operator>`): a file copied from another operator would otherwise score
/// this one with foreign claims.
pub fn claims(root: &Path, operator: &str) -> Result<Claims> {
    let path = deploy_dir(root, operator).join(CLAIMS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::Artifact {
        path: path.clone(),
        message: format!("the operator's claims cannot be read: {e}"),
    })?;
    let claims: Claims = serde_json::from_str(&text)
        .map_err(|e| Error::Artifact { path: path.clone(), message: format!("malformed claims: {e}") })?;
    let binary = format!("statecraft-{operator}");
    if claims.operator != binary {
        return Err(Error::Artifact {
            path,
            message: format!("the claims of {:?}, expected those of {binary:?}", claims.operator),
        });
    }
    Ok(claims)
}

/// The objects in `deploy/<operator>/sample-objects.yaml`; `None` when the operator builds
/// none (it defines no resources yet). A missing file is an error: an operator that has
/// objects would otherwise be scored as if it had none.
pub fn sample(root: &Path, operator: &str) -> Result<Option<Vec<Object>>> {
    let path = deploy_dir(root, operator).join(SAMPLE_FILE);
    if !path.is_file() {
        return Err(Error::Artifact { path, message: "the operator's sample objects are missing".into() });
    }
    let mut loaded = manifests::load_file(&path).strict()?;
    relative_to(root, &mut loaded);
    Ok(Some(loaded.objects).filter(|o| !o.is_empty()))
}

/// What `operator` ships, under the workspace `root`: `crds/<name>.yaml` and every YAML
/// and JSON file in `deploy/<name>/` (RBAC and Deployment, alert rules, monitors,
/// dashboards) except the claims and sample objects, which are about the operator, not
/// installed with it.
pub fn shipped(root: &Path, operator: &str) -> Result<Manifests> {
    let mut out = Manifests::default();
    let crds = root.join("crds").join(format!("{operator}.yaml"));
    if crds.is_file() {
        out.extend(manifests::load_file(&crds).strict()?);
    }
    let deploy = deploy_dir(root, operator);
    if deploy.is_dir() {
        let mut loaded = manifests::load_dir(&deploy)?;
        let about_the_operator = |path: &Path| {
            path.parent() == Some(deploy.as_path())
                && path.file_name().is_some_and(|n| n == CLAIMS_FILE || n == SAMPLE_FILE)
        };
        loaded.objects.retain(|o| !about_the_operator(&o.source.path));
        loaded.dashboards.retain(|d| !about_the_operator(&d.source.path));
        loaded.skipped.retain(|s| !about_the_operator(&s.path));
        out.extend(loaded.strict()?);
    }
    relative_to(root, &mut out);
    Ok(out)
}

/// Findings name files as the repository does (`deploy/mysql/operator.yaml:156`).
fn relative_to(root: &Path, manifests: &mut Manifests) {
    let sources = manifests.objects.iter_mut().map(|o| &mut o.source);
    for source in sources.chain(manifests.dashboards.iter_mut().map(|d| &mut d.source)) {
        if let Ok(rel) = source.path.strip_prefix(root) {
            source.path = rel.to_path_buf();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// The objects each operator builds for its sample, as `make manifests` wrote them: a
    /// StatefulSet named after the sample (Kafka's after the sample and its pool) and its
    /// PodDisruptionBudget, with file and line for findings.
    #[test]
    fn the_samples_hold_a_statefulset_and_its_pdb() {
        for (operator, first) in [("mysql", "sample"), ("etcd", "sample"), ("kafka", "sample-controller")] {
            let objects = sample(&root(), operator).unwrap().expect("sample objects");
            let kinds: Vec<_> = objects.iter().map(|o| (o.kind().to_string(), o.group().to_string())).collect();
            assert!(kinds.contains(&("StatefulSet".into(), "apps".into())), "{operator}: {kinds:?}");
            assert!(kinds.contains(&("PodDisruptionBudget".into(), "policy".into())), "{operator}: {kinds:?}");
            assert_eq!(objects[0].name(), first);
            assert_eq!(objects[0].source.path, Path::new("deploy").join(operator).join(SAMPLE_FILE));
        }
    }

    #[test]
    fn every_claim_of_every_operator_is_in_the_model() {
        for op in names() {
            let claims = claims(&root(), op).unwrap();
            assert_eq!(claims.operator, format!("statecraft-{op}"));
            for id in &claims.claims {
                assert!(crate::model::criterion(id).is_some(), "{op} claims unknown {id}");
            }
        }
        assert!(!claims(&root(), "mysql").unwrap().claims.is_empty());
    }

    /// The claims and sample objects are not part of what an operator installs.
    #[test]
    fn shipped_leaves_out_the_files_about_the_operator() {
        let shipped = shipped(&root(), "mysql").unwrap();
        let files: Vec<_> = shipped.objects.iter().map(|o| o.source.path.clone()).collect();
        assert!(files.iter().any(|f| f.ends_with("operator.yaml")), "{files:?}");
        assert!(!files.iter().any(|f| f.ends_with(SAMPLE_FILE)), "{files:?}");
        assert!(!shipped.objects.iter().any(|o| o.is("apps", "StatefulSet")));
    }

    #[test]
    fn wrong_or_missing_artifacts_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let deploy = dir.path().join("deploy/mysql");
        std::fs::create_dir_all(&deploy).unwrap();
        let err = sample(dir.path(), "mysql").unwrap_err().to_string();
        assert!(err.contains("deploy/mysql/sample-objects.yaml: the operator's sample objects are missing"), "{err}");
        let err = claims(dir.path(), "mysql").unwrap_err().to_string();
        assert!(err.contains("deploy/mysql/capabilities.json: the operator's claims cannot be read"), "{err}");
        assert!(err.ends_with("(run `make manifests`)"), "{err}");
        std::fs::write(deploy.join(CLAIMS_FILE), r#"{"operator":"statecraft-etcd","claims":[]}"#).unwrap();
        let err = claims(dir.path(), "mysql").unwrap_err().to_string();
        assert!(err.contains("the claims of \"statecraft-etcd\", expected those of \"statecraft-mysql\""), "{err}");
        std::fs::write(deploy.join(CLAIMS_FILE), r#"{"operator":"statecraft-mysql","claim":[]}"#).unwrap();
        let err = claims(dir.path(), "mysql").unwrap_err().to_string();
        assert!(err.contains("malformed claims: unknown field `claim`"), "{err}");
    }
}
