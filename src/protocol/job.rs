//! A consultation job as clients see it: its state, its consultations, the events of its
//! stream, and the daemon's health. These shapes are fixed: tests outside the project read
//! them.

use super::ids::{JobId, RecordId, Timestamp};
use crate::core::records::{ConsultationStatus, FailureKind, Record};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a job is in its life.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Journaled; not started yet.
    Queued,
    /// Planning or consulting.
    Running,
    /// Every selected advisor has a recorded consultation (or none was selected). A done
    /// job may still have no completed consultation: see [`Job::none_completed`].
    Done,
    /// Cancelled by `DELETE`: exchanges in flight were stopped and recorded as
    /// `cancelled` failures; advisors never started are not recorded.
    Cancelled,
    /// It could not go on (the assessment vanished, the state directory is unwritable,
    /// the disk is full...); [`Job::reason`] says why.
    Failed,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Done,
        JobState::Cancelled,
        JobState::Failed,
    ];

    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Cancelled => "cancelled",
            JobState::Failed => "failed",
        }
    }

    /// Whether the job has ended (done, cancelled or failed).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Cancelled | JobState::Failed
        )
    }
}

/// Where one selected advisor's exchange stands within a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeStatus {
    /// Not started (waiting for its turn under `max_concurrent`, or for the job to run).
    Pending,
    /// Asked; its outcome is not recorded yet (it may have answered and be waiting for an
    /// earlier advisor of the plan to be recorded first).
    Running,
    /// Recorded as a completed consultation.
    Completed,
    /// Recorded as a failed consultation ([`JobConsultation::failure`] says why).
    Failed,
}

impl From<ConsultationStatus> for ExchangeStatus {
    fn from(status: ConsultationStatus) -> Self {
        match status {
            ConsultationStatus::Completed => ExchangeStatus::Completed,
            ConsultationStatus::Failed => ExchangeStatus::Failed,
        }
    }
}

/// One selected advisor of a job's plan, in plan order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobConsultation {
    /// The advisor id.
    pub advisor: String,
    /// The consultation record's id, once recorded.
    pub record: Option<RecordId>,
    /// Where the exchange stands.
    pub status: ExchangeStatus,
    /// The failure kind, when recorded as failed (`cancelled`, with no record, for an
    /// exchange its job stopped before recording it).
    pub failure: Option<FailureKind>,
    /// What the recorded consultation cost, at the catalogue's price (derived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::core::cost::Cost>,
}

/// A consultation job: the reply to `POST`, `GET` and `DELETE` of a job, and
/// the last event of its stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Job {
    /// The job id (a ULID).
    pub id: JobId,
    /// Where it is in its life.
    pub state: JobState,
    /// The root it concerns (absolute).
    pub root: String,
    /// The task it records into.
    pub task: String,
    /// The assessment consulted on.
    pub assessment: RecordId,
    /// The plan record's id, once recorded.
    pub plan: Option<RecordId>,
    /// One entry per selected advisor, in plan order (empty before the plan, or when the
    /// plan selected nobody).
    pub consultations: Vec<JobConsultation>,
    /// The disagreement record's id, when a completed consultation diverged.
    pub disagreement: Option<RecordId>,
    /// When the job was accepted.
    pub created_at: Timestamp,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
    /// Why it failed or was cancelled, in one sentence (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The job's deadline in seconds: each exchange must end this long after the fan-out
    /// starts (absent in jobs journaled before it was shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
}

#[cfg(test)]
impl Job {
    /// A job with placeholder fields in `state`, for unit tests.
    pub(crate) fn sample(id: &str, state: JobState) -> Job {
        Job {
            state,
            created_at: Timestamp::parse("2026-01-01T00:00:00Z").expect("a time"),
            ..Job::queued(JobId::from(id), "/r".into(), "t".into(), "A".into(), None)
        }
    }
}

impl Job {
    /// A job just accepted: queued now, nothing planned or recorded yet.
    pub fn queued(
        id: JobId,
        root: String,
        task: String,
        assessment: RecordId,
        timeout_s: Option<f64>,
    ) -> Job {
        Job {
            id,
            state: JobState::Queued,
            root,
            task,
            assessment,
            plan: None,
            consultations: Vec::new(),
            disagreement: None,
            created_at: Timestamp::now(),
            finished_at: None,
            reason: None,
            timeout_s,
        }
    }

