//! Real MariaDB servers for integration tests.
//!
//! Each [`MariaDb`] is one `mariadbd` process with its own data directory in its own
//! temporary directory, listening on a free loopback port, started with the settings the
//! operator generates (`build::config::server_settings`) and the operator's init file. Tests
//! therefore exercise the same my.cnf and accounts a pod gets, not a hand-written imitation.
//!
//! The binaries are the host's (`/usr/sbin/mariadbd`, `/usr/bin/mariadb-install-db`,
//! `/usr/bin/mariadb`); override them with `STATECRAFT_MARIADBD`,
//! `STATECRAFT_MARIADB_INSTALL_DB` and `STATECRAFT_MARIADB_CLIENT`.
//!
//! Included by several test files through `mod support;`, so not every file uses every item.
#![allow(dead_code)]

pub mod exporter;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use statecraft_mysql::api::{Flavor, MySQLClusterSpec, SemiSync, ServiceOptions, Storage, UpgradeStrategy};
use statecraft_mysql::build::config::{SERVER_ID_BASE, server_settings};
use statecraft_mysql::flavor::{self, AccountPasswords, OPERATOR_USER, accounts_init_sql};
use statecraft_mysql::validate::validate;

/// How long a server may take to accept connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Lines of the server log quoted in a start error.
const LOG_TAIL_LINES: usize = 40;
/// What mariadbd logs once it accepts connections (after the init file ran).
const READY_MARKER: &str = "ready for connections";
/// How mariadbd logs a failed statement of the init file, without a timestamp:
/// `ERROR: 1064  You have an error…`. It does not stop there: it skips the rest of the file
/// and starts anyway, so the harness treats the line as a start failure.
const INIT_FILE_ERROR_PREFIX: &str = "ERROR: ";

/// Why a test server could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// An I/O operation of the harness failed (temporary directory, files, spawning).
    #[error("{what}: {source}")]
    Io {
        /// What the harness was doing.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// `mariadb-install-db` failed.
    #[error("mariadb-install-db failed ({status}):\n{output}")]
    InstallDb {
        /// Its exit status.
        status: String,
        /// Its combined output (tail).
        output: String,
    },
    /// The server did not start, or started with errors; `log` is its log's tail.
    #[error("mariadbd (ordinal {ordinal}, port {port}) {reason}; last lines of {log_path}:\n{log}")]
    Start {
        /// The server's ordinal.
        ordinal: u32,
        /// Its port.
        port: u16,
        /// What went wrong.
        reason: String,
        /// Where the full log is (removed with the server).
        log_path: String,
        /// The log's last lines.
        log: String,
    },
    /// A statement sent through the local administrator's socket failed.
    #[error("mariadb client on {socket}: {message}")]
    Client {
        /// The socket used.
        socket: String,
        /// The client's stderr.
        message: String,
    },
    /// The operator's settings could not be built.
    #[error("building the test cluster spec: {0}")]
    Spec(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// A binary of the host's MariaDB installation, overridable by an environment variable.
fn binary(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default))
}

/// The server binary.
pub fn mariadbd_binary() -> PathBuf {
    binary("STATECRAFT_MARIADBD", "/usr/sbin/mariadbd")
}

/// The data directory initialiser.
pub fn install_db_binary() -> PathBuf {
    binary("STATECRAFT_MARIADB_INSTALL_DB", "/usr/bin/mariadb-install-db")
}

/// The command-line client.
pub fn client_binary() -> PathBuf {
    binary("STATECRAFT_MARIADB_CLIENT", "/usr/bin/mariadb")
}

/// Fixed passwords of the operator's accounts, with characters that need quoting so the
/// init file's escaping is exercised too.
pub fn passwords() -> AccountPasswords<'static> {
    AccountPasswords {
        operator: "op-pass'1\\x",
        replication: "repl-pass-2",
        root: "root pass \"3\"",
        backup: "backup-pass-4",
        exporter: Some("exporter-pass-5"),
    }
}

