//! A fake LLM HTTP server speaking the wire formats the HTTP adapters and the vendors' CLIs
//! use, scripted per model (or per phrase of the prompt), so tests and benchmarks never
//! need a real provider or a network.
//!
//! Routes (all `POST`): `/v1/chat/completions` and `/chat/completions` (OpenAI-compatible),
//! `/v1/responses` and `/responses` (the OpenAI Responses API, which `codex` speaks),
//! `/v1/messages` (Anthropic), `/v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent` (Gemini), `/api/chat` (Ollama). A request with `"stream": true`
//! (Anthropic, Responses, OpenAI chat) or to `:streamGenerateContent` is answered with
//! server-sent events in the vendor's event shapes, as `claude`, `codex` and `gemini`
//! expect; errors come in each vendor's own error body (`authentication_error`,
//! `invalid_api_key`, `UNAUTHENTICATED`, ...).
//!
//! The model is read from the request body (from the path for Gemini). A script's
//! `phrases` are looked for first: a request whose body contains a phrase follows that
//! phrase's queue; then the model's queue; then the default. Gemini's model-router
//! classifier call (a JSON schema with `complexity_score` or `model_choice`) is answered
//! by the router's JSON whatever the script says, so the real request follows. Every
//! request is recorded (path, headers, body) for assertions, and checked the way the real
//! server would: the protocol's auth header when the script sets an `api_key`, the body's
//! shape, `anthropic-version` and `max_tokens` for Anthropic.

mod agent;

pub use agent::{Action, Turn};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method, Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// A well-formed advisor answer (the JSON object the question asks for).
pub const DEFAULT_ANSWER: &str = r#"{"conclusion": "The hypothesis holds for the evidence given.", "stance": "agree", "assumptions": ["the benchmark is representative"], "risks": ["cold caches"], "actions": ["rerun with a cold cache"], "falsifiers": ["a cold-cache run slower than the baseline"], "confidence": 0.7}"#;

/// Input tokens the default answer reports.
pub const DEFAULT_INPUT_TOKENS: u64 = 120;

/// Output tokens the default answer reports.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 48;

/// The wire format a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// OpenAI-compatible chat completions.
    OpenAi,
    /// Anthropic messages.
    Anthropic,
    /// Gemini generateContent and streamGenerateContent.
    Gemini,
    /// The OpenAI Responses API.
    Responses,
    /// Ollama chat.
    Ollama,
}

/// What the server does with one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// 200 with the answer text and usage in the protocol's shape.
    Ok {
        /// The answer text.
        text: String,
        /// Reported input tokens.
        #[serde(default)]
        input_tokens: u64,
        /// Reported output tokens.
        #[serde(default)]
        output_tokens: u64,
    },
    /// 429 with the protocol's error body and, when given, this `Retry-After` value
    /// (seconds, or an HTTP date).
    RateLimited {
        /// The raw `Retry-After` header value.
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// Any status (401, 403, 408, 500, 503, ...) with the protocol's error body.
    Status {
        /// The HTTP status.
        status: u16,
        /// The error message (a default per status when absent).
        #[serde(default)]
        message: Option<String>,
    },
    /// 200 with a JSON body cut short (a stream: an event whose data is not JSON).
    Malformed,
    /// 200 with the protocol's reply shape and no text.
    Empty,
    /// 200 whose body (the `text` answer) arrives `chunk_bytes` at a time, one chunk every
    /// `every_ms`; with `forever`, the body then never ends (spaces keep coming).
    Drip {
        /// The answer text.
        text: String,
        /// Milliseconds between chunks.
        every_ms: u64,
        /// Bytes per chunk (16 when 0).
        #[serde(default)]
        chunk_bytes: usize,
        /// Keep the body open after the answer.
        #[serde(default)]
        forever: bool,
    },
    /// Read the request, then close the connection with a TCP reset and no response.
    Reset,
    /// Act as an agent's model: the request carrying N tool results takes action N (call
    /// a tool by the end of its name, or answer with text); after the last, "Done.".
    Agent {
        /// The conversation's turns.
        actions: Vec<Action>,
    },
}

impl Reply {
    /// An answer with usage.
    pub fn ok(text: &str, input_tokens: u64, output_tokens: u64) -> Self {
        Self::Ok {
            text: text.to_owned(),
            input_tokens,
            output_tokens,
        }
    }

    /// An agent's model taking `actions` in turn.
    pub fn agent(actions: impl IntoIterator<Item = Action>) -> Self {
        Self::Agent {
            actions: actions.into_iter().collect(),
        }
    }

