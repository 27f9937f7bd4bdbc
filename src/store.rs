//! The store: one JSON file per record under `<state>/<task>/`, written atomically and
//! serialised per task by a lock, so concurrent writers in many processes never lose,
//! duplicate or tear a record.
//!
//! Layout: `<state>/<task>/<sequence>.json`, the sequence zero-padded to ten digits so a
//! directory listing sorts in sequence order (`0000000001.json`, ...). `<state>/<task>/.lock`
//! is the task's lock; `.<name>.<pid>.tmp` files are writes in flight. A record file's name
//! is exactly ten digits and `.json` ([`chain::FileName`], the one rule the writer, the
//! views and `verify` share); any other name is a stray, never read as a record, and
//! reported. Every file in a task's directory is opened without following a symbolic
//! link (`O_NOFOLLOW`), so a link planted there never makes the store read or create a
//! file elsewhere.
//!
//! Guarantees:
//! - **Atomic**: a record is written to a temporary file in the task's directory, flushed
//!   to disk, renamed into place, and the directory is flushed; a reader sees the whole
//!   record or none of it, even if the writer is killed at any point.
//! - **Serialised**: a writer holds an exclusive `flock` on the task's `.lock` while it
//!   reads the task, admits the record and writes it, so sequences are unique and
//!   contiguous (`next = highest + 1`) across every process sharing the state directory.
//!   The kernel drops the lock when a writer dies; the temporary files a dead writer left
//!   are removed by the next writer that loads the task, which holds the lock and so knows
//!   no write is in flight.
//! - **Nothing on refusal**: a refused record writes nothing, and a refused first record
//!   of a task does not even create the task's directory.
//!
//! Each [`Store`] keeps the records it has read, per task. The first access lists the
//! task's directory; later ones only look for `<highest + 1>.json`, `<highest + 2>.json`...
//! until one is missing. Because record `n + 1` is only ever created after record `n` is
//! in place, that finds every new record, and a write into a task of ten thousand records
//! costs what a write into an empty one does.
//!
//! The views ([`Store::with_trusted_records`]) judge the files as they are now, without
//! reading them again: the cache keeps each record file's identity as `stat` gave it when
//! the file was read or written (device, inode, size, modification and change times; see
//! [`FileId`]), and a view lists the task's directory and `stat`s each record file. A file
//! whose identity is unchanged is the one the cache read; a changed one is read again and,
//! if its bytes differ, the whole task is read afresh, as are a file gone or one that
//! appeared below the highest sequence. `verify` never relies on this: it reads every byte.

use crate::core::availability::HistoryTail;
use crate::core::chain::{self, Trust};
use crate::core::policy::PlanEnv;
use crate::core::records::{Body, Record, TaskName};
use crate::core::writer::{self, Refusal, WriteEnv};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::Read as _;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

mod track;
mod watch;

/// The name of a task's lock file, inside the task's directory.
pub const LOCK_FILE: &str = chain::LOCK_FILE;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The writer refused the record; nothing was written.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The file system failed; nothing was half-written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A stored file does not parse as a record.
    #[error("`{path}` is not a readable record: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a [`Store`] has read of one task.
#[derive(Default)]
struct TaskCache {
    /// Whether the task's directory has been listed once.
    listed: bool,
    /// The records read, in sequence order.
    records: Vec<Record>,
    /// The chain's hash of each record's stored bytes, beside `records`: the newest is the
    /// `prev` of the next write, so a write never re-reads the task to hash it.
    digests: Vec<String>,
    /// The identity of each record's file when it was read or written, beside `records`;
    /// `None` when it cannot vouch for the bytes (see [`FileId::of`]).
    files: Vec<Option<FileId>>,
    /// The highest sequence among the record files read.
    highest: u64,
    /// The hash chain's walk over `records` so far: a view extends it over the records
    /// read since instead of walking the whole task again.
    chain: chain::Progress,
    /// The walk the writer keeps, at [`chain::Depth::Rules`]: every record not written
    /// through this cache is admitted again through the writer's rules once, so a write
    /// never builds on a record `verify` would refuse, and costs nothing more than that.
    rules: chain::Progress,
    /// The names in the task's directory that are not record files nor the store's own,
    /// as last listed.
    strays: Vec<String>,
    /// The attestations of `records` checked so far against this machine's key (records
    /// never change, so only new ones are checked).
    attestations: Arc<chain::Attestations>,
    /// The size on disk of the records read.
    bytes: usize,
}

/// What `stat` says of a record file, enough to tell that it is still the file the cache
/// read: any write to it, a rename over it or a change of its mode changes its change time
/// (which, unlike the modification time, no program can set), and a file put in its place
/// is another inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// How recent a change time must be for it to vouch for nothing: the file system stamps
/// times from a clock that ticks coarsely (a few milliseconds, a second on some file
/// systems), so a file changed again within the same tick keeps its change time. A file
/// whose change time is this close to when it was looked at is checked by its bytes next
/// time (as git treats a "racily clean" file).
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

impl FileId {
    /// The identity of the file `stat` describes, looked at `now`; `None` when its change
    /// time is too recent to vouch for its bytes ([`RACY_WINDOW`]).
    pub fn of(stat: &fs::Metadata, now: SystemTime) -> Option<FileId> {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        let id = FileId {
            dev: stat.dev(),
            ino: stat.ino(),
            size: stat.size(),
            mtime_ns: ns(stat.mtime(), stat.mtime_nsec()),
            ctime_ns: ns(stat.ctime(), stat.ctime_nsec()),
        };
        let now_ns = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        (id.ctime_ns + RACY_WINDOW.as_nanos() as i128 <= now_ns).then_some(id)
    }
}

/// How many bytes of records (their size on disk) a [`Store`] keeps cached across its
/// tasks before it drops the least recently used ones.
pub const CACHE_BUDGET_BYTES: usize = 32 * 1024 * 1024;

/// How many tasks a [`Store`] keeps cached at most, however small: each cached task costs
/// memory beyond its records' bytes, and the tasks worth keeping are the ones in use now
/// (the sessions consulting at once), not every task the daemon has seen. A task dropped
/// for this is small or idle, and reading it again costs a directory listing.
pub const CACHE_MAX_TASKS: usize = 256;

/// How many missing record names the first read of a task looks up once more when its
/// listing has gaps (see `Store::list`).
const MAX_LOOKED_UP: u64 = 4096;

/// How many times a store tries to watch its state directory before it settles for
/// looking at every task each time (the user's inotify instances or watches are spent).
const MAX_WATCHER_FAILURES: u32 = 3;

