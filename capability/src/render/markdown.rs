//! Markdown (GitHub-flavoured), for pull requests and docs.

use std::fmt::Write;

use super::{figures, outcome_mark, record_context, shown_checks, status_mark};
use crate::report::{OperatorReport, Report, ReportKind};

/// Escapes what would break a table cell or start markup.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\").replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;").replace('\n', " ")
}

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    let title = match report.kind {
        ReportKind::Workspace => "Statecraft capability report",
        ReportKind::Assessment => "Statecraft capability assessment",
    };
    let _ = writeln!(out, "# {title}\n");
    let i = &report.inputs;
    if let Some(m) = &i.manifests {
        let _ = writeln!(
            out,
            "Manifests: `{m}`{}\n",
            i.operand.as_ref().map_or(String::new(), |o| format!(", operand objects: `{o}`"))
        );
    }
    if let Some(dir) = &i.evidence_dir {
        match &i.evidence_note {
            Some(note) => {
                let _ = writeln!(out, "> **Evidence:** {}\n", cell(note));
            }
            None => {
                let _ = writeln!(out, "Evidence: `{dir}`, {} records.\n", i.evidence_records);
            }
        }
    }
    for op in &report.operators {
        operator(&mut out, op);
    }
    let _ = writeln!(
        out,
        "Statuses: ✓ Confirmed · ? Claimed but unproven · ✗ Failed · – Not claimed. Evidence counts only when it is about the current code."
    );
    out
}

