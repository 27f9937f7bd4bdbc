//! The eight tools: their names, short descriptions, flat input schemas (no `$ref`, no
//! `anyOf`, no defaults inside combinators: some hosts rewrite or reject those), output
//! schemas and hints; and the reading of a call's arguments into a verb's request, with
//! errors that name the argument and what it accepts.

use crate::core::records::{Confidence, Materiality};
use crate::protocol::{JobId, RecordId, Timeout};
use advisord_core::UnknownName;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};
use std::sync::Arc;

/// Every tool, in the order `tools/list` gives them.
pub const NAMES: [&str; 8] = [
    "advisors", "plan", "record", "consult", "job", "cancel", "status", "explain",
];

/// The `root` and `task` arguments every tool about a project takes.
fn located(mut properties: Value) -> Value {
    properties["root"] =
        json!({"type": "string", "description": "Project root (default: the server's)"});
    properties["task"] = json!({"type": "string", "description": "Task (default: the server's)"});
    properties
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn input(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    object(schema)
}

fn output(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    object(json!({"type": "object", "properties": properties, "required": required}))
}

/// The output schema of `consult` and `job`: the job with its outcomes written out.
fn outcomes_schema() -> Arc<JsonObject> {
    output(
        json!({
            "id": {"type": "string"},
            "state": {"type": "string", "enum": ["queued", "running", "done", "cancelled", "failed"]},
            "consultations": {"type": "array", "items": {"type": "object", "properties": {
                "advisor": {"type": "string"},
                "status": {"type": "string"},
                "conclusion": {"type": ["string", "null"]},
                "stance": {"type": ["string", "null"]}
            }}},
            "disagreement_detail": {"type": ["object", "null"]}
        }),
        &["id", "state", "consultations", "disagreement_detail"],
    )
}

fn tool(
    name: &'static str,
    description: &'static str,
    input_schema: Arc<JsonObject>,
    output_schema: Arc<JsonObject>,
    read_only: bool,
) -> Tool {
    let hints = ToolAnnotations::new()
        .read_only(read_only)
        .destructive(false)
        .open_world(name == "consult");
    Tool::new(name, description, input_schema)
        .with_raw_output_schema(output_schema)
        .annotate(hints)
}

/// The tools, as `tools/list` answers.
pub fn list() -> Vec<Tool> {
    let materiality = Materiality::ALL.map(Materiality::as_str);
    let confidence = Confidence::ALL.map(Confidence::as_str);
    vec![
        tool(
            "advisors",
            "Every advisor, its status and why; capacity per capability.",
            input(located(json!({})), &[]),
            output(
                json!({"mode": {"type": "string"}, "advisors": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "string"},
                    "status": {"type": "string"},
                    "track_record": {"type": "object", "description": "Information only: no plan reads it", "properties": {
                        "resolutions": {"type": "integer"},
                        "favoured": {"type": "integer"},
                        "disfavoured": {"type": "integer"}
                    }, "required": ["resolutions", "favoured", "disfavoured"]}
                }, "required": ["id", "status", "track_record"]}}, "capacity": {"type": "object"}, "former": {"type": "array"}}),
                &["mode", "advisors", "capacity"],
            ),
            true,
        ),
        tool(
            "plan",
            "Preview who would be consulted for a doubt, who not, and why (not recorded).",
            input(
                located(json!({
                    "materiality": {"type": "string", "enum": materiality},
                    "confidence": {"type": "string", "enum": confidence, "description": "Default medium"},
                    "capabilities": {"type": "array", "items": {"type": "string"}, "description": "Default independent_reasoning"}
                })),
                &["materiality"],
            ),
            output(
                json!({"mode": {"type": "string"}, "budget": {"type": "integer"}, "selected": {"type": "array"}, "left_out": {"type": "array"}}),
                &["mode", "budget", "selected", "left_out"],
            ),
            true,
        ),
        tool(
            "record",
            "Store one record through the writer: an object with `kind` plus your fields.",
            input(
                located(
                    json!({"record": {"type": "object", "description": "kind (assessment, plan, disagreement, resolution, conclusion, validation, attempt, invariant) plus its fields; consultations are written by the daemon's jobs only"}}),
                ),
                &["record"],
            ),
            output(
                json!({"id": {"type": "string"}, "kind": {"type": "string"}, "sequence": {"type": "integer"}}),
                &["id", "kind", "sequence"],
            ),
            false,
        ),
        tool(
            "consult",
            "Consult the advisors a plan selects on an assessment (an id, or one to record \
             first), all at once; waits up to the server's cap, then returns the job with \
             every outcome so far. If not done, call `job` with wait.",
            input(
                located(json!({
                    "assessment": {"type": "string", "description": "Assessment id"},
                    "record": {"type": "object", "description": "Or: an assessment to record first (its fields)"},
                    "question": {"type": "string"},
                    "prior_opinion": {"type": "string"},
                    "timeout_s": {"type": "number", "description": "Deadline of every exchange (default 90)"},
                    "wait": {"type": "boolean", "description": "Wait for the outcomes (default true); false answers at once with the job id"}
                })),
                &[],
            ),
            outcomes_schema(),
            false,
        ),
        tool(
            "job",
            "A consultation job with every outcome so far; with wait, waits up to the \
             server's cap for it to end.",
            input(
                json!({
                    "id": {"type": "string", "description": "Job id"},
                    "wait": {"type": "boolean", "description": "Wait for it to end (default false)"}
                }),
                &["id"],
            ),
            outcomes_schema(),
            true,
        ),
        tool(
            "cancel",
            "Cancel a job; exchanges in flight are stopped and recorded as cancelled.",
            input(
                json!({"id": {"type": "string", "description": "Job id"}}),
                &["id"],
            ),
            output(
                json!({"id": {"type": "string"}, "state": {"type": "string"}}),
                &["id", "state"],
            ),
            false,
        ),
        tool(
            "status",
            "Each assessment of the task and where it stands; consultations, disagreements, \
             conclusions, tokens.",
            input(located(json!({})), &[]),
            output(
                json!({"records": {"type": "integer"}, "assessments": {"type": "array"}}),
                &["records", "assessments"],
            ),
            true,
        ),
        tool(
            "explain",
            "The whole provenance chain of a record.",
            input(
                located(json!({"id": {"type": "string", "description": "Record id"}})),
                &["id"],
            ),
            output(
                json!({"asked": {"type": "object"}, "path": {"type": "array"}}),
                &["asked", "path"],
            ),
            true,
        ),
    ]
}