    /// An error status with the default message.
    pub fn status(status: u16) -> Self {
        Self::Status {
            status,
            message: None,
        }
    }

    /// A rate limit asking to wait `seconds`.
    pub fn rate_limited_for(seconds: u64) -> Self {
        Self::RateLimited {
            retry_after: Some(seconds.to_string()),
        }
    }

    /// A rate limit asking to wait until `when` (an HTTP date).
    pub fn rate_limited_until(when: SystemTime) -> Self {
        Self::RateLimited {
            retry_after: Some(httpdate::fmt_http_date(when)),
        }
    }

    /// A body that dribbles the default answer and never ends.
    pub fn drip_forever(every_ms: u64) -> Self {
        Self::Drip {
            text: DEFAULT_ANSWER.to_owned(),
            every_ms,
            chunk_bytes: 0,
            forever: true,
        }
    }

    /// This reply after waiting `delay_ms`.
    pub fn after(self, delay_ms: u64) -> Step {
        Step {
            reply: self,
            delay_ms,
            answer_at_unix_ms: None,
        }
    }

    /// This reply at a wall-clock instant, in milliseconds since the Unix epoch, however
    /// late the request came: a test can then place an answer against a deadline it took
    /// at the same moment, without the request's own latency moving it.
    pub fn at_unix_ms(self, at: u64) -> Step {
        Step {
            reply: self,
            delay_ms: 0,
            answer_at_unix_ms: Some(at),
        }
    }
}

/// One scripted response: a reply, after an optional delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// What to answer.
    #[serde(flatten)]
    pub reply: Reply,
    /// Milliseconds to wait before answering.
    #[serde(default)]
    pub delay_ms: u64,
    /// The wall-clock instant (milliseconds since the Unix epoch) to answer at, after
    /// `delay_ms`; an instant already past answers at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_at_unix_ms: Option<u64>,
}

impl From<Reply> for Step {
    fn from(reply: Reply) -> Self {
        Self {
            reply,
            delay_ms: 0,
            answer_at_unix_ms: None,
        }
    }
}

/// The script of one model: a queue of steps taken in order, then `then` for every
/// later request (the script's default when absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelScript {
    /// Steps for the first requests, in order.
    #[serde(default)]
    pub queue: Vec<Step>,
    /// The step once the queue is used up.
    #[serde(default)]
    pub then: Option<Step>,
}

/// What the server answers, per model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// When set, every request must carry this key in its protocol's header (except
    /// Ollama, which takes none) or gets a 401.
    #[serde(default)]
    pub api_key: Option<String>,
    /// The step for models the script does not name, and after a model's queue.
    #[serde(default = "default_step")]
    pub default: Step,
    /// Per-model scripts.
    #[serde(default)]
    pub models: BTreeMap<String, ModelScript>,
    /// Scripts for requests whose body contains the phrase (looked for before the model;
    /// the first phrase found, in the map's order, wins).
    #[serde(default)]
    pub phrases: BTreeMap<String, ModelScript>,
}

fn default_step() -> Step {
    Reply::ok(DEFAULT_ANSWER, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS).into()
}

impl Default for Script {
    fn default() -> Self {
        Self {
            api_key: None,
            default: default_step(),
            models: BTreeMap::new(),
            phrases: BTreeMap::new(),
        }
    }
}

impl Script {
    /// Every model answers [`DEFAULT_ANSWER`] with the default usage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every model answers `text` with the default usage.
    pub fn answering(text: &str) -> Self {
        Self::new().default_step(Reply::ok(text, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS))
    }

    /// Requires `key` on every request (in the protocol's own header).
    pub fn api_key(mut self, key: &str) -> Self {
        self.api_key = Some(key.to_owned());
        self
    }

    /// Replaces the default step.
    pub fn default_step(mut self, step: impl Into<Step>) -> Self {
        self.default = step.into();
        self
    }

    /// Model `model` always answers `step`.
    pub fn model(self, model: &str, step: impl Into<Step>) -> Self {
        self.model_queue(model, Vec::<Step>::new(), Some(step.into()))
    }

    /// Model `model` answers the steps of `queue` in order, then `then` (or the default).
    pub fn model_queue(
        mut self,
        model: &str,
        queue: impl IntoIterator<Item = impl Into<Step>>,
        then: Option<Step>,
    ) -> Self {
        let queue = queue.into_iter().map(Into::into).collect();
        self.models
            .insert(model.to_owned(), ModelScript { queue, then });
        self
    }

