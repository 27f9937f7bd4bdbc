//! Where a network-free verb runs: in this process ([`Local`]) or in the daemon (the
//! `Remote` backend of `src/client.rs`). Both give the same answers, because the daemon's
//! handlers call the same [`crate::service`] functions as [`Local`].

use crate::check::CheckReport;
use crate::context::{GlobalFlags, RequestContext};
use crate::core::records::{Confidence, Materiality, Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::ExplainView;
use crate::core::views::status::StatusView;
use crate::core::views::tree::TreeView;
use crate::service::{self, ServiceError};
use std::path::{Path, PathBuf};

/// Why a backend could not answer.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The verb ran and failed (a refusal, a usage error, a missing record...).
    #[error(transparent)]
    Service(#[from] ServiceError),
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
    /// The daemon answered something this client cannot read (exit 1).
    #[error("the daemon's reply could not be read: {0}; check that `advisord` and `advisor-consult` are the same version")]
    Protocol(String),
}

impl BackendError {
    /// The exit status of SPEC §10.
    pub fn exit_code(&self) -> i32 {
        match self {
            BackendError::Service(e) => e.exit_code(),
            BackendError::Unreachable { .. } => 4,
            BackendError::Protocol(_) => 1,
        }
    }
}

/// What a backend returns.
pub type BackendResult<T> = Result<T, BackendError>;

/// The network-free verbs, wherever they run.
pub trait Backend {
    /// Store one record through the writer.
    fn record(&self, input: &serde_json::Value) -> BackendResult<Record>;
    /// Every advisor, its status and why; capacity per capability.
    fn advisors(&self) -> BackendResult<AdvisorsView>;
    /// A plan preview (not recorded).
    fn plan_preview(
        &self,
        materiality: Materiality,
        confidence: Confidence,
        capabilities: Vec<String>,
    ) -> BackendResult<Plan>;
    /// The task's derived status.
    fn status(&self) -> BackendResult<StatusView>;
    /// The provenance chain of a record.
    fn explain(&self, id: &str) -> BackendResult<ExplainView>;
    /// The task's records as a tree.
    fn tree(&self, depth: Option<usize>, show_superseded: bool) -> BackendResult<TreeView>;
    /// Provider-independence and CI-credential findings.
    fn check(&self, path: Option<&Path>) -> BackendResult<CheckReport>;
}

/// Runs every verb in this process, through [`crate::service`].
#[derive(Debug)]
pub struct Local {
    ctx: RequestContext,
}

impl Local {
    /// A backend for the asking process's context.
    pub fn new(ctx: RequestContext) -> Local {
        Local { ctx }
    }
}

impl Backend for Local {
    fn record(&self, input: &serde_json::Value) -> BackendResult<Record> {
        Ok(service::record(&self.ctx, input)?)
    }

    fn advisors(&self) -> BackendResult<AdvisorsView> {
        Ok(service::advisors(&self.ctx)?)
    }

    fn plan_preview(
        &self,
        materiality: Materiality,
        confidence: Confidence,
        capabilities: Vec<String>,
    ) -> BackendResult<Plan> {
        Ok(service::plan_preview(
            &self.ctx,
            materiality,
            confidence,
            capabilities,
        )?)
    }

    fn status(&self) -> BackendResult<StatusView> {
        Ok(service::status(&self.ctx)?)
    }

    fn explain(&self, id: &str) -> BackendResult<ExplainView> {
        Ok(service::explain(&self.ctx, id)?)
    }

    fn tree(&self, depth: Option<usize>, show_superseded: bool) -> BackendResult<TreeView> {
        Ok(service::tree(&self.ctx, depth, show_superseded)?)
    }

    fn check(&self, path: Option<&Path>) -> BackendResult<CheckReport> {
        Ok(service::check(&self.ctx, path)?)
    }
}

/// The backend for this invocation: in-process with `--no-daemon`; otherwise the daemon
/// on the socket, started first when nobody answers (unless `--no-autostart`: exit 4).
pub fn select_backend(flags: &GlobalFlags, ctx: RequestContext) -> BackendResult<Box<dyn Backend>> {
    if flags.no_daemon {
        return Ok(Box::new(Local::new(ctx)));
    }
    Ok(Box::new(crate::client::Remote::connect(flags, ctx)?))
}
