//! `advisor-consult`: parse the command line, run the verb through a [`backend::Backend`]
//! (or the job verbs through [`jobs`]), print the result through [`crate::render`], and
//! map every error to the exit status of SPEC §10 in one place ([`exit`]).

pub mod args;
pub mod backend;
pub mod exit;
pub mod jobs;

pub use args::{Cli, Verb};

use crate::context::RequestContext;
use crate::render::{self, Format, Render};
use crate::service::ServiceError;
use anyhow::Context as _;
use backend::select_backend;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

/// The largest record `record --file` reads (the daemon refuses larger bodies too).
pub const MAX_RECORD_BYTES: u64 = 1024 * 1024;

/// A verb that goes through the daemon's job queue, handed to [`jobs::run_job_verb`].
#[derive(Debug, Clone, PartialEq)]
pub enum JobVerb {
    /// `--assessment ID` (and the consultation half of `ask`).
    Consult(ConsultRequest),
    /// `jobs`.
    Jobs,
    /// `wait JOB [--timeout SECS]`.
    Wait {
        /// The job id.
        job: String,
        /// Give up after this many seconds (exit 5).
        timeout_s: Option<f64>,
    },
    /// `cancel JOB`.
    Cancel {
        /// The job id.
        job: String,
    },
    /// `demo`.
    Demo {
        /// Keep the demo's temporary directory.
        keep: bool,
    },
}

impl JobVerb {
    /// How the user invoked it, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            JobVerb::Consult(_) => "--assessment",
            JobVerb::Jobs => "jobs",
            JobVerb::Wait { .. } => "wait",
            JobVerb::Cancel { .. } => "cancel",
            JobVerb::Demo { .. } => "demo",
        }
    }
}

/// A consultation to queue for a recorded assessment.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsultRequest {
    /// The assessment id.
    pub assessment: String,
    /// A question for the advisors besides the assessment's own.
    pub question: Option<String>,
    /// The job's deadline in seconds (the daemon's default when absent).
    pub timeout_s: Option<f64>,
    /// An opinion already given.
    pub prior_opinion: Option<String>,
    /// Print the job id at once instead of waiting.
    pub detach: bool,
}

/// The entry point of the `advisor-consult` binary: the one exit path.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = jobs::hidden_entry(&args) {
        return exit_code(code);
    }
    let cli = match Cli::parse_args(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version exit 0; every other parse error is usage (2).
            let _ = e.print();
            return exit_code(e.exit_code());
        }
    };
    let format = cli.global.format;
    match run(cli) {
        Ok(code) => exit_code(code),
        Err(e) => exit_code(exit::report(&e, format)),
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Run one parsed invocation; `Ok` carries the exit status of a verb that completed.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    let global = cli.global;
    let ctx = RequestContext::from_process(&global)?;
    let Some(verb) = cli.verb else {
        let Some(assessment) = cli.assessment else {
            return Err(ServiceError::Usage(
                "name a verb or `--assessment ID`; `advisor-consult --help` lists them".into(),
            )
            .into());
        };
        let request = ConsultRequest {
            assessment,
            question: cli.question,
            timeout_s: cli.timeout,
            prior_opinion: cli.prior_opinion,
            detach: cli.detach,
        };
        return jobs::run_job_verb(&JobVerb::Consult(request), &global, &ctx);
    };
    let format = global.format;
    match verb {
        Verb::Ask(ask) => {
            let backend = select_backend(&global, ctx.clone())?;
            let assessment = backend.record(&ask.assessment_json())?;
            if matches!(format, Format::Plain | Format::Table) {
                eprintln!("recorded assessment `{}`", assessment.id());
            }
            let request = ConsultRequest {
                assessment: assessment.id().to_string(),
                question: ask.question,
                timeout_s: ask.timeout,
                prior_opinion: ask.prior_opinion,
                detach: ask.detach,
            };
            jobs::run_job_verb(&JobVerb::Consult(request), &global, &ctx)
        }
        Verb::Jobs => jobs::run_job_verb(&JobVerb::Jobs, &global, &ctx),
        Verb::Wait { job, timeout } => jobs::run_job_verb(
            &JobVerb::Wait {
                job,
                timeout_s: timeout,
            },
            &global,
            &ctx,
        ),
        Verb::Cancel { job } => jobs::run_job_verb(&JobVerb::Cancel { job }, &global, &ctx),
        Verb::Demo { keep } => jobs::run_job_verb(&JobVerb::Demo { keep }, &global, &ctx),
        Verb::Advisors => emit(&select_backend(&global, ctx)?.advisors()?, format),
        Verb::Plan {
            materiality,
            confidence,
            capabilities,
        } => {
            let backend = select_backend(&global, ctx)?;
            emit(
                &backend.plan_preview(materiality, confidence, capabilities)?,
                format,
            )
        }
        Verb::Record { file } => {
            let input = read_record_input(&file)?;
            emit(&select_backend(&global, ctx)?.record(&input)?, format)
        }
        Verb::Status => emit(&select_backend(&global, ctx)?.status()?, format),
        Verb::Explain { id } => emit(&select_backend(&global, ctx)?.explain(&id)?, format),
        Verb::Tree {
            depth,
            show_superseded,
        } => emit(
            &select_backend(&global, ctx)?.tree(depth, show_superseded)?,
            format,
        ),
        Verb::Check { path } => {
            let path = path.map(|p| absolute_from_cwd(&p)).transpose()?;
            let report = select_backend(&global, ctx)?.check(path.as_deref())?;
            emit(&report, format)?;
            Ok(if report.findings.is_empty() { 0 } else { 1 })
        }
    }
}

/// Print `value` in `format` on standard output; exit status 0.
fn emit(value: &impl Render, format: Format) -> anyhow::Result<i32> {
    print_stdout(&render::render(value, format))?;
    Ok(0)
}

/// Write `text` (with a final newline) to standard output; a closed pipe is not an error.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let result = out
        .write_all(text.as_bytes())
        .and_then(|()| {
            if text.ends_with('\n') {
                Ok(())
            } else {
                out.write_all(b"\n")
            }
        })
        .and_then(|()| out.flush());
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to standard output")
        }
        _ => Ok(()),
    }
}

fn absolute_from_cwd(path: &Path) -> anyhow::Result<std::path::PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    Ok(cwd.join(path))
}

/// The JSON object of `record --file FILE`; standard input only when FILE is `-`.
fn read_record_input(file: &Path) -> Result<serde_json::Value, ServiceError> {
    let from_stdin = file == Path::new("-");
    let name = if from_stdin {
        "standard input".to_string()
    } else {
        format!("`{}`", file.display())
    };
    let mut bytes = Vec::new();
    let read = if from_stdin {
        std::io::stdin()
            .lock()
            .take(MAX_RECORD_BYTES + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(MAX_RECORD_BYTES + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| {
        ServiceError::Usage(format!(
            "cannot read {name}: {e}; `record --file` takes a readable file, or `-` for \
             standard input"
        ))
    })?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(ServiceError::Usage(format!(
            "{name} is larger than 1 MiB; a record holds references to evidence, not copies"
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ServiceError::Usage(format!(
            "{name} is not JSON ({e}); `record` takes one JSON object: `kind` plus your \
             fields, e.g. {{\"kind\": \"assessment\", \"subject\": \"...\", ...}} \
             (see docs/records.md)"
        ))
    })
}
