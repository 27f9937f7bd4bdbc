//! `advisor-consult`: parse the command line, run the verb through the façade
//! ([`crate::facade::Api`]: in-process or the daemon; the job verbs through [`jobs`]),
//! print the result through [`crate::render`], and map every error to its exit status in
//! one place ([`exit`]). The CLI owns the async runtime; Ctrl-C and printing stay here.

pub mod adopt;
pub mod args;
pub mod cockpit;
pub mod completions;
pub mod context;
pub mod daemon;
pub mod doctor;
pub mod exit;
pub mod invariant;
pub mod jobs;
pub mod mesh;
pub mod output;
pub mod reviews;
pub mod schema;
pub mod trust;

pub use args::{Cli, GlobalFlags, Verb};
pub use jobs::{ConsultVerb, JobVerb};
pub use output::print_stdout;

use crate::client::Client;
use crate::error::Error;
use crate::facade::{Api, Local};
use crate::paths;
use crate::protocol::{
    AdvisorsRequest, CatalogueRequest, CheckRequest, ExplainRequest, PlanRequest, RecordRequest,
    RequestContext, SpendRequest, StatusRequest, TreeRequest, VerifyRequest,
};
use crate::render::{self, Format, Render};
use anyhow::Context as _;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

/// The largest record `record --file` reads (the daemon refuses larger bodies too).
pub const MAX_RECORD_BYTES: u64 = 1024 * 1024;