/// A task's cache and when it was last used.
struct Slot {
    cache: Arc<Mutex<TaskCache>>,
    used: Instant,
    bytes: usize,
}

/// What availability needs of every task, fed as records are read and written.
#[derive(Default)]
struct CircuitIndex {
    tail: HistoryTail,
    /// The consultations budgets may count in a day window, across every task: those of
    /// the last [`RECENT_SPEND`] and later, stripped to what a cost needs. Kept only once
    /// a budget was first judged ([`Spending`]): a daemon whose users set no budget keeps
    /// none of them.
    recent: Vec<Spent>,
    /// Whether `recent` is kept, and complete.
    spending: Spending,
    /// The highest sequence fed, per task.
    fed: HashMap<TaskName, u64>,
    /// How many times the index was asked to catch up; a store asked once (a command's)
    /// never makes a watcher.
    catch_ups: u64,
    /// Which tasks changed since the index last caught up, when the kernel can tell
    /// (a long-lived store's: see `store::watch`).
    watcher: Option<watch::Watcher>,
    /// How many watchers failed to watch every task; after a few the store stops
    /// making them and looks at every task each time.
    watcher_failures: u32,
}

/// Whether the index keeps the consultations budgets count.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Spending {
    /// Not kept: no budget was judged yet.
    #[default]
    Off,
    /// Kept from every record fed from now on, while the records fed before are read back.
    Gathering,
    /// Kept and complete: every consultation fed is in it.
    Kept,
}

/// How far back the index keeps consultations for budgets. A day window is the user's
/// calendar day holding the clock, so it starts less than a day before it, whatever the
/// user's UTC offset; the rest is margin.
pub const RECENT_SPEND: Duration = Duration::from_secs(2 * 24 * 3600);

/// A consultation stripped to what budgets read (task, advisor, usage, when).
fn spend_only(record: &Record) -> Record {
    let mut kept = record.clone();
    kept.envelope.prev = None;
    if let Body::Consultation(c) = &mut kept.body {
        c.diagnostic = None;
        c.conclusion = None;
        c.assumptions = Vec::new();
        c.risks = Vec::new();
        c.actions = Vec::new();
        c.falsifiers = Vec::new();
    }
    kept
}

/// What budgets read of a consultation kept in the index, in a few words of memory: the
/// record is made again (stripped, as [`spend_only`]) only when budgets are judged.
struct Spent {
    at: time::OffsetDateTime,
    record: Box<Record>,
}

impl Spent {
    /// `record` as budgets keep it, when it is a consultation that spent at `since` or
    /// later.
    fn of(record: &Record, since: time::OffsetDateTime) -> Option<Spent> {
        let at = crate::core::cost::spent_at(record)?;
        (at >= since).then(|| Spent {
            at,
            record: Box::new(spend_only(record)),
        })
    }
}

impl CircuitIndex {
    fn feed(&mut self, record: &Record, since: time::OffsetDateTime) {
        self.tail.feed(record);
        if self.spending == Spending::Off {
            return;
        }
        self.recent.extend(Spent::of(record, since));
    }
}

/// One [`Store`] per state directory, kept for the life of a process that serves many
/// requests (the daemon), so each store's cache of records is read once rather than once
/// per request: a write into a task of ten thousand records then costs what a write into
/// an empty one does.
#[derive(Default)]
pub struct Stores {
    stores: Mutex<HashMap<PathBuf, Arc<Store>>>,
}

/// The stores of this process, one per state directory ([`Store::shared`]).
static SHARED: std::sync::OnceLock<Stores> = std::sync::OnceLock::new();

impl Stores {
    /// This process's stores: the daemon's live as long as it does, so every request and
    /// job reads a task once; the CLI's for one invocation.
    pub fn process() -> &'static Stores {
        SHARED.get_or_init(Stores::default)
    }

    /// Drop the cached records of every task not used for `idle`, in every store.
    pub fn release_idle(&self, idle: Duration) {
        let stores: Vec<Arc<Store>> = lock(&self.stores).values().cloned().collect();
        for store in stores {
            store.release_idle(idle);
        }
    }

    /// The store of `state_dir`, opened on first use.
    pub fn get(&self, state_dir: &Path) -> Arc<Store> {
        lock(&self.stores)
            .entry(state_dir.to_path_buf())
            .or_insert_with(|| Arc::new(Store::open(state_dir)))
            .clone()
    }
}

/// The records of one state directory.
pub struct Store {
    state_dir: PathBuf,
    tasks: Mutex<HashMap<TaskName, Slot>>,
    circuit: Mutex<CircuitIndex>,
    /// Every task's resolutions, for the advisors' track records.
    track: Mutex<track::TrackIndex>,
    /// Taken while the index starts keeping what budgets count, so it gathers once.
    spending_turn: Mutex<()>,
    budget: usize,
    max_tasks: usize,
}

/// The file name a record is stored under: its sequence, zero-padded to ten digits so that
/// names sort in sequence order.
pub fn file_name(record: &Record) -> String {
    sequence_file(record.envelope.sequence)
}

fn sequence_file(sequence: u64) -> String {
    chain::record_file(sequence)
}

/// The sequence a record file holds, if `name` is a record file ([`chain::FileName`]).
fn record_sequence(name: &OsStr) -> Option<u64> {
    match chain::FileName::of(name) {
        chain::FileName::Record(sequence) => Some(sequence),
        _ => None,
    }
}

/// Whether a directory entry is a temporary file of a write in flight (or of a dead one).
fn is_temp_file(name: &OsStr) -> bool {
    chain::FileName::of(name) == chain::FileName::Store && name != LOCK_FILE
}

/// Open `path`, a file in a task's directory, for reading: never through a symbolic link,
/// never blocking on a pipe planted there, and only when it is a regular file.
fn open_in_task(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
        .open(path)
        .map_err(|e| refused_link(path, e))?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is not a regular file; a task's directory holds only record files: move \
                 it out",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// `O_NOFOLLOW` refuses a symbolic link with `ELOOP`: say so in words, naming it.
fn refused_link(path: &Path, error: io::Error) -> io::Error {
    if error.raw_os_error() == Some(Errno::ELOOP as i32) {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is a symbolic link, which the store never follows inside a task's \
                 directory; remove it",
                path.display()
            ),
        )
    } else {
        error
    }
}

/// The open flags the store adds, from `nix` (which re-exports the C library's values).
mod libc_flags {
    use nix::fcntl::OFlag;
    pub const NOFOLLOW: i32 = OFlag::O_NOFOLLOW.bits();
    pub const NONBLOCK: i32 = OFlag::O_NONBLOCK.bits();
}

