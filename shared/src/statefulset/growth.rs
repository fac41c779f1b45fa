//! Growing the data volumes when the spec asks for a larger size.
//!
//! A StatefulSet's claim template cannot change, so the operator keeps the template at the
//! size the cluster was created with ([`keep_claim_size`]) and asks each member's claim for
//! the new size itself. Kubernetes decides the rest: its admission refuses a claim whose
//! StorageClass does not allow expansion (the refusal is reported with Kubernetes' own
//! message), the storage driver grows the volume, and the kubelet grows the file system —
//! while the pod runs where the driver can do it online, so no server is restarted for it.
//! Volumes never shrink: a size below what a volume already has is refused with the reason,
//! and nothing is asked. A growth the storage could not give is undone by setting the size
//! back to more than the volume has (Kubernetes accepts a lower request while it is above
//! the volume's capacity).
//!
//! The decision ([`decide`]) is pure over the observed claims; [`Growth::pass`] observes,
//! asks, and reports the `VolumesSized` condition and an Event on each change.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::info;

use super::Names;
use crate::events::EventPublisher;
use crate::quantity;
use crate::reason::{Catalogue, Reason};
use crate::status::set_custom_condition;
use crate::{Error, Result};

/// The condition that says whether every member's volume has `spec.storage.size`.
pub const CONDITION: &str = "VolumesSized";

/// How long volumes found at size are not looked at again while the spec stays the same:
/// only a spec change asks for a new size, so the claims are listed every pass only while
/// something is under way.
const SETTLED_RECHECK: Duration = Duration::from_secs(30);

/// How long a size Kubernetes refused is not asked again (unless the spec changes): the
/// refusal comes from the StorageClass or a quota, which a retry every pass would not move.
const REFUSAL_HOLD: Duration = Duration::from_secs(60);

/// The reasons of volume growth, in the `VolumesSized` condition and Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
pub enum Sizing {
    /// Every member's volume has the spec's size (condition `True`).
    VolumesAtSize,
    /// The claims ask for the new size and the storage is growing them (condition `False`;
    /// the message says which step each volume waits for). Also the Event when asked.
    VolumesGrowing,
    /// Every volume reached the new size (Event).
    VolumesGrown,
    /// Kubernetes refused the new size: the StorageClass does not allow expansion
    /// (`allowVolumeExpansion`), a quota, or — when a growth is undone — a size not above
    /// the volume's capacity. The message is Kubernetes'; nothing changed.
    VolumeResizeRefused,
    /// The spec asks for less than a volume has: volumes never shrink. Nothing changed.
    VolumeShrinkRefused,
}

impl Catalogue for Sizing {}

/// One member's claim as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The claim's name.
    pub name: String,
    /// The size it asks for (`spec.resources.requests.storage`), as written and in bytes.
    pub requested: (String, u64),
    /// The size its volume has (`status.capacity.storage`), once bound.
    pub capacity: Option<(String, u64)>,
    /// What the resize waits for, when one is under way or stuck.
    pub step: Option<String>,
}

impl Claim {
    /// The claim as observed; `None` for one without a readable size (not ours to judge).
    pub fn of(pvc: &PersistentVolumeClaim) -> Option<Claim> {
        let sized = |q: &Quantity| quantity::bytes(&q.0).ok().map(|b| (q.0.clone(), b));
        let spec = pvc.spec.as_ref()?;
        let requested = sized(spec.resources.as_ref()?.requests.as_ref()?.get("storage")?)?;
        let status = pvc.status.as_ref();
        let capacity = status.and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage")).and_then(sized);
        Some(Claim { name: pvc.name_any(), requested, capacity, step: step_of(pvc) })
    }
}

/// What a claim's resize waits for, from its conditions and allocated resource status.
fn step_of(pvc: &PersistentVolumeClaim) -> Option<String> {
    let status = pvc.status.as_ref()?;
    let condition = |type_: &str| {
        status.conditions.iter().flatten().find(|c| c.type_ == type_ && c.status == "True").map(|c| {
            let message = c.message.clone().unwrap_or_default();
            if message.is_empty() { type_.to_string() } else { format!("{type_}: {message}") }
        })
    };
    let allocation = status.allocated_resource_statuses.as_ref().and_then(|s| s.get("storage"));
    condition("ControllerResizeError")
        .or_else(|| condition("NodeResizeError"))
        .or_else(|| allocation.filter(|a| a.ends_with("Infeasible")).cloned())
        .or_else(|| condition("FileSystemResizePending").map(|_| "the node grows the file system".to_string()))
        .or_else(|| condition("Resizing").map(|_| "the storage driver grows the volume".to_string()))
}

