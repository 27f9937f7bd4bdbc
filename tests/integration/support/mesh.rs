//! Two (or more) real runtimes on a real NATS server: in-process `advisord` daemons with
//! their own places (data directory, socket, catalogue, records) joined to one bus, and a
//! hand-made peer speaking the wire format directly for the faults a daemon never makes.
//!
//! A runtime id is `<name>-<its key's fingerprint>`: tests name runtimes and compare
//! advisor ids by name ([`short`]), and pin peers in the asker's own peers file
//! ([`pin`]).

#![allow(dead_code)]

use super::daemon::{call_json, Daemon, Place, Reply, BOUND, TASK};
use advisord::daemon::mesh::{MeshConfig, Offer};
use advisord::pins;
use advisord_adapters::mesh::identity::{self, Identity, Kind};
use advisord_adapters::mesh::wire;
use advisord_adapters::registry::Registry;
use async_nats::service::ServiceExt;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often test daemons sweep for peers.
pub const SWEEP: Duration = Duration::from_millis(200);

/// A catalogue of one scripted advisor `id` (adapter `scripted-<id>`) offering
/// `independent_reasoning` and `code_review`, answering as `vendor/model`.
pub fn one_advisor(id: &str, vendor: &str, model: &str) -> String {
    format!(
        "mode: strict\nadvisors:\n  - id: {id}\n    title: Test advisor {id}\n    \
         transport: http\n    adapter: scripted-{id}\n    \
         references: {{ provider: {vendor}, vendor: {vendor}, model: {model} }}\n    \
         capabilities: [independent_reasoning, code_review]\n"
    )
}

/// The user's config directory of a test daemon's place (`advisor-consult mesh pin` run
/// with `XDG_CONFIG_HOME` set to it writes the daemon's peers file).
pub fn config_home(place: &Place) -> std::path::PathBuf {
    place.path().join("config")
}

/// The peers file of a test daemon's place.
pub fn peers_file(place: &Place) -> std::path::PathBuf {
    pins::file_in(&config_home(place).join("advisord"))
}

/// Pin `runtime` (with `key`, and `owner`) in `place`'s peers file.
pub fn pin(place: &Place, runtime: &str, key: &str, owner: Option<&str>) {
    let pin = pins::Pin::new(runtime, key, owner).expect("a valid pin");
    pins::pin(&peers_file(place), pin).expect("the pin is kept");
}

/// The mesh config of a test daemon: its runtime's name, a fast sweep, its own peers
/// file, and (for a relay) the relay's context over the daemon's own place.
pub fn mesh_config(url: &str, runtime: &str, offer: Option<Offer>, place: &Place) -> MeshConfig {
    let mut config = MeshConfig::new(url);
    config.runtime = Some(runtime.to_string());
    config.peers_file = Some(peers_file(place));
    config.offer = offer;
    config.sweep_every = SWEEP;
    let relay_root = place.path().join("relay");
    std::fs::create_dir_all(&relay_root).expect("the relay root");
    config.relay_context = Some(
        serde_json::from_value(json!({
            "root": relay_root,
            "state_dir": place.state(),
            "task": "mesh-relay",
            "catalogue_path": place.catalogue(),
            "path": place.bin(),
        }))
        .expect("a relay context"),
    );
    config
}

/// Start a daemon on `place` joined to `url` as `runtime`.
pub async fn start_on_mesh(
    place: Place,
    registry: Registry,
    url: &str,
    runtime: &str,
    offer: Option<Offer>,
) -> Daemon {
    let config = mesh_config(url, runtime, offer, &place);
    Daemon::start_in(
        place,
        registry,
        Box::new(move |c| {
            c.mesh = Some(config);
        }),
    )
    .await
}

/// The asker's context: every catalogue advisor disabled by name.
pub fn asker_context(place: &Place, disable: &str) -> Value {
    let mut context = place.context();
    context["disable"] = json!(disable);
    context
}

/// `advisors` as the asker sees it.
pub async fn advisors(daemon: &Daemon, context: &Value) -> Value {
    call_json(
        &daemon.socket(),
        "GET",
        "/api/v1/reasoning/advisors",
        &json!({"context": context}),
    )
    .await
    .expect(200)
}

/// An advisor id with a mesh peer's key fingerprint left out: `mesh:<name>`.
pub fn short(id: &str) -> String {
    match id.strip_prefix("mesh:") {
        Some(runtime) => format!("mesh:{}", identity::name_of(runtime)),
        None => id.to_string(),
    }
}

