//! Contract cases of the process adapter, through `fake-advisor`: the table row, then what
//! only a process can do wrong (grandchildren, SIGTERM ignored, floods, bad bytes, the
//! environment), the shipped catalogue's CLI entries against the fake drop-in CLIs, the
//! preflight, and settings validation.

use crate::{
    advisor, check, Case, Expect, Rig, Scenario, Setup, ANSWER, LONG_TIMEOUT, MALFORMED_ANSWER,
    PROMPT, SLOW_DELAY, USAGE,
};
use advisord_adapters::contract::{
    consult, env_from_map, Adapter, AdvisorSpec, FailureKind, Io, Outcome,
};
use advisord_adapters::normalise::normalise;
use advisord_adapters::process::env::BASE_VARS;
use advisord_adapters::process::{contain, preflight, ProcessAdapter, ProcessConfig};
use advisord_adapters::registry::Registry;
use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------
// The fake and its surroundings.

/// `fake-advisor`: cargo builds a dependency's library for a test, never its binaries, so
/// the one a workspace build made is used, or it is built here when missing or older than
/// its sources.
pub(crate) fn fake_advisor() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace root");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let binary = target.join("debug").join("fake-advisor");
        // A workspace test run (`cargo nextest run --workspace`, `cargo test --workspace`)
        // has just built it, with the workspace's features: use that one. Building it again
        // here with this package's features would rebuild shared dependencies inside a
        // test's time limit, once per test process.
        if !built_after_its_sources(&binary, workspace) {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            let status = std::process::Command::new(cargo)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "advisord-fakes",
                    "--bin",
                    "fake-advisor",
                ])
                .current_dir(workspace)
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building fake-advisor failed");
        }
        binary
    })
}

/// Whether `binary` exists and is newer than every source it is built from (the fakes,
/// the adapters they link, the lock file).
fn built_after_its_sources(binary: &Path, workspace: &Path) -> bool {
    fn newest(path: &Path, newest_seen: &mut std::time::SystemTime) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                newest(&entry.path(), newest_seen);
            }
        } else if let Ok(modified) = meta.modified() {
            *newest_seen = (*newest_seen).max(modified);
        }
    }
    let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
        return false;
    };
    let mut sources = std::time::SystemTime::UNIX_EPOCH;
    for part in [
        "fakes/src",
        "fakes/Cargo.toml",
        "adapters/src",
        "adapters/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        newest(&workspace.join(part), &mut sources);
    }
    built >= sources
}

/// A temporary directory holding `fake-advisor` under the names of the real CLIs, to be
/// the asking process's `PATH`.
fn drop_in_dir() -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    for name in ["codex", "gemini", "claude", "fake-advisor"] {
        std::os::unix::fs::symlink(fake_advisor(), dir.path().join(name)).expect("a symlink");
    }
    dir
}

fn adapter() -> Arc<dyn Adapter> {
    Registry::builtin()
        .get("process")
        .expect("`process` is registered")
}

/// An advisor running `fake-advisor` (by absolute path) with `args`.
fn fake(id: &str, args: &[&str]) -> AdvisorSpec {
    fake_with(id, json!({ "args": args }))
}

fn fake_with(id: &str, settings: Value) -> AdvisorSpec {
    AdvisorSpec {
        executable: Some(fake_advisor().display().to_string()),
        ..advisor(id, "process", settings)
    }
}

/// The asking environment of most cases: a `PATH` with nothing on it and a scratch `PWD`.
fn scratch_env(setup: Setup, dir: &TempDir) -> Setup {
    let path = dir.path().display().to_string();
    setup.env("PATH", &path).env("PWD", &path)
}

fn io_for(env: &BTreeMap<String, String>, timeout: Duration) -> Io {
    Io {
        deadline: tokio::time::Instant::now() + timeout,
        cancel: CancellationToken::new(),
        env: env_from_map(env.clone()),
        http: reqwest::Client::new(),
    }
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The pid written to `file`, waited for with a bound.
fn pid_in(file: &Path) -> Option<i32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// A probe that is true once the grandchild whose pid `file` holds is dead.
fn grandchild_gone(file: PathBuf) -> impl Fn() -> bool + Send + Sync + 'static {
    move || pid_in(&file).is_some_and(|pid| !alive(pid))
}

