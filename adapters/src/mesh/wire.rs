//! What crosses the bus between an asking daemon and a peer offering reviews: the
//! subjects, the service's metadata keys and the three messages (a review request, its
//! reply, a cancel notice). Both sides read and write these types; nothing else crosses.
//!
//! Each message crosses the bus sealed by its sender's key ([`super::identity`]): the
//! types below are the envelope's body.
//!
//! A peer sees only the question (already scrubbed of secret shapes), the capabilities
//! asked for, the remaining deadline, a request id and the asker's runtime id: never a
//! record of the asker.

use crate::contract::{FailureKind, Usage};
use crate::normalise::Normalised;
use serde::{Deserialize, Serialize};

/// The name of the NATS service every peer offering reviews registers (discovered through
/// `$SRV.INFO.advisord-reviews`).
pub const SERVICE_NAME: &str = "advisord-reviews";

/// The service's version (semver, as the services API requires).
pub const SERVICE_VERSION: &str = "1.0.0";

/// The version of the messages below; a peer refuses another.
pub const PROTOCOL: u32 = 1;

/// The subject prefix of the review endpoints: `advisord.reviews.<runtime id>`.
pub const REVIEW_PREFIX: &str = "advisord.reviews";

/// The subject prefix of the cancel endpoints: `advisord.cancel.<runtime id>`.
pub const CANCEL_PREFIX: &str = "advisord.cancel";

/// The largest request or reply either side accepts, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 512 * 1024;

/// The longest wait a peer's rate limit may ask for (an hour); a longer one is cut to it.
pub const MAX_RETRY_AFTER_S: u64 = 3600;

/// Metadata keys of the service (`$SRV.INFO` replies).
pub mod keys {
    /// The peer's runtime id.
    pub const RUNTIME: &str = "runtime";
    /// The host it runs on.
    pub const HOST: &str = "host";
    /// The user it runs as.
    pub const USER: &str = "user";
    /// The capabilities it offers, comma-separated.
    pub const CAPABILITIES: &str = "capabilities";
    /// What would answer (`vendor/model`, `inbox:user@host`), comma-separated.
    pub const SOURCES: &str = "sources";
    /// `relay` or `inbox`.
    pub const OFFER: &str = "offer";
    /// [`super::PROTOCOL`] as text.
    pub const PROTOCOL: &str = "protocol";
    /// The runtime's public key (`U...`); its runtime id is bound to it.
    pub const KEY: &str = "key";
}

/// The review endpoint of runtime `runtime`.
pub fn review_subject(runtime: &str) -> String {
    format!("{REVIEW_PREFIX}.{runtime}")
}

/// The cancel endpoint of runtime `runtime`.
pub fn cancel_subject(runtime: &str) -> String {
    format!("{CANCEL_PREFIX}.{runtime}")
}

/// Whether `id` can be a runtime id: 1 to 64 of `A-Z a-z 0-9 _ -` (one subject token).
pub fn valid_runtime_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A review asked of a peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// Unique per exchange; the reply and any cancel notice name it.
    pub request_id: String,
    /// The asking daemon's runtime id.
    pub asker: String,
    /// The question, as every advisor of the job gets it (scrubbed of secret shapes).
    pub question: String,
    /// The capabilities the asker wants reviewed.
    pub capabilities: Vec<String>,
    /// Milliseconds left before the asker stops waiting.
    pub deadline_ms: u64,
}

/// A peer's reply to one [`ReviewRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewReply {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// The request answered.
    pub request_id: String,
    /// The answer or the typed failure.
    #[serde(flatten)]
    pub outcome: ReplyOutcome,
}

/// What a peer's review came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ReplyOutcome {
    /// A completed, normalised answer.
    Completed {
        /// The consultation's fields.
        answer: Normalised,
        /// What produced it (`vendor/model` of the advisor that answered on the peer, or
        /// `inbox:user@host`).
        source: String,
        /// Tokens the peer's advisor reported.
        #[serde(default)]
        usage: Option<Usage>,
    },
    /// A typed failure, passed through as the peer's advisor gave it.
    Failed {
        /// The kind.
        failure: FailureKind,
        /// Why, in one line.
        diagnostic: String,
        /// For rate limits: seconds to wait.
        #[serde(default)]
        retry_after_s: Option<u64>,
    },
}

/// Sent to a peer's cancel endpoint when the asker gives up on a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelNotice {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// The request given up on.
    pub request_id: String,
    /// The asker's runtime id (a peer cancels only requests of the runtime that sent them).
    pub asker: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_ids_are_one_subject_token() {
        for good in ["a", "laptop-7f3k", "ci_runner_2", &"x".repeat(64)] {
            assert!(valid_runtime_id(good), "{good}");
        }
        for bad in ["", "a.b", "a b", "a*", "a>", "é", &"x".repeat(65)] {
            assert!(!valid_runtime_id(bad), "{bad}");
        }
        assert_eq!(review_subject("r1"), "advisord.reviews.r1");
        assert_eq!(cancel_subject("r1"), "advisord.cancel.r1");
    }

    #[test]
    fn replies_round_trip_and_name_their_status() {
        let failed = ReviewReply {
            protocol: PROTOCOL,
            request_id: "q1".into(),
            outcome: ReplyOutcome::Failed {
                failure: FailureKind::RateLimited,
                diagnostic: "slow down".into(),
                retry_after_s: Some(9),
            },
        };
        let json = serde_json::to_value(&failed).unwrap();
        assert_eq!(json["status"], "failed");
        assert_eq!(json["failure"], "rate_limited");
        let back: ReviewReply = serde_json::from_value(json).unwrap();
        assert_eq!(back, failed);
    }
}
