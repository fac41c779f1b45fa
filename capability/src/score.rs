//! Scoring: from claims, static check results and evidence records to a status per
//! criterion, per level, and the operator's level.
//!
//! Rules (the README has the reasoning):
//!
//! - A criterion not claimed is *Not claimed*, whatever the evidence says (evidence for it
//!   is still shown).
//! - A claimed criterion is *Failed* when a static check of it fails, or when a current
//!   evidence record for it failed — a current failure is not outvoted by a pass: it is
//!   the same code, so the capability is at best flaky.
//! - Otherwise it is *Confirmed* when every part of its verification passed: all its static
//!   checks, and at least one current passed record when it needs e2e evidence.
//! - Otherwise it is *Claimed but unproven*: no current evidence (none, only records about
//!   older code, only records from runs whose code changed under them), or static checks
//!   that could not be assessed.
//! - A level is *Confirmed* when all its required criteria are; the operator's level is the
//!   highest L with levels 1..L all confirmed, while the per-level view shows every level
//!   on its own (the Operator SDK now treats levels as independent).

use serde::Serialize;

use crate::checks::{CheckResult, CheckStatus, checks_of};
use crate::evidence::{Located, Outcome};
use crate::model::{CRITERIA, Criterion, Level, criterion};
use crate::{Error, Result};

/// The status of one criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    /// Claimed, and every part of its verification passed on the current code.
    #[serde(rename = "confirmed")]
    Confirmed,
    /// Claimed, not contradicted, not proven.
    #[serde(rename = "claimed-unproven")]
    Unproven,
    /// Claimed, and a static check or a current e2e run failed.
    #[serde(rename = "failed")]
    Failed,
    /// Not claimed.
    #[serde(rename = "not-claimed")]
    NotClaimed,
}

impl Status {
    /// Human label.
    pub fn label(self) -> &'static str {
        match self {
            Status::Confirmed => "Confirmed",
            Status::Unproven => "Claimed but unproven",
            Status::Failed => "Failed",
            Status::NotClaimed => "Not claimed",
        }
    }
}

/// The outcome of one part (static or e2e) of a criterion's verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// It passed.
    Pass,
    /// It failed.
    Fail,
    /// No verdict: no current evidence, or checks not assessable.
    Unknown,
}

/// An evidence record as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceRef {
    /// The test.
    pub test: String,
    /// Passed or failed.
    pub result: Outcome,
    /// Whether it is about the current code.
    pub current: bool,
    /// Cluster provider.
    pub provider: String,
    /// Kubernetes version.
    pub kubernetes_version: String,
    /// Commit tested.
    pub commit: String,
    /// Whether the tree was dirty.
    pub dirty: bool,
    /// When.
    pub time: String,
    /// Measured figures.
    pub figures: serde_json::Value,
    /// `file:line` of the record.
    pub source: String,
}

/// The score of one criterion.
#[derive(Debug, Clone, Serialize)]
pub struct CriterionScore {
    /// The criterion (its fields appear inline in JSON).
    #[serde(flatten)]
    pub criterion: &'static Criterion,
    /// Whether the operator claims it.
    pub claimed: bool,
    /// The verdict.
    pub status: Status,
    /// The static part, if the criterion has one.
    pub static_part: Option<Part>,
    /// The e2e part, if the criterion has one.
    pub e2e_part: Option<Part>,
    /// The static checks of the criterion.
    pub checks: Vec<CheckResult>,
    /// The evidence records naming it: current ones first, newest first.
    pub evidence: Vec<EvidenceRef>,
    /// Why the status is what it is, in a sentence.
    pub reason: String,
}

/// The status of a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LevelStatus {
    /// Every required criterion confirmed.
    Confirmed,
    /// Some required criteria confirmed, not all, none failed.
    Partial,
    /// Required criteria claimed, none confirmed and none failed.
    Unproven,
    /// A claimed required criterion failed.
    Failed,
    /// No required criterion claimed.
    NotClaimed,
}

impl LevelStatus {
    /// Human label.
    pub fn label(self) -> &'static str {
        match self {
            LevelStatus::Confirmed => "Confirmed",
            LevelStatus::Partial => "Partial",
            LevelStatus::Unproven => "Unproven",
            LevelStatus::Failed => "Failed",
            LevelStatus::NotClaimed => "Not claimed",
        }
    }
}

