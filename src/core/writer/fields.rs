//! The caller's fields of each kind and the shape each must have, checked
//! on the raw JSON so that a refusal names the field and what it accepts in our words.

use super::{refuse, ReasonCode, Refusal};
use crate::core::catalogue::{did_you_mean, CAPABILITIES};
use crate::core::invariants;
use crate::core::records::{
    Confidence, EvidenceKind, FailureKind, InvariantAction, InvariantChange, Kind, Materiality,
    Stance, MAX_SHOWED_CHARS, MAX_VALIDATION_OUTPUT_CHARS,
};
use serde_json::{Map, Value};

/// The longest subject, in characters: it is one line, read in lists and trees.
pub const MAX_SUBJECT_CHARS: usize = 200;
/// The longest short name (an advisor id, a capability), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest free text field, in characters.
pub const MAX_TEXT_CHARS: usize = 4000;
/// The most tokens a consultation's `usage` may count each way: far beyond any answer,
/// and far enough below `u64::MAX` that a sum of many stays exact.
pub const MAX_TOKENS: u64 = 1_000_000_000_000;
/// The most items a list field may hold.
pub const MAX_LIST_ITEMS: usize = 100;
/// The longest consultation diagnostic, in characters.
pub const MAX_DIAGNOSTIC_CHARS: usize = 300;

/// The envelope's fields: assigned by the writer, never by the caller.
pub const ENVELOPE_FIELDS: [&str; 7] = [
    "id",
    "task",
    "sequence",
    "created_at",
    "schema",
    "redacted",
    "prev",
];

/// The longest question or prior opinion a plan keeps, in characters (the prompt is cut
/// to a few tens of KiB anyway).
pub const MAX_ASKED_CHARS: usize = 24 * 1024;
/// The longest prompt a plan is given to size and hash, in characters (it is not kept).
pub const MAX_PROMPT_CHARS: usize = 1024 * 1024;

/// Fields of some kind that the writer computes.
pub const COMPUTED_FIELDS: [&str; 6] = [
    "reviewed_by",
    "independent_review_count",
    "finished_at",
    "prompt_bytes",
    "prompt_sha256",
    "attestation",
];

/// What a field's value must look like.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    /// A string of at most this many characters; newlines allowed.
    Text(usize),
    /// A string on one line of at most this many characters.
    Line(usize),
    /// A list of strings.
    Texts,
    /// A list of capability names.
    Capabilities,
    /// A list of evidence references.
    Evidence,
    /// A list of disagreement positions.
    Positions,
    /// One of a fixed set of names.
    Choice(fn() -> Vec<&'static str>),
    /// `true` or `false`.
    Bool,
    /// A number from 0 to 1.
    Fraction,
    /// A whole number, 0 or more.
    Count,
    /// `{"input_tokens": N, "output_tokens": N}`.
    Usage,
    /// The id of a record of this kind in the task.
    Ref(Kind),
    /// A list of ids of records of this kind in the task.
    Refs(Kind),
    /// An invariant's name ([`invariants::check_name`]).
    InvariantName,
    /// A conclusion's list of `{"name", "holds", "evidence", "change", "description"}`.
    InvariantChecks,
    /// A consultation's list of `{"name", "holds": true|false|null, "note"}`.
    InvariantAnswers,
}

impl Shape {
    /// Whether the value is a list (absent reads as empty).
    fn is_list(self) -> bool {
        matches!(
            self,
            Shape::Texts
                | Shape::Capabilities
                | Shape::Evidence
                | Shape::Positions
                | Shape::Refs(_)
                | Shape::InvariantChecks
                | Shape::InvariantAnswers
        )
    }
}

/// One caller field of a kind.
pub(super) struct Field {
    /// Its name in the JSON object.
    pub name: &'static str,
    /// The shape of its value.
    pub shape: Shape,
    /// Whether it must be present (and, for text, not blank).
    pub required: bool,
}

const fn req(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: true,
    }
}

const fn opt(name: &'static str, shape: Shape) -> Field {
    Field {
        name,
        shape,
        required: false,
    }
}

fn materialities() -> Vec<&'static str> {
    Materiality::ALL.iter().map(|m| m.as_str()).collect()
}

