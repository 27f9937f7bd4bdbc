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

use serde::de::{self, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

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
/// How many candidate objects are parsed at most, so hostile input costs bounded time.
const MAX_PARSE_ATTEMPTS: usize = 64;

/// Keys read as the conclusion, in order of preference.
pub const CONCLUSION_KEYS: &[&str] = &[
    "conclusion",
    "final_answer",
    "verdict",
    "answer",
    "summary",
    "assessment",
    "response",
    "opinion",
    "recommendation",
    "rationale",
    "reasoning",
    "explanation",
];
/// Keys read as the stance, in order of preference.
pub const STANCE_KEYS: &[&str] = &["stance", "position", "agreement", "agrees", "agree", "vote"];
/// Keys read as the confidence, in order of preference.
pub const CONFIDENCE_KEYS: &[&str] = &[
    "confidence",
    "confidence_level",
    "confidence_score",
    "certainty",
    "probability",
];
/// Keys whose items are recorded as assumptions.
pub const ASSUMPTION_KEYS: &[&str] = &[
    "assumptions",
    "hidden_assumptions",
    "key_assumptions",
    "assumption",
];
/// Keys whose items are recorded as risks. The strongest argument against the hypothesis
/// and counterarguments are risks: each is a way the hypothesis may fail.
pub const RISK_KEYS: &[&str] = &[
    "risks",
    "risk",
    "strongest_argument_against",
    "argument_against",
    "counterargument",
    "counterarguments",
    "counter_arguments",
    "objections",
    "concerns",
    "caveats",
];
/// Keys whose items are recorded as actions.
pub const ACTION_KEYS: &[&str] = &[
    "actions",
    "action",
    "next_steps",
    "recommended_actions",
    "recommendations",
    "steps",
];
/// Keys whose items are recorded as falsifiers.
pub const FALSIFIER_KEYS: &[&str] = &[
    "falsifiers",
    "falsifier",
    "falsifying_experiment",
    "falsifying_experiments",
    "falsification",
    "experiment",
    "experiments",
    "how_to_falsify",
];
/// Keys under which a model may wrap the whole answer once.
const WRAPPER_KEYS: &[&str] = &[
    "consultation",
    "result",
    "review",
    "output",
    "data",
    "answer",
];

/// An advisor's stance on the executor's hypothesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stance {
    /// It agrees with the hypothesis.
    Supports,
    /// It argues against the hypothesis.
    Opposes,
    /// It proposes a different approach or agrees only in part.
    Alternative,
    /// It did not take a position, or none could be read.
    Inconclusive,
}

impl Stance {
    /// Every stance.
    pub const ALL: [Stance; 4] = [
        Stance::Supports,
        Stance::Opposes,
        Stance::Alternative,
        Stance::Inconclusive,
    ];

    /// The stance as written in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Stance::Supports => "supports",
            Stance::Opposes => "opposes",
            Stance::Alternative => "alternative",
            Stance::Inconclusive => "inconclusive",
        }
    }
}

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

/// Read a stance liberally: `agree`, `yes`, `correct` support; `disagree`, `against`,
/// `incorrect`, a negated agreement oppose; `partially`, `mixed`, `different approach`
/// are an alternative; `unsure`, `unclear`, `neutral` are inconclusive. `None` when no
/// stance word is found.
pub fn parse_stance(text: &str) -> Option<Stance> {
    let text = trimmed(text);
    // Lower-casing ASCII text without capitals changes nothing: no copy for it.
    let lower = if text.is_ascii() && !text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.to_lowercase())
    };
    let words = || {
        lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
    };
    let mut leading = words();
    let exact = match (leading.next(), leading.next(), leading.next()) {
        (None, _, _) => return None,
        (Some("yes" | "true" | "supports" | "support" | "supported"), None, _) => {
            Some(Stance::Supports)
        }
        (Some("no" | "false" | "opposes" | "oppose" | "opposed"), None, _) => Some(Stance::Opposes),
        (Some("n"), Some("a"), None) | (Some("none"), None, _) => Some(Stance::Inconclusive),
        _ => None,
    };
    if exact.is_some() {
        return exact;
    }
    // One pass: each word is read once as what it says.
    let (mut alternative, mut opposes, mut inconclusive, mut supports) =
        (false, false, false, false);
    let mut negated = has_negating_contraction(&lower);
    for word in words() {
        match word {
            "partially" | "partly" | "partial" | "alternative" | "alternatively" | "mixed"
            | "different" | "nuanced" | "qualified" | "somewhat" => alternative = true,
            "disagree" | "disagrees" | "oppose" | "opposes" | "opposed" | "against"
            | "incorrect" | "wrong" | "reject" | "rejects" | "refute" | "refutes" | "refuted"
            | "contradicts" | "contradict" | "unsupported" => opposes = true,
            "inconclusive" | "unsure" | "unknown" | "unclear" | "neutral" | "undecided"
            | "uncertain" | "insufficient" => inconclusive = true,
            "agree" | "agrees" | "support" | "supports" | "supported" | "correct" | "confirm"
            | "confirms" | "confirmed" | "yes" | "right" | "sound" | "valid" => supports = true,
            "not" | "no" | "never" | "cannot" | "nor" => negated = true,
            _ => {}
        }
    }
    if alternative {
        Some(Stance::Alternative)
    } else if opposes {
        Some(Stance::Opposes)
    } else if inconclusive {
        Some(Stance::Inconclusive)
    } else if supports {
        if negated {
            Some(Stance::Opposes)
        } else {
            Some(Stance::Supports)
        }
    } else {
        None
    }
}

/// Whether `text` holds `n't` or `n’t` (`don't`, `isn’t`), found in one pass.
fn has_negating_contraction(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(at, &b)| {
        b == b'n' && {
            let rest = &bytes[at + 1..];
            rest.starts_with(b"'t") || rest.starts_with("\u{2019}t".as_bytes())
        }
    })
}

/// Read a confidence liberally and clamp it to 0..1: a number from 0 to 1 is taken as is,
/// above 1 up to 100 as a percentage (`80` → 0.8), above 100 as 1, below 0 as 0; a string
/// holding such a number, `N%`, `N/M` or `N out of M`; or a word: `very high` 0.95,
/// `high` 0.85, `medium`/`moderate` 0.6, `low` 0.3, `very low` 0.15. `None` otherwise.
pub fn parse_confidence(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64().and_then(from_number),
        Value::String(s) => confidence_from_text(s),
        _ => None,
    }
}

