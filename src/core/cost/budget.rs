//! Budgets: for each limit (an advisor's or the total, per day or per task), what was
//! spent in its window and whether it is exhausted. A day is a calendar day in the user's
//! time zone, given as a UTC offset; a task's window is the task asked about.

use super::{consultation_cost, money, Cost};
use crate::core::catalogue::{AdvisorEntry, Budgets, Catalogue, Limits};
use crate::core::records::{Body, Record};
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime, UtcOffset};

/// Everything budgets are a function of.
pub struct BudgetInput<'a> {
    /// Prices (and the catalogue's own limits, already layered into `budgets`).
    pub catalogue: &'a Catalogue,
    /// The limits in force: catalogue, then project config, then environment.
    pub budgets: &'a Budgets,
    /// Recorded consultations across every task (other kinds ignored).
    pub history: &'a [Record],
    /// The task asked about (its per-task window); `None`: per-task limits are not judged.
    pub task: Option<&'a str>,
    /// The clock.
    pub now: OffsetDateTime,
    /// The user's UTC offset, where their day begins.
    pub offset: UtcOffset,
}

/// The window a limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// The user's calendar day.
    Day,
    /// The task asked about.
    Task,
}

impl Window {
    /// `per_day` or `per_task`, as the configuration names it.
    pub fn key(self) -> &'static str {
        match self {
            Window::Day => "per_day",
            Window::Task => "per_task",
        }
    }
}

/// What a per-task window's reset is, in words.
pub const TASK_RESET: &str = "when a new task starts";

/// One limit, what was spent in its window, and whether it is exhausted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetLine {
    /// The advisor limited, or `None` for every advisor together.
    pub advisor: Option<String>,
    /// Its window.
    pub window: Window,
    /// The limit, in `currency`.
    pub limit: f64,
    /// The known amount spent in the window.
    pub spent: f64,
    /// Consultations in the window whose cost is unknown (not in `spent`).
    pub unknown: u64,
    /// The catalogue's currency.
    pub currency: Option<String>,
    /// `spent` has reached `limit`.
    pub exhausted: bool,
    /// When the window resets (RFC 3339 UTC), for a day; `None` for a task.
    pub resets_at: Option<String>,
    /// The limit, the spend and the reset, in words.
    pub reason: String,
}

/// Every limit in force and its state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BudgetState {
    /// Totals first, then advisors by id; per day before per task.
    pub lines: Vec<BudgetLine>,
}

/// The start and end (exclusive) of the user's calendar day holding `now`.
pub fn day_window(now: OffsetDateTime, offset: UtcOffset) -> (OffsetDateTime, OffsetDateTime) {
    let local = now.to_offset(offset);
    let start = local.replace_time(time::Time::MIDNIGHT);
    let end = start.checked_add(Duration::DAY).unwrap_or(start);
    (start, end)
}

/// `UTC+01:00`, `UTC-05:30`, `UTC`.
pub fn offset_text(offset: UtcOffset) -> String {
    if offset.is_utc() {
        return "UTC".to_string();
    }
    let (h, m, _) = offset.as_hms();
    let sign = if offset.is_negative() { '-' } else { '+' };
    format!("UTC{sign}{:02}:{:02}", h.unsigned_abs(), m.unsigned_abs())
}

