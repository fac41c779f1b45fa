//! What keeps a member's pod from running its server, in Kubernetes' own words. When a
//! server does not answer, an operator only sees that it does not answer; the reason is in
//! the pod's status: the scheduler found no node (resources too large, an unbound claim),
//! the container crash-loops (resources too small: `OOMKilled`), the image cannot be
//! pulled, or the container cannot be created (a missing Secret or ConfigMap key). The
//! operators put that reason into the condition that says what they wait for, so that a
//! user reads "PodUnschedulable: 0/3 nodes are available: 3 Insufficient memory" rather
//! than "waiting for servers to answer". A pod that Kubernetes refuses to create at all (a
//! PriorityClass that does not exist, a quota) has no status: its StatefulSet's
//! `FailedCreate` Event is read instead ([`creation_problems`]).

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

use crate::reason::{Common, Reason};

/// What keeps one pod from running, most telling first: when a pod has several problems
/// (an init container that cannot pull its image and a main container still waiting), the
/// one of the lowest kind is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProblemKind {
    /// The pod cannot be created (its StatefulSet's `FailedCreate` Event).
    NotCreated,
    /// No node can take the pod (`PodScheduled=False`, reason `Unschedulable`).
    Unschedulable,
    /// The image cannot be pulled (`ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`).
    ImagePullFailed,
    /// The container cannot be created (`CreateContainerConfigError`: a missing Secret or
    /// ConfigMap or key; `CreateContainerError`).
    ConfigError,
    /// The container was killed for using more memory than its limit.
    OomKilled,
    /// The container exits and is restarted over and over.
    CrashLooping,
    /// The pod failed as a whole (evicted, for instance) and is not restarted.
    Failed,
}

impl ProblemKind {
    /// The condition (and Event) reason.
    pub fn reason(self) -> Reason {
        Reason::from(match self {
            ProblemKind::NotCreated => Common::PodNotCreated,
            ProblemKind::Unschedulable => Common::PodUnschedulable,
            ProblemKind::ImagePullFailed => Common::ImagePullFailed,
            ProblemKind::ConfigError => Common::PodConfigError,
            ProblemKind::OomKilled => Common::PodOomKilled,
            ProblemKind::CrashLooping => Common::PodCrashLooping,
            ProblemKind::Failed => Common::PodFailed,
        })
    }
}

/// The problem of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProblem {
    /// The pod's name.
    pub pod: String,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// What Kubernetes says about it (the scheduler's message, the last exit, the kubelet's
    /// message), naming the container where it is about one.
    pub detail: String,
}

impl PodProblem {
    /// The problem in one sentence, naming the pod.
    pub fn message(&self) -> String {
        let what = match self.kind {
            ProblemKind::NotCreated => "cannot be created",
            ProblemKind::Unschedulable => "cannot be scheduled",
            ProblemKind::ImagePullFailed => "cannot pull its image",
            ProblemKind::ConfigError => "cannot create its container",
            ProblemKind::OomKilled => "runs out of memory",
            ProblemKind::CrashLooping => "keeps crashing",
            ProblemKind::Failed => "failed",
        };
        format!("pod {} {what}: {}", self.pod, self.detail)
    }
}

/// The most telling problem of each of `pods` that has one, in the order of `pods`. A pod
/// being deleted, or one that is merely starting (scheduled, pulling, running), has none.
pub fn pod_problems(pods: &[Pod]) -> Vec<PodProblem> {
    pods.iter().filter_map(pod_problem).collect()
}

