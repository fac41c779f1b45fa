//! The data volume's ownership, for storage provisioners that ignore `fsGroup` (hostPath
//! and some local-volume provisioners hand every pod a root-owned directory): an opt-in
//! init container that gives the volume's root directory to the server's user before the
//! non-root server starts. It runs as root with CAP_CHOWN alone, and changes nothing when
//! the directory is already the user's.

use k8s_openapi::api::core::v1::{Capabilities, Container, VolumeMount};

use super::DATA_VOLUME;
use crate::deploy::restricted_container;

/// The init container that makes `mount` (where the data volume is mounted) owned by
/// `uid`:`uid`, in `image` (the server's, which has `stat` and `chown`).
pub fn ownership_fix(image: &str, mount: &str, uid: i64) -> Container {
    let mut security = restricted_container();
    security.run_as_user = Some(0);
    security.run_as_group = Some(0);
    security.run_as_non_root = Some(false);
    security.capabilities = Some(Capabilities { add: Some(vec!["CHOWN".into()]), drop: Some(vec!["ALL".into()]) });
    Container {
        name: "fix-ownership".into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("[ \"$(stat -c %u {mount})\" = {uid} ] || chown {uid}:{uid} {mount}"),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: DATA_VOLUME.into(),
            mount_path: mount.into(),
            read_only: Some(false),
            ..Default::default()
        }]),
        security_context: Some(security),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fix_is_root_with_chown_alone_and_changes_only_a_foreign_owner() {
        let init = ownership_fix("img:1", "/data", 1000);
        let sec = init.security_context.as_ref().expect("security context");
        assert_eq!((sec.run_as_user, sec.run_as_non_root), (Some(0), Some(false)));
        let caps = sec.capabilities.as_ref().expect("capabilities");
        assert_eq!(caps.add.as_deref(), Some(&["CHOWN".to_string()][..]));
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert_eq!((sec.allow_privilege_escalation, sec.read_only_root_filesystem), (Some(false), Some(true)));
        let script = &init.command.as_ref().expect("command")[2];
        assert_eq!(script, "[ \"$(stat -c %u /data)\" = 1000 ] || chown 1000:1000 /data");
        let mounts = init.volume_mounts.as_ref().expect("mounts");
        assert_eq!((mounts[0].name.as_str(), mounts[0].mount_path.as_str()), (DATA_VOLUME, "/data"));
    }
}
