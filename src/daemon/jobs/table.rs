//! The jobs the daemon keeps: each job's state, its events (kept for replay) and its
//! cancellation token, and the table of all of them. The operations on them are the
//! `Jobs` API's (`super`).
//!
//! A finished job keeps its events without the records they carried (see [`Kept`]):
//! those are stored already, and a replay reads them back from the store, so the jobs
//! kept for an hour cost the daemon little memory however many there are. Once it has
//! sent `done`, its summary and events are packed with the other finished jobs' in a few
//! large blocks (`table/packed.rs`) and its entry is freed; asked for, it is read back
//! into an entry of its own that answers as the old one did.
//!
//! A job's state is behind a plain mutex that is only held to read or change it, never
//! across an `.await`; readers of the event stream wait on a `watch` of the event count,
//! so a slow reader never loses an event and never slows the job down.

use crate::context::Resolved;
use crate::core::records::{Record, TaskName};
use crate::protocol::{
    Event, ExchangeStatus, Job, JobId, JobState, RequestContext, Timeout, Timestamp,
};
use crate::store::Store;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod packed;

/// What a job was asked to do; fixed once accepted.
#[derive(Debug, Clone)]
pub struct JobOrder {
    /// The asking process's context. Holds credential values only for a job accepted by
    /// this daemon process (in memory); a resumed job has none and uses the daemon's own.
    pub context: RequestContext,
    /// The extra question, if any.
    pub question: Option<String>,
    /// The prior opinion, if any.
    pub prior_opinion: Option<String>,
    /// The question exactly as a mesh peer asked it (a relayed review): sent instead of
    /// the one built from the assessment. A relayed review's plan never includes mesh
    /// peers, so a review cannot loop through the mesh.
    pub prompt: Option<String>,
    /// How long the job's exchanges may take: each must end by this long after the
    /// fan-out starts.
    pub timeout: Timeout,
    /// Whether the job was read back from the journal after a restart.
    pub resumed: bool,
}

struct Inner {
    job: Job,
    events: Vec<Kept>,
    finished: Option<SystemTime>,
    /// The job is done but its events are still whole: a reader was following it when
    /// `done` came, and takes them from memory instead of reading its records back from
    /// the store; they are parked once a reader has read through `done`, and are packed
    /// parked whatever happens.
    park_pending: bool,
}

impl Inner {
    /// Keep the finished job's events without the records they carried.
    fn park(&mut self) {
        let Inner { job, events, .. } = self;
        *events = std::mem::take(events)
            .into_iter()
            .map(|kept| kept.park(job))
            .collect();
        events.shrink_to_fit();
        self.park_pending = false;
    }
}

/// One event as a job keeps it: whole while the job runs. Once it has finished, an event
/// is kept without what the job already holds: an event that carried a stored record
/// keeps only the record's id, `done` keeps no copy of the job as it ended (the job's own
/// summary is that copy), and `started` keeps no copy of the job's id. (`finished`, with
/// its many small fields, is kept whole.)
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
enum Kept {
    Whole(Event),
    Plan {
        at: Timestamp,
        id: String,
    },
    Started {
        at: Timestamp,
        advisor: String,
    },
    Recorded {
        at: Timestamp,
        advisor: String,
        id: String,
    },
    Disagreement {
        at: Timestamp,
        id: String,
    },
    Done {
        at: Timestamp,
    },
}

impl Kept {
    /// This event of the finished job `job`, kept without what `job` holds.
    fn park(self, job: &Job) -> Kept {
        let Kept::Whole(event) = self else {
            return self;
        };
        match event {
            Event::Plan { at, record, .. } => Kept::Plan {
                at,
                id: record.id().to_string(),
            },
            Event::Started { at, advisor, .. } => Kept::Started { at, advisor },
            Event::Recorded {
                at,
                advisor,
                record,
                ..
            } => Kept::Recorded {
                at,
                advisor,
                id: record.id().to_string(),
            },
            Event::Disagreement { at, record, .. } => Kept::Disagreement {
                at,
                id: record.id().to_string(),
            },
            Event::Done { at, result, .. } if *result == *job => Kept::Done { at },
            other => Kept::Whole(other),
        }
    }

    /// The id of the record it parked, if any.
    fn parked_id(&self) -> Option<&str> {
        match self {
            Kept::Plan { id, .. } | Kept::Recorded { id, .. } | Kept::Disagreement { id, .. } => {
                Some(id)
            }
            _ => None,
        }
    }

