//! Typed ids and timestamps: a job id is never mistaken for a record id, and a time on the
//! wire is always RFC 3339 UTC.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::fmt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> $name {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> $name {
                $name(id.to_string())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

string_id! {
    /// A consultation job's id (a ULID, so ids sort by creation).
    JobId
}

string_id! {
    /// A record's id (a ULID assigned by the writer).
    RecordId
}

impl JobId {
    /// A fresh id for a job accepted now.
    pub fn generate() -> JobId {
        JobId(ulid::Ulid::new().to_string())
    }
}

/// A moment, written as RFC 3339 UTC on the wire (`2026-01-01T00:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl JsonSchema for Timestamp {
    fn schema_name() -> String {
        "Timestamp".to_string()
    }

    fn json_schema(_gen: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        schemars::schema::SchemaObject {
            instance_type: Some(schemars::schema::InstanceType::String.into()),
            format: Some("date-time".to_string()),
            ..Default::default()
        }
        .into()
    }
}

impl Timestamp {
    /// Now, by the system clock.
    pub fn now() -> Timestamp {
        Timestamp(OffsetDateTime::now_utc())
    }

    /// The moment as a date-time.
    pub fn at(self) -> OffsetDateTime {
        self.0
    }

    /// `text` read as RFC 3339.
    pub fn parse(text: &str) -> Result<Timestamp, time::error::Parse> {
        OffsetDateTime::parse(text, &Rfc3339).map(Timestamp)
    }
}

impl From<OffsetDateTime> for Timestamp {
    fn from(at: OffsetDateTime) -> Timestamp {
        Timestamp(at)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every UTC date-time of the years 0..=9999 formats; nothing else is ever built.
        f.write_str(&self.0.format(&Rfc3339).unwrap_or_default())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(|e| {
            serde::de::Error::custom(format!("`{text}` is not an RFC 3339 time ({e})"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_and_write_rfc3339() {
        for text in ["2026-01-01T00:00:00Z", "2026-03-04T05:06:07.123456789Z"] {
            let at: Timestamp = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(serde_json::to_value(at).unwrap(), serde_json::json!(text));
        }
        assert!(serde_json::from_value::<Timestamp>(serde_json::json!("yesterday")).is_err());
    }

    #[test]
    fn ids_are_plain_strings_on_the_wire() {
        let id = JobId::from("01J");
        assert_eq!(serde_json::to_value(&id).unwrap(), serde_json::json!("01J"));
        assert_eq!(id, "01J");
        assert_eq!(RecordId::from("R").to_string(), "R");
    }
}
