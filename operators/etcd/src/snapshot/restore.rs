//! Restores a snapshot into the data directory of a new cluster's first member, before
//! etcd starts (an init container of every member pod runs this; it acts only where it
//! must). The snapshot is downloaded onto the data volume (verified against its recorded
//! size and SHA-256), `etcdutl snapshot restore` builds the data directory in a staging
//! directory on the same volume, and one rename puts it in place: a crash at any point
//! leaves either no data directory (the next start begins again) or a whole one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use statecraft_shared::s3::S3Store;
use tokio::io::{AsyncWriteExt, BufWriter};
use tracing::{info, warn};

use super::SnapshotError;
use crate::build::config::{INITIAL_CLUSTER, INITIAL_CLUSTER_TOKEN};

/// Name of the staging directory, beside the data directory on the same volume.
const STAGING: &str = ".statecraft-restore";
/// The downloaded snapshot inside the staging directory.
const SNAPSHOT_FILE: &str = "snapshot.db";
/// How much of etcdutl's output an error quotes (termination messages hold 4 KiB).
const OUTPUT_TAIL: usize = 1500;

/// What to restore, and where: the member's identity and its cluster's bootstrap
/// configuration (from the cluster's ConfigMap), the snapshot object.
#[derive(Clone, Debug)]
pub struct RestoreMember {
    /// The pod (and member) name, `<cluster>-<ordinal>`.
    pub pod_name: String,
    /// `name=peer-url,...` of the members the cluster bootstraps with.
    pub initial_cluster: String,
    /// `new` while the cluster is being bootstrapped, `existing` afterwards.
    pub initial_cluster_state: String,
    /// The cluster's token (its UID), so that members of another cluster cannot join.
    pub initial_cluster_token: String,
    /// etcd's data directory; its parent must be on the same volume (the staging area).
    pub data_dir: PathBuf,
    /// The `etcdutl` binary.
    pub etcdutl: PathBuf,
    /// The snapshot's key in the store.
    pub key: String,
    /// Its expected SHA-256, when known beyond the object's own metadata.
    pub sha256: Option<String>,
}

/// What the restore did (the init container's termination message).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum RestoreReport {
    /// Nothing to do; `reason` says why.
    Skipped { reason: String },
    /// The data directory was built from the snapshot.
    #[serde(rename_all = "camelCase")]
    Restored { key: String, bytes: u64, sha256: String, sha256_verified: bool, data_dir: String },
}

/// Why this member must not restore, or `None` if it must: only the first member
/// (ordinal 0), only while the cluster is bootstrapped (`new`), and only without a data
/// directory. Every other member joins the restored one and receives the data from it;
/// a member that restarts keeps its data.
pub fn skip_reason(pod_name: &str, initial_cluster_state: &str, data_dir_exists: bool) -> Option<String> {
    let ordinal = pod_name.rsplit_once('-').and_then(|(_, n)| n.parse::<u32>().ok());
    if ordinal != Some(0) {
        return Some(format!("{pod_name} is not the cluster's first member: it joins the restored one"));
    }
    if initial_cluster_state != "new" {
        return Some(format!(
            "the cluster is no longer bootstrapping (initial cluster state {initial_cluster_state:?})"
        ));
    }
    if data_dir_exists {
        return Some("the data directory exists: the member keeps its data".into());
    }
    None
}

/// The peer URL of `name` in an initial-cluster string (`a=http://...,b=http://...`).
fn peer_url<'a>(initial_cluster: &'a str, name: &str) -> Option<&'a str> {
    initial_cluster.split(',').filter_map(|e| e.trim().split_once('=')).find(|(n, _)| *n == name).map(|(_, url)| url)
}

/// Why this member must not restore (see [`skip_reason`]), looking at its data directory.
pub async fn skip_check(p: &RestoreMember) -> Result<Option<String>, SnapshotError> {
    let exists = tokio::fs::try_exists(&p.data_dir)
        .await
        .map_err(|e| SnapshotError::io("checking for the data directory", &p.data_dir, e))?;
    Ok(skip_reason(&p.pod_name, &p.initial_cluster_state, exists))
}

/// Restores the snapshot if this member must (see [`skip_reason`]).
pub async fn restore_member(p: &RestoreMember, store: &S3Store) -> Result<RestoreReport, SnapshotError> {
    if let Some(reason) = skip_check(p).await? {
        info!(pod = %p.pod_name, %reason, "not restoring");
        return Ok(RestoreReport::Skipped { reason });
    }
    if p.initial_cluster_token.is_empty() {
        return Err(SnapshotError::Invalid {
            field: INITIAL_CLUSTER_TOKEN.into(),
            message: "is empty: the restored member would accept members of any cluster".into(),
        });
    }
    let Some(url) = peer_url(&p.initial_cluster, &p.pod_name) else {
        return Err(SnapshotError::Invalid {
            field: INITIAL_CLUSTER.into(),
            message: format!("{:?} has no entry for {}", p.initial_cluster, p.pod_name),
        });
    };
    let Some(volume) = p.data_dir.parent() else {
        return Err(SnapshotError::Invalid {
            field: "data directory".into(),
            message: format!("{} has no parent directory to stage the restore in", p.data_dir.display()),
        });
    };
    let staging = volume.join(STAGING);
    // A leftover of an interrupted attempt: start again from scratch.
    remove_staging(&staging).await?;
    tokio::fs::create_dir(&staging).await.map_err(|e| SnapshotError::io("creating", &staging, e))?;
    let result = restore_in(p, store, url, &staging).await;
    // Whether it worked or not, the staging directory goes: the data directory was either
    // moved out of it already, or never becomes one.
    if let Err(e) = remove_staging(&staging).await {
        warn!(error = %e, "could not remove the staging directory");
    }
    result
}

