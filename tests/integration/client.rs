//! `advisor-consult` against a real `advisord`: autostart, the job verbs, live progress,
//! Ctrl-C, and the demo. Each test has its own socket, data directory and project, and
//! stops every daemon it started.

use crate::support::client as client_support;

use client_support::{answers, lines, wait_bounded, Advisor, World, RUN_BOUND};
use std::time::{Duration, Instant};

fn two_quick() -> Vec<Advisor> {
    vec![
        Advisor::new("quick-agree", "supports", 200),
        Advisor::new("quick-oppose", "opposes", 200),
    ]
}

fn two_slow() -> Vec<Advisor> {
    vec![
        Advisor::new("slow-one", "supports", 20_000),
        Advisor::new("slow-two", "supports", 20_000),
    ]
}

#[test]
fn autostart_starts_the_sibling_daemon_on_a_cold_socket() {
    let world = World::new(&two_quick());
    assert!(!world.socket().exists());
    world
        .run(&["jobs"])
        .expect_exit(0)
        .expect_stderr("started advisord")
        .expect_stdout("no jobs for this root");
    assert!(answers(&world.socket()), "the autostarted daemon answers");
    let pid = world.daemon_pid().expect("the daemon wrote its pid file");
    // The next call finds it and starts nothing.
    let again = world.run(&["jobs"]).expect_exit(0);
    assert!(!again.stderr.contains("started"), "{}", again.stderr);
    assert_eq!(world.daemon_pid(), Some(pid));
}

#[test]
fn a_stale_socket_is_replaced_by_autostart() {
    let world = World::new(&two_quick());
    drop(std::os::unix::net::UnixListener::bind(world.socket()).expect("bind"));
    assert!(world.socket().exists() && !answers(&world.socket()));
    world
        .run(&["jobs", "--format", "json"])
        .expect_exit(0)
        .expect_stderr("started advisord");
    assert!(answers(&world.socket()));
}

#[test]
fn no_autostart_without_a_daemon_exits_4_and_says_what_to_do() {
    let world = World::new(&two_quick());
    let socket = world.socket().display().to_string();
    for args in [
        &["jobs", "--no-autostart"][..],
        &["wait", "01J", "--no-autostart"][..],
    ] {
        world
            .run(args)
            .expect_exit(4)
            .expect_stderr(&socket)
            .expect_stderr("`--no-autostart` is set")
            .expect_stderr("advisord --detach");
    }
    assert!(!world.socket().exists(), "nothing was started");
    assert_eq!(world.daemon_pid(), None);
}

#[test]
fn job_verbs_refuse_no_daemon_as_usage() {
    let world = World::new(&two_quick());
    for args in [&["jobs"][..], &["wait", "01J"][..], &["cancel", "01J"][..]] {
        let mut with_flag = vec!["--no-daemon"];
        with_flag.extend_from_slice(args);
        world
            .run(&with_flag)
            .expect_exit(2)
            .expect_stderr("needs the daemon")
            .expect_stderr("drop `--no-daemon`");
    }
    assert!(!world.socket().exists());
}

#[test]
fn detach_then_wait_then_jobs() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let assessment = world.assessment();
    let plain = world
        .run(&["--assessment", &assessment, "--detach"])
        .expect_exit(0);
    let id = plain.stdout.trim().to_string();
    assert_eq!(id.len(), 26, "the job id alone: {:?}", plain.stdout);
    let json = world
        .run(&["--assessment", &assessment, "--detach", "--format", "json"])
        .expect_exit(0)
        .json();
    let second = json["id"].as_str().expect("{\"id\": ...}").to_string();
    assert_eq!(json["assessment"], assessment.as_str(), "{json}");
    assert_eq!(json.as_object().map(|o| o.len()), Some(2), "{json}");

    let waited = world
        .run(&["wait", &id])
        .expect_exit(0)
        .expect_stdout(&format!("job {id} done: 2 of 2 advisors completed"))
        .expect_stdout("quick-agree: completed, supports")
        .expect_stdout("quick-oppose: completed, opposes")
        .expect_stdout("disagreement ");
    assert!(
        waited.stderr.contains(&format!("job {id} done")),
        "{}",
        waited.stderr
    );
    let job = world
        .run(&["wait", &second, "--timeout", "20", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(job["state"], "done");
    assert_eq!(job["consultations"][0]["advisor"], "quick-agree");
    assert_eq!(job["consultations"][1]["status"], "completed");
    assert!(job["disagreement"].is_string(), "{job}");

    let list = world
        .run(&["jobs", "--format", "json"])
        .expect_exit(0)
        .json();
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [id.as_str(), second.as_str()]);
    world
        .run(&["jobs"])
        .expect_exit(0)
        .expect_stdout(&format!("{id}  done"))
        .expect_stdout("2/2 completed");
}

