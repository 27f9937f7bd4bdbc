//! The hash chain of a task's records, and the walk that checks it.
//!
//! Every record the writer stores carries `prev`: the SHA-256 of the stored bytes of the
//! task's previous record (the file exactly as it is on disk), or [`GENESIS`] for a task's
//! first record. Editing, removing, inserting or reordering a record therefore breaks the
//! link of the record after it. [`walk`] checks the links, the sequence, the envelope and
//! the fields the writer computes; with [`Depth::Rules`] it also admits every record again
//! through the writer's rules of today (what `advisor-consult verify` does). The views use
//! the cheaper [`Depth::Links`], which is linear in the records, through [`Trust`]; since
//! records never change, the edge keeps the walk so far ([`Progress`]) and [`extend`]s it
//! over new records only, so a view does not walk the whole task again.
//!
//! Pure: the edge reads the files and hands in their names, their hashes and what they
//! parse to.

pub mod link;
pub mod parallel;
pub mod trust;

pub use link::{
    digest, record_file, record_sequence, FileName, GENESIS, LOCK_FILE, MAX_SEQUENCE, RECORD_DIGITS,
};
pub use trust::{
    foreign, foreign_by_digests, stray_finding, Attestations, ChainState, Finding, Head, Problem,
    TaskTrust, Trust, UNANCHORED_ALLOWANCE,
};

use crate::core::records::{Body, ConsultationStatus, Record, TaskName, SCHEMA_VERSION};
use crate::core::writer;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

/// One stored record file, as the edge read it.
pub struct Entry<'r> {
    /// The file's name; `None` when it is [`record_file`] of its sequence (named only when
    /// a finding needs it, so a walk builds no name per record).
    pub file: Option<&'r str>,
    /// The sequence its name holds.
    pub sequence: u64,
    /// [`digest`] of its bytes.
    pub digest: &'r str,
    /// What it parses to, or why it does not.
    pub record: Result<&'r Record, &'r str>,
}

impl Entry<'_> {
    /// The file's name.
    fn name(&self) -> String {
        self.file
            .map_or_else(|| record_file(self.sequence), str::to_string)
    }
}

/// How deep [`walk`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Links, sequence, envelope and the computed review: linear, for the views.
    Links,
    /// And every record admitted again through the writer's rules of today.
    Rules,
}

/// What [`walk`] found.
pub struct Walk {
    /// The chain's state.
    pub state: ChainState,
    /// Every finding, in file order.
    pub findings: Vec<Finding>,
    /// The index into the entries of the first unverified one.
    pub broken_index: Option<usize>,
}

/// A walk so far, kept by the edge between calls: [`extend`] continues it over the records
/// added since, instead of walking the whole task again. Records never change, so what was
/// found of the records walked stays true.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// How many entries were walked.
    walked: usize,
    /// The newest entry walked: the link of the next one is checked against it.
    head: Option<Head>,
    findings: Vec<Finding>,
    /// The index and sequence of the first unverified entry.
    broken: Option<(usize, u64)>,
    chained_from: Option<u64>,
    /// Record id → the sequence of the entry first holding it.
    ids: FxHashMap<String, u64>,
    /// Each consultation's advisor and source (its advisor when it names none), when it
    /// completed (`None`: it failed).
    reviewers: FxHashMap<String, Option<(String, String)>>,
    /// What the writer's rules look up in the records walked, kept by a walk at
    /// [`Depth::Rules`] (and extended by later walks of it at any depth), so that admitting
    /// each record again costs the same at any size.
    index: Option<writer::Index>,
}

impl Progress {
    /// How many entries were walked.
    pub fn walked(&self) -> usize {
        self.walked
    }

    /// The chain's state over the entries walked.
    pub fn state(&self) -> ChainState {
        ChainState {
            records: self.walked,
            chained_from: self.chained_from,
            head: self.head.clone(),
            broken_at: self.broken.map(|(_, sequence)| sequence),
            unverified: self.broken.map_or(0, |(b, _)| self.walked - b),
            strays: Vec::new(),
        }
    }

    /// The newest entry walked and its hash.
    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    /// Every finding, in file order.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The index into the entries of the first unverified one.
    pub fn broken_index(&self) -> Option<usize> {
        self.broken.map(|(b, _)| b)
    }

