//! Small text helpers for plain and table output: cut or wrap to a width, aligned tables.
//! Widths count characters, which is what a terminal shows for the text we write.

use super::WIDTH;

/// `text` on one line, cut to `width` characters with an ellipsis when longer.
pub fn truncate(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len().min(width.saturating_mul(4)));
    push_truncated(&mut out, text, width);
    out
}

/// Append `text` to `out` on one line (control characters become spaces), cut to `width`
/// characters with an ellipsis when longer.
pub fn push_truncated(out: &mut String, text: &str, width: usize) {
    // Most lines are short and clean: copy them whole.
    if text.len() <= width && !text.chars().any(char::is_control) {
        out.push_str(text);
        return;
    }
    let fits = text.chars().count() <= width;
    let keep = if fits { width } else { width.saturating_sub(1) };
    for c in text.chars().take(keep) {
        out.push(if c.is_control() { ' ' } else { c });
    }
    if !fits && width > 0 {
        out.push('…');
    }
}

/// `text` (whitespace collapsed) broken into lines of at most `width` characters; a word
/// longer than the width is split. Never empty: an empty text is one empty line.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    wrap_hanging(text, width, width)
}

/// Like [`wrap`], with the first line `first` characters wide and the others `rest`.
pub fn wrap_hanging(text: &str, first: usize, rest: usize) -> Vec<String> {
    let mut lines = Vec::new();
    wrap_each(text, first, rest, |_, line| lines.push(line.to_string()));
    lines
}

/// Break `text` as [`wrap_hanging`] does, handing each line (with its index) to `emit`
/// instead of collecting them: plain output of large tasks writes many lines.
pub fn wrap_each(text: &str, first: usize, rest: usize, emit: impl FnMut(usize, &str)) {
    wrap_into(&mut String::new(), text, first, rest, emit);
}

/// [`wrap_each`] building each line in `line` (cleared first), so a caller writing many
/// paragraphs reuses one buffer.
fn wrap_into(
    line: &mut String,
    text: &str,
    first: usize,
    rest: usize,
    mut emit: impl FnMut(usize, &str),
) {
    let (first, rest) = (first.max(1), rest.max(1));
    line.clear();
    let mut index = 0;
    let mut len = 0;
    for mut word in text.split_whitespace() {
        let mut chars = if word.is_ascii() {
            word.len()
        } else {
            word.chars().count()
        };
        while chars > 0 {
            let width = if index == 0 { first } else { rest };
            let room = if len == 0 {
                width
            } else {
                width.saturating_sub(len + 1)
            };
            if chars <= room {
                if len > 0 {
                    line.push(' ');
                    len += 1;
                }
                line.push_str(word);
                len += chars;
                chars = 0;
            } else if len > 0 {
                // Start a new line; a word longer than any line is split there.
                emit(index, line);
                index += 1;
                line.clear();
                len = 0;
            } else {
                let cut = word
                    .char_indices()
                    .nth(width)
                    .map_or(word.len(), |(i, _)| i);
                emit(index, &word[..cut]);
                index += 1;
                word = &word[cut..];
                chars -= width;
            }
        }
    }
    if len > 0 || index == 0 {
        emit(index, line);
    }
}

/// Plain output under construction: every line fits [`WIDTH`].
#[derive(Debug, Default)]
pub struct Out {
    text: String,
    /// Where a line is formatted or wrapped before it is cut into `text`, reused.
    scratch: String,
    /// The line being wrapped, reused.
    wrapped: String,
}

impl Out {
    /// An empty output.
    pub fn new() -> Out {
        Out::default()
    }

    /// An empty output with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> Out {
        Out {
            text: String::with_capacity(bytes),
            ..Out::default()
        }
    }

    /// One line, cut to the width.
    pub fn line(&mut self, line: &str) {
        push_truncated(&mut self.text, line, WIDTH);
        self.text.push('\n');
    }

    /// One formatted line, cut to the width, without a string of its own.
    pub fn line_fmt(&mut self, args: std::fmt::Arguments) {
        use std::fmt::Write as _;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        // Writing to a `String` never fails.
        let _ = scratch.write_fmt(args);
        self.line(&scratch);
        self.scratch = scratch;
    }

    /// A formatted paragraph as [`Out::para`], without a string of its own.
    pub fn para_fmt(&mut self, indent: usize, hang: usize, args: std::fmt::Arguments) {
        use std::fmt::Write as _;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let _ = scratch.write_fmt(args);
        self.para(indent, hang, &scratch);
        self.scratch = scratch;
    }

    /// One line as it is, never cut (text meant to be copied, such as a template).
    pub fn verbatim(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// An empty line.
    pub fn blank(&mut self) {
        self.text.push('\n');
    }

    /// `text` wrapped under `indent` spaces, continuation lines indented `hang` more.
    pub fn para(&mut self, indent: usize, hang: usize, text: &str) {
        let first = WIDTH.saturating_sub(indent).max(20);
        let rest = WIDTH.saturating_sub(indent + hang).max(20);
        let out = &mut self.text;
        wrap_into(&mut self.wrapped, text, first, rest, |i, line| {
            let pad = if i == 0 { indent } else { indent + hang };
            (0..pad).for_each(|_| out.push(' '));
            push_truncated(out, line, WIDTH.saturating_sub(pad));
            out.push('\n');
        });
    }

    /// `label: value` wrapped under `indent`; nothing when `value` is empty.
    pub fn field(&mut self, indent: usize, label: &str, value: &str) {
        if !value.trim().is_empty() {
            self.para(indent, 2, &format!("{label}: {value}"));
        }
    }

    /// `label:` and each item as a `- ` bullet; nothing when there are no items.
    pub fn list<S: AsRef<str>>(&mut self, indent: usize, label: &str, items: &[S]) {
        if items.is_empty() {
            return;
        }
        self.line(&format!("{}{label}:", " ".repeat(indent)));
        for item in items {
            self.para(indent + 2, 2, &format!("- {}", item.as_ref()));
        }
    }

    /// The text.
    pub fn finish(self) -> String {
        self.text
    }
}

