//! The persisted availability index: what the availability index (`store::availability`)
//! and the track-record index (`store::track`) were fed, kept in one file next to the
//! records (`<state>/+index`), so that a fresh process (`--no-daemon`, a daemon just
//! started) takes it instead of reading every task's records again.
//!
//! It is only a cache, never trusted over the records:
//!
//! - **Checked per task by one `stat`.** For each task it holds how far it was fed (the
//!   highest sequence), how many record files there were at or below it and a digest of
//!   their names and inode numbers (what a directory listing gives, without opening a
//!   file), and the task directory's identity (device, inode, modification and change
//!   times) when that identity vouches for the listing: creating, removing or renaming
//!   any file in a directory changes its times, so an unchanged identity means the same
//!   names on the same inodes. A directory changed within [`RACY_WINDOW`] of being looked
//!   at vouches for nothing (the file system's clock ticks coarsely) and is listed next
//!   time. Each directory is looked up by its name in the opened state directory, and a
//!   large root's ([`PARALLEL_FROM`] tasks or more) by a few threads at once. No cheaper
//!   proof covers every task: a record added to a task changes that task directory's
//!   times, never the state directory's.
//! - **Consultations stripped.** The history tail and the recent spend are kept as arrays
//!   of the fields availability and budgets read ([`Kept`]): a fresh process parses each.
//! - **Repaired when records were only added.** A task whose directory changed is listed:
//!   when the record files at or below what was fed are the same names on the same inodes,
//!   only the records past it are read; anything else (a record removed, replaced by a
//!   rename as editors and `sed -i` do, a record put into a gap, a task directory gone)
//!   throws the whole file away and every task is read again.
//! - **Untrusted input.** A repository can be cloned with any file in it: the file must be
//!   a regular file (never a link) of this user, private (no group or other access), at
//!   most [`MAX_INDEX_BYTES`], start with its magic, its version and the SHA-256 of the
//!   rest, parse with no unknown field, be bound to this state directory (its device and
//!   inode), and every record it carries must belong to a task it names, at or below what
//!   was fed. Anything else, and the file is rebuilt. (A clone or a copy never matches:
//!   inode numbers differ.)
//! - **Not flushed.** It is written to a temporary file and renamed into place, private to
//!   the user, after a catch-up fed something (a long-lived store at most every
//!   [`SAVE_EVERY`]), never on the write path of a record, and never `fsync`ed: after a
//!   crash it is either an older whole file, which the checks above catch up or reject, or
//!   torn, which its digest rejects.
//!
//! What a directory's identity cannot show is a record file rewritten in place (same
//! inode, the directory untouched). The daemon's in-memory index does not see that either:
//! records are never edited, such an edit breaks the hash chain, and `verify` reports it.

use super::*;
use crate::core::records::{Consultation, ConsultationStatus, Envelope, FailureKind, Usage};
use crate::core::track::Settled;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::DirEntryExt;

/// The index's name in the state directory, a directory of its own that holds the file
/// ([`FILE_IN_DIR`]) and its temporary files, so that writing the index never changes the
/// state directory's times (which vouch for its list of tasks). Not a valid task name
/// (`+` is outside the task alphabet), so it is never taken for a task, and a task can
/// never be named so.
pub const INDEX_FILE: &str = "+index";

/// The index's file in its directory.
const FILE_IN_DIR: &str = "index";

/// The version of the index's format; a file of another version is rebuilt.
pub const INDEX_VERSION: u32 = 3;

/// The first word of the index's file.
const MAGIC: &str = "advisord-index";

/// The largest index file read; a larger one is rebuilt.
pub const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// How many record files of a task changed within [`RACY_WINDOW`] a command marks one by
/// one; a larger such task leaves the file as it was until the task has settled.
pub const MAX_FILE_MARKS: u64 = 4096;

/// How often a long-lived store (the daemon's) writes the index at most; a store asked
/// once (a command's) writes it after its catch-up.
pub const SAVE_EVERY: Duration = Duration::from_secs(30);

/// A directory's identity as `stat` gives it; in the file, an array (the file is read by
/// every fresh process: it is kept small).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    from = "(u64, u64, i64, i64, i64, i64)",
    into = "(u64, u64, i64, i64, i64, i64)"
)]
pub(super) struct DirId {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl From<(u64, u64, i64, i64, i64, i64)> for DirId {
    fn from((dev, ino, m, mn, c, cn): (u64, u64, i64, i64, i64, i64)) -> DirId {
        DirId {
            dev,
            ino,
            mtime: (m, mn),
            ctime: (c, cn),
        }
    }
}

impl From<DirId> for (u64, u64, i64, i64, i64, i64) {
    fn from(d: DirId) -> Self {
        (d.dev, d.ino, d.mtime.0, d.mtime.1, d.ctime.0, d.ctime.1)
    }
}

impl DirId {
    fn of(stat: &fs::Metadata) -> DirId {
        DirId {
            dev: stat.dev(),
            ino: stat.ino(),
            mtime: (stat.mtime(), stat.mtime_nsec()),
            ctime: (stat.ctime(), stat.ctime_nsec()),
        }
    }

    /// Whether a change made after `now` is sure to change this identity: its times are
    /// older than [`RACY_WINDOW`] before `now`.
    fn vouches(&self, now: SystemTime) -> bool {
        settled_before(self.mtime.0.max(self.ctime.0), now)
    }
}

/// What proves a task's record files unchanged since it was fed up to `fed`; in the file,
/// an array of its fields in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "MarkFields", into = "MarkFields")]
pub(super) struct Mark {
    /// The highest sequence fed.
    pub(super) fed: u64,
    /// How many record files there were at or below `fed`.
    pub(super) count: u64,
    /// The SHA-256 of their sequences and inode numbers.
    pub(super) names: String,
    /// The task directory's identity when it vouches that nothing changed since.
    pub(super) dir: Option<DirId>,
    /// When `dir` does not vouch: each record file at or below `fed` as `stat` saw it,
    /// with the digest of its bytes when it changed within [`RACY_WINDOW`] of that.
    pub(super) files: Vec<FileMark>,
}

/// A [`Mark`]'s fields, as the file holds them.
type MarkFields = (u64, u64, String, Option<DirId>, Vec<FileMark>);

impl From<MarkFields> for Mark {
    fn from((fed, count, names, dir, files): MarkFields) -> Mark {
        Mark {
            fed,
            count,
            names,
            dir,
            files,
        }
    }
}

impl From<Mark> for MarkFields {
    fn from(m: Mark) -> Self {
        (m.fed, m.count, m.names, m.dir, m.files)
    }
}

/// One record file of a task whose directory changed too recently to vouch for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileMark {
    sequence: u64,
    ino: u64,
    size: u64,
    ctime: (i64, i64),
    digest: Option<String>,
}

/// Whether times `newest` (seconds) are older than [`RACY_WINDOW`] before `now`.
fn settled_before(newest: i64, now: SystemTime) -> bool {
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    newest + (RACY_WINDOW.as_secs() as i64) < now
}

impl FileMark {
    /// The mark of the record file `sequence` of `dir`, looked at `now`.
    fn of(dir: &Path, sequence: u64, now: SystemTime) -> io::Result<FileMark> {
        let path = dir.join(sequence_file(sequence));
        let stat = fs::symlink_metadata(&path)?;
        let racy = !settled_before(stat.ctime().max(stat.mtime()), now);
        let digest = match racy {
            true => Some(chain::digest(&files::read_in_task(&path)?)),
            false => None,
        };
        Ok(FileMark {
            sequence,
            ino: stat.ino(),
            size: stat.size(),
            ctime: (stat.ctime(), stat.ctime_nsec()),
            digest,
        })
    }