    /// A request whose body contains `phrase` answers the steps of `queue` in order, then
    /// `then` (or the default), whatever its model.
    pub fn phrase_queue(
        mut self,
        phrase: &str,
        queue: impl IntoIterator<Item = impl Into<Step>>,
        then: Option<Step>,
    ) -> Self {
        let queue = queue.into_iter().map(Into::into).collect();
        self.phrases
            .insert(phrase.to_owned(), ModelScript { queue, then });
        self
    }

    /// A request whose body contains `phrase` always answers `step`.
    pub fn phrase(self, phrase: &str, step: impl Into<Step>) -> Self {
        self.phrase_queue(phrase, Vec::<Step>::new(), Some(step.into()))
    }
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The wire format of the route it came to (`None` for an unknown route).
    pub protocol: Option<Protocol>,
    /// The HTTP method.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The model asked for, when the request named one.
    pub model: Option<String>,
    /// Headers, lowercase names; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (`Null` when it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The name of every tool the request offered the model (with the host's prefix).
    pub fn tool_names(&self) -> Vec<String> {
        self.protocol
            .map(|p| agent::tool_names(p, &self.body))
            .unwrap_or_default()
    }

    /// How many bytes the request's tool list weighs (its JSON).
    pub fn tools_bytes(&self) -> usize {
        let mut bytes = self.body.get("tools").map_or(0, |t| t.to_string().len());
        for item in self.body["input"].as_array().into_iter().flatten() {
            if item["type"] == "additional_tools" {
                bytes += item["tools"].to_string().len();
            }
        }
        bytes
    }

    /// The text of every tool result the request carried back to the model, in order.
    pub fn tool_results(&self) -> Vec<String> {
        self.protocol
            .map(|p| agent::tool_results(p, &self.body))
            .unwrap_or_default()
    }

    /// The prompt the request carried (the first user message's text).
    pub fn prompt(&self) -> Option<&str> {
        self.body
            .pointer("/messages/0/content")
            .or_else(|| self.body.pointer("/contents/0/parts/0/text"))
            .and_then(Value::as_str)
    }
}

struct Shared {
    script: Script,
    queues: Mutex<HashMap<String, VecDeque<Step>>>,
    requests: Mutex<Vec<RecordedRequest>>,
    connections: AtomicUsize,
    open: AtomicUsize,
}

impl Shared {
    /// The step for a request to `model` whose raw body is `body`.
    fn step_for(&self, model: &str, body: &[u8]) -> Step {
        let body = String::from_utf8_lossy(body);
        let phrase = self
            .script
            .phrases
            .iter()
            .find(|(phrase, _)| body.contains(phrase.as_str()));
        match phrase {
            Some((phrase, script)) => self.take(&format!("phrase\u{0}{phrase}"), script),
            None => self.next_step(model),
        }
    }

    fn next_step(&self, model: &str) -> Step {
        let Some(script) = self.script.models.get(model) else {
            return self.script.default.clone();
        };
        self.take(&format!("model\u{0}{model}"), script)
    }

    fn take(&self, key: &str, script: &ModelScript) -> Step {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let queue = queues
            .entry(key.to_owned())
            .or_insert_with(|| script.queue.clone().into());
        queue
            .pop_front()
            .or_else(|| script.then.clone())
            .unwrap_or_else(|| self.script.default.clone())
    }

    fn record(&self, request: RecordedRequest) {
        self.requests
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(request);
    }
}

/// Lets a handler abort its own connection (the `reset` reply).
#[derive(Clone)]
struct ConnectionHandle(Arc<Notify>);

/// A running fake server on a loopback port.
pub struct FakeLlmServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl FakeLlmServer {
    /// Starts a server on `127.0.0.1:0` following `script`.
    ///
    /// # Panics
    /// When no loopback port can be bound (the test cannot run at all then).
    pub async fn start(script: Script) -> Self {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        match Self::bind(addr, script).await {
            Ok(server) => server,
            Err(error) => panic!("fake LLM server: cannot bind a loopback port: {error}"),
        }
    }

    /// Starts a server on `addr` following `script`.
    pub async fn bind(addr: SocketAddr, script: Script) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script,
            queues: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
        });
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let router = router(Arc::clone(&shared));
        tracker.spawn(accept_loop(
            listener,
            router,
            Arc::clone(&shared),
            cancel.clone(),
            tracker.clone(),
        ));
        Ok(Self {
            addr,
            shared,
            cancel,
            tracker,
        })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// How many requests received so far satisfy `predicate` (without copying them).
    pub fn count_requests(&self, predicate: impl Fn(&RecordedRequest) -> bool) -> usize {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .filter(|request| predicate(request))
            .count()
    }

    /// How many TCP connections were accepted (pooling shows as few connections).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// How many connections are open now: a client that dropped its exchange shows as
    /// its connection closing (the server notices at its next read or write).
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::Relaxed)
    }

    /// Stops accepting, closes every connection and waits (at most a second) for them.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.tracker.wait()).await;
    }
}

