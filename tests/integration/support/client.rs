//! A temporary world for `advisor-consult` against a real `advisord`: a project root with
//! a catalogue of scripted process advisors, a socket, a data directory and a home, all
//! under one temporary directory. Every daemon a test starts (itself, or through the
//! client's autostart) is stopped when the [`World`] is dropped, and every run is bounded.
//!
//! `tests/helper/mod.rs` (the `cli` helper's) always runs `--no-daemon`, so the daemon
//! tests use this module instead.

#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use super::output::Output;

/// The longest a single run may take before it is killed as hung.
pub const RUN_BOUND: Duration = Duration::from_secs(30);

/// How long a daemon may take to answer on its socket.
pub const START_BOUND: Duration = Duration::from_secs(10);

/// The client binary under test.
pub fn client_exe() -> &'static str {
    env!("CARGO_BIN_EXE_advisor-consult")
}

/// The daemon binary under test.
pub fn daemon_exe() -> &'static str {
    env!("CARGO_BIN_EXE_advisord")
}

/// One scripted advisor of the test catalogue (this binary's hidden demo-advisor mode).
#[derive(Debug, Clone)]
pub struct Advisor {
    /// Its id.
    pub id: &'static str,
    /// The stance it answers with.
    pub stance: &'static str,
    /// How long it takes.
    pub delay_ms: u64,
    /// Fail with this exit status instead of answering (0: answer).
    pub exit: i32,
}

impl Advisor {
    /// An advisor that answers with `stance` after `delay_ms`.
    pub fn new(id: &'static str, stance: &'static str, delay_ms: u64) -> Advisor {
        Advisor {
            id,
            stance,
            delay_ms,
            exit: 0,
        }
    }

    /// The same advisor, failing with `status` after its delay.
    pub fn failing(mut self, status: i32) -> Advisor {
        self.exit = status;
        self
    }
}

/// A temporary world; dropping it stops every daemon it knows of.
pub struct World {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

impl World {
    /// A world whose catalogue holds `advisors`.
    pub fn new(advisors: &[Advisor]) -> World {
        // Short paths: a unix socket path is limited to about 100 bytes.
        let dir = tempfile::Builder::new()
            .prefix("ac")
            .tempdir_in("/tmp")
            .expect("a temporary directory");
        for sub in ["root/.git", "root/.advisord", "home", "tmp"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("create a directory");
        }
        let world = World {
            dir,
            daemons: Vec::new(),
        };
        world.write_catalogue(advisors);
        world
    }

    /// Replace the catalogue with `advisors`.
    pub fn write_catalogue(&self, advisors: &[Advisor]) {
        let mut yaml = String::from("mode: standard\nadvisors:\n");
        for a in advisors {
            yaml.push_str(&format!(
                "  - id: {id}\n    title: Scripted {id}\n    transport: process\n    \
                 adapter: process\n    executable: {exe:?}\n    \
                 capabilities: [independent_reasoning]\n    \
                 args: [__demo-advisor, --stance, {stance}, --delay-ms, \"{delay}\", --exit, \"{exit}\"]\n",
                id = a.id,
                exe = client_exe(),
                stance = a.stance,
                delay = a.delay_ms,
                exit = a.exit,
            ));
        }
        std::fs::write(self.root().join(".advisord/advisors.yaml"), yaml).expect("catalogue");
        self.trust_catalogue();
    }

    /// Trust the root's catalogue as it is now, in the world's config directory (as
    /// `advisor-consult trust` would, without judging the file).
    pub fn trust_catalogue(&self) {
        let file = self.root().join(".advisord/advisors.yaml");
        let content = std::fs::read(&file).expect("read the catalogue");
        let config = self.dir.path().join("home/.config/advisord");
        advisord::trust::trust(&config, &file, &content).expect("trust the catalogue");
    }

    /// The project root.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("d.sock")
    }

