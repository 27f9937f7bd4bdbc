//! `status`: where each assessment of a task stands, a timeline and token totals.
//!
//! The state of an assessment, first match wins:
//!
//! | state | when |
//! | --- | --- |
//! | `disputed` | a disagreement on it has no resolution; or it has no conclusion, a completed consultation of it diverges and no disagreement was recorded (the writer would refuse a conclusion now with `unresolved_disagreement`) |
//! | `validated` | its standing conclusion's newest validation passed |
//! | `concluded` | it has a conclusion: a standing one whose newest validation failed or that has none, or only superseded ones (then `superseded_by` says which conclusion replaced it) |
//! | `planned` | it has a plan |
//! | `open` | otherwise |
//!
//! A failed validation therefore shows as `concluded` with the conclusion's `validation`
//! set to `failed`: the decision stands until a new conclusion supersedes it, but it is not
//! validated.

use super::downstream::Resting;
use super::{credited_review, summary, ValidationState};
use crate::core::catalogue::Pricing;
use crate::core::chain::{ChainState, TaskTrust, Trust};
use crate::core::cost::{Cost, Spend};
use crate::core::records::{
    Assessment, Body, Confidence, ConsultationStatus, FailureKind, Kind, Materiality, Mode, Record,
    Stance, Usage,
};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;

/// Where an assessment stands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// No plan yet.
    Open,
    /// Planned; no conclusion yet.
    Planned,
    /// A disagreement on it is not resolved.
    Disputed,
    /// It has a conclusion (not validated, or its newest validation failed).
    Concluded,
    /// Its standing conclusion's newest validation passed.
    Validated,
}

impl State {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Open => "open",
            State::Planned => "planned",
            State::Disputed => "disputed",
            State::Concluded => "concluded",
            State::Validated => "validated",
        }
    }
}

/// The derived status of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusView {
    /// The task (from the records; `None` when it has none).
    pub task: Option<String>,
    /// How many records the task holds.
    pub records: usize,
    /// The hash chain: where it starts, its head (the hash a team keeps to notice a
    /// rewritten chain) and where it is broken; absent when it was not walked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainState>,
    /// Whether this machine vouches for the task: `foreign` (never written here, or
    /// rewritten behind its writers' backs) reuses no conclusion and counts no review
    /// until `advisor-consult adopt` accepts it.
    #[serde(default)]
    pub trust: TaskTrust,
    /// Why the task is foreign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<String>,
    /// How many of its consultations carry no valid attestation (they never count).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unattested: usize,
    /// Each assessment, in sequence order.
    pub assessments: Vec<AssessmentStatus>,
    /// Every record, in sequence order.
    pub timeline: Vec<TimelineEntry>,
    /// Tokens the advisors reported.
    pub tokens: TokenTotals,
    /// What the consultations cost, per advisor and in total (derived from usage and the
    /// catalogue's prices by [`crate::core::views::priced::price_status`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<TaskSpend>,
    /// The slice of the assessments this reply holds, when paged (the timeline is cut
    /// the same way: its `timeline_total` says how long it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<super::Page>,
    /// How many entries the whole timeline has, when paged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline_total: Option<usize>,
    /// Each advisor's track record in this task alone (see `core::track`), by advisor id,
    /// whether or not it is still in the catalogue: information for the reader, which
    /// changes no plan. Absent when no disagreement of the task was resolved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub track_records: BTreeMap<String, crate::core::track::TrackRecord>,
    /// The assessments and conclusions resting on a superseded decision (they cite as
    /// evidence a conclusion since superseded, and were neither reaffirmed nor superseded
    /// themselves; see `core::views::downstream`), in sequence order, whatever the page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resting_on_superseded: Vec<Resting>,
    /// For a task shared through a journal (docs/JOURNAL.md): its name, whether the bus is
    /// reachable, and how current this machine's replica (what the view was read from) is.
    /// Absent for a local task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalState>,
}

/// Where a shared task's view comes from: this machine's replica of a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JournalState {
    /// The journal's name.
    pub name: String,
    /// Whether the bus is reachable from the daemon now; when it is not, the view may be
    /// behind the journal and writes to the task are refused.
    pub reachable: bool,
    /// When the replica was last known to hold everything the journal held (RFC 3339,
    /// UTC); absent when it never was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_at: Option<String>,
    /// How many seconds before this answer that was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_s_ago: Option<u64>,
    /// The journal's stream sequence the replica holds everything up to.
    pub stream_sequence: u64,
}

impl StatusView {
    /// Mark what rests on a superseded decision (from the task's downstream graph): the
    /// list, and each assessment's and conclusion's `rests_on_superseded`.
    pub fn mark_resting(&mut self, resting: Vec<Resting>) {
        if resting.is_empty() {
            return;
        }
        let mut on: HashMap<&str, Vec<String>> = HashMap::default();
        for r in &resting {
            on.entry(r.id.as_str())
                .or_default()
                .push(r.superseded.clone());
        }
        for assessment in &mut self.assessments {
            if let Some(ids) = on.remove(assessment.id.as_str()) {
                assessment.rests_on_superseded = ids;
            }
            for conclusion in &mut assessment.conclusions {
                if let Some(ids) = on.remove(conclusion.id.as_str()) {
                    conclusion.rests_on_superseded = ids;
                }
            }
        }
        self.resting_on_superseded = resting;
    }

    /// Keep only the assessments (and timeline entries) `offset..offset + limit`.
    pub fn page(&mut self, offset: usize, limit: usize) {
        self.page = Some(super::Page::slice(&mut self.assessments, offset, limit));
        self.timeline_total = Some(super::Page::slice(&mut self.timeline, offset, limit).total);
    }
}

