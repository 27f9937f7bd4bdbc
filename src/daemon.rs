//! `advisord`: the long-running daemon behind the socket.
//!
//! [`run`] takes a bound listener, a shutdown future and a [`Config`], so the binary runs
//! it on the user's socket and tests run it in-process on a temporary socket. Inside, one
//! way down: [`http`] maps each request to a verb of the protocol and calls the façade's
//! daemon-side implementation ([`served`]), which answers network-free verbs through
//! `crate::service` on the blocking pool and job verbs through the [`jobs`] API. Jobs are
//! journaled ([`journal`]), started by a scheduler under a bound, and run by `runner`.
//!
//! Cancellation flows down a tree of tokens: the daemon's token → each job's → each
//! exchange's. Shutdown stops accepting, lets in-flight work run for the grace period,
//! then cancels the daemon's token; jobs not finished stay journaled and resume at the
//! next start.

pub mod cockpit;
pub mod conn;
mod draft;
pub mod feed;
pub mod http;
pub mod jobs;
pub mod journal;
pub mod listen;
pub mod memory;
pub mod mesh;
mod runner;
pub mod served;
pub mod socket;

pub use crate::paths::{LOCK_FILE, LOG_FILE, PID_FILE};

use crate::daemon::jobs::{JobEntry, JobOrder, Jobs, Retention};
use crate::daemon::journal::{Journal, JournalEntry, JournalError};
use crate::protocol::{Event, JobState};
use advisord_adapters::registry::Registry;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::future::Future;
use std::io;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

/// How long in-flight exchanges get at shutdown before they are cancelled, by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How long a task's cached records are kept after it was last used.
pub const TASK_IDLE: Duration = Duration::from_secs(120);

/// How long cancelled work gets to wind down before the daemon stops waiting for it.
const WIND_DOWN: Duration = Duration::from_secs(3);

/// What the daemon runs with.
pub struct Config {
    /// Where the job journal, the pid file and the log live.
    pub data_dir: PathBuf,
    /// How long in-flight exchanges get at shutdown.
    pub grace: Duration,
    /// The adapters advisors are reached through, by name.
    pub registry: Registry,
    /// How long finished jobs are kept.
    pub retention: Retention,
    /// How often finished jobs are pruned.
    pub prune_every: Duration,
    /// How many jobs run at once; the rest wait `queued`.
    pub max_running_jobs: usize,
    /// The timeouts and the cap of the socket's connections.
    pub connections: conn::Limits,
    /// The mesh to join, if any (nothing about the mesh runs without one).
    pub mesh: Option<mesh::MeshConfig>,
    /// Stop after this long with no job queued or running and no request (`--idle-exit`,
    /// which the client's autostart passes); `None` stays up.
    pub idle_exit: Option<Duration>,
    /// The TCP listener served beside the socket (`--listen`), if any.
    pub listen: Option<listen::TcpConfig>,
    /// The bounds of the event streams.
    pub events: feed::Limits,
}

impl Config {
    /// The defaults, with the built-in adapters, over `data_dir`.
    pub fn new(data_dir: PathBuf) -> Config {
        Config {
            data_dir,
            grace: DEFAULT_GRACE,
            registry: Registry::builtin(),
            retention: Retention::default(),
            prune_every: Duration::from_secs(60),
            max_running_jobs: 64,
            connections: conn::Limits::default(),
            mesh: None,
            idle_exit: None,
            listen: None,
            events: feed::Limits::default(),
        }
    }
}

/// Resolves once the daemon has been idle for `after`: no job queued or running and no
/// request answered for that long. Never resolves without a bound.
async fn idle_exit(jobs: Arc<Jobs>, after: Option<Duration>) {
    let Some(after) = after else {
        return std::future::pending().await;
    };
    let tick = (after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        let counts = jobs.counts();
        let busy = [JobState::Queued, JobState::Running]
            .iter()
            .any(|state| counts.get(state).copied().unwrap_or(0) > 0);
        if busy {
            jobs.touch();
        } else if jobs.idle_for() >= after {
            tracing::info!(
                idle_s = after.as_secs_f64(),
                "idle: exiting (`--idle-exit`)"
            );
            return;
        }
    }
}

