//! Why an exchange failed: what an adapter reports and what a consultation records.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The deadline passed first.
    Timeout,
    /// The advisor said to come back later.
    RateLimited,
    /// The credential was refused.
    AuthFailed,
    /// An answer came but could not be read.
    Malformed,
    /// An answer came with no text.
    Empty,
    /// The advisor could not be reached.
    Unavailable,
    /// The job was cancelled.
    Cancelled,
    /// Our own environment lacked the advisor's credential (a job resumed by a daemon
    /// whose environment lacks it): nothing was sent, and it says nothing about the advisor.
    NotConfigured,
    /// Anything else.
    Error,
}

impl FailureKind {
    /// Every kind.
    pub const ALL: [FailureKind; 9] = [
        FailureKind::Timeout,
        FailureKind::RateLimited,
        FailureKind::AuthFailed,
        FailureKind::Malformed,
        FailureKind::Empty,
        FailureKind::Unavailable,
        FailureKind::Cancelled,
        FailureKind::NotConfigured,
        FailureKind::Error,
    ];

    /// The name used in records (`rate_limited`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::AuthFailed => "auth_failed",
            FailureKind::Malformed => "malformed",
            FailureKind::Empty => "empty",
            FailureKind::Unavailable => "unavailable",
            FailureKind::Cancelled => "cancelled",
            FailureKind::NotConfigured => "not_configured",
            FailureKind::Error => "error",
        }
    }

    /// Whether the circuit counts it (malformed, empty and cancelled are about one exchange;
    /// not_configured is about our own environment, not the advisor).
    pub fn is_counted(self) -> bool {
        !matches!(
            self,
            FailureKind::Malformed
                | FailureKind::Empty
                | FailureKind::Cancelled
                | FailureKind::NotConfigured
        )
    }

    /// Whether it is transient (timeout, unavailable, error).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            FailureKind::Timeout | FailureKind::Unavailable | FailureKind::Error
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_serialises_as_its_name() {
        for kind in FailureKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::Value::from(kind.as_str()));
            let back: FailureKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, kind);
        }
    }
}
