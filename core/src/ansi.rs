//! Terminal escape sequences, removed whole from text that came from elsewhere (an
//! advisor's answer or error output, a caller's record), so no parameter bytes are left
//! behind as text (`[31m`).

use regex::Regex;
use std::sync::LazyLock;

/// Escape sequences a terminal interprets: CSI (`ESC [` ... final byte, or its one-byte
/// form U+009B), OSC and the other string controls (DCS, SOS, PM, APC, also in their
/// one-byte forms) up to their terminator, and two-byte `ESC x` sequences with any
/// intermediate bytes. Compiled once, read-only after.
static ESCAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?:\x1b\[|\x{9b})[0-?]*[ -/]*[@-~]?",
        r"|(?:\x1b[\]PX^_]|[\x{90}\x{98}\x{9d}\x{9e}\x{9f}])",
        r"[^\x07\x1b\x{9c}]*(?:\x07|\x1b\\|\x{9c})?",
        r"|\x1b[ -/]*[0-~]?",
    ))
    .expect("escape pattern compiles")
});

/// Whether `text` may hold an escape sequence (an `ESC`, or a C1 control that opens one).
/// Judged by bytes: a C1 control is encoded `C2 80`..`C2 9F`.
fn may_hold_escape(text: &str) -> bool {
    text.as_bytes().iter().any(|&b| b == 0x1b || b == 0xc2)
        && (text.contains('\u{1b}')
            || text
                .chars()
                .any(|c| matches!(c, '\u{90}' | '\u{98}' | '\u{9b}' | '\u{9d}'..='\u{9f}')))
}

/// `text` without its escape sequences (see [`ESCAPES`]); other characters, control
/// characters included, are left for the caller to judge.
pub fn strip_ansi(text: &str) -> String {
    if !may_hold_escape(text) {
        return text.to_string();
    }
    ESCAPES.replace_all(text, "").into_owned()
}

#[cfg(test)]
mod tests {
    use super::strip_ansi;

    #[test]
    fn every_form_of_escape_is_removed_whole() {
        let cases: &[(&str, &str)] = &[
            ("\x1b[31mred\x1b[0m", "red"),
            ("\x1b[1;2;3mbold", "bold"),
            ("title\x1b]0;owned\x07 done", "title done"),
            ("link \x1b]8;;http://x\x1b\\text\x1b]8;;\x1b\\", "link text"),
            ("c1 \u{9b}31mx", "c1 x"),
            ("dcs \x1bPq#0\x1b\\end", "dcs end"),
            ("esc at end \x1b", "esc at end "),
            ("\x1bcreset", "reset"),
            ("\x1b(Bcharset", "charset"),
            (
                "plain text\nwith a newline\t",
                "plain text\nwith a newline\t",
            ),
        ];
        for (input, output) in cases {
            assert_eq!(strip_ansi(input), *output, "{input:?}");
        }
    }
}
