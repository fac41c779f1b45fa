//! The start script of every node (`start.sh` beside this file, POSIX sh): the container's
//! command, from the ConfigMap. Its first lines give the operator's constants and the
//! image's directories, the same for every cluster (the directories can be overridden from
//! the environment, which only the script's tests do); what differs between pools, the
//! client listeners' ports, comes from the container's environment ([`INTERNAL_PORT_ENV`],
//! [`EXTERNAL_PORT_ENV`]), so that a controller's pod does not change with them.

use crate::api::cluster::CONTROLLER_PORT;
use crate::nodes::BROKER_ID_BASE;

use super::{CONFIG_DIR, DATA_DIR, KAFKA_BIN, RUN_DIR};

/// How often a broker waiting for its external address looks again, in seconds.
const POLL_SECONDS: u32 = 5;

const BODY: &str = include_str!("start.sh");

/// The environment variable with the internal listener's port (brokers).
pub const INTERNAL_PORT_ENV: &str = "INTERNAL_PORT";
/// The environment variable with the external listener's port (brokers, when there is one).
pub const EXTERNAL_PORT_ENV: &str = "EXTERNAL_PORT";

/// The script.
pub fn start_script() -> String {
    format!(
        "#!/bin/sh\n\
         set -eu\n\
         CONTROLLER_PORT={CONTROLLER_PORT}\n\
         BROKER_ID_BASE={BROKER_ID_BASE}\n\
         : \"${{KAFKA_CONFIG_DIR:={CONFIG_DIR}}}\"\n\
         : \"${{KAFKA_RUN_DIR:={RUN_DIR}}}\"\n\
         : \"${{KAFKA_DATA_DIR:={DATA_DIR}}}\"\n\
         : \"${{KAFKA_BIN:={KAFKA_BIN}}}\"\n\
         : \"${{KAFKA_POLL_SECONDS:={POLL_SECONDS}}}\"\n\
         \n{BODY}"
    )
}