    /// What the writer's rules look up in the records walked, when the walk was taken at
    /// [`Depth::Rules`] over every record readable.
    pub fn rules_index(&self) -> Option<&writer::Index> {
        self.index.as_ref().filter(|i| i.indexed() == self.walked)
    }

    /// Whether the task's entries continue the entries walked: as many or more, the
    /// newest walked still in its place with the same hash. `newest_walked` is the entry
    /// at the index of the newest walked (`None` when there are fewer entries).
    fn continued_by(&self, count: usize, newest_walked: Option<(u64, &str)>) -> bool {
        match (&self.head, self.walked.checked_sub(1)) {
            (None, None) => true,
            (Some(head), Some(_)) if count >= self.walked => {
                newest_walked == Some((head.sequence, head.hash.as_str()))
            }
            _ => false,
        }
    }
}

/// Walk a task's record files, in the order of the sequences their names hold.
pub fn walk(task: &TaskName, entries: &[Entry], depth: Depth) -> Walk {
    let progress = walk_from(
        task,
        entries,
        0,
        Earlier::owned(),
        Progress::default(),
        depth,
    );
    Walk {
        state: progress.state(),
        broken_index: progress.broken_index(),
        findings: progress.findings,
    }
}

/// Continue the walk `progress` (at [`Depth::Links`]) over the entries of `entries` after
/// those it walked; `entries` are all the task's record files, in the order of the
/// sequences their names hold. When they do not continue what was walked (fewer, or the
/// newest walked is not in its place) the walk starts over. The result is what [`walk`]
/// over all of `entries` finds.
pub fn extend(task: &TaskName, entries: &[Entry], progress: Progress) -> Progress {
    let newest = progress
        .walked
        .checked_sub(1)
        .and_then(|i| entries.get(i))
        .map(|e| (e.sequence, e.digest));
    let progress = if progress.continued_by(entries.len(), newest) {
        progress
    } else {
        Progress::default()
    };
    walk_from(task, entries, 0, Earlier::owned(), progress, Depth::Links)
}

/// Continue the walk `progress` over a task's `records` (every one readable, stored under
/// its own sequence's name, in sequence order) and the [`digest`] of each one's stored
/// bytes, at `depth`: what [`walk`] over them all finds, for the cost of the records
/// not walked yet (and, at [`Depth::Rules`], of admitting each of those again through the
/// writer's rules against the records before it). When they do not continue what was
/// walked the walk starts over.
pub fn extend_records(
    task: &TaskName,
    records: &[Record],
    digests: &[String],
    progress: Progress,
    depth: Depth,
) -> Progress {
    let newest = progress
        .walked
        .checked_sub(1)
        .and_then(|i| records.get(i).zip(digests.get(i)))
        .map(|(r, d)| (r.envelope.sequence, d.as_str()));
    let progress = if progress.continued_by(records.len(), newest) {
        progress
    } else {
        Progress::default()
    };
    // Only the records not walked yet are looked at, with the newest walked one before
    // them for their link: a walk of ten thousand records is not redone per record.
    let base = progress.walked.saturating_sub(1);
    let entries: Vec<Entry> = records[base..]
        .iter()
        .zip(&digests[base..])
        .map(|(record, digest)| Entry {
            file: None,
            sequence: record.envelope.sequence,
            digest,
            record: Ok(record),
        })
        .collect();
    walk_from(task, &entries, base, Earlier::Of(records), progress, depth)
}

/// The records before the one walked, for the writer's rules ([`Depth::Rules`]).
enum Earlier<'r> {
    /// Copied as the walk goes (the entries may hold unreadable files).
    Owned(Vec<Record>),
    /// Every entry's record, in entry order: those before the `i`th are `[..i]`.
    Of(&'r [Record]),
}

impl Earlier<'_> {
    fn owned() -> Self {
        Earlier::Owned(Vec::new())
    }
}

/// Walk `entries`, the task's entries from index `base` on, continuing `progress` (which
/// walked the entries before `progress.walked`, at least `base`).
fn walk_from(
    task: &TaskName,
    entries: &[Entry],
    base: usize,
    earlier: Earlier,
    progress: Progress,
    depth: Depth,
) -> Progress {
    let from = progress.walked;
    let mut walker = Walker {
        task,
        entries,
        base,
        p: progress,
        earlier,
        readmitted: None,
    };
    for i in from..base + entries.len() {
        walker.step(i, depth);
    }
    let mut p = walker.p;
    if let (Some(index), Earlier::Of(records)) = (p.index.as_mut(), &walker.earlier) {
        index.extend(&records[..base + entries.len()]);
    }
    p.walked = base + entries.len();
    p.head = entries.last().map(|e| Head {
        sequence: e.sequence,
        hash: e.digest.to_string(),
    });
    p
}

