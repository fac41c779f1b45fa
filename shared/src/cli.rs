//! The command line every operator binary shares:
//!
//! - `run`: run the controllers (leader election on by default);
//! - `crd`: print the operator's CustomResourceDefinitions as YAML;
//! - `rbac`: print the ServiceAccount, Role and RoleBinding the operator needs;
//! - `manifests`: print the RBAC and the Deployment that install the operator;
//! - `job`: run one of the operator's Job tasks (backup, restore) inside a Job's pod;
//! - `copy-self`: copy the binary into a volume shared with another image's container;
//! - `capabilities`: print the capability criteria the operator claims, as JSON.
//! - `sample-objects`: print the objects the operator builds for its sample resource.
//!
//! Every flag can also be set from an environment variable (shown in `--help`), which is
//! how the Deployment in `deploy/` configures the operator.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Parsed command line of an operator binary.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator's controllers.
    Run(RunArgs),
    /// Print the operator's CustomResourceDefinitions as YAML.
    Crd,
    /// Print the API reference of the operator's resources (every field, its type,
    /// constraints and description, and the validation rules), as Markdown.
    ApiReference,
    /// Print the ServiceAccount, Role and RoleBinding the operator needs, as YAML.
    Rbac {
        /// Namespace the operator is installed in.
        #[arg(long, env = "STATECRAFT_NAMESPACE", default_value = "statecraft-system")]
        namespace: String,
        /// The namespaces it manages resources in, comma-separated (default: its own): a
        /// Role and RoleBinding is rendered in each, and they must exist.
        #[arg(long, value_delimiter = ',')]
        namespaces: Vec<String>,
    },
    /// Print everything needed to install the operator in a namespace: its RBAC and its
    /// Deployment (the CRDs come from `crd`, since they are cluster-scoped).
    Manifests {
        /// Namespace the operator is installed in.
        #[arg(long, env = "STATECRAFT_NAMESPACE", default_value = "statecraft-system")]
        namespace: String,
        /// The namespaces it manages resources in, comma-separated (default: its own): a
        /// Role and RoleBinding is rendered in each, and they must exist.
        #[arg(long, value_delimiter = ',')]
        namespaces: Vec<String>,
        /// The operator image; defaults to the one this build ships with.
        #[arg(long)]
        image: Option<String>,
    },
    /// Print one file that installs the operator on a cluster with
    /// `kubectl apply --server-side -f`: its Namespace, CRDs, the users' view and edit
    /// ClusterRoles, its RBAC and its Deployment.
    Install {
        /// Namespace the operator is installed in (created by the file).
        #[arg(long, env = "STATECRAFT_NAMESPACE", default_value = "statecraft-system")]
        namespace: String,
        /// The namespaces it manages resources in, comma-separated (default: its own): a
        /// Role and RoleBinding is rendered in each, and they must exist.
        #[arg(long, value_delimiter = ',')]
        namespaces: Vec<String>,
        /// The operator image; defaults to the one this build ships with.
        #[arg(long)]
        image: Option<String>,
    },
    /// Run one of the operator's Job tasks (a backup, a restore) in the pod of a Job the
    /// operator created. The task reads its parameters from environment variables, so
    /// that secrets come from Secret references and never appear on a command line.
    Job {
        /// The task's name (e.g. `backup`).
        name: String,
    },
    /// Copy this (static) binary to a path: an init container puts it into a volume shared
    /// with a container of another image, which then runs `job` with the tools of that image
    /// (e.g. the database's own dump client).
    CopySelf {
        /// Where to put the binary (made executable).
        dest: std::path::PathBuf,
    },
    /// Print the capability criteria the operator claims as JSON
    /// (`{"operator": NAME, "claims": [ids]}`): what `statecraft-capability` checks against
    /// static checks and e2e evidence.
    Capabilities,
    /// Print, as YAML, the objects the operator builds for its sample resource (StatefulSet,
    /// Services, PodDisruptionBudget...): what `statecraft-capability` checks, from
    /// `deploy/<operator>/sample-objects.yaml`, without linking the operator's code.
    SampleObjects,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