/// Why the daemon could not start or went down.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the data directory.
    #[error(
        "another `advisord` is using the data directory `{}` (pid file `{}`); stop it or pass \
         another `--data-dir`",
        dir.display(),
        dir.join(PID_FILE).display()
    )]
    DataDirBusy {
        /// The data directory.
        dir: PathBuf,
    },
    /// The data directory could not be prepared.
    #[error("data directory: {context}: {source}")]
    DataDir {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The journal could not be read at start.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The HTTP server stopped on its own.
    #[error("the server stopped: {0}")]
    Server(String),
}

/// The data directory, held for the daemon's life: its lock, and the pid file removed at
/// a clean exit.
struct DataDir {
    pid_file: PathBuf,
    _lock: Flock<File>,
}

impl DataDir {
    fn take(dir: &Path) -> Result<DataDir, DaemonError> {
        let fail = |what: String| {
            move |source| DaemonError::DataDir {
                context: what,
                source,
            }
        };
        // One of ours (the user's, writable by nobody else) is made private (`0700`): it
        // holds question text and paths. A shared or foreign one is refused, not tightened.
        match crate::ownership::check_dir(dir, crate::ownership::me()) {
            Ok(_) => {
                crate::paths::private_dir(dir).map_err(fail(format!(
                    "cannot create `{}` private (0700)",
                    dir.display()
                )))?;
            }
            Err(not_ours) => {
                return Err(fail(format!(
                    "cannot keep the data directory in `{}`",
                    dir.display()
                ))(std::io::Error::other(format!(
                    "{not_ours}; pass a `--data-dir` of your own (it is created 0700)"
                ))))
            }
        }
        let lock_path = dir.join(LOCK_FILE);
        let file = crate::paths::private_file(&lock_path, false)
            .map_err(fail(format!("cannot open `{}`", lock_path.display())))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            DaemonError::DataDirBusy {
                dir: dir.to_path_buf(),
            }
        })?;
        let pid_file = dir.join(PID_FILE);
        crate::paths::private_file(&pid_file, false)
            .and_then(|mut file| {
                file.set_len(0)?;
                std::io::Write::write_all(&mut file, format!("{}\n", std::process::id()).as_bytes())
            })
            .map_err(fail(format!("cannot write `{}`", pid_file.display())))?;
        Ok(DataDir {
            pid_file,
            _lock: lock,
        })
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// Serve on `listener` until `shutdown` resolves, then stop: stop
/// accepting, give in-flight exchanges `config.grace`, cancel the rest, and leave
/// unfinished jobs journaled to resume. Jobs journaled by an earlier run resume at once.
pub async fn run(
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    config: Config,
) -> Result<(), DaemonError> {
    let data_dir = DataDir::take(&config.data_dir)?;
    // The key that attests the consultations its jobs write, made the first time, and the
    // heads of the tasks it writes: kept in the data directory, outside every repository.
    let machine = crate::machine::install(&config.data_dir);
    machine
        .key_or_create()
        .map_err(|source| DaemonError::DataDir {
            context: format!(
                "cannot make or read the attestation key `{}`",
                crate::machine::attest::key_path(machine.data_dir()).display()
            ),
            source,
        })?;
    // Orphaned descendants of process advisors come to the daemon, which stops them with
    // their exchange (they may have left the process group with `setsid`).
    if let Err(e) = advisord_adapters::process::contain::become_subreaper() {
        tracing::warn!(
            error = %e,
            "cannot become a child subreaper; a process advisor's descendant that leaves \
             its group may outlive the exchange"
        );
    }
    let journal = Journal::open(&config.data_dir)?;
    let saved = journal.load_all()?;
    let (queue, queue_rx) = mpsc::unbounded_channel();
    let started_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut registry = config.registry;
    let mesh = match config.mesh {
        Some(mesh_config) => Some(mesh::Mesh::join(mesh_config, &config.data_dir).await),
        None => None,
    };
    if let Some(link) = mesh.as_ref().and_then(|m| m.adapter_link()) {
        registry.insert(
            advisord_adapters::mesh::ADAPTER,
            Arc::new(advisord_adapters::mesh::MeshAdapter::new(link)),
        );
    }
    let shared = Arc::new(Jobs::new(
        journal,
        registry,
        queue,
        started_ms,
        mesh,
        config.events,
    ));
    resume(&shared, saved);

    let mut workers: JoinSet<&'static str> = JoinSet::new();
    workers.spawn(scheduler(shared.clone(), queue_rx, config.max_running_jobs));
    workers.spawn(pruner(shared.clone(), config.retention, config.prune_every));
    if let Some(mesh) = shared.mesh.clone() {
        let (sweeping, stop) = (mesh.clone(), shared.drain.clone());
        workers.spawn(async move {
            sweeping.sweeper(stop).await;
            "mesh sweeper"
        });
        if mesh.offers() {
            let (shared, mesh) = (shared.clone(), mesh.clone());
            let (stop, cancel) = (shared.drain.clone(), shared.token.clone());
            workers.spawn(async move {
                mesh::offer::serve(shared, mesh, stop, cancel).await;
                "mesh offer"
            });
        }
    }

    let uid = nix::unistd::geteuid().as_raw();
    let tcp = match config.listen {
        Some(tcp) => Some(tcp_listener(tcp, &config.data_dir)?),
        None => None,
    };
    let listening = tcp.as_ref().map(|(_, _, info)| info.clone());
    let app = http::router(Arc::new(served::Served::new(shared.clone(), listening)));
    let stop_accepting = shared.drain.clone();
    let unix = conn::serve(
        conn::Listener::Unix { listener, uid },
        app.clone(),
        config.connections.clone(),
        stop_accepting.clone(),
    );
    let tcp = tcp.map(|(listener, guard, _)| {
        let app = listen::guarded(app, guard);
        conn::serve(
            conn::Listener::Tcp(listener),
            app,
            config.connections.clone(),
            stop_accepting,
        )
    });
    let server = async move {
        match tcp {
            Some(tcp) => futures::future::try_join(unix, tcp).await.map(|_| ()),
            None => unix.await,
        }
    };
    let mut server = tokio::spawn(server);
    tracing::info!(
        pid = std::process::id(),
        data_dir = %config.data_dir.display(),
        "advisord serving"
    );

    let idle = idle_exit(shared.clone(), config.idle_exit);
    let server_result = tokio::select! {
        () = shutdown => None,
        () = idle => None,
        ended = &mut server => Some(ended),
    };
    tracing::info!("shutting down: no new jobs or exchanges start");
    shared.drain.cancel();
    shared.tracker.close();
    if tokio::time::timeout(config.grace, shared.tracker.wait())
        .await
        .is_err()
    {
        tracing::info!(
            grace_s = config.grace.as_secs_f64(),
            "grace over: cancelling the rest"
        );
    }
    shared.token.cancel();
    if tokio::time::timeout(WIND_DOWN, shared.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("some jobs did not wind down in time; they resume at the next start");
    }
    workers.shutdown().await;
    if let Some(mesh) = &shared.mesh {
        mesh.leave().await;
    }
    let server_result = match server_result {
        Some(ended) => Some(ended),
        None => match tokio::time::timeout(WIND_DOWN, &mut server).await {
            Ok(ended) => Some(ended),
            Err(_) => {
                server.abort();
                None
            }
        },
    };
    drop(data_dir);
    tracing::info!("advisord stopped");
    match server_result {
        Some(Ok(Err(e))) => Err(DaemonError::Server(e.to_string())),
        Some(Err(e)) if e.is_panic() => Err(DaemonError::Server(e.to_string())),
        _ => Ok(()),
    }
}

