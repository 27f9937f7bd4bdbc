//! The MCP server, measured as a host sees it: a real `advisor-consult mcp` process on
//! pipes, talking to a daemon (in-process, on a temporary socket, three scripted advisors).
//!
//! - **start**: from spawning the server to the answer of `initialize`, median of 21
//!   fresh processes. Bound: ≤ 30 ms.
//! - **status overhead**: a `status` tool call in a running server against
//!   `advisor-consult status --format json` (a process per call, as a host shelling out
//!   pays), medians of 31 interleaved calls. Bound: the tool call costs at most what the
//!   command line does (ratio ≤ 1).
//! - **fan-out**: a `consult` of three advisors answering after 300, 400 and 500 ms,
//!   waited for over MCP, against the slowest advisor: the same figure as the daemon's
//!   `daemon_fanout`. Bound: wall / 500 ms ≤ 1.15 (median of 5).
//!
//! `cargo bench -p advisord --bench mcp`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

#[path = "support/stats.rs"]
mod stats;

use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon_helper::{answer, catalogue, Advisor, Daemon, Place, TASK};
use serde_json::{json, Value};
use stats::{median, ms};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const STARTS: usize = 21;
const START_BOUND_MS: f64 = 30.0;
const CALLS: usize = 31;
const STATUS_BOUND: f64 = 1.0;
const CONSULTS: usize = 5;
const DELAYS_MS: [u64; 3] = [300, 400, 500];
const FANOUT_BOUND: f64 = 1.15;
const BOUND: Duration = Duration::from_secs(30);

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;

/// The global flags naming the daemon's place, as a host's configuration would.
fn flags(place: &Place) -> Vec<String> {
    let p = |path: std::path::PathBuf| path.display().to_string();
    vec![
        "--no-autostart".into(),
        "--socket".into(),
        p(place.socket()),
        "--root".into(),
        p(place.root()),
        "--state-dir".into(),
        p(place.state()),
        "--catalogue".into(),
        p(place.catalogue()),
        "--task".into(),
        TASK.into(),
    ]
}

/// One running server, spoken to line by line.
struct Server {
    child: Child,
    input: ChildStdin,
    output: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Server {
    fn spawn(place: &Place) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args(flags(place))
            .args(["mcp", "--wait-cap", "30"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start advisor-consult mcp");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Server {
            child,
            input,
            output,
            next_id: 1,
        }
    }

    async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.expect("write");
        self.input.write_all(b"\n").await.expect("write");
        self.input.flush().await.expect("flush");
    }

    /// The next message with an `id` (notifications skipped).
    async fn answer(&mut self) -> Value {
        loop {
            let line = tokio::time::timeout(BOUND, self.output.next_line())
                .await
                .expect("the server answers in time")
                .expect("read")
                .expect("the server is up");
            let value: Value = serde_json::from_str(&line).expect("json");
            if value.get("id").is_some() {
                return value;
            }
        }
    }

