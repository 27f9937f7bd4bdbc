//! The verbs of the network-free core, as plain functions over a [`RequestContext`].
//!
//! The CLI's in-process path (`--no-daemon`) and the daemon's handlers both call these,
//! so a verb behaves the same whichever way it is reached. Each function resolves the
//! context, opens the store and calls the core; errors are [`Error`]s that know
//! their wire code, their exit status and their HTTP status.

use crate::check::{self, CheckReport};
use crate::context::Resolved;
use crate::core::catalogue::CAPABILITIES;
use crate::core::chain::{self, Trust, VerifyReport};
use crate::core::cost::{self, SpendView};
use crate::core::policy;
use crate::core::records::{Confidence, Materiality, Plan, Record, TaskName};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::{self, ExplainView};
use crate::core::views::status::StatusView;
use crate::core::views::tree::{self, TreeView};
use crate::core::writer::{ReasonCode, Refusal};
use crate::error::Error;
use crate::protocol::RequestContext;
use crate::store::Store;

pub use crate::planning::{budget_state, plan_env, prompt_for};
use advisord_adapters::registry::Registry;
use std::path::Path;
use time::OffsetDateTime;

/// Store `input` (one JSON object: `kind` plus the caller's fields) through the writer.
///
/// A consultation is refused (`consultation_by_daemon_only`): every surface of `record`
/// comes here, and only the daemon's jobs write consultations
/// ([`Store::write_consultation`]). A bad task name is a refusal here (`invalid_task`,
/// exit 3), and nothing is created.
pub fn record(
    registry: &Registry,
    ctx: &RequestContext,
    input: &serde_json::Value,
) -> Result<Record, Error> {
    record_or_judge(registry, ctx, input, false)
}

/// [`record`], or with `dry_run` the record judged by the same writer under the same rules
/// and written nowhere ([`Store::dry_run`]): the record as it would be stored, or the
/// refusal.
pub fn record_or_judge(
    registry: &Registry,
    ctx: &RequestContext,
    input: &serde_json::Value,
    dry_run: bool,
) -> Result<Record, Error> {
    crate::core::writer::refuse_consultation_by_caller(input).map_err(Error::Refused)?;
    let resolved = Resolved::resolve(ctx, registry).map_err(|e| match e {
        Error::InvalidTask(invalid) => Error::Refused(Refusal {
            reason: ReasonCode::InvalidTask,
            message: invalid.to_string(),
        }),
        other => other,
    })?;
    let store = Store::shared(&resolved.state_dir);
    // Only a plan needs availability, which reads every task's consultations.
    let wants_plan = input.get("kind").and_then(|k| k.as_str()) == Some("plan");
    let env = match wants_plan {
        true => Some(plan_env(&resolved, &store, OffsetDateTime::now_utc())?),
        false => None,
    };
    // A conclusion accounts for the global and project invariants too.
    let is_conclusion = input.get("kind").and_then(|k| k.as_str()) == Some("conclusion");
    let invariants = match is_conclusion {
        true => crate::invariants::outer_here(&resolved.root)?.in_force,
        false => Vec::new(),
    };
    let record = match dry_run {
        true => store.dry_run(&resolved.task, input, env.as_ref(), &invariants)?,
        false if is_conclusion => store.write_under(&resolved.task, input, &invariants)?,
        false => store.write(&resolved.task, input, env.as_ref())?,
    };
    Ok(record)
}

/// Every advisor of the catalogue with its status and why, and capacity per capability.
pub fn advisors(registry: &Registry, ctx: &RequestContext) -> Result<AdvisorsView, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let store = Store::shared(&resolved.state_dir);
    let env = plan_env(&resolved, &store, OffsetDateTime::now_utc())?;
    // Information for the reader only: the plan above was computed without it.
    let mut view = AdvisorsView::new(env.mode, &resolved.catalogue, &env.availability)
        .with_track_records(store.track_records()?);
    // Only the embedded catalogue: the view keeps its plain shape.
    if resolved.catalogue_layers.len() > 1
        || resolved
            .catalogue_layers
            .first()
            .is_some_and(|l| l.source != crate::core::catalogue::EMBEDDED_SOURCE)
    {
        view.catalogue_files = resolved.catalogue_layers.clone();
    }
    Ok(view)
}

/// A plan preview (not recorded) for a materiality, confidence and capabilities.
pub fn plan_preview(
    registry: &Registry,
    ctx: &RequestContext,
    materiality: Materiality,
    confidence: Confidence,
    capabilities: Vec<String>,
) -> Result<Plan, Error> {
    if let Some(unknown) = capabilities
        .iter()
        .find(|c| !CAPABILITIES.contains(&c.as_str()))
    {
        return Err(Error::Usage(format!(
            "capability `{unknown}` is not known; accepted: {}",
            CAPABILITIES.join(", ")
        )));
    }
    let resolved = Resolved::resolve(ctx, registry)?;
    let store = Store::shared(&resolved.state_dir);
    let env = plan_env(&resolved, &store, OffsetDateTime::now_utc())?;
    Ok(policy::preview(
        materiality,
        confidence,
        &capabilities,
        &env,
    ))
}

