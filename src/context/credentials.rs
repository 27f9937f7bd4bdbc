//! The credential values a request carries: those of the variables the context's
//! catalogue names (each advisor's credential and its `pass_env`), read from the asker's
//! environment, or the daemon's for a resumed job.

use super::*;

/// Give `ctx` the daemon's own values of the credential variables its catalogue names (a
/// job resumed after a restart: credentials are never journaled).
pub fn fill_credentials_from_daemon(ctx: &mut RequestContext) {
    ctx.credentials = credentials_for(ctx, &|name| std::env::var(name).ok());
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
