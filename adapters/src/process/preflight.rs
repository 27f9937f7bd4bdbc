//! The optional `preflight` command: a cheap check (e.g. a CLI's login status) run before
//! the exchange, so that an advisor that is not logged in fails `auth_failed` in a fraction
//! of a second instead of hanging in a retry loop until the deadline.
//!
//! - It runs with the exchange's environment, standard input closed, bounded by
//!   [`PREFLIGHT_TIMEOUT`] (and the exchange's deadline), in its own process group.
//! - Exit 0 passes. Any other exit fails: the kind its output matches in
//!   `failure_patterns`, else `auth_failed`.
//! - A preflight that does not answer in time, or dies of a signal, proves nothing: the
//!   exchange goes ahead (and nothing is cached).
//! - A verdict is cached for [`PREFLIGHT_TTL`], keyed by the advisor, the command and the
//!   `PATH`, so a busy daemon does not run it for every consultation.
//! - It is skipped when the asking process sets one of the advisor's `pass_env` variables:
//!   a key in the environment is the login.

use super::classify::{last_line, matching};
use super::env::{environment, has_passed_credential, resolve, search_path, working_dir};
use super::run::{run, Ended, Invocation, Limits};
use super::settings::{ProcessSettings, PATTERN_KINDS};
use super::ProcessConfig;
use crate::contract::{AdvisorSpec, Failure, FailureKind, Io};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// The longest a preflight may run before it is stopped and ignored.
pub const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a preflight's verdict is reused.
pub const PREFLIGHT_TTL: Duration = Duration::from_secs(180);

/// Cached verdicts can only be as many as advisor × `PATH` pairs; this bounds a daemon
/// that sees many `PATH`s.
const CACHE_LIMIT: usize = 256;

/// Advisor id, preflight command, `PATH`.
type Key = (String, Vec<String>, String);

/// When a verdict was reached, and the verdict.
type Verdict = (Instant, Result<(), Failure>);

fn cache() -> &'static Mutex<HashMap<Key, Verdict>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Verdict>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Run `advisor`'s preflight, if it has one, with the default bounds.
///
/// `Ok(())` when it passed, proved nothing, was skipped, or there is none.
pub async fn preflight(advisor: &AdvisorSpec, io: &Io) -> Result<(), Failure> {
    let settings = ProcessSettings::parse(advisor)
        .map_err(|e| Failure::new(FailureKind::Error, &format!("invalid settings: {e}")))?;
    run_preflight(advisor, &settings, io, &ProcessConfig::default()).await
}

/// [`preflight`] with parsed settings and the adapter's bounds.
pub(super) async fn run_preflight(
    advisor: &AdvisorSpec,
    settings: &ProcessSettings,
    io: &Io,
    config: &ProcessConfig,
) -> Result<(), Failure> {
    let Some(command) = &settings.preflight else {
        return Ok(());
    };
    if has_passed_credential(settings, io) {
        return Ok(());
    }
    let path = search_path(io);
    let key: Key = (
        advisor.id.clone(),
        command.clone(),
        path.clone().unwrap_or_default(),
    );
    if let Some(verdict) = cached(&key) {
        return verdict;
    }
    let shown = command.join(" ");
    let cwd = working_dir(io);
    let program = resolve(&command[0], path.as_deref(), cwd.as_deref()).map_err(|e| {
        Failure::new(
            FailureKind::Unavailable,
            &format!("preflight `{shown}`: {e}"),
        )
    })?;
    let invocation = Invocation {
        program,
        args: command[1..].to_vec(),
        env: environment(advisor, settings, io),
        cwd,
        stdin: None,
    };
    let own_deadline = Instant::now() + config.preflight_timeout;
    let limits = Limits {
        deadline: own_deadline.min(io.deadline),
        cancel: io.cancel.clone(),
        term_grace: config.term_grace,
        output_cap: config.output_cap,
        drain: config.drain,
    };
    let finished = run(invocation, &limits).await.map_err(|e| {
        Failure::new(
            FailureKind::Unavailable,
            &format!("preflight `{shown}` could not start: {e}"),
        )
    })?;
    let stdout = finished.stdout.text();
    let stderr = finished.stderr.text();
    let verdict = match finished.ended {
        Ended::Exited(0) => Ok(()),
        Ended::Exited(code) => {
            let (kind, line) =
                matching(settings, &PATTERN_KINDS, &stderr, &stdout).unwrap_or_else(|| {
                    let line = last_line(&stderr)
                        .or_else(|| last_line(&stdout))
                        .unwrap_or_else(|| format!("exit status {code}"));
                    (FailureKind::AuthFailed, line)
                });
            Err(Failure::new(
                kind,
                &format!("preflight `{shown}` failed: {line}"),
            ))
        }
        Ended::Cancelled => {
            return Err(Failure::new(
                FailureKind::Cancelled,
                &format!("cancelled during the preflight `{shown}`"),
            ))
        }
        Ended::Deadline if io.deadline <= Instant::now() => {
            return Err(Failure::new(
                FailureKind::Timeout,
                &format!("the deadline passed during the preflight `{shown}`"),
            ))
        }
        Ended::Deadline | Ended::Signalled(_) => {
            tracing::warn!(
                advisor = %advisor.id,
                preflight = %shown,
                "the preflight proved nothing (no answer in time, or killed); consulting anyway"
            );
            return Ok(());
        }
    };
    remember(key, verdict.clone());
    verdict
}

fn cached(key: &Key) -> Option<Result<(), Failure>> {
    let cache = cache()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .get(key)
        .filter(|(at, _)| at.elapsed() < PREFLIGHT_TTL)
        .map(|(_, verdict)| verdict.clone())
}

fn remember(key: Key, verdict: Result<(), Failure>) {
    let mut cache = cache()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if cache.len() >= CACHE_LIMIT {
        cache.retain(|_, (at, _)| at.elapsed() < PREFLIGHT_TTL);
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
    }
    cache.insert(key, (Instant::now(), verdict));
}
