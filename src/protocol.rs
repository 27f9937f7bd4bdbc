//! The protocol of verbs: one request type and one response type per verb, each request
//! carrying its own arguments, shared by every surface (the CLI, the daemon's socket, the
//! coming MCP server and web page) and every transport.
//!
//! HTTP is one way to carry a verb: [`ROUTES`] is the one table from verbs to a method and
//! a path (the daemon's axum router is built from it: one route per row, 404 and 405
//! from axum), and [`Verb::call`] says where each argument goes on the wire (the path, the
//! query, or a JSON body). `docs/DAEMON.md` shows each route with `curl --unix-socket`.
//!
//! This module depends only on the core's record and view types: nothing of the command
//! line, the renderer, the service layer or the daemon.
//!
//! # How a request carries the asking process's context
//!
//! Every verb that concerns a root carries a [`RequestContext`]. On HTTP:
//!
//! - **POST routes** carry the whole request as the JSON body, the context as the field
//!   `context`.
//! - **GET routes** carry their own arguments in the query string (`id`, `depth`,
//!   `show_superseded`, `path`) and the context as the JSON body `{"context": {...}}`.
//!   Without a body (`curl` by hand), the query parameters `root` (required) and `task`
//!   (optional) name the root and task, and everything else comes from the daemon's own
//!   environment, exactly as for a job resumed after a restart.
//!
//! Credential values are held in memory for the request (and its job) only: the daemon
//! never journals, records or logs them.

mod context;
mod ids;
mod job;
pub mod openapi;
mod timeout;
pub mod token;
pub mod wire;

pub use context::{with_values, RequestContext, WithValues};
pub use ids::{JobId, RecordId, Timestamp};
pub use job::{Event, ExchangeStatus, Health, Job, JobConsultation, JobList, JobState, Listening};
pub use timeout::{is_out_of_range, Timeout, TimeoutError, TIMEOUT_FIELD};

use crate::core::records::{Confidence, Materiality, Record};
use crate::core::views::advisors::AdvisorsView;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a query value keeps as it is: RFC 3986's unreserved characters and `/` (paths
/// stay readable); everything else is percent-encoded.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `text` percent-encoded as a query value (the client's calls, the cockpit's URL).
pub fn query_value(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, QUERY_VALUE).to_string()
}

/// The prefix of every route.
pub const API_PREFIX: &str = "/api/v1";

/// The largest request body the daemon reads (1 MiB); a larger one is refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The content type of a job's event stream: one JSON [`Event`] per line.
pub const NDJSON: &str = "application/x-ndjson";

/// The content type of server-sent events (a job's events, or a root's feed, when the
/// request's `Accept` names it).
pub const EVENT_STREAM: &str = "text/event-stream";

// ---------------------------------------------------------------------------------------
// The verbs
// ---------------------------------------------------------------------------------------

/// A page the daemon serves beside the verbs (always `GET`): not a verb, so no request
/// type, no façade method and no client call; the key of [`PAGES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageName {
    /// The OpenAPI 3.1 document of every route and page.
    OpenApi,
    /// The cockpit page (on TCP behind the token).
    Cockpit,
    /// One of the cockpit page's embedded files, by name (`{id}`).
    CockpitFile,
}

/// One page: its path (`{id}` a file's name), served with `GET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRoute {
    /// The page.
    pub page: PageName,
    /// The path.
    pub path: &'static str,
}

/// Every page the daemon serves.
pub const PAGES: &[PageRoute] = &[
    PageRoute {
        page: PageName::OpenApi,
        path: "/api/v1/openapi.json",
    },
    PageRoute {
        page: PageName::Cockpit,
        path: "/cockpit",
    },
    PageRoute {
        page: PageName::CockpitFile,
        path: "/cockpit/{id}",
    },
];

/// A request of one verb, as the table ([`verb_table`]) declares it: which verb, whether
/// it consults, and (from its route and its JSON Schema) how HTTP carries it. Its JSON
/// Schema (`schemars::schema_for!`) names its arguments.
pub trait Verb: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// Which verb this is.
    const NAME: VerbName;
    /// Whether it consults, and so is the one kind of request whose context carries
    /// credential values (see [`RequestContext`]).
    const CONSULTS: bool;
    /// One line on what it does (the OpenAPI operation's summary).
    const SUMMARY: &'static str;
    /// The request as an HTTP call: the route's method and path, the query, the body
    /// (see [`HttpCall::of`]).
    fn call(&self) -> HttpCall {
        HttpCall::of(self)
    }
}

