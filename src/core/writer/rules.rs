//! The rules of each kind that look across the task's records: references, the
//! consultation, disagreement and conclusion refusals, and the computed review.

use super::fields::{a, listed};
use super::{refuse, ReasonCode, Refusal};
use crate::core::chain::trust::Trust;
use crate::core::invariants::{self, InForce, TaskInvariants};
use crate::core::policy;
use crate::core::records::{
    Assessment, Body, Conclusion, Consultation, ConsultationStatus, Disagreement, Invariant,
    InvariantAction, Kind, Plan, Record, Resolution, TaskName, EXECUTOR, NEITHER,
};
use rustc_hash::{FxHashMap, FxHashSet};

/// What the rules look up in a task's records, kept beside them and extended as records
/// are appended, so that a write (and each step of `verify`'s walk) costs the same in a
/// task of a hundred thousand records as in an empty one. Every lookup gives what a scan
/// of the records in order would.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// How many records are indexed (those before position `indexed`).
    indexed: usize,
    /// Record id → the position of the last record holding it.
    last: FxHashMap<String, usize>,
    /// Plan id → its assessment (the first plan holding the id).
    plan_assessment: FxHashMap<String, String>,
    /// Assessment → the ids of its plans, in record order.
    plans_of: FxHashMap<String, Vec<String>>,
    /// Plan id → the positions of the consultations naming it, in record order.
    consultations_of_plan: FxHashMap<String, Vec<usize>>,
    /// (plan, advisor) → the position of the first consultation of that advisor.
    consulted: FxHashMap<(String, String), usize>,
    /// Assessment → the positions of its disagreements, in record order.
    disagreements_of: FxHashMap<String, Vec<usize>>,
    /// The disagreements a resolution names.
    resolved: FxHashSet<String>,
    /// Conclusion id → its sequence (the last conclusion holding the id).
    conclusion_sequence: FxHashMap<String, u64>,
    /// Assessment → the positions of its conclusions, in record order.
    conclusions_of: FxHashMap<String, Vec<usize>>,
    /// The conclusions a later conclusion names in `supersedes`.
    superseded: FxHashSet<String>,
    /// Normalised subject → the ids of the assessments holding it.
    subjects: FxHashMap<String, Vec<String>>,
    /// The task's own invariants: its `invariant` records and the conclusions that remove
    /// or narrow one, folded in record order.
    invariants: TaskInvariants,
}

impl Index {
    /// The index of `records`.
    pub fn of(records: &[Record]) -> Index {
        let mut index = Index::default();
        index.extend(records);
        index
    }

    /// How many records are indexed.
    pub fn indexed(&self) -> usize {
        self.indexed
    }

    /// Index the records of `records` past those indexed (`records` holds the indexed ones
    /// first, unchanged).
    pub fn extend(&mut self, records: &[Record]) {
        for (at, record) in records.iter().enumerate().skip(self.indexed) {
            self.add(at, record);
        }
        self.indexed = self.indexed.max(records.len());
    }

    /// The task's own invariants, as the indexed records leave them.
    pub fn invariants(&self) -> &TaskInvariants {
        &self.invariants
    }

    fn add(&mut self, at: usize, record: &Record) {
        let id = record.id();
        self.last.insert(id.to_string(), at);
        self.invariants.apply(record);
        match &record.body {
            Body::Assessment(a) => self
                .subjects
                .entry(policy::normalise_subject(&a.subject))
                .or_default()
                .push(id.to_string()),
            Body::Plan(p) => {
                self.plan_assessment
                    .entry(id.to_string())
                    .or_insert_with(|| p.assessment.clone());
                self.plans_of
                    .entry(p.assessment.clone())
                    .or_default()
                    .push(id.to_string());
            }
            Body::Consultation(c) => {
                self.consultations_of_plan
                    .entry(c.plan.clone())
                    .or_default()
                    .push(at);
                self.consulted
                    .entry((c.plan.clone(), c.advisor.clone()))
                    .or_insert(at);
            }
            Body::Disagreement(d) => self
                .disagreements_of
                .entry(d.assessment.clone())
                .or_default()
                .push(at),
            Body::Resolution(r) => {
                self.resolved.insert(r.disagreement.clone());
            }
            Body::Conclusion(c) => {
                let sequence = record.envelope.sequence;
                if let Some(old) = c.supersedes.as_deref() {
                    if self
                        .conclusion_sequence
                        .get(old)
                        .is_some_and(|&s| s < sequence)
                    {
                        self.superseded.insert(old.to_string());
                    }
                }
                self.conclusion_sequence.insert(id.to_string(), sequence);
                self.conclusions_of
                    .entry(c.assessment.clone())
                    .or_default()
                    .push(at);
            }
            Body::Validation(_) | Body::Attempt(_) | Body::Invariant(_) => {}
        }
    }
}

