//! The socket protocol: every request and response body the client and the daemon
//! exchange, the routes, the job, the events of a job's stream and the error body.
//!
//! The daemon speaks HTTP/1.1 with JSON bodies over a unix socket (SPEC §9); this module
//! is the one place that says what those bodies are, so the client (`src/client.rs`) and
//! the daemon (`src/daemon/`) cannot drift apart. `docs/DAEMON.md` shows each route with
//! `curl --unix-socket`.
//!
//! # How a request carries the asking process's context
//!
//! The daemon is shared by every session of the user, so availability and process
//! advisors must see the environment of the process asking, not the daemon's. Each
//! request therefore carries a [`RequestContext`] (root, state dir, task, catalogue
//! path, mode, `CI`, disable list, cooldown, `PATH`, and the values of the credential
//! variables its catalogue names):
//!
//! - **POST routes** carry it in the JSON body, as the field `context`.
//! - **GET routes** take it the same way, as an optional JSON body
//!   [`ContextBody`] (`{"context": {...}}`; the client always sends one). Without a body
//!   (`curl` by hand), the query parameters `root` (required) and `task` (optional) name
//!   the root and task, and everything else comes from the daemon's own environment,
//!   exactly as for a job resumed after a restart. A body, when present, wins: the query's
//!   `root` and `task` are then not read.
//!
//! Credential values are held in memory for the request (and its job) only: the daemon
//! never journals, records or logs them.

use crate::context::RequestContext;
use crate::core::records::{Confidence, ConsultationStatus, FailureKind, Materiality, Record};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The prefix of every route.
pub const API_PREFIX: &str = "/api/v1";

/// The largest request body the daemon reads (1 MiB); a larger one is refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The consultation deadline when a request gives none, in seconds (SPEC §9).
pub const DEFAULT_TIMEOUT_S: f64 = 90.0;

/// The longest deadline a consultation may ask for, in seconds (one day).
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// The content type of a job's event stream: one JSON [`Event`] per line.
pub const NDJSON: &str = "application/x-ndjson";

/// One route of the API (SPEC §9), parsed from a method and a path by [`Route::parse`].
///
/// The daemon dispatches on this enum in one exhaustive match; the client builds its
/// request lines from [`Route::method`] and [`Route::path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /api/v1/health`: [`Health`].
    Health,
    /// `GET /api/v1/reasoning/advisors`: the advisors view (`advisors --format json`).
    Advisors,
    /// `POST /api/v1/reasoning/plan` with a [`PlanRequest`]: a plan preview, not recorded.
    PlanPreview,
    /// `POST /api/v1/reasoning/records` with a [`RecordRequest`]: the one writer; replies
    /// 201 with the stored record.
    Record,
    /// `GET /api/v1/reasoning`: the task's derived status (`status --format json`).
    Status,
    /// `GET /api/v1/reasoning/explain?id=ID`: the provenance chain of a record.
    Explain,
    /// `GET /api/v1/reasoning/tree?depth=N&show_superseded=true`: the task's records as a
    /// tree (an addition to SPEC §9, so `tree` works through the daemon too).
    Tree,
    /// `GET /api/v1/reasoning/check?path=DIR`: `check` findings.
    Check,
    /// `POST /api/v1/consultations` with a [`ConsultRequest`]: queue a job; replies 202
    /// with the [`Job`] once it is journaled.
    Consult,
    /// `GET /api/v1/consultations?root=&task=&state=`: the jobs kept, oldest first, as
    /// [`JobList`]; the optional query parameters filter.
    Jobs,
    /// `GET /api/v1/consultations/{id}`: one [`Job`].
    Job(String),
    /// `GET /api/v1/consultations/{id}/events`: the job's [`Event`]s as NDJSON, past ones
    /// first, then live ones, ending after [`Event::Done`].
    JobEvents(String),
    /// `DELETE /api/v1/consultations/{id}`: cancel a job; replies 200 with the [`Job`]
    /// once it has ended (or 202 if it is still stopping), 409 when it had already ended.
    Cancel(String),
}

/// Why a method and path name no route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// No route has this path (404 `not_found`).
    NotFound,
    /// The path exists but not with this method (405 `method_not_allowed`); the methods
    /// it accepts.
    MethodNotAllowed(&'static str),
}