/// [`parse_confidence`] of a value read from an answer.
fn confidence_of(value: &Json<'_>) -> Option<f64> {
    match value {
        Json::Number(n) => n.as_f64().and_then(from_number),
        Json::String(s) => confidence_from_text(s),
        _ => None,
    }
}

fn confidence_from_text(text: &str) -> Option<f64> {
    let lower = text.trim().to_lowercase();
    let word = lower.trim_end_matches(['.', '!']).trim();
    let word = word.strip_suffix("confidence").map_or(word, str::trim);
    let named = match word {
        "very high" => Some(0.95),
        "high" => Some(0.85),
        "medium" | "moderate" | "mid" => Some(0.6),
        "low" => Some(0.3),
        "very low" => Some(0.15),
        _ => None,
    };
    if named.is_some() {
        return named;
    }
    let (first, rest) = leading_number(word)?;
    let rest = rest.trim_start();
    if rest.starts_with('%') {
        return from_number(first / 100.0);
    }
    let denominator = rest
        .strip_prefix('/')
        .or_else(|| rest.strip_prefix("out of"))
        .and_then(|r| leading_number(r.trim_start()).map(|(d, _)| d));
    match denominator {
        Some(d) if d > 0.0 => from_number(first / d),
        Some(_) => None,
        None => from_number(first),
    }
}

/// The number at the start of `text` and what follows it.
fn leading_number(text: &str) -> Option<(f64, &str)> {
    let end = text
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map_or(text.len(), |(i, _)| i);
    let number = text[..end].parse::<f64>().ok()?;
    Some((number, &text[end..]))
}

fn from_number(x: f64) -> Option<f64> {
    if !x.is_finite() {
        return None;
    }
    let clamped = if x < 0.0 {
        0.0
    } else if x <= 1.0 {
        x
    } else if x <= 100.0 {
        x / 100.0
    } else {
        1.0
    };
    // Four decimals are more than any advisor means, and keep `0.30000000000000004` out.
    Some((clamped * 10_000.0).round() / 10_000.0)
}

/// `text.trim()`, answered from the end bytes alone when both are visible ASCII (the usual
/// case), without decoding characters from either end.
fn trimmed(text: &str) -> &str {
    match (text.as_bytes().first(), text.as_bytes().last()) {
        (Some(first), Some(last)) if first.is_ascii_graphic() && last.is_ascii_graphic() => text,
        _ => text.trim(),
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
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

/// A JSON value read from an answer. Like [`serde_json::Value`], but its strings borrow
/// from the answer where they hold no escape, and an object is its entries in order (it
/// has a handful, looked up by synonym, never by exact key), so reading an answer does not
/// allocate a string per key and value or hash every key.
#[derive(Debug, Clone, PartialEq)]
enum Json<'a> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

/// An object's entries in the order written; a repeated key keeps its first place and its
/// last value, as in a [`serde_json::Map`].
type Object<'a> = Vec<(Cow<'a, str>, Json<'a>)>;

/// From this many entries on, a repeated key is found through a hash index, so that an
/// object with very many keys costs linear time.
const INDEXED_OBJECT: usize = 32;

impl<'a> Json<'a> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(object) => Some(object),
            _ => None,
        }
    }

    fn is_string(&self) -> bool {
        matches!(self, Json::String(_))
    }

    /// The value with nothing borrowed (for an object parsed from a repaired copy).
    fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Number(n) => Json::Number(n),
            Json::String(s) => Json::String(Cow::Owned(s.into_owned())),
            Json::Array(items) => Json::Array(items.into_iter().map(Json::into_owned).collect()),
            Json::Object(object) => Json::Object(owned_object(object)),
        }
    }

    /// A number or a boolean as JSON writes it.
    fn scalar_text(&self) -> Option<String> {
        match self {
            Json::Number(n) => Some(Value::Number(n.clone()).to_string()),
            Json::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

fn owned_object(object: Object<'_>) -> Object<'static> {
    object
        .into_iter()
        .map(|(key, value)| (Cow::Owned(key.into_owned()), value.into_owned()))
        .collect()
}

/// Parse `text` as one JSON object (the whole text), borrowing from it.
fn parse_object(text: &str) -> Option<Object<'_>> {
    match serde_json::from_str::<Json<'_>>(text) {
        Ok(Json::Object(object)) => Some(object),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// Builds a [`Json`] the way `serde_json` builds a [`Value`] (same numbers, same nulls, same
/// repeated-key rule), keeping strings borrowed when the parser can lend them.
struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Json<'de>, E> {
        let de = de::value::I128Deserializer::new(value);
        serde_json::Number::deserialize(de).map(Json::Number)
    }

    fn visit_u64<E>(self, value: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Json<'de>, E> {
        let de = de::value::U128Deserializer::new(value);
        serde_json::Number::deserialize(de).map(Json::Number)
    }

    fn visit_f64<E>(self, value: f64) -> Result<Json<'de>, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Json::Null, Json::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value)))
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Json<'de>, D::Error> {
        Deserialize::deserialize(deserializer)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        // Room for an answer's usual handful of keys, so that it grows at most rarely.
        let mut entries: Object<'de> = Vec::with_capacity(8);
        let mut index: Option<HashMap<Cow<'de, str>, usize>> = None;
        while let Some(Key(key)) = map.next_key()? {
            let value: Json<'de> = map.next_value()?;
            let repeated = match &index {
                Some(index) => index.get(&key).copied(),
                None => entries.iter().position(|(k, _)| *k == key),
            };
            match repeated {
                Some(at) => entries[at].1 = value,
                None => {
                    if let Some(index) = &mut index {
                        index.insert(key.clone(), entries.len());
                    }
                    entries.push((key, value));
                    if index.is_none() && entries.len() >= INDEXED_OBJECT {
                        let built = entries.iter().enumerate();
                        index = Some(built.map(|(at, (k, _))| (k.clone(), at)).collect());
                    }
                }
            }
        }
        Ok(Json::Object(entries))
    }
}

/// An object key, borrowed from the answer when it holds no escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(value)))
    }
}

