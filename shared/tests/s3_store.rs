//! The S3 backup store against a real S3 server (s3s-fs, installed by `make deps`).
//! Every test starts its own server in its own temporary directory.
//!
//! The large round trip streams 1 GiB by default; set `STATECRAFT_TEST_S3_BYTES` to change
//! that (e.g. `STATECRAFT_TEST_S3_BYTES=104857600` for 100 MiB).

use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, SystemTime};

use chrono::Utc;
use statecraft_shared::error::ErrorCategory;
use statecraft_shared::s3::{
    ENDPOINTS_ANNOTATION, OPT_IN_LABEL, RetentionPolicy, S3Credentials, S3Error, S3Store, TransferConfig,
    check_credentials,
};
use statecraft_shared::testing::s3::{HashingWriter, PatternReader, S3Server, StreamEnd};
use tokio::io::AsyncReadExt;

const MIB: u64 = 1024 * 1024;
const BUCKET: &str = "backups";

async fn server() -> S3Server {
    let server = S3Server::start().await.expect("start s3s-fs");
    server.create_bucket(BUCKET).expect("create bucket");
    server
}

/// What the server logged for its first failures: a 500 carries no message, the log has
/// the I/O error (e.g. "No space left on device").
fn first_errors(server: &S3Server) -> Vec<String> {
    server.errors().into_iter().take(4).collect()
}

fn store(server: &S3Server, prefix: &str) -> S3Store {
    server.store(BUCKET, prefix).expect("store")
}

/// 5 MiB parts (S3's minimum), to exercise multipart paths with little data.
fn small_parts(store: S3Store) -> S3Store {
    store
        .with_transfer_config(TransferConfig { part_size: 5 * MIB as usize, ..Default::default() })
        .expect("valid config")
}

async fn bytes_of(seed: u64, len: u64) -> Vec<u8> {
    let mut v = Vec::new();
    PatternReader::new(seed, len).read_to_end(&mut v).await.expect("generate");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_stream_round_trips_byte_for_byte() {
    let len: u64 = std::env::var("STATECRAFT_TEST_S3_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024 * MIB);
    let server = server().await;
    let store = store(&server, "mysql/prod");
    let part_size = store.transfer_config().part_size as u64;

    let receipt = store
        .upload("full.sql", PatternReader::new(42, len))
        .await
        .unwrap_or_else(|e| panic!("upload: {e:?}; the server's first errors: {:#?}", first_errors(&server)));
    assert_eq!(receipt.size, len);
    assert_eq!(receipt.parts as u64, len.div_ceil(part_size));
    assert_eq!(receipt.object_key, "mysql/prod/full.sql");
    // Independently regenerated: the receipt is the hash of what the reader produced.
    assert_eq!(receipt.sha256, PatternReader::sha256_of(42, len));
    assert_eq!(std::fs::metadata(server.object_path(BUCKET, "mysql/prod/full.sql")).expect("object file").len(), len);

    let mut sink = HashingWriter::new();
    let downloaded = store
        .download("full.sql", &mut sink, Some(&receipt.sha256))
        .await
        .unwrap_or_else(|e| panic!("download: {e:?}; the server's first errors: {:#?}", first_errors(&server)));
    assert_eq!(sink.written(), len);
    assert_eq!(sink.sha256(), receipt.sha256);
    assert_eq!(downloaded.sha256, receipt.sha256);
    assert!(downloaded.sha256_verified);
    assert!(server.incomplete_upload_files().expect("read root").is_empty());
}

#[tokio::test]
async fn small_object_is_one_put_and_round_trips() {
    let server = server().await;
    let store = store(&server, "");
    let len = MIB + 7;
    let receipt = store.upload("small.bin", PatternReader::new(1, len)).await.expect("upload");
    assert_eq!((receipt.size, receipt.parts), (len, 0));

    let mut out = Vec::new();
    let downloaded = store.download("small.bin", &mut out, None).await.expect("download");
    assert!(downloaded.sha256_verified, "sha256 metadata recorded by PutObject");
    assert_eq!(out, bytes_of(1, len).await);

    // The same through the AsyncRead interface.
    let mut reader = store.open("small.bin", None).await.expect("open");
    let mut again = Vec::new();
    reader.read_to_end(&mut again).await.expect("read");
    assert_eq!(again, out);
    assert_eq!(reader.receipt().map(|r| r.sha256.as_str()), Some(receipt.sha256.as_str()));
}

#[tokio::test]
async fn empty_stream_round_trips() {
    let server = server().await;
    let store = store(&server, "p");
    let receipt = store.upload("empty", tokio::io::empty()).await.expect("upload");
    assert_eq!(receipt.size, 0);
    assert_eq!(receipt.sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    let mut out = Vec::new();
    let downloaded = store.download("empty", &mut out, None).await.expect("download");
    assert!(out.is_empty());
    assert!(downloaded.sha256_verified);
    let listed = store.list("").await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].key.as_str(), listed[0].size), ("empty", 0));
}

