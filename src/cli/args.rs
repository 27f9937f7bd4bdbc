//! The command line of `advisor-consult`: every verb, its flags and an example.

use crate::context::Locations;
use crate::core::records::{Confidence, EvidenceKind, Materiality};
use crate::protocol::Timeout;
use crate::render::Format;
use advisord_core::UnknownName;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const ABOUT: &str = "Record your reasoning, see which advisors you could ask and why, get a \
computed plan, consult the advisors it selects, and read back where your task stands.";

const EXAMPLES: &str = "\
Examples:
  advisor-consult record --file assessment.json   store a record (`-` reads standard input)
  advisor-consult advisors                        every advisor, its status and why
  advisor-consult plan --materiality material     who would be asked, who not, and why
  advisor-consult --assessment 01J...             consult the plan's advisors and wait
  advisor-consult ask --subject 'Use SQLite' --materiality material \\
      --hypothesis 'WAL is enough' --evidence file:src/queue.rs
  advisor-consult jobs                            the consultation queue
  advisor-consult status                          where each assessment stands
  advisor-consult explain 01J...                  the provenance chain of a record
  advisor-consult tree --depth 2                  the task's records as a tree
  advisor-consult check                           provider independence and CI findings
  advisor-consult context                         where the task stands, for a new session
  advisor-consult doctor                          what each advisor needs, and the next step
  advisor-consult daemon status                   the daemon: pid, uptime, socket, log, jobs
  advisor-consult demo                            the whole product on scripted advisors

Exit status: 0 done; 1 findings (check) or a job with no completed consultation;
2 usage; 3 refused by the writer; 4 the daemon could not be reached or started;
5 a wait ran out of time; 130 interrupted.";

/// The flags every `advisor-consult` verb accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalFlags {
    /// The project root [default: the nearest ancestor holding `.git`, else the working
    /// directory]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Where records are kept [default: <root>/.ai/local/state/reasoning]
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The task [default: $ADVISORD_TASK, else the git branch, else `default`]
    #[arg(long, global = true, value_name = "NAME")]
    pub task: Option<String>,
    /// The advisor catalogue, layered on the embedded one and yours
    /// (~/.config/advisord/advisors.yaml) [default: $ADVISORD_CATALOGUE, else
    /// <root>/.advisord/advisors.yaml when trusted]
    #[arg(long, global = true, value_name = "FILE")]
    pub catalogue: Option<PathBuf>,
    /// The daemon's socket [default: $ADVISORD_SOCKET, else
    /// $XDG_RUNTIME_DIR/advisord/advisord.sock, else /tmp/advisord-<uid>/advisord.sock]
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// How to print the result
    #[arg(long, global = true, value_enum, default_value_t = Format::Plain)]
    pub format: Format,
    /// Run in this process instead of through the daemon (network-free verbs only)
    #[arg(long, global = true)]
    pub no_daemon: bool,
    /// Do not start the daemon when its socket does not answer
    #[arg(long, global = true)]
    pub no_autostart: bool,
}

impl GlobalFlags {
    /// Where the flags say things are.
    pub fn locations(&self) -> Locations {
        Locations {
            root: self.root.clone(),
            state_dir: self.state_dir.clone(),
            task: self.task.clone(),
            catalogue: self.catalogue.clone(),
        }
    }
}

/// `advisor-consult`: the global flags, the bare consult form, or a verb.
#[derive(Debug, Parser)]
#[command(
    name = "advisor-consult",
    version,
    about = ABOUT,
    after_help = EXAMPLES
)]
pub struct Cli {
    /// The flags every verb accepts.
    #[command(flatten)]
    pub global: GlobalFlags,
    /// `--assessment ID` and how to consult.
    #[command(flatten)]
    pub consult: BareConsult,
    /// The verb.
    #[command(subcommand)]
    pub verb: Option<Verb>,
}

/// The bare consult form's flags: `--assessment ID` and how to consult, without a verb.
#[derive(Debug, clap::Args)]
pub struct BareConsult {
    /// Queue a consultation for this assessment and wait for it
    #[arg(long, value_name = "ID")]
    pub assessment: Option<String>,
    /// A question for the advisors besides the assessment's own
    #[arg(long, value_name = "TEXT", requires = "assessment")]
    pub question: Option<String>,
    /// The job's deadline in seconds, decimals allowed [default: 90]
    #[arg(long, value_name = "SECS", requires = "assessment")]
    pub timeout: Option<Timeout>,
    /// An opinion already given (marked as an opinion in the question, not a fact)
    #[arg(long, value_name = "TEXT", requires = "assessment")]
    pub prior_opinion: Option<String>,
    /// Queue the consultation and print the job id at once
    #[arg(long, requires = "assessment")]
    pub detach: bool,
    /// Print the exact prompt the advisors would receive; send nothing, record nothing
    #[arg(long, requires = "assessment", conflicts_with = "detach")]
    pub preview_prompt: bool,
}

