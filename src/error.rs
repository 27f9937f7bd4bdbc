//! The one error type of every verb, wherever it runs: in this process, in the daemon, or
//! across the socket. Each error knows its wire code, its exit status and its HTTP status,
//! so the CLI's exit path, the daemon's error replies and the client's reading of them
//! agree.
//!
//! | variant | code | exit | HTTP |
//! | --- | --- | --- | --- |
//! | `Refused` | the reason code | 3 | 422 |
//! | `Usage` | `usage` | 2 | 400 |
//! | `InvalidTask` | `invalid_task` | 2 | 400 |
//! | `InvalidRequest` | `invalid_request` | 2 | 400 |
//! | `InvalidRoot` | `invalid_root` | 2 | 400 |
//! | `Catalogue` | `invalid_catalogue` | 2 | 400 |
//! | `NotFound` | `not_found` | 2 | 404 |
//! | `UnknownJob` | `unknown_job` | 2 | 404 |
//! | `JobFinished` | `job_finished` | 2 | 409 |
//! | `Store` | `store_failed` | 1 | 500 |
//! | `Internal` | `internal` | 1 | 500 |
//! | `ShuttingDown` | `shutting_down` | 4 | 503 |
//! | `Unreachable` | `unreachable` | 4 | 503 |
//! | `NotOurs` | `not_ours` | 4 | 503 |
//! | `Protocol` | `protocol` | 1 | 502 |
//! | `Remote` | as received | from the HTTP status | as received |

use crate::core::catalogue::CatalogueError;
use crate::core::records::InvalidTask;
use crate::core::writer::Refusal;
use crate::protocol::{codes, JobId, JobState};
use crate::store::StoreError;
use std::path::PathBuf;

/// What a verb returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a verb failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The writer refused the record; nothing was written.
    #[error("refused ({}): {}", .0.reason.as_str(), .0.message)]
    Refused(Refusal),
    /// The request itself is wrong: a flag, a variable, a path.
    #[error("{0}")]
    Usage(String),
    /// The task name is not valid (from a verb that does not write; `record` refuses it).
    #[error(transparent)]
    InvalidTask(InvalidTask),
    /// A field or query parameter of a request is missing or out of range.
    #[error("{0}")]
    InvalidRequest(String),
    /// The root is relative, missing, or not a directory.
    #[error("{0}")]
    InvalidRoot(String),
    /// The record asked for is not in the task.
    #[error("{0}")]
    NotFound(String),
    /// The catalogue could not be read or is not valid; the message names the file, the
    /// advisor and the field.
    #[error("invalid catalogue: {0}")]
    Catalogue(#[from] CatalogueError),
    /// The state directory could not be read or written (nothing was half-written).
    #[error(transparent)]
    Store(StoreError),
    /// No job has this id (it never existed, or was pruned after it ended).
    #[error(
        "no job `{0}`: it never existed or was pruned after it ended; \
         `GET /api/v1/consultations` lists the jobs kept"
    )]
    UnknownJob(JobId),
    /// The job has already ended, so it cannot be cancelled.
    #[error("job `{id}` already ended ({}); there is nothing to cancel", .state.as_str())]
    JobFinished {
        /// The job.
        id: JobId,
        /// How it ended.
        state: JobState,
    },
    /// The daemon is shutting down and accepts no new job.
    #[error("the daemon is shutting down and accepts no new job; retry once it is back")]
    ShuttingDown,
    /// The daemon itself failed (its journal could not be written...).
    #[error("{0}")]
    Internal(String),
    /// No daemon answers on the socket and none could be started (exit 4).
    #[error("no daemon answers on `{}`: {reason}; {hint}", socket.display())]
    Unreachable {
        /// The socket tried.
        socket: PathBuf,
        /// What went wrong.
        reason: String,
        /// What to do next.
        hint: String,
    },
    /// The socket, its directory or the process serving it is not the user's own: nothing
    /// is sent, and no daemon is started there (exit 4).
    #[error("refusing the daemon's socket `{}`: {reason}; {}", socket.display(), reason.hint())]
    NotOurs {
        /// The socket.
        socket: PathBuf,
        /// Whose it is instead.
        reason: crate::ownership::NotOurs,
    },
    /// The daemon answered something this client cannot read (exit 1).
    #[error("the daemon's reply could not be read: {0}; check that `advisord` and `advisor-consult` are the same version")]
    Protocol(String),
    /// A review of the mesh inbox could not be listed or answered: no inbox (409
    /// `no_inbox`), no such review (404 `unknown_review`), an unreadable answer (400
    /// `invalid_answer`), the bus down (503 `mesh_down`).
    #[error("{message}")]
    Review {
        /// The code of `crate::protocol::codes`.
        code: &'static str,
        /// The HTTP status.
        status: u16,
        /// What is wrong and what to do.
        message: String,
    },
    /// An error the daemon reported, carried back to the client as it came.
    #[error("{message}")]
    Remote {
        /// The `error` code of the daemon's reply (a reason code for a refusal).
        code: String,
        /// The daemon's message.
        message: String,
        /// The HTTP status of the reply.
        status: u16,
    },
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        match e {
            StoreError::Refused(refusal) => Error::Refused(refusal),
            other => Error::Store(other),
        }
    }
}

