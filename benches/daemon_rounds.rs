//! Memory and latency under a growing root: rounds of 200 concurrent consultation jobs on
//! one root through the daemon (client → daemon → fake LLM server → store), printing per
//! round the resident memory (VmRSS) of the daemon after the round and the median time
//! from a job's request to its `done` event. Each job is a session of its own: it records
//! an assessment in a task of its own and asks for a consultation on it, as many agent
//! sessions on one repository do, so every round adds 200 tasks to the root. Nine rounds,
//! as in the report that asked for this measure.
//! Goals: RSS flat within 20 % of the first round's; p50 within 1.3× of the first round's.
//!
//! `cargo bench -p advisord --bench daemon_rounds`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

use advisord_fakes::llm_server::{FakeLlmServer, Script};
use daemon_helper::{call_json, catalogue, events, Advisor, Binary, Place};
use nix::sys::signal::Signal;
use serde_json::json;
use std::time::{Duration, Instant};

const ROUNDS: usize = 9;
const JOBS: usize = 200;
const MAX_RSS_GROWTH: f64 = 1.2;
const MAX_P50_GROWTH: f64 = 1.3;

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

fn http_advisor(id: &str, endpoint: &str) -> Advisor {
    Advisor {
        id: id.into(),
        adapter: "ollama".into(),
        transport: "http".into(),
        max_concurrent: 32,
        extra: vec![format!("    endpoint: {endpoint}"), "    model: m".into()],
    }
}

/// Record a session's assessment in `context`'s task; its id.
async fn assess(socket: &std::path::Path, context: &serde_json::Value) -> String {
    let reply = call_json(
        socket,
        "POST",
        "/api/v1/reasoning/records",
        &json!({"context": context, "record": {
            "kind": "assessment", "subject": "rounds", "materiality": "critical",
            "hypothesis": "memory stays flat",
            "evidence": [{"kind": "file", "ref": "benches/daemon_rounds.rs"}]}}),
    )
    .await
    .expect(201);
    reply["id"].as_str().expect("an id").to_string()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = FakeLlmServer::start(Script::new()).await;
    let place = Place::new(&catalogue(&[
        http_advisor("first", &server.base_url()),
        http_advisor("second", &server.base_url()),
    ]));
    let mut daemon = Binary::start(&place, &["--grace", "0"]);
    let pid = daemon.child.id();
    let socket = place.socket();
    let mut rounds: Vec<(f64, f64)> = Vec::new();
    for round in 1..=ROUNDS {
        let jobs = (0..JOBS).map(|job| {
            let socket = socket.clone();
            let context = place.context_for(&format!("session-{round}-{job}"));
            tokio::spawn(async move {
                let assessment = assess(&socket, &context).await;
                let started = Instant::now();
                let body = json!({"context": context, "assessment": assessment, "timeout_s": 60});
                let job = call_json(&socket, "POST", "/api/v1/consultations", &body)
                    .await
                    .expect(202);
                let id = job["id"].as_str().expect("a job id").to_string();
                let all = events(&socket, &id).await;
                assert_eq!(all.last().map(|e| e["event"].clone()), Some(json!("done")));
                started.elapsed()
            })
        });
        let mut times: Vec<Duration> = Vec::new();
        for job in jobs.collect::<Vec<_>>() {
            times.push(job.await.expect("a job ran"));
        }
        times.sort();
        let p50 = times[times.len() / 2].as_secs_f64() * 1e3;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let rss = rss_kb(pid) as f64 / 1024.0;
        println!("daemon_rounds: round {round}: {JOBS} jobs, p50 {p50:.0} ms, VmRSS {rss:.1} MB");
        rounds.push((rss, p50));
    }
    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    server.shutdown().await;
    let (rss0, p500) = rounds[0];
    let rss_max = rounds.iter().map(|r| r.0).fold(0.0, f64::max);
    let p50_max = rounds.iter().map(|r| r.1).fold(0.0, f64::max);
    println!(
        "daemon_rounds: largest VmRSS {:.2}x the first round's (bound {MAX_RSS_GROWTH}x); \
         largest p50 {:.2}x the first round's (bound {MAX_P50_GROWTH}x)",
        rss_max / rss0,
        p50_max / p500
    );
    if rss_max > rss0 * MAX_RSS_GROWTH || p50_max > p500 * MAX_P50_GROWTH {
        eprintln!("daemon_rounds: bound broken");
        std::process::exit(1);
    }
}
