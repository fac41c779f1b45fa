//! Certificates for a cluster's traffic: a certificate authority per cluster that the
//! operator generates once and keeps in a Secret, serving certificates it issues from that
//! authority (and issues again before they expire or when the names they must carry
//! change), and what a certificate says (its names, its validity) for the decisions about
//! renewing and reloading. A user may bring their own certificate instead (a
//! `kubernetes.io/tls` Secret with `ca.crt`, as cert-manager writes one); the operators
//! then read it and never write it.
//!
//! Everything is ECDSA P-256: OpenSSL (MariaDB, etcd's Go), Go's crypto/tls (exporters) and
//! rustls (the operators' own clients) all accept it, and keys are generated in
//! microseconds.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use thiserror::Error;

/// Key of the authority's certificate, in both Secrets (the serving Secret carries it so
/// that a pod mounting one Secret has what its peers' certificates chain to).
pub const CA_CERT: &str = "ca.crt";
/// Key of the authority's private key (the authority's Secret only).
pub const CA_KEY: &str = "ca.key";
/// Key of the serving certificate (the `kubernetes.io/tls` convention).
pub const CERT: &str = "tls.crt";
/// Key of the serving certificate's private key.
pub const KEY: &str = "tls.key";
/// Type of the serving Secret.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// The label, `"true"`, a user's certificate Secret needs before a cluster uses it (see
/// [`crate::secrets`]): whoever may create a cluster must not be able to make its servers
/// present, and hold the key of, a certificate they cannot read (an Ingress's, say).
pub const OPT_IN_LABEL: &str = "statecraft.io/tls";

/// How long the authority is valid: long, because replacing it means every client
/// trusting it must be told (not done automatically; see the operators' docs).
pub const AUTHORITY_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long an issued serving certificate is valid.
pub const SERVING_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);
/// A serving certificate with less than this left is issued again (a third of its life:
/// weeks for the new one to reach every server, as cert-manager's default does).
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// A certificate or key that cannot be made or read.
#[derive(Debug, Error)]
pub enum TlsError {
    /// rcgen refused (bad name, bad key).
    #[error("{context}: {source}")]
    Generate {
        /// What was being done.
        context: &'static str,
        /// The error.
        #[source]
        source: rcgen::Error,
    },
    /// A Secret lacks a key or holds something that is not a certificate.
    #[error("{0}")]
    Invalid(String),
}

fn generating(context: &'static str) -> impl FnOnce(rcgen::Error) -> TlsError {
    move |source| TlsError::Generate { context, source }
}

fn offset(at: DateTime<Utc>) -> Result<time::OffsetDateTime, TlsError> {
    time::OffsetDateTime::from_unix_timestamp(at.timestamp())
        .map_err(|e| TlsError::Invalid(format!("time {at} out of range: {e}")))
}

/// A certificate authority: its certificate and key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Authority {
    /// The certificate, PEM.
    pub cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").field("cert_pem", &self.cert_pem).field("key_pem", &"<redacted>").finish()
    }
}

/// A serving certificate, its key and the authority's certificate, all PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    /// The certificate, PEM.
    pub cert_pem: String,
    key_pem: String,
    /// The authority's certificate, PEM.
    pub ca_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").field("cert_pem", &self.cert_pem).field("key_pem", &"<redacted>").finish()
    }
}

fn secret_text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok().filter(|s| !s.trim().is_empty())
}

