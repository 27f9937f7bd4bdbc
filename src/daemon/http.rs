//! The socket's HTTP mapping: every request is parsed into a verb by the one route table
//! (`crate::protocol::ROUTES`), its arguments read from the path, the query and the body
//! (under the 1 MiB bound), and answered by the façade's daemon-side implementation
//! ([`Served`]) in one exhaustive match of a few lines per verb. Errors become
//! `{"error": CODE, "message": ...}` with their HTTP status.

use crate::daemon::served::Served;
use crate::error::Error;
use crate::facade::Api;
use crate::protocol::{
    codes, is_out_of_range, AdvisorsRequest, CancelRequest, CheckRequest, ConsultRequest,
    ContextBody, EventsRequest, ExplainRequest, HealthRequest, JobId, JobRequest, JobsRequest,
    PlanRequest, RecordId, RecordRequest, RequestContext, SpendRequest, StatusRequest, TreeRequest,
    VerbName, VerifyRequest, MAX_BODY_BYTES, NDJSON, ROUTES,
};
use crate::protocol::{FeedRequest, PageName, PageQuery, TasksRequest, EVENT_STREAM, PAGES};
use axum::body::{Body, Bytes};
use axum::extract::{Path as PathParam, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, on, MethodFilter};
use axum::{Json, Router};
use futures::StreamExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) mod error;
pub(crate) mod reach;
mod sse;

pub use error::ApiError;
pub use reach::Vouched;

/// The daemon's HTTP service: one axum route per row of `crate::protocol::ROUTES` (each
/// also with a trailing `/`), a JSON `not_found` for any other path, and a JSON
/// `method_not_allowed` naming the methods axum's `Allow` header lists.
pub(crate) fn router(served: Arc<Served>) -> Router {
    let mut router = Router::new();
    for route in ROUTES {
        let verb = route.verb;
        let filter = match route.method {
            "GET" => MethodFilter::GET,
            "POST" => MethodFilter::POST,
            "DELETE" => MethodFilter::DELETE,
            other => unreachable!("ROUTES names only GET, POST and DELETE, not {other}"),
        };
        let handler = if route.path.contains("{id}") {
            on(
                filter,
                move |State(api): State<Arc<Served>>,
                      PathParam(id): PathParam<String>,
                      request: Request| async move {
                    // An id is one whole, non-empty segment.
                    if id.is_empty() || id.contains('/') {
                        return not_found(request).await;
                    }
                    dispatch(api, verb, Some(JobId::from(id.as_str())), request).await
                },
            )
        } else {
            on(
                filter,
                move |State(api): State<Arc<Served>>, request: Request| {
                    dispatch(api, verb, None, request)
                },
            )
        };
        router = router
            .route(route.path, handler.clone())
            .route(&format!("{}/", route.path), handler);
    }
    for page in PAGES {
        let handler = match page.page {
            PageName::OpenApi => get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    crate::protocol::openapi::document_text(),
                )
                    .into_response()
            }),
            PageName::Cockpit => get(|| async { crate::daemon::cockpit::page() }),
            PageName::CockpitFile => get(|PathParam(name): PathParam<String>| async move {
                crate::daemon::cockpit::file(&name).unwrap_or_else(|| {
                    ApiError::new(
                        StatusCode::NOT_FOUND,
                        codes::NOT_FOUND,
                        "the cockpit has no such file; open `/cockpit`",
                    )
                    .into_response()
                })
            }),
        };
        router = router
            .route(page.path, handler.clone())
            .route(&format!("{}/", page.path), handler);
    }
    // The routes answer inside; `around` sees their finished replies (a 405 with its
    // `Allow`), so it wraps them whole.
    let routes = router.fallback(not_found).with_state(served.clone());
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn_with_state(served, around))
}

/// Around every request: the daemon is not idle, and a 405 says in JSON what is allowed.
async fn around(
    State(api): State<Arc<Served>>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    api.touch();
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let allow = response
        .headers()
        .get(header::ALLOW)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    ApiError::method_not_allowed(method.as_str(), &path, allow).into_response()
}