/// Lock `mutex` even if a thread panicked while holding it: every update of the cache
/// leaves it consistent before anything that can panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One record file as read from disk, for `verify`.
pub struct StoredFile {
    /// Its name (`0000000007.json`).
    pub name: String,
    /// The sequence its name holds.
    pub sequence: u64,
    /// Its bytes, exactly as stored.
    pub bytes: Vec<u8>,
}

impl StoredFile {
    /// The file as the chain's walk reads it.
    pub fn as_chain_file(&self) -> chain::File<'_> {
        chain::File {
            name: &self.name,
            sequence: self.sequence,
            bytes: &self.bytes,
        }
    }
}

/// One record file read: the record, the chain's hash of its bytes, their size and the
/// file's identity ([`FileId`]) taken before they were read.
struct ReadFile {
    record: Record,
    digest: String,
    size: usize,
    file: Option<FileId>,
}

/// Read and parse the record file at `path`, with the chain's hash of its bytes; `None`
/// when there is none.
fn read_record(path: &Path) -> Result<Option<ReadFile>, StoreError> {
    // The identity is taken from the open file before its bytes are read: a change made
    // while reading then shows as a changed identity next time, never the reverse.
    let read = |path: &Path| -> io::Result<(Vec<u8>, Option<FileId>)> {
        let mut file = open_in_task(path)?;
        let stat = file.metadata()?;
        let id = FileId::of(&stat, SystemTime::now());
        let mut bytes = Vec::with_capacity(stat.len() as usize);
        file.read_to_end(&mut bytes)?;
        Ok((bytes, id))
    };
    let (bytes, file) = match read(path) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StoreError::Io {
                context: format!(
                    "cannot read record `{}`; check its permissions",
                    path.display()
                ),
                source,
            })
        }
    };
    let corrupt = |message: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        message: format!(
            "{message}; records are never edited by hand: move the file out of `{}`",
            path.parent().unwrap_or(path).display()
        ),
    };
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let named = path.file_name().and_then(record_sequence);
    if named != Some(record.envelope.sequence) {
        return Err(corrupt(format!(
            "it holds sequence {} under another sequence's name",
            record.envelope.sequence
        )));
    }
    Ok(Some(ReadFile {
        digest: chain::digest(&bytes),
        size: bytes.len(),
        record,
        file,
    }))
}

/// Append a record read, with its hash and identity, keeping the cache in sequence order.
fn push_in_order(cache: &mut TaskCache, read: ReadFile) {
    cache.bytes += read.size;
    let at = cache
        .records
        .partition_point(|r| r.envelope.sequence <= read.record.envelope.sequence);
    cache.records.insert(at, read.record);
    cache.digests.insert(at, read.digest);
    cache.files.insert(at, read.file);
}

/// Whether the cache still holds what the files of its task hold now.
enum Checked {
    /// Every cached file is as it was read (new files past the highest may have been read).
    Current,
    /// A cached file changed, went, or a file appeared among the cached ones.
    Stale,
}

/// What the chain vouches for in the cached records, for the views. The walk kept in the
/// cache is extended over the records read since it was taken; the cached records are
/// never read again, so this is what walking them all would find.
fn trust_of(task: &TaskName, cache: &mut TaskCache) -> Trust {
    let progress = std::mem::take(&mut cache.chain);
    cache.chain = extended(task, cache, progress, chain::Depth::Links);
    let mut trust = Trust::of_progress(&cache.records, &cache.chain);
    if let Some(state) = trust.state.as_mut() {
        state.strays = cache.strays.clone();
    }
    trust
}

/// What the chain vouches for in the cached records, for the writer: the walk at
/// [`chain::Depth::Rules`] kept in the cache, extended over the records read since.
fn writer_trust(task: &TaskName, cache: &mut TaskCache) -> Trust {
    let progress = std::mem::take(&mut cache.rules);
    cache.rules = extended(task, cache, progress, chain::Depth::Rules);
    Trust::of_progress(&cache.records, &cache.rules)
}

/// `progress` extended over the cached records it has not walked, at `depth` (free when
/// it has walked them all).
fn extended(
    task: &TaskName,
    cache: &TaskCache,
    progress: chain::Progress,
    depth: chain::Depth,
) -> chain::Progress {
    let newest = cache
        .records
        .last()
        .map(|r| r.envelope.sequence)
        .zip(cache.digests.last().map(String::as_str));
    let walked = progress.head().map(|h| (h.sequence, h.hash.as_str()));
    if progress.walked() == cache.records.len() && walked == newest {
        return progress;
    }
    chain::extend_records(task, &cache.records, &cache.digests, progress, depth)
}

/// The digest of the cached record of `sequence`, if it is cached.
fn digest_at(cache: &TaskCache, sequence: u64) -> Option<&str> {
    let at = cache
        .records
        .binary_search_by_key(&sequence, |r| r.envelope.sequence)
        .ok()?;
    cache.digests.get(at).map(String::as_str)
}

/// What the daemon's job says of a consultation it writes ([`Store::write_consultation`]).
pub struct Provenance<'a> {
    /// The job that produced it.
    pub job: &'a str,
    /// What produced the answer (`vendor/model`, or what a mesh peer named), if known.
    pub source: Option<&'a str>,
    /// Whether the transport vouched for who answered: `false` records the answer but it
    /// never counts as a review.
    pub counts: bool,
    /// The request's own credential values, removed by value from every string.
    pub secrets: &'a [String],
}

/// The longest `source` a consultation keeps, in characters.
const MAX_SOURCE_CHARS: usize = 200;

fn io_error(context: String) -> impl FnOnce(io::Error) -> StoreError {
    move |source| StoreError::Io { context, source }
}

impl Store {
    /// A store over `state_dir` (created on first write).
    pub fn open(state_dir: &Path) -> Store {
        crate::journal::seam::opened(state_dir);
        Store::with_budget(state_dir, CACHE_BUDGET_BYTES)
    }

    /// This process's store of `state_dir` ([`Stores::process`]), whose cache of records
    /// is shared by every caller.
    pub fn shared(state_dir: &Path) -> Arc<Store> {
        Stores::process().get(state_dir)
    }

    /// A store over `state_dir` caching at most about `budget` bytes of records, of at
    /// most [`CACHE_MAX_TASKS`] tasks.
    pub fn with_budget(state_dir: &Path, budget: usize) -> Store {
        Store::with_limits(state_dir, budget, CACHE_MAX_TASKS)
    }

    /// A store over `state_dir` caching at most about `budget` bytes of records, of at
    /// most `max_tasks` tasks (the task in use is kept whatever the limits).
    pub fn with_limits(state_dir: &Path, budget: usize, max_tasks: usize) -> Store {
        Store {
            state_dir: state_dir.to_path_buf(),
            tasks: Mutex::new(HashMap::new()),
            circuit: Mutex::new(CircuitIndex::default()),
            track: Mutex::default(),
            spending_turn: Mutex::new(()),
            budget,
            max_tasks,
        }
    }

