//! The budget index: the consultations of the last two days that budgets count beside
//! the task's own, kept only once a limit is first in force.

use super::*;

/// Whether the index keeps the consultations budgets count.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spending {
    /// Not kept: no budget was judged yet.
    #[default]
    Off,
    /// Kept from every record fed from now on, while the records fed before are read back.
    Gathering,
    /// Kept and complete: every consultation fed is in it.
    Kept,
}

/// How far back the index keeps consultations for budgets. A day window is the user's
/// calendar day holding the clock, so it starts less than a day before it, whatever the
/// user's UTC offset; the rest is margin.
pub const RECENT_SPEND: Duration = Duration::from_secs(2 * 24 * 3600);

/// A consultation stripped to what budgets read (task, advisor, usage, when).
pub(super) fn spend_only(record: &Record) -> Record {
    let mut kept = record.clone();
    kept.envelope.prev = None;
    if let Body::Consultation(c) = &mut kept.body {
        c.diagnostic = None;
        c.conclusion = None;
        c.assumptions = Vec::new();
        c.risks = Vec::new();
        c.actions = Vec::new();
        c.falsifiers = Vec::new();
    }
    kept
}

/// What budgets read of a consultation kept in the index, in a few words of memory: the
/// record is made again (stripped, as [`spend_only`]) only when budgets are judged.
pub(super) struct Spent {
    pub(super) at: time::OffsetDateTime,
    pub(super) record: Box<Record>,
}

impl Spent {
    /// `record` as budgets keep it, when it is a consultation that spent at `since` or
    /// later.
    pub(super) fn of(record: &Record, since: time::OffsetDateTime) -> Option<Spent> {
        let at = crate::core::cost::spent_at(record)?;
        (at >= since).then(|| Spent {
            at,
            record: Box::new(spend_only(record)),
        })
    }
}

impl Store {
    /// Every consultation record of every task, for availability.
    pub fn consultations_all_tasks(&self) -> Result<Vec<Record>, StoreError> {
        let mut consultations = Vec::new();
        for task in self.tasks()? {
            self.with_records(&task, |records| {
                consultations.extend(
                    records
                        .iter()
                        .filter(|r| matches!(r.body, Body::Consultation(_)))
                        .cloned(),
                );
            })?;
        }
        Ok(consultations)
    }

    /// The consultations budgets count for `task` at `now`, equal for budgets to every
    /// consultation stored: all of `task`'s (its per-task window) and, from the other
    /// tasks, those of the days around `now` (a day window holds `now`, and the index
    /// keeps the last [`RECENT_SPEND`] by the wall clock). Each consultation comes once.
    pub fn budget_history(
        &self,
        task: &TaskName,
        now: time::OffsetDateTime,
    ) -> Result<Vec<Record>, StoreError> {
        self.open_index()?;
        self.keep_spending()?;
        self.feed_every_task()?;
        self.spend_history(task, now)
    }

    /// Make the index keep the consultations budgets count, if it does not yet: from now
    /// on every record fed is kept, and the consultations fed before (which it did not
    /// keep) are read back from every task once. A store never fed has nothing to read
    /// back: its first catch-up feeds it everything.
    pub(super) fn keep_spending(&self) -> Result<(), StoreError> {
        let _turn = lock(&self.spending_turn);
        let fed_before = {
            let mut circuit = lock(&self.circuit);
            if circuit.spending == Spending::Kept {
                return Ok(());
            }
            circuit.spending = Spending::Gathering;
            !circuit.fed.is_empty()
        };
        if fed_before {
            let since = time::OffsetDateTime::now_utc() - RECENT_SPEND;
            let read = self.consultations_all_tasks();
            let mut circuit = lock(&self.circuit);
            let earlier = match read {
                Ok(earlier) => earlier,
                Err(e) => {
                    circuit.spending = Spending::Off;
                    circuit.recent = Vec::new();
                    return Err(e);
                }
            };
            // Records fed while gathering are kept already, and read back too: once each.
            let kept: std::collections::HashSet<String> = circuit
                .recent
                .iter()
                .map(|s| s.record.id().to_string())
                .collect();
            circuit.recent.extend(
                earlier
                    .iter()
                    .filter(|r| !kept.contains(r.id()))
                    .filter_map(|r| Spent::of(r, since)),
            );
        }
        let mut circuit = lock(&self.circuit);
        circuit.spending = Spending::Kept;
        circuit.index.clean = false;
        Ok(())
    }

    /// [`Store::budget_history`] over the index as it was last fed.
    pub(super) fn spend_history(
        &self,
        task: &TaskName,
        now: time::OffsetDateTime,
    ) -> Result<Vec<Record>, StoreError> {
        let mut history = self.with_records(task, |records| {
            records
                .iter()
                .filter(|r| matches!(r.body, Body::Consultation(_)))
                .map(spend_only)
                .collect::<Vec<_>>()
        })?;
        let since = now - RECENT_SPEND;
        let mut circuit = lock(&self.circuit);
        let wall = time::OffsetDateTime::now_utc() - RECENT_SPEND;
        circuit.recent.retain(|s| s.at >= wall.min(since));
        history.extend(
            circuit
                .recent
                .iter()
                .filter(|s| s.at >= since && s.record.envelope.task != task.as_str())
                .map(|s| (*s.record).clone()),
        );
        Ok(history)
    }
}