impl Drop for FakeLlmServer {
    fn drop(&mut self) {
        // A test that forgets `shutdown` still stops the server's tasks.
        self.cancel.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let open = OpenConnection::new(Arc::clone(&shared));
                let served = serve_connection(stream, router.clone(), cancel.clone());
                tracker.spawn(async move {
                    served.await;
                    drop(open);
                });
            }
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Counts a connection as open until dropped (also when its task is aborted).
struct OpenConnection(Arc<Shared>);

impl OpenConnection {
    fn new(shared: Arc<Shared>) -> Self {
        shared.open.fetch_add(1, Ordering::Relaxed);
        Self(shared)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn serve_connection(stream: TcpStream, router: Router, cancel: CancellationToken) {
    let _ = stream.set_nodelay(true);
    // A second descriptor on the same socket lets the `reset` reply set a zero linger
    // after hyper owns the stream, so that closing sends RST instead of FIN.
    let Ok((stream, twin)) = split_twin(stream) else {
        return;
    };
    let reset = Arc::new(Notify::new());
    let handle = ConnectionHandle(Arc::clone(&reset));
    let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(handle.clone());
        router.clone().oneshot(request)
    });
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        () = reset.notified() => {
            let abort = nix::libc::linger { l_onoff: 1, l_linger: 0 };
            let _ = nix::sys::socket::setsockopt(&twin, nix::sys::socket::sockopt::Linger, &abort);
        }
        () = cancel.cancelled() => {}
    }
}

fn split_twin(stream: TcpStream) -> std::io::Result<(TcpStream, std::net::TcpStream)> {
    let stream = stream.into_std()?;
    let twin = stream.try_clone()?;
    Ok((TcpStream::from_std(stream)?, twin))
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/chat/completions", post(openai))
        .route("/v1/responses", post(responses))
        .route("/responses", post(responses))
        .route("/v1/messages", post(anthropic))
        .route("/v1beta/models/{target}", post(gemini))
        .route("/api/chat", post(ollama))
        .fallback(unknown_route)
        .with_state(shared)
}

/// What every handler extracts.
struct Incoming {
    shared: Arc<Shared>,
    connection: ConnectionHandle,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl axum::extract::FromRequest<Arc<Shared>> for Incoming {
    type Rejection = Response;

    async fn from_request(request: Request<Body>, shared: &Arc<Shared>) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let connection = parts
            .extensions
            .remove::<ConnectionHandle>()
            .ok_or_else(|| StatusCode::INTERNAL_SERVER_ERROR.into_response())?;
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()).into_response())?;
        Ok(Incoming {
            shared: shared.clone(),
            connection,
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            body,
        })
    }
}

async fn openai(incoming: Incoming) -> Response {
    handle(Protocol::OpenAi, incoming, None, false).await
}

async fn responses(incoming: Incoming) -> Response {
    handle(Protocol::Responses, incoming, None, false).await
}

async fn anthropic(incoming: Incoming) -> Response {
    handle(Protocol::Anthropic, incoming, None, false).await
}

async fn gemini(Path(target): Path<String>, incoming: Incoming) -> Response {
    if let Some(model) = target.strip_suffix(":generateContent") {
        return handle(Protocol::Gemini, incoming, Some(model.to_owned()), false).await;
    }
    if let Some(model) = target.strip_suffix(":streamGenerateContent") {
        return handle(Protocol::Gemini, incoming, Some(model.to_owned()), true).await;
    }
    unknown_route(State(incoming.shared), incoming.method, incoming.uri).await
}

async fn ollama(incoming: Incoming) -> Response {
    handle(Protocol::Ollama, incoming, None, false).await
}

async fn unknown_route(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    shared.record(RecordedRequest {
        protocol: None,
        method: method.to_string(),
        path: uri.to_string(),
        model: None,
        headers: BTreeMap::new(),
        body: Value::Null,
    });
    (
        StatusCode::NOT_FOUND,
        format!("no route for {method} {uri}"),
    )
        .into_response()
}