/// Every object in `text` that parses (possibly after repair), outermost first, in order.
fn parsed_objects(text: &str) -> Vec<Object<'_>> {
    let mut found = Vec::new();
    let mut attempts = 0;
    collect_objects(text, &mut found, &mut attempts);
    found
}

fn collect_objects<'a>(text: &'a str, found: &mut Vec<Object<'a>>, attempts: &mut usize) {
    for (start, end) in balanced_spans(text) {
        if *attempts >= MAX_PARSE_ATTEMPTS {
            return;
        }
        *attempts += 1;
        let candidate = &text[start..=end];
        if let Some(object) = parse_repaired(candidate) {
            found.push(object);
        } else {
            // The outer braces were not JSON (prose in braces, code): look inside.
            collect_objects(&text[start + 1..end], found, attempts);
        }
    }
}

/// How many times the span scan restarts after an unclosed `{` (prose like `a { b` before
/// the JSON); bounded so a flood of `{` costs linear time.
const MAX_RESCANS: usize = 16;

/// Top-level balanced `{...}` spans (inclusive byte offsets); double-quoted strings inside
/// an object are skipped so braces in strings do not count. An unclosed `{` is skipped and
/// the scan goes on after it.
fn balanced_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    for _ in 0..=MAX_RESCANS {
        let (found, unclosed) = scan_spans(&text[from..]);
        spans.extend(found.into_iter().map(|(s, e)| (s + from, e + from)));
        match unclosed {
            Some(start) => from += start + 1,
            None => break,
        }
    }
    spans
}

/// One pass of [`balanced_spans`]: the spans found and the start of an unclosed one.
fn scan_spans(text: &str) -> (Vec<(usize, usize)>, Option<usize>) {
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' if depth > 0 => in_string = true,
            b'{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    spans.push((start, i));
                }
            }
            _ => {}
        }
    }
    (spans, (depth > 0).then_some(start))
}

/// Parse an object strictly, then after removing trailing commas, then after converting
/// single quotes, typographic quotes and Python literals.
fn parse_repaired(candidate: &str) -> Option<Object<'_>> {
    if let Some(object) = parse_object(candidate) {
        return Some(object);
    }
    // A repaired copy is dropped here: what is kept of it is owned.
    let no_commas = remove_trailing_commas(candidate);
    if let Some(object) = parse_object(&no_commas) {
        return Some(owned_object(object));
    }
    let loosened = remove_trailing_commas(&loosen_quotes(candidate));
    parse_object(&loosened).map(owned_object)
}

/// Drop a `,` that is followed (after whitespace) by `}` or `]`, outside strings.
fn remove_trailing_commas(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Turn single-quoted and typographically quoted strings into JSON strings and Python's
/// `True`/`False`/`None` into JSON literals.
fn loosen_quotes(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    // The quote character that opened the current string, if inside one.
    let mut open: Option<char> = None;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "True" => "true",
            "False" => "false",
            "None" => "null",
            other => other,
        });
        word.clear();
    };
    while let Some(c) = chars.next() {
        match open {
            Some(q) => {
                let closes = match q {
                    '\u{201c}' => c == '\u{201d}',
                    other => c == other,
                };
                if c == '\\' {
                    out.push(c);
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else if closes {
                    out.push('"');
                    open = None;
                } else if c == '"' {
                    out.push_str("\\\"");
                } else {
                    out.push(c);
                }
            }
            None => {
                if c.is_alphabetic() {
                    word.push(c);
                    continue;
                }
                flush(&mut word, &mut out);
                if c == '"' || c == '\'' || c == '\u{201c}' {
                    open = Some(c);
                    out.push('"');
                } else {
                    out.push(c);
                }
            }
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The key sets an object's keys are looked up in. The first [`FIELD_SETS`] are the
/// consultation's fields (a key in one of them shows the answer was meant as JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeySet {
    Conclusion,
    Stance,
    Confidence,
    Assumption,
    Risk,
    Action,
    Falsifier,
    Wrapper,
    ItemText,
}

/// The synonyms of every [`KeySet`], indexed by it, in order of preference.
const KEY_SETS: [&[&str]; 9] = [
    CONCLUSION_KEYS,
    STANCE_KEYS,
    CONFIDENCE_KEYS,
    ASSUMPTION_KEYS,
    RISK_KEYS,
    ACTION_KEYS,
    FALSIFIER_KEYS,
    WRAPPER_KEYS,
    ITEM_TEXT_KEYS,
];

/// How many of [`KEY_SETS`], from the first, are the consultation's fields.
const FIELD_SETS: usize = 7;

/// The sets a canonical key is in, each with the key's rank among its synonyms: usually
/// one set, two when sets share a synonym (`answer` is a conclusion and a wrapper).
#[derive(Debug, Clone, Copy, Default)]
struct Memberships {
    /// (set, rank), the first `len` of them.
    sets: [(u8, u8); KEY_SETS.len()],
    len: u8,
}

impl Memberships {
    fn iter(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        self.sets[..usize::from(self.len)].iter().copied()
    }

    /// The key's rank in `set`, if it is in it.
    fn rank_in(&self, set: usize) -> Option<u8> {
        self.iter()
            .find(|&(s, _)| usize::from(s) == set)
            .map(|(_, rank)| rank)
    }
}

/// The longest canonical key of any set, in bytes (checked by a test): a longer key
/// cannot match and is not canonicalised.
const MAX_KEY_BYTES: usize = 32;

/// Every canonical synonym and its ranks, built once: a key is then classified by one
/// lookup instead of a comparison with each synonym of each set.
fn key_table() -> &'static KeyTable {
    static TABLE: OnceLock<KeyTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = KeyTable::default();
        for (set, keys) in (0u8..).zip(KEY_SETS) {
            for (rank, key) in (0u8..).zip(keys.iter()) {
                let memberships = table.entry(key.as_bytes()).or_default();
                // A set lists a synonym once (checked by a test); each set is counted once.
                if memberships.rank_in(usize::from(set)).is_none() {
                    memberships.sets[usize::from(memberships.len)] = (set, rank);
                    memberships.len += 1;
                }
            }
        }
        table
    })
}

/// The canonical synonyms and their ranks. The keys are a few ASCII bytes and the table is
/// fixed, so a slow collision-resistant hash buys nothing: [`KeyHasher`] is used.
type KeyTable = HashMap<&'static [u8], Memberships, BuildHasherDefault<KeyHasher>>;

