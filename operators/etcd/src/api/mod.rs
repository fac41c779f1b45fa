//! The custom resources of `etcd.statecraft.io/v1alpha1`.

pub mod backup;
pub mod cluster;
pub mod restore;

pub use backup::{EtcdBackup, EtcdBackupSpec, EtcdBackupStatus};
pub use cluster::{AutoHeal, Defragmentation, EtcdCluster, EtcdClusterSpec, EtcdClusterStatus, MemberStatus, Storage};
pub use restore::{EtcdRestore, EtcdRestoreSpec, EtcdRestoreStatus, RestoreTarget};
pub use statecraft_shared::backup::{BackupLocation, BackupPolicy, Retention};

/// API group of every resource.
pub const GROUP: &str = "etcd.statecraft.io";
