//! The layout on disk: record file names, reading a record file (never through a link),
//! listing a task, the task's lock, and writing a file atomically.

use super::*;

/// How many missing record names the first read of a task looks up once more when its
/// listing has gaps (see `Store::list`).
pub(super) const MAX_LOOKED_UP: u64 = 4096;

/// The file name a record is stored under: its sequence, zero-padded to ten digits so that
/// names sort in sequence order.
pub fn file_name(record: &Record) -> String {
    sequence_file(record.envelope.sequence)
}

pub(super) fn sequence_file(sequence: u64) -> String {
    chain::record_file(sequence)
}

/// The sequence a record file holds, if `name` is a record file ([`chain::FileName`]).
pub(super) fn record_sequence(name: &OsStr) -> Option<u64> {
    match chain::FileName::of(name) {
        chain::FileName::Record(sequence) => Some(sequence),
        _ => None,
    }
}

/// A task's exclusive lock, held by one write ([`Store::lock_task`]); let go on drop.
pub(super) struct TaskLock {
    _held: Flock<File>,
    _quiet: super::spare::Quiet,
}

/// Whether a directory entry is a temporary file of a write in flight (or of a dead one).
pub(super) fn is_temp_file(name: &OsStr) -> bool {
    chain::FileName::of(name) == chain::FileName::Store && name != LOCK_FILE
}

/// Open `path`, a file in a task's directory, for reading: never through a symbolic link,
/// never blocking on a pipe planted there, its access time left alone where allowed
/// ([`crate::paths::open_for_reading`]), and only when it is a regular file. Its
/// metadata, taken from the open file, comes with it.
pub(super) fn open_in_task(path: &Path) -> io::Result<(File, fs::Metadata)> {
    let file = crate::paths::open_for_reading(path, libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
        .map_err(|e| refused_link(path, e))?;
    let stat = file.metadata()?;
    if !stat.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is not a regular file; a task's directory holds only record files: move \
                 it out",
                path.display()
            ),
        ));
    }
    Ok((file, stat))
}

/// Every byte of `file`, opened by [`open_in_task`] with `stat`, read to its end (bytes
/// added since `stat` was taken included). Read through `take`, the generic read to the
/// end: `File`'s own asks the file for its size and position again (an `fstat` and an
/// `lseek` per file, on top of the `fstat` that `stat` already is), and a task read
/// afresh, `verify` and `--no-daemon` read every record file of a task this way.
pub(super) fn read_opened(file: &mut File, stat: &fs::Metadata) -> io::Result<Vec<u8>> {
    // One byte more than the size, so that the read that finds the end needs no growth.
    let size = usize::try_from(stat.len()).unwrap_or(0);
    let mut bytes = Vec::with_capacity(size.saturating_add(1));
    io::Read::by_ref(file)
        .take(u64::MAX)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Every byte of `path`, a file in a task's directory, opened as [`open_in_task`] opens it.
pub(super) fn read_in_task(path: &Path) -> io::Result<Vec<u8>> {
    let (mut file, stat) = open_in_task(path)?;
    read_opened(&mut file, &stat)
}

/// The bytes of record file `name` in a task's directory `dir`, or why they cannot be read.
fn read_record_file(dir: &Path, name: &str) -> Result<Vec<u8>, StoreError> {
    let path = dir.join(name);
    read_in_task(&path).map_err(|source| StoreError::Io {
        context: format!(
            "cannot read record `{}`; check its permissions",
            path.display()
        ),
        source,
    })
}

/// `O_NOFOLLOW` refuses a symbolic link with `ELOOP`: say so in words, naming it.
pub(super) fn refused_link(path: &Path, error: io::Error) -> io::Error {
    if error.raw_os_error() == Some(Errno::ELOOP as i32) {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is a symbolic link, which the store never follows inside a task's \
                 directory; remove it",
                path.display()
            ),
        )
    } else {
        error
    }
}

