//! Starting a daemon when nobody answers on the socket: `advisord --detach` from beside
//! this executable, in a process group of its own, waited for within [`AUTOSTART_WAIT`];
//! and the checks a surface makes before it uses the socket.

use super::transport::{connect_reason, start_hint};
use super::Client;
use crate::error::{Error, Result};
use crate::ownership;
use crate::paths;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UnixStream;

/// The daemon's executable, looked up in the directory of the running one.
pub const DAEMON_EXECUTABLE: &str = "advisord";

/// How long autostart waits for a daemon it started to answer on the socket.
pub const AUTOSTART_WAIT: Duration = Duration::from_secs(5);

/// Whether something accepts connections on `socket`; the reason when not.
pub fn answers(socket: &Path) -> Result<(), String> {
    std::os::unix::net::UnixStream::connect(socket)
        .map(drop)
        .map_err(|e| connect_reason(&e))
}

/// Make sure a daemon answers on `socket`: it already does, or (when `autostart`) one is
/// started from the `advisord` beside this executable and waited for, within
/// [`AUTOSTART_WAIT`]. Exit 4 (unreachable) otherwise, with what to do.
pub fn ensure_daemon(socket: &Path, autostart: bool) -> Result<()> {
    // A socket, or a directory for one, that is someone else's is never used and never
    // autostarted into.
    let not_ours = |reason| Error::NotOurs {
        socket: socket.to_path_buf(),
        reason,
    };
    let me = ownership::me();
    ownership::check_socket_path(socket, me).map_err(not_ours)?;
    let reason = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(stream) => return ownership::check_peer(&stream, me).map_err(not_ours),
        Err(e) => connect_reason(&e),
    };
    let unreachable = |reason: String, hint: &str| Error::Unreachable {
        socket: socket.to_path_buf(),
        reason,
        hint: hint.to_string(),
    };
    if !autostart {
        return Err(unreachable(
            format!("{reason}, and `--no-autostart` is set"),
            &start_hint(socket),
        ));
    }
    let daemon = daemon_executable().map_err(|reason| {
        unreachable(
            reason,
            "install `advisord` beside `advisor-consult`, or start a daemon yourself \
             (`advisord --detach`); `--no-daemon` runs the network-free verbs in-process",
        )
    })?;
    start_daemon(&daemon, socket).map_err(|reason| {
        let hint = format!(
            "run `{} --socket {}` yourself to see why it does not serve{}; \
             `--no-daemon` runs the network-free verbs in-process",
            daemon.display(),
            socket.display(),
            paths::log_path()
                .map(|log| format!(" (a detached daemon logs to `{}`)", log.display()))
                .unwrap_or_default()
        );
        unreachable(reason, &hint)
    })
}

/// The `advisord` in the directory of the running executable.
pub fn daemon_executable() -> Result<PathBuf, String> {
    let me = std::env::current_exe()
        .map_err(|e| format!("cannot find this executable to find `advisord` beside it ({e})"))?;
    let dir = me.parent().unwrap_or(Path::new("/"));
    let daemon = dir.join(DAEMON_EXECUTABLE);
    if daemon.is_file() {
        Ok(daemon)
    } else {
        Err(format!(
            "cannot start a daemon: `{}` does not exist",
            daemon.display()
        ))
    }
}

/// Start `daemon --socket SOCKET --detach` in a process group of its own (so a Ctrl-C
/// meant for this client never reaches it) and wait until the socket answers.
/// How long a daemon the client starts stays up with nothing to do, in seconds:
/// `ADVISORD_IDLE_EXIT`, else [`AUTOSTART_IDLE_EXIT_S`]. A daemon started by hand or by
/// systemd gets no `--idle-exit` and stays up.
pub fn autostart_idle_exit() -> String {
    std::env::var("ADVISORD_IDLE_EXIT")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| AUTOSTART_IDLE_EXIT_S.to_string())
}

/// The idle period of an autostarted daemon when `ADVISORD_IDLE_EXIT` is unset: 30 minutes.
pub const AUTOSTART_IDLE_EXIT_S: u64 = 30 * 60;

