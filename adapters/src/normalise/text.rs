//! Text cleaning: trimming, control characters, whitespace, caps, ANSI escapes.

use std::borrow::Cow;

/// `text.trim()`, answered from the end bytes alone when both are visible ASCII (the usual
/// case), without decoding characters from either end.
pub(super) fn trimmed(text: &str) -> &str {
    match (text.as_bytes().first(), text.as_bytes().last()) {
        (Some(first), Some(last)) if first.is_ascii_graphic() && last.is_ascii_graphic() => text,
        _ => text.trim(),
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub(super) fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Whether `text` is non-empty printable ASCII with single spaces between words and none
/// at either end: collapsing its whitespace and cleaning it changes nothing.
pub(super) fn is_plain(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first != b' ' && last != b' ' && is_printable_ascii(bytes) && !text.contains("  ")
}

/// `text` with every whitespace run made one space and none at either end; borrowed when
/// it is so already (the common item).
pub(super) fn collapse_whitespace(text: &str) -> Cow<'_, str> {
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
pub(super) fn is_collapsed(text: &str) -> bool {
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
pub(super) fn clean_cow(text: &str, max: usize) -> Cow<'_, str> {
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
pub(super) fn may_hold_control(text: &str) -> bool {
    !is_printable_ascii(text.as_bytes()) && text.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2)
}

/// Whether every byte is printable ASCII (`0x20`..`0x7e`), eight bytes a step: the usual
/// answer text passes this test and so skips the byte-by-byte ones.
pub(super) fn is_printable_ascii(bytes: &[u8]) -> bool {
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
pub(super) fn truncate_cow(text: &str, max: usize) -> Cow<'_, str> {
    // A text of at most `max` bytes has at most `max` characters.
    if text.len() <= max || text.chars().count() <= max {
        return Cow::Borrowed(text);
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.truncate(out.trim_end().len());
    out.push('…');
    Cow::Owned(out)
}

/// Remove ANSI escape sequences (CSI, OSC and the other string controls, two-character
/// escapes, and their one-byte C1 forms), which would otherwise leave `[31m` behind: the
/// one stripper, shared with the writer's scrubbing.
pub use advisord_core::ansi::strip_ansi;
