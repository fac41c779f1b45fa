//! The dump and restore command lines, per flavor. Pure: the processes are started by
//! [`super::backup_to_s3`] and [`super::restore_from_s3`].

use std::fmt;

use chrono::{DateTime, Utc};
use tokio::process::Command;

use super::BackupError;
use crate::api::Flavor;

/// Environment variable the clients read the password from. A `--password=` argument would
/// be readable by every user of the node in `/proc/<pid>/cmdline` (and `ps`); a process's
/// environment only by its own user and root.
pub const PASSWORD_ENV: &str = "MYSQL_PWD";

/// The clients' largest statement. mariadb-dump writes one row as one INSERT at least, so a
/// row with a large BLOB makes a statement that large, and the restore client's default
/// (16 MiB) would refuse rows the server accepted. The servers' own `max_allowed_packet`
/// still bounds what they accept.
pub const MAX_ALLOWED_PACKET: &str = "1G";

/// The system schema, left out of dumps. Why: see [`dump_command`].
pub const SYSTEM_SCHEMA: &str = "mysql";

/// Where and as whom a client connects. `Debug` redacts the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientConnection {
    /// Host name or address of the server.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Account name.
    pub user: String,
    password: String,
    /// The file with the authority the server's certificate is checked against, for its
    /// host name; `None`: plaintext.
    pub ca_file: Option<String>,
}

impl ClientConnection {
    /// A TCP connection to `host:port` as `user`.
    pub fn new(host: impl Into<String>, port: u16, user: impl Into<String>, password: impl Into<String>) -> Self {
        ClientConnection { host: host.into(), port, user: user.into(), password: password.into(), ca_file: None }
    }

    /// This connection over TLS, checking the server's certificate for its host name against
    /// the authority in `ca_file` (none: plaintext).
    pub fn with_ca_file(self, ca_file: Option<String>) -> Self {
        ClientConnection { ca_file, ..self }
    }

    /// How the operator's own client code connects over TLS, if it does.
    pub(crate) fn tls(&self) -> Option<crate::clustering::dataplane::ClientTls> {
        self.ca_file.as_deref().map(crate::clustering::dataplane::ClientTls::from_file)
    }

    /// The password, for a connection that is not a client process.
    pub(crate) fn password(&self) -> &str {
        &self.password
    }

    /// The flags every client gets: no option files (a node's or image's my.cnf must not
    /// change what is dumped or where it goes; `--no-defaults` must come first), TCP even for
    /// `localhost` (which would otherwise mean the Unix socket), and utf8mb4 so that no
    /// character is lost between server, client and file.
    fn flags(&self) -> Vec<String> {
        let mut flags = self.connection_flags();
        flags.extend(["--default-character-set=utf8mb4".into(), format!("--max-allowed-packet={MAX_ALLOWED_PACKET}")]);
        flags
    }

    /// The part of [`Self::flags`] every client program takes, `mariadb-binlog` included
    /// (it has no character set or packet size options).
    fn connection_flags(&self) -> Vec<String> {
        let mut flags = vec![
            "--no-defaults".into(),
            format!("--host={}", self.host),
            format!("--port={}", self.port),
            "--protocol=TCP".into(),
            format!("--user={}", self.user),
        ];
        if let Some(ca) = &self.ca_file {
            flags.extend(["--ssl".into(), format!("--ssl-ca={ca}"), "--ssl-verify-server-cert".into()]);
        }
        flags
    }
}

impl fmt::Debug for ClientConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConnection")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// A client program with its arguments and the password it gets through [`PASSWORD_ENV`].
/// `Debug` and `Display` show the command line without the password, so it can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCommand {
    program: String,
    args: Vec<String>,
    password: String,
    env: Vec<(String, String)>,
}

