//! Each record file's identity (`stat`), so a view checks the cache against the task's
//! directory without reading the files again.

use super::*;

/// What `stat` says of a record file, enough to tell that it is still the file the cache
/// read: any write to it, a rename over it or a change of its mode changes its change time
/// (which, unlike the modification time, no program can set), and a file put in its place
/// is another inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// How recent a change time must be for it to vouch for nothing: the file system stamps
/// times from a clock that ticks coarsely (a few milliseconds, a second on some file
/// systems), so a file changed again within the same tick keeps its change time. A file
/// whose change time is this close to when it was looked at is checked by its bytes next
/// time (as git treats a "racily clean" file).
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

impl FileId {
    /// The identity of the file `stat` describes, looked at `now`; `None` when its change
    /// time is too recent to vouch for its bytes ([`RACY_WINDOW`]).
    pub fn of(stat: &fs::Metadata, now: SystemTime) -> Option<FileId> {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        let id = FileId {
            dev: stat.dev(),
            ino: stat.ino(),
            size: stat.size(),
            mtime_ns: ns(stat.mtime(), stat.mtime_nsec()),
            ctime_ns: ns(stat.ctime(), stat.ctime_nsec()),
        };
        let now_ns = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        (id.ctime_ns + RACY_WINDOW.as_nanos() as i128 <= now_ns).then_some(id)
    }
}

/// Whether the cache still holds what the files of its task hold now.
pub(super) enum Checked {
    /// Every cached file is as it was read (new files past the highest may have been read).
    Current,
    /// A cached file changed, went, or a file appeared among the cached ones.
    Stale,
}

