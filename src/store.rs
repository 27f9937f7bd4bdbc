//! The store: one JSON file per record under `<state>/<task>/`, written atomically and
//! serialised per task by a lock, so concurrent writers in many processes never lose,
//! duplicate or tear a record.
//!
//! Layout: `<state>/<task>/<sequence>.json`, the sequence zero-padded to ten digits so a
//! directory listing sorts in sequence order (`0000000001.json`, ...). `<state>/<task>/.lock`
//! is the task's lock; `.<name>.<pid>.tmp` files are writes in flight. Names starting with
//! `.` are never read as records, nor is any name other than `<digits>.json`.
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

use crate::core::availability::HistoryTail;
use crate::core::chain::{self, Entry, Trust};
use crate::core::policy::PlanEnv;
use crate::core::records::{Body, Record, TaskName};
use crate::core::writer::{self, Refusal, WriteEnv};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The name of a task's lock file, inside the task's directory.
pub const LOCK_FILE: &str = ".lock";

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
    /// The highest sequence among the record files read.
    highest: u64,
    /// The hash chain's walk over `records` so far: a view extends it over the records
    /// read since instead of walking the whole task again.
    chain: chain::Progress,
    /// The size on disk of the records read.
    bytes: usize,
}

/// How many bytes of records (their size on disk) a [`Store`] keeps cached across its
/// tasks before it drops the least recently used ones.
pub const CACHE_BUDGET_BYTES: usize = 32 * 1024 * 1024;

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
    /// the last [`RECENT_SPEND`] and later, stripped to what a cost needs.
    recent: Vec<Spent>,
    /// The highest sequence fed, per task.
    fed: HashMap<TaskName, u64>,
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

