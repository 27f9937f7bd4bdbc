//! `advisors` in a large root: the median time of `GET /api/v1/reasoning/advisors` for a
//! new, empty task through the daemon (client → daemon → store), in a root whose other
//! tasks hold 100,000 consultations, next to the same in an empty root. Bound: at most 2×.
//! The daemon reads each task once (the first call, reported apart) and afterwards only
//! looks for new record files.
//!
//! The same verb with `--no-daemon` is printed for information, without a bound: a new
//! process has no cache and reads every consultation of the root once per call.
//!
//! `cargo bench -p advisord --bench daemon_advisors`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;
#[path = "support/prefill.rs"]
mod prefill;

#[path = "support/stats.rs"]
mod stats;

use advisord::core::records::{Body, Consultation, ConsultationStatus, FailureKind, Stance};
use daemon_helper::{call_json, catalogue, Advisor, Binary, Place};
use nix::sys::signal::Signal;
use serde_json::json;
use stats::{median, ms};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TASKS: usize = 100;
const PER_TASK: usize = 1_000;
const CALLS: usize = 41;
const CLI_CALLS: usize = 3;
const MAX_RATIO: f64 = 2.0;
const ADVISORS: [&str; 4] = ["one", "two", "three", "four"];

/// `count` consultations per task in `tasks` tasks, written straight to files.
fn prefill(state: &Path, tasks: usize, count: usize) {
    for t in 0..tasks {
        prefill::records(state, &format!("task-{t}"), count, |i| {
            let failed = i % 7 == 3;
            Body::Consultation(Consultation {
                plan: "01JPLAN".into(),
                advisor: ADVISORS[i % ADVISORS.len()].into(),
                status: if failed {
                    ConsultationStatus::Failed
                } else {
                    ConsultationStatus::Completed
                },
                failure: failed.then_some(FailureKind::Timeout),
                diagnostic: failed.then(|| "no answer within the deadline".into()),
                conclusion: (!failed).then(|| "the simple option holds for now".into()),
                stance: (!failed).then_some(Stance::Supports),
                assumptions: vec!["the load stays small".into()],
                risks: vec!["it may not scale".into()],
                actions: vec![],
                falsifiers: vec!["measure it".into()],
                confidence: Some(0.7),
                duration_ms: Some(1200),
                usage: None,
                retry_after_s: None,
                source: None,
                finished_at: format!(
                    "2026-03-01T{:02}:{:02}:{:02}.000Z",
                    i / 3600 % 24,
                    i / 60 % 60,
                    i % 60
                ),
                attestation: None,
            })
        });
    }
}

fn place() -> Place {
    let place = Place::new("advisors: []\n");
    // Advisors of a built-in adapter that needs no credential (never asked here).
    let advisors: Vec<Advisor> = ADVISORS
        .iter()
        .map(|id| Advisor {
            id: id.to_string(),
            adapter: "ollama".into(),
            transport: "http".into(),
            max_concurrent: 2,
            extra: vec![
                "    endpoint: http://127.0.0.1:9".into(),
                "    model: m".into(),
            ],
        })
        .collect();
    place.set_catalogue(&catalogue(&advisors));
    place
}

/// The first call's time and the median of the next ones, through the daemon.
async fn through_daemon(place: &Place) -> (Duration, Duration) {
    let mut daemon = Binary::start(place, &["--grace", "0"]);
    let body = json!({"context": place.context_for("fresh")});
    let socket = place.socket();
    let mut times = Vec::new();
    for _ in 0..=CALLS {
        let started = Instant::now();
        let view = call_json(&socket, "GET", "/api/v1/reasoning/advisors", &body)
            .await
            .expect(200);
        times.push(started.elapsed());
        assert_eq!(
            view["advisors"].as_array().map(Vec::len),
            Some(ADVISORS.len())
        );
    }
    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    let first = times.remove(0);
    (first, median(times))
}

/// The median of `advisor-consult advisors --no-daemon`.
fn without_daemon(place: &Place) -> Duration {
    let times = (0..CLI_CALLS)
        .map(|_| {
            let started = Instant::now();
            let output = Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .args([
                    "advisors",
                    "--no-daemon",
                    "--format",
                    "json",
                    "--task",
                    "fresh",
                ])
                .arg("--root")
                .arg(place.root())
                .arg("--state-dir")
                .arg(place.state())
                .arg("--catalogue")
                .arg(place.catalogue())
                .stdin(Stdio::null())
                .output()
                .expect("run advisor-consult");
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            started.elapsed()
        })
        .collect();
    median(times)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let empty = place();
    let large = place();
    prefill(&large.state(), TASKS, PER_TASK);
    let records = TASKS * PER_TASK;

    let (empty_first, empty_median) = through_daemon(&empty).await;
    let (large_first, large_median) = through_daemon(&large).await;
    let ratio = large_median.as_secs_f64() / empty_median.as_secs_f64();
    println!(
        "daemon_advisors: median `advisors` through the daemon in a root of {records} \
         consultations {:.2} ms, in an empty root {:.2} ms: {ratio:.2}x (bound {MAX_RATIO}x); \
         first call (reads every task once) {:.0} ms against {:.1} ms",
        ms(large_median),
        ms(empty_median),
        ms(large_first),
        ms(empty_first)
    );
    let (cli_empty, cli_large) = (without_daemon(&empty), without_daemon(&large));
    println!(
        "daemon_advisors: --no-daemon (no bound; a new process reads every consultation): \
         {:.0} ms in the large root, {:.0} ms in the empty one",
        ms(cli_large),
        ms(cli_empty)
    );
    if ratio > MAX_RATIO {
        eprintln!("daemon_advisors: bound broken");
        std::process::exit(1);
    }
}
