//! The cost of a write through the daemon into a large task: the median time of
//! `POST /api/v1/reasoning/records` (client → daemon → store) into a task already holding
//! 10,000 records, next to the median into a task that starts empty, writes alternating so
//! both meet the same disk. Bound: at most 1.5× (a daemon that read the task again on
//! every write paid 40× at 10,000 records).
//!
//! `cargo bench -p advisord --bench daemon_write`

#[path = "../tests/integration/support/daemon.rs"]
mod daemon_helper;
#[path = "support/prefill.rs"]
mod prefill;

#[path = "support/stats.rs"]
mod stats;

use daemon_helper::{call_json, Binary, Place};
use nix::sys::signal::Signal;
use serde_json::json;
use stats::{median, ms};
use std::time::Instant;

const LARGE_TASK: usize = 10_000;
const WRITES: usize = 200;
const MAX_RATIO: f64 = 1.5;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let place = Place::new("advisors: []\n");
    prefill::assessments(&place.state(), "large", LARGE_TASK);
    let mut daemon = Binary::start(&place, &["--grace", "0"]);
    let socket = place.socket();
    let write = |task: &'static str, i: usize| {
        let body = json!({"context": place.context_for(task), "record": {
            "kind": "assessment", "subject": format!("decision {i}"), "materiality": "low",
            "hypothesis": "the simple option holds", "facts": ["one fact"]}});
        let socket = socket.clone();
        async move {
            let started = Instant::now();
            call_json(&socket, "POST", "/api/v1/reasoning/records", &body)
                .await
                .expect(201);
            started.elapsed()
        }
    };
    // The first write into the large task reads it once; that is not what is measured.
    let first = write("large", 0).await;
    let (mut large, mut empty) = (Vec::new(), Vec::new());
    for i in 0..WRITES {
        empty.push(write("small", i).await);
        large.push(write("large", i + 1).await);
    }
    let status = daemon.signal_and_wait(Signal::SIGTERM);
    assert!(status.success(), "{status:?}");
    let (large, empty) = (median(large), median(empty));
    let ratio = large.as_secs_f64() / empty.as_secs_f64();
    println!(
        "daemon_write: median write through the daemon into a task of {LARGE_TASK} records \
         {:.2} ms, into a task that starts empty {:.2} ms: {ratio:.2}x (bound {MAX_RATIO}x); \
         the first write into the large task (reading it once) {:.0} ms",
        ms(large),
        ms(empty),
        ms(first)
    );
    if ratio > MAX_RATIO {
        eprintln!("daemon_write: bound broken");
        std::process::exit(1);
    }
}
