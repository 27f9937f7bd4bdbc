//! The one writer's rules: turn a caller's JSON into a record, or refuse it with a reason
//! code. Pure: the store passes in the task's records, the id, the
//! sequence and the clock, and persists what comes back.

#[cfg(test)]
mod admitted;
mod fields;
mod rules;
#[cfg(test)]
mod tests;

pub use rules::Index;

pub use fields::{
    caller_fields, field_docs, template, FieldDoc, COMPUTED_FIELDS, ENVELOPE_FIELDS,
    MAX_ASKED_CHARS, MAX_DIAGNOSTIC_CHARS, MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_PROMPT_CHARS,
    MAX_SUBJECT_CHARS, MAX_TEXT_CHARS, MAX_TOKENS, PLAN_INPUTS,
};

use crate::core::chain::link::{self, GENESIS};
use crate::core::chain::trust::Trust;
use crate::core::policy::{self, PlanEnv};
use crate::core::records::{Body, Envelope, Kind, Record, TaskName, SCHEMA_VERSION};
use crate::core::redact;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Why the writer refused a record. The snake_case names are fixed: tests outside the repository match on them.
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
    /// A write into a task whose chain is broken: the writer never builds on what
    /// `verify` does not vouch for.
    ChainBroken,
    /// A consultation given to `record`: only the daemon writes consultations.
    ConsultationByDaemonOnly,
    /// A material conclusion that does not account for an invariant in force.
    InvariantUnaddressed,
    /// A conclusion that breaks an invariant without deciding to remove or narrow it.
    InvariantViolated,
}

impl ReasonCode {
    /// Every code, in the order `docs/records.md` lists them.
    pub const ALL: [ReasonCode; 21] = [
        ReasonCode::MaterialWithoutEvidence,
        ReasonCode::PlanIsComputed,
        ReasonCode::AdvisorNotSelected,
        ReasonCode::DuplicateConsultation,
        ReasonCode::CompletedWithoutConclusion,
        ReasonCode::FailedWithConclusion,
        ReasonCode::TooFewPositions,
        ReasonCode::PositionNotCompleted,
        ReasonCode::ResolutionWithoutEvidence,
        ReasonCode::UnresolvedDisagreement,
        ReasonCode::AnswerNotWeighed,
        ReasonCode::MaterialWithoutValidationPlan,
        ReasonCode::SupersedesMissing,
        ReasonCode::ComputedFieldSupplied,
        ReasonCode::UnknownReference,
        ReasonCode::InvalidField,
        ReasonCode::InvalidTask,
        ReasonCode::ChainBroken,
        ReasonCode::ConsultationByDaemonOnly,
        ReasonCode::InvariantUnaddressed,
        ReasonCode::InvariantViolated,
    ];

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
            ReasonCode::ChainBroken => "chain_broken",
            ReasonCode::ConsultationByDaemonOnly => "consultation_by_daemon_only",
            ReasonCode::InvariantUnaddressed => "invariant_unaddressed",
            ReasonCode::InvariantViolated => "invariant_violated",
        }
    }
}

/// What writes consultations, as a refusal names it.
const WHO_WRITES_CONSULTATIONS: &str = "a consultation job (`advisor-consult consult ID`, \
     the MCP tool `consult` or `POST /api/v1/consultations`), a relayed mesh answer or an \
     answered inbox review (`advisor-consult reviews answer ID`)";

/// Refuse `input` when it is a consultation given to the `record` verb: a consultation says
/// that an advisor was asked and answered, so only the daemon's jobs write one (every
/// surface of `record`, the daemon's and `--no-daemon` alike, asks this first).
pub fn refuse_consultation_by_caller(input: &Value) -> Result<(), Refusal> {
    if input.get("kind").and_then(Value::as_str) != Some(Kind::Consultation.as_str()) {
        return Ok(());
    }
    Err(refuse(
        ReasonCode::ConsultationByDaemonOnly,
        format!(
            "a consultation cannot be recorded by hand: it says that an advisor was asked and \
             answered, so only the daemon writes one, from {WHO_WRITES_CONSULTATIONS}; ask for \
             the review with `advisor-consult consult ASSESSMENT_ID` and cite the consultations \
             it records"
        ),
    ))
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
    /// The new record's `prev`: the hash of the task's newest record's stored bytes, or
    /// [`GENESIS`] in an empty task.
    pub prev: String,
    /// Which of `existing` the chain vouches for; a plan never reuses a conclusion it does
    /// not. `None` trusts them all (a caller that has not walked the chain).
    pub trust: Option<&'a Trust>,
    /// The credential values the request itself carried: removed by value from every
    /// string, whatever their shape (named `credential_value` in `redacted`).
    pub secrets: &'a [String],
    /// Whether this is the daemon's own consultation (`Store::write_consultation`): only
    /// then may the input name [`DAEMON_FIELDS`].
    pub daemon: bool,
    /// The global and project invariants in force (`core::invariants::outer`), resolved
    /// from their files at the edge; the task's own come from its records. Empty when the
    /// caller has none to give (`verify` re-admits against the task's own only).
    pub invariants: &'a [crate::core::invariants::InForce],
}

