//! Standard status conditions and status writes.
//!
//! Every Statecraft resource reports the same four conditions so that users and tools can
//! treat all operators alike (`kubectl wait --for=condition=Ready`):
//!
//! | type          | `True` means                                                    |
//! |---------------|-----------------------------------------------------------------|
//! | `Ready`       | the cluster is serving as specified                              |
//! | `Available`   | clients can use it (perhaps degraded)                            |
//! | `Progressing` | the operator is changing something (rolling, scaling, restoring) |
//! | `Degraded`    | something is wrong that the operator cannot fix right now         |
//!
//! Each condition carries `observedGeneration`, so a reader can tell a stale `Ready` from
//! one that reflects the latest spec. `lastTransitionTime` changes only when the status
//! flips, which keeps status writes idempotent: a reconcile that finds nothing new writes
//! nothing (see [`patch_status`]).
//!
//! A spec the operator cannot accept is reported the same way by every operator
//! ([`report_invalid_spec`]): `Ready` is `False` with the error's reason, and a Warning
//! Event says so once.

use std::fmt;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::core::object::HasStatus;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::reason::Reason;
use crate::runner::Runtime;
use crate::{Error, Result};

/// The four standard condition types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionType {
    Ready,
    Available,
    Progressing,
    Degraded,
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConditionType::Ready => "Ready",
            ConditionType::Available => "Available",
            ConditionType::Progressing => "Progressing",
            ConditionType::Degraded => "Degraded",
        })
    }
}

/// Sets condition `type_` in `conditions`, keeping `lastTransitionTime` unless the status
/// flips. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: bool,
    reason: impl Into<Reason>,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    set_custom_condition(conditions, &type_.to_string(), status, reason, message, observed_generation)
}

/// Sets a condition of an operator's own type beside the four standard ones (such as
/// `Abnormal` or `AutoScaling`), with the same rules as [`set_condition`].
pub fn set_custom_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: impl Into<Reason>,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    let status = if status { "True" } else { "False" };
    let reason = reason.into().as_str();
    let type_ = type_.to_string();
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let unchanged = existing.status == status
            && existing.reason == reason
            && existing.message == message
            && existing.observed_generation == observed_generation;
        if unchanged {
            return false;
        }
        if existing.status != status {
            existing.last_transition_time = Time(Timestamp::now());
        }
        existing.status = status.into();
        existing.reason = reason.into();
        existing.message = message.into();
        existing.observed_generation = observed_generation;
        return true;
    }
    conditions.push(Condition {
        type_,
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation,
        last_transition_time: Time(Timestamp::now()),
    });
    true
}

/// Removes condition `type_` (a feature switched off); returns whether it was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// Whether condition `type_` is present and `True`.
pub fn is_true(conditions: &[Condition], type_: ConditionType) -> bool {
    let type_ = type_.to_string();
    conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
}

/// Writes `status` through the status subresource with server-side apply, unless it equals
/// the status the object already has. Skipping unchanged writes is what makes a steady-state
/// reconcile send no write requests at all.
pub async fn patch_status<K, S>(
    api: &Api<K>,
    obj: &K,
    current: Option<&S>,
    status: &S,
    field_manager: &str,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(&obj.name_any(), &PatchParams::apply(field_manager).force(), &Patch::Apply(body))
        .await
        .map_err(|e| Error::kube(format!("writing status of {} {}", K::kind(&()), obj.name_any()), e))?;
    Ok(true)
}

/// Reports that `obj`'s spec was refused with `err` (validation, or a check such as a
/// Secret the spec names): `Ready` becomes `False` with the error's reason and message,
/// a Warning Event (`Validate`) is published when that changed the condition (not again
/// on every retry of the same refusal), and the status is patched. `conditions` gives
/// the conditions in the resource's own status type.
///
/// The caller still returns `err`, so that the reconcile's error policy decides the
/// retry; an error here is the status write's.
pub async fn report_invalid_spec<K>(
    rt: &Runtime,
    obj: &K,
    conditions: impl FnOnce(&mut K::Status) -> &mut Vec<Condition>,
    err: &Error,
) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + HasStatus + Clone + DeserializeOwned + fmt::Debug,
    K::Status: Clone + Default + Serialize + PartialEq,
{
    let mut status = obj.status().cloned().unwrap_or_default();
    let message = err.to_string();
    let changed = set_condition(
        conditions(&mut status),
        ConditionType::Ready,
        false,
        err.reason(),
        &message,
        obj.meta().generation,
    );
    if changed {
        rt.events.warning(obj, err.reason(), "Validate", message).await;
    }
    let api: Api<K> = Api::namespaced(rt.client.clone(), &rt.namespace);
    patch_status(&api, obj, obj.status(), &status, rt.field_manager).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::{Catalogue, Common};

    /// The reasons these tests set.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
    enum Members {
        AllMembersReady,
        Creating,
    }

    impl Catalogue for Members {}

    #[test]
    fn setting_the_same_condition_twice_changes_nothing() {
        let mut conds = Vec::new();
        assert!(set_condition(&mut conds, ConditionType::Ready, true, Members::AllMembersReady, "3/3", Some(2)));
        let first = conds.clone();
        assert!(!set_condition(&mut conds, ConditionType::Ready, true, Members::AllMembersReady, "3/3", Some(2)));
        assert_eq!(conds, first);
        assert!(is_true(&conds, ConditionType::Ready));
        assert!(!is_true(&conds, ConditionType::Degraded));
    }

    #[test]
    fn transition_time_moves_only_when_status_flips() {
        let mut conds = Vec::new();
        set_condition(&mut conds, ConditionType::Ready, false, Members::Creating, "0/3", Some(1));
        let t0 = conds[0].last_transition_time.clone();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(set_condition(&mut conds, ConditionType::Ready, false, Members::Creating, "1/3", Some(1)));
        assert_eq!(conds[0].last_transition_time, t0, "message change alone keeps the time");
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(set_condition(&mut conds, ConditionType::Ready, true, Members::AllMembersReady, "3/3", Some(1)));
        assert!(conds[0].last_transition_time > t0);
        assert_eq!(conds.len(), 1);
    }

    #[test]
    fn new_generation_is_a_change() {
        let mut conds = Vec::new();
        set_condition(&mut conds, ConditionType::Progressing, false, Common::Idle, "", Some(1));
        assert!(set_condition(&mut conds, ConditionType::Progressing, false, Common::Idle, "", Some(2)));
        assert_eq!(conds[0].observed_generation, Some(2));
    }
}
