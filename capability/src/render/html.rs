//! A self-contained HTML page (inline CSS and SVG, no scripts, no external resources), with a
//! staircase per operator: one step per level, filled by the share of its required
//! criteria that are confirmed, coloured by the level's status.

use std::fmt::Write;

use super::{figures, outcome_mark, record_context, shown_checks, status_mark};
use crate::checks::CheckStatus;
use crate::report::{OperatorReport, Report, ReportKind, Verdict};
use crate::score::{LevelScore, LevelStatus, Status};

/// Colours, chosen to stay readable for the common colour-vision deficiencies together with
/// the marks (✓ ? ✗ –) that carry the same information.
const GREEN: &str = "#1a7f37";
const AMBER: &str = "#bf8700";
const RED: &str = "#cf222e";
const GREY: &str = "#8c959f";
const TRACK: &str = "#eaeef2";

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn level_colour(s: LevelStatus) -> &'static str {
    match s {
        LevelStatus::Confirmed => GREEN,
        LevelStatus::Partial | LevelStatus::Unproven => AMBER,
        LevelStatus::Failed => RED,
        LevelStatus::NotClaimed => GREY,
    }
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Confirmed => "confirmed",
        Status::Unproven => "unproven",
        Status::Failed => "failed",
        Status::NotClaimed => "not-claimed",
    }
}

