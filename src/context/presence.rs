//! What the asking machine has of each advisor: its executable on the asker's `PATH`,
//! its credential set, and a local endpoint that answers.

use super::*;

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

pub(super) fn executable_present(name: &str, path: Option<&str>, root: &Path) -> bool {
    let as_path = Path::new(name);
    if as_path.is_absolute() {
        return is_executable_file(as_path);
    }
    match path {
        Some(path) if !path.is_empty() => which::which_in(name, Some(path), root).is_ok(),
        _ => false,
    }
}

pub(super) fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