/// The top level of [`Cli`] without its verbs: the same two flattened sets of flags, so
/// a command line it accepts means the same to [`Cli`] (with no verb). Building every
/// verb's flags is most of what parsing costs (about 0.45 ms of a consultation's start
/// on a 2-core VM), and a consultation names none of them. No help and no version flag:
/// those, and every error, are left to [`Cli`].
#[derive(Debug, Parser)]
#[command(
    name = "advisor-consult",
    disable_help_flag = true,
    disable_version_flag = true
)]
struct TopLevel {
    #[command(flatten)]
    global: GlobalFlags,
    #[command(flatten)]
    consult: BareConsult,
}

impl Cli {
    /// Parse `args` (the program name first), refusing `--assessment` with a verb.
    pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString>,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        if let Some(cli) = Self::bare_consult(&args) {
            return Ok(cli);
        }
        let cli = Cli::try_parse_from(&args)?;
        if let (Some(_), Some(verb)) = (&cli.consult.assessment, &cli.verb) {
            // Global flags may come before a verb, so clap's own conflict rule cannot be used.
            let mut command = <Cli as clap::CommandFactory>::command();
            return Err(command.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "`--assessment` consults on its own and cannot be used with `{}`; \
                     drop one of them",
                    verb.name()
                ),
            ));
        }
        Ok(cli)
    }

    /// The bare consult form (`--assessment ID` with flags and no verb) parsed by
    /// [`TopLevel`] alone; `None` for any other command line, or one `TopLevel` refuses,
    /// which the whole command line then parses and words the errors of.
    fn bare_consult(args: &[std::ffi::OsString]) -> Option<Cli> {
        let names_assessment = args.iter().skip(1).any(|arg| {
            arg.to_str()
                .is_some_and(|arg| arg == "--assessment" || arg.starts_with("--assessment="))
        });
        if !names_assessment {
            return None;
        }
        let top = TopLevel::try_parse_from(args).ok()?;
        Some(Cli {
            global: top.global,
            consult: top.consult,
            verb: None,
        })
    }
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Record an assessment and consult on it in one step
    #[command(
        after_help = "Example:\n  advisor-consult ask --subject 'Use SQLite for the queue' \\\n      \
                      --materiality material --hypothesis 'WAL mode is enough' \\\n      \
                      --evidence 'file:src/queue.rs=>one writer at a time'"
    )]
    Ask(AskArgs),
    /// Queue a consultation for a recorded assessment and wait for it (the same as
    /// `--assessment ID`)
    #[command(
        after_help = "Examples:\n  advisor-consult consult 01J... --timeout 30\n  \
                      advisor-consult consult 01J... --detach --format json"
    )]
    Consult(ConsultArgs),
    /// The consultation jobs: queued, running and recently finished
    #[command(after_help = "Example:\n  advisor-consult jobs --format json")]
    Jobs,
    /// Wait for a job to end and print it
    #[command(after_help = "Example:\n  advisor-consult wait 01J... --timeout 30")]
    Wait {
        /// The job id
        job: String,
        /// Give up after this many seconds, decimals allowed (exit 5)
        #[arg(long, value_name = "SECS")]
        timeout: Option<Timeout>,
    },
    /// Cancel a job
    #[command(after_help = "Example:\n  advisor-consult cancel 01J...")]
    Cancel {
        /// The job id
        job: String,
    },
    /// Show the whole product working on built-in scripted advisors
    #[command(after_help = "Example:\n  advisor-consult demo")]
    Demo {
        /// Keep the demo's temporary directory (project, records, daemon log) afterwards
        #[arg(long)]
        keep: bool,
    },
    /// Every advisor, its status and why; capacity per capability
    #[command(after_help = "Example:\n  advisor-consult advisors --format table")]
    Advisors,
    /// The effective catalogue (the embedded one, then yours, then the project's), as
    /// YAML ready to copy, with the files it came from
    #[command(
        after_help = "Examples:\n  advisor-consult catalogue > my-advisors.yaml\n  \
                      advisor-consult catalogue --format json"
    )]
    Catalogue,
    /// A plan preview: who would be consulted for this doubt, who not, and why
    #[command(
        after_help = "Example:\n  advisor-consult plan --materiality high --capabilities \
                      code_review,debugging"
    )]
    Plan {
        /// How much a wrong decision would cost: trivial, low, material, high, critical
        #[arg(long, value_name = "M", value_parser = parse_materiality)]
        materiality: Materiality,
        /// Your confidence in your hypothesis: low, medium, high
        #[arg(long, value_name = "C", value_parser = parse_confidence, default_value = "medium")]
        confidence: Confidence,
        /// Capabilities wanted, comma-separated [default: independent_reasoning]
        #[arg(long, value_name = "A,B", value_delimiter = ',')]
        capabilities: Vec<String>,
    },
    /// Store one record through the writer and print it (`--template KIND` prints a
    /// skeleton to fill in instead)
    #[command(after_help = super::schema::record_help())]
    Record {
        /// One JSON object: `kind` plus your fields; `-` reads standard input
        #[arg(long, value_name = "FILE", required_unless_present = "template")]
        file: Option<PathBuf>,
        /// Print a skeleton of this kind to fill in (assessment, plan, consultation,
        /// disagreement, resolution, conclusion, validation, attempt, invariant); stores nothing
        #[arg(long, value_name = "KIND", value_parser = super::schema::parse_kind, conflicts_with = "file")]
        template: Option<crate::core::records::Kind>,
        /// Judge the record with the writer and write nothing: print whether it would be
        /// accepted and, for a superseding conclusion, what would then rest on a
        /// superseded decision
        #[arg(long, conflicts_with = "template")]
        dry_run: bool,
    },
    /// Each assessment of the task and where it stands
    #[command(after_help = "Example:\n  advisor-consult status --task feature-x")]
    Status,
    /// Spend per advisor, task and day (the user's time zone), and every budget's state
    #[command(after_help = "Example:\n  advisor-consult spend --format table")]
    Spend,
    /// The whole provenance chain of a record
    #[command(after_help = "Example:\n  advisor-consult explain 01J... --format yaml")]
    Explain {
        /// The record id
        id: String,
        /// Also list every record that rests on it, transitively, and how each cites it
        #[arg(long)]
        downstream: bool,
    },
    /// The task's records as a tree
    #[command(after_help = "Example:\n  advisor-consult tree --depth 3 --show-superseded")]
    Tree {
        /// How many levels below each assessment to show
        #[arg(long, value_name = "N")]
        depth: Option<usize>,
        /// Also show superseded conclusions and their branches
        #[arg(long)]
        show_superseded: bool,
    },
    /// Serve MCP on standard input and output, for agent hosts (see docs/MCP.md)
    #[command(
        after_help = "Example (what a host's configuration runs):\n  advisor-consult mcp \
                      --wait-cap 40\n\n\
                      The tools wait for a consultation at most --wait-cap seconds, then\n\
                      answer with the outcomes so far; the job goes on."
    )]
    Mcp {
        /// How long a tool waits for a consultation before answering with the outcomes
        /// so far, decimals allowed [default: 50]
        #[arg(long, value_name = "SECS", env = "ADVISORD_MCP_WAIT_CAP")]
        wait_cap: Option<Timeout>,
    },
    /// The reviews waiting in this daemon's mesh inbox, or answer one
    #[command(
        after_help = "Examples:\n  advisor-consult reviews\n  advisor-consult reviews answer \
                      01J... --file answer.json"
    )]
    Reviews {
        /// `answer ID --file F` answers a review; without it, the reviews are listed
        #[command(subcommand)]
        action: Option<ReviewsAction>,
    },
    /// Provider-independence and CI-credential findings (exit 1 when any)
    #[command(after_help = "Example:\n  advisor-consult check --path src/core")]
    Check {
        /// Check only this directory or file (relative to the root)
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
    },
    /// Walk the task's record chain (or every task's): exit 1 on any finding
    #[command(
        after_help = "Examples:\n  advisor-consult verify\n  advisor-consult verify --all --format json"
    )]
    Verify {
        /// Every task of the state directory, instead of the one task
        #[arg(long)]
        all: bool,
    },
    /// Adopt advisord in this repository: .gitignore, the project file, the practice in
    /// AGENTS.md, each host's MCP registration and a CI workflow (idempotent; merges)
    #[command(after_help = crate::init::EXAMPLES)]
    Init {
        /// The hosts to register with, comma-separated (`init --help` names them)
        #[arg(long, value_name = "LIST", help = crate::init::HOSTS_HELP)]
        hosts: Option<String>,
        /// Show every change as a diff and write nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Pin a mesh peer so its answers count as reviews, unpin it, or list the pinned
    #[command(
        after_help = "Example:\n  advisor-consult mesh pin alice-laptop-3f9a0c1d2e4b5a6c7d8e --key UAB... --owner alice"
    )]
    Mesh {
        /// `pin RUNTIME --key KEY [--owner NAME]`, `unpin RUNTIME` or `pins`
        #[command(subcommand)]
        action: MeshAction,
    },
    /// The team's invariants: add one (global, project or task scope), list those in force
    /// for the task with each one's scope, or remove one
    #[command(after_help = crate::cli::invariant::EXAMPLES)]
    Invariant {
        /// `add NAME --description TEXT`, `list` or `remove NAME`, each with a scope flag
        #[command(subcommand)]
        action: crate::cli::invariant::InvariantAction,
    },
    /// Trust this repository's own catalogue (`.advisord/advisors.yaml`) as it is now, so
    /// its advisors run; a change to the file needs trusting again
    #[command(after_help = "Example:\n  advisor-consult trust")]
    Trust,
    /// Accept a task this machine never wrote (a cloned repository's, or one rewritten
    /// behind the daemon's back) as its own: anchor its current head, so plans may reuse
    /// its conclusions and its attested consultations count
    #[command(
        after_help = "Examples:\n  advisor-consult adopt --task feature-x\n  advisor-consult adopt --all"
    )]
    Adopt {
        /// Every task of the state directory, instead of the one named with `--task`
        #[arg(long)]
        all: bool,
    },
    /// The JSON Schema of a stored record of KIND (`record` for any kind), as this
    /// binary ships it
    #[command(
        after_help = "Example:\n  advisor-consult schema conclusion > conclusion.schema.json"
    )]
    Schema {
        /// assessment, plan, consultation, disagreement, resolution, conclusion,
        /// validation, attempt, invariant, or record
        kind: String,
    },
    /// Where the task stands, in about 40 lines, for a session picking it up: standing
    /// conclusions and who reviewed them, unresolved disagreements, open assessments,
    /// advisors cooling down
    #[command(after_help = "Example:\n  advisor-consult context --format json")]
    Context,
    /// Is this setup ready? Each advisor (what it needs, whether it is there, the next
    /// step), the daemon and socket, the state directory, the catalogue, the `check`
    /// findings; exit 1 only on a real problem
    #[command(after_help = "Example:\n  advisor-consult doctor --format json")]
    Doctor,
    /// The daemon serving this user's socket: its status, stop it, or read its log
    #[command(
        after_help = "Examples:\n  advisor-consult daemon status\n  advisor-consult daemon \
                      stop\n  advisor-consult daemon logs -n 100 --follow"
    )]
    Daemon {
        /// What to do
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// A shell completion script, generated from these flags
    #[command(
        after_help = "Examples:\n  source <(advisor-consult completions bash)\n  \
                      advisor-consult completions zsh > ~/.zfunc/_advisor-consult\n  \
                      advisor-consult completions fish > \
                      ~/.config/fish/completions/advisor-consult.fish"
    )]
    Completions {
        /// bash, zsh or fish
        #[arg(value_enum)]
        shell: super::completions::Shell,
    },
    /// The cockpit's URL (with its token) for the daemon's TCP listener, or open it
    #[command(
        after_help = "Examples:\n  advisord --listen 127.0.0.1:7433 --detach\n  \
                      advisor-consult cockpit --open\n\n\
                      The URL carries the listener's token: whoever has it can read every\n\
                      record the daemon can, and start or cancel consultations."
    )]
    Cockpit {
        /// Open the URL in the browser (with `xdg-open`)
        #[arg(long)]
        open: bool,
    },
    /// The manual page (roff), generated from these flags
    #[command(
        after_help = "Example:\n  advisor-consult man > advisor-consult.1 && man ./advisor-consult.1"
    )]
    Man,
}

