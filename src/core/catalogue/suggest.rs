//! "Did you mean": the accepted word nearest to a likely typo.

/// The number of single-character edits that turn `a` into `b` (Levenshtein, by
/// `strsim`).
pub fn edit_distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
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
