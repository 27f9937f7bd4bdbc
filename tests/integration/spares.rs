//! Spare files (docs/DAEMON.md, "Spare files"): `advisord` writes its records and journal
//! entries over files it made ahead (on Linux, one block of zeros already written out)
//! instead of creating a temporary file on the consultation's path, writes a journal
//! entry over the file of an entry it replaced instead of freeing it, sweeps the spares a
//! crashed process left, and removes its own as it stops.

use crate::support::daemon::{self as daemon_helper, catalogue, Advisor, Binary, Place, TASK};
use advisord::store::spare::KEEP;
use advisord_fakes::llm_server::{
    FakeLlmServer, Reply, Script, DEFAULT_ANSWER, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS,
};
use nix::sys::signal::Signal;
use serde_json::json;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The inodes of the files in `dir` whose names begin with `prefix`.
fn inodes(dir: &Path, prefix: &str) -> BTreeSet<u64> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .filter_map(|e| e.metadata().ok().map(|m| m.ino()))
                .collect()
        })
        .unwrap_or_default()
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .ino()
}

/// The spares of this process in `dir` (its files whose names begin with `ours`): those
/// made ahead (zeros only) and those recycled, with the journal entry each holds. A file
/// being written over as it is read (taken meanwhile) is in neither.
fn spares_of(dir: &Path, ours: &str) -> (Vec<PathBuf>, Vec<(PathBuf, serde_json::Value)>) {
    let (mut made, mut recycled) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !entry.file_name().to_string_lossy().starts_with(ours) {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        if bytes.iter().all(|b| *b == 0) {
            made.push(entry.path());
        } else if let Ok(held) = serde_json::from_slice(&bytes) {
            recycled.push((entry.path(), held));
        }
    }
    (made, recycled)
}

/// [`daemon_helper::wait_for`], with room for the spares' maker: it runs only on a core
/// nothing else wants, and on a machine running the whole suite at once both cores may
/// stay busy for a long while.
fn wait_for_maker(what: &str, check: impl Fn() -> bool) {
    daemon_helper::wait_for_within(what, 3 * daemon_helper::BOUND, check);
}