/// The score of one level.
#[derive(Debug, Clone, Serialize)]
pub struct LevelScore {
    /// The level.
    pub level: Level,
    /// Its name.
    pub name: &'static str,
    /// The verdict.
    pub status: LevelStatus,
    /// Required criteria.
    pub required: usize,
    /// Of those, claimed.
    pub claimed: usize,
    /// Of those, confirmed.
    pub confirmed: usize,
    /// Of those, failed.
    pub failed: usize,
}

/// Checks that every claim names a criterion of the model; returns them sorted, once each.
pub fn validate_claims(operator: &str, claims: &[&str]) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for id in claims {
        let c = criterion(id).ok_or_else(|| Error::UnknownClaim { operator: operator.into(), id: id.to_string() })?;
        out.push(c.id);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Scores every criterion of the model. `fingerprint` is the current code's fingerprint
/// (`None`: no record can be current).
pub fn score_criteria(
    claims: &[&str],
    checks: &[CheckResult],
    evidence: &[Located],
    fingerprint: Option<&str>,
) -> Vec<CriterionScore> {
    CRITERIA.iter().map(|c| score_one(c, claims.contains(&c.id), checks, evidence, fingerprint)).collect()
}

fn score_one(
    c: &'static Criterion,
    claimed: bool,
    checks: &[CheckResult],
    evidence: &[Located],
    fingerprint: Option<&str>,
) -> CriterionScore {
    let own_checks: Vec<CheckResult> =
        checks_of(c.id).filter_map(|d| checks.iter().find(|r| r.id == d.id).cloned()).collect();
    // A criterion verified statically whose checks are not among `checks` (an assessment
    // passes only its capability checks) has no static part here.
    let static_part = (c.verification.has_static() && !own_checks.is_empty()).then(|| {
        if own_checks.iter().any(|r| r.status == CheckStatus::Fail) {
            Part::Fail
        } else if own_checks.iter().all(|r| r.status == CheckStatus::Pass) {
            Part::Pass
        } else {
            Part::Unknown
        }
    });

    let mut refs: Vec<EvidenceRef> = evidence
        .iter()
        .filter(|l| l.record.criteria.iter().any(|id| id == c.id))
        .map(|l| {
            let r = &l.record;
            EvidenceRef {
                test: r.test.clone(),
                result: r.result,
                current: fingerprint.is_some() && r.code_fingerprint.as_deref() == fingerprint,
                provider: r.provider.clone(),
                kubernetes_version: r.kubernetes_version.clone(),
                commit: r.commit.clone(),
                dirty: r.dirty,
                time: r.time.clone(),
                figures: r.figures.clone(),
                source: format!("{}:{}", l.path.display(), l.line),
            }
        })
        .collect();
    refs.sort_by(|a, b| b.current.cmp(&a.current).then_with(|| b.time.cmp(&a.time)));
    let current_failed = refs.iter().filter(|r| r.current && r.result == Outcome::Failed).count();
    let current_passed = refs.iter().filter(|r| r.current && r.result == Outcome::Passed).count();
    let stale = refs.len() - current_failed - current_passed;
    let e2e_part = c.verification.has_e2e().then_some(if current_failed > 0 {
        Part::Fail
    } else if current_passed > 0 {
        Part::Pass
    } else {
        Part::Unknown
    });

    let parts = [static_part, e2e_part];
    let status = if !claimed {
        Status::NotClaimed
    } else if parts.contains(&Some(Part::Fail)) {
        Status::Failed
    } else if parts.iter().flatten().all(|p| *p == Part::Pass) {
        Status::Confirmed
    } else {
        Status::Unproven
    };

    let mut why = Vec::new();
    match static_part {
        Some(Part::Fail) => {
            let failed: Vec<&str> = own_checks.iter().filter(|r| r.status == CheckStatus::Fail).map(|r| r.id).collect();
            why.push(format!("static check failed: {}", failed.join(", ")));
        }
        Some(Part::Unknown) => {
            let open: Vec<&str> =
                own_checks.iter().filter(|r| r.status == CheckStatus::NotAssessable).map(|r| r.id).collect();
            why.push(format!("static checks not assessable: {}", open.join(", ")));
        }
        Some(Part::Pass) => why.push("static checks pass".into()),
        None => {}
    }
    match e2e_part {
        Some(Part::Fail) => {
            let tests: Vec<&str> =
                refs.iter().filter(|r| r.current && r.result == Outcome::Failed).map(|r| r.test.as_str()).collect();
            why.push(format!("failed on the current code: {}", dedup(tests).join(", ")));
        }
        Some(Part::Pass) => {
            let tests: Vec<&str> = refs.iter().filter(|r| r.current).map(|r| r.test.as_str()).collect();
            why.push(format!("proven by {}", dedup(tests).join(", ")));
        }
        Some(Part::Unknown) if stale > 0 => why.push(format!(
            "no current e2e evidence ({} about other code)",
            if stale == 1 { "1 record is".to_string() } else { format!("{stale} records are") }
        )),
        Some(Part::Unknown) => why.push("no e2e evidence".into()),
        None => {}
    }
    if !claimed && !refs.is_empty() {
        why.push("evidence exists but the operator does not claim it".into());
    }
    CriterionScore {
        criterion: c,
        claimed,
        status,
        static_part,
        e2e_part,
        checks: own_checks,
        evidence: refs,
        reason: why.join("; "),
    }
}

fn dedup(mut v: Vec<&str>) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|t| seen.insert(*t));
    v
}

