//! Rolling a new StatefulSet revision (version, image or configuration change) with the
//! shared upgrade engine: replicas first, one at a time, each back and caught up before the
//! next; then a switchover; then the old primary. The StatefulSet uses `OnDelete`, so a pod
//! changes revision only when this module deletes it.

use std::sync::Mutex;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use statecraft_shared::Result;
use statecraft_shared::reason::Common;
use statecraft_shared::upgrade::{Gate, Member, Role as UpgradeRole, UpgradeGates};

use crate::build::ordinal_of;
use crate::clustering::dataplane::DataPlane;
use crate::clustering::decide::{Decision, Health, Operation, Role, SWITCHOVER_MAX_LAG_SECONDS};
use crate::clustering::observed::Observed;
use crate::clustering::pass::{Effect, Target, perform};
use crate::reason::MySql;

/// The pod label with the StatefulSet revision a pod was created from.
const REVISION_LABEL: &str = "controller-revision-hash";

/// The upgrade engine's members: the pods with their revision, the primary as leader.
pub fn members(
    sts: &StatefulSet,
    pods: &[Pod],
    decision: &Decision,
    primary: Option<u32>,
    cluster: &str,
) -> Vec<Member> {
    let target = sts.status.as_ref().and_then(|s| s.update_revision.clone()).unwrap_or_default();
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let name = p.name_any();
            let ordinal = ordinal_of(cluster, &name)?;
            let ready = decision.verdicts.iter().any(|v| v.ordinal == ordinal && v.healthy);
            Some(Member {
                name,
                role: if primary == Some(ordinal) { UpgradeRole::Leader } else { UpgradeRole::Follower },
                phase: 0,
                order: ordinal,
                ready,
                current_revision: p.labels().get(REVISION_LABEL).cloned().unwrap_or_default(),
                target_revision: target.clone(),
            })
        })
        .collect()
}

/// The MySQL gates of a roll, over one pass's observation.
///
/// `may_restart` refuses while a backup runs or another member does not serve;
/// `before_restart` switches the primary over; `caught_up` waits until the restarted member
/// serves in its role again.
pub struct Gates<'a> {
    /// This pass's decision (verdicts per member).
    pub decision: &'a Decision,
    /// This pass's observation.
    pub observed: &'a Observed,
    /// The members' endpoints.
    pub targets: &'a [Target],
    /// The data plane, for the switchover before the primary's restart.
    pub dp: &'a DataPlane,
    /// The cluster's name (pods are `<cluster>-<ordinal>`).
    pub cluster: &'a str,
    /// A backup Job of the cluster that is running, if any: no restart meanwhile.
    pub backup_running: Option<String>,
    /// Set when `before_restart` moved the primary: the new primary's ordinal, to record.
    pub new_primary: Mutex<Option<u32>>,
}

impl Gates<'_> {
    fn ordinal(&self, member: &Member) -> Option<u32> {
        ordinal_of(self.cluster, &member.name)
    }

    fn healthy(&self, ordinal: u32) -> bool {
        self.decision.verdicts.iter().any(|v| v.ordinal == ordinal && v.healthy)
    }
}

