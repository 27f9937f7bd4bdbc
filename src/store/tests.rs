//! The store's tests.

use super::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

fn task(name: &str) -> TaskName {
    TaskName::new(name).expect("valid task")
}

/// A store in a temporary directory with task `t` holding `n` assessments.
fn task_of_assessments(n: usize) -> (tempfile::TempDir, Store, TaskName) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    let t = task("t");
    for i in 0..n {
        store
            .write(&t, &assessment(&format!("s{i}")), None)
            .expect("written");
    }
    (dir, store, t)
}

fn assessment(subject: &str) -> serde_json::Value {
    json!({"kind": "assessment", "subject": subject, "materiality": "low",
        "hypothesis": "h"})
}

#[test]
fn records_round_trip_in_sequence_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    let t = task("t");
    assert!(store.records(&t).expect("empty task").is_empty());
    for i in 0..5 {
        let record = store
            .write(&t, &assessment(&format!("s{i}")), None)
            .expect("written");
        assert_eq!(record.envelope.sequence, i + 1);
        assert_eq!(record.envelope.task, "t");
        assert_eq!(record.id().len(), 26, "a ULID");
        assert!(record.envelope.created_at.ends_with('Z'));
    }
    // A second store reads the same records from disk.
    let again = Store::open(dir.path()).records(&t).expect("read back");
    let sequences: Vec<u64> = again.iter().map(|r| r.envelope.sequence).collect();
    assert_eq!(sequences, [1, 2, 3, 4, 5]);
    assert_eq!(again, store.records(&t).expect("cached"));
    let mut names: Vec<String> = fs::read_dir(store.task_dir(&t))
        .expect("listed")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    assert_eq!(names[0], file_name(&again[0]));
    assert_eq!(
        names,
        [
            "0000000001.json",
            "0000000002.json",
            "0000000003.json",
            "0000000004.json",
            "0000000005.json"
        ]
    );
}

#[test]
fn directories_are_private() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let store = Store::open(&state);
    let t = task("t");
    store.write(&t, &assessment("s"), None).expect("written");
    for path in [state.clone(), store.task_dir(&t)] {
        let mode = fs::metadata(&path).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", path.display());
    }
    let record = fs::read_dir(store.task_dir(&t))
        .expect("listed")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a record file");
    let mode = fs::metadata(record).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_refusal_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let store = Store::open(&state);
    let t = task("t");
    let refused = store.write(&t, &json!({"kind": "assessment"}), None);
    assert!(
        matches!(refused, Err(StoreError::Refused(_))),
        "{refused:?}"
    );
    assert!(!state.exists(), "a refused first record creates nothing");
    store.write(&t, &assessment("s"), None).expect("written");
    let before: Vec<_> = fs::read_dir(store.task_dir(&t)).expect("listed").collect();
    let refused = store.write(
        &t,
        &json!({"kind": "attempt", "assessment": "NOPE",
        "tried": "t", "failure_observed": "f"}),
        None,
    );
    assert!(
        matches!(refused, Err(StoreError::Refused(_))),
        "{refused:?}"
    );
    let after: Vec<_> = fs::read_dir(store.task_dir(&t)).expect("listed").collect();
    assert_eq!(before.len(), after.len());
    assert_eq!(store.records(&t).expect("read").len(), 1);
}

#[test]
fn references_are_checked_within_the_task() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    let a = store
        .write(&task("one"), &assessment("s"), None)
        .expect("written");
    let attempt = json!({"kind": "attempt", "assessment": a.id(), "tried": "t",
        "failure_observed": "f"});
    let other = store.write(&task("two"), &attempt, None);
    assert!(
        matches!(&other, Err(StoreError::Refused(r))
            if r.reason == crate::core::writer::ReasonCode::UnknownReference),
        "{other:?}"
    );
    store
        .write(&task("one"), &attempt, None)
        .expect("same task");
}

#[test]
fn temp_files_and_strays_are_not_records_and_stale_temps_are_removed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    let t = task("t");
    store.write(&t, &assessment("s"), None).expect("written");
    let task_dir = store.task_dir(&t);
    let stale = task_dir.join(".0000000002.json.999.tmp");
    fs::write(&stale, b"{\"half").expect("a torn temp file");
    fs::write(task_dir.join(".hidden.json"), b"not json").expect("a dot file");
    fs::write(task_dir.join("notes.json"), b"not a record").expect("a stray file");
    assert_eq!(Store::open(dir.path()).records(&t).expect("read").len(), 1);
    // A store loading the task lists it, under the lock, and clears what a dead writer left.
    let second = Store::open(dir.path())
        .write(&t, &assessment("s2"), None)
        .expect("written");
    assert_eq!(second.envelope.sequence, 2);
    assert!(
        !stale.exists(),
        "the next writer removes a dead writer's temp file"
    );
}

#[test]
fn a_corrupt_record_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    let t = task("t");
    store.write(&t, &assessment("s"), None).expect("written");
    let bad = store.task_dir(&t).join("0000000002.json");
    fs::write(&bad, b"{}").expect("a hand-made file");
    match Store::open(dir.path()).records(&t) {
        Err(StoreError::Corrupt { path, message }) => {
            assert_eq!(path, bad);
            assert!(message.contains("move the file"), "{message}");
        }
        other => panic!("expected a corrupt record, got {other:?}"),
    }
}

