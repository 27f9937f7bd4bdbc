//! Where a request runs: the global flags, the asking process's context, and its
//! resolution into a root, a state directory, a task, a catalogue, a mode and what is
//! present on the machine.
//!
//! [`RequestContext`] is what a client sends with every request, because the daemon is
//! shared and must judge availability on the environment of the process asking, not its
//! own. [`Resolved`] is that context checked and resolved, on whichever side runs the
//! verb; both the in-process path and the daemon resolve through the same function.

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

/// The local offset from UTC now, in seconds: from `TZ` when set (a zone name such as
/// `Europe/Paris`, a file, or a POSIX rule), else `/etc/localtime`; UTC when neither can
/// be read. Read with `tz-rs`, which does not depend on the process being single-threaded.
pub fn local_utc_offset_s(tz: Option<&str>) -> i32 {
    let zone = match tz.filter(|t| !t.is_empty()) {
        Some(tz) => tz::TimeZone::from_posix_tz(tz),
        None => tz::TimeZone::local(),
    };
    zone.ok()
        .and_then(|zone| {
            zone.find_current_local_time_type()
                .ok()
                .map(|t| t.ut_offset())
        })
        .unwrap_or(0)
}

/// The budgets the environment sets (`ADVISORD_BUDGET_*`), or a usage error naming the
/// variable and what it accepts.
pub fn env_budgets(vars: &BTreeMap<String, String>) -> Result<Budgets, Error> {
    let amount = |name: &str, text: &str| -> Result<f64, Error> {
        match text.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(Error::Usage(format!(
                "`{name}` is `{}`; give a plain amount of 0 or more in the catalogue's \
                 currency, such as `5` or `2.50` (no unit or currency sign)",
                text.escape_default()
            ))),
        }
    };
    let mut budgets = Budgets::default();
    for (name, text) in vars {
        match name.as_str() {
            ENV_BUDGET_DAY => budgets.total.per_day = Some(amount(name, text)?),
            ENV_BUDGET_TASK => budgets.total.per_task = Some(amount(name, text)?),
            ENV_BUDGET_ADVISORS_DAY | ENV_BUDGET_ADVISORS_TASK => {
                for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                    let Some((id, value)) = item.split_once('=') else {
                        return Err(Error::Usage(format!(
                            "`{name}`: `{}` is not `ADVISOR=AMOUNT`; write e.g. \
                             `my-advisor=2.50,other=1`",
                            item.escape_default()
                        )));
                    };
                    let limits = budgets.advisors.entry(id.trim().to_string()).or_default();
                    let value = Some(amount(name, value)?);
                    if name == ENV_BUDGET_ADVISORS_DAY {
                        limits.per_day = value;
                    } else {
                        limits.per_task = value;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(budgets)
}

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

impl RequestContext {
    /// The context of this process: its flags, its working directory and its environment.
    pub fn from_process(flags: &Locations) -> Result<RequestContext, Error> {
        let cwd = std::env::current_dir().map_err(|e| {
            Error::Usage(format!(
                "cannot read the working directory: {e}; run from an existing directory \
                 or pass `--root DIR`"
            ))
        })?;
        let env = |name: &str| std::env::var(name).ok();
        let mut ctx = RequestContext::from_parts(flags, &cwd, &env);
        ctx.credentials = credentials_for(&ctx, &env);
        Ok(ctx)
    }

    /// The context of a request that names only its root and perhaps its task, judged on
    /// the environment `env` (the daemon's own, for a bare `GET` or a resumed job): as if
    /// run in `root` with no flag but those, credentials included.
    pub fn for_root(
        root: PathBuf,
        task: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> RequestContext {
        let flags = Locations {
            root: Some(root.clone()),
            task,
            ..Locations::default()
        };
        let mut ctx = RequestContext::from_parts(&flags, &root, env);
        ctx.credentials = credentials_for(&ctx, env);
        ctx
    }

    /// The context for `flags`, working directory `cwd` and environment `env`, without
    /// credentials (see [`RequestContext::from_process`]).
    pub fn from_parts(
        flags: &Locations,
        cwd: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> RequestContext {
        let absolute = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                cwd.join(p)
            }
        };
        let root = match &flags.root {
            Some(root) => absolute(root),
            None => git_ancestor(cwd).unwrap_or_else(|| cwd.to_path_buf()),
        };
        RequestContext {
            root,
            state_dir: flags.state_dir.as_deref().map(absolute),
            task: flags.task.clone().or_else(|| non_empty(env(ENV_TASK))),
            catalogue_path: flags
                .catalogue
                .clone()
                .or_else(|| non_empty(env(ENV_CATALOGUE)).map(PathBuf::from))
                .map(|p| absolute(&p)),
            mode: env(ENV_MODE),
            ci: env(ENV_CI),
            disable: env(ENV_DISABLE),
            cooldown_s: env(ENV_COOLDOWN),
            path: env("PATH"),
            budgets: ENV_BUDGETS
                .iter()
                .filter_map(|name| non_empty(env(name)).map(|v| (name.to_string(), v)))
                .collect(),
            utc_offset_s: Some(local_utc_offset_s(env("TZ").as_deref())),
            credentials: BTreeMap::new(),
            present: Default::default(),
            asker: None,
            mesh_peers: Vec::new(),
        }
    }
}

/// Give `ctx` the daemon's own values of the credential variables its catalogue names (a
/// job resumed after a restart: credentials are never journaled).
pub fn fill_credentials_from_daemon(ctx: &mut RequestContext) {
    ctx.credentials = credentials_for(ctx, &|name| std::env::var(name).ok());
}

/// A context for `root` and `task` built from the daemon's own environment, credentials
/// included (for requests that carry none, and for jobs resumed after a restart).
pub fn daemon_context(root: &Path, task: Option<String>) -> RequestContext {
    RequestContext::for_root(root.to_path_buf(), task, &|name| std::env::var(name).ok())
}

/// A context for `flags` (root, task, and the catalogue and state directory when named)
/// built from the daemon's own environment, credentials included: what a request that
/// carries no context of its own (the cockpit, `curl`) is judged with.
pub fn daemon_context_for(flags: &Locations) -> RequestContext {
    let env = |name: &str| std::env::var(name).ok();
    let root = flags.root.clone().unwrap_or_default();
    let mut ctx = RequestContext::from_parts(flags, &root, &env);
    ctx.credentials = credentials_for(&ctx, &env);
    ctx
}

/// [`Error::InvalidRoot`] unless the context's root is an absolute, existing directory: the
/// daemon's first check of every request that names a root.
pub fn require_root(ctx: &RequestContext) -> Result<(), Error> {
    let root = &ctx.root;
    let problem = if !root.is_absolute() {
        "is not absolute"
    } else if !root.exists() {
        "does not exist"
    } else if !root.is_dir() {
        "is not a directory"
    } else {
        return Ok(());
    };
    Err(Error::InvalidRoot(format!(
        "root `{}` {problem}; every request names the project root by its absolute path",
        root.display()
    )))
}

/// The values of the credential variables named by the catalogue `ctx` resolves to.
///
/// A catalogue that does not load yields none: resolving the context reports the error.
pub fn credentials_for(
    ctx: &RequestContext,
    env: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    // Only the variables' names are read here; resolving the context judges the settings.
    let Ok((catalogue, _, _)) = load_catalogue(ctx, Judge::NamesOnly) else {
        return BTreeMap::new();
    };
    // Each advisor's credential, and the variables its settings ask to pass through
    // (`pass_env`): a shared daemon runs process advisors with the asker's values.
    let passed = |a: &AdvisorEntry| -> Vec<String> {
        a.settings
            .get("pass_env")
            .and_then(|v| v.as_array())
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    catalogue
        .advisors
        .iter()
        .flat_map(|a| a.credential.iter().cloned().chain(passed(a)))
        .filter_map(|name| env(&name).map(|value| (name, value)))
        .collect()
}

/// The nearest ancestor of `dir` (itself included) holding `.git` (a directory, or a file
/// in a worktree).
fn git_ancestor(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

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

/// The `budget:` of the project's `.advisord/project.yaml`, if the file exists.
fn project_budgets_of(root: &Path) -> Result<Budgets, Error> {
    let path = root.join(crate::check::PROJECT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Budgets::default()),
        Err(e) => {
            return Err(Error::Usage(format!(
                "cannot read `{}`: {e}; fix its permissions or remove it",
                path.display()
            )))
        }
    };
    project_budgets(&text, &path.display().to_string()).map_err(Error::Catalogue)
}

/// A state directory is a directory, or one still to be created under a directory: one
/// that names a file (or lies under one) is the caller's mistake, not the store's.
fn check_state_dir(state_dir: &Path) -> Result<(), Error> {
    let existing = state_dir
        .ancestors()
        .find_map(|p| p.metadata().ok().map(|m| (p, m)));
    match existing {
        Some((path, stat)) if !stat.is_dir() => Err(Error::Usage(format!(
            "state directory `{}` cannot be used: `{}` is not a directory; pass \
             `--state-dir` (or the context's `state_dir`) naming a directory, existing or to \
             be created",
            state_dir.display(),
            path.display()
        ))),
        _ => Ok(()),
    }
}

fn check_root(root: &Path) -> Result<PathBuf, Error> {
    if !root.is_absolute() {
        return Err(Error::Usage(format!(
            "root `{}` is not absolute; name the project root by its absolute path",
            root.display()
        )));
    }
    if !root.is_dir() {
        return Err(Error::Usage(format!(
            "root `{}` is not an existing directory; pass `--root DIR` naming the project",
            root.display()
        )));
    }
    Ok(root.to_path_buf())
}

/// Refuse a symbolic link on the way from the root (or, for a state directory outside
/// the root, from the state directory) down to the task's directory: a cloned repository
/// could otherwise have records and locks written anywhere the user can write. The parts
/// that do not exist yet are created as real directories by the store.
fn refuse_symlinks(root: &Path, task_dir: &Path) -> Result<(), Error> {
    let base = if task_dir.starts_with(root) {
        root
    } else {
        task_dir.parent().and_then(Path::parent).unwrap_or(task_dir)
    };
    let Ok(below) = task_dir.strip_prefix(base) else {
        return Ok(());
    };
    let mut path = base.to_path_buf();
    for part in below.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(info) if info.file_type().is_symlink() => {
                return Err(Error::Usage(format!(
                    "`{}` is a symbolic link; the state directory and a task's directory must \
                     be real directories below the root (a link could put records anywhere); \
                     remove the link, or pass `--state-dir` naming a real directory",
                    path.display()
                )))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// The task: the given name, else the git branch of `root` (sanitised), else `default`.
fn resolve_task(given: Option<&str>, root: &Path) -> Result<TaskName, Error> {
    if let Some(name) = given {
        return TaskName::new(name).map_err(Error::InvalidTask);
    }
    let from_branch = git_branch(root).and_then(|b| TaskName::from_branch(&b));
    Ok(from_branch
        .unwrap_or_else(|| TaskName::new(DEFAULT_TASK).expect("the default task name is valid")))
}

/// The branch checked out in `root`, read from `.git/HEAD` (following a worktree's
/// `gitdir:` file); `None` when detached or not a git checkout.
pub fn git_branch(root: &Path) -> Option<String> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        let target = Path::new(target);
        if target.is_absolute() {
            target.to_path_buf()
        } else {
            root.join(target)
        }
    } else {
        dot_git
    };
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let reference = head.lines().next()?.strip_prefix("ref:")?.trim();
    let branch = reference.strip_prefix("refs/heads/").unwrap_or(reference);
    (!branch.is_empty()).then(|| branch.to_string())
}

/// The catalogue of `ctx` and where it came from.
///
/// A repository's own catalogue is used only when the user trusts it (`crate::trust`);
/// until then the embedded one is used, and [`untrusted_catalogue`] says why.
fn load_catalogue(
    ctx: &RequestContext,
    judge: Judge,
) -> Result<(Catalogue, String, Vec<LayerUsed>), Error> {
    let files = catalogue_files(ctx)?;
    if files.is_empty() {
        let embedded = LayerUsed {
            source: EMBEDDED_SOURCE.to_string(),
            how: "replaces".to_string(),
        };
        return Ok((
            Catalogue::embedded(),
            EMBEDDED_SOURCE.to_string(),
            vec![embedded],
        ));
    }
    let layered = layer_files(files, judge)?;
    let source = layered
        .files
        .last()
        .map(|(name, _)| name.clone())
        .unwrap_or_default();
    Ok((
        layered.layered.catalogue.clone(),
        source,
        layered.layered.layers.clone(),
    ))
}

/// The effective catalogue of `ctx` with the merged YAML it was read from and its layers
/// (what `advisor-consult catalogue` prints).
pub fn effective_catalogue(
    ctx: &RequestContext,
    registry: &Registry,
) -> Result<crate::core::catalogue::Layered, Error> {
    let files = catalogue_files(ctx)?;
    Ok(layer_files(files, Judge::Registry(registry))?
        .layered
        .clone())
}

/// A catalogue read from its files: what it was read from and what it read as.
struct LayeredFiles {
    /// The files above the embedded catalogue, bottom first: name and text.
    files: Vec<(String, String)>,
    /// Who judged the entries' settings ([`Judge::generation`]).
    generation: u64,
    layered: crate::core::catalogue::Layered,
}

/// Who judges the settings of a catalogue's entries.
#[derive(Clone, Copy)]
enum Judge<'r> {
    /// The adapters of a registry, each its own entries'.
    Registry(&'r Registry),
    /// Nobody: only the entries' names and variables are wanted (a client naming the
    /// credentials to send; the daemon judges the catalogue when it resolves the request).
    NamesOnly,
}

impl Judge<'_> {
    /// A number naming how it judges: a registry's generation (never 0), or 0.
    fn generation(self) -> u64 {
        match self {
            Judge::Registry(registry) => registry.generation(),
            Judge::NamesOnly => 0,
        }
    }
}

/// How many catalogues read lately are kept, each with the files it was read from: one per
/// set of catalogue files in use (the daemon serves a few repositories and users).
const LAYERED_REMEMBERED: usize = 8;

/// The catalogues read lately, the most recent last. Every request reads its catalogue
/// files again, but parsing and merging the same texts again would only give the same
/// catalogue: a daemon parsed the YAML three times per consultation.
static LAYERED: std::sync::Mutex<Vec<Arc<LayeredFiles>>> = std::sync::Mutex::new(Vec::new());

/// The embedded catalogue, then `files`, read as layers: the same texts judged by the same
/// registry give the same catalogue, so one read lately is reused.
fn layer_files(files: Vec<(String, String)>, judge: Judge) -> Result<Arc<LayeredFiles>, Error> {
    let generation = judge.generation();
    let remembered = || {
        LAYERED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some(found) = remembered()
        .iter()
        .find(|l| l.generation == generation && l.files == files)
    {
        return Ok(found.clone());
    }
    let mut layers = vec![Layer {
        name: EMBEDDED_SOURCE,
        text: crate::core::catalogue::EMBEDDED,
    }];
    layers.extend(files.iter().map(|(name, text)| Layer { name, text }));
    let layered = match judge {
        Judge::Registry(registry) => {
            crate::core::catalogue::layered(&layers, &validate_settings(registry))?
        }
        Judge::NamesOnly => crate::core::catalogue::layered(&layers, &|_| Ok(()))?,
    };
    let read = Arc::new(LayeredFiles {
        files,
        generation,
        layered,
    });
    let mut kept = remembered();
    if kept.len() >= LAYERED_REMEMBERED {
        kept.remove(0);
    }
    kept.push(read.clone());
    Ok(read)
}

/// The user's own catalogue: `advisors.yaml` in the config directory
/// (`$XDG_CONFIG_HOME/advisord`, else `~/.config/advisord`).
pub fn user_catalogue_path() -> Option<PathBuf> {
    crate::trust::own_config_dir().map(|dir| dir.join(USER_CATALOGUE))
}

/// The catalogue files above the embedded one, bottom first, with their text: the
/// user's (when it exists), then the one named by `--catalogue` or `ADVISORD_CATALOGUE`, or
/// else the project's (when it exists and is trusted as it is now).
fn catalogue_files(ctx: &RequestContext) -> Result<Vec<(String, String)>, Error> {
    let mut files = Vec::new();
    if let Some(user) = user_catalogue_path().filter(|p| p.is_file()) {
        let bytes = read_catalogue_file(&user)?;
        files.push((user.display().to_string(), catalogue_text(&user, bytes)?));
    }
    let (file, named) = match &ctx.catalogue_path {
        Some(path) => (Some(path.clone()), true),
        None => (
            Some(ctx.root.join(PROJECT_CATALOGUE)).filter(|p| p.is_file()),
            false,
        ),
    };
    let Some(file) = file else {
        return Ok(files);
    };
    let bytes = read_catalogue_file(&file)?;
    if !named && !crate::trust::is_trusted(crate::trust::own_config_dir().as_deref(), &file, &bytes)
    {
        return Ok(files);
    }
    files.push((file.display().to_string(), catalogue_text(&file, bytes)?));
    Ok(files)
}

fn read_catalogue_file(file: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(file).map_err(|e| {
        CatalogueError {
            source_name: file.display().to_string(),
            location: String::new(),
            message: format!(
                "cannot be read ({e}); name a readable YAML file with `--catalogue FILE` or \
                 `{ENV_CATALOGUE}`, or unset both to use the embedded catalogue"
            ),
        }
        .into()
    })
}

fn catalogue_text(file: &Path, bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(|_| {
        CatalogueError {
            source_name: file.display().to_string(),
            location: String::new(),
            message: "is not UTF-8 text, so not a YAML catalogue; name the catalogue file \
                      with `--catalogue FILE`"
                .to_string(),
        }
        .into()
    })
}

/// Why the repository's own catalogue is not in force, when it exists and the user has
/// not trusted it (as it is now): what `advisors`, `plan` and a consultation tell the user.
pub fn untrusted_catalogue(ctx: &RequestContext) -> Option<String> {
    if ctx.catalogue_path.is_some() {
        return None;
    }
    let file = ctx.root.join(PROJECT_CATALOGUE);
    let bytes = std::fs::read(&file).ok()?;
    (!crate::trust::is_trusted(crate::trust::own_config_dir().as_deref(), &file, &bytes))
        .then(|| crate::trust::untrusted_message(&file))
}

/// Checks the adapter-specific settings of one catalogue entry through `registry`, the
/// adapters of whoever resolves (the built-in ones in-process, the daemon's own in the
/// daemon): an unknown `adapter` is refused naming the accepted ones, and each adapter
/// judges its own settings (`args`, `endpoint`, `model`, ...).
pub fn validate_settings<'r>(
    registry: &'r Registry,
) -> impl Fn(&AdvisorEntry) -> Result<(), (String, String)> + 'r {
    move |entry| registry.validate(&advisor_spec(entry))
}

/// The adapter's view of a catalogue entry: what it needs to reach the advisor.
pub fn advisor_spec(entry: &AdvisorEntry) -> AdvisorSpec {
    AdvisorSpec {
        id: entry.id.clone(),
        adapter: entry.adapter.clone(),
        executable: entry.executable.clone(),
        credential: entry.credential.clone(),
        settings: entry.settings.clone(),
    }
}

/// `ADVISORD_COOLDOWN_SECONDS`: a whole number of seconds; empty means unset.
pub fn parse_cooldown(value: Option<&str>) -> Result<Option<u64>, Error> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            Error::Usage(format!(
                "`{ENV_COOLDOWN}` is `{}`: it takes a whole number of seconds (e.g. `60`); \
                 fix or unset it",
                v.escape_debug()
            ))
        }),
    }
}