/// The open flags the store adds, from `nix` (which re-exports the C library's values).
pub(super) mod libc_flags {
    use nix::fcntl::OFlag;
    pub const NOFOLLOW: i32 = OFlag::O_NOFOLLOW.bits();
    pub const NONBLOCK: i32 = OFlag::O_NONBLOCK.bits();
}

/// One record file as read from disk, for `verify`.
pub struct StoredFile {
    /// Its name (`0000000007.json`).
    pub name: String,
    /// The sequence its name holds.
    pub sequence: u64,
    /// Its bytes, exactly as stored.
    pub bytes: Vec<u8>,
}

/// What [`Store::parsed_files`] gives `verify`: the names of a task's files with their
/// sequences (strays first, at 0), and for each record file among them, in order, its hash
/// and what it parses to.
pub type ParsedFiles = (Vec<(String, u64)>, Vec<chain::Parsed>);

impl StoredFile {
    /// The file as the chain's walk reads it.
    pub fn as_chain_file(&self) -> chain::File<'_> {
        chain::File {
            name: &self.name,
            sequence: self.sequence,
            bytes: &self.bytes,
        }
    }
}

/// One record file read: the record, the chain's hash of its bytes, their size and the
/// file's identity ([`FileId`]) taken before they were read.
pub(super) struct ReadFile {
    pub(super) record: Record,
    pub(super) digest: String,
    pub(super) size: usize,
    pub(super) file: Option<FileId>,
}

/// Read and parse the record file at `path`, with the chain's hash of its bytes; `None`
/// when there is none.
pub(super) fn read_record(path: &Path) -> Result<Option<ReadFile>, StoreError> {
    // The identity is taken from the open file before its bytes are read: a change made
    // while reading then shows as a changed identity next time, never the reverse.
    let read = |path: &Path| -> io::Result<(Vec<u8>, Option<FileId>)> {
        let (mut file, stat) = open_in_task(path)?;
        let id = FileId::of(&stat, SystemTime::now());
        Ok((read_opened(&mut file, &stat)?, id))
    };
    let (bytes, file) = match read(path) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StoreError::Io {
                context: format!(
                    "cannot read record `{}`; check its permissions",
                    path.display()
                ),
                source,
            })
        }
    };
    let corrupt = |message: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        message: format!(
            "{message}; records are never edited by hand: move the file out of `{}`",
            path.parent().unwrap_or(path).display()
        ),
    };
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let named = path.file_name().and_then(record_sequence);
    if named != Some(record.envelope.sequence) {
        return Err(corrupt(format!(
            "it holds sequence {} under another sequence's name",
            record.envelope.sequence
        )));
    }
    Ok(Some(ReadFile {
        digest: chain::digest(&bytes),
        size: bytes.len(),
        record,
        file,
    }))
}

/// A record's temporary file: written whole, flushed, then put in place under the
/// record's name ([`Temp::place`]) or discarded.
pub(super) struct Temp {
    file: File,
    /// Its name: a spare's, or a file made beside the record. `None` for a file made with
    /// no name at all (Linux's `O_TMPFILE`), which is linked to the record's name instead
    /// of renamed, and which nothing can see, nor a crash leave behind, before that.
    path: Option<PathBuf>,
}

impl Temp {
    /// Give the file the name `to`, unless `to` exists (then `AlreadyExists`, and
    /// nothing changed): a rename of its name ([`rename_new`]), or a link of a file with
    /// none. Either is durable at the next flush of the file system.
    pub fn place(&self, to: &Path) -> io::Result<()> {
        match &self.path {
            Some(path) => rename_new(path, to),
            None => link_unnamed(&self.file, to),
        }
    }

    /// Remove its name, if it has one: the write did not happen.
    pub fn discard(&self) {
        if let Some(path) = &self.path {
            let _ = fs::remove_file(path);
        }
    }
}

