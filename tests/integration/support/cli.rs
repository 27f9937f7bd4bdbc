//! Runs the real `advisor-consult` binary on a temporary project, in a clean environment,
//! and reads like a sentence:
//!
//! ```ignore
//! Cli::new().args(["status", "--format", "json"]).run().expect_exit(0).expect_json("/records", 0);
//! ```
//!
//! Every run is `--no-daemon`, with `--root` and `--state-dir` in a temporary directory,
//! `env_clear()`ed, and `PATH` pointing at an empty temporary `bin` so that no real advisor
//! is ever found. A run that does not end within [`RUN_BOUND`] is killed and fails the test.

#![allow(dead_code)]

use serde_json::Value;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

pub use super::output::Output;

/// The longest a single run may take before it is killed as hung.
pub const RUN_BOUND: Duration = Duration::from_secs(30);

/// A temporary project: a root, a state directory and an empty `bin` for `PATH`.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// A fresh project; the root holds nothing.
    pub fn new() -> Rc<Project> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for sub in ["root", "bin", "home"] {
            std::fs::create_dir(dir.path().join(sub)).expect("create a project directory");
        }
        Rc::new(Project { dir })
    }

    /// The project root.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The state directory (`--state-dir`); created by the first write.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The only directory on `PATH`.
    pub fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// The temporary directory holding root, state and bin (for files outside the root).
    pub fn outside(&self) -> &Path {
        self.dir.path()
    }

    /// Write `text` to `relative` under the root (parents created); returns the path.
    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create parents");
        std::fs::write(&path, text).expect("write a project file");
        path
    }

    /// Trust the root's catalogue as it is now, in the runs' config directory (as
    /// `advisor-consult trust` would, without judging the file).
    pub fn trust_catalogue(&self) {
        let file = self.root().join(".advisord/advisors.yaml");
        let content = std::fs::read(&file).expect("read the catalogue");
        let config = self.outside().join("home/.config/advisord");
        advisord::trust::trust(&config, &file, &content).expect("trust the catalogue");
    }

    /// Put an executable called `name` on the run's `PATH`.
    pub fn install(&self, name: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.bin().join(name);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").expect("write an executable");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make it executable");
    }

    /// Every path under the temporary directory, relative to it, sorted.
    pub fn files(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("read a directory") {
                let path = entry.expect("a directory entry").path();
                out.push(
                    path.strip_prefix(base)
                        .expect("under the base")
                        .display()
                        .to_string(),
                );
                if path.is_dir() {
                    walk(&path, base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), self.dir.path(), &mut out);
        out.sort();
        out
    }

    /// A run of `advisor-consult` in this project.
    pub fn cli(self: &Rc<Project>) -> Cli {
        Cli {
            project: Rc::clone(self),
            args: Vec::new(),
            env: Vec::new(),
            stdin: Input::Null,
            with_root: true,
            with_state: true,
            cwd: None,
        }
    }

    /// The data directory of the runs (from their `HOME`): this machine's attestation key
    /// and anchored heads.
    pub fn data(&self) -> PathBuf {
        self.outside().join("home/.local/state/advisord")
    }

    /// Record `input`, a consultation of task `default`, as a daemon's job would: through
    /// the store's internal path, attested with the runs' key. `record` refuses
    /// consultations; this stands in for a consultation job.
    pub fn record_consultation(&self, input: Value) -> Value {
        self.record_consultation_in("default", input)
    }

    /// [`Project::record_consultation`] in `task`.
    pub fn record_consultation_in(&self, task: &str, input: Value) -> Value {
        // This test process judges and attests with the runs' data directory.
        advisord::machine::install(&self.data());
        let store = advisord::store::Store::open(&self.state());
        let task = advisord::core::records::TaskName::new(task).expect("a task name");
        let provenance = advisord::store::Provenance {
            job: "01JTESTJOB0000000000000000",
            source: None,
            counts: true,
            secrets: &[],
        };
        let record = store
            .write_consultation(&task, &input, &provenance)
            .unwrap_or_else(|e| panic!("consultation {input} not written: {e}"));
        serde_json::to_value(record).expect("a record serialises")
    }

    /// Record `input` (a JSON object) and return the stored record.
    pub fn record(self: &Rc<Project>, input: Value) -> Value {
        self.cli()
            .args(["record", "--file", "-", "--format", "json"])
            .stdin(&input.to_string())
            .run()
            .expect_exit(0)
            .json()
    }
}

