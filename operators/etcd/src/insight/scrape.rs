//! Reading a member's `/metrics` with hyper's client (etcd serves `--listen-metrics-urls`
//! as plain HTTP without client authentication), bounded in time and size so that a hung
//! or hostile endpoint cannot stall the per-cluster task or exhaust its memory: the whole
//! exchange has [`TIMEOUT`], the body is cut at [`MAX_RESPONSE_BYTES`], and hyper bounds
//! the headers.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::sample::{MissingSeries, Sample};
use crate::build::{METRICS_PORT, Names};
use statecraft_shared::exposition::{self, ParseError, Series};

/// How long one scrape may take in all: well under the ~10 s between two scrapes.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest response body read. etcd's default metrics are about 150 KiB; `--metrics
/// extensive` adds per-method gRPC series, still far below this.
pub const MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// Only `http://host[:port][/path]` is supported.
    #[error("{url} is not a plain http:// URL with a host")]
    InvalidUrl { url: String },
    /// No complete answer within [`TIMEOUT`].
    #[error("{url}: no complete answer within {}s", TIMEOUT.as_secs())]
    Timeout { url: String },
    /// Connecting, writing or reading failed.
    #[error("{url}: {source}")]
    Io {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// The answer was larger than [`MAX_RESPONSE_BYTES`].
    #[error("{url}: response larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge { url: String },
    /// The answer was not an HTTP/1 response, or its body was not UTF-8 text.
    #[error("{url}: malformed HTTP response: {reason}")]
    Malformed { url: String, reason: String },
    /// The server answered with a status other than 200.
    #[error("{url}: HTTP status {status}")]
    Status { url: String, status: u16 },
    /// The body was not the Prometheus text format.
    #[error("{url}: {source}")]
    Parse {
        url: String,
        #[source]
        source: ParseError,
    },
    /// A series the detector needs was missing.
    #[error("{url}: {source}")]
    Incomplete {
        url: String,
        #[source]
        source: MissingSeries,
    },
}

/// The metrics URL of member `ordinal` (etcd's `--listen-metrics-urls`, port 2381).
pub fn member_metrics_url(names: &Names, ordinal: u32) -> String {
    format!("http://{}:{METRICS_PORT}/metrics", names.host(ordinal))
}

/// Scrapes `url` and reduces it to the sample the detector judges.
pub async fn scrape(url: &str) -> Result<Sample, ScrapeError> {
    let series = fetch(url).await?;
    Sample::from_series(Instant::now(), &series).map_err(|source| ScrapeError::Incomplete { url: url.into(), source })
}

/// Every series `url` exposes.
pub async fn fetch(url: &str) -> Result<Vec<Series>, ScrapeError> {
    let body = get(url).await?;
    exposition::parse(&body).map_err(|source| ScrapeError::Parse { url: url.into(), source })
}

/// A plain `http://host[:port][/path]` URL; `None` for anything else (another scheme,
/// user information, no host).
fn target(url: &str) -> Option<Uri> {
    let uri: Uri = url.parse().ok()?;
    let authority = uri.authority()?;
    let host = authority.host();
    // `http::Uri` admits a port that is not a number (`host:x`) and reads it as none.
    let port_ok =
        authority.as_str().strip_prefix(host).is_some_and(|rest| rest.is_empty() || authority.port_u16().is_some());
    let plain = uri.scheme_str() == Some("http") && !authority.as_str().contains('@') && !host.is_empty() && port_ok;
    plain.then_some(uri)
}

/// The body of a `GET url`, within [`TIMEOUT`].
async fn get(url: &str) -> Result<String, ScrapeError> {
    get_within(url, TIMEOUT).await
}

/// The body of a `GET url`, within `timeout` (a parameter for the tests only).
async fn get_within(url: &str, timeout: Duration) -> Result<String, ScrapeError> {
    let uri = target(url).ok_or_else(|| ScrapeError::InvalidUrl { url: url.into() })?;
    match tokio::time::timeout(timeout, exchange(url, uri)).await {
        Err(_) => Err(ScrapeError::Timeout { url: url.into() }),
        Ok(result) => result,
    }
}

/// Sends the request on a connection of its own (nothing is pooled: members come and go,
/// and a scrape every ten seconds gains nothing from keeping one open) and reads the body,
/// at most [`MAX_RESPONSE_BYTES`] of it.
async fn exchange(url: &str, uri: Uri) -> Result<String, ScrapeError> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(0).build_http();
    let request = Request::get(uri)
        .header(header::ACCEPT, "text/plain")
        .header(header::USER_AGENT, "statecraft-etcd")
        .body(Empty::new())
        .map_err(|e| ScrapeError::Malformed { url: url.into(), reason: e.to_string() })?;
    let response = client.request(request).await.map_err(|e| {
        if e.is_connect() { ScrapeError::Io { url: url.into(), source: io_error(&e) } } else { failure(url, &e) }
    })?;
    if response.status() != StatusCode::OK {
        return Err(ScrapeError::Status { url: url.into(), status: response.status().as_u16() });
    }
    // A declared length over the bound is refused before reading any of it.
    let declared = response.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES) {
        return Err(ScrapeError::TooLarge { url: url.into() });
    }
    let limit = usize::try_from(MAX_RESPONSE_BYTES).unwrap_or(usize::MAX);
    let body = Limited::new(response.into_body(), limit).collect().await.map_err(|e| {
        if e.is::<LengthLimitError>() { ScrapeError::TooLarge { url: url.into() } } else { failure(url, e.as_ref()) }
    })?;
    String::from_utf8(body.to_bytes().to_vec())
        .map_err(|_| ScrapeError::Malformed { url: url.into(), reason: "body is not UTF-8".into() })
}

