//! What one write costs as a task grows: 1,000, 10,000 and 100,000 records in one task.
//!
//! Run with `cargo bench -p advisord --bench writer_scale`. Each task is filled straight to
//! files in the store's layout (assessments, each with a plan, a completed consultation
//! and a conclusion citing it, chained as the writer chains them), then one store writes
//! into it: first an assessment declaring new evidence on a subject that has a standing
//! conclusion, then the conclusion superseding it, an attempt on the task's first
//! assessment, and an assessment of a concluded subject with its plan (which reuses that
//! conclusion). Those are the writes whose rules look furthest back (the standing conclusion
//! on a normalised subject, the consultations of an assessment, a reference to the oldest
//! record, the conclusion a plan reuses). Printed per size: the first write (a fresh store walks the task once), and the
//! median CPU time of the thread per later write (the fsync's wait is not CPU time, so
//! the figure is the writer's work, not the disk's), and the CPU time of `verify`'s walk of
//! the task (every record admitted again). Exits non-zero when a write into the largest
//! task costs more than `MAX_GROWTH` times one into the smallest.
//!
//! The state directory is created under the target directory, not `/tmp`.

#[path = "support/flow.rs"]
mod flow;
#[path = "support/stats.rs"]
mod stats;

use advisord::core::availability::{self, AvailabilityInput, DisableList, Presence};
use advisord::core::catalogue::Catalogue;
use advisord::core::chain;
use advisord::core::policy::PlanEnv;
use advisord::core::records::TaskName;
use advisord::core::records::{Body, Mode};
use advisord::store::{file_name, Store};
use nix::time::{clock_gettime, ClockId};
use serde_json::json;
use stats::median;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The task sizes.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Rounds timed per size (each round is five writes).
const ROUNDS: usize = 30;
/// A write into the largest task may cost at most this many times one into the smallest.
const MAX_GROWTH: f64 = 1.5;

fn scratch_root() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&target).expect("the target directory");
    target
}

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// The id of record `sequence` of a filled task.
fn id(sequence: usize) -> String {
    format!("01JFILLED{sequence:017}")
}

/// Fill `task` with `count` records (whole flows), chained as the writer chains them.
fn fill(state: &Path, task: &str, count: usize) {
    let dir = state.join(task);
    std::fs::create_dir_all(&dir).expect("the task directory");
    let mut prev = chain::GENESIS.to_string();
    for i in 0..count / 4 {
        for (k, body) in flow::flow(i, id, format!("Stored decision {i}"), true)
            .into_iter()
            .enumerate()
        {
            let sequence = 4 * i + k + 1;
            let (record, bytes) = flow::chained(task, id(sequence), sequence, &mut prev, body);
            std::fs::write(dir.join(file_name(&record)), bytes).expect("a record file");
        }
    }
}

fn main() {
    let root = tempfile::Builder::new()
        .prefix("advisord-bench-writer-scale-")
        .tempdir_in(scratch_root())
        .expect("a scratch directory");
    let mut medians = Vec::new();
    for size in SIZES {
        let state = root.path().join(format!("n{size}"));
        let task = TaskName::new("scale").expect("valid task");
        fill(&state, task.as_str(), size);
        let store = Store::open(&state);
        let first = id(1);
        let start = Instant::now();
        store
            .write(
                &task,
                &json!({"kind": "attempt", "assessment": first, "tried": "warm up",
                    "failure_observed": "none"}),
                None,
            )
            .expect("the first write");
        let first_write = start.elapsed();
        // The standing conclusion on "Stored decision 0" is the filled one, record 4.
        let mut standing = id(4);
        let catalogue = Catalogue::embedded();
        let now = time::OffsetDateTime::now_utc();
        let plan_env = PlanEnv {
            catalogue: &catalogue,
            mode: Mode::Standard,
            availability: availability::assess(&AvailabilityInput {
                catalogue: &catalogue,
                mode: Mode::Standard,
                disable: &DisableList::None,
                presence: &Presence::default(),
                history: &[],
                cooldown_override_s: None,
                now,
                budget: None,
            }),
            budget_exhausted: None,
            asker: None,
        };
        // The standing conclusion on "Stored decision 1" is the filled one, record 8.
        let reused = id(8);
        let mut times = Vec::new();
        for round in 0..ROUNDS {
            let cpu = thread_cpu();
            let again = store
                .write(
                    &task,
                    &json!({"kind": "assessment", "subject": "  stored DECISION 0 ",
                        "materiality": "low", "hypothesis": format!("round {round}"),
                        "new_evidence": true}),
                    None,
                )
                .expect("an assessment");
            let conclusion = store
                .write(
                    &task,
                    &json!({"kind": "conclusion", "assessment": again.id(),
                        "decision": "the other option", "rationale": "new evidence",
                        "supersedes": standing}),
                    None,
                )
                .expect("a conclusion");
            standing = conclusion.id().to_string();
            store
                .write(
                    &task,
                    &json!({"kind": "attempt", "assessment": first,
                        "tried": format!("round {round}"), "failure_observed": "none"}),
                    None,
                )
                .expect("an attempt");
            let concluded = store
                .write(
                    &task,
                    &json!({"kind": "assessment", "subject": "stored decision 1",
                        "materiality": "low", "hypothesis": format!("again {round}")}),
                    None,
                )
                .expect("an assessment of a concluded subject");
            let plan = store
                .write(
                    &task,
                    &json!({"kind": "plan", "assessment": concluded.id()}),
                    Some(&plan_env),
                )
                .expect("a plan");
            match &plan.body {
                Body::Plan(p) => assert_eq!(p.reuse.as_deref(), Some(reused.as_str())),
                other => panic!("a plan was written, not {other:?}"),
            }
            times.push((thread_cpu() - cpu) / 5);
        }
        let per_write = median(times);
        // `verify`'s walk: every record admitted again through the writer's rules.
        let stored = store.stored_files(&task).expect("the files");
        let files: Vec<chain::File> = stored.iter().map(|f| f.as_chain_file()).collect();
        let cpu = thread_cpu();
        let report = chain::verify_task(&task, String::new(), &files);
        let verify = thread_cpu() - cpu;
        assert!(report.findings.is_empty(), "{:?}", report.findings.first());
        println!(
            "writer_scale: {size} records: first write {:.0} ms; median CPU per write {:.0} us; \
             verify {:.0} ms CPU",
            first_write.as_secs_f64() * 1e3,
            per_write.as_secs_f64() * 1e6,
            verify.as_secs_f64() * 1e3,
        );
        medians.push(per_write);
        drop(store);
        let _ = std::fs::remove_dir_all(&state);
    }
    let growth = medians[2].as_secs_f64() / medians[0].as_secs_f64();
    println!(
        "writer_scale: a write at {} records costs {growth:.2}x one at {} (bound <= {MAX_GROWTH})",
        SIZES[2], SIZES[0]
    );
    if growth > MAX_GROWTH {
        println!("writer_scale: FAILED: a write grows with the task's size");
        std::process::exit(1);
    }
}
