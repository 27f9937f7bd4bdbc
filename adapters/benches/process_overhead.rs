//! Process adapter benchmark (`cargo bench -p advisord-adapters --bench process_overhead`).
//!
//! 1. **Overhead**: one exchange through `contract::consult` and the process adapter with
//!    `fake-advisor` answering at once, against spawning the same executable with the same
//!    arguments and prompt directly through `tokio::process` — interleaved in the same run,
//!    medians compared. Bound: ratio ≤ 1.3.
//! 2. **Deadline precision**: a `fake-advisor` that hangs with a grandchild, consulted under
//!    a 400 ms deadline; the time from the deadline until the consultation has returned and
//!    the whole process group (grandchild included) is gone. Bound: ≤ 200 ms, for a process
//!    that obeys SIGTERM and for one that blocks it.
//!
//! Prints every figure with its bound; exits non-zero when a bound is broken.

use advisord_adapters::contract::{consult, env_from_map, AdvisorSpec, Io};
use advisord_adapters::process::ProcessAdapter;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const ROUNDS: usize = 200;
const MAX_RATIO: f64 = 1.3;
const DEADLINE: Duration = Duration::from_millis(400);
const MAX_OVERSHOOT: Duration = Duration::from_millis(200);
const PRECISION_ROUNDS: usize = 10;
const ANSWER: &str = r#"{"conclusion": "Measure before optimising.", "stance": "supports"}"#;
const PROMPT: &str = "Is the cache key missing the locale?";

fn main() {
    let fake = fake_advisor();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut broken = Vec::new();
    runtime.block_on(async {
        let ratio = overhead(&fake).await;
        if ratio > MAX_RATIO {
            broken.push(format!("overhead ratio {ratio:.3} > {MAX_RATIO}"));
        }
        for ignore_term in [false, true] {
            let worst = precision(&fake, ignore_term).await;
            if worst > MAX_OVERSHOOT {
                broken.push(format!(
                    "deadline overshoot {worst:?} > {MAX_OVERSHOOT:?} (ignore_term: {ignore_term})"
                ));
            }
        }
    });
    if !broken.is_empty() {
        eprintln!("process_overhead: bound broken: {}", broken.join("; "));
        std::process::exit(1);
    }
    println!("process_overhead: all bounds hold");
}

async fn overhead(fake: &Path) -> f64 {
    let adapter = ProcessAdapter::default();
    let args = vec!["--answer".to_string(), ANSWER.to_string()];
    let advisor = spec(fake, &args);
    let env = asking_env();
    let mut via_adapter = Vec::with_capacity(ROUNDS);
    let mut direct = Vec::with_capacity(ROUNDS);
    // Warm up both paths (page cache, runtime threads, parsed settings).
    for _ in 0..10 {
        exchange(&adapter, &advisor, &env).await;
        spawn_directly(fake, &args).await;
    }
    for _ in 0..ROUNDS {
        let started = Instant::now();
        exchange(&adapter, &advisor, &env).await;
        via_adapter.push(started.elapsed());
        let started = Instant::now();
        spawn_directly(fake, &args).await;
        direct.push(started.elapsed());
    }
    let (a, d) = (median(&mut via_adapter), median(&mut direct));
    let ratio = a.as_secs_f64() / d.as_secs_f64();
    println!(
        "process exchange overhead: adapter median {a:?}, direct spawn median {d:?}, ratio \
         {ratio:.3} (bound {MAX_RATIO}; {ROUNDS} rounds each, interleaved)"
    );
    ratio
}

async fn exchange(adapter: &ProcessAdapter, advisor: &AdvisorSpec, env: &BTreeMap<String, String>) {
    let io = Io {
        deadline: tokio::time::Instant::now() + Duration::from_secs(10),
        cancel: CancellationToken::new(),
        env: env_from_map(env.clone()),
        http: reqwest::Client::new(),
    };
    let outcome = consult(adapter, advisor, PROMPT, &io).await;
    assert!(
        outcome.result.is_ok(),
        "the fake's answer reads: {outcome:?}"
    );
}

