//! The ConfigMap mounted into every server pod: `my.cnf` (GTID replication, lossless
//! semi-sync, user settings), `client.cnf` for the probes, and four POSIX shell scripts:
//! `start.sh` (initialise an empty data directory, derive server_id from the pod ordinal,
//! exec the server), `ready.sh` ("serving in its role"), `alive.sh` (the process answers)
//! and `handover.sh` (the preStop hook: a terminating primary keeps serving until the
//! operator has moved the primary away).

use k8s_openapi::api::core::v1::ConfigMap;

use super::{MYSQL_PORT, Names};
use crate::flavor::{AccountPasswords, FlavorSql, REPLICATION_USER, accounts_init_sql, sql};
use crate::validate::ValidSpec;

/// Where the ConfigMap is mounted.
pub const CONFIG_DIR: &str = "/etc/statecraft";
/// The volume's mount point; the data directory is a subdirectory, so a filesystem's
/// `lost+found` never confuses initialisation.
pub const DATA_MOUNT: &str = "/var/lib/mysql";
/// The data directory.
pub const DATA_DIR: &str = "/var/lib/mysql/data";
/// The directory of the server's Unix socket (an emptyDir: the root filesystem is read-only).
pub const RUN_DIR: &str = "/run/mysqld";
/// The server's Unix socket.
pub const SOCKET: &str = "/run/mysqld/mysqld.sock";
/// The init file start.sh writes for the server (accounts); in the run directory, an
/// emptyDir that never reaches the volume.
pub const INIT_FILE: &str = "/run/mysqld/init.sql";
/// Environment variables with the accounts' passwords (from the Secret).
pub const OPERATOR_PASSWORD_ENV: &str = "OPERATOR_PASSWORD";
/// See [`OPERATOR_PASSWORD_ENV`].
pub const REPLICATION_PASSWORD_ENV: &str = "REPLICATION_PASSWORD";
/// See [`OPERATOR_PASSWORD_ENV`].
pub const ROOT_PASSWORD_ENV: &str = "ROOT_PASSWORD";
/// See [`OPERATOR_PASSWORD_ENV`].
pub const BACKUP_PASSWORD_ENV: &str = "BACKUP_PASSWORD";
/// See [`OPERATOR_PASSWORD_ENV`]; set in the server container and the exporter's, only
/// while the cluster runs the metrics sidecar.
pub const EXPORTER_PASSWORD_ENV: &str = "EXPORTER_PASSWORD";
/// server_id of the pod of ordinal n is `SERVER_ID_BASE + n` (0 is not a valid id).
pub const SERVER_ID_BASE: u32 = 100;
/// A replica lagging more than this many seconds is not ready.
pub const MAX_READY_LAG_SECONDS: u32 = 30;

/// Keys of the ConfigMap.
pub const MY_CNF: &str = "my.cnf";
/// See [`MY_CNF`].
pub const CLIENT_CNF: &str = "client.cnf";
/// See [`MY_CNF`].
pub const START_SH: &str = "start.sh";
/// See [`MY_CNF`].
pub const READY_SH: &str = "ready.sh";
/// See [`MY_CNF`].
pub const ALIVE_SH: &str = "alive.sh";
/// See [`MY_CNF`].
pub const HANDOVER_SH: &str = "handover.sh";
/// Environment variable with the read-write Service's name (for `handover.sh`).
pub const READ_WRITE_SERVICE_ENV: &str = "READ_WRITE_SERVICE";
/// How long `handover.sh` holds a terminating server for the hand-over, at most: a
/// switchover takes well under a second, and the rest of the pod's grace period (120 s) is
/// left for a clean InnoDB shutdown.
pub const HANDOVER_TIMEOUT_SECONDS: u32 = 30;

/// Path of a file of the ConfigMap inside the container.
pub fn config_path(key: &str) -> String {
    format!("{CONFIG_DIR}/{key}")
}

/// Number of replica acknowledgements the primary waits for: n/2 of n servers, so that
/// with the primary a majority has every acknowledged write. The controller sets it when it
/// makes a server the primary (MySQL; MariaDB always waits for one).
pub fn semi_sync_wait_count(replicas: i32) -> u32 {
    (replicas.max(1) / 2) as u32
}