    /// Drop the cached records of every task not used for `idle` (they are read again
    /// when next asked for); the availability index is kept.
    pub fn release_idle(&self, idle: Duration) {
        let now = Instant::now();
        lock(&self.tasks).retain(|_, slot| now.duration_since(slot.used) < idle);
    }

    /// The bytes of records cached now, and how many tasks they belong to.
    pub fn cached(&self) -> (usize, usize) {
        let tasks = lock(&self.tasks);
        (tasks.values().map(|s| s.bytes).sum(), tasks.len())
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The directory holding `task`'s records.
    pub fn task_dir(&self, task: &TaskName) -> PathBuf {
        self.state_dir.join(task.as_str())
    }

    /// Every record of `task`, in sequence order (empty when the task has none).
    pub fn records(&self, task: &TaskName) -> Result<Vec<Record>, StoreError> {
        self.with_records(task, <[Record]>::to_vec)
    }

    /// Call `f` with every record of `task`, in sequence order, without copying them.
    /// The task's cache is held while `f` runs: `f` must not call back into this store.
    pub fn with_records<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&[Record]) -> R,
    ) -> Result<R, StoreError> {
        let cache = self.cache(task);
        let mut held = lock(&cache);
        let refreshed = self.refresh(task, &mut held);
        let bytes = held.bytes;
        let answer = refreshed.map(|_| f(&held.records));
        drop(held);
        self.used(task, &cache, bytes);
        answer
    }

    /// Call `f` with every record of `task` in sequence order and what the hash chain
    /// vouches for (see `core::chain`), without copying them. As [`Store::with_records`].
    pub fn with_trusted_records<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&[Record], &Trust) -> R,
    ) -> Result<R, StoreError> {
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        if let Checked::Stale = self.check_files(task, &mut cache)? {
            *cache = TaskCache::default();
        }
        self.refresh(task, &mut cache)?;
        let trust = self.judged(task, &mut cache);
        let answer = f(&cache.records, &trust);
        let bytes = cache.bytes;
        drop(cache);
        self.used(task, &slot, bytes);
        Ok(answer)
    }

    /// Compare the cached files of `task` with its directory now, by `stat` alone for a
    /// file whose identity vouches for its bytes: a file whose identity changed is read
    /// again and kept if its bytes are the same; new files past the highest sequence are
    /// read into the cache. Anything else (a file changed, gone, or new below the highest)
    /// makes the cache stale, and the caller reads the task afresh.
    fn check_files(&self, task: &TaskName, cache: &mut TaskCache) -> Result<Checked, StoreError> {
        if !cache.listed {
            return Ok(Checked::Current);
        }
        let dir = self.task_dir(task);
        let listing = match fs::read_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(if cache.records.is_empty() {
                    Checked::Current
                } else {
                    Checked::Stale
                });
            }
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut files = Vec::with_capacity(cache.records.len() + 1);
        let mut strays = Vec::new();
        for entry in listing {
            let entry = entry.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`",
                dir.display()
            )))?;
            let name = entry.file_name();
            match chain::FileName::of(&name) {
                chain::FileName::Record(sequence) => files.push((sequence, entry)),
                chain::FileName::Store => {}
                chain::FileName::Stray => strays.push(name.to_string_lossy().into_owned()),
            }
        }
        strays.sort_unstable();
        cache.strays = strays;
        files.sort_unstable_by_key(|(sequence, _)| *sequence);
        let known = files.partition_point(|(s, _)| *s <= cache.highest);
        let (old, new) = files.split_at(known);
        if old.len() != cache.records.len()
            || old
                .iter()
                .zip(&cache.records)
                .any(|((s, _), r)| *s != r.envelope.sequence)
        {
            return Ok(Checked::Stale);
        }
        let now = SystemTime::now();
        for (at, (_, entry)) in old.iter().enumerate() {
            // `stat` relative to the open directory (a symbolic link is its own identity,
            // never the file read through it, so it is always judged by its bytes).
            let same = match (entry.metadata(), cache.files[at]) {
                (Ok(stat), Some(kept)) => FileId::of(&stat, now) == Some(kept),
                (Err(e), _) if e.kind() == io::ErrorKind::NotFound => return Ok(Checked::Stale),
                _ => false,
            };
            if same {
                continue;
            }
            // Touched, put back, or too recent to vouch: judge it by its bytes.
            match read_record(&entry.path()) {
                Ok(Some(read)) if read.digest == cache.digests[at] => cache.files[at] = read.file,
                _ => return Ok(Checked::Stale),
            }
        }
        for (sequence, _) in new {
            if let Some(read) = read_record(&dir.join(sequence_file(*sequence)))? {
                cache.highest = cache.highest.max(*sequence);
                push_in_order(cache, read);
            }
        }
        Ok(Checked::Current)
    }

    /// Every record file of `task`, read afresh from disk (not from the cache), in the
    /// order of the sequences their names hold, after the strays (the names that are not
    /// record files nor the store's own, sequence 0 and no bytes): what `verify` walks.
    pub fn stored_files(&self, task: &TaskName) -> Result<Vec<StoredFile>, StoreError> {
        let dir = self.task_dir(task);
        let listing = match fs::read_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut files = Vec::new();
        for entry in listing {
            let entry = entry.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`",
                dir.display()
            )))?;
            let name = entry.file_name();
            let sequence = match chain::FileName::of(&name) {
                chain::FileName::Record(sequence) => sequence,
                chain::FileName::Store => continue,
                chain::FileName::Stray => {
                    files.push(StoredFile {
                        name: name.to_string_lossy().into_owned(),
                        sequence: 0,
                        bytes: Vec::new(),
                    });
                    continue;
                }
            };
            let path = dir.join(&name);
            let mut bytes = Vec::new();
            open_in_task(&path)
                .and_then(|mut file| file.read_to_end(&mut bytes))
                .map_err(io_error(format!(
                    "cannot read record `{}`; check its permissions",
                    path.display()
                )))?;
            files.push(StoredFile {
                name: name.to_string_lossy().into_owned(),
                sequence,
                bytes,
            });
        }
        files.sort_by(|a, b| (a.sequence, &a.name).cmp(&(b.sequence, &b.name)));
        Ok(files)
    }

    /// Every task of the state directory, sorted. Directories whose name is not a valid
    /// task are not tasks and are skipped.
    pub fn tasks(&self) -> Result<Vec<TaskName>, StoreError> {
        let entries = match fs::read_dir(&self.state_dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other.map_err(io_error(format!(
                "cannot list the state directory `{}`; check that it is readable",
                self.state_dir.display()
            )))?,
        };
        let mut tasks = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(format!(
                "cannot list the state directory `{}`",
                self.state_dir.display()
            )))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let task = entry
                .file_name()
                .to_str()
                .and_then(|n| TaskName::new(n).ok());
            if let (true, Some(task)) = (is_dir, task) {
                tasks.push(task);
            }
        }
        tasks.sort();
        Ok(tasks)
    }

    /// Every consultation record of every task, for availability.
    pub fn consultations_all_tasks(&self) -> Result<Vec<Record>, StoreError> {
        let mut consultations = Vec::new();
        for task in self.tasks()? {
            self.with_records(&task, |records| {
                consultations.extend(
                    records
                        .iter()
                        .filter(|r| matches!(r.body, Body::Consultation(_)))
                        .cloned(),
                );
            })?;
        }
        Ok(consultations)
    }

    /// Admit `input` through the writer under the task's lock and store it durably.
    pub fn write(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
    ) -> Result<Record, StoreError> {
        self.write_scrubbing(task, input, plan_env, &[])
    }

    /// [`Store::write`], the writer also removing each of `secrets` (the request's own
    /// credential values) by value from every string of the record.
    pub fn write_scrubbing(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
    ) -> Result<Record, StoreError> {
        self.write_as(task, input, plan_env, secrets, None)
    }

    /// Store a consultation a daemon's job drafted (`input`, without `source`), attested
    /// with this machine's key (created the first time) as written by `provenance.job`.
    ///
    /// The one way a consultation that can count as a review is written: the runner calls
    /// it for each outcome (its own advisors', a relayed mesh answer, an answered inbox
    /// review). No surface reaches it; the `record` verb refuses consultations. Public for
    /// the tests and fixtures that stand in for a job; the process must have installed its
    /// data directory ([`crate::machine::install`]).
    pub fn write_consultation(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        provenance: &Provenance,
    ) -> Result<Record, StoreError> {
        let machine = crate::machine::installed().ok_or_else(|| StoreError::Io {
            context: "cannot attest a consultation: this process named no data directory to \
                      keep the attestation key in (the daemon and the CLI install theirs)"
                .to_string(),
            source: io::Error::from(io::ErrorKind::NotFound),
        })?;
        let key = machine.key_or_create().map_err(io_error(format!(
            "cannot make or read the attestation key `{}`; check that the data directory is \
             yours and writable",
            crate::machine::attest::key_path(machine.data_dir()).display()
        )))?;
        let mut input = input.clone();
        if let (Some(object), Some(source)) = (input.as_object_mut(), provenance.source) {
            let source: String = source
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_SOURCE_CHARS)
                .collect();
            if !source.trim().is_empty() {
                object.insert("source".into(), serde_json::Value::String(source));
            }
        }
        self.write_as(
            task,
            &input,
            None,
            provenance.secrets,
            Some((&key, provenance)),
        )
    }

    fn write_as(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
        attest: Option<(&crate::machine::attest::Key, &Provenance)>,
    ) -> Result<Record, StoreError> {
        // A shared task (docs/JOURNAL.md): another machine first means judge again.
        let mut first = None;
        for _ in 0..16 {
            let result = self.write_once(task, input, plan_env, secrets, attest);
            match crate::journal::seam::take_behind() {
                Some(note) => first = Some(note),
                None => {
                    return match (result, first) {
                        (Err(StoreError::Refused(mut r)), Some(note)) => {
                            r.message = format!("{} ({note})", r.message);
                            Err(StoreError::Refused(r))
                        }
                        (result, _) => result,
                    }
                }
            }
        }
        self.write_once(task, input, plan_env, secrets, attest)
    }

    fn write_once(
        &self,
        task: &TaskName,
        input: &serde_json::Value,
        plan_env: Option<&PlanEnv>,
        secrets: &[String],
        attest: Option<(&crate::machine::attest::Key, &Provenance)>,
    ) -> Result<Record, StoreError> {
        let daemon = attest.is_some();
        let dir = self.task_dir(task);
        let fresh = !dir.exists();
        if fresh {
            // Judge the first record against the empty task before creating anything, so
            // a refusal leaves no trace at all.
            let mut env =
                self.write_env(task, 1, plan_env, chain::GENESIS.to_string(), None, secrets);
            env.daemon = daemon;
            writer::admit(&[], input, &env)?;
            self.create_task_dir(&dir)?;
        }
        let _held = self.lock_task(&dir)?;
        let slot = self.cache(task);
        let mut cache = lock(&slot);
        let stale = self.refresh(task, &mut cache)?;
        for name in stale {
            // Under the lock no write is in flight: these are left by a killed writer.
            let _ = fs::remove_file(dir.join(name));
        }
        let sequence = cache.highest + 1;
        let prev = cache
            .digests
            .last()
            .cloned()
            .unwrap_or_else(|| chain::GENESIS.to_string());
        // The writer refuses to build on a broken chain: the walk it keeps covers what it
        // wrote itself, so only records written by others are walked (and admitted again)
        // here, once each. A plan (it never reuses a conclusion that is not vouched for)
        // and a conclusion (only consultations that count are its review) also look at
        // what the attestations and this machine vouch for; other writes need not.
        let is_conclusion =
            input.get("kind").and_then(serde_json::Value::as_str) == Some("conclusion");
        let mut trust = writer_trust(task, &mut cache);
        if plan_env.is_some() || is_conclusion {
            trust = self.vouched(task, &mut cache, trust);
        }
        let mut env = self.write_env(task, sequence, plan_env, prev, Some(&trust), secrets);
        env.daemon = daemon;
        let index = cache.rules.rules_index();
        let mut record = writer::admit_indexed(&cache.records, index, input, &env)?;
        if sequence > chain::MAX_SEQUENCE {
            return Err(StoreError::Io {
                context: format!(
                    "task `{task}` holds record {}, the highest a record file's name can \
                     hold; record into another task",
                    chain::MAX_SEQUENCE
                ),
                source: io::Error::from(io::ErrorKind::StorageFull),
            });
        }
        if let Some((key, provenance)) = attest {
            key.attest(&mut record, provenance.job, provenance.counts);
        }
        // This machine anchors the new head when it vouched for the task before it (or
        // the task is new); a foreign task stays foreign until adopted.
        let anchors = crate::machine::installed().map(|m| m.anchors(&self.state_dir));
        let local = anchors.as_ref().is_some_and(|anchors| {
            let highest = cache.records.last().map(|r| r.envelope.sequence);
            chain::foreign(task, anchors.head(task).as_ref(), highest, |s| {
                digest_at(&cache, s)
            })
            .is_none()
        });
        let name = file_name(&record);
        let mut bytes = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Io {
            context: format!("cannot serialise record `{}`", record.id()),
            source: io::Error::other(e),
        })?;
        bytes.push(b'\n');
        crate::journal::seam::publish(&self.state_dir, task, sequence, record.id(), &bytes)
            .map_err(|context| StoreError::Io {
                context,
                source: io::Error::from(io::ErrorKind::NotConnected),
            })?;
        write_atomically(&dir, &name, &bytes)?;
        let digest = chain::digest(&bytes);
        if let (true, Some(anchors)) = (local, &anchors) {
            let head = chain::Head {
                sequence,
                hash: digest.clone(),
            };
            if let Err(e) = anchors.set(task, &head) {
                // The record is stored; an older anchor still vouches for the task.
                tracing::warn!(error = %e, task = %task, "cannot anchor the task's new head");
            }
        }
        cache.highest = sequence;
        cache.records.push(record.clone());
        cache.digests.push(digest);
        let written = fs::metadata(dir.join(&name)).ok();
        cache
            .files
            .push(written.and_then(|stat| FileId::of(&stat, SystemTime::now())));
        cache.bytes += bytes.len();
        // What the writer admitted it need not admit again: its walk covers it by links.
        let rules = std::mem::take(&mut cache.rules);
        cache.rules = extended(task, &cache, rules, chain::Depth::Links);
        self.feed(task, &cache.records);
        self.feed_track(task, &mut cache);
        let cached = cache.bytes;
        drop(cache);
        self.used(task, &slot, cached);
        Ok(record)
    }

    fn write_env<'a>(
        &self,
        task: &'a TaskName,
        sequence: u64,
        plan_env: Option<&'a PlanEnv<'a>>,
        prev: String,
        trust: Option<&'a Trust>,
        secrets: &'a [String],
    ) -> WriteEnv<'a> {
        WriteEnv {
            task,
            now: time::OffsetDateTime::now_utc(),
            id: ulid::Ulid::new().to_string(),
            sequence,
            plan_env,
            prev,
            trust,
            secrets,
            daemon: false,
        }
    }

    /// What the chain vouches for in `task` (the walk kept in `cache`, extended), judged
    /// by this machine when the process installed its data directory: each new
    /// consultation's attestation checked against its key, and the task's anchored head.
    fn judged(&self, task: &TaskName, cache: &mut TaskCache) -> Trust {
        let trust = trust_of(task, cache);
        self.vouched(task, cache, trust)
    }

    /// `trust` with what the attestations and this machine vouch for in `task`.
    fn vouched(&self, task: &TaskName, cache: &mut TaskCache, trust: Trust) -> Trust {
        let Some(machine) = crate::machine::installed() else {
            return trust;
        };
        if cache.attestations.judged() > cache.records.len() {
            cache.attestations = Arc::default();
        }
        let from = cache.attestations.judged();
        if from < cache.records.len() {
            let key = machine.key();
            // Shared with the trusts handed out before: copied only when new records came.
            let attestations = Arc::make_mut(&mut cache.attestations);
            crate::machine::attest::judge(&cache.records[from..], &key, attestations);
            attestations.set_judged(cache.records.len());
        }
        let anchored = machine.anchors(&self.state_dir).head(task);
        let highest = cache.records.last().map(|r| r.envelope.sequence);
        let foreign = chain::foreign(task, anchored.as_ref(), highest, |s| digest_at(cache, s));
        trust
            .with_attestations(cache.attestations.clone())
            .with_foreign(foreign)
    }

    /// The cache of `task`, created empty on first use.
    fn cache(&self, task: &TaskName) -> Arc<Mutex<TaskCache>> {
        lock(&self.tasks)
            .entry(task.clone())
            .or_insert_with(|| Slot {
                cache: Arc::default(),
                used: Instant::now(),
                bytes: 0,
            })
            .cache
            .clone()
    }

    /// Feed the index the records of `task` past the last one it was fed (`records` in
    /// sequence order).
    fn feed(&self, task: &TaskName, records: &[Record]) {
        let mut circuit = lock(&self.circuit);
        let fed = circuit.fed.get(task).copied().unwrap_or(0);
        let new = records
            .iter()
            .rev()
            .take_while(|r| r.envelope.sequence > fed)
            .count();
        let fresh = &records[records.len() - new..];
        let since = time::OffsetDateTime::now_utc() - RECENT_SPEND;
        for record in fresh {
            circuit.feed(record, since);
        }
        let highest = fresh.last().map_or(fed, |r| r.envelope.sequence);
        circuit.fed.insert(task.clone(), highest.max(fed));
    }

    /// Feed the track index `task`'s records as `cache` holds them, and where the chain
    /// breaks when the task has resolutions (see `store::track`).
    fn feed_track(&self, task: &TaskName, cache: &mut TaskCache) {
        if lock(&self.track).feed(task, &cache.records, &cache.digests) {
            trust_of(task, cache);
            lock(&self.track).judged(task, cache.chain.state().broken_at);
        }
    }

    /// Every advisor's track record (`core::track`) over every task of the state
    /// directory, as the index was last caught up ([`Store::plan_history`] catches it up);
    /// a task whose resolutions another process wrote is read through the cache first,
    /// so that the chain is walked.
    pub fn track_records(
        &self,
    ) -> Result<std::collections::BTreeMap<String, crate::core::track::TrackRecord>, StoreError>
    {
        let unjudged = lock(&self.track).unjudged();
        for task in unjudged {
            self.with_records(&task, |_| ())?;
        }
        Ok(lock(&self.track).tally())
    }

    /// Note that `task`'s cache (holding `bytes`) was just used, and drop the least
    /// recently used other tasks while the caches hold more than the budget or more
    /// tasks than the limit.
    fn used(&self, task: &TaskName, cache: &Arc<Mutex<TaskCache>>, bytes: usize) {
        let mut tasks = lock(&self.tasks);
        if let Some(slot) = tasks.get_mut(task) {
            if Arc::ptr_eq(&slot.cache, cache) {
                slot.used = Instant::now();
                slot.bytes = bytes;
            }
        }
        let mut total: usize = tasks.values().map(|s| s.bytes).sum();
        while total > self.budget || tasks.len() > self.max_tasks {
            let oldest = tasks
                .iter()
                .filter(|(name, _)| *name != task)
                .min_by_key(|(_, slot)| slot.used)
                .map(|(name, _)| name.clone());
            let Some(oldest) = oldest else { break };
            if let Some(slot) = tasks.remove(&oldest) {
                total -= slot.bytes;
            }
        }
    }

    /// The consultations availability needs, across every task of the state directory:
    /// a [`HistoryTail`]'s records, equal for availability to every consultation stored.
    ///
    /// A task is read whole the first time; after that only the record files past the
    /// last one fed are read, whether or not its records are still cached.
    pub fn circuit_history(&self) -> Result<Vec<Record>, StoreError> {
        self.feed_every_task()?;
        Ok(lock(&self.circuit).tail.records())
    }

    /// The consultations budgets count for `task` at `now`, equal for budgets to every
    /// consultation stored: all of `task`'s (its per-task window) and, from the other
    /// tasks, those of the days around `now` (a day window holds `now`, and the index
    /// keeps the last [`RECENT_SPEND`] by the wall clock). Each consultation comes once.
    pub fn budget_history(
        &self,
        task: &TaskName,
        now: time::OffsetDateTime,
    ) -> Result<Vec<Record>, StoreError> {
        self.keep_spending()?;
        self.feed_every_task()?;
        self.spend_history(task, now)
    }

    /// What a plan judges availability on: [`Store::circuit_history`], and
    /// [`Store::budget_history`] when `budgets` are in force, with the state directory
    /// looked over once for both.
    pub fn plan_history(
        &self,
        task: &TaskName,
        now: time::OffsetDateTime,
        budgets: bool,
    ) -> Result<(Vec<Record>, Option<Vec<Record>>), StoreError> {
        if budgets {
            self.keep_spending()?;
        }
        self.feed_every_task()?;
        let circuit = lock(&self.circuit).tail.records();
        let spend = if budgets {
            Some(self.spend_history(task, now)?)
        } else {
            None
        };
        Ok((circuit, spend))
    }

    /// Make the index keep the consultations budgets count, if it does not yet: from now
    /// on every record fed is kept, and the consultations fed before (which it did not
    /// keep) are read back from every task once. A store never fed has nothing to read
    /// back: its first catch-up feeds it everything.
    fn keep_spending(&self) -> Result<(), StoreError> {
        let _turn = lock(&self.spending_turn);
        let fed_before = {
            let mut circuit = lock(&self.circuit);
            if circuit.spending == Spending::Kept {
                return Ok(());
            }
            circuit.spending = Spending::Gathering;
            !circuit.fed.is_empty()
        };
        if fed_before {
            let since = time::OffsetDateTime::now_utc() - RECENT_SPEND;
            let read = self.consultations_all_tasks();
            let mut circuit = lock(&self.circuit);
            let earlier = match read {
                Ok(earlier) => earlier,
                Err(e) => {
                    circuit.spending = Spending::Off;
                    circuit.recent = Vec::new();
                    return Err(e);
                }
            };
            // Records fed while gathering are kept already, and read back too: once each.
            let kept: std::collections::HashSet<String> = circuit
                .recent
                .iter()
                .map(|s| s.record.id().to_string())
                .collect();
            circuit.recent.extend(
                earlier
                    .iter()
                    .filter(|r| !kept.contains(r.id()))
                    .filter_map(|r| Spent::of(r, since)),
            );
        }
        lock(&self.circuit).spending = Spending::Kept;
        Ok(())
    }

    /// [`Store::budget_history`] over the index as it was last fed.
    fn spend_history(
        &self,
        task: &TaskName,
        now: time::OffsetDateTime,
    ) -> Result<Vec<Record>, StoreError> {
        let mut history = self.with_records(task, |records| {
            records
                .iter()
                .filter(|r| matches!(r.body, Body::Consultation(_)))
                .map(spend_only)
                .collect::<Vec<_>>()
        })?;
        let since = now - RECENT_SPEND;
        let mut circuit = lock(&self.circuit);
        let wall = time::OffsetDateTime::now_utc() - RECENT_SPEND;
        circuit.recent.retain(|s| s.at >= wall.min(since));
        history.extend(
            circuit
                .recent
                .iter()
                .filter(|s| s.at >= since && s.record.envelope.task != task.as_str())
                .map(|s| (*s.record).clone()),
        );
        Ok(history)
    }

    /// Feed the index every task's records: a task never fed is read whole, the others
    /// only past the last record file fed. A store asked more than once watches the state
    /// directory (inotify) and then looks only at the tasks whose directories changed,
    /// so the cost of catching up does not grow with the number of tasks.
    fn feed_every_task(&self) -> Result<(), StoreError> {
        let changed = self.changed_tasks()?;
        let fed = self.feed_tasks(&changed);
        if fed.is_err() {
            // The tasks after the one that failed were not looked at: the watcher has
            // consumed their changes, so look at every task next time.
            if let Some(watcher) = lock(&self.circuit).watcher.as_mut() {
                watcher.forget();
            }
        }
        fed
    }

    /// Feed the index what `tasks` hold past what it was fed.
    fn feed_tasks(&self, tasks: &[TaskName]) -> Result<(), StoreError> {
        for task in tasks {
            let fed = lock(&self.circuit).fed.get(task).copied();
            match fed {
                // Never read: read it whole (which feeds the index).
                None => self.with_records(task, |_| ())?,
                Some(fed) => {
                    let dir = self.task_dir(task);
                    let mut next = fed + 1;
                    let (mut found, mut digests) = (Vec::new(), Vec::new());
                    while let Some(read) = read_record(&dir.join(sequence_file(next)))? {
                        found.push(read.record);
                        digests.push(read.digest);
                        next += 1;
                    }
                    self.feed(task, &found);
                    lock(&self.track).feed_read(task, &found, &digests);
                }
            }
        }
        Ok(())
    }

    /// The tasks the index must look at to catch up: those the watcher saw change, or
    /// every task when there is no watcher or it cannot vouch for having seen everything.
    /// A task is watched before it is looked at, so nothing written after goes unseen.
    fn changed_tasks(&self) -> Result<Vec<TaskName>, StoreError> {
        let mut circuit = lock(&self.circuit);
        circuit.catch_ups += 1;
        if circuit.watcher.is_none()
            && circuit.catch_ups >= 2
            && circuit.watcher_failures < MAX_WATCHER_FAILURES
            && self.state_dir.is_dir()
        {
            circuit.watcher = watch::Watcher::new(&self.state_dir);
            if circuit.watcher.is_none() {
                circuit.watcher_failures += 1;
            }
        }
        let changed = match circuit.watcher.as_mut().map(|w| w.changed(&self.state_dir)) {
            Some(Some(watch::Changed::Tasks(tasks))) => return Ok(tasks.into_iter().collect()),
            Some(Some(watch::Changed::All)) => true,
            Some(None) => {
                // The watcher lost its footing: scan every time from now on.
                circuit.watcher = None;
                false
            }
            None => false,
        };
        let tasks = self.tasks()?;
        if let (true, Some(watcher)) = (changed, circuit.watcher.as_mut()) {
            let all_watched = tasks
                .iter()
                .all(|task| watcher.watches(task) || watcher.watch(&self.state_dir, task));
            if !all_watched {
                circuit.watcher = None;
                circuit.watcher_failures += 1;
            }
        }
        Ok(tasks)
    }

    /// Read the records of `task` not yet in `cache`; return the temporary files seen
    /// (for a writer holding the lock to remove).
    fn refresh(&self, task: &TaskName, cache: &mut TaskCache) -> Result<Vec<OsString>, StoreError> {
        let dir = self.task_dir(task);
        let mut temps = Vec::new();
        if !cache.listed {
            temps = self.list(task, &dir, cache)?;
        }
        // Record n + 1 is created only once record n is in place: look for the next ones.
        while cache.highest < chain::MAX_SEQUENCE {
            let Some(read) = read_record(&dir.join(sequence_file(cache.highest + 1)))? else {
                break;
            };
            cache.highest += 1;
            push_in_order(cache, read);
        }
        self.feed(task, &cache.records);
        self.feed_track(task, cache);
        Ok(temps)
    }

    /// The first read of a task: every record file of its directory.
    fn list(
        &self,
        task: &TaskName,
        dir: &Path,
        cache: &mut TaskCache,
    ) -> Result<Vec<OsString>, StoreError> {
        let entries = match fs::read_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                cache.listed = true;
                return Ok(Vec::new());
            }
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut sequences = Vec::new();
        let mut temps = Vec::new();
        let mut strays = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`",
                dir.display()
            )))?;
            let name = entry.file_name();
            if let Some(sequence) = record_sequence(&name) {
                sequences.push(sequence);
            } else if is_temp_file(&name) {
                temps.push(name);
            } else if name != LOCK_FILE {
                strays.push(name.to_string_lossy().into_owned());
            }
        }
        sequences.sort_unstable();
        strays.sort_unstable();
        // A listing taken while another process writes may miss an entry added during it:
        // records are created in sequence order, so a gap below the highest is a record
        // written while listing, found by looking up the missing names once more. Only a
        // bounded number of them: a planted huge sequence is a gap the walk reports, not
        // ten billion names to look up.
        let listed: HashSet<u64> = sequences.iter().copied().collect();
        let highest = sequences.last().copied().unwrap_or(0);
        let missing = highest.saturating_sub(sequences.len() as u64);
        let mut records = Vec::with_capacity(sequences.len());
        if missing <= MAX_LOOKED_UP {
            for sequence in 1..=highest {
                let path = dir.join(sequence_file(sequence));
                let found = if listed.contains(&sequence) {
                    read_record(&path)?
                } else {
                    read_record(&path).unwrap_or(None)
                };
                records.extend(found);
            }
        } else {
            for &sequence in &sequences {
                records.extend(read_record(&dir.join(sequence_file(sequence)))?);
            }
        }
        records.sort_by_key(|read| read.record.envelope.sequence);
        cache.bytes = records.iter().map(|read| read.size).sum();
        cache.records = Vec::with_capacity(records.len());
        cache.digests = Vec::with_capacity(records.len());
        cache.files = Vec::with_capacity(records.len());
        for read in records {
            cache.records.push(read.record);
            cache.digests.push(read.digest);
            cache.files.push(read.file);
        }
        cache.highest = highest;
        cache.strays = strays;
        cache.listed = true;
        Ok(temps)
    }

    /// Create a task's directory (and the state directory), private to the user.
    fn create_task_dir(&self, dir: &Path) -> Result<(), StoreError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_error(format!(
                "cannot create `{}`; check that the state directory `{}` is writable or \
                 choose another with --state-dir",
                dir.display(),
                self.state_dir.display()
            )))?;
        // Make the new directory's entry durable before records go into it.
        sync_dir(&self.state_dir)
    }

    /// Take the task's exclusive lock, waiting for any other writer to finish.
    fn lock_task(&self, dir: &Path) -> Result<Flock<File>, StoreError> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
            .open(&path)
            .map_err(|e| refused_link(&path, e))
            .map_err(io_error(format!(
                "cannot open the task lock `{}`; it must be a regular file in a writable \
                 directory",
                path.display()
            )))?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusive) {
                Ok(held) => return Ok(held),
                Err((back, Errno::EINTR)) => file = back,
                Err((_, errno)) => {
                    return Err(StoreError::Io {
                        context: format!(
                            "cannot lock `{}`; the file system must support `flock`",
                            path.display()
                        ),
                        source: io::Error::from(errno),
                    })
                }
            }
        }
    }
}

/// Write `bytes` to `dir/name` so that it appears whole or not at all: a temporary file
/// in the same directory, flushed, renamed into place, and the directory flushed.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let target = dir.join(name);
    if fs::symlink_metadata(&target).is_ok() {
        // Under the task's lock this cannot happen; if it does, keep what is stored.
        return Err(StoreError::Io {
            context: format!(
                "record `{}` already exists; refusing to overwrite it (is another program \
                 writing into the state directory?)",
                target.display()
            ),
            source: io::Error::from(io::ErrorKind::AlreadyExists),
        });
    }
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_flags::NOFOLLOW)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, &target)
    })();
    if let Err(source) = result {
        let _ = fs::remove_file(&temp);
        return Err(StoreError::Io {
            context: format!(
                "cannot write record `{}`; nothing was stored (check free space and \
                 permissions)",
                target.display()
            ),
            source,
        });
    }
    sync_dir(dir)
}

/// Flush a directory so that the entries created or renamed in it survive a crash.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(format!(
            "cannot flush directory `{}`",
            dir.display()
        )))
}

#[cfg(test)]
mod tests {
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
            serde_json::from_slice(&fs::read(task_dir.join(sequence_file(2))).unwrap())
                .expect("json");
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
        // The whole history of `alpha` is failures: every one is kept.
        assert_eq!(store.circuit_history().expect("read").len(), 51);
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
        store.release_idle(Duration::ZERO);
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
        let cached = |name: &str| lock(&store.tasks).contains_key(&task(name));
        assert_eq!(store.cached().1, 2);
        assert!(cached("c") && cached("d"));
        assert_eq!(store.records(&task("a")).expect("read again").len(), 1);
        assert!(cached("a") && cached("d"));
        assert_eq!(store.cached().1, 2);
    }
}
