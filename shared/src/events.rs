//! One Event recorder shared by all controllers of an operator.
//!
//! Every operation and every refusal emits an Event on the object it concerns, so that
//! `kubectl describe` tells the story (`Normal` for what the operator did, `Warning` for
//! what it refused or failed to do). kube-runtime's [`Recorder`] folds repeats of the same
//! event into a series instead of creating a new object each time, which matters for
//! refusals repeated on every reconcile.
//!
//! Publishing is best-effort: an Event that cannot be written is logged and never fails a
//! reconcile, because the action it reports has already happened (or been refused).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use tracing::warn;

use crate::reason::Reason;

/// Publishes Events as one reporting controller (the operator).
#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
}

impl EventPublisher {
    /// A publisher reporting as `controller` (the operator's name) from `instance` (the pod).
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        let reporter = Reporter { controller: controller.into(), instance: Some(instance.into()) };
        EventPublisher { recorder: Recorder::new(client, reporter) }
    }

    /// A `Normal` event: something the operator did. `action` is CamelCase; `reason` comes from a catalogue.
    pub async fn normal<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: impl Into<Reason>,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(obj.object_ref(&()), EventType::Normal, reason, action, note.into()).await;
    }

    /// A `Warning` event: something the operator refused or failed to do.
    pub async fn warning<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: impl Into<Reason>,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(obj.object_ref(&()), EventType::Warning, reason, action, note.into()).await;
    }

    /// A `Normal` event about `obj` that concerns one of its pods (`pod`, in `obj`'s
    /// namespace), named as the Event's related object. The recorder folds repeats by
    /// reason, action and objects, not by note: without the pod, "db-2 replicates from db-0"
    /// would be folded into an earlier "db-1 replicates from db-0" and only counted.
    pub async fn normal_about_pod<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        pod: &str,
        reason: impl Into<Reason>,
        action: &str,
        note: impl Into<String>,
    ) {
        let related = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.into()),
            namespace: obj.meta().namespace.clone(),
            ..Default::default()
        };
        self.publish_related(obj.object_ref(&()), Some(related), EventType::Normal, reason, action, note.into()).await;
    }

    /// Publishes an event about any object reference.
    pub async fn publish(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: impl Into<Reason>,
        action: &str,
        note: String,
    ) {
        self.publish_related(regarding, None, type_, reason, action, note).await;
    }

    async fn publish_related(
        &self,
        regarding: ObjectReference,
        related: Option<ObjectReference>,
        type_: EventType,
        reason: impl Into<Reason>,
        action: &str,
        note: String,
    ) {
        // The API limits the note to 1 kB.
        let note = truncate(note, 1000);
        let reason = reason.into().as_str();
        let event = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: related };
        if let Err(e) = self.recorder.publish(&event, &regarding).await {
            warn!(reason, action, error = %e, "could not publish event");
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo".into(), 2), "h");
        assert_eq!(super::truncate("abc".into(), 10), "abc");
    }
}
