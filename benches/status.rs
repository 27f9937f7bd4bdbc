//! `status` over tasks of 1,000 and 10,000 records: derivation (each consultation's cost
//! included) and plain rendering must be linear, so the ratio of the two times is at most
//! 12 (quadratic would give ~100).
//!
//! Measured twice: on records already parsed in memory (what the daemon holds), and from
//! disk through `store::Store` (`status --no-daemon`: a fresh store lists and parses every
//! file). The disk tasks are written file by file in the store's own layout
//! (`store::file_name`) rather than through `Store::write`, whose durable writes
//! `benches/writer.rs` measures.
//!
//! In memory, the store has read the task once (files older than its racy window, as a
//! daemon's are), so the timed view checks each file's identity and derives; the CPU's
//! caches are evicted between the warm call and the timed one, for
//! both sizes: otherwise the small task is timed from the cache and the large one from
//! memory, and the ratio measures the cache size rather than the work per record.
//!
//! Each sample runs in a fresh process, as a `status` command does, so both sizes start
//! from the same allocator and cache state: repeated in one process, the small task reuses
//! memory the allocator kept while the large one gets pages back from the kernel each time,
//! which measures the allocator rather than `status`. The two sizes alternate and each
//! figure is the median of its samples. The bound is checked on the CPU time of the
//! sampling thread, which other processes on a busy machine do not inflate; wall-clock
//! medians are printed beside it.
//!
//! Run: `cargo bench -p advisord --bench status`. Exits 1 when a ratio passes the bound.

#[path = "support/stats.rs"]
mod stats;

use advisord::core::catalogue::{accept_any_settings, Catalogue};
use advisord::core::chain;
use advisord::core::records::{Record, TaskName, SCHEMA_VERSION};
use advisord::core::views::priced::price_status;
use advisord::core::views::status::{status, StatusView};
use advisord::render::{render, Format};
use advisord::store::{self, Store};
use nix::time::{clock_gettime, ClockId};
use serde_json::{json, Value};
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The largest accepted ratio of the 10,000-record time to the 1,000-record time.
const BOUND: f64 = 12.0;

/// The two task sizes.
const SMALL: usize = 1_000;
const LARGE: usize = 10_000;

/// Records per flow of [`flow`].
const FLOW: usize = 10;

/// Set in a sample process: what it measures (`memory:N` or `disk:N:STATE_DIR`).
const SAMPLE_ENV: &str = "ADVISORD_BENCH_STATUS_SAMPLE";

fn main() {
    if let Ok(sample) = std::env::var(SAMPLE_ENV) {
        let (cpu, wall) = take_sample(&sample);
        println!("{} {}", cpu.as_nanos(), wall.as_nanos());
        return;
    }
    let mut failed = false;
    let dir = tempfile::tempdir().expect("a temporary state directory");
    for n in [SMALL, LARGE] {
        write_task(dir.path(), &format!("t{n}"), &task(n));
    }
    let state = dir.path().display().to_string();
    // A daemon's cache vouches for a file by its identity only once the file's change time
    // is older than the store's racy window (before that it checks the bytes again, since
    // a second edit within one clock tick would leave the identity unchanged). A daemon's
    // tasks are past it; freshly written ones are not: let the window pass once.
    std::thread::sleep(store::RACY_WINDOW + Duration::from_millis(100));
    let memory = sample_pairs(21, |n| format!("memory:{n}:{state}"));
    failed |= report("in memory", &memory);
    // As the `status` verb derives it: what rests on a superseded decision marked from the
    // task's downstream graph, which the store keeps caught up (every flow's assessment
    // cites the conclusion the next flow supersedes, so one in ten records is marked).
    let graph = sample_pairs(21, |n| format!("graph:{n}:{state}"));
    failed |= report("in memory, resting on superseded marked", &graph);

    let disk = sample_pairs(11, |n| format!("disk:{n}:{state}"));
    failed |= report("from disk", &disk);

    if failed {
        eprintln!("status is not linear in the number of records (bound: ratio <= {BOUND})");
        std::process::exit(1);
    }
}

/// Median times of `runs` samples of each size, each in a fresh process, sizes alternating.
fn sample_pairs(runs: usize, sample: impl Fn(usize) -> String) -> (Times, Times) {
    let exe = std::env::current_exe().expect("the bench executable");
    let one = |n: usize| -> (Duration, Duration) {
        let out = Command::new(&exe)
            .env(SAMPLE_ENV, sample(n))
            .output()
            .expect("a sample process starts");
        assert!(
            out.status.success(),
            "a sample process failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let nanos: Vec<u64> = text
            .split_whitespace()
            .map(|v| v.parse().expect("nanoseconds"))
            .collect();
        (
            Duration::from_nanos(nanos[0]),
            Duration::from_nanos(nanos[1]),
        )
    };
    let (mut small, mut large) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        small.push(one(SMALL));
        large.push(one(LARGE));
    }
    (median(small), median(large))
}