async fn handle(
    protocol: Protocol,
    incoming: Incoming,
    path_model: Option<String>,
    path_streams: bool,
) -> Response {
    let body: Value = serde_json::from_slice(&incoming.body).unwrap_or(Value::Null);
    let model = path_model.or_else(|| body.get("model").and_then(Value::as_str).map(str::to_owned));
    let stream = path_streams || body.get("stream").and_then(Value::as_bool) == Some(true);
    let mut headers = BTreeMap::<String, String>::new();
    for (name, value) in &incoming.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert(value);
    }
    let request = RecordedRequest {
        protocol: Some(protocol),
        method: incoming.method.to_string(),
        path: incoming.uri.to_string(),
        model: model.clone(),
        headers,
        body: body.clone(),
    };
    let refusal = refuse(
        protocol,
        &request,
        incoming.shared.script.api_key.as_deref(),
    );
    let router_answer = (protocol == Protocol::Gemini)
        .then(|| router_classifier_answer(&request.body))
        .flatten();
    incoming.shared.record(request);
    if let Some((status, message)) = refusal {
        return error_response(protocol, status, &message, None);
    }
    let model = model.unwrap_or_default();
    let wire = Wire {
        protocol,
        model: &model,
        stream,
    };
    if let Some(answer) = router_answer {
        return wire.ok(&answer, 1, 1);
    }
    let step = incoming.shared.step_for(&model, &incoming.body);
    if step.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
    }
    if let Some(at) = step.answer_at_unix_ms {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(at);
        if let Ok(left) = at.duration_since(std::time::SystemTime::now()) {
            tokio::time::sleep(left).await;
        }
    }
    match step.reply {
        Reply::Ok {
            text,
            input_tokens,
            output_tokens,
        } => wire.ok(&text, input_tokens, output_tokens),
        Reply::Empty => wire.ok("", 5, 0),
        Reply::Malformed if stream => sse_response(
            Vec::new(),
            futures::stream::iter([Bytes::from(format!(
                "{}data: {{\"cut sh\n\n",
                wire.events("", DEFAULT_INPUT_TOKENS, 0)
                    .first()
                    .map(String::as_str)
                    .unwrap_or_default()
            ))]),
        ),
        Reply::Malformed => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"choices\": [{\"message\": {\"content\": \"cut sh",
        )
            .into_response(),
        Reply::RateLimited { retry_after } => error_response(
            protocol,
            StatusCode::TOO_MANY_REQUESTS,
            "rate limit reached; slow down",
            retry_after.as_deref(),
        ),
        Reply::Status { status, message } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let message = message.unwrap_or_else(|| default_message(status).to_owned());
            error_response(protocol, status, &message, None)
        }
        Reply::Drip {
            text,
            every_ms,
            chunk_bytes,
            forever,
        } if stream => {
            let events = wire.events(&text, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS);
            drip_events(events, every_ms, chunk_bytes, forever)
        }
        Reply::Drip {
            text,
            every_ms,
            chunk_bytes,
            forever,
        } => {
            let body = ok_body(
                protocol,
                &model,
                &text,
                DEFAULT_INPUT_TOKENS,
                DEFAULT_OUTPUT_TOKENS,
            );
            drip(
                body.to_string().into_bytes(),
                every_ms,
                chunk_bytes,
                forever,
            )
        }
        Reply::Agent { actions } => match agent::turn(protocol, &body, &actions) {
            Turn::Say(text) => wire.ok(&text, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS),
            call if stream => sse_response(
                agent::call_events(protocol, &model, &call),
                futures::stream::empty(),
            ),
            call => json_response(StatusCode::OK, &agent::call_body(protocol, &model, &call)),
        },
        Reply::Reset => {
            incoming.connection.0.notify_one();
            // The connection task drops this future with the connection: no response.
            std::future::pending().await
        }
    }
}

/// How one request is answered: its protocol, model, and whether it asked for a stream.
struct Wire<'a> {
    protocol: Protocol,
    model: &'a str,
    stream: bool,
}

impl Wire<'_> {
    /// A successful reply with `text` and usage: one JSON body, or the events of a stream.
    fn ok(&self, text: &str, input: u64, output: u64) -> Response {
        if self.stream {
            let events = self.events(text, input, output);
            sse_response(events, futures::stream::empty())
        } else {
            json_response(
                StatusCode::OK,
                &ok_body(self.protocol, self.model, text, input, output),
            )
        }
    }

    /// The server-sent events of a streamed reply, each with its blank-line terminator.
    fn events(&self, text: &str, input: u64, output: u64) -> Vec<String> {
        stream_events(self.protocol, self.model, text, input, output)
    }
}

