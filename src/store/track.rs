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
    /// Records past `fed` were read before the ones between (two threads feeding at
    /// once): the task is read through the cache before the next tally.
    behind: bool,
    /// The resolutions taken from the persisted index (`store::index`) instead of the
    /// ledger: the task is taken again from its first record as soon as it has more.
    loaded: Option<Vec<Settled>>,
}

impl TaskTrack {
    fn take(&mut self, record: &Record, digest: &str) {
        self.ledger.feed(record);
        self.fed = record.envelope.sequence;
        self.head = digest.to_string();
        self.chained |= record.envelope.prev.is_some();
    }

    fn settled(&self) -> &[Settled] {
        self.loaded.as_deref().unwrap_or(self.ledger.settled())
    }

    fn counted(&self) -> impl Iterator<Item = &Settled> {
        self.settled()
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
    /// from its first record; when the index was fed past them already (by another
    /// thread), nothing is taken. Returns whether the task has resolutions, whose trust the
    /// caller then gives with [`TrackIndex::judged`].
    pub(super) fn feed(&mut self, task: &TaskName, records: &[Record], digests: &[String]) -> bool {
        let kept = self.tasks.entry(task.clone()).or_default();
        if kept.loaded.is_some() {
            // No ledger behind the loaded resolutions: take the task from its start.
            *kept = TaskTrack::default();
            self.tally = None;
        }
        if kept.fed > records.last().map_or(0, |r| r.envelope.sequence) {
            // Another thread fed records read past these: this caller is behind.
            return !kept.ledger.settled().is_empty();
        }
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
        kept.behind = false;
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
        if kept.loaded.is_some() && records.iter().any(|r| r.envelope.sequence > kept.fed) {
            // No ledger behind the loaded resolutions: read the task through the cache.
            *kept = TaskTrack {
                behind: true,
                ..TaskTrack::default()
            };
            self.tally = None;
            return;
        }
        for (record, digest) in records.iter().zip(digests) {
            let sequence = record.envelope.sequence;
            if sequence <= kept.fed {
                continue;
            }
            if sequence != kept.fed + 1 {
                // The records between are being fed by another thread: leave the task to
                // a read through the cache.
                kept.behind = true;
                self.tally = None;
                return;
            }
            let expected = if kept.fed == 0 {
                GENESIS
            } else {
                kept.head.as_str()
            };
            let break_at = if record.envelope.task != task.as_str() {
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
    /// process wrote, read past the last one fed), and those fed out of order: the store
    /// reads them through its cache, which walks them, before it tallies.
    pub(super) fn unjudged(&self) -> Vec<TaskName> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.behind || (!t.judged && !t.settled().is_empty()))
            .map(|(task, _)| task.clone())
            .collect()
    }

    /// What the persisted index keeps of every task with resolutions: its resolutions
    /// and trust, or `None` when the task is behind (read it again).
    pub(super) fn export(&self) -> HashMap<TaskName, Option<super::index::TrackMark>> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.behind || !t.settled().is_empty())
            .map(|(task, t)| {
                let mark = (!t.behind).then(|| {
                    super::index::TrackMark::new(
                        t.fed,
                        t.broken_at,
                        t.judged,
                        t.chained,
                        t.settled(),
                    )
                });
                (task.clone(), mark)
            })
            .collect()
    }

