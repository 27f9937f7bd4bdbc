//! The catalogue of a context: its files (the user's, the named one or the trusted
//! project's) read and layered over the embedded one, judged by the caller's registry,
//! and the last few layered catalogues remembered so the same texts are parsed once.

use super::*;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::{LazyLock, Mutex};

/// The catalogue of `ctx` and where it came from.
///
/// A repository's own catalogue is used only when the user trusts it (`crate::trust`);
/// until then the embedded one is used, and [`untrusted_catalogue`] says why.
pub(super) fn load_catalogue(
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
pub(super) struct LayeredFiles {
    /// The files above the embedded catalogue, bottom first: name and text.
    files: Vec<(String, String)>,
    pub(super) layered: crate::core::catalogue::Layered,
}

/// Who judges the settings of a catalogue's entries.
#[derive(Clone, Copy)]
pub(super) enum Judge<'r> {
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
pub(super) const LAYERED_REMEMBERED: NonZeroUsize = NonZeroUsize::new(8).expect("not zero");

/// What a layered catalogue is a function of: the judge's generation and the files above
/// the embedded one (names and texts, bottom first).
type LayeredKey = (u64, Vec<(String, String)>);

/// The catalogues read lately, least recently used first out. Every request reads its
/// catalogue files again, but parsing and merging the same texts again would only give the
/// same catalogue: a daemon parsed the YAML three times per consultation. A memo of a pure
/// function (see `docs/ARCHITECTURE.md`, "Process-wide statics"): what it answers is what
/// a fresh parse of the same texts by the same judge would give.
pub(super) static LAYERED: LazyLock<Mutex<LruCache<LayeredKey, Arc<LayeredFiles>>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(LAYERED_REMEMBERED)));

/// The embedded catalogue, then `files`, read as layers: the same texts judged by the same
/// registry give the same catalogue, so one read lately is reused.
pub(super) fn layer_files(
    files: Vec<(String, String)>,
    judge: Judge,
) -> Result<Arc<LayeredFiles>, Error> {
    let remembered = || {
        LAYERED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let key: LayeredKey = (judge.generation(), files);
    if let Some(found) = remembered().get(&key) {
        return Ok(found.clone());
    }
    let (generation, files) = key;
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
        files: files.clone(),
        layered,
    });
    remembered().put((generation, files), read.clone());
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
pub(super) fn catalogue_files(ctx: &RequestContext) -> Result<Vec<(String, String)>, Error> {
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

pub(super) fn read_catalogue_file(file: &Path) -> Result<Vec<u8>, Error> {
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

pub(super) fn catalogue_text(file: &Path, bytes: Vec<u8>) -> Result<String, Error> {
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
