//! Following one job's events to its end: the one follower every surface uses (the
//! façade's `wait`, the CLI's live progress, the MCP server's progress notifications, the
//! daemon's own job handle). It keeps the records the stream
//! carried, for the job's report, and knows when the job has ended.

use crate::error::Result;
use crate::protocol::{Event, Job};
use crate::render::job::{JobReport, Seen};
use futures::{Stream, StreamExt};
use tokio::time::Instant;

/// How following a job came out.
#[derive(Debug)]
pub enum Followed {
    /// The job ended: its report, with the records its stream carried.
    Ended(Box<JobReport>),
    /// The deadline passed first.
    DeadlinePassed,
    /// The stream ended without the job's end (the daemon is stopping).
    StreamEnded,
}

/// One job's event stream, followed.
pub struct Follower<S> {
    events: S,
    seen: Seen,
    /// The ids of the records the stream carried.
    carried: Vec<String>,
    /// The job as it ended, once the stream said so.
    ended: Option<Job>,
}

impl<S: Stream<Item = Result<Event>> + Unpin> Follower<S> {
    /// Follow `events` (from the job's first event).
    pub fn new(events: S) -> Follower<S> {
        Follower {
            events,
            seen: Seen::default(),
            carried: Vec::new(),
            ended: None,
        }
    }

    /// The next event, its records kept; `None` once the stream ended. After
    /// [`Event::Done`], [`Follower::ended`] holds the job as it ended.
    pub async fn next(&mut self) -> Result<Option<Event>> {
        let Some(event) = self.events.next().await.transpose()? else {
            return Ok(None);
        };
        if let Event::Plan { record, .. }
        | Event::Recorded { record, .. }
        | Event::Disagreement { record, .. } = &event
        {
            self.carried.push(record.id().to_string());
        }
        if let Some(job) = self.seen.absorb(event.clone()) {
            self.ended = Some(job);
        }
        Ok(Some(event))
    }

    /// Whether the stream said the job ended.
    pub fn ended(&self) -> bool {
        self.ended.is_some()
    }

    /// Whether the stream carried every record `job` references.
    pub fn carried_all(&self, job: &Job) -> bool {
        job.plan
            .iter()
            .chain(job.consultations.iter().filter_map(|c| c.record.as_ref()))
            .chain(job.disagreement.iter())
            .all(|id| self.carried.iter().any(|c| c == id.as_str()))
    }

    /// Follow until the job ends, the stream ends, or `deadline` (none: no deadline),
    /// calling `on_event` with each event.
    pub async fn until(
        &mut self,
        deadline: Option<Instant>,
        mut on_event: impl FnMut(&Event),
    ) -> Result<Followed> {
        let passed = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(passed);
        loop {
            let next = tokio::select! {
                biased;
                next = self.next() => next?,
                () = &mut passed => return Ok(Followed::DeadlinePassed),
            };
            match next {
                Some(event) => {
                    on_event(&event);
                    if let Some(report) = self.take_report() {
                        return Ok(Followed::Ended(Box::new(report)));
                    }
                }
                None => return Ok(Followed::StreamEnded),
            }
        }
    }

    /// The job's report, once it ended.
    pub fn take_report(&mut self) -> Option<JobReport> {
        let job = self.ended.take()?;
        Some(std::mem::take(&mut self.seen).report(job))
    }

    /// The records seen so far.
    pub fn into_seen(self) -> Seen {
        self.seen
    }

    /// The report of `job` (as it stands) with the records seen so far.
    pub fn into_report(self, job: Job) -> JobReport {
        self.seen.report(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{JobId, JobState, RecordId, Timestamp};
    use std::time::Duration;

    fn job(state: JobState) -> Job {
        let mut job = Job::queued(
            JobId::generate(),
            "/r".into(),
            "t".into(),
            RecordId::from("A"),
            None,
        );
        job.state = state;
        job
    }

    fn started(job: &Job) -> Event {
        Event::Started {
            job: job.id.clone(),
            advisor: "a".into(),
            at: Timestamp::now(),
        }
    }

    #[tokio::test]
    async fn a_job_followed_ends_with_its_done_event_and_each_event_is_seen() {
        let ended = job(JobState::Done);
        let done = Event::Done {
            at: Timestamp::now(),
            job: ended.id.clone(),
            result: Box::new(ended.clone()),
        };
        let events = futures::stream::iter(vec![Ok(started(&ended)), Ok(done)]);
        let mut follower = Follower::new(events);
        let mut seen = 0;
        match follower.until(None, |_| seen += 1).await.unwrap() {
            Followed::Ended(report) => assert_eq!(report.job, ended),
            other => panic!("{other:?}"),
        }
        assert_eq!(seen, 2);
    }

    #[tokio::test]
    async fn a_stream_cut_before_the_end_and_a_deadline_are_told_apart() {
        let running = job(JobState::Running);
        let cut = futures::stream::iter(vec![Ok(started(&running))]);
        let mut follower = Follower::new(cut);
        assert!(matches!(
            follower.until(None, |_| {}).await.unwrap(),
            Followed::StreamEnded
        ));
        assert!(!follower.ended());

        let silent = futures::stream::pending::<Result<Event>>();
        let mut follower = Follower::new(silent);
        let deadline = Instant::now() + Duration::from_millis(20);
        assert!(matches!(
            follower.until(Some(deadline), |_| {}).await.unwrap(),
            Followed::DeadlinePassed
        ));
        // A job with no record to catch up is caught up at once.
        assert!(follower.carried_all(&running));
        let report = follower.into_report(running.clone());
        assert_eq!(report.job, running);
    }
}