/// The TCP listener made ready: the tokio listener, the guard with the token (created
/// in `data_dir` the first time) and what `health` says about it.
fn tcp_listener(
    tcp: listen::TcpConfig,
    data_dir: &Path,
) -> Result<
    (
        tokio::net::TcpListener,
        listen::Guard,
        crate::protocol::Listening,
    ),
    DaemonError,
> {
    let fail = |context: String| move |source| DaemonError::DataDir { context, source };
    let addr = tcp
        .listener
        .local_addr()
        .map_err(fail("cannot read the TCP listener's address".into()))?;
    let token = listen::Token::load_or_create(data_dir).map_err(fail(format!(
        "cannot keep the token in `{}`",
        listen::token_path(data_dir).display()
    )))?;
    let listener = tokio::net::TcpListener::from_std(tcp.listener)
        .map_err(fail(format!("cannot serve on `{addr}`")))?;
    tracing::info!(%addr, "listening on TCP (token required)");
    let info = crate::protocol::Listening {
        address: addr.to_string(),
        token_file: listen::token_path(data_dir),
    };
    Ok((listener, listen::Guard::new(token, addr), info))
}

/// Take back the journaled jobs: finished ones are listed until pruned, unfinished ones
/// are queued again (in the order they were accepted).
fn resume(shared: &Arc<Jobs>, saved: Vec<JournalEntry>) {
    for saved in saved {
        let mut job = saved.job;
        let unfinished = !job.state.is_finished();
        if unfinished {
            job.state = JobState::Queued;
        }
        let order = JobOrder {
            context: saved.context,
            question: saved.question,
            prior_opinion: saved.prior_opinion,
            prompt: saved.prompt,
            timeout: saved.timeout,
            resumed: true,
        };
        let entry = Arc::new(JobEntry::new(job, order, &shared.token));
        if unfinished {
            entry.attach_feed(shared.feed.clone());
            tracing::info!(job = %entry.id(), "resuming a journaled job");
            shared.table.insert(entry.clone());
            shared.enqueue(entry);
        } else {
            entry.emit(Event::Done {
                at: crate::protocol::Timestamp::now(),
                job: entry.id(),
                result: Box::new(entry.snapshot()),
            });
            shared.table.insert(entry);
        }
    }
}