async fn remove_staging(staging: &Path) -> Result<(), SnapshotError> {
    match tokio::fs::remove_dir_all(staging).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(SnapshotError::io("removing", staging, e)),
        _ => Ok(()),
    }
}

async fn restore_in(
    p: &RestoreMember,
    store: &S3Store,
    peer_url: &str,
    staging: &Path,
) -> Result<RestoreReport, SnapshotError> {
    let started = Instant::now();
    let file = staging.join(SNAPSHOT_FILE);
    let handle = tokio::fs::File::create(&file).await.map_err(|e| SnapshotError::io("creating", &file, e))?;
    let mut writer = BufWriter::with_capacity(1 << 20, handle);
    let receipt = store.download(&p.key, &mut writer, p.sha256.as_deref()).await?;
    writer.flush().await.map_err(|e| SnapshotError::io("writing", &file, e))?;
    writer.into_inner().sync_all().await.map_err(|e| SnapshotError::io("syncing", &file, e))?;
    info!(key = %p.key, bytes = receipt.size, seconds = started.elapsed().as_secs_f64(), "snapshot downloaded");

    let built = staging.join("data");
    let output = tokio::process::Command::new(&p.etcdutl)
        .arg("snapshot")
        .arg("restore")
        .arg(&file)
        .arg("--name")
        .arg(&p.pod_name)
        .arg("--initial-cluster")
        .arg(&p.initial_cluster)
        .arg("--initial-cluster-token")
        .arg(&p.initial_cluster_token)
        .arg("--initial-advertise-peer-urls")
        .arg(peer_url)
        .arg("--data-dir")
        .arg(&built)
        // The pod's ETCD_* variables are the member's configuration, not etcdutl's.
        .env_clear()
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| SnapshotError::io("running", &p.etcdutl, e))?;
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        let text = if text.trim().is_empty() { String::from_utf8_lossy(&output.stdout) } else { text };
        return Err(SnapshotError::Etcdutl { status: output.status.to_string(), output: tail(text.trim()) });
    }

    tokio::fs::rename(&built, &p.data_dir).await.map_err(|e| SnapshotError::io("moving into place", &built, e))?;
    // The rename is durable once the directory holding the data directory is synced.
    if let Some(volume) = p.data_dir.parent() {
        let dir = tokio::fs::File::open(volume).await.map_err(|e| SnapshotError::io("opening", volume, e))?;
        dir.sync_all().await.map_err(|e| SnapshotError::io("syncing", volume, e))?;
    }
    info!(
        key = %p.key, data_dir = %p.data_dir.display(), bytes = receipt.size,
        seconds = started.elapsed().as_secs_f64(), "snapshot restored"
    );
    Ok(RestoreReport::Restored {
        key: p.key.clone(),
        bytes: receipt.size,
        sha256: receipt.sha256,
        sha256_verified: receipt.sha256_verified,
        data_dir: p.data_dir.display().to_string(),
    })
}

/// The last [`OUTPUT_TAIL`] bytes of `text`, at a character boundary.
fn tail(text: &str) -> String {
    let mut start = text.len().saturating_sub(OUTPUT_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bootstrapping_first_member_without_data_restores() {
        assert_eq!(skip_reason("main-0", "new", false), None);
        assert!(skip_reason("main-1", "new", false).is_some_and(|r| r.contains("not the cluster's first member")));
        assert!(skip_reason("main-10", "new", false).is_some());
        assert!(skip_reason("main", "new", false).is_some(), "no ordinal");
        assert!(skip_reason("main-0", "existing", false).is_some_and(|r| r.contains("no longer bootstrapping")));
        assert!(skip_reason("main-0", "", false).is_some());
        assert!(skip_reason("main-0", "new", true).is_some_and(|r| r.contains("keeps its data")));
        assert_eq!(skip_reason("my-db-2-0", "new", false), None, "dashes in the cluster name");
    }

    #[test]
    fn peer_urls_come_from_the_initial_cluster() {
        let ic = "main-0=http://main-0.main-peer.ns.svc:2380, main-1=http://main-1.main-peer.ns.svc:2380";
        assert_eq!(peer_url(ic, "main-0"), Some("http://main-0.main-peer.ns.svc:2380"));
        assert_eq!(peer_url(ic, "main-1"), Some("http://main-1.main-peer.ns.svc:2380"));
        assert_eq!(peer_url(ic, "main-2"), None);
        assert_eq!(peer_url("", "main-0"), None);
    }

    #[test]
    fn reports_say_what_happened() {
        let skipped = RestoreReport::Skipped { reason: "r".into() };
        assert_eq!(serde_json::to_string(&skipped).expect("json"), r#"{"outcome":"skipped","reason":"r"}"#);
        let restored = RestoreReport::Restored {
            key: "k".into(),
            bytes: 1,
            sha256: "s".into(),
            sha256_verified: true,
            data_dir: "/d".into(),
        };
        let json = serde_json::to_value(&restored).expect("json");
        assert_eq!(json["outcome"], "restored");
        assert_eq!(json["sha256Verified"], true);
    }

    #[test]
    fn long_output_is_cut_from_the_front() {
        let long = format!("{}END", "é".repeat(2000));
        let t = tail(&long);
        assert!(t.len() <= OUTPUT_TAIL && t.ends_with("END"));
        assert_eq!(tail("short"), "short");
    }
}