/// The task's records, with the lookups the rules need, through its [`Index`].
pub(super) struct Task<'a> {
    records: &'a [Record],
    name: &'a TaskName,
    /// What the chain, the attestations and this machine vouch for; `None` believes all.
    trust: Option<&'a Trust>,
    index: std::borrow::Cow<'a, Index>,
}

impl<'a> Task<'a> {
    /// The task of `records`, indexed here (the writer's own tests build one so).
    #[cfg(test)]
    pub(super) fn new(
        records: &'a [Record],
        name: &'a TaskName,
        trust: Option<&'a Trust>,
    ) -> Task<'a> {
        Task::indexed(records, name, trust, None)
    }

    /// The task of `records` with `index`, when it indexes exactly them (otherwise an
    /// index is built).
    pub(super) fn indexed(
        records: &'a [Record],
        name: &'a TaskName,
        trust: Option<&'a Trust>,
        index: Option<&'a Index>,
    ) -> Task<'a> {
        let index = match index {
            Some(index) if index.indexed == records.len() => std::borrow::Cow::Borrowed(index),
            _ => std::borrow::Cow::Owned(Index::of(records)),
        };
        Task {
            records,
            name,
            trust,
            index,
        }
    }

    /// The record with `id` (the last holding it).
    fn by_id(&self, id: &str) -> Option<&'a Record> {
        self.index.last.get(id).map(|&at| &self.records[at])
    }

    /// Whether consultation `record` counts as a review: it completed, the chain vouches
    /// for it, its attestation is valid and counts, and this machine vouches for the task.
    /// The one place that decides what a conclusion's `reviewed_by` and
    /// `independent_review_count` count.
    fn counts_as_review(&self, record: &Record, consultation: &Consultation) -> bool {
        consultation.status == ConsultationStatus::Completed
            && self.trust.is_none_or(|t| t.counts_as_review(record.id()))
    }

    pub(super) fn records(&self) -> &'a [Record] {
        self.records
    }

    /// The record `id` as the kind `want`, picked out by `pick`; `field` of `of` is the
    /// reference being followed, named in the refusal.
    fn find<T>(
        &self,
        field: &str,
        of: Kind,
        id: &str,
        want: Kind,
        pick: fn(&'a Body) -> Option<&'a T>,
    ) -> Result<(&'a Record, &'a T), Refusal> {
        let found = self.by_id(id);
        match found {
            Some(record) => match pick(&record.body) {
                Some(body) => Ok((record, body)),
                None => Err(refuse(
                    ReasonCode::UnknownReference,
                    format!(
                        "field `{field}` of {} names `{id}`, which is {}, not {}; name the id \
                         of {} of task `{}`",
                        a(of),
                        a(record.kind()),
                        a(want),
                        a(want),
                        self.name
                    ),
                )),
            },
            None => Err(refuse(
                ReasonCode::UnknownReference,
                format!(
                    "field `{field}` of {} names `{}`, which is no record of task `{}`; name \
                     the id of {} of this task",
                    a(of),
                    id.escape_debug(),
                    self.name,
                    a(want)
                ),
            )),
        }
    }

    pub(super) fn assessment(
        &self,
        field: &str,
        of: Kind,
        id: &str,
    ) -> Result<(&'a Record, &'a Assessment), Refusal> {
        self.find(field, of, id, Kind::Assessment, |b| match b {
            Body::Assessment(x) => Some(x),
            _ => None,
        })
    }

    fn plan(&self, field: &str, of: Kind, id: &str) -> Result<(&'a Record, &'a Plan), Refusal> {
        self.find(field, of, id, Kind::Plan, |b| match b {
            Body::Plan(x) => Some(x),
            _ => None,
        })
    }

    fn consultation(
        &self,
        field: &str,
        of: Kind,
        id: &str,
    ) -> Result<(&'a Record, &'a Consultation), Refusal> {
        self.find(field, of, id, Kind::Consultation, |b| match b {
            Body::Consultation(x) => Some(x),
            _ => None,
        })
    }

    fn disagreement(
        &self,
        field: &str,
        of: Kind,
        id: &str,
    ) -> Result<(&'a Record, &'a Disagreement), Refusal> {
        self.find(field, of, id, Kind::Disagreement, |b| match b {
            Body::Disagreement(x) => Some(x),
            _ => None,
        })
    }

    fn conclusion(
        &self,
        field: &str,
        of: Kind,
        id: &str,
    ) -> Result<(&'a Record, &'a Conclusion), Refusal> {
        self.find(field, of, id, Kind::Conclusion, |b| match b {
            Body::Conclusion(x) => Some(x),
            _ => None,
        })
    }

    /// The assessment whose plan `plan_id` is, if that plan is recorded.
    fn assessment_of_plan(&self, plan_id: &str) -> Option<&str> {
        self.index.plan_assessment.get(plan_id).map(String::as_str)
    }

    /// Every consultation recorded under any plan of `assessment`, in record order.
    pub(super) fn consultations_of(&self, assessment: &str) -> Vec<(&'a Record, &'a Consultation)> {
        let mut at: Vec<usize> = Vec::new();
        let mut plans: Vec<&str> = Vec::new();
        for plan in self.index.plans_of.get(assessment).into_iter().flatten() {
            // A plan id held twice is one plan, as a scan would find it.
            if !plans.contains(&plan.as_str()) {
                plans.push(plan);
                at.extend(
                    self.index
                        .consultations_of_plan
                        .get(plan)
                        .into_iter()
                        .flatten(),
                );
            }
        }
        at.sort_unstable();
        at.into_iter()
            .filter_map(|i| match &self.records[i].body {
                Body::Consultation(c) => Some((&self.records[i], c)),
                _ => None,
            })
            .collect()
    }

    /// The first consultation of `advisor` under `plan`.
    fn consultation_of(&self, plan: &str, advisor: &str) -> Option<&'a Record> {
        self.index
            .consulted
            .get(&(plan.to_string(), advisor.to_string()))
            .map(|&at| &self.records[at])
    }

    /// Every disagreement recorded on `assessment`.
    fn disagreements_of(&self, assessment: &str) -> Vec<&'a Record> {
        let at = self.index.disagreements_of.get(assessment);
        at.into_iter()
            .flatten()
            .map(|&i| &self.records[i])
            .collect()
    }

    /// Whether a resolution of disagreement `id` is recorded.
    fn is_resolved(&self, id: &str) -> bool {
        self.index.resolved.contains(id)
    }

    /// The newest conclusion on `assessment` that no later conclusion supersedes.
    pub(super) fn standing_on(&self, assessment: &str) -> Option<&'a Record> {
        let at = self.index.conclusions_of.get(assessment)?;
        at.iter()
            .rev()
            .map(|&i| &self.records[i])
            .find(|r| !self.index.superseded.contains(r.id()))
    }

    /// The standing conclusion on `subject` (normalised): the newest conclusion, on any
    /// assessment of that subject, that no later conclusion supersedes (as
    /// `policy::standing_conclusion` finds it by scanning).
    pub(super) fn standing_on_subject(&self, subject: &str) -> Option<&'a Record> {
        let assessments = self
            .index
            .subjects
            .get(&policy::normalise_subject(subject))?;
        let mut seen: Vec<&str> = Vec::new();
        let mut standing: Option<&'a Record> = None;
        for assessment in assessments {
            if seen.contains(&assessment.as_str()) {
                continue;
            }
            seen.push(assessment);
            let Some(at) = self.index.conclusions_of.get(assessment) else {
                continue;
            };
            for &i in at {
                let record = &self.records[i];
                if self.index.superseded.contains(record.id()) {
                    continue;
                }
                if standing.is_none_or(|s| record.envelope.sequence >= s.envelope.sequence) {
                    standing = Some(record);
                }
            }
        }
        standing
    }
}

