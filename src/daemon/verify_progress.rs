//! `verify` with its progress: when a client's `Accept` names NDJSON, the daemon answers
//! `GET /api/v1/reasoning/verify` with one line per step of the walk as it goes
//! (`{"progress": {"task", "walked", "records"}}`, see [`VerifyProgress`]) and a last
//! line holding the report (`{"report": {...}}`) or the error (`{"error": {...}}`, the
//! error body every route answers with, and its `status`). A client waiting for a long verify (a task of a
//! hundred thousand records, or `--all` over many) then sees it go on, and gives up only
//! when no line comes within its bound. Without that `Accept` the route answers the
//! report as JSON, as before.

use crate::core::chain::VerifyReport;
use crate::daemon::http::error::ApiError;
use crate::protocol::{ErrorBody, VerifyRequest, NDJSON};
use crate::service::VerifyProgress;
use advisord_adapters::registry::Registry;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// At most one progress line this often (the last step of each task always goes out).
pub const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// One line of a verify answered with its progress.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// How far it has gone.
    Progress(VerifyProgress),
    /// The report: the last line.
    Report(VerifyReport),
    /// What failed: the last line.
    Error(Failed),
}

/// What failed, as the route would have answered it: its HTTP status and error body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failed {
    /// The status the route answers the error with.
    pub status: u16,
    /// The error body.
    #[serde(flatten)]
    pub body: ErrorBody,
}

/// Whether the request's `Accept` asks for NDJSON.
pub fn wants_progress(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains(NDJSON))
}

fn encode(line: &Line) -> Bytes {
    // Plain data; it always encodes.
    let mut bytes = serde_json::to_vec(line).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// Answer `request` as NDJSON lines: its progress, then its report or error.
pub fn stream(registry: Registry, request: VerifyRequest) -> Response {
    let (lines, receiver) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    tokio::task::spawn_blocking(move || {
        let mut last: Option<Instant> = None;
        let mut progress = |p: VerifyProgress| {
            let due = last.is_none_or(|l| l.elapsed() >= PROGRESS_EVERY);
            if due || (p.walked == p.records && p.records > 0) {
                last = Some(Instant::now());
                let _ = lines.send(encode(&Line::Progress(p)));
            }
        };
        let answer = crate::service::verify_with_progress(
            &registry,
            &request.context,
            request.all,
            &mut progress,
        );
        let line = match answer {
            Ok(report) => Line::Report(report),
            Err(e) => {
                let e = ApiError::from(e);
                Line::Error(Failed {
                    status: e.status.as_u16(),
                    body: e.body,
                })
            }
        };
        let _ = lines.send(encode(&line));
    });
    let body = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|line| (Ok::<_, std::convert::Infallible>(line), receiver))
    });
    ([(header::CONTENT_TYPE, NDJSON)], Body::from_stream(body)).into_response()
}