impl ClientCommand {
    /// Any command; the password goes to [`PASSWORD_ENV`]. [`dump_command`] and
    /// [`restore_command`] build the real ones.
    pub fn new(program: impl Into<String>, args: Vec<String>, password: impl Into<String>) -> Self {
        ClientCommand { program: program.into(), args, password: password.into(), env: Vec::new() }
    }

    /// The same command with one more environment variable (no secret: it is shown).
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The same command with another program (an absolute path, or another build).
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The program.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The arguments (no secret among them).
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The process to spawn. Its environment is only `PATH` and the password: the operator's
    /// or Job's own environment (S3 credentials, tokens) is none of the client's business.
    /// Killed if the handle is dropped, so a cancelled backup or restore leaves no process.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).env_clear().env(PASSWORD_ENV, &self.password).kill_on_drop(true);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd
    }
}

impl fmt::Debug for ClientCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &format_args!("{PASSWORD_ENV}=<redacted> {:?}", self.env))
            .finish()
    }
}

impl fmt::Display for ClientCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.program)?;
        for arg in &self.args {
            write!(f, " {arg}")?;
        }
        Ok(())
    }
}

fn unsupported(flavor: Flavor) -> BackupError {
    BackupError::UnsupportedFlavor {
        flavor,
        reason: "mysqldump writes its GTID set differently (SET @@GLOBAL.GTID_PURGED, and SQL_LOG_BIN=0 around \
                 the whole dump with --set-gtid-purged=ON, which would keep a restore from replicating); it needs \
                 its own flags and parser, tested against a real MySQL",
    }
}

/// The logical dump of a whole server to stdout.
///
/// MariaDB: `mariadb-dump` with
/// - `--single-transaction`: one consistent InnoDB snapshot without locking writers;
/// - `--master-data=2 --gtid`: the snapshot's binary log coordinates and GTID position as
///   comments (`2`: commented, so a restore does not execute `CHANGE MASTER`). MariaDB takes
///   them from the same snapshot (`binlog_snapshot_file`/`_position`), without a global read
///   lock. The GTID line comes at the end of the dump, not in its header (see
///   [`super::DumpScanner`]);
/// - `--all-databases --routines --events --triggers`: every user schema with its stored
///   programs; `--hex-blob` so binary columns survive any character-set handling;
/// - `--quick --comments`: rows streamed, not buffered per table; the comments carry the
///   position and the completion line the backup checks.
///
/// The `mysql` system schema is left out (`--ignore-database=mysql`):
/// - it holds the operator's own accounts (operator, replication, root) with the *source's*
///   password hashes; restored, they would replace the target cluster's accounts, locking
///   the operator out of it until the init file ran again at a restart;
/// - `mysql.gtid_slave_pos` would give the target the source's replication position;
/// - its tables are Aria, outside the InnoDB snapshot, and some (help, statistics) are
///   specific to the server version, which breaks a restore into a newer series;
/// - the portable alternative, `--system=users`, cannot be restored through a network
///   account: it grants `PROXY ON ''@'%'` to root@localhost, which only root@localhost may.
///
/// The accounts the operator manages are recreated on every start by its init file; the
/// others (declared with MySQLUser or made by hand) follow the dump in the backup's
/// accounts section ([`crate::accounts::server::Session::accounts_sql`]).
pub fn dump_command(flavor: Flavor, conn: &ClientConnection) -> Result<ClientCommand, BackupError> {
    match flavor {
        Flavor::Mariadb => {
            let mut args = conn.flags();
            args.extend(
                [
                    "--single-transaction",
                    "--gtid",
                    "--master-data=2",
                    "--all-databases",
                    "--routines",
                    "--events",
                    "--triggers",
                    "--hex-blob",
                    "--quick",
                    "--comments",
                ]
                .map(String::from),
            );
            args.push(format!("--ignore-database={SYSTEM_SCHEMA}"));
            Ok(ClientCommand::new("mariadb-dump", args, conn.password.clone()))
        }
        Flavor::Mysql => Err(unsupported(flavor)),
    }
}

