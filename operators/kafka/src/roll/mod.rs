//! The roll: Kafka's order and gates on the shared rolling engine
//! ([`statecraft_shared::upgrade`]), pure functions over one pass's [`Snapshot`].
//!
//! # Order
//!
//! Kafka rolls its metadata quorum first, then its brokers (Strimzi's order, and Kafka's own
//! for version upgrades: controllers before brokers):
//!
//! 1. unready controllers, then the ready standby controllers;
//! 2. the **active controller** last of the controllers;
//! 3. then the brokers, unready first.
//!
//! Combined nodes are controllers (they roll in 1 and 2) that also pass the broker gates.
//!
//! The engine alone would put *every* unready member first, so an unready broker would be
//! restarted before a ready controller, and an unready active controller before the
//! standbys. Kafka therefore gives each member a phase ([`Member::phase`], an extension of
//! the engine made for this): standby controllers 0, the active controller 1, brokers 2.
//! One engine run then rolls the whole cluster, with one progress in status, one member in
//! flight at a time and the engine's usual order within each phase. Two separate runs (the
//! controller pool, then the brokers) were the alternative: each would have its own roll
//! identity, so the shared progress would flip between them and forget the member in
//! flight, and the controllers' run would not wait for a broker still coming back.
//!
//! Because the engine touches nothing while any member is on target but unready or not yet
//! confirmed caught up, the first broker restarts only once every controller runs its
//! target revision and is a caught-up voter.
//!
//! # Gates
//!
//! See [`gates`]: the quorum gate for controllers, Strimzi's min-ISR rule for brokers, no
//! restart during a reassignment or of a broker in log recovery; a restarted node is caught
//! up when it is a caught-up voter (controllers) and a registered, unfenced broker back in
//! every ISR it belongs to (brokers). Kafka has no leader-transfer API, so the active
//! controller's `before_restart` opens at once. After a broker is back, the loop elects the
//! preferred leaders [`preferred_elections`] names.
//!
//! # Waiting
//!
//! Waits never fail the roll; [`stall::report`] turns a long one into
//! [`Kafka::RollStalled`](crate::reason::Kafka::RollStalled).
//!
//! # Usage in a pass
//!
//! ```no_run
//! # use statecraft_kafka::roll::{Gates, Snapshot, stall};
//! # use statecraft_shared::upgrade::{next_step, UpgradeProgress};
//! # async fn pass(snapshot: Snapshot, mut progress: UpgradeProgress) -> statecraft_shared::Result<()> {
//! let step = next_step(&snapshot.members(), &Gates { snapshot: &snapshot }, &progress).await?;
//! // act on step.action (delete the pod of a Restart), then:
//! let now = chrono::Utc::now();
//! progress.advance(&step, now);
//! let report = stall::report(&step.action, &progress, now, stall::STALL_AFTER);
//! // Progressing condition: report.reason, report.message; status.upgrade = progress.
//! # Ok(()) }
//! ```
//!
//! [`Member::phase`]: statecraft_shared::upgrade::Member::phase

pub mod config;
pub mod gates;
mod snapshot;
pub mod stall;

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

pub use config::dynamic_changes;
pub use gates::{Gates, caught_up, is_caught_up_voter, may_restart, preferred_elections};
pub use snapshot::{DEFAULT_FETCH_TIMEOUT_MS, Node, PartitionState, Snapshot};
