//! The adapter contract suite: every adapter against every failure kind, an answer, a slow
//! answer, the deadline and the cancellation, through `contract::consult` and the fakes.
//!
//! # Adding an adapter: one line
//!
//! In the adapter's case file (`process_cases.rs`, `http_cases.rs`, or a new
//! `<name>_cases.rs` with its `mod` line below), implement [`Rig`]: given a [`Scenario`],
//! return a [`Setup`] whose fake behaves that way (start the fake server, pick the fake
//! advisor's flags, keep guards in [`Setup::keep`]). Then add the row:
//!
//! ```ignore
//! contract_rig!(openai, OpenAiRig::new());
//! ```
//!
//! which generates one test per scenario (`openai::rate_limited`, ...), each checked
//! against THE table, [`Scenario::expect`]. A rig makes its fake produce the scenario's
//! canonical material: [`ANSWER`] with [`USAGE`] for `answer` (after [`SLOW_DELAY`] for
//! `slow_answer`), [`MALFORMED_ANSWER`] or an unparseable body for `malformed`, a rate limit
//! asking for [`RETRY_AFTER_S`] seconds, and a hang that ignores every signal for `deadline`
//! and `cancellation`. What a transport cannot report (usage, retry-after) it says with
//! [`Setup::reports_usage`] / [`Setup::reports_retry_after`]; what it must release after a
//! stop (a process group, a connection) it proves with [`Setup::released`].
//!
//! # One-off cases
//!
//! `check(name, setup, Case { .. }).await` runs any setup through the contract and asserts
//! the [`Expect`]ed outcome, the diagnostic's shape, the timing bounds and the release; it
//! returns the [`Outcome`] for further assertions.

