//! The walk over the YAML tree. It reads a `serde_yaml_ng::Value` by hand rather than
//! deriving, so that each error can name the advisor and the field.

use super::entry::advisor;
use super::error::{At, CatalogueError};
use super::suggest::did_you_mean;
use super::yaml::{describe, quoted_list, scalar_text};
use super::{Catalogue, SettingsValidator};
use crate::core::records::Mode;
use serde_yaml_ng::Value as Yaml;
use std::collections::BTreeSet;

/// The keys a catalogue file may hold at its top level.
pub(super) const TOP_LEVEL_KEYS: &[&str] = &["advisors", "mode", "budget"];

pub(super) fn parse(
    text: &str,
    source_name: &str,
    validate_settings: SettingsValidator,
) -> Result<Catalogue, CatalogueError> {
    let root: Yaml = serde_yaml_ng::from_str(text).map_err(|e| {
        let mut message = format!("is not valid YAML: {e}");
        if let Some(location) = e.location().filter(|_| !message.contains(" line ")) {
            message.push_str(&format!(" at line {}", location.line()));
        }
        message.push_str("; fix the syntax");
        At {
            source_name,
            advisor: String::new(),
        }
        .error(None, message)
    })?;
    walk(&root, source_name, validate_settings)
}

/// Judge a catalogue already read into its YAML tree: what [`parse`] does once the text
/// is valid YAML (the layers hand over the tree they read, so no file is scanned twice).
pub(super) fn walk(
    root: &Yaml,
    source_name: &str,
    validate_settings: SettingsValidator,
) -> Result<Catalogue, CatalogueError> {
    let top = At {
        source_name,
        advisor: String::new(),
    };
    let Yaml::Mapping(root) = root else {
        return Err(top.error(
            None,
            format!(
                "a catalogue is a mapping with an `advisors:` list and an optional \
                     `mode:`, but this file holds {}",
                describe(root)
            ),
        ));
    };
    // A mapping with none of a catalogue's keys is some other file (a config, a secret):
    // none of its text is quoted back.
    let like_a_catalogue = root.keys().any(|key| {
        let name = key.as_str().unwrap_or_default();
        TOP_LEVEL_KEYS.contains(&name) || did_you_mean(name, TOP_LEVEL_KEYS).is_some()
    });
    if !like_a_catalogue {
        return Err(top.error(
            None,
            "has none of a catalogue's keys (`advisors:`, `mode:`), so it is not an advisor \
             catalogue (its content is not shown); name a catalogue file"
                .to_string(),
        ));
    }
    for key in root.keys() {
        let name = key.as_str().unwrap_or_default();
        if !TOP_LEVEL_KEYS.contains(&name) {
            let hint = did_you_mean(name, TOP_LEVEL_KEYS)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            return Err(top.error(
                None,
                format!(
                    "unknown top-level key {}; {hint}accepted: {}",
                    scalar_text(key),
                    quoted_list(TOP_LEVEL_KEYS)
                ),
            ));
        }
    }
    let mode = match root.get("mode") {
        None | Some(Yaml::Null) => None,
        Some(value) => {
            let accepted: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
            let parsed = value.as_str().and_then(Mode::parse);
            Some(parsed.ok_or_else(|| {
                top.error(
                    Some("mode"),
                    format!(
                        "unknown mode {}; accepted: {}",
                        scalar_text(value),
                        quoted_list(&accepted)
                    ),
                )
            })?)
        }
    };
    let list = match root.get("advisors") {
        Some(Yaml::Sequence(list)) => list,
        Some(other) => {
            return Err(top.error(
                Some("advisors"),
                format!("must be a list of advisors, but it is {}", describe(other)),
            ))
        }
        None => {
            return Err(top.error(
                None,
                "no `advisors:` list; a catalogue lists its advisors under `advisors:` \
                     (an empty list `advisors: []` is accepted)",
            ))
        }
    };
    let budget = super::price::limits(root.get("budget"), &top)?;
    let mut currency = None;
    let mut advisors = Vec::with_capacity(list.len());
    let mut seen = BTreeSet::new();
    for (position, item) in list.iter().enumerate() {
        let entry = advisor(item, position, source_name, &mut seen)?;
        let at = At {
            source_name,
            advisor: format!("advisor `{}`", entry.id),
        };
        super::price::same_currency(entry.price.as_ref(), &mut currency, &entry.id, &at)?;
        validate_settings(&entry).map_err(|(field, message)| at.error(Some(&field), message))?;
        advisors.push(entry);
    }
    Ok(Catalogue {
        mode,
        advisors,
        budget,
    })
}
