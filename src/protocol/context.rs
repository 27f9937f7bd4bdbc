//! The asking process's context, which every request that concerns a root carries.
//!
//! The daemon is shared by every session of the user, so availability and process
//! advisors must see the environment of the process asking, not the daemon's. How a
//! context is built from flags and an environment is `crate::context`'s business; this is
//! only its shape on the wire.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The asking process's context, sent with every request .
///
/// Paths are absolute (made so against the client's working directory) because the
/// daemon runs elsewhere. Credential values are held for the request only and never
/// appear in `Debug` output.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RequestContext {
    /// The project root: absolute, an existing directory.
    pub root: PathBuf,
    /// `--state-dir`, absolute.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// `--task`, else `ADVISORD_TASK` (validated when resolved).
    #[serde(default)]
    pub task: Option<String>,
    /// `--catalogue`, else `ADVISORD_CATALOGUE`, absolute.
    #[serde(default)]
    pub catalogue_path: Option<PathBuf>,
    /// `ADVISORD_MODE`.
    #[serde(default)]
    pub mode: Option<String>,
    /// `CI`.
    #[serde(default)]
    pub ci: Option<String>,
    /// `ADVISORD_ADVISORS_DISABLE`.
    #[serde(default)]
    pub disable: Option<String>,
    /// `ADVISORD_COOLDOWN_SECONDS`.
    #[serde(default)]
    pub cooldown_s: Option<String>,
    /// `PATH`, on which executables are looked up.
    #[serde(default)]
    pub path: Option<String>,
    /// The `ADVISORD_BUDGET_*` variables that are set, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub budgets: BTreeMap<String, String>,
    /// The asker's offset from UTC in seconds now, where their day begins (`None`: UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset_s: Option<i32>,
    /// The values of the credential variables the catalogue names, by variable name:
    /// carried only by a request that consults (see [`RequestContext::presence_only`]).
    #[serde(default)]
    pub credentials: BTreeMap<String, String>,
    /// The credential variables that are set and non-empty, without their values: all
    /// that every verb but a consultation needs (availability).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub present: BTreeSet<String>,
    /// Mesh peers offering reviews, added after the catalogue's own advisors when the
    /// context is resolved. Filled by a daemon on a mesh from what it discovered; never
    /// sent by a client nor journaled.
    #[serde(skip)]
    pub mesh_peers: Vec<crate::core::catalogue::AdvisorEntry>,
}

impl RequestContext {
    /// The same context with its credential values replaced by their names: what every
    /// request that does not consult sends.
    pub fn presence_only(mut self) -> RequestContext {
        let credentials = std::mem::take(&mut self.credentials);
        self.present.extend(
            credentials
                .into_iter()
                .filter(|(_, value)| !value.is_empty())
                .map(|(name, _)| name),
        );
        self
    }

    /// Whether credential variable `name` is set and non-empty for the asker.
    pub fn has_credential(&self, name: &str) -> bool {
        self.present.contains(name) || self.credentials.get(name).is_some_and(|v| !v.is_empty())
    }
}

impl std::fmt::Debug for RequestContext {
    // Written by hand so that a credential value can never reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let credentials: Vec<&str> = self.credentials.keys().map(String::as_str).collect();
        f.debug_struct("RequestContext")
            .field("root", &self.root)
            .field("state_dir", &self.state_dir)
            .field("task", &self.task)
            .field("catalogue_path", &self.catalogue_path)
            .field("mode", &self.mode)
            .field("ci", &self.ci)
            .field("disable", &self.disable)
            .field("cooldown_s", &self.cooldown_s)
            .field("path", &self.path)
            .field("budgets", &self.budgets)
            .field("utc_offset_s", &self.utc_offset_s)
            .field("credentials (names only)", &credentials)
            .field("present", &self.present)
            .field("mesh_peers", &self.mesh_peers.len())
            .finish()
    }
}