/// The `[mysqld]` settings, in order: the operator's, then the user's.
pub fn server_settings(valid: &ValidSpec) -> Vec<(String, String)> {
    let flavor = sql(valid.spec.flavor);
    let mut out: Vec<(String, String)> = vec![
        ("datadir".into(), DATA_DIR.into()),
        ("socket".into(), SOCKET.into()),
        ("port".into(), MYSQL_PORT.to_string()),
        ("bind_address".into(), "0.0.0.0".into()),
        ("skip_name_resolve".into(), "ON".into()),
        ("host_cache_size".into(), "0".into()),
        // Every server starts refusing writes; the operator makes the primary writable.
        (flavor.read_only_variable().into(), "ON".into()),
    ];
    out.extend(flavor.gtid_settings().into_iter().map(|(k, v)| (k.to_string(), v)));
    // Nothing here depends on the replica count (see FlavorSql::semi_sync_settings), so
    // scaling never changes the file and never restarts a server.
    out.extend(
        flavor
            .semi_sync_settings(valid.spec.semi_sync.enabled, valid.semi_sync_timeout_ms)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    );
    if let Some(tls) = &valid.spec.tls {
        out.extend(super::tls::server_settings(tls));
    }
    // Derived from the container's memory unless the user set them.
    out.extend(
        super::tuning::tuned_settings(valid.spec.resources.as_ref())
            .into_iter()
            .filter(|(k, _)| !valid.server_config.contains_key(k)),
    );
    out.extend(valid.server_config.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// The generated my.cnf.
pub fn my_cnf(valid: &ValidSpec) -> String {
    let mut s = String::from(
        "# Generated by statecraft-mysql; edit spec.serverConfig of the MySQLCluster instead.\n\
         # server_id and report_host are passed on the command line by start.sh.\n[mysqld]\n",
    );
    for (k, v) in server_settings(valid) {
        s.push_str(&format!("{k} = {v}\n"));
    }
    s
}

/// The probes' client options: the local account through the Unix socket.
pub fn client_cnf(flavor: &dyn FlavorSql) -> String {
    format!("[client]\nsocket = {SOCKET}\nuser = {}\nconnect_timeout = 3\n", flavor.local_probe_user())
}

/// The container's command: initialise the data directory when it does not exist (into a
/// temporary directory renamed when complete, so an interrupted initialisation is redone),
/// derive server_id from the pod's ordinal, write the accounts' init file from the
/// passwords in the environment, and exec the server.
pub fn start_sh(flavor: &dyn FlavorSql, exporter: bool) -> String {
    format!(
        r#"#!/bin/sh
# Generated by statecraft-mysql. Runs as uid 999 (mysql).
set -eu
CNF={cnf}
DATADIR={DATA_DIR}
INITDIR="$DATADIR.init"
ordinal="${{POD_NAME##*-}}"
case "$ordinal" in
  ''|*[!0-9]*) echo "start.sh: cannot derive an ordinal from POD_NAME=$POD_NAME" >&2; exit 1 ;;
esac
server_id=$(({SERVER_ID_BASE} + ordinal))
if [ ! -d "$DATADIR" ]; then
  echo "start.sh: initialising an empty data directory"
  rm -rf "$INITDIR"
  mkdir -p "$INITDIR"
  {init}
  mv "$INITDIR" "$DATADIR"
fi
# The accounts, from the Secret's passwords in the environment; never in the binary log.
umask 077
cat > {init_file} <<EOF
{accounts}EOF
exec {server} --defaults-file="$CNF" --server-id="$server_id" --report-host="$POD_NAME.$HEADLESS_SERVICE.$POD_NAMESPACE.svc" --init-file={init_file}
"#,
        cnf = config_path(MY_CNF),
        init = flavor.init_data_dir_command(),
        server = flavor.server_binary(),
        init_file = INIT_FILE,
        accounts = accounts_init_sql(
            flavor,
            &AccountPasswords {
                operator: &format!("${{{OPERATOR_PASSWORD_ENV}}}"),
                replication: &format!("${{{REPLICATION_PASSWORD_ENV}}}"),
                root: &format!("${{{ROOT_PASSWORD_ENV}}}"),
                backup: &format!("${{{BACKUP_PASSWORD_ENV}}}"),
                exporter: exporter.then(|| format!("${{{EXPORTER_PASSWORD_ENV}}}")).as_deref(),
            }
        )
        .expose(),
    )
}

/// Readiness: "serving in its role". A writable server (the primary) is ready; a read-only
/// one only when both replication threads run and its lag is at most
/// [`MAX_READY_LAG_SECONDS`]. A server that replicates from nobody yet is not ready.
pub fn ready_sh(flavor: &dyn FlavorSql) -> String {
    let c = flavor.replica_status_columns();
    format!(
        r#"#!/bin/sh
# Generated by statecraft-mysql: ready means serving in its role.
set -eu
q() {{ {client} --defaults-file={client_cnf} --batch "$@"; }}
ro=$(q --skip-column-names -e "SELECT @@GLOBAL.{read_only}")
[ "$ro" = "0" ] && exit 0
# With the column names: each line of the vertical output is "Name: value".
st=$(q --vertical -e "{show}")
field() {{ printf '%s\n' "$st" | sed -n "s/^ *$1: //p" | head -n 1; }}
[ "$(field {io})" = "Yes" ] || {{ echo "replication receiver not running: $(field {io_err})"; exit 1; }}
[ "$(field {sqlr})" = "Yes" ] || {{ echo "replication applier not running: $(field {sql_err})"; exit 1; }}
lag=$(field {lag})
case "$lag" in ''|NULL|*[!0-9]*) echo "replication lag unknown"; exit 1 ;; esac
[ "$lag" -le {max_lag} ] || {{ echo "replication lag $lag s > {max_lag} s"; exit 1; }}
"#,
        client = flavor.client_binary(),
        client_cnf = config_path(CLIENT_CNF),
        read_only = flavor.read_only_variable(),
        show = flavor.show_replica_status(),
        io = c.io_running,
        io_err = c.last_io_error,
        sqlr = c.sql_running,
        sql_err = c.last_sql_error,
        lag = c.lag_seconds,
        max_lag = MAX_READY_LAG_SECONDS,
    )
}

