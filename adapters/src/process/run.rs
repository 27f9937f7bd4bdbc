//! Running one command in its own process group, with bounded output and a clean stop.
//!
//! The stop is the same on the deadline and on a cancellation: SIGTERM to the whole group,
//! a short grace, SIGKILL to the group, reap the leader. The run reports **at once** what
//! the process had printed by then, and the stop goes on in a task of its own: so a
//! process stopped at the deadline is classified by its output even when the machine is
//! too loaded for the stop to finish within the contract's grace. After the leader has
//! ended (by itself or not) the group gets a final SIGKILL, so no grandchild outlives the
//! exchange. If the future is dropped part-way (the contract layer drops it at the caller's
//! deadline), [`GroupGuard`] kills the group in `Drop` and the runtime reaps the leader.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What to run.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The resolved executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its whole environment (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// Its working directory (the caller's when `None`).
    pub cwd: Option<PathBuf>,
    /// Bytes written to standard input before it is closed; `None` closes it empty.
    pub stdin: Option<Vec<u8>>,
}

/// The bounds a run lives within.
#[derive(Debug, Clone)]
pub struct Limits {
    /// When the group is stopped.
    pub deadline: Instant,
    /// Stops the group when cancelled.
    pub cancel: CancellationToken,
    /// Time between SIGTERM and SIGKILL.
    pub term_grace: Duration,
    /// Bytes kept of each of standard output and standard error; the rest is read and
    /// discarded so the process never blocks on a full pipe.
    pub output_cap: usize,
    /// How long the pipes may stay open once the group is gone (a descendant that left
    /// the group may hold them).
    pub drain: Duration,
}

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The process exited by itself with this status code.
    Exited(i32),
    /// A signal we did not send ended it.
    Signalled(i32),
    /// We stopped it at the deadline.
    Deadline,
    /// We stopped it on a cancellation.
    Cancelled,
}

/// One stream's captured bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first `output_cap` bytes.
    pub bytes: Vec<u8>,
    /// Bytes read beyond the cap and discarded.
    pub discarded: u64,
}

impl Captured {
    /// The bytes as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// How it ended.
    pub ended: Ended,
    /// Standard output, capped.
    pub stdout: Captured,
    /// Standard error, capped.
    pub stderr: Captured,
}

/// Kills a process group with SIGKILL when dropped, unless disarmed after a clean stop.
#[derive(Debug)]
pub struct GroupGuard {
    group: Option<Pid>,
    /// The exchange's marker: its escaped descendants are killed with the group.
    marker: Option<String>,
}

impl GroupGuard {
    /// Guard the group led by `leader` (its pid is the group id: `process_group(0)`).
    pub fn new(leader: u32) -> GroupGuard {
        // Group 0 would be our own group: never guard (and never signal) it.
        GroupGuard {
            group: i32::try_from(leader)
                .ok()
                .filter(|&pid| pid > 0)
                .map(Pid::from_raw),
            marker: None,
        }
    }

    /// Also kill, when dropped, the descendants carrying `marker` that left the group.
    pub fn with_marker(mut self, marker: String) -> GroupGuard {
        self.marker = Some(marker);
        self
    }

    /// Send `signal` to every process of the group (gone already is fine).
    pub fn signal(&self, signal: Signal) {
        if let Some(group) = self.group {
            let _ = killpg(group, signal);
        }
    }

    /// Stop guarding: the group is dead and its leader reaped, and the id may be reused.
    pub fn disarm(&mut self) {
        self.group = None;
        self.marker = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
        if let Some(marker) = self.marker.take() {
            // Dropped part-way (the contract gave up on the exchange): no runtime to wait
            // on, and the sweep takes a few milliseconds.
            std::thread::spawn(move || super::contain::kill_marked(&marker));
        }
    }
}

