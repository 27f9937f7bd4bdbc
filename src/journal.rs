//! The shared journal (docs/JOURNAL.md): a team's machines share tasks through one NATS
//! JetStream stream, in the `nats-server` the mesh already uses. Opt in: the daemon runs
//! with `--journal` (or `ADVISORD_JOURNAL`) on the mesh's URL and credentials, and the
//! repository names its journal in `.advisord/project.yaml` (`journal: NAME`).
//!
//! - [`seam`] is all the store sees: before a record file is written, the record is
//!   published with the expected last sequence of its task's subject and its id as the
//!   message id; it exists once JetStream acknowledged it, and the file is a replica
//!   written after. Another machine first: the task is caught up and the write judged
//!   again. Bus unreachable: refused, never stored on the side.
//! - `stream` holds the connection, the stream's configuration, publishing and the
//!   background follower that keeps this machine's replica current.
//! - `replica` writes what the stream holds into the state directory, byte for byte, so
//!   `prev` (the hash of the previous record in the stream's order) and `verify`'s head
//!   are the same on every machine, and anchors each head (the journal is the team's:
//!   what it holds is this machine's to vouch for).

use std::path::{Path, PathBuf};

mod marker;
mod replica;
pub mod seam;
mod stream;

pub use stream::{start, JournalConfig};

/// The variable that turns the journal on when `--journal` is not given (`1`, `true`).
pub const ENV_JOURNAL: &str = "ADVISORD_JOURNAL";
/// Every journal's subjects start so: `advisord.journal.<journal>.<task>`.
pub const SUBJECT_PREFIX: &str = "advisord.journal";
/// The header naming the machine (runtime) that wrote a record.
pub const HEADER_MACHINE: &str = "Advisord-Machine";
/// The header carrying a record's sequence in its task.
pub const HEADER_SEQUENCE: &str = "Advisord-Sequence";

/// The journal `.advisord/project.yaml` under `root` names (`journal: NAME`), if any; an
/// error names what is wrong with it.
pub fn project_journal(root: &Path) -> Result<Option<String>, String> {
    let path = root.join(crate::check::PROJECT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
    };
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)
        .map_err(|e| format!("`{}` is not valid YAML: {e}", path.display()))?;
    match yaml.get("journal") {
        None | Some(serde_yaml_ng::Value::Null) => Ok(None),
        Some(serde_yaml_ng::Value::String(name)) if valid_name(name) => Ok(Some(name.clone())),
        Some(other) => Err(format!(
            "`journal` in `{}` is {other:?}; it takes a name of 1 to 64 of A-Z a-z 0-9 _ -",
            path.display()
        )),
    }
}

/// A journal's name: 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// The stream of journal `name`.
pub fn stream_name(name: &str) -> String {
    format!("ADVISORD_JOURNAL_{name}")
}

/// The subject of `task` in journal `name`; a task's `.` (a subject's separator) is
/// written `~`, which no task name holds.
pub fn subject(name: &str, task: &str) -> String {
    format!("{SUBJECT_PREFIX}.{name}.{}", task.replace('.', "~"))
}

/// The task a subject of journal `name` names.
pub fn task_of(name: &str, subject: &str) -> Option<String> {
    let task = subject.strip_prefix(&format!("{SUBJECT_PREFIX}.{name}."))?;
    Some(task.replace('~', "."))
}

/// The root whose default state directory `state_dir` is: the journal shares a
/// repository's default state directory only (an explicit `--state-dir` stays local).
pub fn root_of(state_dir: &Path) -> Option<PathBuf> {
    let default = Path::new(crate::paths::DEFAULT_STATE_DIR);
    let mut root = state_dir.to_path_buf();
    if !root.ends_with(default) {
        return None;
    }
    for _ in default.components() {
        root.pop();
    }
    Some(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_round_trip_every_task_name() {
        for task in ["default", "feature.x", "a-b_c.d.e"] {
            let subject = subject("team", task);
            assert_eq!(subject.split('.').count(), 4, "{subject}");
            assert_eq!(task_of("team", &subject).as_deref(), Some(task));
        }
        assert_eq!(task_of("other", &subject("team", "t")), None);
    }

    #[test]
    fn the_project_file_names_the_journal() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(project_journal(dir.path()), Ok(None));
        std::fs::create_dir(dir.path().join(".advisord")).expect("mkdir");
        let file = dir.path().join(crate::check::PROJECT_FILE);
        std::fs::write(&file, "budget:\n  per_day: 3\njournal: team-a\n").expect("write");
        assert_eq!(project_journal(dir.path()), Ok(Some("team-a".into())));
        std::fs::write(&file, "journal: a.b\n").expect("write");
        let error = project_journal(dir.path()).expect_err("a dot is refused");
        assert!(error.contains("A-Z a-z 0-9 _ -"), "{error}");
    }

    #[test]
    fn only_a_default_state_directory_has_a_root() {
        let root = Path::new("/r/repo");
        assert_eq!(
            root_of(&crate::paths::state_dir(root, None)).as_deref(),
            Some(root)
        );
        assert_eq!(root_of(Path::new("/elsewhere/state")), None);
    }
}
