//! The vocabulary the daemon (`advisord`) and the adapters (`advisord-adapters`) share,
//! written once: both crates depend on this one, so an outcome crosses from an adapter to
//! a record without a conversion.
//!
//! Every type here that derives `Serialize` is on-disk contract (the records' JSON and
//! their JSON Schemas): the daemon's `core::records` re-exports them unchanged.
//!
//! One concept a file: `failure` why an exchange failed, `answer` what an answer says of
//! the hypothesis and what it cost, `assessment` the assessment's scales (with `FromStr`),
//! `catalogue` the keys every catalogue entry shares, `ansi` terminal escape sequences,
//! `patterns` a set of patterns searched with a bounded number of search caches.

pub mod ansi;
pub mod answer;
pub mod assessment;
pub mod catalogue;
pub mod failure;
pub mod patterns;

pub use answer::{Stance, Usage};
pub use assessment::{Confidence, Materiality, UnknownName};
pub use catalogue::COMMON_KEYS;
pub use failure::FailureKind;
