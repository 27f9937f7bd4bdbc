//! The note, in this machine's data directory, that a state directory is shared through a
//! journal (`journal/<id>.shared`): a process not on the journal refuses writes there.

use std::path::{Path, PathBuf};

/// The marker, in this machine's data directory, that `state_dir` is shared.
pub(super) fn marker(state_dir: &Path) -> Option<PathBuf> {
    let machine = crate::machine::installed()?;
    let id = crate::core::chain::digest(state_dir.as_os_str().as_encoded_bytes());
    Some(
        machine
            .data_dir()
            .join("journal")
            .join(format!("{}.shared", &id[7..23])),
    )
}

/// Note that `state_dir` is shared through journal `name`.
pub(super) fn mark_shared(state_dir: &Path, name: &str) {
    let Some(path) = marker(state_dir) else {
        return;
    };
    let written = path
        .parent()
        .map_or(Ok(()), crate::paths::private_dir)
        .and_then(|()| crate::paths::private_file(&path, false))
        .and_then(|mut file| {
            use std::io::Write as _;
            file.set_len(0)?;
            writeln!(file, "{name} {}", state_dir.display())
        });
    if let Err(e) = written {
        tracing::warn!(error = %e, "cannot note that the state directory is shared");
    }
}
