//! Derived views over a task's records: `status`, `explain` and `tree`. Pure functions of
//! the records (and the clock where a view says "now").
//!
//! Every view indexes the records once ([`Index`]) and then walks the index, so deriving a
//! view is linear in the number of records: `benches/status.rs` holds that bound.

pub mod advisors;
pub mod context;
pub mod downstream;
pub mod explain;
pub mod priced;
pub mod status;
pub mod tree;

use crate::core::chain::Trust;
use crate::core::records::{Body, Conclusion, ConsultationStatus, Kind, Record};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Which slice of a long list a paged reply holds (`offset` and `limit` on `status` and
/// `tree`): the cockpit pages so a task of thousands of records stays light.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Page {
    /// How many were skipped.
    pub offset: usize,
    /// How many at most were kept.
    pub limit: usize,
    /// How many there are in all.
    pub total: usize,
}

impl Page {
    /// Keep `offset..offset + limit` of `items`; the page kept.
    pub fn slice<T>(items: &mut Vec<T>, offset: usize, limit: usize) -> Page {
        let total = items.len();
        let start = offset.min(total);
        let end = start.saturating_add(limit).min(total);
        items.truncate(end);
        items.drain(..start);
        Page {
            offset,
            limit,
            total,
        }
    }
}

/// The longest summary or label a view carries, in characters; renderers may cut further.
pub const SUMMARY_CHARS: usize = 72;

/// The record `record` refers to as its parent: the assessment of a plan, disagreement,
/// conclusion or attempt; the plan of a consultation; the disagreement of a resolution; the
/// conclusion of a validation. An assessment has none.
pub fn parent_id(record: &Record) -> Option<&str> {
    match &record.body {
        Body::Assessment(_) => None,
        Body::Plan(p) => Some(&p.assessment),
        Body::Consultation(c) => Some(&c.plan),
        Body::Disagreement(d) => Some(&d.assessment),
        Body::Resolution(r) => Some(&r.disagreement),
        Body::Conclusion(c) => Some(&c.assessment),
        Body::Validation(v) => Some(&v.conclusion),
        Body::Attempt(a) => Some(&a.assessment),
        Body::Invariant(_) => None,
    }
}

/// The review a conclusion is credited with in a view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreditedReview {
    /// Who answered: the distinct advisors, in citation order.
    pub reviewed_by: Vec<String>,
    /// How many independent reviews that is: the distinct sources of their answers (the
    /// advisor standing in for a consultation that names none).
    pub independent_review_count: u32,
}

/// The review a conclusion is credited with in a view: the completed consultations it
/// cites that count ([`Trust::counts_as_review`]: the hash chain vouches for them, their
/// attestation is valid and counts, the task is not foreign) — nobody when the chain does
/// not vouch for the conclusion itself. Computed here, never read from the record, so an edited
/// `reviewed_by` or a hand-written consultation is not believed.
pub fn credited_review<'r>(
    conclusion: &Record,
    trust: &Trust,
    record_of: impl Fn(&str) -> Option<&'r Record>,
) -> CreditedReview {
    let Body::Conclusion(c) = &conclusion.body else {
        return CreditedReview::default();
    };
    if !trust.is_verified(conclusion.id()) {
        return CreditedReview::default();
    }
    let mut reviewed_by: Vec<String> = Vec::new();
    let mut sources: Vec<&str> = Vec::new();
    for id in &c.consultations {
        let Some(record) = record_of(id).filter(|r| trust.counts_as_review(r.id())) else {
            continue;
        };
        if let Body::Consultation(x) = &record.body {
            if x.status != ConsultationStatus::Completed {
                continue;
            }
            if !reviewed_by.contains(&x.advisor) {
                reviewed_by.push(x.advisor.clone());
            }
            let source = x.source.as_deref().unwrap_or(&x.advisor);
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
    }
    CreditedReview {
        reviewed_by,
        independent_review_count: u32::try_from(sources.len()).unwrap_or(u32::MAX),
    }
}

/// How the newest validation of a conclusion went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidationState {
    /// No validation was recorded.
    NotValidated,
    /// The newest validation passed.
    Passed,
    /// The newest validation failed: the conclusion stands but is not validated.
    Failed,
}

impl ValidationState {
    /// The name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            ValidationState::NotValidated => "not_validated",
            ValidationState::Passed => "passed",
            ValidationState::Failed => "failed",
        }
    }
}

/// A short pointer at another record, with what it is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Link {
    /// Its kind.
    pub kind: Kind,
    /// Its id.
    pub id: String,
    /// Its sequence in the task.
    pub sequence: u64,
    /// One line saying what it is about.
    pub summary: String,
}

