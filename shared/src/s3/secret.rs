//! Which Secrets may hold S3 credentials, and reading them.
//!
//! Whoever may create a backup or restore names the Secret and the keys its credentials
//! are read from, and the endpoint they are sent to. SigV4 sends the access key id as it
//! is, so without a check any Secret value (a database password, say) could be sent to an
//! endpoint of the creator's choice, and the operator, which can read Secrets, would do
//! it for someone who cannot. So a Secret is used for S3 only when its owner opted in by
//! labelling it [`OPT_IN_LABEL`]`: "true"`; it may also pin the endpoints its credentials
//! may be sent to with the [`ENDPOINTS_ANNOTATION`]. Everything else is refused before a
//! Job is created or the Secret is read for a request.

use k8s_openapi::api::core::v1::Secret;
use tracing::debug;

use crate::secrets::SecretRefusal;

use super::{S3Credentials, S3CredentialsSecretRef, S3Error, S3Location};

/// The label a Secret must carry, with the value `"true"`, to be used as S3 credentials.
pub const OPT_IN_LABEL: &str = "statecraft.io/s3-credentials";
/// Optional annotation on such a Secret: the endpoints (comma-separated URLs, compared
/// without a trailing `/`; `aws` for AWS S3 itself, i.e. no `endpoint` in the location)
/// to which its credentials may be sent. Absent: any endpoint.
pub const ENDPOINTS_ANNOTATION: &str = "statecraft.io/s3-endpoints";

/// Why `secret` may not be used for `location`, if it may not: not opted in, or the
/// location's endpoint is not one the Secret allows. Pure, so that every user of a
/// location (the operator's own requests, and the Jobs it creates) applies the same rule.
pub fn refusal(secret: &Secret, location: &S3Location) -> Option<String> {
    if !crate::secrets::opted_in(secret, OPT_IN_LABEL) {
        return Some(format!(
            "is not labelled {OPT_IN_LABEL}=true; only Secrets whose owner opted in are used as S3 credentials \
             (kubectl label secret {} {OPT_IN_LABEL}=true)",
            location.credentials_secret.name
        ));
    }
    let allowed = secret.metadata.annotations.as_ref().and_then(|a| a.get(ENDPOINTS_ANNOTATION))?;
    let wanted = location.endpoint.as_deref().map_or("aws", |e| e.trim_end_matches('/'));
    let permitted = allowed.split(',').map(|e| e.trim().trim_end_matches('/')).any(|e| e == wanted);
    (!permitted).then(|| {
        format!("allows its credentials to be sent only to {allowed:?} ({ENDPOINTS_ANNOTATION}), not to {wanted:?}")
    })
}

/// Reads the location's Secret in `namespace`, refusing it unless it opted in (see
/// [`refusal`]) and holds both keys. Nothing of a credential is ever logged.
pub async fn opted_in_credentials(
    client: kube::Client,
    namespace: &str,
    location: &S3Location,
) -> Result<S3Credentials, S3Error> {
    let r = &location.credentials_secret;
    let secret_error = |message: String, transient: bool| S3Error::Secret {
        namespace: namespace.to_owned(),
        name: r.name.clone(),
        message,
        transient,
    };
    let secret = match crate::secrets::get(client, namespace, &r.name).await {
        Ok(s) => s,
        Err(SecretRefusal::Unreadable { message, transient, .. }) => {
            return Err(secret_error(format!("cannot be read: {message}"), transient));
        }
        Err(_) => return Err(secret_error("not found".to_owned(), false)),
    };
    if let Some(why) = refusal(&secret, location) {
        return Err(secret_error(why, false));
    }
    let credentials = credentials_from_secret(&secret, r, namespace)?;
    debug!(namespace, secret = %r.name, "read S3 credentials");
    Ok(credentials)
}

/// Extracts the credentials from a Secret's data, trimmed of surrounding whitespace: a
/// trailing newline from `echo ... | base64` is the most common way to get
/// "SignatureDoesNotMatch".
pub(super) fn credentials_from_secret(
    secret: &Secret,
    r: &S3CredentialsSecretRef,
    namespace: &str,
) -> Result<S3Credentials, S3Error> {
    let secret_error = |message: String| S3Error::Secret {
        namespace: namespace.to_owned(),
        name: r.name.clone(),
        message,
        transient: false,
    };
    let value = |key: &str| -> Result<String, S3Error> {
        let bytes =
            secret.data.as_ref().and_then(|d| d.get(key)).ok_or_else(|| secret_error(format!("has no key {key:?}")))?;
        let text =
            std::str::from_utf8(&bytes.0).map_err(|_| secret_error(format!("value of {key:?} is not UTF-8")))?.trim();
        if text.is_empty() {
            return Err(secret_error(format!("value of {key:?} is empty")));
        }
        Ok(text.to_owned())
    };
    Ok(S3Credentials::new(value(&r.access_key_id_key)?, value(&r.secret_access_key_key)?))
}

