//! Configuration applied without restarts: the cluster-wide dynamic defaults.
//!
//! Keys Kafka accepts cluster-wide at runtime are written with IncrementalAlterConfigs on
//! [`ConfigResource::ClusterDefault`] (`BROKER ""`) and never roll a node; the caller has
//! already kept only those keys of the desired configuration.
//!
//! The operator owns the cluster-wide dynamic configuration: a cluster-wide dynamic default
//! that the spec does not ask for is deleted, whoever set it (`kafka-configs --alter
//! --entity-default` by hand included), so that the spec is the one place that says how the
//! cluster runs. Per-broker and per-topic overrides are not touched here.
//!
//! [`ConfigResource::ClusterDefault`]: crate::observed::ConfigResource::ClusterDefault

use std::collections::BTreeMap;

use crate::observed::{Config, ConfigChange, ConfigSource};

/// The changes that bring the cluster-wide dynamic defaults `observed` (DescribeConfigs of
/// `BROKER ""`) to `desired`: a [`ConfigChange::Set`] for each desired key whose observed
/// value differs, then a [`ConfigChange::Delete`] for each dynamic default no longer
/// desired, both by key. Empty when they agree, so a steady cluster gets no write.
///
/// A value Kafka does not return (a sensitive key) cannot be compared and is set again.
pub fn dynamic_changes(desired: &BTreeMap<String, String>, observed: &Config) -> Vec<ConfigChange> {
    let sets = desired
        .iter()
        .filter(|(key, value)| observed.get(*key).and_then(|entry| entry.value.as_ref()) != Some(*value))
        .map(|(key, value)| ConfigChange::Set(key.clone(), value.clone()));
    let deletes = observed
        .iter()
        .filter(|(key, entry)| entry.source == ConfigSource::DynamicDefaultBroker && !desired.contains_key(*key))
        .map(|(key, _)| ConfigChange::Delete(key.clone()));
    sets.chain(deletes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::ConfigEntry;

    fn entry(value: Option<&str>, source: ConfigSource) -> ConfigEntry {
        ConfigEntry { value: value.map(str::to_owned), source, read_only: false }
    }

    fn desired(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn equal_values_need_no_write() {
        let observed: Config = [
            ("log.retention.ms".to_owned(), entry(Some("3600000"), ConfigSource::DynamicDefaultBroker)),
            ("num.io.threads".to_owned(), entry(Some("8"), ConfigSource::StaticBroker)),
        ]
        .into();
        let want = desired(&[("log.retention.ms", "3600000"), ("num.io.threads", "8")]);
        assert_eq!(dynamic_changes(&want, &observed), []);
    }

    #[test]
    fn differing_and_missing_keys_are_set_and_stale_defaults_deleted() {
        let observed: Config = [
            ("log.retention.ms".to_owned(), entry(Some("1000"), ConfigSource::DynamicDefaultBroker)),
            ("log.cleaner.threads".to_owned(), entry(Some("2"), ConfigSource::DynamicDefaultBroker)),
            ("message.max.bytes".to_owned(), entry(Some("1048588"), ConfigSource::Default)),
            ("num.network.threads".to_owned(), entry(Some("3"), ConfigSource::StaticBroker)),
        ]
        .into();
        let want = desired(&[("log.retention.ms", "3600000"), ("num.replica.fetchers", "4")]);
        assert_eq!(
            dynamic_changes(&want, &observed),
            [
                ConfigChange::Set("log.retention.ms".into(), "3600000".into()),
                ConfigChange::Set("num.replica.fetchers".into(), "4".into()),
                ConfigChange::Delete("log.cleaner.threads".into()),
            ],
            "only dynamic defaults are deleted; static and default entries are not the operator's"
        );
    }

    #[test]
    fn a_hidden_value_is_set_again() {
        let observed: Config = [("sasl.secret".to_owned(), entry(None, ConfigSource::DynamicDefaultBroker))].into();
        let want = desired(&[("sasl.secret", "s")]);
        assert_eq!(dynamic_changes(&want, &observed), [ConfigChange::Set("sasl.secret".into(), "s".into())]);
    }

    #[test]
    fn applying_the_changes_converges_to_no_write() {
        let mut observed: Config = [
            ("a".to_owned(), entry(Some("1"), ConfigSource::DynamicDefaultBroker)),
            ("b".to_owned(), entry(Some("2"), ConfigSource::DynamicDefaultBroker)),
        ]
        .into();
        let want = desired(&[("a", "9"), ("c", "3")]);
        for change in dynamic_changes(&want, &observed) {
            match change {
                ConfigChange::Set(k, v) => {
                    observed.insert(k, entry(Some(&v), ConfigSource::DynamicDefaultBroker));
                }
                ConfigChange::Delete(k) => {
                    observed.remove(&k);
                }
            }
        }
        assert_eq!(dynamic_changes(&want, &observed), []);
    }
}
