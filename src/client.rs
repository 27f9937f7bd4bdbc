//! The client side of the daemon's socket: HTTP/1.1 with JSON bodies over a unix socket.
//! [`Client`] implements the façade ([`Api`]) through its one [`Api::call`]: each verb is
//! sent as the one table (`crate::protocol::ROUTES`) says, by one generic path
//! ([`Client::send_verb`]), and its JSON reply read back into the verb's response type.
//! The bytes on the socket are `transport.rs`; starting a daemon when nobody answers is
//! `autostart.rs`.
//!
//! Error replies come back as [`Error::Remote`] with the daemon's code and HTTP status, so
//! exit codes are the ones `--no-daemon` gives (a writer refusal is 422 and keeps its
//! reason code: exit 3, printed the same way).

mod autostart;
mod consult_stream;
mod transport;
mod verify_wait;

pub use autostart::{
    answers, autostart_idle_exit, daemon_executable, ensure_daemon, AUTOSTART_IDLE_EXIT_S,
    AUTOSTART_WAIT, DAEMON_EXECUTABLE,
};
pub use transport::{start_hint, EventReader, CANCEL_REQUEST_BOUND, REQUEST_BOUND};

use crate::error::{Error, Result};
use crate::facade::{Answer, Api, EventStream};
use crate::protocol::{codes, Call, Carrier, ErrorBody, EventsRequest, Request, Response};
use hyper::StatusCode;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[cfg(test)]
use crate::protocol::{Event, HealthRequest};
#[cfg(test)]
use transport::percent_encode;

/// A connection-per-request client of the daemon on one socket.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    bound: Duration,
    /// For a client made by [`Client::connect`]: a daemon is made sure of (started when
    /// nobody answers and autostart allows) when its first request finds nobody, instead
    /// of by a connection of its own before it.
    first_use: Option<std::sync::Arc<autostart::FirstUse>>,
}

impl Client {
    /// A client of the daemon on `socket` (nothing is connected yet).
    pub fn new(socket: PathBuf) -> Client {
        Client {
            socket,
            bound: REQUEST_BOUND,
            first_use: None,
        }
    }