/// A verb with one answer (every verb but the two event streams): the façade's
/// [`Request`] and [`Response`] carry it.
pub trait Call: Verb + Sized {
    /// What the verb answers.
    type Response: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// The HTTP status of its success.
    const OK: u16;
    /// Whether its reply can be paged with `offset` and `limit` ([`PageQuery`]).
    const PAGED: bool;
    /// The HTTP status of `response` (a cancellation still stopping is 202).
    fn status(response: &Self::Response) -> u16;
    /// Keep one slice of `response` (only for a [`Call::PAGED`] verb).
    fn page(response: &mut Self::Response, offset: usize, limit: usize);
    /// The request in the façade's one enum.
    fn into_request(self) -> Request;
    /// Its own response out of the façade's one enum (`None`: another verb's).
    fn from_response(response: Response) -> Option<Self::Response>;
}

/// Something that carries any verb with one answer (the client over the socket): what
/// [`Request::carry`] hands each typed request to.
pub trait Carrier: Sync {
    /// What a carried verb fails with.
    type Error;
    /// Carry `request`; its typed answer.
    fn carry<V: Call>(
        &self,
        request: V,
    ) -> impl std::future::Future<Output = Result<V::Response, Self::Error>> + Send;
}

/// Something made from a verb's types (a route's handler, an OpenAPI operation): what
/// [`visit`] hands each row of the table to.
pub trait Visit {
    /// What it makes.
    type Out;
    /// A verb with one answer.
    fn call<V: Call>(self) -> Self::Out;
    /// An event stream (a job's events, a root's feed).
    fn stream<V: Verb>(self) -> Self::Out;
}

/// `health`: the daemon's version, pid, uptime and jobs by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthRequest {}

/// `advisors`: every advisor of the context's catalogue, its status and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvisorsRequest {
    /// The asking process's context.
    pub context: RequestContext,
}

/// `catalogue`: the effective catalogue of the context (its files layered), ready to copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogueRequest {
    /// The asking process's context.
    pub context: RequestContext,
}

/// `plan`: a plan preview (not recorded) for a materiality, confidence and capabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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

/// `record`: one record for the writer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordRequest {
    /// The asking process's context (its task is the task written to).
    pub context: RequestContext,
    /// One JSON object: `kind` plus the caller's fields.
    pub record: serde_json::Value,
    /// Judge the record with the writer and write nothing: the answer is the record as it
    /// would be stored, or the refusal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `status`: the task's derived status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {
    /// The asking process's context.
    pub context: RequestContext,
}

/// `spend`: spend per advisor, task and day across the state directory, and budgets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpendRequest {
    /// The asking process's context (its task is the per-task budgets' window).
    pub context: RequestContext,
}

/// `explain`: the provenance chain of one record of the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainRequest {
    /// The asking process's context.
    pub context: RequestContext,
    /// The record explained.
    pub id: RecordId,
    /// Also list what rests on it (`downstream`, `if_superseded`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub downstream: bool,
}

/// `tree`: the task's records as a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TreeRequest {
    /// The asking process's context.
    pub context: RequestContext,
    /// How deep the tree goes (default: all the way).
    #[serde(default)]
    pub depth: Option<usize>,
    /// Whether superseded conclusions are shown.
    #[serde(default)]
    pub show_superseded: bool,
}

/// `check`: provider-independence and CI-credential findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// The asking process's context.
    pub context: RequestContext,
    /// The directory or file checked, absolute or under the root (default: the root).
    #[serde(default)]
    pub path: Option<PathBuf>,
}

/// `verify`: walk the hash chain of the context's task, or of every task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// The asking process's context.
    pub context: RequestContext,
    /// Every task of the state directory instead of the context's one.
    #[serde(default)]
    pub all: bool,
}

