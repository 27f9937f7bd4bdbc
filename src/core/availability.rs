//! Availability: a pure function of the catalogue, the observed presence, the
//! mode, the disable list, the recorded consultations and the clock.

use std::collections::{BTreeMap, BTreeSet};

/// What the edge observed about the machine: which executables are on `PATH`, which
/// credential variables are set and non-empty, and whether each local HTTP advisor's
/// endpoint answered a short probe. Values are never held here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presence {
    /// Executables (as named in the catalogue) that were found.
    pub executables: BTreeSet<String>,
    /// Credential variable names that are set and non-empty.
    pub credentials: BTreeSet<String>,
    /// By advisor id: what the probe of its endpoint found. Only a local HTTP advisor is
    /// probed; an advisor absent here is judged without it.
    pub endpoints: BTreeMap<String, EndpointProbe>,
}

/// What probing an advisor's endpoint found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointProbe {
    /// It answered (this URL).
    Answers(String),
    /// It did not: the URL, and why (refused, no answer in time, not HTTP).
    Silent(String, String),
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

impl DisableList {
    /// Read `ADVISORD_ADVISORS_DISABLE`: a comma list of ids, or `all`; blank means none.
    pub fn parse(text: &str) -> DisableList {
        let ids: BTreeSet<String> = text
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .collect();
        if ids.iter().any(|id| id.eq_ignore_ascii_case("all")) {
            DisableList::All
        } else if ids.is_empty() {
            DisableList::None
        } else {
            DisableList::Ids(ids)
        }
    }

    /// Whether the list leaves out the advisor `id`.
    pub fn disables(&self, id: &str) -> bool {
        match self {
            DisableList::None => false,
            DisableList::All => true,
            DisableList::Ids(ids) => ids.contains(id),
        }
    }
}

use crate::core::catalogue::{AdvisorEntry, Catalogue, CAPABILITIES};
use crate::core::cost::BudgetState;
use crate::core::records::{
    AdvisorAvailability, Body, ConsultationStatus, FailureKind, Mode, Record, Status,
};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime, UtcOffset};

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
    /// The state of every spending limit in force (`None`: no limit is judged).
    pub budget: Option<&'a BudgetState>,
}

/// The cooldown after a rate limit that gave no retry-after.
pub const RATE_LIMIT_COOLDOWN_S: u64 = 15 * 60;

/// The cooldown after an authentication failure.
pub const AUTH_COOLDOWN_S: u64 = 60 * 60;

/// The cooldown after two consecutive transient failures.
pub const TRANSIENT_COOLDOWN_S: u64 = 10 * 60;

/// The longest cooldown honoured, so that an absurd retry-after cannot overflow the clock.
const MAX_COOLDOWN_S: u64 = 366 * 24 * 60 * 60;

/// What to do to skip a cooldown, appended to every cooldown reason.
const RETRY_NOW: &str = "set ADVISORD_COOLDOWN_SECONDS=0 to retry now";

/// Each catalogue advisor's availability, in declaration order.
pub fn assess(input: &AvailabilityInput) -> Vec<AdvisorAvailability> {
    let mut outcomes = counted_outcomes(input.history);
    let without_credential = last_exchange_without_credential(input.history);
    input
        .catalogue
        .advisors
        .iter()
        .map(|advisor| {
            let history = outcomes.remove(advisor.id.as_str()).unwrap_or_default();
            let mut verdict = assess_one(advisor, &history, input);
            if let (Some(at), Some(variable)) = (
                without_credential.get(advisor.id.as_str()),
                advisor.credential.as_deref(),
            ) {
                verdict.reason.push_str(&format!(
                    "; its last exchange ({at}) ran without `{variable}` and was not counted \
                     against it: export `{variable}` where `advisord` runs (jobs it resumes \
                     after a restart use its own environment), then restart it"
                ));
            }
            verdict
        })
        .collect()
}

/// The advisors whose newest consultation failed `not_configured` (our own environment
/// lacked the credential), with when.
fn last_exchange_without_credential(history: &[Record]) -> BTreeMap<&str, String> {
    let mut newest: BTreeMap<&str, (u64, Option<FailureKind>, &str)> = BTreeMap::new();
    for record in history {
        let Body::Consultation(c) = &record.body else {
            continue;
        };
        let sequence = record.envelope.sequence;
        let entry =
            newest
                .entry(c.advisor.as_str())
                .or_insert((sequence, c.failure, &c.finished_at));
        if (c.finished_at.as_str(), sequence) >= (entry.2, entry.0) {
            *entry = (sequence, c.failure, &c.finished_at);
        }
    }
    newest
        .into_iter()
        .filter(|(_, (_, failure, _))| *failure == Some(FailureKind::NotConfigured))
        .map(|(advisor, (_, _, at))| (advisor, at.to_string()))
        .collect()
}

