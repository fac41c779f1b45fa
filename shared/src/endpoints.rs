//! What a Service's EndpointSlices list: the pods clients reach through it. An operator
//! reports a resource Ready only once each Service it promises lists a pod (the seconds
//! between a pod passing its readiness probe and the EndpointSlice controller listing it
//! are seconds in which a client of a "Ready" resource is refused).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::{Error, Result};

/// The label an EndpointSlice names its Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One endpoint: its pod and the conditions the EndpointSlice gives it (`None`: unknown,
/// which Kubernetes says to read as true).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The pod's name.
    pub pod: String,
    /// The pod's uid, telling a pod apart from its replacement of the same name.
    pub uid: String,
    /// Ready to take new connections (a terminating pod never is).
    pub ready: Option<bool>,
    /// Serving, terminating or not: what kube-proxy falls back to when no endpoint is ready.
    pub serving: Option<bool>,
}

impl Endpoint {
    /// Ready, unknown counting as ready.
    pub fn is_ready(&self) -> bool {
        self.ready != Some(false)
    }

    /// Serving (else ready, for slices written before the condition existed).
    pub fn is_serving(&self) -> bool {
        self.serving.or(self.ready) != Some(false)
    }
}

/// The endpoints of each of `services` in `namespace`, by Service name (a Service without
/// slices is absent), from one list call.
pub async fn endpoints(client: &Client, namespace: &str, services: &[&str]) -> Result<BTreeMap<String, Vec<Endpoint>>> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{SERVICE_NAME_LABEL} in ({})", services.join(","));
    let list = slices
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::kube("listing the Services' EndpointSlices", e))?;
    Ok(by_service(&list.items))
}

/// The pods `service` in `namespace` lists as ready: what a client of the Service reaches.
pub async fn ready_pods(client: &Client, namespace: &str, service: &str) -> Result<BTreeSet<String>> {
    let listed = endpoints(client, namespace, &[service]).await?.remove(service).unwrap_or_default();
    Ok(listed.into_iter().filter(Endpoint::is_ready).map(|e| e.pod).collect())
}

/// The endpoints of `slices` that name a pod, by the Service each slice belongs to.
fn by_service(slices: &[EndpointSlice]) -> BTreeMap<String, Vec<Endpoint>> {
    let mut out: BTreeMap<String, Vec<Endpoint>> = BTreeMap::new();
    for slice in slices {
        let Some(service) = slice.labels().get(SERVICE_NAME_LABEL) else { continue };
        let listed = out.entry(service.clone()).or_default();
        listed.extend(slice.endpoints.iter().filter_map(|e| {
            let pod = e.target_ref.as_ref().filter(|r| r.kind.as_deref().is_none_or(|k| k == "Pod"))?;
            let conditions = e.conditions.as_ref();
            Some(Endpoint {
                pod: pod.name.clone()?,
                uid: pod.uid.clone().unwrap_or_default(),
                ready: conditions.and_then(|c| c.ready),
                serving: conditions.and_then(|c| c.serving),
            })
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::discovery::v1::{Endpoint as SliceEndpoint, EndpointConditions};
    use kube::api::ObjectMeta;

    fn slice(service: &str, endpoints: &[(&str, Option<bool>, Option<bool>)]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                labels: Some([(SERVICE_NAME_LABEL.to_string(), service.to_string())].into()),
                ..Default::default()
            },
            endpoints: endpoints
                .iter()
                .map(|(pod, ready, serving)| SliceEndpoint {
                    target_ref: Some(ObjectReference {
                        kind: Some("Pod".into()),
                        name: Some(pod.to_string()),
                        uid: Some(format!("uid-{pod}")),
                        ..Default::default()
                    }),
                    conditions: Some(EndpointConditions { ready: *ready, serving: *serving, terminating: None }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn endpoints_are_grouped_by_service_with_their_conditions() {
        let slices = [
            slice("db-primary", &[("db-0", Some(false), Some(true))]),
            slice("db-replicas", &[("db-1", Some(true), None), ("db-2", None, None)]),
            slice("db-replicas", &[("db-3", Some(false), Some(false))]),
        ];
        let by = by_service(&slices);
        let primary = &by["db-primary"][0];
        assert!(!primary.is_ready() && primary.is_serving(), "terminating but still serving");
        let replicas: Vec<_> = by["db-replicas"].iter().filter(|e| e.is_ready()).map(|e| e.pod.as_str()).collect();
        assert_eq!(replicas, ["db-1", "db-2"], "unknown counts as ready; slices of one Service merge");
        assert_eq!(by["db-replicas"][2].uid, "uid-db-3");
        assert!(!by["db-replicas"][2].is_serving());
    }
}