impl UpgradeGates for Gates<'_> {
    /// Every other member must serve in its role: a replica's restart then leaves enough
    /// replicas to acknowledge commits, and the primary's comes after a switchover.
    async fn may_restart(&self, member: &Member) -> Result<Gate> {
        if let Some(job) = &self.backup_running {
            return Ok(Gate::closed(
                Common::BackupRunning,
                format!("not restarting {} while backup Job {job} runs", member.name),
            ));
        }
        let me = self.ordinal(member);
        let others_unhealthy: Vec<String> = self
            .decision
            .verdicts
            .iter()
            .filter(|v| Some(v.ordinal) != me && v.ordinal < self.observed.replicas && !v.healthy)
            .map(|v| format!("{}-{}", self.cluster, v.ordinal))
            .collect();
        if !others_unhealthy.is_empty() {
            return Ok(Gate::closed(
                Common::OtherMembersNotHealthy,
                format!("not restarting {} while {} do not serve", member.name, others_unhealthy.join(", ")),
            ));
        }
        if self.decision.health == Health::Failed || self.decision.health == Health::Lost {
            return Ok(Gate::closed(MySql::ClusterFailed, "no restarts while the primary is down"));
        }
        Ok(Gate::Open)
    }

    /// Moves the primary to the lowest-ordinal healthy, caught-up replica (a switchover),
    /// unless there is none to move to (a single server just restarts).
    async fn before_restart(&self, member: &Member) -> Result<Gate> {
        let Some(from) = self.ordinal(member) else { return Ok(Gate::Open) };
        if self.observed.replicas <= 1 {
            return Ok(Gate::Open);
        }
        let to = self.decision.verdicts.iter().find(|v| {
            v.healthy
                && v.role == Some(Role::Replica)
                && self.observed.members.iter().any(|m| {
                    m.ordinal == v.ordinal
                        && m.server
                            .up()
                            .and_then(|s| s.replication.as_ref())
                            .and_then(|r| r.lag_seconds)
                            .is_some_and(|l| l <= SWITCHOVER_MAX_LAG_SECONDS)
                })
        });
        let Some(to) = to else {
            return Ok(Gate::closed(MySql::NoSwitchoverTarget, "no healthy, caught-up replica to move the primary to"));
        };
        // The old primary's pod is deleted by the roll's next step, not yet: it is not let go.
        let op = Operation::Switchover { from, to: to.ordinal, terminating: false };
        match perform(self.dp, &op, self.observed, self.targets, self.observed.ack_count).await {
            Ok(Effect::RecordPrimary(p)) => {
                *self.new_primary.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
                Ok(Gate::Open)
            }
            Ok(_) => Ok(Gate::Open),
            Err(e) => Err(e.into()),
        }
    }

    /// A restarted member is caught up once it serves in its role again.
    async fn caught_up(&self, member: &Member) -> Result<Gate> {
        match self.ordinal(member) {
            Some(o) if self.healthy(o) => Ok(Gate::Open),
            _ => Ok(Gate::closed(Common::MemberNotCaughtUp, format!("{} does not serve in its role yet", member.name))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Flavor;
    use crate::clustering::decide::Verdict;
    use crate::flavor::sql;

    fn decision(healthy: [bool; 3]) -> Decision {
        Decision {
            health: if healthy.iter().all(|h| *h) { Health::Healthy } else { Health::Degraded },
            operation: Operation::Nothing,
            verdicts: (0..3)
                .map(|i| Verdict {
                    ordinal: i,
                    role: Some(if i == 0 { Role::Primary } else { Role::Replica }),
                    healthy: healthy[i as usize],
                    errant: None,
                })
                .collect(),
        }
    }

    fn member(name: &str) -> Member {
        Member { name: name.into(), ..Default::default() }
    }

    #[tokio::test]
    async fn restarts_wait_for_backups_and_for_every_other_member() {
        let dp = DataPlane::new(sql(Flavor::Mariadb), String::new(), String::new());
        let observed = Observed { replicas: 3, ..Default::default() };
        let d = decision([true, true, true]);
        let mut gates = Gates {
            decision: &d,
            observed: &observed,
            targets: &[],
            dp: &dp,
            cluster: "db",
            backup_running: None,
            new_primary: Mutex::new(None),
        };
        assert_eq!(gates.may_restart(&member("db-2")).await.unwrap(), Gate::Open);
        assert_eq!(gates.caught_up(&member("db-2")).await.unwrap(), Gate::Open);
        gates.backup_running = Some("nightly-backup".into());
        let closed = gates.may_restart(&member("db-2")).await.unwrap();
        assert!(matches!(closed, Gate::Closed { ref reason, .. } if *reason == Common::BackupRunning), "{closed:?}");

        let d = decision([true, false, true]);
        let gates = Gates { decision: &d, backup_running: None, ..gates };
        // The broken member itself may restart; nobody else while it is broken.
        assert_eq!(gates.may_restart(&member("db-1")).await.unwrap(), Gate::Open);
        let closed = gates.may_restart(&member("db-2")).await.unwrap();
        assert!(
            matches!(closed, Gate::Closed { ref reason, .. } if *reason == Common::OtherMembersNotHealthy),
            "{closed:?}"
        );
        let waiting = gates.caught_up(&member("db-1")).await.unwrap();
        assert!(matches!(waiting, Gate::Closed { ref reason, .. } if *reason == Common::MemberNotCaughtUp));
    }
}
