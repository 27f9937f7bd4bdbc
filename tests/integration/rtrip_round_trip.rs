//! A consultation's round trip (docs/DAEMON.md, "What a round trip costs" and "What is
//! flushed when"): the job and its events on the connection that queued it, the job's
//! journal entry made durable by its plan's flush (and surviving a crash right after its
//! acknowledgement), and the consultations ready at the same moment written with one flush.

use crate::support::cli::Project;
use crate::support::daemon::{self as daemon_helper, answer, catalogue, Advisor, Binary, Daemon};
use crate::support::daemon::{Place, TASK};
use advisord::protocol::{ConsultRequest, Event, RequestContext};
use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use std::rc::Rc;
use std::sync::Arc;

fn id_of(record: &Value) -> String {
    record["id"].as_str().expect("an id").to_string()
}

/// A `--no-daemon` project whose catalogue holds two process advisors, an assessment and
/// its plan selecting both; the project and the plan's id.
fn planned() -> (Rc<Project>, String) {
    let project = crate::attest::project();
    let assessment = id_of(&project.record(json!({
        "kind": "assessment", "subject": "one flush for two records", "materiality": "high",
        "hypothesis": "a batch is enough",
        "evidence": [{"kind": "file", "ref": "src/store/write.rs"}]})));
    let plan = id_of(&project.record(json!({"kind": "plan", "assessment": assessment})));
    (project, plan)
}

/// The project's store opened as the daemon opens it (its data directory installed), and
/// its default task.
fn opened(project: &Project) -> (advisord::store::Store, advisord::core::records::TaskName) {
    advisord::machine::install(&project.data());
    let store = advisord::store::Store::open(&project.state());
    let task = advisord::core::records::TaskName::new("default").expect("a task");
    (store, task)
}

/// What a job's writes carry.
fn provenance() -> advisord::store::Provenance<'static> {
    advisord::store::Provenance {
        job: "01JTESTJOB0000000000000000",
        source: None,
        counts: true,
        secrets: &[],
    }
}

fn consultation(plan: &str, advisor: &str) -> Value {
    json!({"kind": "consultation", "plan": plan, "advisor": advisor, "status": "completed",
        "conclusion": format!("{advisor} agrees"), "stance": "supports", "confidence": 0.9})
}

#[test]
fn consultations_ready_together_are_written_in_order_with_one_flush() {
    let (project, plan) = planned();
    let (store, task) = opened(&project);
    let items = [
        (consultation(&plan, "adv1"), provenance()),
        (consultation(&plan, "adv2"), provenance()),
    ];
    // Each integration test runs in a process of its own: the count is this test's.
    let before = advisord::store::durable::flushes();
    let written = store.write_consultations(&task, &items);
    assert_eq!(advisord::store::durable::flushes() - before, 1);
    let written: Vec<_> = written.into_iter().map(|r| r.expect("written")).collect();
    let sequences: Vec<u64> = written.iter().map(|r| r.envelope.sequence).collect();
    assert_eq!(sequences, [3, 4], "after the assessment and the plan");
    // In place, in order, attested: the chain verifies and both count as reviews.
    let verify = project
        .cli()
        .args(["verify", "--format", "json"])
        .run()
        .expect_exit(0)
        .json();
    assert!(verify["tasks"][0].get("broken_at").is_none(), "{verify}");
    let status = project
        .cli()
        .args(["status", "--format", "json"])
        .run()
        .expect_exit(0)
        .stdout;
    for id in &written {
        assert!(status.contains(id.id()), "{} in {status}", id.id());
    }
    // A store opened afresh reads the same two records from their files.
    let fresh = advisord::store::Store::open(&project.state());
    let kinds: Vec<String> = fresh
        .records(&task)
        .expect("records")
        .iter()
        .map(|r| r.kind().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["assessment", "plan", "consultation", "consultation"]
    );
}

