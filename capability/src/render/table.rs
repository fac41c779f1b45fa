//! The terminal table.

use std::fmt::Write;

use super::{figures, outcome_mark, record_context, shown_checks, status_mark};
use crate::checks::CheckStatus;
use crate::next::Next;
use crate::report::{Assessment, OperatorReport, Report, ReportKind, Verdict};
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
            LevelStatus::Unproven => self.wrap("33", text),
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
    if let Some(a) = &op.assessment {
        assessment(out, op, a, p);
    } else {
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
        // An assessment also says what was found for the checks that pass (which metrics,
        // which dashboards), so that a reader can judge the verdict.
        if op.assessment.is_some() && c.claimed {
            for check in c.checks.iter().filter(|r| r.status == CheckStatus::Pass) {
                let _ = writeln!(out, "        {} {}: {}", p.wrap("32", "✓"), check.id, p.dim(&check.detail));
            }
        }
    }
    if let Some(a) = &op.assessment {
        hygiene(out, a, p);
    }
    if let Some(n) = &op.next {
        next(out, n, p);
    }
}

/// What earns the claimed criteria not confirmed yet: the tests, and the command.
fn next(out: &mut String, n: &Next, p: Paint) {
    if n.pending.is_empty() {
        return;
    }
    let runnable = n.pending.iter().filter(|c| !c.tests.is_empty()).count();
    let _ = writeln!(
        out,
        "
  {} `{}` runs the e2e tests that prove {runnable} of the {} claimed criteria waiting for a run:",
        p.bold("NEXT:"),
        n.command,
        n.pending.len()
    );
    for c in &n.pending {
        let tests = if c.tests.is_empty() { p.dim("no e2e test records it yet") } else { c.tests.join(", ") };
        let _ = writeln!(out, "    {}{tests}", pad(c.criterion, 26));
    }
    let _ = writeln!(out, "    {}{}", pad("how long:", 26), n.duration.describe());
}

/// The head of an assessment: the two judgements, what static evidence earns, what needs a
/// run, the bundle's errors and what was skipped.
fn assessment(out: &mut String, op: &OperatorReport, a: &Assessment, p: Paint) {
    let declared = a.declared_annotation.as_deref().map_or("no level".to_string(), |d| format!("\"{d}\""));
    let _ = writeln!(out, "\n{} {}  declares {declared}", p.bold("■"), p.bold(op.title()));
    let _ = writeln!(out, "  CSV {}", a.csv.as_deref().unwrap_or("none"));
    let verdict = match a.verdict {
        Verdict::Supported => p.wrap("32", a.verdict.label()),
        Verdict::NotShown => p.wrap("33", a.verdict.label()),
        Verdict::Contradicted => p.wrap("1;31", a.verdict.label()),
        Verdict::NotDeclared => p.dim(a.verdict.label()),
    };
    let _ = writeln!(out, "  {} {verdict}: {}", p.bold("capability:"), a.summary);
    let earned = a.earned_from_static.map_or("none".to_string(), |c| format!("\"{c}\""));
    let _ = writeln!(out, "  {} {earned}", p.bold("OperatorHub value earned from static evidence:"));
    let grade = if a.hygiene.high + a.hygiene.medium + a.hygiene.low == 0 {
        p.wrap("32", &a.hygiene.summary)
    } else {
        p.wrap("33", &a.hygiene.summary)
    };
    let _ = writeln!(out, "  {} {grade}", p.bold("hygiene:"));
    if !a.bundle_errors.is_empty() {
        let _ = writeln!(out, "\n  {}", p.bold(&format!("BUNDLE ERRORS ({})", a.bundle_errors.len())));
        for e in &a.bundle_errors {
            let _ = writeln!(out, "    {} {e}", p.wrap("31", "✗"));
        }
    }
    if !a.needs_run.is_empty() {
        let _ = writeln!(
            out,
            "\n  {}",
            p.bold(&format!("NEEDS A RUN ({} criteria: a bundle cannot show them)", a.needs_run.len()))
        );
        for n in &a.needs_run {
            let _ = writeln!(out, "    {}{}", pad(n.criterion, 26), p.dim(n.why));
            for h in &n.hints {
                let _ = writeln!(out, "    {}{}", pad("", 26), format_args!("hint: {h}"));
            }
        }
    }
    let skipped: Vec<_> = a.skipped.iter().filter(|s| !s.error).collect();
    if !skipped.is_empty() {
        let _ = writeln!(out, "\n  {}", p.bold(&format!("SKIPPED ({} not Kubernetes objects)", skipped.len())));
        for s in skipped {
            let _ = writeln!(out, "    {} {}: {}", p.dim("·"), s.source, p.dim(&s.reason));
        }
    }
}

/// The hygiene checks that failed or could not be judged, most severe first.
fn hygiene(out: &mut String, a: &Assessment, p: Paint) {
    let shown: Vec<_> = a.hygiene.checks.iter().filter(|c| c.result.status != CheckStatus::Pass).collect();
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  {}",
        p.bold(&format!("{}{}{}", pad("  HYGIENE CHECK", 36), pad("SEVERITY", 16), "FINDINGS"))
    );
    for c in shown {
        let (mark, sev) = match c.result.status {
            CheckStatus::Fail => (p.wrap("31", "✗"), c.severity.label().to_string()),
            _ => (p.wrap("33", "?"), "not assessable".to_string()),
        };
        let first = c.result.findings.first().unwrap_or(&c.result.detail);
        let _ = writeln!(out, "  {mark} {}{}{first}", pad(c.result.id, 33), pad(&sev, 16));
        for f in c.result.findings.iter().skip(1) {
            let _ = writeln!(out, "    {}{f}", pad("", 49));
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
        assert!(
            text.contains("NEXT: `make e2e E2E_FILTER=mysql_` runs the e2e tests that prove 1 of the 1 claimed"),
            "{text}"
        );
        assert!(text.contains("L3.backup                 mysql_backup_and_restore"), "{text}");
        assert!(
            text.contains("how long:                 about 25 min of test time over 7 tests (1 more not timed yet)"),
            "{text}"
        );
    }

    #[test]
    fn colour_marks_statuses() {
        let text = render(&sample_report(), true);
        assert!(text.contains("\x1b[32m✓ Confirmed"), "green confirmed");
        assert!(text.contains("\x1b[1;31m✗ Failed"), "red failed");
    }
}
