//! The track-record index: every task's resolutions (`core::track`), fed as the store
//! writes and reads records, so that `advisors` tallies them without reading any task.
//!
//! Only resolutions the hash chain vouches for count. Where the store holds the task's
//! records (every write, every read through its cache) it walks the chain as the views do
//! (incrementally: the walk is kept in the cache) and hands the index where it breaks, but
//! only for a task that has resolutions: a task without any costs no walk. Records
//! another process wrote into a task this store no longer caches are read past the last
//! one fed, without reading the task again (as availability's index does); those are
//! judged by their links to the record before them until the task is next read whole,
//! when the walk's answer replaces that judgement. A record file changed after it was
//! fed shows when its task is next read through the cache (a view of it, a write into
//! it): the index then takes the task again from its first record. `verify` is the audit.

use crate::core::chain::GENESIS;
use crate::core::records::{Body, Record, TaskName};
use crate::core::track::{self, Settled, TaskLedger, TrackRecord};
use std::collections::{BTreeMap, HashMap};

/// What the index knows of one task.
#[derive(Default)]
struct TaskTrack {
    ledger: TaskLedger,
    /// The highest sequence fed.
    fed: u64,
    /// The chain's hash of the record fed last.
    head: String,
    /// The first sequence the chain does not vouch for, as last judged.
    broken_at: Option<u64>,
    /// Whether a record fed carried `prev` (the chain has started).
    chained: bool,
    /// Whether `broken_at` comes from a walk of the chain (continued by links since).
    judged: bool,
}

impl TaskTrack {
    fn take(&mut self, record: &Record, digest: &str) {
        self.ledger.feed(record);
        self.fed = record.envelope.sequence;
        self.head = digest.to_string();
        self.chained |= record.envelope.prev.is_some();
    }

    fn counted(&self) -> impl Iterator<Item = &Settled> {
        self.ledger
            .settled()
            .iter()
            .filter(|s| self.broken_at.is_none_or(|b| s.sequence < b))
    }
}

/// Every task's resolutions, and the tally over them kept until they change.
#[derive(Default)]
pub(super) struct TrackIndex {
    tasks: HashMap<TaskName, TaskTrack>,
    tally: Option<BTreeMap<String, TrackRecord>>,
}

impl TrackIndex {
    /// Feed the index `records`, every record of `task` in sequence order as the store's
    /// cache holds them, with the chain's hash of each (`digests`). When the record fed
    /// last is no longer what the cache holds under its sequence, the task is taken again
    /// from its first record. Returns whether the task has resolutions, whose trust the
    /// caller then gives with [`TrackIndex::judged`].
    pub(super) fn feed(&mut self, task: &TaskName, records: &[Record], digests: &[String]) -> bool {
        let kept = self.tasks.entry(task.clone()).or_default();
        if kept.fed > 0 {
            let at = records.partition_point(|r| r.envelope.sequence < kept.fed);
            let same = records
                .get(at)
                .is_some_and(|r| r.envelope.sequence == kept.fed)
                && digests.get(at).is_some_and(|d| *d == kept.head);
            if !same {
                *kept = TaskTrack::default();
                self.tally = None;
            }
        }
        let from = records.partition_point(|r| r.envelope.sequence <= kept.fed);
        for (record, digest) in records[from..].iter().zip(&digests[from..]) {
            kept.take(record, digest);
            if matches!(record.body, Body::Resolution(_)) {
                // It may add a resolution, or replace one of the same disagreement.
                self.tally = None;
            }
        }
        !kept.ledger.settled().is_empty()
    }

    /// The chain's walk over `task`'s records, as fed last by [`TrackIndex::feed`], breaks
    /// at `broken_at` (`None`: it vouches for every record).
    pub(super) fn judged(&mut self, task: &TaskName, broken_at: Option<u64>) {
        if let Some(kept) = self.tasks.get_mut(task) {
            if kept.broken_at != broken_at || !kept.judged {
                kept.broken_at = broken_at;
                kept.judged = true;
                self.tally = None;
            }
        }
    }

    /// Feed the index records of `task` read past the last one fed, in sequence order,
    /// each with the chain's hash of its bytes, without the task's other records: each is
    /// judged by its sequence and its link to the one before it (a link that does not
    /// hold makes both records around it suspect, as the chain's walk does).
    pub(super) fn feed_read(&mut self, task: &TaskName, records: &[Record], digests: &[String]) {
        let kept = self.tasks.entry(task.clone()).or_default();
        for (record, digest) in records.iter().zip(digests) {
            let sequence = record.envelope.sequence;
            if sequence <= kept.fed {
                continue;
            }
            let expected = if kept.fed == 0 {
                GENESIS
            } else {
                kept.head.as_str()
            };
            let break_at = if sequence != kept.fed + 1 || record.envelope.task != task.as_str() {
                Some(sequence)
            } else {
                match record.envelope.prev.as_deref() {
                    Some(prev) if prev == expected => None,
                    Some(_) => Some(kept.fed.max(1)),
                    // Records from before the chain carry no `prev`; a chained one must.
                    None if record.envelope.schema >= 2 || kept.chained => Some(sequence),
                    None => None,
                }
            };
            if let (true, Some(at)) = (kept.judged, break_at) {
                kept.broken_at = Some(kept.broken_at.map_or(at, |b| b.min(at)));
                self.tally = None;
            }
            if matches!(record.body, Body::Resolution(_)) {
                self.tally = None;
            }
            kept.take(record, digest);
        }
    }

    /// The tasks with resolutions whose chain no walk has judged yet (records another
    /// process wrote, read past the last one fed): the store reads them through its cache,
    /// which walks them, before it tallies.
    pub(super) fn unjudged(&self) -> Vec<TaskName> {
        self.tasks
            .iter()
            .filter(|(_, t)| !t.judged && !t.ledger.settled().is_empty())
            .map(|(task, _)| task.clone())
            .collect()
    }

    /// Every advisor's track record over what was fed, by advisor id.
    pub(super) fn tally(&mut self) -> BTreeMap<String, TrackRecord> {
        if self.tally.is_none() {
            self.tally = Some(track::tally(
                self.tasks.values().flat_map(TaskTrack::counted),
            ));
        }
        self.tally.clone().unwrap_or_default()
    }
}
