//! The metrics sidecar: the Prometheus project's mysqld_exporter beside every server
//! (`spec.exporter`), so that Prometheus gets the server's own figures (queries,
//! connections, InnoDB, replication), which the operator's metrics, about the cluster's
//! state, do not have. It logs in over 127.0.0.1 as the status-only account the init file
//! creates ([`crate::flavor::EXPORTER_USER`]).
//!
//! A pod is ready only when all its containers are, so the sidecar's probes ask its own
//! landing page (`/`), which does not touch the server: a server that refuses the exporter
//! (`mysql_up 0`) or a slow scrape never takes the server out of its Service. The liveness
//! probe restarts an exporter that stops answering.

use k8s_openapi::api::core::v1::{Container, ContainerPort, HTTPGetAction, Probe, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use statecraft_shared::deploy::{restricted_container, secret_env};

use super::secret::EXPORTER_KEY;
use super::{MYSQL_PORT, Names};
use crate::flavor::{EXPORTER_HOST, EXPORTER_USER};

/// Name of the sidecar container.
pub const CONTAINER: &str = "exporter";
/// The port the exporter serves `/metrics` on (its default).
pub const PORT: i32 = 9104;
/// Name of that port, which the servers' PodMonitor scrapes.
pub const PORT_NAME: &str = "metrics";
/// The variable mysqld_exporter reads its password from.
const PASSWORD_ENV: &str = "MYSQLD_EXPORTER_PASSWORD";

/// Collectors turned on beyond the exporter's defaults (global status and variables,
/// replica status, InnoDB compression, query response time): InnoDB's own counters (buffer
/// pool, I/O, locks, history list), what the threads are doing, and the binary logs' size.
/// All need only the account's status privileges; none reads data. Not
/// `engine_innodb_status`: it parses MySQL's SHOW ENGINE INNODB STATUS, of which MariaDB
/// yields one figure that `innodb_metrics` has better.
pub const EXTRA_COLLECTORS: [&str; 3] = ["info_schema.innodb_metrics", "info_schema.processlist", "binlog_size"];

/// The exporter's arguments, against the server at `address` (`host:port`), over TLS when
/// the server serves it (`tls`): the exporter cannot check a certificate for 127.0.0.1,
/// which none carries, but a server refusing plaintext needs it, and the connection never
/// leaves the pod.
pub fn args(address: &str, tls: bool) -> Vec<String> {
    let mut args = vec![
        format!("--mysqld.address={address}"),
        format!("--mysqld.username={EXPORTER_USER}"),
        format!("--web.listen-address=:{PORT}"),
        // No my.cnf: the password comes from the environment, the rest from the flags.
        "--config.my-cnf=".to_string(),
    ];
    if tls {
        args.push("--tls.insecure-skip-verify".to_string());
    }
    args.extend(EXTRA_COLLECTORS.iter().map(|c| format!("--collect.{c}")));
    args
}

/// Requests of 10m CPU and 32Mi memory and a limit of 128Mi: a scrape every 15 s of one
/// server takes a few milliseconds and about 20 MiB.
fn default_resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_string());
    ResourceRequirements {
        requests: Some([("cpu".to_string(), q("10m")), ("memory".to_string(), q("32Mi"))].into()),
        limits: Some([("memory".to_string(), q("128Mi"))].into()),
        ..Default::default()
    }
}

/// A GET of the exporter's landing page every 10 s, failing after `failures` misses.
fn landing_page_probe(failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction { path: Some("/".into()), port: IntOrString::Int(PORT), ..Default::default() }),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// The sidecar container running `image`, with `resources` or the defaults, over TLS when
/// the server serves it.
pub fn container(image: &str, resources: Option<&ResourceRequirements>, tls: bool, names: &Names) -> Container {
    Container {
        name: CONTAINER.into(),
        image: Some(image.to_string()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(args(&format!("{EXPORTER_HOST}:{MYSQL_PORT}"), tls)),
        env: Some(vec![secret_env(PASSWORD_ENV, &names.secret(), EXPORTER_KEY)]),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(landing_page_probe(3)),
        liveness_probe: Some(landing_page_probe(6)),
        resources: Some(resources.cloned().unwrap_or_else(default_resources)),
        security_context: Some(restricted_container()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sidecar_reads_its_own_server_with_its_own_password() {
        let c = container("exp:1", None, false, &Names::new("db", "ns"));
        let args = c.args.clone().unwrap();
        assert!(!args.iter().any(|a| a.starts_with("--tls")), "{args:?}");
        let over_tls = container("exp:1", None, true, &Names::new("db", "ns")).args.unwrap();
        assert!(over_tls.contains(&"--tls.insecure-skip-verify".to_string()), "{over_tls:?}");
        assert!(args.contains(&"--mysqld.address=127.0.0.1:3306".to_string()), "{args:?}");
        assert!(args.contains(&"--mysqld.username=exporter".to_string()), "{args:?}");
        assert!(args.contains(&"--collect.info_schema.innodb_metrics".to_string()), "{args:?}");
        let env = c.env.clone().unwrap();
        let secret = env[0].value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
        assert_eq!(
            (env[0].name.as_str(), secret.name.as_str(), secret.key.as_str()),
            (PASSWORD_ENV, "db-passwords", EXPORTER_KEY)
        );
        // Neither probe asks the server: a scrape problem must not take it out of its Service.
        for probe in [&c.readiness_probe, &c.liveness_probe] {
            let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
            assert_eq!((get.path.as_deref(), &get.port), (Some("/"), &IntOrString::Int(PORT)));
        }
        assert_eq!(c.ports.unwrap()[0].name.as_deref(), Some("metrics"));
        let limits = c.resources.unwrap().limits.unwrap();
        assert_eq!(limits.get("memory"), Some(&Quantity("128Mi".into())));
        assert_eq!(c.security_context.unwrap().read_only_root_filesystem, Some(true));
    }

    #[test]
    fn resources_given_replace_the_defaults() {
        let mine = ResourceRequirements {
            limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
            ..Default::default()
        };
        let c = container("exp:1", Some(&mine), false, &Names::new("db", "ns"));
        assert_eq!(c.resources, Some(mine));
    }
}
