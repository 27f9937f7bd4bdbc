//! A relaying peer answers a review through its normal job machinery, as a client of the
//! `Jobs` API like any surface: it records an assessment in its own relay task
//! (`mesh-relay`, under its relay root) for the capabilities the asker's plan wants
//! reviewed, queues a consultation job whose question is the one the asker sent, and
//! answers with the first completed answer of an advisor its plan selected for one of
//! those capabilities (the other exchanges are then cancelled). Its own catalogue and
//! credentials are used; the records stay here, and the job ends through `Jobs::finish`
//! with its feed event like any other.

use super::Mesh;
use crate::context::Resolved;
use crate::core::catalogue::CAPABILITIES;
use crate::core::records::{Body, ConsultationStatus, Record, Status};
use crate::daemon::jobs::{JobHandle, Jobs};
use crate::error::Error;
use crate::planning;
use crate::protocol::{
    ConsultRequest, Event, ExchangeStatus, Job, RecordId, RequestContext, Timeout,
};
use crate::store::Store;
use advisord_adapters::contract::FailureKind;
use advisord_adapters::mesh::wire::{ReplyOutcome, ReviewRequest};
use advisord_adapters::normalise::{Normalised, Stance};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The relay's task.
pub(crate) const TASK: &str = "mesh-relay";

