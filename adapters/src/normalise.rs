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

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    let text = tail(text.trim(), MAX_READ_BYTES);
    if text.trim().is_empty() {
        return Err(NormaliseError::Empty);
    }
    let objects = parsed_objects(text);
    let mut structured = looks_structured(text);
    let mut keys_seen: Vec<String> = Vec::new();
    let mut best: Option<Normalised> = None;
    for object in &objects {
        let object = unwrap_once(object);
        if object.keys().any(|k| is_known_key(k)) {
            structured = true;
        }
        for key in object.keys() {
            if !keys_seen.contains(key) {
                keys_seen.push(key.clone());
            }
        }
        if let Some(found) = from_object(object) {
            best = Some(found);
        }
    }
    if let Some(found) = best {
        return Ok(found);
    }
    if structured {
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
        return Err(NormaliseError::NoConclusion {
            keys: if keys.is_empty() {
                "none".to_string()
            } else {
                keys
            },
        });
    }
    from_prose(unfence(text))
}

/// Read a stance liberally: `agree`, `yes`, `correct` support; `disagree`, `against`,
/// `incorrect`, a negated agreement oppose; `partially`, `mixed`, `different approach`
/// are an alternative; `unsure`, `unclear`, `neutral` are inconclusive. `None` when no
/// stance word is found.
pub fn parse_stance(text: &str) -> Option<Stance> {
    let lower = text.trim().to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return None;
    }
    let whole = words.join(" ");
    let exact = match whole.as_str() {
        "yes" | "true" | "supports" | "support" | "supported" => Some(Stance::Supports),
        "no" | "false" | "opposes" | "oppose" | "opposed" => Some(Stance::Opposes),
        "n a" | "none" => Some(Stance::Inconclusive),
        _ => None,
    };
    if exact.is_some() {
        return exact;
    }
    let any = |set: &[&str]| words.iter().any(|w| set.contains(w));
    const ALTERNATIVE: &[&str] = &[
        "partially",
        "partly",
        "partial",
        "alternative",
        "alternatively",
        "mixed",
        "different",
        "nuanced",
        "qualified",
        "somewhat",
    ];
    const OPPOSES: &[&str] = &[
        "disagree",
        "disagrees",
        "oppose",
        "opposes",
        "opposed",
        "against",
        "incorrect",
        "wrong",
        "reject",
        "rejects",
        "refute",
        "refutes",
        "refuted",
        "contradicts",
        "contradict",
        "unsupported",
    ];
    const INCONCLUSIVE: &[&str] = &[
        "inconclusive",
        "unsure",
        "unknown",
        "unclear",
        "neutral",
        "undecided",
        "uncertain",
        "insufficient",
    ];
    const SUPPORTS: &[&str] = &[
        "agree",
        "agrees",
        "support",
        "supports",
        "supported",
        "correct",
        "confirm",
        "confirms",
        "confirmed",
        "yes",
        "right",
        "sound",
        "valid",
    ];
    const NEGATIONS: &[&str] = &["not", "no", "never", "cannot", "nor"];
    let negated = any(NEGATIONS) || lower.contains("n't") || lower.contains("n\u{2019}t");
    if any(ALTERNATIVE) {
        Some(Stance::Alternative)
    } else if any(OPPOSES) {
        Some(Stance::Opposes)
    } else if any(INCONCLUSIVE) {
        Some(Stance::Inconclusive)
    } else if any(SUPPORTS) {
        if negated {
            Some(Stance::Opposes)
        } else {
            Some(Stance::Supports)
        }
    } else {
        None
    }
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

/// Every object in `text` that parses (possibly after repair), outermost first, in order.
fn parsed_objects(text: &str) -> Vec<Map<String, Value>> {
    let mut found = Vec::new();
    let mut attempts = 0;
    collect_objects(text, &mut found, &mut attempts);
    found
}

