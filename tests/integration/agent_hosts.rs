//! Agents in the hosts they really run in: `claude -p`, `codex exec` and `gemini -p`, at
//! the versions `scripts/install-real-clis.sh` pins, drive `advisor-consult mcp` end to end,
//! each registered the way `docs/MCP.md` says and with nothing else. The model behind each
//! host is `fake-llm-server` acting as an agent (it calls advisord's tools by the end of
//! their names, in the host's wire format, and keeps what the host sent back), so a test
//! asserts on what the host passed to the model.
//!
//! Per host, three conversations on one project whose two scripted advisors disagree:
//! - **consult**: an inline assessment consulted (the records exist; the tool result the
//!   model received carries both stances and the disagreement), then a refusal
//!   (`material_without_evidence`) and an unknown job id, each reaching the model with
//!   advisord's message and reason code;
//! - **cap**: the registration's wait cap (3 s) is below the host's own tool timeout (10 s,
//!   the pair `init` writes), one advisor takes 5 s: the model receives the partial
//!   outcome and the job id at the cap, never a timeout, then `job` with `wait` collects
//!   the rest;
//! - **exit**: the host is killed mid-job; the job finishes in the daemon and is recorded.
//!
//! Plus the MCP Inspector's CLI (`@modelcontextprotocol/inspector`, a TypeScript-SDK
//! client) as a fourth client: `tools/list`, a consult and a refusal.
//!
//! The hosts are found as the real-CLI suite finds them (`ADVISORD_REAL_CLIS`, else the
//! install script's cache); when one is missing the suite FAILS and says how to install it.

use advisord_fakes::llm_server::{Action, FakeLlmServer, Reply, Script};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The wait cap of the registration, in seconds.
const CAP_S: u64 = 3;

/// The host's own tool timeout in the registration, in seconds: above the cap with room
/// for the answer to travel.
const HOST_TIMEOUT_S: u64 = 10;

/// The slow advisor's delay in the `cap` and `exit` conversations, in milliseconds:
/// longer than the cap, shorter than two.
const SLOW_MS: u64 = 5_000;

/// The longest one host run may take.
const RUN_BOUND: Duration = Duration::from_secs(120);

/// The advisors of the project, in plan order.
const ADVISORS: [&str; 2] = ["alpha", "beta"];

/// An id no job has.
const NO_JOB: &str = "01JZZZZZZZZZZZZZZZZZZZZZZZ";

fn assessment(subject: &str) -> Value {
    json!({
        "subject": subject,
        "materiality": "critical",
        "hypothesis": "WAL mode is enough for one writer",
        "evidence": [{"kind": "file", "ref": "src/queue.rs", "showed": "one writer"}],
    })
}

/// The conversations, each chosen by a phrase of the prompt.
fn script() -> Script {
    let consult = Reply::agent([
        Action::call(
            "consult",
            json!({"record": assessment("Use SQLite for the job queue")}),
        ),
        Action::call(
            "consult",
            json!({"record": {"subject": "Drop the cache", "materiality": "high",
                              "hypothesis": "nobody reads it"}}),
        ),
        Action::call("job", json!({"id": NO_JOB})),
        Action::say("AGENT-DONE"),
    ]);
    let cap = Reply::agent([
        Action::call(
            "consult",
            json!({"record": assessment("Use Postgres for the job queue")}),
        ),
        Action::call("job", json!({"id": "{{last.id}}", "wait": true})),
        Action::say("AGENT-DONE"),
    ]);
    let exit = Reply::agent([
        Action::call(
            "consult",
            json!({"record": assessment("Use Redis for the job queue")}),
        ),
        Action::say("AGENT-DONE"),
    ]);
    Script::new()
        .phrase("AGENT-CONSULT", consult)
        .phrase("AGENT-CAP", cap)
        .phrase("AGENT-EXIT", exit)
}

