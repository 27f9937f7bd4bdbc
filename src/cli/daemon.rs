//! `daemon status|stop|logs`: operating the daemon that serves this user's socket. None
//! of them starts a daemon.

use crate::client::{ensure_daemon, Client};
use crate::error::Error;
use crate::facade::Api;
use crate::paths;
use crate::protocol::{HealthRequest, JobState};
use crate::render::text::Out;
use crate::render::{render, Format, Render};
use anyhow::Context as _;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `daemon status` prints.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonStatus {
    /// Whether a daemon answers on the socket.
    pub running: bool,
    /// The socket.
    pub socket: PathBuf,
    /// Its process id.
    pub pid: Option<u32>,
    /// Its version.
    pub version: Option<String>,
    /// Seconds since it started.
    pub uptime_s: Option<u64>,
    /// Its jobs by state.
    pub jobs: BTreeMap<JobState, usize>,
    /// The log a daemon started from this environment (`--detach`, autostart) writes.
    pub log: Option<PathBuf>,
}

impl Render for DaemonStatus {
    fn plain(&self) -> String {
        let mut out = Out::new();
        match (self.running, self.pid, &self.version) {
            (true, Some(pid), Some(version)) => out.line(&format!(
                "advisord {version} running (pid {pid}, up {})",
                uptime(self.uptime_s.unwrap_or(0))
            )),
            _ => out.line("no daemon is running; the first verb that needs one starts it"),
        }
        out.line(&format!("socket  {}", self.socket.display()));
        if let Some(log) = &self.log {
            out.line(&format!("log     {}", log.display()));
        }
        if self.running {
            let jobs: Vec<String> = self
                .jobs
                .iter()
                .map(|(state, n)| format!("{n} {}", state.as_str()))
                .collect();
            out.line(&format!("jobs    {}", jobs.join(", ")));
        }
        out.finish()
    }
}

