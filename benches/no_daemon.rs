//! `--no-daemon` in a large root: a fresh `advisor-consult advisors --no-daemon` and
//! `advisor-consult plan --no-daemon` (the real binary, a real process start each time)
//! in a root of 100,000 records, next to the same in an empty root. Bound: at most 2×.
//!
//! The large roots hold consultations only (what availability reads), written straight to
//! files in the store's layout and chained: four advisors in turn, one answer in seven a
//! timeout, the rest completed, a second apart. Two distributions: 1,000 tasks of 100
//! records, written one task after the other (as a root grows: no two tasks' answers end
//! at the same instant), and one task of 100,000. The first call after filling reads
//! every record and writes the persisted index (`<state>/+index`, see `docs/records.md`);
//! it is reported apart, and calls go on unmeasured until the state directories have
//! settled (the first call made the index's directory in them: see the bench's `main`).
//!
//! One process's time is noisy (the machine is shared), so the calls are interleaved: each
//! round calls the verb once in the empty root and once in each large root, and a round's
//! ratio compares calls made moments apart. The bound is on the median over [`ROUNDS`]
//! rounds of the per-round ratio; the quartiles and extremes of those ratios are printed
//! beside it, so that one run's noise shows as spread and cannot flip the figure.
//!
//! `cargo bench -p advisord --bench no_daemon`; with `NO_DAEMON_KEEP=DIR` it fills the
//! empty root and the root of 1,000 tasks into `DIR` and stops, for profiling by hand.

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
const ROUNDS: usize = 81;
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

/// `count` consultations in task `task`, written straight to files, the first ending
/// `start` seconds into the day of the records.
fn prefill(state: &Path, task: &str, count: usize, start: usize) {
    prefill::records(state, task, count, |i| {
        let mut body = prefill::consultation(i, &ADVISORS);
        if let advisord::core::records::Body::Consultation(c) = &mut body {
            let at = start + i;
            c.finished_at = format!(
                "2026-03-{:02}T{:02}:{:02}:{:02}.000Z",
                1 + at / 86_400,
                at / 3600 % 24,
                at / 60 % 60,
                at % 60
            );
        }
        body
    });
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

/// The `q` quantile (0 to 1) of `samples`, sorted.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// What [`ROUNDS`] interleaved rounds measured of one verb in one root.
#[derive(Default)]
struct Samples {
    walls: Vec<Duration>,
    cpus: Vec<Duration>,
    /// Each round's wall time over the empty root's in the same round.
    ratios: Vec<f64>,
}

/// [`ROUNDS`] rounds, each calling every verb in the empty root and then in each large
/// root; every answer must be the first one's in that root. Per verb, the empty root's
/// samples and each large root's.
fn measure(
    empty: &Place,
    roots: &[(String, &Place)],
    verbs: &[&[&str]],
) -> Vec<(Samples, Vec<Samples>)> {
    let answers: Vec<Vec<String>> = verbs
        .iter()
        .map(|verb| {
            std::iter::once(empty)
                .chain(roots.iter().map(|(_, p)| *p))
                .map(|place| call(place, verb).2)
                .collect()
        })
        .collect();
    let mut samples: Vec<(Samples, Vec<Samples>)> = verbs
        .iter()
        .map(|_| {
            (
                Samples::default(),
                roots.iter().map(|_| Samples::default()).collect(),
            )
        })
        .collect();
    for _ in 0..ROUNDS {
        for (v, verb) in verbs.iter().enumerate() {
            let (base_wall, base_cpu, answer) = call(empty, verb);
            assert_eq!(answer, answers[v][0], "{verb:?}: the answer changed");
            let (base, large) = &mut samples[v];
            base.walls.push(base_wall);
            base.cpus.push(base_cpu);
            base.ratios.push(1.0);
            for (r, (shape, place)) in roots.iter().enumerate() {
                let (wall, cpu, answer) = call(place, verb);
                assert_eq!(
                    answer,
                    answers[v][r + 1],
                    "{verb:?} in {shape}: the index changed the answer"
                );
                large[r].walls.push(wall);
                large[r].cpus.push(cpu);
                large[r]
                    .ratios
                    .push(wall.as_secs_f64() / base_wall.as_secs_f64());
            }
        }
    }
    samples
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
    let per_task = RECORDS / MANY_TASKS;
    for t in 0..MANY_TASKS {
        prefill(&many.state(), &format!("task-{t}"), per_task, t * per_task);
    }
    // For profiling by hand: keep the empty root and the root of many tasks, and stop.
    if let Some(keep) = std::env::var_os("NO_DAEMON_KEEP") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).expect("the directory to keep the roots in");
        for (name, place) in [("empty", empty), ("many", many)] {
            std::fs::rename(place.dir.keep(), keep.join(name)).expect("kept");
        }
        println!(
            "no_daemon: kept the empty root and {MANY_TASKS} tasks in {}",
            keep.display()
        );
        return;
    }
    prefill(&one.state(), "big", RECORDS, 0);
    println!(
        "no_daemon: filled two roots of {RECORDS} consultations ({MANY_TASKS} tasks of \
         {per_task} records; one task of {RECORDS}) in {:.0} s",
        filling.elapsed().as_secs_f64()
    );
    let roots = [
        (format!("{MANY_TASKS} tasks of {per_task}"), &many),
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
    // The first call made the index's directory in the state directory, and a directory
    // changed within 2 s vouches for nothing (`docs/records.md`): until it has settled, a
    // fresh process lists the state directory. Calls go on until it has, as in a root
    // that has been there a while; then the next call writes what it vouches for.
    let settled = Instant::now() + Duration::from_secs(3);
    let mut warming = 0;
    while Instant::now() < settled {
        for (_, place) in &roots {
            call(place, ADVISORS_VERB);
            warming += 1;
        }
    }
    for (_, place) in &roots {
        call(place, ADVISORS_VERB);
    }
    println!("no_daemon: {warming} calls while the state directories settled (not measured)");
    let verbs = [("advisors", ADVISORS_VERB), ("plan", PLAN_VERB)];
    let measured = measure(
        &empty,
        &roots,
        &verbs.iter().map(|(_, v)| *v).collect::<Vec<_>>(),
    );
    let mut broken = false;
    for ((name, _), (base, large)) in verbs.iter().zip(measured) {
        let (base_wall, base_cpu) = (median(base.walls), median(base.cpus));
        for ((shape, _), samples) in roots.iter().zip(large) {
            let mut ratios = samples.ratios.clone();
            ratios.sort_by(f64::total_cmp);
            let ratio = quantile(&ratios, 0.5);
            println!(
                "no_daemon: `{name} --no-daemon` in {RECORDS} records ({shape}) ÷ an empty \
                 root, median of {ROUNDS} interleaved rounds: {ratio:.2}x (bound \
                 {MAX_RATIO}x); spread of the rounds' ratios: quartiles {:.2}–{:.2}x, \
                 extremes {:.2}–{:.2}x; median wall time {:.1} ms against {:.1} ms, \
                 processor time {:.1} ms against {:.1} ms",
                quantile(&ratios, 0.25),
                quantile(&ratios, 0.75),
                ratios[0],
                ratios[ratios.len() - 1],
                ms(median(samples.walls)),
                ms(base_wall),
                ms(median(samples.cpus)),
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
