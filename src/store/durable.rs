//! Group commit: one flush of a file system (`syncfs`) makes durable everything written
//! to it before the flush started, for every caller waiting at once.
//!
//! A caller that needs what it wrote to be durable asks for a flush that *starts after*
//! its write. If none is running it runs one; if one is running (it may have started
//! before the write), the caller waits for it to end and then shares the next one with
//! everybody who came in the meantime. Under load, sixty-four jobs' writes cost a
//! handful of flushes instead of one each; alone, a write costs one.
//!
//! Why a flush of the file system rather than an `fsync` per file and per directory: a
//! record is a new file renamed into place, and its directory's entry must be durable
//! before the next record that links to it is. `syncfs` makes the new file's bytes and
//! every rename made before it durable in one call, so a record costs one flush (its
//! bytes, and the previous record's name, see `docs/DAEMON.md`, "What is flushed when").
//!
//! Under a stream of writers a flush waits a moment before it starts, so that it serves
//! more of them ([`gather_window`]): each flush writes out again the blocks every write
//! shares (the inode table, the bitmaps, the group's descriptor, the directories), so
//! fewer, larger flushes write fewer blocks. A caller alone is never held.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest a flush waits for more callers before it starts.
pub const GATHER_AT_MOST: Duration = Duration::from_millis(1);

/// How recent the last flush served by several callers must be for the next one to wait
/// for more: beyond it, the writers it served are not a stream any more.
pub const GATHER_STREAM: Duration = Duration::from_millis(10);

/// How long a flush about to start waits for more callers, given the flush before it:
/// how many callers it served, how long it took, and how long ago it ended (`stream`:
/// the most for writers to still count as a stream, [`GATHER_STREAM`]).
///
/// Only while writers come as a stream (the last flush served several, and ended a
/// moment ago) does it wait, and then for as long as that flush took (at most
/// [`GATHER_AT_MOST`]): the callers that arrive meanwhile would otherwise wait that long
/// for the next flush anyway, and share this one instead. A caller alone (one
/// consultation, one `record`) never waits, and on a file system whose flush is nearly
/// free (memory) the wait is nearly nothing.
pub fn gather_window(
    last_callers: u64,
    last_took: Duration,
    since_last: Duration,
    stream: Duration,
) -> Duration {
    if last_callers < 2 || since_last > stream {
        return Duration::ZERO;
    }
    last_took.min(GATHER_AT_MOST)
}

/// Flushes run by this process, every [`Flusher`] counted (for the benchmarks and tests).
static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// How many flushes this process has run.
pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}

/// Flushes run by this process that waited for more callers first ([`gather_window`]).
static GATHERED: AtomicU64 = AtomicU64::new(0);

/// How many flushes of this process waited for more callers before they started.
pub fn gathered() -> u64 {
    GATHERED.load(Ordering::Relaxed)
}

/// This process's group commit of the file system holding `dir`, made on first use:
/// every caller flushing anything on that file system shares its flushes (the daemon's
/// journal and every state directory it writes, when they are on one disk: a job
/// accepted and another job's records then wait for the same `syncfs` instead of two
/// running side by side, each writing out the other's files). A directory that cannot be
/// opened now gets a group commit of its own, opened at its first flush, as
/// [`Flusher::new`] does.
pub fn shared(dir: &Path) -> std::sync::Arc<Flusher> {
    use std::os::unix::fs::MetadataExt;
    /// A shared group commit: the device of its file system, each directory already
    /// found on it (asked again, it costs no system call), and the group commit.
    type Shared = (u64, Vec<PathBuf>, std::sync::Arc<Flusher>);
    static SHARED: Mutex<Vec<Shared>> = Mutex::new(Vec::new());
    let known = |shared: &[Shared]| {
        shared
            .iter()
            .find(|(_, dirs, _)| dirs.iter().any(|d| d == dir))
            .map(|(_, _, flusher)| flusher.clone())
    };
    if let Some(found) = known(&SHARED.lock().unwrap_or_else(|p| p.into_inner())) {
        return found;
    }
    // The handle is opened here, not at the first flush: a flush through a directory
    // removed since (one state directory among several on the disk) must still reach the
    // file system the others share.
    let Ok(handle) = File::open(dir) else {
        return std::sync::Arc::new(Flusher::new(dir));
    };
    let Ok(device) = handle.metadata().map(|m| m.dev()) else {
        return std::sync::Arc::new(Flusher::new(dir));
    };
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, dirs, found)) = shared.iter_mut().find(|(d, _, _)| *d == device) {
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_path_buf());
        }
        return found.clone();
    }
    let made = std::sync::Arc::new(Flusher::with_handle(dir, Some(handle)));
    shared.push((device, vec![dir.to_path_buf()], made.clone()));
    made
}

