//! The terminal table.

use std::fmt::Write;

use super::{figures, outcome_mark, record_context, shown_checks, status_mark};
use crate::checks::CheckStatus;
use crate::report::{OperatorReport, Report, ReportKind, Verdict};
use crate::score::{LevelStatus, Status};

/// ANSI styling that disappears when colour is off.
#[derive(Clone, Copy)]
struct Paint(bool);

impl Paint {
    fn wrap(self, code: &str, text: &str) -> String {
        if self.0 { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }
    fn bold(self, t: &str) -> String {
        self.wrap("1", t)
    }
    fn dim(self, t: &str) -> String {
        self.wrap("2", t)
    }
    fn status(self, s: Status, text: &str) -> String {
        match s {
            Status::Confirmed => self.wrap("32", text),
            Status::Unproven => self.wrap("33", text),
            Status::Failed => self.wrap("1;31", text),
            Status::NotClaimed => self.dim(text),
        }
    }
    fn level(self, s: LevelStatus, text: &str) -> String {
        match s {
            LevelStatus::Confirmed => self.wrap("1;32", text),
            LevelStatus::Partial => self.wrap("33", text),
            LevelStatus::Failed => self.wrap("1;31", text),
            LevelStatus::NotClaimed => self.dim(text),
        }
    }
}

/// Pads `text` to `width` characters (padding computed before colouring).
fn pad(text: &str, width: usize) -> String {
    let n = text.chars().count();
    format!("{text}{}", " ".repeat(width.saturating_sub(n)))
}

pub(super) fn render(report: &Report, color: bool) -> String {
    let p = Paint(color);
    let mut out = String::new();
    let title = match report.kind {
        ReportKind::Workspace => "Statecraft capability report",
        ReportKind::Assessment => "Statecraft capability assessment",
    };
    let _ = writeln!(out, "{}", p.bold(title));
    let i = &report.inputs;
    if let Some(m) = &i.manifests {
        let _ =
            writeln!(out, "manifests {m}{}", i.operand.as_ref().map_or(String::new(), |o| format!(" · operand {o}")));
    }
    if let Some(dir) = &i.evidence_dir {
        match &i.evidence_note {
            Some(note) => {
                let _ = writeln!(out, "{}", p.wrap("33", &format!("evidence: {note}")));
            }
            None => {
                let _ = writeln!(out, "evidence {dir}: {} records", i.evidence_records);
            }
        }
    }
    for op in &report.operators {
        operator(&mut out, op, p);
    }
    let _ = writeln!(
        out,
        "\n{}",
        p.dim("Statuses: ✓ Confirmed · ? Claimed but unproven · ✗ Failed · – Not claimed. Evidence counts only when it is about the current code.")
    );
    out
}

fn operator(out: &mut String, op: &OperatorReport, p: Paint) {
    let earned = op.earned_capabilities.map_or("none yet".to_string(), |c| format!("\"{c}\""));
    let level = match op.level {
        0 => "no level confirmed".to_string(),
        n => format!("level {n}"),
    };
    let _ = writeln!(
        out,
        "\n{} {}  {}  OperatorHub capabilities earned: {}",
        p.bold("■"),
        p.bold(op.title()),
        p.bold(&level),
        earned
    );
    if let Some(a) = &op.assessment {
        let declared = a.declared_annotation.as_deref().map_or("none".to_string(), |d| format!("\"{d}\""));
        let verdict = match a.verdict {
            Verdict::Consistent => p.wrap("32", "consistent"),
            Verdict::Unproven => p.wrap("33", "unproven"),
            Verdict::Contradicted => p.wrap("1;31", "contradicted"),
            Verdict::NotDeclared => p.dim("not declared"),
        };
        let _ = writeln!(
            out,
            "  CSV {}: declares {declared}; manifests evidence level {}: {verdict}",
            a.csv.as_deref().unwrap_or("none"),
            a.evidenced
        );
        let _ = writeln!(out, "  {}", a.summary);
    } else {
        let _ = writeln!(
            out,
            "  claims {} criteria · {} evidence records, {} about the current code",
            op.claims.len(),
            op.evidence_records,
            op.current_records
        );
    }

    let _ =
        writeln!(out, "\n  {}", p.bold(&format!("{}{}{}", pad("LEVEL", 24), pad("STATUS", 14), "REQUIRED CRITERIA")));
    for l in &op.levels {
        let counts = format!(
            "{}/{} confirmed{}{}",
            l.confirmed,
            l.required,
            if l.claimed < l.required { format!(", {} not claimed", l.required - l.claimed) } else { String::new() },
            if l.failed > 0 { format!(", {} failed", l.failed) } else { String::new() }
        );
        let _ = writeln!(
            out,
            "  {}{}{}",
            pad(&format!("L{} {}", l.level.number(), l.name), 24),
            p.level(l.status, &pad(l.status.label(), 14)),
            counts
        );
    }

    if op.claims.is_empty() && op.assessment.is_none() {
        let _ = writeln!(out, "\n  {}", p.dim("claims no criterion yet"));
        return;
    }
    let _ = writeln!(
        out,
        "\n  {}",
        p.bold(&format!("  {}{}{}{}", pad("CRITERION", 34), pad("STATUS", 24), pad("VERIFIED BY", 12), "WHY"))
    );
    for c in &op.criteria {
        let status = format!("{} {}", status_mark(c.status), c.status.label());
        let id =
            if c.criterion.required { c.criterion.id.to_string() } else { format!("{} (optional)", c.criterion.id) };
        let _ = writeln!(
            out,
            "  {}{}{}{}",
            pad(&format!("  {id}"), 36),
            p.status(c.status, &pad(&status, 24)),
            pad(c.criterion.verification.label(), 12),
            if c.status == Status::NotClaimed && c.evidence.is_empty() { p.dim(&c.reason) } else { c.reason.clone() }
        );
        for r in c.evidence.iter().filter(|r| r.current) {
            let mark =
                if r.result == crate::evidence::Outcome::Passed { p.wrap("32", "✓") } else { p.wrap("31", "✗") };
            let _ =
                writeln!(out, "        {mark} {} {}  {}", r.test, outcome_mark(r.result), p.dim(&record_context(r)));
            let f = figures(r);
            if !f.is_empty() {
                let _ = writeln!(out, "          {}", p.dim(&f));
            }
        }
        for check in shown_checks(c) {
            let mark = if check.status == CheckStatus::Fail { p.wrap("31", "✗") } else { p.wrap("33", "?") };
            if check.findings.is_empty() {
                let _ = writeln!(out, "        {mark} {}: {}", check.id, check.detail);
            }
            for f in &check.findings {
                let _ = writeln!(out, "        {mark} {}: {f}", check.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample_report;
    use super::*;

    #[test]
    fn the_table_shows_levels_criteria_evidence_and_findings() {
        let text = render(&sample_report(), false);
        assert!(!text.contains('\x1b'), "no colour when off");
        assert!(
            text.contains("■ statecraft-mysql  no level confirmed  OperatorHub capabilities earned: none yet"),
            "{text}"
        );
        assert!(text.contains("L1 Basic Install        Partial       6/8 confirmed, 1 not claimed"), "{text}");
        assert!(
            text.contains(
                "L3.failover                       ✓ Confirmed             e2e         proven by mysql_fails_over"
            ),
            "{text}"
        );
        assert!(text.contains("✓ mysql_fails_over passed  local v1.34.4 · 2026-11-29 23:47Z · 1a2b3c4"), "{text}");
        assert!(text.contains("first_write_seconds=1.504"), "{text}");
        assert!(text.contains("L3.backup                         ✗ Failed"), "{text}");
        assert!(text.contains("L3.switchover                     ? Claimed but unproven  e2e"), "{text}");
        assert!(text.contains("✗ operand.pdb: StatefulSet db (sample): no PodDisruptionBudget"), "{text}");
        assert!(text.contains("L3.pitr (optional)"), "{text}");
    }

    #[test]
    fn colour_marks_statuses() {
        let text = render(&sample_report(), true);
        assert!(text.contains("\x1b[32m✓ Confirmed"), "green confirmed");
        assert!(text.contains("\x1b[1;31m✗ Failed"), "red failed");
    }
}