/// Gemini's model router asks a small model for a JSON verdict before the real request:
/// `{complexity_reasoning, complexity_score}` or `{reasoning, model_choice}`. The verdict,
/// when `body` is such a call.
fn router_classifier_answer(body: &Value) -> Option<String> {
    let config = body.get("generationConfig")?.to_string();
    if config.contains("complexity_score") {
        Some(
            json!({"complexity_reasoning": "A single question to answer.", "complexity_score": 20})
                .to_string(),
        )
    } else if config.contains("model_choice") {
        Some(
            json!({"reasoning": "A single question to answer.", "model_choice": "flash"})
                .to_string(),
        )
    } else {
        None
    }
}

/// Checks a request the way the real server would; `Some((status, message))` refuses it.
fn refuse(
    protocol: Protocol,
    request: &RecordedRequest,
    api_key: Option<&str>,
) -> Option<(StatusCode, String)> {
    if let Some(key) = api_key {
        let presented = match protocol {
            Protocol::OpenAi | Protocol::Responses => request
                .header("authorization")
                .and_then(|v| v.strip_prefix("Bearer ")),
            Protocol::Anthropic => request.header("x-api-key"),
            Protocol::Gemini => request.header("x-goog-api-key"),
            Protocol::Ollama => Some(key),
        };
        if presented != Some(key) {
            return Some((StatusCode::UNAUTHORIZED, "invalid api key".to_owned()));
        }
    }
    let bad = |message: &str| Some((StatusCode::BAD_REQUEST, message.to_owned()));
    if request.body.is_null() {
        return bad("the request body is not JSON");
    }
    if request.model.as_deref().unwrap_or_default().is_empty() {
        return bad("the request names no model");
    }
    match protocol {
        Protocol::Gemini if request.body.pointer("/contents/0/parts").is_none() => {
            bad("`contents` with parts is required")
        }
        Protocol::Responses
            if !request
                .body
                .get("input")
                .is_some_and(|input| input.is_array() || input.is_string()) =>
        {
            bad("`input` is required")
        }
        Protocol::OpenAi | Protocol::Anthropic | Protocol::Ollama
            if !request.body.get("messages").is_some_and(Value::is_array) =>
        {
            bad("`messages` is required")
        }
        Protocol::Anthropic if request.header("anthropic-version").is_none() => {
            bad("the anthropic-version header is required")
        }
        Protocol::Anthropic if !request.body.get("max_tokens").is_some_and(Value::is_u64) => {
            bad("`max_tokens` is required")
        }
        _ => None,
    }
}

fn default_message(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "invalid api key",
        403 => "this key may not use this model",
        408 => "the request timed out",
        500 => "internal server error",
        503 => "the service is overloaded; try again later",
        _ => "scripted failure",
    }
}

/// A successful reply with `text` and usage, in the protocol's shape.
pub fn ok_body(protocol: Protocol, model: &str, text: &str, input: u64, output: u64) -> Value {
    match protocol {
        Protocol::OpenAi => json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": input, "completion_tokens": output,
                      "total_tokens": input + output},
        }),
        Protocol::Responses => responses_object(model, text, input, output, "completed"),
        Protocol::Anthropic => json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": if text.is_empty() { json!([]) } else { json!([{"type": "text", "text": text}]) },
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": output},
        }),
        Protocol::Gemini => json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": output,
                              "totalTokenCount": input + output},
            "modelVersion": model,
        }),
        Protocol::Ollama => json!({
            "model": model, "created_at": "2025-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": text},
            "done": true, "done_reason": "stop",
            "prompt_eval_count": input, "eval_count": output,
        }),
    }
}

/// A Responses API `response` object holding one assistant message.
fn responses_object(model: &str, text: &str, input: u64, output: u64, status: &str) -> Value {
    let content = if status == "completed" {
        json!([message_item(text)])
    } else {
        json!([])
    };
    json!({
        "id": "resp_fake", "object": "response", "created_at": 0, "status": status,
        "model": model, "output": content,
        "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": input + output},
    })
}

