//! `share/advisord.service` works as documented: its `ExecStart` is where `cargo install
//! --path . --locked` puts `advisord`, its `Documentation=` is the manual page the README
//! installs, and `systemd-analyze --user verify` passes on the unit as shipped, with a
//! home directory laid out as those steps leave it (the built `advisord` in
//! `~/.cargo/bin`, the generated page on `MANPATH`). `.ci/run` installs `systemd-analyze`
//! when it is missing; without it this test fails, never skips.

use std::path::Path;
use std::process::Command;

fn unit() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("share/advisord.service"))
        .expect("read share/advisord.service")
}

fn value<'u>(unit: &'u str, key: &str) -> &'u str {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("the unit has no {key}="))
}

#[test]
fn the_unit_points_at_what_the_documented_install_puts_there() {
    let unit = unit();
    assert!(
        value(&unit, "ExecStart").starts_with("%h/.cargo/bin/advisord "),
        "ExecStart is where `cargo install` puts advisord"
    );
    assert_eq!(value(&unit, "Documentation"), "man:advisor-consult(1)");
    assert!(
        !value(&unit, "ExecStart").contains("--idle-exit"),
        "a service stays up"
    );
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    assert!(readme.contains("cargo install --path . --locked"));
    assert!(readme.contains("advisor-consult man > ~/.local/share/man/man1/advisor-consult.1"));
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let analyze = which::which("systemd-analyze").expect(
        "`systemd-analyze` is not on PATH: install the `systemd` package (`.ci/run` does) to \
         verify share/advisord.service",
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let home = dir.path().join("home");
    let bin = home.join(".cargo/bin");
    let man = dir.path().join("man/man1");
    let runtime = dir.path().join("run");
    for d in [&bin, &man, &runtime] {
        std::fs::create_dir_all(d).expect("create a directory");
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_advisord"), bin.join("advisord"))
        .expect("install advisord as cargo install would");
    let page = Command::new(env!("CARGO_BIN_EXE_advisor-consult"))
        .arg("man")
        .output()
        .expect("generate the man page");
    assert!(page.status.success());
    std::fs::write(man.join("advisor-consult.1"), &page.stdout).expect("install the man page");
    let unit_file = dir.path().join("advisord.service");
    std::fs::write(&unit_file, unit()).expect("copy the unit as shipped");
    let run = |unit_file: &Path| {
        Command::new(&analyze)
            .args(["--user", "verify"])
            .arg(unit_file)
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("MANPATH", dir.path().join("man"))
            .output()
            .expect("run systemd-analyze")
    };
    let verified = run(&unit_file);
    assert!(
        verified.status.success(),
        "systemd-analyze verify failed:\n{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
    // The check can fail: without the binary where ExecStart says, it does.
    std::fs::remove_file(bin.join("advisord")).unwrap();
    let missing = run(&unit_file);
    assert!(
        !missing.status.success(),
        "verify must notice a missing ExecStart"
    );
}