impl Route {
    /// The route for `method` and `path` (the path without its query string).
    pub fn parse(method: &str, path: &str) -> Result<Route, RouteError> {
        let rest = path.strip_prefix(API_PREFIX).ok_or(RouteError::NotFound)?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let segments: Vec<&str> = rest.split('/').skip(1).collect();
        let (route, allowed): (Route, &'static str) = match segments.as_slice() {
            ["health"] => (Route::Health, "GET"),
            ["reasoning"] => (Route::Status, "GET"),
            ["reasoning", "advisors"] => (Route::Advisors, "GET"),
            ["reasoning", "plan"] => (Route::PlanPreview, "POST"),
            ["reasoning", "records"] => (Route::Record, "POST"),
            ["reasoning", "explain"] => (Route::Explain, "GET"),
            ["reasoning", "tree"] => (Route::Tree, "GET"),
            ["reasoning", "check"] => (Route::Check, "GET"),
            ["consultations"] => {
                return match method {
                    "GET" => Ok(Route::Jobs),
                    "POST" => Ok(Route::Consult),
                    _ => Err(RouteError::MethodNotAllowed("GET, POST")),
                }
            }
            ["consultations", id] if !id.is_empty() => {
                return match method {
                    "GET" => Ok(Route::Job(id.to_string())),
                    "DELETE" => Ok(Route::Cancel(id.to_string())),
                    _ => Err(RouteError::MethodNotAllowed("GET, DELETE")),
                }
            }
            ["consultations", id, "events"] if !id.is_empty() => {
                (Route::JobEvents(id.to_string()), "GET")
            }
            _ => return Err(RouteError::NotFound),
        };
        if method == allowed {
            Ok(route)
        } else {
            Err(RouteError::MethodNotAllowed(allowed))
        }
    }

    /// The HTTP method of this route.
    pub fn method(&self) -> &'static str {
        match self {
            Route::PlanPreview | Route::Record | Route::Consult => "POST",
            Route::Cancel(_) => "DELETE",
            Route::Health
            | Route::Advisors
            | Route::Status
            | Route::Explain
            | Route::Tree
            | Route::Check
            | Route::Jobs
            | Route::Job(_)
            | Route::JobEvents(_) => "GET",
        }
    }

    /// The path of this route (without a query string).
    pub fn path(&self) -> String {
        let tail = match self {
            Route::Health => "health".to_string(),
            Route::Advisors => "reasoning/advisors".to_string(),
            Route::PlanPreview => "reasoning/plan".to_string(),
            Route::Record => "reasoning/records".to_string(),
            Route::Status => "reasoning".to_string(),
            Route::Explain => "reasoning/explain".to_string(),
            Route::Tree => "reasoning/tree".to_string(),
            Route::Check => "reasoning/check".to_string(),
            Route::Consult | Route::Jobs => "consultations".to_string(),
            Route::Job(id) | Route::Cancel(id) => format!("consultations/{id}"),
            Route::JobEvents(id) => format!("consultations/{id}/events"),
        };
        format!("{API_PREFIX}/{tail}")
    }
}

/// The optional body of a GET route: the asking process's context.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    /// The asking process's context (see the module documentation).
    pub context: RequestContext,
}

/// The query parameters a route may read; each route reads only its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteQuery {
    /// The root, for GET routes sent without a [`ContextBody`]; a filter for [`Route::Jobs`].
    #[serde(default)]
    pub root: Option<String>,
    /// The task, for GET routes sent without a [`ContextBody`]; a filter for [`Route::Jobs`].
    #[serde(default)]
    pub task: Option<String>,
    /// The record id, for [`Route::Explain`] (required there).
    #[serde(default)]
    pub id: Option<String>,
    /// The directory checked, for [`Route::Check`] (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// How deep the tree goes, for [`Route::Tree`] (default: all the way).
    #[serde(default)]
    pub depth: Option<usize>,
    /// Whether the tree shows superseded conclusions, for [`Route::Tree`].
    #[serde(default)]
    pub show_superseded: Option<bool>,
    /// A job state filter (`queued`, `running`, ...), for [`Route::Jobs`].
    #[serde(default)]
    pub state: Option<JobState>,
}

/// The body of `POST /api/v1/reasoning/plan`: what a plan preview is computed for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The asking process's context.
    pub context: RequestContext,
    /// How much a wrong decision would cost.
    pub materiality: Materiality,
    /// The executor's confidence (default `medium`).
    #[serde(default)]
    pub confidence: Confidence,
    /// The capabilities requested (default `independent_reasoning`).
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// The body of `POST /api/v1/reasoning/records`: one record for the writer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordRequest {
    /// The asking process's context (its task is the task written to).
    pub context: RequestContext,
    /// One JSON object: `kind` plus the caller's fields (SPEC §12 `record --file`).
    pub record: serde_json::Value,
}

