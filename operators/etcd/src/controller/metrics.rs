//! Per-cluster and per-member metrics of the etcd clusters, from what the per-cluster task
//! observes each pass (membership and member status over the etcd API) and from the
//! abnormality detector. They need no access to the members' own `/metrics`, so they work
//! where Prometheus cannot scrape the members. Registered on the operator's `/metrics`
//! with the `statecraft_etcd_` prefix.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use statecraft_shared::metrics::{BackupMetrics, ClusterFamily, PhaseGauge};
use statecraft_shared::reason::Reason;

use crate::build::Names;
use crate::insight::{Abnormality, Kind};
use crate::membership::{Alarm, Member, Observed};

/// Every phase `status.phase` can take, so that exactly one `cluster_phase` series is 1.
pub const PHASES: [&str; 7] = ["Bootstrapping", "Healthy", "Scaling", "Upgrading", "Degraded", "QuorumLost", "Paused"];

/// Every alarm, so that each member has a 0 series of those not raised.
const ALARMS: [Alarm; 2] = [Alarm::NoSpace, Alarm::Corrupt];

/// The `alarm` label value: etcd's own name of the alarm.
fn alarm_label(alarm: Alarm) -> &'static str {
    match alarm {
        Alarm::NoSpace => "NOSPACE",
        Alarm::Corrupt => "CORRUPT",
    }
}

/// What the metrics remember of a cluster between passes.
#[derive(Default)]
struct Memory {
    /// The last leader observed, to count leader changes.
    leader: Option<u64>,
    /// Member names of the last pass with a membership, to mark them down when none answers.
    members: BTreeSet<String>,
}

/// The gauges and counters of the etcd clusters.
pub struct EtcdMetrics {
    up: ClusterFamily<IntGaugeVec>,
    leader: ClusterFamily<IntGaugeVec>,
    learner: ClusterFamily<IntGaugeVec>,
    db_size: ClusterFamily<IntGaugeVec>,
    db_size_in_use: ClusterFamily<IntGaugeVec>,
    raft_index: ClusterFamily<IntGaugeVec>,
    alarm: ClusterFamily<IntGaugeVec>,
    abnormal: ClusterFamily<IntGaugeVec>,
    voting: ClusterFamily<IntGaugeVec>,
    healthy_voting: ClusterFamily<IntGaugeVec>,
    quorum: ClusterFamily<IntGaugeVec>,
    has_leader: ClusterFamily<IntGaugeVec>,
    leader_changes: ClusterFamily<IntCounterVec>,
    phase: PhaseGauge,
    steps: ClusterFamily<IntCounterVec>,
    backups: BackupMetrics,
    memory: Mutex<HashMap<String, Memory>>,
}

