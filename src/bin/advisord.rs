//! `advisord`: the daemon. Runs in the foreground on the user's socket unless
//! `--detach`; stops cleanly on SIGTERM or SIGINT.
//!
//! Exit status: 0 stopped cleanly; 1 could not start (socket, data directory) or failed;
//! 2 usage; 4 another `advisord` already serves the socket or holds the data directory.

use advisord::daemon::socket::{self, BindError};
use advisord::daemon::{self, mesh, Config, DaemonError};
use advisord::paths::{self, socket_path, LOG_FILE};
use anyhow::Context;
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Exit status when another daemon already serves the socket or holds the data directory.
const EXIT_ALREADY_RUNNING: u8 = 4;

/// How long `--detach` waits for its child to answer on the socket.
const DETACH_WAIT: Duration = Duration::from_secs(15);

/// Consult independent advisors concurrently: the daemon behind `advisor-consult`.
#[derive(Debug, Parser)]
#[command(name = "advisord", version, about, long_about = None)]
struct Args {
    /// The socket to serve [default: $ADVISORD_SOCKET, else
    /// $XDG_RUNTIME_DIR/advisord/advisord.sock, else /tmp/advisord-<uid>/advisord.sock]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Where the job journal, the pid file and the log live [default: $ADVISORD_DATA_DIR,
    /// else $XDG_STATE_HOME/advisord, else ~/.local/state/advisord]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Seconds in-flight exchanges get at shutdown before they are cancelled (decimals
    /// allowed)
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    grace: Duration,
    /// Join the mesh on this NATS bus (`nats://host:4222`, `tls://host:4222`; several
    /// separated by commas) to find peers offering reviews [default: $ADVISORD_MESH_URL;
    /// credentials from $ADVISORD_MESH_CREDS, never in the URL: a password given here is
    /// moved out of the command line at once]
    #[arg(long, value_name = "URL")]
    mesh: Option<String>,
    /// Offer reviews to the mesh: `relay` asks this machine's own advisors, `inbox` keeps
    /// them for `advisor-consult reviews` [default: $ADVISORD_MESH_OFFER]
    #[arg(long, value_name = "MODE", value_enum)]
    offer_reviews: Option<mesh::Offer>,
    /// Share the tasks of repositories that name a journal (`journal: NAME` in
    /// `.advisord/project.yaml`) through NATS JetStream, on the mesh's URL and credentials
    /// (docs/JOURNAL.md) [default: $ADVISORD_JOURNAL]
    #[arg(long)]
    journal: bool,
    /// Also serve the same API and the cockpit page on TCP at `ADDR:PORT` (loopback
    /// unless `--listen-public`); every request needs the token kept in the data directory
    /// (`advisor-consult cockpit` prints the page's URL with it)
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Allow `--listen` on an address other than loopback (anyone who can reach it may
    /// try the token)
    #[arg(long, requires = "listen")]
    listen_public: bool,
    /// Run in the background: start a detached daemon, wait until it answers, and exit
    #[arg(long)]
    detach: bool,
    /// Exit after this many seconds with no job queued or running and no request
    /// (decimals allowed). advisor-consult passes it to a daemon it starts itself
    /// ($ADVISORD_IDLE_EXIT there, else 1800); without it (by hand, by systemd) the daemon
    /// stays up
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    idle_exit: Option<Duration>,
    /// Set by `--detach` on the daemon it starts.
    #[arg(long, hide = true)]
    detached_child: bool,
}

/// Start this executable again (same pid, `exec`) with the arguments minus `--mesh URL`,
/// the URL in `ADVISORD_MESH_URL` instead; returns only when that fails.
fn restart_without_mesh_url(url: &str) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let mut kept = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--mesh" {
            args.next();
        } else if !arg.to_string_lossy().starts_with("--mesh=") {
            kept.push(arg);
        }
    }
    let error = match std::env::current_exe() {
        Ok(exe) => Command::new(exe).args(kept).env(mesh::ENV_URL, url).exec(),
        Err(e) => e,
    };
    eprintln!(
        "error: cannot restart without the mesh URL's password on the command line ({error}); \
         give the password in `{}` (a token or a credentials file) and the URL without it",
        mesh::ENV_CREDS
    );
    ExitCode::from(1)
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("`{text}` is not a number of seconds (e.g. `5` or `0.5`)"))
}