/// The group commit of one file system, reached through a directory on it.
pub struct Flusher {
    dir: PathBuf,
    /// Flushes this one ran.
    ran: AtomicU64,
    /// Flushes this one ran that waited for more callers first.
    gathered: AtomicU64,
    state: Mutex<State>,
    /// Where callers wait for the flush that covers their write: those waiting for flush
    /// number `n` on `ended[n % 2]`. When a flush ends, only its own callers are woken,
    /// and one caller of the next (to start it): a flush's end never wakes the callers of
    /// the next one only for them to sleep again, which under a stream of writers would
    /// wake every one of them twice.
    ended: [Condvar; 2],
    /// How many times a caller woke from waiting (counted for the tests only).
    #[cfg(test)]
    woken: AtomicU64,
    /// What a flush runs: `syncfs` on the handle (another function in tests).
    run: fn(std::os::fd::RawFd) -> nix::Result<()>,
    /// How recent a flush must be for its callers to count as a stream ([`gather_window`]).
    stream: Duration,
}

#[derive(Default)]
struct State {
    /// Callers waiting for the next flush to start (the one to come, not one running).
    asking: u64,
    /// The last flush that ended: how many callers it served, how long it took, and
    /// when it ended.
    last: Option<(u64, Duration, Instant)>,
    /// The directory, opened once (the flush's handle on the file system).
    handle: Option<File>,
    /// How many flushes started; the one running, if any, is number `started`.
    started: u64,
    /// The number of the last flush that ended.
    ended: u64,
    running: bool,
    /// The newest flush that failed, and why.
    failed: Option<(u64, io::ErrorKind, String)>,
}

impl Flusher {
    /// The group commit of the file system holding `dir` (opened on the first flush).
    pub fn new(dir: &Path) -> Flusher {
        Flusher::with_handle(dir, None)
    }

    /// The group commit through `dir`, already opened as `handle` when given.
    fn with_handle(dir: &Path, handle: Option<File>) -> Flusher {
        Flusher {
            dir: dir.to_path_buf(),
            ran: AtomicU64::new(0),
            gathered: AtomicU64::new(0),
            state: Mutex::new(State {
                handle,
                ..State::default()
            }),
            ended: [Condvar::new(), Condvar::new()],
            #[cfg(test)]
            woken: AtomicU64::new(0),
            run: nix::unistd::syncfs,
            stream: GATHER_STREAM,
        }
    }

    /// How many flushes this one ran.
    pub fn ran(&self) -> u64 {
        self.ran.load(Ordering::Relaxed)
    }

    /// How many of them waited for more callers before they started ([`gather_window`]).
    pub fn gathered(&self) -> u64 {
        self.gathered.load(Ordering::Relaxed)
    }