fn message_item(text: &str) -> Value {
    json!({
        "type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// The text split into the deltas a stream sends (a few words each).
fn deltas(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices(' ').skip(7).step_by(8) {
        pieces.push(&text[start..at]);
        start = at;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// One server-sent event with a name (`event:` line) and JSON data.
fn event(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// The events of a streamed reply with `text` and usage, in the protocol's shapes.
pub fn stream_events(
    protocol: Protocol,
    model: &str,
    text: &str,
    input: u64,
    output: u64,
) -> Vec<String> {
    let pieces = deltas(text);
    match protocol {
        Protocol::Anthropic => {
            let mut events = vec![event(
                Some("message_start"),
                &json!({"type": "message_start", "message": {
                    "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": input, "output_tokens": 1}}}),
            )];
            if !text.is_empty() {
                events.push(event(
                    Some("content_block_start"),
                    &json!({"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}}),
                ));
                events.push(event(Some("ping"), &json!({"type": "ping"})));
                for piece in &pieces {
                    events.push(event(
                        Some("content_block_delta"),
                        &json!({"type": "content_block_delta", "index": 0,
                                "delta": {"type": "text_delta", "text": piece}}),
                    ));
                }
                events.push(event(
                    Some("content_block_stop"),
                    &json!({"type": "content_block_stop", "index": 0}),
                ));
            }
            events.push(event(
                Some("message_delta"),
                &json!({"type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                        "usage": {"output_tokens": output}}),
            ));
            events.push(event(
                Some("message_stop"),
                &json!({"type": "message_stop"}),
            ));
            events
        }
        Protocol::Responses => {
            let mut sequence = 0u64;
            let mut next = |name: &str, mut data: Value| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(sequence);
                sequence += 1;
                event(Some(name), &data)
            };
            let mut events = vec![
                next(
                    "response.created",
                    json!({"response": responses_object(model, "", 0, 0, "in_progress")}),
                ),
                next(
                    "response.in_progress",
                    json!({"response": responses_object(model, "", 0, 0, "in_progress")}),
                ),
            ];
            let mut partial = message_item("");
            partial["status"] = json!("in_progress");
            partial["content"] = json!([]);
            events.push(next(
                "response.output_item.added",
                json!({"output_index": 0, "item": partial}),
            ));
            for piece in &pieces {
                events.push(next(
                    "response.output_text.delta",
                    json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0,
                           "delta": piece}),
                ));
            }
            events.push(next(
                "response.output_text.done",
                json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0,
                       "text": text}),
            ));
            events.push(next(
                "response.output_item.done",
                json!({"output_index": 0, "item": message_item(text)}),
            ));
            events.push(next(
                "response.completed",
                json!({"response": responses_object(model, text, input, output, "completed")}),
            ));
            events
        }
        Protocol::Gemini => {
            let mut events: Vec<String> = pieces
                .iter()
                .map(|piece| {
                    event(
                        None,
                        &json!({"candidates": [{"content": {"role": "model",
                                   "parts": [{"text": piece}]}, "index": 0}],
                                "modelVersion": model}),
                    )
                })
                .collect();
            events.push(event(
                None,
                &json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                        "finishReason": "STOP", "index": 0}],
                        "usageMetadata": {"promptTokenCount": input,
                                          "candidatesTokenCount": output,
                                          "totalTokenCount": input + output},
                        "modelVersion": model}),
            ));
            events
        }
        Protocol::OpenAi | Protocol::Ollama => {
            let chunk = |delta: Value, finish: Value| {
                event(
                    None,
                    &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                            "created": 0, "model": model,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
                )
            };
            let mut events = vec![chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            )];
            for piece in &pieces {
                events.push(chunk(json!({"content": piece}), Value::Null));
            }
            events.push(chunk(json!({}), json!("stop")));
            events.push(event(
                None,
                &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                        "model": model, "choices": [],
                        "usage": {"prompt_tokens": input, "completion_tokens": output,
                                  "total_tokens": input + output}}),
            ));
            events.push("data: [DONE]\n\n".to_owned());
            events
        }
    }
}

