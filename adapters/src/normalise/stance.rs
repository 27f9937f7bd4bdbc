//! Stance and confidence, read liberally.

use super::json::Json;
use super::text::trimmed;
use serde_json::Value;
use std::borrow::Cow;

/// An advisor's stance on the executor's hypothesis: the records' own type.
pub use advisord_core::Stance;

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
pub(super) fn has_negating_contraction(text: &str) -> bool {
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
pub(super) fn confidence_of(value: &Json<'_>) -> Option<f64> {
    match value {
        Json::Number(n) => n.as_f64().and_then(from_number),
        Json::String(s) => confidence_from_text(s),
        _ => None,
    }
}

pub(super) fn confidence_from_text(text: &str) -> Option<f64> {
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
pub(super) fn leading_number(text: &str) -> Option<(f64, &str)> {
    let end = text
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.'))
        .map_or(text.len(), |(i, _)| i);
    let number = text[..end].parse::<f64>().ok()?;
    Some((number, &text[end..]))
}

pub(super) fn from_number(x: f64) -> Option<f64> {
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
