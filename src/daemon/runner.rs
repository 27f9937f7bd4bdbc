//! One consultation job, start to end: record (or find) the plan, ask every selected
//! advisor at once under one deadline, record each outcome in plan order as soon as it and
//! every earlier one are in, then record the disagreement if an answer diverges.
//!
//! Exactly once: the store is the truth about which advisors of a plan are recorded, so a
//! resumed job asks only the others, and the writer refuses a second consultation for the
//! same advisor and plan anyway (such a refusal is taken as "already recorded").

use crate::context::{advisor_spec, fill_credentials_from_daemon, Resolved};
use crate::core::cost::consultation_cost;
use crate::core::records::{Assessment, Body, Kind, Plan, Record, TaskName};
use crate::core::writer::ReasonCode;
use crate::daemon::draft;
use crate::daemon::jobs::{JobEntry, Jobs};
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
use tokio::sync::{oneshot, Semaphore};
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
    if entry
        .transition(JobState::Queued, JobState::Running)
        .is_none()
    {
        return; // cancelled while queued
    }
    // Not journaled as running: a journaled job resumes the same way whether it was
    // queued or running, so the fsyncs are saved.
    tracing::info!(job = %entry.id(), "job running");
    match drive(&jobs, &entry).await {
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
    resolved: Resolved,
    store: Arc<Store>,
    assessment: Assessment,
    plan_record: Record,
    plan: Plan,
    /// The prompt every selected advisor is sent (its size and hash are in the plan).
    prompt: Arc<str>,
    /// The consultation already recorded for each selected advisor, in plan order.
    recorded: Vec<Option<Record>>,
}

fn failed(reason: impl Into<String>) -> Ending {
    Ending::Finished(JobState::Failed, Some(reason.into()))
}

async fn drive(jobs: &Arc<Jobs>, entry: &Arc<JobEntry>) -> Ending {
    let job = entry.snapshot();
    let mut context = entry.order.context.clone();
    let resumed = entry.order.resumed;
    // Two resumed jobs of one assessment must not both take the same unclaimed plan: the
    // claims are read under the turn, and the turn is held until the plan is journaled.
    let claim_turn = if resumed {
        Some(jobs.plan_claims.lock().await)
    } else {
        None
    };
    // Only a resumed job looks for an unclaimed plan; the claims are every kept job's,
    // so a fresh job does not gather them.
    let claimed = if resumed {
        jobs.table.claimed_plans(&job.id)
    } else {
        Vec::new()
    };
    // Mesh peers enter the catalogue like any advisor; a new plan sweeps for them first.
    // A relayed review asks only this daemon's own advisors: never back into the mesh.
    if entry.order.prompt.is_none() {
        context.mesh_peers = if resumed {
            jobs.mesh_peers_after_restart().await
        } else {
            jobs.mesh_peers(job.plan.is_none()).await
        };
    }
    let for_stores = jobs.clone();
    let started_ms = jobs.started_ms;
    let asked = Asked {
        question: entry.order.question.clone(),
        prior_opinion: entry.order.prior_opinion.clone(),
        relayed: entry.order.prompt.clone(),
    };
    let prepared = tokio::task::spawn_blocking(move || {
        if resumed {
            // Credentials are never journaled: a resumed job uses the daemon's own.
            fill_credentials_from_daemon(&mut context);
        }
        let orphans_before = resumed.then_some(started_ms);
        prepare(
            context,
            &for_stores.registry,
            &job,
            &asked,
            orphans_before,
            &claimed,
            &|dir| for_stores.store(dir),
        )
    })
    .await;
    let prepared = match prepared {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(reason)) => return failed(reason),
        Err(e) => return failed(format!("preparing the job failed: {e}")),
    };
    entry.keep_store(prepared.store.clone());
    let plan_id = prepared.plan_record.id().to_string();
    tracing::debug!(job = %entry.id(), plan = %plan_id, "plan ready");
    entry.update(|job| {
        job.plan = Some(RecordId::from(plan_id.as_str()));
        job.consultations = prepared
            .plan
            .selected
            .iter()
            .zip(&prepared.recorded)
            .map(|(selected, recorded)| JobConsultation {
                advisor: selected.advisor.clone(),
                record: recorded.as_ref().map(|r| RecordId::from(r.id())),
                status: match recorded.as_ref().map(|r| &r.body) {
                    Some(Body::Consultation(c)) => c.status.into(),
                    _ => ExchangeStatus::Pending,
                },
                failure: recorded.as_ref().and_then(|r| match &r.body {
                    Body::Consultation(c) => c.failure,
                    _ => None,
                }),
                cost: recorded.as_ref().and_then(|r| match &r.body {
                    Body::Consultation(c) => {
                        Some(consultation_cost(c, &prepared.resolved.catalogue))
                    }
                    _ => None,
                }),
            })
            .collect();
    });
    if let Err(e) = jobs.persist(entry).await {
        return failed(format!(
            "the plan was recorded but the job could not be journaled: {e}"
        ));
    }
    drop(claim_turn);
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
    let mut recorded = prepared.recorded.clone();
    let pending: Vec<usize> = (0..recorded.len())
        .filter(|&i| recorded[i].is_none())
        .collect();
    if !pending.is_empty() {
        let stopped =
            consult_and_record(jobs, entry, &prepared, &plan_id, &pending, &mut recorded).await;
        if let Some(ending) = stopped {
            return ending;
        }
    }
    if let Err(reason) = record_disagreement(entry, &prepared, &recorded).await {
        return failed(reason);
    }
    if entry.cancel_requested() {
        Ending::Finished(JobState::Cancelled, Some("cancelled by request".into()))
    } else {
        Ending::Finished(JobState::Done, None)
    }
}

