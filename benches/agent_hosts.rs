//! advisord through the agent hosts that drive it: per host (`claude -p`, `codex exec`,
//! `gemini -p`, as the agent-host suite runs them, on `fake-llm-server`), the wall time of
//! a `consult` of three advisors that each answer after 0.5 s, made by the host's model
//! through `advisor-consult mcp`, beside the host's own cost (the same host, not
//! registered, whose model answers at once). The difference less the 0.5 s the advisors
//! take is what the server and the daemon add (goal: at most 50 ms), and it splits in two:
//! the host registered but its model answering at once (the host starting the server
//! and listing its tools), and the consult itself (the model's extra turn, the record,
//! the plan, the three exchanges, the disagreement). Medians of
//! [`RUNS`] interleaved runs, after one warm-up of each (the daemon started, the caches
//! filled).
//!
//! The hosts come from `scripts/install-real-clis.sh` (`ADVISORD_REAL_CLIS`).
//!
//! `cargo bench -p advisord --bench agent_hosts`

#[path = "../tests/integration/agent_hosts/place.rs"]
mod place;

#[path = "support/stats.rs"]
mod stats;

use advisord_fakes::llm_server::{Action, FakeLlmServer, Reply, Script};
use place::{Cast, Place, Registration};
use serde_json::json;
use stats::{median, ms};
use std::time::{Duration, Instant};

const RUNS: usize = 5;
const ADVISOR_MS: u64 = 500;
const SHARE_GOAL_MS: f64 = 50.0;

fn script() -> Script {
    let consult = Reply::agent([
        Action::call(
            "consult",
            json!({"record": {"subject": "Use SQLite for the job queue", "materiality": "critical",
                              "hypothesis": "WAL mode is enough",
                              "evidence": [{"kind": "file", "ref": "src/queue.rs"}]}}),
        ),
        Action::say("BENCH-DONE"),
    ]);
    Script::new()
        .phrase("BENCH-CONSULT", consult)
        .phrase("BENCH-ALONE", Reply::agent([Action::say("BENCH-DONE")]))
}

fn timed(place: &Place, prompt: &str) -> Duration {
    let started = Instant::now();
    let (code, stdout, stderr) = place.run(prompt);
    let took = started.elapsed();
    assert!(
        code == 0 && stdout.contains("BENCH-DONE"),
        "{prompt}: exit {code}\n{stdout}\n{stderr}"
    );
    took
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let server = runtime.block_on(FakeLlmServer::start(script()));
    let cast = Cast {
        advisors: vec![
            ("alpha", "supports", ADVISOR_MS),
            ("beta", "opposes", ADVISOR_MS),
            ("gamma", "supports", ADVISOR_MS),
        ],
        fast_ms: ADVISOR_MS,
    };
    println!(
        "host     alone (ms)  registered (ms)  consult (ms)  advisors (ms)  server+daemon (ms)"
    );
    let mut over = Vec::new();
    for host in ["claude", "codex", "gemini"] {
        let alone = Place::with_cast(host, &server.base_url(), Registration::Bare, &cast);
        let registered = Place::with_cast(host, &server.base_url(), Registration::Docs, &cast);
        let alone_prompt = format!("BENCH-ALONE ({host})");
        let consult_prompt = format!("BENCH-CONSULT ({host})");
        timed(&alone, &alone_prompt);
        timed(&registered, &consult_prompt);
        let mut alone_ms = Vec::new();
        let mut idle_ms = Vec::new();
        let mut consult_ms = Vec::new();
        for _ in 0..RUNS {
            alone_ms.push(ms(timed(&alone, &alone_prompt)));
            idle_ms.push(ms(timed(&registered, &alone_prompt)));
            consult_ms.push(ms(timed(&registered, &consult_prompt)));
        }
        let (a, r, c) = (median(alone_ms), median(idle_ms), median(consult_ms));
        let share = c - a - ADVISOR_MS as f64;
        println!("{host:<8} {a:>10.0}  {r:>15.0}  {c:>12.0}  {ADVISOR_MS:>13}  {share:>18.0}");
        if share > SHARE_GOAL_MS {
            over.push(format!("{host}: {share:.0} ms"));
        }
    }
    runtime.block_on(server.shutdown());
    if !over.is_empty() {
        println!(
            "over the goal of {SHARE_GOAL_MS} ms for the server and daemon: {}",
            over.join(", ")
        );
    }
}
