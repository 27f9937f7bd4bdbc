//! One consultation job, start to end: record (or find) the plan, ask every selected
//! advisor at once under one deadline, record each outcome in plan order as soon as it and
//! every earlier one are in, then record the disagreement if an answer diverges.
//!
//! Exactly once: the store is the truth about which advisors of a plan are recorded, so a
//! resumed job asks only the others, and the writer refuses a second consultation for the
//! same advisor and plan anyway (such a refusal is taken as "already recorded").

use crate::context::{advisor_spec, fill_credentials_from_daemon, Resolved};
use crate::core::cost::consultation_cost;
use crate::core::invariants::{InForce, TaskInvariants};
use crate::core::records::{Assessment, Body, Kind, Plan, Record, TaskName};
use crate::core::writer::ReasonCode;
use crate::daemon::draft;
use crate::daemon::jobs::{JobEntry, Jobs};
use crate::error::Error;
use crate::planning;
use crate::protocol::{
    Event, ExchangeStatus, JobConsultation, JobState, RecordId, RequestContext, Timestamp,
};
use crate::store::{Store, StoreError};
use advisord_adapters::contract::{
    self, Adapter, AdvisorSpec, EnvLookup, Failure, FailureKind, Io, Outcome,
};
use advisord_adapters::environment;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a job's run ended.
enum Ending {
    /// It reached a final state.
    Finished(JobState, Option<String>),
    /// The daemon is stopping: the job stays journaled and resumes at the next start.
    Interrupted,
}

/// What became of one selected advisor's exchange.
enum Exchange {
    /// It never started (the job was cancelled, or the daemon is stopping).
    NotStarted,
    /// It ran (or timed out waiting for its turn); boxed, as an outcome is large.
    Ran(Box<Outcome>),
}

/// Run `entry` to its end (or until the daemon stops), journaling its state and emitting
/// its events. Never panics on a store or journal failure: the job fails with the reason.
pub(crate) async fn run_job(jobs: Arc<Jobs>, entry: Arc<JobEntry>) {
    // The acceptance waiting for this job's plan to flush its journal entry too; dropped
    // unanswered (the acceptance then flushes it itself) unless the plan is recorded.
    let acceptance = jobs.take_acceptance(&entry.id());
    if entry
        .transition(JobState::Queued, JobState::Running)
        .is_none()
    {
        return; // cancelled while queued
    }
    // Not journaled as running: a journaled job resumes the same way whether it was
    // queued or running, so the fsyncs are saved.
    tracing::info!(job = %entry.id(), "job running");
    match drive(&jobs, &entry, acceptance).await {
        Ending::Interrupted => {
            tracing::info!(job = %entry.id(), "job interrupted by shutdown; it resumes at the next start");
        }
        Ending::Finished(state, reason) => {
            jobs.finish(&entry, state, reason).await;
        }
    }
}

/// Everything the fan-out needs, read from the store on the blocking pool.
struct Prepared {
    /// The context the exchanges run with: the request's, or for a resumed job the same
    /// with the daemon's own credential values (never journaled).
    context: RequestContext,
    resolved: Arc<Resolved>,
    store: Arc<Store>,
    assessment: Assessment,
    plan_record: Record,
    plan: Plan,
    /// The prompt every selected advisor is sent (its size and hash are in the plan).
    prompt: Arc<str>,
    /// The consultation already recorded for each selected advisor, in plan order.
    recorded: Vec<Option<Record>>,
    /// Whether the plan was recorded now (and so the file system flushed after the job
    /// was journaled), rather than found.
    planned_now: bool,
}

fn failed(reason: impl std::fmt::Display) -> Ending {
    Ending::Finished(JobState::Failed, Some(reason.to_string()))
}

/// The job's failure, named as `what` it was doing when it failed.
fn internal(what: impl std::fmt::Display) -> Error {
    Error::Internal(what.to_string())
}

/// The job, step by step: its plan found or recorded, every pending advisor asked and
/// recorded in plan order, then its disagreement.
async fn drive(
    jobs: &Arc<Jobs>,
    entry: &Arc<JobEntry>,
    acceptance: Option<crate::daemon::jobs::Acceptance>,
) -> Ending {
    let resumed = entry.order.resumed;
    // Two resumed jobs of one assessment must not both take the same unclaimed plan: the
    // claims are read under the turn, and the turn is held until the plan is journaled.
    // Only a resumed job looks for an unclaimed plan.
    let (claim_turn, claimed) = if resumed {
        let (turn, claimed) = jobs.claim_plans(&entry.id()).await;
        (Some(turn), claimed)
    } else {
        (None, Vec::new())
    };
    let context = with_peers(jobs, entry).await;
    let together = acceptance.as_ref().is_some_and(|a| a.streamed)
        && !resumed
        && entry.snapshot().plan.is_none()
        && context.mesh_peers.is_empty();
    // Taken only while few jobs wait that way ([`TOGETHER_AT_ONCE`]); the others take
    // the usual path (their plan placed alone, then their outcomes).
    if let Some(parked) = together.then(|| PARKED.try_acquire().ok()).flatten() {
        let acceptance = acceptance.map(|a| a.covered);
        return drive_together(jobs, entry, context, acceptance, parked).await;
    }
    let prepared = match prepare_on_pool(jobs, entry, context, claimed).await {
        Ok(prepared) => prepared,
        Err(reason) => return failed(reason),
    };
    if let (Some(acceptance), true) = (acceptance, prepared.planned_now) {
        // The plan's flush began after the job's journal entry was in place: the job is
        // durable, and its acceptance can be answered.
        let _ = acceptance.covered.send(());
    }
    run_prepared(jobs, entry, prepared, claim_turn).await
}

/// The job once its plan is recorded (or found): announced, every pending advisor asked
/// and recorded in plan order, then its disagreement.
async fn run_prepared(
    jobs: &Arc<Jobs>,
    entry: &Arc<JobEntry>,
    prepared: Prepared,
    claim_turn: Option<tokio::sync::MutexGuard<'_, ()>>,
) -> Ending {
    entry.keep_store(prepared.store.clone());
    if let Err(e) = announce_plan(jobs, entry, &prepared, true).await {
        return failed(e);
    }
    drop(claim_turn);
    let mut recorded = prepared.recorded.clone();
    let pending: Vec<usize> = (0..recorded.len())
        .filter(|&i| recorded[i].is_none())
        .collect();
    if !pending.is_empty() {
        let stopped = consult_and_record(jobs, entry, &prepared, &pending, &mut recorded).await;
        if let Some(ending) = stopped {
            return ending;
        }
    }
    conclude(entry, &prepared, &recorded).await
}

