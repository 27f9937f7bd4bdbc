//! The store under many processes: concurrent writers on one task never lose, duplicate or
//! tear a record, keep its hash chain intact, and a writer killed at any point leaves only
//! whole records behind.
//!
//! The writers are this test binary itself, re-run with `--exact` on [`child_writer`] and
//! [`CHILD_ENV`] set: a real separate process, with no dependency on the CLI binaries.

use advisord::core::chain;
use advisord::core::records::{Body, Record, TaskName};
use advisord::store::Store;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a child: `<state dir>\t<task>\t<assessment id>\t<tag>\t<records to write>`.
const CHILD_ENV: &str = "ADVISORD_TEST_WRITER_CHILD";

/// A child writer process: writes the records [`CHILD_ENV`] asks for. The tests below run
/// it through [`spawn_writer`]; run without [`CHILD_ENV`], it checks the same writing
/// loop in-process on a temporary task, so that what every child does is tested too.
#[test]
fn child_writer() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let parts: Vec<&str> = spec.split('\t').collect();
        let [state, task, assessment, tag, count] = parts[..] else {
            panic!("{CHILD_ENV} must hold five tab-separated fields, got {spec:?}");
        };
        let count = count.parse().expect("a count");
        write_records(Path::new(state), task, assessment, tag, count);
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let task = TaskName::new("solo").expect("valid task");
    let first = Store::open(dir.path())
        .write(&task, &root_assessment(), None)
        .expect("the first record");
    write_records(dir.path(), "solo", first.id(), "solo", 5);
    let records = assert_whole(dir.path(), &task);
    let tags: Vec<String> = records.iter().skip(1).filter_map(tag_of).collect();
    assert_eq!(tags, ["solo-0", "solo-1", "solo-2", "solo-3", "solo-4"]);
}

/// The full name of [`child_writer`] in this test binary (its module path, less the
/// binary's own name).
fn child_test_name() -> String {
    let module = module_path!();
    let within = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{within}::child_writer")
}

/// What a child writer does: `count` records tagged `<tag>-<i>`, assessments and attempts
/// under `assessment` alternating, so that the writer's reference checks run too.
fn write_records(state: &Path, task: &str, assessment: &str, tag: &str, count: usize) {
    let store = Store::open(state);
    let task = TaskName::new(task).expect("valid task");
    for i in 0..count {
        let input = if i.is_multiple_of(2) {
            json!({"kind": "assessment", "subject": format!("{tag}-{i}"),
                "materiality": "low", "hypothesis": "h"})
        } else {
            json!({"kind": "attempt", "assessment": assessment, "tried": format!("{tag}-{i}"),
                "failure_observed": "f"})
        };
        store.write(&task, &input, None).expect("child write");
    }
}

fn root_assessment() -> serde_json::Value {
    json!({"kind": "assessment", "subject": "root", "materiality": "low", "hypothesis": "h"})
}

fn spawn_writer(state: &Path, task: &str, assessment: &str, tag: &str, count: usize) -> Child {
    let exe = std::env::current_exe().expect("the test binary");
    let spec = format!("{}\t{task}\t{assessment}\t{tag}\t{count}", state.display());
    Command::new(exe)
        .args(["--exact", &child_test_name(), "--test-threads=1", "-q"])
        .env(CHILD_ENV, spec)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child writer")
}