/// A multiply-xor hash taking eight bytes a step, with a final mix so that every input
/// bit reaches the bits the table indexes by.
struct KeyHasher(u64);

impl KeyHasher {
    const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::MULTIPLIER);
    }
}

impl Default for KeyHasher {
    fn default() -> KeyHasher {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let h = self.0 ^ (self.0 >> 32);
        let h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut eight = [0u8; 8];
            eight.copy_from_slice(word);
            self.mix(u64::from_le_bytes(eight));
        }
        let mut rest = [0u8; 8];
        rest[..words.remainder().len()].copy_from_slice(words.remainder());
        self.mix(u64::from_le_bytes(rest));
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
}

/// The ranks of `key` read canonically (`Conclusion` as `conclusion`, `final-answer` and
/// `final answer` as `final_answer`, surrounding whitespace ignored), or `None` when it is
/// in no set. Every synonym is ASCII, so a key with any other character matches none.
fn memberships_of(key: &str) -> Option<&'static Memberships> {
    let key = trimmed(key);
    if key.len() > MAX_KEY_BYTES || !key.is_ascii() {
        return None;
    }
    let mut canonical = [0u8; MAX_KEY_BYTES];
    for (slot, byte) in canonical.iter_mut().zip(key.bytes()) {
        *slot = match byte {
            b'-' | b' ' => b'_',
            other => other.to_ascii_lowercase(),
        };
    }
    key_table().get(&canonical[..key.len()])
}

/// An object with each of its keys classified once, so that the many look-ups of one
/// answer (every field, the wrapper, the conclusion's synonyms) do not re-read its keys.
struct Fields<'a> {
    object: &'a Object<'a>,
    /// For every set a key is in, its value under the look-up order (set, rank, position)
    /// packed in one number, sorted: each set's values are one run, in the order a look-up
    /// returns them.
    hits: Vec<(u64, &'a Json<'a>)>,
    /// Where each set's run starts in `hits`; the last entry is where the runs end.
    starts: [usize; KEY_SETS.len() + 1],
}

impl<'a> Fields<'a> {
    fn new(object: &'a Object<'a>) -> Fields<'a> {
        let mut hits = Vec::with_capacity(object.len() * 2);
        let mut counts = [0usize; KEY_SETS.len()];
        for (position, (key, value)) in object.iter().enumerate() {
            let Some(memberships) = memberships_of(key) else {
                continue;
            };
            for (set, rank) in memberships.iter() {
                counts[usize::from(set)] += 1;
                // An answer is far shorter than 2^48 keys.
                let order = u64::from(set) << 56 | u64::from(rank) << 48 | position as u64;
                hits.push((order, value));
            }
        }
        hits.sort_unstable_by_key(|&(order, _)| order);
        let mut starts = [0usize; KEY_SETS.len() + 1];
        for (set, count) in counts.iter().enumerate() {
            starts[set + 1] = starts[set] + count;
        }
        Fields {
            object,
            hits,
            starts,
        }
    }

    /// The values of every synonym of `set` present, in the order of the synonyms (then
    /// of the object, when two keys read alike).
    fn lookup(&self, set: KeySet) -> impl Iterator<Item = &'a Json<'a>> + '_ {
        let set = set as usize;
        self.hits[self.starts[set]..self.starts[set + 1]]
            .iter()
            .map(|&(_, value)| value)
    }

    /// Whether any key names one of the consultation's fields.
    fn has_field_key(&self) -> bool {
        self.starts[FIELD_SETS] > 0
    }
}