/// The job's disagreement, then its end.
async fn conclude(
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    recorded: &[Option<Record>],
) -> Ending {
    if let Err(reason) = record_disagreement(entry, prepared, recorded).await {
        return failed(reason);
    }
    if entry.cancel_requested() {
        Ending::Finished(JobState::Cancelled, Some("cancelled by request".into()))
    } else {
        Ending::Finished(JobState::Done, None)
    }
}

/// The job's context with the peers its plan may select: mesh peers enter the catalogue
/// like any advisor, and a new plan sweeps for them first. A relayed review asks only
/// this daemon's own advisors: never back into the mesh.
async fn with_peers(jobs: &Jobs, entry: &JobEntry) -> RequestContext {
    let mut context = entry.order.context.clone();
    if entry.order.prompt.is_none() {
        context.mesh_peers = if entry.order.resumed {
            jobs.mesh_peers_after_restart().await
        } else {
            jobs.mesh_peers(entry.snapshot().plan.is_none()).await
        };
    }
    context
}

/// [`prepare`] on the blocking pool: it reads (and may write) the store.
async fn prepare_on_pool(
    jobs: &Arc<Jobs>,
    entry: &JobEntry,
    mut context: RequestContext,
    claimed: Vec<String>,
) -> Result<Prepared, Error> {
    let job = entry.snapshot();
    let resumed = entry.order.resumed;
    // Resolved when the job was accepted, unless peers joined its catalogue since.
    let accepted = entry
        .take_resolved()
        .filter(|_| context.mesh_peers.is_empty() && !resumed);
    let registry = jobs.registry().clone();
    let orphans_before = resumed.then_some(jobs.started_ms());
    let asked = Asked {
        question: entry.order.question.clone(),
        prior_opinion: entry.order.prior_opinion.clone(),
        relayed: entry.order.prompt.clone(),
    };
    tokio::task::spawn_blocking(move || {
        if resumed {
            // Credentials are never journaled: a resumed job uses the daemon's own.
            fill_credentials_from_daemon(&mut context);
        }
        let resolved = match accepted {
            Some(resolved) => resolved,
            None => Arc::new(Resolved::resolve(&context, &registry)?),
        };
        prepare(context, resolved, &job, &asked, orphans_before, &claimed)
    })
    .await
    .map_err(|e| internal(format!("preparing the job failed: {e}")))?
}

/// The plan on the job: its exchanges listed (with what a resumed run recorded already),
/// journaled when `journal`, and sent as events.
async fn announce_plan(
    jobs: &Jobs,
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    journal: bool,
) -> Result<(), Error> {
    let plan_id = prepared.plan_record.id().to_string();
    tracing::debug!(job = %entry.id(), plan = %plan_id, "plan ready");
    entry.update(|job| {
        job.plan = Some(RecordId::from(plan_id.as_str()));
        job.consultations = prepared
            .plan
            .selected
            .iter()
            .zip(&prepared.recorded)
            .map(|(selected, recorded)| {
                listed(&selected.advisor, recorded.as_ref(), &prepared.resolved)
            })
            .collect();
    });
    if journal {
        jobs.persist(entry).await.map_err(|e| {
            internal(format!(
                "the plan was recorded but the job could not be journaled: {e}"
            ))
        })?;
    }
    entry.emit(Event::Plan {
        at: crate::protocol::Timestamp::now(),
        job: entry.id(),
        record: Box::new(prepared.plan_record.clone()),
    });
    for (selected, recorded) in prepared.plan.selected.iter().zip(&prepared.recorded) {
        if let Some(record) = recorded {
            entry.emit(Event::Recorded {
                at: crate::protocol::Timestamp::now(),
                job: entry.id(),
                advisor: selected.advisor.clone(),
                record: Box::new(record.clone()),
            });
        }
    }
    Ok(())
}

/// One selected advisor's exchange as the job lists it: pending, or as `recorded` says.
fn listed(advisor: &str, recorded: Option<&Record>, resolved: &Resolved) -> JobConsultation {
    let consultation = recorded.and_then(|r| match &r.body {
        Body::Consultation(c) => Some(c),
        _ => None,
    });
    JobConsultation {
        advisor: advisor.to_string(),
        record: recorded.map(|r| RecordId::from(r.id())),
        status: consultation.map_or(ExchangeStatus::Pending, |c| c.status.into()),
        failure: consultation.and_then(|c| c.failure),
        cost: consultation.map(|c| consultation_cost(c, &resolved.catalogue)),
    }
}

/// What the job asks, recorded with its plan: the caller's question and prior opinion,
/// or the prompt a relayed review brought whole.
struct Asked {
    question: Option<String>,
    prior_opinion: Option<String>,
    relayed: Option<String>,
}

/// Read the task, and find or record the plan. A resumed job first
/// looks for the plan it recorded before a previous daemon (this one started
/// `orphans_before` ms since the epoch) stopped.
fn prepare(
    context: RequestContext,
    resolved: Arc<Resolved>,
    job: &crate::protocol::Job,
    asked: &Asked,
    orphans_before: Option<u64>,
    claimed: &[String],
) -> Result<Prepared, Error> {
    // The daemon's one store of the state directory: its cache is read once, not per job.
    let store = Store::shared(&resolved.state_dir);
    let (assessment, plan, task_invariants) =
        find_in_task(&store, &resolved, job, orphans_before, claimed)?;
    let invariants = planning::invariants_for(&resolved, &task_invariants)?;
    let prompt = prompt_of(&assessment, asked, &invariants);
    let planned_now = plan.is_none();
    let plan_record = match plan {
        Some(plan) => plan,
        None => record_plan(&store, &resolved, job, asked, &prompt)?,
    };
    let Body::Plan(plan) = &plan_record.body else {
        return Err(internal(format!("`{}` is not a plan", plan_record.id())));
    };
    let plan = plan.clone();
    let recorded = store
        .with_records(&resolved.task, |records| {
            plan.selected
                .iter()
                .map(|s| consultation_of(records, plan_record.id(), &s.advisor))
                .collect()
        })
        .map_err(internal)?;
    Ok(Prepared {
        context,
        resolved,
        store,
        assessment,
        plan_record,
        plan,
        prompt,
        recorded,
        planned_now,
    })
}

