//! What a request over the TCP listener may name.
//!
//! The unix socket admits only the user's own processes (its peer check), so a catalogue
//! or a state directory a request names there is the user's choice, as a flag on their
//! own command line is. The TCP listener admits whoever holds its token, and a catalogue
//! decides which commands run: a token must not be enough to run a command the user never
//! chose. So, over TCP:
//!
//! - the daemon builds every request's context itself, from the query's `root`, `task`,
//!   `catalogue` and `state_dir` on its own environment; a `context` in the body (which
//!   could name a `PATH`, a mode, a catalogue) is refused;
//! - `catalogue=FILE` is used only when the file is one the daemon already trusts: named
//!   by the user's own processes through the socket during this daemon's life (any verb
//!   with `--catalogue FILE`, `advisor-consult cockpit` among them), the daemon's own
//!   `ADVISORD_CATALOGUE`, or a repository catalogue the user trusted with
//!   `advisor-consult trust` as it is now;
//! - `state_dir=DIR` is used only when it is the root's own (`.ai/local/state/reasoning`)
//!   or named by the user's own processes through the socket during this daemon's life.
//!
//! Anything else is `403 forbidden`, naming the path and what to run.

use crate::protocol::codes;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::error::ApiError;
use axum::http::StatusCode;

/// How many catalogues, and how many state directories, the daemon remembers as named
/// through its socket (the oldest is forgotten first).
pub const REMEMBERED: usize = 64;

/// The catalogues and state directories the user's own processes named through the socket.
#[derive(Debug, Default)]
pub struct Vouched {
    named: Mutex<Named>,
}

#[derive(Debug, Default)]
struct Named {
    catalogues: VecDeque<PathBuf>,
    state_dirs: VecDeque<PathBuf>,
}

/// `path` with every link and `..` resolved when it exists; else as given.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn remember(list: &mut VecDeque<PathBuf>, path: PathBuf) {
    if let Some(at) = list.iter().position(|p| *p == path) {
        list.remove(at);
    } else if list.len() >= REMEMBERED {
        list.pop_front();
    }
    list.push_back(path);
}

impl Vouched {
    /// Note what a request through the socket named (the user's own choice).
    pub fn note(&self, catalogue: Option<&Path>, state_dir: Option<&Path>) {
        if catalogue.is_none() && state_dir.is_none() {
            return;
        }
        let catalogue = catalogue.map(canonical);
        let state_dir = state_dir.map(canonical);
        let mut named = self
            .named
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(path) = catalogue {
            remember(&mut named.catalogues, path);
        }
        if let Some(path) = state_dir {
            remember(&mut named.state_dirs, path);
        }
    }

    fn named_catalogue(&self, path: &Path) -> bool {
        let path = canonical(path);
        let named = self
            .named
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        named.catalogues.contains(&path)
    }

    fn named_state_dir(&self, path: &Path) -> bool {
        let path = canonical(path);
        let named = self
            .named
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        named.state_dirs.contains(&path)
    }

    /// Whether a request over TCP may use the catalogue `file`, or 403 saying what to do.
    pub fn permit_catalogue(&self, file: &Path) -> Result<(), ApiError> {
        if self.named_catalogue(file) || daemons_own(file) || trusted(file) {
            return Ok(());
        }
        Err(forbidden(format!(
            "`catalogue={}` names a catalogue this daemon was not given by you, and a \
             catalogue decides which commands run: over the TCP listener a catalogue is used \
             only when your own processes named it through the socket (run \
             `advisor-consult --catalogue {} cockpit` in your shell: it prints this page's \
             URL), it is the daemon's own `ADVISORD_CATALOGUE`, or it is a repository's \
             catalogue you trusted with `advisor-consult trust`",
            file.display(),
            file.display()
        )))
    }

    /// Whether a request over TCP may use the state directory `dir` for `root`, or 403.
    pub fn permit_state_dir(&self, root: &Path, dir: &Path) -> Result<(), ApiError> {
        let own = crate::paths::state_dir(root, None);
        if canonical(dir) == canonical(&own) || self.named_state_dir(dir) {
            return Ok(());
        }
        Err(forbidden(format!(
            "`state_dir={}` names a state directory this daemon was not given by you: over \
             the TCP listener a state directory is the root's own (`{}`) or one your own \
             processes named through the socket (run `advisor-consult --state-dir {} \
             cockpit` in your shell: it prints this page's URL)",
            dir.display(),
            own.display(),
            dir.display()
        )))
    }
}

/// A `context` in the body of a request over TCP.
pub fn body_context_refused() -> ApiError {
    forbidden(
        "over the TCP listener the daemon builds the request's context itself, on its own \
         environment: leave `context` out of the body and name the root with the query \
         (`?root=/absolute/dir`, and optionally `&task=NAME`, `&catalogue=FILE`, \
         `&state_dir=DIR`)",
    )
}

fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, codes::FORBIDDEN, message)
}

/// Whether `file` is the catalogue the daemon's own environment names.
fn daemons_own(file: &Path) -> bool {
    std::env::var_os(crate::context::ENV_CATALOGUE)
        .filter(|v| !v.is_empty())
        .is_some_and(|own| canonical(Path::new(&own)) == canonical(file))
}

/// Whether `file` is a catalogue the user trusted (`advisor-consult trust`) as it is now.
fn trusted(file: &Path) -> bool {
    std::fs::read(file).is_ok_and(|bytes| {
        crate::trust::is_trusted(crate::trust::own_config_dir().as_deref(), file, &bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_socket_named_is_permitted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let named = dir.path().join("named.yaml");
        let other = dir.path().join("other.yaml");
        std::fs::write(&named, "advisors: []\n").unwrap();
        std::fs::write(&other, "advisors: []\n").unwrap();
        let vouched = Vouched::default();
        assert!(vouched.permit_catalogue(&named).is_err());
        vouched.note(Some(&named), Some(&dir.path().join("state")));
        vouched.permit_catalogue(&named).unwrap();
        // The same file by another way of writing it is the same file.
        vouched
            .permit_catalogue(&dir.path().join("root/../named.yaml"))
            .unwrap();
        let refused = vouched.permit_catalogue(&other).unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert!(
            refused.body.message.contains("advisor-consult --catalogue"),
            "{}",
            refused.body.message
        );
        vouched
            .permit_state_dir(&root, &dir.path().join("state"))
            .unwrap();
        vouched
            .permit_state_dir(&root, &root.join(crate::paths::DEFAULT_STATE_DIR))
            .unwrap();
        assert!(vouched
            .permit_state_dir(&root, &dir.path().join("elsewhere"))
            .is_err());
    }

    #[test]
    fn the_oldest_is_forgotten_past_the_bound() {
        let vouched = Vouched::default();
        for i in 0..=REMEMBERED {
            vouched.note(Some(Path::new(&format!("/nowhere/{i}.yaml"))), None);
        }
        assert!(!vouched.named_catalogue(Path::new("/nowhere/0.yaml")));
        assert!(vouched.named_catalogue(Path::new("/nowhere/1.yaml")));
    }
}
