//! From how a process ended and what it printed to an answer or a typed failure.
//!
//! - **exit 0**: the answer (standard output, or the `output` line); empty text is left to
//!   the contract (`empty`);
//! - **exit N ≠ 0**: the first kind of `failure_patterns` (in [`PATTERN_KINDS`] order) with a
//!   line of standard error or standard output matching, else `error`;
//! - **a signal we did not send**: `error`;
//! - **stopped at the deadline**: `auth_failed`, `rate_limited` or `unavailable` when the
//!   output so far matches their patterns (a CLI retrying until killed), else `timeout`;
//! - **stopped on a cancellation**: `cancelled`.
//!
//! Patterns are never applied to a successful exit: an answer may well discuss rate limits.
//! The diagnostic is the line that matched, else the last non-empty line of standard error
//! (of standard output when standard error is empty).

use super::run::{Ended, Finished};
use super::settings::{JsonLines, Output, ProcessSettings, PATTERN_KINDS};
use crate::contract::{Answer, Failure, FailureKind, Usage};
use crate::normalise::strip_ansi;
use serde_json::Value;

/// The kinds a process stopped at the deadline may be given instead of `timeout`: a CLI
/// that retries until it is killed says in its retry lines what it was retrying.
pub const DEADLINE_KINDS: [FailureKind; 4] = [
    FailureKind::AuthFailed,
    FailureKind::RateLimited,
    FailureKind::Unavailable,
    FailureKind::Error,
];

/// The exchange's result from a finished run of `program`.
pub fn classify(
    finished: &Finished,
    settings: &ProcessSettings,
    program: &str,
) -> Result<Answer, Failure> {
    let stdout = finished.stdout.text();
    let stderr = finished.stderr.text();
    match finished.ended {
        Ended::Exited(0) => answer(&stdout, &stderr, settings),
        Ended::Exited(code) => {
            // A CLI reporting its error in its answer line says it best there; the kind
            // may show in the rest of that line (a status field) or in the other lines.
            let reported = reported_text(&stdout, settings);
            let searched = match &reported {
                Some(text) => format!("{stdout}\n{text}"),
                None => stdout.clone(),
            };
            Err(
                match matching(settings, &PATTERN_KINDS, &stderr, &searched) {
                    Some((kind, line)) => failure(kind, reported.as_deref().unwrap_or(&line)),
                    None => Failure::new(
                        FailureKind::Error,
                        &with_last_line(
                            &format!("`{program}` exited with status {code}"),
                            &stderr,
                            reported.as_deref().unwrap_or(&stdout),
                        ),
                    ),
                },
            )
        }
        Ended::Signalled(signal) => Err(Failure::new(
            FailureKind::Error,
            &with_last_line(
                &format!("`{program}` was killed by {}", signal_name(signal)),
                &stderr,
                &stdout,
            ),
        )),
        Ended::Deadline => Err(
            match matching(settings, &DEADLINE_KINDS, &stderr, &stdout) {
                Some((kind, line)) => failure(
                    kind,
                    &format!("stopped at the deadline while retrying: {line}"),
                ),
                None => Failure::new(
                    FailureKind::Timeout,
                    &with_last_line(
                        &format!("`{program}` gave no answer within the deadline and was stopped"),
                        &stderr,
                        &stdout,
                    ),
                ),
            },
        ),
        Ended::Cancelled => Err(Failure::new(
            FailureKind::Cancelled,
            &format!("cancelled; `{program}` and its process group were stopped"),
        )),
    }
}

fn failure(kind: FailureKind, line: &str) -> Failure {
    match kind {
        FailureKind::RateLimited => Failure::rate_limited(line, retry_after_in(line)),
        kind => Failure::new(kind, line),
    }
}

