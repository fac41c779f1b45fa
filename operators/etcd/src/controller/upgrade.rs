//! Rolling a new StatefulSet revision (image, version or resources) with the shared upgrade
//! engine: learners and followers first, one at a time, each back, healthy and caught up
//! before the next; then leadership moves away (`MoveLeader`); then the old leader. The
//! StatefulSet uses `OnDelete`, so a pod changes revision only when this roll deletes it.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use statecraft_shared::reason::Common;
use statecraft_shared::upgrade::{Gate, Member, Role, UpgradeGates};
use statecraft_shared::{Error, Result};

use crate::build::Names;
use crate::membership::Observed;
use crate::membership::dataplane;
use crate::membership::plan::{Step, caught_up, leader, quorum};
use crate::reason::Etcd;

/// The pod label with the StatefulSet revision a pod was created from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The upgrade engine's members: each member pod with its revision and role (the leader
/// as leader, learners as learners); ready = its pod is ready and it answers.
pub fn members(sts: &StatefulSet, names: &Names, observed: &Observed) -> Vec<Member> {
    let target = sts.status.as_ref().and_then(|s| s.update_revision.clone()).unwrap_or_default();
    let leader = leader(observed);
    let members = observed.members.as_deref().unwrap_or_default();
    observed
        .pods
        .iter()
        .filter(|(_, p)| !p.terminating)
        .map(|(ordinal, pod)| {
            let member = members.iter().find(|m| m.ordinal == Some(*ordinal));
            let role = match member {
                Some(m) if Some(m.id) == leader => Role::Leader,
                Some(m) if m.is_learner => Role::Learner,
                _ => Role::Follower,
            };
            let answers = member.is_some_and(|m| observed.states.contains_key(&m.id));
            Member {
                name: names.member(*ordinal),
                role,
                phase: 0,
                order: *ordinal,
                ready: pod.ready && answers,
                current_revision: pod.revision.clone().unwrap_or_default(),
                target_revision: target.clone(),
            }
        })
        .collect()
}

/// The etcd gates of a roll, over one pass's observation.
pub struct Gates<'a> {
    /// The cluster's names.
    pub names: &'a Names,
    /// This pass's observation.
    pub observed: &'a Observed,
    /// Client URLs of the running members, by ordinal.
    pub endpoints: &'a BTreeMap<u32, String>,
    /// A snapshot Job of the cluster that is running, if any: no restart meanwhile.
    pub backup_running: Option<String>,
}

impl Gates<'_> {
    fn voters(&self) -> Vec<&crate::membership::Member> {
        self.observed.members.as_deref().unwrap_or_default().iter().filter(|m| !m.is_learner).collect()
    }

    fn healthy(&self, id: u64) -> bool {
        self.observed.states.contains_key(&id) && self.observed.alarms.get(&id).is_none_or(|a| a.is_empty())
    }
}

impl UpgradeGates for Gates<'_> {
    /// Every other voting member must be healthy, so that the restart leaves a quorum with
    /// one failure to spare (a single-member cluster is restarted: it has no alternative).
    async fn may_restart(&self, member: &Member) -> Result<Gate> {
        if let Some(job) = &self.backup_running {
            return Ok(Gate::closed(
                Common::BackupRunning,
                format!("not restarting {} while snapshot Job {job} runs", member.name),
            ));
        }
        let me = self.names.ordinal_of(&member.name);
        let voters = self.voters();
        let others_unhealthy: Vec<String> = voters
            .iter()
            .filter(|m| m.ordinal != me && !self.healthy(m.id))
            .map(|m| m.ordinal.map_or_else(|| format!("{:x}", m.id), |k| self.names.member(k)))
            .collect();
        if !others_unhealthy.is_empty() {
            return Ok(Gate::closed(
                Common::OtherMembersNotHealthy,
                format!("not restarting {} while {} are not healthy", member.name, others_unhealthy.join(", ")),
            ));
        }
        let remaining = voters.iter().filter(|m| m.ordinal != me && self.healthy(m.id)).count();
        if voters.len() > 1 && remaining < quorum(voters.len()) {
            return Ok(Gate::closed(
                Etcd::QuorumAtRisk,
                format!("restarting {} would leave {remaining} of {} voting members", member.name, voters.len()),
            ));
        }
        Ok(Gate::Open)
    }

    /// Moves leadership to the healthy follower furthest ahead, so the restart costs one
    /// planned election instead of an election timeout.
    async fn before_restart(&self, member: &Member) -> Result<Gate> {
        let Some(from) = self.names.ordinal_of(&member.name) else { return Ok(Gate::Open) };
        let voters = self.voters();
        let Some(leader) = voters.iter().find(|m| m.ordinal == Some(from)) else { return Ok(Gate::Open) };
        let target = voters
            .iter()
            .filter(|m| m.id != leader.id && self.healthy(m.id))
            .max_by_key(|m| self.observed.states.get(&m.id).map_or(0, |s| s.raft_applied_index));
        let Some(to) = target else {
            // A single member restarts as it is.
            return Ok(Gate::Open);
        };
        let (Some(from_ordinal), Some(to_ordinal)) = (leader.ordinal, to.ordinal) else { return Ok(Gate::Open) };
        let step = Step::MoveLeader { from: leader.id, from_ordinal, to: to.id, to_ordinal };
        dataplane::perform(self.names, self.endpoints, &step)
            .await
            .map_err(|e| Error::DataPlane { system: "etcd".into(), message: e.to_string() })?;
        Ok(Gate::Open)
    }

    /// A restarted member is caught up once it answers, reports no alarm, and has applied
    /// the leader's log up to a small margin.
    async fn caught_up(&self, member: &Member) -> Result<Gate> {
        let me = self.names.ordinal_of(&member.name);
        let found = self.observed.members.as_deref().unwrap_or_default().iter().find(|m| m.ordinal == me);
        match found {
            Some(m) if self.healthy(m.id) && caught_up(self.observed, m.id) => Ok(Gate::Open),
            _ => Ok(Gate::closed(
                Common::MemberNotCaughtUp,
                format!("{} has not caught up with the leader yet", member.name),
            )),
        }
    }
}
