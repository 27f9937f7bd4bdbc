//! Spare files: files made ahead of need, each in a directory kept for them, so that a
//! durable write on the daemon's hot path opens one and writes over it instead of creating
//! its temporary file.
//!
//! On ext4 creating a file (allocating its inode, adding its name to the directory) costs
//! 100 to 250 µs; opening an empty file that exists and writing it costs about 10 µs, and
//! renaming it into place from a sibling directory costs what a rename in the same
//! directory does. A consultation's record writes and journal saves each create one
//! temporary file, so the daemon makes those files ahead, on a thread of its own, while it
//! waits for the next job, and takes one per write. With none ready (a burst ran them
//! out, the directory could not be made) the write creates its file as before.
//!
//! On Linux each spare is made holding one block of zeros already written out to the disk
//! ([`WRITTEN_OUT`]), so a write over it allocates nothing: the flush that makes the write
//! durable rewrites a block in place. A new file's bytes are given their block by that
//! flush, and on ext4 (mounted `dioread_nolock`, the default) each such block is first
//! marked unwritten, then converted by a kernel thread once its write ends, and that
//! conversion's metadata is written after the disk's cache flush, one more round trip to
//! the disk inside the flush. A taker writes from the spare's start and sets its length to
//! what it wrote.
//!
//! Nothing about durability changes: a spare is a file of zeros that is never a record. It
//! holds a record's bytes only once taken, is flushed before its rename like any temporary
//! file, and a crash at any point leaves at worst a spare with or without bytes, which the
//! next process to keep spares in that directory removes (see [`Spares::take`]).
//!
//! A file that is no longer needed can be given back to a pool instead of removed
//! ([`recycle`]): the daemon's journal replaces each job's entry three times and removes
//! it once the job is pruned. On ext4 mounted without a journal, removing a file whose
//! bytes reached the disk frees its block with a discard the removal waits for (about
//! 150 µs a removal on this project's test machine, against 12 µs for a file whose bytes
//! have not reached it), and every inode freed in the last minute (the last six minutes
//! while the block of the inode table holding it is dirty) is stepped over, one lookup
//! each, by every file created after it in the same group. A burst that freed an entry per job
//! made each later creation slower. A recycled file keeps its inode and its block; the
//! next journal save takes it ([`take_reusable`]), writes over its bytes from the start
//! and cuts it to the new length, so nothing is freed and nothing allocated.
//!
//! Only `advisord` keeps spares ([`enable`]): a short-lived process (`--no-daemon`) would
//! create more files than it writes. Spares are named `<pid>-<n>`: a process removes the
//! spares of processes that are gone (and any bearing its own pid, left by an earlier
//! process that had it) before it makes its own, and removes its own when it stops.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How many spares each directory keeps ready: a consultation takes four (its job's
/// journal entry, its plan, two consultations), and the next jobs find theirs made
/// while the daemon waited for them.
pub const KEEP: usize = 8;

/// How many recycled files a directory's pool keeps at most; one given back beyond that is
/// removed by its giver. A pool of the journal holds what the pruner's round gives back
/// for 512 jobs (two files each: the entry and its durable name), so a daemon under steady
/// load frees no journal file at all: the next jobs' saves take them back. Freeing them
/// instead would, on ext4 without a journal, slow every file created in the next minutes
/// (the allocator steps over each inode freed within them). At most 1,024 files of one
/// block each (4 MiB) and their paths (about 100 KiB) are kept.
pub const RECYCLED_KEEP: usize = 1024;

/// The spares' directory in a state directory: not a valid task name (`+` is outside
/// the task alphabet), like the index's, so it is never taken for a task. Renaming a
/// spare from it into a task's directory changes the task's directory once, as renaming
/// a temporary file made there did, and making spares changes neither the task's nor the
/// state directory's times.
pub const SPARE_DIR: &str = "+spare";

/// Spares are opened and made without following a symbolic link.
const NOFOLLOW: i32 = nix::fcntl::OFlag::O_NOFOLLOW.bits();

/// How long a pool is left alone after a write found it empty: writes are coming faster
/// than one thread makes files (a burst), so they create their own as before and the
/// maker stays out of their way until they slow down.
pub const BURST_PAUSE: Duration = Duration::from_millis(100);

/// How many bytes of zeros a spare holds as it is made (one block of most file systems),
/// written out to the disk ([`written_out`], Linux): whoever takes it writes from its
/// start and sets its length to what it wrote.
pub const WRITTEN_OUT: usize = 4096;

/// How many times a write tries the pools' lock, letting others run between tries,
/// before it does without a spare ([`Shared::lock_for_writer`]).
const WRITER_TRIES: usize = 4;

/// How long [`Spares::release`] waits at most for the maker to end the creation it is in
/// (one small file made and written out: about a millisecond at most on a working disk).
pub const RELEASE_WAIT: Duration = Duration::from_secs(1);

static SPARES: OnceLock<Spares> = OnceLock::new();