struct Walker<'w, 'r> {
    task: &'w TaskName,
    /// The task's entries from index `base` on.
    entries: &'w [Entry<'r>],
    base: usize,
    p: Progress,
    earlier: Earlier<'w>,
    /// What admitting each entry again gives, worked out beforehand (by
    /// [`parallel::readmit_all`]; `None` for an unreadable one), or `None` to admit each
    /// as the walk reaches it.
    readmitted: Option<&'w [Option<parallel::Readmitted>]>,
}

impl<'r> Walker<'_, 'r> {
    /// The task's `i`th entry (at `base` or after).
    fn entry(&self, i: usize) -> &Entry<'r> {
        &self.entries[i - self.base]
    }

    fn find(&mut self, at: usize, breaks: usize, problem: Problem, message: String) {
        let entry = self.entry(at);
        self.p.findings.push(Finding {
            file: entry.name(),
            sequence: entry.sequence,
            problem,
            reason: None,
            message,
        });
        let sequence = self.entry(breaks).sequence;
        let breaks = match self.p.broken {
            Some((b, s)) if b <= breaks => (b, s),
            _ => (breaks, sequence),
        };
        self.p.broken = Some(breaks);
    }

    fn step(&mut self, i: usize, depth: Depth) {
        let entries = self.entries;
        let entry = &entries[i - self.base];
        let expected_before = if i == 0 {
            0
        } else {
            self.entry(i - 1).sequence
        };
        let gap = entry.sequence != expected_before + 1;
        if gap {
            let missing = if entry.sequence == expected_before + 2 {
                format!("record {} is missing", expected_before + 1)
            } else {
                format!(
                    "records {} to {} are missing",
                    expected_before + 1,
                    entry.sequence.saturating_sub(1)
                )
            };
            self.find(
                i,
                i,
                Problem::SequenceGap,
                format!("{missing}: removed, or the sequence was altered"),
            );
        }
        let record = match entry.record {
            Ok(record) => record,
            Err(why) => {
                self.find(
                    i,
                    i,
                    Problem::Unreadable,
                    format!("does not read as a record: {why}"),
                );
                return;
            }
        };
        self.envelope(i, entry, record);
        self.link(i, entry, record, gap);
        self.computed(i, record);
        if depth == Depth::Rules {
            self.rules(i, record);
            if let (Earlier::Owned(earlier), None) = (&mut self.earlier, self.readmitted) {
                earlier.push(record.clone());
            }
        }
        if !self.p.ids.contains_key(record.id()) {
            self.p.ids.insert(record.id().to_string(), entry.sequence);
        }
        if let Body::Consultation(c) = &record.body {
            let source = c.source.as_deref().unwrap_or(c.advisor.as_str());
            let advisor = (c.status == ConsultationStatus::Completed)
                .then(|| (c.advisor.clone(), source.to_string()));
            self.p.reviewers.insert(record.id().to_string(), advisor);
        }
    }

    fn envelope(&mut self, i: usize, entry: &Entry, record: &Record) {
        let envelope = &record.envelope;
        if envelope.sequence != entry.sequence {
            self.find(
                i,
                i,
                Problem::Misplaced,
                format!(
                    "holds sequence {} under the name of sequence {}: moved or renamed",
                    envelope.sequence, entry.sequence
                ),
            );
        }
        if envelope.task != self.task.as_str() {
            self.find(
                i,
                i,
                Problem::Envelope,
                format!(
                    "belongs to task `{}`, not `{}`: copied from another task",
                    envelope.task.escape_debug(),
                    self.task
                ),
            );
        }
        if let Some(&first) = self.p.ids.get(record.id()) {
            self.find(
                i,
                i,
                Problem::Envelope,
                format!(
                    "repeats the id `{}` of record {}: a copy",
                    record.id(),
                    first
                ),
            );
        }
        if envelope.schema == 0 || envelope.schema > SCHEMA_VERSION {
            self.find(
                i,
                i,
                Problem::Envelope,
                format!(
                    "has schema {}, which no writer of this version writes (1 to {SCHEMA_VERSION})",
                    envelope.schema
                ),
            );
        }
    }

    fn link(&mut self, i: usize, entry: &Entry, record: &Record, gap: bool) {
        let Some(prev) = record.envelope.prev.as_deref() else {
            if let Some(from) = self.p.chained_from {
                self.find(
                    i,
                    i,
                    Problem::Unchained,
                    format!(
                        "carries no `prev` though the chain starts at record {from}: written \
                         outside the writer, or `prev` was removed"
                    ),
                );
            } else if record.envelope.schema >= 2 {
                self.find(
                    i,
                    i,
                    Problem::Unchained,
                    format!(
                        "is of schema {} but carries no `prev`: written outside the writer, or \
                         `prev` was removed",
                        record.envelope.schema
                    ),
                );
            }
            return;
        };
        self.p.chained_from.get_or_insert(entry.sequence);
        if gap {
            // The gap is the finding; the link to a missing record cannot be checked.
            return;
        }
        if i == 0 {
            if prev != GENESIS {
                self.find(
                    i,
                    i,
                    Problem::Changed,
                    format!(
                        "is the task's first record but names `prev` {prev}, not the chain's \
                         start: the records before it were removed"
                    ),
                );
            }
            return;
        }
        let before = self.entry(i - 1);
        let (expected, before_sequence) = (before.digest, before.sequence);
        if prev == expected {
            return;
        }
        if prev == GENESIS {
            self.find(
                i,
                i - 1,
                Problem::Changed,
                "starts a new chain in the middle of the task: written outside the writer, or \
                 the records before it were replaced"
                    .to_string(),
            );
            return;
        }
        if let Some(other) = self.entries.iter().find(|e| e.digest == prev) {
            let message = format!(
                "is chained to record {}, not to record {before_sequence}: records were \
                 inserted, removed or reordered",
                other.sequence
            );
            self.find(i, i - 1, Problem::Changed, message);
            return;
        }
        // The record before changed after this one was written, or this one was put in its
        // place: the next record tells, when its own link to this one holds.
        let next_links_here = self.entries.get(i + 1 - self.base).map(|next| {
            next.sequence == entry.sequence + 1
                && next
                    .record
                    .is_ok_and(|r| r.envelope.prev.as_deref() == Some(entry.digest))
        });
        if next_links_here == Some(false) {
            let message = format!(
                "names `prev` {prev}, but record {before_sequence} hashes to {expected}, and \
                 the record after this one does not link to it either: this record was \
                 replaced, or record {before_sequence} changed after it was written"
            );
            self.find(i, i - 1, Problem::Changed, message);
            return;
        }
        let this = entry.sequence;
        let message = format!(
            "changed after record {this} was written: record {this} names `prev` {prev}, but \
             this record hashes to {expected} (or record {this} itself was put in its place)"
        );
        self.find(i - 1, i - 1, Problem::Changed, message);
    }

    /// The review of a conclusion, from the completed consultations it cites.
    fn computed(&mut self, i: usize, record: &Record) {
        let Body::Conclusion(c) = &record.body else {
            if let Body::Consultation(c) = &record.body {
                if c.finished_at != record.envelope.created_at {
                    self.find(
                        i,
                        i,
                        Problem::Computed,
                        format!(
                            "`finished_at` is {} but the writer sets it to `created_at`, {}",
                            c.finished_at, record.envelope.created_at
                        ),
                    );
                }
            }
            return;
        };
        let mut reviewed_by: Vec<&str> = Vec::new();
        let mut sources: Vec<&str> = Vec::new();
        for id in &c.consultations {
            if let Some(Some((advisor, source))) = self.p.reviewers.get(id.as_str()) {
                if !reviewed_by.contains(&advisor.as_str()) {
                    reviewed_by.push(advisor);
                }
                if !sources.contains(&source.as_str()) {
                    sources.push(source);
                }
            }
        }
        // The writer counts only the consultations whose attestation it could check, which
        // the chain alone cannot tell: the stored review must be drawn from the completed
        // consultations cited, in citation order, never more.
        let mut candidates = reviewed_by.iter();
        let drawn = c
            .reviewed_by
            .iter()
            .all(|advisor| candidates.any(|a| a == advisor));
        let count = c.independent_review_count as usize;
        if !drawn {
            self.find(
                i,
                i,
                Problem::Computed,
                format!(
                    "`reviewed_by` is [{}] but the completed consultations it cites give [{}]",
                    c.reviewed_by.join(", "),
                    reviewed_by.join(", ")
                ),
            );
        } else if count > sources.len() || (count == 0) != c.reviewed_by.is_empty() {
            self.find(
                i,
                i,
                Problem::Computed,
                format!(
                    "`independent_review_count` is {} but the answers it cites come from {} \
                     distinct source(s)",
                    c.independent_review_count,
                    sources.len()
                ),
            );
        }
    }

    /// Admit the record again through the writer's rules of today.
    fn rules(&mut self, i: usize, record: &Record) {
        if let Some(readmitted) = self.readmitted {
            if let Some(outcome) = &readmitted[i - self.base] {
                self.judge_readmitted(i, outcome);
                return;
            }
        }
        let earlier = match &self.earlier {
            Earlier::Owned(earlier) => earlier.as_slice(),
            Earlier::Of(records) => &records[..i],
        };
        let index = self.p.index.get_or_insert_with(writer::Index::default);
        index.extend(earlier);
        let outcome = parallel::readmit_one(earlier, index, record, self.task);
        self.judge_readmitted(i, &outcome);
    }

    /// The findings of admitting entry `i` again (`outcome`).
    fn judge_readmitted(&mut self, i: usize, outcome: &parallel::Readmitted) {
        match outcome {
            parallel::Readmitted::Refused(refusal) => {
                self.find(
                    i,
                    i,
                    Problem::Rule,
                    format!("the writer refuses it today: {}", refusal.message),
                );
                if let Some(finding) = self.p.findings.last_mut() {
                    finding.reason = Some(refusal.reason.as_str().to_string());
                }
            }
            parallel::Readmitted::Same => {}
            parallel::Readmitted::Differs(field) => {
                let already = self.p.findings.iter().any(|f| {
                    f.sequence == self.entry(i).sequence && f.problem == Problem::Computed
                });
                if !already {
                    self.find(
                        i,
                        i,
                        Problem::Computed,
                        format!(
                            "field `{field}` is not what the writer stores for the same input \
                             (a computed field that does not match, or text the writer would \
                             scrub)"
                        ),
                    );
                }
            }
        }
    }
}