/// Apply the cross-record rules of `body`'s kind, filling its computed fields; `outer`
/// are the global and project invariants in force (the task's own are in its index).
pub(super) fn check(task: &Task, body: &mut Body, outer: &[InForce]) -> Result<(), Refusal> {
    match body {
        Body::Assessment(x) => assessment(x),
        // Plans are admitted by `admit_plan`; a body of this kind never reaches here.
        Body::Plan(_) => Ok(()),
        Body::Consultation(x) => consultation(task, x),
        Body::Disagreement(x) => disagreement(task, x),
        Body::Resolution(x) => resolution(task, x),
        Body::Conclusion(x) => conclusion(task, x, outer),
        Body::Validation(x) => task
            .conclusion("conclusion", Kind::Validation, &x.conclusion)
            .map(|_| ()),
        Body::Attempt(x) => task
            .assessment("assessment", Kind::Attempt, &x.assessment)
            .map(|_| ()),
        Body::Invariant(x) => invariant(task, x),
    }
}

/// An `invariant` record: `add` and `narrow` carry the text; `add` puts a name in force at
/// task scope once; `narrow` and `remove` touch only what the task itself added. A global
/// or project invariant is removed in its own file, or within a task by a conclusion
/// that decides it (an entry with `holds: false` and its `change`).
fn invariant(task: &Task, x: &Invariant) -> Result<(), Refusal> {
    let has_text = x
        .description
        .as_deref()
        .is_some_and(|d| !d.trim().is_empty());
    let added_by = task.index.invariants.added_by(&x.name);
    match x.action {
        InvariantAction::Add | InvariantAction::Narrow if !has_text => Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "an invariant record that does `{}` needs `description`: the constraint's text",
                x.action.as_str()
            ),
        )),
        InvariantAction::Add => match added_by {
            Some(record) => Err(refuse(
                ReasonCode::InvalidField,
                format!(
                    "invariant `{}` is already in force at task scope (record `{record}`); \
                     `narrow` it or `remove` it first",
                    x.name
                ),
            )),
            None => Ok(()),
        },
        InvariantAction::Remove | InvariantAction::Narrow => match added_by {
            Some(_) => Ok(()),
            None => Err(refuse(
                ReasonCode::UnknownReference,
                format!(
                    "invariant `{}` was not added in task `{}`, so a record cannot `{}` it; \
                     a task's records narrow or remove only the invariants the task added \
                     (`advisor-consult invariant list` shows each one's scope); a global or \
                     project invariant is removed from its own file, or set aside in this \
                     task by a conclusion that decides it (`holds: false` with \
                     `\"change\": \"remove\"` or `\"narrow\"`)",
                    x.name,
                    task.name,
                    x.action.as_str()
                ),
            )),
        },
    }
}