/// The job's assessment in its task, its plan when one is recorded already (the job's
/// own, or for a resumed job the one it recorded unjournaled), and the invariants the
/// task's records put in force or drop, all from one look at the task.
fn find_in_task(
    store: &Store,
    resolved: &Resolved,
    job: &crate::protocol::Job,
    orphans_before: Option<u64>,
    claimed: &[String],
) -> Result<(Assessment, Option<Record>, TaskInvariants), Error> {
    // The task is looked at in place (never copied: it may hold thousands of records), and
    // a record found by its id without walking it.
    let (assessment, plan, task_invariants) = store
        .with_lookups(&resolved.task, |records, lookups| {
            let by_id = |id: &str| lookups.position(id).map(|at| &records[at]);
            let assessment = by_id(job.assessment.as_str()).and_then(|r| match &r.body {
                Body::Assessment(a) => Some(a.clone()),
                _ => None,
            });
            let plan = match &job.plan {
                Some(id) => Some(
                    by_id(id.as_str())
                        .filter(|r| r.kind() == Kind::Plan)
                        .cloned()
                        .ok_or_else(|| {
                            internal(format!(
                                "the job's plan `{id}` is no longer a record of the task"
                            ))
                        }),
                ),
                None => orphans_before
                    .and_then(|before| unclaimed_plan(records, job, claimed, before))
                    .map(Ok),
            };
            (assessment, plan, lookups.invariants().clone())
        })
        .map_err(internal)?;
    let assessment = assessment.ok_or_else(|| {
        internal(format!(
            "assessment `{}` is no longer a record of task `{}`",
            job.assessment, resolved.task
        ))
    })?;
    Ok((assessment, plan.transpose()?, task_invariants))
}

/// The prompt every selected advisor is sent: the one a relayed review brought whole, or
/// the one built from the assessment and the invariants in force.
fn prompt_of(assessment: &Assessment, asked: &Asked, invariants: &[InForce]) -> Arc<str> {
    match &asked.relayed {
        Some(prompt) => Arc::from(prompt.as_str()),
        None => Arc::from(planning::prompt_for(
            assessment,
            asked.question.as_deref(),
            asked.prior_opinion.as_deref(),
            invariants,
        )),
    }
}

/// Record the job's plan, made now against the task and the catalogue.
fn record_plan(
    store: &Store,
    resolved: &Resolved,
    job: &crate::protocol::Job,
    asked: &Asked,
    prompt: &str,
) -> Result<Record, Error> {
    let env = planning::plan_env(resolved, store, time::OffsetDateTime::now_utc())?;
    store
        .write_in_job(&resolved.task, &plan_input(job, asked, prompt), Some(&env))
        .map_err(|e| internal(format!("the plan could not be recorded: {e}")))
}

/// What the writer is given to make the job's plan.
fn plan_input(job: &crate::protocol::Job, asked: &Asked, prompt: &str) -> serde_json::Value {
    let mut input = serde_json::json!({
        "kind": "plan", "assessment": job.assessment, "prompt": prompt
    });
    for (name, value) in [
        ("question", &asked.question),
        ("prior_opinion", &asked.prior_opinion),
    ] {
        if let Some(value) = value {
            input[name] = value.as_str().into();
        }
    }
    input
}

/// How long a job whose client waits on the connection for the job as accepted gives
/// its exchanges, once its plan is judged, to end so that their consultations are made
/// durable with the plan and the job in one flush. An exchange still running then is
/// recorded on its own, after the plan has been placed alone and the job acknowledged:
/// the acknowledgement waits at most this long for the exchanges.
const TOGETHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

/// How long the store's side of [`drive_together`] waits for the job's side to say
/// what to write with the plan, at most (it always says within [`TOGETHER_WINDOW`]
/// unless the daemon is starved; then the plan is placed alone, and the thread and the
/// task's lock are let go a moment after the window).
const TOGETHER_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(50);

/// How many jobs may wait at once in [`drive_together`] with their store's side parked (a
/// quarter of the daemon's blocking pool, [`crate::daemon::MAX_BLOCKING_THREADS`]): each
/// holds a thread of the blocking pool and its task's lock until its exchanges end or
/// the window closes, and so do the jobs of the same task queued behind that lock.
/// The runtime needs a thread of the same pool to go on when a worker blocks in place
/// (`jobs::in_place`): a pool filled by threads that wait on the runtime would leave it
/// none, and everything would stand still until the backstops let go (300 streamed
/// consultations at once ran at 110 to 136 jobs/s, against 1,216 to 1,363 for 300 plain
/// ones; `durable_path`'s `streamed` figure). Beyond these, a job takes the usual path:
/// its plan placed alone, then its outcomes.
const TOGETHER_AT_ONCE: usize = crate::daemon::MAX_BLOCKING_THREADS / 4;

/// The jobs waiting in [`drive_together`] ([`TOGETHER_AT_ONCE`]).
static PARKED: Semaphore = Semaphore::const_new(TOGETHER_AT_ONCE);

/// What the store's side of [`drive_together`] did.
enum Together {
    /// The plan was found, or written by the one-record path: the job as usual.
    Alone(Box<Prepared>),
    /// The plan was staged and the job's side told what to write with it.
    Staged(Box<crate::store::PlanWritten>),
}

