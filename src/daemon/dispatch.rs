//! The one dispatch point: every request is parsed into a [`Route`], its body read under
//! the 1 MiB bound, and handed to one small handler per route in one exhaustive match.

use crate::context::{credentials_for, RequestContext};
use crate::daemon::error::ApiError;
use crate::daemon::{handlers, job_handlers, Shared};
use crate::protocol::{codes, ContextBody, Route, RouteError, RouteQuery, MAX_BODY_BYTES};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::Arc;

/// The daemon's HTTP service: everything goes through [`dispatch`].
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(dispatch).with_state(shared)
}

/// What a handler gets: the shared state, the query and the body (empty when none).
pub(crate) struct Incoming {
    /// The query parameters.
    pub query: RouteQuery,
    /// The body, at most [`MAX_BODY_BYTES`].
    pub body: Bytes,
}

async fn dispatch(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let route = match Route::parse(parts.method.as_str(), &path) {
        Ok(route) => route,
        Err(RouteError::NotFound) => {
            return ApiError::new(
                StatusCode::NOT_FOUND,
                codes::NOT_FOUND,
                format!(
                    "no route `{} {path}`; the routes are listed in docs/DAEMON.md (they all \
                     start with `/api/v1/`)",
                    parts.method
                ),
            )
            .into_response()
        }
        Err(RouteError::MethodNotAllowed(allow)) => {
            return ApiError::method_not_allowed(parts.method.as_str(), &path, allow)
                .into_response()
        }
    };
    let incoming = match read(&parts.uri, body).await {
        Ok(incoming) => incoming,
        Err(e) => return e.into_response(),
    };
    tracing::debug!(method = %parts.method, %path, "request");
    let answer = match route {
        Route::Health => handlers::health(&shared),
        Route::Advisors => handlers::advisors(incoming).await,
        Route::PlanPreview => handlers::plan_preview(incoming).await,
        Route::Record => handlers::record(incoming).await,
        Route::Status => handlers::status(incoming).await,
        Route::Explain => handlers::explain(incoming).await,
        Route::Tree => handlers::tree(incoming).await,
        Route::Check => handlers::check(incoming).await,
        Route::Consult => job_handlers::consult(&shared, incoming).await,
        Route::Jobs => job_handlers::list(&shared, incoming),
        Route::Job(id) => job_handlers::get(&shared, &id),
        Route::JobEvents(id) => job_handlers::events(&shared, &id),
        Route::Cancel(id) => job_handlers::cancel(&shared, &id).await,
    };
    answer.unwrap_or_else(IntoResponse::into_response)
}

/// Parse the query and read the body under the bound (413 past it).
async fn read(uri: &axum::http::Uri, body: Body) -> Result<Incoming, ApiError> {
    let query = match uri.query() {
        None => RouteQuery::default(),
        Some(q) => {
            axum::extract::Query::<RouteQuery>::try_from_uri(uri)
                .map_err(|e| {
                    ApiError::bad_request(
                        codes::INVALID_REQUEST,
                        format!("the query string `{q}` is not accepted: {}", e.body_text()),
                    )
                })?
                .0
        }
    };
    let body = Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
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
    Ok(Incoming { query, body })
}

/// The body parsed as `T`, or 400 naming what is wrong with it.
pub(crate) fn json_body<T: DeserializeOwned>(body: &Bytes, what: &str) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            codes::INVALID_JSON,
            format!("the body is empty; this route takes a JSON {what} (see docs/DAEMON.md)"),
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            codes::INVALID_JSON,
            format!("the body is not a valid JSON {what}: {e}"),
        )
    })
}

/// The context of a GET request: the body's, else one built from the query's `root` and
/// `task` and the daemon's own environment.
pub(crate) async fn context_of(incoming: &Incoming) -> Result<RequestContext, ApiError> {
    let context = if incoming.body.is_empty() {
        let root = incoming.query.root.clone().ok_or_else(|| {
            ApiError::bad_request(
                codes::INVALID_REQUEST,
                "no context: send `{\"context\": {...}}` as the body, or name the root with \
                 `?root=/absolute/dir` (and optionally `&task=NAME`)",
            )
        })?;
        let task = incoming.query.task.clone();
        // Reads the catalogue to find the credential variables: off the async threads.
        tokio::task::spawn_blocking(move || daemon_context(Path::new(&root), task))
            .await
            .map_err(|e| ApiError::internal(format!("a worker thread failed: {e}")))?
    } else {
        json_body::<ContextBody>(&incoming.body, "`{\"context\": {...}}`")?.context
    };
    check_root(&context)?;
    Ok(context)
}

/// A context for `root` and `task` built from the daemon's own environment, credentials
/// included (for requests that carry none, and for jobs resumed after a restart).
pub(crate) fn daemon_context(root: &Path, task: Option<String>) -> RequestContext {
    RequestContext::for_root(root.to_path_buf(), task, &|name| std::env::var(name).ok())
}

/// Give `context` the daemon's own values of the credential variables its catalogue names
/// (a job resumed after a restart: credentials are never journaled).
pub(crate) fn fill_credentials_from_daemon(context: &mut RequestContext) {
    context.credentials = credentials_for(context, &|name| std::env::var(name).ok());
}

/// 400 `invalid_root` unless the context's root is an absolute, existing directory.
pub(crate) fn check_root(context: &RequestContext) -> Result<(), ApiError> {
    let root = &context.root;
    let problem = if !root.is_absolute() {
        "is not absolute"
    } else if !root.exists() {
        "does not exist"
    } else if !root.is_dir() {
        "is not a directory"
    } else {
        return Ok(());
    };
    Err(ApiError::bad_request(
        codes::INVALID_ROOT,
        format!(
            "root `{}` {problem}; every request names the project root by its absolute path",
            root.display()
        ),
    ))
}