/// The script run for real under `sh`, with stand-ins for Kafka's `kafka-storage.sh` and
/// `kafka-server-start.sh` that record their arguments (and the properties Kafka would
/// read): a test of this script, not of Kafka.
#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;
    use std::process::{Command, Output};
    use std::sync::atomic::{AtomicU32, Ordering};

    use crate::api::KafkaClusterSpec;
    use crate::build::tests::{UID, build_with, combined, inputs, separate};
    use crate::build::{Inputs, ids};

    const FAKE_STORAGE: &str =
        "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done >>\"$FAKE_LOG\"\necho >>\"$FAKE_LOG\"\n";
    const FAKE_START: &str =
        "#!/bin/sh\nprintf 'start [%s]\\n' \"$*\" >>\"$FAKE_LOG\"\ncat \"$1\" >\"$FAKE_LOG.properties\"\n";

    /// A pod's file system: the ConfigMap's files, the run and data directories, the fakes.
    struct Pod {
        root: PathBuf,
    }

    impl Pod {
        fn new(spec: KafkaClusterSpec, inputs: &Inputs) -> Pod {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let root = std::env::temp_dir().join(format!("statecraft-kafka-start-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            for dir in ["config", "run", "data", "bin"] {
                fs::create_dir_all(root.join(dir)).unwrap();
            }
            let objects = build_with(spec, inputs);
            for (key, value) in objects.config_map.data.unwrap() {
                fs::write(root.join("config").join(key), value).unwrap();
            }
            for (name, text) in [("kafka-storage.sh", FAKE_STORAGE), ("kafka-server-start.sh", FAKE_START)] {
                let path = root.join("bin").join(name);
                fs::write(&path, text).unwrap();
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
            }
            Pod { root }
        }

        fn run(&self, role: &str, pod: &str, env: &[(&str, &str)]) -> Output {
            let mut command = Command::new("sh");
            command
                .arg(self.root.join("config/start.sh"))
                .arg(role)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("POD_NAME", pod)
                .env("POD_NAMESPACE", "prod")
                .env("KAFKA_CONFIG_DIR", self.root.join("config"))
                .env("KAFKA_RUN_DIR", self.root.join("run"))
                .env("KAFKA_DATA_DIR", self.root.join("data"))
                .env("KAFKA_BIN", self.root.join("bin"))
                .env("KAFKA_POLL_SECONDS", "1")
                .env("FAKE_LOG", self.root.join("log"));
            for (k, v) in env {
                command.env(k, v);
            }
            command.output().unwrap()
        }

        /// What the fakes were called with, one line per call.
        fn calls(&self) -> Vec<String> {
            fs::read_to_string(self.root.join("log")).unwrap_or_default().lines().map(str::to_string).collect()
        }

        /// The properties Kafka was started with.
        fn started_with(&self) -> BTreeMap<String, String> {
            let text = fs::read_to_string(self.root.join("log.properties")).unwrap();
            text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
        }

        fn formatted(&self) {
            fs::write(self.root.join("data/meta.properties"), "version=1\n").unwrap();
        }
    }

    impl Drop for Pod {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    fn stderr(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn storage_call(args: &[&str]) -> String {
        args.iter().map(|a| format!("[{a}]")).collect()
    }

    #[test]
    fn a_new_controller_formats_with_every_initial_voter() {
        let pod = Pod::new(separate(), &inputs());
        let out = pod.run("controller", "events-controller-2", &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let props = pod.root.join("run/server.properties").display().to_string();
        let voters: Vec<String> = (0..3)
            .map(|k| format!("{k}@events-controller-{k}.events-controller.prod.svc:9093:{}", ids::directory_id(UID, k)))
            .collect();
        let cluster_id = format!("--cluster-id={}", ids::cluster_id(UID).unwrap());
        let voters = voters.join(",");
        let format = storage_call(&["format", "--config", &props, &cluster_id, "--initial-controllers", &voters]);
        assert_eq!(pod.calls(), [format, format!("start [{props}]")]);
        let started = pod.started_with();
        assert_eq!(started["node.id"], "2");
        assert_eq!(started["advertised.listeners"], "CONTROLLER://events-controller-2.events-controller.prod.svc:9093");
        assert_eq!(started["process.roles"], "controller");
        assert!(stderr(&out).contains("formatting a new cluster"), "{}", stderr(&out));
    }

    #[test]
    fn a_controller_that_lost_its_volume_in_a_bootstrapped_cluster_is_no_initial_voter() {
        let pod = Pod::new(separate(), &Inputs { bootstrapped: true, ..inputs() });
        let out = pod.run("controller", "events-controller-1", &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let calls = pod.calls();
        assert!(calls[0].ends_with("[--no-initial-controllers]"), "{calls:?}");
        assert!(!calls[0].contains("initial-controllers]["), "{calls:?}");
        assert!(stderr(&out).contains("its volume was lost"), "{}", stderr(&out));
        assert_eq!(pod.started_with()["node.id"], "1");
    }

    #[test]
    fn a_broker_formats_with_the_cluster_id_alone() {
        // A cluster id may start with '-': passed as --cluster-id=..., never taken for an option.
        let pod = Pod::new(separate(), &Inputs { cluster_id: "-AAAAAAAAAAAAAAAAAAAAA".into(), ..inputs() });
        let out = pod.run("broker", "events-broker-4", &[("INTERNAL_PORT", "9092")]);
        assert!(out.status.success(), "{}", stderr(&out));
        let props = pod.root.join("run/server.properties").display().to_string();
        let format = storage_call(&["format", "--config", &props, "--cluster-id=-AAAAAAAAAAAAAAAAAAAAA"]);
        assert_eq!(pod.calls()[0], format);
        let started = pod.started_with();
        assert_eq!(started["node.id"], "104", "brokers count from 100");
        assert_eq!(started["advertised.listeners"], "INTERNAL://events-broker-4.events-broker.prod.svc:9092");
        assert_eq!(started["process.roles"], "broker");
    }

    #[test]
    fn formatted_storage_is_never_formatted_again() {
        for bootstrapped in [false, true] {
            let pod = Pod::new(separate(), &Inputs { bootstrapped, ..inputs() });
            pod.formatted();
            for (role, name) in [("controller", "events-controller-0"), ("broker", "events-broker-0")] {
                let out = pod.run(role, name, &[("INTERNAL_PORT", "9092")]);
                assert!(out.status.success(), "{}", stderr(&out));
                assert!(stderr(&out).contains("formatted already"), "{}", stderr(&out));
            }
            assert!(pod.calls().iter().all(|c| c.starts_with("start ")), "{:?}", pod.calls());
        }
    }

    #[test]
    fn combined_nodes_advertise_both_listeners_and_the_external_address() {
        let mut spec = combined(3);
        spec.listeners.external = Some(serde_json::from_value(serde_json::json!({"type": "NodePort"})).unwrap());
        let mut with = inputs();
        with.external_addresses = BTreeMap::from([(0, ":31000".into()), (1, "kafka-1.example.com:31001".into())]);
        let pod = Pod::new(spec, &with);
        let env = [("INTERNAL_PORT", "9092"), ("EXTERNAL_PORT", "9094"), ("HOST_IP", "fd00::5")];
        let out = pod.run("combined", "events-combined-0", &env);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(pod.calls()[0].contains("[--initial-controllers]"));
        let started = pod.started_with();
        assert_eq!(started["node.id"], "0");
        assert_eq!(
            started["advertised.listeners"],
            "INTERNAL://events-combined-0.events-combined.prod.svc:9092,\
             CONTROLLER://events-combined-0.events-combined.prod.svc:9093,EXTERNAL://[fd00::5]:31000"
        );
        assert_eq!(started["process.roles"], "broker,controller");
        let out = pod.run("combined", "events-combined-1", &env);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(pod.started_with()["advertised.listeners"].ends_with(",EXTERNAL://kafka-1.example.com:31001"));
    }

    #[test]
    fn a_broker_waits_for_its_external_address() {
        let mut spec = separate();
        spec.listeners.external = Some(serde_json::from_value(serde_json::json!({"type": "LoadBalancer"})).unwrap());
        let pod = Pod::new(spec, &inputs());
        let config = pod.root.join("config");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            fs::write(config.join("external-2"), "203.0.113.9:9094").unwrap();
        });
        let out = pod.run("broker", "events-broker-2", &[("INTERNAL_PORT", "9092"), ("EXTERNAL_PORT", "9094")]);
        writer.join().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).contains("waiting for its external address"), "{}", stderr(&out));
        assert!(pod.started_with()["advertised.listeners"].ends_with(",EXTERNAL://203.0.113.9:9094"));
    }

    #[test]
    fn a_wrong_role_or_pod_name_stops_before_kafka() {
        let pod = Pod::new(separate(), &inputs());
        for (role, name) in [("leader", "events-controller-0"), ("controller", "events-controller"), ("broker", "x-1")]
        {
            let out = pod.run(role, name, &[]);
            assert!(!out.status.success(), "{role} {name}");
            assert!(
                stderr(&out).starts_with("statecraft-kafka: ") || stderr(&out).contains("INTERNAL_PORT"),
                "{}",
                stderr(&out)
            );
        }
        assert!(pod.calls().is_empty(), "{:?}", pod.calls());
    }
}