/// The wait a CLI's line names: `retry after 30s` (or `retry after 30 seconds`).
fn retry_after_in(line: &str) -> Option<u64> {
    let lower = line.to_ascii_lowercase();
    let (_, rest) = lower.split_once("retry after ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let unit = rest[digits.len()..].trim_start();
    (unit.starts_with('s'))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The first of `kinds` (in [`PATTERN_KINDS`] order) whose patterns match a line of
/// `stderr` or `stdout`, with the line: the last one matching the kind's first matching
/// pattern, so that a catalogue lists its most telling pattern first (`failed to lookup
/// address` rather than the `waiting for network` repeated after it).
pub fn matching(
    settings: &ProcessSettings,
    kinds: &[FailureKind],
    stderr: &str,
    stdout: &str,
) -> Option<(FailureKind, String)> {
    let lines: Vec<String> = stderr
        .lines()
        .rev()
        .chain(stdout.lines().rev())
        .map(strip_ansi)
        .collect();
    settings
        .failure_patterns
        .iter()
        .filter(|(kind, _)| kinds.contains(kind))
        .find_map(|(kind, regexes)| {
            regexes.iter().find_map(|regex| {
                lines
                    .iter()
                    .find(|line| regex.is_match(line))
                    .map(|line| (*kind, line.clone()))
            })
        })
}

/// `prefix`, then the last non-empty line of `stderr` (else `stdout`) after a colon.
fn with_last_line(prefix: &str, stderr: &str, stdout: &str) -> String {
    match last_line(stderr).or_else(|| last_line(stdout)) {
        Some(line) => format!("{prefix}: {line}"),
        None => format!("{prefix} and printed nothing"),
    }
}

/// The last line with something readable in it, ANSI escapes removed.
pub fn last_line(text: &str) -> Option<String> {
    strip_ansi(text)
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.chars().any(char::is_alphanumeric))
        .map(str::to_string)
}

fn answer(stdout: &str, stderr: &str, settings: &ProcessSettings) -> Result<Answer, Failure> {
    match &settings.output {
        Output::Text => Ok(Answer {
            text: strip_ansi(stdout),
            usage: None,
            source: None,
            vouched: true,
        }),
        Output::JsonLines(spec) => json_lines_answer(stdout, stderr, spec, settings),
        Output::Json(spec) => json_answer(stdout, stderr, spec, settings),
    }
}

/// The whole of standard output as one JSON document (it may span lines).
fn json_answer(
    stdout: &str,
    stderr: &str,
    spec: &JsonLines,
    settings: &ProcessSettings,
) -> Result<Answer, Failure> {
    if stdout.trim().is_empty() {
        return Ok(Answer {
            text: String::new(),
            usage: None,
            source: None,
            vouched: true,
        });
    }
    let Some(document) = document(stdout, spec) else {
        return Err(Failure::new(
            FailureKind::Malformed,
            &format!(
                "standard output is not a JSON object with {}",
                serde_json::Value::Object(spec.select.clone())
            ),
        ));
    };
    read_answer_value(&document, &[], stderr, spec, settings)
}

/// Standard output as one JSON object matching `spec.select`.
fn document(stdout: &str, spec: &JsonLines) -> Option<Value> {
    serde_json::from_str::<Value>(stdout.trim())
        .ok()
        .filter(|value| selected(value, spec))
}

/// Whether `value` has every field value of `spec.select` (keys are dotted paths).
fn selected(value: &Value, spec: &JsonLines) -> bool {
    value.is_object()
        && spec
            .select
            .iter()
            .all(|(key, want)| at_path(value, key) == Some(want))
}

fn json_lines_answer(
    stdout: &str,
    stderr: &str,
    spec: &JsonLines,
    settings: &ProcessSettings,
) -> Result<Answer, Failure> {
    if stdout.trim().is_empty() {
        return Ok(Answer {
            text: String::new(),
            usage: None,
            source: None,
            vouched: true,
        });
    }
    let Some(line) = answer_line(stdout, spec) else {
        return Err(Failure::new(
            FailureKind::Malformed,
            &format!(
                "no line of standard output is a JSON object with {}",
                serde_json::Value::Object(spec.select.clone())
            ),
        ));
    };
    let others: Vec<Value> = stdout
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .collect();
    read_answer_value(&line, &others, stderr, spec, settings)
}

/// The answer in `line` (its text, error flag and token counts); token counts missing
/// from it are taken from the latest of `others` that has them.
fn read_answer_value(
    line: &Value,
    others: &[Value],
    stderr: &str,
    spec: &JsonLines,
    settings: &ProcessSettings,
) -> Result<Answer, Failure> {
    let text = match at_path(line, &spec.text) {
        Some(Value::String(text)) => strip_ansi(text),
        Some(Value::Null) | None => String::new(),
        Some(_) => {
            return Err(Failure::new(
                FailureKind::Malformed,
                &format!("the answer's `{}` is not a string", spec.text),
            ))
        }
    };
    let count = |path: &Option<String>| {
        let path = path.as_deref()?;
        std::iter::once(line)
            .chain(others)
            .find_map(|value| count_at(value, path))
    };
    let usage = match (count(&spec.input_tokens), count(&spec.output_tokens)) {
        (None, None) => None,
        (input, output) => Some(Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
        }),
    };
    let flagged = spec
        .error
        .as_deref()
        .and_then(|path| at_path(line, path))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if flagged {
        let searched = format!("{line}\n{text}");
        let diagnostic = last_line(&text);
        return Err(
            match matching(settings, &PATTERN_KINDS, stderr, &searched) {
                Some((kind, matched)) => failure(kind, diagnostic.as_deref().unwrap_or(&matched)),
                None => Failure::new(
                    FailureKind::Error,
                    &format!(
                        "the advisor reported an error: {}",
                        diagnostic.unwrap_or_default()
                    ),
                ),
            }
            .with_usage(usage),
        );
    }
    Ok(Answer {
        text,
        usage,
        source: None,
        vouched: true,
    })
}

