//! The `Jobs` API: every operation on consultation jobs, whoever asks (the socket's
//! handlers today, the MCP server and the web page next): submit, get, list, cancel,
//! subscribe to the events from any point (replayed), wait with a bound, and the one
//! [`Jobs::finish`] every ending goes through.
//!
//! `Jobs` also holds what running jobs share: the journal, the adapters' registry, the
//! HTTP client, the cancellation tokens and task tracker, the per-advisor semaphores and
//! the stores. The job itself is run by `super::runner`; the scheduler in `super` starts
//! queued jobs under a bound.

mod table;

pub use table::{JobEntry, JobOrder, JobTable, Retention};

use crate::context::{self, Resolved};
use crate::core::records::Kind;
use crate::daemon::journal::{Journal, JournalEntry, JournalError, JOURNAL_SCHEMA};
use crate::error::{Error, Result};
use crate::protocol::{
    ConsultRequest, Event, Job, JobId, JobList, JobState, JobsRequest, Timeout, Timestamp, Waited,
};
use crate::store::Store;
use advisord_adapters::registry::Registry;
use futures::Stream;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a cancellation waits for a running job to wind down before answering with the
/// job still stopping.
pub const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// The jobs of one daemon, and what they share.
pub struct Jobs {
    pub(crate) table: JobTable,
    pub(crate) journal: Journal,
    pub(crate) registry: Registry,
    pub(crate) http: reqwest::Client,
    /// Cancelled after the grace period at shutdown: every job and exchange stops.
    pub(crate) token: CancellationToken,
    /// Cancelled when shutdown begins: no new job or exchange starts.
    pub(crate) drain: CancellationToken,
    /// Every running job and exchange.
    pub(crate) tracker: TaskTracker,
    queue: mpsc::UnboundedSender<Arc<JobEntry>>,
    /// One semaphore per advisor id, bounding its exchanges across all jobs.
    semaphores: Mutex<HashMap<String, Arc<Semaphore>>>,
    pub(crate) started: Instant,
    /// When this daemon started, in milliseconds since the epoch (ULID time).
    pub(crate) started_ms: u64,
    /// Held by a resumed job while it looks for the plan it may have recorded before the
    /// daemon stopped, so two resumed jobs never take the same one.
    pub(crate) plan_claims: tokio::sync::Mutex<()>,
    /// The daemon's place on the mesh, when it joined one.
    pub(crate) mesh: Option<Arc<crate::daemon::mesh::Mesh>>,
    /// When the last request came or a job was last seen active, for `--idle-exit`.
    last_activity: Mutex<Instant>,
    /// What the cockpit follows: job events, records written, advisors' status.
    pub(crate) feed: Arc<crate::daemon::feed::Feed>,
    /// Woken when a job ends, so the pruner holds the number of finished jobs kept to
    /// its limit at once rather than at its next round.
    pub(crate) ended: tokio::sync::Notify,
}

/// How long a resumed job waits for the mesh to connect before finding its peers.
const RESUME_MESH_WAIT: Duration = Duration::from_secs(3);

impl Jobs {
    /// The jobs of a daemon journaling into `journal`; queued jobs are handed to `queue`.
    pub(crate) fn new(
        journal: Journal,
        registry: Registry,
        queue: mpsc::UnboundedSender<Arc<JobEntry>>,
        started_ms: u64,
        mesh: Option<Arc<crate::daemon::mesh::Mesh>>,
        feed: crate::daemon::feed::Limits,
    ) -> Jobs {
        Jobs {
            table: JobTable::default(),
            journal,
            registry,
            http: reqwest::Client::new(),
            token: CancellationToken::new(),
            drain: CancellationToken::new(),
            tracker: TaskTracker::new(),
            queue,
            semaphores: Mutex::new(HashMap::new()),
            started: Instant::now(),
            started_ms,
            plan_claims: tokio::sync::Mutex::new(()),
            mesh,
            last_activity: Mutex::new(Instant::now()),
            feed: Arc::new(crate::daemon::feed::Feed::new(started_ms, feed)),
            ended: tokio::sync::Notify::new(),
        }
    }