/// What `daemon` does.
#[derive(Debug, Subcommand)]
pub enum DaemonAction {
    /// Whether a daemon answers on the socket: pid, version, uptime, socket, log, jobs
    /// (exit 4 when none runs)
    Status,
    /// Stop the daemon gracefully (SIGTERM: no new jobs, running exchanges get their
    /// grace, unfinished jobs resume at the next start) and wait until it is gone
    Stop {
        /// How long to wait for it to be gone, in seconds (exit 5 when it is not)
        #[arg(long, value_name = "SECS", default_value = "30")]
        timeout: Timeout,
    },
    /// The end of the log a daemon started by `advisord --detach` or by advisor-consult
    /// writes
    Logs {
        /// How many lines from the end
        #[arg(short = 'n', long, value_name = "N", default_value_t = 50)]
        lines: usize,
        /// Keep printing what the daemon appends, until interrupted
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

impl Verb {
    /// The verb as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Verb::Ask(_) => "ask",
            Verb::Consult(_) => "consult",
            Verb::Jobs => "jobs",
            Verb::Wait { .. } => "wait",
            Verb::Cancel { .. } => "cancel",
            Verb::Demo { .. } => "demo",
            Verb::Advisors => "advisors",
            Verb::Catalogue => "catalogue",
            Verb::Plan { .. } => "plan",
            Verb::Record { .. } => "record",
            Verb::Status => "status",
            Verb::Spend => "spend",
            Verb::Explain { .. } => "explain",
            Verb::Tree { .. } => "tree",
            Verb::Check { .. } => "check",
            Verb::Verify { .. } => "verify",
            Verb::Trust => "trust",
            Verb::Invariant { .. } => "invariant",
            Verb::Init { .. } => "init",
            Verb::Mesh { .. } => "mesh",
            Verb::Adopt { .. } => "adopt",
            Verb::Mcp { .. } => "mcp",
            Verb::Reviews { .. } => "reviews",
            Verb::Schema { .. } => "schema",
            Verb::Context => "context",
            Verb::Doctor => "doctor",
            Verb::Daemon { .. } => "daemon",
            Verb::Completions { .. } => "completions",
            Verb::Man => "man",
            Verb::Cockpit { .. } => "cockpit",
        }
    }
}

