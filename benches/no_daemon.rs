//! `--no-daemon` in a large root: a fresh `advisor-consult advisors --no-daemon` and
//! `advisor-consult plan --no-daemon` (the real binary, a real process start each time)
//! in a root of 100,000 records, next to the same in an empty root. Bound: at most 2×.
//!
//! The large roots hold consultations only (what availability reads), written straight to
//! files in the store's layout and chained: four advisors in turn, one answer in seven a
//! timeout, the rest completed. Two distributions: 1,000 tasks of 100 records, and one
//! task of 100,000. The first call after filling reads every record and writes the
//! persisted index (`<state>/+index`, see `docs/records.md`); it is reported apart. Each
//! figure is the median of the calls after it.
//!
//! `cargo bench -p advisord --bench no_daemon`

#[path = "support/prefill.rs"]
mod prefill;
#[path = "support/stats.rs"]
mod stats;

use stats::{median, ms};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RECORDS: usize = 100_000;
const MANY_TASKS: usize = 1_000;
const CALLS: usize = 15;
const MAX_RATIO: f64 = 2.0;
const ADVISORS: [&str; 4] = ["one", "two", "three", "four"];

/// A project root, its state directory and catalogue, in a temporary directory.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(dir.path().join("root")).expect("the root");
        let mut yaml = String::from("mode: standard\nadvisors:\n");
        for (i, id) in ADVISORS.iter().enumerate() {
            // A built-in adapter that needs no credential (never asked here).
            yaml.push_str(&format!(
                "  - id: {id}\n    title: Advisor {id}\n    transport: http\n    \
                 adapter: ollama\n    references: {{ provider: p{i}, vendor: v{i}, model: m{i} }}\n    \
                 capabilities: [independent_reasoning]\n    max_concurrent: 2\n    \
                 endpoint: http://127.0.0.1:9\n    model: m\n"
            ));
        }
        std::fs::write(dir.path().join("catalogue.yaml"), yaml).expect("the catalogue");
        Place { dir }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

/// `count` consultations in task `task`, written straight to files.
fn prefill(state: &Path, task: &str, count: usize) {
    prefill::records(state, task, count, |i| prefill::consultation(i, &ADVISORS));
}

/// The processor time (user and system) of every child waited for so far.
fn children_cpu() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let time = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    time(usage.user_time()) + time(usage.system_time())
}

/// One fresh `advisor-consult VERB --no-daemon` in `place`, for a new task: its wall time,
/// its processor time and its standard output.
fn call(place: &Place, verb: &[&str]) -> (Duration, Duration, String) {
    let cpu = children_cpu();
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .args(verb)
        .args(["--no-daemon", "--format", "json", "--task", "fresh"])
        .arg("--root")
        .arg(place.dir.path().join("root"))
        .arg("--state-dir")
        .arg(place.state())
        .arg("--catalogue")
        .arg(place.dir.path().join("catalogue.yaml"))
        .stdin(Stdio::null())
        .output()
        .expect("run advisor-consult");
    let elapsed = started.elapsed();
    let cpu = children_cpu().saturating_sub(cpu);
    assert!(
        output.status.success(),
        "{verb:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        elapsed,
        cpu,
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

const ADVISORS_VERB: &[&str] = &["advisors"];
const PLAN_VERB: &[&str] = &["plan", "--materiality", "high"];

/// The medians of [`CALLS`] calls of `verb`: wall time (bounded) and processor time
/// (printed: on a loaded machine it varies less); every answer must be the first one's.
fn measure(place: &Place, verb: &[&str]) -> (Duration, Duration) {
    let (_, _, answer) = call(place, verb);
    let (walls, cpus) = (0..CALLS)
        .map(|_| {
            let (wall, cpu, again) = call(place, verb);
            assert_eq!(again, answer, "{verb:?}: the index changed the answer");
            (wall, cpu)
        })
        .unzip();
    (median(walls), median(cpus))
}

/// Whether `verb` answers the same with the index and once it is deleted.
fn same_without_index(place: &Place, verb: &[&str]) -> bool {
    let (_, _, with_index) = call(place, verb);
    std::fs::remove_file(advisord::store::index_path(&place.state()))
        .expect("the index was written");
    let (_, _, without) = call(place, verb);
    with_index == without
}

fn main() {
    let empty = Place::new();
    let many = Place::new();
    let one = Place::new();
    let filling = Instant::now();
    for t in 0..MANY_TASKS {
        prefill(&many.state(), &format!("task-{t}"), RECORDS / MANY_TASKS);
    }
    prefill(&one.state(), "big", RECORDS);
    println!(
        "no_daemon: filled two roots of {RECORDS} consultations ({MANY_TASKS} tasks of {} \
         records; one task of {RECORDS}) in {:.0} s",
        RECORDS / MANY_TASKS,
        filling.elapsed().as_secs_f64()
    );
    let roots = [
        (
            format!("{MANY_TASKS} tasks of {}", RECORDS / MANY_TASKS),
            &many,
        ),
        (format!("one task of {RECORDS}"), &one),
    ];
    // The first call after filling reads every record and writes the index.
    for (shape, place) in &roots {
        let (first, _, _) = call(place, ADVISORS_VERB);
        println!(
            "no_daemon: first `advisors --no-daemon` after filling ({shape}; reads every \
             record, writes the index) {:.0} ms",
            ms(first)
        );
    }
    let mut broken = false;
    for (name, verb) in [("advisors", ADVISORS_VERB), ("plan", PLAN_VERB)] {
        let (base, base_cpu) = measure(&empty, verb);
        for (shape, place) in &roots {
            let (median, cpu) = measure(place, verb);
            let ratio = median.as_secs_f64() / base.as_secs_f64();
            println!(
                "no_daemon: `{name} --no-daemon` median of {CALLS}: {:.1} ms in {RECORDS} \
                 records ({shape}), {:.1} ms in an empty root: {ratio:.2}x (bound \
                 {MAX_RATIO}x); processor time {:.1} ms against {:.1} ms",
                ms(median),
                ms(base),
                ms(cpu),
                ms(base_cpu),
            );
            broken |= ratio > MAX_RATIO;
        }
    }
    // Deleting the index changes no answer (run last: it rebuilds the index).
    for (shape, place) in &roots {
        for verb in [ADVISORS_VERB, PLAN_VERB] {
            assert!(
                same_without_index(place, verb),
                "{verb:?} in {shape}: the answer depends on the index"
            );
        }
    }
    if broken {
        eprintln!("no_daemon: bound broken");
        std::process::exit(1);
    }
}