#[test]
fn wait_runs_out_with_exit_5_then_cancel_stops_the_job() {
    let mut world = World::new(&two_slow());
    world.start_daemon();
    let assessment = world.assessment();
    let id = world
        .run(&["--assessment", &assessment, "--detach"])
        .expect_exit(0)
        .stdout
        .trim()
        .to_string();
    let started = Instant::now();
    world
        .run(&["wait", &id, "--timeout", "0.2"])
        .expect_exit(5)
        .expect_stderr(&format!("job {id} has not ended after 0.2 s"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the wait returned in {:?}",
        started.elapsed()
    );
    world
        .run(&["cancel", &id])
        .expect_exit(0)
        .expect_stdout(&format!("job {id} cancelled"));
    world
        .run(&["cancel", &id])
        .expect_exit(2)
        .expect_stderr("already ended");
    let job = world
        .run(&["wait", &id, "--format", "json"])
        .expect_exit(1)
        .json();
    assert_eq!(job["state"], "cancelled");
    world
        .run(&["wait", "01JNOSUCHJOB00000000000000"])
        .expect_exit(2)
        .expect_stderr("no job `01JNOSUCHJOB00000000000000`");
}

#[test]
fn ctrl_c_cancels_the_job_and_exits_130() {
    let mut world = World::new(&two_slow());
    world.start_daemon();
    let assessment = world.assessment();
    let (mut child, seen, stderr, job) = consult_until_asked(&world, &assessment);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let code = wait_bounded(
        &mut child,
        Duration::from_secs(15),
        "the interrupted client",
    );
    let rest: Vec<String> = stderr.try_iter().collect();
    assert_eq!(code, 130, "stderr: {seen:#?} {rest:#?}");
    assert!(
        rest.iter()
            .any(|l| l.contains(&format!("cancelling job {job}"))),
        "{rest:#?}"
    );
    let state = world
        .run(&["jobs", "--format", "json"])
        .expect_exit(0)
        .json();
    assert_eq!(state["jobs"][0]["id"], job.as_str());
    assert_eq!(state["jobs"][0]["state"], "cancelled", "{state}");
}

/// Start `--assessment` on slow advisors and wait until both are being asked; the
/// client, its standard error lines so far and the rest to come, and the job id.
fn consult_until_asked(
    world: &World,
    assessment: &str,
) -> (
    std::process::Child,
    Vec<String>,
    std::sync::mpsc::Receiver<String>,
    String,
) {
    let mut child = world
        .command(&["--assessment", assessment])
        .spawn()
        .expect("spawn");
    let stderr = lines(child.stderr.take().expect("stderr"));
    let mut seen = Vec::new();
    let deadline = Instant::now() + RUN_BOUND;
    while seen
        .iter()
        .filter(|l: &&String| l.contains(": asked"))
        .count()
        < 2
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match stderr.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("the advisors were never asked; stderr so far: {seen:#?}"),
        }
    }
    let job = seen
        .iter()
        .find_map(|l| {
            l.split("job ")
                .nth(1)?
                .split(' ')
                .next()
                .map(str::to_string)
        })
        .expect("the queued line names the job");
    (child, seen, stderr, job)
}

#[test]
fn a_daemon_stopping_mid_job_exits_4_and_says_how_to_follow_it() {
    let mut world = World::new(&two_slow());
    world.start_daemon();
    let assessment = world.assessment();
    let (mut child, _, stderr, job) = consult_until_asked(&world, &assessment);
    world.stop_daemons();
    let code = wait_bounded(&mut child, Duration::from_secs(15), "the orphaned client");
    let rest: Vec<String> = stderr.try_iter().collect();
    assert_eq!(code, 4, "{rest:#?}");
    let said = rest.join("\n");
    assert!(
        said.contains(&format!("the daemon stopped while job {job} was running")),
        "{said}"
    );
    assert!(
        said.contains(&format!("advisor-consult wait {job}")),
        "{said}"
    );
}

