//! A request context from the asker's flags, working directory and environment: the
//! variables it reads, the local UTC offset, and the daemon's own context for a request
//! that carries none.

use super::git::git_ancestor;
use super::*;

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

pub(super) fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
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