/// An object without a conclusion that wraps the answer under one key is read through it.
fn unwrap_once(fields: Fields<'_>) -> Fields<'_> {
    let has_conclusion = fields.lookup(KeySet::Conclusion).any(Json::is_string);
    if has_conclusion {
        return fields;
    }
    if let Some(inner) = fields.lookup(KeySet::Wrapper).find_map(Json::as_object) {
        return Fields::new(inner);
    }
    if fields.object.len() == 1 {
        if let Some((_, Json::Object(inner))) = fields.object.first() {
            return Fields::new(inner);
        }
    }
    fields
}

/// The consultation's fields from one object, or `None` if it carries no conclusion.
fn from_object(fields: &Fields<'_>) -> Option<Normalised> {
    let mut stance_from_conclusion = None;
    let mut conclusion = None;
    for value in fields.lookup(KeySet::Conclusion) {
        let text = match value {
            Json::String(s) => clean_text(s, MAX_CONCLUSION_CHARS),
            Json::Array(items) => clean_text(
                &items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                MAX_CONCLUSION_CHARS,
            ),
            Json::Object(inner) => clean_text(&object_text(inner), MAX_CONCLUSION_CHARS),
            _ => continue,
        };
        if text.is_empty() || is_placeholder(&text) {
            continue;
        }
        // `{"verdict": "agree", "reasoning": "..."}`: a bare stance word is the stance,
        // and the conclusion is the next key that says more.
        if text.split_whitespace().nth(2).is_none() {
            if let Some(stance) = parse_stance(&text) {
                stance_from_conclusion = stance_from_conclusion.or(Some(stance));
                continue;
            }
        }
        conclusion = Some(text);
        break;
    }
    let conclusion = conclusion?;
    let stated_stance = fields.lookup(KeySet::Stance).find_map(|v| match v {
        Json::Bool(true) => Some(Stance::Supports),
        Json::Bool(false) => Some(Stance::Opposes),
        Json::String(s) => parse_stance(s),
        _ => None,
    });
    let list = |set: KeySet| {
        let mut items = ListItems::default();
        for value in fields.lookup(set) {
            collect_items(value, &mut items);
        }
        items.kept
    };
    Some(Normalised {
        conclusion,
        stance: stated_stance
            .or(stance_from_conclusion)
            .unwrap_or(Stance::Inconclusive),
        assumptions: list(KeySet::Assumption),
        risks: list(KeySet::Risk),
        actions: list(KeySet::Action),
        falsifiers: list(KeySet::Falsifier),
        confidence: fields.lookup(KeySet::Confidence).find_map(confidence_of),
    })
}

/// A template placeholder echoed back (`<one paragraph>`, `...`) is not a conclusion.
fn is_placeholder(text: &str) -> bool {
    (text.starts_with('<') && text.ends_with('>')) || text.chars().all(|c| c == '.' || c == '…')
}

/// Keys whose string is taken as an item's text when a list holds objects.
const ITEM_TEXT_KEYS: &[&str] = &[
    "text",
    "description",
    "detail",
    "summary",
    "risk",
    "assumption",
    "action",
    "falsifier",
    "experiment",
    "argument",
    "title",
    "name",
    "value",
];

/// The items of a list value, in order, handed to `items`.
fn collect_items(value: &Json<'_>, items: &mut ListItems) {
    match value {
        Json::Null => {}
        Json::String(s) => split_list_text(s, items),
        Json::Number(_) | Json::Bool(_) => {
            if let Some(text) = value.scalar_text() {
                items.push(&text);
            }
        }
        Json::Array(values) => {
            for v in values {
                match v {
                    Json::String(s) => items.push(strip_bullet(s)),
                    Json::Array(_) => collect_items(v, items),
                    Json::Object(o) => items.push(&object_text(o)),
                    Json::Number(_) | Json::Bool(_) => {
                        if let Some(text) = v.scalar_text() {
                            items.push(&text);
                        }
                    }
                    Json::Null => {}
                }
            }
        }
        Json::Object(o) => {
            for (_, v) in o {
                collect_items(v, items);
            }
        }
    }
}

/// The text of an object given as a list item: a text-like key, else its strings joined.
fn object_text(object: &Object<'_>) -> String {
    for value in Fields::new(object).lookup(KeySet::ItemText) {
        if let Json::String(s) = value {
            if !s.trim().is_empty() {
                return s.to_string();
            }
        }
    }
    object
        .iter()
        .filter_map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(" — ")
}

/// Split a string given where a list was asked, into `items`: bulleted lines start items
/// and other lines continue them; without bullets each non-empty line is an item.
fn split_list_text(text: &str, items: &mut ListItems) {
    let lines = || text.lines().map(trimmed).filter(|l| !l.is_empty());
    let bulleted = lines().any(|l| bullet_len(l).is_some());
    if !bulleted {
        for line in lines() {
            items.push(line);
        }
        return;
    }
    // The item being read: it is handed on when the next one starts.
    let mut open: Option<Cow<'_, str>> = None;
    for line in lines() {
        match (bullet_len(line), &mut open) {
            (Some(n), _) => {
                if let Some(done) = open.replace(Cow::Borrowed(line[n..].trim())) {
                    items.push(&done);
                }
            }
            (None, Some(item)) => {
                let item = item.to_mut();
                item.push(' ');
                item.push_str(line);
            }
            (None, None) => open = Some(Cow::Borrowed(line)),
        }
    }
    if let Some(done) = open {
        items.push(&done);
    }
}

/// The byte length of a leading bullet (`- `, `* `, `• `, `+ `, `1. `, `1) `, `(1) `).
fn bullet_len(line: &str) -> Option<usize> {
    for bullet in ["- ", "* ", "• ", "+ ", "– "] {
        if line.starts_with(bullet) {
            return Some(bullet.len());
        }
    }
    let digits = line.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && digits <= 3 {
        let rest = &line[digits..];
        if rest.starts_with(". ") || rest.starts_with(") ") {
            return Some(digits + 2);
        }
    }
    if let Some(rest) = line.strip_prefix('(') {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && rest[digits..].starts_with(") ") {
            return Some(1 + digits + 2);
        }
    }
    None
}

fn strip_bullet(text: &str) -> &str {
    let t = trimmed(text);
    match bullet_len(t) {
        Some(n) => trimmed(&t[n..]),
        None => t,
    }
}

/// A list's items as recorded: cleaned, de-duplicated and capped as they come.
#[derive(Default)]
struct ListItems {
    kept: Vec<String>,
}

impl ListItems {
    fn push(&mut self, item: &str) {
        if self.kept.len() == MAX_ITEMS {
            return;
        }
        let flat;
        let cleaned = if is_plain(item) {
            // What collapsing and cleaning would leave as it is.
            truncate_cow(item, MAX_ITEM_CHARS)
        } else {
            flat = collapse_whitespace(item);
            clean_cow(&flat, MAX_ITEM_CHARS)
        };
        if !cleaned.is_empty()
            && !is_placeholder(&cleaned)
            && !self.kept.iter().any(|k| *k == cleaned)
        {
            self.kept.push(cleaned.into_owned());
        }
    }
}

/// Whether `text` is non-empty printable ASCII with single spaces between words and none
/// at either end: collapsing its whitespace and cleaning it changes nothing.
fn is_plain(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first != b' ' && last != b' ' && is_printable_ascii(bytes) && !text.contains("  ")
}

/// `text` with every whitespace run made one space and none at either end; borrowed when
/// it is so already (the common item).
fn collapse_whitespace(text: &str) -> Cow<'_, str> {
    if is_collapsed(text) {
        return Cow::Borrowed(text);
    }
    let mut flat = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !flat.is_empty() {
            flat.push(' ');
        }
        flat.push_str(word);
    }
    Cow::Owned(flat)
}

/// Whether `text` has no whitespace but single spaces between words.
fn is_collapsed(text: &str) -> bool {
    // One pass over the bytes for ASCII text; any other text is checked by characters.
    let mut after_space = true;
    for &byte in text.as_bytes() {
        match byte {
            b' ' if after_space => return false,
            b' ' => after_space = true,
            b'\t'..=b'\r' => return false,
            0x80.. => {
                return !text.starts_with(' ')
                    && !text.ends_with(' ')
                    && !text.contains("  ")
                    && !text.chars().any(|c| c != ' ' && c.is_whitespace());
            }
            _ => after_space = false,
        }
    }
    text.is_empty() || !after_space
}

/// Remove control characters (newlines and tabs kept as layout), trim every line's end and
/// the whole, and cap at `max` characters with an ellipsis.
pub fn clean_text(text: &str, max: usize) -> String {
    clean_cow(text, max).into_owned()
}

