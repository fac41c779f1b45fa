//! What the CRD schema and its CEL rules cannot check, as one pure function: supported
//! versions per flavor, server settings the operator owns or refuses ([`settings`]),
//! semi-sync timeout bounds, the backup schedule and retention. Every error names the field (`Error::InvalidSpec`).

use std::collections::BTreeMap;

use statecraft_shared::backup::BackupSpec;
use statecraft_shared::names::check_cluster_name;
pub use statecraft_shared::version::Version;
use statecraft_shared::version::check_supported;
use statecraft_shared::{Error, Result};

use crate::api::cluster::{
    MAX_RESEED_BROKEN_AFTER_SECONDS, MAX_SEMI_SYNC_TIMEOUT_SECONDS, MIN_RESEED_BROKEN_AFTER_SECONDS,
    MIN_SEMI_SYNC_TIMEOUT_SECONDS, SAFE_SEMI_SYNC_TIMEOUT_SECONDS, SCALE_IN_AFTER_SECONDS, SCALE_OUT_AFTER_SECONDS,
};
use crate::api::{AutoScaling, Flavor, MySQLClusterSpec, MySQLRestoreSpec, ScalingMetric};
use crate::build::MAX_CLUSTER_NAME;
use crate::image::{default_exporter_image, default_image};

/// Release series the operator supports, per flavor.
pub fn supported_series(flavor: Flavor) -> &'static [(u32, u32)] {
    match flavor {
        // LTS series; semi-sync is built into the server since 10.3.
        Flavor::Mariadb => &[(10, 6), (10, 11), (11, 4), (11, 8)],
        // 8.0.26 introduced the SOURCE/REPLICA statements and semi-sync plugin names used here.
        Flavor::Mysql => &[(8, 0), (8, 4)],
    }
}

/// Lowest patch release supported in a series, where not every one is.
fn minimum_patch(flavor: Flavor, series: (u32, u32)) -> u32 {
    match (flavor, series) {
        (Flavor::Mysql, (8, 0)) => 26,
        _ => 0,
    }
}

pub mod settings;

pub use settings::normalize_setting;

/// A spec that passed [`validate`]; builders take only this.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSpec {
    /// The spec as the user wrote it.
    pub spec: MySQLClusterSpec,
    /// The parsed version.
    pub version: Version,
    /// The image to run: the override, or the flavor's default for the version.
    pub image: String,
    /// Server settings, keys normalised.
    pub server_config: BTreeMap<String, String>,
    /// Semi-sync timeout in milliseconds, as the servers take it.
    pub semi_sync_timeout_ms: u64,
    /// The metrics sidecar's image, when `spec.exporter` is enabled: the override or the
    /// default.
    pub exporter_image: Option<String>,
}

