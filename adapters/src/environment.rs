//! The one environment policy of an exchange: what an advisor sees, and from whom.
//!
//! The daemon is shared by every session of the user, so an exchange sees the environment
//! of the process that asked, never the daemon's own secrets. Every adapter reads it
//! through `Io::env`, which [`lookup`] builds; the process adapter turns the same policy
//! into its child's environment (`process::env::environment`). docs/ADAPTERS.md states
//! it as a table:
//!
//! | from | variables |
//! | --- | --- |
//! | the asker | `PATH`; `PWD` (the request's root); each advisor's `credential` and `pass_env` values, carried only by a request that consults (a job resumed after a restart uses the daemon's values for these, as credentials are never journaled) |
//! | the daemon | [`FROM_DAEMON`]: who the user is, where their files are, locale, proxies, TLS trust stores — never a credential |
//! | fixed | [`FIXED`]: `TERM=dumb`, `NO_COLOR=1` (then a process advisor's own `env` map wins over everything) |
//!
//! Anything else — the daemon's own credentials, `ADVISORD_*`, a shell's functions — is
//! absent.

use crate::contract::EnvLookup;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Variables an exchange takes from the daemon's own environment (the same user): they
/// say who the user is and where their files are, never a credential.
pub const FROM_DAEMON: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Variables a process advisor always gets with these values (before its own `env`).
pub const FIXED: &[(&str, &str)] = &[("TERM", "dumb"), ("NO_COLOR", "1")];

/// What the asking process contributes to an exchange.
#[derive(Clone, Default)]
pub struct Asker {
    /// Its `PATH`.
    pub path: Option<String>,
    /// The request's root: the advisor's working directory (`PWD`).
    pub root: Option<String>,
    /// The credential (and `pass_env`) values its consultation carried, by variable.
    pub credentials: BTreeMap<String, String>,
}

impl std::fmt::Debug for Asker {
    // By hand, so that a credential value can never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("path", &self.path)
            .field("root", &self.root)
            .field(
                "credentials (names only)",
                &self.credentials.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The environment an exchange sees (`Io::env`): the asker's `PATH`, root and credential
/// values, then [`FROM_DAEMON`] from `daemon` (the daemon's own environment), nothing
/// else.
pub fn lookup(
    asker: Asker,
    daemon: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> EnvLookup {
    Arc::new(move |name: &str| match name {
        "PATH" => asker.path.clone(),
        "PWD" => asker.root.clone(),
        _ => asker
            .credentials
            .get(name)
            .cloned()
            .or_else(|| FROM_DAEMON.contains(&name).then(|| daemon(name)).flatten()),
    })
}

/// [`lookup`] over this process's own environment for the daemon's part.
pub fn lookup_in_process(asker: Asker) -> EnvLookup {
    lookup(asker, |name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_sees_the_asker_then_the_daemons_harmless_variables_and_nothing_else() {
        let asker = Asker {
            path: Some("/asker/bin".into()),
            root: Some("/project".into()),
            credentials: [("MY_KEY".to_string(), "asker-value".to_string())].into(),
        };
        let daemon = |name: &str| match name {
            "HOME" => Some("/home/me".to_string()),
            "PATH" => Some("/daemon/bin".to_string()),
            "MY_KEY" | "OTHER_KEY" | "ADVISORD_MODE" => Some("daemon-value".to_string()),
            _ => None,
        };
        let env = lookup(asker, daemon);
        assert_eq!(env("PATH").as_deref(), Some("/asker/bin"));
        assert_eq!(env("PWD").as_deref(), Some("/project"));
        assert_eq!(env("MY_KEY").as_deref(), Some("asker-value"));
        assert_eq!(env("HOME").as_deref(), Some("/home/me"));
        // The daemon's own credentials and settings never show.
        assert_eq!(env("OTHER_KEY"), None);
        assert_eq!(env("ADVISORD_MODE"), None);
        // No PATH from the asker: none (the process adapter falls back to the daemon's
        // own to find the executable).
        let env = lookup(Asker::default(), daemon);
        assert_eq!(env("PATH"), None);
        assert_eq!(env("MY_KEY"), None);
    }
}
