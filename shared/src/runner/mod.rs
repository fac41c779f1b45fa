//! Runs an operator: the entry point every operator binary's `main` calls.
//!
//! `run` does, in order: start `/healthz`, `/readyz` and `/metrics`; wait until the
//! operator's CRDs are served (listing each kind in every watched namespace succeeds, which
//! needs no cluster-scoped rights); wait for the leader Lease (in the operator's own
//! namespace); run the controllers, once per watched namespace, until SIGTERM or until the
//! Lease is lost. On SIGTERM the controllers finish their current reconciles, then the
//! Lease is released so a standby takes over at once. On a lost Lease the process exits
//! non-zero right away: another replica may already be acting, and Kubernetes restarts
//! this one as a standby.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub mod endpoints;

use crate::apply::ApplyCache;
use crate::cli::{Cli, Command, LogFormat, RunArgs};
use crate::error::backoff;
use crate::events::EventPublisher;
use crate::leader::{LeaderElector, Leadership, LeaseConfig};
use crate::metrics::{Metrics, NamespaceMetrics};
use crate::rbac;
use crate::{Error, ErrorCategory, Result};

/// What an operator binary plugs into the shared runner.
pub trait Operator: Send + Sync + 'static {
    /// The operator's name: field manager, Lease name, Event reporter and metric prefix
    /// (e.g. `statecraft-mysql`).
    const NAME: &'static str;

    /// The CustomResourceDefinitions the operator serves.
    fn crds() -> Vec<CustomResourceDefinition>;

    /// The API access the operator's own code needs; the library adds what it needs itself
    /// (Lease, Events) when rendering the Role.
    fn rbac_rules() -> Vec<rbac::Rule>;

    /// Runs the operator's controllers until `shutdown` is cancelled.
    fn run_controllers(runtime: Arc<Runtime>, shutdown: CancellationToken) -> impl Future<Output = Result<()>> + Send;

    /// Runs the Job task `name` (the `job` subcommand), in the pod of a Job the operator
    /// created. Parameters come from the environment. Operators without Job tasks keep the
    /// default, which refuses every name.
    fn run_job(name: &str) -> impl Future<Output = Result<()>> + Send {
        let err = Error::invalid_spec("job", format!("{} has no job task named {name:?}", Self::NAME));
        async move { Err(err) }
    }

    /// The capability criteria the operator claims (ids of the `statecraft-capability`
    /// model, e.g. `L3.backup`), printed by the `capabilities` subcommand. A claim is only
    /// a promise: the capability report confirms it from static checks and e2e evidence,
    /// and an operator that claims nothing (the default) is reported at no level.
    fn capabilities() -> Vec<&'static str> {
        Vec::new()
    }

    /// The objects the operator builds for its sample resource (a production-like custom
    /// resource it ships, parsed with [`parse_sample`]), serialized with [`sample_object`]:
    /// printed by the `sample-objects` subcommand and written to
    /// `deploy/<operator>/sample-objects.yaml` by `make manifests`. `statecraft-capability`
    /// checks them there (probes, resources, PodDisruptionBudget, spreading, security
    /// context), which is why it needs no dependency on any operator crate. Operators that
    /// define no resources keep the default: none.
    fn sample_objects() -> Result<Vec<serde_json::Value>> {
        Ok(Vec::new())
    }
}

/// Parses an operator's sample resource (`what` names it in errors, e.g. `sample.yaml`).
pub fn parse_sample<T: DeserializeOwned>(what: &str, yaml: &str) -> Result<T> {
    serde_norway::from_str(yaml).map_err(|e| Error::Permanent(format!("the sample resource {what}: {e}")))
}

/// One object of [`Operator::sample_objects`], as JSON.
pub fn sample_object(object: &impl serde::Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(object).map_err(|e| Error::Permanent(format!("serializing a sample object: {e}")))
}

