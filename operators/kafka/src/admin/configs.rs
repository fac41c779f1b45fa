//! Configuration of topics and brokers: DescribeConfigs and IncrementalAlterConfigs.
//!
//! Only IncrementalAlterConfigs changes anything: the old AlterConfigs replaces a resource's
//! whole dynamic configuration with the keys sent, silently dropping every other override.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, AdminError, Result};
use crate::observed::{Config, ConfigChange, ConfigEntry, ConfigResource, ConfigSource};

/// Kafka's `ConfigResource.Type` codes.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// IncrementalAlterConfigs' operations.
const SET: i8 = 0;
const DELETE: i8 = 1;

/// The resource as Kafka names it: a type and a name (`BROKER ""` is the cluster default).
fn wire(resource: &ConfigResource) -> (i8, String) {
    match resource {
        ConfigResource::Topic(name) => (TOPIC, name.clone()),
        ConfigResource::Broker(id) => (BROKER, id.to_string()),
        ConfigResource::ClusterDefault => (BROKER, String::new()),
    }
}

fn describe(resource: &ConfigResource) -> String {
    match resource {
        ConfigResource::Topic(name) => format!("topic {name}"),
        ConfigResource::Broker(id) => format!("broker {id}"),
        ConfigResource::ClusterDefault => "the cluster-wide broker default".into(),
    }
}

/// Kafka's `DescribeConfigsResponse.ConfigSource` codes.
fn source(code: i8) -> ConfigSource {
    match code {
        1 => ConfigSource::Topic,
        2 => ConfigSource::DynamicBroker,
        3 => ConfigSource::DynamicDefaultBroker,
        4 => ConfigSource::StaticBroker,
        5 => ConfigSource::Default,
        _ => ConfigSource::Other,
    }
}

impl Admin {
    /// Every configuration key of each resource with its value and source. A
    /// [`ConfigResource::Broker`] must be asked of that broker; a topic that does not exist
    /// is `UNKNOWN_TOPIC_OR_PARTITION`.
    pub async fn describe_configs(&self, resources: &[ConfigResource]) -> Result<BTreeMap<ConfigResource, Config>> {
        let response = self
            .connection
            .call(|_| {
                let mut request = DescribeConfigsRequest::default();
                request.resources = resources
                    .iter()
                    .map(|resource| {
                        let (kind, name) = wire(resource);
                        let mut r = DescribeConfigsResource::default();
                        r.resource_type = kind;
                        r.resource_name = StrBytes::from_string(name);
                        // None: every key.
                        r.configuration_keys = None;
                        r
                    })
                    .collect();
                request
            })
            .await?;
        let mut out = BTreeMap::new();
        for resource in resources {
            let (kind, name) = wire(resource);
            let result = response
                .results
                .iter()
                .find(|r| r.resource_type == kind && r.resource_name.as_str() == name)
                .ok_or_else(|| AdminError::Protocol {
                    address: self.address().to_owned(),
                    api: ApiKey::DescribeConfigs,
                    detail: format!("no answer for {}", describe(resource)),
                })?;
            self.check(
                ApiKey::DescribeConfigs,
                || describe(resource),
                result.error_code,
                result.error_message.as_ref(),
            )?;
            let config: Config = result
                .configs
                .iter()
                .map(|c| {
                    let entry = ConfigEntry {
                        value: c.value.as_ref().map(ToString::to_string),
                        source: source(c.config_source),
                        read_only: c.read_only,
                    };
                    (c.name.to_string(), entry)
                })
                .collect();
            out.insert(resource.clone(), config);
        }
        Ok(out)
    }

    /// Applies `changes` to `resource` at runtime (IncrementalAlterConfigs): each key is set
    /// or its override deleted, every other key left as it is.
    pub async fn alter_configs(&self, resource: &ConfigResource, changes: &[ConfigChange]) -> Result<()> {
        let response = self
            .connection
            .call(|_| {
                let (kind, name) = wire(resource);
                let mut r = AlterConfigsResource::default();
                r.resource_type = kind;
                r.resource_name = StrBytes::from_string(name);
                r.configs = changes
                    .iter()
                    .map(|change| {
                        let mut config = AlterableConfig::default();
                        match change {
                            ConfigChange::Set(key, value) => {
                                config.name = StrBytes::from_string(key.clone());
                                config.config_operation = SET;
                                config.value = Some(StrBytes::from_string(value.clone()));
                            }
                            ConfigChange::Delete(key) => {
                                config.name = StrBytes::from_string(key.clone());
                                config.config_operation = DELETE;
                                config.value = None;
                            }
                        }
                        config
                    })
                    .collect();
                let mut request = IncrementalAlterConfigsRequest::default();
                request.resources = vec![r];
                request
            })
            .await?;
        for result in &response.responses {
            let subject = || describe(resource);
            self.check(ApiKey::IncrementalAlterConfigs, subject, result.error_code, result.error_message.as_ref())?;
        }
        Ok(())
    }

    /// Applies `changes` to `resource` like [`Self::alter_configs`], and returns those Kafka
    /// refused, each with its answer. Kafka refuses a request as a whole for one bad value,
    /// so a refused request is sent again one change at a time: the others take effect, and
    /// each refusal names its key. An error that is not a refusal (the network, a code
    /// Kafka calls retriable) ends the call.
    pub async fn alter_each(
        &self,
        resource: &ConfigResource,
        changes: &[ConfigChange],
    ) -> Result<Vec<(ConfigChange, AdminError)>> {
        match self.alter_configs(resource, changes).await {
            Ok(()) => return Ok(Vec::new()),
            Err(e) if e.is_transient() => return Err(e),
            Err(_) => {}
        }
        let mut refused = Vec::new();
        for change in changes {
            match self.alter_configs(resource, std::slice::from_ref(change)).await {
                Ok(()) => {}
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => refused.push((change.clone(), e)),
            }
        }
        Ok(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_default_is_the_broker_resource_without_a_name() {
        assert_eq!(wire(&ConfigResource::ClusterDefault), (BROKER, String::new()));
        assert_eq!(wire(&ConfigResource::Broker(101)), (BROKER, "101".to_owned()));
        assert_eq!(wire(&ConfigResource::Topic("orders".into())), (TOPIC, "orders".to_owned()));
    }

    #[test]
    fn sources_follow_kafkas_codes() {
        assert_eq!(source(1), ConfigSource::Topic);
        assert_eq!(source(3), ConfigSource::DynamicDefaultBroker);
        assert_eq!(source(5), ConfigSource::Default);
        assert_eq!(source(8), ConfigSource::Other);
    }
}
