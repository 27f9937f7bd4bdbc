//! The verbs that go through the daemon's job queue: `--assessment ID` (and the
//! consultation half of `ask`), `jobs`, `wait`, `cancel`, and the `demo`.
//!
//! A consultation is queued, then followed on the job's event stream while
//! [`progress::Progress`] shows each advisor; the result is the job (its typed shape in
//! `json`/`yaml`) with the plan and each outcome in `plain`. Exit status: 0 when
//! the job is done with a completed consultation (or nobody was selected); 1 when the plan
//! selected someone and no consultation completed, or the job failed or was cancelled; 5
//! when `wait --timeout` runs out; 130 on Ctrl-C, which cancels a job this invocation
//! queued (but not one it only `wait`s for). These verbs need the daemon: with
//! `--no-daemon` they are a usage error (exit 2).

mod demo;
pub mod progress;

pub use demo::{hidden_entry, DEMO_ADVISOR_ARG};

use super::args::GlobalFlags;
use super::output::print_stdout;
use crate::core::records::Assessment;
use crate::error::Error;
use crate::facade::{needs_daemon, Api};
use crate::follow::Follower;
use crate::paths;
use crate::protocol::{
    CancelRequest, ConsultRequest, EventsRequest, ExplainRequest, JobId, JobRequest, JobState,
    JobsRequest, PlanRequest, RecordId, RequestContext, Timeout,
};
use crate::render::job::{JobListView, JobReport, JobView, Seen};
use crate::render::preview::PromptPreview;
use crate::render::{self, Format};
use crate::service;
use progress::{Progress, Target};
use std::path::Path;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

/// A verb that goes through the daemon's job queue, handed to [`run_job_verb`].
#[derive(Debug, Clone, PartialEq)]
pub enum JobVerb {
    /// `--assessment ID` (and the consultation half of `ask`).
    Consult(ConsultVerb),
    /// `jobs`.
    Jobs,
    /// `wait JOB [--timeout SECS]`.
    Wait {
        /// The job id.
        job: JobId,
        /// Give up after this long (exit 5).
        timeout: Option<Timeout>,
    },
    /// `cancel JOB`.
    Cancel {
        /// The job id.
        job: JobId,
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

/// A consultation to queue for a recorded assessment, as the command line gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsultVerb {
    /// The assessment id.
    pub assessment: RecordId,
    /// A question for the advisors besides the assessment's own.
    pub question: Option<String>,
    /// The job's timeout (the daemon's default when absent).
    pub timeout: Option<Timeout>,
    /// An opinion already given.
    pub prior_opinion: Option<String>,
    /// Print the job id at once instead of waiting.
    pub detach: bool,
    /// Print the prompt the advisors would receive instead of consulting them.
    pub preview_prompt: bool,
}

// The flags become the verb here, so that the flags (`args.rs`) know nothing of the verbs.
impl super::args::ConsultArgs {
    /// The consultation to queue, as `--assessment ID` would give it.
    pub fn into_request(self) -> ConsultVerb {
        self.options.request(self.id.into())
    }
}

impl super::args::ConsultOptions {
    /// The consultation to queue for `assessment`.
    pub fn request(self, assessment: crate::protocol::RecordId) -> ConsultVerb {
        ConsultVerb {
            assessment,
            question: self.question,
            timeout: self.timeout,
            prior_opinion: self.prior_opinion,
            detach: self.detach,
            preview_prompt: self.preview_prompt,
        }
    }
}

/// The exit status of an interrupted verb.
pub const EXIT_INTERRUPTED: i32 = 130;

/// The exit status of a wait that ran out of time.
pub const EXIT_WAIT_TIMED_OUT: i32 = 5;

/// How long a cancellation after Ctrl-C may take before the client gives up on it.
const CANCEL_BOUND: Duration = Duration::from_secs(10);

/// Run a job verb through `api`; `Ok` carries the exit status.
pub async fn run_job_verb(
    verb: &JobVerb,
    api: &dyn Api,
    global: &GlobalFlags,
    ctx: &RequestContext,
) -> anyhow::Result<i32> {
    let format = global.format;
    let socket = paths::socket_path(global.socket.as_deref());
    if !matches!(verb, JobVerb::Consult(_)) {
        require_daemon(global, verb.name())?;
    }
    match verb {
        JobVerb::Consult(request) => consult(api, &socket, ctx, request, format).await,
        JobVerb::Jobs => list(api, ctx, format).await,
        JobVerb::Wait { job, timeout } => wait(api, &socket, job, *timeout, format).await,
        JobVerb::Cancel { job } => cancel(api, job, format).await,
        JobVerb::Demo { keep } => demo::run(format, *keep).await,
    }
}

/// A usage error (exit 2) when `--no-daemon` is given to a verb that needs the daemon.
pub fn require_daemon(global: &GlobalFlags, verb: &str) -> Result<(), Error> {
    if global.no_daemon {
        return Err(needs_daemon(verb));
    }
    Ok(())
}

/// The interrupt signal, registered now so a Ctrl-C that comes while a request is under
/// way is seen afterwards instead of killing the process with the job left running.
fn interrupt_signal() -> anyhow::Result<Signal> {
    Ok(signal(SignalKind::interrupt())?)
}

async fn consult(
    api: &dyn Api,
    socket: &Path,
    ctx: &RequestContext,
    request: &ConsultVerb,
    format: Format,
) -> anyhow::Result<i32> {
    if request.preview_prompt {
        let explained = api
            .explain(ExplainRequest {
                context: ctx.clone(),
                id: request.assessment.clone(),
                downstream: false,
            })
            .await?;
        let assessment = explained
            .assessment
            .filter(|a| a.id == request.assessment.as_str())
            .ok_or_else(|| {
                Error::Usage(format!(
                    "`{}` is not an assessment; name the assessment to consult on \
                     (`advisor-consult status` lists them)",
                    request.assessment
                ))
            })?;
        let preview = PreviewPrompt {
            assessment: Some(request.assessment.to_string()),
            fields: &assessment.fields,
            question: request.question.as_deref(),
            prior_opinion: request.prior_opinion.as_deref(),
        };
        return preview.print(api, ctx, format).await;
    }
    let mut interrupt = interrupt_signal()?;
    let consult = ConsultRequest {
        context: ctx.clone(),
        assessment: request.assessment.clone(),
        question: request.question.clone(),
        prior_opinion: request.prior_opinion.clone(),
        timeout: request.timeout,
    };
    if request.detach {
        // The plain `202`: nothing to follow.
        let job = api.consult(consult).await?;
        print_stdout(&detached_text(&job.id, &job.assessment, format))?;
        return Ok(0);
    }
    // The events on the connection that queued the job, when the daemon streams them.
    let (job, events) = api.consult_following(consult).await?;
    let mut progress = Progress::new(Target::Stderr);
    progress.queued(&job);
    let following = Following {
        api,
        socket,
        job: &job.id,
    };
    match following
        .follow_from(events, &mut progress, Some(&mut interrupt), None)
        .await?
    {
        Followed::Ended(report) => finish(&report, format),
        Followed::TimedOut(_) => unreachable!("a consultation is followed without a deadline"),
        Followed::Interrupted => {
            progress.finish();
            cancel_after_interrupt(api, &job.id, &mut interrupt).await;
            interrupted(
                &format!("interrupted: job `{}` was cancelled", job.id),
                format,
            )
        }
    }
}

/// `--preview-prompt`: the prompt a consultation on an assessment would send, and who a
/// plan would select now to receive it. Nothing is sent and nothing is recorded.
pub struct PreviewPrompt<'a> {
    /// The assessment's id, when it is recorded (`ask` previews one it did not record).
    pub assessment: Option<String>,
    /// Its fields.
    pub fields: &'a Assessment,
    /// `--question`.
    pub question: Option<&'a str>,
    /// `--prior-opinion`.
    pub prior_opinion: Option<&'a str>,
}

