//! `trust`: the user trusts the repository's own catalogue, as it is now; and the notice
//! the consulting verbs print while it is not trusted.

use crate::context::{self, PROJECT_CATALOGUE};
use crate::core::catalogue::Catalogue;
use crate::error::Error as ServiceError;
use crate::protocol::RequestContext;
use crate::trust;

/// Tell the user (on standard error) that the repository's catalogue is not in force and
/// what to run; nothing when it is trusted, absent, or another catalogue was named.
pub fn warn_untrusted(ctx: &RequestContext) {
    if let Some(message) = context::untrusted_catalogue(ctx) {
        eprintln!("advisor-consult: {message}");
    }
}

/// `advisor-consult trust`: check that the root's catalogue is a valid catalogue, record
/// its canonical path and content hash in the user's config directory, and show what its
/// process advisors will run.
pub fn run(ctx: &RequestContext) -> anyhow::Result<i32> {
    let file = ctx.root.join(PROJECT_CATALOGUE);
    let bytes = std::fs::read(&file).map_err(|e| {
        ServiceError::Usage(format!(
            "there is no readable repository catalogue at `{}` ({e}); `trust` trusts the \
             catalogue a repository ships, so run it in (or pass `--root` naming) that \
             repository",
            file.display()
        ))
    })?;
    let name = file.display().to_string();
    let text = String::from_utf8(bytes.clone()).map_err(|_| {
        ServiceError::Usage(format!(
            "`{name}` is not UTF-8 text, so not a catalogue; nothing was trusted"
        ))
    })?;
    let catalogue = Catalogue::parse(
        &text,
        &name,
        &context::validate_settings(&advisord_adapters::registry::Registry::builtin()),
    )
    .map_err(ServiceError::from)?;
    let config = trust::own_config_dir().ok_or_else(|| {
        ServiceError::Usage(
            "cannot find your config directory: set `HOME` (or `XDG_CONFIG_HOME`) to an \
             absolute path"
                .to_string(),
        )
    })?;
    let (canonical, hash) = trust::trust(&config, &file, &bytes).map_err(|e| {
        ServiceError::Usage(format!(
            "cannot record the trust in `{}`: {e}; check that the directory is yours and \
             writable",
            config.join(trust::TRUST_FILE).display()
        ))
    })?;
    println!(
        "trusted `{}` (sha256 {hash}); a change to the file needs `advisor-consult trust` again",
        canonical.display()
    );
    let commands: Vec<String> = catalogue
        .advisors
        .iter()
        .filter_map(|a| {
            let executable = a.executable.as_deref()?;
            let args: Vec<String> = a
                .settings
                .get("args")
                .and_then(|v| v.as_array())
                .map(|args| {
                    args.iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            Some(format!("  {}: {executable} {}", a.id, args.join(" ")))
        })
        .collect();
    if !commands.is_empty() {
        println!("its process advisors run:\n{}", commands.join("\n"));
    }
    Ok(0)
}