/// Where the hosts are: `ADVISORD_REAL_CLIS`, else the cache the install script fills.
fn host_dir() -> PathBuf {
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

fn host_path(host: &str) -> PathBuf {
    let path = host_dir().join(host);
    assert!(
        path.exists(),
        "`{}` is missing: run `scripts/install-real-clis.sh` (`scripts/test` and `.ci/run` \
         do); this suite never skips a host",
        path.display()
    );
    path
}

/// One host's world: `$HOME` with the host's own config, the project, a runtime directory
/// for the daemon's socket, and a `bin` with the host and advisord's two binaries.
struct Place {
    dir: tempfile::TempDir,
    host: &'static str,
    base_url: String,
    by: Registration,
}

/// Who registers advisord with the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registration {
    /// The test, exactly as `docs/MCP.md` shows (cap 3 s under a 10 s host timeout).
    Docs,
    /// `advisor-consult init --hosts HOST` alone (cap 50 s under a 120 s host timeout).
    Init,
}

impl Place {
    fn new(host: &'static str, base_url: &str, by: Registration) -> Place {
        let dir = tempfile::Builder::new()
            .prefix(&format!("host-{host}-"))
            .tempdir()
            .expect("a temp dir");
        let place = Place {
            dir,
            host,
            base_url: base_url.to_owned(),
            by,
        };
        for sub in ["home", "work/.advisord", "bin", "run", "advisors"] {
            std::fs::create_dir_all(place.path(sub)).expect("a directory");
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(place.path("run"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod run");
        std::os::unix::fs::symlink(host_path(host), place.path("bin").join(host))
            .expect("link the host");
        for exe in [
            env!("CARGO_BIN_EXE_advisor-consult"),
            env!("CARGO_BIN_EXE_advisord"),
        ] {
            let name = Path::new(exe).file_name().expect("a name");
            std::os::unix::fs::symlink(exe, place.path("bin").join(name)).expect("link");
        }
        place.catalogue();
        place.set_mode("fast");
        place.user_setup();
        match by {
            Registration::Docs => place.register(),
            Registration::Init => place.init(),
        }
        place
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    fn work(&self) -> PathBuf {
        self.path("work")
    }

    /// Two scripted advisors that disagree; `<advisors>/mode` says how fast beta is.
    fn catalogue(&self) {
        let dir = self.path("advisors");
        let exe = env!("CARGO_BIN_EXE_advisor-consult");
        let mut yaml = String::from("mode: strict\nadvisors:\n");
        for (i, id) in ADVISORS.iter().enumerate() {
            let stance = if i == 0 { "supports" } else { "opposes" };
            let slow = if i == 0 { 100 } else { SLOW_MS };
            let script = dir.join(format!("{id}.sh"));
            std::fs::write(
                &script,
                format!(
                    "#!/bin/sh\necho $$ >> {dir}/pids-{id}\nmode=$(/bin/cat {dir}/mode)\n\
                     case \"$mode\" in\n  fast) d=100 ;;\n  *) d={slow} ;;\nesac\n\
                     exec {exe} __demo-advisor --stance {stance} --delay-ms $d\n",
                    dir = dir.display(),
                ),
            )
            .expect("an advisor script");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            yaml.push_str(&format!(
                "  - id: {id}\n    title: Scripted {id}\n    transport: process\n    \
                 adapter: process\n    references: {{ provider: p{i}, vendor: v{i}, model: m{i} }}\n    \
                 executable: {script:?}\n    capabilities: [independent_reasoning]\n"
            ));
        }
        let file = self.work().join(".advisord/advisors.yaml");
        std::fs::write(&file, &yaml).expect("the catalogue");
        advisord::trust::trust(&self.path("home/.config/advisord"), &file, yaml.as_bytes())
            .expect("trust the catalogue");
    }

    fn set_mode(&self, mode: &str) {
        std::fs::write(self.path("advisors/mode"), mode).expect("mode");
    }

    fn write(&self, path: PathBuf, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(path, text).expect("a config file");
    }

    /// What a user has before advisord: the host pointed at the fake model (as at a
    /// provider) and the project trusted once (what a person does at the host's first
    /// start in it).
    fn user_setup(&self) {
        let home = self.path("home");
        let work = self.work().display().to_string();
        match self.host {
            "claude" => {
                self.write(
                    home.join(".claude/settings.json"),
                    &json!({"env": {"ANTHROPIC_BASE_URL": self.base_url}}).to_string(),
                );
                self.write(
                    home.join(".claude.json"),
                    &json!({"projects": {work: {"hasTrustDialogAccepted": true}}}).to_string(),
                );
            }
            "gemini" => {
                self.write(
                    home.join(".gemini/settings.json"),
                    &json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
                            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                            "privacy": {"usageStatisticsEnabled": false},
                            "telemetry": {"enabled": false}})
                    .to_string(),
                );
                self.write(
                    home.join(".gemini/trustedFolders.json"),
                    &json!({work: "TRUST_FOLDER"}).to_string(),
                );
            }
            "codex" => {
                self.write(
                    home.join(".codex/config.toml"),
                    &format!(
                        "model_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\n\
                         base_url = \"{}/v1\"\nenv_key = \"CODEX_API_KEY\"\nwire_api = \"responses\"\n\n\
                         [projects.\"{work}\"]\ntrust_level = \"trusted\"\n",
                        self.base_url
                    ),
                );
            }
            // The inspector is configured on its command line.
            "mcp-inspector" => {}
            other => panic!("no setup for `{other}`"),
        }
    }

    /// advisord registered as `docs/MCP.md` says: the server with its cap below the
    /// host's timeout, and the approvals for exactly advisord's tools.
    fn register(&self) {
        let work = self.work();
        let server_args = json!(["mcp", "--wait-cap", CAP_S.to_string()]);
        let tools = [
            "advisors", "plan", "status", "explain", "job", "consult", "cancel",
        ];
        match self.host {
            "claude" => {
                self.write(
                    work.join(".mcp.json"),
                    &json!({"mcpServers": {"advisord": {
                        "command": "advisor-consult", "args": server_args,
                        "timeout": HOST_TIMEOUT_S * 1000}}})
                    .to_string(),
                );
                let allow: Vec<String> = tools
                    .iter()
                    .map(|t| format!("mcp__advisord__{t}"))
                    .collect();
                self.write(
                    work.join(".claude/settings.json"),
                    &json!({"enabledMcpjsonServers": ["advisord"],
                            "permissions": {"allow": allow}})
                    .to_string(),
                );
            }
            "gemini" => {
                self.write(
                    work.join(".gemini/settings.json"),
                    &json!({"mcpServers": {"advisord": {
                        "command": "advisor-consult", "args": server_args,
                        "timeout": HOST_TIMEOUT_S * 1000, "trust": true,
                        "includeTools": tools}}})
                    .to_string(),
                );
            }
            "codex" => {
                let quoted: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
                self.write(
                    work.join(".codex/config.toml"),
                    &format!(
                        "[mcp_servers.advisord]\ncommand = \"advisor-consult\"\n\
                         args = [\"mcp\", \"--wait-cap\", \"{CAP_S}\"]\n\
                         tool_timeout_sec = {HOST_TIMEOUT_S}\n\
                         enabled_tools = [{}]\n\
                         default_tools_approval_mode = \"approve\"\n\
                         env_vars = [\"XDG_RUNTIME_DIR\"]\n",
                        quoted.join(", ")
                    ),
                );
            }
            "mcp-inspector" => {}
            other => panic!("no registration for `{other}`"),
        }
    }

    /// `advisor-consult init --hosts HOST` in the project, and nothing else.
    fn init(&self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
        self.env(&mut command);
        let out = command
            .args(["init", "--hosts", self.host])
            .output()
            .expect("init runs");
        assert!(
            out.status.success(),
            "init failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The environment of every process: nothing of the test's own.
    fn env(&self, command: &mut Command) {
        command
            .env_clear()
            .env("HOME", self.path("home"))
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin",
                    self.path("bin").display()
                ),
            )
            .env("LANG", "C.UTF-8")
            .env("XDG_RUNTIME_DIR", self.path("run"))
            .current_dir(self.work());
        match self.host {
            "claude" => {
                command.env("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key");
            }
            "gemini" => {
                command
                    .env("GEMINI_API_KEY", "not-a-real-key")
                    .env("GOOGLE_GEMINI_BASE_URL", &self.base_url);
            }
            "codex" => {
                command.env("CODEX_API_KEY", "sk-not-a-real-key");
            }
            _ => {}
        }
    }

    /// The host, non-interactive, asked `prompt`.
    fn host_command(&self, prompt: &str) -> Command {
        let mut command = Command::new(self.path("bin").join(self.host));
        match self.host {
            "claude" => command.args(["-p", prompt, "--output-format", "json"]),
            "gemini" => command.args(["-p", prompt]),
            "codex" => command.args(["exec", "--skip-git-repo-check", prompt]),
            other => panic!("no command for `{other}`"),
        };
        self.env(&mut command);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Run the host to its end (bounded): its standard output and error.
    fn run(&self, prompt: &str) -> (i32, String, String) {
        let child = self.host_command(prompt).spawn().expect("the host starts");
        let mut child = Reaped(child);
        let stdout = crate::support::client::read_all(child.0.stdout.take().expect("stdout"));
        let stderr = crate::support::client::read_all(child.0.stderr.take().expect("stderr"));
        let code = crate::support::client::wait_bounded(&mut child.0, RUN_BOUND, self.host);
        (
            code,
            stdout.join().expect("stdout"),
            stderr.join().expect("stderr"),
        )
    }

    /// `advisor-consult` in the project, as the user would run it.
    fn cli(&self, args: &[&str]) -> Value {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
        self.env(&mut command);
        let out = command
            .args(args)
            .args(["--format", "json"])
            .output()
            .expect("advisor-consult runs");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    fn pids(&self, advisor: &str) -> usize {
        std::fs::read_to_string(self.path(&format!("advisors/pids-{advisor}")))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
        self.env(&mut command);
        let _ = command
            .args(["daemon", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A child killed and reaped on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The tool results the host sent back to the model in the conversation named `phrase`
/// (the last request of it carries them all).
fn results_of(server: &FakeLlmServer, phrase: &str) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.body.to_string().contains(phrase))
        .map(|r| r.tool_results())
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

fn drive(host: &'static str, by: Registration) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let server = runtime.block_on(FakeLlmServer::start(script()));
    let place = Place::new(host, &server.base_url(), by);
    let phrase = |name: &str| format!("AGENT-{name} ({host}, {by:?})");

    // consult, a refusal, an unknown job.
    let prompt = phrase("CONSULT");
    let started = Instant::now();
    let (code, stdout, stderr) = place.run(&prompt);
    eprintln!(
        "{host} consult: exit {code} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let results = results_of(&server, &prompt);
    assert_eq!(
        results.len(),
        3,
        "{host} passed {} tool results to the model: {results:#?}\nstdout: {stdout}\nstderr: {stderr}",
        results.len()
    );
    let tools: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(&prompt))
        .flat_map(|r| r.tool_names())
        .collect();
    eprintln!("{host} offered the model: {tools:?}");
    let consulted = &results[0];
    for needle in [
        "supports",
        "opposes",
        "discriminating_question",
        "alpha",
        "beta",
    ] {
        assert!(
            consulted.contains(needle),
            "{host}: the consult result the model received lacks `{needle}`: {consulted}"
        );
    }
    assert!(
        results[1].contains("material_without_evidence") && results[1].contains("evidence"),
        "{host}: the refusal did not reach the model with its reason code: {}",
        results[1]
    );
    assert!(
        results[2].contains("unknown_job") && results[2].contains(NO_JOB),
        "{host}: the unknown job did not reach the model with its code: {}",
        results[2]
    );
    assert!(
        stdout.contains("AGENT-DONE"),
        "{host} did not finish: {stdout}\n{stderr}"
    );
    let status = place.cli(&["status"]);
    assert!(
        status["records"].as_u64().unwrap_or(0) >= 5,
        "{host}: the records of the consult: {status}"
    );

    // The cap: partial outcomes and the job id at the cap, then `job` collects the rest.
    place.set_mode("split");
    let prompt = phrase("CAP");
    let started = Instant::now();
    let (code, stdout, stderr) = place.run(&prompt);
    eprintln!(
        "{host} cap: exit {code} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let results = results_of(&server, &prompt);
    assert_eq!(
        results.len(),
        2,
        "{host}: {results:#?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    match by {
        // The cap (3 s) passes before the slow advisor (5 s) answers.
        Registration::Docs => assert!(
            results[0].contains("running") && results[0].contains("supports"),
            "{host}: at the cap the model gets the partial outcome and the running job: {}",
            results[0]
        ),
        // `init`'s cap (50 s) waits for both.
        Registration::Init => assert!(
            results[0].contains("done") && results[0].contains("opposes"),
            "{host}: under init's cap the consult ends in one call: {}",
            results[0]
        ),
    }
    assert!(
        !results[0].to_lowercase().contains("timed out"),
        "{host}: the host timed out before the cap: {}",
        results[0]
    );
    assert!(
        results[1].contains("done") && results[1].contains("opposes"),
        "{host}: `job` with wait collects the rest: {}",
        results[1]
    );

    // The host exits mid-job: the job finishes in the daemon and is recorded.
    let prompt = phrase("EXIT");
    let before = place.pids("beta");
    let child = place
        .host_command(&prompt)
        .spawn()
        .expect("the host starts");
    let mut child = Reaped(child);
    let started = Instant::now();
    while place.pids("beta") == before {
        assert!(
            started.elapsed() < RUN_BOUND,
            "{host}: the advisors never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.0.kill();
    let _ = child.0.wait();
    let jobs = place.cli(&["jobs"]);
    let job = jobs["jobs"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .filter(|j| j["state"] == "running" || j["state"] == "queued")
                .last()
                .or(all.last())
        })
        .and_then(|j| j["id"].as_str())
        .unwrap_or_else(|| panic!("{host}: no job: {jobs}"))
        .to_string();
    let waited = place.cli(&["wait", &job, "--timeout", "30"]);
    assert_eq!(waited["state"], "done", "{host}: {waited}");
    for c in waited["consultations"].as_array().expect("consultations") {
        assert_eq!(c["status"], "completed", "{host}: {c}");
    }
    drop(place);
    runtime.block_on(server.shutdown());
}

#[test]
fn claude_code_drives_advisord_registered_as_the_docs_say() {
    drive("claude", Registration::Docs);
}

#[test]
fn gemini_cli_drives_advisord_registered_as_the_docs_say() {
    drive("gemini", Registration::Docs);
}

#[test]
fn codex_drives_advisord_registered_as_the_docs_say() {
    drive("codex", Registration::Docs);
}

#[test]
fn claude_code_drives_advisord_in_a_repository_prepared_by_init() {
    drive("claude", Registration::Init);
}

#[test]
fn gemini_cli_drives_advisord_in_a_repository_prepared_by_init() {
    drive("gemini", Registration::Init);
}

#[test]
fn codex_drives_advisord_in_a_repository_prepared_by_init() {
    drive("codex", Registration::Init);
}

/// The MCP Inspector's CLI on the server, once: its JSON answer.
fn inspect(place: &Place, args: &[&str]) -> Value {
    let mut command = Command::new(place.path("bin").join("mcp-inspector"));
    place.env(&mut command);
    let out = command
        .args(["--cli", "advisor-consult", "mcp", "--wait-cap", "30"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the inspector runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the inspector's answer to {args:?} is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn the_mcp_inspector_lists_consults_and_sees_a_refusal() {
    let place = Place::new("mcp-inspector", "http://127.0.0.1:9", Registration::Docs);
    let listed = inspect(&place, &["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["advisors", "plan", "record", "consult", "job", "cancel", "status", "explain"]
    );
    let record = format!("record={}", assessment("Use SQLite for the job queue"));
    let consulted = inspect(
        &place,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "consult",
            "--tool-arg",
            &record,
        ],
    );
    assert_ne!(consulted["isError"], true, "{consulted}");
    let job = &consulted["structuredContent"];
    assert_eq!(job["state"], "done", "{consulted}");
    let stances: Vec<&str> = job["consultations"]
        .as_array()
        .expect("consultations")
        .iter()
        .filter_map(|c| c["stance"].as_str())
        .collect();
    assert_eq!(stances, ["supports", "opposes"], "{job}");
    assert!(
        job["disagreement_detail"]["discriminating_question"].is_string(),
        "{job}"
    );
    // A refusal: a tool error the TypeScript SDK accepts (no structured content to fail
    // the output schema), carrying the reason code.
    let refused = inspect(
        &place,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "record",
            "--tool-arg",
            r#"record={"kind":"assessment","subject":"x","materiality":"high","hypothesis":"h"}"#,
        ],
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("refused (material_without_evidence)"),
        "{refused}"
    );
    let unknown = inspect(
        &place,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "job",
            "--tool-arg",
            &format!("id={NO_JOB}"),
        ],
    );
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert!(unknown.to_string().contains("unknown_job"), "{unknown}");
}

/// `S (sleeping)`, `Z (zombie)`, ... of `pid`, and its parent; `None` once it is gone.
fn state_and_parent(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rfind(')').and_then(|i| stat.get(i + 2..))?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// An advisor CLI that leaves a process behind (as `codex` leaves its background `git
/// ls-remote`): the orphan comes to the daemon, a child subreaper, and exits there; the
/// daemon reaps it instead of keeping one zombie per consultation.
#[test]
fn the_daemon_reaps_the_orphans_an_advisor_cli_leaves() {
    let world = crate::support::client::World::new(&[]);
    let dir = world.root().parent().expect("a parent").join("orphans");
    std::fs::create_dir_all(&dir).expect("a directory");
    let script = dir.join("leaves-one.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n/usr/bin/env -i /bin/sleep 0.5 >/dev/null 2>&1 &\necho $! >> {orphans}\n\
             exec {exe} __demo-advisor --stance supports --delay-ms 50\n",
            orphans = dir.join("pids").display(),
            exe = env!("CARGO_BIN_EXE_advisor-consult"),
        ),
    )
    .expect("the script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(
        world.root().join(".advisord/advisors.yaml"),
        format!(
            "mode: strict\nadvisors:\n  - id: leaver\n    title: Leaves an orphan\n    \
             transport: process\n    adapter: process\n    \
             references: {{ provider: p, vendor: v, model: m }}\n    \
             executable: {script:?}\n    capabilities: [independent_reasoning]\n"
        ),
    )
    .expect("the catalogue");
    world.trust_catalogue();
    for _ in 0..3 {
        let assessment = world.assessment();
        world.run(&["--assessment", &assessment]).expect_exit(0);
    }
    let daemon = world.daemon_pid().expect("the daemon runs");
    let orphans: Vec<i32> = std::fs::read_to_string(dir.join("pids"))
        .expect("the orphans' pids")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(orphans.len(), 3);
    let started = Instant::now();
    loop {
        let zombies: Vec<i32> = orphans
            .iter()
            .copied()
            .filter(|&pid| state_and_parent(pid) == Some(('Z', daemon)))
            .collect();
        let alive: Vec<i32> = orphans
            .iter()
            .copied()
            .filter(|&pid| state_and_parent(pid).is_some_and(|(_, parent)| parent == daemon))
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the daemon keeps {} zombie(s) of the orphans it inherited: {zombies:?} (of {alive:?})",
            zombies.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::support::client::stop(daemon);
}
