//! Operating the daemon: `daemon status|stop|logs`, an autostarted daemon's idle exit (and a
//! daemon started by hand staying up), `--detach` saying on the terminal why it failed, and
//! logs in a file without colour codes.

use crate::support::client::{answers, Advisor, World};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Poll `condition` every 20 ms for at most `bound`.
fn eventually(bound: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < bound {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

fn run_with(world: &World, env: &[(&str, &str)], args: &[&str]) -> crate::support::output::Output {
    let mut command = world.command(args);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run advisor-consult");
    crate::support::output::Output {
        description: format!("advisor-consult {args:?}"),
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn daemon_status_logs_and_stop() {
    let world = World::new(&[Advisor::new("alpha", "supports", 0)]);
    // Nothing runs yet: status says so, exit 4, and starts nothing.
    let none = world
        .run(&["daemon", "status", "--format", "json"])
        .expect_exit(4);
    assert_eq!(none.json()["running"], false, "{}", none.stdout);
    assert!(!answers(&world.socket()), "status must not start a daemon");

    world.run(&["advisors"]).expect_exit(0); // autostarts one
    let pid = world
        .daemon_pid()
        .expect("the autostarted daemon's pid file");
    let status = world
        .run(&["daemon", "status", "--format", "json"])
        .expect_exit(0);
    let json: Value = status.json();
    assert_eq!(json["running"], true);
    assert_eq!(json["pid"], pid);
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["socket"], world.socket().to_str().unwrap());
    assert_eq!(
        json["log"],
        world.data().join("advisord.log").to_str().unwrap()
    );
    assert!(
        json["uptime_s"].is_u64() && json["jobs"]["running"] == 0,
        "{json}"
    );
    let plain = world.run(&["daemon", "status"]).expect_exit(0);
    assert!(
        plain.stdout.contains(&format!("pid {pid}")),
        "{}",
        plain.stdout
    );

    let logs = world.run(&["daemon", "logs", "-n", "3"]).expect_exit(0);
    let lines: Vec<&str> = logs.stdout.lines().collect();
    assert!(!lines.is_empty() && lines.len() <= 3, "{}", logs.stdout);
    let whole = std::fs::read_to_string(world.data().join("advisord.log")).unwrap();
    assert!(whole.contains("listening"), "{whole}");
    assert!(
        !whole.contains('\u{1b}'),
        "colour codes in a log file: {whole:?}"
    );
    assert!(
        whole.ends_with(&format!("{}\n", lines.join("\n"))),
        "the tail of the log"
    );

    let stop = world
        .run(&["daemon", "stop", "--format", "json"])
        .expect_exit(0);
    assert_eq!(stop.json()["stopped"], true, "{}", stop.stdout);
    assert!(!alive(pid) || !answers(&world.socket()), "stopped");
    assert!(
        eventually(Duration::from_secs(5), || !alive(pid)),
        "pid {pid} is gone"
    );
    world.run(&["daemon", "status"]).expect_exit(4);
    let again = world.run(&["daemon", "stop"]).expect_exit(0);
    assert!(again.stdout.contains("nothing to stop"), "{}", again.stdout);
}

#[test]
fn daemon_logs_without_a_log_says_where_logs_go() {
    let world = World::new(&[Advisor::new("alpha", "supports", 0)]);
    let out = world.run(&["daemon", "logs"]).expect_exit(2);
    assert!(
        out.stderr
            .contains(world.data().join("advisord.log").to_str().unwrap())
            && out.stderr.contains("journalctl"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_autostarted_daemon_exits_when_idle_and_one_started_by_hand_stays() {
    let mut by_hand = World::new(&[Advisor::new("alpha", "supports", 0)]);
    by_hand.start_daemon();
    let idle = World::new(&[Advisor::new("alpha", "supports", 0)]);
    let env = [("ADVISORD_IDLE_EXIT", "0.3")];
    run_with(&idle, &env, &["advisors"]).expect_exit(0);
    let pid = idle
        .daemon_pid()
        .expect("the autostarted daemon's pid file");
    assert!(
        eventually(Duration::from_secs(15), || !alive(pid)
            && !answers(&idle.socket())),
        "the autostarted daemon did not exit when idle"
    );
    let log = std::fs::read_to_string(idle.data().join("advisord.log")).unwrap();
    assert!(log.contains("idle"), "{log}");
    // The daemon started by hand has been idle at least as long, and still answers.
    assert!(answers(&by_hand.socket()));
    by_hand.run(&["daemon", "status"]).expect_exit(0);
}

#[test]
fn a_failed_detach_says_why_on_the_terminal() {
    let mut world = World::new(&[Advisor::new("alpha", "supports", 0)]);
    world.start_daemon();
    let other_data = world.tmp().join("other-data");
    let output = Command::new(crate::support::client::daemon_exe())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", world.tmp())
        .arg("--socket")
        .arg(world.socket())
        .arg("--data-dir")
        .arg(&other_data)
        .arg("--detach")
        .stdin(Stdio::null())
        .output()
        .expect("run advisord --detach");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("already serves"),
        "the child's reason: {stderr}"
    );
    assert!(stderr.contains("daemon stop"), "what to do: {stderr}");
    assert!(!stderr.contains("<data-dir>"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn hints_name_real_paths_not_placeholders() {
    let world = World::new(&[Advisor::new("alpha", "supports", 0)]);
    let out = world.run(&["--no-autostart", "jobs"]).expect_exit(4);
    let socket = world.socket();
    assert!(
        out.stderr
            .contains(&format!("advisord --detach --socket {}", socket.display())),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains('<'),
        "a placeholder in: {}",
        out.stderr
    );
}

#[test]
fn daemon_logs_follow_prints_what_is_appended() {
    use std::io::{BufRead, BufReader, Write};
    let world = World::new(&[Advisor::new("alpha", "supports", 0)]);
    std::fs::create_dir_all(world.data()).unwrap();
    let log = world.data().join("advisord.log");
    std::fs::write(&log, "one\ntwo\nthree\n").unwrap();
    let mut child = world
        .command(&["daemon", "logs", "-n", "2", "--follow"])
        .spawn()
        .expect("spawn daemon logs --follow");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a line within 10 s")
    };
    assert_eq!(next(), "two");
    assert_eq!(next(), "three");
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(file, "four").unwrap();
    assert_eq!(next(), "four");
    crate::support::client::stop_child(&mut child);
}
