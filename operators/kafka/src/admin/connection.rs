//! One plaintext connection to one Kafka node: length-prefixed frames, correlation ids, the
//! request and response header version of each API, and version negotiation.
//!
//! Kafka's framing: every request and response is a 4-byte big-endian length and that many
//! bytes; a request starts with a header (API key, version, correlation id, client id), a
//! response with the same correlation id. Each API's header version depends on the API version
//! (flexible versions carry tagged fields), and `kafka-protocol` knows which.
//!
//! Negotiation: on connecting, ApiVersions tells which versions of every API the node serves;
//! each call then uses the highest version both this client (`kafka-protocol`'s range, raised
//! to the lowest version whose fields the call relies on) and the node support. A node that
//! does not know the ApiVersions version asked answers `UNSUPPORTED_VERSION` in the version 0
//! format with its own range, and the client asks again in a version it has.
//!
//! A connection that failed (I/O error, time-out, a frame that does not decode) is dropped:
//! its byte stream can no longer be trusted, so the next call connects and negotiates anew —
//! which also picks up a node that was restarted in another version.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreatePartitionsRequest, CreatePartitionsResponse,
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest,
    DescribeClusterResponse, DescribeConfigsRequest, DescribeConfigsResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, ElectLeadersRequest, ElectLeadersResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::error::AdminError;
use crate::observed::Features;

/// The client id Kafka logs and quotas see.
const CLIENT_ID: &str = "statecraft-kafka";
/// No admin response comes near this; a larger length means a desynchronised stream (or a
/// TLS listener answering plaintext).
const MAX_FRAME: usize = 64 << 20;

/// A request this client sends, with its response type and the lowest version whose fields
/// the call relies on.
pub(super) trait Call: Encodable + HeaderVersion + Message {
    const KEY: ApiKey;
    /// Lowest version the call accepts (e.g. DescribeCluster 2 reports fenced brokers).
    const MIN_VERSION: i16;
    type Response: Decodable + HeaderVersion;
}

macro_rules! calls {
    ($($request:ty => $response:ty, $key:ident, $min:literal;)*) => {
        $(impl Call for $request {
            const KEY: ApiKey = ApiKey::$key;
            const MIN_VERSION: i16 = $min;
            type Response = $response;
        })*
    };
}

calls! {
    ApiVersionsRequest => ApiVersionsResponse, ApiVersions, 0;
    // v2: replica directory ids (KIP-853) and the nodes' listeners.
    DescribeQuorumRequest => DescribeQuorumResponse, DescribeQuorum, 0;
    // v2: include_fenced_brokers.
    DescribeClusterRequest => DescribeClusterResponse, DescribeCluster, 2;
    // v10: topic ids.
    MetadataRequest => MetadataResponse, Metadata, 10;
    DescribeConfigsRequest => DescribeConfigsResponse, DescribeConfigs, 1;
    IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, IncrementalAlterConfigs, 0;
    // v1: the election type (preferred), v0 can only do preferred anyway but answers differently.
    ElectLeadersRequest => ElectLeadersResponse, ElectLeaders, 1;
    UpdateFeaturesRequest => UpdateFeaturesResponse, UpdateFeatures, 0;
    ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse, ListPartitionReassignments, 0;
    CreateTopicsRequest => CreateTopicsResponse, CreateTopics, 2;
    CreatePartitionsRequest => CreatePartitionsResponse, CreatePartitions, 0;
    DeleteTopicsRequest => DeleteTopicsResponse, DeleteTopics, 1;
}

/// The highest version in both ranges, or why there is none.
pub(super) fn negotiate(ours: VersionRange, theirs: Option<VersionRange>) -> Result<i16, String> {
    let Some(theirs) = theirs else {
        return Err(format!("the node does not serve this API (this client speaks {ours})"));
    };
    let common = ours.intersect(&theirs);
    if common.is_empty() {
        Err(format!("no common version: the node serves {theirs}, this client speaks {ours}"))
    } else {
        Ok(common.max)
    }
}

/// An open connection and what its node said in ApiVersions.
struct Session {
    stream: TcpStream,
    next_correlation_id: i32,
    /// The node's version range per API key.
    versions: BTreeMap<i16, VersionRange>,
}

/// A connection to one node, reconnected on demand, one request at a time.
pub(super) struct Connection {
    address: String,
    timeout: Duration,
    session: Mutex<Option<Session>>,
}

