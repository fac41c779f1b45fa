//! The custom resources of `mysql.statecraft.io/v1alpha1`.

pub mod backup;
pub mod cluster;
pub mod restore;

pub use backup::{BinlogArchiveStatus, MySQLBackup, MySQLBackupSpec, MySQLBackupStatus};
pub use cluster::{
    AutoHeal, AutoScaling, AutoScalingStatus, Exporter, Flavor, MemberStatus, MySQLCluster, MySQLClusterSpec,
    MySQLClusterStatus, Reseeding, ScalingMetric, SemiSync, ServiceOptions, ServiceType, Storage, UpgradeStrategy,
    UpgradeStrategyType,
};
pub use restore::{MySQLRestore, MySQLRestoreSpec, MySQLRestoreStatus, RestoreTarget};
pub use statecraft_shared::backup::{BackupLocation, BackupPolicy, Retention};

/// API group of every resource.
pub const GROUP: &str = "mysql.statecraft.io";
