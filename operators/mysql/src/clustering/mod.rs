//! The per-cluster clustering task: gather → decide (pure) → one operation, separate from
//! the declarative reconcile of the StatefulSet and Services (the design of MOCO, described
//! in the project's research notes).
//!
//! - [`acks`]: whether the primary's commits are acknowledged (or it fell back to async).
//! - [`gtid`]: GTID sets of both flavors in one shape.
//! - [`observed`]: what one pass saw (plain data).
//! - [`decide`]: the pure decision.
//! - [`heal`]: what re-seeding needs: the user's opt-ins and how long replication has been
//!   broken.
//! - [`dataplane`]: reading and changing servers over `mysql_async`.
//! - [`pass`]: gather and perform, without Kubernetes (the controller wraps them).
//! - [`restarts`]: replicas that restarted and may have lost acknowledged writes with their
//!   relay log, until they have caught up again.
//! - [`routes`]: the members the read-write Service leads new connections to, or did a
//!   moment ago.

pub mod acks;
pub mod dataplane;
pub mod decide;
pub mod gtid;
pub mod heal;
pub mod observed;
pub mod pass;
pub mod restarts;
pub mod routes;

#[cfg(test)]
mod decide_props;
#[cfg(test)]
mod decide_tests;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod gtid_props;
