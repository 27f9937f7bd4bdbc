//! Runs `advisord` for a test: in-process on a temporary socket (`Daemon::start`), with
//! a test catalogue whose advisors are reached through adapters the test registers
//! (usually `ScriptedAdapter`s), or the real binary for signal tests (`Binary`).
//!
//! Every wait is bounded ([`BOUND`]): a test that hangs fails instead.

#![allow(dead_code)]

use advisord::daemon::{self, Config};
use advisord_adapters::registry::Registry;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The longest any single wait of a test may take.
pub const BOUND: Duration = Duration::from_secs(20);

/// The task every helper request names.
pub const TASK: &str = "t";

/// An answer text a scripted advisor gives: a conclusion with `stance`.
pub fn answer(conclusion: &str, stance: &str) -> String {
    json!({
        "conclusion": conclusion,
        "stance": stance,
        "assumptions": [format!("{conclusion} assumes")],
        "falsifiers": [format!("{conclusion} fails if")],
        "confidence": 0.6,
    })
    .to_string()
}

/// One advisor of a test catalogue.
pub struct Advisor {
    /// Its id.
    pub id: String,
    /// The adapter it is reached through.
    pub adapter: String,
    /// `process`, `http` or `mesh`.
    pub transport: String,
    /// `max_concurrent`.
    pub max_concurrent: u32,
    /// Extra YAML lines (already indented by four spaces), e.g. `executable: /x`.
    pub extra: Vec<String>,
}

impl Advisor {
    /// An advisor `id` reached through the adapter `scripted-<id>`.
    pub fn scripted(id: &str) -> Advisor {
        Advisor {
            id: id.to_string(),
            adapter: format!("scripted-{id}"),
            transport: "http".to_string(),
            max_concurrent: 2,
            extra: Vec::new(),
        }
    }

    /// A process advisor `id` running `executable` (an absolute path).
    pub fn process(id: &str, executable: &Path) -> Advisor {
        Advisor {
            id: id.to_string(),
            adapter: "process".to_string(),
            transport: "process".to_string(),
            max_concurrent: 2,
            extra: vec![format!("    executable: {}", executable.display())],
        }
    }

    /// An HTTP advisor `id` asking `model` of an Ollama-compatible server at `endpoint`
    /// (the fake LLM server's base URL).
    pub fn http(id: &str, endpoint: &str, model: &str) -> Advisor {
        Advisor {
            id: id.to_string(),
            adapter: "ollama".to_string(),
            transport: "http".to_string(),
            max_concurrent: 2,
            extra: vec![
                format!("    endpoint: {endpoint}"),
                format!("    model: {model}"),
            ],
        }
    }

    /// The same with `max_concurrent` set.
    pub fn max_concurrent(mut self, n: u32) -> Advisor {
        self.max_concurrent = n;
        self
    }

    /// The same with an extra YAML line (indented by the helper).
    pub fn with(mut self, line: &str) -> Advisor {
        self.extra.push(format!("    {line}"));
        self
    }
}

/// A catalogue (YAML) of `advisors` in that order, `mode: strict` so a critical
/// assessment may select three.
pub fn catalogue(advisors: &[Advisor]) -> String {
    if advisors.is_empty() {
        return "mode: strict\nadvisors: []\n".to_string();
    }
    let mut yaml = String::from("mode: strict\nadvisors:\n");
    for (i, a) in advisors.iter().enumerate() {
        yaml.push_str(&format!(
            "  - id: {id}\n    title: Test advisor {id}\n    transport: {transport}\n    \
             adapter: {adapter}\n    references: {{ provider: p{i}, vendor: v{i}, model: m{i} }}\n    \
             capabilities: [independent_reasoning]\n    max_concurrent: {n}\n",
            id = a.id,
            adapter = a.adapter,
            transport = a.transport,
            n = a.max_concurrent,
        ));
        for line in &a.extra {
            yaml.push_str(line);
            yaml.push('\n');
        }
    }
    yaml
}