/// The arguments of one call, read field by field; every error names the argument and
/// what it accepts.
pub struct Args {
    tool: &'static str,
    map: JsonObject,
}

/// A bad argument: the message says which and what is accepted.
pub type ArgError = String;

impl Args {
    /// The arguments of `tool`. An argument the tool does not take is refused when its
    /// name is a near miss of one it takes (a typo: the same letters but for case, `_` and
    /// `-`, or at most two edits away), naming the one meant; any other is ignored, since
    /// hosts add arguments of their own to every tool (Gemini CLI's `wait_for_previous`).
    pub fn new(tool: &'static str, map: Option<JsonObject>) -> Result<Args, ArgError> {
        let map = map.unwrap_or_default();
        let accepted = accepted(tool);
        for unknown in map.keys().filter(|k| !accepted.contains(&k.as_str())) {
            match accepted.iter().find(|name| near_miss(unknown, name)) {
                Some(meant) => {
                    return Err(format!(
                        "`{tool}` takes no argument `{unknown}` (did you mean `{meant}`?); \
                         accepted: {}",
                        accepted.join(", ")
                    ))
                }
                None => {
                    tracing::debug!(tool, argument = %unknown, "an argument the tool does not take is ignored")
                }
            }
        }
        Ok(Args { tool, map })
    }

    fn wrong(&self, name: &str, what: &str) -> ArgError {
        format!(
            "`{name}` of `{}` must be {what}; got {}",
            self.tool,
            self.map.get(name).map(Value::to_string).unwrap_or_default()
        )
    }

    /// An optional string.
    pub fn string(&self, name: &str) -> Result<Option<String>, ArgError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong(name, "a string")),
        }
    }

    /// A required string.
    pub fn required(&self, name: &str, what: &str) -> Result<String, ArgError> {
        match self.string(name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(format!("`{}` needs `{name}`: {what}", self.tool)),
        }
    }

    /// An optional boolean.
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, ArgError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong(name, "true or false")),
        }
    }

    /// An optional JSON object.
    pub fn object(&self, name: &str) -> Result<Option<JsonObject>, ArgError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o.clone())),
            Some(_) => Err(self.wrong(name, "a JSON object")),
        }
    }

    /// An optional list of strings.
    pub fn strings(&self, name: &str) -> Result<Vec<String>, ArgError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| self.wrong(name, "a list of strings")),
            Some(_) => Err(self.wrong(name, "a list of strings")),
        }
    }

    /// A materiality (required).
    pub fn materiality(&self) -> Result<Materiality, ArgError> {
        let names = Materiality::ALL.map(Materiality::as_str).join(", ");
        let text = self.required("materiality", &format!("one of {names}"))?;
        text.parse().map_err(|e: UnknownName| e.to_string())
    }

    /// A confidence (default medium).
    pub fn confidence(&self) -> Result<Confidence, ArgError> {
        let Some(text) = self.string("confidence")? else {
            return Ok(Confidence::default());
        };
        text.parse().map_err(|e: UnknownName| e.to_string())
    }

    /// `timeout_s`, checked as `--timeout` is.
    pub fn timeout(&self) -> Result<Option<Timeout>, ArgError> {
        match self.map.get("timeout_s") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                let seconds = n.as_f64().unwrap_or(f64::NAN);
                Timeout::from_secs_f64(seconds)
                    .map(Some)
                    .map_err(|e| format!("`timeout_s`: {e}"))
            }
            Some(_) => Err(self.wrong("timeout_s", "a number of seconds")),
        }
    }

    /// A job id (required).
    pub fn job(&self) -> Result<JobId, ArgError> {
        self.required("id", "the job id `consult` returned")
            .map(JobId::from)
    }

    /// A record id (required).
    pub fn record_id(&self) -> Result<RecordId, ArgError> {
        self.required("id", "a record id (`status` lists them)")
            .map(RecordId::from)
    }
}