/// What a task's consultations cost, per advisor and in total.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskSpend {
    /// Per advisor, by id.
    pub advisors: BTreeMap<String, Spend>,
    /// Every advisor together.
    pub total: Spend,
}

/// One assessment and what hangs from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AssessmentStatus {
    /// The assessment's id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// When it was recorded.
    pub created_at: String,
    /// Its subject.
    pub subject: String,
    /// Its materiality.
    pub materiality: Materiality,
    /// The executor's confidence.
    pub confidence: Confidence,
    /// Where it stands (see the module documentation).
    pub state: State,
    /// When every conclusion on it is superseded: the conclusion that replaced the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The superseded conclusions it cites as evidence and rests on (see
    /// [`StatusView::resting_on_superseded`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rests_on_superseded: Vec<String>,
    /// Its plans.
    pub plans: Vec<PlanLine>,
    /// The consultations of its plans.
    pub consultations: Vec<ConsultationLine>,
    /// Disagreements on it with their resolutions.
    pub disagreements: Vec<DisagreementLine>,
    /// Conclusions on it with their computed review and validation.
    pub conclusions: Vec<ConclusionLine>,
    /// Attempts recorded under it.
    pub attempts: Vec<AttemptLine>,
}

/// A plan, briefly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanLine {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// The mode it was computed in.
    pub mode: Mode,
    /// How many advisors it could select.
    pub budget: u32,
    /// The advisors selected, in consultation order.
    pub selected: Vec<String>,
    /// The standing conclusion it reuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse: Option<String>,
    /// Whether it asks for a local review (nobody selected for material doubt).
    pub local_review: bool,
}

/// A consultation, briefly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConsultationLine {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// The plan that selected the advisor.
    pub plan: String,
    /// The advisor.
    pub advisor: String,
    /// Completed or failed.
    pub status: ConsultationStatus,
    /// Its stance (completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance: Option<Stance>,
    /// Why it failed (failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
    /// The advisor's last diagnostic line (failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
    /// What it cost (derived; see [`crate::core::cost`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// How long the exchange took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Tokens reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// After a break in the hash chain: shown, never counted as a review.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
    /// Without a valid attestation of this machine's daemon: shown, never counted as a
    /// review.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unattested: bool,
}

/// A disagreement and its resolutions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DisagreementLine {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// The sources of its positions: `executor` or an advisor.
    pub positions: Vec<String>,
    /// The question whose answer decides.
    pub discriminating_question: String,
    /// Whether a resolution settled it.
    pub resolved: bool,
    /// Its resolutions, in sequence order.
    pub resolutions: Vec<ResolutionLine>,
}

/// A resolution, briefly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResolutionLine {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// The position it favours: `executor`, an advisor, or `neither`.
    pub favours: String,
    /// What the experiment showed.
    pub observed: String,
}

/// A conclusion with its computed review and validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConclusionLine {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// What was decided.
    pub decision: String,
    /// The distinct advisors of the completed consultations it cites that the hash chain
    /// vouches for (computed here, not read from the record).
    pub reviewed_by: Vec<String>,
    /// How many distinct advisors reviewed it.
    pub independent_review_count: u32,
    /// After a break in the hash chain: it reviews nothing and does not conclude.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
    /// The conclusion it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// The conclusion that replaced it, when it no longer stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// How its newest validation went.
    pub validation: ValidationState,
    /// How many validations were recorded.
    pub validations: usize,
    /// The superseded conclusions it cites as evidence and rests on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rests_on_superseded: Vec<String>,
}

/// An attempt, briefly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttemptLine {
    /// Its id.
    pub id: String,
    /// Its sequence.
    pub sequence: u64,
    /// What was tried.
    pub tried: String,
}

/// One record in the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelineEntry {
    /// Its sequence.
    pub sequence: u64,
    /// When it was recorded.
    pub created_at: String,
    /// Its kind.
    pub kind: Kind,
    /// Its id.
    pub id: String,
    /// One line saying what it is about.
    pub summary: String,
    /// After a break in the hash chain: not believed by any view.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
}

/// Token totals per advisor and overall.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenTotals {
    /// Per advisor, by id.
    pub advisors: BTreeMap<String, AdvisorTokens>,
    /// Every advisor together.
    pub total: AdvisorTokens,
}

/// What one advisor (or all) consumed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct AdvisorTokens {
    /// Consultations recorded.
    pub consultations: u64,
    /// Tokens sent.
    pub input_tokens: u64,
    /// Tokens received.
    pub output_tokens: u64,
}

impl AdvisorTokens {
    fn add(&mut self, usage: Option<Usage>) {
        // Saturating: records stored before token counts were bounded may hold any
        // number, and a sum must never wrap around to a small one.
        self.consultations = self.consultations.saturating_add(1);
        if let Some(u) = usage {
            self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
            self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        }
    }
}

/// Derive the status of the task whose records are `records` (any order).
///
/// One pass in sequence order touches each record once, while it is in the cache: a record
/// refers only to records before it, so its assessment (and plan, disagreement or
/// conclusion) already has its line to add to. Then the states are computed from the lines.
///
/// A record the hash chain does not vouch for (`trust`) is marked `unverified` in the
/// timeline and in its line, and counts for nothing: it does not move an assessment's
/// state, and a consultation or conclusion after a break reviews nothing.
///
/// The pass is a [`StatusIndex`] fed every record once; a process that asks again (the
/// daemon) keeps the index and feeds it only the records written since.
pub fn status(records: &[Record], trust: &Trust) -> StatusView {
    let mut ordered: Vec<&Record> = records.iter().collect();
    ordered.sort_by_key(|r| r.envelope.sequence);
    let mut index = StatusIndex::default();
    index.catch_up_borrowed(&ordered, trust, Judged::of(trust, ""));
    let mut view = index.into_view(&ordered, trust);
    view.track_records = crate::core::track::tally(&crate::core::track::settled_in(records, trust));
    view
}