    /// The mesh peers to add to a plan's catalogue, after a quick sweep when `sweep` (a
    /// plan is about to be made); none off the mesh.
    pub(crate) async fn mesh_peers(
        &self,
        sweep: bool,
    ) -> Vec<crate::core::catalogue::AdvisorEntry> {
        let Some(mesh) = &self.mesh else {
            return Vec::new();
        };
        if sweep {
            let started = std::time::Instant::now();
            mesh.sweep(false).await;
            tracing::debug!(
                took_ms = started.elapsed().as_millis() as u64,
                "quick sweep before a plan"
            );
        }
        mesh.entries()
    }

    /// The mesh peers for a job resumed after a restart: the bus is given a moment to
    /// connect and a sweep is made first, so the peers its plan selected are found again.
    pub(crate) async fn mesh_peers_after_restart(
        &self,
    ) -> Vec<crate::core::catalogue::AdvisorEntry> {
        if let Some(mesh) = &self.mesh {
            mesh.wait_connected(RESUME_MESH_WAIT).await;
        }
        self.mesh_peers(true).await
    }

    /// Queue a consultation: check the request, journal the job durably, then hand it to
    /// the scheduler. The job as accepted.
    pub async fn submit(self: &Arc<Self>, request: ConsultRequest) -> Result<Job> {
        self.accept(request, None).await
    }

    /// Queue a review relayed for a mesh peer: a consultation whose advisors get
    /// `question` exactly as the peer asked it (and whose plan never includes mesh peers).
    pub(crate) async fn submit_relayed(
        self: &Arc<Self>,
        request: ConsultRequest,
        question: String,
    ) -> Result<Job> {
        self.accept(request, Some(question)).await
    }

    async fn accept(
        self: &Arc<Self>,
        request: ConsultRequest,
        prompt: Option<String>,
    ) -> Result<Job> {
        if self.drain.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        context::require_root(&request.context)?;
        let timeout = request.timeout.unwrap_or_default();
        let mut context = request.context;
        let assessment = request.assessment;
        let (checked_context, task) = {
            let assessment = assessment.clone();
            let jobs = self.clone();
            blocking(move || {
                let resolved = Resolved::resolve(&context, &jobs.registry)?;
                // Looked at in place: the task may hold thousands of records.
                let found =
                    jobs.store(&resolved.state_dir)
                        .with_records(&resolved.task, |records| {
                            records
                                .iter()
                                .find(|r| r.id() == assessment.as_str())
                                .map(|r| r.kind())
                        })?;
                match found {
                    Some(Kind::Assessment) => {}
                    Some(other) => {
                        return Err(Error::Usage(format!(
                            "`{assessment}` is a {other}, not an assessment; consult on an \
                             assessment id"
                        )))
                    }
                    None => {
                        return Err(Error::NotFound(format!(
                            "no assessment `{assessment}` in task `{}`; record one first, or \
                             name the task it belongs to",
                            resolved.task
                        )))
                    }
                }
                // Pin the task, so a resumed job records where this one would have.
                context.task = Some(resolved.task.to_string());
                Ok((context, resolved.task.to_string()))
            })
            .await?
        };
        context = checked_context;
        let job = Job::queued(
            JobId::generate(),
            context.root.display().to_string(),
            task,
            assessment,
            Some(timeout.as_secs_f64()),
        );
        let order = JobOrder {
            context,
            question: request.question,
            prior_opinion: request.prior_opinion,
            prompt,
            timeout,
            resumed: false,
        };
        let entry = Arc::new(JobEntry::new(job.clone(), order, &self.token));
        self.persist(&entry).await.map_err(|e| {
            Error::Internal(format!(
                "the job was not accepted: {e}; free space or fix the data directory"
            ))
        })?;
        tracing::info!(job = %job.id, task = %job.task, assessment = %job.assessment, "job queued");
        entry.attach_feed(self.feed.clone());
        self.table.insert(entry.clone());
        self.enqueue(entry);
        Ok(job)
    }

    /// The job `id` as it stands.
    pub fn get(&self, id: &JobId) -> Result<Job> {
        Ok(self.entry(id)?.snapshot())
    }

    /// The kept entry of job `id`.
    pub fn entry(&self, id: &JobId) -> Result<Arc<JobEntry>> {
        self.table
            .get(id.as_str())
            .ok_or_else(|| Error::UnknownJob(id.clone()))
    }

