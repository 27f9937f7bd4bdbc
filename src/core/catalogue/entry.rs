//! One advisor's entry: its common fields validated, the rest kept as adapter settings.

use super::error::{At, CatalogueError};
use super::suggest::did_you_mean;
use super::yaml::{describe, quoted_list, scalar_text, to_json};
use super::{
    default_max_concurrent, AdvisorEntry, References, Transport, CAPABILITIES, COMMON_KEYS,
};
use serde_yaml_ng::Value as Yaml;
use std::collections::BTreeSet;

/// The transports an advisor may name, as written in the file.
pub(super) const TRANSPORTS: &[&str] = &["process", "http", "mesh"];

/// The keys a `references` mapping may hold.
pub(super) const REFERENCE_KEYS: &[&str] = &["provider", "vendor", "model"];

pub(super) fn is_valid_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

pub(super) fn is_valid_variable(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

pub(super) fn advisor(
    item: &Yaml,
    position: usize,
    source_name: &str,
    seen: &mut BTreeSet<String>,
) -> Result<AdvisorEntry, CatalogueError> {
    let mut at = At {
        source_name,
        advisor: format!("advisors[{position}]"),
    };
    let Yaml::Mapping(map) = item else {
        return Err(at.error(
            None,
            format!(
                "an advisor is a mapping with `id`, `title`, `transport`, `adapter` and \
                     `capabilities`, but this is {}",
                describe(item)
            ),
        ));
    };
    let id = match map.get("id") {
        None | Some(Yaml::Null) => {
            return Err(at.error(
                Some("id"),
                "is missing; every advisor needs an `id` such as `my-advisor`",
            ))
        }
        Some(Yaml::String(id)) if is_valid_id(id) => id.clone(),
        Some(other) => {
            return Err(at.error(
                Some("id"),
                format!(
                    "{} is not an accepted id; an id is a lowercase letter or digit \
                         followed by lowercase letters, digits, `.`, `_` or `-`",
                    scalar_text(other)
                ),
            ))
        }
    };
    if !seen.insert(id.clone()) {
        return Err(at.error(
            Some("id"),
            format!("`{id}` is declared twice; give each advisor its own id"),
        ));
    }
    at.advisor = format!("advisor `{id}`");
    let fields = Fields { map, at: &at };

    let title = fields.required_string("title", "a short human title")?;
    let transport_text = fields.required_string("transport", "one of process, http, mesh")?;
    let transport = match transport_text.as_str() {
        "process" => Transport::Process,
        "http" => Transport::Http,
        "mesh" => Transport::Mesh,
        other => {
            let hint = did_you_mean(other, TRANSPORTS)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            return Err(at.error(
                Some("transport"),
                format!(
                    "unknown transport `{other}`; {hint}accepted: {}",
                    quoted_list(TRANSPORTS)
                ),
            ));
        }
    };
    let adapter = fields.required_string("adapter", "the name of the adapter that reaches it")?;
    let references = fields.references()?;
    let executable = fields.optional_string("executable")?;
    let credential = fields.optional_string("credential")?;
    if let Some(variable) = &credential {
        if !is_valid_variable(variable) {
            return Err(at.error(
                Some("credential"),
                // Never echoed: a value put here by mistake may be the secret itself.
                "is not an environment variable name; name the variable (letters, digits \
                     and `_`, not starting with a digit), never its value",
            ));
        }
    }
    let capabilities = fields.capabilities()?;
    let local = match map.get("local") {
        None | Some(Yaml::Null) => false,
        Some(Yaml::Bool(b)) => *b,
        Some(other) => {
            return Err(at.error(
                Some("local"),
                format!(
                    "must be `true` or `false`, but it is {}",
                    scalar_text(other)
                ),
            ))
        }
    };
    let max_concurrent = match map.get("max_concurrent") {
        None | Some(Yaml::Null) => default_max_concurrent(),
        Some(value) => match value.as_u64().map(u32::try_from) {
            Some(Ok(n)) if n > 0 => n,
            _ => {
                return Err(at.error(
                    Some("max_concurrent"),
                    format!(
                        "{} is not accepted; give a whole number of at least 1 \
                             (the default is 2)",
                        scalar_text(value)
                    ),
                ))
            }
        },
    };
    if transport == Transport::Process && executable.is_none() {
        return Err(at.error(
            Some("executable"),
            "is missing; a `process` advisor names the executable to run \
                 (a name on PATH or an absolute path)",
        ));
    }
    let price = super::price::price(map.get("price"), &at)?;
    let budget = super::price::limits(map.get("budget"), &at)?;
    let mut settings = serde_json::Map::new();
    for (key, value) in map {
        let Some(key) = key.as_str() else {
            return Err(at.error(
                None,
                format!("a key is {}; keys are names such as `model`", describe(key)),
            ));
        };
        if COMMON_KEYS.contains(&key) {
            continue;
        }
        settings.insert(key.to_string(), to_json(value, key, &at)?);
    }
    Ok(AdvisorEntry {
        id,
        title,
        transport,
        adapter,
        references,
        executable,
        credential,
        capabilities,
        local,
        max_concurrent,
        price,
        budget,
        settings,
    })
}

/// The common fields of one advisor's mapping.
pub(super) struct Fields<'m> {
    map: &'m serde_yaml_ng::Mapping,
    at: &'m At<'m>,
}

