//! Rendering a [`Report`]: a terminal table (colour on a TTY), Markdown, stable JSON, and
//! a self-contained HTML page. All four show the same facts; JSON is the one for machines
//! and keeps its field names across releases of format 1.

mod html;
mod markdown;
mod table;

use clap::ValueEnum;

use crate::checks::CheckStatus;
use crate::evidence::Outcome;
use crate::report::Report;
use crate::score::{CriterionScore, EvidenceRef, Status};
use crate::{Error, Result};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for the terminal.
    Table,
    /// GitHub-flavoured Markdown.
    Markdown,
    /// JSON (stable field names; see `format`).
    Json,
    /// A self-contained HTML page.
    Html,
}

/// Renders `report` in `format`; `color` adds ANSI colours to the table.
pub fn render(report: &Report, format: Format, color: bool) -> Result<String> {
    Ok(match format {
        Format::Table => table::render(report, color),
        Format::Markdown => markdown::render(report),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)
                .map_err(|e| Error::Usage(format!("cannot serialize the report: {e}")))?;
            s.push('\n');
            s
        }
        Format::Html => html::render(report),
    })
}

/// The model itself (`criteria` subcommand): every criterion with its level, how it is
/// verified and its static checks.
pub fn model(format: Format) -> Result<String> {
    use crate::checks::{CHECKS, checks_of};
    use crate::model::{CRITERIA, Level};
    let mut out = String::new();
    match format {
        Format::Json => {
            let criteria: Vec<serde_json::Value> = CRITERIA
                .iter()
                .map(|c| {
                    let mut v = serde_json::to_value(c).unwrap_or_default();
                    v["checks"] = checks_of(c.id).map(|d| d.id).collect::<Vec<_>>().into();
                    v
                })
                .collect();
            let levels: Vec<serde_json::Value> =
                Level::ALL.iter().map(|l| serde_json::json!({"level": l.number(), "name": l.name()})).collect();
            let doc = serde_json::json!({"format": 1, "levels": levels, "criteria": criteria, "checks": CHECKS});
            out = serde_json::to_string_pretty(&doc).map_err(|e| Error::Usage(e.to_string()))?;
            out.push('\n');
        }
        Format::Markdown => {
            out.push_str(
                "| Id | Level | Verified by | Required | Criterion | Static checks |\n|---|---|---|---|---|---|\n",
            );
            for c in CRITERIA {
                let checks: Vec<String> = checks_of(c.id).map(|d| format!("`{}`", d.id)).collect();
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} | {} | {} |\n",
                    c.id,
                    c.level,
                    c.verification.label(),
                    if c.required { "yes" } else { "optional" },
                    c.title,
                    checks.join(" ")
                ));
            }
        }
        Format::Table | Format::Html => {
            if format == Format::Html {
                return Err(Error::Usage("criteria: use --format table, markdown or json".into()));
            }
            for level in Level::ALL {
                out.push_str(&format!("{level}\n"));
                for c in CRITERIA.iter().filter(|c| c.level == level) {
                    let optional = if c.required { "" } else { " (optional)" };
                    out.push_str(&format!("  {:<26}{:<12}{}{optional}\n", c.id, c.verification.label(), c.title));
                    for d in checks_of(c.id) {
                        out.push_str(&format!("  {:<26}{:<12}· {}: {}\n", "", "", d.id, d.title));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// One character per criterion status.
fn status_mark(s: Status) -> &'static str {
    match s {
        Status::Confirmed => "✓",
        Status::Unproven => "?",
        Status::Failed => "✗",
        Status::NotClaimed => "–",
    }
}

/// A short line describing a record: `local v1.34.4 · 2026-11-29 23:47Z · 1a2b3c4 (dirty)`.
fn record_context(r: &EvidenceRef) -> String {
    let time = r.time.get(..16).map_or_else(|| r.time.clone(), |t| format!("{}Z", t.replace('T', " ")));
    let commit = r.commit.get(..7).unwrap_or(&r.commit);
    format!("{} {} · {time} · {commit}{}", r.provider, r.kubernetes_version, if r.dirty { " (dirty)" } else { "" })
}

/// The figures of a record as `key=value`, numbers rounded, long texts left out.
fn figures(r: &EvidenceRef) -> String {
    let Some(map) = r.figures.as_object() else { return String::new() };
    map.iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::Number(n) => Some(match n.as_f64() {
                Some(f) if n.is_f64() => format!("{k}={}", round(f)),
                _ => format!("{k}={n}"),
            }),
            serde_json::Value::String(s) if s.chars().count() <= 24 => Some(format!("{k}={s}")),
            serde_json::Value::Bool(b) => Some(format!("{k}={b}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn round(f: f64) -> String {
    let s = format!("{f:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn outcome_mark(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed => "FAILED",
    }
}

/// The checks worth spelling out for a criterion: failed and not-assessable ones of claimed
/// criteria (the reason column still names failed checks of unclaimed ones; JSON has all).
fn shown_checks(c: &CriterionScore) -> impl Iterator<Item = &crate::checks::CheckResult> {
    c.checks.iter().filter(move |r| c.claimed && matches!(r.status, CheckStatus::Fail | CheckStatus::NotAssessable))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::checks::{CHECKS, CheckResult};
    use crate::evidence::{FORMAT, Located, Record};
    use crate::report::{OperatorReport, REPORT_FORMAT, ReportInputs, ReportKind};
    use crate::score;

    /// A report with every status: used by every renderer's tests and the screenshot test.
    pub(crate) fn sample_report() -> Report {
        let fp = "sha256:now";
        let rec = |test: &str, criteria: &[&str], result: Outcome, fingerprint: &str| Located {
            record: Record {
                format: FORMAT,
                operator: "mysql".into(),
                test: test.into(),
                criteria: criteria.iter().map(|s| s.to_string()).collect(),
                result,
                provider: "local".into(),
                kubernetes_version: "v1.34.4".into(),
                commit: "1a2b3c4d5e6f".into(),
                dirty: false,
                code_fingerprint: Some(fingerprint.into()),
                time: "2026-11-29T23:47:10Z".into(),
                figures: serde_json::json!({"first_write_seconds": 1.503948, "acknowledged_writes_lost": 0,
                                            "method": "a long description that the table leaves out"}),
                note: None,
                duration_seconds: None,
            },
            path: "results/evidence/mysql.jsonl".into(),
            line: 1,
        };
        let evidence = vec![
            rec("mysql_fails_over", &["L1.install", "L3.failover", "L4.metrics"], Outcome::Passed, fp),
            rec("mysql_backup_and_restore", &["L3.backup", "L3.restore"], Outcome::Failed, fp),
            rec("mysql_switchover", &["L3.switchover"], Outcome::Passed, "sha256:old"),
        ];
        let mut checks: Vec<CheckResult> = CHECKS
            .iter()
            .map(|d| CheckResult { id: d.id, status: CheckStatus::Pass, detail: "looked".into(), findings: vec![] })
            .collect();
        let pdb = checks.iter_mut().find(|c| c.id == "operand.pdb").unwrap();
        pdb.status = CheckStatus::Fail;
        pdb.findings = vec!["StatefulSet db (sample): no PodDisruptionBudget selects its pods <script>".into()];
        let claims = [
            "L1.install",
            "L1.crds",
            "L1.validation",
            "L1.operand-image",
            "L1.rbac",
            "L1.operator-deployment",
            "L1.operand-security",
            "L3.failover",
            "L3.backup",
            "L3.restore",
            "L3.switchover",
            "L3.pdb",
            "L4.metrics",
            "L4.alerts",
        ];
        let criteria = score::score_criteria(&claims, &checks, &evidence, Some(fp));
        let levels = score::score_levels(&criteria);
        let level = score::overall_level(&levels);
        Report {
            format: REPORT_FORMAT,
            kind: ReportKind::Workspace,
            inputs: ReportInputs {
                root: Some("/work".into()),
                evidence_dir: Some("/work/results/evidence".into()),
                evidence_records: 3,
                ..Default::default()
            },
            operators: vec![OperatorReport {
                name: "mysql".into(),
                binary: Some("statecraft-mysql".into()),
                claims: claims.to_vec(),
                level,
                earned_capabilities: crate::model::Level::from_number(level).map(crate::model::Level::name),
                levels,
                criteria,
                evidence_records: 3,
                current_records: 2,
                code_fingerprint: Some(fp.into()),
                assessment: None,
                next: Some(crate::next::Next {
                    command: "make e2e E2E_FILTER=mysql_".into(),
                    pending: vec![crate::next::Pending {
                        criterion: "L3.backup",
                        tests: vec!["mysql_backup_and_restore".into()],
                    }],
                    duration: crate::next::Duration {
                        recorded_seconds: Some(1500.0),
                        recorded_tests: 7,
                        unrecorded: vec!["mysql_backup_and_restore".into()],
                    },
                }),
            }],
        }
    }

    #[test]
    fn figures_are_short() {
        let r = &sample_report().operators[0].criteria[0].evidence[0];
        assert_eq!(figures(r), "acknowledged_writes_lost=0 first_write_seconds=1.504");
        assert_eq!(record_context(r), "local v1.34.4 · 2026-11-29 23:47Z · 1a2b3c4");
    }

    #[test]
    fn json_is_stable_and_complete() {
        let json: serde_json::Value =
            serde_json::from_str(&render(&sample_report(), Format::Json, false).unwrap()).unwrap();
        assert_eq!(json["format"], REPORT_FORMAT);
        assert_eq!(json["kind"], "workspace");
        let op = &json["operators"][0];
        assert_eq!(op["name"], "mysql");
        assert_eq!(op["level"], 0, "L1.config is not claimed, so level 1 is not confirmed");
        assert!(op["earned_capabilities"].is_null());
        assert_eq!(op["levels"][0]["level"], 1);
        assert_eq!(op["levels"][0]["status"], "partial");
        let by_id = |id: &str| op["criteria"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap().clone();
        let failover = by_id("L3.failover");
        assert_eq!(failover["status"], "confirmed");
        assert_eq!(failover["verification"], "e2e");
        assert_eq!(failover["level"], 3);
        assert_eq!(failover["e2e_part"], "pass");
        assert_eq!(failover["evidence"][0]["test"], "mysql_fails_over");
        assert_eq!(failover["evidence"][0]["current"], true);
        assert_eq!(failover["evidence"][0]["figures"]["acknowledged_writes_lost"], 0);
        assert_eq!(by_id("L3.backup")["status"], "failed");
        assert_eq!(by_id("L3.switchover")["status"], "claimed-unproven");
        assert_eq!(by_id("L5.auto-tuning")["status"], "not-claimed");
        assert_eq!(by_id("L3.pdb")["checks"][0]["status"], "fail");
        assert_eq!(op["next"]["duration"]["recorded_seconds"], 1500.0);
        assert_eq!(op["next"]["duration"]["unrecorded"][0], "mysql_backup_and_restore");
    }
}
