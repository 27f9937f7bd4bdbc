//! The handlers of the consultation routes: queue a job (journaled before the reply),
//! list and show jobs, stream a job's events, cancel a job.

use crate::context::Resolved;
use crate::core::records::Kind;
use crate::daemon::dispatch::{check_root, json_body, Incoming};
use crate::daemon::error::ApiError;
use crate::daemon::handlers::{blocking, Answer};
use crate::daemon::jobs::{JobEntry, JobRequest};
use crate::daemon::Shared;
use crate::protocol::{
    codes, ConsultRequest, Event, Job, JobList, JobState, DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, NDJSON,
};
use crate::service::ServiceError;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long `DELETE` waits for a running job to wind down before answering 202.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// The current time as RFC 3339 UTC.
pub(crate) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// `timeout_s` checked: positive, finite, at most [`MAX_TIMEOUT_S`].
fn deadline_of(timeout_s: Option<f64>) -> Result<Duration, ApiError> {
    let seconds = timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if seconds.is_finite() && seconds > 0.0 && seconds <= MAX_TIMEOUT_S {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(ApiError::bad_request(
            codes::INVALID_REQUEST,
            format!(
                "`timeout_s` is {seconds}: it takes seconds above 0 and at most {MAX_TIMEOUT_S} \
                 (decimals allowed; default {DEFAULT_TIMEOUT_S})"
            ),
        ))
    }
}

fn unknown_job(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::UNKNOWN_JOB,
        format!(
            "no job `{id}`: it never existed or was pruned after it ended; \
             `GET /api/v1/consultations` lists the jobs kept"
        ),
    )
}

/// `POST /api/v1/consultations`: 202 with the job once it is journaled.
pub(crate) async fn consult(shared: &Arc<Shared>, incoming: Incoming) -> Answer {
    if shared.drain.is_cancelled() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            codes::SHUTTING_DOWN,
            "the daemon is shutting down and accepts no new job; retry once it is back",
        ));
    }
    let request: ConsultRequest = json_body(&incoming.body, "consultation request")?;
    check_root(&request.context)?;
    let timeout = deadline_of(request.timeout_s)?;
    let mut context = request.context;
    let assessment = request.assessment;
    let (checked_context, task) = {
        let assessment = assessment.clone();
        let shared = shared.clone();
        blocking(move || {
            let resolved = Resolved::resolve(&context)?;
            let records = shared.store(&resolved.state_dir).records(&resolved.task)?;
            let found = records.iter().find(|r| r.id() == assessment);
            match found.map(|r| r.kind()) {
                Some(Kind::Assessment) => {}
                Some(other) => {
                    return Err(ServiceError::Usage(format!(
                        "`{assessment}` is a {other}, not an assessment; consult on an \
                         assessment id"
                    )))
                }
                None => {
                    return Err(ServiceError::NotFound(format!(
                        "no assessment `{assessment}` in task `{}`; record one first, or name \
                         the task it belongs to",
                        resolved.task
                    )))
                }
            }
            // Pin the task, so a resumed job records where this one would have.
            context.task = Some(resolved.task.to_string());
            Ok((context, resolved.task.to_string()))
        })
        .await?
    };
    context = checked_context;
    let job = Job {
        id: ulid::Ulid::new().to_string(),
        state: JobState::Queued,
        root: context.root.display().to_string(),
        task,
        assessment,
        plan: None,
        consultations: Vec::new(),
        disagreement: None,
        created_at: now_rfc3339(),
        finished_at: None,
        reason: None,
    };
    let entry = Arc::new(JobEntry::new(
        job.clone(),
        JobRequest {
            context,
            question: request.question,
            prior_opinion: request.prior_opinion,
            timeout,
            resumed: false,
        },
        &shared.token,
    ));
    shared.persist(&entry).await.map_err(|e| {
        ApiError::internal(format!(
            "the job was not accepted: {e}; free space or fix the data directory"
        ))
    })?;
    tracing::info!(job = %job.id, task = %job.task, assessment = %job.assessment, "job queued");
    shared.jobs.insert(entry.clone());
    shared.enqueue(entry);
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

