//! What the CRD schema and its CEL rules cannot check, as pure functions: supported etcd
//! versions and upgrade paths, the storage and defragmentation sizes, the backup schedule.
//! Every error names the field (`Error::InvalidSpec`).

use statecraft_shared::deploy::operand_image;
use statecraft_shared::names::check_cluster_name;
use statecraft_shared::quantity;
pub use statecraft_shared::version::Version;
use statecraft_shared::version::check_supported;
use statecraft_shared::{Error, Result};

use crate::api::EtcdClusterSpec;
use crate::build::MAX_CLUSTER_NAME;

/// Parses an etcd version: `MAJOR.MINOR.PATCH`, with the leading `v` etcd's image tags
/// have accepted.
pub fn parse_version(s: &str) -> Option<Version> {
    Version::parse(s.strip_prefix('v').unwrap_or(s)).and_then(Version::require_patch)
}

/// Release series the operator supports: the learner API and `MoveLeader` need 3.4, the
/// `/livez` and `/readyz` probes 3.5.
pub const SUPPORTED_SERIES: &[(u32, u32)] = &[(3, 5), (3, 6)];

/// The repository of the official etcd image.
const REPOSITORY: &str = "gcr.io/etcd-development/etcd";

/// The default image of `version`: `ETCD_IMAGE` of images.env when it is that version (as
/// built here), else the official repository tagged `v<version>`.
pub fn default_image(version: &Version) -> String {
    operand_image("ETCD_IMAGE", REPOSITORY, &format!("v{version}"))
}

/// A spec that passed validation, with what was derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSpec {
    /// The spec as given.
    pub spec: EtcdClusterSpec,
    /// Its version.
    pub version: Version,
    /// The image the members run.
    pub image: String,
    /// etcd's backend quota: 80% of the volume, so NOSPACE comes before a full disk.
    pub quota_bytes: i64,
    /// `spec.defragmentation.minDbSize` in bytes.
    pub defrag_min_bytes: i64,
}

fn invalid(field: &str, message: String) -> Error {
    Error::invalid_spec(field, message)
}

/// The bytes of a size field, by the API server's quantity rules.
fn bytes_of(field: &str, text: &str) -> Result<i64> {
    let bytes = quantity::bytes(text).map_err(|e| invalid(field, e.to_string()))?;
    i64::try_from(bytes).map_err(|_| invalid(field, format!("{text:?} is too large")))
}

/// Validates a cluster spec.
pub fn validate(spec: &EtcdClusterSpec) -> Result<ValidSpec> {
    let version = parse_version(&spec.version)
        .ok_or_else(|| invalid("spec.version", format!("{:?} is not MAJOR.MINOR.PATCH", spec.version)))?;
    check_supported("spec.version", "etcd", &version, SUPPORTED_SERIES)?;
    if ![1, 3, 5, 7].contains(&spec.replicas) {
        return Err(invalid("spec.replicas", format!("must be 1, 3, 5 or 7, not {}", spec.replicas)));
    }
    let size = bytes_of("spec.storage.size", &spec.storage.size)?;
    // etcd refuses to start below its minimum; 8 GiB is its recommended maximum quota.
    let quota_bytes = (size / 10 * 8).min(8 * 1024 * 1024 * 1024);
    if quota_bytes < 64 * 1024 * 1024 {
        return Err(invalid(
            "spec.storage.size",
            format!("{} is too small: etcd needs at least 80Mi", spec.storage.size),
        ));
    }
    let defrag_min_bytes = bytes_of("spec.defragmentation.minDbSize", &spec.defragmentation.min_db_size)?;
    if let Some(backup) = &spec.backup {
        backup.validate("spec.backup")?;
    }
    let image = spec.image.clone().unwrap_or_else(|| default_image(&version));
    Ok(ValidSpec { spec: spec.clone(), version, image, quota_bytes, defrag_min_bytes })
}

/// Checks the cluster's name: it names the StatefulSet, its pods and the Services (the
/// CRD's CEL rule makes the same check for clusters created since it exists).
pub fn validate_name(name: &str) -> Result<()> {
    check_cluster_name("metadata.name", name, MAX_CLUSTER_NAME)
}

