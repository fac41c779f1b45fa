//! The custom resources of `mysql.statecraft.io/v1alpha1`.

pub mod backup;
pub mod cluster;
pub mod database;
pub mod restore;
pub mod user;

pub use backup::{BinlogArchiveStatus, MySQLBackup, MySQLBackupSpec, MySQLBackupStatus};
pub use cluster::{
    AutoHeal, AutoScaling, AutoScalingStatus, Exporter, Flavor, MemberStatus, MySQLCluster, MySQLClusterSpec,
    MySQLClusterStatus, Reseeding, ScalingMetric, SemiSync, ServiceOptions, ServiceType, Storage, Tls, UpgradeStrategy,
    UpgradeStrategyType,
};
pub use database::{MySQLDatabase, MySQLDatabaseSpec, MySQLDatabaseStatus};
pub use restore::{MySQLRestore, MySQLRestoreSpec, MySQLRestoreStatus, RestoreTarget};
pub use statecraft_shared::backup::{BackupLocation, BackupPolicy, Retention};
pub use user::{
    DeletionPolicy, Grant, Limits, MySQLUser, MySQLUserSpec, MySQLUserStatus, PasswordSecretRef, Privilege,
};

/// API group of every resource.
pub const GROUP: &str = "mysql.statecraft.io";