/// What `mesh` does.
#[derive(Debug, Subcommand)]
pub enum MeshAction {
    /// Count this peer's answers as reviews (`advisors` prints the command for each peer)
    Pin {
        /// Its runtime id (`advisors` lists it as `mesh:<runtime id>`)
        runtime: String,
        /// Its public key (`U...`), to which its runtime id is bound
        #[arg(long)]
        key: String,
        /// Who answers there; runtimes of one owner count as one review
        #[arg(long)]
        owner: Option<String>,
    },
    /// Stop counting this peer's answers
    Unpin {
        /// Its runtime id
        runtime: String,
    },
    /// The pinned peers
    Pins,
}

/// What `reviews` does besides listing.
#[derive(Debug, Subcommand)]
pub enum ReviewsAction {
    /// Answer a waiting review: the answer goes to the daemon that asked
    Answer {
        /// The review id (as `reviews` lists it)
        id: String,
        /// The answer: a JSON object with `conclusion`, `stance` (supports, opposes,
        /// alternative, inconclusive) and optionally `assumptions`, `risks`, `actions`,
        /// `falsifiers`, `confidence`; `-` reads standard input
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
}

/// `consult ID`: what `--assessment ID` takes.
#[derive(Debug, Args)]
pub struct ConsultArgs {
    /// The assessment id
    pub id: String,
    /// How to consult.
    #[command(flatten)]
    pub options: ConsultOptions,
}

/// The options of a consultation, shared by `consult` and `ask`.
#[derive(Debug, Args)]
pub struct ConsultOptions {
    /// A question for the advisors besides the assessment's own
    #[arg(long, value_name = "TEXT")]
    pub question: Option<String>,
    /// The job's deadline in seconds, decimals allowed [default: 90]
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<Timeout>,
    /// An opinion already given (marked as an opinion in the question, not a fact)
    #[arg(long, value_name = "TEXT")]
    pub prior_opinion: Option<String>,
    /// Queue the consultation and print the job id at once
    #[arg(long)]
    pub detach: bool,
    /// Print the exact prompt the advisors would receive; send nothing, record nothing
    /// (`ask` does not record its assessment either)
    #[arg(long, conflicts_with = "detach")]
    pub preview_prompt: bool,
}

/// `ask`: the assessment's fields, then the consultation's.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// One line naming the decision
    #[arg(long, value_name = "TEXT")]
    pub subject: String,
    /// How much a wrong decision would cost: trivial, low, material, high, critical
    #[arg(long, value_name = "M", value_parser = parse_materiality)]
    pub materiality: Materiality,
    /// Your confidence in your hypothesis: low, medium, high [default: medium]
    #[arg(long, value_name = "C", value_parser = parse_confidence)]
    pub confidence: Option<Confidence>,
    /// What you currently believe
    #[arg(long, value_name = "TEXT")]
    pub hypothesis: String,
    /// Evidence as KIND:REF or KIND:REF=>SHOWED (repeatable); KIND is one of file, test,
    /// adr, rule, commit, command, observation, record
    #[arg(long, value_name = "KIND:REF", value_parser = parse_evidence)]
    pub evidence: Vec<EvidenceArg>,
    /// A known fact (repeatable)
    #[arg(long, value_name = "TEXT")]
    pub fact: Vec<String>,
    /// An assumption taken for granted (repeatable)
    #[arg(long, value_name = "TEXT")]
    pub assumption: Vec<String>,
    /// An open question of the assessment (repeatable)
    #[arg(long, value_name = "TEXT")]
    pub open_question: Vec<String>,
    /// Capabilities wanted, comma-separated [default: independent_reasoning]
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub capabilities: Vec<String>,
    /// The assessment brings evidence a standing conclusion did not have
    #[arg(long)]
    pub new_evidence: bool,
    /// How to consult.
    #[command(flatten)]
    pub consult: ConsultOptions,
}