/// No route has this path.
async fn not_found(request: Request) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::NOT_FOUND,
        format!(
            "no route `{} {}`; the routes are listed in docs/DAEMON.md and in \
             `/api/v1/openapi.json` (they start with `/api/v1/`; the page is `/cockpit`)",
            request.method(),
            request.uri().path()
        ),
    )
    .into_response()
}

/// What a verb's mapping gets: the URI (for its query), the headers (`Accept`,
/// `Last-Event-ID`), the connection (closed when an event subscriber falls behind) and
/// the body (empty when none).
struct Incoming {
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    conn: Option<crate::daemon::conn::ConnHandle>,
    body: Bytes,
    /// Whether it came through the TCP listener (see [`reach`]).
    tcp: bool,
}

/// A handler's answer.
type Answer = Result<Response, ApiError>;

/// `value` as JSON with `status`.
fn reply(status: StatusCode, value: impl Serialize) -> Answer {
    Ok((status, Json(value)).into_response())
}

/// One request of `verb` (`id` from its path): read, answered, written back.
async fn dispatch(
    api: Arc<Served>,
    verb: VerbName,
    id: Option<JobId>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let body_timeout = parts
        .extensions
        .get::<crate::daemon::conn::BodyTimeout>()
        .map_or(crate::daemon::conn::Limits::default().body, |t| t.0);
    let mut incoming = match read(parts.uri, body, body_timeout).await {
        Ok(incoming) => incoming,
        Err(e) => return e.into_response(),
    };
    incoming.headers = parts.headers;
    incoming.tcp = parts
        .extensions
        .get::<crate::daemon::listen::OverTcp>()
        .is_some();
    incoming.conn = parts
        .extensions
        .get::<crate::daemon::conn::ConnHandle>()
        .cloned();
    tracing::debug!(method = %parts.method, %path, "request");
    answer(api.as_ref(), verb, id, incoming)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// One verb: its request read from the call, answered, written back.
async fn answer(api: &Served, verb: VerbName, id: Option<JobId>, incoming: Incoming) -> Answer {
    let id = || {
        id.clone()
            .ok_or_else(|| ApiError::internal("a job route without an id"))
    };
    match verb {
        VerbName::Health => reply(StatusCode::OK, api.health(HealthRequest {}).await?),
        VerbName::Advisors => {
            let context = context_of(api, &incoming).await?;
            reply(
                StatusCode::OK,
                api.advisors(AdvisorsRequest { context }).await?,
            )
        }
        VerbName::Plan => {
            let request: PlanRequest = body_with_context(api, &incoming, "plan request").await?;
            reply(StatusCode::OK, api.plan(request).await?)
        }
        VerbName::Record => {
            let request: RecordRequest =
                body_with_context(api, &incoming, "record request").await?;
            reply(StatusCode::CREATED, api.record(request).await?)
        }
        VerbName::Status => {
            let page: PageQuery = query_of(&incoming)?;
            let context = context_of(api, &incoming).await?;
            let mut view = api.status(StatusRequest { context }).await?;
            if page.offset.is_some() || page.limit.is_some() {
                view.page(page.offset.unwrap_or(0), page.limit.unwrap_or(usize::MAX));
            }
            reply(StatusCode::OK, view)
        }
        VerbName::Tasks => {
            let context = context_of(api, &incoming).await?;
            reply(StatusCode::OK, api.tasks(TasksRequest { context }).await?)
        }
        VerbName::Feed => feed(api, &incoming),
        VerbName::Spend => {
            let context = context_of(api, &incoming).await?;
            reply(StatusCode::OK, api.spend(SpendRequest { context }).await?)
        }
        VerbName::Explain => {
            let query: ExplainQuery = query_of(&incoming)?;
            let id = query.id.ok_or_else(|| {
                ApiError::bad_request(
                    codes::INVALID_REQUEST,
                    "`id` is missing: ask `/api/v1/reasoning/explain?id=RECORD_ID`",
                )
            })?;
            let context = context_of(api, &incoming).await?;
            reply(
                StatusCode::OK,
                api.explain(ExplainRequest {
                    context,
                    id,
                    downstream: query.downstream.unwrap_or(false),
                })
                .await?,
            )
        }
        VerbName::Tree => {
            let query: TreeQuery = query_of(&incoming)?;
            let context = context_of(api, &incoming).await?;
            let request = TreeRequest {
                context,
                depth: query.depth,
                show_superseded: query.show_superseded.unwrap_or(false),
            };
            let mut view = api.tree(request).await?;
            if query.offset.is_some() || query.limit.is_some() {
                view.page(query.offset.unwrap_or(0), query.limit.unwrap_or(usize::MAX));
            }
            reply(StatusCode::OK, view)
        }
        VerbName::Check => {
            let query: CheckQuery = query_of(&incoming)?;
            let context = context_of(api, &incoming).await?;
            let request = CheckRequest {
                context,
                path: query.path,
            };
            reply(StatusCode::OK, api.check(request).await?)
        }
        VerbName::Verify => {
            let query: VerifyQuery = query_of(&incoming)?;
            let context = context_of(api, &incoming).await?;
            let request = VerifyRequest {
                context,
                all: query.all.unwrap_or(false),
            };
            reply(StatusCode::OK, api.verify(request).await?)
        }
        VerbName::Consult => {
            if api.shutting_down() {
                return Err(Error::ShuttingDown.into());
            }
            let request: ConsultRequest =
                body_with_context(api, &incoming, "consultation request").await?;
            reply(StatusCode::ACCEPTED, api.consult(request).await?)
        }
        VerbName::Jobs => {
            let request: JobsRequest = query_of(&incoming)?;
            reply(StatusCode::OK, api.jobs(request).await?)
        }
        VerbName::Job => reply(StatusCode::OK, api.job(JobRequest { id: id()? }).await?),
        VerbName::Cancel => {
            let job = api.cancel(CancelRequest { id: id()? }).await?;
            let status = if job.state.is_finished() {
                StatusCode::OK
            } else {
                StatusCode::ACCEPTED // still stopping
            };
            reply(status, job)
        }
        VerbName::Events => {
            let query: EventsQuery = query_of(&incoming)?;
            if wants_event_stream(&incoming.headers) {
                // Resuming: `Last-Event-ID` is the position of the last event seen.
                let resumed = last_event_id(&incoming.headers)
                    .map(|last| {
                        last.parse::<usize>().map_err(|_| {
                            ApiError::bad_request(
                                codes::INVALID_REQUEST,
                                format!(
                                    "`Last-Event-ID: {last}` is not an event id of this stream \
                                     (a number); reconnect without it"
                                ),
                            )
                        })
                    })
                    .transpose()?;
                let from = resumed.or(query.from).unwrap_or(0);
                let events = api.events(EventsRequest { id: id()?, from }).await?;
                return Ok(sse::job_stream(events, from, api.feed().limits()));
            }
            let request = EventsRequest {
                id: id()?,
                from: query.from.unwrap_or(0),
            };
            let lines = api.events(request).await?.map(|event| {
                event.map(|event| {
                    // An event is plain data; it always encodes.
                    let mut line = serde_json::to_vec(&event).unwrap_or_default();
                    line.push(b'\n');
                    Bytes::from(line)
                })
            });
            Ok(([(header::CONTENT_TYPE, NDJSON)], Body::from_stream(lines)).into_response())
        }
        VerbName::Reviews => reply(
            StatusCode::OK,
            api.reviews(crate::protocol::ReviewsRequest {}).await?,
        ),
        VerbName::ReviewAnswer => {
            let body: crate::protocol::ReviewAnswer =
                json_body(&incoming.body, "review answer `{\"answer\": TEXT}`")?;
            let request = crate::protocol::ReviewAnswerRequest {
                id: id()?.to_string(),
                answer: body.answer,
            };
            reply(StatusCode::OK, api.answer_review(request).await?)
        }
    }
}

/// The query of `explain`.
#[derive(Debug, Default, Deserialize)]
struct ExplainQuery {
    id: Option<RecordId>,
    downstream: Option<bool>,
}

/// The query of `tree`.
#[derive(Debug, Default, Deserialize)]
struct TreeQuery {
    depth: Option<usize>,
    show_superseded: Option<bool>,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// Whether the request's `Accept` asks for server-sent events.
fn wants_event_stream(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains(EVENT_STREAM))
}

/// The `Last-Event-ID` header, if any.
fn last_event_id(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// `GET /api/v1/events?root=&task=`: the root's feed as server-sent events.
fn feed(api: &Served, incoming: &Incoming) -> Answer {
    let request: FeedRequest = match incoming.uri.query() {
        Some(_) => axum::extract::Query::<FeedRequest>::try_from_uri(&incoming.uri)
            .map(|q| q.0)
            .map_err(|e| {
                ApiError::bad_request(
                    codes::INVALID_REQUEST,
                    format!(
                        "the query is not accepted: {}; ask `/api/v1/events?root=/absolute/dir` \
                         (and optionally `&task=NAME`)",
                        e.body_text()
                    ),
                )
            })?,
        None => FeedRequest::default(),
    };
    let root = Path::new(&request.root);
    if !root.is_absolute() {
        return Err(ApiError::bad_request(
            codes::INVALID_ROOT,
            "`root` is missing or not absolute; ask `/api/v1/events?root=/absolute/dir`",
        ));
    }
    let filter = crate::daemon::feed::Filter {
        root: request.root.clone(),
        canonical: std::fs::canonicalize(root)
            .ok()
            .map(|p| p.display().to_string()),
        task: request.task,
    };
    let subscription = api
        .feed()
        .subscribe(filter, last_event_id(&incoming.headers));
    Ok(sse::feed_stream(
        api.feed().clone(),
        subscription,
        incoming.conn.clone(),
        api.draining(),
    ))
}

/// The query of `check`.
#[derive(Debug, Default, Deserialize)]
struct CheckQuery {
    path: Option<PathBuf>,
}

/// The query of `verify`.
#[derive(Debug, Default, Deserialize)]
struct VerifyQuery {
    all: Option<bool>,
}

/// The query of `events`.
#[derive(Debug, Default, Deserialize)]
struct EventsQuery {
    from: Option<usize>,
}

/// The root and task a request without a context names (`curl` by hand, the cockpit),
/// and the catalogue and state directory when it names them.
#[derive(Debug, Default, Deserialize)]
struct ContextQuery {
    root: Option<String>,
    task: Option<String>,
    catalogue: Option<PathBuf>,
    state_dir: Option<PathBuf>,
}

/// The context of a request that carries none: the query's, on the daemon's own
/// environment.
async fn query_context(api: &Served, incoming: &Incoming) -> Result<RequestContext, ApiError> {
    let query: ContextQuery = query_of(incoming)?;
    let root = query.root.ok_or_else(|| {
        ApiError::bad_request(
            codes::INVALID_REQUEST,
            "no context: send `{\"context\": {...}}` in the body, or name the root with \
             `?root=/absolute/dir` (and optionally `&task=NAME`)",
        )
    })?;
    let root = PathBuf::from(root);
    if incoming.tcp {
        if let Some(catalogue) = &query.catalogue {
            api.vouched().permit_catalogue(catalogue)?;
        }
        if let Some(state_dir) = &query.state_dir {
            api.vouched().permit_state_dir(&root, state_dir)?;
        }
    } else {
        api.vouched()
            .note(query.catalogue.as_deref(), query.state_dir.as_deref());
    }
    let flags = crate::context::Locations {
        root: Some(root),
        task: query.task,
        catalogue: query.catalogue,
        state_dir: query.state_dir,
    };
    // Reads the catalogue to find the credential variables: off the async threads.
    tokio::task::spawn_blocking(move || crate::context::daemon_context_for(&flags))
        .await
        .map_err(|e| ApiError::internal(format!("a worker thread failed: {e}")))
}

/// A POST body as `T`; when it has no `context`, the query's (see [`query_context`]).
async fn body_with_context<T: DeserializeOwned>(
    api: &Served,
    incoming: &Incoming,
    what: &str,
) -> Result<T, ApiError> {
    let mut value: serde_json::Value = json_body(&incoming.body, what)?;
    if let Some(object) = value.as_object_mut() {
        match object.get("context") {
            Some(_) if incoming.tcp => return Err(reach::body_context_refused()),
            Some(context) => note_context(api, context),
            None if incoming.uri.query().is_some() => {
                let context = query_context(api, incoming).await?;
                object.insert(
                    "context".to_string(),
                    serde_json::to_value(context.with_values())
                        .map_err(|e| ApiError::internal(e.to_string()))?,
                );
            }
            None => {}
        }
    }
    serde_json::from_value(value).map_err(|e| {
        let message = e.to_string();
        if is_out_of_range(&message) {
            return ApiError::bad_request(codes::INVALID_REQUEST, message);
        }
        ApiError::bad_request(
            codes::INVALID_JSON,
            format!("the body is not a valid JSON {what}: {e}"),
        )
    })
}

/// The query string read as `T` (every field optional), or 400 naming what is wrong.
fn query_of<T: DeserializeOwned + Default>(incoming: &Incoming) -> Result<T, ApiError> {
    let Some(q) = incoming.uri.query() else {
        return Ok(T::default());
    };
    axum::extract::Query::<T>::try_from_uri(&incoming.uri)
        .map(|query| query.0)
        .map_err(|e| {
            ApiError::bad_request(
                codes::INVALID_REQUEST,
                format!("the query string `{q}` is not accepted: {}", e.body_text()),
            )
        })
}

/// The context of a GET request: the body's, else one built from the query's `root` and
/// `task` and the daemon's own environment.
async fn context_of(api: &Served, incoming: &Incoming) -> Result<RequestContext, ApiError> {
    if !incoming.body.is_empty() {
        if incoming.tcp {
            return Err(reach::body_context_refused());
        }
        let context = json_body::<ContextBody>(&incoming.body, "`{\"context\": {...}}`")?.context;
        api.vouched().note(
            context.catalogue_path.as_deref(),
            context.state_dir.as_deref(),
        );
        return Ok(context);
    }
    query_context(api, incoming).await
}

/// Note the catalogue and state directory a socket request's JSON `context` names.
fn note_context(api: &Served, context: &serde_json::Value) {
    let path = |key: &str| context.get(key).and_then(|v| v.as_str()).map(Path::new);
    api.vouched()
        .note(path("catalogue_path"), path("state_dir"));
}

/// Read the body under the bound (413 past it) and within `timeout` (408 after it: a
/// body that never ends holds nothing for long).
async fn read(
    uri: axum::http::Uri,
    body: Body,
    timeout: std::time::Duration,
) -> Result<Incoming, ApiError> {
    let body = tokio::time::timeout(timeout, Limited::new(body, MAX_BODY_BYTES).collect())
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                codes::INVALID_REQUEST,
                format!(
                    "the body did not arrive within {} s; send it whole, at once",
                    timeout.as_secs_f64()
                ),
            )
        })?
        .map_err(|e| {
            if e.downcast_ref::<LengthLimitError>().is_some() {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    codes::PAYLOAD_TOO_LARGE,
                    format!(
                        "the body is over {MAX_BODY_BYTES} bytes (1 MiB); send less (evidence \
                         is a reference, never a copy)"
                    ),
                )
            } else {
                ApiError::bad_request(
                    codes::INVALID_REQUEST,
                    format!("the body could not be read: {e}"),
                )
            }
        })?
        .to_bytes();
    Ok(Incoming {
        uri,
        headers: axum::http::HeaderMap::new(),
        conn: None,
        body,
        tcp: false,
    })
}

/// The body parsed as `T`, or 400 naming what is wrong with it.
fn json_body<T: DeserializeOwned>(body: &Bytes, what: &str) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            codes::INVALID_JSON,
            format!("the body is empty; this route takes a JSON {what} (see docs/DAEMON.md)"),
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        let message = e.to_string();
        if is_out_of_range(&message) {
            // The JSON is fine; a value in it is not acceptable.
            return ApiError::bad_request(codes::INVALID_REQUEST, message);
        }
        ApiError::bad_request(
            codes::INVALID_JSON,
            format!("the body is not a valid JSON {what}: {e}"),
        )
    })
}
