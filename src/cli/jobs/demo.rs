//! `advisor-consult demo`: the whole product on a fresh machine with no keys.
//!
//! It makes a temporary project whose catalogue holds two *process* advisors that run this
//! very executable in a hidden mode ([`DEMO_ADVISOR_ARG`]: read the prompt on standard
//! input, wait, answer in JSON), one agreeing and one opposing; starts the `advisord`
//! beside this executable on a temporary socket and data directory; records an assessment;
//! consults both at once with live progress; then shows the plan, the consultations, the
//! disagreement that must be settled, a conclusion refused while it is not, the resolution,
//! the conclusion with its computed review, `status` and `tree`. Everything goes through
//! the real daemon, the real process adapter and the real writer. The daemon is stopped and
//! the directory removed at the end (kept with `--keep`), on error and on Ctrl-C too.

use super::super::exit::refusal_text;
use super::super::output::print_stdout;
use super::progress::{Progress, Target};
use super::{Followed, Following, EXIT_INTERRUPTED};
use crate::client::{self, Client};
use crate::core::records::{Record, EXECUTOR};
use crate::error::Error;
use crate::facade::Api;
use crate::protocol::{
    ConsultRequest, HealthRequest, RecordRequest, RequestContext, StatusRequest, Timeout,
    TreeRequest,
};
use crate::render::job::{duration_text, JobReport};
use crate::render::text::Out;
use crate::render::{self, Format};
use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The hidden first argument that makes this executable a scripted demo advisor:
/// `advisor-consult __demo-advisor --stance supports --delay-ms 1500`. It is not a verb
/// and `--help` does not list it.
pub const DEMO_ADVISOR_ARG: &str = "__demo-advisor";

/// How long each demo advisor takes to answer.
const ADVISOR_DELAY_MS: u64 = 1500;

/// How long the demo waits for its daemon to answer.
const DAEMON_START_BOUND: Duration = Duration::from_secs(10);

/// How long a stopping daemon gets before it is killed.
const DAEMON_STOP_BOUND: Duration = Duration::from_secs(5);

/// The task the demo records into.
const TASK: &str = "demo";

/// Run the hidden demo-advisor mode when `args` (the program name first) asks for it;
/// `None` means a normal invocation. Called before the command line is parsed.
pub fn hidden_entry(args: &[OsString]) -> Option<i32> {
    if args.get(1)?.to_str()? != DEMO_ADVISOR_ARG {
        return None;
    }
    Some(demo_advisor(&args[2..]))
}

/// A scripted advisor: reads the whole prompt, waits, prints a JSON answer whose stance is
/// the one asked for; with `--exit N` (N not 0) it fails with that status instead.
fn demo_advisor(args: &[OsString]) -> i32 {
    let mut stance = "supports".to_string();
    let mut delay_ms = 0u64;
    let mut exit = 0i32;
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(flag) = args.next() {
        let value = args.next();
        match (flag.as_str(), value) {
            ("--stance", Some(v)) => stance = v,
            ("--delay-ms", Some(v)) => match v.parse() {
                Ok(ms) => delay_ms = ms,
                Err(_) => {
                    eprintln!("error: `--delay-ms {v}` is not a whole number of milliseconds");
                    return 2;
                }
            },
            ("--exit", Some(v)) => match v.parse() {
                Ok(code) => exit = code,
                Err(_) => {
                    eprintln!("error: `--exit {v}` is not an exit status");
                    return 2;
                }
            },
            (other, _) => {
                eprintln!(
                    "error: `{other}` is not accepted; {DEMO_ADVISOR_ARG} takes `--stance S`, \
                     `--delay-ms N` and `--exit N`"
                );
                return 2;
            }
        }
    }
    // The prompt comes on standard input, closed after it: read it all, as a CLI would.
    let mut prompt = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut prompt) {
        eprintln!("error: cannot read the prompt on standard input: {e}");
        return 1;
    }
    std::thread::sleep(Duration::from_millis(delay_ms));
    if exit != 0 {
        eprintln!("scripted advisor failing with status {exit}, as asked");
        return exit;
    }
    let answer = demo_answer(&stance);
    println!("{answer}");
    0
}

