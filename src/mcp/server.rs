//! The MCP handler: each tool call and each resource read is one verb of the façade.
//!
//! A consultation a tool waits for is followed on the job's event stream: every event
//! becomes a progress notification (when the host sent a progress token), and the wait
//! ends at the server's cap with the outcomes recorded so far while the job goes on. A
//! `notifications/cancelled` for a `consult` call cancels its job, as Ctrl-C does; a host
//! that goes away mid-call cancels nothing (the daemon runs the job to its end and
//! records it).

use super::follow::{follow, Progress};
use super::resources;
use super::tools::{self, ArgError, Args};
use super::Config;
use crate::context::Locations;
use crate::error::Error;
use crate::facade::Api;
use crate::protocol::{
    AdvisorsRequest, CancelRequest, ConsultRequest, ExplainRequest, JobId, PlanRequest,
    RecordRequest, RequestContext, StatusRequest, MAX_BODY_BYTES,
};
use crate::render::{self, Format, Render};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, RequestId, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext as McpContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// Makes sure the daemon answers (starting it if allowed) before a verb is sent to it;
/// blocking, so it runs on the blocking pool.
pub type Ensure = Arc<dyn Fn() -> Result<(), Error> + Send + Sync>;

/// What the server knows of a `consult` call in flight.
#[derive(Debug, Clone)]
enum Call {
    /// Its job, once queued.
    Job(JobId),
    /// The host cancelled it before its job was queued: cancel the job once it is.
    Cancelled,
}

/// The MCP server: the façade, the server's own context, and the calls in flight.
#[derive(Clone)]
pub struct Server {
    api: Arc<dyn Api>,
    ensure: Option<Ensure>,
    ready: Arc<tokio::sync::OnceCell<()>>,
    locations: Locations,
    config: Config,
    calls: Arc<Mutex<HashMap<RequestId, Call>>>,
    /// Per job, how many of its events the host has been sent as progress notifications
    /// (a later `job` call sends only the ones after them).
    notified: Arc<Mutex<HashMap<JobId, usize>>>,
    /// Cancellations under way, waited for before the process exits.
    pub(super) cancelling: TaskTracker,
    /// Who asks: the host as it named itself in `initialize`, once it has.
    asker: Arc<Mutex<Option<crate::core::policy::Asker>>>,
}

/// A tool's failure: the text shown to the model (the message, with the reason code of a
/// refusal) and the same as JSON (`{"error": CODE, "message": ...}`, or `{"refused": true,
/// "reason": CODE, "message": ...}`).
///
/// An error result carries no `structuredContent`: a tool's `outputSchema` describes its
/// answer, and SDKs that check every result against it (the TypeScript SDK, hence Gemini
/// CLI and the MCP Inspector) would throw the error away before the model saw it.
pub(super) struct Failure {
    message: String,
    structured: Value,
}

impl Failure {
    /// The result the host shows the model: the message, then the JSON.
    fn into_result(self) -> CallToolResult {
        CallToolResult::error(vec![
            ContentBlock::text(self.message),
            ContentBlock::text(self.structured.to_string()),
        ])
    }
}