/// The client that executes a dump read from stdin. It stops at the first failing statement
/// (no `--force`: a partial restore must fail, not look successful). `--binary-mode` passes
/// the input through unchanged (no `\r\n` translation, NUL allowed) while `DELIMITER`, which
/// the dump uses around stored programs, still works. The restore is written to the target's
/// binary log like any write, so its replicas receive it.
pub fn restore_command(flavor: Flavor, conn: &ClientConnection) -> Result<ClientCommand, BackupError> {
    match flavor {
        Flavor::Mariadb => {
            let mut args = conn.flags();
            args.extend(["--batch", "--binary-mode"].map(String::from));
            Ok(ClientCommand::new("mariadb", args, conn.password.clone()))
        }
        Flavor::Mysql => Err(unsupported(flavor)),
    }
}

/// Copies one binary log file, as it is, from a server to `<dir>/<file>`: the client asks
/// the server for it like a replica would (`--read-from-remote-server`, which needs the
/// REPLICATION SLAVE privilege) and stops at the file's current end (no `--to-last-log`,
/// no `--stop-never`), so the active file is copied up to its last complete event.
pub fn binlog_fetch_command(
    flavor: Flavor,
    conn: &ClientConnection,
    dir: &str,
    file: &str,
) -> Result<ClientCommand, BackupError> {
    match flavor {
        Flavor::Mariadb => {
            let mut args = conn.connection_flags();
            args.extend([
                "--read-from-remote-server".into(),
                "--raw".into(),
                format!("--result-file={}/", dir.trim_end_matches('/')),
                file.into(),
            ]);
            Ok(ClientCommand::new("mariadb-binlog", args, conn.password.clone()))
        }
        Flavor::Mysql => Err(unsupported(flavor)),
    }
}