#[test]
fn a_refused_consultation_of_a_batch_leaves_the_others_written() {
    let (project, plan) = planned();
    project.record_consultation(consultation(&plan, "adv1"));
    let (store, task) = opened(&project);
    let written = store.write_consultations(
        &task,
        &[
            (consultation(&plan, "adv1"), provenance()),
            (consultation(&plan, "adv2"), provenance()),
        ],
    );
    match &written[0] {
        Err(advisord::store::StoreError::Refused(r)) => {
            assert_eq!(
                r.reason,
                advisord::core::writer::ReasonCode::DuplicateConsultation,
                "{r:?}"
            )
        }
        other => panic!("adv1 is recorded already: {other:?}"),
    }
    let second = written[1].as_ref().expect("adv2 written");
    assert_eq!(second.envelope.sequence, 4);
    let advisors: Vec<String> = advisord::store::Store::open(&project.state())
        .records(&task)
        .expect("records")
        .iter()
        .filter_map(|r| match &r.body {
            advisord::core::records::Body::Consultation(c) => Some(c.advisor.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(advisors, ["adv1", "adv2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consultation_asked_with_ndjson_streams_the_job_then_its_events_on_one_connection() {
    let mut registry = Registry::builtin();
    for id in ["a", "b"] {
        // Two consultations: the streamed one, then the plain one.
        let fake = Arc::new(ScriptedAdapter::new(vec![
            Script::answer(&answer(id, "supports")),
            Script::answer(&answer(id, "supports")),
        ]));
        registry.insert(&format!("scripted-{id}"), fake);
    }
    let yaml = catalogue(&[Advisor::scripted("a"), Advisor::scripted("b")]);
    let daemon = Daemon::start(&yaml, registry).await;
    let assessment = daemon.assessment().await;
    let context: RequestContext =
        serde_json::from_value(daemon.place.context()).expect("a context");
    let client = advisord::client::Client::new(daemon.socket());
    let (job, events) = client
        .consult_streamed(&ConsultRequest {
            context,
            assessment: assessment.as_str().into(),
            question: None,
            prior_opinion: None,
            timeout: None,
        })
        .await
        .expect("accepted");
    assert_eq!(job.assessment.as_str(), assessment);
    let mut events = events.expect("the events on the same connection");
    let mut seen = Vec::new();
    while let Some(event) = events.next().await.expect("an event") {
        seen.push(event);
    }
    let kinds: Vec<&str> = seen
        .iter()
        .map(|e| match e {
            Event::Plan { .. } => "plan",
            Event::Started { .. } => "started",
            Event::Finished { .. } => "finished",
            Event::Recorded { .. } => "recorded",
            Event::Disagreement { .. } => "disagreement",
            Event::Done { .. } => "done",
        })
        .collect();
    assert_eq!(kinds.first(), Some(&"plan"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "recorded").count(), 2);
    let Some(Event::Done {
        result, job: id, ..
    }) = seen.last()
    else {
        unreachable!("checked above")
    };
    assert_eq!(id, &job.id);
    assert_eq!(result.state.as_str(), "done");
    // Without the header the reply is the plain 202 with the job, as before.
    let plain = daemon.consult(&assessment, 30.0).await;
    assert_eq!(plain["state"], "queued", "{plain}");
    daemon.wait(plain["id"].as_str().expect("an id")).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_acknowledged_with_its_plans_flush_resumes_after_sigkill_on_that_plan() {
    use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script};
    // The first request to each advisor hangs (the daemon is killed meanwhile); the next
    // answers at once.
    let slow = || Some(Reply::ok("late", 1, 1).after(60_000));
    let server = FakeLlmServer::start(Script::new().model_queue("ma", slow(), None).model_queue(
        "mb",
        slow(),
        None,
    ))
    .await;
    let http = |id: &str, model: &str| Advisor::http(id, &server.base_url(), model);
    let place = Place::new(&catalogue(&[http("a", "ma"), http("b", "mb")]));
    let mut daemon = Binary::start(&place, &[]);
    let assessment = place
        .assess(
            "one flush for the job and its plan",
            "the plan's flush covers the job",
            "src/daemon/jobs.rs",
        )
        .await;
    let body = json!({"context": place.context(), "assessment": assessment, "timeout_s": 60});
    let reply = daemon_helper::call_json(&place.socket(), "POST", "/api/v1/consultations", &body)
        .await
        .expect(202);
    let job = reply["id"].as_str().expect("a job id").to_string();
    // Acknowledged once the plan's flush made the job durable: the plan is in place.
    let plans = place.records_of(TASK, "plan");
    assert_eq!(plans.len(), 1, "{plans:?}");
    let plan = plans[0]["id"].clone();
    daemon_helper::wait_for("both advisors asked", || server.requests().len() == 2);
    daemon.signal_and_wait(Signal::SIGKILL);

    let _daemon = Binary::start(&place, &[]);
    let events = daemon_helper::events(&place.socket(), &job).await;
    let done = &events.last().expect("events")["result"];
    assert_eq!(done["state"], "done", "{events:?}");
    // The job took the plan it made before the crash, and asked each advisor once more.
    assert_eq!(done["plan"], plan, "{done}");
    assert_eq!(place.records_of(TASK, "plan").len(), 1);
    let advisors = place.consulted(TASK);
    assert_eq!(advisors, ["a", "b"]);
}
