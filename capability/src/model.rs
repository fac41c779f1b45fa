//! The five-level Operator Capability model as data: levels, and criteria with stable ids.
//!
//! The levels are the Operator SDK's ("Operator Capability Levels"); each is broken into
//! criteria that can be checked one by one, following the criteria in
//! `shared/research/capability-and-kube-rs.md`. An id (`L3.backup`) never changes meaning
//! once published: operators claim ids, e2e tests record evidence under ids, and reports
//! are compared over time by id. A criterion that is retired keeps its id reserved.
//!
//! Each criterion says how it is verified: by static checks of what the operator ships
//! (CRDs, RBAC, Deployment, objects built for a sample resource, alert rules), by evidence
//! from e2e tests on a real cluster, or both (then both must pass). Static checks can show
//! that something is *shipped*; only a run can show that it *works*.

use std::fmt;

use serde::Serialize;

/// A capability level, 1 (Basic Install) to 5 (Auto Pilot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "u8")]
pub enum Level {
    /// Installs and configures the operand, reports its readiness.
    BasicInstall = 1,
    /// Upgrades the operand (and itself) without disrupting it.
    SeamlessUpgrades = 2,
    /// Backup, restore, failover, scaling, reconfiguration.
    FullLifecycle = 3,
    /// Metrics, alerts with runbooks, Events.
    DeepInsights = 4,
    /// Auto-scaling, auto-healing, auto-tuning, abnormality detection.
    AutoPilot = 5,
}

impl From<Level> for u8 {
    fn from(l: Level) -> u8 {
        l as u8
    }
}

impl Level {
    /// All levels, lowest first.
    pub const ALL: [Level; 5] =
        [Level::BasicInstall, Level::SeamlessUpgrades, Level::FullLifecycle, Level::DeepInsights, Level::AutoPilot];

    /// The level numbered `n` (1..=5).
    pub fn from_number(n: u8) -> Option<Level> {
        Level::ALL.get(usize::from(n).checked_sub(1)?).copied()
    }

    /// The level's number, 1..=5.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The level's name, which is also the value OperatorHub's CSV annotation
    /// `metadata.annotations.capabilities` takes for it.
    pub fn name(self) -> &'static str {
        match self {
            Level::BasicInstall => "Basic Install",
            Level::SeamlessUpgrades => "Seamless Upgrades",
            Level::FullLifecycle => "Full Lifecycle",
            Level::DeepInsights => "Deep Insights",
            Level::AutoPilot => "Auto Pilot",
        }
    }

    /// The level an OperatorHub `capabilities` annotation value names (exact spelling, as
    /// OperatorHub's validation requires, but ignoring case and surrounding space).
    pub fn from_operatorhub(value: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name().eq_ignore_ascii_case(value.trim()))
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{} {}", self.number(), self.name())
    }
}

/// How a criterion is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verification {
    /// Static checks of what the operator ships.
    Static,
    /// Evidence from e2e tests on a real cluster.
    E2e,
    /// Both: static checks pass and an e2e test proved it.
    Both,
}

impl Verification {
    /// Whether static checks are part of the verification.
    pub fn has_static(self) -> bool {
        matches!(self, Verification::Static | Verification::Both)
    }
    /// Whether e2e evidence is part of the verification.
    pub fn has_e2e(self) -> bool {
        matches!(self, Verification::E2e | Verification::Both)
    }
    /// Short label: `static`, `e2e`, `static+e2e`.
    pub fn label(self) -> &'static str {
        match self {
            Verification::Static => "static",
            Verification::E2e => "e2e",
            Verification::Both => "static+e2e",
        }
    }
}

/// One criterion of a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Criterion {
    /// Stable id, `L<level>.<name>`.
    pub id: &'static str,
    /// The level it belongs to.
    pub level: Level,
    /// One line: what is required.
    pub title: &'static str,
    /// What exactly counts, and what proves it.
    pub description: &'static str,
    /// How it is verified.
    pub verification: Verification,
    /// Whether the level needs it. Optional criteria are reported but do not decide the
    /// level: they go beyond the model's own text (a dashboard, point-in-time recovery).
    pub required: bool,
}

use Level::*;
use Verification::{Both, E2e, Static};