/// The entry point of the `advisor-consult` binary: the one exit path.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = jobs::hidden_entry(&args) {
        return exit_code(code);
    }
    let cli = match Cli::parse_args(args.clone()) {
        Ok(cli) => cli,
        // Help and version exit 0; every other parse error is usage (2).
        Err(e) => return exit_code(exit::report_parse_error(&e, &args)),
    };
    let format = cli.global.format;
    // The CLI owns its runtime; everything below it is async.
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|runtime| runtime.block_on(run(cli)));
    match result {
        Ok(code) => exit_code(code),
        Err(e) => exit_code(exit::report(&e, format)),
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Where the verbs of this invocation run: in-process with `--no-daemon`; otherwise the
/// daemon on the socket, started first when nobody answers (unless `--no-autostart`:
/// exit 4).
pub async fn select_api(global: &GlobalFlags) -> Result<Box<dyn Api>, Error> {
    if global.no_daemon {
        return Ok(Box::new(Local));
    }
    let socket = paths::socket_path(global.socket.as_deref());
    Ok(Box::new(
        Client::connect(socket, !global.no_autostart).await?,
    ))
}

/// Run one parsed invocation; `Ok` carries the exit status of a verb that completed.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    let global = cli.global;
    // The data directory the daemon would use holds this machine's attestation key and
    // anchored heads: `--no-daemon` anchors what it writes there and judges by them.
    if let Some(dir) = paths::data_dir(None) {
        crate::machine::install(&dir);
    }
    if let Some(verb) = &cli.verb {
        if let Some(code) = without_context(verb, &global).await? {
            return Ok(code);
        }
    }
    let ctx = RequestContext::from_process(&global.locations())?;
    // `consult ID` and `--assessment ID` are one verb.
    let (verb, consult) = match cli.verb {
        Some(Verb::Consult(args)) => (None, Some(args.into_request())),
        Some(verb) => (Some(verb), None),
        None => {
            let bare = cli.consult;
            let consult = bare.assessment.map(|assessment| ConsultVerb {
                assessment: assessment.into(),
                question: bare.question,
                timeout: bare.timeout,
                prior_opinion: bare.prior_opinion,
                detach: bare.detach,
                preview_prompt: bare.preview_prompt,
            });
            (None, consult)
        }
    };
    if let Some(request) = consult {
        trust::warn_untrusted(&ctx);
        return job_verb(&JobVerb::Consult(request), &global, &ctx).await;
    }
    let Some(verb) = verb else {
        return Err(Error::Usage(
            "name a verb or `--assessment ID`; `advisor-consult --help` lists them".into(),
        )
        .into());
    };
    let format = global.format;
    let context = || ctx.clone();
    if matches!(verb, Verb::Ask(_) | Verb::Advisors | Verb::Plan { .. }) {
        trust::warn_untrusted(&ctx);
    }
    match verb {
        Verb::Ask(ask) if ask.consult.preview_prompt => {
            let api = select_api(&global).await?;
            let mut fields = ask.assessment_json();
            if let Some(object) = fields.as_object_mut() {
                object.remove("kind");
            }
            let fields: crate::core::records::Assessment = serde_json::from_value(fields)
                .context("the assessment given to `ask` does not read as one")?;
            let preview = jobs::PreviewPrompt {
                assessment: None,
                fields: &fields,
                question: ask.consult.question.as_deref(),
                prior_opinion: ask.consult.prior_opinion.as_deref(),
            };
            preview.print(api.as_ref(), &ctx, format).await
        }
        Verb::Ask(ask) => {
            let api = select_api(&global).await?;
            let record = ask.assessment_json();
            let assessment = api
                .record(RecordRequest {
                    context: context(),
                    record,
                    dry_run: false,
                })
                .await?;
            if matches!(format, Format::Plain | Format::Table) {
                eprintln!("recorded assessment `{}`", assessment.id());
            }
            let request = ConsultVerb {
                preview_prompt: false,
                ..ask.consult.request(assessment.id().into())
            };
            jobs::run_job_verb(&JobVerb::Consult(request), api.as_ref(), &global, &ctx).await
        }
        Verb::Consult(_) => unreachable!("`consult` was handed to the job verbs above"),
        Verb::Jobs => job_verb(&JobVerb::Jobs, &global, &ctx).await,
        Verb::Wait { job, timeout } => {
            let verb = JobVerb::Wait {
                job: job.into(),
                timeout,
            };
            job_verb(&verb, &global, &ctx).await
        }
        Verb::Cancel { job } => job_verb(&JobVerb::Cancel { job: job.into() }, &global, &ctx).await,
        Verb::Demo { keep } => {
            jobs::run_job_verb(&JobVerb::Demo { keep }, &Local, &global, &ctx).await
        }
        Verb::Advisors => {
            let request = AdvisorsRequest { context: context() };
            emit(&select_api(&global).await?.advisors(request).await?, format)
        }
        Verb::Catalogue => {
            let request = CatalogueRequest { context: context() };
            emit(&Local.catalogue(request).await?, format)
        }
        Verb::Plan {
            materiality,
            confidence,
            capabilities,
        } => {
            let request = PlanRequest {
                context: context(),
                materiality,
                confidence,
                capabilities,
            };
            emit(&select_api(&global).await?.plan(request).await?, format)
        }
        Verb::Record {
            file,
            template,
            dry_run,
        } => {
            let Some(file) = file else {
                return Err(Error::Usage(format!(
                    "`record` needs `--file FILE` (or `--template {}`)",
                    template.map_or("KIND", |k| k.as_str())
                ))
                .into());
            };
            let record = read_record_input(&file)?;
            note_where_records_go(&ctx, &global);
            let request = RecordRequest {
                context: context(),
                record,
                dry_run,
            };
            let api = select_api(&global).await?;
            let stored = api.record(request).await?;
            if !dry_run {
                return emit(&stored, format);
            }
            // The impact of a superseding conclusion: what cites the one it replaces.
            let impact = match crate::render::downstream::DryRun::supersedes(&stored) {
                Some(old) => Some(
                    api.explain(ExplainRequest {
                        context: context(),
                        id: old.into(),
                        downstream: true,
                    })
                    .await?
                    .if_superseded,
                ),
                None => None,
            };
            emit(
                &crate::render::downstream::DryRun::new(stored, impact),
                format,
            )
        }
        Verb::Context => context::run(select_api(&global).await?.as_ref(), &ctx, format).await,
        Verb::Doctor => {
            let socket = paths::socket_path(global.socket.as_deref());
            doctor::run(&ctx, &socket, format).await
        }
        Verb::Schema { .. }
        | Verb::Daemon { .. }
        | Verb::Completions { .. }
        | Verb::Man
        | Verb::Mesh { .. } => {
            // Answered by `without_context` before the context was resolved.
            Ok(without_context(&verb, &global).await?.unwrap_or(0))
        }
        Verb::Status => {
            let request = StatusRequest { context: context() };
            emit(&select_api(&global).await?.status(request).await?, format)
        }
        Verb::Spend => {
            let request = SpendRequest { context: context() };
            emit(&select_api(&global).await?.spend(request).await?, format)
        }
        Verb::Explain { id, downstream } => {
            let request = ExplainRequest {
                context: context(),
                id: id.into(),
                downstream,
            };
            emit(&select_api(&global).await?.explain(request).await?, format)
        }
        Verb::Tree {
            depth,
            show_superseded,
        } => {
            let request = TreeRequest {
                context: context(),
                depth,
                show_superseded,
            };
            emit(&select_api(&global).await?.tree(request).await?, format)
        }
        Verb::Trust => trust::run(&ctx),
        Verb::Invariant { action } => invariant::run(&action, &global, &ctx).await,
        Verb::Init { hosts, dry_run } => {
            crate::init::run(&ctx.root, hosts.as_deref(), dry_run, format)
        }
        Verb::Adopt { all } => adopt::run(&ctx, global.task.is_some(), all, format),
        Verb::Cockpit { open } => {
            cockpit::run(select_api(&global).await?.as_ref(), &ctx, open, format).await
        }
        Verb::Mcp { wait_cap } => {
            let config = crate::mcp::Config {
                wait_cap: wait_cap.map_or(crate::mcp::DEFAULT_WAIT_CAP, |t| t.duration()),
            };
            serve_mcp(&global, config).await?;
            Ok(0)
        }
        Verb::Reviews { action: None } => {
            reviews::list(select_api(&global).await?.as_ref(), format).await
        }
        Verb::Reviews {
            action: Some(args::ReviewsAction::Answer { id, file }),
        } => {
            let file = if file == Path::new("-") {
                file
            } else {
                absolute_from_cwd(&file)?
            };
            reviews::answer(select_api(&global).await?.as_ref(), &id, &file, format).await
        }
        Verb::Check { path } => {
            let path = path.map(|p| absolute_from_cwd(&p)).transpose()?;
            let request = CheckRequest {
                context: context(),
                path,
            };
            let report = select_api(&global).await?.check(request).await?;
            emit(&report, format)?;
            Ok(if report.findings.is_empty() { 0 } else { 1 })
        }
        Verb::Verify { all } => {
            if all && global.task.is_some() {
                return Err(Error::Usage(
                    "`--all` walks every task; drop `--task`, or drop `--all` to walk one".into(),
                )
                .into());
            }
            let request = VerifyRequest {
                context: context(),
                all,
            };
            let report = select_api(&global).await?.verify(request).await?;
            emit(&report, format)?;
            Ok(if report.passed() { 0 } else { 1 })
        }
    }
}

