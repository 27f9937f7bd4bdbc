//! `advisors` in a large root: the median time of `GET /api/v1/reasoning/advisors` for a
//! new, empty task through the daemon (client → daemon → store), in a root whose other
//! tasks hold 100,000 consultations, next to the same in an empty root. Bound: at most 2×.
//! The daemon reads each task once (the first call, reported apart) and afterwards only
//! looks for new record files.
//!
//! The same in a root of 10,000 settled disagreements (50,000 records: an assessment, two
//! completed consultations, a disagreement and a resolution each), whose track records
//! every answer carries: the index of resolutions is fed as records are read, and the
//! tally is kept until a resolution changes it, so `advisors` stays flat. Bound: at most
//! 2× the empty root.
//!
//! The same verb with `--no-daemon` is printed for information, without a bound: a new
//! process has no memory of its own, and reads what the persisted index (`<state>/+index`)
//! does not already hold (`benches/no_daemon.rs` bounds that path).
//!
//! `cargo bench -p advisord --bench daemon_advisors`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;
#[path = "support/prefill.rs"]
mod prefill;

#[path = "support/stats.rs"]
mod stats;

use advisord::core::chain;
use advisord::core::records::{Record, SCHEMA_VERSION};
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
const SETTLED_TASKS: usize = 100;
const DISPUTES_PER_TASK: usize = 100;

/// `count` consultations per task in `tasks` tasks, written straight to files.
fn prefill(state: &Path, tasks: usize, count: usize) {
    for t in 0..tasks {
        prefill::records(state, &format!("task-{t}"), count, |i| {
            prefill::consultation(i, &ADVISORS)
        });
    }
}

/// `disputes` settled disagreements in each of `tasks` tasks, written straight to files
/// and chained as the writer chains them: an assessment, a completed consultation of two
/// advisors, their disagreement with the executor, and a resolution favouring the first
/// advisor, the executor or neither in turn.
fn settle(state: &Path, tasks: usize, disputes: usize) {
    for t in 0..tasks {
        let task = format!("settled-{t}");
        let dir = state.join(&task);
        std::fs::create_dir_all(&dir).expect("the task directory");
        let mut prev = chain::GENESIS.to_string();
        let mut sequence = 0u64;
        let mut put = |kind: &str, fields: serde_json::Value| -> String {
            sequence += 1;
            let id = format!("01J{t:04}{sequence:019}");
            let mut value = json!({
                "id": id, "task": task, "sequence": sequence,
                "created_at": "2026-03-01T12:00:00.000Z", "schema": SCHEMA_VERSION,
                "redacted": [], "prev": prev, "kind": kind,
            });
            for (k, v) in fields.as_object().expect("fields") {
                value[k] = v.clone();
            }
            let record: Record = serde_json::from_value(value).expect("a record");
            let mut bytes = serde_json::to_vec_pretty(&record).expect("serialises");
            bytes.push(b'\n');
            prev = chain::digest(&bytes);
            std::fs::write(dir.join(advisord::store::file_name(&record)), bytes)
                .expect("a record file");
            id
        };
        for d in 0..disputes {
            let assessment = put(
                "assessment",
                json!({"subject": format!("Decision {d} of task {t}"), "materiality": "low",
                       "hypothesis": "the simple option holds"}),
            );
            let consultations: Vec<String> = (0..2)
                .map(|k| {
                    put(
                        "consultation",
                        json!({"plan": "01JPLAN", "advisor": ADVISORS[(d + k) % ADVISORS.len()],
                               "status": "completed", "conclusion": "it does not",
                               "stance": "opposes",
                               "finished_at": "2026-03-01T12:00:00.000Z"}),
                    )
                })
                .collect();
            let disagreement = put(
                "disagreement",
                json!({"assessment": assessment, "discriminating_question": "does it hold?",
                       "positions": [
                           {"source": "executor", "position": "it holds"},
                           {"source": consultations[0], "position": "it does not"},
                           {"source": consultations[1], "position": "not like this"}]}),
            );
            let favours = match d % 3 {
                0 => consultations[0].clone(),
                1 => "executor".to_string(),
                _ => "neither".to_string(),
            };
            put(
                "resolution",
                json!({"disagreement": disagreement, "experiment": "ran it",
                       "observed": "what it showed", "favours": favours,
                       "evidence": [{"kind": "test", "ref": "t"}]}),
            );
        }
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

/// The first call's time and the median of the next ones, through the daemon; every
/// answer's resolutions summed over its advisors.
async fn through_daemon(place: &Place) -> (Duration, Duration, u64) {
    let mut daemon = Binary::start(place, &["--grace", "0"]);
    let body = json!({"context": place.context_for("fresh")});
    let socket = place.socket();
    let mut times = Vec::new();
    let mut resolutions = 0;
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
        resolutions = view["advisors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                a["track_record"]["resolutions"]
                    .as_u64()
                    .expect("a track record")
            })
            .sum();
    }
    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    let first = times.remove(0);
    (first, median(times), resolutions)
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
    let settled = place();
    settle(&settled.state(), SETTLED_TASKS, DISPUTES_PER_TASK);
    let records = TASKS * PER_TASK;

    let (empty_first, empty_median, _) = through_daemon(&empty).await;
    let (large_first, large_median, _) = through_daemon(&large).await;
    let (settled_first, settled_median, resolutions) = through_daemon(&settled).await;
    let disputes = SETTLED_TASKS * DISPUTES_PER_TASK;
    // Two advisors hold a position in every dispute.
    assert_eq!(
        resolutions,
        2 * disputes as u64,
        "every resolution is counted"
    );
    let ratio = large_median.as_secs_f64() / empty_median.as_secs_f64();
    let settled_ratio = settled_median.as_secs_f64() / empty_median.as_secs_f64();
    println!(
        "daemon_advisors: median `advisors` through the daemon in a root of {records} \
         consultations {:.2} ms, in an empty root {:.2} ms: {ratio:.2}x (bound {MAX_RATIO}x); \
         first call (reads every task once) {:.0} ms against {:.1} ms",
        ms(large_median),
        ms(empty_median),
        ms(large_first),
        ms(empty_first)
    );
    println!(
        "daemon_advisors: median `advisors` with track records through the daemon in a root \
         of {disputes} settled disagreements ({} records) {:.2} ms, in an empty root {:.2} ms: \
         {settled_ratio:.2}x (bound {MAX_RATIO}x); first call {:.0} ms",
        disputes * 5,
        ms(settled_median),
        ms(empty_median),
        ms(settled_first)
    );
    let (cli_empty, cli_large) = (without_daemon(&empty), without_daemon(&large));
    println!(
        "daemon_advisors: --no-daemon (no bound here; a new process reads past the persisted index): \
         {:.0} ms in the large root, {:.0} ms in the empty one",
        ms(cli_large),
        ms(cli_empty)
    );
    if ratio > MAX_RATIO || settled_ratio > MAX_RATIO {
        eprintln!("daemon_advisors: bound broken");
        std::process::exit(1);
    }
}
