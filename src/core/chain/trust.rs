//! What a task's chain vouches for, below both the chain's walk and the writer's rules:
//! the findings of a walk and the state of a chain, the attestations the edge checked,
//! whether this machine vouches for the task, and [`Trust`], what the views and the
//! writer believe. The walk (`chain.rs`) builds a `Trust`; the writer only reads one.

use super::link::RECORD_DIGITS;
use crate::core::records::TaskName;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

/// What is wrong with a record file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    /// The file does not parse as a record.
    Unreadable,
    /// The file holds another sequence than its name.
    Misplaced,
    /// Records before it are missing.
    SequenceGap,
    /// Its `prev` does not match the record before it: that record's bytes changed, or
    /// records were inserted, removed or reordered.
    Changed,
    /// It carries no `prev` where the chain requires one: written outside the writer.
    Unchained,
    /// Its envelope is wrong: another task, a repeated id, an unknown schema.
    Envelope,
    /// A field the writer computes does not match its derivation.
    Computed,
    /// The writer's rules of today refuse it.
    Rule,
    /// A file in the task's directory that is not a record file by its name (see
    /// [`FileName`]): never read as a record.
    Stray,
    /// A consultation without a valid attestation of this machine's daemon: it never
    /// counts as a review. Reported by `verify`; it breaks no link, so nothing after it is
    /// marked unverified.
    Unattested,
}

impl Problem {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Problem::Unreadable => "unreadable",
            Problem::Misplaced => "misplaced",
            Problem::SequenceGap => "sequence_gap",
            Problem::Changed => "changed",
            Problem::Unchained => "unchained",
            Problem::Envelope => "envelope",
            Problem::Computed => "computed",
            Problem::Rule => "rule",
            Problem::Stray => "stray",
            Problem::Unattested => "unattested",
        }
    }
}

/// One thing wrong with one record file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// The file's name.
    pub file: String,
    /// The sequence its name holds.
    pub sequence: u64,
    /// What kind of wrong.
    pub problem: Problem,
    /// The writer's reason code, for [`Problem::Rule`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What is wrong, in one sentence.
    pub message: String,
}

/// The newest record of a task and its hash: what a team keeps to notice a rewritten chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Head {
    /// Its sequence.
    pub sequence: u64,
    /// [`digest`] of its stored bytes.
    pub hash: String,
}

/// The state of one task's chain.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChainState {
    /// How many record files were walked.
    pub records: usize,
    /// The first sequence carrying `prev`; records before it predate the chain and are
    /// covered only through the first chained record's link to the one before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chained_from: Option<u64>,
    /// The newest record and its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<Head>,
    /// The first sequence not verified: it and every record after it are unverified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<u64>,
    /// How many records are unverified.
    pub unverified: usize,
    /// The names in the task's directory that are neither record files nor the store's
    /// own (see [`FileName`]), sorted: never read as records, reported as findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strays: Vec<String>,
}

/// What the edge found of the attestations of a task's consultations (it holds the key;
/// the core is handed the verdicts).
#[derive(Debug, Clone, Default)]
pub struct Attestations {
    /// Completed consultations whose attestation is valid and that may count.
    counting: FxHashSet<String>,
    /// Consultations without a valid attestation, and why, in one sentence each.
    unattested: FxHashMap<String, String>,
    /// How many records of the task were judged.
    judged: usize,
    /// The fingerprint of the pinned peers they were judged under: another machine's
    /// consultations count only while their runtime is pinned, so other pins judge anew.
    pins: String,
}

impl Attestations {
    /// Note that completed consultation `id` is validly attested and may count.
    pub fn counting(&mut self, id: &str) {
        self.counting.insert(id.to_string());
    }

    /// Note that consultation `id` carries no valid attestation, and `why`.
    pub fn unattested(&mut self, id: &str, why: String) {
        self.unattested.insert(id.to_string(), why);
    }

