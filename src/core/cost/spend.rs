//! `spend`: what was spent per advisor, per task and per day of the user's time zone, and
//! the state of every budget in force.

use super::budget::{offset_text, when, BudgetState};
use super::{consultation_cost, Spend};
use crate::core::catalogue::Catalogue;
use crate::core::records::{Body, Record};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::{OffsetDateTime, UtcOffset};

/// One row of the spend: an advisor, a task or a day, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpendRow {
    /// The advisor id, the task name or the day (`YYYY-MM-DD`, the user's time zone).
    pub name: String,
    /// What its consultations cost.
    #[serde(flatten)]
    pub spend: Spend,
}

/// Spend across every task of the state directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpendView {
    /// The catalogue's currency (`None`: no advisor is priced).
    pub currency: Option<String>,
    /// The user's UTC offset days are counted in (`UTC+01:00`).
    pub utc_offset: String,
    /// Today in the user's time zone.
    pub today: String,
    /// Per advisor, by id.
    pub advisors: Vec<SpendRow>,
    /// Per task, by name.
    pub tasks: Vec<SpendRow>,
    /// Per day, newest first.
    pub days: Vec<SpendRow>,
    /// Everything together.
    pub total: Spend,
    /// Every limit in force and its state.
    pub budgets: BudgetState,
}

/// The spend of the consultations in `history` (every task), at the catalogue's prices.
pub fn spend(
    history: &[Record],
    catalogue: &Catalogue,
    budgets: BudgetState,
    now: OffsetDateTime,
    offset: UtcOffset,
) -> SpendView {
    let mut advisors: BTreeMap<&str, Spend> = BTreeMap::new();
    let mut tasks: BTreeMap<&str, Spend> = BTreeMap::new();
    let mut days: BTreeMap<String, Spend> = BTreeMap::new();
    let mut total = Spend::default();
    for record in history {
        let Body::Consultation(c) = &record.body else {
            continue;
        };
        let cost = consultation_cost(c, catalogue);
        let usage = c.usage.as_ref();
        advisors.entry(&c.advisor).or_default().add(usage, &cost);
        tasks
            .entry(&record.envelope.task)
            .or_default()
            .add(usage, &cost);
        let day = when(record, &c.finished_at).map_or_else(
            || "unknown day".to_string(),
            |at| at.to_offset(offset).date().to_string(),
        );
        days.entry(day).or_default().add(usage, &cost);
        total.add(usage, &cost);
    }
    let rows = |map: BTreeMap<&str, Spend>| {
        map.into_iter()
            .map(|(name, spend)| SpendRow {
                name: name.to_string(),
                spend,
            })
            .collect::<Vec<_>>()
    };
    SpendView {
        currency: catalogue.currency().map(str::to_string),
        utc_offset: offset_text(offset),
        today: now.to_offset(offset).date().to_string(),
        advisors: rows(advisors),
        tasks: rows(tasks),
        days: days
            .into_iter()
            .rev()
            .map(|(name, spend)| SpendRow { name, spend })
            .collect(),
        total,
        budgets,
    }
}
