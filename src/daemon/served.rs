//! The daemon's side of the façade: every verb answered in the daemon. Network-free verbs
//! run the same `crate::service` functions as `--no-daemon` (on the blocking pool: they
//! read and write files) after the daemon's own check of the root; job verbs go to the
//! [`Jobs`] API. The socket's handlers (`super::http`) are a mapping onto this.

use crate::context::require_root;
use crate::core::records::{Plan, Record};
use crate::core::views::advisors::AdvisorsView;
use crate::core::views::status::StatusView;
use crate::daemon::jobs::Jobs;
use crate::error::Result;
use crate::facade::{Answer, Api, EventStream};
use crate::protocol::{
    AdvisorsRequest, Call, EventsRequest, Health, PlanRequest, RecordRequest, Request, Response,
    StatusRequest, WaitRequest, Waited,
};
use crate::service;
use futures::StreamExt;
use std::sync::Arc;

/// Every verb, answered by this daemon.
pub struct Served {
    jobs: Arc<Jobs>,
    mesh: Option<Arc<crate::daemon::mesh::Mesh>>,
    listening: Option<crate::protocol::Listening>,
    vouched: crate::daemon::http::reach::Vouched,
}

impl Served {
    /// The verbs over `jobs` and `mesh` (if the daemon joined one); `listening` is the
    /// TCP listener, if the daemon has one.
    pub(crate) fn new(
        jobs: Arc<Jobs>,
        mesh: Option<Arc<crate::daemon::mesh::Mesh>>,
        listening: Option<crate::protocol::Listening>,
    ) -> Served {
        Served {
            jobs,
            mesh,
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
        self.jobs.feed()
    }

    /// Cancelled when shutdown begins (event streams end).
    pub fn draining(&self) -> tokio_util::sync::CancellationToken {
        self.jobs.draining()
    }

    /// The adapters' registry the verbs run with.
    pub fn registry(&self) -> &advisord_adapters::registry::Registry {
        self.jobs.registry()
    }

    /// Note a request: the daemon is not idle (`--idle-exit`).
    pub fn touch(&self) {
        self.jobs.touch();
    }

    /// Whether shutdown has begun (no new job is accepted).
    pub fn shutting_down(&self) -> bool {
        self.jobs.shutting_down()
    }

    /// Queue a consultation whose client takes its events on the same connection: the
    /// job as accepted, once durable, and its events ([`Jobs::consult_streamed`]).
    pub(crate) async fn consult_streamed(
        &self,
        request: crate::protocol::ConsultRequest,
    ) -> Result<(
        crate::protocol::Job,
        futures::stream::BoxStream<'static, crate::protocol::Event>,
    )> {
        self.jobs.consult_streamed(request).await
    }
}

impl Served {
    fn health_now(&self) -> Health {
        Health {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_s: self.jobs.uptime().as_secs(),
            jobs: self.jobs.counts(),
            mesh: self.mesh.as_ref().map(|m| m.status()),
            listening: self.listening.clone(),
        }
    }

    async fn advisors_here(&self, request: AdvisorsRequest) -> Result<AdvisorsView> {
        let mut context = request.context;
        context.mesh_peers = self.jobs.mesh_peers(false).await;
        require_root(&context)?;
        let registry = self.jobs.registry().clone();
        let mut view =
            crate::daemon::jobs::blocking(move || service::advisors(&registry, &context)).await?;
        if let Some(mesh) = &self.mesh {
            mesh.annotate(&mut view);
        }
        Ok(view)
    }

    /// `status` with only the page `offset..offset + limit` materialised
    /// ([`service::status_page`]): what the façade's `status` answers, cut as
    /// [`crate::core::views::status::StatusView::page`] cuts it, the root checked first.
    pub(crate) async fn status_page(
        &self,
        request: StatusRequest,
        offset: usize,
        limit: usize,
    ) -> Result<StatusView> {
        require_root(&request.context)?;
        let registry = self.jobs.registry().clone();
        crate::daemon::jobs::blocking(move || {
            service::status_page(&registry, &request.context, Some((offset, limit)))
        })
        .await
    }

    async fn plan_here(&self, request: PlanRequest) -> Result<Plan> {
        let mut request = request;
        // A plan sweeps for mesh peers first.
        request.context.mesh_peers = self.jobs.mesh_peers(true).await;
        self.run_typed(request).await
    }

    async fn record_here(&self, request: RecordRequest) -> Result<Record> {
        let mut request = request;
        if request.record.get("kind").and_then(|k| k.as_str()) == Some("plan") {
            // A plan sweeps for mesh peers first.
            request.context.mesh_peers = self.jobs.mesh_peers(true).await;
        }
        let root = request.context.root.display().to_string();
        let dry_run = request.dry_run;
        let record = self.run_typed(request).await?;
        // A dry run wrote nothing: nothing to tell the feed.
        if !dry_run {
            self.jobs
                .feed()
                .publish(&root, &record.envelope.task, "record", &record);
        }
        Ok(record)
    }

    /// A network-free verb as `--no-daemon` runs it, with the daemon's own adapters
    /// judging the catalogue's settings (passed, never global), its root checked first.
    async fn run(&self, request: Request) -> Result<Response> {
        crate::facade::run(request, self.jobs.registry().clone(), true).await
    }

    /// [`Served::run`] of one typed request.
    async fn run_typed<V: Call>(&self, request: V) -> Result<V::Response> {
        let response = self.run(request.into_request()).await?;
        V::from_response(response).ok_or_else(|| {
            crate::error::Error::Internal(format!(
                "`{:?}` was answered with another verb's response",
                V::NAME
            ))
        })
    }
}

impl Api for Served {
    fn call(&self, request: Request) -> Answer<'_, Response> {
        Box::pin(async move {
            Ok(match request {
                Request::Health(_) => Response::Health(self.health_now()),
                Request::Advisors(r) => Response::Advisors(self.advisors_here(r).await?),
                Request::Plan(r) => Response::Plan(self.plan_here(r).await?),
                Request::Record(r) => Response::Record(self.record_here(r).await?),
                Request::Consult(r) => Response::Consult(self.jobs.consult(r).await?),
                Request::Jobs(r) => Response::Jobs(self.jobs.list(&r)),
                Request::Job(r) => Response::Job(self.jobs.get(&r.id)?),
                Request::Cancel(r) => Response::Cancel(self.jobs.cancel(&r.id).await?),
                Request::Reviews(_) => {
                    Response::Reviews(crate::daemon::mesh::reviews::list(self.mesh.as_ref()).await?)
                }
                Request::ReviewAnswer(r) => Response::ReviewAnswer(
                    crate::daemon::mesh::reviews::answer(self.mesh.as_ref(), &r.id, &r.answer)
                        .await?,
                ),
                // Every other verb is network-free: the daemon runs it as `--no-daemon` does.
                network_free => self.run(network_free).await?,
            })
        })
    }

    fn events(&self, request: EventsRequest) -> Answer<'_, EventStream> {
        Box::pin(async move {
            let events = self.jobs.subscribe(&request.id, request.from)?;
            Ok(events.map(Ok).boxed())
        })
    }

    fn wait(&self, request: WaitRequest) -> Answer<'_, Waited> {
        Box::pin(async move { self.jobs.wait(&request.id, request.bound).await })
    }
}
