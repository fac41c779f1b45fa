//! The real mysqld_exporter (the Prometheus project's, built by scripts/build-go-tools.sh
//! from `deploy/images/mysqld-exporter/go.mod`), run against a harness server with the
//! arguments and account the operator gives the sidecar, and scraped over HTTP.

use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use statecraft_mysql::build::exporter;
use statecraft_shared::exposition::{self, Series};
use statecraft_shared::testing::{binary, free_port};

use super::{MariaDb, passwords};

/// How long the exporter may take to answer its first scrape.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One mysqld_exporter process, killed when dropped.
pub struct Exporter {
    _child: tokio::process::Child,
    /// Its `/metrics` URL.
    pub url: String,
}

impl Exporter {
    /// Starts the exporter against `server` with the sidecar's arguments (only the listen
    /// address is the harness's own: a free loopback port) and the exporter account's
    /// password, and waits until it answers.
    pub async fn start(server: &MariaDb) -> Exporter {
        let bin = binary("mysqld_exporter").expect("the mysqld_exporter test binary (scripts/build-go-tools.sh)");
        let port = free_port().expect("a free port");
        let mut args: Vec<String> = exporter::args(&format!("127.0.0.1:{}", server.port), false)
            .into_iter()
            .filter(|a| !a.starts_with("--web.listen-address="))
            .collect();
        args.push(format!("--web.listen-address=127.0.0.1:{port}"));
        let password = passwords().exporter.expect("the harness's servers have the exporter account");
        let child = tokio::process::Command::new(bin)
            .args(&args)
            .env("MYSQLD_EXPORTER_PASSWORD", password)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting mysqld_exporter");
        let exporter = Exporter { _child: child, url: format!("http://127.0.0.1:{port}/metrics") };
        let deadline = Instant::now() + START_TIMEOUT;
        while get(&exporter.url).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "mysqld_exporter did not answer on {} within {START_TIMEOUT:?}",
                exporter.url
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        exporter
    }

    /// One scrape, parsed.
    pub async fn scrape(&self) -> Vec<Series> {
        let body = get(&self.url).await.unwrap_or_else(|e| panic!("scraping {}: {e}", self.url));
        exposition::parse(&body).unwrap_or_else(|e| panic!("{}: not the Prometheus text format: {e}", self.url))
    }
}

/// The body of `GET url`.
async fn get(url: &str) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(url.parse()?).await?;
    if !response.status().is_success() {
        return Err(format!("HTTP status {}", response.status()).into());
    }
    let body = response.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8(body.to_vec())?)
}