    /// The jobs kept, oldest first, filtered by the request.
    pub fn list(&self, request: &JobsRequest) -> JobList {
        let jobs = self
            .table
            .all()
            .iter()
            .map(|e| e.snapshot())
            .filter(|j| request.root.as_ref().is_none_or(|r| &j.root == r))
            .filter(|j| request.task.as_ref().is_none_or(|t| &j.task == t))
            .filter(|j| request.state.is_none_or(|s| j.state == s))
            .collect();
        JobList { jobs }
    }

    /// How many jobs are kept in each state (every state listed).
    pub fn counts(&self) -> BTreeMap<JobState, usize> {
        self.table.counts()
    }

    /// Note activity now (a request, an active job): the idle clock starts again.
    pub fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// How long since the last activity.
    pub fn idle_for(&self) -> Duration {
        self.last_activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    /// Cancel job `id`. A queued job ends at once; a running one is asked to stop and
    /// waited for up to [`CANCEL_WAIT`]. The job as it then stands (still running when it
    /// did not stop in time); [`Error::JobFinished`] when it had already ended.
    pub async fn cancel(&self, id: &JobId) -> Result<Job> {
        let entry = self.entry(id)?;
        let now = entry.snapshot();
        if now.state.is_finished() {
            return Err(Error::JobFinished {
                id: now.id,
                state: now.state,
            });
        }
        if entry
            .transition(JobState::Queued, JobState::Cancelled)
            .is_some()
        {
            entry.cancel.cancel();
            let job = self
                .finish(
                    &entry,
                    JobState::Cancelled,
                    Some("cancelled before it started".into()),
                )
                .await;
            return Ok(job);
        }
        entry.request_cancel();
        tracing::info!(job = %id, "cancelling a running job");
        let _ = tokio::time::timeout(CANCEL_WAIT, ended(&entry)).await;
        Ok(entry.snapshot())
    }

    /// Job `id`'s events from position `from` on: past ones replayed, then live ones, ending
    /// after [`Event::Done`] (or when the daemon stops).
    pub fn subscribe(
        &self,
        id: &JobId,
        from: usize,
    ) -> Result<impl Stream<Item = Event> + Send + 'static> {
        let entry = self.entry(id)?;
        let state = Subscription {
            wake: entry.watch_events(),
            entry,
            position: from,
            pending: std::collections::VecDeque::new(),
            ended: false,
            stop: self.token.clone(),
        };
        Ok(futures::stream::unfold(state, Subscription::next))
    }

    /// Wait for job `id` to end, at most `bound`.
    pub async fn wait(&self, id: &JobId, bound: Option<Timeout>) -> Result<Waited> {
        let entry = self.entry(id)?;
        match bound {
            None => ended(&entry).await,
            Some(bound) => {
                if tokio::time::timeout(bound.duration(), ended(&entry))
                    .await
                    .is_err()
                {
                    return Ok(Waited::TimedOut(Box::new(entry.snapshot())));
                }
            }
        }
        let job = entry.snapshot();
        if job.state.is_finished() {
            Ok(Waited::Ended(Box::new(job)))
        } else {
            Err(Error::ShuttingDown)
        }
    }

    /// End `entry` in `state` for `reason`: the one way a job ends. Its end is stamped,
    /// journaled, logged and sent as the last event. The job as it ended.
    pub async fn finish(
        &self,
        entry: &Arc<JobEntry>,
        state: JobState,
        reason: Option<String>,
    ) -> Job {
        let job = entry.update(|job| {
            job.state = state;
            job.finished_at = Some(Timestamp::now());
            job.reason = reason;
            // A job that ended stopped every exchange it did not record (a failure while
            // recording cancels the rest): none of them is still pending or running.
            for c in &mut job.consultations {
                if c.record.is_none()
                    && matches!(
                        c.status,
                        crate::protocol::ExchangeStatus::Pending
                            | crate::protocol::ExchangeStatus::Running
                    )
                {
                    c.status = crate::protocol::ExchangeStatus::Failed;
                    c.failure = Some(crate::core::records::FailureKind::Cancelled);
                }
            }
        });
        if let Err(e) = self.persist(entry).await {
            tracing::error!(job = %job.id, error = %e, "could not journal the end of a job");
        }
        tracing::info!(job = %job.id, state = job.state.as_str(), reason = ?job.reason, "job ended");
        entry.emit(Event::Done {
            at: crate::protocol::Timestamp::now(),
            job: job.id.clone(),
            result: Box::new(job.clone()),
        });
        self.ended.notify_one();
        self.publish_advisors(entry);
        job
    }

