//! The process adapter's own catalogue settings, read and checked once per catalogue entry.
//!
//! - `args` (list of strings): the arguments; an element containing `{prompt}` gets the
//!   prompt substituted (standard input is then closed empty), otherwise the prompt goes to
//!   standard input;
//! - `env` (map of strings): extra variables set for the process;
//! - `pass_env` (list of variable names): passed through from the asking process when set
//!   (the CLI's own credential variables); when one is set the `preflight` is skipped, the
//!   key being the login;
//! - `preflight` (non-empty list of strings): a cheap command run (bounded, cached) before
//!   the exchange; failing means not logged in;
//! - `failure_patterns` (map from failure kind to a list of regular expressions): matched
//!   case-insensitively, line by line, on standard error and standard output;
//! - `output` (map): how to read the answer from standard output (default: all of it);
//! - `endpoint` (an `http(s)` URL): another endpoint for the CLI (a gateway), passed as
//!   the variables `endpoint_env` names and the arguments `endpoint_args` puts before
//!   `args` (`{endpoint}` replaced); refused when the entry has neither.
//!
//! `output` for CLIs that print one JSON object per line:
//! `{format: json_lines, select: {PATH: VALUE, ...}, text: PATH, error: PATH,
//! input_tokens: PATH, output_tokens: PATH}` — the last line whose fields equal `select`
//! holds the answer at `text` (a dotted path), a true `error` flag turns it into a failure,
//! and the token counts are read when present (from the answer line, else the latest line
//! that has them). `format: json` reads the same keys from the whole of standard output as
//! one JSON document. A `*` path step goes into every entry of a map or list, and the
//! counts found there are summed.

use crate::contract::{AdvisorSpec, FailureKind};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The placeholder an `args` element carries to receive the prompt.
pub const PROMPT_SLOT: &str = "{prompt}";

/// Every settings key the process adapter reads; any other key is refused.
pub const KEYS: &[&str] = &[
    "args",
    "env",
    "pass_env",
    "preflight",
    "failure_patterns",
    "output",
    "endpoint",
    "endpoint_env",
    "endpoint_args",
];

/// The placeholder an `endpoint_args` element carries to receive the endpoint.
pub const ENDPOINT_SLOT: &str = "{endpoint}";

/// The kinds `failure_patterns` may name, in the order they win when several match.
///
/// `cancelled` is left out: only the caller cancels.
pub const PATTERN_KINDS: [FailureKind; 7] = [
    FailureKind::AuthFailed,
    FailureKind::RateLimited,
    FailureKind::Unavailable,
    FailureKind::Timeout,
    FailureKind::Malformed,
    FailureKind::Empty,
    FailureKind::Error,
];

/// A process advisor's settings, validated.
#[derive(Debug, Clone)]
pub struct ProcessSettings {
    /// The arguments, `{prompt}` not yet substituted.
    pub args: Vec<String>,
    /// Extra variables for the process.
    pub env: BTreeMap<String, String>,
    /// Variables passed through from the asking process when set.
    pub pass_env: Vec<String>,
    /// The preflight command (program first), if any.
    pub preflight: Option<Vec<String>>,
    /// Patterns per failure kind, in [`PATTERN_KINDS`] order.
    pub failure_patterns: Vec<(FailureKind, Vec<Regex>)>,
    /// How the answer is read from standard output.
    pub output: Output,
}

/// How the answer is read from standard output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// All of standard output is the answer.
    Text,
    /// One JSON object per line; the answer is in one of them.
    JsonLines(JsonLines),
    /// The whole of standard output is one JSON object (it may span lines).
    Json(JsonLines),
}

/// Where the answer sits in a JSON output (`json_lines` or `json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLines {
    /// Field values the answer line has (e.g. `type: result`); keys are dotted paths.
    pub select: Map<String, Value>,
    /// Dotted path of the answer text.
    pub text: String,
    /// Dotted path of a flag that, when true, marks the line as an error report.
    pub error: Option<String>,
    /// Dotted path of the input token count (a `*` step sums over every entry); read from
    /// the answer line, else from the latest line that has it.
    pub input_tokens: Option<String>,
    /// Dotted path of the output token count (the same way).
    pub output_tokens: Option<String>,
}

/// A setting that is wrong: the key and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {message}")]
pub struct SettingsError {
    /// The offending settings key (or `executable`).
    pub field: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

fn refuse(field: &str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        field: field.to_string(),
        message: message.into(),
    }
}