impl Connection {
    /// Connects and negotiates now, so that a wrong address fails at once.
    pub(super) async fn open(address: &str, timeout: Duration) -> Result<Connection, AdminError> {
        let session = Session::open(address, timeout).await?;
        Ok(Connection { address: address.to_owned(), timeout, session: Mutex::new(Some(session)) })
    }

    pub(super) fn address(&self) -> &str {
        &self.address
    }

    /// The time-out as Kafka's request fields take it.
    pub(super) fn timeout_ms(&self) -> i32 {
        i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX)
    }

    /// Sends the request `build` makes for the negotiated version and returns the response.
    pub(super) async fn call<R: Call>(&self, build: impl FnOnce(i16) -> R) -> Result<R::Response, AdminError> {
        let mut guard = self.session.lock().await;
        let session = match guard.take() {
            Some(session) => session,
            None => Session::open(&self.address, self.timeout).await?,
        };
        let session = guard.insert(session);
        let version = self.version_of::<R>(session)?;
        let request = build(version);
        match session.exchange(&self.address, self.timeout, &request, version).await {
            Ok(response) => Ok(response),
            Err(e) => {
                // The stream may hold half a frame: never reuse it.
                *guard = None;
                Err(e)
            }
        }
    }

    /// The version `R` is sent in on the current session (connecting first if needed).
    pub(super) async fn version<R: Call>(&self) -> Result<i16, AdminError> {
        let mut guard = self.session.lock().await;
        let session = match guard.take() {
            Some(session) => session,
            None => Session::open(&self.address, self.timeout).await?,
        };
        let session = guard.insert(session);
        self.version_of::<R>(session)
    }

    /// The node's features. Asked anew each time rather than kept from the negotiation, since
    /// finalized levels change (UpdateFeatures) while a connection stays open.
    pub(super) async fn features(&self) -> Result<Features, AdminError> {
        let response = self.call(api_versions_request).await?;
        if let Some(code) = ResponseError::try_from_code(response.error_code) {
            return Err(AdminError::Kafka {
                address: self.address.clone(),
                api: ApiKey::ApiVersions,
                subject: "features".into(),
                code,
                message: None,
            });
        }
        Ok(features_of(&response))
    }

    fn version_of<R: Call>(&self, session: &Session) -> Result<i16, AdminError> {
        let ours = VersionRange { min: R::VERSIONS.min.max(R::MIN_VERSION), max: R::VERSIONS.max };
        negotiate(ours, session.versions.get(&(R::KEY as i16)).copied()).map_err(|detail| AdminError::Unsupported {
            address: self.address.clone(),
            api: R::KEY,
            detail,
        })
    }
}

fn api_versions_request(_version: i16) -> ApiVersionsRequest {
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = StrBytes::from_static_str(CLIENT_ID);
    request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
    request
}

fn features_of(response: &ApiVersionsResponse) -> Features {
    Features {
        finalized: response.finalized_features.iter().map(|f| (f.name.to_string(), f.max_version_level)).collect(),
        supported: response
            .supported_features
            .iter()
            .map(|f| (f.name.to_string(), (f.min_version, f.max_version)))
            .collect(),
    }
}

