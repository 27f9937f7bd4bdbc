//! The one writer's rules: turn a caller's JSON into a record, or refuse it with a reason
//! code (SPEC §4, §12). Pure: the store passes in the task's records, the id, the
//! sequence and the clock, and persists what comes back.

use crate::core::policy::PlanEnv;
use crate::core::records::{Record, TaskName};
use serde::Serialize;

/// Why the writer refused a record. The snake_case names are fixed by SPEC §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// Material, high or critical doubt without evidence.
    MaterialWithoutEvidence,
    /// A plan whose fields the caller supplied.
    PlanIsComputed,
    /// A consultation for an advisor the plan did not select.
    AdvisorNotSelected,
    /// A second consultation for the same advisor and plan.
    DuplicateConsultation,
    /// A completed consultation without a conclusion.
    CompletedWithoutConclusion,
    /// A failed consultation with a conclusion.
    FailedWithConclusion,
    /// A disagreement with fewer than two positions.
    TooFewPositions,
    /// A position from a consultation that did not complete.
    PositionNotCompleted,
    /// A resolution without evidence.
    ResolutionWithoutEvidence,
    /// A conclusion while a disagreement on its assessment is open.
    UnresolvedDisagreement,
    /// A conclusion that does not cite a completed consultation of its assessment.
    AnswerNotWeighed,
    /// A material conclusion without a validation plan.
    MaterialWithoutValidationPlan,
    /// A new-evidence conclusion that does not name the standing one.
    SupersedesMissing,
    /// A computed or envelope field supplied by the caller.
    ComputedFieldSupplied,
    /// A reference to an id that is not a record of the right kind in the task.
    UnknownReference,
    /// A bad enum value, empty or multi-line subject, oversize or unknown field.
    InvalidField,
    /// A bad task name.
    InvalidTask,
}

impl ReasonCode {
    /// The code as written in refusals.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::MaterialWithoutEvidence => "material_without_evidence",
            ReasonCode::PlanIsComputed => "plan_is_computed",
            ReasonCode::AdvisorNotSelected => "advisor_not_selected",
            ReasonCode::DuplicateConsultation => "duplicate_consultation",
            ReasonCode::CompletedWithoutConclusion => "completed_without_conclusion",
            ReasonCode::FailedWithConclusion => "failed_with_conclusion",
            ReasonCode::TooFewPositions => "too_few_positions",
            ReasonCode::PositionNotCompleted => "position_not_completed",
            ReasonCode::ResolutionWithoutEvidence => "resolution_without_evidence",
            ReasonCode::UnresolvedDisagreement => "unresolved_disagreement",
            ReasonCode::AnswerNotWeighed => "answer_not_weighed",
            ReasonCode::MaterialWithoutValidationPlan => "material_without_validation_plan",
            ReasonCode::SupersedesMissing => "supersedes_missing",
            ReasonCode::ComputedFieldSupplied => "computed_field_supplied",
            ReasonCode::UnknownReference => "unknown_reference",
            ReasonCode::InvalidField => "invalid_field",
            ReasonCode::InvalidTask => "invalid_task",
        }
    }
}

/// A refusal: the reason code and one plain sentence naming the rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The fixed reason code.
    pub reason: ReasonCode,
    /// One sentence: what was wrong and what is accepted.
    pub message: String,
}

/// What the writer needs besides the caller's JSON and the task's records.
pub struct WriteEnv<'a> {
    /// The task written to.
    pub task: &'a TaskName,
    /// The clock, RFC 3339 UTC, for `created_at` and `finished_at`.
    pub now: time::OffsetDateTime,
    /// The new record's id (a ULID).
    pub id: String,
    /// The new record's sequence (one above the task's highest).
    pub sequence: u64,
    /// What the policy needs to compute a plan; `None` refuses plan records.
    pub plan_env: Option<&'a PlanEnv<'a>>,
}

/// Admit the caller's `input` (one JSON object: `kind` plus fields) against the task's
/// `existing` records, returning the record to store or a refusal.
pub fn admit(
    existing: &[Record],
    input: &serde_json::Value,
    env: &WriteEnv,
) -> Result<Record, Refusal> {
    let _ = (existing, input, env);
    todo!("writer: admit")
}