/// How many writes of this process are between taking their task's lock and letting it
/// go, and consultations being answered at once ([`quiet`]): while any is, the maker
/// creates no spare.
static WRITING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The makers of this process, woken when the last write under way ends ([`Quiet`]).
static MAKERS: Mutex<Vec<std::sync::Weak<Shared>>> = Mutex::new(Vec::new());

/// Held by a write from taking its task's lock to letting it go: no spare is created
/// meanwhile. Creating a file takes its directory's lock and dirties an inode table, a
/// bitmap and a directory block: made while a job's records are staged, a spare would hold
/// up their renames out of the same directory and add its blocks to the flush the job
/// waits for (and on ext4 without a journal a creation can take milliseconds, stepping over
/// inodes freed shortly before). So the maker fills its pools once the writes have ended.
/// The daemon also holds it while it answers a consultation at once, from the request to
/// its last event (`daemon::jobs::answering`): the maker then fills its pools while the
/// daemon waits for the next job.
pub fn quiet() -> Quiet {
    WRITING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Quiet(())
}

/// See [`quiet`].
pub struct Quiet(());

impl Drop for Quiet {
    fn drop(&mut self) {
        if WRITING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            // Woken without the pools' lock, which a write never waits for: a maker that
            // looked just before and has not yet gone to sleep misses this, and is woken
            // by the next take, or the end of the next write that takes one, instead (a
            // pool keeps enough for the next job meanwhile).
            let mut makers = MAKERS.lock().unwrap_or_else(|p| p.into_inner());
            makers.retain(|maker| match maker.upgrade() {
                Some(shared) => {
                    if shared
                        .awaits_writes
                        .load(std::sync::atomic::Ordering::SeqCst)
                    {
                        shared.wake.notify_one();
                    }
                    true
                }
                None => false,
            });
        }
    }
}

/// Whether a write is under way ([`quiet`]).
fn writing() -> bool {
    WRITING.load(std::sync::atomic::Ordering::SeqCst) > 0
}

/// Keep spares in this process (the daemon calls it once at start).
pub fn enable() {
    SPARES.get_or_init(|| Spares::start(KEEP));
}

/// A spare of `dir` opened for writing, when this process keeps spares and one is ready:
/// its path (rename it into place, or remove it) and the file, holding at most
/// [`WRITTEN_OUT`] zeros, so that its taker writes from the start and sets the file's
/// length to what it wrote. `None`: create the temporary file as usual.
pub fn take(dir: &Path) -> Option<(PathBuf, File)> {
    SPARES.get()?.take(dir)
}

/// A spare of `dir` as [`take`] gives, or a recycled one first ([`recycle`]), holding
/// another entry's bytes: its taker writes from the start and then sets the file's length
/// to what it wrote.
pub fn take_reusable(dir: &Path) -> Option<(PathBuf, File)> {
    SPARES.get()?.take_reusable(dir)
}

/// Write `bytes` over a file just taken from a pool ([`take`], [`take_reusable`]: opened
/// at its start), then set its length to theirs, so that nothing it held before (a
/// spare's zeros, a recycled entry) is left after them.
///
/// The write covers whole blocks ([`WRITTEN_OUT`] bytes each): `bytes`, then zeros up to
/// the end of the block they end in, cut off again by the length set after. A write over
/// part of a block the file already holds needs the rest of that block in memory first,
/// and when the kernel has dropped the file's cached pages since it was made or last
/// written (memory reclaimed while the file waited in its pool), it reads the block back
/// from the disk before the write can go on: one disk read, on the path of the job whose
/// write it is. A write over the whole block replaces it and reads nothing.
pub fn write_over(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let whole = bytes.len().div_ceil(WRITTEN_OUT) * WRITTEN_OUT;
    if whole == bytes.len() {
        file.write_all(bytes)?;
    } else {
        let mut padded = Vec::with_capacity(whole);
        padded.extend_from_slice(bytes);
        padded.resize(whole, 0);
        file.write_all(&padded)?;
    }
    file.set_len(bytes.len() as u64)
}

/// Give `file`, no longer needed, to the pool of `dir` (on the same file system) for
/// [`take_reusable`], instead of removing it: whether it was taken. It is not when this
/// process keeps no spares, the pool was never asked for or cannot hold spares, it holds
/// [`RECYCLED_KEEP`] already, or the rename fails: the caller then removes the file.
/// Only a file with no other name may be given (its bytes are written over).
pub fn recycle(dir: &Path, file: &Path) -> bool {
    SPARES.get().is_some_and(|spares| spares.recycle(dir, file))
}

/// Remove this process's spares, and make no more (the daemon, as it stops).
pub fn release() {
    if let Some(spares) = SPARES.get() {
        spares.release();
    }
}