    /// Whether it ends the stream.
    fn is_done(&self) -> bool {
        match self {
            Kept::Whole(event) => event.is_done(),
            Kept::Done { .. } => true,
            _ => false,
        }
    }

    /// The event again, of `job`, its record taken from `records` (by id); `None` when
    /// the record is no longer stored.
    fn event(&self, job: &Job, records: &HashMap<String, Record>) -> Option<Event> {
        let record = |id: &str| records.get(id).cloned().map(Box::new);
        let id = || job.id.clone();
        Some(match self {
            Kept::Whole(event) => event.clone(),
            Kept::Plan { at, id: record_id } => Event::Plan {
                job: id(),
                at: *at,
                record: record(record_id)?,
            },
            Kept::Started { at, advisor } => Event::Started {
                job: id(),
                advisor: advisor.clone(),
                at: *at,
            },
            Kept::Recorded {
                at,
                advisor,
                id: record_id,
            } => Event::Recorded {
                job: id(),
                at: *at,
                advisor: advisor.clone(),
                record: record(record_id)?,
            },
            Kept::Disagreement { at, id: record_id } => Event::Disagreement {
                job: id(),
                at: *at,
                record: record(record_id)?,
            },
            Kept::Done { at } => Event::Done {
                job: id(),
                at: *at,
                result: Box::new(job.clone()),
            },
        })
    }
}