    /// Take `task`'s resolutions from the persisted index.
    pub(super) fn load(&mut self, task: &TaskName, mark: &super::index::TrackMark) {
        self.tasks.insert(
            task.clone(),
            TaskTrack {
                fed: mark.fed,
                broken_at: mark.broken_at,
                judged: mark.judged,
                chained: mark.chained,
                loaded: Some(mark.settled(task)),
                ..TaskTrack::default()
            },
        );
        self.tally = None;
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

#[cfg(test)]
mod tests {
    use super::super::{file_name, Store};
    use crate::core::chain::{digest, GENESIS};
    use crate::core::records::{Record, TaskName, SCHEMA_VERSION};
    use crate::core::track::{self, TrackRecord};
    use serde_json::{json, Value};
    use std::collections::BTreeMap;
    use std::fs;
    use std::path::Path;

    /// The record files of task `t`, highest last.
    fn files(state: &Path, t: &str) -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = fs::read_dir(state.join(t))
            .map(|d| d.map(|e| e.expect("entry").path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|e| e == "json"));
        files.sort();
        files
    }

    /// Append a record of `kind` to task `t` as another process's writer would: chained
    /// to the file before it, stored as pretty JSON and a newline. Its id.
    fn put(state: &Path, t: &str, kind: &str, fields: Value) -> String {
        let before = files(state, t);
        let sequence = before.len() as u64 + 1;
        let prev = before.last().map_or(GENESIS.to_string(), |last| {
            digest(&fs::read(last).expect("read"))
        });
        let id = format!("{t}-{sequence:03}");
        let at = format!(
            "2026-03-02T{:02}:{:02}:00.000Z",
            sequence / 60,
            sequence % 60
        );
        let mut value = json!({
            "id": id, "task": t, "sequence": sequence, "created_at": at,
            "schema": SCHEMA_VERSION, "redacted": [], "prev": prev, "kind": kind,
        });
        for (k, v) in fields.as_object().expect("fields") {
            value[k] = v.clone();
        }
        if kind == "consultation" {
            value["finished_at"] = value["created_at"].clone();
        }
        let record: Record = serde_json::from_value(value).expect("a record");
        let mut bytes = serde_json::to_vec_pretty(&record).expect("serialises");
        bytes.push(b'\n');
        fs::create_dir_all(state.join(t)).expect("task dir");
        fs::write(state.join(t).join(file_name(&record)), bytes).expect("written");
        id
    }

    /// An assessment, a completed opposing consultation of each of `advisors`, their
    /// disagreement with the executor, and a resolution favouring what `favours` picks
    /// among the consultation ids (or `executor`, `neither`).
    fn dispute(state: &Path, t: &str, advisors: &[&str], favours: impl Fn(&[String]) -> String) {
        let assessment = put(
            state,
            t,
            "assessment",
            json!({"subject": format!("subject of {t}"), "materiality": "low", "hypothesis": "h"}),
        );
        let selected: Vec<Value> = advisors
            .iter()
            .map(|advisor| {
                json!({"advisor": advisor, "adapter": "process",
                       "covers": ["independent_reasoning"], "why": "w"})
            })
            .collect();
        let plan = put(
            state,
            t,
            "plan",
            json!({"assessment": assessment, "mode": "standard", "budget": advisors.len(),
                   "capabilities": ["independent_reasoning"], "selected": selected,
                   "left_out": [], "availability": [], "local_review": []}),
        );
        let consultations: Vec<String> = advisors
            .iter()
            .map(|advisor| {
                put(
                    state,
                    t,
                    "consultation",
                    json!({"plan": plan, "advisor": advisor, "status": "completed",
                           "conclusion": "no", "stance": "opposes"}),
                )
            })
            .collect();
        let mut positions = vec![json!({"source": "executor", "position": "mine"})];
        positions.extend(
            consultations
                .iter()
                .map(|c| json!({"source": c, "position": "theirs"})),
        );
        let disagreement = put(
            state,
            t,
            "disagreement",
            json!({"assessment": assessment, "positions": positions,
                   "discriminating_question": "q"}),
        );
        put(
            state,
            t,
            "resolution",
            json!({"disagreement": disagreement, "experiment": "e", "observed": "o",
                   "favours": favours(&consultations),
                   "evidence": [{"kind": "test", "ref": "t"}]}),
        );
    }

    /// Every advisor's track record derived afresh: a new store reading every task.
    fn fresh(state: &Path) -> BTreeMap<String, TrackRecord> {
        let store = Store::open(state);
        let mut settled = Vec::new();
        for t in store.tasks().expect("tasks") {
            store
                .with_trusted_records(&t, |records, trust| {
                    settled.extend(track::settled_in(records, trust));
                })
                .expect("read");
        }
        track::tally(&settled)
    }

    /// What a long-lived store answers: caught up as `advisors` catches it up.
    fn warm(store: &Store) -> BTreeMap<String, TrackRecord> {
        store.circuit_history().expect("caught up");
        store.track_records().expect("tallied")
    }

    fn counts(track: &BTreeMap<String, TrackRecord>, advisor: &str) -> (u32, u32, u32) {
        track
            .get(advisor)
            .map_or((0, 0, 0), |t| (t.resolutions, t.favoured, t.disfavoured))
    }

    /// The index agrees with a fresh derivation as tasks are written into by this store
    /// and by other processes, whether or not the store still caches the tasks; a
    /// resolution whose link breaks counts for nothing.
    #[test]
    fn the_index_agrees_with_a_fresh_derivation() {
        for budget in [usize::MAX, 0] {
            let dir = tempfile::tempdir().expect("temp dir");
            let state = dir.path();
            dispute(state, "a", &["one", "two"], |c| c[0].clone());
            dispute(state, "b", &["two"], |_| "neither".into());
            let store = Store::with_budget(state, budget);
            assert_eq!(warm(&store), fresh(state));
            assert_eq!(counts(&warm(&store), "one"), (1, 1, 0));
            assert_eq!(counts(&warm(&store), "two"), (2, 0, 1));

            // Another process writes: a new task, and a second dispute in `a`.
            dispute(state, "c", &["one"], |_| "executor".into());
            dispute(state, "a", &["two"], |c| c[0].clone());
            assert_eq!(warm(&store), fresh(state), "budget {budget}");
            assert_eq!(counts(&warm(&store), "two"), (3, 1, 1));

            // This store writes into a task with resolutions.
            let a = TaskName::new("a").expect("task");
            store
                .write(
                    &a,
                    &json!({"kind": "assessment", "subject": "s", "materiality": "low",
                            "hypothesis": "h"}),
                    None,
                )
                .expect("written");
            assert_eq!(warm(&store), fresh(state));

            // A record whose link names another hash: the resolution before it is suspect.
            dispute(state, "d", &["one"], |c| c[0].clone());
            assert_eq!(counts(&warm(&store), "one"), (3, 2, 1));
            let next = put(
                state,
                "d",
                "assessment",
                json!({"subject": "s", "materiality": "low", "hypothesis": "h"}),
            );
            let last = files(state, "d").pop().expect("a file");
            let text = fs::read_to_string(&last).expect("read");
            let prev = serde_json::from_str::<Value>(&text).expect("json")["prev"]
                .as_str()
                .expect("prev")
                .to_string();
            fs::write(&last, text.replace(&prev, &digest(b"elsewhere"))).expect("rewritten");
            assert!(!next.is_empty());
            let judged = warm(&store);
            assert_eq!(judged, fresh(state), "budget {budget}");
            assert_eq!(
                counts(&judged, "one"),
                (2, 1, 1),
                "the broken one is not counted"
            );
        }
    }

    /// Records read past ones no thread has fed yet (two threads feeding at once) leave
    /// the task to a read through the cache before the next tally, which catches it up.
    #[test]
    fn records_fed_out_of_order_are_read_through_the_cache() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path();
        dispute(state, "a", &["one"], |c| c[0].clone());
        let store = Store::open(state);
        let a = TaskName::new("a").expect("task");
        assert_eq!(store.records(&a).expect("read").len(), 5);
        dispute(state, "a", &["two"], |c| c[0].clone());
        let (records, digests): (Vec<Record>, Vec<String>) = files(state, "a")[7..]
            .iter()
            .map(|path| {
                let bytes = fs::read(path).expect("read");
                (
                    serde_json::from_slice(&bytes).expect("a record"),
                    digest(&bytes),
                )
            })
            .unzip();
        super::super::lock(&store.track).feed_read(&a, &records, &digests);
        assert_eq!(
            super::super::lock(&store.track).unjudged(),
            std::slice::from_ref(&a)
        );
        let caught_up = store.track_records().expect("tallied");
        assert_eq!(caught_up, fresh(state));
        assert_eq!(counts(&caught_up, "two"), (1, 1, 0));
        assert!(super::super::lock(&store.track).unjudged().is_empty());
    }

    /// A record file changed by hand after the index took it shows once its task is read
    /// again through the cache (as a view of the task reads it).
    #[test]
    fn an_edited_resolution_shows_once_its_task_is_viewed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path();
        dispute(state, "a", &["one"], |c| c[0].clone());
        let store = Store::open(state);
        assert_eq!(counts(&warm(&store), "one"), (1, 1, 0));
        let last = files(state, "a").pop().expect("the resolution");
        let text = fs::read_to_string(&last).expect("read");
        let edited = text.replace("\"favours\": \"a-003\"", "\"favours\": \"executor\"");
        assert_ne!(text, edited);
        fs::write(&last, edited).expect("edited");
        let a = TaskName::new("a").expect("task");
        store.with_trusted_records(&a, |_, _| ()).expect("viewed");
        assert_eq!(counts(&warm(&store), "one"), (1, 0, 1));
        assert_eq!(warm(&store), fresh(state));
    }
}