/// The spares of one process, by directory, and the thread that makes them.
pub struct Spares {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Woken when a pool runs low or the spares are released.
    wake: Condvar,
    /// Woken when the maker ends the creation it was in (see [`State::making`]).
    made: Condvar,
    keep: usize,
    /// The maker is to be woken when the writes under way end: it found a pool low
    /// during a write, or a take during a write left one low. Of the writes, only the
    /// last one's end wakes it (a take outside any write wakes it at once).
    awaits_writes: std::sync::atomic::AtomicBool,
    /// How many times the maker has been woken from waiting on `wake` (tests).
    #[cfg(test)]
    woken: std::sync::atomic::AtomicUsize,
    /// The maker waits on `wake` (tests): set and cleared under the pools' lock, so a
    /// test holding the lock that reads it set knows the maker holds nothing.
    #[cfg(test)]
    asleep: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    pools: HashMap<PathBuf, Pool>,
    released: bool,
    /// The maker is creating a file outside the lock: `release` waits for it to end (the
    /// maker removes that file itself once released), so a daemon that exits right after
    /// releasing leaves no spare behind. The maker runs at the lowest priority, so on a
    /// busy machine that removal could otherwise come after the process is gone.
    making: bool,
    /// The next number of a spare's name.
    next: u64,
}

#[derive(Default)]
struct Pool {
    /// Oldest first: a spare is taken in the order it was made.
    ready: VecDeque<PathBuf>,
    /// Files given back ([`recycle`]), holding bytes; newest first.
    recycled: Vec<PathBuf>,
    /// The directory was made (or found) and swept of gone processes' spares.
    swept: bool,
    /// The directory cannot hold spares (not made, not a directory, a file not created):
    /// the pool is no longer filled and writes create their files.
    failed: bool,
    /// When a write last found the pool empty, once it had been filled ([`BURST_PAUSE`]).
    dry: Option<Instant>,
}

impl Pool {
    fn wants(&self, keep: usize) -> bool {
        !self.failed && self.ready.len() < keep && self.resumes().is_none()
    }

    /// When a pool paused for a burst is filled again, if it is paused.
    fn resumes(&self) -> Option<Instant> {
        self.dry
            .map(|at| at + BURST_PAUSE)
            .filter(|at| *at > Instant::now())
    }
}