impl AskArgs {
    /// The assessment record `ask` asks the writer to store.
    pub fn assessment_json(&self) -> serde_json::Value {
        let mut object = serde_json::json!({
            "kind": "assessment",
            "subject": self.subject,
            "materiality": self.materiality.as_str(),
            "hypothesis": self.hypothesis,
            "evidence": self.evidence.iter().map(EvidenceArg::to_json).collect::<Vec<_>>(),
            "facts": self.fact,
            "assumptions": self.assumption,
            "questions": self.open_question,
            "capabilities": self.capabilities,
        });
        if let Some(confidence) = self.confidence {
            object["confidence"] = confidence.as_str().into();
        }
        if self.new_evidence {
            object["new_evidence"] = true.into();
        }
        object
    }
}

/// One `--evidence KIND:REF[=>SHOWED]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceArg {
    /// What it points at.
    pub kind: EvidenceKind,
    /// Where it is.
    pub reference: String,
    /// What it showed, if given.
    pub showed: Option<String>,
}

impl EvidenceArg {
    /// The evidence object of a record.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::json!({"kind": self.kind.as_str(), "ref": self.reference});
        if let Some(showed) = &self.showed {
            object["showed"] = showed.as_str().into();
        }
        object
    }
}

/// The separator between an evidence reference and what it showed.
pub const SHOWED_SEPARATOR: &str = "=>";