impl PreviewPrompt<'_> {
    /// Print the preview in `format`; exit status 0.
    pub async fn print(
        &self,
        api: &dyn Api,
        ctx: &RequestContext,
        format: Format,
    ) -> anyhow::Result<i32> {
        let plan = api
            .plan(PlanRequest {
                context: ctx.clone(),
                materiality: self.fields.materiality,
                confidence: self.fields.confidence,
                capabilities: self.fields.capabilities.clone(),
            })
            .await?;
        let invariants = crate::cli::invariant::list(ctx)?.invariants;
        let prompt =
            service::prompt_for(self.fields, self.question, self.prior_opinion, &invariants);
        let advisors = plan.selected.into_iter().map(|s| s.advisor).collect();
        let preview = PromptPreview::new(self.assessment.clone(), advisors, prompt);
        print_stdout(&render::render(&preview, format))?;
        Ok(0)
    }
}

/// Cancel `job` after a Ctrl-C, within [`CANCEL_BOUND`]; a second Ctrl-C stops waiting.
async fn cancel_after_interrupt(api: &dyn Api, job: &JobId, interrupt: &mut Signal) {
    eprintln!("interrupted: cancelling job {job}");
    let request = CancelRequest { id: job.clone() };
    tokio::select! {
        cancelled = tokio::time::timeout(CANCEL_BOUND, api.cancel(request)) => match cancelled {
            Ok(Ok(job)) => eprintln!("job {} {}", job.id, job.state.as_str()),
            Ok(Err(e)) => eprintln!("error: job {job} could not be cancelled: {e}"),
            Err(_) => eprintln!(
                "error: job {job} did not confirm its cancellation within {} s; check with \
                 `advisor-consult jobs`",
                CANCEL_BOUND.as_secs()
            ),
        },
        _ = interrupt.recv() => eprintln!(
            "interrupted again: not waiting for job {job} to stop (`advisor-consult jobs` \
             shows it)"
        ),
    }
}