impl Spares {
    /// Spares kept `keep` per directory, made by a thread started now.
    pub fn start(keep: usize) -> Spares {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            made: Condvar::new(),
            keep,
            awaits_writes: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            woken: std::sync::atomic::AtomicUsize::new(0),
            #[cfg(test)]
            asleep: std::sync::atomic::AtomicBool::new(false),
        });
        MAKERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&shared));
        let maker = shared.clone();
        let started = std::thread::Builder::new()
            .name("advisord-spares".into())
            .spawn(move || maker.make());
        if let Err(e) = started {
            tracing::warn!(error = %e, "cannot start the thread that makes spare files; writes create their own");
            shared.lock().released = true;
        }
        Spares { shared }
    }

    /// A ready spare of `dir`, opened for writing (see [`take`]). The first time a
    /// directory is asked for, none is ready: its pool starts filling then.
    pub fn take(&self, dir: &Path) -> Option<(PathBuf, File)> {
        self.take_from(dir, false)
    }

    /// A recycled file of `dir` if one is, else a new spare (see [`take_reusable`]).
    pub fn take_reusable(&self, dir: &Path) -> Option<(PathBuf, File)> {
        self.take_from(dir, true)
    }

    fn take_from(&self, dir: &Path, reusable: bool) -> Option<(PathBuf, File)> {
        let (spare, low) = {
            // The maker may hold the lock, waiting for a core: the write creates its own.
            let mut state = self.shared.lock_for_writer()?;
            if state.released {
                return None;
            }
            let keep = self.shared.keep;
            let pool = state.pools.entry(dir.to_path_buf()).or_default();
            let recycled = if reusable { pool.recycled.pop() } else { None };
            let spare = recycled.or_else(|| pool.ready.pop_front());
            if spare.is_none() && pool.swept {
                pool.dry = Some(Instant::now());
            }
            (spare, pool.wants(keep))
        };
        // Woken once the lock is free: a maker woken under it would only wait for it.
        if low {
            self.shared.wake_when_quiet();
        }
        let spare = spare?;
        let opened = OpenOptions::new()
            .write(true)
            .custom_flags(NOFOLLOW)
            .open(&spare);
        match opened {
            Ok(file) => Some((spare, file)),
            Err(_) => {
                // Removed under us (another process took it for a gone one's): write as
                // if none was ready.
                let _ = fs::remove_file(&spare);
                None
            }
        }
    }

    /// Take `file` into the pool of `dir` (see [`recycle`]).
    pub fn recycle(&self, dir: &Path, file: &Path) -> bool {
        let number = {
            let Some(mut state) = self.shared.lock_for_writer() else {
                return false;
            };
            if state.released {
                return false;
            }
            let Some(pool) = state.pools.get_mut(dir) else {
                return false;
            };
            if !pool.swept || pool.failed || pool.recycled.len() >= RECYCLED_KEEP {
                return false;
            }
            if file.parent() == Some(dir) {
                // A spare of this pool, taken and now holding what it replaced: it keeps
                // its name.
                pool.recycled.push(file.to_path_buf());
                return true;
            }
            state.next += 1;
            state.next
        };
        let named = dir.join(format!("{}-{number}", std::process::id()));
        if fs::rename(file, &named).is_err() {
            return false;
        }
        let Some(mut state) = self.shared.lock_for_writer() else {
            // The file is the caller's no more; with the pools out of reach, it goes.
            let _ = fs::remove_file(named);
            return true;
        };
        let released = state.released;
        match state.pools.get_mut(dir) {
            Some(pool) if !released => {
                pool.recycled.push(named);
                true
            }
            _ => {
                // Released meanwhile: the file is the caller's no more, and goes.
                drop(state);
                let _ = fs::remove_file(named);
                true
            }
        }
    }

    /// How many new spares of `dir` are ready.
    pub fn ready(&self, dir: &Path) -> usize {
        self.shared
            .lock()
            .pools
            .get(dir)
            .map_or(0, |pool| pool.ready.len())
    }

    /// How many recycled files of `dir` are kept.
    pub fn recycled(&self, dir: &Path) -> usize {
        self.shared
            .lock()
            .pools
            .get(dir)
            .map_or(0, |pool| pool.recycled.len())
    }

    /// Remove every ready or recycled spare and make no more; a file the maker is
    /// creating now is removed by it before this returns (waiting at most
    /// [`RELEASE_WAIT`] for a creation stuck in the file system).
    pub fn release(&self) {
        let ready: Vec<PathBuf> = {
            let mut state = self.shared.lock();
            state.released = true;
            self.shared.wake.notify_all();
            let deadline = Instant::now() + RELEASE_WAIT;
            while state.making {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = self
                    .shared
                    .made
                    .wait_timeout(state, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            state
                .pools
                .values_mut()
                .flat_map(|pool| {
                    let ready = std::mem::take(&mut pool.ready);
                    ready.into_iter().chain(std::mem::take(&mut pool.recycled))
                })
                .collect()
        };
        for spare in ready {
            let _ = fs::remove_file(spare);
        }
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        self.release();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Say that the maker is about to wait on `wake` (tests; nothing otherwise). Called
    /// with the pools' lock held; [`Shared::count_woken`] says it woke.
    fn falls_asleep(&self) {
        #[cfg(test)]
        self.asleep.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Count one wake-up of the maker, now awake (tests; nothing otherwise). Called with
    /// the pools' lock held.
    fn count_woken(&self) {
        #[cfg(test)]
        {
            self.asleep
                .store(false, std::sync::atomic::Ordering::SeqCst);
            self.woken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Have the maker fill a pool that runs low: at once when no write is under way,
    /// else when the last one ends ([`Quiet`]). Woken during a write, it could make
    /// nothing: it would only take the pools' lock to look, and the write's next take,
    /// microseconds later, would find the lock held (a consultation takes four spares in
    /// a row). Said before the writes are looked at, and looked at by the write that
    /// ends after its count is down: one of the two sees the other, so the wake-up is
    /// not lost between them.
    fn wake_when_quiet(&self) {
        self.awaits_writes
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if !writing() {
            self.wake.notify_one();
        }
    }

    /// The pools' lock for a write on its way (a take, a file given back), or `None` when
    /// it stays held over [`WRITER_TRIES`] tries: the write then does without a spare.
    /// Whoever else holds it holds it for a few instructions, but the maker runs at the
    /// lowest priority: set aside on a busy core while it holds the lock, it may wait a
    /// long time for that core, and a write waiting for it would wait as long.
    fn lock_for_writer(&self) -> Option<MutexGuard<'_, State>> {
        for tried in 1..=WRITER_TRIES {
            match self.state.try_lock() {
                Ok(state) => return Some(state),
                Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if tried < WRITER_TRIES => {
                    std::thread::yield_now();
                }
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        None
    }

    /// The maker's loop: fill each pool that runs low, one file at a time (a taker never
    /// waits for more than one creation), except while a burst empties it faster than
    /// that ([`BURST_PAUSE`]), until released.
    fn make(&self) {
        let pid = std::process::id();
        yield_to_others();
        loop {
            let (dir, sweep, number) = {
                let mut state = self.lock();
                let low = loop {
                    if state.released {
                        return;
                    }
                    let low = state
                        .pools
                        .iter()
                        .find(|(_, pool)| pool.wants(self.keep))
                        .map(|(dir, pool)| (dir.clone(), !pool.swept));
                    if let Some(low) = low {
                        // Said before looking, so that a write ending after the look wakes it.
                        self.awaits_writes
                            .store(true, std::sync::atomic::Ordering::SeqCst);
                        if !writing() {
                            self.awaits_writes
                                .store(false, std::sync::atomic::Ordering::SeqCst);
                            break low;
                        }
                        // A write is under way: fill the pool once it has ended.
                        self.falls_asleep();
                        state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                        self.count_woken();
                        self.awaits_writes
                            .store(false, std::sync::atomic::Ordering::SeqCst);
                        continue;
                    }
                    // Asleep until a pool runs low, or a paused one may be filled again.
                    let paused = state
                        .pools
                        .values()
                        .filter(|pool| !pool.failed && pool.ready.len() < self.keep)
                        .filter_map(Pool::resumes)
                        .min();
                    self.falls_asleep();
                    state = match paused {
                        Some(at) => {
                            let wait = at.saturating_duration_since(Instant::now());
                            self.wake
                                .wait_timeout(state, wait)
                                .unwrap_or_else(|p| p.into_inner())
                                .0
                        }
                        None => self.wake.wait(state).unwrap_or_else(|p| p.into_inner()),
                    };
                    self.count_woken();
                };
                state.next += 1;
                state.making = true;
                (low.0, low.1, state.next)
            };
            let made = if sweep {
                prepare(&dir, pid).map(|()| None)
            } else {
                create(&dir, pid, number).map(Some)
            };
            let mut state = self.lock();
            state.making = false;
            let released = state.released;
            if released {
                // Removed before `release`, which waits for this, returns.
                if let Ok(Some(spare)) = made {
                    let _ = fs::remove_file(spare);
                }
                self.made.notify_all();
                return;
            }
            let Some(pool) = state.pools.get_mut(&dir) else {
                continue;
            };
            match made {
                Ok(None) => pool.swept = true,
                Ok(Some(spare)) => pool.ready.push_back(spare),
                // A name left by an earlier process with this pid that the sweep missed:
                // the next number.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    pool.failed = true;
                    tracing::debug!(dir = %dir.display(), error = %e, "no spare files here; writes create their own");
                }
            }
        }
    }
}

/// Give the calling thread (the maker) the lowest CPU priority there is: nice 19, and on
/// Linux the `SCHED_IDLE` policy, so that it runs on a core nothing else wants and a write
/// that wakes it is never set aside for it. Nice 19 alone does not ensure that: the
/// kernel's scheduler still lets a woken thread of nice 19 preempt the one that woke it
/// (seen in a consultation's timeline: the job's thread, staging its records, set aside
/// for about 40 µs while the maker made a file), where a `SCHED_IDLE` thread never
/// preempts a thread of the normal policy. Whichever of the two cannot be set, the maker
/// runs without it.
#[allow(unsafe_code)]
fn yield_to_others() {
    let me = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(me), 19) {
        tracing::debug!(error = %e, "the spare files' maker keeps its priority");
    }
    #[cfg(target_os = "linux")]
    {
        let param = nix::libc::sched_param { sched_priority: 0 };
        // SAFETY: `sched_setscheduler` reads the one `sched_param` passed by reference,
        // which outlives the call; pid 0 is the calling thread.
        let set = unsafe { nix::libc::sched_setscheduler(0, nix::libc::SCHED_IDLE, &param) };
        if set != 0 {
            let e = io::Error::last_os_error();
            tracing::debug!(error = %e, "the spare files' maker keeps its scheduling policy");
        }
    }
}

/// Make `dir` (private, never through a symbolic link) if it is missing, then remove the
/// spares of processes that are gone, and any bearing `pid` (an earlier process's: this
/// one has made none here yet).
fn prepare(dir: &Path, pid: u32) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not a directory", dir.display()),
        ));
    }
    for entry in fs::read_dir(dir)?.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(owner, _)| owner.parse::<u32>().ok())
        else {
            continue; // not a spare: left alone
        };
        if owner == pid || !alive(owner) {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Whether process `pid` exists (it may belong to another user).
fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Create spare `<pid>-<number>` in `dir`, private, holding [`WRITTEN_OUT`] bytes of zeros
/// already written to the disk (see [`written_out`]). A spare whose block could not be
/// written (a full disk, a quota) is kept as it is: its taker sets its length whatever
/// it holds, and the pool goes on being filled once the disk has room again.
fn create(dir: &Path, pid: u32, number: u64) -> io::Result<PathBuf> {
    let path = dir.join(format!("{pid}-{number}"));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(NOFOLLOW)
        .open(&path)?;
    if let Err(e) = written_out(&file) {
        tracing::debug!(error = %e, spare = %path.display(), "a spare kept without its block");
    }
    Ok(path)
}

/// Give a new spare its first block, written to the disk: [`WRITTEN_OUT`] bytes of zeros,
/// and the kernel's writeback of them started and waited for (`sync_file_range`, which
/// neither flushes the disk's cache nor writes the file's inode: the spare needs no
/// durability, only a block that is allocated and written). A record written over it
/// later is then an overwrite in place: the flush that makes it durable allocates
/// nothing, and on ext4 converts no extent from unwritten to written as the write ends.
/// On this project's test machine that took a flush of a consultation's four files from
/// about 380 µs to about 210 µs (`docs/DAEMON.md`, "Spare files"). Elsewhere than Linux
/// a spare stays empty.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn written_out(mut file: &File) -> io::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    file.write_all(&[0; WRITTEN_OUT])?;
    let flags = nix::libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | nix::libc::SYNC_FILE_RANGE_WRITE
        | nix::libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: `sync_file_range` takes a descriptor, two integers and flags, and touches
    // no memory of this process; the descriptor is `file`'s, open for this call.
    let started = unsafe { nix::libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) };
    if started != 0 {
        // A file system that cannot start writeback this way still holds the zeros: the
        // next flush writes them out instead.
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn written_out(_file: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Poll until `check` holds. Most checks wait for the maker, which runs only on a core
    /// nothing else wants: on a machine whose two cores the whole suite keeps busy, it was
    /// seen to take seconds to make a couple of files, hence the generous bound.
    fn until(what: &str, check: impl Fn() -> bool) {
        let started = Instant::now();
        while !check() {
            assert!(started.elapsed() < Duration::from_secs(30), "{what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// What a spare holds as it is made: a block of zeros on Linux, nothing elsewhere.
    fn made_holding() -> Vec<u8> {
        if cfg!(target_os = "linux") {
            vec![0; WRITTEN_OUT]
        } else {
            Vec::new()
        }
    }

    /// Spares kept `keep` per directory, and a `+spare` directory under a temporary
    /// parent whose pool was asked for once (nothing is ready then) and has filled.
    fn filled(keep: usize) -> (tempfile::TempDir, PathBuf, Spares) {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("+spare");
        let spares = Spares::start(keep);
        assert!(
            spares.take(&dir).is_none(),
            "none is ready before the first ask"
        );
        until_quiet(&spares, &dir, keep);
        (parent, dir, spares)
    }

    /// Wait until the pool of `dir` holds `keep` ready spares and the maker sleeps, so that
    /// a give or take that follows never finds the pools' lock held by it (it then does
    /// without the pool, by design). Only waiting for the count is not enough: on a busy
    /// machine the maker, at the lowest priority, can be set aside with the lock held
    /// right after it added the last spare.
    fn until_quiet(spares: &Spares, dir: &Path, keep: usize) {
        until("the pool full and the maker asleep", || {
            let state = spares.shared.lock();
            state.pools.get(dir).is_some_and(|p| p.ready.len() == keep)
                && spares
                    .shared
                    .asleep
                    .load(std::sync::atomic::Ordering::SeqCst)
        });
    }

    /// While a write holds [`quiet`] (its task's lock), the maker creates nothing; it
    /// fills the pool once the write has ended.
    #[test]
    fn no_spare_is_made_while_a_write_is_under_way() {
        let (_parent, dir, spares) = filled(2);
        let quiet = quiet();
        let (taken, _) = spares.take(&dir).expect("a spare");
        let held = Instant::now();
        // Long enough for the maker to have made several files, were it free to.
        while held.elapsed() < Duration::from_millis(60) {
            assert_eq!(
                spares.ready(&dir),
                1,
                "nothing made while a write is under way"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(names(&dir).len(), 2, "the taken one and the one ready");
        drop(quiet);
        until("the pool filled after the write", || {
            spares.ready(&dir) == 2
        });
        fs::remove_file(taken).unwrap();
    }

    /// A take during a write leaves the maker asleep: woken, it could make nothing, and
    /// would only take the pools' lock to look while the write's next take wants it. The
    /// write's end wakes it, and it fills the pool then.
    #[test]
    fn a_take_during_a_write_wakes_the_maker_only_once_the_write_has_ended() {
        use std::sync::atomic::Ordering::SeqCst;
        let (_parent, dir, spares) = filled(3);
        let quiet = quiet();
        let before = spares.shared.woken.load(SeqCst);
        let taken: Vec<PathBuf> = (0..3)
            .map(|_| spares.take(&dir).expect("a spare").0)
            .collect();
        let held = Instant::now();
        // Long enough for a woken maker to have looked, were it woken.
        while held.elapsed() < Duration::from_millis(60) {
            assert_eq!(
                spares.shared.woken.load(SeqCst),
                before,
                "the maker was woken during the write"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(spares.ready(&dir), 0, "nothing made during the write");
        drop(quiet);
        until("the pool filled after the write", || {
            spares.ready(&dir) == 3
        });
        assert!(spares.shared.woken.load(SeqCst) > before);
        for spare in taken {
            fs::remove_file(spare).unwrap();
        }
    }

    #[test]
    fn a_pool_fills_on_first_ask_and_a_spare_taken_holds_a_block_of_zeros_to_write_over() {
        let (parent, dir, spares) = filled(3);
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the directory is private");
        let (path, mut file) = spares.take(&dir).expect("a spare");
        assert_eq!(path.parent(), Some(dir.as_path()));
        assert_eq!(fs::read(&path).unwrap(), made_holding());
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        file.write_all(b"record").unwrap();
        file.set_len(6).unwrap();
        let target = parent.path().join("record.json");
        fs::rename(&path, &target).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"record");
        until("taken spares replaced", || spares.ready(&dir) == 3);
        assert_eq!(
            names(&dir).len(),
            3,
            "only the ready spares are in the directory"
        );
    }

    /// The `/proc` status lines (`stat`) of this process's threads named `name`.
    fn stat_of_threads(name: &str) -> Vec<String> {
        fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|task| {
                fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
            .filter_map(|task| fs::read_to_string(task.path().join("stat")).ok())
            .collect()
    }

    /// Field `n` (counted from 1, as `proc(5)` does) of a thread's `/proc` status line,
    /// as a number: the fields after the name, which ends at the last `)`, start at 3.
    fn stat_field(stat: &str, n: usize) -> Option<i64> {
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(n - 3)?
            .parse()
            .ok()
    }

    /// The nice values (field 19) of this process's threads named `name`.
    fn nice_of_threads(name: &str) -> Vec<i64> {
        stat_of_threads(name)
            .iter()
            .filter_map(|stat| stat_field(stat, 19))
            .collect()
    }

    #[test]
    fn the_maker_runs_at_the_lowest_priority_so_a_write_is_never_set_aside_for_it() {
        // Filled: this maker has begun its loop. Another test's maker (the tests share
        // a process under `cargo test`) may have just started, hence the wait.
        let (_parent, _dir, _spares) = filled(2);
        until("every maker at nice 19", || {
            let nice = nice_of_threads("advisord-spares");
            !nice.is_empty() && nice.iter().all(|n| *n == 19)
        });
        #[cfg(target_os = "linux")]
        until("every maker under SCHED_IDLE", || {
            let policies = stat_of_threads("advisord-spares")
                .iter()
                .map(|stat| stat_field(stat, 41))
                .collect::<Vec<_>>();
            !policies.is_empty()
                && policies
                    .iter()
                    .all(|p| *p == Some(i64::from(nix::libc::SCHED_IDLE)))
        });
    }

    #[test]
    fn a_gone_processs_spares_are_swept_and_a_live_ones_and_strangers_are_kept() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("+spare");
        fs::create_dir(&dir).unwrap();
        // pid 1 is alive; no pid is above the kernel's maximum.
        let gone = format!("{}-7", u32::MAX - 1);
        let mine = format!("{}-1", std::process::id());
        for name in [gone.as_str(), "1-5", mine.as_str(), "notes.txt"] {
            fs::write(dir.join(name), b"").unwrap();
        }
        let spares = Spares::start(2);
        assert!(spares.take(&dir).is_none());
        until("the pool filled", || spares.ready(&dir) == 2);
        let left = names(&dir);
        assert!(!left.contains(&gone), "{left:?}");
        assert!(
            !left.contains(&mine),
            "an earlier process's with this pid: {left:?}"
        );
        assert!(left.contains(&"1-5".to_string()), "{left:?}");
        assert!(left.contains(&"notes.txt".to_string()), "{left:?}");
    }

    #[test]
    fn a_pool_emptied_by_a_burst_is_left_to_the_writers_for_a_while() {
        let (_parent, dir, spares) = filled(4);
        // Writes faster than the maker: the pool runs dry.
        let mut taken = Vec::new();
        let dry = loop {
            match spares.take(&dir) {
                Some((path, _file)) => taken.push(path),
                None => break Instant::now(),
            }
        };
        assert!(taken.len() >= 4, "{taken:?}");
        until("filled again after the pause", || spares.ready(&dir) == 4);
        // At most the one file being made as the pool ran dry came before the pause ended.
        assert!(
            dry.elapsed() >= BURST_PAUSE,
            "refilled {:?} after running dry",
            dry.elapsed()
        );
    }

    #[test]
    fn a_recycled_file_keeps_its_inode_and_only_a_reusable_take_gets_it() {
        use std::os::unix::fs::MetadataExt;
        let (parent, dir, spares) = filled(2);
        let used = parent.path().join("used.json");
        fs::write(&used, b"an old entry").unwrap();
        let inode = fs::metadata(&used).unwrap().ino();
        assert!(spares.recycle(&dir, &used));
        assert!(!used.exists(), "moved into the pool");
        assert_eq!(spares.recycled(&dir), 1);
        // A plain take never gets a recycled one.
        let (clean, _file) = spares.take(&dir).expect("a new spare");
        assert_eq!(fs::read(&clean).unwrap(), made_holding());
        let (reused, _file) = spares.take_reusable(&dir).expect("the recycled file");
        assert_eq!(fs::metadata(&reused).unwrap().ino(), inode, "the same file");
        assert_eq!(fs::read(&reused).unwrap(), b"an old entry");
        assert_eq!(reused.parent(), Some(dir.as_path()));
        // One of the pool's own, given back, keeps its name. (Given once the maker has
        // made again what the takes left low, and sleeps.)
        until_quiet(&spares, &dir, 2);
        assert!(spares.recycle(&dir, &reused));
        assert!(reused.exists());
        assert_eq!(spares.recycled(&dir), 1);
        // A pool never asked for takes nothing: its giver removes the file.
        let other = parent.path().join("other");
        assert!(!spares.recycle(&other, &parent.path().join("missing")));
        // A full pool takes no more. (Counted while the maker sleeps: a give that finds
        // the pools' lock held does without it.)
        until_quiet(&spares, &dir, 2);
        let mut given = 1;
        let refused = loop {
            let file = parent.path().join(format!("more-{given}"));
            fs::write(&file, b"x").unwrap();
            if !spares.recycle(&dir, &file) {
                break file;
            }
            given += 1;
        };
        assert_eq!(given, RECYCLED_KEEP, "the pool held {given}");
        assert!(refused.exists(), "a file refused stays its giver's");
        spares.release();
        assert_eq!(
            names(&dir),
            [clean.file_name().unwrap().to_string_lossy().into_owned()],
            "release removes the recycled files; the taken one is its writer's"
        );
        assert!(!spares.recycle(&dir, &refused), "none taken after release");
    }

    #[test]
    fn a_write_never_waits_for_the_pools_lock_held_by_the_maker() {
        let (parent, dir, spares) = filled(2);
        let given = parent.path().join("entry.json");
        fs::write(&given, b"an old entry").unwrap();
        // The lock held as the maker would hold it if set aside on a busy core.
        let held = spares.shared.lock();
        let (took, gave) = std::thread::scope(|scope| {
            let (done, finished) = std::sync::mpsc::channel();
            let (spares, dir, given) = (&spares, &dir, &given);
            scope.spawn(move || {
                let took = spares.take(dir).is_some();
                let gave = spares.recycle(dir, given);
                let _ = done.send((took, gave));
            });
            let answer = finished.recv_timeout(Duration::from_secs(10));
            drop(held);
            answer.expect("the write went on without the lock")
        });
        assert!(!took, "no spare is taken while the lock is held");
        assert!(!gave, "no file is given back while the lock is held");
        assert_eq!(
            fs::read(&given).unwrap(),
            b"an old entry",
            "the file not given back is still the caller's"
        );
        assert_eq!(spares.ready(&dir), 2, "the pool is as it was");
        assert!(
            spares.take(&dir).is_some(),
            "with the lock free, a spare is taken"
        );
    }

    #[test]
    fn release_removes_the_ready_spares_and_makes_no_more() {
        let (_parent, dir, spares) = filled(4);
        let (taken, _file) = spares.take(&dir).expect("a spare");
        spares.release();
        let left = names(&dir);
        assert_eq!(
            left,
            [taken.file_name().unwrap().to_string_lossy().into_owned()],
            "only the spare taken (its writer's to place or remove) is left"
        );
        assert!(spares.take(&dir).is_none(), "none after release");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(names(&dir).len(), 1, "none made after release");
    }

    /// Released while the maker is filling a large pool (creating a file at any moment):
    /// when `release` returns nothing of ours is left, so a daemon that exits at once
    /// leaves no spare behind.
    #[test]
    fn release_returns_only_once_the_file_being_made_is_gone_too() {
        for _ in 0..20 {
            let parent = tempfile::tempdir().unwrap();
            let dir = parent.path().join("+spare");
            let spares = Spares::start(256);
            assert!(spares.take(&dir).is_none(), "none ready at first");
            until("the maker started filling", || spares.ready(&dir) >= 2);
            let started = Instant::now();
            spares.release();
            let waited = started.elapsed();
            let left = names(&dir);
            if !left.is_empty() {
                // The maker, under `SCHED_IDLE` on a machine whose cores are all busy (the
                // test suite's other processes), may not run within the wait: then
                // release must have waited it out, and the maker removes its file itself.
                assert!(
                    waited >= RELEASE_WAIT,
                    "release returned after {waited:?} leaving {left:?}: it must wait for \
                     the file being made"
                );
                until("the starved maker removed the file it was making", || {
                    names(&dir).is_empty()
                });
            }
        }
    }

    #[test]
    fn a_directory_that_cannot_hold_spares_leaves_writes_to_create_their_own() {
        let parent = tempfile::tempdir().unwrap();
        // A symbolic link where the directory should be is never followed.
        let elsewhere = tempfile::tempdir().unwrap();
        let linked = parent.path().join("+spare");
        std::os::unix::fs::symlink(elsewhere.path(), &linked).unwrap();
        // And a file where it should be.
        let file = parent.path().join("file");
        fs::write(&file, b"").unwrap();
        let spares = Spares::start(2);
        for dir in [&linked, &file] {
            assert!(spares.take(dir).is_none());
        }
        until("both pools given up", || {
            let state = spares.shared.lock();
            [&linked, &file]
                .iter()
                .all(|dir| state.pools.get(*dir).is_some_and(|p| p.failed))
        });
        assert!(spares.take(&linked).is_none());
        assert!(
            names(elsewhere.path()).is_empty(),
            "nothing made through the link"
        );
    }
}
