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

/// The keys every advisor shares; every other key of an entry is the adapter's setting.
/// (The adapters crate keeps the same list for reading entries without the core; a test in
/// `context` holds the two equal.)
pub const COMMON_KEYS: &[&str] = &[
    "id",
    "title",
    "transport",
    "adapter",
    "references",
    "executable",
    "credential",
    "capabilities",
    "local",
    "max_concurrent",
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

/// The source name used in errors about the embedded catalogue.
pub const EMBEDDED_SOURCE: &str = "embedded share/advisors.yaml";

/// The keys a catalogue file may hold at its top level.
const TOP_LEVEL_KEYS: &[&str] = &["advisors", "mode"];

/// The transports an advisor may name, as written in the file.
const TRANSPORTS: &[&str] = &["process", "http", "mesh"];

/// The keys a `references` mapping may hold.
const REFERENCE_KEYS: &[&str] = &["provider", "vendor", "model"];

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
        // A unit test parses EMBEDDED, so this cannot fail in a released binary.
        Catalogue::parse(EMBEDDED, EMBEDDED_SOURCE, &accept_any_settings)
            .unwrap_or_else(|e| panic!("the embedded catalogue must be valid: {e}"))
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

/// The number of single-character edits that turn `a` into `b` (Levenshtein).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// The accepted word nearest to `word`, when it is near enough to be a likely typo.
pub fn did_you_mean<'w>(word: &str, accepted: &[&'w str]) -> Option<&'w str> {
    accepted
        .iter()
        .map(|candidate| (edit_distance(word, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= 2.max(candidate.chars().count() / 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

mod parse {
    //! The walk over the YAML tree. It reads a `serde_yaml_ng::Value` by hand rather
    //! than deriving, so that each error can name the advisor and the field.

    use super::*;
    use serde_yaml_ng::Value as Yaml;
    use std::collections::BTreeSet;

    /// Where an error is, inside the file.
    struct At<'s> {
        source_name: &'s str,
        /// `advisor `x`` or `advisors[3]`, empty at top level.
        advisor: String,
    }

    impl At<'_> {
        fn error(&self, field: Option<&str>, message: impl Into<String>) -> CatalogueError {
            let location = match (self.advisor.is_empty(), field) {
                (true, None) => String::new(),
                (true, Some(field)) => format!("field `{field}`: "),
                (false, None) => format!("{}: ", self.advisor),
                (false, Some(field)) => format!("{}, field `{field}`: ", self.advisor),
            };
            CatalogueError {
                source_name: self.source_name.to_string(),
                location,
                message: one_line(&message.into()),
            }
        }
    }

    /// Messages are one line even when a validator's are not.
    fn one_line(message: &str) -> String {
        message.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn describe(value: &Yaml) -> &'static str {
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

    fn quoted_list(items: &[&str]) -> String {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn parse(
        text: &str,
        source_name: &str,
        validate_settings: SettingsValidator,
    ) -> Result<Catalogue, CatalogueError> {
        let top = At {
            source_name,
            advisor: String::new(),
        };
        let root: Yaml = serde_yaml_ng::from_str(text).map_err(|e| {
            let mut message = format!("is not valid YAML: {e}");
            if let Some(location) = e.location().filter(|_| !message.contains(" line ")) {
                message.push_str(&format!(" at line {}", location.line()));
            }
            message.push_str("; fix the syntax");
            top.error(None, message)
        })?;
        let Yaml::Mapping(root) = root else {
            return Err(top.error(
                None,
                format!(
                    "a catalogue is a mapping with an `advisors:` list and an optional \
                     `mode:`, but this file holds {}",
                    describe(&root)
                ),
            ));
        };
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
        let mut advisors = Vec::with_capacity(list.len());
        let mut seen = BTreeSet::new();
        for (position, item) in list.iter().enumerate() {
            let entry = advisor(item, position, source_name, &mut seen)?;
            let at = At {
                source_name,
                advisor: format!("advisor `{}`", entry.id),
            };
            validate_settings(&entry)
                .map_err(|(field, message)| at.error(Some(&field), message))?;
            advisors.push(entry);
        }
        Ok(Catalogue { mode, advisors })
    }

    /// A scalar as written, for messages: `` `x` `` for strings, its kind otherwise.
    fn scalar_text(value: &Yaml) -> String {
        match value {
            Yaml::String(s) => format!("`{s}`"),
            Yaml::Bool(b) => format!("`{b}`"),
            Yaml::Number(n) => format!("`{n}`"),
            other => describe(other).to_string(),
        }
    }

    fn is_valid_id(id: &str) -> bool {
        let mut bytes = id.bytes();
        matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit())
            && bytes.all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            })
    }

    fn is_valid_variable(name: &str) -> bool {
        let mut bytes = name.bytes();
        matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
    }

    fn advisor(
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
        let adapter =
            fields.required_string("adapter", "the name of the adapter that reaches it")?;
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
            settings,
        })
    }

    use super::COMMON_KEYS;

    /// The common fields of one advisor's mapping.
    struct Fields<'m> {
        map: &'m serde_yaml_ng::Mapping,
        at: &'m At<'m>,
    }

    impl Fields<'_> {
        fn required_string(&self, field: &str, what: &str) -> Result<String, CatalogueError> {
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

        fn optional_string(&self, field: &str) -> Result<Option<String>, CatalogueError> {
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

        fn references(&self) -> Result<References, CatalogueError> {
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

        fn capabilities(&self) -> Result<Vec<String>, CatalogueError> {
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

    /// An adapter setting as JSON, so that adapters need not know YAML.
    fn to_json(value: &Yaml, field: &str, at: &At) -> Result<serde_json::Value, CatalogueError> {
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
                        .ok_or_else(|| {
                            at.error(Some(field), format!("`{n}` is not a finite number"))
                        })?
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid advisor entry, indented to sit under `advisors:`.
    const GOOD: &str = "
  - id: alpha
    title: Alpha
    transport: process
    adapter: process
    executable: alpha-bin
    capabilities: [independent_reasoning, code_review]
";

    fn parse(text: &str) -> Result<Catalogue, CatalogueError> {
        Catalogue::parse(text, "test.yaml", &accept_any_settings)
    }

    /// One refused catalogue: the error must name the place and say what is wrong.
    fn check(case: &str, text: &str, location: &str, fragments: &[&str]) {
        let error = match parse(text) {
            Ok(c) => panic!("{case}: accepted {c:?}"),
            Err(e) => e,
        };
        assert_eq!(error.source_name, "test.yaml", "{case}");
        assert_eq!(error.location, location, "{case}: {error}");
        let line = error.to_string();
        assert!(line.starts_with("test.yaml: "), "{case}: {line}");
        assert!(!line.contains('\n'), "{case}: not one line: {line}");
        assert!(
            !line.contains("sk-123"),
            "{case}: echoes a would-be secret: {line}"
        );
        for fragment in fragments {
            assert!(
                line.contains(fragment),
                "{case}: `{fragment}` not in: {line}"
            );
        }
    }

    /// `GOOD` with `line` appended to its mapping.
    fn good_with(line: &str) -> String {
        format!("advisors:{GOOD}    {line}\n")
    }

    /// A second entry under `advisors:` built from `fields` (indented by the helper).
    fn entry(fields: &[&str]) -> String {
        let mut out = String::from("\n  - ");
        out.push_str(&fields.join("\n    "));
        out.push('\n');
        out
    }

    #[test]
    fn refusals_name_file_advisor_and_field() {
        let minimal = |extra: &[&str]| {
            let mut fields = vec![
                "id: beta",
                "title: Beta",
                "transport: http",
                "adapter: some-http",
                "capabilities: [independent_reasoning]",
            ];
            fields.extend_from_slice(extra);
            entry(&fields)
        };
        let without = |field: &str| {
            let fields: Vec<&str> = [
                "id: beta",
                "title: Beta",
                "transport: http",
                "adapter: some-http",
                "capabilities: [independent_reasoning]",
            ]
            .into_iter()
            .filter(|f| !f.starts_with(field))
            .collect();
            format!("advisors:{GOOD}{}", entry(&fields))
        };
        let cases: Vec<(&str, String, &str, Vec<&str>)> = vec![
            (
                "not a mapping",
                "- a\n- b\n".into(),
                "",
                vec!["a mapping", "a list"],
            ),
            ("empty file", "".into(), "", vec!["`advisors:`"]),
            (
                "no advisors",
                "mode: fast\n".into(),
                "",
                vec!["no `advisors:` list"],
            ),
            (
                "top-level key that is not a name",
                format!("advisors:{GOOD}7: x\n"),
                "",
                vec!["unknown top-level key `7`; accepted: `advisors`, `mode`"],
            ),
            (
                "advisors not a list",
                "advisors: {a: 1}\n".into(),
                "field `advisors`: ",
                vec!["a list of advisors"],
            ),
            (
                "unknown top-level key",
                format!("advisor:{GOOD}"),
                "",
                vec![
                    "unknown top-level key `advisor`",
                    "did you mean `advisors`?",
                    "`mode`",
                ],
            ),
            (
                "unknown mode",
                format!("mode: turbo\nadvisors:{GOOD}"),
                "field `mode`: ",
                vec![
                    "unknown mode `turbo`",
                    "`ci`",
                    "`fast`",
                    "`standard`",
                    "`strict`",
                ],
            ),
            (
                "entry not a mapping",
                format!("advisors:{GOOD}  - just-a-name\n"),
                "advisors[1]: ",
                vec!["a mapping with `id`", "a string"],
            ),
            (
                "missing id",
                without("id:"),
                "advisors[1], field `id`: ",
                vec!["missing"],
            ),
            (
                "missing title",
                without("title:"),
                "advisor `beta`, field `title`: ",
                vec!["missing"],
            ),
            (
                "missing transport",
                without("transport:"),
                "advisor `beta`, field `transport`: ",
                vec!["missing", "process, http, mesh"],
            ),
            (
                "missing adapter",
                without("adapter:"),
                "advisor `beta`, field `adapter`: ",
                vec!["missing"],
            ),
            (
                "missing capabilities",
                without("capabilities:"),
                "advisor `beta`, field `capabilities`: ",
                vec!["missing", "`independent_reasoning`"],
            ),
            (
                "duplicate id",
                format!("advisors:{GOOD}{GOOD}"),
                "advisors[1], field `id`: ",
                vec!["`alpha` is declared twice"],
            ),
            (
                "id with capitals",
                format!("advisors:{}", entry(&["id: Beta", "title: B"])),
                "advisors[0], field `id`: ",
                vec!["`Beta` is not an accepted id", "lowercase"],
            ),
            (
                "id starting with a dash",
                format!("advisors:{}", entry(&["id: -beta"])),
                "advisors[0], field `id`: ",
                vec!["`-beta`"],
            ),
            (
                "id not a string",
                format!("advisors:{}", entry(&["id: [a]"])),
                "advisors[0], field `id`: ",
                vec!["a list"],
            ),
            (
                "unknown transport",
                format!(
                    "advisors:{}",
                    minimal(&[]).replace("transport: http", "transport: htp")
                ),
                "advisor `beta`, field `transport`: ",
                vec![
                    "unknown transport `htp`",
                    "did you mean `http`?",
                    "`process`, `http`, `mesh`",
                ],
            ),
            (
                "unknown capability",
                format!(
                    "advisors:{}",
                    minimal(&[]).replace("[independent_reasoning]", "[code_reveiw]")
                ),
                "advisor `beta`, field `capabilities`: ",
                vec![
                    "unknown capability `code_reveiw`",
                    "did you mean `code_review`?",
                    "`security_review`",
                ],
            ),
            (
                "capability far from any",
                format!(
                    "advisors:{}",
                    minimal(&[]).replace("[independent_reasoning]", "[poetry]")
                ),
                "advisor `beta`, field `capabilities`: ",
                vec!["unknown capability `poetry`; accepted:"],
            ),
            (
                "capability listed twice",
                format!(
                    "advisors:{}",
                    minimal(&[]).replace("[independent_reasoning]", "[debugging, debugging]")
                ),
                "advisor `beta`, field `capabilities`: ",
                vec!["`debugging` is listed twice"],
            ),
            (
                "empty capabilities",
                format!(
                    "advisors:{}",
                    minimal(&[]).replace("[independent_reasoning]", "[]")
                ),
                "advisor `beta`, field `capabilities`: ",
                vec!["is empty"],
            ),
            (
                "max_concurrent zero",
                good_with("max_concurrent: 0"),
                "advisor `alpha`, field `max_concurrent`: ",
                vec!["`0` is not accepted", "at least 1"],
            ),
            (
                "max_concurrent not a number",
                good_with("max_concurrent: many"),
                "advisor `alpha`, field `max_concurrent`: ",
                vec!["`many`"],
            ),
            (
                "local not a boolean",
                good_with("local: sometimes"),
                "advisor `alpha`, field `local`: ",
                vec!["`true` or `false`"],
            ),
            (
                "references not a mapping",
                good_with("references: somebody"),
                "advisor `alpha`, field `references`: ",
                vec!["must be a mapping {provider, vendor, model}"],
            ),
            (
                "references with an unknown key",
                good_with("references: { provder: x }"),
                "advisor `alpha`, field `references`: ",
                vec!["unknown key `provder`", "did you mean `provider`?"],
            ),
            (
                "process without executable",
                format!(
                    "advisors:{}",
                    GOOD.replace("    executable: alpha-bin\n", "")
                ),
                "advisor `alpha`, field `executable`: ",
                vec!["is missing", "`process` advisor"],
            ),
            (
                "credential that is a value, not a name",
                good_with("credential: sk-123"),
                "advisor `alpha`, field `credential`: ",
                vec!["is not an environment variable name"],
            ),
            (
                "yaml syntax error",
                "advisors:\n  - id: a\n    title: [unclosed\n  - id: b\n".into(),
                "",
                vec!["is not valid YAML", "line "],
            ),
            (
                "yaml duplicate key",
                format!("advisors:{GOOD}    title: Again\n"),
                "",
                vec!["is not valid YAML", "duplicate"],
            ),
        ];
        for (case, text, location, fragments) in &cases {
            check(case, text, location, fragments);
        }
    }

    #[test]
    fn the_settings_validator_judges_adapter_keys() {
        let validator = |entry: &AdvisorEntry| match entry.settings.keys().find(|k| *k != "args") {
            Some(key) => Err((
                key.clone(),
                format!("unknown key `{key}`; accepted: `args`"),
            )),
            None => Ok(()),
        };
        let text = good_with("args: [-p]");
        let catalogue = Catalogue::parse(&text, "test.yaml", &validator).unwrap();
        assert_eq!(
            catalogue.advisors[0].settings["args"],
            serde_json::json!(["-p"])
        );
        let error =
            Catalogue::parse(&good_with("capabilites: [x]"), "test.yaml", &validator).unwrap_err();
        assert_eq!(
            error.to_string(),
            "test.yaml: advisor `alpha`, field `capabilites`: unknown key `capabilites`; \
             accepted: `args`"
        );
    }

    #[test]
    fn a_valid_catalogue_keeps_order_defaults_and_settings() {
        let text = format!(
            "mode: strict\nadvisors:{GOOD}{}",
            entry(&[
                "id: beta.2",
                "title: Beta",
                "transport: http",
                "adapter: some-http",
                "references: { provider: p, vendor: v, model: m }",
                "credential: BETA_TOKEN",
                "capabilities: [architecture]",
                "local: true",
                "max_concurrent: 1",
                "endpoint: http://127.0.0.1:1",
                "retries: 3",
                "extra: { nested: [1, 2.5, true, null] }",
            ])
        );
        let catalogue = parse(&text).unwrap();
        assert_eq!(catalogue.mode, Some(Mode::Strict));
        let ids: Vec<&str> = catalogue.advisors.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["alpha", "beta.2"]);
        let alpha = &catalogue.advisors[0];
        assert_eq!(alpha.max_concurrent, 2);
        assert!(!alpha.local);
        assert!(alpha.settings.is_empty());
        let beta = catalogue.get("beta.2").unwrap();
        assert_eq!(beta.transport, Transport::Http);
        assert_eq!(beta.references.vendor.as_deref(), Some("v"));
        assert_eq!(beta.max_concurrent, 1);
        assert!(beta.local);
        assert_eq!(
            serde_json::Value::Object(beta.settings.clone()),
            serde_json::json!({
                "endpoint": "http://127.0.0.1:1",
                "retries": 3,
                "extra": {"nested": [1, 2.5, true, null]}
            })
        );
        assert_eq!(
            catalogue.credential_vars().into_iter().collect::<Vec<_>>(),
            ["BETA_TOKEN"]
        );
        assert_eq!(
            catalogue.executables().into_iter().collect::<Vec<_>>(),
            ["alpha-bin"]
        );
        assert_eq!(parse("advisors: []\n").unwrap().advisors.len(), 0);
    }

    #[test]
    fn the_embedded_catalogue_parses() {
        let catalogue = Catalogue::parse(EMBEDDED, EMBEDDED_SOURCE, &accept_any_settings)
            .expect("embedded catalogue");
        assert_eq!(catalogue, Catalogue::embedded());
        assert!(catalogue.advisors.len() >= 3);
        assert!(
            catalogue.advisors.iter().any(|a| a.local),
            "a local advisor"
        );
        assert!(!catalogue.credential_vars().is_empty());
        assert!(!catalogue.executables().is_empty());
        for transport in [Transport::Process, Transport::Http] {
            assert!(catalogue.advisors.iter().any(|a| a.transport == transport));
        }
    }

    #[test]
    fn suggestions_are_near_misses_only() {
        let cases = [
            ("kitten", "sitting", 3),
            ("", "abc", 3),
            ("abc", "abc", 0),
            ("code_reveiw", "code_review", 2),
        ];
        for (a, b, distance) in cases {
            assert_eq!(edit_distance(a, b), distance, "{a} → {b}");
        }
        assert_eq!(did_you_mean("debuging", CAPABILITIES), Some("debugging"));
        assert_eq!(did_you_mean("zzz", CAPABILITIES), None);
    }
}
