//! The journal's side of NATS: one connection (the mesh's URL and credentials), one
//! stream per journal, publishing a record with the expected last sequence of its task's
//! subject, and the follower that keeps this machine's replica current.
//!
//! The journal runs on a runtime of its own, so the store's write (synchronous, under the
//! task's lock, on whatever thread the caller is on) waits on it through a channel and
//! never blocks the daemon's own runtime.

use super::replica::{self, Applied};
use crate::core::records::TaskName;
use crate::core::views::status::JournalState;
use async_nats::jetstream::{self, consumer, message::PublishMessage, stream};
use futures::{FutureExt as _, StreamExt as _};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// How long a write waits for JetStream's acknowledgement, retries included (a stream
/// electing a new leader answers within a few seconds).
const PUBLISH_BOUND: Duration = Duration::from_secs(10);
/// How long attaching a state directory waits for the replica to catch up before views
/// read what it has (the follower carries on in the background).
const ATTACH_BOUND: Duration = Duration::from_secs(5);
/// How long a view waits for a bus that is not connected before it reads what the replica
/// holds.
const UNCONNECTED_BOUND: Duration = Duration::from_secs(2);
/// The replication of a journal's stream on a cluster.
const REPLICAS: usize = 3;

/// How the daemon joins the journal: the mesh's URL(s) and credentials, and its name.
#[derive(Clone)]
pub struct JournalConfig {
    /// The bus's URL(s), separated by commas (the mesh's).
    pub url: String,
    /// A credentials file, or a token (the mesh's `ADVISORD_MESH_CREDS`).
    pub creds: Option<String>,
    /// This machine's name in the records' headers (the mesh runtime's name, else the
    /// host's).
    pub machine: String,
}

static JOURNAL: OnceLock<Arc<Journal>> = OnceLock::new();

/// The journal this process joined, if it did.
pub(super) fn installed() -> Option<&'static Arc<Journal>> {
    JOURNAL.get()
}

/// Join the journal: connect in the background (a bus down at start is retried) and
/// install it for the store's seam. Once per process.
pub fn start(config: JournalConfig) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("advisord-journal")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the journal's runtime: {e}"))?;
    let servers: Vec<String> = config
        .url
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect();
    if servers.is_empty() {
        return Err(
            "the journal needs the mesh's URL: pass `--mesh URL` or set `ADVISORD_MESH_URL`".into(),
        );
    }
    let creds = config.creds.clone();
    let name = format!("advisord journal {}", config.machine);
    let link: LinkState = Arc::new(Mutex::new(Link::default()));
    let noted = link.clone();
    let client = runtime.block_on(async move {
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .event_callback(move |event| {
                let mut link = lock(&noted);
                match event {
                    async_nats::Event::Disconnected if link.lost_at.is_none() => {
                        link.lost_at = Some(SystemTime::now());
                        link.losses += 1;
                    }
                    async_nats::Event::Connected => link.lost_at = None,
                    _ => {}
                }
                async {}
            })
            .retry_on_initial_connect()
            .connection_timeout(Duration::from_secs(3))
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64).saturating_mul(100).min(1000))
            });
        if let Some(creds) = creds {
            let file = PathBuf::from(&creds);
            options = if file.is_file() {
                options.credentials_file(&file).await.map_err(|e| {
                    format!(
                        "the credentials file `{}` cannot be used: {e}",
                        file.display()
                    )
                })?
            } else {
                options.token(creds)
            };
        }
        options
            .connect(servers)
            .await
            .map_err(|e| format!("the journal cannot use the mesh URL: {e}"))
    })?;
    // The JetStream context starts its own tasks: it is made on the journal's runtime.
    let js = {
        let _entered = runtime.enter();
        jetstream::new(client.clone())
    };
    let journal = Arc::new(Journal {
        js,
        client,
        machine: config.machine,
        runtime,
        attached: Mutex::new(HashMap::new()),
        link,
    });
    JOURNAL
        .set(journal)
        .map_err(|_| "the journal is already started in this process".to_string())
}

/// The process's connection to the journal.
pub(super) struct Journal {
    runtime: tokio::runtime::Runtime,
    client: async_nats::Client,
    js: jetstream::Context,
    machine: String,
    /// Each state directory seen, and whether (and to which journal) it is shared.
    attached: Mutex<HashMap<PathBuf, Option<Arc<Shared>>>>,
    link: LinkState,
}

