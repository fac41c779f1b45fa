//! Secrets a user names in a spec (a database account's password, S3 credentials): read
//! only when their owner opted in with a label.
//!
//! Whoever may create the resource names the Secret; the operator, which can read Secrets,
//! must not become a way to use a Secret its creator cannot read (a service account token
//! set as a database password whose hash the creator can then read back, say). So a Secret
//! is used only when it carries the purpose's label with the value `"true"`.

use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

/// Whether `secret` carries `label: "true"`.
pub fn opted_in(secret: &Secret, label: &str) -> bool {
    secret.metadata.labels.as_ref().and_then(|l| l.get(label)).is_some_and(|v| v == "true")
}

/// A value read from a Secret, with the Secret's `resourceVersion` (a changed Secret has
/// another). `Debug` redacts the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    /// The value, exactly as stored (not trimmed: a password may end in a space).
    pub value: String,
    /// The Secret's `resourceVersion`.
    pub version: String,
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretValue").field("value", &"<redacted>").field("version", &self.version).finish()
    }
}

/// Why a named Secret cannot be used. Each message names the Secret and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefusal {
    /// It does not exist (yet).
    #[error("Secret {name:?} does not exist")]
    Missing {
        /// Its name.
        name: String,
    },
    /// Its owner did not label it for this use.
    #[error(
        "Secret {name:?} is not labelled {label}=true; only Secrets whose owner opted in are used (kubectl label secret {name} {label}=true)"
    )]
    NotOptedIn {
        /// Its name.
        name: String,
        /// The label it needs.
        label: String,
    },
    /// The key is missing, empty or not UTF-8.
    #[error("Secret {name:?} has no usable key {key:?}: {why}")]
    Key {
        /// Its name.
        name: String,
        /// The key.
        key: String,
        /// Missing, empty or not UTF-8.
        why: &'static str,
    },
    /// The API server did not give it (no right, unreachable).
    #[error("Secret {name:?} cannot be read: {message}")]
    Unreadable {
        /// Its name.
        name: String,
        /// The API server's error.
        message: String,
        /// Whether retrying may help (an unreachable or overloaded API server).
        transient: bool,
    },
}

/// The value under `key` of Secret `name`, which must carry `label: "true"`. Nothing of the
/// value is logged.
pub async fn read_opted_in(
    client: Client,
    namespace: &str,
    name: &str,
    key: &str,
    label: &str,
) -> Result<SecretValue, SecretRefusal> {
    value_of(&get(client, namespace, name).await?, name, key, label)
}

/// Secret `name`, or why it cannot be had: [`SecretRefusal::Missing`], or
/// [`SecretRefusal::Unreadable`] (transient unless the API server refused the request
/// itself, other than for load).
pub async fn get(client: Client, namespace: &str, name: &str) -> Result<Secret, SecretRefusal> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    match api.get(name).await {
        Ok(s) => Ok(s),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(SecretRefusal::Missing { name: name.into() }),
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) && status.code != 429 => {
            Err(SecretRefusal::Unreadable { name: name.into(), message: status.message, transient: false })
        }
        Err(e) => Err(SecretRefusal::Unreadable { name: name.into(), message: e.to_string(), transient: true }),
    }
}

/// [`read_opted_in`]'s checks on a Secret already read.
pub fn value_of(secret: &Secret, name: &str, key: &str, label: &str) -> Result<SecretValue, SecretRefusal> {
    if !opted_in(secret, label) {
        return Err(SecretRefusal::NotOptedIn { name: name.into(), label: label.into() });
    }
    let refuse = |why| SecretRefusal::Key { name: name.into(), key: key.into(), why };
    let bytes = secret.data.as_ref().and_then(|d| d.get(key)).ok_or_else(|| refuse("not in the Secret"))?;
    let value = String::from_utf8(bytes.0.clone()).map_err(|_| refuse("not UTF-8"))?;
    if value.is_empty() {
        return Err(refuse("empty"));
    }
    Ok(SecretValue { value, version: secret.metadata.resource_version.clone().unwrap_or_default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const LABEL: &str = "example.statecraft.io/password";

    fn secret(label: Option<&str>, data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("pw".into()),
                resource_version: Some("42".into()),
                labels: label.map(|v| [(LABEL.to_string(), v.to_string())].into()),
                ..Default::default()
            },
            data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.to_vec()))).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_secret_labelled_true_is_used() {
        for label in [None, Some("false"), Some("yes")] {
            let err = value_of(&secret(label, &[("password", b"x")]), "pw", "password", LABEL).unwrap_err();
            assert!(matches!(err, SecretRefusal::NotOptedIn { .. }), "{label:?}");
            assert!(err.to_string().contains("kubectl label secret pw example.statecraft.io/password=true"), "{err}");
        }
        let ok = value_of(&secret(Some("true"), &[("password", b" p w \n")]), "pw", "password", LABEL).unwrap();
        assert_eq!(ok.value, " p w \n", "kept exactly");
        assert_eq!(ok.version, "42");
        assert!(!format!("{ok:?}").contains("p w"));
    }

    #[test]
    fn a_missing_empty_or_binary_key_is_refused_naming_it() {
        for (data, why) in [
            (&[][..], "not in the Secret"),
            (&[("password", &b""[..])][..], "empty"),
            (&[("password", &[0xff, 0xfe][..])][..], "not UTF-8"),
        ] {
            let err = value_of(&secret(Some("true"), data), "pw", "password", LABEL).unwrap_err();
            assert_eq!(err, SecretRefusal::Key { name: "pw".into(), key: "password".into(), why });
        }
    }
}