/// The body of `POST /api/v1/consultations`: a consultation job to queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsultRequest {
    /// The asking process's context; its `PATH` and credential values are what the job's
    /// availability and process advisors see.
    pub context: RequestContext,
    /// The id of the assessment to consult on (a record of the context's task).
    pub assessment: String,
    /// An extra question for the advisors, appended to the built one.
    #[serde(default)]
    pub question: Option<String>,
    /// An opinion from earlier (marked as an opinion in the question, not a fact).
    #[serde(default)]
    pub prior_opinion: Option<String>,
    /// The deadline of every exchange, in seconds (decimals allowed; default
    /// [`DEFAULT_TIMEOUT_S`], at most [`MAX_TIMEOUT_S`]).
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Journaled; not started yet.
    Queued,
    /// Planning or consulting.
    Running,
    /// Every selected advisor has a recorded consultation (or none was selected). A done
    /// job may still have no completed consultation: see [`Job::none_completed`].
    Done,
    /// Cancelled by `DELETE`: exchanges in flight were stopped and recorded as
    /// `cancelled` failures; advisors never started are not recorded.
    Cancelled,
    /// It could not go on (the assessment vanished, the state directory is unwritable,
    /// the disk is full...); [`Job::reason`] says why.
    Failed,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Done,
        JobState::Cancelled,
        JobState::Failed,
    ];

    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Cancelled => "cancelled",
            JobState::Failed => "failed",
        }
    }

    /// Whether the job has ended (done, cancelled or failed).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Cancelled | JobState::Failed
        )
    }
}

/// Where one selected advisor's exchange stands within a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeStatus {
    /// Not started (waiting for its turn under `max_concurrent`, or for the job to run).
    Pending,
    /// Asked; its outcome is not recorded yet (it may have answered and be waiting for an
    /// earlier advisor of the plan to be recorded first).
    Running,
    /// Recorded as a completed consultation.
    Completed,
    /// Recorded as a failed consultation ([`JobConsultation::failure`] says why).
    Failed,
}

impl From<ConsultationStatus> for ExchangeStatus {
    fn from(status: ConsultationStatus) -> Self {
        match status {
            ConsultationStatus::Completed => ExchangeStatus::Completed,
            ConsultationStatus::Failed => ExchangeStatus::Failed,
        }
    }
}

/// One selected advisor of a job's plan, in plan order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobConsultation {
    /// The advisor id.
    pub advisor: String,
    /// The consultation record's id, once recorded.
    pub record: Option<String>,
    /// Where the exchange stands.
    pub status: ExchangeStatus,
    /// The failure kind, when recorded as failed.
    pub failure: Option<FailureKind>,
}

/// A consultation job (SPEC §12): the reply to `POST`, `GET` and `DELETE` of a job, and
/// the last event of its stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The job id (a ULID).
    pub id: String,
    /// Where it is in its life.
    pub state: JobState,
    /// The root it concerns (absolute).
    pub root: String,
    /// The task it records into.
    pub task: String,
    /// The assessment consulted on.
    pub assessment: String,
    /// The plan record's id, once recorded.
    pub plan: Option<String>,
    /// One entry per selected advisor, in plan order (empty before the plan, or when the
    /// plan selected nobody).
    pub consultations: Vec<JobConsultation>,
    /// The disagreement record's id, when a completed consultation diverged.
    pub disagreement: Option<String>,
    /// When the job was accepted, RFC 3339 UTC.
    pub created_at: String,
    /// When it ended, RFC 3339 UTC.
    pub finished_at: Option<String>,
    /// Why it failed or was cancelled, in one sentence (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
impl Job {
    /// A job with placeholder fields in `state`, for unit tests.
    pub(crate) fn sample(id: &str, state: JobState) -> Job {
        Job {
            id: id.into(),
            state,
            root: "/r".into(),
            task: "t".into(),
            assessment: "A".into(),
            plan: None,
            consultations: vec![],
            disagreement: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            finished_at: None,
            reason: None,
        }
    }
}

impl Job {
    /// Whether the plan selected someone and no consultation completed: the client then
    /// exits 1 (SPEC §10), though the job itself is `done`.
    pub fn none_completed(&self) -> bool {
        !self.consultations.is_empty()
            && !self
                .consultations
                .iter()
                .any(|c| c.status == ExchangeStatus::Completed)
    }
}

/// The reply of `GET /api/v1/consultations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobList {
    /// The jobs kept (unfinished ones and recently finished ones), oldest first.
    pub jobs: Vec<Job>,
}