/// The task's status with each consultation's cost derived, as `status` shows it.
fn priced(records: &[Record], trust: &chain::Trust, catalogue: &Catalogue) -> StatusView {
    let mut view = status(records, trust);
    price_status(&mut view, catalogue);
    view
}

/// The advisors of [`flow`]: one metered, one flat-rate.
fn catalogue() -> Catalogue {
    let text = "advisors:
  - {id: alpha, title: Alpha, transport: process, adapter: process, executable: alpha,
     capabilities: [independent_reasoning],
     price: {currency: USD, input_per_million: 3, output_per_million: 15, as_of: 2026-12-01}}
  - {id: beta, title: Beta, transport: http, adapter: openai,
     capabilities: [independent_reasoning], price: flat_rate}
";
    Catalogue::parse(text, "bench", &accept_any_settings).expect("a valid catalogue")
}

/// In a sample process: prepare (untimed), then time one derivation and rendering.
fn take_sample(sample: &str) -> (Duration, Duration) {
    let parts: Vec<&str> = sample.splitn(3, ':').collect();
    let n: usize = parts[1].parse().expect("a task size");
    let name = TaskName::new(&format!("t{n}")).expect("a valid task name");
    // Both go through the store as `status` does, so both walk the hash chain.
    let catalogue = catalogue();
    let derive = |store: &Store| {
        store
            .with_trusted_records(&name, |records, trust| {
                render(&priced(records, trust, &catalogue), Format::Plain).len()
            })
            .expect("the task reads back")
    };
    if parts[0] == "graph" {
        let store = Store::open(Path::new(parts[2]));
        let derive = |store: &Store| {
            store
                .with_downstream(&name, |records, trust, graph| {
                    let mut view = priced(records, trust, &catalogue);
                    view.mark_resting(graph.resting(trust));
                    assert!(!view.resting_on_superseded.is_empty());
                    render(&view, Format::Plain).len()
                })
                .expect("the task reads back")
        };
        derive(&store);
        evict_cpu_caches();
        time(|| black_box(derive(&store)))
    } else if parts[0] == "memory" {
        // What the daemon holds: a store that has read the task once already.
        let store = Store::open(Path::new(parts[2]));
        derive(&store);
        // The warm call leaves a small task's records in the CPU's caches and a large
        // one's mostly out: evict both, so the ratio compares the work per record and not
        // whether the input fits in a cache (a daemon serves `status` between other work).
        evict_cpu_caches();
        time(|| black_box(derive(&store)))
    } else {
        let store = Store::open(Path::new(parts[2]));
        time(|| black_box(derive(&store)))
    }
}

/// Touch more memory than any CPU cache holds.
fn evict_cpu_caches() {
    let mut buffer = vec![0u8; 128 * 1024 * 1024];
    for i in (0..buffer.len()).step_by(64) {
        buffer[i] = i as u8;
    }
    black_box(&buffer);
}

/// Median times of one size: CPU time of the sampling thread, and wall-clock time.
#[derive(Debug, Clone, Copy)]
struct Times {
    cpu: Duration,
    wall: Duration,
}

/// Print the figures of both sizes; whether the bound is broken.
fn report(what: &str, (small, large): &(Times, Times)) -> bool {
    let ratio = large.cpu.as_secs_f64() / small.cpu.as_secs_f64();
    let wall_ratio = large.wall.as_secs_f64() / small.wall.as_secs_f64();
    let verdict = if ratio <= BOUND { "ok" } else { "FAILED" };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "status {what}: 1,000 records {:.2} ms, 10,000 records {:.2} ms (cpu), \
         ratio {ratio:.2} (bound {BOUND}) {verdict}",
        ms(small.cpu),
        ms(large.cpu),
    );
    println!(
        "  wall clock: 1,000 records {:.2} ms, 10,000 records {:.2} ms, ratio {wall_ratio:.2}",
        ms(small.wall),
        ms(large.wall),
    );
    ratio > BOUND
}

fn median(samples: Vec<(Duration, Duration)>) -> Times {
    let (cpu, wall): (Vec<Duration>, Vec<Duration>) = samples.into_iter().unzip();
    Times {
        cpu: stats::median(cpu),
        wall: stats::median(wall),
    }
}