/// The task's derived status; records after a break in the hash chain are marked and
/// count for nothing; what rests on a superseded decision is marked from the task's
/// downstream graph (kept by the store, so marking costs the supersessions, not the task).
pub fn status(registry: &Registry, ctx: &RequestContext) -> Result<StatusView, Error> {
    status_page(registry, ctx, None)
}

/// [`status`], or with `window` (`offset`, `limit`) only the assessments and timeline
/// entries `offset..offset + limit`, exactly as [`StatusView::page`] cuts the whole view:
/// the task's status index is kept by the store and fed only the records new since it was
/// last asked, and only the page's lines are materialised, so a page costs the page, not
/// the task (its totals are the whole task's).
pub fn status_page(
    registry: &Registry,
    ctx: &RequestContext,
    window: Option<(usize, usize)>,
) -> Result<StatusView, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let store = Store::shared(&resolved.state_dir);
    store.with_status(&resolved.task, |records, trust, graph, index| {
        let mut view = index.view(records, trust, window);
        view.mark_resting(graph.resting(trust));
        crate::core::views::priced::price_status_of(index, &mut view, &resolved.catalogue);
        view.journal = crate::journal::seam::state(&resolved.state_dir);
        Ok(view)
    })?
}

/// The tasks of the context's state directory, by name.
pub fn tasks(
    registry: &Registry,
    ctx: &RequestContext,
) -> Result<crate::protocol::TaskList, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let tasks = crate::store::Store::shared(&resolved.state_dir)
        .tasks()
        .map_err(Error::Store)?;
    Ok(crate::protocol::TaskList {
        tasks: tasks.into_iter().map(|t| t.to_string()).collect(),
    })
}

/// The provenance chain of record `id` of the task; with `downstream`, also what rests on
/// it (from the task's downstream graph).
pub fn explain(
    registry: &Registry,
    ctx: &RequestContext,
    id: &str,
    downstream: bool,
) -> Result<ExplainView, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let store = Store::shared(&resolved.state_dir);
    store.with_downstream(&resolved.task, |records, trust, graph| {
        let mut view = explain::explain_in(records, graph, id, trust)
            .map_err(|e| Error::NotFound(format!("{e} (task `{}`)", resolved.task)))?;
        if downstream {
            view.add_downstream(graph, trust);
        }
        crate::core::views::priced::price_explain(&mut view, &resolved.catalogue);
        Ok(view)
    })?
}

/// The task's records as a tree.
pub fn tree(
    registry: &Registry,
    ctx: &RequestContext,
    depth: Option<usize>,
    show_superseded: bool,
) -> Result<TreeView, Error> {
    with_task(registry, ctx, |resolved, records, trust| {
        let mut view = tree::tree(records, depth, show_superseded, trust);
        crate::core::views::priced::price_tree(&mut view, records, &resolved.catalogue);
        Ok(view)
    })
}

/// Walk the hash chain of the task, or of every task (`all`), reading every record file
/// afresh, and admit each record again through the writer's rules of today.
pub fn verify(registry: &Registry, ctx: &RequestContext, all: bool) -> Result<VerifyReport, Error> {
    verify_with_progress(registry, ctx, all, &mut |_| {})
}

/// How far `verify` has gone: in task `task`, `walked` of its `records` (0 walked: its
/// files are being read).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifyProgress {
    /// The task being verified.
    pub task: String,
    /// Its records walked so far.
    pub walked: usize,
    /// Its records.
    pub records: usize,
}

/// [`verify`], telling `progress` as each task's files are read and every
/// [`chain::VERIFY_STEP`] records walked (what the daemon streams to a client waiting for a
/// long verify).
pub fn verify_with_progress(
    registry: &Registry,
    ctx: &RequestContext,
    all: bool,
    progress: &mut dyn FnMut(VerifyProgress),
) -> Result<VerifyReport, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let store = Store::shared(&resolved.state_dir);
    let tasks = if all {
        store.tasks()?
    } else {
        vec![resolved.task.clone()]
    };
    verify_tasks(&store, &tasks, progress)
}

fn verify_tasks(
    store: &Store,
    tasks: &[TaskName],
    progress: &mut dyn FnMut(VerifyProgress),
) -> Result<VerifyReport, Error> {
    let mut reports = Vec::with_capacity(tasks.len());
    for task in tasks {
        progress(VerifyProgress {
            task: task.to_string(),
            walked: 0,
            records: 0,
        });
        let (named, parsed) = store.parsed_files(task)?;
        let files = chain::files_named(&named);
        let dir = store.task_dir(task).display().to_string();
        let verified =
            chain::verify_parsed(task, dir, &files, parsed, None, &mut |walked, records| {
                progress(VerifyProgress {
                    task: task.to_string(),
                    walked,
                    records,
                })
            });
        let mut report = verified.report;
        if let Some(machine) = crate::machine::installed() {
            let read: Vec<(&chain::File, &Record)> = verified
                .files
                .iter()
                .map(|&at| &files[at])
                .zip(&verified.records)
                .collect();
            judge_by_machine(&mut report, machine, store, task, &verified.digests, &read);
        }
        reports.push(report);
    }
    Ok(VerifyReport { tasks: reports })
}

