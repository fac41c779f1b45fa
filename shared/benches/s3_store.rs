//! Throughput and memory of the S3 backup store against a local S3 server (s3s-fs), with
//! writing the same bytes to a local file as the baseline.
//!
//! `cargo bench -p statecraft-shared --bench s3_store`; `STATECRAFT_BENCH_BYTES` sets the
//! stream length (default 1 GiB), `STATECRAFT_BENCH_PART_SIZE` (bytes) and
//! `STATECRAFT_BENCH_CONCURRENCY` the transfer settings (default 16 MiB, 4). Prints a table and writes
//! `<workspace>/results/bench/s3_store.json`.
//!
//! Method: each measurement runs in a fresh child process (this executable again, told
//! its role by `STATECRAFT_BENCH_ROLE`), so that the peak RSS it reports (`VmHWM` from
//! `/proc/self/status`, which cannot be reset) covers that one transfer plus process
//! start-up, and no earlier allocation of another measurement. The data is generated on the
//! fly by a deterministic PRNG reader, so the source costs no memory. The S3 server is a
//! separate process on loopback; its own memory is reported apart.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Value, json};
use statecraft_shared::s3::{S3Credentials, S3Location, S3Store, TransferConfig};
use statecraft_shared::testing::s3::{HashingWriter, PatternReader, S3Server};
use tokio::io::{AsyncWriteExt, BufReader};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const MIB: f64 = 1024.0 * 1024.0;
const BUCKET: &str = "bench";
const SEED: u64 = 2024;

fn main() {
    if let Ok(role) = std::env::var("STATECRAFT_BENCH_ROLE") {
        // The store's debug event "all parts uploaded" splits the upload's time into
        // streaming the parts and completing; RUST_LOG=statecraft_shared=debug also
        // prints the transfer's log on stderr.
        let log = std::env::var_os("RUST_LOG").map(|_| {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(tracing_subscriber::EnvFilter::from_default_env())
        });
        tracing_subscriber::registry()
            .with(PhaseLayer.with_filter(tracing_subscriber::filter::LevelFilter::DEBUG))
            .with(log)
            .init();
        let result = runtime().block_on(child(&role));
        println!("{result}");
        return;
    }
    if let Err(e) = runtime().block_on(parent()) {
        eprintln!("s3_store bench failed: {e}");
        std::process::exit(1);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the Tokio runtime: {e}");
            std::process::exit(1);
        }
    }
}

fn bytes() -> u64 {
    std::env::var("STATECRAFT_BENCH_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(1 << 30)
}

/// The default transfer settings, or `STATECRAFT_BENCH_PART_SIZE` (bytes) and
/// `STATECRAFT_BENCH_CONCURRENCY` when set.
fn transfer_config() -> TransferConfig {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<usize>().ok());
    let default = TransferConfig::default();
    TransferConfig {
        part_size: env("STATECRAFT_BENCH_PART_SIZE").unwrap_or(default.part_size),
        concurrency: env("STATECRAFT_BENCH_CONCURRENCY").unwrap_or(default.concurrency),
        ..default
    }
}

type BoxError = Box<dyn std::error::Error>;

