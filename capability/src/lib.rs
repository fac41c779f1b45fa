//! `statecraft-capability`: scores operators against the five-level Operator Capability
//! model from evidence rather than from a self-chosen word.
//!
//! - [`model`]: the levels and their criteria, with stable ids and how each is verified.
//! - [`operators`]: Statecraft's operators — their claims (`Operator::capabilities`), the
//!   files they ship, the objects they build for a sample resource.
//! - [`manifests`]: loading Kubernetes objects (and dashboards, OLM bundle metadata) from
//!   files, keeping file and line for every object.
//! - [`checks`]: the static checks, on generic objects, so that they run the same on
//!   Statecraft's operators and on any third-party bundle.
//! - [`evidence`]: the e2e evidence records (format 1) and the code fingerprint that
//!   decides whether a record is about the current code.
//! - [`score`]: claims + checks + evidence → a status per criterion and per level.
//! - [`next`]: which e2e tests (and which command) would prove what is not confirmed yet.
//! - [`report`]: building a report (the workspace's operators, or `assess` of manifests).
//! - [`render`]: table, Markdown, JSON and HTML.
//! - [`bundle`]: OLM bundles of Statecraft's operators declaring the level their report earned.
//!
//! The `statecraft-capability` binary puts these together (`report`, `assess`, `bundle`, `criteria`);
//! `capability/README.md` documents the model, the evidence format and the rules.

pub mod bundle;
pub mod checks;
pub mod error;
pub mod evidence;
pub mod manifests;
pub mod model;
pub mod next;
pub mod operators;
pub mod render;
pub mod report;
pub mod score;

pub use error::{Error, Result};
