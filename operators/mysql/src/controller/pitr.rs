//! Point-in-time recovery, the pure part: which position a backup's Job archives binary
//! logs from, and which archive a restore to a point in time replays.
//!
//! Each backup's Job archives the primary's binary logs from the position of the cluster's
//! previous successful backup (in the same store) onward. A restore of backup `B` to time
//! `T` replays the archive that starts at `B`'s position and reaches past `T`: the archive of
//! a later backup. Until such a backup exists the restore waits for it.

use chrono::{DateTime, Utc};
use statecraft_shared::backup::SUCCEEDED;
use statecraft_shared::s3::S3Location;

use crate::api::{BinlogArchiveStatus, MySQLBackup};

/// Where a backup is stored: its own location, else its cluster's policy's (`policy`).
fn location_of<'a>(b: &'a MySQLBackup, policy: Option<&'a S3Location>) -> Option<&'a S3Location> {
    b.spec.backup.location.as_ref().or(policy)
}

fn succeeded(b: &MySQLBackup) -> bool {
    b.status.as_ref().is_some_and(|s| s.common.phase.as_deref() == Some(SUCCEEDED))
}

fn time(s: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?).ok().map(|t| t.with_timezone(&Utc))
}

/// The GTID position a new backup of `cluster` stored in `location` archives binary logs
/// from: that of the cluster's newest successful backup in the same store. `None` for the
/// first one (it archives nothing: there is no earlier dump to roll forward).
pub fn archive_since(
    backups: &[MySQLBackup],
    cluster: &str,
    location: &S3Location,
    policy: Option<&S3Location>,
) -> Option<String> {
    backups
        .iter()
        .filter(|b| b.spec.backup.cluster_name == cluster && succeeded(b) && location_of(b, policy) == Some(location))
        .filter_map(|b| {
            let s = b.status.as_ref()?;
            Some((time(s.common.completion_time.as_deref())?, s.gtid_position.clone()?))
        })
        .max_by_key(|(done, _)| *done)
        .map(|(_, gtid)| gtid)
}

/// The archive to replay after restoring `base` to reach `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// The MySQLBackup that archived it.
    pub backup: String,
    /// The archive.
    pub archive: BinlogArchiveStatus,
    /// Replay from here (the base's position).
    pub start: String,
}

/// Why no archive can be replayed yet, or ever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoReplay {
    /// The request cannot be met (a wrong time, a backup without position): the message says why.
    Invalid(String),
    /// No backup has archived up to the time yet; a later one will.
    Wait(String),
}