/// The records of a task indexed once by id, by parent and by supersession.
///
/// Building it is linear in the records (the sort is linear on input already in sequence
/// order, as the store returns it); every view then looks things up instead of scanning.
pub(crate) struct Index<'r> {
    /// Every record, in sequence order.
    pub ordered: Vec<&'r Record>,
    /// Records by id.
    pub by_id: HashMap<&'r str, &'r Record>,
    /// Records by the id of their parent ([`parent_id`]), each list in sequence order.
    pub children: HashMap<&'r str, Vec<&'r Record>>,
    /// For each superseded conclusion, the first conclusion that names it in `supersedes`.
    pub superseded_by: HashMap<&'r str, &'r Record>,
}

impl<'r> Index<'r> {
    /// Index `records` (in any order).
    pub fn new(records: &'r [Record]) -> Index<'r> {
        let mut ordered: Vec<&Record> = records.iter().collect();
        ordered.sort_by_key(|r| r.envelope.sequence);
        let mut index = Index {
            ordered: Vec::with_capacity(ordered.len()),
            by_id: HashMap::with_capacity_and_hasher(ordered.len(), Default::default()),
            children: HashMap::with_capacity_and_hasher(ordered.len() / 2, Default::default()),
            superseded_by: HashMap::default(),
        };
        for record in ordered {
            index.ordered.push(record);
            index.by_id.insert(record.id(), record);
            if let Some(parent) = parent_id(record) {
                index.children.entry(parent).or_default().push(record);
            }
            if let Body::Conclusion(Conclusion {
                supersedes: Some(old),
                ..
            }) = &record.body
            {
                index.superseded_by.entry(old.as_str()).or_insert(record);
            }
        }
        index
    }

    /// The children of `id` (records whose parent it is), in sequence order.
    pub fn children_of(&self, id: &str) -> &[&'r Record] {
        self.children.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The children of `id` of one kind, in sequence order.
    pub fn children_of_kind<'s>(
        &'s self,
        id: &str,
        kind: Kind,
    ) -> impl Iterator<Item = &'r Record> + 's {
        self.children_of(id)
            .iter()
            .copied()
            .filter(move |r| r.kind() == kind)
    }

    /// How the newest validation of conclusion `id` went.
    pub fn validation_state(&self, id: &str) -> ValidationState {
        let newest = self
            .children_of_kind(id, Kind::Validation)
            .filter_map(|r| match &r.body {
                Body::Validation(v) => Some(v.passed),
                _ => None,
            })
            .last();
        match newest {
            None => ValidationState::NotValidated,
            Some(true) => ValidationState::Passed,
            Some(false) => ValidationState::Failed,
        }
    }

    /// A link to `record`.
    pub fn link(&self, record: &Record) -> Link {
        Link {
            kind: record.kind(),
            id: record.id().to_string(),
            sequence: record.envelope.sequence,
            summary: self.summary(record),
        }
    }

    /// The advisor of consultation `id`, if it is one.
    pub fn advisor_of(&self, id: &str) -> Option<&'r str> {
        match self.by_id.get(id).map(|r| &r.body) {
            Some(Body::Consultation(c)) => Some(c.advisor.as_str()),
            _ => None,
        }
    }

    /// One line saying what `record` is about, at most [`SUMMARY_CHARS`] characters.
    pub fn summary(&self, record: &Record) -> String {
        summary(record, |id| self.advisor_of(id))
    }
}