/// Checks, before a Job is given the location's Secret, that the Secret may be used for it
/// (the same rules as [`opted_in_credentials`]). A refusal is the user's to fix, so it is
/// an invalid spec naming `field` and the Secret: the path of the location's
/// `credentialsSecret` in the resource, or the field that led to a location elsewhere
/// (e.g. `spec.clusterName`, whose cluster's backup policy has it).
pub async fn check_credentials(
    client: kube::Client,
    namespace: &str,
    location: &S3Location,
    field: &str,
) -> crate::Result<()> {
    match opted_in_credentials(client, namespace, location).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_transient() => Err(e.into()),
        Err(e) => Err(crate::Error::invalid_spec(field, e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Secret {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
        };
        Secret {
            metadata: ObjectMeta {
                name: Some("s3".into()),
                labels: map(labels),
                annotations: map(annotations),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn location(endpoint: Option<&str>) -> S3Location {
        S3Location {
            endpoint: endpoint.map(str::to_owned),
            ..S3Location::new("backups", "db", S3CredentialsSecretRef::new("s3"))
        }
    }

    #[test]
    fn only_secrets_that_opted_in_are_used() {
        let why = refusal(&secret(&[], &[]), &location(None)).expect("unlabelled");
        assert!(why.contains(OPT_IN_LABEL) && why.contains("kubectl label secret s3"), "{why}");
        assert!(refusal(&secret(&[(OPT_IN_LABEL, "false")], &[]), &location(None)).is_some());
        assert!(refusal(&secret(&[(OPT_IN_LABEL, "yes")], &[]), &location(None)).is_some());
        assert_eq!(refusal(&secret(&[(OPT_IN_LABEL, "true")], &[]), &location(Some("http://anywhere:9000"))), None);
    }

    #[test]
    fn a_secret_may_pin_its_endpoints() {
        let pinned = secret(&[(OPT_IN_LABEL, "true")], &[(ENDPOINTS_ANNOTATION, "http://minio.storage:9000/, aws")]);
        assert_eq!(refusal(&pinned, &location(Some("http://minio.storage:9000"))), None);
        assert_eq!(refusal(&pinned, &location(Some("http://minio.storage:9000/"))), None);
        assert_eq!(refusal(&pinned, &location(None)), None, "aws stands for no endpoint");
        let why = refusal(&pinned, &location(Some("http://attacker.example"))).expect("not pinned");
        assert!(why.contains("http://attacker.example") && why.contains(ENDPOINTS_ANNOTATION), "{why}");
        let minio_only = secret(&[(OPT_IN_LABEL, "true")], &[(ENDPOINTS_ANNOTATION, "http://minio.storage:9000")]);
        assert!(refusal(&minio_only, &location(None)).is_some(), "AWS is not allowed unless listed");
    }

    #[test]
    fn credentials_come_from_the_named_keys_trimmed() {
        use k8s_openapi::ByteString;
        let secret = Secret {
            data: Some(
                [
                    ("AWS_ACCESS_KEY_ID".to_owned(), ByteString(b"AKID\n".to_vec())),
                    ("custom".to_owned(), ByteString(b" s3cr3t ".to_vec())),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let mut r = S3CredentialsSecretRef::new("creds");
        r.secret_access_key_key = "custom".into();
        let c = credentials_from_secret(&secret, &r, "ns").expect("credentials");
        assert_eq!((c.access_key_id.as_str(), c.secret_access_key.as_str()), ("AKID", "s3cr3t"));

        let e = credentials_from_secret(&secret, &S3CredentialsSecretRef::new("creds"), "ns").expect_err("no key");
        assert_eq!(e.to_string(), "S3 credentials Secret ns/creds: has no key \"AWS_SECRET_ACCESS_KEY\"");
        assert!(!e.is_transient());
    }
}
