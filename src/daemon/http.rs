//! The socket's HTTP mapping: one axum route per row of the one table
//! (`crate::protocol::ROUTES`), each verb with one answer served by one generic handler
//! ([`serve`]) that reads its request as the table and the request's own type say
//! (`crate::protocol::wire`: the path's `{id}`, the query read by the request's JSON
//! Schema, the JSON body under the 1 MiB bound, the context from the body or the query),
//! asks the façade's daemon-side implementation ([`Served`]) and answers with the verb's
//! status. The two event streams have a handler each. Errors become
//! `{"error": CODE, "message": ...}` with their HTTP status.

use crate::daemon::served::Served;
use crate::error::Error;
use crate::facade::{ask, Api};
use crate::protocol::wire::Shape;
use crate::protocol::{
    codes, is_out_of_range, Call, ContextBody, ContextQuery, EventsRequest, FeedRequest, PageName,
    PageQuery, RequestContext, Verb, VerbName, Visit, EVENT_STREAM, MAX_BODY_BYTES, NDJSON, PAGES,
    ROUTES,
};
use axum::body::{Body, Bytes};
use axum::extract::{Path as PathParam, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use futures::StreamExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::future::Future;
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
        let filter = match route.method {
            "GET" => MethodFilter::GET,
            "POST" => MethodFilter::POST,
            "DELETE" => MethodFilter::DELETE,
            other => unreachable!("ROUTES names only GET, POST and DELETE, not {other}"),
        };
        let handler = crate::protocol::visit(route.verb, Handler { filter });
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

/// The handler of one row of the table: [`serve`] for a verb with one answer, its own for
/// each event stream.
struct Handler {
    filter: MethodFilter,
}

impl Visit for Handler {
    type Out = MethodRouter<Arc<Served>>;

    fn call<V: Call>(self) -> Self::Out {
        let shape = Arc::new(Shape::of::<V>());
        with_request(self.filter, shape.path_id, move |api, id, incoming| {
            let shape = shape.clone();
            async move { serve::<V>(&api, &shape, id, incoming).await }
        })
    }

    fn stream<V: Verb>(self) -> Self::Out {
        match V::NAME {
            VerbName::Events => {
                let shape = Arc::new(Shape::of::<V>());
                with_request(self.filter, true, move |api, id, incoming| {
                    let shape = shape.clone();
                    async move { events(&api, &shape, id, incoming).await }
                })
            }
            _ => with_request(self.filter, false, |api, _, incoming| async move {
                feed(&api, &incoming)
            }),
        }
    }
}

/// A route's handler: the request read (its path's `{id}` when `path_id`, its body under
/// the bounds), then `handle`d.
fn with_request<F, Fut>(filter: MethodFilter, path_id: bool, handle: F) -> MethodRouter<Arc<Served>>
where
    F: Fn(Arc<Served>, Option<String>, Incoming) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    if path_id {
        on(
            filter,
            move |State(api): State<Arc<Served>>,
                  PathParam(id): PathParam<String>,
                  request: Request| async move {
                // An id is one whole, non-empty segment.
                if id.is_empty() || id.contains('/') {
                    return not_found(request).await;
                }
                dispatch(api, Some(id), request, handle).await
            },
        )
    } else {
        on(
            filter,
            move |State(api): State<Arc<Served>>, request: Request| {
                dispatch(api, None, request, handle)
            },
        )
    }
}