fn collect_objects(text: &str, found: &mut Vec<Map<String, Value>>, attempts: &mut usize) {
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
fn parse_repaired(candidate: &str) -> Option<Map<String, Value>> {
    let attempt = |s: &str| match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    if let Some(map) = attempt(candidate) {
        return Some(map);
    }
    let no_commas = remove_trailing_commas(candidate);
    if let Some(map) = attempt(&no_commas) {
        return Some(map);
    }
    attempt(&remove_trailing_commas(&loosen_quotes(candidate)))
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

/// Whether `key` reads as `wanted` (already canonical): `Conclusion` as `conclusion`,
/// `final-answer` as `final_answer`. Compares without allocating: it runs for every key
/// of every object against every synonym, on every answer.
fn key_is(key: &str, wanted: &str) -> bool {
    key.trim()
        .chars()
        .map(|c| {
            if c == '-' || c == ' ' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .eq(wanted.chars())
}

fn is_known_key(key: &str) -> bool {
    [
        CONCLUSION_KEYS,
        STANCE_KEYS,
        CONFIDENCE_KEYS,
        ASSUMPTION_KEYS,
        RISK_KEYS,
        ACTION_KEYS,
        FALSIFIER_KEYS,
    ]
    .iter()
    .any(|set| set.iter().any(|wanted| key_is(key, wanted)))
}

/// The values of every one of `keys` present in `object`, in the order of `keys` (keys
/// compared canonically).
fn lookup<'a>(object: &'a Map<String, Value>, keys: &[&str]) -> Vec<&'a Value> {
    let mut values = Vec::new();
    for wanted in keys {
        for (key, value) in object {
            if key_is(key, wanted) {
                values.push(value);
            }
        }
    }
    values
}

/// An object without a conclusion that wraps the answer under one key is read through it.
fn unwrap_once(object: &Map<String, Value>) -> &Map<String, Value> {
    let has_conclusion = lookup(object, CONCLUSION_KEYS)
        .iter()
        .any(|v| v.is_string());
    if has_conclusion {
        return object;
    }
    for value in lookup(object, WRAPPER_KEYS) {
        if let Value::Object(inner) = value {
            return inner;
        }
    }
    if object.len() == 1 {
        if let Some(Value::Object(inner)) = object.values().next() {
            return inner;
        }
    }
    object
}

/// The consultation's fields from one object, or `None` if it carries no conclusion.
fn from_object(object: &Map<String, Value>) -> Option<Normalised> {
    let stated_stance = lookup(object, STANCE_KEYS)
        .into_iter()
        .find_map(|v| match v {
            Value::Bool(true) => Some(Stance::Supports),
            Value::Bool(false) => Some(Stance::Opposes),
            Value::String(s) => parse_stance(s),
            _ => None,
        });
    let mut stance_from_conclusion = None;
    let mut conclusion = None;
    for value in lookup(object, CONCLUSION_KEYS) {
        let text = match value {
            Value::String(s) => clean_text(s, MAX_CONCLUSION_CHARS),
            Value::Array(items) => clean_text(
                &items
                    .iter()
                    .filter_map(|i| i.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                MAX_CONCLUSION_CHARS,
            ),
            Value::Object(inner) => clean_text(&object_text(inner), MAX_CONCLUSION_CHARS),
            _ => continue,
        };
        if text.is_empty() || is_placeholder(&text) {
            continue;
        }
        // `{"verdict": "agree", "reasoning": "..."}`: a bare stance word is the stance,
        // and the conclusion is the next key that says more.
        if text.split_whitespace().count() <= 2 && parse_stance(&text).is_some() {
            stance_from_conclusion = stance_from_conclusion.or_else(|| parse_stance(&text));
            continue;
        }
        conclusion = Some(text);
        break;
    }
    let conclusion = conclusion?;
    let list = |keys: &[&str]| {
        let mut items = Vec::new();
        for value in lookup(object, keys) {
            collect_items(value, &mut items);
        }
        finish_items(items)
    };
    Some(Normalised {
        conclusion,
        stance: stated_stance
            .or(stance_from_conclusion)
            .unwrap_or(Stance::Inconclusive),
        assumptions: list(ASSUMPTION_KEYS),
        risks: list(RISK_KEYS),
        actions: list(ACTION_KEYS),
        falsifiers: list(FALSIFIER_KEYS),
        confidence: lookup(object, CONFIDENCE_KEYS)
            .into_iter()
            .find_map(parse_confidence),
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

fn collect_items(value: &Value, items: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::String(s) => items.extend(split_list_text(s)),
        Value::Number(_) | Value::Bool(_) => items.push(value.to_string()),
        Value::Array(values) => {
            for v in values {
                match v {
                    Value::String(s) => items.push(strip_bullet(s).to_string()),
                    Value::Array(_) => collect_items(v, items),
                    Value::Object(o) => items.push(object_text(o)),
                    Value::Number(_) | Value::Bool(_) => items.push(v.to_string()),
                    Value::Null => {}
                }
            }
        }
        Value::Object(o) => {
            for v in o.values() {
                collect_items(v, items);
            }
        }
    }
}

/// The text of an object given as a list item: a text-like key, else its strings joined.
fn object_text(object: &Map<String, Value>) -> String {
    for value in lookup(object, ITEM_TEXT_KEYS) {
        if let Value::String(s) = value {
            if !s.trim().is_empty() {
                return s.clone();
            }
        }
    }
    object
        .values()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(" — ")
}

/// Split a string given where a list was asked: bulleted lines start items and other lines
/// continue them; without bullets each non-empty line is an item.
fn split_list_text(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let bulleted = lines.iter().any(|l| bullet_len(l).is_some());
    if !bulleted {
        return lines.into_iter().map(str::to_string).collect();
    }
    let mut items: Vec<String> = Vec::new();
    for line in lines {
        match bullet_len(line) {
            Some(n) => items.push(line[n..].trim().to_string()),
            None => match items.last_mut() {
                Some(last) => {
                    last.push(' ');
                    last.push_str(line);
                }
                None => items.push(line.to_string()),
            },
        }
    }
    items
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
    let t = text.trim();
    match bullet_len(t) {
        Some(n) => t[n..].trim(),
        None => t,
    }
}

/// Clean, de-duplicate and cap list items.
fn finish_items(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let flat = item.split_whitespace().collect::<Vec<_>>().join(" ");
        let cleaned = clean_text(&flat, MAX_ITEM_CHARS);
        if !cleaned.is_empty() && !is_placeholder(&cleaned) && !out.contains(&cleaned) {
            out.push(cleaned);
        }
        if out.len() == MAX_ITEMS {
            break;
        }
    }
    out
}

/// Remove control characters (newlines and tabs kept as layout), trim every line's end and
/// the whole, and cap at `max` characters with an ellipsis.
pub fn clean_text(text: &str, max: usize) -> String {
    let no_ansi = strip_ansi(text);
    let mut cleaned = String::with_capacity(no_ansi.len());
    for line in no_ansi.lines() {
        let line: String = line
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .filter(|c| !c.is_control())
            .collect();
        cleaned.push_str(line.trim_end());
        cleaned.push('\n');
    }
    let trimmed = cleaned.trim();
    truncate_chars(trimmed, max)
}

/// `text` cut to at most `max` characters, the last one an ellipsis when cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.truncate(out.trim_end().len());
    out.push('…');
    out
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
}