impl Session {
    async fn open(address: &str, timeout: Duration) -> Result<Session, AdminError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| AdminError::Timeout { address: address.into(), context: "connecting".into(), timeout })?
            .map_err(|source| AdminError::Io { address: address.into(), context: "connecting".into(), source })?;
        // Admin requests are small and answered one at a time: send each at once.
        stream.set_nodelay(true).map_err(|source| AdminError::Io {
            address: address.into(),
            context: "TCP_NODELAY".into(),
            source,
        })?;
        let mut session = Session { stream, next_correlation_id: 0, versions: BTreeMap::new() };
        let ours = ApiVersionsRequest::VERSIONS;
        let mut response = session.api_versions(address, timeout, ours.max).await?;
        if response.error_code == ResponseError::UnsupportedVersion.code() {
            // The node is older than this client's newest ApiVersions: its answer (version 0)
            // lists the versions it has, so ask again in the highest common one.
            let theirs = response.api_keys.iter().find(|k| k.api_key == ApiKey::ApiVersions as i16).map(range_of);
            let version = negotiate(ours, theirs).map_err(|detail| AdminError::Unsupported {
                address: address.into(),
                api: ApiKey::ApiVersions,
                detail,
            })?;
            response = session.api_versions(address, timeout, version).await?;
        }
        if let Some(code) = ResponseError::try_from_code(response.error_code) {
            return Err(AdminError::Kafka {
                address: address.into(),
                api: ApiKey::ApiVersions,
                subject: "negotiation".into(),
                code,
                message: None,
            });
        }
        session.versions = response.api_keys.iter().map(|k| (k.api_key, range_of(k))).collect();
        tracing::debug!(address, apis = session.versions.len(), "kafka: versions negotiated");
        Ok(session)
    }

    /// ApiVersions in `version`; an `UNSUPPORTED_VERSION` answer comes in version 0, whatever
    /// was asked, so a body that does not decode in `version` is read again as version 0.
    async fn api_versions(
        &mut self,
        address: &str,
        timeout: Duration,
        version: i16,
    ) -> Result<ApiVersionsResponse, AdminError> {
        let body =
            self.round_trip::<ApiVersionsRequest>(address, timeout, &api_versions_request(version), version).await?;
        match ApiVersionsResponse::decode(&mut body.clone(), version) {
            Ok(response) if response.error_code != ResponseError::UnsupportedVersion.code() => Ok(response),
            _ => ApiVersionsResponse::decode(&mut body.clone(), 0).map_err(|e| AdminError::Protocol {
                address: address.into(),
                api: ApiKey::ApiVersions,
                detail: e.to_string(),
            }),
        }
    }

    async fn exchange<R: Call>(
        &mut self,
        address: &str,
        timeout: Duration,
        request: &R,
        version: i16,
    ) -> Result<R::Response, AdminError> {
        let mut body = self.round_trip(address, timeout, request, version).await?;
        let response = R::Response::decode(&mut body, version).map_err(|e| AdminError::Protocol {
            address: address.into(),
            api: R::KEY,
            detail: e.to_string(),
        })?;
        if body.has_remaining() {
            tracing::debug!(address, api = ?R::KEY, version, left = body.remaining(), "kafka: response has trailing bytes");
        }
        Ok(response)
    }

    /// Writes one request frame and reads its response frame, returning the body after the
    /// response header.
    async fn round_trip<R: Call>(
        &mut self,
        address: &str,
        timeout: Duration,
        request: &R,
        version: i16,
    ) -> Result<Bytes, AdminError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let protocol = |detail: String| AdminError::Protocol { address: address.into(), api: R::KEY, detail };

        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str(CLIENT_ID));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, R::header_version(version))
            .map_err(|e| protocol(format!("encoding the header: {e}")))?;
        request.encode(&mut frame, version).map_err(|e| protocol(format!("encoding v{version}: {e}")))?;
        let length = i32::try_from(frame.len() - 4).map_err(|_| protocol("request too large".into()))?;
        frame[..4].copy_from_slice(&length.to_be_bytes());

        let context = format!("{:?} v{version}", R::KEY);
        let io = |source| AdminError::Io { address: address.into(), context: context.clone(), source };
        let exchange = async {
            self.stream.write_all(&frame).await.map_err(io)?;
            let length = self.stream.read_u32().await.map_err(io)? as usize;
            if length > MAX_FRAME {
                return Err(protocol(format!("a frame of {length} bytes")));
            }
            let mut body = vec![0; length];
            self.stream.read_exact(&mut body).await.map_err(io)?;
            Ok(Bytes::from(body))
        };
        let mut body = tokio::time::timeout(timeout, exchange).await.map_err(|_| AdminError::Timeout {
            address: address.into(),
            context: context.clone(),
            timeout,
        })??;

        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| protocol(format!("response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(protocol(format!("correlation id {} answers request {correlation_id}", header.correlation_id)));
        }
        Ok(body)
    }
}

fn range_of(key: &kafka_protocol::messages::api_versions_response::ApiVersion) -> VersionRange {
    VersionRange { min: key.min_version, max: key.max_version }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn range(min: i16, max: i16) -> VersionRange {
        VersionRange { min, max }
    }

    #[test]
    fn negotiation_takes_the_highest_common_version() {
        assert_eq!(negotiate(range(0, 2), Some(range(0, 2))), Ok(2));
        assert_eq!(negotiate(range(2, 7), Some(range(0, 5))), Ok(5));
        assert_eq!(negotiate(range(0, 4), Some(range(3, 9))), Ok(4));
    }

    #[test]
    fn negotiation_without_a_common_version_says_both_ranges() {
        let e = negotiate(range(2, 2), Some(range(0, 1))).unwrap_err();
        assert_eq!(e, "no common version: the node serves 0..1, this client speaks 2..2");
        let e = negotiate(range(0, 2), None).unwrap_err();
        assert!(e.contains("does not serve"), "{e}");
    }
}