/// One line of a job's event stream (`GET /api/v1/consultations/{id}/events`), tagged by
/// `event`. Every event names its `job`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The plan is recorded (or was found recorded, when a job resumes).
    Plan {
        /// The job id.
        job: String,
        /// The stored plan record (selected advisors in order, left out, local review).
        record: Box<Record>,
    },
    /// An exchange with an advisor began (after waiting for its `max_concurrent` turn).
    Started {
        /// The job id.
        job: String,
        /// The advisor asked.
        advisor: String,
        /// When, RFC 3339 UTC (so a client that joins late can show the elapsed time).
        at: String,
    },
    /// An exchange ended, in the order answers arrive; the outcome is recorded later, in
    /// plan order ([`Event::Recorded`]).
    Finished {
        /// The job id.
        job: String,
        /// The advisor that answered or failed.
        advisor: String,
        /// Completed (an answer with a conclusion) or failed.
        status: ConsultationStatus,
        /// The failure kind, when failed.
        failure: Option<FailureKind>,
        /// The diagnostic, when failed.
        diagnostic: Option<String>,
        /// How long the exchange took.
        duration_ms: u64,
    },
    /// A consultation record was stored (in plan order).
    Recorded {
        /// The job id.
        job: String,
        /// The advisor it records.
        advisor: String,
        /// The stored consultation record.
        record: Box<Record>,
    },
    /// A completed consultation diverged and the disagreement was recorded.
    Disagreement {
        /// The job id.
        job: String,
        /// The stored disagreement record.
        record: Box<Record>,
    },
    /// The job ended; always the last event of a stream.
    Done {
        /// The job id.
        job: String,
        /// The job as it ended (its `state` says done, cancelled or failed).
        result: Box<Job>,
    },
}

impl Event {
    /// The id of the job this event belongs to.
    pub fn job_id(&self) -> &str {
        match self {
            Event::Plan { job, .. }
            | Event::Started { job, .. }
            | Event::Finished { job, .. }
            | Event::Recorded { job, .. }
            | Event::Disagreement { job, .. }
            | Event::Done { job, .. } => job,
        }
    }

    /// Whether this is the last event of its job.
    pub fn is_done(&self) -> bool {
        matches!(self, Event::Done { .. })
    }
}

/// The reply of `GET /api/v1/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// The daemon's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// How many jobs are kept in each state (every state listed, 0 included).
    pub jobs: BTreeMap<JobState, usize>,
}

/// The body of every error reply: `{"error": CODE, "message": ...}`, plus `reason` for a
/// writer refusal (`error` is then `refused` and `reason` the refusal's code of SPEC §4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A snake_case code (see [`codes`]).
    pub error: String,
    /// One sentence: what was wrong and what to do.
    pub message: String,
    /// The writer's reason code, for `refused` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The error codes the daemon itself answers with; a service error keeps its own code.
pub mod codes {
    /// 400: the body is not JSON, or not the JSON the route takes.
    pub const INVALID_JSON: &str = "invalid_json";
    /// 400: a query parameter or field is missing or malformed.
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// 400: the root is relative, does not exist or is not a directory.
    pub const INVALID_ROOT: &str = "invalid_root";
    /// 400: the task name is not accepted.
    pub const INVALID_TASK: &str = "invalid_task";
    /// 404: no route has this path.
    pub const NOT_FOUND: &str = "not_found";
    /// 404: no job has this id (never existed, or pruned).
    pub const UNKNOWN_JOB: &str = "unknown_job";
    /// 405: the route exists with another method.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// 409: the job has already ended, so it cannot be cancelled.
    pub const JOB_FINISHED: &str = "job_finished";
    /// 413: the body is over [`super::MAX_BODY_BYTES`].
    pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
    /// 422: the writer refused the record; `reason` holds its code.
    pub const REFUSED: &str = "refused";
    /// 503: the daemon is shutting down and accepts no new job.
    pub const SHUTTING_DOWN: &str = "shutting_down";
    /// 500: the daemon failed (its journal or a state directory could not be written).
    pub const INTERNAL: &str = "internal";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(method: &str, path: &str, expected: Result<Route, RouteError>) {
        assert_eq!(Route::parse(method, path), expected, "{method} {path}");
        if let Ok(route) = expected {
            assert_eq!(route.method(), method);
            assert_eq!(
                Route::parse(route.method(), &route.path()),
                Ok(route.clone())
            );
        }
    }

