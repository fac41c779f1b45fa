//! The names a cluster's objects get, and so the longest cluster name that fits them.
//!
//! Every pool is a StatefulSet named `<cluster><pool suffix>` (`-controller`, `-broker`,
//! `-combined`), governed by a headless Service of the same name; the bootstrap Service is
//! `<cluster>-bootstrap` and the external listener's per-broker Services are
//! `<cluster>-external-<ordinal>`, the ordinal below 100 (`MAX_BROKERS`). A StatefulSet's
//! name leaves room for the pods' revision hash (52 characters at most, see
//! `statecraft_shared::names`), so the longest pool suffix, `-controller` (11), leaves 41;
//! the Services leave more (63 - 12 for `-external-99` = 51). Hence 41.

use statecraft_shared::names::{MAX_STATEFULSET_NAME, max_cluster_name};

/// Suffix of the controllers' StatefulSet and headless Service.
pub const CONTROLLER_SUFFIX: &str = "-controller";
/// Suffix of the brokers' StatefulSet and headless Service.
pub const BROKER_SUFFIX: &str = "-broker";
/// Suffix of the combined nodes' StatefulSet and headless Service.
pub const COMBINED_SUFFIX: &str = "-combined";

/// Suffixes of the Services not named after a StatefulSet, the per-broker external one with
/// the longest ordinal.
const SERVICE_SUFFIXES: &[&str] = &["-bootstrap", "-external-99"];

/// The longest name of a KafkaCluster: see the module's arithmetic.
pub const MAX_CLUSTER_NAME: usize = {
    let mut max = max_cluster_name(SERVICE_SUFFIXES);
    let pools = [CONTROLLER_SUFFIX, BROKER_SUFFIX, COMBINED_SUFFIX];
    let mut i = 0;
    while i < pools.len() {
        let room = MAX_STATEFULSET_NAME - pools[i].len();
        if room < max {
            max = room;
        }
        i += 1;
    }
    max
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_name_fits_the_controllers_statefulset() {
        assert_eq!(MAX_CLUSTER_NAME, 41);
        let name = "k".repeat(MAX_CLUSTER_NAME);
        assert_eq!(format!("{name}{CONTROLLER_SUFFIX}").len(), MAX_STATEFULSET_NAME);
        assert_eq!(SERVICE_SUFFIXES[1], format!("-external-{}", crate::api::cluster::MAX_BROKERS - 1));
        assert!(format!("{name}{}", SERVICE_SUFFIXES[1]).len() <= 63);
    }
}
