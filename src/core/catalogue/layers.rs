//! Catalogue layers: the embedded catalogue, then the user's, then the project's (or the
//! one named), each either replacing what is below it or extending it.
//!
//! A file that extends says so at its top level:
//!
//! ```yaml
//! extends: true          # build on the catalogue below instead of replacing it
//! mode: fast             # optional: replaces the mode below
//! advisors:
//!   - id: local-model    # an id already below: only the keys given change
//!     model: another-model
//!     endpoint: http://127.0.0.1:11500
//!   - id: house-review   # a new id: a whole entry, added after the others
//!     title: House reviewer
//!     ...
//! ```
//!
//! The merge is done on the YAML, then the merged catalogue is read and judged as one
//! file (every entry, with its adapter's settings), so an error names the layer that made
//! the merged entry, the advisor and the field. The merged YAML is what `catalogue`
//! prints: the effective catalogue, ready to copy into a file. Pure: the texts come in.

use super::error::CatalogueError;
use super::{Catalogue, SettingsValidator};
use serde::Serialize;
use serde_yaml_ng::{Mapping, Value as Yaml};

/// The top-level key of a file that extends the catalogue below it.
pub const EXTENDS_KEY: &str = "extends";

/// One catalogue file's text, and its name for messages.
#[derive(Debug, Clone, Copy)]
pub struct Layer<'a> {
    /// The file (or the embedded catalogue's name).
    pub name: &'a str,
    /// Its text.
    pub text: &'a str,
}

/// How a layer entered the effective catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LayerUsed {
    /// The file (or the embedded catalogue's name).
    pub source: String,
    /// `replaces` (what is below is not used) or `extends` (its entries override or add).
    pub how: String,
}

/// The effective catalogue, the merged YAML it was read from, and the layers in order.
#[derive(Debug, Clone)]
pub struct Layered {
    /// The catalogue in force.
    pub catalogue: Catalogue,
    /// The merged file: the effective catalogue as YAML.
    pub yaml: Yaml,
    /// Every layer read, bottom first.
    pub layers: Vec<LayerUsed>,
}

/// `catalogue`: the files read, in order, and the effective catalogue as one file's
/// content.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CatalogueView {
    /// Every layer read, bottom first.
    pub files: Vec<LayerUsed>,
    /// The effective catalogue, keyed as in a catalogue file (no `extends`).
    pub catalogue: serde_json::Value,
}

impl Layered {
    /// What `catalogue` shows.
    pub fn view(&self) -> CatalogueView {
        CatalogueView {
            files: self.layers.clone(),
            catalogue: serde_json::to_value(&self.yaml).unwrap_or_default(),
        }
    }
}

