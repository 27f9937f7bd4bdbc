//! The pure core: records, the writer's rules, the catalogue, availability, the policy and
//! the derived views. Nothing here does I/O or names a vendor; the clock is passed in.

pub mod availability;
pub mod catalogue;
pub mod chain;
pub mod cost;
pub mod invariants;
pub mod policy;
pub mod records;
pub mod redact;
pub mod track;
pub mod views;
pub mod writer;
