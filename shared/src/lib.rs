//! `statecraft-shared`: what every Statecraft operator needs, so that no operator crate
//! re-implements it. An operator crate holds only what is specific to its system.
//!
//! - [`cli`] and [`runner`]: the `run` / `crd` / `rbac` subcommands, health and metrics
//!   endpoints, graceful shutdown, controllers that run only while [`leader`] holds the Lease.
//! - [`apply`]: server-side apply with one field manager, and clean-up of orphans.
//! - [`status`] and [`events`]: standard conditions and one shared Event recorder.
//! - [`error`]: one error type whose category decides how a failed reconcile is retried.
//! - [`tasks`]: one background task per resource (data-plane loops beside the reconcile).
//! - [`cluster_loop`]: the per-cluster loop those tasks run: observe → decide → act → report.
//! - [`upgrade`]: the ordered rolling-upgrade planner (unready first, followers, leader last).
//! - [`insight`]: abnormality detection: a member's figures judged against its own recent
//!   past (rolling baselines, spikes above a multiple of them, events in a sliding window).
//! - [`autoscale`]: when a metric has asked long enough for a resize, and to which size.
//! - [`backup`]: what backups share across operators: the policy (schedule, retention),
//!   cron slots, the Job that runs a backup and its report, scheduled backups.
//! - [`s3`]: the S3 backup store (streamed multipart upload and download, retention).
//! - [`rbac`]: namespaced Role, RoleBinding and ServiceAccount from declared rules.
//! - [`names`]: which cluster names fit the objects an operator derives from them.
//! - [`pod_template`]: what a user adds to every pod of a cluster (placement, pull
//!   Secrets, labels), applied to the members and the backup and restore Jobs alike.
//! - [`pods`]: what keeps a member's pod from running (unschedulable, crash loop, image
//!   pull), for the condition that says what an operator waits for.
//! - [`quantity`]: Kubernetes quantities (`8Gi`, `1e9`) as bytes, by the API server's rules.
//! - [`statefulset`]: the pieces of a StatefulSet cluster: names, owned metadata, headless
//!   Service, PodDisruptionBudget, claim template and the StatefulSet skeleton.
//! - [`rebuild`]: replace a StatefulSet member with an empty one (claim, then pod).
//! - [`reference`]: the API reference page of an operator's resources, from its CRDs.
//! - [`deploy`]: the Deployment every operator runs as (leader election, locked down).
//! - `testing` (feature `testing`): a real etcd + kube-apiserver and a real S3 server for tests.
// No panics on what a user or the network controls: `make check` (clippy) refuses
// unwrap, expect and panic outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod apply;
pub mod autoscale;
pub mod backup;
pub mod cli;
pub mod cluster_loop;
pub mod deploy;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod exposition;
pub mod finalizer;
pub mod insight;
pub mod leader;
pub mod metrics;
pub mod names;
pub mod network_policy;
pub mod pod_template;
pub mod pods;
pub mod quantity;
pub mod rbac;
pub mod reason;
pub mod rebuild;
pub mod reference;
pub mod runner;
pub mod s3;
pub mod secrets;
pub mod statefulset;
pub mod status;
pub mod tasks;
pub mod tls;
pub mod upgrade;
pub mod user_roles;
pub mod version;

/// Test support (real servers for tests), not operator code: it may panic on a broken
/// test machine.
#[cfg(feature = "testing")]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub mod testing;

pub use error::{Error, ErrorCategory, Result};

// Re-exported so operator crates use the exact versions the library was built with.
pub use k8s_openapi;
pub use kube;
pub use tokio_util;
