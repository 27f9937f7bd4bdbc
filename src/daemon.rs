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
pub mod verify_progress;

pub use crate::paths::{LOCK_FILE, LOG_FILE, PID_FILE};

/// The most threads the daemon's blocking work may use at once (its runtime's blocking
/// pool, built by `advisord`). The runner keeps most of them free of work that waits on
/// the runtime (`runner::TOGETHER_AT_ONCE` is a quarter of them).
pub const MAX_BLOCKING_THREADS: usize = 16;

use crate::daemon::jobs::{Jobs, Retention};
use crate::daemon::journal::{Journal, JournalError};
use advisord_adapters::registry::Registry;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::future::Future;
use std::io;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::net::UnixListener;
use tokio::task::JoinSet;

/// How long in-flight exchanges get at shutdown before they are cancelled, by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

pub use jobs::TASK_IDLE;

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
    let started_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut registry = config.registry;
    let mesh = match config.mesh {
        Some(mesh_config) => Some(mesh::Mesh::join(mesh_config, &config.data_dir).await),
        None => None,
    };
    if let Some(mesh) = &mesh {
        // Its runtime signs the consultations its jobs write, for other machines to check.
        machine.set_runtime(mesh.identity().clone());
    }
    if let Some(link) = mesh.as_ref().and_then(|m| m.adapter_link()) {
        registry.insert(
            advisord_adapters::mesh::ADAPTER,
            Arc::new(advisord_adapters::mesh::MeshAdapter::new(link)),
        );
    }
    let peers = mesh.clone().map(|m| m as Arc<dyn jobs::PeerSource>);
    let shared = Arc::new(Jobs::new(
        journal,
        registry,
        |jobs, entry| Box::pin(runner::run_job(jobs, entry)),
        started_ms,
        peers,
        config.events,
    ));
    let mut workers: JoinSet<&'static str> = JoinSet::new();
    let limits = jobs::Limits {
        max_running: config.max_running_jobs,
        retention: config.retention,
        prune_every: config.prune_every,
    };
    shared.start(saved, limits, &mut workers);
    if let Some(mesh) = mesh.clone() {
        let (sweeping, stop) = (mesh.clone(), shared.draining());
        workers.spawn(async move {
            sweeping.sweeper(stop).await;
            "mesh sweeper"
        });
        if mesh.offers() {
            let (shared, mesh) = (shared.clone(), mesh.clone());
            let (stop, cancel) = (shared.draining(), shared.stopping());
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
    let app = http::router(Arc::new(served::Served::new(
        shared.clone(),
        mesh.clone(),
        listening,
    )));
    let stop_accepting = shared.draining();
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

    let idle = shared.idle(config.idle_exit);
    let server_result = tokio::select! {
        () = shutdown => None,
        () = idle => None,
        ended = &mut server => Some(ended),
    };
    tracing::info!("shutting down: no new jobs or exchanges start");
    shared.stop(config.grace, WIND_DOWN).await;
    workers.shutdown().await;
    if let Some(mesh) = &mesh {
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