/// How many AVAILABLE advisors offer each capability; every known capability and every
/// capability of the catalogue is listed, those nobody can serve now with 0.
pub fn capacity(
    catalogue: &Catalogue,
    availability: &[AdvisorAvailability],
) -> BTreeMap<String, u32> {
    let mut capacity: BTreeMap<String, u32> = CAPABILITIES
        .iter()
        .map(|c| (c.to_string(), 0))
        .chain(
            catalogue
                .advisors
                .iter()
                .flat_map(|a| a.capabilities.iter().map(|c| (c.clone(), 0))),
        )
        .collect();
    let available: BTreeSet<&str> = availability
        .iter()
        .filter(|a| a.status == Status::Available)
        .map(|a| a.advisor.as_str())
        .collect();
    for advisor in &catalogue.advisors {
        if available.contains(advisor.id.as_str()) {
            for capability in &advisor.capabilities {
                *capacity.entry(capability.clone()).or_default() += 1;
            }
        }
    }
    capacity
}

/// A counted outcome of one advisor, as the circuit sees it.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    at: OffsetDateTime,
    sequence: u64,
    /// `None` for a completed consultation.
    failure: Option<FailureKind>,
    retry_after_s: Option<u64>,
}

/// The counted outcome `record` gives its advisor, if it is a consultation the circuit
/// counts.
fn counted(record: &Record) -> Option<(&str, Outcome)> {
    let Body::Consultation(consultation) = &record.body else {
        return None;
    };
    let failure = match consultation.status {
        ConsultationStatus::Completed => None,
        // A failure with no kind is the catch-all: it counts as `error`.
        ConsultationStatus::Failed => Some(consultation.failure.unwrap_or(FailureKind::Error)),
    };
    if failure.is_some_and(|kind| !kind.is_counted()) {
        return None;
    }
    // The writer always stamps `finished_at`; `created_at` covers a hand-edited file.
    let at = parse_time(&consultation.finished_at)
        .or_else(|| parse_time(&record.envelope.created_at))?;
    Some((
        consultation.advisor.as_str(),
        Outcome {
            at,
            sequence: record.envelope.sequence,
            failure,
            retry_after_s: consultation.retry_after_s,
        },
    ))
}

/// The counted outcomes of every advisor, oldest first (by `finished_at`, then sequence).
fn counted_outcomes(history: &[Record]) -> BTreeMap<&str, Vec<Outcome>> {
    let mut by_advisor: BTreeMap<&str, Vec<Outcome>> = BTreeMap::new();
    for (advisor, outcome) in history.iter().filter_map(counted) {
        by_advisor.entry(advisor).or_default().push(outcome);
    }
    for outcomes in by_advisor.values_mut() {
        outcomes.sort_by_key(|o| (o.at, o.sequence));
    }
    by_advisor
}

/// The part of a history the circuit can still look at, kept up to date one record at a
/// time so that a caller holding many records need not hand all of them to [`assess`].
///
/// The circuit reads an advisor's newest outcome, the one before it, and the trips after
/// its newest completed consultation: nothing older than that completed consultation
/// matters. So for each advisor the tail keeps its counted consultations from its newest
/// completed one on (by `finished_at`, then sequence; outcomes tied on both, as in
/// different tasks they can be, in the order they were fed), whatever order they are fed
/// in. Nor does anything before the newest trip after that completed consultation and the
/// outcome just before it: the circuit reads the newest trip, and the newest outcome and
/// the one before it, all at or after those two; a record fed later and older than the
/// trip changes none of them. So when there is such a trip, the tail keeps the completed
/// consultation, the outcome before the trip and what follows: however many answers failed
/// together (every task timing out at the same instant), a few are kept.
/// Availability stays a function of records: `assess` over [`HistoryTail::records`] equals
/// `assess` over every record fed.
#[derive(Debug, Clone, Default)]
pub struct HistoryTail {
    by_advisor: BTreeMap<String, Vec<(Outcome, Record)>>,
}

impl HistoryTail {
    /// Take `record` into account (records that are not counted consultations are ignored).
    pub fn feed(&mut self, record: &Record) {
        let Some((advisor, outcome)) = counted(record) else {
            return;
        };
        let key = (outcome.at, outcome.sequence);
        let completed = outcome.failure.is_none();
        let kept = self.by_advisor.entry(advisor.to_string()).or_default();
        // When it holds a completed consultation, it is the first and the newest one.
        if kept
            .first()
            .is_some_and(|(o, _)| o.failure.is_none() && key < (o.at, o.sequence))
        {
            return;
        }
        let index = kept.partition_point(|(o, _)| (o.at, o.sequence) <= key);
        kept.insert(index, (outcome, record.clone()));
        if completed {
            kept.drain(..index);
        }
        // Nothing between the completed consultation and the outcome before the newest
        // trip matters (see above).
        let head = usize::from(kept.first().is_some_and(|(o, _)| o.failure.is_none()));
        let trips = |i: usize| {
            let previous = i.checked_sub(1).map(|p| kept[p].0);
            trip_of(previous.as_ref(), &kept[i].0).is_some()
        };
        if let Some(trip) = (head..kept.len()).rev().find(|&i| trips(i)) {
            let from = trip.saturating_sub(1).max(head);
            kept.drain(head..from);
        }
    }