/// `GET /api/v1/consultations`: the jobs kept, oldest first, filtered by the query.
pub(crate) fn list(shared: &Shared, incoming: Incoming) -> Answer {
    let query = incoming.query;
    let jobs: Vec<Job> = shared
        .jobs
        .all()
        .iter()
        .map(|e| e.snapshot())
        .filter(|j| query.root.as_ref().map_or(true, |r| &j.root == r))
        .filter(|j| query.task.as_ref().map_or(true, |t| &j.task == t))
        .filter(|j| query.state.map_or(true, |s| j.state == s))
        .collect();
    Ok(Json(JobList { jobs }).into_response())
}

/// `GET /api/v1/consultations/{id}`.
pub(crate) fn get(shared: &Shared, id: &str) -> Answer {
    let entry = shared.jobs.get(id).ok_or_else(|| unknown_job(id))?;
    Ok(Json(entry.snapshot()).into_response())
}

/// `GET /api/v1/consultations/{id}/events`: past events, then live ones, as NDJSON,
/// ending after `done` (or when the daemon stops).
pub(crate) fn events(shared: &Shared, id: &str) -> Answer {
    let entry = shared.jobs.get(id).ok_or_else(|| unknown_job(id))?;
    let stream = EventStream {
        wake: entry.watch_events(),
        entry,
        position: 0,
        ended: false,
        stop: shared.token.clone(),
    };
    let body = futures::stream::unfold(stream, EventStream::next_chunk);
    Ok(([(header::CONTENT_TYPE, NDJSON)], Body::from_stream(body)).into_response())
}

struct EventStream {
    entry: Arc<JobEntry>,
    wake: watch::Receiver<usize>,
    position: usize,
    ended: bool,
    stop: CancellationToken,
}

impl EventStream {
    /// The next lines to send (every event not sent yet), waiting for one if none.
    async fn next_chunk(mut self) -> Option<(Result<Bytes, Infallible>, EventStream)> {
        loop {
            if self.ended {
                return None;
            }
            // Mark the count seen before reading, so an event emitted after the read
            // wakes the wait below.
            self.wake.borrow_and_update();
            let (events, done) = self.entry.events_from(self.position);
            if !events.is_empty() {
                self.position += events.len();
                self.ended = done;
                let mut lines = Vec::new();
                for event in &events {
                    // An event is plain data; it always encodes.
                    serde_json::to_writer(&mut lines, event).unwrap_or_default();
                    lines.push(b'\n');
                }
                return Some((Ok(Bytes::from(lines)), self));
            }
            tokio::select! {
                changed = self.wake.changed() => if changed.is_err() { return None },
                () = self.stop.cancelled() => return None,
            }
        }
    }
}

/// `DELETE /api/v1/consultations/{id}`: 200 with the job once it ended, 202 if it is still
/// stopping after a few seconds, 409 if it had already ended.
pub(crate) async fn cancel(shared: &Arc<Shared>, id: &str) -> Answer {
    let entry = shared.jobs.get(id).ok_or_else(|| unknown_job(id))?;
    let finished = |job: &Job| {
        ApiError::new(
            StatusCode::CONFLICT,
            codes::JOB_FINISHED,
            format!(
                "job `{}` already ended ({}); there is nothing to cancel",
                job.id,
                job.state.as_str()
            ),
        )
    };
    let now = entry.snapshot();
    if now.state.is_finished() {
        return Err(finished(&now));
    }
    if entry
        .transition(JobState::Queued, JobState::Cancelled)
        .is_some()
    {
        let job = entry.update(|j| {
            j.finished_at = Some(now_rfc3339());
            j.reason = Some("cancelled before it started".into());
        });
        entry.cancel.cancel();
        if let Err(e) = shared.persist(&entry).await {
            tracing::error!(job = %job.id, error = %e, "could not journal a cancellation");
        }
        entry.emit(Event::Done {
            job: job.id.clone(),
            result: Box::new(job.clone()),
        });
        tracing::info!(job = %job.id, "queued job cancelled");
        return Ok(Json(entry.snapshot()).into_response());
    }
    entry.request_cancel();
    tracing::info!(job = %id, "cancelling a running job");
    let mut wake = entry.watch_events();
    let ended = tokio::time::timeout(CANCEL_WAIT, async {
        loop {
            wake.borrow_and_update();
            if entry.state().is_finished() {
                return;
            }
            if wake.changed().await.is_err() {
                return;
            }
        }
    })
    .await
    .is_ok();
    let job = entry.snapshot();
    if !ended || !job.state.is_finished() {
        return Ok((StatusCode::ACCEPTED, Json(job)).into_response());
    }
    Ok(Json(job).into_response())
}