/// Fields only the daemon's own consultations carry (what produced the answer): refused
/// from any other writer as computed, so a caller cannot name its own source.
pub const DAEMON_FIELDS: [&str; 1] = ["source"];

/// Admit the caller's `input` (one JSON object: `kind` plus fields) against the task's
/// `existing` records, returning the record to store or a refusal.
///
/// The checks run in this order, and the first that fails is the refusal: the input is an
/// object; `kind` names a kind; no envelope or computed field is supplied; a plan names
/// only its assessment; every field is known, of its type and within its size; every
/// reference names a record of the right kind; then the rules of the kind.
pub fn admit(
    existing: &[Record],
    input: &serde_json::Value,
    env: &WriteEnv,
) -> Result<Record, Refusal> {
    admit_indexed(existing, None, input, env)
}

/// [`admit`] with the [`Index`] of `existing` kept by the caller (built here when it is
/// `None` or indexes other records): a write then costs the same whatever the task's size.
pub fn admit_indexed(
    existing: &[Record],
    index: Option<&Index>,
    input: &serde_json::Value,
    env: &WriteEnv,
) -> Result<Record, Refusal> {
    let Value::Object(object) = input else {
        return Err(refuse(
            ReasonCode::InvalidField,
            "a record must be one JSON object holding `kind` and the fields of its kind"
                .to_string(),
        ));
    };
    admit_object(existing, index, object.clone(), env)
}

/// [`admit_indexed`] of a JSON object the caller gives up (`readmit_indexed` builds one
/// for each stored record: `verify` would otherwise copy every record's fields once more).
fn admit_object(
    existing: &[Record],
    index: Option<&Index>,
    mut object: serde_json::Map<String, Value>,
    env: &WriteEnv,
) -> Result<Record, Refusal> {
    if let Some(trust) = env.trust.filter(|t| t.is_broken()) {
        return Err(chain_broken(env.task, trust));
    }
    let kind = take_kind(&mut object)?;
    refuse_computed(&object, env.daemon)?;
    let task = rules::Task::indexed(existing, env.task, env.trust, index);
    if kind == Kind::Plan {
        return admit_plan(&task, object, env);
    }
    // Every string is cleaned before any field is judged, so the rules judge the text
    // that is stored: text made only of control characters is empty, and `verify`, which
    // judges the stored text, can never refuse what was admitted.
    // A line break in one-line text is refused as the caller gave it, even one that
    // cleaning would remove (a carriage return).
    fields::check_line_breaks(kind, &object)?;
    let mut shapes = BTreeSet::new();
    for value in object.values_mut() {
        scrub_value(value, env.secrets, &mut shapes);
    }
    fields::check_fields(kind, &mut object)?;
    match kind {
        Kind::Consultation => {
            object.insert("finished_at".into(), Value::String(timestamp(env.now)));
        }
        Kind::Conclusion => {
            object.insert("reviewed_by".into(), Value::Array(Vec::new()));
            object.insert("independent_review_count".into(), Value::from(0));
        }
        _ => {}
    }
    object.insert("kind".into(), Value::String(kind.as_str().into()));
    let mut body: Body = serde_json::from_value(Value::Object(object)).map_err(|e| {
        // The field checks above accept only what the types read; this names the gap.
        refuse(
            ReasonCode::InvalidField,
            format!("{} does not read as a record: {e}", fields::a(kind)),
        )
    })?;
    rules::check(&task, &mut body, env.invariants)?;
    Ok(Record {
        envelope: envelope(env, shapes),
        body,
    })
}

/// The refusal of a write into `task`, whose chain `trust` found broken: what `verify`
/// finds first, and how to set the broken part aside.
fn chain_broken(task: &TaskName, trust: &Trust) -> Refusal {
    let found = trust.first_finding.as_ref().map_or_else(String::new, |f| {
        format!(
            ": `verify` finds `{}` {} ({})",
            f.file,
            f.message,
            f.problem.as_str()
        )
    });
    let from = trust
        .state
        .as_ref()
        .and_then(|s| s.broken_at)
        .map_or_else(String::new, |at| {
            format!(" (the files from `{}` on)", link::record_file(at))
        });
    refuse(
        ReasonCode::ChainBroken,
        format!(
            "the record chain of task `{task}` is broken{found}; the writer appends nothing \
             after a break, so move the broken part{from} out of the task's directory, then \
             run `advisor-consult verify`"
        ),
    )
}

