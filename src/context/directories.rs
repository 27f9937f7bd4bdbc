//! The root and the state directory checked: absolute, existing directories, and no
//! symbolic link from the root down to a task's directory.

use super::*;

/// [`Error::InvalidRoot`] unless the context's root is an absolute, existing directory: the
/// daemon's first check of every request that names a root.
pub fn require_root(ctx: &RequestContext) -> Result<(), Error> {
    let root = &ctx.root;
    let problem = if !root.is_absolute() {
        "is not absolute"
    } else if !root.exists() {
        "does not exist"
    } else if !root.is_dir() {
        "is not a directory"
    } else {
        return Ok(());
    };
    Err(Error::InvalidRoot(format!(
        "root `{}` {problem}; every request names the project root by its absolute path",
        root.display()
    )))
}

/// A state directory is a directory, or one still to be created under a directory: one
/// that names a file (or lies under one) is the caller's mistake, not the store's.
pub(super) fn check_state_dir(state_dir: &Path) -> Result<(), Error> {
    let existing = state_dir
        .ancestors()
        .find_map(|p| p.metadata().ok().map(|m| (p, m)));
    match existing {
        Some((path, stat)) if !stat.is_dir() => Err(Error::Usage(format!(
            "state directory `{}` cannot be used: `{}` is not a directory; pass \
             `--state-dir` (or the context's `state_dir`) naming a directory, existing or to \
             be created",
            state_dir.display(),
            path.display()
        ))),
        _ => Ok(()),
    }
}

pub(super) fn check_root(root: &Path) -> Result<PathBuf, Error> {
    if !root.is_absolute() {
        return Err(Error::Usage(format!(
            "root `{}` is not absolute; name the project root by its absolute path",
            root.display()
        )));
    }
    if !root.is_dir() {
        return Err(Error::Usage(format!(
            "root `{}` is not an existing directory; pass `--root DIR` naming the project",
            root.display()
        )));
    }
    Ok(root.to_path_buf())
}

/// Refuse a symbolic link on the way from the root (or, for a state directory outside
/// the root, from the state directory) down to the task's directory: a cloned repository
/// could otherwise have records and locks written anywhere the user can write. The parts
/// that do not exist yet are created as real directories by the store.
pub(super) fn refuse_symlinks(root: &Path, task_dir: &Path) -> Result<(), Error> {
    let base = if task_dir.starts_with(root) {
        root
    } else {
        task_dir.parent().and_then(Path::parent).unwrap_or(task_dir)
    };
    let Ok(below) = task_dir.strip_prefix(base) else {
        return Ok(());
    };
    let mut path = base.to_path_buf();
    for part in below.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(info) if info.file_type().is_symlink() => {
                return Err(Error::Usage(format!(
                    "`{}` is a symbolic link; the state directory and a task's directory must \
                     be real directories below the root (a link could put records anywhere); \
                     remove the link, or pass `--state-dir` naming a real directory",
                    path.display()
                )))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}