    /// The daemon's data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The temporary directory given to runs as `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    fn base_env(&self, command: &mut Command) {
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.dir.path().join("home"))
            .env("TMPDIR", self.tmp())
            .env("ADVISORD_DATA_DIR", self.data());
    }

    /// Start `advisord` on the socket and data directory, and wait until it answers.
    pub fn start_daemon(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("daemon.log")).expect("log");
        let mut command = Command::new(daemon_exe());
        self.base_env(&mut command);
        let child = command
            .arg("--socket")
            .arg(self.socket())
            .arg("--data-dir")
            .arg(self.data())
            .arg("--grace")
            .arg("0.5")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn advisord");
        self.daemons.push(child);
        self.wait_for_socket();
    }

    /// Stop (SIGTERM, bounded) every daemon this world started itself.
    pub fn stop_daemons(&mut self) {
        for mut child in self.daemons.drain(..) {
            stop_child(&mut child);
        }
    }

    /// Wait (bounded) until something accepts connections on the socket.
    pub fn wait_for_socket(&self) {
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(self.socket()).is_err() {
            assert!(
                started.elapsed() < START_BOUND,
                "no daemon answered on {} within {START_BOUND:?}; log:\n{}",
                self.socket().display(),
                std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The pid in the data directory's pid file (a daemon started by autostart).
    pub fn daemon_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.data().join("advisord.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The client command with the world's environment and `--root` and `--socket`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(client_exe());
        self.base_env(&mut command);
        command
            .current_dir(self.root())
            .arg("--root")
            .arg(self.root())
            .arg("--socket")
            .arg(self.socket())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Run the client to its end (bounded by [`RUN_BOUND`]).
    pub fn run(&self, args: &[&str]) -> Output {
        let mut child = self.command(args).spawn().expect("spawn advisor-consult");
        let stdout = read_all(child.stdout.take().expect("stdout"));
        let stderr = read_all(child.stderr.take().expect("stderr"));
        let description = format!("advisor-consult {args:?}");
        let code = wait_bounded(&mut child, RUN_BOUND, &description);
        Output {
            description,
            code,
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
        }
    }

    /// Record `input` through the client (and so the daemon); the stored record.
    pub fn record(&self, input: Value) -> Value {
        let path = self.dir.path().join("input.json");
        std::fs::write(&path, input.to_string()).expect("write input");
        self.run(&[
            "record",
            "--file",
            path.to_str().expect("utf-8"),
            "--format",
            "json",
        ])
        .expect_exit(0)
        .json()
    }

    /// Record a material assessment with evidence; its id.
    pub fn assessment(&self) -> String {
        let record = self.record(serde_json::json!({
            "kind": "assessment",
            "subject": "Use SQLite for the job queue",
            "materiality": "high",
            "hypothesis": "WAL mode is enough",
            "evidence": [{"kind": "file", "ref": "src/queue.rs"}]
        }));
        record["id"].as_str().expect("an id").to_string()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for child in &mut self.daemons {
            stop_child(child);
        }
        // A daemon started by the client's autostart left its pid here.
        if let Some(pid) = self.daemon_pid() {
            stop(pid);
        }
    }
}

/// SIGTERM a child of ours, then SIGKILL if it has not exited after a bound; reaped.
pub fn stop_child(child: &mut Child) {
    use nix::sys::signal::{kill, Signal};
    let _ = kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    );
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// SIGTERM `pid` (not a child of ours: its parent reaps it), then SIGKILL if it is still
/// there after a bound.
pub fn stop(pid: i32) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(pid);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        if kill(pid, None).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = kill(pid, Signal::SIGKILL);
}

/// Read a pipe to its end on a thread.
pub fn read_all(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Forward a pipe's lines to a channel as they come (for tests that react to progress).
pub fn lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Wait for `child` within `bound`; kill it and fail past the bound. Its exit status
/// (-1 when killed by a signal).
pub fn wait_bounded(child: &mut Child, bound: Duration, description: &str) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if started.elapsed() >= bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{description} did not end within {bound:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether something accepts connections on `socket`.
pub fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}