/// What the scheduler says of a pod whose claims are not bound yet.
const UNBOUND_CLAIMS: &str = "unbound immediate PersistentVolumeClaims";
/// How long a new pod may wait for its claims before that is reported.
const VOLUME_BINDING_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The most telling problem of `pod`, if any.
pub fn pod_problem(pod: &Pod) -> Option<PodProblem> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    let status = pod.status.as_ref()?;
    let problem = |kind, detail: String| Some(PodProblem { pod: name.clone(), kind, detail });
    if status.phase.as_deref() == Some("Failed") {
        let why = [status.reason.as_deref(), status.message.as_deref()].into_iter().flatten().collect::<Vec<_>>();
        return problem(ProblemKind::Failed, if why.is_empty() { "phase Failed".into() } else { why.join(": ") });
    }
    let unschedulable = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    if let Some(c) = unschedulable {
        let message = c.message.clone().unwrap_or_else(|| "Unschedulable".into());
        // A new pod waits for its claim to be provisioned: the scheduler says so until the
        // volume binds, which is the normal start of every new member, not a problem yet.
        let young = crate::backup::created_at(&pod.metadata)
            .is_some_and(|created| chrono::Utc::now().signed_duration_since(created) < VOLUME_BINDING_GRACE);
        if !(young && message.contains(UNBOUND_CLAIMS)) {
            return problem(ProblemKind::Unschedulable, message);
        }
    }
    let containers = status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
    containers
        .filter_map(container_problem)
        .min_by_key(|(kind, _)| *kind)
        .and_then(|(kind, detail)| problem(kind, detail))
}

/// How long a `FailedCreate` Event explains a missing pod: the StatefulSet controller tries
/// again, and records the Event again, at least every 17 minutes (its longest back-off).
const CREATION_FAILURE_FRESH: TimeDelta = TimeDelta::minutes(20);

/// The problems of the pods StatefulSet `statefulset` should have (`<statefulset>-<k>` for
/// `k` below `replicas`) but has not created: Kubernetes refused them, and its reason is only
/// in the StatefulSet's `FailedCreate` Events. `pods` are the ones that exist; the Events
/// are read only when one is missing. A failure to read them is logged and explains
/// nothing: the wait is still reported, only less precisely.
pub async fn creation_problems(
    client: &kube::Client,
    namespace: &str,
    statefulset: &str,
    replicas: i32,
    pods: &[Pod],
) -> Vec<PodProblem> {
    let missing: Vec<String> = (0..replicas.max(0))
        .map(|k| format!("{statefulset}-{k}"))
        .filter(|pod| !pods.iter().any(|p| p.metadata.name.as_deref() == Some(pod.as_str())))
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let selector = format!("regarding.kind=StatefulSet,regarding.name={statefulset},reason=FailedCreate");
    match api.list(&ListParams::default().fields(&selector)).await {
        Ok(events) => creation_problem(&missing, &events.items, Utc::now()).into_iter().collect(),
        Err(e) => {
            tracing::warn!(%statefulset, error = %e, "cannot read the StatefulSet's FailedCreate Events");
            Vec::new()
        }
    }
}

/// The newest `FailedCreate` Event (from the last [`CREATION_FAILURE_FRESH`] before `now`)
/// that names one of the `missing` pods, as that pod's problem. The StatefulSet controller's
/// note reads `create Pod db-0 in StatefulSet db failed error: pods "db-0" is forbidden: no
/// PriorityClass with name fast was found`.
pub fn creation_problem(missing: &[String], events: &[Event], now: DateTime<Utc>) -> Option<PodProblem> {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedCreate"))
        .filter_map(|e| {
            let at = last_seen(e)?;
            let note = e.note.as_deref()?;
            let pod = missing.iter().find(|pod| note.contains(&format!("Pod {pod} ")))?;
            (now.signed_duration_since(at) <= CREATION_FAILURE_FRESH).then_some((at, pod, note))
        })
        .max_by_key(|(at, _, _)| *at)
        .map(|(_, pod, note)| PodProblem {
            pod: pod.clone(),
            kind: ProblemKind::NotCreated,
            detail: note.split_once(" error: ").map_or(note, |(_, why)| why).to_string(),
        })
}