fn operator(out: &mut String, op: &OperatorReport) {
    let level = match op.level {
        0 => "no level confirmed".to_string(),
        n => format!("level {n}"),
    };
    if op.assessment.is_none() {
        let _ = writeln!(out, "## {} — {level}\n", cell(op.title()));
        let earned = op.earned_capabilities.map_or("none yet".to_string(), |c| format!("**{c}**"));
        let _ = writeln!(out, "OperatorHub `capabilities` earned: {earned}\n");
    } else {
        let _ = writeln!(out, "## {}\n", cell(op.title()));
    }
    if let Some(a) = &op.assessment {
        let _ = writeln!(
            out,
            "CSV: {} · declares: {}\n\n- **Capability: {}.** {}\n- OperatorHub value earned from static evidence: {}\n- **Hygiene:** {}\n",
            a.csv.as_deref().map_or("none".into(), |c| format!("`{}`", cell(c))),
            a.declared_annotation.as_deref().map_or("nothing".into(), |d| format!("`{d}`")),
            a.verdict.label(),
            cell(&a.summary),
            a.earned_from_static.map_or("none".into(), |e| format!("**{e}**")),
            cell(&a.hygiene.summary)
        );
        if !a.bundle_errors.is_empty() {
            let lines: Vec<String> = a.bundle_errors.iter().map(|e| format!("- {}", cell(e))).collect();
            let _ = writeln!(out, "Bundle errors:\n\n{}\n", lines.join("\n"));
        }
        if !a.needs_run.is_empty() {
            let lines: Vec<String> = a
                .needs_run
                .iter()
                .map(|n| {
                    let hints = n.hints.iter().map(|h| format!(" Hint: {}.", cell(h))).collect::<String>();
                    format!("- `{}`: {}{hints}", n.criterion, cell(n.why))
                })
                .collect();
            let _ = writeln!(out, "Needs a run:\n\n{}\n", lines.join("\n"));
        }
        let skipped: Vec<String> = a
            .skipped
            .iter()
            .filter(|s| !s.error)
            .map(|s| format!("- {}: {}", cell(&s.source), cell(&s.reason)))
            .collect();
        if !skipped.is_empty() {
            let _ = writeln!(out, "Skipped (not Kubernetes objects):\n\n{}\n", skipped.join("\n"));
        }
    } else {
        let _ = writeln!(
            out,
            "Claims {} criteria; {} evidence records, {} about the current code.\n",
            op.claims.len(),
            op.evidence_records,
            op.current_records
        );
    }
    let _ = writeln!(out, "| Level | Status | Required criteria confirmed |\n|---|---|---|");
    for l in &op.levels {
        let _ = writeln!(
            out,
            "| L{} {} | {} | {}/{}{} |",
            l.level.number(),
            l.name,
            l.status.label(),
            l.confirmed,
            l.required,
            if l.claimed < l.required { format!(" ({} not claimed)", l.required - l.claimed) } else { String::new() }
        );
    }
    let _ = writeln!(out);
    if op.claims.is_empty() && op.assessment.is_none() {
        let _ = writeln!(out, "Claims no criterion yet.\n");
        return;
    }
    let _ = writeln!(out, "| Criterion | Status | Verified by | Why | Evidence (current) |\n|---|---|---|---|---|");
    for c in &op.criteria {
        let evidence: Vec<String> = c
            .evidence
            .iter()
            .filter(|r| r.current)
            .map(|r| {
                let f = figures(r);
                format!(
                    "`{}` {} ({}){}",
                    cell(&r.test),
                    outcome_mark(r.result),
                    cell(&record_context(r)),
                    if f.is_empty() { String::new() } else { format!(": {}", cell(&f)) }
                )
            })
            .collect();
        let optional = if c.criterion.required { "" } else { " (optional)" };
        let _ = writeln!(
            out,
            "| `{}`{optional} | {} {} | {} | {} | {} |",
            c.criterion.id,
            status_mark(c.status),
            c.status.label(),
            c.criterion.verification.label(),
            cell(&c.reason),
            evidence.join("<br>")
        );
    }
    let findings: Vec<String> = op
        .criteria
        .iter()
        .flat_map(|c| {
            shown_checks(c).flat_map(move |check| {
                let lines: Vec<String> = if check.findings.is_empty() {
                    vec![format!("- `{}` ({}): {}", check.id, c.criterion.id, cell(&check.detail))]
                } else {
                    check
                        .findings
                        .iter()
                        .map(|f| format!("- `{}` ({}): {}", check.id, c.criterion.id, cell(f)))
                        .collect()
                };
                lines
            })
        })
        .collect();
    if !findings.is_empty() {
        let _ = writeln!(out, "\n### Static findings\n\n{}", findings.join("\n"));
    }
    if let Some(n) = op.next.as_ref().filter(|n| !n.pending.is_empty()) {
        let lines: Vec<String> = n
            .pending
            .iter()
            .map(|c| {
                let tests = if c.tests.is_empty() {
                    "no e2e test records it yet".to_string()
                } else {
                    c.tests.iter().map(|t| format!("`{}`", cell(t))).collect::<Vec<_>>().join(", ")
                };
                format!("- `{}`: {tests}", c.criterion)
            })
            .collect();
        let _ = writeln!(
            out,
            "\n### Next: `{}`\n\nThe claimed criteria waiting for a run, and the tests that prove them:\n\n{}\n\nHow long: {}.",
            n.command,
            lines.join("\n"),
            n.duration.describe()
        );
    }
    if let Some(a) = &op.assessment {
        let hygiene: Vec<String> = a
            .hygiene
            .checks
            .iter()
            .filter(|c| c.result.status == crate::checks::CheckStatus::Fail)
            .flat_map(|c| {
                c.result
                    .findings
                    .iter()
                    .map(move |f| format!("- {} `{}`: {}", c.severity.label(), c.result.id, cell(f)))
            })
            .collect();
        if !hygiene.is_empty() {
            let _ = writeln!(out, "\n### Hygiene findings\n\n{}", hygiene.join("\n"));
        }
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample_report;
    use super::*;

    #[test]
    fn markdown_has_the_tables_and_escapes_cells() {
        let md = render(&sample_report());
        assert!(md.starts_with("# Statecraft capability report\n"), "{md}");
        assert!(md.contains("## statecraft-mysql — no level confirmed"), "{md}");
        assert!(md.contains("| Level | Status | Required criteria confirmed |"));
        assert!(
            md.contains("| `L3.failover` | ✓ Confirmed | e2e | proven by mysql_fails_over | `mysql_fails_over` passed"),
            "{md}"
        );
        assert!(md.contains("| `L3.pitr` (optional) | – Not claimed |"), "{md}");
        assert!(md.contains("How long: about 25 min of test time over 7 tests (1 more"), "{md}");
        assert!(md.contains("- `operand.pdb` (L3.pdb): StatefulSet db (sample): no PodDisruptionBudget selects its pods &lt;script&gt;"), "{md}");
        // Every table row has the same number of cells as its header.
        for line in md.lines().filter(|l| l.starts_with("| `L")) {
            assert_eq!(line.matches(" | ").count(), 4, "{line}");
        }
    }
}
