//! Where a request runs: the global flags, the asking process's context, and its
//! resolution into a root, a state directory, a task, a catalogue, a mode and what is
//! present on the machine.
//!
//! [`RequestContext`] is what a client sends with every request, because the daemon is
//! shared and must judge availability on the environment of the process asking, not its
//! own. [`Resolved`] is that context checked and resolved, on whichever side runs the
//! verb; both the in-process path and the daemon resolve through the same function.

mod budgets;
mod catalogue;
mod credentials;
mod directories;
mod environment;
mod git;
mod presence;
#[cfg(test)]
mod tests;

pub use budgets::env_budgets;
pub use catalogue::{
    advisor_spec, effective_catalogue, untrusted_catalogue, user_catalogue_path, validate_settings,
};
pub use credentials::{credentials_for, fill_credentials_from_daemon};
pub use directories::require_root;
pub use environment::{daemon_context, daemon_context_for, local_utc_offset_s, parse_cooldown};
pub use git::git_branch;
pub use presence::probe_presence;

use budgets::project_budgets_of;
use catalogue::{load_catalogue, Judge};
use directories::{check_root, check_state_dir, refuse_symlinks};
use environment::non_empty;
use git::resolve_task;

use crate::core::availability::{DisableList, EndpointProbe, Presence};
use crate::core::catalogue::{
    project_budgets, AdvisorEntry, Budgets, Catalogue, CatalogueError, Layer, LayerUsed,
    EMBEDDED_SOURCE,
};
use crate::core::policy;
use crate::core::records::{Mode, TaskName};
use crate::error::Error;
use crate::paths;
use crate::protocol::RequestContext;
use advisord_adapters::contract::AdvisorSpec;
use advisord_adapters::registry::Registry;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The variable naming the task when `--task` is not given.
pub const ENV_TASK: &str = "ADVISORD_TASK";
/// The variable naming the catalogue file when `--catalogue` is not given.
pub const ENV_CATALOGUE: &str = "ADVISORD_CATALOGUE";
/// The variable forcing the mode.
pub const ENV_MODE: &str = "ADVISORD_MODE";
/// The variable that, set and non-empty, means a CI runner.
pub const ENV_CI: &str = "CI";
/// The variable listing advisors to disable (comma list, or `all`).
pub const ENV_DISABLE: &str = "ADVISORD_ADVISORS_DISABLE";
/// The variable replacing every cooldown, in seconds.
pub const ENV_COOLDOWN: &str = "ADVISORD_COOLDOWN_SECONDS";
/// The total spend allowed per day (the user's calendar day), in the catalogue's currency.
pub const ENV_BUDGET_DAY: &str = "ADVISORD_BUDGET_DAY";
/// The total spend allowed per task.
pub const ENV_BUDGET_TASK: &str = "ADVISORD_BUDGET_TASK";
/// Each advisor's spend allowed per day: `id=AMOUNT,id=AMOUNT`.
pub const ENV_BUDGET_ADVISORS_DAY: &str = "ADVISORD_BUDGET_ADVISORS_DAY";
/// Each advisor's spend allowed per task: `id=AMOUNT,id=AMOUNT`.
pub const ENV_BUDGET_ADVISORS_TASK: &str = "ADVISORD_BUDGET_ADVISORS_TASK";
/// Every budget variable, carried by a request as the asker set it.
pub const ENV_BUDGETS: [&str; 4] = [
    ENV_BUDGET_DAY,
    ENV_BUDGET_TASK,
    ENV_BUDGET_ADVISORS_DAY,
    ENV_BUDGET_ADVISORS_TASK,
];

/// Where the asker says things are (the command line's `--root`, `--state-dir`, `--task`
/// and `--catalogue`); what is not given is found the usual way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    /// The project root.
    pub root: Option<PathBuf>,
    /// Where records are kept.
    pub state_dir: Option<PathBuf>,
    /// The task.
    pub task: Option<String>,
    /// The advisor catalogue.
    pub catalogue: Option<PathBuf>,
}
/// The project's own catalogue under the root.
pub const PROJECT_CATALOGUE: &str = ".advisord/advisors.yaml";