/// Parse `KIND:REF` or `KIND:REF=>SHOWED` (the reference may itself contain `:`).
pub fn parse_evidence(text: &str) -> Result<EvidenceArg, String> {
    let accepted = EvidenceKind::ALL.map(EvidenceKind::as_str).join(", ");
    let Some((kind, rest)) = text.split_once(':') else {
        return Err(format!(
            "`{text}` is not KIND:REF; write e.g. `file:src/lib.rs` or \
             `test:writer_refuses=>passed` (KIND is one of {accepted})"
        ));
    };
    let kind = EvidenceKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind.trim())
        .ok_or_else(|| format!("evidence kind `{kind}` is not known; accepted: {accepted}"))?;
    let (reference, showed) = match rest.split_once(SHOWED_SEPARATOR) {
        Some((reference, showed)) => (reference, Some(showed.trim().to_string())),
        None => (rest, None),
    };
    let reference = reference.trim();
    if reference.is_empty() {
        return Err(format!(
            "evidence `{text}` has no reference after `{}:`; name the file, test, commit...",
            kind.as_str()
        ));
    }
    Ok(EvidenceArg {
        kind,
        reference: reference.to_string(),
        showed: showed.filter(|s| !s.is_empty()),
    })
}

/// Parse a materiality by its record name.
pub fn parse_materiality(text: &str) -> Result<Materiality, UnknownName> {
    text.parse()
}

/// Parse a confidence by its record name.
pub fn parse_confidence(text: &str) -> Result<Confidence, UnknownName> {
    text.parse()
}