/// The verbs that need no request context (no root, task or catalogue): answered before
/// one is resolved, so they work anywhere. `None` for every other verb.
async fn without_context(verb: &Verb, global: &GlobalFlags) -> anyhow::Result<Option<i32>> {
    let format = global.format;
    let socket = || paths::socket_path(global.socket.as_deref());
    let code = match verb {
        Verb::Schema { kind } => {
            print_stdout(schema::schema(kind)?)?;
            0
        }
        Verb::Record {
            template: Some(kind),
            ..
        } => {
            let skeleton = crate::core::writer::template(*kind);
            let text = match format {
                Format::Yaml => serde_yaml_ng::to_string(&skeleton)?,
                _ => serde_json::to_string_pretty(&skeleton)?,
            };
            print_stdout(&text)?;
            0
        }
        Verb::Completions { shell } => {
            completions::write(&completions::completions(*shell))?;
            0
        }
        Verb::Man => {
            completions::write(&completions::man().context("cannot write the manual page")?)?;
            0
        }
        Verb::Mesh { action } => mesh::run(action, global.format)?,
        Verb::Daemon { action } => match action {
            args::DaemonAction::Status => daemon::status(&socket(), format).await?,
            args::DaemonAction::Stop { timeout } => {
                daemon::stop(&socket(), timeout.duration(), format).await?
            }
            args::DaemonAction::Logs { lines, follow } => daemon::logs(*lines, *follow).await?,
        },
        _ => return Ok(None),
    };
    Ok(Some(code))
}