/// When an Event was last recorded: its series' last occurrence, the legacy last timestamp
/// (what the StatefulSet controller's recorder sets), or its creation.
fn last_seen(e: &Event) -> Option<DateTime<Utc>> {
    let micro = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime| t.0;
    let times = [
        e.series.as_ref().map(|s| micro(&s.last_observed_time)),
        e.deprecated_last_timestamp.as_ref().map(|t| t.0),
        e.event_time.as_ref().map(micro),
    ];
    let newest = times.into_iter().flatten().max()?;
    DateTime::from_timestamp(newest.as_second(), newest.subsec_nanosecond().max(0) as u32)
}

/// What the scheduler says of a pod whose volume is pinned to nodes it cannot use (a local
/// volume whose node is gone): the one way of being unschedulable that a new volume cures.
const VOLUME_PINNED: &str = "volume node affinity conflict";

/// Whether the scheduler cannot place `pod` for a reason that a new volume would not change:
/// a node selector, affinity, taint or resource request no node satisfies, or a claim that
/// is never bound. A member replaced on a new volume would be placed no better (and would
/// have lost its data), so operators that replace broken members leave such a member be
/// and report it. Not when the scheduler names the volume's own node affinity: there a
/// replacement is the cure.
pub fn unplaceable(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
            && !c.message.as_deref().unwrap_or_default().contains(VOLUME_PINNED)
    })
}

/// The problem of one container: waiting for a reason that will not pass by itself, or
/// (re)started after a crash and not ready yet. A container running again after a crash
/// keeps the crash as its problem until it is ready, so that the reason does not flap
/// between the crash and "waiting" with every restart.
fn container_problem(c: &ContainerStatus) -> Option<(ProblemKind, String)> {
    let state = c.state.as_ref();
    if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
        let reason = waiting.reason.as_deref().unwrap_or_default();
        let said = |fallback: &str| {
            let message = waiting.message.as_deref().filter(|m| !m.is_empty()).unwrap_or(fallback);
            format!("container {}: {reason}: {message}", c.name)
        };
        match reason {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
                return Some((ProblemKind::ImagePullFailed, said("the image cannot be pulled")));
            }
            "CreateContainerConfigError" | "CreateContainerError" => {
                return Some((ProblemKind::ConfigError, said("the container cannot be created")));
            }
            _ => {}
        }
    }
    // The current termination, else the last one of a container not running (or not ready) again.
    let current = state.and_then(|s| s.terminated.as_ref());
    let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref()).filter(|_| !c.ready && c.restart_count > 0);
    let Some(terminated) = current.or(last) else {
        let waiting =
            state.and_then(|s| s.waiting.as_ref()).filter(|w| w.reason.as_deref() == Some("CrashLoopBackOff"));
        let message = waiting?.message.as_deref().unwrap_or("CrashLoopBackOff");
        return Some((ProblemKind::CrashLooping, format!("container {}: {message}", c.name)));
    };
    if terminated.exit_code == 0 && terminated.reason.as_deref() == Some("Completed") && current.is_some() {
        return None; // an init container that did its job
    }
    let reason = terminated.reason.as_deref().unwrap_or("Error");
    let kind = if reason == "OOMKilled" { ProblemKind::OomKilled } else { ProblemKind::CrashLooping };
    let mut detail = format!(
        "container {}: {reason}, exit code {}, restarted {} time(s)",
        c.name, terminated.exit_code, c.restart_count
    );
    if let Some(m) = terminated.message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        detail.push_str(": ");
        detail.push_str(m);
    }
    Some((kind, detail))
}