/// One file of a task's directory, as the edge read it: a record file's name, the
/// sequence it holds and its bytes, or a stray's name (see [`FileName`]).
pub struct File<'a> {
    /// Its name (`0000000007.json`).
    pub name: &'a str,
    /// The sequence its name holds; 0 for a stray ([`FileName::Stray`]).
    pub sequence: u64,
    /// Its bytes, exactly as stored.
    pub bytes: &'a [u8],
}

/// The files named in `named` (name and sequence, as [`verify_parsed`] takes them), their
/// bytes not held: they were read, hashed and parsed already.
pub fn files_named(named: &[(String, u64)]) -> Vec<File<'_>> {
    named
        .iter()
        .map(|(name, sequence)| File {
            name,
            sequence: *sequence,
            bytes: &[],
        })
        .collect()
}

/// What `verify` found in one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskReport {
    /// The task.
    pub task: String,
    /// The directory of its record files.
    pub dir: String,
    /// The chain's state.
    #[serde(flatten)]
    pub state: ChainState,
    /// Every finding, in file order.
    pub findings: Vec<Finding>,
    /// Whether this machine vouches for the task (`foreign`: never written here, or
    /// rewritten behind its writers' backs; `advisor-consult adopt` accepts it).
    #[serde(default)]
    pub trust: TaskTrust,
    /// Why the task is foreign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<String>,
}