use advisord_adapters::contract::{
    consult, env_from_map, Adapter, AdvisorSpec, FailureKind, Io, Outcome, Usage,
    MAX_DIAGNOSTIC_CHARS, STOP_GRACE,
};
use advisord_adapters::normalise::{normalise, Normalised};
use futures::future::BoxFuture;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Generate one test per [`Scenario`] for a rig: `contract_rig!(name, rig_expression);`.
/// The tests live in a module `name` that sees the calling file's items.
macro_rules! contract_rig {
    ($name:ident, $rig:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run(scenario: $crate::Scenario) {
                let rig = $rig;
                $crate::run_scenario(stringify!($name), &rig, scenario).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn answer() {
                run($crate::Scenario::Answer).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn slow_answer() {
                run($crate::Scenario::SlowAnswer).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn empty() {
                run($crate::Scenario::Empty).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn malformed() {
                run($crate::Scenario::Malformed).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rate_limited() {
                run($crate::Scenario::RateLimited).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn auth_failed() {
                run($crate::Scenario::AuthFailed).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn unavailable() {
                run($crate::Scenario::Unavailable).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn error() {
                run($crate::Scenario::Error).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn deadline() {
                run($crate::Scenario::Deadline).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cancellation() {
                run($crate::Scenario::Cancellation).await;
            }
        }
    };
}

mod deadline_cases;
mod http_cases;
mod mesh_cases;
mod process_cases;
mod registry_cases;
mod scripted_cases;

/// The answer every rig's fake gives in the `answer` scenarios.
pub const ANSWER: &str = r#"Here is my review.

```json
{"conclusion": "The cache key omits the locale, so two locales share one entry.",
 "stance": "opposes",
 "assumptions": ["the locale is known when the key is built"],
 "risks": ["a CDN in front may cache by path only"],
 "actions": ["add the locale to the key"],
 "falsifiers": ["request two locales and compare the bodies"],
 "confidence": 0.7}
```"#;

/// An answer with no recoverable conclusion (cut off mid-object), for `malformed`.
pub const MALFORMED_ANSWER: &str = "```json\n{\"conclusion\": \"The cache key omits";

/// The token usage a rig's fake reports with [`ANSWER`], where the transport carries it.
pub const USAGE: Usage = Usage {
    input_tokens: 12,
    output_tokens: 34,
};

/// The wait a rig's fake asks for in `rate_limited`, where the transport carries it.
pub const RETRY_AFTER_S: u64 = 7;

/// How long the fake waits before answering in `slow_answer`.
pub const SLOW_DELAY: Duration = Duration::from_millis(300);

/// The deadline of the `deadline` scenario.
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(600);

/// When the `cancellation` scenario cancels.
pub const CANCEL_AFTER: Duration = Duration::from_millis(300);

/// The deadline of every other scenario: long, only a bound.
pub const LONG_TIMEOUT: Duration = Duration::from_secs(20);

/// Scheduling slack allowed over a bound on a loaded two-core machine.
pub const SLACK: Duration = Duration::from_millis(500);

/// What the fake does in one row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Answers [`ANSWER`] at once, with [`USAGE`].
    Answer,
    /// Answers [`ANSWER`] after [`SLOW_DELAY`]: well inside the deadline, still completed.
    SlowAnswer,
    /// Answers with no text (or only whitespace).
    Empty,
    /// Answers something with no recoverable conclusion.
    Malformed,
    /// Says to come back later, after [`RETRY_AFTER_S`] seconds.
    RateLimited,
    /// Refuses the credential.
    AuthFailed,
    /// Cannot be reached.
    Unavailable,
    /// Fails any other way.
    Error,
    /// Hangs ignoring the deadline, cancellation and signals; the deadline is [`SHORT_TIMEOUT`].
    Deadline,
    /// Hangs ignoring everything; cancelled after [`CANCEL_AFTER`].
    Cancellation,
}

/// What the contract must make of a case.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// A completed consultation with these fields and usage.
    Completed {
        /// The normalised fields.
        fields: Normalised,
        /// The usage reported.
        usage: Option<Usage>,
    },
    /// A failure of this kind.
    Failed {
        /// The kind.
        kind: FailureKind,
        /// The retry-after expected (`rate_limited` only).
        retry_after_s: Option<u64>,
        /// A phrase the diagnostic must contain, if any.
        diagnostic_contains: Option<String>,
    },
}

impl Expect {
    /// A failure of `kind`, nothing more asked.
    pub fn failed(kind: FailureKind) -> Expect {
        Expect::Failed {
            kind,
            retry_after_s: None,
            diagnostic_contains: None,
        }
    }
}

impl Scenario {
    /// Every scenario, in table order.
    pub const ALL: [Scenario; 10] = [
        Scenario::Answer,
        Scenario::SlowAnswer,
        Scenario::Empty,
        Scenario::Malformed,
        Scenario::RateLimited,
        Scenario::AuthFailed,
        Scenario::Unavailable,
        Scenario::Error,
        Scenario::Deadline,
        Scenario::Cancellation,
    ];

    /// THE table: what every adapter's outcome must be in this scenario.
    pub fn expect(self, setup: &Setup) -> Expect {
        let completed = || Expect::Completed {
            fields: normalise(ANSWER).expect("the canonical answer reads"),
            usage: setup.reports_usage.then_some(USAGE),
        };
        match self {
            Scenario::Answer | Scenario::SlowAnswer => completed(),
            Scenario::Empty => Expect::failed(FailureKind::Empty),
            Scenario::Malformed => Expect::failed(FailureKind::Malformed),
            Scenario::RateLimited => Expect::Failed {
                kind: FailureKind::RateLimited,
                retry_after_s: setup.reports_retry_after.then_some(RETRY_AFTER_S),
                diagnostic_contains: None,
            },
            Scenario::AuthFailed => Expect::failed(FailureKind::AuthFailed),
            Scenario::Unavailable => Expect::failed(FailureKind::Unavailable),
            Scenario::Error => Expect::failed(FailureKind::Error),
            Scenario::Deadline => Expect::failed(FailureKind::Timeout),
            Scenario::Cancellation => Expect::failed(FailureKind::Cancelled),
        }
    }

    /// The deadline and cancellation of this scenario's case.
    pub fn case(self, setup: &Setup) -> Case {
        let mut expect = self.expect(setup);
        if let (
            Expect::Failed {
                diagnostic_contains,
                ..
            },
            Some(phrase),
        ) = (&mut expect, &setup.diagnostic_contains)
        {
            *diagnostic_contains = Some(phrase.clone());
        }
        match self {
            Scenario::Deadline => Case {
                timeout: SHORT_TIMEOUT,
                cancel_after: None,
                expect,
            },
            Scenario::Cancellation => Case {
                timeout: LONG_TIMEOUT,
                cancel_after: Some(CANCEL_AFTER),
                expect,
            },
            _ => Case {
                timeout: LONG_TIMEOUT,
                cancel_after: None,
                expect,
            },
        }
    }
}

/// Tells whether an adapter's resources (a process group, a connection) are gone.
pub type ReleaseProbe = Box<dyn Fn() -> bool + Send + Sync>;

/// One adapter, ready for one case.
pub struct Setup {
    /// The adapter under test.
    pub adapter: Arc<dyn Adapter>,
    /// The advisor it is asked as.
    pub advisor: AdvisorSpec,
    /// The asking process's environment (`PATH`, credentials).
    pub env: BTreeMap<String, String>,
    /// Guards that must live for the case (servers, temporary directories).
    pub keep: Vec<Box<dyn Any + Send>>,
    /// Whether the transport reports token usage.
    pub reports_usage: bool,
    /// Whether the transport reports a retry-after.
    pub reports_retry_after: bool,
    /// A phrase every failure's diagnostic must contain in this setup, if any.
    pub diagnostic_contains: Option<String>,
    /// True once the adapter's resources are released; polled after the outcome.
    pub released: Option<ReleaseProbe>,
}

impl Setup {
    /// `adapter` asked as `advisor`: no environment, usage and retry-after reported.
    pub fn new(adapter: Arc<dyn Adapter>, advisor: AdvisorSpec) -> Setup {
        Setup {
            adapter,
            advisor,
            env: BTreeMap::new(),
            keep: Vec::new(),
            reports_usage: true,
            reports_retry_after: true,
            diagnostic_contains: None,
            released: None,
        }
    }

    /// With `name=value` in the asking environment.
    pub fn env(mut self, name: &str, value: &str) -> Setup {
        self.env.insert(name.to_string(), value.to_string());
        self
    }

    /// Keeping `guard` alive until the case is checked.
    pub fn keep(mut self, guard: impl Any + Send) -> Setup {
        self.keep.push(Box::new(guard));
        self
    }

    /// Saying whether the transport reports usage.
    pub fn reports_usage(mut self, reports: bool) -> Setup {
        self.reports_usage = reports;
        self
    }

    /// Saying whether the transport reports retry-after.
    pub fn reports_retry_after(mut self, reports: bool) -> Setup {
        self.reports_retry_after = reports;
        self
    }

    /// Requiring `phrase` in a failure's diagnostic.
    pub fn diagnostic_contains(mut self, phrase: &str) -> Setup {
        self.diagnostic_contains = Some(phrase.to_string());
        self
    }

    /// Proving release with `probe` (true once released), polled with a bound.
    pub fn released(mut self, probe: impl Fn() -> bool + Send + Sync + 'static) -> Setup {
        self.released = Some(Box::new(probe));
        self
    }
}

/// An advisor spec for tests: `id`, `adapter`, settings from a JSON object.
pub fn advisor(id: &str, adapter: &str, settings: serde_json::Value) -> AdvisorSpec {
    AdvisorSpec {
        id: id.to_string(),
        adapter: adapter.to_string(),
        executable: None,
        credential: None,
        settings: settings.as_object().cloned().unwrap_or_default(),
    }
}

/// How one adapter is made to behave per scenario.
pub trait Rig: Send + Sync {
    /// A setup whose fake behaves as `scenario` says.
    fn prepare(&self, scenario: Scenario) -> BoxFuture<'_, Setup>;
}

/// A deadline, an optional cancellation, and the outcome expected.
#[derive(Debug, Clone)]
pub struct Case {
    /// The deadline, from the start of the consultation.
    pub timeout: Duration,
    /// When to cancel, if at all.
    pub cancel_after: Option<Duration>,
    /// What the outcome must be.
    pub expect: Expect,
}

/// The prompt every case sends.
pub const PROMPT: &str = "Is the cache key missing the locale? Reply with one JSON object.";

/// Run one scenario of the table for `rig`.
pub async fn run_scenario(name: &str, rig: &dyn Rig, scenario: Scenario) {
    let setup = rig.prepare(scenario).await;
    let case = scenario.case(&setup);
    check(&format!("{name}::{scenario:?}"), setup, case).await;
}

/// Consult `setup`'s adapter under `case` and assert the expected outcome, the shape of a
/// failure's diagnostic, the timing bounds, and (when the setup can tell) that the
/// adapter's resources were released. Returns the outcome.
pub async fn check(name: &str, setup: Setup, case: Case) -> Outcome {
    let cancel = CancellationToken::new();
    // The HTTP client is made before the clock starts: making one loads the system's
    // certificates, which can take milliseconds on a loaded machine.
    let http = reqwest::Client::new();
    let started = std::time::Instant::now();
    let io = Io {
        deadline: Instant::now() + case.timeout,
        cancel: cancel.clone(),
        env: env_from_map(setup.env.clone()),
        http,
    };
    if let Some(after) = case.cancel_after {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            cancel.cancel();
        });
    }
    // A bound of our own, so a contract that fails to stop a hang fails here, not hangs.
    let bound = case.timeout + Duration::from_secs(5);
    let consulted = consult(setup.adapter.as_ref(), &setup.advisor, PROMPT, &io);
    let outcome = tokio::time::timeout(bound, consulted)
        .await
        .unwrap_or_else(|_| panic!("{name}: consult did not return within {bound:?}"));
    let elapsed = started.elapsed();

    assert!(
        elapsed <= case.timeout + SLACK,
        "{name}: took {elapsed:?}, over the deadline {:?} + {SLACK:?}",
        case.timeout
    );
    let reported = Duration::from_millis(outcome.duration_ms);
    assert!(
        reported <= elapsed + Duration::from_millis(1),
        "{name}: duration_ms {reported:?} exceeds the measured {elapsed:?}"
    );
    match (&case.expect, &outcome.result) {
        (Expect::Completed { fields, usage }, Ok(got)) => {
            assert_eq!(got, fields, "{name}: normalised fields");
            assert_eq!(outcome.usage, *usage, "{name}: usage");
        }
        (
            Expect::Failed {
                kind,
                retry_after_s,
                diagnostic_contains,
            },
            Err(failure),
        ) => {
            assert_eq!(failure.kind, *kind, "{name}: failure kind ({failure:?})");
            if *kind == FailureKind::RateLimited {
                assert_eq!(failure.retry_after_s, *retry_after_s, "{name}: retry-after");
            }
            let diagnostic = &failure.diagnostic;
            assert!(!diagnostic.trim().is_empty(), "{name}: empty diagnostic");
            assert!(
                diagnostic.chars().count() <= MAX_DIAGNOSTIC_CHARS,
                "{name}: diagnostic over {MAX_DIAGNOSTIC_CHARS} characters"
            );
            assert!(
                !diagnostic.chars().any(char::is_control),
                "{name}: control characters in {diagnostic:?}"
            );
            if let Some(phrase) = diagnostic_contains {
                assert!(
                    diagnostic.contains(phrase.as_str()),
                    "{name}: {diagnostic:?} lacks {phrase:?}"
                );
            }
        }
        (expect, got) => panic!("{name}: expected {expect:?}, got {got:?}"),
    }
    match (&case.expect, case.cancel_after) {
        (
            Expect::Failed {
                kind: FailureKind::Timeout,
                ..
            },
            _,
        ) => assert!(
            // Never before the caller's deadline: an answer may still come until then.
            elapsed + Duration::from_millis(2) >= case.timeout,
            "{name}: timed out early, after {elapsed:?} of {:?}",
            case.timeout
        ),
        (
            Expect::Failed {
                kind: FailureKind::Cancelled,
                ..
            },
            Some(after),
        ) => assert!(
            elapsed <= after + STOP_GRACE + SLACK,
            "{name}: cancellation took {elapsed:?} (cancelled at {after:?})"
        ),
        _ => {}
    }
    if let Some(released) = &setup.released {
        let bound = std::time::Instant::now() + Duration::from_secs(3);
        while !released() {
            assert!(
                std::time::Instant::now() < bound,
                "{name}: resources not released in 3 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    drop(setup);
    outcome
}