/// Flags of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The operator's own namespace, where it holds the leader Lease and finds its pod.
    /// Defaults to the pod's namespace.
    #[arg(long, env = "STATECRAFT_NAMESPACE")]
    pub namespace: Option<String>,

    /// The namespaces whose resources it manages, comma-separated; defaults to its own.
    /// Its rights are Roles, one per namespace (`manifests --namespaces`), never a
    /// ClusterRole, so it watches each namespace on its own.
    #[arg(long, env = "STATECRAFT_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,

    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "STATECRAFT_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,

    /// Address of the `/healthz` and `/readyz` endpoints.
    #[arg(long, env = "STATECRAFT_HEALTH_ADDR", default_value = "0.0.0.0:8081")]
    pub health_addr: SocketAddr,

    /// Run controllers only while holding the leader Lease. Turn off only when exactly one
    /// replica can ever run.
    #[arg(long, env = "STATECRAFT_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,

    /// How long the Lease stays valid after its last renewal. It bounds how soon a standby
    /// takes over from a leader that died without giving the Lease up (its node lost): a
    /// failover of a primary lost with it waits that long. client-go's 15 s made such a
    /// failover take 16 s; 3 s, with renewals every 0.5 s and 2 s to get one through, keeps
    /// it within 5 s at two small requests a second. Under a 16-thread sysbench load on two
    /// cores the slowest renewal took 0.6 s (docs/mysql.md), well inside those 2 s.
    #[arg(long, env = "STATECRAFT_LEADER_LEASE_DURATION", default_value = "3s", value_parser = humantime::parse_duration)]
    pub leader_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it gives up (shorter than the lease:
    /// the second between them is the margin in which the old leader has stopped acting
    /// and no one else may act yet).
    #[arg(long, env = "STATECRAFT_LEADER_RENEW_DEADLINE", default_value = "2s", value_parser = humantime::parse_duration)]
    pub leader_renew_deadline: Duration,

    /// How often candidates try to acquire, and the leader to renew.
    #[arg(long, env = "STATECRAFT_LEADER_RETRY_PERIOD", default_value = "500ms", value_parser = humantime::parse_duration)]
    pub leader_retry_period: Duration,

    /// This replica's identity in the Lease. Defaults to the pod name, else host name and pid.
    #[arg(long, env = "POD_NAME")]
    pub leader_identity: Option<String>,

    /// The operator's own pod (in its namespace), from which it learns the image its Jobs
    /// run. Set by the Deployment through the downward API.
    #[arg(long, env = "POD_NAME", hide = true)]
    pub pod_name: Option<String>,

    /// Log format.
    #[arg(long, env = "STATECRAFT_LOG_FORMAT", value_enum, default_value = "json")]
    pub log_format: LogFormat,

    /// Log filter, in `tracing` syntax (e.g. `info,statecraft_mysql=debug`).
    #[arg(long, env = "STATECRAFT_LOG", default_value = "info")]
    pub log_filter: String,
}

/// Where a pod finds its own namespace.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

impl RunArgs {
    /// The operator's own namespace: the flag, else the pod's namespace.
    pub fn resolve_namespace(&self) -> crate::Result<String> {
        if let Some(ns) = &self.namespace {
            return Ok(ns.clone());
        }
        std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
            .map(|s| s.trim().to_string())
            .map_err(|_| crate::Error::invalid_spec("--namespace", "is required when not running in a pod"))
    }

    /// The namespaces to watch, given the operator's own: see [`watched_namespaces`].
    pub fn watched_namespaces(&self, own: &str) -> crate::Result<Vec<String>> {
        watched_namespaces(&self.namespaces, own)
    }

    /// The leader-election identity: the flag, else `hostname-pid`.
    pub fn resolve_identity(&self) -> String {
        self.leader_identity.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "operator".into());
            format!("{host}-{}", std::process::id())
        })
    }
}