    /// The same client giving up on a request after `bound` instead of [`REQUEST_BOUND`].
    pub fn with_request_bound(mut self, bound: Duration) -> Client {
        self.bound = bound;
        self
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// One verb whose reply is its JSON response (or an error body): the one path every
    /// verb with one answer takes. What its context carries is its request type's rule
    /// (credential values only for a verb that consults), never this method's.
    pub async fn send_verb<V: Call>(&self, request: &V) -> Result<V::Response> {
        let call = request.call();
        if V::NAME == crate::protocol::VerbName::Verify {
            // Patient while the daemon reports progress (`verify_wait`).
            return self.verify_waiting(&call).await;
        }
        let (status, bytes) = self.exchange(&call).await?;
        if !status.is_success() {
            return Err(self.error_reply(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::Protocol(format!(
                "`{} {}` answered {status} with a body that is not the expected JSON ({e})",
                call.method(),
                call.path()
            ))
        })
    }

    /// An error reply turned back into the error the verb would have given in-process.
    pub(crate) fn error_reply(&self, status: StatusCode, bytes: &[u8]) -> Error {
        let Ok(body) = serde_json::from_slice::<ErrorBody>(bytes) else {
            return Error::Protocol(format!(
                "the daemon answered {status} without an error body: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            ));
        };
        if body.error == codes::SHUTTING_DOWN {
            return self.unreachable(body.message, "retry in a moment: a new daemon is started");
        }
        let code = match (body.error.as_str(), body.reason) {
            (codes::REFUSED, Some(reason)) => reason,
            (_, _) => body.error,
        };
        Error::Remote {
            code,
            message: body.message,
            status: status.as_u16(),
        }
    }
}

impl Carrier for Client {
    type Error = Error;

    async fn carry<V: Call>(&self, request: V) -> Result<V::Response> {
        self.send_verb(&request).await
    }
}

/// Every verb is one request to the daemon; its JSON reply is read back into the same
/// type `--no-daemon` computes, so both print alike.
impl Api for Client {
    fn call(&self, request: Request) -> Answer<'_, Response> {
        Box::pin(request.carry(self))
    }

    fn events(&self, request: EventsRequest) -> Answer<'_, EventStream> {
        Box::pin(async move { Ok(event_stream(self.event_reader(&request).await?)) })
    }

    fn consult_following(
        &self,
        request: crate::protocol::ConsultRequest,
    ) -> Answer<'_, (crate::protocol::Job, Option<EventStream>)> {
        Box::pin(async move {
            let (job, reader) = self.consult_streamed(&request).await?;
            Ok((job, reader.map(event_stream)))
        })
    }
}

/// The events `reader` reads, as the façade's stream.
fn event_stream(reader: EventReader) -> EventStream {
    let stream = futures::stream::unfold(reader, |mut reader| async move {
        match reader.next().await {
            Ok(Some(event)) => Some((Ok(event), reader)),
            Ok(None) => None,
            Err(e) => Some((Err(e), reader)),
        }
    });
    Box::pin(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A current-thread runtime for a test's async half.
    fn test_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a test runtime")
    }

    #[test]
    fn query_values_are_percent_encoded() {
        let check = |input: &str, expected: &str| assert_eq!(percent_encode(input), expected);
        check("01JABC", "01JABC");
        check("/tmp/a b/c", "/tmp/a%20b/c");
        check("a&b=c?d#e", "a%26b%3Dc%3Fd%23e");
        check("é", "%C3%A9");
        check("x-y_z.~", "x-y_z.~");
    }

    fn client() -> Client {
        Client::new(PathBuf::from("/nowhere/advisord.sock"))
    }

    fn exit_of(err: Error) -> (i32, String) {
        let code = err.exit_code();
        (code, err.to_string())
    }

    #[test]
    fn error_replies_map_back_to_the_in_process_errors() {
        let check = |status: u16, body: &str, exit: i32, text: &str| {
            let err = client().error_reply(StatusCode::from_u16(status).unwrap(), body.as_bytes());
            let (code, shown) = exit_of(err);
            assert_eq!(code, exit, "{status} {body}: {shown}");
            assert!(shown.contains(text), "{status} {body}: {shown}");
        };
        check(
            422,
            r#"{"error":"refused","reason":"unresolved_disagreement","message":"settle it"}"#,
            3,
            "settle it",
        );
        check(
            400,
            r#"{"error":"usage","message":"bad flag"}"#,
            2,
            "bad flag",
        );
        check(
            404,
            r#"{"error":"unknown_job","message":"no job `X`"}"#,
            2,
            "no job",
        );
        check(
            409,
            r#"{"error":"job_finished","message":"already ended"}"#,
            2,
            "ended",
        );
        check(
            500,
            r#"{"error":"store_failed","message":"disk full"}"#,
            1,
            "disk full",
        );
        check(
            503,
            r#"{"error":"shutting_down","message":"going away"}"#,
            4,
            "going away",
        );
        check(502, "<html>proxy</html>", 1, "without an error body");
    }

    #[test]
    fn a_refusal_keeps_its_reason_code() {
        let err = client().error_reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            br#"{"error":"refused","reason":"invalid_task","message":"bad task"}"#,
        );
        assert_eq!(err.refusal(), Some(("invalid_task", "bad task")));
        assert_eq!(err.code(), "invalid_task");
    }

