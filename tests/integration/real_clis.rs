//! The real `codex`, `gemini` and `claude` CLIs, end to end: each is asked through a real
//! `advisord` with the DEFAULT catalogue, pointed at `fake-llm-server` only through its own
//! config files in a temporary `$HOME` (never through a change to the shipped entries), for
//! every case of [`CASES`], all cases of all CLIs at once.
//!
//! Every case must end with its expected kind, within its deadline, with no process of its
//! `$HOME` left behind. The suite prints each CLI's version and a table of cases × CLIs
//! with the kind and the time; a failing case names the CLI and its version, so a newer CLI
//! that changes its output shows here first.
//!
//! The CLIs are installed at pinned versions outside the repository by
//! `scripts/install-real-clis.sh` (which `.ci/run` runs) and found in `ADVISORD_REAL_CLIS`,
//! else `${XDG_CACHE_HOME:-$HOME/.cache}/advisord-ci/npm/node_modules/.bin`. When they are
//! missing the suite FAILS and says how to install them; a developer without them leaves
//! the suite out with `cargo nextest run --workspace -E 'not test(/^real_clis::/)'`.

use advisord_fakes::llm_server::{FakeLlmServer, Reply, Script, Step, DEFAULT_ANSWER};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pinned versions (`scripts/install-real-clis.sh` installs exactly these).
const PINNED: &[(&str, &str)] = &[
    ("codex", "0.171.0"),
    ("gemini", "0.61.0"),
    ("claude", "2.1.197"),
];

/// Each case's consultation deadline (`--timeout`). Long enough for a node CLI to start on
/// a machine shared with builds, and for gemini, which retries an empty or corrupt reply
/// for ~35 s before it reports it; the cases that run into it (a hang, a long retry) take
/// this long.
const DEADLINE: Duration = Duration::from_secs(90);

/// The deadline of the `hang` case: under gemini's own request timeout, after which it
/// reports `fetch failed` and retries (`unavailable`, were the deadline longer).
const HANG_DEADLINE: Duration = Duration::from_secs(45);

/// Slack over the deadline for the whole `ask` (recording, the client's own start).
const CLIENT_SLACK: Duration = Duration::from_secs(20);

/// How many CLIs may be starting at once (until their first request reaches the fake):
/// a node CLI's start is its costly part, and 33 at once on 2 cores would each take longer
/// than the deadline. A case waiting its turn has not started its clock.
const STARTING_AT_ONCE: usize = 4;

/// The order cases start in: those that run into the deadline first, so that their wait
/// overlaps the others' starts.
const START_ORDER: &[&str] = &[
    "empty",
    "hang",
    "endpoint",
    "ctrl-c",
    "429 long",
    "429 short",
    "500",
    "401",
    "403",
    "corrupt body",
    "prose",
    "answer",
];

/// The longest a stopped process group may take to disappear.
const REAP_BOUND: Duration = Duration::from_secs(10);

const PROSE: &str = "Caching per user is safe here because the cache key includes the user id.";

/// One case: a phrase in the assessment that scripts the fake, what the fake does, and
/// the kind expected per CLI (`completed` or a failure kind).
struct Case {
    name: &'static str,
    phrase: &'static str,
    /// `(codex, gemini, claude)`.
    expect: [&'static str; 3],
    /// Whether usage must be recorded.
    usage: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "answer",
        phrase: "CASE-ANSWER",
        expect: ["completed"; 3],
        usage: true,
    },
    Case {
        name: "prose",
        phrase: "CASE-PROSE",
        expect: ["completed"; 3],
        usage: true,
    },
    Case {
        name: "401",
        phrase: "CASE-401",
        expect: ["auth_failed"; 3],
        usage: false,
    },
    Case {
        name: "403",
        phrase: "CASE-403",
        expect: ["auth_failed"; 3],
        usage: false,
    },
    Case {
        name: "429 short",
        phrase: "CASE-429-SHORT",
        expect: ["rate_limited"; 3],
        usage: false,
    },
    Case {
        name: "429 long",
        phrase: "CASE-429-LONG",
        expect: ["rate_limited"; 3],
        usage: false,
    },
    Case {
        name: "500",
        phrase: "CASE-500",
        expect: ["error"; 3],
        usage: false,
    },
    Case {
        name: "empty",
        phrase: "CASE-EMPTY",
        expect: ["empty"; 3],
        usage: true,
    },
    // codex reads a corrupt stream as a dropped connection and says only that.
    Case {
        name: "corrupt body",
        phrase: "CASE-CORRUPT",
        expect: ["unavailable", "malformed", "malformed"],
        usage: false,
    },
    Case {
        name: "hang",
        phrase: "CASE-HANG",
        expect: ["timeout"; 3],
        usage: false,
    },
    Case {
        name: "ctrl-c",
        phrase: "CASE-CANCEL",
        expect: ["cancelled"; 3],
        usage: false,
    },
    // The shipped entry plus `endpoint:` in the project's catalogue, and no base URL in
    // the CLI's own config: the entry alone sends it to the fake.
    Case {
        name: "endpoint",
        phrase: "CASE-ENDPOINT",
        expect: ["completed"; 3],
        usage: true,
    },
];

