//! The handlers of the network-free routes: each reads its request, calls the same
//! `crate::service` function the CLI's `--no-daemon` path calls (on the blocking pool:
//! they read and write files), and answers with its JSON.

use crate::daemon::dispatch::{check_root, context_of, json_body, Incoming};
use crate::daemon::error::ApiError;
use crate::daemon::Shared;
use crate::protocol::{codes, Health, PlanRequest, RecordRequest};
use crate::service::{self, ServiceError};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::path::PathBuf;

/// A handler's answer.
pub(crate) type Answer = Result<Response, ApiError>;

/// Run a service function on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("a worker thread failed: {e}")))?
        .map_err(ApiError::from)
}

fn ok(status: StatusCode, value: impl Serialize) -> Answer {
    Ok((status, Json(value)).into_response())
}

/// `GET /api/v1/health`.
pub(crate) fn health(shared: &Shared) -> Answer {
    ok(
        StatusCode::OK,
        Health {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_s: shared.started.elapsed().as_secs(),
            jobs: shared.jobs.counts(),
        },
    )
}

/// `GET /api/v1/reasoning/advisors`.
pub(crate) async fn advisors(incoming: Incoming) -> Answer {
    let context = context_of(&incoming).await?;
    ok(
        StatusCode::OK,
        blocking(move || service::advisors(&context)).await?,
    )
}

/// `POST /api/v1/reasoning/plan`.
pub(crate) async fn plan_preview(incoming: Incoming) -> Answer {
    let request: PlanRequest = json_body(&incoming.body, "plan request")?;
    check_root(&request.context)?;
    let plan = blocking(move || {
        service::plan_preview(
            &request.context,
            request.materiality,
            request.confidence,
            request.capabilities,
        )
    })
    .await?;
    ok(StatusCode::OK, plan)
}

/// `POST /api/v1/reasoning/records`: 201 with the stored record.
pub(crate) async fn record(incoming: Incoming) -> Answer {
    let request: RecordRequest = json_body(&incoming.body, "record request")?;
    check_root(&request.context)?;
    let record = blocking(move || service::record(&request.context, &request.record)).await?;
    ok(StatusCode::CREATED, record)
}

/// `GET /api/v1/reasoning`.
pub(crate) async fn status(incoming: Incoming) -> Answer {
    let context = context_of(&incoming).await?;
    ok(
        StatusCode::OK,
        blocking(move || service::status(&context)).await?,
    )
}

/// `GET /api/v1/reasoning/explain?id=ID`.
pub(crate) async fn explain(incoming: Incoming) -> Answer {
    let context = context_of(&incoming).await?;
    let id = incoming.query.id.clone().ok_or_else(|| {
        ApiError::bad_request(
            codes::INVALID_REQUEST,
            "`id` is missing: ask `/api/v1/reasoning/explain?id=RECORD_ID`",
        )
    })?;
    ok(
        StatusCode::OK,
        blocking(move || service::explain(&context, &id)).await?,
    )
}

/// `GET /api/v1/reasoning/tree?depth=N&show_superseded=true`.
pub(crate) async fn tree(incoming: Incoming) -> Answer {
    let context = context_of(&incoming).await?;
    let depth = incoming.query.depth;
    let show_superseded = incoming.query.show_superseded.unwrap_or(false);
    ok(
        StatusCode::OK,
        blocking(move || service::tree(&context, depth, show_superseded)).await?,
    )
}

/// `GET /api/v1/reasoning/check?path=DIR`.
pub(crate) async fn check(incoming: Incoming) -> Answer {
    let context = context_of(&incoming).await?;
    let path = incoming.query.path.clone().map(PathBuf::from);
    ok(
        StatusCode::OK,
        blocking(move || service::check(&context, path.as_deref())).await?,
    )
}
