//! A consultation whose client takes its events on the connection that queued it
//! (docs/DAEMON.md, "What is flushed when" and "What a round trip costs"): nothing is
//! promised before the job as accepted reaches the client, so the daemon holds it until
//! one flush has made the job, its plan and the outcomes in within a short window durable
//! together; a slow advisor does not hold it; a daemon killed around that flush records
//! no outcome twice; and a plan and its consultations lost before their one flush leave
//! nothing, and are written once when the job runs again.

use crate::support::daemon::{self as daemon_helper, answer, catalogue, Advisor, Binary, Daemon};
use crate::support::daemon::{Place, TASK};
use advisord::protocol::{ConsultRequest, Event, RequestContext};
use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use nix::sys::signal::Signal;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A daemon in this process with advisors `a` and `b`, each answering with `script`.
async fn daemon_with(script: impl Fn(&str) -> Script) -> Daemon {
    let mut registry = Registry::builtin();
    for id in ["a", "b"] {
        let fake = Arc::new(ScriptedAdapter::new(vec![script(id)]));
        registry.insert(&format!("scripted-{id}"), fake);
    }
    let yaml = catalogue(&[Advisor::scripted("a"), Advisor::scripted("b")]);
    Daemon::start(&yaml, registry).await
}

fn request(daemon: &Daemon, assessment: &str) -> ConsultRequest {
    let context: RequestContext =
        serde_json::from_value(daemon.place.context()).expect("a context");
    ConsultRequest {
        context,
        assessment: assessment.into(),
        question: None,
        prior_opinion: None,
        timeout: None,
    }
}

/// One consultation taken on the connection that queued it, its events read to the end:
/// the job as accepted.
async fn consulted_to_its_end(
    client: &advisord::client::Client,
    daemon: &Daemon,
    assessment: &str,
) -> advisord::protocol::Job {
    let (job, events) = client
        .consult_streamed(&request(daemon, assessment))
        .await
        .expect("accepted");
    let mut events = events.expect("the events on the same connection");
    while events.next().await.expect("an event").is_some() {}
    job
}