#[test]
fn consultations_of_every_task() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    assert!(store
        .consultations_all_tasks()
        .expect("no state yet")
        .is_empty());
    store
        .write(&task("a"), &assessment("s"), None)
        .expect("written");
    fs::create_dir(dir.path().join("not a task")).expect("a stray directory");
    fs::write(dir.path().join("stray-file"), b"x").expect("a stray file");
    assert!(store.consultations_all_tasks().expect("scanned").is_empty());
    // Consultations need a plan, which needs the policy: write the files as the store
    // would, from records built by hand, and read them through a fresh store.
    for (t, advisor) in [("a", "alpha"), ("b", "beta")] {
        let record: Record = serde_json::from_value(json!({
            "id": format!("C{advisor}"), "task": t, "sequence": 7,
            "created_at": "2026-01-01T00:00:00.000Z", "schema": 1, "redacted": [],
            "kind": "consultation", "plan": "P", "advisor": advisor,
            "status": "failed", "failure": "timeout",
            "finished_at": "2026-01-01T00:00:00.000Z"}))
        .expect("a consultation");
        let task_dir = dir.path().join(t);
        fs::create_dir_all(&task_dir).expect("task dir");
        fs::write(
            task_dir.join(file_name(&record)),
            serde_json::to_vec(&record).unwrap(),
        )
        .expect("written");
    }
    let found = Store::open(dir.path())
        .consultations_all_tasks()
        .expect("scanned");
    let advisors: Vec<&str> = found
        .iter()
        .map(|r| match &r.body {
            Body::Consultation(c) => c.advisor.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(advisors, ["alpha", "beta"]);
}

#[test]
fn two_stores_see_each_others_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (one, two) = (Store::open(dir.path()), Store::open(dir.path()));
    let t = task("t");
    let a = one.write(&t, &assessment("s"), None).expect("written");
    assert_eq!(two.records(&t).expect("read").len(), 1);
    let attempt = json!({"kind": "attempt", "assessment": a.id(), "tried": "t",
        "failure_observed": "f"});
    assert_eq!(
        two.write(&t, &attempt, None)
            .expect("written")
            .envelope
            .sequence,
        2
    );
    // `one` has a warm cache from before `two` wrote: it still continues the sequence.
    assert_eq!(
        one.write(&t, &attempt, None)
            .expect("written")
            .envelope
            .sequence,
        3
    );
    let sequences = |s: &Store| -> Vec<u64> {
        s.records(&t)
            .expect("read")
            .iter()
            .map(|r| r.envelope.sequence)
            .collect()
    };
    assert_eq!(sequences(&one), [1, 2, 3]);
    assert_eq!(sequences(&two), [1, 2, 3]);
}

#[test]
fn a_missing_file_hides_no_later_record() {
    let (dir, store, t) = task_of_assessments(3);
    fs::remove_file(store.task_dir(&t).join("0000000002.json")).expect("removed by hand");
    let fresh = Store::open(dir.path());
    let sequences: Vec<u64> = fresh
        .records(&t)
        .expect("read")
        .iter()
        .map(|r| r.envelope.sequence)
        .collect();
    assert_eq!(sequences, [1, 3]);
    // The gap breaks the chain: the writer appends nothing after it, and says what to
    // move aside.
    let refused = fresh.write(&t, &assessment("s3"), None);
    let Err(StoreError::Refused(refusal)) = refused else {
        panic!("refused: {refused:?}")
    };
    assert_eq!(refusal.reason, writer::ReasonCode::ChainBroken);
    assert!(
        refusal.message.contains("`0000000003.json`")
            && refusal.message.contains("record 2 is missing"),
        "{}",
        refusal.message
    );
    assert!(!store.task_dir(&t).join("0000000004.json").exists());
}

#[test]
fn a_file_under_another_sequence_is_corrupt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path());
    let t = task("t");
    store.write(&t, &assessment("s"), None).expect("written");
    let task_dir = store.task_dir(&t);
    fs::copy(
        task_dir.join("0000000001.json"),
        task_dir.join("0000000002.json"),
    )
    .expect("copied by hand");
    let read = Store::open(dir.path()).records(&t);
    assert!(
        matches!(&read, Err(StoreError::Corrupt { message, .. })
            if message.contains("sequence 1")),
        "{read:?}"
    );
}