impl From<ArgError> for Failure {
    fn from(message: ArgError) -> Failure {
        Failure {
            structured: serde_json::json!({"error": "invalid_argument", "message": message}),
            message,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let structured = match e.refusal() {
            Some((reason, message)) => {
                serde_json::json!({"refused": true, "reason": reason, "message": message})
            }
            None => serde_json::json!({"error": e.code(), "message": e.message()}),
        };
        let message = match e.refusal() {
            Some((reason, message)) => format!("refused ({reason}): {message}"),
            None => format!("{} ({})", e.message(), e.code()),
        };
        Failure {
            message,
            structured,
        }
    }
}

type Answer = Result<(Value, String), Failure>;

/// The typed shape and the text mirror of a view.
fn answer(view: &impl Render) -> Answer {
    let value = serde_json::to_value(view).map_err(|e| Failure {
        message: format!("the answer could not be written as json: {e}"),
        structured: serde_json::json!({"error": "internal", "message": e.to_string()}),
    })?;
    let text = render::render(view, Format::Json);
    Ok((value, text))
}

/// A record request the daemon can take: at most [`MAX_BODY_BYTES`] as JSON (a larger
/// one would be cut off by the daemon before the writer saw it).
fn within_limit(request: &RecordRequest) -> Result<(), Failure> {
    let size = serde_json::to_vec(request).map_or(usize::MAX, |bytes| bytes.len());
    if size <= MAX_BODY_BYTES {
        return Ok(());
    }
    Err(Failure {
        message: format!(
            "the record is too large: {size} bytes as JSON, over the limit of {MAX_BODY_BYTES} \
             bytes (1 MiB) for one record; cite large evidence by its `ref` (a file, a \
             command, a URL) instead of inlining it"
        ),
        structured: serde_json::json!({"error": "record_too_large", "message": format!(
            "{size} bytes, over the limit of {MAX_BODY_BYTES} bytes for one record"
        ), "limit": MAX_BODY_BYTES}),
    })
}

impl Server {
    /// A server over `api`, judging its context from `locations` and the environment.
    pub fn new(
        api: Arc<dyn Api>,
        ensure: Option<Ensure>,
        locations: Locations,
        config: Config,
    ) -> Server {
        Server {
            api,
            ensure,
            ready: Arc::new(tokio::sync::OnceCell::new()),
            locations,
            config,
            calls: Arc::new(Mutex::new(HashMap::new())),
            notified: Arc::new(Mutex::new(HashMap::new())),
            cancelling: TaskTracker::new(),
            asker: Arc::new(Mutex::new(None)),
        }
    }

