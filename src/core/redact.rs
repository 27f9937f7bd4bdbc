//! Scrubbing of secret shapes and terminal control characters from every string a record
//! carries.
//!
//! Records are read back in terminals and pasted into prompts, so a string that once held
//! a credential or an escape sequence must not carry it into the store. The shapes are
//! named neutrally (by what they look like, not by who issues them) so that the names
//! written into `redacted` stay stable and the core stays free of vendor names.

use advisord_core::patterns::Patterns;
use regex::{Captures, Regex};
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// One secret shape: its stable name, the pattern, and an optional extra test that keeps
/// ordinary words (say, a library called `sk-learn-...`) from being taken for keys.
struct Shape {
    name: &'static str,
    pattern: &'static str,
    /// When set, a match is only a secret if this accepts the matched text.
    plausible: Option<fn(&str) -> bool>,
}

/// The shapes, most specific first: a string is scrubbed shape by shape in this order, so
/// `Bearer sk-...` is named after the key, not the generic bearer token.
const SHAPES: &[Shape] = &[
    Shape {
        name: "private_key_block",
        // An unterminated block is scrubbed to the end of the text: half a key is a key.
        pattern: concat!(
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?",
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)"
        ),
        plausible: None,
    },
    Shape {
        name: "api_key_sk_ant",
        pattern: r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        plausible: None,
    },
    Shape {
        name: "api_key_sk",
        pattern: r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        plausible: Some(has_digit_and_letter),
    },
    Shape {
        name: "api_key_aiza",
        pattern: r"\bAIza[0-9A-Za-z_-]{30,}",
        plausible: None,
    },
    Shape {
        name: "cloud_access_key",
        pattern: r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        plausible: None,
    },
    Shape {
        name: "cloud_secret_key",
        // Only when labelled: forty characters of base64 alone are too common to call secret.
        pattern: r#"(?i)(?P<keep>secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}\b"#,
        plausible: None,
    },
    Shape {
        name: "git_host_token",
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        plausible: None,
    },
    Shape {
        name: "chat_token",
        pattern: r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        plausible: None,
    },
    Shape {
        name: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        plausible: None,
    },
    Shape {
        name: "bearer_token",
        pattern: r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}",
        plausible: Some(has_digit_and_letter),
    },
];

/// The names of every shape [`scrub`] recognises, in the order it applies them.
pub fn shape_names() -> impl Iterator<Item = &'static str> {
    SHAPES.iter().map(|s| s.name)
}

/// Real keys are random: they mix digits and letters, where words and names rarely do.
fn has_digit_and_letter(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit()) && text.bytes().any(|b| b.is_ascii_alphabetic())
}

/// The compiled shapes, built once, plus a set to skip the common case of no secret at all.
struct Compiled {
    /// Every shape at once, keeping at most [`CACHES_KEPT`] search caches (why: see
    /// `advisord_core::patterns`).
    set: Patterns,
    each: Vec<Regex>,
}

/// How many search caches of the shapes' set are kept between scrubs.
const CACHES_KEPT: usize = 4;

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| Compiled {
    set: Patterns::new(
        &SHAPES.iter().map(|s| s.pattern).collect::<Vec<_>>(),
        CACHES_KEPT,
    )
    .expect("secret shapes compile"),
    each: SHAPES
        .iter()
        .map(|s| Regex::new(s.pattern).expect("secret shape compiles"))
        .collect(),
});

/// Whether `c` is a control character to drop: C0 except newline and tab, DEL, and C1.
fn is_dropped_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}'
}

/// Remove secret shapes (replaced by `[redacted:<shape>]`) and terminal control characters
/// from `text`, adding the names of the shapes removed to `shapes`.
///
/// Newlines and tabs are kept (multi-line text is allowed where the writer allows it);
/// every other control character is dropped, and escape sequences are dropped whole.
/// Controls go first so that a key split by escape codes is still recognised.
pub fn scrub(text: &str, shapes: &mut BTreeSet<String>) -> String {
    scrub_with(text, &[], shapes)
}

/// The name written into `redacted` when a credential value the request itself carried
/// was removed by value.
pub const CREDENTIAL_VALUE: &str = "credential_value";

/// Values shorter than this are not scrubbed by value: they would match ordinary text.
pub const MIN_SCRUBBED_VALUE_CHARS: usize = 8;