/// The CLIs, in the order of [`Case::expect`].
const CLIS: [(&str, &str); 3] = [
    ("codex", "codex-cli"),
    ("gemini", "gemini-cli"),
    ("claude", "claude-cli"),
];

fn script() -> Script {
    let hang = Reply::ok("too late", 1, 1).after(600_000);
    let phrases: [(&str, Step); 12] = [
        ("CASE-ANSWER", Reply::ok(DEFAULT_ANSWER, 120, 48).into()),
        ("CASE-ENDPOINT", Reply::ok(DEFAULT_ANSWER, 120, 48).into()),
        ("CASE-PROSE", Reply::ok(PROSE, 70, 14).into()),
        ("CASE-401", Reply::status(401).into()),
        ("CASE-403", Reply::status(403).into()),
        ("CASE-429-SHORT", Reply::rate_limited_for(1).into()),
        ("CASE-429-LONG", Reply::rate_limited_for(3600).into()),
        ("CASE-500", Reply::status(500).into()),
        ("CASE-EMPTY", Reply::Empty.into()),
        ("CASE-CORRUPT", Reply::Malformed.into()),
        ("CASE-HANG", hang.clone()),
        ("CASE-CANCEL", hang),
    ];
    phrases
        .into_iter()
        .fold(Script::new(), |script, (phrase, step)| {
            script.phrase(phrase, step)
        })
}

/// Where the CLIs are: `ADVISORD_REAL_CLIS`, else the cache the install script fills.
fn cli_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ADVISORD_REAL_CLIS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/nonexistent"));
    cache.join("advisord-ci/npm/node_modules/.bin")
}

/// `codex-cli 0.171.0` → `0.171.0`: the first word that starts with a digit.
fn version_of(cli: &Path) -> String {
    // A home of its own, removed after: gemini writes its project registry under its home
    // even for `--version`, and the system's temporary directory would keep it.
    let home = tempfile::tempdir().expect("a temporary home");
    let output = Command::new(cli)
        .arg("--version")
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .stdin(Stdio::null())
        .output();
    let text = match output {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => panic!("`{} --version` cannot run: {e}", cli.display()),
    };
    text.split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or("unknown")
        .to_string()
}

/// What one case came to.
struct Ran {
    cli: &'static str,
    version: String,
    case: &'static str,
    kind: String,
    seconds: f64,
    problems: Vec<String>,
}

