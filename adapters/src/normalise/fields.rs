//! The consultation's fields from one object: its keys classified once, the wrapper read
//! through, lists collected from whatever shape they were given in.

use super::json::{Json, Object};
use super::keys::{memberships_of, KeySet, FIELD_SETS, KEY_SETS};
use super::stance::{confidence_of, parse_stance, Stance};
use super::text::{clean_cow, clean_text, collapse_whitespace, is_plain, trimmed, truncate_cow};
use super::{InvariantAnswer, Normalised, MAX_CONCLUSION_CHARS, MAX_ITEMS, MAX_ITEM_CHARS};
use std::borrow::Cow;

/// An object with each of its keys classified once, so that the many look-ups of one
/// answer (every field, the wrapper, the conclusion's synonyms) do not re-read its keys.
pub(super) struct Fields<'a> {
    pub(super) object: &'a Object<'a>,
    /// For every set a key is in, its value under the look-up order (set, rank, position)
    /// packed in one number, sorted: each set's values are one run, in the order a look-up
    /// returns them.
    hits: Vec<(u64, &'a Json<'a>)>,
    /// Where each set's run starts in `hits`; the last entry is where the runs end.
    starts: [usize; KEY_SETS.len() + 1],
}

impl<'a> Fields<'a> {
    pub(super) fn new(object: &'a Object<'a>) -> Fields<'a> {
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
    pub(super) fn lookup(&self, set: KeySet) -> impl Iterator<Item = &'a Json<'a>> + '_ {
        let set = set as usize;
        self.hits[self.starts[set]..self.starts[set + 1]]
            .iter()
            .map(|&(_, value)| value)
    }

    /// Whether any key names one of the consultation's fields.
    pub(super) fn has_field_key(&self) -> bool {
        self.starts[FIELD_SETS] > 0
    }
}

/// An object without a conclusion that wraps the answer under one key is read through it.
pub(super) fn unwrap_once(fields: Fields<'_>) -> Fields<'_> {
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
pub(super) fn from_object(fields: &Fields<'_>) -> Option<Normalised> {
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
        invariants: invariants_of(fields.object),
    })
}

/// What the answer said per invariant: `"invariants"` (or `"constraints"`) as a list of
/// `{"name", "holds", "note"}` or as an object keyed by name; a name given twice keeps
/// its first entry.
fn invariants_of(object: &Object<'_>) -> Vec<InvariantAnswer> {
    let Some((_, value)) = object.iter().find(|(key, _)| {
        matches!(
            key.trim().to_ascii_lowercase().as_str(),
            "invariants" | "constraints" | "invariant_checks"
        )
    }) else {
        return Vec::new();
    };
    let mut out: Vec<InvariantAnswer> = Vec::new();
    let mut push = |name: Option<&str>, entry: &Json<'_>| {
        let Some(name) = name.map(|n| n.trim().trim_matches('`').to_ascii_lowercase()) else {
            return;
        };
        if name.is_empty() || out.len() >= MAX_ITEMS || out.iter().any(|a| a.name == name) {
            return;
        }
        let (holds, note) = match entry {
            Json::Object(o) => {
                let get = |keys: &[&str]| {
                    o.iter()
                        .find(|(k, _)| keys.contains(&k.trim().to_ascii_lowercase().as_str()))
                        .map(|(_, v)| v)
                };
                (
                    get(&["holds", "kept", "keeps", "holds_true"]).and_then(holds_of),
                    get(&["note", "why", "reason", "comment", "explanation"])
                        .and_then(Json::as_str)
                        .map(str::to_string),
                )
            }
            other => (holds_of(other), None),
        };
        let note = note
            .map(|n| clean_text(&n, MAX_ITEM_CHARS))
            .filter(|n| !n.trim().is_empty());
        out.push(InvariantAnswer { name, holds, note });
    };
    match value {
        Json::Array(items) => {
            for item in items {
                if let Json::Object(o) = item {
                    let name = o
                        .iter()
                        .find(|(k, _)| matches!(k.trim(), "name" | "invariant" | "id"))
                        .and_then(|(_, v)| v.as_str());
                    push(name, item);
                }
            }
        }
        Json::Object(map) => {
            for (name, entry) in map {
                push(Some(name), entry);
            }
        }
        _ => {}
    }
    out
}

/// `true`, `false`, or a word for one; anything else (`null`, "unknown") is `None`.
fn holds_of(value: &Json<'_>) -> Option<bool> {
    match value {
        Json::Bool(b) => Some(*b),
        Json::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "holds" | "kept" => Some(true),
            "false" | "no" | "broken" | "violated" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A template placeholder echoed back (`<one paragraph>`, `...`) is not a conclusion.
pub(super) fn is_placeholder(text: &str) -> bool {
    (text.starts_with('<') && text.ends_with('>')) || text.chars().all(|c| c == '.' || c == '…')
}

/// The items of a list value, in order, handed to `items`.
pub(super) fn collect_items(value: &Json<'_>, items: &mut ListItems) {
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
pub(super) fn object_text(object: &Object<'_>) -> String {
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
pub(super) fn split_list_text(text: &str, items: &mut ListItems) {
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
pub(super) fn bullet_len(line: &str) -> Option<usize> {
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

pub(super) fn strip_bullet(text: &str) -> &str {
    let t = trimmed(text);
    match bullet_len(t) {
        Some(n) => trimmed(&t[n..]),
        None => t,
    }
}

/// A list's items as recorded: cleaned, de-duplicated and capped as they come.
#[derive(Default)]
pub(super) struct ListItems {
    kept: Vec<String>,
}

impl ListItems {
    pub(super) fn push(&mut self, item: &str) {
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