    /// Whether the plan selected someone and no consultation completed: the client then
    /// exits 1, though the job itself is `done`.
    pub fn none_completed(&self) -> bool {
        !self.consultations.is_empty()
            && !self
                .consultations
                .iter()
                .any(|c| c.status == ExchangeStatus::Completed)
    }
}

/// The reply of `GET /api/v1/consultations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobList {
    /// The jobs kept (unfinished ones and recently finished ones), oldest first.
    pub jobs: Vec<Job>,
}

/// One line of a job's event stream (`GET /api/v1/consultations/{id}/events`), tagged by
/// `event`. Every event names its `job`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The plan is recorded (or was found recorded, when a job resumes).
    Plan {
        /// The job id.
        job: JobId,
        /// When it happened, by the daemon's clock (a late joiner shows the real time since
        /// the job was queued).
        at: Timestamp,
        /// The stored plan record (selected advisors in order, left out, local review).
        record: Box<Record>,
    },
    /// An exchange with an advisor began (after waiting for its `max_concurrent` turn).
    Started {
        /// The job id.
        job: JobId,
        /// The advisor asked.
        advisor: String,
        /// When (so a client that joins late can show the elapsed time).
        at: Timestamp,
    },
    /// An exchange ended, in the order answers arrive; the outcome is recorded later, in
    /// plan order ([`Event::Recorded`]).
    Finished {
        /// The job id.
        job: JobId,
        /// When it happened, by the daemon's clock (a late joiner shows the real time since
        /// the job was queued).
        at: Timestamp,
        /// The advisor that answered or failed.
        advisor: String,
        /// Completed (an answer with a conclusion) or failed.
        status: ConsultationStatus,
        /// The failure kind, when failed.
        failure: Option<FailureKind>,
        /// The diagnostic, when failed.
        diagnostic: Option<String>,
        /// How long the exchange took.
        duration_ms: u64,
    },
    /// A consultation record was stored (in plan order).
    Recorded {
        /// The job id.
        job: JobId,
        /// When it happened, by the daemon's clock (a late joiner shows the real time since
        /// the job was queued).
        at: Timestamp,
        /// The advisor it records.
        advisor: String,
        /// The stored consultation record.
        record: Box<Record>,
    },
    /// A completed consultation diverged and the disagreement was recorded.
    Disagreement {
        /// The job id.
        job: JobId,
        /// When it happened, by the daemon's clock (a late joiner shows the real time since
        /// the job was queued).
        at: Timestamp,
        /// The stored disagreement record.
        record: Box<Record>,
    },
    /// The job ended; always the last event of a stream.
    Done {
        /// The job id.
        job: JobId,
        /// When it happened, by the daemon's clock (a late joiner shows the real time since
        /// the job was queued).
        at: Timestamp,
        /// The job as it ended (its `state` says done, cancelled or failed).
        result: Box<Job>,
    },
}

impl Event {
    /// When the event happened, by the daemon's clock.
    pub fn at(&self) -> Timestamp {
        match self {
            Event::Plan { at, .. }
            | Event::Started { at, .. }
            | Event::Finished { at, .. }
            | Event::Recorded { at, .. }
            | Event::Disagreement { at, .. }
            | Event::Done { at, .. } => *at,
        }
    }

    /// The id of the job this event belongs to.
    pub fn job_id(&self) -> &JobId {
        match self {
            Event::Plan { job, .. }
            | Event::Started { job, .. }
            | Event::Finished { job, .. }
            | Event::Recorded { job, .. }
            | Event::Disagreement { job, .. }
            | Event::Done { job, .. } => job,
        }
    }

    /// Whether this is the last event of its job.
    pub fn is_done(&self) -> bool {
        matches!(self, Event::Done { .. })
    }
}

/// The reply of `GET /api/v1/health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Health {
    /// The daemon's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// How many jobs are kept in each state (every state listed, 0 included).
    pub jobs: BTreeMap<JobState, usize>,
    /// The link to the mesh, when the daemon was started with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<crate::core::views::advisors::MeshStatus>,
    /// The TCP listener (`advisord --listen`), when the daemon serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listening: Option<Listening>,
}

/// Where a daemon's TCP listener is, and where its token is kept (the file, never the
/// token: only the user who can read the file can open the cockpit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Listening {
    /// The address it is bound to, `ADDR:PORT`.
    pub address: String,
    /// The token's file in the daemon's data directory (mode `0600`).
    pub token_file: std::path::PathBuf,
}