/// One consultation through the socket, followed to its end: the job as it ended.
async fn consult(place: &Place, assessment: &str) -> serde_json::Value {
    let body = json!({"context": place.context(), "assessment": assessment, "timeout_s": 60});
    let reply = daemon_helper::call_json(&place.socket(), "POST", "/api/v1/consultations", &body)
        .await
        .expect(202);
    let job = reply["id"].as_str().expect("a job id").to_string();
    let events = daemon_helper::events(&place.socket(), &job).await;
    let done = events.last().expect("events")["result"].clone();
    assert_eq!(done["state"], "done", "{done}");
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_and_journal_entries_are_written_into_spares_made_ahead_and_removed_at_stop() {
    // Answers a moment after the question, so that each job's plan is in place (and its id
    // journaled: the job `running`) before its outcomes come in, however busy the machine.
    // Instant answers that came in with the plan would end the job at once without that
    // entry, and leave nothing for the journal's pool to take back.
    let late = Reply::ok(DEFAULT_ANSWER, DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS).after(300);
    let server = FakeLlmServer::start(Script::new().default_step(late)).await;
    let http = |id: &str| Advisor::http(id, &server.base_url(), "m");
    let place = Place::new(&catalogue(&[http("a"), http("b")]));
    let records_spares = place.state().join(advisord::store::spare::SPARE_DIR);
    let journal_spares = place.data().join("jobs").join(".spare");
    // A spare left by a process that crashed (no pid is that high) in each directory.
    let gone = format!("{}-1", u32::MAX - 1);
    for dir in [&records_spares, &journal_spares] {
        std::fs::create_dir_all(dir).expect("a spare directory");
        std::fs::write(dir.join(&gone), b"").expect("a gone process's spare");
    }
    let mut daemon = Binary::start(&place, &[]);
    let pid = daemon.child.id();
    let ours = format!("{pid}-");
    let assessment = place
        .assess("spare files", "made ahead", "src/store/spare.rs")
        .await;
    // The first job's writes ask for spares: each pool is made, swept of the gone
    // process's spare, then filled, by a maker that runs only on a core nothing else
    // wants. How far it got before that job ended depends on how busy the machine is, so
    // the job only starts the pools; the one whose files are followed comes after.
    let warm = consult(&place, &assessment).await;
    let made_ahead = |dir: &Path| spares_of(dir, &ours).0.len();
    wait_for_maker("both pools swept and full", || {
        made_ahead(&records_spares) == KEEP && made_ahead(&journal_spares) == KEEP
    });
    for dir in [&records_spares, &journal_spares] {
        assert!(!dir.join(&gone).exists(), "a gone process's spare is swept");
    }
    // With the pools swept, the end of a job gives the file of its running entry back to
    // the journal's pool (after its `done`, hence the wait), and the maker makes again
    // what the job took.
    let first = consult(&place, &assessment).await;
    let running_of = |entry: &serde_json::Value, job: &serde_json::Value| {
        entry["job"]["id"] == job["id"] && entry["job"]["state"] == "running"
    };
    wait_for_maker(
        "both pools full again, with the running entry given back",
        || {
            let (made, recycled) = spares_of(&journal_spares, &ours);
            made_ahead(&records_spares) == KEEP
                && made.len() == KEEP
                && recycled.iter().any(|(_, entry)| running_of(entry, &first))
        },
    );
    // Each spare made ahead holds a block of zeros (on Linux), allocated on the disk.
    let expected = if cfg!(target_os = "linux") {
        advisord::store::spare::WRITTEN_OUT
    } else {
        0
    };
    for dir in [&records_spares, &journal_spares] {
        for spare in spares_of(dir, &ours).0 {
            let metadata = std::fs::metadata(&spare).expect("a spare");
            assert_eq!(metadata.len(), expected as u64, "{}", spare.display());
            assert_eq!(metadata.blocks() > 0, expected > 0, "{}", spare.display());
        }
    }
    // A recycled file holds the running entry it was: the first job's, and the warm-up
    // job's when its end came after the sweep (and no save took it back since). Nothing
    // else is in either pool (the daemon is idle: no file changes now).
    let (made, recycled) = spares_of(&journal_spares, &ours);
    assert_eq!(
        inodes(&journal_spares, &ours).len(),
        made.len() + recycled.len(),
        "every file of the journal's pool is a spare made ahead or a recycled entry"
    );
    assert_eq!(
        inodes(&records_spares, &ours).len(),
        KEEP,
        "the records' pool holds only spares made ahead: records are never recycled"
    );
    for (path, entry) in &recycled {
        assert!(
            running_of(entry, &first) || running_of(entry, &warm),
            "{} holds {entry}",
            path.display()
        );
    }
    let recycled: BTreeSet<u64> = recycled.iter().map(|(path, _)| inode(path)).collect();
    let (records_ready, journal_ready) = (
        inodes(&records_spares, &ours),
        inodes(&journal_spares, &ours),
    );

    let job = consult(&place, &assessment).await;
    // The plan and both consultations of this job are files that were spares.
    let task = place.state().join(TASK);
    let mut ids = BTreeSet::new();
    ids.insert(job["plan"].as_str().expect("a plan").to_string());
    for consultation in job["consultations"].as_array().expect("consultations") {
        ids.insert(
            consultation["record"]
                .as_str()
                .expect("recorded")
                .to_string(),
        );
    }
    assert_eq!(ids.len(), 3, "{job}");
    let mut checked = 0;
    for entry in std::fs::read_dir(&task).expect("the task").flatten() {
        if !entry.file_name().to_string_lossy().ends_with(".json") {
            continue; // the task's lock
        }
        let bytes = std::fs::read(entry.path())
            .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
        assert!(
            !bytes.contains(&0),
            "{} keeps zeros of the spare it was written over",
            entry.path().display()
        );
        let record: serde_json::Value = serde_json::from_slice(&bytes).expect("a record is JSON");
        if record["id"].as_str().is_some_and(|id| ids.contains(id)) {
            assert!(
                records_ready.contains(&inode(&entry.path())),
                "{} was not one of the spares made ahead",
                entry.path().display()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3);
    // The job's accepted entry (kept under its durable name) was written over the first
    // job's running entry, and holds its own bytes only.
    let id = job["id"].as_str().expect("a job id");
    let durable = place.data().join("jobs").join(format!("{id}.json.durable"));
    assert!(journal_ready.contains(&inode(&durable)));
    assert!(
        recycled.contains(&inode(&durable)),
        "a recycled file is taken before one made ahead"
    );
    let accepted: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&durable).expect("readable"))
            .expect("exactly one entry, nothing of the old one after it");
    assert_eq!(accepted["job"]["id"], id);
    assert_eq!(accepted["job"]["state"], "queued");
    // No temporary file was made beside the records (nor left there).
    let strays: Vec<String> = std::fs::read_dir(&task)
        .expect("the task")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");

    // Stopped, the daemon leaves none of its spares behind.
    assert!(daemon.signal_and_wait(Signal::SIGTERM).success());
    for dir in [&records_spares, &journal_spares] {
        assert!(inodes(dir, &ours).is_empty(), "{}", dir.display());
    }
    assert_eq!(place.consulted(TASK), ["a", "b", "a", "b", "a", "b"]);
}

/// Bytes this thread has caused to be read from a storage device so far.
fn read_from_disk() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io")
        .expect("/proc/thread-self/io: the kernel's per-task I/O accounting is needed");
    io.lines()
        .find_map(|line| line.strip_prefix("read_bytes: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("read_bytes in /proc/thread-self/io")
}

/// A file as a spare is made (one block of zeros on the disk), its cached pages then
/// dropped, as the kernel does when it reclaims memory while the spare waits in its pool;
/// opened at its start, as a spare taken is.
fn spare_left_uncached(path: &Path) -> std::fs::File {
    use std::io::{Seek, Write};
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap();
    file.write_all(&[0; advisord::store::spare::WRITTEN_OUT])
        .unwrap();
    file.sync_all().unwrap();
    nix::fcntl::posix_fadvise(
        std::os::fd::AsRawFd::as_raw_fd(&file),
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )
    .unwrap();
    file.rewind().unwrap();
    file
}

/// A record or journal entry written over a spare whose pages the kernel dropped reads
/// nothing back from the disk: the write covers the spare's whole block, where a write of
/// the record's bytes alone (shorter than a block) needs the rest of the block read first,
/// one disk read on the job's path. Checked on the disk holding the build (the
/// temporary directory may be in memory, where nothing is ever read back).
#[test]
fn a_write_over_a_spare_whose_pages_were_dropped_reads_nothing_back_from_the_disk() {
    use std::io::{Seek, Write};
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let record = br#"{"id":"01J0000000000000000000000","kind":"plan"}"#;

    // What the kernel does for a write of part of a block it no longer holds in memory:
    // it reads the block first. Seen here, or this test could not tell the difference.
    let mut partial = spare_left_uncached(&dir.path().join("partial"));
    let before = read_from_disk();
    partial.write_all(record).unwrap();
    let read_for_partial = read_from_disk() - before;
    assert!(
        read_for_partial > 0,
        "a write of part of a dropped block read nothing on {}: this file system does not \
         show the read this test is about (is the build directory in memory?)",
        dir.path().display()
    );

    for (name, bytes) in [
        ("short", record.to_vec()),
        ("one block", vec![b'a'; advisord::store::spare::WRITTEN_OUT]),
        (
            "more than a block",
            vec![b'b'; advisord::store::spare::WRITTEN_OUT + 100],
        ),
    ] {
        let path = dir.path().join(name);
        let mut spare = spare_left_uncached(&path);
        let before = read_from_disk();
        advisord::store::spare::write_over(&mut spare, &bytes).unwrap();
        assert_eq!(
            read_from_disk() - before,
            0,
            "{name}: the write over the spare read its block back"
        );
        drop(spare);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{name}: holds its bytes only"
        );
    }

    // A recycled journal entry longer than the one written over it keeps nothing of it.
    let path = dir.path().join("recycled");
    let mut recycled = spare_left_uncached(&path);
    recycled
        .write_all(&vec![b'x'; 3 * advisord::store::spare::WRITTEN_OUT])
        .unwrap();
    recycled.rewind().unwrap();
    advisord::store::spare::write_over(&mut recycled, record).unwrap();
    drop(recycled);
    assert_eq!(std::fs::read(&path).unwrap(), record);
}
