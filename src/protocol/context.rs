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

/// The asking process's context, sent with every request.
///
/// Paths are absolute (made so against the client's working directory) because the
/// daemon runs elsewhere. Credential values are held for the request only and never
/// appear in `Debug` output.
///
/// **Credential values travel only with a consultation, and the types hold that rule.**
/// A `RequestContext` never carries its values on the wire: encoded, `credentials` is
/// empty and the variables that are set are named in `present`; decoded, any value sent
/// is dropped the same way. Only the `context` of [`super::ConsultRequest`], encoded and
/// decoded through [`with_values`], carries them. So a verb that does not consult cannot
/// send a value, whoever builds its request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(into = "Wire", from = "Wire")]
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
    /// carried only by a consultation's request; empty in every other.
    #[serde(default)]
    pub credentials: BTreeMap<String, String>,
    /// The credential variables that are set and non-empty, without their values: all
    /// that every verb but a consultation needs (availability).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub present: BTreeSet<String>,
    /// Who asks, when the asking process named itself: the agent host an MCP server was
    /// started by (`clientInfo` of its `initialize`), and the vendor behind it. Plans rank
    /// that vendor's advisors last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asker: Option<crate::core::policy::Asker>,
    /// Mesh peers offering reviews, added after the catalogue's own advisors when the
    /// context is resolved. Filled by a daemon on a mesh from what it discovered; never
    /// sent by a client nor journaled.
    #[serde(skip)]
    pub mesh_peers: Vec<crate::core::catalogue::AdvisorEntry>,
}

impl RequestContext {
    /// The context as a consultation's request carries it: with its credential values.
    pub fn with_values(&self) -> WithValues<'_> {
        WithValues(self)
    }

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
            .field("asker", &self.asker)
            .field("mesh_peers", &self.mesh_peers.len())
            .finish()
    }
}

/// The wire form of a [`RequestContext`]: the same fields, `credentials` included so a
/// consultation can fill it (see [`with_values`]).
#[derive(Clone, Serialize, Deserialize)]
struct Wire {
    root: PathBuf,
    #[serde(default)]
    state_dir: Option<PathBuf>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    catalogue_path: Option<PathBuf>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    ci: Option<String>,
    #[serde(default)]
    disable: Option<String>,
    #[serde(default)]
    cooldown_s: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    budgets: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    utc_offset_s: Option<i32>,
    #[serde(default)]
    credentials: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    present: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    asker: Option<crate::core::policy::Asker>,
}

impl Wire {
    /// The context with its values (a consultation's).
    fn of(ctx: &RequestContext) -> Wire {
        Wire {
            root: ctx.root.clone(),
            state_dir: ctx.state_dir.clone(),
            task: ctx.task.clone(),
            catalogue_path: ctx.catalogue_path.clone(),
            mode: ctx.mode.clone(),
            ci: ctx.ci.clone(),
            disable: ctx.disable.clone(),
            cooldown_s: ctx.cooldown_s.clone(),
            path: ctx.path.clone(),
            budgets: ctx.budgets.clone(),
            utc_offset_s: ctx.utc_offset_s,
            credentials: ctx.credentials.clone(),
            present: ctx.present.clone(),
            asker: ctx.asker.clone(),
        }
    }

    /// Back into a context, the values kept (a consultation's).
    fn into_context(self) -> RequestContext {
        RequestContext {
            root: self.root,
            state_dir: self.state_dir,
            task: self.task,
            catalogue_path: self.catalogue_path,
            mode: self.mode,
            ci: self.ci,
            disable: self.disable,
            cooldown_s: self.cooldown_s,
            path: self.path,
            budgets: self.budgets,
            utc_offset_s: self.utc_offset_s,
            credentials: self.credentials,
            present: self.present,
            asker: self.asker,
            mesh_peers: Vec::new(),
        }
    }
}

impl From<RequestContext> for Wire {
    // Every request but a consultation: the values become names.
    fn from(ctx: RequestContext) -> Wire {
        Wire::of(&ctx.presence_only())
    }
}

impl From<Wire> for RequestContext {
    // Every request but a consultation: a value sent anyway is dropped, its name kept.
    fn from(wire: Wire) -> RequestContext {
        wire.into_context().presence_only()
    }
}

/// A context encoded with its credential values: only a consultation's request is.
pub struct WithValues<'c>(&'c RequestContext);

impl Serialize for WithValues<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire::of(self.0).serialize(serializer)
    }
}

/// The `context` field of a consultation's request: `serialize_with` and `deserialize_with`
/// encodes and decodes it with its credential values, the one place they travel.
pub mod with_values {
    use super::{RequestContext, Wire};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Encode `ctx` with its values.
    pub fn serialize<S: Serializer>(
        ctx: &RequestContext,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Wire::of(ctx).serialize(serializer)
    }

    /// Decode a context, its values kept.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<RequestContext, D::Error> {
        Wire::deserialize(deserializer).map(Wire::into_context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> RequestContext {
        let mut ctx: RequestContext =
            serde_json::from_value(serde_json::json!({"root": "/r"})).unwrap();
        ctx.credentials.insert("KEY".into(), "s3cret-value".into());
        ctx.credentials.insert("EMPTY".into(), String::new());
        ctx
    }

    #[test]
    fn a_context_never_carries_values_unless_a_consultation_sends_it() {
        let ctx = context();
        let plain = serde_json::to_value(&ctx).unwrap();
        assert!(!plain.to_string().contains("s3cret-value"), "{plain}");
        assert_eq!(plain["credentials"], serde_json::json!({}));
        assert_eq!(plain["present"], serde_json::json!(["KEY"]));
        let sent = serde_json::to_value(ctx.with_values()).unwrap();
        assert_eq!(sent["credentials"]["KEY"], "s3cret-value");
        // Decoded as a plain context, a value sent anyway is dropped and its name kept.
        let decoded: RequestContext = serde_json::from_value(sent.clone()).unwrap();
        assert!(decoded.credentials.is_empty());
        assert!(decoded.has_credential("KEY") && !decoded.has_credential("EMPTY"));
        let kept = with_values::deserialize(sent).unwrap();
        assert_eq!(kept.credentials["KEY"], "s3cret-value");
    }
}