fn main() -> ExitCode {
    // Before any thread: the allocator reads its settings when a thread first allocates,
    // and the loader its tunables only at start (a restart when they are missing).
    if let Err(message) = daemon::memory::tune_allocator() {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let args = Args::parse();
    if let Some(url) = args
        .mesh
        .as_deref()
        .filter(|u| mesh::url_has_credentials(u))
    {
        // Any user may read `/proc/<pid>/cmdline`: a URL with a password moves to the
        // environment (readable by this user only) and the daemon starts again without it.
        return restart_without_mesh_url(url);
    }
    let socket = absolute(socket_path(args.socket.as_deref()));
    let Some(data_dir) = paths::data_dir(args.data_dir.as_deref()) else {
        eprintln!(
            "error: no data directory: pass `--data-dir DIR` or set `{}` (neither \
             `XDG_STATE_HOME` nor `HOME` is set)",
            paths::ENV_DATA_DIR
        );
        return ExitCode::from(2);
    };
    if args.detach {
        return match detach(&args, &socket, &data_dir) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    if args.detached_child {
        // A session of its own: no terminal's signals reach it.
        let _ = nix::unistd::setsid();
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log file, a pipe or the journal gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Blocking work (store reads and writes, the journal) is short and mostly waits on a
    // task's lock: a few threads serve it as fast as hundreds. Unbounded (tokio's 512),
    // a burst of concurrent jobs left a thread, its stack and its allocator arena behind
    // for each, and the daemon's memory grew with every burst.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(daemon::MAX_BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // Descriptors are what a crowd of idle peers uses up: take all the system allows.
    let nofile = daemon::conn::raise_nofile_limit();
    let mesh = match mesh::MeshConfig::from_env(args.mesh.clone(), args.offer_reviews, &|name| {
        std::env::var(name).ok()
    }) {
        Ok(mesh) => mesh,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    if let Err(message) = start_journal(args.journal, mesh.as_ref()) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let mut config = Config::new(data_dir);
    tracing::debug!(
        nofile,
        max_connections = config.connections.max_connections,
        "connection cap"
    );
    config.grace = args.grace;
    config.idle_exit = args.idle_exit;
    config.mesh = mesh;
    if let Some(addr) = args.listen {
        match daemon::listen::TcpConfig::bind(addr, args.listen_public) {
            Ok(tcp) => config.listen = Some(tcp),
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(2);
            }
        }
    }
    match runtime.block_on(serve(&socket, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::AlreadyRunning(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_ALREADY_RUNNING)
        }
        Err(Failure::Other(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(&path))
        .unwrap_or(path)
}

enum Failure {
    AlreadyRunning(String),
    Other(anyhow::Error),
}

async fn serve(socket_path: &Path, config: Config) -> Result<(), Failure> {
    let bound = socket::bind(socket_path).await.map_err(|e| match e {
        BindError::AlreadyRunning { .. } => Failure::AlreadyRunning(e.to_string()),
        other => Failure::Other(anyhow::Error::new(other)),
    })?;
    let (listener, guard) = bound.into_parts();
    tracing::info!(socket = %guard.path().display(), "listening");
    // Record writes and journal saves take files made ahead instead of creating their
    // own on the hot path (`store/spare.rs`); the ones left are removed as it stops.
    advisord::store::spare::enable();
    let result = daemon::run(listener, shutdown_signal(), config).await;
    advisord::store::spare::release();
    drop(guard);
    result.map_err(|e| match e {
        DaemonError::DataDirBusy { .. } => Failure::AlreadyRunning(e.to_string()),
        other => Failure::Other(anyhow::Error::new(other)),
    })
}

/// Resolves on the first SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for SIGTERM/SIGINT; stop the daemon with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}

/// Start this executable again, detached (its own session, standard streams to the log in
/// the data directory), and wait until it answers on the socket.
fn detach(args: &Args, socket: &Path, data_dir: &Path) -> anyhow::Result<ExitCode> {
    // The user's alone (`0700`, the log `0600`): the log holds paths and questions.
    advisord::paths::private_dir(data_dir)
        .with_context(|| format!("cannot create the data directory `{}`", data_dir.display()))?;
    let log_path = data_dir.join(LOG_FILE);
    let log = advisord::paths::private_file(&log_path, true)
        .with_context(|| format!("cannot open the log `{}`", log_path.display()))?;
    // What the child writes from here on is what it says about this start.
    let log_start = log.metadata().map_or(0, |m| m.len());
    let exe = std::env::current_exe().context("cannot find this executable to start it again")?;
    let mut child = Command::new(exe)
        .args(
            args.idle_exit
                .iter()
                .flat_map(|secs| ["--idle-exit".to_string(), secs.as_secs_f64().to_string()]),
        )
        .arg("--socket")
        .arg(socket)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--grace")
        .arg(args.grace.as_secs_f64().to_string())
        .args(args.mesh.iter().flat_map(|url| ["--mesh", url.as_str()]))
        .args(
            args.offer_reviews
                .iter()
                .flat_map(|offer| ["--offer-reviews", offer.as_str()]),
        )
        .args(
            args.listen
                .iter()
                .flat_map(|a| ["--listen".to_string(), a.to_string()]),
        )
        .args(args.listen_public.then_some("--listen-public"))
        .arg("--detached-child")
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("cannot share the log file")?)
        .stderr(log)
        .spawn()
        .context("cannot start the detached daemon")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let started = Instant::now();
    while started.elapsed() < DETACH_WAIT {
        if let Some(status) = child
            .try_wait()
            .context("cannot watch the detached daemon")?
        {
            let code = status.code().unwrap_or(1);
            let said = child_said(&log_path, log_start);
            if said.is_empty() {
                eprintln!(
                    "error: the detached daemon exited with status {code} without a word; see `{}`",
                    log_path.display()
                );
            } else {
                // Its own words first: they say why (a socket in use, a data directory
                // that cannot be written...).
                eprintln!("{said}");
                eprintln!(
                    "error: the detached daemon exited with status {code} (its log: `{}`)",
                    log_path.display()
                );
            }
            return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
        }
        // The one client of the socket asks, as any surface does.
        let client = advisord::client::Client::new(socket.to_path_buf())
            .with_request_bound(Duration::from_millis(500));
        let health = runtime
            .block_on(advisord::facade::Api::health(
                &client,
                advisord::protocol::HealthRequest {},
            ))
            .ok();
        if health.is_some_and(|h| h.pid == child.id()) {
            println!(
                "advisord {} running (pid {}) on `{}`; log `{}`",
                env!("CARGO_PKG_VERSION"),
                child.id(),
                socket.display(),
                log_path.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    anyhow::bail!(
        "the detached daemon (pid {}) did not answer on `{}` within {} s; see `{}`",
        child.id(),
        socket.display(),
        DETACH_WAIT.as_secs(),
        log_path.display()
    )
}

/// What the detached child wrote to its log since `from` (the end of the log when it was
/// started), without its timestamps' noise: at most the last 20 lines.
fn child_said(log: &Path, from: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut text = String::new();
    let read = std::fs::File::open(log).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        f.take(64 * 1024).read_to_string(&mut text)
    });
    if read.is_err() {
        return String::new();
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Join the shared journal when `--journal` or `ADVISORD_JOURNAL` asks for it, on the mesh's
/// URL and credentials (docs/JOURNAL.md).
fn start_journal(flag: bool, mesh: Option<&mesh::MeshConfig>) -> Result<(), String> {
    let env = std::env::var(advisord::journal::ENV_JOURNAL).unwrap_or_default();
    let on = flag || matches!(env.trim(), "1" | "true" | "yes" | "on");
    if !on {
        return Ok(());
    }
    let mesh = mesh.ok_or_else(|| {
        format!(
            "the journal runs on the mesh's bus: pass `--mesh URL` or set `{}` beside \
             `--journal`",
            mesh::ENV_URL
        )
    })?;
    let machine = mesh.runtime.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unnamed".to_string())
    });
    advisord::journal::start(advisord::journal::JournalConfig {
        url: mesh.url.clone(),
        creds: mesh.creds.clone(),
        machine,
    })
}