fn kind(event: &Event) -> &'static str {
    match event {
        Event::Plan { .. } => "plan",
        Event::Started { .. } => "started",
        Event::Finished { .. } => "finished",
        Event::Recorded { .. } => "recorded",
        Event::Disagreement { .. } => "disagreement",
        Event::Done { .. } => "done",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_job_is_acknowledged_once_one_flush_made_it_its_plan_and_outcomes_durable() {
    let daemon = daemon_with(|id| Script::answer(&answer(id, "supports"))).await;
    let assessment = daemon.assessment().await;
    let client = advisord::client::Client::new(daemon.socket());
    // The daemon runs in this process (each integration test has a process of its own):
    // the count is this consultation's.
    let before = advisord::store::durable::flushes();
    let held = advisord::store::durable::gathered();
    let (job, events) = client
        .consult_streamed(&request(&daemon, &assessment))
        .await
        .expect("accepted");
    // When the job as accepted arrives, its plan and both consultations are in place,
    // made durable (with the job's journal entry) by one flush.
    assert_eq!(daemon.place.records_of(TASK, "plan").len(), 1);
    let advisors = daemon.place.consulted(TASK);
    assert_eq!(advisors, ["a", "b"]);
    assert_eq!(advisord::store::durable::flushes() - before, 1);
    // A consultation alone is the flush's only caller: it never waits for others.
    assert_eq!(advisord::store::durable::gathered(), held);
    // The events keep their order: the plan first, each exchange's start and end, each
    // record, then done.
    let mut events = events.expect("the events on the same connection");
    let mut seen = Vec::new();
    while let Some(event) = events.next().await.expect("an event") {
        seen.push(event);
    }
    let kinds: Vec<&str> = seen.iter().map(kind).collect();
    assert_eq!(kinds.first(), Some(&"plan"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    for advisor_event in ["started", "finished", "recorded"] {
        assert_eq!(
            kinds.iter().filter(|k| **k == advisor_event).count(),
            2,
            "{kinds:?}"
        );
    }
    let Some(Event::Done { result, .. }) = seen.last() else {
        unreachable!("checked above")
    };
    assert_eq!(result.id, job.id);
    assert_eq!(result.state.as_str(), "done");
    assert!(result.consultations.iter().all(|c| c.record.is_some()));
    daemon.stop().await;
}

/// Every record of a batch is anchored as this machine's, however many the batch holds:
/// a plan and two consultations written with one flush, twice, leave the task the
/// machine's own (`local`), its consultations counted. Judged per record against the
/// anchor on disk, which moves only once the batch is placed, the third record of each
/// batch was left unanchored, and after the second consultation the task read as
/// `foreign` to the daemon that wrote all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consultations_written_in_one_flush_keep_the_task_this_machines_own() {
    use advisord::core::chain::TaskTrust;
    use advisord::facade::Api;
    let mut registry = Registry::builtin();
    for id in ["a", "b"] {
        let answered = || Script::answer(&answer(id, "supports"));
        let fake = Arc::new(ScriptedAdapter::new(vec![
            answered(),
            answered(),
            answered(),
        ]));
        registry.insert(&format!("scripted-{id}"), fake);
    }
    let yaml = catalogue(&[Advisor::scripted("a"), Advisor::scripted("b")]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let client = advisord::client::Client::new(daemon.socket());
    let context: RequestContext =
        serde_json::from_value(daemon.place.context()).expect("a context");
    let held = advisord::store::durable::gathered();
    for round in 1..=3 {
        let before = advisord::store::durable::flushes();
        consulted_to_its_end(&client, &daemon, &assessment).await;
        // Written as one batch (the case this guards), not record by record.
        assert_eq!(
            advisord::store::durable::flushes() - before,
            1,
            "round {round}"
        );
        // Each flush had one caller, so the next consultation's is never held waiting
        // for more (only a stream of writers is: `durable::gather_window`).
        assert_eq!(advisord::store::durable::gathered(), held, "round {round}");
        let status = client
            .status(advisord::protocol::StatusRequest {
                context: context.clone(),
            })
            .await
            .expect("the task's status");
        assert_eq!(
            status.trust,
            TaskTrust::Local,
            "after consultation {round}: {:?}",
            status.foreign
        );
    }
    assert_eq!(daemon.place.records_of(TASK, "plan").len(), 3);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_advisor_does_not_hold_a_streamed_acknowledgement() {
    let daemon = daemon_with(|id| {
        let answered = Script::answer(&answer(id, "supports"));
        if id == "b" {
            answered.after(Duration::from_secs(3))
        } else {
            answered
        }
    })
    .await;
    let assessment = daemon.assessment().await;
    let client = advisord::client::Client::new(daemon.socket());
    let asked = Instant::now();
    let (job, events) = client
        .consult_streamed(&request(&daemon, &assessment))
        .await
        .expect("accepted");
    // Acknowledged long before `b` answers: the plan was placed alone once the window
    // passed, its flush covering the job.
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "acknowledged after {:?}",
        asked.elapsed()
    );
    assert_eq!(daemon.place.records_of(TASK, "plan").len(), 1);
    assert!(daemon.place.records_of(TASK, "consultation").len() < 2);
    let mut events = events.expect("the events on the same connection");
    let mut seen = Vec::new();
    while let Some(event) = events.next().await.expect("an event") {
        seen.push(event);
    }
    let kinds: Vec<&str> = seen.iter().map(kind).collect();
    assert_eq!(kinds.first(), Some(&"plan"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "recorded").count(), 2);
    let Some(Event::Done { result, .. }) = seen.last() else {
        panic!("the last event is done: {kinds:?}")
    };
    assert_eq!(result.id, job.id);
    assert_eq!(result.state.as_str(), "done");
    let advisors = daemon.place.consulted(TASK);
    assert_eq!(advisors, ["a", "b"]);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_around_a_streamed_jobs_one_flush_records_no_outcome_twice() {
    use advisord_fakes::llm_server::{FakeLlmServer, Script};
    let server = FakeLlmServer::start(Script::new()).await;
    let http = |id: &str| Advisor::http(id, &server.base_url(), "m");
    let place = Place::new(&catalogue(&[http("a"), http("b")]));
    let mut daemon = Binary::start(&place, &[]);
    let assessment = place
        .assess(
            "one flush for a job, its plan and its outcomes",
            "nothing is recorded twice",
            "src/daemon/runner.rs",
        )
        .await;
    let context: RequestContext = serde_json::from_value(place.context()).expect("a context");
    let client = advisord::client::Client::new(place.socket());
    let (job, _events) = client
        .consult_streamed(&ConsultRequest {
            context,
            assessment: assessment.as_str().into(),
            question: None,
            prior_opinion: None,
            timeout: None,
        })
        .await
        .expect("accepted");
    // Killed as soon as the job as accepted arrives: its end may or may not be journaled,
    // and its plan's id is not (the records carry it).
    daemon.signal_and_wait(Signal::SIGKILL);
    let _daemon = Binary::start(&place, &[]);
    // The job, resumed or not, ends without asking anyone again.
    let started = Instant::now();
    loop {
        let jobs = daemon_helper::call(&place.socket(), "GET", "/api/v1/consultations", None)
            .await
            .expect(200);
        let unfinished = jobs["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter(|j| matches!(j["state"].as_str(), Some("queued" | "running")))
            .count();
        if unfinished == 0 {
            if let Some(ours) = jobs["jobs"]
                .as_array()
                .expect("jobs")
                .iter()
                .find(|j| j["id"] == job.id.as_str())
            {
                assert_eq!(ours["state"], "done", "{ours}");
            }
            break;
        }
        assert!(
            started.elapsed() < daemon_helper::BOUND,
            "the resumed job did not end: {jobs}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(place.records_of(TASK, "plan").len(), 1);
    let advisors = place.consulted(TASK);
    assert_eq!(advisors, ["a", "b"]);
    assert_eq!(server.requests().len(), 2, "each advisor asked once");
}

#[test]
fn a_plan_and_consultations_lost_before_their_one_flush_leave_nothing_and_are_written_once_after() {
    use advisord::core::catalogue::Catalogue;
    use advisord::core::policy::PlanEnv;
    use advisord::core::records::{AdvisorAvailability, Body, Mode, Status, TaskName};
    use advisord::store::{Drafted, Store};
    let project = crate::attest::project();
    let assessment = project.record(json!({
        "kind": "assessment", "subject": "a plan and its outcomes in one flush",
        "materiality": "high", "hypothesis": "a crash before the flush leaves nothing",
        "evidence": [{"kind": "file", "ref": "src/store/write.rs"}]}))["id"]
        .as_str()
        .expect("an id")
        .to_string();
    advisord::machine::install(&project.data());
    let task = TaskName::new("default").expect("a task");
    let catalogue = Catalogue::embedded();
    let env = PlanEnv {
        catalogue: &catalogue,
        mode: Mode::Standard,
        availability: catalogue
            .advisors
            .iter()
            .map(|a| AdvisorAvailability {
                advisor: a.id.clone(),
                status: Status::Available,
                reason: "present".into(),
                recovering: false,
                until: None,
            })
            .collect(),
        budget_exhausted: None,
        asker: None,
    };
    let input = json!({"kind": "plan", "assessment": assessment, "prompt": "judge it"});
    let drafts = |plan: &advisord::core::records::Record| {
        let Body::Plan(body) = &plan.body else {
            panic!("a plan")
        };
        assert!(!body.selected.is_empty(), "the plan selects someone");
        body.selected
            .iter()
            .map(|s| Drafted {
                input: json!({"kind": "consultation", "plan": plan.id(),
                    "advisor": s.advisor, "status": "completed",
                    "conclusion": "agrees", "stance": "supports", "confidence": 0.9}),
                job: "01JTESTJOB0000000000000000".into(),
                source: None,
                counts: true,
                secrets: None,
            })
            .collect::<Vec<_>>()
    };
    let kinds = |store: &Store| -> Vec<String> {
        store
            .records(&task)
            .expect("records")
            .iter()
            .map(|r| r.kind().to_string())
            .collect()
    };
    // The writer dies with the plan on its temporary file, its exchanges' outcomes
    // drafted, before the one flush and any rename.
    let dying = Store::open(&project.state());
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        dying.write_plan_with(&task, &input, &env, |plan| {
            let _ = drafts(plan);
            panic!("killed before the flush")
        })
    }));
    assert!(died.is_err());
    // Nothing of it is a record: the next daemon reads the assessment alone.
    assert_eq!(kinds(&Store::open(&project.state())), ["assessment"]);
    // The resumed job makes its plan and asks again: each outcome is written once, with
    // the plan, in one flush; the dead writer's temporary file is removed by the first
    // write that lists the task (the next daemon's).
    let next = Store::open(&project.state());
    let before = advisord::store::durable::flushes();
    let written = next
        .write_plan_with(&task, &input, &env, |plan| Some(drafts(plan)))
        .expect("written");
    assert_eq!(advisord::store::durable::flushes() - before, 1);
    let consultations = written.consultations.expect("written with the plan");
    assert!(consultations.iter().all(Result::is_ok), "{consultations:?}");
    let fresh = Store::open(&project.state());
    let mut expected = vec!["assessment".to_string(), "plan".to_string()];
    expected.extend(consultations.iter().map(|_| "consultation".to_string()));
    assert_eq!(kinds(&fresh), expected);
    let leftovers: Vec<_> = std::fs::read_dir(project.state().join("default"))
        .expect("the task's directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A job that starts at once has its accepted entry saved unflushed, to be made durable
/// by its plan's flush. When that save fails, the request is refused and nothing of the
/// job is recorded, and the daemon goes on serving once the journal can be written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_entry_cannot_be_journaled_is_refused_and_records_nothing() {
    let daemon = daemon_with(|id| Script::answer(&answer(id, "supports"))).await;
    let assessment = daemon.assessment().await;
    let client = advisord::client::Client::new(daemon.socket());
    // The journal's directory replaced by a file: every save fails, whoever runs the test.
    let jobs = daemon.place.data().join("jobs");
    let moved = daemon.place.data().join("jobs.moved");
    std::fs::rename(&jobs, &moved).expect("the journal's directory moved aside");
    std::fs::write(&jobs, b"").expect("a file in its place");
    // Taken on the connection that queued it, as `advisor-consult` does...
    let refused = client
        .consult_streamed(&request(&daemon, &assessment))
        .await
        .map(|(job, _)| job)
        .expect_err("not accepted without its journal entry");
    assert!(
        refused.to_string().contains("was not accepted"),
        "{refused}"
    );
    // ... and with the plain `202`.
    let body = json!({"context": daemon.place.context(), "assessment": assessment});
    let reply =
        daemon_helper::call_json(&daemon.socket(), "POST", "/api/v1/consultations", &body).await;
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(reply.status >= 500, "{} {text}", reply.status);
    assert!(text.contains("was not accepted"), "{text}");
    // Neither job is kept, and nothing of either ran: no plan, no consultation.
    let listed = daemon_helper::call(&daemon.socket(), "GET", "/api/v1/consultations", None).await;
    let listed: serde_json::Value = serde_json::from_slice(&listed.body).expect("a job list");
    assert_eq!(listed["jobs"], json!([]), "{listed}");
    assert!(daemon.place.records_of(TASK, "plan").is_empty());
    assert!(daemon.place.consulted(TASK).is_empty());
    // The journal back: the next consultation runs and is recorded.
    std::fs::remove_file(&jobs).expect("the file removed");
    std::fs::rename(&moved, &jobs).expect("the journal's directory back");
    let job = consulted_to_its_end(&client, &daemon, &assessment).await;
    assert_eq!(daemon.place.records_of(TASK, "plan").len(), 1, "{job:?}");
    assert_eq!(daemon.place.consulted(TASK), ["a", "b"]);
}