/// The I/O error under `e`, or `e` as one.
fn io_error(e: &(dyn std::error::Error + 'static)) -> std::io::Error {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return std::io::Error::new(io.kind(), chain(e));
        }
        cause = c.source();
    }
    std::io::Error::other(chain(e))
}

/// A failure after connecting: an I/O error (reset, closed) or an answer that is not HTTP
/// (hyper reports a bad chunk as invalid data).
fn failure(url: &str, e: &(dyn std::error::Error + 'static)) -> ScrapeError {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput) {
                break;
            }
            return ScrapeError::Io { url: url.into(), source: io_error(e) };
        }
        cause = c.source();
    }
    ScrapeError::Malformed { url: url.into(), reason: chain(e) }
}

/// `e` and its causes, `: `-separated (hyper's outer errors say little on their own).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn only_plain_http_urls_with_a_host_are_scraped() {
        for ok in ["http://main-0.main-peer.prod.svc:2381/metrics", "http://[::1]:2381/metrics", "http://host"] {
            assert!(target(ok).is_some(), "{ok}");
        }
        let t = target("http://main-0.main-peer.prod.svc:2381/metrics").expect("valid");
        assert_eq!((t.host(), t.port_u16(), t.path()), (Some("main-0.main-peer.prod.svc"), Some(2381), "/metrics"));
        for bad in ["https://host/metrics", "http://:2381/metrics", "http://host:x/", "http://u@host/", "host:2381"] {
            assert!(target(bad).is_none(), "{bad}");
        }
        assert_eq!(member_metrics_url(&Names::new("main", "prod"), 2), "http://main-2.main-peer.prod.svc:2381/metrics");
    }

    /// A local server that answers every connection with `respond` after reading the
    /// request's head; its URL.
    async fn serve<F, Fut>(respond: F) -> String
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding");
        let url = format!("http://{}/metrics", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                tokio::spawn(respond(stream));
            }
        });
        url
    }

    async fn answer(mut stream: tokio::net::TcpStream, raw: &'static [u8]) {
        let _ = stream.write_all(raw).await;
        let _ = stream.shutdown().await;
    }

    #[tokio::test]
    async fn sized_chunked_and_close_delimited_bodies_are_read() {
        for raw in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nup{a=\"b\"} 1\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nup{\r\n9\r\na=\"b\"} 1\n\r\n0\r\nT: 1\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nup{a=\"b\"} 1\n",
        ] {
            let url = serve(move |s| answer(s, raw)).await;
            let series = fetch(&url).await.unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(raw)));
            assert_eq!(series.len(), 1, "{series:?}");
            assert_eq!((series[0].name.as_str(), series[0].value), ("up", 1.0));
        }
    }

    #[tokio::test]
    async fn bad_responses_are_refused_with_what_went_wrong() {
        let status = serve(|s| answer(s, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")).await;
        assert!(matches!(get(&status).await, Err(ScrapeError::Status { status: 404, .. })));
        for raw in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\xff\xfe",
        ] {
            let url = serve(move |s| answer(s, raw)).await;
            let err = get(&url).await.expect_err("malformed");
            assert!(matches!(err, ScrapeError::Malformed { .. }), "{}: {err:?}", String::from_utf8_lossy(raw));
        }
        // The body ends before its length: the connection closed early.
        let short = serve(|s| answer(s, b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc")).await;
        let err = get(&short).await.expect_err("short body");
        assert!(matches!(err, ScrapeError::Io { .. } | ScrapeError::Malformed { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn an_endless_body_is_cut_at_the_size_bound() {
        let url = serve(|mut s| async move {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").await;
            let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "x".repeat(64 * 1024));
            while s.write_all(chunk.as_bytes()).await.is_ok() {}
        })
        .await;
        let started = Instant::now();
        let err = get(&url).await.expect_err("too large");
        assert!(matches!(err, ScrapeError::TooLarge { .. }), "{err:?}");
        assert!(started.elapsed() < TIMEOUT, "cut when the bound was reached, not at the timeout");
        // A declared length above the bound is refused as well.
        let declared = serve(|s| answer(s, b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nabc")).await;
        assert!(matches!(get(&declared).await, Err(ScrapeError::TooLarge { .. })));
    }

    #[tokio::test]
    async fn a_server_that_stops_answering_times_out() {
        // Accepts and reads the request, then says nothing.
        let silent = serve(|s| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(s);
        })
        .await;
        // Sends the head and part of the body, then stalls.
        let stalled = serve(|mut s| async move {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nup 1\n").await;
            tokio::time::sleep(Duration::from_secs(60)).await;
        })
        .await;
        for url in [silent, stalled] {
            let started = Instant::now();
            let err = get_within(&url, Duration::from_millis(300)).await.expect_err("hung");
            assert!(matches!(err, ScrapeError::Timeout { .. }), "{err:?}");
            assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        }
        let closed = format!("http://127.0.0.1:{}/metrics", {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding");
            l.local_addr().expect("address").port()
        });
        assert!(matches!(get(&closed).await, Err(ScrapeError::Io { .. })));
    }
}