/// Checks what the schema cannot. Pure.
pub fn validate(spec: &MySQLClusterSpec) -> Result<ValidSpec> {
    let version = Version::parse(&spec.version).ok_or_else(|| {
        Error::invalid_spec("spec.version", format!("{:?} is not a version like 10.11 or 8.4.3", spec.version))
    })?;
    check_supported("spec.version", flavor_name(spec.flavor), &version, supported_series(spec.flavor))?;
    let min_patch = minimum_patch(spec.flavor, version.series());
    if version.patch.is_some_and(|p| p < min_patch) {
        return Err(Error::invalid_spec(
            "spec.version",
            format!(
                "{} {version} is too old: {}.{}.{min_patch} or later is needed",
                flavor_name(spec.flavor),
                version.major,
                version.minor
            ),
        ));
    }

    let image = match &spec.image {
        Some(image) => {
            if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
                return Err(Error::invalid_spec("spec.image", "must be an image reference without spaces"));
            }
            image.clone()
        }
        None => default_image(spec.flavor, &version),
    };
    let exporter_image =
        spec.exporter.enabled.then(|| spec.exporter.image.clone().unwrap_or_else(default_exporter_image));

    if !matches!(spec.replicas, 1 | 3 | 5) {
        return Err(Error::invalid_spec("spec.replicas", format!("must be 1, 3 or 5, not {}", spec.replicas)));
    }

    if let Some(scaling) = &spec.auto_scaling {
        validate_auto_scaling(scaling, spec.replicas)?;
    }

    let mut server_config = BTreeMap::new();
    for (key, value) in &spec.server_config {
        let field = format!("spec.serverConfig.{key}");
        let norm = normalize_setting(key);
        if norm.is_empty() || !norm.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return Err(Error::invalid_spec(field, "a setting name has only letters, digits, '-' and '_'"));
        }
        if let Some(why) = settings::refusal(&norm, value) {
            return Err(Error::invalid_spec(field, why));
        }
        if value.contains(['\n', '\r', '\0']) {
            return Err(Error::invalid_spec(field, "a value must be on one line"));
        }
        if server_config.insert(norm, value.trim().to_string()).is_some() {
            return Err(Error::invalid_spec(field, "is given twice (names differing only in case, '-' or '_')"));
        }
    }

    let timeout = spec.semi_sync.timeout_seconds;
    if !(MIN_SEMI_SYNC_TIMEOUT_SECONDS..=MAX_SEMI_SYNC_TIMEOUT_SECONDS).contains(&timeout) {
        return Err(Error::invalid_spec(
            "spec.semiSync.timeoutSeconds",
            format!(
                "must be between {MIN_SEMI_SYNC_TIMEOUT_SECONDS} and {MAX_SEMI_SYNC_TIMEOUT_SECONDS}, not {timeout}: \
                 a short timeout silently falls back to asynchronous replication"
            ),
        ));
    }
    if timeout < SAFE_SEMI_SYNC_TIMEOUT_SECONDS && !spec.semi_sync.accept_async_fallback {
        return Err(Error::invalid_spec(
            "spec.semiSync.timeoutSeconds",
            format!(
                "{timeout} is below {SAFE_SEMI_SYNC_TIMEOUT_SECONDS}: an isolated primary would fall back to asynchronous \
                 replication and acknowledge writes a failover then discards; set spec.semiSync.acceptAsyncFallback: true \
                 to accept that"
            ),
        ));
    }

    if let Some(after) = spec.auto_heal.reseed_broken_after_seconds
        && !(MIN_RESEED_BROKEN_AFTER_SECONDS..=MAX_RESEED_BROKEN_AFTER_SECONDS).contains(&after)
    {
        return Err(Error::invalid_spec(
            "spec.autoHeal.reseedBrokenAfterSeconds",
            format!(
                "must be between {MIN_RESEED_BROKEN_AFTER_SECONDS} and {MAX_RESEED_BROKEN_AFTER_SECONDS}, not {after}: \
                 a shorter wait re-seeds replicas that a retry would mend"
            ),
        ));
    }

    if let Some(backup) = &spec.backup {
        backup.validate("spec.backup")?;
    }

    Ok(ValidSpec {
        spec: spec.clone(),
        version,
        image,
        server_config,
        semi_sync_timeout_ms: timeout as u64 * 1000,
        exporter_image,
    })
}

/// The checks of `spec.autoScaling` that the schema's CEL rules also make, for specs that
/// did not pass through them (a restore's target).
fn validate_auto_scaling(a: &AutoScaling, replicas: i32) -> Result<()> {
    for (field, n) in
        [("spec.autoScaling.minReplicas", a.min_replicas), ("spec.autoScaling.maxReplicas", a.max_replicas)]
    {
        if !matches!(n, 1 | 3 | 5) {
            return Err(Error::invalid_spec(field, format!("must be 1, 3 or 5, not {n}")));
        }
    }
    if a.min_replicas > a.max_replicas {
        return Err(Error::invalid_spec(
            "spec.autoScaling.minReplicas",
            format!("must not be above maxReplicas ({} > {})", a.min_replicas, a.max_replicas),
        ));
    }
    if !(a.min_replicas..=a.max_replicas).contains(&replicas) {
        return Err(Error::invalid_spec(
            "spec.replicas",
            format!("must be between spec.autoScaling.minReplicas and maxReplicas, not {replicas}"),
        ));
    }
    if a.metric == ScalingMetric::ReplicationLag && a.min_replicas < 3 {
        return Err(Error::invalid_spec(
            "spec.autoScaling.minReplicas",
            "must be 3 or 5 with the ReplicationLag metric: a single server has no replica to lag",
        ));
    }
    if a.scale_out_above < 1 {
        return Err(Error::invalid_spec(
            "spec.autoScaling.scaleOutAbove",
            format!("must be at least 1, not {}", a.scale_out_above),
        ));
    }
    if a.scale_in_below < 0 || a.scale_in_below >= a.scale_out_above {
        return Err(Error::invalid_spec(
            "spec.autoScaling.scaleInBelow",
            format!(
                "must be at least 0 and below scaleOutAbove ({}), not {}: otherwise the cluster would scale in and \
                 out in turn",
                a.scale_out_above, a.scale_in_below
            ),
        ));
    }
    for (field, value, range) in [
        ("spec.autoScaling.scaleOutAfterSeconds", a.scale_out_after_seconds, SCALE_OUT_AFTER_SECONDS),
        ("spec.autoScaling.scaleInAfterSeconds", a.scale_in_after_seconds, SCALE_IN_AFTER_SECONDS),
    ] {
        if !range.contains(&value) {
            let (low, high) = range.into_inner();
            return Err(Error::invalid_spec(field, format!("must be between {low} and {high}, not {value}")));
        }
    }
    Ok(())
}