/// Liveness: the server process answers a ping on its socket.
pub fn alive_sh(flavor: &dyn FlavorSql) -> String {
    format!(
        "#!/bin/sh\n# Generated by statecraft-mysql: alive means the server answers.\nexec {} --defaults-file={} ping\n",
        flavor.admin_binary(),
        config_path(CLIENT_CNF)
    )
}

/// The preStop hook. A pod being deleted or evicted (a node drain) gets SIGTERM only after
/// this returns; without it a primary's server began shutting down while the operator
/// tried to switch over ("Connection refused"), and the cluster failed over instead (4.3 s
/// without writes where a switchover takes 0.5 s). So the server keeps serving, and this
/// waits, polling, until one of:
/// - the read-write Service leads to another server that accepts writes: the operator has
///   switched over (this server is read-only and its clients were moved);
/// - no replica replicates from this server: there is nobody to hand over to (a replica,
///   a single server, a stopping cluster), or nobody left who needs its binary log (the
///   operator ends every replica's stream once it has handed over: this is how the hook
///   learns of it, looked at every 0.1 s, so the server stops moments after the hand-over
///   and the new primary, which takes writes once the old one refuses connections, does
///   not wait for it);
/// - the server does not answer: there is nothing to keep;
/// - [`HANDOVER_TIMEOUT_SECONDS`] passed (the operator is away or no replica is eligible):
///   it exits 1, which the kubelet reports as a `FailedPreStopHook` Event, and the server
///   stops; the operator then fails over as for any lost primary.
///
/// The Service is asked with the replication account (it may read `@@server_id` and
/// nothing more), its password passed in the environment, never on a command line; once a
/// second, since a connection through it can take that long.
pub fn handover_sh(flavor: &dyn FlavorSql) -> String {
    format!(
        r#"#!/bin/sh
# Generated by statecraft-mysql: the preStop hook, see the operator's docs (hand-over).
set -u
q() {{ timeout 3 {client} --defaults-file={client_cnf} --batch --skip-column-names -e "$1" 2>/dev/null; }}
me=$(q "SELECT @@GLOBAL.server_id") || exit 0
deadline=$(($(date +%s) + {timeout}))
looks=0
while [ "$(date +%s)" -lt "$deadline" ]; do
  dumps=$(q "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'") || exit 0
  [ "$dumps" = 0 ] && exit 0
  if [ $((looks % 10)) = 0 ]; then
    rw=$(MYSQL_PWD="${password_env}" timeout 3 {client} --no-defaults --host="${service_env}" --port={port}       --user={user} --connect-timeout=1 --batch --skip-column-names       -e "SELECT @@GLOBAL.server_id, @@GLOBAL.{read_only}" 2>/dev/null) || rw=""
    set -- $rw
    [ "$#" = 2 ] && [ "$1" != "$me" ] && [ "$2" = 0 ] && exit 0
  fi
  looks=$((looks + 1))
  sleep 0.1
done
echo "handover.sh: the primary role was not handed over within {timeout} s; stopping anyway" >&2
exit 1
"#,
        client = flavor.client_binary(),
        client_cnf = config_path(CLIENT_CNF),
        timeout = HANDOVER_TIMEOUT_SECONDS,
        password_env = REPLICATION_PASSWORD_ENV,
        service_env = READ_WRITE_SERVICE_ENV,
        port = MYSQL_PORT,
        user = REPLICATION_USER,
        read_only = flavor.read_only_variable(),
    )
}