    /// Return once everything written to the file system before this call is durable.
    pub fn flush(&self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // A flush running now may have started before the caller's write: only the
        // next one is sure to cover it.
        let needed = state.started + 1;
        state.asking += 1;
        loop {
            if state.ended >= needed {
                return match &state.failed {
                    Some((number, kind, message)) if *number >= needed => {
                        Err(io::Error::new(*kind, message.clone()))
                    }
                    _ => Ok(()),
                };
            }
            if !state.running {
                state.running = true;
                // Writers coming as a stream: wait a moment, so that those about to ask
                // share this flush (they see it running and wait for its number).
                let window = state.last.map_or(Duration::ZERO, |(callers, took, ended)| {
                    gather_window(callers, took, ended.elapsed(), self.stream)
                });
                if !window.is_zero() {
                    GATHERED.fetch_add(1, Ordering::Relaxed);
                    self.gathered.fetch_add(1, Ordering::Relaxed);
                    drop(state);
                    std::thread::sleep(window);
                    state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                }
                state.started += 1;
                let number = state.started;
                let callers = std::mem::take(&mut state.asking);
                if state.handle.is_none() {
                    match File::open(&self.dir) {
                        Ok(dir) => state.handle = Some(dir),
                        Err(e) => {
                            state.running = false;
                            state.ended = number;
                            self.wake(&state, number);
                            return Err(e);
                        }
                    }
                }
                let fd = state.handle.as_ref().map(AsRawFd::as_raw_fd);
                drop(state);
                FLUSHES.fetch_add(1, Ordering::Relaxed);
                self.ran.fetch_add(1, Ordering::Relaxed);
                let began = Instant::now();
                let result = fd.map_or(Ok(()), |fd| (self.run)(fd).map_err(io::Error::from));
                let done = Instant::now();
                state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                state.running = false;
                state.ended = number;
                state.last = Some((callers, done - began, done));
                if let Err(e) = &result {
                    state.failed = Some((number, e.kind(), e.to_string()));
                }
                self.wake(&state, number);
                return result;
            }
            state = self.ended[(needed % 2) as usize]
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
            #[cfg(test)]
            self.woken.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Flush `number` has ended (`state` updated, its lock held): wake the callers it
    /// served, and one of those asking for the next flush, if any, to start it.
    fn wake(&self, state: &State, number: u64) {
        self.ended[(number % 2) as usize].notify_all();
        if state.asking > 0 {
            self.ended[((number + 1) % 2) as usize].notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_caller_runs_one_flush_and_concurrent_callers_share_them() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Arc::new(Flusher::new(dir.path()));
        let before = flushes();
        flusher.flush().unwrap();
        assert!(flushes() > before);
        let before = flushes();
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let flusher = flusher.clone();
                std::thread::spawn(move || flusher.flush().unwrap())
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // Every caller returned after a flush that started after it asked; concurrent
        // callers shared them (other tests of this process may flush too, hence no
        // exact count), and a caller never waits for more than two.
        let ran = flushes() - before;
        assert!((1..=16 + 16).contains(&ran), "{ran} flushes");
    }

    #[test]
    fn a_flush_waits_for_more_callers_only_while_writers_come_as_a_stream() {
        let took = Duration::from_micros(600);
        let now = Duration::from_micros(200);
        // One caller last time (a consultation alone, a `record`): no wait.
        assert_eq!(gather_window(1, took, now, GATHER_STREAM), Duration::ZERO);
        assert_eq!(gather_window(0, took, now, GATHER_STREAM), Duration::ZERO);
        // Several, a moment ago: as long as that flush took...
        assert_eq!(gather_window(2, took, now, GATHER_STREAM), took);
        // ...and never longer than the bound, however slow the disk.
        assert_eq!(
            gather_window(9, Duration::from_millis(40), now, GATHER_STREAM),
            GATHER_AT_MOST
        );
        // Several, but long ago: the stream has ended.
        let later = GATHER_STREAM + Duration::from_millis(1);
        assert_eq!(gather_window(9, took, later, GATHER_STREAM), Duration::ZERO);
    }

    #[test]
    fn a_caller_alone_is_never_held() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(dir.path());
        for _ in 0..5 {
            flusher.flush().unwrap();
        }
        assert_eq!(flusher.ran(), 5);
        assert_eq!(flusher.gathered(), 0, "each flush had one caller");
    }

    /// A gate flushes can be held at: how many flushes may end (the first ones to begin),
    /// and how many have begun. Each test that holds flushes has its own, so that tests
    /// run apart.
    type Gate = (Mutex<(u64, u64)>, Condvar);

    /// Hold a flush at `gate` until it may end, counting it.
    fn hold(gate: &Gate) -> nix::Result<()> {
        let (state, changed) = gate;
        let mut state = state.lock().unwrap();
        state.1 += 1;
        let number = state.1;
        changed.notify_all();
        while number > state.0 {
            state = changed.wait(state).unwrap();
        }
        Ok(())
    }

    /// Let the first `flushes` held at `gate` end.
    fn allow(gate: &Gate, flushes: u64) {
        gate.0.lock().unwrap().0 = flushes;
        gate.1.notify_all();
    }

    /// Wait (bounded) until `done` holds of `gate`'s state.
    fn until(gate: &Gate, done: impl Fn(&(u64, u64)) -> bool) {
        let (state, changed) = gate;
        let state = state.lock().unwrap();
        let (state, timeout) = changed
            .wait_timeout_while(state, Duration::from_secs(10), |s| !done(s))
            .unwrap();
        assert!(!timeout.timed_out(), "gate state {:?}", *state);
    }

    /// A flush that holds until [`GATE`] opens.
    fn held(_: std::os::fd::RawFd) -> nix::Result<()> {
        hold(&GATE)
    }
    static GATE: Gate = (Mutex::new((0, 0)), Condvar::new());

    /// A first flush of `flusher` started and held at `gate`, then `callers` more callers
    /// waiting for the next one (counted under the lock they wait with, so all of them
    /// are waiting): the first caller's thread and theirs.
    fn callers_behind_one_flush(
        flusher: &Arc<Flusher>,
        gate: &Gate,
        callers: u64,
    ) -> (
        std::thread::JoinHandle<()>,
        Vec<std::thread::JoinHandle<()>>,
    ) {
        let flush = || {
            let f = flusher.clone();
            std::thread::spawn(move || f.flush().unwrap())
        };
        let first = flush();
        until(gate, |s| s.1 == 1);
        let later = (0..callers).map(|_| flush()).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while flusher.state.lock().unwrap().asking < callers {
            assert!(Instant::now() < deadline, "the callers never asked");
            std::thread::yield_now();
        }
        (first, later)
    }

    #[test]
    fn after_a_flush_shared_by_several_the_next_one_waits_for_more() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Arc::new(Flusher {
            run: held,
            // Never stale within this test, however slow the machine running it.
            stream: Duration::from_secs(600),
            ..Flusher::new(dir.path())
        });
        // The first flush starts and holds; two callers come while it runs: they share
        // the second.
        let (first, later) = callers_behind_one_flush(&flusher, &GATE, 2);
        allow(&GATE, u64::MAX);
        for thread in later.into_iter().chain([first]) {
            thread.join().unwrap();
        }
        assert_eq!(flusher.ran(), 2, "the two later callers shared one flush");
        assert_eq!(
            flusher.gathered(),
            0,
            "the first two followed single callers"
        );
        // The last flush served two: the next one waits for more before it starts.
        flusher.flush().unwrap();
        assert_eq!((flusher.ran(), flusher.gathered()), (3, 1));
        // That one served one caller: the one after it does not wait.
        flusher.flush().unwrap();
        assert_eq!((flusher.ran(), flusher.gathered()), (4, 1));
    }

    #[test]
    fn a_flush_that_ends_wakes_its_own_callers_and_one_of_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Arc::new(Flusher {
            run: held_second,
            ..Flusher::new(dir.path())
        });
        // The first flush runs and holds; three callers come while it runs and wait for
        // the second.
        let (first, later) = callers_behind_one_flush(&flusher, &SECOND, 3);
        // The first flush ends: one of the three wakes and starts the second, which holds.
        allow(&SECOND, 1);
        first.join().unwrap();
        until(&SECOND, |s| s.1 == 2);
        // The other two sleep on while it runs. (Had the first flush's end woken all
        // three, those two would wake within this window, find the second flush running,
        // and wait again.)
        let window = Instant::now() + Duration::from_millis(200);
        while Instant::now() < window {
            assert_eq!(
                flusher.woken.load(Ordering::Relaxed),
                1,
                "woken for nothing"
            );
            std::thread::yield_now();
        }
        // The second flush ends and wakes the two it served.
        allow(&SECOND, 2);
        for thread in later {
            thread.join().unwrap();
        }
        assert_eq!(flusher.ran(), 2, "the three later callers shared one flush");
        assert_eq!(flusher.woken.load(Ordering::Relaxed), 3);
    }

    /// A flush that holds until [`SECOND`] opens.
    fn held_second(_: std::os::fd::RawFd) -> nix::Result<()> {
        hold(&SECOND)
    }
    static SECOND: Gate = (Mutex::new((0, 0)), Condvar::new());

    #[test]
    fn directories_on_one_file_system_share_one_group_commit() {
        let parent = tempfile::tempdir().unwrap();
        let (a, b) = (parent.path().join("a"), parent.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let first = shared(&a);
        assert!(
            Arc::ptr_eq(&first, &shared(&b)),
            "one file system, one group commit"
        );
        // The handle was opened when shared: removing that directory leaves the flushes
        // of the others on the file system working.
        std::fs::remove_dir(&a).unwrap();
        let ran = first.ran();
        shared(&b).flush().unwrap();
        // (Other tests of this process may flush the same file system meanwhile.)
        assert!(first.ran() > ran);
        // A directory missing now is flushed on its own, and says so when it still is.
        let missing = shared(&parent.path().join("missing"));
        assert!(!Arc::ptr_eq(&first, &missing));
        assert_eq!(missing.flush().unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_directory_that_cannot_be_opened_is_an_error_for_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(&dir.path().join("missing"));
        let error = flusher.flush().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }
}