impl ProcessSettings {
    /// Read and check `advisor`'s settings (and that it names an executable).
    pub fn parse(advisor: &AdvisorSpec) -> Result<ProcessSettings, SettingsError> {
        match advisor.executable.as_deref() {
            None | Some("") => {
                return Err(refuse(
                    "executable",
                    "a process advisor needs `executable`: a name looked up on `PATH` or an \
                     absolute path",
                ))
            }
            Some(exe) if exe.contains('/') && !exe.starts_with('/') => {
                return Err(refuse(
                    "executable",
                    format!(
                        "`{exe}` is a relative path; give a name looked up on `PATH` or an \
                         absolute path"
                    ),
                ))
            }
            Some(_) => {}
        }
        let settings = &advisor.settings;
        if let Some(key) = settings.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(refuse(
                key,
                format!(
                    "unknown setting `{key}` for the process adapter; accepted: {}",
                    KEYS.join(", ")
                ),
            ));
        }
        let args = match settings.get("args") {
            None => Vec::new(),
            Some(value) => string_list("args", value, "a list of strings")?,
        };
        let env = match settings.get("env") {
            None => BTreeMap::new(),
            Some(value) => string_map("env", value)?,
        };
        let pass_env = match settings.get("pass_env") {
            None => Vec::new(),
            Some(value) => variable_names("pass_env", value)?,
        };
        let preflight = match settings.get("preflight") {
            None => None,
            Some(value) => {
                let command = string_list("preflight", value, "a command as a list of strings")?;
                if command.first().is_none_or(String::is_empty) {
                    return Err(refuse(
                        "preflight",
                        "the command is empty; give the program and its arguments, e.g. \
                         `[tool, auth, status]`",
                    ));
                }
                Some(command)
            }
        };
        let failure_patterns = match settings.get("failure_patterns") {
            None => Vec::new(),
            Some(value) => patterns(value)?,
        };
        let output = match settings.get("output") {
            None => Output::Text,
            Some(value) => output(value)?,
        };
        let (mut args, mut env) = (args, env);
        if let Some(endpoint) = endpoint(settings)? {
            let names = match settings.get("endpoint_env") {
                None => Vec::new(),
                Some(value) => variable_names("endpoint_env", value)?,
            };
            let extra = match settings.get("endpoint_args") {
                None => Vec::new(),
                Some(value) => string_list("endpoint_args", value, "a list of strings")?,
            };
            if names.is_empty() && extra.is_empty() {
                return Err(refuse(
                    "endpoint",
                    "this entry does not say how its executable takes a base URL; add \
                     `endpoint_env` (variables set to it) or `endpoint_args` (arguments with \
                     `{endpoint}`)",
                ));
            }
            for name in names {
                // The entry's own `env` wins, as it does over everything else.
                env.entry(name).or_insert_with(|| endpoint.clone());
            }
            let mut with_endpoint: Vec<String> = extra
                .iter()
                .map(|a| a.replace(ENDPOINT_SLOT, &endpoint))
                .collect();
            with_endpoint.append(&mut args);
            args = with_endpoint;
        } else {
            // Checked even when unused, so a mistake shows before `endpoint` is set.
            if let Some(value) = settings.get("endpoint_env") {
                variable_names("endpoint_env", value)?;
            }
            if let Some(value) = settings.get("endpoint_args") {
                string_list("endpoint_args", value, "a list of strings")?;
            }
        }
        Ok(ProcessSettings {
            args,
            env,
            pass_env,
            preflight,
            failure_patterns,
            output,
        })
    }

    /// Whether the prompt goes into the arguments (standard input is then closed empty).
    pub fn prompt_in_args(&self) -> bool {
        self.args.iter().any(|a| a.contains(PROMPT_SLOT))
    }

    /// The arguments with the prompt substituted.
    pub fn args_with(&self, prompt: &str) -> Vec<String> {
        self.args
            .iter()
            .map(|a| a.replace(PROMPT_SLOT, prompt))
            .collect()
    }
}

fn variable_names(field: &str, value: &Value) -> Result<Vec<String>, SettingsError> {
    let names = string_list(field, value, "a list of variable names")?;
    if let Some(bad) = names.iter().find(|n| !valid_var_name(n)) {
        return Err(refuse(
            field,
            format!("`{bad}` is not a variable name; use letters, digits and `_`"),
        ));
    }
    Ok(names)
}

