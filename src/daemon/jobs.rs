//! The `Jobs` API: every operation on consultation jobs, whoever asks (the socket's
//! handlers, the MCP server through them, the web page, the mesh relay): submit (a
//! [`JobHandle`]), get, list, cancel, subscribe to the events from any point (replayed),
//! wait with a bound, and the one [`Jobs::finish`] every ending goes through.
//!
//! `Jobs` also holds what running jobs share: the journal, the adapters' registry, the
//! HTTP client, the cancellation tokens and task tracker, the per-advisor semaphores, the
//! stores and the peers a plan may add (a [`PeerSource`], which the mesh implements). Its
//! own workers live beside it: the jobs journaled by an earlier run taken back
//! (`resume.rs`), the scheduler that starts queued jobs under a bound (`scheduler.rs`),
//! the pruner of finished jobs (`prune.rs`) and idle exit (`idle.rs`). The job itself is
//! run by the [`Runner`] the daemon hands in.

mod answering;
mod handle;
mod idle;
mod prune;
mod resume;
mod scheduler;
mod slots;
mod table;

pub use handle::JobHandle;
pub use prune::TASK_IDLE;
pub use table::{JobEntry, JobOrder, JobTable, Retention};

use crate::context::{self, Resolved};
use crate::core::catalogue::AdvisorEntry;
use crate::core::records::{Kind, Record};
use crate::daemon::journal::{Journal, JournalEntry, JournalError, JOURNAL_SCHEMA};
use crate::error::{Error, Result};
use crate::protocol::{
    ConsultRequest, Event, Job, JobId, JobList, JobState, JobsRequest, RequestContext, Timeout,
    Timestamp, Waited,
};
use crate::store::Store;
use advisord_adapters::contract::AdvisorSpec;
use advisord_adapters::registry::Registry;
use futures::future::BoxFuture;
use futures::Stream;
use futures::StreamExt as _;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a cancellation waits for a running job to wind down before answering with the
/// job still stopping.
pub const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Runs one job to its end (or until the daemon stops): the daemon's runner.
pub type Runner = fn(Arc<Jobs>, Arc<JobEntry>) -> BoxFuture<'static, ()>;

/// Where a plan finds advisors beyond the catalogue (the mesh's peers): defined here, so
/// the jobs know nothing of how peers are found.
pub trait PeerSource: Send + Sync {
    /// The peers as catalogue entries, after a quick look for new ones when `sweep`.
    fn peers(&self, sweep: bool) -> BoxFuture<'_, Vec<AdvisorEntry>>;
    /// The peers known without looking again.
    fn known(&self) -> Vec<AdvisorEntry>;
    /// Wait, at most `bound`, for the source to be reachable (a job resumed at start).
    fn settle(&self, bound: Duration) -> BoxFuture<'_, ()>;
    /// Why `advisor`, no longer found, cannot be asked, when it was one of these peers.
    fn gone(&self, advisor: &str) -> Option<String>;
    /// Tell one of these peers, about to be asked as `spec`, the capabilities the plan
    /// selected it for (a peer asks its own advisors for those, not for all it offers).
    fn asking(&self, spec: &mut AdvisorSpec, capabilities: &[String]);
}

/// How the daemon's jobs run and are kept.
pub struct Limits {
    /// How many jobs run at once; the rest wait `queued`.
    pub max_running: usize,
    /// How long finished jobs are kept.
    pub retention: Retention,
    /// How often finished jobs are pruned.
    pub prune_every: Duration,
}

