//! Who asks: the agent host that started the server, as it names itself in `initialize`
//! (`clientInfo.name`), and the vendor behind its model.
//!
//! The vendor key is spelt as the catalogue's `references` spell vendors, so the policy can
//! rank advisors of the asker's own vendor after every other without naming one itself
//! (`core::policy::Asker`). The names are those the hosts send, read from the hosts the
//! agent-host suite runs (`tests/integration/agent_hosts.rs`).

use crate::core::policy::Asker;

/// A host's name for itself, by its first word, and its vendor key in the catalogue.
pub const HOSTS: &[(&str, &str)] = &[
    // Claude Code: `claude-code`.
    ("claude", "anthropic"),
    // Codex CLI: `codex-mcp-client`.
    ("codex", "openai"),
    // Gemini CLI: `gemini-cli-mcp-client`.
    ("gemini", "google"),
];

/// The asker a host's `clientInfo.name` describes: the name as given (trimmed, at most 100
/// characters) and the vendor of the first [`HOSTS`] row whose word begins it (case
/// ignored, then `-`, `_`, a space or the end), if any. `None` for an empty name.
pub fn asker(client_name: &str) -> Option<Asker> {
    let host: String = client_name
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    if host.is_empty() {
        return None;
    }
    let lower = host.to_ascii_lowercase();
    let vendor = HOSTS
        .iter()
        .find(|(word, _)| {
            lower
                .strip_prefix(word)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '_', ' ']))
        })
        .map(|(_, vendor)| vendor.to_string());
    Some(Asker { host, vendor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_is_known_by_the_name_it_sends() {
        let vendor = |name: &str| asker(name).and_then(|a| a.vendor);
        assert_eq!(vendor("claude-code").as_deref(), Some("anthropic"));
        assert_eq!(vendor("codex-mcp-client").as_deref(), Some("openai"));
        assert_eq!(vendor("Codex").as_deref(), Some("openai"));
        assert_eq!(vendor("gemini-cli-mcp-client").as_deref(), Some("google"));
        // Another client is recorded without a vendor; a near name is not a host.
        assert_eq!(vendor("mcp-inspector"), None);
        assert_eq!(vendor("claudette"), None);
        let inspector = asker(" mcp-inspector ").expect("a name");
        assert_eq!(inspector.host, "mcp-inspector");
        assert_eq!(asker("  "), None);
    }
}