/// One job: its state, its events, its token.
pub struct JobEntry {
    inner: Mutex<Inner>,
    event_count: watch::Sender<usize>,
    /// Cancelled by `DELETE` or when the daemon stops; a child of the daemon's token.
    pub cancel: CancellationToken,
    cancel_requested: AtomicBool,
    /// What the job was asked to do.
    pub order: JobOrder,
    /// Taken while the job is journaled, so saves never overtake one another.
    pub journal_turn: tokio::sync::Mutex<()>,
    /// The daemon's feed, which gets every event too (once the job is kept).
    feed: std::sync::OnceLock<Arc<crate::daemon::feed::Feed>>,
    /// The store the job records into, once known: a finished job's replay reads its
    /// records back from it.
    store: std::sync::OnceLock<Arc<Store>>,
    /// The job's context resolved when it was accepted (none for a resumed job).
    resolved: Mutex<Option<Arc<Resolved>>>,
    /// Set once the job was found not to pack (it would not read back identical): it
    /// stays an entry of its own, and is not tried again.
    unpackable: AtomicBool,
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding the lock leaves plain data behind: keep serving it.
    inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl JobEntry {
    /// A job in the state `job` says, with a token under `parent`.
    pub fn new(job: Job, order: JobOrder, parent: &CancellationToken) -> JobEntry {
        let finished = job.state.is_finished().then(SystemTime::now);
        JobEntry {
            inner: Mutex::new(Inner {
                job,
                events: Vec::new(),
                finished,
                park_pending: false,
            }),
            event_count: watch::Sender::new(0),
            cancel: parent.child_token(),
            cancel_requested: AtomicBool::new(false),
            order,
            journal_turn: tokio::sync::Mutex::new(()),
            feed: std::sync::OnceLock::new(),
            store: std::sync::OnceLock::new(),
            resolved: Mutex::new(None),
            unpackable: AtomicBool::new(false),
        }
    }

    /// The finished job `unpacked` read back from the table's packed jobs: what its
    /// entry answered once it ended (its summary, its events, its store), without what
    /// only a running job needs (its order holds the root alone).
    fn unpacked(
        unpacked: packed::In,
        finished: SystemTime,
        store: Option<Arc<Store>>,
    ) -> Option<JobEntry> {
        let context = serde_json::from_value(serde_json::json!({ "root": unpacked.job.root }));
        let order = JobOrder {
            context: context.ok()?,
            question: None,
            prior_opinion: None,
            prompt: None,
            timeout: Timeout::from_secs_f64(unpacked.job.timeout_s.unwrap_or(1.0))
                .or_else(|_| Timeout::from_secs_f64(1.0))
                .ok()?,
            resumed: false,
        };
        let count = unpacked.events.len();
        let entry = JobEntry::new(unpacked.job, order, &CancellationToken::new());
        {
            let mut inner = lock(&entry.inner);
            inner.events = unpacked.events;
            inner.finished = Some(finished);
        }
        entry.event_count.send_replace(count);
        if let Some(store) = store {
            entry.keep_store(store);
        }
        Some(entry)
    }

    /// Pack the job into `archive` if it has ended and sent its last event (and packs
    /// identical); whether it did.
    fn pack_into(&self, archive: &mut packed::Archive) -> bool {
        if self.unpackable.load(Ordering::Relaxed) {
            return false;
        }
        let mut inner = lock(&self.inner);
        let Some(finished) = inner.finished else {
            return false;
        };
        if !inner.events.last().is_some_and(Kept::is_done) {
            return false;
        }
        if inner.park_pending && self.event_count.receiver_count() == 0 {
            inner.park();
        }
        let parked: Vec<Kept>;
        let events = if inner.park_pending {
            // Packed parked, as it would have been with no reader following it; this
            // entry keeps its whole events for the reader that still holds it.
            parked = inner
                .events
                .iter()
                .cloned()
                .map(|kept| kept.park(&inner.job))
                .collect();
            &parked
        } else {
            &inner.events
        };
        let packed = archive.pack(&inner.job, events, finished, self.store.get());
        if !packed {
            self.unpackable.store(true, Ordering::Relaxed);
            // It stays an entry of its own: without the records, as if nobody followed it.
            if inner.park_pending {
                inner.park();
            }
        }
        packed
    }

    /// Keep the job's resolved context, so it is not resolved again to run.
    pub fn keep_resolved(&self, resolved: Arc<Resolved>) {
        *self.resolved.lock().unwrap_or_else(|p| p.into_inner()) = Some(resolved);
    }

    /// The job's resolved context, taken (it is kept only until the job runs).
    pub fn take_resolved(&self) -> Option<Arc<Resolved>> {
        self.resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Note the store the job records into.
    pub fn keep_store(&self, store: Arc<Store>) {
        let _ = self.store.set(store);
    }

    /// Send every event from now on to `feed` as well.
    pub fn attach_feed(&self, feed: Arc<crate::daemon::feed::Feed>) {
        let _ = self.feed.set(feed);
    }

    /// A copy of the job as it stands.
    pub fn snapshot(&self) -> Job {
        lock(&self.inner).job.clone()
    }

    /// The job's id.
    pub fn id(&self) -> JobId {
        lock(&self.inner).job.id.clone()
    }

    /// Its state.
    pub fn state(&self) -> JobState {
        lock(&self.inner).job.state
    }

    /// Change the job under its lock and return a copy of the result.
    pub fn update(&self, change: impl FnOnce(&mut Job)) -> Job {
        let mut inner = lock(&self.inner);
        change(&mut inner.job);
        if inner.job.state.is_finished() && inner.finished.is_none() {
            inner.finished = Some(SystemTime::now());
        }
        inner.job.clone()
    }

    /// Move from `from` to `to` only if the job is in `from`; the job after, if it moved.
    pub fn transition(&self, from: JobState, to: JobState) -> Option<Job> {
        let mut inner = lock(&self.inner);
        if inner.job.state != from {
            return None;
        }
        inner.job.state = to;
        if to.is_finished() && inner.finished.is_none() {
            inner.finished = Some(SystemTime::now());
        }
        Some(inner.job.clone())
    }

    /// Set one selected advisor's exchange status (by position in the plan).
    pub fn set_exchange(&self, index: usize, status: ExchangeStatus) {
        let mut inner = lock(&self.inner);
        if let Some(c) = inner.job.consultations.get_mut(index) {
            c.status = status;
        }
    }

    /// Append an event and wake every reader.
    pub fn emit(&self, event: Event) {
        if let Some(feed) = self.feed.get() {
            let (root, task) = {
                let inner = lock(&self.inner);
                (inner.job.root.clone(), inner.job.task.clone())
            };
            feed.publish(&root, &task, "job", &event);
            if let Event::Plan { record, .. }
            | Event::Recorded { record, .. }
            | Event::Disagreement { record, .. } = &event
            {
                feed.publish(&root, &task, "record", record);
            }
        }
        let count = {
            let mut inner = lock(&self.inner);
            let done = event.is_done();
            inner.events.push(Kept::Whole(event));
            if done && self.store.get().is_some() {
                // Its records are stored: keep their ids only (read back on replay). A
                // reader following the job (the client that queued it, on the same
                // connection) takes the events whole first: reading the records back
                // would cost its reply a look at the task's files.
                if self.event_count.receiver_count() > 0 {
                    inner.park_pending = true;
                } else {
                    inner.park();
                }
            }
            inner.events.len()
        };
        self.event_count.send_replace(count);
    }

    /// Events from position `from` on, and whether the last one ends the stream.
    /// A finished job's records are read back from its store; one no longer stored (a
    /// hand removed it) leaves its event out, and the stream still ends with `done`.
    pub fn events_from(&self, from: usize) -> (Vec<Event>, bool) {
        let (kept, done, job): (Vec<Kept>, bool, Job) = {
            let mut inner = lock(&self.inner);
            let kept = inner.events.get(from..).unwrap_or_default().to_vec();
            let done = inner.events.last().is_some_and(Kept::is_done);
            if done && inner.park_pending {
                // This reader has them all, whole: later ones read the records back.
                inner.park();
            }
            (kept, done, inner.job.clone())
        };
        let wanted: Vec<&str> = kept.iter().filter_map(Kept::parked_id).collect();
        let records = if wanted.is_empty() {
            HashMap::new()
        } else {
            self.stored(&job.task, &wanted)
        };
        let events = kept
            .iter()
            .filter_map(|k| k.event(&job, &records))
            .collect();
        (events, done)
    }

    /// The records `ids` of `task` (this job's), read from its store (those found).
    fn stored(&self, task: &str, ids: &[&str]) -> HashMap<String, Record> {
        let (Some(store), Ok(task)) = (self.store.get(), TaskName::new(task)) else {
            return HashMap::new();
        };
        let found = store.with_records(&task, |records| {
            records
                .iter()
                .rev()
                .filter(|r| ids.contains(&r.id()))
                .take(ids.len())
                .map(|r| (r.id().to_string(), r.clone()))
                .collect::<HashMap<_, _>>()
        });
        found.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read a finished job's records back");
            HashMap::new()
        })
    }

