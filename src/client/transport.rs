//! The bytes on the socket: one HTTP/1.1 request per fresh connection to the daemon's
//! unix socket, the socket and its peer checked as the user's own before a byte is
//! written, every exchange bounded, and a job's NDJSON event stream read line by line.
//!
//! One connection per request: a unix socket connects in microseconds, and a fresh
//! connection per call keeps a long event stream from blocking a cancellation.

use super::Client;
use crate::error::{Error, Result};
use crate::ownership;
use crate::protocol::{Event, EventsRequest, HttpCall, Verb, VerbName};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::path::Path;
use std::time::Duration;
use tokio::net::UnixStream;

/// How long one request (not an event stream) may take before the daemon is given up on.
///
/// No request waits on an advisor (a consultation is answered once it is journaled), so a
/// daemon that takes longer is stuck or starved, and saying so beats hanging.
pub const REQUEST_BOUND: Duration = Duration::from_secs(10);

/// The bound of a cancellation, which the daemon answers once the job has stopped (at
/// most 5 s) or with 202 after that.
pub const CANCEL_REQUEST_BOUND: Duration = Duration::from_secs(15);

/// What to do when no daemon answers and none may be started.
pub fn start_hint(socket: &Path) -> String {
    format!(
        "start one with `advisord --detach --socket {}` (or drop `--no-autostart`); \
         `--no-daemon` runs the network-free verbs in-process",
        socket.display()
    )
}

impl Client {
    pub(super) fn unreachable(&self, reason: String, hint: &str) -> Error {
        Error::Unreachable {
            socket: self.socket.clone(),
            reason,
            hint: hint.to_string(),
        }
    }

    fn not_ours(&self, reason: ownership::NotOurs) -> Error {
        Error::NotOurs {
            socket: self.socket.clone(),
            reason,
        }
    }

    /// Send one call on a fresh connection (or on `connected`, the client's first) and
    /// return the response head and body.
    async fn send(
        &self,
        call: &HttpCall,
        connected: Option<UnixStream>,
    ) -> Result<Response<Incoming>> {
        self.send_accepting(call, connected, None).await
    }

    /// [`Client::send`], asking for the reply in `accept` when given.
    pub(super) async fn send_accepting(
        &self,
        call: &HttpCall,
        connected: Option<UnixStream>,
        accept: Option<&'static str>,
    ) -> Result<Response<Incoming>> {
        let me = ownership::me();
        ownership::check_socket_path(&self.socket, me).map_err(|reason| self.not_ours(reason))?;
        let stream = match connected {
            Some(stream) => stream,
            None => UnixStream::connect(&self.socket)
                .await
                .map_err(|e| self.unreachable(connect_reason(&e), &start_hint(&self.socket)))?,
        };
        // Checked before a byte is written: the request may carry credential values.
        ownership::check_peer(&stream, me).map_err(|reason| self.not_ours(reason))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.lost(&e))?;
        // The connection is driven beside the request; it ends with the response body.
        tokio::spawn(connection);
        let mut uri = call.path();
        if !call.query.is_empty() {
            uri = format!("{uri}?{}", call.query.encode());
        }
        let mut request = hyper::Request::builder()
            .method(call.method())
            .uri(uri)
            .header(hyper::header::HOST, "advisord");
        if call.body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        if let Some(accept) = accept {
            request = request.header(hyper::header::ACCEPT, accept);
        }
        let body = match &call.body {
            Some(body) => serde_json::to_vec(body)
                .map_err(|e| Error::Protocol(format!("the request could not be encoded: {e}")))?,
            None => Vec::new(),
        };
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Protocol(format!("the request could not be built: {e}")))?;
        // Handed to the connection, queued before anything spawned after it.
        let response = sender.send_request(request);
        if !CPU_FEATURES.is_completed() {
            tokio::spawn(async { CPU_FEATURES.call_once(read_cpu_features) });
        }
        response.await.map_err(|e| self.lost(&e))
    }

    /// The connection broke: the daemon went away (or refused this peer).
    pub(super) fn lost(&self, e: &hyper::Error) -> Error {
        self.unreachable(
            format!("the connection failed ({e}); the daemon may have stopped or refused you"),
            "check `advisord` is running as your user, then retry",
        )
    }

    /// Send `call` and read its whole reply, within the call's bound.
    pub(super) async fn exchange(&self, call: &HttpCall) -> Result<(StatusCode, Bytes)> {
        let connected = self.first_connection().await?;
        let exchange = async {
            let response = self.send(call, connected).await?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| self.lost(&e))?
                .to_bytes();
            Ok::<_, Error>((status, bytes))
        };
        tokio::time::timeout(self.bound_of(call), exchange)
            .await
            .map_err(|_| self.stuck(call))?
    }

    /// How long `call` may take: a cancellation waits for its job to stop.
    fn bound_of(&self, call: &HttpCall) -> Duration {
        if call.verb == VerbName::Cancel {
            self.bound.max(CANCEL_REQUEST_BOUND)
        } else {
            self.bound
        }
    }

    /// The daemon accepted `call` but did not answer within the bound.
    pub(super) fn stuck(&self, call: &HttpCall) -> Error {
        self.unreachable(
            format!(
                "it accepted `{} {}` but did not answer within {} s",
                call.method(),
                call.path(),
                self.bound_of(call).as_secs_f64()
            ),
            &format!(
                "the daemon may be stuck: see its log (`advisor-consult daemon logs`), stop it \
                 (`advisor-consult --socket {} daemon stop`), or use `--no-daemon` for the \
                 network-free verbs",
                self.socket.display()
            ),
        )
    }

    /// A job's events as NDJSON, read one [`Event`] at a time.
    pub async fn event_reader(&self, request: &EventsRequest) -> Result<EventReader> {
        let call = request.call();
        let connected = self.first_connection().await?;
        // Only the head is bounded: the stream itself lasts as long as the job.
        let response = tokio::time::timeout(self.bound, self.send(&call, connected))
            .await
            .map_err(|_| self.stuck(&call))??;
        let status = response.status();
        if !status.is_success() {
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| self.lost(&e))?
                .to_bytes();
            return Err(self.error_reply(status, &bytes));
        }
        Ok(EventReader {
            client: self.clone(),
            body: response.into_body(),
            buffer: Vec::new(),
        })
    }
}