fn confidences() -> Vec<&'static str> {
    Confidence::ALL.iter().map(|c| c.as_str()).collect()
}

fn statuses() -> Vec<&'static str> {
    vec!["completed", "failed"]
}

fn failures() -> Vec<&'static str> {
    FailureKind::ALL.iter().map(|f| f.as_str()).collect()
}

fn stances() -> Vec<&'static str> {
    [
        Stance::Supports,
        Stance::Opposes,
        Stance::Alternative,
        Stance::Inconclusive,
    ]
    .iter()
    .map(|s| s.as_str())
    .collect()
}

fn invariant_actions() -> Vec<&'static str> {
    InvariantAction::ALL.iter().map(|a| a.as_str()).collect()
}

fn invariant_changes() -> Vec<&'static str> {
    InvariantChange::ALL.iter().map(|c| c.as_str()).collect()
}

fn evidence_kinds() -> Vec<&'static str> {
    EvidenceKind::ALL.iter().map(|k| k.as_str()).collect()
}

const TEXT: Shape = Shape::Text(MAX_TEXT_CHARS);

const ASSESSMENT: &[Field] = &[
    req("subject", Shape::Line(MAX_SUBJECT_CHARS)),
    req("materiality", Shape::Choice(materialities)),
    opt("confidence", Shape::Choice(confidences)),
    req("hypothesis", TEXT),
    opt("facts", Shape::Texts),
    opt("assumptions", Shape::Texts),
    opt("questions", Shape::Texts),
    opt("evidence", Shape::Evidence),
    opt("capabilities", Shape::Capabilities),
    opt("new_evidence", Shape::Bool),
];

/// A plan's caller names the assessment and, when a job records it, what was asked: the
/// question and prior opinion (kept), and the prompt sent (sized and hashed, not kept).
const PLAN: &[Field] = &[
    req("assessment", Shape::Ref(Kind::Assessment)),
    opt("question", Shape::Text(MAX_ASKED_CHARS)),
    opt("prior_opinion", Shape::Text(MAX_ASKED_CHARS)),
    opt("prompt", Shape::Text(MAX_PROMPT_CHARS)),
];

/// The plan's fields its caller may give; every other one the policy computes.
pub const PLAN_INPUTS: [&str; 4] = ["assessment", "question", "prior_opinion", "prompt"];

const CONSULTATION: &[Field] = &[
    req("plan", Shape::Ref(Kind::Plan)),
    req("advisor", Shape::Line(MAX_NAME_CHARS)),
    req("status", Shape::Choice(statuses)),
    opt("failure", Shape::Choice(failures)),
    opt("diagnostic", Shape::Text(MAX_DIAGNOSTIC_CHARS)),
    opt("conclusion", TEXT),
    opt("stance", Shape::Choice(stances)),
    opt("assumptions", Shape::Texts),
    opt("risks", Shape::Texts),
    opt("actions", Shape::Texts),
    opt("falsifiers", Shape::Texts),
    opt("confidence", Shape::Fraction),
    opt("duration_ms", Shape::Count),
    opt("usage", Shape::Usage),
    opt("retry_after_s", Shape::Count),
    opt("invariants", Shape::InvariantAnswers),
    opt("source", Shape::Line(MAX_NAME_CHARS)),
];

const DISAGREEMENT: &[Field] = &[
    req("assessment", Shape::Ref(Kind::Assessment)),
    req("positions", Shape::Positions),
    opt("divergent_assumptions", Shape::Texts),
    req("discriminating_question", TEXT),
];

const RESOLUTION: &[Field] = &[
    req("disagreement", Shape::Ref(Kind::Disagreement)),
    req("experiment", TEXT),
    req("observed", TEXT),
    req("favours", Shape::Line(MAX_NAME_CHARS)),
    // Optional here so that a missing list is refused as `resolution_without_evidence`.
    opt("evidence", Shape::Evidence),
];

const CONCLUSION: &[Field] = &[
    req("assessment", Shape::Ref(Kind::Assessment)),
    req("decision", TEXT),
    req("rationale", TEXT),
    opt("evidence", Shape::Evidence),
    opt("consultations", Shape::Refs(Kind::Consultation)),
    opt("rejected_alternatives", Shape::Texts),
    opt("risks", Shape::Texts),
    opt("validation_plan", TEXT),
    opt("supersedes", Shape::Ref(Kind::Conclusion)),
    opt("invariants", Shape::InvariantChecks),
];