/// Wait for `child` at most until `deadline`; kill it and fail past that.
fn wait_until(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a child writer did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The text that identifies a record written by a child (`<tag>-<i>`).
fn tag_of(record: &Record) -> Option<String> {
    match &record.body {
        Body::Assessment(a) => Some(a.subject.clone()),
        Body::Attempt(a) => Some(a.tried.clone()),
        _ => None,
    }
}

/// Every record of `task` parses, sequences run 1..=n without a gap or a repeat, ids are
/// unique, every non-dot file of the task's directory is one of those records, and the
/// hash chain over them is intact from the first record (each writer chained its record
/// to the bytes the one before it stored, whichever process wrote them).
fn assert_whole(store_dir: &Path, task: &TaskName) -> Vec<Record> {
    let records = Store::open(store_dir)
        .records(task)
        .expect("every record parses");
    let sequences: Vec<u64> = records.iter().map(|r| r.envelope.sequence).collect();
    let expected: Vec<u64> = (1..=records.len() as u64).collect();
    assert_eq!(sequences, expected, "sequences are unique and contiguous");
    let ids: BTreeSet<&str> = records.iter().map(Record::id).collect();
    assert_eq!(ids.len(), records.len(), "ids are unique");
    let files = std::fs::read_dir(store_dir.join(task.as_str()))
        .expect("the task dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .count();
    assert_eq!(files, records.len(), "no file besides the records");
    let stored = Store::open(store_dir)
        .stored_files(task)
        .expect("the files read");
    let files: Vec<chain::File> = stored.iter().map(|f| f.as_chain_file()).collect();
    let report = chain::verify_task(task, String::new(), &files);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(report.state.chained_from, Some(1));
    assert_eq!(report.state.records, records.len());
    records
}

#[test]
fn fifty_concurrent_writers_lose_nothing() {
    const WRITERS: usize = 50;
    const EACH: usize = 2;
    let dir = tempfile::tempdir().expect("temp dir");
    let task = TaskName::new("shared").expect("valid task");
    let first = Store::open(dir.path())
        .write(&task, &root_assessment(), None)
        .expect("the first record");
    let mut children: Vec<Child> = (0..WRITERS)
        .map(|w| spawn_writer(dir.path(), "shared", first.id(), &format!("w{w}"), EACH))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for child in &mut children {
        let status = wait_until(child, deadline);
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            use std::io::Read;
            let _ = err.read_to_string(&mut stderr);
        }
        assert!(status.success(), "a child writer failed: {stderr}");
    }
    let records = assert_whole(dir.path(), &task);
    assert_eq!(records.len(), 1 + WRITERS * EACH);
    let tags: BTreeSet<String> = records.iter().skip(1).filter_map(tag_of).collect();
    let expected: BTreeSet<String> = (0..WRITERS)
        .flat_map(|w| (0..EACH).map(move |i| format!("w{w}-{i}")))
        .collect();
    assert_eq!(tags, expected, "every child's every record, once");
}

#[test]
fn a_writer_killed_at_any_point_leaves_only_whole_records() {
    const ROUNDS: u64 = 20;
    let dir = tempfile::tempdir().expect("temp dir");
    let task = TaskName::new("killed").expect("valid task");
    let store = Store::open(dir.path());
    let first = store
        .write(&task, &root_assessment(), None)
        .expect("the first record");
    let count_files = || {
        std::fs::read_dir(dir.path().join("killed"))
            .expect("the task dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .count()
    };
    for round in 0..ROUNDS {
        let before = count_files();
        let mut child = spawn_writer(
            dir.path(),
            "killed",
            first.id(),
            &format!("k{round}"),
            100_000,
        );
        // Wait until the child is in its write loop, then kill it a varying moment later
        // so that the kill lands before, during and after the steps of a write.
        let deadline = Instant::now() + Duration::from_secs(20);
        while count_files() == before {
            assert!(Instant::now() < deadline, "the child never wrote");
            assert!(
                child.try_wait().expect("poll").is_none(),
                "the child exited early"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_micros(round * 700));
        child.kill().expect("SIGKILL the writer");
        child.wait().expect("reap the writer");
        assert_whole(dir.path(), &task);
    }
    let records = assert_whole(dir.path(), &task);
    assert!(
        records.len() > ROUNDS as usize,
        "each round wrote at least once"
    );
    // The next writer continues the sequence and clears what a killed writer left.
    let next = Store::open(dir.path())
        .write(
            &task,
            &json!({"kind": "attempt", "assessment": first.id(), "tried": "after",
                "failure_observed": "f"}),
            None,
        )
        .expect("written after the kills");
    assert_eq!(next.envelope.sequence, records.len() as u64 + 1);
    let temps = std::fs::read_dir(dir.path().join("killed"))
        .expect("the task dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tmp"))
        .count();
    assert_eq!(temps, 0, "stale temporary files are removed under the lock");
}
