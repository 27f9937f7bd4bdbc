//! The daemon's side of the façade: every verb answered in the daemon. Network-free verbs
//! run the same `crate::service` functions as `--no-daemon` (on the blocking pool: they
//! read and write files) after the daemon's own check of the root; job verbs go to the
//! [`Jobs`] API. The socket's handlers (`super::http`) are a mapping onto this.

use crate::check::CheckReport;
use crate::context::require_root;
use crate::core::chain::VerifyReport;
use crate::core::cost::SpendView;
use crate::core::records::{Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::explain::ExplainView;
use crate::core::views::status::StatusView;
use crate::core::views::tree::TreeView;
use crate::daemon::jobs::{blocking, Jobs};
use crate::error::Result;
use crate::facade::{Answer, Api, EventStream};
use crate::protocol::{
    AdvisorsRequest, CancelRequest, CheckRequest, ConsultRequest, EventsRequest, ExplainRequest,
    Health, HealthRequest, Job, JobList, JobRequest, JobsRequest, PlanRequest, RecordRequest,
    RequestContext, ReviewAnswerRequest, ReviewAnswered, ReviewList, ReviewsRequest, SpendRequest,
    StatusRequest, TreeRequest, VerifyRequest, WaitRequest, Waited,
};
use crate::service;
use advisord_adapters::registry::Registry;
use futures::StreamExt;
use std::sync::Arc;

/// Every verb, answered by this daemon.
pub struct Served {
    jobs: Arc<Jobs>,
    listening: Option<crate::protocol::Listening>,
    vouched: crate::daemon::http::reach::Vouched,
}

impl Served {
    /// The verbs over `jobs`; `listening` is the TCP listener, if the daemon has one.
    pub(crate) fn new(jobs: Arc<Jobs>, listening: Option<crate::protocol::Listening>) -> Served {
        Served {
            jobs,
            listening,
            vouched: Default::default(),
        }
    }

    /// The catalogues and state directories the user's own processes named through the
    /// socket: all a request over TCP may name.
    pub fn vouched(&self) -> &crate::daemon::http::reach::Vouched {
        &self.vouched
    }

    /// The daemon's feed (job events, records written, advisors' status).
    pub fn feed(&self) -> &Arc<crate::daemon::feed::Feed> {
        &self.jobs.feed
    }

    /// Cancelled when shutdown begins (event streams end).
    pub fn draining(&self) -> tokio_util::sync::CancellationToken {
        self.jobs.drain.clone()
    }

    /// Note a request: the daemon is not idle (`--idle-exit`).
    pub fn touch(&self) {
        self.jobs.touch();
    }

    /// Whether shutdown has begun (no new job is accepted).
    pub fn shutting_down(&self) -> bool {
        self.jobs.drain.is_cancelled()
    }
}

/// Check the request's root, then run `work` with its context on the blocking pool.
async fn in_root<T: Send + 'static>(
    registry: &Registry,
    context: RequestContext,
    work: impl FnOnce(&Registry, RequestContext) -> Result<T> + Send + 'static,
) -> Result<T> {
    require_root(&context)?;
    // The daemon's own adapters judge the catalogue's settings (passed, never global).
    let registry = registry.clone();
    blocking(move || work(&registry, context)).await
}