/// The `endpoint` setting: an `http(s)` base URL, or absent.
fn endpoint(settings: &Map<String, Value>) -> Result<Option<String>, SettingsError> {
    const ACCEPTED: &str = "an http(s) base URL such as `https://gateway.example/v1`";
    match settings.get("endpoint") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(url))
            if (url.starts_with("http://") || url.starts_with("https://"))
                && url.len() > "https://".len()
                && !url.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            Ok(Some(url.clone()))
        }
        Some(Value::String(url)) => Err(refuse(
            "endpoint",
            format!("`{url}` is not a base URL; give {ACCEPTED}"),
        )),
        Some(other) => Err(refuse(
            "endpoint",
            format!("expected {ACCEPTED}, found {}", shape(other)),
        )),
    }
}

/// A name a process environment can carry: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn valid_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn string_list(field: &str, value: &Value, accepted: &str) -> Result<Vec<String>, SettingsError> {
    let Value::Array(items) = value else {
        return Err(refuse(
            field,
            format!("expected {accepted}, found {}", shape(value)),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(refuse(
                field,
                format!(
                    "element {i} is {}; expected {accepted} (quote numbers and flags)",
                    shape(other)
                ),
            )),
        })
        .collect()
}

fn string_map(field: &str, value: &Value) -> Result<BTreeMap<String, String>, SettingsError> {
    let Value::Object(map) = value else {
        return Err(refuse(
            field,
            format!(
                "expected a map of variable names to strings, found {}",
                shape(value)
            ),
        ));
    };
    let mut out = BTreeMap::new();
    for (name, value) in map {
        if !valid_var_name(name) {
            return Err(refuse(
                field,
                format!("`{name}` is not a variable name; use letters, digits and `_`"),
            ));
        }
        let Value::String(text) = value else {
            return Err(refuse(
                field,
                format!(
                    "`{name}` is {}; values are strings (quote `true` and numbers)",
                    shape(value)
                ),
            ));
        };
        if text.contains('\0') {
            return Err(refuse(field, format!("`{name}` contains a NUL character")));
        }
        out.insert(name.clone(), text.clone());
    }
    Ok(out)
}

fn patterns(value: &Value) -> Result<Vec<(FailureKind, Vec<Regex>)>, SettingsError> {
    const FIELD: &str = "failure_patterns";
    let accepted = || {
        PATTERN_KINDS
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Value::Object(map) = value else {
        return Err(refuse(
            FIELD,
            format!(
                "expected a map from failure kind ({}) to a list of regular expressions, \
                 found {}",
                accepted(),
                shape(value)
            ),
        ));
    };
    let mut by_kind: Vec<(FailureKind, Vec<Regex>)> = Vec::new();
    for (name, list) in map {
        let Some(kind) = PATTERN_KINDS.iter().copied().find(|k| k.as_str() == name) else {
            return Err(refuse(
                FIELD,
                format!("unknown failure kind `{name}`; accepted: {}", accepted()),
            ));
        };
        let sources = string_list(
            &format!("{FIELD}.{name}"),
            list,
            "a list of regular expressions",
        )
        .map_err(|e| refuse(FIELD, format!("`{}`: {}", e.field, e.message)))?;
        let mut compiled = Vec::with_capacity(sources.len());
        for (i, source) in sources.iter().enumerate() {
            let regex = RegexBuilder::new(source)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| {
                    refuse(
                        FIELD,
                        format!(
                            "`{name}[{i}]` (`{source}`) is not a valid regular expression \
                             ({}); use the syntax of the Rust `regex` crate",
                            last_line(&e.to_string())
                        ),
                    )
                })?;
            compiled.push(regex);
        }
        by_kind.push((kind, compiled));
    }
    by_kind.sort_by_key(|(kind, _)| PATTERN_KINDS.iter().position(|k| k == kind));
    Ok(by_kind)
}