    /// How many records of the task were judged (the edge judges new ones only).
    pub fn judged(&self) -> usize {
        self.judged
    }

    /// Note that the task's first `records` were judged.
    pub fn set_judged(&mut self, records: usize) {
        self.judged = records;
    }

    /// Nothing judged yet, under the pinned peers of fingerprint `pins`.
    pub fn under_pins(pins: String) -> Attestations {
        Attestations {
            pins,
            ..Attestations::default()
        }
    }

    /// The fingerprint of the pinned peers the attestations were judged under.
    pub fn pins(&self) -> &str {
        &self.pins
    }

    /// Why consultation `id` is unattested, if it is.
    pub fn why_unattested(&self, id: &str) -> Option<&str> {
        self.unattested.get(id).map(String::as_str)
    }
}

/// [`foreign`] of a task whose record files hash to `digests` (each file's sequence and the
/// chain's hash of its bytes, in file order, strays left out: [`super::Verified::digests`]).
/// Its highest record is the last of them, as every view takes it: a file that is not a
/// record never makes a task foreign, nor is it ever anchored.
pub fn foreign_by_digests(
    task: &TaskName,
    anchored: Option<&Head>,
    digests: &[(u64, String)],
) -> Option<String> {
    let highest = digests.last().map(|(sequence, _)| *sequence);
    foreign(task, anchored, highest, |sequence| {
        digests
            .iter()
            .find(|(at, _)| *at == sequence)
            .map(|(_, digest)| digest.as_str())
    })
}

/// Whether this machine vouches for a task: `None` when it does, else why not.
///
/// A task is this machine's when the head its writers anchored (outside the repository) is
/// in place: the record at the anchored sequence has the anchored hash. At most
/// [`UNANCHORED_ALLOWANCE`] record may follow it, the one a crash between storing a record
/// and anchoring it can leave (the next write anchors it). An empty task is nobody's to
/// doubt. Anything else is `foreign`: records this machine never wrote (a cloned
/// repository's), or a chain rewritten or rolled back behind its writers' backs.
pub fn foreign<'d>(
    task: &TaskName,
    anchored: Option<&Head>,
    highest: Option<u64>,
    digest_at: impl Fn(u64) -> Option<&'d str>,
) -> Option<String> {
    let highest = highest?;
    let adopt = format!(
        "its conclusions are never reused and its consultations never count until \
         `advisor-consult adopt --task {task}` accepts it"
    );
    let Some(anchored) = anchored else {
        return Some(format!(
            "this machine never wrote task `{task}` (no head of it is anchored in the data \
             directory): a cloned repository's records, or written before heads were \
             anchored; {adopt}"
        ));
    };
    match digest_at(anchored.sequence) {
        Some(hash) if hash == anchored.hash => {
            if highest > anchored.sequence + UNANCHORED_ALLOWANCE {
                Some(format!(
                    "records {} to {highest} of task `{task}` follow record {}, the head this \
                     machine anchored, without being anchored: written elsewhere and copied \
                     in; {adopt}",
                    anchored.sequence + 1,
                    anchored.sequence
                ))
            } else {
                None
            }
        }
        Some(hash) => Some(format!(
            "record {} of task `{task}` hashes to {hash}, not to {}, the head this machine \
             anchored when it wrote it: the chain was rewritten behind its writers' backs; \
             {adopt}",
            anchored.sequence, anchored.hash
        )),
        None => Some(format!(
            "record {} of task `{task}`, the head this machine anchored, is gone: the chain was \
             replaced or rolled back behind its writers' backs; {adopt}",
            anchored.sequence
        )),
    }
}

/// How many records may follow a task's anchored head (see [`foreign`]).
pub const UNANCHORED_ALLOWANCE: u64 = 1;

/// Whether this machine vouches for a task, as `status` and `verify` say it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TaskTrust {
    /// Written here (its anchored head is in place), or adopted.
    #[default]
    Local,
    /// Not vouched for by this machine: never reused, never counted until adopted.
    Foreign,
}

