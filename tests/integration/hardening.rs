//! The daemon under pressure: what a large root, a hung advisor, a failing state
//! directory or a crowd of idle connections must not cost.

use crate::support::daemon as daemon_helper;

use advisord_adapters::registry::Registry;
use advisord_fakes::scripted::{Script, ScriptedAdapter};
use daemon_helper::{answer, catalogue, Advisor, Daemon, TASK};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A daemon whose one advisor `a` is never asked.
async fn quiet_daemon() -> Daemon {
    let mut registry = Registry::empty();
    registry.insert("scripted-a", Arc::new(ScriptedAdapter::new(vec![])));
    Daemon::start(&catalogue(&[Advisor::scripted("a")]), registry).await
}

fn assessment(subject: &str) -> serde_json::Value {
    json!({"kind": "assessment", "subject": subject, "materiality": "low",
        "hypothesis": "the simple option holds"})
}

/// A write through the daemon reads only what is new in the task, never the whole task
/// again: a record file already read is not opened again, so spoiling one after the daemon
/// read it cannot fail the next write (a daemon that re-read the task on every write would
/// answer 500 here, and pay for every record on every write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_the_daemon_does_not_read_the_task_again() {
    let daemon = quiet_daemon().await;
    for i in 0..5 {
        daemon.record(assessment(&format!("decision {i}"))).await;
    }
    let first = daemon.place.state().join(TASK).join("0000000001.json");
    std::fs::write(&first, b"spoiled after it was read").expect("spoil a record");
    let stored = daemon.record(assessment("one more")).await;
    assert_eq!(stored["sequence"], 6);
    daemon.stop().await;
}

/// `advisors` judges availability from every task's consultations, but reads a task's
/// records once: later calls look only for new record files, so a spoiled old one in
/// another task goes unnoticed (a daemon that read every record of every task on every
/// call would answer 500).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisors_reads_each_task_once() {
    let daemon = quiet_daemon().await;
    for i in 0..5 {
        daemon
            .record_in("other", assessment(&format!("decision {i}")))
            .await;
    }
    let advisors = |daemon: &Daemon| {
        let body = json!({"context": daemon.place.context_for("fresh")});
        let socket = daemon.socket();
        async move {
            daemon_helper::call_json(&socket, "GET", "/api/v1/reasoning/advisors", &body).await
        }
    };
    advisors(&daemon).await.expect(200);
    let old = daemon.place.state().join("other").join("0000000002.json");
    std::fs::write(&old, b"spoiled after it was read").expect("spoil a record");
    let view = advisors(&daemon).await.expect(200);
    assert_eq!(view["advisors"][0]["id"], "a", "{view}");
    daemon.stop().await;
}

/// A job that fails while recording gives every consultation it did not record its final
/// state: `failed` with `failure: cancelled` and no record, never `running` for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_fails_while_recording_leaves_no_consultation_running() {
    let mut registry = Registry::empty();
    registry.insert(
        "scripted-a",
        Arc::new(ScriptedAdapter::new(vec![Script::answer(&answer(
            "fine", "supports",
        ))
        .after(Duration::from_millis(400))])),
    );
    registry.insert(
        "scripted-b",
        Arc::new(ScriptedAdapter::new(vec![Script::hang()])),
    );
    let daemon = Daemon::start(
        &catalogue(&[Advisor::scripted("a"), Advisor::scripted("b")]),
        registry,
    )
    .await;
    let assessment = daemon.assessment().await;
    let job = daemon.consult(&assessment, 30.0).await;
    let id = job["id"].as_str().expect("a job id");
    daemon
        .until(id, "the plan", |job| !job["plan"].is_null())
        .await;
    // The task's lock can no longer be opened: the first outcome cannot be recorded.
    let lock = daemon.place.state().join(TASK).join(".lock");
    std::fs::remove_file(&lock).expect("the lock exists after a write");
    std::fs::create_dir(&lock).expect("a directory in its place");
    let done = daemon.wait(id).await;
    assert_eq!(done["state"], "failed", "{done}");
    let listed = daemon.job(id).await;
    for view in [&done, &listed] {
        let consultations = view["consultations"].as_array().expect("consultations");
        assert_eq!(consultations.len(), 2, "{view}");
        for c in consultations {
            assert_eq!(c["status"], "failed", "{view}");
            assert_eq!(c["failure"], "cancelled", "{view}");
            assert!(c["record"].is_null(), "{view}");
        }
    }
    daemon.stop().await;
}

