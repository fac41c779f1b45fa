//! Which broker configuration keys Kafka 4.4.0 changes at runtime, and how: the operator
//! applies a change of a cluster-wide key with IncrementalAlterConfigs on the cluster's
//! default broker resource (no restart) and rolls the nodes for every other key.
//!
//! The lists are Kafka's own `DynamicBrokerConfig.dynamicConfigUpdateModes()`
//! (`org.apache.kafka.server.config.DynamicBrokerConfig` in `kafka-server-4.4.0.jar`),
//! obtained by resolving the image's jars
//! (`mvn dependency:copy-dependencies -f deploy/images/kafka/pom.xml`) and calling the
//! method from a ten-line Java program: 73 keys are `cluster-wide`, 37 `per-broker`. Kafka
//! refuses at runtime every key that is neither, synonyms included (`log.retention.hours`
//! is not dynamic, `log.retention.ms` is). Regenerate them for a new Kafka series.

/// Keys Kafka accepts cluster-wide (and per broker) at runtime, sorted.
const CLUSTER_WIDE: &[&str] = &[
    "background.threads",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "config.providers",
    "errors.deadletterqueue.auto.create.topics.enable",
    "errors.deadletterqueue.topic.name.prefix",
    "follower.fetch.last.tiered.offset.enable",
    "follower.replication.throttled.rate",
    "group.consumer.assignment.interval.ms",
    "group.consumer.assignor.offload.enable",
    "group.coordinator.cached.buffer.max.bytes",
    "group.share.assignment.interval.ms",
    "group.share.assignor.offload.enable",
    "group.streams.assignment.interval.ms",
    "group.streams.assignor.offload.enable",
    "leader.replication.throttled.rate",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads",
    "log.cleanup.policy",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type",
    "log.preallocate",
    "log.remote.copy.lag.bytes",
    "log.remote.copy.lag.ms",
    "log.retention.bytes",
    "log.retention.ms",
    "log.roll.jitter.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "log.segment.delete.delay.ms",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.decompressed.message.bytes",
    "message.max.bytes",
    "metric.reporters",
    "min.insync.replicas",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "producer.id.expiration.ms",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.follower.thread.pool.size",
    "remote.log.reader.threads",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "share.coordinator.cached.buffer.max.bytes",
    "transaction.partition.verification.enable",
    "unclean.leader.election.enable",
];

/// Keys Kafka accepts at runtime only per broker (listeners, TLS and SASL material), sorted.
const PER_BROKER: &[&str] = &[
    "cordoned.log.dirs",
    "listener.security.protocol.map",
    "listeners",
    "principal.builder.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Whether Kafka 4.4 applies `key` cluster-wide at runtime, without a restart.
pub fn is_cluster_wide(key: &str) -> bool {
    CLUSTER_WIDE.binary_search(&key).is_ok()
}

/// Whether Kafka 4.4 applies `key` at runtime only to one broker at a time.
pub fn is_per_broker(key: &str) -> bool {
    PER_BROKER.binary_search(&key).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_kafkas_sorted_and_apart() {
        assert_eq!((CLUSTER_WIDE.len(), PER_BROKER.len()), (73, 37));
        for list in [CLUSTER_WIDE, PER_BROKER] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats: binary_search relies on it");
        }
        assert!(!CLUSTER_WIDE.iter().any(|k| is_per_broker(k)));
    }

    #[test]
    fn well_known_keys_are_dynamic_and_identity_keys_are_not() {
        for key in
            ["log.retention.ms", "min.insync.replicas", "num.io.threads", "message.max.bytes", "log.cleaner.threads"]
        {
            assert!(is_cluster_wide(key), "{key}");
        }
        for key in ["log.dirs", "node.id", "process.roles", "log.retention.hours", "num.partitions", "listeners"] {
            assert!(!is_cluster_wide(key), "{key}");
        }
        assert!(is_per_broker("listeners") && is_per_broker("ssl.keystore.location"));
        assert!(!is_per_broker("log.retention.ms") && !is_per_broker("node.id"));
    }
}
