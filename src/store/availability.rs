//! The availability index: what the circuit needs of every task, fed as records are read
//! and written, and caught up over the tasks written into (`watch`).

use super::*;

/// How many times a store tries to watch its state directory before it settles for
/// looking at every task each time (the user's inotify instances or watches are spent).
pub(super) const MAX_WATCHER_FAILURES: u32 = 3;

/// What availability needs of every task, fed as records are read and written.
#[derive(Default)]
pub(super) struct CircuitIndex {
    pub(super) tail: HistoryTail,
    /// The consultations budgets may count in a day window, across every task: those of
    /// the last [`RECENT_SPEND`] and later, stripped to what a cost needs. Kept only once
    /// a budget was first judged ([`Spending`]): a daemon whose users set no budget keeps
    /// none of them.
    pub(super) recent: Vec<Spent>,
    /// Whether `recent` is kept, and complete.
    pub(super) spending: Spending,
    /// The highest sequence fed, per task.
    pub(super) fed: HashMap<TaskName, u64>,
    /// How many times the index was asked to catch up; a store asked once (a command's)
    /// never makes a watcher.
    pub(super) catch_ups: u64,
    /// Which tasks changed since the index last caught up, when the kernel can tell
    /// (a long-lived store's: see `store::watch`).
    pub(super) watcher: Option<watch::Watcher>,
    /// How many watchers failed to watch every task; after a few the store stops
    /// making them and looks at every task each time.
    pub(super) watcher_failures: u32,
    /// The persisted index (`store::index`): what proves each task unchanged since fed.
    pub(super) index: index::IndexState,
}

impl CircuitIndex {
    pub(super) fn feed(&mut self, record: &Record, since: time::OffsetDateTime) {
        self.tail.feed(record);
        if self.spending == Spending::Off {
            return;
        }
        self.recent.extend(Spent::of(record, since));
    }
}

impl Store {
    /// Feed the index the records of `task` past the last one it was fed (`records` in
    /// sequence order).
    pub(super) fn feed(&self, task: &TaskName, records: &[Record]) {
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
        let counted = circuit.index.count(task, fed);
        *circuit.index.counts.entry(task.clone()).or_insert(counted) += fresh.len() as u64;
        if !fresh.is_empty() {
            circuit.index.clean = false;
        }
    }

    /// Feed the track index `task`'s records as `cache` holds them, and where the chain
    /// breaks when the task has resolutions (see `store::track`).
    pub(super) fn feed_track(&self, task: &TaskName, cache: &mut TaskCache) {
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

    /// The consultations availability needs, across every task of the state directory:
    /// a [`HistoryTail`]'s records, equal for availability to every consultation stored.
    ///
    /// A task is read whole the first time; after that only the record files past the
    /// last one fed are read, whether or not its records are still cached.
    pub fn circuit_history(&self) -> Result<Vec<Record>, StoreError> {
        self.feed_every_task()?;
        Ok(lock(&self.circuit).tail.records())
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
        self.open_index()?;
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

    /// Feed the index every task's records: a task never fed is read whole, the others
    /// only past the last record file fed. A store asked more than once watches the state
    /// directory (inotify) and then looks only at the tasks whose directories changed,
    /// so the cost of catching up does not grow with the number of tasks.
    ///
    /// A store's first catch-up takes the persisted index first (`store::index`) and skips
    /// the tasks it proves unchanged; a catch-up that fed something writes it again.
    pub(super) fn feed_every_task(&self) -> Result<(), StoreError> {
        self.open_index()?;
        let changed = self.changed_tasks()?;
        let unchanged = std::mem::take(&mut lock(&self.circuit).index.unchanged);
        let changed: Vec<TaskName> = changed
            .into_iter()
            .filter(|task| !unchanged.contains(task))
            .collect();
        let fed = self.feed_tasks(&changed);
        if fed.is_ok() {
            self.save_index();
        }
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
    pub(super) fn feed_tasks(&self, tasks: &[TaskName]) -> Result<(), StoreError> {
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
    pub(super) fn changed_tasks(&self) -> Result<Vec<TaskName>, StoreError> {
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
        let tasks = self.listed_tasks(&mut circuit)?;
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
}
