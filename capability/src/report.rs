//! Building a report: for Statecraft's own operators (claims, shipped files, sample objects,
//! evidence) or, with `assess`, for any operator's manifests or OLM bundle (static checks
//! only, compared with the level its ClusterServiceVersion declares).
//!
//! A report is built completely before anything is printed: an error in any input aborts
//! it, so that a partial report is never presented as a complete one.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::checks::{self, CheckResult, CheckStatus, Hint, Inputs, Severity, check_def};
use crate::evidence::{self, Located};
use crate::manifests::{self, Manifests, Object, Skipped};
use crate::model::{CRITERIA, Criterion, HYGIENE_CRITERIA, Level};
use crate::next::{self, Next};
use crate::operators;
use crate::score::{self, CriterionScore, LevelScore, Part, Status};

mod sanity;
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

/// The version of the JSON report format. 2: an assessment's verdict is supported /
/// not shown / contradicted / not declared (was consistent / unproven), levels can be
/// `unproven`, and assessments carry the hygiene judgement and the bundle's own errors.
pub const REPORT_FORMAT: u32 = 2;

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
    /// What earns the claimed criteria not confirmed yet (Statecraft's operators).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
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

/// The capability judgement: how the level a bundle declares compares with what it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The static evidence supports the declared level as far as a bundle can (the rest of
    /// its criteria need a run, and nothing contradicts them).
    Supported,
    /// Nothing contradicts the declared level, but the bundle does not show it: criteria
    /// need e2e evidence, or what would show them is not in the bundle.
    NotShown,
    /// The bundle holds positive evidence against a required criterion at or below the
    /// declared level (no CRD reports status, no right to create Events, an observed operand
    /// without probes ...).
    Contradicted,
    /// No level is declared (or the declaration is not a level: see `bundle_errors`).
    NotDeclared,
}

impl Verdict {
    /// `supported`, `not shown`, `contradicted`, `not declared`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::NotShown => "not shown",
            Verdict::Contradicted => "contradicted",
            Verdict::NotDeclared => "not declared",
        }
    }
}

/// A criterion at or below the declared level that only a run can prove, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NeedsRun {
    /// The criterion.
    pub criterion: &'static str,
    /// What a run has to show.
    pub why: &'static str,
    /// What the bundle shows towards it (never proof).
    pub hints: Vec<String>,
}

/// The hygiene judgement: Statecraft's own production bar, which the capability model does
/// not require, graded by severity.
#[derive(Debug, Clone, Serialize)]
pub struct Hygiene {
    /// Failed hygiene checks by severity.
    pub high: usize,
    /// See `high`.
    pub medium: usize,
    /// See `high`.
    pub low: usize,
    /// Hygiene checks the inputs could not judge (operand checks without `--operand` ...).
    pub not_assessable: usize,
    /// One sentence.
    pub summary: String,
    /// Every hygiene check, most severe failures first.
    pub checks: Vec<HygieneCheck>,
}