    /// Make sure the daemon answers (once; a failure is retried on the next call).
    pub async fn ready(&self) -> Result<(), Error> {
        let Some(ensure) = self.ensure.clone() else {
            return Ok(());
        };
        self.ready
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || ensure())
                    .await
                    .map_err(|e| Error::Internal(format!("a worker thread failed: {e}")))?
            })
            .await
            .map(|_| ())
    }

    /// The context of a call: the server's, or the root and task it names.
    fn context(&self, root: Option<String>, task: Option<String>) -> Result<RequestContext, Error> {
        let mut locations = self.locations.clone();
        if let Some(root) = root {
            let root = PathBuf::from(root);
            if !root.is_absolute() {
                return Err(Error::InvalidRoot(format!(
                    "`root` `{}` is relative; give an absolute path (the server runs in \
                     its own directory)",
                    root.display()
                )));
            }
            locations.root = Some(root);
            // The state directory follows the root named.
            locations.state_dir = None;
        }
        if task.is_some() {
            locations.task = task;
        }
        let mut context = RequestContext::from_process(&locations)?;
        context.asker = self.asker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(context)
    }

    /// Note who asks, from the host's `initialize` (`clientInfo.name`), the first time a
    /// request can tell.
    fn note_asker(&self, mcp: &McpContext<RoleServer>) {
        let mut asker = self.asker.lock().unwrap_or_else(|e| e.into_inner());
        if asker.is_none() {
            if let Some(info) = mcp.peer.peer_info() {
                *asker = super::asker::asker(&info.client_info.name);
            }
        }
    }

    fn located(&self, args: &Args) -> Result<RequestContext, Failure> {
        Ok(self.context(args.string("root")?, args.string("task")?)?)
    }

    async fn call(&self, name: &str, args: Args, mcp: &McpContext<RoleServer>) -> Answer {
        self.ready().await?;
        match name {
            "advisors" => {
                let context = self.located(&args)?;
                answer(&self.api.advisors(AdvisorsRequest { context }).await?)
            }
            "plan" => {
                let request = PlanRequest {
                    materiality: args.materiality()?,
                    confidence: args.confidence()?,
                    capabilities: args.strings("capabilities")?,
                    context: self.located(&args)?,
                };
                answer(&self.api.plan(request).await?)
            }
            "record" => {
                let Some(record) = args.object("record")? else {
                    return Err(Failure::from(
                        "`record` needs `record`: one JSON object, `kind` plus your fields, \
                         e.g. {\"kind\": \"assessment\", \"subject\": \"...\", ...}"
                            .to_string(),
                    ));
                };
                let request = RecordRequest {
                    context: self.located(&args)?,
                    record: Value::Object(record),
                    dry_run: false,
                };
                within_limit(&request)?;
                answer(&self.api.record(request).await?)
            }
            "status" => {
                let context = self.located(&args)?;
                answer(&self.api.status(StatusRequest { context }).await?)
            }
            "explain" => {
                let request = ExplainRequest {
                    id: args.record_id()?,
                    context: self.located(&args)?,
                    downstream: false,
                };
                answer(&self.api.explain(request).await?)
            }
            "cancel" => {
                let id = args.job()?;
                let job = self.api.cancel(CancelRequest { id }).await?;
                answer(&crate::render::job::JobView(job))
            }
            "job" => {
                let id = args.job()?;
                let wait = args.boolean("wait")?.unwrap_or(false);
                let sent = self.notified_of(&id);
                let mut progress = Progress::of(mcp).map(|p| p.skipping(sent));
                let report = self.follow(&id, wait, &mut progress, mcp).await?;
                answer(&report)
            }
            "consult" => self.consult(args, mcp).await,
            _ => unreachable!("the tool names were checked before the call"),
        }
    }

    async fn consult(&self, args: Args, mcp: &McpContext<RoleServer>) -> Answer {
        let context = self.located(&args)?;
        let given = args.string("assessment")?;
        let inline = args.object("record")?;
        let wait = args.boolean("wait")?.unwrap_or(true);
        let question = args.string("question")?;
        let prior_opinion = args.string("prior_opinion")?;
        let timeout = args.timeout()?;
        let assessment = match (given, inline) {
            (Some(id), None) => id.into(),
            (None, Some(mut fields)) => {
                match fields.get("kind") {
                    None => {
                        fields.insert("kind".into(), Value::from("assessment"));
                    }
                    Some(Value::String(kind)) if kind == "assessment" => {}
                    Some(other) => {
                        return Err(Failure::from(format!(
                            "`record` of `consult` is an assessment; its `kind` is \
                             `assessment` or absent, not {other}"
                        )))
                    }
                }
                let request = RecordRequest {
                    context: context.clone(),
                    record: Value::Object(fields),
                    dry_run: false,
                };
                within_limit(&request)?;
                self.api.record(request).await?.id().into()
            }
            (Some(_), Some(_)) => {
                return Err(Failure::from(
                    "`consult` takes `assessment` (an id) or `record` (an assessment to \
                     record first), not both"
                        .to_string(),
                ))
            }
            (None, None) => {
                return Err(Failure::from(
                    "`consult` needs `assessment` (an assessment id) or `record` (an \
                     assessment to record first: subject, materiality, hypothesis, \
                     evidence...)"
                        .to_string(),
                ))
            }
        };
        let request = ConsultRequest {
            context,
            assessment,
            question,
            prior_opinion,
            timeout,
        };
        let job = self.api.consult(request).await?;
        // A cancellation that came while the job was being queued cancels it now.
        let cancelled_early = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            matches!(
                calls.insert(mcp.id.clone(), Call::Job(job.id.clone())),
                Some(Call::Cancelled)
            )
        };
        if cancelled_early {
            self.cancel_job(job.id.clone());
        }
        let mut progress = Progress::of(mcp);
        if let Some(p) = progress.as_mut() {
            p.say(format!("job {} queued", job.id)).await;
        }
        let report = self.follow(&job.id, wait, &mut progress, mcp).await;
        // A call cancelled by the host is `on_cancelled`'s to finish (it may run after
        // this): it finds the job here and cancels it.
        if !mcp.ct.is_cancelled() {
            self.calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&mcp.id);
        }
        answer(&report?)
    }

    /// The job with its outcomes: at once, or once it ends or the cap passes, sending a
    /// progress notification for each event when the host asked for them.
    async fn follow(
        &self,
        id: &JobId,
        wait: bool,
        progress: &mut Option<Progress>,
        mcp: &McpContext<RoleServer>,
    ) -> Result<crate::render::job::JobReport, Error> {
        let deadline = Instant::now()
            + if wait {
                self.config.wait_cap
            } else {
                std::time::Duration::ZERO
            };
        let report = tokio::select! {
            report = follow(self.api.as_ref(), id, deadline, progress) => report,
            // The host cancelled the call or went away: stop waiting. Whether the job is
            // cancelled is `on_cancelled`'s business, not a disconnection's.
            () = mcp.ct.cancelled() => Err(Error::Internal(format!(
                "the call was cancelled; job `{id}` is followed by `job`"
            ))),
        };
        if let Some(sent) = progress.as_ref().map(Progress::events) {
            let mut notified = self.notified.lock().unwrap_or_else(|e| e.into_inner());
            let known = notified.entry(id.clone()).or_default();
            *known = (*known).max(sent);
        }
        report
    }

    /// How many of job `id`'s events the host has been sent.
    fn notified_of(&self, id: &JobId) -> usize {
        self.notified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .copied()
            .unwrap_or(0)
    }

    /// Cancel `job` in the background (tracked, so the process waits for it to be sent).
    fn cancel_job(&self, job: JobId) {
        let api = Arc::clone(&self.api);
        self.cancelling.spawn(async move {
            match api.cancel(CancelRequest { id: job.clone() }).await {
                Ok(job) => tracing::info!(job = %job.id, state = job.state.as_str(), "cancelled at the host's request"),
                Err(e) => tracing::warn!(%job, "the job could not be cancelled: {e}"),
            }
        });
    }

    async fn read(&self, uri: &str) -> Result<Value, McpError> {
        let resource =
            resources::parse(uri).map_err(|message| McpError::resource_not_found(message, None))?;
        self.ready().await.map_err(internal)?;
        let context = |task: Option<String>| self.context(None, task).map_err(internal);
        let value = match resource {
            resources::Resource::Advisors => json(
                self.api
                    .advisors(AdvisorsRequest {
                        context: context(None)?,
                    })
                    .await,
            )?,
            resources::Resource::Status(task) => json(
                self.api
                    .status(StatusRequest {
                        context: context(task)?,
                    })
                    .await,
            )?,
            resources::Resource::Record(id) => json(
                self.api
                    .explain(ExplainRequest {
                        context: context(None)?,
                        id: id.into(),
                        downstream: false,
                    })
                    .await,
            )?,
            resources::Resource::Job(id) => {
                let report = follow(self.api.as_ref(), &id.into(), Instant::now(), &mut None).await;
                json(report)?
            }
        };
        Ok(value)
    }
}