/// What the lines of a [`StatusIndex`] were derived under: where the hash chain breaks,
/// whether this machine vouches for the task, and the pins the attestations were judged
/// under (the caller's fingerprint of them). A record's verdict never changes while these
/// hold (a record read afresh starts a new index), so the lines of the records taken stay
/// true; when one changes, every line is derived again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    broken_at: Option<u64>,
    foreign: bool,
    attestations: String,
}

impl Judged {
    /// What `trust` judges, with the attestations judged under the pins `attestations`.
    pub fn of(trust: &Trust, attestations: &str) -> Judged {
        Judged {
            broken_at: trust.state.as_ref().and_then(|s| s.broken_at),
            foreign: trust.foreign().is_some(),
            attestations: attestations.to_string(),
        }
    }
}

/// A task's status kept up to date as its records arrive: the line of every assessment
/// (without its state, computed when shown), the token totals and the counters, fed each
/// record once in sequence order ([`StatusIndex::catch_up`]). A view of it
/// ([`StatusIndex::view`]) materialises only the assessments and timeline entries of the
/// page asked for, so the cockpit's first page costs the page, not the task; its totals
/// (`records`, `unattested`, `tokens`, `spend`, `track_records`, the page's `total`) are
/// those of the whole task, exactly as [`status`] derives them.
#[derive(Default)]
pub struct StatusIndex<'r> {
    /// What the lines were derived under (`None`: nothing taken yet).
    judged: Option<Judged>,
    /// How many records (in sequence order) were taken.
    fed: usize,
    /// The id of the last record taken: the records handed next must start with the
    /// same ones, or the index starts again.
    last: Option<String>,
    /// The task (from its first record).
    task: Option<String>,
    /// Each assessment's line, in sequence order; `state` and `superseded_by` are set
    /// when shown.
    assessments: Vec<AssessmentStatus>,
    /// Per assessment: a completed consultation of it diverges.
    diverges: Vec<bool>,
    tokens: TokenTotals,
    /// How many records carry no valid attestation.
    unattested: usize,
    /// Consultation id → its place among the records (what a conclusion's review counts,
    /// and the advisor a source names).
    consultations: HashMap<Cow<'r, str>, usize>,
    /// Assessment id → its index in `assessments`.
    assessment_at: HashMap<Cow<'r, str>, usize>,
    /// Plan id → its assessment's index.
    plan_at: HashMap<Cow<'r, str>, usize>,
    /// Disagreement id → (assessment index, disagreement index).
    disagreement_at: HashMap<Cow<'r, str>, (usize, usize)>,
    /// Conclusion id → (assessment index, conclusion index).
    conclusion_at: HashMap<Cow<'r, str>, (usize, usize)>,
    /// Whether a resolution was taken (only then has the task track records).
    resolved: bool,
    /// The resolutions that count, fed the verified records up to `ledger_fed`.
    ledger: crate::core::track::TaskLedger,
    ledger_fed: usize,
    /// The task's spend at the prices it was last priced at (per advisor of `tokens`, in
    /// order), until a consultation line is added.
    priced: Option<(Vec<Option<Option<Pricing>>>, TaskSpend)>,
}

impl StatusIndex<'static> {
    /// Take the records of `records` (the task's, in sequence order) not taken yet, judged
    /// by `trust` as `judged` says. Records that are not those taken before followed by
    /// new ones (the task read afresh), or another judgement, start the index again. The
    /// index owns what it keeps, so it outlives `records` (a store keeps it).
    pub fn catch_up<R: Borrow<Record>>(&mut self, records: &[R], trust: &Trust, judged: Judged) {
        self.catch_up_with(records, trust, judged, |id| Cow::Owned(id.to_string()));
    }
}

impl<'r> StatusIndex<'r> {
    /// [`StatusIndex::catch_up`] for an index that lives no longer than `records`: it
    /// borrows their ids instead of copying them (what one derivation needs).
    fn catch_up_borrowed<R: Borrow<Record>>(
        &mut self,
        records: &'r [R],
        trust: &Trust,
        judged: Judged,
    ) {
        self.catch_up_with(records, trust, judged, Cow::Borrowed);
    }

    /// Take the records not taken yet, each id kept as `key` makes it.
    fn catch_up_with<'s, R: Borrow<Record>>(
        &mut self,
        records: &'s [R],
        trust: &Trust,
        judged: Judged,
        key: impl Fn(&'s str) -> Cow<'r, str>,
    ) {
        let same = self.fed <= records.len()
            && match self.fed {
                0 => true,
                n => self.last.as_deref() == Some(records[n - 1].borrow().id()),
            };
        if !same || self.judged.as_ref() != Some(&judged) {
            *self = StatusIndex {
                judged: Some(judged),
                ..StatusIndex::default()
            };
        }
        if self.fed == records.len() {
            return;
        }
        if self.fed == 0 {
            self.task = records.first().map(|r| r.borrow().envelope.task.clone());
        }
        for at in self.fed..records.len() {
            self.take(records, at, trust, &key);
        }
        self.fed = records.len();
        self.last = records.last().map(|r| r.borrow().id().to_string());
    }

