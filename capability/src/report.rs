//! Building a report: for Statecraft's own operators (claims, shipped files, sample objects,
//! evidence) or, with `assess`, for any operator's manifests or OLM bundle (static checks
//! only, compared with the level its ClusterServiceVersion declares).
//!
//! A report is built completely before anything is printed: an error in any input aborts
//! it, so that a partial report is never presented as a complete one.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::checks::{self, Inputs};
use crate::evidence::{self, Located};
use crate::manifests::{self, Manifests, Object};
use crate::model::{Level, criteria_of};
use crate::operators;
use crate::score::{self, CriterionScore, LevelScore, Status};
use crate::{Error, Result};

/// A report on one or more operators.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The report format's version (bumped when a field changes meaning or goes away).
    pub format: u32,
    /// `workspace` (Statecraft's operators, with evidence) or `assessment` (manifests only).
    pub kind: ReportKind,
    /// What the report was made from.
    pub inputs: ReportInputs,
    /// One entry per operator.
    pub operators: Vec<OperatorReport>,
}

/// The version of the JSON report format.
pub const REPORT_FORMAT: u32 = 1;

/// What kind of report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    /// Statecraft's operators, scored from claims, static checks and evidence.
    Workspace,
    /// A third party's manifests, statically checked against its declared level.
    Assessment,
}

/// The inputs, for the reader to judge the report by.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReportInputs {
    /// The workspace root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The evidence directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_dir: Option<String>,
    /// Evidence records read.
    pub evidence_records: usize,
    /// Said when there is no evidence directory at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_note: Option<String>,
    /// The manifests directory (assessment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifests: Option<String>,
    /// The operand objects directory (assessment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operand: Option<String>,
}

/// The report on one operator.
#[derive(Debug, Clone, Serialize)]
pub struct OperatorReport {
    /// Its name (`mysql`, or the bundle's package).
    pub name: String,
    /// Its binary, for Statecraft's operators.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The criteria it claims (for an assessment: those its declared level implies).
    pub claims: Vec<&'static str>,
    /// The confirmed level (0: none).
    pub level: u8,
    /// The OperatorHub `capabilities` value the confirmed level earns (`None` below level 1).
    pub earned_capabilities: Option<&'static str>,
    /// Per level.
    pub levels: Vec<LevelScore>,
    /// Per criterion, in model order.
    pub criteria: Vec<CriterionScore>,
    /// Evidence records about this operator, and how many are about the current code.
    pub evidence_records: usize,
    /// See `evidence_records`.
    pub current_records: usize,
    /// The fingerprint of the operator's code now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_fingerprint: Option<String>,
    /// The comparison with the declared level (assessments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assessment: Option<Assessment>,
}

impl OperatorReport {
    /// The display name: the binary's name, else the name.
    pub fn title(&self) -> &str {
        self.binary.as_deref().unwrap_or(&self.name)
    }
    /// The scores with `status`.
    pub fn with_status(&self, status: Status) -> impl Iterator<Item = &CriterionScore> {
        self.criteria.iter().filter(move |c| c.status == status)
    }
}

/// How a declared level compares with what the manifests evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The manifests evidence the declared level (as far as manifests can).
    Consistent,
    /// Nothing contradicts the declared level, but the manifests cannot evidence it: the
    /// rest needs e2e evidence.
    Unproven,
    /// Static checks of criteria at or below the declared level fail.
    Contradicted,
    /// No level is declared.
    NotDeclared,
}

/// The result of `assess`.
#[derive(Debug, Clone, Serialize)]
pub struct Assessment {
    /// The ClusterServiceVersion (`name (file:line)`), if there is one.
    pub csv: Option<String>,
    /// Its `capabilities` annotation, as written.
    pub declared_annotation: Option<String>,
    /// The level it declares.
    pub declared: Option<Level>,
    /// The highest level the manifests evidence (at most 1: see [`score::static_level`]).
    pub evidenced: u8,
    /// The verdict.
    pub verdict: Verdict,
    /// Required criteria at or below the declared level whose static checks fail.
    pub contradicted_by: Vec<&'static str>,
    /// Required criteria between the evidenced and the declared level that only a run can show.
    pub needs_e2e: Vec<&'static str>,
    /// One sentence.
    pub summary: String,
}

/// Options of a workspace report.
#[derive(Debug, Clone)]
pub struct WorkspaceOptions {
    /// The workspace root (with `crds/`, `deploy/`, `operators/`).
    pub root: PathBuf,
    /// The evidence directory; `None`: `<root>/results/evidence`, which may be absent.
    pub evidence: Option<PathBuf>,
    /// Only these operators (short names); empty: all.
    pub only: Vec<String>,
}

