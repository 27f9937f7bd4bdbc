//! The durable job journal: one JSON file per job under `<data-dir>/jobs/`, replaced
//! atomically (temporary file renamed over the previous entry), and flushed with the file
//! system (`store::durable`, one `syncfs` shared by every job saving at once) before an
//! accepted job is answered, so a job accepted is never lost. Credential values are never
//! written here.

use crate::protocol::{Job, RequestContext, Timeout};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What ends the second name of a job's last durable entry (`<id>.json.durable`).
const DURABLE_SUFFIX: &str = "durable";

/// The version of the journal entry's shape.
pub const JOURNAL_SCHEMA: u32 = 1;

/// What the journal keeps of a job: enough to run or resume it after a restart.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalEntry {
    /// [`JOURNAL_SCHEMA`].
    pub schema: u32,
    /// The job as last journaled.
    pub job: Job,
    /// The asking process's context, without credential values, its task pinned.
    pub context: RequestContext,
    /// The extra question, if any.
    #[serde(default)]
    pub question: Option<String>,
    /// The prior opinion, if any.
    #[serde(default)]
    pub prior_opinion: Option<String>,
    /// The question exactly as a mesh peer asked it, for a relayed review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// How long the job's exchanges may take, in seconds; read back through the same
    /// check as a request's (an entry out of range is unreadable and moved aside).
    #[serde(rename = "timeout_s")]
    pub timeout: Timeout,
}

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("job journal: {context}: {source}")]
pub struct JournalError {
    /// What was being done, naming the path.
    pub context: String,
    /// The underlying error.
    pub source: io::Error,
}

/// The journal's spare files' directory (`store/spare.rs`): its name begins with a dot,
/// so the load passes over it.
const SPARE_DIR: &str = ".spare";

/// Whether an entry of a job in `state` must be durable before [`Journal::save`] returns.
/// An accepted job (or one queued again) must: the reply that accepts it goes out after,
/// and a job accepted is never lost. A cancelled one must, or a crash could run what the user cancelled.
/// The rest need not, because the records carry the fact: a plan's id is found again
/// from the task (the plan recorded after the job was accepted that no job claims), and
/// a job's end, if a crash loses it, is found again by resuming the job, which sees every
/// outcome recorded and asks nobody. Those entries reach the disk with the next flush of
/// the file system (anyone's) or the kernel's own writeback; until then a crash may leave
/// the newest entry absent, empty or torn, and the load takes the last durable one
/// instead (see [`Journal::save`]).
pub(crate) fn must_flush(state: crate::protocol::JobState) -> bool {
    use crate::protocol::JobState;
    match state {
        JobState::Queued | JobState::Cancelled => true,
        JobState::Running | JobState::Done | JobState::Failed => false,
    }
}

/// Whether `entry` is read under its own job's name (`<id>.json`, `<id>.json.durable`).
fn own_name(path: &Path, entry: &JournalEntry) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split_once('.'))
        .is_some_and(|(id, _)| id == entry.job.id.as_str())
}

/// Give `new` the name `at`, atomically, and retire what `at` named ([`retire`]). When
/// `at` names nothing (a job's first entry) a rename that never replaces; else one
/// exchange of the two names where the file system has it (ext4, XFS, Btrfs, tmpfs): `at`
/// names the new file at once, and the old one is left under `new`'s name. Without
/// either, the old is removed, then the new renamed into place (never *over* a file: see
/// [`Journal::save`]); a crash between the two leaves the job its other name.
///
/// `named`: whether `at` is expected to name a file already (a job's later entry). The
/// expected case is tried first, so a save costs one rename, not a failed one and then
/// the right one; the other is the fallback, so a wrong guess costs only that call.
fn replace(new: &Path, at: &Path, spares: &Path, named: bool) -> io::Result<()> {
    use nix::errno::Errno;
    use nix::fcntl::{renameat2, RenameFlags};
    let unsupported = |errno| matches!(errno, Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP);
    let exchange = || renameat2(None, new, None, at, RenameFlags::RENAME_EXCHANGE);
    // The rename that never replaces, or the exchange when `at` names a file after all:
    // whether the names were exchanged (an old file is left under `new`'s name).
    let fresh = || match renameat2(None, new, None, at, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(false),
        Err(Errno::EEXIST) => exchange().map(|()| true),
        Err(errno) => Err(errno),
    };
    let exchanged = if named {
        match exchange() {
            // `at` names nothing after all (`new` missing fails the other way too).
            Err(Errno::ENOENT) => fresh(),
            done => done.map(|()| true),
        }
    } else {
        fresh()
    };
    match exchanged {
        Ok(false) => Ok(()),
        Ok(true) => {
            match retire(new, spares) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    tracing::debug!(path = %new.display(), error = %e, "a replaced journal entry was left behind");
                }
                _ => {}
            }
            Ok(())
        }
        Err(errno) if unsupported(errno) => {
            match retire(at, spares) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            std::fs::rename(new, at)
        }
        Err(errno) => Err(io::Error::from(errno)),
    }
}