/// Run `invocation` within `limits`. Fails only when the process cannot be started.
pub async fn run(invocation: Invocation, limits: &Limits) -> std::io::Result<Finished> {
    let marker = super::contain::new_marker();
    let mut command = Command::new(&invocation.program);
    command
        .args(&invocation.args)
        .env_clear()
        .envs(&invocation.env)
        .env(super::contain::MARKER, &marker)
        .stdin(if invocation.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &invocation.cwd {
        command.current_dir(dir);
    }
    let mut child = command.spawn()?;
    let Some(leader) = child.id() else {
        return Err(std::io::Error::other(
            "the process ended before it could be guarded",
        ));
    };
    let mut guard = GroupGuard::new(leader).with_marker(marker.clone());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let stdin = child.stdin.take();

    let out = Arc::new(Mutex::new(Captured::default()));
    let err = Arc::new(Mutex::new(Captured::default()));
    let pipes = {
        let (out, err) = (Arc::clone(&out), Arc::clone(&err));
        let (cap, input) = (limits.output_cap, invocation.stdin);
        async move {
            tokio::join!(
                read_capped(stdout, &out, cap),
                read_capped(stderr, &err, cap),
                feed(stdin, input.as_deref()),
            );
        }
    };
    let mut pipes = Box::pin(pipes);
    let mut pipes_done = false;

    let stopped_for = loop {
        tokio::select! {
            // An exit seen at the deadline is an exit: the answer it left is kept.
            biased;
            () = &mut pipes, if !pipes_done => pipes_done = true,
            status = child.wait() => break Err(status),
            () = tokio::time::sleep_until(limits.deadline) => break Ok(Ended::Deadline),
            () = limits.cancel.cancelled() => break Ok(Ended::Cancelled),
        }
    };
    let ended = match stopped_for {
        Err(status) => {
            // The leader is reaped; whatever is left of its group goes now, and so does
            // every descendant that left the group (orphaned, it was re-parented to us).
            guard.signal(Signal::SIGKILL);
            let sweep = marker.clone();
            let _ = tokio::task::spawn_blocking(move || super::contain::kill_marked(&sweep)).await;
            if !pipes_done {
                let _ = tokio::time::timeout(limits.drain, &mut pipes).await;
            }
            guard.disarm();
            exit_of(status)
        }
        Ok(ours) => {
            // What it printed so far is the report; stopping it is not waited for.
            guard.signal(Signal::SIGTERM);
            let grace = limits.term_grace;
            tokio::spawn(async move {
                let grace_end = Instant::now() + grace;
                let exited = tokio::select! {
                    _ = child.wait() => true,
                    () = tokio::time::sleep_until(grace_end) => false,
                };
                if !exited {
                    guard.signal(Signal::SIGKILL);
                    let _ = child.wait().await;
                }
                // The leader is reaped; whatever is left of its group goes now, and so
                // does every descendant that left the group.
                guard.signal(Signal::SIGKILL);
                let sweep = marker.clone();
                let _ =
                    tokio::task::spawn_blocking(move || super::contain::kill_marked(&sweep)).await;
                guard.disarm();
                drop(pipes);
            });
            ours
        }
    };
    let taken = |captured: &Mutex<Captured>| {
        std::mem::take(&mut *captured.lock().unwrap_or_else(|p| p.into_inner()))
    };
    Ok(Finished {
        ended,
        stdout: taken(&out),
        stderr: taken(&err),
    })
}

fn exit_of(status: std::io::Result<ExitStatus>) -> Ended {
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Ended::Exited(code),
            (None, Some(signal)) => Ended::Signalled(signal),
            (None, None) => Ended::Exited(-1),
        },
        Err(_) => Ended::Exited(-1),
    }
}

/// Read `reader` to its end, keeping at most `cap` bytes.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>, into: &Mutex<Captured>, cap: usize) {
    let Some(mut reader) = reader else { return };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut into = into.lock().unwrap_or_else(|p| p.into_inner());
                let room = cap.saturating_sub(into.bytes.len()).min(n);
                into.bytes.extend_from_slice(&buffer[..room]);
                into.discarded += (n - room) as u64;
            }
        }
    }
}

/// Write `input` to standard input, then close it. A process that does not read it is not
/// an error.
async fn feed(stdin: Option<ChildStdin>, input: Option<&[u8]>) {
    let (Some(mut stdin), Some(input)) = (stdin, input) else {
        return;
    };
    let _ = stdin.write_all(input).await;
    let _ = stdin.shutdown().await;
}