/// A refusal with `reason` and `message`.
fn refuse(reason: ReasonCode, message: String) -> Refusal {
    Refusal { reason, message }
}

/// Remove and read `kind`.
fn take_kind(object: &mut Map<String, Value>) -> Result<Kind, Refusal> {
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    let accepted = fields::listed(&names);
    match object.remove("kind") {
        None => Err(refuse(
            ReasonCode::InvalidField,
            format!("a record needs `kind`, one of {accepted}"),
        )),
        Some(Value::String(name)) => Kind::parse(&name).ok_or_else(|| {
            refuse(
                ReasonCode::InvalidField,
                format!(
                    "`kind` must be one of {accepted}; got `{}`",
                    name.escape_debug()
                ),
            )
        }),
        Some(_) => Err(refuse(
            ReasonCode::InvalidField,
            format!("`kind` must be a string, one of {accepted}"),
        )),
    }
}

/// Refuse any envelope or computed field: those are the writer's to assign (and the
/// daemon's fields, unless the daemon writes).
fn refuse_computed(object: &Map<String, Value>, daemon: bool) -> Result<(), Refusal> {
    let supplied = object.keys().find(|k| {
        ENVELOPE_FIELDS.contains(&k.as_str())
            || COMPUTED_FIELDS.contains(&k.as_str())
            || (!daemon && DAEMON_FIELDS.contains(&k.as_str()))
    });
    match supplied {
        None => Ok(()),
        Some(key) => Err(refuse(
            ReasonCode::ComputedFieldSupplied,
            format!("`{key}` is computed by the writer and cannot be supplied; remove it"),
        )),
    }
}

/// A plan is computed here: the caller names the assessment and, when a job records it,
/// what was asked (`question`, `prior_opinion`, kept; `prompt`, kept only as its size and
/// SHA-256 when somebody was selected to receive it).
fn admit_plan(
    task: &rules::Task,
    mut object: Map<String, Value>,
    env: &WriteEnv,
) -> Result<Record, Refusal> {
    let mut extra: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|k| !PLAN_INPUTS.contains(k))
        .collect();
    extra.sort_unstable();
    if !extra.is_empty() {
        return Err(refuse(
            ReasonCode::PlanIsComputed,
            format!(
                "a plan is computed by the policy, so only `kind`, `assessment` and what was \
                 asked ({}) may be given; remove {}",
                fields::listed(&PLAN_INPUTS[1..]),
                fields::listed(&extra)
            ),
        ));
    }
    // What is kept is cleaned before it is judged; the prompt is hashed as it was sent,
    // then dropped.
    let mut shapes = BTreeSet::new();
    for name in ["question", "prior_opinion"] {
        if let Some(value) = object.get_mut(name) {
            scrub_value(value, env.secrets, &mut shapes);
        }
    }
    fields::check_fields(Kind::Plan, &mut object)?;
    let mut asked = |name: &str| match object.remove(name) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    let prompt = asked("prompt");
    let (question, prior_opinion) = (asked("question"), asked("prior_opinion"));
    let id = object
        .get("assessment")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (_, assessment) = task.assessment("assessment", Kind::Plan, id)?;
    let Some(plan_env) = env.plan_env else {
        return Err(refuse(
            ReasonCode::PlanIsComputed,
            "a plan is computed from the catalogue and the advisors' availability, which \
             this writer was not given; record it through `advisor-consult` or the daemon"
                .to_string(),
        ));
    };
    // A conclusion after a break in the chain, or in a task this machine does not vouch
    // for (`foreign`), is not believed, so it is never reused. When everything is believed
    // (the usual case) the rules' index answers at once; otherwise the believed records are
    // looked over, which only a damaged or foreign task pays for.
    let reuse = if assessment.new_evidence {
        None
    } else {
        match env.trust {
            Some(trust) if !trust.all_verified() || trust.foreign().is_some() => {
                let verified: Vec<Record> = task
                    .records()
                    .iter()
                    .filter(|r| trust.may_reuse(r.id()))
                    .cloned()
                    .collect();
                policy::standing_conclusion(&verified, &assessment.subject)
                    .map(|c| c.id().to_string())
            }
            _ => task
                .standing_on_subject(&assessment.subject)
                .map(|c| c.id().to_string()),
        }
    };
    let mut plan = policy::plan_with_reuse(id, assessment, reuse, plan_env);
    plan.assessment = id.to_string();
    plan.question = question;
    plan.prior_opinion = prior_opinion;
    if let Some(prompt) = prompt.filter(|_| !plan.selected.is_empty()) {
        plan.prompt_bytes = Some(prompt.len() as u64);
        let digest = link::digest(prompt.as_bytes());
        plan.prompt_sha256 = Some(digest.trim_start_matches("sha256:").to_string());
    }
    Ok(Record {
        envelope: envelope(env, shapes),
        body: Body::Plan(plan),
    })
}

