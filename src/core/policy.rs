//! The policy (SPEC §6): mode, budget, greedy explained selection, local review, reuse.

use crate::core::catalogue::Catalogue;
use crate::core::records::{AdvisorAvailability, Mode};

/// What computing a plan needs besides the assessment and the task's records.
pub struct PlanEnv<'a> {
    /// The catalogue in force.
    pub catalogue: &'a Catalogue,
    /// The mode in force.
    pub mode: Mode,
    /// Each advisor's availability now, in catalogue order.
    pub availability: Vec<AdvisorAvailability>,
}

use crate::core::records::{Assessment, Confidence, Materiality, Plan, Record};

/// Advisors a plan may select for `materiality` in `mode`, after the high-confidence rule.
pub fn budget(mode: Mode, materiality: Materiality, confidence: Confidence) -> u32 {
    let _ = (mode, materiality, confidence);
    todo!("policy: budget table")
}

/// Compute the plan for `assessment` (stored as `assessment_id`) given the task's records
/// (for reuse of a standing conclusion) and the environment.
pub fn compute_plan(
    assessment_id: &str,
    assessment: &Assessment,
    task_records: &[Record],
    env: &PlanEnv,
) -> Plan {
    let _ = (assessment_id, assessment, task_records, env);
    todo!("policy: compute_plan")
}

/// The standing (not superseded) conclusion whose assessment's normalised subject equals
/// `subject`'s, if any.
pub fn standing_conclusion<'r>(task_records: &'r [Record], subject: &str) -> Option<&'r Record> {
    let _ = (task_records, subject);
    todo!("policy: standing_conclusion")
}

/// A subject case-folded with whitespace collapsed, for reuse matching.
pub fn normalise_subject(subject: &str) -> String {
    subject
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}