/// The MySQLClusterSpec every harness server is configured from: MariaDB 10.11, 1Gi.
pub fn mariadb_spec(replicas: i32) -> MySQLClusterSpec {
    MySQLClusterSpec {
        flavor: Flavor::Mariadb,
        version: "10.11".into(),
        image: None,
        replicas,
        storage: Storage { size: "1Gi".into(), storage_class_name: None, fix_ownership: false },
        resources: None,
        pod_template: Default::default(),
        network_policy: None,
        server_config: BTreeMap::new(),
        semi_sync: SemiSync::default(),
        backup: None,
        service: ServiceOptions::default(),
        paused: false,
        stopped: false,
        upgrade_strategy: UpgradeStrategy::default(),
        auto_heal: Default::default(),
        auto_scaling: None,
        exporter: Default::default(),
        tls: None,
    }
}

/// The `[mysqld]` settings the operator generates for a MariaDB 10.11 cluster of `replicas`.
///
/// # Panics
/// If the operator rejects its own test spec (a bug in the test or in `validate`).
pub fn mariadb_settings(replicas: i32) -> Vec<(String, String)> {
    let valid = validate(&mariadb_spec(replicas)).expect("the harness's MariaDB spec is valid");
    server_settings(&valid)
}

/// Settings the harness decides, because they are per-process on a shared host. `tmpdir`
/// too: servers (and mariadb-install-db's bootstrap) sharing `/tmp` were seen failing on
/// each other's `#sql-temptable-*` files.
const OVERRIDDEN: &[&str] = &["datadir", "socket", "port", "bind_address", "tmpdir"];

/// A free loopback port: bound to port 0 and released. Another process may take it before
/// the server binds it; a start then fails with "Address already in use" in the log.
fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_err("binding 127.0.0.1:0"))?;
    Ok(listener.local_addr().map_err(io_err("reading the bound address"))?.port())
}

/// One running (or killed) mariadbd with its own data directory.
pub struct MariaDb {
    /// The pod ordinal it stands for; server_id is `100 + ordinal`.
    pub ordinal: u32,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    // Declared before `dir` so that the process is gone before its directory is removed.
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for MariaDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MariaDb")
            .field("ordinal", &self.ordinal)
            .field("port", &self.port)
            .field("dir", &self.dir.path())
            .field("pid", &self.child.as_ref().map(Child::id))
            .finish()
    }
}

