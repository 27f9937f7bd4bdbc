//! The client side of the daemon's socket: HTTP/1.1 with JSON bodies over a unix socket.
//! [`Client`] implements the façade ([`Api`]) by sending each verb as its route of
//! `crate::protocol::ROUTES` says; it is async all the way, so a server can call it.
//! Starting a daemon when nobody answers (autostart) is here too.
//!
//! Error replies come back as [`Error::Remote`] with the daemon's code and HTTP status, so
//! exit codes are the ones `--no-daemon` gives (a writer refusal is 422 and keeps its
//! reason code: exit 3, printed the same way).
//!
//! One connection per request: a unix socket connects in microseconds, and a fresh
//! connection per call keeps a long event stream from blocking a cancellation.

use crate::check::CheckReport;
use crate::core::chain::VerifyReport;
use crate::core::cost::SpendView;
use crate::core::records::{Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::ExplainView;
use crate::core::views::status::StatusView;
use crate::core::views::tree::TreeView;
use crate::error::{Error, Result};
use crate::facade::{Answer, Api, EventStream};
use crate::ownership;
use crate::paths;
use crate::protocol::{
    codes, AdvisorsRequest, CancelRequest, CheckRequest, ConsultRequest, ErrorBody, Event,
    EventsRequest, ExplainRequest, Health, HealthRequest, HttpCall, Job, JobList, JobRequest,
    JobsRequest, PlanRequest, RecordRequest, ReviewAnswerRequest, ReviewAnswered, ReviewList,
    ReviewsRequest, SpendRequest, StatusRequest, TreeRequest, Verb, VerbName, VerifyRequest,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;

/// The daemon's executable, looked up in the directory of the running one.
pub const DAEMON_EXECUTABLE: &str = "advisord";

/// How long autostart waits for a daemon it started to answer on the socket.
pub const AUTOSTART_WAIT: Duration = Duration::from_secs(5);

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

/// A connection-per-request client of the daemon on one socket.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    bound: Duration,
}

impl Client {
    /// A client of the daemon on `socket` (nothing is connected yet).
    pub fn new(socket: PathBuf) -> Client {
        Client {
            socket,
            bound: REQUEST_BOUND,
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

    fn unreachable(&self, reason: String, hint: &str) -> Error {
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

    /// Send one call on a fresh connection and return the response head and body.
    async fn send(&self, call: &HttpCall) -> Result<Response<Incoming>> {
        let me = ownership::me();
        ownership::check_socket_path(&self.socket, me).map_err(|reason| self.not_ours(reason))?;
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| self.unreachable(connect_reason(&e), &start_hint(&self.socket)))?;
        // Checked before a byte is written: the request may carry credential values.
        ownership::check_peer(&stream, me).map_err(|reason| self.not_ours(reason))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.lost(&e))?;
        // The connection is driven beside the request; it ends with the response body.
        tokio::spawn(connection);
        let mut uri = call.path();
        if !call.query.is_empty() {
            let pairs: Vec<String> = call
                .query
                .iter()
                .map(|(k, v)| format!("{k}={}", percent_encode(v)))
                .collect();
            uri = format!("{uri}?{}", pairs.join("&"));
        }
        let mut request = hyper::Request::builder()
            .method(call.method())
            .uri(uri)
            .header(hyper::header::HOST, "advisord");
        if call.body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let body = match &call.body {
            Some(body) => serde_json::to_vec(body)
                .map_err(|e| Error::Protocol(format!("the request could not be encoded: {e}")))?,
            None => Vec::new(),
        };
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Protocol(format!("the request could not be built: {e}")))?;
        sender
            .send_request(request)
            .await
            .map_err(|e| self.lost(&e))
    }

    /// The connection broke: the daemon went away (or refused this peer).
    fn lost(&self, e: &hyper::Error) -> Error {
        self.unreachable(
            format!("the connection failed ({e}); the daemon may have stopped or refused you"),
            "check `advisord` is running as your user, then retry",
        )
    }

    /// One verb whose reply is its JSON response (or an error body).
    pub async fn call<V: Verb>(&self, request: &V) -> Result<V::Response>
    where
        V::Response: DeserializeOwned,
    {
        let call = request.call();
        let exchange = async {
            let response = self.send(&call).await?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| self.lost(&e))?
                .to_bytes();
            Ok::<_, Error>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.bound_of(&call), exchange)
            .await
            .map_err(|_| self.stuck(&call))??;
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

    /// How long `call` may take: a cancellation waits for its job to stop.
    fn bound_of(&self, call: &HttpCall) -> Duration {
        if call.verb == VerbName::Cancel {
            self.bound.max(CANCEL_REQUEST_BOUND)
        } else {
            self.bound
        }
    }

    /// The daemon accepted `call` but did not answer within the bound.
    fn stuck(&self, call: &HttpCall) -> Error {
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

    /// An error reply turned back into the error the verb would have given in-process.
    fn error_reply(&self, status: StatusCode, bytes: &[u8]) -> Error {
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

    /// A job's events as NDJSON, read one [`Event`] at a time.
    pub async fn event_reader(&self, request: &EventsRequest) -> Result<EventReader> {
        let call = request.call();
        // Only the head is bounded: the stream itself lasts as long as the job.
        let response = tokio::time::timeout(self.bound, self.send(&call))
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

/// Every verb is one request to the daemon; its JSON reply is read back into the same
/// type `--no-daemon` computes, so both print alike. Credential values travel only with a
/// consultation: the request types hold that rule (`crate::protocol::RequestContext`), not
/// these methods.
impl Api for Client {
    fn health(&self, request: HealthRequest) -> Answer<'_, Health> {
        Box::pin(async move { self.call(&request).await })
    }

    fn advisors(&self, request: AdvisorsRequest) -> Answer<'_, AdvisorsView> {
        Box::pin(async move { self.call(&request).await })
    }

    fn plan(&self, request: PlanRequest) -> Answer<'_, Plan> {
        Box::pin(async move { self.call(&request).await })
    }

    fn record(&self, request: RecordRequest) -> Answer<'_, Record> {
        Box::pin(async move { self.call(&request).await })
    }

    fn status(&self, request: StatusRequest) -> Answer<'_, StatusView> {
        Box::pin(async move { self.call(&request).await })
    }

    fn explain(&self, request: ExplainRequest) -> Answer<'_, ExplainView> {
        Box::pin(async move { self.call(&request).await })
    }

    fn tree(&self, request: TreeRequest) -> Answer<'_, TreeView> {
        Box::pin(async move { self.call(&request).await })
    }

    fn tasks(
        &self,
        request: crate::protocol::TasksRequest,
    ) -> Answer<'_, crate::protocol::TaskList> {
        Box::pin(async move { self.call(&request).await })
    }

    fn spend(&self, request: SpendRequest) -> Answer<'_, SpendView> {
        Box::pin(async move { self.call(&request).await })
    }

    fn check(&self, request: CheckRequest) -> Answer<'_, CheckReport> {
        Box::pin(async move { self.call(&request).await })
    }

    fn verify(&self, request: VerifyRequest) -> Answer<'_, VerifyReport> {
        Box::pin(async move { self.call(&request).await })
    }

    fn consult(&self, request: ConsultRequest) -> Answer<'_, Job> {
        Box::pin(async move { self.call(&request).await })
    }

    fn jobs(&self, request: JobsRequest) -> Answer<'_, JobList> {
        Box::pin(async move { self.call(&request).await })
    }

    fn job(&self, request: JobRequest) -> Answer<'_, Job> {
        Box::pin(async move { self.call(&request).await })
    }

    fn cancel(&self, request: CancelRequest) -> Answer<'_, Job> {
        Box::pin(async move { self.call(&request).await })
    }

    fn reviews(&self, request: ReviewsRequest) -> Answer<'_, ReviewList> {
        Box::pin(async move { self.call(&request).await })
    }

    fn answer_review(&self, request: ReviewAnswerRequest) -> Answer<'_, ReviewAnswered> {
        Box::pin(async move { self.call(&request).await })
    }

    fn events(&self, request: EventsRequest) -> Answer<'_, EventStream> {
        Box::pin(async move {
            let reader = self.event_reader(&request).await?;
            let stream = futures::stream::unfold(reader, |mut reader| async move {
                match reader.next().await {
                    Ok(Some(event)) => Some((Ok(event), reader)),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), reader)),
                }
            });
            Ok(Box::pin(stream) as EventStream)
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
    /// The next event; `None` when the stream ended (after `done`, or the daemon stopped).
    pub async fn next(&mut self) -> Result<Option<Event>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return serde_json::from_slice(line).map(Some).map_err(|e| {
                    Error::Protocol(format!(
                        "an event line is not an event ({e}): {}",
                        String::from_utf8_lossy(&line[..line.len().min(300)])
                    ))
                });
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