/// A job whose client waits on the connection for the job as accepted (nothing is
/// promised before it gets it): its plan judged and written to its temporary file, its
/// exchanges run at once, and when they all end within [`TOGETHER_WINDOW`] their
/// consultations are written with the plan, with **one** flush for the job's journal
/// entry, its plan and its outcomes, and only then is the job acknowledged. Otherwise
/// the plan is placed alone (its flush covers the job), the job acknowledged, and the
/// outcomes recorded as they come, as [`run_prepared`] does.
async fn drive_together(
    jobs: &Arc<Jobs>,
    entry: &Arc<JobEntry>,
    context: RequestContext,
    acceptance: Option<oneshot::Sender<()>>,
    parked: tokio::sync::SemaphorePermit<'static>,
) -> Ending {
    let job = entry.snapshot();
    let accepted = entry.take_resolved();
    let registry = jobs.registry().clone();
    let asked = Asked {
        question: entry.order.question.clone(),
        prior_opinion: entry.order.prior_opinion.clone(),
        relayed: entry.order.prompt.clone(),
    };
    let (staged_tx, staged_rx) = oneshot::channel::<Prepared>();
    let (drafts_tx, drafts_rx) = std::sync::mpsc::channel::<Option<Vec<crate::store::Drafted>>>();
    let store_side = tokio::task::spawn_blocking(move || {
        // Held until the store's side no longer waits on the job's.
        let _parked = parked;
        let resolved = match accepted {
            Some(resolved) => resolved,
            None => Arc::new(Resolved::resolve(&context, &registry)?),
        };
        prepare_together(context, resolved, &job, &asked, staged_tx, drafts_rx)
    });
    let joined = |joined: Result<Result<Together, Error>, tokio::task::JoinError>| {
        joined.map_err(|e| internal(format!("preparing the job failed: {e}")))?
    };
    let Ok(prepared) = staged_rx.await else {
        // Not staged: the plan was found or written alone, or preparing failed.
        return match joined(store_side.await) {
            Ok(Together::Alone(prepared)) => {
                if let Some(acceptance) = acceptance.filter(|_| prepared.planned_now) {
                    let _ = acceptance.send(());
                }
                run_prepared(jobs, entry, *prepared, None).await
            }
            Ok(Together::Staged(_)) => failed(internal("the plan was staged unannounced")),
            Err(reason) => failed(reason),
        };
    };
    // The plan is judged and staged (the task's lock held): its exchanges run now, their
    // events held until the plan is announced.
    let held = Arc::new(Held::holding());
    let fan_out = FanOut::new(entry, &prepared);
    let mut waiting: Vec<(Waiting, oneshot::Receiver<Exchange>)> =
        (0..prepared.plan.selected.len())
            .map(|index| fan_out.start(jobs, entry, &prepared, index, Some(held.clone())))
            .collect();
    let window = Instant::now() + TOGETHER_WINDOW;
    let mut ended = Vec::new();
    for (_, receiver) in &mut waiting {
        match tokio::time::timeout_at(window, receiver).await {
            Ok(exchange) => ended.push(Some(exchange.unwrap_or(Exchange::NotStarted))),
            Err(_) => ended.push(None),
        }
    }
    let all_ran = ended.iter().all(|e| match e {
        Some(Exchange::Ran(outcome)) => !matches!(
            &outcome.result, Err(f) if f.kind == FailureKind::Cancelled
        ),
        _ => false,
    });
    let ready: Vec<(usize, Outcome)> = if all_ran {
        ended
            .iter_mut()
            .enumerate()
            .filter_map(|(at, e)| match e.take() {
                Some(Exchange::Ran(outcome)) => Some((at, *outcome)),
                _ => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let drafts = all_ran.then(|| {
        ready
            .iter()
            .map(|(at, outcome)| {
                let waited = &waiting[*at].0;
                crate::store::Drafted {
                    input: draft::consultation_input(
                        prepared.plan_record.id(),
                        &waited.advisor,
                        outcome,
                    ),
                    job: entry.id().to_string(),
                    source: draft::answer_source(waited.source.as_deref(), outcome),
                    counts: outcome.vouched,
                    secrets: Some(fan_out.secrets.clone()),
                }
            })
            .collect()
    });
    // The store's side is waiting for this (or gave up waiting and placed the plan alone).
    let _ = drafts_tx.send(drafts);
    let written = match joined(store_side.await) {
        Ok(Together::Staged(written)) => written,
        Ok(Together::Alone(_)) => {
            held.release(entry);
            entry.cancel.cancel();
            return failed(internal("the staged plan was not placed"));
        }
        Err(reason) => {
            held.release(entry);
            entry.cancel.cancel(); // nothing of this job is recorded: stop its exchanges
            return failed(reason);
        }
    };
    // One flush, begun after the job's journal entry was in place, made the job, its
    // plan and (when all were in) its outcomes durable: it can be acknowledged.
    if let Some(acceptance) = acceptance {
        let _ = acceptance.send(());
    }
    entry.keep_store(prepared.store.clone());
    // With its outcomes recorded the job ends at once, and its end is journaled then:
    // the plan's id is not journaled on its own (the records carry it: "The plan is
    // made once").
    let ending_now = written.consultations.is_some();
    if let Err(e) = announce_plan(jobs, entry, &prepared, !ending_now).await {
        held.release(entry);
        entry.cancel.cancel();
        return failed(e);
    }
    held.release(entry);
    let mut recorded = prepared.recorded.clone();
    match written.consultations {
        Some(results) => {
            let mut failure = None;
            for ((at, _), result) in ready.iter().zip(results) {
                let waited = &waiting[*at].0;
                match result {
                    Ok(record) => {
                        note_recorded(entry, &prepared, waited, &record);
                        recorded[waited.index] = Some(record);
                    }
                    Err(e) => {
                        if failure.is_none() {
                            failure = Some(internal(format!(
                                "the consultation of `{}` could not be recorded: {e}",
                                waited.advisor
                            )));
                        }
                    }
                }
            }
            if let Some(reason) = failure {
                return failed(reason);
            }
        }
        None => {
            // Recorded as they come, in plan order: those in already, then the others.
            let mut rest = Vec::new();
            let mut ended = ended.into_iter();
            let mut ready = ready.into_iter();
            for (waited, receiver) in waiting {
                let exchange = match ended.next().flatten() {
                    Some(exchange) => Some(exchange),
                    None if all_ran => ready.next().map(|(_, o)| Exchange::Ran(Box::new(o))),
                    None => None,
                };
                let receiver = match exchange {
                    Some(exchange) => {
                        let (tx, rx) = oneshot::channel();
                        let _ = tx.send(exchange);
                        rx
                    }
                    None => receiver,
                };
                rest.push((waited, receiver));
            }
            let stopped =
                record_in_order(entry, &prepared, &fan_out.secrets, rest, &mut recorded).await;
            if let Some(ending) = stopped {
                return ending;
            }
        }
    }
    conclude(entry, &prepared, &recorded).await
}

/// The store's side of [`drive_together`]: the task read, the plan judged and staged
/// (sent to the job's side as prepared), then what the job's side drafts from its
/// exchanges written with it ([`Store::write_plan_with`]).
fn prepare_together(
    context: RequestContext,
    resolved: Arc<Resolved>,
    job: &crate::protocol::Job,
    asked: &Asked,
    staged: oneshot::Sender<Prepared>,
    drafts: std::sync::mpsc::Receiver<Option<Vec<crate::store::Drafted>>>,
) -> Result<Together, Error> {
    let store = Store::shared(&resolved.state_dir);
    let (assessment, found, task_invariants) = find_in_task(&store, &resolved, job, None, &[])?;
    let invariants = planning::invariants_for(&resolved, &task_invariants)?;
    let prompt = prompt_of(&assessment, asked, &invariants);
    let prepared = |plan_record: Record, planned_now: bool| -> Result<Prepared, Error> {
        let Body::Plan(plan) = &plan_record.body else {
            return Err(internal(format!("`{}` is not a plan", plan_record.id())));
        };
        Ok(Prepared {
            context: context.clone(),
            resolved: resolved.clone(),
            store: store.clone(),
            assessment: assessment.clone(),
            plan: plan.clone(),
            recorded: vec![None; plan.selected.len()],
            plan_record,
            prompt: prompt.clone(),
            planned_now,
        })
    };
    if found.is_some() {
        // Not this job's to make: the usual path takes what is recorded for it.
        return prepare(context.clone(), resolved.clone(), job, asked, None, &[])
            .map(|p| Together::Alone(Box::new(p)));
    }
    let env = planning::plan_env(&resolved, &store, time::OffsetDateTime::now_utc())?;
    let input = plan_input(job, asked, &prompt);
    let mut handed = false;
    let written = store
        .write_plan_with(&resolved.task, &input, &env, |plan_record| {
            let made = prepared(plan_record.clone(), true).ok()?;
            staged.send(made).ok()?;
            handed = true;
            drafts.recv_timeout(TOGETHER_BACKSTOP).ok().flatten()
        })
        .map_err(|e| internal(format!("the plan could not be recorded: {e}")))?;
    if handed {
        Ok(Together::Staged(Box::new(written)))
    } else {
        prepared(written.plan, true).map(|p| Together::Alone(Box::new(p)))
    }
}

/// What an exchange reports while its job's plan is not yet announced: held, then
/// passed on in order once it is ([`drive_together`]).
struct Held(std::sync::Mutex<Option<Vec<HeldReport>>>);

enum HeldReport {
    Running(usize),
    Event(Event),
}

impl Held {
    /// Hold `report`, or pass it on when the plan is announced already.
    fn report(&self, entry: &JobEntry, report: HeldReport) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reports) = held.as_mut() {
            reports.push(report);
            return;
        }
        drop(held);
        pass_on(entry, report);
    }

    /// Pass on what was held, in order; later reports go straight through.
    fn release(&self, entry: &JobEntry) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for report in held.take().unwrap_or_default() {
            pass_on(entry, report);
        }
        *held = None;
    }
}

