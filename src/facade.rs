//! The façade: every verb, job verbs included, as one async trait ([`Api`]) that every
//! surface calls: the CLI today, the MCP server and the web page next. Where a verb runs
//! is the implementation's business:
//!
//! - [`Local`] runs the network-free verbs in this process (`--no-daemon`), through
//!   `crate::service`; it has no job queue, so the job verbs are a usage error.
//! - `crate::client::Client` sends each verb to the daemon over its socket.
//! - The daemon's own implementation (`crate::daemon::served`) answers the socket through
//!   the same service functions and the `Jobs` API.
//!
//! Requests carry their own context (the asking process's root, task, environment), so
//! one façade serves any number of roots. The trait is object-safe: `Box<dyn Api>` picks
//! the implementation at run time.

use crate::check::CheckReport;
use crate::core::catalogue::CatalogueView;
use crate::core::chain::VerifyReport;
use crate::core::cost::SpendView;
use crate::core::records::{Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::ExplainView;
use crate::core::views::status::StatusView;
use crate::core::views::tree::TreeView;
use crate::error::{Error, Result};
use crate::protocol::{
    AdvisorsRequest, CancelRequest, CatalogueRequest, CheckRequest, ConsultRequest, Event,
    EventsRequest, ExplainRequest, Health, HealthRequest, Job, JobList, JobRequest, JobsRequest,
    PlanRequest, RecordRequest, ReviewAnswerRequest, ReviewAnswered, ReviewList, ReviewsRequest,
    SpendRequest, StatusRequest, TaskList, TasksRequest, TreeRequest, VerifyRequest, WaitRequest,
    Waited,
};
use crate::service;
use advisord_adapters::registry::Registry;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;

/// What a verb of the façade returns, later.
pub type Answer<'a, T> = BoxFuture<'a, Result<T>>;

/// A job's events, past ones first (from the position asked), then live ones, ending after
/// [`Event::Done`] (or early, when the daemon stops).
pub type EventStream = BoxStream<'static, Result<Event>>;

/// Every verb, wherever it runs.
pub trait Api: Send + Sync {
    /// The daemon's version, pid, uptime and jobs by state.
    fn health(&self, request: HealthRequest) -> Answer<'_, Health>;
    /// Every advisor, its status and why; capacity per capability.
    fn advisors(&self, request: AdvisorsRequest) -> Answer<'_, AdvisorsView>;
    /// A plan preview (not recorded).
    fn plan(&self, request: PlanRequest) -> Answer<'_, Plan>;
    /// Store one record through the writer.
    fn record(&self, request: RecordRequest) -> Answer<'_, Record>;
    /// The task's derived status.
    fn status(&self, request: StatusRequest) -> Answer<'_, StatusView>;
    /// The tasks of the state directory.
    fn tasks(&self, request: TasksRequest) -> Answer<'_, TaskList>;
    /// Spend per advisor, task and day, and the state of every budget.
    fn spend(&self, request: SpendRequest) -> Answer<'_, SpendView>;
    /// The provenance chain of a record.
    fn explain(&self, request: ExplainRequest) -> Answer<'_, ExplainView>;
    /// The task's records as a tree.
    fn tree(&self, request: TreeRequest) -> Answer<'_, TreeView>;
    /// Provider-independence and CI-credential findings.
    fn check(&self, request: CheckRequest) -> Answer<'_, CheckReport>;
    /// The hash chain of the task (or of every task) walked.
    fn verify(&self, request: VerifyRequest) -> Answer<'_, VerifyReport>;
    /// Queue a consultation job; the job as accepted (journaled).
    fn consult(&self, request: ConsultRequest) -> Answer<'_, Job>;
    /// The jobs kept, oldest first.
    fn jobs(&self, request: JobsRequest) -> Answer<'_, JobList>;
    /// One job as it stands.
    fn job(&self, request: JobRequest) -> Answer<'_, Job>;
    /// Cancel a job: the job once it ended, or as it stands if it is still stopping.
    fn cancel(&self, request: CancelRequest) -> Answer<'_, Job>;
    /// A job's events from a position on, past then live.
    fn events(&self, request: EventsRequest) -> Answer<'_, EventStream>;

    /// The effective catalogue: the asker's catalogue files layered on the embedded one.
    /// They are the asker's own files (their config directory, their project), so every
    /// implementation reads them in this process.
    fn catalogue(&self, request: CatalogueRequest) -> Answer<'_, CatalogueView> {
        Box::pin(blocking(move || {
            service::catalogue(&Registry::builtin(), &request.context)
        }))
    }

    /// The reviews waiting in the daemon's mesh inbox. Only a daemon keeps one.
    fn reviews(&self, request: ReviewsRequest) -> Answer<'_, ReviewList> {
        let _ = request;
        Box::pin(async { Err(needs_daemon("reviews")) })
    }

    /// Answer a review waiting in the daemon's mesh inbox. Only a daemon keeps one.
    fn answer_review(&self, request: ReviewAnswerRequest) -> Answer<'_, ReviewAnswered> {
        let _ = request;
        Box::pin(async { Err(needs_daemon("reviews answer")) })
    }

    /// Wait for a job to end, at most `request.bound`. By default this follows the job's
    /// events to their end; an implementation holding the jobs itself may do better.
    fn wait(&self, request: WaitRequest) -> Answer<'_, Waited> {
        Box::pin(async move {
            let id = request.id.clone();
            let follow = async {
                let mut events = self
                    .events(EventsRequest {
                        id: id.clone(),
                        from: 0,
                    })
                    .await?;
                while let Some(event) = events.next().await {
                    if let Event::Done { result, .. } = event? {
                        return Ok(Some(result));
                    }
                }
                Ok::<_, Error>(None)
            };
            let ended = match request.bound {
                None => follow.await?,
                Some(bound) => match tokio::time::timeout(bound.duration(), follow).await {
                    Ok(ended) => ended?,
                    Err(_) => {
                        let now = self.job(JobRequest { id }).await?;
                        return Ok(Waited::TimedOut(Box::new(now)));
                    }
                },
            };
            match ended {
                Some(job) => Ok(Waited::Ended(job)),
                None => {
                    let now = self.job(JobRequest { id: id.clone() }).await?;
                    if now.state.is_finished() {
                        Ok(Waited::Ended(Box::new(now)))
                    } else {
                        Err(Error::Internal(format!(
                            "the events of job `{id}` ended before the job did (the daemon \
                             is stopping); wait again once it is back"
                        )))
                    }
                }
            }
        })
    }
}

