//! The image names of the cluster, read from `deploy/images/images.env`, the one place they
//! are written down (the image build, the cluster and the tests all read it), and second
//! tags of them on the local cluster's node.

use crate::{E2eError, Result};

/// The socket of the local cluster's containerd.
pub const NODE_CONTAINERD_SOCKET: &str = "/run/statecraft/containerd/containerd.sock";

const IMAGES_ENV: &str = include_str!("../../deploy/images/images.env");

/// The image named by `key` in `images.env` (e.g. `MARIADB_IMAGE`).
pub fn image(key: &str) -> Option<&'static str> {
    all().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// Every `(KEY, image)` in `images.env`, in file order.
pub fn all() -> Vec<(&'static str, &'static str)> {
    IMAGES_ENV
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect()
}

const PREVIOUS_OPERATOR_REF: &str = include_str!("../../deploy/images/previous-operator.ref");

/// The commit whose build of operator image `id` (e.g. `statecraft-kafka`) the upgrade tests
/// start from: its line in `deploy/images/previous-operator.ref`, which
/// `scripts/build-previous-operator.sh` builds as `<image>:previous`.
pub fn previous_commit(id: &str) -> Option<&'static str> {
    PREVIOUS_OPERATOR_REF
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.split_once(' ').filter(|(i, _)| *i == id).map(|(_, commit)| commit.trim()))
}

/// `image` with its tag replaced by `tag` (`repo:old` → `repo:tag`).
pub fn retagged(image: &str, tag: &str) -> String {
    format!("{}:{tag}", image.rsplit_once(':').map_or(image, |(repo, _)| repo))
}

/// Adds the name `target` to the image `source` in the local cluster node's containerd
/// (namespace `k8s.io`, where the kubelet finds images), replacing any image of that name.
/// Only one build of each operand exists offline, so an upgrade test gives pods the same
/// build under a second tag: they change image and restart exactly as in a real upgrade.
/// Local cluster only.
pub fn tag_on_node(source: &str, target: &str) -> Result<()> {
    let command = format!("ctr images tag {source} {target}");
    let out = std::process::Command::new("ctr")
        .args([
            "--address",
            NODE_CONTAINERD_SOCKET,
            "--namespace",
            "k8s.io",
            "images",
            "tag",
            "--force",
            source,
            target,
        ])
        .output()
        .map_err(|e| E2eError::Command { command: command.clone(), message: e.to_string() })?;
    if !out.status.success() {
        return Err(E2eError::Command { command, message: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn images_env_names_the_images_pods_use() {
        assert!(super::image("PAUSE_IMAGE").is_some_and(|i| i.starts_with("registry.k8s.io/pause:")));
        assert!(super::image("MARIADB_IMAGE").is_some_and(|i| i.contains("mariadb:")));
        assert!(super::all().len() >= 7);
        assert_eq!(super::image("NOPE"), None);
    }

    #[test]
    fn every_operator_has_a_previous_build() {
        for id in ["statecraft-mysql", "statecraft-kafka"] {
            let commit = super::previous_commit(id).unwrap_or_default();
            assert!(commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()), "{id}: {commit:?}");
        }
        assert_eq!(super::previous_commit("statecraft"), None);
    }

    #[test]
    fn retagging_keeps_the_repository() {
        assert_eq!(super::retagged("gcr.io/etcd-development/etcd:v3.6.16", "x"), "gcr.io/etcd-development/etcd:x");
        assert_eq!(super::retagged("localhost:5000/a:b", "c"), "localhost:5000/a:c");
    }
}