/// Scrub every string inside `value` (the request's own credential values, then the secret
/// shapes), collecting the names of what was removed.
fn scrub_value(value: &mut Value, secrets: &[String], shapes: &mut BTreeSet<String>) {
    match value {
        Value::String(text) => *text = redact::scrub_with(text, secrets, shapes),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| scrub_value(v, secrets, shapes)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| scrub_value(v, secrets, shapes)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn envelope(env: &WriteEnv, shapes: BTreeSet<String>) -> Envelope {
    Envelope {
        id: env.id.clone(),
        task: env.task.as_str().to_string(),
        sequence: env.sequence,
        created_at: timestamp(env.now),
        schema: SCHEMA_VERSION,
        redacted: shapes.into_iter().collect(),
        prev: Some(env.prev.clone()),
    }
}

/// Admit a stored `record` again, as the writer would today, against the records stored
/// before it (`earlier`): its caller's fields are taken back out of it and admitted at its
/// own id, sequence, time and `prev`. Returns what the writer would store now, to compare
/// with what is stored; `None` for a plan, whose fields the policy computed from a
/// catalogue and an availability that are not kept (only its assessment is checked).
pub fn readmit(
    earlier: &[Record],
    record: &Record,
    task: &TaskName,
) -> Result<Option<Record>, Refusal> {
    readmit_indexed(earlier, None, record, task)
}

/// [`readmit`] with the [`Index`] of `earlier` kept by the caller (a walk of the whole task
/// then stays linear).
pub fn readmit_indexed(
    earlier: &[Record],
    index: Option<&Index>,
    record: &Record,
    task: &TaskName,
) -> Result<Option<Record>, Refusal> {
    let rules = rules::Task::indexed(earlier, task, None, index);
    if let Body::Plan(plan) = &record.body {
        rules.assessment("assessment", Kind::Plan, &plan.assessment)?;
        return Ok(None);
    }
    let now = time::OffsetDateTime::parse(
        &record.envelope.created_at,
        &time::format_description::well_known::Rfc3339,
    )
    .map_err(|_| {
        refuse(
            ReasonCode::InvalidField,
            format!(
                "`created_at` `{}` is not a timestamp the writer writes",
                record.envelope.created_at.escape_debug()
            ),
        )
    })?;
    let Value::Object(mut object) = serde_json::to_value(&record.body).map_err(|e| {
        refuse(
            ReasonCode::InvalidField,
            format!("the record does not serialise: {e}"),
        )
    })?
    else {
        return Err(refuse(
            ReasonCode::InvalidField,
            "the record does not serialise as one JSON object".to_string(),
        ));
    };
    for field in COMPUTED_FIELDS {
        object.remove(field);
    }
    let env = WriteEnv {
        task,
        now,
        id: record.envelope.id.clone(),
        sequence: record.envelope.sequence,
        plan_env: None,
        prev: record
            .envelope
            .prev
            .clone()
            .unwrap_or_else(|| GENESIS.to_string()),
        trust: None,
        // Stored text is already scrubbed: re-admitting it removes nothing more.
        secrets: &[],
        // A stored consultation's source is judged by its shape like any field.
        daemon: true,
        // The files of the time are not kept: the task's own invariants are judged again.
        invariants: &[],
    };
    let mut again = admit_object(earlier, index, object, &env)?;
    match (&mut again.body, &record.body) {
        // The attestation is the daemon's MAC, checked at the edge against its key.
        (Body::Consultation(again), Body::Consultation(stored)) => {
            again.attestation.clone_from(&stored.attestation);
        }
        // Which consultations count depends on their attestations, which the writer was
        // handed when it stored the conclusion; the chain's walk judges the stored review
        // against the consultations it cites.
        (Body::Conclusion(again), Body::Conclusion(stored)) => {
            again.reviewed_by.clone_from(&stored.reviewed_by);
            again.independent_review_count = stored.independent_review_count;
        }
        _ => {}
    }
    Ok(Some(again))
}

/// `now` as written in records: RFC 3339 in UTC with milliseconds and a `Z`, so every
/// timestamp has the same length and sorts as text.
pub fn timestamp(now: time::OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    now.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_else(|_| now.unix_timestamp().to_string())
}