/// The connection to the bus as its events told it.
#[derive(Default)]
struct Link {
    /// When it was lost; `None` while it holds.
    lost_at: Option<SystemTime>,
    /// How many times it was lost.
    losses: u64,
}

type LinkState = Arc<Mutex<Link>>;

/// One state directory shared through one journal.
pub(super) struct Shared {
    pub(super) name: String,
    stream: String,
    state_dir: PathBuf,
    js: jetstream::Context,
    client: async_nats::Client,
    machine: String,
    /// Each task's head as the stream has it, as far as this machine applied it.
    heads: Mutex<HashMap<String, StreamHead>>,
    /// The stream's sequence this machine applied everything up to, and when it last knew
    /// itself current.
    progress: Mutex<Progress>,
    link: LinkState,
}

#[derive(Clone, Debug, Default)]
struct StreamHead {
    /// The record's sequence in its task.
    record: u64,
    /// Its sequence in the stream (the subject's last sequence).
    stream: u64,
    id: String,
    machine: String,
}

#[derive(Default)]
struct Progress {
    applied: u64,
    current_at: Option<SystemTime>,
    /// Whether the follower had applied everything the stream held when it last heard
    /// from it (no message pending).
    current: bool,
    /// The link's losses when it was last current: a replica current before the bus was
    /// lost is not known current after it comes back until it is checked again.
    losses: u64,
}

/// One message the follower received, to apply off the runtime.
struct Received {
    stream_seq: u64,
    subject: String,
    headers: Option<async_nats::HeaderMap>,
    payload: bytes::Bytes,
}

/// How often a replica not known current checks the stream's last sequence.
const CONFIRM_EVERY: Duration = Duration::from_millis(500);

/// The most messages the follower applies in one batch.
const APPLY_BATCH: usize = 512;

/// Why a write to a shared task did not go through.
pub(super) enum PublishError {
    /// Another machine wrote first: the task was caught up; judge again. Says which
    /// record came first, from which machine.
    Behind(String),
    /// Refused: the message says what happened and what to do.
    Refused(String),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Journal {
    /// Run `future` on the journal's runtime and wait for it, at most `bound`.
    fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
        bound: Duration,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv_timeout(bound).ok()
    }

    /// The shared state of `state_dir`, attached (stream made sure of, replica caught up,
    /// follower started) the first time; `None` when it is not shared.
    pub(super) fn attach(self: &Arc<Self>, state_dir: &Path, wait: bool) -> Option<Arc<Shared>> {
        if let Some(known) = lock(&self.attached).get(state_dir) {
            return known.clone();
        }
        let name = super::root_of(state_dir).and_then(|root| {
            super::project_journal(&root)
                .map_err(|e| tracing::warn!(problem = %e, "the journal is not used"))
                .ok()
                .flatten()
        });
        let Some(name) = name else {
            lock(&self.attached).insert(state_dir.to_path_buf(), None);
            return None;
        };
        let shared = Arc::new(Shared {
            stream: super::stream_name(&name),
            name,
            state_dir: state_dir.to_path_buf(),
            js: self.js.clone(),
            client: self.client.clone(),
            machine: self.machine.clone(),
            heads: Mutex::new(HashMap::new()),
            progress: Mutex::new(Progress::default()),
            link: self.link.clone(),
        });
        {
            let mut attached = lock(&self.attached);
            if let Some(known) = attached.get(state_dir) {
                return known.clone();
            }
            attached.insert(state_dir.to_path_buf(), Some(shared.clone()));
        }
        super::marker::mark_shared(state_dir, &shared.name);
        let (caught_up, rx) = std::sync::mpsc::channel();
        let follower = shared.clone();
        self.runtime
            .spawn(async move { follower.follow(caught_up).await });
        if wait && !self.caught_up_in_time(&rx) {
            tracing::warn!(
                journal = %shared.name,
                "the replica is not current yet; views read what it holds"
            );
        }
        Some(shared)
    }