    /// After a job: the advisors' status of its root and task to the feed, when it
    /// changed (an advisor cooling down after a failure).
    fn publish_advisors(self: &Jobs, entry: &Arc<JobEntry>) {
        if self.feed.subscribers() == 0 {
            return;
        }
        let (feed, registry) = (self.feed.clone(), self.registry.clone());
        let mut context = entry.order.context.clone();
        let job = entry.snapshot();
        let peers = self.mesh.as_ref().map(|m| m.entries()).unwrap_or_default();
        tokio::task::spawn_blocking(move || {
            context.mesh_peers = peers;
            if let Ok(view) = crate::service::advisors(&registry, &context) {
                feed.publish_advisors(&job.root, &job.task, &view);
            }
        });
    }

    /// The semaphore bounding `advisor`'s exchanges (created with `max_concurrent`
    /// permits the first time the advisor is consulted).
    pub(crate) fn advisor_slots(&self, advisor: &str, max_concurrent: u32) -> Arc<Semaphore> {
        let mut map = self.semaphores.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(advisor.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(max_concurrent.max(1) as usize)))
            .clone()
    }

    /// The store of `state_dir`, shared by every job and request of the daemon
    /// ([`Store::shared`]: its cache of records is then read once, not once per job).
    pub(crate) fn store(&self, state_dir: &Path) -> Arc<Store> {
        Store::shared(state_dir)
    }

    /// Hand a queued job to the scheduler.
    pub(crate) fn enqueue(&self, entry: Arc<JobEntry>) {
        // The receiver lives as long as the daemon; after shutdown the job stays journaled.
        let _ = self.queue.send(entry);
    }

    /// Journal the job as it stands now, after any save already under way. Credential
    /// values are left out.
    pub(crate) async fn persist(&self, entry: &Arc<JobEntry>) -> Result<(), JournalError> {
        let _turn = entry.journal_turn.lock().await;
        let mut context = entry.order.context.clone();
        context.credentials.clear();
        let saved = JournalEntry {
            schema: JOURNAL_SCHEMA,
            job: entry.snapshot(),
            context,
            question: entry.order.question.clone(),
            prior_opinion: entry.order.prior_opinion.clone(),
            prompt: entry.order.prompt.clone(),
            timeout: entry.order.timeout,
        };
        let dir = self.journal.dir().to_path_buf();
        tokio::task::spawn_blocking(move || Journal::at(dir).save(&saved))
            .await
            .unwrap_or_else(|e| {
                Err(JournalError {
                    context: "the journal writer panicked".into(),
                    source: io::Error::other(e.to_string()),
                })
            })
    }
}

/// Resolves once `entry` has ended (or the job's events stop for good).
async fn ended(entry: &JobEntry) {
    let mut wake = entry.watch_events();
    loop {
        wake.borrow_and_update();
        if entry.state().is_finished() {
            return;
        }
        if wake.changed().await.is_err() {
            return;
        }
    }
}

/// Run `work` on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("a worker thread failed: {e}")))?
}

/// A reader of one job's events.
struct Subscription {
    entry: Arc<JobEntry>,
    wake: watch::Receiver<usize>,
    position: usize,
    pending: std::collections::VecDeque<Event>,
    ended: bool,
    stop: CancellationToken,
}

impl Subscription {
    /// The next event, waiting for one if none is new.
    async fn next(mut self) -> Option<(Event, Subscription)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((event, self));
            }
            if self.ended {
                return None;
            }
            // Mark the count seen before reading, so an event emitted after the read
            // wakes the wait below.
            self.wake.borrow_and_update();
            let (events, done) = self.entry.events_from(self.position);
            if !events.is_empty() {
                self.position += events.len();
                self.ended = done;
                self.pending.extend(events);
                continue;
            }
            tokio::select! {
                changed = self.wake.changed() => if changed.is_err() { return None },
                () = self.stop.cancelled() => return None,
            }
        }
    }
}