/// One request: read, answered by `handle`, written back.
async fn dispatch<F, Fut>(
    api: Arc<Served>,
    id: Option<String>,
    request: Request,
    handle: F,
) -> Response
where
    F: Fn(Arc<Served>, Option<String>, Incoming) -> Fut,
    Fut: Future<Output = Answer>,
{
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
    handle(api, id, incoming)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Any verb with one answer: its request read as its [`Shape`] says, asked of the
/// façade, answered with the verb's status (paged when asked and the verb pages).
async fn serve<V: Call>(
    api: &Served,
    shape: &Shape,
    id: Option<String>,
    incoming: Incoming,
) -> Answer {
    if V::CONSULTS && api.shutting_down() {
        return Err(Error::ShuttingDown.into());
    }
    let (request, page) = request_of::<V>(api, shape, id, &incoming, V::PAGED).await?;
    if V::NAME == VerbName::Verify
        && crate::daemon::verify_progress::wants_progress(&incoming.headers)
    {
        // Its progress line by line, then the report (`daemon::verify_progress`).
        let request = serde_json::to_value(&request)
            .and_then(serde_json::from_value)
            .map_err(|e| ApiError::internal(format!("the verify request: {e}")))?;
        return Ok(crate::daemon::verify_progress::stream(
            api.registry().clone(),
            request,
        ));
    }
    if let Some(page) = page.filter(|p| p.offset.is_some() || p.limit.is_some()) {
        let any: &dyn std::any::Any = &request;
        if let Some(status) = any.downcast_ref::<crate::protocol::StatusRequest>() {
            // A page of `status` is cut where the view is derived, so it costs the page.
            let (offset, limit) = (page.offset.unwrap_or(0), page.limit.unwrap_or(usize::MAX));
            let view = api.status_page(status.clone(), offset, limit).await?;
            return reply(StatusCode::OK, view);
        }
    }
    if V::NAME == VerbName::Consult
        && crate::daemon::verify_progress::wants_progress(&incoming.headers)
    {
        // The job, then its events on this connection (`consult_streamed`): nothing is
        // promised before the job as accepted reaches the client, so it may wait for the
        // flush that makes the plan and the first outcomes durable with it.
        let any: &dyn std::any::Any = &request;
        if let Some(consult) = any.downcast_ref::<crate::protocol::ConsultRequest>() {
            let (job, events) = api.consult_streamed(consult.clone()).await?;
            return consult_streamed(job, events);
        }
    }
    let mut response = ask(api, request).await?;
    if let Some(page) = page {
        if page.offset.is_some() || page.limit.is_some() {
            V::page(
                &mut response,
                page.offset.unwrap_or(0),
                page.limit.unwrap_or(usize::MAX),
            );
        }
    }
    let status = StatusCode::from_u16(V::status(&response)).unwrap_or(StatusCode::OK);
    reply(status, response)
}

/// `V`'s request from the call: a `POST`'s JSON body (its context from the query when it
/// has none), or the query's fields and the body's (or the query's) context; the path's
/// `{id}` as its `id`. With it, the paging asked for, when the verb pages.
async fn request_of<V: Verb>(
    api: &Served,
    shape: &Shape,
    id: Option<String>,
    incoming: &Incoming,
    paged: bool,
) -> Result<(V, Option<PageQuery>), ApiError> {
    let what = format!("{:?} request", V::NAME).to_lowercase();
    if shape.body {
        let mut value = if shape.context {
            body_with_context(api, incoming, &what).await?
        } else {
            json_body::<Value>(&incoming.body, &what)?
        };
        if let (Some(id), Some(object)) = (id, value.as_object_mut()) {
            object.insert("id".to_string(), Value::String(id));
        }
        let request = serde_json::from_value(value).map_err(|e| {
            let message = e.to_string();
            if is_out_of_range(&message) {
                return ApiError::bad_request(codes::INVALID_REQUEST, message);
            }
            ApiError::bad_request(
                codes::INVALID_JSON,
                format!("the body is not a valid JSON {what}: {e}"),
            )
        })?;
        return Ok((request, None));
    }
    let query = incoming.uri.query().unwrap_or("");
    let not_accepted = |e: &dyn std::fmt::Display| {
        ApiError::bad_request(
            codes::INVALID_REQUEST,
            format!("the query string `{query}` is not accepted: {e}"),
        )
    };
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut fields: Map<String, Value> = shape.read_query(&pairs).map_err(|e| not_accepted(&e))?;
    if let Some(field) = shape.missing(&fields) {
        let path = incoming.uri.path().trim_end_matches('/');
        return Err(ApiError::bad_request(
            codes::INVALID_REQUEST,
            format!(
                "`{name}` is missing: ask `{path}?{name}={placeholder}`",
                name = field.name,
                placeholder = field.placeholder
            ),
        ));
    }
    let page = if paged {
        Some(query_of::<PageQuery>(incoming)?)
    } else {
        None
    };
    if let Some(id) = id {
        fields.insert("id".to_string(), Value::String(id));
    }
    if shape.context {
        let context = context_of(api, incoming).await?;
        fields.insert(
            "context".to_string(),
            serde_json::to_value(context.with_values())
                .map_err(|e| ApiError::internal(e.to_string()))?,
        );
    }
    let request = serde_json::from_value(Value::Object(fields)).map_err(|e| {
        let message = e.to_string();
        if is_out_of_range(&message) {
            return ApiError::bad_request(codes::INVALID_REQUEST, message);
        }
        not_accepted(&e)
    })?;
    Ok((request, page))
}

/// `GET /api/v1/consultations/{id}/events`: NDJSON, or server-sent events when `Accept`
/// names them (resumed after `Last-Event-ID`).
async fn events(api: &Served, shape: &Shape, id: Option<String>, incoming: Incoming) -> Answer {
    let (request, _) = request_of::<EventsRequest>(api, shape, id, &incoming, false).await?;
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
        let from = resumed.unwrap_or(request.from);
        let events = api.events(EventsRequest { from, ..request }).await?;
        return Ok(sse::job_stream(events, from, api.feed().limits()));
    }
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

/// `POST /api/v1/consultations` with `Accept: application/x-ndjson`: `202`, the job as
/// accepted on the first line (journaled and flushed already, as for the plain `202`),
/// then the job's events from the first, one per line, as `events` streams them. The
/// client follows the job on the connection that queued it instead of a second one.
fn consult_streamed(
    job: crate::protocol::Job,
    events: futures::stream::BoxStream<'static, crate::protocol::Event>,
) -> Answer {
    // Plain data; it always encodes.
    let mut first = serde_json::to_vec(&job).unwrap_or_default();
    first.push(b'\n');
    let lines =
        futures::stream::once(async move { Ok::<_, std::convert::Infallible>(Bytes::from(first)) })
            .chain(events.map(|event| {
                let mut line = serde_json::to_vec(&event).unwrap_or_default();
                line.push(b'\n');
                Ok(Bytes::from(line))
            }));
    Ok((
        StatusCode::ACCEPTED,
        [(header::CONTENT_TYPE, NDJSON)],
        Body::from_stream(lines),
    )
        .into_response())
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