/// The jobs of one daemon, and what they share.
pub struct Jobs {
    table: JobTable,
    journal: Journal,
    registry: Registry,
    http: reqwest::Client,
    /// Cancelled after the grace period at shutdown: every job and exchange stops.
    token: CancellationToken,
    /// Cancelled when shutdown begins: no new job or exchange starts.
    drain: CancellationToken,
    /// Every running job and exchange.
    tracker: TaskTracker,
    queue: mpsc::UnboundedSender<Arc<JobEntry>>,
    /// The scheduler's end of `queue`, taken when the workers start.
    queued: Mutex<Option<mpsc::UnboundedReceiver<Arc<JobEntry>>>>,
    run: Runner,
    /// One semaphore per advisor id, bounding its exchanges across all jobs.
    slots: slots::Slots,
    started: Instant,
    /// When this daemon started, in milliseconds since the epoch (ULID time).
    started_ms: u64,
    /// Held by a resumed job while it looks for the plan it may have recorded before the
    /// daemon stopped, so two resumed jobs never take the same one.
    plan_claims: tokio::sync::Mutex<()>,
    /// The peers a plan may add (the mesh's), when there are any.
    peers: Option<Arc<dyn PeerSource>>,
    /// When the last request came or a job was last seen active, for `--idle-exit`.
    last_activity: Mutex<Instant>,
    /// What the cockpit follows: job events, records written, advisors' status.
    feed: Arc<crate::daemon::feed::Feed>,
    /// Woken when a job ends, so the pruner holds the number of finished jobs kept to
    /// its limit at once rather than at its next round.
    ended: tokio::sync::Notify,
    /// Jobs accepted whose journal entry the flush of their plan makes durable: the
    /// runner says so here once the plan is recorded ([`Jobs::take_acceptance`]).
    acceptances: Mutex<std::collections::HashMap<String, Acceptance>>,
    /// How many jobs run at once (the scheduler's bound).
    max_running: std::sync::atomic::AtomicUsize,
}

/// An acceptance waiting for the runner's flush to make the job's journal entry durable.
pub(crate) struct Acceptance {
    /// Answered once a flush that began after the entry was in place has ended; dropped
    /// unanswered, the acceptance flushes the journal itself.
    pub(crate) covered: oneshot::Sender<()>,
    /// The client takes the job's events on the connection that queued it
    /// (`Accept: application/x-ndjson`): nothing was promised before the job as accepted
    /// reaches it, so the runner may answer after the flush that makes the plan and the
    /// first outcomes durable too (`runner::drive_together`).
    pub(crate) streamed: bool,
}

/// How long an accepted job waits for its runner's plan to make its journal entry durable
/// before it flushes the journal itself (the job did not start at once after all: the
/// slot it was counted on went to another job).
const COVER_WAIT: Duration = Duration::from_millis(100);

/// How long a resumed job waits for the peers to be reachable before finding them.
const RESUME_MESH_WAIT: Duration = Duration::from_secs(3);

/// How long a connection to an HTTP advisor stays open unused: long enough to serve a
/// burst's next exchanges, short enough that the buffers of a burst's connections are
/// freed before the daemon hands its memory back ([`crate::daemon::memory::QUIET`]).
const ADVISOR_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

/// The HTTP client every job's advisors share (its pool of connections with it).
fn advisor_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(ADVISOR_IDLE)
        .build()
        .unwrap_or_default()
}

