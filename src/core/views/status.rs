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
use crate::core::chain::{ChainState, TaskTrust, Trust};
use crate::core::cost::{Cost, Spend};
use crate::core::records::{
    Assessment, Body, Confidence, ConsultationStatus, FailureKind, Kind, Materiality, Mode, Record,
    Stance, Usage,
};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
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
pub fn status(records: &[Record], trust: &Trust) -> StatusView {
    let mut ordered: Vec<&Record> = records.iter().collect();
    ordered.sort_by_key(|r| r.envelope.sequence);
    let mut pass = Pass {
        trust,
        by_id: HashMap::default(),
        assessments: Vec::new(),
        diverges: Vec::new(),
        tokens: TokenTotals::default(),
        advisors: HashMap::default(),
        assessment_at: HashMap::default(),
        plan_at: HashMap::default(),
        disagreement_at: HashMap::default(),
        conclusion_at: HashMap::default(),
    };
    let mut timeline = Vec::with_capacity(ordered.len());
    for &record in &ordered {
        let verified = trust.is_verified(record.id());
        timeline.push(TimelineEntry {
            sequence: record.envelope.sequence,
            created_at: record.envelope.created_at.clone(),
            kind: record.kind(),
            id: record.id().to_string(),
            summary: summary(record, |id| pass.advisors.get(id).copied()),
            unverified: !verified,
        });
        if matches!(record.body, Body::Consultation(_)) {
            pass.by_id.insert(record.id(), record);
        }
        pass.add(record, verified);
    }
    let mut assessments = pass.assessments;
    for (assessment, diverges) in assessments.iter_mut().zip(pass.diverges) {
        assessment.state = state_of(assessment, diverges);
        if assessment
            .conclusions
            .iter()
            .all(|c| c.superseded_by.is_some())
        {
            assessment.superseded_by = assessment
                .conclusions
                .last()
                .and_then(|c| c.superseded_by.clone());
        }
    }
    StatusView {
        task: ordered.first().map(|r| r.envelope.task.clone()),
        records: records.len(),
        chain: trust.state.clone(),
        trust: trust.task_trust(),
        foreign: trust.foreign().map(str::to_string),
        unattested: records
            .iter()
            .filter(|r| trust.unattested(r.id()).is_some())
            .count(),
        assessments,
        timeline,
        tokens: pass.tokens,
        spend: None,
        page: None,
        timeline_total: None,
        track_records: crate::core::track::tally(&crate::core::track::settled_in(records, trust)),
        resting_on_superseded: Vec::new(),
        journal: None,
    }
}

/// What the pass of [`status`] has gathered so far, with where each line went.
struct Pass<'r, 't> {
    trust: &'t Trust,
    /// The consultations seen so far, by id: what a conclusion's review counts (a cited
    /// id of another kind counts for nothing either way).
    by_id: HashMap<&'r str, &'r Record>,
    assessments: Vec<AssessmentStatus>,
    /// Per assessment: a completed consultation of it diverges.
    diverges: Vec<bool>,
    tokens: TokenTotals,
    /// Consultation id → advisor.
    advisors: HashMap<&'r str, &'r str>,
    /// Assessment id → its index in `assessments`.
    assessment_at: HashMap<&'r str, usize>,
    /// Plan id → its assessment's index.
    plan_at: HashMap<&'r str, usize>,
    /// Disagreement id → (assessment index, disagreement index).
    disagreement_at: HashMap<&'r str, (usize, usize)>,
    /// Conclusion id → (assessment index, conclusion index).
    conclusion_at: HashMap<&'r str, (usize, usize)>,
}

impl<'r> Pass<'r, '_> {
    /// Add `record` to the line of what it refers to. A record whose reference names
    /// nothing before it (impossible through the writer) is left to the timeline alone, and
    /// so is one the chain does not vouch for, unless it is a consultation or a conclusion
    /// (shown in its line, marked, counting for nothing).
    fn add(&mut self, record: &'r Record, verified: bool) {
        let (id, sequence) = (record.id(), record.envelope.sequence);
        if !verified && !matches!(record.body, Body::Consultation(_) | Body::Conclusion(_)) {
            return;
        }
        match &record.body {
            Body::Assessment(a) => {
                self.assessment_at.insert(id, self.assessments.len());
                self.assessments.push(assessment_line(record, a));
                self.diverges.push(false);
            }
            Body::Plan(plan) => {
                let Some(&at) = self.assessment_at.get(plan.assessment.as_str()) else {
                    return;
                };
                self.plan_at.insert(id, at);
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
                self.advisors.insert(id, &c.advisor);
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
                    unattested: self.trust.unattested(id).is_some(),
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
                    .map(|p| self.source_name(&p.source).to_string())
                    .collect();
                let lines = &mut self.assessments[at].disagreements;
                self.disagreement_at.insert(id, (at, lines.len()));
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
                let favours = self.source_name(&r.favours).to_string();
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
                let by_id = &self.by_id;
                let review = credited_review(record, self.trust, |id| by_id.get(id).copied());
                let lines = &mut self.assessments[at].conclusions;
                if verified {
                    self.conclusion_at.insert(id, (at, lines.len()));
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
    fn source_name<'s>(&'s self, source: &'s str) -> &'s str {
        self.advisors.get(source).copied().unwrap_or(source)
    }
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

    #[test]
    fn an_empty_task() {
        let view = status(&[], &Trust::default());
        assert_eq!(view.task, None);
        assert!(view.assessments.is_empty() && view.timeline.is_empty());
        assert_eq!(view.tokens.total, AdvisorTokens::default());
    }
}
