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
}
