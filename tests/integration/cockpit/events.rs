//! Server-sent events over TCP: a job's stream and a root's feed, resumed with
//! `Last-Event-ID`; a subscriber that stalls is dropped with a last event.

use super::scripted;
use crate::support::daemon::{answer, catalogue, Advisor, Place, BOUND, TASK};
use crate::support::tcp::Listening;
use advisord_adapters::contract::FailureKind;
use advisord_fakes::scripted::Script;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::time::Duration;

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct Sse {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

/// A server-sent-event stream being read.
pub struct SseReader {
    body: hyper::body::Incoming,
    buffer: String,
    pub content_type: String,
}

impl SseReader {
    /// `GET path` with `Accept: text/event-stream` (and `Last-Event-ID` if given).
    pub async fn open(tcp: &Listening, path: &str, last: Option<&str>) -> SseReader {
        let stream = tokio::net::TcpStream::connect(tcp.addr)
            .await
            .expect("connect");
        SseReader::open_on(stream, tcp, path, last).await
    }

    /// The same over a connection already made.
    pub async fn open_on(
        stream: tokio::net::TcpStream,
        tcp: &Listening,
        path: &str,
        last: Option<&str>,
    ) -> SseReader {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("a handshake");
        tokio::spawn(connection);
        let mut request = hyper::Request::get(path)
            .header("host", tcp.host())
            .header("authorization", format!("Bearer {}", tcp.token()))
            .header("accept", "text/event-stream");
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        let response = sender
            .send_request(request.body(Empty::<Bytes>::new()).expect("a request"))
            .await
            .expect("a response");
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        SseReader {
            body: response.into_body(),
            buffer: String::new(),
            content_type,
        }
    }

    /// The next event (comments skipped); `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Sse> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, None);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_string());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event = Some(v.to_string());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(v).expect("data is JSON"));
                    }
                }
                if let (Some(event), Some(data)) = (event, data) {
                    return Some(Sse { id, event, data });
                }
            }
            let frame = tokio::time::timeout(BOUND, self.body.frame())
                .await
                .expect("an event within the bound");
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.push_str(&String::from_utf8_lossy(&data));
                    }
                }
                _ => return None,
            }
        }
    }

    /// Events until one satisfies `check` (that one included).
    pub async fn until(&mut self, what: &str, check: impl Fn(&Sse) -> bool) -> Vec<Sse> {
        let mut seen = Vec::new();
        loop {
            let Some(event) = self.next().await else {
                panic!("the stream ended before {what}: {seen:?}");
            };
            let stop = check(&event);
            seen.push(event);
            if stop {
                return seen;
            }
        }
    }
}

