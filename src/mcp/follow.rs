//! Following a job through the façade until it ends or a deadline passes, with each event
//! sent on as a progress notification; the result is the job with the outcomes its stream
//! carried.

use crate::error::Result;
use crate::facade::Api;
use crate::follow::Follower;
use crate::protocol::{Event, EventsRequest, JobId, JobRequest};
use crate::render::job::{duration_text, JobReport};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;
use std::time::Duration;
use tokio::time::Instant;

/// How long the records a job already references may take to arrive on its replayed
/// stream once the deadline has passed.
const CATCH_UP: Duration = Duration::from_secs(2);

/// Progress notifications to one host, for one call's progress token.
pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: u32,
    /// The job's events this host was already sent (by an earlier call), not sent again.
    skip: usize,
    /// The job's events passed so far (sent or skipped).
    events: usize,
}

impl Progress {
    /// Notifications carrying `token`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Progress {
        Progress {
            peer,
            token,
            sent: 0,
            skip: 0,
            events: 0,
        }
    }

    /// Send nothing for the job's first `events` events: the host was sent them already.
    pub fn skipping(mut self, events: usize) -> Progress {
        self.skip = events;
        self
    }

    /// How many of the job's events the host has been sent, by this call and before it.
    pub fn events(&self) -> usize {
        self.events.max(self.skip)
    }

    /// The progress token of `mcp`'s call, if the host sent one.
    pub fn of(mcp: &rmcp::service::RequestContext<RoleServer>) -> Option<Progress> {
        mcp.meta
            .get_progress_token()
            .map(|token| Progress::new(mcp.peer.clone(), token))
    }

    async fn event(&mut self, event: &Event) {
        self.events += 1;
        if self.events > self.skip {
            self.say(describe(event)).await;
        }
    }

    /// One notification saying `message`.
    pub async fn say(&mut self, message: String) {
        self.sent += 1;
        let mut param = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent));
        param.message = Some(message);
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!("a progress notification could not be sent: {e}");
        }
    }
}

/// One event in a few words, for a progress message.
pub fn describe(event: &Event) -> String {
    match event {
        Event::Plan { record, .. } => match &record.body {
            crate::core::records::Body::Plan(plan) => {
                let selected: Vec<&str> =
                    plan.selected.iter().map(|s| s.advisor.as_str()).collect();
                if selected.is_empty() {
                    format!("plan {}: nobody selected", record.id())
                } else {
                    format!("plan {}: asking {}", record.id(), selected.join(", "))
                }
            }
            _ => format!("plan {}", record.id()),
        },
        Event::Started { advisor, .. } => format!("{advisor}: asked"),
        Event::Finished {
            advisor,
            status,
            failure,
            duration_ms,
            ..
        } => match failure {
            Some(kind) => format!(
                "{advisor}: failed ({}) after {}",
                kind.as_str(),
                duration_text(*duration_ms)
            ),
            None => format!(
                "{advisor}: {} after {}",
                serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                duration_text(*duration_ms)
            ),
        },
        Event::Recorded {
            advisor, record, ..
        } => {
            format!("{advisor}: recorded as {}", record.id())
        }
        Event::Disagreement { record, .. } => {
            format!("disagreement {} recorded", record.id())
        }
        Event::Done { result, .. } => format!("job {}", result.state.as_str()),
    }
}

/// Follow job `id` until it ends or `deadline` passes; then the job as it stands with
/// every outcome recorded so far. A deadline already passed answers at once.
pub async fn follow(
    api: &dyn Api,
    id: &JobId,
    deadline: Instant,
    progress: &mut Option<Progress>,
) -> Result<JobReport> {
    let events = api
        .events(EventsRequest {
            id: id.clone(),
            from: 0,
        })
        .await?;
    let mut follower = Follower::new(events);
    if let Some(report) = pass_on(&mut follower, progress, deadline, |_| {
        Instant::now() < deadline
    })
    .await?
    {
        return Ok(report);
    }
    // The deadline passed (or the stream ended early): the job as it stands, with the
    // records it references, which its stream has already carried. What the stream
    // carries meanwhile is sent on like the rest, and a job that ended as the deadline
    // passed is followed to its end: its host is told `job done` as it would have been
    // a moment earlier, never handed a finished job without it.
    let now = api.job(JobRequest { id: id.clone() }).await?;
    let catch_up = Instant::now() + CATCH_UP;
    let ended = now.state.is_finished();
    if let Some(report) = pass_on(&mut follower, progress, catch_up, |follower| {
        ended || !follower.carried_all(&now)
    })
    .await?
    {
        return Ok(report);
    }
    Ok(follower.into_report(now))
}

/// Send on the job's events as they come, each as a progress notification, while `more`
/// holds, the stream goes on and `until` has not passed; the job's report once the
/// stream says it ended.
async fn pass_on<S: futures::Stream<Item = Result<Event>> + Unpin>(
    follower: &mut Follower<S>,
    progress: &mut Option<Progress>,
    until: Instant,
    more: impl Fn(&Follower<S>) -> bool,
) -> Result<Option<JobReport>> {
    while more(follower) {
        let next = tokio::select! {
            next = follower.next() => next?,
            () = tokio::time::sleep_until(until) => break,
        };
        let Some(event) = next else { break };
        if let Some(p) = progress.as_mut() {
            p.event(&event).await;
        }
        if let Some(report) = follower.take_report() {
            return Ok(Some(report));
        }
    }
    Ok(None)
}