/// What `advisor-consult verify` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyReport {
    /// Each task walked, sorted by name.
    pub tasks: Vec<TaskReport>,
}

impl VerifyReport {
    /// How many findings in all.
    pub fn findings(&self) -> usize {
        self.tasks.iter().map(|t| t.findings.len()).sum()
    }

    /// No finding and no foreign task: `verify` exits 0.
    pub fn passed(&self) -> bool {
        self.findings() == 0 && self.tasks.iter().all(|t| t.trust == TaskTrust::Local)
    }
}

/// Verify one task's files (the record files in the order of the sequences their names
/// hold): parse each, hash its bytes and walk the chain at [`Depth::Rules`]. A stray (the
/// edge classified its name by [`FileName`] and gave it sequence 0) is a finding of its
/// own and is not walked.
pub fn verify_task(task: &TaskName, dir: String, files: &[File]) -> TaskReport {
    verify_task_with(task, dir, files, &mut |_, _| {})
}

/// How many records `verify` admits again between two reports of its progress, at most.
pub const VERIFY_STEP: usize = 2_000;

/// [`verify_task`], calling `walked(records walked, records)` as the records are admitted
/// again (at least every [`VERIFY_STEP`]) and at the end, so a caller waiting for a long
/// walk can tell it goes on.
pub fn verify_task_with(
    task: &TaskName,
    dir: String,
    files: &[File],
    walked: &mut dyn FnMut(usize, usize),
) -> TaskReport {
    verify_task_by(task, dir, files, None, walked).report
}