/// The per-level view.
pub fn score_levels(criteria: &[CriterionScore]) -> Vec<LevelScore> {
    Level::ALL
        .into_iter()
        .map(|level| {
            let required: Vec<&CriterionScore> =
                criteria.iter().filter(|s| s.criterion.level == level && s.criterion.required).collect();
            let count = |f: &dyn Fn(&CriterionScore) -> bool| required.iter().filter(|s| f(s)).count();
            let claimed = count(&|s| s.claimed);
            let confirmed = count(&|s| s.status == Status::Confirmed);
            let failed = count(&|s| s.status == Status::Failed);
            let status = if confirmed == required.len() {
                LevelStatus::Confirmed
            } else if failed > 0 {
                LevelStatus::Failed
            } else if claimed == 0 {
                LevelStatus::NotClaimed
            } else if confirmed == 0 {
                LevelStatus::Unproven
            } else {
                LevelStatus::Partial
            };
            LevelScore { level, name: level.name(), status, required: required.len(), claimed, confirmed, failed }
        })
        .collect()
}

/// The operator's level: the highest L with levels 1..L all confirmed (0: none).
pub fn overall_level(levels: &[LevelScore]) -> u8 {
    levels.iter().take_while(|l| l.status == LevelStatus::Confirmed).map(|l| l.level.number()).last().unwrap_or(0)
}

/// The highest L such that every level 1..L has statically checked required criteria and
/// all of them pass their static checks: how far manifests alone can evidence a level.
/// Level 2 has no statically checkable criterion, so this is at most 1.
pub fn static_level(criteria: &[CriterionScore]) -> u8 {
    let mut reached = 0;
    for level in Level::ALL {
        let checkable: Vec<&CriterionScore> = criteria
            .iter()
            .filter(|s| s.criterion.level == level && s.criterion.required && s.static_part.is_some())
            .collect();
        if checkable.is_empty() || checkable.iter().any(|s| s.static_part != Some(Part::Pass)) {
            break;
        }
        reached = level.number();
    }
    reached
}

