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
//! - **Atomic**: a record is written to a temporary file in the task's directory, the file
//!   system is flushed (its bytes, and every rename made before), and it is renamed into
//!   place without replacing anything; a reader sees the whole record or none of it, even
//!   if the writer is killed at any point, and after a crash of the machine the records
//!   are a prefix of what was written. [`Store::write`] flushes once more so the name is
//!   durable when it returns; a job's writes leave that to the next flush (see
//!   [`durable`] and `docs/DAEMON.md`, "What is flushed when").
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

mod availability;
mod budget;
mod cache;
mod downstream;
pub mod durable;
mod files;
mod identity;
mod index;
mod progress;
mod shared;
pub mod spare;
mod status_view;
#[cfg(test)]
mod tests;
mod track;
mod watch;
mod write;

pub use budget::RECENT_SPEND;
pub use cache::{
    Lookups, WorkingSet, CACHE_BUDGET_BYTES, CACHE_MAX_TASKS, IDLE_RELEASE, LARGE_TASK_BYTES,
};
pub use files::{file_name, StoredFile};
pub use identity::{FileId, RACY_WINDOW};
pub use index::{index_path, INDEX_FILE, INDEX_VERSION};
pub use shared::Stores;
pub use write::{Drafted, PlanWritten, Provenance};

use availability::CircuitIndex;
use budget::{Spending, Spent};
use cache::{push_in_order, Slot, TaskCache};
use files::{read_record, sequence_file, write_atomically, ReadFile};
use identity::Checked;
use progress::{digest_at, extended, trust_of, writer_trust};

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

/// The records of one state directory.
pub struct Store {
    state_dir: PathBuf,
    /// Each task's cache, least recently used first out ([`Store::used`]).
    tasks: Mutex<lru::LruCache<TaskName, Slot>>,
    circuit: Mutex<CircuitIndex>,
    /// Every task's resolutions, for the advisors' track records.
    track: Mutex<track::TrackIndex>,
    /// The group commit of the state directory's file system, made at the first flush
    /// (by then the state directory exists): the process's shared one when
    /// `shares_flushes`, else its own.
    flusher: std::sync::OnceLock<std::sync::Arc<durable::Flusher>>,
    /// Whether this store flushes through the process's group commit of its file system
    /// ([`Store::sharing_flushes`]).
    shares_flushes: bool,
    /// Whether a record was renamed into place since the last flush ([`Store::settle`]).
    unsettled: std::sync::atomic::AtomicBool,
    /// Taken while the index starts keeping what budgets count, so it gathers once.
    spending_turn: Mutex<()>,
    budget: usize,
    max_tasks: usize,
}

/// Lock `mutex` even if a thread panicked while holding it: every update of the cache
/// leaves it consistent before anything that can panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> StoreError {
    move |source| StoreError::Io { context, source }
}

impl Store {
    /// A store over `state_dir` (created on first write).
    pub fn open(state_dir: &Path) -> Store {
        crate::journal::seam::opened(state_dir);
        Store::with_budget(state_dir, CACHE_BUDGET_BYTES)
    }

    /// This store flushing through the process's group commit of its file system
    /// (`durable::shared`) instead of one of its own, so that its flushes are shared with
    /// the journal's and other state directories' on the same disk (the process's stores,
    /// [`Stores::get`]).
    pub fn sharing_flushes(mut self) -> Store {
        self.shares_flushes = true;
        self
    }

    /// The group commit this store flushes through (see the field).
    fn flusher(&self) -> &durable::Flusher {
        self.flusher.get_or_init(|| {
            if self.shares_flushes {
                durable::shared(&self.state_dir)
            } else {
                std::sync::Arc::new(durable::Flusher::new(&self.state_dir))
            }
        })
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
            tasks: Mutex::new(lru::LruCache::unbounded()),
            circuit: Mutex::new(CircuitIndex::default()),
            track: Mutex::default(),
            flusher: std::sync::OnceLock::new(),
            shares_flushes: false,
            unsettled: std::sync::atomic::AtomicBool::new(false),
            spending_turn: Mutex::new(()),
            budget,
            max_tasks,
        }
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The directory holding `task`'s records.
    pub fn task_dir(&self, task: &TaskName) -> PathBuf {
        self.state_dir.join(task.as_str())
    }

    /// Where this store's writes find spare files made ahead (`spare.rs`).
    fn spares(&self) -> PathBuf {
        self.state_dir.join(spare::SPARE_DIR)
    }
}
