//! Where things live, for the client and the daemon alike: the daemon's socket, its data
//! directory (job journal, pid file, lock, log) and a root's state directory. Both sides
//! resolve through these functions, so they always agree.
//!
//! The data directory holds question text, paths and the listener's token: it is the
//! user's alone, `0700` with every directory in it `0700` and every file `0600`, made so by
//! [`private_dir`] and [`private_file`] whoever creates them (the daemon, or `--detach`
//! before it).

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of the data directory and of every directory in it.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of every file in the data directory.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Create `dir` (and its missing parents) `0700`, or make an existing one `0700`.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)?;
    tighten(dir, PRIVATE_DIR_MODE)
}

/// Open `path` for writing, created `0600` when missing and made `0600` when not (`append`
/// or not; never truncated).
pub fn private_file(path: &Path, append: bool) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    if file.metadata()?.permissions().mode() & 0o777 != PRIVATE_FILE_MODE {
        file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))?;
    }
    Ok(file)
}

/// Give `path` `mode` unless it has it already.
fn tighten(path: &Path, mode: u32) -> std::io::Result<()> {
    if std::fs::metadata(path)?.permissions().mode() & 0o777 != mode {
        std::fs::set_permissions(path, Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Open `path` for reading with the open flags `flags`, leaving its access time alone
/// where the system allows (`O_NOATIME`, Linux, for the file's owner; a file of another
/// owner is opened again without it). The daemon reads each anchor and record right after
/// writing it: with `relatime`, the first read after a write changes the file's inode
/// again, which the next flush of the file system then writes out once more.
pub fn open_for_reading(path: &Path, flags: i32) -> std::io::Result<File> {
    let open = |extra: i32| {
        OpenOptions::new()
            .read(true)
            .custom_flags(flags | extra)
            .open(path)
    };
    #[cfg(any(target_os = "linux", target_os = "android"))]
    match open(nix::fcntl::OFlag::O_NOATIME.bits()) {
        Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => open(0),
        opened => opened,
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    open(0)
}

/// The variable naming the daemon's socket when `--socket` is not given.
pub const ENV_SOCKET: &str = "ADVISORD_SOCKET";

/// The state directory under the root when `--state-dir` is not given.
pub const DEFAULT_STATE_DIR: &str = ".ai/local/state/reasoning";

/// The pid file's name in the data directory.
pub const PID_FILE: &str = "advisord.pid";
/// The data directory's lock file.
pub const LOCK_FILE: &str = "advisord.lock";
/// The log of a detached daemon, in the data directory.
pub const LOG_FILE: &str = "advisord.log";

/// The state directory of `root`: `flag` when given, else [`DEFAULT_STATE_DIR`] under it,
/// or under the main checkout when `root` is a linked worktree (every worktree of a
/// repository shares one state directory: `crate::worktree`).
pub fn state_dir(root: &Path, flag: Option<&Path>) -> PathBuf {
    flag.map_or_else(
        || crate::worktree::state_base(root).join(DEFAULT_STATE_DIR),
        Path::to_path_buf,
    )
}

/// The log a detached daemon started from this process's environment writes, if a data
/// directory can be named.
pub fn log_path() -> Option<PathBuf> {
    data_dir(None).map(|dir| dir.join(LOG_FILE))
}

/// The daemon's socket: the flag, else `ADVISORD_SOCKET`, else
/// `$XDG_RUNTIME_DIR/advisord/advisord.sock`, else `/tmp/advisord-<uid>/advisord.sock`.
pub fn socket_path(flag: Option<&Path>) -> PathBuf {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    socket_path_from(flag, &env, nix::unistd::getuid().as_raw())
}

/// [`socket_path`] over an explicit environment and uid.
pub fn socket_path_from(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    uid: u32,
) -> PathBuf {
    if let Some(flag) = flag {
        return flag.to_path_buf();
    }
    if let Some(socket) = env(ENV_SOCKET).filter(|v| !v.is_empty()) {
        return PathBuf::from(socket);
    }
    if let Some(runtime) = env("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        return Path::new(&runtime).join("advisord").join("advisord.sock");
    }
    PathBuf::from(format!("/tmp/advisord-{uid}/advisord.sock"))
}

/// The variable naming the data directory when `--data-dir` is not given.
pub const ENV_DATA_DIR: &str = "ADVISORD_DATA_DIR";

/// The data directory: the flag, else `ADVISORD_DATA_DIR`, else
/// `$XDG_STATE_HOME/advisord`, else `~/.local/state/advisord`; made absolute against
/// `cwd`. `None` when nothing names one (no flag, no variable and no `HOME`).
pub fn data_dir_from(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    let dir = match flag {
        Some(flag) => flag.to_path_buf(),
        None => match set(ENV_DATA_DIR) {
            Some(dir) => PathBuf::from(dir),
            None => match set("XDG_STATE_HOME") {
                Some(state) => Path::new(&state).join("advisord"),
                None => Path::new(&set("HOME")?).join(".local/state/advisord"),
            },
        },
    };
    Some(if dir.is_absolute() {
        dir
    } else {
        cwd.join(dir)
    })
}

/// [`data_dir_from`] over this process's environment and working directory.
pub fn data_dir(flag: Option<&Path>) -> Option<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    data_dir_from(flag, &|name| std::env::var(name).ok(), &cwd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn check(flag: Option<&str>, vars: &[(&str, &str)], expected: Option<&str>) {
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(
            data_dir_from(flag.map(Path::new), &env, Path::new("/work")),
            expected.map(PathBuf::from),
            "flag {flag:?}, vars {vars:?}"
        );
    }

    /// A read through [`open_for_reading`] leaves the access time as it was, where a plain
    /// read (with `relatime`, an access time older than the last change) moves it.
    #[cfg(target_os = "linux")]
    #[test]
    fn reading_for_the_store_leaves_the_access_time_alone() {
        use std::io::Read;
        use std::time::{Duration, SystemTime};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anchor");
        std::fs::write(&path, "head\n").unwrap();
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let file = File::options().write(true).open(&path).unwrap();
        file.set_times(std::fs::FileTimes::new().set_accessed(an_hour_ago))
            .unwrap();
        drop(file);
        let accessed = || std::fs::metadata(&path).unwrap().accessed().unwrap();
        let before = accessed();
        let mut text = String::new();
        open_for_reading(&path, nix::libc::O_NOFOLLOW)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "head\n");
        assert_eq!(accessed(), before, "the read moved the access time");
        // What it spares: a plain read moves it, unless the file system never records
        // reads (`noatime`).
        std::fs::read(&path).unwrap();
        let records_reads = accessed() != before;
        eprintln!("this file system records reads: {records_reads}");
        // A missing file is the open's own error, not a retry's.
        let missing = open_for_reading(&dir.path().join("missing"), 0).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn private_directories_and_files_are_the_users_alone() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b");
        private_dir(&data).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700);
        std::fs::set_permissions(&data, Permissions::from_mode(0o755)).unwrap();
        private_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700, "an existing one is made private");
        let log = data.join("log");
        std::fs::write(&log, "before\n").unwrap();
        std::fs::set_permissions(&log, Permissions::from_mode(0o644)).unwrap();
        use std::io::Write;
        private_file(&log, true)
            .unwrap()
            .write_all(b"after\n")
            .unwrap();
        assert_eq!(mode(&log), 0o600);
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "before\nafter\n");
        private_file(&data.join("new"), false).unwrap();
        assert_eq!(mode(&data.join("new")), 0o600);
    }

    #[test]
    fn the_data_directory_chain() {
        let all = [
            ("ADVISORD_DATA_DIR", "/d"),
            ("XDG_STATE_HOME", "/s"),
            ("HOME", "/h"),
        ];
        check(Some("/flag"), &all, Some("/flag"));
        check(Some("rel"), &all, Some("/work/rel"));
        check(None, &all, Some("/d"));
        check(None, &all[1..], Some("/s/advisord"));
        check(None, &all[2..], Some("/h/.local/state/advisord"));
        check(
            None,
            &[("ADVISORD_DATA_DIR", ""), ("HOME", "/h")],
            Some("/h/.local/state/advisord"),
        );
        check(None, &[], None);
    }

    #[test]
    fn the_socket_path_chain() {
        let flag = Path::new("/flag.sock");
        let full = env_of(&[
            (ENV_SOCKET, "/env.sock"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
        ]);
        assert_eq!(socket_path_from(Some(flag), &full, 7), flag);
        assert_eq!(socket_path_from(None, &full, 7), Path::new("/env.sock"));
        let runtime = env_of(&[("XDG_RUNTIME_DIR", "/run/user/7"), (ENV_SOCKET, "")]);
        assert_eq!(
            socket_path_from(None, &runtime, 7),
            Path::new("/run/user/7/advisord/advisord.sock")
        );
        assert_eq!(
            socket_path_from(None, &env_of(&[]), 7),
            Path::new("/tmp/advisord-7/advisord.sock")
        );
    }
}
