//! The tasks the binary runs as `statecraft-etcd job <task>`: `backup` in an EtcdBackup's
//! Job, `restore-member` in the init container of a restored cluster's pods. Each reads
//! its parameters from the environment (names in [`crate::build::jobs::env`]) and leaves
//! its report in the termination message, where the controllers read it.

use std::path::PathBuf;

use statecraft_shared::backup::job::{TaskEnv, run_task};
use statecraft_shared::{Error, Result};

use crate::build::DATA_DIR;
use crate::build::jobs::{BACKUP_TASK, ETCDUTL, RESTORE_MEMBER_TASK, env};
use crate::snapshot::{RestoreMember, RestoreReport, SnapshotReport, restore_member, save_to_s3, skip_check};

/// Runs task `name` with its parameters from the process environment.
pub async fn run(name: &str) -> Result<()> {
    let vars = TaskEnv::process();
    match name {
        BACKUP_TASK => run_task(name, backup(vars)).await,
        RESTORE_MEMBER_TASK => run_task(name, restore(vars)).await,
        other => Err(Error::invalid_spec("job", format!("statecraft-etcd has no job task named {other:?}"))),
    }
}

/// `backup`: streams a snapshot of the member at [`env::ENDPOINT`] to the object.
pub async fn backup(vars: TaskEnv<'_>) -> Result<SnapshotReport> {
    let store = vars.store()?;
    let key = vars.required(env::KEY)?;
    let endpoint = vars.required(env::ENDPOINT)?;
    let member = vars.required(env::MEMBER)?;
    Ok(save_to_s3(&endpoint, &member, &store, &key).await?)
}

/// `restore-member`: restores the object into this member's data directory if it must.
/// A member that must not restore needs no store, so a missing credential only matters
/// to the one that restores.
pub async fn restore(vars: TaskEnv<'_>) -> Result<RestoreReport> {
    let params = RestoreMember {
        pod_name: vars.required(env::POD_NAME)?,
        initial_cluster: vars.optional(env::INITIAL_CLUSTER).unwrap_or_default(),
        initial_cluster_state: vars.optional(env::INITIAL_CLUSTER_STATE).unwrap_or_default(),
        initial_cluster_token: vars.optional(env::INITIAL_CLUSTER_TOKEN).unwrap_or_default(),
        data_dir: PathBuf::from(vars.optional(env::DATA_DIR).unwrap_or_else(|| DATA_DIR.into())),
        etcdutl: PathBuf::from(vars.optional(env::ETCDUTL).unwrap_or_else(|| ETCDUTL.into())),
        key: vars.required(env::KEY)?,
        sha256: vars.optional(env::SHA256),
    };
    if let Some(reason) = skip_check(&params).await? {
        tracing::info!(pod = %params.pod_name, %reason, "not restoring");
        return Ok(RestoreReport::Skipped { reason });
    }
    let store = vars.store()?;
    Ok(restore_member(&params, &store).await?)
}