/// Read what the daemon sends on `stream` until it closes it (bounded); the text.
async fn until_closed(stream: &mut tokio::net::UnixStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got)).await;
    assert!(
        read.is_ok(),
        "the daemon kept the connection open: {:?}",
        String::from_utf8_lossy(&got)
    );
    String::from_utf8_lossy(&got).into_owned()
}

async fn connect(daemon: &Daemon, sent: &[u8]) -> tokio::net::UnixStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::UnixStream::connect(daemon.socket())
        .await
        .expect("connect");
    stream.write_all(sent).await.expect("send");
    stream
}

/// No peer holds a connection for long: a half-sent header, an idle connection, an
/// endless chunked body and a body shorter than its `Content-Length` are all closed
/// (the bodies with `408`), a huge header gets `431`, and the daemon keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_silent_peers_are_timed_out() {
    let mut registry = Registry::empty();
    registry.insert("scripted-a", Arc::new(ScriptedAdapter::new(vec![])));
    let daemon = Daemon::start_in(
        daemon_helper::Place::new(&catalogue(&[Advisor::scripted("a")])),
        registry,
        Box::new(|config| {
            config.connections.header = Duration::from_millis(300);
            config.connections.body = Duration::from_millis(300);
            config.connections.idle = Duration::from_millis(500);
        }),
    )
    .await;
    let post = |extra: &str| {
        format!(
            "POST /api/v1/reasoning/records HTTP/1.1\r\nhost: advisord\r\n\
             content-type: application/json\r\n{extra}\r\n"
        )
    };
    let mut half_header = connect(&daemon, b"GET /api/v1/health HTTP/1.1\r\nhost: adv").await;
    let mut idle = connect(&daemon, b"").await;
    let mut chunked = connect(
        &daemon,
        format!(
            "{}5\r\n{{\"a\":\r\n",
            post("transfer-encoding: chunked\r\n")
        )
        .as_bytes(),
    )
    .await;
    let mut short = connect(
        &daemon,
        format!("{}{{\"context\":", post("content-length: 100\r\n")).as_bytes(),
    )
    .await;
    let huge = format!(
        "GET /api/v1/health HTTP/1.1\r\nhost: advisord\r\nx-big: {}\r\n\r\n",
        "a".repeat(1024 * 1024)
    );
    let mut big_header = tokio::net::UnixStream::connect(daemon.socket())
        .await
        .expect("connect");
    let (mut reader, mut writer) = big_header.split();
    let (_, answer) = tokio::join!(
        async {
            use tokio::io::AsyncWriteExt;
            // The daemon may stop reading before the end: that is its right.
            let _ = writer.write_all(huge.as_bytes()).await;
        },
        async {
            use tokio::io::AsyncReadExt;
            let mut got = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut got)).await;
            String::from_utf8_lossy(&got).into_owned()
        }
    );
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");
    assert!(!until_closed(&mut half_header).await.contains("200 OK"));
    assert_eq!(until_closed(&mut idle).await, "");
    for stream in [&mut chunked, &mut short] {
        let answer = until_closed(stream).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    }
    daemon.call("GET", "/api/v1/health", None).await.expect(200);
    daemon.stop().await;
}

/// More idle connections than the daemon's descriptor limit allows: the oldest idle ones
/// are shed, `health` is answered at once, and the log does not fill.
#[test]
fn a_crowd_of_idle_connections_cannot_starve_health() {
    let place = daemon_helper::Place::new(&catalogue(&[]));
    // The hard limit too: the daemon cannot raise itself out of the test.
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_advisord"))
        .arg("--socket")
        .arg(place.socket())
        .arg("--data-dir")
        .arg(place.data())
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start advisord");
    let started = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(place.socket()).is_err() {
        assert!(
            started.elapsed() < daemon_helper::BOUND,
            "advisord did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut crowd = Vec::new();
    for i in 0..200 {
        let mut stream =
            std::os::unix::net::UnixStream::connect(place.socket()).expect("the backlog takes it");
        if i % 2 == 0 {
            use std::io::Write;
            let _ = stream.write_all(b"GET /api/v1/health HTTP/1.1\r\n");
        }
        crowd.push(stream);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    for _ in 0..3 {
        let asked = std::time::Instant::now();
        let health = runtime.block_on(daemon_helper::call(
            &place.socket(),
            "GET",
            "/api/v1/health",
            None,
        ));
        health.expect(200);
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "health took {:?}",
            asked.elapsed()
        );
    }
    drop(crowd);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let output = child.wait_with_output().expect("advisord exits");
    let log = String::from_utf8_lossy(&output.stderr);
    let accept_failures = log.matches("accept failed").count();
    assert!(
        accept_failures <= 2,
        "{accept_failures} accept failures logged:\n{log}"
    );
}