async fn poll_until(what: &str, bound: Duration, probe: impl Fn() -> bool) {
    let until = Instant::now() + bound;
    while !probe() {
        assert!(Instant::now() < until, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------
// The table row.

/// The process adapter through the table, `fake-advisor` playing every scenario.
pub struct ProcessRig;

impl Rig for ProcessRig {
    fn prepare(&self, scenario: Scenario) -> BoxFuture<'_, Setup> {
        Box::pin(async move {
            let dir = tempfile::tempdir().expect("a temp dir");
            let pid_file = dir.path().join("grandchild.pid");
            let pid_arg = pid_file.display().to_string();
            let delay = SLOW_DELAY.as_millis().to_string();
            let hang = [
                "--grandchild",
                "--pid-file",
                pid_arg.as_str(),
                "--ignore-term",
                "--hang",
            ];
            let patterns = json!({
                "auth_failed": ["not logged in"],
                "rate_limited": ["429 Too Many Requests"],
            });
            let settings = |args: &[&str]| json!({ "args": args, "failure_patterns": patterns });
            let spec = match scenario {
                Scenario::Answer => fake_with("fake-answer", settings(&["--answer", ANSWER])),
                Scenario::SlowAnswer => fake_with(
                    "fake-slow",
                    settings(&["--delay-ms", &delay, "--answer", ANSWER]),
                ),
                Scenario::Empty => fake_with("fake-empty", settings(&["--stdout", "  "])),
                Scenario::Malformed => {
                    fake_with("fake-malformed", settings(&["--answer", MALFORMED_ANSWER]))
                }
                Scenario::RateLimited => fake_with(
                    "fake-rate-limited",
                    settings(&["--stderr", "Error: 429 Too Many Requests", "--exit", "1"]),
                ),
                Scenario::AuthFailed => {
                    fake_with("fake-auth", settings(&["--mimic", "claude-no-login"]))
                }
                // Not on the asking process's PATH.
                Scenario::Unavailable => AdvisorSpec {
                    executable: Some("advisord-no-such-advisor".to_string()),
                    ..advisor("fake-missing", "process", json!({}))
                },
                Scenario::Error => {
                    fake_with("fake-error", settings(&["--stderr", "boom", "--exit", "3"]))
                }
                Scenario::Deadline | Scenario::Cancellation => {
                    fake_with("fake-hang", settings(&hang))
                }
            };
            let stopped = matches!(scenario, Scenario::Deadline | Scenario::Cancellation);
            let setup = Setup::new(adapter(), spec)
                .reports_usage(false)
                .reports_retry_after(false);
            let setup = scratch_env(setup, &dir);
            let setup = if stopped {
                setup.released(grandchild_gone(pid_file))
            } else {
                setup
            };
            setup.keep(dir)
        })
    }
}

contract_rig!(process, ProcessRig);

// ---------------------------------------------------------------------------------------
// Processes behaving badly.

fn completed_with_answer() -> Expect {
    Expect::Completed {
        fields: normalise(ANSWER).expect("the canonical answer reads"),
        usage: None,
    }
}

fn failed(kind: FailureKind, phrase: &str) -> Expect {
    Expect::Failed {
        kind,
        retry_after_s: None,
        diagnostic_contains: Some(phrase.to_string()),
    }
}

fn case(timeout: Duration, expect: Expect) -> Case {
    Case {
        timeout,
        cancel_after: None,
        expect,
    }
}

async fn run_fake(name: &str, spec: AdvisorSpec, timeout: Duration, expect: Expect) -> Outcome {
    let dir = tempfile::tempdir().expect("a temp dir");
    let setup = scratch_env(Setup::new(adapter(), spec), &dir).keep(dir);
    check(name, setup, case(timeout, expect)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_and_signals_decide_the_kind_when_no_pattern_matches() {
    let rows: [(&str, &[&str], Expect); 4] = [
        (
            "exit 3",
            &["--stderr", "first", "--stderr", "last words", "--exit", "3"],
            failed(FailureKind::Error, "exited with status 3: last words"),
        ),
        (
            "exit 1 with only stdout",
            &["--stdout", "said on stdout", "--exit", "1"],
            failed(FailureKind::Error, "said on stdout"),
        ),
        (
            "a signal we did not send",
            &["--stderr", "about to crash", "--signal-self"],
            failed(FailureKind::Error, "killed by SIGUSR1"),
        ),
        (
            "exit 0, nothing printed",
            &[],
            Expect::failed(FailureKind::Empty),
        ),
    ];
    for (name, args, expect) in rows {
        run_fake(name, fake("fake-exit", args), LONG_TIMEOUT, expect).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_match_stderr_and_stdout_case_insensitively_in_kind_order() {
    let patterns = json!({
        "unavailable": ["connection refused"],
        "auth_failed": ["NOT LOGGED IN"],
        "rate_limited": ["status 429"],
    });
    let rows: [(&str, &[&str], FailureKind, &str); 4] = [
        (
            "stderr",
            &["--stderr", "Error: connection refused", "--exit", "1"],
            FailureKind::Unavailable,
            "connection refused",
        ),
        (
            "stdout",
            &[
                "--stdout",
                "Not logged in · Please run /login",
                "--exit",
                "1",
            ],
            FailureKind::AuthFailed,
            "Not logged in",
        ),
        // Both match: auth_failed comes before unavailable, whatever the map's order.
        (
            "both",
            &[
                "--stderr",
                "connection refused",
                "--stdout",
                "not logged in",
                "--exit",
                "2",
            ],
            FailureKind::AuthFailed,
            "not logged in",
        ),
        (
            "the matching line, not the last",
            &[
                "--stderr",
                "Attempt 1 failed with status 429",
                "--stderr",
                "    at retry (x.js:1:2)",
                "--exit",
                "1",
            ],
            FailureKind::RateLimited,
            "status 429",
        ),
    ];
    for (name, args, kind, phrase) in rows {
        let spec = fake_with(
            "fake-patterns",
            json!({ "args": args, "failure_patterns": patterns }),
        );
        run_fake(name, spec, LONG_TIMEOUT, failed(kind, phrase)).await;
    }
    // On exit 0 patterns do not apply: an answer may discuss rate limits.
    let spec = fake_with(
        "fake-patterns",
        json!({
            "args": ["--stderr", "status 429", "--answer", ANSWER],
            "failure_patterns": patterns,
        }),
    );
    run_fake("exit 0", spec, LONG_TIMEOUT, completed_with_answer()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_holding_the_pipes_is_killed_when_the_leader_answers() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pid_file = dir.path().join("grandchild.pid");
    let pid_arg = pid_file.display().to_string();
    let spec = fake(
        "fake-grandchild",
        &["--grandchild", "--pid-file", &pid_arg, "--answer", ANSWER],
    );
    let setup = scratch_env(Setup::new(adapter(), spec), &dir)
        .released(grandchild_gone(pid_file.clone()))
        .keep(dir);
    let started = Instant::now();
    check(
        "grandchild",
        setup,
        case(LONG_TIMEOUT, completed_with_answer()),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the answer waited for the grandchild: {:?}",
        started.elapsed()
    );
}

/// A grandchild that calls `setsid` leaves the process group, so the group's kill misses
/// it; with the daemon a child subreaper, it is re-parented to the daemon when its parent
/// dies and killed with the exchange (it carries the exchange's marker), after an answer
/// and at the deadline alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_that_calls_setsid_does_not_outlive_the_exchange() {
    contain::become_subreaper().expect("PR_SET_CHILD_SUBREAPER");
    for hang in [false, true] {
        let dir = tempfile::tempdir().expect("a temp dir");
        let pid_file = dir.path().join("grandchild.pid");
        let pid_arg = pid_file.display().to_string();
        let mut args = vec!["--grandchild", "--setsid", "--pid-file", &pid_arg];
        let (timeout, expect) = if hang {
            args.push("--hang");
            (
                Duration::from_millis(800),
                Expect::failed(FailureKind::Timeout),
            )
        } else {
            args.extend(["--answer", ANSWER]);
            (LONG_TIMEOUT, completed_with_answer())
        };
        let spec = fake("fake-setsid", &args);
        let setup = scratch_env(Setup::new(adapter(), spec), &dir)
            .released(grandchild_gone(pid_file.clone()))
            .keep(dir);
        check("setsid grandchild", setup, case(timeout, expect)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_ignoring_sigterm_is_killed_after_the_grace() {
    let grace = Duration::from_millis(300);
    let adapter = ProcessAdapter::new(ProcessConfig {
        term_grace: grace,
        ..ProcessConfig::default()
    });
    let dir = tempfile::tempdir().expect("a temp dir");
    let pid_file = dir.path().join("grandchild.pid");
    let pid_arg = pid_file.display().to_string();
    for ignore_term in [true, false] {
        let mut args = vec!["--grandchild", "--pid-file", &pid_arg, "--hang"];
        if ignore_term {
            args.push("--ignore-term");
        }
        let spec = fake("fake-term", &args);
        let env = BTreeMap::from([("PATH".to_string(), "/nonexistent".to_string())]);
        let timeout = Duration::from_millis(400);
        let io = io_for(&env, timeout);
        let started = Instant::now();
        let result = adapter.exchange(&spec, PROMPT, &io).await;
        let reported = started.elapsed().saturating_sub(timeout);
        let failure = result.expect_err("a hang fails");
        assert_eq!(failure.kind, FailureKind::Timeout, "{failure:?}");
        // The report does not wait for the stop: what was printed by the deadline is it.
        assert!(
            reported < Duration::from_millis(100),
            "the report waited {reported:?} for the stop"
        );
        let pid = pid_in(&pid_file).expect("the grandchild wrote its pid");
        // SIGTERM at the deadline, SIGKILL after the grace: death follows within moments.
        poll_until("the grandchild dies", Duration::from_secs(2), || {
            !alive(pid)
        })
        .await;
        let stop = started.elapsed().saturating_sub(timeout);
        if ignore_term {
            assert!(
                stop >= grace - Duration::from_millis(20)
                    && stop < grace + Duration::from_millis(400),
                "SIGKILL came {stop:?} after the deadline; the grace is {grace:?}"
            );
        } else {
            assert!(
                stop < grace,
                "a process obeying SIGTERM waited the grace: {stop:?}"
            );
        }
        let _ = std::fs::remove_file(&pid_file);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_capped_and_drained() {
    let cap = 64 * 1024;
    let adapter = ProcessAdapter::new(ProcessConfig {
        output_cap: cap,
        ..ProcessConfig::default()
    });
    let env = BTreeMap::from([("PATH".to_string(), "/nonexistent".to_string())]);
    // 16 MiB on each stream: the process is drained to its end (it exits 0, not on a
    // broken pipe) and only the cap is kept.
    let spec = fake(
        "fake-flood",
        &["--flood", "16777216", "--flood-stderr", "16777216"],
    );
    let answer = adapter
        .exchange(&spec, PROMPT, &io_for(&env, LONG_TIMEOUT))
        .await
        .expect("a flood that exits 0 is an answer text");
    assert_eq!(answer.text.len(), cap, "kept exactly the cap");
    assert!(answer.text.bytes().all(|b| b == b'x'));

    let spec = fake("fake-flood", &["--flood-stderr", "16777216", "--exit", "1"]);
    let failure = adapter
        .exchange(&spec, PROMPT, &io_for(&env, LONG_TIMEOUT))
        .await
        .expect_err("exit 1 fails");
    assert_eq!(failure.kind, FailureKind::Error);
    assert!(
        failure.diagnostic.chars().count() <= 300,
        "{}",
        failure.diagnostic.len()
    );

    // Through the contract: a flooded answer has no conclusion.
    let spec = fake("fake-flood", &["--flood", "4194304"]);
    run_fake(
        "flood",
        spec,
        LONG_TIMEOUT,
        Expect::failed(FailureKind::Malformed),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_ansi_are_cleaned_from_answers_and_diagnostics() {
    let spec = fake(
        "fake-bytes",
        &["--invalid-utf8", "--ansi", "--answer", ANSWER],
    );
    run_fake("answer", spec, LONG_TIMEOUT, completed_with_answer()).await;

    let spec = fake(
        "fake-bytes",
        &[
            "--invalid-utf8",
            "--ansi",
            "--stderr",
            "it broke",
            "--exit",
            "1",
        ],
    );
    let outcome = run_fake(
        "diagnostic",
        spec,
        LONG_TIMEOUT,
        failed(FailureKind::Error, "it broke"),
    )
    .await;
    let diagnostic = outcome.result.expect_err("failed").diagnostic;
    assert!(
        !diagnostic.contains("[1;31m") && !diagnostic.contains("[0m"),
        "{diagnostic:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_goes_to_stdin_or_into_the_prompt_argument() {
    let conclusion = |outcome: Outcome| outcome.result.expect("an answer").conclusion;
    let env = BTreeMap::from([("PATH".to_string(), "/nonexistent".to_string())]);
    let ask = |spec: AdvisorSpec| {
        let env = env.clone();
        async move {
            let io = io_for(&env, LONG_TIMEOUT);
            consult(adapter().as_ref(), &spec, PROMPT, &io).await
        }
    };
    let via_stdin = conclusion(ask(fake("fake-echo", &["--echo-prompt"])).await);
    assert_eq!(via_stdin, format!("prompt via stdin: {PROMPT}"));

    let via_arg = conclusion(
        ask(fake(
            "fake-echo",
            &["--echo-prompt", "--prompt", "{prompt}"],
        ))
        .await,
    );
    assert_eq!(via_arg, format!("prompt via argument: {PROMPT}"));

    // With the prompt in an argument, standard input is closed empty.
    let spec = fake(
        "fake-echo",
        &["--echo-prompt", "--stderr", "asked: {prompt}"],
    );
    assert_eq!(conclusion(ask(spec).await), "prompt via stdin:");

    // `{prompt}` inside a longer argument is substituted in place.
    let via_arg = conclusion(
        ask(fake(
            "fake-echo",
            &["--echo-prompt", "--prompt", "Q: {prompt} (json)"],
        ))
        .await,
    );
    assert_eq!(via_arg, format!("prompt via argument: Q: {PROMPT} (json)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_minimal_and_explicit() {
    let spec = AdvisorSpec {
        credential: Some("ADVISOR_TOKEN".to_string()),
        ..fake_with(
            "fake-env",
            json!({
                "args": ["--echo-env"],
                "env": { "EXTRA_SETTING": "1", "TERM": "xterm" },
                "pass_env": ["CLI_KEY", "CLI_UNSET"],
            }),
        )
    };
    let asking: BTreeMap<String, String> = [
        ("PATH", "/nonexistent"),
        ("HOME", "/home/asker"),
        ("ADVISOR_TOKEN", "t0ken"),
        ("CLI_KEY", "k3y"),
        ("SECRET_OF_THE_SHELL", "do not pass"),
        ("ADVISORD_MODE", "strict"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let io = io_for(&asking, LONG_TIMEOUT);
    let outcome = consult(adapter().as_ref(), &spec, PROMPT, &io).await;
    let conclusion = outcome.result.expect("an answer").conclusion;
    let names: BTreeSet<String> = conclusion
        .trim_start_matches("environment: ")
        .split(", ")
        .map(str::to_string)
        .collect();
    let mut expected: BTreeSet<String> = [
        "PATH",
        "HOME",
        "TERM",
        "NO_COLOR",
        "ADVISOR_TOKEN",
        "CLI_KEY",
        "EXTRA_SETTING",
        contain::MARKER,
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    // The daemon's own HOME, LANG, XDG_* ... fill what the asker did not send.
    for name in BASE_VARS {
        if std::env::var(name).is_ok_and(|v| !v.is_empty()) {
            expected.insert((*name).to_string());
        }
    }
    assert_eq!(names, expected, "the advisor's environment");
    assert!(!names.contains("SECRET_OF_THE_SHELL") && !names.contains("ADVISORD_MODE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_output_is_read_from_the_selected_line() {
    let result = |is_error: bool, text: &str| {
        json!({"type": "result", "is_error": is_error, "result": text,
               "usage": {"input_tokens": 12, "output_tokens": 34}})
        .to_string()
    };
    let settings = |lines: Vec<String>, exit: &str| {
        let mut args: Vec<String> = Vec::new();
        for line in lines {
            args.push("--stdout".into());
            args.push(line);
        }
        args.extend(["--exit".to_string(), exit.to_string()]);
        json!({
            "args": args,
            "output": {"format": "json_lines", "select": {"type": "result"}, "text": "result",
                       "error": "is_error", "input_tokens": "usage.input_tokens",
                       "output_tokens": "usage.output_tokens"},
            "failure_patterns": {"rate_limited": ["quota is gone"]},
        })
    };
    let progress = json!({"type": "system", "subtype": "init"}).to_string();
    let rows: [(&str, Vec<String>, &str, Expect); 5] = [
        (
            "the answer and its usage",
            vec![progress.clone(), result(false, ANSWER)],
            "0",
            Expect::Completed {
                fields: normalise(ANSWER).expect("reads"),
                usage: Some(USAGE),
            },
        ),
        (
            "an error flagged with exit 0: patterns on the reported text",
            vec![
                progress.clone(),
                result(true, "API Error: the quota is gone"),
            ],
            "0",
            failed(FailureKind::RateLimited, "quota is gone"),
        ),
        (
            "an error reported with exit 1: the reported text is the diagnostic",
            vec![progress.clone(), result(true, "something odd happened")],
            "1",
            failed(FailureKind::Error, "status 1: something odd happened"),
        ),
        (
            "no line selected",
            vec![progress.clone(), "plain text".to_string()],
            "0",
            failed(FailureKind::Malformed, "no line of standard output"),
        ),
        (
            "nothing printed",
            vec![],
            "0",
            Expect::failed(FailureKind::Empty),
        ),
    ];
    for (name, lines, exit, expect) in rows {
        let spec = fake_with("fake-json-lines", settings(lines, exit));
        run_fake(name, spec, LONG_TIMEOUT, expect).await;
    }
}

// ---------------------------------------------------------------------------------------
// The shipped catalogue's CLI entries against the fake drop-in CLIs.

/// The shipped catalogue entry `id`, with `extra_env` added to its `env` setting (the fake
/// drop-ins read their script from there: the advisor's environment is otherwise closed).
fn shipped(id: &str, extra_env: &[(&str, &str)]) -> AdvisorSpec {
    let file: Map<String, Value> =
        serde_yaml_ng::from_str(include_str!("../../../share/advisors.yaml")).expect("parses");
    let entry = file["advisors"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(Value::as_object)
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("`{id}` is in the shipped catalogue"))
        .clone();
    let mut spec = AdvisorSpec::from_mapping(&entry);
    let env = spec
        .settings
        .entry("env")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("`env` is a map");
    env.insert("FAKE_ADVISOR_RETRY_MS".into(), json!("40"));
    for (name, value) in extra_env {
        env.insert((*name).to_string(), json!(value));
    }
    spec
}

struct CliRow {
    name: &'static str,
    advisor: &'static str,
    /// Variables in the asking process's environment (credentials).
    asking: &'static [(&'static str, &'static str)],
    /// Added to the entry's `env` (the fake's script).
    script: &'static [(&'static str, &'static str)],
    /// Settings removed from the entry: a key, or `args:ELEMENT` for one argument.
    without: &'static [&'static str],
    timeout: Duration,
    expect: Expect,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_cli_entries_classify_the_clis_credential_less_behaviour() {
    let short = Duration::from_millis(1500);
    let answered_with_usage = Expect::Completed {
        fields: normalise(ANSWER).expect("reads"),
        usage: Some(USAGE),
    };
    let rows = [
        CliRow {
            name: "codex, not logged in: the preflight says so",
            advisor: "codex-cli",
            asking: &[],
            script: &[],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::NotConfigured, "Not logged in"),
        },
        CliRow {
            // The asker set none of its credential variables: that asker's
            // `not_configured`, which the circuit never counts (an agent host may have
            // withheld the key). With the key named in the entry's own `env`, the refusal
            // is the advisor's.
            name: "codex, not logged in though the entry's env names its key: auth_failed",
            advisor: "codex-cli",
            asking: &[],
            script: &[("CODEX_API_KEY", "k")],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::AuthFailed, "Not logged in"),
        },
        CliRow {
            name: "codex, a key but no network: lookup retries until the deadline",
            advisor: "codex-cli",
            asking: &[("CODEX_API_KEY", "k")],
            script: &[],
            without: &[],
            timeout: short,
            expect: failed(FailureKind::Unavailable, "failed to lookup address"),
        },
        CliRow {
            name: "codex answers, with usage from turn.completed",
            advisor: "codex-cli",
            asking: &[("CODEX_API_KEY", "k")],
            script: &[("FAKE_ADVISOR_ANSWER", ANSWER)],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: answered_with_usage.clone(),
        },
        CliRow {
            name: "codex without --skip-git-repo-check",
            advisor: "codex-cli",
            asking: &[("CODEX_API_KEY", "k")],
            script: &[],
            without: &["args:--skip-git-repo-check"],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::Error, "Not inside a trusted directory"),
        },
        CliRow {
            name: "gemini, no auth: exit 41",
            advisor: "gemini-cli",
            asking: &[],
            script: &[],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::NotConfigured, "Please set an Auth method"),
        },
        CliRow {
            name: "gemini, a key but no network: fetch retries until the deadline",
            advisor: "gemini-cli",
            asking: &[("GEMINI_API_KEY", "k")],
            script: &[],
            without: &[],
            timeout: short,
            expect: failed(FailureKind::Unavailable, "fetch failed"),
        },
        CliRow {
            name: "gemini, rate limited: 429 retries until the deadline",
            advisor: "gemini-cli",
            asking: &[("GEMINI_API_KEY", "k")],
            script: &[("FAKE_ADVISOR_RATE_LIMITED", "1")],
            without: &[],
            timeout: short,
            expect: failed(FailureKind::RateLimited, "RESOURCE_EXHAUSTED"),
        },
        CliRow {
            name: "gemini, untrusted folder: exit 55",
            advisor: "gemini-cli",
            asking: &[("GEMINI_API_KEY", "k")],
            script: &[],
            without: &["env"],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::Error, "status 55"),
        },
        CliRow {
            name: "gemini answers, with usage summed over its models",
            advisor: "gemini-cli",
            asking: &[("GEMINI_API_KEY", "k")],
            script: &[("FAKE_ADVISOR_ANSWER", ANSWER)],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: answered_with_usage.clone(),
        },
        CliRow {
            name: "claude, not logged in: the preflight says so",
            advisor: "claude-cli",
            asking: &[],
            script: &[],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::NotConfigured, "Not logged in"),
        },
        CliRow {
            name: "claude, not logged in, no preflight: stdout says so",
            advisor: "claude-cli",
            asking: &[],
            script: &[],
            without: &["preflight"],
            timeout: LONG_TIMEOUT,
            expect: failed(FailureKind::NotConfigured, "Not logged in"),
        },
        CliRow {
            name: "claude, a key but no network: api_retry without status",
            advisor: "claude-cli",
            asking: &[("ANTHROPIC_API_KEY", "k")],
            script: &[],
            without: &[],
            timeout: short,
            expect: failed(FailureKind::Unavailable, "api_retry"),
        },
        CliRow {
            name: "claude, rate limited: api_retry 429",
            advisor: "claude-cli",
            asking: &[("ANTHROPIC_API_KEY", "k")],
            script: &[("FAKE_ADVISOR_RATE_LIMITED", "1")],
            without: &[],
            timeout: short,
            expect: failed(FailureKind::RateLimited, "\"error_status\":429"),
        },
        CliRow {
            name: "claude answers, with usage from the result line",
            advisor: "claude-cli",
            asking: &[("ANTHROPIC_API_KEY", "k")],
            script: &[("FAKE_ADVISOR_ANSWER", ANSWER)],
            without: &[],
            timeout: LONG_TIMEOUT,
            expect: answered_with_usage,
        },
    ];
    let bin = drop_in_dir();
    let work = tempfile::tempdir().expect("a temp dir");
    for (i, row) in rows.into_iter().enumerate() {
        let mut spec = shipped(row.advisor, row.script);
        for key in row.without {
            match key.strip_prefix("args:") {
                Some(arg) => {
                    let args = spec.settings["args"].as_array_mut().expect("a list");
                    let before = args.len();
                    args.retain(|a| a != arg);
                    assert_eq!(args.len(), before - 1, "{}: `{arg}` in args", row.name);
                }
                None => {
                    assert!(
                        spec.settings.remove(*key).is_some(),
                        "{}: `{key}`",
                        row.name
                    );
                }
            }
        }
        // Each row its own advisor: preflight verdicts are cached per advisor.
        spec.id = format!("{}-row{i}", row.advisor);
        let mut setup = Setup::new(adapter(), spec)
            .env("PATH", &bin.path().display().to_string())
            .env("PWD", &work.path().display().to_string());
        for (name, value) in row.asking {
            setup = setup.env(name, value);
        }
        let started = Instant::now();
        check(row.name, setup, case(row.timeout, row.expect)).await;
        if row.timeout == LONG_TIMEOUT {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{}: took {:?}; a credential-less run must fail fast",
                row.name,
                started.elapsed()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The preflight.

/// A preflight script counting its runs in `count`, exiting `status` with `line` on stderr.
fn counting_preflight(dir: &Path, status: i32, line: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("check-login");
    let count = dir.join("runs");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> '{}'\necho '{line}' >&2\nexit {status}\n",
            count.display()
        ),
    )
    .expect("the script is written");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    count
}

fn runs(count: &Path) -> usize {
    std::fs::read_to_string(count).map_or(0, |t| t.lines().count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preflight_fails_fast_is_cached_per_path_and_skipped_with_a_key() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let count = counting_preflight(dir.path(), 1, "You are not logged in.");
    let spec = fake_with(
        "fake-preflight-cached",
        json!({
            "args": ["--answer", ANSWER],
            "preflight": ["check-login", "status"],
            "pass_env": ["FAKE_CLI_KEY"],
            "failure_patterns": { "unavailable": ["network is down"] },
        }),
    );
    let path = dir.path().display().to_string();
    let env = BTreeMap::from([("PATH".to_string(), path.clone())]);

    let started = Instant::now();
    let failure = preflight(&spec, &io_for(&env, LONG_TIMEOUT))
        .await
        .expect_err("not logged in");
    let first = started.elapsed();
    assert_eq!(failure.kind, FailureKind::AuthFailed, "{failure:?}");
    assert!(
        failure.diagnostic.contains("You are not logged in."),
        "{failure:?}"
    );
    assert!(
        first < Duration::from_secs(1),
        "the preflight took {first:?}"
    );
    println!("preflight with a failing login check answered in {first:?}");

    // Cached: the exchange fails at once without running the check again. The asker set
    // none of the advisor's credential variables, so the exchange's failure is that
    // asker's `not_configured` (the preflight alone still says `auth_failed`).
    let outcome = consult(
        adapter().as_ref(),
        &spec,
        PROMPT,
        &io_for(&env, LONG_TIMEOUT),
    )
    .await;
    let failure = outcome.result.expect_err("cached");
    assert_eq!(failure.kind, FailureKind::NotConfigured, "{failure:?}");
    assert!(
        failure.diagnostic.contains("You are not logged in.")
            && failure.diagnostic.contains("set none of `FAKE_CLI_KEY`"),
        "{failure:?}"
    );
    assert_eq!(runs(&count), 1, "the verdict is reused");

    // Another PATH is another verdict.
    let mut other = env.clone();
    other.insert("PATH".into(), format!("{path}:/nonexistent"));
    let _ = preflight(&spec, &io_for(&other, LONG_TIMEOUT)).await;
    assert_eq!(runs(&count), 2, "a different PATH runs it again");

    // A key in the environment is the login: no preflight, the exchange answers.
    let mut keyed = env.clone();
    keyed.insert("FAKE_CLI_KEY".into(), "k".into());
    let outcome = consult(
        adapter().as_ref(),
        &spec,
        PROMPT,
        &io_for(&keyed, LONG_TIMEOUT),
    )
    .await;
    assert!(outcome.result.is_ok(), "{outcome:?}");
    assert_eq!(runs(&count), 2, "skipped when a pass_env key is set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_verdicts_by_exit_status_patterns_and_time() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let bin = drop_in_dir();
    let fake_path = bin.path().join("fake-advisor").display().to_string();
    let env = BTreeMap::from([("PATH".to_string(), bin.path().display().to_string())]);
    let with_preflight = |id: &str, command: Value| {
        fake_with(
            id,
            json!({
                "args": ["--answer", ANSWER],
                "preflight": command,
                "failure_patterns": { "unavailable": ["network is down"] },
            }),
        )
    };
    let adapter = ProcessAdapter::new(ProcessConfig {
        preflight_timeout: Duration::from_millis(300),
        ..ProcessConfig::default()
    });
    let rows: [(&str, Value, Result<(), FailureKind>); 5] = [
        ("passes", json!([fake_path, "--exit", "0"]), Ok(())),
        (
            "a pattern names the kind",
            json!(["fake-advisor", "--stderr", "network is down", "--exit", "1"]),
            Err(FailureKind::Unavailable),
        ),
        (
            "fails: auth_failed",
            json!(["fake-advisor", "--stderr", "who are you?", "--exit", "2"]),
            Err(FailureKind::AuthFailed),
        ),
        (
            "hangs: proves nothing",
            json!(["fake-advisor", "--hang", "--ignore-term"]),
            Ok(()),
        ),
        (
            "missing: unavailable",
            json!(["advisord-no-such-check"]),
            Err(FailureKind::Unavailable),
        ),
    ];
    for (i, (name, command, expected)) in rows.into_iter().enumerate() {
        let spec = with_preflight(&format!("fake-preflight-{i}"), command);
        let io = io_for(&env, LONG_TIMEOUT);
        let started = Instant::now();
        let result = adapter.exchange(&spec, PROMPT, &io).await;
        let took = started.elapsed();
        match (expected, result) {
            (Ok(()), Ok(answer)) => assert!(answer.text.contains("cache key"), "{name}"),
            (Err(kind), Err(failure)) => {
                assert_eq!(failure.kind, kind, "{name}: {failure:?}");
                assert!(
                    failure.diagnostic.contains("preflight"),
                    "{name}: {failure:?}"
                );
            }
            (expected, got) => panic!("{name}: expected {expected:?}, got {got:?}"),
        }
        assert!(took < Duration::from_secs(2), "{name}: took {took:?}");
    }
    drop(dir);
}

// ---------------------------------------------------------------------------------------
// Settings.

#[test]
fn settings_are_validated_naming_the_key() {
    fn check(name: &str, executable: Option<&str>, settings: Value, expected: Result<(), &str>) {
        let spec = AdvisorSpec {
            executable: executable.map(str::to_string),
            ..advisor("settings", "process", settings)
        };
        let got = Registry::builtin().validate(&spec);
        match (expected, got) {
            (Ok(()), Ok(())) => {}
            (Err(field), Err((got_field, message))) => {
                assert_eq!(got_field, field, "{name}: {message}");
                assert!(
                    message.starts_with(|c: char| c.is_lowercase() || c == '`'),
                    "{name}: a message starts lowercase: {message}"
                );
            }
            (expected, got) => panic!("{name}: expected {expected:?}, got {got:?}"),
        }
    }
    let exe = Some("tool");
    check("minimal", exe, json!({}), Ok(()));
    check(
        "everything",
        exe,
        json!({
            "args": ["-p", "{prompt}"], "env": {"A_B": "1"}, "pass_env": ["KEY"],
            "preflight": ["tool", "auth", "status"],
            "failure_patterns": {"auth_failed": ["not logged in"], "rate_limited": ["\\b429\\b"]},
            "output": {"format": "json_lines", "select": {"type": "result"}, "text": "result",
                       "error": "is_error", "input_tokens": "usage.input_tokens"},
        }),
        Ok(()),
    );
    check(
        "absolute executable",
        Some("/usr/bin/tool"),
        json!({}),
        Ok(()),
    );
    check("no executable", None, json!({}), Err("executable"));
    check(
        "relative executable",
        Some("bin/tool"),
        json!({}),
        Err("executable"),
    );
    check(
        "unknown key",
        exe,
        json!({"endpoint": "http://x"}),
        Err("endpoint"),
    );
    check(
        "args not a list",
        exe,
        json!({"args": "-p {prompt}"}),
        Err("args"),
    );
    check(
        "args with a number",
        exe,
        json!({"args": ["-n", 3]}),
        Err("args"),
    );
    check("env not a map", exe, json!({"env": ["A=1"]}), Err("env"));
    check(
        "env value not a string",
        exe,
        json!({"env": {"TRUST": true}}),
        Err("env"),
    );
    check(
        "env bad name",
        exe,
        json!({"env": {"A-B": "1"}}),
        Err("env"),
    );
    check(
        "pass_env bad name",
        exe,
        json!({"pass_env": ["A B"]}),
        Err("pass_env"),
    );
    check(
        "preflight empty",
        exe,
        json!({"preflight": []}),
        Err("preflight"),
    );
    check(
        "preflight a string",
        exe,
        json!({"preflight": "tool auth"}),
        Err("preflight"),
    );
    check(
        "unknown kind",
        exe,
        json!({"failure_patterns": {"banned": ["x"]}}),
        Err("failure_patterns"),
    );
    check(
        "cancelled is ours",
        exe,
        json!({"failure_patterns": {"cancelled": ["x"]}}),
        Err("failure_patterns"),
    );
    check(
        "bad regex",
        exe,
        json!({"failure_patterns": {"error": ["(unclosed"]}}),
        Err("failure_patterns"),
    );
    check(
        "patterns not a list",
        exe,
        json!({"failure_patterns": {"error": "x"}}),
        Err("failure_patterns"),
    );
    check(
        "unknown output format",
        exe,
        json!({"output": {"format": "xml"}}),
        Err("output"),
    );
    check(
        "json_lines without text",
        exe,
        json!({"output": {"format": "json_lines"}}),
        Err("output"),
    );
    check(
        "text with a select",
        exe,
        json!({"output": {"select": {"a": 1}}}),
        Err("output"),
    );
}

#[test]
fn a_refusal_says_what_is_accepted() {
    let spec = AdvisorSpec {
        executable: Some("tool".into()),
        ..advisor(
            "settings",
            "process",
            json!({"failure_patterns": {"banned": ["x"]}}),
        )
    };
    let (field, message) = Registry::builtin().validate(&spec).expect_err("refused");
    assert_eq!(field, "failure_patterns");
    assert!(
        message.contains("`banned`") && message.contains("rate_limited"),
        "{message}"
    );
    let spec = AdvisorSpec {
        executable: Some("tool".into()),
        ..advisor(
            "settings",
            "process",
            json!({"failure_patterns": {"error": ["(x"]}}),
        )
    };
    let (_, message) = Registry::builtin().validate(&spec).expect_err("refused");
    assert!(
        message.contains("`error[0]`") && message.contains("regular expression"),
        "{message}"
    );
}
