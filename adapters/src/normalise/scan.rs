//! Finding the objects in an answer and repairing near-JSON: balanced spans, trailing
//! commas, single and typographic quotes, Python literals.

use super::json::{owned_object, parse_object, Object};

/// How many candidate objects are parsed at most, so hostile input costs bounded time.
pub(super) const MAX_PARSE_ATTEMPTS: usize = 64;

/// Every object in `text` that parses (possibly after repair), outermost first, in order.
pub(super) fn parsed_objects(text: &str) -> Vec<Object<'_>> {
    let mut found = Vec::new();
    let mut attempts = 0;
    collect_objects(text, &mut found, &mut attempts);
    found
}

pub(super) fn collect_objects<'a>(
    text: &'a str,
    found: &mut Vec<Object<'a>>,
    attempts: &mut usize,
) {
    for (start, end) in balanced_spans(text) {
        if *attempts >= MAX_PARSE_ATTEMPTS {
            return;
        }
        *attempts += 1;
        let candidate = &text[start..=end];
        if let Some(object) = parse_repaired(candidate) {
            found.push(object);
        } else {
            // The outer braces were not JSON (prose in braces, code): look inside.
            collect_objects(&text[start + 1..end], found, attempts);
        }
    }
}

/// How many times the span scan restarts after an unclosed `{` (prose like `a { b` before
/// the JSON); bounded so a flood of `{` costs linear time.
pub(super) const MAX_RESCANS: usize = 16;

/// Top-level balanced `{...}` spans (inclusive byte offsets); double-quoted strings inside
/// an object are skipped so braces in strings do not count. An unclosed `{` is skipped and
/// the scan goes on after it.
pub(super) fn balanced_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    for _ in 0..=MAX_RESCANS {
        let (found, unclosed) = scan_spans(&text[from..]);
        spans.extend(found.into_iter().map(|(s, e)| (s + from, e + from)));
        match unclosed {
            Some(start) => from += start + 1,
            None => break,
        }
    }
    spans
}

/// One pass of [`balanced_spans`]: the spans found and the start of an unclosed one.
pub(super) fn scan_spans(text: &str) -> (Vec<(usize, usize)>, Option<usize>) {
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' if depth > 0 => in_string = true,
            b'{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    spans.push((start, i));
                }
            }
            _ => {}
        }
    }
    (spans, (depth > 0).then_some(start))
}

/// Parse an object strictly, then after removing trailing commas, then after converting
/// single quotes, typographic quotes and Python literals.
pub(super) fn parse_repaired(candidate: &str) -> Option<Object<'_>> {
    if let Some(object) = parse_object(candidate) {
        return Some(object);
    }
    // A repaired copy is dropped here: what is kept of it is owned.
    let no_commas = remove_trailing_commas(candidate);
    if let Some(object) = parse_object(&no_commas) {
        return Some(owned_object(object));
    }
    let loosened = remove_trailing_commas(&loosen_quotes(candidate));
    parse_object(&loosened).map(owned_object)
}

/// Drop a `,` that is followed (after whitespace) by `}` or `]`, outside strings.
pub(super) fn remove_trailing_commas(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Turn single-quoted and typographically quoted strings into JSON strings and Python's
/// `True`/`False`/`None` into JSON literals.
pub(super) fn loosen_quotes(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    // The quote character that opened the current string, if inside one.
    let mut open: Option<char> = None;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "True" => "true",
            "False" => "false",
            "None" => "null",
            other => other,
        });
        word.clear();
    };
    while let Some(c) = chars.next() {
        match open {
            Some(q) => {
                let closes = match q {
                    '\u{201c}' => c == '\u{201d}',
                    other => c == other,
                };
                if c == '\\' {
                    out.push(c);
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else if closes {
                    out.push('"');
                    open = None;
                } else if c == '"' {
                    out.push_str("\\\"");
                } else {
                    out.push(c);
                }
            }
            None => {
                if c.is_alphabetic() {
                    word.push(c);
                    continue;
                }
                flush(&mut word, &mut out);
                if c == '"' || c == '\'' || c == '\u{201c}' {
                    open = Some(c);
                    out.push('"');
                } else {
                    out.push(c);
                }
            }
        }
    }
    flush(&mut word, &mut out);
    out
}