const fn c(
    id: &'static str,
    level: Level,
    verification: Verification,
    required: bool,
    title: &'static str,
    description: &'static str,
) -> Criterion {
    Criterion { id, level, title, description, verification, required }
}

/// The model: every criterion, by level. Required criteria are the model's own text plus
/// the install hygiene Statecraft holds every operator to (least-privilege RBAC, a
/// locked-down operator Deployment, operand pods without privileges).
pub const CRITERIA: &[Criterion] = &[
    // Level 1: Basic Install.
    c(
        "L1.install",
        BasicInstall,
        Both,
        true,
        "Installs the operand from a custom resource and reports its readiness in status",
        "The operator creates the operand from a CR, waits until it is healthy and says so in the CR's status. \
         Static: every CRD has a status subresource and the operator builds a workload for a sample CR. \
         E2e: a CR on a real cluster becomes Ready.",
    ),
    c(
        "L1.crds",
        BasicInstall,
        Static,
        true,
        "CRDs are documented: structural schema, a description on every field, printer columns",
        "Every CRD version has a structural OpenAPI schema (a type on every node), a description on every \
         field below spec and status (what `kubectl explain` shows) and printer columns for `kubectl get`.",
    ),
    c(
        "L1.validation",
        BasicInstall,
        Both,
        true,
        "Invalid specs are refused, naming the field",
        "Static: the CRD schemas carry constraints (CEL rules, enums, patterns, bounds). E2e: invalid specs are \
         refused by the API server, or reported in status with a reason, and nothing running is harmed.",
    ),
    c(
        "L1.operand-image",
        BasicInstall,
        Static,
        true,
        "The operand's image can be overridden in the CR",
        "Some CRD's spec has a string field `image` (for mirrors, patched builds, air-gapped clusters).",
    ),
    c(
        "L1.config",
        BasicInstall,
        E2e,
        true,
        "All configuration is in the CR's spec; changes are reconciled and reflected in status",
        "E2e: a change to the spec reaches the operand and the status shows it was observed.",
    ),
    c(
        "L1.rbac",
        BasicInstall,
        Static,
        true,
        "The operator's RBAC is namespaced and least-privilege",
        "The operator's own rights are a Role, not a ClusterRole (aggregated user roles excepted), and no \
         rule uses `*` in API groups, resources or verbs.",
    ),
    c(
        "L1.operator-deployment",
        BasicInstall,
        Static,
        true,
        "The operator's Deployment is locked down and uses leader election",
        "Leader election (Lease rights and the flag or variable that turns it on), non-root, read-only root \
         filesystem, no privilege escalation with all capabilities dropped, liveness and readiness probes, \
         CPU and memory requests and a memory limit.",
    ),
    c(
        "L1.operand-security",
        BasicInstall,
        Static,
        true,
        "The operand's pods run without privileges",
        "In the objects built for a sample CR: non-root, no privilege escalation, all capabilities dropped, \
         the runtime's default (or a local) seccomp profile.",
    ),
    // Level 2: Seamless Upgrades.
    c(
        "L2.operand-upgrade",
        SeamlessUpgrades,
        E2e,
        true,
        "Changing the operand's version in the CR upgrades it without an outage",
        "E2e: a version change rolls through the members in an order that keeps the operand available.",
    ),
    c(
        "L2.rolling-restart",
        SeamlessUpgrades,
        E2e,
        true,
        "Changes that need a restart roll member by member, leader last, downtime visible",
        "E2e: replicas/followers restart one at a time, each back and caught up before the next; the \
         leader/primary last after a handover; the status shows progress; no acknowledged write is lost.",
    ),
    c(
        "L2.version-checks",
        SeamlessUpgrades,
        E2e,
        true,
        "Unsupported versions and downgrades are refused and reported in status",
        "E2e: a CR asking for an unsupported version or a downgrade is refused with a reason in status, and \
         the running operand is left alone.",
    ),
    c(
        "L2.adoption",
        SeamlessUpgrades,
        E2e,
        true,
        "Takes over operands an older operator version deployed",
        "E2e: an operand created by the previous release of the operator is adopted by the new one without \
         a restart or data loss.",
    ),
    c(
        "L2.operator-upgrade",
        SeamlessUpgrades,
        E2e,
        true,
        "The operator itself upgrades without disrupting its operands",
        "E2e: replacing the operator's Deployment (new image) while an operand serves traffic causes no \
         restart of the operand and no failed request.",
    ),
    // Level 3: Full Lifecycle.
    c(
        "L3.backup",
        FullLifecycle,
        E2e,
        true,
        "Backs up the operand on request",
        "E2e: a backup resource produces a consistent backup in external storage, with its location, size, \
         checksum and position in status.",
    ),
    c(
        "L3.restore",
        FullLifecycle,
        E2e,
        true,
        "Restores a backup",
        "E2e: a restore resource brings the data of a backup back (into a new operand) identical to the \
         source.",
    ),
    c(
        "L3.failover",
        FullLifecycle,
        E2e,
        true,
        "Fails over when the leader/primary member is lost",
        "E2e: the primary is killed while a client writes; another member takes over and every acknowledged \
         write is still there. The time to the first write after the kill is a measured figure.",
    ),
    c(
        "L3.switchover",
        FullLifecycle,
        E2e,
        true,
        "Fails back: moves the leader/primary on request",
        "E2e: a planned switchover moves the primary with a short write pause and no lost write; the old \
         primary follows the new one.",
    ),
    c(
        "L3.scaling",
        FullLifecycle,
        E2e,
        true,
        "Adds and removes members, application-aware",
        "E2e: scaling up seeds new members with the data and joins them; scaling down removes members from \
         the application's membership first; nothing is lost.",
    ),
    c(
        "L3.reconfiguration",
        FullLifecycle,
        E2e,
        true,
        "Complex reconfiguration is applied safely",
        "E2e: a configuration change that needs a restart or a membership change is applied member by member \
         without losing data.",
    ),
    c(
        "L3.probes",
        FullLifecycle,
        Static,
        true,
        "The operand's containers have liveness and readiness probes",
        "In the objects built for a sample CR, every (non-init) container of every workload has both probes.",
    ),
    c(
        "L3.resources",
        FullLifecycle,
        Static,
        true,
        "The operand's containers have resource requests and limits",
        "In the objects built for a sample CR (which sets resources, as production CRs do), every container \
         has CPU and memory requests and a memory limit.",
    ),
    c(
        "L3.pdb",
        FullLifecycle,
        Static,
        true,
        "A PodDisruptionBudget covers every workload",
        "In the objects built for a sample CR, a PodDisruptionBudget's selector matches each workload's pods, \
         so node drains take members one at a time.",
    ),
    c(
        "L3.spread",
        FullLifecycle,
        Static,
        true,
        "Members are spread over nodes",
        "In the objects built for a sample CR, every workload's pods have pod anti-affinity or topology \
         spread constraints.",
    ),
    c(
        "L3.scheduled-backup",
        FullLifecycle,
        E2e,
        false,
        "Backs up on a schedule and applies a retention policy",
        "E2e: backups run on the CR's schedule and old ones are deleted by the retention policy.",
    ),
    c(
        "L3.pitr",
        FullLifecycle,
        E2e,
        false,
        "Point-in-time recovery",
        "E2e: a restore to a point in time between two backups (from the backup plus the change log) has \
         exactly the data of that time.",
    ),
    c(
        "L3.volume-expansion",
        FullLifecycle,
        E2e,
        false,
        "Grows the operand's storage",
        "E2e: a larger storage size in the CR grows every member's volume while the members run (no restart \
         where the storage grows online) and no write fails; a size the storage cannot take, or a smaller one, \
         is refused with the reason and changes nothing.",
    ),
    // Level 4: Deep Insights.
    c(
        "L4.metrics",
        DeepInsights,
        Both,
        true,
        "Metrics of the operator and of the operand's health and performance",
        "Static: the operator's pods expose a metrics port (or a PodMonitor/ServiceMonitor ships). E2e: the \
         metrics are served, including per-member health of the operand and the operator's RED metrics.",
    ),
    c(
        "L4.alerts",
        DeepInsights,
        Static,
        true,
        "Alert rules with severities and runbooks",
        "A PrometheusRule ships; every alert has a `severity` label (critical, warning or info) and a \
         `runbook_url` annotation, and runbooks in the repository exist.",
    ),
    c(
        "L4.events",
        DeepInsights,
        Both,
        true,
        "Operations emit Kubernetes Events on the custom resources",
        "Static: the operator may create Events. E2e: operations (failover, backup, errors) leave Events on \
         the CR.",
    ),
    c(
        "L4.dashboard",
        DeepInsights,
        Static,
        false,
        "A dashboard ships",
        "A Grafana dashboard (JSON with panels) ships with the operator.",
    ),
    // Level 5: Auto Pilot.
    c(
        "L5.auto-scaling",
        AutoPilot,
        E2e,
        true,
        "Scales up and down on the operand's metrics",
        "E2e: load drives the member count up and its end drives it back down, without manual changes.",
    ),
    c(
        "L5.auto-healing",
        AutoPilot,
        E2e,
        true,
        "Repairs unhealthy members and prevents unhealthy states",
        "E2e: a member with broken data (e.g. a replica that diverged) is detected and rebuilt without a \
         human.",
    ),
    c(
        "L5.auto-tuning",
        AutoPilot,
        E2e,
        true,
        "Tunes the operand to its workload",
        "E2e: settings follow the workload (e.g. buffer sizes to the memory given) and the change is measured.",
    ),
    c(
        "L5.abnormality-detection",
        AutoPilot,
        E2e,
        true,
        "Detects abnormal behaviour against a performance profile",
        "E2e: a slowed-down member is flagged against its normal profile.",
    ),
];