/// Checks the cluster's name: it names the StatefulSet, its pods and the Services (the
/// CRD's CEL rule makes the same check for clusters created since it exists).
pub fn validate_name(name: &str) -> Result<()> {
    check_cluster_name("metadata.name", name, MAX_CLUSTER_NAME)
}

/// Refuses a version change the servers cannot take: a downgrade to an older series.
pub fn check_version_change(flavor: Flavor, observed: &str, desired: &Version) -> Result<()> {
    let Some(observed) = Version::parse(observed) else { return Ok(()) };
    if desired.series() < observed.series() {
        return Err(Error::invalid_spec(
            "spec.version",
            format!("downgrading {} from {observed} to {desired} is not supported", flavor_name(flavor)),
        ));
    }
    Ok(())
}

/// Checks a MySQLRestore's spec: the target's name and cluster spec (as [`validate`]), and
/// the point in time. Returns the target's validated spec.
pub fn validate_restore(spec: &MySQLRestoreSpec) -> Result<ValidSpec> {
    let source = &spec.source;
    match (&source.backup_name, &source.location) {
        (Some(name), None) if !name.is_empty() => {}
        (None, Some(location)) => {
            if location.store.bucket.is_empty() {
                return Err(Error::invalid_spec("spec.location.store.bucket", "must not be empty"));
            }
            if location.key.is_empty() {
                return Err(Error::invalid_spec("spec.location.key", "must not be empty"));
            }
        }
        _ => return Err(Error::invalid_spec("spec.backupName", "exactly one of backupName and location must be set")),
    }
    if let Some(t) = &spec.point_in_time {
        if source.backup_name.is_none() {
            return Err(Error::invalid_spec(
                "spec.pointInTime",
                "needs spec.backupName: the binary logs are found through the cluster's MySQLBackups",
            ));
        }
        chrono::DateTime::parse_from_rfc3339(t).map_err(|e| {
            Error::invalid_spec(
                "spec.pointInTime",
                format!("{t:?} is not an RFC 3339 time such as 2026-01-31T12:00:00Z: {e}"),
            )
        })?;
    }
    check_cluster_name("spec.target.name", &spec.target.name, MAX_CLUSTER_NAME)?;
    validate(&spec.target.spec).map_err(|e| match e {
        Error::InvalidSpec { field, message } => {
            Error::invalid_spec(field.replacen("spec.", "spec.target.spec.", 1), message)
        }
        other => other,
    })
}

/// Checks a MySQLBackup's spec (the core it flattens: nothing else is in it).
pub fn validate_backup(spec: &BackupSpec) -> Result<()> {
    if spec.cluster_name.is_empty() {
        return Err(Error::invalid_spec("spec.clusterName", "must name a MySQLCluster"));
    }
    if spec.location.as_ref().is_some_and(|l| l.bucket.is_empty()) {
        return Err(Error::invalid_spec("spec.location.bucket", "must not be empty"));
    }
    Ok(())
}