impl TaskTrust {
    /// `foreign` when there is a reason this machine does not vouch for the task
    /// ([`foreign`]), else `local`.
    pub fn of(foreign: Option<&str>) -> TaskTrust {
        if foreign.is_some() {
            TaskTrust::Foreign
        } else {
            TaskTrust::Local
        }
    }

    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskTrust::Local => "local",
            TaskTrust::Foreign => "foreign",
        }
    }
}

/// The finding of a stray file named `name`.
pub fn stray_finding(name: &str) -> Finding {
    Finding {
        file: name.to_string(),
        sequence: 0,
        problem: Problem::Stray,
        reason: None,
        message: format!(
            "is not a record file (a record file's name is {RECORD_DIGITS} digits and \
             `.json`, as `0000000007.json`), so it is never read as one: move it out of the \
             task's directory"
        ),
    }
}

/// Which records of a task the chain vouches for, for the views and the plan.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    unverified: FxHashSet<String>,
    /// The chain's state; `None` when the chain was not walked.
    pub state: Option<ChainState>,
    /// The first finding of the walk, when the chain is broken: what `verify` reports
    /// first.
    pub first_finding: Option<Finding>,
    /// The attestations the edge checked; `None` when none were (every consultation then
    /// counts as the chain vouches: a caller that holds no key, such as the core's tests).
    attestations: Option<std::sync::Arc<Attestations>>,
    /// Why this machine does not vouch for the task; `None` when it does or was not asked.
    foreign: Option<String>,
}

impl Trust {
    /// The trust of a walk (the chain's walk builds it): the records `unverified`, at or
    /// after the break, the chain's `state` and the walk's `first_finding`.
    pub(in crate::core) fn walked(
        unverified: FxHashSet<String>,
        state: ChainState,
        first_finding: Option<Finding>,
    ) -> Trust {
        Trust {
            unverified,
            state: Some(state),
            first_finding,
            ..Trust::default()
        }
    }

    /// Whether record `id` comes before any break.
    pub fn is_verified(&self, id: &str) -> bool {
        self.unverified.is_empty() || !self.unverified.contains(id)
    }

    /// Whether no record is unverified.
    pub fn all_verified(&self) -> bool {
        self.unverified.is_empty()
    }

    /// Whether the walk found the chain broken.
    pub fn is_broken(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.broken_at.is_some())
    }

    /// This trust with the attestations the edge checked.
    pub fn with_attestations(mut self, attestations: std::sync::Arc<Attestations>) -> Trust {
        self.attestations = Some(attestations);
        self
    }

    /// This trust with whether this machine vouches for the task ([`foreign`]).
    pub fn with_foreign(mut self, foreign: Option<String>) -> Trust {
        self.foreign = foreign;
        self
    }

    /// Why this machine does not vouch for the task, when it does not.
    pub fn foreign(&self) -> Option<&str> {
        self.foreign.as_deref()
    }

    /// `local` or `foreign`.
    pub fn task_trust(&self) -> TaskTrust {
        TaskTrust::of(self.foreign())
    }

    /// Why consultation `id` is unattested, when the edge found it so.
    pub fn unattested(&self, id: &str) -> Option<&str> {
        self.attestations.as_ref()?.why_unattested(id)
    }

    /// Whether consultation `id` counts as a review: the chain vouches for it, this machine
    /// vouches for the task, and its attestation is valid and counts (when checked).
    pub fn counts_as_review(&self, id: &str) -> bool {
        self.is_verified(id)
            && self.foreign.is_none()
            && self
                .attestations
                .as_ref()
                .is_none_or(|a| a.counting.contains(id))
    }

    /// Whether a plan may reuse conclusion `id`: the chain and this machine vouch for it.
    pub fn may_reuse(&self, id: &str) -> bool {
        self.is_verified(id) && self.foreign.is_none()
    }
}
