//! The verbs of the network-free core, as plain functions over a [`RequestContext`].
//!
//! The CLI's in-process path (`--no-daemon`) and the daemon's handlers both call these,
//! so a verb behaves the same whichever way it is reached. Each function resolves the
//! context, opens the store and calls the core; errors are [`ServiceError`]s that know
//! their wire code, their exit status (SPEC §10) and their HTTP status.

use crate::check::{self, CheckReport};
use crate::context::{RequestContext, Resolved};
use crate::core::availability::{self, AvailabilityInput};
use crate::core::catalogue::{CatalogueError, CAPABILITIES};
use crate::core::policy::{self, PlanEnv};
use crate::core::records::{Confidence, InvalidTask, Materiality, Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::{self, ExplainView};
use crate::core::views::status::{self, StatusView};
use crate::core::views::tree::{self, TreeView};
use crate::core::writer::{ReasonCode, Refusal};
use crate::store::{Store, StoreError};
use std::path::Path;
use time::OffsetDateTime;

/// Why a verb failed.
///
/// | variant | code | exit | HTTP |
/// | --- | --- | --- | --- |
/// | `Refused` | the reason code | 3 | 422 |
/// | `Usage` | `usage` | 2 | 400 |
/// | `InvalidTask` | `invalid_task` | 2 | 400 |
/// | `NotFound` | `not_found` | 2 | 404 |
/// | `Catalogue` | `invalid_catalogue` | 2 | 400 |
/// | `Store` | `store_failed` | 1 | 500 |
/// | `Remote` | as received | from the HTTP status | as received |
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The writer refused the record; nothing was written.
    #[error("refused ({}): {}", .0.reason.as_str(), .0.message)]
    Refused(Refusal),
    /// The request itself is wrong: a flag, a variable, a path.
    #[error("{0}")]
    Usage(String),
    /// The task name is not valid (from a verb that does not write; `record` refuses it).
    #[error(transparent)]
    InvalidTask(InvalidTask),
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

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> ServiceError {
        match e {
            StoreError::Refused(refusal) => ServiceError::Refused(refusal),
            other => ServiceError::Store(other),
        }
    }
}

impl ServiceError {
    /// The snake_case code for `{"error": CODE}`; a refusal's code is its reason.
    pub fn code(&self) -> &str {
        match self {
            ServiceError::Refused(refusal) => refusal.reason.as_str(),
            ServiceError::Usage(_) => "usage",
            ServiceError::InvalidTask(_) => "invalid_task",
            ServiceError::NotFound(_) => "not_found",
            ServiceError::Catalogue(_) => "invalid_catalogue",
            ServiceError::Store(_) => "store_failed",
            ServiceError::Remote { code, .. } => code,
        }
    }

