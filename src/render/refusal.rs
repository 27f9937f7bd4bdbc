//! A writer's refusal as output: `{"refused": true, "reason": CODE, "message": ...}` or one
//! plain sentence.

use super::text::Out;
use super::Render;
use crate::core::writer::{ReasonCode, Refusal};
use serde::Serialize;

/// What a refusal prints; `refused` is always `true` so a reader can tell it from a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusalView {
    /// Always `true`.
    pub refused: bool,
    /// The fixed reason code.
    pub reason: ReasonCode,
    /// One sentence: what was wrong and what is accepted.
    pub message: String,
}

impl From<&Refusal> for RefusalView {
    fn from(refusal: &Refusal) -> RefusalView {
        RefusalView {
            refused: true,
            reason: refusal.reason,
            message: refusal.message.clone(),
        }
    }
}

impl Render for RefusalView {
    fn plain(&self) -> String {
        let mut out = Out::new();
        out.para(
            0,
            2,
            &format!("refused ({}): {}", self.reason.as_str(), self.message),
        );
        out.finish()
    }
}