/// An error reply in the protocol's shape, as the vendor writes it.
pub fn error_body(protocol: Protocol, status: StatusCode, message: &str) -> Value {
    let code = status.as_u16();
    match protocol {
        Protocol::OpenAi | Protocol::Responses => {
            let (kind, error_code) = match code {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                403 => (
                    "invalid_request_error",
                    json!("unsupported_country_region_territory"),
                ),
                404 => ("invalid_request_error", json!("model_not_found")),
                429 => ("requests", json!("rate_limit_exceeded")),
                400..=499 => ("invalid_request_error", Value::Null),
                _ => ("server_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": error_code}})
        }
        Protocol::Anthropic => {
            let kind = match code {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message},
                   "request_id": "req_fake"})
        }
        Protocol::Gemini => {
            let kind = match code {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                408 | 504 => "DEADLINE_EXCEEDED",
                429 => "RESOURCE_EXHAUSTED",
                501 => "UNIMPLEMENTED",
                503 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            json!({"error": {"code": code, "message": message, "status": kind}})
        }
        Protocol::Ollama => json!({"error": message}),
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(
    protocol: Protocol,
    status: StatusCode,
    message: &str,
    retry_after: Option<&str>,
) -> Response {
    let mut body = error_body(protocol, status, message);
    // Google says how long to wait in the body as well.
    let seconds = retry_after.and_then(|value| value.parse::<u64>().ok());
    if let (Protocol::Gemini, Some(seconds)) = (protocol, seconds) {
        body["error"]["details"] = json!([{
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{seconds}s"),
        }]);
    }
    let mut response = json_response(status, &body);
    if let Some(value) = retry_after.and_then(|value| value.parse().ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// A 200 event stream: `events` at once, then whatever `rest` yields.
fn sse_response(
    events: Vec<String>,
    rest: impl futures::Stream<Item = Bytes> + Send + 'static,
) -> Response {
    use futures::StreamExt;
    let first = futures::stream::iter(events.into_iter().map(Bytes::from));
    let stream = first.chain(rest).map(Ok::<_, std::io::Error>);
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A stream whose events arrive `chunk_bytes` at a time, one chunk every `every_ms`; with
/// `forever`, comment lines keep coming after the last event.
fn drip_events(events: Vec<String>, every_ms: u64, chunk_bytes: usize, forever: bool) -> Response {
    let body: Vec<u8> = events.concat().into_bytes();
    let chunk_bytes = if chunk_bytes == 0 { 16 } else { chunk_bytes };
    let chunks: VecDeque<Bytes> = body
        .chunks(chunk_bytes)
        .map(Bytes::copy_from_slice)
        .collect();
    let every = Duration::from_millis(every_ms);
    let stream = futures::stream::unfold(chunks, move |mut chunks| async move {
        tokio::time::sleep(every).await;
        match chunks.pop_front() {
            Some(chunk) => Some((chunk, chunks)),
            None if forever => Some((Bytes::from_static(b": waiting\n\n"), chunks)),
            None => None,
        }
    });
    sse_response(Vec::new(), stream)
}

fn drip(body: Vec<u8>, every_ms: u64, chunk_bytes: usize, forever: bool) -> Response {
    let chunk_bytes = if chunk_bytes == 0 { 16 } else { chunk_bytes };
    let chunks: VecDeque<Bytes> = body
        .chunks(chunk_bytes)
        .map(Bytes::copy_from_slice)
        .collect();
    let every = Duration::from_millis(every_ms);
    let stream = futures::stream::unfold(chunks, move |mut chunks| async move {
        tokio::time::sleep(every).await;
        match chunks.pop_front() {
            Some(chunk) => Some((Ok::<_, std::io::Error>(chunk), chunks)),
            // Trailing whitespace keeps the JSON valid while the body never ends.
            None if forever => Some((Ok(Bytes::from_static(b" ")), chunks)),
            None => None,
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_read_from_json_with_defaults() {
        let script: Script = serde_json::from_value(json!({
            "api_key": "k",
            "models": {
                "m": {"queue": [{"reply": "rate_limited", "retry_after": "7"},
                                {"reply": "status", "status": 503, "delay_ms": 20}],
                      "then": {"reply": "reset"}}
            }
        }))
        .expect("a script");
        assert_eq!(script.default, default_step());
        let m = &script.models["m"];
        assert_eq!(
            m.queue[0].reply,
            Reply::RateLimited {
                retry_after: Some("7".into())
            }
        );
        assert_eq!(m.queue[1], Reply::status(503).after(20));
        assert_eq!(m.then, Some(Reply::Reset.into()));
    }

    #[test]
    fn a_model_takes_its_queue_then_its_default() {
        let script = Script::new()
            .model_queue("m", [Reply::status(500), Reply::status(401)], None)
            .model_queue("n", [Reply::Empty], Some(Reply::Malformed.into()));
        let shared = Shared {
            script,
            queues: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
        };
        let replies = |model: &str, n: usize| -> Vec<Reply> {
            (0..n).map(|_| shared.next_step(model).reply).collect()
        };
        assert_eq!(
            replies("m", 3),
            [Reply::status(500), Reply::status(401), default_step().reply]
        );
        assert_eq!(
            replies("n", 3),
            [Reply::Empty, Reply::Malformed, Reply::Malformed]
        );
        assert_eq!(replies("other", 1), [default_step().reply]);
    }
}