    /// The exit status of SPEC §10: 3 refused, 2 usage (including a bad id, a bad task
    /// outside `record`, a bad catalogue), 1 when the state directory failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            ServiceError::Refused(_) => 3,
            ServiceError::Usage(_)
            | ServiceError::InvalidTask(_)
            | ServiceError::NotFound(_)
            | ServiceError::Catalogue(_) => 2,
            ServiceError::Store(_) => 1,
            ServiceError::Remote { status, .. } => match status {
                422 => 3,
                400..=499 => 2,
                _ => 1,
            },
        }
    }

    /// The HTTP status the daemon answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            ServiceError::Refused(_) => 422,
            ServiceError::Usage(_) | ServiceError::InvalidTask(_) | ServiceError::Catalogue(_) => {
                400
            }
            ServiceError::NotFound(_) => 404,
            ServiceError::Store(_) => 500,
            ServiceError::Remote { status, .. } => *status,
        }
    }

    /// The refusal's reason code and message, when the writer refused.
    pub fn refusal(&self) -> Option<(&str, &str)> {
        match self {
            ServiceError::Refused(r) => Some((r.reason.as_str(), &r.message)),
            ServiceError::Remote {
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
            ServiceError::Refused(r) => r.message.clone(),
            ServiceError::Remote { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// Store `input` (one JSON object: `kind` plus the caller's fields) through the writer.
///
/// A bad task name is a refusal here (`invalid_task`, exit 3), and nothing is created.
pub fn record(ctx: &RequestContext, input: &serde_json::Value) -> Result<Record, ServiceError> {
    let resolved = Resolved::resolve(ctx).map_err(|e| match e {
        ServiceError::InvalidTask(invalid) => ServiceError::Refused(Refusal {
            reason: ReasonCode::InvalidTask,
            message: invalid.to_string(),
        }),
        other => other,
    })?;
    let store = Store::open(&resolved.state_dir);
    // Only a plan needs availability, which reads every task's consultations.
    let wants_plan = input.get("kind").and_then(|k| k.as_str()) == Some("plan");
    let record = if wants_plan {
        let env = plan_env(&resolved, &store, OffsetDateTime::now_utc())?;
        store.write(&resolved.task, input, Some(&env))?
    } else {
        store.write(&resolved.task, input, None)?
    };
    Ok(record)
}

/// Every advisor of the catalogue with its status and why, and capacity per capability.
pub fn advisors(ctx: &RequestContext) -> Result<AdvisorsView, ServiceError> {
    let resolved = Resolved::resolve(ctx)?;
    let store = Store::open(&resolved.state_dir);
    let env = plan_env(&resolved, &store, OffsetDateTime::now_utc())?;
    Ok(AdvisorsView::new(
        env.mode,
        &resolved.catalogue,
        &env.availability,
    ))
}

/// A plan preview (not recorded) for a materiality, confidence and capabilities.
pub fn plan_preview(
    ctx: &RequestContext,
    materiality: Materiality,
    confidence: Confidence,
    capabilities: Vec<String>,
) -> Result<Plan, ServiceError> {
    if let Some(unknown) = capabilities
        .iter()
        .find(|c| !CAPABILITIES.contains(&c.as_str()))
    {
        return Err(ServiceError::Usage(format!(
            "capability `{unknown}` is not known; accepted: {}",
            CAPABILITIES.join(", ")
        )));
    }
    let resolved = Resolved::resolve(ctx)?;
    let store = Store::open(&resolved.state_dir);
    let env = plan_env(&resolved, &store, OffsetDateTime::now_utc())?;
    Ok(policy::preview(
        materiality,
        confidence,
        &capabilities,
        &env,
    ))
}

/// The task's derived status.
pub fn status(ctx: &RequestContext) -> Result<StatusView, ServiceError> {
    let (_, records) = task_records(ctx)?;
    Ok(status::status(&records))
}

/// The provenance chain of record `id` of the task.
pub fn explain(ctx: &RequestContext, id: &str) -> Result<ExplainView, ServiceError> {
    let (resolved, records) = task_records(ctx)?;
    explain::explain(&records, id)
        .map_err(|e| ServiceError::NotFound(format!("{e} (task `{}`)", resolved.task)))
}

/// The task's records as a tree.
pub fn tree(
    ctx: &RequestContext,
    depth: Option<usize>,
    show_superseded: bool,
) -> Result<TreeView, ServiceError> {
    let (_, records) = task_records(ctx)?;
    Ok(tree::tree(&records, depth, show_superseded))
}

/// Provider-independence and CI-credential findings for the root, or `path` under it.
pub fn check(ctx: &RequestContext, path: Option<&Path>) -> Result<CheckReport, ServiceError> {
    let resolved = Resolved::resolve(ctx)?;
    let path = path.map(|p| resolved.root.join(p));
    if let Some(path) = &path {
        if !path.exists() {
            return Err(ServiceError::Usage(format!(
                "`--path {}` does not exist; name a directory or file under the root `{}`",
                path.display(),
                resolved.root.display()
            )));
        }
    }
    Ok(check::run(
        &resolved.root,
        &resolved.catalogue,
        path.as_deref(),
    ))
}

/// What the policy needs for plans and previews: the catalogue, the mode and every
/// advisor's availability at `now`, judged on the asking process's presence and the
/// consultations recorded in every task of the state directory.
pub fn plan_env<'r>(
    resolved: &'r Resolved,
    store: &Store,
    now: OffsetDateTime,
) -> Result<PlanEnv<'r>, ServiceError> {
    let history = store.consultations_all_tasks()?;
    let availability = availability::assess(&AvailabilityInput {
        catalogue: &resolved.catalogue,
        mode: resolved.mode,
        disable: &resolved.disable,
        presence: &resolved.presence,
        history: &history,
        cooldown_override_s: resolved.cooldown_override_s,
        now,
    });
    Ok(PlanEnv {
        catalogue: &resolved.catalogue,
        mode: resolved.mode,
        availability,
    })
}

fn task_records(ctx: &RequestContext) -> Result<(Resolved, Vec<Record>), ServiceError> {
    let resolved = Resolved::resolve(ctx)?;
    let records = Store::open(&resolved.state_dir).records(&resolved.task)?;
    Ok((resolved, records))
}
