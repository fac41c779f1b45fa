//! What can go wrong talking to Kafka, and which of it is worth retrying.
//!
//! The admin client keeps its own error type so that callers can match on a Kafka error code
//! (say `TOPIC_ALREADY_EXISTS`), and converts into [`statecraft_shared::Error`] with `?`:
//! network failures, time-outs and the error codes Kafka itself calls retriable become
//! [`Error::DataPlane`] (transient, retried with back-off); everything else becomes
//! [`Error::Permanent`], its message naming the API and the error code.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use statecraft_shared::Error;

/// A failed admin call.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The connection could not be made, or broke.
    #[error("kafka {address}: {context}: {source}")]
    Io {
        address: String,
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// No answer in time (connect, or one request and its response).
    #[error("kafka {address}: {context}: no answer after {timeout:?}")]
    Timeout { address: String, context: String, timeout: Duration },
    /// Kafka answered with an error code.
    #[error("kafka {address}: {api:?} {subject}: {}{}", code_name(*code), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        address: String,
        api: ApiKey,
        /// What the call was about (a topic, a config resource, a feature ...).
        subject: String,
        code: ResponseError,
        message: Option<String>,
    },
    /// The node and this client share no version of an API (or the node lacks it).
    #[error("kafka {address}: {api:?}: {detail}")]
    Unsupported { address: String, api: ApiKey, detail: String },
    /// A frame that does not decode, or a response that does not answer the request.
    #[error("kafka {address}: {api:?}: malformed response: {detail}")]
    Protocol { address: String, api: ApiKey, detail: String },
}

impl AdminError {
    /// The Kafka error code, when Kafka answered with one.
    pub fn code(&self) -> Option<ResponseError> {
        match self {
            AdminError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Worth retrying: the network, a time-out, or an error code Kafka calls retriable
    /// (`NOT_CONTROLLER`, `LEADER_NOT_AVAILABLE`, `REQUEST_TIMED_OUT`, ...).
    pub fn is_transient(&self) -> bool {
        match self {
            AdminError::Io { .. } | AdminError::Timeout { .. } => true,
            AdminError::Kafka { code, .. } => code.is_retriable(),
            AdminError::Unsupported { .. } | AdminError::Protocol { .. } => false,
        }
    }
}

impl From<AdminError> for Error {
    fn from(e: AdminError) -> Self {
        if e.is_transient() {
            Error::DataPlane { system: "kafka".into(), message: e.to_string() }
        } else {
            Error::Permanent(e.to_string())
        }
    }
}

/// Kafka's own name of an error code (`UNKNOWN_TOPIC_OR_PARTITION`), as its logs and tools
/// print it: `kafka-protocol` names the variants in CamelCase.
pub fn code_name(code: ResponseError) -> String {
    if let ResponseError::Unknown(n) = code {
        return format!("UNKNOWN_ERROR_CODE_{n}");
    }
    let camel = format!("{code:?}");
    let mut name = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::ErrorCategory;

    fn kafka(code: i16) -> AdminError {
        AdminError::Kafka {
            address: "127.0.0.1:9092".into(),
            api: ApiKey::CreateTopics,
            subject: "topic orders".into(),
            code: ResponseError::try_from_code(code).unwrap(),
            message: Some("Topic 'orders' already exists.".into()),
        }
    }

    #[test]
    fn code_names_are_kafkas() {
        assert_eq!(code_name(ResponseError::UnknownTopicOrPartition), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(code_name(ResponseError::ElectionNotNeeded), "ELECTION_NOT_NEEDED");
        assert_eq!(code_name(ResponseError::Unknown(999)), "UNKNOWN_ERROR_CODE_999");
    }

    #[test]
    fn a_kafka_error_names_the_api_the_subject_and_the_code() {
        let e = kafka(36);
        assert_eq!(
            e.to_string(),
            "kafka 127.0.0.1:9092: CreateTopics topic orders: TOPIC_ALREADY_EXISTS: Topic 'orders' already exists."
        );
        assert_eq!(e.code(), Some(ResponseError::TopicAlreadyExists));
    }

    #[test]
    fn retriable_codes_and_the_network_are_transient_the_rest_permanent() {
        assert!(kafka(41).is_transient(), "NOT_CONTROLLER");
        assert_eq!(Error::from(kafka(41)).category(), ErrorCategory::Transient);
        assert!(!kafka(36).is_transient(), "TOPIC_ALREADY_EXISTS");
        assert_eq!(Error::from(kafka(36)).category(), ErrorCategory::Permanent);
        let io = AdminError::Io {
            address: "a".into(),
            context: "connect".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert_eq!(Error::from(io).category(), ErrorCategory::Transient);
        let unsupported =
            AdminError::Unsupported { address: "a".into(), api: ApiKey::DescribeCluster, detail: "x".into() };
        assert_eq!(Error::from(unsupported).category(), ErrorCategory::Permanent);
    }
}