impl EtcdMetrics {
    /// Creates the metrics and registers them on `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            ClusterFamily::register(registry, IntGaugeVec::new(Opts::new(name, help), labels)?)
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            ClusterFamily::register(registry, IntCounterVec::new(Opts::new(name, help), labels)?)
        };
        let member = ["cluster", "member"];
        let cluster = ["cluster"];
        Ok(EtcdMetrics {
            up: gauge("member_up", "1 when the member answered its status request in the last pass.", &member)?,
            leader: gauge("member_leader", "1 for the member that leads, as last observed.", &member)?,
            learner: gauge("member_learner", "1 while the member is a learner (not voting).", &member)?,
            db_size: gauge("member_db_size_bytes", "Size of the member's database file.", &member)?,
            db_size_in_use: gauge(
                "member_db_size_in_use_bytes",
                "Bytes of the member's database file in use; the rest is what defragmentation returns.",
                &member,
            )?,
            raft_index: gauge("member_raft_index", "The member's raft index (last log entry).", &member)?,
            alarm: gauge(
                "member_alarm",
                "1 while the alarm is raised on the member.",
                &["cluster", "member", "alarm"],
            )?,
            abnormal: gauge(
                "member_abnormal",
                "1 while the operator's abnormality detector finds the member abnormal, by kind.",
                &["cluster", "member", "kind"],
            )?,
            voting: gauge("voting_members", "Voting members in etcd's membership.", &cluster)?,
            healthy_voting: gauge(
                "healthy_voting_members",
                "Voting members that answered their status request and report no alarm.",
                &cluster,
            )?,
            quorum: gauge("quorum", "1 when a majority of the voting members answered.", &cluster)?,
            has_leader: gauge("has_leader", "1 when the cluster has a leader, as last observed.", &cluster)?,
            leader_changes: counter(
                "leader_changes_total",
                "Changes of the leader seen by the operator between its passes.",
                &cluster,
            )?,
            phase: PhaseGauge::register(registry, "cluster_phase", "1 for the cluster's current phase.", &PHASES)?,
            steps: counter(
                "operations_total",
                "Membership and maintenance steps performed, by operation (the step) and result.",
                &["cluster", "operation", "result"],
            )?,
            backups: BackupMetrics::register(registry)?,
            memory: Mutex::default(),
        })
    }

    /// Records one pass's observation of `cluster` (its `names`), with the leader the task
    /// settled on. Members no longer in the membership lose their series, so they stop
    /// alerting; when no member answered at all, the members last known are marked down.
    pub fn observe(&self, cluster: &str, names: &Names, observed: &Observed, leader_id: Option<u64>) {
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        let memory = memory.entry(cluster.to_string()).or_default();
        if let (Some(before), Some(now)) = (memory.leader, leader_id)
            && before != now
        {
            self.leader_changes.with(&[cluster]).inc();
        } else {
            // Creates the series at 0, so that increase() sees the first change.
            self.leader_changes.with(&[cluster]);
        }
        memory.leader = leader_id.or(memory.leader);
        self.has_leader.with(&[cluster]).set(i64::from(leader_id.is_some()));

        let Some(members) = &observed.members else {
            for member in &memory.members {
                self.member_down(cluster, member);
            }
            self.healthy_voting.with(&[cluster]).set(0);
            self.quorum.with(&[cluster]).set(0);
            return;
        };
        memory.members = members.iter().map(|m| member_name(names, m)).collect();
        let current = &memory.members;
        for family in self.member_families() {
            family.retain(cluster, |labels| labels.get(1).is_some_and(|m| current.contains(m)));
        }

        let (mut voting, mut answered, mut healthy) = (0, 0, 0);
        for m in members {
            let name = member_name(names, m);
            let labels = [cluster, name.as_str()];
            let state = observed.states.get(&m.id);
            let alarms = observed.alarms.get(&m.id);
            self.up.with(&labels).set(i64::from(state.is_some()));
            self.leader.with(&labels).set(i64::from(leader_id == Some(m.id)));
            self.learner.with(&labels).set(i64::from(m.is_learner));
            for alarm in ALARMS {
                let raised = alarms.is_some_and(|a| a.contains(&alarm));
                self.alarm.with(&[cluster, name.as_str(), alarm_label(alarm)]).set(i64::from(raised));
            }
            match state {
                Some(s) => {
                    self.db_size.with(&labels).set(s.db_size);
                    self.db_size_in_use.with(&labels).set(s.db_size_in_use);
                    self.raft_index.with(&labels).set(i64::try_from(s.raft_index).unwrap_or(i64::MAX));
                }
                None => self.forget_state(&labels),
            }
            if !m.is_learner {
                voting += 1;
                if let Some(s) = state {
                    answered += 1;
                    if alarms.is_none_or(BTreeSet::is_empty) && s.errors.is_empty() {
                        healthy += 1;
                    }
                }
            }
        }
        self.voting.with(&[cluster]).set(voting);
        self.healthy_voting.with(&[cluster]).set(healthy);
        self.quorum.with(&[cluster]).set(i64::from(voting > 0 && answered * 2 > voting));
    }

    /// Marks a member down whose status is unknown: not up, not leading, no figures.
    fn member_down(&self, cluster: &str, member: &str) {
        let labels = [cluster, member];
        self.up.with(&labels).set(0);
        self.leader.with(&labels).set(0);
        self.forget_state(&labels);
    }

    /// Stops exporting the figures of a member's status, unknown this pass.
    fn forget_state(&self, labels: &[&str; 2]) {
        for family in [&self.db_size, &self.db_size_in_use, &self.raft_index] {
            family.remove(labels);
        }
    }

    /// Every family labelled by member (second label).
    fn member_families(&self) -> [&ClusterFamily<IntGaugeVec>; 8] {
        [
            &self.up,
            &self.leader,
            &self.learner,
            &self.db_size,
            &self.db_size_in_use,
            &self.raft_index,
            &self.alarm,
            &self.abnormal,
        ]
    }

    /// Records the cluster's phase (one of [`PHASES`]).
    pub fn set_phase(&self, cluster: &str, phase: &str) {
        self.phase.set(cluster, phase);
        self.backups.watch(cluster);
    }

    /// Counts a step performed on the cluster, by its reason (the planner's
    /// `Step::reason()`: `AddLearner`, `Promote`, `RemoveMember`, `ReplaceMember`,
    /// `Defragment`, `RecoverNoSpace`, `MoveLeader`, ...; waits are not steps) and whether it
    /// succeeded.
    pub fn record_step(&self, cluster: &str, step: Reason, succeeded: bool) {
        self.steps.with(&[cluster, step.as_str(), if succeeded { "success" } else { "error" }]).inc();
    }

    /// Counts a backup of `cluster` that finished while this process watched; a successful
    /// one completed at `completion_unix_seconds` also becomes the newest success if it is.
    pub fn record_backup(&self, cluster: &str, succeeded: bool, completion_unix_seconds: i64) {
        self.backups.finished(cluster, succeeded);
        if succeeded {
            self.backups.succeeded(cluster, completion_unix_seconds);
        }
    }

    /// Records a successful backup found rather than watched (e.g. the existing EtcdBackups
    /// after a restart), without counting it: keeps the backup age right across restarts.
    pub fn backup_seen(&self, cluster: &str, completion_unix_seconds: i64) {
        self.backups.succeeded(cluster, completion_unix_seconds);
    }

    /// Records whether abnormality `kind` is active on `member`.
    pub fn set_abnormal(&self, cluster: &str, member: &str, kind: Kind, active: bool) {
        self.abnormal.with(&[cluster, member, kind.reason().into()]).set(i64::from(active));
    }

    /// Records the abnormalities the detector returned for `member`: those found are 1,
    /// every other kind 0.
    pub fn set_abnormalities(&self, cluster: &str, member: &str, found: &[Abnormality]) {
        for kind in Kind::ALL {
            self.set_abnormal(cluster, member, kind, found.iter().any(|a| a.kind == kind));
        }
    }

    /// Drops every series of a deleted cluster, so it stops alerting.
    pub fn forget(&self, cluster: &str) {
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).remove(cluster);
        for family in self.member_families() {
            family.forget(cluster);
        }
        for family in [&self.voting, &self.healthy_voting, &self.quorum, &self.has_leader] {
            family.forget(cluster);
        }
        self.leader_changes.forget(cluster);
        self.phase.forget(cluster);
        self.steps.forget(cluster);
        self.backups.forget(cluster);
    }
}