/// Read `layers` bottom first (the first one, the embedded catalogue, is never an
/// extension). Each is judged by `validate`.
pub fn layered(layers: &[Layer], validate: SettingsValidator) -> Result<Layered, CatalogueError> {
    // Read from the top down, stopping at the first whole catalogue: what it replaces is
    // not even parsed (a client naming its credentials with `--catalogue` never parses the
    // embedded one).
    let mut read = Vec::with_capacity(layers.len());
    for layer in layers.iter().rev() {
        // `None`: not valid YAML; reading the text again below reports where.
        let yaml: Option<Yaml> = serde_yaml_ng::from_str(layer.text).ok();
        let extends = match yaml
            .as_ref()
            .and_then(Yaml::as_mapping)
            .and_then(|m| m.get(EXTENDS_KEY))
        {
            None => false,
            Some(Yaml::Bool(b)) => *b,
            Some(_) => {
                return Err(CatalogueError {
                    source_name: layer.name.to_string(),
                    location: format!("field `{EXTENDS_KEY}`: "),
                    message: "must be `true` (build on the catalogue below: the embedded \
                              one, then yours) or `false` (replace it)"
                        .to_string(),
                })
            }
        };
        read.push((layer, yaml, extends));
        if !extends {
            break;
        }
    }
    read.reverse();
    // What a whole catalogue replaces is not read at all: it starts at the last one.
    let start = read
        .iter()
        .rposition(|(_, _, extends)| !extends)
        .ok_or_else(|| {
            let name = layers.first().map_or("", |l| l.name);
            CatalogueError {
                source_name: name.to_string(),
                location: format!("field `{EXTENDS_KEY}`: "),
                message: "there is no catalogue below this one to extend".to_string(),
            }
        })?;
    let mut merged: Option<(Yaml, Catalogue)> = None;
    let mut used = Vec::with_capacity(read.len() - start);
    for (layer, yaml, extends) in read.into_iter().skip(start) {
        let error = |field: Option<&str>, message: String| CatalogueError {
            source_name: layer.name.to_string(),
            location: field.map(|f| format!("field `{f}`: ")).unwrap_or_default(),
            message,
        };
        // Each file's text is scanned once: the tree read above is judged as it is (the
        // walk's errors name the layer, the advisor and the field, never a line).
        let (next_yaml, catalogue) = match (&merged, yaml) {
            (_, None) => {
                // Not YAML: the text read again, for the error that says where.
                let catalogue = Catalogue::parse(layer.text, layer.name, validate)?;
                (Yaml::Null, catalogue)
            }
            (Some((below, _)), Some(Yaml::Mapping(over))) if extends => {
                let yaml = merge(below, over, &error)?;
                let catalogue = super::parse::walk(&yaml, layer.name, validate)?;
                (yaml, catalogue)
            }
            (_, Some(mut yaml)) => {
                if let Some(map) = yaml.as_mapping_mut() {
                    map.remove(EXTENDS_KEY);
                }
                let catalogue = super::parse::walk(&yaml, layer.name, validate)?;
                (yaml, catalogue)
            }
        };
        used.push(LayerUsed {
            source: layer.name.to_string(),
            how: if extends { "extends" } else { "replaces" }.to_string(),
        });
        merged = Some((next_yaml, catalogue));
    }
    let (yaml, catalogue) = merged.ok_or_else(|| CatalogueError {
        source_name: String::new(),
        location: String::new(),
        message: "no catalogue layer was given".to_string(),
    })?;
    Ok(Layered {
        catalogue,
        yaml,
        layers: used,
    })
}