/// One call of `f`: (CPU time of this thread, wall-clock time).
fn time<R>(f: impl FnOnce() -> R) -> (Duration, Duration) {
    let (cpu, wall) = (thread_cpu(), Instant::now());
    black_box(f());
    (thread_cpu() - cpu, wall.elapsed())
}

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("a thread CPU clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// Write `records` as task `task` under `state`, one file each in the store's layout.
fn write_task(state: &Path, task: &str, records: &[Record]) {
    let dir = state.join(task);
    std::fs::create_dir_all(&dir).expect("a task directory");
    // Chained as the writer chains them, so `status` walks an intact chain.
    let mut prev = chain::GENESIS.to_string();
    for record in records {
        let mut record = record.clone();
        record.envelope.task = task.to_string();
        record.envelope.schema = SCHEMA_VERSION;
        record.envelope.prev = Some(prev);
        let mut bytes = serde_json::to_vec_pretty(&record).expect("a record serialises");
        bytes.push(b'\n');
        prev = chain::digest(&bytes);
        std::fs::write(dir.join(store::file_name(&record)), bytes).expect("a record file");
    }
}

/// A task of `n` records (a multiple of [`FLOW`]): whole flows, each concluding with a
/// conclusion that supersedes the previous flow's, so every index of the view is used.
fn task(n: usize) -> Vec<Record> {
    assert_eq!(n % FLOW, 0, "whole flows only");
    let mut records = Vec::with_capacity(n);
    let mut previous_conclusion: Option<String> = None;
    for f in 0..n / FLOW {
        previous_conclusion = Some(flow(&mut records, f, previous_conclusion.as_deref()));
    }
    records
}

/// Append one flow of [`FLOW`] records; returns its conclusion's id.
fn flow(records: &mut Vec<Record>, f: usize, supersedes: Option<&str>) -> String {
    let mut add = |kind: &str, fields: Value| {
        let sequence = records.len() as u64 + 1;
        let id = format!("01JBENCH{sequence:0>18}");
        let mut value = json!({
            "id": id, "task": "bench", "sequence": sequence,
            "created_at": "2026-03-02T10:00:00Z", "schema": 1, "redacted": [], "kind": kind,
        });
        let object = value.as_object_mut().expect("an object");
        for (k, v) in fields.as_object().expect("fields") {
            object.insert(k.clone(), v.clone());
        }
        records.push(serde_json::from_value(value).expect("a valid record"));
        id
    };
    let advisors = ["alpha", "beta", "gamma", "delta", "epsilon"];
    let mut evidence = vec![json!({"kind": "file", "ref": "src/daemon/journal.rs"})];
    if let Some(old) = supersedes {
        // It rests on the conclusion this flow supersedes.
        evidence.push(json!({"kind": "record", "ref": old}));
    }
    let a = add(
        "assessment",
        json!({"subject": format!("decision number {f} about the journal"),
               "materiality": "high", "hypothesis": "keep the journal",
               "evidence": evidence,
               "new_evidence": supersedes.is_some()}),
    );
    let p = add(
        "plan",
        json!({"assessment": a, "mode": "standard", "budget": 2,
               "capabilities": ["independent_reasoning"],
               "selected": [
                   {"advisor": "alpha", "adapter": "process",
                    "covers": ["independent_reasoning"], "why": "first in the catalogue"},
                   {"advisor": "beta", "adapter": "http",
                    "covers": ["independent_reasoning"], "why": "another adapter"}],
               "left_out": advisors[2..].iter()
                   .map(|a| json!({"advisor": a, "reason": "the budget of 2 is spent"}))
                   .collect::<Vec<_>>(),
               "availability": advisors.iter()
                   .map(|a| json!({"advisor": a, "status": "available", "reason": "present"}))
                   .collect::<Vec<_>>()}),
    );
    let consultation = |advisor: &str, stance: &str| {
        json!({"plan": p, "advisor": advisor, "status": "completed",
               "conclusion": "an answer", "stance": stance, "duration_ms": 900,
               "usage": {"input_tokens": 1500, "output_tokens": 300},
               "finished_at": "2026-03-02T10:00:00Z"})
    };
    let c1 = add("consultation", consultation("alpha", "supports"));
    let c2 = add("consultation", consultation("beta", "opposes"));
    let d = add(
        "disagreement",
        json!({"assessment": a,
               "positions": [{"source": "executor", "position": "keep it"},
                             {"source": c2, "position": "drop it"}],
               "discriminating_question": "does a kill lose a job?"}),
    );
    add(
        "resolution",
        json!({"disagreement": d, "experiment": "kill it", "observed": "nothing lost",
               "favours": "executor", "evidence": [{"kind": "test", "ref": "kill_loop"}]}),
    );
    add(
        "attempt",
        json!({"assessment": a, "tried": "no fsync", "failure_observed": "lost a job"}),
    );
    let mut conclusion = json!({"assessment": a, "decision": "keep the journal",
                                "rationale": "the experiment", "consultations": [c1, c2],
                                "validation_plan": "kill loop",
                                "reviewed_by": ["alpha", "beta"],
                                "independent_review_count": 2});
    if let Some(old) = supersedes {
        conclusion["supersedes"] = json!(old);
    }
    let k = add("conclusion", conclusion);
    add(
        "validation",
        json!({"conclusion": k, "check": "kill loop", "passed": f.is_multiple_of(2)}),
    );
    add(
        "validation",
        json!({"conclusion": k, "check": "soak", "passed": true}),
    );
    k
}
