//! The admin client: one small async Kafka client on the `kafka-protocol` codecs (being written).