const VALIDATION: &[Field] = &[
    req("conclusion", Shape::Ref(Kind::Conclusion)),
    req("check", TEXT),
    opt("command", TEXT),
    req("passed", Shape::Bool),
    opt("output", Shape::Text(MAX_VALIDATION_OUTPUT_CHARS)),
];

const ATTEMPT: &[Field] = &[
    req("assessment", Shape::Ref(Kind::Assessment)),
    req("tried", TEXT),
    req("failure_observed", TEXT),
    opt("invalidated_assumption", TEXT),
    opt("updated_hypothesis", TEXT),
];

const INVARIANT: &[Field] = &[
    req("name", Shape::InvariantName),
    req("action", Shape::Choice(invariant_actions)),
    opt("description", TEXT),
    opt("reason", TEXT),
];

/// The caller's fields of `kind`.
pub(super) fn fields(kind: Kind) -> &'static [Field] {
    match kind {
        Kind::Assessment => ASSESSMENT,
        Kind::Plan => PLAN,
        Kind::Consultation => CONSULTATION,
        Kind::Disagreement => DISAGREEMENT,
        Kind::Resolution => RESOLUTION,
        Kind::Conclusion => CONCLUSION,
        Kind::Validation => VALIDATION,
        Kind::Attempt => ATTEMPT,
        Kind::Invariant => INVARIANT,
    }
}

/// The names of the caller's fields of `kind`, for messages and documentation.
pub fn caller_fields(kind: Kind) -> Vec<&'static str> {
    fields(kind).iter().map(|f| f.name).collect()
}