/// Whether `given` is a typo of `name`: equal but for case, `_` and `-`, or at most two
/// edits away (one for names of four letters or fewer).
fn near_miss(given: &str, name: &str) -> bool {
    let plain = |s: &str| -> Vec<char> {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let (a, b) = (plain(given), plain(name));
    if a == b {
        return true;
    }
    let allowed = if b.len() <= 4 { 1 } else { 2 };
    if a.len().abs_diff(b.len()) > allowed {
        return false;
    }
    // Levenshtein distance, one row at a time.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()] <= allowed
}

/// The arguments `tool` accepts, from its input schema.
fn accepted(tool: &str) -> Vec<&'static str> {
    let located = ["root", "task"];
    let own: &[&'static str] = match tool {
        "plan" => &["materiality", "confidence", "capabilities"],
        "record" => &["record"],
        "consult" => &[
            "assessment",
            "record",
            "question",
            "prior_opinion",
            "timeout_s",
            "wait",
        ],
        "job" => return vec!["id", "wait"],
        "cancel" => return vec!["id"],
        "explain" => &["id"],
        _ => &[],
    };
    own.iter().copied().chain(located).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key a schema holds, at any depth.
    fn keys(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    out.push(k.clone());
                    keys(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    #[test]
    fn eight_tools_with_flat_inputs_that_name_their_arguments() {
        let tools = list();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, NAMES);
        for tool in &tools {
            let schema = Value::Object((*tool.input_schema).clone());
            let mut all = Vec::new();
            keys(&schema, &mut all);
            for banned in ["$ref", "anyOf", "oneOf", "allOf", "$defs", "default"] {
                assert!(
                    !all.iter().any(|k| k == banned),
                    "{} has {banned}",
                    tool.name
                );
            }
            let properties: Vec<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(properties, accepted(&tool.name), "{}", tool.name);
            assert!(tool.output_schema.is_some(), "{}", tool.name);
            assert!(
                tool.description.as_ref().unwrap().len() <= 220,
                "{}",
                tool.name
            );
        }
    }

    #[test]
    fn arguments_are_named_when_wrong() {
        let args = |v: Value| Args::new("plan", v.as_object().cloned());
        let err = args(json!({"materialty": "high"})).err().unwrap();
        assert!(
            err.contains("`materialty` (did you mean `materiality`?)")
                && err.contains("materiality, confidence"),
            "{err}"
        );
        for typo in ["Materiality", "capabilites", "con-fidence", "tsk"] {
            assert!(args(json!({typo: 1})).is_err(), "{typo} is refused");
        }
        // What a host adds to every tool is ignored.
        let added = Args::new(
            "consult",
            json!({"assessment": "a", "wait_for_previous": true, "_meta": {}})
                .as_object()
                .cloned(),
        )
        .expect("host arguments are ignored");
        assert_eq!(added.string("assessment").unwrap().as_deref(), Some("a"));
        assert!(Args::new(
            "job",
            json!({"id": "j", "wait_for_previous": false})
                .as_object()
                .cloned()
        )
        .is_ok());
        let err = args(json!({})).unwrap().materiality().unwrap_err();
        assert!(
            err.contains("`materiality`") && err.contains("critical"),
            "{err}"
        );
        let err = args(json!({"materiality": "huge"}))
            .unwrap()
            .materiality()
            .unwrap_err();
        assert_eq!(
            err,
            "`huge` is not a materiality; accepted: trivial, low, material, high, critical"
        );
        let err = args(json!({"capabilities": "a"}))
            .unwrap()
            .strings("capabilities")
            .unwrap_err();
        assert!(err.contains("a list of strings"), "{err}");
        let consult = Args::new("consult", json!({"timeout_s": -1}).as_object().cloned()).unwrap();
        assert!(consult.timeout().unwrap_err().contains("timeout_s"));
    }
}