/// `below` with `over` laid on it: `mode` and `budget` replaced when given; each advisor
/// of `over` overrides the keys it gives of the entry with its id, or is added.
fn merge(
    below: &Yaml,
    mut over: Mapping,
    error: &dyn Fn(Option<&str>, String) -> CatalogueError,
) -> Result<Yaml, CatalogueError> {
    over.remove(EXTENDS_KEY);
    let mut result = below.as_mapping().cloned().unwrap_or_default();
    let advisors = over.remove("advisors");
    for (key, value) in over {
        result.insert(key, value);
    }
    let Some(advisors) = advisors else {
        return Ok(Yaml::Mapping(result));
    };
    let Yaml::Sequence(advisors) = advisors else {
        return Err(error(
            Some("advisors"),
            "must be a list of advisors: whole new entries, or an `id` of the catalogue \
             below with the keys to change"
                .to_string(),
        ));
    };
    let mut list = match result.remove("advisors") {
        Some(Yaml::Sequence(list)) => list,
        _ => Vec::new(),
    };
    for (position, item) in advisors.into_iter().enumerate() {
        let Yaml::Mapping(item) = item else {
            return Err(error(
                Some(&format!("advisors[{position}]")),
                "must be a mapping with at least `id`".to_string(),
            ));
        };
        let Some(id) = item.get("id").and_then(Yaml::as_str).map(str::to_string) else {
            return Err(error(
                Some(&format!("advisors[{position}].id")),
                "is missing: an extending entry names the `id` it overrides or adds".to_string(),
            ));
        };
        let existing = list
            .iter_mut()
            .find(|entry| entry.get("id").and_then(Yaml::as_str) == Some(id.as_str()));
        match existing {
            Some(Yaml::Mapping(entry)) => {
                for (key, value) in item {
                    entry.insert(key, value);
                }
            }
            _ => list.push(Yaml::Mapping(item)),
        }
    }
    result.insert(Yaml::from("advisors"), Yaml::Sequence(list));
    Ok(Yaml::Mapping(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalogue::{accept_any_settings, EMBEDDED, EMBEDDED_SOURCE};

    fn embedded() -> Layer<'static> {
        Layer {
            name: EMBEDDED_SOURCE,
            text: EMBEDDED,
        }
    }

    fn read(layers: &[Layer]) -> Result<Layered, CatalogueError> {
        layered(layers, &accept_any_settings)
    }

    fn read_with(above: &[Layer]) -> Result<Layered, CatalogueError> {
        let mut layers = vec![embedded()];
        layers.extend_from_slice(above);
        read(&layers)
    }

    #[test]
    fn the_embedded_catalogue_alone_is_itself() {
        let layered = read(&[embedded()]).unwrap();
        assert_eq!(layered.catalogue, Catalogue::embedded());
        assert_eq!(
            layered.layers,
            vec![LayerUsed {
                source: EMBEDDED_SOURCE.into(),
                how: "replaces".into()
            }]
        );
    }

    #[test]
    fn an_extension_overrides_given_fields_and_adds_new_ids() {
        let base = Catalogue::embedded();
        let first = base.advisors[0].clone();
        let user = format!(
            "extends: true\nmode: fast\nadvisors:\n  - id: {}\n    title: Renamed\n  \
             - id: house\n    title: House\n    transport: process\n    adapter: process\n    \
             executable: house-review\n    capabilities: [code_review]\n",
            first.id
        );
        let layered = read(&[
            embedded(),
            Layer {
                name: "/home/u/.config/advisord/advisors.yaml",
                text: &user,
            },
        ])
        .unwrap();
        let got = &layered.catalogue;
        assert_eq!(got.mode, Some(crate::core::records::Mode::Fast));
        assert_eq!(got.advisors.len(), base.advisors.len() + 1);
        assert_eq!(got.advisors[0].title, "Renamed");
        // Everything not given stays as it was below.
        assert_eq!(got.advisors[0].adapter, first.adapter);
        assert_eq!(got.advisors[0].settings, first.settings);
        assert_eq!(got.advisors.last().unwrap().id, "house");
        assert_eq!(layered.layers[1].how, "extends");
        // The merged YAML reads back as the same catalogue, with no `extends`.
        let text = serde_yaml_ng::to_string(&layered.yaml).unwrap();
        assert!(!text.contains("extends"));
        let again = Catalogue::parse(&text, "copy", &accept_any_settings).unwrap();
        assert_eq!(&again, got);
    }

    #[test]
    fn what_a_whole_file_replaces_is_not_even_parsed() {
        // Below a whole catalogue, a file whose `extends` is wrong (an error on its own)
        // and one that is not YAML do not matter: they are never read.
        let whole = "advisors:\n  - id: only\n    title: Only\n    transport: process\n    \
                     adapter: process\n    executable: only-bin\n    capabilities: [debugging]\n";
        let layered = read_with(&[
            Layer {
                name: "wrong.yaml",
                text: "extends: yes please\nadvisors: []\n",
            },
            Layer {
                name: "broken.yaml",
                text: "advisors: [\n",
            },
            Layer {
                name: "whole.yaml",
                text: whole,
            },
        ])
        .expect("only the whole catalogue is read");
        assert_eq!(layered.catalogue.advisors.len(), 1);
        assert_eq!(
            layered.layers,
            vec![LayerUsed {
                source: "whole.yaml".into(),
                how: "replaces".into()
            }]
        );
    }

    #[test]
    fn a_whole_file_replaces_and_a_later_extension_builds_on_it() {
        let user = "advisors:\n  - id: only\n    title: Only\n    transport: process\n    \
                    adapter: process\n    executable: only-bin\n    capabilities: [debugging]\n";
        let project = "extends: true\nadvisors:\n  - id: only\n    executable: other-bin\n";
        let layered = read(&[
            embedded(),
            Layer {
                name: "user.yaml",
                text: user,
            },
            Layer {
                name: "project.yaml",
                text: project,
            },
        ])
        .unwrap();
        let ids: Vec<&str> = layered
            .catalogue
            .advisors
            .iter()
            .map(|a| a.id.as_str())
            .collect();
        assert_eq!(ids, ["only"]);
        assert_eq!(
            layered.catalogue.advisors[0].executable.as_deref(),
            Some("other-bin")
        );
        // What a whole catalogue replaced was not read.
        let read: Vec<(&str, &str)> = layered
            .layers
            .iter()
            .map(|l| (l.source.as_str(), l.how.as_str()))
            .collect();
        assert_eq!(
            read,
            [("user.yaml", "replaces"), ("project.yaml", "extends")]
        );
        // Nor judged: a catalogue below a whole one may be anything.
        let layered = read_with(&[
            Layer {
                name: "user.yaml",
                text: "advisors: [not, a, catalogue]",
            },
            Layer {
                name: "project.yaml",
                text: user,
            },
        ]);
        assert_eq!(layered.unwrap().catalogue.advisors[0].id, "only");
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let check = |text: &str, fragments: &[&str]| {
            let err = read(&[
                embedded(),
                Layer {
                    name: "mine.yaml",
                    text,
                },
            ])
            .expect_err(text)
            .to_string();
            for fragment in fragments {
                assert!(err.contains(fragment), "`{fragment}` not in `{err}`");
            }
        };
        let first = Catalogue::embedded().advisors[0].id.clone();
        check(
            "extends: yes please\nadvisors: []\n",
            &["mine.yaml", "field `extends`", "`true`"],
        );
        check(
            "extends: true\nadvisors: 3\n",
            &["mine.yaml", "field `advisors`"],
        );
        check(
            "extends: true\nadvisors:\n  - title: no id\n",
            &["mine.yaml", "field `advisors[0].id`"],
        );
        check(
            &format!("extends: true\nadvisors:\n  - id: {first}\n    transport: pigeon\n"),
            &["mine.yaml", &format!("advisor `{first}`"), "transport"],
        );
        check(
            "extends: true\nadvisors:\n  - id: new-one\n    title: T\n",
            &["mine.yaml", "new-one"],
        );
        let err = read(&[Layer {
            name: "first.yaml",
            text: "extends: true\nadvisors: []\n",
        }])
        .expect_err("nothing below")
        .to_string();
        assert!(err.contains("no catalogue below"), "{err}");
    }

    /// Each layer's text is scanned once and its tree judged: a file that is not YAML
    /// still says where, and a whole file (with or without `extends: false`) reads as the
    /// same file parsed on its own.
    #[test]
    fn a_layer_read_once_says_what_its_text_says() {
        let err = read_with(&[Layer {
            name: "broken.yaml",
            text: "advisors:\n  - id: a\n   title: [unclosed\n",
        }])
        .expect_err("not YAML")
        .to_string();
        for fragment in ["broken.yaml", "is not valid YAML", "line "] {
            assert!(err.contains(fragment), "`{fragment}` not in `{err}`");
        }
        let whole = "mode: strict\nadvisors:\n  - id: solo\n    title: Solo\n    \
                     transport: http\n    adapter: some-http\n    \
                     references: { provider: p, vendor: v, model: m }\n    \
                     capabilities: [independent_reasoning]\n    \
                     endpoint: http://127.0.0.1:9\n    model: m\n";
        let alone = Catalogue::parse(whole, "whole.yaml", &accept_any_settings).unwrap();
        for text in [whole.to_string(), format!("extends: false\n{whole}")] {
            let layered = read_with(&[Layer {
                name: "whole.yaml",
                text: &text,
            }])
            .unwrap();
            assert_eq!(layered.catalogue, alone, "{text}");
            assert!(
                layered
                    .yaml
                    .as_mapping()
                    .is_some_and(|m| !m.contains_key(EXTENDS_KEY)),
                "the effective file never says `extends`"
            );
        }
    }
}
