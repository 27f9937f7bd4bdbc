//! advisord through the agent hosts that drive it: per host (`claude -p`, `codex exec`,
//! `gemini -p`, as the agent-host suite runs them, on `fake-llm-server`), the wall time of
//! a `consult` of three advisors that each answer after 0.5 s, made by the host's model
//! through `advisor-consult mcp`, beside the host's own cost (the same host, not
//! registered, whose model answers at once), and beside it what the server and the daemon
//! themselves add, measured without the host so that the host's noisy start-up decides
//! nothing:
//!
//! - **mcp consult**: a host-less MCP client (this bench, on the server's standard input
//!   and output, in the same place and against the same daemon as the host) times
//!   `tools/call consult` with an inline assessment from the request to its answer: the
//!   record, the plan, three exchanges of 0.5 s at once, the consultations and the
//!   disagreement recorded, the job's outcomes written out. Less the 0.5 s the advisors
//!   take, that is the server's and the daemon's share. **Bound: at most 50 ms** (median),
//!   or the bench fails.
//! - **job**: the same consult's job, from the daemon's own times (`finished_at` less
//!   `created_at`) less its slowest exchange (`duration_ms`): the daemon's share inside
//!   the job, printed beside it.
//! - The host's columns (alone, registered but answering at once, consulting) show what
//!   the host itself costs; their difference less 0.5 s is printed too, for information,
//!   as its spread is the host's start-up.
//!
//! Medians of [`RUNS`] interleaved runs, after one warm-up of each (the daemon started,
//! the caches filled). The hosts come from `scripts/install-real-clis.sh`
//! (`ADVISORD_REAL_CLIS`). Run it in release, as a user runs advisord:
//!
//! `cargo bench -p advisord --bench agent_hosts`

#[path = "../tests/integration/agent_hosts/place.rs"]
mod place;

#[path = "support/stats.rs"]
mod stats;

use advisord_fakes::llm_server::{Action, FakeLlmServer, Reply, Script};
use place::{Cast, Place, Registration};
use serde_json::{json, Value};
use stats::{median, ms};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs per host (`AGENT_HOSTS_RUNS` overrides it, for a quick look on a loaded machine).
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

/// The assessment every consult records first.
fn assessment(n: usize) -> Value {
    json!({"subject": format!("Use SQLite for the job queue ({n})"), "materiality": "critical",
           "hypothesis": "WAL mode is enough",
           "evidence": [{"kind": "file", "ref": "src/queue.rs"}]})
}

/// One host-less consult through `advisor-consult mcp` in `place` (the same environment
/// and daemon as its host): the time from `tools/call` to its answer, and the daemon's
/// share of the job from its own times (the job's span less its slowest exchange).
fn mcp_consult(place: &Place, n: usize) -> (Duration, f64) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
    place.env(&mut command);
    let mut child = command
        .args(["mcp", "--wait-cap", "50"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("advisor-consult mcp starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").expect("write to the server");
        stdin.flush().expect("flush");
    };
    let mut answer_to = |id: u64| -> Value {
        loop {
            let line = lines
                .next()
                .expect("the server answers before closing")
                .expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON from the server");
            if message["id"] == id {
                return message;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}}),
    );
    answer_to(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // A read first, so that the server has made sure of the daemon before the clock runs.
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "advisors", "arguments": {}}}));
    answer_to(2);
    let started = Instant::now();
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "consult", "arguments": {"record": assessment(n)}}}),
    );
    let answer = answer_to(3);
    let took = started.elapsed();
    drop(stdin);
    let _ = child.wait();
    let job = &answer["result"]["structuredContent"];
    assert_eq!(job["state"], "done", "the consult ended: {answer}");
    let consultations = job["consultations"].as_array().expect("consultations");
    assert_eq!(consultations.len(), 3, "three advisors asked: {job}");
    let slowest = consultations
        .iter()
        .filter_map(|c| c["duration_ms"].as_f64())
        .fold(0.0, f64::max);
    let time = |field: &str| {
        let text = job[field].as_str().expect("a time");
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .expect("RFC 3339")
    };
    let span = (time("finished_at") - time("created_at")).as_seconds_f64() * 1e3;
    (took, span - slowest)
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
    let runs = std::env::var("AGENT_HOSTS_RUNS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(RUNS);
    println!(
        "bound: the server and daemon add at most {SHARE_GOAL_MS} ms to a consult of three \
         {ADVISOR_MS} ms advisors (median of {runs}, host-less MCP client beside each host)"
    );
    println!(
        "host     alone (ms)  registered (ms)  consult (ms)  host share (ms)  mcp consult (ms)  server+daemon (ms)  job's own (ms)"
    );
    let mut over = Vec::new();
    let mut n = 0;
    for host in ["claude", "codex", "gemini"] {
        let alone = Place::with_cast(host, &server.base_url(), Registration::Bare, &cast);
        let registered = Place::with_cast(host, &server.base_url(), Registration::Docs, &cast);
        let alone_prompt = format!("BENCH-ALONE ({host})");
        let consult_prompt = format!("BENCH-CONSULT ({host})");
        timed(&alone, &alone_prompt);
        timed(&registered, &consult_prompt);
        mcp_consult(&registered, n);
        let mut alone_ms = Vec::new();
        let mut idle_ms = Vec::new();
        let mut consult_ms = Vec::new();
        let mut mcp_ms = Vec::new();
        let mut job_ms = Vec::new();
        for _ in 0..runs {
            n += 1;
            alone_ms.push(ms(timed(&alone, &alone_prompt)));
            idle_ms.push(ms(timed(&registered, &alone_prompt)));
            consult_ms.push(ms(timed(&registered, &consult_prompt)));
            let (took, job) = mcp_consult(&registered, n);
            mcp_ms.push(ms(took));
            job_ms.push(job);
        }
        let (a, r, c) = (median(alone_ms), median(idle_ms), median(consult_ms));
        let (m, j) = (median(mcp_ms), median(job_ms));
        let host_share = c - a - ADVISOR_MS as f64;
        let share = m - ADVISOR_MS as f64;
        println!(
            "{host:<8} {a:>10.0}  {r:>15.0}  {c:>12.0}  {host_share:>15.0}  {m:>16.0}  {share:>18.1}  {j:>14.1}"
        );
        if share > SHARE_GOAL_MS {
            over.push(format!("{host}: {share:.1} ms"));
        }
    }
    runtime.block_on(server.shutdown());
    if !over.is_empty() {
        eprintln!(
            "FAILED: the server and daemon add more than {SHARE_GOAL_MS} ms to a consult: {}",
            over.join(", ")
        );
        std::process::exit(1);
    }
    println!("ok: within {SHARE_GOAL_MS} ms on every host");
}
