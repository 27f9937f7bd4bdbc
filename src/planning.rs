//! What a plan and a question are made from: the policy's inputs judged at the edge (the
//! catalogue, the mode, availability from presence and history, the budgets) and the prompt
//! built from an assessment. Shared by the network-free verbs (`service`) and the daemon's
//! job (`daemon::runner`), below both.

use crate::context::Resolved;
use crate::core::availability::{self, AvailabilityInput};
use crate::core::cost::{BudgetInput, BudgetState};
use crate::core::invariants::{InForce, TaskInvariants};
use crate::core::policy::PlanEnv;
use crate::core::records::Record;
use crate::error::Error;
use crate::store::Store;
use time::OffsetDateTime;

/// What the policy needs for plans and previews: the catalogue, the mode and every
/// advisor's availability at `now`, judged on the asking process's presence and the
/// consultations recorded in every task of the state directory.
pub fn plan_env<'r>(
    resolved: &'r Resolved,
    store: &Store,
    now: OffsetDateTime,
) -> Result<PlanEnv<'r>, Error> {
    // Budgets look at the task and the day, not only the tail the circuit needs; with no
    // limit in force there is nothing to judge and nothing to read.
    let (history, spend) = store.plan_history(&resolved.task, now, !resolved.budgets.is_empty())?;
    let budget = match spend {
        Some(spend) => budget_state(resolved, &spend, now),
        None => BudgetState::default(),
    };
    let availability = availability::assess(&AvailabilityInput {
        catalogue: &resolved.catalogue,
        mode: resolved.mode,
        disable: &resolved.disable,
        presence: &resolved.presence,
        history: &history,
        cooldown_override_s: resolved.cooldown_override_s,
        now,
        budget: Some(&budget),
    });
    Ok(PlanEnv {
        catalogue: &resolved.catalogue,
        mode: resolved.mode,
        availability,
        budget_exhausted: budget.total_exhausted().map(|l| l.reason.clone()),
        asker: resolved.asker.clone(),
    })
}

/// Every spending limit in force for the resolved context and what was spent against it
/// by `now`; the task's window is the context's task.
pub fn budget_state(resolved: &Resolved, history: &[Record], now: OffsetDateTime) -> BudgetState {
    BudgetState::evaluate(&BudgetInput {
        catalogue: &resolved.catalogue,
        budgets: &resolved.budgets,
        history,
        task: Some(resolved.task.as_str()),
        now,
        offset: resolved.utc_offset,
    })
}

/// The invariants in force for the resolved task: the user's global ones and the
/// project's (read from their files now), with `task`'s own (the fold of its records, see
/// `Store::with_lookups`) on top.
pub fn invariants_for(resolved: &Resolved, task: &TaskInvariants) -> Result<Vec<InForce>, Error> {
    let outer = crate::invariants::outer_here(&resolved.root)?;
    Ok(crate::invariants::in_force(&outer, task))
}

/// The prompt every advisor of a consultation on `assessment` is sent: the question built
/// from its fields, `extra` (`--question`), `prior` (`--prior-opinion`, marked as an
/// opinion) and the `invariants` in force (marked as the team's constraints). The job
/// sends it; `--preview-prompt` prints it.
pub fn prompt_for(
    assessment: &crate::core::records::Assessment,
    extra: Option<&str>,
    prior: Option<&str>,
    invariants: &[InForce],
) -> String {
    use advisord_adapters::question;
    question::build(&question::Question {
        subject: assessment.subject.clone(),
        materiality: assessment.materiality.as_str().to_string(),
        hypothesis: assessment.hypothesis.clone(),
        facts: assessment.facts.clone(),
        assumptions: assessment.assumptions.clone(),
        questions: assessment.questions.clone(),
        evidence: assessment
            .evidence
            .iter()
            .map(|e| {
                (
                    e.kind.as_str().to_string(),
                    e.reference.clone(),
                    e.showed.clone().unwrap_or_default(),
                )
            })
            .collect(),
        prior_opinion: prior.map(str::to_string),
        extra_question: extra.map(str::to_string),
        invariants: invariants
            .iter()
            .map(|i| {
                (
                    i.name.clone(),
                    i.scope.as_str().to_string(),
                    i.description.clone(),
                )
            })
            .collect(),
    })
}