/// What the job asks, recorded with its plan: the caller's question and prior opinion,
/// or the prompt a relayed review brought whole.
struct Asked {
    question: Option<String>,
    prior_opinion: Option<String>,
    relayed: Option<String>,
}

/// Resolve the context, read the task, and find or record the plan. A resumed job first
/// looks for the plan it recorded before a previous daemon (this one started
/// `orphans_before` ms since the epoch) stopped.
fn prepare(
    context: RequestContext,
    registry: &advisord_adapters::registry::Registry,
    job: &crate::protocol::Job,
    asked: &Asked,
    orphans_before: Option<u64>,
    claimed: &[String],
    store_of: &dyn Fn(&std::path::Path) -> Arc<Store>,
) -> Result<Prepared, String> {
    let resolved = Resolved::resolve(&context, registry).map_err(|e| e.to_string())?;
    let store = store_of(&resolved.state_dir);
    // The task is looked at in place (never copied: it may hold thousands of records).
    let found = store
        .with_records(&resolved.task, |records| {
            let assessment = records.iter().find_map(|r| match &r.body {
                Body::Assessment(a) if r.id() == job.assessment.as_str() => Some(a.clone()),
                _ => None,
            });
            let plan = match &job.plan {
                Some(id) => Some(
                    records
                        .iter()
                        .find(|r| r.id() == id.as_str() && r.kind() == Kind::Plan)
                        .cloned()
                        .ok_or_else(|| {
                            format!("the job's plan `{id}` is no longer a record of the task")
                        }),
                ),
                None => orphans_before
                    .and_then(|before| unclaimed_plan(records, job, claimed, before))
                    .map(Ok),
            };
            (assessment, plan)
        })
        .map_err(|e| e.to_string())?;
    let assessment = found.0.ok_or_else(|| {
        format!(
            "assessment `{}` is no longer a record of task `{}`",
            job.assessment, resolved.task
        )
    })?;
    let prompt: Arc<str> = match &asked.relayed {
        Some(prompt) => Arc::from(prompt.as_str()),
        None => Arc::from(planning::prompt_for(
            &assessment,
            asked.question.as_deref(),
            asked.prior_opinion.as_deref(),
            &planning::invariants_for(&resolved, &store).map_err(|e| e.to_string())?,
        )),
    };
    let plan_record = match found.1 {
        Some(plan) => plan?,
        None => {
            let env = planning::plan_env(&resolved, &store, time::OffsetDateTime::now_utc())
                .map_err(|e| e.to_string())?;
            let mut input = serde_json::json!({
                "kind": "plan", "assessment": job.assessment, "prompt": &*prompt
            });
            for (name, value) in [
                ("question", &asked.question),
                ("prior_opinion", &asked.prior_opinion),
            ] {
                if let Some(value) = value {
                    input[name] = value.as_str().into();
                }
            }
            store
                .write(&resolved.task, &input, Some(&env))
                .map_err(|e| format!("the plan could not be recorded: {e}"))?
        }
    };
    let Body::Plan(plan) = &plan_record.body else {
        return Err(format!("`{}` is not a plan", plan_record.id()));
    };
    let plan = plan.clone();
    let recorded = store
        .with_records(&resolved.task, |records| {
            plan.selected
                .iter()
                .map(|s| consultation_of(records, plan_record.id(), &s.advisor))
                .collect()
        })
        .map_err(|e| e.to_string())?;
    Ok(Prepared {
        context,
        resolved,
        store,
        assessment,
        plan_record,
        plan,
        prompt,
        recorded,
    })
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
    plan_id: &str,
    pending: &[usize],
    recorded: &mut [Option<Record>],
) -> Option<Ending> {
    let prompt = prepared.prompt.clone();
    // Every exchange of the job, including its wait for a free turn, ends by then.
    let exchanges_end = entry.order.timeout.deadline_from(Instant::now());
    // The prepared context, not the journaled one: a resumed job's credentials were
    // filled from the daemon's own environment when it was prepared.
    let env = env_lookup(&prepared.context);
    // The values this job's exchanges may see, scrubbed by value from what is recorded
    // and from the events' diagnostics.
    let secrets: Arc<[String]> = prepared.context.credentials.values().cloned().collect();
    let mut waiting = Vec::new();
    for &index in pending {
        let advisor = &prepared.plan.selected[index];
        let (tx, rx) = oneshot::channel();
        let catalogue_entry = prepared
            .resolved
            .catalogue
            .advisors
            .iter()
            .find(|a| a.id == advisor.advisor)
            .cloned();
        let source = catalogue_entry.as_ref().map(|e| e.source());
        waiting.push((index, advisor.advisor.clone(), source, rx));
        let io = Io {
            deadline: exchanges_end,
            cancel: entry.cancel.child_token(),
            env: env.clone(),
            http: jobs.http.clone(),
        };
        let turn = Turn {
            entry: entry.clone(),
            index,
            advisor: advisor.advisor.clone(),
            prompt: prompt.clone(),
            io,
            drain: jobs.drain.clone(),
            secrets: secrets.clone(),
        };
        let slots = catalogue_entry
            .as_ref()
            .map(|e| jobs.advisor_slots(&e.id, e.max_concurrent));
        let adapter = catalogue_entry
            .as_ref()
            .and_then(|e| jobs.registry.get(&e.adapter));
        jobs.tracker.spawn(async move {
            let exchange = match (catalogue_entry, adapter, slots) {
                (Some(catalogue_entry), Some(adapter), Some(slots)) => {
                    turn.run(adapter, advisor_spec(&catalogue_entry), slots)
                        .await
                }
                (None, _, _) if turn.advisor.starts_with(advisord_adapters::mesh::ID_PREFIX) => {
                    Exchange::Ran(Box::new(Outcome {
                        result: Err(Failure::new(
                            FailureKind::Unavailable,
                            &format!("peer `{}` has left the mesh", turn.advisor),
                        )),
                        usage: None,
                        duration_ms: 0,
                        source: None,
                        vouched: true,
                    }))
                }
                (None, _, _) => Exchange::Ran(Box::new(unreachable_outcome(format!(
                    "advisor `{}` is no longer in the catalogue; add it back or plan again",
                    turn.advisor
                )))),
                (Some(e), _, _) => Exchange::Ran(Box::new(unreachable_outcome(format!(
                    "no adapter named `{}` for advisor `{}`; fix its `adapter` in the catalogue",
                    e.adapter, e.id
                )))),
            };
            let _ = tx.send(exchange);
        });
    }

    let task = prepared.resolved.task.clone();
    let store = prepared.store.clone();
    let mut interrupted = false;
    let mut failure: Option<String> = None;
    for (index, advisor, source, rx) in waiting {
        let exchange = rx.await.unwrap_or(Exchange::NotStarted);
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
        tracing::debug!(job = %entry.id(), advisor = %advisor, ok = outcome.result.is_ok(), "exchange ended");
        let stopped_by_shutdown = matches!(&outcome.result, Err(f) if f.kind == FailureKind::Cancelled)
            && !entry.cancel_requested();
        if stopped_by_shutdown {
            // Not the advisor's fault and not the client's wish: ask it again on resume.
            interrupted = true;
            continue;
        }
        let input = draft::consultation_input(plan_id, &advisor, &outcome);
        let made = Made {
            job: entry.id().to_string(),
            source: draft::answer_source(source.as_deref(), &outcome),
            counts: outcome.vouched,
        };
        match write_consultation(
            &store,
            &task,
            plan_id,
            &advisor,
            input,
            secrets.clone(),
            made,
        )
        .await
        {
            Ok(record) => {
                tracing::debug!(job = %entry.id(), advisor = %advisor, "consultation recorded");
                entry.update(|job| {
                    if let (Some(c), Body::Consultation(body)) =
                        (job.consultations.get_mut(index), &record.body)
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
                    advisor: advisor.clone(),
                    record: Box::new(record.clone()),
                });
                recorded[index] = Some(record);
            }
            Err(reason) => {
                failure = Some(reason);
                entry.cancel.cancel(); // stop the other exchanges: nothing more is recorded
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
        let waited = Instant::now();
        let permit = tokio::select! {
            biased;
            () = self.io.cancel.cancelled() => return Exchange::NotStarted,
            () = tokio::time::sleep_until(self.io.deadline) => {
                let failure = Failure::new(
                    FailureKind::Timeout,
                    "no free turn before the deadline: the advisor's `max_concurrent` exchanges \
                     were all busy with other jobs",
                );
                return Exchange::Ran(Box::new(Outcome {
                    result: Err(failure),
                    usage: None,
                    duration_ms: millis(waited.elapsed()),
                    source: None,
                    vouched: true,
                }));
            }
            permit = slots.acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return Exchange::NotStarted,
            },
        };
        if self.drain.is_cancelled() {
            return Exchange::NotStarted;
        }
        self.entry.set_exchange(self.index, ExchangeStatus::Running);
        self.entry.emit(Event::Started {
            job: self.entry.id(),
            advisor: self.advisor.clone(),
            at: Timestamp::now(),
        });
        let consulted = AssertUnwindSafe(contract::consult(
            adapter.as_ref(),
            &spec,
            &self.prompt,
            &self.io,
        ))
        .catch_unwind()
        .await;
        drop(permit);
        // A panicking adapter is that advisor's failure, not the job's nor the daemon's.
        let outcome = consulted.unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            unreachable_outcome(format!("the adapter failed unexpectedly: {what}"))
        });
        let (status, failure, diagnostic) = match &outcome.result {
            Ok(_) => (
                crate::core::records::ConsultationStatus::Completed,
                None,
                None,
            ),
            Err(f) => (
                crate::core::records::ConsultationStatus::Failed,
                record_failure_kind(f.kind),
                // The event is not recorded, but it is shown: the same scrubbing as the
                // writer's.
                Some(crate::core::redact::scrub_with(
                    &f.diagnostic,
                    &self.secrets,
                    &mut Default::default(),
                )),
            ),
        };
        self.entry.emit(Event::Finished {
            at: crate::protocol::Timestamp::now(),
            job: self.entry.id(),
            advisor: self.advisor.clone(),
            status,
            failure,
            diagnostic,
            duration_ms: outcome.duration_ms,
        });
        Exchange::Ran(Box::new(outcome))
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A failure kind of the adapters as the records name it.
fn record_failure_kind(kind: FailureKind) -> Option<crate::core::records::FailureKind> {
    crate::core::records::FailureKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind.as_str())
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

/// Store one consultation, attested as the job's; a duplicate (the advisor already
/// recorded for this plan, by a resumed run) is taken as recorded.
async fn write_consultation(
    store: &Arc<Store>,
    task: &TaskName,
    plan: &str,
    advisor: &str,
    input: serde_json::Value,
    secrets: Arc<[String]>,
    made: Made,
) -> Result<Record, String> {
    let (store, task, plan, advisor) = (
        store.clone(),
        task.clone(),
        plan.to_string(),
        advisor.to_string(),
    );
    let written = tokio::task::spawn_blocking(move || {
        let provenance = crate::store::Provenance {
            job: &made.job,
            source: made.source.as_deref(),
            counts: made.counts,
            secrets: &secrets,
        };
        match store.write_consultation(&task, &input, &provenance) {
            Ok(record) => Ok(record),
            Err(StoreError::Refused(r)) if r.reason == ReasonCode::DuplicateConsultation => store
                .with_records(&task, |records| consultation_of(records, &plan, &advisor))
                .map_err(|e| e.to_string())?
                .ok_or_else(|| r.to_string()),
            Err(e) => Err(format!(
                "the consultation of `{advisor}` could not be recorded: {e}"
            )),
        }
    })
    .await;
    written.unwrap_or_else(|e| Err(format!("recording failed: {e}")))
}

/// Record the disagreement when a completed consultation of the plan diverges, once.
async fn record_disagreement(
    entry: &Arc<JobEntry>,
    prepared: &Prepared,
    recorded: &[Option<Record>],
) -> Result<(), String> {
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
            .map_err(|e| e.to_string())?;
        if let Some(earlier) = earlier {
            return Ok(earlier);
        }
        store
            .write(&task, &input, None)
            .map_err(|e| format!("the disagreement could not be recorded: {e}"))
    })
    .await
    .unwrap_or_else(|e| Err(format!("recording failed: {e}")))?;
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

    /// The adapters crate cannot depend on the records, so it mirrors their failure kinds
    /// and stances; outcomes cross by name. The two sets of names must stay the same.
    #[test]
    fn adapter_outcomes_and_records_name_the_same_kinds_and_stances() {
        use crate::core::records;
        use advisord_adapters::normalise;
        let set =
            |names: Vec<&'static str>| names.into_iter().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(
            set(FailureKind::ALL.map(FailureKind::as_str).to_vec()),
            set(records::FailureKind::ALL
                .map(records::FailureKind::as_str)
                .to_vec()),
        );
        assert_eq!(
            set(normalise::Stance::ALL
                .map(normalise::Stance::as_str)
                .to_vec()),
            set(records::Stance::ALL.map(records::Stance::as_str).to_vec()),
        );
        for kind in FailureKind::ALL {
            assert!(record_failure_kind(kind).is_some(), "{kind:?}");
        }
    }

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