#[tokio::test]
async fn part_boundaries_and_concurrency_one() {
    let server = server().await;
    let five = 5 * MIB;
    for (concurrency, len, parts) in [(4, five, 1), (4, 2 * five, 2), (4, 2 * five + 1, 3), (1, 3 * five - 1, 3)] {
        let store = store(&server, "b")
            .with_transfer_config(TransferConfig { part_size: five as usize, concurrency, ..Default::default() })
            .expect("config");
        let key = format!("{concurrency}-{len}");
        let receipt = store.upload(&key, PatternReader::new(len, len)).await.expect("upload");
        assert_eq!((receipt.size, receipt.parts), (len, parts), "{key}");
        let mut out = Vec::new();
        assert!(store.download(&key, &mut out, None).await.expect("download").sha256_verified);
        assert_eq!(out, bytes_of(len, len).await, "{key}");
    }
}

#[tokio::test]
async fn unsigned_payloads_round_trip() {
    // What HTTPS endpoints get by default; s3s-fs speaks only HTTP, so force it.
    let server = server().await;
    let store = small_parts(store(&server, "u")).with_payload_signing(false);
    for len in [100, 11 * MIB] {
        let key = format!("unsigned-{len}");
        let receipt = store.upload(&key, PatternReader::new(len, len)).await.expect("upload");
        let mut sink = HashingWriter::new();
        assert!(store.download(&key, &mut sink, None).await.expect("download").sha256_verified);
        assert_eq!((sink.written(), sink.sha256()), (len, receipt.sha256));
    }
}

#[tokio::test]
async fn objects_too_large_for_one_copy_are_stamped_by_multipart_copy() {
    let server = server().await;
    let store = store(&server, "")
        .with_transfer_config(TransferConfig {
            part_size: 5 * MIB as usize,
            max_single_copy: 8 * MIB,
            copy_part_size: 5 * MIB,
            ..Default::default()
        })
        .expect("config");
    let len = 12 * MIB + 3;
    let receipt = store.upload("big", PatternReader::new(9, len)).await.expect("upload");
    let mut sink = HashingWriter::new();
    let downloaded = store.download("big", &mut sink, None).await.expect("download");
    assert!(downloaded.sha256_verified);
    assert_eq!((sink.written(), sink.sha256()), (len, receipt.sha256));
    assert!(server.incomplete_upload_files().expect("read root").is_empty());
}

#[tokio::test]
async fn failing_reader_leaves_no_object_and_no_upload() {
    let server = server().await;
    let store = store(&server, "mysql");
    let reader = PatternReader::with_end(3, 40 * MIB, StreamEnd::Error);
    let err = store.upload("broken.sql", reader).await.expect_err("reader failed");
    assert!(matches!(err, S3Error::Source { .. }), "{err}");
    assert!(err.to_string().contains("simulated reader failure"), "{err}");

    assert!(store.list("").await.expect("list").is_empty());
    let missing = store.open("broken.sql", None).await.expect_err("no object");
    assert!(matches!(missing, S3Error::NotFound { .. }), "{missing}");
    assert!(!server.object_path(BUCKET, "mysql/broken.sql").exists());
    let leftovers = server.incomplete_upload_files().expect("read root");
    assert!(leftovers.is_empty(), "multipart upload not aborted: {leftovers:?}");
}