impl Held {
    fn holding() -> Held {
        Held(std::sync::Mutex::new(Some(Vec::new())))
    }
}

fn pass_on(entry: &JobEntry, report: HeldReport) {
    match report {
        HeldReport::Running(index) => entry.set_exchange(index, ExchangeStatus::Running),
        HeldReport::Event(event) => entry.emit(event),
    }
}

/// A plan of the job's assessment recorded after the job was accepted and before this
/// daemon started (`before_ms`), that no other job claims: the plan this job recorded just
/// before the previous daemon stopped, before it could journal the plan's id.
fn unclaimed_plan(
    records: &[Record],
    job: &crate::protocol::Job,
    claimed: &[String],
    before_ms: u64,
) -> Option<Record> {
    let accepted_ms = ulid::Ulid::from_string(job.id.as_str())
        .ok()?
        .timestamp_ms();
    records
        .iter()
        .filter(|r| matches!(&r.body, Body::Plan(p) if p.assessment == job.assessment.as_str()))
        .filter(|r| !claimed.iter().any(|c| c == r.id()))
        .find(|r| {
            ulid::Ulid::from_string(r.id())
                .is_ok_and(|id| (accepted_ms..before_ms).contains(&id.timestamp_ms()))
        })
        .cloned()
}

/// The consultation recorded for `advisor` under `plan`, if any.
fn consultation_of(records: &[Record], plan: &str, advisor: &str) -> Option<Record> {
    // Newest first: a plan's consultations come after it, near the end of the task.
    records
        .iter()
        .rev()
        .find(
            |r| matches!(&r.body, Body::Consultation(c) if c.plan == plan && c.advisor == advisor),
        )
        .cloned()
}

/// Ask every pending advisor at once and record the outcomes in plan order. `None` when
/// the job goes on to its disagreement; `Some(ending)` when it stops here.
async fn consult_and_record(
    jobs: &Arc<Jobs>,
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    pending: &[usize],
    recorded: &mut [Option<Record>],
) -> Option<Ending> {
    let fan_out = FanOut::new(entry, prepared);
    let waiting: Vec<(Waiting, oneshot::Receiver<Exchange>)> = pending
        .iter()
        .map(|&index| fan_out.start(jobs, entry, prepared, index, None))
        .collect();
    record_in_order(entry, prepared, &fan_out.secrets, waiting, recorded).await
}

/// What every exchange of one job shares.
struct FanOut {
    /// Every exchange of the job, including its wait for a free turn, ends by then.
    deadline: Instant,
    /// The environment the exchanges see. The prepared context, not the journaled one: a
    /// resumed job's credentials were filled from the daemon's own environment when it
    /// was prepared.
    env: EnvLookup,
    /// The values this job's exchanges may see, scrubbed by value from what is recorded
    /// and from the events' diagnostics.
    secrets: Arc<[String]>,
}

/// One exchange started: its place in the plan, its advisor and source.
struct Waiting {
    index: usize,
    advisor: String,
    source: Option<String>,
}