/// A verb's error as a JSON-RPC error: an unknown record or job is the caller's
/// resource-not-found (`-32002`), every other mistake of the caller's (a 4xx of the
/// daemon's) invalid params (`-32602`), and only the daemon's own failures internal
/// (`-32603`).
fn internal(e: Error) -> McpError {
    let data = Some(serde_json::json!({"error": e.code()}));
    let message = format!("{} ({})", e.message(), e.code());
    if matches!(
        e.code(),
        crate::protocol::codes::NOT_FOUND | crate::protocol::codes::UNKNOWN_JOB
    ) {
        return McpError::resource_not_found(message, data);
    }
    match e.http_status() {
        400..=499 => McpError::invalid_params(message, data),
        _ => McpError::internal_error(message, data),
    }
}

fn json<T: serde::Serialize>(result: Result<T, Error>) -> Result<Value, McpError> {
    let value = result.map_err(internal)?;
    serde_json::to_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("advisord", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Record an assessment of a decision you doubt, then `consult`: independent \
             advisors answer at once; a disagreement is settled by an experiment, never by \
             a count. `consult` waits up to the server's cap; if the job is not done, call \
             `job` with wait.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: McpContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: McpContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(name) = tools::NAMES.into_iter().find(|n| *n == request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "no tool `{}`; the tools are {}",
                    request.name,
                    tools::NAMES.join(", ")
                ),
                None,
            ));
        };
        self.note_asker(&context);
        let result = match Args::new(name, request.arguments) {
            Ok(args) => self.call(name, args, &context).await,
            Err(message) => Err(Failure::from(message)),
        };
        Ok(match result {
            Ok((structured, text)) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(structured);
                result
            }
            Err(failure) => failure.into_result(),
        }
        .into())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let Some(request) = notification.request_id else {
            return;
        };
        let job = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            match calls.remove(&request) {
                Some(Call::Job(job)) => Some(job),
                Some(Call::Cancelled) | None => {
                    // Not queued yet (or not a `consult`): cancel its job once queued.
                    calls.insert(request, Call::Cancelled);
                    None
                }
            }
        };
        if let Some(job) = job {
            self.cancel_job(job);
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: McpContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(resources::list()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: McpContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: McpContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.note_asker(&context);
        let value = self.read(&request.uri).await?;
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        let contents = ResourceContents::text(text, request.uri).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