const STYLE: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: #1f2328; background: #f6f8fa; }
main { max-width: 1180px; margin: 0 auto; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 0; }
.inputs { color: #57606a; margin: 0 0 20px; }
.note { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 8px 12px; }
section.operator { background: #fff; border: 1px solid #d0d7de; border-radius: 10px; padding: 20px; margin-bottom: 24px; }
.head { display: flex; gap: 28px; align-items: flex-start; flex-wrap: wrap; }
.head .facts { flex: 1; min-width: 320px; }
.badge { display: inline-block; font-weight: 600; font-size: 16px; padding: 4px 12px; border-radius: 20px; color: #fff; margin: 8px 0; }
.facts p { margin: 4px 0; }
table { border-collapse: collapse; width: 100%; margin-top: 16px; }
th, td { text-align: left; vertical-align: top; padding: 6px 8px; border-bottom: 1px solid #eaeef2; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: #57606a; }
td.id { font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: nowrap; }
.chip { display: inline-block; white-space: nowrap; padding: 1px 8px; border-radius: 12px; font-size: 12px; font-weight: 600; color: #fff; }
.chip.confirmed { background: #1a7f37; } .chip.unproven { background: #bf8700; } .chip.failed { background: #cf222e; } .chip.not-claimed { background: #8c959f; }
tr.row-not-claimed td { color: #8c959f; }
tr.row-failed td.id { color: #cf222e; font-weight: 600; }
.evidence, .finding { font-size: 12px; color: #57606a; margin-top: 2px; }
.finding.fail { color: #cf222e; }
.optional { font-size: 11px; color: #57606a; }
footer { color: #57606a; font-size: 12px; }
"#;

pub(super) fn render(report: &Report) -> String {
    let title = match report.kind {
        ReportKind::Workspace => "Statecraft capability report",
        ReportKind::Assessment => "Statecraft capability assessment",
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n<h1>{title}</h1>\n"
    );
    let i = &report.inputs;
    let mut inputs = Vec::new();
    if let Some(m) = &i.manifests {
        inputs.push(format!("manifests <code>{}</code>", esc(m)));
    }
    if let Some(o) = &i.operand {
        inputs.push(format!("operand objects <code>{}</code>", esc(o)));
    }
    if let (Some(dir), None) = (&i.evidence_dir, &i.evidence_note) {
        inputs.push(format!("evidence <code>{}</code>: {} records", esc(dir), i.evidence_records));
    }
    let _ = writeln!(out, "<p class=\"inputs\">{}</p>", inputs.join(" · "));
    if let Some(note) = &i.evidence_note {
        let _ = writeln!(out, "<p class=\"note\">Evidence: {}</p>", esc(note));
    }
    for op in &report.operators {
        operator(&mut out, op);
    }
    let _ = writeln!(
        out,
        "<footer>✓ Confirmed · ? Claimed but unproven · ✗ Failed · – Not claimed. A level is confirmed when all its required criteria are; evidence counts only when it is about the current code.</footer>\n</main>\n</body>\n</html>"
    );
    out
}

/// The staircase: five steps of rising height, each filled by its confirmed share.
fn staircase(levels: &[LevelScore], earned: u8) -> String {
    let (step_w, gap, base) = (88.0, 8.0, 178.0);
    let mut svg = String::from(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"490\" height=\"214\" viewBox=\"0 0 490 214\" role=\"img\" aria-label=\"capability levels\">",
    );
    for (i, l) in levels.iter().enumerate() {
        let x = 8.0 + i as f64 * (step_w + gap);
        let h = 34.0 + i as f64 * 30.0;
        let share = if l.required == 0 { 0.0 } else { l.confirmed as f64 / l.required as f64 };
        let filled = (h * share).max(if l.claimed > 0 { 3.0 } else { 0.0 });
        let colour = level_colour(l.status);
        let _ = write!(
            svg,
            "<g><title>L{n} {name}: {status}, {c}/{r} required criteria confirmed</title>\
             <rect x=\"{x}\" y=\"{ty}\" width=\"{step_w}\" height=\"{h}\" rx=\"4\" fill=\"{TRACK}\"/>\
             <rect x=\"{x}\" y=\"{fy}\" width=\"{step_w}\" height=\"{filled}\" rx=\"4\" fill=\"{colour}\"/>",
            n = l.level.number(),
            name = l.name,
            status = l.status.label(),
            c = l.confirmed,
            r = l.required,
            ty = base - h,
            fy = base - filled,
        );
        if l.level.number() == earned {
            let _ = write!(
                svg,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"5\" fill=\"none\" stroke=\"#1f2328\" stroke-width=\"3\"/>",
                x - 1.5,
                base - h - 1.5,
                step_w + 3.0,
                h + 3.0
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{cx}\" y=\"{ly}\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"700\" fill=\"#1f2328\">L{n} · {c}/{r}</text>\
             <text x=\"{cx}\" y=\"{ny}\" text-anchor=\"middle\" font-size=\"10.5\" fill=\"#57606a\">{name}</text>\
             <text x=\"{cx}\" y=\"{sy}\" text-anchor=\"middle\" font-size=\"10.5\" font-weight=\"600\" fill=\"{colour}\">{status}</text></g>",
            cx = x + step_w / 2.0,
            ly = base - h - 7.0,
            n = l.level.number(),
            c = l.confirmed,
            r = l.required,
            ny = base + 15.0,
            sy = base + 29.0,
            name = l.name,
            status = l.status.label(),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn operator(out: &mut String, op: &OperatorReport) {
    let _ = writeln!(out, "<section class=\"operator\" id=\"{}\">", esc(&op.name));
    let _ = writeln!(out, "<div class=\"head\">{}<div class=\"facts\">", staircase(&op.levels, op.level));
    let _ = writeln!(out, "<h2>{}</h2>", esc(op.title()));
    let (badge, colour) = match op.level {
        0 => ("No level confirmed".to_string(), GREY),
        n => (format!("Level {n} · {}", op.earned_capabilities.unwrap_or_default()), GREEN),
    };
    let _ = writeln!(out, "<div class=\"badge\" style=\"background:{colour}\">{}</div>", esc(&badge));
    let earned = op.earned_capabilities.map_or("none yet".to_string(), |c| format!("<strong>{}</strong>", esc(c)));
    let _ = writeln!(out, "<p>OperatorHub <code>capabilities</code> earned: {earned}</p>");
    if let Some(a) = &op.assessment {
        let colour = match a.verdict {
            Verdict::Supported => GREEN,
            Verdict::NotShown => AMBER,
            Verdict::Contradicted => RED,
            Verdict::NotDeclared => GREY,
        };
        let _ = writeln!(
            out,
            "<p>CSV {}: declares <strong>{}</strong></p><p>Capability: <span class=\"chip\" style=\"background:{colour}\">{}</span> {}</p><p>OperatorHub value earned from static evidence: <strong>{}</strong></p><p>Hygiene: {}</p>",
            a.csv.as_deref().map_or("none".into(), |c| format!("<code>{}</code>", esc(c))),
            a.declared_annotation.as_deref().map_or("nothing".into(), esc),
            a.verdict.label(),
            esc(&a.summary),
            a.earned_from_static.unwrap_or("none"),
            esc(&a.hygiene.summary)
        );
        for e in &a.bundle_errors {
            let _ = writeln!(out, "<p class=\"finding fail\">Bundle error: {}</p>", esc(e));
        }
        for n in &a.needs_run {
            let hints = n.hints.iter().map(|h| format!(" (hint: {})", esc(h))).collect::<String>();
            let _ = writeln!(
                out,
                "<p class=\"evidence\">Needs a run: <code>{}</code>: {}{hints}</p>",
                n.criterion,
                esc(n.why)
            );
        }
        for s in a.skipped.iter().filter(|s| !s.error) {
            let _ = writeln!(out, "<p class=\"evidence\">Skipped {}: {}</p>", esc(&s.source), esc(&s.reason));
        }
        for c in a.hygiene.checks.iter().filter(|c| c.result.status == CheckStatus::Fail) {
            for f in &c.result.findings {
                let _ = writeln!(
                    out,
                    "<p class=\"finding fail\">Hygiene ({}) <code>{}</code>: {}</p>",
                    c.severity.label(),
                    c.result.id,
                    esc(f)
                );
            }
        }
    } else {
        let _ = writeln!(
            out,
            "<p>Claims {} criteria · {} evidence records, {} about the current code</p>",
            op.claims.len(),
            op.evidence_records,
            op.current_records
        );
    }
    let _ = writeln!(out, "</div></div>");
    if op.claims.is_empty() && op.assessment.is_none() {
        let _ = writeln!(out, "<p>Claims no criterion yet.</p></section>");
        return;
    }
    let _ = writeln!(
        out,
        "<table class=\"criteria\"><thead><tr><th>Criterion</th><th>Status</th><th>Verified by</th><th>What, and why this status</th></tr></thead><tbody>"
    );
    for c in &op.criteria {
        let class = status_class(c.status);
        let optional = if c.criterion.required { "" } else { " <span class=\"optional\">optional</span>" };
        let _ = write!(
            out,
            "<tr class=\"row-{class}\"><td class=\"id\">{}{optional}</td><td><span class=\"chip {class}\">{} {}</span></td><td>{}</td><td><div>{}</div><div class=\"evidence\">{}</div>",
            c.criterion.id,
            status_mark(c.status),
            c.status.label(),
            c.criterion.verification.label(),
            esc(c.criterion.title),
            esc(&c.reason)
        );
        for r in c.evidence.iter().filter(|r| r.current) {
            let f = figures(r);
            let _ = write!(
                out,
                "<div class=\"evidence\">{} <code>{}</code> {} · {}{}</div>",
                if r.result == crate::evidence::Outcome::Passed { "✓" } else { "✗" },
                esc(&r.test),
                outcome_mark(r.result),
                esc(&record_context(r)),
                if f.is_empty() { String::new() } else { format!(" · {}", esc(&f)) }
            );
        }
        for check in shown_checks(c) {
            let class = if check.status == CheckStatus::Fail { "finding fail" } else { "finding" };
            let lines: Vec<&str> = if check.findings.is_empty() {
                vec![check.detail.as_str()]
            } else {
                check.findings.iter().map(String::as_str).collect()
            };
            for line in lines {
                let _ = write!(out, "<div class=\"{class}\"><code>{}</code>: {}</div>", check.id, esc(line));
            }
        }
        let _ = writeln!(out, "</td></tr>");
    }
    let _ = writeln!(out, "</tbody></table>");
    if let Some(n) = op.next.as_ref().filter(|n| !n.pending.is_empty()) {
        let _ = writeln!(
            out,
            "<p>Next: <code>{}</code> runs the e2e tests that prove the claimed criteria waiting for a run:</p><ul>",
            esc(&n.command)
        );
        for c in &n.pending {
            let tests = if c.tests.is_empty() {
                "no e2e test records it yet".to_string()
            } else {
                c.tests.iter().map(|t| format!("<code>{}</code>", esc(t))).collect::<Vec<_>>().join(", ")
            };
            let _ = writeln!(out, "<li><code>{}</code>: {tests}</li>", c.criterion);
        }
        let _ = writeln!(out, "</ul><p>How long: {}.</p>", esc(&n.duration.describe()));
    }
    let _ = writeln!(out, "</section>");
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample_report;
    use super::*;

    #[test]
    fn the_page_is_self_contained_and_escaped() {
        let html = render(&sample_report());
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
        for external in ["<script", "<link", "src=\"http", "url("] {
            assert!(!html.contains(external), "{external}");
        }
        assert!(html.contains("&lt;script&gt;"), "findings are escaped");
        assert!(html.contains("<svg"), "the staircase");
        assert_eq!(html.matches("<g><title>L").count(), 5);
        assert!(html.contains("<span class=\"chip confirmed\">✓ Confirmed</span>"));
        assert!(html.contains("<code>mysql_fails_over</code> passed"));
        assert!(html.contains("<p>How long: about 25 min of test time over 7 tests"), "{html}");
    }
}