    /// The advisor of every consultation taken, once each, in order.
    pub fn advisors(&self) -> impl Iterator<Item = &str> {
        self.tokens.advisors.keys().map(String::as_str)
    }

    /// The task's spend at `prices` (one per advisor of [`StatusIndex::advisors`]):
    /// kept from the last time while neither the prices nor the consultations changed,
    /// else `derive`d from every assessment's line, in order.
    pub fn spend_at(
        &mut self,
        prices: Vec<Option<Option<Pricing>>>,
        derive: impl FnOnce(&[AssessmentStatus]) -> TaskSpend,
    ) -> &TaskSpend {
        if self.priced.as_ref().is_none_or(|(p, _)| *p != prices) {
            self.priced = Some((prices, derive(&self.assessments)));
        }
        &self.priced.as_ref().expect("priced just now").1
    }

    /// The status of the records taken (`records` are those handed to
    /// [`StatusIndex::catch_up`]): every assessment and timeline entry, or with `window`
    /// (`offset`, `limit`) only `offset..offset + limit` of each, as
    /// [`StatusView::page`] keeps them, the totals those of the whole task.
    pub fn view<R: Borrow<Record>>(
        &mut self,
        records: &[R],
        trust: &Trust,
        window: Option<(usize, usize)>,
    ) -> StatusView {
        let (range, page) = match window {
            None => (0..self.assessments.len(), None),
            Some((offset, limit)) => window_of(self.assessments.len(), offset, limit),
        };
        let assessments = self.assessments[range.clone()]
            .iter()
            .zip(&self.diverges[range])
            .map(|(line, &diverges)| finished(line.clone(), diverges))
            .collect();
        let (entries, timeline_total) = match window {
            None => (0..records.len(), None),
            Some((offset, limit)) => {
                let (entries, page) = window_of(records.len(), offset, limit);
                (entries, page.map(|p| p.total))
            }
        };
        let timeline = entries.map(|at| self.entry(records, at, trust)).collect();
        let track_records = self.track_records(records, trust);
        let mut view = self.totals(records.len(), trust, assessments, timeline);
        view.page = page;
        view.timeline_total = timeline_total;
        view.track_records = track_records;
        view
    }

    /// The whole status, the index spent (its lines moved into the view).
    fn into_view<R: Borrow<Record>>(mut self, records: &[R], trust: &Trust) -> StatusView {
        let timeline = (0..records.len())
            .map(|at| self.entry(records, at, trust))
            .collect();
        let lines = std::mem::take(&mut self.assessments);
        let diverges = std::mem::take(&mut self.diverges);
        let assessments = lines
            .into_iter()
            .zip(diverges)
            .map(|(line, diverges)| finished(line, diverges))
            .collect();
        self.totals(records.len(), trust, assessments, timeline)
    }

    /// The view around `assessments` and `timeline`, with the task's totals.
    fn totals(
        &self,
        records: usize,
        trust: &Trust,
        assessments: Vec<AssessmentStatus>,
        timeline: Vec<TimelineEntry>,
    ) -> StatusView {
        StatusView {
            task: self.task.clone(),
            records,
            chain: trust.state.clone(),
            trust: trust.task_trust(),
            foreign: trust.foreign().map(str::to_string),
            unattested: self.unattested,
            assessments,
            timeline,
            tokens: self.tokens.clone(),
            spend: None,
            page: None,
            timeline_total: None,
            track_records: BTreeMap::new(),
            resting_on_superseded: Vec::new(),
            journal: None,
        }
    }

    /// Each advisor's track record in the task: the resolutions of its verified records
    /// (none without a resolution), the ledger fed only the records new since.
    fn track_records<R: Borrow<Record>>(
        &mut self,
        records: &[R],
        trust: &Trust,
    ) -> BTreeMap<String, crate::core::track::TrackRecord> {
        if !self.resolved {
            return BTreeMap::new();
        }
        for record in &records[self.ledger_fed..self.fed] {
            let record = record.borrow();
            if trust.is_verified(record.id()) {
                self.ledger.feed(record);
            }
        }
        self.ledger_fed = self.fed;
        crate::core::track::tally(self.ledger.settled())
    }

    /// The timeline entry of record `at`.
    fn entry<R: Borrow<Record>>(&self, records: &[R], at: usize, trust: &Trust) -> TimelineEntry {
        let record = records[at].borrow();
        TimelineEntry {
            sequence: record.envelope.sequence,
            created_at: record.envelope.created_at.clone(),
            kind: record.kind(),
            id: record.id().to_string(),
            // The advisors of the consultations before it, as the pass saw them.
            summary: summary(record, |id| self.advisor_before(records, id, at)),
            unverified: !trust.is_verified(record.id()),
        }
    }