/// `consult`: queue a consultation job for an assessment; answered once it is journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsultRequest {
    /// The asking process's context; its `PATH` and credential values are what the job's
    /// availability and process advisors see. The only request whose context carries
    /// credential values.
    #[serde(
        serialize_with = "with_values::serialize",
        deserialize_with = "with_values::deserialize"
    )]
    pub context: RequestContext,
    /// The assessment to consult on (a record of the context's task).
    pub assessment: RecordId,
    /// An extra question for the advisors, appended to the built one.
    #[serde(default)]
    pub question: Option<String>,
    /// An opinion from earlier (marked as an opinion in the question, not a fact).
    #[serde(default)]
    pub prior_opinion: Option<String>,
    /// By when every exchange of the job must have ended (default [`Timeout::DEFAULT`]).
    #[serde(default, rename = "timeout_s", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
}

/// `jobs`: the jobs kept (unfinished and recently finished), oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobsRequest {
    /// Only the jobs of this root (as written when queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Only the jobs of this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Only the jobs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
}

/// `job`: one job as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobRequest {
    /// The job.
    pub id: JobId,
}

/// `events`: a job's events from position `from` on (0: all of them, replayed), then live
/// ones, ending after [`Event::Done`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EventsRequest {
    /// The job.
    pub id: JobId,
    /// How many events to skip (those already seen).
    #[serde(default)]
    pub from: usize,
}

/// `cancel`: stop a job; exchanges in flight are recorded as `cancelled` failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CancelRequest {
    /// The job.
    pub id: JobId,
}

/// `wait`: wait for a job to end, at most `bound` (no bound: as long as it takes). Carried
/// by the events stream on HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WaitRequest {
    /// The job.
    pub id: JobId,
    /// How long to wait at most.
    #[serde(default)]
    pub bound: Option<Timeout>,
}

/// `tasks`: the tasks of the context's state directory (what the cockpit lists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TasksRequest {
    /// The asking process's context (its state directory is listed).
    pub context: RequestContext,
}

/// The reply of `GET /api/v1/reasoning/tasks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskList {
    /// The tasks, by name.
    pub tasks: Vec<String>,
}

/// `GET /api/v1/events?root=&task=`: follow a root (and one task, or all) as server-sent
/// events. `Last-Event-ID` resumes after a reconnect. Other query parameters (the
/// cockpit's `catalogue`, `state_dir`) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FeedRequest {
    /// The project root (absolute).
    pub root: String,
    /// Only this task (default: every task of the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// The paging of a long list (`offset` and `limit` query parameters of `status` and
/// `tree`): which slice of the assessments (and of the timeline) a reply holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PageQuery {
    /// Skip this many (paging).
    #[serde(default)]
    pub offset: Option<usize>,
    /// At most this many (paging); the reply's `page` says which slice it holds.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// What a wait ended with.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    /// The job ended; it is here as it ended.
    Ended(Box<Job>),
    /// The bound ran out first; the job as it stands.
    TimedOut(Box<Job>),
}

/// The context as a GET route's body.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    /// The asking process's context.
    pub context: RequestContext,
}

/// The query parameters that name the context of a request sent without one (`curl` by
/// hand, the cockpit): the rest of the context comes from the daemon's own environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContextQuery {
    /// The project root (absolute), when no `{"context": {...}}` body is sent; the rest of
    /// the context then comes from the daemon's own environment.
    #[serde(default)]
    pub root: Option<String>,
    /// The task (default: the root's current one).
    #[serde(default)]
    pub task: Option<String>,
    /// The catalogue file (over TCP only one the user's own processes named on the
    /// socket, the daemon's own, or a trusted one).
    #[serde(default)]
    pub catalogue: Option<PathBuf>,
    /// The state directory (over TCP only the root's own, or one the user's own
    /// processes named on the socket).
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

/// The query parameters of a call, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `k=v&...`, each value percent-encoded ([`query_value`]).
    pub fn encode(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={}", query_value(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

impl PartialEq<Vec<(&str, String)>> for Query {
    fn eq(&self, other: &Vec<(&str, String)>) -> bool {
        self.0.len() == other.len()
            && self
                .0
                .iter()
                .zip(other)
                .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
    }
}

/// One verb as an HTTP request: method and path from [`ROUTES`], the query, the body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    /// The verb (its route's method and path pattern are in [`ROUTES`]).
    pub verb: VerbName,
    /// The id filling the path's `{id}`, for the routes that have one.
    pub id: Option<JobId>,
    /// The query parameters, in order.
    pub query: Query,
    /// The JSON body, if any.
    pub body: Option<serde_json::Value>,
}

