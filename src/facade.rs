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

use crate::context::require_root;
use crate::core::catalogue::CatalogueView;
use crate::error::{Error, Result};
use crate::protocol::{verb_table, Call};
use crate::protocol::{
    AdvisorsRequest, CancelRequest, CatalogueRequest, CheckRequest, ConsultRequest, Event,
    EventsRequest, ExplainRequest, HealthRequest, JobRequest, JobsRequest, PlanRequest,
    RecordRequest, Request, RequestContext, Response, ReviewAnswerRequest, ReviewsRequest,
    SpendRequest, StatusRequest, TasksRequest, TreeRequest, VerifyRequest, WaitRequest, Waited,
};
use crate::service;
use advisord_adapters::registry::Registry;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

/// What a verb of the façade returns, later.
pub type Answer<'a, T> = BoxFuture<'a, Result<T>>;

/// A job's events, past ones first (from the position asked), then live ones, ending after
/// [`Event::Done`] (or early, when the daemon stops).
pub type EventStream = BoxStream<'static, Result<Event>>;

/// The façade's typed methods, one per verb of the table, each [`ask`] of
/// [`Api::call`].
macro_rules! facade_verbs {
    (methods $(
        $(#[doc = $doc:literal])*
        $name:ident = $http:literal $path:literal, $request:ty
            $(=> $response:ty, fn $method:ident, ok: $ok:literal $(stopping $stopping:literal)?,
                consults: $consults:literal, paged: $paged:tt)?,
            summary: $summary:literal;
    )*) => {
        $($(
            #[doc = $summary]
            fn $method(&self, request: $request) -> Answer<'_, $response> {
                ask(self, request)
            }
        )?)*
    };
    (run $(
        $(#[doc = $doc:literal])*
        $name:ident = $http:literal $path:literal, $request:ty
            $(=> $response:ty, fn $method:ident, ok: $ok:literal $(stopping $stopping:literal)?,
                consults: $consults:literal, paged: $paged:tt)?,
            summary: $summary:literal;
    )*) => {
        /// `request` run in this process by its [`Run`] over `registry`, on the blocking
        /// pool (the verbs read and write files); with `check_root` (the daemon), a
        /// request's root is checked first.
        pub async fn run(request: Request, registry: Registry, check_root: bool) -> Result<Response> {
            match request {
                $($(Request::$name(request) => {
                    if check_root {
                        if let Some(context) = Run::context(&request) {
                            require_root(context)?;
                        }
                    }
                    blocking(move || Run::run(request, &registry))
                        .await
                        .map(|r: $response| Response::$name(r))
                })?)*
            }
        }
    };
}

verb_table!(facade_verbs run);

/// `request` asked of `api` through its one [`Api::call`], its typed answer back.
pub fn ask<'a, A: Api + ?Sized, V: Call>(api: &'a A, request: V) -> Answer<'a, V::Response> {
    let answer = api.call(request.into_request());
    Box::pin(async move {
        V::from_response(answer.await?).ok_or_else(|| {
            Error::Internal(format!(
                "`{:?}` was answered with another verb's response",
                V::NAME
            ))
        })
    })
}

/// What a verb does in this process: [`Local`] runs every verb this way, and the daemon
/// its network-free verbs (after checking the root). A new network-free verb needs only
/// this and its declaration in the table; the client and the daemon's HTTP mapping carry
/// it from the table.
pub trait Run: Call {
    /// The context whose root the daemon checks before running it (none: no context).
    fn context(&self) -> Option<&RequestContext> {
        None
    }
    /// Run it over `registry` (blocking: it reads and writes files).
    fn run(self, registry: &Registry) -> Result<Self::Response>;
}

/// Every verb, wherever it runs: one call per request ([`Api::call`]), the typed methods
/// made from the table on top of it, and the event stream.
pub trait Api: Send + Sync {
    /// Any verb with one answer; the typed methods (`status`, `consult`, ...) ask this.
    fn call(&self, request: Request) -> Answer<'_, Response>;

    /// A job's events from a position on, past then live.
    fn events(&self, request: EventsRequest) -> Answer<'_, EventStream>;

    verb_table!(facade_verbs methods);

