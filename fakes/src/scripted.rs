//! An in-process adapter that plays a queue of scripted outcomes.
//!
//! Each call to [`Adapter::exchange`] takes the next [`Script`] from the queue. A call past
//! the end of the queue **panics**, naming the advisor and the counts: a test that consults
//! more often than it scripted is wrong, and silence would hide it. Register it under any
//! adapter name (`Registry::insert`).
//!
//! ```
//! use advisord_fakes::scripted::{Script, ScriptedAdapter};
//! use advisord_adapters::contract::FailureKind;
//! use std::time::Duration;
//!
//! let fake = ScriptedAdapter::new(vec![
//!     Script::answer(r#"{"conclusion": "ok", "stance": "supports"}"#).with_usage(10, 20),
//!     Script::fail(FailureKind::RateLimited, "slow down").with_retry_after(30),
//!     Script::hang(),
//! ]);
//! assert_eq!(fake.remaining(), 3);
//! ```

use advisord_adapters::contract::{Adapter, AdvisorSpec, Answer, Failure, FailureKind, Io, Usage};
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted exchange.
#[derive(Debug, Clone, PartialEq)]
pub enum Script {
    /// Answer `text` with `usage` after `delay` (the delay ignores deadline and cancellation).
    Answer {
        /// The answer text.
        text: String,
        /// The usage reported with it.
        usage: Option<Usage>,
        /// How long to wait first.
        delay: Duration,
    },
    /// Fail with `failure` after `delay` (ignoring deadline and cancellation).
    Fail {
        /// The failure returned.
        failure: Failure,
        /// How long to wait first.
        delay: Duration,
    },
    /// Never return, ignoring the deadline and the cancellation: only dropping the future
    /// stops it ([`ScriptedAdapter::dropped`] counts that).
    Hang,
    /// Wait for the (adapter's) deadline or cancellation, as a well-behaved adapter does,
    /// then fail with `failure`: shows that an adapter's own, more precise failure wins.
    FailWhenStopped {
        /// The failure returned once stopped.
        failure: Failure,
    },
}

impl Script {
    /// An answer at once, without usage.
    pub fn answer(text: &str) -> Script {
        Script::Answer {
            text: text.to_string(),
            usage: None,
            delay: Duration::ZERO,
        }
    }

    /// A failure at once, its diagnostic as given (the contract cleans it).
    pub fn fail(kind: FailureKind, diagnostic: &str) -> Script {
        Script::Fail {
            failure: Failure {
                kind,
                diagnostic: diagnostic.to_string(),
                retry_after_s: None,
                usage: None,
            },
            delay: Duration::ZERO,
        }
    }

    /// An exchange that never returns and ignores everything.
    pub fn hang() -> Script {
        Script::Hang
    }

    /// An exchange that fails with `kind` once its deadline passes or it is cancelled.
    pub fn fail_when_stopped(kind: FailureKind, diagnostic: &str) -> Script {
        Script::FailWhenStopped {
            failure: Failure {
                kind,
                diagnostic: diagnostic.to_string(),
                retry_after_s: None,
                usage: None,
            },
        }
    }

    /// The same, reporting usage (answers only; ignored otherwise).
    pub fn with_usage(self, input_tokens: u64, output_tokens: u64) -> Script {
        match self {
            Script::Answer { text, delay, .. } => Script::Answer {
                text,
                usage: Some(Usage {
                    input_tokens,
                    output_tokens,
                }),
                delay,
            },
            other => other,
        }
    }

    /// The same, after `delay` (answers and failures; ignored otherwise).
    pub fn after(self, delay: Duration) -> Script {
        match self {
            Script::Answer { text, usage, .. } => Script::Answer { text, usage, delay },
            Script::Fail { failure, .. } => Script::Fail { failure, delay },
            other => other,
        }
    }

    /// The same, asking to retry after `seconds` (failures only).
    pub fn with_retry_after(self, seconds: u64) -> Script {
        match self {
            Script::Fail { failure, delay } => Script::Fail {
                failure: Failure {
                    retry_after_s: Some(seconds),
                    ..failure
                },
                delay,
            },
            Script::FailWhenStopped { failure } => Script::FailWhenStopped {
                failure: Failure {
                    retry_after_s: Some(seconds),
                    ..failure
                },
            },
            other => other,
        }
    }
}

/// The adapter that plays [`Script`]s in order.
#[derive(Debug, Default)]
pub struct ScriptedAdapter {
    queue: Mutex<VecDeque<Script>>,
    scripted: usize,
    calls: AtomicUsize,
    dropped: Arc<AtomicUsize>,
    prompts: Mutex<Vec<String>>,
}

impl ScriptedAdapter {
    /// An adapter that plays `scripts` in order, then panics if called again.
    pub fn new(scripts: Vec<Script>) -> ScriptedAdapter {
        ScriptedAdapter {
            scripted: scripts.len(),
            queue: Mutex::new(scripts.into()),
            ..ScriptedAdapter::default()
        }
    }

    /// How many times `exchange` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many scripts are left.
    pub fn remaining(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// How many exchanges were dropped before they finished (stopped by the contract).
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// The prompts received, in call order.
    pub fn prompts(&self) -> Vec<String> {
        self.prompts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Panic unless every script was played.
    pub fn assert_exhausted(&self) {
        let left = self.remaining();
        assert!(
            left == 0,
            "ScriptedAdapter: {left} of {} scripted outcomes were never asked for",
            self.scripted
        );
    }
}

/// Counts a drop of an unfinished exchange: armed until the exchange returns.
struct DropProbe {
    dropped: Arc<AtomicUsize>,
    armed: bool,
}

impl DropProbe {
    /// The exchange returned: its drop is no longer a stop.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        if self.armed {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Adapter for ScriptedAdapter {
    fn exchange<'a>(
        &'a self,
        advisor: &'a AdvisorSpec,
        prompt: &'a str,
        io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.prompts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(prompt.to_string());
        let next = self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        let Some(script) = next else {
            panic!(
                "ScriptedAdapter for advisor `{}` called {call} times but only {} outcomes \
                 were scripted: script one more outcome or consult less",
                advisor.id, self.scripted
            );
        };
        let mut probe = DropProbe {
            dropped: Arc::clone(&self.dropped),
            armed: true,
        };
        Box::pin(async move {
            let result = match script {
                Script::Answer { text, usage, delay } => {
                    tokio::time::sleep(delay).await;
                    Ok(Answer {
                        text,
                        usage,
                        source: None,
                        vouched: true,
                    })
                }
                Script::Fail { failure, delay } => {
                    tokio::time::sleep(delay).await;
                    Err(failure)
                }
                Script::Hang => futures::future::pending().await,
                Script::FailWhenStopped { failure } => {
                    tokio::select! {
                        () = tokio::time::sleep_until(io.deadline) => {}
                        () = io.cancel.cancelled() => {}
                    }
                    Err(failure)
                }
            };
            probe.disarm();
            result
        })
    }
}