    /// Whether the file in `dir` is still the one marked.
    fn holds(&self, dir: &Path) -> bool {
        let path = dir.join(sequence_file(self.sequence));
        let Ok(stat) = fs::symlink_metadata(&path) else {
            return false;
        };
        let same = stat.ino() == self.ino
            && stat.size() == self.size
            && (stat.ctime(), stat.ctime_nsec()) == self.ctime;
        same && self
            .digest
            .as_ref()
            .is_none_or(|d| files::read_in_task(&path).is_ok_and(|b| chain::digest(&b) == *d))
    }
}

/// One settled resolution, as the track-record index keeps it ([`Settled`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SettledMark {
    resolution: String,
    sequence: u64,
    disagreement: String,
    at: String,
    subject: String,
    advisors: Vec<String>,
    favoured: Option<String>,
    neither: bool,
}

/// What the track-record index knows of a task with resolutions (`store::track`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TrackMark {
    pub(super) fed: u64,
    pub(super) broken_at: Option<u64>,
    pub(super) judged: bool,
    pub(super) chained: bool,
    settled: Vec<SettledMark>,
}

impl TrackMark {
    pub(super) fn new(
        fed: u64,
        broken_at: Option<u64>,
        judged: bool,
        chained: bool,
        settled: &[Settled],
    ) -> TrackMark {
        TrackMark {
            fed,
            broken_at,
            judged,
            chained,
            settled: settled
                .iter()
                .map(|s| SettledMark {
                    resolution: s.resolution.clone(),
                    sequence: s.sequence,
                    disagreement: s.disagreement.clone(),
                    at: s.at.clone(),
                    subject: s.subject.clone(),
                    advisors: s.advisors.clone(),
                    favoured: s.favoured.clone(),
                    neither: s.neither,
                })
                .collect(),
        }
    }

    /// The resolutions of `task`, as the track-record index keeps them.
    pub(super) fn settled(&self, task: &TaskName) -> Vec<Settled> {
        self.settled
            .iter()
            .map(|s| Settled {
                task: task.to_string(),
                resolution: s.resolution.clone(),
                sequence: s.sequence,
                disagreement: s.disagreement.clone(),
                at: s.at.clone(),
                subject: s.subject.clone(),
                advisors: s.advisors.clone(),
                favoured: s.favoured.clone(),
                neither: s.neither,
            })
            .collect()
    }
}

/// What the track-record index holds of a task, in the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(super) enum TrackState {
    /// No resolution: nothing to tally.
    None,
    /// Its resolutions and how far the chain vouches for them.
    Settled(TrackMark),
    /// Not known consistently when written: the task is read again.
    Unknown,
}

/// One task in the file: an array of its mark and its track state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(Mark, TrackState)", into = "(Mark, TrackState)")]
pub(super) struct TaskEntry {
    pub(super) mark: Mark,
    pub(super) track: TrackState,
}

impl From<(Mark, TrackState)> for TaskEntry {
    fn from((mark, track): (Mark, TrackState)) -> TaskEntry {
        TaskEntry { mark, track }
    }
}

impl From<TaskEntry> for (Mark, TrackState) {
    fn from(e: TaskEntry) -> Self {
        (e.mark, e.track)
    }
}

/// A consultation the index carries, stripped to what availability and budgets read of
/// it (its id, task, sequence, creation time, advisor, status, failure, retry-after,
/// usage and end time; no prose, no chain link, no plan), as an array of those fields. A
/// fresh process parses every one of them: a whole [`Record`] (a flattened envelope and a
/// tagged kind, buffered and parsed twice) costs it several times more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Kept(
    String,
    String,
    u64,
    String,
    String,
    ConsultationStatus,
    Option<FailureKind>,
    Option<u64>,
    Option<Usage>,
    String,
);

impl Kept {
    /// `record` as the index keeps it, if it is a consultation.
    fn of(record: &Record) -> Option<Kept> {
        let Body::Consultation(c) = &record.body else {
            return None;
        };
        let e = &record.envelope;
        Some(Kept(
            e.id.clone(),
            e.task.clone(),
            e.sequence,
            e.created_at.clone(),
            c.advisor.clone(),
            c.status,
            c.failure,
            c.retry_after_s,
            c.usage,
            c.finished_at.clone(),
        ))
    }

    /// The task and sequence of the record.
    fn place(&self) -> (&str, u64) {
        (&self.1, self.2)
    }

    /// The record again, stripped.
    fn into_record(self) -> Record {
        let Kept(id, task, sequence, created_at, advisor, status, failure, retry, usage, end) =
            self;
        Record {
            envelope: Envelope {
                id,
                task,
                sequence,
                created_at,
                schema: crate::core::records::SCHEMA_VERSION,
                redacted: Vec::new(),
                prev: None,
            },
            body: Body::Consultation(Consultation {
                plan: String::new(),
                advisor,
                status,
                failure,
                diagnostic: None,
                conclusion: None,
                stance: None,
                assumptions: Vec::new(),
                risks: Vec::new(),
                actions: Vec::new(),
                falsifiers: Vec::new(),
                confidence: None,
                duration_ms: None,
                usage,
                retry_after_s: retry,
                invariants: Vec::new(),
                source: None,
                finished_at: end,
                attestation: None,
            }),
        }
    }
}

/// The file's contents after its header line.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Persisted {
    /// The state directory's device and inode: a copy elsewhere is not this index.
    state: (u64, u64),
    /// The state directory's identity when the tasks below were every task it held, if it
    /// vouched for that (see [`Store::listed_tasks`]).
    listed: Option<DirId>,
    /// Every task, by name, in order.
    pub(super) tasks: Vec<(TaskName, TaskEntry)>,
    /// The availability index's history tail ([`HistoryTail::records`]).
    pub(super) tail: Vec<Kept>,
    /// The consultations budgets count, when the index kept them ([`Spending::Kept`]).
    pub(super) recent: Option<Vec<Kept>>,
}

/// Some of the file's tasks, read, and when looked at, whether each is unchanged.
type Part = (Vec<(TaskName, TaskEntry)>, Vec<Option<bool>>);

/// The file's first part (one line of JSON): all but the tasks whose entry is plain
/// ([`TaskEntry::is_plain`]), which follow it one per line ([`plain_line`]).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Head {
    state: (u64, u64),
    listed: Option<DirId>,
    tasks: BTreeMap<TaskName, TaskEntry>,
    tail: Vec<Kept>,
    recent: Option<Vec<Kept>>,
}

impl TaskEntry {
    /// Whether the entry is what an indexed task settled long ago holds: its directory
    /// vouches, no file is marked, and it has no resolution. Nearly every task's, and
    /// written as one line of numbers that a fresh process reads without a JSON parser.
    fn is_plain(&self) -> bool {
        let after_1970 = |d: DirId| d.mtime.0.min(d.mtime.1).min(d.ctime.0).min(d.ctime.1) >= 0;
        self.mark.dir.is_some_and(after_1970)
            && self.mark.files.is_empty()
            && self.track == TrackState::None
    }
}