/// A conclusion's account of the invariants: an entry that says an invariant does not
/// hold decides its removal or narrowing, whatever the doubt; on material, high or
/// critical doubt every invariant in force has an entry with evidence.
fn invariants_kept(
    task: &Task,
    x: &Conclusion,
    assessment: &Assessment,
    outer: &[InForce],
) -> Result<(), Refusal> {
    for (i, check) in x.invariants.iter().enumerate() {
        if x.invariants[..i].iter().any(|c| c.name == check.name) {
            return Err(refuse(
                ReasonCode::InvalidField,
                format!(
                    "`invariants` names `{}` twice; account for each invariant once",
                    check.name
                ),
            ));
        }
    }
    if let Some(broken) = x.invariants.iter().find(|c| !c.holds && c.change.is_none()) {
        return Err(refuse(
            ReasonCode::InvariantViolated,
            format!(
                "the decision does not keep invariant `{}` (`holds: false`); change the \
                 decision so that it holds, or decide in this conclusion to set it aside: \
                 add `\"change\": \"remove\"`, or `\"change\": \"narrow\"` with the \
                 narrower `description`, to its entry",
                broken.name
            ),
        ));
    }
    if !assessment.materiality.needs_evidence() {
        return Ok(());
    }
    let in_force = invariants::effective(outer, &task.index.invariants);
    let unaddressed: Vec<&InForce> = in_force
        .iter()
        .filter(|i| {
            !x.invariants
                .iter()
                .any(|c| c.name == i.name && !c.evidence.is_empty())
        })
        .collect();
    let Some(first) = unaddressed.first() else {
        return Ok(());
    };
    let names: Vec<&str> = unaddressed.iter().map(|i| i.name.as_str()).collect();
    let without_evidence = x.invariants.iter().any(|c| c.name == first.name);
    let why = if without_evidence {
        "its entry in `invariants` cites no evidence".to_string()
    } else {
        "it has no entry in `invariants`".to_string()
    };
    Err(refuse(
        ReasonCode::InvariantUnaddressed,
        format!(
            "invariant `{}` ({} scope: {}) is in force and {why}; a conclusion on `{}` doubt \
             accounts for every invariant in force ({}) with \
             `{{\"name\", \"holds\": true|false, \"evidence\": [...]}}`",
            first.name,
            first.scope,
            first.description,
            assessment.materiality.as_str(),
            listed(&names)
        ),
    ))
}