/// The temporary file of a record about to be named `name` in `dir`: a spare made ahead
/// in `spares` when this process keeps them (`spare.rs`); else, where the file system and
/// the kernel allow it, a file made in `dir` with no name (`O_TMPFILE`): one directory
/// entry added when it is placed, where a named file costs one added when it is made,
/// then one removed and one added by the rename (on ext4 about 20 µs of system time a
/// record, `docs/DAEMON.md`, "Spare files"); else a new file beside the record named
/// `.<name>.<pid>.tmp` (`0600` either way, never through a symbolic link). With it,
/// whether it is a spare, which holds bytes already (a block of zeros written out ahead:
/// `spare::WRITTEN_OUT`) and is written with `spare::write_over`.
fn temporary(dir: &Path, name: &str, spares: &Path) -> io::Result<(Temp, bool)> {
    if let Some((spare, file)) = super::spare::take(spares) {
        let temp = Temp {
            file,
            path: Some(spare),
        };
        return Ok((temp, true));
    }
    if let Some(file) = unnamed_in(dir) {
        return Ok((Temp { file, path: None }, false));
    }
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc_flags::NOFOLLOW)
        .open(&temp)?;
    let temp = Temp {
        file,
        path: Some(temp),
    };
    Ok((temp, false))
}

/// [`temporary`] holding `bytes` and nothing else, written whole; nothing is left behind
/// when that fails.
pub(super) fn written(dir: &Path, name: &str, spares: &Path, bytes: &[u8]) -> io::Result<Temp> {
    let (mut temp, from_spare) = temporary(dir, name, spares)?;
    let whole = if from_spare {
        super::spare::write_over(&mut temp.file, bytes)
    } else {
        temp.file.write_all(bytes)
    };
    match whole {
        Ok(()) => Ok(temp),
        Err(e) => {
            temp.discard();
            Err(e)
        }
    }
}

/// A new file with no name in `dir` (`O_TMPFILE`), when this process can later give it
/// one: Linux, a file system that makes such files, and `/proc/self/fd` to link it
/// through (the link by descriptor alone, `AT_EMPTY_PATH`, needs a privilege). `None`
/// otherwise: the caller makes a named file.
#[cfg(target_os = "linux")]
fn unnamed_in(dir: &Path) -> Option<File> {
    static LINKABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*LINKABLE.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return None;
    }
    OpenOptions::new()
        .write(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_TMPFILE.bits())
        .open(dir)
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn unnamed_in(_dir: &Path) -> Option<File> {
    None
}

/// Link `file`, which has no name, to `to` unless `to` exists.
#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, to: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let by_descriptor = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    match nix::unistd::linkat(
        None,
        by_descriptor.as_path(),
        None,
        to,
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    ) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
        Err(errno) => Err(io::Error::from(errno)),
    }
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_file: &File, _to: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Write `bytes` to `dir/name` so that it appears whole or not at all: a temporary file
/// ([`written`]), flushed (with every name made before it on the file system: see
/// [`durable`]), then put in place without replacing anything ([`Temp::place`]). The new
/// name is durable at the next flush of the file system (the caller's, or the next
/// writer's).
pub(super) fn write_atomically(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    flusher: &durable::Flusher,
    spares: &Path,
) -> Result<(), StoreError> {
    let target = dir.join(name);
    let result = written(dir, name, spares, bytes).and_then(|temp| {
        let placed = flusher.flush().and_then(|()| temp.place(&target));
        if placed.is_err() {
            temp.discard();
        }
        placed
    });
    if let Err(source) = result {
        if source.kind() == io::ErrorKind::AlreadyExists {
            // Under the task's lock this cannot happen; if it does, keep what is stored.
            return Err(StoreError::Io {
                context: format!(
                    "record `{}` already exists; refusing to overwrite it (is another program \
                     writing into the state directory?)",
                    target.display()
                ),
                source,
            });
        }
        return Err(StoreError::Io {
            context: format!(
                "cannot write record `{}`; nothing was stored (check free space and \
                 permissions)",
                target.display()
            ),
            source,
        });
    }
    Ok(())
}

