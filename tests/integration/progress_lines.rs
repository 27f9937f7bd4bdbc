//! Progress written to a pipe: one whole line per event (ids never cut), each stamped with
//! the event's own time since the job was queued, so `wait` joining late shows when
//! things really happened, not when it joined.

use crate::support::client::{Advisor, World};
use std::time::{Duration, Instant};

/// The seconds stamped on the first line containing `needle`.
fn stamp_of(stderr: &str, needle: &str) -> f64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with `{needle}` in:\n{stderr}"));
    let (stamp, _) = line.trim_start().split_once("s  ").expect("a stamped line");
    stamp
        .parse()
        .unwrap_or_else(|_| panic!("a stamp in `{line}`"))
}

#[test]
fn a_late_wait_shows_each_events_real_time_and_whole_ids() {
    let mut world = World::new(&[Advisor::new(
        "an-advisor-whose-identifier-is-long-enough-to-fill-a-line",
        "supports",
        600,
    )]);
    world.start_daemon();
    let assessment = world.assessment();
    let queued = Instant::now();
    let job = world
        .run(&["--assessment", &assessment, "--detach"])
        .expect_exit(0)
        .stdout
        .trim()
        .to_string();
    let first = world
        .run(&["wait", &job, "--format", "json"])
        .expect_exit(0);
    let report = first.json();
    let consultation = report["consultations"][0]["record"]
        .as_str()
        .expect("the consultation's id")
        .to_string();
    // In a pipe: every event its own line, ids whole, nothing cut to 80 columns.
    let recorded = first
        .stderr
        .lines()
        .find(|l| l.contains("recorded consultation"))
        .unwrap_or_else(|| panic!("{}", first.stderr));
    assert!(recorded.contains(&consultation), "{recorded}");
    assert!(recorded.contains("an-advisor-whose-identifier-is-long-enough-to-fill-a-line"));
    assert!(
        !first.stderr.contains('…') && !first.stderr.contains('\u{1b}'),
        "{}",
        first.stderr
    );
    let answered = stamp_of(&first.stderr, "recorded consultation");
    assert!(
        answered >= 0.55,
        "the advisor took 600 ms: {}",
        first.stderr
    );

    // Join again well after the end: the replayed events keep their own times.
    while queued.elapsed() < Duration::from_secs_f64(answered + 1.5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let late = world.run(&["wait", &job]).expect_exit(0);
    let replayed = stamp_of(&late.stderr, "recorded consultation");
    assert!(
        (replayed - answered).abs() <= 0.2,
        "the replayed event is stamped {replayed} s, it happened at {answered} s:\n{}",
        late.stderr
    );
    let done = stamp_of(&late.stderr, &format!("job {job} done after"));
    assert!(
        done < queued.elapsed().as_secs_f64() - 1.0,
        "{}",
        late.stderr
    );
}