    /// A receiver woken whenever an event is appended.
    pub fn watch_events(&self) -> watch::Receiver<usize> {
        self.event_count.subscribe()
    }

    /// Ask the job to stop because a client cancelled it.
    pub fn request_cancel(&self) {
        self.cancel_requested.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// Whether a client cancelled the job (as opposed to the daemon stopping).
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }

    /// When the job ended, if it has.
    pub fn finished_at(&self) -> Option<SystemTime> {
        lock(&self.inner).finished
    }
}

/// How long finished jobs are kept, and how many at most.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// A finished job older than this is pruned.
    pub keep_for: Duration,
    /// At most this many finished jobs are kept (the newest).
    pub keep_max: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_for: Duration::from_secs(3600),
            keep_max: 256,
        }
    }
}

/// Every job the daemon keeps, by id (ULIDs sort by creation): the running ones (and
/// finished ones not packed) as entries of their own, the finished ones packed (see
/// `table/packed.rs`), each read back into an entry of its own when asked for.
#[derive(Default)]
pub struct JobTable {
    jobs: Mutex<BTreeMap<JobId, Arc<JobEntry>>>,
    /// Taken only with `jobs` held, after it.
    packed: Mutex<packed::Archive>,
}

impl JobTable {
    fn map(&self) -> MutexGuard<'_, BTreeMap<JobId, Arc<JobEntry>>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn archive(&self) -> MutexGuard<'_, packed::Archive> {
        self.packed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `entry`.
    pub fn insert(&self, entry: Arc<JobEntry>) {
        let id = entry.id();
        self.map().insert(id, entry);
    }

    /// The job `id`, if kept.
    pub fn get(&self, id: &str) -> Option<Arc<JobEntry>> {
        let map = self.map();
        if let Some(entry) = map.get(id) {
            return Some(entry.clone());
        }
        let archive = self.archive();
        let packed = archive.find(id)?;
        Self::read_back(&archive, packed)
    }

    /// The packed job `packed` as an entry of its own.
    fn read_back(archive: &packed::Archive, packed: &packed::Packed) -> Option<Arc<JobEntry>> {
        let (unpacked, store) = archive.unpack(packed)?;
        JobEntry::unpacked(unpacked, packed.finished, store).map(Arc::new)
    }

    /// Every job kept, oldest first.
    pub fn all(&self) -> Vec<Arc<JobEntry>> {
        let map = self.map();
        let archive = self.archive();
        let mut all: Vec<(JobId, Arc<JobEntry>)> = map
            .iter()
            .map(|(id, entry)| (id.clone(), entry.clone()))
            .collect();
        all.extend(archive.jobs().iter().filter_map(|packed| {
            let entry = Self::read_back(&archive, packed)?;
            Some((JobId::from(archive.id(packed)), entry))
        }));
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter().map(|(_, entry)| entry).collect()
    }

    /// How many jobs are in each state (every state listed).
    pub fn counts(&self) -> BTreeMap<JobState, usize> {
        let mut counts: BTreeMap<JobState, usize> =
            JobState::ALL.into_iter().map(|s| (s, 0)).collect();
        let map = self.map();
        for entry in map.values() {
            *counts.entry(entry.state()).or_default() += 1;
        }
        for packed in self.archive().jobs() {
            *counts.entry(packed.state).or_default() += 1;
        }
        counts
    }

    /// Whether any job is queued or running (a packed job has finished).
    pub fn any_unfinished(&self) -> bool {
        self.map().values().any(|e| !e.state().is_finished())
    }

    /// Plan ids claimed by jobs other than `except`.
    pub fn claimed_plans(&self, except: &JobId) -> Vec<String> {
        self.all()
            .iter()
            .map(|e| e.snapshot())
            .filter(|job| &job.id != except)
            .filter_map(|job| job.plan.map(|p| p.to_string()))
            .collect()
    }

    /// Pack the finished jobs that sent their last event, then drop finished jobs past
    /// `retention` as of `now`; the ids dropped.
    pub fn prune(&self, retention: Retention, now: SystemTime) -> Vec<JobId> {
        let mut map = self.map();
        let mut archive = self.archive();
        map.retain(|_, entry| !entry.pack_into(&mut archive));
        // Each finished job's end and its id, borrowed where it is kept: only the ids of
        // the jobs dropped are copied (this runs whenever a job ends, over every job kept).
        let dropped: Vec<JobId> = {
            let mut finished: Vec<(SystemTime, &str)> = map
                .iter()
                .filter_map(|(id, e)| e.finished_at().map(|at| (at, id.as_str())))
                .collect();
            finished.extend(archive.jobs().iter().map(|p| (p.finished, archive.id(p))));
            // Newest first, so the ones past `keep_max` are at the end.
            finished.sort_unstable_by(|a, b| b.cmp(a));
            finished
                .into_iter()
                .enumerate()
                .filter(|(rank, (at, _))| {
                    *rank >= retention.keep_max
                        || now.duration_since(*at).unwrap_or_default() > retention.keep_for
                })
                .map(|(_, (_, id))| JobId::from(id))
                .collect()
        };
        for id in &dropped {
            map.remove(id);
        }
        if !dropped.is_empty() {
            archive.retain(|id, _| !dropped.iter().any(|d| d.as_str() == id));
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, state: JobState) -> Job {
        Job::sample(id, state)
    }

    /// Job 1's exchange with `alpha` at `at`: its start, and its end by timeout.
    fn timed_out_exchange(at: Timestamp) -> [Event; 2] {
        [
            Event::Started {
                job: "1".into(),
                advisor: "alpha".into(),
                at,
            },
            Event::Finished {
                job: "1".into(),
                at,
                advisor: "alpha".into(),
                status: crate::core::records::ConsultationStatus::Failed,
                failure: Some(crate::core::records::FailureKind::Timeout),
                diagnostic: Some("no answer".into()),
                duration_ms: 7,
            },
        ]
    }

    fn request() -> JobOrder {
        JobOrder {
            context: serde_json::from_value(serde_json::json!({"root": "/r"})).unwrap(),
            question: None,
            prior_opinion: None,
            prompt: None,
            timeout: Timeout::from_secs_f64(1.0).unwrap(),
            resumed: false,
        }
    }

    fn table(states: &[(&str, JobState)]) -> JobTable {
        let token = CancellationToken::new();
        let table = JobTable::default();
        for (id, state) in states {
            table.insert(Arc::new(JobEntry::new(job(id, *state), request(), &token)));
        }
        table
    }

    #[test]
    fn prune_keeps_unfinished_and_the_newest_finished() {
        let t = table(&[
            ("1", JobState::Done),
            ("2", JobState::Queued),
            ("3", JobState::Failed),
            ("4", JobState::Running),
            ("5", JobState::Cancelled),
        ]);
        let now = SystemTime::now() + Duration::from_secs(1);
        let keep_two = Retention {
            keep_for: Duration::from_secs(3600),
            keep_max: 2,
        };
        let mut dropped = t.prune(keep_two, now);
        dropped.sort();
        assert_eq!(dropped.len(), 1, "one finished job over the limit of two");
        assert!(
            t.get("2").is_some() && t.get("4").is_some(),
            "unfinished jobs stay"
        );
        let all_old = Retention {
            keep_for: Duration::ZERO,
            keep_max: 256,
        };
        assert_eq!(t.prune(all_old, now).len(), 2);
        let ids: Vec<String> = t.all().iter().map(|e| e.id().to_string()).collect();
        assert_eq!(ids, ["2", "4"]);
    }

    #[test]
    fn counts_list_every_state() {
        let t = table(&[
            ("1", JobState::Done),
            ("2", JobState::Done),
            ("3", JobState::Queued),
        ]);
        let counts = t.counts();
        assert_eq!(counts[&JobState::Done], 2);
        assert_eq!(counts[&JobState::Queued], 1);
        assert_eq!(counts[&JobState::Failed], 0);
        assert_eq!(counts.len(), JobState::ALL.len());
    }

    /// The daemon is quiet (and hands freed memory back) only when no job is queued or
    /// running.
    #[test]
    fn any_unfinished_sees_queued_and_running_jobs_only() {
        let finished = table(&[
            ("1", JobState::Done),
            ("2", JobState::Failed),
            ("3", JobState::Cancelled),
        ]);
        assert!(!finished.any_unfinished());
        assert!(table(&[("1", JobState::Done), ("2", JobState::Queued)]).any_unfinished());
        assert!(table(&[("1", JobState::Running)]).any_unfinished());
    }

    #[test]
    fn transition_only_from_the_expected_state() {
        let t = table(&[("1", JobState::Queued)]);
        let e = t.get("1").unwrap();
        assert!(e.transition(JobState::Running, JobState::Done).is_none());
        assert!(e
            .transition(JobState::Queued, JobState::Cancelled)
            .is_some());
        assert!(e.finished_at().is_some());
        assert!(e.transition(JobState::Queued, JobState::Running).is_none());
    }

    #[test]
    fn events_replay_from_any_position() {
        let t = table(&[("1", JobState::Running)]);
        let e = t.get("1").unwrap();
        let started = |a: &str| Event::Started {
            job: "1".into(),
            advisor: a.into(),
            at: crate::protocol::Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
        };
        e.emit(started("a"));
        e.emit(started("b"));
        assert_eq!(e.events_from(0).0.len(), 2);
        assert_eq!(e.events_from(1).0, vec![started("b")]);
        assert_eq!(e.events_from(5).0, vec![]);
        assert!(!e.events_from(0).1);
        e.emit(Event::Done {
            at: crate::protocol::Timestamp::now(),
            job: "1".into(),
            result: Box::new(e.snapshot()),
        });
        assert!(e.events_from(3).1);
        assert_eq!(*e.watch_events().borrow(), 3);
    }

    /// A finished job keeps the ids of the records its events carried, and a replay reads
    /// them back from its store: the same events as while it ran. A record no longer
    /// stored leaves its event out; the stream still ends with `done`.
    #[test]
    fn a_finished_job_keeps_record_ids_and_replays_the_records_from_its_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(Store::open(dir.path()));
        let task = TaskName::new("t").expect("a task");
        let write = |subject: &str| {
            store
                .write(
                    &task,
                    &serde_json::json!({"kind": "assessment", "subject": subject,
                        "materiality": "low", "hypothesis": "h"}),
                    None,
                )
                .expect("stored")
        };
        let (first, second) = (write("one"), write("two"));
        let t = table(&[("1", JobState::Running)]);
        let e = t.get("1").unwrap();
        e.keep_store(store.clone());
        let at = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let recorded = |record: &Record| Event::Recorded {
            job: "1".into(),
            at,
            advisor: "alpha".into(),
            record: Box::new(record.clone()),
        };
        let [started, finished] = timed_out_exchange(at);
        e.emit(started.clone());
        e.emit(finished.clone());
        e.emit(recorded(&first));
        e.emit(recorded(&second));
        let done = Event::Done {
            at,
            job: "1".into(),
            result: Box::new(e.snapshot()),
        };
        e.emit(done.clone());
        let kept = lock(&e.inner).events.clone();
        assert_eq!(
            kept.iter().filter(|k| k.parked_id().is_some()).count(),
            2,
            "both records are kept as ids once the job is done"
        );
        assert!(
            kept.iter()
                .all(|k| matches!(k, Kept::Whole(Event::Finished { .. }))
                    || !matches!(k, Kept::Whole(_))),
            "no event keeps a record or a copy of the job: {kept:?}"
        );
        assert_eq!(
            e.events_from(0),
            (
                vec![
                    started,
                    finished,
                    recorded(&first),
                    recorded(&second),
                    done.clone()
                ],
                true
            )
        );
        assert_eq!(e.events_from(3).0, vec![recorded(&second), done.clone()]);
        // The second record's file removed behind the daemon's back (a fresh store, as
        // after a restart of the cache): its event is left out.
        let fresh = Arc::new(Store::open(dir.path()));
        let path = fresh.task_dir(&task).join(crate::store::file_name(&second));
        std::fs::remove_file(path).expect("removed");
        let e2 = JobEntry::new(
            Job::sample("1", JobState::Running),
            request(),
            &CancellationToken::new(),
        );
        e2.keep_store(fresh);
        e2.emit(recorded(&first));
        e2.emit(recorded(&second));
        e2.emit(done.clone());
        assert_eq!(e2.events_from(0), (vec![recorded(&first), done], true));
    }

    /// A store in a temporary directory holding one assessment of task `t`.
    fn store_with_an_assessment() -> (tempfile::TempDir, Arc<Store>, TaskName, Record) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(Store::open(dir.path()));
        let task = TaskName::new("t").expect("a task");
        let assessment = store
            .write(
                &task,
                &serde_json::json!({"kind": "assessment", "subject": "s",
                    "materiality": "low", "hypothesis": "h"}),
                None,
            )
            .expect("stored");
        (dir, store, task, assessment)
    }

