//! Server-sent events: a job's events (`id:` its position in the job's stream, so
//! `Last-Event-ID` is the `from` of a resumed stream) and a root's feed (`id:` the feed's
//! `EPOCH-SEQ`), each with keep-alive comments while idle. Another encoding of the same
//! streams the NDJSON reply carries.

use crate::daemon::conn::ConnHandle;
use crate::daemon::feed::{Feed, Limits, Message, Subscription};
use crate::facade::EventStream;
use axum::http::{header, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::BoxStream;
use futures::StreamExt;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a client waits before reconnecting, in milliseconds (the `retry:` field).
const RETRY_MS: u64 = 2000;

/// One event: `id`, `event`, `data` (one line of JSON).
fn frame(id: Option<&str>, event: &str, data: &str) -> Event {
    let frame = Event::default();
    let frame = match id {
        Some(id) => frame.id(id),
        None => frame,
    };
    frame.event(event).data(data)
}

/// `frames` as a `text/event-stream` reply, opened with the retry delay and kept alive
/// with a comment after `keepalive` with nothing else sent.
fn respond(frames: BoxStream<'static, Event>, keepalive: Duration) -> Response {
    let opening = Event::default()
        .retry(Duration::from_millis(RETRY_MS))
        .comment("advisord events");
    let events = futures::stream::once(async move { opening })
        .chain(frames)
        .map(Ok::<_, Infallible>);
    let keep_alive = KeepAlive::new()
        .interval(keepalive.max(Duration::from_millis(10)))
        .text("keep-alive");
    let mut response = Sse::new(events).keep_alive(keep_alive).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A job's events from position `from`, each with its position as `id`; ends after `done`.
pub fn job_stream(events: EventStream, from: usize, limits: Limits) -> Response {
    let frames = events
        .take_while(|e| futures::future::ready(e.is_ok()))
        .filter_map(|e| futures::future::ready(e.ok()))
        .enumerate()
        .map(move |(i, event)| {
            let data = serde_json::to_value(&event).unwrap_or_default();
            let name = data["event"].as_str().unwrap_or("event").to_string();
            frame(Some(&(from + i + 1).to_string()), &name, &data.to_string())
        })
        .boxed();
    respond(frames, limits.keepalive)
}

/// The feed for one subscriber. When it falls behind, it gets a last `dropped` event and
/// its connection is closed [`Limits::drop_grace`] later, read or not.
pub fn feed_stream(
    feed: Arc<Feed>,
    subscription: Subscription,
    conn: Option<ConnHandle>,
    stop: CancellationToken,
) -> Response {
    let limits = feed.limits();
    let ended = CancellationToken::new();
    if let Some(conn) = conn {
        let (dropped, ended) = (subscription.dropped(), ended.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = dropped.notified() => {
                    tokio::time::sleep(limits.drop_grace).await;
                    conn.0.cancel();
                }
                () = ended.cancelled() => {}
            }
        });
    }
    let guard = ended.drop_guard();
    let frames = futures::stream::unfold(
        (subscription, feed, guard, stop),
        |(mut sub, feed, guard, stop)| async move {
            let message = tokio::select! {
                message = sub.next() => message?,
                () = stop.cancelled() => return None, // the daemon is stopping
            };
            let frame = match message {
                Message::Item(item) => {
                    frame(Some(&feed.event_id(&item)), item.kind, &item.data)
                }
                Message::Reset => frame(
                    None,
                    "reset",
                    r#"{"reason":"the events after `Last-Event-ID` are no longer kept (or the daemon restarted); reload, then follow"}"#,
                ),
                Message::Dropped => frame(
                    None,
                    "dropped",
                    r#"{"reason":"this subscriber fell behind and was dropped; reload, then reconnect"}"#,
                ),
            };
            Some((frame, (sub, feed, guard, stop)))
        },
    )
    .boxed();
    respond(frames, limits.keepalive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use http_body_util::BodyExt;

    /// The bytes `event` is sent as.
    fn bytes_of(event: Event) -> Bytes {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let events = futures::stream::once(async move { Ok::<_, Infallible>(event) });
        runtime.block_on(async {
            Sse::new(events)
                .into_response()
                .into_body()
                .collect()
                .await
                .expect("the body")
                .to_bytes()
        })
    }

    #[test]
    fn a_frame_has_id_event_and_one_data_line() {
        assert_eq!(
            bytes_of(frame(Some("3"), "started", r#"{"a":1}"#)),
            Bytes::from("id: 3\nevent: started\ndata: {\"a\":1}\n\n")
        );
        assert_eq!(
            bytes_of(frame(None, "reset", "{}")),
            Bytes::from("event: reset\ndata: {}\n\n")
        );
    }
}