    #[test]
    fn routes_parse_and_print_back() {
        use RouteError::*;
        let id = || "01J0000000000000000000000A".to_string();
        check("GET", "/api/v1/health", Ok(Route::Health));
        check("GET", "/api/v1/health/", Ok(Route::Health));
        check("GET", "/api/v1/reasoning", Ok(Route::Status));
        check("GET", "/api/v1/reasoning/advisors", Ok(Route::Advisors));
        check("POST", "/api/v1/reasoning/plan", Ok(Route::PlanPreview));
        check("POST", "/api/v1/reasoning/records", Ok(Route::Record));
        check("GET", "/api/v1/reasoning/explain", Ok(Route::Explain));
        check("GET", "/api/v1/reasoning/tree", Ok(Route::Tree));
        check("GET", "/api/v1/reasoning/check", Ok(Route::Check));
        check("POST", "/api/v1/consultations", Ok(Route::Consult));
        check("GET", "/api/v1/consultations", Ok(Route::Jobs));
        check(
            "GET",
            &format!("/api/v1/consultations/{}", id()),
            Ok(Route::Job(id())),
        );
        check(
            "DELETE",
            &format!("/api/v1/consultations/{}", id()),
            Ok(Route::Cancel(id())),
        );
        check(
            "GET",
            &format!("/api/v1/consultations/{}/events", id()),
            Ok(Route::JobEvents(id())),
        );
        check("POST", "/api/v1/health", Err(MethodNotAllowed("GET")));
        check(
            "GET",
            "/api/v1/reasoning/records",
            Err(MethodNotAllowed("POST")),
        );
        check(
            "PUT",
            "/api/v1/consultations",
            Err(MethodNotAllowed("GET, POST")),
        );
        check(
            "POST",
            "/api/v1/consultations/x",
            Err(MethodNotAllowed("GET, DELETE")),
        );
        check("GET", "/api/v1/nothing", Err(NotFound));
        check("GET", "/api/v2/health", Err(NotFound));
        check("GET", "/", Err(NotFound));
        check("GET", "/api/v1/consultations/x/events/more", Err(NotFound));
        check("GET", "/api/v1//", Err(NotFound));
    }

    #[test]
    fn none_completed_only_when_someone_was_selected() {
        let mut job = Job {
            id: "J".into(),
            state: JobState::Done,
            root: "/r".into(),
            task: "t".into(),
            assessment: "A".into(),
            plan: Some("P".into()),
            consultations: vec![],
            disagreement: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            finished_at: None,
            reason: None,
        };
        assert!(!job.none_completed());
        job.consultations.push(JobConsultation {
            advisor: "a".into(),
            record: Some("C".into()),
            status: ExchangeStatus::Failed,
            failure: Some(FailureKind::Timeout),
        });
        assert!(job.none_completed());
        job.consultations[0].status = ExchangeStatus::Completed;
        assert!(!job.none_completed());
    }

    #[test]
    fn job_and_events_have_the_fixed_json_shape() {
        let job = Job {
            id: "J".into(),
            state: JobState::Running,
            root: "/r".into(),
            task: "t".into(),
            assessment: "A".into(),
            plan: None,
            consultations: vec![JobConsultation {
                advisor: "a".into(),
                record: None,
                status: ExchangeStatus::Pending,
                failure: None,
            }],
            disagreement: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            finished_at: None,
            reason: None,
        };
        let value = serde_json::to_value(&job).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "id",
                "state",
                "root",
                "task",
                "assessment",
                "plan",
                "consultations",
                "disagreement",
                "created_at",
                "finished_at"
            ]
        );
        assert_eq!(value["state"], "running");
        assert_eq!(
            value["consultations"][0],
            serde_json::json!({"advisor": "a", "record": null, "status": "pending", "failure": null})
        );
        let done = Event::Done {
            job: "J".into(),
            result: Box::new(job),
        };
        let line = serde_json::to_value(&done).unwrap();
        assert_eq!(line["event"], "done");
        assert_eq!(line["job"], "J");
        assert_eq!(line["result"]["id"], "J");
        let started = Event::Started {
            job: "J".into(),
            advisor: "a".into(),
            at: "2026-01-01T00:00:00Z".into(),
        };
        assert_eq!(
            serde_json::to_value(&started).unwrap(),
            serde_json::json!({
                "event": "started", "job": "J", "advisor": "a", "at": "2026-01-01T00:00:00Z"
            })
        );
    }

    #[test]
    fn health_lists_states_by_name() {
        let health = Health {
            version: "0.1.0".into(),
            pid: 7,
            uptime_s: 3,
            jobs: JobState::ALL.into_iter().map(|s| (s, 0)).collect(),
        };
        let value = serde_json::to_value(&health).unwrap();
        assert_eq!(value["jobs"]["queued"], 0);
        assert_eq!(value["jobs"]["failed"], 0);
    }
}