impl Error {
    /// The snake_case code for `{"error": CODE}`; a refusal's code is its reason.
    pub fn code(&self) -> &str {
        match self {
            Error::Refused(refusal) => refusal.reason.as_str(),
            Error::Usage(_) => codes::USAGE,
            Error::InvalidTask(_) => codes::INVALID_TASK,
            Error::InvalidRequest(_) => codes::INVALID_REQUEST,
            Error::InvalidRoot(_) => codes::INVALID_ROOT,
            Error::NotFound(_) => codes::NOT_FOUND,
            Error::Catalogue(_) => codes::INVALID_CATALOGUE,
            Error::Store(_) => codes::STORE_FAILED,
            Error::UnknownJob(_) => codes::UNKNOWN_JOB,
            Error::JobFinished { .. } => codes::JOB_FINISHED,
            Error::ShuttingDown => codes::SHUTTING_DOWN,
            Error::Internal(_) => codes::INTERNAL,
            Error::Unreachable { .. } => codes::UNREACHABLE,
            Error::NotOurs { .. } => codes::NOT_OURS,
            Error::Protocol(_) => codes::PROTOCOL,
            Error::Review { code, .. } => code,
            Error::Remote { code, .. } => code,
        }
    }

    /// The exit status: 3 refused, 2 usage (including a bad id, a bad task outside
    /// `record`, a bad catalogue), 4 no daemon, 1 when the state directory or the daemon
    /// failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Refused(_) => 3,
            Error::Usage(_)
            | Error::InvalidTask(_)
            | Error::InvalidRequest(_)
            | Error::InvalidRoot(_)
            | Error::NotFound(_)
            | Error::Catalogue(_)
            | Error::UnknownJob(_)
            | Error::JobFinished { .. } => 2,
            Error::Store(_) | Error::Internal(_) | Error::Protocol(_) => 1,
            Error::ShuttingDown | Error::Unreachable { .. } | Error::NotOurs { .. } => 4,
            Error::Remote { status, .. } | Error::Review { status, .. } => match status {
                422 => 3,
                400..=499 => 2,
                _ => 1,
            },
        }
    }

    /// The HTTP status the daemon answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::Refused(_) => 422,
            Error::Usage(_)
            | Error::InvalidTask(_)
            | Error::InvalidRequest(_)
            | Error::InvalidRoot(_)
            | Error::Catalogue(_) => 400,
            Error::NotFound(_) | Error::UnknownJob(_) => 404,
            Error::JobFinished { .. } => 409,
            Error::Store(_) | Error::Internal(_) => 500,
            Error::Protocol(_) => 502,
            Error::ShuttingDown | Error::Unreachable { .. } | Error::NotOurs { .. } => 503,
            Error::Remote { status, .. } | Error::Review { status, .. } => *status,
        }
    }

    /// The refusal's reason code and message, when the writer refused.
    pub fn refusal(&self) -> Option<(&str, &str)> {
        match self {
            Error::Refused(r) => Some((r.reason.as_str(), &r.message)),
            Error::Remote {
                code,
                message,
                status: 422,
            } => Some((code, message)),
            _ => None,
        }
    }

    /// The message alone (no code prefix), for `{"error", "message"}` replies.
    pub fn message(&self) -> String {
        match self {
            Error::Refused(r) => r.message.clone(),
            Error::Remote { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_code_exit_and_status() {
        let check = |e: Error, code: &str, exit: i32, status: u16| {
            assert_eq!(
                (e.code(), e.exit_code(), e.http_status()),
                (code, exit, status),
                "{e}"
            );
        };
        check(Error::Usage("u".into()), "usage", 2, 400);
        check(Error::UnknownJob("J".into()), "unknown_job", 2, 404);
        check(
            Error::JobFinished {
                id: "J".into(),
                state: JobState::Done,
            },
            "job_finished",
            2,
            409,
        );
        check(Error::ShuttingDown, "shutting_down", 4, 503);
        check(Error::Internal("i".into()), "internal", 1, 500);
        let remote = |status| Error::Remote {
            code: "c".into(),
            message: "m".into(),
            status,
        };
        check(remote(422), "c", 3, 422);
        check(remote(404), "c", 2, 404);
        check(remote(500), "c", 1, 500);
    }
}