    #[test]
    fn no_autostart_without_a_daemon_says_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("none.sock");
        let err = ensure_daemon(&socket, false).expect_err("nobody answers");
        let (code, shown) = exit_of(err);
        assert_eq!(code, 4);
        for fragment in [
            socket.display().to_string().as_str(),
            "there is no socket there",
            "--no-autostart",
            "advisord --detach",
            "--no-daemon",
        ] {
            assert!(shown.contains(fragment), "{fragment}: {shown}");
        }
    }

    #[test]
    fn a_stale_socket_is_told_apart_from_a_missing_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
        assert!(socket.exists());
        let reason = answers(&socket).expect_err("nobody listens");
        assert!(reason.contains("stale socket"), "{reason}");
        let listener =
            std::os::unix::net::UnixListener::bind(dir.path().join("live.sock")).expect("bind");
        assert_eq!(answers(&dir.path().join("live.sock")), Ok(()));
        drop(listener);
    }

    #[test]
    fn a_daemon_that_accepts_but_never_answers_is_given_up_on() {
        let runtime = test_runtime();
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("stuck.sock");
        runtime.block_on(async {
            let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
            let _held = tokio::spawn(async move {
                let (stream, _) = listener.accept().await.expect("accept");
                std::future::pending::<()>().await;
                drop(stream);
            });
            let err = Client::new(socket.clone())
                .with_request_bound(Duration::from_millis(200))
                .health(HealthRequest::default())
                .await
                .expect_err("no answer");
            let (code, shown) = exit_of(err);
            assert_eq!(code, 4);
            assert!(shown.contains("did not answer within 0.2 s"), "{shown}");
        });
    }

    /// A server on `socket` that answers every request with a 400 error body and hands
    /// each request's bytes (head and body) to the returned receiver.
    async fn capturing_server(socket: &Path) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::UnixListener::bind(socket).expect("bind");
        let (sent, received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut bytes = Vec::new();
                let mut buffer = [0u8; 8192];
                // The head, then as many body bytes as `content-length` says.
                loop {
                    let n = stream.read(&mut buffer).await.unwrap_or(0);
                    bytes.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&bytes).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .filter_map(|l| l.split_once(':'))
                            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if bytes.len() >= end + 4 + length {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let _ = sent.send(String::from_utf8_lossy(&bytes).to_string());
                let body = r#"{"error":"usage","message":"captured"}"#;
                let reply = format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        received
    }

    #[test]
    fn only_a_consultation_sends_credential_values() {
        use crate::protocol::{
            AdvisorsRequest, CatalogueRequest, CheckRequest, ConsultRequest, ExplainRequest,
            PlanRequest, RecordRequest, RequestContext, SpendRequest, StatusRequest, TasksRequest,
            TreeRequest, VerifyRequest,
        };
        const SECRET: &str = "sk-never-sent-but-to-consult";
        let runtime = test_runtime();
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("capture.sock");
        runtime.block_on(async {
            let mut requests = capturing_server(&socket).await;
            let client = Client::new(socket.clone());
            let mut context: RequestContext =
                serde_json::from_value(serde_json::json!({"root": "/r"})).unwrap();
            context.credentials.insert("MY_KEY".into(), SECRET.into());
            let c = || context.clone();
            // Every verb whose request has a context, each as its surfaces build it.
            let _ = client.advisors(AdvisorsRequest { context: c() }).await;
            let _ = client
                .plan(PlanRequest {
                    context: c(),
                    materiality: crate::core::records::Materiality::High,
                    confidence: Default::default(),
                    capabilities: vec![],
                })
                .await;
            let _ = client
                .record(RecordRequest {
                    context: c(),
                    record: serde_json::json!({"kind": "assessment"}),
                    dry_run: false,
                })
                .await;
            let _ = client.status(StatusRequest { context: c() }).await;
            let _ = client.tasks(TasksRequest { context: c() }).await;
            let _ = client.spend(SpendRequest { context: c() }).await;
            let _ = client
                .explain(ExplainRequest {
                    context: c(),
                    id: "R1".into(),
                    downstream: false,
                })
                .await;
            let _ = client
                .tree(TreeRequest {
                    context: c(),
                    depth: None,
                    show_superseded: false,
                })
                .await;
            let _ = client
                .check(CheckRequest {
                    context: c(),
                    path: None,
                })
                .await;
            let _ = client
                .verify(VerifyRequest {
                    context: c(),
                    all: false,
                })
                .await;
            let read_only = 10;
            for _ in 0..read_only {
                let request = requests.recv().await.expect("a request");
                assert!(!request.contains(SECRET), "a value was sent: {request}");
                assert!(request.contains("MY_KEY"), "its name is sent: {request}");
            }
            // The catalogue is read in this process: nothing is sent at all.
            let _ = client.catalogue(CatalogueRequest { context: c() }).await;
            let _ = client
                .consult(ConsultRequest {
                    context: c(),
                    assessment: "A1".into(),
                    question: None,
                    prior_opinion: None,
                    timeout: None,
                })
                .await;
            let consult = requests.recv().await.expect("the consultation");
            assert!(
                consult.starts_with("POST /api/v1/consultations"),
                "{consult}"
            );
            assert!(
                consult.contains(SECRET),
                "a consultation carries the values"
            );
        });
    }

    #[test]
    fn a_client_checks_for_its_daemon_with_its_first_request_not_before_it() {
        let runtime = test_runtime();
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("first.sock");
        runtime.block_on(async {
            // Nobody answers: making the client connects nothing; its first request says
            // what `--no-autostart` always said (exit 4, how to start one).
            let client = Client::connect(socket.clone(), false)
                .await
                .expect("no connection is made yet");
            // Every request until one connects says so (a verb may pass over a failed
            // lookup, as `wait` does, and still say why on its next request).
            for _ in 0..2 {
                let (code, shown) = exit_of(
                    client
                        .health(HealthRequest::default())
                        .await
                        .expect_err("nobody answers"),
                );
                assert_eq!(code, 4, "{shown}");
                for fragment in [
                    "there is no socket there",
                    "`--no-autostart` is set",
                    "advisord --detach",
                ] {
                    assert!(shown.contains(fragment), "{fragment}: {shown}");
                }
            }
            // Somebody answers: each request is one connection, the first included (no
            // connection of its own to check the daemon first).
            let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
            let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counted = accepted.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                while let Ok((mut stream, _)) = listener.accept().await {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut request = [0u8; 4096];
                    let _ = stream.read(&mut request).await;
                    let body = r#"{"error":"usage","message":"counted"}"#;
                    let reply = format!(
                        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                }
            });
            let client = Client::connect(socket.clone(), false)
                .await
                .expect("client");
            for sent in 1..=2 {
                let err = client
                    .health(HealthRequest::default())
                    .await
                    .expect_err("the server answers 400");
                assert!(err.to_string().contains("counted"), "{err}");
                assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), sent);
            }
        });
    }

    #[test]
    fn events_are_read_line_by_line_across_frames() {
        let runtime = test_runtime();
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("events.sock");
        runtime.block_on(async {
            let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
            // A server that writes two events split in the middle of a line.
            let server = tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let (mut stream, _) = listener.accept().await.expect("accept");
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await.expect("read");
                let first =
                    r#"{"event":"started","job":"J","advisor":"a","at":"2026-01-01T00:00:00Z"}"#;
                let second =
                    r#"{"event":"started","job":"J","advisor":"b","at":"2026-01-01T00:00:01Z"}"#;
                let body = format!("{first}\n\n{second}\n");
                let (head, tail) = body.split_at(20);
                let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n\
                     transfer-encoding: chunked\r\n\r\n{}{}0\r\n\r\n",
                    chunk(head),
                    chunk(tail)
                );
                stream.write_all(reply.as_bytes()).await.expect("write");
            });
            let client = Client::new(socket.clone());
            let mut events = client
                .event_reader(&EventsRequest {
                    id: "J".into(),
                    from: 0,
                })
                .await
                .expect("stream");
            let mut advisors = Vec::new();
            while let Some(event) = events.next().await.expect("an event") {
                match event {
                    Event::Started { advisor, .. } => advisors.push(advisor),
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert_eq!(advisors, ["a", "b"]);
            server.await.expect("server");
        });
    }
}
