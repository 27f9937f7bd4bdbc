//! Queue throughput: 500 detached jobs of two HTTP advisors against the fake LLM server
//! answering after 20 ms, through the daemon's socket. Each advisor has `max_concurrent:
//! 2`, so no scheduler can do better than 2 / 20 ms = 100 exchanges per second per advisor,
//! that is 100 jobs per second. Reports jobs per second and the fraction of that bound;
//! fails below half of it.
//!
//! `cargo bench -p advisord --bench daemon_queue`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

use advisord_adapters::registry::Registry;
use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script, DEFAULT_ANSWER};
use daemon_helper::{catalogue, Advisor, Daemon, Place};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const JOBS: usize = 500;
const TASKS: usize = 10;
const LATENCY_MS: u64 = 20;
const MAX_CONCURRENT: u32 = 2;
const FLOOR: f64 = 0.5;

#[tokio::main]
async fn main() {
    let server = FakeLlmServer::start(
        Script::new().default_step(Reply::ok(DEFAULT_ANSWER, 100, 40).after(LATENCY_MS)),
    )
    .await;
    let endpoint = format!("{}/v1", server.base_url());
    let advisors: Vec<Advisor> = ["m1", "m2"]
        .iter()
        .map(|model| {
            let mut a = Advisor::scripted(model).max_concurrent(MAX_CONCURRENT);
            a.adapter = "openai".into();
            a.with(&format!("endpoint: {endpoint}"))
                .with(&format!("model: {model}"))
                .with("credential: BENCH_KEY")
        })
        .collect();
    let place = Place::new(&catalogue(&advisors));
    let daemon = Arc::new(Daemon::start_in(place, Registry::builtin(), Box::new(|_| {})).await);
    let context = |task: &str| {
        let mut c = daemon.place.context_for(task);
        c["credentials"] = json!({"BENCH_KEY": "k"});
        c
    };
    let mut assessments = Vec::new();
    for t in 0..TASKS {
        assessments.push(daemon.assessment_in(&format!("task-{t}")).await);
    }

    let started = Instant::now();
    let mut ids = Vec::with_capacity(JOBS);
    for i in 0..JOBS {
        let task = format!("task-{}", i % TASKS);
        let body = json!({"context": context(&task), "assessment": assessments[i % TASKS], "timeout_s": 60});
        let job = daemon
            .call("POST", "/api/v1/consultations", Some(body))
            .await
            .expect(202);
        ids.push(job["id"].as_str().expect("an id").to_string());
    }
    let queued = started.elapsed();
    loop {
        let health = daemon.call("GET", "/api/v1/health", None).await.expect(200);
        let finished = ["done", "failed", "cancelled"]
            .iter()
            .map(|s| health["jobs"][s].as_u64().unwrap_or(0))
            .sum::<u64>();
        if finished as usize == JOBS {
            assert_eq!(health["jobs"]["done"], JOBS, "{health}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "jobs stuck: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = started.elapsed();
    let completed: usize = ids.len();
    let sample = daemon.job(&ids[JOBS - 1]).await;
    assert!(
        sample["consultations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "completed"),
        "{sample}"
    );
    let rate = completed as f64 / wall.as_secs_f64();
    let bound = f64::from(MAX_CONCURRENT) * 1000.0 / LATENCY_MS as f64;
    let fraction = rate / bound;
    println!(
        "daemon_queue: {JOBS} jobs x 2 advisors, {LATENCY_MS} ms latency: {rate:.1} jobs/s \
         ({:.2} s; all queued after {:.2} s); max_concurrent bound {bound:.0} jobs/s; \
         fraction {fraction:.2}; floor {FLOOR}",
        wall.as_secs_f64(),
        queued.as_secs_f64()
    );
    Arc::into_inner(daemon).expect("one owner").stop().await;
    server.shutdown().await;
    if fraction < FLOOR {
        eprintln!("daemon_queue: below the floor: {fraction:.2} < {FLOOR}");
        std::process::exit(1);
    }
}