    /// A job that ends while a reader follows it keeps its events whole for that reader:
    /// it gets the records as they were sent, without reading them back from the store
    /// (here one was removed behind the daemon's back, and the follower still gets it).
    /// Once it has read through `done` the events are parked like any finished job's, and
    /// a packed copy is parked even while the reader has not read yet.
    #[test]
    fn a_follower_gets_the_events_whole_then_they_are_parked() {
        let (dir, store, task, record) = store_with_an_assessment();
        let t = table(&[("1", JobState::Running)]);
        let e = t.get("1").unwrap();
        // Its own store, which has not read the task yet: a read-back looks at the files.
        e.keep_store(Arc::new(Store::open(dir.path())));
        let follower = e.watch_events();
        let at = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let recorded = Event::Recorded {
            job: "1".into(),
            at,
            advisor: "alpha".into(),
            record: Box::new(record.clone()),
        };
        e.emit(recorded.clone());
        let job = e.update(|job| job.state = JobState::Done);
        let done = Event::Done {
            at,
            job: "1".into(),
            result: Box::new(job),
        };
        e.emit(done.clone());
        let parked = |e: &JobEntry| {
            lock(&e.inner)
                .events
                .iter()
                .filter(|k| k.parked_id().is_some())
                .count()
        };
        assert_eq!(parked(&e), 0, "kept whole while a reader follows the job");
        let mut archive = packed::Archive::default();
        assert!(e.pack_into(&mut archive), "a followed job packs");
        assert_eq!(parked(&e), 0, "packing leaves the follower's copy whole");
        let packed = archive.jobs().first().expect("packed");
        let (unpacked, _) = archive.unpack(packed).expect("unpacks");
        assert!(
            unpacked
                .events
                .iter()
                .any(|k| k.parked_id() == Some(record.id())),
            "the packed copy keeps the record's id, not the record: {:?}",
            unpacked.events
        );
        std::fs::remove_file(store.task_dir(&task).join(crate::store::file_name(&record)))
            .expect("removed");
        assert_eq!(
            e.events_from(0),
            (vec![recorded, done.clone()], true),
            "the follower gets the record it was sent"
        );
        assert_eq!(parked(&e), 1, "parked once read through `done`");
        assert_eq!(
            e.events_from(0),
            (vec![done], true),
            "a later reader reads the records back from the files (this one is gone)"
        );
        drop(follower);
    }