#[test]
fn the_kept_walk_of_the_chain_covers_records_read_since() {
    let (dir, store, t) = task_of_assessments(2);
    let state = |s: &Store| {
        s.with_trusted_records(&t, |_, trust| trust.state.clone())
            .expect("read")
            .expect("walked")
    };
    assert_eq!((state(&store).records, state(&store).broken_at), (2, None));
    // Record 3 written outside the writer, starting a chain of its own.
    let mut forged: serde_json::Value = serde_json::from_slice(
        &fs::read(store.task_dir(&t).join("0000000002.json")).expect("record 2"),
    )
    .expect("json");
    forged["id"] = json!("FORGED");
    forged["sequence"] = json!(3);
    forged["prev"] = json!(chain::GENESIS);
    fs::write(
        store.task_dir(&t).join("0000000003.json"),
        serde_json::to_vec(&forged).expect("bytes"),
    )
    .expect("written by hand");
    let after = state(&store);
    assert_eq!((after.records, after.broken_at), (3, Some(2)));
    assert_eq!(
        after,
        state(&Store::open(dir.path())),
        "as a fresh walk finds"
    );
    let refused = store.write(&t, &assessment("s3"), None);
    assert!(
        matches!(&refused, Err(StoreError::Refused(r))
            if r.reason == writer::ReasonCode::ChainBroken),
        "{refused:?}"
    );
    let later = state(&store);
    assert_eq!((later.records, later.unverified), (3, 2));
    assert_eq!(later, state(&Store::open(dir.path())));
}

/// A `.lock` that is a symbolic link is refused, naming it, and nothing is created
/// where it points; a record file that is a link is never read through it.
#[test]
fn links_in_a_task_directory_are_never_followed() {
    let (dir, store, t) = task_of_assessments(1);
    let outside = tempfile::tempdir().expect("another directory");
    let target = outside.path().join("planted");
    let lock = store.task_dir(&t).join(LOCK_FILE);
    fs::remove_file(&lock).expect("the lock removed");
    std::os::unix::fs::symlink(&target, &lock).expect("a link");
    let refused = store.write(&t, &assessment("s"), None);
    let message = refused.expect_err("refused").to_string();
    assert!(
        message.contains(&lock.display().to_string()) && message.contains("symbolic link"),
        "{message}"
    );
    assert!(!target.exists(), "nothing created where the link points");

    let record = store.task_dir(&t).join(sequence_file(2));
    fs::write(
        &target,
        fs::read(store.task_dir(&t).join(sequence_file(1))).unwrap(),
    )
    .expect("a file outside");
    std::os::unix::fs::symlink(&target, &record).expect("a link");
    let read = Store::open(dir.path()).records(&t);
    let message = format!("{:?}", read.expect_err("not read through the link"));
    assert!(message.contains("symbolic link"), "{message}");
}

/// `verify` reads each file, hashes and parses it in one go and keeps no bytes
/// (`Store::parsed_files`): it finds exactly what a walk over the files' bytes finds,
/// strays, a record that does not parse and a break included.
#[test]
fn verify_of_files_parsed_as_read_finds_what_a_walk_of_their_bytes_finds() {
    let (dir, store, t) = task_of_assessments(5);
    let task_dir = store.task_dir(&t);
    fs::write(task_dir.join("notes.txt"), b"by hand").expect("a note");
    fs::write(task_dir.join(sequence_file(6)), b"{ not json").expect("a torn record");
    let mut edited = fs::read_to_string(task_dir.join(sequence_file(3))).expect("read");
    assert!(edited.contains("\"s2\""), "{edited}");
    edited = edited.replacen("\"s2\"", "\"s2 edited\"", 1);
    fs::write(task_dir.join(sequence_file(3)), edited).expect("an edit");
    let fresh = Store::open(dir.path());
    let stored = fresh.stored_files(&t).expect("the files");
    let (named, parsed) = fresh.parsed_files(&t).expect("the files parsed");
    let names: Vec<(String, u64)> = stored
        .iter()
        .map(|f| (f.name.clone(), f.sequence))
        .collect();
    assert_eq!(named, names, "the same files in the same order");
    let expected: Vec<chain::Parsed> = stored
        .iter()
        .filter(|f| f.sequence > 0)
        .map(|f| chain::parse_file(&f.bytes))
        .collect();
    assert_eq!(
        parsed, expected,
        "each record file hashed and parsed as its bytes are"
    );
    assert!(parsed[5].1.is_err(), "the torn record does not parse");
    let files: Vec<chain::File> = stored.iter().map(StoredFile::as_chain_file).collect();
    let by_bytes = chain::verify_task_by(&t, String::new(), &files, Some(2), &mut |_, _| {});
    let views = chain::files_named(&named);
    let as_read = chain::verify_parsed(&t, String::new(), &views, parsed, Some(2), &mut |_, _| {});
    assert_eq!(as_read.report, by_bytes.report);
    assert_eq!(as_read.records, by_bytes.records);
    assert_eq!(as_read.digests, by_bytes.digests);
    assert_eq!(
        as_read.report.state.broken_at,
        Some(3),
        "{:?}",
        as_read.report.findings
    );
    assert!(
        as_read
            .report
            .findings
            .iter()
            .any(|f| f.file == "notes.txt"),
        "{:?}",
        as_read.report.findings
    );
    // A record file that cannot be read stops the reading with its name, as before.
    let outside = dir.path().join("outside.json");
    fs::write(&outside, b"{}").expect("a file outside");
    std::os::unix::fs::symlink(&outside, task_dir.join(sequence_file(7))).expect("a link");
    let message = format!("{:?}", fresh.parsed_files(&t).expect_err("not read"));
    assert!(message.contains("symbolic link"), "{message}");
    assert!(message.contains(&sequence_file(7)), "{message}");
}