async fn wait(
    api: &dyn Api,
    socket: &Path,
    job: &JobId,
    timeout: Option<Timeout>,
    format: Format,
) -> anyhow::Result<i32> {
    let mut interrupt = interrupt_signal()?;
    let deadline = timeout.map(|t| t.deadline_from(Instant::now()));
    let mut progress = Progress::new(Target::Stderr);
    // Events are stamped from when the job was queued, not from when we joined.
    if let Ok(found) = api.job(JobRequest { id: job.clone() }).await {
        progress.joined(&found);
    }
    let following = Following { api, socket, job };
    match following
        .follow(&mut progress, Some(&mut interrupt), deadline)
        .await?
    {
        Followed::Ended(report) => finish(&report, format),
        Followed::TimedOut(seen) => {
            progress.finish();
            eprintln!(
                "job {job} has not ended after {} s; it goes on: wait again, or stop it \
                 with `advisor-consult cancel {job}`",
                timeout.map(|t| t.as_secs_f64()).unwrap_or_default()
            );
            if matches!(format, Format::Json | Format::Yaml) {
                // The job as it stands, with the outcomes recorded so far, and the code.
                let now = api.job(JobRequest { id: job.clone() }).await?;
                let mut outcomes = seen.report(now).outcomes();
                outcomes.code = Some(crate::protocol::codes::WAIT_TIMED_OUT.to_string());
                let text = match format {
                    Format::Yaml => serde_yaml_ng::to_string(&outcomes)?,
                    _ => serde_json::to_string_pretty(&outcomes)?,
                };
                print_stdout(&text)?;
            }
            Ok(EXIT_WAIT_TIMED_OUT)
        }
        Followed::Interrupted => {
            progress.finish();
            eprintln!(
                "interrupted: stopped waiting; job {job} goes on (`advisor-consult cancel \
                 {job}` stops it)"
            );
            let message = format!(
                "interrupted: stopped waiting; job `{job}` goes on (`advisor-consult cancel \
                 {job}` stops it)"
            );
            interrupted(&message, format)
        }
    }
}

async fn cancel(api: &dyn Api, job: &JobId, format: Format) -> anyhow::Result<i32> {
    let job = api.cancel(CancelRequest { id: job.clone() }).await?;
    print_stdout(&render::render(&JobView(job), format))?;
    Ok(0)
}

async fn list(api: &dyn Api, ctx: &RequestContext, format: Format) -> anyhow::Result<i32> {
    let mut list = api.jobs(JobsRequest::default()).await?;
    // Filtered here rather than by the daemon's exact `root` match, so `--root .` and a
    // symlinked path name the same project as the path the job was queued with.
    let ours = same_dir(&ctx.root);
    list.jobs.retain(|job| ours(Path::new(&job.root)));
    print_stdout(&render::render(&JobListView(list), format))?;
    Ok(0)
}

/// A test for "names the same directory as `dir`": canonical paths when both resolve,
/// the paths as written otherwise.
fn same_dir(dir: &Path) -> impl Fn(&Path) -> bool {
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    move |other: &Path| {
        std::fs::canonicalize(other).unwrap_or_else(|_| other.to_path_buf()) == canonical
    }
}

