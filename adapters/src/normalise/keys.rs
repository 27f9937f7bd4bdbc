//! Key synonyms: which keys of an answer are read as which consultation field, matched
//! case-insensitively with `-` and spaces read as `_`.

use super::text::trimmed;
use rustc_hash::FxHashMap;
use std::sync::OnceLock;

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
pub(super) const WRAPPER_KEYS: &[&str] = &[
    "consultation",
    "result",
    "review",
    "output",
    "data",
    "answer",
];

/// Keys whose string is taken as an item's text when a list holds objects.
pub(super) const ITEM_TEXT_KEYS: &[&str] = &[
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

/// The key sets an object's keys are looked up in. The first [`FIELD_SETS`] are the
/// consultation's fields (a key in one of them shows the answer was meant as JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeySet {
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
pub(super) const KEY_SETS: [&[&str]; 9] = [
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
pub(super) const FIELD_SETS: usize = 7;

/// The sets a canonical key is in, each with the key's rank among its synonyms: usually
/// one set, two when sets share a synonym (`answer` is a conclusion and a wrapper).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Memberships {
    /// (set, rank), the first `len` of them.
    sets: [(u8, u8); KEY_SETS.len()],
    len: u8,
}

impl Memberships {
    pub(super) fn iter(&self) -> impl Iterator<Item = (u8, u8)> + '_ {
        self.sets[..usize::from(self.len)].iter().copied()
    }

    /// The key's rank in `set`, if it is in it.
    pub(super) fn rank_in(&self, set: usize) -> Option<u8> {
        self.iter()
            .find(|&(s, _)| usize::from(s) == set)
            .map(|(_, rank)| rank)
    }
}

/// The longest canonical key of any set, in bytes (checked by a test): a longer key
/// cannot match and is not canonicalised.
pub(super) const MAX_KEY_BYTES: usize = 32;

/// Every canonical synonym and its ranks, built once: a key is then classified by one
/// lookup instead of a comparison with each synonym of each set.
pub(super) fn key_table() -> &'static KeyTable {
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
/// fixed, so a collision-resistant hash buys nothing: the Fx hash is used.
pub(super) type KeyTable = FxHashMap<&'static [u8], Memberships>;

/// The ranks of `key` read canonically (`Conclusion` as `conclusion`, `final-answer` and
/// `final answer` as `final_answer`, surrounding whitespace ignored), or `None` when it is
/// in no set. Every synonym is ASCII, so a key with any other character matches none.
pub(super) fn memberships_of(key: &str) -> Option<&'static Memberships> {
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