/// A reader that fails while the previous part is still being sent: the abort must wait
/// for that part, or the server stores it after the abort (s3s-fs, like S3, accepts a part
/// whose request had begun before the upload was aborted). Repeated, since it is a race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_while_a_part_is_in_flight_leaves_no_part_behind() {
    let server = server().await;
    let store = small_parts(store(&server, ""));
    for run in 0..20 {
        // Two whole parts, then the error on the third read: part 2 is in flight then.
        let reader = PatternReader::with_end(run, 10 * MIB, StreamEnd::Error);
        let err = store.upload("racing.sql", reader).await.expect_err("reader failed");
        assert!(matches!(err, S3Error::Source { .. }), "{err}");
        let leftovers = server.incomplete_upload_files().expect("read root");
        assert!(leftovers.is_empty(), "run {run}: parts left after the abort: {leftovers:?}");
    }
    assert!(store.list("").await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_upload_is_aborted() {
    let server = server().await;
    let store = small_parts(store(&server, ""));
    // Hangs after 40 MiB, like a stuck dump; the caller gives up.
    let reader = PatternReader::with_end(4, 40 * MIB, StreamEnd::Stall);
    let timed_out = tokio::time::timeout(Duration::from_secs(5), store.upload("hung.sql", reader)).await;
    assert!(timed_out.is_err(), "upload cannot finish");

    // The abort runs in the background after the drop.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let leftovers = server.incomplete_upload_files().expect("read root");
        if leftovers.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "multipart upload not aborted: {leftovers:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(store.list("").await.expect("list").is_empty());
    assert!(matches!(store.open("hung.sql", None).await, Err(S3Error::NotFound { .. })));
}

#[tokio::test]
async fn wrong_credentials_name_bucket_and_endpoint() {
    let server = server().await;
    let location = server.location(BUCKET, "");
    let cases = [
        ("wrong secret", S3Credentials::new(server.access_key(), "not-the-secret")),
        ("unknown key id", S3Credentials::new("AKNOBODY", server.secret_key())),
    ];
    for (case, credentials) in cases {
        let store = S3Store::new(&location, credentials).expect("store");
        for err in [
            store.check().await.expect_err("HeadBucket"),
            store.upload("x", PatternReader::new(1, 10)).await.expect_err("PutObject"),
            store.list("").await.expect_err("ListObjectsV2"),
        ] {
            let text = err.to_string();
            assert!(matches!(err, S3Error::AccessDenied { .. }), "{case}: {text}");
            assert!(text.contains("bucket \"backups\""), "{case}: {text}");
            assert!(text.contains(server.endpoint()), "{case}: {text}");
            assert!(text.contains("access denied"), "{case}: {text}");
            assert!(!err.is_transient(), "{case}: {text}");
        }
    }
}

#[tokio::test]
async fn missing_bucket_names_bucket_and_endpoint() {
    let server = server().await;
    let store = server.store("no-such-bucket", "").expect("store");
    for err in [
        store.check().await.expect_err("HeadBucket"),
        store.list("").await.expect_err("ListObjectsV2"),
        // Not object operations: s3s-fs 0.14 answers NoSuchKey for GetObject and creates
        // the bucket on PutObject where S3 answers NoSuchBucket.
    ] {
        let text = err.to_string();
        assert!(matches!(err, S3Error::NoSuchBucket { .. }), "{text}");
        assert_eq!(text, format!("bucket \"no-such-bucket\" at {}: no such bucket", server.endpoint()));
        assert!(!err.is_transient());
    }
}

#[tokio::test]
async fn unreachable_endpoint_is_transient() {
    let server = server().await;
    let mut location = server.location(BUCKET, "");
    // A port nobody listens on: bind one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    location.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let store = S3Store::new(&location, server.credentials()).expect("store");
    let err = store.check().await.expect_err("nobody listens");
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains(&format!("bucket \"backups\" at http://127.0.0.1:{port}")), "{err}");
}

