//! Which tasks of a state directory have new record files, told by the kernel (inotify)
//! rather than found by looking at every task: a long-lived store (the daemon's) asks
//! this before it feeds its availability index, so a plan or an `advisors` call costs
//! the same in a root of a hundred tasks as in an empty one.
//!
//! The watcher is an accelerator, never the truth: whenever it cannot vouch for having
//! seen every change (it could not be made, a watch could not be added, the kernel's
//! queue overflowed, a watched directory went away), it answers [`Changed::All`] and the
//! store looks at every task as it would without it.

use crate::core::records::TaskName;
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// What changed since the last call of [`Watcher::changed`].
#[derive(Debug, PartialEq, Eq)]
pub enum Changed {
    /// Any task may have changed: look at every one.
    All,
    /// Only these tasks have new entries (or are new).
    Tasks(BTreeSet<TaskName>),
}

/// The inotify watches over a state directory and its task directories.
pub struct Watcher {
    inotify: Inotify,
    root: WatchDescriptor,
    tasks: HashMap<WatchDescriptor, TaskName>,
    /// The tasks of `tasks`, to ask by name.
    watched: HashSet<TaskName>,
    /// Set when a change may have been missed: the next call answers [`Changed::All`].
    lost: bool,
}

/// What a task directory is watched for: a record file is created under a temporary name
/// and renamed into place (moved to), or written in place by a hand (created, closed).
fn task_events() -> AddWatchFlags {
    AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// What the state directory is watched for: a task directory appearing or going.
fn root_events() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

impl Watcher {
    /// Watch `state_dir` (which must exist); `None` when the kernel refuses (no inotify,
    /// or the user's instances are spent), and the store then looks at every task.
    pub fn new(state_dir: &Path) -> Option<Watcher> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        let root = inotify.add_watch(state_dir, root_events()).ok()?;
        Some(Watcher {
            inotify,
            root,
            tasks: HashMap::new(),
            watched: HashSet::new(),
            lost: true,
        })
    }

    /// Watch the directory of `task` from now on; false when the watch cannot be added
    /// (its changes then go unseen, so the watcher must not be trusted).
    pub fn watch(&mut self, state_dir: &Path, task: &TaskName) -> bool {
        match self
            .inotify
            .add_watch(&state_dir.join(task.as_str()), task_events())
        {
            Ok(wd) => {
                self.tasks.insert(wd, task.clone());
                self.watched.insert(task.clone());
                true
            }
            // Gone again already: nothing in it to miss.
            Err(Errno::ENOENT) => true,
            Err(_) => false,
        }
    }

    /// Answer [`Changed::All`] next time: what was reported could not be acted on.
    pub fn forget(&mut self) {
        self.lost = true;
    }

    /// Whether `task`'s directory is watched.
    pub fn watches(&self, task: &TaskName) -> bool {
        self.watched.contains(task)
    }

    /// What changed since the last call. A new task directory is watched before it is
    /// reported, so a record written into it after this call is seen by the next one.
    /// `None` when the watcher can no longer be trusted at all (drop it).
    pub fn changed(&mut self, state_dir: &Path) -> Option<Changed> {
        let mut tasks = BTreeSet::new();
        let mut new_dirs = Vec::new();
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(_) => return None,
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    self.lost = true;
                    continue;
                }
                if event.wd == self.root {
                    if event.mask.intersects(
                        AddWatchFlags::IN_DELETE_SELF
                            | AddWatchFlags::IN_MOVE_SELF
                            | AddWatchFlags::IN_IGNORED,
                    ) {
                        // The state directory itself went: nothing here can be trusted.
                        return None;
                    }
                    let name = event.name.as_deref().and_then(|n| n.to_str());
                    if let Some(task) = name.and_then(|n| TaskName::new(n).ok()) {
                        if event
                            .mask
                            .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                        {
                            new_dirs.push(task);
                        } else {
                            // A task directory removed or moved away: its records are
                            // gone from under what was fed; look again at everything.
                            self.lost = true;
                        }
                    }
                    continue;
                }
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    // The kernel dropped the watch (its directory went): changes to
                    // what is there now would go unseen.
                    if let Some(task) = self.tasks.remove(&event.wd) {
                        self.watched.remove(&task);
                    }
                    self.lost = true;
                    continue;
                }
                if let Some(task) = self.tasks.get(&event.wd) {
                    tasks.insert(task.clone());
                }
            }
        }
        for task in new_dirs {
            if !self.watch(state_dir, &task) {
                return None;
            }
            tasks.insert(task);
        }
        if std::mem::take(&mut self.lost) {
            return Some(Changed::All);
        }
        Some(Changed::Tasks(tasks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str) -> TaskName {
        TaskName::new(name).expect("a valid task name")
    }

    fn tasks(names: &[&str]) -> Changed {
        Changed::Tasks(names.iter().map(|n| task(n)).collect())
    }

    #[test]
    fn a_new_watcher_asks_for_everything_once_then_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let mut w = Watcher::new(dir.path()).expect("inotify works here");
        assert!(w.watch(dir.path(), &task("a")));
        assert_eq!(w.changed(dir.path()), Some(Changed::All));
        assert_eq!(w.changed(dir.path()), Some(tasks(&[])));
        std::fs::write(dir.path().join("a/.tmp"), b"{}").unwrap();
        std::fs::rename(
            dir.path().join("a/.tmp"),
            dir.path().join("a/0000000001.json"),
        )
        .unwrap();
        assert_eq!(w.changed(dir.path()), Some(tasks(&["a"])));
        assert_eq!(w.changed(dir.path()), Some(tasks(&[])));
    }

    #[test]
    fn a_new_task_directory_is_reported_and_watched() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Watcher::new(dir.path()).unwrap();
        assert_eq!(w.changed(dir.path()), Some(Changed::All));
        std::fs::create_dir(dir.path().join("b")).unwrap();
        assert_eq!(w.changed(dir.path()), Some(tasks(&["b"])));
        assert!(w.watches(&task("b")));
        std::fs::write(dir.path().join("b/0000000001.json"), b"{}").unwrap();
        assert_eq!(w.changed(dir.path()), Some(tasks(&["b"])));
    }

    #[test]
    fn a_removed_task_directory_means_look_at_everything() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let mut w = Watcher::new(dir.path()).unwrap();
        assert!(w.watch(dir.path(), &task("a")));
        assert_eq!(w.changed(dir.path()), Some(Changed::All));
        std::fs::remove_dir(dir.path().join("a")).unwrap();
        assert_eq!(w.changed(dir.path()), Some(Changed::All));
    }

    #[test]
    fn the_state_directory_going_away_ends_the_watcher() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let mut w = Watcher::new(&state).unwrap();
        assert_eq!(w.changed(&state), Some(Changed::All));
        std::fs::rename(&state, dir.path().join("moved")).unwrap();
        assert_eq!(w.changed(&state), None);
    }
}