fn output(value: &Value) -> Result<Output, SettingsError> {
    const FIELD: &str = "output";
    const KEYS: &[&str] = &[
        "format",
        "select",
        "text",
        "error",
        "input_tokens",
        "output_tokens",
    ];
    let Value::Object(map) = value else {
        return Err(refuse(
            FIELD,
            format!(
                "expected a map (`{{format: text}}` or `{{format: json_lines, select: ..., \
                 text: ...}}`), found {}",
                shape(value)
            ),
        ));
    };
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(refuse(
            FIELD,
            format!("unknown key `{key}`; accepted: {}", KEYS.join(", ")),
        ));
    }
    let path = |key: &str| -> Result<Option<String>, SettingsError> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(refuse(
                FIELD,
                format!(
                    "`{key}` is {}; expected a dotted field path such as `usage.input_tokens`",
                    shape(other)
                ),
            )),
        }
    };
    match map.get("format").and_then(Value::as_str) {
        None | Some("text") => {
            if map.len() > usize::from(map.contains_key("format")) {
                return Err(refuse(
                    FIELD,
                    "`select`, `text` and the token paths apply to `format: json_lines` and \
                     `format: json` only",
                ));
            }
            Ok(Output::Text)
        }
        Some(format @ ("json_lines" | "json")) => {
            let select = match map.get("select") {
                None => Map::new(),
                Some(Value::Object(select)) => select.clone(),
                Some(other) => {
                    return Err(refuse(
                        FIELD,
                        format!(
                            "`select` is {}; expected a map of field values such as \
                             `{{type: result}}`",
                            shape(other)
                        ),
                    ))
                }
            };
            let Some(text) = path("text")? else {
                return Err(refuse(
                    FIELD,
                    format!("`format: {format}` needs `text`: the field path of the answer text"),
                ));
            };
            let spec = JsonLines {
                select,
                text,
                error: path("error")?,
                input_tokens: path("input_tokens")?,
                output_tokens: path("output_tokens")?,
            };
            Ok(if format == "json" {
                Output::Json(spec)
            } else {
                Output::JsonLines(spec)
            })
        }
        Some(other) => Err(refuse(
            FIELD,
            format!("unknown format `{other}`; accepted: text, json_lines, json"),
        )),
    }
}

fn shape(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// The regex crate's errors end with the line that says what is wrong.
fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(settings: Value) -> Result<ProcessSettings, SettingsError> {
        ProcessSettings::parse(&AdvisorSpec {
            id: "t".into(),
            adapter: "process".into(),
            executable: Some("tool".into()),
            credential: None,
            settings: settings.as_object().cloned().unwrap_or_default(),
        })
    }

    #[test]
    fn an_endpoint_becomes_the_entrys_variables_and_leading_arguments() {
        let base = json!({
            "args": ["exec", "-"],
            "env": {"KEPT": "own"},
            "endpoint_env": ["BASE_URL", "KEPT"],
            "endpoint_args": ["-c", "base_url=\"{endpoint}\""],
        });
        let unset = parse(base.clone()).expect("valid without an endpoint");
        assert_eq!(unset.args, ["exec", "-"]);
        assert_eq!(unset.env.get("BASE_URL"), None);

        let mut with = base;
        with["endpoint"] = json!("http://127.0.0.1:4000/v1");
        let set = parse(with).expect("valid with an endpoint");
        assert_eq!(
            set.args,
            ["-c", "base_url=\"http://127.0.0.1:4000/v1\"", "exec", "-"]
        );
        assert_eq!(set.env["BASE_URL"], "http://127.0.0.1:4000/v1");
        assert_eq!(set.env["KEPT"], "own", "the entry's own `env` wins");
    }

    #[test]
    fn a_bad_endpoint_or_one_the_entry_cannot_pass_is_refused() {
        let field = |settings: Value| parse(settings).expect_err("refused").field;
        assert_eq!(field(json!({"endpoint": "gateway:4000"})), "endpoint");
        assert_eq!(
            field(json!({"endpoint": 4000, "endpoint_env": ["U"]})),
            "endpoint"
        );
        assert_eq!(field(json!({"endpoint": "https://g.example"})), "endpoint");
        assert_eq!(
            field(json!({"endpoint_env": ["not a name"]})),
            "endpoint_env"
        );
        assert_eq!(field(json!({"endpoint_args": [1]})), "endpoint_args");
    }

    #[test]
    fn json_output_reads_paths_with_stars() {
        let settings = parse(json!({"output": {
            "format": "json", "text": "response",
            "input_tokens": "stats.models.*.tokens.prompt",
        }}))
        .expect("valid");
        let Output::Json(spec) = settings.output else {
            panic!("a json output: {:?}", settings.output)
        };
        assert_eq!(
            spec.input_tokens.as_deref(),
            Some("stats.models.*.tokens.prompt")
        );
        assert_eq!(
            parse(json!({"output": {"format": "yaml", "text": "x"}}))
                .expect_err("refused")
                .field,
            "output"
        );
    }
}