/// `kind` with its article, as read in a sentence.
pub(super) fn a(kind: Kind) -> String {
    match kind {
        Kind::Assessment | Kind::Attempt | Kind::Invariant => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

/// `names` as `` `a`, `b`, `c` ``.
pub(super) fn listed(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a JSON value is, in words, for "got ..." in messages.
fn got(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => "a longer string".to_string(),
        Value::String(s) => format!("`{}`", s.escape_debug()),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

/// Check the keys of `object` (already known to hold no envelope or computed field)
/// against the fields of `kind`, then each value's shape; optional fields given as `null`
/// are removed so that they read as absent.
pub(super) fn check_fields(kind: Kind, object: &mut Map<String, Value>) -> Result<(), Refusal> {
    let known = fields(kind);
    let names = caller_fields(kind);
    for key in object.keys() {
        if !names.contains(&key.as_str()) {
            let hint = did_you_mean(key, &names)
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            return Err(refuse(
                ReasonCode::InvalidField,
                format!(
                    "`{}` is not a field of {}{hint}; accepted fields: {}",
                    key.escape_debug(),
                    a(kind),
                    listed(&names)
                ),
            ));
        }
    }
    for field in known {
        match object.get(field.name) {
            None if field.required => {
                return Err(refuse(
                    ReasonCode::InvalidField,
                    format!("{} needs the field `{}`", a(kind), field.name),
                ))
            }
            // An absent list reads as empty, so that the rules judge it (a resolution
            // without `evidence` is `resolution_without_evidence`, not a parse error).
            None | Some(Value::Null) if field.shape.is_list() => {
                object.insert(field.name.to_string(), Value::Array(Vec::new()));
            }
            None => {}
            Some(Value::Null) if !field.required => {
                object.remove(field.name);
            }
            Some(value) => check_value(kind, field, value)?,
        }
    }
    Ok(())
}

/// Refuse a line break in a one-line field of `kind`, judged on the text as given: a
/// carriage return is a control character that cleaning removes, but the caller meant
/// two lines.
pub(super) fn check_line_breaks(kind: Kind, object: &Map<String, Value>) -> Result<(), Refusal> {
    for field in fields(kind) {
        let (Shape::Line(_), Some(Value::String(text))) = (field.shape, object.get(field.name))
        else {
            continue;
        };
        if has_line_break(text) {
            return Err(line_break(kind, field.name));
        }
    }
    Ok(())
}

fn has_line_break(text: &str) -> bool {
    text.contains(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
}

fn line_break(kind: Kind, name: &str) -> Refusal {
    refuse(
        ReasonCode::InvalidField,
        format!(
            "field `{name}` of {} must be one line; it holds a line break",
            a(kind)
        ),
    )
}

/// A refusal of field `name` of `kind`: it `must` be something, and `value` is not.
fn bad(kind: Kind, name: &str, must: &str, value: &Value) -> Refusal {
    refuse(
        ReasonCode::InvalidField,
        format!(
            "field `{name}` of {} must be {must}; got {}",
            a(kind),
            got(value)
        ),
    )
}

fn check_value(kind: Kind, field: &Field, value: &Value) -> Result<(), Refusal> {
    let name = field.name;
    match field.shape {
        Shape::Text(max) => check_text(kind, name, value, max, false, field.required),
        Shape::Line(max) => check_text(kind, name, value, max, true, field.required),
        Shape::Texts => {
            let items = list(kind, name, value, "a list of strings")?;
            for (i, item) in items.iter().enumerate() {
                check_text(
                    kind,
                    &format!("{name}[{i}]"),
                    item,
                    MAX_TEXT_CHARS,
                    false,
                    false,
                )?;
            }
            Ok(())
        }
        Shape::Capabilities => {
            let items = list(kind, name, value, "a list of capability names")?;
            for (i, item) in items.iter().enumerate() {
                let accepted = listed(CAPABILITIES);
                let must = format!("one of {accepted}");
                match item.as_str() {
                    Some(c) if CAPABILITIES.contains(&c) => {}
                    _ => return Err(bad(kind, &format!("{name}[{i}]"), &must, item)),
                }
            }
            Ok(())
        }
        Shape::Evidence => {
            let items = list(kind, name, value, "a list of evidence objects")?;
            for (i, item) in items.iter().enumerate() {
                check_evidence(kind, &format!("{name}[{i}]"), item)?;
            }
            Ok(())
        }
        Shape::Positions => {
            let items = list(kind, name, value, "a list of position objects")?;
            for (i, item) in items.iter().enumerate() {
                check_position(kind, &format!("{name}[{i}]"), item)?;
            }
            Ok(())
        }
        Shape::Choice(accepted) => {
            let accepted = accepted();
            match value.as_str() {
                Some(s) if accepted.contains(&s) => Ok(()),
                _ => Err(bad(
                    kind,
                    name,
                    &format!("one of {}", listed(&accepted)),
                    value,
                )),
            }
        }
        Shape::Bool => match value {
            Value::Bool(_) => Ok(()),
            _ => Err(bad(kind, name, "`true` or `false`", value)),
        },
        Shape::Fraction => match value.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => Ok(()),
            _ => Err(bad(kind, name, "a number from 0 to 1", value)),
        },
        Shape::Count => match value.as_u64() {
            Some(_) => Ok(()),
            None => Err(bad(kind, name, "a whole number, 0 or more", value)),
        },
        Shape::Usage => check_usage(kind, name, value),
        Shape::Ref(target) => check_id(kind, name, value, target),
        Shape::InvariantName => check_invariant_name(kind, name, value),
        Shape::InvariantChecks => {
            let items = list(kind, name, value, "a list of invariant objects")?;
            for (i, item) in items.iter().enumerate() {
                check_invariant_check(kind, &format!("{name}[{i}]"), item)?;
            }
            Ok(())
        }
        Shape::InvariantAnswers => {
            let items = list(kind, name, value, "a list of invariant answers")?;
            for (i, item) in items.iter().enumerate() {
                check_invariant_answer(kind, &format!("{name}[{i}]"), item)?;
            }
            Ok(())
        }
        Shape::Refs(target) => {
            let must = format!("a list of {} ids", target);
            let items = list(kind, name, value, &must)?;
            for (i, item) in items.iter().enumerate() {
                check_id(kind, &format!("{name}[{i}]"), item, target)?;
            }
            Ok(())
        }
    }
}

/// The items of a list field, refused when it is not a list or holds too many.
fn list<'v>(kind: Kind, name: &str, value: &'v Value, must: &str) -> Result<&'v [Value], Refusal> {
    let Value::Array(items) = value else {
        return Err(bad(kind, name, must, value));
    };
    if items.len() > MAX_LIST_ITEMS {
        return Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "field `{name}` of {} holds {} items; at most {MAX_LIST_ITEMS} are accepted",
                a(kind),
                items.len()
            ),
        ));
    }
    Ok(items)
}

