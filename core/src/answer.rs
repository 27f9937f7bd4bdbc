//! What an answer says of the executor's hypothesis, and what the exchange cost.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where an advisor's answer stands relative to the executor's hypothesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stance {
    /// It agrees.
    Supports,
    /// It argues against.
    Opposes,
    /// It proposes something else.
    Alternative,
    /// It cannot tell.
    Inconclusive,
}

impl Stance {
    /// Every stance.
    pub const ALL: [Stance; 4] = [
        Stance::Supports,
        Stance::Opposes,
        Stance::Alternative,
        Stance::Inconclusive,
    ];

    /// Whether this stance diverges from the executor's hypothesis.
    pub fn diverges(self) -> bool {
        matches!(self, Stance::Opposes | Stance::Alternative)
    }

    /// The name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Stance::Supports => "supports",
            Stance::Opposes => "opposes",
            Stance::Alternative => "alternative",
            Stance::Inconclusive => "inconclusive",
        }
    }
}

/// Token usage an adapter reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Tokens sent.
    pub input_tokens: u64,
    /// Tokens received.
    pub output_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stances_serialise_as_their_names() {
        for stance in Stance::ALL {
            assert_eq!(
                serde_json::to_value(stance).unwrap(),
                serde_json::Value::from(stance.as_str())
            );
        }
        assert!(Stance::Opposes.diverges() && Stance::Alternative.diverges());
        assert!(!Stance::Supports.diverges() && !Stance::Inconclusive.diverges());
    }

    #[test]
    fn usage_refuses_unknown_fields() {
        let usage: Usage =
            serde_json::from_str(r#"{"input_tokens": 3, "output_tokens": 4}"#).unwrap();
        assert_eq!(usage.input_tokens + usage.output_tokens, 7);
        assert!(serde_json::from_str::<Usage>(
            r#"{"input_tokens": 3, "output_tokens": 4, "cost": 1}"#
        )
        .is_err());
    }
}
