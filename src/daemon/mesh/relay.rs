//! A relaying peer answers a review through its normal job machinery: it records an
//! assessment in its own relay task (`mesh-relay`, under its relay root), queues a
//! consultation job whose question is the one the asker sent, and answers with the first
//! completed answer (the other exchanges are then cancelled). Its own catalogue and
//! credentials are used; the records stay here.

use super::Mesh;
use crate::context::Resolved;
use crate::core::catalogue::CAPABILITIES;
use crate::core::records::{Body, ConsultationStatus, Status};
use crate::daemon::jobs::{JobEntry, Jobs};
use crate::protocol::{
    ConsultRequest, Event, ExchangeStatus, Job, RecordId, RequestContext, Timeout,
};
use crate::service;
use crate::store::Store;
use advisord_adapters::contract::FailureKind;
use advisord_adapters::mesh::wire::{ReplyOutcome, ReviewRequest};
use advisord_adapters::normalise::{Normalised, Stance};
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
    let Ok(env) = service::plan_env(&resolved, &store, time::OffsetDateTime::now_utc()) else {
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
    if jobs.drain.is_cancelled() {
        return failed(FailureKind::Unavailable, "the peer is shutting down");
    }
    let context = mesh.relay_context.clone();
    let capabilities: Vec<String> = asked
        .capabilities
        .iter()
        .filter(|c| CAPABILITIES.contains(&c.as_str()) && c.as_str() != "reviews")
        .cloned()
        .collect();
    let input = serde_json::json!({
        "kind": "assessment",
        "subject": format!("review asked over the mesh by {} (request {})", asked.asker, asked.request_id),
        "materiality": "high",
        "confidence": "low",
        "hypothesis": "a peer asked for an independent review; its question is the job's question",
        "capabilities": capabilities,
        "evidence": [{"kind": "observation", "ref": format!("mesh request {} from {}", asked.request_id, asked.asker)}],
    });
    let (for_record, registry) = (context.clone(), jobs.registry.clone());
    let recorded =
        tokio::task::spawn_blocking(move || service::record(&registry, &for_record, &input)).await;
    let assessment = match recorded {
        Ok(Ok(record)) => record,
        Ok(Err(e)) => {
            return failed(
                FailureKind::Error,
                format!("the relay could not record its assessment: {e}"),
            )
        }
        Err(e) => return failed(FailureKind::Error, format!("the relay failed: {e}")),
    };
    tracing::debug!(request = %asked.request_id, "relay assessment recorded");
    // Leave the exchanges a moment to answer before the asker's own deadline.
    let budget = deadline
        .saturating_sub(Duration::from_millis(150))
        .max(Duration::from_millis(50));
    let request = ConsultRequest {
        context,
        assessment: RecordId::from(assessment.id()),
        question: None,
        prior_opinion: None,
        timeout: Timeout::from_secs_f64(budget.as_secs_f64()).ok(),
    };
    let job = match jobs.submit_relayed(request, question.to_string()).await {
        Ok(job) => job,
        Err(e) => {
            return failed(
                FailureKind::Error,
                format!("the relay could not queue its job: {e}"),
            )
        }
    };
    let Ok(entry) = jobs.entry(&job.id) else {
        return failed(FailureKind::Error, "the relay's job vanished");
    };
    tracing::info!(job = %job.id, request = %asked.request_id, "relaying a review");
    tokio::select! {
        outcome = first_answer(&entry) => outcome,
        () = cancel.cancelled() => {
            entry.request_cancel();
            failed(FailureKind::Cancelled, "the asker cancelled the review")
        }
        () = tokio::time::sleep(deadline) => {
            entry.request_cancel();
            failed(FailureKind::Timeout, "the relay's advisors gave no answer within the deadline")
        }
    }
}

/// Follow the job's events: at the first exchange that completes, cancel the others and
/// answer with its recorded fields; when the job ends without one, pass the first failure
/// through (or `unavailable` when nobody could be asked).
async fn first_answer(entry: &Arc<JobEntry>) -> ReplyOutcome {
    let mut wake = entry.watch_events();
    let mut seen = 0;
    let mut winner: Option<String> = None;
    let mut first_failure: Option<ReplyOutcome> = None;
    loop {
        let (events, _) = entry.events_from(seen);
        seen += events.len();
        for event in events {
            match event {
                Event::Finished {
                    advisor, status, ..
                } if status == ConsultationStatus::Completed && winner.is_none() => {
                    winner = Some(advisor);
                    entry.request_cancel();
                }
                Event::Recorded {
                    advisor, record, ..
                } => {
                    let Body::Consultation(c) = &record.body else {
                        continue;
                    };
                    if c.status == ConsultationStatus::Completed {
                        if winner.is_none() || winner.as_deref() == Some(&advisor) {
                            entry.request_cancel();
                            return completed(c, &advisor);
                        }
                    } else if first_failure.is_none()
                        && c.failure != Some(crate::core::records::FailureKind::Cancelled)
                    {
                        first_failure = Some(ReplyOutcome::Failed {
                            failure: c
                                .failure
                                .and_then(|k| {
                                    FailureKind::ALL
                                        .into_iter()
                                        .find(|f| f.as_str() == k.as_str())
                                })
                                .unwrap_or(FailureKind::Error),
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
        if wake.changed().await.is_err() {
            return failed(FailureKind::Unavailable, "the peer is shutting down");
        }
    }
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
    let stance = c
        .stance
        .and_then(|s| Stance::ALL.into_iter().find(|n| n.as_str() == s.as_str()))
        .unwrap_or(Stance::Inconclusive);
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
        usage: c.usage.map(|u| advisord_adapters::contract::Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }),
    }
}
