//! Mesh advisors: two (or more) real runtimes and a real NATS server.
//!
//! Every test starts its own `nats-server` on a loopback port (see
//! `advisord_fakes::nats`; it fails, naming `scripts/ci/install-nats.sh`, when no server
//! binary is found) and in-process daemons with their own places.

use crate::support::daemon as daemon_helper;
use crate::support::mesh::*;

use advisord::daemon::mesh::Offer;
use advisord_adapters::registry::Registry;
use advisord_fakes::nats::NatsServer;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon_helper::{answer, call_json, Daemon, Place, BOUND, TASK};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A registry with one scripted advisor `id` playing `scripts`.
fn scripted(id: &str, scripts: Vec<Script>) -> (Registry, Arc<ScriptedAdapter>) {
    let fake = Arc::new(ScriptedAdapter::new(scripts));
    let mut registry = Registry::builtin();
    registry.insert(&format!("scripted-{id}"), fake.clone());
    (registry, fake)
}

/// A relaying peer `runtime` whose one advisor answers `scripts`.
async fn relay_peer(
    url: &str,
    runtime: &str,
    vendor_model: (&str, &str),
    scripts: Vec<Script>,
) -> (Daemon, Arc<ScriptedAdapter>) {
    let place = Place::new(&one_advisor("house", vendor_model.0, vendor_model.1));
    let (registry, fake) = scripted("house", scripts);
    let daemon = start_on_mesh(place, registry, url, runtime, Some(Offer::Relay)).await;
    (daemon, fake)
}

/// An asking daemon whose only catalogue advisor (`local`) is disabled by its context.
async fn start_asker(url: &str) -> (Daemon, serde_json::Value) {
    let place = Place::new(&one_advisor("local", "localvendor", "localmodel"));
    let (registry, _) = scripted("local", vec![]);
    let daemon = start_on_mesh(place, registry, url, "asker", None).await;
    let context = asker_context(&daemon.place, "local");
    (daemon, context)
}

