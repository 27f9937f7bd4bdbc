//! The store's cache of records per task: what a store has read of each task, kept
//! within a budget of bytes and a number of tasks, least recently used first out (`lru`).

use super::*;

/// What a [`Store`] has read of one task.
#[derive(Default)]
pub(super) struct TaskCache {
    /// Whether the task's directory has been listed once.
    pub(super) listed: bool,
    /// The records read, in sequence order.
    pub(super) records: Vec<Record>,
    /// The chain's hash of each record's stored bytes, beside `records`: the newest is the
    /// `prev` of the next write, so a write never re-reads the task to hash it.
    pub(super) digests: Vec<String>,
    /// The identity of each record's file when it was read or written, beside `records`;
    /// `None` when it cannot vouch for the bytes (see [`FileId::of`]).
    pub(super) files: Vec<Option<FileId>>,
    /// The highest sequence among the record files read.
    pub(super) highest: u64,
    /// The hash chain's walk over `records` so far: a view extends it over the records
    /// read since instead of walking the whole task again.
    pub(super) chain: chain::Progress,
    /// The walk the writer keeps, at [`chain::Depth::Rules`]: every record not written
    /// through this cache is admitted again through the writer's rules once, so a write
    /// never builds on a record `verify` would refuse, and costs nothing more than that.
    pub(super) rules: chain::Progress,
    /// The names in the task's directory that are not record files nor the store's own,
    /// as last listed.
    pub(super) strays: Vec<String>,
    /// The attestations of `records` checked so far against this machine's key (records
    /// never change, so only new ones are checked).
    pub(super) attestations: Arc<chain::Attestations>,
    /// The size on disk of the records read.
    pub(super) bytes: usize,
    /// The citations between `records`, caught up when a view asks (`store::downstream`).
    pub(super) downstream: crate::core::views::downstream::Graph,
    /// The status view's index over `records`, caught up when a view asks
    /// (`store::status_view`).
    pub(super) status: crate::core::views::status::StatusIndex<'static>,
    /// The kernel's watch on the task's directory, made before it was listed: which files
    /// changed since (`identity::watch`); `None` when it cannot be watched.
    pub(super) watch: Option<super::identity::watch::Subscription>,
    /// How many record files the last check of the files looked at (`stat` or read).
    pub(super) checked: usize,
    /// The writer's index of `records` when `rules` keeps none, and the digest of the
    /// last record it indexed (`store::write`, `judge_next`).
    pub(super) writer_index: Option<(crate::core::writer::Index, String)>,
    /// What a consultation looks up in the task on every job (a record by its id, the
    /// invariants the task puts in force), kept over the first records of `records` and
    /// extended over the records read since when asked ([`Store::with_lookups`]).
    pub(super) lookups: Lookups,
}

/// Lookups over `records[..count]`, and the id of the last record they cover: each job
/// found its assessment and its plan by walking the task's records and folded all of them
/// for the invariants, so a consultation's cost grew with the task's size. The writer's
/// `Index` keeps the same fold and an id map too, but only for a write: it is extended
/// under the task's lock, after the chain's walk has admitted the records written by
/// others, which a read must not wait for. These serve the reads, and keep the first
/// record holding an id, as a walk of the records finds it.
#[derive(Default)]
pub struct Lookups {
    /// The task's invariant records and the conclusions that change one, folded.
    invariants: crate::core::invariants::TaskInvariants,
    /// Record id → the position of the first record holding it.
    first: rustc_hash::FxHashMap<Box<str>, usize>,
    count: usize,
    last: Option<Box<str>>,
}

impl Lookups {
    /// Cover every record of `records`: extended over the ones added at the end since, or
    /// made afresh when the records covered are no longer the first ones (the cache was
    /// read again, or a record came in below the last one covered).
    fn over(&mut self, records: &[Record]) {
        let kept = self.count <= records.len()
            && self.last.as_deref() == self.count.checked_sub(1).map(|at| records[at].id());
        if !kept {
            *self = Lookups::default();
        }
        if self.count == records.len() {
            return;
        }
        for (at, record) in records.iter().enumerate().skip(self.count) {
            self.invariants.apply(record);
            self.first.entry(record.id().into()).or_insert(at);
        }
        self.count = records.len();
        self.last = records.last().map(|r| r.id().into());
    }

