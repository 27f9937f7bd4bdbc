//! The one trait, the io context, typed failures and the contract layer around every
//! adapter. Names no transport and no vendor.
//!
//! [`consult`] is the only way the daemon talks to an adapter. It owns, for every adapter
//! alike:
//!
//! - **the deadline**: the adapter is handed the caller's deadline itself, so an answer
//!   that arrives up to it is kept. An adapter returns an answer only when it had it by
//!   the deadline; after the deadline it may take at most [`STOP_GRACE`] (30 ms) to stop
//!   its work and report its own, more precise failure (a process killed at the deadline
//!   whose output shows rate-limit retries is `rate_limited`). An answer handed back after
//!   the deadline is not accepted (`timeout`), and at the deadline plus [`STOP_GRACE`] the
//!   adapter's future is dropped, whatever it is doing, and the outcome is `timeout`.
//! - **the cancellation**: the adapter gets the caller's token (it observes it and must
//!   never cancel it: a token per consultation is the caller's to make, as the daemon
//!   does); once it is cancelled the adapter has [`STOP_GRACE`] to return, then its future
//!   is dropped. The outcome is `cancelled` whatever the adapter returns.
//! - **the normalisation**: an answer of only whitespace is `empty`; one with no
//!   recoverable conclusion is `malformed`; anything else is read by
//!   [`crate::normalise::normalise`].
//! - **the duration** (`duration_ms`, from the call to the outcome).
//!
//! Dropping is the contract's only way to stop an adapter that ignores the deadline and the
//! cancellation, so **an adapter's resources must be drop-safe**: a child process group is
//! killed in `Drop` (`kill_on_drop` alone kills only the leader), a connection is closed by
//! dropping its future, a temporary file is removed by its guard. An adapter must not block
//! the executor thread (use `spawn_blocking`): a future that never yields cannot be
//! stopped by anyone.

use crate::normalise::{self, NormaliseError, Normalised};
/// The shared vocabulary, written once in `advisord-core`: an outcome's failure kind and
/// usage are the records' own types, and the catalogue's common keys the daemon's.
pub use advisord_core::{FailureKind, Usage, COMMON_KEYS};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The advisor as an adapter sees it: the catalogue entry's transport-relevant fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdvisorSpec {
    /// The advisor id (for diagnostics only).
    pub id: String,
    /// The registry key of the adapter.
    pub adapter: String,
    /// The executable, for process advisors.
    #[serde(default)]
    pub executable: Option<String>,
    /// The credential variable name (its value is looked up through [`Io::env`]).
    #[serde(default)]
    pub credential: Option<String>,
    /// The adapter's own settings (`args`, `endpoint`, `model`, `failure_patterns`, ...).
    #[serde(default)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

impl AdvisorSpec {
    /// The spec of one catalogue entry read as a mapping (YAML or JSON): the fields an
    /// adapter needs, and every key outside [`COMMON_KEYS`] as its settings.
    pub fn from_mapping(entry: &serde_json::Map<String, serde_json::Value>) -> AdvisorSpec {
        let text = |key: &str| entry.get(key).and_then(|v| v.as_str()).map(str::to_string);
        AdvisorSpec {
            id: text("id").unwrap_or_default(),
            adapter: text("adapter").unwrap_or_default(),
            executable: text("executable"),
            credential: text("credential"),
            settings: entry
                .iter()
                .filter(|(key, _)| !COMMON_KEYS.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        }
    }
}

/// A typed failure with its diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind:?}: {diagnostic}")]
pub struct Failure {
    /// The kind.
    pub kind: FailureKind,
    /// The last line of standard error or the HTTP error body, control characters
    /// removed, at most [`MAX_DIAGNOSTIC_CHARS`] characters.
    pub diagnostic: String,
    /// Seconds the advisor asked to wait, for rate limits.
    pub retry_after_s: Option<u64>,
    /// Tokens spent before the failure, when the transport reported them (an answer of
    /// only whitespace still cost its tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The longest diagnostic kept, in characters.
pub const MAX_DIAGNOSTIC_CHARS: usize = 300;

impl Failure {
    /// A failure whose diagnostic is cleaned by [`clean_diagnostic`].
    pub fn new(kind: FailureKind, raw_diagnostic: &str) -> Failure {
        Failure {
            kind,
            diagnostic: clean_diagnostic(raw_diagnostic),
            retry_after_s: None,
            usage: None,
        }
    }