fn check_text(
    kind: Kind,
    name: &str,
    value: &Value,
    max: usize,
    one_line: bool,
    required: bool,
) -> Result<(), Refusal> {
    let Some(text) = value.as_str() else {
        let must = if one_line {
            "a one-line string"
        } else {
            "a string"
        };
        return Err(bad(kind, name, must, value));
    };
    if required && text.trim().is_empty() {
        return Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "field `{name}` of {} must not be empty; control characters and terminal \
                 escape sequences are removed before storing, so text made only of them is \
                 empty",
                a(kind)
            ),
        ));
    }
    if one_line && has_line_break(text) {
        return Err(line_break(kind, name));
    }
    let chars = text.chars().count();
    if chars > max {
        return Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "field `{name}` of {} is {chars} characters long; at most {max} are accepted",
                a(kind)
            ),
        ));
    }
    Ok(())
}

fn check_id(kind: Kind, name: &str, value: &Value, target: Kind) -> Result<(), Refusal> {
    match value.as_str() {
        Some(id) if !id.trim().is_empty() && id.len() <= MAX_NAME_CHARS => Ok(()),
        _ => Err(bad(kind, name, &format!("the id of {}", a(target)), value)),
    }
}

/// Reject keys of a nested object that `accepted` does not list.
fn nested_keys(
    kind: Kind,
    name: &str,
    object: &Map<String, Value>,
    accepted: &[&str],
) -> Result<(), Refusal> {
    match object.keys().find(|k| !accepted.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "`{}` is not a field of `{name}` in {}; accepted fields: {}",
                key.escape_debug(),
                a(kind),
                listed(accepted)
            ),
        )),
    }
}

fn check_evidence(kind: Kind, name: &str, value: &Value) -> Result<(), Refusal> {
    let must = "an evidence object `{\"kind\", \"ref\", \"showed\"}`";
    let Value::Object(object) = value else {
        return Err(bad(kind, name, must, value));
    };
    nested_keys(kind, name, object, &["kind", "ref", "showed"])?;
    let kinds = evidence_kinds();
    let evidence_kind = object.get("kind").unwrap_or(&Value::Null);
    match evidence_kind.as_str() {
        Some(k) if kinds.contains(&k) => {}
        _ => {
            let must = format!("one of {}", listed(&kinds));
            return Err(bad(kind, &format!("{name}.kind"), &must, evidence_kind));
        }
    }
    let reference = object.get("ref").unwrap_or(&Value::Null);
    check_text(
        kind,
        &format!("{name}.ref"),
        reference,
        MAX_TEXT_CHARS,
        false,
        true,
    )?;
    match object.get("showed") {
        None | Some(Value::Null) => Ok(()),
        Some(showed) => check_text(
            kind,
            &format!("{name}.showed"),
            showed,
            MAX_SHOWED_CHARS,
            false,
            false,
        ),
    }
}

fn check_position(kind: Kind, name: &str, value: &Value) -> Result<(), Refusal> {
    let must = "a position object `{\"source\", \"position\"}`";
    let Value::Object(object) = value else {
        return Err(bad(kind, name, must, value));
    };
    nested_keys(kind, name, object, &["source", "position"])?;
    let source = object.get("source").unwrap_or(&Value::Null);
    let source_must = "`executor` or the id of a completed consultation";
    match source.as_str() {
        Some(s) if !s.trim().is_empty() && s.len() <= MAX_NAME_CHARS => {}
        _ => return Err(bad(kind, &format!("{name}.source"), source_must, source)),
    }
    let position = object.get("position").unwrap_or(&Value::Null);
    check_text(
        kind,
        &format!("{name}.position"),
        position,
        MAX_TEXT_CHARS,
        false,
        true,
    )
}

fn check_invariant_name(kind: Kind, name: &str, value: &Value) -> Result<(), Refusal> {
    let Some(text) = value.as_str() else {
        return Err(bad(kind, name, invariants::NAME_RULE, value));
    };
    invariants::check_name(text).map_err(|message| {
        refuse(
            ReasonCode::InvalidField,
            format!("field `{name}` of {}: {message}", a(kind)),
        )
    })
}

