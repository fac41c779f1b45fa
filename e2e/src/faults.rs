//! Faults injected into the pods of the local cluster, whose containers are processes and
//! network namespaces of this host (no Docker in between): a container's processes paused
//! and resumed (SIGSTOP / SIGCONT, as a long GC pause or a frozen VM would), a pod cut off
//! from chosen addresses or from everything (iptables DROP rules in its network namespace,
//! both ways), and the cluster's API server stopped.
//!
//! Every fault is a guard that undoes itself when dropped, so a failing test never leaves
//! a stopped server or a partition behind. Local cluster only: on kind the processes live
//! inside the node container.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

use crate::{Cluster, E2eError, Result};

/// A pod as the faults need it: its UID, address and containers.
#[derive(Clone, Debug)]
pub struct PodInfo {
    /// Pod name.
    pub name: String,
    /// Pod UID (it names the pod's cgroup).
    pub uid: String,
    /// Pod IP.
    pub ip: String,
    /// `(container name, containerd id)` of every running container.
    pub containers: Vec<(String, String)>,
}

impl PodInfo {
    /// Reads pod `name` of namespace `ns`.
    pub fn get(cluster: &Cluster, ns: &str, name: &str) -> Result<PodInfo> {
        let json = cluster.kubectl(&["get", "pod", "-n", ns, name, "-o", "json"])?;
        let pod: Value = serde_json::from_str(&json).map_err(|e| E2eError::Other(format!("pod {name}: {e}")))?;
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let uid = text(&pod["metadata"]["uid"]).ok_or_else(|| E2eError::Other(format!("pod {name} has no uid")))?;
        let ip = text(&pod["status"]["podIP"]).ok_or_else(|| E2eError::Other(format!("pod {name} has no IP")))?;
        let containers = pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let id = text(&c["containerID"])?;
                Some((text(&c["name"])?, id.rsplit("://").next()?.to_owned()))
            })
            .collect();
        Ok(PodInfo { name: name.to_owned(), uid, ip, containers })
    }

    /// The host PIDs of container `container`'s processes (found through their cgroup,
    /// which names the pod's UID and the container's id).
    pub fn pids(&self, container: &str) -> Result<Vec<u32>> {
        let id = self
            .containers
            .iter()
            .find(|(name, _)| name == container)
            .map(|(_, id)| id.clone())
            .ok_or_else(|| E2eError::Other(format!("pod {} has no running container {container}", self.name)))?;
        let uid_forms = [self.uid.clone(), self.uid.replace('-', "_")];
        let mut pids = BTreeSet::new();
        for entry in std::fs::read_dir("/proc").map_err(|e| E2eError::Other(format!("/proc: {e}")))?.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
            if cgroup.contains(&id) && uid_forms.iter().any(|u| cgroup.contains(u.as_str())) {
                pids.insert(pid);
            }
        }
        if pids.is_empty() {
            return Err(E2eError::Other(format!("no process of container {container} of pod {} found", self.name)));
        }
        Ok(pids.into_iter().collect())
    }
}

fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| E2eError::Command { command: format!("{program} {}", args.join(" ")), message: e.to_string() })?;
    if !out.status.success() {
        return Err(E2eError::Command {
            command: format!("{program} {}", args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// A container whose processes are stopped; resumed on [`Pause::resume`] or drop.
pub struct Pause {
    pids: Vec<u32>,
    resumed: bool,
}

impl Pause {
    /// Sends SIGSTOP to every process of `container` of `pod`.
    pub fn start(pod: &PodInfo, container: &str) -> Result<Pause> {
        Pause::pids(pod.pids(container)?)
    }

    /// Stops the local cluster's kube-apiserver (a host process; its PID is in
    /// `/run/statecraft/kube-apiserver.pid`, written by `e2e/cluster/up.sh`): every client
    /// of the API, the operators, kubelet and controller-manager included, gets no answer
    /// until it resumes, while the data plane (pods, kube-proxy's rules) runs on.
    pub fn api_server() -> Result<Pause> {
        const PID_FILE: &str = "/run/statecraft/kube-apiserver.pid";
        let pid: u32 = std::fs::read_to_string(PID_FILE)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| E2eError::Other(format!("{PID_FILE}: no PID (is the local cluster up?)")))?;
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if name.trim() != "kube-apiserver" {
            return Err(E2eError::Other(format!("PID {pid} of {PID_FILE} is not kube-apiserver but {name:?}")));
        }
        Pause::pids(vec![pid])
    }

    fn pids(pids: Vec<u32>) -> Result<Pause> {
        signal("STOP", &pids)?;
        Ok(Pause { pids, resumed: false })
    }

    /// Sends SIGCONT.
    pub fn resume(mut self) -> Result<()> {
        self.resumed = true;
        signal("CONT", &self.pids)
    }
}

impl Drop for Pause {
    fn drop(&mut self) {
        if !self.resumed {
            let _ = signal("CONT", &self.pids);
        }
    }
}

/// Kills every process of `container` of `pod` at once (SIGKILL), as a crash or the loss
/// of its node would: nothing runs its shutdown (an operator cannot give its Lease up).
pub fn crash(pod: &PodInfo, container: &str) -> Result<()> {
    signal("KILL", &pod.pids(container)?)
}

fn signal(name: &str, pids: &[u32]) -> Result<()> {
    let sig = format!("-{name}");
    let mut args = vec![sig.as_str()];
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    args.extend(pids.iter().map(String::as_str));
    run("kill", &args)
}

/// A pod cut off from some addresses: every packet between it and them is dropped, in both
/// directions, by rules in the pod's own network namespace. Healed on [`Partition::heal`]
/// or drop.
pub struct Partition {
    netns: String,
    rules: Vec<Vec<String>>,
    healed: bool,
}

impl Partition {
    /// Drops the traffic between `pod` and each of `peers` (IP addresses).
    pub fn start(pod: &PodInfo, peers: &[String]) -> Result<Partition> {
        let rules = peers
            .iter()
            .map(String::as_str)
            .flat_map(|peer| [["INPUT", "-s", peer, "-j", "DROP"], ["OUTPUT", "-d", peer, "-j", "DROP"]])
            .collect();
        Partition::with_rules(pod, rules)
    }

    /// Drops all of `pod`'s traffic but its loopback: nothing reaches it and it reaches
    /// nothing (the operator, its peers, clients, DNS), as a failed switch port would.
    pub fn isolate(pod: &PodInfo) -> Result<Partition> {
        Partition::with_rules(
            pod,
            vec![["INPUT", "!", "-i", "lo", "-j", "DROP"], ["OUTPUT", "!", "-o", "lo", "-j", "DROP"]],
        )
    }

    fn with_rules<const N: usize>(pod: &PodInfo, rules: Vec<[&str; N]>) -> Result<Partition> {
        let pid = pod.pids(first_container(pod)?)?.first().copied().unwrap_or_default();
        let netns = format!("--net=/proc/{pid}/ns/net");
        let rules: Vec<Vec<String>> = rules.iter().map(|r| r.iter().map(|a| (*a).to_owned()).collect()).collect();
        let mut partition = Partition { netns, rules: Vec::new(), healed: false };
        for rule in rules {
            partition.iptables("-I", &rule)?;
            partition.rules.push(rule);
        }
        Ok(partition)
    }

    fn iptables(&self, action: &str, rule: &[String]) -> Result<()> {
        let mut args = vec![self.netns.as_str(), "iptables", "-w", action];
        args.extend(rule.iter().map(String::as_str));
        run("nsenter", &args)
    }

    /// Removes the rules.
    pub fn heal(mut self) -> Result<()> {
        self.healed = true;
        let rules = std::mem::take(&mut self.rules);
        rules.iter().try_for_each(|rule| self.iptables("-D", rule))
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        if !self.healed {
            for rule in std::mem::take(&mut self.rules) {
                let _ = self.iptables("-D", &rule);
            }
        }
    }
}

fn first_container(pod: &PodInfo) -> Result<&str> {
    pod.containers
        .first()
        .map(|(name, _)| name.as_str())
        .ok_or_else(|| E2eError::Other(format!("pod {} has no running container", pod.name)))
}

/// A fault a test has injected and ends when it chooses (both guards also end on drop).
pub trait Fault {
    /// Ends the fault: resumes the processes, removes the rules.
    fn end(self) -> Result<()>;
}

impl Fault for Pause {
    fn end(self) -> Result<()> {
        self.resume()
    }
}

impl Fault for Partition {
    fn end(self) -> Result<()> {
        self.heal()
    }
}

/// The cluster held alone for a fault that stops a shared part: released when the fault
/// ends (after the part is back, when paired with it as `(pause, alone)`).
impl Fault for crate::outage::Alone {
    fn end(self) -> Result<()> {
        Ok(())
    }
}

/// Two faults at once, ended in the order they were started (the second's guard still
/// ends it on drop if the first fails to end).
impl<A: Fault, B: Fault> Fault for (A, B) {
    fn end(self) -> Result<()> {
        let (a, b) = self;
        a.end()?;
        b.end()
    }
}

/// How many times each fault scenario is repeated: `FAULT_RUNS`, default 1 (`make e2e
/// FAULT_RUNS=20` for the figures the docs give).
pub fn fault_runs() -> usize {
    std::env::var("FAULT_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}