impl Store {
    /// Compare the cached files of `task` with its directory now, by `stat` alone for a
    /// file whose identity vouches for its bytes: a file whose identity changed is read
    /// again and kept if its bytes are the same; new files past the highest sequence are
    /// read into the cache. Anything else (a file changed, gone, or new below the highest)
    /// makes the cache stale, and the caller reads the task afresh.
    pub(super) fn check_files(
        &self,
        task: &TaskName,
        cache: &mut TaskCache,
    ) -> Result<Checked, StoreError> {
        if !cache.listed {
            return Ok(Checked::Current);
        }
        let dir = self.task_dir(task);
        match cache.watch.as_ref().map(watch::Subscription::take) {
            Some(watch::Changes::Named(names)) => {
                return self.check_named(task, &dir, cache, names)
            }
            Some(watch::Changes::All) => {}
            // Listed before its directory existed (or could be watched): watched from
            // now on, and this check looks at every file, so nothing before is missed.
            None => cache.watch = watch::subscribe(&dir),
        }
        let listing = match fs::read_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(if cache.records.is_empty() {
                    Checked::Current
                } else {
                    Checked::Stale
                });
            }
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut files = Vec::with_capacity(cache.records.len() + 1);
        let mut strays = Vec::new();
        for entry in listing {
            let entry = entry.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`",
                dir.display()
            )))?;
            let name = entry.file_name();
            match chain::FileName::of(&name) {
                chain::FileName::Record(sequence) => files.push((sequence, entry)),
                chain::FileName::Store => {}
                chain::FileName::Stray => strays.push(name.to_string_lossy().into_owned()),
            }
        }
        strays.sort_unstable();
        cache.strays = strays;
        files.sort_unstable_by_key(|(sequence, _)| *sequence);
        let known = files.partition_point(|(s, _)| *s <= cache.highest);
        let (old, new) = files.split_at(known);
        if old.len() != cache.records.len()
            || old
                .iter()
                .zip(&cache.records)
                .any(|((s, _), r)| *s != r.envelope.sequence)
        {
            return Ok(Checked::Stale);
        }
        let now = SystemTime::now();
        cache.checked = old.len() + new.len();
        for (at, (_, entry)) in old.iter().enumerate() {
            // `stat` relative to the open directory (a symbolic link is its own identity,
            // never the file read through it, so it is always judged by its bytes).
            let same = match (entry.metadata(), cache.files[at]) {
                (Ok(stat), Some(kept)) => FileId::of(&stat, now) == Some(kept),
                (Err(e), _) if e.kind() == io::ErrorKind::NotFound => return Ok(Checked::Stale),
                _ => false,
            };
            if same {
                continue;
            }
            // Touched, put back, or too recent to vouch: judge it by its bytes.
            match read_record(&entry.path()) {
                Ok(Some(read)) if read.digest == cache.digests[at] => cache.files[at] = read.file,
                _ => return Ok(Checked::Stale),
            }
        }
        for (sequence, _) in new {
            if let Some(read) = read_record(&dir.join(sequence_file(*sequence)))? {
                cache.highest = cache.highest.max(*sequence);
                push_in_order(cache, read);
            }
        }
        Ok(Checked::Current)
    }

    /// [`Store::check_files`] when the task's directory is watched and the kernel named
    /// the files that changed since the last check: only those are looked at. A file not
    /// named is as it was when the watch began or when it was last checked, whatever its
    /// change time says (the event of a second write within one clock tick is queued all
    /// the same), so the racy window matters only for the files named. A record file named
    /// is `stat`ed and, when its identity changed or cannot vouch, read again: the same
    /// bytes keep the cache, other bytes (or a record file gone, or one appearing below the
    /// highest sequence) make it stale.
    fn check_named(
        &self,
        task: &TaskName,
        dir: &Path,
        cache: &mut TaskCache,
        names: std::collections::HashSet<OsString>,
    ) -> Result<Checked, StoreError> {
        let mut looked: Vec<usize> = Vec::new();
        let mut new: Vec<u64> = Vec::new();
        let mut strays_changed = false;
        for name in &names {
            match chain::FileName::of(name) {
                chain::FileName::Store => {}
                chain::FileName::Stray => strays_changed = true,
                chain::FileName::Record(sequence) if sequence > cache.highest => {
                    new.push(sequence);
                }
                chain::FileName::Record(sequence) => {
                    match cache
                        .records
                        .binary_search_by_key(&sequence, |r| r.envelope.sequence)
                    {
                        Ok(at) => looked.push(at),
                        // A record file that came (or went) below the highest sequence.
                        Err(_) if dir.join(name).symlink_metadata().is_ok() => {
                            return Ok(Checked::Stale)
                        }
                        Err(_) => {}
                    }
                }
            }
        }
        looked.sort_unstable();
        looked.dedup();
        cache.checked = looked.len() + new.len();
        let now = SystemTime::now();
        for at in looked {
            let path = dir.join(sequence_file(cache.records[at].envelope.sequence));
            let same = match (fs::symlink_metadata(&path), cache.files[at]) {
                (Ok(stat), Some(kept)) => FileId::of(&stat, now) == Some(kept),
                (Err(e), _) if e.kind() == io::ErrorKind::NotFound => return Ok(Checked::Stale),
                _ => false,
            };
            if same {
                continue;
            }
            match read_record(&path) {
                Ok(Some(read)) if read.digest == cache.digests[at] => cache.files[at] = read.file,
                _ => return Ok(Checked::Stale),
            }
        }
        if strays_changed {
            self.list_strays(task, dir, cache)?;
        }
        new.sort_unstable();
        for sequence in new {
            if let Some(read) = read_record(&dir.join(sequence_file(sequence)))? {
                cache.highest = cache.highest.max(sequence);
                push_in_order(cache, read);
            }
        }
        Ok(Checked::Current)
    }

    /// List the strays of `task`'s directory again.
    fn list_strays(
        &self,
        task: &TaskName,
        dir: &Path,
        cache: &mut TaskCache,
    ) -> Result<(), StoreError> {
        let listing = match fs::read_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut strays = Vec::new();
        for entry in listing.flatten() {
            let name = entry.file_name();
            if let chain::FileName::Stray = chain::FileName::of(&name) {
                strays.push(name.to_string_lossy().into_owned());
            }
        }
        strays.sort_unstable();
        cache.strays = strays;
        Ok(())
    }
}

/// What the kernel says changed in the directories of the cached tasks (inotify), so a view
/// in a long-lived store (the daemon's) checks only the record files named since it last
/// looked, not every file of the task.
///
/// The watch is an accelerator, never the truth: a task's directory is watched before it
/// is listed and its files read, and every change made to a file in it after that (written
/// in place, truncated, replaced by a rename, removed, its mode or times changed) queues an
/// event naming the file before the call that made it returns. When the watch cannot vouch
/// for having seen every change (it could not be made, the directory is on a file system
/// whose changes another machine may make unseen, the kernel's queue overflowed, the
/// directory itself was moved or removed) the view checks every file as it did before.
pub(super) mod watch {
    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
    use std::collections::{HashMap, HashSet};
    use std::ffi::OsString;
    use std::path::Path;
    use std::sync::{Mutex, OnceLock};

    /// What changed in one watched directory since it was last asked.
    #[derive(Debug, PartialEq, Eq)]
    pub enum Changes {
        /// Anything may have changed: check every file.
        All,
        /// Only the files of these names (created, written, moved, removed or touched).
        Named(HashSet<OsString>),
    }

    /// One cached task's subscription; dropping it stops the watch.
    #[derive(Debug)]
    pub struct Subscription {
        token: u64,
    }

    struct Sub {
        wd: WatchDescriptor,
        names: HashSet<OsString>,
        all: bool,
        /// The watch is gone (its directory moved or removed): every answer is `All`.
        lost: bool,
    }

    struct Watches {
        inotify: Inotify,
        subs: HashMap<u64, Sub>,
        /// How many subscriptions share each watch (the kernel gives one per directory).
        shared: HashMap<WatchDescriptor, usize>,
        next: u64,
    }

    /// The file systems whose files another machine may change without an event here.
    const REMOTE: &[i64] = &[
        0x6969,                 // NFS
        0x517B,                 // SMB
        0xFF53_4D42_u32 as i64, // CIFS
        0xFE53_4D42_u32 as i64, // SMB2
        0x6573_5546,            // FUSE (sshfs and the like)
        0x00C3_6400,            // Ceph
        0x5346_414F,            // AFS
        0x7375_7245,            // Coda
        0x0102_1997,            // 9p
        0x0116_1970,            // GFS2
        0x7461_636F,            // OCFS2
        0x0BD0_0BD0,            // Lustre
    ];

    fn events() -> AddWatchFlags {
        AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW
    }

    /// This process's watches (one inotify instance for every store); `None` when the
    /// kernel gives none.
    fn watches() -> Option<&'static Mutex<Watches>> {
        static WATCHES: OnceLock<Option<Mutex<Watches>>> = OnceLock::new();
        WATCHES
            .get_or_init(|| {
                let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
                Some(Mutex::new(Watches {
                    inotify,
                    subs: HashMap::new(),
                    shared: HashMap::new(),
                    next: 0,
                }))
            })
            .as_ref()
    }

    fn lock(watches: &Mutex<Watches>) -> std::sync::MutexGuard<'_, Watches> {
        watches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether changes to `dir`'s files are all seen here (a local file system).
    fn local(dir: &Path) -> bool {
        nix::sys::statfs::statfs(dir).is_ok_and(|fs| {
            #[allow(clippy::unnecessary_cast)]
            let kind = fs.filesystem_type().0 as i64;
            !REMOTE.contains(&kind)
        })
    }

    /// Watch `dir` from now on (call it before reading what is in it); `None` when it
    /// cannot be watched, and every view then checks every file.
    pub fn subscribe(dir: &Path) -> Option<Subscription> {
        if !local(dir) {
            return None;
        }
        let watches = watches()?;
        let mut w = lock(watches);
        let wd = w.inotify.add_watch(dir, events()).ok()?;
        *w.shared.entry(wd).or_default() += 1;
        w.next += 1;
        let token = w.next;
        w.subs.insert(
            token,
            Sub {
                wd,
                names: HashSet::new(),
                all: false,
                lost: false,
            },
        );
        Some(Subscription { token })
    }

    impl Subscription {
        /// What changed in the directory since it was subscribed or last asked.
        pub fn take(&self) -> Changes {
            let Some(watches) = watches() else {
                return Changes::All;
            };
            let mut w = lock(watches);
            drain(&mut w);
            let Some(sub) = w.subs.get_mut(&self.token) else {
                return Changes::All;
            };
            let names = std::mem::take(&mut sub.names);
            if std::mem::take(&mut sub.all) || sub.lost {
                return Changes::All;
            }
            Changes::Named(names)
        }
    }

    /// Hand every queued event to the subscriptions of its directory.
    fn drain(w: &mut Watches) {
        loop {
            let events = match w.inotify.read_events() {
                Ok(events) => events,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return,
                Err(_) => {
                    // The queue cannot be read: nobody can trust it.
                    for sub in w.subs.values_mut() {
                        sub.lost = true;
                    }
                    return;
                }
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    for sub in w.subs.values_mut() {
                        sub.all = true;
                    }
                    continue;
                }
                let gone = event.mask.intersects(
                    AddWatchFlags::IN_DELETE_SELF
                        | AddWatchFlags::IN_MOVE_SELF
                        | AddWatchFlags::IN_IGNORED,
                );
                for sub in w.subs.values_mut().filter(|s| s.wd == event.wd) {
                    if gone {
                        sub.lost = true;
                    } else if let Some(name) = &event.name {
                        sub.names.insert(name.clone());
                    } else {
                        sub.all = true;
                    }
                }
            }
        }
    }

    impl Drop for Subscription {
        fn drop(&mut self) {
            let Some(watches) = watches() else {
                return;
            };
            let mut w = lock(watches);
            let Some(sub) = w.subs.remove(&self.token) else {
                return;
            };
            let last = match w.shared.get_mut(&sub.wd) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                _ => true,
            };
            if last {
                w.shared.remove(&sub.wd);
                // Already gone when its directory was: nothing to remove then.
                let _ = w.inotify.rm_watch(sub.wd);
            }
        }
    }
}
