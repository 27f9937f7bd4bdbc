//! The advisor catalogue: parsing and validation of the common fields.
//!
//! Adapter-specific settings (`args`, `endpoint`, `model`, ...) are kept as a map in
//! [`AdvisorEntry::settings`] and validated by a caller-supplied [`SettingsValidator`],
//! so the core never learns what any adapter needs.
//!
//! One concept a file: `parse` walks the file's top level, `entry` validates one advisor's
//! common fields, `yaml` describes values for messages and turns settings into JSON,
//! `error` places an error in the file, `suggest` finds the likely intended word.

mod entry;
mod error;
pub mod layers;
mod parse;
mod price;
mod suggest;
#[cfg(test)]
mod tests;
mod yaml;

pub use error::CatalogueError;
pub use layers::{layered, CatalogueView, Layer, LayerUsed, Layered};
pub use price::{project_budgets, Budgets, Limits, Price, Pricing};
pub use suggest::{did_you_mean, edit_distance};

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

/// The keys every advisor shares; every other key of an entry is the adapter's setting.
/// Written once in `advisord-core`, which the adapters read entries with too.
pub use advisord_core::COMMON_KEYS;

/// The capability requested when an assessment names none.
pub const DEFAULT_CAPABILITY: &str = "independent_reasoning";

/// How an advisor is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// What its consultations cost (`None`: not priced, so their cost is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Pricing>,
    /// Its own spending limits.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub budget: Limits,
    /// How many exchanges may run at once across all jobs.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: u32,
    /// Every other key: the adapter's own settings.
    #[serde(flatten)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

impl AdvisorEntry {
    /// What produces this advisor's answers, for counting independent reviews:
    /// `vendor/model` from its references (the model alone when no vendor is named), else
    /// `advisor:<id>`. Two advisors in front of one model have one source.
    pub fn source(&self) -> String {
        let clean = |v: &Option<String>| {
            v.as_deref()
                .map(|s| s.trim().to_lowercase())
                .filter(|s| !s.is_empty())
        };
        match (
            clean(&self.references.vendor),
            clean(&self.references.model),
        ) {
            (Some(vendor), Some(model)) => format!("{vendor}/{model}"),
            (None, Some(model)) => model,
            _ => format!("advisor:{}", self.id),
        }
    }
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
    /// The limits on every advisor's spend together.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub budget: Limits,
}

/// Validates the adapter-specific part of one entry: `Err((field, message))`.
pub type SettingsValidator<'a> = &'a dyn Fn(&AdvisorEntry) -> Result<(), (String, String)>;

/// The source name used in errors about the embedded catalogue.
pub const EMBEDDED_SOURCE: &str = "embedded share/advisors.yaml";

/// A settings validator that accepts every entry: for the embedded catalogue, whose
/// adapter settings the adapters' own tests hold to account.
pub fn accept_any_settings(_entry: &AdvisorEntry) -> Result<(), (String, String)> {
    Ok(())
}

impl Catalogue {
    /// Parse and validate a catalogue file; `source_name` names it in every error and
    /// `validate_settings` judges each entry's adapter-specific keys.
    pub fn parse(
        text: &str,
        source_name: &str,
        validate_settings: SettingsValidator,
    ) -> Result<Catalogue, CatalogueError> {
        parse::parse(text, source_name, validate_settings)
    }

    /// The embedded default catalogue, with adapter settings accepted as they are.
    pub fn embedded() -> Catalogue {
        // Parsed once per process: the text is compiled in, so every parse gives the same.
        static PARSED: std::sync::OnceLock<Catalogue> = std::sync::OnceLock::new();
        PARSED
            .get_or_init(|| {
                // A unit test parses EMBEDDED, so this cannot fail in a released binary.
                Catalogue::parse(EMBEDDED, EMBEDDED_SOURCE, &accept_any_settings)
                    .unwrap_or_else(|e| panic!("the embedded catalogue must be valid: {e}"))
            })
            .clone()
    }

    /// The one currency the catalogue's prices are in, if any advisor is priced.
    pub fn currency(&self) -> Option<&str> {
        self.advisors.iter().find_map(|a| match &a.price {
            Some(Pricing::Metered(p)) => Some(p.currency.as_str()),
            _ => None,
        })
    }

    /// The catalogue's budgets: the total and each advisor's.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            total: self.budget,
            advisors: self
                .advisors
                .iter()
                .filter(|a| !a.budget.is_empty())
                .map(|a| (a.id.clone(), a.budget))
                .collect(),
        }
    }

    /// The advisor with id `id`, if declared.
    pub fn get(&self, id: &str) -> Option<&AdvisorEntry> {
        self.advisors.iter().find(|a| a.id == id)
    }

    /// The name of every credential variable the catalogue mentions (never their values).
    pub fn credential_vars(&self) -> std::collections::BTreeSet<String> {
        self.advisors
            .iter()
            .filter_map(|a| a.credential.clone())
            .collect()
    }

    /// Every executable the catalogue mentions, as written (a name or an absolute path).
    pub fn executables(&self) -> std::collections::BTreeSet<String> {
        self.advisors
            .iter()
            .filter_map(|a| a.executable.clone())
            .collect()
    }
}
