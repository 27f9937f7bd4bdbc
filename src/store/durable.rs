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

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// Flushes run by this process, every [`Flusher`] counted (for the benchmarks and tests).
static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// How many flushes this process has run.
pub fn flushes() -> u64 {
    FLUSHES.load(Ordering::Relaxed)
}

/// This process's group commit through `dir`, made on first use: every caller flushing
/// through the same directory shares its flushes (the daemon's journal, whose entries are
/// written from many jobs at once).
pub fn shared(dir: &Path) -> std::sync::Arc<Flusher> {
    static SHARED: Mutex<Vec<std::sync::Arc<Flusher>>> = Mutex::new(Vec::new());
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = shared.iter().find(|f| f.dir == dir) {
        return found.clone();
    }
    let made = std::sync::Arc::new(Flusher::new(dir));
    shared.push(made.clone());
    made
}

/// The group commit of one file system, reached through a directory on it.
pub struct Flusher {
    dir: PathBuf,
    /// Flushes this one ran.
    ran: AtomicU64,
    state: Mutex<State>,
    ended: Condvar,
}

#[derive(Default)]
struct State {
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
        Flusher {
            dir: dir.to_path_buf(),
            ran: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            ended: Condvar::new(),
        }
    }

    /// How many flushes this one ran.
    pub fn ran(&self) -> u64 {
        self.ran.load(Ordering::Relaxed)
    }

    /// Return once everything written to the file system before this call is durable.
    pub fn flush(&self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // A flush running now may have started before the caller's write: only the
        // next one is sure to cover it.
        let needed = state.started + 1;
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
                state.started += 1;
                let number = state.started;
                if state.handle.is_none() {
                    match File::open(&self.dir) {
                        Ok(dir) => state.handle = Some(dir),
                        Err(e) => {
                            state.running = false;
                            state.ended = number;
                            self.ended.notify_all();
                            return Err(e);
                        }
                    }
                }
                let fd = state.handle.as_ref().map(AsRawFd::as_raw_fd);
                drop(state);
                FLUSHES.fetch_add(1, Ordering::Relaxed);
                self.ran.fetch_add(1, Ordering::Relaxed);
                let result = fd.map_or(Ok(()), |fd| {
                    nix::unistd::syncfs(fd).map_err(io::Error::from)
                });
                state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                state.running = false;
                state.ended = number;
                if let Err(e) = &result {
                    state.failed = Some((number, e.kind(), e.to_string()));
                }
                self.ended.notify_all();
                return result;
            }
            state = self.ended.wait(state).unwrap_or_else(|p| p.into_inner());
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
    fn a_directory_that_cannot_be_opened_is_an_error_for_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let flusher = Flusher::new(&dir.path().join("missing"));
        let error = flusher.flush().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }
}
