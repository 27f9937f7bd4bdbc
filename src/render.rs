//! Output formats for every verb: `plain` (the default, readable on an 80-column terminal),
//! `table` (aligned columns), `yaml` and `json` (the typed shapes other tools read).
//!
//! A view derives `Serialize` for `yaml` and `json` and implements [`Render`] for the two
//! text formats. No colour is ever written, so output reads the same in a pipe and a file.

mod advisors;
mod catalogue;
mod check;
mod context;
pub mod downstream;
mod explain;
pub mod job;
pub mod outcomes;
mod plan;
pub mod preview;
mod record;
mod refusal;
mod spend;
mod status;
pub mod text;
mod track;
mod tree;
mod verify;

pub use refusal::RefusalView;

use serde::Serialize;

/// The widest line plain output writes.
pub const WIDTH: usize = 80;

/// An output format (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Prose for a person, at most 80 columns wide.
    #[default]
    Plain,
    /// Aligned columns.
    Table,
    /// The typed shape as YAML.
    Yaml,
    /// The typed shape as pretty JSON.
    Json,
}

/// A value every format can show.
pub trait Render: Serialize {
    /// The plain text, lines at most [`WIDTH`] characters, ending with a newline.
    fn plain(&self) -> String;

    /// Aligned columns; views without a natural table show their plain text.
    fn table(&self) -> String {
        self.plain()
    }
}

/// `value` in `format`, ending with exactly one newline (print it with `print!`).
pub fn render(value: &impl Render, format: Format) -> String {
    let text = match format {
        Format::Plain => value.plain(),
        Format::Table => value.table(),
        Format::Json => serde_json::to_string_pretty(value).unwrap_or_else(|e| {
            // Only a map with non-string keys fails here, and no view has one.
            serde_json::json!({"error": format!("output could not be written as json: {e}")})
                .to_string()
        }),
        Format::Yaml => serde_yaml_ng::to_string(value)
            .unwrap_or_else(|e| format!("error: output could not be written as yaml: {e}")),
    };
    let mut text = text.trim_end_matches('\n').to_string();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Sample {
        name: &'static str,
        count: u32,
    }

    impl Render for Sample {
        fn plain(&self) -> String {
            format!("{} counted {}\n\n", self.name, self.count)
        }
    }

    fn check(format: Format, expected: &str) {
        let sample = Sample {
            name: "x",
            count: 2,
        };
        assert_eq!(render(&sample, format), expected);
    }

    #[test]
    fn every_format_ends_with_one_newline() {
        check(Format::Plain, "x counted 2\n");
        check(Format::Table, "x counted 2\n");
        check(Format::Json, "{\n  \"name\": \"x\",\n  \"count\": 2\n}\n");
        check(Format::Yaml, "name: x\ncount: 2\n");
    }

    #[test]
    fn format_names_match_the_flag() {
        use clap::ValueEnum;
        let names: Vec<String> = Format::value_variants()
            .iter()
            .map(|f| f.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(names, ["plain", "table", "yaml", "json"]);
        assert_eq!(serde_json::to_value(Format::Json).unwrap(), "json");
    }
}