/// Turns archived binary log `files` (local paths, in order) into SQL on stdout: the
/// transactions after GTID position `start` (a restored backup's position; empty: all) and before
/// `stop` (`--stop-datetime` excludes events at or after it). The time is given in UTC and
/// the client runs with `TZ=UTC`, because it reads the argument in its local time zone.
pub fn binlog_replay_command(
    flavor: Flavor,
    start: &str,
    stop: DateTime<Utc>,
    files: &[String],
) -> Result<ClientCommand, BackupError> {
    match flavor {
        Flavor::Mariadb => {
            let mut args = vec!["--no-defaults".to_string()];
            // An empty position (a dump of a server that had written nothing): from the start.
            if !start.is_empty() {
                args.push(format!("--start-position={start}"));
            }
            args.push(format!("--stop-datetime={}", stop.format("%Y-%m-%d %H:%M:%S")));
            args.extend(files.iter().cloned());
            Ok(ClientCommand::new("mariadb-binlog", args, "").with_env("TZ", "UTC"))
        }
        Flavor::Mysql => Err(unsupported(flavor)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> ClientConnection {
        ClientConnection::new("db-1.db-hl.ns.svc", 3306, "statecraft", "s3cr'et")
    }

    #[test]
    fn mariadb_dump_is_consistent_streams_and_records_the_position() {
        let cmd = dump_command(Flavor::Mariadb, &conn()).unwrap();
        assert_eq!(cmd.program(), "mariadb-dump");
        assert_eq!(cmd.args()[0], "--no-defaults", "must be the first option");
        for flag in [
            "--host=db-1.db-hl.ns.svc",
            "--port=3306",
            "--protocol=TCP",
            "--user=statecraft",
            "--single-transaction",
            "--gtid",
            "--master-data=2",
            "--all-databases",
            "--routines",
            "--events",
            "--triggers",
            "--hex-blob",
            "--quick",
            "--ignore-database=mysql",
            "--default-character-set=utf8mb4",
        ] {
            assert!(cmd.args().iter().any(|a| a == flag), "{flag} missing from {cmd}");
        }
        assert!(!cmd.args().iter().any(|a| a.contains("--lock-all-tables") || a.contains("--force")));
    }

    #[test]
    fn mariadb_restore_reads_stdin_and_stops_at_the_first_error() {
        let cmd = restore_command(Flavor::Mariadb, &conn()).unwrap();
        assert_eq!(cmd.program(), "mariadb");
        assert_eq!(cmd.args()[0], "--no-defaults");
        assert!(cmd.args().iter().any(|a| a == "--binary-mode"));
        assert!(cmd.args().iter().any(|a| a == "--max-allowed-packet=1G"));
        assert!(!cmd.args().iter().any(|a| a == "--force" || a.starts_with("--execute")));
    }

    #[test]
    fn the_password_is_never_on_the_command_line_nor_printed() {
        for cmd in [dump_command(Flavor::Mariadb, &conn()).unwrap(), restore_command(Flavor::Mariadb, &conn()).unwrap()]
        {
            assert!(!cmd.args().iter().any(|a| a.contains("s3cr") || a.starts_with("--password")), "{cmd}");
            assert!(!format!("{cmd} {cmd:?} {:?}", conn()).contains("s3cr"));
            let spawned = cmd.command();
            let env: Vec<_> = spawned.as_std().get_envs().collect();
            assert!(env.iter().any(|(k, v)| *k == PASSWORD_ENV && v.and_then(|v| v.to_str()) == Some("s3cr'et")));
        }
    }

    #[test]
    fn mysql_is_refused_with_a_reason() {
        let err = dump_command(Flavor::Mysql, &conn()).unwrap_err();
        assert!(err.to_string().contains("GTID_PURGED"), "{err}");
        assert!(restore_command(Flavor::Mysql, &conn()).is_err());
    }

    #[test]
    fn with_program_keeps_the_arguments() {
        let cmd = dump_command(Flavor::Mariadb, &conn()).unwrap();
        let other = cmd.clone().with_program("/usr/bin/mariadb-dump");
        assert_eq!(other.program(), "/usr/bin/mariadb-dump");
        assert_eq!(other.args(), cmd.args());
    }

    #[test]
    fn binlogs_are_fetched_raw_like_a_replica_and_replayed_in_utc() {
        let fetch = binlog_fetch_command(Flavor::Mariadb, &conn(), "/tmp/binlogs/", "mysql-bin.000007").unwrap();
        assert_eq!(fetch.program(), "mariadb-binlog");
        assert_eq!(fetch.args()[0], "--no-defaults");
        for flag in ["--read-from-remote-server", "--raw", "--result-file=/tmp/binlogs/", "--user=statecraft"] {
            assert!(fetch.args().iter().any(|a| a == flag), "{flag} in {fetch}");
        }
        assert_eq!(fetch.args().last().map(String::as_str), Some("mysql-bin.000007"));
        assert!(!fetch.to_string().contains("s3cr'et"), "no password on the command line");

        let stop = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 30, 6, 1, 2).unwrap();
        let files = vec!["/tmp/b/mysql-bin.000001".to_string(), "/tmp/b/mysql-bin.000002".to_string()];
        let replay = binlog_replay_command(Flavor::Mariadb, "0-101-42", stop, &files).unwrap();
        assert_eq!(
            replay.args(),
            ["--no-defaults", "--start-position=0-101-42", "--stop-datetime=2026-11-30 06:01:02", &files[0], &files[1]]
        );
        let cmd = replay.command();
        assert!(cmd.as_std().get_envs().any(|(k, v)| k == "TZ" && v.and_then(|v| v.to_str()) == Some("UTC")));
        let from_start = binlog_replay_command(Flavor::Mariadb, "", stop, &files).unwrap();
        assert!(!from_start.args().iter().any(|a| a.starts_with("--start-position")), "{from_start}");
        assert!(binlog_replay_command(Flavor::Mysql, "x", stop, &files).is_err());
    }
}