/// One rule for record file names: exactly ten digits and `.json`. Anything else is a
/// stray that the views and `verify` report alike, and never read as a record.
#[test]
fn a_name_that_is_not_ten_digits_is_a_stray_everywhere() {
    let (dir, store, t) = task_of_assessments(3);
    let task_dir = store.task_dir(&t);
    fs::copy(
        task_dir.join(sequence_file(3)),
        task_dir.join("00000000003.json"),
    )
    .expect("an eleven-digit name");
    fs::write(task_dir.join("notes.txt"), b"by hand").expect("a note");
    let fresh = Store::open(dir.path());
    let state = fresh
        .with_trusted_records(&t, |records, trust| {
            assert_eq!(records.len(), 3);
            trust.state.clone().expect("walked")
        })
        .expect("read");
    assert_eq!(state.broken_at, None);
    assert_eq!(state.strays, ["00000000003.json", "notes.txt"]);
    let files = fresh.stored_files(&t).expect("read");
    let files: Vec<chain::File> = files.iter().map(StoredFile::as_chain_file).collect();
    let report = chain::verify_task(&t, String::new(), &files);
    let found: Vec<(&str, chain::Problem)> = report
        .findings
        .iter()
        .map(|f| (f.file.as_str(), f.problem))
        .collect();
    assert_eq!(
        found,
        [
            ("00000000003.json", chain::Problem::Stray),
            ("notes.txt", chain::Problem::Stray)
        ]
    );
    assert_eq!(report.state.strays, state.strays);
    assert_eq!(report.state.broken_at, None);
    // The warm store sees a stray appear too.
    assert_eq!(view(&store, &t).strays.len(), 2);
    // The writer appends after the records, never after a stray.
    let next = store.write(&t, &assessment("s4"), None).expect("written");
    assert_eq!(next.envelope.sequence, 4);
}

/// A planted record file of the highest sequence is a gap the walk reports, read at once
/// (not ten billion names looked up), and the writer does not append after it.
#[test]
fn a_planted_huge_sequence_is_a_finding_not_a_halt() {
    let (dir, store, t) = task_of_assessments(2);
    let task_dir = store.task_dir(&t);
    let mut planted: serde_json::Value =
        serde_json::from_slice(&fs::read(task_dir.join(sequence_file(2))).unwrap()).expect("json");
    planted["sequence"] = json!(chain::MAX_SEQUENCE);
    planted["id"] = json!("PLANTED");
    fs::write(
        task_dir.join("9999999999.json"),
        serde_json::to_vec(&planted).unwrap(),
    )
    .expect("planted");
    let started = Instant::now();
    let fresh = Store::open(dir.path());
    let state = view(&fresh, &t);
    assert!(started.elapsed() < Duration::from_secs(5), "read at once");
    assert_eq!(
        (state.records, state.broken_at),
        (3, Some(chain::MAX_SEQUENCE))
    );
    // A warm store finds the planted file at its next listing (a view's); a fresh one
    // at its first.
    assert_eq!(view(&store, &t).broken_at, Some(chain::MAX_SEQUENCE));
    for store in [&store, &fresh] {
        let refused = store.write(&t, &assessment("s"), None);
        assert!(
            matches!(&refused, Err(StoreError::Refused(r))
                if r.reason == writer::ReasonCode::ChainBroken
                    && r.message.contains("9999999999.json")),
            "{refused:?}"
        );
    }
    assert_eq!(
        fs::read_dir(&task_dir).unwrap().count(),
        4,
        "nothing written"
    );
}

/// A record written by hand with a correct `prev` that the writer's rules refuse (an
/// advisor the plan did not select) breaks the chain for the writer: it appends nothing
/// after it, in a warm store and a fresh one alike.
#[test]
fn the_writer_never_builds_on_a_record_its_rules_refuse() {
    let (dir, store, t) = task_of_assessments(1);
    let task_dir = store.task_dir(&t);
    let first = store.records(&t).expect("read")[0].id().to_string();
    let prev = chain::digest(&fs::read(task_dir.join(sequence_file(1))).unwrap());
    let forged = json!({"id": "FORGED", "task": "t", "sequence": 2,
        "created_at": "2026-03-01T12:00:00.000Z", "schema": 2, "redacted": [],
        "prev": prev, "kind": "attempt", "assessment": "NOWHERE", "tried": "t",
        "failure_observed": "f"});
    let mut bytes = serde_json::to_vec_pretty(&forged).unwrap();
    bytes.push(b'\n');
    fs::write(task_dir.join(sequence_file(2)), bytes).expect("written by hand");
    // The views walk links only: they find nothing wrong.
    assert_eq!(view(&store, &t).broken_at, None);
    for store in [&store, &Store::open(dir.path())] {
        let attempt = json!({"kind": "attempt", "assessment": first, "tried": "t",
            "failure_observed": "f"});
        let refused = store.write(&t, &attempt, None);
        let Err(StoreError::Refused(refusal)) = refused else {
            panic!("refused: {refused:?}")
        };
        assert_eq!(refusal.reason, writer::ReasonCode::ChainBroken);
        assert!(
            refusal.message.contains("`0000000002.json`")
                && refusal.message.contains("NOWHERE")
                && refusal.message.contains("advisor-consult verify"),
            "{}",
            refusal.message
        );
    }
    assert!(!task_dir.join(sequence_file(3)).exists());
}