/// The ids of the advisors listed, by name ([`short`]).
pub fn ids(view: &Value) -> Vec<String> {
    view["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .map(|a| short(a["id"].as_str().unwrap_or_default()))
        .collect()
}

/// The row of the advisor named `name` ([`short`]).
pub fn row(view: &Value, name: &str) -> Value {
    view["advisors"]
        .as_array()
        .expect("advisors")
        .iter()
        .find(|a| short(a["id"].as_str().unwrap_or_default()) == name)
        .cloned()
        .unwrap_or_else(|| panic!("no advisor {name}: {view}"))
}

/// A daemon's runtime id, as its `health` says.
pub async fn runtime_of(daemon: &Daemon) -> String {
    let health = get(&daemon.socket(), "/api/v1/health").await.expect(200);
    health["mesh"]["runtime"]
        .as_str()
        .expect("a runtime id")
        .to_string()
}

/// A daemon's public key (the one in its data directory).
pub fn key_of(daemon: &Daemon) -> String {
    let seed = std::fs::read_to_string(daemon.place.data().join("mesh/key")).expect("a key");
    Identity::from_seed("x", &seed)
        .expect("a seed")
        .public_key()
}

/// Poll `advisors` until `check` holds (bounded); the view and how long it took.
pub async fn advisors_until(
    daemon: &Daemon,
    context: &Value,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let view = advisors(daemon, context).await;
        if check(&view) {
            return (view, started.elapsed());
        }
        assert!(
            started.elapsed() < BOUND,
            "waited {BOUND:?} for {what}: {view}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Record `record` in the helper's task under `context`; the stored record.
pub async fn record(daemon: &Daemon, context: &Value, record: Value) -> Value {
    call_json(
        &daemon.socket(),
        "POST",
        "/api/v1/reasoning/records",
        &json!({"context": context, "record": record}),
    )
    .await
    .expect(201)
}

/// A code-review assessment of `materiality`; its id.
pub async fn code_review(daemon: &Daemon, context: &Value, materiality: &str) -> String {
    let stored = record(
        daemon,
        context,
        json!({
            "kind": "assessment",
            "subject": "keep one writer for the records",
            "materiality": materiality,
            "hypothesis": "one writer under a lock is enough",
            "capabilities": ["code_review"],
            "evidence": [{"kind": "file", "ref": "src/store.rs"}],
        }),
    )
    .await;
    stored["id"].as_str().expect("an id").to_string()
}

/// A plan preview for a code review of `materiality`.
pub async fn preview(daemon: &Daemon, context: &Value, materiality: &str) -> Value {
    call_json(
        &daemon.socket(),
        "POST",
        "/api/v1/reasoning/plan",
        &json!({"context": context, "materiality": materiality, "confidence": "low",
                "capabilities": ["code_review"]}),
    )
    .await
    .expect(200)
}

/// The advisors a plan selected, by name ([`short`]).
pub fn selected(plan: &Value) -> Vec<String> {
    plan["selected"]
        .as_array()
        .expect("selected")
        .iter()
        .map(|s| short(s["advisor"].as_str().unwrap_or_default()))
        .collect()
}

/// Queue a consultation under `context`; the job id.
pub async fn consult(daemon: &Daemon, context: &Value, assessment: &str, timeout_s: f64) -> String {
    let job = call_json(
        &daemon.socket(),
        "POST",
        "/api/v1/consultations",
        &json!({"context": context, "assessment": assessment, "timeout_s": timeout_s}),
    )
    .await
    .expect(202);
    job["id"].as_str().expect("a job id").to_string()
}

/// The consultation records of the helper's task on `place`.
pub fn consultations(place: &Place) -> Vec<Value> {
    place.records_of(TASK, "consultation")
}

/// `GET` `path` on `socket`.
pub async fn get(socket: &Path, path: &str) -> Reply {
    super::daemon::call(socket, "GET", path, None).await
}

/// How a hand-made peer answers.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// Never answers (a peer that dies or hangs).
    Silent,
    /// Answers bytes that are not a reply.
    Garbage,
    /// Sends `n` replies naming other requests, then the right one.
    Unasked(usize),
    /// Answers `rate_limited`, asking to wait this many seconds.
    RateLimited(u64),
}

/// A peer registered straight on the bus with `async-nats`: the same service, metadata and
/// endpoint as a daemon's, answering as `behaviour` says. Dropping it closes its
/// connection, as a killed process would.
pub struct FakePeer {
    /// Its runtime id.
    pub runtime: String,
    /// Its key pair.
    pub identity: Identity,
    /// Requests received, by request id.
    pub received: Arc<std::sync::Mutex<Vec<String>>>,
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakePeer {
    /// Start the peer named `name` (a key of its own) on `url`.
    pub async fn start(url: &str, name: &str, behaviour: Behaviour) -> FakePeer {
        FakePeer::start_as(url, Identity::generate(name), behaviour, "fake/model").await
    }

    /// Start the peer of `identity` on `url`, saying `source` produces its answers.
    pub async fn start_as(
        url: &str,
        identity: Identity,
        behaviour: Behaviour,
        source: &str,
    ) -> FakePeer {
        let runtime = identity.runtime().to_string();
        let client = async_nats::connect(url)
            .await
            .expect("the fake peer connects");
        let metadata: HashMap<String, String> = [
            (wire::keys::RUNTIME, runtime.clone()),
            (wire::keys::KEY, identity.public_key()),
            (wire::keys::HOST, "fakehost".to_string()),
            (wire::keys::USER, "fake".to_string()),
            (
                wire::keys::CAPABILITIES,
                "independent_reasoning,code_review".to_string(),
            ),
            (wire::keys::SOURCES, source.to_string()),
            (wire::keys::OFFER, "relay".to_string()),
            (wire::keys::PROTOCOL, wire::PROTOCOL.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let service = client
            .service_builder()
            .metadata(metadata)
            .start(wire::SERVICE_NAME, wire::SERVICE_VERSION)
            .await
            .expect("the fake service");
        let mut endpoint = service
            .endpoint_builder()
            .name("reviews")
            .add(wire::review_subject(&runtime))
            .await
            .expect("the fake endpoint");
        let received: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let seen = received.clone();
        let (me, source) = (identity.clone(), source.to_string());
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut killed = killed;
            loop {
                let request = tokio::select! {
                    _ = &mut killed => break,
                    request = endpoint.next() => match request {
                        Some(request) => request,
                        None => break,
                    },
                };
                let opened = identity::open(Kind::Request, &request.message.payload)
                    .expect("a sealed request");
                let asked: wire::ReviewRequest =
                    serde_json::from_str(&opened.body).expect("a review request");
                seen.lock().unwrap().push(asked.request_id.clone());
                let reply = |id: &str| {
                    let body = json!({"protocol": 1, "request_id": id, "status": "completed",
                           "answer": {"conclusion": "the fake peer agrees", "stance": "supports",
                                      "assumptions": [], "risks": [], "actions": [],
                                      "falsifiers": [], "confidence": 0.5},
                           "source": source});
                    me.seal(Kind::Reply, body.to_string().as_bytes())
                };
                let reply_to = request.message.reply.clone().expect("a reply subject");
                match behaviour {
                    Behaviour::Silent => {}
                    Behaviour::Garbage => {
                        let _ = client.publish(reply_to, "<<not json>>".into()).await;
                    }
                    Behaviour::RateLimited(wait) => {
                        let body = json!({"protocol": 1, "request_id": asked.request_id,
                            "status": "failed", "failure": "rate_limited",
                            "diagnostic": "come back much later", "retry_after_s": wait});
                        let sealed = me.seal(Kind::Reply, body.to_string().as_bytes());
                        let _ = client.publish(reply_to, sealed.into()).await;
                    }
                    Behaviour::Unasked(n) => {
                        for i in 0..n {
                            let other = reply(&format!("OTHER{i}"));
                            let _ = client.publish(reply_to.clone(), other.into()).await;
                        }
                        let _ = client
                            .publish(reply_to, reply(&asked.request_id).into())
                            .await;
                    }
                }
                let _ = client.flush().await;
            }
            let _ = service.stop().await;
            drop(endpoint);
            drop(client);
        });
        FakePeer {
            runtime,
            identity,
            received,
            kill: Some(kill),
            task,
        }
    }

    /// Kill it: its service and connection go away with nothing said.
    pub async fn kill(mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        let _ = tokio::time::timeout(BOUND, &mut self.task).await;
    }
}