/// The namespaces an operator in namespace `own` watches, given `--namespaces`: each once,
/// in the order given, blanks ignored (`a,,b`, and OLM's empty target list); none means
/// `own`. A name that cannot be a namespace is refused, naming the flag.
pub fn watched_namespaces(given: &[String], own: &str) -> crate::Result<Vec<String>> {
    let mut watched: Vec<String> = Vec::new();
    for namespace in given.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if !crate::names::is_dns_1123_label(namespace) {
            return Err(crate::Error::invalid_spec(
                "--namespaces",
                format!("{namespace:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"),
            ));
        }
        if !watched.iter().any(|w| w == namespace) {
            watched.push(namespace.to_string());
        }
    }
    if watched.is_empty() {
        watched.push(own.to_string());
    }
    Ok(watched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_defaults() {
        let cli = Cli::try_parse_from(["op", "run", "--namespace", "db"]).expect("valid command line");
        let Command::Run(args) = cli.command else { panic!("expected run") };
        assert_eq!(args.namespace.as_deref(), Some("db"));
        assert!(args.leader_election);
        assert_eq!(args.leader_lease_duration, Duration::from_secs(3));
        assert_eq!(args.leader_renew_deadline, Duration::from_secs(2));
        assert_eq!(args.leader_retry_period, Duration::from_millis(500));
        assert_eq!(args.log_format, LogFormat::Json);
    }

    #[test]
    fn flags_parse_durations_and_booleans() {
        let cli = Cli::try_parse_from([
            "op",
            "run",
            "--leader-election",
            "false",
            "--leader-lease-duration",
            "8s",
            "--leader-retry-period",
            "1s",
            "--log-format",
            "text",
        ])
        .expect("valid command line");
        let Command::Run(args) = cli.command else { panic!("expected run") };
        assert!(!args.leader_election);
        assert_eq!(args.leader_lease_duration, Duration::from_secs(8));
        assert_eq!(args.leader_retry_period, Duration::from_secs(1));
        assert_eq!(args.log_format, LogFormat::Text);
    }

    #[test]
    fn job_and_copy_self_take_their_operands() {
        let cli = Cli::try_parse_from(["op", "job", "backup"]).expect("valid command line");
        assert!(matches!(cli.command, Command::Job { name } if name == "backup"));
        let cli = Cli::try_parse_from(["op", "copy-self", "/opt/statecraft/op"]).expect("valid command line");
        assert!(matches!(cli.command, Command::CopySelf { dest } if dest.ends_with("op")));
        assert!(Cli::try_parse_from(["op", "job"]).is_err(), "a job needs a name");
    }

    #[test]
    fn capabilities_takes_no_operands() {
        let cli = Cli::try_parse_from(["op", "capabilities"]).expect("valid command line");
        assert!(matches!(cli.command, Command::Capabilities));
        assert!(Cli::try_parse_from(["op", "capabilities", "extra"]).is_err());
        let cli = Cli::try_parse_from(["op", "api-reference"]).expect("valid command line");
        assert!(matches!(cli.command, Command::ApiReference));
        let cli = Cli::try_parse_from(["op", "sample-objects"]).expect("valid command line");
        assert!(matches!(cli.command, Command::SampleObjects));
        assert!(Cli::try_parse_from(["op", "sample-objects", "extra"]).is_err());
    }

    #[test]
    fn watched_namespaces_default_to_the_own_one_and_come_once_each() {
        let cli = Cli::try_parse_from(["op", "run", "--namespaces", "shop,billing, shop,,"]).expect("valid");
        let Command::Run(args) = cli.command else { panic!("expected run") };
        assert_eq!(args.watched_namespaces("ops").expect("valid"), ["shop", "billing"]);
        let cli = Cli::try_parse_from(["op", "run"]).expect("valid");
        let Command::Run(args) = cli.command else { panic!("expected run") };
        assert_eq!(args.watched_namespaces("ops").expect("valid"), ["ops"]);
        assert_eq!(watched_namespaces(&[String::new()], "ops").expect("OLM's empty list"), ["ops"]);
        let err = watched_namespaces(&["Shop".into()], "ops").expect_err("not a namespace");
        assert!(err.to_string().contains("--namespaces") && err.to_string().contains("Shop"), "{err}");
        let cli = Cli::try_parse_from(["op", "manifests", "--namespaces", "a,b"]).expect("valid");
        assert!(matches!(cli.command, Command::Manifests { namespaces, .. } if namespaces == ["a", "b"]));
    }

    #[test]
    fn bad_flags_are_rejected_with_the_flag_named() {
        let err = Cli::try_parse_from(["op", "run", "--leader-lease-duration", "soon"]).expect_err("invalid duration");
        assert!(err.to_string().contains("--leader-lease-duration"), "{err}");
    }
}