/// Scores Statecraft's operators.
pub fn workspace(opts: &WorkspaceOptions) -> Result<Report> {
    let all = operators::all();
    let names = operators::names();
    for name in &opts.only {
        if !names.contains(&name.as_str()) {
            return Err(Error::Usage(format!("unknown operator {name:?} (known: {})", names.join(", "))));
        }
    }
    let (evidence_dir, records, note) = match &opts.evidence {
        Some(dir) if !dir.is_dir() => return Err(Error::Missing { path: dir.clone(), what: "evidence directory" }),
        Some(dir) => (dir.clone(), evidence::load_dir(dir, &names)?, None),
        None => {
            let dir = opts.root.join("results").join("evidence");
            if dir.is_dir() {
                let records = evidence::load_dir(&dir, &names)?;
                (dir, records, None)
            } else {
                let note = format!("no evidence yet: {} does not exist (run `make e2e`)", dir.display());
                (dir, Vec::new(), Some(note))
            }
        }
    };
    let mut out = Vec::new();
    for op in all.iter().filter(|o| opts.only.is_empty() || opts.only.iter().any(|n| n == o.name)) {
        let claims = score::validate_claims(op.binary, &(op.claims)())?;
        let shipped = operators::shipped(&opts.root, op.name)?;
        let sample = op.sample.map(|build| build()).transpose()?;
        let results =
            checks::run(&Inputs { shipped: &shipped, operand: sample.as_deref(), runbook_root: Some(&opts.root) });
        let fingerprint = evidence::fingerprint(&opts.root, op.name)?.hash;
        let mine: Vec<Located> = records.iter().filter(|r| r.record.operator == op.name).cloned().collect();
        let criteria = score::score_criteria(&claims, &results, &mine, Some(&fingerprint));
        let current =
            mine.iter().filter(|r| r.record.code_fingerprint.as_deref() == Some(fingerprint.as_str())).count();
        out.push(operator_report(
            op.name,
            Some(op.binary),
            claims,
            criteria,
            mine.len(),
            current,
            Some(fingerprint),
            None,
        ));
    }
    Ok(Report {
        format: REPORT_FORMAT,
        kind: ReportKind::Workspace,
        inputs: ReportInputs {
            root: Some(opts.root.display().to_string()),
            evidence_dir: Some(evidence_dir.display().to_string()),
            evidence_records: records.len(),
            evidence_note: note,
            ..Default::default()
        },
        operators: out,
    })
}

#[allow(clippy::too_many_arguments)]
fn operator_report(
    name: &str,
    binary: Option<&str>,
    claims: Vec<&'static str>,
    criteria: Vec<CriterionScore>,
    evidence_records: usize,
    current_records: usize,
    code_fingerprint: Option<String>,
    assessment: Option<Assessment>,
) -> OperatorReport {
    let levels = score::score_levels(&criteria);
    let level = score::overall_level(&levels);
    OperatorReport {
        name: name.into(),
        binary: binary.map(str::to_string),
        claims,
        level,
        earned_capabilities: Level::from_number(level).map(Level::name),
        levels,
        criteria,
        evidence_records,
        current_records,
        code_fingerprint,
        assessment,
    }
}

/// Options of `assess`.
#[derive(Debug, Clone)]
pub struct AssessOptions {
    /// The operator's manifests or OLM bundle.
    pub manifests: PathBuf,
    /// Objects the operator created for a sample resource (e.g. `kubectl get -o yaml` of a
    /// test install), for the operand checks.
    pub operand: Option<PathBuf>,
    /// Where runbook links must resolve (a checkout of the operator's repository).
    pub runbooks: Option<PathBuf>,
}

