//! The cockpit's figures, on the real `advisord` listening on TCP:
//!
//! - **Event latency**: a record written through the daemon (`POST` on its socket) until
//!   its `record` event arrives at a server-sent-events client of the root's feed, over
//!   TCP. Bound: median ≤ 20 ms.
//! - **Memory**: the daemon's resident set with 50 open event subscribers, against the
//!   same daemon with none. Reported; bound: at most 32 MiB more.
//! - **First paint**: the cockpit opened in Chromium (Playwright, `browser.py paint`) on a
//!   task of 10,000 records, from navigation to the first paint of the assessment list
//!   (the page's `cockpit-list-painted` performance mark). Bound: median ≤ 300 ms.
//!
//! `cargo bench -p advisord --bench cockpit`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;
#[path = "support/prefill.rs"]
mod prefill;

#[path = "support/stats.rs"]
mod stats;

use bytes::Bytes;
use daemon_helper::{call, call_json, Binary, Place};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use nix::sys::signal::Signal;
use serde_json::json;
use stats::median;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WRITES: usize = 100;
const LATENCY_BOUND_MS: f64 = 20.0;
const SUBSCRIBERS: usize = 50;
const MEMORY_BOUND_MIB: f64 = 32.0;
const LARGE_TASK: usize = 10_000;
const PAINT_RUNS: usize = 5;
const PAINT_BOUND_MS: f64 = 300.0;

/// The daemon's TCP address (from `health`) and its token (from the data directory).
async fn listener(place: &Place) -> (String, String) {
    let health = call(&place.socket(), "GET", "/api/v1/health", None)
        .await
        .expect(200);
    let address = health["listening"]["address"]
        .as_str()
        .expect("a TCP listener")
        .to_string();
    let token = std::fs::read_to_string(place.data().join("cockpit.token"))
        .expect("the token")
        .trim()
        .to_string();
    (address, token)
}

/// An open server-sent-events response of the root's feed.
async fn subscribe(address: &str, token: &str, root: &Path) -> hyper::body::Incoming {
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("a handshake");
    tokio::spawn(connection);
    let request = hyper::Request::get(format!("/api/v1/events?root={}", root.display()))
        .header("host", address)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "text/event-stream")
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let response = sender.send_request(request).await.expect("a response");
    assert_eq!(response.status(), 200);
    response.into_body()
}

fn rss_kib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn python() -> PathBuf {
    let venv = std::env::var_os("ADVISORD_CI_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/advisord-ci/venv")
        });
    venv.join("bin/python")
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut broken = false;
    let place = Place::new("advisors: []\n");
    prefill::assessments(&place.state(), "large", LARGE_TASK);
    let mut daemon = Binary::start(&place, &["--grace", "0", "--listen", "127.0.0.1:0"]);
    let pid = daemon.child.id();
    let (address, token) = listener(&place).await;
    let root = place.root();

    // Event latency: write, then wait for the record's event on the feed.
    let mut feed = subscribe(&address, &token, &root).await;
    let mut buffer = String::new();
    let mut latencies = Vec::with_capacity(WRITES);
    for i in 0..=WRITES {
        let subject = format!("latency probe {i}");
        let body = json!({"context": place.context_for("small"), "record": {
            "kind": "assessment", "subject": subject, "materiality": "low",
            "hypothesis": "the simple option holds", "facts": ["one fact"]}});
        let socket = place.socket();
        let started = Instant::now();
        let write = tokio::spawn(async move {
            call_json(&socket, "POST", "/api/v1/reasoning/records", &body)
                .await
                .expect(201)
        });
        let needle = format!("\"subject\":\"{subject}\"");
        loop {
            if let Some(at) = buffer.find(&needle) {
                let end = buffer[at..].find("\n\n").map_or(buffer.len(), |e| at + e);
                buffer.drain(..end);
                break;
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), feed.frame())
                .await
                .expect("the event within 10 s")
                .expect("the stream is open")
                .expect("a frame");
            if let Ok(data) = frame.into_data() {
                buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
        let took = started.elapsed().as_secs_f64() * 1e3;
        write.await.expect("the write");
        if i > 0 {
            latencies.push(took); // the first write opens the task
        }
    }
    drop(feed);
    let latency = median(latencies);
    println!(
        "cockpit: record written through the daemon → its event at an SSE client: median \
         {latency:.2} ms over {WRITES} writes (bound {LATENCY_BOUND_MS} ms)"
    );
    if latency > LATENCY_BOUND_MS {
        eprintln!("cockpit: event latency bound broken");
        broken = true;
    }

    // Memory with 50 open subscribers.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_kib(pid);
    let mut open = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut body = subscribe(&address, &token, &root).await;
        open.push(tokio::spawn(async move {
            while let Some(Ok(_)) = body.frame().await {}
        }));
    }
    for i in 0..20 {
        let body = json!({"context": place.context_for("small"), "record": {
            "kind": "assessment", "subject": format!("fan-out {i}"), "materiality": "low",
            "hypothesis": "the simple option holds", "facts": ["one fact"]}});
        call_json(&place.socket(), "POST", "/api/v1/reasoning/records", &body)
            .await
            .expect(201);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let with = rss_kib(pid);
    let grown_mib = (with - before) / 1024.0;
    println!(
        "cockpit: daemon RSS {:.1} MiB with no event subscriber, {:.1} MiB with {SUBSCRIBERS} \
         open ones (+{grown_mib:.1} MiB; bound +{MEMORY_BOUND_MIB} MiB)",
        before / 1024.0,
        with / 1024.0
    );
    if grown_mib > MEMORY_BOUND_MIB {
        eprintln!("cockpit: memory bound broken");
        broken = true;
    }
    for task in open {
        task.abort();
    }

    // First paint of the list on a task of 10,000 records, in Chromium.
    let url = format!(
        "http://{address}/cockpit?token={token}&root={}&task=large&state_dir={}",
        encode(&root.display().to_string()),
        encode(&place.state().display().to_string())
    );
    // The daemon reads the task once, as any earlier use of it would have.
    call(
        &place.socket(),
        "GET",
        &format!(
            "/api/v1/reasoning?root={}&task=large&state_dir={}&limit=1",
            root.display(),
            place.state().display()
        ),
        None,
    )
    .await
    .expect(200);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/cockpit/browser.py");
    let output = Command::new(python())
        .arg(script)
        .args(["paint", &url, &PAINT_RUNS.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run browser.py (scripts/ci/install-python-tools.sh installs Playwright)");
    assert!(
        output.status.success(),
        "browser.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let figures: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("browser.py prints JSON");
    let paints: Vec<f64> = figures["paint_ms"]
        .as_array()
        .expect("figures")
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    let paint = median(paints.clone());
    println!(
        "cockpit: first paint of the assessment list on a task of {LARGE_TASK} records, in \
         Chromium: median {paint:.0} ms over {PAINT_RUNS} loads {paints:.0?} (bound \
         {PAINT_BOUND_MS} ms)"
    );
    println!(
        "cockpit: the last load, ms from navigation: {}",
        figures["last_load"]
    );
    if paint > PAINT_BOUND_MS {
        eprintln!("cockpit: first-paint bound broken");
        broken = true;
    }

    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    if broken {
        std::process::exit(1);
    }
}