/// The member's label: its pod name (also its etcd name) when it is one of this cluster's,
/// else the name etcd knows, else its id in hex (a foreign member that never started).
fn member_name(names: &Names, m: &Member) -> String {
    match m.ordinal {
        Some(ordinal) => names.member(ordinal),
        None if m.started() => m.name.clone(),
        None => format!("{:x}", m.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::membership::MemberState;
    use crate::reason::Etcd;
    use prometheus::{Encoder, TextEncoder};

    fn render(registry: &Registry) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut buf).expect("encodable");
        String::from_utf8(buf).expect("UTF-8")
    }

    fn assert_lines(text: &str, lines: &[&str]) {
        for line in lines {
            assert!(text.contains(&format!("statecraft_etcd_{line}\n")), "missing {line} in\n{text}");
        }
    }

    fn member(names: &Names, id: u64, ordinal: u32, learner: bool) -> Member {
        Member {
            id,
            ordinal: Some(ordinal),
            name: names.member(ordinal),
            peer_urls: vec![names.peer_url(ordinal)],
            is_learner: learner,
        }
    }

    fn state(id: u64, leader: u64) -> MemberState {
        MemberState {
            id,
            leader,
            raft_index: 42 + id,
            db_size: 4096 * i64::try_from(id).expect("small id"),
            db_size_in_use: 2048,
            ..Default::default()
        }
    }

    /// Three voters (1 leads, 2 has NOSPACE, 3 silent), a learner (4) and a foreign member.
    fn observed(names: &Names) -> Observed {
        let foreign = Member { id: 0xabc, ordinal: None, name: String::new(), peer_urls: vec![], is_learner: true };
        let mut o = Observed {
            members: Some(vec![
                member(names, 1, 0, false),
                member(names, 2, 1, false),
                member(names, 3, 2, false),
                member(names, 4, 3, true),
                foreign,
            ]),
            ..Default::default()
        };
        for id in [1, 2, 4] {
            o.states.insert(id, state(id, 1));
        }
        o.alarms.insert(2, [Alarm::NoSpace].into());
        o
    }

    #[test]
    fn a_pass_becomes_member_and_cluster_series() {
        let registry = Registry::new_custom(Some("statecraft_etcd".into()), None).expect("registry");
        let m = EtcdMetrics::register(&registry).expect("metrics");
        let names = Names::new("main", "prod");
        m.observe("main", &names, &observed(&names), Some(1));
        m.set_phase("main", "Degraded");
        m.record_step("main", Etcd::Promote.into(), true);
        m.record_step("main", Etcd::Defragment.into(), false);
        m.record_backup("main", true, 200);
        m.record_backup("main", false, 300);
        m.backup_seen("main", 100);
        m.set_abnormalities(
            "main",
            "main-1",
            &[Abnormality { member: "main-1".into(), kind: Kind::SlowDisk, message: String::new(), new: true }],
        );
        assert_lines(
            &render(&registry),
            &[
                r#"member_up{cluster="main",member="main-0"} 1"#,
                r#"member_up{cluster="main",member="main-2"} 0"#,
                r#"member_up{cluster="main",member="abc"} 0"#,
                r#"member_leader{cluster="main",member="main-0"} 1"#,
                r#"member_leader{cluster="main",member="main-1"} 0"#,
                r#"member_learner{cluster="main",member="main-3"} 1"#,
                r#"member_learner{cluster="main",member="main-0"} 0"#,
                r#"member_db_size_bytes{cluster="main",member="main-1"} 8192"#,
                r#"member_db_size_in_use_bytes{cluster="main",member="main-1"} 2048"#,
                r#"member_raft_index{cluster="main",member="main-3"} 46"#,
                r#"member_alarm{alarm="NOSPACE",cluster="main",member="main-1"} 1"#,
                r#"member_alarm{alarm="CORRUPT",cluster="main",member="main-1"} 0"#,
                r#"member_alarm{alarm="NOSPACE",cluster="main",member="main-0"} 0"#,
                r#"member_abnormal{cluster="main",kind="SlowDisk",member="main-1"} 1"#,
                r#"member_abnormal{cluster="main",kind="FrequentLeaderChanges",member="main-1"} 0"#,
                r#"voting_members{cluster="main"} 3"#,
                r#"healthy_voting_members{cluster="main"} 1"#,
                r#"quorum{cluster="main"} 1"#,
                r#"has_leader{cluster="main"} 1"#,
                r#"leader_changes_total{cluster="main"} 0"#,
                r#"cluster_phase{cluster="main",phase="Degraded"} 1"#,
                r#"cluster_phase{cluster="main",phase="Healthy"} 0"#,
                r#"operations_total{cluster="main",operation="Promote",result="success"} 1"#,
                r#"operations_total{cluster="main",operation="Defragment",result="error"} 1"#,
                r#"backups_total{cluster="main",result="success"} 1"#,
                r#"backups_total{cluster="main",result="failure"} 1"#,
                r#"backup_last_success_timestamp_seconds{cluster="main"} 200"#,
            ],
        );
        let text = render(&registry);
        assert!(!text.contains(r#"member_db_size_bytes{cluster="main",member="main-2"}"#), "silent member has a size");
    }

    #[test]
    fn leader_changes_quorum_loss_scale_down_and_forget() {
        let registry = Registry::new_custom(Some("statecraft_etcd".into()), None).expect("registry");
        let m = EtcdMetrics::register(&registry).expect("metrics");
        let names = Names::new("main", "prod");
        let mut o = observed(&names);
        // 1 leads, none, 1 again, 2: one change (the gap hides whether it changed).
        for leader in [Some(1), None, Some(1), Some(2)] {
            m.observe("main", &names, &o, leader);
        }
        assert_lines(&render(&registry), &[r#"leader_changes_total{cluster="main"} 1"#]);

        // Only one voter of three answers: no quorum, no leader.
        o.states.remove(&2);
        m.observe("main", &names, &o, None);
        assert_lines(&render(&registry), &[r#"quorum{cluster="main"} 0"#, r#"has_leader{cluster="main"} 0"#]);

        // Nobody answers: the members last known are down and lose their figures.
        m.observe("main", &names, &Observed::default(), None);
        let text = render(&registry);
        assert_lines(
            &text,
            &[r#"member_up{cluster="main",member="main-0"} 0"#, r#"healthy_voting_members{cluster="main"} 0"#],
        );
        assert!(!text.contains("member_db_size_bytes{"), "{text}");

        // Scaled down to member 0: the others' series are gone.
        o = observed(&names);
        o.members.as_mut().expect("members").truncate(1);
        m.observe("main", &names, &o, Some(1));
        let text = render(&registry);
        assert!(!text.contains(r#"member="main-1""#), "{text}");
        assert!(!text.contains(r#"member="abc""#), "{text}");
        assert_lines(&text, &[r#"voting_members{cluster="main"} 1"#, r#"quorum{cluster="main"} 1"#]);

        m.set_phase("main", "Healthy");
        m.record_step("main", Etcd::RemoveMember.into(), true);
        m.record_backup("main", true, 1);
        m.forget("main");
        let text = render(&registry);
        assert!(!text.contains(r#"cluster="main""#), "{text}");
    }
}