    /// A finished job, once packed (out of the table's entries, into its chunks), answers
    /// as its entry did before: its summary (`GET /api/v1/jobs/ID`), a replay of its
    /// events from any position (its records read back from its store), its place in the
    /// list and the counts. Pruned, its chunk goes.
    #[test]
    fn a_packed_job_answers_as_it_did_before_it_was_packed() {
        let (_dir, store, _task, assessment) = store_with_an_assessment();
        let t = table(&[("1", JobState::Running), ("2", JobState::Running)]);
        let e = t.get("1").unwrap();
        e.keep_store(store.clone());
        let at = Timestamp::parse("2026-01-01T00:00:00.123Z").unwrap();
        let [started, finished] = timed_out_exchange(at);
        e.emit(started);
        e.emit(finished);
        e.emit(Event::Recorded {
            job: "1".into(),
            at,
            advisor: "alpha".into(),
            record: Box::new(assessment),
        });
        let job = e.update(|job| {
            job.state = JobState::Done;
            job.finished_at = Some(at);
            job.reason = Some("a reason".into());
        });
        e.emit(Event::Done {
            at,
            job: "1".into(),
            result: Box::new(job.clone()),
        });
        let before = (e.snapshot(), e.events_from(0), e.events_from(2));
        let listed: Vec<Job> = t.all().iter().map(|e| e.snapshot()).collect();
        let counts = t.counts();
        drop(e);
        assert!(t.prune(Retention::default(), SystemTime::now()).is_empty());
        assert_eq!(t.map().len(), 1, "the finished job left the entries");
        assert_eq!(t.archive().jobs().len(), 1, "and was packed");
        let back = t.get("1").expect("still kept");
        assert_eq!(
            (back.snapshot(), back.events_from(0), back.events_from(2)),
            before
        );
        assert_eq!(before.1 .0.len(), 4, "every event replayed: {:?}", before.1);
        assert_eq!(back.finished_at(), t.get("1").unwrap().finished_at());
        assert_eq!(
            t.all().iter().map(|e| e.snapshot()).collect::<Vec<_>>(),
            listed,
            "listed in the same place"
        );
        assert_eq!(t.counts(), counts);
        assert!(t.any_unfinished(), "job 2 still runs");
        assert_eq!(*back.watch_events().borrow(), 4);
        // Pruned: gone from the list, and its chunk freed.
        let all_old = Retention {
            keep_for: Duration::ZERO,
            keep_max: 256,
        };
        let later = SystemTime::now() + Duration::from_secs(1);
        assert_eq!(t.prune(all_old, later), vec![JobId::from("1")]);
        assert!(t.get("1").is_none());
        assert_eq!(t.archive().size(), (0, 0));
    }

