//! Where backups go ([`S3Location`], part of operator CRDs), the credentials to get there
//! ([`S3Credentials`]), and how objects are moved ([`TransferConfig`]).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::S3Error;

/// The default region. S3-compatible servers usually ignore it but SigV4 needs one.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The Secret key holding the access key id unless the location names another.
pub const DEFAULT_ACCESS_KEY_ID_KEY: &str = "AWS_ACCESS_KEY_ID";
/// The Secret key holding the secret access key unless the location names another.
pub const DEFAULT_SECRET_ACCESS_KEY_KEY: &str = "AWS_SECRET_ACCESS_KEY";

const MIB: usize = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

/// An S3 bucket and key prefix where backups are stored, with the Secret that holds the
/// credentials. Embedded in the operators' CRDs, so every field is documented for users.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Location {
    /// Name of the bucket. It must already exist; the operator never creates buckets.
    pub bucket: String,

    /// Key prefix under which this cluster's backups are stored, e.g.
    /// `mysql/production`. A trailing `/` is added when missing. Empty means the bucket root.
    #[serde(default)]
    pub prefix: String,

    /// URL of an S3-compatible endpoint, e.g. `http://minio.storage:9000`. Leave unset
    /// for AWS S3, whose endpoint is derived from the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,

    /// Region of the bucket. S3-compatible servers usually accept any value.
    #[serde(default = "default_region")]
    pub region: String,

    /// Address the bucket as `<endpoint>/<bucket>` instead of `<bucket>.<endpoint>`.
    /// Most self-hosted S3-compatible servers (MinIO, Ceph, SeaweedFS) need this.
    #[serde(default)]
    pub force_path_style: bool,

    /// The Secret, in the same namespace as the custom resource, holding the access key.
    pub credentials_secret: S3CredentialsSecretRef,
}

/// A Secret holding an S3 access key id and secret access key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3CredentialsSecretRef {
    /// Name of the Secret.
    pub name: String,

    /// Key in the Secret whose value is the access key id.
    #[serde(default = "default_access_key_id_key")]
    pub access_key_id_key: String,

    /// Key in the Secret whose value is the secret access key.
    #[serde(default = "default_secret_access_key_key")]
    pub secret_access_key_key: String,
}

fn default_region() -> String {
    DEFAULT_REGION.to_owned()
}
fn default_access_key_id_key() -> String {
    DEFAULT_ACCESS_KEY_ID_KEY.to_owned()
}
fn default_secret_access_key_key() -> String {
    DEFAULT_SECRET_ACCESS_KEY_KEY.to_owned()
}

impl S3CredentialsSecretRef {
    /// A reference to Secret `name` with the default keys.
    pub fn new(name: impl Into<String>) -> Self {
        S3CredentialsSecretRef {
            name: name.into(),
            access_key_id_key: default_access_key_id_key(),
            secret_access_key_key: default_secret_access_key_key(),
        }
    }
}

impl S3Location {
    /// A location with default region, no endpoint (AWS) and virtual-hosted addressing.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>, secret: S3CredentialsSecretRef) -> Self {
        S3Location {
            bucket: bucket.into(),
            prefix: prefix.into(),
            endpoint: None,
            region: default_region(),
            force_path_style: false,
            credentials_secret: secret,
        }
    }

    /// Checks what can be checked without talking to S3, so that a typo becomes an
    /// invalid-spec error naming the field instead of an obscure network failure. Field
    /// names in the error are relative to the location (`bucket`, `endpoint`, ...).
    pub fn validate(&self) -> Result<(), S3Error> {
        let invalid = |field: &str, message: String| Err(S3Error::InvalidConfig { field: field.to_owned(), message });
        let b = &self.bucket;
        if !(3..=63).contains(&b.len()) {
            return invalid("bucket", format!("{b:?} must be 3 to 63 characters long"));
        }
        if !b.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-') {
            return invalid("bucket", format!("{b:?} may contain only lowercase letters, digits, '.' and '-'"));
        }
        let alnum = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !alnum(b.bytes().next()) || !alnum(b.bytes().last()) {
            return invalid("bucket", format!("{b:?} must begin and end with a letter or digit"));
        }
        if let Some(e) = &self.endpoint {
            let rest = e.strip_prefix("http://").or_else(|| e.strip_prefix("https://"));
            if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
                return invalid("endpoint", format!("{e:?} must be an http:// or https:// URL with a host"));
            }
        }
        if self.region.trim().is_empty() {
            return invalid("region", "must not be empty".to_owned());
        }
        if self.prefix.split('/').any(|s| s == "." || s == "..") {
            return invalid("prefix", format!("{:?} must not contain '.' or '..' segments", self.prefix));
        }
        let s = &self.credentials_secret;
        if s.name.is_empty() {
            return invalid("credentialsSecret.name", "must not be empty".to_owned());
        }
        if s.access_key_id_key.is_empty() {
            return invalid("credentialsSecret.accessKeyIdKey", "must not be empty".to_owned());
        }
        if s.secret_access_key_key.is_empty() {
            return invalid("credentialsSecret.secretAccessKeyKey", "must not be empty".to_owned());
        }
        Ok(())
    }

    /// The prefix as used in keys: no leading `/`, a trailing `/` unless empty.
    pub fn normalized_prefix(&self) -> String {
        let p = self.prefix.trim_matches('/');
        if p.is_empty() { String::new() } else { format!("{p}/") }
    }

    /// The endpoint as shown in error messages: the configured one, or the AWS endpoint
    /// of the region, so that users can tell which server refused them.
    pub fn endpoint_display(&self) -> String {
        match &self.endpoint {
            Some(e) => e.trim_end_matches('/').to_owned(),
            None => format!("https://s3.{}.amazonaws.com", self.region),
        }
    }
}

