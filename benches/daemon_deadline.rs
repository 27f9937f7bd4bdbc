//! The deadline through the daemon (client → daemon → adapter), for the HTTP adapter
//! against the fake LLM server and for the process adapter:
//!
//! - **the latest answer kept**, as a fraction of the deadline: jobs whose one advisor
//!   answers just before the deadline (at 98 % to 99.9 % of it); the figure is the largest
//!   `duration_ms / deadline` among the consultations recorded `completed`. Goal ≥ 0.995.
//! - **the overshoot of the job's end past the deadline**: jobs whose one advisor never
//!   answers; the job's `finished_at` minus (its exchange's `started` time + the deadline).
//!   Goal ≤ 50 ms (the contract's 30 ms grace, then the recording).
//!
//! `cargo bench -p advisord --bench daemon_deadline`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script};
use daemon_helper::{call_json, catalogue, events, Advisor, Binary, Place};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use std::path::PathBuf;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

const DEADLINE_MS: u64 = 2_000;
/// When the near-deadline answers come, in thousandths of the deadline.
const NEAR: [u64; 7] = [980, 990, 993, 995, 996, 997, 999];
/// Jobs whose advisor never answers, per transport.
const HANGS: usize = 8;
const MIN_KEPT_FRACTION: f64 = 0.995;
const MAX_OVERSHOOT_MS: f64 = 50.0;

fn http_advisor(id: &str, endpoint: &str, model: &str) -> Advisor {
    Advisor {
        id: id.into(),
        adapter: "ollama".into(),
        transport: "http".into(),
        max_concurrent: 16,
        extra: vec![
            format!("    endpoint: {endpoint}"),
            format!("    model: {model}"),
        ],
    }
}

/// A catalogue file holding `advisor` alone.
fn one_advisor_catalogue(place: &Place, name: &str, advisor: Advisor) -> PathBuf {
    let path = place.path().join(format!("{name}.yaml"));
    std::fs::write(&path, catalogue(&[advisor])).expect("a catalogue");
    path
}

fn at(text: &str) -> OffsetDateTime {
    OffsetDateTime::parse(text, &Rfc3339).expect("an RFC 3339 time")
}

/// Queue a job on `assessment` under the one-advisor `catalogue`; its id.
async fn consult(place: &Place, assessment: &str, catalogue: &PathBuf) -> String {
    let mut context = place.context();
    context["catalogue_path"] = json!(catalogue);
    let body = json!({"context": context, "assessment": assessment,
        "timeout_s": DEADLINE_MS as f64 / 1000.0});
    call_json(&place.socket(), "POST", "/api/v1/consultations", &body)
        .await
        .expect(202)["id"]
        .as_str()
        .expect("a job id")
        .to_string()
}

/// The job's events until `done`, and the one consultation it recorded.
async fn finished(place: &Place, job: &str) -> (Vec<Value>, Value) {
    let all = events(&place.socket(), job).await;
    let recorded = all
        .iter()
        .find(|e| e["event"] == "recorded")
        .map(|e| e["record"].clone())
        .unwrap_or_else(|| panic!("job {job} recorded nothing: {all:?}"));
    (all, recorded)
}

