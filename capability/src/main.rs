//! `statecraft-capability`: the capability report of Statecraft's operators (`report`), the
//! assessment of any operator's manifests or OLM bundle (`assess`), OLM bundles of
//! Statecraft's operators declaring the level their report earned (`bundle`), and the model
//! itself (`criteria`). See `capability/README.md`.
//!
//! Exit status: 0 on success; 1 when an input is missing or malformed (the message names
//! the file and line, and no report is printed); 2 for a bad command line; 3 when
//! `--require-level N` is given and an operator is below N; 4 when `assess` found errors in
//! the bundle (the report is printed and lists them).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use statecraft_capability::render::{self, Format};
use statecraft_capability::report::{self, AssessOptions, Report, WorkspaceOptions};
use statecraft_capability::{Error, Result};

#[derive(Debug, Parser)]
#[command(version, about = "Scores operators against the five-level Operator Capability model from evidence")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Score Statecraft's operators from their claims, static checks of what they ship, and
    /// the e2e evidence in results/evidence.
    Report {
        /// The workspace root. Default: the current directory if it is one, else the
        /// workspace this binary was built from.
        #[arg(long)]
        root: Option<PathBuf>,
        /// The evidence directory. Default: <root>/results/evidence (absent: no evidence).
        #[arg(long)]
        evidence: Option<PathBuf>,
        /// Only this operator (repeatable): mysql, etcd, kafka.
        #[arg(long = "operator")]
        operators: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Run the static checks on any operator's manifests or OLM bundle and compare what
    /// they evidence with the level its ClusterServiceVersion declares.
    Assess {
        /// Directory of manifests or an OLM bundle (manifests/ and metadata/).
        #[arg(long)]
        manifests: PathBuf,
        /// Directory of objects the operator created for a sample resource (e.g. `kubectl
        /// get statefulset,pdb -o yaml` of a test install), for the operand checks.
        #[arg(long)]
        operand: Option<PathBuf>,
        /// A checkout of the operator's repository, where runbook links must resolve.
        #[arg(long)]
        runbooks: Option<PathBuf>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Write an OLM bundle (registry+v1) of one of Statecraft's operators whose
    /// `capabilities` annotation is the level the report earned from the evidence (none when
    /// it earned none).
    Bundle {
        /// The operator: mysql, etcd, kafka.
        #[arg(long)]
        operator: String,
        /// The bundle directory (manifests/ and metadata/), replaced as a whole.
        #[arg(long)]
        output: PathBuf,
        /// The evidence directory. Default: <root>/results/evidence (absent: no evidence).
        #[arg(long)]
        evidence: Option<PathBuf>,
        /// The workspace root (default as for `report`).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Print the fingerprint of an operator's code: evidence records count as current only
    /// when they carry this value (see capability/README.md, "When evidence is current").
    Fingerprint {
        /// The operator: mysql, etcd, kafka.
        operator: String,
        /// The workspace root (default as for `report`).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Print the model: levels, criteria with their ids, and the static checks.
    Criteria {
        /// Output format (table, markdown or json).
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

#[derive(Debug, Args)]
struct OutputArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Write to this file instead of standard output (written whole, or not at all).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Colour the table.
    #[arg(long, value_enum, default_value = "auto")]
    color: Color,
    /// Exit with status 3 when an operator's level is below N (the confirmed level for
    /// `report`, the level the manifests evidence for `assess`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=5))]
    require_level: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Color {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    Always,
    Never,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("statecraft-capability: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Criteria { format } => {
            print!("{}", render::model(format)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Fingerprint { operator, root } => {
            let names = statecraft_capability::operators::names();
            if !names.contains(&operator.as_str()) {
                return Err(Error::Usage(format!("unknown operator {operator:?} (known: {})", names.join(", "))));
            }
            let root = root.unwrap_or_else(default_root);
            println!("{}", statecraft_capability::evidence::fingerprint(&root, &operator)?.hash);
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { root, evidence, operators, output } => {
            let root = root.unwrap_or_else(default_root);
            let report = report::workspace(&WorkspaceOptions { root, evidence, only: operators })?;
            emit(&report, &output)
        }
        Command::Bundle { operator, output, evidence, root } => {
            let root = root.unwrap_or_else(default_root);
            // The level comes from the same report `report` prints, and from nowhere else.
            let report = report::workspace(&WorkspaceOptions { root: root.clone(), evidence, only: vec![operator] })?;
            let Some(op) = report.operators.first() else {
                return Err(Error::Usage("the report has no operator".into()));
            };
            let bundle = statecraft_capability::bundle::build(&root, op)?;
            statecraft_capability::bundle::write(&bundle, &output)?;
            match bundle.capabilities {
                Some(level) => eprintln!("wrote {} ({}, capabilities {level:?})", output.display(), bundle.csv_name),
                None => {
                    eprintln!("wrote {} ({})", output.display(), bundle.csv_name);
                    eprintln!(
                        "statecraft-capability: note: the bundle declares no capability level (no `capabilities` \
                         annotation): the evidence confirms none for {} (run `make e2e`)",
                        op.title()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Assess { manifests, operand, runbooks, output } => {
            let report = report::assess(&AssessOptions { manifests, operand, runbooks })?;
            emit(&report, &output)
        }
    }
}

/// The current directory when it is a Statecraft workspace, else the one this binary was
/// built from (so `cargo run -p statecraft-capability -- report` works from anywhere inside).
fn default_root() -> PathBuf {
    let is_workspace = |p: &Path| p.join("operators").is_dir() && p.join("crds").is_dir();
    if let Ok(cwd) = std::env::current_dir()
        && is_workspace(&cwd)
    {
        return cwd;
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if is_workspace(&built) {
        return built.canonicalize().unwrap_or(built);
    }
    PathBuf::from(".")
}

fn emit(report: &Report, output: &OutputArgs) -> Result<ExitCode> {
    let color = match output.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            output.output.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    let text = render::render(report, output.format, color && output.format == Format::Table)?;
    match &output.output {
        Some(path) => {
            // Write beside the target and rename, so that a reader never sees half a report.
            let tmp = path.with_extension("partial");
            std::fs::write(&tmp, &text).map_err(|e| Error::io(&tmp, e))?;
            std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    if let Some(required) = output.require_level {
        let below = report::below(report, required);
        if !below.is_empty() {
            for (name, level) in &below {
                eprintln!("statecraft-capability: {name} is at level {level}, below the required level {required}");
            }
            return Ok(ExitCode::from(3));
        }
    }
    let errors = report::bundle_errors(report);
    if !errors.is_empty() {
        eprintln!(
            "statecraft-capability: the bundle has {} (listed in the report)",
            if errors.len() == 1 { "1 error".to_string() } else { format!("{} errors", errors.len()) }
        );
        return Ok(ExitCode::from(4));
    }
    Ok(ExitCode::SUCCESS)
}