/// A temporary home for a daemon: project root, state, data directory, socket, catalogue
/// and an empty `bin` for `PATH`. Survives daemon restarts.
pub struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    /// A fresh place whose catalogue is `catalogue_yaml`.
    pub fn new(catalogue_yaml: &str) -> Place {
        Place::new_in(&std::env::temp_dir(), catalogue_yaml)
    }

    /// A fresh place under `parent` (another file system than the temporary directory's).
    pub fn new_in(parent: &Path, catalogue_yaml: &str) -> Place {
        let dir = tempfile::tempdir_in(parent).expect("a temporary directory");
        for sub in ["root", "bin", "data"] {
            std::fs::create_dir(dir.path().join(sub)).expect("create a directory");
        }
        let place = Place { dir };
        place.set_catalogue(catalogue_yaml);
        place
    }

    /// Replace the catalogue.
    pub fn set_catalogue(&self, catalogue_yaml: &str) {
        std::fs::write(self.catalogue(), catalogue_yaml).expect("write the catalogue");
    }

    /// The temporary directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    /// The project root.
    pub fn root(&self) -> PathBuf {
        self.path().join("root")
    }
    /// The state directory.
    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }
    /// The daemon's data directory.
    pub fn data(&self) -> PathBuf {
        self.path().join("data")
    }
    /// The socket (in a directory the daemon creates).
    pub fn socket(&self) -> PathBuf {
        self.path().join("run").join("advisord.sock")
    }
    /// The real `advisord` on this place's socket and data directory, standard input
    /// closed: add what the test needs, then spawn or run it.
    pub fn advisord(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisord"));
        command
            .arg("--socket")
            .arg(self.socket())
            .arg("--data-dir")
            .arg(self.data())
            .stdin(Stdio::null());
        command
    }
    /// The catalogue file.
    pub fn catalogue(&self) -> PathBuf {
        self.path().join("catalogue.yaml")
    }
    /// The only directory on the requests' `PATH`.
    pub fn bin(&self) -> PathBuf {
        self.path().join("bin")
    }

    /// The request context every helper request carries.
    pub fn context(&self) -> Value {
        json!({
            "root": self.root(),
            "state_dir": self.state(),
            "task": TASK,
            "catalogue_path": self.catalogue(),
            "path": self.bin(),
            "credentials": {},
        })
    }

    /// The same context naming another task.
    pub fn context_for(&self, task: &str) -> Value {
        let mut context = self.context();
        context["task"] = json!(task);
        context
    }

    /// Write an executable shell script `name` into the temporary directory (with the
    /// system's `PATH`: the requests' own holds only the empty `bin`); its path.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\nPATH=/usr/bin:/bin\n{body}\n"))
            .expect("write a script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        path
    }

    /// Every record of `task`, read from the state directory, in sequence order.
    pub fn records(&self, task: &str) -> Vec<Value> {
        let dir = self.state().join(task);
        let mut records: Vec<Value> = match std::fs::read_dir(&dir) {
            Err(_) => return Vec::new(),
            Ok(entries) => entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.ends_with(".json") && !name.starts_with('.')
                })
                .map(|e| {
                    let bytes = std::fs::read(e.path()).expect("read a record");
                    serde_json::from_slice(&bytes).expect("a record is JSON")
                })
                .collect(),
        };
        records.sort_by_key(|r| r["sequence"].as_u64());
        records
    }

    /// The records of `task` of one kind.
    pub fn records_of(&self, task: &str, kind: &str) -> Vec<Value> {
        self.records(task)
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect()
    }

    /// The advisor of each consultation of `task`, in sequence order.
    pub fn consulted(&self, task: &str) -> Vec<String> {
        self.records_of(task, "consultation")
            .iter()
            .map(|r| r["advisor"].as_str().expect("an advisor").to_string())
            .collect()
    }

    /// Record a critical assessment of `subject` in the helper's task through the daemon
    /// on this place's socket; its id.
    pub async fn assess(&self, subject: &str, hypothesis: &str, evidence: &str) -> String {
        let body = json!({"context": self.context(), "record": {
            "kind": "assessment", "subject": subject, "materiality": "critical",
            "hypothesis": hypothesis, "evidence": [{"kind": "file", "ref": evidence}]}});
        call_json(&self.socket(), "POST", "/api/v1/reasoning/records", &body)
            .await
            .expect(201)["id"]
            .as_str()
            .expect("an id")
            .to_string()
    }
}

/// A reply: status and body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// Assert the status, returning the JSON body.
    pub fn expect(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self.json()
    }
}