/// [`clean_text`], borrowing from `text` when there is nothing to remove or cut.
fn clean_cow(text: &str, max: usize) -> Cow<'_, str> {
    // Most texts hold no control character (no newline, tab or escape): cleaning one is
    // trimming it, without the passes below.
    if !may_hold_control(text) {
        return truncate_cow(trimmed(text), max);
    }
    let no_ansi = if text.contains('\u{1b}') {
        Cow::Owned(strip_ansi(text))
    } else {
        Cow::Borrowed(text)
    };
    let mut cleaned = String::with_capacity(no_ansi.len());
    for line in no_ansi.lines() {
        let start = cleaned.len();
        cleaned.extend(
            line.chars()
                .map(|c| if c == '\t' { ' ' } else { c })
                .filter(|c| !c.is_control()),
        );
        let kept = cleaned[start..].trim_end().len();
        cleaned.truncate(start + kept);
        cleaned.push('\n');
    }
    // Trimmed in place, so that an uncut text is returned without another copy.
    cleaned.truncate(cleaned.trim_end().len());
    let leading = cleaned.len() - cleaned.trim_start().len();
    cleaned.drain(..leading);
    match truncate_cow(&cleaned, max) {
        Cow::Owned(cut) => Cow::Owned(cut),
        Cow::Borrowed(_) => Cow::Owned(cleaned),
    }
}

/// Whether `text` may hold a control character (C0, DEL or C1), by its bytes: `false`
/// means it holds none. C1 characters are encoded `C2 80`..`C2 9F`, so any `C2` byte
/// answers `true` (also for `U+00A0`..`U+00BF`, which the full pass then keeps).
fn may_hold_control(text: &str) -> bool {
    !is_printable_ascii(text.as_bytes()) && text.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2)
}

/// Whether every byte is printable ASCII (`0x20`..`0x7e`), eight bytes a step: the usual
/// answer text passes this test and so skips the byte-by-byte ones.
fn is_printable_ascii(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        let w = u64::from_le_bytes(eight);
        // The high bit of a byte is set in `below` when the byte is under 0x20, in `del`
        // when it is 0x7f, and in `w` itself when it is 0x80 or more.
        let below = w.wrapping_sub(ONES * 0x20) & !w;
        let flipped = w ^ (ONES * 0x7f);
        let del = flipped.wrapping_sub(ONES) & !flipped;
        if (w | below | del) & HIGH_BITS != 0 {
            return false;
        }
    }
    words.remainder().iter().all(|&b| (0x20..0x7f).contains(&b))
}

/// `text` cut to at most `max` characters, the last one an ellipsis when cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    truncate_cow(text, max).into_owned()
}

/// [`truncate_chars`], borrowing `text` when it is short enough.
fn truncate_cow(text: &str, max: usize) -> Cow<'_, str> {
    // A text of at most `max` bytes has at most `max` characters.
    if text.len() <= max || text.chars().count() <= max {
        return Cow::Borrowed(text);
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.truncate(out.trim_end().len());
    out.push('…');
    Cow::Owned(out)
}

/// Remove ANSI escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \`, and
/// two-character escapes), which would otherwise leave `[31m` behind.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for n in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&n) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(n) = chars.next() {
                    if n == '\u{7}' {
                        break;
                    }
                    if n == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
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
    })
}