/// One line saying what `record` is about, at most [`SUMMARY_CHARS`] characters;
/// `advisor_of` names the advisor of a consultation id (for a resolution's `favours`).
pub(crate) fn summary<'a>(
    record: &'a Record,
    advisor_of: impl Fn(&str) -> Option<&'a str>,
) -> String {
    let mut w = OneLine::new(SUMMARY_CHARS);
    // Writing to a `OneLine` never fails.
    let _ = match &record.body {
        Body::Assessment(a) => write!(w, "[{}] {}", a.materiality.as_str(), a.subject),
        Body::Plan(p) => {
            let _ = write!(w, "{}, budget {}: ", p.mode.as_str(), p.budget);
            if let Some(reuse) = &p.reuse {
                write!(w, "reuses conclusion {reuse}")
            } else if p.selected.is_empty() && !p.local_review.is_empty() {
                w.write_str("nobody selected, local review")
            } else if p.selected.is_empty() {
                w.write_str("nobody selected")
            } else {
                for (i, s) in p.selected.iter().enumerate() {
                    let _ = w.write_str(if i == 0 { "" } else { ", " });
                    let _ = w.write_str(&s.advisor);
                }
                Ok(())
            }
        }
        Body::Consultation(c) => match (&c.failure, &c.stance) {
            (Some(failure), _) => write!(w, "{} failed: {}", c.advisor, failure.as_str()),
            (None, Some(stance)) => write!(w, "{} completed: {}", c.advisor, stance.as_str()),
            (None, None) => write!(w, "{} {}", c.advisor, status_word(c)),
        },
        Body::Disagreement(d) => write!(
            w,
            "{} positions: {}",
            d.positions.len(),
            d.discriminating_question
        ),
        Body::Resolution(r) => {
            write!(
                w,
                "favours {}: {}",
                advisor_of(&r.favours).unwrap_or(&r.favours),
                r.observed
            )
        }
        Body::Conclusion(c) => w.write_str(&c.decision),
        Body::Validation(v) => {
            let verdict = if v.passed { "passed" } else { "failed" };
            write!(w, "{verdict}: {}", v.check)
        }
        Body::Attempt(a) => write!(w, "tried {}: {}", a.tried, a.failure_observed),
        Body::Invariant(i) => write!(w, "invariant {} {}", i.action.as_str(), i.name),
    };
    w.finish()
}

fn status_word(c: &crate::core::records::Consultation) -> &'static str {
    match c.status {
        crate::core::records::ConsultationStatus::Completed => "completed",
        crate::core::records::ConsultationStatus::Failed => "failed",
    }
}

/// `text` on one line (whitespace collapsed), cut to `max` characters with an ellipsis.
pub fn one_line(text: &str, max: usize) -> String {
    let mut w = OneLine::new(max);
    let _ = w.write_str(text);
    w.finish()
}

/// A writer that keeps text on one line: runs of whitespace become one space (none at the
/// ends), and past `max` characters the text is cut with an ellipsis.
struct OneLine {
    out: String,
    count: usize,
    max: usize,
    space: bool,
    full: bool,
}

impl OneLine {
    fn new(max: usize) -> OneLine {
        OneLine {
            out: String::new(),
            count: 0,
            max,
            space: false,
            full: false,
        }
    }

    fn push(&mut self, c: char) {
        if self.count == self.max {
            // One character too many: make room for the ellipsis.
            self.out.pop();
            self.out.truncate(self.out.trim_end().len());
            self.out.push('…');
            self.full = true;
            return;
        }
        self.out.push(c);
        self.count += 1;
    }

    fn finish(self) -> String {
        self.out
    }
}