/// The job's end past its exchange's deadline, in ms.
fn overshoot_ms(all: &[Value]) -> f64 {
    let started = all
        .iter()
        .find(|e| e["event"] == "started")
        .and_then(|e| e["at"].as_str())
        .map(at)
        .expect("a started event");
    let done = all.last().expect("a done event");
    let ended = done["result"]["finished_at"]
        .as_str()
        .map(at)
        .expect("finished_at");
    let deadline = started + time::Duration::milliseconds(DEADLINE_MS as i64);
    (ended - deadline).as_seconds_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut script = Script::new();
    for permille in NEAR {
        script = script.model(
            &format!("near-{permille}"),
            Reply::ok(advisord_fakes::llm_server::DEFAULT_ANSWER, 10, 10)
                .after(DEADLINE_MS * permille / 1000),
        );
    }
    script = script.model(
        "never",
        Reply::ok(advisord_fakes::llm_server::DEFAULT_ANSWER, 1, 1).after(600_000),
    );
    let server = FakeLlmServer::start(script).await;
    let place = Place::new("advisors: []\n");
    let hang = place.script("hang.sh", "cat > /dev/null\nexec sleep 600");
    let mut daemon = Binary::start(&place, &["--grace", "0"]);
    let assessment = call_json(
        &place.socket(),
        "POST",
        "/api/v1/reasoning/records",
        &json!({"context": place.context(), "record": {
            "kind": "assessment", "subject": "the deadline", "materiality": "critical",
            "hypothesis": "an answer in time is kept",
            "evidence": [{"kind": "file", "ref": "benches/daemon_deadline.rs"}]}}),
    )
    .await
    .expect(201)["id"]
        .as_str()
        .expect("an id")
        .to_string();

    // The latest answer kept: every near-deadline job at once.
    let mut jobs = Vec::new();
    for permille in NEAR {
        let catalogue = one_advisor_catalogue(
            &place,
            &format!("near-{permille}"),
            http_advisor(
                &format!("near-{permille}"),
                &server.base_url(),
                &format!("near-{permille}"),
            ),
        );
        jobs.push((permille, consult(&place, &assessment, &catalogue).await));
    }
    let mut latest_kept: f64 = 0.0;
    let mut table = Vec::new();
    for (permille, job) in &jobs {
        let (_, record) = finished(&place, job).await;
        let fraction = record["duration_ms"].as_u64().unwrap_or(0) as f64 / DEADLINE_MS as f64;
        let kept = record["status"] == "completed";
        if kept {
            latest_kept = latest_kept.max(fraction);
        }
        table.push(format!(
            "{:.1} %: {} at {fraction:.4}",
            *permille as f64 / 10.0,
            if kept { "kept" } else { "timeout" }
        ));
    }

    // The overshoot: jobs whose advisor never answers, HTTP and process, all at once.
    let http_never = one_advisor_catalogue(
        &place,
        "http-never",
        http_advisor("http-never", &server.base_url(), "never"),
    );
    let process_never = one_advisor_catalogue(
        &place,
        "process-never",
        Advisor::process("process-never", &hang).max_concurrent(16),
    );
    let mut hung = Vec::new();
    for _ in 0..HANGS {
        hung.push(("http", consult(&place, &assessment, &http_never).await));
        hung.push((
            "process",
            consult(&place, &assessment, &process_never).await,
        ));
    }
    let mut overshoots: Vec<(String, f64)> = Vec::new();
    for (transport, job) in &hung {
        let (all, record) = finished(&place, job).await;
        assert_eq!(record["failure"], "timeout", "{record}");
        overshoots.push((transport.to_string(), overshoot_ms(&all)));
    }
    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    server.shutdown().await;

    println!(
        "daemon_deadline: deadline {DEADLINE_MS} ms; answers {}",
        table.join(", ")
    );
    println!(
        "daemon_deadline: latest answer kept {latest_kept:.4} of the deadline (goal >= \
         {MIN_KEPT_FRACTION})"
    );
    let mut broken = latest_kept < MIN_KEPT_FRACTION;
    for transport in ["http", "process"] {
        let mut of: Vec<f64> = overshoots
            .iter()
            .filter(|(t, _)| t == transport)
            .map(|(_, o)| *o)
            .collect();
        of.sort_by(f64::total_cmp);
        let (median, max, min) = (of[of.len() / 2], of[of.len() - 1], of[0]);
        println!(
            "daemon_deadline: {transport} advisor that never answers: the job ends {median:.1} ms \
             after the deadline (median; min {min:.1}, max {max:.1} over {HANGS} jobs; goal <= \
             {MAX_OVERSHOOT_MS} ms)"
        );
        broken |= max > MAX_OVERSHOOT_MS || min < 0.0;
    }
    if broken {
        eprintln!("daemon_deadline: bound broken");
        std::process::exit(1);
    }
}