impl Jobs {
    /// The jobs of a daemon journaling into `journal`, each run by `run`.
    pub(crate) fn new(
        journal: Journal,
        registry: Registry,
        run: Runner,
        started_ms: u64,
        peers: Option<Arc<dyn PeerSource>>,
        feed: crate::daemon::feed::Limits,
    ) -> Jobs {
        let (queue, queued) = mpsc::unbounded_channel();
        Jobs {
            table: JobTable::default(),
            journal,
            registry,
            http: advisor_client(),
            token: CancellationToken::new(),
            drain: CancellationToken::new(),
            tracker: TaskTracker::new(),
            queue,
            queued: Mutex::new(Some(queued)),
            run,
            slots: slots::Slots::default(),
            started: Instant::now(),
            started_ms,
            plan_claims: tokio::sync::Mutex::new(()),
            peers,
            last_activity: Mutex::new(Instant::now()),
            feed: Arc::new(crate::daemon::feed::Feed::new(started_ms, feed)),
            ended: tokio::sync::Notify::new(),
            acceptances: Mutex::default(),
            max_running: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Start the jobs' own workers on `workers`: the scheduler and the pruner. Jobs
    /// journaled by an earlier run (`saved`) are taken back first.
    pub(crate) fn start(
        self: &Arc<Self>,
        saved: Vec<JournalEntry>,
        limits: Limits,
        workers: &mut JoinSet<&'static str>,
    ) {
        self.max_running
            .store(limits.max_running, std::sync::atomic::Ordering::Relaxed);
        self.resume(saved);
        let queued = self.queued.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(queued) = queued {
            workers.spawn(scheduler::run(self.clone(), queued, limits.max_running));
        }
        workers.spawn(prune::run(
            self.clone(),
            limits.retention,
            limits.prune_every,
        ));
    }

    /// Resolves once the daemon has been idle for `after` (see `idle.rs`); never without
    /// a bound.
    pub(crate) async fn idle(self: &Arc<Self>, after: Option<Duration>) {
        idle::until_idle(self, after).await;
    }

    /// Begin shutdown: no new job or exchange starts; the running ones get `grace`, then
    /// are cancelled and get `wind_down` to stop. Unfinished jobs stay journaled.
    pub(crate) async fn stop(&self, grace: Duration, wind_down: Duration) {
        self.drain.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::info!(
                grace_s = grace.as_secs_f64(),
                "grace over: cancelling the rest"
            );
        }
        self.token.cancel();
        if tokio::time::timeout(wind_down, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("some jobs did not wind down in time; they resume at the next start");
        }
    }

    /// The adapters' registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The daemon's feed (job events, records written, advisors' status).
    pub fn feed(&self) -> &Arc<crate::daemon::feed::Feed> {
        &self.feed
    }

    /// Cancelled when shutdown begins.
    pub fn draining(&self) -> CancellationToken {
        self.drain.clone()
    }

    /// Cancelled after the grace period at shutdown: everything stops.
    pub fn stopping(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Whether shutdown has begun (no new job is accepted).
    pub fn shutting_down(&self) -> bool {
        self.drain.is_cancelled()
    }

    /// How long the daemon has been up.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The HTTP client the jobs' exchanges share.
    pub(crate) fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// When this daemon started, in milliseconds since the epoch.
    pub(crate) fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// Run `work` as part of the jobs: shutdown waits for it (and cancels it after the
    /// grace period through the tokens it was given).
    pub(crate) fn spawn<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(work);
    }

    /// For a job resumed after a restart: the turn that keeps two resumed jobs from
    /// taking the same plan (held until its plan is journaled), and the plans the other
    /// kept jobs claim.
    pub(crate) async fn claim_plans(
        &self,
        except: &JobId,
    ) -> (tokio::sync::MutexGuard<'_, ()>, Vec<String>) {
        let turn = self.plan_claims.lock().await;
        (turn, self.table.claimed_plans(except))
    }

    /// Why `advisor`, no longer in the catalogue, cannot be asked, when it was a peer.
    pub(crate) fn peer_gone(&self, advisor: &str) -> Option<String> {
        self.peers.as_ref().and_then(|p| p.gone(advisor))
    }

    /// Ready `spec` for an exchange the plan selected it for `capabilities`.
    pub(crate) fn asking(&self, spec: &mut AdvisorSpec, capabilities: &[String]) {
        if let Some(peers) = &self.peers {
            peers.asking(spec, capabilities);
        }
    }

    /// The peers to add to a plan's catalogue, after a quick sweep when `sweep` (a plan
    /// is about to be made); none without a peer source.
    pub(crate) async fn mesh_peers(&self, sweep: bool) -> Vec<AdvisorEntry> {
        let Some(peers) = &self.peers else {
            return Vec::new();
        };
        let started = std::time::Instant::now();
        let found = peers.peers(sweep).await;
        if sweep {
            tracing::debug!(
                took_ms = started.elapsed().as_millis() as u64,
                "quick sweep before a plan"
            );
        }
        found
    }

    /// The peers for a job resumed after a restart: the source is given a moment to
    /// connect and a sweep is made first, so the peers its plan selected are found again.
    pub(crate) async fn mesh_peers_after_restart(&self) -> Vec<AdvisorEntry> {
        if let Some(peers) = &self.peers {
            peers.settle(RESUME_MESH_WAIT).await;
        }
        self.mesh_peers(true).await
    }

    /// Record `input` in `context`'s task, as the `record` verb does, and tell the feed.
    pub async fn record(
        &self,
        context: RequestContext,
        input: serde_json::Value,
    ) -> Result<Record> {
        let root = context.root.display().to_string();
        let registry = self.registry.clone();
        let record = blocking(move || crate::service::record(&registry, &context, &input)).await?;
        self.feed
            .publish(&root, &record.envelope.task, "record", &record);
        Ok(record)
    }

    /// Queue a consultation: check the request, journal the job durably, then hand it to
    /// the scheduler. The handle of the job as accepted.
    pub async fn submit(self: &Arc<Self>, request: ConsultRequest) -> Result<JobHandle> {
        Ok(self.accept(request, None, false).await?.0)
    }

    /// Queue a consultation as [`Jobs::submit`] does; the job as accepted (`queued`, as
    /// journaled: it may have started since, and its events say so).
    pub async fn consult(self: &Arc<Self>, request: ConsultRequest) -> Result<Job> {
        Ok(self.accept(request, None, false).await?.1)
    }

    /// [`Jobs::consult`] for a client that takes the job's events on the connection that
    /// queued it: the job as accepted is answered once it is durable, which may be after
    /// the one flush that also makes its plan and first outcomes durable (at most
    /// [`COVER_WAIT`] after it was queued; then the journal is flushed for it alone).
    ///
    /// The job's events come with it, followed from before the job could start: a job
    /// that ends at once hands its reader its events as they were sent, instead of its
    /// records read back from the store.
    pub async fn consult_streamed(
        self: &Arc<Self>,
        request: ConsultRequest,
    ) -> Result<(Job, futures::stream::BoxStream<'static, Event>)> {
        // No spare file is made while it is answered at once (`answering`).
        let quiet = crate::store::spare::quiet();
        let (_, job, events) = self.accept(request, None, true).await?;
        let events =
            events.ok_or_else(|| Error::Internal("the job's events were not followed".into()))?;
        Ok((job, answering::quiet_while_answering(events, quiet)))
    }

    /// Queue a review relayed for a mesh peer: a consultation whose advisors get
    /// `question` exactly as the peer asked it (and whose plan never includes mesh peers).
    pub(crate) async fn submit_relayed(
        self: &Arc<Self>,
        request: ConsultRequest,
        question: String,
    ) -> Result<JobHandle> {
        Ok(self.accept(request, Some(question), false).await?.0)
    }

    /// The job accepted: its handle, the job as it was journaled, and for `streamed` its
    /// events, followed from before it could start.
    async fn accept(
        self: &Arc<Self>,
        request: ConsultRequest,
        prompt: Option<String>,
        streamed: bool,
    ) -> Result<(
        JobHandle,
        Job,
        Option<futures::stream::BoxStream<'static, Event>>,
    )> {
        if self.drain.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        context::require_root(&request.context)?;
        let timeout = request.timeout.unwrap_or_default();
        let assessment = request.assessment;
        let (context, resolved) = self
            .resolve_for(request.context, assessment.clone())
            .await?;
        let task = resolved.task.to_string();
        let state_dir = resolved.state_dir.clone();
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
        // Resolved once: the job runs on this resolution unless peers join its catalogue.
        entry.keep_resolved(Arc::new(resolved));
        let not_accepted = |e: &dyn std::fmt::Display| {
            Error::Internal(format!(
                "the job was not accepted: {e}; free space or fix the data directory"
            ))
        };
        // The job's journal entry is made durable before the reply: by the flush of its
        // plan when the job starts at once (one flush for both), else by its own.
        let covered = self.plan_may_cover(&entry, &state_dir).then(|| {
            let (covered, receiver) = oneshot::channel();
            let acceptance = Acceptance { covered, streamed };
            self.acceptances().insert(job.id.to_string(), acceptance);
            receiver
        });
        let saved = if covered.is_some() {
            self.persist_unflushed(&entry).await.map(|_| ())
        } else {
            self.persist(&entry).await
        };
        if let Err(e) = saved {
            self.acceptances().remove(job.id.as_str());
            return Err(not_accepted(&e));
        }
        tracing::info!(job = %job.id, task = %job.task, assessment = %job.assessment, "job queued");
        entry.attach_feed(self.feed.clone());
        self.table.insert(entry.clone());
        let handle = JobHandle::new(self.clone(), entry.clone());
        // Followed from before the job can start (see `consult_streamed`).
        let events = streamed.then(|| handle.events(0).boxed());
        self.enqueue(entry.clone());
        if let Some(receiver) = covered {
            let by_plan = tokio::time::timeout(COVER_WAIT, receiver).await;
            if !matches!(by_plan, Ok(Ok(()))) {
                self.acceptances().remove(job.id.as_str());
                if let Err(e) = self.flush_journal().await {
                    // Not acknowledged: it must not run either.
                    entry.request_cancel();
                    entry.cancel.cancel();
                    return Err(not_accepted(&e));
                }
            }
        }
        Ok((handle, job, events))
    }

    fn acceptances(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Acceptance>> {
        self.acceptances.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the flush of `entry`'s plan can make its journal entry durable: the job
    /// starts at once (a free slot), makes its plan itself (not relayed, no mesh peers to
    /// sweep for first), and the plan is written on the journal's file system.
    fn plan_may_cover(&self, entry: &JobEntry, state_dir: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        if entry.order.prompt.is_some() || self.peers.is_some() {
            return false;
        }
        let counts = self.table.counts();
        let active = [JobState::Queued, JobState::Running]
            .iter()
            .map(|s| counts.get(s).copied().unwrap_or(0))
            .sum::<usize>();
        if active >= self.max_running.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let device = |path: &std::path::Path| std::fs::metadata(path).map(|m| m.dev()).ok();
        device(self.journal.dir()).is_some_and(|d| Some(d) == device(state_dir))
    }

    /// For the runner of job `id`: the acceptance waiting for its plan's flush, if any
    /// (sent once the plan is recorded; dropped otherwise, and the acceptance flushes
    /// the journal itself).
    pub(crate) fn take_acceptance(&self, id: &JobId) -> Option<Acceptance> {
        self.acceptances().remove(id.as_str())
    }

    /// Flush the journal's file system: every entry saved before is durable.
    async fn flush_journal(&self) -> Result<(), JournalError> {
        let dir = self.journal.dir().to_path_buf();
        tokio::task::spawn_blocking(move || Journal::at(dir).flush())
            .await
            .unwrap_or_else(|e| {
                Err(JournalError {
                    context: "the journal flush panicked".into(),
                    source: io::Error::other(e.to_string()),
                })
            })
    }

    /// Resolve `context` and check that `assessment` is an assessment of its task; the
    /// context with its task pinned (so a resumed job records where this one would have)
    /// and the resolution.
    async fn resolve_for(
        &self,
        mut context: RequestContext,
        assessment: crate::protocol::RecordId,
    ) -> Result<(RequestContext, Resolved)> {
        let registry = self.registry.clone();
        // Read in place: the request waits for it, and a hand-off to the blocking pool
        // costs two thread wake-ups.
        let resolved = in_place(move || {
            let resolved = Resolved::resolve(&context, &registry)?;
            // Looked at in place: the task may hold thousands of records.
            let found = Store::shared(&resolved.state_dir).with_lookups(
                &resolved.task,
                |records, lookups| {
                    lookups
                        .position(assessment.as_str())
                        .map(|at| records[at].kind())
                },
            )?;
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
            context.task = Some(resolved.task.to_string());
            Ok((context, resolved))
        })
        .await;
        resolved.map_err(|e| Error::Internal(format!("a worker thread failed: {e}")))?
    }

    /// The handle of job `id`.
    pub fn handle(self: &Arc<Self>, id: &JobId) -> Result<JobHandle> {
        Ok(JobHandle::new(self.clone(), self.entry(id)?))
    }

    /// The job `id` as it stands.
    pub fn get(&self, id: &JobId) -> Result<Job> {
        Ok(self.entry(id)?.snapshot())
    }

    /// The kept entry of job `id`.
    fn entry(&self, id: &JobId) -> Result<Arc<JobEntry>> {
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
        self.cancel_entry(&self.entry(id)?).await
    }

    /// Cancel the job of `entry` (see [`Jobs::cancel`]).
    async fn cancel_entry(&self, entry: &Arc<JobEntry>) -> Result<Job> {
        let id = entry.id();
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
                    entry,
                    JobState::Cancelled,
                    Some("cancelled before it started".into()),
                )
                .await;
            return Ok(job);
        }
        entry.request_cancel();
        tracing::info!(job = %id, "cancelling a running job");
        let _ = tokio::time::timeout(CANCEL_WAIT, ended(entry)).await;
        Ok(entry.snapshot())
    }

    /// Job `id`'s events from position `from` on: past ones replayed, then live ones, ending
    /// after [`Event::Done`] (or when the daemon stops).
    pub fn subscribe(
        &self,
        id: &JobId,
        from: usize,
    ) -> Result<impl Stream<Item = Event> + Send + 'static> {
        Ok(self.events_of(self.entry(id)?, from))
    }