/// A plain entry's line: the task's name, `fed`, `count`, the names' digest and the
/// directory's identity (device, inode, modification and change times), separated by
/// spaces.
fn plain_line(out: &mut String, task: &TaskName, mark: &Mark) {
    use std::fmt::Write as _;
    let Some(d) = mark.dir else {
        return;
    };
    let _ = writeln!(
        out,
        "{} {} {} {} {} {} {} {} {} {}",
        task.as_str(),
        mark.fed,
        mark.count,
        mark.names,
        d.dev,
        d.ino,
        d.mtime.0,
        d.mtime.1,
        d.ctime.0,
        d.ctime.1
    );
}

/// A plain entry from its line; `None` if it is not one.
fn parse_plain(line: &str) -> Option<(TaskName, TaskEntry)> {
    let mut words = line.as_bytes().split(|&b| b == b' ');
    let task = TaskName::new(std::str::from_utf8(words.next()?).ok()?).ok()?;
    let mut numbers = [0u64; 8];
    let mut names: &[u8] = &[];
    for (i, slot) in numbers.iter_mut().enumerate() {
        if i == 2 {
            names = words.next()?;
        }
        *slot = number(words.next()?)?;
    }
    if words.next().is_some() || names.len() != 32 {
        return None;
    }
    if !names.iter().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let names = std::str::from_utf8(names).ok()?;
    let [fed, count, dev, ino, m, mn, c, cn] = numbers;
    let time = |n: u64| i64::try_from(n).ok();
    let mark = Mark {
        fed,
        count,
        names: names.to_string(),
        dir: Some(DirId {
            dev,
            ino,
            mtime: (time(m)?, time(mn)?),
            ctime: (time(c)?, time(cn)?),
        }),
        files: Vec::new(),
    };
    Some((
        task,
        TaskEntry {
            mark,
            track: TrackState::None,
        },
    ))
}

/// A number of a plain line: decimal digits only, at most 19 of them.
fn number(word: &[u8]) -> Option<u64> {
    if word.is_empty() || word.len() > 19 {
        return None;
    }
    word.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

/// What the store keeps of the persisted index while it runs.
#[derive(Default)]
pub(super) struct IndexState {
    /// Whether the file was looked at (once per store, before its first catch-up).
    pub(super) opened: bool,
    /// Each task's mark, valid while its `fed` is the index's.
    pub(super) marks: HashMap<TaskName, Mark>,
    /// How many records were fed per task, when not its mark's count ([`IndexState::count`]).
    pub(super) counts: HashMap<TaskName, u64>,
    /// How many tasks were fed when every one had a mark whose directory vouched (as a
    /// file taken holds them): while as many are fed and nothing new, no task needs one.
    pub(super) vouched_tasks: Option<usize>,
    /// The tasks found unchanged when the file was taken: the first catch-up skips them.
    pub(super) unchanged: HashSet<TaskName>,
    /// When the file vouched for the state directory's list of tasks: the tasks the first
    /// catch-up looks at (those not unchanged), instead of listing the state directory.
    pub(super) to_look: Option<Vec<TaskName>>,
    /// The state directory's identity when every task it held was fed (this store listed
    /// it then, or took a file that vouched for its list), if that identity vouches.
    pub(super) listed: Option<DirId>,
    /// Whether the file holds `listed`.
    pub(super) file_listed: bool,
    /// Whether the file holds what the index holds now.
    pub(super) clean: bool,
    /// When the file was last written by this store.
    pub(super) saved: Option<Instant>,
    /// How far ahead of the wall clock raciness is judged (tests look from the future
    /// instead of waiting out [`RACY_WINDOW`]).
    pub(super) skew: Duration,
}

impl IndexState {
    /// How many records of `task` were fed, up to `fed`: as counted since this store
    /// took it, or as its mark says.
    pub(super) fn count(&self, task: &TaskName, fed: u64) -> u64 {
        self.counts.get(task).copied().unwrap_or_else(|| {
            self.marks
                .get(task)
                .filter(|m| m.fed == fed)
                .map_or(0, |m| m.count)
        })
    }
}

/// How a task's directory compares with its mark.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Compared {
    /// Unchanged: nothing to read.
    Unchanged,
    /// The records fed are all there, as they were: read past `fed`.
    Appended,
    /// A record fed is gone or was replaced, or one appeared below `fed`.
    Disagrees,
}

/// The record files of a directory, as (sequence, inode), from its listing alone; `None`
/// when it is gone.
fn listing(dir: &Path) -> io::Result<Option<Vec<(u64, u64)>>> {
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        other => other?,
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(sequence) = files::record_sequence(&entry.file_name()) {
            found.push((sequence, entry.ino()));
        }
    }
    found.sort_unstable();
    Ok(Some(found))
}

/// How many of `files` are at or below `fed`, and the digest of their names and inodes.
fn names_up_to(files: &[(u64, u64)], fed: u64) -> (u64, String) {
    let mut text = String::new();
    let mut count = 0;
    for (sequence, ino) in files.iter().filter(|(s, _)| *s <= fed) {
        text.push_str(&format!("{sequence} {ino}\n"));
        count += 1;
    }
    // 128 bits of the SHA-256 tell two listings apart; the file stays small.
    let digest = chain::digest(text.as_bytes());
    let hex = digest.strip_prefix("sha256:").unwrap_or(&digest);
    (count, hex[..32.min(hex.len())].to_string())
}

/// The mark of the task directory `dir` fed up to `fed` and holding `counted` records,
/// looked at `now`; `None` when the directory is gone, its record files at or below `fed`
/// are not as many as were fed (it changed since), or it changed too recently to vouch
/// and holds more than `max_files` record files to mark one by one.
pub(super) fn mark_of(
    dir: &Path,
    fed: u64,
    counted: u64,
    now: SystemTime,
    max_files: u64,
) -> io::Result<Option<Mark>> {
    let stat = match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        other => other?,
    };
    if !stat.is_dir() {
        return Ok(None);
    }
    let id = DirId::of(&stat);
    let Some(files) = listing(dir)? else {
        return Ok(None);
    };
    let (count, names) = names_up_to(&files, fed);
    if count != counted {
        return Ok(None);
    }
    // A record past `fed` may have come after `stat`, with the same times: vouch for
    // nothing then; the next reader lists the directory.
    let past = files.last().is_some_and(|(s, _)| *s > fed);
    let dir_id = (!past && id.vouches(now)).then_some(id);
    if dir_id.is_none() && count > max_files {
        return Ok(None);
    }
    let marked = match dir_id {
        Some(_) => Vec::new(),
        None => files
            .iter()
            .filter(|(s, _)| *s <= fed)
            .map(|&(s, _)| FileMark::of(dir, s, now))
            .collect::<io::Result<_>>()?,
    };
    Ok(Some(Mark {
        fed,
        count,
        names,
        dir: dir_id,
        files: marked,
    }))
}

/// Compare the task directory `dir` with `mark`: one `stat` when its identity vouches,
/// a listing otherwise.
pub(super) fn compare(dir: &Path, mark: &Mark) -> io::Result<Compared> {
    let stat = match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Compared::Disagrees),
        other => other?,
    };
    if !stat.is_dir() {
        return Ok(Compared::Disagrees);
    }
    compare_listed(dir, DirId::of(&stat), mark)
}