fn secret_of(name: &str, type_: Option<&str>, data: [(&str, &str); 3]) -> Secret {
    Secret {
        metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        type_: type_.map(str::to_string),
        data: Some(data.into_iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
        ..Default::default()
    }
}

impl Authority {
    /// A new authority named `common_name`, valid from `now` for [`AUTHORITY_LIFETIME`].
    pub fn generate(common_name: &str, now: DateTime<Utc>) -> Result<Self, TlsError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generating("authority parameters"))?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        params.not_before = offset(now - chrono::Duration::minutes(5))?;
        params.not_after = offset(now + chrono::Duration::from_std(AUTHORITY_LIFETIME).unwrap_or_default())?;
        let key = KeyPair::generate().map_err(generating("authority key"))?;
        let cert = params.self_signed(&key).map_err(generating("authority certificate"))?;
        Ok(Authority { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// The authority kept in `secret` (keys [`CA_CERT`] and [`CA_KEY`]), checked to be a
    /// certificate and a key that rcgen can sign with.
    pub fn from_secret(secret: &Secret) -> Result<Self, TlsError> {
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        let (Some(cert_pem), Some(key_pem)) = (secret_text(secret, CA_CERT), secret_text(secret, CA_KEY)) else {
            return Err(TlsError::Invalid(format!("Secret {name} lacks {CA_CERT} or {CA_KEY}")));
        };
        let authority = Authority { cert_pem, key_pem };
        authority.issuer().map_err(|e| TlsError::Invalid(format!("Secret {name}: {e}")))?;
        Ok(authority)
    }

    /// The Secret `name` that keeps this authority (type Opaque: it is not a serving pair).
    pub fn secret(&self, name: &str) -> Secret {
        secret_of(name, None, [(CA_CERT, &self.cert_pem), (CA_KEY, &self.key_pem), ("README", AUTHORITY_README)])
    }

    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, TlsError> {
        let key = KeyPair::from_pem(&self.key_pem).map_err(generating("authority key"))?;
        Issuer::from_ca_cert_pem(&self.cert_pem, key).map_err(generating("authority certificate"))
    }

    /// A serving certificate for `dns_names` (the first is also its common name), usable
    /// by servers and by clients (a server replicating from another presents it), valid
    /// from `now` for [`SERVING_LIFETIME`].
    pub fn issue(&self, dns_names: &[String], now: DateTime<Utc>) -> Result<Issued, TlsError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generating("certificate parameters"))?;
        params.subject_alt_names = dns_names
            .iter()
            .map(|n| n.clone().try_into().map(SanType::DnsName))
            .collect::<Result<_, _>>()
            .map_err(generating("certificate names"))?;
        if let Some(first) = dns_names.first() {
            params.distinguished_name.push(DnType::CommonName, first.as_str());
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = offset(now - chrono::Duration::minutes(5))?;
        params.not_after = offset(now + chrono::Duration::from_std(SERVING_LIFETIME).unwrap_or_default())?;
        let key = KeyPair::generate().map_err(generating("certificate key"))?;
        let cert = params.signed_by(&key, &self.issuer()?).map_err(generating("certificate"))?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem(), ca_pem: self.cert_pem.clone() })
    }
}

/// What the authority's Secret says to a reader who finds it.
const AUTHORITY_README: &str = "The certificate authority of this cluster's serving certificates, generated by the \
operator. Deleting it makes the operator generate a new one and issue new certificates: clients that trust the old \
ca.crt must then be given the new one.";

impl Issued {
    /// The serving Secret `name` ([`TLS_SECRET_TYPE`]: [`CERT`], [`KEY`], [`CA_CERT`]).
    pub fn secret(&self, name: &str) -> Secret {
        secret_of(name, Some(TLS_SECRET_TYPE), [(CERT, &self.cert_pem), (KEY, &self.key_pem), (CA_CERT, &self.ca_pem)])
    }

    /// The pair kept in `secret`, whoever wrote it; an error names what is missing.
    pub fn from_secret(secret: &Secret) -> Result<Self, TlsError> {
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        match (secret_text(secret, CERT), secret_text(secret, KEY), secret_text(secret, CA_CERT)) {
            (Some(cert_pem), Some(key_pem), Some(ca_pem)) => {
                Certificate::parse(&cert_pem).map_err(|e| TlsError::Invalid(format!("Secret {name} {CERT}: {e}")))?;
                Certificate::parse(&ca_pem).map_err(|e| TlsError::Invalid(format!("Secret {name} {CA_CERT}: {e}")))?;
                Ok(Issued { cert_pem, key_pem, ca_pem })
            }
            (cert, key, ca) => {
                let missing: Vec<&str> = [(cert.is_none(), CERT), (key.is_none(), KEY), (ca.is_none(), CA_CERT)]
                    .into_iter()
                    .filter_map(|(absent, k)| absent.then_some(k))
                    .collect();
                Err(TlsError::Invalid(format!("Secret {name} lacks {}", missing.join(", "))))
            }
        }
    }
}

/// What a certificate says that the operators decide on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    /// Its DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// Start of its validity.
    pub not_before: DateTime<Utc>,
    /// End of its validity.
    pub not_after: DateTime<Utc>,
}

impl Certificate {
    /// The first certificate of `pem`.
    pub fn parse(pem: &str) -> Result<Self, TlsError> {
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .map_err(|e| TlsError::Invalid(format!("not a PEM certificate: {e}")))?;
        let cert = block.parse_x509().map_err(|e| TlsError::Invalid(format!("not an X.509 certificate: {e}")))?;
        let time = |t: x509_parser::time::ASN1Time| {
            DateTime::from_timestamp(t.timestamp(), 0)
                .ok_or_else(|| TlsError::Invalid(format!("validity out of range: {t}")))
        };
        let dns_names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|ext| {
                ext.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Certificate {
            dns_names,
            not_before: time(cert.validity().not_before)?,
            not_after: time(cert.validity().not_after)?,
        })
    }
}

/// Why a serving certificate the operator issues must be issued (again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reissue {
    /// There is none, or what is there cannot be read.
    Missing,
    /// It lacks names the servers are reached by (the cluster gained a name).
    Names(Vec<String>),
    /// It was not issued by the current authority (the authority was replaced).
    OtherAuthority,
    /// It expires within [`RENEW_BEFORE`] (or already has).
    Expiring(DateTime<Utc>),
}