    /// Wait for the first catch-up of an attached state directory (`caught_up`): up to
    /// [`ATTACH_BOUND`] while the bus is connected, and at most [`UNCONNECTED_BOUND`] while it
    /// is not. A daemon just started may still be connecting (its first view then waits
    /// for the connection and the catch-up, not a fixed time), while a bus that is down
    /// must not hold a view long: it reads what the replica holds.
    fn caught_up_in_time(&self, caught_up: &std::sync::mpsc::Receiver<()>) -> bool {
        let started = std::time::Instant::now();
        loop {
            match caught_up.recv_timeout(Duration::from_millis(10)) {
                Ok(()) => return true,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            let connected =
                self.client.connection_state() == async_nats::connection::State::Connected;
            let bound = if connected {
                ATTACH_BOUND
            } else {
                UNCONNECTED_BOUND
            };
            if started.elapsed() >= bound {
                return false;
            }
        }
    }

    /// Publish record `sequence` of `task` (`bytes`, id `id`) for `shared`: `Ok` once
    /// JetStream acknowledged it.
    pub(super) fn publish(
        &self,
        shared: &Arc<Shared>,
        task: &TaskName,
        sequence: u64,
        id: &str,
        bytes: &[u8],
    ) -> Result<(), PublishError> {
        let shared_ = shared.clone();
        let (task_, id_, bytes_) = (task.clone(), id.to_string(), bytes.to_vec());
        self.run(
            async move { shared_.publish(&task_, sequence, &id_, bytes_).await },
            PUBLISH_BOUND + Duration::from_secs(5),
        )
        .unwrap_or_else(|| Err(PublishError::Refused(shared.unreachable(task, None))))
    }
}

impl Shared {
    fn subject(&self, task: &str) -> String {
        super::subject(&self.name, task)
    }

    /// The journal as the views show it: whether the bus is reachable and how current the
    /// replica is. A replica that had applied everything when the connection was lost was
    /// current until then.
    pub(super) fn state(&self) -> JournalState {
        let reachable = self.client.connection_state() == async_nats::connection::State::Connected;
        let now = SystemTime::now();
        let progress = lock(&self.progress);
        let (lost_at, losses) = {
            let link = lock(&self.link);
            (link.lost_at, link.losses)
        };
        let current_at = match (reachable, lost_at) {
            (true, _) if progress.current && progress.losses == losses => Some(now),
            // Current when the bus was lost: current until then.
            (false, Some(lost)) if progress.current && progress.losses + 1 == losses => {
                Some(progress.current_at.map_or(lost, |at| at.max(lost)))
            }
            _ => progress.current_at,
        };
        JournalState {
            name: self.name.clone(),
            reachable,
            current_at: current_at.map(|at| {
                time::OffsetDateTime::from(at)
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            }),
            current_s_ago: current_at
                .map(|at| now.duration_since(at).unwrap_or_default().as_secs()),
            stream_sequence: progress.applied,
        }
    }

    /// How far behind the replica may be, for messages.
    pub(super) fn lag(&self) -> String {
        let state = self.state();
        match (&state.current_at, state.current_s_ago) {
            (Some(at), Some(ago)) => format!(
                "this machine's replica was last known current at {at} ({ago} s ago, stream \
                 sequence {})",
                state.stream_sequence
            ),
            _ => "this machine's replica has not reached the journal yet".to_string(),
        }
    }

    fn unreachable(&self, task: &TaskName, cause: Option<String>) -> String {
        let cause = cause.map(|c| format!(" ({c})")).unwrap_or_default();
        format!(
            "task `{task}` is shared through the journal `{}`, which did not acknowledge the \
             record{cause}: the bus is unreachable from this machine, so nothing was stored \
             (a record kept only here would fork the task's chain); {}. Reads still work \
             from the replica. Retry once the bus is back (`advisor-consult daemon status` \
             shows the mesh's link)",
            self.name,
            self.lag()
        )
    }

    async fn stream(&self) -> Result<stream::Stream, String> {
        let config = stream::Config {
            name: self.stream.clone(),
            description: Some(format!(
                "advisord journal `{}`: the team's records (they quote code and diagnostics; \
                 never public)",
                self.name
            )),
            subjects: vec![format!("{}.{}.>", super::SUBJECT_PREFIX, self.name)],
            storage: stream::StorageType::File,
            retention: stream::RetentionPolicy::Limits,
            discard: stream::DiscardPolicy::New,
            num_replicas: REPLICAS,
            duplicate_window: Duration::from_secs(120),
            deny_delete: true,
            deny_purge: true,
            allow_direct: true,
            ..Default::default()
        };
        match self.js.get_stream(&self.stream).await {
            Ok(stream) => return Ok(stream),
            Err(e) => tracing::debug!(error = %e, "no journal stream yet"),
        }
        let created = tokio::time::timeout(
            Duration::from_secs(10),
            self.js.get_or_create_stream(config.clone()),
        )
        .await
        .map_err(|_| "the bus did not answer the stream's creation in time".to_string())?;
        match created {
            Ok(stream) => Ok(stream),
            // A single server cannot keep three replicas: one is what it has.
            Err(_) => self
                .js
                .get_or_create_stream(stream::Config {
                    num_replicas: 1,
                    ..config
                })
                .await
                .map_err(|e| format!("cannot create the journal's stream: {e}")),
        }
    }