/// Which catalogue executables are on `ctx`'s `PATH` (or exist, when absolute and
/// executable), which credentials are set and non-empty, and whether each local HTTP
/// advisor's endpoint answers a short probe (at most 300 ms, remembered for 5 s; only
/// when its executable and credential, if it names them, are there).
pub fn probe_presence(catalogue: &Catalogue, ctx: &RequestContext, root: &Path) -> Presence {
    let mut presence = Presence::default();
    for advisor in &catalogue.advisors {
        if let Some(executable) = &advisor.executable {
            if executable_present(executable, ctx.path.as_deref(), root) {
                presence.executables.insert(executable.clone());
            }
        }
        if let Some(credential) = &advisor.credential {
            if ctx.has_credential(credential) {
                presence.credentials.insert(credential.clone());
            }
        }
    }
    for advisor in &catalogue.advisors {
        let endpoint = advisor.settings.get("endpoint").and_then(|v| v.as_str());
        let (true, crate::core::catalogue::Transport::Http, Some(endpoint)) =
            (advisor.local, advisor.transport, endpoint)
        else {
            continue;
        };
        let present = advisor
            .executable
            .as_ref()
            .is_none_or(|e| presence.executables.contains(e))
            && advisor
                .credential
                .as_ref()
                .is_none_or(|c| presence.credentials.contains(c));
        if !present {
            continue;
        }
        let probe = match advisord_adapters::http::probe::endpoint_answers(endpoint) {
            Ok(()) => EndpointProbe::Answers(endpoint.to_string()),
            Err(why) => EndpointProbe::Silent(endpoint.to_string(), why),
        };
        presence.endpoints.insert(advisor.id.clone(), probe);
    }
    presence
}

