//! Scrubbing of secret shapes and terminal control characters from every string a record
//! carries (SPEC §4).

/// Remove secret shapes (replaced by `[redacted:<shape>]`) and terminal control characters
/// from `text`, adding the names of the shapes removed to `shapes`.
pub fn scrub(text: &str, shapes: &mut std::collections::BTreeSet<String>) -> String {
    let _ = (text, shapes);
    todo!("redact: scrub")
}
