//! YAML values as messages name them, and adapter settings as JSON.

use super::error::{At, CatalogueError};
use serde_yaml_ng::Value as Yaml;

pub(super) fn describe(value: &Yaml) -> &'static str {
    match value {
        Yaml::Null => "nothing",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

pub(super) fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A scalar as written, for messages: `` `x` `` for strings, its kind otherwise.
pub(super) fn scalar_text(value: &Yaml) -> String {
    match value {
        // A bounded excerpt: a catalogue's own words, never a page of a file.
        Yaml::String(s) if s.chars().count() > 60 => {
            format!("`{}...`", s.chars().take(60).collect::<String>())
        }
        Yaml::String(s) => format!("`{s}`"),
        Yaml::Bool(b) => format!("`{b}`"),
        Yaml::Number(n) => format!("`{n}`"),
        other => describe(other).to_string(),
    }
}

/// An adapter setting as JSON, so that adapters need not know YAML.
pub(super) fn to_json(
    value: &Yaml,
    field: &str,
    at: &At,
) -> Result<serde_json::Value, CatalogueError> {
    use serde_json::Value as Json;
    Ok(match value {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(*b),
        Yaml::Number(n) => {
            if let Some(u) = n.as_u64() {
                Json::from(u)
            } else if let Some(i) = n.as_i64() {
                Json::from(i)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f)
                    .map(Json::Number)
                    .ok_or_else(|| at.error(Some(field), format!("`{n}` is not a finite number")))?
            }
        }
        Yaml::String(s) => Json::String(s.clone()),
        Yaml::Sequence(items) => Json::Array(
            items
                .iter()
                .map(|item| to_json(item, field, at))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (key, item) in map {
                let key = match key {
                    Yaml::String(s) => s.clone(),
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => {
                        return Err(at.error(
                            Some(field),
                            format!("a key is {}; use plain names as keys", describe(other)),
                        ))
                    }
                };
                out.insert(key, to_json(item, field, at)?);
            }
            Json::Object(out)
        }
        Yaml::Tagged(tagged) => {
            return Err(at.error(
                Some(field),
                format!(
                    "YAML tags such as `{}` are not accepted; write the plain value",
                    tagged.tag
                ),
            ))
        }
    })
}