/// One hygiene check's result.
#[derive(Debug, Clone, Serialize)]
pub struct HygieneCheck {
    /// The check's result.
    #[serde(flatten)]
    pub result: CheckResult,
    /// Its weight.
    pub severity: Severity,
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
    /// The highest level the static evidence supports (at most 1: see [`score::static_level`]).
    pub evidenced: u8,
    /// The OperatorHub `capabilities` value that `evidenced` earns.
    pub earned_from_static: Option<&'static str>,
    /// The capability verdict.
    pub verdict: Verdict,
    /// Required criteria at or below the declared level the bundle contradicts.
    pub contradicted_by: Vec<&'static str>,
    /// Required criteria at or below the declared level that only a run can show.
    pub needs_e2e: Vec<&'static str>,
    /// The same, each with what a run must show and the bundle's hints towards it.
    pub needs_run: Vec<NeedsRun>,
    /// One sentence on the capability.
    pub summary: String,
    /// The hygiene judgement.
    pub hygiene: Hygiene,
    /// Errors of the bundle a validator would report (CSV apiVersion, capability names,
    /// removed API versions, files that do not parse).
    pub bundle_errors: Vec<String>,
    /// Files and documents that were not loaded, and why.
    pub skipped: Vec<Skipped>,
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
    for &name in names.iter().filter(|&&n| opts.only.is_empty() || opts.only.iter().any(|o| o == n)) {
        let declared = operators::claims(&opts.root, name)?;
        let ids: Vec<&str> = declared.claims.iter().map(String::as_str).collect();
        let claims = score::validate_claims(&declared.operator, &ids)?;
        let shipped = operators::shipped(&opts.root, name)?;
        let sample = operators::sample(&opts.root, name)?;
        let results =
            checks::run(&Inputs { shipped: &shipped, operand: sample.as_deref(), runbook_root: Some(&opts.root) });
        let fingerprint = evidence::fingerprint(&opts.root, name)?.hash;
        let mine: Vec<Located> = records.iter().filter(|r| r.record.operator == name).cloned().collect();
        let criteria = score::score_criteria(&claims, &results, &mine, Some(&fingerprint));
        let current =
            mine.iter().filter(|r| r.record.code_fingerprint.as_deref() == Some(fingerprint.as_str())).count();
        let tests = next::e2e_tests(&opts.root, name)?;
        let next = next::next(name, &criteria, &tests, &mine);
        let mut report = operator_report(
            name,
            Some(&declared.operator),
            claims,
            criteria,
            mine.len(),
            current,
            Some(fingerprint),
            None,
        );
        report.next = Some(next);
        out.push(report);
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
        next: None,
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
    let mut shipped = manifests::load_dir(&opts.manifests)?;
    drop_copies(&mut shipped);
    let operand: Option<Vec<Object>> = match &opts.operand {
        Some(dir) => Some(manifests::load_dir(dir)?.strict()?.objects),
        None => None,
    };
    if let Some(root) = opts.runbooks.as_ref().filter(|r| !r.is_dir()) {
        return Err(Error::Missing { path: root.clone(), what: "runbooks directory" });
    }
    let csvs: Vec<&Object> =
        shipped.objects.iter().filter(|o| o.is("operators.coreos.com", "ClusterServiceVersion")).collect();
    if csvs.len() > 1 {
        let files: Vec<String> = csvs.iter().map(|c| format!("{} ({})", c.name(), c.source)).collect();
        return Err(Error::Usage(format!(
            "{}: {} ClusterServiceVersions: {}; assess one bundle at a time",
            opts.manifests.display(),
            csvs.len(),
            files.join(", ")
        )));
    }
    let csv = csvs.first().copied();
    let mut bundle_errors = sanity::errors(&shipped, csv);
    let annotation = csv.and_then(|c| c.value["metadata"]["annotations"]["capabilities"].as_str().map(str::to_string));
    let declared = annotation.as_deref().and_then(Level::from_operatorhub);
    if let (Some(a), Some(c)) = (&annotation, csv) {
        match declared {
            None => bundle_errors.push(format!(
                "{}: capabilities {a:?} is not one of {}",
                c.describe(),
                Level::ALL.map(|l| format!("{:?}", l.name())).join(", ")
            )),
            Some(l) if l.name() != a => bundle_errors.push(format!(
                "{}: capabilities {a:?} must be written exactly {:?} (read as {l})",
                c.describe(),
                l.name()
            )),
            Some(_) => {}
        }
    }
    // A declared level claims every criterion of the model up to it, except those that are
    // only Statecraft's own bar (judged under hygiene).
    let claims: Vec<&'static str> = declared
        .map(|d| CRITERIA.iter().filter(|c| c.level <= d && !hygiene_only(c)).map(|c| c.id).collect())
        .unwrap_or_default();
    let results =
        checks::run(&Inputs { shipped: &shipped, operand: operand.as_deref(), runbook_root: opts.runbooks.as_deref() });
    let (hygiene_results, capability_results): (Vec<CheckResult>, Vec<CheckResult>) =
        results.into_iter().partition(|r| check_def(r.id).is_some_and(|d| d.hygiene.is_some()));
    let mut criteria = score::score_criteria(&claims, &capability_results, &[], None);
    for c in criteria.iter_mut().filter(|c| hygiene_only(c.criterion)) {
        c.reason = "Statecraft's own bar, not the model's: judged under hygiene".into();
    }
    let hints = checks::hints(&shipped);
    let mut assessment =
        compare(csv, annotation, declared, &criteria, &hints, hygiene(hygiene_results), operand.is_some());
    bundle_errors.extend(shipped.skipped.iter().filter(|s| s.error).map(|s| format!("{}: {}", s.source, s.reason)));
    assessment.bundle_errors = bundle_errors;
    assessment.skipped = shipped.skipped.clone();
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

/// Catalogs sometimes keep a second copy of a bundle below its directory (`bundle/manifests/`
/// beside `manifests/`). When every ClusterServiceVersion has the same name, they are copies
/// of one bundle: the one nearest the root is assessed, and what lies in the other copies'
/// bundle directories is left out, with a note. Different names are different bundles.
fn drop_copies(shipped: &mut Manifests) {
    let csvs: Vec<&Object> =
        shipped.objects.iter().filter(|o| o.is("operators.coreos.com", "ClusterServiceVersion")).collect();
    let Some(kept) = csvs.iter().min_by_key(|c| c.source.path.components().count()) else { return };
    if csvs.len() < 2 || csvs.iter().any(|c| c.name() != kept.name()) {
        return;
    }
    // A CSV's bundle directory: the parent of its `manifests/`, else its own directory.
    let bundle_dir = |csv: &Object| {
        let dir = csv.source.path.parent().unwrap_or(Path::new("")).to_path_buf();
        match dir.file_name() {
            Some(n) if n == "manifests" => dir.parent().map(Path::to_path_buf).unwrap_or(dir),
            _ => dir,
        }
    };
    let copies: Vec<PathBuf> = csvs
        .iter()
        .filter(|c| !std::ptr::eq(**c, *kept))
        .map(|c| bundle_dir(c))
        .filter(|dir| !kept.source.path.starts_with(dir))
        .collect();
    if copies.is_empty() {
        return;
    }
    let (name, at) = (kept.name().to_string(), kept.source.to_string());
    let outside = |path: &Path| !copies.iter().any(|dir| path.starts_with(dir));
    shipped.objects.retain(|o| outside(&o.source.path));
    shipped.dashboards.retain(|d| outside(&d.source.path));
    shipped.skipped.retain(|s| outside(&s.path));
    for dir in copies {
        shipped.skip(&dir, 0, format!("another copy of bundle {name}, not assessed (assessed: {at})"), false);
    }
}

/// Whether `c` is Statecraft's own production bar rather than the model's (see
/// [`HYGIENE_CRITERIA`]).
fn hygiene_only(c: &Criterion) -> bool {
    HYGIENE_CRITERIA.contains(&c.id)
}

fn hygiene(results: Vec<CheckResult>) -> Hygiene {
    let mut checks: Vec<HygieneCheck> = results
        .into_iter()
        .filter_map(|r| Some(HygieneCheck { severity: check_def(r.id)?.hygiene?, result: r }))
        .collect();
    let failed = |s: Severity, checks: &[HygieneCheck]| {
        checks
            .iter()
            .filter(|c| c.severity == s && c.result.status == CheckStatus::Fail)
            .map(|c| c.result.id)
            .collect::<Vec<_>>()
    };
    let (high, medium, low) =
        (failed(Severity::High, &checks), failed(Severity::Medium, &checks), failed(Severity::Low, &checks));
    let not_assessable = checks.iter().filter(|c| c.result.status == CheckStatus::NotAssessable).count();
    let parts: Vec<String> = [(Severity::High, &high), (Severity::Medium, &medium), (Severity::Low, &low)]
        .iter()
        .filter(|(_, ids)| !ids.is_empty())
        .map(|(s, ids)| format!("{} {} ({})", ids.len(), s.label(), ids.join(", ")))
        .collect();
    let mut summary = if parts.is_empty() {
        "meets Statecraft's production bar".to_string()
    } else {
        format!("below Statecraft's production bar: {}", parts.join("; "))
    };
    if not_assessable > 0 {
        summary.push_str(&format!("; {not_assessable} not assessable"));
    }
    // Failures first, most severe first; then the rest in check order.
    checks.sort_by_key(|c| (c.result.status != CheckStatus::Fail, std::cmp::Reverse(c.severity)));
    Hygiene { high: high.len(), medium: medium.len(), low: low.len(), not_assessable, summary, checks }
}

fn compare(
    csv: Option<&Object>,
    declared_annotation: Option<String>,
    declared: Option<Level>,
    criteria: &[CriterionScore],
    hints: &[Hint],
    hygiene: Hygiene,
    have_operand: bool,
) -> Assessment {
    let evidenced = score::static_level(criteria);
    let earned = Level::from_number(evidenced);
    let evidenced_name = earned.map_or("no level".to_string(), |l| format!("{l}"));
    let operand_hint = if have_operand { "" } else { " (operand checks need --operand)" };
    let needs_run: Vec<NeedsRun> = declared
        .map(|d| {
            criteria
                .iter()
                .filter(|s| {
                    s.claimed && s.criterion.required && s.criterion.level <= d && s.criterion.verification.has_e2e()
                })
                .filter(|s| s.static_part != Some(Part::Fail))
                .map(|s| NeedsRun {
                    criterion: s.criterion.id,
                    why: e2e_sentence(s.criterion),
                    hints: hints.iter().filter(|h| h.criterion == s.criterion.id).map(|h| h.text.clone()).collect(),
                })
                .collect()
        })
        .unwrap_or_default();
    let needs_e2e: Vec<&'static str> = needs_run.iter().map(|n| n.criterion).collect();
    let (verdict, contradicted_by, summary) = match declared {
        None => (
            Verdict::NotDeclared,
            Vec::new(),
            format!(
                "{}; static evidence supports {evidenced_name}{operand_hint}",
                if csv.is_some() { "the CSV declares no capability level" } else { "no ClusterServiceVersion" }
            ),
        ),
        Some(d) => {
            let contradicted = score::contradictions(criteria, d);
            let runs =
                if needs_e2e.is_empty() { String::new() } else { format!("; {} need a run", plural_ids(&needs_e2e)) };
            if !contradicted.is_empty() {
                let s = format!(
                    "declares {d}, but the bundle contradicts {}; static evidence supports {evidenced_name}{operand_hint}",
                    contradicted.join(", ")
                );
                (Verdict::Contradicted, contradicted, s)
            } else if evidenced >= d.number() {
                (Verdict::Supported, Vec::new(), format!("declares {d}; static evidence supports it{runs}"))
            } else {
                let s = format!(
                    "declares {d}; nothing in the bundle contradicts it, static evidence supports {evidenced_name}{operand_hint}{runs}"
                );
                (Verdict::NotShown, Vec::new(), s)
            }
        }
    };
    Assessment {
        csv: csv.map(|c| format!("{} ({})", c.name(), c.source)),
        declared_annotation,
        declared,
        evidenced,
        earned_from_static: earned.map(Level::name),
        verdict,
        contradicted_by,
        needs_e2e,
        needs_run,
        summary,
        hygiene,
        bundle_errors: Vec::new(),
        skipped: Vec::new(),
    }
}

fn plural_ids(ids: &[&str]) -> String {
    if ids.len() == 1 { format!("1 criterion ({})", ids[0]) } else { format!("{} criteria", ids.len()) }
}

/// What a run has to show for `c`: the `E2e:` sentence of its description, or all of it.
fn e2e_sentence(c: &'static Criterion) -> &'static str {
    c.description.split_once("E2e: ").map_or(c.description, |(_, e2e)| e2e)
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

/// The errors of the bundles assessed in `report` (none for a workspace report).
pub fn bundle_errors(report: &Report) -> Vec<&str> {
    report
        .operators
        .iter()
        .filter_map(|o| o.assessment.as_ref())
        .flat_map(|a| a.bundle_errors.iter().map(String::as_str))
        .collect()
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