#[tokio::test]
async fn list_by_prefix_and_delete() {
    let server = server().await;
    let other = store(&server, "cluster-b");
    let store = store(&server, "cluster-a");
    let before = Utc::now() - chrono::Duration::seconds(5);
    for (i, key) in ["full/1.sql", "full/2.sql", "binlog/1"].iter().enumerate() {
        store.upload(key, PatternReader::new(i as u64, 100 + i as u64)).await.expect("upload");
    }
    other.upload("full/1.sql", PatternReader::new(0, 1)).await.expect("upload");

    let full = store.list("full/").await.expect("list");
    let keys: Vec<&str> = full.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["full/1.sql", "full/2.sql"]);
    assert_eq!((full[0].size, full[1].size), (100, 101));
    assert!(
        full.iter().all(|o| o.last_modified > before && o.last_modified < Utc::now() + chrono::Duration::seconds(5))
    );
    assert_eq!(store.list("").await.expect("list").len(), 3);

    store.delete("full/1.sql").await.expect("delete");
    store.delete("full/1.sql").await.expect("deleting a missing object succeeds");
    let keys: Vec<String> = store.list("").await.expect("list").into_iter().map(|o| o.key).collect();
    assert_eq!(keys, ["binlog/1", "full/2.sql"]);
    assert_eq!(other.list("").await.expect("list").len(), 1, "other prefix untouched");
}

#[tokio::test]
async fn retention_deletes_old_objects_beyond_the_newest() {
    let server = server().await;
    let store = store(&server, "db");
    let day = Duration::from_secs(86_400);
    // backup-0 is today's, backup-5 five days old (s3s-fs reports file times).
    for i in 0..6u64 {
        let key = format!("backup-{i}");
        store.upload(&key, PatternReader::new(i, 10)).await.expect("upload");
        let file =
            std::fs::File::options().write(true).open(server.object_path(BUCKET, &format!("db/{key}"))).expect("open");
        file.set_modified(SystemTime::now() - day * i as u32).expect("set mtime");
    }
    // Keep the 2 newest or anything younger than 3.5 days: backup-0..3 stay.
    let policy = RetentionPolicy { keep_last: Some(2), max_age: Some(day * 7 / 2) };
    let deleted = store.apply_retention("", &policy, Utc::now()).await.expect("retention");
    let deleted: Vec<&str> = deleted.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(deleted, ["backup-5", "backup-4"]);
    let left: Vec<String> = store.list("").await.expect("list").into_iter().map(|o| o.key).collect();
    assert_eq!(left, ["backup-0", "backup-1", "backup-2", "backup-3"]);

    // An empty policy deletes nothing.
    assert!(store.apply_retention("", &RetentionPolicy::default(), Utc::now()).await.expect("retention").is_empty());
    assert_eq!(store.list("").await.expect("list").len(), 4);
}