/// One case's place: a `$HOME` holding the CLI's config, a project, a state directory, a
/// socket, and a directory with only this CLI on it (so the plan selects only it).
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new(cli: &str, cli_path: &Path, base_url: &str, endpoint: bool) -> Place {
        let dir = tempfile::Builder::new()
            .prefix(&format!("real-{cli}-"))
            .tempdir()
            .expect("a temp dir");
        let place = Place { dir };
        for sub in ["home", "work", "data", "bin", "tmp"] {
            std::fs::create_dir_all(place.path(sub)).expect("a case directory");
        }
        std::os::unix::fs::symlink(cli_path, place.path("bin").join(cli)).expect("a symlink");
        if endpoint {
            place.endpoint_catalogue(cli, base_url);
        } else {
            place.configure(cli, base_url);
        }
        place
    }

    /// The project's catalogue: the shipped entry of `cli`, plus `endpoint:` (the CLI's
    /// own config says nothing of the fake; only gemini is told its auth method, as a
    /// user's own setup would).
    fn endpoint_catalogue(&self, cli: &str, base_url: &str) {
        let shipped: Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("share/advisors.yaml"),
            )
            .expect("the shipped catalogue"),
        )
        .expect("the shipped catalogue parses");
        let id = CLIS.iter().find(|(n, _)| *n == cli).map(|(_, id)| *id);
        let mut entry = shipped["advisors"]
            .as_array()
            .and_then(|all| all.iter().find(|e| e["id"].as_str() == id))
            .cloned()
            .expect("the CLI's shipped entry");
        let endpoint = match cli {
            "codex" => format!("{base_url}/v1"),
            _ => base_url.to_string(),
        };
        entry["endpoint"] = Value::from(endpoint);
        let dir = self.path("work/.advisord");
        std::fs::create_dir_all(&dir).expect("the project's .advisord");
        let catalogue = serde_json::json!({"advisors": [entry]});
        std::fs::write(
            dir.join("advisors.yaml"),
            serde_yaml_ng::to_string(&catalogue).expect("YAML"),
        )
        .expect("the project's catalogue");
        // A repository's catalogue runs only once trusted (in the run's `$HOME`).
        let file = dir.join("advisors.yaml");
        let content = std::fs::read(&file).expect("the project's catalogue");
        advisord::trust::trust(&self.path("home/.config/advisord"), &file, &content)
            .expect("trust the project's catalogue");
        if cli == "gemini" {
            let settings = self.path("home/.gemini/settings.json");
            std::fs::create_dir_all(settings.parent().expect("a parent")).expect("a dir");
            std::fs::write(
                settings,
                r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#,
            )
            .expect("gemini's settings");
        }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Point the CLI at the fake the way a user would: its own config files.
    fn configure(&self, cli: &str, base_url: &str) {
        let home = self.path("home");
        let write = |rel: &str, text: String| {
            let path = home.join(rel);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("a config dir");
            std::fs::write(path, text).expect("a config file");
        };
        match cli {
            "claude" => write(
                ".claude/settings.json",
                serde_json::json!({"env": {
                    "ANTHROPIC_BASE_URL": base_url,
                    "ANTHROPIC_API_KEY": "sk-ant-not-a-real-key",
                }})
                .to_string(),
            ),
            "gemini" => {
                write(
                    ".gemini/.env",
                    format!("GOOGLE_GEMINI_BASE_URL={base_url}\nGEMINI_API_KEY=not-a-real-key\n"),
                );
                write(
                    ".gemini/settings.json",
                    serde_json::json!({
                        "security": {"auth": {"selectedType": "gemini-api-key"}},
                        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                        "privacy": {"usageStatisticsEnabled": false},
                        "telemetry": {"enabled": false},
                    })
                    .to_string(),
                );
            }
            "codex" => write(
                ".codex/config.toml",
                format!(
                    "model_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\n\
                     base_url = \"{base_url}/v1\"\nenv_key = \"CODEX_API_KEY\"\n\
                     wire_api = \"responses\"\n"
                ),
            ),
            other => panic!("no config for `{other}`"),
        }
    }

    /// The environment of every process of the case: nothing of the test's own.
    /// `asking_key`: the asking process exports the CLI's key variable (the preflight is
    /// then skipped, the key being the login) besides the config file's.
    fn env(&self, command: &mut Command, cli: &str, asking_key: bool) {
        command
            .env_clear()
            .env("HOME", self.path("home"))
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", self.path("bin").display()),
            )
            .env("LANG", "C.UTF-8")
            .env("ADVISORD_DATA_DIR", self.path("data"))
            // The CLIs' own temporary files (gemini's error reports, claude's directory)
            // stay in the case's place; advisord passes `TMPDIR` on to its advisors.
            .env("TMPDIR", self.path("tmp"))
            .current_dir(self.path("work"));
        match cli {
            // The key the config's `env_key` names (passed through as `pass_env`).
            "codex" => {
                command.env("CODEX_API_KEY", "sk-not-a-real-key");
            }
            "claude" if asking_key => {
                command.env("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key");
            }
            "gemini" if asking_key => {
                command.env("GEMINI_API_KEY", "not-a-real-key");
            }
            _ => {}
        }
    }

    fn socket(&self) -> PathBuf {
        self.path("advisord.sock")
    }
}

