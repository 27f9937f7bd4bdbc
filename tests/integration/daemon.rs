//! The daemon end to end, in-process on a temporary socket: consultation jobs (concurrency,
//! plan order, deadline, cancellation, recovery, the per-advisor bound), the API's answers
//! to bad input, and the socket's protection.

use crate::support::daemon as daemon_helper;

use advisord_adapters::contract::{Adapter, AdvisorSpec, Answer, Failure, Io};
use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon_helper::{answer, catalogue, Advisor, Daemon, Place, TASK};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A registry with one scripted adapter per `(id, scripts)`, under `scripted-<id>`.
fn scripted(advisors: Vec<(&str, Vec<Script>)>) -> (Registry, Vec<Arc<ScriptedAdapter>>) {
    let mut registry = Registry::builtin();
    let mut fakes = Vec::new();
    for (id, scripts) in advisors {
        let fake = Arc::new(ScriptedAdapter::new(scripts));
        registry.insert(&format!("scripted-{id}"), fake.clone());
        fakes.push(fake);
    }
    (registry, fakes)
}

fn ids(values: &[Value], field: &str) -> Vec<String> {
    values
        .iter()
        .map(|v| v[field].as_str().unwrap_or_default().to_string())
        .collect()
}

fn events_of<'e>(events: &'e [Value], kind: &str) -> Vec<&'e Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_advisors_of_one_and_a_half_seconds_finish_well_under_three() {
    let slow =
        |c: &str| vec![Script::answer(&answer(c, "supports")).after(Duration::from_millis(1500))];
    let (registry, fakes) = scripted(vec![("a", slow("a")), ("b", slow("b")), ("c", slow("c"))]);
    let yaml = catalogue(&[
        Advisor::scripted("a"),
        Advisor::scripted("b"),
        Advisor::scripted("c"),
    ]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;

    let started = Instant::now();
    let job = daemon.consult(&assessment, 30.0).await;
    assert_eq!(job["state"], "queued");
    let done = daemon.wait(job["id"].as_str().unwrap()).await;
    let wall = started.elapsed();

    assert!(
        wall < Duration::from_millis(2500),
        "took {wall:?}: not concurrent"
    );
    assert_eq!(done["state"], "done");
    assert_eq!(
        ids(done["consultations"].as_array().unwrap(), "advisor"),
        ["a", "b", "c"]
    );
    assert!(done["consultations"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["status"] == "completed"));
    let recorded = daemon.place.records_of(TASK, "consultation");
    assert_eq!(ids(&recorded, "advisor"), ["a", "b", "c"]);
    assert_eq!(done["plan"], daemon.place.records_of(TASK, "plan")[0]["id"]);
    assert!(done["disagreement"].is_null(), "every advisor supports");
    fakes.iter().for_each(|f| f.assert_exhausted());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_are_recorded_in_plan_order_whatever_order_they_arrive_in() {
    let (registry, _fakes) = scripted(vec![
        (
            "first",
            vec![Script::answer(&answer("first", "opposes")).after(Duration::from_millis(700))],
        ),
        (
            "second",
            vec![Script::answer(&answer("second", "supports")).after(Duration::from_millis(50))],
        ),
        (
            "third",
            vec![
                Script::fail(advisord_adapters::contract::FailureKind::RateLimited, "429")
                    .with_retry_after(7),
            ],
        ),
    ]);
    let yaml = catalogue(&[
        Advisor::scripted("first"),
        Advisor::scripted("second"),
        Advisor::scripted("third"),
    ]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 30.0).await;
    let events = daemon.events(job["id"].as_str().unwrap()).await;

    let finished: Vec<Value> = events_of(&events, "finished")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(
        ids(&finished, "advisor"),
        ["third", "second", "first"],
        "arrival order"
    );
    let recorded: Vec<Value> = events_of(&events, "recorded")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(
        ids(&recorded, "advisor"),
        ["first", "second", "third"],
        "plan order"
    );
    let stored = daemon.place.records_of(TASK, "consultation");
    assert_eq!(ids(&stored, "advisor"), ["first", "second", "third"]);
    assert_eq!(stored[2]["failure"], "rate_limited");
    assert_eq!(stored[2]["retry_after_s"], 7);
    // The first advisor opposes: the job records the disagreement after every outcome.
    let disagreement = events_of(&events, "disagreement");
    assert_eq!(disagreement.len(), 1);
    let record = &disagreement[0]["record"];
    let sources = ids(record["positions"].as_array().unwrap(), "source");
    assert_eq!(
        sources,
        [
            "executor",
            ids(&stored, "id")[0].as_str(),
            ids(&stored, "id")[1].as_str()
        ]
    );
    let kinds: Vec<String> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("plan"));
    assert_eq!(kinds[kinds.len() - 2..], ["disagreement", "done"]);
    let done = &events.last().unwrap()["result"];
    assert_eq!(done["disagreement"], record["id"]);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_came_in_time_is_kept_when_another_advisor_times_out() {
    let (registry, _fakes) = scripted(vec![
        ("hangs", vec![Script::hang()]),
        ("quick", vec![Script::answer(&answer("quick", "supports"))]),
    ]);
    let yaml = catalogue(&[Advisor::scripted("hangs"), Advisor::scripted("quick")]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let started = Instant::now();
    let job = daemon.consult(&assessment, 0.5).await;
    let done = daemon.wait(job["id"].as_str().unwrap()).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let stored = daemon.place.records_of(TASK, "consultation");
    assert_eq!(ids(&stored, "advisor"), ["hangs", "quick"]);
    assert_eq!(stored[0]["failure"], "timeout");
    assert_eq!(stored[1]["status"], "completed");
    assert_eq!(done["state"], "done");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_process_advisor_is_stopped_at_the_deadline_with_its_whole_group() {
    let place = Place::new("advisors: []\n");
    let pids = place.path().join("pids");
    let script = place.script(
        "hangs.sh",
        &format!(
            "sleep 300 &\necho $! >> {pids}\necho $$ >> {pids}\nsleep 300\n",
            pids = pids.display()
        ),
    );
    place.set_catalogue(&catalogue(&[Advisor::process("hangs", &script)]));
    let daemon = Daemon::start_in(place, Registry::builtin(), Box::new(|_| {})).await;
    let assessment = daemon.assessment().await;
    let started = Instant::now();
    let job = daemon.consult(&assessment, 1.0).await;
    let done = daemon.wait(job["id"].as_str().unwrap()).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "stopped after {took:?}");
    let stored = daemon.place.records_of(TASK, "consultation");
    assert_eq!(done["consultations"][0]["failure"], "timeout", "{stored:?}");
    let pids: Vec<i32> = std::fs::read_to_string(&pids)
        .expect("the script wrote its pids")
        .lines()
        .map(|l| l.trim().parse().expect("a pid"))
        .collect();
    assert_eq!(pids.len(), 2, "the advisor and its grandchild");
    daemon_helper::wait_for("the advisor's process group to be gone", || {
        pids.iter().all(|&pid| daemon_helper::process_gone(pid))
    });
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_job_records_the_exchanges_in_flight_as_cancelled() {
    let (registry, fakes) = scripted(vec![
        ("a", vec![Script::answer(&answer("a", "supports"))]),
        ("b", vec![Script::hang()]),
    ]);
    let yaml = catalogue(&[Advisor::scripted("a"), Advisor::scripted("b")]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 60.0).await;
    let id = job["id"].as_str().unwrap().to_string();
    daemon
        .until(&id, "the first outcome recorded", |j| {
            j["consultations"][0]["record"].is_string()
        })
        .await;

    let started = Instant::now();
    let cancelled = daemon
        .call("DELETE", &format!("/api/v1/consultations/{id}"), None)
        .await
        .expect(200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["consultations"][1]["failure"], "cancelled");
    assert_eq!(fakes[1].dropped(), 1, "the hanging exchange was stopped");
    let stored = daemon.place.records_of(TASK, "consultation");
    assert_eq!(ids(&stored, "advisor"), ["a", "b"]);
    assert_eq!(stored[1]["failure"], "cancelled");

    let again = daemon
        .call("DELETE", &format!("/api/v1/consultations/{id}"), None)
        .await
        .expect(409);
    assert_eq!(again["error"], "job_finished");
    assert!(
        again["message"].as_str().unwrap().contains("already ended"),
        "{again}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_job_is_cancelled_before_it_starts() {
    let (registry, _fakes) = scripted(vec![("a", vec![Script::hang()])]);
    let yaml = catalogue(&[Advisor::scripted("a")]);
    let tweak: daemon_helper::Tweak = Box::new(|c| c.max_running_jobs = 1);
    let daemon = Daemon::start_in(Place::new(&yaml), registry, tweak).await;
    let assessment = daemon.assessment().await;
    let running = daemon.consult(&assessment, 60.0).await;
    let queued = daemon.consult(&assessment, 60.0).await;
    let running_id = running["id"].as_str().unwrap();
    daemon
        .until(running_id, "the first job running", |j| {
            j["state"] == "running"
        })
        .await;
    let queued_id = queued["id"].as_str().unwrap();
    assert_eq!(daemon.job(queued_id).await["state"], "queued");
    let cancelled = daemon
        .call(
            "DELETE",
            &format!("/api/v1/consultations/{queued_id}"),
            None,
        )
        .await
        .expect(200);
    assert_eq!(cancelled["state"], "cancelled");
    assert!(cancelled["plan"].is_null(), "it never planned");
    let done = daemon.wait(queued_id).await;
    assert_eq!(done["state"], "cancelled");
    daemon
        .call(
            "DELETE",
            &format!("/api/v1/consultations/{running_id}"),
            None,
        )
        .await
        .expect(200);
    assert_eq!(daemon.place.records_of(TASK, "plan").len(), 1);
    daemon.stop().await;
}

/// An adapter that answers after a delay and records the most exchanges in flight at once.
struct Gauge {
    delay: Duration,
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Adapter for Gauge {
    fn exchange<'a>(
        &'a self,
        _advisor: &'a AdvisorSpec,
        _prompt: &'a str,
        _io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>> {
        Box::pin(async move {
            let inside = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(inside, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(Answer {
                text: answer("gauge", "supports"),
                usage: None,
                source: None,
                vouched: true,
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_bounds_an_advisor_across_jobs() {
    let gauge = Arc::new(Gauge {
        delay: Duration::from_millis(150),
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    let mut registry = Registry::builtin();
    registry.insert("gauge", gauge.clone());
    let mut advisor = Advisor::scripted("g").max_concurrent(2);
    advisor.adapter = "gauge".into();
    let daemon = Daemon::start(&catalogue(&[advisor]), registry).await;
    let assessment = daemon.assessment().await;
    let mut jobs = Vec::new();
    for _ in 0..6 {
        jobs.push(
            daemon.consult(&assessment, 30.0).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    for job in &jobs {
        assert_eq!(daemon.wait(job).await["state"], "done");
    }
    assert_eq!(
        gauge.most.load(Ordering::SeqCst),
        2,
        "at most max_concurrent at once, and that many"
    );
    assert_eq!(daemon.place.records_of(TASK, "consultation").len(), 6);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_an_interrupted_job_asking_only_the_advisors_not_recorded() {
    let yaml = catalogue(&[
        Advisor::scripted("a"),
        Advisor::scripted("b"),
        Advisor::scripted("c"),
    ]);
    let (registry, first_run) = scripted(vec![
        ("a", vec![Script::answer(&answer("a", "supports"))]),
        ("b", vec![Script::hang()]),
        ("c", vec![Script::answer(&answer("c", "supports"))]),
    ]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 60.0).await;
    let id = job["id"].as_str().unwrap().to_string();
    daemon
        .until(&id, "a recorded and c asked", |j| {
            j["consultations"][0]["record"].is_string()
                && j["consultations"][2]["status"] != "pending"
        })
        .await;
    let place = daemon.stop().await;
    // b was cancelled by the shutdown (not recorded); c answered but comes after b.
    assert_eq!(
        ids(&place.records_of(TASK, "consultation"), "advisor"),
        ["a"]
    );
    assert_eq!(first_run[1].dropped(), 1);

    let (registry, second_run) = scripted(vec![
        ("a", vec![]),
        ("b", vec![Script::answer(&answer("b", "supports"))]),
        ("c", vec![Script::answer(&answer("c", "supports"))]),
    ]);
    let daemon = Daemon::start_in(place, registry, Box::new(|_| {})).await;
    let done = daemon.wait(&id).await;
    assert_eq!(done["state"], "done");
    let stored = daemon.place.records_of(TASK, "consultation");
    assert_eq!(
        ids(&stored, "advisor"),
        ["a", "b", "c"],
        "each advisor exactly once, in plan order"
    );
    assert_eq!(
        daemon.place.records_of(TASK, "plan").len(),
        1,
        "the plan is not made twice"
    );
    assert_eq!(
        second_run[0].calls(),
        0,
        "a was recorded before the restart"
    );
    second_run.iter().for_each(|f| f.assert_exhausted());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_clients_record_and_consult_without_loss() {
    const CLIENTS: usize = 50;
    let scripts = |c: &str| {
        (0..CLIENTS)
            .map(|_| Script::answer(&answer(c, "supports")).after(Duration::from_millis(20)))
            .collect()
    };
    let (registry, fakes) = scripted(vec![("a", scripts("a")), ("b", scripts("b"))]);
    let yaml = catalogue(&[
        Advisor::scripted("a").max_concurrent(4),
        Advisor::scripted("b").max_concurrent(4),
    ]);
    let daemon = Arc::new(Daemon::start(&yaml, registry).await);
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let daemon = daemon.clone();
        clients.spawn(async move {
            let task = format!("task-{}", client % 5);
            let assessment = daemon.assessment_in(&task).await;
            let job = daemon.consult_in(&task, &assessment, 30.0).await;
            daemon.wait(job["id"].as_str().unwrap()).await
        });
    }
    let mut done = 0;
    while let Some(job) = clients.join_next().await {
        let job = job.expect("a client task");
        assert_eq!(job["state"], "done", "{job}");
        assert_eq!(job["consultations"].as_array().unwrap().len(), 2);
        done += 1;
    }
    assert_eq!(done, CLIENTS);
    let mut consultations = 0;
    for task in 0..5 {
        let records = daemon.place.records(&format!("task-{task}"));
        let sequences: Vec<u64> = records
            .iter()
            .map(|r| r["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(
            sequences,
            (1..=records.len() as u64).collect::<Vec<_>>(),
            "no gap, no duplicate"
        );
        consultations += records
            .iter()
            .filter(|r| r["kind"] == "consultation")
            .count();
    }
    assert_eq!(consultations, 2 * CLIENTS);
    fakes.iter().for_each(|f| f.assert_exhausted());
    let listed = daemon
        .call("GET", "/api/v1/consultations", None)
        .await
        .expect(200);
    assert_eq!(listed["jobs"].as_array().unwrap().len(), CLIENTS);
    let health = daemon.call("GET", "/api/v1/health", None).await.expect(200);
    assert_eq!(health["jobs"]["done"], CLIENTS);
    Arc::into_inner(daemon)
        .expect("the only owner")
        .stop()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_advisor_available_plans_a_local_review_and_the_job_ends_cleanly() {
    let absent = Advisor::process("absent", std::path::Path::new("not-installed-anywhere"));
    let daemon = Daemon::start(&catalogue(&[absent]), Registry::builtin()).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 5.0).await;
    let events = daemon.events(job["id"].as_str().unwrap()).await;
    let plan = &events_of(&events, "plan")[0]["record"];
    assert_eq!(plan["selected"], json!([]));
    assert_eq!(plan["left_out"][0]["advisor"], "absent");
    assert!(
        !plan["local_review"].as_array().unwrap().is_empty(),
        "{plan}"
    );
    let done = &events.last().unwrap()["result"];
    assert_eq!(done["state"], "done");
    assert_eq!(done["consultations"], json!([]));
    assert!(daemon.place.records_of(TASK, "consultation").is_empty());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_state_directory_fails_the_job_with_the_reason() {
    let (registry, _fakes) = scripted(vec![("a", vec![])]);
    let daemon = Daemon::start(&catalogue(&[Advisor::scripted("a")]), registry).await;
    let assessment = daemon.assessment().await;
    // The task's lock can no longer be opened for writing: every write fails, reads work.
    let lock = daemon.place.state().join(TASK).join(".lock");
    std::fs::remove_file(&lock).expect("the lock exists after a write");
    std::fs::create_dir(&lock).expect("a directory in its place");
    let job = daemon.consult(&assessment, 5.0).await;
    let done = daemon.wait(job["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "failed");
    assert!(done["reason"].as_str().unwrap().contains(".lock"), "{done}");
    assert_eq!(
        daemon.place.records(TASK).len(),
        1,
        "the assessment is still there"
    );
    daemon.call("GET", "/api/v1/health", None).await.expect(200);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_answers_and_the_daemon_keeps_serving() {
    let daemon = Daemon::start(&catalogue(&[]), Registry::builtin()).await;
    let socket = daemon.socket();
    let place = &daemon.place;
    let records = "/api/v1/reasoning/records";
    let big = vec![b'x'; advisord::protocol::MAX_BODY_BYTES + 1];

    let check = |reply: daemon_helper::Reply, status: u16, code: &str, says: &str| {
        let body = reply.expect(status);
        assert_eq!(body["error"], code, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(says), "`{says}` in {message}");
        body
    };
    check(
        daemon_helper::call(&socket, "POST", records, Some(big)).await,
        413,
        "payload_too_large",
        "1 MiB",
    );
    check(
        daemon_helper::call(&socket, "POST", records, Some(b"{not json".to_vec())).await,
        400,
        "invalid_json",
        "key must be a string",
    );
    check(
        daemon_helper::call_json(
            &socket,
            "POST",
            records,
            &json!({"context": place.context()}),
        )
        .await,
        400,
        "invalid_json",
        "missing field `record`",
    );
    check(
        daemon_helper::call(&socket, "POST", records, None).await,
        400,
        "invalid_json",
        "empty",
    );
    check(
        daemon.call("GET", "/api/v1/nothing", None).await,
        404,
        "not_found",
        "/api/v1/nothing",
    );
    check(
        daemon.call("GET", "/elsewhere", None).await,
        404,
        "not_found",
        "/elsewhere",
    );
    check(
        daemon.call("PUT", "/api/v1/health", None).await,
        405,
        "method_not_allowed",
        "GET",
    );
    check(
        daemon.call("GET", "/api/v1/consultations/NOPE", None).await,
        404,
        "unknown_job",
        "NOPE",
    );
    check(
        daemon
            .call("GET", "/api/v1/consultations/NOPE/events", None)
            .await,
        404,
        "unknown_job",
        "NOPE",
    );
    check(
        daemon
            .call("DELETE", "/api/v1/consultations/NOPE", None)
            .await,
        404,
        "unknown_job",
        "NOPE",
    );
    check(
        daemon.call("GET", "/api/v1/reasoning", None).await,
        400,
        "invalid_request",
        "root",
    );
    check(
        daemon
            .call("GET", "/api/v1/reasoning/tree?depth=deep", None)
            .await,
        400,
        "invalid_request",
        "depth",
    );

    let with_root = |root: &str| {
        let mut context = place.context();
        context["root"] = json!(root);
        json!({"context": context, "record": {"kind": "attempt"}})
    };
    let file = place.path().join("catalogue.yaml");
    for (root, says) in [
        ("/does/not/exist", "does not exist"),
        ("relative/dir", "is not absolute"),
        (file.to_str().unwrap(), "is not a directory"),
    ] {
        check(
            daemon.call("POST", records, Some(with_root(root))).await,
            400,
            "invalid_root",
            says,
        );
    }
    check(
        daemon
            .call("GET", "/api/v1/reasoning?root=/does/not/exist", None)
            .await,
        400,
        "invalid_root",
        "does not exist",
    );

    // A task with `/`: a refusal from the writer, a usage error elsewhere.
    let bad_task = place.context_for("a/b");
    let refused = check(
        daemon
            .call(
                "POST",
                records,
                Some(json!({"context": bad_task, "record": {"kind": "attempt"}})),
            )
            .await,
        422,
        "refused",
        "a/b",
    );
    assert_eq!(refused["reason"], "invalid_task");
    check(
        daemon
            .call(
                "POST",
                "/api/v1/consultations",
                Some(json!({"context": bad_task, "assessment": "X"})),
            )
            .await,
        400,
        "invalid_task",
        "a/b",
    );
    check(
        daemon
            .call(
                "POST",
                "/api/v1/consultations",
                Some(json!({"context": place.context(), "assessment": "X"})),
            )
            .await,
        404,
        "not_found",
        "no assessment `X`",
    );
    check(
        daemon
            .call(
                "POST",
                "/api/v1/consultations",
                Some(json!({"context": place.context(), "assessment": "X", "timeout_s": 0})),
            )
            .await,
        400,
        "invalid_request",
        "timeout_s",
    );
    let refused = check(
        daemon.call("POST", records, Some(json!({"context": place.context(), "record": {"kind": "assessment", "subject": "s", "materiality": "high", "hypothesis": "h"}}))).await,
        422,
        "refused",
        "",
    );
    assert_eq!(refused["reason"], "material_without_evidence");

    let health = daemon.call("GET", "/api/v1/health", None).await.expect(200);
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(health["pid"], std::process::id());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_network_free_route_answers_with_the_service_json() {
    // The scripted adapter is registered but never asked: these routes do no exchange.
    let (registry, _fakes) = scripted(vec![("a", vec![])]);
    let daemon = Daemon::start(&catalogue(&[Advisor::scripted("a")]), registry).await;
    let assessment = daemon.assessment().await;
    let body = || Some(json!({"context": daemon.place.context()}));
    let advisors = daemon
        .call("GET", "/api/v1/reasoning/advisors", body())
        .await
        .expect(200);
    assert_eq!(advisors["advisors"][0]["id"], "a");
    assert_eq!(advisors["mode"], "strict");
    let status = daemon
        .call("GET", "/api/v1/reasoning", body())
        .await
        .expect(200);
    assert!(status.to_string().contains(&assessment), "{status}");
    let explained = daemon
        .call(
            "GET",
            &format!("/api/v1/reasoning/explain?id={assessment}"),
            body(),
        )
        .await
        .expect(200);
    assert!(explained.to_string().contains(&assessment));
    daemon
        .call("GET", "/api/v1/reasoning/explain?id=NOPE", body())
        .await
        .expect(404);
    daemon
        .call("GET", "/api/v1/reasoning/tree?depth=2", body())
        .await
        .expect(200);
    daemon
        .call("GET", "/api/v1/reasoning/check", body())
        .await
        .expect(200);
    let preview = daemon
        .call(
            "POST",
            "/api/v1/reasoning/plan",
            Some(json!({"context": daemon.place.context(), "materiality": "critical"})),
        )
        .await
        .expect(200);
    assert_eq!(preview["selected"][0]["advisor"], "a");
    assert!(
        daemon.place.records_of(TASK, "plan").is_empty(),
        "a preview is not recorded"
    );
    // curl by hand: root and task in the query, the rest from the daemon's environment.
    let root = daemon.place.root();
    let by_query = daemon
        .call(
            "GET",
            &format!("/api/v1/reasoning?root={}&task={TASK}", root.display()),
            None,
        )
        .await;
    assert_eq!(
        by_query.status,
        200,
        "{}",
        String::from_utf8_lossy(&by_query.body)
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_stream_does_not_disturb_the_job_or_the_daemon() {
    let (registry, _fakes) = scripted(vec![(
        "a",
        vec![Script::answer(&answer("a", "supports")).after(Duration::from_millis(400))],
    )]);
    let daemon = Daemon::start(&catalogue(&[Advisor::scripted("a")]), registry).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 30.0).await;
    let id = job["id"].as_str().unwrap().to_string();
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::UnixStream::connect(daemon.socket())
            .await
            .unwrap();
        let request = format!("GET /api/v1/consultations/{id}/events HTTP/1.1\r\nHost: x\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut first = [0u8; 64];
        let n = stream.read(&mut first).await.unwrap();
        assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
        // Dropped here, mid-stream.
    }
    let done = daemon.wait(&id).await;
    assert_eq!(done["state"], "done");
    daemon.call("GET", "/api/v1/health", None).await.expect(200);
    // A finished job's stream replays everything and ends at once.
    let replay = daemon.events(&id).await;
    assert_eq!(replay.first().unwrap()["event"], "plan");
    assert_eq!(replay.last().unwrap()["event"], "done");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_private_and_a_stale_one_is_replaced() {
    let place = Place::new(&catalogue(&[]));
    // A stale socket: bound once, nobody listening any more.
    std::fs::create_dir_all(place.socket().parent().unwrap()).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // A directory of ours the daemon did not create keeps its mode.
    let before = mode(place.socket().parent().unwrap());
    drop(std::os::unix::net::UnixListener::bind(place.socket()).unwrap());
    assert!(place.socket().exists());
    let daemon = Daemon::start_in(place, Registry::builtin(), Box::new(|_| {})).await;
    assert_eq!(mode(daemon.socket().parent().unwrap()), before);
    assert_eq!(mode(&daemon.socket()), 0o600);
    daemon.call("GET", "/api/v1/health", None).await.expect(200);

    // A live daemon keeps its socket: a second one refuses to start.
    let second = advisord::daemon::socket::bind(&daemon.socket()).await;
    assert!(
        matches!(
            second,
            Err(advisord::daemon::socket::BindError::AlreadyRunning { .. })
        ),
        "a second daemon must refuse"
    );
    daemon.call("GET", "/api/v1/health", None).await.expect(200);
    let socket = daemon.socket();
    daemon.stop().await;
    assert!(!socket.exists(), "a clean stop removes the socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_uid_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to run a client as another uid");
        return;
    }
    let daemon = Daemon::start(&catalogue(&[]), Registry::builtin()).await;
    // Open the way so only the peer check stands between the other uid and the daemon.
    let socket = daemon.socket();
    std::fs::set_permissions(
        socket.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let curl = |uid: Option<u32>| {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new("curl");
        command
            .args(["--silent", "--max-time", "5", "--unix-socket"])
            .arg(&socket)
            .arg("http://x/api/v1/health");
        if let Some(uid) = uid {
            command.uid(uid).gid(uid);
        }
        command.output().expect("run curl")
    };
    let ours = curl(None);
    assert!(ours.status.success(), "our own uid is served");
    assert!(String::from_utf8_lossy(&ours.stdout).contains("uptime_s"));
    let foreign = curl(Some(65534));
    assert!(!foreign.status.success(), "uid 65534 must be refused");
    assert!(foreign.stdout.is_empty(), "and get nothing: {:?}", foreign);
    daemon.call("GET", "/api/v1/health", None).await.expect(200);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_listed_then_pruned_from_memory_and_journal() {
    let (registry, _fakes) = scripted(vec![("a", vec![Script::answer(&answer("a", "supports"))])]);
    let tweak: daemon_helper::Tweak = Box::new(|c| {
        c.retention.keep_for = Duration::from_millis(300);
        c.prune_every = Duration::from_millis(50);
    });
    let yaml = catalogue(&[Advisor::scripted("a")]);
    let daemon = Daemon::start_in(Place::new(&yaml), registry, tweak).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 5.0).await;
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(daemon.wait(&id).await["state"], "done");
    let listed = daemon
        .call("GET", "/api/v1/consultations?state=done", None)
        .await
        .expect(200);
    assert_eq!(ids(listed["jobs"].as_array().unwrap(), "id"), [id.as_str()]);
    let journaled = daemon.place.data().join("jobs").join(format!("{id}.json"));
    assert!(journaled.exists());
    let started = Instant::now();
    while daemon
        .call("GET", &format!("/api/v1/consultations/{id}"), None)
        .await
        .status
        != 404
    {
        assert!(started.elapsed() < daemon_helper::BOUND, "never pruned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon_helper::wait_for("the journal entry removed", || !journaled.exists());
    assert_eq!(
        daemon.place.records_of(TASK, "consultation").len(),
        1,
        "records stay"
    );
    daemon.stop().await;
}

/// The number of finished jobs kept in memory holds as soon as a job ends, not at the
/// pruner's next round: a daemon that runs many jobs in a minute keeps no more than its
/// limit. (The journal file goes at the next round: see the test above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_past_the_limit_are_pruned_as_soon_as_a_job_ends() {
    let scripts = (0..3)
        .map(|_| Script::answer(&answer("a", "supports")))
        .collect();
    let (registry, _fakes) = scripted(vec![("a", scripts)]);
    let tweak: daemon_helper::Tweak = Box::new(|c| {
        c.retention.keep_max = 2;
        c.prune_every = Duration::from_secs(3600);
    });
    let yaml = catalogue(&[Advisor::scripted("a")]);
    let daemon = Daemon::start_in(Place::new(&yaml), registry, tweak).await;
    let mut finished = Vec::new();
    for _ in 0..3 {
        let assessment = daemon.assessment().await;
        let job = daemon.consult(&assessment, 5.0).await;
        let id = job["id"].as_str().unwrap().to_string();
        assert_eq!(daemon.wait(&id).await["state"], "done");
        finished.push(id);
    }
    let first = daemon
        .place
        .data()
        .join("jobs")
        .join(format!("{}.json", finished[0]));
    let started = Instant::now();
    loop {
        let listed = daemon
            .call("GET", "/api/v1/consultations?state=done", None)
            .await
            .expect(200);
        let mut kept = ids(listed["jobs"].as_array().unwrap(), "id");
        kept.sort();
        if kept == finished[1..] {
            break;
        }
        assert!(
            started.elapsed() < daemon_helper::BOUND,
            "still kept: {kept:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The journal forgets it at the pruner's next round, not while jobs are writing.
    assert!(first.exists(), "the journal keeps it until the next round");
    daemon.stop().await;
}

/// The façade over the socket: an async server (this test's runtime) submits, follows from
/// any point, waits with a bound, and is told each job error with its kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_over_the_socket_submits_replays_and_waits() {
    use advisord::client::Client;
    use advisord::error::Error;
    use advisord::facade::{Api, Local};
    use advisord::protocol::{
        CancelRequest, ConsultRequest, EventsRequest, JobRequest, JobState, JobsRequest,
        RequestContext, Timeout, WaitRequest, Waited,
    };
    use futures::StreamExt;

    let slow = vec![Script::answer(&answer("a", "supports")).after(Duration::from_millis(400))];
    let (registry, _fakes) = scripted(vec![("a", slow)]);
    let daemon = Daemon::start(&catalogue(&[Advisor::scripted("a")]), registry).await;
    let assessment = daemon.assessment().await;
    let api: Box<dyn Api> = Box::new(Client::new(daemon.socket()));
    let context: RequestContext =
        serde_json::from_value(daemon.place.context()).expect("a request context");
    let job = api
        .consult(ConsultRequest {
            context: context.clone(),
            assessment: assessment.as_str().into(),
            question: None,
            prior_opinion: None,
            timeout: Some(Timeout::from_secs_f64(30.0).unwrap()),
        })
        .await
        .expect("queued");
    let id = job.id.clone();
    let short = Timeout::from_secs_f64(0.05).unwrap();
    match api
        .wait(WaitRequest {
            id: id.clone(),
            bound: Some(short),
        })
        .await
        .expect("a wait")
    {
        Waited::TimedOut(now) => assert!(!now.state.is_finished(), "{now:?}"),
        Waited::Ended(ended) => panic!("ended within 50 ms: {ended:?}"),
    }
    let ended = match api
        .wait(WaitRequest {
            id: id.clone(),
            bound: None,
        })
        .await
        .expect("a wait")
    {
        Waited::Ended(ended) => ended,
        Waited::TimedOut(now) => panic!("no bound, yet timed out: {now:?}"),
    };
    assert_eq!(ended.state, JobState::Done);
    assert_eq!(
        api.job(JobRequest { id: id.clone() }).await.unwrap(),
        *ended
    );

    // Every event, then the same stream from the second on: a replay from any point.
    let all: Vec<_> = api
        .events(EventsRequest {
            id: id.clone(),
            from: 0,
        })
        .await
        .expect("a stream")
        .map(|e| e.expect("an event"))
        .collect()
        .await;
    assert!(all.len() >= 3 && all.last().unwrap().is_done(), "{all:?}");
    let later: Vec<_> = api
        .events(EventsRequest {
            id: id.clone(),
            from: 1,
        })
        .await
        .expect("a stream")
        .map(|e| e.expect("an event"))
        .collect()
        .await;
    assert_eq!(later, all[1..]);

    let listed = api.jobs(JobsRequest::default()).await.expect("the jobs");
    assert_eq!(listed.jobs.len(), 1);
    let finished = api
        .cancel(CancelRequest { id: id.clone() })
        .await
        .expect_err("ended");
    assert_eq!((finished.code(), finished.exit_code()), ("job_finished", 2));
    let unknown = api
        .job(JobRequest { id: "NOPE".into() })
        .await
        .expect_err("no such job");
    assert_eq!(unknown.code(), "unknown_job");

    // In-process, the job verbs are a usage error naming the way out.
    let local = Local
        .jobs(JobsRequest::default())
        .await
        .expect_err("needs the daemon");
    assert!(
        matches!(&local, Error::Usage(m) if m.contains("--no-daemon")),
        "{local}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_outcomes_carry_each_recorded_consultations_cost() {
    let answer_of = |c: &str| Script::answer(&answer(c, "supports"));
    let (registry, _fakes) = scripted(vec![
        ("a", vec![answer_of("a").with_usage(250_000, 500_000)]),
        ("b", vec![answer_of("b")]),
        ("c", vec![answer_of("c").with_usage(10, 20)]),
    ]);
    let price = "price: {currency: USD, input_per_million: 2, output_per_million: 4, \
                 as_of: 2026-12-01}";
    let yaml = catalogue(&[
        Advisor::scripted("a").with(price),
        Advisor::scripted("b").with(price),
        Advisor::scripted("c"),
    ]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 30.0).await;
    let done = daemon.wait(job["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "done", "{done}");
    let consultations = done["consultations"].as_array().unwrap();
    assert_eq!(ids(consultations, "advisor"), ["a", "b", "c"]);
    // Usage × price: 0.25 M in at 2 USD and 0.5 M out at 4 USD.
    assert_eq!(
        consultations[0]["cost"],
        json!({"basis": "metered", "amount": 2.5, "currency": "USD"}),
        "{done}"
    );
    // A missing usage or price is unknown, never zero.
    assert_eq!(
        consultations[1]["cost"],
        json!({"basis": "unknown", "reason": "no usage recorded"}),
        "{done}"
    );
    assert_eq!(
        consultations[2]["cost"],
        json!({"basis": "unknown", "reason": "no price in the catalogue"}),
        "{done}"
    );
    daemon.stop().await;
}