/// The required criteria of levels up to `level` whose static checks fail: what
/// contradicts a declared level.
pub fn contradictions(criteria: &[CriterionScore], level: Level) -> Vec<&'static str> {
    criteria
        .iter()
        .filter(|s| s.criterion.level <= level && s.criterion.required && s.static_part == Some(Part::Fail))
        .map(|s| s.criterion.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{CHECKS, CheckStatus};
    use crate::evidence::tests::record;

    fn passing_checks() -> Vec<CheckResult> {
        CHECKS
            .iter()
            .map(|d| CheckResult { id: d.id, status: CheckStatus::Pass, detail: String::new(), findings: Vec::new() })
            .collect()
    }

    fn located(criteria: &[&str], result: Outcome, fingerprint: Option<&str>, time: &str) -> Located {
        let mut r = record(criteria, result, fingerprint);
        r.time = time.into();
        Located { record: r, path: "results/evidence/mysql.jsonl".into(), line: 1 }
    }

    fn status_of(scores: &[CriterionScore], id: &str) -> Status {
        scores.iter().find(|s| s.criterion.id == id).unwrap().status
    }

    const FP: Option<&str> = Some("sha256:now");

    #[test]
    fn the_four_statuses() {
        let claims = ["L3.failover", "L3.backup", "L3.restore", "L3.switchover"];
        let evidence = [
            located(&["L3.failover"], Outcome::Passed, FP, "2026-11-29T10:00:00Z"),
            located(&["L3.backup", "L3.restore"], Outcome::Failed, FP, "2026-11-29T10:00:00Z"),
            located(&["L3.switchover"], Outcome::Passed, Some("sha256:before"), "2026-11-29T09:00:00Z"),
            located(&["L3.scaling"], Outcome::Passed, FP, "2026-11-29T10:00:00Z"),
        ];
        let s = score_criteria(&claims, &passing_checks(), &evidence, FP);
        assert_eq!(status_of(&s, "L3.failover"), Status::Confirmed);
        assert_eq!(status_of(&s, "L3.backup"), Status::Failed);
        assert_eq!(status_of(&s, "L3.restore"), Status::Failed);
        assert_eq!(status_of(&s, "L3.switchover"), Status::Unproven, "evidence about older code confirms nothing");
        assert_eq!(status_of(&s, "L3.scaling"), Status::NotClaimed, "evidence does not make a claim");
        assert_eq!(status_of(&s, "L3.pitr"), Status::NotClaimed);
        let switchover = s.iter().find(|x| x.criterion.id == "L3.switchover").unwrap();
        assert_eq!(switchover.reason, "no current e2e evidence (1 record is about other code)");
        let scaling = s.iter().find(|x| x.criterion.id == "L3.scaling").unwrap();
        assert!(scaling.reason.contains("does not claim"), "{}", scaling.reason);
    }

    #[test]
    fn a_current_failure_is_not_outvoted_by_a_pass() {
        let evidence = [
            located(&["L3.failover"], Outcome::Passed, FP, "2026-11-29T11:00:00Z"),
            located(&["L3.failover"], Outcome::Failed, FP, "2026-11-29T10:00:00Z"),
        ];
        let s = score_criteria(&["L3.failover"], &passing_checks(), &evidence, FP);
        assert_eq!(status_of(&s, "L3.failover"), Status::Failed);
        // A failure on older code does not count against the current code.
        let evidence = [
            located(&["L3.failover"], Outcome::Passed, FP, "2026-11-29T11:00:00Z"),
            located(&["L3.failover"], Outcome::Failed, Some("sha256:old"), "2026-11-29T10:00:00Z"),
        ];
        let s = score_criteria(&["L3.failover"], &passing_checks(), &evidence, FP);
        assert_eq!(status_of(&s, "L3.failover"), Status::Confirmed);
        let f = s.iter().find(|x| x.criterion.id == "L3.failover").unwrap();
        assert!(f.evidence[0].current && !f.evidence[1].current, "current records first");
    }

    #[test]
    fn records_without_fingerprint_or_without_a_current_fingerprint_never_confirm() {
        let evidence = [located(&["L3.failover"], Outcome::Passed, None, "2026-11-29T11:00:00Z")];
        let s = score_criteria(&["L3.failover"], &passing_checks(), &evidence, FP);
        assert_eq!(status_of(&s, "L3.failover"), Status::Unproven);
        let evidence = [located(&["L3.failover"], Outcome::Passed, FP, "2026-11-29T11:00:00Z")];
        let s = score_criteria(&["L3.failover"], &passing_checks(), &evidence, None);
        assert_eq!(status_of(&s, "L3.failover"), Status::Unproven);
    }

    #[test]
    fn both_parts_must_pass_for_criteria_verified_both_ways() {
        let evidence = [located(&["L1.install"], Outcome::Passed, FP, "2026-11-29T11:00:00Z")];
        let mut checks = passing_checks();
        let s = score_criteria(&["L1.install"], &checks, &[], FP);
        assert_eq!(status_of(&s, "L1.install"), Status::Unproven, "static alone is not enough");
        let s = score_criteria(&["L1.install"], &checks, &evidence, FP);
        assert_eq!(status_of(&s, "L1.install"), Status::Confirmed);
        checks.iter_mut().find(|c| c.id == "crd.status-subresource").unwrap().status = CheckStatus::Fail;
        let s = score_criteria(&["L1.install"], &checks, &evidence, FP);
        assert_eq!(status_of(&s, "L1.install"), Status::Failed, "a passing run does not excuse a failed check");
        checks.iter_mut().find(|c| c.id == "crd.status-subresource").unwrap().status = CheckStatus::NotAssessable;
        let s = score_criteria(&["L1.install"], &checks, &evidence, FP);
        assert_eq!(status_of(&s, "L1.install"), Status::Unproven);
    }

    /// Claims and current passing evidence for every required criterion of levels `1..=n`.
    fn confirmed_up_to(n: u8) -> (Vec<&'static str>, Vec<Located>) {
        let ids: Vec<&str> = CRITERIA.iter().filter(|c| c.required && c.level.number() <= n).map(|c| c.id).collect();
        let evidence = vec![located(&ids, Outcome::Passed, FP, "2026-11-29T11:00:00Z")];
        (ids, evidence)
    }

    #[test]
    fn the_level_is_the_highest_with_every_level_below_confirmed() {
        let (claims, evidence) = confirmed_up_to(4);
        let s = score_criteria(&claims, &passing_checks(), &evidence, FP);
        let levels = score_levels(&s);
        assert_eq!(overall_level(&levels), 4);
        assert_eq!(levels[4].status, LevelStatus::NotClaimed);
        // Optional criteria do not gate a level.
        assert_eq!(status_of(&s, "L3.pitr"), Status::NotClaimed);
        assert_eq!(levels[2].status, LevelStatus::Confirmed);

        // Levels are independent in the per-level view: without L2.adoption the operator is
        // at level 1, while levels 3 and 4 still show confirmed.
        let claims: Vec<&str> = claims.into_iter().filter(|id| *id != "L2.adoption").collect();
        let s = score_criteria(&claims, &passing_checks(), &evidence, FP);
        let levels = score_levels(&s);
        assert_eq!(overall_level(&levels), 1);
        assert_eq!(
            levels.iter().map(|l| l.status).collect::<Vec<_>>(),
            [
                LevelStatus::Confirmed,
                LevelStatus::Partial,
                LevelStatus::Confirmed,
                LevelStatus::Confirmed,
                LevelStatus::NotClaimed
            ]
        );
        assert_eq!((levels[1].required, levels[1].claimed, levels[1].confirmed), (5, 4, 4));
    }

    /// A level whose claims are all unproven is not "Partial": nothing of it is confirmed.
    #[test]
    fn a_level_with_nothing_confirmed_is_unproven() {
        let s = score_criteria(&["L2.adoption", "L2.rolling-restart"], &passing_checks(), &[], FP);
        let levels = score_levels(&s);
        assert_eq!(levels[1].status, LevelStatus::Unproven);
        assert_eq!(levels[1].status.label(), "Unproven");
    }

    #[test]
    fn nothing_claimed_is_level_zero() {
        let s = score_criteria(&[], &passing_checks(), &[], FP);
        let levels = score_levels(&s);
        assert_eq!(overall_level(&levels), 0);
        assert!(levels.iter().all(|l| l.status == LevelStatus::NotClaimed));
    }

    #[test]
    fn a_failed_criterion_fails_its_level() {
        let (claims, mut evidence) = confirmed_up_to(3);
        evidence.push(located(&["L3.backup"], Outcome::Failed, FP, "2026-11-29T12:00:00Z"));
        let levels = score_levels(&score_criteria(&claims, &passing_checks(), &evidence, FP));
        assert_eq!(levels[2].status, LevelStatus::Failed);
        assert_eq!(overall_level(&levels), 2);
    }

    #[test]
    fn static_level_and_contradictions() {
        let all: Vec<&str> = CRITERIA.iter().map(|c| c.id).collect();
        let mut checks = passing_checks();
        let s = score_criteria(&all, &checks, &[], FP);
        assert_eq!(static_level(&s), 1, "level 2 cannot be shown by manifests");
        checks.iter_mut().find(|c| c.id == "operand.pdb").unwrap().status = CheckStatus::Fail;
        checks.iter_mut().find(|c| c.id == "rbac.no-wildcards").unwrap().status = CheckStatus::Fail;
        let s = score_criteria(&all, &checks, &[], FP);
        assert_eq!(static_level(&s), 0);
        assert_eq!(contradictions(&s, Level::FullLifecycle), ["L1.rbac", "L3.pdb"]);
        assert_eq!(contradictions(&s, Level::BasicInstall), ["L1.rbac"]);
    }

    #[test]
    fn unknown_claims_are_refused() {
        let err = validate_claims("statecraft-x", &["L1.install", "L9.magic"]).unwrap_err().to_string();
        assert_eq!(err, "statecraft-x claims unknown criterion \"L9.magic\" (see `statecraft-capability criteria`)");
        assert_eq!(
            validate_claims("x", &["L3.backup", "L1.install", "L3.backup"]).unwrap(),
            ["L1.install", "L3.backup"]
        );
    }
}