/// Take away the name `path`: its file goes to the journal's spare files when this is its
/// only name (`store/spare.rs`; removing a file whose bytes reached the disk frees its
/// block, which on some file systems the removal waits for), else only the name is
/// removed.
fn retire(path: &Path, spares: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let only_name = std::fs::symlink_metadata(path)?.nlink() == 1;
    if only_name && crate::store::spare::recycle(spares, path) {
        return Ok(());
    }
    std::fs::remove_file(path)
}

/// The journal directory of a data directory.
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// The journal under `data_dir` (its `jobs/` directory is created, `0700`).
    pub fn open(data_dir: &Path) -> Result<Journal, JournalError> {
        let dir = data_dir.join("jobs");
        crate::paths::private_dir(&dir).map_err(|source| JournalError {
            context: format!("cannot create `{}`", dir.display()),
            source,
        })?;
        Ok(Journal { dir })
    }

    /// The journal over an existing directory (see [`Journal::open`]).
    pub fn at(dir: PathBuf) -> Journal {
        Journal { dir }
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a job's entry lives.
    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Where the job's last durable entry is kept beside its newest one: a second name of
    /// the file an accepted, queued-again or cancelled entry was written to.
    fn durable_path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json.{DURABLE_SUFFIX}"))
    }

    /// Journal `entry`, replacing the job's previous entry; durable when it must be
    /// ([`must_flush`]).
    ///
    /// Each entry is a temporary file written whole, then swapped with the job's previous
    /// entry in one atomic exchange of names ([`replace`]): the job's name `<id>.json`
    /// then holds the new entry, and the temporary name the previous one, which goes back
    /// to the journal's spare files for a later save to write over (`store/spare.rs`:
    /// nothing is freed or allocated on the disk). Never renamed *over* a file, which on
    /// ext4 (`auto_da_alloc`) writes the new file out synchronously inside the rename,
    /// under the directory's lock, so that every job's save queued behind each other's
    /// disk write. An entry that must be durable also takes the second name
    /// `<id>.json.durable` (a hard link, swapped the same way with the previous one)
    /// before the file system is flushed. A crash can lose or tear only entries that need
    /// not be durable, and the load then takes the job's durable entry: accepted, queued
    /// again or cancelled, as it last was, and never older than what a reply
    /// acknowledged. A file written over may, after a crash, hold what it held before
    /// (another job's entry) under the job's name: the load reads an entry only under its
    /// own job's name, and removes one under another's.
    pub fn save(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        if self.save_unflushed(entry)? {
            self.flush()?;
        }
        Ok(())
    }

    /// Make durable every entry saved before this call (one shared flush of the file
    /// system, see `store::durable`).
    pub fn flush(&self) -> Result<(), JournalError> {
        crate::store::durable::shared(&self.dir)
            .flush()
            .map_err(|source| JournalError {
                context: format!("cannot flush `{}`", self.dir.display()),
                source,
            })
    }

    /// [`Journal::save`] without its flush: whether the entry must be made durable (by
    /// [`Journal::flush`], or by another flush of the same file system that starts after
    /// this returns) before the job is acknowledged.
    pub fn save_unflushed(&self, entry: &JournalEntry) -> Result<bool, JournalError> {
        debug_assert!(
            entry.context.credentials.is_empty(),
            "credential values are never journaled"
        );
        let id = entry.job.id.as_str();
        let final_path = self.path_of(id);
        let tmp_path = self.dir.join(format!(".{id}.json.tmp"));
        let fail = |what: &str, path: &Path| {
            let context = format!("cannot {what} `{}`", path.display());
            move |source| JournalError { context, source }
        };
        let bytes = serde_json::to_vec_pretty(entry).map_err(|e| JournalError {
            context: format!("cannot encode job `{}`", entry.job.id),
            source: io::Error::other(e),
        })?;
        // `0600`: an entry holds the question's context (paths, the task). A spare file
        // made ahead or recycled when the daemon keeps them (`store/spare.rs`, `0600`
        // too), written over from its start and cut to the entry's length.
        let spares = self.dir.join(SPARE_DIR);
        let (tmp_path, mut file, pooled) = match crate::store::spare::take_reusable(&spares) {
            Some((spare, file)) => (spare, file, true),
            None => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(crate::paths::PRIVATE_FILE_MODE)
                    .open(&tmp_path)
                    .map_err(fail("create", &tmp_path))?;
                (tmp_path, file, false)
            }
        };
        // A file of the pool is written over whole blocks and cut to the entry; one just
        // made (or truncated) is empty, so the bytes alone are written.
        let written = if pooled {
            crate::store::spare::write_over(&mut file, &bytes)
        } else {
            io::Write::write_all(&mut file, &bytes)
        };
        written.map_err(fail("write", &tmp_path)).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp_path);
        })?;
        drop(file);
        let durable = must_flush(entry.job.state);
        // The durable name first, then the job's name. A job's first durable entry (it was
        // just accepted) takes that name by one link, which never replaces anything.
        let first_durable = durable
            && match std::fs::hard_link(&tmp_path, self.durable_path_of(id)) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp_path);
                    return Err(fail("keep the durable entry", &self.durable_path_of(id))(e));
                }
            };
        if durable && !first_durable {
            // A later one: a link put in place of the previous durable entry, so the job
            // always has one. A link left by a save that failed halfway is removed then
            // (the load removes a crash's).
            let link_path = self.dir.join(format!(".{id}.json.{DURABLE_SUFFIX}.tmp"));
            std::fs::hard_link(&tmp_path, &link_path)
                .or_else(|e| match e.kind() {
                    io::ErrorKind::AlreadyExists => std::fs::remove_file(&link_path)
                        .and_then(|()| std::fs::hard_link(&tmp_path, &link_path)),
                    _ => Err(e),
                })
                .and_then(|()| replace(&link_path, &self.durable_path_of(id), &spares, true))
                .map_err(fail("keep the durable entry", &self.durable_path_of(id)))
                .inspect_err(|_| {
                    let _ = std::fs::remove_file(&link_path);
                    let _ = std::fs::remove_file(&tmp_path);
                })?;
        }
        // Only a job's first durable entry (just accepted) comes to an unnamed place.
        replace(&tmp_path, &final_path, &spares, !first_durable)
            .map_err(fail("replace", &final_path))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp_path);
            })?;
        Ok(durable)
    }

    /// Forget a pruned job.
    pub fn remove(&self, id: &str) -> Result<(), JournalError> {
        // The durable entry first: one left alone would bring a pruned job back queued
        // (it would end again without asking anyone, but to no purpose).
        let spares = self.dir.join(SPARE_DIR);
        for path in [self.durable_path_of(id), self.path_of(id)] {
            match retire(&path, &spares) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(JournalError {
                        context: format!("cannot remove `{}`", path.display()),
                        source: e,
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every readable entry, oldest job first. An entry that does not parse is moved
    /// aside (`*.corrupt`) and reported, so one bad file never stops the daemon.
    pub fn load_all(&self) -> Result<Vec<JournalEntry>, JournalError> {
        let read_dir = std::fs::read_dir(&self.dir).map_err(|source| JournalError {
            context: format!("cannot read `{}`", self.dir.display()),
            source,
        })?;
        let durable_end = format!(".json.{DURABLE_SUFFIX}");
        let mut ids = std::collections::BTreeSet::new();
        for item in read_dir.flatten() {
            let path = item.path();
            let name = item.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                // A save interrupted before its rename: the previous entry stands.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if name.starts_with('.') {
                continue;
            }
            if let Some(id) = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(durable_end.as_str()))
            {
                ids.insert(id.to_string());
            }
        }
        let read = |path: &Path| -> Option<Result<JournalEntry, String>> {
            match std::fs::read(path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => Some(Err(e.to_string())),
                Ok(bytes) => match serde_json::from_slice::<JournalEntry>(&bytes) {
                    Err(e) => Some(Err(e.to_string())),
                    Ok(entry) if own_name(path, &entry) => Some(Ok(entry)),
                    Ok(entry) => {
                        // A recycled file under a name a crash kept: the new bytes of a
                        // save that needed no flush were lost, or a pruned job's name
                        // came back. Either way this job has no entry here.
                        tracing::warn!(
                            path = %path.display(),
                            holds = %entry.job.id,
                            "a journal entry under another job's name was removed"
                        );
                        let _ = std::fs::remove_file(path);
                        None
                    }
                },
            }
        };
        let mut entries = Vec::new();
        for id in ids {
            let (newest, durable) = (self.path_of(&id), self.durable_path_of(&id));
            match (read(&newest), read(&durable)) {
                (Some(Ok(entry)), _) | (None, Some(Ok(entry))) => entries.push(entry),
                (Some(Err(message)), Some(Ok(entry))) => {
                    // A newest entry that needed no flush, lost in a crash: the last
                    // durable one stands, and the records carry what it lacks.
                    tracing::warn!(
                        path = %newest.display(),
                        %message,
                        "a job's newest journal entry was torn; its last durable entry stands"
                    );
                    let _ = std::fs::remove_file(&newest);
                    entries.push(entry);
                }
                (newest_read, durable_read) => {
                    for (path, parsed) in [(&newest, newest_read), (&durable, durable_read)] {
                        let Some(Err(message)) = parsed else { continue };
                        let aside = self.dir.join(format!(
                            "{id}{}.corrupt",
                            if path == &durable { ".durable" } else { "" }
                        ));
                        tracing::error!(
                            path = %path.display(),
                            moved_to = %aside.display(),
                            %message,
                            "unreadable job journal entry moved aside"
                        );
                        let _ = std::fs::rename(path, &aside);
                    }
                }
            }
        }
        entries.sort_by(|a, b| a.job.id.cmp(&b.job.id));
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::JobState;

    #[test]
    fn only_an_accepted_or_cancelled_entry_must_be_flushed() {
        // The daemon sends a job's `done` before saving its end only when that end is
        // not flushed (`Jobs::finish`): a cancelled job's end must be durable first.
        assert!(must_flush(JobState::Queued));
        assert!(must_flush(JobState::Cancelled));
        for state in [JobState::Running, JobState::Done, JobState::Failed] {
            assert!(!must_flush(state), "{state:?}");
        }
    }

    fn entry(id: &str) -> JournalEntry {
        JournalEntry {
            schema: JOURNAL_SCHEMA,
            job: Job::sample(id, JobState::Queued),
            context: serde_json::from_value(serde_json::json!({"root": "/r"})).unwrap(),
            question: Some("why?".into()),
            prior_opinion: None,
            prompt: None,
            timeout: Timeout::from_secs_f64(1.5).unwrap(),
        }
    }

    /// A journal in a fresh temporary directory (kept alive by the first), and its
    /// `jobs/` directory.
    fn journal_in_tempdir() -> (tempfile::TempDir, Journal, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let jobs = dir.path().join("jobs");
        (dir, journal, jobs)
    }

    #[test]
    fn entries_round_trip_oldest_first_and_replace_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        journal.save(&entry("02")).unwrap();
        journal.save(&entry("01")).unwrap();
        let mut later = entry("02");
        later.job.state = JobState::Running;
        journal.save(&later).unwrap();
        let loaded = journal.load_all().unwrap();
        let ids: Vec<&str> = loaded.iter().map(|e| e.job.id.as_str()).collect();
        assert_eq!(ids, ["01", "02"]);
        assert_eq!(loaded[1].job.state, JobState::Running);
        assert_eq!(loaded[0].timeout.as_secs_f64(), 1.5);
        journal.remove("01").unwrap();
        journal.remove("01").unwrap();
        assert_eq!(journal.load_all().unwrap().len(), 1);
    }

    #[test]
    fn a_torn_save_and_a_corrupt_entry_never_stop_the_load() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        journal.save(&entry("01")).unwrap();
        let jobs = dir.path().join("jobs");
        std::fs::write(jobs.join(".02.json.tmp"), "{\"half").unwrap();
        std::fs::write(jobs.join("03.json"), "not json").unwrap();
        let loaded = journal.load_all().unwrap();
        assert_eq!(loaded.len(), 1);
        assert!(
            !jobs.join(".02.json.tmp").exists(),
            "the torn save is dropped"
        );
        assert!(
            jobs.join("03.corrupt").exists(),
            "the corrupt entry is kept aside"
        );
        assert!(!jobs.join("03.json").exists());
    }

    #[test]
    fn a_lost_or_torn_newest_entry_falls_back_to_the_last_durable_one() {
        let (_dir, journal, jobs) = journal_in_tempdir();
        for id in ["01", "02", "03"] {
            journal.save(&entry(id)).unwrap();
            let mut running = entry(id);
            running.job.state = JobState::Running;
            journal.save(&running).unwrap();
        }
        // Saved without a flush, the newest entry of 02 is torn and 03's is gone: the
        // accepted entries stand, and 01's newest is read as written.
        std::fs::write(jobs.join("02.json"), "{\"sch").unwrap();
        std::fs::remove_file(jobs.join("03.json")).unwrap();
        let loaded = journal.load_all().unwrap();
        let states: Vec<(&str, JobState)> = loaded
            .iter()
            .map(|e| (e.job.id.as_str(), e.job.state))
            .collect();
        assert_eq!(
            states,
            [
                ("01", JobState::Running),
                ("02", JobState::Queued),
                ("03", JobState::Queued)
            ]
        );
        // A cancel is durable: it replaces the durable entry, so an entry lost after it
        // never brings the job back to life.
        let mut cancelled = entry("01");
        cancelled.job.state = JobState::Cancelled;
        journal.save(&cancelled).unwrap();
        let mut later = entry("01");
        later.job.state = JobState::Cancelled;
        later.question = Some("later".into());
        journal.save(&later).unwrap();
        // (A new file torn, as a save needing no flush can leave it: the flushed one is
        // the durable entry's own file.)
        std::fs::remove_file(jobs.join("01.json")).unwrap();
        std::fs::write(jobs.join("01.json"), "").unwrap();
        let loaded = journal.load_all().unwrap();
        assert_eq!(loaded[0].job.state, JobState::Cancelled);
        journal.remove("01").unwrap();
        assert!(!jobs.join("01.json").exists() && !jobs.join("01.json.durable").exists());
        assert_eq!(journal.load_all().unwrap().len(), 2);
    }

    #[test]
    fn a_first_durable_entry_is_one_file_under_both_names() {
        use std::os::unix::fs::MetadataExt;
        let (_dir, journal, jobs) = journal_in_tempdir();
        journal.save(&entry("01")).unwrap();
        let (newest, durable) = (
            std::fs::metadata(jobs.join("01.json")).unwrap(),
            std::fs::metadata(jobs.join("01.json.durable")).unwrap(),
        );
        assert_eq!((newest.ino(), newest.nlink()), (durable.ino(), 2));
        let names: Vec<String> = std::fs::read_dir(&jobs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.') && n != SPARE_DIR)
            .collect();
        assert!(names.is_empty(), "nothing left beside them: {names:?}");
    }

    #[test]
    fn a_durable_link_left_by_a_failed_save_is_replaced() {
        let (_dir, journal, jobs) = journal_in_tempdir();
        journal.save(&entry("01")).unwrap();
        std::fs::write(jobs.join(".01.json.durable.tmp"), "stale").unwrap();
        let mut cancelled = entry("01");
        cancelled.job.state = JobState::Cancelled;
        journal.save(&cancelled).unwrap();
        let durable: JournalEntry =
            serde_json::from_slice(&std::fs::read(jobs.join("01.json.durable")).unwrap()).unwrap();
        assert_eq!(durable.job.state, JobState::Cancelled);
        assert!(!jobs.join(".01.json.durable.tmp").exists());
    }

    #[test]
    fn an_entry_read_only_under_its_own_jobs_name() {
        // A recycled file written over, whose new bytes a crash lost while its new name
        // stayed: it holds another job's entry.
        let (_dir, journal, jobs) = journal_in_tempdir();
        for id in ["01", "02"] {
            journal.save(&entry(id)).unwrap();
            let mut running = entry(id);
            running.job.state = JobState::Running;
            journal.save(&running).unwrap();
        }
        let mut done = entry("01");
        done.job.state = JobState::Done;
        journal.save(&done).unwrap();
        // 02's newest entry holds 01's: 02's durable (accepted) entry stands.
        std::fs::copy(jobs.join("01.json"), jobs.join("02.json")).unwrap();
        // 03 has no entry but one holding 01's (a pruned job's name back after a crash,
        // its file since written over): removed, never read as 01.
        std::fs::copy(jobs.join("01.json"), jobs.join("03.json.durable")).unwrap();
        let loaded = journal.load_all().unwrap();
        let states: Vec<(&str, JobState)> = loaded
            .iter()
            .map(|e| (e.job.id.as_str(), e.job.state))
            .collect();
        assert_eq!(states, [("01", JobState::Done), ("02", JobState::Queued)]);
        assert!(!jobs.join("03.json.durable").exists());
        assert!(
            !jobs.join("02.json").exists(),
            "02's durable entry is its only one"
        );
    }

    #[test]
    fn a_replace_names_the_new_file_whichever_way_it_guessed() {
        let dir = tempfile::tempdir().unwrap();
        let spares = dir.path().join(SPARE_DIR);
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let at = dir.path().join("at.json");
        for (named, exists) in [(true, true), (true, false), (false, true), (false, false)] {
            let _ = std::fs::remove_file(&at);
            if exists {
                write("at.json", "old");
            }
            let new = write("new.tmp", "new");
            replace(&new, &at, &spares, named).unwrap();
            assert_eq!(
                std::fs::read_to_string(&at).unwrap(),
                "new",
                "guessed named={named}, was named={exists}"
            );
            // The old file went to the spares or was removed: never left under `new`.
            assert!(!new.exists(), "guessed named={named}, was named={exists}");
        }
        // A missing new file is an error either way, and `at` keeps what it named.
        for named in [true, false] {
            let missing = dir.path().join("missing.tmp");
            assert!(replace(&missing, &at, &spares, named).is_err());
            assert_eq!(std::fs::read_to_string(&at).unwrap(), "new");
        }
    }

    #[test]
    fn a_replaced_entrys_file_is_removed_without_spares_and_its_other_name_kept() {
        // Without spares (a process that keeps none) the exchange leaves the previous
        // entry under the temporary name, which is then removed; the accepted entry's
        // file keeps its durable name.
        let (_dir, journal, jobs) = journal_in_tempdir();
        journal.save(&entry("01")).unwrap();
        let mut running = entry("01");
        running.job.state = JobState::Running;
        journal.save(&running).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&jobs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["01.json", "01.json.durable"]);
        let durable: JournalEntry =
            serde_json::from_slice(&std::fs::read(jobs.join("01.json.durable")).unwrap()).unwrap();
        assert_eq!(durable.job.state, JobState::Queued);
    }
}