    /// The advisor of consultation `id` when it comes before record `at`.
    fn advisor_before<'s, R: Borrow<Record>>(
        &self,
        records: &'s [R],
        id: &str,
        at: usize,
    ) -> Option<&'s str> {
        let &place = self.consultations.get(id).filter(|&&p| p < at)?;
        match &records[place].borrow().body {
            Body::Consultation(c) => Some(c.advisor.as_str()),
            _ => None,
        }
    }

    /// Take record `at` of `records` (every record before it taken).
    fn take<'s, R: Borrow<Record>>(
        &mut self,
        records: &'s [R],
        at: usize,
        trust: &Trust,
        key: &impl Fn(&'s str) -> Cow<'r, str>,
    ) {
        let record = records[at].borrow();
        let verified = trust.is_verified(record.id());
        if trust.unattested(record.id()).is_some() {
            self.unattested += 1;
        }
        match &record.body {
            Body::Consultation(_) => {
                self.consultations.insert(key(record.id()), at);
            }
            Body::Resolution(_) => self.resolved = true,
            _ => {}
        }
        self.add(records, record, verified, trust, key);
    }

    /// Add `record` to the line of what it refers to. A record whose reference names
    /// nothing before it (impossible through the writer) is left to the timeline alone, and
    /// so is one the chain does not vouch for, unless it is a consultation or a conclusion
    /// (shown in its line, marked, counting for nothing).
    fn add<'s, R: Borrow<Record>>(
        &mut self,
        records: &'s [R],
        record: &'s Record,
        verified: bool,
        trust: &Trust,
        key: &impl Fn(&'s str) -> Cow<'r, str>,
    ) {
        let (id, sequence) = (record.id(), record.envelope.sequence);
        if !verified && !matches!(record.body, Body::Consultation(_) | Body::Conclusion(_)) {
            return;
        }
        match &record.body {
            Body::Assessment(a) => {
                self.assessment_at.insert(key(id), self.assessments.len());
                self.assessments.push(assessment_line(record, a));
                self.diverges.push(false);
            }
            Body::Plan(plan) => {
                let Some(&at) = self.assessment_at.get(plan.assessment.as_str()) else {
                    return;
                };
                self.plan_at.insert(key(id), at);
                self.assessments[at].plans.push(PlanLine {
                    id: id.to_string(),
                    sequence,
                    mode: plan.mode,
                    budget: plan.budget,
                    selected: plan.selected.iter().map(|s| s.advisor.clone()).collect(),
                    reuse: plan.reuse.clone(),
                    local_review: !plan.local_review.is_empty(),
                });
            }
            Body::Consultation(c) => {
                // Looked up first: the key is copied once per advisor, not per record.
                match self.tokens.advisors.get_mut(&c.advisor) {
                    Some(tokens) => tokens.add(c.usage),
                    None => self
                        .tokens
                        .advisors
                        .entry(c.advisor.clone())
                        .or_default()
                        .add(c.usage),
                }
                self.tokens.total.add(c.usage);
                let Some(&at) = self.plan_at.get(c.plan.as_str()) else {
                    return;
                };
                self.diverges[at] |= verified
                    && c.status == ConsultationStatus::Completed
                    && c.stance.is_some_and(Stance::diverges);
                self.priced = None;
                self.assessments[at].consultations.push(ConsultationLine {
                    id: id.to_string(),
                    sequence,
                    plan: c.plan.clone(),
                    advisor: c.advisor.clone(),
                    status: c.status,
                    stance: c.stance,
                    failure: c.failure,
                    diagnostic: c.diagnostic.clone(),
                    duration_ms: c.duration_ms,
                    usage: c.usage,
                    unverified: !verified,
                    unattested: trust.unattested(id).is_some(),
                    cost: None,
                });
            }
            Body::Disagreement(d) => {
                let Some(&at) = self.assessment_at.get(d.assessment.as_str()) else {
                    return;
                };
                let positions = d
                    .positions
                    .iter()
                    .map(|p| self.source_name(records, &p.source).to_string())
                    .collect();
                let lines = &mut self.assessments[at].disagreements;
                self.disagreement_at.insert(key(id), (at, lines.len()));
                lines.push(DisagreementLine {
                    id: id.to_string(),
                    sequence,
                    positions,
                    discriminating_question: d.discriminating_question.clone(),
                    resolved: false,
                    resolutions: Vec::new(),
                });
            }
            Body::Resolution(r) => {
                let Some(&(at, i)) = self.disagreement_at.get(r.disagreement.as_str()) else {
                    return;
                };
                let favours = self.source_name(records, &r.favours).to_string();
                let line = &mut self.assessments[at].disagreements[i];
                line.resolved = true;
                line.resolutions.push(ResolutionLine {
                    id: id.to_string(),
                    sequence,
                    favours,
                    observed: r.observed.clone(),
                });
            }
            Body::Conclusion(c) => {
                let Some(&at) = self.assessment_at.get(c.assessment.as_str()) else {
                    return;
                };
                if let Some(&(old_at, old)) = c
                    .supersedes
                    .as_deref()
                    .filter(|_| verified)
                    .and_then(|old| self.conclusion_at.get(old))
                {
                    // The first conclusion to name it supersedes it.
                    let old = &mut self.assessments[old_at].conclusions[old];
                    old.superseded_by.get_or_insert_with(|| id.to_string());
                }
                let review = credited_review(record, trust, |cited| {
                    self.consultations.get(cited).map(|&p| records[p].borrow())
                });
                let lines = &mut self.assessments[at].conclusions;
                if verified {
                    self.conclusion_at.insert(key(id), (at, lines.len()));
                }
                lines.push(ConclusionLine {
                    id: id.to_string(),
                    sequence,
                    decision: c.decision.clone(),
                    independent_review_count: review.independent_review_count,
                    reviewed_by: review.reviewed_by,
                    unverified: !verified,
                    supersedes: c.supersedes.clone(),
                    superseded_by: None,
                    validation: ValidationState::NotValidated,
                    validations: 0,
                    rests_on_superseded: Vec::new(),
                });
            }
            Body::Validation(v) => {
                let Some(&(at, i)) = self.conclusion_at.get(v.conclusion.as_str()) else {
                    return;
                };
                // Records come in sequence order: the last one seen is the newest.
                let line = &mut self.assessments[at].conclusions[i];
                line.validations += 1;
                line.validation = if v.passed {
                    ValidationState::Passed
                } else {
                    ValidationState::Failed
                };
            }
            Body::Attempt(a) => {
                let Some(&at) = self.assessment_at.get(a.assessment.as_str()) else {
                    return;
                };
                self.assessments[at].attempts.push(AttemptLine {
                    id: id.to_string(),
                    sequence,
                    tried: a.tried.clone(),
                });
            }
            Body::Invariant(_) => {}
        }
    }

    /// `executor`, `neither`, or the advisor of the consultation a source names.
    fn source_name<'s, R: Borrow<Record>>(&self, records: &'s [R], source: &'s str) -> &'s str {
        match self
            .consultations
            .get(source)
            .map(|&p| &records[p].borrow().body)
        {
            Some(Body::Consultation(c)) => c.advisor.as_str(),
            _ => source,
        }
    }
}

