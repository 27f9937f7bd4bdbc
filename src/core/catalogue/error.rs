//! Why a catalogue was refused, and where in the file.

/// Why a catalogue was refused; the message names the file, the advisor and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {location}{message}")]
pub struct CatalogueError {
    /// The file (or `embedded share/advisors.yaml`).
    pub source_name: String,
    /// `advisor `x`, field `y`: ` or empty.
    pub location: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

/// Where an error is, inside the file.
pub(super) struct At<'s> {
    pub(super) source_name: &'s str,
    /// `advisor `x`` or `advisors[3]`, empty at top level.
    pub(super) advisor: String,
}

impl At<'_> {
    pub(super) fn error(&self, field: Option<&str>, message: impl Into<String>) -> CatalogueError {
        let location = match (self.advisor.is_empty(), field) {
            (true, None) => String::new(),
            (true, Some(field)) => format!("field `{field}`: "),
            (false, None) => format!("{}: ", self.advisor),
            (false, Some(field)) => format!("{}, field `{field}`: ", self.advisor),
        };
        CatalogueError {
            source_name: self.source_name.to_string(),
            location,
            message: one_line(&message.into()),
        }
    }
}

/// Messages are one line even when a validator's are not.
pub(super) fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