/// What the volumes need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Every claim asks for the size and has it.
    Sized,
    /// These claims ask for another size and may be asked for this one.
    Ask(Vec<String>),
    /// Every claim asks for the size; some do not have it yet (the message says which and why).
    Growing(String),
    /// The size is below what a volume has (the message names it): nothing is asked.
    Shrink(String),
}

/// What the claims need for every volume to have `size` bytes (`text` as the spec writes it).
pub fn decide(size: (&str, u64), claims: &[Claim]) -> Decision {
    let (text, bytes) = size;
    let has = |c: &Claim| c.capacity.as_ref().map_or(c.requested.1, |(_, b)| *b);
    let shrunk: Vec<String> = claims
        .iter()
        .filter(|c| bytes < c.requested.1 && bytes < has(c))
        .map(|c| format!("{} has {}", c.name, c.capacity.as_ref().unwrap_or(&c.requested).0))
        .collect();
    if !shrunk.is_empty() {
        return Decision::Shrink(format!(
            "spec.storage.size {text} is below what volumes have ({}); volumes never shrink: set it back to at least their size",
            shrunk.join(", ")
        ));
    }
    let ask: Vec<String> = claims.iter().filter(|c| c.requested.1 != bytes).map(|c| c.name.clone()).collect();
    if !ask.is_empty() {
        return Decision::Ask(ask);
    }
    let growing: Vec<String> = claims
        .iter()
        .filter(|c| c.capacity.as_ref().is_none_or(|(_, b)| *b < bytes))
        .map(|c| {
            let has = c.capacity.as_ref().map_or("no capacity yet", |(t, _)| t.as_str());
            let step = c.step.as_deref().unwrap_or("waiting for the storage driver");
            format!("{} has {has} ({step})", c.name)
        })
        .collect();
    if growing.is_empty() {
        Decision::Sized
    } else {
        Decision::Growing(format!("growing to {text}: {}", growing.join(", ")))
    }
}

/// Sets the built StatefulSet's claim template size to the existing one's: Kubernetes
/// refuses any change to a StatefulSet's claim templates, so a larger `spec.storage.size`
/// grows the claims ([`Growth`]) and new members start at the size the cluster was created
/// with, then grow like the others.
pub fn keep_claim_size(built: &mut StatefulSet, mut existing: StatefulSet) {
    let Some(kept) = data_requests(&mut existing).and_then(|r| r.remove("storage")) else {
        return;
    };
    if let Some(requests) = data_requests(built) {
        requests.insert("storage".into(), kept);
    }
}

/// The resource requests of a StatefulSet's data claim template.
fn data_requests(sts: &mut StatefulSet) -> Option<&mut BTreeMap<String, Quantity>> {
    let templates = sts.spec.as_mut()?.volume_claim_templates.as_mut()?;
    let data = templates.iter_mut().find(|t| t.metadata.name.as_deref() == Some(super::DATA_VOLUME))?;
    data.spec.as_mut()?.resources.as_mut()?.requests.as_mut()
}

/// Volume growth of one cluster, as its clustering task runs it every pass.
#[derive(Debug, Default)]
pub struct Growth {
    /// The reason last published as an Event.
    published: Option<Reason>,
    /// The size Kubernetes last refused, when, and its message.
    refused: Option<(u64, Instant, String)>,
    /// When the volumes were last found at size, and the owner's generation then.
    settled: Option<(Instant, Option<i64>)>,
}