impl HttpCall {
    /// `request` as its route carries it, one rule for every verb: the field `id` fills a
    /// path's `{id}`; a `POST` sends the rest as its JSON body; any other method sends
    /// `context` as the body `{"context": ...}` and every other field that is set as a
    /// query parameter. The request's own `Serialize` decides what its context carries:
    /// credential values only for a consultation ([`RequestContext`]).
    pub fn of<V: Verb>(request: &V) -> HttpCall {
        let route = route_of(V::NAME);
        // Every request type is plain data with string keys: it always encodes.
        let mut fields = match serde_json::to_value(request) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => serde_json::Map::new(),
        };
        let id = if route.path.contains("{id}") {
            match fields.remove("id") {
                Some(serde_json::Value::String(id)) => Some(JobId::from(id.as_str())),
                _ => None,
            }
        } else {
            None
        };
        let mut call = HttpCall {
            verb: V::NAME,
            id,
            query: Query::default(),
            body: None,
        };
        if route.method == "POST" {
            call.body = Some(serde_json::Value::Object(fields));
            return call;
        }
        if let Some(context) = fields.remove("context") {
            call.body = Some(serde_json::json!({ "context": context }));
        }
        for (name, value) in fields {
            let text = match value {
                serde_json::Value::Null => continue,
                serde_json::Value::String(text) => text,
                other => other.to_string(),
            };
            call.query.0.push((name, text));
        }
        call
    }

    /// The route's method.
    pub fn method(&self) -> &'static str {
        route_of(self.verb).method
    }

    /// The path, its `{id}` filled in (no query string).
    pub fn path(&self) -> String {
        let pattern = route_of(self.verb).path;
        match &self.id {
            Some(id) => pattern.replace("{id}", id.as_str()),
            None => pattern.to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The routes
// ---------------------------------------------------------------------------------------

/// One route of the HTTP API: a verb carried by a method and a path (`{id}` a job id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The verb it carries.
    pub verb: VerbName,
    /// The HTTP method.
    pub method: &'static str,
    /// The path, `{id}` standing for a job id.
    pub path: &'static str,
}

/// The one table of verbs: each row declares a verb once: its name, its route (method and
/// path, `{id}` filled from the request's `id`), its request type, and, for a verb with
/// one answer, its response type, the façade's method, its success status, whether it
/// consults (and so may carry credential values), whether its reply pages; then its
/// summary. A row without a response is an event stream. `verb_table!(m args)` hands the
/// table to the macro `m` (after `args`): [`VerbName`], [`ROUTES`], [`Verb`], [`Call`],
/// [`Request`], [`Response`] and [`visit`] are made from it here, the façade's typed
/// methods and its in-process dispatch in `crate::facade`.
macro_rules! verb_table {
    ($callback:ident $($args:tt)*) => {
        $callback! {
            $($args)*
            /// [`HealthRequest`] → [`Health`].
            Health = "GET" "/api/v1/health", $crate::protocol::HealthRequest
                => $crate::protocol::Health,
                fn health, ok: 200, consults: false, paged: false,
                summary: "The daemon's version, pid, uptime, jobs by state, mesh and TCP listener.";
            /// [`AdvisorsRequest`] → [`AdvisorsView`].
            Advisors = "GET" "/api/v1/reasoning/advisors", $crate::protocol::AdvisorsRequest
                => $crate::core::views::advisors::AdvisorsView,
                fn advisors, ok: 200, consults: false, paged: false,
                summary: "Every advisor of the context's catalogue, its status and why; capacity per capability.";
            /// [`PlanRequest`] → [`Plan`] (a preview, not recorded).
            Plan = "POST" "/api/v1/reasoning/plan", $crate::protocol::PlanRequest
                => $crate::core::records::Plan,
                fn plan, ok: 200, consults: false, paged: false,
                summary: "A plan preview for a materiality, confidence and capabilities (not recorded).";
            /// [`RecordRequest`] → the stored [`Record`].
            Record = "POST" "/api/v1/reasoning/records", $crate::protocol::RecordRequest
                => $crate::core::records::Record,
                fn record, ok: 201, consults: false, paged: false,
                summary: "The one writer: store a record (`kind` plus the caller's fields).";
            /// [`StatusRequest`] → [`StatusView`].
            Status = "GET" "/api/v1/reasoning", $crate::protocol::StatusRequest
                => $crate::core::views::status::StatusView,
                fn status, ok: 200, consults: false, paged: true,
                summary: "The task's derived status: each assessment and where it stands, a timeline, tokens and spend.";
            /// [`SpendRequest`] → [`SpendView`].
            Spend = "GET" "/api/v1/reasoning/spend", $crate::protocol::SpendRequest
                => $crate::core::cost::SpendView,
                fn spend, ok: 200, consults: false, paged: false,
                summary: "Spend per advisor, task and day, and every budget's state.";
            /// [`ExplainRequest`] → [`ExplainView`].
            Explain = "GET" "/api/v1/reasoning/explain", $crate::protocol::ExplainRequest
                => $crate::core::views::explain::ExplainView,
                fn explain, ok: 200, consults: false, paged: false,
                summary: "The provenance chain of one record.";
            /// [`TreeRequest`] → [`TreeView`].
            Tree = "GET" "/api/v1/reasoning/tree", $crate::protocol::TreeRequest
                => $crate::core::views::tree::TreeView,
                fn tree, ok: 200, consults: false, paged: true,
                summary: "The task's records as a tree (assessment → plan → consultations → ...).";
            /// [`CheckRequest`] → [`CheckReport`].
            Check = "GET" "/api/v1/reasoning/check", $crate::protocol::CheckRequest
                => $crate::check::CheckReport,
                fn check, ok: 200, consults: false, paged: false,
                summary: "Provider-independence and CI-credential findings.";
            /// [`VerifyRequest`] → [`VerifyReport`].
            Verify = "GET" "/api/v1/reasoning/verify", $crate::protocol::VerifyRequest
                => $crate::core::chain::VerifyReport,
                fn verify, ok: 200, consults: false, paged: false,
                summary: "Walk the task's hash chain (or every task's).";
            /// [`JobsRequest`] → [`JobList`].
            Jobs = "GET" "/api/v1/consultations", $crate::protocol::JobsRequest
                => $crate::protocol::JobList,
                fn jobs, ok: 200, consults: false, paged: false,
                summary: "The jobs kept (unfinished and recently finished), oldest first.";
            /// [`ConsultRequest`] → the queued [`Job`].
            Consult = "POST" "/api/v1/consultations", $crate::protocol::ConsultRequest
                => $crate::protocol::Job,
                fn consult, ok: 202, consults: true, paged: false,
                summary: "Queue a consultation job for an assessment; answered once it is journaled.";
            /// [`JobRequest`] → one [`Job`].
            Job = "GET" "/api/v1/consultations/{id}", $crate::protocol::JobRequest
                => $crate::protocol::Job,
                fn job, ok: 200, consults: false, paged: false,
                summary: "One job as it stands.";
            /// [`CancelRequest`] → the [`Job`] once it ended (202 while still stopping).
            Cancel = "DELETE" "/api/v1/consultations/{id}", $crate::protocol::CancelRequest
                => $crate::protocol::Job,
                fn cancel, ok: 200 stopping 202, consults: false, paged: false,
                summary: "Cancel a job: 200 once it ended, 202 while it is still stopping.";
            /// [`EventsRequest`] → the job's [`Event`]s, past then live, until `done`.
            Events = "GET" "/api/v1/consultations/{id}/events", $crate::protocol::EventsRequest,
                summary: "A job's events, past then live, ending after `done`: NDJSON, or \
                          server-sent events when `Accept` names `text/event-stream`.";
            /// [`ReviewsRequest`] → the [`ReviewList`] waiting in this daemon's mesh inbox.
            Reviews = "GET" "/api/v1/reviews", $crate::protocol::ReviewsRequest
                => $crate::protocol::ReviewList,
                fn reviews, ok: 200, consults: false, paged: false,
                summary: "The reviews waiting in this daemon's mesh inbox.";
            /// [`TasksRequest`] → the [`TaskList`] of the context's state directory.
            Tasks = "GET" "/api/v1/reasoning/tasks", $crate::protocol::TasksRequest
                => $crate::protocol::TaskList,
                fn tasks, ok: 200, consults: false, paged: false,
                summary: "The tasks of the context's state directory.";
            /// [`FeedRequest`] → server-sent events of a root (and task): job events,
            /// records written, advisors' status. Served by the daemon only (no façade
            /// verb).
            Feed = "GET" "/api/v1/events", $crate::protocol::FeedRequest,
                summary: "Follow a root (and one task, or all) as server-sent events: job \
                          events, records written, advisors' status changes.";
            /// [`ReviewAnswerRequest`] → the [`ReviewAnswered`], sent to the asker.
            ReviewAnswer = "POST" "/api/v1/reviews/{id}/answer", $crate::protocol::ReviewAnswerRequest
                => $crate::protocol::ReviewAnswered,
                fn answer_review, ok: 200, consults: false, paged: false,
                summary: "Answer a waiting review; the answer goes to the daemon that asked.";
        }
    };
}
pub(crate) use verb_table;

/// What the table makes in this module.
macro_rules! verbs {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $http:literal $path:literal, $request:ty
            $(=> $response:ty, fn $method:ident, ok: $ok:literal $(stopping $stopping:literal)?,
                consults: $consults:literal, paged: $paged:tt)?,
            summary: $summary:literal;
    )*) => {
        /// Every verb, by name: the key of [`ROUTES`]. Pages (the cockpit, its files, the
        /// OpenAPI document) are not verbs: they are [`PAGES`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum VerbName {
            $($(#[doc = $doc])* $name,)*
        }

        /// Every route, the one table from verbs to HTTP.
        pub const ROUTES: &[Route] = &[
            $(Route { verb: VerbName::$name, method: $http, path: $path },)*
        ];

        /// A request of any verb with one answer: what `crate::facade::Api::call` takes.
        #[derive(Debug, Clone)]
        #[allow(clippy::large_enum_variant)]
        pub enum Request {
            $($(
                #[doc = concat!("`", stringify!($method), "`: ", $summary)]
                $name($request),
            )?)*
        }

        /// The answer of any verb with one answer: what `crate::facade::Api::call` gives.
        #[derive(Debug, Clone)]
        #[allow(clippy::large_enum_variant)]
        pub enum Response {
            $($(
                #[doc = concat!("What `", stringify!($method), "` answers.")]
                $name($response),
            )?)*
        }

        impl Request {
            /// Which verb it is.
            pub fn verb(&self) -> VerbName {
                match self {
                    $($(Request::$name(_) => verbs!(@name $name $method),)?)*
                }
            }

            /// Hand the typed request to `carrier`; its answer as a [`Response`].
            pub async fn carry<C: Carrier>(self, carrier: &C) -> Result<Response, C::Error> {
                match self {
                    $($(Request::$name(r) => carrier
                        .carry(r)
                        .await
                        .map(|r: $response| Response::$name(r)),)?)*
                }
            }
        }

        /// What `visitor` makes of `verb`'s types.
        pub fn visit<T: Visit>(verb: VerbName, visitor: T) -> T::Out {
            match verb {
                $(VerbName::$name => verbs!(@visit visitor $request $(, $response)?),)*
            }
        }

        $(
            impl Verb for $request {
                const NAME: VerbName = VerbName::$name;
                const CONSULTS: bool = verbs!(@consults $($consults)?);
                const SUMMARY: &'static str = $summary;
            }

            $(
                impl Call for $request {
                    type Response = $response;
                    const OK: u16 = $ok;
                    const PAGED: bool = $paged;
                    fn status(_response: &$response) -> u16 {
                        $(if !_response.state.is_finished() {
                            return $stopping;
                        })?
                        $ok
                    }
                    verbs!(@page $paged $response);
                    fn into_request(self) -> Request {
                        Request::$name(self)
                    }
                    fn from_response(response: Response) -> Option<$response> {
                        match response {
                            Response::$name(r) => Some(r),
                            #[allow(unreachable_patterns)]
                            _ => None,
                        }
                    }
                }
            )?
        )*
    };
    (@name $name:ident $method:ident) => {
        VerbName::$name
    };
    (@visit $visitor:ident $request:ty, $response:ty) => {
        $visitor.call::<$request>()
    };
    (@visit $visitor:ident $request:ty) => {
        $visitor.stream::<$request>()
    };
    (@consults $consults:literal) => {
        $consults
    };
    (@consults) => {
        false
    };
    (@page true $response:ty) => {
        fn page(response: &mut $response, offset: usize, limit: usize) {
            response.page(offset, limit);
        }
    };
    (@page false $response:ty) => {
        fn page(_response: &mut $response, _offset: usize, _limit: usize) {}
    };
}