/// Print the report and say on standard error why the exit status is not 0.
fn finish(report: &JobReport, format: Format) -> anyhow::Result<i32> {
    print_stdout(&render::render(report, format))?;
    let job = &report.job;
    let code = report.exit_code();
    if code != 0 {
        let why = match job.state {
            JobState::Done => "the plan selected advisors and none of them completed".to_string(),
            state => format!(
                "the job ended {}{}",
                state.as_str(),
                job.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        };
        eprintln!("job {}: {why}", job.id);
    }
    Ok(code)
}

/// Ctrl-C ended the verb: exit 130, with the error object on standard output in `json`
/// and `yaml` (the message is already on standard error).
fn interrupted(message: &str, format: Format) -> anyhow::Result<i32> {
    if matches!(format, Format::Json | Format::Yaml) {
        let text = super::exit::error_text(crate::protocol::codes::INTERRUPTED, message, format);
        print_stdout(&text)?;
    }
    Ok(EXIT_INTERRUPTED)
}

/// What `--detach` prints: the job id alone, or `{"id": JOB, "assessment": ID}` (the
/// assessment consulted on, so that `ask --detach` gives both ids it made).
fn detached_text(id: &JobId, assessment: &RecordId, format: Format) -> String {
    match format {
        Format::Plain | Format::Table => id.to_string(),
        Format::Json => {
            serde_json::to_string_pretty(&serde_json::json!({ "id": id, "assessment": assessment }))
                .unwrap_or_else(|_| id.to_string())
        }
        Format::Yaml => format!("id: {id}\nassessment: {assessment}"),
    }
}

/// How following a job ended.
enum Followed {
    /// The job ended; here it is with the records seen on its stream.
    Ended(Box<JobReport>),
    /// Ctrl-C.
    Interrupted,
    /// The deadline passed first; the records seen until then.
    TimedOut(Box<Seen>),
}

/// Resolves when `signal` (if any) is received.
async fn received(signal: &mut Option<&mut Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// One job followed on its event stream through the façade.
struct Following<'a> {
    api: &'a dyn Api,
    /// The daemon's socket, named when the daemon stops under the job.
    socket: &'a Path,
    job: &'a JobId,
}

impl Following<'_> {
    /// Follow the job's events until it ends, showing progress, until `interrupt`
    /// (Ctrl-C) or the deadline.
    async fn follow(
        &self,
        progress: &mut Progress,
        interrupt: Option<&mut Signal>,
        deadline: Option<Instant>,
    ) -> anyhow::Result<Followed> {
        self.follow_from(None, progress, interrupt, deadline).await
    }

    /// [`Following::follow`] on `events` (the job's from its first) when given, else on
    /// a stream asked for now.
    async fn follow_from(
        &self,
        events: Option<crate::facade::EventStream>,
        progress: &mut Progress,
        mut interrupt: Option<&mut Signal>,
        deadline: Option<Instant>,
    ) -> anyhow::Result<Followed> {
        let job = self.job;
        let timeout = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(timeout);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let request = EventsRequest {
            id: job.clone(),
            from: 0,
        };
        let events = match events {
            Some(events) => events,
            None => tokio::select! {
                biased;
                () = received(&mut interrupt) => return Ok(Followed::Interrupted),
                () = &mut timeout => return Ok(Followed::TimedOut(Box::default())),
                events = self.api.events(request) => events?,
            },
        };
        let mut follower = Follower::new(events);
        loop {
            tokio::select! {
                biased;
                () = received(&mut interrupt) => return Ok(Followed::Interrupted),
                () = &mut timeout => return Ok(Followed::TimedOut(Box::new(follower.into_seen()))),
                next = follower.next() => match next? {
                    Some(event) => {
                        progress.event(&event);
                        if let Some(report) = follower.take_report() {
                            return Ok(Followed::Ended(Box::new(report)));
                        }
                    }
                    None => {
                        // The stream ended without `done`: the daemon is stopping (or the
                        // job ended as the stream was cut).
                        if let Ok(now) = self.api.job(JobRequest { id: job.clone() }).await {
                            if now.state.is_finished() {
                                progress.finish();
                                return Ok(Followed::Ended(Box::new(follower.into_report(now))));
                            }
                        }
                        progress.finish();
                        return Err(Error::Unreachable {
                            socket: self.socket.to_path_buf(),
                            reason: format!("the daemon stopped while job {job} was running"),
                            hint: format!(
                                "the job resumes when a daemon starts again; follow it with \
                                 `advisor-consult wait {job}`"
                            ),
                        }
                        .into());
                    }
                },
                _ = tick.tick() => progress.tick(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detached_prints_the_id_alone_or_an_object() {
        let id = JobId::from("01J");
        let assessment = RecordId::from("01A");
        assert_eq!(detached_text(&id, &assessment, Format::Plain), "01J");
        assert_eq!(detached_text(&id, &assessment, Format::Table), "01J");
        let json: serde_json::Value =
            serde_json::from_str(&detached_text(&id, &assessment, Format::Json)).unwrap();
        assert_eq!(json, serde_json::json!({"id": "01J", "assessment": "01A"}));
        let yaml: serde_json::Value =
            serde_yaml_ng::from_str(&detached_text(&id, &assessment, Format::Yaml)).unwrap();
        assert_eq!(yaml, json);
    }

    #[test]
    fn a_root_is_the_same_however_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&root, dir.path().join("link")).unwrap();
        let ours = same_dir(&root.join("."));
        assert!(ours(&root));
        assert!(ours(&dir.path().join("link")));
        assert!(ours(&dir.path().join("root/../root")));
        assert!(!ours(dir.path()));
        assert!(!ours(&dir.path().join("missing")));
    }

    #[test]
    fn no_daemon_is_a_usage_error_for_job_verbs() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            global: GlobalFlags,
        }
        let flags = Flags::try_parse_from(["x", "--no-daemon"]).unwrap().global;
        let err = require_daemon(&flags, "jobs").expect_err("refused");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("drop `--no-daemon`"), "{err}");
        let flags = Flags::try_parse_from(["x"]).unwrap().global;
        assert!(require_daemon(&flags, "jobs").is_ok());
    }
}
