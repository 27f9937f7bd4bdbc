//! The verbs that go through the daemon's job queue: `--assessment ID` (and the
//! consultation half of `ask`), `jobs`, `wait`, `cancel`, and the `demo`.
//!
//! A consultation is queued, then followed on the job's event stream while
//! [`progress::Progress`] shows each advisor; the result is the job (its typed shape in
//! `json`/`yaml`) with the plan and each outcome in `plain`. Exit status (SPEC §10): 0 when
//! the job is done with a completed consultation (or nobody was selected); 1 when the plan
//! selected someone and no consultation completed, or the job failed or was cancelled; 5
//! when `wait --timeout` runs out; 130 on Ctrl-C, which cancels a job this invocation
//! queued (but not one it only `wait`s for). These verbs need the daemon: with
//! `--no-daemon` they are a usage error (exit 2).

mod demo;
pub mod progress;

pub use demo::{hidden_entry, DEMO_ADVISOR_ARG};

use crate::cli::{print_stdout, ConsultRequest, JobVerb};
use crate::client::{Client, Remote};
use crate::context::{GlobalFlags, RequestContext};
use crate::core::records::{Body, ConsultationStatus, Record, EXECUTOR};
use crate::protocol::{self, Event, ExchangeStatus, Job, JobList, JobState};
use crate::render::text::{Out, Table};
use crate::render::{self, Format, Render};
use crate::service::ServiceError;
use progress::{duration_text, outcome_text, Progress, Target};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

/// The exit status of an interrupted verb (SPEC §10).
pub const EXIT_INTERRUPTED: i32 = 130;

/// The exit status of a wait that ran out of time (SPEC §10).
pub const EXIT_WAIT_TIMED_OUT: i32 = 5;

/// How long a cancellation after Ctrl-C may take before the client gives up on it.
const CANCEL_BOUND: Duration = Duration::from_secs(10);

/// Run a job verb; `Ok` carries the exit status (SPEC §10).
pub fn run_job_verb(
    verb: &JobVerb,
    global: &GlobalFlags,
    ctx: &RequestContext,
) -> anyhow::Result<i32> {
    if let JobVerb::Demo { keep } = verb {
        // The demo starts a daemon of its own, whatever the flags say.
        return demo::run(global.format, *keep);
    }
    if let (JobVerb::Consult(request), true) = (verb, global.no_daemon) {
        // `ask` has recorded its assessment by now: say how to consult on it.
        return Err(ServiceError::Usage(format!(
            "consulting on assessment `{id}` needs the daemon (consultations run there), so \
             it cannot be done with `--no-daemon`; run `advisor-consult --assessment {id}` \
             without `--no-daemon` (the daemon is started if none answers)",
            id = request.assessment
        ))
        .into());
    }
    require_daemon(global, verb.name())?;
    let remote = Remote::connect(global, ctx.clone())?;
    let format = global.format;
    match verb {
        JobVerb::Consult(request) => consult(&remote, request, format),
        JobVerb::Jobs => list(&remote, format),
        JobVerb::Wait { job, timeout_s } => wait(&remote, job, *timeout_s, format),
        JobVerb::Cancel { job } => cancel(&remote, job, format),
        JobVerb::Demo { .. } => unreachable!("the demo is run above"),
    }
}

/// A usage error (exit 2) when `--no-daemon` is given to a verb that needs the daemon.
pub fn require_daemon(global: &GlobalFlags, verb: &str) -> Result<(), ServiceError> {
    if global.no_daemon {
        return Err(ServiceError::Usage(format!(
            "`{verb}` needs the daemon (consultations run there), so it cannot be used with \
             `--no-daemon`; drop `--no-daemon` (the daemon is started if none answers)"
        )));
    }
    Ok(())
}

/// The interrupt signal, registered now so a Ctrl-C that comes while a request is under
/// way is seen afterwards instead of killing the process with the job left running.
fn interrupt_signal() -> anyhow::Result<Signal> {
    Ok(signal(SignalKind::interrupt())?)
}