/// Wait (bounded) until the file system's clock has moved past `path`'s change time and
/// the change time is older than [`RACY_WINDOW`], so that the cache trusts its identity
/// and a later change gets another change time.
fn settle(path: &Path) {
    let started = Instant::now();
    let ctime = |p: &Path| {
        let stat = fs::metadata(p).expect("stat");
        (stat.ctime(), stat.ctime_nsec())
    };
    let probe = path.with_file_name(".probe");
    loop {
        fs::write(&probe, b"x").expect("a probe file");
        let old = FileId::of(&fs::metadata(path).expect("stat"), SystemTime::now());
        if old.is_some() && ctime(&probe) > ctime(path) {
            break;
        }
        assert!(
            started.elapsed() < RACY_WINDOW * 5,
            "the change time of `{}` never settled",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    fs::remove_file(&probe).expect("probe removed");
}

/// The chain's state as a view of `store` sees it.
fn view(store: &Store, t: &TaskName) -> chain::ChainState {
    store
        .with_trusted_records(t, |_, trust| trust.state.clone())
        .expect("read")
        .expect("walked")
}

/// A record file edited in place after a view cached the task, to the same size and
/// with its modification time put back, is still seen by the next view: its change
/// time moved. Both while the cache still judges the file by its bytes (just written)
/// and once it trusts its identity.
#[test]
fn a_view_sees_a_file_edited_behind_the_cache() {
    for settled in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path());
        let t = task("t");
        for subject in ["first", "second", "third"] {
            store
                .write(&t, &assessment(subject), None)
                .expect("written");
        }
        let path = store.task_dir(&t).join(sequence_file(2));
        if settled {
            settle(&path);
        }
        assert_eq!(view(&store, &t).broken_at, None);
        let cached = store.with_records(&t, |r| r[1].clone()).expect("read");
        let stat = fs::metadata(&path).expect("stat");
        let text = fs::read_to_string(&path).expect("read");
        let edited = text.replace("\"second\"", "\"sEcond\"");
        assert_eq!((edited.len(), edited != text), (text.len(), true));
        fs::write(&path, &edited).expect("edited in place");
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| {
                f.set_times(fs::FileTimes::new().set_modified(stat.modified().expect("mtime")))
            })
            .expect("modification time put back");
        let after = fs::metadata(&path).expect("stat");
        assert_eq!(
            (after.ino(), after.size(), after.mtime(), after.mtime_nsec()),
            (stat.ino(), stat.size(), stat.mtime(), stat.mtime_nsec())
        );
        let seen = view(&store, &t);
        assert!(seen.broken_at.is_some(), "settled: {settled}: {seen:?}");
        assert_eq!(
            seen,
            view(&Store::open(dir.path()), &t),
            "as a fresh read finds"
        );
        let record = store.with_records(&t, |r| r[1].clone()).expect("read");
        assert_ne!(record, cached, "the edited record is the one views see");
    }
}

/// Whatever happens to the files behind a warm cache, a view finds what a fresh store
/// finds: a file removed, one put back under a new inode, a new one past the highest,
/// one appearing in a gap, the whole task gone.
#[test]
fn a_view_of_a_warm_cache_equals_a_fresh_read() {
    let (dir, store, t) = task_of_assessments(4);
    let task_dir = store.task_dir(&t);
    let same = |store: &Store| {
        let warm = store
            .with_trusted_records(&t, |records, trust| (records.to_vec(), trust.state.clone()));
        let fresh = Store::open(dir.path())
            .with_trusted_records(&t, |records, trust| (records.to_vec(), trust.state.clone()));
        assert_eq!(
            format!("{warm:?}"),
            format!("{fresh:?}"),
            "a warm cache answers as a fresh read"
        );
    };
    same(&store);
    let held = fs::read(task_dir.join(sequence_file(2))).expect("record 2");
    fs::remove_file(task_dir.join(sequence_file(2))).expect("removed");
    same(&store);
    // Put back, byte for byte, as a new file.
    fs::write(task_dir.join(sequence_file(2)), &held).expect("put back");
    same(&store);
    store.write(&t, &assessment("s4"), None).expect("written");
    same(&store);
    // Written by another store: found past the highest.
    Store::open(dir.path())
        .write(&t, &assessment("s5"), None)
        .expect("written");
    same(&store);
    // Record 3 moved to 9: a gap where it was, a file past the highest.
    let three = task_dir.join(sequence_file(3));
    fs::rename(&three, task_dir.join(sequence_file(9))).expect("moved");
    same(&store);
    fs::rename(task_dir.join(sequence_file(9)), &three).expect("moved back");
    same(&store);
    fs::remove_dir_all(&task_dir).expect("task removed");
    same(&store);
    assert!(store.records(&t).expect("read").is_empty());
}