/// Why connecting failed, in words a user can act on.
fn connect_reason(e: &std::io::Error) -> String {
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
fn percent_encode(text: &str) -> String {
    crate::protocol::query_value(text)
}

/// Whether something accepts connections on `socket`; the reason when not.
pub fn answers(socket: &Path) -> Result<(), String> {
    std::os::unix::net::UnixStream::connect(socket)
        .map(drop)
        .map_err(|e| connect_reason(&e))
}

/// Make sure a daemon answers on `socket`: it already does, or (when `autostart`) one is
/// started from the `advisord` beside this executable and waited for, within
/// [`AUTOSTART_WAIT`]. Exit 4 (unreachable) otherwise, with what to do.
pub fn ensure_daemon(socket: &Path, autostart: bool) -> Result<()> {
    // A socket, or a directory for one, that is someone else's is never used and never
    // autostarted into.
    let not_ours = |reason| Error::NotOurs {
        socket: socket.to_path_buf(),
        reason,
    };
    let me = ownership::me();
    ownership::check_socket_path(socket, me).map_err(not_ours)?;
    let reason = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(stream) => return ownership::check_peer(&stream, me).map_err(not_ours),
        Err(e) => connect_reason(&e),
    };
    let unreachable = |reason: String, hint: &str| Error::Unreachable {
        socket: socket.to_path_buf(),
        reason,
        hint: hint.to_string(),
    };
    if !autostart {
        return Err(unreachable(
            format!("{reason}, and `--no-autostart` is set"),
            &start_hint(socket),
        ));
    }
    let daemon = daemon_executable().map_err(|reason| {
        unreachable(
            reason,
            "install `advisord` beside `advisor-consult`, or start a daemon yourself \
             (`advisord --detach`); `--no-daemon` runs the network-free verbs in-process",
        )
    })?;
    start_daemon(&daemon, socket).map_err(|reason| {
        let hint = format!(
            "run `{} --socket {}` yourself to see why it does not serve{}; \
             `--no-daemon` runs the network-free verbs in-process",
            daemon.display(),
            socket.display(),
            paths::log_path()
                .map(|log| format!(" (a detached daemon logs to `{}`)", log.display()))
                .unwrap_or_default()
        );
        unreachable(reason, &hint)
    })
}

