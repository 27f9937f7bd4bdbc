//! The daemon's allocator settings (`ADVISORD_MALLOC`): by default it runs without
//! glibc's per-thread cache of freed blocks and without its cache of ended threads'
//! stacks, which it can only get by starting again with the tunables set
//! (same pid); `glibc` keeps glibc's own; the user's own tunables are kept; an unknown
//! value is refused before anything starts.

use crate::support::daemon as daemon_helper;

use daemon_helper::{catalogue, wait_for, Place};
use std::process::Stdio;

/// The `GLIBC_TUNABLES` the daemon runs with (started with `env` added), as it reports
/// it at start with `ADVISORD_MALLOC_STATS` set: after any restart, what the allocator
/// read. (`/proc/PID/environ` is no witness: the loader rewrites the variable in place.)
fn tunables_with(env: &[(&str, &str)]) -> String {
    let place = Place::new(&catalogue(&[]));
    let log = place.path().join("daemon.err");
    let mut child = place
        .advisord()
        .env_remove("GLIBC_TUNABLES")
        .env_remove("ADVISORD_MALLOC")
        .envs(env.iter().copied())
        .env("ADVISORD_MALLOC_STATS", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("start advisord");
    let pid = child.id();
    wait_for("the daemon to answer", || {
        std::os::unix::net::UnixStream::connect(place.socket()).is_ok()
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).expect("the daemon's standard error");
    let started: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("advisord memory: started:"))
        .collect();
    assert_eq!(started.len(), 1, "one start reported (pid {pid}): {text}");
    started[0]
        .split("GLIBC_TUNABLES ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("the tunables in the report")
        .to_string()
}

#[test]
fn by_default_the_daemon_runs_without_the_allocators_caches_keeping_the_users_tunables() {
    const BOTH: &str = "glibc.malloc.tcache_count=0:glibc.pthread.stack_cache_size=0";
    assert_eq!(tunables_with(&[]), BOTH);
    assert_eq!(tunables_with(&[("ADVISORD_MALLOC", "one-arena")]), BOTH);
    assert_eq!(
        tunables_with(&[("GLIBC_TUNABLES", "glibc.malloc.arena_test=4")]),
        format!("glibc.malloc.arena_test=4:{BOTH}")
    );
    // The user's own values are theirs: nothing replaced, only what is missing added.
    assert_eq!(
        tunables_with(&[("GLIBC_TUNABLES", "glibc.malloc.tcache_count=2")]),
        "glibc.malloc.tcache_count=2:glibc.pthread.stack_cache_size=0"
    );
    assert_eq!(
        tunables_with(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.tcache_count=2:glibc.pthread.stack_cache_size=65536"
        )]),
        "glibc.malloc.tcache_count=2:glibc.pthread.stack_cache_size=65536",
        "no restart when both are named"
    );
    assert_eq!(
        tunables_with(&[("ADVISORD_MALLOC", "glibc")]),
        "unset",
        "glibc's own settings, untouched"
    );
}

#[test]
fn an_unknown_allocator_setting_is_refused_with_the_accepted_ones() {
    let place = Place::new(&catalogue(&[]));
    let output = place
        .advisord()
        .env("ADVISORD_MALLOC", "tcmalloc")
        .output()
        .expect("run advisord");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("ADVISORD_MALLOC=tcmalloc") && stderr.contains("`one-arena`"),
        "{stderr}"
    );
    assert!(!place.socket().exists(), "nothing was started");
}