/// The last line of a JSON-lines `stdout` whose fields equal `spec.select`.
fn answer_line(stdout: &str, spec: &JsonLines) -> Option<Value> {
    stdout
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .find(|value| selected(value, spec))
}

/// The text of the answer line of a JSON-lines output, when there is one.
fn reported_text(stdout: &str, settings: &ProcessSettings) -> Option<String> {
    let line = match &settings.output {
        Output::Text => return None,
        Output::JsonLines(spec) => answer_line(stdout, spec)?,
        Output::Json(spec) => document(stdout, spec)?,
    };
    let spec = match &settings.output {
        Output::JsonLines(spec) | Output::Json(spec) => spec,
        Output::Text => return None,
    };
    at_path(&line, &spec.text)
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map(strip_ansi)
}

/// The value at a dotted `path` (`usage.input_tokens`) in `value`; a `*` step takes the
/// first entry of a map or list that has the rest of the path.
pub fn at_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    values_at(value, path).into_iter().next()
}

/// Every value at a dotted `path` in `value`, a `*` step going into every entry of a map
/// or list (`stats.models.*.tokens.prompt`).
pub fn values_at<'v>(value: &'v Value, path: &str) -> Vec<&'v Value> {
    let mut nodes = vec![value];
    for key in path.split('.') {
        nodes = nodes
            .into_iter()
            .flat_map(|node| -> Vec<&'v Value> {
                match (key, node) {
                    ("*", Value::Object(map)) => map.values().collect(),
                    ("*", Value::Array(items)) => items.iter().collect(),
                    (key, Value::Object(map)) => map.get(key).into_iter().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    nodes
}

/// A token count at `path` in `value`: the sum of every whole number there (several when
/// the path has a `*`, e.g. one count per model asked); `None` when there is none.
fn count_at(value: &Value, path: &str) -> Option<u64> {
    let counts: Vec<u64> = values_at(value, path)
        .into_iter()
        .filter_map(Value::as_u64)
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// `SIGSEGV` for 11, or `signal 77` for a number without a name.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::AdvisorSpec;
    use crate::process::run::Captured;
    use serde_json::json;

    fn settings(extra: serde_json::Value) -> ProcessSettings {
        let mut settings = json!({
            "failure_patterns": {
                "unavailable": ["lookup failed", "waiting for network"],
                "rate_limited": ["status 429"],
                "auth_failed": ["not logged in"],
            }
        });
        if let (Some(base), Some(extra)) = (settings.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        ProcessSettings::parse(&AdvisorSpec {
            id: "t".into(),
            adapter: "process".into(),
            executable: Some("tool".into()),
            credential: None,
            settings: settings.as_object().cloned().unwrap_or_default(),
        })
        .expect("valid settings")
    }

    /// One run's ending and output, and the expected kind (`None`: an answer) with a
    /// phrase of the answer text or diagnostic.
    fn check(ended: Ended, stdout: &str, stderr: &str, expected: (Option<FailureKind>, &str)) {
        let finished = Finished {
            ended,
            stdout: Captured {
                bytes: stdout.as_bytes().to_vec(),
                discarded: 0,
            },
            stderr: Captured {
                bytes: stderr.as_bytes().to_vec(),
                discarded: 0,
            },
        };
        let got = classify(&finished, &settings(json!({})), "tool");
        let label = format!("{ended:?} / {stdout:?} / {stderr:?}");
        match (expected, got) {
            ((None, phrase), Ok(answer)) => assert!(answer.text.contains(phrase), "{label}"),
            ((Some(kind), phrase), Err(failure)) => {
                assert_eq!(failure.kind, kind, "{label}: {failure:?}");
                assert!(failure.diagnostic.contains(phrase), "{label}: {failure:?}");
            }
            (expected, got) => panic!("{label}: expected {expected:?}, got {got:?}"),
        }
    }

    #[test]
    fn every_ending_maps_to_its_outcome() {
        use FailureKind::*;
        check(
            Ended::Exited(0),
            "an answer",
            "status 429",
            (None, "an answer"),
        );
        check(
            Ended::Exited(0),
            "\u{1b}[31mred\u{1b}[0m",
            "",
            (None, "red"),
        );
        check(
            Ended::Exited(1),
            "",
            "x\nnot logged in\ny",
            (Some(AuthFailed), "not logged in"),
        );
        check(
            Ended::Exited(1),
            "Not Logged In",
            "",
            (Some(AuthFailed), "Not Logged In"),
        );
        check(
            Ended::Exited(2),
            "",
            "first\nlast\n\n",
            (Some(Error), "status 2: last"),
        );
        check(
            Ended::Exited(2),
            "",
            "",
            (Some(Error), "status 2 and printed nothing"),
        );
        check(
            Ended::Signalled(11),
            "",
            "core",
            (Some(Error), "killed by SIGSEGV: core"),
        );
        check(
            Ended::Deadline,
            "",
            "status 429\nstatus 429",
            (Some(RateLimited), "status 429"),
        );
        check(
            Ended::Deadline,
            "",
            "working...",
            (Some(Timeout), "within the deadline"),
        );
        check(
            Ended::Cancelled,
            "",
            "status 429",
            (Some(Cancelled), "cancelled"),
        );
        // Several kinds: auth_failed before rate_limited before unavailable.
        check(
            Ended::Exited(1),
            "",
            "status 429\nnot logged in",
            (Some(AuthFailed), "logged"),
        );
        // Within a kind the first listed pattern gives the line, however old.
        check(
            Ended::Deadline,
            "",
            "lookup failed: no DNS\nwaiting for network\nwaiting for network",
            (Some(Unavailable), "lookup failed: no DNS"),
        );
    }

    #[test]
    fn deadline_kinds_exclude_the_others() {
        let finished = Finished {
            ended: Ended::Deadline,
            stdout: Captured::default(),
            stderr: Captured {
                bytes: b"fatal: bad".to_vec(),
                discarded: 0,
            },
        };
        let with_malformed = settings(json!({"failure_patterns": {"malformed": ["fatal"]}}));
        let failure = classify(&finished, &with_malformed, "tool").expect_err("fails");
        assert_eq!(failure.kind, FailureKind::Timeout, "{failure:?}");
        // A CLI retrying a server error until it is stopped: `error`, not a bare timeout.
        let with_error = settings(json!({"failure_patterns": {"error": ["fatal"]}}));
        let failure = classify(&finished, &with_error, "tool").expect_err("fails");
        assert_eq!(failure.kind, FailureKind::Error, "{failure:?}");
    }

    fn finished(code: i32, stdout: &str, stderr: &str) -> Finished {
        Finished {
            ended: Ended::Exited(code),
            stdout: Captured {
                bytes: stdout.as_bytes().to_vec(),
                discarded: 0,
            },
            stderr: Captured {
                bytes: stderr.as_bytes().to_vec(),
                discarded: 0,
            },
        }
    }

    #[test]
    fn tokens_are_read_from_the_line_that_reports_them() {
        // codex: the answer in one line, the tokens in the next.
        let codex = settings(json!({"output": {
            "format": "json_lines", "select": {"type": "item.completed", "item.type": "agent_message"},
            "text": "item.text", "input_tokens": "usage.input_tokens",
            "output_tokens": "usage.output_tokens"}}));
        let stdout = concat!(
            r#"{"type":"item.completed","item":{"type":"reasoning","text":"hmm"}}"#,
            "
",
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"  "}}"#,
            "
",
            r#"{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":0}}"#,
        );
        let answer = classify(&finished(0, stdout, ""), &codex, "codex").expect("an answer");
        assert_eq!(answer.text, "  ");
        assert_eq!(
            answer.usage,
            Some(Usage {
                input_tokens: 5,
                output_tokens: 0
            })
        );
        // gemini: one document over several lines, tokens summed over the models asked.
        let gemini = settings(json!({"output": {
            "format": "json", "text": "response",
            "input_tokens": "stats.models.*.tokens.prompt",
            "output_tokens": "stats.models.*.tokens.candidates"}}));
        let document = "{\n \"response\": \"fine\",\n \"stats\": {\"models\": {\n  \
                        \"a\": {\"tokens\": {\"prompt\": 1, \"candidates\": 1}},\n  \
                        \"b\": {\"tokens\": {\"prompt\": 120, \"candidates\": 48}}}}\n}";
        let answer = classify(&finished(0, document, ""), &gemini, "gemini").expect("an answer");
        assert_eq!(answer.text, "fine");
        assert_eq!(
            answer.usage,
            Some(Usage {
                input_tokens: 121,
                output_tokens: 49
            })
        );
    }

    #[test]
    fn an_error_line_is_typed_by_its_status_field_and_told_by_its_text() {
        // claude: `"api_error_status":429` is outside the result text.
        let claude = settings(json!({
            "output": {"format": "json_lines", "select": {"type": "result"}, "text": "result",
                       "error": "is_error", "input_tokens": "usage.input_tokens"},
            "failure_patterns": {"rate_limited": ["\"api_error_status\":\\s*429"]},
        }));
        let line = r#"{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: Request rejected (429)","usage":{"input_tokens":0}}"#;
        for code in [0, 1] {
            let failure =
                classify(&finished(code, line, ""), &claude, "claude").expect_err("a failure");
            assert_eq!(
                failure.kind,
                FailureKind::RateLimited,
                "exit {code}: {failure:?}"
            );
            assert_eq!(failure.diagnostic, "API Error: Request rejected (429)");
        }
    }

    #[test]
    fn a_rate_limit_line_gives_its_wait() {
        assert_eq!(retry_after_in("Suggested retry after 3600s."), Some(3600));
        assert_eq!(retry_after_in("retry after 30 seconds"), Some(30));
        assert_eq!(retry_after_in("retry after a while"), None);
        assert_eq!(retry_after_in("429 Too Many Requests"), None);
    }

    #[test]
    fn dotted_paths_reach_nested_fields() {
        let value = json!({"usage": {"input_tokens": 3}, "result": "x"});
        assert_eq!(at_path(&value, "usage.input_tokens"), Some(&json!(3)));
        assert_eq!(at_path(&value, "result"), Some(&json!("x")));
        assert_eq!(at_path(&value, "usage.missing"), None);
        assert_eq!(at_path(&value, "result.deeper"), None);
    }
}