#[test]
fn threads_writing_one_task_get_unique_contiguous_sequences() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(Store::open(dir.path()));
    let t = task("t");
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&store);
            let t = t.clone();
            std::thread::spawn(move || {
                for j in 0..5 {
                    store
                        .write(&t, &assessment(&format!("{i}-{j}")), None)
                        .expect("written");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let records = Store::open(dir.path()).records(&t).expect("read");
    let sequences: Vec<u64> = records.iter().map(|r| r.envelope.sequence).collect();
    assert_eq!(sequences, (1..=40).collect::<Vec<u64>>());
}
/// A consultation record of `t` at `sequence`, written as the store would.
fn put_consultation(state: &Path, t: &str, sequence: u64, advisor: &str, status: &str) {
    let failure = (status == "failed").then_some("timeout");
    let record: Record = serde_json::from_value(json!({
        "id": format!("C{t}{sequence}"), "task": t, "sequence": sequence,
        "created_at": "2026-01-01T00:00:00.000Z", "schema": 1, "redacted": [],
        "kind": "consultation", "plan": "P", "advisor": advisor,
        "status": status, "failure": failure,
        "conclusion": (status == "completed").then_some("fine"),
        "finished_at": format!("2026-01-01T00:{:02}:{:02}.000Z", sequence / 60, sequence % 60)}))
    .expect("a consultation");
    let task_dir = state.join(t);
    fs::create_dir_all(&task_dir).expect("task dir");
    fs::write(
        task_dir.join(file_name(&record)),
        serde_json::to_vec(&record).unwrap(),
    )
    .expect("written");
}

/// Budgets get every consultation of the task asked about and, from the other tasks,
/// only the recent ones (a day window never reaches further back), each once, with
/// new records found as availability finds them.
#[test]
fn budget_history_is_the_task_and_the_recent_days() {
    let dir = tempfile::tempdir().expect("temp dir");
    let now = time::OffsetDateTime::now_utc();
    let at = |ago_h: i64| {
        (now - time::Duration::hours(ago_h))
            .format(&time::format_description::well_known::Rfc3339)
            .expect("formats")
    };
    let put = |t: &str, sequence: u64, finished_at: String| {
        let record: Record = serde_json::from_value(json!({
            "id": format!("C{t}{sequence}"), "task": t, "sequence": sequence,
            "created_at": finished_at, "schema": 1, "redacted": [],
            "kind": "consultation", "plan": "P", "advisor": "alpha",
            "status": "completed", "conclusion": "a long answer",
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "finished_at": finished_at}))
        .expect("a consultation");
        let task_dir = dir.path().join(t);
        fs::create_dir_all(&task_dir).expect("task dir");
        fs::write(
            task_dir.join(file_name(&record)),
            serde_json::to_vec(&record).unwrap(),
        )
        .expect("written");
    };
    put("a", 1, at(24 * 30));
    put("a", 2, at(1));
    put("b", 1, at(24 * 5));
    put("b", 2, at(3));
    let store = Store::open(dir.path());
    let ids = |history: Vec<Record>| -> Vec<String> {
        let mut ids: Vec<String> = history.iter().map(|r| r.id().to_string()).collect();
        ids.sort();
        ids
    };
    // A store that caught up for availability before any budget was judged kept
    // nothing for budgets; asked for one, it reads back what it was fed before.
    let warm = Store::open(dir.path());
    assert_eq!(warm.circuit_history().expect("read").len(), 1);
    assert!(lock(&warm.circuit).recent.is_empty());
    for store in [&store, &warm] {
        assert_eq!(
            ids(store.budget_history(&task("a"), now).expect("read")),
            ["Ca1", "Ca2", "Cb2"]
        );
    }
    put("b", 3, at(0));
    for store in [&store, &warm] {
        let history = store.budget_history(&task("b"), now).expect("read");
        assert!(history.iter().all(|r| matches!(&r.body,
            Body::Consultation(c) if c.conclusion.is_none() && c.usage.is_some())));
        assert_eq!(ids(history), ["Ca2", "Cb1", "Cb2", "Cb3"]);
    }
}

/// Once a task was read, availability reads only the record files past the last one
/// it saw, even when the task's records are no longer cached: a file already seen is
/// never opened again (one made unreadable afterwards goes unnoticed).
#[test]
fn circuit_history_reads_only_new_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    for sequence in 1..=50 {
        put_consultation(dir.path(), "a", sequence, "alpha", "failed");
    }
    put_consultation(dir.path(), "b", 1, "beta", "completed");
    let store = Store::with_budget(dir.path(), 0);
    // The whole history of `alpha` is timeouts: the newest trip and the one before it
    // are kept (core::availability::HistoryTail), with `beta`'s answer.
    assert_eq!(store.circuit_history().expect("read").len(), 3);
    // A budget of nothing keeps only the task last used cached.
    assert_eq!(store.cached().1, 1);
    fs::write(dir.path().join("a").join(sequence_file(3)), b"not json").expect("spoil");
    put_consultation(dir.path(), "a", 51, "alpha", "completed");
    put_consultation(dir.path(), "a", 52, "alpha", "failed");
    let history = store.circuit_history().expect("only new files are read");
    let alpha: Vec<u64> = history
        .iter()
        .filter(|r| matches!(&r.body, Body::Consultation(c) if c.advisor == "alpha"))
        .map(|r| r.envelope.sequence)
        .collect();
    assert_eq!(alpha, [51, 52]);
    // A fresh store reads everything, and finds the spoiled file.
    assert!(matches!(
        Store::open(dir.path()).circuit_history(),
        Err(StoreError::Corrupt { .. })
    ));
}

/// A store asked more than once watches its state directory: afterwards only the
/// tasks written into (by anyone) are looked at, a new task among them, and what was
/// written reaches the index.
#[test]
fn a_watched_state_directory_looks_only_at_tasks_written_into() {
    let dir = tempfile::tempdir().expect("temp dir");
    for t in ["a", "b", "c"] {
        put_consultation(dir.path(), t, 1, "alpha", "failed");
    }
    let store = Store::with_budget(dir.path(), 0);
    let names = |tasks: Vec<TaskName>| -> Vec<String> {
        tasks.iter().map(|t| t.as_str().to_string()).collect()
    };
    // The first call, then the one that makes the watcher, look at every task.
    for _ in 0..2 {
        let changed = store.changed_tasks().unwrap();
        assert_eq!(names(changed.clone()), ["a", "b", "c"]);
        store.feed_tasks(&changed).expect("fed");
    }
    assert!(
        store.changed_tasks().unwrap().is_empty(),
        "nothing was written"
    );
    put_consultation(dir.path(), "b", 2, "alpha", "failed");
    put_consultation(dir.path(), "d", 1, "beta", "failed");
    let changed = store.changed_tasks().unwrap();
    assert_eq!(names(changed.clone()), ["b", "d"]);
    store.feed_tasks(&changed).expect("fed");
    put_consultation(dir.path(), "d", 2, "beta", "completed");
    let history = store.circuit_history().expect("read");
    let of = |advisor: &str| -> Vec<(String, u64)> {
        history
            .iter()
            .filter(|r| matches!(&r.body, Body::Consultation(c) if c.advisor == advisor))
            .map(|r| (r.envelope.task.clone(), r.envelope.sequence))
            .collect()
    };
    // The newest outcomes of each advisor, as a fresh store finds them.
    let fresh = Store::open(dir.path()).circuit_history().expect("read");
    assert_eq!(history.len(), fresh.len());
    assert!(of("beta").contains(&("d".to_string(), 2)), "{history:?}");
}

/// The cached records stay under the budget (the task in use aside), the least
/// recently used task goes first, and idle tasks are released.
#[test]
fn caches_are_bounded_and_released() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::with_budget(dir.path(), 4096);
    for name in ["a", "b", "c", "d"] {
        for i in 0..8 {
            store
                .write(&task(name), &assessment(&format!("{name}{i}")), None)
                .expect("written");
        }
    }
    let (bytes, tasks) = store.cached();
    assert!(bytes <= 4096, "{bytes} bytes cached in {tasks} tasks");
    assert!(tasks < 4, "{tasks} tasks cached");
    // `d`, written last, is cached; reading `a` again brings it back whole.
    assert_eq!(store.records(&task("a")).expect("read").len(), 8);
    assert!(store.cached().0 > 0);
    store.release_idle(Duration::ZERO, WorkingSet::NONE);
    assert_eq!(store.cached(), (0, 0));
    assert_eq!(store.records(&task("d")).expect("read again").len(), 8);
}