    /// This failure, with the tokens the exchange spent.
    pub fn with_usage(self, usage: Option<Usage>) -> Failure {
        Failure { usage, ..self }
    }

    /// A rate limit, with the wait the advisor asked for when it gave one.
    pub fn rate_limited(raw_diagnostic: &str, retry_after_s: Option<u64>) -> Failure {
        Failure {
            retry_after_s,
            ..Failure::new(FailureKind::RateLimited, raw_diagnostic)
        }
    }
}

/// The diagnostic of a failure from raw error output: its last non-empty line, ANSI escape
/// sequences and control characters removed, whitespace collapsed, at most
/// [`MAX_DIAGNOSTIC_CHARS`] characters (the last an ellipsis when cut).
pub fn clean_diagnostic(raw: &str) -> String {
    let no_ansi = normalise::strip_ansi(raw);
    let last = no_ansi
        .split(['\n', '\r'])
        .rev()
        .map(|line| {
            line.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    normalise::truncate_chars(&last, MAX_DIAGNOSTIC_CHARS)
}

/// The raw answer of one exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The answer text as the advisor gave it.
    pub text: String,
    /// Token usage, when the transport reports it.
    pub usage: Option<Usage>,
    /// What produced the answer, when the transport knows better than the catalogue (a
    /// mesh peer names the advisor or model behind it); `None` for most adapters.
    pub source: Option<String>,
    /// Whether the transport vouches for who produced the answer. `false` when it cannot
    /// (a mesh peer whose identity is not pinned): the answer is recorded but never counts
    /// as a review. `true` for every transport that talks to what the catalogue names.
    pub vouched: bool,
}

/// How to look up an environment variable of the process asking (not the daemon's).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// An environment lookup over a fixed map (tests, or a request's captured environment).
pub fn env_from_map(vars: BTreeMap<String, String>) -> EnvLookup {
    Arc::new(move |name: &str| vars.get(name).cloned())
}

/// What an adapter gets besides the advisor and the prompt.
#[derive(Clone)]
pub struct Io {
    /// When the exchange must be over.
    pub deadline: Instant,
    /// Cancelled when the job is cancelled or the daemon stops.
    pub cancel: CancellationToken,
    /// The asking process's environment (`PATH`, credential variables, ...).
    pub env: EnvLookup,
    /// The one shared HTTP client (connection pool).
    pub http: reqwest::Client,
}

impl Io {
    /// An io context with a fresh token, no environment and a new HTTP client, ending
    /// `timeout` from now. Convenient for tests and tools; the daemon builds its own.
    pub fn with_timeout(timeout: Duration) -> Io {
        Io {
            deadline: Instant::now() + timeout,
            cancel: CancellationToken::new(),
            env: env_from_map(BTreeMap::new()),
            http: reqwest::Client::new(),
        }
    }
}

impl std::fmt::Debug for Io {
    /// The environment is left out: it may hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("deadline", &self.deadline)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// The one trait a transport implements.
pub trait Adapter: Send + Sync {
    /// Send `prompt` to `advisor` and return its answer text or a typed failure.
    ///
    /// An adapter should honour `io.deadline` and `io.cancel` and release what it holds,
    /// but the contract layer stops it on time even if it does not. `io.cancel` is the
    /// caller's: an adapter waits on it and never cancels it.
    fn exchange<'a>(
        &'a self,
        advisor: &'a AdvisorSpec,
        prompt: &'a str,
        io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>>;

    /// Check the advisor's adapter-specific settings when the catalogue is loaded:
    /// `Err((field, message))` names the offending key (`args`, `endpoint`, ...) and says
    /// what is accepted. The default accepts everything.
    fn validate(&self, advisor: &AdvisorSpec) -> Result<(), (String, String)> {
        let _ = advisor;
        Ok(())
    }
}

/// How long an adapter has, after the caller's deadline or a cancellation, to stop and
/// report before the contract drops it: the only time a consultation may take past its
/// deadline (bounded well under 50 ms), spent classifying a hung exchange, never waiting
/// for an answer.
pub const STOP_GRACE: Duration = Duration::from_millis(30);

/// What one consultation came to: the normalised answer or a typed failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The consultation's fields, or why there are none.
    pub result: Result<Normalised, Failure>,
    /// Token usage the adapter reported (kept for `empty` and `malformed` answers, and for
    /// any failure the adapter reported with usage: the tokens were spent).
    pub usage: Option<Usage>,
    /// Milliseconds from the call to the outcome.
    pub duration_ms: u64,
    /// What produced a completed answer, when the adapter reported it ([`Answer::source`]).
    pub source: Option<String>,
    /// Whether the transport vouched for who produced it ([`Answer::vouched`]); `true`
    /// for failures, which count as no review anyway.
    pub vouched: bool,
}

/// Consult `advisor` through `adapter` under `io`'s deadline and cancellation, and
/// normalise its answer. An answer the adapter hands back by the deadline is kept; never
/// takes longer than the deadline plus [`STOP_GRACE`] (plus scheduling), nor more than
/// [`STOP_GRACE`] after a cancellation. See the module documentation for the rules.
///
/// A cancellation or a deadline that has already passed returns at once without calling
/// the adapter.
pub async fn consult(
    adapter: &dyn Adapter,
    advisor: &AdvisorSpec,
    prompt: &str,
    io: &Io,
) -> Outcome {
    let start = Instant::now();
    let finish = |result: Result<Normalised, Failure>, usage: Option<Usage>| Outcome {
        result,
        usage,
        duration_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        source: None,
        vouched: true,
    };
    if io.cancel.is_cancelled() {
        return finish(
            Err(cancelled(
                "the consultation was cancelled before it started",
            )),
            None,
        );
    }
    if start >= io.deadline {
        return finish(
            Err(timed_out(
                "the deadline had passed before the consultation started",
            )),
            None,
        );
    }
    let budget = io.deadline - start;
    let inner = Io {
        deadline: io.deadline,
        // The caller's token itself: a child token per exchange costs an allocation and
        // two locks on the caller's token, a tenth of the contract's cost per exchange,
        // and would only matter to an adapter that cancels its token, which none may.
        cancel: io.cancel.clone(),
        env: io.env.clone(),
        http: io.http.clone(),
    };
    let timed_out_after = || {
        format!(
            "no answer within the deadline of {} ms; the exchange was stopped",
            budget.as_millis()
        )
    };
    let exchange = adapter.exchange(advisor, prompt, &inner);
    tokio::pin!(exchange);
    let answered = tokio::select! {
        biased;
        () = io.cancel.cancelled() => None,
        result = &mut exchange => Some(result),
        () = tokio::time::sleep_until(io.deadline + STOP_GRACE) => {
            // Dropping the exchange stops it: see the module documentation.
            return finish(Err(timed_out(&timed_out_after())), None);
        }
    };
    // The grace after the deadline is for reporting a failure, never for an answer.
    if matches!(answered, Some(Ok(_))) && Instant::now() > io.deadline {
        return finish(Err(timed_out(&timed_out_after())), None);
    }
    match answered {
        Some(Ok(answer)) => {
            let usage = answer.usage;
            let result = read_answer(&answer.text)
                .map(|n| crate::question::keep_asked(n, prompt))
                .map_err(|f| f.with_usage(usage));
            let source = answer.source.filter(|_| result.is_ok());
            Outcome {
                source,
                vouched: answer.vouched,
                ..finish(result, usage)
            }
        }
        Some(Err(failure)) => {
            let usage = failure.usage;
            finish(Err(exact(failure)), usage)
        }
        None => {
            // Cancelled: the adapter sees its token cancelled; give it a short grace
            // to release what it holds in order, then drop it.
            let grace = tokio::time::timeout(STOP_GRACE, &mut exchange).await;
            let diagnostic = match grace {
                Ok(Err(failure)) if !failure.diagnostic.is_empty() => failure.diagnostic,
                _ => "the consultation was cancelled".to_string(),
            };
            finish(Err(cancelled(&diagnostic)), None)
        }
    }
}

/// An answer text as the consultation's fields, or `empty` / `malformed`.
pub fn read_answer(text: &str) -> Result<Normalised, Failure> {
    match normalise::normalise(text) {
        Ok(normalised) => Ok(normalised),
        Err(NormaliseError::Empty) => Err(Failure::new(
            FailureKind::Empty,
            "the advisor answered with no text",
        )),
        Err(error) => Err(Failure::new(FailureKind::Malformed, &error.to_string())),
    }
}

/// An adapter's failure as recorded: its diagnostic cleaned, and never empty.
fn exact(failure: Failure) -> Failure {
    let diagnostic = clean_diagnostic(&failure.diagnostic);
    let diagnostic = if diagnostic.is_empty() {
        format!(
            "the adapter reported `{}` without a diagnostic",
            failure.kind.as_str()
        )
    } else {
        diagnostic
    };
    Failure {
        diagnostic,
        ..failure
    }
}

fn cancelled(diagnostic: &str) -> Failure {
    Failure::new(FailureKind::Cancelled, diagnostic)
}

fn timed_out(diagnostic: &str) -> Failure {
    Failure::new(FailureKind::Timeout, diagnostic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_are_the_last_clean_line() {
        let long = "é".repeat(400);
        let cases: &[(&str, String)] = &[
            ("first\nsecond\n\n  \n", "second".into()),
            (
                "\u{1b}[31merror:\u{1b}[0m bad key\u{7}\r\n",
                "error: bad key".into(),
            ),
            (
                "progress 10%\rprogress 100%\rfailed: 401",
                "failed: 401".into(),
            ),
            ("tab\tseparated   words", "tab separated words".into()),
            (
                "\u{1b}]0;title\u{7}window title gone",
                "window title gone".into(),
            ),
            ("", String::new()),
            (" \n\t\n", String::new()),
        ];
        for (raw, want) in cases {
            assert_eq!(clean_diagnostic(raw), *want, "diagnostic of {raw:?}");
        }
        let cut = clean_diagnostic(&long);
        assert_eq!(cut.chars().count(), MAX_DIAGNOSTIC_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(clean_diagnostic(&cut), cut, "cleaning is idempotent");
    }

    /// Answers at once; enough to build a `consult` future.
    struct Instant0;

    impl Adapter for Instant0 {
        fn exchange<'a>(
            &'a self,
            _advisor: &'a AdvisorSpec,
            _prompt: &'a str,
            _io: &'a Io,
        ) -> BoxFuture<'a, Result<Answer, Failure>> {
            Box::pin(async {
                Ok(Answer {
                    text: "{\"conclusion\": \"fine\"}".into(),
                    usage: None,
                    source: None,
                    vouched: true,
                })
            })
        }
    }

    #[tokio::test]
    async fn consult_is_send_so_the_daemon_can_spawn_it() {
        fn assert_send<T: Send>(value: T) -> T {
            value
        }
        let spec = AdvisorSpec {
            id: "a".into(),
            adapter: "instant".into(),
            executable: None,
            credential: None,
            settings: serde_json::Map::new(),
        };
        let io = Io::with_timeout(Duration::from_secs(5));
        let outcome = assert_send(consult(&Instant0, &spec, "q", &io)).await;
        assert_eq!(outcome.result.map(|n| n.conclusion), Ok("fine".to_string()));
    }

    /// Answers only whitespace, or fails, having spent tokens.
    struct Spent(bool);

    const SPENT: Usage = Usage {
        input_tokens: 11,
        output_tokens: 2,
    };

    impl Adapter for Spent {
        fn exchange<'a>(
            &'a self,
            _advisor: &'a AdvisorSpec,
            _prompt: &'a str,
            _io: &'a Io,
        ) -> BoxFuture<'a, Result<Answer, Failure>> {
            let fails = self.0;
            Box::pin(async move {
                if fails {
                    Err(Failure::new(FailureKind::Error, "refused").with_usage(Some(SPENT)))
                } else {
                    Ok(Answer {
                        text: " \n ".into(),
                        usage: Some(SPENT),
                        source: None,
                        vouched: true,
                    })
                }
            })
        }
    }

    #[tokio::test]
    async fn usage_is_kept_when_the_exchange_fails_after_spending_tokens() {
        let spec = AdvisorSpec {
            id: "a".into(),
            adapter: "spent".into(),
            executable: None,
            credential: None,
            settings: serde_json::Map::new(),
        };
        let io = Io::with_timeout(Duration::from_secs(5));
        for (fails, kind) in [(false, FailureKind::Empty), (true, FailureKind::Error)] {
            let outcome = consult(&Spent(fails), &spec, "q", &io).await;
            let failure = outcome.result.expect_err("a failure");
            assert_eq!(failure.kind, kind);
            assert_eq!(outcome.usage, Some(SPENT), "{kind:?}");
            assert_eq!(failure.usage, Some(SPENT), "{kind:?}");
        }
    }

    #[test]
    fn failure_kinds_round_trip_through_their_names() {
        for kind in FailureKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::Value::from(kind.as_str()));
        }
        let failure = Failure::rate_limited("line one\nretry later", Some(7));
        assert_eq!(failure.diagnostic, "retry later");
        assert_eq!(failure.retry_after_s, Some(7));
    }
}