impl FanOut {
    fn new(entry: &JobEntry, prepared: &Prepared) -> FanOut {
        FanOut {
            deadline: entry.order.timeout.deadline_from(Instant::now()),
            env: env_lookup(&prepared.context),
            secrets: prepared.context.credentials.values().cloned().collect(),
        }
    }

    /// Start the exchange of the plan's `index`th advisor on the jobs' tracker; its
    /// outcome arrives on the receiver.
    fn start(
        &self,
        jobs: &Arc<Jobs>,
        entry: &Arc<JobEntry>,
        prepared: &Prepared,
        index: usize,
        held: Option<Arc<Held>>,
    ) -> (Waiting, oneshot::Receiver<Exchange>) {
        let selected = &prepared.plan.selected[index];
        let (tx, rx) = oneshot::channel();
        let catalogue_entry = prepared
            .resolved
            .catalogue
            .advisors
            .iter()
            .find(|a| a.id == selected.advisor)
            .cloned();
        let waiting = Waiting {
            index,
            advisor: selected.advisor.clone(),
            source: catalogue_entry.as_ref().map(|e| e.source()),
        };
        let turn = Turn {
            entry: entry.clone(),
            index,
            advisor: selected.advisor.clone(),
            prompt: prepared.prompt.clone(),
            io: Io {
                deadline: self.deadline,
                cancel: entry.cancel.child_token(),
                env: self.env.clone(),
                http: jobs.http(),
            },
            drain: jobs.draining(),
            secrets: self.secrets.clone(),
            held,
        };
        let reach = catalogue_entry.map(|e| {
            let mut spec = advisor_spec(&e);
            jobs.asking(&mut spec, &selected.covers);
            Reach {
                adapter: jobs.registry().get(&e.adapter),
                adapter_name: e.adapter,
                spec,
                slots: jobs.advisor_slots(&e.id, e.max_concurrent),
            }
        });
        let gone = jobs.peer_gone(&selected.advisor);
        jobs.spawn(async move {
            let _ = tx.send(exchange(turn, reach, gone).await);
        });
        (waiting, rx)
    }
}

/// How a selected advisor of the catalogue is reached: its adapter (if the registry has
/// it), its spec for this exchange and its slots.
struct Reach {
    adapter: Option<Arc<dyn Adapter>>,
    adapter_name: String,
    spec: AdvisorSpec,
    slots: Arc<Semaphore>,
}

/// Run `turn` through its adapter; without one, the outcome that says why (`reach` is
/// `None` when the advisor is no longer in the catalogue; `gone` says why when it was a
/// peer that left).
async fn exchange(turn: Turn, reach: Option<Reach>, gone: Option<String>) -> Exchange {
    let outcome = match reach {
        Some(Reach {
            adapter: Some(adapter),
            spec,
            slots,
            ..
        }) => return turn.run(adapter, spec, slots).await,
        Some(Reach {
            adapter_name, spec, ..
        }) => unreachable_outcome(format!(
            "no adapter named `{adapter_name}` for advisor `{}`; fix its `adapter` in \
             the catalogue",
            spec.id
        )),
        // A peer that left: unavailable, as its transport would say.
        None => match gone {
            Some(reason) => Outcome {
                result: Err(Failure::new(FailureKind::Unavailable, &reason)),
                usage: None,
                duration_ms: 0,
                source: None,
                vouched: true,
            },
            None => unreachable_outcome(format!(
                "advisor `{}` is no longer in the catalogue; add it back or plan again",
                turn.advisor
            )),
        },
    };
    Exchange::Ran(Box::new(outcome))
}

/// Record each outcome as it and every earlier one are in, in plan order. The outcomes
/// in by the time one is recorded (the next ones of the plan, already ended) are
/// recorded with it, in one flush ([`Store::write_consultations`]). A failure to record
/// stops the other exchanges; an exchange stopped by shutdown leaves the rest to the
/// resumed run.
async fn record_in_order(
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    secrets: &Arc<[String]>,
    waiting: Vec<(Waiting, oneshot::Receiver<Exchange>)>,
    recorded: &mut [Option<Record>],
) -> Option<Ending> {
    let mut interrupted = false;
    let mut failure: Option<Error> = None;
    let mut waiting: std::collections::VecDeque<_> = waiting.into();
    while let Some((waited, outcome)) = waiting.pop_front() {
        let mut ended = vec![(waited, outcome.await.unwrap_or(Exchange::NotStarted))];
        // The next ones of the plan already in join this one (its flush is theirs).
        tokio::task::yield_now().await;
        while let Some((_, next)) = waiting.front_mut() {
            let Ok(exchange) = next.try_recv() else { break };
            let (waited, _) = waiting.pop_front().expect("the front one");
            ended.push((waited, exchange));
        }
        let mut ready = Vec::new();
        for (waited, exchange) in ended {
            if interrupted || failure.is_some() {
                continue; // later outcomes wait for the resume, in plan order
            }
            let outcome = match exchange {
                Exchange::NotStarted if entry.cancel_requested() => continue,
                Exchange::NotStarted => {
                    interrupted = true;
                    continue;
                }
                Exchange::Ran(outcome) => *outcome,
            };
            tracing::debug!(job = %entry.id(), advisor = %waited.advisor, ok = outcome.result.is_ok(), "exchange ended");
            let stopped_by_shutdown = matches!(&outcome.result, Err(f) if f.kind == FailureKind::Cancelled)
                && !entry.cancel_requested();
            if stopped_by_shutdown {
                // Not the advisor's fault and not the client's wish: ask it again on resume.
                interrupted = true;
                continue;
            }
            ready.push((waited, outcome));
        }
        if ready.is_empty() {
            continue;
        }
        for (waited, written) in record_outcomes(entry, prepared, secrets, &ready).await {
            match written {
                Ok(record) => recorded[waited] = Some(record),
                Err(reason) => {
                    if failure.is_none() {
                        failure = Some(reason);
                    }
                    entry.cancel.cancel(); // stop the other exchanges: nothing more is recorded
                }
            }
        }
    }
    if let Some(reason) = failure {
        return Some(failed(reason));
    }
    if interrupted {
        return Some(Ending::Interrupted);
    }
    None
}

