//! Membership: observing a cluster's members and deciding the one next step that moves
//! its membership towards the spec (bootstrap, add a learner, promote it, remove a member,
//! replace a broken one, defragment), never a step that would lose quorum.

pub mod dataplane;
pub mod observed;
pub mod plan;

#[cfg(test)]
mod plan_props;

pub use dataplane::{DataPlaneError, Gathered, gather, perform};
pub use observed::{Alarm, Member, MemberState, Observed, PodState};
pub use plan::{
    Addressing, DefragPolicy, Desired, InitialCluster, Memory, Step, initial_cluster, plan, remember,
    statefulset_replicas,
};