    /// Jobs pack one after the other into chunks of at least 128 KiB (a few large blocks
    /// in place of thousands of small ones), and a chunk whose jobs were all pruned is freed.
    #[test]
    fn packed_jobs_fill_chunks_that_are_freed_once_empty() {
        let t = JobTable::default();
        let token = CancellationToken::new();
        let keep = Retention {
            keep_for: Duration::from_secs(3600),
            keep_max: 100,
        };
        for n in 0..1000 {
            let id = format!("{n:06}");
            let mut job = Job::sample(&id, JobState::Done);
            job.reason = Some("x".repeat(400));
            let entry = Arc::new(JobEntry::new(job.clone(), request(), &token));
            entry.emit(Event::Done {
                at: Timestamp::now(),
                job: id.as_str().into(),
                result: Box::new(job),
            });
            t.insert(entry);
            t.prune(keep, SystemTime::now());
        }
        assert_eq!(t.map().len(), 0);
        let (chunks, used) = t.archive().size();
        assert_eq!(t.archive().jobs().len(), 100);
        assert!(
            chunks <= 2 && used <= 2 * packed::CHUNK,
            "100 jobs of about 1 KiB: {chunks} chunks, {used} bytes"
        );
        let ids: Vec<String> = t.all().iter().map(|e| e.id().to_string()).collect();
        assert_eq!(ids.first().map(String::as_str), Some("000900"));
        assert_eq!(ids.last().map(String::as_str), Some("000999"));
    }
}