fn check_invariant_answer(kind: Kind, name: &str, value: &Value) -> Result<(), Refusal> {
    let must = "an invariant answer `{\"name\", \"holds\", \"note\"}`";
    let Value::Object(object) = value else {
        return Err(bad(kind, name, must, value));
    };
    nested_keys(kind, name, object, &["name", "holds", "note"])?;
    check_invariant_name(
        kind,
        &format!("{name}.name"),
        object.get("name").unwrap_or(&Value::Null),
    )?;
    match object.get("holds") {
        None | Some(Value::Null | Value::Bool(_)) => {}
        Some(other) => {
            return Err(bad(
                kind,
                &format!("{name}.holds"),
                "`true`, `false` or `null`",
                other,
            ))
        }
    }
    match object.get("note") {
        None | Some(Value::Null) => Ok(()),
        Some(note) => check_text(
            kind,
            &format!("{name}.note"),
            note,
            MAX_TEXT_CHARS,
            false,
            false,
        ),
    }
}

/// The keys of one entry of a conclusion's `invariants`.
const INVARIANT_CHECK_KEYS: [&str; 5] = ["name", "holds", "evidence", "change", "description"];

fn check_invariant_check(kind: Kind, name: &str, value: &Value) -> Result<(), Refusal> {
    let must =
        "an invariant object `{\"name\", \"holds\", \"evidence\", \"change\", \"description\"}`";
    let Value::Object(object) = value else {
        return Err(bad(kind, name, must, value));
    };
    nested_keys(kind, name, object, &INVARIANT_CHECK_KEYS)?;
    check_invariant_name(
        kind,
        &format!("{name}.name"),
        object.get("name").unwrap_or(&Value::Null),
    )?;
    let holds = object.get("holds").unwrap_or(&Value::Null);
    if !holds.is_boolean() {
        return Err(bad(
            kind,
            &format!("{name}.holds"),
            "`true` or `false`",
            holds,
        ));
    }
    match object.get("evidence") {
        None | Some(Value::Null) => {}
        Some(evidence) => {
            let field = format!("{name}.evidence");
            let items = list(kind, &field, evidence, "a list of evidence objects")?;
            for (i, item) in items.iter().enumerate() {
                check_evidence(kind, &format!("{field}[{i}]"), item)?;
            }
        }
    }
    let change = match object.get("change") {
        None | Some(Value::Null) => None,
        Some(change) => {
            let accepted = invariant_changes();
            match change.as_str() {
                Some(c) if accepted.contains(&c) => Some(c),
                _ => {
                    let must = format!("one of {}", listed(&accepted));
                    return Err(bad(kind, &format!("{name}.change"), &must, change));
                }
            }
        }
    };
    let description = object.get("description").filter(|v| !v.is_null());
    match (change, description) {
        (Some("narrow"), None) => Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "`{name}` narrows its invariant, so it needs `description`: the narrower \
                 invariant's text"
            ),
        )),
        (Some("narrow"), Some(text)) => check_text(
            kind,
            &format!("{name}.description"),
            text,
            MAX_TEXT_CHARS,
            false,
            true,
        ),
        (_, Some(_)) => Err(refuse(
            ReasonCode::InvalidField,
            format!(
                "`{name}.description` is the narrower text of `\"change\": \"narrow\"`; \
                 remove it, or narrow the invariant"
            ),
        )),
        (_, None) => Ok(()),
    }
}

fn check_usage(kind: Kind, name: &str, value: &Value) -> Result<(), Refusal> {
    let must = "`{\"input_tokens\": N, \"output_tokens\": N}` with whole numbers";
    let Value::Object(object) = value else {
        return Err(bad(kind, name, must, value));
    };
    nested_keys(kind, name, object, &["input_tokens", "output_tokens"])?;
    for key in ["input_tokens", "output_tokens"] {
        let field = object.get(key).unwrap_or(&Value::Null);
        if field.as_u64().filter(|n| *n <= MAX_TOKENS).is_none() {
            return Err(bad(
                kind,
                &format!("{name}.{key}"),
                &format!("a whole number from 0 to {MAX_TOKENS}"),
                field,
            ));
        }
    }
    Ok(())
}