/// An inbox peer named `runtime` holding one review, asked by a fresh asker's material
/// consultation: the inbox, the asker, its context, the job and the waiting item (polled
/// up to `BOUND`).
async fn a_review_waiting_in_an_inbox(
    nats: &NatsServer,
    runtime: &str,
) -> (Daemon, Daemon, serde_json::Value, String, serde_json::Value) {
    let inbox = start_on_mesh(
        Place::new(&one_advisor("unused", "v", "m")),
        Registry::builtin(),
        &nats.url(),
        runtime,
        Some(Offer::Inbox),
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &[runtime]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let job = consult(&asker, &context, &assessment, 30.0).await;
    let started = Instant::now();
    let waiting = loop {
        let list = get(&inbox.socket(), "/api/v1/reviews").await.expect(200);
        if let Some(first) = list["reviews"].as_array().and_then(|r| r.first()).cloned() {
            break first;
        }
        assert!(
            started.elapsed() < BOUND,
            "no review reached the inbox: {list}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    (inbox, asker, context, job, waiting)
}

async fn wait_for_peers(daemon: &Daemon, context: &serde_json::Value, peers: &[&str]) {
    let want: Vec<String> = peers.iter().map(|p| format!("mesh:{p}")).collect();
    advisors_until(daemon, context, "the peers to appear", |view| {
        let listed = ids(view);
        want.iter().all(|w| listed.contains(w))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relaying_runtime_answers_a_code_review_and_leaves_when_it_goes() {
    let nats = NatsServer::start();
    let (peer, fake) = relay_peer(
        &nats.url(),
        "peer-b",
        ("vb", "mb"),
        vec![Script::answer(&answer("peer b reviewed it", "opposes"))],
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;

    // The linked runtime is an advisor: transport and adapter `mesh`, where it runs.
    let (view, _) = advisors_until(&asker, &context, "peer-b to appear", |view| {
        ids(view).contains(&"mesh:peer-b".to_string())
    })
    .await;
    let row = row(&view, "mesh:peer-b");
    assert_eq!(row["transport"], "mesh");
    assert_eq!(row["adapter"], "mesh");
    assert_eq!(row["status"], "available", "{row}");
    assert!(row["title"].as_str().unwrap().contains("vb/mb"), "{row}");
    assert_eq!(view["mesh"]["state"], "connected", "{view}");
    // Pinned by the user, its answers count as reviews from its owner.
    pin(
        &asker.place,
        &runtime_of(&peer).await,
        &key_of(&peer),
        Some("Bob"),
    );
    let local = view["advisors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "local")
        .unwrap();
    assert_eq!(local["status"], "disabled");

    // A code-review plan selects it.
    assert_eq!(
        selected(&preview(&asker, &context, "material").await),
        vec!["mesh:peer-b"]
    );
    let assessment = code_review(&asker, &context, "material").await;
    let job = consult(&asker, &context, &assessment, 20.0).await;
    let ended = asker.wait(&job).await;
    assert_eq!(ended["state"], "done", "{ended}");

    // Read back as a consultation, with the source that produced it.
    let consultations = consultations(&asker.place);
    assert_eq!(consultations.len(), 1, "{consultations:?}");
    let c = &consultations[0];
    assert_eq!(short(c["advisor"].as_str().unwrap()), "mesh:peer-b");
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(c["conclusion"], "peer b reviewed it");
    assert_eq!(c["stance"], "opposes");
    // Credited to the verified identity (its pinned owner), not to what it says answered.
    assert_eq!(c["source"], "peer:bob");
    // The divergent answer made a disagreement, as any advisor's would.
    assert_eq!(asker.place.records_of(TASK, "disagreement").len(), 1);

    // The peer asked its own advisor with the question only, through its own job: the
    // records stay on the peer, in its relay task; none of the asker's crossed.
    fake.assert_exhausted();
    let prompt = &fake.prompts()[0];
    assert!(
        prompt.contains("one writer under a lock is enough"),
        "{prompt}"
    );
    assert!(
        !prompt.contains(&assessment),
        "the asker's record ids stay home"
    );
    let relay_kinds: Vec<String> = peer
        .place
        .records("mesh-relay")
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect();
    // (Its own job records the divergence it saw, too.)
    assert_eq!(
        relay_kinds[..3],
        ["assessment", "plan", "consultation"],
        "{relay_kinds:?}"
    );
    assert!(peer.place.records(TASK).is_empty());

    // Once the runtime is gone, the advisor disappears and the same plan decides locally.
    let place = peer.stop().await;
    advisors_until(&asker, &context, "peer-b to leave", |view| {
        !ids(view).contains(&"mesh:peer-b".to_string())
    })
    .await;
    let plan = preview(&asker, &context, "material").await;
    assert!(selected(&plan).is_empty(), "{plan}");
    assert!(
        !plan["local_review"].as_array().unwrap().is_empty(),
        "{plan}"
    );
    drop(place);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_inbox_review_is_answered_by_a_second_session_across_a_restart() {
    let nats = NatsServer::start();
    // The review waits in the inbox...
    let (inbox, asker, _context, job, waiting) =
        a_review_waiting_in_an_inbox(&nats, "inbox-c").await;
    assert_eq!(
        advisord_adapters::mesh::identity::name_of(waiting["asker"].as_str().unwrap()),
        "asker"
    );
    assert!(waiting["question"].as_str().unwrap().contains("one writer"));
    // ...and survives a restart of the peer.
    let place = inbox.stop().await;
    let inbox = start_on_mesh(
        place,
        Registry::builtin(),
        &nats.url(),
        "inbox-c",
        Some(Offer::Inbox),
    )
    .await;
    let id = waiting["id"].as_str().unwrap().to_string();
    let list = get(&inbox.socket(), "/api/v1/reviews").await.expect(200);
    assert_eq!(list["reviews"][0]["id"], id.as_str(), "{list}");

    // A second session answers it with the real CLI.
    let answer_file = inbox.place.path().join("answer.json");
    std::fs::write(
        &answer_file,
        json!({"conclusion": "a person reviewed it and agrees", "stance": "supports",
               "risks": ["the lock is advisory"], "confidence": 0.8})
        .to_string(),
    )
    .unwrap();
    let inbox_socket = inbox.socket();
    let root = inbox.place.root();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
            .args(["--no-autostart", "--format", "json", "--socket"])
            .arg(&inbox_socket)
            .arg("--root")
            .arg(&root)
            .args(["reviews", "answer", &id, "--file"])
            .arg(&answer_file)
            .output()
            .expect("run advisor-consult")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ended = asker.wait(&job).await;
    assert_eq!(ended["state"], "done", "{ended}");
    let c = &consultations(&asker.place)[0];
    assert_eq!(short(c["advisor"].as_str().unwrap()), "mesh:inbox-c");
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(c["conclusion"], "a person reviewed it and agrees");
    assert_eq!(c["risks"], json!(["the lock is advisory"]));
    // Unpinned: credited to its key, the only identity the asker could check.
    assert!(
        c["source"].as_str().unwrap().starts_with("peer-key:"),
        "{c}"
    );
    // Answered: no longer waiting.
    let list = get(&inbox.socket(), "/api/v1/reviews").await.expect(200);
    assert_eq!(list["reviews"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_peers_are_asked_at_once() {
    let nats = NatsServer::start();
    let slow = |who: &str| {
        vec![Script::answer(&answer(who, "supports")).after(Duration::from_millis(500))]
    };
    let (_p1, f1) = relay_peer(&nats.url(), "p1", ("v1", "m1"), slow("one")).await;
    let (_p2, f2) = relay_peer(&nats.url(), "p2", ("v2", "m2"), slow("two")).await;
    let (_p3, f3) = relay_peer(&nats.url(), "p3", ("v3", "m3"), slow("three")).await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["p1", "p2", "p3"]).await;
    let assessment = code_review(&asker, &context, "critical").await;
    let job = consult(&asker, &context, &assessment, 20.0).await;
    let events = asker.events(&job).await;
    let done: Vec<_> = consultations(&asker.place)
        .into_iter()
        .filter(|c| c["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 3, "{done:?}");
    // Asked at once: every exchange started before any finished.
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    let last_start = kinds.iter().rposition(|k| *k == "started").unwrap();
    let first_finish = kinds.iter().position(|k| *k == "finished").unwrap();
    assert!(
        last_start < first_finish,
        "asked one after another: {kinds:?}"
    );
    for fake in [f1, f2, f3] {
        fake.assert_exhausted();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_runtimes_of_one_pinned_owner_count_as_one_review() {
    let nats = NatsServer::start();
    let (p1, _) = relay_peer(
        &nats.url(),
        "twin-1",
        ("samevendor", "samemodel"),
        vec![Script::answer(&answer("first twin", "supports"))],
    )
    .await;
    let (p2, _) = relay_peer(
        &nats.url(),
        "twin-2",
        ("othervendor", "othermodel"),
        vec![Script::answer(&answer("second twin", "supports"))],
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["twin-1", "twin-2"]).await;
    // Two keys, one declared owner: one source, whatever models they name.
    for twin in [&p1, &p2] {
        pin(
            &asker.place,
            &runtime_of(twin).await,
            &key_of(twin),
            Some("carol"),
        );
    }
    let assessment = code_review(&asker, &context, "critical").await;
    let job = consult(&asker, &context, &assessment, 20.0).await;
    assert_eq!(asker.wait(&job).await["state"], "done");
    let cited: Vec<String> = consultations(&asker.place)
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cited.len(), 2);
    let conclusion = record(
        &asker,
        &context,
        json!({"kind": "conclusion", "assessment": assessment, "decision": "keep one writer",
               "rationale": "both reviews agree", "consultations": cited,
               "evidence": [{"kind": "test", "ref": "tests/store.rs"}],
               "validation_plan": "run the concurrency test"}),
    )
    .await;
    assert_eq!(conclusion["independent_review_count"], 1, "{conclusion}");
    let reviewed_by: Vec<String> = conclusion["reviewed_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| short(a.as_str().unwrap()))
        .collect();
    assert_eq!(reviewed_by, ["mesh:twin-1", "mesh:twin-2"], "{conclusion}");
    // The status view credits the same, and the chain's check of computed fields agrees.
    let status = call_json(
        &asker.socket(),
        "GET",
        "/api/v1/reasoning",
        &json!({"context": context}),
    )
    .await
    .expect(200);
    let line = &status["assessments"][0]["conclusions"][0];
    assert_eq!(line["independent_review_count"], 1, "{status}");
    assert_eq!(
        line["reviewed_by"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
    let verified = call_json(
        &asker.socket(),
        "GET",
        "/api/v1/reasoning/verify",
        &json!({"context": context}),
    )
    .await
    .expect(200);
    assert_eq!(verified["tasks"][0]["findings"], json!([]), "{verified}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn asker_and_peer_on_different_nodes_of_a_cluster() {
    let cluster = NatsServer::cluster(2);
    let (_peer, _) = relay_peer(
        &cluster[0].url(),
        "far-peer",
        ("vf", "mf"),
        vec![Script::answer(&answer(
            "answered across the cluster",
            "supports",
        ))],
    )
    .await;
    let (asker, context) = start_asker(&cluster[1].url()).await;
    wait_for_peers(&asker, &context, &["far-peer"]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let job = consult(&asker, &context, &assessment, 20.0).await;
    assert_eq!(asker.wait(&job).await["state"], "done");
    let c = &consultations(&asker.place)[0];
    assert_eq!(c["conclusion"], "answered across the cluster", "{c}");
}

/// The one consultation of the asker's task, once its job has ended.
async fn outcome_of(
    asker: &Daemon,
    context: &serde_json::Value,
    timeout_s: f64,
) -> (serde_json::Value, Duration) {
    let assessment = code_review(asker, context, "material").await;
    let started = Instant::now();
    let job = consult(asker, context, &assessment, timeout_s).await;
    let ended = asker.wait(&job).await;
    let took = started.elapsed();
    assert_eq!(ended["state"], "done", "{ended}");
    let all = consultations(&asker.place);
    (all.last().cloned().expect("a consultation"), took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_answering_garbage_is_malformed() {
    let nats = NatsServer::start();
    let _peer = FakePeer::start(&nats.url(), "garbler", Behaviour::Garbage).await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["garbler"]).await;
    let (c, _) = outcome_of(&asker, &context, 10.0).await;
    assert_eq!(c["status"], "failed", "{c}");
    assert_eq!(c["failure"], "malformed", "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_to_requests_not_asked_are_ignored_and_a_flood_is_bounded() {
    let nats = NatsServer::start();
    let _polite = FakePeer::start(&nats.url(), "chatty", Behaviour::Unasked(3)).await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["chatty"]).await;
    let (c, _) = outcome_of(&asker, &context, 10.0).await;
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(c["conclusion"], "the fake peer agrees");

    let _flood = FakePeer::start(
        &nats.url(),
        "flooder",
        Behaviour::Unasked(advisord_adapters::mesh::MAX_IGNORED + 5),
    )
    .await;
    let (asker2, context2) = start_asker(&nats.url()).await;
    wait_for_peers(&asker2, &context2, &["flooder"]).await;
    let mut context2 = context2;
    let chatty = row(&advisors(&asker2, &context2).await, "mesh:chatty")["id"].clone();
    context2["disable"] = json!(format!("local,{}", chatty.as_str().unwrap()));
    let (c, _) = outcome_of(&asker2, &context2, 10.0).await;
    assert_eq!(short(c["advisor"].as_str().unwrap()), "mesh:flooder");
    assert_eq!(c["failure"], "malformed", "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_killed_mid_request_fails_typed_within_the_deadline_and_leaves() {
    let nats = NatsServer::start();
    let peer = FakePeer::start(&nats.url(), "doomed", Behaviour::Silent).await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["doomed"]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let started = Instant::now();
    let job = consult(&asker, &context, &assessment, 3.0).await;
    // Kill the peer once it holds the request.
    let received = peer.received.clone();
    while received.lock().unwrap().is_empty() {
        assert!(started.elapsed() < BOUND, "the peer never got the request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peer.kill().await;
    let ended = asker.wait(&job).await;
    let took = started.elapsed();
    assert_eq!(ended["state"], "done");
    let c = &consultations(&asker.place)[0];
    assert_eq!(c["status"], "failed", "{c}");
    assert!(
        ["timeout", "unavailable"].contains(&c["failure"].as_str().unwrap()),
        "{c}"
    );
    // Typed at the deadline (3 s) as the contract measured the exchange (slack for a loaded machine).
    assert!(
        c["duration_ms"].as_u64().unwrap() <= 4000,
        "past the deadline: {c}"
    );
    assert!(took < BOUND);
    advisors_until(&asker, &context, "the killed peer to leave", |view| {
        !ids(view).contains(&"mesh:doomed".to_string())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_server_restart_mid_request_fails_typed_or_completes_then_the_mesh_heals() {
    let mut nats = NatsServer::start();
    let (_peer, _) = relay_peer(
        &nats.url(),
        "steady",
        ("vs", "ms"),
        vec![
            Script::answer(&answer("answered despite the restart", "supports"))
                .after(Duration::from_millis(800)),
            Script::answer(&answer("answered after the restart", "supports")),
        ],
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["steady"]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let started = Instant::now();
    let job = consult(&asker, &context, &assessment, 4.0).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    nats.restart();
    let ended = asker.wait(&job).await;
    let took = started.elapsed();
    assert_eq!(ended["state"], "done");
    assert!(took < BOUND, "hung: {took:?}");
    let c = &consultations(&asker.place)[0];
    // Never past the deadline (4 s) as the contract measured it (slack for a loaded machine).
    assert!(
        c["duration_ms"].as_u64().unwrap() <= 5000,
        "past the deadline: {c}"
    );
    match c["status"].as_str().unwrap() {
        "completed" => assert_eq!(c["conclusion"], "answered despite the restart"),
        _ => assert!(
            ["timeout", "unavailable"].contains(&c["failure"].as_str().unwrap()),
            "{c}"
        ),
    }
    // Both ends reconnect on their own, and the peer is asked again.
    let (view, _) = advisors_until(&asker, &context, "the bus to come back", |view| {
        view["mesh"]["state"] == "connected" && ids(view).contains(&"mesh:steady".to_string())
    })
    .await;
    assert_eq!(
        advisord_adapters::mesh::identity::name_of(view["mesh"]["runtime"].as_str().unwrap()),
        "asker"
    );
    let mut context = context;
    context["cooldown_s"] = json!("0");
    let subject = json!({"kind": "assessment", "subject": "second question after the restart",
        "materiality": "material", "hypothesis": "the mesh healed", "capabilities": ["code_review"],
        "evidence": [{"kind": "observation", "ref": "restart"}]});
    let second = record(&asker, &context, subject).await;
    let job = consult(&asker, &context, second["id"].as_str().unwrap(), 10.0).await;
    assert_eq!(asker.wait(&job).await["state"], "done");
    let last = consultations(&asker.place).pop().unwrap();
    assert_eq!(last["status"], "completed", "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_asker_stopped_mid_request_resumes_and_records_each_advisor_once() {
    let nats = NatsServer::start();
    let (_peer, fake) = relay_peer(
        &nats.url(),
        "patient",
        ("vp", "mp"),
        vec![
            Script::answer(&answer("first try", "supports")).after(Duration::from_millis(1500)),
            Script::answer(&answer("second try", "supports")),
        ],
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["patient"]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let job = consult(&asker, &context, &assessment, 15.0).await;
    asker
        .until(&job, "the exchange to start", |j| {
            j["consultations"][0]["status"] == "running"
        })
        .await;
    // Stopped mid-request (its grace is shorter than the peer's answer): the job stays
    // journaled, the exchange unrecorded.
    let place = asker.stop().await;
    assert!(consultations(&place).is_empty());
    let (registry, _) = scripted("local", vec![]);
    let asker = start_on_mesh(place, registry, &nats.url(), "asker", None).await;
    let ended = asker.wait(&job).await;
    assert_eq!(ended["state"], "done", "{ended}");
    let all = consultations(&asker.place);
    assert_eq!(all.len(), 1, "each advisor recorded once: {all:?}");
    assert_eq!(short(all[0]["advisor"].as_str().unwrap()), "mesh:patient");
    assert_eq!(all[0]["status"], "completed", "{}", all[0]);
    let _ = fake;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_url_credentials_or_tls_is_one_line_in_health_and_advisors() {
    let nats = NatsServer::start_with(vec!["--auth".into(), "right-token".into()]);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        (format!("nats://127.0.0.1:{closed}"), None, "cannot connect"),
        ("not a url at all::".to_string(), None, "cannot be used"),
        (nats.url(), Some("wrong-token"), "authorization"),
        (
            nats.url().replace("nats://", "tls://"),
            Some("right-token"),
            "tls",
        ),
    ];
    for (url, creds, says) in cases {
        let place = Place::new(&one_advisor("local", "v", "m"));
        let mut config = mesh_config(&url, "lonely", None, &place);
        config.creds = creds.map(str::to_string);
        let (registry, _) = scripted("local", vec![]);
        let daemon =
            Daemon::start_in(place, registry, Box::new(move |c| c.mesh = Some(config))).await;
        let started = Instant::now();
        let status = loop {
            let health = get(&daemon.socket(), "/api/v1/health").await.expect(200);
            let mesh = health["mesh"].clone();
            let detail = mesh["detail"].as_str().unwrap_or_default().to_lowercase();
            if detail.contains(says) {
                break mesh;
            }
            assert!(started.elapsed() < BOUND, "{url}: health says {health}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_ne!(status["state"], "connected", "{status}");
        assert!(
            !status.to_string().contains("token"),
            "no credential shown: {status}"
        );
        // The daemon serves on; `advisors` shows the same line.
        let view = advisors(&daemon, &daemon.place.context()).await;
        assert_ne!(view["mesh"]["state"], "connected", "{view}");
        assert_eq!(ids(&view), vec!["local"]);
        daemon.stop().await;
    }
    // The right token connects.
    let place = Place::new(&one_advisor("local", "v", "m"));
    let mut config = mesh_config(&nats.url(), "welcome", None, &place);
    config.creds = Some("right-token".into());
    let daemon = Daemon::start_in(
        place,
        Registry::builtin(),
        Box::new(move |c| c.mesh = Some(config)),
    )
    .await;
    let started = Instant::now();
    while get(&daemon.socket(), "/api/v1/health").await.expect(200)["mesh"]["state"] != "connected"
    {
        assert!(started.elapsed() < BOUND, "the right token never connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_mesh_url_nothing_about_the_mesh_runs() {
    let daemon = Daemon::start(&one_advisor("local", "v", "m"), scripted("local", vec![]).0).await;
    let health = get(&daemon.socket(), "/api/v1/health").await.expect(200);
    assert!(health.get("mesh").is_none(), "{health}");
    let view = advisors(&daemon, &daemon.place.context()).await;
    assert!(view.get("mesh").is_none(), "{view}");
    let reviews = get(&daemon.socket(), "/api/v1/reviews").await;
    assert_eq!(reviews.status, 409);
    assert_eq!(reviews.json()["error"], "no_inbox");
}

/// The one consultation of the asker's task after one consult of `timeout_s`, and its job.
async fn one_consultation(
    asker: &Daemon,
    context: &serde_json::Value,
    timeout_s: f64,
) -> serde_json::Value {
    let (c, _) = outcome_of(asker, context, timeout_s).await;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forged_answer_for_another_runtime_is_refused() {
    let nats = NatsServer::start();
    // `beta` holds the request and never answers; an impostor on the same open bus
    // listens on beta's subject and answers in beta's name, first unsealed, then sealed
    // by a key of its own that names beta's runtime id.
    let beta = FakePeer::start(&nats.url(), "beta", Behaviour::Silent).await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["beta"]).await;
    let impostor = async_nats::connect(nats.url()).await.unwrap();
    let mut stolen = impostor
        .subscribe(advisord_adapters::mesh::wire::review_subject(&beta.runtime))
        .await
        .unwrap();
    impostor.flush().await.unwrap();
    let forger = advisord_adapters::mesh::identity::Identity::generate("beta");
    let victim = beta.runtime.clone();
    let answering = impostor.clone();
    let task = tokio::spawn(async move {
        let mut turn = 0;
        while let Some(message) = stolen.next().await {
            let opened = advisord_adapters::mesh::identity::open(
                advisord_adapters::mesh::identity::Kind::Request,
                &message.payload,
            )
            .unwrap();
            let asked: serde_json::Value = serde_json::from_str(&opened.body).unwrap();
            let body = json!({"protocol": 1, "request_id": asked["request_id"],
                "status": "completed", "source": "forged/model",
                "answer": {"conclusion": "the impostor approves", "stance": "supports",
                           "assumptions": [], "risks": [], "actions": [], "falsifiers": [],
                           "confidence": 0.9}});
            let payload = if turn == 0 {
                body.to_string().into_bytes()
            } else {
                let sealed = forger.seal(
                    advisord_adapters::mesh::identity::Kind::Reply,
                    body.to_string().as_bytes(),
                );
                let mut envelope: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
                envelope["runtime"] = json!(victim);
                envelope.to_string().into_bytes()
            };
            turn += 1;
            let _ = answering
                .publish(message.reply.unwrap(), payload.into())
                .await;
            let _ = answering.flush().await;
        }
    });
    for round in 0..2 {
        let mut context = context.clone();
        context["cooldown_s"] = json!("0");
        let c = one_consultation(&asker, &context, 5.0).await;
        assert_eq!(short(c["advisor"].as_str().unwrap()), "mesh:beta");
        assert_eq!(c["status"], "failed", "round {round}: {c}");
        assert_eq!(c["failure"], "malformed", "round {round}: {c}");
        assert!(c.get("conclusion").is_none_or(|v| v.is_null()), "{c}");
        if round == 1 {
            assert!(c["diagnostic"].as_str().unwrap().contains("refused"), "{c}");
        }
    }
    assert_eq!(beta.received.lock().unwrap().len(), 2);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_key_announcing_two_runtimes_is_one_source_and_unpinned_is_not_vouched() {
    let nats = NatsServer::start();
    // One client, one key, two runtimes naming two different models (a Sybil).
    let key = advisord_adapters::mesh::identity::Identity::generate("sybil");
    let seed = key.seed();
    let as_name =
        |name: &str| advisord_adapters::mesh::identity::Identity::from_seed(name, &seed).unwrap();
    let s1 = FakePeer::start_as(
        &nats.url(),
        as_name("sybil-a"),
        Behaviour::Unasked(0),
        "vendor-a/model-a",
    )
    .await;
    let s2 = FakePeer::start_as(
        &nats.url(),
        as_name("sybil-b"),
        Behaviour::Unasked(0),
        "vendor-b/model-b",
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["sybil-a", "sybil-b"]).await;

    // Unpinned: `advisors` says their answers are not counted, and how to pin each.
    let view = advisors(&asker, &context).await;
    for (name, peer) in [("mesh:sybil-a", &s1), ("mesh:sybil-b", &s2)] {
        let reason = row(&view, name)["reason"].as_str().unwrap().to_string();
        assert!(reason.contains("unpinned"), "{reason}");
        assert!(reason.contains("never counted as reviews"), "{reason}");
        assert!(
            reason.contains(&format!(
                "advisor-consult mesh pin {} --key {}",
                peer.runtime,
                peer.identity.public_key()
            )),
            "{reason}"
        );
    }

    // The user pins the key with the real CLI: both runtimes are one source.
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
            .env("XDG_CONFIG_HOME", config_home(&asker.place))
            .args(args)
            .output()
            .expect("run advisor-consult")
    };
    let pinned = cli(&[
        "mesh",
        "pin",
        &s1.runtime,
        "--key",
        &key.public_key(),
        "--owner",
        "Mallory",
    ]);
    assert!(
        pinned.status.success(),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    let wrong = cli(&["mesh", "pin", &s1.runtime, "--key", &asker_key(&asker)]);
    assert_eq!(wrong.status.code(), Some(2), "a key the id is not bound to");
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not bound"));
    let view = advisors(&asker, &context).await;
    for name in ["mesh:sybil-a", "mesh:sybil-b"] {
        let reason = row(&view, name)["reason"].as_str().unwrap().to_string();
        assert!(reason.contains("pinned: its answers count"), "{reason}");
        assert!(reason.contains("peer:mallory"), "{reason}");
    }
    let assessment = code_review(&asker, &context, "critical").await;
    let job = consult(&asker, &context, &assessment, 20.0).await;
    assert_eq!(asker.wait(&job).await["state"], "done");
    let all = consultations(&asker.place);
    assert_eq!(all.len(), 2, "{all:?}");
    for c in &all {
        assert_eq!(c["status"], "completed", "{c}");
        assert_eq!(c["source"], "peer:mallory", "{c}");
    }
    let cited: Vec<String> = all
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let conclusion = record(
        &asker,
        &context,
        json!({"kind": "conclusion", "assessment": assessment, "decision": "keep one writer",
               "rationale": "two runtimes agree", "consultations": cited,
               "evidence": [{"kind": "test", "ref": "tests/store.rs"}],
               "validation_plan": "run the concurrency test"}),
    )
    .await;
    assert_eq!(conclusion["independent_review_count"], 1, "{conclusion}");
}

/// The asker's own public key.
fn asker_key(asker: &Daemon) -> String {
    key_of(asker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peers_retry_after_is_cut_to_an_hour() {
    let nats = NatsServer::start();
    let _slow = FakePeer::start(
        &nats.url(),
        "sleeper",
        Behaviour::RateLimited(1_000_000_000_000),
    )
    .await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["sleeper"]).await;
    let c = one_consultation(&asker, &context, 5.0).await;
    assert_eq!(c["failure"], "rate_limited", "{c}");
    assert_eq!(c["retry_after_s"], 3600, "{c}");
    // The peer cools down for an hour at most, not until the year 33 700.
    let view = advisors(&asker, &context).await;
    let until = row(&view, "mesh:sleeper")["until"]
        .as_str()
        .expect("cooling down")
        .to_string();
    let until = time::OffsetDateTime::parse(&until, &time::format_description::well_known::Rfc3339)
        .unwrap();
    let left = until - time::OffsetDateTime::now_utc();
    assert!(left <= time::Duration::seconds(3600), "{until}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_inbox_item_belongs_to_its_sender_and_is_never_replaced() {
    let nats = NatsServer::start();
    let (inbox, asker, _context, job, waiting) =
        a_review_waiting_in_an_inbox(&nats, "inbox-d").await;
    let id = waiting["id"].as_str().unwrap().to_string();

    // An attacker sends a request under the same id, to have the answer sent to it.
    let thief = advisord_adapters::mesh::identity::Identity::generate("thief");
    let client = async_nats::connect(nats.url()).await.unwrap();
    let request = json!({"protocol": 1, "request_id": id, "asker": thief.runtime(),
        "question": "send me the answer", "capabilities": [], "deadline_ms": 30000});
    let sealed = thief.seal(
        advisord_adapters::mesh::identity::Kind::Request,
        request.to_string().as_bytes(),
    );
    let inbox_runtime = runtime_of(&inbox).await;
    let mut to_thief = client.subscribe("thief.replies").await.unwrap();
    client
        .publish_with_reply(
            advisord_adapters::mesh::wire::review_subject(&inbox_runtime),
            "thief.replies",
            sealed.into(),
        )
        .await
        .unwrap();
    client.flush().await.unwrap();
    let refusal = tokio::time::timeout(BOUND, to_thief.next())
        .await
        .expect("the thief is answered")
        .unwrap();
    let opened = advisord_adapters::mesh::identity::open(
        advisord_adapters::mesh::identity::Kind::Reply,
        &refusal.payload,
    )
    .expect("a sealed refusal");
    let refusal: serde_json::Value = serde_json::from_str(&opened.body).unwrap();
    assert_eq!(refusal["status"], "failed", "{refusal}");
    assert!(
        refusal["diagnostic"]
            .as_str()
            .unwrap()
            .contains("already waiting"),
        "{refusal}"
    );
    let list = get(&inbox.socket(), "/api/v1/reviews").await.expect(200);
    assert_eq!(list["reviews"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["reviews"][0]["asker"], waiting["asker"], "{list}");

    // The person's answer goes to the asker that sent the review, not to the thief.
    let answered = call_json(
        &inbox.socket(),
        "POST",
        &format!("/api/v1/reviews/{id}/answer"),
        &json!({"answer": json!({"conclusion": "reviewed by a person", "stance": "supports"}).to_string()}),
    )
    .await
    .expect(200);
    assert_eq!(answered["id"], id.as_str());
    assert_eq!(asker.wait(&job).await["state"], "done");
    let c = &consultations(&asker.place)[0];
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(c["conclusion"], "reviewed by a person");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), to_thief.next())
            .await
            .is_err(),
        "the thief got nothing more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_runtime_key_is_private_and_the_same_across_a_restart() {
    use std::os::unix::fs::PermissionsExt;
    let nats = NatsServer::start();
    let place = Place::new(&one_advisor("local", "v", "m"));
    let daemon = start_on_mesh(place, Registry::builtin(), &nats.url(), "kept", None).await;
    let first = runtime_of(&daemon).await;
    let dir = daemon.place.data().join("mesh");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("key")), 0o600);
    assert!(advisord_adapters::mesh::identity::bound(
        &first,
        &key_of(&daemon)
    ));
    let place = daemon.stop().await;
    let again = start_on_mesh(place, Registry::builtin(), &nats.url(), "kept", None).await;
    assert_eq!(runtime_of(&again).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mesh_password_is_neither_logged_nor_left_on_the_command_line() {
    const PASSWORD: &str = "Sup3r-s3cret-pw";
    let nats = NatsServer::start_with(vec![
        "--user".into(),
        "alice".into(),
        "--pass".into(),
        PASSWORD.into(),
    ]);
    let place = Place::new(&one_advisor("local", "v", "m"));
    let url = nats
        .url()
        .replace("nats://", &format!("nats://alice:{PASSWORD}@"));
    let log = place.path().join("advisord.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_advisord"))
        .arg("--socket")
        .arg(place.socket())
        .arg("--data-dir")
        .arg(place.data())
        .args(["--mesh", &url])
        .env("RUST_LOG", "trace")
        .env("ADVISORD_MESH_RUNTIME", "secretive")
        .env("XDG_CONFIG_HOME", config_home(&place))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start advisord");
    let pid = child.id();
    let started = Instant::now();
    // Connected with the password from the URL...
    loop {
        if std::os::unix::net::UnixStream::connect(place.socket()).is_ok() {
            let health = get(&place.socket(), "/api/v1/health").await.expect(200);
            if health["mesh"]["state"] == "connected" {
                assert!(!health.to_string().contains(PASSWORD), "{health}");
                break;
            }
        }
        assert!(started.elapsed() < BOUND, "never connected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ...which is not on its command line, that any user can read.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(!cmdline.contains(PASSWORD), "{cmdline}");
    assert!(cmdline.contains("--data-dir"), "{cmdline}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    // Nor in its log, at the most verbose level.
    let logged = std::fs::read_to_string(&log).unwrap();
    // (The client logs each server it tries, the URL included, at `debug`.)
    assert!(logged.contains("attempting connection"), "{logged}");
    assert!(
        !logged.contains(PASSWORD),
        "the password was logged:\n{logged}"
    );
}

/// The asker's context on a daemon started on `url` (several URLs allowed).
async fn asker_on(url: &str) -> (Daemon, serde_json::Value) {
    start_asker(url).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_urls_join_a_cluster_whose_first_named_node_is_down() {
    let mut cluster = NatsServer::cluster(3);
    let urls: Vec<String> = cluster.iter().map(NatsServer::url).collect();
    let (_peer, _) = relay_peer(
        &cluster[2].url(),
        "listed-peer",
        ("vl", "ml"),
        vec![Script::answer(&answer(
            "answered through the list",
            "supports",
        ))],
    )
    .await;
    cluster[0].stop();
    // A comma list with spaces, its first node down.
    let list = format!("{}, {} ,{}", urls[0], urls[1], urls[2]);
    let (asker, context) = asker_on(&list).await;
    let (view, _) = advisors_until(&asker, &context, "the peer through the list", |view| {
        view["mesh"]["state"] == "connected" && ids(view).contains(&"mesh:listed-peer".into())
    })
    .await;
    assert!(
        !view["mesh"]["url"].as_str().unwrap().contains(' '),
        "{view}"
    );
    let (c, _) = outcome_of(&asker, &context, 20.0).await;
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(c["conclusion"], "answered through the list");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_exchange_with_a_peer_known_gone_ends_unavailable_at_once() {
    let cluster = NatsServer::cluster(3);
    let peer = FakePeer::start(&cluster[1].url(), "vanishing", Behaviour::Silent).await;
    let (asker, context) = asker_on(&format!("{},{}", cluster[2].url(), cluster[0].url())).await;
    wait_for_peers(&asker, &context, &["vanishing"]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let started = Instant::now();
    let job = consult(&asker, &context, &assessment, 8.0).await;
    let received = peer.received.clone();
    while received.lock().unwrap().is_empty() {
        assert!(started.elapsed() < BOUND, "the peer never got the request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peer.kill().await;
    assert_eq!(asker.wait(&job).await["state"], "done");
    let c = &consultations(&asker.place)[0];
    assert_eq!(c["failure"], "unavailable", "{c}");
    // Ended once the peer was known gone (two 200 ms sweeps), not at the 8 s deadline.
    assert!(c["duration_ms"].as_u64().unwrap() < 3000, "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bus_known_down_ends_the_exchange_unavailable_and_plans_select_no_peer() {
    let mut nats = NatsServer::start();
    let peer = FakePeer::start(&nats.url(), "stranded", Behaviour::Silent).await;
    let (asker, context) = start_asker(&nats.url()).await;
    wait_for_peers(&asker, &context, &["stranded"]).await;
    let assessment = code_review(&asker, &context, "material").await;
    let started = Instant::now();
    let job = consult(&asker, &context, &assessment, 8.0).await;
    while peer.received.lock().unwrap().is_empty() {
        assert!(started.elapsed() < BOUND, "the peer never got the request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    nats.stop();
    // While the bus is down, a plan selects no peer.
    advisors_until(&asker, &context, "the bus to be down", |view| {
        view["mesh"]["state"] != "connected"
    })
    .await;
    assert!(selected(&preview(&asker, &context, "material").await).is_empty());
    assert_eq!(asker.wait(&job).await["state"], "done");
    let c = &consultations(&asker.place)[0];
    assert_eq!(c["failure"], "unavailable", "{c}");
    assert!(c["duration_ms"].as_u64().unwrap() < 4000, "{c}");
    drop(peer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relay_asked_for_debugging_answers_with_its_advisor_that_offers_it() {
    let cluster = NatsServer::cluster(3);
    // The relay has two advisors: `quick` reviews code and answers at once; `debugger`
    // offers debugging and answers a little later. It offers both capabilities.
    let catalogue = "mode: strict\nadvisors:\n  - id: quick\n    title: Quick reviewer\n    \
         transport: http\n    adapter: scripted-quick\n    \
         references: { provider: vq, vendor: vq, model: mq }\n    \
         capabilities: [independent_reasoning, code_review]\n  - id: debugger\n    \
         title: Debugger\n    transport: http\n    adapter: scripted-debugger\n    \
         references: { provider: vd, vendor: vd, model: md }\n    \
         capabilities: [debugging]\n";
    let quick = Arc::new(ScriptedAdapter::new(vec![Script::answer(&answer(
        "a code review nobody asked for",
        "supports",
    ))]));
    let debugger = Arc::new(ScriptedAdapter::new(vec![Script::answer(&answer(
        "the debugger's answer",
        "opposes",
    ))
    .after(Duration::from_millis(300))]));
    let mut registry = Registry::builtin();
    registry.insert("scripted-quick", quick.clone());
    registry.insert("scripted-debugger", debugger.clone());
    let peer = start_on_mesh(
        Place::new(catalogue),
        registry,
        &cluster[0].url(),
        "two-advisors",
        Some(Offer::Relay),
    )
    .await;
    let (asker, context) = start_asker(&cluster[2].url()).await;
    wait_for_peers(&asker, &context, &["two-advisors"]).await;

    // The asker's plan wants debugging only.
    let stored = record(
        &asker,
        &context,
        json!({
            "kind": "assessment",
            "subject": "a crash after the lock is released",
            "materiality": "material",
            "hypothesis": "the writer drops the lock before the rename",
            "capabilities": ["debugging"],
            "evidence": [{"kind": "file", "ref": "src/store.rs"}],
        }),
    )
    .await;
    let assessment = stored["id"].as_str().unwrap().to_string();
    let job = consult(&asker, &context, &assessment, 20.0).await;
    assert_eq!(asker.wait(&job).await["state"], "done");

    // Answered by the advisor that offers debugging, though the other one was faster.
    let c = &consultations(&asker.place)[0];
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(c["conclusion"], "the debugger's answer", "{c}");
    debugger.assert_exhausted();
    // The relay's assessment asked for what the plan wanted, not for the whole offer.
    let relayed = peer.place.records_of("mesh-relay", "assessment");
    assert_eq!(
        relayed[0]["capabilities"],
        json!(["debugging"]),
        "{relayed:?}"
    );
}
