//! A throw-away certificate authority for test servers: a CA, serving certificates for
//! loopback, client certificates with Kubernetes user and group names, and a key pair for
//! signing service-account tokens. Everything is ECDSA P-256, which both
//! kube-apiserver and rustls accept.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::HarnessError;

/// A CA that signs certificates into one directory.
pub struct Pki {
    dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// Paths of a certificate and its key.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn rc(context: &str) -> impl FnOnce(rcgen::Error) -> HarnessError + '_ {
    move |e| HarnessError::Setup(format!("{context}: {e}"))
}

impl Pki {
    /// Creates a CA and writes `ca.crt` into `dir`.
    pub fn new(dir: &Path) -> Result<Self, HarnessError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rc("CA params"))?;
        params.distinguished_name.push(DnType::CommonName, "statecraft-test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().map_err(rc("CA key"))?;
        let ca = CertifiedIssuer::self_signed(params, key).map_err(rc("CA certificate"))?;
        let pki = Pki { dir: dir.to_path_buf(), ca };
        pki.write("ca.crt", &pki.ca.pem())?;
        Ok(pki)
    }

    /// Path of the CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A serving certificate for loopback (and `extra_sans`, IPs or DNS names).
    pub fn server(&self, name: &str, extra_sans: &[&str]) -> Result<CertFiles, HarnessError> {
        let mut sans: Vec<String> = vec!["localhost".into(), "127.0.0.1".into()];
        sans.extend(extra_sans.iter().map(|s| s.to_string()));
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rc("server params"))?;
        params.subject_alt_names = sans
            .iter()
            .map(|s| match s.parse() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => s.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()
            .map_err(rc("server SANs"))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(name, params)
    }

    /// A client certificate for Kubernetes user `user` in `groups` (CN and O fields).
    pub fn client(&self, file_name: &str, user: &str, groups: &[&str]) -> Result<CertFiles, HarnessError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rc("client params"))?;
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params.distinguished_name.push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(file_name, params)
    }

    /// A key pair for signing service-account tokens: `(private, public)` PEM paths.
    pub fn signing_key(&self, name: &str) -> Result<CertFiles, HarnessError> {
        let key = KeyPair::generate().map_err(rc("signing key"))?;
        Ok(CertFiles {
            cert: self.write(&format!("{name}.pub"), &key.public_key_pem())?,
            key: self.write(&format!("{name}.key"), &key.serialize_pem())?,
        })
    }

    fn issue(&self, name: &str, params: CertificateParams) -> Result<CertFiles, HarnessError> {
        let key = KeyPair::generate().map_err(rc("key"))?;
        let cert = params.signed_by(&key, &self.ca).map_err(rc("certificate"))?;
        Ok(CertFiles {
            cert: self.write(&format!("{name}.crt"), &cert.pem())?,
            key: self.write(&format!("{name}.key"), &key.serialize_pem())?,
        })
    }

    fn write(&self, name: &str, contents: &str) -> Result<PathBuf, HarnessError> {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).map_err(|e| HarnessError::io(&path, e))?;
        Ok(path)
    }
}
