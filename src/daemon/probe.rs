//! Asking a daemon on a socket whether it is there: `GET /api/v1/health` over one
//! HTTP/1.1 connection. Used by `advisord --detach` to know its child is serving.

use crate::protocol::{route_of, Health, VerbName};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::path::Path;
use std::time::Duration;
use tokio::net::UnixStream;

/// The daemon's health, if one answers on `socket` within `within`.
pub async fn health(socket: &Path, within: Duration) -> Option<Health> {
    tokio::time::timeout(within, ask(socket))
        .await
        .ok()
        .flatten()
}

async fn ask(socket: &Path) -> Option<Health> {
    let stream = UnixStream::connect(socket).await.ok()?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    let driver = tokio::spawn(connection);
    let request = hyper::Request::get(route_of(VerbName::Health).path)
        .header(hyper::header::HOST, "advisord")
        .body(Empty::<bytes::Bytes>::new())
        .ok()?;
    let response = sender.send_request(request).await.ok()?;
    let ok = response.status().is_success();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    driver.abort();
    if !ok {
        return None;
    }
    serde_json::from_slice(&body).ok()
}