fn assessment(x: &Assessment) -> Result<(), Refusal> {
    if x.materiality.needs_evidence() && x.evidence.is_empty() {
        return Err(refuse(
            ReasonCode::MaterialWithoutEvidence,
            format!(
                "an assessment of `{}` materiality needs at least one evidence reference \
                 (a file, test, commit, command or observation that shows the doubt)",
                x.materiality.as_str()
            ),
        ));
    }
    Ok(())
}

fn consultation(task: &Task, x: &Consultation) -> Result<(), Refusal> {
    let (_, plan) = task.plan("plan", Kind::Consultation, &x.plan)?;
    if !plan.selected.iter().any(|s| s.advisor == x.advisor) {
        let selected: Vec<&str> = plan.selected.iter().map(|s| s.advisor.as_str()).collect();
        let who = if selected.is_empty() {
            "nobody".to_string()
        } else {
            listed(&selected)
        };
        return Err(refuse(
            ReasonCode::AdvisorNotSelected,
            format!(
                "advisor `{}` was not selected by plan `{}` (it selected {who}); record \
                 consultations only of the advisors a plan selected",
                x.advisor.escape_debug(),
                x.plan
            ),
        ));
    }
    let earlier = task.consultation_of(&x.plan, &x.advisor);
    if let Some(earlier) = earlier {
        return Err(refuse(
            ReasonCode::DuplicateConsultation,
            format!(
                "plan `{}` already has consultation `{}` of advisor `{}`; an advisor is \
                 consulted once per plan",
                x.plan,
                earlier.id(),
                x.advisor
            ),
        ));
    }
    let has_conclusion = x
        .conclusion
        .as_deref()
        .is_some_and(|c| !c.trim().is_empty());
    match x.status {
        ConsultationStatus::Completed if !has_conclusion => Err(refuse(
            ReasonCode::CompletedWithoutConclusion,
            "a completed consultation needs the advisor's `conclusion`; record one without \
             an answer as `failed` with its `failure`"
                .to_string(),
        )),
        ConsultationStatus::Completed if x.failure.is_some() => Err(refuse(
            ReasonCode::InvalidField,
            "a completed consultation carries no `failure`; remove it or record the \
             consultation as `failed`"
                .to_string(),
        )),
        ConsultationStatus::Failed if x.conclusion.is_some() => Err(refuse(
            ReasonCode::FailedWithConclusion,
            "a failed consultation carries no `conclusion`; record an answer as `completed`"
                .to_string(),
        )),
        ConsultationStatus::Failed if x.failure.is_none() => Err(refuse(
            ReasonCode::InvalidField,
            "a failed consultation needs `failure`, one of `timeout`, `rate_limited`, \
             `auth_failed`, `malformed`, `empty`, `unavailable`, `cancelled`, `error`"
                .to_string(),
        )),
        _ => Ok(()),
    }
}

fn disagreement(task: &Task, x: &Disagreement) -> Result<(), Refusal> {
    task.assessment("assessment", Kind::Disagreement, &x.assessment)?;
    if x.positions.len() < 2 {
        return Err(refuse(
            ReasonCode::TooFewPositions,
            format!(
                "a disagreement needs at least two positions; it has {}",
                x.positions.len()
            ),
        ));
    }
    for (i, position) in x.positions.iter().enumerate() {
        if x.positions[..i].iter().any(|p| p.source == position.source) {
            return Err(refuse(
                ReasonCode::InvalidField,
                format!(
                    "`positions` names source `{}` twice; each source holds one position",
                    position.source
                ),
            ));
        }
        if position.source == EXECUTOR {
            continue;
        }
        let field = format!("positions[{i}].source");
        let (record, consultation) =
            task.consultation(&field, Kind::Disagreement, &position.source)?;
        if task.assessment_of_plan(&consultation.plan) != Some(x.assessment.as_str()) {
            return Err(refuse(
                ReasonCode::UnknownReference,
                format!(
                    "field `{field}` names consultation `{}`, which is not of assessment `{}`; \
                     a position comes from the executor or a consultation of the assessment",
                    record.id(),
                    x.assessment
                ),
            ));
        }
        if consultation.status != ConsultationStatus::Completed {
            return Err(refuse(
                ReasonCode::PositionNotCompleted,
                format!(
                    "position {i} comes from consultation `{}`, which did not complete; a \
                     position is the executor's or a completed consultation's",
                    record.id()
                ),
            ));
        }
    }
    Ok(())
}

