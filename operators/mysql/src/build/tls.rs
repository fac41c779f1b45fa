//! TLS of a cluster (`spec.tls`): where the servers find their certificate, the names it
//! must carry, the server settings that turn it on, and the Secret volume every server and
//! Job mounts. The certificate itself comes from the user's Secret or from the operator's
//! authority for the cluster ([`crate::controller::certificates`]).

use k8s_openapi::api::core::v1::{KeyToPath, SecretVolumeSource, Volume, VolumeMount};
use statecraft_shared::tls::{CA_CERT, CERT, KEY};

use super::Names;
use crate::api::Tls;

/// Where the certificate Secret is mounted in the servers and the Jobs.
pub const TLS_DIR: &str = "/etc/statecraft-tls";
/// Name of that volume.
pub const VOLUME: &str = "tls";

/// Path of one key of the certificate Secret inside a container.
pub fn tls_path(key: &str) -> String {
    format!("{TLS_DIR}/{key}")
}

/// The Secret the servers present: the user's, or the one the operator issues.
pub fn secret_name(tls: &Tls, names: &Names) -> String {
    tls.secret_name.clone().unwrap_or_else(|| names.tls_secret())
}

/// The DNS names the servers' certificate carries: each Service by every name a client in
/// the cluster may use, and every server (`<pod>.<cluster>-hl.<namespace>.svc`, one
/// wildcard, so that scaling never needs a new certificate). The first, the read-write
/// Service, is also its common name.
pub fn dns_names(names: &Names) -> Vec<String> {
    let ns = &names.namespace;
    let mut out = Vec::new();
    for service in [names.read_write_service(), names.read_only_service()] {
        out.extend([
            format!("{service}.{ns}.svc"),
            format!("{service}.{ns}.svc.cluster.local"),
            format!("{service}.{ns}"),
            service.clone(),
        ]);
    }
    let headless = names.set().headless_service();
    out.extend([format!("*.{headless}.{ns}.svc"), format!("*.{headless}.{ns}.svc.cluster.local")]);
    out
}

/// The `[mysqld]` settings of TLS (the same names in MariaDB and MySQL).
pub fn server_settings(tls: &Tls) -> Vec<(String, String)> {
    let mut out = vec![
        ("ssl_cert".to_string(), tls_path(CERT)),
        ("ssl_key".to_string(), tls_path(KEY)),
        ("ssl_ca".to_string(), tls_path(CA_CERT)),
    ];
    if tls.require_secure_transport {
        out.push(("require_secure_transport".to_string(), "ON".to_string()));
    }
    out
}

/// The Secret volume of the servers' pods: the certificate, its key and the authority. A
/// Secret volume (no subPath), so that the kubelet replaces the files when the Secret is
/// renewed; readable by the group of the pod's fsGroup, the server's.
pub fn server_volume(secret: &str) -> Volume {
    volume(secret, None, 0o440)
}

/// The Secret volume of a Job: the authority's certificate alone (a Job checks servers, it
/// presents nothing), readable by everyone: a Job's pod has no fsGroup, and the
/// certificate is public (found by the TLS e2e: mode 0440, root's group, and the dump
/// could not read it).
pub fn job_volume(secret: &str) -> Volume {
    volume(secret, Some(vec![KeyToPath { key: CA_CERT.into(), path: CA_CERT.into(), mode: None }]), 0o444)
}

fn volume(secret: &str, items: Option<Vec<KeyToPath>>, mode: i32) -> Volume {
    Volume {
        name: VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_string()),
            default_mode: Some(mode),
            items,
            optional: Some(false),
        }),
        ..Default::default()
    }
}

/// The read-only mount of [`VOLUME`] at [`TLS_DIR`].
pub fn mount() -> VolumeMount {
    VolumeMount { name: VOLUME.into(), mount_path: TLS_DIR.into(), read_only: Some(true), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_names_every_service_and_every_server() {
        let names = dns_names(&Names::new("db", "prod"));
        assert_eq!(names[0], "db-primary.prod.svc");
        for n in ["db-primary", "db-replicas.prod.svc.cluster.local", "*.db-hl.prod.svc"] {
            assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
        }
        assert!(names.iter().all(|n| n.starts_with("db-") || n.starts_with("*.db-hl.")));
    }

    #[test]
    fn plaintext_is_refused_only_when_asked() {
        let mut tls = Tls::default();
        let keys = |t: &Tls| server_settings(t).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(&tls), ["ssl_cert", "ssl_key", "ssl_ca"]);
        assert_eq!(server_settings(&tls)[1].1, "/etc/statecraft-tls/tls.key");
        tls.require_secure_transport = true;
        assert_eq!(server_settings(&tls).last().unwrap(), &("require_secure_transport".into(), "ON".into()));
    }

    #[test]
    fn a_job_mounts_only_the_authority_readable_by_its_user() {
        let v = job_volume("db-tls").secret.unwrap();
        let items = v.items.unwrap();
        assert_eq!((items.len(), items[0].key.as_str()), (1, "ca.crt"));
        // A Job's pod has no fsGroup: the public certificate must be readable by all.
        assert_eq!(v.default_mode, Some(0o444));
        assert_eq!(server_volume("db-tls").secret.unwrap().default_mode, Some(0o440));
        assert_eq!(server_volume("mine").secret.unwrap().secret_name.as_deref(), Some("mine"));
    }
}
