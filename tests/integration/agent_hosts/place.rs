//! One host's world for the agent-host suite and its benchmark: a `$HOME` with the
//! host's own configuration, a project with scripted advisors, a runtime directory for the
//! daemon's socket, and the host registered as `docs/MCP.md` says or by `init`.

// The suite and its benchmark each use a part of this file.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The wait cap of the registration, in seconds.
pub const CAP_S: u64 = 3;

/// The host's own tool timeout in the registration, in seconds: above the cap with room
/// for the answer to travel.
pub const HOST_TIMEOUT_S: u64 = 10;

/// The slow advisor's delay in the `cap` and `exit` conversations, in milliseconds:
/// longer than the cap, shorter than two.
pub const SLOW_MS: u64 = 5_000;

/// The longest one host run may take.
pub const RUN_BOUND: Duration = Duration::from_secs(120);

/// The advisors of the project, in plan order.
pub const ADVISORS: [&str; 2] = ["alpha", "beta"];

/// The project's advisors: `(id, stance, milliseconds when slow)`, in plan order, and how
/// long each takes when `<advisors>/mode` is `fast`.
pub struct Cast {
    /// The advisors.
    pub advisors: Vec<(&'static str, &'static str, u64)>,
    /// Each one's delay in `fast` mode.
    pub fast_ms: u64,
}

impl Default for Cast {
    /// `alpha` supports at once; `beta` opposes, after [`SLOW_MS`] when slow.
    fn default() -> Cast {
        Cast {
            advisors: vec![
                (ADVISORS[0], "supports", 100),
                (ADVISORS[1], "opposes", SLOW_MS),
            ],
            fast_ms: 100,
        }
    }
}

/// Where the hosts are: `ADVISORD_REAL_CLIS`, else the cache the install script fills.
pub fn host_dir() -> PathBuf {
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

pub fn host_path(host: &str) -> PathBuf {
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
pub struct Place {
    dir: tempfile::TempDir,
    host: &'static str,
    base_url: String,
}

/// Who registers advisord with the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// The test, exactly as `docs/MCP.md` shows (cap 3 s under a 10 s host timeout).
    Docs,
    /// `advisor-consult init --hosts HOST` alone (cap 50 s under a 120 s host timeout).
    Init,
    /// Not registered: the host alone (for its own start-up cost).
    Bare,
}

impl Place {
    pub fn new(host: &'static str, base_url: &str, by: Registration) -> Place {
        Place::with_cast(host, base_url, by, &Cast::default())
    }

    /// A place whose advisors are `cast`'s.
    pub fn with_cast(host: &'static str, base_url: &str, by: Registration, cast: &Cast) -> Place {
        let dir = tempfile::Builder::new()
            .prefix(&format!("host-{host}-"))
            .tempdir()
            .expect("a temp dir");
        let place = Place {
            dir,
            host,
            base_url: base_url.to_owned(),
        };
        for sub in ["home", "work/.advisord", "bin", "run", "advisors", "tmp"] {
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
        place.catalogue(cast);
        place.set_mode("fast");
        place.user_setup();
        match by {
            Registration::Docs => place.register(),
            Registration::Init => place.init(),
            Registration::Bare => {}
        }
        place
    }

    pub fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    pub fn work(&self) -> PathBuf {
        self.path("work")
    }

    /// Two scripted advisors that disagree; `<advisors>/mode` says how fast beta is.
    fn catalogue(&self, cast: &Cast) {
        let dir = self.path("advisors");
        let exe = env!("CARGO_BIN_EXE_advisor-consult");
        let mut yaml = String::from("mode: strict\nadvisors:\n");
        for (i, (id, stance, slow)) in cast.advisors.iter().enumerate() {
            let fast = cast.fast_ms;
            let script = dir.join(format!("{id}.sh"));
            std::fs::write(
                &script,
                format!(
                    "#!/bin/sh\necho $$ >> {dir}/pids-{id}\nmode=$(/bin/cat {dir}/mode)\n\
                     case \"$mode\" in\n  fast) d={fast} ;;\n  *) d={slow} ;;\nesac\n\
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

    pub fn set_mode(&self, mode: &str) {
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

    /// `advisor-consult init --hosts HOST` in the project, and nothing else (after a dry
    /// run, which shows each change as a diff and writes nothing).
    fn init(&self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
        self.env(&mut command);
        let out = command
            .args([
                "init",
                "--hosts",
                self.host,
                "--dry-run",
                "--format",
                "json",
            ])
            .output()
            .expect("init runs");
        let preview: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "init --dry-run --format json is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let changes = preview["changes"].as_array().expect("changes");
        assert!(
            changes.iter().all(|c| c["action"] == "create"
                && c["diff"].as_str().is_some_and(|d| d.starts_with('+'))),
            "{preview}"
        );
        assert!(
            !self.work().join("AGENTS.md").exists(),
            "a dry run wrote AGENTS.md"
        );
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
    pub fn env(&self, command: &mut Command) {
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
            // The hosts' own temporary files (error reports, locks) stay in the place.
            .env("TMPDIR", self.path("tmp"))
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
    pub fn host_command(&self, prompt: &str) -> Command {
        let mut command = Command::new(self.path("bin").join(self.host));
        match self.host {
            "claude" => command.args(["-p", prompt, "--output-format", "json"]),
            "gemini" => command.args(["-p", prompt]),
            "codex" => command.args(["exec", "--skip-git-repo-check", prompt]),
            other => panic!("no command for `{other}`"),
        };
        self.env(&mut command);
        // A group of its own, so that ending the host ends what it started too (the npm
        // wrappers start the real program as a child, which a kill of the wrapper alone
        // left running, writing into the place after the test removed it).
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        command
    }

    /// Run the host to its end (bounded): its standard output and error.
    pub fn run(&self, prompt: &str) -> (i32, String, String) {
        let child = self.host_command(prompt).spawn().expect("the host starts");
        let mut child = Reaped(child);
        let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_string(&mut text);
                }
                text
            })
        };
        let stdout = read(child.0.stdout.take().map(|p| Box::new(p) as _));
        let stderr = read(child.0.stderr.take().map(|p| Box::new(p) as _));
        let started = Instant::now();
        let code = loop {
            match child.0.try_wait() {
                Ok(Some(status)) => break status.code().unwrap_or(-1),
                Ok(None) if started.elapsed() > RUN_BOUND => {
                    child.end();
                    panic!("{} did not end within {RUN_BOUND:?}", self.host);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("cannot wait for {}: {e}", self.host),
            }
        };
        (
            code,
            stdout.join().expect("stdout"),
            stderr.join().expect("stderr"),
        )
    }

    /// `advisor-consult` in the project, as the user would run it.
    pub fn cli(&self, args: &[&str]) -> Value {
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

    pub fn pids(&self, advisor: &str) -> usize {
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

/// A host started by [`Place::host_command`] (the leader of its own process group),
/// ended with its group and reaped on drop.
pub struct Reaped(pub Child);

impl Reaped {
    /// Kill the host and every process of its group, and reap the host.
    pub fn end(&mut self) {
        let group = i32::try_from(self.0.id()).map(nix::unistd::Pid::from_raw);
        let killed = group.is_ok_and(|group| {
            nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).is_ok()
        });
        if !killed {
            // No group left to signal (all of it gone already): the host alone, if any.
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        self.end();
    }
}