verb_table!(verbs);

/// The route of `verb`.
pub fn route_of(verb: VerbName) -> &'static Route {
    ROUTES
        .iter()
        .find(|r| r.verb == verb)
        .expect("every verb has a route in ROUTES")
}

/// The body of every error reply: `{"error": CODE, "message": ...}`, plus `reason` for a
/// writer refusal (`error` is then `refused` and `reason` the refusal's reason code).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// 403: over the TCP listener, a `Host` or `Origin` that is not the listener's own, or
    /// a request naming what a token holder may not choose (a body `context`, a catalogue
    /// or a state directory the daemon was not given by the user).
    pub const FORBIDDEN: &str = "forbidden";
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
    /// 409: the daemon keeps no review inbox (it is not offering reviews with `inbox`).
    pub const NO_INBOX: &str = "no_inbox";
    /// 404: no review with this id is waiting (answered, cancelled, or its asker stopped
    /// waiting).
    pub const UNKNOWN_REVIEW: &str = "unknown_review";
    /// 400: the answer has no conclusion that can be read.
    pub const INVALID_ANSWER: &str = "invalid_answer";
    /// 503: the mesh is not connected, so the answer cannot be sent now.
    pub const MESH_DOWN: &str = "mesh_down";
    /// 400: the request or the command line is wrong (a flag, a variable, a path).
    pub const USAGE: &str = "usage";
    /// 400: the catalogue could not be read or is not valid.
    pub const INVALID_CATALOGUE: &str = "invalid_catalogue";
    /// 500: the state directory could not be read or written.
    pub const STORE_FAILED: &str = "store_failed";
    /// The client's own (exit 4): no daemon answers on the socket and none could be started.
    pub const UNREACHABLE: &str = "unreachable";
    /// The client's own (exit 4): the socket or the process serving it is not the user's.
    pub const NOT_OURS: &str = "not_ours";
    /// The client's own (exit 1): the daemon's reply could not be read.
    pub const PROTOCOL: &str = "protocol";
    /// The client's own (exit 130): Ctrl-C stopped the verb.
    pub const INTERRUPTED: &str = "interrupted";
    /// The client's own (exit 5): `wait --timeout` ran out; the job goes on.
    pub const WAIT_TIMED_OUT: &str = "wait_timed_out";
}

