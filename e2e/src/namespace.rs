//! One namespace per test, so that tests cannot see each other's objects and a failed test
//! leaves its evidence in one place.
//!
//! A test calls [`TestNamespace::pass`] as its last step. If the namespace is dropped
//! without that (an assertion panicked or an error was returned with `?`), the pods'
//! state, their logs and the namespace's Events are printed before the namespace is
//! deleted, which is what one needs to understand a failure in CI.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::outage::{self, Entered};
use crate::{Cluster, Result};

/// A namespace owned by one test.
pub struct TestNamespace {
    /// The namespace's name.
    pub name: String,
    cluster: Cluster,
    passed: bool,
    /// Counts the test among those running, for faults that need the cluster alone.
    _running: Entered,
}

impl TestNamespace {
    /// Creates a namespace named `<prefix>-<unique suffix>`.
    pub async fn create(cluster: &Cluster, prefix: &str) -> Result<Self> {
        let running = outage::enter().await;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
        let name = format!("{prefix}-{:x}{:04x}", std::process::id() % 0xfff, nanos % 0xffff);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([("statecraft.io/e2e".to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(cluster.client.clone()).create(&PostParams::default(), &ns).await?;
        Ok(TestNamespace { name, cluster: cluster.clone(), passed: false, _running: running })
    }

    /// Marks the test as passed: dropping the namespace then deletes it without a dump.
    pub fn pass(mut self) {
        self.passed = true;
    }

    /// Prints pods, their logs and the Events of the namespace to standard error.
    pub fn dump(&self) {
        let ns = self.name.as_str();
        eprintln!("===== diagnostics of namespace {ns} =====");
        for args in [vec!["get", "all,pvc,events", "-n", ns, "-o", "wide"], vec!["describe", "pods", "-n", ns]] {
            match self.cluster.kubectl(&args) {
                Ok(out) => eprintln!("$ kubectl {}\n{out}", args.join(" ")),
                Err(e) => eprintln!("{e}"),
            }
        }
        let pods = self.cluster.kubectl(&["get", "pods", "-n", ns, "-o", "name"]).unwrap_or_default();
        for pod in pods.lines() {
            for previous in ["--previous=false", "--previous=true"] {
                let args = ["logs", "-n", ns, pod, "--all-containers", "--prefix", "--tail=200", previous];
                if let Ok(out) = self.cluster.kubectl(&args)
                    && !out.is_empty()
                {
                    eprintln!("$ kubectl {}\n{out}", args.join(" "));
                }
            }
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if !self.passed {
            self.dump();
        }
        if let Err(e) = self.cluster.kubectl(&["delete", "namespace", &self.name, "--wait=false"]) {
            eprintln!("could not delete namespace {}: {e}", self.name);
        }
    }
}
