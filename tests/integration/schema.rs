//! The JSON Schemas in `share/schema/` are generated from the record types; this test fails
//! when the checked-in files drift from the types. Regenerate them with:
//!
//! ```sh
//! ADVISORD_BLESS=1 cargo test -p advisord --test schema
//! ```

use advisord::core::records::{
    Assessment, Attempt, Conclusion, Consultation, Disagreement, Envelope, Kind, Plan, Record,
    Resolution, Validation,
};
use schemars::JsonSchema;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A stored record of one kind: the envelope, `kind`, and the kind's fields. Only its
/// schema is used; the `kind` property is pinned to the kind's name after generation.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct KindRecord<T> {
    #[serde(flatten)]
    envelope: Envelope,
    /// The record's kind.
    kind: String,
    #[serde(flatten)]
    body: T,
}

fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a schema serialises")
}

fn kind_schema<T: JsonSchema>(kind: Kind) -> Value {
    let mut schema = schema_of::<KindRecord<T>>();
    schema["title"] = json!(format!("{kind} record"));
    schema["description"] = json!(format!(
        "A stored `{kind}` record of advisord: the envelope, `kind`, and the fields of the \
         kind. Generated from the Rust types; do not edit by hand."
    ));
    schema["properties"]["kind"] = json!({
        "description": "The record's kind.",
        "type": "string",
        "const": kind.as_str(),
    });
    schema
}

/// Every schema file, by name, as it must read.
fn expected() -> Vec<(String, String)> {
    let mut record = schema_of::<Record>();
    record["description"] = json!(
        "A stored record of advisord, of any kind. Generated from the Rust types; \
         do not edit by hand."
    );
    let mut files = vec![("record.schema.json".to_string(), record)];
    for kind in Kind::ALL {
        let schema = match kind {
            Kind::Assessment => kind_schema::<Assessment>(kind),
            Kind::Plan => kind_schema::<Plan>(kind),
            Kind::Consultation => kind_schema::<Consultation>(kind),
            Kind::Disagreement => kind_schema::<Disagreement>(kind),
            Kind::Resolution => kind_schema::<Resolution>(kind),
            Kind::Conclusion => kind_schema::<Conclusion>(kind),
            Kind::Validation => kind_schema::<Validation>(kind),
            Kind::Attempt => kind_schema::<Attempt>(kind),
            Kind::Invariant => kind_schema::<advisord::core::records::Invariant>(kind),
        };
        files.push((format!("{kind}.schema.json"), schema));
    }
    files
        .into_iter()
        .map(|(name, schema)| {
            let mut text = serde_json::to_string_pretty(&schema).expect("serialises");
            text.push('\n');
            (name, text)
        })
        .collect()
}

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("share/schema")
}

#[test]
fn checked_in_schemas_match_the_types() {
    let dir = schema_dir();
    let files = expected();
    if std::env::var_os("ADVISORD_BLESS").is_some() {
        std::fs::create_dir_all(&dir).expect("create share/schema");
        for (name, text) in &files {
            std::fs::write(dir.join(name), text).expect("write a schema");
        }
    }
    let regenerate = "regenerate with `ADVISORD_BLESS=1 cargo test -p advisord --test schema` \
                      and review the diff (a changed shape also bumps SCHEMA_VERSION)";
    for (name, text) in &files {
        let path = dir.join(name);
        let found = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            found == *text,
            "`{}` does not match the record types; {regenerate}",
            path.display()
        );
    }
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let strays: Vec<String> = std::fs::read_dir(&dir)
        .expect("share/schema exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !names.contains(&n.as_str()))
        .collect();
    assert!(
        strays.is_empty(),
        "`{}` holds files no type generates: {strays:?}; remove them or {regenerate}",
        dir.display()
    );
}

#[test]
fn every_kind_schema_pins_its_kind_and_requires_the_envelope() {
    for (name, text) in expected() {
        let schema: Value = serde_json::from_str(&text).expect("parses");
        if name == "record.schema.json" {
            continue;
        }
        let kind = name.trim_end_matches(".schema.json");
        assert_eq!(schema["properties"]["kind"]["const"], json!(kind), "{name}");
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required fields")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for field in ["id", "task", "sequence", "created_at", "schema", "redacted"] {
            assert!(required.contains(&field), "{name} requires `{field}`");
        }
    }
}