#[tokio::test]
async fn corrupted_objects_are_detected() {
    let server = server().await;
    let store = small_parts(store(&server, "c"));
    let len = 7 * MIB; // multipart: checksum stamped by CopyObject
    let receipt = store.upload("flipped", PatternReader::new(5, len)).await.expect("upload");
    let path = server.object_path(BUCKET, "c/flipped");
    {
        let mut f = std::fs::File::options().read(true).write(true).open(&path).expect("open object file");
        f.seek(SeekFrom::Start(len / 2)).expect("seek");
        f.write_all(b"X").expect("corrupt one byte");
    }
    let err = store.download("flipped", &mut HashingWriter::new(), None).await.expect_err("corrupt");
    match &err {
        S3Error::Corrupt { what, expected, .. } => {
            assert_eq!((*what, &**expected), ("sha256", receipt.sha256.as_str()))
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    assert!(!err.is_transient());
    assert!(
        err.to_string()
            .contains(&format!("bucket \"backups\" at {}: object \"flipped\" is corrupt", server.endpoint()))
    );

    // Through the AsyncRead interface, the final read fails instead of reporting EOF.
    let mut reader = store.open("flipped", None).await.expect("open");
    let io_err = tokio::io::copy(&mut reader, &mut tokio::io::sink()).await.expect_err("corrupt");
    assert_eq!(io_err.kind(), std::io::ErrorKind::InvalidData);
    let inner = io_err.into_inner().and_then(|e| e.downcast::<S3Error>().ok()).expect("S3Error inside");
    assert!(matches!(*inner, S3Error::Corrupt { what: "sha256", .. }), "{inner}");

    // A truncated object (small, stamped by PutObject) fails on size.
    store.upload("truncated", PatternReader::new(6, 1000)).await.expect("upload");
    std::fs::File::options()
        .write(true)
        .open(server.object_path(BUCKET, "c/truncated"))
        .and_then(|f| f.set_len(999))
        .expect("truncate");
    let err = store.download("truncated", &mut Vec::new(), None).await.expect_err("truncated");
    assert!(matches!(&err, S3Error::Corrupt { what: "size", .. }), "{err}");

    // A caller-supplied checksum is checked even when the metadata agrees with the data.
    store.upload("intact", PatternReader::new(7, 1000)).await.expect("upload");
    let wrong = "00".repeat(32);
    let err = store.download("intact", &mut Vec::new(), Some(&wrong)).await.expect_err("unexpected checksum");
    assert!(matches!(&err, S3Error::Corrupt { .. }), "{err}");
}

/// The store is configured from a Kubernetes Secret, read from a real API server.
#[tokio::test]
async fn store_from_a_kubernetes_secret() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{ObjectMeta, PostParams};
    use statecraft_shared::testing::apiserver::ApiServer;

    let s3 = server().await;
    let api_server = ApiServer::start().await.expect("kube-apiserver");
    let client = api_server.client().await.expect("client");
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), "default");
    let opted_in = Some([(OPT_IN_LABEL.to_string(), "true".to_string())].into());
    let secret = Secret {
        metadata: ObjectMeta { name: Some("s3-credentials".into()), labels: opted_in, ..Default::default() },
        string_data: Some(
            [
                ("AWS_ACCESS_KEY_ID".to_string(), s3.access_key().to_string()),
                ("AWS_SECRET_ACCESS_KEY".to_string(), format!("{}\n", s3.secret_key())),
            ]
            .into(),
        ),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &secret).await.expect("secret");

    let location = s3.location("backups", "cluster-a");
    let store = S3Store::from_secret(client.clone(), "default", &location).await.expect("store from secret");
    let receipt = store.upload("dump.sql", &b"select 1;"[..]).await.expect("upload");
    assert_eq!(receipt.size, 9);
    let listed = store.list("").await.expect("list");
    assert_eq!(listed.len(), 1);

    // A missing Secret is a clear, non-transient error naming it.
    let mut missing = location.clone();
    missing.credentials_secret.name = "nope".into();
    let err = S3Store::from_secret(client.clone(), "default", &missing).await.expect_err("no such secret");
    assert!(err.to_string().contains("nope"), "{err}");
    assert!(!err.is_transient());

    // A Secret that did not opt in is never used, whatever keys are named: here a
    // database password offered as the access key id.
    let passwords = Secret {
        metadata: ObjectMeta { name: Some("db-passwords".into()), ..Default::default() },
        string_data: Some([("root-password".to_string(), "hunter2".to_string())].into()),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &passwords).await.expect("secret");
    let mut stolen = location.clone();
    stolen.credentials_secret.name = "db-passwords".into();
    stolen.credentials_secret.access_key_id_key = "root-password".into();
    stolen.credentials_secret.secret_access_key_key = "root-password".into();
    let err = S3Store::from_secret(client.clone(), "default", &stolen).await.expect_err("not opted in");
    assert!(err.to_string().contains("db-passwords") && err.to_string().contains(OPT_IN_LABEL), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = check_credentials(client.clone(), "default", &stolen, "spec.location.credentialsSecret")
        .await
        .expect_err("refused");
    assert_eq!(err.category(), ErrorCategory::InvalidSpec, "the user's to fix: {err}");
    assert!(err.to_string().contains("spec.location.credentialsSecret"), "names the field: {err}");

    // Pinned endpoints: the opted-in Secret refuses any other endpoint.
    let mut pinned = secrets.get("s3-credentials").await.expect("get");
    pinned.metadata.annotations =
        Some([(ENDPOINTS_ANNOTATION.to_string(), "http://elsewhere:9000".to_string())].into());
    pinned.metadata.managed_fields = None;
    secrets.replace("s3-credentials", &PostParams::default(), &pinned).await.expect("annotate");
    let err = check_credentials(client, "default", &location, "spec.location.credentialsSecret")
        .await
        .expect_err("endpoint not pinned");
    assert!(err.to_string().contains(ENDPOINTS_ANNOTATION), "{err}");
}