    /// The records kept, advisor by advisor.
    pub fn records(&self) -> Vec<Record> {
        self.by_advisor
            .values()
            .flatten()
            .map(|(_, record)| record.clone())
            .collect()
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.by_advisor.values().map(Vec::len).sum()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn parse_time(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

/// RFC 3339 in UTC, as records and output carry it.
fn format_time(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// Why the circuit opened at one outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trip {
    /// A rate limit, with the retry-after it gave.
    RateLimit(Option<u64>),
    /// The credential was refused.
    Auth,
    /// The second of two consecutive transient failures; the first's kind.
    Transients(FailureKind, FailureKind),
}

/// The trip caused by the outcome at `index`, if it opens the circuit.
fn trip_at(outcomes: &[Outcome], index: usize) -> Option<Trip> {
    trip_of(index.checked_sub(1).map(|i| &outcomes[i]), &outcomes[index])
}

/// The trip caused by `outcome`, coming after `previous`, if it opens the circuit.
fn trip_of(previous: Option<&Outcome>, outcome: &Outcome) -> Option<Trip> {
    let failure = outcome.failure?;
    match failure {
        FailureKind::RateLimited => Some(Trip::RateLimit(outcome.retry_after_s)),
        FailureKind::AuthFailed => Some(Trip::Auth),
        kind if kind.is_transient() => {
            let previous = previous.and_then(|o| o.failure)?;
            previous
                .is_transient()
                .then_some(Trip::Transients(previous, kind))
        }
        _ => None,
    }
}

impl Trip {
    /// Seconds the circuit stays open; the override replaces every cooldown.
    fn cooldown_s(self, override_s: Option<u64>) -> u64 {
        let natural = match self {
            Trip::RateLimit(retry_after) => retry_after.unwrap_or(RATE_LIMIT_COOLDOWN_S),
            Trip::Auth => AUTH_COOLDOWN_S,
            Trip::Transients(..) => TRANSIENT_COOLDOWN_S,
        };
        override_s.unwrap_or(natural).min(MAX_COOLDOWN_S)
    }

    /// The failure, in words, for reasons.
    fn describe(self, at: OffsetDateTime) -> String {
        let at = format_time(at);
        match self {
            Trip::RateLimit(_) => format!("a rate limit at {at}"),
            Trip::Auth => format!("an authentication failure at {at}"),
            Trip::Transients(first, second) => format!(
                "two consecutive transient failures (`{}`, then `{}` at {at})",
                first.as_str(),
                second.as_str()
            ),
        }
    }
}

fn assess_one(
    advisor: &AdvisorEntry,
    outcomes: &[Outcome],
    input: &AvailabilityInput,
) -> AdvisorAvailability {
    let verdict = |status: Status, reason: String| AdvisorAvailability {
        advisor: advisor.id.clone(),
        status,
        reason,
        recovering: false,
        until: None,
    };
    if let Some(reason) = disabled_reason(advisor, input.mode, input.disable) {
        return verdict(Status::Disabled, reason);
    }
    if let Some(executable) = &advisor.executable {
        if !input.presence.executables.contains(executable) {
            let reason = if executable.starts_with('/') {
                format!("`{executable}` does not exist or is not executable")
            } else {
                format!("`{executable}` is not on PATH")
            };
            return verdict(Status::Unavailable, reason);
        }
    }
    if let Some(variable) = &advisor.credential {
        if !input.presence.credentials.contains(variable) {
            return verdict(Status::NotConfigured, format!("`{variable}` is not set"));
        }
    }
    if let Some(EndpointProbe::Silent(url, why)) = input.presence.endpoints.get(&advisor.id) {
        return verdict(
            Status::Unavailable,
            format!(
                "its endpoint `{url}` does not answer ({why}); start its server, or set \
                 `endpoint` in the catalogue to where it listens"
            ),
        );
    }
    if let Some(newest) = outcomes.len().checked_sub(1) {
        if let Some(trip) = trip_at(outcomes, newest) {
            let cooldown = trip.cooldown_s(input.cooldown_override_s);
            let at = outcomes[newest].at;
            // Only a record dated near the end of the calendar overflows; it opens nothing.
            let until = at
                .checked_add(Duration::seconds(cooldown as i64))
                .unwrap_or(at);
            if cooldown > 0 && input.now < until {
                return open_circuit(advisor, trip, outcomes[newest].at, until, input);
            }
        }
    }
    if let Some(line) = input.budget.and_then(|b| b.over(advisor)) {
        return AdvisorAvailability {
            until: line.resets_at.clone(),
            ..verdict(Status::OverBudget, format!("over budget: {}", line.reason))
        };
    }
    let mut presence = Vec::new();
    if let Some(executable) = &advisor.executable {
        presence.push(format!("`{executable}` is on PATH"));
    }
    if let Some(variable) = &advisor.credential {
        presence.push(format!("`{variable}` is set"));
    }
    if let Some(EndpointProbe::Answers(url)) = input.presence.endpoints.get(&advisor.id) {
        presence.push(format!("its endpoint `{url}` answers"));
    }
    let mut reason = if presence.is_empty() {
        "it needs no executable and no credential".to_string()
    } else {
        presence.join(" and ")
    };
    let recovering = last_trip_since_completed(outcomes);
    if let Some((trip, at)) = recovering {
        reason.push_str(&format!(
            "; recovering: the cooldown after {} has passed and no consultation has \
             completed since",
            trip.describe(at)
        ));
    }
    AdvisorAvailability {
        recovering: recovering.is_some(),
        ..verdict(Status::Available, reason)
    }
}

/// The newest trip after the newest completed consultation: its cooldown has passed
/// (the circuit is closed), but no answer has proved the advisor well yet.
fn last_trip_since_completed(outcomes: &[Outcome]) -> Option<(Trip, OffsetDateTime)> {
    let after = outcomes
        .iter()
        .rposition(|o| o.failure.is_none())
        .map_or(0, |completed| completed + 1);
    (after..outcomes.len())
        .rev()
        .find_map(|i| trip_at(outcomes, i).map(|trip| (trip, outcomes[i].at)))
}

fn open_circuit(
    advisor: &AdvisorEntry,
    trip: Trip,
    at: OffsetDateTime,
    until: OffsetDateTime,
    input: &AvailabilityInput,
) -> AdvisorAvailability {
    let until_text = format_time(until);
    let why_so_long = match (input.cooldown_override_s, trip) {
        (Some(s), _) => format!(" (ADVISORD_COOLDOWN_SECONDS={s})"),
        (None, Trip::RateLimit(Some(s))) => format!(" (it asked to retry after {s} s)"),
        _ => String::new(),
    };
    let (status, reason) = match trip {
        Trip::RateLimit(_) => (
            Status::RateLimited,
            format!(
                "rate limited at {} until {until_text}{why_so_long}; {RETRY_NOW}",
                format_time(at)
            ),
        ),
        Trip::Auth => (
            Status::TemporarilyFailed,
            format!(
                "{} opened its circuit until {until_text}{why_so_long}; check {}, then {RETRY_NOW}",
                trip.describe(at),
                advisor
                    .credential
                    .as_ref()
                    .map_or("its login".to_string(), |v| format!("`{v}`"))
            ),
        ),
        Trip::Transients(..) => (
            Status::TemporarilyFailed,
            format!(
                "{} opened its circuit until {until_text}{why_so_long}; {RETRY_NOW}",
                trip.describe(at)
            ),
        ),
    };
    AdvisorAvailability {
        advisor: advisor.id.clone(),
        status,
        reason,
        recovering: false,
        until: Some(until_text),
    }
}

/// Why the mode or the disable list leaves `advisor` out, if they do.
fn disabled_reason(advisor: &AdvisorEntry, mode: Mode, disable: &DisableList) -> Option<String> {
    match (mode, disable) {
        (Mode::Ci, _) => Some("mode `ci` consults no advisor".to_string()),
        (Mode::Offline, _) if !advisor.local => Some(format!(
            "mode `offline` admits only advisors with `local: true`, and `{}` is not local",
            advisor.id
        )),
        (_, DisableList::All) => Some("`ADVISORD_ADVISORS_DISABLE` is `all`".to_string()),
        (_, list) if list.disables(&advisor.id) => Some(format!(
            "`ADVISORD_ADVISORS_DISABLE` names `{}`",
            advisor.id
        )),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Builders shared with the policy's tests, and the availability tables.

    use super::*;
    use crate::core::catalogue::{Limits, References, Transport};
    use crate::core::records::{Consultation, Envelope, SCHEMA_VERSION};
    use time::macros::datetime;

    /// The instant every test's clock is measured from.
    pub(crate) const T0: OffsetDateTime = datetime!(2026-01-01 00:00:00 UTC);

    /// An advisor reached over `adapter`, offering `capabilities`, needing nothing.
    pub(crate) fn advisor(id: &str, adapter: &str, capabilities: &[&str]) -> AdvisorEntry {
        AdvisorEntry {
            id: id.to_string(),
            title: id.to_uppercase(),
            transport: Transport::Http,
            adapter: adapter.to_string(),
            references: References::default(),
            executable: None,
            credential: None,
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            local: false,
            max_concurrent: 2,
            price: None,
            budget: Limits::default(),
            settings: serde_json::Map::new(),
        }
    }

    /// A record of the task `t` with envelope `id` and `sequence`.
    pub(crate) fn record(id: &str, sequence: u64, body: Body) -> Record {
        Record {
            envelope: Envelope {
                id: id.to_string(),
                task: "t".to_string(),
                sequence,
                created_at: format_time(T0),
                schema: SCHEMA_VERSION,
                redacted: Vec::new(),
                prev: None,
            },
            body,
        }
    }

    /// How one recorded exchange ended.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Ended {
        /// Completed with a conclusion.
        Done,
        /// Failed with this kind.
        Fail(FailureKind),
        /// Rate limited, with or without a retry-after.
        Limit(Option<u64>),
    }

    /// A consultation of `advisor` that ended `offset_s` seconds after [`T0`].
    pub(crate) fn consultation(
        advisor: &str,
        sequence: u64,
        offset_s: i64,
        ended: Ended,
    ) -> Record {
        let (status, failure, retry_after_s) = match ended {
            Ended::Done => (ConsultationStatus::Completed, None, None),
            Ended::Fail(kind) => (ConsultationStatus::Failed, Some(kind), None),
            Ended::Limit(s) => (
                ConsultationStatus::Failed,
                Some(FailureKind::RateLimited),
                s,
            ),
        };
        record(
            &format!("c{sequence}"),
            sequence,
            Body::Consultation(Consultation {
                plan: "p".to_string(),
                advisor: advisor.to_string(),
                status,
                failure,
                diagnostic: None,
                conclusion: (status == ConsultationStatus::Completed).then(|| "ok".into()),
                stance: None,
                assumptions: Vec::new(),
                risks: Vec::new(),
                actions: Vec::new(),
                falsifiers: Vec::new(),
                confidence: None,
                duration_ms: None,
                usage: None,
                retry_after_s,
                invariants: Vec::new(),
                source: None,
                finished_at: format_time(T0 + Duration::seconds(offset_s)),
                attestation: None,
            }),
        )
    }

    fn one_advisor() -> Catalogue {
        Catalogue {
            mode: None,
            budget: Default::default(),
            advisors: vec![advisor("a", "x", &["independent_reasoning"])],
        }
    }

    fn assess_at(history: &[Record], override_s: Option<u64>, now_s: i64) -> AdvisorAvailability {
        let catalogue = one_advisor();
        let input = AvailabilityInput {
            catalogue: &catalogue,
            mode: Mode::Standard,
            disable: &DisableList::None,
            presence: &Presence::default(),
            history,
            cooldown_override_s: override_s,
            now: T0 + Duration::seconds(now_s),
            budget: None,
        };
        assess(&input).remove(0)
    }

    use Ended::{Done, Fail, Limit};
    use FailureKind::{AuthFailed, Cancelled, Empty, Error, Malformed, Timeout, Unavailable};

    /// One circuit boundary: `outcomes` are `(seconds after T0, how it ended)` for advisor
    /// `a`, in sequence order; the clock reads `now_s`.
    fn check(
        case: &str,
        outcomes: &[(i64, Ended)],
        override_s: Option<u64>,
        now_s: i64,
        expected: Expect,
    ) {
        let history: Vec<Record> = outcomes
            .iter()
            .enumerate()
            .map(|(i, (at, ended))| consultation("a", i as u64 + 1, *at, *ended))
            .collect();
        let got = assess_at(&history, override_s, now_s);
        let (status, recovering, until_s) = expected;
        let until = until_s.map(|s| format_time(T0 + Duration::seconds(s)));
        assert_eq!(
            (got.status, got.recovering, got.until.clone()),
            (status, recovering, until),
            "{case}: {}",
            got.reason
        );
        assert!(
            !got.reason.is_empty() && !got.reason.contains('\n'),
            "{case}"
        );
        if status != Status::Available {
            assert!(got.reason.contains(RETRY_NOW), "{case}: {}", got.reason);
        }
    }

    /// What a check expects: status, recovering, `until` in seconds after [`T0`].
    type Expect = (Status, bool, Option<i64>);

    const AVAILABLE: Expect = (Status::Available, false, None);
    const RECOVERING: Expect = (Status::Available, true, None);
    const fn limited(until: i64) -> Expect {
        (Status::RateLimited, false, Some(until))
    }
    const fn failed(until: i64) -> Expect {
        (Status::TemporarilyFailed, false, Some(until))
    }

    #[test]
    fn rate_limit_boundaries() {
        let with = [(0, Limit(Some(120)))];
        check("retry-after, 1 s before", &with, None, 119, limited(120));
        check("retry-after, at", &with, None, 120, RECOVERING);
        check("retry-after, 1 s after", &with, None, 121, RECOVERING);
        let without = [(0, Limit(None))];
        check(
            "no retry-after, 1 s before",
            &without,
            None,
            899,
            limited(900),
        );
        check("no retry-after, at", &without, None, 900, RECOVERING);
        check("no retry-after, 1 s after", &without, None, 901, RECOVERING);
    }

    #[test]
    fn auth_failure_boundaries() {
        let auth = [(0, Fail(AuthFailed))];
        check("auth, 1 s before", &auth, None, 3599, failed(3600));
        check("auth, at", &auth, None, 3600, RECOVERING);
        check("auth, 1 s after", &auth, None, 3601, RECOVERING);
    }

    #[test]
    fn two_transients_boundaries() {
        let two = [(-300, Fail(Timeout)), (0, Fail(Error))];
        check("two transients, 1 s before", &two, None, 599, failed(600));
        check("two transients, at", &two, None, 600, RECOVERING);
        check("two transients, 1 s after", &two, None, 601, RECOVERING);
        let mixed = [(0, Fail(Unavailable)), (5, Fail(Timeout))];
        check("unavailable then timeout", &mixed, None, 10, failed(605));
        check(
            "three transients",
            &[(0, Fail(Error)), (1, Fail(Error)), (2, Fail(Error))],
            None,
            3,
            failed(602),
        );
    }

    #[test]
    fn circuit_that_does_not_trip() {
        check("no history", &[], None, 0, AVAILABLE);
        check("one transient", &[(0, Fail(Timeout))], None, 1, AVAILABLE);
        check("completed", &[(0, Done)], None, 1, AVAILABLE);
        check(
            "a completed answer between two transients",
            &[(0, Fail(Timeout)), (1, Done), (2, Fail(Timeout))],
            None,
            3,
            AVAILABLE,
        );
        check(
            "a completed answer after a rate limit",
            &[(0, Limit(None)), (1, Done)],
            None,
            2,
            AVAILABLE,
        );
    }

    #[test]
    fn exchange_failures_are_not_counted() {
        for kind in [Malformed, Empty, Cancelled] {
            check(
                &format!("{} alone", kind.as_str()),
                &[(0, Fail(kind)), (1, Fail(kind))],
                None,
                2,
                AVAILABLE,
            );
            check(
                &format!("{} between two transients", kind.as_str()),
                &[(0, Fail(Timeout)), (1, Fail(kind)), (2, Fail(Error))],
                None,
                3,
                failed(602),
            );
            check(
                &format!("{} after a rate limit", kind.as_str()),
                &[(0, Limit(Some(60))), (1, Fail(kind))],
                None,
                2,
                limited(60),
            );
            check(
                &format!("{} after a completed answer does not reopen", kind.as_str()),
                &[(0, Fail(AuthFailed)), (10, Done), (20, Fail(kind))],
                None,
                21,
                AVAILABLE,
            );
        }
    }

    #[test]
    fn the_override_replaces_every_cooldown() {
        let limit = [(0, Limit(Some(120)))];
        check("override 10, before", &limit, Some(10), 9, limited(10));
        check("override 10, at", &limit, Some(10), 10, RECOVERING);
        check(
            "override 0 means no cooldown",
            &limit,
            Some(0),
            0,
            RECOVERING,
        );
        check(
            "override lengthens",
            &[(0, Fail(AuthFailed))],
            Some(7200),
            3601,
            failed(7200),
        );
        let two = [(0, Fail(Timeout)), (1, Fail(Timeout))];
        check("override 0 on transients", &two, Some(0), 1, RECOVERING);
        check("override 30 on transients", &two, Some(30), 30, failed(31));
    }

    #[test]
    fn recovering_ends_with_a_completed_answer() {
        type Case<'a> = (&'a str, &'a [(i64, Ended)], i64, Expect);
        let cases: &[Case] = &[
            (
                "after auth cooldown",
                &[(0, Fail(AuthFailed))],
                4000,
                RECOVERING,
            ),
            (
                "then a completed answer",
                &[(0, Fail(AuthFailed)), (4000, Done)],
                4001,
                AVAILABLE,
            ),
            (
                "then one transient: still recovering, not tripped",
                &[(0, Fail(AuthFailed)), (4000, Fail(Timeout))],
                4001,
                RECOVERING,
            ),
            (
                "then two transients: open again",
                &[
                    (0, Limit(None)),
                    (1000, Fail(Timeout)),
                    (1001, Fail(Timeout)),
                ],
                1002,
                failed(1601),
            ),
        ];
        for (case, outcomes, now, expected) in cases {
            check(case, outcomes, None, *now, *expected);
        }
    }

    #[test]
    fn outcomes_are_ordered_by_finished_at_then_sequence() {
        // Sequence order says rate limit last; finished_at says the answer came last.
        let history = vec![
            consultation("a", 1, 10, Done),
            consultation("a", 2, 5, Limit(None)),
        ];
        assert_eq!(assess_at(&history, None, 11).status, Status::Available);
        assert!(!assess_at(&history, None, 11).recovering);
        // Same instant: the higher sequence is newer, whatever the slice order.
        let tie = vec![
            consultation("a", 2, 0, Limit(None)),
            consultation("a", 1, 0, Done),
        ];
        assert_eq!(assess_at(&tie, None, 1).status, Status::RateLimited);
        let tie = vec![
            consultation("a", 1, 0, Limit(None)),
            consultation("a", 2, 0, Done),
        ];
        assert_eq!(assess_at(&tie, None, 1).status, Status::Available);
    }

    #[test]
    fn our_own_missing_credential_never_opens_the_circuit_and_says_what_to_do() {
        let mut catalogue = one_advisor();
        catalogue.advisors[0].credential = Some("A_KEY".into());
        let presence = Presence {
            credentials: ["A_KEY".to_string()].into_iter().collect(),
            ..Presence::default()
        };
        // Two in a row, as a resumed job's two exchanges would be: neither counts.
        let history = vec![
            consultation("a", 1, 0, Fail(FailureKind::NotConfigured)),
            consultation("a", 2, 1, Fail(FailureKind::NotConfigured)),
        ];
        let input = AvailabilityInput {
            catalogue: &catalogue,
            mode: Mode::Standard,
            disable: &DisableList::None,
            presence: &presence,
            history: &history,
            cooldown_override_s: None,
            budget: None,
            now: T0 + Duration::seconds(2),
        };
        let got = assess(&input).remove(0);
        assert_eq!((got.status, got.recovering), (Status::Available, false));
        assert!(
            got.reason.contains("export `A_KEY` where `advisord` runs"),
            "{}",
            got.reason
        );
        // A completed exchange since: nothing to say any more.
        let later = [history.clone(), vec![consultation("a", 3, 2, Done)]].concat();
        let input = AvailabilityInput {
            history: &later,
            ..input
        };
        assert!(!assess(&input)[0].reason.contains("export"));
    }

    #[test]
    fn other_advisors_and_other_kinds_are_ignored() {
        let mut history = vec![
            consultation("b", 1, 0, Fail(AuthFailed)),
            consultation("b", 2, 1, Limit(None)),
        ];
        history.push(record(
            "x",
            3,
            Body::Attempt(crate::core::records::Attempt {
                assessment: "a".into(),
                tried: "t".into(),
                failure_observed: "f".into(),
                invalidated_assumption: None,
                updated_hypothesis: None,
            }),
        ));
        let got = assess_at(&history, None, 2);
        assert_eq!((got.status, got.recovering), (Status::Available, false));
    }

    #[test]
    fn cooldown_reasons_say_when_and_how_to_retry() {
        let history = vec![consultation("a", 1, 0, Limit(Some(120)))];
        assert_eq!(
            assess_at(&history, None, 1).reason,
            "rate limited at 2026-01-01T00:00:00Z until 2026-01-01T00:02:00Z (it asked to \
             retry after 120 s); set ADVISORD_COOLDOWN_SECONDS=0 to retry now"
        );
        let history = vec![
            consultation("a", 1, 0, Fail(Timeout)),
            consultation("a", 2, 60, Fail(Unavailable)),
        ];
        assert_eq!(
            assess_at(&history, None, 61).reason,
            "two consecutive transient failures (`timeout`, then `unavailable` at \
             2026-01-01T00:01:00Z) opened its circuit until 2026-01-01T00:11:00Z; \
             set ADVISORD_COOLDOWN_SECONDS=0 to retry now"
        );
        let recovering = assess_at(&history, None, 700).reason;
        assert!(recovering.starts_with("it needs no executable and no credential; recovering"));
    }

    /// The statuses that come before the circuit, with their precedence.
    #[test]
    fn presence_mode_and_disable_list() {
        let mut needs_both = advisor("both", "x", &["debugging"]);
        needs_both.executable = Some("tool-bin".into());
        needs_both.credential = Some("TOOL_TOKEN".into());
        let mut local = advisor("local", "y", &["debugging"]);
        local.local = true;
        local.executable = Some("/opt/local-bin".into());
        let catalogue = Catalogue {
            mode: None,
            budget: Default::default(),
            advisors: vec![needs_both, local],
        };
        let everything = Presence {
            executables: ["tool-bin", "/opt/local-bin"].map(String::from).into(),
            credentials: ["TOOL_TOKEN".to_string()].into(),
            endpoints: BTreeMap::new(),
        };
        let probed = |probe: EndpointProbe| Presence {
            endpoints: [("local".to_string(), probe)].into(),
            ..everything.clone()
        };
        let answers = probed(EndpointProbe::Answers("http://127.0.0.1:9".into()));
        let silent = probed(EndpointProbe::Silent(
            "http://127.0.0.1:9".into(),
            "connection refused".into(),
        ));
        let no_token = Presence {
            credentials: BTreeSet::new(),
            ..everything.clone()
        };
        let nothing = Presence::default();
        let limited_history = vec![consultation("both", 1, 0, Limit(None))];
        let check = |case: &str,
                     mode: Mode,
                     disable: &str,
                     presence: &Presence,
                     history: &[Record],
                     expected: [(Status, &str); 2]| {
            let disable = DisableList::parse(disable);
            let input = AvailabilityInput {
                catalogue: &catalogue,
                mode,
                disable: &disable,
                presence,
                history,
                cooldown_override_s: None,
                now: T0 + Duration::seconds(1),
                budget: None,
            };
            let got: Vec<(Status, String)> = assess(&input)
                .into_iter()
                .map(|a| (a.status, a.reason))
                .collect();
            for ((status, reason), (want_status, fragment)) in got.iter().zip(expected) {
                assert_eq!(*status, want_status, "{case}: {reason}");
                assert!(
                    reason.contains(fragment),
                    "{case}: `{fragment}` not in `{reason}`"
                );
            }
        };
        use Status::*;
        let std = Mode::Standard;
        check(
            "all present",
            std,
            "",
            &everything,
            &[],
            [
                (Available, "`tool-bin` is on PATH and `TOOL_TOKEN` is set"),
                (Available, "`/opt/local-bin` is on PATH"),
            ],
        );
        check(
            "ci disables everyone, present or not",
            Mode::Ci,
            "",
            &everything,
            &[],
            [(Disabled, "mode `ci`"), (Disabled, "mode `ci`")],
        );
        check(
            "offline keeps local advisors",
            Mode::Offline,
            "",
            &everything,
            &[],
            [(Disabled, "`both` is not local"), (Available, "on PATH")],
        );
        check(
            "disable list by id",
            std,
            " both , nobody ",
            &everything,
            &[],
            [(Disabled, "names `both`"), (Available, "on PATH")],
        );
        check(
            "disable all beats absence",
            std,
            "all",
            &nothing,
            &[],
            [(Disabled, "is `all`"), (Disabled, "is `all`")],
        );
        check(
            "missing executable before missing credential",
            std,
            "",
            &nothing,
            &[],
            [
                (Unavailable, "`tool-bin` is not on PATH"),
                (Unavailable, "`/opt/local-bin` does not exist"),
            ],
        );
        check(
            "a local endpoint that answers",
            std,
            "",
            &answers,
            &[],
            [
                (Available, "on PATH"),
                (
                    Available,
                    "`/opt/local-bin` is on PATH and its endpoint `http://127.0.0.1:9` answers",
                ),
            ],
        );
        check(
            "the executable on PATH is not enough when the endpoint is silent",
            std,
            "",
            &silent,
            &[],
            [
                (Available, "on PATH"),
                (
                    Unavailable,
                    "its endpoint `http://127.0.0.1:9` does not answer (connection refused)",
                ),
            ],
        );
        check(
            "a silent endpoint does not hide the mode",
            Mode::Ci,
            "",
            &silent,
            &[],
            [(Disabled, "mode `ci`"), (Disabled, "mode `ci`")],
        );
        check(
            "missing credential",
            std,
            "",
            &no_token,
            &[],
            [(NotConfigured, "`TOOL_TOKEN` is not set"), (Available, "")],
        );
        check(
            "missing credential before the circuit",
            std,
            "",
            &no_token,
            &limited_history,
            [(NotConfigured, "`TOOL_TOKEN` is not set"), (Available, "")],
        );
        check(
            "the circuit once present",
            std,
            "",
            &everything,
            &limited_history,
            [(RateLimited, "until 2026-01-01T00:15:00Z"), (Available, "")],
        );
        check(
            "disabled before the circuit",
            std,
            "both",
            &everything,
            &limited_history,
            [(Disabled, "names `both`"), (Available, "")],
        );
    }

    #[test]
    fn disable_list_parsing() {
        let ids = |list: &[&str]| DisableList::Ids(list.iter().map(|s| s.to_string()).collect());
        let cases = [
            ("", DisableList::None),
            ("  ", DisableList::None),
            (" , ,", DisableList::None),
            ("all", DisableList::All),
            (" ALL ", DisableList::All),
            ("a, all", DisableList::All),
            ("a", ids(&["a"])),
            (" a ,b,, a ", ids(&["a", "b"])),
        ];
        for (text, expected) in cases {
            assert_eq!(DisableList::parse(text), expected, "{text:?}");
        }
        assert!(ids(&["a"]).disables("a") && !ids(&["a"]).disables("b"));
    }

    #[test]
    fn capacity_counts_available_advisors_per_capability() {
        let catalogue = Catalogue {
            mode: None,
            budget: Default::default(),
            advisors: vec![
                advisor("a", "x", &["independent_reasoning", "code_review"]),
                advisor("b", "y", &["independent_reasoning"]),
                advisor("c", "z", &["architecture"]),
            ],
        };
        let status = |id: &str, status| AdvisorAvailability {
            advisor: id.into(),
            status,
            reason: String::new(),
            recovering: false,
            until: None,
        };
        let availability = [
            status("a", Status::Available),
            status("b", Status::Available),
            status("c", Status::RateLimited),
        ];
        let capacity = capacity(&catalogue, &availability);
        assert_eq!(capacity.len(), CAPABILITIES.len());
        assert_eq!(capacity["independent_reasoning"], 2);
        assert_eq!(capacity["code_review"], 1);
        assert_eq!(capacity["architecture"], 0);
        assert_eq!(capacity["debugging"], 0);
    }

    /// The tail gives the verdict every record gives, at every moment, whatever order the
    /// records were fed in and however many came before the newest completed one.
    #[test]
    fn the_tail_judges_as_every_record_does() {
        let kinds = [
            Done,
            Fail(Timeout),
            Fail(Unavailable),
            Fail(Error),
            Fail(AuthFailed),
            Fail(Malformed),
            Fail(Cancelled),
            Limit(Some(30)),
            Limit(None),
        ];
        // A small deterministic generator: no dependency, the same cases every run.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for case in 0..300 {
            let count = 1 + next(25);
            let history: Vec<Record> = (1..=count)
                .map(|sequence| {
                    let kind = kinds[next(kinds.len() as u64) as usize];
                    // Times repeat and go backwards now and then, as across tasks they do.
                    consultation("a", sequence, next(4000) as i64, kind)
                })
                .collect();
            let mut order: Vec<usize> = (0..history.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, next(i as u64 + 1) as usize);
            }
            let mut tail = HistoryTail::default();
            for &i in &order {
                tail.feed(&history[i]);
            }
            let kept = tail.records();
            assert!(kept.len() <= history.len());
            for now_s in [0, 500, 1000, 2000, 3000, 4000, 5000, 9000] {
                assert_eq!(
                    assess_at(&kept, None, now_s),
                    assess_at(&history, None, now_s),
                    "case {case} at {now_s} s: {history:#?}"
                );
            }
        }
        // A long history behind a completed consultation is not kept.
        let mut tail = HistoryTail::default();
        for sequence in 1..=1000 {
            tail.feed(&consultation("a", sequence, sequence as i64, Fail(Timeout)));
        }
        tail.feed(&consultation("a", 1001, 1001, Done));
        tail.feed(&consultation("a", 1002, 1002, Fail(Error)));
        assert_eq!(tail.len(), 2);
    }

    /// Answers that failed together (the same instant, the same sequence, as in many tasks
    /// at once) keep the tail short, and it judges as every record does.
    #[test]
    fn answers_failed_together_keep_the_tail_short() {
        for kind in [Fail(Timeout), Limit(None), Fail(AuthFailed)] {
            let mut history = vec![consultation("a", 1, 10, Done)];
            for _ in 0..1000 {
                history.push(consultation("a", 2, 20, kind));
            }
            let mut tail = HistoryTail::default();
            for record in &history {
                tail.feed(record);
            }
            assert!(tail.len() <= 3, "{kind:?}: {} kept", tail.len());
            for now_s in [0, 20, 100, 1000, 5000] {
                assert_eq!(
                    assess_at(&tail.records(), None, now_s),
                    assess_at(&history, None, now_s),
                    "{kind:?} at {now_s} s"
                );
            }
        }
    }
}
