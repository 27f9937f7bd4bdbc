//! The README stands alone on a fresh machine: its test command is what CI runs, and it
//! works with only the Rust toolchain (it installs cargo-nextest when that is missing).

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command in the README's code block right after "Run the whole test suite".
fn readme_test_command() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("read README.md");
    let after = readme
        .split_once("Run the whole test suite")
        .expect("the README says how to run the whole test suite")
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("a code block follows")
        .1
        .split_once("```")
        .expect("the block ends")
        .0;
    let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one command, not {lines:?}");
    lines[0].trim().to_string()
}

#[test]
fn ci_runs_exactly_the_readmes_test_command() {
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect("read .ci/run");
    let last = ci
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .expect(".ci/run is not empty");
    assert_eq!(last.trim(), readme_test_command());
}

/// The README's command run where `cargo nextest` does not exist yet: a stand-in `cargo`
/// on `PATH` logs each call and knows `nextest` only once `install cargo-nextest` ran.
/// Where the suite's installers keep their tools on this machine.
fn tools_cache() -> std::path::PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache")
        })
}

#[test]
fn the_test_command_installs_nextest_when_it_is_missing() {
    use std::os::unix::fs::PermissionsExt;
    let command = readme_test_command();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("create bin");
    let log = dir.path().join("calls.log");
    let installed = dir.path().join("installed");
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{log}'\ncase \"$1\" in\n  nextest) [ -e '{installed}' ] || \
             {{ echo 'error: no such command: `nextest`' >&2; exit 101; }} ;;\n  install) touch \
             '{installed}' ;;\nesac\nexit 0\n",
            log = log.display(),
            installed = installed.display()
        ),
    )
    .expect("write the stand-in cargo");
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let status = Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(repo())
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir.path())
        // The command also installs the third-party software the suite runs; point it at
        // this machine's caches so those steps find their installs and only check them.
        .env("XDG_CACHE_HOME", tools_cache())
        .env("ADVISORD_CI_VENV", tools_cache().join("advisord-ci/venv"))
        .status()
        .expect("run the README's test command");
    assert!(status.success(), "`{command}` failed: {status}");
    let calls = std::fs::read_to_string(&log).expect("cargo was called");
    let calls: Vec<&str> = calls.lines().collect();
    assert!(
        calls.contains(&"install cargo-nextest --locked"),
        "nextest was not installed: {calls:?}"
    );
    assert_eq!(
        calls.last(),
        Some(&"nextest run --workspace"),
        "the suite must run last: {calls:?}"
    );
    let install = calls.iter().position(|c| c.starts_with("install")).unwrap();
    let run = calls
        .iter()
        .position(|c| c.starts_with("nextest run"))
        .unwrap();
    assert!(install < run, "install before running: {calls:?}");
}