#[test]
fn progress_is_one_line_per_event_off_a_terminal() {
    let mut world = World::new(&two_quick());
    world.start_daemon();
    let assessment = world.assessment();
    let out = world.run(&["--assessment", &assessment]).expect_exit(0);
    let lines: Vec<&str> = out.stderr.lines().collect();
    let position = |fragment: &str| {
        lines
            .iter()
            .position(|l| l.contains(fragment))
            .unwrap_or_else(|| panic!("no progress line with {fragment:?}: {lines:#?}"))
    };
    let queued = position("queued (assessment");
    let plan = position("2 advisors asked at once");
    let asked = position("quick-agree: asked");
    let answered = position("quick-agree: answered in");
    let recorded = position("quick-agree: recorded consultation");
    let disagreement = position("recorded: an advisor diverges");
    let done = position(" done after ");
    assert!(
        queued < plan && plan < asked && asked < answered,
        "{lines:#?}"
    );
    assert!(answered < recorded && recorded < disagreement && disagreement < done);
    // Every line is stamped with the seconds since the job was queued; no escape codes.
    assert!(
        lines.iter().all(|l| l
            .trim_start()
            .split("s  ")
            .next()
            .is_some_and(|stamp| stamp.parse::<f64>().is_ok())),
        "{lines:#?}"
    );
    assert!(!out.stderr.contains('\x1b'), "{}", out.stderr);
    assert!(
        out.stdout.contains("1. quick-agree: completed, supports"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_job_where_no_selected_advisor_completes_exits_1() {
    let mut world = World::new(&[Advisor::new("broken", "supports", 0).failing(3)]);
    world.start_daemon();
    let assessment = world.assessment();
    world
        .run(&["--assessment", &assessment])
        .expect_exit(1)
        .expect_stdout("broken: failed: error")
        .expect_stderr("none of them completed");
}

#[test]
fn demo_runs_to_completion_and_shows_the_disagreement() {
    let world = World::new(&[]);
    let started = Instant::now();
    let out = world.run(&["demo"]).expect_exit(0);
    for fragment in [
        "2 advisors asked at once",
        "demo-agree: completed, supports",
        "demo-oppose: completed, opposes",
        "The disagreement",
        "refused (unresolved_disagreement)",
        "recorded resolution",
        "reviewed by: 2 independent (demo-agree, demo-oppose)",
        "concluded assessment",
        "├─ plan",
        "(`advisor-consult demo --keep` keeps it)",
    ] {
        assert!(
            out.stdout.contains(fragment),
            "no {fragment:?} in:\n{}",
            out.stdout
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(
        out.stdout.lines().all(|l| l.chars().count() <= 80),
        "a line is wider than 80 columns:\n{}",
        out.stdout
    );
    let left: Vec<_> = std::fs::read_dir(world.tmp()).expect("tmp").collect();
    assert!(left.is_empty(), "the demo left {left:?}");
}

#[test]
fn an_autostarted_daemon_keeps_its_data_directory_private() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new(&two_quick());
    assert!(!world.data().exists(), "the autostart creates it");
    let assessment = world.assessment();
    let id = world
        .run(&["--assessment", &assessment, "--detach"])
        .expect_exit(0)
        .stdout
        .trim()
        .to_string();
    world.run(&["wait", &id]).expect_exit(0);
    // The journal, the log, the pid and the lock hold question text and paths: the user's
    // alone, the directories `0700` and every file `0600`.
    let mode = |path: &std::path::Path| {
        std::fs::symlink_metadata(path)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    };
    let mut seen = Vec::new();
    let mut dirs = vec![world.data()];
    while let Some(dir) = dirs.pop() {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        for entry in std::fs::read_dir(&dir).expect("read the data directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                assert_eq!(mode(&path), 0o600, "{}", path.display());
                seen.push(path.file_name().unwrap().to_string_lossy().to_string());
            }
        }
    }
    for wanted in [
        "advisord.log",
        "advisord.pid",
        "advisord.lock",
        &format!("{id}.json"),
    ] {
        assert!(seen.iter().any(|s| s == wanted), "{wanted}: {seen:?}");
    }
}
