//! The client talks only to a socket that is its user's own, and the daemon never changes
//! the mode of a directory it did not create.
//!
//! The stranger is a second uid (65534): a listener it owns, or one it serves, must get
//! nothing from `advisor-consult` — not even a request — and the client exits 4 saying why.
//! These tests need root, to run the stranger's listener as another uid.

use crate::support::client as client_support;

use client_support::{client_exe, daemon_exe, wait_bounded, Output, RUN_BOUND};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const STRANGER: u32 = 65534;
const SECRET: &str = "sk-victim-0123456789abcdef";

/// A listener that logs every byte it is sent and answers `200 {}`: bound by the
/// process it is started as, then (with `drop`) serving as the stranger.
const LISTENER: &str = r#"
use Socket;
$SIG{PIPE} = 'IGNORE';
my ($path, $log, $drop) = @ARGV;
socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
bind($s, pack_sockaddr_un($path)) or die "bind: $!";
if ($drop) { $( = 65534; $) = "65534 65534"; $< = 65534; $> = 65534; }
listen($s, 16) or die "listen: $!";
open(my $ready, '>', "$log.ready") or die "ready: $!"; close $ready;
while (accept(my $c, $s)) {
  my $buf = ''; sysread($c, $buf, 65536);
  open(my $f, '>>', $log) or die; print $f $buf; close $f;
  syswrite($c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
  close $c;
}
"#;

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

struct Stranger {
    child: Child,
    log: PathBuf,
}

impl Stranger {
    /// Start the listener on `socket`: as the stranger throughout (`as_stranger`), or
    /// bound by us and then served as the stranger.
    fn start(socket: &Path, logs: &Path, as_stranger: bool) -> Stranger {
        Stranger::start_as(socket, logs, as_stranger, !as_stranger)
    }

    /// The same; `drop` makes it serve as the stranger after binding (with neither, the
    /// listener is our own).
    fn start_as(socket: &Path, logs: &Path, as_stranger: bool, drop: bool) -> Stranger {
        let log = logs.join("received");
        let mut command = Command::new("perl");
        command
            .arg("-e")
            .arg(LISTENER)
            .arg(socket)
            .arg(&log)
            .arg(if drop { "1" } else { "0" })
            .stdin(Stdio::null());
        if as_stranger {
            command.uid(STRANGER).gid(STRANGER);
        }
        let mut child = command.spawn().expect("spawn perl");
        let ready = log.with_extension("ready");
        let started = Instant::now();
        while !ready.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the listener exited: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "listener not ready"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Stranger { child, log }
    }

    fn received(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory for the listener's log, writable by the stranger.
fn logs_dir(base: &Path) -> PathBuf {
    let logs = base.join("logs");
    std::fs::create_dir(&logs).expect("mkdir logs");
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    logs
}

/// A project root with a catalogue naming a credential variable.
fn project(base: &Path) -> (PathBuf, PathBuf) {
    let root = base.join("root");
    std::fs::create_dir(&root).expect("mkdir root");
    let catalogue = base.join("catalogue.yaml");
    std::fs::write(
        &catalogue,
        "advisors:\n- {id: remote, title: Remote, transport: http, adapter: openai, \
         endpoint: 'http://127.0.0.1:9/v1', model: m, credential: SOME_API_KEY, \
         capabilities: [independent_reasoning]}\n",
    )
    .expect("write catalogue");
    (root, catalogue)
}

fn client(base: &Path, socket: &Path, args: &[&str]) -> Output {
    let (root, catalogue) = (base.join("root"), base.join("catalogue.yaml"));
    let mut child = Command::new(client_exe())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", base)
        .env("SOME_API_KEY", SECRET)
        .env("ADVISORD_DATA_DIR", base.join("data"))
        .arg("--root")
        .arg(&root)
        .arg("--catalogue")
        .arg(&catalogue)
        .arg("--socket")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn advisor-consult");
    let code = wait_bounded(&mut child, RUN_BOUND, "advisor-consult");
    let read = |pipe: Option<&mut dyn std::io::Read>| {
        let mut text = String::new();
        if let Some(pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    };
    Output {
        description: format!("advisor-consult {args:?}"),
        code,
        stdout: read(child.stdout.as_mut().map(|p| p as &mut dyn std::io::Read)),
        stderr: read(child.stderr.as_mut().map(|p| p as &mut dyn std::io::Read)),
    }
}

#[test]
fn a_socket_in_a_strangers_directory_gets_nothing_and_exits_4() {
    if !is_root() {
        eprintln!("skipped: needs root to run a listener as another uid");
        return;
    }
    let base = tempfile::tempdir().expect("temp dir");
    project(base.path());
    let logs = logs_dir(base.path());
    // The stranger made `/tmp/advisord-<victim uid>/` before the victim did.
    let theirs = base.path().join("advisord-0");
    std::fs::create_dir(&theirs).expect("mkdir");
    nix::unistd::chown(&theirs, Some(STRANGER.into()), Some(STRANGER.into())).expect("chown");
    let socket = theirs.join("advisord.sock");
    let stranger = Stranger::start(&socket, &logs, true);
    for verb in [&["status"][..], &["advisors"], &["jobs"]] {
        client(base.path(), &socket, verb)
            .expect_exit(4)
            .expect_stderr("refusing the daemon's socket")
            .expect_stderr("belongs to uid 65534");
    }
    assert_eq!(stranger.received(), "", "nothing reaches the stranger");
}

#[test]
fn a_socket_served_by_a_stranger_gets_nothing_and_exits_4() {
    if !is_root() {
        eprintln!("skipped: needs root to run a listener as another uid");
        return;
    }
    let base = tempfile::tempdir().expect("temp dir");
    project(base.path());
    let logs = logs_dir(base.path());
    // Our own private directory and a socket file of ours, but the process behind it
    // is the stranger's: only `SO_PEERCRED` tells.
    let ours = base.path().join("run");
    std::fs::create_dir(&ours).expect("mkdir");
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let socket = ours.join("advisord.sock");
    let stranger = Stranger::start(&socket, &logs, false);
    assert_eq!(std::fs::metadata(&socket).expect("socket").uid(), 0);
    for verb in [&["status"][..], &["advisors"], &["jobs"]] {
        client(base.path(), &socket, verb)
            .expect_exit(4)
            .expect_stderr("runs as uid 65534");
    }
    assert_eq!(stranger.received(), "", "nothing reaches the stranger");
}

#[test]
fn the_client_never_autostarts_into_a_strangers_directory() {
    if !is_root() {
        eprintln!("skipped: needs root to own a directory as another uid");
        return;
    }
    let base = tempfile::tempdir().expect("temp dir");
    project(base.path());
    let theirs = base.path().join("advisord-0");
    std::fs::create_dir(&theirs).expect("mkdir");
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    nix::unistd::chown(&theirs, Some(STRANGER.into()), Some(STRANGER.into())).expect("chown");
    let socket = theirs.join("advisord.sock");
    client(base.path(), &socket, &["status"])
        .expect_exit(4)
        .expect_stderr("belongs to uid 65534");
    assert!(!socket.exists(), "no daemon was started there");
    assert!(!base.path().join("data/advisord.pid").exists());
}

#[test]
fn a_socket_in_a_shared_directory_is_refused_and_the_directory_keeps_its_mode() {
    let base = tempfile::tempdir().expect("temp dir");
    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o7777;
    let run = |args: &[&str]| {
        let output = Command::new(daemon_exe())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", base.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run advisord");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let socket = shared.join("x.sock");
    let data = base.path().join("data");
    let (code, stderr) = run(&[
        "--socket",
        socket.to_str().expect("utf-8"),
        "--data-dir",
        data.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("writable by other users"), "{stderr}");
    assert!(stderr.contains("--socket"), "says what to do: {stderr}");
    assert_eq!(mode(&shared), 0o1777, "the shared directory keeps its mode");
    assert!(!socket.exists());
    // The same for a data directory.
    let inside = base.path().join("own/advisord.sock");
    let (code, stderr) = run(&[
        "--socket",
        inside.to_str().expect("utf-8"),
        "--data-dir",
        shared.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("writable by other users"), "{stderr}");
    assert_eq!(mode(&shared), 0o1777, "the shared directory keeps its mode");
}

#[test]
fn only_a_consultation_carries_credential_values() {
    let base = tempfile::tempdir().expect("temp dir");
    project(base.path());
    let logs = logs_dir(base.path());
    let ours = base.path().join("run");
    std::fs::create_dir(&ours).expect("mkdir");
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let socket = ours.join("advisord.sock");
    // A listener of our own that logs what each verb sends.
    let listener = Stranger::start_as(&socket, &logs, false, false);
    for verb in [
        &["status"][..],
        &["advisors"],
        &["plan", "--materiality", "high"],
        &["tree"],
    ] {
        client(base.path(), &socket, verb);
        let sent = listener.received();
        assert!(
            sent.contains("SOME_API_KEY"),
            "{verb:?} names the variable: {sent}"
        );
        assert!(!sent.contains(SECRET), "{verb:?} sent the value: {sent}");
        std::fs::remove_file(&listener.log).expect("reset the log");
    }
    client(
        base.path(),
        &socket,
        &["--assessment", "01J00000000000000000000000", "--detach"],
    );
    let sent = listener.received();
    assert!(sent.contains("/api/v1/consultations"), "{sent}");
    assert!(
        sent.contains(SECRET),
        "a consultation carries the value: {sent}"
    );
}