/// An access key. `Debug` hides the secret so that credentials never reach logs.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    /// The access key id (not secret; shown in `Debug`).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// A session token, for temporary credentials.
    pub session_token: Option<String>,
}

impl S3Credentials {
    /// Long-term credentials without a session token.
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        S3Credentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
        }
    }
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &self.session_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// How objects are transferred. Memory used by one upload is bounded by
/// `part_size * concurrency` plus small constant overhead: at most `concurrency` part
/// buffers exist at once, counting the one being filled from the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferConfig {
    /// Size of each multipart part in bytes (S3 allows 5 MiB to 5 GiB). Streams shorter
    /// than one part are stored with a single PutObject. With S3's limit of 10,000 parts,
    /// the largest object is `part_size * 10_000` (160 GiB at the 16 MiB default).
    pub part_size: usize,
    /// Part buffers alive at once, the one being filled included; so up to
    /// `concurrency - 1` parts upload while the next is read. 1 disables overlap.
    pub concurrency: usize,
    /// Largest object whose checksum metadata is set with one in-place CopyObject (S3's
    /// limit is 5 GiB); larger objects are rewritten with a multipart copy.
    pub max_single_copy: u64,
    /// Part size of that multipart copy.
    pub copy_part_size: u64,
}

impl Default for TransferConfig {
    fn default() -> Self {
        TransferConfig { part_size: 16 * MIB, concurrency: 4, max_single_copy: 5 * GIB, copy_part_size: GIB }
    }
}

/// The smallest part S3 accepts for all but the last part of a multipart upload.
pub const MIN_PART_SIZE: usize = 5 * MIB;
/// The largest part S3 accepts.
pub const MAX_PART_SIZE: usize = 5 * GIB as usize;
/// The most parts S3 accepts in one multipart upload.
pub const MAX_PARTS: u64 = 10_000;

impl TransferConfig {
    /// Rejects values S3 would refuse mid-upload, before any byte is sent.
    pub fn validate(&self) -> Result<(), S3Error> {
        let invalid = |field: &str, message: String| Err(S3Error::InvalidConfig { field: field.to_owned(), message });
        if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&self.part_size) {
            return invalid("partSize", format!("{} must be between 5 MiB and 5 GiB", self.part_size));
        }
        if self.concurrency == 0 {
            return invalid("concurrency", "must be at least 1".to_owned());
        }
        if self.max_single_copy > 5 * GIB {
            return invalid("maxSingleCopy", format!("{} exceeds S3's 5 GiB CopyObject limit", self.max_single_copy));
        }
        if !(MIN_PART_SIZE as u64..=MAX_PART_SIZE as u64).contains(&self.copy_part_size) {
            return invalid("copyPartSize", format!("{} must be between 5 MiB and 5 GiB", self.copy_part_size));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(bucket: &str) -> S3Location {
        S3Location::new(bucket, "a/b", S3CredentialsSecretRef::new("s3"))
    }

    #[test]
    fn deserializes_with_defaults_from_camel_case() {
        let l: S3Location = serde_json::from_value(serde_json::json!({
            "bucket": "backups", "endpoint": "http://minio:9000", "forcePathStyle": true,
            "credentialsSecret": {"name": "s3-creds"}
        }))
        .expect("valid location");
        assert_eq!(l.region, "us-east-1");
        assert_eq!(l.prefix, "");
        assert!(l.force_path_style);
        assert_eq!(l.credentials_secret.access_key_id_key, "AWS_ACCESS_KEY_ID");
        assert_eq!(l.credentials_secret.secret_access_key_key, "AWS_SECRET_ACCESS_KEY");
        l.validate().expect("valid");
    }

    #[test]
    fn schema_documents_every_field() {
        let schema = serde_json::to_value(schemars::schema_for!(S3Location)).expect("schema");
        let text = schema.to_string();
        for field in ["bucket", "prefix", "endpoint", "region", "forcePathStyle", "credentialsSecret", "accessKeyIdKey"]
        {
            assert!(text.contains(&format!("\"{field}\"")), "{field} missing in {text}");
        }
        let props = &schema["properties"];
        for (name, p) in props.as_object().expect("properties") {
            assert!(p.get("description").is_some(), "{name} has no description");
        }
    }

    #[test]
    fn bucket_names_are_checked() {
        for bad in ["ab", "Backups", "-abc", "abc-", "a_b_c", &"x".repeat(64)] {
            let e = loc(bad).validate().expect_err(bad);
            assert!(matches!(&e, S3Error::InvalidConfig { field, .. } if field == "bucket"), "{bad}: {e}");
        }
        for good in ["abc", "my.backups-1", &"x".repeat(63)] {
            loc(good).validate().expect(good);
        }
        let mut l = loc("abc");
        l.endpoint = Some("minio:9000".into());
        assert!(l.validate().is_err());
    }

    #[test]
    fn prefix_is_normalized() {
        assert_eq!(loc("abc").normalized_prefix(), "a/b/");
        let mut l = loc("abc");
        l.prefix = "/x/".into();
        assert_eq!(l.normalized_prefix(), "x/");
        l.prefix = String::new();
        assert_eq!(l.normalized_prefix(), "");
    }

    #[test]
    fn debug_hides_the_secret() {
        let c = S3Credentials::new("AKID", "very-secret");
        assert!(!format!("{c:?}").contains("very-secret"));
    }

    #[test]
    fn transfer_config_bounds() {
        TransferConfig::default().validate().expect("default is valid");
        assert!(TransferConfig { part_size: MIB, ..Default::default() }.validate().is_err());
        assert!(TransferConfig { concurrency: 0, ..Default::default() }.validate().is_err());
    }
}