async fn parent() -> Result<(), BoxError> {
    let bytes = bytes();
    let server = S3Server::start().await?;
    server.create_bucket(BUCKET)?;
    let scratch = tempfile::tempdir()?;
    let transfer = transfer_config();
    println!(
        "s3_store bench: {:.0} MiB, part size {:.0} MiB, concurrency {}; s3s-fs at {}",
        bytes as f64 / MIB,
        transfer.part_size as f64 / MIB,
        transfer.concurrency,
        server.endpoint()
    );

    let env = [
        ("STATECRAFT_BENCH_BYTES", bytes.to_string()),
        ("STATECRAFT_BENCH_ENDPOINT", server.endpoint().to_owned()),
        ("STATECRAFT_BENCH_ACCESS_KEY", server.access_key().to_owned()),
        ("STATECRAFT_BENCH_SECRET_KEY", server.secret_key().to_owned()),
        ("STATECRAFT_BENCH_FILE", scratch.path().join("local.bin").display().to_string()),
    ];
    let mut results = Vec::new();
    for role in ["file", "upload", "download", "upload-unsigned"] {
        // Start each measurement without the previous one's dirty pages being written
        // back underneath it.
        let _ = Command::new("sync").status();
        let out =
            Command::new(std::env::current_exe()?).env("STATECRAFT_BENCH_ROLE", role).envs(env.clone()).output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if std::env::var_os("RUST_LOG").is_some() {
            eprintln!("--- {role} ---\n{}", String::from_utf8_lossy(&out.stderr));
        }
        let line = stdout.lines().last().unwrap_or_default();
        if !out.status.success() {
            return Err(format!(
                "{role} child failed ({}): {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{role} child printed {line:?}: {e}"))?;
        if let Some(e) = v.get("error") {
            return Err(format!("{role}: {e}").into());
        }
        results.push(v);
        // Keep the page cache from carrying one measurement's writes into the next one's
        // time as little as we can without root: the local file is removed right away.
        let _ = std::fs::remove_file(scratch.path().join("local.bin"));
    }
    let server_hwm_kib = server.pid().and_then(|pid| vm_hwm_kib(&format!("/proc/{pid}/status")));

    let [file, upload, download, unsigned] = [&results[0], &results[1], &results[2], &results[3]];
    let rate = |v: &Value| v["mib_per_s"].as_f64().unwrap_or(0.0);
    let hwm = |v: &Value| v["vm_hwm_kib"].as_u64().unwrap_or(0) as f64 / 1024.0;
    let before = |v: &Value| v["vm_hwm_before_kib"].as_u64().unwrap_or(0) as f64 / 1024.0;
    let buffers_mib = (transfer.part_size * transfer.concurrency) as f64 / MIB;
    let rss_limit = 64.0 + buffers_mib;
    let ratio = rate(upload) / rate(file).max(1e-9);

    println!();
    println!("{:<34} {:>10} {:>10} {:>16} {:>16}", "transfer", "seconds", "MiB/s", "peak RSS (MiB)", "RSS at start");
    for (name, v) in [
        ("local file (tokio::fs, no fsync)", file),
        ("S3 upload (multipart, sha256)", upload),
        ("S3 download (verified)", download),
        ("S3 upload, unsigned payload", unsigned),
    ] {
        println!(
            "{:<34} {:>10.2} {:>10.1} {:>16.1} {:>16.1}",
            name,
            v["seconds"].as_f64().unwrap_or(0.0),
            rate(v),
            hwm(v),
            before(v)
        );
    }
    println!();
    println!(
        "upload peak RSS {:.1} MiB; target < 64 MiB + part size x concurrency ({buffers_mib:.0} MiB) = {rss_limit:.0} MiB: {}",
        hwm(upload),
        if hwm(upload) < rss_limit { "met" } else { "NOT MET" }
    );
    println!(
        "upload speed {:.0}% of local file; target >= 50%: {}",
        ratio * 100.0,
        if ratio >= 0.5 { "met" } else { "NOT MET" }
    );
    for (name, v) in [("upload", upload), ("upload, unsigned payload", unsigned)] {
        let streamed = v["detail"]["parts_streamed_seconds"].as_f64().unwrap_or(0.0);
        let total = v["seconds"].as_f64().unwrap_or(0.0);
        println!(
            "{name}: parts streamed in {streamed:.2} s ({:.1} MiB/s); then {:.2} s in CompleteMultipartUpload + metadata copy \
             (s3s-fs concatenates the part files into the object there; S3 does not copy data)",
            bytes as f64 / MIB / streamed.max(1e-9),
            total - streamed
        );
    }
    if let Some(k) = server_hwm_kib {
        println!("(s3s-fs server process peak RSS, not ours: {:.1} MiB)", k as f64 / 1024.0);
    }
    println!(
        "method: one fresh child process per row; peak RSS = VmHWM of that process (includes runtime start-up, \
         shown as 'RSS at start'); data generated on the fly; S3 server on loopback, same disk as the local file. \
         Upload bodies are SigV4-signed over http:// (the default); the unsigned row is what https:// endpoints get."
    );

    let report = json!({
        "benchmark": "s3_store",
        "bytes": bytes,
        "part_size": transfer.part_size,
        "concurrency": transfer.concurrency,
        "local_file": file,
        "upload": upload,
        "download": download,
        "upload_unsigned_payload": unsigned,
        "upload_to_file_ratio": ratio,
        "targets": {
            "upload_peak_rss_mib_below": rss_limit,
            "upload_peak_rss_met": hwm(upload) < rss_limit,
            "upload_ratio_at_least": 0.5,
            "upload_ratio_met": ratio >= 0.5,
        },
        "s3_server_peak_rss_kib": server_hwm_kib,
        "method": "Each transfer runs in a fresh child process; peak RSS is that process's VmHWM \
                   (/proc/self/status), so it covers only process start-up plus that transfer. \
                   Data comes from a deterministic PRNG reader generated on the fly. The S3 server \
                   (s3s-fs) runs on loopback and writes to the same filesystem as the local-file \
                   baseline (tokio::fs::File, 1 MiB buffered copy, no fsync; s3s-fs does not fsync either).",
    });
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../results/bench"));
    std::fs::create_dir_all(&dir)?;
    let path = dir.canonicalize()?.join("s3_store.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Runs one measurement and returns it as JSON (errors included, as `{"error": ...}`).
async fn child(role: &str) -> Value {
    match measure(role).await {
        Ok(v) => v,
        Err(e) => json!({ "error": e.to_string() }),
    }
}

async fn measure(role: &str) -> Result<Value, BoxError> {
    let bytes = bytes();
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} not set"));
    let store = || -> Result<S3Store, BoxError> {
        let location = S3Location {
            endpoint: Some(var("STATECRAFT_BENCH_ENDPOINT")?),
            force_path_style: true,
            ..S3Location::new(BUCKET, "", statecraft_shared::s3::S3CredentialsSecretRef::new("unused"))
        };
        let credentials = S3Credentials::new(var("STATECRAFT_BENCH_ACCESS_KEY")?, var("STATECRAFT_BENCH_SECRET_KEY")?);
        Ok(S3Store::new(&location, credentials)?)
    };
    let before = vm_hwm_kib("/proc/self/status");
    let started = Instant::now();
    let detail = match role {
        "file" => {
            let mut file = tokio::fs::File::create(var("STATECRAFT_BENCH_FILE")?).await?;
            let mut reader = BufReader::with_capacity(1 << 20, PatternReader::new(SEED, bytes));
            let n = tokio::io::copy_buf(&mut reader, &mut file).await?;
            file.flush().await?;
            json!({ "written": n })
        }
        "upload" | "upload-unsigned" => {
            let store = store()?.with_payload_signing(role == "upload").with_transfer_config(transfer_config())?;
            let key = format!("{role}.bin");
            let receipt = store.upload(&key, PatternReader::new(SEED, bytes)).await?;
            let streamed = PARTS_DONE.get().map(|t| t.duration_since(started).as_secs_f64());
            json!({ "parts": receipt.parts, "sha256": receipt.sha256, "parts_streamed_seconds": streamed })
        }
        "download" => {
            let mut sink = HashingWriter::new();
            let receipt = store()?.download("upload.bin", &mut sink, None).await?;
            json!({ "verified": receipt.sha256_verified, "sha256": receipt.sha256 })
        }
        other => return Err(format!("unknown role {other}").into()),
    };
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "role": role,
        "bytes": bytes,
        "seconds": seconds,
        "mib_per_s": bytes as f64 / MIB / seconds.max(1e-9),
        "vm_hwm_kib": vm_hwm_kib("/proc/self/status"),
        "vm_hwm_before_kib": before,
        "detail": detail,
    }))
}

/// Peak resident set size (`VmHWM`) in KiB from a `/proc/<pid>/status` file.
fn vm_hwm_kib(status_path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(status_path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// When the upload's last part was acknowledged (set by [`PhaseLayer`]).
static PARTS_DONE: OnceLock<Instant> = OnceLock::new();

/// Notes the time of the store's "all parts uploaded" debug event.
struct PhaseLayer;

impl<S: tracing::Subscriber> Layer<S> for PhaseLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" && format!("{value:?}").starts_with("all parts uploaded") {
                    self.0 = true;
                }
            }
        }
        if event.metadata().target().starts_with("statecraft_shared::s3") {
            let mut m = Message(false);
            event.record(&mut m);
            if m.0 {
                let _ = PARTS_DONE.set(Instant::now());
            }
        }
    }
}
