//! Writer throughput and the cost of a write into a large task.
//!
//! Run with `cargo bench -p advisord --bench writer`. Prints durable records per second
//! into an empty task, the median time of a write into a task of 10,000 records next to
//! the median into a small one, what hashing a record for the chain costs next to a
//! durable write, and what attesting a consultation and anchoring a task's head add to
//! one; exits non-zero when a bound is broken.
//!
//! The state directory is created under the target directory, not `/tmp`, which may be
//! memory-backed and would make every fsync free.

#[path = "support/prefill.rs"]
mod prefill;

#[path = "support/stats.rs"]
mod stats;

use advisord::core::chain;
use advisord::core::records::{Record, TaskName};
use advisord::store::Store;
use serde_json::json;
use stats::median;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Records written durably in the throughput run.
const RECORDS: usize = 2_000;
/// Records already in the large task.
const LARGE_TASK: usize = 10_000;
/// Writes timed in each latency run.
const LATENCY_WRITES: usize = 200;
/// Durable records per second the writer must sustain on a local disk.
const MIN_RECORDS_PER_S: f64 = 50.0;
/// A write into the large task may take at most this many times a write into a small one
/// (a re-parse of every record on each write would be hundreds of times slower).
const MAX_LARGE_TO_SMALL: f64 = 3.0;
/// Hashing a record's bytes for the chain may cost at most this share of a durable write.
const MAX_HASH_SHARE: f64 = 0.05;
/// Hashes timed to measure one.
const HASHES: usize = 2_000;
/// Attesting a consultation, checking its attestation and anchoring the task's head may
/// together cost at most this share of a durable write.
const MAX_ATTEST_SHARE: f64 = 0.05;
/// Attestations and anchors timed to measure one.
const ATTESTS: usize = 2_000;

fn scratch_root() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&target).expect("the target directory");
    target
}

fn assessment(i: usize) -> serde_json::Value {
    json!({"kind": "assessment", "subject": format!("decision {i}"), "materiality": "low",
        "hypothesis": "the simple option holds", "facts": ["one fact", "another fact"]})
}

fn attempt(assessment: &str, i: usize) -> serde_json::Value {
    json!({"kind": "attempt", "assessment": assessment, "tried": format!("try {i}"),
        "failure_observed": "it failed", "updated_hypothesis": "the other option"})
}

/// Write `count` records into `task`: assessments, and attempts under the first one.
fn write_mix(store: &Store, task: &TaskName, count: usize) {
    let first = store
        .write(task, &assessment(0), None)
        .expect("a first record");
    for i in 1..count {
        store
            .write(task, &mix(first.id(), i), None)
            .expect("written");
    }
}

/// The `i`th input of a mix: assessments and attempts alternating.
fn mix(first: &str, i: usize) -> serde_json::Value {
    if i.is_multiple_of(2) {
        assessment(i)
    } else {
        attempt(first, i)
    }
}

fn main() {
    let root = tempfile::Builder::new()
        .prefix("advisord-bench-writer-")
        .tempdir_in(scratch_root())
        .expect("a scratch directory");
    let mut failed = false;

    // Throughput: durable writes into an empty task.
    let store = Store::open(&root.path().join("throughput"));
    let task = TaskName::new("bench").expect("valid task");
    let start = Instant::now();
    write_mix(&store, &task, RECORDS);
    let rate = RECORDS as f64 / start.elapsed().as_secs_f64();
    println!(
        "writer: {rate:.0} records/s (durable; {RECORDS} records, bound >= {MIN_RECORDS_PER_S})"
    );
    if rate < MIN_RECORDS_PER_S {
        println!("writer: FAILED: below {MIN_RECORDS_PER_S} records/s");
        failed = true;
    }

    // A large task: the store reads it once, then looks only for records it has not seen.
    // Writes alternate between it and a small task so that both meet the same disk.
    let state = root.path().join("latency");
    let (large_task, small_task) = (
        TaskName::new("large").expect("valid task"),
        TaskName::new("small").expect("valid task"),
    );
    prefill::assessments(&state, large_task.as_str(), LARGE_TASK);
    let store = Store::open(&state);
    let start = Instant::now();
    let read = store.records(&large_task).expect("read").len();
    let cold = start.elapsed();
    assert_eq!(read, LARGE_TASK);
    // The first write walks the chain once at the depth of the writer's rules (every
    // record not written by this store admitted again); later writes only extend it.
    let start = Instant::now();
    let large_first = store
        .write(&large_task, &assessment(0), None)
        .expect("written");
    let first_write = start.elapsed();
    let small_first = store
        .write(&small_task, &assessment(0), None)
        .expect("written");
    let (mut large_times, mut small_times) = (Vec::new(), Vec::new());
    for i in 1..=LATENCY_WRITES {
        for (task, first, times) in [
            (&large_task, &large_first, &mut large_times),
            (&small_task, &small_first, &mut small_times),
        ] {
            let input = mix(first.id(), i);
            let start = Instant::now();
            store.write(task, &input, None).expect("written");
            times.push(start.elapsed());
        }
    }
    let (large, small) = (median(large_times), median(small_times));
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    println!(
        "writer: first read of a {LARGE_TASK}-record task {:.0} ms, first write into it {:.0} \
         ms; median write {:.2} ms there vs {:.2} ms into a small task (ratio {ratio:.2}, \
         bound <= {MAX_LARGE_TO_SMALL})",
        cold.as_secs_f64() * 1e3,
        first_write.as_secs_f64() * 1e3,
        large.as_secs_f64() * 1e3,
        small.as_secs_f64() * 1e3,
    );
    if ratio > MAX_LARGE_TO_SMALL {
        println!("writer: FAILED: a write into a large task is {ratio:.1}x a small one");
        failed = true;
    }

    // The chain: the store hashes the bytes it writes once per write. Hash the largest
    // record the small task holds, many times, against the median durable write there.
    let largest = std::fs::read_dir(state.join(small_task.as_str()))
        .expect("the small task")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .map(|e| std::fs::read(e.path()).expect("a record file"))
        .max_by_key(Vec::len)
        .expect("a record");
    let start = Instant::now();
    for _ in 0..HASHES {
        std::hint::black_box(chain::digest(std::hint::black_box(&largest)));
    }
    let hash = start.elapsed() / HASHES as u32;
    let share = hash.as_secs_f64() / small.as_secs_f64();
    println!(
        "writer: hashing a {}-byte record {:.2} us = {:.3} % of a durable write \
         (bound <= {:.0} %)",
        largest.len(),
        hash.as_secs_f64() * 1e6,
        share * 100.0,
        MAX_HASH_SHARE * 100.0,
    );
    if share > MAX_HASH_SHARE {
        println!(
            "writer: FAILED: the chain's hash costs {:.1} % of a write",
            share * 100.0
        );
        failed = true;
    }
    if attest_and_anchor(root.path(), &state, &small_task, small) {
        failed = true;
    }
    if failed {
        std::process::exit(1);
    }
}

