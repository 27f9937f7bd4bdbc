//! `--preview-prompt`: the exact prompt a consultation would send, who would receive it,
//! its size and hash; nothing is sent and nothing is recorded.

use super::Render;
use serde::Serialize;

/// The prompt a consultation would send, and to whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptPreview {
    /// The assessment it is about (absent for `ask`, which records nothing when previewing).
    pub assessment: Option<String>,
    /// The advisors a plan would select now, in plan order; each receives this prompt.
    pub advisors: Vec<String>,
    /// The prompt's size in bytes (what a plan records as `prompt_bytes`).
    pub bytes: u64,
    /// Its SHA-256, lowercase hex (what a plan records as `prompt_sha256`).
    pub sha256: String,
    /// The prompt, exactly as it would be sent.
    pub prompt: String,
}

impl PromptPreview {
    /// The preview of `prompt`, for `advisors`.
    pub fn new(assessment: Option<String>, advisors: Vec<String>, prompt: String) -> Self {
        let digest = crate::core::chain::digest(prompt.as_bytes());
        PromptPreview {
            assessment,
            advisors,
            bytes: prompt.len() as u64,
            sha256: digest.trim_start_matches("sha256:").to_string(),
            prompt,
        }
    }
}

impl Render for PromptPreview {
    fn plain(&self) -> String {
        let who = if self.advisors.is_empty() {
            "nobody would be asked now (`advisor-consult plan` says why); an advisor would \
             receive"
                .to_string()
        } else {
            format!("each of {} would receive", self.advisors.join(", "))
        };
        format!(
            "prompt preview: nothing sent, nothing recorded\n{who} these {} bytes (sha256 \
             {}):\n\n{}",
            self.bytes, self.sha256, self.prompt
        )
    }
}
