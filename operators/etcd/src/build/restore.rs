//! What the pods of a cluster bootstrapped from a snapshot (`spec.bootstrapFrom`) run
//! before etcd: the operator's binary copied into a shared volume by the operator image,
//! then run in the etcd image (which has etcdutl) as `job restore-member`. Every member's
//! pod has them, since a StatefulSet has one pod template; the task itself decides that
//! only the first member, while bootstrapping and without data, restores (see
//! [`crate::snapshot::restore`]), and the others join it as learners.

use k8s_openapi::api::core::v1::{ConfigMapEnvSource, EmptyDirVolumeSource, EnvFromSource, EnvVar, Volume};
use statecraft_shared::backup::job::{copy_binary_container, mount, s3_env, task_container, value_env};
use statecraft_shared::deploy::{field_env, operator_image};
use statecraft_shared::runner::Operator;

use super::jobs::{RESTORE_MEMBER_TASK, env};
use super::statefulset::{DATA_VOLUME, RestoreParts};
use super::{DATA_DIR, DATA_MOUNT, Names};
use crate::EtcdOperator;
use crate::api::BackupLocation;
use crate::validate::ValidSpec;

/// The volume the operator's binary is copied into.
pub const BIN_VOLUME: &str = "statecraft-bin";
/// Where that volume is mounted.
pub const BIN_DIR: &str = "/opt/statecraft";
/// Name of the init container that restores the snapshot.
pub const RESTORE_CONTAINER: &str = "restore-snapshot";

/// The init containers and volumes that restore `source` into the first member of the
/// cluster `names`, in the members' image (`valid.image`).
pub fn restore_init_containers(valid: &ValidSpec, names: &Names, source: &BackupLocation) -> RestoreParts {
    let binary = format!("{BIN_DIR}/{}", EtcdOperator::NAME);
    // The image is known whenever the operator runs from its Deployment or a build of
    // this repository; without one the pod shows an image error rather than a wrong one.
    let operator_image = operator_image(EtcdOperator::NAME).unwrap_or_default();
    let copy = copy_binary_container(&operator_image, BIN_VOLUME, BIN_DIR, &binary);

    let mut vars = vec![
        field_env(env::POD_NAME, "metadata.name"),
        value_env(env::DATA_DIR, DATA_DIR),
        value_env(env::ETCDUTL, super::jobs::ETCDUTL),
    ];
    // The Secret is optional: every member's pod carries these variables forever, and a
    // Secret deleted after the restore must not keep the members from starting. The task
    // needs the credentials only when it restores, and says so if they are missing then.
    vars.extend(s3_env(&source.store, &source.key, None).into_iter().map(optional_secret));
    let mut restore = task_container(
        RESTORE_CONTAINER,
        &valid.image,
        vec![binary, "job".into(), RESTORE_MEMBER_TASK.into()],
        vars,
        vec![mount(BIN_VOLUME, BIN_DIR), mount(DATA_VOLUME, DATA_MOUNT)],
    );
    restore.env_from = Some(vec![EnvFromSource {
        config_map_ref: Some(ConfigMapEnvSource { name: names.config_map(), optional: Some(false) }),
        ..Default::default()
    }]);
    // Like etcd itself in the official image: root, which owns the data volume, with every
    // capability dropped and a read-only root filesystem.
    if let Some(security) = restore.security_context.as_mut() {
        security.run_as_user = Some(0);
        security.run_as_group = Some(0);
        security.run_as_non_root = Some(false);
    }
    let bin =
        Volume { name: BIN_VOLUME.into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() };
    RestoreParts { init_containers: vec![copy, restore], volumes: vec![bin] }
}

fn optional_secret(mut var: EnvVar) -> EnvVar {
    if let Some(secret) = var.value_from.as_mut().and_then(|v| v.secret_key_ref.as_mut()) {
        secret.optional = Some(true);
    }
    var
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::tests::spec;
    use crate::validate::validate;
    use statecraft_shared::s3::{S3CredentialsSecretRef, S3Location};

    #[test]
    fn the_restore_runs_the_copied_operator_in_the_member_image_on_the_data_volume() {
        let valid = validate(&spec()).expect("valid spec");
        let names = Names::new("restored", "prod");
        let source = BackupLocation {
            store: S3Location::new("backups", "etcd", S3CredentialsSecretRef::new("s3-creds")),
            key: "main/20260101T000000Z-nightly.db".into(),
        };
        let parts = restore_init_containers(&valid, &names, &source);
        let [copy, restore] = parts.init_containers.as_slice() else { panic!("two init containers") };
        assert_eq!(
            copy.args.as_deref(),
            Some(&["copy-self".to_string(), "/opt/statecraft/statecraft-etcd".into()][..])
        );
        assert_eq!(restore.image.as_deref(), Some(valid.image.as_str()), "the members' image, for its etcdutl");
        assert_eq!(
            restore.command.as_deref(),
            Some(&["/opt/statecraft/statecraft-etcd".to_string(), "job".into(), "restore-member".into()][..])
        );
        let mounts: Vec<(&str, &str)> =
            restore.volume_mounts.iter().flatten().map(|m| (m.name.as_str(), m.mount_path.as_str())).collect();
        assert_eq!(mounts, [(BIN_VOLUME, BIN_DIR), (DATA_VOLUME, DATA_MOUNT)]);
        let vars = restore.env.as_deref().unwrap_or_default();
        let get = |n: &str| vars.iter().find(|e| e.name == n).unwrap_or_else(|| panic!("{n} is set"));
        assert_eq!(get(env::KEY).value.as_deref(), Some("main/20260101T000000Z-nightly.db"));
        assert_eq!(get(env::DATA_DIR).value.as_deref(), Some(DATA_DIR));
        assert!(get(env::POD_NAME).value_from.as_ref().is_some_and(|v| v.field_ref.is_some()));
        let secret = get(env::ACCESS_KEY_ID).value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref());
        assert_eq!(secret.map(|s| (s.name.as_str(), s.optional)), Some(("s3-creds", Some(true))));
        let from = restore.env_from.as_deref().unwrap_or_default();
        assert_eq!(from[0].config_map_ref.as_ref().map(|c| c.name.as_str()), Some("restored-members"));
        assert_eq!(restore.security_context.as_ref().and_then(|s| s.read_only_root_filesystem), Some(true));
        assert_eq!(parts.volumes.len(), 1);
        assert_eq!(parts.volumes[0].name, BIN_VOLUME);
    }
}