impl CircuitIndex {
    fn feed(&mut self, record: &Record, since: time::OffsetDateTime) {
        self.tail.feed(record);
        if let Some(at) = crate::core::cost::spent_at(record) {
            if at >= since {
                self.recent.push(Spent {
                    at,
                    record: Box::new(spend_only(record)),
                });
            }
        }
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
    budget: usize,
}

/// The file name a record is stored under: its sequence, zero-padded to ten digits so that
/// names sort in sequence order.
pub fn file_name(record: &Record) -> String {
    sequence_file(record.envelope.sequence)
}

fn sequence_file(sequence: u64) -> String {
    chain::record_file(sequence)
}

/// The sequence a record file holds, if `name` is a record file (`<digits>.json`):
/// temporary files and the lock start with a dot and are never records.
fn record_sequence(name: &OsStr) -> Option<u64> {
    let digits = name.to_str()?.strip_suffix(".json")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether a directory entry is a temporary file of a write in flight (or of a dead one).
fn is_temp_file(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
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

/// Read and parse the record file at `path`, with the chain's hash of its bytes; `None`
/// when there is none.
fn read_record(path: &Path) -> Result<Option<(Record, String, usize)>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
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
    Ok(Some((record, chain::digest(&bytes), bytes.len())))
}

/// Append `record` and its hash, keeping the cache in sequence order.
fn push_in_order(cache: &mut TaskCache, (record, digest, size): (Record, String, usize)) {
    cache.bytes += size;
    let at = cache
        .records
        .partition_point(|r| r.envelope.sequence <= record.envelope.sequence);
    cache.records.insert(at, record);
    cache.digests.insert(at, digest);
}

/// The chain's view of cached records: each stored under its own sequence's name.
fn entries<'r>(records: &'r [Record], digests: &'r [String]) -> Vec<Entry<'r>> {
    records
        .iter()
        .zip(digests)
        .map(|(record, digest)| Entry {
            file: None,
            sequence: record.envelope.sequence,
            digest,
            record: Ok(record),
        })
        .collect()
}

/// What the chain vouches for in the cached records. The walk kept in the cache is
/// extended over the records read since it was taken; the cached records are never read
/// again, so this is what walking them all would find.
fn trust_of(task: &TaskName, cache: &mut TaskCache) -> Trust {
    let newest = cache
        .records
        .last()
        .map(|r| r.envelope.sequence)
        .zip(cache.digests.last().map(String::as_str));
    let walked = cache.chain.head().map(|h| (h.sequence, h.hash.as_str()));
    if cache.chain.walked() != cache.records.len() || walked != newest {
        let progress = std::mem::take(&mut cache.chain);
        cache.chain = chain::extend(task, &entries(&cache.records, &cache.digests), progress);
    }
    Trust::of_progress(&cache.records, &cache.chain)
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> StoreError {
    move |source| StoreError::Io { context, source }
}

impl Store {
    /// A store over `state_dir` (created on first write).
    pub fn open(state_dir: &Path) -> Store {
        Store::with_budget(state_dir, CACHE_BUDGET_BYTES)
    }

    /// This process's store of `state_dir` ([`Stores::process`]), whose cache of records
    /// is shared by every caller.
    pub fn shared(state_dir: &Path) -> Arc<Store> {
        Stores::process().get(state_dir)
    }

    /// A store over `state_dir` caching at most about `budget` bytes of records.
    pub fn with_budget(state_dir: &Path, budget: usize) -> Store {
        Store {
            state_dir: state_dir.to_path_buf(),
            tasks: Mutex::new(HashMap::new()),
            circuit: Mutex::new(CircuitIndex::default()),
            budget,
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
        let cache = self.cache(task);
        let mut cache = lock(&cache);
        self.refresh(task, &mut cache)?;
        let trust = trust_of(task, &mut cache);
        Ok(f(&cache.records, &trust))
    }

    /// Every record file of `task`, read afresh from disk (not from the cache), in the
    /// order of the sequences their names hold: what `verify` walks.
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
            let Some(sequence) = record_sequence(&name) else {
                continue;
            };
            let path = dir.join(&name);
            let bytes = fs::read(&path).map_err(io_error(format!(
                "cannot read record `{}`; check its permissions",
                path.display()
            )))?;
            files.push(StoredFile {
                name: name.to_string_lossy().into_owned(),
                sequence,
                bytes,
            });
        }
        files.sort_by_key(|f| f.sequence);
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
        let dir = self.task_dir(task);
        let fresh = !dir.exists();
        if fresh {
            // Judge the first record against the empty task before creating anything, so
            // a refusal leaves no trace at all.
            let env = self.write_env(task, 1, plan_env, chain::GENESIS.to_string(), None, secrets);
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
        // Only a plan looks back at what the chain vouches for (it never reuses an
        // unverified conclusion); other writes need not walk the task.
        let trust = plan_env.map(|_| trust_of(task, &mut cache));
        let env = self.write_env(task, sequence, plan_env, prev, trust.as_ref(), secrets);
        let record = writer::admit(&cache.records, input, &env)?;
        let name = file_name(&record);
        let mut bytes = serde_json::to_vec_pretty(&record).map_err(|e| StoreError::Io {
            context: format!("cannot serialise record `{}`", record.id()),
            source: io::Error::other(e),
        })?;
        bytes.push(b'\n');
        write_atomically(&dir, &name, &bytes)?;
        cache.highest = sequence;
        cache.records.push(record.clone());
        cache.digests.push(chain::digest(&bytes));
        cache.bytes += bytes.len();
        self.feed(task, &cache.records);
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
        }
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

    /// Note that `task`'s cache (holding `bytes`) was just used, and drop the least
    /// recently used other tasks while the caches hold more than the budget.
    fn used(&self, task: &TaskName, cache: &Arc<Mutex<TaskCache>>, bytes: usize) {
        let mut tasks = lock(&self.tasks);
        if let Some(slot) = tasks.get_mut(task) {
            if Arc::ptr_eq(&slot.cache, cache) {
                slot.used = Instant::now();
                slot.bytes = bytes;
            }
        }
        let mut total: usize = tasks.values().map(|s| s.bytes).sum();
        while total > self.budget {
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
        self.feed_every_task()?;
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
    /// only past the last record file fed.
    fn feed_every_task(&self) -> Result<(), StoreError> {
        for task in self.tasks()? {
            let fed = lock(&self.circuit).fed.get(&task).copied();
            match fed {
                // Never read: read it whole (which feeds the index).
                None => self.with_records(&task, |_| ())?,
                Some(fed) => {
                    let dir = self.task_dir(&task);
                    let mut next = fed + 1;
                    let mut found = Vec::new();
                    while let Some((record, _, _)) = read_record(&dir.join(sequence_file(next)))? {
                        found.push(record);
                        next += 1;
                    }
                    self.feed(&task, &found);
                }
            }
        }
        Ok(())
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
        while let Some(read) = read_record(&dir.join(sequence_file(cache.highest + 1)))? {
            cache.highest += 1;
            push_in_order(cache, read);
        }
        self.feed(task, &cache.records);
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
            }
        }
        sequences.sort_unstable();
        // A listing taken while another process writes may miss an entry added during it;
        // any gap below the highest is looked up once more by name.
        let listed: HashSet<u64> = sequences.iter().copied().collect();
        let highest = sequences.last().copied().unwrap_or(0);
        let mut records = Vec::with_capacity(sequences.len());
        for sequence in 1..=highest {
            let path = dir.join(sequence_file(sequence));
            let found = if listed.contains(&sequence) {
                read_record(&path)?
            } else {
                read_record(&path).unwrap_or(None)
            };
            if let Some(read) = found {
                records.push(read);
            }
        }
        records.sort_by_key(|(r, _, _)| r.envelope.sequence);
        cache.bytes = records.iter().map(|(_, _, size)| size).sum();
        (cache.records, cache.digests) = records.into_iter().map(|(r, d, _)| (r, d)).unzip();
        cache.highest = highest;
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
            .open(&path)
            .map_err(io_error(format!(
                "cannot open the task lock `{}`; check that the directory is writable",
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
    if target.exists() {
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
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path());
        let t = task("t");
        for i in 0..3 {
            store
                .write(&t, &assessment(&format!("s{i}")), None)
                .expect("written");
        }
        fs::remove_file(store.task_dir(&t).join("0000000002.json")).expect("removed by hand");
        let fresh = Store::open(dir.path());
        let sequences: Vec<u64> = fresh
            .records(&t)
            .expect("read")
            .iter()
            .map(|r| r.envelope.sequence)
            .collect();
        assert_eq!(sequences, [1, 3]);
        let next = fresh.write(&t, &assessment("s3"), None).expect("written");
        assert_eq!(next.envelope.sequence, 4, "a sequence is never reused");
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
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path());
        let t = task("t");
        for i in 0..2 {
            store
                .write(&t, &assessment(&format!("s{i}")), None)
                .expect("written");
        }
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
        store.write(&t, &assessment("s3"), None).expect("written");
        let later = state(&store);
        assert_eq!((later.records, later.unverified), (4, 3));
        assert_eq!(later, state(&Store::open(dir.path())));
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
        assert_eq!(
            ids(store.budget_history(&task("a"), now).expect("read")),
            ["Ca1", "Ca2", "Cb2"]
        );
        put("b", 3, at(0));
        let history = store.budget_history(&task("b"), now).expect("read");
        assert!(history.iter().all(|r| matches!(&r.body,
            Body::Consultation(c) if c.conclusion.is_none() && c.usage.is_some())));
        assert_eq!(ids(history), ["Ca2", "Cb1", "Cb2", "Cb3"]);
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
}
