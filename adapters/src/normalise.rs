//! Liberal reading of an advisor's answer, exact recording of its fields.
//!
//! Models answer untidily. This module accepts, in order of preference:
//!
//! - a JSON object anywhere in the answer: bare, in a fenced block after prose, or embedded
//!   in prose (the outermost balanced object that parses; when several carry a conclusion,
//!   the last one wins, because models reason first and answer last);
//! - JSON with trailing commas, single-quoted strings, `True`/`False`/`None` or typographic
//!   quotes (repaired only when the strict parse fails);
//! - the object wrapped once (`{"consultation": {...}}`);
//! - key synonyms (see [`CONCLUSION_KEYS`] and the other `*_KEYS`), matched
//!   case-insensitively with `-` and spaces read as `_`;
//! - stance synonyms ([`parse_stance`]), confidence as `0.8`, `"0.8"`, `80`, `"80%"`,
//!   `"8/10"`, `"8 out of 10"` or a word ([`parse_confidence`]);
//! - a list given as one string (split on lines and bullets), as a list of objects (their
//!   text), or as a map (its values).
//!
//! What is recorded is exact: strings trimmed, control characters removed, empty and
//! duplicate list items dropped, sizes capped ([`MAX_CONCLUSION_CHARS`], [`MAX_ITEM_CHARS`],
//! [`MAX_ITEMS`]). A plain-prose answer with no JSON becomes the conclusion when it is
//! non-trivial (at least [`MIN_PROSE_WORDS`] words), with stance `inconclusive`: a stance is
//! recorded only when the advisor stated one where it was asked, because a stance guessed
//! from prose could invent a disagreement. An answer that was meant as JSON but yields no
//! conclusion, or prose too short to be one, is [`NormaliseError`] (the contract records
//! it as `malformed`).
//!
//! One concept a file: `scan` finds the objects in an answer and repairs near-JSON, `json`
//! is the value read (borrowing from the answer), `keys` the synonyms, `fields` one object
//! read into the consultation's fields, `stance` stance and confidence, `text` cleaning.

mod fields;
mod json;
mod keys;
mod scan;
mod stance;
#[cfg(test)]
mod tests;
mod text;

use serde::{Deserialize, Serialize};

pub use keys::{
    ACTION_KEYS, ASSUMPTION_KEYS, CONCLUSION_KEYS, CONFIDENCE_KEYS, FALSIFIER_KEYS, RISK_KEYS,
    STANCE_KEYS,
};
pub use stance::{parse_confidence, parse_stance, Stance};
pub use text::{clean_text, strip_ansi, truncate_chars};

use fields::{from_object, unwrap_once, Fields};
use json::{parse_object, Object};
use scan::parsed_objects;
use text::{tail, trimmed};

/// The longest conclusion recorded, in characters.
pub const MAX_CONCLUSION_CHARS: usize = 4000;
/// The longest list item recorded, in characters.
pub const MAX_ITEM_CHARS: usize = 1000;
/// The most items recorded per list.
pub const MAX_ITEMS: usize = 20;
/// The fewest words a prose answer needs to be taken as a conclusion.
pub const MIN_PROSE_WORDS: usize = 4;
/// Only the last this-many bytes of a longer answer are read (the answer comes last).
pub const MAX_READ_BYTES: usize = 256 * 1024;

/// An answer read into the consultation's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct Normalised {
    /// The advisor's conclusion: trimmed, at most [`MAX_CONCLUSION_CHARS`] characters.
    pub conclusion: String,
    /// Its stance on the hypothesis (`inconclusive` when it stated none).
    pub stance: Stance,
    /// Assumptions it named.
    pub assumptions: Vec<String>,
    /// Risks it named, the argument against the hypothesis included.
    pub risks: Vec<String>,
    /// Actions it proposed.
    pub actions: Vec<String>,
    /// Observations or experiments that would prove the conclusion wrong.
    pub falsifiers: Vec<String>,
    /// Its confidence from 0 to 1, when it gave one that could be read.
    pub confidence: Option<f64>,
    /// What it said of each invariant the question listed (names it was not asked about
    /// are dropped by [`crate::question::keep_asked`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invariants: Vec<InvariantAnswer>,
}