/// A record file as `verify` reads it: the chain's hash of its bytes, and the record they
/// parse to or why they do not.
pub type Parsed = (String, Result<Record, String>);

/// [`Parsed`] of a record file's `bytes`.
pub fn parse_file(bytes: &[u8]) -> Parsed {
    (
        digest(bytes),
        serde_json::from_slice::<Record>(bytes).map_err(|e| e.to_string()),
    )
}

/// What [`verify_task_by`] found, and the records it read on the way.
pub struct Verified {
    /// What `verify` found in the task.
    pub report: TaskReport,
    /// Every record file that parses, in file order.
    pub records: Vec<Record>,
    /// For each of `records`, the index of its file in the files verified.
    pub files: Vec<usize>,
    /// The chain's hash of each record file's bytes (every file of a sequence above 0,
    /// readable or not), in file order.
    pub digests: Vec<(u64, String)>,
}

/// [`verify_task_with`] spread over `workers` threads (`None`: the machine's cores, see
/// [`parallel::workers`]), keeping the records read: the report is the same whatever the
/// number of workers, that of one walk in order.
pub fn verify_task_by(
    task: &TaskName,
    dir: String,
    files: &[File],
    workers: Option<usize>,
    walked: &mut dyn FnMut(usize, usize),
) -> Verified {
    let bytes: Vec<&[u8]> = files
        .iter()
        .filter(|f| f.sequence > 0)
        .map(|f| f.bytes)
        .collect();
    let workers = workers.unwrap_or_else(|| parallel::workers(bytes.len()));
    // Hashed and parsed side by side.
    let parsed = parallel::map(&bytes, workers, |bytes| parse_file(bytes));
    drop(bytes);
    verify_parsed(task, dir, files, parsed, Some(workers), walked)
}

