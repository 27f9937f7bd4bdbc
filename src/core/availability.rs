//! Availability (SPEC §5): a pure function of the catalogue, the observed presence, the
//! mode, the disable list, the recorded consultations and the clock.

use std::collections::BTreeSet;

/// What the edge observed about the machine: which executables are on `PATH` and which
/// credential variables are set and non-empty. Values are never held here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presence {
    /// Executables (as named in the catalogue) that were found.
    pub executables: BTreeSet<String>,
    /// Credential variable names that are set and non-empty.
    pub credentials: BTreeSet<String>,
}

/// `ADVISORD_ADVISORS_DISABLE`: nobody, some advisors by id, or all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DisableList {
    /// Nothing disabled.
    #[default]
    None,
    /// Every advisor disabled.
    All,
    /// These ids disabled.
    Ids(BTreeSet<String>),
}

use crate::core::catalogue::Catalogue;
use crate::core::records::{AdvisorAvailability, Mode, Record};

/// Everything availability is a function of.
pub struct AvailabilityInput<'a> {
    /// The catalogue in force.
    pub catalogue: &'a Catalogue,
    /// The mode in force.
    pub mode: Mode,
    /// `ADVISORD_ADVISORS_DISABLE`.
    pub disable: &'a DisableList,
    /// What the edge observed.
    pub presence: &'a Presence,
    /// Recorded consultations across every task of the state directory (other kinds ignored).
    pub history: &'a [Record],
    /// `ADVISORD_COOLDOWN_SECONDS`: replaces every cooldown.
    pub cooldown_override_s: Option<u64>,
    /// The clock.
    pub now: time::OffsetDateTime,
}

/// Each catalogue advisor's availability, in declaration order.
pub fn assess(input: &AvailabilityInput) -> Vec<AdvisorAvailability> {
    let _ = input;
    todo!("availability: assess")
}