/// One HTTP/1.1 request over the socket.
pub async fn call(socket: &Path, method: &str, path: &str, body: Option<Vec<u8>>) -> Reply {
    tokio::time::timeout(BOUND, async {
        let stream = UnixStream::connect(socket)
            .await
            .expect("connect to the daemon");
        let (status, _, body) = exchange(stream, method, path, &[("host", "advisord")], body).await;
        Reply { status, body }
    })
    .await
    .unwrap_or_else(|_| panic!("`{method} {path}` got no reply within {BOUND:?}"))
}

/// Send one HTTP/1.1 request with exactly `headers` (and a JSON content type when there
/// is a body) over `stream`; the reply's status, headers and body.
pub async fn exchange<S>(
    stream: S,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (u16, hyper::HeaderMap, Bytes)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("an HTTP handshake");
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("a request");
    let response = sender.send_request(request).await.expect("a response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (status, headers, body)
}

/// A request with a JSON body.
pub async fn call_json(socket: &Path, method: &str, path: &str, body: &Value) -> Reply {
    call(socket, method, path, Some(body.to_string().into_bytes())).await
}

/// Every event of a job's stream until it ends (bounded).
pub async fn events(socket: &Path, job: &str) -> Vec<Value> {
    let reply = call(
        socket,
        "GET",
        &format!("/api/v1/consultations/{job}/events"),
        None,
    )
    .await;
    assert_eq!(reply.status, 200);
    String::from_utf8(reply.body.to_vec())
        .expect("NDJSON is UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

/// A daemon running in this process.
///
/// Its fields are dropped in order: a test that ends without [`Daemon::stop`] stops the
/// daemon first (`running`), then its socket goes, and only then its place. Removed
/// while the daemon still ran, the place could be written into as it went (a job's end
/// is journaled after its `done`), and a directory left behind in the temporary
/// directory.
pub struct Daemon {
    running: Running,
    guard: Option<daemon::socket::SocketGuard>,
    /// Where it keeps everything.
    pub place: Place,
}

/// The daemon's task and the signal that stops it; stopped when dropped.
struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), daemon::DaemonError>>>,
}

impl Running {
    /// Tell the daemon to stop (once).
    fn signal(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Stop the daemon and wait for it, checking that it stopped cleanly.
    async fn shutdown(&mut self) {
        self.signal();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(BOUND, task)
                .await
                .expect("the daemon stops within the bound")
                .expect("the daemon task does not panic")
                .expect("the daemon stops cleanly");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.signal();
        let Some(task) = self.task.take() else {
            return;
        };
        // The daemon needs a multi-threaded runtime (it works in place on its threads), so
        // one is there to wait on; its outcome was the test's to check (`stop`).
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| {
                    let _ = handle.block_on(tokio::time::timeout(BOUND, task));
                });
            }
            _ => task.abort(),
        }
    }
}

/// How to configure an in-process daemon beyond the defaults.
pub type Tweak = Box<dyn FnOnce(&mut Config)>;

impl Daemon {
    /// Start a daemon on a fresh place with `catalogue_yaml` and `registry`.
    pub async fn start(catalogue_yaml: &str, registry: Registry) -> Daemon {
        Daemon::start_in(Place::new(catalogue_yaml), registry, Box::new(|_| {})).await
    }

    /// Start a daemon on `place` (kept from an earlier daemon, for restarts).
    pub async fn start_in(place: Place, registry: Registry, tweak: Tweak) -> Daemon {
        let bound = daemon::socket::bind(&place.socket())
            .await
            .expect("bind the test socket");
        let (listener, guard) = bound.into_parts();
        let mut config = Config::new(place.data());
        config.registry = registry;
        config.grace = Duration::from_millis(300);
        tweak(&mut config);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(daemon::run(
            listener,
            async move {
                let _ = stopped.await;
            },
            config,
        ));
        Daemon {
            running: Running {
                stop: Some(stop),
                task: Some(task),
            },
            guard: Some(guard),
            place,
        }
    }

    /// The socket.
    pub fn socket(&self) -> PathBuf {
        self.place.socket()
    }