/// [`verify_task_by`] of files already hashed and parsed: `parsed` holds one [`Parsed`]
/// for each of `files` that is a record file (sequence above 0), in the same order, and
/// the bytes of `files` are not read (the store reads, hashes and parses each file in one
/// go and keeps none of them: [`crate::store::Store::parsed_files`]).
pub fn verify_parsed(
    task: &TaskName,
    dir: String,
    files: &[File],
    parsed: Vec<Parsed>,
    workers: Option<usize>,
    walked: &mut dyn FnMut(usize, usize),
) -> Verified {
    let (record_files, stray_files): (Vec<usize>, Vec<usize>) =
        (0..files.len()).partition(|&at| files[at].sequence > 0);
    assert_eq!(
        record_files.len(),
        parsed.len(),
        "one parsed result for each record file"
    );
    let workers = workers.unwrap_or_else(|| parallel::workers(record_files.len()));
    // The readable records kept in one run, for the rules, taken out of the parsed
    // results in place (the collection reuses their vector) rather than copied into a new
    // one: at 100,000 records that copy was some 50 MB of fresh pages.
    let mut digests = Vec::with_capacity(parsed.len());
    let mut slots: Vec<Result<usize, String>> = Vec::with_capacity(parsed.len());
    let mut readable_files = Vec::with_capacity(parsed.len());
    let records: Vec<Record> = parsed
        .into_iter()
        .enumerate()
        .filter_map(|(i, (digest, parsed))| {
            digests.push((files[record_files[i]].sequence, digest));
            match parsed {
                Ok(record) => {
                    slots.push(Ok(readable_files.len()));
                    readable_files.push(record_files[i]);
                    Some(record)
                }
                Err(why) => {
                    slots.push(Err(why));
                    None
                }
            }
        })
        .collect();
    let total = record_files.len();
    let mut done = 0;
    let mut told = 0;
    let admitted = parallel::readmit_all(&records, task, workers, &mut |n| {
        done += n;
        // The last report is the walk's own, at the end.
        if done < total && (done - told >= VERIFY_STEP || told == 0) {
            told = done;
            walked(done, total);
        }
    });
    let mut admitted = admitted.into_iter();
    let readmitted: Vec<Option<parallel::Readmitted>> = slots
        .iter()
        .map(|slot| slot.as_ref().ok().and_then(|_| admitted.next()))
        .collect();
    let entries: Vec<Entry> = record_files
        .iter()
        .zip(&digests)
        .zip(&slots)
        .map(|((&at, (_, digest)), slot)| Entry {
            file: Some(files[at].name),
            sequence: files[at].sequence,
            digest,
            record: match slot {
                Ok(k) => Ok(&records[*k]),
                Err(why) => Err(why.as_str()),
            },
        })
        .collect();
    // The walk in order, over what the workers found.
    let mut walker = Walker {
        task,
        entries: &entries,
        base: 0,
        p: Progress::default(),
        earlier: Earlier::owned(),
        readmitted: Some(&readmitted),
    };
    for i in 0..entries.len() {
        walker.step(i, Depth::Rules);
    }
    let mut progress = walker.p;
    progress.walked = entries.len();
    progress.head = entries.last().map(|e| Head {
        sequence: e.sequence,
        hash: e.digest.to_string(),
    });
    walked(entries.len(), entries.len());
    let mut walk = Walk {
        state: progress.state(),
        broken_index: progress.broken_index(),
        findings: progress.findings,
    };
    let mut names: Vec<&str> = stray_files.iter().map(|&at| files[at].name).collect();
    names.sort_unstable();
    for name in &names {
        walk.findings.push(stray_finding(name));
    }
    walk.state.strays = names.iter().map(|n| n.to_string()).collect();
    drop(entries);
    Verified {
        report: TaskReport {
            task: task.to_string(),
            dir,
            state: walk.state,
            findings: walk.findings,
            trust: TaskTrust::Local,
            foreign: None,
        },
        records,
        files: readable_files,
        digests,
    }
}

impl Trust {
    /// The trust of a walk over `entries`: every record at or after the break is unverified.
    pub fn new(entries: &[Entry], walk: Walk) -> Trust {
        let unverified = walk.broken_index.map_or_else(FxHashSet::default, |b| {
            entries[b..]
                .iter()
                .filter_map(|e| e.record.ok().map(|r| r.id().to_string()))
                .collect()
        });
        Trust::walked(unverified, walk.state, walk.findings.into_iter().next())
    }

    /// Walk `entries` at [`Depth::Links`] and trust what the chain vouches for.
    pub fn of(task: &TaskName, entries: &[Entry]) -> Trust {
        Trust::new(entries, walk(task, entries, Depth::Links))
    }