fn executable_present(name: &str, path: Option<&str>, root: &Path) -> bool {
    let as_path = Path::new(name);
    if as_path.is_absolute() {
        return is_executable_file(as_path);
    }
    match path {
        Some(path) if !path.is_empty() => which::which_in(name, Some(path), root).is_ok(),
        _ => false,
    }
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Test catalogues name a made-up adapter `x`, as a daemon's own registry would.
    fn test_registry() -> Registry {
        let mut registry = Registry::builtin();
        registry.insert(
            "x",
            std::sync::Arc::new(advisord_fakes::scripted::ScriptedAdapter::new(vec![])),
        );
        registry
    }

    #[test]
    fn the_core_and_the_adapters_agree_on_the_common_catalogue_keys() {
        assert_eq!(
            crate::core::catalogue::COMMON_KEYS,
            advisord_adapters::contract::COMMON_KEYS
        );
    }

    /// The locations the command line `args` names (`--root X --task Y ...`).
    fn flags(args: &[&str]) -> Locations {
        let mut flags = Locations::default();
        for pair in args.chunks(2) {
            let value = pair[1].to_string();
            match pair[0] {
                "--root" => flags.root = Some(value.into()),
                "--state-dir" => flags.state_dir = Some(value.into()),
                "--task" => flags.task = Some(value),
                "--catalogue" => flags.catalogue = Some(value.into()),
                other => panic!("not a location flag: {other}"),
            }
        }
        flags
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn context(root: &Path) -> RequestContext {
        let flags = flags(&["--root", root.to_str().expect("utf-8 path")]);
        RequestContext::from_parts(&flags, root, &env_of(&[]))
    }

    #[test]
    fn relative_flags_become_absolute_against_the_working_directory() {
        let cwd = Path::new("/work/here");
        let ctx = RequestContext::from_parts(
            &flags(&["--root", "r", "--state-dir", "s", "--catalogue", "c.yaml"]),
            cwd,
            &env_of(&[]),
        );
        assert_eq!(ctx.root, cwd.join("r"));
        assert_eq!(ctx.state_dir, Some(cwd.join("s")));
        assert_eq!(ctx.catalogue_path, Some(cwd.join("c.yaml")));
    }

    #[test]
    fn flags_win_over_the_environment_and_empty_variables_are_unset() {
        let env = env_of(&[
            (ENV_TASK, "from-env"),
            (ENV_CATALOGUE, "/env.yaml"),
            (ENV_MODE, "fast"),
            ("PATH", "/bin"),
        ]);
        let cwd = Path::new("/w");
        let ctx = RequestContext::from_parts(&flags(&[]), cwd, &env);
        assert_eq!(ctx.task.as_deref(), Some("from-env"));
        assert_eq!(ctx.catalogue_path, Some(PathBuf::from("/env.yaml")));
        assert_eq!(ctx.mode.as_deref(), Some("fast"));
        assert_eq!(ctx.path.as_deref(), Some("/bin"));
        let ctx = RequestContext::from_parts(
            &flags(&["--task", "flag", "--catalogue", "/flag.yaml"]),
            cwd,
            &env,
        );
        assert_eq!(ctx.task.as_deref(), Some("flag"));
        assert_eq!(ctx.catalogue_path, Some(PathBuf::from("/flag.yaml")));
        let empty = env_of(&[(ENV_TASK, ""), (ENV_CATALOGUE, "")]);
        let ctx = RequestContext::from_parts(&flags(&[]), cwd, &empty);
        assert_eq!((ctx.task, ctx.catalogue_path), (None, None));
    }

    #[test]
    fn the_root_is_the_nearest_ancestor_holding_git() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("project");
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).expect("mkdir");
        std::fs::create_dir(root.join(".git")).expect("mkdir .git");
        let ctx = RequestContext::from_parts(&flags(&[]), &deep, &env_of(&[]));
        assert_eq!(ctx.root, root);
        let elsewhere = dir.path().join("loose");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        let ctx = RequestContext::from_parts(&flags(&[]), &elsewhere, &env_of(&[]));
        assert_eq!(ctx.root, elsewhere);
    }

    #[test]
    fn a_context_for_a_root_reads_the_given_environment() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Named by the environment (a repository's own would need trusting first).
        let file = dir.path().join("c.yaml");
        std::fs::write(
            &file,
            "advisors:\n- {id: e, title: E, transport: http, adapter: x, credential: MY_KEY, \
             capabilities: [independent_reasoning], local: true}\n",
        )
        .expect("write");
        let file = file.display().to_string();
        let env = env_of(&[
            (ENV_CATALOGUE, file.as_str()),
            ("MY_KEY", "k"),
            ("UNRELATED", "u"),
            (ENV_MODE, "offline"),
            ("PATH", "/bin"),
        ]);
        let ctx = RequestContext::for_root(dir.path().to_path_buf(), Some("t".into()), &env);
        assert_eq!(ctx.root, dir.path());
        assert_eq!(ctx.task.as_deref(), Some("t"));
        assert_eq!(ctx.mode.as_deref(), Some("offline"));
        assert_eq!(ctx.path.as_deref(), Some("/bin"));
        assert_eq!(
            ctx.credentials.iter().collect::<Vec<_>>(),
            vec![(&"MY_KEY".to_string(), &"k".to_string())]
        );
        let resolved = Resolved::resolve(&ctx, &test_registry()).expect("resolves");
        assert_eq!(resolved.mode, Mode::Offline);
        assert!(resolved.presence.credentials.contains("MY_KEY"));
    }

    #[test]
    fn debug_output_never_shows_a_credential_value() {
        let mut ctx = context(Path::new("/"));
        ctx.credentials
            .insert("SOME_API_KEY".into(), "sk-very-secret-value".into());
        let shown = format!("{ctx:?} {ctx:#?}");
        assert!(shown.contains("SOME_API_KEY"), "{shown}");
        assert!(!shown.contains("sk-very-secret-value"), "{shown}");
    }

    fn check_branch(head: &str, expected: Option<&str>) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join(".git")).expect("mkdir .git");
        std::fs::write(dir.path().join(".git/HEAD"), head).expect("write HEAD");
        let task = resolve_task(None, dir.path()).expect("a task");
        assert_eq!(
            git_branch(dir.path()).and_then(|b| TaskName::from_branch(&b)),
            expected.map(|e| TaskName::new(e).expect("valid")),
            "{head:?}"
        );
        assert_eq!(task.as_str(), expected.unwrap_or(DEFAULT_TASK), "{head:?}");
    }

    #[test]
    fn the_task_comes_from_the_git_branch_when_nothing_names_it() {
        check_branch("ref: refs/heads/feature/x\n", Some("feature-x"));
        check_branch("ref: refs/heads/main\n", Some("main"));
        check_branch("ref: refs/heads/fix bug#1\n", Some("fix-bug-1"));
        // Detached: no branch, the default task.
        check_branch("8d1f0c2e6c1c1b0e6a3c2d7f1b2a3c4d5e6f7a8b\n", None);
        check_branch("ref: refs/heads/..\n", None);
        check_branch("", None);
    }

    #[test]
    fn a_worktree_follows_its_gitdir_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let git_dir = dir.path().join("main/.git/worktrees/wt");
        std::fs::create_dir_all(&git_dir).expect("mkdir");
        std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/topic/y\n").expect("HEAD");
        let worktree = dir.path().join("wt");
        std::fs::create_dir(&worktree).expect("mkdir");
        std::fs::write(
            worktree.join(".git"),
            format!("gitdir: {}\n", git_dir.display()),
        )
        .expect(".git file");
        assert_eq!(git_branch(&worktree).as_deref(), Some("topic/y"));
        std::fs::write(worktree.join(".git"), "gitdir: ../main/.git/worktrees/wt\n")
            .expect(".git file");
        assert_eq!(git_branch(&worktree).as_deref(), Some("topic/y"));
    }

    #[test]
    fn a_given_task_is_validated() {
        let root = Path::new("/");
        assert_eq!(
            resolve_task(Some("ok-1"), root).expect("valid").as_str(),
            "ok-1"
        );
        for bad in ["", "..", "a/b", "../../etc"] {
            assert!(
                matches!(resolve_task(Some(bad), root), Err(Error::InvalidTask(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_cooldown_override() {
        assert_eq!(parse_cooldown(None).expect("unset"), None);
        assert_eq!(parse_cooldown(Some("")).expect("empty"), None);
        assert_eq!(parse_cooldown(Some("60")).expect("60"), Some(60));
        assert_eq!(parse_cooldown(Some(" 0 ")).expect("0"), Some(0));
        for bad in ["-1", "1.5", "ten"] {
            let message = parse_cooldown(Some(bad)).expect_err(bad).to_string();
            assert!(message.contains(ENV_COOLDOWN), "{message}");
        }
    }

    #[test]
    fn presence_is_probed_on_the_asking_path_and_credentials() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        let make = |name: &str, mode: u32| {
            let path = bin.join(name);
            std::fs::write(&path, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        };
        make("on-path", 0o755);
        make("not-executable", 0o644);
        let absolute = make("absolute", 0o755);
        let yaml = format!(
            "advisors:\n\
             - {{id: a, title: A, transport: process, adapter: process, executable: on-path, capabilities: [independent_reasoning]}}\n\
             - {{id: b, title: B, transport: process, adapter: process, executable: not-executable, capabilities: [independent_reasoning]}}\n\
             - {{id: c, title: C, transport: process, adapter: process, executable: {}, capabilities: [independent_reasoning]}}\n\
             - {{id: d, title: D, transport: process, adapter: process, executable: missing, capabilities: [independent_reasoning]}}\n\
             - {{id: e, title: E, transport: http, adapter: x, credential: SET_KEY, capabilities: [independent_reasoning]}}\n\
             - {{id: f, title: F, transport: http, adapter: x, credential: EMPTY_KEY, capabilities: [independent_reasoning]}}\n\
             - {{id: g, title: G, transport: http, adapter: x, credential: UNSET_KEY, capabilities: [independent_reasoning]}}\n",
            absolute.display()
        );
        let catalogue = Catalogue::parse(&yaml, "test.yaml", &validate_settings(&test_registry()))
            .expect("catalogue");
        let mut ctx = context(dir.path());
        ctx.path = Some(bin.display().to_string());
        ctx.credentials.insert("SET_KEY".into(), "v".into());
        ctx.credentials.insert("EMPTY_KEY".into(), String::new());
        let presence = probe_presence(&catalogue, &ctx, dir.path());
        let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&presence.executables),
            vec![absolute.display().to_string(), "on-path".to_string()]
        );
        assert_eq!(names(&presence.credentials), vec!["SET_KEY".to_string()]);
        ctx.path = None;
        let presence = probe_presence(&catalogue, &ctx, dir.path());
        assert_eq!(
            names(&presence.executables),
            vec![absolute.display().to_string()]
        );
    }

    #[test]
    fn credentials_are_collected_for_the_catalogue_in_force_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("c.yaml");
        std::fs::write(
            &file,
            "advisors:\n- {id: e, title: E, transport: process, adapter: process, \
             executable: e, credential: MY_KEY, pass_env: [PASSED, UNSET], \
             capabilities: [independent_reasoning]}\n",
        )
        .expect("write");
        let mut ctx = context(dir.path());
        ctx.catalogue_path = Some(file);
        let env = env_of(&[
            ("MY_KEY", "secret"),
            ("PASSED", "p"),
            ("OTHER_KEY", "other"),
        ]);
        let credentials = credentials_for(&ctx, &env);
        assert_eq!(
            credentials.into_iter().collect::<Vec<_>>(),
            vec![
                ("MY_KEY".to_string(), "secret".to_string()),
                ("PASSED".to_string(), "p".to_string())
            ]
        );
        ctx.catalogue_path = Some(dir.path().join("missing.yaml"));
        assert!(credentials_for(&ctx, &env).is_empty());
    }

    #[test]
    fn a_catalogue_read_lately_is_reused_for_the_same_texts_and_adapters_only() {
        let entry = |id: &str| {
            format!(
                "advisors:\n- {{id: {id}, title: T, transport: http, adapter: x, \
                 credential: K, capabilities: [independent_reasoning]}}\n"
            )
        };
        let files = |text: &str| vec![("c.yaml".to_string(), text.to_string())];
        let registry = test_registry();
        let first =
            layer_files(files(&entry("memo-a")), Judge::Registry(&registry)).expect("reads");
        let again =
            layer_files(files(&entry("memo-a")), Judge::Registry(&registry)).expect("reads");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same texts are not parsed again"
        );
        // A clone holds the same adapters, so it judges alike.
        let clone = registry.clone();
        let cloned = layer_files(files(&entry("memo-a")), Judge::Registry(&clone)).expect("reads");
        assert!(Arc::ptr_eq(&first, &cloned));
        // One byte more is another catalogue.
        let edited =
            layer_files(files(&entry("memo-b")), Judge::Registry(&registry)).expect("reads");
        assert!(!Arc::ptr_eq(&first, &edited));
        assert!(edited.layered.catalogue.get("memo-b").is_some());
        assert!(edited.layered.catalogue.get("memo-a").is_none());
        // Adapters that refuse the entry are asked, not answered from what others accepted.
        let without_x = Registry::builtin();
        let refused = layer_files(files(&entry("memo-a")), Judge::Registry(&without_x))
            .err()
            .expect("`x` is unknown to the builtin adapters");
        assert!(
            refused.to_string().contains("unknown adapter `x`"),
            "{refused}"
        );
        // So are adapters changed since: an insert makes another registry.
        let mut changed = registry.clone();
        changed.insert(
            "x",
            std::sync::Arc::new(advisord_fakes::scripted::ScriptedAdapter::new(vec![])),
        );
        let rejudged =
            layer_files(files(&entry("memo-a")), Judge::Registry(&changed)).expect("reads");
        assert!(!Arc::ptr_eq(&first, &rejudged));
    }

    #[test]
    fn an_unreadable_catalogue_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut ctx = context(dir.path());
        ctx.catalogue_path = Some(dir.path().join("missing.yaml"));
        let err = load_catalogue(&ctx, Judge::NamesOnly).expect_err("missing file");
        let message = err.to_string();
        assert!(message.contains("missing.yaml"), "{message}");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn a_symlink_below_the_root_on_the_way_to_the_task_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("root");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(root.join(".ai/local/state")).expect("mkdir");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        let resolve = |task: &str| {
            let mut ctx = context(&root);
            ctx.task = Some(task.into());
            Resolved::resolve(&ctx, &test_registry())
        };
        assert!(resolve("t").is_ok(), "no link: fine");
        // The state directory itself is a link.
        std::os::unix::fs::symlink(&elsewhere, root.join(paths::DEFAULT_STATE_DIR)).expect("link");
        let err = resolve("t").expect_err("a linked state directory");
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert!(err.to_string().contains("reasoning"), "{err}");
        assert_eq!(err.exit_code(), 2);
        // A task's directory is a link.
        std::fs::remove_file(root.join(paths::DEFAULT_STATE_DIR)).expect("unlink");
        std::fs::create_dir(root.join(paths::DEFAULT_STATE_DIR)).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, root.join(paths::DEFAULT_STATE_DIR).join("t"))
            .expect("link");
        assert!(resolve("t").is_err(), "a linked task directory");
        assert!(resolve("other").is_ok());
        assert_eq!(std::fs::read_dir(&elsewhere).expect("read").count(), 0);
    }

    #[test]
    fn the_root_must_be_an_absolute_existing_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(check_root(dir.path()).is_ok());
        assert!(check_root(Path::new("relative")).is_err());
        assert!(check_root(&dir.path().join("missing")).is_err());
        let file = dir.path().join("f");
        std::fs::write(&file, "").expect("write");
        assert!(check_root(&file).is_err());
    }
}
