//! The advisor catalogue: parsing and validation of the common fields (SPEC §7, §12).
//!
//! Adapter-specific settings (`args`, `endpoint`, `model`, ...) are kept as a map in
//! [`AdvisorEntry::settings`] and validated by a caller-supplied [`SettingsValidator`],
//! so the core never learns what any adapter needs.

use crate::core::records::Mode;
use serde::{Deserialize, Serialize};

/// The catalogue embedded in the binaries (`share/advisors.yaml`).
pub const EMBEDDED: &str = include_str!("../../share/advisors.yaml");

/// The capabilities an advisor may offer and a plan may request.
pub const CAPABILITIES: &[&str] = &[
    "independent_reasoning",
    "code_review",
    "architecture",
    "security_review",
    "test_design",
    "debugging",
    "long_context",
    "reviews",
];

/// The capability requested when an assessment names none.
pub const DEFAULT_CAPABILITY: &str = "independent_reasoning";

/// How an advisor is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A local executable.
    Process,
    /// An HTTP API.
    Http,
    /// A peer on the shared message bus.
    Mesh,
}

/// What an advisor refers to, for the independence check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct References {
    /// Who serves it.
    #[serde(default)]
    pub provider: Option<String>,
    /// Who made the model.
    #[serde(default)]
    pub vendor: Option<String>,
    /// The model name.
    #[serde(default)]
    pub model: Option<String>,
}

/// One advisor of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdvisorEntry {
    /// Unique id.
    pub id: String,
    /// Human title.
    pub title: String,
    /// How it is reached.
    pub transport: Transport,
    /// The adapter (registry key) that speaks to it.
    pub adapter: String,
    /// Provider, vendor, model.
    #[serde(default)]
    pub references: References,
    /// The executable whose presence on `PATH` means it is installed.
    #[serde(default)]
    pub executable: Option<String>,
    /// The credential variable whose presence means it is configured.
    #[serde(default)]
    pub credential: Option<String>,
    /// What it offers.
    pub capabilities: Vec<String>,
    /// Whether it runs on this machine (`offline` mode admits only these).
    #[serde(default)]
    pub local: bool,
    /// How many exchanges may run at once across all jobs.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: u32,
    /// Every other key: the adapter's own settings.
    #[serde(flatten)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

fn default_max_concurrent() -> u32 {
    2
}

/// A parsed, validated catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalogue {
    /// The mode the file asks for, if any.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Advisors in declaration (preference) order.
    pub advisors: Vec<AdvisorEntry>,
}

/// Validates the adapter-specific part of one entry: `Err((field, message))`.
pub type SettingsValidator<'a> = &'a dyn Fn(&AdvisorEntry) -> Result<(), (String, String)>;

/// Why a catalogue was refused; the message names the file, the advisor and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {location}{message}")]
pub struct CatalogueError {
    /// The file (or `embedded share/advisors.yaml`).
    pub source_name: String,
    /// `advisor `x`, field `y`: ` or empty.
    pub location: String,
    /// What is wrong and what is accepted.
    pub message: String,
}
