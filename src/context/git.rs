//! What git says of a root: the checkout it lies in, and the branch that names the task
//! when none is given.

use super::*;

/// The nearest ancestor of `dir` (itself included) holding `.git` (a directory, or a file
/// in a worktree).
pub(super) fn git_ancestor(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The task: the given name, else the git branch of `root` (sanitised), else `default`.
pub(super) fn resolve_task(given: Option<&str>, root: &Path) -> Result<TaskName, Error> {
    if let Some(name) = given {
        return TaskName::new(name).map_err(Error::InvalidTask);
    }
    let from_branch = git_branch(root).and_then(|b| TaskName::from_branch(&b));
    Ok(from_branch
        .unwrap_or_else(|| TaskName::new(DEFAULT_TASK).expect("the default task name is valid")))
}

/// The branch checked out in `root`, read from `.git/HEAD` (following a worktree's
/// `gitdir:` file); `None` when detached or not a git checkout.
pub fn git_branch(root: &Path) -> Option<String> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        let target = Path::new(target);
        if target.is_absolute() {
            target.to_path_buf()
        } else {
            root.join(target)
        }
    } else {
        dot_git
    };
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let reference = head.lines().next()?.strip_prefix("ref:")?.trim();
    let branch = reference.strip_prefix("refs/heads/").unwrap_or(reference);
    (!branch.is_empty()).then(|| branch.to_string())
}