impl MariaDb {
    /// Initialises a fresh data directory (mariadb-install-db) in its own temporary
    /// directory and starts mariadbd on 127.0.0.1 with a free port, with the operator's
    /// generated `settings` except datadir/socket/port/bind_address/tmpdir (the harness's own),
    /// `--server-id=100+ordinal`, `--report-host=127.0.0.1` and `--init-file` containing
    /// `init_sql`. Waits until it accepts connections (up to [`START_TIMEOUT`]).
    ///
    /// Fails, with the log's last lines, if the server exits, does not become ready in time,
    /// or logs an error from the init file: mariadbd itself only logs such an error and
    /// starts anyway with the rest of the file skipped, which would hide a broken account
    /// setup behind a "running" server.
    pub async fn start(ordinal: u32, settings: &[(String, String)], init_sql: &str) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("statecraft-mariadb-")
            .tempdir()
            .map_err(io_err("creating the server's temporary directory"))?;
        let port = free_port()?;
        let mut server = MariaDb { ordinal, port, child: None, dir };
        server.write_config(settings, init_sql)?;
        server.install_db().await?;
        server.spawn_and_wait().await?;
        Ok(server)
    }

    /// The temporary directory holding everything of this server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir().join("data")
    }

    /// The Unix socket (the local administrator `root@localhost` logs in through it).
    pub fn socket(&self) -> PathBuf {
        self.dir().join("mysqld.sock")
    }

    /// The server's log (stdout and stderr of every start, appended).
    pub fn log_path(&self) -> PathBuf {
        self.dir().join("server.log")
    }

    fn cnf_path(&self) -> PathBuf {
        self.dir().join("my.cnf")
    }

    fn init_file_path(&self) -> PathBuf {
        self.dir().join("init.sql")
    }

    /// server_id, as start.sh derives it from the ordinal.
    pub fn server_id(&self) -> u32 {
        SERVER_ID_BASE + self.ordinal
    }

    /// Writes my.cnf (the operator's settings with the harness's paths and port) and the
    /// init file (mode 0600: it holds passwords).
    fn write_config(&self, settings: &[(String, String)], init_sql: &str) -> Result<(), HarnessError> {
        let data_dir = self.data_dir();
        let socket = self.socket();
        let tmp = self.dir().join("tmp");
        fs::create_dir(&tmp).map_err(io_err("creating the server's tmpdir"))?;
        let ours = [
            ("datadir", data_dir.display().to_string()),
            ("socket", socket.display().to_string()),
            ("tmpdir", tmp.display().to_string()),
            ("port", self.port.to_string()),
            ("bind_address", "127.0.0.1".to_string()),
        ];
        let mut cnf =
            String::from("# Written by the statecraft-mysql test harness from server_settings().\n[mysqld]\n");
        for (key, value) in settings {
            if !OVERRIDDEN.contains(&key.as_str()) {
                cnf.push_str(&format!("{key} = {value}\n"));
            }
        }
        for (key, value) in ours {
            cnf.push_str(&format!("{key} = {value}\n"));
        }
        fs::write(self.cnf_path(), cnf).map_err(io_err("writing my.cnf"))?;

        let path = self.init_file_path();
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(io_err("creating the init file"))?;
        io::Write::write_all(&mut file, init_sql.as_bytes()).map_err(io_err("writing the init file"))?;
        Ok(())
    }

    /// `mariadb-install-db` into the data directory, as root (so `--user=root`), with
    /// socket-authenticated root@localhost and no test database, like the pods'.
    async fn install_db(&self) -> Result<(), HarnessError> {
        let output = tokio::process::Command::new(install_db_binary())
            .arg(format!("--defaults-file={}", self.cnf_path().display()))
            .arg(format!("--datadir={}", self.data_dir().display()))
            .args(["--user=root", "--skip-test-db", "--auth-root-authentication-method=socket"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(io_err(format!("running {}", install_db_binary().display())))?;
        if !output.status.success() {
            let text =
                format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            return Err(HarnessError::InstallDb {
                status: output.status.to_string(),
                output: tail(&text, LOG_TAIL_LINES),
            });
        }
        Ok(())
    }

    /// Spawns mariadbd (its output appended to the log) and waits until it is ready.
    async fn spawn_and_wait(&mut self) -> Result<(), HarnessError> {
        let log_path = self.log_path();
        let log = OpenOptions::new().create(true).append(true).open(&log_path).map_err(io_err("opening the log"))?;
        let log_start = log.metadata().map_err(io_err("reading the log's size"))?.len();
        let log_err = log.try_clone().map_err(io_err("duplicating the log handle"))?;
        let child = Command::new(mariadbd_binary())
            // --defaults-file must come first.
            .arg(format!("--defaults-file={}", self.cnf_path().display()))
            .arg("--user=root")
            .arg(format!("--server-id={}", self.server_id()))
            .arg("--report-host=127.0.0.1")
            .arg(format!("--init-file={}", self.init_file_path().display()))
            .arg(format!("--pid-file={}", self.dir().join("mysqld.pid").display()))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(io_err(format!("starting {}", mariadbd_binary().display())))?;
        self.child = Some(child);

        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.try_wait() {
                return Err(self.start_error(format!("exited during start-up ({status})")));
            }
            let new_log = read_from(&log_path, log_start).map_err(io_err("reading the log"))?;
            if let Some(line) = new_log.lines().find(|l| is_init_file_error(l)) {
                let line = line.to_string();
                self.kill();
                return Err(self.start_error(format!("reported an error from the init file: {line}")));
            }
            if new_log.contains(READY_MARKER) && tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok()
            {
                tracing::debug!(ordinal = self.ordinal, port = self.port, "mariadbd ready");
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(self.start_error(format!("did not accept connections within {START_TIMEOUT:?}")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn start_error(&self, reason: String) -> HarnessError {
        let log = fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("(log unreadable: {e})"));
        HarnessError::Start {
            ordinal: self.ordinal,
            port: self.port,
            reason,
            log_path: self.log_path().display().to_string(),
            log: tail(&log, LOG_TAIL_LINES),
        }
    }

    fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGKILLs the server (a crash: no clean shutdown, InnoDB recovers on restart) and
    /// waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Fails only when it already exited; wait reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes (SIGSTOP, `true`) or thaws (SIGCONT, `false`) the server's process: a frozen
    /// server still completes TCP handshakes (the kernel does) but never answers.
    pub fn freeze(&self, frozen: bool) -> Result<(), HarnessError> {
        let refused =
            |what: String, reason: &str| HarnessError::Io { what, source: io::Error::other(reason.to_string()) };
        let pid = self.child.as_ref().map(Child::id).ok_or_else(|| refused("freezing".into(), "no process"))?;
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .map_err(io_err("running kill"))?;
        if status.success() { Ok(()) } else { Err(refused(format!("kill {signal} {pid}"), &status.to_string())) }
    }

    /// Starts the server again on the same port and data directory (and the same init
    /// file, which runs again, as in a pod restart). Kills it first if it still runs.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.kill();
        self.spawn_and_wait().await
    }

    /// What a re-seed does to a pod: the server stops, its data directory is replaced by a
    /// new, empty one (same port, settings and init file), and it starts again.
    pub async fn wipe(&mut self) -> Result<(), HarnessError> {
        self.kill();
        fs::remove_dir_all(self.data_dir()).map_err(io_err("removing the data directory"))?;
        self.install_db().await?;
        self.spawn_and_wait().await
    }

    /// Whether the process is alive.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Connection options for `user` over TCP to 127.0.0.1:port.
    pub fn opts(&self, user: &str, password: &str) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some(user))
            .pass(Some(password))
            .prefer_socket(false)
            .into()
    }

    /// Runs `sql` as the local administrator (`root@localhost`, authenticated by the Unix
    /// socket because the tests run as root) with the `mariadb` client and returns its
    /// output (tab-separated, no column names). This account can do what the operator's
    /// accounts cannot on a read-only server; tests use it for setup that is not the
    /// subject of the test.
    pub async fn local_admin(&self, sql: &str) -> Result<String, HarnessError> {
        let output = tokio::process::Command::new(client_binary())
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--user=root", "--batch", "--skip-column-names", "--execute", sql])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(io_err(format!("running {}", client_binary().display())))?;
        if !output.status.success() {
            return Err(HarnessError::Client {
                socket: self.socket().display().to_string(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        fs::read_to_string(self.log_path()).map(|l| tail(&l, lines)).unwrap_or_default()
    }
}

impl Drop for MariaDb {
    /// Kills and reaps the process; the temporary directory is removed afterwards (field
    /// drop), so no server outlives its test.
    fn drop(&mut self) {
        self.kill();
    }
}

fn is_init_file_error(line: &str) -> bool {
    line.starts_with(INIT_FILE_ERROR_PREFIX)
}

/// The file's content from byte `offset` on (lossy UTF-8).
fn read_from(path: &Path, offset: u64) -> io::Result<String> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A server of a three-server cluster, as a pod gets it: the operator's settings and init
/// file (its accounts, with [`passwords`]).
pub async fn start_server(ordinal: u32) -> MariaDb {
    let init = accounts_init_sql(flavor::sql(Flavor::Mariadb), &passwords());
    MariaDb::start(ordinal, &mariadb_settings(3), init.expose()).await.expect("start mariadbd")
}

/// A connection to `server` as the operator's account.
pub async fn operator_conn(server: &MariaDb) -> Result<Conn, mysql_async::Error> {
    Conn::new(server.opts(OPERATOR_USER, passwords().operator)).await
}

/// The first column of the first row `sql` returns, as text; empty for no row or NULL.
pub async fn first_value(conn: &mut Conn, sql: &str) -> Result<String, mysql_async::Error> {
    let v: Option<Option<String>> = conn.query_first(sql).await?;
    Ok(v.flatten().unwrap_or_default())
}