/// Rename `from` to `to` unless `to` exists (`renameat2` with `RENAME_NOREPLACE`, one
/// system call; a file system without it gets a look first, under the task's lock).
pub(super) fn rename_new(from: &Path, to: &Path) -> io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags};
    match renameat2(None, from, None, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
        Err(Errno::EINVAL | Errno::ENOSYS) => {
            if fs::symlink_metadata(to).is_ok() {
                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
            }
            fs::rename(from, to)
        }
        Err(errno) => Err(io::Error::from(errno)),
    }
}

impl Store {
    /// Every record file of `task`, read afresh from disk (not from the cache), in the
    /// order of the sequences their names hold, after the strays (the names that are not
    /// record files nor the store's own, sequence 0 and no bytes), each file's bytes kept
    /// (the tests and benches; `verify` and `adopt` read them with [`Store::parsed_files`]).
    pub fn stored_files(&self, task: &TaskName) -> Result<Vec<StoredFile>, StoreError> {
        let dir = self.task_dir(task);
        let named = self.named_files(task, &dir)?;
        // The record files read side by side over the machine's cores.
        let workers = chain::parallel::workers(named.len());
        let read = chain::parallel::map(&named, workers, |(name, sequence)| {
            let bytes = match sequence {
                0 => Vec::new(),
                _ => read_record_file(&dir, name)?,
            };
            Ok::<_, StoreError>(StoredFile {
                name: name.clone(),
                sequence: *sequence,
                bytes,
            })
        });
        read.into_iter().collect()
    }

    /// What `verify` walks in `task`, read afresh from disk (not from the cache): the names
    /// of its files as [`Store::stored_files`] orders them (strays first, sequence 0), and
    /// for each record file among them, in that order, the chain's hash of its bytes and
    /// what they parse to. Each file is read, hashed and parsed in one go by the worker
    /// that reads it, and its bytes are let go at once: holding every file of a task of
    /// 100,000 records until the end took about 100 MB of fresh pages, which the kernel
    /// zeroes one by one, a large part of `verify`'s time.
    pub fn parsed_files(&self, task: &TaskName) -> Result<ParsedFiles, StoreError> {
        let dir = self.task_dir(task);
        let named = self.named_files(task, &dir)?;
        let records = named.partition_point(|(_, sequence)| *sequence == 0);
        let workers = chain::parallel::workers(named.len() - records);
        let mut parsed = chain::parallel::map(&named[records..], workers, |(name, _)| {
            read_record_file(&dir, name).map(|bytes| chain::parse_file(&bytes))
        });
        // The first failure, if any; else every result taken out in place.
        if let Some(failed) = parsed.iter().position(Result::is_err) {
            parsed.swap_remove(failed).map(drop)?;
        }
        let parsed = parsed.into_iter().filter_map(Result::ok).collect();
        Ok((named, parsed))
    }

