//! The one trait, the io context, typed failures and the contract layer around every
//! adapter. Names no transport and no vendor.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The advisor as an adapter sees it: the catalogue entry's transport-relevant fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdvisorSpec {
    /// The advisor id (for diagnostics only).
    pub id: String,
    /// The registry key of the adapter.
    pub adapter: String,
    /// The executable, for process advisors.
    #[serde(default)]
    pub executable: Option<String>,
    /// The credential variable name (its value is looked up through [`Io::env`]).
    #[serde(default)]
    pub credential: Option<String>,
    /// The adapter's own settings (`args`, `endpoint`, `model`, `failure_patterns`, ...).
    #[serde(default)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// Why an exchange failed. Names match the consultation record's `failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The deadline passed first.
    Timeout,
    /// The advisor said to come back later.
    RateLimited,
    /// The credential was refused or is missing.
    AuthFailed,
    /// An answer came but could not be read.
    Malformed,
    /// An answer came with no text.
    Empty,
    /// The advisor could not be reached.
    Unavailable,
    /// The exchange was cancelled.
    Cancelled,
    /// Anything else.
    Error,
}

/// A typed failure with its diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind:?}: {diagnostic}")]
pub struct Failure {
    /// The kind.
    pub kind: FailureKind,
    /// The last line of standard error or the HTTP error body, control characters
    /// removed, at most [`MAX_DIAGNOSTIC_CHARS`] characters.
    pub diagnostic: String,
    /// Seconds the advisor asked to wait, for rate limits.
    pub retry_after_s: Option<u64>,
}

/// The longest diagnostic kept, in characters.
pub const MAX_DIAGNOSTIC_CHARS: usize = 300;

/// Token usage an adapter read from the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens sent.
    pub input_tokens: u64,
    /// Tokens received.
    pub output_tokens: u64,
}

/// The raw answer of one exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The answer text as the advisor gave it.
    pub text: String,
    /// Token usage, when the transport reports it.
    pub usage: Option<Usage>,
}

/// How to look up an environment variable of the process asking (not the daemon's).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What an adapter gets besides the advisor and the prompt.
#[derive(Clone)]
pub struct Io {
    /// When the exchange must be over.
    pub deadline: Instant,
    /// Cancelled when the job is cancelled or the daemon stops.
    pub cancel: CancellationToken,
    /// The asking process's environment (`PATH`, credential variables, ...).
    pub env: EnvLookup,
    /// The one shared HTTP client (connection pool).
    pub http: reqwest::Client,
}

/// The one trait a transport implements.
pub trait Adapter: Send + Sync {
    /// Send `prompt` to `advisor` and return its answer text or a typed failure.
    ///
    /// An adapter should honour `io.deadline` and `io.cancel` and release what it holds,
    /// but the contract layer stops it on time even if it does not.
    fn exchange<'a>(
        &'a self,
        advisor: &'a AdvisorSpec,
        prompt: &'a str,
        io: &'a Io,
    ) -> BoxFuture<'a, Result<Answer, Failure>>;
}

/// Keeps the unused-import lint quiet until the contract layer lands.
#[allow(dead_code)]
type Settings = BTreeMap<String, String>;