fn rfc3339_utc(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// When a consultation happened, as budgets place it in a day: `finished_at`, else the
/// envelope's `created_at`; `None` for another kind of record or an unreadable time.
pub fn spent_at(record: &Record) -> Option<OffsetDateTime> {
    match &record.body {
        Body::Consultation(c) => when(record, &c.finished_at),
        _ => None,
    }
}

/// When a consultation happened: `finished_at`, else the envelope's `created_at`.
pub(super) fn when(record: &Record, finished_at: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(finished_at, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(&record.envelope.created_at, &Rfc3339))
        .ok()
}

/// Known amount and unknown count in one window.
#[derive(Default, Clone, Copy)]
struct Tally {
    spent: f64,
    unknown: u64,
}

impl Tally {
    fn add(&mut self, cost: &Cost) {
        match cost {
            Cost::Metered { amount, .. } => self.spent += amount,
            Cost::FlatRate => {}
            Cost::Unknown { .. } => self.unknown += 1,
        }
    }
}

impl BudgetState {
    /// Judge every limit of `input.budgets` against the records.
    pub fn evaluate(input: &BudgetInput) -> BudgetState {
        if input.budgets.is_empty() {
            return BudgetState::default();
        }
        let (start, end) = day_window(input.now, input.offset);
        let mut day: std::collections::BTreeMap<&str, Tally> = Default::default();
        let mut task: std::collections::BTreeMap<&str, Tally> = Default::default();
        let (mut total_day, mut total_task) = (Tally::default(), Tally::default());
        for record in input.history {
            let Body::Consultation(c) = &record.body else {
                continue;
            };
            let cost = consultation_cost(c, input.catalogue);
            if when(record, &c.finished_at).is_some_and(|at| start <= at && at < end) {
                day.entry(c.advisor.as_str()).or_default().add(&cost);
                total_day.add(&cost);
            }
            if input.task == Some(record.envelope.task.as_str()) {
                task.entry(c.advisor.as_str()).or_default().add(&cost);
                total_task.add(&cost);
            }
        }
        let currency = input.catalogue.currency().map(str::to_string);
        let mut lines = Vec::new();
        let mut judge = |advisor: Option<&str>, limits: Limits, day_tally, task_tally| {
            for (window, limit, tally) in [
                (Window::Day, limits.per_day, day_tally),
                (Window::Task, limits.per_task, task_tally),
            ] {
                let Some(limit) = limit else { continue };
                if window == Window::Task && input.task.is_none() {
                    continue;
                }
                let tally: Tally = tally;
                lines.push(line(advisor, window, limit, tally, &currency, input, end));
            }
        };
        judge(None, input.budgets.total, total_day, total_task);
        for (id, limits) in &input.budgets.advisors {
            let d = day.get(id.as_str()).copied().unwrap_or_default();
            let t = task.get(id.as_str()).copied().unwrap_or_default();
            judge(Some(id), *limits, d, t);
        }
        BudgetState { lines }
    }

    /// The exhausted limit that leaves `advisor` out, if any: its own first, then a total
    /// one, which leaves out every advisor that costs something at the margin (a flat-rate
    /// or zero-priced advisor spends nothing, so no budget binds it).
    pub fn over(&self, advisor: &AdvisorEntry) -> Option<&BudgetLine> {
        if advisor
            .price
            .as_ref()
            .is_some_and(|p| p.is_free_at_margin())
        {
            return None;
        }
        let exhausted = self.lines.iter().filter(|l| l.exhausted);
        let mut total = None;
        for line in exhausted {
            match &line.advisor {
                Some(id) if *id == advisor.id => return Some(line),
                None if total.is_none() => total = Some(line),
                _ => {}
            }
        }
        total
    }

    /// The first exhausted total limit, if any.
    pub fn total_exhausted(&self) -> Option<&BudgetLine> {
        self.lines
            .iter()
            .find(|l| l.exhausted && l.advisor.is_none())
    }
}

fn line(
    advisor: Option<&str>,
    window: Window,
    limit: f64,
    tally: Tally,
    currency: &Option<String>,
    input: &BudgetInput,
    day_end: OffsetDateTime,
) -> BudgetLine {
    let exhausted = tally.spent >= limit;
    let cur = currency
        .as_deref()
        .map(|c| format!(" {c}"))
        .unwrap_or_default();
    let whose = match advisor {
        Some(_) => "its",
        None => "the total",
    };
    let (where_, resets_at, resets) = match window {
        Window::Day => {
            let day = input.now.to_offset(input.offset).date();
            let at = rfc3339_utc(day_end);
            (
                format!("on {day} ({})", offset_text(input.offset)),
                Some(at.clone()),
                format!("resets at {at}"),
            )
        }
        Window::Task => (
            format!("in task `{}`", input.task.unwrap_or_default()),
            None,
            format!("resets {TASK_RESET}"),
        ),
    };
    let unknown = match tally.unknown {
        0 => String::new(),
        n => format!(" (and {n} consultation(s) of unknown cost, not counted)"),
    };
    let who = if advisor.is_none() && exhausted {
        "the total budget is exhausted: every advisor together "
    } else {
        ""
    };
    let reason = format!(
        "{who}spent {}{cur}{unknown} of {whose} {} budget of {}{cur} {where_}; {resets}",
        money(tally.spent),
        window.key().replace('_', "-"),
        money(limit),
    );
    BudgetLine {
        advisor: advisor.map(str::to_string),
        window,
        limit,
        spent: tally.spent,
        unknown: tally.unknown,
        currency: currency.clone(),
        exhausted,
        resets_at,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::availability::tests::{advisor, consultation, Ended, T0};
    use crate::core::availability::{self, AvailabilityInput, DisableList, Presence};
    use crate::core::catalogue::{Price, Pricing};
    use crate::core::policy::{self, PlanEnv};
    use crate::core::records::{Confidence, Materiality, Mode, Status, Usage};
    use time::macros::{datetime, offset};

    /// One unit of currency per million tokens each way: `tokens(500_000)` costs 1.0.
    fn priced(id: &str) -> AdvisorEntry {
        let mut a = advisor(id, id, &["independent_reasoning"]);
        a.price = Some(Pricing::Metered(Price {
            currency: "USD".into(),
            input_per_million: 1.0,
            output_per_million: 1.0,
            as_of: "2026-01-01".into(),
        }));
        a
    }

    fn flat(id: &str) -> AdvisorEntry {
        let mut a = advisor(id, id, &["independent_reasoning"]);
        a.price = Some(Pricing::FlatRate);
        a
    }

    fn catalogue() -> Catalogue {
        Catalogue {
            mode: None,
            advisors: vec![
                priced("a"),
                priced("b"),
                flat("f"),
                advisor("u", "u", &["code_review"]),
            ],
            budget: Limits::default(),
        }
    }

    /// A consultation of `advisor` in `task` at `at`, costing `amount` (`None`: no usage).
    fn spent(advisor: &str, task: &str, at: OffsetDateTime, amount: Option<f64>) -> Record {
        let mut r = consultation(advisor, 1, 0, Ended::Done);
        r.envelope.task = task.into();
        if let Body::Consultation(c) = &mut r.body {
            c.finished_at = rfc3339_utc(at);
            c.usage = amount.map(|x| Usage {
                input_tokens: (x * 500_000.0) as u64,
                output_tokens: (x * 500_000.0) as u64,
            });
        }
        r
    }

    fn limits(day: Option<f64>, task: Option<f64>) -> Limits {
        Limits {
            per_day: day,
            per_task: task,
        }
    }

    #[test]
    fn the_day_is_the_users_calendar_day() {
        let cases = [
            (
                datetime!(2026-01-01 12:00 UTC),
                offset!(UTC),
                datetime!(2026-01-01 00:00 UTC),
            ),
            (
                datetime!(2026-01-01 00:30 UTC),
                offset!(+1),
                datetime!(2025-12-31 23:00 UTC),
            ),
            (
                datetime!(2026-01-01 22:59:59 UTC),
                offset!(+1),
                datetime!(2025-12-31 23:00 UTC),
            ),
            (
                datetime!(2026-01-01 23:00 UTC),
                offset!(+1),
                datetime!(2026-01-01 23:00 UTC),
            ),
            (
                datetime!(2026-01-01 03:00 UTC),
                offset!(-5),
                datetime!(2025-12-31 05:00 UTC),
            ),
            (
                datetime!(2026-01-01 05:00 UTC),
                offset!(-5),
                datetime!(2026-01-01 05:00 UTC),
            ),
            (
                datetime!(2026-03-01 10:00 UTC),
                offset!(+5:30),
                datetime!(2026-02-28 18:30 UTC),
            ),
        ];
        for (now, offset, want_start) in cases {
            let (start, end) = day_window(now, offset);
            assert_eq!(start, want_start, "{now} at {offset}");
            assert_eq!(end - start, Duration::DAY, "{now} at {offset}");
            assert!(start <= now && now < end, "{now} at {offset}");
        }
    }

    #[test]
    fn every_budget_window_and_its_boundaries() {
        let now = datetime!(2026-01-01 12:00 UTC);
        let plus1 = offset!(+1);
        // (case, history, advisor limits on `a`, total limits, offset, advisor over?, reason fragments)
        type Case<'a> = (
            &'a str,
            Vec<Record>,
            Limits,
            Limits,
            UtcOffset,
            Option<&'a str>,
            &'a [&'a str],
        );
        let cases: Vec<Case> = vec![
            (
                "day: reaching the limit exhausts it",
                vec![spent("a", "t", now, Some(1.0))],
                limits(Some(1.0), None),
                Limits::default(),
                offset!(UTC),
                Some("a"),
                &["spent 1.0000 USD of its per-day budget of 1.0000 USD on 2026-01-01 (UTC)", "resets at 2026-01-02T00:00:00Z"],
            ),
            (
                "day: just under the limit",
                vec![spent("a", "t", now, Some(0.998))],
                limits(Some(1.0), None),
                Limits::default(),
                offset!(UTC),
                None,
                &[],
            ),
            (
                "day: the last second of the user's yesterday does not count",
                vec![spent("a", "t", datetime!(2025-12-31 22:59:59 UTC), Some(5.0))],
                limits(Some(1.0), None),
                Limits::default(),
                plus1,
                None,
                &[],
            ),
            (
                "day: the user's midnight counts, and the window resets at the next one",
                vec![spent("a", "t", datetime!(2025-12-31 23:00 UTC), Some(5.0))],
                limits(Some(1.0), None),
                Limits::default(),
                plus1,
                Some("a"),
                &["on 2026-01-01 (UTC+01:00)", "resets at 2026-01-01T23:00:00Z"],
            ),
            (
                "day: in UTC the same consultation was yesterday",
                vec![spent("a", "t", datetime!(2025-12-31 23:00 UTC), Some(5.0))],
                limits(Some(1.0), None),
                Limits::default(),
                offset!(UTC),
                None,
                &[],
            ),
            (
                "task: spend in the task counts whatever the day",
                vec![spent("a", "t", datetime!(2025-06-01 12:00 UTC), Some(2.0))],
                limits(None, Some(2.0)),
                Limits::default(),
                offset!(UTC),
                Some("a"),
                &["of its per-task budget of 2.0000 USD in task `t`", "resets when a new task starts"],
            ),
            (
                "task: another task's spend does not count",
                vec![spent("a", "other", now, Some(9.0))],
                limits(None, Some(2.0)),
                Limits::default(),
                offset!(UTC),
                None,
                &[],
            ),
            (
                "another advisor's spend is not this advisor's",
                vec![spent("b", "t", now, Some(9.0))],
                limits(Some(1.0), Some(1.0)),
                Limits::default(),
                offset!(UTC),
                None,
                &[],
            ),
            (
                "unknown costs are not counted, and the reason says so",
                vec![spent("a", "t", now, None), spent("a", "t", now, Some(1.0))],
                limits(Some(1.0), None),
                Limits::default(),
                offset!(UTC),
                Some("a"),
                &["spent 1.0000 USD (and 1 consultation(s) of unknown cost, not counted)"],
            ),
            (
                "a limit of zero allows no metered spend",
                vec![],
                limits(Some(0.0), None),
                Limits::default(),
                offset!(UTC),
                Some("a"),
                &["spent 0.0000 USD of its per-day budget of 0.0000 USD"],
            ),
            (
                "total per day: every advisor together",
                vec![spent("a", "t", now, Some(0.5)), spent("b", "x", now, Some(0.5))],
                Limits::default(),
                limits(Some(1.0), None),
                offset!(UTC),
                Some("total"),
                &["the total budget is exhausted: every advisor together spent 1.0000 USD of the total per-day budget"],
            ),
            (
                "total per task: only the task's spend",
                vec![spent("a", "t", now, Some(0.5)), spent("b", "x", now, Some(5.0))],
                Limits::default(),
                limits(None, Some(1.0)),
                offset!(UTC),
                None,
                &[],
            ),
        ];
        for (case, history, on_a, total, offset, want, fragments) in cases {
            let catalogue = catalogue();
            let mut budgets = Budgets {
                total,
                ..Budgets::default()
            };
            if !on_a.is_empty() {
                budgets.advisors.insert("a".into(), on_a);
            }
            let state = BudgetState::evaluate(&BudgetInput {
                catalogue: &catalogue,
                budgets: &budgets,
                history: &history,
                task: Some("t"),
                now,
                offset,
            });
            let got = state.over(&catalogue.advisors[0]);
            match (want, got) {
                (None, None) => {}
                (Some(who), Some(line)) => {
                    assert_eq!(line.advisor.as_deref().unwrap_or("total"), who, "{case}");
                    for fragment in fragments {
                        assert!(
                            line.reason.contains(fragment),
                            "{case}: `{fragment}` not in {}",
                            line.reason
                        );
                    }
                    // A flat-rate advisor spends nothing: no budget binds it.
                    assert_eq!(state.over(&catalogue.advisors[2]), None, "{case}");
                }
                (want, got) => panic!("{case}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn over_budget_through_availability_policy_and_plan() {
        let now = T0 + Duration::hours(12);
        let catalogue = catalogue();
        let history = vec![
            spent("a", "t", now, Some(1.0)),
            spent("b", "t", now, Some(0.5)),
        ];
        let run = |budgets: Budgets, materiality: Materiality| {
            let state = BudgetState::evaluate(&BudgetInput {
                catalogue: &catalogue,
                budgets: &budgets,
                history: &history,
                task: Some("t"),
                now,
                offset: offset!(UTC),
            });
            let availability = availability::assess(&AvailabilityInput {
                catalogue: &catalogue,
                mode: Mode::Standard,
                disable: &DisableList::None,
                presence: &Presence::default(),
                history: &history,
                cooldown_override_s: None,
                now,
                budget: Some(&state),
            });
            let env = PlanEnv {
                catalogue: &catalogue,
                mode: Mode::Standard,
                availability,
                budget_exhausted: state.total_exhausted().map(|l| l.reason.clone()),
                asker: None,
            };
            let plan = policy::preview(materiality, Confidence::Medium, &[], &env);
            (env.availability, plan)
        };

        // `a` over its own per-day budget: left out, saying why; `b` is asked instead.
        let mut own = Budgets::default();
        own.advisors.insert("a".into(), limits(Some(1.0), None));
        let (availability, plan) = run(own, Materiality::Material);
        let a = &availability[0];
        assert_eq!(a.status, Status::OverBudget);
        assert_eq!(Status::OverBudget.as_str(), "over_budget");
        assert!(
            a.reason
                .starts_with("over budget: spent 1.0000 USD of its per-day budget"),
            "{}",
            a.reason
        );
        assert_eq!(a.until.as_deref(), Some("2026-01-02T00:00:00Z"));
        assert_eq!(availability[1].status, Status::Available);
        // Over its per-task budget instead: a task never resets, so there is no `until`,
        // and the reason says when it does start again.
        let mut per_task = Budgets::default();
        per_task
            .advisors
            .insert("a".into(), limits(None, Some(1.0)));
        let (task_availability, _) = run(per_task, Materiality::Material);
        assert_eq!(task_availability[0].status, Status::OverBudget);
        assert_eq!(task_availability[0].until, None);
        assert!(
            task_availability[0].reason.contains(TASK_RESET),
            "{}",
            task_availability[0].reason
        );
        let selected: Vec<&str> = plan.selected.iter().map(|s| s.advisor.as_str()).collect();
        assert_eq!(selected, ["b"]);
        let left_a = plan
            .left_out
            .iter()
            .find(|l| l.advisor == "a")
            .expect("a left out");
        assert!(
            left_a
                .reason
                .starts_with("over_budget: over budget: spent 1.0000 USD"),
            "{}",
            left_a.reason
        );
        assert!(plan.local_review.is_empty());

        // The total per-day budget exhausted: every advisor with a marginal cost is out,
        // the unpriced one included; the flat-rate one is still asked.
        let total = Budgets {
            total: limits(Some(1.5), None),
            ..Budgets::default()
        };
        let (availability, plan) = run(total.clone(), Materiality::Material);
        let statuses: Vec<Status> = availability.iter().map(|a| a.status).collect();
        assert_eq!(
            statuses,
            [
                Status::OverBudget,
                Status::OverBudget,
                Status::Available,
                Status::OverBudget
            ]
        );
        assert!(
            availability[0]
                .reason
                .contains("the total budget is exhausted"),
            "{}",
            availability[0].reason
        );
        let selected: Vec<&str> = plan.selected.iter().map(|s| s.advisor.as_str()).collect();
        assert_eq!(selected, ["f"]);
        assert!(plan.local_review.is_empty(), "someone was asked");

        // Without the flat-rate advisor, a material plan selects nobody and its local
        // review says the total budget is why; a low one needs no review.
        let mut metered_only = catalogue.clone();
        metered_only.advisors.retain(|a| a.id != "f");
        let state = BudgetState::evaluate(&BudgetInput {
            catalogue: &metered_only,
            budgets: &total,
            history: &history,
            task: Some("t"),
            now,
            offset: offset!(UTC),
        });
        for (materiality, review) in [
            (Materiality::Material, true),
            (Materiality::Critical, true),
            (Materiality::Low, false),
        ] {
            let env = PlanEnv {
                catalogue: &metered_only,
                mode: Mode::Standard,
                availability: availability::assess(&AvailabilityInput {
                    catalogue: &metered_only,
                    mode: Mode::Standard,
                    disable: &DisableList::None,
                    presence: &Presence::default(),
                    history: &history,
                    cooldown_override_s: None,
                    now,
                    budget: Some(&state),
                }),
                budget_exhausted: state.total_exhausted().map(|l| l.reason.clone()),
                asker: None,
            };
            let plan = policy::preview(materiality, Confidence::Medium, &[], &env);
            assert!(plan.selected.is_empty());
            assert_eq!(!plan.local_review.is_empty(), review, "{materiality:?}");
            if review {
                assert!(
                    plan.local_review[0].starts_with("No advisor was consulted because the total budget is exhausted: every advisor together spent 1.5000 USD"),
                    "{}",
                    plan.local_review[0]
                );
                assert_eq!(plan.local_review.len(), policy::LOCAL_REVIEW.len() + 1);
            }
            assert!(
                plan.left_out
                    .iter()
                    .all(|l| l.reason.starts_with("over_budget: ")),
                "{:?}",
                plan.left_out
            );
        }

        // The mode comes first: in `ci` every advisor is disabled whatever the spend.
        let state = BudgetState::evaluate(&BudgetInput {
            catalogue: &catalogue,
            budgets: &total,
            history: &history,
            task: Some("t"),
            now,
            offset: offset!(UTC),
        });
        let ci = availability::assess(&AvailabilityInput {
            catalogue: &catalogue,
            mode: Mode::Ci,
            disable: &DisableList::None,
            presence: &Presence::default(),
            history: &history,
            cooldown_override_s: None,
            now,
            budget: Some(&state),
        });
        assert!(ci.iter().all(|a| a.status == Status::Disabled));
    }
}