/// [`scrub`], and first every occurrence of one of `values` (the request's own credential
/// values), whatever its shape, replaced by `[redacted:credential_value]`. A value is found
/// even when whitespace or line breaks were put inside it (an answer wrapped at 80
/// columns); values shorter than [`MIN_SCRUBBED_VALUE_CHARS`] are left to the shapes.
pub fn scrub_with(text: &str, values: &[String], shapes: &mut BTreeSet<String>) -> String {
    let mut clean = strip_controls(text);
    if !values.is_empty() {
        let (scrubbed, hit) = scrub_values(&clean, values);
        if hit {
            clean = scrubbed;
            shapes.insert(CREDENTIAL_VALUE.to_string());
        }
    }
    let compiled = &*COMPILED;
    let found = compiled.set.matching(&clean);
    if found.is_empty() {
        return clean;
    }
    for index in found {
        let shape = &SHAPES[index];
        let mut hit = false;
        let replaced = compiled.each[index].replace_all(&clean, |caps: &Captures| {
            let whole = caps.get(0).map_or("", |m| m.as_str());
            let keep = caps.name("keep").map_or("", |m| m.as_str());
            let secret = &whole[keep.len()..];
            if shape.plausible.is_some_and(|ok| !ok(secret)) {
                return whole.to_string();
            }
            hit = true;
            format!("{keep}[redacted:{}]", shape.name)
        });
        if hit {
            clean = replaced.into_owned();
            shapes.insert(shape.name.to_string());
        }
    }
    clean
}

/// `text` with every occurrence of a value of `values` replaced, ignoring whitespace inside
/// the occurrence; whether anything was replaced.
fn scrub_values(text: &str, values: &[String]) -> (String, bool) {
    // The text without whitespace, and where each of its characters starts and ends in
    // `text`.
    let mut compact = String::with_capacity(text.len());
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        if !c.is_whitespace() {
            compact.push(c);
            for _ in 0..c.len_utf8() {
                spans.push((at, at + c.len_utf8()));
            }
        }
    }
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for value in values {
        let needle: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        if needle.chars().count() < MIN_SCRUBBED_VALUE_CHARS {
            continue;
        }
        for (start, found) in compact.match_indices(needle.as_str()) {
            let end = start + found.len() - 1;
            ranges.push((spans[start].0, spans[end].1));
        }
    }
    if ranges.is_empty() {
        return (text.to_string(), false);
    }
    ranges.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut next = 0;
    for (start, end) in ranges {
        if start < next {
            // Overlaps the previous occurrence: extend it.
            next = next.max(end);
            continue;
        }
        out.push_str(&text[next..start]);
        out.push_str("[redacted:");
        out.push_str(CREDENTIAL_VALUE);
        out.push(']');
        next = end;
    }
    out.push_str(&text[next..]);
    (out, true)
}