impl Api for Served {
    fn health(&self, _request: HealthRequest) -> Answer<'_, Health> {
        Box::pin(async move {
            Ok(Health {
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
                uptime_s: self.jobs.started.elapsed().as_secs(),
                jobs: self.jobs.counts(),
                mesh: self.jobs.mesh.as_ref().map(|m| m.status()),
                listening: self.listening.clone(),
            })
        })
    }

    fn advisors(&self, request: AdvisorsRequest) -> Answer<'_, AdvisorsView> {
        Box::pin(async move {
            let mut context = request.context;
            context.mesh_peers = self.jobs.mesh_peers(false).await;
            let mut view = in_root(&self.jobs.registry, context, |r, c| {
                service::advisors(r, &c)
            })
            .await?;
            if let Some(mesh) = &self.jobs.mesh {
                mesh.annotate(&mut view);
            }
            Ok(view)
        })
    }

    fn plan(&self, request: PlanRequest) -> Answer<'_, Plan> {
        let PlanRequest {
            context,
            materiality,
            confidence,
            capabilities,
        } = request;
        Box::pin(async move {
            let mut context = context;
            // A plan sweeps for mesh peers first.
            context.mesh_peers = self.jobs.mesh_peers(true).await;
            in_root(&self.jobs.registry, context, move |r, c| {
                service::plan_preview(r, &c, materiality, confidence, capabilities)
            })
            .await
        })
    }

    fn record(&self, request: RecordRequest) -> Answer<'_, Record> {
        let input = request.record;
        let dry_run = request.dry_run;
        Box::pin(async move {
            let mut context = request.context;
            if input.get("kind").and_then(|k| k.as_str()) == Some("plan") {
                // A plan sweeps for mesh peers first.
                context.mesh_peers = self.jobs.mesh_peers(true).await;
            }
            let root = context.root.display().to_string();
            let record = in_root(&self.jobs.registry, context, move |r, c| {
                service::record_or_judge(r, &c, &input, dry_run)
            })
            .await?;
            if !dry_run {
                self.jobs
                    .feed
                    .publish(&root, &record.envelope.task, "record", &record);
            }
            Ok(record)
        })
    }

    fn status(&self, request: StatusRequest) -> Answer<'_, StatusView> {
        Box::pin(in_root(&self.jobs.registry, request.context, |r, c| {
            service::status(r, &c)
        }))
    }

    fn tasks(
        &self,
        request: crate::protocol::TasksRequest,
    ) -> Answer<'_, crate::protocol::TaskList> {
        Box::pin(in_root(&self.jobs.registry, request.context, |r, c| {
            service::tasks(r, &c)
        }))
    }

    fn explain(&self, request: ExplainRequest) -> Answer<'_, ExplainView> {
        let (id, downstream) = (request.id, request.downstream);
        Box::pin(in_root(
            &self.jobs.registry,
            request.context,
            move |r, c| service::explain(r, &c, id.as_str(), downstream),
        ))
    }

    fn tree(&self, request: TreeRequest) -> Answer<'_, TreeView> {
        let (depth, show) = (request.depth, request.show_superseded);
        Box::pin(in_root(
            &self.jobs.registry,
            request.context,
            move |r, c| service::tree(r, &c, depth, show),
        ))
    }

    fn spend(&self, request: SpendRequest) -> Answer<'_, SpendView> {
        Box::pin(in_root(&self.jobs.registry, request.context, |r, c| {
            service::spend(r, &c)
        }))
    }

    fn check(&self, request: CheckRequest) -> Answer<'_, CheckReport> {
        let path = request.path;
        Box::pin(in_root(
            &self.jobs.registry,
            request.context,
            move |r, c| service::check(r, &c, path.as_deref()),
        ))
    }

    fn verify(&self, request: VerifyRequest) -> Answer<'_, VerifyReport> {
        let all = request.all;
        Box::pin(in_root(
            &self.jobs.registry,
            request.context,
            move |r, c| service::verify(r, &c, all),
        ))
    }

    fn consult(&self, request: ConsultRequest) -> Answer<'_, Job> {
        Box::pin(self.jobs.submit(request))
    }

    fn jobs(&self, request: JobsRequest) -> Answer<'_, JobList> {
        Box::pin(async move { Ok(self.jobs.list(&request)) })
    }

    fn job(&self, request: JobRequest) -> Answer<'_, Job> {
        Box::pin(async move { self.jobs.get(&request.id) })
    }

    fn cancel(&self, request: CancelRequest) -> Answer<'_, Job> {
        Box::pin(async move { self.jobs.cancel(&request.id).await })
    }

    fn events(&self, request: EventsRequest) -> Answer<'_, EventStream> {
        Box::pin(async move {
            let events = self.jobs.subscribe(&request.id, request.from)?;
            Ok(events.map(Ok).boxed())
        })
    }

    fn reviews(&self, _request: ReviewsRequest) -> Answer<'_, ReviewList> {
        Box::pin(crate::daemon::mesh::reviews::list(self.jobs.mesh.as_ref()))
    }

    fn answer_review(&self, request: ReviewAnswerRequest) -> Answer<'_, ReviewAnswered> {
        Box::pin(async move {
            crate::daemon::mesh::reviews::answer(
                self.jobs.mesh.as_ref(),
                &request.id,
                &request.answer,
            )
            .await
        })
    }

    fn wait(&self, request: WaitRequest) -> Answer<'_, Waited> {
        Box::pin(async move { self.jobs.wait(&request.id, request.bound).await })
    }
}
