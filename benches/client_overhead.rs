//! Client overhead: one consultation of two instant scripted advisors, end to end through
//! the `advisor-consult` binary (queue the job, follow its event stream, print the job),
//! against a daemon already running, compared in the same run with
//! `advisor-consult --version` (the cost of starting the binary at all). Bound: median
//! consultation / median `--version` ≤ 3.
//!
//! The bounded run keeps the records and the daemon's journal on a memory file system
//! (`/dev/shm` when there is one): every record and journal entry is fsynced, and on a
//! disk those fsyncs (the writer's and the journal's, measured by their own benches) would
//! be what this ratio measures instead of the client. The same consultation with the state
//! on the default temporary directory is measured too and printed, unbounded, so the
//! whole cost is visible. Each run also reports the same consultation made directly on the
//! socket (no client process), so what the client adds is plain.
//!
//! `cargo bench -p advisord --bench client_overhead`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

#[path = "support/stats.rs"]
mod stats;

use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon_helper::{answer, catalogue, Advisor, Daemon, TASK};
use stats::{median, ms};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::Command;

const WARMUP: usize = 3;
const RUNS: usize = 31;
const BOUND: f64 = 3.0;

/// One run of the client binary with `args`; its wall time (and it must exit 0).
async fn time(args: &[String]) -> Duration {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run advisor-consult");
    let took = started.elapsed();
    assert!(
        output.status.success(),
        "advisor-consult {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    took
}

/// Medians of: the consultation through the client, `--version`, the consultation made
/// directly on the socket.
struct Medians {
    client: Duration,
    version: Duration,
    direct: Duration,
}

/// Measure with the daemon's place (records, journal, socket) under the temporary
/// directory the process sees now.
async fn measure() -> Medians {
    let ids = ["a", "b"];
    let mut registry = Registry::builtin();
    for id in ids {
        let scripts = (0..2 * (WARMUP + RUNS))
            .map(|_| Script::answer(&answer(id, "supports")))
            .collect();
        registry.insert(
            &format!("scripted-{id}"),
            Arc::new(ScriptedAdapter::new(scripts)),
        );
    }
    let advisors: Vec<Advisor> = ids.iter().map(|id| Advisor::scripted(id)).collect();
    let daemon = Daemon::start(&catalogue(&advisors), registry).await;
    let place = &daemon.place;
    let assessment = daemon.assessment().await;
    let path = |p: &Path| p.display().to_string();
    let consult: Vec<String> = [
        "--no-autostart",
        "--socket",
        &path(&place.socket()),
        "--root",
        &path(&place.root()),
        "--state-dir",
        &path(&place.state()),
        "--catalogue",
        &path(&place.catalogue()),
        "--task",
        TASK,
        "--format",
        "json",
        "--assessment",
        &assessment,
    ]
    .map(String::from)
    .to_vec();
    let version = vec!["--version".to_string()];
    let (mut client, mut versions, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..WARMUP + RUNS {
        // Interleaved, so all three see the same machine load.
        let v = time(&version).await;
        let c = time(&consult).await;
        let started = Instant::now();
        let job = daemon.consult(&assessment, 30.0).await;
        let done = daemon.wait(job["id"].as_str().expect("a job id")).await;
        let d = started.elapsed();
        assert_eq!(done["state"], "done", "{done}");
        if run >= WARMUP {
            versions.push(v);
            client.push(c);
            direct.push(d);
        }
    }
    daemon.stop().await;
    Medians {
        client: median(client),
        version: median(versions),
        direct: median(direct),
    }
}

fn run_measure() -> Medians {
    tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(measure())
}

fn main() {
    // Unbounded, on the default temporary directory: the whole cost, fsyncs included.
    let disk_dir = std::env::temp_dir();
    let disk = run_measure();
    println!(
        "client_overhead (state in {}, unbounded): client {:.2} ms, direct on the socket \
         {:.2} ms, `--version` {:.2} ms, ratio {:.2}",
        disk_dir.display(),
        ms(disk.client),
        ms(disk.direct),
        ms(disk.version),
        disk.client.as_secs_f64() / disk.version.as_secs_f64()
    );
    // Bounded, on a memory file system: what the client adds. The runtime above is gone,
    // so no other thread reads the environment while it changes.
    let memory = Path::new("/dev/shm");
    if memory.is_dir() {
        std::env::set_var("TMPDIR", memory);
    }
    let bounded = run_measure();
    let ratio = bounded.client.as_secs_f64() / bounded.version.as_secs_f64();
    println!(
        "client_overhead (state in {}): consultation of 2 instant advisors through the \
         client: median {:.2} ms (direct on the socket {:.2} ms); `--version`: median {:.2} \
         ms; ratio {ratio:.2} (bound <= {BOUND}, {RUNS} runs each)",
        std::env::temp_dir().display(),
        ms(bounded.client),
        ms(bounded.direct),
        ms(bounded.version)
    );
    if ratio > BOUND {
        eprintln!("client_overhead: bound broken: {ratio:.2} > {BOUND}");
        std::process::exit(1);
    }
}