/// What a write pays for attesting and anchoring, next to `durable` (the median durable
/// write into a small task measured before this process anchored anything): the MAC of a
/// consultation, its check when a conclusion cites it, and the anchor's read and
/// replacement (a temporary file renamed over it, no `fsync`). Then the same small task's
/// writes again, now anchored, for the whole picture. True when the bound is broken.
fn attest_and_anchor(root: &Path, state: &Path, task: &TaskName, durable: Duration) -> bool {
    let machine = advisord::machine::install(&root.join("data"));
    let key = machine.key_or_create().expect("the attestation key");
    let consultation: Record = serde_json::from_value(json!({
        "id": "01JBENCH000000000000000001", "task": task.as_str(), "sequence": 7,
        "created_at": "2026-03-02T10:00:00.000Z", "schema": 2, "redacted": [],
        "prev": chain::GENESIS, "kind": "consultation", "plan": "01JBENCHPLAN",
        "advisor": "alpha", "status": "completed",
        "conclusion": "The journal is sound if the directory is synced after the rename.",
        "stance": "supports", "assumptions": ["Jobs are idempotent per advisor and plan."],
        "risks": ["A torn journal entry on power loss."], "actions": ["Checksum each entry."],
        "falsifiers": ["A killed daemon that loses an accepted job."], "confidence": 0.8,
        "duration_ms": 8200, "usage": {"input_tokens": 1830, "output_tokens": 412},
        "source": "vendor/model", "finished_at": "2026-03-02T10:00:00.000Z"}))
    .expect("a consultation");
    let start = Instant::now();
    let mut attested = consultation.clone();
    for _ in 0..ATTESTS {
        attested = std::hint::black_box(consultation.clone());
        key.attest(&mut attested, "01JBENCHJOB", true);
    }
    let attest = start.elapsed() / ATTESTS as u32;
    let start = Instant::now();
    for _ in 0..ATTESTS {
        std::hint::black_box(key.check(std::hint::black_box(&attested)));
    }
    let check = start.elapsed() / ATTESTS as u32;
    let anchors = machine.anchors(state);
    let head = chain::Head {
        sequence: 1,
        hash: chain::digest(b"a record"),
    };
    let start = Instant::now();
    for i in 0..ATTESTS {
        std::hint::black_box(anchors.head(task));
        let head = chain::Head {
            sequence: head.sequence + i as u64,
            ..head.clone()
        };
        anchors.set(task, &head).expect("anchored");
    }
    let anchor = start.elapsed() / ATTESTS as u32;
    let added = attest + check + anchor;
    let share = added.as_secs_f64() / durable.as_secs_f64();
    println!(
        "writer: attesting a consultation {:.1} us, checking it {:.1} us, anchoring a head \
         {:.1} us = {:.2} % of a durable write of {:.2} ms (bound <= {:.0} %)",
        attest.as_secs_f64() * 1e6,
        check.as_secs_f64() * 1e6,
        anchor.as_secs_f64() * 1e6,
        share * 100.0,
        durable.as_secs_f64() * 1e3,
        MAX_ATTEST_SHARE * 100.0,
    );
    // The task must be this machine's for its writes to be anchored: adopt it as it is.
    let store = Store::open(state);
    let files = store.stored_files(task).expect("the small task");
    let last = files.last().expect("records");
    anchors
        .set(
            task,
            &chain::Head {
                sequence: last.sequence,
                hash: chain::digest(&last.bytes),
            },
        )
        .expect("adopted");
    let first = store.records(task).expect("read")[0].id().to_string();
    let mut times = Vec::with_capacity(LATENCY_WRITES);
    for i in 0..LATENCY_WRITES {
        let input = mix(&first, i);
        let start = Instant::now();
        store.write(task, &input, None).expect("written");
        times.push(start.elapsed());
    }
    let anchored = median(times);
    println!(
        "writer: median durable write anchored {:.2} ms vs {:.2} ms before (disk noise \
         included; the bound is on the measured additions above)",
        anchored.as_secs_f64() * 1e3,
        durable.as_secs_f64() * 1e3,
    );
    if anchors.head(task).map(|h| h.sequence) != Some(last.sequence + LATENCY_WRITES as u64) {
        println!("writer: FAILED: the anchored writes did not anchor their heads");
        return true;
    }
    if share > MAX_ATTEST_SHARE {
        println!(
            "writer: FAILED: attesting and anchoring cost {:.1} % of a write",
            share * 100.0
        );
        return true;
    }
    false
}