    /// Apply one message of the stream to the replica; `lock` unless the caller holds the
    /// task's lock. Returns the task and its head.
    fn apply(
        &self,
        subject: &str,
        stream_seq: u64,
        headers: Option<&async_nats::HeaderMap>,
        bytes: &[u8],
        take_lock: bool,
        anchor: bool,
    ) -> Option<(String, StreamHead)> {
        let task = super::task_of(&self.name, subject)?;
        let task_name = TaskName::new(&task).ok()?;
        let Some((sequence, id)) = replica::identify(bytes) else {
            tracing::warn!(%subject, stream_seq, "a journal message is not a record; skipped");
            return None;
        };
        match replica::apply(
            &self.state_dir,
            &task_name,
            sequence,
            bytes,
            take_lock,
            anchor,
        ) {
            Ok(Applied::Written | Applied::Had) => {}
            Ok(Applied::Diverged) => tracing::warn!(
                task = %task, sequence,
                "this machine holds a different record at this sequence than the journal"
            ),
            Err(e) => {
                tracing::warn!(error = %e, task = %task, sequence, "cannot write a replica");
                return None;
            }
        }
        let machine = headers
            .and_then(|h| h.get(super::HEADER_MACHINE))
            .map(|v| v.as_str().to_string())
            .unwrap_or_else(|| "an unnamed machine".to_string());
        let head = StreamHead {
            record: sequence,
            stream: stream_seq,
            id,
            machine,
        };
        let mut heads = lock(&self.heads);
        let entry = heads.entry(task.clone()).or_default();
        if entry.stream < stream_seq {
            *entry = head.clone();
        }
        Some((task, head))
    }

    /// Apply messages the follower received, in the stream's order, each task's lock
    /// taken once for its run of messages. Returns each task's last record applied (its
    /// sequence and bytes), to anchor once the burst is over.
    fn apply_batch(&self, received: Vec<Received>) -> HashMap<String, (u64, bytes::Bytes)> {
        let mut applied = HashMap::new();
        let mut held: Option<(String, Option<replica::Held>)> = None;
        for message in received {
            let Some(task) = super::task_of(&self.name, &message.subject) else {
                continue;
            };
            if held.as_ref().is_none_or(|(t, _)| *t != task) {
                drop(held.take());
                let lock = TaskName::new(&task)
                    .ok()
                    .and_then(|name| replica::lock_task(&self.state_dir, &name).ok());
                held = Some((task.clone(), lock));
            }
            let locked = held.as_ref().is_some_and(|(_, l)| l.is_some());
            let outcome = self.apply(
                &message.subject,
                message.stream_seq,
                message.headers.as_ref(),
                &message.payload,
                !locked,
                false,
            );
            if let Some((task, head)) = outcome {
                applied.insert(task, (head.record, message.payload));
            }
        }
        applied
    }

    /// Note the replica current: it holds everything the stream held.
    fn mark_current(&self) {
        let losses = lock(&self.link).losses;
        let mut progress = lock(&self.progress);
        progress.current_at = Some(SystemTime::now());
        progress.current = true;
        progress.losses = losses;
    }

    /// While the bus is reachable but the replica is not known current (the bus came back
    /// and nothing new arrived since), ask the stream how far it goes: a replica that has
    /// applied that far is current again.
    async fn confirm_current(self: Arc<Self>) {
        loop {
            tokio::time::sleep(CONFIRM_EVERY).await;
            let known = {
                let losses = lock(&self.link).losses;
                let progress = lock(&self.progress);
                progress.current && progress.losses == losses
            };
            if known || self.client.connection_state() != async_nats::connection::State::Connected {
                continue;
            }
            let Ok(Ok(stream)) =
                tokio::time::timeout(CONFIRM_EVERY, self.js.get_stream(&self.stream)).await
            else {
                continue;
            };
            let last = stream.cached_info().state.last_sequence;
            if last <= lock(&self.progress).applied {
                self.mark_current();
            }
        }
    }