/// A table of aligned columns. No column but the last is ever cut (ids stay whole); the
/// last one wraps under itself so lines fit [`WIDTH`] when they can, and is given at least
/// [`MIN_LAST_COLUMN`] characters when the other columns are wide.
#[derive(Debug)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// The narrowest the last column of a [`Table`] gets before lines go past [`WIDTH`].
pub const MIN_LAST_COLUMN: usize = 24;

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_uppercase()).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row (missing cells are empty, extra ones dropped).
    pub fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        let mut row: Vec<String> = cells
            .iter()
            .take(self.headers.len())
            .map(|c| truncate(c.as_ref(), usize::MAX))
            .collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// The aligned text: the headers, then each row, its last cell wrapped.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let before: usize = widths[..columns.saturating_sub(1)]
            .iter()
            .map(|w| w + 2)
            .sum();
        if let Some(last) = widths.last_mut() {
            *last = (*last).min(WIDTH.saturating_sub(before).max(MIN_LAST_COLUMN));
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            let mut rest: Vec<String> = Vec::new();
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                if i + 1 == columns {
                    let mut wrapped = wrap(cell, *width).into_iter();
                    line.push_str(&wrapped.next().unwrap_or_default());
                    rest.extend(wrapped);
                } else {
                    let pad = width - cell.chars().count();
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
            for continued in rest {
                out.push_str(&" ".repeat(before));
                out.push_str(&continued);
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_truncate(text: &str, width: usize, expected: &str) {
        assert_eq!(truncate(text, width), expected);
    }

    #[test]
    fn a_table_keeps_ids_whole_and_wraps_the_last_column() {
        let id = "01JGQ0V3A0000000000000A001-and-longer-than-usual";
        let summary = "Keep queued consultation jobs in a journal so that a restart loses none \
                       of them, and resume each interrupted one";
        let mut table = Table::new(&["id", "state", "summary"]);
        table.row(&[id, "concluded", summary]);
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with(id), "{text}");
        let words: Vec<&str> = text.split_whitespace().collect();
        for word in summary.split_whitespace() {
            assert!(words.contains(&word), "`{word}` was cut: {text}");
        }
        assert!(!text.contains('…'), "{text}");
        assert!(lines.len() > 2, "the summary wraps: {text}");
        let column = lines[1].find("Keep").unwrap();
        for line in &lines[2..] {
            assert_eq!(line.len() - line.trim_start().len(), column, "{text}");
            assert!(
                line.chars().count() <= WIDTH.max(column + MIN_LAST_COLUMN),
                "{text}"
            );
        }
    }

    #[test]
    fn truncation() {
        check_truncate("short", 10, "short");
        check_truncate("exactly10!", 10, "exactly10!");
        check_truncate("a longer text", 8, "a longe…");
        check_truncate("ééééé", 3, "éé…");
        check_truncate("tab\there", 20, "tab here");
        check_truncate("x", 0, "");
    }

    fn check_wrap(text: &str, width: usize, expected: &[&str]) {
        assert_eq!(wrap(text, width), expected);
    }

    #[test]
    fn wrapping() {
        check_wrap("one two three", 7, &["one two", "three"]);
        check_wrap("one two three", 80, &["one two three"]);
        check_wrap("", 10, &[""]);
        check_wrap("  spaced\n\nout  ", 20, &["spaced out"]);
        check_wrap("abcdefghij", 4, &["abcd", "efgh", "ij"]);
        check_wrap("ab abcdefghij", 4, &["ab", "abcd", "efgh", "ij"]);
        check_wrap("ab cd", 2, &["ab", "cd"]);
        assert_eq!(wrap_hanging("aa bb cc dd", 5, 2), ["aa bb", "cc", "dd"]);
        assert_eq!(wrap_hanging("abcdefg", 3, 2), ["abc", "de", "fg"]);
    }

    #[test]
    fn out_keeps_every_line_within_the_width() {
        let mut out = Out::new();
        let long = "word ".repeat(60);
        out.line(&long);
        out.para(4, 2, &long);
        out.field(2, "label", &long);
        out.list(2, "items", &[long.as_str(), "short"]);
        out.field(2, "empty", "  ");
        let text = out.finish();
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "{line:?}");
        }
        assert!(text.contains("\n  items:\n    - word"));
        assert!(!text.contains("empty"));
    }

    #[test]
    fn tables_align_and_fit() {
        let mut table = Table::new(&["id", "status", "why"]);
        table.row(&["a", "available", "short"]);
        table.row(&["bbbb", "x", &"long ".repeat(30)]);
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ID    STATUS     WHY");
        assert_eq!(lines[1], "a     available  short");
        assert!(lines[2].starts_with("bbbb  x          long"));
        assert!(
            lines[3].starts_with("                 long"),
            "wrapped: {text}"
        );
        assert_eq!(text.matches("long").count(), 30, "nothing cut: {text}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH));
    }
}