fn consult(remote: &Remote, request: &ConsultRequest, format: Format) -> anyhow::Result<i32> {
    let client = remote.client();
    remote.block_on(async {
        let mut interrupt = interrupt_signal()?;
        let job = client
            .consult(&protocol::ConsultRequest {
                context: remote.context().clone(),
                assessment: request.assessment.clone(),
                question: request.question.clone(),
                prior_opinion: request.prior_opinion.clone(),
                timeout_s: request.timeout_s,
            })
            .await?;
        if request.detach {
            print_stdout(&detached_text(&job.id, format))?;
            return Ok(0);
        }
        let mut progress = Progress::new(Target::Stderr);
        progress.queued(&job);
        match follow(client, &job.id, &mut progress, Some(&mut interrupt), None).await? {
            Followed::Ended(report) => finish(&report, format),
            Followed::TimedOut => unreachable!("a consultation is followed without a deadline"),
            Followed::Interrupted => {
                progress.finish();
                cancel_after_interrupt(client, &job.id, &mut interrupt).await;
                Ok(EXIT_INTERRUPTED)
            }
        }
    })
}

/// Cancel `job` after a Ctrl-C, within [`CANCEL_BOUND`]; a second Ctrl-C stops waiting.
async fn cancel_after_interrupt(client: &Client, job: &str, interrupt: &mut Signal) {
    eprintln!("interrupted: cancelling job {job}");
    tokio::select! {
        cancelled = tokio::time::timeout(CANCEL_BOUND, client.cancel(job)) => match cancelled {
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

fn wait(remote: &Remote, job: &str, timeout_s: Option<f64>, format: Format) -> anyhow::Result<i32> {
    let client = remote.client();
    remote.block_on(async {
        let mut interrupt = interrupt_signal()?;
        let deadline = timeout_s.map(|s| Instant::now() + Duration::from_secs_f64(s));
        let mut progress = Progress::new(Target::Stderr);
        match follow(client, job, &mut progress, Some(&mut interrupt), deadline).await? {
            Followed::Ended(report) => finish(&report, format),
            Followed::TimedOut => {
                progress.finish();
                eprintln!(
                    "job {job} has not ended after {} s; it goes on: wait again, or stop it \
                     with `advisor-consult cancel {job}`",
                    timeout_s.unwrap_or_default()
                );
                if matches!(format, Format::Json | Format::Yaml) {
                    let now = client.job(job).await?;
                    print_stdout(&render::render(&JobView(now), format))?;
                }
                Ok(EXIT_WAIT_TIMED_OUT)
            }
            Followed::Interrupted => {
                progress.finish();
                eprintln!(
                    "interrupted: stopped waiting; job {job} goes on (`advisor-consult cancel \
                     {job}` stops it)"
                );
                Ok(EXIT_INTERRUPTED)
            }
        }
    })
}

fn cancel(remote: &Remote, job: &str, format: Format) -> anyhow::Result<i32> {
    let job = remote.block_on(remote.client().cancel(job))?;
    print_stdout(&render::render(&JobView(job), format))?;
    Ok(0)
}

fn list(remote: &Remote, format: Format) -> anyhow::Result<i32> {
    let mut list = remote.block_on(remote.client().jobs(None))?;
    // Filtered here rather than by the daemon's exact `root` match, so `--root .` and a
    // symlinked path name the same project as the path the job was queued with.
    let ours = same_dir(&remote.context().root);
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

/// What `--detach` prints: the id alone, or `{"id": ...}`.
fn detached_text(id: &str, format: Format) -> String {
    match format {
        Format::Plain | Format::Table => id.to_string(),
        Format::Json => serde_json::to_string_pretty(&serde_json::json!({ "id": id }))
            .unwrap_or_else(|_| id.to_string()),
        Format::Yaml => format!("id: {id}"),
    }
}

/// How following a job ended.
enum Followed {
    /// The job ended; here it is with the records seen on its stream.
    Ended(Box<JobReport>),
    /// Ctrl-C.
    Interrupted,
    /// The deadline passed first.
    TimedOut,
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

/// Follow `job`'s event stream until it ends, showing progress, until `interrupt` (Ctrl-C)
/// or the deadline.
async fn follow(
    client: &Client,
    job: &str,
    progress: &mut Progress,
    mut interrupt: Option<&mut Signal>,
    deadline: Option<Instant>,
) -> anyhow::Result<Followed> {
    let mut seen = Seen::default();
    let timeout = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut events = tokio::select! {
        biased;
        () = received(&mut interrupt) => return Ok(Followed::Interrupted),
        () = &mut timeout => return Ok(Followed::TimedOut),
        events = client.events(job) => events?,
    };
    loop {
        tokio::select! {
            biased;
            () = received(&mut interrupt) => return Ok(Followed::Interrupted),
            () = &mut timeout => return Ok(Followed::TimedOut),
            next = events.next() => match next? {
                Some(event) => {
                    progress.event(&event);
                    if let Some(ended) = seen.absorb(event) {
                        return Ok(Followed::Ended(Box::new(seen.report(ended))));
                    }
                }
                None => {
                    // The stream ended without `done`: the daemon is stopping (or the job
                    // ended as the stream was cut).
                    if let Ok(now) = client.job(job).await {
                        if now.state.is_finished() {
                            progress.finish();
                            return Ok(Followed::Ended(Box::new(seen.report(now))));
                        }
                    }
                    progress.finish();
                    return Err(crate::cli::backend::BackendError::Unreachable {
                        socket: client.socket().to_path_buf(),
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

/// The records a job's stream carried, for the report.
#[derive(Debug, Default)]
struct Seen {
    plan: Option<Record>,
    consultations: Vec<Record>,
    disagreement: Option<Record>,
}

impl Seen {
    /// Keep what `event` carries; the final job once it is `done`.
    fn absorb(&mut self, event: Event) -> Option<Job> {
        match event {
            Event::Plan { record, .. } => self.plan = Some(*record),
            Event::Recorded { record, .. } => self.consultations.push(*record),
            Event::Disagreement { record, .. } => self.disagreement = Some(*record),
            Event::Started { .. } | Event::Finished { .. } => {}
            Event::Done { result, .. } => return Some(*result),
        }
        None
    }

    fn report(self, job: Job) -> JobReport {
        JobReport {
            job,
            plan: self.plan,
            consultations: self.consultations,
            disagreement: self.disagreement,
        }
    }
}

/// A job as it ended, with the records its stream carried: the typed shape is the job
/// (SPEC §12); the plain text shows the plan and each outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct JobReport {
    /// The job.
    pub job: Job,
    /// The plan record, when the stream carried it.
    #[serde(skip)]
    pub plan: Option<Record>,
    /// The consultation records, in plan order.
    #[serde(skip)]
    pub consultations: Vec<Record>,
    /// The disagreement record, when one was recorded.
    #[serde(skip)]
    pub disagreement: Option<Record>,
}

impl JobReport {
    /// SPEC §10: 1 when the plan selected someone and no consultation completed, or the
    /// job did not end `done`; 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.job.state == JobState::Done && !self.job.none_completed() {
            0
        } else {
            1
        }
    }

    fn consultation(&self, id: Option<&str>) -> Option<&crate::core::records::Consultation> {
        let id = id?;
        self.consultations
            .iter()
            .find(|r| r.id() == id)
            .and_then(|r| match &r.body {
                Body::Consultation(c) => Some(c),
                _ => None,
            })
    }

    /// The advisor behind a position's source (`executor` or a consultation id).
    fn source_name(&self, source: &str) -> String {
        if source == EXECUTOR {
            return "the executor (you)".to_string();
        }
        match self
            .job
            .consultations
            .iter()
            .find(|c| c.record.as_deref() == Some(source))
        {
            Some(c) => c.advisor.clone(),
            None => source.to_string(),
        }
    }

    fn head(&self) -> String {
        let job = &self.job;
        let total = job.consultations.len();
        let completed = job
            .consultations
            .iter()
            .filter(|c| c.status == ExchangeStatus::Completed)
            .count();
        let mut head = format!("job {} {}", job.id, job.state.as_str());
        if total > 0 {
            head.push_str(&format!(": {completed} of {total} advisors completed"));
        }
        if let Some(reason) = &job.reason {
            head.push_str(&format!(" ({reason})"));
        }
        head
    }

    /// The disagreement part of the plain text: its positions and question.
    fn write_disagreement(&self, out: &mut Out) {
        let disagreement = self.disagreement.as_ref().and_then(|r| match &r.body {
            Body::Disagreement(d) => Some((r.id(), d)),
            _ => None,
        });
        match (disagreement, &self.job.disagreement) {
            (Some((id, d)), _) => {
                out.para(
                    0,
                    2,
                    &format!(
                        "disagreement {id}: settle it with an experiment (a resolution with \
                         evidence) before you conclude"
                    ),
                );
                for p in &d.positions {
                    out.para(
                        2,
                        2,
                        &format!("{}: {}", self.source_name(&p.source), p.position),
                    );
                }
                out.field(2, "question", &d.discriminating_question);
            }
            (None, Some(id)) => out.line(&format!(
                "disagreement {id}: settle it with an experiment before you conclude"
            )),
            (None, None) => {}
        }
    }

    /// The disagreement part of the plain text alone (empty when none).
    pub fn disagreement_text(&self) -> String {
        let mut out = Out::new();
        self.write_disagreement(&mut out);
        out.finish()
    }
}

impl Render for JobReport {
    fn plain(&self) -> String {
        let mut out = Out::new();
        let job = &self.job;
        out.para(0, 2, &self.head());
        let plan = self.plan.as_ref().and_then(|r| match &r.body {
            Body::Plan(p) => Some((r.id(), p)),
            _ => None,
        });
        match (plan, &job.plan) {
            (Some((id, plan)), _) => {
                out.line(&format!(
                    "plan {id}: mode {}, budget {}",
                    plan.mode.as_str(),
                    plan.budget
                ));
                if let Some(reuse) = &plan.reuse {
                    out.para(
                        2,
                        2,
                        &format!("reuses conclusion {reuse}: it already answers this subject"),
                    );
                }
                if plan.selected.is_empty() {
                    out.line("  nobody selected: decide locally");
                    for (i, step) in plan.local_review.iter().enumerate() {
                        out.para(2, 3, &format!("{}. {step}", i + 1));
                    }
                }
                for left in &plan.left_out {
                    out.para(2, 2, &format!("left out {}: {}", left.advisor, left.reason));
                }
            }
            (None, Some(id)) => out.line(&format!("plan {id}")),
            (None, None) => {}
        }
        for (i, c) in job.consultations.iter().enumerate() {
            let record = self.consultation(c.record.as_deref());
            let outcome = match (record, c.status) {
                (Some(r), _) => outcome_text(
                    r.status,
                    r.stance.map(|s| s.as_str()),
                    r.failure,
                    r.duration_ms,
                ),
                (None, ExchangeStatus::Completed) => "completed".to_string(),
                (None, ExchangeStatus::Failed) => {
                    outcome_text(ConsultationStatus::Failed, None, c.failure, None)
                }
                (None, ExchangeStatus::Pending) => "not asked".to_string(),
                (None, ExchangeStatus::Running) => "not recorded".to_string(),
            };
            out.para(2, 3, &format!("{}. {}: {outcome}", i + 1, c.advisor));
            if let Some(r) = record {
                out.field(5, "conclusion", r.conclusion.as_deref().unwrap_or(""));
                out.field(5, "diagnostic", r.diagnostic.as_deref().unwrap_or(""));
            }
            if let Some(id) = &c.record {
                out.line(&format!("     consultation {id}"));
            }
        }
        self.write_disagreement(&mut out);
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["advisor", "status", "stance", "duration", "record"]);
        for c in &self.job.consultations {
            let record = self.consultation(c.record.as_deref());
            let status = match (record, c.failure) {
                (_, Some(kind)) => format!("failed: {}", kind.as_str()),
                _ => serde_json::to_value(c.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            };
            table.row(&[
                c.advisor.clone(),
                status,
                record
                    .and_then(|r| r.stance)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
                record
                    .and_then(|r| r.duration_ms)
                    .map(duration_text)
                    .unwrap_or_default(),
                c.record.clone().unwrap_or_default(),
            ]);
        }
        let mut text = format!("{}\n", self.head());
        if !self.job.consultations.is_empty() {
            text.push('\n');
            text.push_str(&table.render());
        }
        if let Some(id) = &self.job.disagreement {
            text.push_str(&format!(
                "\ndisagreement {id}: settle it before you conclude\n"
            ));
        }
        text
    }
}

/// One job, as `cancel` and a timed-out `wait` print it.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
struct JobView(Job);

impl Render for JobView {
    fn plain(&self) -> String {
        let job = &self.0;
        let mut out = Out::new();
        let mut line = format!("job {} {}", job.id, job.state.as_str());
        if !job.state.is_finished() {
            line.push_str(" (still stopping: its exchanges are being stopped)");
        }
        if let Some(reason) = &job.reason {
            line.push_str(&format!(": {reason}"));
        }
        out.para(0, 2, &line);
        out.finish()
    }
}

/// The jobs of this root, as `jobs` prints them.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
struct JobListView(JobList);

fn answered(job: &Job) -> String {
    let completed = job
        .consultations
        .iter()
        .filter(|c| c.status == ExchangeStatus::Completed)
        .count();
    format!("{completed}/{}", job.consultations.len())
}

impl Render for JobListView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        if self.0.jobs.is_empty() {
            out.line("no jobs for this root: `advisor-consult --assessment ID` queues one");
            return out.finish();
        }
        for job in &self.0.jobs {
            out.line(&format!(
                "{}  {:<9}  task {}  {} completed",
                job.id,
                job.state.as_str(),
                job.task,
                answered(job)
            ));
            out.line(&format!(
                "  assessment {}, queued {}",
                job.assessment, job.created_at
            ));
        }
        out.finish()
    }

    fn table(&self) -> String {
        let mut table = Table::new(&["id", "state", "task", "completed", "created_at"]);
        for job in &self.0.jobs {
            table.row(&[
                job.id.clone(),
                job.state.as_str().to_string(),
                job.task.clone(),
                answered(job),
                job.created_at.clone(),
            ]);
        }
        table.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::JobConsultation;

    fn job(state: JobState, statuses: &[ExchangeStatus]) -> Job {
        Job {
            id: "J".into(),
            state,
            root: "/r".into(),
            task: "t".into(),
            assessment: "A".into(),
            plan: Some("P".into()),
            consultations: statuses
                .iter()
                .enumerate()
                .map(|(i, s)| JobConsultation {
                    advisor: format!("a{i}"),
                    record: None,
                    status: *s,
                    failure: None,
                })
                .collect(),
            disagreement: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            finished_at: None,
            reason: None,
        }
    }

    fn check(state: JobState, statuses: &[ExchangeStatus], expected: i32) {
        let report = Seen::default().report(job(state, statuses));
        assert_eq!(report.exit_code(), expected, "{state:?} {statuses:?}");
    }

    #[test]
    fn exit_status_of_a_job() {
        use ExchangeStatus::*;
        check(JobState::Done, &[], 0);
        check(JobState::Done, &[Completed], 0);
        check(JobState::Done, &[Failed, Completed], 0);
        check(JobState::Done, &[Failed], 1);
        check(JobState::Done, &[Failed, Failed], 1);
        check(JobState::Failed, &[], 1);
        check(JobState::Cancelled, &[Completed, Pending], 1);
    }

    #[test]
    fn detached_prints_the_id_alone_or_an_object() {
        assert_eq!(detached_text("01J", Format::Plain), "01J");
        assert_eq!(detached_text("01J", Format::Table), "01J");
        let json: serde_json::Value =
            serde_json::from_str(&detached_text("01J", Format::Json)).unwrap();
        assert_eq!(json, serde_json::json!({"id": "01J"}));
        let yaml: serde_json::Value =
            serde_yaml_ng::from_str(&detached_text("01J", Format::Yaml)).unwrap();
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
    fn the_report_json_is_the_job() {
        let report = Seen::default().report(job(JobState::Done, &[ExchangeStatus::Completed]));
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::to_value(&report.job).unwrap()
        );
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