fn resolution(task: &Task, x: &mut Resolution) -> Result<(), Refusal> {
    let (_, disagreement) = task.disagreement("disagreement", Kind::Resolution, &x.disagreement)?;
    if x.evidence.is_empty() {
        return Err(refuse(
            ReasonCode::ResolutionWithoutEvidence,
            "a resolution needs evidence from its experiment: at least one evidence reference"
                .to_string(),
        ));
    }
    if x.favours == NEITHER || disagreement.positions.iter().any(|p| p.source == x.favours) {
        return Ok(());
    }
    // What `status` prints for a position is its advisor: accept that too, and store the
    // consultation it stands for, so the record names one position exactly.
    let advisor_of = |source: &str| {
        task.by_id(source).and_then(|r| match &r.body {
            Body::Consultation(c) => Some(c.advisor.as_str()),
            _ => None,
        })
    };
    let of_advisor: Vec<&str> = disagreement
        .positions
        .iter()
        .map(|p| p.source.as_str())
        .filter(|source| advisor_of(source) == Some(x.favours.as_str()))
        .collect();
    if let [source] = of_advisor[..] {
        x.favours = source.to_string();
        return Ok(());
    }
    let accepted: Vec<String> = disagreement
        .positions
        .iter()
        .map(|p| match advisor_of(&p.source) {
            Some(advisor) => format!("`{}` (advisor `{advisor}`)", p.source),
            None => format!("`{}`", p.source),
        })
        .collect();
    let why = if of_advisor.is_empty() {
        "which is no position".to_string()
    } else {
        format!(
            "an advisor holding {} positions, so name the consultation",
            of_advisor.len()
        )
    };
    Err(refuse(
        ReasonCode::UnknownReference,
        format!(
            "field `favours` of a resolution names `{}`, {why} of disagreement `{}`; \
             accepted: {}, or `{NEITHER}`",
            x.favours.escape_debug(),
            x.disagreement,
            accepted.join(", ")
        ),
    ))
}