/// The criteria that are Statecraft's own production bar rather than the model's text
/// (least-privilege RBAC, a locked-down operator Deployment, unprivileged operand pods,
/// members spread over nodes). Statecraft's operators are held to them like to any other
/// criterion; `assess` judges third-party bundles on them separately, as hygiene, so that
/// being below that bar is not mistaken for a false capability claim.
pub const HYGIENE_CRITERIA: &[&str] = &["L1.rbac", "L1.operator-deployment", "L1.operand-security", "L3.spread"];

/// The criterion with `id`.
pub fn criterion(id: &str) -> Option<&'static Criterion> {
    CRITERIA.iter().find(|c| c.id == id)
}

/// The criteria of `level`, in model order.
pub fn criteria_of(level: Level) -> impl Iterator<Item = &'static Criterion> {
    CRITERIA.iter().filter(move |c| c.level == level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_well_formed_and_name_their_level() {
        let mut seen = HashSet::new();
        for c in CRITERIA {
            assert!(seen.insert(c.id), "duplicate id {}", c.id);
            let (prefix, name) = c.id.split_once('.').expect("L<n>.<name>");
            assert_eq!(prefix, format!("L{}", c.level.number()), "{}", c.id);
            assert!(
                !name.is_empty() && name.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-'),
                "kebab-case name: {}",
                c.id
            );
            assert!(!c.title.is_empty() && !c.description.is_empty());
        }
    }

    #[test]
    fn hygiene_criteria_exist_and_are_static() {
        for id in HYGIENE_CRITERIA {
            let c = criterion(id).unwrap_or_else(|| panic!("{id}"));
            assert_eq!(c.verification, Verification::Static, "{id}: a run is never needed for hygiene");
        }
    }

    #[test]
    fn every_level_has_required_criteria() {
        for level in Level::ALL {
            assert!(criteria_of(level).any(|c| c.required), "{level}");
        }
    }

    #[test]
    fn operatorhub_names_round_trip() {
        for level in Level::ALL {
            assert_eq!(Level::from_operatorhub(level.name()), Some(level));
            assert_eq!(Level::from_number(level.number()), Some(level));
        }
        assert_eq!(Level::from_operatorhub(" full lifecycle "), Some(Level::FullLifecycle));
        assert_eq!(Level::from_operatorhub("Level 3"), None);
        assert_eq!(Level::from_number(0), None);
        assert_eq!(Level::from_number(6), None);
    }

    /// The ids the e2e suite already records under must stay in the model.
    #[test]
    fn ids_used_by_the_e2e_suite_exist() {
        for id in [
            "L1.install",
            "L1.validation",
            "L2.rolling-restart",
            "L3.failover",
            "L3.switchover",
            "L3.scaling",
            "L3.backup",
            "L3.restore",
            "L4.metrics",
        ] {
            assert!(criterion(id).is_some(), "{id}");
        }
    }
}