enum Input {
    Null,
    Text(String),
    /// A pipe that is never written to nor closed while the process runs.
    OpenPipe,
}

/// One invocation being built.
pub struct Cli {
    project: Rc<Project>,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    stdin: Input,
    with_root: bool,
    with_state: bool,
    cwd: Option<PathBuf>,
}

impl Cli {
    /// A run in a fresh project of its own.
    pub fn new() -> Cli {
        Project::new().cli()
    }

    /// The project this run belongs to.
    pub fn project(&self) -> Rc<Project> {
        Rc::clone(&self.project)
    }

    /// Append arguments.
    pub fn args<I, S>(mut self, args: I) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set an environment variable (the environment is otherwise empty but for `PATH`
    /// and `HOME`).
    pub fn env(mut self, name: &str, value: &str) -> Cli {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Feed `text` on standard input, then close it.
    pub fn stdin(mut self, text: &str) -> Cli {
        self.stdin = Input::Text(text.to_string());
        self
    }

    /// Hold standard input open (never written, never closed) for the whole run.
    pub fn stdin_open(mut self) -> Cli {
        self.stdin = Input::OpenPipe;
        self
    }

    /// Do not pass `--root` (the binary resolves it from the working directory).
    pub fn without_root(mut self) -> Cli {
        self.with_root = false;
        self
    }

    /// Do not pass `--state-dir` (the binary uses `<root>/.ai/local/state/reasoning`).
    pub fn without_state_dir(mut self) -> Cli {
        self.with_state = false;
        self
    }

    /// Run in `dir` instead of the project root.
    pub fn current_dir(mut self, dir: &Path) -> Cli {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// Run the binary to its end (bounded by [`RUN_BOUND`]).
    pub fn run(self) -> Output {
        let project = &self.project;
        let mut command = Command::new(env!("CARGO_BIN_EXE_advisor-consult"));
        command
            .env_clear()
            .env("PATH", project.bin())
            .env("HOME", project.outside().join("home"))
            .current_dir(self.cwd.clone().unwrap_or_else(|| project.root()))
            .arg("--no-daemon");
        if self.with_root {
            command.arg("--root").arg(project.root());
        }
        if self.with_state {
            command.arg("--state-dir").arg(project.state());
        }
        command.args(&self.args);
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(match self.stdin {
                Input::Null => Stdio::null(),
                Input::Text(_) | Input::OpenPipe => Stdio::piped(),
            });
        let mut child = command.spawn().expect("spawn advisor-consult");
        // Held until the child has ended, so an open pipe stays open for the whole run.
        let mut held_stdin = child.stdin.take();
        let (stdout, stderr) = drain(&mut child);
        if let (Input::Text(text), Some(mut pipe)) = (&self.stdin, held_stdin.take()) {
            pipe.write_all(text.as_bytes())
                .expect("write standard input");
        }
        let description = format!("advisor-consult {:?}", self.args);
        let status = wait_bounded(&mut child, &description);
        drop(held_stdin);
        Output {
            description,
            code: status.code().unwrap_or(-1),
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
        }
    }
}

type Reader = std::thread::JoinHandle<String>;

fn drain(child: &mut Child) -> (Reader, Reader) {
    fn read_all(mut pipe: impl std::io::Read + Send + 'static) -> Reader {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    }
    (
        read_all(child.stdout.take().expect("stdout piped")),
        read_all(child.stderr.take().expect("stderr piped")),
    )
}

fn wait_bounded(child: &mut Child, description: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + RUN_BOUND;
    loop {
        if let Some(status) = child.try_wait().expect("wait for advisor-consult") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{description} did not end within {RUN_BOUND:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