/// Checks a version change against the version the members run: no downgrade, no skipped
/// minor release (etcd upgrades one minor at a time), no major change.
pub fn check_version_change(running: &Version, desired: &Version) -> Result<()> {
    if desired < running {
        return Err(invalid(
            "spec.version",
            format!("{desired} is older than {running}, which the members run: downgrades are refused"),
        ));
    }
    if desired.major != running.major || desired.minor > running.minor + 1 {
        return Err(invalid(
            "spec.version",
            format!(
                "{desired} skips a release from {running}: upgrade one minor version at a time \
                 (to {}.{}.x first)",
                running.major,
                running.minor + 1
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{Defragmentation, Storage};

    pub(crate) fn spec() -> EtcdClusterSpec {
        EtcdClusterSpec {
            version: "3.6.16".into(),
            image: None,
            replicas: 3,
            storage: Storage { size: "1Gi".into(), storage_class_name: None },
            resources: None,
            pod_template: Default::default(),
            network_policy: None,
            backup: None,
            defragmentation: Defragmentation::default(),
            auto_heal: Default::default(),
            bootstrap_from: None,
            paused: false,
        }
    }

    /// The field an invalid spec is refused for, and its message.
    fn refused(r: Result<ValidSpec>) -> (String, String) {
        match r {
            Err(Error::InvalidSpec { field, message }) => (field, message),
            other => panic!("expected an invalid spec, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_spec_derives_image_and_quota() {
        let v = validate(&spec()).unwrap();
        assert_eq!(v.image, "gcr.io/etcd-development/etcd:v3.6.16");
        assert_eq!(v.quota_bytes, 858_993_456);
        assert_eq!(v.defrag_min_bytes, 64 * 1024 * 1024);
        let other = validate(&EtcdClusterSpec { version: "3.5.21".into(), ..spec() }).unwrap();
        assert_eq!(other.image, "gcr.io/etcd-development/etcd:v3.5.21");
        let custom = validate(&EtcdClusterSpec { image: Some("my/etcd:x".into()), ..spec() }).unwrap();
        assert_eq!(custom.image, "my/etcd:x");
        let big = validate(&EtcdClusterSpec {
            storage: Storage { size: "100Gi".into(), storage_class_name: None },
            ..spec()
        });
        assert_eq!(big.unwrap().quota_bytes, 8 * 1024 * 1024 * 1024);
    }

    #[test]
    fn bad_specs_name_their_field() {
        assert_eq!(refused(validate(&EtcdClusterSpec { version: "3.6".into(), ..spec() })).0, "spec.version");
        let (field, message) = refused(validate(&EtcdClusterSpec { version: "3.4.30".into(), ..spec() }));
        assert_eq!(field, "spec.version");
        assert!(message.contains("3.5, 3.6"), "{message}");
        assert_eq!(refused(validate(&EtcdClusterSpec { replicas: 4, ..spec() })).0, "spec.replicas");
        let tiny = EtcdClusterSpec { storage: Storage { size: "10Mi".into(), storage_class_name: None }, ..spec() };
        assert_eq!(refused(validate(&tiny)).0, "spec.storage.size");
        let junk = EtcdClusterSpec { storage: Storage { size: "lots".into(), storage_class_name: None }, ..spec() };
        assert_eq!(refused(validate(&junk)).0, "spec.storage.size");
    }

    #[test]
    fn names_must_fit_the_statefulset_and_the_services() {
        assert!(validate_name("main").is_ok());
        assert!(validate_name(&"e".repeat(52)).is_ok());
        // 56 characters make a valid `<name>-client` Service, but a StatefulSet that gets no pods.
        for bad in ["e".repeat(53), "e".repeat(56), "my.etcd".into(), "3etcd".into()] {
            match validate_name(&bad) {
                Err(Error::InvalidSpec { field, .. }) => assert_eq!(field, "metadata.name", "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn versions_parse_and_upgrade_paths_are_checked() {
        assert_eq!(parse_version("v3.6.16"), Some(Version { major: 3, minor: 6, patch: Some(16) }));
        assert_eq!(parse_version("3.6.16"), parse_version("v3.6.16"));
        assert_eq!(parse_version("3.6"), None);
        assert_eq!(parse_version("3.6.1.2"), None);
        let v = |s| parse_version(s).unwrap();
        assert!(check_version_change(&v("3.5.21"), &v("3.6.16")).is_ok());
        assert!(check_version_change(&v("3.6.16"), &v("3.6.16")).is_ok());
        assert!(check_version_change(&v("3.6.1"), &v("3.6.16")).is_ok());
        let refused = |a, b| match check_version_change(&v(a), &v(b)) {
            Err(Error::InvalidSpec { field, message }) => {
                assert_eq!(field, "spec.version");
                message
            }
            other => panic!("{other:?}"),
        };
        assert!(refused("3.6.16", "3.5.21").contains("downgrades are refused"));
        assert!(refused("3.6.16", "3.6.1").contains("downgrades are refused"));
        assert!(refused("3.4.30", "3.6.16").contains("one minor version at a time"));
        assert!(refused("3.6.16", "4.0.0").contains("skips a release"));
    }

    #[test]
    fn the_backup_schedule_and_its_time_zone_are_checked() {
        use statecraft_shared::backup::BackupPolicy;
        use statecraft_shared::s3::{S3CredentialsSecretRef, S3Location};
        let with = |schedule: &str, zone: Option<&str>| EtcdClusterSpec {
            backup: Some(BackupPolicy {
                schedule: schedule.into(),
                time_zone: zone.map(Into::into),
                retention: Default::default(),
                location: S3Location::new("b", "p", S3CredentialsSecretRef::new("s")),
                deadline: Default::default(),
            }),
            ..spec()
        };
        assert!(validate(&with("0 3 * * MON-FRI", Some("Europe/Berlin"))).is_ok());
        assert_eq!(refused(validate(&with("0 3 * * 8", None))).0, "spec.backup.schedule");
        let (field, message) = refused(validate(&with("0 3 * * *", Some("Europe/Berlinn"))));
        assert_eq!(field, "spec.backup.timeZone");
        assert!(message.contains("\"Europe/Berlinn\" is not an IANA time zone"), "{message}");
    }
}