/// [`compare`] for the directory of `task` in `state_dir`, looked up relative to `state`
/// (the state directory opened) when it is open: one name, not the whole path.
pub(super) fn compare_at(
    state: Option<&File>,
    state_dir: &Path,
    task: &TaskName,
    mark: &Mark,
) -> io::Result<Compared> {
    use nix::sys::stat::{fstatat, SFlag};
    use std::os::fd::AsRawFd;
    let Some(state) = state else {
        return compare(&state_dir.join(task.as_str()), mark);
    };
    let stat = match fstatat(
        Some(state.as_raw_fd()),
        task.as_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Err(nix::errno::Errno::ENOENT) => return Ok(Compared::Disagrees),
        Err(e) => return Err(e.into()),
        Ok(stat) => stat,
    };
    if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFDIR {
        return Ok(Compared::Disagrees);
    }
    let id = DirId {
        dev: stat.st_dev,
        ino: stat.st_ino,
        mtime: (stat.st_mtime, stat.st_mtime_nsec),
        ctime: (stat.st_ctime, stat.st_ctime_nsec),
    };
    if mark.dir == Some(id) {
        return Ok(Compared::Unchanged);
    }
    compare_listed(&state_dir.join(task.as_str()), id, mark)
}

/// From how many tasks on the directories are looked at by more than one thread.
pub(super) const PARALLEL_FROM: usize = 256;

/// At most how many threads look at the task directories.
const MAX_THREADS: usize = 4;

/// The state directory opened, to look its tasks' directories up by name.
fn open_dir(state_dir: &Path) -> Option<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_DIRECTORY.bits())
        .open(state_dir)
        .ok()
}

/// Whether the directory of `task` is unchanged since `mark` (`Some(false)`: records were
/// added); `None` when it disagrees or cannot be looked at.
fn unchanged_at(
    state: Option<&File>,
    state_dir: &Path,
    task: &TaskName,
    mark: &Mark,
) -> Option<bool> {
    match compare_at(state, state_dir, task, mark) {
        Ok(Compared::Unchanged) => Some(true),
        Ok(Compared::Appended) => Some(false),
        Ok(Compared::Disagrees) | Err(_) => None,
    }
}

/// How many threads look at a large root's directories: as many as there are processors
/// online, at most [`MAX_THREADS`] (not `available_parallelism`, which reads the cgroup's
/// files on every call).
fn threads() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |n| n.max(1) as usize)
        .min(MAX_THREADS)
}

/// `text` cut into about `n` parts of whole lines, in order.
fn parts_of(text: &str, n: usize) -> Vec<&str> {
    let mut parts = Vec::with_capacity(n);
    let mut rest = text;
    for left in (1..=n.max(1)).rev() {
        if left == 1 || rest.is_empty() {
            parts.push(rest);
            break;
        }
        let cut = (rest.len() / left).max(1);
        let end = rest[cut..].find('\n').map_or(rest.len(), |i| cut + i + 1);
        let (part, after) = rest.split_at(end);
        parts.push(part);
        rest = after;
    }
    parts
}

/// `f` of each part, the first here and the others on threads of their own (a part no
/// thread could be started for is done here too); `None` when one gives `None`.
fn side_by_side<T: Send>(parts: Vec<&str>, f: impl Fn(&str) -> Option<T> + Sync) -> Option<Vec<T>> {
    let f = &f;
    std::thread::scope(|scope| {
        let mut parts = parts.into_iter();
        let first = parts.next().unwrap_or_default();
        let others: Vec<_> = parts
            .map(|part| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || f(part))
                    .map_err(|_| part)
            })
            .collect();
        let mut done = vec![f(first)];
        for other in others {
            done.push(match other {
                Ok(thread) => thread.join().ok().flatten(),
                Err(part) => f(part),
            });
        }
        done.into_iter().collect()
    })
}

/// Compare the task directory `dir`, of identity `id`, with `mark`.
fn compare_listed(dir: &Path, id: DirId, mark: &Mark) -> io::Result<Compared> {
    if mark.dir == Some(id) {
        return Ok(Compared::Unchanged);
    }
    let Some(files) = listing(dir)? else {
        return Ok(Compared::Disagrees);
    };
    let same_names = names_up_to(&files, mark.fed) == (mark.count, mark.names.clone());
    if same_names && mark.files.iter().all(|f| f.holds(dir)) {
        Ok(Compared::Appended)
    } else {
        Ok(Compared::Disagrees)
    }
}

/// The state directory's device and inode.
fn state_id(state_dir: &Path) -> Option<(u64, u64)> {
    let stat = fs::symlink_metadata(state_dir).ok()?;
    stat.is_dir().then(|| (stat.dev(), stat.ino()))
}

impl Persisted {
    pub(super) fn new(
        state_dir: &Path,
        listed: Option<DirId>,
        tasks: Vec<(TaskName, TaskEntry)>,
        tail: Vec<Record>,
        recent: Option<Vec<Record>>,
    ) -> Option<Persisted> {
        Some(Persisted {
            state: state_id(state_dir)?,
            listed,
            tasks,
            tail: tail.iter().filter_map(Kept::of).collect(),
            recent: recent.map(|r| r.iter().filter_map(Kept::of).collect()),
        })
    }