impl Fields<'_> {
    pub(super) fn required_string(
        &self,
        field: &str,
        what: &str,
    ) -> Result<String, CatalogueError> {
        match self.map.get(field) {
            Some(Yaml::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            None | Some(Yaml::Null) => Err(self
                .at
                .error(Some(field), format!("is missing; give {what}"))),
            Some(other) => Err(self.at.error(
                Some(field),
                format!(
                    "must be a non-empty string ({what}), but it is {}",
                    scalar_text(other)
                ),
            )),
        }
    }

    pub(super) fn optional_string(&self, field: &str) -> Result<Option<String>, CatalogueError> {
        match self.map.get(field) {
            None | Some(Yaml::Null) => Ok(None),
            Some(Yaml::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(self.at.error(
                Some(field),
                format!(
                    "must be a non-empty string, but it is {}",
                    scalar_text(other)
                ),
            )),
        }
    }

    pub(super) fn references(&self) -> Result<References, CatalogueError> {
        let map = match self.map.get("references") {
            None | Some(Yaml::Null) => return Ok(References::default()),
            Some(Yaml::Mapping(map)) => map,
            Some(other) => {
                return Err(self.at.error(
                    Some("references"),
                    format!(
                        "must be a mapping {{provider, vendor, model}}, but it is {}",
                        describe(other)
                    ),
                ))
            }
        };
        let mut references = References::default();
        for (key, value) in map {
            let name = key.as_str().unwrap_or_default();
            let slot = match name {
                "provider" => &mut references.provider,
                "vendor" => &mut references.vendor,
                "model" => &mut references.model,
                _ => {
                    let hint = did_you_mean(name, REFERENCE_KEYS)
                        .map(|s| format!("did you mean `{s}`? "))
                        .unwrap_or_default();
                    return Err(self.at.error(
                        Some("references"),
                        format!(
                            "unknown key {}; {hint}accepted: {}",
                            scalar_text(key),
                            quoted_list(REFERENCE_KEYS)
                        ),
                    ));
                }
            };
            *slot = match value {
                Yaml::Null => None,
                Yaml::String(s) => Some(s.clone()),
                other => {
                    return Err(self.at.error(
                        Some(&format!("references.{name}")),
                        format!("must be a string, but it is {}", scalar_text(other)),
                    ))
                }
            };
        }
        Ok(references)
    }

    pub(super) fn capabilities(&self) -> Result<Vec<String>, CatalogueError> {
        let field = Some("capabilities");
        let accepted = quoted_list(CAPABILITIES);
        let list = match self.map.get("capabilities") {
            Some(Yaml::Sequence(list)) => list,
            None | Some(Yaml::Null) => {
                return Err(self.at.error(
                    field,
                    format!("is missing; list what the advisor offers, from: {accepted}"),
                ))
            }
            Some(other) => {
                return Err(self.at.error(
                    field,
                    format!(
                        "must be a list of capabilities, but it is {}; accepted: {accepted}",
                        describe(other)
                    ),
                ))
            }
        };
        if list.is_empty() {
            return Err(self.at.error(
                field,
                format!("is empty; an advisor offers at least one of: {accepted}"),
            ));
        }
        let mut capabilities: Vec<String> = Vec::with_capacity(list.len());
        for item in list {
            let name = match item {
                Yaml::String(s) if CAPABILITIES.contains(&s.as_str()) => s.clone(),
                other => {
                    let hint = other
                        .as_str()
                        .and_then(|s| did_you_mean(s, CAPABILITIES))
                        .map(|s| format!("did you mean `{s}`? "))
                        .unwrap_or_default();
                    return Err(self.at.error(
                        field,
                        format!(
                            "unknown capability {}; {hint}accepted: {accepted}",
                            scalar_text(other)
                        ),
                    ));
                }
            };
            if capabilities.contains(&name) {
                return Err(self.at.error(
                    field,
                    format!("`{name}` is listed twice; list each capability once"),
                ));
            }
            capabilities.push(name);
        }
        Ok(capabilities)
    }
}