/// Parse a positive, finite number of seconds (decimals allowed).
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds; give a positive number, e.g. `90` or `2.5`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    fn check(input: &str, expected: Result<(EvidenceKind, &str, Option<&str>), &str>) {
        let got = parse_evidence(input);
        match expected {
            Ok((kind, reference, showed)) => assert_eq!(
                got,
                Ok(EvidenceArg {
                    kind,
                    reference: reference.into(),
                    showed: showed.map(Into::into)
                }),
                "{input}"
            ),
            Err(fragment) => {
                let message = got.expect_err(input);
                assert!(message.contains(fragment), "{input}: {message}");
            }
        }
    }

    #[test]
    fn evidence_arguments() {
        use EvidenceKind::*;
        check("file:src/lib.rs", Ok((File, "src/lib.rs", None)));
        check(
            "file:src/lib.rs:10-20",
            Ok((File, "src/lib.rs:10-20", None)),
        );
        check(
            "test:refuses=>passed, 12 cases",
            Ok((Test, "refuses", Some("passed, 12 cases"))),
        );
        check(
            "command:RUST_LOG=debug cargo test",
            Ok((Command, "RUST_LOG=debug cargo test", None)),
        );
        check("commit: abc123 ", Ok((Commit, "abc123", None)));
        check("record:01J=>", Ok((Record, "01J", None)));
        check("src/lib.rs", Err("is not KIND:REF"));
        check("files:src/lib.rs", Err("accepted: file, test, adr"));
        check("file:", Err("has no reference"));
        check("file:=>x", Err("has no reference"));
    }

    #[test]
    fn seconds_and_enums() {
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert_eq!(parse_seconds("90"), Ok(90.0));
        for bad in ["0", "-1", "NaN", "inf", "x", ""] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        for m in Materiality::ALL {
            assert_eq!(parse_materiality(m.as_str()), Ok(m));
        }
        assert!(parse_materiality("huge")
            .unwrap_err()
            .to_string()
            .contains("trivial, low, material"));
        for c in Confidence::ALL {
            assert_eq!(parse_confidence(c.as_str()), Ok(c));
        }
        assert!(parse_confidence("sure")
            .unwrap_err()
            .to_string()
            .contains("low, medium, high"));
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::parse_args(std::iter::once("advisor-consult").chain(args.iter().copied()))
    }

    #[test]
    fn global_flags_go_before_or_after_the_verb() {
        for args in [
            &["--format", "json", "--task", "t", "status"][..],
            &["status", "--format", "json", "--task", "t"][..],
        ] {
            let cli = parse(args).expect("parses");
            assert_eq!(cli.global.format, crate::render::Format::Json, "{args:?}");
            assert_eq!(cli.global.task.as_deref(), Some("t"), "{args:?}");
            assert!(matches!(cli.verb, Some(Verb::Status)), "{args:?}");
        }
    }

    #[test]
    fn the_bare_consult_form() {
        let cli = parse(&["--assessment", "A", "--timeout", "2.5", "--detach"]).expect("parses");
        assert_eq!(
            (
                cli.consult.assessment.as_deref(),
                cli.consult.timeout,
                cli.consult.detach,
                cli.verb.is_none()
            ),
            (
                Some("A"),
                Some(Timeout::from_secs_f64(2.5).unwrap()),
                true,
                true
            )
        );
        for bad in [
            &["--assessment", "A", "status"][..],
            &["--question", "q"][..],
            &["--detach"][..],
            &["--assessment", "A", "--timeout", "soon"][..],
            &["plan"][..],
            &["plan", "--materiality", "huge"][..],
            &["record"][..],
            &["explain"][..],
            &["frobnicate"][..],
        ] {
            let err = parse(bad).expect_err(&format!("{bad:?} must not parse"));
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
    }

    fn argv(args: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("advisor-consult")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn the_bare_form_parsed_alone_means_what_the_whole_command_line_means() {
        for args in [
            &["--assessment", "A"][..],
            &["--assessment=A", "--format=json"][..],
            &[
                "--no-autostart",
                "--socket",
                "/s",
                "--root",
                "/r",
                "--state-dir",
                "/d",
                "--catalogue",
                "/c.yaml",
                "--task",
                "t",
                "--format",
                "json",
                "--assessment",
                "A",
            ][..],
            &[
                "--assessment",
                "A",
                "--question",
                "q",
                "--timeout",
                "2.5",
                "--prior-opinion",
                "p",
                "--no-daemon",
            ][..],
            &["--task", "status", "--assessment", "A", "--detach"][..],
            &["--assessment", "A", "--preview-prompt"][..],
        ] {
            let argv = argv(args);
            let alone = Cli::bare_consult(&argv).expect("parsed alone");
            let whole = Cli::try_parse_from(&argv).expect("the whole command line parses it");
            assert_eq!(format!("{alone:?}"), format!("{whole:?}"), "{args:?}");
        }
        // Help, version, verbs and every error are the whole command line's to answer.
        for (args, exit) in [
            (&["--assessment", "A", "--help"][..], 0),
            (&["--assessment", "A", "-V"][..], 0),
            (&["--assessment", "A", "status"][..], 2),
            (&["status", "--assessment", "A"][..], 2),
            (&["--assessment", "A", "--timeout", "soon"][..], 2),
            (
                &["--assessment", "A", "--detach", "--preview-prompt"][..],
                2,
            ),
            (&["--assessment"][..], 2),
            (&["--assessment", "A", "--frobnicate"][..], 2),
        ] {
            assert!(Cli::bare_consult(&argv(args)).is_none(), "{args:?}");
            let err = parse(args).expect_err(&format!("{args:?} must not parse"));
            assert_eq!(err.exit_code(), exit, "{args:?}: {err}");
        }
        let help = parse(&["--assessment", "A", "--help"]).expect_err("help exits");
        assert!(
            help.to_string().contains("consult"),
            "the whole help: {help}"
        );
        // A command line without `--assessment` never tries the top level alone.
        assert!(Cli::bare_consult(&argv(&["--format", "json"])).is_none());
    }

    #[test]
    fn the_top_level_alone_has_every_flag_of_the_whole_top_level() {
        let ids = |command: clap::Command| -> std::collections::BTreeSet<String> {
            command
                .get_arguments()
                .map(|arg| arg.get_id().to_string())
                .filter(|id| id != "help" && id != "version")
                .collect()
        };
        let whole = ids(Cli::command());
        assert!(
            whole.contains("assessment") && whole.contains("socket"),
            "{whole:?}"
        );
        assert_eq!(ids(<TopLevel as clap::CommandFactory>::command()), whole);
    }

    #[test]
    fn consult_is_the_verb_of_the_bare_form() {
        let cli = parse(&[
            "consult",
            "A",
            "--question",
            "q",
            "--timeout",
            "3",
            "--detach",
        ])
        .expect("parses");
        let Some(Verb::Consult(args)) = cli.verb else {
            panic!("not consult")
        };
        let request = args.into_request();
        assert_eq!(request.assessment.as_str(), "A");
        assert_eq!(request.question.as_deref(), Some("q"));
        assert_eq!(request.timeout, Some(Timeout::from_secs_f64(3.0).unwrap()));
        assert!(request.detach && !request.preview_prompt);
        let preview = parse(&["--assessment", "A", "--preview-prompt"]).expect("parses");
        assert!(preview.consult.preview_prompt);
        for bad in [
            &["consult"][..],
            &["consult", "A", "--detach", "--preview-prompt"][..],
            &["--assessment", "A", "--detach", "--preview-prompt"][..],
            &["--preview-prompt"][..],
            &["--assessment", "A", "consult", "B"][..],
        ] {
            let err = parse(bad).expect_err(&format!("{bad:?} must not parse"));
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
    }

    #[test]
    fn every_verb_shows_an_example_in_its_help() {
        let command = Cli::command();
        for sub in command.get_subcommands() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let verb = parse(&[sub.get_name(), "--help"]).expect_err("help exits");
            assert_eq!(verb.exit_code(), 0);
            assert!(
                help.contains(&format!("advisor-consult {}", sub.get_name())),
                "`{}` --help has no example: {help:?}",
                sub.get_name()
            );
        }
    }

    #[test]
    fn ask_builds_the_assessment_it_was_given() {
        let cli = Cli::parse_args([
            "advisor-consult",
            "ask",
            "--subject",
            "S",
            "--materiality",
            "high",
            "--hypothesis",
            "H",
            "--evidence",
            "file:a.rs=>shows x",
            "--fact",
            "F",
            "--capabilities",
            "code_review,debugging",
            "--confidence",
            "low",
            "--new-evidence",
        ])
        .unwrap();
        let Some(Verb::Ask(ask)) = cli.verb else {
            panic!("not ask")
        };
        assert_eq!(
            ask.assessment_json(),
            serde_json::json!({
                "kind": "assessment", "subject": "S", "materiality": "high",
                "hypothesis": "H",
                "evidence": [{"kind": "file", "ref": "a.rs", "showed": "shows x"}],
                "facts": ["F"], "assumptions": [], "questions": [],
                "capabilities": ["code_review", "debugging"],
                "confidence": "low", "new_evidence": true
            })
        );
    }
}