/// One caller field as `record --help` and `record --template` describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDoc {
    /// Its name in the JSON object.
    pub name: &'static str,
    /// Whether the writer refuses a record without it.
    pub required: bool,
    /// What its value must be, in words.
    pub accepts: String,
}

/// The caller's fields of `kind`, in the order the writer checks them, described.
pub fn field_docs(kind: Kind) -> Vec<FieldDoc> {
    fields(kind)
        .iter()
        .map(|f| FieldDoc {
            name: f.name,
            required: f.required,
            accepts: describe(f.shape),
        })
        .collect()
}

fn describe(shape: Shape) -> String {
    match shape {
        Shape::Text(max) => format!("text, at most {max} characters"),
        Shape::Line(max) => format!("one line, at most {max} characters"),
        Shape::Texts => "a list of strings".to_string(),
        Shape::Capabilities => format!("a list of capabilities ({})", CAPABILITIES.join(", ")),
        Shape::Evidence => format!(
            "a list of {{\"kind\", \"ref\", \"showed\"}}; kind one of {}; showed at most \
             {MAX_SHOWED_CHARS} characters",
            evidence_kinds().join(", ")
        ),
        Shape::Positions => {
            "a list of {\"source\": \"executor\" or a consultation id, \"position\"}".to_string()
        }
        Shape::Choice(choices) => format!("one of {}", choices().join(", ")),
        Shape::Bool => "true or false".to_string(),
        Shape::Fraction => "a number from 0 to 1".to_string(),
        Shape::Count => "a whole number, 0 or more".to_string(),
        Shape::Usage => {
            format!("{{\"input_tokens\": N, \"output_tokens\": N}}, N from 0 to {MAX_TOKENS}")
        }
        Shape::Ref(kind) => format!("the id of {} record of the task", a(kind)),
        Shape::Refs(kind) => format!("a list of ids of {kind} records of the task"),
        Shape::InvariantName => format!("an invariant name: {}", invariants::NAME_RULE),
        Shape::InvariantAnswers => {
            "a list of {\"name\", \"holds\": true|false|null, \"note\"}".to_string()
        }
        Shape::InvariantChecks => format!(
            "a list of {{\"name\", \"holds\": true|false, \"evidence\": [...], \"change\"?: {}, \
             \"description\"?: the narrower text}}, one per invariant in force (material, high, critical)",
            invariant_changes().join(" | ")
        ),
    }
}

/// A skeleton of `kind` to fill in: `kind` and every caller field, each with a
/// placeholder saying what goes there. Optional fields the skeleton leaves `null` may
/// stay so (the writer reads `null` as absent); every placeholder string must be replaced.
pub fn template(kind: Kind) -> Value {
    let mut object = Map::new();
    object.insert("kind".into(), kind.as_str().into());
    for field in fields(kind) {
        let placeholder = |text: String| -> Value {
            if field.required {
                Value::String(format!("<{text}>"))
            } else {
                Value::Null
            }
        };
        let value = match field.shape {
            Shape::Text(_) | Shape::Line(_) | Shape::InvariantName => {
                placeholder(field.name.replace('_', " "))
            }
            Shape::InvariantChecks | Shape::InvariantAnswers => Value::Array(Vec::new()),
            Shape::Choice(choices) => placeholder(choices().join(" | ")),
            Shape::Ref(of) => placeholder(format!("{of} id")),
            Shape::Texts | Shape::Capabilities | Shape::Refs(_) => Value::Array(Vec::new()),
            Shape::Evidence => serde_json::json!([{
                "kind": format!("<{}>", evidence_kinds().join(" | ")),
                "ref": "<where it is: a path, a test name, a command...>",
                "showed": "<what it showed>",
            }]),
            Shape::Positions => serde_json::json!([
                {"source": "executor", "position": "<your position>"},
                {"source": "<consultation id>", "position": "<its position>"},
            ]),
            Shape::Bool | Shape::Fraction | Shape::Count | Shape::Usage => Value::Null,
        };
        object.insert(field.name.into(), value);
    }
    Value::Object(object)
}