    /// The events of `entry` from position `from` on (see [`Jobs::subscribe`]).
    fn events_of(
        &self,
        entry: Arc<JobEntry>,
        from: usize,
    ) -> impl Stream<Item = Event> + Send + 'static {
        let state = Subscription {
            wake: entry.watch_events(),
            entry,
            position: from,
            pending: std::collections::VecDeque::new(),
            ended: false,
            stop: self.token.clone(),
        };
        futures::stream::unfold(state, Subscription::next)
    }

    /// Wait for job `id` to end, at most `bound`.
    pub async fn wait(&self, id: &JobId, bound: Option<Timeout>) -> Result<Waited> {
        wait_for(&self.entry(id)?, bound).await
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
        let done = Event::Done {
            at: crate::protocol::Timestamp::now(),
            job: job.id.clone(),
            result: Box::new(job.clone()),
        };
        if crate::daemon::journal::must_flush(job.state) {
            // A cancelled job's end is durable before anyone hears of it: after a crash
            // it must not run again.
            self.journal_end(entry, &job).await;
            entry.emit(done);
        } else {
            // An end that is never flushed: a crash may lose it whether or not `done` was
            // sent, and the job then resumes, finds every outcome recorded and ends again
            // asking nobody. So `done` goes first, and the connection waiting for it (on
            // this worker) writes it before the save instead of after.
            entry.emit(done);
            tokio::task::yield_now().await;
            self.journal_end(entry, &job).await;
        }
        tracing::info!(job = %job.id, state = job.state.as_str(), reason = ?job.reason, "job ended");
        crate::daemon::memory::job_ended();
        self.ended.notify_one();
        self.publish_advisors(entry);
        job
    }

    /// Journal `job`'s end (an error is logged: the job has ended either way).
    async fn journal_end(&self, entry: &Arc<JobEntry>, job: &Job) {
        if let Err(e) = self.persist(entry).await {
            tracing::error!(job = %job.id, error = %e, "could not journal the end of a job");
        }
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
        let peers = self.peers.as_ref().map(|p| p.known()).unwrap_or_default();
        tokio::task::spawn_blocking(move || {
            context.mesh_peers = peers;
            if let Ok(view) = crate::service::advisors(&registry, &context) {
                feed.publish_advisors(&job.root, &job.task, &view);
            }
        });
    }

    /// The semaphore bounding `advisor`'s exchanges at the `max_concurrent` of the
    /// catalogue this job resolved (an edited limit counts at once: `jobs/slots.rs`).
    pub(crate) fn advisor_slots(&self, advisor: &str, max_concurrent: u32) -> Arc<Semaphore> {
        self.slots.of(advisor, max_concurrent)
    }

    /// Hand a queued job to the scheduler.
    fn enqueue(&self, entry: Arc<JobEntry>) {
        // The receiver lives as long as the daemon; after shutdown the job stays journaled.
        let _ = self.queue.send(entry);
    }

    /// Journal the job as it stands now, after any save already under way. Credential
    /// values are left out.
    pub(crate) async fn persist(&self, entry: &Arc<JobEntry>) -> Result<(), JournalError> {
        if self.persist_unflushed(entry).await? {
            self.flush_journal().await?;
        }
        Ok(())
    }

    /// [`Jobs::persist`] without the flush: whether the entry must be made durable
    /// before the job is acknowledged ([`Journal::save_unflushed`]).
    async fn persist_unflushed(&self, entry: &Arc<JobEntry>) -> Result<bool, JournalError> {
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
        in_place(move || Journal::at(dir).save_unflushed(&saved))
            .await
            .unwrap_or_else(|e| {
                Err(JournalError {
                    context: "the journal writer panicked".into(),
                    source: io::Error::other(e.to_string()),
                })
            })
    }
}

/// Wait for `entry` to end, at most `bound`.
async fn wait_for(entry: &Arc<JobEntry>, bound: Option<Timeout>) -> Result<Waited> {
    match bound {
        None => ended(entry).await,
        Some(bound) => {
            if tokio::time::timeout(bound.duration(), ended(entry))
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

/// Run `work`, a short piece of file work on the path of a reply (a journal entry
/// saved: a few small writes and renames, never a flush), on this worker thread, the
/// runtime's other tasks moved to another one meanwhile ([`tokio::task::block_in_place`]):
/// the task goes on at once, where [`tokio::task::spawn_blocking`] waits for a thread of
/// the blocking pool to wake and then for this one to be woken back. On a runtime of one
/// thread (tests), on the blocking pool.
pub(crate) async fn in_place<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        Ok(tokio::task::block_in_place(work))
    } else {
        tokio::task::spawn_blocking(work).await
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