/// The range of a list of `total` that `offset` and `limit` keep, and the page it is (as
/// [`super::Page::slice`] keeps it).
fn window_of(
    total: usize,
    offset: usize,
    limit: usize,
) -> (std::ops::Range<usize>, Option<super::Page>) {
    let start = offset.min(total);
    let end = start.saturating_add(limit).min(total);
    (
        start..end,
        Some(super::Page {
            offset,
            limit,
            total,
        }),
    )
}

/// An assessment's line with its state and, when every conclusion on it is superseded,
/// what replaced the newest.
fn finished(mut line: AssessmentStatus, diverges: bool) -> AssessmentStatus {
    line.state = state_of(&line, diverges);
    if line.conclusions.iter().all(|c| c.superseded_by.is_some()) {
        line.superseded_by = line
            .conclusions
            .last()
            .and_then(|c| c.superseded_by.clone());
    }
    line
}

fn assessment_line(record: &Record, assessment: &Assessment) -> AssessmentStatus {
    AssessmentStatus {
        id: record.id().to_string(),
        sequence: record.envelope.sequence,
        created_at: record.envelope.created_at.clone(),
        subject: assessment.subject.clone(),
        materiality: assessment.materiality,
        confidence: assessment.confidence,
        state: State::Open,
        superseded_by: None,
        rests_on_superseded: Vec::new(),
        plans: Vec::new(),
        consultations: Vec::new(),
        disagreements: Vec::new(),
        conclusions: Vec::new(),
        attempts: Vec::new(),
    }
}