async fn spawn_directly(fake: &Path, args: &[String]) {
    // The same small environment the adapter gives it, so that only the adapter's own work
    // (lookup, process group, capped reads, classification, normalisation) is compared.
    let mut child = tokio::process::Command::new(fake)
        .args(args)
        .env_clear()
        .envs(process_env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fake-advisor starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (_, _, _, status) = tokio::join!(
        async {
            let _ = stdin.write_all(PROMPT.as_bytes()).await;
            drop(stdin);
        },
        stdout.read_to_end(&mut out),
        stderr.read_to_end(&mut err),
        child.wait(),
    );
    assert!(status.expect("wait").success() && !out.is_empty());
}

async fn precision(fake: &Path, ignore_term: bool) -> Duration {
    let adapter = ProcessAdapter::default();
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut overshoots = Vec::with_capacity(PRECISION_ROUNDS);
    for round in 0..PRECISION_ROUNDS {
        let pid_file = dir.path().join(format!("grandchild-{round}.pid"));
        let mut args = vec![
            "--grandchild".to_string(),
            "--pid-file".to_string(),
            pid_file.display().to_string(),
            "--hang".to_string(),
        ];
        if ignore_term {
            args.push("--ignore-term".to_string());
        }
        let advisor = spec(fake, &args);
        let io = Io {
            deadline: tokio::time::Instant::now() + DEADLINE,
            cancel: CancellationToken::new(),
            env: env_from_map(asking_env()),
            http: reqwest::Client::new(),
        };
        let deadline = Instant::now() + DEADLINE;
        let watch = tokio::spawn(group_of_grandchild(pid_file.clone()));
        let outcome = consult(&adapter, &advisor, PROMPT, &io).await;
        let group = watch
            .await
            .expect("watcher")
            .expect("the grandchild wrote its pid");
        let bound = Instant::now() + Duration::from_secs(3);
        while group_alive(group) && Instant::now() < bound {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let gone = Instant::now();
        assert!(!group_alive(group), "the process group {group} survived");
        assert!(outcome.result.is_err(), "a hang is a failure");
        // Signed: the adapter stops at its own deadline, a little before the caller's.
        overshoots.push(ms(gone) - ms(deadline));
    }
    overshoots.sort_by(f64::total_cmp);
    let worst = overshoots[overshoots.len() - 1];
    let median = overshoots[overshoots.len() / 2];
    let behaviour = if ignore_term {
        "SIGTERM blocked"
    } else {
        "obeys SIGTERM"
    };
    println!(
        "deadline precision ({behaviour}): consultation returned and process group gone \
         {median:+.1} ms from the deadline (median; negative is before), worst {worst:+.1} ms \
         (bound +{} ms; {PRECISION_ROUNDS} rounds, deadline {DEADLINE:?})",
        MAX_OVERSHOOT.as_millis()
    );
    Duration::from_secs_f64(worst.max(0.0) / 1000.0)
}

/// Milliseconds since a fixed origin, as a float, so that instants subtract either way.
fn ms(at: Instant) -> f64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(|| Instant::now() - Duration::from_secs(3600));
    at.duration_since(origin).as_secs_f64() * 1000.0
}

/// The process group of the grandchild whose pid `file` will hold.
async fn group_of_grandchild(file: PathBuf) -> Option<i32> {
    let bound = Instant::now() + Duration::from_secs(3);
    while Instant::now() < bound {
        if let Ok(text) = std::fs::read_to_string(&file) {
            if let Ok(pid) = text.trim().parse::<i32>() {
                return process_group(pid);
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

/// Field 5 of `/proc/PID/stat`.
fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split(' ').nth(2)?.parse().ok()
}

/// Whether any process of `group` is alive (a zombie is not).
fn group_alive(group: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some(close) = stat.rfind(')') else {
            return false;
        };
        let mut fields = stat[close + 2..].split(' ');
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
        pgrp == Some(group) && state != Some("Z") && state != Some("X")
    })
}

fn spec(fake: &Path, args: &[String]) -> AdvisorSpec {
    let mut settings = serde_json::Map::new();
    settings.insert("args".into(), serde_json::json!(args));
    AdvisorSpec {
        id: "bench-process".into(),
        adapter: "process".into(),
        executable: Some(fake.display().to_string()),
        credential: None,
        settings,
    }
}

fn asking_env() -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert("PATH".into(), "/usr/bin:/bin".into());
    env
}

/// What the adapter passes (see `process::env`): `PATH`, the base variables set here,
/// `TERM` and `NO_COLOR`.
fn process_env() -> BTreeMap<String, String> {
    let mut env = asking_env();
    for name in advisord_adapters::process::env::BASE_VARS {
        if let Ok(value) = std::env::var(name) {
            env.insert((*name).to_string(), value);
        }
    }
    env.insert("TERM".into(), "dumb".into());
    env.insert("NO_COLOR".into(), "1".into());
    env
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Build `fake-advisor` (cargo does not build a dependency's binaries for a bench) and
/// return its path.
fn fake_advisor() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "advisord-fakes",
            "--bin",
            "fake-advisor",
        ])
        .current_dir(&workspace)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building fake-advisor failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    target.join("release").join("fake-advisor")
}