    /// The position of the first record holding `id`, among the records covered.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.first.get(id).copied()
    }

    /// The task's invariants: its `invariant` records and the conclusions that remove or
    /// narrow one, folded in record order.
    pub fn invariants(&self) -> &crate::core::invariants::TaskInvariants {
        &self.invariants
    }
}

/// The bytes of records (their size on disk) whose cache was dropped since the daemon last
/// handed freed memory back ([`Stores::take_released`]), in every store of the process.
static RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for TaskCache {
    /// However the cache goes (idle, over the budget or the number of tasks, found stale),
    /// count what it held, so that the daemon hands the freed pages back after it: a task
    /// dropped for the budget by another task's request would otherwise leave its
    /// records' pages with the allocator until something else trims.
    fn drop(&mut self) {
        if self.bytes > 0 {
            RELEASED.fetch_add(self.bytes, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Stores {
    /// The bytes of records (their size on disk) whose cache was dropped since the last
    /// call, across every store of the process; the count starts again from zero.
    pub fn take_released(&self) -> usize {
        RELEASED.swap(0, std::sync::atomic::Ordering::Relaxed)
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

/// How long a large task's cache (more than [`LARGE_TASK_BYTES`] of records) is kept once
/// nobody asks about it: the daemon sweeps its stores this often and hands what a dropped
/// task held back to the system, so one big task asked about once does not keep the daemon
/// hundreds of MiB larger for the minutes a small task's cache is kept.
pub const IDLE_RELEASE: Duration = Duration::from_secs(15);

/// A task whose cached records take more than this many bytes on disk is dropped after
/// [`IDLE_RELEASE`] of disuse rather than after the daemon's general idle time.
pub const LARGE_TASK_BYTES: usize = 4 * 1024 * 1024;

/// A task's cache and when it was last used.
pub(super) struct Slot {
    pub(super) cache: Arc<Mutex<TaskCache>>,
    pub(super) used: Instant,
    pub(super) bytes: usize,
}

/// The names of the tasks `keep` holds among `tasks`, the most recently used first.
fn working_set(
    tasks: &lru::LruCache<TaskName, Slot>,
    keep: WorkingSet,
    now: Instant,
) -> Vec<TaskName> {
    let mut kept = Vec::with_capacity(keep.tasks);
    let mut bytes = 0usize;
    // Most recently used first: past the first one too old, all are.
    for (name, slot) in tasks.iter() {
        if kept.len() >= keep.tasks || now.duration_since(slot.used) > keep.within {
            break;
        }
        if slot.bytes > LARGE_TASK_BYTES || bytes + slot.bytes > keep.bytes {
            continue;
        }
        bytes += slot.bytes;
        kept.push(name.clone());
    }
    kept
}

/// Append a record read, with its hash and identity, keeping the cache in sequence order.
pub(super) fn push_in_order(cache: &mut TaskCache, read: ReadFile) {
    cache.bytes += read.size;
    let at = cache
        .records
        .partition_point(|r| r.envelope.sequence <= read.record.envelope.sequence);
    cache.records.insert(at, read.record);
    cache.digests.insert(at, read.digest);
    cache.files.insert(at, read.file);
}

/// The tasks a [`Store`] keeps cached when it drops the idle ones: the few most recently
/// used, small enough together, that sessions consulting minutes apart come back to.
/// Without it, a session whose consultations were more than about half a minute apart had
/// its task dropped between any two of them (the daemon drops what the last jobs used once
/// it goes quiet), and each consultation read the whole task again first: 63 ms against
/// 8 ms in a task of 1,678 records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkingSet {
    /// How many tasks at most, the most recently used first.
    pub tasks: usize,
    /// How many bytes of records (their size on disk) in all; a task that would take the
    /// set past it is not kept, nor one larger than [`LARGE_TASK_BYTES`].
    pub bytes: usize,
    /// Only tasks used within this long.
    pub within: Duration,
}

impl WorkingSet {
    /// Keep nothing: every idle task goes.
    pub const NONE: WorkingSet = WorkingSet {
        tasks: 0,
        bytes: 0,
        within: Duration::ZERO,
    };

    /// What the daemon keeps: the tasks of the last two sessions seen, at most 2 MiB of
    /// records between them, for half an hour (after a burst the daemon keeps none, so
    /// that the burst's memory goes back: `daemon::memory::SESSION_JOBS`).
    pub const SESSIONS: WorkingSet = WorkingSet {
        tasks: 2,
        bytes: 2 * 1024 * 1024,
        within: Duration::from_secs(30 * 60),
    };
}

impl Store {
    /// Drop the cached records of every task not used for `idle` (they are read again
    /// when next asked for), but those of `keep`; the availability index is kept.
    pub fn release_idle(&self, idle: Duration, keep: WorkingSet) {
        let now = Instant::now();
        let mut tasks = lock(&self.tasks);
        let kept = working_set(&tasks, keep, now);
        let going: Vec<TaskName> = tasks
            .iter()
            .filter(|(name, slot)| now.duration_since(slot.used) >= idle && !kept.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        let dropped: Vec<Slot> = going.iter().filter_map(|name| tasks.pop(name)).collect();
        // Freed once the other tasks' requests can go on.
        drop(tasks);
        drop(dropped);
    }

    /// Drop the cached records of every task holding more than [`LARGE_TASK_BYTES`] not
    /// used for `idle`; the bytes dropped (what the caller may hand back to the system).
    pub fn release_large_idle(&self, idle: Duration) -> usize {
        let now = Instant::now();
        let mut tasks = lock(&self.tasks);
        let large: Vec<TaskName> = tasks
            .iter()
            .filter(|(_, slot)| {
                slot.bytes > LARGE_TASK_BYTES && now.duration_since(slot.used) >= idle
            })
            .map(|(name, _)| name.clone())
            .collect();
        let dropped: Vec<Slot> = large.iter().filter_map(|name| tasks.pop(name)).collect();
        // Freed once the other tasks' requests can go on.
        drop(tasks);
        dropped.iter().map(|slot| slot.bytes).sum()
    }

    /// The bytes of records cached now, and how many tasks they belong to.
    pub fn cached(&self) -> (usize, usize) {
        let tasks = lock(&self.tasks);
        (tasks.iter().map(|(_, s)| s.bytes).sum(), tasks.len())
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
        self.with_refreshed(task, |cache| f(&cache.records))
    }

    /// Call `f` with every record of `task`, in sequence order, and the [`Lookups`] over
    /// them, without copying them: a record found by its id and the task's invariants
    /// cost the records read since the last call, not the task. As [`Store::with_records`].
    pub fn with_lookups<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&[Record], &Lookups) -> R,
    ) -> Result<R, StoreError> {
        self.with_refreshed(task, |cache| {
            cache.lookups.over(&cache.records);
            f(&cache.records, &cache.lookups)
        })
    }

    /// Call `f` with `task`'s cache once the records written since were read into it,
    /// then note the task as just used.
    fn with_refreshed<R>(
        &self,
        task: &TaskName,
        f: impl FnOnce(&mut TaskCache) -> R,
    ) -> Result<R, StoreError> {
        let cache = self.cache(task);
        let mut held = lock(&cache);
        let answer = self.refresh(task, &mut held).map(|_| f(&mut held));
        let bytes = held.bytes;
        drop(held);
        self.used(task, &cache, bytes);
        answer
    }

    /// The invariants `task`'s records put in force or drop (see [`Lookups::invariants`]).
    pub fn task_invariants(
        &self,
        task: &TaskName,
    ) -> Result<crate::core::invariants::TaskInvariants, StoreError> {
        self.with_lookups(task, |_, lookups| lookups.invariants().clone())
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

    /// The cache of `task`, created empty on first use.
    pub(super) fn cache(&self, task: &TaskName) -> Arc<Mutex<TaskCache>> {
        lock(&self.tasks)
            .get_or_insert_mut(task.clone(), || Slot {
                cache: Arc::default(),
                used: Instant::now(),
                bytes: 0,
            })
            .cache
            .clone()
    }

    /// Note that `task`'s cache (holding `bytes`) was just used, and drop the least
    /// recently used other tasks while the caches hold more than the budget or more
    /// tasks than the limit.
    pub(super) fn used(&self, task: &TaskName, cache: &Arc<Mutex<TaskCache>>, bytes: usize) {
        let mut tasks = lock(&self.tasks);
        // `get_mut` makes `task` the most recently used, so it is the last one dropped.
        if let Some(slot) = tasks.get_mut(task) {
            if Arc::ptr_eq(&slot.cache, cache) {
                slot.used = Instant::now();
                slot.bytes = bytes;
            }
        }
        let mut total: usize = tasks.iter().map(|(_, s)| s.bytes).sum();
        let now = Instant::now();
        let mut dropped = Vec::new();
        while total > self.budget || tasks.len() > self.max_tasks {
            let Some((name, slot)) = tasks.peek_lru() else {
                break;
            };
            if name == task {
                break;
            }
            // A large task asked about within `IDLE_RELEASE` is in use: dropping it for
            // the budget would have its next request read it whole again (seconds at
            // 100,000 records) each time another task is used in between. It is kept past
            // the budget and dropped once idle (`release_large_idle`).
            let in_use =
                slot.bytes > LARGE_TASK_BYTES && now.duration_since(slot.used) < IDLE_RELEASE;
            if in_use && tasks.len() <= self.max_tasks {
                break;
            }
            if let Some((_, slot)) = tasks.pop_lru() {
                total -= slot.bytes;
                dropped.push(slot);
            }
        }
        // A large task's records take a while to free: not while every other task waits
        // for the lock. The daemon hands their pages back at its next sweep
        // ([`Stores::take_released`]).
        drop(tasks);
        drop(dropped);
    }

    /// Read the records of `task` not yet in `cache`; return the temporary files seen
    /// (for a writer holding the lock to remove).
    pub(super) fn refresh(
        &self,
        task: &TaskName,
        cache: &mut TaskCache,
    ) -> Result<Vec<OsString>, StoreError> {
        let dir = self.task_dir(task);
        let mut temps = Vec::new();
        if !cache.listed {
            cache.watch = super::identity::watch::subscribe(&dir);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(store: &Store, task: &TaskName, subject: &str) {
        let record = serde_json::json!({"kind": "assessment", "subject": subject,
            "materiality": "low", "hypothesis": "h"});
        store.write(task, &record, None).expect("written");
    }

    /// The idle tasks go but the working set: the most recently used ones, as many and
    /// as large as it allows, used recently enough; with none, every idle task goes.
    #[test]
    fn the_working_set_stays_when_the_idle_tasks_go() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path());
        let [a, b, c] = ["a", "b", "c"].map(|n| TaskName::new(n).unwrap());
        for name in [&a, &b, &c] {
            write(&store, name, "first");
        }
        // `a` used again: `a` and `c` are the two most recent.
        store.records(&a).expect("read");
        let cached = || {
            let tasks = lock(&store.tasks);
            let mut names: Vec<String> = tasks.iter().map(|(n, _)| n.to_string()).collect();
            names.sort();
            names
        };
        let one_task = lock(&store.tasks).peek(&a).expect("cached").bytes;
        let two = WorkingSet {
            tasks: 2,
            bytes: usize::MAX,
            within: Duration::from_secs(60),
        };
        let tasks = lock(&store.tasks);
        let later = Instant::now() + Duration::from_secs(3600);
        assert_eq!(
            working_set(&tasks, two, later),
            Vec::<TaskName>::new(),
            "too old"
        );
        let only_one_fits = WorkingSet {
            bytes: one_task,
            ..two
        };
        assert_eq!(
            working_set(&tasks, only_one_fits, Instant::now()),
            std::slice::from_ref(&a)
        );
        drop(tasks);
        store.release_idle(Duration::ZERO, two);
        assert_eq!(cached(), ["a", "c"], "the two most recently used stay");
        store.release_idle(Duration::from_secs(3600), WorkingSet::NONE);
        assert_eq!(cached(), ["a", "c"], "neither is idle for an hour");
        store.release_idle(Duration::ZERO, WorkingSet::NONE);
        assert!(
            cached().is_empty(),
            "with no working set every idle task goes"
        );
        assert_eq!(store.records(&b).expect("read again").len(), 1);
    }

    fn invariant(store: &Store, task: &TaskName, name: &str, action: &str) {
        let record = serde_json::json!({"kind": "invariant", "name": name,
            "action": action, "description": format!("keep {name}")});
        store.write(task, &record, None).expect("written");
    }

    /// The task's invariants, asked after each write (this store's and another's), are
    /// always the fold of every record of the task, as folding them afresh gives.
    #[test]
    fn the_task_invariants_kept_in_the_cache_are_the_fold_of_every_record() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path());
        let other = Store::open(dir.path());
        let task = TaskName::new("t").unwrap();
        let afresh = |store: &Store| {
            crate::core::invariants::TaskInvariants::of(&store.records(&task).unwrap())
        };
        assert_eq!(store.task_invariants(&task).unwrap(), afresh(&store));
        invariant(&store, &task, "a", "add");
        assert_eq!(store.task_invariants(&task).unwrap(), afresh(&store));
        write(&store, &task, "s");
        invariant(&other, &task, "b", "add");
        let both = store.task_invariants(&task).unwrap();
        assert_eq!(both, afresh(&store), "another writer's record is folded in");
        assert_ne!(both, Default::default());
        invariant(&store, &task, "a", "remove");
        let left = store.task_invariants(&task).unwrap();
        assert_eq!(left, afresh(&store));
        assert_ne!(left, both, "the removal counts");
    }

    /// Lookups whose records are no longer the first ones of the task (the cache was read
    /// again into other records) are made afresh, not extended.
    #[test]
    fn lookups_over_records_that_changed_are_made_afresh() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (one, two) = (dir.path().join("one"), dir.path().join("two"));
        let task = TaskName::new("t").unwrap();
        let (a, b) = (Store::open(&one), Store::open(&two));
        invariant(&a, &task, "a", "add");
        invariant(&b, &task, "b", "add");
        invariant(&b, &task, "c", "add");
        let (first, second) = (a.records(&task).unwrap(), b.records(&task).unwrap());
        let of = crate::core::invariants::TaskInvariants::of;
        let mut lookups = Lookups::default();
        lookups.over(&first);
        lookups.over(&second[..1]);
        assert_eq!(
            lookups.invariants(),
            &of(&second[..1]),
            "same count, other records"
        );
        assert_eq!(
            lookups.position(first[0].id()),
            None,
            "afresh: the old ids are gone"
        );
        assert_eq!(lookups.position(second[0].id()), Some(0));
        lookups.over(&second);
        assert_eq!(
            lookups.invariants(),
            &of(&second),
            "extended by the new one"
        );
        assert_eq!(lookups.position(second[1].id()), Some(1));
        lookups.over(&[]);
        assert_eq!(lookups.invariants(), &of(&[]), "fewer records: afresh");
        assert_eq!(lookups.position(second[0].id()), None);
    }

    /// A record is found by its id at the first position holding it, after this store's
    /// writes and another's, as walking the records finds it.
    #[test]
    fn a_record_is_found_by_its_id_as_a_walk_of_the_records_finds_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (store, other) = (Store::open(dir.path()), Store::open(dir.path()));
        let task = TaskName::new("t").unwrap();
        write(&store, &task, "one");
        write(&other, &task, "two");
        write(&store, &task, "three");
        let records = store.records(&task).unwrap();
        for (at, record) in records.iter().enumerate() {
            let found = store.with_lookups(&task, |records, lookups| {
                lookups
                    .position(record.id())
                    .map(|p| records[p].id().to_string())
            });
            assert_eq!(found.unwrap().as_deref(), Some(record.id()), "record {at}");
        }
        let missing = store.with_lookups(&task, |_, lookups| lookups.position("01NOPE"));
        assert_eq!(missing.unwrap(), None);
    }

    /// A task's cache dropped for the budget by a request for another task counts as
    /// released, as one dropped for being idle does: the daemon trims after either
    /// (`daemon::memory::released`), not only after its own sweep dropped a large task.
    #[test]
    fn every_dropped_cache_counts_as_released() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::with_budget(dir.path(), 4096);
        let (a, b) = (TaskName::new("a").unwrap(), TaskName::new("b").unwrap());
        for i in 0..8 {
            write(&store, &a, &format!("a{i}"));
        }
        let (held, _) = store.cached();
        assert!(held > 0);
        Stores::process().take_released();
        // `b` grows past the budget: `a`, least recently used, goes for it.
        for i in 0..8 {
            write(&store, &b, &format!("b{i}"));
        }
        assert!(
            !lock(&store.tasks).contains(&a),
            "a was dropped for the budget"
        );
        let released = Stores::process().take_released();
        assert!(released >= held, "released {released} of {held} bytes");
        // Idle now: `b` goes too, and counts.
        let (held, _) = store.cached();
        store.release_idle(Duration::ZERO, WorkingSet::NONE);
        assert_eq!(store.cached(), (0, 0));
        assert!(Stores::process().take_released() >= held);
    }
}