/// The state of an assessment from its lines (see the module documentation).
fn state_of(view: &AssessmentStatus, diverges: bool) -> State {
    let open_dispute = view.disagreements.iter().any(|d| !d.resolved);
    let concluded = view.conclusions.iter().any(|c| !c.unverified);
    let undeclared_dispute = diverges && !concluded && view.disagreements.is_empty();
    if open_dispute || undeclared_dispute {
        return State::Disputed;
    }
    let standing = view
        .conclusions
        .iter()
        .rev()
        .find(|c| c.superseded_by.is_none() && !c.unverified);
    if standing.is_some_and(|c| c.validation == ValidationState::Passed) {
        State::Validated
    } else if concluded {
        State::Concluded
    } else if !view.plans.is_empty() {
        State::Planned
    } else {
        State::Open
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::super::testing::Task;
    use super::*;
    use crate::core::views::test_support::broken_at;

    /// Build a task with `build`, and expect the state of its first assessment.
    fn check(build: impl FnOnce(&mut Task, &str), expected: State) {
        let mut task = Task::new();
        let a = task.assessment("subject");
        build(&mut task, &a);
        let view = status(&task.records, &Trust::default());
        assert_eq!(
            view.assessments[0].state, expected,
            "{:#?}",
            view.assessments[0]
        );
    }

    #[test]
    fn open_without_a_plan() {
        check(|_, _| {}, State::Open);
    }

    #[test]
    fn planned_with_a_plan_and_no_conclusion() {
        check(
            |t, a| {
                let p = t.plan(a, &["x"]);
                t.completed(&p, "x", "supports");
            },
            State::Planned,
        );
    }

    #[test]
    fn a_failed_consultation_does_not_dispute() {
        check(
            |t, a| {
                let p = t.plan(a, &["x"]);
                t.failed(&p, "x", "timeout");
            },
            State::Planned,
        );
    }

    #[test]
    fn disputed_by_an_unresolved_disagreement() {
        check(
            |t, a| {
                let p = t.plan(a, &["x"]);
                let c = t.completed(&p, "x", "opposes");
                t.disagreement(a, &c);
            },
            State::Disputed,
        );
    }

    #[test]
    fn disputed_by_a_divergent_answer_before_any_disagreement() {
        for stance in ["opposes", "alternative"] {
            check(
                |t, a| {
                    let p = t.plan(a, &["x"]);
                    t.completed(&p, "x", stance);
                },
                State::Disputed,
            );
        }
    }

    #[test]
    fn an_inconclusive_answer_does_not_dispute() {
        check(
            |t, a| {
                let p = t.plan(a, &["x"]);
                t.completed(&p, "x", "inconclusive");
            },
            State::Planned,
        );
    }

    #[test]
    fn a_resolved_disagreement_leaves_it_planned() {
        check(
            |t, a| {
                let p = t.plan(a, &["x"]);
                let c = t.completed(&p, "x", "opposes");
                let d = t.disagreement(a, &c);
                t.resolution(&d);
            },
            State::Planned,
        );
    }

    #[test]
    fn disputed_wins_over_a_conclusion() {
        check(
            |t, a| {
                let p = t.plan(a, &["x"]);
                let c = t.completed(&p, "x", "opposes");
                let d = t.disagreement(a, &c);
                t.resolution(&d);
                t.conclusion(a, &[&c], None);
                t.disagreement(a, &c);
            },
            State::Disputed,
        );
    }

    #[test]
    fn concluded_without_validation() {
        check(
            |t, a| {
                t.conclusion(a, &[], None);
            },
            State::Concluded,
        );
    }

    #[test]
    fn validated_when_the_newest_validation_passed() {
        check(
            |t, a| {
                let c = t.conclusion(a, &[], None);
                t.validation(&c, false);
                t.validation(&c, true);
            },
            State::Validated,
        );
    }

    #[test]
    fn a_failed_newest_validation_shows_concluded() {
        let mut task = Task::new();
        let a = task.assessment("subject");
        let c = task.conclusion(&a, &[], None);
        task.validation(&c, true);
        task.validation(&c, false);
        let view = status(&task.records, &Trust::default());
        assert_eq!(view.assessments[0].state, State::Concluded);
        let conclusion = &view.assessments[0].conclusions[0];
        assert_eq!(conclusion.validation, ValidationState::Failed);
        assert_eq!(conclusion.validations, 2);
    }

    #[test]
    fn superseded_conclusions_are_marked_and_the_old_assessment_stays_concluded() {
        let mut task = Task::new();
        let old_a = task.assessment("subject");
        let old_c = task.conclusion(&old_a, &[], None);
        task.validation(&old_c, true);
        let new_a = task.assessment("subject");
        let new_c = task.conclusion(&new_a, &[], Some(&old_c));
        let view = status(&task.records, &Trust::default());
        let old = &view.assessments[0];
        assert_eq!(
            old.state,
            State::Concluded,
            "a superseded validation no longer counts"
        );
        assert_eq!(old.superseded_by.as_deref(), Some(new_c.as_str()));
        assert_eq!(
            old.conclusions[0].superseded_by.as_deref(),
            Some(new_c.as_str())
        );
        let new = &view.assessments[1];
        assert_eq!(new.state, State::Concluded);
        assert_eq!(new.superseded_by, None);
        assert_eq!(
            new.conclusions[0].supersedes.as_deref(),
            Some(old_c.as_str())
        );
    }

    #[test]
    fn timeline_tokens_and_lines() {
        let mut task = Task::new();
        let a = task.assessment("subject");
        let p = task.plan(&a, &["x", "y"]);
        let cx = task.completed(&p, "x", "opposes");
        task.failed(&p, "y", "rate_limited");
        let d = task.disagreement(&a, &cx);
        task.resolution(&d);
        // Input in reverse: the view orders by sequence itself.
        let mut records = task.records.clone();
        records.reverse();
        let view = status(&records, &Trust::default());
        assert_eq!(view.task.as_deref(), Some("t"));
        assert_eq!(view.records, 6);
        let sequences: Vec<u64> = view.timeline.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, [1, 2, 3, 4, 5, 6]);
        assert_eq!(view.timeline[2].summary, "x completed: opposes");
        assert_eq!(view.timeline[3].summary, "y failed: rate_limited");
        assert_eq!(view.timeline[5].summary, "favours executor: o");
        assert_eq!(view.tokens.total.consultations, 2);
        assert_eq!(view.tokens.total.input_tokens, 100);
        assert_eq!(view.tokens.advisors["x"].output_tokens, 20);
        assert_eq!(view.tokens.advisors["y"].input_tokens, 0);
        let status = &view.assessments[0];
        assert_eq!(status.plans[0].selected, ["x", "y"]);
        assert_eq!(status.consultations.len(), 2);
        assert_eq!(status.disagreements[0].positions, ["executor", "x"]);
        assert_eq!(status.disagreements[0].resolutions[0].favours, "executor");
        assert_eq!(status.state, State::Planned);
    }

    /// Token totals never wrap around, whatever counts old records hold.
    #[test]
    fn token_totals_never_wrap_around() {
        let mut total = AdvisorTokens::default();
        for (input, output) in [(u64::MAX, 1), (2, u64::MAX), (5, 5)] {
            total.add(Some(Usage {
                input_tokens: input,
                output_tokens: output,
            }));
        }
        assert_eq!(
            (total.consultations, total.input_tokens, total.output_tokens),
            (3, u64::MAX, u64::MAX)
        );
    }

    /// A task touching every line: plans, consultations (completed, failed, diverging),
    /// a disagreement resolved for an advisor, conclusions (one superseded, one validated),
    /// an attempt, and assessments left open.
    fn every_kind() -> Task {
        let mut t = Task::new();
        let a1 = t.assessment("first subject");
        let p1 = t.plan(&a1, &["x", "y"]);
        let cx = t.completed(&p1, "x", "opposes");
        t.failed(&p1, "y", "timeout");
        let d = t.disagreement(&a1, &cx);
        t.add(
            "resolution",
            serde_json::json!({"disagreement": d, "experiment": "e", "observed": "o",
                               "favours": cx, "evidence": [{"kind": "test", "ref": "t"}]}),
        );
        let c1 = t.conclusion(&a1, &[&cx], None);
        t.validation(&c1, true);
        let a2 = t.assessment("second subject");
        t.assessment("third, open");
        let p2 = t.plan(&a2, &["y"]);
        let cy = t.completed(&p2, "y", "supports");
        let c2 = t.conclusion(&a2, &[&cy], Some(&c1));
        t.validation(&c2, false);
        t.add(
            "attempt",
            serde_json::json!({"assessment": a2, "tried": "the other way",
                               "failure_observed": "it broke"}),
        );
        let a4 = t.assessment("fourth subject");
        let p4 = t.plan(&a4, &["x"]);
        t.completed(&p4, "x", "alternative");
        t.assessment("fifth, open");
        t
    }

    /// A catalogue pricing `x` by the token and `y` at a flat rate.
    fn priced_catalogue() -> crate::core::catalogue::Catalogue {
        let text = "advisors:
  - {id: x, title: X, transport: process, adapter: process, executable: x,
     capabilities: [independent_reasoning],
     price: {currency: USD, input_per_million: 3, output_per_million: 15, as_of: 2026-12-01}}
  - {id: y, title: Y, transport: process, adapter: process, executable: y,
     capabilities: [independent_reasoning], price: flat_rate}
";
        crate::core::catalogue::Catalogue::parse(
            text,
            "test.yaml",
            &crate::core::catalogue::accept_any_settings,
        )
        .expect("a valid catalogue")
    }

    /// The whole view, priced, cut by hand as the daemon cut it before pages were derived
    /// on their own.
    fn cut(records: &[Record], trust: &Trust, offset: usize, limit: usize) -> StatusView {
        let mut whole = status(records, trust);
        crate::core::views::priced::price_status(&mut whole, &priced_catalogue());
        whole.page(offset, limit);
        whole
    }

    /// A page of `index`, priced as the service prices it.
    fn page_of(
        index: &mut StatusIndex,
        records: &[Record],
        trust: &Trust,
        window: Option<(usize, usize)>,
    ) -> StatusView {
        let mut view = index.view(records, trust, window);
        crate::core::views::priced::price_status_of(index, &mut view, &priced_catalogue());
        view
    }

    const WINDOWS: [(usize, usize); 9] = [
        (0, 2),
        (1, 3),
        (0, 50),
        (4, 1),
        (5, 1),
        (3, 0),
        (12, 10),
        (100, 5),
        (2, usize::MAX),
    ];

    /// Every page of the index is the whole view cut by hand, byte for byte, whatever the
    /// trust (whole, broken, with unattested consultations), including pages past the end.
    #[test]
    fn a_page_is_the_whole_view_cut_by_hand() {
        let task = every_kind();
        let records = &task.records;
        let mut attestations = crate::core::chain::Attestations::under_pins("pins".to_string());
        let unattested = records
            .iter()
            .find(|r| matches!(r.body, Body::Consultation(_)))
            .expect("a consultation")
            .id();
        attestations.unattested(unattested, "is not signed".to_string());
        let trusts = [
            Trust::default(),
            broken_at(records, 9),
            broken_at(records, 3),
            Trust::default().with_attestations(std::sync::Arc::new(attestations)),
        ];
        for trust in &trusts {
            let mut index = StatusIndex::default();
            index.catch_up(records, trust, Judged::of(trust, "pins"));
            for (offset, limit) in WINDOWS {
                let page = page_of(&mut index, records, trust, Some((offset, limit)));
                let expected = cut(records, trust, offset, limit);
                assert_eq!(page, expected, "{offset}+{limit}");
                assert_eq!(
                    serde_json::to_vec(&page).expect("serialises"),
                    serde_json::to_vec(&expected).expect("serialises"),
                    "{offset}+{limit}"
                );
            }
            // Unpaged, the index gives the whole view.
            let mut whole = status(records, trust);
            crate::core::views::priced::price_status(&mut whole, &priced_catalogue());
            assert_eq!(page_of(&mut index, records, trust, None), whole);
        }
    }

    /// An index fed record by record (a page asked after each) gives what one fed the
    /// whole task at once does; a task read afresh or judged otherwise starts it again.
    #[test]
    fn an_index_caught_up_record_by_record_is_the_whole_view() {
        let task = every_kind();
        let records = &task.records;
        let trust = Trust::default();
        let mut index = StatusIndex::default();
        for n in 1..=records.len() {
            index.catch_up(&records[..n], &trust, Judged::of(&trust, ""));
            for (offset, limit) in WINDOWS {
                let page = page_of(&mut index, &records[..n], &trust, Some((offset, limit)));
                assert_eq!(
                    page,
                    cut(&records[..n], &trust, offset, limit),
                    "{n} records, {offset}+{limit}"
                );
            }
        }
        // Other records than those taken (the task read afresh, shorter): started again.
        let mut other = Task::new();
        other.assessment("another task");
        index.catch_up(&other.records, &trust, Judged::of(&trust, ""));
        assert_eq!(
            page_of(&mut index, &other.records, &trust, Some((0, 5))),
            cut(&other.records, &trust, 0, 5)
        );
        // The same records judged otherwise (the chain found broken): started again.
        index.catch_up(records, &trust, Judged::of(&trust, ""));
        let broken = broken_at(records, 9);
        index.catch_up(records, &broken, Judged::of(&broken, ""));
        assert_eq!(
            page_of(&mut index, records, &broken, Some((0, 3))),
            cut(records, &broken, 0, 3)
        );
        // Other prices: the spend is derived again.
        let mut view = index.view(records, &broken, Some((0, 1)));
        let cheap = crate::core::catalogue::Catalogue::parse(
            "advisors: []\n",
            "empty.yaml",
            &crate::core::catalogue::accept_any_settings,
        )
        .expect("a catalogue");
        crate::core::views::priced::price_status_of(&mut index, &mut view, &cheap);
        let mut whole = status(records, &broken);
        crate::core::views::priced::price_status(&mut whole, &cheap);
        assert_eq!(view.spend, whole.spend);
        // The two consultations before the break, whose plans are shown.
        assert_eq!(view.spend.expect("a spend").total.unknown, 2);
    }

    #[test]
    fn an_empty_task() {
        let view = status(&[], &Trust::default());
        assert_eq!(view.task, None);
        assert!(view.assessments.is_empty() && view.timeline.is_empty());
        assert_eq!(view.tokens.total, AdvisorTokens::default());
    }
}