/// The `advisord` in the directory of the running executable.
pub fn daemon_executable() -> Result<PathBuf, String> {
    let me = std::env::current_exe()
        .map_err(|e| format!("cannot find this executable to find `advisord` beside it ({e})"))?;
    let dir = me.parent().unwrap_or(Path::new("/"));
    let daemon = dir.join(DAEMON_EXECUTABLE);
    if daemon.is_file() {
        Ok(daemon)
    } else {
        Err(format!(
            "cannot start a daemon: `{}` does not exist",
            daemon.display()
        ))
    }
}

/// Start `daemon --socket SOCKET --detach` in a process group of its own (so a Ctrl-C
/// meant for this client never reaches it) and wait until the socket answers.
/// How long a daemon the client starts stays up with nothing to do, in seconds:
/// `ADVISORD_IDLE_EXIT`, else [`AUTOSTART_IDLE_EXIT_S`]. A daemon started by hand or by
/// systemd gets no `--idle-exit` and stays up.
pub fn autostart_idle_exit() -> String {
    std::env::var("ADVISORD_IDLE_EXIT")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| AUTOSTART_IDLE_EXIT_S.to_string())
}

/// The idle period of an autostarted daemon when `ADVISORD_IDLE_EXIT` is unset: 30 minutes.
pub const AUTOSTART_IDLE_EXIT_S: u64 = 30 * 60;