    /// Follow the stream from what was applied, for ever: each message written to the
    /// replica (under the task's lock), `caught_up` told once the replica is current.
    async fn follow(self: Arc<Self>, caught_up: std::sync::mpsc::Sender<()>) {
        tokio::spawn(self.clone().confirm_current());
        let mut told = false;
        loop {
            if let Err(e) = self.follow_once(&caught_up, &mut told).await {
                tracing::debug!(problem = %e, journal = %self.name, "following the journal");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn follow_once(
        self: &Arc<Self>,
        caught_up: &std::sync::mpsc::Sender<()>,
        told: &mut bool,
    ) -> Result<(), String> {
        let mut stream = self.stream().await?;
        let last = stream
            .info()
            .await
            .map_err(|e| e.to_string())?
            .state
            .last_sequence;
        let start = lock(&self.progress).applied + 1;
        let mark_current = |this: &Arc<Self>| this.mark_current();
        if last < start {
            mark_current(self);
            if !*told {
                *told = true;
                let _ = caught_up.send(());
            }
        }
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: start,
                },
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
        tracing::debug!(journal = %self.name, start, last, "following the journal");
        let mut unanchored: HashMap<String, (u64, bytes::Bytes)> = HashMap::new();
        while let Some(message) = messages.next().await {
            // What the consumer already holds is applied in one batch, on one blocking
            // thread, each task's lock taken once: a machine joining late applies
            // thousands of records, and a thread hand-off and a lock per record were most
            // of its time.
            let mut batch = vec![message.map_err(|e| e.to_string())?];
            while batch.len() < APPLY_BATCH {
                match messages.next().now_or_never() {
                    Some(Some(message)) => batch.push(message.map_err(|e| e.to_string())?),
                    Some(None) | None => break,
                }
            }
            let mut received = Vec::with_capacity(batch.len());
            let mut pending = 0;
            for message in batch {
                let info = message.info().map_err(|e| e.to_string())?;
                pending = info.pending;
                received.push(Received {
                    stream_seq: info.stream_sequence,
                    subject: message.subject.to_string(),
                    headers: message.headers.clone(),
                    payload: message.payload.clone(),
                });
            }
            let last_seq = received.last().map_or(0, |r| r.stream_seq);
            if pending > 0 {
                lock(&self.progress).current = false;
            }
            let this = self.clone();
            let applied = tokio::task::spawn_blocking(move || this.apply_batch(received))
                .await
                .map_err(|e| e.to_string())?;
            unanchored.extend(applied);
            {
                let mut progress = lock(&self.progress);
                progress.applied = progress.applied.max(last_seq);
            }
            if pending == 0 {
                // Each task's head is anchored once the burst is applied (a view between
                // sees the task as it was anchored).
                let heads = std::mem::take(&mut unanchored);
                let state_dir = self.state_dir.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    for (task, (sequence, payload)) in heads {
                        if let Ok(task) = TaskName::new(&task) {
                            let hash = crate::core::chain::digest(&payload);
                            replica::anchor(&state_dir, &task, sequence, hash);
                        }
                    }
                })
                .await;
                mark_current(self);
                tracing::debug!(journal = %self.name, applied = last_seq, "the replica is current");
                if !*told {
                    *told = true;
                    let _ = caught_up.send(());
                }
            }
        }
        Err("the journal's consumer ended".into())
    }

    /// Apply what the stream holds of `task` beyond what this machine applied, the caller
    /// holding the task's lock; returns the first record applied.
    async fn catch_up_task(&self, task: &TaskName) -> Result<Option<StreamHead>, String> {
        let subject = self.subject(task.as_str());
        let stream = self.stream().await?;
        let last = match stream.get_last_raw_message_by_subject(&subject).await {
            Ok(message) => message.sequence,
            Err(_) => return Ok(None),
        };
        let from = lock(&self.heads).get(task.as_str()).map_or(0, |h| h.stream);
        if last <= from {
            return Ok(None);
        }
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: subject,
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: from + 1,
                },
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
        let mut first = None;
        while let Some(message) = messages.next().await {
            let message = message.map_err(|e| e.to_string())?;
            let stream_seq = message.info().map_err(|e| e.to_string())?.stream_sequence;
            let applied = self.apply(
                message.subject.as_str(),
                stream_seq,
                message.headers.as_ref(),
                &message.payload,
                false,
                true,
            );
            if first.is_none() {
                first = applied.map(|(_, head)| head);
            }
            if stream_seq >= last {
                break;
            }
        }
        Ok(first)
    }

