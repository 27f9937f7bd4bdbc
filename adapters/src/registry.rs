//! The adapters, found by the catalogue's `adapter` value.
//!
//! Adding a transport is one module implementing [`Adapter`] and one line in
//! [`Registry::builtin`]. Tests build an [`Registry::empty`] one and [`Registry::insert`]
//! fakes under whatever names their catalogue uses.

use crate::contract::{Adapter, AdvisorSpec};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The adapters known by name.
#[derive(Clone)]
pub struct Registry {
    adapters: BTreeMap<String, Arc<dyn Adapter>>,
    /// Names this registry's adapters as they are now: unique in the process, renewed by
    /// every [`Registry::insert`], shared by clones (which hold the same adapters).
    generation: u64,
}

/// The next [`Registry::generation`].
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            adapters: BTreeMap::new(),
            generation: next_generation(),
        }
    }
}

impl Registry {
    /// A registry with no adapter (tests insert fakes into it).
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// Every transport shipped with advisord, under its catalogue name.
    pub fn builtin() -> Registry {
        let mut registry = Registry::empty();
        // One line per transport: `process`; `openai`, `anthropic`, `gemini`, `ollama`;
        // `mesh` (unlinked until the daemon joins a mesh).
        let transports = [
            crate::process::adapters(),
            crate::http::adapters(),
            crate::mesh::adapters(),
        ];
        for (name, adapter) in transports.into_iter().flatten() {
            registry.insert(name, adapter);
        }
        registry
    }

    /// Register `adapter` under `name`, replacing (and returning) any adapter there.
    pub fn insert(&mut self, name: &str, adapter: Arc<dyn Adapter>) -> Option<Arc<dyn Adapter>> {
        self.generation = next_generation();
        self.adapters.insert(name.to_string(), adapter)
    }

    /// A number naming this registry's adapters as they are: two registries with the same
    /// generation judge every catalogue entry alike (see [`Registry::validate`]), so what
    /// was judged against one holds for the other.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The adapter registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Adapter>> {
        self.adapters.get(name).cloned()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.adapters.keys().cloned().collect()
    }

    /// Check a catalogue entry against the registry: its `adapter` must be registered, and
    /// the adapter must accept its settings. `Err((field, message))` names the field.
    pub fn validate(&self, advisor: &AdvisorSpec) -> Result<(), (String, String)> {
        let Some(adapter) = self.adapters.get(&advisor.adapter) else {
            let accepted = self
                .adapters
                .keys()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let accepted = if accepted.is_empty() {
                "none registered".to_string()
            } else {
                accepted
            };
            return Err((
                "adapter".to_string(),
                format!(
                    "unknown adapter `{}`; accepted: {accepted}; use one of them or add the \
                     transport (docs/ADAPTERS.md)",
                    advisor.adapter
                ),
            ));
        };
        adapter.validate(advisor)
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("adapters", &self.names())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Answer, Failure, Io};
    use futures::future::BoxFuture;

    /// Accepts settings only with `needed` set, to show validation is delegated.
    struct Picky;

    impl Adapter for Picky {
        fn exchange<'a>(
            &'a self,
            _advisor: &'a AdvisorSpec,
            _prompt: &'a str,
            _io: &'a Io,
        ) -> BoxFuture<'a, Result<Answer, Failure>> {
            Box::pin(async {
                Ok(Answer {
                    text: "unused".into(),
                    usage: None,
                    source: None,
                    vouched: true,
                })
            })
        }

        fn validate(&self, advisor: &AdvisorSpec) -> Result<(), (String, String)> {
            match advisor.settings.get("needed") {
                Some(_) => Ok(()),
                None => Err(("needed".into(), "`needed` is required".into())),
            }
        }
    }

    fn spec(adapter: &str, settings: serde_json::Value) -> AdvisorSpec {
        AdvisorSpec {
            id: "a1".into(),
            adapter: adapter.into(),
            executable: None,
            credential: None,
            settings: settings.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn validate_names_the_field() {
        let mut registry = Registry::empty();
        assert!(registry.insert("picky", Arc::new(Picky)).is_none());
        let cases: &[(AdvisorSpec, Result<(), &str>)] = &[
            (spec("picky", serde_json::json!({"needed": 1})), Ok(())),
            (spec("picky", serde_json::json!({})), Err("needed")),
            (
                spec("nope", serde_json::json!({"needed": 1})),
                Err("adapter"),
            ),
        ];
        for (advisor, want) in cases {
            let got = registry.validate(advisor);
            assert_eq!(
                got.as_ref()
                    .map(|_| ())
                    .map_err(|(field, _)| field.as_str()),
                *want,
                "{advisor:?}"
            );
        }
        let (_, message) = registry
            .validate(&spec("nope", serde_json::json!({})))
            .unwrap_err();
        assert!(
            message.contains("`nope`") && message.contains("`picky`"),
            "{message}"
        );
    }

    #[test]
    fn a_generation_names_the_adapters_as_they_are() {
        let mut registry = Registry::empty();
        let clone = registry.clone();
        assert_eq!(
            registry.generation(),
            clone.generation(),
            "a clone judges alike"
        );
        assert_ne!(registry.generation(), Registry::empty().generation());
        let before = registry.generation();
        registry.insert("picky", Arc::new(Picky));
        assert_ne!(
            registry.generation(),
            before,
            "an insert changes what is judged"
        );
        assert_eq!(
            clone.generation(),
            before,
            "the clone still holds the old adapters"
        );
    }

    #[test]
    fn builtin_names_are_the_catalogue_adapter_values() {
        let registry = Registry::builtin();
        for name in ["process", "openai", "anthropic", "gemini", "ollama"] {
            assert!(
                registry.get(name).is_some(),
                "`{name}` registered: {registry:?}"
            );
        }
        assert_eq!(registry.names().len(), registry.clone().names().len());
    }
}
