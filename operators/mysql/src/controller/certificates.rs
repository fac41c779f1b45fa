//! The servers' certificate (`spec.tls`): the reconciler keeps the cluster's authority and
//! the certificate it issues in their Secrets ([`ensure`]); the clustering task reads what
//! the servers must present and trust ([`serving`]) and makes every server load a renewed
//! certificate without a restart ([`reload`]).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use statecraft_shared::apply::Applier;
use statecraft_shared::runner::Runtime;
use statecraft_shared::secrets::{SecretRefusal, opted_in};
use statecraft_shared::tls::{Authority, Certificate, Issued, OPT_IN_LABEL, reissue};
use statecraft_shared::{Error, Result};
use tracing::info;

use crate::api::{MySQLCluster, Tls};
use crate::build::Names;
use crate::build::tls::{dns_names, secret_name};
use crate::clustering::dataplane::{ClientTls, DataPlane, Endpoint};
use crate::reason::MySql;

/// The field a user's Secret is named in, for errors.
const SECRET_FIELD: &str = "spec.tls.secretName";

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::invalid_spec(SECRET_FIELD, e.to_string())
}

/// Keeps the certificate the servers present: with a Secret of the user's, checks that its
/// owner opted in and that it holds a certificate, key and authority (an error names the
/// field), before any pod mounts it; without, applies the
/// cluster's authority (generated once, kept while its Secret exists) and the certificate
/// it issues, issued again when [`reissue`] says so.
pub async fn ensure(
    rt: &Runtime,
    cluster: &MySQLCluster,
    tls: &Tls,
    names: &Names,
    applier: &mut Applier<'_>,
) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let read =
        async |name: &str| secrets.get_opt(name).await.map_err(|e| Error::kube(format!("reading Secret {name}"), e));
    if let Some(user) = &tls.secret_name {
        let secret = read(user).await?;
        return users(user, secret.as_ref()).map(|_| ()).map_err(invalid);
    }
    let now = Utc::now();
    let authority = match read(&names.ca_secret()).await? {
        Some(secret) => Authority::from_secret(&secret).map_err(|e| Error::Permanent(e.to_string()))?,
        None => {
            info!(cluster = %names.cluster, "generating the certificate authority");
            Authority::generate(&format!("{} authority", names.cluster), now)
                .map_err(|e| Error::Permanent(e.to_string()))?
        }
    };
    applier.apply(authority.secret(&names.ca_secret())).await?;
    let current = read(&names.tls_secret()).await?.and_then(|s| Issued::from_secret(&s).ok());
    let parsed = current.as_ref().and_then(|i| Some((Certificate::parse(&i.cert_pem).ok()?, i.ca_pem.as_str())));
    let wanted = dns_names(names);
    let issued = match (reissue(parsed.as_ref().map(|(c, ca)| (c, *ca)), &authority.cert_pem, &wanted, now), current) {
        (None, Some(current)) => current,
        (why, _) => {
            let issued = authority.issue(&wanted, now).map_err(|e| Error::Permanent(e.to_string()))?;
            let why = why.map_or_else(|| "no certificate yet".to_string(), |w| w.to_string());
            let message = format!("issued the servers' certificate into Secret {} ({why})", names.tls_secret());
            info!(cluster = %names.cluster, %message);
            rt.events.normal(cluster, MySql::CertificateIssued, "IssueCertificate", message).await;
            issued
        }
    };
    applier.apply(issued.secret(&names.tls_secret())).await?;
    Ok(())
}

/// The certificate in the user's Secret `name`, if it exists, its owner opted in
/// ([`OPT_IN_LABEL`]) and it holds a certificate, key and authority; else why not.
fn users(name: &str, secret: Option<&Secret>) -> std::result::Result<Issued, String> {
    let secret = secret.ok_or_else(|| SecretRefusal::Missing { name: name.to_string() }.to_string())?;
    if !opted_in(secret, OPT_IN_LABEL) {
        return Err(SecretRefusal::NotOptedIn { name: name.to_string(), label: OPT_IN_LABEL.to_string() }.to_string());
    }
    Issued::from_secret(secret).map_err(|e| e.to_string())
}

/// What the servers of a cluster with `spec.tls` present and trust.
#[derive(Clone, Debug)]
pub struct Serving {
    /// How the operator connects to them.
    pub client: ClientTls,
    /// Until when the certificate in the Secret is valid: a server presenting another
    /// has not loaded it yet.
    pub not_after: DateTime<Utc>,
}

/// The servers' certificate as its Secret holds it; `None` while the Secret does not exist
/// or cannot be read (the reconciler issues it or reports the user's).
pub async fn serving(rt: &Runtime, tls: &Tls, names: &Names) -> Result<Option<Serving>> {
    let secrets: Api<Secret> = Api::namespaced(rt.client.clone(), &rt.namespace);
    let name = secret_name(tls, names);
    let secret = secrets.get_opt(&name).await.map_err(|e| Error::kube(format!("reading Secret {name}"), e))?;
    let issued = match &tls.secret_name {
        Some(user) => users(user, secret.as_ref()).ok(),
        None => secret.as_ref().and_then(|s| Issued::from_secret(s).ok()),
    };
    let Some(issued) = issued else { return Ok(None) };
    let Ok(cert) = Certificate::parse(&issued.cert_pem) else { return Ok(None) };
    let verified_name = format!("{}.{}.svc", names.read_write_service(), names.namespace);
    Ok(Some(Serving { client: ClientTls::with_name(&issued.ca_pem, verified_name), not_after: cert.not_after }))
}

/// Makes each server of `servers` (name, endpoint) that presents another certificate than
/// `serving`'s load it again, and publishes an Event for each one that then presents it.
/// The kubelet replaces the mounted files within a minute or two of the Secret's change,
/// so a server may need several passes. Errors are left to the next pass.
pub async fn reload(
    rt: &Runtime,
    cluster: &MySQLCluster,
    dp: &DataPlane,
    serving: &Serving,
    servers: &[(String, Endpoint)],
) {
    for (name, ep) in servers {
        let Ok(Some(served)) = dp.served_until(ep).await else { continue };
        if served == serving.not_after || dp.reload_tls(ep).await.is_err() {
            continue;
        }
        if let Ok(Some(now)) = dp.served_until(ep).await
            && now == serving.not_after
        {
            let message = format!("{name} presents the certificate valid until {}", now.to_rfc3339());
            info!(cluster = %kube::ResourceExt::name_any(cluster), %message);
            rt.events.normal(cluster, MySql::CertificateReloaded, "ReloadCertificate", message).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn user_secret(labelled: bool) -> Secret {
        let ca = Authority::generate("mine", Utc::now()).unwrap();
        let mut secret = ca.issue(&["db-primary.ns.svc".to_string()], Utc::now()).unwrap().secret("mine");
        if labelled {
            secret.metadata.labels = Some([(OPT_IN_LABEL.to_string(), "true".to_string())].into());
        }
        secret
    }

    #[test]
    fn a_users_certificate_is_used_only_when_it_exists_and_its_owner_opted_in() {
        assert_eq!(users("mine", None).unwrap_err(), "Secret \"mine\" does not exist");
        let refused = users("mine", Some(&user_secret(false))).unwrap_err();
        assert!(refused.contains("is not labelled statecraft.io/tls=true"), "{refused}");
        assert!(users("mine", Some(&user_secret(true))).is_ok());
        let mut lacking = user_secret(true);
        lacking.data.as_mut().unwrap().remove("tls.key");
        assert_eq!(users("mine", Some(&lacking)).unwrap_err(), "Secret mine lacks tls.key");
    }
}
