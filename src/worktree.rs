//! Worktrees of one repository share one state directory (docs/JOURNAL.md, "Worktrees").
//!
//! A linked worktree (`git worktree add`) has a `.git` *file* naming its private git
//! directory (`<common>/worktrees/<name>`), which names the repository's common git
//! directory in its `commondir` file. Every worktree of a repository resolves its default
//! state directory under the same base, the main checkout (the directory holding the
//! common `.git`), so sessions in any worktree read and write the same tasks under the
//! same lock, chain and anchors. Nothing is spawned: the files git itself reads are read.
//!
//! A `.git` file is the repository's own content and is not trusted to send records
//! elsewhere: the link is followed only when git's own back-link agrees (the private git
//! directory's `gitdir` file names this worktree's `.git`, and it lies in the common
//! directory's `worktrees/`). Anything else keeps the root itself as the base, as before.

use std::path::{Path, PathBuf};

/// The directory the default state directory of `root` lies under: the main checkout of
/// the repository when `root` is a linked worktree of it, the repository's common git
/// directory itself when that repository is bare, else `root`.
pub fn state_base(root: &Path) -> PathBuf {
    common_git_dir(root)
        .map(|common| match common.file_name() {
            Some(name) if name == ".git" => common
                .parent()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf),
            _ => common,
        })
        .unwrap_or_else(|| root.to_path_buf())
}

/// The common git directory of the linked worktree at `root`, when `root` is one whose
/// links git itself vouches for; `None` for a main checkout, a non-repository or a link
/// that does not lead back.
pub fn common_git_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    if !std::fs::symlink_metadata(&dot_git).ok()?.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let private = resolve(root, text.lines().next()?.strip_prefix("gitdir:")?.trim());
    let private = private.canonicalize().ok()?;
    // git's back-link: `<private>/gitdir` names the worktree's `.git` file.
    let back = std::fs::read_to_string(private.join("gitdir")).ok()?;
    let back = resolve(&private, back.lines().next()?.trim());
    if back.canonicalize().ok()? != dot_git.canonicalize().ok()? {
        return None;
    }
    let common = std::fs::read_to_string(private.join("commondir")).ok()?;
    let common = resolve(&private, common.lines().next()?.trim())
        .canonicalize()
        .ok()?;
    (private.parent()? == common.join("worktrees")).then_some(common)
}

fn resolve(base: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A main checkout at `<dir>/main` and a linked worktree at `<dir>/wt`, laid out as
    /// `git worktree add` lays them out.
    fn layout(dir: &Path, relative: bool) -> (PathBuf, PathBuf) {
        let main = dir.join("main");
        let wt = dir.join("wt");
        let private = main.join(".git/worktrees/wt");
        std::fs::create_dir_all(&private).expect("mkdir private");
        std::fs::create_dir_all(&wt).expect("mkdir wt");
        std::fs::write(private.join("commondir"), "../..\n").expect("commondir");
        std::fs::write(
            private.join("gitdir"),
            format!("{}\n", wt.join(".git").display()),
        )
        .expect("gitdir");
        let link = if relative {
            "gitdir: ../main/.git/worktrees/wt\n".to_string()
        } else {
            format!("gitdir: {}\n", private.display())
        };
        std::fs::write(wt.join(".git"), link).expect(".git file");
        (main, wt)
    }

    #[test]
    fn a_linked_worktree_shares_the_main_checkouts_base() {
        for relative in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let (main, wt) = layout(dir.path(), relative);
            let main = main.canonicalize().expect("canonical");
            assert_eq!(state_base(&wt), main, "relative link: {relative}");
            assert_eq!(state_base(&main), main, "the main checkout is its own base");
        }
    }

    #[test]
    fn a_link_without_gits_back_link_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (main, wt) = layout(dir.path(), false);
        std::fs::write(main.join(".git/worktrees/wt/gitdir"), "/elsewhere/.git\n").expect("gitdir");
        assert_eq!(state_base(&wt), wt);
        std::fs::write(wt.join(".git"), "gitdir: /nonexistent\n").expect(".git file");
        assert_eq!(state_base(&wt), wt);
        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).expect("mkdir");
        assert_eq!(state_base(&plain), plain, "not a repository");
    }

    #[test]
    fn a_bare_repositorys_worktrees_share_its_git_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bare = dir.path().join("repo.git");
        let wt = dir.path().join("wt");
        let private = bare.join("worktrees/wt");
        std::fs::create_dir_all(&private).expect("mkdir");
        std::fs::create_dir_all(&wt).expect("mkdir");
        std::fs::write(private.join("commondir"), "../..\n").expect("commondir");
        std::fs::write(
            private.join("gitdir"),
            format!("{}\n", wt.join(".git").display()),
        )
        .expect("gitdir");
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", private.display())).expect(".git");
        assert_eq!(state_base(&wt), bare.canonicalize().expect("canonical"));
    }
}