/// Admits cases in ticket order, at most [`STARTING_AT_ONCE`] starting at a time.
struct Gate {
    state: std::sync::Mutex<(usize, usize)>,
    turn: std::sync::Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            state: std::sync::Mutex::new((0, 0)),
            turn: std::sync::Condvar::new(),
        }
    }

    /// Wait for `ticket`'s turn and a free start.
    fn enter(&self, ticket: usize) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !(state.0 == ticket && state.1 < STARTING_AT_ONCE) {
            state = self.turn.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.0 += 1;
        state.1 += 1;
        self.turn.notify_all();
    }

    /// A start is over.
    fn leave(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.1 -= 1;
        self.turn.notify_all();
    }
}

/// A child killed and reaped on drop (a failing assertion leaves nothing behind).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Pids of live processes whose environment has `HOME=<home>`, but `except`.
fn processes_of(home: &Path, except: Option<u32>) -> Vec<u32> {
    let needle = format!("HOME={}", home.display()).into_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| Some(*pid) != except)
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // A zombie is gone but for its reaping.
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            !zombie
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle))
        })
        .collect()
}

/// Poll (bounded) until no process of `home` but `except` is left; the ones left.
fn left_behind(home: &Path, except: Option<u32>) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let left = processes_of(home, except);
        if left.is_empty() || started.elapsed() > REAP_BOUND {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The consultation records in the case's state directory.
fn consultations(state: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    let mut dirs = vec![state.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let record: Value = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(Value::Null);
                if record["kind"] == "consultation" {
                    found.push(record);
                }
            }
        }
    }
    found
}