/// What the relay's available advisors offer: their capabilities, and their sources.
pub(crate) fn offered(
    context: &RequestContext,
    registry: &advisord_adapters::registry::Registry,
) -> (Vec<String>, Vec<String>) {
    let Ok(resolved) = Resolved::resolve(context, registry) else {
        return (Vec::new(), Vec::new());
    };
    let store = Store::open(&resolved.state_dir);
    let Ok(env) = planning::plan_env(&resolved, &store, time::OffsetDateTime::now_utc()) else {
        return (Vec::new(), Vec::new());
    };
    let mut capabilities: Vec<String> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    for advisor in &resolved.catalogue.advisors {
        let available = env
            .availability
            .iter()
            .any(|a| a.advisor == advisor.id && a.status == Status::Available);
        if !available {
            continue;
        }
        for capability in &advisor.capabilities {
            if !capabilities.contains(capability) {
                capabilities.push(capability.clone());
            }
        }
        let source = advisor.source();
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    if !capabilities.is_empty() && !capabilities.iter().any(|c| c == "reviews") {
        capabilities.push("reviews".to_string());
    }
    (capabilities, sources)
}

fn failed(kind: FailureKind, diagnostic: impl Into<String>) -> ReplyOutcome {
    ReplyOutcome::Failed {
        failure: kind,
        diagnostic: diagnostic.into(),
        retry_after_s: None,
    }
}

/// Answer `asked` through a job of this daemon, within `deadline`; `cancel` is the asker's
/// cancel notice (or the daemon stopping).
pub(crate) async fn review(
    jobs: &Arc<Jobs>,
    mesh: &Mesh,
    asked: &ReviewRequest,
    question: &str,
    deadline: Duration,
    cancel: CancellationToken,
) -> ReplyOutcome {
    if jobs.shutting_down() {
        return failed(FailureKind::Unavailable, "the peer is shutting down");
    }
    let capabilities = asked_capabilities(asked);
    let job = match submit(jobs, mesh, asked, &capabilities, question, deadline).await {
        Ok(job) => job,
        Err(e) => return failed(FailureKind::Error, e.to_string()),
    };
    tracing::info!(job = %job.id(), request = %asked.request_id, "relaying a review");
    tokio::select! {
        outcome = first_answer(&job, &capabilities) => outcome,
        () = cancel.cancelled() => {
            job.stop();
            failed(FailureKind::Cancelled, "the asker cancelled the review")
        }
        () = tokio::time::sleep(deadline) => {
            job.stop();
            failed(FailureKind::Timeout, "the relay's advisors gave no answer within the deadline")
        }
    }
}

/// The capabilities the asker's plan wants reviewed (known ones, `reviews` aside).
fn asked_capabilities(asked: &ReviewRequest) -> Vec<String> {
    asked
        .capabilities
        .iter()
        .filter(|c| CAPABILITIES.contains(&c.as_str()) && c.as_str() != "reviews")
        .cloned()
        .collect()
}

/// Record the relay's assessment of `asked` and queue its job, whose exchanges end a
/// moment before the asker's `deadline`.
async fn submit(
    jobs: &Arc<Jobs>,
    mesh: &Mesh,
    asked: &ReviewRequest,
    capabilities: &[String],
    question: &str,
    deadline: Duration,
) -> Result<JobHandle, Error> {
    // Leave the exchanges a moment to answer before the asker's own deadline.
    let budget = deadline
        .saturating_sub(Duration::from_millis(150))
        .max(Duration::from_millis(50));
    let timeout = Timeout::from_secs_f64(budget.as_secs_f64()).map_err(|e| {
        Error::Usage(format!(
            "the review's deadline ({} ms) is not a job timeout the relay accepts: {e}",
            asked.deadline_ms
        ))
    })?;
    let context = mesh.relay_context.clone();
    let input = serde_json::json!({
        "kind": "assessment",
        "subject": format!("review asked over the mesh by {} (request {})", asked.asker, asked.request_id),
        "materiality": "high",
        "confidence": "low",
        "hypothesis": "a peer asked for an independent review; its question is the job's question",
        "capabilities": capabilities,
        "evidence": [{"kind": "observation", "ref": format!("mesh request {} from {}", asked.request_id, asked.asker)}],
    });
    let assessment = jobs
        .record(context.clone(), input)
        .await
        .map_err(|e| Error::Internal(format!("the relay could not record its assessment: {e}")))?;
    tracing::debug!(request = %asked.request_id, "relay assessment recorded");
    let request = ConsultRequest {
        context,
        assessment: RecordId::from(assessment.id()),
        question: None,
        prior_opinion: None,
        timeout: Some(timeout),
    };
    jobs.submit_relayed(request, question.to_string())
        .await
        .map_err(|e| Error::Internal(format!("the relay could not queue its job: {e}")))
}

/// The advisors of `plan` that may answer a review asked for `capabilities`: those the
/// plan selected for one of them; every selected advisor when nothing was asked.
fn eligible(plan: &Record, capabilities: &[String]) -> Vec<String> {
    let Body::Plan(plan) = &plan.body else {
        return Vec::new();
    };
    plan.selected
        .iter()
        .filter(|s| capabilities.is_empty() || s.covers.iter().any(|c| capabilities.contains(c)))
        .map(|s| s.advisor.clone())
        .collect()
}

/// Follow the job's events: at the first exchange of an eligible advisor (one offering a
/// capability asked for) that completes, cancel the others and answer with its recorded
/// fields; when the job ends without one, pass the first failure through (or
/// `unavailable` when nobody could be asked).
async fn first_answer(job: &JobHandle, capabilities: &[String]) -> ReplyOutcome {
    let mut events = Box::pin(job.events(0));
    let mut may_answer: Vec<String> = Vec::new();
    let mut winner: Option<String> = None;
    let mut first_failure: Option<ReplyOutcome> = None;
    while let Some(event) = events.next().await {
        match event {
            Event::Plan { record, .. } => {
                may_answer = eligible(&record, capabilities);
                if may_answer.is_empty() && !capabilities.is_empty() {
                    job.stop();
                    return failed(
                        FailureKind::Unavailable,
                        format!(
                            "the relay has no available advisor offering {}",
                            capabilities.join(", ")
                        ),
                    );
                }
            }
            Event::Finished {
                advisor, status, ..
            } if status == ConsultationStatus::Completed
                && winner.is_none()
                && may_answer.contains(&advisor) =>
            {
                winner = Some(advisor);
                job.stop();
            }
            Event::Recorded {
                advisor, record, ..
            } if may_answer.contains(&advisor) => {
                let Body::Consultation(c) = &record.body else {
                    continue;
                };
                if c.status == ConsultationStatus::Completed {
                    if winner.is_none() || winner.as_deref() == Some(&advisor) {
                        job.stop();
                        return completed(c, &advisor);
                    }
                } else if first_failure.is_none() && c.failure != Some(FailureKind::Cancelled) {
                    first_failure = Some(ReplyOutcome::Failed {
                        failure: c.failure.unwrap_or(FailureKind::Error),
                        diagnostic: c.diagnostic.clone().unwrap_or_default(),
                        retry_after_s: c.retry_after_s,
                    });
                }
            }
            Event::Done { result, .. } => {
                return first_failure.unwrap_or_else(|| nobody(&result));
            }
            _ => {}
        }
    }
    failed(FailureKind::Unavailable, "the peer is shutting down")
}

fn nobody(job: &Job) -> ReplyOutcome {
    if job.consultations.is_empty() {
        failed(
            FailureKind::Unavailable,
            "the relay has no available advisor for the capabilities asked",
        )
    } else if job
        .consultations
        .iter()
        .any(|c| c.status == ExchangeStatus::Failed)
    {
        failed(
            FailureKind::Cancelled,
            "the relay's exchanges were cancelled",
        )
    } else {
        failed(
            FailureKind::Error,
            job.reason
                .clone()
                .unwrap_or_else(|| "the relay's job ended without an answer".into()),
        )
    }
}

fn completed(c: &crate::core::records::Consultation, advisor: &str) -> ReplyOutcome {
    let stance = c.stance.unwrap_or(Stance::Inconclusive);
    ReplyOutcome::Completed {
        answer: Normalised {
            conclusion: c.conclusion.clone().unwrap_or_default(),
            stance,
            assumptions: c.assumptions.clone(),
            risks: c.risks.clone(),
            actions: c.actions.clone(),
            falsifiers: c.falsifiers.clone(),
            confidence: c.confidence,
            invariants: c
                .invariants
                .iter()
                .map(|i| advisord_adapters::normalise::InvariantAnswer {
                    name: i.name.clone(),
                    holds: i.holds,
                    note: i.note.clone(),
                })
                .collect(),
        },
        source: c
            .source
            .clone()
            .unwrap_or_else(|| format!("advisor:{advisor}")),
        usage: c.usage,
    }
}
