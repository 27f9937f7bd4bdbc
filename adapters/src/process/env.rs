//! The executable's path and its minimal, explicit environment, as the one policy of
//! `crate::environment` says.
//!
//! A process advisor never inherits the daemon's environment: it gets
//!
//! 1. the asking process's `PATH` (the daemon's own when the request carried none);
//! 2. these variables when set, through the exchange's environment, else from the daemon
//!    (which runs as the same user): [`BASE_VARS`] — `HOME`, `USER`, `LOGNAME`, `LANG`,
//!    `LC_ALL`, `TMPDIR`, the XDG base directories, the proxy variables and the TLS
//!    trust-store variables a CLI needs to reach its service;
//! 3. `TERM=dumb` and `NO_COLOR=1`, so that CLIs do not paint their output;
//! 4. the advisor's `credential` variable and each of its `pass_env` variables, from the
//!    asking process only (a credential is never taken from the daemon's environment);
//! 5. the advisor's `env` map, which wins over everything above;
//! 6. `ADVISORD_EXCHANGE`, the exchange's marker, by which its descendants are found and
//!    stopped with it ([`super::contain`]).
//!
//! Anything else — the daemon's own secrets, other `ADVISORD_*`, a shell's functions — is
//! absent.

use super::settings::ProcessSettings;
use crate::contract::{AdvisorSpec, Failure, FailureKind, Io};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Variables passed through when set: the policy's list (`crate::environment`).
pub use crate::environment::FROM_DAEMON as BASE_VARS;

/// Variables always set to these values (before the advisor's `env`).
pub use crate::environment::FIXED as FIXED_VARS;

/// The `PATH` the advisor is looked up on and runs with.
pub fn search_path(io: &Io) -> Option<String> {
    (io.env)("PATH")
        .filter(|p| !p.is_empty())
        .or_else(|| std::env::var("PATH").ok())
}

/// The environment the advisor's process gets (see the module documentation).
pub fn environment(
    advisor: &AdvisorSpec,
    settings: &ProcessSettings,
    io: &Io,
) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    if let Some(path) = search_path(io) {
        vars.insert("PATH".to_string(), path);
    }
    for name in BASE_VARS {
        let value = (io.env)(name).or_else(|| std::env::var(name).ok());
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            vars.insert((*name).to_string(), value);
        }
    }
    for (name, value) in FIXED_VARS {
        vars.insert((*name).to_string(), (*value).to_string());
    }
    let asked = advisor.credential.iter().chain(settings.pass_env.iter());
    for name in asked {
        if let Some(value) = (io.env)(name).filter(|v| !v.is_empty()) {
            vars.insert(name.clone(), value);
        }
    }
    for (name, value) in &settings.env {
        vars.insert(name.clone(), value.clone());
    }
    vars
}

/// Whether the asking process set one of the advisor's `pass_env` variables.
pub fn has_passed_credential(settings: &ProcessSettings, io: &Io) -> bool {
    settings
        .pass_env
        .iter()
        .any(|name| (io.env)(name).is_some_and(|v| !v.is_empty()))
}

/// An authentication failure of an advisor whose credential variables (`credential`,
/// `pass_env`) the asking process set none of, and its own `env` map does not set either,
/// is that asker's `not_configured`, not the advisor's `auth_failed`.
///
/// An agent host may withhold them from the servers it starts (Gemini CLI removes every
/// variable whose name looks like a secret), so the same advisor answers another asker
/// whose environment carries the key. A `not_configured` outcome is never counted by the
/// circuit, so one asker's environment never shuts the advisor out for everyone else.
/// With a credential variable set, the refusal is the advisor's own: `auth_failed`.
pub fn withheld(
    failure: Failure,
    advisor: &AdvisorSpec,
    settings: &ProcessSettings,
    io: &Io,
) -> Failure {
    if failure.kind != FailureKind::AuthFailed {
        return failure;
    }
    let names: Vec<&String> = advisor
        .credential
        .iter()
        .chain(settings.pass_env.iter())
        .collect();
    let set = |name: &&String| {
        (io.env)(name).is_some_and(|v| !v.is_empty())
            || settings
                .env
                .get(name.as_str())
                .is_some_and(|v| !v.is_empty())
    };
    if names.is_empty() || names.iter().any(set) {
        return failure;
    }
    let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let diagnostic = format!(
        "{}; the asking process set none of {} (an agent host may withhold them from the \
         servers it starts: see docs/MCP.md), so this is not counted against advisor `{}`",
        failure.diagnostic,
        listed.join(", "),
        advisor.id
    );
    Failure::new(FailureKind::NotConfigured, &diagnostic).with_usage(failure.usage)
}

/// The working directory of the advisor's process: the asking process's `PWD` when it is
/// an existing absolute directory (so the advisor sees the project), else the daemon's.
pub fn working_dir(io: &Io) -> Option<PathBuf> {
    (io.env)("PWD")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
}

/// Why the executable could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Not on the asking process's `PATH`.
    #[error("executable `{0}` was not found on `PATH`; install it or put its directory on `PATH`")]
    NotOnPath(String),
    /// An absolute path that does not name an executable file.
    #[error("executable `{0}` does not exist or is not an executable file")]
    NotExecutable(String),
}

/// The executable's full path: an absolute path as is, a name looked up on `path` (relative
/// `PATH` entries are taken from `cwd`, else the daemon's working directory).
pub fn resolve(
    executable: &str,
    path: Option<&str>,
    cwd: Option<&Path>,
) -> Result<PathBuf, ResolveError> {
    if executable.starts_with('/') {
        let candidate = Path::new(executable);
        return if is_executable_file(candidate) {
            Ok(candidate.to_path_buf())
        } else {
            Err(ResolveError::NotExecutable(executable.to_string()))
        };
    }
    let cwd = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    };
    which::which_in(executable, Some(path.unwrap_or("")), cwd)
        .map_err(|_| ResolveError::NotOnPath(executable.to_string()))
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