    /// A request with an optional JSON body.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        call(
            &self.socket(),
            method,
            path,
            body.map(|b| b.to_string().into_bytes()),
        )
        .await
    }

    /// Record `record` in the helper's task; the stored record.
    pub async fn record(&self, record: Value) -> Value {
        self.record_in(TASK, record).await
    }

    /// Record `record` in `task`; the stored record.
    pub async fn record_in(&self, task: &str, record: Value) -> Value {
        let body = json!({"context": self.place.context_for(task), "record": record});
        self.call("POST", "/api/v1/reasoning/records", Some(body))
            .await
            .expect(201)
    }

    /// Record a critical assessment with evidence in `task`; its id.
    pub async fn assessment_in(&self, task: &str) -> String {
        let record = self
            .record_in(
                task,
                json!({
                    "kind": "assessment",
                    "subject": "use one writer for every record",
                    "materiality": "critical",
                    "hypothesis": "one writer under a lock is enough",
                    "assumptions": ["the lock is honoured"],
                    "evidence": [{"kind": "file", "ref": "src/store.rs"}],
                }),
            )
            .await;
        record["id"].as_str().expect("an id").to_string()
    }

    /// Record a critical assessment in the helper's task; its id.
    pub async fn assessment(&self) -> String {
        self.assessment_in(TASK).await
    }

    /// Queue a consultation on `assessment` in `task` with `timeout_s`; the job (202).
    pub async fn consult_in(&self, task: &str, assessment: &str, timeout_s: f64) -> Value {
        let body = json!({
            "context": self.place.context_for(task),
            "assessment": assessment,
            "timeout_s": timeout_s,
        });
        self.call("POST", "/api/v1/consultations", Some(body))
            .await
            .expect(202)
    }

    /// Queue a consultation in the helper's task.
    pub async fn consult(&self, assessment: &str, timeout_s: f64) -> Value {
        self.consult_in(TASK, assessment, timeout_s).await
    }

    /// The events of `job` until it ends.
    pub async fn events(&self, job: &str) -> Vec<Value> {
        events(&self.socket(), job).await
    }

    /// Wait for `job` to end; the job as it ended (from its `done` event).
    pub async fn wait(&self, job: &str) -> Value {
        let events = self.events(job).await;
        let last = events.last().expect("at least the done event");
        assert_eq!(
            last["event"], "done",
            "the stream ends with done: {events:?}"
        );
        last["result"].clone()
    }

    /// The job as it stands.
    pub async fn job(&self, job: &str) -> Value {
        self.call("GET", &format!("/api/v1/consultations/{job}"), None)
            .await
            .expect(200)
    }

    /// Poll `check` on the job until it holds (bounded).
    pub async fn until(&self, job: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let now = self.job(job).await;
            if check(&now) {
                return now;
            }
            assert!(
                started.elapsed() < BOUND,
                "waited {BOUND:?} for {what}: {now}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stop the daemon as SIGTERM would; its place, for a restart.
    pub async fn stop(mut self) -> Place {
        self.shutdown().await;
        let Daemon { place, .. } = self;
        place
    }

    async fn shutdown(&mut self) {
        self.running.shutdown().await;
        self.guard.take();
    }
}

/// The real `advisord` binary, running as a child.
pub struct Binary {
    /// The child.
    pub child: Child,
    /// Its socket.
    pub socket: PathBuf,
}

impl Binary {
    /// Start `advisord` on `place` (foreground, as a child), waiting until it answers.
    pub fn start(place: &Place, extra_args: &[&str]) -> Binary {
        Binary::start_with_env(place, extra_args, &[])
    }

    /// The same, with `env` added to the daemon's own environment.
    pub fn start_with_env(place: &Place, extra_args: &[&str], env: &[(&str, &str)]) -> Binary {
        let child = place
            .advisord()
            .envs(env.iter().copied())
            .args(extra_args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start advisord");
        let binary = Binary {
            child,
            socket: place.socket(),
        };
        binary.wait_until_answering();
        binary
    }

    fn wait_until_answering(&self) {
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            assert!(
                started.elapsed() < BOUND,
                "advisord did not answer within {BOUND:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Send `signal` and wait (bounded) for the exit status.
    pub fn signal_and_wait(
        &mut self,
        signal: nix::sys::signal::Signal,
    ) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal advisord");
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for advisord") {
                return status;
            }
            assert!(
                started.elapsed() < BOUND,
                "advisord did not exit within {BOUND:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Poll until `check` holds, or panic after [`BOUND`] naming `what`.
pub fn wait_for(what: &str, check: impl Fn() -> bool) {
    wait_for_within(what, BOUND, check);
}

/// Poll until `check` holds, or panic after `bound` naming `what`.
pub fn wait_for_within(what: &str, bound: Duration, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < bound, "waited {bound:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
