//! Memory: resident memory (VmRSS) of a spawned release `advisord`, idle and with 1,000
//! jobs accepted and not finished (their one advisor never answers and takes one exchange
//! at a time, so the jobs wait queued or running). Bounds: 20 MB idle, 64 MB loaded.
//!
//! `cargo bench -p advisord --bench daemon_memory`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;

use daemon_helper::{call, call_json, catalogue, Advisor, Binary, Place};
use nix::sys::signal::Signal;
use serde_json::json;
use std::time::Duration;

const JOBS: usize = 1000;
const IDLE_BOUND_KB: u64 = 20 * 1024;
const LOADED_BOUND_KB: u64 = 64 * 1024;

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let place = Place::new("advisors: []\n");
    let script = place.script("never.sh", "cat > /dev/null\nsleep 600");
    place.set_catalogue(&catalogue(&[
        Advisor::process("never", &script).max_concurrent(1)
    ]));
    let mut daemon = Binary::start(&place, &["--grace", "0"]);
    let pid = daemon.child.id();
    let socket = place.socket();
    call(&socket, "GET", "/api/v1/health", None)
        .await
        .expect(200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kb(pid);

    let record = json!({"context": place.context(), "record": {
        "kind": "assessment", "subject": "memory", "materiality": "critical",
        "hypothesis": "small", "evidence": [{"kind": "file", "ref": "benches/daemon_memory.rs"}],
    }});
    let assessment = call_json(&socket, "POST", "/api/v1/reasoning/records", &record)
        .await
        .expect(201)["id"]
        .as_str()
        .expect("an id")
        .to_string();
    for _ in 0..JOBS {
        let body = json!({"context": place.context(), "assessment": assessment, "timeout_s": 600});
        call_json(&socket, "POST", "/api/v1/consultations", &body)
            .await
            .expect(202);
    }
    let health = call(&socket, "GET", "/api/v1/health", None)
        .await
        .expect(200);
    let waiting = health["jobs"]["queued"].as_u64().unwrap_or(0)
        + health["jobs"]["running"].as_u64().unwrap_or(0);
    assert_eq!(waiting as usize, JOBS, "{health}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let loaded = rss_kb(pid);
    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");

    println!(
        "daemon_memory: VmRSS idle {:.1} MB (bound {} MB); with {JOBS} unfinished jobs {:.1} MB (bound {} MB)",
        idle as f64 / 1024.0,
        IDLE_BOUND_KB / 1024,
        loaded as f64 / 1024.0,
        LOADED_BOUND_KB / 1024
    );
    if idle > IDLE_BOUND_KB || loaded > LOADED_BOUND_KB {
        eprintln!("daemon_memory: bound broken");
        std::process::exit(1);
    }
}