/// `reviews`: the reviews waiting in this daemon's mesh inbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewsRequest {}

/// `reviews answer ID --file F`: answer a waiting review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewAnswerRequest {
    /// The review (as `reviews` lists it).
    pub id: String,
    /// The answer text (a JSON object with `conclusion` and `stance`, or prose).
    pub answer: String,
}

/// One review waiting in a mesh inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReviewItem {
    /// The review's id (what `reviews answer` names).
    pub id: String,
    /// The runtime id of the daemon asking.
    pub asker: String,
    /// The question.
    pub question: String,
    /// The capabilities asked for.
    pub capabilities: Vec<String>,
    /// When it arrived (RFC 3339 UTC).
    pub received_at: String,
    /// When the asker stops waiting (RFC 3339 UTC).
    pub deadline_at: String,
}

/// `GET /api/v1/reviews`: the reviews waiting, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReviewList {
    /// The reviews.
    pub reviews: Vec<ReviewItem>,
}

/// `POST /api/v1/reviews/{id}/answer`: the answer, as an advisor would give it (the JSON
/// object the question asks for, or prose).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewAnswer {
    /// The answer text.
    pub answer: String,
}

/// The reply to a review answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReviewAnswered {
    /// The review answered.
    pub id: String,
    /// The runtime id the answer was sent to.
    pub asker: String,
    /// The conclusion as it was read and sent.
    pub conclusion: String,
    /// The stance as it was read and sent.
    pub stance: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::records::FailureKind;

    #[test]
    fn every_verb_has_one_route_and_its_calls_print_back() {
        use VerbName as V;
        for verb in [
            V::Health,
            V::Advisors,
            V::Plan,
            V::Record,
            V::Status,
            V::Explain,
            V::Tree,
            V::Check,
            V::Verify,
            V::Consult,
            V::Jobs,
            V::Job,
            V::Events,
            V::Cancel,
        ] {
            assert_eq!(
                ROUTES.iter().filter(|r| r.verb == verb).count(),
                1,
                "{verb:?}"
            );
        }
        let call = JobRequest { id: "J1".into() }.call();
        assert_eq!(
            (call.method(), call.path().as_str()),
            ("GET", "/api/v1/consultations/J1")
        );
        let call = EventsRequest {
            id: "J1".into(),
            from: 3,
        }
        .call();
        assert_eq!(call.path(), "/api/v1/consultations/J1/events");
        assert_eq!(call.query, vec![("from", "3".to_string())]);
        let context: RequestContext =
            serde_json::from_value(serde_json::json!({"root": "/r"})).unwrap();
        let call = ExplainRequest {
            context,
            id: "R1".into(),
            downstream: false,
        }
        .call();
        assert_eq!(call.query, vec![("id", "R1".to_string())]);
        assert_eq!(call.body.unwrap()["context"]["root"], "/r");
    }

    #[test]
    fn only_the_consultation_consults_and_only_its_call_carries_values() {
        const SECRET: &str = "v4lue-never-sent";
        let mut context: RequestContext =
            serde_json::from_value(serde_json::json!({"root": "/r"})).unwrap();
        context.credentials.insert("K".into(), SECRET.into());
        fn sent<V: Verb>(request: &V) -> (bool, bool) {
            let call = request.call();
            let body = call.body.map(|b| b.to_string()).unwrap_or_default();
            (V::CONSULTS, body.contains(SECRET))
        }
        let c = || context.clone();
        for (consults, carries) in [
            sent(&AdvisorsRequest { context: c() }),
            sent(&StatusRequest { context: c() }),
            sent(&SpendRequest { context: c() }),
            sent(&TasksRequest { context: c() }),
            sent(&VerifyRequest {
                context: c(),
                all: true,
            }),
            sent(&CheckRequest {
                context: c(),
                path: None,
            }),
            sent(&ExplainRequest {
                context: c(),
                id: "R".into(),
                downstream: false,
            }),
            sent(&TreeRequest {
                context: c(),
                depth: None,
                show_superseded: false,
            }),
            sent(&RecordRequest {
                context: c(),
                record: serde_json::json!({}),
                dry_run: false,
            }),
            sent(&PlanRequest {
                context: c(),
                materiality: Materiality::High,
                confidence: Confidence::default(),
                capabilities: vec![],
            }),
        ] {
            assert_eq!((consults, carries), (false, false));
        }
        let consult = ConsultRequest {
            context: c(),
            assessment: "A".into(),
            question: None,
            prior_opinion: None,
            timeout: None,
        };
        assert_eq!(sent(&consult), (true, true));
    }

    #[test]
    fn every_request_has_a_json_schema_naming_its_arguments() {
        fn properties<V: Verb>() -> Vec<String> {
            let schema = serde_json::to_value(schemars::schema_for!(V)).unwrap();
            schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        }
        assert_eq!(
            properties::<ExplainRequest>(),
            ["context", "id", "downstream"]
        );
        assert_eq!(
            properties::<ConsultRequest>(),
            [
                "context",
                "assessment",
                "question",
                "prior_opinion",
                "timeout_s"
            ]
        );
        assert_eq!(properties::<CancelRequest>(), ["id"]);
        let schema = serde_json::to_value(schemars::schema_for!(ConsultRequest)).unwrap();
        let timeout = &schema["definitions"]["Timeout"];
        assert_eq!(timeout["maximum"], 86_400.0, "{schema}");
        assert_eq!(timeout["exclusiveMinimum"], 0.0, "{schema}");
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
            created_at: Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            finished_at: None,
            reason: None,
            timeout_s: None,
        };
        assert!(!job.none_completed());
        job.consultations.push(JobConsultation {
            advisor: "a".into(),
            record: Some("C".into()),
            status: ExchangeStatus::Failed,
            failure: Some(FailureKind::Timeout),
            cost: None,
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
                cost: None,
            }],
            disagreement: None,
            created_at: Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
            finished_at: None,
            reason: None,
            timeout_s: None,
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
            at: crate::protocol::Timestamp::now(),
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
            at: Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
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
            mesh: None,
            listening: None,
        };
        let value = serde_json::to_value(&health).unwrap();
        assert_eq!(value["jobs"]["queued"], 0);
        assert_eq!(value["jobs"]["failed"], 0);
    }
}
