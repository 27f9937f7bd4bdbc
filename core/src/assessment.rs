//! The assessment's two scales, each read from its record name (`FromStr`) by every
//! surface that takes one (the CLI's flags, the MCP tools' arguments).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A name that is not one of a scale's values: says what was given and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not a {what}; accepted: {accepted}")]
pub struct UnknownName {
    /// What the name was meant to be (`materiality`, `confidence`).
    pub what: &'static str,
    /// The name given.
    pub given: String,
    /// The accepted names, comma-separated, lowest first.
    pub accepted: String,
}

/// How much a wrong decision would cost.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Materiality {
    /// Cheap to undo.
    Trivial,
    /// Minor cost.
    Low,
    /// Worth evidence and possibly review.
    Material,
    /// Costly to get wrong.
    High,
    /// Very costly or irreversible.
    Critical,
}

impl Materiality {
    /// Every value, lowest first.
    pub const ALL: [Materiality; 5] = [
        Materiality::Trivial,
        Materiality::Low,
        Materiality::Material,
        Materiality::High,
        Materiality::Critical,
    ];

    /// Whether the writer demands evidence (material, high, critical).
    pub fn needs_evidence(self) -> bool {
        self >= Materiality::Material
    }

    /// The name used in records and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Materiality::Trivial => "trivial",
            Materiality::Low => "low",
            Materiality::Material => "material",
            Materiality::High => "high",
            Materiality::Critical => "critical",
        }
    }
}

impl FromStr for Materiality {
    type Err = UnknownName;

    /// The materiality named exactly `text`.
    fn from_str(text: &str) -> Result<Materiality, UnknownName> {
        Materiality::ALL
            .into_iter()
            .find(|m| m.as_str() == text)
            .ok_or_else(|| UnknownName {
                what: "materiality",
                given: text.to_string(),
                accepted: Materiality::ALL.map(Materiality::as_str).join(", "),
            })
    }
}

/// The executor's confidence in its own hypothesis.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Unsure.
    Low,
    /// The default.
    #[default]
    Medium,
    /// Sure; lowers the budget by one.
    High,
}

impl Confidence {
    /// Every value, lowest first.
    pub const ALL: [Confidence; 3] = [Confidence::Low, Confidence::Medium, Confidence::High];

    /// The name used in records and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

impl FromStr for Confidence {
    type Err = UnknownName;

    /// The confidence named exactly `text`.
    fn from_str(text: &str) -> Result<Confidence, UnknownName> {
        Confidence::ALL
            .into_iter()
            .find(|c| c.as_str() == text)
            .ok_or_else(|| UnknownName {
                what: "confidence",
                given: text.to_string(),
                accepted: Confidence::ALL.map(Confidence::as_str).join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_is_read_from_its_name_and_nothing_else() {
        for m in Materiality::ALL {
            assert_eq!(m.as_str().parse(), Ok(m));
        }
        for c in Confidence::ALL {
            assert_eq!(c.as_str().parse(), Ok(c));
        }
        assert_eq!(
            "huge".parse::<Materiality>().unwrap_err().to_string(),
            "`huge` is not a materiality; accepted: trivial, low, material, high, critical"
        );
        assert_eq!(
            "High".parse::<Confidence>().unwrap_err().to_string(),
            "`High` is not a confidence; accepted: low, medium, high"
        );
    }
}