/// Shared state handed to the operator's controllers, one per watched namespace.
pub struct Runtime {
    /// API client.
    pub client: Client,
    /// The watched namespace whose resources these controllers manage.
    pub namespace: String,
    /// The operator's name, used as field manager (see [`Operator::NAME`]).
    pub field_manager: &'static str,
    /// This replica's identity.
    pub identity: String,
    /// The shared Event publisher.
    pub events: EventPublisher,
    /// The process's metrics (reconciles, leader).
    pub metrics: Arc<Metrics>,
    /// The metrics of this namespace's resources: register per-cluster collectors here.
    pub namespace_metrics: NamespaceMetrics,
    /// Remembers applied objects so unchanged applies are skipped.
    pub apply_cache: ApplyCache,
    /// Whether this replica may act now: check it before any write only the leader may
    /// make (reconciles are checked by [`Runtime::run_controller`]).
    pub leadership: Leadership,
    /// Consecutive failures per object, for back-off.
    failures: Mutex<HashMap<String, u32>>,
}

impl Runtime {
    /// Builds the runtime for an operator named `name` watching `namespace`, acting always
    /// (see [`Runtime::with_leadership`]).
    pub fn new(client: Client, namespace: String, name: &'static str, identity: String) -> Result<Self> {
        let metrics = Metrics::new(name).map_err(|e| Error::Permanent(format!("metrics registry: {e}")))?;
        let events = EventPublisher::new(client.clone(), name, &identity);
        Self::build(client, namespace, name, identity, events, Arc::new(metrics), Leadership::unelected())
    }

    /// The runtime of another watched namespace in the same process: the same client,
    /// identity, Event publisher, metrics and leadership; its own namespace metrics, apply
    /// cache and back-off.
    pub fn watching(&self, namespace: String) -> Result<Self> {
        Self::build(
            self.client.clone(),
            namespace,
            self.field_manager,
            self.identity.clone(),
            self.events.clone(),
            self.metrics.clone(),
            self.leadership.clone(),
        )
    }

    fn build(
        client: Client,
        namespace: String,
        name: &'static str,
        identity: String,
        events: EventPublisher,
        metrics: Arc<Metrics>,
        leadership: Leadership,
    ) -> Result<Self> {
        let namespace_metrics = metrics
            .namespace(&namespace)
            .map_err(|e| Error::Permanent(format!("metrics registry of namespace {namespace}: {e}")))?;
        Ok(Runtime {
            events,
            client,
            namespace,
            field_manager: name,
            identity,
            metrics,
            namespace_metrics,
            apply_cache: ApplyCache::default(),
            leadership,
            failures: Mutex::new(HashMap::new()),
        })
    }

