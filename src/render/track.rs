//! The text of advisors' track records, shared by `advisors`, `context` and `status`:
//! the counts always with their size, and the note that they change no plan.

use super::text::Out;
use crate::core::track::{TrackRecord, INFORMATION_ONLY};

/// A track record in a table cell: `favoured 3 of 4`, and how many favoured neither
/// side when any did (the rest were disfavoured), or `-`.
pub(super) fn cell(track: &TrackRecord) -> String {
    if track.is_empty() {
        return "-".to_string();
    }
    let neither = track
        .resolutions
        .saturating_sub(track.favoured + track.disfavoured);
    let mut cell = format!("favoured {} of {}", track.favoured, track.resolutions);
    if neither > 0 {
        cell.push_str(&format!(", {neither} neither"));
    }
    cell
}

/// The note every surface prints under track records.
pub(super) fn note() -> &'static str {
    INFORMATION_ONLY
}

/// A section of track records under `title`, one advisor a line with its most recent
/// resolutions when `recent` is asked for; nothing when no advisor has one.
pub(super) fn section<'a>(
    out: &mut Out,
    title: &str,
    records: impl IntoIterator<Item = (&'a str, &'a TrackRecord)>,
    recent: bool,
) {
    let records: Vec<_> = records.into_iter().filter(|(_, t)| !t.is_empty()).collect();
    if records.is_empty() {
        return;
    }
    out.line(&format!("{title}:"));
    for (advisor, track) in records {
        out.para(2, 2, &format!("{advisor}: {}", track.summary()));
        if recent {
            for r in &track.recent {
                out.para(
                    4,
                    2,
                    &format!(
                        "{} {} in `{}`: {}",
                        r.outcome.as_str(),
                        r.at,
                        r.task,
                        r.subject
                    ),
                );
            }
        }
    }
    out.para(0, 2, INFORMATION_ONLY);
}