/// The canned answer of a demo advisor for `stance`.
fn demo_answer(stance: &str) -> Value {
    match stance {
        "opposes" => json!({
            "conclusion": "Several worker processes will write at once; with WAL they \
                           still take turns on one write lock, so expect `database is \
                           locked` errors under load. Use one writer process.",
            "stance": "opposes",
            "assumptions": ["workers enqueue from several processes at once"],
            "risks": ["enqueue fails with `database is locked` at peak"],
            "actions": ["run 8 concurrent writers against the queue for a minute"],
            "falsifiers": ["8 concurrent writers for 60 s see no lock error"],
            "confidence": 0.6
        }),
        other => json!({
            "conclusion": "WAL lets readers run beside the one writer, and a busy timeout \
                           absorbs short write contention: enough for this queue.",
            "stance": other,
            "assumptions": ["write transactions stay under a few milliseconds"],
            "risks": ["long transactions would hold the write lock"],
            "actions": ["set busy_timeout to 5 s"],
            "falsifiers": ["p99 enqueue latency above 50 ms at 8 writers"],
            "confidence": 0.7
        }),
    }
}

/// A daemon started by the demo: stopped (SIGTERM, then SIGKILL past a bound) when dropped.
struct DaemonGuard {
    child: Child,
}

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let started = Instant::now();
        while started.elapsed() < DAEMON_STOP_BOUND {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The temporary place of the demo: removed when dropped unless kept.
struct Place {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    socket: PathBuf,
    data: PathBuf,
    catalogue: PathBuf,
}

impl Place {
    fn new(keep: bool) -> anyhow::Result<Place> {
        let mut dir = tempfile::Builder::new()
            .prefix("advisord-demo-")
            .tempdir()
            .context("cannot create a temporary directory for the demo")?;
        if keep {
            dir.disable_cleanup(true);
        }
        let base = dir.path().to_path_buf();
        let root = base.join("project");
        std::fs::create_dir_all(root.join(".git"))
            .with_context(|| format!("cannot create the demo project `{}`", root.display()))?;
        let catalogue = root.join(crate::context::PROJECT_CATALOGUE);
        std::fs::create_dir_all(catalogue.parent().unwrap_or(&root))?;
        Ok(Place {
            dir: Some(dir),
            socket: base.join("advisord.sock"),
            data: base.join("data"),
            root,
            catalogue,
        })
    }

    fn base(&self) -> &Path {
        self.dir.as_ref().map_or(self.root.as_path(), |d| d.path())
    }
}

/// The demo catalogue: two process advisors running this executable in its hidden mode.
fn catalogue_yaml(exe: &Path) -> anyhow::Result<String> {
    let advisor = |id: &str, title: &str, stance: &str| {
        json!({
            "id": id,
            "title": title,
            "transport": "process",
            "adapter": "process",
            "references": {"provider": "demo", "vendor": "demo", "model": format!("scripted-{stance}")},
            "executable": exe.display().to_string(),
            "capabilities": ["independent_reasoning", "code_review"],
            "args": [DEMO_ADVISOR_ARG, "--stance", stance, "--delay-ms", ADVISOR_DELAY_MS.to_string()],
        })
    };
    let catalogue = json!({
        "mode": "standard",
        "advisors": [
            advisor("demo-agree", "Scripted advisor that agrees", "supports"),
            advisor("demo-oppose", "Scripted advisor that opposes", "opposes"),
        ],
    });
    let yaml = serde_yaml_ng::to_string(&catalogue)?;
    Ok(format!(
        "# The demo's catalogue: two scripted advisors that run advisor-consult itself.\n{yaml}"
    ))
}

/// Where the narrative goes: standard output in `plain`/`table`, standard error when
/// standard output carries the typed shape.
struct Narrator {
    target: Target,
}

impl Narrator {
    fn heading(&self, number: usize, text: &str) {
        self.target.write(&format!("\n== {number}. {text}\n"));
    }

    /// Write `text`, wrapping any line wider than the terminal (long temporary paths).
    fn text(&self, text: &str) {
        let mut out = Out::new();
        for line in text.trim_end_matches('\n').lines() {
            if line.chars().count() <= render::WIDTH {
                out.line(line);
            } else {
                let indent = line.len() - line.trim_start().len();
                out.para(indent, 2, line.trim_start());
            }
        }
        self.target.write(&out.finish());
    }
}

/// Run the demo; `Ok` carries the exit status.
pub async fn run(format: Format, keep: bool) -> anyhow::Result<i32> {
    let place = Place::new(keep)?;
    let narrator = Narrator {
        target: match format {
            Format::Plain | Format::Table => Target::Stdout,
            Format::Json | Format::Yaml => Target::Stderr,
        },
    };
    let outcome = async {
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        tokio::select! {
            result = show(&place, &narrator, format) => result.map(Some),
            _ = interrupt.recv() => Ok(None),
        }
    }
    .await;
    // The daemon guard was dropped with `show`'s future: the daemon is stopped by now.
    let base = place.base().display().to_string();
    drop(place);
    match outcome {
        Ok(Some(summary)) => {
            if keep {
                narrator.text(&format!(
                    "\nkept {base}; look again with\n  advisor-consult --no-daemon --root \
                     {base}/project --task {TASK} tree"
                ));
            } else {
                narrator.text(&format!(
                    "\ndaemon stopped and {base} removed\n(`advisor-consult demo --keep` keeps it)"
                ));
            }
            if let Some(summary) = summary {
                print_stdout(&summary)?;
            }
            Ok(0)
        }
        Ok(None) => {
            eprintln!("interrupted: the demo's daemon is stopped and {base} removed");
            Ok(EXIT_INTERRUPTED)
        }
        Err(e) => Err(e.context(format!("the demo failed (its files: {base})"))),
    }
}

/// Every step of the demo; returns the typed summary to print in `json`/`yaml`.
async fn show(place: &Place, say: &Narrator, format: Format) -> anyhow::Result<Option<String>> {
    say.text(
        "advisord demo: two scripted advisors (one agrees, one opposes) consulted at once\n\
         through a real daemon, and every record the product keeps.",
    );
    let exe = std::env::current_exe().context("cannot find this executable")?;
    std::fs::write(&place.catalogue, catalogue_yaml(&exe)?)
        .with_context(|| format!("cannot write `{}`", place.catalogue.display()))?;

    say.heading(1, "A daemon on a temporary socket");
    let _daemon = start_daemon(place).await?;
    let client = Client::new(place.socket.clone());
    let health = client.health(HealthRequest::default()).await?;
    say.text(&format!(
        "advisord {} (pid {}) on {}",
        health.version,
        health.pid,
        place.socket.display()
    ));
    let ctx = context(place);

    say.heading(2, "An assessment, with its evidence");
    let assessment = record(&client, &ctx, assessment_input()).await?;
    say.text(&render::render(&assessment, Format::Plain));

    say.heading(3, "Consult: both advisors are asked at once");
    let started = Instant::now();
    let job = client
        .consult(ConsultRequest {
            context: ctx.clone(),
            assessment: assessment.id().into(),
            question: None,
            prior_opinion: None,
            timeout: Some(Timeout::from_secs_f64(30.0)?),
        })
        .await?;
    let mut progress = Progress::new(say.target);
    progress.queued(&job);
    let following = Following {
        api: &client,
        socket: &place.socket,
        job: &job.id,
    };
    let report: Box<JobReport> = match following.follow(&mut progress, None, None).await? {
        Followed::Ended(report) => report,
        Followed::Interrupted | Followed::TimedOut(_) => bail!("the demo's job did not end"),
    };
    let took = started.elapsed();
    let answered = report.consultations.len();
    say.text(&format!(
        "{answered} answers of {} each arrived in {}: the advisors ran concurrently\n\
         (one after the other would take {}).",
        duration_text(ADVISOR_DELAY_MS),
        duration_text(took.as_millis() as u64),
        duration_text(ADVISOR_DELAY_MS * answered as u64),
    ));
    if report.exit_code() != 0 || answered != 2 {
        bail!(
            "the demo's job ended {} with {answered} consultation(s) recorded; see {}",
            report.job.state.as_str(),
            place.data.join(crate::paths::LOG_FILE).display()
        );
    }

    say.heading(4, "The plan (computed by the policy, never typed)");
    let plan = report
        .plan
        .clone()
        .context("the job's stream carried no plan")?;
    say.text(&render::render(&plan, Format::Plain));

    say.heading(5, "The two consultations, recorded in plan order");
    for consultation in &report.consultations {
        say.text(&render::render(consultation, Format::Plain));
    }

    say.heading(
        6,
        "The disagreement: settled by an experiment, never by a vote",
    );
    let disagreement = report
        .disagreement
        .clone()
        .context("the job recorded no disagreement although an advisor opposes")?;
    say.text(&report.disagreement_text());

    say.heading(7, "Concluding now is refused by the writer");
    let conclusion = conclusion_input(&assessment, &report);
    let refusal = match record(&client, &ctx, conclusion.clone()).await {
        Ok(stored) => bail!(
            "the writer accepted conclusion {} over an unresolved disagreement",
            stored.id()
        ),
        Err(e) => match e.downcast_ref::<Error>().and_then(Error::refusal) {
            Some((reason, message)) => (reason.to_string(), message.to_string()),
            None => return Err(e),
        },
    };
    let mut refused = Out::new();
    refused.para(0, 2, &refusal_text(&refusal.0, &refusal.1, Format::Plain));
    say.text(&refused.finish());

    say.heading(8, "An experiment settles it: the resolution, with evidence");
    let resolution = record(&client, &ctx, resolution_input(&disagreement)).await?;
    say.text(&render::render(&resolution, Format::Plain));

    say.heading(9, "The conclusion: who reviewed it is computed");
    let concluded = record(&client, &ctx, conclusion).await?;
    say.text(&render::render(&concluded, Format::Plain));

    say.heading(10, "status: where the assessment stands");
    let status = client
        .status(StatusRequest {
            context: ctx.clone(),
        })
        .await?;
    say.text(&render::render(&status, Format::Plain));

    say.heading(11, "tree: the records as a tree");
    let tree = client
        .tree(TreeRequest {
            context: ctx.clone(),
            depth: None,
            show_superseded: false,
        })
        .await?;
    say.text(&render::render(&tree, Format::Plain));

    let summary = match format {
        Format::Json | Format::Yaml => {
            let value = json!({
                "job": report.job,
                "refused": {"reason": refusal.0, "message": refusal.1},
                "resolution": resolution,
                "conclusion": concluded,
                "status": status,
            });
            Some(match format {
                Format::Yaml => serde_yaml_ng::to_string(&value)?,
                _ => serde_json::to_string_pretty(&value)?,
            })
        }
        Format::Plain | Format::Table => None,
    };
    Ok(summary)
}

/// Start the `advisord` beside this executable on the demo's socket and data directory
/// (its log in the data directory) and wait for it to answer.
async fn start_daemon(place: &Place) -> anyhow::Result<DaemonGuard> {
    let daemon = client::daemon_executable().map_err(|reason| {
        anyhow::anyhow!(
            "{reason}; build both binaries (`cargo build --release`) and run the demo from there"
        )
    })?;
    std::fs::create_dir_all(&place.data)
        .with_context(|| format!("cannot create `{}`", place.data.display()))?;
    let log_path = place.data.join(crate::paths::LOG_FILE);
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create `{}`", log_path.display()))?;
    let child = Command::new(&daemon)
        .arg("--socket")
        .arg(&place.socket)
        .arg("--data-dir")
        .arg(&place.data)
        .arg("--grace")
        .arg("1")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: a Ctrl-C reaches the demo, which stops the daemon itself.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start `{}`", daemon.display()))?;
    let mut guard = DaemonGuard { child };
    let started = Instant::now();
    loop {
        if client::answers(&place.socket).is_ok() {
            return Ok(guard);
        }
        if let Ok(Some(status)) = guard.child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!(
                "the demo's daemon exited with {status}: {}",
                log.lines().last().unwrap_or("(no log)")
            );
        }
        if started.elapsed() > DAEMON_START_BOUND {
            bail!(
                "the demo's daemon did not answer on `{}` within {} s; see `{}`",
                place.socket.display(),
                DAEMON_START_BOUND.as_secs(),
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The demo's request context: its own root, task, catalogue and mode, whatever the
/// environment says (so `CI` or a disable list cannot empty the plan).
fn context(place: &Place) -> RequestContext {
    RequestContext {
        root: place.root.clone(),
        state_dir: None,
        task: Some(TASK.to_string()),
        catalogue_path: Some(place.catalogue.clone()),
        mode: Some("standard".to_string()),
        ci: None,
        disable: None,
        cooldown_s: None,
        path: std::env::var("PATH").ok(),
        budgets: Default::default(),
        utc_offset_s: None,
        credentials: Default::default(),
        present: Default::default(),
        asker: None,
        mesh_peers: Vec::new(),
    }
}

/// Store `input` through the daemon's writer.
async fn record(client: &Client, ctx: &RequestContext, input: Value) -> anyhow::Result<Record> {
    let request = RecordRequest {
        context: ctx.clone(),
        record: input,
        dry_run: false,
    };
    Ok(client.record(request).await?)
}

fn assessment_input() -> Value {
    json!({
        "kind": "assessment",
        "subject": "Use SQLite in WAL mode for the job queue",
        "materiality": "high",
        "confidence": "medium",
        "hypothesis": "SQLite in WAL mode with a busy timeout carries the queue's load",
        "facts": ["the queue takes about 40 jobs a minute at peak"],
        "assumptions": ["write transactions stay under a few milliseconds"],
        "evidence": [{
            "kind": "file",
            "ref": "src/queue.rs",
            "showed": "each enqueue is one short write transaction"
        }]
    })
}

fn resolution_input(disagreement: &Record) -> Value {
    json!({
        "kind": "resolution",
        "disagreement": disagreement.id(),
        "experiment": "8 writer processes enqueue for 60 s with busy_timeout at 5 s",
        "observed": "no lock error; p99 enqueue latency 12 ms",
        "favours": EXECUTOR,
        "evidence": [{
            "kind": "test",
            "ref": "tests/queue_contention.rs",
            "showed": "8 writers, 60 s: 0 lock errors, p99 12 ms"
        }]
    })
}

fn conclusion_input(assessment: &Record, report: &JobReport) -> Value {
    let consultations: Vec<&str> = report.consultations.iter().map(Record::id).collect();
    json!({
        "kind": "conclusion",
        "assessment": assessment.id(),
        "decision": "Use SQLite in WAL mode with busy_timeout at 5 s for the job queue",
        "rationale": "The contention experiment fits 8 writers well inside the budget; \
                      the opposing advisor's risk is real beyond that load.",
        "evidence": [{"kind": "test", "ref": "tests/queue_contention.rs"}],
        "consultations": consultations,
        "rejected_alternatives": ["one writer process in front of the queue"],
        "risks": ["more than 8 concurrent writers"],
        "validation_plan": "run tests/queue_contention.rs at 16 writers in CI"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hidden_mode_is_recognised_only_as_the_first_argument() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(hidden_entry(&args(&["advisor-consult", "status"])), None);
        assert_eq!(hidden_entry(&args(&["advisor-consult"])), None);
        assert_eq!(
            hidden_entry(&args(&["advisor-consult", "status", DEMO_ADVISOR_ARG])),
            None
        );
        // Bad flags are refused before any input is read.
        assert_eq!(
            hidden_entry(&args(&["advisor-consult", DEMO_ADVISOR_ARG, "--loud", "x"])),
            Some(2)
        );
        assert_eq!(
            hidden_entry(&args(&[
                "advisor-consult",
                DEMO_ADVISOR_ARG,
                "--delay-ms",
                "soon"
            ])),
            Some(2)
        );
        assert_eq!(
            hidden_entry(&args(&["advisor-consult", DEMO_ADVISOR_ARG, "--exit", "x"])),
            Some(2)
        );
    }

    #[test]
    fn answers_carry_the_stance_asked_for() {
        for stance in ["supports", "opposes", "alternative"] {
            let answer = demo_answer(stance);
            assert_eq!(answer["stance"], stance);
            assert!(answer["conclusion"].as_str().is_some_and(|c| c.len() > 20));
            assert!(answer["falsifiers"]
                .as_array()
                .is_some_and(|f| !f.is_empty()));
        }
    }

    #[test]
    fn the_catalogue_parses_with_two_process_advisors() {
        let yaml = catalogue_yaml(Path::new("/opt/demo dir/advisor-consult")).expect("yaml");
        let catalogue = crate::core::catalogue::Catalogue::parse(
            &yaml,
            "demo.yaml",
            &crate::context::validate_settings(&advisord_adapters::registry::Registry::builtin()),
        )
        .expect("the demo catalogue is valid");
        let ids: Vec<&str> = catalogue.advisors.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["demo-agree", "demo-oppose"]);
        assert!(catalogue
            .advisors
            .iter()
            .all(|a| a.executable.as_deref() == Some("/opt/demo dir/advisor-consult")));
    }
}