fn run_case(
    server: &FakeLlmServer,
    cli: (&'static str, &'static str),
    cli_path: &Path,
    version: &str,
    case: &'static Case,
    gate: &Gate,
    ticket: usize,
) -> Ran {
    let (name, advisor) = cli;
    gate.enter(ticket);
    let mut starting = true;
    let expected = case.expect[CLIS.iter().position(|(n, _)| *n == name).unwrap_or(0)];
    let endpoint = case.name == "endpoint";
    let deadline = if case.name == "hang" {
        HANG_DEADLINE
    } else {
        DEADLINE
    };
    let place = Place::new(name, cli_path, &server.base_url(), endpoint);
    let mut problems = Vec::new();

    // One case runs claude's preflight (`claude auth status`, which must accept the key
    // of its settings file); the others skip it, as a user exporting the key does, which
    // halves claude's start-up cost.
    let asking_key = case.name != "answer";
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_advisord"));
    place.env(&mut daemon, name, asking_key);
    daemon
        .arg("--socket")
        .arg(place.socket())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let daemon = Reaped(daemon.spawn().expect("advisord starts"));
    let daemon_pid = daemon.0.id();
    // Ask only once it listens (bounded); `--no-autostart` below makes a slow start a
    // failure rather than a second, detached daemon.
    let listening = Instant::now();
    while !place.socket().exists() && listening.elapsed() < REAP_BOUND * 3 {
        std::thread::sleep(Duration::from_millis(20));
    }

    // A distinct subject per case and CLI, so the fake's script knows the case.
    let phrase = format!("{} {name}", case.phrase);
    let mut ask = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
    place.env(&mut ask, name, asking_key);
    ask.arg("--socket")
        .arg(place.socket())
        .arg("--no-autostart")
        .arg("--state-dir")
        .arg(place.path("state"))
        .args(["--task", "real-clis", "--format", "json", "ask"])
        .args(["--subject", &format!("Per-user response cache ({phrase})")])
        .args(["--materiality", "material"])
        .args(["--hypothesis", "Caching the response per user is safe"])
        .args([
            "--evidence",
            "file:src/cache.rs=>the key includes the user id",
        ])
        .args(["--timeout", &deadline.as_secs().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let client = ask.spawn().expect("advisor-consult starts");
    let client_pid = client.id();
    let mut client = Reaped(client);

    // The CLI has started once its request reaches the fake (gemini's model-router call
    // counts: it comes right after the start).
    let asked = || server.count_requests(|r| r.body.to_string().contains(&phrase)) > 0;
    let bound = deadline + CLIENT_SLACK;
    let mut interrupted = false;
    let status = loop {
        if starting && asked() {
            starting = false;
            gate.leave();
        }
        if case.phrase == "CASE-CANCEL" && !interrupted {
            let late = started.elapsed() > DEADLINE - Duration::from_secs(5);
            if !starting || late {
                if late {
                    problems.push("the CLI's request never reached the fake before Ctrl-C".into());
                }
                // Ctrl-C, as a user at the terminal would.
                let pid = nix::unistd::Pid::from_raw(i32::try_from(client_pid).unwrap_or(i32::MAX));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                interrupted = true;
            }
        }
        match client.0.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > bound => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("cannot wait for advisor-consult: {e}"),
        }
    };
    if starting {
        gate.leave();
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut stderr = String::new();
    if let Some(mut pipe) = client.0.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    match status {
        None => problems.push(format!("advisor-consult still running after {bound:?}")),
        Some(status) => {
            let want = match (case.phrase, expected) {
                ("CASE-CANCEL", _) => 130,
                (_, "completed") => 0,
                _ => 1,
            };
            if status.code() != Some(want) {
                problems.push(format!(
                    "advisor-consult exited {status}, expected {want}: {}",
                    stderr.lines().last().unwrap_or_default()
                ));
            }
        }
    }

    // The outcome as recorded (a cancelled job records its exchange too; poll, bounded).
    let record = {
        let waited = Instant::now();
        loop {
            let found = consultations(&place.path("state"));
            if !found.is_empty() || waited.elapsed() > REAP_BOUND {
                break found.into_iter().next();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let kind = match &record {
        None => {
            problems.push("no consultation was recorded".into());
            "none".to_string()
        }
        Some(r) => {
            if r["advisor"] != advisor {
                problems.push(format!("the plan asked {} instead", r["advisor"]));
            }
            let kind = match r["status"].as_str() {
                Some("completed") => "completed".to_string(),
                _ => r["failure"].as_str().unwrap_or("?").to_string(),
            };
            if kind != expected {
                problems.push(format!(
                    "expected {expected}, got {kind}: {}",
                    r["diagnostic"].as_str().unwrap_or_default()
                ));
            }
            let duration = r["duration_ms"].as_u64().unwrap_or(u64::MAX);
            let limit = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX) + 1000;
            if duration > limit {
                problems.push(format!(
                    "took {duration} ms, over the deadline ({limit} ms)"
                ));
            }
            let usage = &r["usage"];
            let counted = usage["input_tokens"].as_u64().unwrap_or(0) > 0;
            if case.usage && !counted {
                problems.push(format!("no usage recorded: {usage}"));
            }
            kind
        }
    };

    // Nothing of the case outlives it: first while the daemon still runs (its exchanges'
    // process groups), then the daemon itself once stopped.
    let left = left_behind(&place.path("home"), Some(daemon_pid));
    if !left.is_empty() {
        let named: Vec<String> = left
            .iter()
            .map(|p| format!("{p} `{}`", command_line(*p)))
            .collect();
        problems.push(format!("processes left behind: {}", named.join(", ")));
        for pid in left {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    drop(daemon);
    Ran {
        cli: name,
        version: version.to_string(),
        case: case.name,
        kind,
        seconds,
        problems,
    }
}

#[test]
fn the_install_script_pins_the_suites_versions() {
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-real-clis.sh"),
    )
    .expect("the install script");
    let package = |cli: &str| match cli {
        "codex" => "@openai/codex",
        "gemini" => "@google/gemini-cli",
        _ => "@anthropic-ai/claude-code",
    };
    for (cli, version) in PINNED {
        let pin = format!("\"{}@{version}\"", package(cli));
        assert!(
            script.contains(&pin),
            "the install script does not pin {pin}"
        );
    }
}

#[test]
fn the_real_clis_answer_and_fail_typed_through_the_daemon() {
    let dir = cli_dir();
    let missing: Vec<&str> = CLIS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !dir.join(name).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "the real CLIs {missing:?} are not installed in `{}`: run `scripts/install-real-clis.sh` \
         (what `.ci/run` does; it installs the pinned versions into \
         `${{XDG_CACHE_HOME:-$HOME/.cache}}/advisord-ci/npm`), or set `ADVISORD_REAL_CLIS` to \
         the directory holding them; to run the rest of the suite without them: \
         `cargo nextest run --workspace -E 'not test(/^real_clis::/)'`",
        dir.display()
    );
    let versions: BTreeMap<&str, String> = CLIS
        .iter()
        .map(|(name, _)| (*name, version_of(&dir.join(name))))
        .collect();
    println!("real CLIs from {}:", dir.display());
    for (name, pinned) in PINNED {
        let got = &versions[name];
        let note = if got == pinned {
            ""
        } else {
            "  (pinned: {pinned})"
        };
        println!("  {name:<7} {got}{}", note.replace("{pinned}", pinned));
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let server = Arc::new(runtime.block_on(FakeLlmServer::start(script())));

    let started = Instant::now();
    // `ADVISORD_REAL_CLIS_CASES=answer,hang` runs only those cases (a debugging aid).
    let only = std::env::var("ADVISORD_REAL_CLIS_CASES").unwrap_or_default();
    let chosen = |case: &Case| only.is_empty() || only.split(',').any(|n| n.trim() == case.name);
    let gate = Arc::new(Gate::new());
    let mut handles = Vec::new();
    let ordered = START_ORDER
        .iter()
        .filter_map(|name| CASES.iter().find(|c| c.name == *name));
    assert_eq!(
        ordered.clone().count(),
        CASES.len(),
        "START_ORDER names every case"
    );
    for case in ordered.filter(|c| chosen(c)) {
        for cli in CLIS {
            let (server, gate) = (Arc::clone(&server), Arc::clone(&gate));
            let path = dir.join(cli.0);
            let version = versions[cli.0].clone();
            let ticket = handles.len();
            handles.push(std::thread::spawn(move || {
                run_case(&server, cli, &path, &version, case, &gate, ticket)
            }));
        }
    }
    let ran: Vec<Ran> = handles
        .into_iter()
        .map(|h| h.join().expect("a case thread does not panic"))
        .collect();
    let total = started.elapsed();

    // The table of cases × CLIs: kind and time.
    let header: Vec<String> = CLIS
        .iter()
        .map(|(name, _)| format!("{name} {}", versions[name]))
        .collect();
    println!("\n| case | {} |", header.join(" | "));
    println!("| --- |{}", " --- |".repeat(CLIS.len()));
    for case in CASES.iter().filter(|c| chosen(c)) {
        let cells: Vec<String> = CLIS
            .iter()
            .map(|(name, _)| {
                ran.iter()
                    .find(|r| r.cli == *name && r.case == case.name)
                    .map(|r| {
                        let mark = if r.problems.is_empty() { "" } else { " ✗" };
                        format!("{} {:.1} s{mark}", r.kind, r.seconds)
                    })
                    .unwrap_or_default()
            })
            .collect();
        println!("| {} | {} |", case.name, cells.join(" | "));
    }
    println!(
        "\n{} cases, {STARTING_AT_ONCE} starting at a time, in {:.1} s (deadline {} s each, \
         {} s for `hang`)",
        ran.len(),
        total.as_secs_f64(),
        DEADLINE.as_secs(),
        HANG_DEADLINE.as_secs()
    );

    let failures: Vec<String> = ran
        .iter()
        .flat_map(|r| {
            r.problems
                .iter()
                .map(move |p| format!("{} {} — case `{}`: {p}", r.cli, r.version, r.case))
        })
        .collect();
    runtime.block_on(async {
        if let Ok(server) = Arc::try_unwrap(server) {
            server.shutdown().await;
        }
    });
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