/// What an advisor said of one of the team's invariants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvariantAnswer {
    /// The invariant's name, as the question gave it.
    pub name: String,
    /// Whether the hypothesis keeps it; `None` when the advisor could not tell.
    pub holds: Option<bool>,
    /// Why, in its words (cleaned, at most [`MAX_ITEM_CHARS`] characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Why no conclusion could be recovered from an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormaliseError {
    /// Nothing but whitespace.
    #[error("the answer is empty")]
    Empty,
    /// A JSON answer without any conclusion key.
    #[error(
        "the answer's JSON has no conclusion (keys given: {keys}); expected a non-empty \
         string under `conclusion` (or `verdict`, `answer`, `summary`)"
    )]
    NoConclusion {
        /// The keys the object did have, comma-separated and backticked.
        keys: String,
    },
    /// It looks like JSON but no object in it parses.
    #[error("the answer looks like JSON but no object in it parses, even after repair: {excerpt}")]
    Unparseable {
        /// The start of the answer.
        excerpt: String,
    },
    /// Prose too short to stand as a conclusion.
    #[error(
        "the answer is prose too short to be a conclusion (`{excerpt}`); expected a JSON \
         object with a `conclusion` or at least {MIN_PROSE_WORDS} words"
    )]
    TrivialProse {
        /// The answer, shortened.
        excerpt: String,
    },
}

/// Read an answer into the consultation's fields, or say why no conclusion is in it.
pub fn normalise(text: &str) -> Result<Normalised, NormaliseError> {
    let text = tail(trimmed(text), MAX_READ_BYTES);
    if text.trim().is_empty() {
        return Err(NormaliseError::Empty);
    }
    // The common answer is one bare object: when the whole text parses as one, the span
    // scan of `parsed_objects` would find that single span and parse it the same way.
    if text.starts_with('{') && text.ends_with('}') {
        if let Some(object) = parse_object(text) {
            return match from_object(&unwrap_once(Fields::new(&object))) {
                Some(found) => Ok(found),
                None => without_conclusion(text, &[object]),
            };
        }
    }
    let objects = parsed_objects(text);
    // The last object with a conclusion wins, so the search runs from the end and stops at
    // the first one found.
    if let Some(found) = objects
        .iter()
        .rev()
        .find_map(|object| from_object(&unwrap_once(Fields::new(object))))
    {
        return Ok(found);
    }
    without_conclusion(text, &objects)
}

/// `text` whose `objects` hold no conclusion: prose when it was not meant as JSON, else
/// the error that says why it is not an answer. Off the common path.
fn without_conclusion(text: &str, objects: &[Object<'_>]) -> Result<Normalised, NormaliseError> {
    let mut structured = looks_structured(text);
    let mut keys_seen: Vec<&str> = Vec::new();
    let mut distinct = std::collections::HashSet::new();
    for object in objects {
        let fields = unwrap_once(Fields::new(object));
        structured |= fields.has_field_key();
        for (key, _) in fields.object {
            if distinct.insert(&**key) {
                keys_seen.push(key);
            }
        }
    }
    if !structured {
        return from_prose(unfence(text));
    }
    if objects.is_empty() {
        return Err(NormaliseError::Unparseable {
            excerpt: excerpt(text, 80),
        });
    }
    let keys = keys_seen
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(NormaliseError::NoConclusion {
        keys: if keys.is_empty() {
            "none".to_string()
        } else {
            keys
        },
    })
}

/// Whether the answer was meant as JSON: it opens with an object or a list, or with a fence
/// marked as JSON (or whose content opens with one).
fn looks_structured(text: &str) -> bool {
    let t = text.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        return true;
    }
    let Some(rest) = t.strip_prefix("```") else {
        return false;
    };
    let (lang, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let body = body.trim_start();
    matches!(
        lang.trim().to_lowercase().as_str(),
        "json" | "json5" | "jsonc" | "javascript" | "js"
    ) || body.starts_with('{')
        || body.starts_with('[')
}

/// The text inside a fence that wraps the whole answer (a prose answer in a code block).
fn unfence(text: &str) -> &str {
    let t = text.trim();
    match t.strip_prefix("```").and_then(|r| r.strip_suffix("```")) {
        Some(inner) => inner.split_once('\n').map_or(inner, |(_, body)| body),
        None => t,
    }
}

/// A prose answer: the conclusion if non-trivial, stance `inconclusive`.
fn from_prose(text: &str) -> Result<Normalised, NormaliseError> {
    let conclusion = clean_text(text, MAX_CONCLUSION_CHARS);
    let words = conclusion.split_whitespace().count();
    if words < MIN_PROSE_WORDS {
        return Err(NormaliseError::TrivialProse {
            excerpt: excerpt(&conclusion, 60),
        });
    }
    Ok(Normalised {
        conclusion,
        stance: Stance::Inconclusive,
        assumptions: Vec::new(),
        risks: Vec::new(),
        actions: Vec::new(),
        falsifiers: Vec::new(),
        confidence: None,
        invariants: Vec::new(),
    })
}

/// One line of at most `max` characters for an error message.
fn excerpt(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate_chars(&clean_text(&one_line, max), max)
}