fn start_daemon(daemon: &Path, socket: &Path) -> Result<(), String> {
    let mut child = Command::new(daemon)
        .arg("--socket")
        .arg(socket)
        .arg("--idle-exit")
        .arg(autostart_idle_exit())
        .arg("--detach")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start `{}` ({e})", daemon.display()))?;
    let started = Instant::now();
    loop {
        if answers(socket).is_ok() {
            eprintln!("advisor-consult: {}", started_note(socket));
            reap_in_background(child);
            return Ok(());
        }
        match child.try_wait() {
            Ok(Some(status)) if !status.success() => {
                // Another client may have started one at the same moment: it answers now.
                if answers(socket).is_ok() {
                    return Ok(());
                }
                let said = last_line(child.stderr.take());
                return Err(format!(
                    "`{} --detach` exited with status {}{}",
                    daemon.display(),
                    status.code().unwrap_or(-1),
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(": {said}")
                    }
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("cannot watch the daemon being started ({e})")),
        }
        if started.elapsed() >= AUTOSTART_WAIT {
            // Only the `--detach` parent is ours to stop; a daemon it started may still
            // come up and will then answer the next call.
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "a daemon was started (`{} --detach`) but did not answer within {} s",
                daemon.display(),
                AUTOSTART_WAIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What to tell the user once a daemon was started: where it serves and where it logs
/// (the data directory it resolves from the same environment as ours).
fn started_note(socket: &Path) -> String {
    match paths::log_path() {
        Some(log) => format!(
            "started advisord on `{}` (log `{}`)",
            socket.display(),
            log.display()
        ),
        None => format!("started advisord on `{}`", socket.display()),
    }
}

/// Wait for the `--detach` parent on a thread of its own, so it leaves no zombie.
fn reap_in_background(mut child: Child) {
    std::thread::spawn(move || {
        let _ = child.wait();
    });
}

/// The last non-empty line of a pipe whose writer has exited.
fn last_line(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(64 * 1024).read_to_string(&mut text);
    }
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string()
}

/// A client's first request still to come: when it finds nobody on the socket, a daemon is
/// made sure of ([`ensure_daemon`]) before it is sent; once one request connected, never
/// again (a daemon that stops under a later request is reported, not restarted).
#[derive(Debug)]
pub(super) struct FirstUse {
    autostart: bool,
    pending: AtomicBool,
}

impl Client {
    /// The client of the daemon on `socket` (made absolute), started when its first
    /// request finds nobody answering and `autostart` allows (exit 4 with what to do when
    /// not). No connection is made here: the first request is the check, so a consultation
    /// costs one connection, not two and a thread.
    pub async fn connect(socket: PathBuf, autostart: bool) -> Result<Client> {
        let mut client = Client::new(absolute(socket));
        client.first_use = Some(Arc::new(FirstUse {
            autostart,
            pending: AtomicBool::new(true),
        }));
        Ok(client)
    }

    /// A connection to the daemon for the next request when this is the client's first
    /// and it connects at once; `None` otherwise (the request connects as usual). When the
    /// first finds nobody, a daemon is made sure of here, outside any request's bound:
    /// starting one waits on processes, on the blocking pool, so a server's async threads
    /// are never held.
    pub(super) async fn first_connection(&self) -> Result<Option<UnixStream>> {
        let Some(first) = &self.first_use else {
            return Ok(None);
        };
        if !first.pending.load(Ordering::Acquire) {
            return Ok(None);
        }
        let me = ownership::me();
        if ownership::check_socket_path(&self.socket, me).is_ok() {
            if let Ok(stream) = UnixStream::connect(&self.socket).await {
                first.pending.store(false, Ordering::Release);
                return Ok(Some(stream));
            }
        }
        // Until a daemon answers, every request says why not (a verb may pass over the
        // first failure, as `wait` does when it looks the job up).
        let (socket, autostart) = (self.socket.clone(), first.autostart);
        tokio::task::spawn_blocking(move || ensure_daemon(&socket, autostart))
            .await
            .map_err(|e| Error::Internal(format!("a worker thread failed: {e}")))??;
        first.pending.store(false, Ordering::Release);
        Ok(None)
    }
}

impl Client {
    /// The client of the daemon on `socket` (made absolute), without checking that one
    /// answers: the caller runs [`ensure_daemon`] when it sees fit (the MCP server does it
    /// while answering the host's `initialize`).
    pub fn deferred(socket: PathBuf) -> Client {
        Client::new(absolute(socket))
    }
}

/// `path` made absolute against the working directory (the daemon runs elsewhere).
fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(&path))
        .unwrap_or(path)
}
