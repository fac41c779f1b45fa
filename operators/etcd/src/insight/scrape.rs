//! Reading a member's `/metrics`: a minimal HTTP/1.1 GET over a TCP stream (etcd serves
//! `--listen-metrics-urls` as plain HTTP without client authentication, and this crate has
//! no HTTP client), bounded in time and size so that a hung or hostile endpoint cannot
//! stall the per-cluster task or exhaust its memory.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::exposition::{self, ParseError, Series};
use super::sample::{MissingSeries, Sample};
use crate::build::{METRICS_PORT, Names};

/// How long one scrape may take in all: well under the ~10 s between two scrapes.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest response read. etcd's default metrics are about 150 KiB; `--metrics
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
    /// The answer was not an HTTP response this client understands.
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

/// Host, port and path of a plain `http://` URL.
struct Target<'a> {
    host: &'a str,
    port: u16,
    path: &'a str,
}

fn target(url: &str) -> Option<Target<'_>> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    if authority.contains('@') {
        return None;
    }
    // `[v6]:port`, `[v6]`, `host:port` or `host`.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => 80,
    };
    (!host.is_empty()).then_some(Target { host, port, path })
}

/// The body of a `GET url`, within [`TIMEOUT`].
async fn get(url: &str) -> Result<String, ScrapeError> {
    let t = target(url).ok_or_else(|| ScrapeError::InvalidUrl { url: url.into() })?;
    match tokio::time::timeout(TIMEOUT, exchange(&t)).await {
        Err(_) => Err(ScrapeError::Timeout { url: url.into() }),
        Ok(Err(source)) => Err(ScrapeError::Io { url: url.into(), source }),
        Ok(Ok(raw)) if raw.len() as u64 > MAX_RESPONSE_BYTES => Err(ScrapeError::TooLarge { url: url.into() }),
        Ok(Ok(raw)) => response_body(&raw).map_err(|e| match e {
            BodyError::Status(status) => ScrapeError::Status { url: url.into(), status },
            BodyError::Malformed(reason) => ScrapeError::Malformed { url: url.into(), reason },
        }),
    }
}

/// Sends the request and reads the whole response (the server closes the connection
/// after it, as asked), at most one byte past the limit so that excess is detected.
async fn exchange(t: &Target<'_>) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect((t.host, t.port)).await?;
    let host = if t.host.contains(':') { format!("[{}]", t.host) } else { t.host.to_string() };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}:{}\r\nAccept: text/plain\r\nUser-Agent: statecraft-etcd\r\nConnection: close\r\n\r\n",
        t.path, t.port
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE_BYTES + 1).read_to_end(&mut raw).await?;
    Ok(raw)
}

enum BodyError {
    Status(u16),
    Malformed(String),
}

/// The body of a complete HTTP/1.1 response: status 200 required; chunked, sized and
/// close-delimited bodies understood.
fn response_body(raw: &[u8]) -> Result<String, BodyError> {
    let malformed = |r: &str| BodyError::Malformed(r.to_string());
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| malformed("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| malformed("headers are not UTF-8"))?;
    let body = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(malformed(&format!("status line {status_line:?}")));
    }
    let status: u16 =
        parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| malformed(&format!("status line {status_line:?}")))?;
    if status != 200 {
        return Err(BodyError::Status(status));
    }
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| malformed(&format!("header {line:?}")))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().split(',').any(|v| v.trim() == "chunked");
        } else if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| malformed(&format!("content-length {value:?}")))?);
        }
    }
    let body = if chunked {
        dechunk(body).map_err(|r| malformed(&r))?
    } else if let Some(n) = length {
        body.get(..n).ok_or_else(|| malformed("body shorter than its content-length"))?.to_vec()
    } else {
        body.to_vec()
    };
    String::from_utf8(body).map_err(|_| malformed("body is not UTF-8"))
}

/// Joins the chunks of a chunked body (RFC 9112 §7.1); trailers are ignored.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").ok_or("unterminated chunk size")?;
        let line = std::str::from_utf8(&rest[..line_end]).map_err(|_| "chunk size is not text")?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| format!("chunk size {hex:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).ok_or("truncated chunk")?;
        out.extend_from_slice(chunk);
        rest = rest.get(size..).and_then(|r| r.strip_prefix(b"\r\n")).ok_or("chunk not followed by CRLF")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(raw: &str) -> Result<String, String> {
        response_body(raw.as_bytes()).map_err(|e| match e {
            BodyError::Status(s) => format!("status {s}"),
            BodyError::Malformed(r) => r,
        })
    }

    #[test]
    fn urls_are_split_into_host_port_and_path() {
        let t = target("http://main-0.main-peer.prod.svc:2381/metrics").expect("valid");
        assert_eq!((t.host, t.port, t.path), ("main-0.main-peer.prod.svc", 2381, "/metrics"));
        let t = target("http://[::1]:2381/metrics").expect("valid");
        assert_eq!((t.host, t.port, t.path), ("::1", 2381, "/metrics"));
        let t = target("http://host").expect("valid");
        assert_eq!((t.host, t.port, t.path), ("host", 80, "/"));
        for bad in ["https://host/metrics", "http://:2381/metrics", "http://host:x/", "http://u@host/", "host:2381"] {
            assert!(target(bad).is_none(), "{bad}");
        }
        assert_eq!(member_metrics_url(&Names::new("main", "prod"), 2), "http://main-2.main-peer.prod.svc:2381/metrics");
    }

    #[test]
    fn sized_chunked_and_close_delimited_bodies_are_read() {
        assert_eq!(body("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef"), Ok("abc".into()));
        assert_eq!(
            body(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nT: 1\r\n\r\n"
            ),
            Ok("abc0123456789".into())
        );
        assert_eq!(body("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"), Ok("all of it".into()));
    }

    #[test]
    fn bad_responses_are_refused() {
        for (raw, needle) in [
            ("HTTP/1.1 404 Not Found\r\n\r\n", "status 404"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", "shorter"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "truncated"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX", "CRLF"),
            ("SSH-2.0-OpenSSH\r\n\r\n", "status line"),
            ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "header"),
            ("HTTP/1.1 200 OK\r\n", "no end of headers"),
        ] {
            let err = body(raw).expect_err(raw);
            assert!(err.contains(needle), "{raw:?}: {err}");
        }
    }
}