/// Outside a git repository the root is the working directory, which a user may not
/// expect: say on standard error where the record goes.
fn note_where_records_go(ctx: &RequestContext, global: &GlobalFlags) {
    if global.root.is_some() || global.state_dir.is_some() {
        return;
    }
    if ctx.root.ancestors().any(|dir| dir.join(".git").exists()) {
        return;
    }
    eprintln!(
        "note: `{}` is not in a git repository, so records go under it, to `{}`; pass \
         `--root DIR` (or run inside the project) to keep them with a project",
        ctx.root.display(),
        paths::state_dir(&ctx.root, None).display()
    );
}

/// `mcp`: the server over the façade. Its logs go to standard error only (standard
/// output is the protocol's); the daemon is made sure of in the background, so the host's
/// `initialize` is answered at once.
async fn serve_mcp(global: &GlobalFlags, config: crate::mcp::Config) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let (api, ensure): (std::sync::Arc<dyn Api>, Option<crate::mcp::Ensure>) = if global.no_daemon {
        (std::sync::Arc::new(Local), None)
    } else {
        let client = Client::deferred(paths::socket_path(global.socket.as_deref()));
        let socket = client.socket().to_path_buf();
        let autostart = !global.no_autostart;
        let ensure: crate::mcp::Ensure =
            std::sync::Arc::new(move || crate::client::ensure_daemon(&socket, autostart));
        (std::sync::Arc::new(client), Some(ensure))
    };
    crate::mcp::serve(api, ensure, global.locations(), config).await
}

/// A job verb through the daemon (or, with `--no-daemon`, the usage error it is).
async fn job_verb(
    verb: &JobVerb,
    global: &GlobalFlags,
    ctx: &RequestContext,
) -> anyhow::Result<i32> {
    if global.no_daemon {
        return jobs::run_job_verb(verb, &Local, global, ctx).await;
    }
    let api = select_api(global).await?;
    jobs::run_job_verb(verb, api.as_ref(), global, ctx).await
}

/// Print `value` in `format` on standard output; exit status 0.
fn emit(value: &impl Render, format: Format) -> anyhow::Result<i32> {
    print_stdout(&render::render(value, format))?;
    Ok(0)
}

fn absolute_from_cwd(path: &Path) -> anyhow::Result<std::path::PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    Ok(cwd.join(path))
}

/// The bytes of `file` (standard input only when it is `-`), at most `max` of them, and
/// its name for messages. `usage` says what the flag takes when the file cannot be read;
/// `over` what the input should hold when it is too large.
pub(crate) fn read_bounded_input(
    file: &Path,
    max: u64,
    usage: &str,
    over: &str,
) -> Result<(Vec<u8>, String), Error> {
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
            .take(max + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| Error::Usage(format!("cannot read {name}: {e}; {usage}")))?;
    if bytes.len() as u64 > max {
        return Err(Error::Usage(format!("{name} is larger than {over}")));
    }
    Ok((bytes, name))
}

/// The JSON object of `record --file FILE`; standard input only when FILE is `-`.
fn read_record_input(file: &Path) -> Result<serde_json::Value, Error> {
    let (bytes, name) = read_bounded_input(
        file,
        MAX_RECORD_BYTES,
        "`record --file` takes a readable file, or `-` for standard input",
        "1 MiB; a record holds references to evidence, not copies",
    )?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::Usage(format!(
            "{name} is not JSON ({e}); `record` takes one JSON object: `kind` plus your \
             fields, e.g. {{\"kind\": \"assessment\", \"subject\": \"...\", ...}}; \
             `advisor-consult record --template assessment` prints a skeleton to fill in"
        ))
    })
}