    /// The trust of a walk kept by the edge over `records`, the task's records it walked
    /// in order (every one readable): every record at or after the break is unverified.
    pub fn of_progress(records: &[Record], progress: &Progress) -> Trust {
        let unverified = progress
            .broken_index()
            .map_or_else(FxHashSet::default, |b| {
                records[b..].iter().map(|r| r.id().to_string()).collect()
            });
        Trust::walked(
            unverified,
            progress.state(),
            progress.findings().first().cloned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_sha256_of_the_bytes_in_hex() {
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(GENESIS.len(), digest(b"").len());
    }

    /// Assessment `n` of task `t`, chained to `prev`, and its stored bytes.
    fn stored(n: u64, prev: &str) -> (Record, Vec<u8>) {
        let record: Record = serde_json::from_value(serde_json::json!({
            "id": format!("A{n}"), "task": "t", "sequence": n,
            "created_at": "2026-01-01T00:00:00.000Z", "schema": SCHEMA_VERSION,
            "redacted": [], "prev": prev, "kind": "assessment", "subject": "s",
            "materiality": "low", "hypothesis": "h"}))
        .expect("an assessment");
        let bytes = serde_json::to_vec_pretty(&record).expect("serialises");
        (record, bytes)
    }

    fn task_of(n: u64) -> (Vec<Record>, Vec<String>) {
        let (mut records, mut digests) = (Vec::new(), vec![]);
        for i in 1..=n {
            let prev = digests
                .last()
                .cloned()
                .unwrap_or_else(|| GENESIS.to_string());
            let (record, bytes) = stored(i, &prev);
            records.push(record);
            digests.push(digest(&bytes));
        }
        (records, digests)
    }

    fn entries<'r>(records: &'r [Record], digests: &'r [String]) -> Vec<Entry<'r>> {
        records
            .iter()
            .zip(digests)
            .map(|(r, d)| Entry {
                file: None,
                sequence: r.envelope.sequence,
                digest: d,
                record: Ok(r),
            })
            .collect()
    }

    #[test]
    fn extending_a_walk_finds_what_walking_everything_finds() {
        let t = TaskName::new("t").expect("a task");
        let (records, mut digests) = task_of(8);
        // Record 5 changed after record 6 was written: its hash no longer matches.
        digests[4] = digest(b"edited");
        let all = walk(&t, &entries(&records, &digests), Depth::Links);
        assert_eq!(all.state.broken_at, Some(5));
        assert_eq!(all.findings.len(), 1, "{:?}", all.findings);
        // Record 5 is named: record 6 is intact, record 7 still links to it.
        assert_eq!(all.findings[0].file, "0000000005.json");
        let mut progress = Progress::default();
        for upto in [0, 2, 5, 5, 6, 8] {
            progress = extend(&t, &entries(&records[..upto], &digests[..upto]), progress);
            assert_eq!(progress.walked(), upto);
        }
        assert_eq!(progress.state(), all.state);
        assert_eq!(progress.findings(), all.findings.as_slice());
        assert_eq!(progress.broken_index(), all.broken_index);
        let trust = Trust::of_progress(&records, &progress);
        assert!(trust.is_verified("A4") && !trust.is_verified("A5"));
        assert!(!trust.is_verified("A8"));
    }

    #[test]
    fn a_task_is_this_machines_only_while_its_anchored_head_is_in_place() {
        let t = TaskName::new("t").expect("a task");
        let (_, digests) = task_of(5);
        let at = |s: u64| digests.get(s as usize - 1).map(String::as_str);
        let head = |s: u64, hash: &str| Head {
            sequence: s,
            hash: hash.to_string(),
        };
        // (anchored head, highest sequence, foreign?)
        let cases: [(Option<Head>, Option<u64>, bool); 7] = [
            (None, None, false),                               // an empty task
            (None, Some(5), true),                             // never written here
            (Some(head(5, &digests[4])), Some(5), false),      // the head in place
            (Some(head(4, &digests[3])), Some(5), false),      // one record past: the crash window
            (Some(head(3, &digests[2])), Some(5), true),       // two past: copied in
            (Some(head(5, &digest(b"other"))), Some(5), true), // rewritten
            (Some(head(7, &digests[4])), Some(5), true),       // rolled back
        ];
        for (anchored, highest, expected) in cases {
            let found = foreign(&t, anchored.as_ref(), highest, at);
            assert_eq!(
                found.is_some(),
                expected,
                "{anchored:?} {highest:?}: {found:?}"
            );
            if let Some(why) = found {
                assert!(why.contains("advisor-consult adopt --task t"), "{why}");
            }
        }
    }

    #[test]
    fn a_walk_not_continued_by_the_entries_starts_over() {
        let t = TaskName::new("t").expect("a task");
        let (records, digests) = task_of(4);
        let progress = extend(&t, &entries(&records, &digests), Progress::default());
        assert_eq!(progress.state().broken_at, None);
        // Four records whose newest is not the one walked: the walk is not reused.
        let (other, mut other_digests) = task_of(4);
        other_digests[2] = digest(b"other");
        other_digests[3] = digest(b"newest");
        let again = extend(&t, &entries(&other, &other_digests), progress.clone());
        let fresh = walk(&t, &entries(&other, &other_digests), Depth::Links);
        assert_eq!(again.state(), fresh.state);
        assert_eq!(again.state().broken_at, Some(3));
        // Fewer entries than were walked: over again as well.
        let fewer = extend(&t, &entries(&records[..2], &digests[..2]), progress);
        assert_eq!(fewer.state().records, 2);
        assert_eq!(fewer.state().head.map(|h| h.sequence), Some(2));
    }
}
