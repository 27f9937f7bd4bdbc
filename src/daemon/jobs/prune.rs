//! The pruner: finished jobs past the retention are dropped from memory at once when a
//! job ends (so the number kept holds however many jobs a minute runs), and from the
//! journal at the next round, in one batch, so that removing files never competes with
//! the journal writes of a burst of jobs. A job dropped from memory but not yet from the
//! journal is dropped again by the first round after a restart.

use super::{Jobs, Retention};
use crate::daemon::journal::Journal;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long a task's cached records are kept after it was last used.
pub const TASK_IDLE: Duration = Duration::from_secs(120);

/// Prune every `every`, and whenever a job ends, until shutdown begins.
pub(super) async fn run(jobs: Arc<Jobs>, retention: Retention, every: Duration) -> &'static str {
    let mut ticks = tokio::time::interval(every);
    let mut sweeps = tokio::time::interval(crate::store::IDLE_RELEASE / 3);
    // The ids dropped from memory and not yet from the journal, one a line in one buffer:
    // kept as a `JobId` each, a burst's hundreds of small strings would wait here until
    // the next round, scattered over the pages the burst freed (so that none of them
    // could go back to the system before then).
    let mut unjournal = String::new();
    loop {
        let round = tokio::select! {
            () = jobs.drain.cancelled() => break,
            _ = sweeps.tick() => {
                // A large task nobody asks about any more: its records go, and their pages
                // back to the system (`store::IDLE_RELEASE`), as do those of every task's
                // cache dropped since the last sweep, however it went (a large one is
                // often dropped for the budget by a request for another task).
                let _ = tokio::task::spawn_blocking(|| {
                    let store = crate::store::Stores::process();
                    store.release_large_idle(crate::store::IDLE_RELEASE);
                    crate::daemon::memory::released(store.take_released());
                })
                .await;
                continue;
            }
            _ = ticks.tick() => true,
            () = jobs.ended.notified() => false,
        };
        if round {
            crate::store::Stores::process()
                .release_idle(TASK_IDLE, crate::store::WorkingSet::SESSIONS);
        } else if !jobs.table.any_unfinished() {
            // The last running job ended: what the burst freed goes back to the system.
            crate::daemon::memory::after_burst(jobs.feed().clone());
        }
        for id in jobs.table.prune(retention, SystemTime::now()) {
            unjournal.push_str(id.as_str());
            unjournal.push('\n');
        }
        if !round || unjournal.is_empty() {
            continue;
        }
        tracing::debug!(count = unjournal.lines().count(), "pruning finished jobs");
        let dir = jobs.journal.dir().to_path_buf();
        let dropped = std::mem::take(&mut unjournal);
        let removed = tokio::task::spawn_blocking(move || {
            let journal = Journal::at(dir);
            dropped.lines().try_for_each(|id| journal.remove(id))
        })
        .await;
        if let Ok(Err(e)) = removed {
            tracing::warn!(error = %e, "could not prune a journaled job");
        }
    }
    "pruner"
}