fn uptime(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// `daemon status`: exit 0 when a daemon answers, 4 when none does.
pub async fn status(socket: &Path, format: Format) -> anyhow::Result<i32> {
    let mut report = DaemonStatus {
        running: false,
        socket: socket.to_path_buf(),
        pid: None,
        version: None,
        uptime_s: None,
        jobs: BTreeMap::new(),
        log: paths::log_path(),
    };
    if let Some(client) = reachable(socket)? {
        let health = client.health(HealthRequest {}).await?;
        report.running = true;
        report.pid = Some(health.pid);
        report.version = Some(health.version);
        report.uptime_s = Some(health.uptime_s);
        report.jobs = health.jobs;
    }
    super::print_stdout(&render(&report, format))?;
    Ok(if report.running { 0 } else { 4 })
}

/// The client of the daemon on `socket` when one answers (the socket and the process
/// checked to be the user's own); `None` when nobody answers.
fn reachable(socket: &Path) -> anyhow::Result<Option<Client>> {
    match ensure_daemon(socket, false) {
        Ok(()) => Ok(Some(Client::new(socket.to_path_buf()))),
        Err(Error::Unreachable { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `daemon stop`: SIGTERM to the daemon that answers on `socket` (its own word for its
/// pid, from a process checked to be the user's), then wait up to `timeout` for it to be
/// gone. Exit 0 when it stopped or none was running; 5 when it outlived the wait.
pub async fn stop(socket: &Path, timeout: Duration, format: Format) -> anyhow::Result<i32> {
    let Some(client) = reachable(socket)? else {
        let message = format!(
            "no daemon answers on `{}`; nothing to stop",
            socket.display()
        );
        print(
            format,
            &serde_json::json!({"stopped": false, "running": false, "socket": socket}),
            &message,
        )?;
        return Ok(0);
    };
    let pid = client.health(HealthRequest {}).await?.pid;
    let target = nix::unistd::Pid::from_raw(
        i32::try_from(pid)
            .map_err(|_| Error::Protocol(format!("the daemon reported pid {pid}")))?,
    );
    // Watch the process before signalling it: its pid cannot be another's meanwhile.
    let watch = exit_watch(target);
    nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM)
        .with_context(|| format!("cannot signal the daemon (pid {pid})"))?;
    let started = Instant::now();
    // Wait on the process itself: a pidfd turns readable the moment the daemon exits, so
    // `stop` returns then, not at the next look of a poll. Without one (a kernel before
    // 5.3), look often.
    let gone = match watch {
        Some(pidfd) => wait_exit(pidfd, timeout).await,
        None => poll_exit(target, timeout).await,
    };
    if gone || exited(target) {
        // The listening socket closed with the process: nothing answers any more.
        let message = format!(
            "advisord (pid {pid}) stopped in {:.3} s; unfinished jobs resume when a daemon \
             starts again",
            started.elapsed().as_secs_f64()
        );
        print(
            format,
            &serde_json::json!({"stopped": true, "pid": pid, "socket": socket}),
            &message,
        )?;
        return Ok(0);
    }
    eprintln!(
        "error: advisord (pid {pid}) is still running {} s after SIGTERM (it gives running \
         exchanges their grace first); wait longer with `daemon stop --timeout SECS`, or \
         `kill -KILL {pid}`",
        timeout.as_secs_f64()
    );
    Ok(5)
}

/// A handle that turns readable when process `pid` exits (a Linux pidfd), or `None`
/// where the kernel offers none or the process is already gone.
fn exit_watch(pid: nix::unistd::Pid) -> Option<std::os::fd::OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid.as_raw())?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Wait, at most `timeout`, for the process behind `pidfd` to exit; whether it did.
async fn wait_exit(pidfd: std::os::fd::OwnedFd, timeout: Duration) -> bool {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        loop {
            let left = timeout.saturating_sub(started.elapsed());
            let limit = rustix::event::Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [rustix::event::PollFd::new(
                &pidfd,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&limit)) {
                Ok(ready) => return ready > 0,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .unwrap_or(false)
}

/// Where no pidfd can be had: look every millisecond or two until `pid` exited or
/// `timeout` passed; whether it exited.
async fn poll_exit(pid: nix::unistd::Pid, timeout: Duration) -> bool {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    while started.elapsed() < timeout {
        if exited(pid) {
            return true;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(4));
    }
    exited(pid)
}

/// Whether the process `pid` has exited: gone, or a zombie its parent has not reaped yet
/// (a daemon started by the caller itself stays one until the caller waits for it).
fn exited(pid: nix::unistd::Pid) -> bool {
    if nix::sys::signal::kill(pid, None).is_err() {
        return true;
    }
    // `/proc/<pid>/stat`: "pid (comm) S ...", the state after the last parenthesis.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X")
    })
}

fn print(format: Format, value: &serde_json::Value, plain: &str) -> anyhow::Result<()> {
    let text = match format {
        Format::Json => serde_json::to_string_pretty(value)?,
        Format::Yaml => serde_yaml_ng::to_string(value)?,
        Format::Plain | Format::Table => plain.to_string(),
    };
    super::print_stdout(&text)
}

/// `daemon logs`: the last `lines` lines of the log a daemon started from this
/// environment writes; with `follow`, then what it appends, until interrupted.
pub async fn logs(lines: usize, follow: bool) -> anyhow::Result<i32> {
    let Some(log) = paths::log_path() else {
        return Err(Error::Usage(format!(
            "no data directory to find the log in: set `{}` (or `XDG_STATE_HOME` or `HOME`)",
            paths::ENV_DATA_DIR
        ))
        .into());
    };
    let mut file = std::fs::File::open(&log).map_err(|e| {
        Error::NotFound(format!(
            "no daemon log at `{}` ({e}); a daemon started with `--detach` or by \
             advisor-consult writes it, one in the foreground logs to its standard error, and \
             one under systemd to the journal (`journalctl --user -u advisord`)",
            log.display()
        ))
    })?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .with_context(|| format!("cannot read `{}`", log.display()))?;
    let all: Vec<&str> = text.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    if !tail.is_empty() {
        super::print_stdout(&tail)?;
    }
    if !follow {
        return Ok(0);
    }
    let mut position = text.len() as u64;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let length = std::fs::metadata(&log).map_or(0, |m| m.len());
        if length < position {
            // Truncated or replaced: start again from its beginning.
            position = 0;
        }
        if length > position {
            file = std::fs::File::open(&log)?;
            file.seek(SeekFrom::Start(position))?;
            let mut added = Vec::new();
            file.read_to_end(&mut added)?;
            position += added.len() as u64;
            let mut out = std::io::stdout().lock();
            if out.write_all(&added).and_then(|()| out.flush()).is_err() {
                return Ok(0);
            }
        }
    }
}