/// Runs the network-free verbs in this process, through `crate::service`, on the blocking
/// pool (they read and write files).
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

/// Run `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("a worker thread failed: {e}")))?
}

/// The error of a job verb asked of [`Local`].
pub fn needs_daemon(verb: &str) -> Error {
    Error::Usage(format!(
        "`{verb}` needs the daemon (consultations run there), so it cannot be used with \
         `--no-daemon`; drop `--no-daemon` (the daemon is started if none answers)"
    ))
}

impl Api for Local {
    fn health(&self, _request: HealthRequest) -> Answer<'_, Health> {
        Box::pin(async { Err(needs_daemon("health")) })
    }

    fn advisors(&self, request: AdvisorsRequest) -> Answer<'_, AdvisorsView> {
        Box::pin(blocking(move || {
            service::advisors(&Registry::builtin(), &request.context)
        }))
    }

    fn plan(&self, request: PlanRequest) -> Answer<'_, Plan> {
        Box::pin(blocking(move || {
            service::plan_preview(
                &Registry::builtin(),
                &request.context,
                request.materiality,
                request.confidence,
                request.capabilities,
            )
        }))
    }

    fn record(&self, request: RecordRequest) -> Answer<'_, Record> {
        Box::pin(blocking(move || {
            service::record_or_judge(
                &Registry::builtin(),
                &request.context,
                &request.record,
                request.dry_run,
            )
        }))
    }

    fn status(&self, request: StatusRequest) -> Answer<'_, StatusView> {
        Box::pin(blocking(move || {
            service::status(&Registry::builtin(), &request.context)
        }))
    }

    fn tasks(&self, request: TasksRequest) -> Answer<'_, TaskList> {
        Box::pin(blocking(move || {
            service::tasks(&Registry::builtin(), &request.context)
        }))
    }

    fn explain(&self, request: ExplainRequest) -> Answer<'_, ExplainView> {
        Box::pin(blocking(move || {
            service::explain(
                &Registry::builtin(),
                &request.context,
                request.id.as_str(),
                request.downstream,
            )
        }))
    }

    fn tree(&self, request: TreeRequest) -> Answer<'_, TreeView> {
        Box::pin(blocking(move || {
            service::tree(
                &Registry::builtin(),
                &request.context,
                request.depth,
                request.show_superseded,
            )
        }))
    }

    fn spend(&self, request: SpendRequest) -> Answer<'_, SpendView> {
        Box::pin(blocking(move || {
            service::spend(&Registry::builtin(), &request.context)
        }))
    }

    fn check(&self, request: CheckRequest) -> Answer<'_, CheckReport> {
        Box::pin(blocking(move || {
            service::check(
                &Registry::builtin(),
                &request.context,
                request.path.as_deref(),
            )
        }))
    }

    fn verify(&self, request: VerifyRequest) -> Answer<'_, VerifyReport> {
        Box::pin(blocking(move || {
            service::verify(&Registry::builtin(), &request.context, request.all)
        }))
    }

    fn consult(&self, request: ConsultRequest) -> Answer<'_, Job> {
        Box::pin(async move {
            Err(Error::Usage(format!(
                "consulting on assessment `{id}` needs the daemon (consultations run there), \
                 so it cannot be done with `--no-daemon`; run `advisor-consult --assessment \
                 {id}` without `--no-daemon` (the daemon is started if none answers)",
                id = request.assessment
            )))
        })
    }

    fn jobs(&self, _request: JobsRequest) -> Answer<'_, JobList> {
        Box::pin(async { Err(needs_daemon("jobs")) })
    }

    fn job(&self, _request: JobRequest) -> Answer<'_, Job> {
        Box::pin(async { Err(needs_daemon("job")) })
    }

    fn cancel(&self, _request: CancelRequest) -> Answer<'_, Job> {
        Box::pin(async { Err(needs_daemon("cancel")) })
    }

    fn events(&self, _request: EventsRequest) -> Answer<'_, EventStream> {
        Box::pin(async { Err(needs_daemon("events")) })
    }

    fn wait(&self, _request: WaitRequest) -> Answer<'_, Waited> {
        Box::pin(async { Err(needs_daemon("wait")) })
    }
}