    /// The runtime acting only while `leadership` holds.
    pub fn with_leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = leadership;
        self
    }

    /// Runs `controller` with `reconcile` until `shutdown`, adding what every controller
    /// needs: RED metrics per reconcile, a Warning Event for each failed reconcile, and a
    /// retry policy from the error's category (invalid spec: wait for a change; transient:
    /// exponential back-off; permanent: retry every five minutes).
    pub async fn run_controller<K, C, F, Fut>(
        self: &Arc<Self>,
        name: &'static str,
        controller: Controller<K>,
        ctx: Arc<C>,
        reconcile: F,
        shutdown: CancellationToken,
    ) where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action>> + Send + 'static,
    {
        let runtime = self.clone();
        let reconcile = Arc::new(reconcile);
        let wrapped = move |obj: Arc<K>, ctx: Arc<C>| {
            let runtime = runtime.clone();
            let reconcile = reconcile.clone();
            async move {
                // A replica that may have lost the Lease (paused past it) does nothing, not
                // even an Event: the elector learns soon and stops the controllers.
                runtime.leadership.check()?;
                let started = Instant::now();
                let result = reconcile(obj.clone(), ctx).await;
                let reason = result.as_ref().err().map(|e| e.reason().as_str());
                runtime.metrics.observe_reconcile(name, started.elapsed().as_secs_f64(), reason);
                match &result {
                    Ok(_) => runtime.record_success(&*obj),
                    Err(e) => {
                        warn!(controller = name, object = %obj.name_any(), error = %e, "reconcile failed");
                        runtime.events.warning(&*obj, e.reason(), "Reconcile", e.to_string()).await;
                    }
                }
                result
            }
        };
        let runtime = self.clone();
        let policy = move |obj: Arc<K>, err: &Error, _: Arc<C>| runtime.error_action(&*obj, err);
        controller
            .graceful_shutdown_on(shutdown.cancelled_owned())
            .run(wrapped, policy, ctx)
            .for_each(|res| async move {
                if let Err(e) = res {
                    // Watch errors and objects the reconciler failed on are already logged;
                    // this is the controller machinery's own view, at debug level.
                    tracing::debug!(controller = name, error = %e, "controller event");
                }
            })
            .await;
    }

    fn key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
        format!("{}/{}/{}", K::kind(&()), obj.namespace().unwrap_or_default(), obj.name_any())
    }

    fn record_success<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        if let Ok(mut f) = self.failures.lock() {
            f.remove(&Self::key(obj));
        }
    }

    /// The retry action for a failed reconcile of `obj`.
    fn error_action<K: Resource<DynamicType = ()>>(&self, obj: &K, err: &Error) -> Action {
        let failures = self
            .failures
            .lock()
            .map(|mut f| {
                let n = f.entry(Self::key(obj)).or_insert(0);
                *n += 1;
                *n
            })
            .unwrap_or(1);
        action_for(err.category(), failures)
    }
}

/// The retry action for an error of `category` after `failures` consecutive failures.
pub fn action_for(category: ErrorCategory, failures: u32) -> Action {
    match category {
        ErrorCategory::InvalidSpec => Action::await_change(),
        ErrorCategory::Transient => Action::requeue(backoff(failures.saturating_sub(1))),
        ErrorCategory::Permanent => Action::requeue(Duration::from_secs(300)),
    }
}

