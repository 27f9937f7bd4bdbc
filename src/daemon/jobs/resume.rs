//! The jobs journaled by an earlier run, taken back at start: finished ones are listed
//! until pruned, unfinished ones are queued again (in the order they were accepted) and
//! end, like every job, through [`Jobs::finish`].

use super::{JobEntry, JobOrder, Jobs};
use crate::daemon::journal::JournalEntry;
use crate::protocol::{Event, JobState, Timestamp};
use std::sync::Arc;

impl Jobs {
    /// Take back the journaled jobs `saved`.
    pub(super) fn resume(self: &Arc<Self>, saved: Vec<JournalEntry>) {
        for saved in saved {
            let mut job = saved.job;
            let unfinished = !job.state.is_finished();
            if unfinished {
                job.state = JobState::Queued;
            }
            let order = JobOrder {
                context: saved.context,
                question: saved.question,
                prior_opinion: saved.prior_opinion,
                prompt: saved.prompt,
                timeout: saved.timeout,
                resumed: true,
            };
            let entry = Arc::new(JobEntry::new(job, order, &self.token));
            if unfinished {
                entry.attach_feed(self.feed.clone());
                tracing::info!(job = %entry.id(), "resuming a journaled job");
                self.table.insert(entry.clone());
                self.enqueue(entry);
            } else {
                entry.emit(Event::Done {
                    at: Timestamp::now(),
                    job: entry.id(),
                    result: Box::new(entry.snapshot()),
                });
                self.table.insert(entry);
            }
        }
    }
}