    /// The file's bytes: a header line (magic, version, the SHA-256 of the rest), then
    /// the contents: a line of JSON (all but the plain tasks), then a line per plain task.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut lines = String::new();
        let mut others = BTreeMap::new();
        for (task, entry) in &self.tasks {
            match entry.is_plain() {
                true => plain_line(&mut lines, task, &entry.mark),
                false => {
                    others.insert(task.clone(), entry.clone());
                }
            }
        }
        let head = Head {
            state: self.state,
            listed: self.listed,
            tasks: others,
            tail: self.tail.clone(),
            recent: self.recent.clone(),
        };
        let mut body = serde_json::to_vec(&head).unwrap_or_default();
        body.push(b'\n');
        body.extend_from_slice(lines.as_bytes());
        let mut bytes = format!("{MAGIC} {INDEX_VERSION} {}\n", chain::digest(&body)).into_bytes();
        bytes.extend_from_slice(&body);
        bytes
    }

    /// The contents of `bytes`, the file of the index of `state_dir`, if they are whole,
    /// of this version, of this state directory and consistent; `None` otherwise.
    #[cfg(test)]
    pub(super) fn from_bytes(state_dir: &Path, bytes: &[u8]) -> Option<Persisted> {
        Persisted::parse(state_dir, bytes, false).map(|(p, _)| p)
    }

    /// [`Persisted::from_bytes`], and with `look` each task compared with its directory
    /// as it is read (whether it is unchanged; `None` when one disagrees or cannot be
    /// looked at): the plain lines are read and their directories looked at in a few
    /// parts side by side.
    fn parse(state_dir: &Path, bytes: &[u8], look: bool) -> Option<(Persisted, Option<Vec<bool>>)> {
        let newline = bytes.iter().position(|&b| b == b'\n')?;
        let header = std::str::from_utf8(&bytes[..newline]).ok()?;
        let body = &bytes[newline + 1..];
        let mut words = header.split(' ');
        if words.next()? != MAGIC || words.next()? != INDEX_VERSION.to_string() {
            return None;
        }
        if words.next()? != chain::digest(body) || words.next().is_some() {
            return None;
        }
        let split = body.iter().position(|&b| b == b'\n')?;
        let head: Head = serde_json::from_slice(&body[..split]).ok()?;
        if Some(head.state) != state_id(state_dir) {
            return None;
        }
        let lines = std::str::from_utf8(&body[split + 1..]).ok()?;
        let state = look.then(|| open_dir(state_dir)).flatten();
        let read = |part: &str| -> Option<Part> {
            let mut tasks = Vec::with_capacity(part.len() / 64);
            let mut seen = Vec::new();
            for line in part.lines() {
                let (task, entry) = parse_plain(line)?;
                if look {
                    seen.push(unchanged_at(state.as_ref(), state_dir, &task, &entry.mark));
                }
                tasks.push((task, entry));
            }
            Some((tasks, seen))
        };
        let parts = match lines.len() / 100 >= PARALLEL_FROM {
            true => side_by_side(parts_of(lines, threads()), read)?,
            false => vec![read(lines)?],
        };
        let mut tasks = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
        let mut seen = Vec::with_capacity(tasks.capacity());
        for (part, looked) in parts {
            tasks.extend(part);
            seen.extend(looked);
        }
        // The plain lines in order of their names, each named once, none among the others.
        let ordered = tasks.windows(2).all(|w| w[0].0 < w[1].0);
        if !ordered || tasks.iter().any(|(t, _)| head.tasks.contains_key(t)) {
            return None;
        }
        if !head.tasks.is_empty() {
            for (task, entry) in head.tasks {
                if look {
                    seen.push(unchanged_at(state.as_ref(), state_dir, &task, &entry.mark));
                }
                tasks.push((task, entry));
            }
            let mut order: Vec<usize> = (0..tasks.len()).collect();
            order.sort_unstable_by(|&a, &b| tasks[a].0.cmp(&tasks[b].0));
            let mut slots: Vec<Option<(TaskName, TaskEntry)>> =
                tasks.into_iter().map(Some).collect();
            tasks = order.iter().filter_map(|&i| slots[i].take()).collect();
            if look {
                seen = order.iter().map(|&i| seen[i]).collect();
            }
        }
        let persisted = Persisted {
            state: head.state,
            listed: head.listed,
            tasks,
            tail: head.tail,
            recent: head.recent,
        };
        if !persisted.consistent() {
            return None;
        }
        let unchanged = match look {
            true => seen.into_iter().collect::<Option<Vec<bool>>>(),
            false => None,
        };
        Some((persisted, unchanged))
    }

    /// The entry of `task`.
    fn entry(&self, task: &str) -> Option<&TaskEntry> {
        self.tasks
            .binary_search_by(|(t, _)| t.as_str().cmp(task))
            .ok()
            .map(|i| &self.tasks[i].1)
    }

    /// Whether every record carried belongs to a task named, at or below what was fed,
    /// and every mark and track state is within what was fed.
    fn consistent(&self) -> bool {
        let fed_holds = |kept: &Kept| {
            let (task, sequence) = kept.place();
            self.entry(task)
                .is_some_and(|entry| sequence >= 1 && sequence <= entry.mark.fed)
        };
        let tasks_hold = self.tasks.iter().all(|(_, entry)| {
            entry.mark.fed <= chain::MAX_SEQUENCE
                && entry.mark.count <= entry.mark.fed
                && match &entry.track {
                    TrackState::Settled(track) => {
                        track.fed == entry.mark.fed
                            && track.settled.iter().all(|s| s.sequence <= track.fed)
                    }
                    TrackState::None | TrackState::Unknown => true,
                }
        });
        tasks_hold && self.tail.iter().all(fed_holds) && self.recent.iter().flatten().all(fed_holds)
    }
}

/// The path of the index's file of `state_dir` (in its own directory, [`INDEX_FILE`]).
pub fn index_path(state_dir: &Path) -> PathBuf {
    state_dir.join(INDEX_FILE).join(FILE_IN_DIR)
}

/// The index of `state_dir` as its file holds it, if it is there and acceptable (see the
/// module's documentation); `None` means: rebuild it from the records.
#[cfg(test)]
pub(super) fn read_index(state_dir: &Path) -> Option<Persisted> {
    Persisted::from_bytes(state_dir, &index_bytes(state_dir)?)
}

