//! Consult the shipped catalogue's CLI advisors through the process adapter, as the daemon
//! would, and print how each credential-less, offline run is classified.
//!
//! Not a test: the real CLIs are installed from npm outside the repository, and their
//! behaviour changes with their versions. `scripts/check-real-clis.sh` runs this against
//! them and against `fake-advisor` symlinked under their names, so the two can be compared.
//!
//! ```text
//! cargo run -p advisord-adapters --example real_clis -- --bin DIR [--catalogue FILE]
//!     [--deadline-s SECS]
//! ```
//!
//! Every run gets a scratch `HOME`, XDG directories and working directory (not a git
//! repository), so a login on this machine cannot change the outcome. Exits 1 when an
//! outcome differs from the one expected.

use advisord_adapters::contract::{consult, env_from_map, AdvisorSpec, FailureKind, Io};
use advisord_adapters::process::preflight;
use advisord_adapters::registry::Registry;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const PROMPT: &str = "Is it safe to cache this response per user? Reply with one JSON object \
                      with the fields conclusion and stance.";

/// One way of running one advisor.
struct Row {
    advisor: &'static str,
    what: &'static str,
    /// Credentials in the asking process's environment.
    asking: &'static [(&'static str, &'static str)],
    /// Settings removed: a key, or `args:ELEMENT`.
    without: &'static [&'static str],
    /// Whether it needs the deadline (a retry loop) or ends by itself.
    until_deadline: bool,
    expect: FailureKind,
}

const ROWS: &[Row] = &[
    Row {
        advisor: "codex-cli",
        what: "as shipped, not logged in",
        asking: &[],
        without: &[],
        until_deadline: false,
        expect: FailureKind::AuthFailed,
    },
    Row {
        advisor: "codex-cli",
        what: "a key set (preflight skipped), no network",
        asking: &[("CODEX_API_KEY", "sk-not-a-real-key")],
        without: &[],
        until_deadline: true,
        expect: FailureKind::Unavailable,
    },
    Row {
        advisor: "codex-cli",
        what: "a key set, without --skip-git-repo-check",
        asking: &[("CODEX_API_KEY", "sk-not-a-real-key")],
        without: &["args:--skip-git-repo-check"],
        until_deadline: false,
        expect: FailureKind::Error,
    },
    Row {
        advisor: "gemini-cli",
        what: "as shipped, no auth",
        asking: &[],
        without: &[],
        until_deadline: false,
        expect: FailureKind::AuthFailed,
    },
    Row {
        advisor: "gemini-cli",
        what: "a key set, no network",
        asking: &[("GEMINI_API_KEY", "not-a-real-key")],
        without: &[],
        until_deadline: true,
        expect: FailureKind::Unavailable,
    },
    Row {
        advisor: "gemini-cli",
        what: "a key set, untrusted folder (without `env`)",
        asking: &[("GEMINI_API_KEY", "not-a-real-key")],
        without: &["env"],
        until_deadline: false,
        expect: FailureKind::Error,
    },
    Row {
        advisor: "claude-cli",
        what: "as shipped, not logged in",
        asking: &[],
        without: &[],
        until_deadline: false,
        expect: FailureKind::AuthFailed,
    },
    Row {
        advisor: "claude-cli",
        what: "not logged in, without the preflight",
        asking: &[],
        without: &["preflight"],
        until_deadline: false,
        expect: FailureKind::AuthFailed,
    },
    Row {
        advisor: "claude-cli",
        what: "a key set (preflight skipped), no network",
        asking: &[("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key")],
        without: &[],
        until_deadline: true,
        expect: FailureKind::Unavailable,
    },
];

struct Options {
    bin: PathBuf,
    catalogue: PathBuf,
    deadline: Duration,
}

fn options() -> Result<Options, String> {
    let mut bin = None;
    let mut catalogue = Path::new(env!("CARGO_MANIFEST_DIR")).join("../share/advisors.yaml");
    let mut deadline = Duration::from_secs(20);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("`{flag}` needs a value"))?;
        match flag.as_str() {
            "--bin" => bin = Some(PathBuf::from(value)),
            "--catalogue" => catalogue = PathBuf::from(value),
            "--deadline-s" => {
                let secs: f64 = value
                    .parse()
                    .map_err(|_| format!("`--deadline-s` takes seconds, got `{value}`"))?;
                deadline = Duration::from_secs_f64(secs);
            }
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    let bin = bin.ok_or("`--bin DIR` (where codex, gemini and claude are) is required")?;
    Ok(Options {
        bin,
        catalogue,
        deadline,
    })
}