/// The archive among `backups` that holds every transaction from `base`'s position until
/// `at`, stored where `base` is: the earliest reaching past `at`.
pub fn covering_archive(
    backups: &[MySQLBackup],
    base: &MySQLBackup,
    at: DateTime<Utc>,
    policy: Option<&S3Location>,
) -> Result<Replay, NoReplay> {
    let name = base.metadata.name.as_deref().unwrap_or_default();
    let status = base.status.clone().unwrap_or_default();
    let Some(start) = status.gtid_position.clone() else {
        return Err(NoReplay::Invalid(format!("MySQLBackup {name} recorded no GTID position")));
    };
    let Some(done) = time(status.common.completion_time.as_deref()) else {
        return Err(NoReplay::Invalid(format!("MySQLBackup {name} recorded no completion time")));
    };
    if at < done {
        return Err(NoReplay::Invalid(format!(
            "{} is before MySQLBackup {name} completed ({}): its dump may already hold later transactions; restore an earlier backup",
            at.to_rfc3339(),
            done.to_rfc3339()
        )));
    }
    let location = location_of(base, policy);
    backups
        .iter()
        .filter(|b| b.spec.backup.cluster_name == base.spec.backup.cluster_name && succeeded(b))
        .filter(|b| location_of(b, policy) == location)
        .filter_map(|b| {
            let archive = b.status.as_ref()?.binlogs.clone()?;
            let until = time(Some(&archive.until))?;
            (archive.from_gtid_position == start && until >= at).then_some((until, b, archive))
        })
        .min_by_key(|(until, _, _)| *until)
        .map(|(_, b, archive)| Replay {
            backup: b.metadata.name.clone().unwrap_or_default(),
            archive,
            start: start.clone(),
        })
        .ok_or_else(|| {
            NoReplay::Wait(format!(
                "no backup of {} has archived the binary logs from {name}'s position {start} up to {} yet; the next backup taken after that time will",
                base.spec.backup.cluster_name,
                at.to_rfc3339()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{MySQLBackupSpec, MySQLBackupStatus};
    use statecraft_shared::backup::{BackupSpec, BackupStatus};
    use statecraft_shared::s3::S3CredentialsSecretRef;

    fn store(bucket: &str) -> S3Location {
        S3Location::new(bucket, "p", S3CredentialsSecretRef::new("s"))
    }

    fn backup(name: &str, done: &str, gtid: &str, archive: Option<(&str, &str)>) -> MySQLBackup {
        let mut b = MySQLBackup::new(name, MySQLBackupSpec { backup: BackupSpec::of_cluster("db") });
        b.status = Some(MySQLBackupStatus {
            common: BackupStatus {
                phase: Some(SUCCEEDED.into()),
                completion_time: Some(done.into()),
                ..Default::default()
            },
            gtid_position: Some(gtid.into()),
            binlogs: archive.map(|(from, until)| BinlogArchiveStatus {
                prefix: format!("_binlogs/db/{name}/"),
                files: 1,
                size: 10,
                from_gtid_position: from.into(),
                until: until.into(),
            }),
        });
        b
    }

    fn t(s: &str) -> DateTime<Utc> {
        time(Some(s)).unwrap()
    }

    fn chain() -> Vec<MySQLBackup> {
        vec![
            backup("b1", "2026-11-30T01:00:00Z", "0-100-10", None),
            backup("b2", "2026-11-30T02:00:00Z", "0-100-20", Some(("0-100-10", "2026-11-30T02:00:00Z"))),
            backup("b3", "2026-11-30T03:00:00Z", "0-100-30", Some(("0-100-20", "2026-11-30T03:00:00Z"))),
        ]
    }

    #[test]
    fn a_new_backup_archives_from_the_newest_success_in_the_same_store() {
        let policy = store("b");
        let mut backups = chain();
        assert_eq!(archive_since(&backups, "db", &policy, Some(&policy)).as_deref(), Some("0-100-30"));
        assert_eq!(archive_since(&backups, "other", &policy, Some(&policy)), None, "another cluster's");
        assert_eq!(archive_since(&backups, "db", &store("elsewhere"), Some(&policy)), None, "another store's");
        backups[2].status.as_mut().unwrap().common.phase = Some("Failed".into());
        assert_eq!(archive_since(&backups, "db", &policy, Some(&policy)).as_deref(), Some("0-100-20"));
        assert_eq!(archive_since(&[], "db", &policy, Some(&policy)), None, "the first backup archives nothing");
    }

    #[test]
    fn a_point_in_time_is_reached_with_the_next_backups_archive() {
        let policy = store("b");
        let backups = chain();
        let r = covering_archive(&backups, &backups[0], t("2026-11-30T01:30:00Z"), Some(&policy)).unwrap();
        assert_eq!((r.backup.as_str(), r.start.as_str()), ("b2", "0-100-10"));
        let r = covering_archive(&backups, &backups[1], t("2026-11-30T02:59:59Z"), Some(&policy)).unwrap();
        assert_eq!(r.backup, "b3");
        assert_eq!(r.archive.prefix, "_binlogs/db/b3/");
    }

    #[test]
    fn a_time_past_every_archive_waits_and_one_before_the_dump_is_refused() {
        let policy = store("b");
        let backups = chain();
        let wait = covering_archive(&backups, &backups[0], t("2026-11-30T02:30:00Z"), Some(&policy)).unwrap_err();
        assert!(matches!(&wait, NoReplay::Wait(m) if m.contains("0-100-10")), "{wait:?}");
        let wait = covering_archive(&backups, &backups[2], t("2026-11-30T03:30:00Z"), Some(&policy)).unwrap_err();
        assert!(matches!(wait, NoReplay::Wait(_)));
        let early = covering_archive(&backups, &backups[1], t("2026-11-30T01:30:00Z"), Some(&policy)).unwrap_err();
        assert!(matches!(&early, NoReplay::Invalid(m) if m.contains("before MySQLBackup b2 completed")), "{early:?}");
        let other_store = covering_archive(&backups, &backups[0], t("2026-11-30T01:30:00Z"), Some(&store("x")));
        assert!(other_store.is_ok(), "every backup follows the same policy");
        let mut moved = backups.clone();
        moved[1].spec.backup.location = Some(store("x"));
        let r = covering_archive(&moved, &moved[0], t("2026-11-30T01:30:00Z"), Some(&policy));
        assert!(matches!(r, Err(NoReplay::Wait(_))), "an archive in another store is not used: {r:?}");
    }
}