impl Growth {
    /// Observes the claims of members `0..members`, asks them for `size` when they need it,
    /// and reports the outcome in `conditions` and, on a change, as an Event on `owner`.
    // The pass's inputs, each from a different place of the caller's: a struct would only
    // rename them.
    #[allow(clippy::too_many_arguments)]
    pub async fn pass<K: Resource<DynamicType = ()>>(
        &mut self,
        client: &Client,
        names: &Names<'_>,
        members: u32,
        size: &str,
        owner: &K,
        events: &EventPublisher,
        conditions: &mut Vec<Condition>,
    ) -> Result<()> {
        let generation = owner.meta().generation;
        if self.settled.is_some_and(|(at, g)| g == generation && at.elapsed() < SETTLED_RECHECK) {
            return Ok(());
        }
        let bytes = quantity::bytes(size)
            .map_err(|e| Error::InvalidSpec { field: "spec.storage.size".into(), message: e.to_string() })?;
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), names.namespace);
        let listed = api
            .list(&ListParams::default().labels(&names.selector_query()))
            .await
            .map_err(|e| Error::kube("listing the data volume claims", e))?;
        let wanted: Vec<String> = (0..members).map(|k| names.data_claim(k)).collect();
        let claims: Vec<Claim> =
            listed.items.iter().filter(|p| wanted.contains(&p.name_any())).filter_map(Claim::of).collect();
        let (reason, message) = match decide((size, bytes), &claims) {
            Decision::Sized => (Sizing::VolumesAtSize, format!("every volume has {size}")),
            Decision::Growing(message) => (Sizing::VolumesGrowing, message),
            Decision::Shrink(message) => (Sizing::VolumeShrinkRefused, message),
            Decision::Ask(asked) => match self.refusal(bytes) {
                Some(message) => (Sizing::VolumeResizeRefused, message),
                None => self.ask(&api, &asked, size, bytes).await?,
            },
        };
        self.report(owner, events, conditions, reason, &message).await
    }

    /// Kubernetes' message when it refused `bytes` within [`REFUSAL_HOLD`].
    fn refusal(&self, bytes: u64) -> Option<String> {
        let (size, at, message) = self.refused.as_ref()?;
        (*size == bytes && at.elapsed() < REFUSAL_HOLD).then(|| message.clone())
    }

    /// Asks each claim in `asked` for `size`: growing, or refused by Kubernetes (remembered
    /// for [`REFUSAL_HOLD`]).
    async fn ask(
        &mut self,
        api: &Api<PersistentVolumeClaim>,
        asked: &[String],
        size: &str,
        bytes: u64,
    ) -> Result<(Sizing, String)> {
        let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": size}}}});
        for claim in asked {
            match api.patch(claim, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => info!(claim, size, "asked the claim for the new size"),
                // Admission (no allowVolumeExpansion, a quota) or validation refused it.
                Err(kube::Error::Api(status)) if matches!(status.code, 403 | 422) => {
                    let message = status.message.clone(); // names the claim
                    self.refused = Some((bytes, Instant::now(), message.clone()));
                    return Ok((Sizing::VolumeResizeRefused, message));
                }
                Err(e) => return Err(Error::kube("asking a data volume claim for the new size", e)),
            }
        }
        self.refused = None;
        Ok((Sizing::VolumesGrowing, format!("asked {} for {size}", asked.join(", "))))
    }

    /// Sets the condition and publishes an Event when the reason changes (none for a cluster
    /// whose volumes were at size from the start).
    async fn report<K: Resource<DynamicType = ()>>(
        &mut self,
        owner: &K,
        events: &EventPublisher,
        conditions: &mut Vec<Condition>,
        reason: Sizing,
        message: &str,
    ) -> Result<()> {
        let generation = owner.meta().generation;
        set_custom_condition(conditions, CONDITION, reason == Sizing::VolumesAtSize, reason, message, generation);
        self.settled = (reason == Sizing::VolumesAtSize).then(|| (Instant::now(), generation));
        let previous = self.published.replace(reason.into());
        if previous == Some(reason.into()) {
            return Ok(());
        }
        match reason {
            Sizing::VolumesAtSize if previous.is_some_and(|p| p == Sizing::VolumesGrowing) => {
                events.normal(owner, Sizing::VolumesGrown, "Storage", message).await;
            }
            Sizing::VolumesAtSize => {}
            Sizing::VolumesGrowing | Sizing::VolumesGrown => events.normal(owner, reason, "Storage", message).await,
            Sizing::VolumeResizeRefused | Sizing::VolumeShrinkRefused => {
                events.warning(owner, reason, "Storage", message).await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const GI: u64 = 1 << 30;

    fn claim(name: &str, requested: u64, capacity: Option<u64>) -> Claim {
        let sized = |b: u64| (format!("{}Gi", b / GI), b);
        Claim { name: name.into(), requested: sized(requested), capacity: capacity.map(sized), step: None }
    }

    #[test]
    fn claims_at_the_size_need_nothing_and_a_larger_capacity_is_no_shrink() {
        let claims = [claim("data-db-0", GI, Some(GI)), claim("data-db-1", GI, Some(8 * GI))];
        assert_eq!(decide(("1Gi", GI), &claims), Decision::Sized, "a provider may round the capacity up");
        assert_eq!(decide(("1Gi", GI), &[]), Decision::Sized);
    }

    #[test]
    fn a_larger_size_asks_the_claims_that_ask_for_less() {
        let claims = [claim("data-db-0", 2 * GI, Some(GI)), claim("data-db-1", GI, Some(GI))];
        assert_eq!(decide(("2Gi", 2 * GI), &claims), Decision::Ask(vec!["data-db-1".into()]));
    }

    #[test]
    fn asked_claims_grow_until_their_volumes_have_the_size() {
        let mut resizing = claim("data-db-0", 2 * GI, Some(GI));
        resizing.step = Some("the node grows the file system".into());
        let claims = [resizing, claim("data-db-1", 2 * GI, Some(2 * GI)), claim("data-db-2", 2 * GI, None)];
        assert_eq!(
            decide(("2Gi", 2 * GI), &claims),
            Decision::Growing(
                "growing to 2Gi: data-db-0 has 1Gi (the node grows the file system), \
                 data-db-2 has no capacity yet (waiting for the storage driver)"
                    .into()
            )
        );
    }

    #[test]
    fn a_size_below_a_volume_is_refused_and_nothing_is_asked() {
        let claims = [claim("data-db-0", 2 * GI, Some(2 * GI)), claim("data-db-1", GI, Some(GI))];
        let Decision::Shrink(message) = decide(("1Gi", GI), &claims) else { panic!("a shrink") };
        assert!(message.contains("data-db-0 has 2Gi"), "{message}");
        assert!(message.starts_with("spec.storage.size 1Gi is below"), "{message}");
    }

    /// A growth the storage could not give (the claim asks for 4Gi, its volume has 1Gi) is
    /// undone by asking for less again: Kubernetes takes a size above the volume's capacity
    /// and refuses the capacity itself, a refusal reported with its message.
    #[test]
    fn a_stuck_growth_is_undone_by_a_smaller_size_down_to_the_capacity() {
        let claims = [claim("data-db-0", 4 * GI, Some(GI))];
        assert_eq!(decide(("1Gi", GI), &claims), Decision::Ask(vec!["data-db-0".into()]));
        assert_eq!(decide(("2Gi", 2 * GI), &claims), Decision::Ask(vec!["data-db-0".into()]));
    }

    fn pvc(requested: &str, capacity: Option<&str>, conditions: &[(&str, &str)]) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-db-0"},
            "spec": {"resources": {"requests": {"storage": requested}}},
            "status": {
                "capacity": capacity.map(|c| serde_json::json!({"storage": c})),
                "conditions": conditions.iter().map(|(t, m)| serde_json::json!({"type": t, "status": "True", "message": m})).collect::<Vec<_>>(),
            }
        }))
        .expect("a claim")
    }

    #[test]
    fn a_claim_is_read_with_its_sizes_and_its_resize_step() {
        let c = Claim::of(&pvc("2Gi", Some("1Gi"), &[("FileSystemResizePending", "")])).expect("sized");
        assert_eq!(c.requested, ("2Gi".into(), 2 * GI));
        assert_eq!(c.capacity, Some(("1Gi".into(), GI)));
        assert_eq!(c.step.as_deref(), Some("the node grows the file system"));
        let c = Claim::of(&pvc("2Gi", None, &[("ControllerResizeError", "no space in pool")])).expect("sized");
        assert_eq!(c.step.as_deref(), Some("ControllerResizeError: no space in pool"));
        assert_eq!(c.capacity, None);
        assert_eq!(Claim::of(&pvc("two gigs", None, &[])), None, "not ours to judge");
    }

    #[test]
    fn the_template_keeps_the_existing_size() {
        let names = Names { cluster: "db", namespace: "ns", app: "mysql", headless_suffix: "-headless" };
        let with_size = |size: &str| StatefulSet {
            spec: Some(k8s_openapi::api::apps::v1::StatefulSetSpec {
                volume_claim_templates: Some(vec![super::super::data_claim_template(&names, size, None)]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut built = with_size("2Gi");
        keep_claim_size(&mut built, with_size("1Gi"));
        assert_eq!(built, with_size("1Gi"));
        let mut built = with_size("2Gi");
        keep_claim_size(&mut built, StatefulSet::default());
        assert_eq!(built, with_size("2Gi"), "nothing to keep: the built size");
    }

    proptest! {
        /// Whatever the claims, the decision never asks a claim for less than its volume
        /// has, and asks nothing when it refuses.
        #[test]
        fn never_asks_below_a_volume(
            size in 1u64..16,
            claims in proptest::collection::vec((1u64..16, proptest::option::of(1u64..16)), 0..5),
        ) {
            let claims: Vec<Claim> =
                claims.iter().enumerate().map(|(k, (r, c))| claim(&format!("data-db-{k}"), r * GI, c.map(|c| c * GI))).collect();
            match decide((&format!("{size}Gi"), size * GI), &claims) {
                Decision::Ask(asked) => {
                    for c in claims.iter().filter(|c| asked.contains(&c.name)) {
                        prop_assert!(size * GI >= c.capacity.as_ref().map_or(c.requested.1, |(_, b)| *b).min(c.requested.1));
                        prop_assert_ne!(c.requested.1, size * GI);
                    }
                }
                Decision::Shrink(_) => prop_assert!(claims.iter().any(|c| size * GI < c.requested.1)),
                Decision::Sized => prop_assert!(claims.iter().all(|c| c.requested.1 == size * GI)),
                Decision::Growing(_) => prop_assert!(claims.iter().all(|c| c.requested.1 == size * GI)),
            }
        }
    }
}