/// One line of at most `max` characters for an error message.
fn excerpt(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate_chars(&clean_text(&one_line, max), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a case should come to: the fields that matter to it, or the error's variant.
    #[derive(Debug)]
    enum Want {
        Fields {
            conclusion: &'static str,
            stance: Stance,
            risks: &'static [&'static str],
            falsifiers: &'static [&'static str],
            confidence: Option<f64>,
        },
        Empty,
        NoConclusion,
        Unparseable,
        TrivialProse,
    }

    fn ok(conclusion: &'static str, stance: Stance, confidence: Option<f64>) -> Want {
        Want::Fields {
            conclusion,
            stance,
            risks: &[],
            falsifiers: &[],
            confidence,
        }
    }

    fn check(name: &str, input: &str, want: &Want) {
        let got = normalise(input);
        match (&want, &got) {
            (
                Want::Fields {
                    conclusion,
                    stance,
                    risks,
                    falsifiers,
                    confidence,
                },
                Ok(n),
            ) => {
                assert_eq!(n.conclusion, *conclusion, "{name}: conclusion");
                assert_eq!(n.stance, *stance, "{name}: stance");
                assert_eq!(n.confidence, *confidence, "{name}: confidence");
                if !risks.is_empty() {
                    assert_eq!(n.risks, *risks, "{name}: risks");
                }
                if !falsifiers.is_empty() {
                    assert_eq!(n.falsifiers, *falsifiers, "{name}: falsifiers");
                }
            }
            (Want::Empty, Err(NormaliseError::Empty))
            | (Want::NoConclusion, Err(NormaliseError::NoConclusion { .. }))
            | (Want::Unparseable, Err(NormaliseError::Unparseable { .. }))
            | (Want::TrivialProse, Err(NormaliseError::TrivialProse { .. })) => {}
            _ => panic!("{name}: wanted {want:?}, got {got:?}"),
        }
    }

    #[test]
    fn every_untidy_shape_is_read() {
        use Stance::*;
        let cases: &[(&str, &str, Want)] = &[
            (
                "bare json",
                r#"{"conclusion": "Use a lock.", "stance": "supports", "confidence": 0.8}"#,
                ok("Use a lock.", Supports, Some(0.8)),
            ),
            (
                "fenced block after prose",
                "Let me think.\n\n```json\n{\"conclusion\": \"Cache is stale.\", \
                 \"stance\": \"disagree\", \"confidence\": \"80%\"}\n```\n",
                ok("Cache is stale.", Opposes, Some(0.8)),
            ),
            (
                "json embedded in prose",
                "My answer is {\"conclusion\": \"Retry is fine\", \"stance\": \"agree\"} as said.",
                ok("Retry is fine", Supports, None),
            ),
            (
                "prose braces before the json",
                "The closure { x } matters. {\"conclusion\": \"Closure leaks\", \"stance\": \
                 \"partially\"}",
                ok("Closure leaks", Alternative, None),
            ),
            (
                "unclosed brace in prose before the json",
                "A map like { a: 1 is odd.\n```json\n{\"conclusion\": \"Odd map\", \
                 \"confidence\": \"8/10\"}\n```",
                ok("Odd map", Inconclusive, Some(0.8)),
            ),
            (
                "trailing commas",
                "{\"conclusion\": \"Fine\", \"risks\": [\"a\", \"b\",], \"stance\": \"yes\",}",
                Want::Fields {
                    conclusion: "Fine",
                    stance: Supports,
                    risks: &["a", "b"],
                    falsifiers: &[],
                    confidence: None,
                },
            ),
            (
                "single quotes and python literals",
                "{'conclusion': 'It holds', 'stance': 'correct', 'agrees': True, \
                 'confidence': 'high'}",
                ok("It holds", Supports, Some(0.85)),
            ),
            (
                "last conclusion wins",
                "{\"conclusion\": \"first draft\"}\nOn reflection:\n{\"conclusion\": \"final\", \
                 \"stance\": \"against\"}",
                ok("final", Opposes, None),
            ),
            (
                "wrapped once",
                r#"{"consultation": {"summary": "Wrapped", "stance": "unclear"}}"#,
                ok("Wrapped", Inconclusive, None),
            ),
            (
                "key synonyms and case",
                r#"{"Verdict": "The index is unused", "Stance": "Disagrees", "Certainty": 80}"#,
                ok("The index is unused", Opposes, Some(0.8)),
            ),
            (
                "verdict is a bare stance word",
                r#"{"verdict": "agree", "reasoning": "The test covers it"}"#,
                ok("The test covers it", Supports, None),
            ),
            (
                "stance as boolean",
                r#"{"conclusion": "It does not hold", "agrees": false}"#,
                ok("It does not hold", Opposes, None),
            ),
            (
                "negated agreement",
                r#"{"conclusion": "c", "stance": "I don't agree"}"#,
                ok("c", Opposes, None),
            ),
            (
                "different approach",
                r#"{"conclusion": "c", "stance": "a different approach"}"#,
                ok("c", Alternative, None),
            ),
            (
                "unknown stance word",
                r#"{"conclusion": "c", "stance": "banana"}"#,
                ok("c", Inconclusive, None),
            ),
            (
                "lists as strings, objects and synonyms",
                "{\"conclusion\": \"c\", \"risks\": \"- one\\n- two\\n  continued\\n\", \
                 \"counterargument\": [{\"text\": \"three\"}, \"  \", \"one\"], \
                 \"falsifying_experiment\": \"1. run it\\n2) measure\"}",
                Want::Fields {
                    conclusion: "c",
                    stance: Inconclusive,
                    risks: &["one", "two continued", "three"],
                    falsifiers: &["run it", "measure"],
                    confidence: None,
                },
            ),
            (
                "placeholder echoed then answer",
                "{\"conclusion\": \"<one paragraph>\"}\n{\"conclusion\": \"Real\"}",
                ok("Real", Inconclusive, None),
            ),
            (
                "prose answer",
                "The lock is not needed because the writer is single-threaded.",
                ok(
                    "The lock is not needed because the writer is single-threaded.",
                    Inconclusive,
                    None,
                ),
            ),
            (
                "ansi and control characters",
                "{\"conclusion\": \"\\u001b[31mred\\u001b[0m\\u0007 text\"}",
                ok("red text", Inconclusive, None),
            ),
            ("empty", " \n\t ", Want::Empty),
            (
                "json without conclusion",
                r#"{"stance": "agree", "risks": []}"#,
                Want::NoConclusion,
            ),
            ("empty object", "{}", Want::NoConclusion),
            (
                "truncated json",
                "{\"conclusion\": \"cut off",
                Want::Unparseable,
            ),
            (
                "fence with garbage",
                "```json\nnot json at all\n```",
                Want::Unparseable,
            ),
            (
                "prose in a plain fence",
                "```\nThe lock is redundant here.\n```",
                ok("The lock is redundant here.", Inconclusive, None),
            ),
            (
                "conclusion as an object",
                r#"{"conclusion": {"text": "Nested text"}, "stance": "yes"}"#,
                ok("Nested text", Supports, None),
            ),
            ("trivial prose", "Agree.", Want::TrivialProse),
            (
                "prose with a stray object",
                "Yes {\"a\": 1}",
                Want::TrivialProse,
            ),
        ];
        for (name, input, want) in cases {
            check(name, input, want);
        }
    }

    #[test]
    fn confidence_shapes() {
        let cases: &[(Value, Option<f64>)] = &[
            (json!(0.8), Some(0.8)),
            (json!("0.8"), Some(0.8)),
            (json!(80), Some(0.8)),
            (json!("80%"), Some(0.8)),
            (json!("80 %"), Some(0.8)),
            (json!("8/10"), Some(0.8)),
            (json!("8 out of 10"), Some(0.8)),
            (json!("High"), Some(0.85)),
            (json!("medium confidence"), Some(0.6)),
            (json!("low"), Some(0.3)),
            (json!("very high"), Some(0.95)),
            (json!(1), Some(1.0)),
            (json!(0), Some(0.0)),
            (json!(-3), Some(0.0)),
            (json!(250), Some(1.0)),
            (json!("3/0"), None),
            (json!("sure"), None),
            (json!(true), None),
            (json!(null), None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_confidence(input), *want, "confidence of {input}");
        }
    }

    #[test]
    fn stance_synonyms() {
        use Stance::*;
        let cases: &[(&str, Option<Stance>)] = &[
            ("supports", Some(Supports)),
            ("Agree", Some(Supports)),
            ("agrees", Some(Supports)),
            ("support", Some(Supports)),
            ("yes", Some(Supports)),
            ("correct", Some(Supports)),
            ("disagree", Some(Opposes)),
            ("oppose", Some(Opposes)),
            ("against", Some(Opposes)),
            ("no", Some(Opposes)),
            ("incorrect", Some(Opposes)),
            ("does not support", Some(Opposes)),
            ("partially", Some(Alternative)),
            ("partly agree", Some(Alternative)),
            ("alternative", Some(Alternative)),
            ("different approach", Some(Alternative)),
            ("mixed", Some(Alternative)),
            ("unsure", Some(Inconclusive)),
            ("unknown", Some(Inconclusive)),
            ("unclear", Some(Inconclusive)),
            ("inconclusive", Some(Inconclusive)),
            ("neutral", Some(Inconclusive)),
            ("", None),
            ("banana", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_stance(input), *want, "stance of {input:?}");
        }
    }

    #[test]
    fn records_are_exact_and_capped() {
        let long = "x".repeat(MAX_CONCLUSION_CHARS + 50);
        let items: Vec<String> = (0..MAX_ITEMS + 5).map(|i| format!("risk {i}")).collect();
        let answer = json!({
            "conclusion": format!("  {long}  "),
            "risks": items,
            "assumptions": ["same", "same", "", "  spaced   out  "],
            "actions": "y".repeat(MAX_ITEM_CHARS + 10),
        });
        let n = normalise(&answer.to_string()).expect("a conclusion");
        assert_eq!(n.conclusion.chars().count(), MAX_CONCLUSION_CHARS);
        assert!(n.conclusion.ends_with('…'));
        assert_eq!(n.risks.len(), MAX_ITEMS);
        assert_eq!(n.assumptions, ["same", "spaced out"]);
        assert_eq!(n.actions[0].chars().count(), MAX_ITEM_CHARS);
    }

    #[test]
    fn hostile_input_is_bounded() {
        let floods = [
            "{".repeat(300_000),
            "{\"a\":".repeat(50_000),
            "}{".repeat(200_000),
            // Tens of thousands of keys, each looked for among the ones before it.
            format!(
                "{{{}}}",
                (0..15_000)
                    .map(|i| format!("\"k{i}\":{i}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ];
        for flood in &floods {
            let started = std::time::Instant::now();
            let result = normalise(flood);
            assert!(result.is_err(), "a flood has no conclusion");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "took too long"
            );
        }
    }

    #[test]
    fn arbitrary_text_never_panics() {
        // Deterministic xorshift over an alphabet of the characters the parser cares about.
        let alphabet: Vec<char> = "{}[]\"\\,:'\u{201c}\u{201d}é🙂\n -*1.)(%/aconclusiTrueNn\u{1b}"
            .chars()
            .collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let len = (next() % 120) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let with_key = format!("{{\"conclusion\": {text}");
            for input in [&text, &with_key] {
                if let Ok(n) = normalise(input) {
                    assert!(!n.conclusion.is_empty(), "{input:?}");
                    assert!(
                        n.confidence.map_or(true, |c| (0.0..=1.0).contains(&c)),
                        "{input:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn serde_names_are_snake_case() {
        assert_eq!(
            serde_json::to_value(Stance::Alternative).unwrap(),
            json!("alternative")
        );
        let n = normalise(r#"{"conclusion": "c", "stance": "opposes"}"#).unwrap();
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(v["stance"], json!("opposes"));
        assert_eq!(v["falsifiers"], json!([]));
    }

    /// The value `serde_json` would have built, to compare the two readings.
    fn as_value(json: &Json<'_>) -> Value {
        match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.to_string()),
            Json::Array(items) => Value::Array(items.iter().map(as_value).collect()),
            Json::Object(object) => Value::Object(
                object
                    .iter()
                    .map(|(k, v)| (k.to_string(), as_value(v)))
                    .collect(),
            ),
        }
    }

    #[test]
    fn objects_read_as_serde_json_reads_them() {
        let many_keys = (0..INDEXED_OBJECT * 3)
            .map(|i| format!("\"k{}\": {i}", i % (INDEXED_OBJECT + 5)))
            .collect::<Vec<_>>()
            .join(", ");
        let cases = [
            r#"{"a": 1, "b": 2, "a": 3}"#.to_string(),
            r#"{"x": {"y": [1, -2, 3.5, 1e3, -0, 18446744073709551616]}, "x": null}"#.into(),
            r#"{"esc\"aped": "line\nbreak \u00e9 \ud83d\ude42", "plain": "é🙂"}"#.into(),
            r#"{"t": true, "f": false, "n": null, "e": [], "o": {}}"#.into(),
            format!("{{{many_keys}}}"),
            r#"{"a": 1e400}"#.into(),
            r#"{"a": 1} trailing"#.into(),
            r#"[1, 2]"#.into(),
        ];
        for text in &cases {
            let ours = serde_json::from_str::<Json<'_>>(text)
                .map(|j| as_value(&j))
                .ok();
            let theirs = serde_json::from_str::<Value>(text).ok();
            assert_eq!(ours, theirs, "reading {text}");
            if let Some(Value::Object(map)) = &theirs {
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                let object = parse_object(text).expect("an object");
                let ours: Vec<&str> = object.iter().map(|(k, _)| &**k).collect();
                assert_eq!(ours, keys, "key order of {text}");
            }
        }
    }

    #[test]
    fn every_synonym_is_found_by_its_canonical_spellings() {
        for (set, keys) in KEY_SETS.iter().enumerate() {
            for (rank, key) in keys.iter().enumerate() {
                assert!(
                    key.len() <= MAX_KEY_BYTES,
                    "`{key}` is longer than MAX_KEY_BYTES"
                );
                assert!(
                    key.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                    "`{key}` is not canonical"
                );
                assert_eq!(
                    keys.iter().position(|k| k == key),
                    Some(rank),
                    "`{key}` is repeated"
                );
                let spellings = [
                    key.to_string(),
                    key.to_uppercase(),
                    format!("  {} ", key.replace('_', "-")),
                    key.replace('_', " "),
                ];
                for spelling in &spellings {
                    let memberships =
                        memberships_of(spelling).unwrap_or_else(|| panic!("{spelling:?}"));
                    assert_eq!(
                        memberships.rank_in(set).map(usize::from),
                        Some(rank),
                        "{spelling:?} in set {set}"
                    );
                }
            }
        }
        for stranger in [
            "conclusión",
            "conclusions",
            "",
            "x".repeat(MAX_KEY_BYTES + 1).as_str(),
        ] {
            assert!(memberships_of(stranger).is_none(), "{stranger:?}");
        }
    }

    #[test]
    fn the_wide_printable_scan_agrees_with_the_plain_one() {
        let naive = |bytes: &[u8]| bytes.iter().all(|&b| (0x20..0x7f).contains(&b));
        for len in [1, 7, 8, 9, 16, 23] {
            for at in 0..len {
                for byte in 0..=u8::MAX {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = byte;
                    assert_eq!(
                        is_printable_ascii(&bytes),
                        naive(&bytes),
                        "byte {byte:#x} at {at} of {len}"
                    );
                    bytes[len - 1 - at] = 0x1f;
                    assert!(!is_printable_ascii(&bytes), "two bytes, {byte:#x} at {at}");
                }
            }
        }
        assert!(is_printable_ascii(b""));
    }
}