    /// The names in `task`'s directory `dir` that are record files (with their sequence)
    /// or strays (sequence 0), sorted by sequence then name; the store's own are left out.
    fn named_files(&self, task: &TaskName, dir: &Path) -> Result<Vec<(String, u64)>, StoreError> {
        let listing = match fs::read_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut named = Vec::new();
        for entry in listing {
            let entry = entry.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`",
                dir.display()
            )))?;
            let name = entry.file_name();
            let sequence = match chain::FileName::of(&name) {
                chain::FileName::Record(sequence) => sequence,
                chain::FileName::Store => continue,
                chain::FileName::Stray => 0,
            };
            named.push((name.to_string_lossy().into_owned(), sequence));
        }
        named.sort_unstable_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        Ok(named)
    }

    /// Every task of the state directory, sorted. Directories whose name is not a valid
    /// task are not tasks and are skipped.
    pub fn tasks(&self) -> Result<Vec<TaskName>, StoreError> {
        let entries = match fs::read_dir(&self.state_dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other.map_err(io_error(format!(
                "cannot list the state directory `{}`; check that it is readable",
                self.state_dir.display()
            )))?,
        };
        let mut tasks = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(format!(
                "cannot list the state directory `{}`",
                self.state_dir.display()
            )))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let task = entry
                .file_name()
                .to_str()
                .and_then(|n| TaskName::new(n).ok());
            if let (true, Some(task)) = (is_dir, task) {
                tasks.push(task);
            }
        }
        tasks.sort();
        Ok(tasks)
    }

    /// The first read of a task: every record file of its directory.
    pub(super) fn list(
        &self,
        task: &TaskName,
        dir: &Path,
        cache: &mut TaskCache,
    ) -> Result<Vec<OsString>, StoreError> {
        let entries = match fs::read_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                cache.listed = true;
                return Ok(Vec::new());
            }
            other => other.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`; check that it is readable",
                dir.display()
            )))?,
        };
        let mut sequences = Vec::new();
        let mut temps = Vec::new();
        let mut strays = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(format!(
                "cannot list the records of task `{task}` in `{}`",
                dir.display()
            )))?;
            let name = entry.file_name();
            if let Some(sequence) = record_sequence(&name) {
                sequences.push(sequence);
            } else if is_temp_file(&name) {
                temps.push(name);
            } else if name != LOCK_FILE {
                strays.push(name.to_string_lossy().into_owned());
            }
        }
        sequences.sort_unstable();
        strays.sort_unstable();
        // A listing taken while another process writes may miss an entry added during it:
        // records are created in sequence order, so a gap below the highest is a record
        // written while listing, found by looking up the missing names once more. Only a
        // bounded number of them: a planted huge sequence is a gap the walk reports, not
        // ten billion names to look up.
        let listed: HashSet<u64> = sequences.iter().copied().collect();
        let highest = sequences.last().copied().unwrap_or(0);
        let missing = highest.saturating_sub(sequences.len() as u64);
        let mut records = Vec::with_capacity(sequences.len());
        if missing <= MAX_LOOKED_UP {
            for sequence in 1..=highest {
                let path = dir.join(sequence_file(sequence));
                let found = if listed.contains(&sequence) {
                    read_record(&path)?
                } else {
                    read_record(&path).unwrap_or(None)
                };
                records.extend(found);
            }
        } else {
            for &sequence in &sequences {
                records.extend(read_record(&dir.join(sequence_file(sequence)))?);
            }
        }
        records.sort_by_key(|read| read.record.envelope.sequence);
        cache.bytes = records.iter().map(|read| read.size).sum();
        cache.records = Vec::with_capacity(records.len());
        cache.digests = Vec::with_capacity(records.len());
        cache.files = Vec::with_capacity(records.len());
        for read in records {
            cache.records.push(read.record);
            cache.digests.push(read.digest);
            cache.files.push(read.file);
        }
        cache.highest = highest;
        cache.strays = strays;
        cache.listed = true;
        Ok(temps)
    }

    /// Create a task's directory (and the state directory), private to the user.
    pub(super) fn create_task_dir(&self, dir: &Path) -> Result<(), StoreError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_error(format!(
                "cannot create `{}`; check that the state directory `{}` is writable or \
                 choose another with --state-dir",
                dir.display(),
                self.state_dir.display()
            )))?;
        // The new directory's entry is durable once the first record's bytes are: that
        // flush covers every change to the file system made before it.
        Ok(())
    }

    /// Take the task's exclusive lock, waiting for any other writer to finish; while it is
    /// held, this process makes no spare file ([`super::spare::quiet`]).
    pub(super) fn lock_task(&self, dir: &Path) -> Result<TaskLock, StoreError> {
        let quiet = super::spare::quiet();
        self.flock_task(dir).map(|held| TaskLock {
            _held: held,
            _quiet: quiet,
        })
    }

    fn flock_task(&self, dir: &Path) -> Result<Flock<File>, StoreError> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
            .open(&path)
            .map_err(|e| refused_link(&path, e))
            .map_err(io_error(format!(
                "cannot open the task lock `{}`; it must be a regular file in a writable \
                 directory",
                path.display()
            )))?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusive) {
                Ok(held) => return Ok(held),
                Err((back, Errno::EINTR)) => file = back,
                Err((_, errno)) => {
                    return Err(StoreError::Io {
                        context: format!(
                            "cannot lock `{}`; the file system must support `flock`",
                            path.display()
                        ),
                        source: io::Error::from(errno),
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_record_file_is_read_whole_whatever_it_became_after_it_was_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0000000001.json");
        let record = b"{\"id\": \"a record's bytes\"}".repeat(200);
        fs::write(&path, &record).unwrap();
        assert_eq!(read_in_task(&path).unwrap(), record);

        // Bytes added after the file was opened (and its size taken) are read too.
        let (mut file, stat) = open_in_task(&path).unwrap();
        let more = b"and more".repeat(1000);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&more)
            .unwrap();
        let read = read_opened(&mut file, &stat).unwrap();
        assert_eq!(read.len(), record.len() + more.len());
        assert_eq!(&read[..record.len()], &record[..]);
        assert_eq!(&read[record.len()..], &more[..]);

        // A file cut short after it was opened gives what it still holds, nothing made up.
        let (mut file, stat) = open_in_task(&path).unwrap();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(5)
            .unwrap();
        assert_eq!(read_opened(&mut file, &stat).unwrap(), &record[..5]);

        let empty = dir.path().join("0000000002.json");
        fs::write(&empty, b"").unwrap();
        assert_eq!(read_in_task(&empty).unwrap(), Vec::<u8>::new());
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// With no spare, a temporary file on Linux has no name until it is placed: nothing
    /// stray shows beside the records while it is written, nor after it is discarded or
    /// dropped (a writer killed there), and placing it never replaces a record.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_temporary_file_without_a_spare_has_no_name_until_it_is_placed() {
        let dir = tempfile::tempdir().unwrap();
        let spares = dir.path().join("+spare");
        let temp = written(dir.path(), "0000000001.json", &spares, b"{\"one\": 1}\n").unwrap();
        assert!(temp.path.is_none(), "made with no name (O_TMPFILE)");
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        let first = dir.path().join("0000000001.json");
        temp.place(&first).unwrap();
        assert_eq!(names(dir.path()), ["0000000001.json"]);
        assert_eq!(fs::read(&first).unwrap(), b"{\"one\": 1}\n");
        let mode = fs::metadata(&first).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "private to its owner: {mode:o}");

        // A second file placed under a taken name: refused, the record untouched.
        let other = written(dir.path(), "0000000001.json", &spares, b"{\"two\": 2}\n").unwrap();
        let refused = other.place(&first).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&first).unwrap(), b"{\"one\": 1}\n");
        other.discard();
        drop(other);
        let dropped = temporary(dir.path(), "0000000002.json", &spares).unwrap();
        drop(dropped);
        assert_eq!(names(dir.path()), ["0000000001.json"]);
    }

    #[test]
    fn only_a_regular_file_is_read_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere.json");
        fs::write(&target, b"{}").unwrap();
        let link = dir.path().join("0000000001.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let refused = read_in_task(&link).unwrap_err().to_string();
        assert!(refused.contains("symbolic link"), "{refused}");
        let inner = dir.path().join("0000000002.json");
        fs::create_dir(&inner).unwrap();
        let refused = read_in_task(&inner).unwrap_err().to_string();
        assert!(refused.contains("not a regular file"), "{refused}");
    }
}