/// `text` without escape sequences and control characters (newline and tab kept).
fn strip_controls(text: &str) -> String {
    if !text.chars().any(is_dropped_control) {
        return text.to_string();
    }
    advisord_core::ansi::strip_ansi(text)
        .chars()
        .filter(|&c| !is_dropped_control(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scrub `input` and expect `output` with exactly the shapes `named`.
    fn check(input: &str, output: &str, named: &[&str]) {
        let mut shapes = BTreeSet::new();
        let got = scrub(input, &mut shapes);
        assert_eq!(got, output, "scrubbing {input:?}");
        let got_names: Vec<&str> = shapes.iter().map(String::as_str).collect();
        assert_eq!(got_names, named, "shapes named for {input:?}");
    }

    #[test]
    fn the_requests_own_credential_values_are_scrubbed_by_value() {
        let values = vec!["zq.Fancy-Value:7781/pw".to_string(), "short".to_string()];
        let scrub_them = |input: &str| {
            let mut shapes = BTreeSet::new();
            let out = scrub_with(input, &values, &mut shapes);
            (out, shapes.into_iter().collect::<Vec<_>>())
        };
        let named = vec![CREDENTIAL_VALUE.to_string()];
        // A shape no pattern knows, echoed as is, twice.
        assert_eq!(
            scrub_them("my key is zq.Fancy-Value:7781/pw, again zq.Fancy-Value:7781/pw."),
            (
                "my key is [redacted:credential_value], again [redacted:credential_value]."
                    .to_string(),
                named.clone()
            )
        );
        // Split across lines, and with an escape sequence inside.
        assert_eq!(
            scrub_them("key: zq.Fancy-Val\n  ue:77\x1b[31m81/pw end"),
            ("key: [redacted:credential_value] end".to_string(), named)
        );
        // A short value is left alone (it would match ordinary words).
        assert_eq!(
            scrub_them("a short answer"),
            ("a short answer".to_string(), vec![])
        );
    }

    #[test]
    fn every_secret_shape() {
        let jwt = concat!(
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.",
            "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
        );
        let pem =
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z\n-----END RSA PRIVATE KEY-----";
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "key sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD here",
                "key [redacted:api_key_sk] here",
                &["api_key_sk"],
            ),
            (
                "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Q",
                "[redacted:api_key_sk]",
                &["api_key_sk"],
            ),
            (
                "x=sk-ant-api03-Abc123Def456Ghi789Jkl012Mno345",
                "x=[redacted:api_key_sk_ant]",
                &["api_key_sk_ant"],
            ),
            (
                "AIzaSyD3x4mPl3K3yV4lu3F0rT3st1ngOnlyAbCd",
                "[redacted:api_key_aiza]",
                &["api_key_aiza"],
            ),
            (
                "id AKIAIOSFODNN7EXAMPLE and ASIAY34FZKBOKMUTVV7A",
                "id [redacted:cloud_access_key] and [redacted:cloud_access_key]",
                &["cloud_access_key"],
            ),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [redacted:cloud_secret_key]",
                &["cloud_secret_key"],
            ),
            (
                "ghp_1234567890abcdefghijABCDEFGHIJ123456",
                "[redacted:git_host_token]",
                &["git_host_token"],
            ),
            (
                "gho_abcdefghijklmnopqrstuvwxyz0123456789 ghs_abcdefghijklmnopqrstuvwxyz0123456789",
                "[redacted:git_host_token] [redacted:git_host_token]",
                &["git_host_token"],
            ),
            (
                "ghu_abcdefghijklmnopqrstuvwxyz0123456789;ghr_abcdefghijklmnopqrstuvwxyz0123456789",
                "[redacted:git_host_token];[redacted:git_host_token]",
                &["git_host_token"],
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[redacted:git_host_token]",
                &["git_host_token"],
            ),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "[redacted:chat_token]",
                &["chat_token"],
            ),
            (
                "xoxp-1234-5678-abcdef and xoxa-2-abcdefghij",
                "[redacted:chat_token] and [redacted:chat_token]",
                &["chat_token"],
            ),
            (
                "Authorization: Bearer abc123DEF456ghi789JKL",
                "Authorization: Bearer [redacted:bearer_token]",
                &["bearer_token"],
            ),
            (
                &format!("token {jwt} end"),
                "token [redacted:jwt] end",
                &["jwt"],
            ),
            (
                &format!("before\n{pem}\nafter"),
                "before\n[redacted:private_key_block]\nafter",
                &["private_key_block"],
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
                "[redacted:private_key_block]",
                &["private_key_block"],
            ),
            (
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY----- tail",
                "[redacted:private_key_block] tail",
                &["private_key_block"],
            ),
        ];
        for (input, output, named) in cases {
            check(input, output, named);
        }
    }

    #[test]
    fn the_most_specific_shape_names_a_key_in_a_header() {
        check(
            "Bearer sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
            "Bearer [redacted:api_key_sk]",
            &["api_key_sk"],
        );
        check(
            &format!("Bearer {}", "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl"),
            "Bearer [redacted:jwt]",
            &["jwt"],
        );
        check(
            "a sk-ant-api03-Abc123Def456Ghi789Jkl012Mno345 and AKIAIOSFODNN7EXAMPLE",
            "a [redacted:api_key_sk_ant] and [redacted:cloud_access_key]",
            &["api_key_sk_ant", "cloud_access_key"],
        );
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for text in [
            "",
            "use sk-learn-is-a-python-library-name for it",
            "the bearer of bad news",
            "Bearer tokens are described in the authentication document",
            "task-sk-abc",
            "AKIA is a prefix",
            "an ask-abcdefghijklmnopqrstuvwxyz0123 word",
            "multi\nline\ttext",
            "Unicode: Größe, 東京, emoji 🙂",
            "ghp_short",
        ] {
            check(text, text, &[]);
        }
    }

    #[test]
    fn terminal_controls_are_removed() {
        let cases: &[(&str, &str)] = &[
            ("\x1b[31mred\x1b[0m", "red"),
            ("\x1b[1;2;3mbold", "bold"),
            ("title\x1b]0;owned\x07 done", "title done"),
            ("link \x1b]8;;http://x\x1b\\text\x1b]8;;\x1b\\", "link text"),
            ("bell\x07 back\x08space del\x7f", "bell backspace del"),
            ("c1 \u{9b}31mx \u{85}y", "c1 x y"),
            ("carriage\r\nreturn", "carriage\nreturn"),
            ("keep\ttab\nnewline", "keep\ttab\nnewline"),
            ("esc at end \x1b", "esc at end "),
            ("\x1bcreset", "reset"),
            ("nul\0byte", "nulbyte"),
        ];
        for (input, output) in cases {
            check(input, output, &[]);
        }
    }

    #[test]
    fn a_key_split_by_escape_codes_is_still_found() {
        check(
            "AKIAIOSF\x1b[0mODNN7EXAMPLE",
            "[redacted:cloud_access_key]",
            &["cloud_access_key"],
        );
    }

    #[test]
    fn shape_names_are_stable_and_unique() {
        let names: Vec<&str> = shape_names().collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(names.len(), unique.len());
        for name in names {
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
        }
    }
}
