//! A handle on one job, as every surface holds it: its events, a bounded wait, its
//! cancellation, and its report at a deadline. The relay of a mesh peer holds one like any
//! other client of the jobs.

use super::{wait_for, JobEntry, Jobs};
use crate::error::Result;
use crate::follow::{Followed, Follower};
use crate::protocol::{Event, Job, JobId, Timeout, Waited};
use crate::render::job::JobReport;
use futures::{Stream, StreamExt};
use std::sync::Arc;
use tokio::time::Instant;

/// One job of the daemon's [`Jobs`].
#[derive(Clone)]
pub struct JobHandle {
    jobs: Arc<Jobs>,
    entry: Arc<JobEntry>,
}

impl JobHandle {
    pub(super) fn new(jobs: Arc<Jobs>, entry: Arc<JobEntry>) -> JobHandle {
        JobHandle { jobs, entry }
    }

    /// The job's id.
    pub fn id(&self) -> JobId {
        self.entry.id()
    }

    /// The job as it stands.
    pub fn job(&self) -> Job {
        self.entry.snapshot()
    }

    /// Its events from position `from` on: past ones replayed, then live ones, ending
    /// after [`Event::Done`] (or when the daemon stops).
    pub fn events(&self, from: usize) -> impl Stream<Item = Event> + Send + 'static {
        self.jobs.events_of(self.entry.clone(), from)
    }

    /// Wait for the job to end, at most `bound`.
    pub async fn wait(&self, bound: Option<Timeout>) -> Result<Waited> {
        wait_for(&self.entry, bound).await
    }

    /// Cancel the job and wait for it to stop, as [`Jobs::cancel`] does.
    pub async fn cancel(&self) -> Result<Job> {
        self.jobs.cancel_entry(&self.entry).await
    }

    /// Ask the job to stop without waiting for it: its exchanges not yet recorded are
    /// cancelled, and it ends through its one `finish` as usual.
    pub fn stop(&self) {
        self.entry.request_cancel();
    }

    /// The job with every outcome recorded, once it ends or at `deadline`, whichever
    /// comes first (then as it stands, with the outcomes recorded so far).
    pub async fn report_until(&self, deadline: Instant) -> JobReport {
        let events = Box::pin(self.events(0).map(Ok::<_, crate::error::Error>));
        let mut follower = Follower::new(events);
        match follower.until(Some(deadline), |_| {}).await {
            Ok(Followed::Ended(report)) => *report,
            _ => follower.into_report(self.job()),
        }
    }
}