/// Assesses a third-party operator from its manifests.
pub fn assess(opts: &AssessOptions) -> Result<Report> {
    let shipped = manifests::load_dir(&opts.manifests)?;
    let operand: Option<Vec<Object>> = match &opts.operand {
        Some(dir) => Some(manifests::load_dir(dir)?.objects),
        None => None,
    };
    if let Some(root) = opts.runbooks.as_ref().filter(|r| !r.is_dir()) {
        return Err(Error::Missing { path: root.clone(), what: "runbooks directory" });
    }
    let csvs: Vec<&Object> =
        shipped.objects.iter().filter(|o| o.is("operators.coreos.com", "ClusterServiceVersion")).collect();
    if csvs.len() > 1 {
        return Err(Error::Usage(format!(
            "{}: {} ClusterServiceVersions; assess one bundle at a time",
            opts.manifests.display(),
            csvs.len()
        )));
    }
    let csv = csvs.first().copied();
    let annotation = csv.and_then(|c| c.value["metadata"]["annotations"]["capabilities"].as_str().map(str::to_string));
    let declared = match (&annotation, csv) {
        (Some(a), Some(c)) => Some(Level::from_operatorhub(a).ok_or_else(|| Error::Manifest {
            path: c.source.path.clone(),
            line: c.source.line,
            message: format!(
                "capabilities annotation {a:?} is not one of {}",
                Level::ALL.map(|l| format!("{:?}", l.name())).join(", ")
            ),
        })?),
        _ => None,
    };
    let claims: Vec<&'static str> = declared
        .map(|d| {
            Level::ALL
                .into_iter()
                .filter(|l| *l <= d)
                .flat_map(criteria_of)
                .filter(|c| c.required)
                .map(|c| c.id)
                .collect()
        })
        .unwrap_or_default();
    let results =
        checks::run(&Inputs { shipped: &shipped, operand: operand.as_deref(), runbook_root: opts.runbooks.as_deref() });
    let criteria = score::score_criteria(&claims, &results, &[], None);
    let evidenced = score::static_level(&criteria);
    let assessment = compare(csv, annotation, declared, evidenced, &criteria, operand.is_some());
    let name = bundle_name(&shipped, csv, &opts.manifests);
    Ok(Report {
        format: REPORT_FORMAT,
        kind: ReportKind::Assessment,
        inputs: ReportInputs {
            manifests: Some(opts.manifests.display().to_string()),
            operand: opts.operand.as_ref().map(|p| p.display().to_string()),
            ..Default::default()
        },
        operators: vec![operator_report(&name, None, claims, criteria, 0, 0, None, Some(assessment))],
    })
}

fn compare(
    csv: Option<&Object>,
    declared_annotation: Option<String>,
    declared: Option<Level>,
    evidenced: u8,
    criteria: &[CriterionScore],
    have_operand: bool,
) -> Assessment {
    let evidenced_name = Level::from_number(evidenced).map_or("no level".to_string(), |l| format!("{l}"));
    let operand_hint = if have_operand { "" } else { " (operand checks need --operand)" };
    let (verdict, contradicted_by, needs_e2e, summary) = match declared {
        None => (
            Verdict::NotDeclared,
            Vec::new(),
            Vec::new(),
            format!(
                "{}; the manifests evidence {evidenced_name}{operand_hint}",
                if csv.is_some() { "the CSV declares no capabilities" } else { "no ClusterServiceVersion" }
            ),
        ),
        Some(d) => {
            let contradicted = score::contradictions(criteria, d);
            let needs = score::needs_e2e(Level::ALL.into_iter().filter(|l| l.number() > evidenced && *l <= d));
            if !contradicted.is_empty() {
                let s = format!(
                    "declares {d} but static checks fail for {}; the manifests evidence {evidenced_name}{operand_hint}",
                    contradicted.join(", ")
                );
                (Verdict::Contradicted, contradicted, needs, s)
            } else if evidenced >= d.number() {
                (Verdict::Consistent, Vec::new(), Vec::new(), format!("declares {d}; the manifests evidence it"))
            } else {
                let s = format!(
                    "declares {d}; nothing in the manifests contradicts it, but they evidence only {evidenced_name}{operand_hint}: the rest needs e2e evidence"
                );
                (Verdict::Unproven, Vec::new(), needs, s)
            }
        }
    };
    Assessment {
        csv: csv.map(|c| format!("{} ({})", c.name(), c.source)),
        declared_annotation,
        declared,
        evidenced,
        verdict,
        contradicted_by,
        needs_e2e,
        summary,
    }
}

/// The operator's name: the bundle's package, else the CSV's name, else the directory's.
fn bundle_name(shipped: &Manifests, csv: Option<&Object>, dir: &Path) -> String {
    if let Some(package) = shipped
        .bundle_annotations
        .as_ref()
        .and_then(|a| a.get("operators.operatorframework.io.bundle.package.v1"))
        .and_then(|v| v.as_str())
    {
        return package.to_string();
    }
    if let Some(c) = csv {
        return c.name().to_string();
    }
    dir.file_name().and_then(|n| n.to_str()).unwrap_or("operator").to_string()
}

/// The operators of `report` whose level is below `required`: the level is the confirmed
/// level for a workspace report, the evidenced level for an assessment.
pub fn below(report: &Report, required: u8) -> Vec<(String, u8)> {
    report
        .operators
        .iter()
        .map(|o| (o.title().to_string(), o.assessment.as_ref().map_or(o.level, |a| a.evidenced)))
        .filter(|(_, level)| *level < required)
        .collect()
}
