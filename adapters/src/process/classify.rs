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

/// The kinds a process stopped at the deadline may be given instead of `timeout`.
pub const DEADLINE_KINDS: [FailureKind; 3] = [
    FailureKind::AuthFailed,
    FailureKind::RateLimited,
    FailureKind::Unavailable,
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
            // A CLI reporting its error in its answer line says it best there.
            let stdout = reported_text(&stdout, settings).unwrap_or(stdout);
            Err(match matching(settings, &PATTERN_KINDS, &stderr, &stdout) {
                Some((kind, line)) => failure(kind, &line),
                None => Failure::new(
                    FailureKind::Error,
                    &with_last_line(
                        &format!("`{program}` exited with status {code}"),
                        &stderr,
                        &stdout,
                    ),
                ),
            })
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
        FailureKind::RateLimited => Failure::rate_limited(line, None),
        kind => Failure::new(kind, line),
    }
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
        }),
        Output::JsonLines(spec) => json_lines_answer(stdout, stderr, spec, settings),
    }
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
    let text = match at_path(&line, &spec.text) {
        Some(Value::String(text)) => strip_ansi(text),
        Some(Value::Null) | None => String::new(),
        Some(_) => {
            return Err(Failure::new(
                FailureKind::Malformed,
                &format!("the answer line's `{}` is not a string", spec.text),
            ))
        }
    };
    let flagged = spec
        .error
        .as_deref()
        .and_then(|path| at_path(&line, path))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if flagged {
        return Err(match matching(settings, &PATTERN_KINDS, stderr, &text) {
            Some((kind, line)) => failure(kind, &line),
            None => Failure::new(
                FailureKind::Error,
                &format!(
                    "the advisor reported an error: {}",
                    last_line(&text).unwrap_or_default()
                ),
            ),
        });
    }
    let count = |path: &Option<String>| {
        path.as_deref()
            .and_then(|p| at_path(&line, p))
            .and_then(Value::as_u64)
    };
    let usage = match (count(&spec.input_tokens), count(&spec.output_tokens)) {
        (None, None) => None,
        (input, output) => Some(Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
        }),
    };
    Ok(Answer { text, usage })
}

/// The last line of a JSON-lines `stdout` whose fields equal `spec.select`.
fn answer_line(stdout: &str, spec: &JsonLines) -> Option<Value> {
    stdout
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .find(|value| {
            spec.select
                .iter()
                .all(|(key, want)| value.get(key) == Some(want))
        })
}

/// The text of the answer line of a JSON-lines output, when there is one.
fn reported_text(stdout: &str, settings: &ProcessSettings) -> Option<String> {
    let Output::JsonLines(spec) = &settings.output else {
        return None;
    };
    let line = answer_line(stdout, spec)?;
    at_path(&line, &spec.text)
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map(strip_ansi)
}

/// The value at a dotted `path` (`usage.input_tokens`) in `value`.
pub fn at_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(value, |node, key| node.as_object()?.get(key))
}

/// `SIGSEGV` for 11, or `signal 77` for a number without a name.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"))
}
