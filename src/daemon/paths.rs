//! Where the daemon keeps its own files (SPEC §9): the data directory with the job
//! journal, the pid file and a detached daemon's log.

use std::path::{Path, PathBuf};

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
}