/// However small its tasks, a store keeps at most its limit of them cached, the most
/// recently used; one dropped is read again whole when asked for.
#[test]
fn cached_tasks_are_bounded_in_number() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::with_limits(dir.path(), usize::MAX, 2);
    for name in ["a", "b", "c", "d"] {
        store
            .write(&task(name), &assessment(name), None)
            .expect("written");
    }
    let cached = |name: &str| lock(&store.tasks).contains(&task(name));
    assert_eq!(store.cached().1, 2);
    assert!(cached("c") && cached("d"));
    assert_eq!(store.records(&task("a")).expect("read again").len(), 1);
    assert!(cached("a") && cached("d"));
    assert_eq!(store.cached().1, 2);
}

#[test]
fn a_write_flushes_its_bytes_before_the_rename_and_its_name_after_unless_in_a_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path());
    store
        .write(&task("a"), &assessment("a"), None)
        .expect("written");
    // The bytes before the rename, the name after it: durable when `write` returns.
    assert_eq!(store.flusher().ran(), 2);
    let first = store
        .write_in_job(&task("a"), &assessment("b"), None)
        .expect("written");
    assert_eq!(
        store.flusher().ran(),
        3,
        "a job's write leaves its name to the next flush"
    );
    store
        .write_in_job(&task("a"), &assessment("c"), None)
        .expect("written");
    // The next record's flush covered the name of the one before.
    assert_eq!(store.flusher().ran(), 4);
    store.settle().expect("settled");
    assert_eq!(store.flusher().ran(), 5);
    store.settle().expect("nothing left to settle");
    assert_eq!(store.flusher().ran(), 5);
    let names: Vec<u64> = store
        .records(&task("a"))
        .expect("read")
        .iter()
        .map(|r| r.envelope.sequence)
        .collect();
    assert_eq!(names, [1, 2, 3]);
    assert_eq!(first.envelope.sequence, 2);
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("a"))
        .expect("listed")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty());
}