/// What this machine adds to a task's verification: an `unattested` finding for each
/// consultation without a valid attestation of its key or of a runtime pinned here
/// (every one, said plainly, when it has neither), and whether the task is `foreign` (its anchored head not in place).
/// `digests` is the hash of each record file's bytes by its sequence, in file order
/// ([`chain::Verified::digests`]); `read` every record file that parses, with its record
/// (the walk's, not parsed again).
fn judge_by_machine(
    report: &mut chain::TaskReport,
    machine: &crate::machine::Machine,
    store: &Store,
    task: &TaskName,
    digests: &[(u64, String)],
    read: &[(&chain::File, &Record)],
) {
    use crate::machine::attest::Verdict;
    let key = machine.key();
    let pins = machine.pins();
    // Each consultation's verdict, side by side over the machine's cores.
    let verdicts = chain::parallel::map(read, chain::parallel::workers(read.len()), |(_, r)| {
        matches!(r.body, crate::core::records::Body::Consultation(_))
            .then(|| crate::machine::attest::verdict(r, &key, &pins))
    });
    for ((file, record), verdict) in read.iter().zip(verdicts) {
        // Another machine's consultation: its runtime's signature against the pins.
        if let Some(Verdict::Unattested(why)) = verdict {
            report.findings.push(chain::Finding {
                file: file.name.to_string(),
                sequence: file.sequence,
                problem: chain::Problem::Unattested,
                reason: None,
                message: format!("consultation `{}` {}", record.id(), why.message()),
            });
        }
    }
    report.findings.sort_by_key(|f| f.sequence);
    let anchored = machine.anchors(store.state_dir()).head(task);
    report.foreign = chain::foreign_by_digests(task, anchored.as_ref(), digests);
    report.trust = chain::TaskTrust::of(report.foreign.as_deref());
}

/// Provider-independence and CI-credential findings for the root, or `path` under it.
pub fn check(
    registry: &Registry,
    ctx: &RequestContext,
    path: Option<&Path>,
) -> Result<CheckReport, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let path = path.map(|p| resolved.root.join(p));
    if let Some(path) = &path {
        // Outside the root is a usage error, not a pass that scanned nothing.
        if let Err(note) = check::scope_of(&resolved.root, path) {
            if path.exists() {
                return Err(Error::Usage(format!(
                    "{note}; `check --path` takes a directory or file under the root (pass \
                     `--root DIR` to check another project)"
                )));
            }
        }
        if !path.exists() {
            return Err(Error::Usage(format!(
                "`--path {}` does not exist; name a directory or file under the root `{}`",
                path.display(),
                resolved.root.display()
            )));
        }
    }
    let mut report = check::run(&resolved.root, &resolved.catalogue, path.as_deref());
    // A gate fails on a forged or edited record as well: every task's chain is walked.
    let store = Store::shared(&resolved.state_dir);
    let verified = verify_tasks(&store, &store.tasks()?, &mut |_| {})?;
    report.add_verify(&resolved.root, &verified);
    Ok(report)
}

/// Spend per advisor, task and day across every task of the state directory, and the
/// state of every budget in force.
pub fn spend(registry: &Registry, ctx: &RequestContext) -> Result<SpendView, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    let history = Store::open(&resolved.state_dir).consultations_all_tasks()?;
    let now = OffsetDateTime::now_utc();
    let budgets = budget_state(&resolved, &history, now);
    Ok(cost::spend(
        &history,
        &resolved.catalogue,
        budgets,
        now,
        resolved.utc_offset,
    ))
}

/// Call `f` with the task's records and what the hash chain vouches for.
fn with_task<R>(
    registry: &Registry,
    ctx: &RequestContext,
    f: impl FnOnce(&Resolved, &[Record], &Trust) -> Result<R, Error>,
) -> Result<R, Error> {
    let resolved = Resolved::resolve(ctx, registry)?;
    // What the hash chain vouches for is judged on the files as they are now (a file
    // changed after the daemon cached it must show). The process's shared cache answers
    // once it has checked each record file's identity (`stat`: inode, size, modification
    // and change times) against what it read; a file that differs makes it read the task
    // again. `verify` and `check` read every byte instead.
    let store = Store::shared(&resolved.state_dir);
    store.with_trusted_records(&resolved.task, |records, trust| {
        f(&resolved, records, trust)
    })?
}

/// The effective catalogue of `ctx`: its files, in order, and the merged content.
pub fn catalogue(
    registry: &Registry,
    ctx: &RequestContext,
) -> Result<crate::core::catalogue::CatalogueView, Error> {
    Ok(crate::context::effective_catalogue(ctx, registry)?.view())
}
