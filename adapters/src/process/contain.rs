//! Containing a process advisor's descendants, including those that leave its process
//! group (`setsid`, a double fork).
//!
//! Every exchange's process gets a marker variable, [`MARKER`], with a value unique to the
//! exchange; its descendants inherit it. The daemon makes itself a **child subreaper**
//! ([`become_subreaper`], `prctl(PR_SET_CHILD_SUBREAPER)`), so a descendant orphaned by
//! its parent's death is re-parented to the daemon instead of to init. When the exchange
//! ends (an answer, the deadline, a cancellation, or its future dropped), after its group
//! is killed, [`kill_marked`] kills every process re-parented to the daemon (or to init)
//! that carries the exchange's marker, and each of their descendants, and reaps those
//! that became the daemon's children.
//!
//! What is not contained: a descendant that both leaves the group and replaces its
//! environment without the marker, before its parent dies. No cgroup is used (a user
//! daemon rarely has a delegated one).

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The variable naming the exchange a process belongs to.
pub const MARKER: &str = "ADVISORD_EXCHANGE";

/// How many rounds [`kill_marked`] makes: a killed process's own children are orphaned in
/// turn, and found by the next round.
const ROUNDS: usize = 4;

static SUBREAPER: AtomicBool = AtomicBool::new(false);
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Make this process a child subreaper: orphaned descendants of its children are
/// re-parented to it, where [`kill_marked`] finds them. Idempotent.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)?;
    if !SUBREAPER.swap(true, Ordering::SeqCst) {
        // A subreaper inherits zombies too: a descendant that dies after its exchange
        // ended (killed with its group while its parent lived, or exiting on its own,
        // as `codex`'s background `git`) would stay a zombie for the daemon's life.
        let spawned = std::thread::Builder::new()
            .name("advisord-reaper".into())
            .spawn(|| loop {
                std::thread::sleep(REAP_EVERY);
                reap_inherited();
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the reaper of inherited zombies: {e}");
        }
    }
    Ok(())
}

/// How often inherited zombies are reaped.
const REAP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Reap every zombie this process inherited (as a subreaper), never one it spawned: a
/// child it spawned is either an exchange's group leader (its own group, this process's
/// session: its runner waits for it) or in this process's own group (a command the process
/// runs and waits for). An inherited descendant of an advisor is in its advisor's group
/// or in a session of its own. Returns how many were reaped.
pub fn reap_inherited() -> usize {
    // Reading every process's `/proc` entry costs a few milliseconds a second on a busy
    // machine; with no child of this process exited, there is nothing to reap.
    if !any_exited_child() {
        return 0;
    }
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let my_group = nix::unistd::getpgrp().as_raw();
    let my_session = nix::unistd::getsid(None).map_or(0, Pid::as_raw);
    let mut reaped = 0;
    for (pid, process) in processes() {
        if !(process.zombie && process.parent == me) {
            continue;
        }
        let Some((group, session)) = group_and_session(pid) else {
            continue;
        };
        let spawned_leader = group == pid && session == my_session;
        if spawned_leader || group == my_group {
            continue;
        }
        if waitpid(
            Pid::from_raw(pid),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        )
        .is_ok()
        {
            reaped += 1;
        }
    }
    reaped
}

/// Whether a child of this process has exited and waits to be reaped, without reaping it
/// (`waitid` with `WNOWAIT`). An error other than "no children" counts as yes: the caller
/// then looks for itself.
fn any_exited_child() -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::All, flags) {
        Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => false,
        Ok(_) | Err(_) => true,
    }
}

/// The process group and session of `pid` (`/proc/<pid>/stat` fields 5 and 6).
fn group_and_session(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rfind(')').and_then(|i| stat.get(i + 2..))?;
    let mut fields = rest.split_whitespace().skip(2);
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((group, session))
}

/// Whether [`become_subreaper`] succeeded in this process.
pub fn is_subreaper() -> bool {
    SUBREAPER.load(Ordering::SeqCst)
}

/// A marker value no other exchange of this process (or of another daemon) carries.
pub fn new_marker() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One process as `/proc/<pid>/stat` shows it.
struct Proc {
    parent: i32,
    zombie: bool,
}

fn processes() -> HashMap<i32, Proc> {
    let mut all = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return all;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let Some(parent) = fields.next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        all.insert(
            pid,
            Proc {
                parent,
                zombie: state == "Z" || state == "X",
            },
        );
    }
    all
}

fn carries(pid: i32, marker: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wanted = format!("{MARKER}={marker}");
    environ
        .split(|&b| b == 0)
        .any(|entry| entry == wanted.as_bytes())
}

/// Kill every orphaned process carrying `marker` (re-parented to this process or to
/// init), and their descendants; reap those that are this process's children. Returns how
/// many were killed.
pub fn kill_marked(marker: &str) -> usize {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut killed = 0;
    for _ in 0..ROUNDS {
        let all = processes();
        let mut roots: Vec<i32> = all
            .iter()
            .filter(|(_, p)| !p.zombie && (p.parent == me || p.parent == 1))
            .map(|(&pid, _)| pid)
            .filter(|&pid| carries(pid, marker))
            .collect();
        if roots.is_empty() {
            break;
        }
        // Their whole trees, whatever their environment.
        let mut doomed: BTreeSet<i32> = BTreeSet::new();
        while let Some(pid) = roots.pop() {
            if doomed.insert(pid) {
                roots.extend(
                    all.iter()
                        .filter(|(_, p)| p.parent == pid && !p.zombie)
                        .map(|(&child, _)| child),
                );
            }
        }
        for &pid in &doomed {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        for &pid in &doomed {
            if all.get(&pid).is_some_and(|p| p.parent == me) {
                // Ours since it was orphaned, and killed: reap it (it dies at once).
                let _ = waitpid(Pid::from_raw(pid), None);
            }
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reaper's first look sees a child that exited and is not yet reaped, and leaves
    /// it for its parent's own wait.
    #[test]
    fn an_exited_child_is_seen_and_left_unreaped() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("run `true`");
        let pid = i32::try_from(child.id()).expect("a pid");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let zombie = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        while !zombie() {
            assert!(std::time::Instant::now() < deadline, "`true` did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(any_exited_child(), "an exited child waits to be reaped");
        assert!(zombie(), "looking did not reap it");
        assert!(child.wait().expect("wait for `true`").success());
    }
}