fn flavor_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Mariadb => "MariaDB",
        Flavor::Mysql => "MySQL",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{AutoHeal, BackupPolicy, Retention, SemiSync, ServiceOptions, Storage, UpgradeStrategy};
    use statecraft_shared::backup::RestoreSource;
    use statecraft_shared::s3::S3Location;

    pub(crate) fn spec() -> MySQLClusterSpec {
        MySQLClusterSpec {
            flavor: Flavor::Mariadb,
            version: "10.11".into(),
            image: None,
            replicas: 3,
            storage: Storage { size: "1Gi".into(), storage_class_name: None, fix_ownership: false },
            resources: None,
            pod_template: Default::default(),
            network_policy: None,
            server_config: BTreeMap::new(),
            semi_sync: SemiSync::default(),
            backup: None,
            service: ServiceOptions::default(),
            paused: false,
            stopped: false,
            upgrade_strategy: UpgradeStrategy::default(),
            auto_heal: AutoHeal::default(),
            auto_scaling: None,
            exporter: Default::default(),
            tls: None,
        }
    }

    pub(crate) fn valid() -> ValidSpec {
        validate(&spec()).expect("the test spec is valid")
    }

    fn field_of(err: Error) -> String {
        match err {
            Error::InvalidSpec { field, .. } => field,
            other => panic!("expected InvalidSpec, got {other}"),
        }
    }

    fn location() -> S3Location {
        serde_json::from_value(serde_json::json!({"bucket": "b", "credentialsSecret": {"name": "s3"}})).unwrap()
    }

    #[test]
    fn a_plain_spec_is_valid_and_gets_the_default_image() {
        let v = valid();
        assert_eq!(v.version, Version { major: 10, minor: 11, patch: None });
        assert_eq!(v.image, "docker.io/library/mariadb:10.11");
        assert_eq!(v.semi_sync_timeout_ms, 4_294_967_000);
    }

    #[test]
    fn versions_are_checked_per_flavor() {
        for (flavor, version, ok) in [
            (Flavor::Mariadb, "10.11", true),
            (Flavor::Mariadb, "10.11.6", true),
            (Flavor::Mariadb, "11.4", true),
            (Flavor::Mariadb, "10.5", false),
            (Flavor::Mariadb, "8.4", false),
            (Flavor::Mysql, "8.4", true),
            (Flavor::Mysql, "8.0.36", true),
            (Flavor::Mysql, "8.0.25", false),
            (Flavor::Mysql, "5.7", false),
            (Flavor::Mysql, "10.11", false),
            (Flavor::Mariadb, "latest", false),
            (Flavor::Mariadb, "10", false),
            (Flavor::Mariadb, "10.11.6.1", false),
            (Flavor::Mariadb, "10.x", false),
            (Flavor::Mariadb, "", false),
        ] {
            let s = MySQLClusterSpec { flavor, version: version.into(), ..spec() };
            match validate(&s) {
                Ok(_) => assert!(ok, "{flavor:?} {version} should be refused"),
                Err(e) => {
                    assert!(!ok, "{flavor:?} {version} should be accepted: {e}");
                    assert_eq!(field_of(e), "spec.version");
                }
            }
        }
    }

    #[test]
    fn unsupported_version_message_lists_the_supported_ones() {
        let e = validate(&MySQLClusterSpec { version: "10.5".into(), ..spec() }).unwrap_err().to_string();
        assert!(e.contains("spec.version") && e.contains("10.11") && e.contains("MariaDB 10.5"), "{e}");
    }

    #[test]
    fn image_override_is_used_and_checked() {
        let v = validate(&MySQLClusterSpec { image: Some("registry.local/mariadb:10.11.9".into()), ..spec() }).unwrap();
        assert_eq!(v.image, "registry.local/mariadb:10.11.9");
        let e = validate(&MySQLClusterSpec { image: Some("bad image".into()), ..spec() }).unwrap_err();
        assert_eq!(field_of(e), "spec.image");
    }

    #[test]
    fn replicas_must_be_1_3_or_5() {
        for (n, ok) in [(0, false), (1, true), (2, false), (3, true), (4, false), (5, true), (7, false)] {
            let r = validate(&MySQLClusterSpec { replicas: n, ..spec() });
            assert_eq!(r.is_ok(), ok, "replicas {n}");
            if let Err(e) = r {
                assert_eq!(field_of(e), "spec.replicas");
            }
        }
    }

    fn scaling() -> AutoScaling {
        AutoScaling {
            min_replicas: 1,
            max_replicas: 5,
            metric: ScalingMetric::ClientConnections,
            scale_out_above: 100,
            scale_in_below: 10,
            scale_out_after_seconds: 60,
            scale_in_after_seconds: 600,
        }
    }

    fn with_scaling(replicas: i32, a: AutoScaling) -> MySQLClusterSpec {
        MySQLClusterSpec { replicas, auto_scaling: Some(a), ..spec() }
    }

    #[test]
    fn valid_auto_scaling_passes() {
        assert_eq!(validate(&with_scaling(3, scaling())).unwrap().spec.auto_scaling, Some(scaling()));
        for (replicas, min, max) in [(1, 1, 1), (1, 1, 3), (3, 3, 3), (5, 3, 5), (5, 5, 5)] {
            let a = AutoScaling { min_replicas: min, max_replicas: max, ..scaling() };
            assert!(validate(&with_scaling(replicas, a)).is_ok(), "{replicas} in {min}..={max}");
        }
        let lag = AutoScaling { metric: ScalingMetric::ReplicationLag, min_replicas: 3, ..scaling() };
        assert!(validate(&with_scaling(3, lag)).is_ok());
        // The bounds of the windows are included; scaleInBelow 0 never scales in, and is allowed.
        for (out, into) in [(10, 30), (3600, 86_400)] {
            let a = AutoScaling { scale_out_after_seconds: out, scale_in_after_seconds: into, ..scaling() };
            assert!(validate(&with_scaling(3, a)).is_ok(), "{out} s and {into} s");
        }
        let a = AutoScaling { scale_out_above: 1, scale_in_below: 0, ..scaling() };
        assert!(validate(&with_scaling(3, a)).is_ok());
    }

    #[test]
    fn auto_scaling_bounds_must_be_cluster_sizes() {
        for n in [0, 2, 4, 6, -1] {
            let e = validate(&with_scaling(3, AutoScaling { min_replicas: n, ..scaling() })).unwrap_err();
            assert!(e.to_string().contains(&format!("not {n}")), "{e}");
            assert_eq!(field_of(e), "spec.autoScaling.minReplicas", "minReplicas {n}");
            let e = validate(&with_scaling(3, AutoScaling { max_replicas: n, ..scaling() })).unwrap_err();
            assert_eq!(field_of(e), "spec.autoScaling.maxReplicas", "maxReplicas {n}");
        }
    }

    #[test]
    fn auto_scaling_minimum_must_not_be_above_the_maximum() {
        let e = validate(&with_scaling(3, AutoScaling { min_replicas: 5, max_replicas: 3, ..scaling() })).unwrap_err();
        assert!(e.to_string().contains("5 > 3"), "{e}");
        assert_eq!(field_of(e), "spec.autoScaling.minReplicas");
    }

    #[test]
    fn spec_replicas_must_be_within_the_auto_scaling_bounds() {
        for (replicas, min, max) in [(1, 3, 5), (5, 1, 3), (3, 5, 5), (3, 1, 1)] {
            let a = AutoScaling { min_replicas: min, max_replicas: max, ..scaling() };
            let e = validate(&with_scaling(replicas, a)).unwrap_err();
            assert_eq!(field_of(e), "spec.replicas", "{replicas} outside {min}..={max}");
        }
    }

    #[test]
    fn replication_lag_needs_replicas_at_the_minimum() {
        let a = AutoScaling { metric: ScalingMetric::ReplicationLag, min_replicas: 1, ..scaling() };
        let e = validate(&with_scaling(3, a)).unwrap_err();
        assert!(e.to_string().contains("ReplicationLag"), "{e}");
        assert_eq!(field_of(e), "spec.autoScaling.minReplicas");
    }

    #[test]
    fn scale_in_threshold_must_be_below_the_scale_out_threshold() {
        for (above, below) in [(100, 100), (100, 150), (5, -1)] {
            let a = AutoScaling { scale_out_above: above, scale_in_below: below, ..scaling() };
            let e = validate(&with_scaling(3, a)).unwrap_err();
            assert_eq!(field_of(e), "spec.autoScaling.scaleInBelow", "in below {below}, out above {above}");
        }
    }

    #[test]
    fn auto_scaling_windows_are_bounded() {
        for (seconds, ok) in [(5, false), (9, false), (10, true), (3600, true), (3601, false), (-60, false)] {
            let r = validate(&with_scaling(3, AutoScaling { scale_out_after_seconds: seconds, ..scaling() }));
            assert_eq!(r.is_ok(), ok, "scaleOutAfterSeconds {seconds}");
            if let Err(e) = r {
                assert_eq!(field_of(e), "spec.autoScaling.scaleOutAfterSeconds");
            }
        }
        for (seconds, ok) in [(10, false), (29, false), (30, true), (86_400, true), (86_401, false)] {
            let r = validate(&with_scaling(3, AutoScaling { scale_in_after_seconds: seconds, ..scaling() }));
            assert_eq!(r.is_ok(), ok, "scaleInAfterSeconds {seconds}");
            if let Err(e) = r {
                assert_eq!(field_of(e), "spec.autoScaling.scaleInAfterSeconds");
            }
        }
    }

    #[test]
    fn a_restore_target_with_bad_auto_scaling_names_the_target_field() {
        use crate::api::RestoreTarget;
        let restore = MySQLRestoreSpec {
            source: RestoreSource { backup_name: Some("b".into()), location: None },
            point_in_time: None,
            target: RestoreTarget {
                name: "copy".into(),
                spec: with_scaling(3, AutoScaling { scale_in_below: 100, ..scaling() }),
            },
            deadline: Default::default(),
        };
        assert_eq!(field_of(validate_restore(&restore).unwrap_err()), "spec.target.spec.autoScaling.scaleInBelow");
    }

    #[test]
    fn owned_server_settings_are_refused_in_any_spelling() {
        for key in [
            "server_id",
            "server-id",
            "SERVER_ID",
            "loose-server-id",
            "gtid_mode",
            "gtid-strict-mode",
            "read_only",
            "super-read-only",
            "log_bin",
            "rpl_semi_sync_master_timeout",
            "rpl-semi-sync-source-enabled",
            "sync_binlog",
            "datadir",
        ] {
            let s = MySQLClusterSpec { server_config: [(key.to_string(), "1".to_string())].into(), ..spec() };
            let e = validate(&s).unwrap_err();
            assert!(e.to_string().contains("set by the operator"), "{key}: {e}");
            assert_eq!(field_of(e), format!("spec.serverConfig.{key}"));
        }
    }

    #[test]
    fn settings_that_break_replication_or_recovery_are_refused_naming_the_key() {
        for (key, value, why) in [
            ("Slave-Skip-Errors", "all", "diverge"),
            ("replicate_wild_ignore_table", "db.%", "filters"),
            ("binlog-do-db", "app", "filters"),
            ("expire_logs_days", "7", "purged binary logs"),
            ("loose_sync_binlog", "0", "set by the operator to 1"),
            ("sync_relay_log", "1", "relay log"),
            ("skip-log-bin", "", "GTID replication"),
            ("innodb_doublewrite", "OFF", "torn pages"),
        ] {
            let s = MySQLClusterSpec { server_config: [(key.to_string(), value.to_string())].into(), ..spec() };
            let e = validate(&s).unwrap_err();
            assert!(e.to_string().contains(why), "{key}: {e}");
            assert_eq!(field_of(e), format!("spec.serverConfig.{key}"));
        }
        let on = MySQLClusterSpec { server_config: [("innodb_doublewrite".into(), "ON".into())].into(), ..spec() };
        assert!(validate(&on).is_ok(), "the doublewrite buffer may be named as long as it stays on");
    }

    #[test]
    fn user_server_settings_are_normalised() {
        let s =
            MySQLClusterSpec { server_config: [("Max-Connections".to_string(), " 500 ".to_string())].into(), ..spec() };
        assert_eq!(validate(&s).unwrap().server_config, BTreeMap::from([("max_connections".into(), "500".into())]));
    }

    #[test]
    fn malformed_server_settings_are_refused() {
        for (k, v) in [("max connections", "1"), ("a=b", "1"), ("", "1"), ("max_connections", "1\n[client]")] {
            let s = MySQLClusterSpec { server_config: [(k.to_string(), v.to_string())].into(), ..spec() };
            assert_eq!(field_of(validate(&s).unwrap_err()), format!("spec.serverConfig.{k}"));
        }
        let s = MySQLClusterSpec {
            server_config: [("max-connections".into(), "1".into()), ("max_connections".into(), "2".into())].into(),
            ..spec()
        };
        assert!(field_of(validate(&s).unwrap_err()).starts_with("spec.serverConfig.max"));
    }

    #[test]
    fn reseed_wait_bounds() {
        for (t, ok) in [(29, false), (30, true), (604_800, true), (604_801, false), (-5, false)] {
            let auto_heal = AutoHeal { reseed_errant: false, reseed_broken_after_seconds: Some(t) };
            let r = validate(&MySQLClusterSpec { auto_heal, ..spec() });
            assert_eq!(r.is_ok(), ok, "{t} s");
            if let Err(e) = r {
                assert_eq!(field_of(e), "spec.autoHeal.reseedBrokenAfterSeconds");
            }
        }
    }

    #[test]
    fn semi_sync_timeout_bounds() {
        for (t, ok) in [(59, false), (60, true), (4_294_967, true), (4_294_968, false), (0, false), (-1, false)] {
            let semi_sync = SemiSync { enabled: true, timeout_seconds: t, accept_async_fallback: true };
            let r = validate(&MySQLClusterSpec { semi_sync, ..spec() });
            assert_eq!(r.is_ok(), ok, "timeout {t}");
            if let Err(e) = r {
                assert_eq!(field_of(e), "spec.semiSync.timeoutSeconds");
            }
        }
    }

    #[test]
    fn a_timeout_below_a_day_is_an_explicit_opt_out() {
        for (t, accept, ok) in [(86_399, false, false), (60, false, false), (86_400, false, true), (60, true, true)] {
            let semi_sync = SemiSync { enabled: true, timeout_seconds: t, accept_async_fallback: accept };
            let r = validate(&MySQLClusterSpec { semi_sync, ..spec() });
            assert_eq!(r.is_ok(), ok, "timeout {t}, accept {accept}");
            if let Err(e) = r {
                let text = e.to_string();
                assert!(
                    text.contains("spec.semiSync.timeoutSeconds") && text.contains("acceptAsyncFallback"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn backup_schedule_and_retention_are_checked() {
        let with = |schedule: &str, max_age: Option<&str>, keep_last: Option<i32>| MySQLClusterSpec {
            backup: Some(BackupPolicy {
                schedule: schedule.into(),
                time_zone: None,
                retention: Retention { keep_last, max_age: max_age.map(Into::into) },
                location: location(),
                deadline: Default::default(),
            }),
            ..spec()
        };
        assert!(validate(&with("0 3 * * *", Some("7d"), Some(7))).is_ok());
        assert!(validate(&with("*/15 1-5,22 1 */2 0-6", None, None)).is_ok());
        assert!(validate(&with("30 2 * JAN-MAR sun", None, None)).is_ok());
        let zoned = |zone: &str| {
            let mut spec = with("0 3 * * *", None, None);
            if let Some(backup) = spec.backup.as_mut() {
                backup.time_zone = Some(zone.into());
            }
            validate(&spec)
        };
        assert!(zoned("Europe/Berlin").is_ok());
        let err = zoned("Mars/Olympus").unwrap_err();
        assert!(err.to_string().contains("\"Mars/Olympus\" is not an IANA time zone"), "{err}");
        assert_eq!(field_of(err), "spec.backup.timeZone");
        for bad in
            ["0 3 * *", "60 3 * * *", "0 24 * * *", "0 3 0 * *", "0 3 * 13 *", "0 3 * * 8", "a b c d e", "*/0 * * * *"]
        {
            assert_eq!(field_of(validate(&with(bad, None, None)).unwrap_err()), "spec.backup.schedule", "{bad}");
        }
        for bad in ["7", "7w", "d", "-1d", "0d"] {
            assert_eq!(
                field_of(validate(&with("0 3 * * *", Some(bad), None)).unwrap_err()),
                "spec.backup.retention.maxAge",
                "{bad}"
            );
        }
        assert_eq!(
            field_of(validate(&with("0 3 * * *", None, Some(0))).unwrap_err()),
            "spec.backup.retention.keepLast"
        );
    }

    #[test]
    fn restores_are_checked_and_errors_name_the_target_fields() {
        use crate::api::{BackupLocation, RestoreTarget};
        let restore = MySQLRestoreSpec {
            source: RestoreSource { backup_name: Some("b".into()), location: None },
            point_in_time: Some("2026-01-31T12:00:00Z".into()),
            target: RestoreTarget { name: "copy".into(), spec: spec() },
            deadline: Default::default(),
        };
        assert_eq!(validate_restore(&restore).unwrap().spec, spec());
        let bad_time = MySQLRestoreSpec { point_in_time: Some("yesterday".into()), ..restore.clone() };
        assert_eq!(field_of(validate_restore(&bad_time).unwrap_err()), "spec.pointInTime");
        let both = MySQLRestoreSpec {
            source: RestoreSource {
                location: Some(BackupLocation { store: location(), key: "k".into() }),
                ..restore.source.clone()
            },
            ..restore.clone()
        };
        assert_eq!(field_of(validate_restore(&both).unwrap_err()), "spec.backupName");
        let neither = MySQLRestoreSpec { source: RestoreSource::default(), ..restore.clone() };
        assert_eq!(field_of(validate_restore(&neither).unwrap_err()), "spec.backupName");
        let explicit = |key: &str| RestoreSource {
            backup_name: None,
            location: Some(BackupLocation { store: location(), key: key.into() }),
        };
        let explicit_empty = MySQLRestoreSpec { source: explicit(""), ..restore.clone() };
        assert_eq!(field_of(validate_restore(&explicit_empty).unwrap_err()), "spec.location.key");
        let explicit_pitr = MySQLRestoreSpec { source: explicit("db/x.sql"), ..restore.clone() };
        assert_eq!(field_of(validate_restore(&explicit_pitr).unwrap_err()), "spec.pointInTime");
        let bad_target = MySQLRestoreSpec {
            target: RestoreTarget { name: "copy".into(), spec: MySQLClusterSpec { replicas: 2, ..spec() } },
            ..restore.clone()
        };
        assert_eq!(field_of(validate_restore(&bad_target).unwrap_err()), "spec.target.spec.replicas");
        let long_name =
            MySQLRestoreSpec { target: RestoreTarget { name: "x".repeat(53), spec: spec() }, ..restore.clone() };
        assert_eq!(field_of(validate_restore(&long_name).unwrap_err()), "spec.target.name");
        let dotted =
            MySQLRestoreSpec { target: RestoreTarget { name: "copy.1".into(), spec: spec() }, ..restore.clone() };
        assert_eq!(field_of(validate_restore(&dotted).unwrap_err()), "spec.target.name");
    }

    #[test]
    fn backups_are_checked() {
        let backup = |cluster_name: &str, location| BackupSpec { location, ..BackupSpec::of_cluster(cluster_name) };
        assert!(validate_backup(&backup("db", None)).is_ok());
        let e = validate_backup(&backup("", None)).unwrap_err();
        assert_eq!(field_of(e), "spec.clusterName");
        let mut l = location();
        l.bucket.clear();
        let e = validate_backup(&backup("db", Some(l))).unwrap_err();
        assert_eq!(field_of(e), "spec.location.bucket");
    }

    #[test]
    fn names_and_downgrades() {
        assert!(validate_name("db").is_ok());
        assert!(validate_name(&"a".repeat(52)).is_ok());
        assert_eq!(field_of(validate_name(&"a".repeat(53)).unwrap_err()), "metadata.name");
        // Service names are DNS-1035 labels: no dot, no leading digit.
        assert_eq!(field_of(validate_name("my.db").unwrap_err()), "metadata.name");
        assert_eq!(field_of(validate_name("1db").unwrap_err()), "metadata.name");
        let v = |s| Version::parse(s).unwrap();
        assert!(check_version_change(Flavor::Mariadb, "10.6.1", &v("10.11")).is_ok());
        assert!(check_version_change(Flavor::Mariadb, "10.11.6", &v("10.11")).is_ok());
        let e = check_version_change(Flavor::Mariadb, "11.4", &v("10.11")).unwrap_err();
        assert!(e.to_string().contains("downgrading"), "{e}");
        assert_eq!(field_of(e), "spec.version");
    }
}
