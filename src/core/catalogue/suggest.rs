//! "Did you mean": the accepted word nearest to a likely typo.

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