    /// Queue a consultation and follow it: the job as accepted and, when the
    /// implementation gets them with the acceptance (the daemon's streamed reply, see
    /// docs/DAEMON.md), the job's events from its first; `None` means follow them with
    /// [`Api::events`].
    fn consult_following(
        &self,
        request: ConsultRequest,
    ) -> Answer<'_, (crate::protocol::Job, Option<EventStream>)> {
        Box::pin(async move { Ok((self.consult(request).await?, None)) })
    }

    /// The effective catalogue: the asker's catalogue files layered on the embedded one.
    /// They are the asker's own files (their config directory, their project), so every
    /// implementation reads them in this process.
    fn catalogue(&self, request: CatalogueRequest) -> Answer<'_, CatalogueView> {
        Box::pin(blocking(move || {
            service::catalogue(&Registry::builtin(), &request.context)
        }))
    }

    /// Wait for a job to end, at most `request.bound`. By default this follows the job's
    /// events to their end; an implementation holding the jobs itself may do better.
    fn wait(&self, request: WaitRequest) -> Answer<'_, Waited> {
        Box::pin(async move {
            let id = request.id.clone();
            let deadline = request
                .bound
                .map(|bound| bound.deadline_from(tokio::time::Instant::now()));
            let events = self
                .events(EventsRequest {
                    id: id.clone(),
                    from: 0,
                })
                .await?;
            let mut follower = crate::follow::Follower::new(events);
            match follower.until(deadline, |_| {}).await? {
                crate::follow::Followed::Ended(report) => Ok(Waited::Ended(Box::new(report.job))),
                crate::follow::Followed::DeadlinePassed => {
                    let now = self.job(JobRequest { id }).await?;
                    Ok(Waited::TimedOut(Box::new(now)))
                }
                crate::follow::Followed::StreamEnded => {
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
    fn call(&self, request: Request) -> Answer<'_, Response> {
        Box::pin(run(request, Registry::builtin(), false))
    }

    fn events(&self, _request: EventsRequest) -> Answer<'_, EventStream> {
        Box::pin(async { Err(needs_daemon("events")) })
    }

    fn wait(&self, _request: WaitRequest) -> Answer<'_, Waited> {
        Box::pin(async { Err(needs_daemon("wait")) })
    }
}

/// A request with a context: the daemon checks its root first.
macro_rules! in_context {
    () => {
        fn context(&self) -> Option<&RequestContext> {
            Some(&self.context)
        }
    };
}

impl Run for HealthRequest {
    fn run(self, _registry: &Registry) -> Result<crate::protocol::Health> {
        Err(needs_daemon("health"))
    }
}

impl Run for AdvisorsRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::views::advisors::AdvisorsView> {
        service::advisors(registry, &self.context)
    }
}

impl Run for PlanRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::records::Plan> {
        service::plan_preview(
            registry,
            &self.context,
            self.materiality,
            self.confidence,
            self.capabilities,
        )
    }
}

impl Run for RecordRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::records::Record> {
        service::record_or_judge(registry, &self.context, &self.record, self.dry_run)
    }
}

impl Run for StatusRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::views::status::StatusView> {
        service::status(registry, &self.context)
    }
}

impl Run for TasksRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::protocol::TaskList> {
        service::tasks(registry, &self.context)
    }
}

impl Run for SpendRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::cost::SpendView> {
        service::spend(registry, &self.context)
    }
}

impl Run for ExplainRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::views::explain::ExplainView> {
        service::explain(registry, &self.context, self.id.as_str(), self.downstream)
    }
}

impl Run for TreeRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::views::tree::TreeView> {
        service::tree(registry, &self.context, self.depth, self.show_superseded)
    }
}

impl Run for CheckRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::check::CheckReport> {
        service::check(registry, &self.context, self.path.as_deref())
    }
}

impl Run for VerifyRequest {
    in_context!();
    fn run(self, registry: &Registry) -> Result<crate::core::chain::VerifyReport> {
        service::verify(registry, &self.context, self.all)
    }
}

impl Run for ConsultRequest {
    fn run(self, _registry: &Registry) -> Result<crate::protocol::Job> {
        Err(Error::Usage(format!(
            "consulting on assessment `{id}` needs the daemon (consultations run there), \
             so it cannot be done with `--no-daemon`; run `advisor-consult --assessment \
             {id}` without `--no-daemon` (the daemon is started if none answers)",
            id = self.assessment
        )))
    }
}

/// The verbs only a daemon answers (it keeps the jobs and the mesh inbox).
macro_rules! daemon_only {
    ($($request:ty => $response:ty, $verb:literal;)*) => {$(
        impl Run for $request {
            fn run(self, _registry: &Registry) -> Result<$response> {
                Err(needs_daemon($verb))
            }
        }
    )*};
}

daemon_only! {
    JobsRequest => crate::protocol::JobList, "jobs";
    JobRequest => crate::protocol::Job, "job";
    CancelRequest => crate::protocol::Job, "cancel";
    ReviewsRequest => crate::protocol::ReviewList, "reviews";
    ReviewAnswerRequest => crate::protocol::ReviewAnswered, "reviews answer";
}