    async fn publish(
        self: Arc<Self>,
        task: &TaskName,
        sequence: u64,
        id: &str,
        bytes: Vec<u8>,
    ) -> Result<(), PublishError> {
        let deadline = tokio::time::Instant::now() + PUBLISH_BOUND;
        let state = self.client.connection_state();
        if state != async_nats::connection::State::Connected {
            return Err(PublishError::Refused(
                self.unreachable(task, Some(format!("the bus connection is {state}"))),
            ));
        }
        let known = |this: &Self| lock(&this.heads).get(task.as_str()).cloned();
        let mut head = known(&self).unwrap_or_default();
        if head.record + 1 != sequence {
            // The replica's files and the stream's head disagree: bring the task up to
            // what the stream holds first.
            let first = tokio::time::timeout_at(deadline, self.catch_up_task(task))
                .await
                .map_err(|_| PublishError::Refused(self.unreachable(task, None)))?
                .map_err(|e| PublishError::Refused(self.unreachable(task, Some(e))))?;
            head = known(&self).unwrap_or_default();
            if head.record + 1 > sequence {
                return Err(PublishError::Behind(came_first(first.as_ref(), sequence)));
            }
            if head.record + 1 < sequence {
                return Err(PublishError::Refused(format!(
                    "task `{task}` holds records {} to {} that the journal `{}` does not: \
                     they were written on this machine before the task was shared; record \
                     into a new task (`--task NAME`), or move this one aside to share the \
                     journal's",
                    head.record + 1,
                    sequence - 1,
                    self.name
                )));
            }
        }
        let subject = self.subject(task.as_str());
        loop {
            let message = PublishMessage::build()
                .payload(bytes.clone().into())
                .message_id(id)
                .expected_last_subject_sequence(head.stream)
                .header(super::HEADER_MACHINE, self.machine.as_str())
                .header(super::HEADER_SEQUENCE, sequence.to_string().as_str());
            let attempt = async { self.js.send_publish(subject.clone(), message).await?.await };
            let outcome = tokio::time::timeout_at(deadline, attempt).await;
            let error = match outcome {
                Ok(Ok(ack)) => {
                    let mut heads = lock(&self.heads);
                    let entry = heads.entry(task.as_str().to_string()).or_default();
                    if entry.stream < ack.sequence {
                        *entry = StreamHead {
                            record: sequence,
                            stream: ack.sequence,
                            id: id.to_string(),
                            machine: self.machine.clone(),
                        };
                    }
                    return Ok(());
                }
                Ok(Err(e)) => e,
                Err(_) => {
                    return Err(PublishError::Refused(self.unreachable(
                        task,
                        Some(format!("no acknowledgement within {PUBLISH_BOUND:?}")),
                    )))
                }
            };
            if error.kind() == jetstream::context::PublishErrorKind::WrongLastSequence {
                let first = tokio::time::timeout_at(deadline, self.catch_up_task(task))
                    .await
                    .map_err(|_| PublishError::Refused(self.unreachable(task, None)))?
                    .map_err(|e| PublishError::Refused(self.unreachable(task, Some(e))))?;
                if first.as_ref().is_some_and(|f| f.id == id) {
                    // Our own record, stored by an attempt whose acknowledgement was lost:
                    // the store writes its file (the caller holds the task's lock).
                    let file = self
                        .state_dir
                        .join(task.as_str())
                        .join(format!("{sequence:010}.json"));
                    let _ = std::fs::remove_file(file);
                    return Ok(());
                }
                return Err(PublishError::Behind(came_first(first.as_ref(), sequence)));
            }
            // A stream electing a leader, a node going away: the message id makes a
            // retry store nothing twice.
            tracing::debug!(error = %error, "journal publish retried");
            if tokio::time::Instant::now() + Duration::from_millis(100) >= deadline {
                return Err(PublishError::Refused(
                    self.unreachable(task, Some(error.to_string())),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn came_first(first: Option<&StreamHead>, sequence: u64) -> String {
    match first {
        Some(head) => format!(
            "record {} (sequence {}) from machine `{}` came first",
            head.id, head.record, head.machine
        ),
        None => format!("another machine wrote record {sequence} of the task first"),
    }
}