fn root_path(tcp: &Listening, task: Option<&str>) -> String {
    let root = tcp.daemon.place.root().display().to_string();
    match task {
        Some(task) => format!("/api/v1/events?root={root}&task={task}"),
        None => format!("/api/v1/events?root={root}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_events_stream_as_sse_with_ids_and_resume_after_last_event_id() {
    let quick = |c: &str| vec![Script::answer(&answer(c, "supports"))];
    let (registry, _) = scripted(vec![("a", quick("a")), ("b", quick("b"))]);
    let place = Place::new(&catalogue(&[
        Advisor::scripted("a"),
        Advisor::scripted("b"),
    ]));
    let tcp = Listening::start(place, registry).await;
    let assessment = tcp.daemon.assessment().await;
    let job = tcp.daemon.consult(&assessment, 30.0).await;
    let id = job["id"].as_str().unwrap();
    let path = format!("/api/v1/consultations/{id}/events");

    let mut whole = SseReader::open(&tcp, &path, None).await;
    assert!(whole.content_type.starts_with("text/event-stream"));
    let all = whole.until("done", |e| e.event == "done").await;
    assert!(whole.next().await.is_none(), "the stream ends after done");
    let ids: Vec<String> = all.iter().map(|e| e.id.clone().unwrap()).collect();
    let expected: Vec<String> = (1..=all.len()).map(|n| n.to_string()).collect();
    assert_eq!(ids, expected);
    assert_eq!(all[0].event, "plan");
    assert_eq!(all.last().unwrap().data["result"]["state"], "done");
    for event in &all {
        assert_eq!(event.data["event"], event.event.as_str());
    }

    // Reconnect after the second event: the rest, with the same ids.
    let mut resumed = SseReader::open(&tcp, &path, Some("2")).await;
    let rest = resumed.until("done", |e| e.event == "done").await;
    let rest_ids: Vec<String> = rest.iter().map(|e| e.id.clone().unwrap()).collect();
    assert_eq!(rest_ids, expected[2..]);
    assert_eq!(rest[0].data, all[2].data);
    let refused = tcp
        .call(
            "GET",
            &path,
            &[
                ("authorization", &format!("Bearer {}", tcp.token())),
                ("accept", "text/event-stream"),
                ("last-event-id", "two"),
            ],
            None,
        )
        .await;
    assert_eq!(refused.expect(400)["error"], "invalid_request");

    // Without the SSE `Accept`, the NDJSON stream the CLI reads is unchanged.
    let ndjson = tcp.get(&path).await;
    assert_eq!(ndjson.headers["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = ndjson
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), all.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_feed_carries_records_jobs_and_advisors_and_resumes_after_last_event_id() {
    let (registry, _) = scripted(vec![
        ("a", vec![Script::answer(&answer("a", "supports"))]),
        (
            "b",
            vec![Script::fail(
                FailureKind::AuthFailed,
                "401 from the provider: bad key",
            )],
        ),
    ]);
    let place = Place::new(&catalogue(&[
        Advisor::scripted("a"),
        Advisor::scripted("b"),
    ]));
    let tcp = Listening::start(place, registry).await;
    let mut feed = SseReader::open(&tcp, &root_path(&tcp, Some(TASK)), None).await;
    let mut other = SseReader::open(&tcp, &root_path(&tcp, Some("other")), None).await;

    let assessment = tcp.daemon.assessment().await;
    let first = feed.until("the assessment", |e| e.event == "record").await;
    assert_eq!(first[0].data["id"], assessment.as_str());
    let first_id = first[0].id.clone().expect("an id");
    assert!(first_id.contains('-'), "EPOCH-SEQ: {first_id}");

    let job = tcp.daemon.consult(&assessment, 30.0).await;
    let seen = feed
        .until("the advisors after the job", |e| e.event == "advisors")
        .await;
    let kinds: Vec<&str> = seen.iter().map(|e| e.event.as_str()).collect();
    assert!(
        kinds.contains(&"job") && kinds.contains(&"record"),
        "{kinds:?}"
    );
    assert!(seen
        .iter()
        .any(|e| e.event == "job" && e.data["event"] == "done" && e.data["job"] == job["id"]));
    let advisors = &seen.last().unwrap().data["advisors"];
    let b = advisors
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "b")
        .expect("b is listed");
    assert_ne!(b["status"], "available", "b failed on auth: {b}");

    // Another task's subscriber saw none of it.
    tcp.daemon.assessment_in("other").await;
    let mine = other.next().await.expect("the other task's own event");
    assert_eq!(mine.event, "record");
    assert_eq!(mine.data["task"], "other");

    // Resume after the first event: everything after it, in order, with the same ids.
    let mut resumed = SseReader::open(&tcp, &root_path(&tcp, Some(TASK)), Some(&first_id)).await;
    let again = resumed
        .until("the advisors again", |e| e.event == "advisors")
        .await;
    let ids = |events: &[super::events::Sse]| -> Vec<String> {
        events.iter().map(|e| e.id.clone().unwrap()).collect()
    };
    assert_eq!(ids(&again), ids(&seen));
    // An id of another run: reset first.
    let mut reset = SseReader::open(&tcp, &root_path(&tcp, None), Some("1-1")).await;
    assert_eq!(reset.next().await.unwrap().event, "reset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_feed_subscriber_is_dropped_with_a_last_event() {
    let (registry, _) = scripted(vec![("a", vec![])]);
    let place = Place::new(&catalogue(&[Advisor::scripted("a")]));
    let tcp = Listening::start_with(
        place,
        registry,
        Box::new(|config| {
            config.events.buffer = 4;
            config.events.drop_grace = Duration::from_secs(30);
        }),
    )
    .await;
    // A client that reads nothing: a small receive buffer, the body never polled.
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    let stream = socket.connect(tcp.addr).await.expect("connect");
    let mut stalled = SseReader::open_on(stream, &tcp, &root_path(&tcp, None), None).await;

    // Large records (200 KB each), past what the kernel buffers on loopback (megabytes).
    let assumptions: Vec<String> = (0..50)
        .map(|n| format!("{n} {}", "x".repeat(3900)))
        .collect();
    let written = 40;
    for n in 0..written {
        tcp.daemon
            .record(json!({
                "kind": "assessment",
                "subject": format!("subject {n}"),
                "materiality": "low",
                "hypothesis": "a stalled client holds nothing for long",
                "assumptions": assumptions,
                "evidence": [{"kind": "file", "ref": "src/store.rs"}],
            }))
            .await;
    }
    // Now read what it was sent: some records, then the last event, then the end.
    let mut records = 0;
    let mut last = None;
    let started = std::time::Instant::now();
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(3), stalled.next()).await {
        if event.event == "record" {
            records += 1;
        }
        last = Some(event.event);
        assert!(started.elapsed() < BOUND, "the stream did not end");
    }
    assert_eq!(last.as_deref(), Some("dropped"), "{records} records read");
    assert!(
        records < written,
        "dropped before the end: {records} of {written}"
    );
    // A fresh subscriber is served as ever.
    let mut fresh = SseReader::open(&tcp, &root_path(&tcp, None), None).await;
    tcp.daemon.assessment().await;
    assert_eq!(fresh.next().await.unwrap().event, "record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_event_stream_gets_keep_alive_comments() {
    let (registry, _) = scripted(vec![("a", vec![])]);
    let place = Place::new(&catalogue(&[Advisor::scripted("a")]));
    let tcp = Listening::start_with(
        place,
        registry,
        Box::new(|config| config.events.keepalive = Duration::from_millis(100)),
    )
    .await;
    let mut feed = SseReader::open(&tcp, &root_path(&tcp, None), None).await;
    let mut seen = String::new();
    let started = std::time::Instant::now();
    while seen.matches(": keep-alive\n\n").count() < 2 {
        assert!(started.elapsed() < BOUND, "no keep-alive: {seen:?}");
        let frame = tokio::time::timeout(BOUND, feed.body.frame())
            .await
            .expect("a frame within the bound")
            .expect("the stream is open")
            .expect("a frame");
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(seen.starts_with("retry: 2000\n"), "{seen:?}");
}