    async fn initialize(&mut self) {
        self.send(INITIALIZE).await;
        let init = self.answer().await;
        assert!(init["result"].is_object(), "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        self.send(&request.to_string()).await;
        let answer = self.answer().await;
        assert_eq!(answer["id"], id);
        let result = &answer["result"];
        // A successful call may leave `isError` out or say `false`.
        assert_ne!(result["isError"], Value::Bool(true), "{tool}: {answer}");
        result["structuredContent"].clone()
    }

    async fn stop(mut self) {
        drop(self.input);
        let _ = tokio::time::timeout(BOUND, self.child.wait()).await;
    }
}

async fn start_to_initialize(place: &Place) -> f64 {
    let mut samples = Vec::new();
    for _ in 0..STARTS + 2 {
        let started = Instant::now();
        let mut server = Server::spawn(place);
        server.send(INITIALIZE).await;
        let init = server.answer().await;
        samples.push(ms(started.elapsed()));
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        server.stop().await;
    }
    median(samples.split_off(2))
}

async fn status_overhead(place: &Place) -> (f64, f64) {
    let mut server = Server::spawn(place);
    server.initialize().await;
    let (mut over_mcp, mut over_cli) = (Vec::new(), Vec::new());
    for run in 0..CALLS + 2 {
        let started = Instant::now();
        let status = server.call("status", json!({})).await;
        let mcp = ms(started.elapsed());
        assert!(status["assessments"].is_array(), "{status}");
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args(flags(place))
            .args(["status", "--format", "json"])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run advisor-consult status");
        let cli = ms(started.elapsed());
        assert!(output.status.success());
        let printed: Value = serde_json::from_slice(&output.stdout).expect("json");
        assert_eq!(printed, status, "the tool answers what the verb prints");
        if run >= 2 {
            over_mcp.push(mcp);
            over_cli.push(cli);
        }
    }
    server.stop().await;
    (median(over_mcp), median(over_cli))
}

async fn fanout(daemon: &Daemon) -> Vec<f64> {
    let mut server = Server::spawn(&daemon.place);
    server.initialize().await;
    let slowest = *DELAYS_MS.iter().max().expect("delays") as f64;
    let mut ratios = Vec::new();
    for _ in 0..CONSULTS {
        let assessment = daemon.assessment().await;
        let started = Instant::now();
        let job = server
            .call("consult", json!({"assessment": assessment}))
            .await;
        let wall = ms(started.elapsed());
        assert_eq!(job["state"], "done", "{job}");
        assert_eq!(job["consultations"].as_array().map(Vec::len), Some(3));
        ratios.push(wall / slowest);
    }
    server.stop().await;
    ratios
}

#[tokio::main]
async fn main() {
    let ids = ["a", "b", "c"];
    let mut registry = Registry::builtin();
    for (id, delay) in ids.iter().zip(DELAYS_MS) {
        let scripts = (0..CONSULTS)
            .map(|_| Script::answer(&answer(id, "supports")).after(Duration::from_millis(delay)))
            .collect();
        registry.insert(
            &format!("scripted-{id}"),
            Arc::new(ScriptedAdapter::new(scripts)),
        );
    }
    let advisors: Vec<Advisor> = ids.iter().map(|id| Advisor::scripted(id)).collect();
    let daemon = Daemon::start(&catalogue(&advisors), registry).await;
    daemon.assessment().await;

    let start = start_to_initialize(&daemon.place).await;
    println!(
        "mcp start: spawn to `initialize` answered: median {start:.2} ms ({STARTS} starts); \
         bound <= {START_BOUND_MS} ms"
    );
    let (mcp, cli) = status_overhead(&daemon.place).await;
    let ratio = mcp / cli;
    println!(
        "mcp status: tool call median {mcp:.2} ms, `advisor-consult status` median {cli:.2} \
         ms, ratio {ratio:.3} ({CALLS} calls each); bound <= {STATUS_BOUND}"
    );
    let mut ratios = fanout(&daemon).await;
    daemon.stop().await;
    ratios.sort_by(f64::total_cmp);
    let fan = ratios[CONSULTS / 2];
    println!(
        "mcp fan-out: consult of three advisors ({DELAYS_MS:?} ms) over MCP: wall / slowest \
         median {fan:.3} (runs {ratios:.3?}); bound <= {FANOUT_BOUND}"
    );
    let mut broken = Vec::new();
    if start > START_BOUND_MS {
        broken.push(format!("start {start:.2} ms > {START_BOUND_MS} ms"));
    }
    if ratio > STATUS_BOUND {
        broken.push(format!("status ratio {ratio:.3} > {STATUS_BOUND}"));
    }
    if fan > FANOUT_BOUND {
        broken.push(format!("fan-out {fan:.3} > {FANOUT_BOUND}"));
    }
    if !broken.is_empty() {
        eprintln!("mcp: bound broken: {}", broken.join("; "));
        std::process::exit(1);
    }
}