/// The user's own catalogue, in the config directory (see [`user_catalogue_path`]).
pub const USER_CATALOGUE: &str = "advisors.yaml";
/// The task used when nothing else names one.
pub const DEFAULT_TASK: &str = "default";

/// A request context checked and resolved: everything a verb needs.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The project root: absolute, an existing directory.
    pub root: PathBuf,
    /// Where records are kept.
    pub state_dir: PathBuf,
    /// The task.
    pub task: TaskName,
    /// The catalogue in force.
    pub catalogue: Catalogue,
    /// Where the catalogue came from (a path, or the embedded one), for messages.
    pub catalogue_source: String,
    /// The catalogue files read, bottom first (the embedded one first), and how each
    /// entered: replacing what is below it, or extending it.
    pub catalogue_layers: Vec<LayerUsed>,
    /// The mode in force.
    pub mode: Mode,
    /// `ADVISORD_ADVISORS_DISABLE`.
    pub disable: DisableList,
    /// `ADVISORD_COOLDOWN_SECONDS`.
    pub cooldown_override_s: Option<u64>,
    /// Which catalogue executables and credentials the asking process has.
    pub presence: Presence,
    /// The spending limits in force: the catalogue's, then the project config's
    /// (`.advisord/project.yaml`), then the environment's, each replacing the one before.
    pub budgets: Budgets,
    /// The asker's offset from UTC, where their day begins.
    pub utc_offset: time::UtcOffset,
    /// Who asks, when the asker named itself (an agent host through MCP).
    pub asker: Option<crate::core::policy::Asker>,
}

impl Resolved {
    /// Resolve `ctx`: root, state directory, task, catalogue, mode,
    /// disable list, cooldown and presence, in that order; the first problem is the error.
    pub fn resolve(ctx: &RequestContext, registry: &Registry) -> Result<Resolved, Error> {
        let root = check_root(&ctx.root)?;
        let state_dir = paths::state_dir(&root, ctx.state_dir.as_deref());
        if !state_dir.is_absolute() {
            return Err(Error::Usage(format!(
                "state directory `{}` is not absolute; pass an absolute `--state-dir`",
                state_dir.display()
            )));
        }
        check_state_dir(&state_dir)?;
        let task = resolve_task(ctx.task.as_deref(), &root)?;
        refuse_symlinks(&root, &state_dir.join(task.as_str()))?;
        let (mut catalogue, catalogue_source, catalogue_layers) =
            load_catalogue(ctx, Judge::Registry(registry))?;
        for peer in &ctx.mesh_peers {
            if catalogue.get(&peer.id).is_none() {
                catalogue.advisors.push(peer.clone());
            }
        }
        let mode = policy::resolve_mode(
            non_empty(ctx.mode.clone()).as_deref(),
            ctx.ci.as_deref(),
            catalogue.mode,
        )
        .map_err(|message| Error::Usage(format!("`{ENV_MODE}`: {message}")))?;
        let disable = DisableList::parse(ctx.disable.as_deref().unwrap_or(""));
        let cooldown_override_s = parse_cooldown(ctx.cooldown_s.as_deref())?;
        let presence = probe_presence(&catalogue, ctx, &root);
        // The repository's project file is untrusted input (an agent consults in whatever
        // repository it was pointed at): its limits only ever tighten the catalogue's. The
        // environment is the user's own and replaces them.
        let budgets = catalogue
            .budgets()
            .tightened_by(&project_budgets_of(&root)?)
            .overridden_by(&env_budgets(&ctx.budgets)?);
        let utc_offset = time::UtcOffset::from_whole_seconds(ctx.utc_offset_s.unwrap_or(0))
            .map_err(|_| {
                Error::Usage(format!(
                    "the UTC offset `{}` s is out of range; it lies within ±24 hours",
                    ctx.utc_offset_s.unwrap_or(0)
                ))
            })?;
        Ok(Resolved {
            root,
            state_dir,
            task,
            catalogue,
            catalogue_source,
            catalogue_layers,
            mode,
            disable,
            cooldown_override_s,
            presence,
            budgets,
            utc_offset,
            asker: ctx.asker.clone(),
        })
    }
}
