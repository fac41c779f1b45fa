//! The objects every StatefulSet-backed cluster owns, built the same way by every operator:
//! the names of the cluster's objects and pods ([`Names`]), their metadata, the headless
//! Service that gives pods stable DNS names, the PodDisruptionBudget, the data volume claim
//! template (and the opt-in fix of its ownership), the StatefulSet around an operator's
//! own pod template, and the growth of its volumes. An operator adds
//! only what is specific to its system (containers, client Services, configuration).

mod claim;
pub mod growth;
mod names;
mod ownership;
mod pdb;
mod service;
mod skeleton;

pub use claim::data_claim_template;
pub use names::{DATA_VOLUME, INSTANCE_LABEL, NAME_LABEL, Names, label_query, ordinal_of};
pub use ownership::ownership_fix;
pub use pdb::{Budget, pdb};
pub use service::headless_service;
pub use skeleton::{Parts, statefulset};