/// Store the exchanges' outcomes (in plan order) as their consultations, with one flush,
/// and tell the job of each; each one's place in the plan and what became of it.
async fn record_outcomes(
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    secrets: &Arc<[String]>,
    ready: &[(Waiting, Outcome)],
) -> Vec<(usize, Result<Record, Error>)> {
    let plan_id = prepared.plan_record.id();
    let drafts: Vec<Draft> = ready
        .iter()
        .map(|(waited, outcome)| Draft {
            advisor: waited.advisor.clone(),
            input: draft::consultation_input(plan_id, &waited.advisor, outcome),
            made: Made {
                job: entry.id().to_string(),
                source: draft::answer_source(waited.source.as_deref(), outcome),
                counts: outcome.vouched,
            },
        })
        .collect();
    let store = &prepared.store;
    let task = &prepared.resolved.task;
    let written = write_consultations(store, task, plan_id, drafts, secrets.clone()).await;
    let mut out = Vec::new();
    for ((waited, _), written) in ready.iter().zip(written) {
        let record = match written {
            Ok(record) => record,
            Err(e) => {
                out.push((waited.index, Err(e)));
                continue;
            }
        };
        note_recorded(entry, prepared, waited, &record);
        out.push((waited.index, Ok(record)));
    }
    out
}

/// Tell the job that `waited`'s outcome is recorded as `record`.
fn note_recorded(entry: &Arc<JobEntry>, prepared: &Prepared, waited: &Waiting, record: &Record) {
    tracing::debug!(job = %entry.id(), advisor = %waited.advisor, "consultation recorded");
    entry.update(|job| {
        if let (Some(c), Body::Consultation(body)) =
            (job.consultations.get_mut(waited.index), &record.body)
        {
            c.record = Some(RecordId::from(record.id()));
            c.status = body.status.into();
            c.failure = body.failure;
            c.cost = Some(consultation_cost(body, &prepared.resolved.catalogue));
        }
    });
    entry.emit(Event::Recorded {
        at: crate::protocol::Timestamp::now(),
        job: entry.id(),
        advisor: waited.advisor.clone(),
        record: Box::new(record.clone()),
    });
}

/// One advisor's turn within a job.
struct Turn {
    entry: Arc<JobEntry>,
    index: usize,
    advisor: String,
    prompt: Arc<str>,
    io: Io,
    drain: CancellationToken,
    /// The request's own credential values, scrubbed from the `finished` diagnostic.
    secrets: Arc<[String]>,
    /// Where the exchange's reports wait while the job's plan is not yet announced.
    held: Option<Arc<Held>>,
}

impl Turn {
    /// Wait for a free slot of the advisor (or the deadline, or a cancellation), then
    /// consult it through the contract layer.
    async fn run(
        self,
        adapter: Arc<dyn Adapter>,
        spec: AdvisorSpec,
        slots: Arc<Semaphore>,
    ) -> Exchange {
        let permit = match self.wait_turn(slots).await {
            Ok(permit) => permit,
            Err(exchange) => return exchange,
        };
        if self.drain.is_cancelled() {
            return Exchange::NotStarted;
        }
        self.report(HeldReport::Running(self.index));
        self.report(HeldReport::Event(Event::Started {
            job: self.entry.id(),
            advisor: self.advisor.clone(),
            at: Timestamp::now(),
        }));
        let outcome = self.consult(adapter.as_ref(), &spec).await;
        drop(permit);
        self.report(HeldReport::Event(self.finished(&outcome)));
        Exchange::Ran(Box::new(outcome))
    }

    /// Tell the job, now or once its plan is announced.
    fn report(&self, report: HeldReport) {
        match &self.held {
            Some(held) => held.report(&self.entry, report),
            None => pass_on(&self.entry, report),
        }
    }

    /// A free slot of the advisor; the exchange as it ended without one (cancelled, or
    /// no turn before the deadline).
    async fn wait_turn(&self, slots: Arc<Semaphore>) -> Result<OwnedSemaphorePermit, Exchange> {
        let waited = Instant::now();
        tokio::select! {
            biased;
            () = self.io.cancel.cancelled() => Err(Exchange::NotStarted),
            () = tokio::time::sleep_until(self.io.deadline) => {
                let failure = Failure::new(
                    FailureKind::Timeout,
                    "no free turn before the deadline: the advisor's `max_concurrent` exchanges \
                     were all busy with other jobs",
                );
                Err(Exchange::Ran(Box::new(Outcome {
                    result: Err(failure),
                    usage: None,
                    duration_ms: millis(waited.elapsed()),
                    source: None,
                    vouched: true,
                })))
            }
            permit = slots.acquire_owned() => permit.map_err(|_| Exchange::NotStarted),
        }
    }