fn conclusion(task: &Task, x: &mut Conclusion, outer: &[InForce]) -> Result<(), Refusal> {
    let (_, assessment) = task.assessment("assessment", Kind::Conclusion, &x.assessment)?;
    let mut cited = Vec::with_capacity(x.consultations.len());
    for (i, id) in x.consultations.iter().enumerate() {
        let field = format!("consultations[{i}]");
        if x.consultations[..i].contains(id) {
            return Err(refuse(
                ReasonCode::InvalidField,
                format!("`consultations` cites `{id}` twice; cite each consultation once"),
            ));
        }
        let (record, consultation) = task.consultation(&field, Kind::Conclusion, id)?;
        if task.assessment_of_plan(&consultation.plan) != Some(x.assessment.as_str()) {
            return Err(refuse(
                ReasonCode::UnknownReference,
                format!(
                    "field `{field}` names consultation `{id}`, which is not of assessment \
                     `{}`; a conclusion weighs the consultations of its own assessment",
                    x.assessment
                ),
            ));
        }
        cited.push((record, consultation));
    }
    if let Some(old) = &x.supersedes {
        task.conclusion("supersedes", Kind::Conclusion, old)?;
    }
    let material = assessment.materiality.needs_evidence();
    if material && x.evidence.is_empty() {
        return Err(refuse(
            ReasonCode::MaterialWithoutEvidence,
            format!(
                "a conclusion on `{}` doubt needs at least one evidence reference",
                assessment.materiality.as_str()
            ),
        ));
    }
    let has_plan = x
        .validation_plan
        .as_deref()
        .is_some_and(|p| !p.trim().is_empty());
    if material && !has_plan {
        return Err(refuse(
            ReasonCode::MaterialWithoutValidationPlan,
            format!(
                "a conclusion on `{}` doubt needs a `validation_plan`: how the decision will \
                 be checked",
                assessment.materiality.as_str()
            ),
        ));
    }
    unresolved_disagreement(task, &x.assessment)?;
    let of_assessment = task.consultations_of(&x.assessment);
    let unweighed = of_assessment.iter().find(|(record, c)| {
        c.status == ConsultationStatus::Completed
            && !x.consultations.iter().any(|id| id == record.id())
    });
    if let Some((record, c)) = unweighed {
        return Err(refuse(
            ReasonCode::AnswerNotWeighed,
            format!(
                "completed consultation `{}` of advisor `{}` on assessment `{}` is not cited \
                 in `consultations`; a conclusion weighs every answer received",
                record.id(),
                c.advisor,
                x.assessment
            ),
        ));
    }
    supersedes_missing(task, x, assessment)?;
    invariants_kept(task, x, assessment, outer)?;
    // Who answered is listed by advisor; how many independent reviews that makes is
    // counted by source: two advisors in front of one model are one review.
    let mut reviewed_by: Vec<String> = Vec::new();
    let mut sources: Vec<&str> = Vec::new();
    for (record, c) in cited {
        // Unattested, unverified, or in a task this machine does not vouch for: no review.
        if !task.counts_as_review(record, c) {
            continue;
        }
        if !reviewed_by.contains(&c.advisor) {
            reviewed_by.push(c.advisor.clone());
        }
        let source = c.source.as_deref().unwrap_or(&c.advisor);
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    x.independent_review_count = u32::try_from(sources.len()).unwrap_or(u32::MAX);
    x.reviewed_by = reviewed_by;
    Ok(())
}

/// Refuse a conclusion that would stand beside another: one on an assessment that already
/// has a standing conclusion, or one on a new-evidence assessment while a conclusion on the
/// same normalised subject stands, must name that conclusion in `supersedes`.
fn supersedes_missing(task: &Task, x: &Conclusion, assessment: &Assessment) -> Result<(), Refusal> {
    let same_assessment = task.standing_on(&x.assessment);
    let (standing, why) = match same_assessment {
        Some(standing) => (standing, "already has standing conclusion"),
        None if assessment.new_evidence => match task.standing_on_subject(&assessment.subject) {
            Some(standing) => (
                standing,
                "declares new evidence against standing conclusion",
            ),
            None => return Ok(()),
        },
        None => return Ok(()),
    };
    if x.supersedes.as_deref() == Some(standing.id()) {
        return Ok(());
    }
    Err(refuse(
        ReasonCode::SupersedesMissing,
        format!(
            "assessment `{}` {why} `{}`; a conclusion replaces it only by naming it in \
             `supersedes`",
            x.assessment,
            standing.id()
        ),
    ))
}

/// Refuse a conclusion while its assessment has a divergent answer with no disagreement
/// recorded, or a disagreement with no resolution: however the consultations came to be
/// recorded, divergence is settled by an experiment, never by a count.
fn unresolved_disagreement(task: &Task, assessment: &str) -> Result<(), Refusal> {
    let disagreements = task.disagreements_of(assessment);
    if let Some(open) = disagreements.iter().find(|d| !task.is_resolved(d.id())) {
        return Err(refuse(
            ReasonCode::UnresolvedDisagreement,
            format!(
                "disagreement `{}` on assessment `{assessment}` has no resolution; settle it \
                 with an experiment and record the resolution first",
                open.id()
            ),
        ));
    }
    if !disagreements.is_empty() {
        return Ok(());
    }
    let divergent = task
        .consultations_of(assessment)
        .into_iter()
        .find(|(_, c)| {
            c.status == ConsultationStatus::Completed && c.stance.is_some_and(|s| s.diverges())
        });
    match divergent {
        None => Ok(()),
        Some((record, c)) => Err(refuse(
            ReasonCode::UnresolvedDisagreement,
            format!(
                "consultation `{}` of advisor `{}` diverges (stance `{}`) and no disagreement \
                 on assessment `{assessment}` is recorded; record the disagreement and resolve \
                 it first",
                record.id(),
                c.advisor,
                c.stance.map_or("", |s| s.as_str())
            ),
        )),
    }
}