impl std::fmt::Write for OneLine {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for c in s.chars() {
            if self.full {
                break;
            }
            if c.is_whitespace() {
                self.space = self.count > 0;
                continue;
            }
            if std::mem::take(&mut self.space) {
                self.push(' ');
                if self.full {
                    break;
                }
            }
            self.push(c);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    fn check(text: &str, max: usize, expected: &str) {
        assert_eq!(one_line(text, max), expected, "{text:?} at {max}");
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        check("a  b\nc", 10, "a b c");
        check("exactly", 7, "exactly");
        check("one two three", 8, "one two…");
        check("one two three", 9, "one two…");
        check("one two three", 10, "one two t…");
        check("ééé", 2, "é…");
        check("", 5, "");
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A small builder of records with fixed ids and times, for the views' unit tests.

    use crate::core::records::Record;
    use serde_json::{json, Value};

    /// Builds records in sequence order; ids are `01J` followed by the sequence, padded.
    pub struct Task {
        pub records: Vec<Record>,
    }

    impl Task {
        pub fn new() -> Task {
            Task {
                records: Vec::new(),
            }
        }

        /// Append a record of `kind` with `fields`; returns its id.
        pub fn add(&mut self, kind: &str, fields: Value) -> String {
            let sequence = self.records.len() as u64 + 1;
            let id = format!("01J{sequence:0>23}");
            let mut value = json!({
                "id": id, "task": "t", "sequence": sequence,
                "created_at": format!("2026-01-01T00:00:{:02}Z", sequence % 60),
                "schema": 1, "redacted": [], "kind": kind,
            });
            let object = value.as_object_mut().expect("an object");
            for (k, v) in fields.as_object().expect("fields are an object") {
                object.insert(k.clone(), v.clone());
            }
            let record: Record = serde_json::from_value(value).expect("a valid record");
            self.records.push(record);
            id
        }

        pub fn assessment(&mut self, subject: &str) -> String {
            self.add(
                "assessment",
                json!({"subject": subject, "materiality": "high", "hypothesis": "h",
                       "evidence": [{"kind": "file", "ref": "src/x.rs"}]}),
            )
        }

        pub fn plan(&mut self, assessment: &str, selected: &[&str]) -> String {
            let selected: Vec<Value> = selected
                .iter()
                .map(|a| {
                    json!({"advisor": a, "adapter": "process",
                                "covers": ["independent_reasoning"], "why": "covers it"})
                })
                .collect();
            self.add(
                "plan",
                json!({"assessment": assessment, "mode": "standard", "budget": 2,
                       "capabilities": ["independent_reasoning"], "selected": selected,
                       "left_out": [], "availability": []}),
            )
        }

        pub fn completed(&mut self, plan: &str, advisor: &str, stance: &str) -> String {
            self.add(
                "consultation",
                json!({"plan": plan, "advisor": advisor, "status": "completed",
                       "conclusion": "c", "stance": stance, "duration_ms": 1200,
                       "usage": {"input_tokens": 100, "output_tokens": 20},
                       "finished_at": "2026-01-01T00:01:00Z"}),
            )
        }

        pub fn failed(&mut self, plan: &str, advisor: &str, failure: &str) -> String {
            self.add(
                "consultation",
                json!({"plan": plan, "advisor": advisor, "status": "failed",
                       "failure": failure, "diagnostic": "d",
                       "finished_at": "2026-01-01T00:01:00Z"}),
            )
        }

        pub fn disagreement(&mut self, assessment: &str, consultation: &str) -> String {
            self.add(
                "disagreement",
                json!({"assessment": assessment,
                       "positions": [{"source": "executor", "position": "p"},
                                     {"source": consultation, "position": "q"}],
                       "discriminating_question": "which?"}),
            )
        }

        pub fn resolution(&mut self, disagreement: &str) -> String {
            self.add(
                "resolution",
                json!({"disagreement": disagreement, "experiment": "e", "observed": "o",
                       "favours": "executor",
                       "evidence": [{"kind": "test", "ref": "t"}]}),
            )
        }

        pub fn conclusion(
            &mut self,
            assessment: &str,
            consultations: &[&str],
            supersedes: Option<&str>,
        ) -> String {
            let mut fields = json!({"assessment": assessment, "decision": "d", "rationale": "r",
                                    "consultations": consultations, "validation_plan": "v",
                                    "reviewed_by": [],
                                    "independent_review_count": consultations.len()});
            if let Some(old) = supersedes {
                fields["supersedes"] = json!(old);
            }
            self.add("conclusion", fields)
        }

        pub fn validation(&mut self, conclusion: &str, passed: bool) -> String {
            self.add(
                "validation",
                json!({"conclusion": conclusion, "check": "c", "passed": passed}),
            )
        }
    }
}

#[cfg(test)]
mod page_tests {
    use super::Page;

    #[test]
    fn a_page_is_a_slice_that_knows_the_whole() {
        let check = |offset, limit, kept: &[u8]| {
            let mut items = vec![1u8, 2, 3, 4, 5];
            let page = Page::slice(&mut items, offset, limit);
            assert_eq!(items, kept, "{offset}+{limit}");
            assert_eq!(page.total, 5);
        };
        check(0, 2, &[1, 2]);
        check(3, 10, &[4, 5]);
        check(5, 1, &[]);
        check(9, 1, &[]);
        check(0, usize::MAX, &[1, 2, 3, 4, 5]);
        check(2, 0, &[]);
    }
}

/// What the views' tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::core::chain::{digest, Entry, Trust, GENESIS};
    use crate::core::records::Record;

    /// The trust of a chain over `records` whose link into record `at` does not hold.
    pub(crate) fn broken_at(records: &[Record], at: usize) -> Trust {
        let mut records = records.to_vec();
        let digests: Vec<String> = records.iter().map(|r| digest(r.id().as_bytes())).collect();
        for (i, r) in records.iter_mut().enumerate() {
            r.envelope.prev = Some(match i {
                0 => GENESIS.to_string(),
                i if i == at => digest(b"elsewhere"),
                i => digests[i - 1].clone(),
            });
        }
        let entries: Vec<Entry> = records
            .iter()
            .zip(&digests)
            .map(|(r, d)| Entry {
                file: None,
                sequence: r.envelope.sequence,
                digest: d,
                record: Ok(r),
            })
            .collect();
        let task = crate::core::records::TaskName::new("t").expect("task");
        Trust::of(&task, &entries)
    }
}