fn start_daemon(daemon: &Path, socket: &Path) -> Result<(), String> {
    let mut child = Command::new(daemon)
        .arg("--socket")
        .arg(socket)
        .arg("--idle-exit")
        .arg(autostart_idle_exit())
        .arg("--detach")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start `{}` ({e})", daemon.display()))?;
    let started = Instant::now();
    loop {
        if answers(socket).is_ok() {
            eprintln!("advisor-consult: {}", started_note(socket));
            reap_in_background(child);
            return Ok(());
        }
        match child.try_wait() {
            Ok(Some(status)) if !status.success() => {
                // Another client may have started one at the same moment: it answers now.
                if answers(socket).is_ok() {
                    return Ok(());
                }
                let said = last_line(child.stderr.take());
                return Err(format!(
                    "`{} --detach` exited with status {}{}",
                    daemon.display(),
                    status.code().unwrap_or(-1),
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(": {said}")
                    }
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("cannot watch the daemon being started ({e})")),
        }
        if started.elapsed() >= AUTOSTART_WAIT {
            // Only the `--detach` parent is ours to stop; a daemon it started may still
            // come up and will then answer the next call.
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "a daemon was started (`{} --detach`) but did not answer within {} s",
                daemon.display(),
                AUTOSTART_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What to tell the user once a daemon was started: where it serves and where it logs
/// (the data directory it resolves from the same environment as ours).
fn started_note(socket: &Path) -> String {
    match paths::log_path() {
        Some(log) => format!(
            "started advisord on `{}` (log `{}`)",
            socket.display(),
            log.display()
        ),
        None => format!("started advisord on `{}`", socket.display()),
    }
}

/// Wait for the `--detach` parent on a thread of its own, so it leaves no zombie.
fn reap_in_background(mut child: Child) {
    std::thread::spawn(move || {
        let _ = child.wait();
    });
}

/// The last non-empty line of a pipe whose writer has exited.
fn last_line(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(64 * 1024).read_to_string(&mut text);
    }
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string()
}

impl Client {
    /// The client of the daemon on `socket` (made absolute), started first when nobody
    /// answers and `autostart` allows. Starting one waits on processes: that is done on the
    /// blocking pool, so a server's async threads are never held.
    pub async fn connect(socket: PathBuf, autostart: bool) -> Result<Client> {
        let socket = absolute(socket);
        let checked = socket.clone();
        tokio::task::spawn_blocking(move || ensure_daemon(&checked, autostart))
            .await
            .map_err(|e| Error::Internal(format!("a worker thread failed: {e}")))??;
        Ok(Client::new(socket))
    }
}

impl Client {
    /// The client of the daemon on `socket` (made absolute), without checking that one
    /// answers: the caller runs [`ensure_daemon`] when it sees fit (the MCP server does it
    /// while answering the host's `initialize`).
    pub fn deferred(socket: PathBuf) -> Client {
        Client::new(absolute(socket))
    }
}

/// `path` made absolute against the working directory (the daemon runs elsewhere).
fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(&path))
        .unwrap_or(path)
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
