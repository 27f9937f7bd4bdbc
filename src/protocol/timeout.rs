//! The one deadline type: a consultation's `timeout_s` (every exchange of the job must end
//! by then) and a wait's bound are a [`Timeout`], validated once when it is made, from the
//! command-line flag, the request body or the journal alike.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How long something may take: positive, finite, at most [`Timeout::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Timeout(Duration);

/// The name of a consultation's timeout on the wire and in the journal.
pub const TIMEOUT_FIELD: &str = "timeout_s";

/// Why a number of seconds is not a [`Timeout`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "`{given}` is not a number of seconds above 0 and at most {max} (decimals allowed; e.g. \
     `90` or `2.5`)",
    max = Timeout::MAX_S
)]
pub struct TimeoutError {
    /// What was given, as written.
    pub given: String,
}

impl Timeout {
    /// The longest a timeout may be, in seconds (one day).
    pub const MAX_S: f64 = 86_400.0;
    /// A consultation's deadline when the request gives none, in seconds.
    pub const DEFAULT_S: f64 = 90.0;
    /// A consultation's deadline when the request gives none.
    pub const DEFAULT: Timeout = Timeout(Duration::from_secs(90));

    /// `seconds` checked: positive, finite, at most [`Timeout::MAX_S`].
    pub fn from_secs_f64(seconds: f64) -> Result<Timeout, TimeoutError> {
        if seconds.is_finite() && seconds > 0.0 && seconds <= Timeout::MAX_S {
            Ok(Timeout(Duration::from_secs_f64(seconds)))
        } else {
            Err(TimeoutError {
                given: seconds.to_string(),
            })
        }
    }

    /// The length of time.
    pub fn duration(self) -> Duration {
        self.0
    }

    /// The length in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }

    /// The moment this timeout, started at `start`, runs out.
    pub fn deadline_from(self, start: tokio::time::Instant) -> tokio::time::Instant {
        start + self.0
    }
}

impl Default for Timeout {
    fn default() -> Timeout {
        Timeout::DEFAULT
    }
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} s", self.0.as_secs_f64())
    }
}

/// `--timeout SECS` on the command line.
impl FromStr for Timeout {
    type Err = TimeoutError;

    fn from_str(text: &str) -> Result<Timeout, TimeoutError> {
        let fail = || TimeoutError {
            given: text.to_string(),
        };
        let seconds: f64 = text.trim().parse().map_err(|_| fail())?;
        Timeout::from_secs_f64(seconds).map_err(|_| fail())
    }
}

/// On the wire: a number of seconds, above 0 and at most [`Timeout::MAX_S`].
impl JsonSchema for Timeout {
    fn schema_name() -> String {
        "Timeout".to_string()
    }

    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        let mut schema = schemars::schema::SchemaObject {
            instance_type: Some(schemars::schema::InstanceType::Number.into()),
            ..Default::default()
        };
        schema.number().exclusive_minimum = Some(0.0);
        schema.number().maximum = Some(Timeout::MAX_S);
        schema.metadata().description =
            Some("seconds, decimals allowed, above 0 and at most one day".to_string());
        schema.into()
    }
}

impl Serialize for Timeout {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.0.as_secs_f64())
    }
}

impl<'de> Deserialize<'de> for Timeout {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timeout, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Timeout::from_secs_f64(seconds)
            .map_err(|_| serde::de::Error::custom(out_of_range_message(seconds)))
    }
}

/// What a body or journal entry with an unacceptable timeout is told.
fn out_of_range_message(seconds: f64) -> String {
    format!(
        "`{TIMEOUT_FIELD}` is {seconds}: it takes seconds above 0 and at most {} (decimals \
         allowed; default {})",
        Timeout::MAX_S,
        Timeout::DEFAULT_S
    )
}

/// Whether a decoding error's message is a timeout out of range (a malformed request, not
/// malformed JSON).
pub fn is_out_of_range(message: &str) -> bool {
    message.starts_with(&format!("`{TIMEOUT_FIELD}` is "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_positive_finite_and_at_most_a_day() {
        for good in [0.001, 2.5, 90.0, 86_400.0] {
            assert_eq!(Timeout::from_secs_f64(good).unwrap().as_secs_f64(), good);
        }
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 86_400.5] {
            assert!(Timeout::from_secs_f64(bad).is_err(), "{bad}");
        }
        assert_eq!("2.5".parse::<Timeout>().unwrap().as_secs_f64(), 2.5);
        let err = "soon".parse::<Timeout>().unwrap_err().to_string();
        assert!(err.contains("`soon`"), "{err}");
        assert_eq!(Timeout::default().as_secs_f64(), Timeout::DEFAULT_S);
    }

    #[test]
    fn on_the_wire_a_timeout_is_seconds_and_is_checked_when_read() {
        let t: Timeout = serde_json::from_str("1.5").unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "1.5");
        let err = serde_json::from_str::<Timeout>("0")
            .unwrap_err()
            .to_string();
        assert!(is_out_of_range(&err), "{err}");
        assert!(serde_json::from_str::<Timeout>("100000").is_err());
    }
}