/// The ConfigMap.
pub fn config_map(valid: &ValidSpec, names: &Names) -> ConfigMap {
    let flavor = sql(valid.spec.flavor);
    ConfigMap {
        metadata: names.set().meta(names.config_map()),
        data: Some(
            [
                (MY_CNF.to_string(), my_cnf(valid)),
                (CLIENT_CNF.to_string(), client_cnf(flavor)),
                (START_SH.to_string(), start_sh(flavor, valid.exporter_image.is_some())),
                (READY_SH.to_string(), ready_sh(flavor)),
                (ALIVE_SH.to_string(), alive_sh(flavor)),
                (HANDOVER_SH.to_string(), handover_sh(flavor)),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Flavor, MySQLClusterSpec, SemiSync};
    use crate::validate::tests::spec;
    use crate::validate::validate;

    fn settings(s: &MySQLClusterSpec) -> std::collections::BTreeMap<String, String> {
        server_settings(&validate(s).unwrap()).into_iter().collect()
    }

    #[test]
    fn mariadb_config_has_gtid_and_lossless_semi_sync() {
        let m = settings(&spec());
        for (k, v) in [
            ("log_bin", "mysql-bin"),
            ("log_slave_updates", "ON"),
            ("gtid_strict_mode", "ON"),
            ("binlog_format", "ROW"),
            ("read_only", "ON"),
            ("rpl_semi_sync_master_enabled", "OFF"),
            ("rpl_semi_sync_slave_enabled", "ON"),
            ("rpl_semi_sync_master_wait_point", "AFTER_SYNC"),
            ("rpl_semi_sync_master_timeout", "4294967000"),
            ("datadir", DATA_DIR),
            ("skip_slave_start", "ON"),
        ] {
            assert_eq!(m.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert!(!m.contains_key("server_id"), "server_id comes from the pod ordinal");
        assert!(!m.contains_key("gtid_mode"), "gtid_mode is MySQL's");
    }

    #[test]
    fn mysql_config_has_gtid_mode_and_semi_sync_plugins() {
        let m = settings(&MySQLClusterSpec { flavor: Flavor::Mysql, version: "8.4".into(), replicas: 5, ..spec() });
        for (k, v) in [
            ("gtid_mode", "ON"),
            ("enforce_gtid_consistency", "ON"),
            ("log_replica_updates", "ON"),
            ("super_read_only", "ON"),
            ("plugin_load_add", "semisync_source.so;semisync_replica.so"),
            ("loose_rpl_semi_sync_source_wait_point", "AFTER_SYNC"),
            ("loose_rpl_semi_sync_source_timeout", "4294967000"),
        ] {
            assert_eq!(m.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert!(!m.contains_key("gtid_strict_mode"));
    }

    #[test]
    fn scaling_does_not_change_the_config_and_semi_sync_can_be_disabled() {
        let one = my_cnf(&validate(&MySQLClusterSpec { replicas: 1, ..spec() }).unwrap());
        assert_eq!(one, my_cnf(&validate(&MySQLClusterSpec { replicas: 5, ..spec() }).unwrap()));
        let off =
            settings(&MySQLClusterSpec { semi_sync: SemiSync { enabled: false, ..SemiSync::default() }, ..spec() });
        assert_eq!(off["rpl_semi_sync_master_enabled"], "OFF");
        assert_eq!(off["rpl_semi_sync_slave_enabled"], "OFF");
        assert_eq!(semi_sync_wait_count(1), 0);
        assert_eq!(semi_sync_wait_count(3), 1);
        assert_eq!(semi_sync_wait_count(5), 2);
    }

    #[test]
    fn memory_tunes_the_buffer_pool_unless_the_user_sets_it() {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let resources = Some(ResourceRequirements {
            limits: Some([("memory".into(), Quantity("2Gi".into()))].into()),
            ..Default::default()
        });
        let tuned = settings(&MySQLClusterSpec { resources: resources.clone(), ..spec() });
        assert_eq!(tuned["innodb_buffer_pool_size"], (9u64 * 128 * 1024 * 1024).to_string());
        assert!(tuned.contains_key("max_connections"));
        let mine = MySQLClusterSpec {
            resources,
            server_config: [("innodb_buffer_pool_size".into(), "256M".into())].into(),
            ..spec()
        };
        let cnf = my_cnf(&validate(&mine).unwrap());
        assert_eq!(cnf.matches("innodb_buffer_pool_size").count(), 1, "the user's value only: {cnf}");
        assert!(cnf.contains("innodb_buffer_pool_size = 256M"));
        assert!(!settings(&spec()).contains_key("innodb_buffer_pool_size"), "nothing derived without resources");
    }

    #[test]
    fn user_settings_come_last_in_my_cnf() {
        let s = MySQLClusterSpec { server_config: [("max-connections".into(), "500".into())].into(), ..spec() };
        let cnf = my_cnf(&validate(&s).unwrap());
        assert!(cnf.starts_with("# Generated"));
        assert!(cnf.contains("\n[mysqld]\n"));
        assert!(cnf.trim_end().ends_with("max_connections = 500"), "{cnf}");
    }

    #[test]
    fn start_script_initialises_once_and_derives_server_id() {
        let s = start_sh(sql(Flavor::Mariadb), false);
        assert!(s.contains("if [ ! -d \"$DATADIR\" ]"));
        assert!(s.contains("mariadb-install-db --defaults-file=\"$CNF\" --datadir=\"$INITDIR\" --user=mysql"));
        assert!(s.contains("mv \"$INITDIR\" \"$DATADIR\""));
        assert!(s.contains("server_id=$((100 + ordinal))"));
        assert!(s.contains("exec mariadbd --defaults-file=\"$CNF\" --server-id=\"$server_id\""));
        assert!(s.contains("ordinal=\"${POD_NAME##*-}\""));
        assert!(start_sh(sql(Flavor::Mysql), false).contains("exec mysqld "));
    }

    #[test]
    fn readiness_checks_role_threads_and_lag() {
        let r = ready_sh(sql(Flavor::Mariadb));
        assert!(r.contains("SELECT @@GLOBAL.read_only"));
        assert!(r.contains("SHOW SLAVE STATUS"));
        assert!(r.contains("field Slave_IO_Running"));
        assert!(r.contains("field Slave_SQL_Running"));
        assert!(r.contains("field Seconds_Behind_Master"));
        assert!(r.contains("-le 30"));
        let y = ready_sh(sql(Flavor::Mysql));
        assert!(y.contains("@@GLOBAL.super_read_only") && y.contains("Replica_IO_Running"));
        assert!(
            alive_sh(sql(Flavor::Mariadb)).contains("mariadb-admin --defaults-file=/etc/statecraft/client.cnf ping")
        );
        assert!(client_cnf(sql(Flavor::Mariadb)).contains("user = mysql"));
    }

    #[test]
    fn handover_waits_for_another_writable_primary_or_nobody_to_hand_over_to() {
        let h = handover_sh(sql(Flavor::Mariadb));
        assert!(h.contains("COMMAND LIKE 'Binlog Dump%'"), "replicas of this server counted");
        assert!(h.contains("--host=\"$READ_WRITE_SERVICE\"") && h.contains("--user=repl"));
        assert!(h.contains("MYSQL_PWD=\"$REPLICATION_PASSWORD\""), "password from the environment only");
        assert!(!h.contains("--password"), "never a password on a command line");
        assert!(h.contains("@@GLOBAL.read_only"));
        assert!(h.contains("+ 30))") && h.contains("exit 1"), "bounded, and a timeout is reported");
        assert!(handover_sh(sql(Flavor::Mysql)).contains("@@GLOBAL.super_read_only"));
    }

    #[test]
    fn config_map_holds_every_file() {
        let cm = config_map(&validate(&spec()).unwrap(), &Names::new("db", "ns"));
        assert_eq!(cm.metadata.name.as_deref(), Some("db-config"));
        let keys: Vec<_> = cm.data.unwrap().into_keys().collect();
        assert_eq!(keys, [ALIVE_SH, CLIENT_CNF, HANDOVER_SH, MY_CNF, READY_SH, START_SH]);
    }

    /// The scripts are valid POSIX shell (checked with `sh -n` when a shell is present).
    #[test]
    fn scripts_parse() {
        for flavor in [Flavor::Mariadb, Flavor::Mysql] {
            let f = sql(flavor);
            for script in [start_sh(f, false), start_sh(f, true), ready_sh(f), alive_sh(f), handover_sh(f)] {
                let out = std::process::Command::new("sh")
                    .arg("-n")
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .and_then(|mut child| {
                        use std::io::Write;
                        child.stdin.take().unwrap().write_all(script.as_bytes())?;
                        child.wait_with_output()
                    });
                if let Ok(out) = out {
                    assert!(out.status.success(), "{}\n{script}", String::from_utf8_lossy(&out.stderr));
                }
            }
        }
    }

    /// Runs ready.sh against a fake `mariadb` client that answers with canned output, as
    /// the real client prints it (`--vertical`), and returns whether the pod would be ready.
    fn ready_with(read_only: &str, status: &str) -> Option<bool> {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!(
            "statecraft-ready-{}-{}",
            std::process::id(),
            crate::build::content_hash(&format!("{read_only}{status}"))
        ));
        std::fs::create_dir_all(&dir).ok()?;
        let fake = dir.join("mariadb");
        std::fs::write(
            &fake,
            "#!/bin/sh\ncase \"$*\" in *read_only*) echo \"$FAKE_RO\" ;; *) printf '%s\\n' \"$FAKE_STATUS\" ;; esac\n",
        )
        .ok()?;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).ok()?;
        let script = dir.join("ready.sh");
        std::fs::write(&script, ready_sh(sql(Flavor::Mariadb))).ok()?;
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
        let out = std::process::Command::new("sh")
            .arg(&script)
            .env("PATH", path)
            .env("FAKE_RO", read_only)
            .env("FAKE_STATUS", status)
            .output()
            .ok()?;
        let _ = std::fs::remove_dir_all(&dir);
        Some(out.status.success())
    }

    fn slave_status(io: &str, sql: &str, lag: &str) -> String {
        format!(
            "*************************** 1. row ***************************\n\
             \x20               Slave_IO_State: Waiting for master to send event\n\
             \x20                  Master_Host: db-0.db-hl.ns.svc\n\
             \x20             Slave_IO_Running: {io}\n\
             \x20            Slave_SQL_Running: {sql}\n\
             \x20                Last_IO_Error: \n\
             \x20               Last_SQL_Error: \n\
             \x20        Seconds_Behind_Master: {lag}\n\
             \x20                  Gtid_IO_Pos: 0-100-42"
        )
    }

    #[test]
    fn readiness_script_decides_serving_in_role() {
        let Some(primary) = ready_with("0", "") else { return }; // no shell here
        assert!(primary, "a writable server is the primary: ready");
        assert_eq!(ready_with("1", &slave_status("Yes", "Yes", "0")), Some(true));
        assert_eq!(ready_with("1", &slave_status("Yes", "Yes", "30")), Some(true));
        assert_eq!(ready_with("1", &slave_status("Yes", "Yes", "31")), Some(false), "lagging");
        assert_eq!(ready_with("1", &slave_status("No", "Yes", "0")), Some(false), "receiver stopped");
        assert_eq!(ready_with("1", &slave_status("Yes", "No", "0")), Some(false), "applier stopped");
        assert_eq!(ready_with("1", &slave_status("Connecting", "Yes", "NULL")), Some(false));
        assert_eq!(ready_with("1", ""), Some(false), "read-only and replicating from nobody");
    }

    #[test]
    fn start_script_initialises_only_an_absent_data_dir_and_passes_the_server_id() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("statecraft-start-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let fake = |name: &str, body: &str| {
            let p = dir.join("bin").join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let log = dir.join("log");
        // The fake installer writes into the directory it was given and records the call.
        fake(
            "mariadb-install-db",
            &format!(
                "for a in \"$@\"; do case \"$a\" in --datadir=*) d=\"${{a#--datadir=}}\" ;; esac; done\n\
                 touch \"$d/ibdata1\"; echo install >> {log}",
                log = log.display()
            ),
        );
        fake("mariadbd", &format!("echo \"server $*\" >> {}", log.display()));
        let data = dir.join("data");
        let init_file = dir.join("init.sql");
        let script = start_sh(sql(Flavor::Mariadb), true)
            .replace(DATA_DIR, &data.display().to_string())
            .replace(INIT_FILE, &init_file.display().to_string());
        let run = || {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(&script)
                .env("PATH", format!("{}:{}", dir.join("bin").display(), std::env::var("PATH").unwrap_or_default()))
                .env("POD_NAME", "db-2")
                .env("POD_NAMESPACE", "ns")
                .env("HEADLESS_SERVICE", "db-hl")
                .env("OPERATOR_PASSWORD", "opPW1")
                .env("REPLICATION_PASSWORD", "replPW2")
                .env("ROOT_PASSWORD", "rootPW3")
                .env("BACKUP_PASSWORD", "backupPW4")
                .env("EXPORTER_PASSWORD", "exporterPW5")
                .output()
        };
        let Ok(first) = run() else { return }; // no shell here
        assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
        assert!(run().unwrap().status.success());
        let log = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines[0], "install");
        assert_eq!(lines.iter().filter(|l| **l == "install").count(), 1, "initialised once: {log}");
        assert!(data.join("ibdata1").exists(), "the initialised directory was moved into place");
        assert!(!dir.join("data.init").exists());
        for server in &lines[1..] {
            assert_eq!(
                *server,
                format!(
                    "server --defaults-file=/etc/statecraft/my.cnf --server-id=102 --report-host=db-2.db-hl.ns.svc \
                     --init-file={}",
                    init_file.display()
                )
            );
        }
        // The init file has the passwords from the environment, and only its owner reads it.
        let init = std::fs::read_to_string(&init_file).unwrap();
        let expected = crate::flavor::accounts_init_sql(
            sql(Flavor::Mariadb),
            &AccountPasswords {
                operator: "opPW1",
                replication: "replPW2",
                root: "rootPW3",
                backup: "backupPW4",
                exporter: Some("exporterPW5"),
            },
        );
        assert_eq!(init, expected.expose());
        assert_eq!(std::fs::metadata(&init_file).unwrap().permissions().mode() & 0o077, 0);
        let bad = std::process::Command::new("sh").arg("-c").arg(&script).env("POD_NAME", "nope").output().unwrap();
        assert!(!bad.status.success(), "a pod name without an ordinal is refused");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