fn load(catalogue: &Path) -> Result<Vec<Map<String, Value>>, String> {
    let text = std::fs::read_to_string(catalogue)
        .map_err(|e| format!("cannot read `{}`: {e}", catalogue.display()))?;
    let file: Map<String, Value> = serde_yaml_ng::from_str(&text)
        .map_err(|e| format!("`{}` does not parse: {e}", catalogue.display()))?;
    Ok(file
        .get("advisors")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|a| a.as_object().cloned()).collect())
        .unwrap_or_default())
}

fn spec(entry: &Map<String, Value>, without: &[&str]) -> AdvisorSpec {
    let mut spec = AdvisorSpec::from_mapping(entry);
    let settings = &mut spec.settings;
    for key in without {
        match key.strip_prefix("args:") {
            Some(arg) => {
                if let Some(Value::Array(args)) = settings.get_mut("args") {
                    args.retain(|a| a != arg);
                }
            }
            None => {
                settings.remove(*key);
            }
        }
    }
    spec
}

/// A scratch home, XDG directories and working directory, and the `PATH` to `bin`.
fn asking_env(bin: &Path, scratch: &Path, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let dir = |name: &str| {
        let path = scratch.join(name);
        let _ = std::fs::create_dir_all(&path);
        path.display().to_string()
    };
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_string(),
        format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
    );
    env.insert("HOME".to_string(), dir("home"));
    env.insert("XDG_CONFIG_HOME".to_string(), dir("home/.config"));
    env.insert("XDG_DATA_HOME".to_string(), dir("home/.local/share"));
    env.insert("XDG_STATE_HOME".to_string(), dir("home/.local/state"));
    env.insert("XDG_CACHE_HOME".to_string(), dir("home/.cache"));
    env.insert("PWD".to_string(), dir("work"));
    for (name, value) in extra {
        env.insert((*name).to_string(), (*value).to_string());
    }
    env
}

fn io(env: &BTreeMap<String, String>, deadline: Duration) -> Io {
    Io {
        deadline: tokio::time::Instant::now() + deadline,
        cancel: CancellationToken::new(),
        env: env_from_map(env.clone()),
        http: reqwest::Client::new(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("real_clis: {message}");
            std::process::exit(2);
        }
    };
    let entries = match load(&options.catalogue) {
        Ok(entries) => entries,
        Err(message) => {
            eprintln!("real_clis: {message}");
            std::process::exit(2);
        }
    };
    let registry = Registry::builtin();
    let adapter = registry.get("process").expect("`process` is registered");
    println!(
        "executables from {}, catalogue {}, deadline {:?} for retry loops",
        options.bin.display(),
        options.catalogue.display(),
        options.deadline
    );

    println!("\npreflights (as shipped, no login):");
    for id in ["codex-cli", "claude-cli"] {
        let Some(entry) = entries.iter().find(|e| e["id"] == id) else {
            continue;
        };
        let scratch = tempfile::tempdir().expect("a scratch dir");
        let env = asking_env(&options.bin, scratch.path(), &[]);
        let started = Instant::now();
        let verdict = preflight(&spec(entry, &[]), &io(&env, Duration::from_secs(10))).await;
        let verdict = match verdict {
            Ok(()) => "passed".to_string(),
            Err(f) => format!("{} — {}", f.kind.as_str(), f.diagnostic),
        };
        println!(
            "  {id:<11} {:>6.2} s  {verdict}",
            started.elapsed().as_secs_f64()
        );
    }

    println!("\nconsultations:");
    let mut mismatches = 0;
    for row in ROWS {
        let Some(entry) = entries.iter().find(|e| e["id"] == row.advisor) else {
            println!("  {:<11} not in the catalogue", row.advisor);
            mismatches += 1;
            continue;
        };
        let scratch = tempfile::tempdir().expect("a scratch dir");
        let env = asking_env(&options.bin, scratch.path(), row.asking);
        let timeout = if row.until_deadline {
            options.deadline
        } else {
            options.deadline.max(Duration::from_secs(60))
        };
        let started = Instant::now();
        let outcome = consult(
            adapter.as_ref(),
            &spec(entry, row.without),
            PROMPT,
            &io(&env, timeout),
        )
        .await;
        let took = started.elapsed().as_secs_f64();
        let (got, diagnostic) = match &outcome.result {
            Ok(n) => ("answer".to_string(), n.conclusion.clone()),
            Err(f) => (f.kind.as_str().to_string(), f.diagnostic.clone()),
        };
        let verdict = if got == row.expect.as_str() {
            "ok"
        } else {
            mismatches += 1;
            "MISMATCH"
        };
        println!(
            "  {:<11} {:<45} expected {:<12} got {:<12} {took:>6.2} s  {verdict}\n      \
             diagnostic: {diagnostic}",
            row.advisor,
            row.what,
            row.expect.as_str(),
            got
        );
    }
    if mismatches > 0 {
        println!("\n{mismatches} outcome(s) differ from the expected classification");
        std::process::exit(1);
    }
    println!("\nevery outcome classified as expected");
}
