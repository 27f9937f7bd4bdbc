//! `context`: what a new session reads to pick up where the last one stopped, derived
//! from `status` and `advisors` (never stored). It keeps each list short so the plain
//! text fits about 40 lines; `more` says how many of a list were left out, so the JSON
//! and the text carry the same facts.

use super::advisors::AdvisorsView;
use super::downstream::Resting;
use super::status::{State, StatusView};
use crate::core::records::{Materiality, Mode, Status};
use crate::core::track::TrackRecord;
use serde::{Deserialize, Serialize};

/// The most items of each list a context carries.
pub const MAX_ITEMS: usize = 5;

/// The most track records a context carries (`advisors` lists them all), so that the
/// plain text stays about 40 lines.
pub const MAX_TRACK_LINES: usize = 3;

/// The context of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextView {
    /// The task (absent when it has no records yet).
    pub task: Option<String>,
    /// The mode in force.
    pub mode: Mode,
    /// Conclusions that stand (not superseded, on a verified chain), newest first.
    pub standing: Section<StandingConclusion>,
    /// Disagreements with no resolution, and divergent answers with no disagreement yet.
    pub disputed: Section<Dispute>,
    /// Assessments with no conclusion and no dispute: open or planned.
    pub open: Section<OpenAssessment>,
    /// Advisors the circuit or a budget leaves out for now.
    pub cooling: Section<CoolingAdvisor>,
    /// Each advisor with a track record (see `core::track`), those of the catalogue first
    /// and then those no longer in it, at most [`MAX_TRACK_LINES`]: information for the
    /// reader, which changes no plan.
    #[serde(default)]
    pub track: Section<TrackLine>,
    /// The assessments and conclusions resting on a superseded decision, newest first
    /// (see `core::views::downstream`); absent when there is none.
    #[serde(default, skip_serializing_if = "Section::is_empty")]
    pub resting: Section<Resting>,
    /// For a task shared through a journal: the status's [`super::status::JournalState`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<super::status::JournalState>,
}

/// One advisor's track record, as a context carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackLine {
    /// Its id.
    pub advisor: String,
    /// Whether it is in the catalogue now.
    pub in_catalogue: bool,
    /// What the experiments that settled its disagreements found.
    pub track_record: TrackRecord,
}

/// A list cut to [`MAX_ITEMS`], and how many were left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Section<T> {
    /// The items kept.
    pub items: Vec<T>,
    /// How many more there are.
    pub more: usize,
}

impl<T> Default for Section<T> {
    fn default() -> Section<T> {
        Section {
            items: Vec::new(),
            more: 0,
        }
    }
}

impl<T> Section<T> {
    /// Whether the section holds nothing, cut or not.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.more == 0
    }

    fn cut(items: Vec<T>) -> Section<T> {
        Section::cut_to(items, MAX_ITEMS)
    }

    fn cut_to(mut items: Vec<T>, max: usize) -> Section<T> {
        let more = items.len().saturating_sub(max);
        items.truncate(max);
        Section { items, more }
    }
}

/// A conclusion that stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandingConclusion {
    /// The conclusion's id.
    pub conclusion: String,
    /// Its assessment's id.
    pub assessment: String,
    /// The assessment's subject.
    pub subject: String,
    /// What was decided.
    pub decision: String,
    /// Who reviewed it (computed from the consultations it cites).
    pub reviewed_by: Vec<String>,
    /// How its newest validation went.
    pub validation: String,
}

/// An assessment in dispute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispute {
    /// The assessment's id.
    pub assessment: String,
    /// Its subject.
    pub subject: String,
    /// The unresolved disagreement, if one is recorded.
    pub disagreement: Option<String>,
    /// The question an experiment must answer (absent when no disagreement is recorded).
    pub discriminating_question: Option<String>,
}

/// An assessment still open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenAssessment {
    /// Its id.
    pub assessment: String,
    /// Its subject.
    pub subject: String,
    /// `open` or `planned`.
    pub state: State,
    /// Its materiality.
    pub materiality: Materiality,
}

/// An advisor left out for now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoolingAdvisor {
    /// Its id.
    pub advisor: String,
    /// `rate_limited`, `temporarily_failed` or `over_budget`.
    pub status: Status,
    /// Until when, if known.
    pub until: Option<String>,
    /// Why.
    pub reason: String,
}

/// The context of `status`'s task with `advisors`' circuit.
pub fn context(status: &StatusView, advisors: &AdvisorsView) -> ContextView {
    let mut standing = Vec::new();
    let mut disputed = Vec::new();
    let mut open = Vec::new();
    // Newest first: what the last session did is what the next one needs.
    for assessment in status.assessments.iter().rev() {
        for conclusion in assessment.conclusions.iter().rev() {
            if conclusion.superseded_by.is_none() && !conclusion.unverified {
                standing.push(StandingConclusion {
                    conclusion: conclusion.id.clone(),
                    assessment: assessment.id.clone(),
                    subject: assessment.subject.clone(),
                    decision: conclusion.decision.clone(),
                    reviewed_by: conclusion.reviewed_by.clone(),
                    validation: conclusion.validation.as_str().to_string(),
                });
            }
        }
        match assessment.state {
            State::Disputed => {
                let unresolved = assessment.disagreements.iter().rev().find(|d| !d.resolved);
                disputed.push(Dispute {
                    assessment: assessment.id.clone(),
                    subject: assessment.subject.clone(),
                    disagreement: unresolved.map(|d| d.id.clone()),
                    discriminating_question: unresolved.map(|d| d.discriminating_question.clone()),
                });
            }
            State::Open | State::Planned => open.push(OpenAssessment {
                assessment: assessment.id.clone(),
                subject: assessment.subject.clone(),
                state: assessment.state,
                materiality: assessment.materiality,
            }),
            State::Concluded | State::Validated => {}
        }
    }
    let cooling = advisors
        .advisors
        .iter()
        .filter(|a| {
            matches!(
                a.status,
                Status::RateLimited | Status::TemporarilyFailed | Status::OverBudget
            )
        })
        .map(|a| CoolingAdvisor {
            advisor: a.id.clone(),
            status: a.status,
            until: a.until.clone(),
            reason: a.reason.clone(),
        })
        .collect();
    let in_catalogue = advisors
        .advisors
        .iter()
        .map(|a| (a.id.as_str(), true, &a.track_record));
    let former = advisors
        .former
        .iter()
        .map(|f| (f.id.as_str(), false, &f.track_record));
    let track = in_catalogue
        .chain(former)
        .filter(|(_, _, t)| !t.is_empty())
        .map(|(advisor, in_catalogue, t)| TrackLine {
            advisor: advisor.to_string(),
            in_catalogue,
            track_record: t.clone(),
        })
        .collect();
    ContextView {
        task: status.task.clone(),
        mode: advisors.mode,
        standing: Section::cut(standing),
        disputed: Section::cut(disputed),
        open: Section::cut(open),
        cooling: Section::cut(cooling),
        track: Section::cut_to(track, MAX_TRACK_LINES),
        resting: Section::cut(status.resting_on_superseded.iter().rev().cloned().collect()),
        journal: status.journal.clone(),
    }
}