/// Parses the command line and runs the subcommand; an operator's `main` is one call.
pub async fn main<O: Operator>() -> ExitCode {
    use clap::Parser;
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => print_or_fail(crd_yaml(&O::crds())),
        Command::ApiReference => {
            print!("{}", crate::reference::api_reference(O::NAME, &O::crds()));
            ExitCode::SUCCESS
        }
        Command::Rbac { namespace, namespaces } => print_or_fail(
            crate::cli::watched_namespaces(&namespaces, &namespace).and_then(|w| rbac_yaml::<O>(&namespace, &w)),
        ),
        Command::Manifests { namespace, namespaces, image } => print_or_fail(
            crate::cli::watched_namespaces(&namespaces, &namespace)
                .and_then(|w| manifests_yaml::<O>(&namespace, &w, image.as_deref())),
        ),
        Command::Install { namespace, namespaces, image } => print_or_fail(
            crate::cli::watched_namespaces(&namespaces, &namespace)
                .and_then(|w| install_yaml::<O>(&namespace, &w, image.as_deref())),
        ),
        Command::Job { name } => {
            init_job_tracing();
            match O::run_job(&name).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    error!(job = %name, error = %e, "job failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Capabilities => {
            println!("{}", capabilities_json::<O>());
            ExitCode::SUCCESS
        }
        Command::SampleObjects => print_or_fail(sample_objects_yaml::<O>()),
        Command::CopySelf { dest } => match copy_self(&dest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        Command::Run(args) => {
            init_tracing(&args);
            match run::<O>(args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    error!(error = %e, "operator stopped");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// What `capabilities` prints: `{"operator":NAME,"claims":[...]}` on one line, the claims
/// sorted and once each so that the output is stable and diffable.
pub fn capabilities_json<O: Operator>() -> String {
    /// A struct rather than `json!`, to keep `operator` first.
    #[derive(serde::Serialize)]
    struct Claims {
        operator: &'static str,
        claims: Vec<&'static str>,
    }
    let mut claims = O::capabilities();
    claims.sort_unstable();
    claims.dedup();
    // Serializing strings cannot fail.
    serde_json::to_string(&Claims { operator: O::NAME, claims }).unwrap_or_default()
}

/// What `sample-objects` prints: a comment saying what the file is, then each object of
/// [`Operator::sample_objects`] as a YAML document (only the comment for an operator with
/// none).
pub fn sample_objects_yaml<O: Operator>() -> Result<String> {
    let objects = O::sample_objects()?;
    let mut out = format!(
        "# The objects {name} builds for its sample resource, printed by\n\
         # `{name} sample-objects` and written here by `make manifests`.\n\
         # Not for installing: statecraft-capability checks them.\n",
        name = O::NAME
    );
    if objects.is_empty() {
        out.push_str("# None yet: the operator defines no resources.\n");
    }
    out.push_str(&documents(&objects, "a sample object")?);
    Ok(out)
}

/// Copies the running binary to `dest`, executable by everyone.
fn copy_self(dest: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let io = |what: &str, e: std::io::Error| Error::Permanent(format!("copy-self: {what} {}: {e}", dest.display()));
    let me = std::env::current_exe().map_err(|e| io("finding this binary to copy to", e))?;
    std::fs::copy(&me, dest).map_err(|e| io("copying to", e))?;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755)).map_err(|e| io("making executable", e))
}

/// Job tasks log JSON lines to standard error, filtered by `STATECRAFT_LOG` (default info).
fn init_job_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("STATECRAFT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().json().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// Prints a subcommand's rendered output, or its error.
fn print_or_fail(rendered: Result<String>) -> ExitCode {
    match rendered {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn fail(e: Error) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

/// `objects` as a multi-document YAML stream (each document after a `---` line); `what`
/// names one of them in an error.
fn documents<T: serde::Serialize>(objects: &[T], what: &str) -> Result<String> {
    let mut out = String::new();
    for object in objects {
        let yaml = serde_norway::to_string(object).map_err(|e| Error::Permanent(format!("rendering {what}: {e}")))?;
        out.push_str("---\n");
        out.push_str(&yaml);
    }
    Ok(out)
}

/// The CRDs as a multi-document YAML stream.
pub fn crd_yaml(crds: &[CustomResourceDefinition]) -> Result<String> {
    documents(crds, "CRD")
}

/// The RBAC of the operator installed in `namespace` and managing resources in `watched`, as
/// YAML: its ServiceAccount, Roles and RoleBindings ([`rbac::render`]). Refused when the
/// rules do not let the operator list one of its own CRDs: `run` lists each before it starts
/// the controllers, so such an operator would never become ready.
pub fn rbac_yaml<O: Operator>(namespace: &str, watched: &[String]) -> Result<String> {
    let mut rules = rbac::base_rules();
    rules.extend(O::rbac_rules());
    let unlisted = unlisted_crds(&O::crds(), &rules);
    if !unlisted.is_empty() {
        return Err(Error::Permanent(format!(
            "RBAC rules of {}: no rule lets it list {} (run waits for every CRD it defines to be listable)",
            O::NAME,
            unlisted.join(", ")
        )));
    }
    let rendered = rbac::render(&rbac::OperatorRbac::new(O::NAME, namespace, rules).watching(watched))
        .map_err(|e| Error::Permanent(format!("RBAC rules of {}: {e}", O::NAME)))?;
    rbac::to_yaml(&rendered).map_err(|e| Error::Permanent(format!("rendering the RBAC of {}: {e}", O::NAME)))
}

/// The CRDs (`<plural>.<group>`) of `crds` that no rule of `rules` lets the operator list.
fn unlisted_crds(crds: &[CustomResourceDefinition], rules: &[rbac::Rule]) -> Vec<String> {
    crds.iter()
        .filter(|crd| {
            !rules.iter().any(|r| {
                r.api_group == crd.spec.group
                    && r.resources.contains(&crd.spec.names.plural.as_str())
                    && r.verbs.contains(&"list")
                    && r.resource_names.is_none()
            })
        })
        .map(|crd| format!("{}.{}", crd.spec.names.plural, crd.spec.group))
        .collect()
}

/// The operator's RBAC and Deployment as YAML: what `deploy/<operator>/operator.yaml` holds.
pub fn manifests_yaml<O: Operator>(namespace: &str, watched: &[String], image: Option<&str>) -> Result<String> {
    let image = match image.or_else(|| crate::deploy::default_image(O::NAME)) {
        Some(image) => image,
        None => return Err(Error::invalid_spec("--image", format!("no default image for {} in images.env", O::NAME))),
    };
    let deployment = crate::deploy::deployment(O::NAME, namespace, watched, image);
    let yaml =
        serde_norway::to_string(&deployment).map_err(|e| Error::Permanent(format!("rendering Deployment: {e}")))?;
    Ok(format!("{}---\n{yaml}", rbac_yaml::<O>(namespace, watched)?))
}

/// What `install` prints: the Namespace, the CRDs, the users' view and edit ClusterRoles
/// ([`crate::user_roles`]) and [`manifests_yaml`], in the order `kubectl apply` needs (the
/// Namespace before what lives in it). The watched namespaces must exist already.
pub fn install_yaml<O: Operator>(namespace: &str, watched: &[String], image: Option<&str>) -> Result<String> {
    let ns = k8s_openapi::api::core::v1::Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(namespace.into()),
            labels: Some([("app.kubernetes.io/part-of".to_string(), "statecraft".to_string())].into_iter().collect()),
            ..Default::default()
        },
        ..Default::default()
    };
    let crds = O::crds();
    let roles = crate::user_roles::user_roles(O::NAME, &crds);
    Ok(format!(
        "{}{}{}{}",
        documents(&[ns], "Namespace")?,
        crd_yaml(&crds)?,
        documents(&roles, "ClusterRole")?,
        manifests_yaml::<O>(namespace, watched, image)?
    ))
}

fn init_tracing(args: &RunArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log_filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let result = match args.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    if let Err(e) = result {
        eprintln!("tracing already initialised: {e}");
    }
}

/// `run`: see the module documentation.
pub async fn run<O: Operator>(args: RunArgs) -> Result<()> {
    let namespace = args.resolve_namespace()?;
    let watched = args.watched_namespaces(&namespace)?;
    let identity = args.resolve_identity();
    let lease = LeaseConfig {
        name: O::NAME.into(),
        namespace: namespace.clone(),
        identity: identity.clone(),
        lease_duration: args.leader_lease_duration,
        renew_deadline: args.leader_renew_deadline,
        retry_period: args.leader_retry_period,
    };
    if args.leader_election {
        lease.validate()?;
    }
    let client = Client::try_default().await.map_err(|e| Error::kube("connecting to the API server", e))?;
    let leadership = if args.leader_election { Leadership::elected() } else { Leadership::unelected() };
    let first = Runtime::new(client.clone(), watched[0].clone(), O::NAME, identity.clone())?
        .with_leadership(leadership.clone());
    let mut runtimes = Vec::with_capacity(watched.len());
    for other in &watched[1..] {
        runtimes.push(Arc::new(first.watching(other.clone())?));
    }
    runtimes.insert(0, Arc::new(first));
    let metrics = runtimes[0].metrics.clone();
    info!(operator = O::NAME, %namespace, watched = %watched.join(","), %identity, "starting");
    if let Some(pod) = &args.pod_name {
        learn_own_image(&client, &namespace, pod).await;
    }

    let ready = Arc::new(AtomicBool::new(false));
    let stop = CancellationToken::new();
    spawn_signal_handler(stop.clone());
    endpoints::serve(args.health_addr, args.metrics_addr, ready.clone(), metrics.clone(), stop.clone()).await?;

    for namespace in &watched {
        wait_for_crds(&client, namespace, &O::crds(), &stop).await?;
    }
    ready.store(true, Ordering::SeqCst);
    if stop.is_cancelled() {
        return Ok(());
    }

    let controllers_stop = stop.child_token();
    let elector_stop = CancellationToken::new();
    let mut lost = None;
    let elector = if args.leader_election {
        let (mut leading, handle) = LeaderElector::new(client, lease, leadership).spawn(elector_stop.clone());
        info!("waiting for the leader lease");
        tokio::select! {
            _ = stop.cancelled() => {
                elector_stop.cancel();
                let _ = handle.await;
                return Ok(());
            }
            res = leading.wait_for(|l| *l) => {
                if res.is_err() {
                    return Err(Error::Permanent("leader elector stopped".into()));
                }
            }
        }
        // Stop the controllers the moment leadership is lost.
        let flag = Arc::new(AtomicBool::new(false));
        lost = Some(flag.clone());
        let token = controllers_stop.clone();
        let releasing = elector_stop.clone();
        tokio::spawn(async move {
            let _ = leading.wait_for(|l| !*l).await;
            // Giving the Lease up on shutdown also publishes `false`; that is not a loss.
            if !releasing.is_cancelled() {
                flag.store(true, Ordering::SeqCst);
                token.cancel();
            }
        });
        Some(handle)
    } else {
        None
    };

    metrics.set_leader(true);
    info!("running controllers");
    let result = run_controllers::<O>(&runtimes, controllers_stop.clone()).await;
    metrics.set_leader(false);
    elector_stop.cancel();
    if let Some(handle) = elector {
        let _ = handle.await;
    }
    result?;
    if lost.is_some_and(|f| f.load(Ordering::SeqCst)) {
        return Err(Error::Permanent("leader lease lost; exiting so that only one replica acts".into()));
    }
    info!("stopped cleanly");
    Ok(())
}

/// Runs the operator's controllers once per watched namespace (each watch is namespaced,
/// like the operator's rights) until `stop`. The first to fail stops the others after
/// their current reconciles; its error is returned.
async fn run_controllers<O: Operator>(runtimes: &[Arc<Runtime>], stop: CancellationToken) -> Result<()> {
    let runs = runtimes.iter().map(|runtime| {
        let stop = stop.clone();
        async move {
            let result = O::run_controllers(runtime.clone(), stop.clone()).await;
            if let Err(e) = &result {
                error!(namespace = %runtime.namespace, error = %e, "controllers stopped: stopping the other namespaces'");
                stop.cancel();
            }
            result
        }
    });
    futures::future::join_all(runs).await.into_iter().collect()
}

/// Reads the image of the operator's own container from its pod, for the Jobs it runs
/// (see [`crate::deploy::operator_image`]). Without it (the pod unreadable) they fall back
/// to the environment or the build's default, which is said in the log.
async fn learn_own_image(client: &Client, namespace: &str, pod: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let image = match pods.get(pod).await {
        Ok(p) => p
            .spec
            .and_then(|s| s.containers.into_iter().find(|c| c.name == crate::deploy::OPERATOR_CONTAINER))
            .and_then(|c| c.image),
        Err(e) => {
            warn!(%pod, error = %e, "cannot read the operator's own pod: its Jobs run the default image");
            return;
        }
    };
    match image {
        Some(image) => {
            info!(%image, "the operator's Jobs run its own image");
            crate::deploy::set_operator_image(image);
        }
        None => warn!(%pod, "the operator's pod has no container named operator: its Jobs run the default image"),
    }
}

fn spawn_signal_handler(stop: CancellationToken) {
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    warn!(error = %e, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = terminate => info!("SIGTERM: shutting down"),
            _ = tokio::signal::ctrl_c() => info!("interrupted: shutting down"),
        }
        stop.cancel();
    });
}

/// Waits until every CRD's kind can be listed in watched namespace `namespace`: then the
/// CRD is established and this operator's Role there covers it.
async fn wait_for_crds(
    client: &Client,
    namespace: &str,
    crds: &[CustomResourceDefinition],
    stop: &CancellationToken,
) -> Result<()> {
    for crd in crds {
        let Some(version) = crd.spec.versions.iter().find(|v| v.storage).or(crd.spec.versions.first()) else {
            continue;
        };
        let resource = ApiResource {
            group: crd.spec.group.clone(),
            version: version.name.clone(),
            api_version: format!("{}/{}", crd.spec.group, version.name),
            kind: crd.spec.names.kind.clone(),
            plural: crd.spec.names.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        let started = Instant::now();
        let mut last_log = None::<Instant>;
        loop {
            match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(_) => {
                    info!(crd = %crd.name_any(), %namespace, "CRD is served");
                    break;
                }
                Err(e) => {
                    if last_log.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                        warn!(crd = %crd.name_any(), %namespace, waited_s = started.elapsed().as_secs(), error = %e, "waiting for the CRD to be established and listable in the namespace (its Role there)");
                        last_log = Some(Instant::now());
                    }
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_policy_follows_the_error_category() {
        assert_eq!(action_for(ErrorCategory::InvalidSpec, 3), Action::await_change());
        assert_eq!(action_for(ErrorCategory::Transient, 1), Action::requeue(Duration::from_secs(1)));
        assert_eq!(action_for(ErrorCategory::Transient, 4), Action::requeue(Duration::from_secs(8)));
        assert_eq!(action_for(ErrorCategory::Permanent, 1), Action::requeue(Duration::from_secs(300)));
    }

    struct Claiming;

    impl Operator for Claiming {
        const NAME: &'static str = "statecraft-claiming";
        fn crds() -> Vec<CustomResourceDefinition> {
            Vec::new()
        }
        fn rbac_rules() -> Vec<rbac::Rule> {
            Vec::new()
        }
        async fn run_controllers(_: Arc<Runtime>, _: CancellationToken) -> Result<()> {
            Ok(())
        }
        fn capabilities() -> Vec<&'static str> {
            vec!["L3.backup", "L1.install", "L3.backup"]
        }
    }

    struct Silent;

    impl Operator for Silent {
        const NAME: &'static str = "statecraft-silent";
        fn crds() -> Vec<CustomResourceDefinition> {
            Vec::new()
        }
        fn rbac_rules() -> Vec<rbac::Rule> {
            Vec::new()
        }
        async fn run_controllers(_: Arc<Runtime>, _: CancellationToken) -> Result<()> {
            Ok(())
        }
    }

    fn crd(plural: &str, group: &str) -> CustomResourceDefinition {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": format!("{plural}.{group}") },
            "spec": { "group": group, "scope": "Namespaced", "versions": [],
                      "names": { "plural": plural, "kind": "Thing" } },
        }))
        .unwrap()
    }

    #[test]
    fn an_operator_must_be_able_to_list_every_crd_it_defines() {
        let crds = [crd("widgets", "example.io"), crd("gadgets", "example.io")];
        let rules = [rbac::Rule::new("example.io", &["widgets"], &["get", "list", "watch"])];
        assert_eq!(unlisted_crds(&crds, &rules), vec!["gadgets.example.io".to_string()]);
        let rules = [rbac::Rule::new("example.io", &["widgets", "gadgets"], &["list"])];
        assert!(unlisted_crds(&crds, &rules).is_empty());
        let rules = [rbac::Rule::new("other.io", &["widgets", "gadgets"], &["list"])];
        assert_eq!(unlisted_crds(&crds, &rules).len(), 2, "another group's resources");
        let rules = [rbac::Rule::new("example.io", &["widgets", "gadgets"], &["get", "watch"])];
        assert_eq!(unlisted_crds(&crds, &rules).len(), 2, "no list verb");
    }

    #[test]
    fn capabilities_are_printed_sorted_and_once() {
        assert_eq!(
            capabilities_json::<Claiming>(),
            r#"{"operator":"statecraft-claiming","claims":["L1.install","L3.backup"]}"#
        );
        assert_eq!(capabilities_json::<Silent>(), r#"{"operator":"statecraft-silent","claims":[]}"#);
    }
}