/// Explains a wait for members that do not come up (`reason`, `message`, changed in place)
/// by their pods: the reason becomes the most telling problem's, and each pod's problem is
/// added to the message. Returns whether there was anything to explain it with.
pub fn explain_wait(reason: &mut Reason, message: &mut String, problems: &[PodProblem]) -> bool {
    let Some(worst) = problems.iter().min_by_key(|p| p.kind) else { return false };
    *reason = worst.kind.reason();
    for p in problems {
        message.push_str("; ");
        message.push_str(&p.message());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A pod of StatefulSet `db` as the API server returns it, with `status`.
    fn pod(name: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "prod", "labels": {"app.kubernetes.io/instance": "db"}},
            "spec": {"containers": [{"name": "mysql", "image": "mariadb:10.11"}]},
            "status": status,
        }))
        .expect("a pod")
    }

    fn scheduled() -> Value {
        json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-31T12:00:00Z"})
    }

    fn running(name: &str, ready: bool) -> Value {
        json!({"name": name, "image": "mariadb:10.11", "imageID": "", "ready": ready, "restartCount": 0,
               "state": {"running": {"startedAt": "2026-01-31T12:00:05Z"}}})
    }

    fn only(pod: &Pod) -> PodProblem {
        pod_problem(pod).expect("a problem")
    }

    #[test]
    fn a_new_pod_waiting_for_its_volume_is_not_a_problem_until_the_grace_ends() {
        let waiting = |created: chrono::DateTime<chrono::Utc>| {
            let mut p = pod(
                "db-0",
                json!({"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
                }]}),
            );
            p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                created.to_rfc3339().parse().expect("a timestamp"),
            ));
            p
        };
        assert_eq!(pod_problem(&waiting(chrono::Utc::now())), None, "just created: its claim is being provisioned");
        let stuck = pod_problem(&waiting(chrono::Utc::now() - chrono::TimeDelta::minutes(5))).expect("stuck");
        assert_eq!(stuck.kind, ProblemKind::Unschedulable);
        assert!(stuck.detail.contains("unbound"), "{}", stuck.detail);
    }

    /// A `FailedCreate` Event of StatefulSet `db` as the API server returns it, last seen at
    /// `at`.
    fn failed_create(note: &str, at: DateTime<Utc>) -> Event {
        serde_json::from_value(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "db.1", "namespace": "prod"},
            "eventTime": null, "reason": "FailedCreate", "type": "Warning", "note": note,
            "regarding": {"kind": "StatefulSet", "name": "db", "namespace": "prod"},
            "deprecatedLastTimestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }))
        .expect("an Event")
    }

    #[test]
    fn a_pod_kubernetes_refuses_to_create_is_explained_by_its_statefulsets_event() {
        let now = Utc::now();
        let missing = ["db-1".to_string()];
        let refused = failed_create(
            "create Pod db-1 in StatefulSet db failed error: pods \"db-1\" is forbidden: no PriorityClass with name fast was found",
            now - TimeDelta::minutes(2),
        );
        let problem = creation_problem(&missing, std::slice::from_ref(&refused), now).expect("a problem");
        assert_eq!((problem.pod.as_str(), problem.kind), ("db-1", ProblemKind::NotCreated));
        assert_eq!(problem.kind.reason(), Common::PodNotCreated);
        assert_eq!(
            problem.message(),
            "pod db-1 cannot be created: pods \"db-1\" is forbidden: no PriorityClass with name fast was found"
        );
        // Not about a missing pod (db-10 is not db-1), or too old to explain anything now.
        let other = failed_create("create Pod db-10 in StatefulSet db failed error: quota", now);
        assert_eq!(creation_problem(&missing, &[other], now), None);
        assert_eq!(creation_problem(&missing, std::slice::from_ref(&refused), now + TimeDelta::minutes(30)), None);
        // The newest of several says why now.
        let quota = failed_create("create Pod db-1 in StatefulSet db failed error: exceeded quota", now);
        let newest = creation_problem(&missing, &[refused, quota], now).expect("a problem");
        assert_eq!(newest.detail, "exceeded quota");
        // A pod refused is the most telling problem: it has not even got a status.
        assert!(ProblemKind::NotCreated < ProblemKind::Unschedulable);
    }

    #[test]
    fn a_pod_is_unplaceable_unless_the_scheduler_blames_its_volumes_node() {
        let unschedulable = |message: &str| {
            pod(
                "db-1",
                json!({"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                }]}),
            )
        };
        assert!(unplaceable(&unschedulable(
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
        )));
        assert!(unplaceable(&unschedulable("0/3 nodes are available: 3 Insufficient memory.")));
        assert!(!unplaceable(&unschedulable(
            "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) had untolerated taint."
        )));
        assert!(!unplaceable(&pod(
            "db-1",
            json!({"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}
            ]})
        )));
        assert!(!unplaceable(&pod("db-1", json!({"phase": "Pending"}))));
    }

    #[test]
    fn an_unschedulable_pod_reports_the_schedulers_message() {
        let p = pod(
            "db-0",
            json!({"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "lastTransitionTime": "2026-01-31T12:00:00Z",
                "message": "0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
            }]}),
        );
        let problem = only(&p);
        assert_eq!(problem.kind, ProblemKind::Unschedulable);
        assert_eq!(problem.kind.reason(), Common::PodUnschedulable);
        assert!(
            problem
                .message()
                .starts_with("pod db-0 cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory")
        );
    }

    #[test]
    fn an_oom_killed_server_in_back_off_reports_the_kill() {
        let p = pod(
            "db-1",
            json!({"phase": "Running", "conditions": [scheduled()], "containerStatuses": [{
                "name": "mysql", "image": "mariadb:10.11", "imageID": "", "ready": false, "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                    "message": "back-off 1m20s restarting failed container=mysql pod=db-1_prod(0a1b)"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                    "startedAt": "2026-01-31T12:01:00Z", "finishedAt": "2026-01-31T12:01:03Z"}},
            }]}),
        );
        let problem = only(&p);
        assert_eq!(problem.kind.reason().as_str(), "PodOOMKilled");
        assert_eq!(problem.detail, "container mysql: OOMKilled, exit code 137, restarted 4 time(s)");
    }

    #[test]
    fn a_crash_looping_server_reports_its_last_exit_until_it_is_ready() {
        let crashed = json!({"terminated": {"exitCode": 1, "reason": "Error",
            "message": "[ERROR] InnoDB: Cannot allocate memory for the buffer pool\n",
            "startedAt": "2026-01-31T12:01:00Z", "finishedAt": "2026-01-31T12:01:01Z"}});
        let backing_off = pod(
            "db-2",
            json!({"phase": "Running", "containerStatuses": [{
                "name": "mysql", "image": "mariadb:10.11", "imageID": "", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
                "lastState": crashed,
            }]}),
        );
        let problem = only(&backing_off);
        assert_eq!(problem.kind, ProblemKind::CrashLooping);
        assert_eq!(
            problem.message(),
            "pod db-2 keeps crashing: container mysql: Error, exit code 1, restarted 3 time(s): \
             [ERROR] InnoDB: Cannot allocate memory for the buffer pool"
        );
        // Started again, not ready yet: still the crash, not a flap back to "starting".
        let mut again = running("mysql", false);
        again["restartCount"] = json!(3);
        again["lastState"] = crashed.clone();
        let restarted = pod("db-2", json!({"phase": "Running", "containerStatuses": [again.clone()]}));
        assert_eq!(only(&restarted).kind, ProblemKind::CrashLooping);
        // In back-off with no last termination reported (yet): the kubelet's word for it.
        let no_last = pod(
            "db-2",
            json!({"phase": "Running", "containerStatuses": [{
                "name": "mysql", "image": "mariadb:10.11", "imageID": "", "ready": false, "restartCount": 1,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}},
            }]}),
        );
        assert_eq!(only(&no_last).detail, "container mysql: back-off 10s restarting failed container");
        // Ready again: the old crash is history.
        again["ready"] = json!(true);
        assert_eq!(pod_problem(&pod("db-2", json!({"phase": "Running", "containerStatuses": [again]}))), None);
    }

    #[test]
    fn image_pull_and_config_errors_report_the_kubelets_message() {
        let waiting = |reason: &str, message: &str| {
            pod(
                "etcd-0",
                json!({"phase": "Pending", "conditions": [scheduled()], "containerStatuses": [{
                    "name": "etcd", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": reason, "message": message}},
                }]}),
            )
        };
        let pull = only(&waiting(
            "ImagePullBackOff",
            "Back-off pulling image \"gcr.io/etcd-development/etcd:v3.6.99\": ErrImagePull: not found",
        ));
        assert_eq!(pull.kind.reason(), Common::ImagePullFailed);
        assert!(pull.detail.contains("v3.6.99") && pull.detail.starts_with("container etcd: ImagePullBackOff"));
        assert_eq!(
            only(&waiting("ErrImagePull", "")).detail,
            "container etcd: ErrImagePull: the image cannot be pulled"
        );
        let config = only(&waiting("CreateContainerConfigError", "secret \"s3\" not found"));
        assert_eq!(config.kind.reason(), Common::PodConfigError);
        assert_eq!(
            config.message(),
            "pod etcd-0 cannot create its container: container etcd: CreateContainerConfigError: secret \"s3\" not found"
        );
    }

    #[test]
    fn an_init_container_problem_counts_and_the_most_telling_one_wins() {
        let p = pod(
            "db-0",
            json!({"phase": "Pending", "conditions": [scheduled()],
            "initContainerStatuses": [{
                "name": "copy-binary", "image": "op", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}},
            }],
            "containerStatuses": [{
                "name": "mysql", "image": "mariadb:10.11", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "PodInitializing"}},
            }]}),
        );
        assert_eq!(only(&p).detail, "container copy-binary: ErrImagePull: manifest unknown");
        // A finished init container is no problem.
        let done = pod(
            "db-0",
            json!({"phase": "Running", "initContainerStatuses": [{
                "name": "init", "image": "op", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            }], "containerStatuses": [running("mysql", false)]}),
        );
        assert_eq!(pod_problem(&done), None);
    }

    #[test]
    fn starting_running_evicted_and_terminating_pods() {
        assert_eq!(pod_problem(&pod("db-0", json!({"phase": "Pending"}))), None);
        let creating = pod(
            "db-0",
            json!({"phase": "Pending", "conditions": [scheduled()], "containerStatuses": [{
                "name": "mysql", "image": "mariadb:10.11", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }]}),
        );
        assert_eq!(pod_problem(&creating), None);
        let up = pod("db-0", json!({"phase": "Running", "containerStatuses": [running("mysql", true)]}));
        assert_eq!(pod_problem(&up), None);
        let evicted = pod(
            "db-0",
            json!({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: ephemeral-storage."}),
        );
        assert_eq!(
            only(&evicted).message(),
            "pod db-0 failed: Evicted: The node was low on resource: ephemeral-storage."
        );
        let mut going = pod("db-0", json!({"phase": "Failed", "reason": "Evicted"}));
        going.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-31T12:00:00Z")).ok();
        assert_eq!(pod_problem(&going), None);
    }

    #[test]
    fn a_wait_is_explained_by_the_worst_problem_and_names_every_pod() {
        let waiting = Reason::from(Common::MemberNotReady);
        let (mut reason, mut message) = (waiting, "waiting for servers 0, 1 to answer".to_string());
        assert!(!explain_wait(&mut reason, &mut message, &[]));
        assert_eq!((reason, message.as_str()), (waiting, "waiting for servers 0, 1 to answer"));
        let problems = [
            PodProblem { pod: "db-0".into(), kind: ProblemKind::CrashLooping, detail: "exit code 1".into() },
            PodProblem { pod: "db-1".into(), kind: ProblemKind::Unschedulable, detail: "0/1 nodes".into() },
        ];
        assert!(explain_wait(&mut reason, &mut message, &problems));
        assert_eq!(reason, Common::PodUnschedulable);
        assert_eq!(
            message,
            "waiting for servers 0, 1 to answer; pod db-0 keeps crashing: exit code 1; pod db-1 cannot be scheduled: 0/1 nodes"
        );
        assert_eq!(
            pod_problems(&[
                pod("db-0", json!({"phase": "Running", "containerStatuses": [running("mysql", true)]})),
                pod("db-1", json!({"phase": "Failed"})),
            ]),
            vec![PodProblem { pod: "db-1".into(), kind: ProblemKind::Failed, detail: "phase Failed".into() }]
        );
    }
}
