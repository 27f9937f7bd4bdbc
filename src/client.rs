//! The client side of the daemon's socket: HTTP/1.1 with JSON bodies over a unix socket
//! (SPEC §9), the [`Remote`] backend that runs the network-free verbs in the daemon, the
//! job calls, and the autostart of a daemon when nobody answers.
//!
//! Every request carries the asking process's [`RequestContext`] as `src/protocol.rs`
//! says: POST routes in their body, GET routes as a [`ContextBody`]. Error replies come
//! back as [`ServiceError::Remote`] with the daemon's code and HTTP status, so exit codes
//! are the ones `--no-daemon` gives (a writer refusal is 422 and keeps its reason code:
//! exit 3, printed the same way).
//!
//! One connection per request: a unix socket connects in microseconds, and a fresh
//! connection per call keeps a long event stream from blocking a cancellation.

use crate::check::CheckReport;
use crate::cli::backend::{Backend, BackendError, BackendResult};
use crate::context::{self, GlobalFlags, RequestContext};
use crate::core::records::{Confidence, Materiality, Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::ExplainView;
use crate::core::views::status::StatusView;
use crate::core::views::tree::TreeView;
use crate::protocol::{
    codes, ConsultRequest, ContextBody, ErrorBody, Event, Health, Job, JobList, PlanRequest,
    RecordRequest, Route,
};
use crate::service::ServiceError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
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
pub const REQUEST_BOUND: Duration = Duration::from_secs(60);

/// What to do when no daemon answers and none may be started.
pub const START_HINT: &str = "start one with `advisord --detach` (or drop `--no-autostart`); \
                              `--no-daemon` runs the network-free verbs in-process";

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

    fn unreachable(&self, reason: String, hint: &str) -> BackendError {
        BackendError::Unreachable {
            socket: self.socket.clone(),
            reason,
            hint: hint.to_string(),
        }
    }

    /// Send one request on a fresh connection and return the response head and body.
    async fn send(
        &self,
        route: &Route,
        query: &[(&str, String)],
        body: Option<Vec<u8>>,
    ) -> BackendResult<Response<Incoming>> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| self.unreachable(connect_reason(&e), START_HINT))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.lost(&e))?;
        // The connection is driven beside the request; it ends with the response body.
        tokio::spawn(connection);
        let mut uri = route.path();
        if !query.is_empty() {
            let pairs: Vec<String> = query
                .iter()
                .map(|(k, v)| format!("{k}={}", percent_encode(v)))
                .collect();
            uri = format!("{uri}?{}", pairs.join("&"));
        }
        let mut request = hyper::Request::builder()
            .method(route.method())
            .uri(uri)
            .header(hyper::header::HOST, "advisord");
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| BackendError::Protocol(format!("the request could not be built: {e}")))?;
        sender
            .send_request(request)
            .await
            .map_err(|e| self.lost(&e))
    }

    /// The connection broke: the daemon went away (or refused this peer).
    fn lost(&self, e: &hyper::Error) -> BackendError {
        self.unreachable(
            format!("the connection failed ({e}); the daemon may have stopped or refused you"),
            "check `advisord` is running as your user, then retry",
        )
    }

    /// One request whose reply is a JSON `T` (or an error body).
    pub async fn call<T: DeserializeOwned>(
        &self,
        route: &Route,
        query: &[(&str, String)],
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> BackendResult<T> {
        let body = body.map(serde_json::to_vec).transpose().map_err(|e| {
            BackendError::Protocol(format!("the request could not be encoded: {e}"))
        })?;
        let exchange = async {
            let response = self.send(route, query, body).await?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| self.lost(&e))?
                .to_bytes();
            Ok::<_, BackendError>((status, bytes))
        };
        let (status, bytes) =
            tokio::time::timeout(self.bound, exchange)
                .await
                .map_err(|_| {
                    self.unreachable(
                        format!(
                            "it accepted `{} {}` but did not answer within {} s",
                            route.method(),
                            route.path(),
                            self.bound.as_secs_f64()
                        ),
                        "the daemon may be stuck: see its log, restart it (`kill $(cat \
                     <data-dir>/advisord.pid)`), or use `--no-daemon` for the network-free verbs",
                    )
                })??;
        if !status.is_success() {
            return Err(self.error_reply(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            BackendError::Protocol(format!(
                "`{} {}` answered {status} with a body that is not the expected JSON ({e})",
                route.method(),
                route.path()
            ))
        })
    }

    /// An error reply turned back into the error the verb would have given in-process.
    fn error_reply(&self, status: StatusCode, bytes: &[u8]) -> BackendError {
        let Ok(body) = serde_json::from_slice::<ErrorBody>(bytes) else {
            return BackendError::Protocol(format!(
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
        BackendError::Service(ServiceError::Remote {
            code,
            message: body.message,
            status: status.as_u16(),
        })
    }

    /// `GET /api/v1/health`.
    pub async fn health(&self) -> BackendResult<Health> {
        self.call(&Route::Health, &[], None::<&()>).await
    }

    /// `POST /api/v1/consultations`: queue a job; the daemon answers once it is journaled.
    pub async fn consult(&self, request: &ConsultRequest) -> BackendResult<Job> {
        self.call(&Route::Consult, &[], Some(request)).await
    }

    /// `GET /api/v1/consultations/{id}`.
    pub async fn job(&self, id: &str) -> BackendResult<Job> {
        self.call(&Route::Job(id.to_string()), &[], None::<&()>)
            .await
    }

    /// `GET /api/v1/consultations`, only the jobs of `root` when given.
    pub async fn jobs(&self, root: Option<&Path>) -> BackendResult<JobList> {
        let query: Vec<(&str, String)> = root
            .map(|r| ("root", r.display().to_string()))
            .into_iter()
            .collect();
        self.call(&Route::Jobs, &query, None::<&()>).await
    }

    /// `DELETE /api/v1/consultations/{id}`: the job once it ended (or still stopping).
    pub async fn cancel(&self, id: &str) -> BackendResult<Job> {
        self.call(&Route::Cancel(id.to_string()), &[], None::<&()>)
            .await
    }

    /// `GET /api/v1/consultations/{id}/events`: the job's events, past then live.
    pub async fn events(&self, id: &str) -> BackendResult<EventStream> {
        let route = Route::JobEvents(id.to_string());
        // Only the head is bounded: the stream itself lasts as long as the job.
        let response = tokio::time::timeout(self.bound, self.send(&route, &[], None))
            .await
            .map_err(|_| {
                self.unreachable(
                    format!(
                        "it accepted `GET {}` but did not answer within {} s",
                        route.path(),
                        self.bound.as_secs_f64()
                    ),
                    "the daemon may be stuck: see its log and restart it",
                )
            })??;
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
        Ok(EventStream {
            client: self.clone(),
            body: response.into_body(),
            buffer: Vec::new(),
        })
    }
}

/// A job's event stream (NDJSON), read one [`Event`] at a time.
pub struct EventStream {
    client: Client,
    body: Incoming,
    buffer: Vec<u8>,
}

impl EventStream {
    /// The next event; `None` when the stream ended (after `done`, or the daemon stopped).
    pub async fn next(&mut self) -> BackendResult<Option<Event>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                return serde_json::from_slice(line).map(Some).map_err(|e| {
                    BackendError::Protocol(format!(
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
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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
pub fn ensure_daemon(socket: &Path, autostart: bool) -> BackendResult<()> {
    let reason = match answers(socket) {
        Ok(()) => return Ok(()),
        Err(reason) => reason,
    };
    let unreachable = |reason: String, hint: &str| BackendError::Unreachable {
        socket: socket.to_path_buf(),
        reason,
        hint: hint.to_string(),
    };
    if !autostart {
        return Err(unreachable(
            format!("{reason}, and `--no-autostart` is set"),
            START_HINT,
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
            log_path()
                .map(|log| format!(" (a detached daemon logs to `{}`)", log.display()))
                .unwrap_or_default()
        );
        unreachable(reason, &hint)
    })
}

/// The log of a daemon started from this process's environment, if it has a data dir.
fn log_path() -> Option<PathBuf> {
    crate::daemon::paths::data_dir(None).map(|dir| dir.join(crate::daemon::LOG_FILE))
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
fn start_daemon(daemon: &Path, socket: &Path) -> Result<(), String> {
    let mut child = Command::new(daemon)
        .arg("--socket")
        .arg(socket)
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
    match log_path() {
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

/// The network-free verbs run in the daemon: each one request with the asking process's
/// context, answered with the same view the in-process [`crate::cli::backend::Local`]
/// would have computed.
pub struct Remote {
    client: Client,
    ctx: RequestContext,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("socket", &self.client.socket)
            .field("ctx", &self.ctx)
            .finish()
    }
}

impl Remote {
    /// The daemon on the socket the flags name (SPEC §3), started first when nobody
    /// answers unless `--no-autostart`.
    pub fn connect(flags: &GlobalFlags, ctx: RequestContext) -> BackendResult<Remote> {
        let socket = absolute(context::socket_path(flags.socket.as_deref()));
        ensure_daemon(&socket, !flags.no_autostart)?;
        Remote::at(socket, ctx)
    }

    /// A backend on `socket` without checking that anyone answers.
    pub fn at(socket: PathBuf, ctx: RequestContext) -> BackendResult<Remote> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BackendError::Protocol(format!("cannot start the async runtime ({e})")))?;
        Ok(Remote {
            client: Client::new(socket),
            ctx,
            runtime,
        })
    }

    /// The client of the socket.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The context sent with every request.
    pub fn context(&self) -> &RequestContext {
        &self.ctx
    }

    /// Run `future` to its end on this backend's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A GET route answered with a JSON `T`, the context in its body.
    fn get<T: DeserializeOwned>(&self, route: Route, query: &[(&str, String)]) -> BackendResult<T> {
        let body = ContextBody {
            context: self.ctx.clone(),
        };
        self.block_on(self.client.call(&route, query, Some(&body)))
    }
}

/// Every network-free verb is one request to the daemon with this process's context; its
/// JSON reply is read back into the same view `--no-daemon` computes, so both print alike.
impl Backend for Remote {
    fn record(&self, input: &serde_json::Value) -> BackendResult<Record> {
        let body = RecordRequest {
            context: self.ctx.clone(),
            record: input.clone(),
        };
        self.block_on(self.client.call(&Route::Record, &[], Some(&body)))
    }

    fn advisors(&self) -> BackendResult<AdvisorsView> {
        self.get(Route::Advisors, &[])
    }

    fn plan_preview(
        &self,
        materiality: Materiality,
        confidence: Confidence,
        capabilities: Vec<String>,
    ) -> BackendResult<Plan> {
        let body = PlanRequest {
            context: self.ctx.clone(),
            materiality,
            confidence,
            capabilities,
        };
        self.block_on(self.client.call(&Route::PlanPreview, &[], Some(&body)))
    }

    fn status(&self) -> BackendResult<StatusView> {
        self.get(Route::Status, &[])
    }

    fn explain(&self, id: &str) -> BackendResult<ExplainView> {
        self.get(Route::Explain, &[("id", id.to_string())])
    }

    fn tree(&self, depth: Option<usize>, show_superseded: bool) -> BackendResult<TreeView> {
        let mut query = vec![("show_superseded", show_superseded.to_string())];
        if let Some(depth) = depth {
            query.push(("depth", depth.to_string()));
        }
        self.get(Route::Tree, &query)
    }

    fn check(&self, path: Option<&Path>) -> BackendResult<CheckReport> {
        let query: Vec<(&str, String)> = path
            .map(|p| ("path", p.display().to_string()))
            .into_iter()
            .collect();
        self.get(Route::Check, &query)
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

    fn exit_of(err: BackendError) -> (i32, String) {
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
        let BackendError::Service(service) = err else {
            panic!("not a service error")
        };
        assert_eq!(service.refusal(), Some(("invalid_task", "bad task")));
        assert_eq!(service.code(), "invalid_task");
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
                .health()
                .await
                .expect_err("no answer");
            let (code, shown) = exit_of(err);
            assert_eq!(code, 4);
            assert!(shown.contains("did not answer within 0.2 s"), "{shown}");
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
            let mut events = client.events("J").await.expect("stream");
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