/// The bytes of the index's file of `state_dir`, if it is one to read at all.
fn index_bytes(state_dir: &Path) -> Option<Vec<u8>> {
    let path = index_path(state_dir);
    // The index's directory is never a link either.
    if !fs::symlink_metadata(state_dir.join(INDEX_FILE)).is_ok_and(|s| s.is_dir()) {
        return None;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(files::libc_flags::NOFOLLOW | files::libc_flags::NONBLOCK)
        .open(&path)
        .ok()?;
    let stat = file.metadata().ok()?;
    let private = stat.mode() & 0o077 == 0;
    let ours = stat.uid() == nix::unistd::geteuid().as_raw();
    if !stat.is_file() || !private || !ours || stat.len() > MAX_INDEX_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(stat.len() as usize);
    io::Read::by_ref(&mut file)
        .take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// Write `persisted` as the index of `state_dir`: a private temporary file renamed over
/// the old one. Not flushed: a lost or torn file is rebuilt.
pub(super) fn write_index(state_dir: &Path, persisted: &Persisted) -> io::Result<()> {
    let path = index_path(state_dir);
    let dir = state_dir.join(INDEX_FILE);
    match fs::symlink_metadata(&dir) {
        Ok(stat) if stat.is_dir() => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => make_index_dir(&dir)?,
        // An index of an earlier version (a file), or a link: replaced by the directory.
        Ok(_) => {
            fs::remove_file(&dir)?;
            make_index_dir(&dir)?;
        }
        Err(e) => return Err(e),
    }
    // Unique per writer, so two threads of one process never write the same file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nth = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!(".{FILE_IN_DIR}.{}.{nth}.tmp", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(files::libc_flags::NOFOLLOW)
            .open(&temp)?;
        file.write_all(&persisted.to_bytes())?;
        drop(file);
        fs::rename(&temp, &path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Create the index's directory, private to the user; one made meanwhile by another
/// process will do.
fn make_index_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

impl Store {
    /// Take the persisted index, once per store, before its first catch-up, if the store
    /// was fed nothing yet: every task it names is compared with its directory; unchanged
    /// ones are skipped by the catch-up, those with records added are read past what was
    /// fed, and if any disagrees otherwise the file is ignored (every task is read, and
    /// the file written again).
    pub(super) fn open_index(&self) -> Result<(), StoreError> {
        {
            let mut circuit = lock(&self.circuit);
            if circuit.index.opened {
                return Ok(());
            }
            circuit.index.opened = true;
            if !circuit.fed.is_empty() || circuit.spending != Spending::Off {
                return Ok(());
            }
        }
        let Some(bytes) = index_bytes(&self.state_dir) else {
            return Ok(());
        };
        // Every task compared with its directory as the file is read.
        let Some((persisted, Some(unchanged))) = Persisted::parse(&self.state_dir, &bytes, true)
        else {
            return Ok(());
        };
        drop(bytes);
        // The file's list of tasks is every task there is while the state directory's
        // identity is the one it was listed at (creating, removing or renaming a task's
        // directory changes it; a record added to a task does not, nor the index's own
        // writes, in a directory of its own).
        let current = fs::symlink_metadata(&self.state_dir)
            .ok()
            .filter(|s| s.is_dir())
            .map(|s| DirId::of(&s));
        let listed = persisted.listed.filter(|l| Some(*l) == current);
        let Persisted {
            tasks,
            tail,
            recent,
            ..
        } = persisted;
        let mut reread = Vec::new();
        {
            let mut circuit = lock(&self.circuit);
            if !circuit.fed.is_empty() || circuit.spending != Spending::Off {
                return Ok(());
            }
            for kept in tail {
                circuit.tail.feed(&kept.into_record());
            }
            if let Some(recent) = recent {
                let since = time::OffsetDateTime::now_utc() - RECENT_SPEND;
                circuit.recent = recent
                    .into_iter()
                    .filter_map(|k| Spent::of(&k.into_record(), since))
                    .collect();
                circuit.spending = Spending::Kept;
            }
            let all = tasks.len();
            let circuit = &mut *circuit;
            circuit.fed.reserve(all);
            circuit.index.marks.reserve(all);
            let vouched = tasks.iter().all(|(_, e)| e.mark.dir.is_some());
            let mut track = lock(&self.track);
            let mut to_look = Vec::new();
            let mut unchanged_set = HashSet::new();
            for ((task, entry), unchanged) in tasks.into_iter().zip(&unchanged) {
                circuit.fed.insert(task.clone(), entry.mark.fed);
                let mut look = !unchanged;
                match &entry.track {
                    TrackState::None => {}
                    TrackState::Settled(mark) => track.load(&task, mark),
                    TrackState::Unknown => {
                        reread.push(task.clone());
                        look = true;
                    }
                }
                match (look, listed.is_some()) {
                    (true, true) => to_look.push(task.clone()),
                    (false, false) => {
                        unchanged_set.insert(task.clone());
                    }
                    _ => {}
                }
                circuit.index.marks.insert(task, entry.mark);
            }
            circuit.index.clean = reread.is_empty() && unchanged.iter().all(|u| *u);
            circuit.index.vouched_tasks = vouched.then_some(all);
            circuit.index.listed = listed;
            circuit.index.file_listed = listed.is_some();
            match listed {
                Some(_) => circuit.index.to_look = Some(to_look),
                None => circuit.index.unchanged = unchanged_set,
            }
        }
        for task in &reread {
            // The track-record index takes it whole; availability only what is new.
            self.with_records(task, |_| ())?;
        }
        Ok(())
    }

    /// Write the index's file when it no longer holds what the index does: after every
    /// catch-up of a store asked once, at most every [`SAVE_EVERY`] for a long-lived one.
    /// Failing to write it changes nothing but the next process's speed.
    pub(super) fn save_index(&self) {
        let (now, max_files, listed);
        let (fed, counts, mut marks, tail, recent) = {
            let mut circuit = lock(&self.circuit);
            let index = &circuit.index;
            let due =
                circuit.catch_ups < 2 || index.saved.is_none_or(|at| at.elapsed() >= SAVE_EVERY);
            let vouched = || {
                index.vouched_tasks == Some(circuit.fed.len())
                    || circuit.fed.iter().all(|(task, fed)| {
                        index
                            .marks
                            .get(task)
                            .is_some_and(|m| m.fed == *fed && m.dir.is_some())
                    })
            };
            // A list of tasks the file does not vouch for, and could now.
            let listing = !index.file_listed && index.listed.is_some();
            if !due || (index.clean && !listing && vouched()) || circuit.fed.is_empty() {
                return;
            }
            // Mark it written now, whatever happens: a store that cannot write it does
            // not try on every catch-up.
            circuit.index.saved = Some(Instant::now());
            now = SystemTime::now() + circuit.index.skew;
            // A long-lived store writes the file only once every task has settled: marking
            // a busy task's files one by one would cost its requests.
            max_files = match circuit.catch_ups < 2 {
                true => MAX_FILE_MARKS,
                false => 0,
            };
            let recent = (circuit.spending == Spending::Kept)
                .then(|| circuit.recent.iter().map(|s| (*s.record).clone()).collect());
            listed = circuit.index.listed;
            (
                circuit.fed.clone(),
                circuit.index.counts.clone(),
                circuit.index.marks.clone(),
                circuit.tail.records(),
                recent,
            )
        };
        let track = lock(&self.track).export();
        let mut tasks = Vec::with_capacity(fed.len());
        // Every task fed, even those that hold no record yet: a fresh process that takes
        // the file's list of tasks looks at no other.
        for (task, &fed) in &fed {
            let kept = marks
                .get(task)
                .filter(|m| m.fed == fed && m.dir.is_some())
                .cloned();
            let mark = match kept {
                Some(mark) => mark,
                None => {
                    let counted = counts.get(task).copied().unwrap_or_else(|| {
                        marks
                            .get(task)
                            .filter(|m| m.fed == fed)
                            .map_or(0, |m| m.count)
                    });
                    match mark_of(&self.task_dir(task), fed, counted, now, max_files) {
                        Ok(Some(mark)) => mark,
                        // The task changed since it was fed: what the index holds is not
                        // what the records say; leave the file to a fresh process.
                        _ => return,
                    }
                }
            };
            marks.insert(task.clone(), mark.clone());
            let track = match track.get(task) {
                None => TrackState::None,
                Some(None) => TrackState::Unknown,
                Some(Some(t)) if t.fed == fed => TrackState::Settled(t.clone()),
                Some(Some(_)) => TrackState::Unknown,
            };
            tasks.push((task.clone(), TaskEntry { mark, track }));
        }
        tasks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let Some(persisted) = Persisted::new(&self.state_dir, listed, tasks, tail, recent) else {
            return;
        };
        if write_index(&self.state_dir, &persisted).is_err() {
            return;
        }
        let mut circuit = lock(&self.circuit);
        let same = fed.iter().all(|(t, f)| circuit.fed.get(t) == Some(f))
            && circuit.fed.len() == fed.len();
        for (task, mark) in marks {
            if circuit.fed.get(&task) == Some(&mark.fed) {
                circuit.index.marks.insert(task, mark);
            }
        }
        circuit.index.clean = same;
        circuit.index.file_listed = listed.is_some();
        circuit.index.vouched_tasks = None;
    }

    /// Every task of the state directory, for a catch-up that looks at every task: the
    /// tasks left to look at when the persisted index vouched for the list, or the state
    /// directory's listing, whose identity (taken before it) is kept when it vouches, for
    /// the file (`circuit` is the store's, locked).
    pub(super) fn listed_tasks(
        &self,
        circuit: &mut CircuitIndex,
    ) -> Result<Vec<TaskName>, StoreError> {
        if let Some(tasks) = circuit.index.to_look.take() {
            return Ok(tasks);
        }
        let now = SystemTime::now() + circuit.index.skew;
        let before = fs::symlink_metadata(&self.state_dir)
            .ok()
            .filter(|s| s.is_dir())
            .map(|s| DirId::of(&s));
        let tasks = self.tasks()?;
        circuit.index.listed = before.filter(|id| id.vouches(now));
        Ok(tasks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    /// A consultation of `advisor` stored as record `sequence` of task `t`, written as
    /// another process (or a hand) would, at `minute` past the hour.
    fn put(state: &Path, t: &str, sequence: u64, advisor: &str, status: &str, minute: u64) {
        let failure = (status == "failed").then_some("timeout");
        let record: Record = serde_json::from_value(json!({
            "id": format!("C{t}{sequence}{advisor}"), "task": t, "sequence": sequence,
            "created_at": "2026-01-01T00:00:00.000Z", "schema": 1, "redacted": [],
            "kind": "consultation", "plan": "P", "advisor": advisor,
            "status": status, "failure": failure,
            "conclusion": (status == "completed").then_some("fine"),
            "finished_at": format!("2026-01-01T00:{minute:02}:{sequence:02}.000Z")}))
        .expect("a consultation");
        let dir = state.join(t);
        fs::create_dir_all(&dir).expect("task dir");
        fs::write(
            dir.join(file_name(&record)),
            serde_json::to_vec(&record).unwrap(),
        )
        .expect("written");
    }

    /// Three tasks: `alpha` failing lately in `a`, `beta` completed in `b`, a mix in `c`.
    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for sequence in 1..=5 {
            put(dir.path(), "a", sequence, "alpha", "failed", 10);
            put(dir.path(), "b", sequence, "beta", "completed", 10);
        }
        put(dir.path(), "c", 1, "alpha", "completed", 5);
        put(dir.path(), "c", 2, "beta", "failed", 20);
        dir
    }

    /// A store that judges raciness from `ahead` in the future.
    fn store(state: &Path, ahead: u64) -> Store {
        let store = Store::open(state);
        lock(&store.circuit).index.skew = Duration::from_secs(ahead);
        store
    }

    /// The ids of the consultations availability keeps, sorted.
    fn history(store: &Store) -> Vec<String> {
        let mut ids: Vec<String> = store
            .circuit_history()
            .expect("read")
            .iter()
            .map(|r| r.id().to_string())
            .collect();
        ids.sort();
        ids
    }

    /// What a store that never saw an index answers: one over a copy of the records.
    fn truth(state: &Path) -> Vec<String> {
        let copy = tempfile::tempdir().expect("temp dir");
        for entry in fs::read_dir(state).expect("listed") {
            let entry = entry.expect("an entry");
            if !entry.file_type().expect("a type").is_dir() {
                continue;
            }
            let to = copy.path().join(entry.file_name());
            fs::create_dir(&to).expect("a task dir");
            for file in fs::read_dir(entry.path()).expect("listed") {
                let file = file.expect("an entry");
                fs::copy(file.path(), to.join(file.file_name())).expect("copied");
            }
        }
        history(&Store::open(copy.path()))
    }

    /// Make record 5 of task `a` a completed consultation by writing a new file and
    /// renaming it over the old one, as editors and `sed -i` do.
    fn replace_by_rename(state: &Path) {
        let path = state.join("a").join(sequence_file(5));
        let temp = state.join("a").join("edit.tmp");
        fs::write(&temp, completed(&path)).expect("written");
        fs::rename(&temp, &path).expect("renamed over");
    }

    /// The bytes of the consultation at `path`, made completed.
    fn completed(path: &Path) -> String {
        fs::read_to_string(path)
            .expect("read")
            .replace("\"failed\"", "\"completed\"")
            .replace("\"failure\":\"timeout\"", "\"failure\":null")
    }

    /// Whether `store` took the index: it read no task through its cache.
    fn took_index(store: &Store) -> bool {
        store.cached().1 == 0 && lock(&store.circuit).index.marks.len() == 3
    }

    #[test]
    fn the_index_round_trips_and_a_fresh_store_reads_no_record() {
        let dir = root();
        let expected = truth(dir.path());
        let first = store(dir.path(), 10);
        assert_eq!(history(&first), expected);
        let path = index_path(dir.path());
        let mode = fs::metadata(&path).expect("written").mode() & 0o777;
        assert_eq!(mode, 0o600);
        let persisted = read_index(dir.path()).expect("acceptable");
        assert_eq!(persisted.tasks.len(), 3);
        assert!(persisted.tasks.iter().all(|(_, e)| e.mark.dir.is_some()));
        assert!(
            persisted.listed.is_some(),
            "the list of tasks is vouched for"
        );
        let bytes = persisted.to_bytes();
        assert_eq!(Persisted::from_bytes(dir.path(), &bytes), Some(persisted));
        // A fresh store takes it: one stat per task, no record read.
        let fresh = store(dir.path(), 10);
        assert_eq!(history(&fresh), expected);
        assert!(took_index(&fresh));
        // Deleting the file changes no answer.
        fs::remove_file(&path).expect("removed");
        let without = store(dir.path(), 10);
        assert_eq!(history(&without), expected);
        assert_eq!(without.cached().1, 3, "every task was read");
        assert!(
            read_index(dir.path()).is_some(),
            "and the file written again"
        );
    }

    #[test]
    fn a_torn_tampered_foreign_or_other_version_file_is_rebuilt() {
        let dir = root();
        let expected = truth(dir.path());
        history(&store(dir.path(), 10));
        // The second store writes what the state directory's identity vouches for since the
        // index's directory was made.
        history(&store(dir.path(), 10));
        let path = index_path(dir.path());
        let good = fs::read(&path).expect("written");
        let newline = good.iter().position(|&b| b == b'\n').expect("a header");
        let body = &good[newline + 1..];
        let with_header = |body: &[u8], version: u32| {
            let mut bytes = format!("{MAGIC} {version} {}\n", chain::digest(body)).into_bytes();
            bytes.extend_from_slice(body);
            bytes
        };
        let text = String::from_utf8(body.to_vec()).expect("utf-8");
        assert!(
            text.contains("\na 5 5 "),
            "the forgery below changes it: {text}"
        );
        let spoiled: Vec<(&str, Vec<u8>)> = vec![
            ("torn", good[..good.len() / 2].to_vec()),
            ("empty", Vec::new()),
            ("other version", with_header(body, INDEX_VERSION + 1)),
            ("tampered", {
                let mut bytes = good.clone();
                let last = bytes.len() - 2;
                bytes[last] ^= 1;
                bytes
            }),
            // Consistent digest, but claims more than was fed: a record past `fed`.
            (
                "forged",
                with_header(
                    text.replace("\na 5 5 ", "\na 4 4 ").as_bytes(),
                    INDEX_VERSION,
                ),
            ),
            // A plain line out of order, or twice.
            ("out of order", {
                let lines: Vec<&str> = text.lines().collect();
                let mut swapped = lines.clone();
                swapped.swap(1, 2);
                with_header((swapped.join("\n") + "\n").as_bytes(), INDEX_VERSION)
            }),
            ("a line that is not a task's", {
                with_header((text.clone() + "b 5 5\n").as_bytes(), INDEX_VERSION)
            }),
            (
                "unknown field",
                with_header(
                    text.replacen("{", "{\"extra\":1,", 1).as_bytes(),
                    INDEX_VERSION,
                ),
            ),
        ];
        for (what, bytes) in spoiled {
            fs::write(&path, &bytes).expect("spoiled");
            let fresh = store(dir.path(), 10);
            assert_eq!(history(&fresh), expected, "{what}");
            assert_eq!(fresh.cached().1, 3, "{what}: every task was read again");
            assert!(
                fs::read(&path).expect("rewritten") == good,
                "{what}: the file is rebuilt"
            );
        }
        // A file others may write is not taken.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(read_index(dir.path()).is_none());
        // Nor one of another state directory (a copy, a clone).
        let other = root();
        fs::create_dir(other.path().join(INDEX_FILE)).expect("the index's directory");
        fs::copy(&path, index_path(other.path())).expect("copied");
        fs::set_permissions(index_path(other.path()), fs::Permissions::from_mode(0o600))
            .expect("chmod");
        assert!(read_index(other.path()).is_none());
    }

    #[test]
    fn records_added_since_are_read_and_nothing_else() {
        let dir = root();
        history(&store(dir.path(), 10));
        put(dir.path(), "a", 6, "alpha", "completed", 30);
        let expected = truth(dir.path());
        let fresh = store(dir.path(), 10);
        let got = history(&fresh);
        assert_eq!(got, expected);
        assert!(got.contains(&"Ca6alpha".to_string()), "{got:?}");
        assert!(took_index(&fresh), "only the new file was read");
    }

    /// A file that vouches for the state directory's list of tasks spares a fresh store
    /// the listing; a task created since changes the state directory and is read.
    #[test]
    fn a_task_created_behind_the_index_is_read() {
        let dir = root();
        history(&store(dir.path(), 10));
        // The index's directory was created by that first write, after the listing: the
        // next store lists the state directory again and writes what it found.
        let second = store(dir.path(), 10);
        history(&second);
        assert!(lock(&second.circuit).index.file_listed);
        let fresh = store(dir.path(), 10);
        assert_eq!(history(&fresh), truth(dir.path()));
        assert!(took_index(&fresh));
        let listed = lock(&fresh.circuit).index.listed;
        assert!(listed.is_some() && lock(&fresh.circuit).index.file_listed);
        // A task created behind the index, with a newer failure of `beta`.
        put(dir.path(), "d", 1, "beta", "failed", 40);
        put(dir.path(), "d", 2, "beta", "failed", 41);
        let expected = truth(dir.path());
        let fresh = store(dir.path(), 10);
        let got = history(&fresh);
        assert_eq!(got, expected);
        assert!(got.contains(&"Cd2beta".to_string()), "{got:?}");
        // A task directory created empty, then given a record: found too.
        fs::create_dir(dir.path().join("e")).expect("an empty task");
        history(&store(dir.path(), 10));
        history(&store(dir.path(), 10));
        put(dir.path(), "e", 1, "alpha", "failed", 50);
        let expected = truth(dir.path());
        let got = history(&store(dir.path(), 10));
        assert_eq!(got, expected);
        assert!(got.contains(&"Ce1alpha".to_string()), "{got:?}");
    }

    /// An index of an earlier version (a file where the directory now is) is replaced.
    #[test]
    fn an_earlier_versions_file_is_replaced_by_the_directory() {
        let dir = root();
        let expected = truth(dir.path());
        fs::write(
            dir.path().join(INDEX_FILE),
            b"advisord-index 2 sha256:00\n{}",
        )
        .expect("v2");
        assert_eq!(history(&store(dir.path(), 10)), expected);
        assert!(dir.path().join(INDEX_FILE).is_dir());
        assert!(read_index(dir.path()).is_some());
        let fresh = store(dir.path(), 10);
        assert_eq!(history(&fresh), expected);
        assert!(took_index(&fresh));
    }

    /// Budgets' recent spend is kept in the file once a budget was judged, and a fresh
    /// store takes it instead of reading every task back.
    #[test]
    fn the_recent_spend_is_kept_once_budgets_were_judged() {
        let dir = root();
        let now = time::OffsetDateTime::now_utc();
        let a = TaskName::new("a").expect("a task");
        let first = store(dir.path(), 10);
        let spent = first.budget_history(&a, now).expect("read");
        assert!(read_index(dir.path()).is_some_and(|p| p.recent.is_some()));
        let fresh = store(dir.path(), 10);
        assert_eq!(fresh.budget_history(&a, now).expect("read"), spent);
        assert!(lock(&fresh.circuit).spending == Spending::Kept);
        assert_eq!(fresh.cached().1, 1, "only the task asked about was read");
    }

    /// A root large enough for its directories to be looked at by several threads: a
    /// fresh store takes the index, notices a record added to any task and a record removed
    /// from any task, and answers as a store that never saw the index.
    #[test]
    fn a_large_root_is_compared_task_by_task_across_threads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let tasks = PARALLEL_FROM + 44;
        for t in 0..tasks {
            put(dir.path(), &format!("t{t}"), 1, "alpha", "completed", 1);
            put(dir.path(), &format!("t{t}"), 2, "alpha", "failed", 2);
        }
        let expected = truth(dir.path());
        assert_eq!(history(&store(dir.path(), 10)), expected);
        let fresh = store(dir.path(), 10);
        assert_eq!(history(&fresh), expected);
        assert_eq!(fresh.cached().1, 0, "no task was read");
        // Added behind the index, in the last task: only it is read past what was fed.
        let last = format!("t{}", tasks - 1);
        put(dir.path(), &last, 3, "alpha", "failed", 3);
        let expected = truth(dir.path());
        let fresh = store(dir.path(), 10);
        let got = history(&fresh);
        assert_eq!(got, expected);
        assert!(got.contains(&format!("C{last}3alpha")), "{got:?}");
        assert_eq!(fresh.cached().1, 0, "no task was read whole");
        // Removed from a task in the middle: the index is thrown away.
        fs::remove_file(
            dir.path()
                .join(format!("t{}", tasks / 2))
                .join(sequence_file(2)),
        )
        .expect("removed");
        let expected = truth(dir.path());
        let fresh = store(dir.path(), 10);
        assert_eq!(history(&fresh), expected);
        assert!(fresh.cached().1 > 1, "the tasks were read again");
    }

    /// The consultations the file carries are stripped to what availability and budgets
    /// read, and answer as the records do.
    #[test]
    fn the_file_carries_consultations_stripped() {
        let dir = root();
        let expected = truth(dir.path());
        history(&store(dir.path(), 10));
        let text = fs::read_to_string(index_path(dir.path())).expect("written");
        assert!(!text.contains("\"conclusion\""), "no prose: {text}");
        assert!(text.contains("\"Cc1alpha\""), "the tail's records: {text}");
        assert_eq!(history(&store(dir.path(), 10)), expected);
    }

    /// A hand that edits a record (through a rename, as editors and `sed -i` do, or in
    /// place within the racy window) or removes one is noticed: the index is rebuilt.
    #[test]
    fn a_record_edited_or_removed_by_hand_is_noticed() {
        type Edit = fn(&Path);
        let edits: [(&str, Edit); 3] = [
            ("replaced by a rename", replace_by_rename),
            ("removed", |state| {
                fs::remove_file(state.join("c").join(sequence_file(1))).expect("removed");
            }),
            ("rewritten in place", |state| {
                let path = state.join("a").join(sequence_file(5));
                let edited = completed(&path);
                fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(edited.as_bytes()))
                    .expect("rewritten");
            }),
        ];
        for (what, edit) in edits {
            let dir = root();
            // Indexed and judged now: every directory and file is racy, as right after
            // a write.
            let before = history(&store(dir.path(), 0));
            edit(dir.path());
            let expected = truth(dir.path());
            assert_ne!(before, expected, "{what}: the edit matters to availability");
            let fresh = store(dir.path(), 0);
            assert_eq!(history(&fresh), expected, "{what}");
            assert!(fresh.cached().1 >= 1, "{what}: the records were read again");
        }
        // Once the directories are settled, an edit through a rename changes the
        // directory, and its listing shows another inode under the name.
        let dir = root();
        let before = history(&store(dir.path(), 10));
        replace_by_rename(dir.path());
        let expected = truth(dir.path());
        assert_ne!(before, expected);
        assert_eq!(history(&store(dir.path(), 10)), expected);
    }
}
