//! The process adapter: an advisor that is a local executable (typically a vendor's CLI).
//!
//! One exchange:
//!
//! 1. read the advisor's settings ([`settings`]; checked once at catalogue load through
//!    [`Adapter::validate`]);
//! 2. find the executable: an absolute path, or a name looked up on the asking process's
//!    `PATH` — not found is `unavailable`;
//! 3. run the `preflight`, if any ([`preflight`]): "not logged in" fails at once;
//! 4. run the executable ([`run`]) in its own process group, with a minimal explicit
//!    environment ([`env`]), the prompt on standard input (closed after) or substituted
//!    into the `{prompt}` argument (standard input then closed empty), standard output and
//!    standard error read concurrently and capped at [`ProcessConfig::output_cap`] each;
//! 5. on the deadline or a cancellation: SIGTERM to the group, [`ProcessConfig::term_grace`],
//!    SIGKILL to the group, reap; the group is killed in `Drop` too, since the contract
//!    layer drops an exchange that outlives the caller's deadline;
//! 6. classify ([`classify`]): the exit status and `failure_patterns` decide the failure
//!    kind; a process stopped at the deadline whose output shows retry lines is
//!    `rate_limited` / `unavailable` rather than a bare `timeout`.

pub mod classify;
pub mod contain;
pub mod env;
pub mod preflight;
pub mod run;
pub mod settings;

pub use preflight::preflight;

use crate::contract::{Adapter, AdvisorSpec, Answer, Failure, FailureKind, Io, STOP_GRACE};
use futures::future::BoxFuture;
use settings::ProcessSettings;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bounds of every exchange of a [`ProcessAdapter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessConfig {
    /// Time between SIGTERM and SIGKILL (50 ms by default). The stop goes on in a task of
    /// its own after the run has reported, so it is not bounded by the contract's
    /// [`STOP_GRACE`]: only the classification of a run stopped at the deadline is.
    pub term_grace: Duration,
    /// Bytes kept of each of standard output and standard error (1 MiB); the rest is read
    /// and discarded.
    pub output_cap: usize,
    /// How long the pipes may stay open once the process exited by itself (a descendant
    /// that left the group may hold them). A third of [`STOP_GRACE`], so that an exit just
    /// before the deadline is still read and classified within the grace.
    pub drain: Duration,
    /// The longest a `preflight` may run ([`preflight::PREFLIGHT_TIMEOUT`]).
    pub preflight_timeout: Duration,
}

impl Default for ProcessConfig {
    fn default() -> ProcessConfig {
        ProcessConfig {
            term_grace: Duration::from_millis(50),
            output_cap: 1024 * 1024,
            drain: STOP_GRACE / 3,
            preflight_timeout: preflight::PREFLIGHT_TIMEOUT,
        }
    }
}

/// The registry key of the process adapter.
pub const NAME: &str = "process";

/// The process adapter under its registry key, with the default bounds.
pub fn adapters() -> Vec<(&'static str, Arc<dyn Adapter>)> {
    vec![(NAME, Arc::new(ProcessAdapter::default()))]
}

/// Settings parsed per catalogue entry are kept; a daemon sees few distinct entries.
const SETTINGS_CACHE_LIMIT: usize = 256;

/// The process adapter (registry key `process`).
#[derive(Debug, Default)]
pub struct ProcessAdapter {
    config: ProcessConfig,
    parsed: Mutex<HashMap<String, Arc<ProcessSettings>>>,
}

impl ProcessAdapter {
    /// An adapter with these bounds.
    pub fn new(config: ProcessConfig) -> ProcessAdapter {
        ProcessAdapter {
            config,
            parsed: Mutex::new(HashMap::new()),
        }
    }

    /// The bounds this adapter runs with.
    pub fn config(&self) -> &ProcessConfig {
        &self.config
    }

    fn settings(&self, advisor: &AdvisorSpec) -> Result<Arc<ProcessSettings>, Failure> {
        let key = format!(
            "{}\u{0}{:?}\u{0}{}",
            advisor.id,
            advisor.executable,
            serde_json::Value::Object(advisor.settings.clone())
        );
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(settings) = parsed.get(&key) {
            return Ok(settings.clone());
        }
        let settings = Arc::new(ProcessSettings::parse(advisor).map_err(|e| {
            Failure::new(
                FailureKind::Error,
                &format!("advisor `{}` has invalid settings: {e}", advisor.id),
            )
        })?);
        if parsed.len() >= SETTINGS_CACHE_LIMIT {
            parsed.clear();
        }
        parsed.insert(key, settings.clone());
        Ok(settings)
    }

    async fn consult(
        &self,
        advisor: &AdvisorSpec,
        prompt: &str,
        io: &Io,
    ) -> Result<Answer, Failure> {
        let settings = self.settings(advisor)?;
        let executable = advisor.executable.as_deref().unwrap_or_default();
        let path = env::search_path(io);
        let cwd = env::working_dir(io);
        let program = env::resolve(executable, path.as_deref(), cwd.as_deref())
            .map_err(|e| Failure::new(FailureKind::Unavailable, &e.to_string()))?;
        self.exchange_once(advisor, &settings, &program, prompt, io)
            .await
            .map_err(|failure| env::withheld(failure, advisor, &settings, io))
    }

    /// The preflight, the run and its classification, once the executable is found.
    async fn exchange_once(
        &self,
        advisor: &AdvisorSpec,
        settings: &ProcessSettings,
        program: &std::path::Path,
        prompt: &str,
        io: &Io,
    ) -> Result<Answer, Failure> {
        let executable = advisor.executable.as_deref().unwrap_or_default();
        let cwd = env::working_dir(io);
        preflight::run_preflight(advisor, settings, io, &self.config).await?;
        let (args, stdin) = if settings.prompt_in_args() {
            (settings.args_with(prompt), None)
        } else {
            (settings.args.clone(), Some(prompt.as_bytes().to_vec()))
        };
        let invocation = run::Invocation {
            program: program.to_path_buf(),
            args,
            env: env::environment(advisor, settings, io),
            cwd,
            stdin,
        };
        let limits = run::Limits {
            deadline: io.deadline,
            cancel: io.cancel.clone(),
            term_grace: self.config.term_grace,
            output_cap: self.config.output_cap,
            drain: self.config.drain,
        };
        let finished = run::run(invocation, &limits).await.map_err(|e| {
            let kind = match e.kind() {
                std::io::ErrorKind::NotFound => FailureKind::Unavailable,
                _ => FailureKind::Error,
            };
            Failure::new(kind, &format!("could not start `{executable}`: {e}"))
        })?;
        for (stream, captured) in [("stdout", &finished.stdout), ("stderr", &finished.stderr)] {
            if captured.discarded > 0 {
                tracing::warn!(
                    advisor = %advisor.id,
                    stream,
                    discarded_bytes = captured.discarded,
                    "output over the cap was read and discarded"
                );
            }
        }
        classify::classify(&finished, settings, executable)
    }
}

impl Adapter for ProcessAdapter {
    fn exchange<'a>(
        &'a self,
        advisor: &'a AdvisorSpec,
        prompt: &'a str,
        io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>> {
        Box::pin(self.consult(advisor, prompt, io))
    }

    fn validate(&self, advisor: &AdvisorSpec) -> Result<(), (String, String)> {
        ProcessSettings::parse(advisor)
            .map(|_| ())
            .map_err(|e| (e.field, e.message))
    }
}