impl std::fmt::Display for Reissue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reissue::Missing => write!(f, "no certificate yet"),
            Reissue::Names(names) => write!(f, "the certificate lacks {}", names.join(", ")),
            Reissue::OtherAuthority => write!(f, "the certificate was issued by another authority"),
            Reissue::Expiring(at) => write!(f, "the certificate expires at {}", at.to_rfc3339()),
        }
    }
}

/// Whether the serving certificate `current` (parsed, with the authority certificate it
/// carries) must be issued again by the authority of certificate `authority_pem` for
/// `wanted` names at `now`. Pure.
pub fn reissue(
    current: Option<(&Certificate, &str)>,
    authority_pem: &str,
    wanted: &[String],
    now: DateTime<Utc>,
) -> Option<Reissue> {
    let Some((cert, carried_ca)) = current else { return Some(Reissue::Missing) };
    let lacking: Vec<String> = wanted.iter().filter(|n| !cert.dns_names.contains(n)).cloned().collect();
    if !lacking.is_empty() {
        return Some(Reissue::Names(lacking));
    }
    if carried_ca.trim() != authority_pem.trim() {
        return Some(Reissue::OtherAuthority);
    }
    let renew_at = cert.not_after - chrono::Duration::from_std(RENEW_BEFORE).unwrap_or_default();
    (now >= renew_at).then_some(Reissue::Expiring(cert.not_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn names() -> Vec<String> {
        vec!["db.ns.svc".to_string(), "*.db-hl.ns.svc".to_string()]
    }

    #[test]
    fn an_issued_certificate_carries_its_names_and_lifetime_and_survives_its_secrets() {
        let ca = Authority::generate("db-ca", now()).unwrap();
        let kept = Authority::from_secret(&ca.secret("db-ca")).unwrap();
        assert_eq!(kept, ca);
        let issued = kept.issue(&names(), now()).unwrap();
        let back = Issued::from_secret(&issued.secret("db-tls")).unwrap();
        assert_eq!(back, issued);
        assert_eq!(issued.secret("db-tls").type_.as_deref(), Some(TLS_SECRET_TYPE));
        let cert = Certificate::parse(&issued.cert_pem).unwrap();
        assert_eq!(cert.dns_names, names());
        assert_eq!(cert.not_after - now(), chrono::Duration::from_std(SERVING_LIFETIME).unwrap());
        assert!(cert.not_before < now());
        assert_eq!(reissue(Some((&cert, &issued.ca_pem)), &ca.cert_pem, &names(), now()), None);
    }

    #[test]
    fn a_certificate_is_issued_again_when_missing_short_of_a_name_from_another_authority_or_expiring() {
        let ca = Authority::generate("db-ca", now()).unwrap();
        let issued = ca.issue(&names(), now()).unwrap();
        let cert = Certificate::parse(&issued.cert_pem).unwrap();
        let current = Some((&cert, issued.ca_pem.as_str()));
        assert_eq!(reissue(None, &ca.cert_pem, &names(), now()), Some(Reissue::Missing));
        let more = [names(), vec!["db-ro.ns.svc".to_string()]].concat();
        assert_eq!(reissue(current, &ca.cert_pem, &more, now()), Some(Reissue::Names(vec!["db-ro.ns.svc".into()])));
        let other = Authority::generate("db-ca", now()).unwrap();
        assert_eq!(reissue(current, &other.cert_pem, &names(), now()), Some(Reissue::OtherAuthority));
        let renew_at = cert.not_after - chrono::Duration::from_std(RENEW_BEFORE).unwrap();
        let second = chrono::Duration::seconds(1);
        assert_eq!(reissue(current, &ca.cert_pem, &names(), renew_at - second), None);
        assert_eq!(reissue(current, &ca.cert_pem, &names(), renew_at), Some(Reissue::Expiring(cert.not_after)));
    }

    #[test]
    fn secrets_lacking_keys_or_holding_no_certificate_are_named() {
        let ca = Authority::generate("db-ca", now()).unwrap();
        let mut secret = ca.issue(&names(), now()).unwrap().secret("mine");
        secret.data.as_mut().unwrap().remove(CA_CERT);
        let err = Issued::from_secret(&secret).unwrap_err().to_string();
        assert_eq!(err, "Secret mine lacks ca.crt");
        secret.data.as_mut().unwrap().insert(CA_CERT.into(), ByteString(b"garbage".to_vec()));
        let err = Issued::from_secret(&secret).unwrap_err().to_string();
        assert!(err.starts_with("Secret mine ca.crt: not a PEM certificate"), "{err}");
        let mut kept = ca.secret("db-ca");
        kept.data.as_mut().unwrap().remove(CA_KEY);
        assert_eq!(Authority::from_secret(&kept).unwrap_err().to_string(), "Secret db-ca lacks ca.crt or ca.key");
    }
}
