//! The record kinds as the command line describes them: `record --help` (each kind and
//! its fields), `record --template KIND` (a skeleton to fill in) and `schema KIND` (the
//! JSON Schema, shipped inside the binary so that nothing points at a source checkout).

use crate::core::records::Kind;
use crate::core::writer::field_docs;
use crate::error::Error;

/// The JSON Schema of any record (`schema record`).
const RECORD_SCHEMA: &str = include_str!("../../share/schema/record.schema.json");

/// The JSON Schema of a stored record of `kind`, as the binary ships it.
pub fn kind_schema(kind: Kind) -> &'static str {
    match kind {
        Kind::Assessment => include_str!("../../share/schema/assessment.schema.json"),
        Kind::Plan => include_str!("../../share/schema/plan.schema.json"),
        Kind::Consultation => include_str!("../../share/schema/consultation.schema.json"),
        Kind::Disagreement => include_str!("../../share/schema/disagreement.schema.json"),
        Kind::Resolution => include_str!("../../share/schema/resolution.schema.json"),
        Kind::Conclusion => include_str!("../../share/schema/conclusion.schema.json"),
        Kind::Validation => include_str!("../../share/schema/validation.schema.json"),
        Kind::Attempt => include_str!("../../share/schema/attempt.schema.json"),
        Kind::Invariant => include_str!("../../share/schema/invariant.schema.json"),
    }
}

/// The schema `schema NAME` prints: a kind's, or `record` for any kind.
pub fn schema(name: &str) -> Result<&'static str, Error> {
    if name == "record" {
        return Ok(RECORD_SCHEMA);
    }
    Kind::parse(name).map(kind_schema).ok_or_else(|| {
        Error::Usage(format!(
            "`{}` is not a record kind; accepted: {}, or `record` for any kind",
            name.escape_debug(),
            kind_names()
        ))
    })
}

/// A `--template` value: a record kind.
pub fn parse_kind(name: &str) -> Result<Kind, String> {
    Kind::parse(name).ok_or_else(|| {
        format!(
            "`{}` is not a record kind; accepted: {}",
            name.escape_debug(),
            kind_names()
        )
    })
}

fn kind_names() -> String {
    Kind::ALL
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text after `record --help`: each kind, its fields (required ones marked), what
/// each accepts, and how to get a skeleton and the schema.
pub fn record_help() -> String {
    let mut text = String::from(
        "Examples:\n  advisor-consult record --file assessment.json\n  advisor-consult record \
         --template conclusion > c.json   # a skeleton to fill in\n  echo '{\"kind\": \"plan\", \
         \"assessment\": \"01J...\"}' | advisor-consult record --file -\n\nRecord kinds and \
         their fields (* required; the envelope and computed fields are the writer's):\n",
    );
    for kind in Kind::ALL {
        text.push_str(&format!("\n  {kind}\n"));
        for field in field_docs(kind) {
            let mark = if field.required { "*" } else { " " };
            text.push_str(&format!("    {mark} {}: {}\n", field.name, field.accepts));
        }
    }
    text.push_str(
        "\nThe JSON Schema of a stored record: `advisor-consult schema KIND`. A refusal \
         exits 3 and names its reason code.",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::writer::template;

    #[test]
    fn every_kind_has_its_schema_and_it_names_the_kind() {
        for kind in Kind::ALL {
            let parsed: serde_json::Value =
                serde_json::from_str(kind_schema(kind)).expect("the shipped schema is JSON");
            assert_eq!(parsed["properties"]["kind"]["const"], kind.as_str());
            assert_eq!(schema(kind.as_str()).unwrap(), kind_schema(kind));
        }
        assert!(schema("record").unwrap().contains("any kind"));
        let err = schema("assesment").unwrap_err().to_string();
        assert!(
            err.contains("`assessment`") && !err.contains("share/"),
            "{err}"
        );
    }

    #[test]
    fn the_help_lists_every_kind_and_field() {
        let help = record_help();
        for kind in Kind::ALL {
            assert!(help.contains(&format!("\n  {kind}\n")), "{kind}");
            for field in crate::core::writer::caller_fields(kind) {
                assert!(help.contains(&format!(" {field}: ")), "{kind}.{field}");
            }
        }
        assert!(help.contains("* subject: one line"));
    }

    #[test]
    fn a_template_holds_every_field_of_its_kind() {
        for kind in Kind::ALL {
            let skeleton = template(kind);
            assert_eq!(skeleton["kind"], kind.as_str());
            let object = skeleton.as_object().unwrap();
            for field in crate::core::writer::caller_fields(kind) {
                assert!(object.contains_key(field), "{kind}.{field}");
            }
            assert_eq!(
                object.len(),
                crate::core::writer::caller_fields(kind).len() + 1
            );
        }
    }
}