/// How many record files the last view of `t` looked at.
fn checked(store: &Store, t: &TaskName) -> usize {
    let slot = store.cache(t);
    let cache = lock(&slot);
    cache.checked
}

/// A warm cache whose task directory is watched looks only at the files the kernel named
/// since the last view, yet a record edited by hand (in place, to the same size, its
/// modification time put back) is still seen by the next view, as a fresh read sees it,
/// and by `verify`, which reads every byte.
#[test]
fn a_watched_view_looks_only_at_the_files_named_and_still_sees_a_hand_edit() {
    let (dir, store, t) = task_of_assessments(40);
    let path = store.task_dir(&t).join(sequence_file(7));
    settle(&path);
    assert_eq!(view(&store, &t).broken_at, None);
    assert_eq!(view(&store, &t).broken_at, None);
    assert_eq!(checked(&store, &t), 0, "nothing changed: no file looked at");
    store.write(&t, &assessment("s40"), None).expect("written");
    assert_eq!(view(&store, &t).records, 41);
    assert!(
        checked(&store, &t) <= 1,
        "only the record written: {}",
        checked(&store, &t)
    );
    let stat = fs::metadata(&path).expect("stat");
    let text = fs::read_to_string(&path).expect("read");
    let edited = text.replace("\"s6\"", "\"S6\"");
    assert_eq!((edited.len(), edited != text), (text.len(), true));
    fs::write(&path, &edited).expect("edited in place");
    File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_times(fs::FileTimes::new().set_modified(stat.modified().expect("t"))))
        .expect("modification time put back");
    let seen = view(&store, &t);
    assert_eq!(
        seen.broken_at,
        Some(7),
        "the edited record is no longer vouched for"
    );
    assert_eq!(
        seen,
        view(&Store::open(dir.path()), &t),
        "as a fresh read finds"
    );
    let subject = store
        .with_records(&t, |r| match &r[6].body {
            Body::Assessment(a) => a.subject.clone(),
            other => panic!("{other:?}"),
        })
        .expect("read");
    assert_eq!(subject, "S6", "the edited record is the one views see");
    let files = store.stored_files(&t).expect("the files");
    let files: Vec<chain::File> = files.iter().map(|f| f.as_chain_file()).collect();
    let report = chain::verify_task(&t, String::new(), &files);
    assert_eq!(report.state.broken_at, Some(7), "{:?}", report.findings);
}

/// A record file replaced by a rename (as an editor saves), removed, or a stray added,
/// behind a watched cache: each is seen by the next view as a fresh read sees it.
#[test]
fn a_watched_view_sees_renames_removals_and_strays() {
    let (dir, store, t) = task_of_assessments(6);
    let task_dir = store.task_dir(&t);
    let same = |store: &Store| {
        let warm = store
            .with_trusted_records(&t, |records, trust| (records.to_vec(), trust.state.clone()));
        let fresh = Store::open(dir.path())
            .with_trusted_records(&t, |records, trust| (records.to_vec(), trust.state.clone()));
        assert_eq!(format!("{warm:?}"), format!("{fresh:?}"));
    };
    same(&store);
    let three = task_dir.join(sequence_file(3));
    let text = fs::read_to_string(&three).expect("read");
    fs::write(task_dir.join("edit.swp"), text.replace("\"s2\"", "\"x2\"")).expect("saved");
    same(&store);
    fs::rename(task_dir.join("edit.swp"), &three).expect("renamed over");
    same(&store);
    fs::remove_file(task_dir.join(sequence_file(5))).expect("removed");
    same(&store);
    fs::write(task_dir.join("notes.txt"), b"x").expect("a stray");
    same(&store);
}

#[test]
fn the_process_stores_share_one_group_commit_per_file_system_and_a_plain_store_its_own() {
    let parent = tempfile::tempdir().expect("tempdir");
    let (state, journal) = (parent.path().join("state"), parent.path().join("jobs"));
    std::fs::create_dir(&journal).expect("the journal's directory");
    // The state directory does not exist when the daemon first opens its store: the
    // group commit is picked at the first flush, once the record's directory is made.
    let stores = Stores::default();
    let store = stores.get(&state);
    store
        .write(&task("a"), &assessment("a"), None)
        .expect("written");
    let shared = durable::shared(&journal);
    assert!(
        std::ptr::eq(store.flusher(), &*shared),
        "the state directory's flushes are the journal's on the same file system"
    );
    let ran = shared.ran();
    durable::shared(&journal).flush().expect("flushed");
    // (Other tests of this process may flush the same file system meanwhile.)
    assert!(
        store.flusher().ran() > ran,
        "the journal's flush is the store's"
    );
    // A store opened on its own (`Store::open`, outside the process's stores) keeps its
    // own.
    let plain = Store::open(&state);
    plain
        .write(&task("b"), &assessment("b"), None)
        .expect("written");
    assert!(!std::ptr::eq(plain.flusher(), &*shared));
}