/// A job's event stream (NDJSON), read one [`Event`] at a time.
pub struct EventReader {
    client: Client,
    body: Incoming,
    buffer: Vec<u8>,
}

impl EventReader {
    /// The reader of the NDJSON `body` of a reply to `client`.
    pub(super) fn of(client: Client, body: Incoming) -> EventReader {
        EventReader {
            client,
            body,
            buffer: Vec::new(),
        }
    }

    /// The next event; `None` when the stream ended (after `done`, or the daemon stopped).
    pub async fn next(&mut self) -> Result<Option<Event>> {
        let Some(line) = self.line().await? else {
            return Ok(None);
        };
        serde_json::from_slice(&line).map(Some).map_err(|e| {
            Error::Protocol(format!(
                "an event line is not an event ({e}): {}",
                String::from_utf8_lossy(&line[..line.len().min(300)])
            ))
        })
    }

    /// The next line that is not blank, without its end; `None` when the stream ended.
    pub(super) async fn line(&mut self) -> Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return Ok(Some(line.to_vec()));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(self.client.lost(&e)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// Whether [`read_cpu_features`] ran: the first request of a process spawns it, the
/// others nothing.
static CPU_FEATURES: std::sync::Once = std::sync::Once::new();

/// Read which instructions this CPU has, once per process, while the daemon works on the
/// request just sent: the parser of the reply (httparse) asks on its first use, and each
/// `CPUID` it takes traps to the hypervisor on a virtual machine (36 to 53 µs in all on the
/// project's test machine), which would otherwise fall between the reply's arrival and
/// its first line printed.
fn read_cpu_features() {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        let _ = std::arch::is_x86_feature_detected!("sse4.2");
    }
}

/// Why connecting failed, in words a user can act on.
pub(super) fn connect_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "there is no socket there".to_string(),
        std::io::ErrorKind::ConnectionRefused => {
            "nobody listens on it (a stale socket left by a daemon that stopped)".to_string()
        }
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (the socket belongs to another user)".to_string()
        }
        _ => format!("cannot connect ({e})"),
    }
}

/// `text` percent-encoded for a query string (everything but RFC 3986 unreserved).
#[cfg(test)]
pub(super) fn percent_encode(text: &str) -> String {
    crate::protocol::query_value(text)
}
