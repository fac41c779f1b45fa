//! `make demo` (for now): the shared library at work on a real kube-apiserver.
//!
//! Starts etcd and kube-apiserver, installs the example operator's CRD and the namespaced
//! Role its `rbac` subcommand renders, runs two replicas of the operator as that service
//! account, creates an object, and shows with `kubectl` what a user would see: the status
//! conditions, the child object, the Events and the leader Lease.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use statecraft_shared::testing::apiserver::ApiServer;
use statecraft_shared::testing::binary;

type DemoResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> DemoResult<String> {
    let mut child = Command::new(binary("kubectl")?)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::io::Write::write_all(&mut pipe, text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(format!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn show(title: &str, text: &str) {
    println!("\n\x1b[1m$ {title}\x1b[0m\n{}", text.trim_end());
}

#[tokio::main]
async fn main() -> DemoResult {
    let operator =
        std::env::var("ECHO_OPERATOR").map_err(|_| "set ECHO_OPERATOR to the statecraft-echo-operator binary")?;
    let started = Instant::now();
    let server = ApiServer::start().await?;
    let kc = server.kubeconfig();
    println!("kube-apiserver {} and etcd up in {:.1}s", server.url(), started.elapsed().as_secs_f64());

    let run = |args: &[&str]| -> DemoResult<String> {
        let out = Command::new(&operator).args(args).output()?;
        Ok(String::from_utf8(out.stdout)?)
    };
    kubectl(kc, &["create", "namespace", "demo"], None)?;
    kubectl(kc, &["apply", "-f", "-"], Some(&run(&["crd"])?))?;
    kubectl(kc, &["wait", "--for=condition=Established", "crd/echoes.test.statecraft.io", "--timeout=30s"], None)?;
    let rbac = run(&["rbac", "--namespace", "demo"])?;
    show("statecraft-echo-operator rbac --namespace demo", &rbac);
    kubectl(kc, &["apply", "-f", "-"], Some(&rbac))?;
    let sa_kc = server.kubeconfig_as("system:serviceaccount:demo:statecraft-echo", &["system:serviceaccounts"])?;

    let mut replicas = Vec::new();
    for name in ["echo-a", "echo-b"] {
        replicas.push(
            tokio::process::Command::new(&operator)
                .arg("run")
                .env("KUBECONFIG", &sa_kc)
                .env("STATECRAFT_NAMESPACE", "demo")
                .env("POD_NAME", name)
                .env("STATECRAFT_HEALTH_ADDR", "127.0.0.1:0")
                .env("STATECRAFT_METRICS_ADDR", "127.0.0.1:0")
                .env("STATECRAFT_LOG", "warn")
                .kill_on_drop(true)
                .spawn()?,
        );
    }
    let echo = "apiVersion: test.statecraft.io/v1alpha1\nkind: Echo\nmetadata:\n  name: hello\n  namespace: demo\nspec:\n  message: hello from statecraft\n";
    kubectl(kc, &["apply", "-f", "-"], Some(echo))?;
    kubectl(kc, &["wait", "-n", "demo", "--for=condition=Ready", "echo/hello", "--timeout=60s"], None)?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    show(
        "kubectl get echo hello -o yaml (status)",
        &kubectl(kc, &["get", "-n", "demo", "echo", "hello", "-o", "jsonpath={.status}"], None)?,
    );
    show(
        "kubectl get configmap hello-echo",
        &kubectl(kc, &["get", "-n", "demo", "configmap", "hello-echo", "--show-labels"], None)?,
    );
    show("kubectl get events", &kubectl(kc, &["get", "-n", "demo", "events"], None)?);
    show("kubectl get lease statecraft-echo", &kubectl(kc, &["get", "-n", "demo", "lease", "statecraft-echo"], None)?);
    println!(
        "\nNot there yet: the local cluster with a kubelet, the MySQL, etcd and Kafka operators, and the\n\
         capability report. See README.md (\"Where it stands\") and the open issues."
    );
    drop(replicas);
    Ok(())
}