    /// Consult the advisor through the contract layer. A panicking adapter is that
    /// advisor's failure, not the job's nor the daemon's.
    async fn consult(&self, adapter: &dyn Adapter, spec: &AdvisorSpec) -> Outcome {
        let consulted = AssertUnwindSafe(contract::consult(adapter, spec, &self.prompt, &self.io))
            .catch_unwind()
            .await;
        consulted.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            unreachable_outcome(format!("the adapter failed unexpectedly: {what}"))
        })
    }

    /// The `finished` event of `outcome`, its diagnostic scrubbed.
    fn finished(&self, outcome: &Outcome) -> Event {
        let (status, failure, diagnostic) = match &outcome.result {
            Ok(_) => (
                crate::core::records::ConsultationStatus::Completed,
                None,
                None,
            ),
            Err(f) => (
                crate::core::records::ConsultationStatus::Failed,
                Some(f.kind),
                // The event is not recorded, but it is shown: the same scrubbing as the
                // writer's.
                Some(crate::core::redact::scrub_with(
                    &f.diagnostic,
                    &self.secrets,
                    &mut Default::default(),
                )),
            ),
        };
        Event::Finished {
            at: crate::protocol::Timestamp::now(),
            job: self.entry.id(),
            advisor: self.advisor.clone(),
            status,
            failure,
            diagnostic,
            duration_ms: outcome.duration_ms,
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An `error` outcome for an advisor that could not be reached at all.
fn unreachable_outcome(diagnostic: String) -> Outcome {
    Outcome {
        result: Err(Failure::new(FailureKind::Error, &diagnostic)),
        usage: None,
        duration_ms: 0,
        source: None,
        vouched: true,
    }
}

/// The environment an exchange sees, by the adapters' one policy
/// (`advisord_adapters::environment`): the context's `PATH`, root and credential values,
/// then the daemon's harmless variables.
fn env_lookup(context: &RequestContext) -> EnvLookup {
    environment::lookup_in_process(environment::Asker {
        path: context.path.clone(),
        // Process advisors run in the project the request names, so a CLI advisor can
        // read it.
        root: Some(context.root.display().to_string()),
        credentials: context.credentials.clone(),
    })
}

/// What the job says of a consultation it stores, beside the drafted input.
struct Made {
    job: String,
    source: Option<String>,
    /// Whether the transport vouched for who answered.
    counts: bool,
}

/// One consultation drafted from an outcome, to store.
struct Draft {
    advisor: String,
    input: serde_json::Value,
    made: Made,
}

/// Store consultations (in plan order, one flush for all), attested as the job's; a
/// duplicate (the advisor already recorded for this plan, by a resumed run) is taken as
/// recorded. One result per draft.
async fn write_consultations(
    store: &Arc<Store>,
    task: &TaskName,
    plan: &str,
    drafts: Vec<Draft>,
    secrets: Arc<[String]>,
) -> Vec<Result<Record, Error>> {
    let (store, task, plan) = (store.clone(), task.clone(), plan.to_string());
    let count = drafts.len();
    let written = tokio::task::spawn_blocking(move || {
        let items: Vec<(serde_json::Value, crate::store::Provenance)> = drafts
            .iter()
            .map(|d| {
                (
                    d.input.clone(),
                    crate::store::Provenance {
                        job: &d.made.job,
                        source: d.made.source.as_deref(),
                        counts: d.made.counts,
                        secrets: &secrets,
                    },
                )
            })
            .collect();
        let written = store.write_consultations(&task, &items);
        drafts
            .iter()
            .zip(written)
            .map(|(d, written)| match written {
                Ok(record) => Ok(record),
                Err(StoreError::Refused(r)) if r.reason == ReasonCode::DuplicateConsultation => {
                    store
                        .with_records(&task, |records| consultation_of(records, &plan, &d.advisor))
                        .map_err(internal)?
                        .ok_or_else(|| internal(r))
                }
                Err(e) => Err(internal(format!(
                    "the consultation of `{}` could not be recorded: {e}",
                    d.advisor
                ))),
            })
            .collect::<Vec<_>>()
    })
    .await;
    written.unwrap_or_else(|e| {
        (0..count)
            .map(|_| Err(internal(format!("recording failed: {e}"))))
            .collect()
    })
}

/// Record the disagreement when a completed consultation of the plan diverges, once.
async fn record_disagreement(
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    recorded: &[Option<Record>],
) -> Result<(), Error> {
    let consultations: Vec<Record> = recorded.iter().flatten().cloned().collect();
    let assessment_id = prepared.plan.assessment.clone();
    let Some(input) =
        draft::disagreement_input(&assessment_id, &prepared.assessment, &consultations)
    else {
        return Ok(());
    };
    let store = prepared.store.clone();
    let task = prepared.resolved.task.clone();
    let cited: Vec<String> = consultations.iter().map(|r| r.id().to_string()).collect();
    let written = tokio::task::spawn_blocking(move || {
        // Recorded already by an earlier run of this job?
        let earlier = store
            .with_records(&task, |records| {
                records
                    .iter()
                    .find(|r| match &r.body {
                        Body::Disagreement(d) => {
                            d.assessment == assessment_id
                                && d.positions.iter().any(|p| cited.contains(&p.source))
                        }
                        _ => false,
                    })
                    .cloned()
            })
            .map_err(internal)?;
        if let Some(earlier) = earlier {
            return Ok(earlier);
        }
        store
            .write_in_job(&task, &input, None)
            .map_err(|e| internal(format!("the disagreement could not be recorded: {e}")))
    })
    .await
    .unwrap_or_else(|e| Err(internal(format!("recording failed: {e}"))))?;
    entry.update(|job| job.disagreement = Some(RecordId::from(written.id())));
    entry.emit(Event::Disagreement {
        at: crate::protocol::Timestamp::now(),
        job: entry.id(),
        record: Box::new(written),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Job;

    fn ulid_at(ms: u64) -> String {
        ulid::Ulid::from_parts(ms, 7).to_string()
    }

    fn plan(id: &str, assessment: &str) -> Record {
        serde_json::from_value(serde_json::json!({
            "id": id, "task": "t", "sequence": 2, "created_at": "2026-01-01T00:00:00Z",
            "schema": 1, "redacted": [], "kind": "plan", "assessment": assessment,
            "mode": "standard", "budget": 1, "capabilities": ["independent_reasoning"],
            "selected": [], "left_out": [], "availability": [], "local_review": [],
        }))
        .expect("a plan record")
    }

    fn job(id: &str) -> Job {
        Job::sample(id, JobState::Running)
    }

    fn check(records: &[Record], claimed: &[&str], expected: Option<&str>) {
        let claimed: Vec<String> = claimed.iter().map(|c| c.to_string()).collect();
        let found = unclaimed_plan(records, &job(&ulid_at(1000)), &claimed, 2000);
        assert_eq!(found.as_ref().map(|r| r.id()), expected);
    }

    #[test]
    fn a_resumed_job_takes_only_its_own_unjournaled_plan() {
        let (before, after, later) = (ulid_at(999), ulid_at(1000), ulid_at(1500));
        // A plan made before the job was accepted is someone else's.
        check(&[plan(&before, "A")], &[], None);
        // One made after, for the same assessment and unclaimed, is the job's.
        check(&[plan(&before, "A"), plan(&after, "A")], &[], Some(&after));
        // Claimed by another job, or of another assessment: not the job's.
        check(&[plan(&after, "A")], &[&after], None);
        check(&[plan(&after, "B")], &[], None);
        check(
            &[plan(&after, "A"), plan(&later, "A")],
            &[&after],
            Some(&later),
        );
        // One made after this daemon started belongs to a job accepted since.
        check(&[plan(&ulid_at(2000), "A")], &[], None);
    }
}