/// Start queued jobs in order, at most `max_running` at once, until shutdown begins.
async fn scheduler(
    shared: Arc<Jobs>,
    mut queue: mpsc::UnboundedReceiver<Arc<JobEntry>>,
    max_running: usize,
) -> &'static str {
    let slots = Arc::new(Semaphore::new(max_running.max(1)));
    loop {
        let entry = tokio::select! {
            () = shared.drain.cancelled() => break,
            next = queue.recv() => match next {
                Some(entry) => entry,
                None => break,
            },
        };
        let slot = tokio::select! {
            () = shared.drain.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        if entry.state() != JobState::Queued {
            continue; // cancelled while it waited
        }
        let shared_for_job = shared.clone();
        shared.tracker.spawn(async move {
            runner::run_job(shared_for_job, entry).await;
            drop(slot);
        });
    }
    "scheduler"
}

/// Drop finished jobs past the retention: from memory at once when a job ends (so the
/// number kept holds however many jobs a minute runs), and from the journal at the next
/// round, in one batch, so that removing files never competes with the journal writes of
/// a burst of jobs. A job dropped from memory but not yet from the journal is dropped
/// again by the first round after a restart.
async fn pruner(shared: Arc<Jobs>, retention: Retention, every: Duration) -> &'static str {
    let mut ticks = tokio::time::interval(every);
    let mut unjournal: Vec<crate::protocol::JobId> = Vec::new();
    loop {
        let round = tokio::select! {
            () = shared.drain.cancelled() => break,
            _ = ticks.tick() => true,
            () = shared.ended.notified() => false,
        };
        if round {
            crate::store::Stores::process().release_idle(TASK_IDLE);
        } else if !shared.table.any_unfinished() {
            // The last running job ended: what the burst freed goes back to the system.
            memory::after_burst();
        }
        unjournal.extend(shared.table.prune(retention, SystemTime::now()));
        if !round || unjournal.is_empty() {
            continue;
        }
        tracing::debug!(count = unjournal.len(), "pruning finished jobs");
        let dir = shared.journal.dir().to_path_buf();
        let dropped = std::mem::take(&mut unjournal);
        let removed = tokio::task::spawn_blocking(move || {
            let journal = Journal::at(dir);
            dropped
                .iter()
                .try_for_each(|id| journal.remove(id.as_str()))
        })
        .await;
        if let Ok(Err(e)) = removed {
            tracing::warn!(error = %e, "could not prune a journaled job");
        }
    }
    "pruner"
}
